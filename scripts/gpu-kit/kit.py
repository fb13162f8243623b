#!/usr/bin/env python3
"""The GPU validation kit's runner (DIR/run OUT; docs/gpu-check.md).

1. device: `etrun --device-info` (exit 3, with the reason, without a GPU);
2. the runtime's own test binaries (hand-written PTX bundles);
3. every example case: run with `etrun` (inputs generated on the device),
   generated inputs compared bit for bit with the interpreter's, outputs
   with the interpreter's (INT exactly, FLOAT within TOLERANCE);
4. compute-sanitizer memcheck and racecheck on one case per example;
5. benchmark bundles timed by `etrun --time` (CUDA events), checked and
   timed against PyTorch by peers.py, against a device-to-device copy;
6. the Python package's CUDA tests (python/tests/test_cuda.py under
   pytest), where the kit has the package and its extension imports here
   (it links libLLVM 19): skipped, with the reason, elsewhere;
7. with `--tune`: the tuner's variants (DIR/bench/tune, docs/tuning.md),
   each timed the same way and its output compared with the heuristic
   variant's, within `--tune-budget` seconds; writes OUT/tuning.json,
   which `scripts/gpu-check import OUT` turns into the tuning table.
Writes OUT/report.md and OUT/results.json, prints the summary last.

`--device emu` runs steps 1-3 on the runtime's PTX emulator instead
(docs/emulator.md), anywhere: CI runs the kit that way. The emulator checks
bounds and races itself and models no time, so steps 4-5 are skipped.
"""
import argparse
import json
import math
import os
import pathlib
import shutil
import subprocess
import sys
import time

np = None  # NumPy, imported once a device is found (see main)

# max|got - ref| <= rtol * max(1, max|ref|): summation order differs on the
# GPU (atomics, another loop order), nothing else may.
TOLERANCE = {"f32": 1e-4, "f64": 1e-10}
BENCH_REPS = 20


def sh(cmd, timeout=300, env=None):
    try:
        r = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, env=env)
        return r.returncode, r.stdout, r.stderr
    except subprocess.TimeoutExpired:
        return 124, "", f"timed out after {timeout} s"


def tail(text, n=6):
    return "\n".join(text.strip().splitlines()[-n:])


def compare(got, ref, fl):
    """None when equal within tolerance, else a one-line reason."""
    if got.shape != ref.shape or got.dtype != ref.dtype:
        return f"got {got.dtype}{list(got.shape)}, expected {ref.dtype}{list(ref.shape)}"
    if ref.size == 0:
        return None
    if ref.dtype.kind == "i":
        bad = np.flatnonzero(got.ravel() != ref.ravel())
        if bad.size:
            i = bad[0]
            return f"{bad.size} INT elements differ; first at flat {i}: {got.ravel()[i]} != {ref.ravel()[i]}"
        return None
    g, r = got.astype(np.float64).ravel(), ref.astype(np.float64).ravel()
    both_nan = np.isnan(g) & np.isnan(r)
    err = np.where(both_nan, 0.0, np.abs(g - r))
    err = np.where(np.isnan(err), np.inf, err)
    scale = max(1.0, float(np.nanmax(np.abs(r))) if np.isfinite(r).any() else 1.0)
    tol = TOLERANCE[fl] * scale
    if float(err.max()) > tol:
        i = int(err.argmax())
        return f"max error {err.max():.3g} > {tol:.3g}; first worst at flat {i}: {g[i]!r} != {r[i]!r}"
    return None


def device_info(etrun, device):
    code, out, err = sh([etrun, "--device-info", "--device", device, "--json"], timeout=120)
    if code != 0:
        return code, err.strip().replace("etrun: error: ", "")
    return 0, json.loads(out)["device"]


def runtime_tests(kit):
    res = []
    for exe in sorted((kit / "bin").glob("runtime-test-*")):
        # tests/cli.rs finds etrun through ETRUN: the path cargo compiled in is not here.
        env = dict(os.environ, ETRUN=str(kit / "bin" / "etrun"))
        code, out, err = sh([str(exe), "--test-threads=1"], timeout=300, env=env)
        summary = [l for l in (out + err).splitlines() if l.startswith("test result:")]
        skipped = sum(1 for l in (out + err).splitlines() if "skipped:" in l)
        res.append({"binary": exe.name, "ok": code == 0, "summary": summary[-1] if summary else tail(out + err),
                    "skipped_notes": skipped, "log": "" if code == 0 else tail(out + err, 30)})
    return res


