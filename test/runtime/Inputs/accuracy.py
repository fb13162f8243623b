"""The accuracy table of docs/semantics.md ("Functions"), measured.

`accuracy.py points DIR F`: writes x.npy and y.npy (float F: f64 or f32) of
deterministic sample points: dense sweeps over each function's interesting
range, log-uniform magnitudes, and edge cases (near overflow and
underflow, subnormals, near 1). `accuracy.py table DIR64 DIR32`: reads the
interpreter's outputs for both widths (every backend gives the same bits,
test/runtime/functions.test), measures the largest error of each function
in ulps of the float width against mpmath at 60 digits (correctly rounded
reference), and prints the markdown table. Results that overflow, and
points where the exact result is not finite, are left out; a subnormal
result's ulp is the smallest subnormal."""
import sys

import mpmath
import numpy as np

mpmath.mp.dps = 60
N = 1500


def points(dt):
    rng = np.random.default_rng(50)
    big = np.finfo(dt).max
    lo, hi = (-745.0, 709.7) if dt == np.float64 else (-103.0, 88.7)
    x = np.concatenate([
        np.linspace(lo, hi, N), rng.uniform(-1, 1, N), np.exp(rng.uniform(np.log(1e-300 if dt == np.float64 else 1e-37), np.log(float(big) / 2), N)),
        1 + rng.uniform(-1e-3, 1e-3, N), rng.uniform(-30, 30, N), [np.finfo(dt).tiny / 8, np.finfo(dt).tiny, 1e-20, 0.5, 2.0, 10.0],
    ])
    y = np.concatenate([rng.uniform(-4, 4, 3 * N), rng.uniform(-50, 50, 2 * N), [2.0, 0.5, -1.0, 3.0, 1.5, -2.5]])
    return x.astype(dt), y.astype(dt)


def ulp_error(got, exact, dt):
    finfo = np.finfo(dt)
    if not mpmath.isfinite(exact) or abs(exact) > float(finfo.max):
        return None
    # The ulp of the binade that holds the exact value (2^(e-p) for
    # |exact| in [2^(e-1), 2^e)), never below the smallest subnormal.
    _, ex = mpmath.frexp(exact)
    u = max(float(mpmath.ldexp(1, int(ex) - finfo.nmant - 1)), float(finfo.smallest_subnormal))
    if not np.isfinite(got):
        return float("inf")
    return float(abs(mpmath.mpf(float(got)) - exact) / u)


REFS = {
    "exp": (lambda x, y: mpmath.exp(x), "e"),
    "log": (lambda x, y: mpmath.log(x) if x > 0 else None, "l"),
    "tanh": (lambda x, y: mpmath.tanh(x), "t"),
    "sqrt": (lambda x, y: mpmath.sqrt(x) if x >= 0 else None, "s"),
    "pow": (lambda x, y: mpmath.power(x, y) if x > 0 else None, "p"),
}


def worst(d, dt):
    x, y = np.load(f"{d}/x.npy"), np.load(f"{d}/y.npy")
    out = {}
    for name, (ref, arr) in REFS.items():
        got = np.load(f"{d}/{arr}.npy")
        m = 0.0
        for xi, yi, g in zip(x, y, got):
            exact = ref(mpmath.mpf(float(xi)), mpmath.mpf(float(yi)))
            if exact is None:
                continue
            err = ulp_error(g, exact, dt)
            if err is not None:
                m = max(m, err)
        out[name] = m
    return out


if sys.argv[1] == "points":
    dt = np.float64 if sys.argv[3] == "f64" else np.float32
    x, y = points(dt)
    np.save(f"{sys.argv[2]}/x.npy", x)
    np.save(f"{sys.argv[2]}/y.npy", y)
else:
    w64, w32 = worst(sys.argv[2], np.float64), worst(sys.argv[3], np.float32)
    print("| function | f64 (ulp) | f32 (ulp) |")
    print("|---|---|---|")
    for name in REFS:
        print(f"| `{name}` | {w64[name]:.3f} | {w32[name]:.3f} |")
