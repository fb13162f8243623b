"""The Python package's call overhead (issue #29): a cached `eintup`
kernel called on tiny arrays, against NumPy's own `matmul` on the same
arrays, and the kernel's compile time in a new process with and without a
disk-cache hit.
Run by `scripts/bench --sections overhead` (etbench reads its JSON); by
hand: `.venv/bin/python bench/overhead.py --json /tmp/overhead.json`.
"""
import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import timeit

import numpy as np

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
MATMUL = os.path.join(ROOT, "docs", "examples", "matmul.et")
# The bar: a cached kernel's call within 10x of NumPy's matmul.
BAR = 10.0


def per_call_us(fn, number, repeat):
    """Median over `repeat` rounds of the mean time of `number` calls, in us."""
    fn()
    return statistics.median(timeit.repeat(fn, number=number, repeat=repeat)) / number * 1e6


# One fresh process's compile: `eintup.compile` to the first result (the
# import not counted), and the kernel's disk (hits, misses).
COMPILE = """
import json, sys, time
import numpy as np, eintup
a = np.ones((2, 3, 4), np.float32); b = np.ones((2, 4, 5), np.float32)
t = time.perf_counter()
k = eintup.compile(sys.argv[1], target="cpu")
k(a=a, b=b)
print(json.dumps([(time.perf_counter() - t) * 1e3, list(k.disk_cache_info())]))
"""


def compile_ms(cache):
    """Milliseconds to compile and first call in a new process whose disk
    cache is `cache`, and its disk (hits, misses)."""
    env = dict(os.environ, EINTUP_CACHE_DIR=cache, PYTHONPATH=os.pathsep.join(sys.path))
    out = subprocess.run([sys.executable, "-c", COMPILE, MATMUL], env=env, check=True, capture_output=True, text=True).stdout
    return json.loads(out)


def main():
    p = argparse.ArgumentParser(description=__doc__)
    p.add_argument("--json", help="write the results here")
    p.add_argument("--quick", action="store_true", help="few repetitions: checks the harness")
    args = p.parse_args()
    number, repeat = (200, 3) if args.quick else (20000, 7)

    import eintup

    rng = np.random.default_rng(0)
    a = rng.random((2, 3, 4)).astype(np.float32)
    b = rng.random((2, 4, 5)).astype(np.float32)
    c = np.empty((2, 3, 5), np.float32)
    with tempfile.TemporaryDirectory(prefix="eintup-bench-cache-") as cache:
        miss_ms, miss = compile_ms(cache)
        hit_ms, hit = compile_ms(cache)
        # The cached kernel whose calls are timed: compiled once, in memory.
        k = eintup.compile(MATMUL, target="cpu", cache=False)
        got = k(a=a, b=b)["c"]
        if not np.allclose(got, np.matmul(a, b), rtol=1e-5):
            sys.exit("overhead: eintup's result differs from NumPy's")
        call = per_call_us(lambda: k(a=a, b=b), number, repeat)
        call_out = per_call_us(lambda: k(a=a, b=b, out={"c": c}), number, repeat)
        copies = k.last_copies
    numpy = per_call_us(lambda: np.matmul(a, b), number, repeat)
    ext = eintup._eintup.__file__
    result = {
        "op": "matmul f32 [2,3,4] @ [2,4,5], target cpu",
        "python": sys.version.split()[0],
        "numpy_version": np.__version__,
        "extension": os.path.basename(ext),
        "eintup_us": call,
        "eintup_out_us": call_out,
        "numpy_us": numpy,
        "ratio": call / numpy,
        "ratio_out": call_out / numpy,
        "bar": BAR,
        "copies_per_call": copies,
        "compile_miss_ms": miss_ms,
        "compile_hit_ms": hit_ms,
        "disk_miss": miss,
        "disk_hit": hit,
        "calls_timed": number * repeat,
    }
    print(json.dumps(result, indent=2))
    if args.json:
        with open(args.json, "w") as f:
            json.dump(result, f, indent=2)


if __name__ == "__main__":
    main()