def run_case(etrun, device, kit, case, work):
    d = kit / "cases" / case["name"]
    got_dir = work / "cases" / case["name"]
    code, out, err = sh([etrun, str(d / "bundle.etb"), "--device", device, "--out", str(got_dir)])
    if code != 0:
        return {"name": case["name"], "ok": False, "problems": [f"etrun exit {code}: {tail(err)}"]}
    problems = []
    for n in case["generated"] + case["outputs"]:
        ref_p, got_p = d / "expected" / f"{n}.npy", got_dir / f"{n}.npy"
        if not ref_p.exists() or not got_p.exists():
            problems.append(f"{n}: missing ({'expected' if not ref_p.exists() else 'device'} file)")
            continue
        ref, got = np.load(ref_p), np.load(got_p)
        # Generated inputs must be the interpreter's bit for bit.
        why = compare(got, ref, case["float"]) if n in case["outputs"] else (
            None if got.shape == ref.shape and got.tobytes() == ref.tobytes() else "generated input differs from the interpreter's")
        if why:
            problems.append(f"{n}: {why}")
    return {"name": case["name"], "ok": not problems, "problems": problems}


def _conv2d(x, w):
    """VALID, stride 1: y[n,a,b,d] = sum x[n,a+i,b+j,c] w[i,j,c,d]."""
    from numpy.lib.stride_tricks import sliding_window_view
    v = sliding_window_view(x, w.shape[:2], axis=(1, 2))
    return np.einsum("nabcij,ijcd->nabd", v, w)


# Dynamic bundles (`eintup build FILE.et --dynamic`, docs/dynamic-shapes.md;
# built by scripts/gpu-check into the kit's dynamic/): each runs by etrun
# at several input shapes (tile non-multiples, a zero dim) against NumPy,
# and at one large shape against the static bundle built for it, on the
# same inputs (kernel time, CUDA events).
DYNAMIC_CASES = [
    {"name": "matmul", "bundle": "mm.etb", "static": "mm-static.etb",
     "shapes": [(2, 3, 4, 5), (1, 33, 17, 65), (3, 0, 4, 5), (4, 128, 64, 96)], "timing": (1, 1024, 1024, 1024),
     "inputs": lambda r, s: {"a": r.uniform(-1, 1, s[:3]), "b": r.uniform(-1, 1, (s[0], s[2], s[3]))},
     "ref": lambda i: {"c": i["a"] @ i["b"]}},
    {"name": "conv2d", "bundle": "conv.etb", "static": "conv-static.etb",
     "shapes": [(1, 9, 7, 2, 3, 2, 3), (2, 17, 33, 3, 3, 3, 5), (1, 4, 4, 1, 4, 4, 1)], "timing": (8, 66, 66, 32, 3, 3, 32),
     "inputs": lambda r, s: {"x": r.uniform(-1, 1, s[:4]), "w": r.uniform(-1, 1, (s[4], s[5], s[3], s[6]))},
     "ref": lambda i: {"y": _conv2d(i["x"], i["w"])}},
    {"name": "reduce_sum", "bundle": "rs.etb", "static": "rs-static.etb",
     "shapes": [(5, 7), (33, 1000), (3, 0), (1, 65537)], "timing": (4096, 4096),
     "inputs": lambda r, s: {"x": r.uniform(-1, 1, s)},
     "ref": lambda i: {"s": i["x"].sum(-1)}},
]


def _etrun_inputs(d, arrays):
    args = []
    for n, a in arrays.items():
        np.save(d / f"{n}.npy", a.astype(np.float32))
        args += ["--input", f"{n}={d / (n + '.npy')}"]
    return args


