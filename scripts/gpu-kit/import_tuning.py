#!/usr/bin/env python3
"""`scripts/gpu-check import OUT`: merges the tuning step's measurements
(OUT/tuning.json, from `KIT/run OUT --tune` on a GPU) into the tuning
table the compiler reads, compiler/tuning/sm_XX.json (docs/tuning.md).

For each op and size, the fastest variant that ran and agreed with the
heuristic's output wins; for each tuned pass it becomes one entry: the
kernel shape that pass saw, the winner's choice for it, the winner's time,
and, as `others`, the best time of every other choice of that pass (for
`block-tiles`, among the variants with the winner's register tile, which
saw the same shape; for `arrange-threads`, among the arrangements of the
heuristic's tiles, the only variants that force one). A pass a winner does
not force (`arrange-threads` where another tiling won) gets no entry. An
entry replaces the table's entry of the same pass and shape; the rest of
the table stays.
"""
import json
import pathlib
import sys

FORMAT = 1


def entries(t):
    out = []
    for g in t["groups"]:
        timed = [v for v in g.get("variants", []) if "ms" in v and "error" not in v]
        if not timed:
            continue
        best = min(timed, key=lambda v: v["ms"])
        for p, choice in sorted(best["choices"].items()):
            shape = best["shapes"][p]
            others = {}
            for v in timed:
                c = v["choices"].get(p)
                if c is not None and v["shapes"].get(p) == shape and c != choice:
                    others[c] = round(min(others.get(c, float("inf")), v["ms"]), 4)
            out.append({"pass": p, "shape": shape, "choice": choice, "op": f"{g['op']}@{size_name(g['size'])}",
                        "ms": round(best["ms"], 4), "others": dict(sorted(others.items()))})
    return out


def size_name(size):
    """`batch=[] row=[4096] k=[4096]` -> `row=4096,k=4096`."""
    parts = []
    for b in size.split():
        name, dims = b.split("=", 1)
        if dims != "[]":
            parts.append(f"{name}={dims.strip('[]')}")
    return ",".join(parts)


def main():
    if len(sys.argv) != 3:
        print("usage: import_tuning.py OUT REPO", file=sys.stderr)
        return 2
    out, repo = pathlib.Path(sys.argv[1]), pathlib.Path(sys.argv[2])
    src = out / "tuning.json"
    try:
        t = json.loads(src.read_text())
    except (OSError, ValueError) as e:
        print(f"gpu-check: error: {src}: {e}", file=sys.stderr)
        return 2
    if t.get("device") != "cuda" or "groups" not in t:
        print(f"gpu-check: error: {src} holds no GPU timings (made with --device {t.get('device')}?)", file=sys.stderr)
        return 2
    path = repo / "compiler" / "tuning" / f"sm_{t['sm']}.json"
    table = json.loads(path.read_text()) if path.exists() else {"format": FORMAT, "sm": t["sm"], "device": "", "measured": "", "entries": []}
    new = entries(t)
    key = lambda e: (e["pass"], json.dumps(e["shape"], sort_keys=True))
    fresh = {key(e) for e in new}
    table["entries"] = [e for e in table["entries"] if key(e) not in fresh] + new
    table["entries"].sort(key=lambda e: (e["pass"], e["op"]))
    table["device"] = t.get("device_name", "")
    table["measured"] = f"KIT/run --tune at commit {t.get('commit', 'unknown')}"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(table, indent=1) + "\n")
    print(f"gpu-check: {len(new)} entries from {src} into {path} ({len(table['entries'])} in all); rebuild to use them", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
