#!/usr/bin/env python3
"""Example cases for the GPU kit (scripts/gpu-check prepare).

For every docs/examples program: a few configurations the constraints allow
(the first, a middle and the last rank combination of `eintup shapes`, plus
any with a zero-sized or rank-0 eintup), each in f32 and f64. Per case a
bundle for sm_90 (`eintup build`) and the interpreter's arrays
(`eintup run --out`: inputs and expected outputs), and one line in
cases.json. The expected values come from the reference interpreter, never
from the code under test.
"""
import argparse
import json
import pathlib
import shutil
import subprocess
import sys

ROOT = pathlib.Path(__file__).resolve().parents[2]
QUICK_EXAMPLES = ["gather_nd", "conv_valid"]


def bind_args(cfg):
    out = []
    for name, dims in cfg.items():
        out += ["--bind", f"{name}=[{','.join(str(d) for d in dims)}]"]
    return out


def pick_configs(configs):
    """A spread of rank combinations, the degenerate ones included."""
    if not configs:
        return []
    picks = [configs[0], configs[len(configs) // 2], configs[-1]]
    picks += [c for c in configs if any(0 in d for d in c.values())][:1]
    picks += [c for c in configs if any(len(d) == 0 for d in c.values())][:1]
    seen, out = set(), []
    for c in picks:
        key = json.dumps(c, sort_keys=True)
        if key not in seen:
            seen.add(key)
            out.append(c)
    return out


def run(cmd):
    return subprocess.run(cmd, capture_output=True, text=True)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--eintup", required=True)
    ap.add_argument("--out", required=True)
    ap.add_argument("--quick", action="store_true")
    a = ap.parse_args()
    out = pathlib.Path(a.out)
    shutil.rmtree(out, ignore_errors=True)
    out.mkdir(parents=True)
    examples = sorted((ROOT / "docs/examples").glob("*.et"))
    if a.quick:
        examples = [e for e in examples if e.stem in QUICK_EXAMPLES]
    cases = []
    for ex in examples:
        r = run([a.eintup, "shapes", str(ex), "--json"])
        if r.returncode != 0:
            sys.exit(f"prepare: eintup shapes {ex.name} failed:\n{r.stderr}")
        for k, cfg in enumerate(pick_configs(json.loads(r.stdout))):
            for fl in ("f32", "f64"):
                name = f"{ex.stem}-{k}-{fl}"
                d = out / name
                b = run([a.eintup, "build", str(ex), *bind_args(cfg), "--float", fl, "--target", "sm_90", "-o", str(d / "bundle.etb")])
                if b.returncode != 0:
                    sys.exit(f"prepare: eintup build {name} failed:\n{b.stderr}")
                e = run([a.eintup, "run", "--backend", "interp", str(ex), *bind_args(cfg), "--float", fl, "--out", str(d / "expected")])
                if e.returncode != 0:
                    sys.exit(f"prepare: eintup run {name} failed:\n{e.stderr}")
                m = json.loads((d / "bundle.etb/manifest.json").read_text())
                roles = {buf["name"]: buf["role"] for buf in m["buffers"]}
                # Only inputs and outputs are compared; temporaries are dropped.
                for f in (d / "expected").glob("*.npy"):
                    if roles.get(f.stem) not in ("input", "output"):
                        f.unlink()
                cases.append({
                    "name": name,
                    "example": ex.name,
                    "eintups": cfg,
                    "float": fl,
                    "inputs": [n for n, r_ in roles.items() if r_ == "input"],
                    "generated": [g["buffer"] for g in m.get("generate", [])],
                    "outputs": [n for n, r_ in roles.items() if r_ == "output"],
                })
        print(f"prepare: {ex.name}: {sum(1 for c in cases if c['example'] == ex.name)} cases", file=sys.stderr)
    (out / "cases.json").write_text(json.dumps(cases, indent=1) + "\n")


if __name__ == "__main__":
    main()