def dynamic(etrun, device, kit, work):
    """Every DYNAMIC_CASES bundle at its shapes (f32, within 1e-4 of the
    largest reference value) and its timing shape against its static
    bundle."""
    if not (kit / "dynamic").exists():
        return {"skipped": "the kit has no dynamic bundles"}
    rows, timing, rng = [], [], np.random.default_rng(7)
    for c in DYNAMIC_CASES:
        b = kit / "dynamic" / c["bundle"]
        for s in c["shapes"]:
            d = work / "dynamic" / c["name"] / "x".join(map(str, s))
            d.mkdir(parents=True, exist_ok=True)
            arrays = {n: a.astype(np.float32) for n, a in c["inputs"](rng, s).items()}
            code, out, err = sh([etrun, str(b), "--device", device, *_etrun_inputs(d, arrays), "--out", str(d / "out")])
            row = {"case": c["name"], "shape": list(s)}
            if code != 0:
                rows.append({**row, "ok": False, "problem": f"etrun exit {code}: {tail(err)}"})
                continue
            problems = []
            for n, want in c["ref"]({k: v.astype(np.float64) for k, v in arrays.items()}).items():
                got = np.load(d / "out" / f"{n}.npy")
                scale = max(1.0, float(np.abs(want).max()) if want.size else 1.0)
                if got.shape != want.shape or (want.size and float(np.abs(got - want).max()) > 1e-4 * scale):
                    problems.append(f"`{n}` differs from NumPy")
            rows.append({**row, "ok": not problems, "problem": "; ".join(problems) or None})
        # Dynamic against static at the timing shape, same inputs (a GPU
        # only: the emulator models no time).
        if device == "emu":
            continue
        d = work / "dynamic" / c["name"] / "timing"
        d.mkdir(parents=True, exist_ok=True)
        args = _etrun_inputs(d, c["inputs"](rng, c["timing"]))
        t = {"case": c["name"], "shape": list(c["timing"])}
        for which in ("bundle", "static"):
            code, out, err = sh([etrun, str(kit / "dynamic" / c[which]), "--device", device, *args, "--time", "20", "--json"], timeout=600)
            try:
                t[which + "_ms"] = json.loads(out)["timing"]["total_ms"] if code == 0 else None
            except (ValueError, KeyError, TypeError):
                t[which + "_ms"] = None
            if code != 0:
                t[which + "_error"] = tail(err)
        if t.get("bundle_ms") and t.get("static_ms"):
            t["ratio"] = t["bundle_ms"] / t["static_ms"]
        timing.append(t)
    return {"ok": all(x["ok"] for x in rows), "rows": rows, "timing": timing}


def find_sanitizer():
    for p in [shutil.which("compute-sanitizer"), "/usr/local/cuda/bin/compute-sanitizer"]:
        if p and os.path.exists(p):
            return p
    return None


def sanitize(san, etrun, kit, cases):
    res = []
    firsts = {}
    for c in cases:
        if c["float"] == "f32" and c["example"] not in firsts:
            firsts[c["example"]] = c
    for c in firsts.values():
        b = str(kit / "cases" / c["name"] / "bundle.etb")
        for tool in ("memcheck", "racecheck"):
            code, out, err = sh([san, "--tool", tool, "--error-exitcode", "99", etrun, b], timeout=300)
            text = out + err
            errors = [l for l in text.splitlines() if "ERROR SUMMARY" in l or "RACECHECK SUMMARY" in l]
            res.append({"case": c["name"], "tool": tool, "ok": code == 0, "summary": errors[-1] if errors else tail(text, 2),
                        "log": "" if code == 0 else tail(text, 20)})
    return res


def python_tests(kit, python, work):
    """pytest on the kit's copy of python/tests/test_cuda.py, with the
    kit's copy of the package first on the path: unpacked into the work
    directory (its extension links LLVM statically and comes
    xz-compressed). Skipped (with the reason) when the kit has no package,
    pytest is missing, or the extension does not import here."""
    import lzma
    src = kit / "python"
    if not (src / "eintup" / "_eintup.abi3.so.xz").exists():
        return {"skipped": "the kit has no Python package (scripts/gpu-check had not built the extension)"}
    # The tests find the package's siblings as the kit lays them out
    # (python/, docs/examples/).
    pkg = work / "python"
    shutil.rmtree(pkg, ignore_errors=True)
    shutil.copytree(src, pkg)
    shutil.rmtree(work / "docs", ignore_errors=True)
    shutil.copytree(kit / "docs", work / "docs")
    packed = pkg / "eintup" / "_eintup.abi3.so.xz"
    (pkg / "eintup" / "_eintup.abi3.so").write_bytes(lzma.decompress(packed.read_bytes()))
    packed.unlink()
    env = dict(os.environ, PYTHONPATH=str(pkg), EINTUP_CACHE_DIR=str(work / "eintup-cache"))
    code, out, err = sh([python, "-c", "import eintup"], timeout=120, env=env)
    if code != 0:
        return {"skipped": f"the extension does not import here: {tail(err, 1)}"}
    code, out, err = sh([python, "-c", "import pytest"], timeout=60, env=env)
    if code != 0:
        return {"skipped": "pytest is not installed"}
    code, out, err = sh([python, "-m", "pytest", "-q", "-rs", "-p", "no:cacheprovider", str(pkg / "tests" / "test_cuda.py")], timeout=600, env=env)
    summary = [l for l in out.splitlines() if " passed" in l or " failed" in l or " error" in l]
    # -rs prints one "SKIPPED [n] file:line: reason" line per reason: kept,
    # so a report shows which tests a GPU run did not reach, and why.
    skips = [l for l in out.splitlines() if l.startswith("SKIPPED")]
    return {"ok": code == 0, "summary": summary[-1] if summary else tail(out + err, 2), "skips": skips, "log": "" if code == 0 else tail(out + err, 40)}


