"""Checks etbench's JSON: every example timed, every host op timed by
eintup and by both peers, and every peer agreeing with eintup; in a
process report, every chain run as whole processes at n and at 16 (with
the compile cache warm and off), and
both peers agreeing with what those runs wrote."""
import json
import sys

r = json.load(open(sys.argv[1]))
if "process" in r:
    procs = r["process"]["results"]
    assert [p["op"] for p in procs] == ["einsum3_f64", "einsum4_f64"], procs
    for p in procs:
        assert len(p["run_ms"]) == len(p["baseline_ms"]) >= 2 and min(p["run_ms"] + p["baseline_ms"]) > 0, p
        med = lambda v: sorted(v)[len(v) // 2] if len(v) % 2 else (sorted(v)[len(v) // 2 - 1] + sorted(v)[len(v) // 2]) / 2
        assert abs(p["compute_ms"] - (med(p["run_ms"]) - med(p["baseline_ms"]))) < 1e-6, p
        # The same runs with the compile cache off.
        assert len(p["uncached_run_ms"]) == len(p["uncached_baseline_ms"]) == len(p["run_ms"]) and min(p["uncached_run_ms"] + p["uncached_baseline_ms"]) > 0, p
        assert abs(p["uncached_compute_ms"] - (med(p["uncached_run_ms"]) - med(p["uncached_baseline_ms"]))) < 1e-6, p
        for fw in ("numpy", "tensorflow"):
            q = p["peers"][fw]
            assert q.get("error") is None and q["median_s"] > 0 and q["max_rel_err"] <= 1e-9, (p["op"], fw, q)
    print("ok")
    sys.exit(0)
assert len(r["compile"]) >= 14, len(r["compile"])
for c in r["compile"]:
    assert c["end_to_end_host_ms"] > 0 and c["codegen_host_ms"] > 0, c
    assert [p[0] for p in c["passes_ms"]][:3] == ["resolve", "infer-ranks", "specialize"], c
host = r["host"]["results"]
assert len(host) == 9, len(host)  # 7 ops, and the einsum chains of plan-products
for h in host:
    assert h["eintup_ms"] > 0 and h["reps"] >= 3, h
    for fw in ("numpy", "tensorflow"):
        p = h["peers"][fw]
        assert p.get("error") is None and p["median_s"] > 0, (h["op"], fw, p)
        assert p["max_rel_err"] <= (1e-3 if h["op"].endswith("f32") else 1e-9), (h["op"], fw, p)
        assert abs(h["ratio"][fw] - h["eintup_ms"] / 1e3 / p["median_s"]) < 1e-9 * h["ratio"][fw]
print("ok")
