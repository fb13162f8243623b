"""Writes the inputs of import.test: a table and a tuning step's results."""
import json
import pathlib
import sys

t = pathlib.Path(sys.argv[1])
rt = {"dtype": "f32", "chain": [64, 64], "reduce": [8], "unroll": [], "loads": 2}
bt8 = dict(rt, chain=[8, 8], unroll=[8, 8, 8, 8])
bt4 = dict(rt, chain=[16, 16], unroll=[4, 4, 4, 4])
other = dict(rt, chain=[512, 512])
entry = lambda shape, choice, op, ms: {"pass": "register-tiles", "shape": shape, "choice": choice, "op": op, "ms": ms, "others": {}}
table = {"format": 1, "sm": 90, "device": "old", "measured": "old",
         "entries": [entry(rt, "1x1@0", "replaced", 7.0), entry(other, "2x2@0", "kept", 9.0)]}
(t / "repo/compiler/tuning/sm_90.json").write_text(json.dumps(table))
v = lambda r, b, ms, shape: dict({"choices": {"register-tiles": r, "block-tiles": b},
                                  "shapes": {"register-tiles": rt, "block-tiles": shape}}, **ms)


def arranged(variant, a, shape):
    """`variant` with `arrange-threads` forced to `a` (the tuner arranges
    the heuristic's tiles only)."""
    out = json.loads(json.dumps(variant))
    out["choices"]["arrange-threads"] = a
    out["shapes"]["arrange-threads"] = shape
    return out


at8 = dict(bt8, unroll=[8, 8, 8, 8, 4, 4])
rt2 = dict(rt, chain=[128, 128])
bt2 = dict(rt2, chain=[8, 8], unroll=[8, 8, 8, 8])
at2 = dict(bt2, unroll=[8, 8, 8, 8, 4, 4])
v2 = lambda r, b, ms: dict({"choices": {"register-tiles": r, "block-tiles": b},
                            "shapes": {"register-tiles": rt2, "block-tiles": bt2}}, **ms)
rt3 = {"dtype": "f32", "chain": [2, 32, 32, 32], "reduce": [3, 3, 32], "unroll": [], "loads": 2}
bt3 = dict(rt3, chain=[2, 8, 8, 8], unroll=[4, 4])
v3 = lambda r, b, ms, shape: dict({"choices": {"register-tiles": r, "block-tiles": b},
                                   "shapes": {"register-tiles": rt3, "block-tiles": shape}}, **ms)
results = {"sm": 90, "device": "cuda", "device_name": "Fake GPU", "commit": "abc", "groups": [
    {"op": "mm", "size": "batch=[] row=[64] col=[64]", "float": "f32", "variants": [
        arranged(v("8x8@0", "16x16k16", {"ms": 2.0}, bt8), "4x8", at8),
        arranged(v("8x8@0", "16x16k16", {"ms": 2.2}, bt8), "8x4", at8),
        v("8x8@0", "16x16k8", {"ms": 1.5}, bt8),
        v("4x4@0", "16x16k16", {"ms": 3.0}, bt4),
        v("4x4@0", "16x16k8", {"error": "MISMATCH with the heuristic variant"}, bt4),
    ]},
    # An arrangement of the heuristic's tiles wins: the three passes' entries.
    {"op": "mm", "size": "batch=[] row=[128] col=[128]", "float": "f32", "variants": [
        arranged(v2("8x8@0", "16x16k16", {"ms": 2.0}), "4x8", at2),
        arranged(v2("8x8@0", "16x16k16", {"ms": 1.8}), "8x4", at2),
        arranged(v2("8x8@0", "16x16k16", {"ms": 2.5}), "none", at2),
        v2("8x8@0", "16x16k8", {"ms": 1.9}),
    ]},
    # A convolution whose block with a halo (`h`, docs/tuning.md) won: the
    # choice string is recorded as the tuner named it, the same block
    # without a halo among the others.
    {"op": "conv", "size": "batch=[2] ipos=[34,34] ichan=[32]", "float": "f32", "variants": [
        v3("2x2@2", "none", {"ms": 3.0}, rt3),
        v3("4x4@0", "2x2x16k16h", {"ms": 1.2}, bt3),
        v3("4x4@0", "2x2x16k16", {"ms": 1.4}, bt3),
        v3("4x4@0", "2x2x16k8h", {"ms": 1.3}, bt3),
    ]},
]}
(t / "out/tuning.json").write_text(json.dumps(results))