def bench(etrun, kit, work, python):
    ops_file = kit / "bench" / "ops.json"
    if not ops_file.exists():
        return {"skipped": "no benchmark bundles"}
    ops = json.loads(ops_file.read_text())
    results, jobs = [], []
    for op in ops:
        if "error" in op:
            results.append({"op": op["name"], "error": op["error"]})
            continue
        b = kit / "bench" / op["bundle"]
        wd = work / "bench" / op["name"]
        code, out, err = sh([etrun, str(b), "--time", str(BENCH_REPS), "--warmup", "3", "--json", "--out", str(wd)], timeout=400)
        if code != 0:
            results.append({"op": op["name"], "error": f"etrun exit {code}: {tail(err)}"})
            continue
        j = json.loads(out)
        m = json.loads((b / "manifest.json").read_text())
        ins = {x["name"]: str(wd / f"{x['name']}.npy") for x in m["buffers"] if x["role"] == "input"}
        outs = [x["name"] for x in m["buffers"] if x["role"] == "output"]
        t = j["timing"]
        results.append({"op": op["name"], "unit": op["unit"], "work": op["work"], "memory_bound": op["memory_bound"],
                        "eintup_ms": t["total_ms"], "launches": t["launches"], "binds": op["binds"]})
        jobs.append({"name": op["name"], "kind": op["kind"], "params": op["params"], "float": op["float"],
                     "inputs": ins, "output": str(wd / f"{outs[0]}.npy")})
    peers, copy = {}, None
    req = {"device": "cuda", "min_reps": BENCH_REPS, "max_reps": BENCH_REPS, "budget_s": 0.0, "jobs": jobs}
    rp = work / "peers-request.json"
    rp.write_text(json.dumps(req))
    code, out, err = sh([python, str(kit / "peers.py"), str(rp)], timeout=500)
    if code == 0:
        peers = json.loads(out)
    else:
        peers = {"error": f"peers.py exit {code}: {tail(err)}"}
    code, out, err = sh([python, "-c", COPY_SNIPPET], timeout=120)
    if code == 0:
        copy = json.loads(out)
    for r in results:
        p = peers.get("results", {}).get(r["op"], {}).get("torch") if isinstance(peers, dict) else None
        if p is not None:
            r["torch"] = p
            if p.get("median_s"):
                r["ratio_vs_torch"] = r["eintup_ms"] / (p["median_s"] * 1e3)
        if "eintup_ms" in r:
            r["rate"] = r["work"] / (r["eintup_ms"] / 1e3) / 1e9
            if copy and r["memory_bound"]:
                r["fraction_of_copy"] = r["rate"] / copy["gbps"]
    return {"results": results, "copy": copy, "peer_versions": peers.get("versions"), "peer_error": peers.get("error")}


# A 1 GiB device-to-device copy through PyTorch, median of 20 after warm-up,
# counting bytes read plus bytes written.
COPY_SNIPPET = r"""
import json, torch
n = 1 << 30
a = torch.empty(n, dtype=torch.uint8, device="cuda").random_(0, 255)
b = torch.empty_like(a)
for _ in range(5): b.copy_(a)
torch.cuda.synchronize()
ts = []
for _ in range(20):
    s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    s.record(); b.copy_(a); e.record(); e.synchronize(); ts.append(s.elapsed_time(e))
ts.sort(); ms = ts[len(ts) // 2]
print(json.dumps({"bytes": n, "median_ms": ms, "gbps": 2 * n / (ms / 1e3) / 1e9}))
"""


