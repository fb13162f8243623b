#!/usr/bin/env python3
"""The peers of `scripts/bench`: NumPy and TensorFlow on the CPU, PyTorch
on the GPU, computing what each bench/ops program computes.

    peers.py REQUEST.json   (written by etbench; see bench/src/peers.rs)

For every job it loads eintup's inputs and output (`.npy`), computes the
op with each framework, compares the result with eintup's (a mismatch is
reported instead of a time), then times it: median of repeated runs after
one warm-up. Prints one JSON object on stdout. A framework that is not
installed is reported as unavailable; nothing here is fatal per op.
"""
import json
import os
import sys
import time

import numpy as np

# Relative tolerance per float width (different summation orders).
TOLERANCE = {"f32": 1e-3, "f64": 1e-9}


def _idx_tuple(idx):
    """`[..., coord]` index array -> tuple of per-coordinate arrays."""
    return tuple(np.moveaxis(idx, -1, 0))


def _s2d_shape(x, block):
    b, h, w, c = x.shape
    return (b, h // block, block, w // block, block, c), (b, h // block, w // block, block * block * c)


# ---- NumPy -----------------------------------------------------------------

def np_conv2d(i, p, shape):
    x, w = i["x"], i["w"]
    kh, kw = w.shape[0], w.shape[1]
    sh, sw = p["stride"]
    oh, ow = shape[1], shape[2]
    y = np.zeros(shape, dtype=x.dtype)
    for a in range(kh):
        for b in range(kw):
            xs = x[:, a:a + sh * (oh - 1) + 1:sh, b:b + sw * (ow - 1) + 1:sw, :]
            y += np.tensordot(xs, w[a, b], axes=([3], [0]))
    return y


def np_scatter_nd(i, p, shape):
    out = np.zeros(shape, dtype=i["vals"].dtype)
    np.add.at(out, _idx_tuple(i["idx"]), i["vals"])
    return out


def np_space_to_depth(i, p, shape):
    x = i["x"]
    s6, s4 = _s2d_shape(x, p["block"])
    return x.reshape(s6).transpose(0, 1, 3, 2, 4, 5).reshape(s4)


NUMPY = {
    "matmul": lambda i, p, s: np.matmul(i["a"], i["b"]),
    "conv2d": np_conv2d,
    "gather_nd": lambda i, p, s: i["src"][_idx_tuple(i["idx"])],
    "scatter_nd": np_scatter_nd,
    "space_to_depth": np_space_to_depth,
    "reduce_sum": lambda i, p, s: i["x"].sum(axis=-1),
    # The contraction order NumPy finds (greedy), through BLAS.
    "einsum": lambda i, p, s: np.einsum(p["spec"], *[i[n] for n in p["operands"]], optimize=True),
}


# ---- TensorFlow ------------------------------------------------------------

def tf_ops(tf):
    return {
        "matmul": lambda i, p, s: tf.linalg.matmul(i["a"], i["b"]),
        "conv2d": lambda i, p, s: tf.nn.convolution(input=i["x"], filters=i["w"], strides=p["stride"], padding="VALID"),
        "gather_nd": lambda i, p, s: tf.gather_nd(i["src"], i["idx"]),
        "scatter_nd": lambda i, p, s: tf.scatter_nd(indices=i["idx"], updates=i["vals"], shape=s),
        "space_to_depth": lambda i, p, s: tf.nn.space_to_depth(i["x"], block_size=p["block"]),
        "reduce_sum": lambda i, p, s: tf.math.reduce_sum(i["x"], axis=-1),
        "einsum": lambda i, p, s: tf.einsum(p["spec"], *[i[n] for n in p["operands"]]),
    }


# ---- PyTorch (GPU) ---------------------------------------------------------

def torch_ops(torch):
    F = torch.nn.functional

    def conv2d(i, p, s):
        # NHWC data viewed as channels-last NCHW: cuDNN's preferred layout.
        y = F.conv2d(i["x"].permute(0, 3, 1, 2), i["w"].permute(3, 2, 0, 1), stride=tuple(p["stride"]))
        return y.permute(0, 2, 3, 1)

    def scatter_nd(i, p, s):
        out = torch.zeros(s, dtype=i["vals"].dtype, device=i["vals"].device)
        return out.index_put_(_idx_tuple_t(i["idx"]), i["vals"], accumulate=True)

    def space_to_depth(i, p, s):
        x = i["x"]
        s6, s4 = _s2d_shape(x, p["block"])
        return x.reshape(s6).permute(0, 1, 3, 2, 4, 5).reshape(s4)

    def _idx_tuple_t(idx):
        return tuple(idx.long().movedim(-1, 0))

    return {
        "matmul": lambda i, p, s: torch.matmul(i["a"], i["b"]),
        "conv2d": conv2d,
        "gather_nd": lambda i, p, s: i["src"][_idx_tuple_t(i["idx"])],
        "scatter_nd": scatter_nd,
        "space_to_depth": space_to_depth,
        "reduce_sum": lambda i, p, s: i["x"].sum(dim=-1),
        "einsum": lambda i, p, s: torch.einsum(p["spec"], *[i[n] for n in p["operands"]]),
    }


# ---- driver ----------------------------------------------------------------

def rel_err(got, ref):
    got = np.asarray(got, dtype=np.float64)
    ref = np.asarray(ref, dtype=np.float64)
    if got.shape != ref.shape:
        return None
    if ref.size == 0:
        return 0.0
    return float(np.max(np.abs(got - ref)) / max(1.0, float(np.max(np.abs(ref)))))


def median(xs):
    xs = sorted(xs)
    n = len(xs)
    return xs[n // 2] if n % 2 else (xs[n // 2 - 1] + xs[n // 2]) / 2


def time_cpu(f, req):
    f()
    times = []
    start = time.perf_counter()
    while len(times) < req["max_reps"] and (len(times) < req["min_reps"] or time.perf_counter() - start < req["budget_s"]):
        t = time.perf_counter()
        f()
        times.append(time.perf_counter() - t)
    return median(times), len(times)


def time_cuda(torch, f, req):
    for _ in range(5):
        f()
    torch.cuda.synchronize()
    times = []
    for _ in range(max(1, req["min_reps"])):
        a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        a.record()
        f()
        b.record()
        b.synchronize()
        times.append(a.elapsed_time(b) / 1e3)
    return median(times), len(times)


def run_job(job, impl, convert, to_numpy, timer):
    """Check, then time, one framework on one job."""
    ref = np.load(job["output"])
    inputs = {k: convert(np.load(v)) for k, v in job["inputs"].items()}
    f = impl[job["kind"]]
    shape = list(ref.shape)
    try:
        got = to_numpy(f(inputs, job["params"], shape))
    except Exception as e:  # a framework refusing an op is a result, not a crash
        return {"median_s": None, "error": f"failed: {type(e).__name__}: {e}"}
    err = rel_err(got, ref)
    tol = TOLERANCE[job["float"]]
    if err is None or err > tol:
        what = "shape " + str(np.shape(got)) if err is None else f"relative error {err:.3g} > {tol}"
        return {"median_s": None, "max_rel_err": err, "error": f"MISMATCH with eintup: {what}"}
    t, reps = timer(lambda: f(inputs, job["params"], shape))
    return {"median_s": t, "reps": reps, "max_rel_err": err}


def main():
    with open(sys.argv[1]) as fh:
        req = json.load(fh)
    frameworks = {}  # name -> (impl, convert, to_numpy, timer)
    versions = {}
    if req["device"] == "cpu":
        frameworks["numpy"] = (NUMPY, lambda a: a, np.asarray, lambda f: time_cpu(f, req))
        versions["numpy"] = np.__version__
        try:
            os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
            import tensorflow as tf
            frameworks["tensorflow"] = (tf_ops(tf), tf.constant, lambda t: t.numpy(), lambda f: time_cpu(f, req))
            versions["tensorflow"] = tf.__version__
        except Exception as e:
            versions["tensorflow"] = f"unavailable ({type(e).__name__}: {e})"
    else:
        try:
            import torch
            if not torch.cuda.is_available():
                raise RuntimeError("torch.cuda.is_available() is False")
            torch.backends.cuda.matmul.allow_tf32 = False
            torch.backends.cudnn.allow_tf32 = False
            torch.backends.cudnn.benchmark = True
            frameworks["torch"] = (
                torch_ops(torch),
                lambda a: torch.from_numpy(a).cuda(),
                lambda t: t.cpu().numpy(),
                lambda f: time_cuda(torch, f, req),
            )
            versions["torch"] = torch.__version__
        except Exception as e:
            versions["torch"] = f"unavailable ({type(e).__name__}: {e})"
    results = {}
    for job in req["jobs"]:
        per = {}
        for name, (impl, convert, to_numpy, timer) in frameworks.items():
            per[name] = run_job(job, impl, convert, to_numpy, timer)
        for name, v in versions.items():
            if name not in frameworks:
                per[name] = {"median_s": None, "error": v}
        results[job["name"]] = per
    json.dump({"versions": versions, "results": results}, sys.stdout)


if __name__ == "__main__":
    main()