TUNE_REPS = 5


def variant_key(g, v):
    """A tuning variant's identity across runs: its group's op, size and
    float, and its choices."""
    return (g["op"], g["size"], g["float"], json.dumps(v["choices"], sort_keys=True))


def measured_before(path):
    """{(op, size, float, choices): ms} of an earlier run's tuning.json
    (--tune-resume): a run that spent its budget goes on where it stopped
    instead of timing the same variants again."""
    if path is None:
        return {}
    t = json.loads(pathlib.Path(path).read_text())
    return {variant_key(g, v): v["ms"]
            for g in t.get("groups", []) if "error" not in g
            for v in g["variants"] if "ms" in v}


def tune(etrun, kit, work, device, budget_s, before=None):
    """Times every variant of every group of DIR/bench/tune/tune.json (on
    the emulator: runs them, no times) and compares each output with the
    group's first variant's (the heuristic's choice). Variants timed in
    `before` (measured_before) keep that time and are not run again; the
    first variant always runs, as every other's reference."""
    before = before or {}
    tdir = kit / "bench" / "tune"
    if not (tdir / "tune.json").exists():
        return {"skipped": "no tuning variants in this kit"}
    spec = json.loads((tdir / "tune.json").read_text())
    t0 = time.time()
    groups = []
    for g in spec["groups"]:
        if "error" in g:
            groups.append(g)
            continue
        out_g = {k: g[k] for k in ("op", "size", "float")}
        out_g["variants"] = []
        ref = None
        for i, v in enumerate(g["variants"]):
            res = {"choices": v["choices"], "shapes": v["shapes"]}
            if "predicted_ms" in v:
                res["predicted_ms"] = v["predicted_ms"]
            out_g["variants"].append(res)
            if i > 0 and variant_key(g, v) in before:
                res["ms"] = before[variant_key(g, v)]
                res["resumed"] = True
                continue
            if time.time() - t0 > budget_s:
                res["error"] = f"skipped: the tuning budget of {budget_s:.0f} s was spent"
                continue
            wd = work / "tune" / f"{len(groups)}-{i}"
            cmd = [etrun, str(tdir / v["bundle"]), "--device", device, "--out", str(wd)]
            if device == "cuda":
                cmd += ["--time", str(TUNE_REPS), "--warmup", "2", "--json"]
            code, out, err = sh(cmd, timeout=300)
            if code != 0:
                res["error"] = f"etrun exit {code}: {tail(err)}"
                continue
            if device == "cuda":
                res["ms"] = json.loads(out)["timing"]["total_ms"]
            m = json.loads((tdir / v["bundle"] / "manifest.json").read_text())
            outs = {x["name"]: np.load(wd / f"{x['name']}.npy") for x in m["buffers"] if x["role"] == "output"}
            if ref is None:
                ref = outs
            else:
                bad = [f"{n}: {why}" for n in ref if (why := compare(outs.get(n, np.zeros(0)), ref[n], g["float"]))]
                if bad:
                    res["error"] = "MISMATCH with the heuristic variant: " + "; ".join(bad)
                    res.pop("ms", None)
            shutil.rmtree(wd, ignore_errors=True)
        groups.append(out_g)
    out = {"sm": spec["sm"], "device": device, "groups": groups, "wall_s": time.time() - t0}
    if "model" in spec:
        out["model"] = spec["model"]
    return out


def tune_md(t):
    L = ["", "## Tuning (ms, CUDA events, median)", ""]
    if "skipped" in t:
        return L + [f"skipped: {t['skipped']}"]
    for g in t["groups"]:
        if "error" in g:
            L.append(f"- {g['op']} {g['size']}: error: {g['error']}")
            continue
        timed = [v for v in g["variants"] if "ms" in v]
        ran = [v for v in g["variants"] if "error" not in v]
        line = f"- {g['op']} {g['size']}: {len(ran)} of {len(g['variants'])} variants ran"
        resumed = sum(1 for v in g["variants"] if v.get("resumed"))
        if resumed:
            line += f" ({resumed} timed by the run --tune-resume named)"
        if timed:
            best = min(timed, key=lambda v: v["ms"])
            first = g["variants"][0]
            line += f"; best {best['choices']} {best['ms']:.3f} ms"
            if "ms" in first:
                line += f", heuristic {first['choices']} {first['ms']:.3f} ms ({first['ms'] / best['ms']:.2f}x the best)"
        L.append(line)
        L += [f"  - {v['choices']}: {v['error']}" for v in g["variants"] if "error" in v]
    return L


def ranks(v):
    """Ranks from 0, ties at their mean rank."""
    order = sorted(range(len(v)), key=lambda i: v[i])
    r = [0.0] * len(v)
    i = 0
    while i < len(order):
        j = i
        while j + 1 < len(order) and v[order[j + 1]] == v[order[i]]:
            j += 1
        for k in order[i:j + 1]:
            r[k] = (i + j) / 2
        i = j + 1
    return r


def spearman(a, b):
    """Spearman's rank correlation; None for under 2 values or a constant series."""
    if len(a) < 2:
        return None
    ra, rb = ranks(a), ranks(b)
    m = (len(a) - 1) / 2
    num = sum((x - m) * (y - m) for x, y in zip(ra, rb))
    den = (sum((x - m) ** 2 for x in ra) * sum((y - m) ** 2 for y in rb)) ** 0.5
    return num / den if den else None


def model_md(t):
    """The cost model's error (docs/tuning.md, "Cost model"): per group, each
    variant's measured and predicted ms, the rank correlation, and how the
    model's pick fares against the measured best."""
    L = ["", "## Cost model against the measured times", ""]
    m = t.get("model")
    if not m:
        return L + ["no predictions in this kit's tune.json"]
    L.append(f"model: {m.get('gpu')}, constants {m.get('fitted')}, {m.get('sample_blocks')} blocks per launch emulated")
    logs = []
    for g in t.get("groups", []):
        rows = [v for v in g.get("variants", []) if v.get("ms", 0) > 0 and v.get("predicted_ms", 0) > 0]
        if not rows:
            continue
        meas = [v["ms"] for v in rows]
        pred = [v["predicted_ms"] for v in rows]
        rho = spearman(meas, pred)
        pick = min(rows, key=lambda v: v["predicted_ms"])["ms"] / min(meas)
        lr = [math.log(p / x) for x, p in zip(meas, pred)]
        logs += lr
        L += ["", f"### {g['op']} {g['size']}: spearman {'-' if rho is None else f'{rho:.2f}'}, "
              f"model's pick {pick:.2f}x the measured best, predicted/measured {math.exp(sum(lr) / len(lr)):.2f}x (geometric mean)", "",
              "| variant | measured ms | predicted ms | predicted/measured |", "|---|---|---|---|"]
        for v, x, p in zip(rows, meas, pred):
            c = v["choices"]
            label = ", ".join([c.get('register-tiles', '-'), c.get('block-tiles', '-')] + [c[k] for k in ("arrange-threads",) if k in c])
            L.append(f"| {label} | {x:.3f} | {p:.3f} | {p / x:.2f}x |")
    if not logs:
        return L + ["", "no variant has both a measured and a predicted time (no GPU timing)"]
    L += ["", f"all: {len(logs)} variants, root mean square of log(predicted/measured) {math.sqrt(sum(x * x for x in logs) / len(logs)):.3f}"]
    return L


def report_md(r):
    L = [f"# GPU check report", "", f"- commit: {r['commit']}", f"- device: {r['device']}", f"- wall time: {r['wall_s']:.0f} s", ""]
    L += ["## Runtime tests", ""]
    for t in r["runtime_tests"]:
        L.append(f"- {t['binary']}: {'ok' if t['ok'] else 'FAILED'} — {t['summary']}")
    cs = r["cases"]
    L += ["", f"## Example cases: {sum(c['ok'] for c in cs)} of {len(cs)} agree with the interpreter", ""]
    for c in cs:
        if not c["ok"]:
            L.append(f"- **{c['name']}**: " + "; ".join(c["problems"]))
    dy = r.get("dynamic", {})
    L += ["", "## Dynamic bundles (one bundle per program, several input shapes; docs/dynamic-shapes.md)", ""]
    if "skipped" in dy:
        L.append(f"skipped: {dy['skipped']}")
    for x in dy.get("rows", []):
        L.append(f"- {x['case']} {'x'.join(map(str, x['shape']))}: {'ok' if x['ok'] else 'FAILED — ' + str(x['problem'])}")
    if dy.get("timing"):
        L += ["", "| case | shape | dynamic ms | static ms | dynamic/static |", "|---|---|---|---|---|"]
        for t in dy["timing"]:
            f = lambda v: f"{v:.3f}" if v else "error"
            ratio = f"{t['ratio']:.2f}x" if t.get("ratio") else "-"
            L.append(f"| {t['case']} | {'x'.join(map(str, t['shape']))} | {f(t.get('bundle_ms'))} | {f(t.get('static_ms'))} | {ratio} |")
    L += ["", "## compute-sanitizer", ""]
    if isinstance(r["sanitizer"], str):
        L.append(f"skipped: {r['sanitizer']}")
    else:
        for s in r["sanitizer"]:
            L.append(f"- {s['case']} {s['tool']}: {'ok' if s['ok'] else 'FAILED'} — {s['summary']}")
    L += ["", "## Python package, CUDA (python/tests/test_cuda.py)", ""]
    py = r.get("python", {})
    if "skipped" in py:
        L.append(f"skipped: {py['skipped']}")
    else:
        L.append(f"{'ok' if py['ok'] else 'FAILED'} — {py['summary']}")
        L += [f"- {l}" for l in py.get("skips", [])]
        if py.get("log"):
            L += ["", "```", py["log"], "```"]
    L += ["", "## Benchmarks (ms, CUDA events, median)", ""]
    b = r["bench"]
    if "skipped" in b:
        L.append(f"skipped: {b['skipped']}")
    else:
        if b.get("copy"):
            L.append(f"device copy: {b['copy']['gbps']:.0f} GB/s (1 GiB, read + write)")
        if b.get("peer_versions"):
            L.append(f"peers: {b['peer_versions']}")
        if b.get("peer_error"):
            L.append(f"peer error: {b['peer_error']}")
        L += ["", "| op | eintup ms | rate | of copy | torch ms | eintup/torch |", "|---|---|---|---|---|---|"]
        for x in b["results"]:
            if "error" in x:
                L.append(f"| {x['op']} | error: {x['error']} | | | | |")
                continue
            t = x.get("torch", {})
            tm = f"{t['median_s'] * 1e3:.3f}" if t.get("median_s") else (t.get("error") or "-")
            fr = f"{x['fraction_of_copy'] * 100:.0f}%" if "fraction_of_copy" in x else "-"
            ra = f"{x['ratio_vs_torch']:.2f}x" if "ratio_vs_torch" in x else "-"
            L.append(f"| {x['op']} | {x['eintup_ms']:.3f} | {x['rate']:.1f} {x['unit']} | {fr} | {tm} | {ra} |")
        L += ["", "Per launch:", ""]
        for x in b["results"]:
            for l in x.get("launches", []):
                L.append(f"- {x['op']} {l['kernel']}: {l['median_ms']:.3f} ms")
    if "tuning" in r:
        L += tune_md(r["tuning"])
        L += model_md(r["tuning"])
    L += ["", f"**{r['verdict']}**", ""]
    return "\n".join(L)


def main():
    ap = argparse.ArgumentParser(prog="run")
    ap.add_argument("--kit", required=True)
    ap.add_argument("out")
    ap.add_argument("--work", default="/tmp/eintup-gpu-check-work")
    ap.add_argument("--no-bench", action="store_true")
    ap.add_argument("--no-sanitizer", action="store_true")
    ap.add_argument("--device", choices=["cuda", "emu"], default="cuda")
    ap.add_argument("--tune", action="store_true", help="time the tuner's variants, write OUT/tuning.json")
    ap.add_argument("--tune-budget", type=float, default=300.0, help="seconds the tuning step may take")
    ap.add_argument("--tune-resume", metavar="TUNING_JSON", help="an earlier run's OUT/tuning.json: its timed variants are kept, not run again")
    a = ap.parse_args()
    try:
        # Read before anything runs: a wrong path must not cost a GPU run.
        before = measured_before(a.tune_resume)
    except (OSError, ValueError, KeyError) as e:
        print(f"gpu-check: error: --tune-resume {a.tune_resume}: {e}", file=sys.stderr)
        return 2
    kit, out, work = pathlib.Path(a.kit), pathlib.Path(a.out), pathlib.Path(a.work)
    out.mkdir(parents=True, exist_ok=True)
    shutil.rmtree(work, ignore_errors=True)
    work.mkdir(parents=True)
    etrun = str(kit / "bin" / "etrun")
    t0 = time.time()
    r = {"commit": (kit / "commit").read_text().strip() if (kit / "commit").exists() else "unknown"}
    code, dev = device_info(etrun, a.device)
    if code != 0:
        msg = f"no CUDA device: {dev}"
        r.update(device=msg, verdict=msg)
        (out / "results.json").write_text(json.dumps(r, indent=1) + "\n")
        (out / "report.md").write_text(f"# GPU check report\n\n{msg}\n")
        print(f"gpu-check: {msg}", file=sys.stderr)
        return 3 if code == 3 else 70
    global np
    try:
        import numpy
    except ImportError as e:
        print(f"gpu-check: NumPy is needed to compare results: {e}", file=sys.stderr)
        return 3
    np = numpy
    if a.device == "emu":
        r["device"] = f"{dev['name']} (models {dev['arch']}; no timing)"
    else:
        r["device"] = f"{dev['name']} ({dev['arch']}, {dev['multiprocessors']} SMs, {dev['memory_bytes'] / 2**30:.1f} GiB, driver API {dev['driver_version']})"
    print(f"gpu-check: device {r['device']}", file=sys.stderr)
    r["runtime_tests"] = runtime_tests(kit)
    cases = json.loads((kit / "cases" / "cases.json").read_text())
    r["cases"] = [run_case(etrun, a.device, kit, c, work) for c in cases]
    print(f"gpu-check: {sum(c['ok'] for c in r['cases'])}/{len(cases)} cases agree", file=sys.stderr)
    r["dynamic"] = dynamic(etrun, a.device, kit, work)
    print(f"gpu-check: dynamic bundle: {r['dynamic'].get('skipped') or ('agrees at every shape' if r['dynamic']['ok'] else 'DIFFERS')}", file=sys.stderr)
    san = find_sanitizer()
    if a.device == "emu":
        r["sanitizer"] = "the emulator checks every access for bounds and races itself"
    elif a.no_sanitizer:
        r["sanitizer"] = "--no-sanitizer"
    elif not san:
        r["sanitizer"] = "compute-sanitizer not found"
    else:
        r["sanitizer"] = sanitize(san, etrun, kit, cases)
    if a.device == "emu":
        r["python"] = {"skipped": "the package's CUDA tests need a GPU (the no-GPU ones run in the test suite)"}
    else:
        r["python"] = python_tests(kit, sys.executable, work)
        print(f"gpu-check: python: {r['python'].get('summary') or r['python'].get('skipped')}", file=sys.stderr)
    if a.device == "emu":
        r["bench"] = {"skipped": "the emulator models no time (its memory profile: etrun --device emu --profile)"}
    else:
        r["bench"] = {"skipped": "--no-bench"} if a.no_bench else bench(etrun, kit, work, sys.executable)
    if a.tune:
        r["tuning"] = tune(etrun, kit, work, a.device, a.tune_budget, before)
        t = dict(r["tuning"], commit=r["commit"], device_name=r["device"])
        (out / "tuning.json").write_text(json.dumps(t, indent=1) + "\n")
    failed = [t["binary"] for t in r["runtime_tests"] if not t["ok"]] + [c["name"] for c in r["cases"] if not c["ok"]]
    if r["python"].get("ok") is False:
        failed.append("python tests")
    if r["dynamic"].get("ok") is False:
        failed.append("dynamic bundle")
    if isinstance(r["sanitizer"], list):
        failed += [f"{s['case']}:{s['tool']}" for s in r["sanitizer"] if not s["ok"]]
    if "results" in r["bench"]:
        failed += [f"bench {x['op']}" for x in r["bench"]["results"] if "error" in x
                   or str(x.get("torch", {}).get("error", "")).startswith("MISMATCH")]
    for g in r.get("tuning", {}).get("groups", []):
        failed += [f"tune {g['op']} {v['choices']}" for v in g.get("variants", []) if str(v.get("error", "")).startswith("MISMATCH")]
    r["failed"] = failed
    r["verdict"] = "all checks passed" if not failed else f"{len(failed)} checks failed: {', '.join(failed[:20])}"
    r["wall_s"] = time.time() - t0
    (out / "results.json").write_text(json.dumps(r, indent=1, default=str) + "\n")
    md = report_md(r)
    (out / "report.md").write_text(md)
    print(md)
    return 0 if not failed else 1


if __name__ == "__main__":
    sys.exit(main())
