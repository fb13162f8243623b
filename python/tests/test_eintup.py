"""The Python package `eintup` (docs/python.md): results against NumPy and
the reference interpreter, the compiled-code cache, `out=`, DLPack, and
every error path raising `eintup.Error` with the CLI's message."""
import os
import pathlib

import numpy as np
import pytest

import eintup

ROOT = pathlib.Path(__file__).resolve().parents[2]
EXAMPLES_DIR = ROOT / "docs" / "examples"
EXAMPLES = sorted(EXAMPLES_DIR.glob("*.et"))
MATMUL = ROOT / "docs" / "examples" / "matmul.et"


def rand(shape, dtype=np.float32, seed=0):
    return np.random.default_rng(seed).random(shape).astype(dtype)


@pytest.mark.parametrize("target", ["cpu", "emu", "interp"])
@pytest.mark.parametrize("shapes", [((2, 3, 4), (2, 4, 5)), ((1, 16, 16), (1, 16, 16)), ((3, 0, 4), (3, 4, 5)), ((2, 33, 17), (2, 17, 65)), ((5, 7), (7, 2))])
def test_matmul_equals_numpy_at_several_shapes(target, shapes):
    k = eintup.compile(MATMUL, target=target)
    a, b = rand(shapes[0], seed=1), rand(shapes[1], seed=2)
    c = k(a=a, b=b)["c"]
    np.testing.assert_allclose(c, a @ b, rtol=1e-5, atol=1e-6)
    assert c.dtype == np.float32


@pytest.mark.parametrize("fp_contract", ["off", "fast"])
@pytest.mark.parametrize("rows", [24, 26, 13])
def test_cpu_products_in_six_row_tiles_equal_the_interpreter(fp_contract, rows):
    # Programs the package keeps are compiled as `reused` (docs/passes.md,
    # "The host target"): in f64 on an AVX2 CPU (4 x 16 with AVX-512) rows
    # that 6 divides take a 6 x 8 register tile, others 4 x 8 or 2 x 16
    # (26) or none (13); the sums keep their order, so `off` is the
    # interpreter's bits and `fast` within rounding.
    a, b = rand((2, rows, 40), np.float64, seed=3), rand((2, 40, 48), np.float64, seed=4)
    want = eintup.compile(MATMUL, target="interp", float="f64")(a=a, b=b)["c"]
    got = eintup.compile(MATMUL, target="cpu", float="f64", fp_contract=fp_contract, cache=False)(a=a, b=b)["c"]
    if fp_contract == "off":
        np.testing.assert_array_equal(got, want)
    else:
        np.testing.assert_allclose(got, want, rtol=1e-13)


def test_float64_and_int32():
    a, b = rand((2, 3), np.float64), rand((3, 4), np.float64)
    k = eintup.compile(MATMUL, target="cpu", float="f64")
    c = k(a=a, b=b)["c"]
    np.testing.assert_allclose(c, a @ b, rtol=1e-12)
    assert c.dtype == np.float64
    # Another float width is converted, as `run --input` converts it; an
    # INT array for a FLOAT input is refused.
    np.testing.assert_allclose(k(a=a.astype(np.float32), b=b)["c"], a.astype(np.float32).astype(np.float64) @ b, rtol=1e-12)
    with pytest.raises(eintup.ShapeError, match="E0403"):
        k(a=np.ones((2, 3), np.int32), b=b)
    ints = "x[i] = RANDOM(0, 10, INT)\ny[i] = x[i] * 3\n\ny\n"
    x = np.arange(5, dtype=np.int32)
    y = eintup.compile(ints, target="cpu")(x=x)["y"]
    assert y.dtype == np.int32 and (y == 3 * x).all()


@pytest.mark.parametrize("example", EXAMPLES, ids=lambda p: p.stem)
@pytest.mark.parametrize("target", ["cpu", "emu"])
def test_every_example_agrees_with_the_interpreter(example, target):
    """Inputs drawn by the program's own RANDOM statements (seeds 0..2): the
    compiled targets give the interpreter's results."""
    for seed in range(3):
        want = eintup.compile(example, target="interp", seed=seed)()
        got = eintup.compile(example, target=target, seed=seed, fp_contract="off")()
        assert list(got) == list(want)
        for name in want:
            assert got[name].shape == want[name].shape, name
            np.testing.assert_allclose(got[name], want[name], rtol=1e-5, atol=1e-6, err_msg=f"{example.name} seed {seed} {name}")


@pytest.mark.parametrize("target", ["cpu", "emu"])
def test_softmax_max_pool_and_layer_norm_on_numpy_arrays(target):
    """The new statements and functions through the package (issue #50),
    on the caller's arrays, against NumPy's formulas."""
    x = (rand((2, 3, 9), np.float64, seed=3) - 0.5) * 40
    y = eintup.compile(EXAMPLES_DIR / "softmax.et", target=target, float="f64")(x=x)["y"]
    e = np.exp(x - x.max(axis=-1, keepdims=True))
    np.testing.assert_allclose(y, e / e.sum(axis=-1, keepdims=True), rtol=1e-12, atol=1e-300)
    img = rand((1, 8, 8, 3), np.float64, seed=4)
    pool = eintup.compile(EXAMPLES_DIR / "max_pool.et", target=target, float="f64", binds={"win": [2, 2], "stride": [2, 2]})(x=img)["y"]
    np.testing.assert_array_equal(pool, img.reshape(1, 4, 2, 4, 2, 3).max(axis=(2, 4)))
    f = rand((4, 6), np.float64, seed=5)
    ln = eintup.compile(EXAMPLES_DIR / "layer_norm.et", target=target, float="f64")(x=f)["y"]
    mean, var = f.mean(axis=-1, keepdims=True), f.var(axis=-1, keepdims=True)
    np.testing.assert_allclose(ln, (f - mean) / np.sqrt(var + 0.001), rtol=1e-12)


@pytest.mark.parametrize("target", ["cpu", "emu", "interp"])
def test_vjp_of_a_convolution_and_a_softmax_matches_numpy(target):
    """Kernel.vjp (issue #51) runs the compiled adjoint: a 1-D strided
    convolution's gradients against NumPy's loops, a softmax's against its
    closed form (g - sum(g * y)) * y."""
    k = eintup.compile(EXAMPLES_DIR / "conv_valid.et", target=target, float="f64", binds={"stride": [2]}, grad=["x", "w"])
    assert k.grad == ["x", "w"]
    x, w = rand((2, 9, 3), np.float64, seed=1), rand((3, 3, 4), np.float64, seed=2)
    y = k(x=x, w=w)["y"]
    g = rand(y.shape, np.float64, seed=3) - 0.5
    grads = k.vjp({"x": x, "w": w}, {"y": g})
    gx, gw = np.zeros_like(x), np.zeros_like(w)
    for o in range(y.shape[1]):
        for f in range(w.shape[0]):
            gx[:, 2 * o + f, :] += g[:, o, :] @ w[f].T
            gw[f] += x[:, 2 * o + f, :].T @ g[:, o, :]
    np.testing.assert_allclose(grads["x"], gx, rtol=1e-12)
    np.testing.assert_allclose(grads["w"], gw, rtol=1e-12)
    s = eintup.compile(EXAMPLES_DIR / "softmax.et", target=target, float="f64", grad="x")
    z = (rand((3, 7), np.float64, seed=4) - 0.5) * 10
    p = s(x=z)["y"]
    gy = rand(p.shape, np.float64, seed=5)
    np.testing.assert_allclose(s.vjp({"x": z}, {"y": gy})["x"], (gy - (gy * p).sum(axis=-1, keepdims=True)) * p, rtol=1e-10, atol=1e-15)


def test_deterministic_gpu_gradients_sum_as_the_interpreter(tmp_path, monkeypatch):
    """`deterministic=True` (issue #51): gather_nd's gradient, a scatter
    with colliding indices, compiled without float atomics, equals the
    interpreter's bit for bit; its compiled code is a cache entry of its
    own (the key says `deterministic`)."""
    monkeypatch.setenv("EINTUP_CACHE_DIR", str(tmp_path))
    rng = np.random.default_rng(0)
    src = rng.random((2, 3, 4)) * 10
    idx = rng.integers(0, 3, (2, 40, 1)).astype(np.int32)
    binds = {"batch": [2], "loc": [3], "w": [40], "item": [4]}
    g = rng.random((2, 40, 4))
    want = eintup.compile(EXAMPLES_DIR / "gather_nd.et", target="interp", float="f64", binds=binds, grad=["src"]).vjp({"src": src, "idx": idx}, {"dst": g})["src"]
    plain = eintup.compile(EXAMPLES_DIR / "gather_nd.et", target="emu", float="f64", binds=binds, grad="src")
    plain.vjp({"src": src, "idx": idx}, {"dst": g})
    det = eintup.compile(EXAMPLES_DIR / "gather_nd.et", target="emu", float="f64", binds=binds, grad="src", deterministic=True)
    for _ in range(2):
        np.testing.assert_array_equal(det.vjp({"src": src, "idx": idx}, {"dst": g})["src"], want)
    assert det._adjoint.kernel.disk_cache_info() == (0, 1), "a deterministic build is not the atomic one's entry"


def test_vjp_errors_are_eintup_errors():
    with pytest.raises(eintup.Error, match="E0801.*INT array"):
        eintup.compile(EXAMPLES_DIR / "gather_nd.et", grad=["idx"])
    k = eintup.compile(EXAMPLES_DIR / "softmax.et", float="f64", grad=["x"])
    z = rand((2, 4), np.float64)
    with pytest.raises(eintup.Error, match="missing: y"):
        k.vjp({"x": z}, {})
    with pytest.raises(eintup.Error, match="missing: x"):
        k.vjp({}, {"y": z})
    with pytest.raises(eintup.Error, match="compiled without grad"):
        eintup.compile(EXAMPLES_DIR / "softmax.et").vjp({"x": z}, {"y": z})


@pytest.mark.parametrize("target,calls", [("cpu", 1000), ("emu", 100), ("interp", 100)])
def test_one_kernel_called_from_eight_threads_at_once(target, calls):
    """Kernels are callable from any thread (issue #52 item 1): eight
    threads share one kernel, with shapes that hit and miss its cache, and
    every result is right; an error in a thread is an eintup.Error."""
    import concurrent.futures
    k = eintup.compile(MATMUL, target=target, float="f64")

    def work(i):
        rng = np.random.default_rng(i)
        for j in range(calls):
            n = 2 + (i + j) % 3
            a, b = rng.random((n, 3)), rng.random((3, 4))
            np.testing.assert_allclose(k(a=a, b=b)["c"], a @ b, rtol=1e-12)
        with pytest.raises(eintup.ShapeError):
            k(a=rng.random((2, 3)), b=rng.random((4, 4)))
        return i

    with concurrent.futures.ThreadPoolExecutor(8) as ex:
        assert sorted(ex.map(work, range(8))) == list(range(8))
    hits, misses, entries = k.cache_info()
    assert entries == 3 and hits + misses >= 8 * calls


def test_a_kernel_made_on_one_thread_runs_and_dies_on_another():
    import threading
    box = {}
    t = threading.Thread(target=lambda: box.update(k=eintup.compile(MATMUL, float="f64")))
    t.start()
    t.join()
    a, b = rand((2, 3), np.float64), rand((3, 4), np.float64)
    np.testing.assert_allclose(box["k"](a=a, b=b)["c"], a @ b, rtol=1e-12)
    out = {}
    t = threading.Thread(target=lambda: out.update(c=box.pop("k")(a=a, b=b)["c"]))
    t.start()
    t.join()
    np.testing.assert_allclose(out["c"], a @ b, rtol=1e-12)


def test_kernels_pickle_by_source_and_options_and_run_in_a_fresh_process():
    import pickle
    import subprocess
    import sys
    k = eintup.compile(MATMUL, target="cpu", float="f64", seed=3)
    a, b = rand((2, 3), np.float64), rand((3, 4), np.float64)
    k2 = pickle.loads(pickle.dumps(k))
    np.testing.assert_array_equal(k2(a=a, b=b)["c"], k(a=a, b=b)["c"])
    assert (k2.target, k2.name) == (k.target, k.name)
    # A fresh interpreter, as a `spawn` worker is: the kernel and the
    # arrays arrive pickled, the result goes back pickled.
    code = "import pickle, sys; k, a, b = pickle.load(sys.stdin.buffer); sys.stdout.buffer.write(pickle.dumps(k(a=a, b=b)['c']))"
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(sys.path))
    out = subprocess.run([sys.executable, "-c", code], input=pickle.dumps((k, a, b)), capture_output=True, env=env, check=True).stdout
    np.testing.assert_allclose(pickle.loads(out), a @ b, rtol=1e-12)
    g = pickle.loads(pickle.dumps(eintup.compile(EXAMPLES_DIR / "softmax.et", float="f64", grad=["x"])))
    assert g.grad == ["x"]


def test_bad_compile_arguments_are_eintup_errors():
    with pytest.raises(eintup.Error, match="seed=-1"):
        eintup.compile(MATMUL, seed=-1)
    with pytest.raises(eintup.Error, match="binds=.*expected a mapping"):
        eintup.compile(MATMUL, binds=["batch"])
    with pytest.raises(eintup.Error, match="<string>:2:3: error: the source holds a lone surrogate"):
        eintup.compile("x[i] = RANDOM(0, 1, FLOAT)\ny[\udc80] = x[i]\n")


def test_the_cache_compiles_once_per_shapes():
    k = eintup.compile(MATMUL, target="cpu")
    a, b = rand((2, 3)), rand((3, 4))
    for _ in range(3):
        k(a=a, b=b)
    k(a=rand((5, 3)), b=b)
    assert k.cache_info() == (2, 2, 2)


@pytest.mark.parametrize("target", ["cpu", "emu", "interp"])
def test_out_writes_into_the_callers_array(target):
    k = eintup.compile(MATMUL, target=target)
    a, b = rand((4, 3)), rand((3, 6))
    c = np.full((4, 6), np.nan, np.float32)
    before = c.__array_interface__["data"][0]
    got = k(a=a, b=b, out={"c": c})["c"]
    assert got is c and c.__array_interface__["data"][0] == before
    np.testing.assert_allclose(c, a @ b, rtol=1e-5)
    with pytest.raises(eintup.ShapeError, match="out: `c` is float32\\[4, 5\\], the result is float32\\[4, 6\\]"):
        k(a=a, b=b, out={"c": np.zeros((4, 5), np.float32)})
    with pytest.raises(eintup.Error, match="out: `d` is not a result"):
        k(a=a, b=b, out={"d": c})


def test_non_contiguous_and_dlpack_arrays():
    k = eintup.compile(MATMUL, target="cpu")
    a = rand((6, 4)).T  # Fortran order: copied to C order first
    b = rand((6, 5))
    np.testing.assert_allclose(k(a=a, b=b)["c"], a @ b, rtol=1e-5)

    class Capsule:
        """Only `__dlpack__`, as a framework's CPU tensor exposes it."""

        def __init__(self, x):
            self.x = x

        def __dlpack__(self, **kw):
            return self.x.__dlpack__(**kw)

        def __dlpack_device__(self):
            return self.x.__dlpack_device__()

    np.testing.assert_allclose(k(a=Capsule(np.ascontiguousarray(a)), b=Capsule(b))["c"], a @ b, rtol=1e-5)


def test_source_text_and_binds():
    text = "x[i] = RANDOM(0, 10, FLOAT)\ny[i] = x[i] * 2.0\n\ny\n"
    k = eintup.compile(text, target="cpu", binds={"i": [7]})
    x = rand(7)
    np.testing.assert_allclose(k(x=x)["y"], 2 * x, rtol=1e-6)
    assert len(k()["y"]) == 7


def test_errors_are_exceptions_with_the_cli_message():
    with pytest.raises(eintup.Error, match=r"<string>:1:\d+: error"):
        eintup.compile("y[i] = x[i] +\n", target="cpu")
    with pytest.raises(eintup.Error, match="cannot read"):
        eintup.compile("no/such/file.et")
    with pytest.raises(eintup.Error, match="unknown target `tpu`"):
        eintup.compile(MATMUL, target="tpu")
    with pytest.raises(eintup.Error, match="float `f16`"):
        eintup.compile(MATMUL, float="f16")
    k = eintup.compile(MATMUL, target="cpu")
    with pytest.raises(eintup.ShapeError, match="E0316"):
        k(a=rand((2, 3, 4)), b=rand((2, 5, 5)))
    with pytest.raises(eintup.ShapeError, match="dtype complex64 is not supported"):
        k(a=np.zeros((2, 2), np.complex64), b=rand((2, 2)))
    with pytest.raises(eintup.Error):
        k(a=rand((2, 2)), b=rand((2, 2)), z=rand((2, 2)))
    assert issubclass(eintup.ShapeError, eintup.Error)


def test_usage_errors_name_the_fix():
    """Mistakes in calling the API: bind names and values are checked at
    `compile` (they need no arrays), arrays passed by position, an `out=`
    that is not a dict, and a dtype eintup has no buffers of, each with a
    message saying what to do instead."""
    with pytest.raises(eintup.Error, match=r"E0302\]: --bind names `zzz`"):
        eintup.compile(MATMUL, binds={"zzz": [1]})
    with pytest.raises(eintup.Error, match="E0301"):
        eintup.compile(MATMUL, binds={"batch": [-1]})
    with pytest.raises(eintup.Error, match=r"E0301\]: invalid binding for `batch`: 'x'"):
        eintup.compile(MATMUL, binds={"batch": "x"})
    with pytest.raises(eintup.Error, match="E0301"):
        eintup.load("no/such/bundle", binds={"stride": 2})
    k = eintup.compile(MATMUL, target="cpu", binds={"batch": []})
    a, b = rand((3, 4)), rand((4, 5))
    with pytest.raises(TypeError, match=r"pass arrays by name \(kernel\(a=\.\.\., b=\.\.\.\)\), not by position \(2 positional arguments"):
        k(a, b)
    with pytest.raises(eintup.Error, match="out: expected a dict of result name to array"):
        k(a=a, b=b, out=np.empty((3, 5), np.float32))
    with pytest.raises(eintup.ShapeError, match=r"dtype int64 is not supported .*astype\(numpy.int32\)"):
        k(a=np.ones((3, 4), np.int64), b=b)
    with pytest.raises(eintup.ShapeError, match=r"dtype float16 is not supported .*astype\(numpy.float32\)"):
        k(a=a.astype(np.float16), b=b)
    # A keyword that names no array is that error, before its value is
    # read (`seed` is `compile`'s, not the call's), on every target.
    for target in ["cpu", "interp", "emu"]:
        kt = eintup.compile(MATMUL, target=target, binds={"batch": []})
        with pytest.raises(eintup.Error, match=r"E0401\]: .*no array named `seed`") as e:
            kt(a=a, b=b, seed=3)
        assert not isinstance(e.value, eintup.ShapeError)
        assert "the input arrays are: a, b" in str(e.value)
    np.testing.assert_allclose(k(a=a, b=b)["c"], a @ b, rtol=1e-5)


def _dynamic_matmul_bundle(tmp_path):
    """The dynamic matmul bundle of a loop module with dim symbols, built by
    `eintup build M.etir` (the test skips without the built CLI)."""
    import subprocess

    eintup_bin = ROOT / "target" / "debug" / "eintup"
    if not eintup_bin.exists():
        pytest.skip("target/debug/eintup is not built")
    b = tmp_path / "dyn.etb"
    module = ROOT / "compiler" / "tests" / "Inputs" / "dynamic_matmul.etir"
    subprocess.run([str(eintup_bin), "build", str(module), "-o", str(b)], check=True, capture_output=True)
    return b


def test_load_rebinds_a_dynamic_bundle_to_each_call_s_shapes(tmp_path):
    """A dynamic bundle (a loop module with dim symbols, `eintup build
    M.etir`; docs/bundle.md#dynamic-bundles) loaded once runs at the dims
    each call's arrays give, equal to NumPy; contradicting arrays raise."""
    bk = eintup.load(_dynamic_matmul_bundle(tmp_path))
    rng = np.random.default_rng(5)
    for (n, r, k, c) in [(2, 3, 4, 5), (1, 33, 17, 65), (3, 0, 4, 5), (2, 3, 4, 5)]:
        a = rng.integers(-9, 9, (n, r, k)).astype(np.int32)
        bb = rng.integers(-9, 9, (n, k, c)).astype(np.int32)
        np.testing.assert_array_equal(bk(a=a, b=bb)["c"], a @ bb)
    with pytest.raises(eintup.ShapeError, match="input `b`: dim 1 is 5, but it is dim `k.0`, which `a` gives as 4 \\(its dim 2\\)"):
        bk(a=np.zeros((2, 3, 4), np.int32), b=np.zeros((2, 5, 6), np.int32))


def test_a_dynamic_bundle_called_from_four_threads_at_once(tmp_path):
    """Bundles are callable from any thread (issue #52 item 1): calls take
    turns on the loaded program, each re-binding it to its shapes."""
    import concurrent.futures

    bk = eintup.load(_dynamic_matmul_bundle(tmp_path))

    def work(i):
        rng = np.random.default_rng(i)
        for j in range(30):
            n, r = 1 + (i + j) % 2, 2 + (i * j) % 3
            a = rng.integers(-9, 9, (n, r, 4)).astype(np.int32)
            bb = rng.integers(-9, 9, (n, 4, 3)).astype(np.int32)
            np.testing.assert_array_equal(bk(a=a, b=bb)["c"], a @ bb)
        return bk.device

    with concurrent.futures.ThreadPoolExecutor(4) as ex:
        assert list(ex.map(work, range(4))) == ["emu"] * 4


def test_load_runs_an_ahead_of_time_bundle(tmp_path):
    """`eintup build` output, loaded once and called like a kernel; inputs
    left out are generated by the bundle, as the interpreter draws them."""
    import subprocess

    eintup_bin = ROOT / "target" / "debug" / "eintup"
    if not eintup_bin.exists():
        pytest.skip("target/debug/eintup is not built")
    b = tmp_path / "mm.etb"
    binds = ["--bind", "batch=[2]", "--bind", "row=[3]", "--bind", "k=[4]", "--bind", "col=[5]"]
    subprocess.run([str(eintup_bin), "build", str(MATMUL), *binds, "--float", "f32", "-o", str(b)], check=True, capture_output=True)
    bk = eintup.load(b)
    assert bk.device == "emu"
    with pytest.raises(eintup.Error, match="stream: .* is loaded on the emulator, which runs on no stream"):
        bk(a=rand((2, 3, 4)), b=rand((2, 4, 5)), stream=1)
    assert [(n, d, s) for n, d, s, _ in bk.inputs] == [("a", "float32", [2, 3, 4]), ("b", "float32", [2, 4, 5])]
    a, bb = rand((2, 3, 4), seed=3), rand((2, 4, 5), seed=4)
    for _ in range(2):  # loaded once, run twice: outputs start from zero each time
        np.testing.assert_allclose(bk(a=a, b=bb)["c"], a @ bb, rtol=1e-5)
    c = np.full((2, 3, 5), np.nan, np.float32)
    assert bk(a=a, b=bb, out={"c": c})["c"] is c
    np.testing.assert_allclose(c, a @ bb, rtol=1e-5)
    want = eintup.compile(MATMUL, target="interp", float="f32", binds={"batch": [2], "row": [3], "k": [4], "col": [5]})()["c"]
    np.testing.assert_allclose(bk()["c"], want, rtol=1e-5)
    with pytest.raises(eintup.ShapeError, match="input `a`: shape \\[3, 4\\], expected \\[2, 3, 4\\]"):
        bk(a=rand((3, 4)), b=bb)
    with pytest.raises(eintup.Error, match="device `tpu`: expected emu, cuda or cuda:N"):
        eintup.load(b, device="tpu")
    with pytest.raises(eintup.Error, match="no/such.etb"):
        eintup.load("no/such.etb")


def test_cpu_calls_run_on_the_callers_memory():
    """Fitting arrays (C-contiguous, aligned, the buffer's dtype) are used in
    place: no copy; each array that does not fit is copied once."""
    k = eintup.compile(MATMUL, target="cpu")
    a, b = rand((2, 3, 4), seed=5), rand((2, 4, 5), seed=6)
    a0, b0 = a.copy(), b.copy()
    np.testing.assert_allclose(k(a=a, b=b)["c"], a0 @ b0, rtol=1e-5)
    assert k.last_copies == 0
    assert (a == a0).all() and (b == b0).all()  # inputs are only read
    # Read-only inputs are fine: nothing writes them.
    a.flags.writeable = False
    np.testing.assert_allclose(k(a=a, b=b)["c"], a0 @ b0, rtol=1e-5)
    assert k.last_copies == 0
    # Fortran order: one copy.
    np.testing.assert_allclose(k(a=np.asfortranarray(a), b=b)["c"], a0 @ b0, rtol=1e-5)
    assert k.last_copies == 1
    # Misaligned (a float32 array one byte into its buffer): one copy.
    raw = bytearray(a.nbytes + 1)
    mis = np.frombuffer(raw, dtype=np.float32, count=a.size, offset=1).reshape(a.shape)
    mis[...] = a0
    assert mis.__array_interface__["data"][0] % 4 != 0
    np.testing.assert_allclose(k(a=mis, b=b)["c"], a0 @ b0, rtol=1e-5)
    assert k.last_copies == 1
    # float64 for a float32 kernel: converted, one copy each.
    np.testing.assert_allclose(k(a=a0.astype(np.float64), b=b0.astype(np.float64))["c"], a0 @ b0, rtol=1e-5)
    assert k.last_copies == 2


def test_temporaries_start_from_zero_on_every_call():
    """A temporary the program adds to first (`t[i] += ..`) is cleared
    before each call; one it writes whole first (two products' panels,
    which share one buffer) is not, and need not be: every call gives the
    first call's result."""
    acc = eintup.compile("x[i] = RANDOM(0, 9, INT)\nt[i] += x[i]\ny[i] = t[i] * 2\n\ny\n", target="cpu")
    x = np.arange(5, dtype=np.int32)
    for _ in range(3):
        np.testing.assert_array_equal(acc(x=x)["y"], 2 * x)
    two = eintup.compile(
        "a[i,j] = RANDOM(0, 9, INT)\nb[j,l] = RANDOM(0, 9, INT)\nc[i,l] = a[i,j] * b[j,l]\n"
        "d[l,m] = RANDOM(0, 9, INT)\ne[i,m] = c[i,l] * d[l,m]\n\ne\n",
        target="cpu",
    )
    rng = np.random.default_rng(1)
    # Operands past cache-tiles' 512 KiB panel bound: both are packed.
    a, b, d = (rng.integers(0, 9, s, dtype=np.int32) for s in ((8, 400), (400, 384), (384, 384)))
    want = a.astype(np.int64) @ b @ d
    for _ in range(2):
        np.testing.assert_array_equal(two(a=a, b=b, d=d)["e"], want)


def test_out_is_written_in_place_without_a_copy():
    k = eintup.compile(MATMUL, target="cpu")
    a, b = rand((2, 3, 4), seed=7), rand((2, 4, 5), seed=8)
    c = np.full((2, 3, 5), np.nan, np.float32)
    ptr = c.__array_interface__["data"][0]
    for _ in range(2):  # zeroed before each call: no accumulation into the last result
        assert k(a=a, b=b, out={"c": c})["c"] is c
        assert k.last_copies == 0 and c.__array_interface__["data"][0] == ptr
        np.testing.assert_allclose(c, a @ b, rtol=1e-5)
    # A non-contiguous out= array: written through one copy.
    ct = np.full((2, 5, 3), np.nan, np.float32).transpose(0, 2, 1)
    assert k(a=a, b=b, out={"c": ct})["c"] is ct and k.last_copies == 1
    np.testing.assert_allclose(ct, a @ b, rtol=1e-5)
    with pytest.raises(eintup.ShapeError, match="out: `c`: not a writable array"):
        ro = np.zeros((2, 3, 5), np.float32)
        ro.flags.writeable = False
        k(a=a, b=b, out={"c": ro})
    with pytest.raises(eintup.ShapeError, match="out: `c` is float64"):
        k(a=a, b=b, out={"c": np.zeros((2, 3, 5))})


def test_out_aliasing_an_input_is_still_correct():
    """An out= array that is also an input's memory cannot be written while
    it is read (the code assumes no aliasing): written through a copy."""
    k = eintup.compile("x[i] = RANDOM(0, 10, FLOAT)\ny[i] = x[i] * 2.0 + x[(i + 1) % DIMS(i)]\n\ny\n", target="cpu")
    x = rand(6, seed=9)
    want = 2 * x + np.roll(x, -1)
    got = k(x=x, out={"y": x})["y"]
    assert got is x and k.last_copies == 1
    np.testing.assert_allclose(x, want, rtol=1e-6)


def _run_child(code, cache):
    """`code` in a fresh Python process with cache dir `cache`; its stdout."""
    import os
    import subprocess
    import sys

    env = dict(os.environ, EINTUP_CACHE_DIR=str(cache), PYTHONPATH=os.pathsep.join(sys.path))
    r = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr
    return r.stdout


CHILD = """
import json, numpy as np, eintup
k = eintup.compile({path!r}, target={target!r})
a = np.arange(24, dtype=np.float32).reshape(2, 3, 4) / 7
b = np.arange(40, dtype=np.float32).reshape(2, 4, 5) / 5
c = k(a=a, b=b)["c"]
assert np.allclose(c, a @ b, rtol=1e-5), "wrong result"
print(json.dumps(k.disk_cache_info()))
"""


@pytest.mark.parametrize("target", ["cpu", "emu"])
def test_a_second_process_gets_the_kernel_from_disk(tmp_path, target):
    import json

    code = CHILD.format(path=str(MATMUL), target=target)
    assert json.loads(_run_child(code, tmp_path)) == [0, 1]  # compiled, stored
    entries = [p for p in tmp_path.iterdir() if not p.name.startswith(("tmp-", "gone-"))]
    assert len(entries) == 1
    assert json.loads(_run_child(code, tmp_path)) == [1, 0]  # a hit: nothing compiled
    # Every file of the entry damaged in turn: ignored, recompiled, stored again.
    files = sorted(str(p.relative_to(entries[0])) for p in entries[0].rglob("*") if p.is_file() and p.name != "key")
    assert {"module.et", "checksums"} <= set(files) and len(files) >= 3, files
    for f in files:
        entry = next(p for p in tmp_path.iterdir() if not p.name.startswith(("tmp-", "gone-")))
        data = (entry / f).read_bytes()
        (entry / f).write_bytes(data[: len(data) // 2] + b"garbage")
        assert json.loads(_run_child(code, tmp_path)) == [0, 1], f
        assert json.loads(_run_child(code, tmp_path)) == [1, 0], f


def test_a_disk_hit_reports_errors_located_in_the_source(tmp_path):
    """An int32 array for a FLOAT input: the kernel for those shapes compiles
    (and is stored), the call fails. In a second process the kernel comes
    from disk, and the message still points into matmul.et."""
    code = f"""
import numpy as np, eintup
k = eintup.compile({str(MATMUL)!r}, target="cpu")
try:
    k(a=np.ones((2, 3, 4), np.int32), b=np.ones((2, 4, 5), np.float32))
except eintup.ShapeError as e:
    print(list(k.disk_cache_info()), e)
"""
    first, second = _run_child(code, tmp_path), _run_child(code, tmp_path)
    assert first.startswith("[0, 1]") and second.startswith("[1, 0]")
    for out in (first, second):
        assert "error[E0403]" in out and "matmul.et:2:1" in out and "a[batch,row,k] = RANDOM(0, 10, FLOAT)" in out
    assert first[len("[0, 1]"):] == second[len("[1, 0]"):]


def test_the_disk_cache_keeps_the_recently_used_within_its_bound(tmp_path, monkeypatch):
    """EINTUP_CACHE_MAX_BYTES bounds the disk cache: each store removes the
    least recently used entries beyond it (a hit counts as a use), and
    private directories that a killed process left behind."""
    import os
    import time

    monkeypatch.setenv("EINTUP_CACHE_DIR", str(tmp_path))

    def entries():
        return {p: (p / "key").read_text() for p in tmp_path.iterdir() if not p.name.startswith(("tmp-", "gone-"))}

    def call(rows):
        # A new kernel each time: its in-memory cache is empty, so the disk
        # is asked (and a hit marks the entry used).
        k = eintup.compile(MATMUL, target="cpu")
        a, b = rand((2, rows, 4)), rand((2, 4, 5))
        np.testing.assert_allclose(k(a=a, b=b)["c"], a @ b, rtol=1e-5)
        time.sleep(0.05)  # distinct use times for the order, not a timing test
        return k.disk_cache_info()

    def held():
        return sorted(r for r in (3, 5, 7, 9) for key in entries().values() if f"[2, {r}, 4]" in key)

    assert call(3) == (0, 1)
    size = sum(f.stat().st_size for f in tmp_path.rglob("*") if f.is_file())
    # Room for two entries of this size, not three.
    monkeypatch.setenv("EINTUP_CACHE_MAX_BYTES", str(size * 5 // 2))
    stale = tmp_path / "tmp-1-2-0123456789abcdef"
    stale.mkdir()
    (stale / "key").write_text("half written")
    os.utime(stale, (time.time() - 7200, time.time() - 7200))
    assert call(5) == (0, 1) and held() == [3, 5]
    assert not stale.exists()
    assert call(3) == (1, 0)  # 3 is now used later than 5
    assert call(7) == (0, 1) and held() == [3, 7]
    assert call(9) == (0, 1) and held() == [7, 9]
    monkeypatch.setenv("EINTUP_CACHE_MAX_BYTES", "lots")
    with pytest.raises(eintup.Error, match="EINTUP_CACHE_MAX_BYTES=`lots`: expected a number of bytes"):
        eintup.compile(MATMUL, target="cpu")


def test_the_gil_is_released_while_a_kernel_runs():
    """Another Python thread runs while a kernel computes. With a switch
    interval far longer than the call, a thread that wakes from a short
    sleep gets the GIL only when the caller releases it: during the kernel
    if the package releases it, after the call otherwise. What the thread
    sees is asserted, not a duration: a call too short for the thread to
    wake inside it counts for nothing, and the emulator's call (about 0.2 s
    here, interpreted PTX) is long on any machine. Three tries, so that a
    thread the OS leaves unscheduled through a whole call on a loaded
    machine is no failure; a GIL held through the call fails all three."""
    import sys
    import threading
    import time

    def watched(k, a, b):
        running, seen = [False], []

        def watcher():
            time.sleep(0.001)  # releases the GIL; waking needs it back
            seen.append(running[0])

        old = sys.getswitchinterval()
        sys.setswitchinterval(100.0)
        try:
            t = threading.Thread(target=watcher)
            t.start()
            running[0] = True
            start = time.perf_counter()
            c = k(a=a, b=b)["c"]
            took = time.perf_counter() - start
            running[0] = False
            t.join()
        finally:
            sys.setswitchinterval(old)
        np.testing.assert_allclose(c, a @ b, rtol=1e-9)
        return took, seen == [True]

    for target, n in [("cpu", 1000), ("emu", 128)]:
        k = eintup.compile(MATMUL, target=target, float="f64")
        a, b = rand((1, n, n), np.float64), rand((1, n, n), np.float64, seed=1)
        k(a=a, b=b)  # compiled now, not during the watched calls
        tries = [watched(k, a, b) for _ in range(3)]
        long_calls = [ran for took, ran in tries if took > 0.05]
        assert target != "emu" or long_calls, f"emu: calls of {[t for t, _ in tries]} s"
        assert not long_calls or any(long_calls), f"{target}: the watcher ran only after each call {[t for t, _ in tries]}"


def test_the_disk_cache_can_be_disabled(tmp_path, monkeypatch):
    monkeypatch.setenv("EINTUP_CACHE_DIR", "")
    assert eintup.cache_dir() is None
    k = eintup.compile(MATMUL, target="cpu")
    assert k.cache_dir is None
    k(a=rand((2, 3)), b=rand((3, 2)))
    assert k.disk_cache_info() == (0, 0)
    monkeypatch.setenv("EINTUP_CACHE_DIR", str(tmp_path))
    assert eintup.cache_dir() == str(tmp_path)
    k = eintup.compile(MATMUL, target="cpu", cache=False)
    k(a=rand((2, 3)), b=rand((3, 2)))
    assert k.disk_cache_info() == (0, 0) and list(tmp_path.iterdir()) == []
    monkeypatch.delenv("EINTUP_CACHE_DIR")
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    assert eintup.cache_dir() == str(tmp_path / "xdg" / "eintup")


def test_every_public_name_is_documented_and_stubbed():
    """Docstrings on everything public; the stub (_eintup.pyi) declares only
    what the extension has, and everything it has."""
    import ast
    import inspect

    for name in eintup.__all__:
        obj = getattr(eintup, name)
        assert inspect.getdoc(obj), name
        if inspect.isclass(obj) and not issubclass(obj, Exception):
            for attr, member in vars(obj).items():
                if not attr.startswith("_") or attr == "__call__":
                    assert inspect.getdoc(member), f"{name}.{attr}"
    stub = ast.parse((ROOT / "python" / "eintup" / "_eintup.pyi").read_text())
    declared = {n.name: n for n in stub.body if isinstance(n, (ast.ClassDef, ast.FunctionDef))}
    ext = eintup._eintup
    public = {n for n in dir(ext) if not n.startswith("_")}
    assert set(declared) == public
    for cname, node in declared.items():
        if isinstance(node, ast.ClassDef):
            # Protocol dunders (`__dlpack__`) are stubbed for type checkers.
            members = {m.name for m in node.body if isinstance(m, ast.FunctionDef) and not m.name.startswith("_")}
            have = {m for m in dir(getattr(ext, cname)) if not m.startswith("_")} - set(dir(Exception))
            assert members == have, cname


def test_the_overhead_benchmark_runs(tmp_path):
    """bench/overhead.py (scripts/bench's overhead section) at a few calls:
    its report is complete, the kernel ran without copies, and its second
    compile came from the disk cache. No timing is asserted."""
    import json
    import subprocess
    import sys

    out = tmp_path / "o.json"
    subprocess.run([sys.executable, str(ROOT / "bench" / "overhead.py"), "--quick", "--json", str(out)], check=True, capture_output=True, timeout=300)
    r = json.loads(out.read_text())
    assert r["eintup_us"] > 0 and r["numpy_us"] > 0 and r["ratio"] == pytest.approx(r["eintup_us"] / r["numpy_us"])
    assert r["copies_per_call"] == 0 and r["disk_miss"] == [0, 1] and r["disk_hit"] == [1, 0]


def test_an_unwritable_cache_only_costs_compiles(tmp_path, monkeypatch):
    """A cache path that cannot be a directory: kernels still compile and
    run; nothing is stored, so a second kernel compiles again."""
    blocker = tmp_path / "a-file"
    blocker.write_text("not a directory")
    monkeypatch.setenv("EINTUP_CACHE_DIR", str(blocker / "eintup"))
    a, b = rand((2, 3)), rand((3, 2))
    for _ in range(2):
        k = eintup.compile(MATMUL, target="cpu")
        np.testing.assert_allclose(k(a=a, b=b)["c"], a @ b, rtol=1e-5)
        assert k.disk_cache_info() == (0, 1)


def test_a_cache_others_can_write_to_is_not_used(tmp_path):
    """A cache directory writable by group or others (a shared
    EINTUP_CACHE_DIR): one warning on stderr, the kernel compiled without
    it, nothing stored; a new cache is private (0700 / 0600) whatever the
    umask (issue #49 item 1; docs/python.md, "The cache")."""
    import os
    import subprocess
    import sys

    code = (
        "import numpy as np, eintup\n"
        f"for _ in range(2):\n"
        f"    k = eintup.compile({str(MATMUL)!r}, target='cpu')\n"
        "    a, b = np.ones((2, 3), np.float32), np.ones((3, 2), np.float32)\n"
        "    assert (k(a=a, b=b)['c'] == 3).all()\n"
        "    print(k.disk_cache_info())\n"
    )

    def child(cache, umask=None):
        env = dict(os.environ, EINTUP_CACHE_DIR=str(cache), PYTHONPATH=os.pathsep.join(sys.path))
        pre = (lambda: os.umask(umask)) if umask is not None else None
        r = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=300, preexec_fn=pre)
        assert r.returncode == 0, r.stderr
        return r.stdout.split("\n")[:2], r.stderr

    shared = tmp_path / "shared"
    shared.mkdir()
    shared.chmod(0o1777)
    out, err = child(shared)
    assert out == ["(0, 1)", "(0, 1)"]
    assert err.count("eintup: warning: not using the compile cache") == 1, err
    assert "is writable by group or others (mode 1777)" in err
    assert list(shared.iterdir()) == []

    mine = tmp_path / "mine" / "cache"
    out, err = child(mine, umask=0)
    assert out == ["(0, 1)", "(1, 0)"] and "warning" not in err, err
    modes = {p.relative_to(tmp_path).as_posix(): p.stat().st_mode & 0o7777 for p in [mine.parent, mine, *mine.rglob("*")]}
    assert all(m == (0o700 if (tmp_path / p).is_dir() else 0o600) for p, m in modes.items()), modes


def test_load_runs_a_program_s_dynamic_bundle_with_binds(tmp_path):
    """`eintup build conv_valid.et --dynamic`: one bundle for every
    convolution of its ranks; the stride no input gives comes from
    `binds`, the output's extent from the program's equation. Equal to
    NumPy at several shapes; a missing stride and a contradicting bind
    raise eintup.Error before anything runs."""
    import subprocess

    eintup_bin = ROOT / "target" / "debug" / "eintup"
    if not eintup_bin.exists():
        pytest.skip("target/debug/eintup is not built")
    b = tmp_path / "conv.etb"
    conv = ROOT / "docs" / "examples" / "conv_valid.et"
    subprocess.run([str(eintup_bin), "build", str(conv), "--dynamic", "--rank", "ipos=1", "-o", str(b)], check=True, capture_output=True)
    rng = np.random.default_rng(7)

    def reference(x, w, s):
        n, p, _ = x.shape
        f, _, o = w.shape
        q = (p - f + 1 + s - 1) // s
        y = np.zeros((n, q, o))
        for j in range(q):
            y[:, j, :] = np.einsum("npc,pco->no", x[:, j * s:j * s + f, :], w)
        return y

    for (n, p, c, f, o, s) in [(2, 37, 3, 5, 4, 3), (1, 8, 1, 8, 2, 1), (3, 20, 2, 3, 5, 2)]:
        bk = eintup.load(b, binds={"stride": [s]})
        x, w = rng.uniform(0, 10, (n, p, c)), rng.uniform(0, 1, (f, c, o))
        np.testing.assert_allclose(bk(x=x, w=w)["y"], reference(x, w, s), rtol=1e-12)
    with pytest.raises(eintup.Error, match="stride.0.*given by no input"):
        eintup.load(b)(x=rng.uniform(0, 1, (1, 9, 1)), w=rng.uniform(0, 1, (3, 1, 1)))
    with pytest.raises(eintup.Error, match="`stride`: has rank 1 in this bundle, not 2"):
        eintup.load(b, binds={"stride": [1, 1]})


def test_a_dynamic_kernel_compiles_once_per_rank_combination():
    """`compile(..., target="emu", dynamic=True)`: the first call builds one
    dynamic bundle (`build --dynamic`); calls at other shapes of the same
    ranks bind it and compile nothing; equal to NumPy at each (f64); a
    batch of another rank builds a second. Inputs left out are generated
    as the interpreter draws them."""
    k = eintup.compile(MATMUL, target="emu", float="f64", dynamic=True, cache=False)
    rng = np.random.default_rng(11)
    for (n, r, kk, c) in [(2, 3, 4, 5), (1, 33, 17, 65), (3, 0, 4, 5), (2, 16, 16, 16)]:
        a, b = rng.uniform(-1, 1, (n, r, kk)), rng.uniform(-1, 1, (n, kk, c))
        np.testing.assert_allclose(k(a=a, b=b)["c"], a @ b, rtol=1e-12)
    assert k.dynamic_builds() == 1
    a, b = rng.uniform(-1, 1, (2, 2, 3, 4)), rng.uniform(-1, 1, (2, 2, 4, 5))
    np.testing.assert_allclose(k(a=a, b=b)["c"], a @ b, rtol=1e-12)
    assert k.dynamic_builds() == 2
    static = eintup.compile(MATMUL, target="interp", float="f64", binds={"batch": [2], "row": [3], "k": [4], "col": [5]})
    np.testing.assert_allclose(eintup.compile(MATMUL, target="emu", float="f64", binds={"batch": [2], "row": [3], "k": [4], "col": [5]}, dynamic=True, cache=False)()["c"], static()["c"], rtol=1e-12)
    with pytest.raises(eintup.Error, match="dynamic=True builds GPU bundles"):
        eintup.compile(MATMUL, target="cpu", dynamic=True)


def test_special_files_are_refused_without_reading(tmp_path):
    """A FIFO as a source or as a bundle's manifest, /dev/zero as a source:
    eintup.Error at once, no hang, no MemoryError (issue #49 item 5)."""
    import os

    fifo = tmp_path / "p.et"
    os.mkfifo(fifo)
    with pytest.raises(eintup.Error, match=r"not a regular file \(a FIFO\)"):
        eintup.compile(fifo)
    with pytest.raises(eintup.Error, match=r"not a regular file \(a character device\)"):
        eintup.compile(pathlib.Path("/dev/zero"))
    bundle = tmp_path / "b.etb"
    bundle.mkdir()
    (bundle / "kernels.ptx").write_text("")
    os.mkfifo(bundle / "manifest.json")
    with pytest.raises(eintup.Error, match=r"manifest.json: not a regular file \(a FIFO\)"):
        eintup.load(bundle)


def test_an_emulator_run_too_large_for_the_machine_is_an_error(tmp_path):
    """target="emu" with arrays whose race records do not fit (here: a
    2 GiB address-space limit in a child process) raises eintup.Error with
    the size; the interpreter process lives on (issue #49 item 4)."""
    import os
    import subprocess
    import sys

    code = (
        "import resource, numpy as np, eintup\n"
        "resource.setrlimit(resource.RLIMIT_AS, (2 << 30, 2 << 30))\n"
        "k = eintup.compile('x[i] = RANDOM(0, 1, FLOAT)\\ny[i] = x[i] * 2.0\\ny\\n', target='emu', cache=False)\n"
        "try:\n"
        "    k(x=np.ones(40_000_000, np.float32))\n"
        "except eintup.Error as e:\n"
        "    print(e)\n"
        "print((k(x=np.ones(3, np.float32))['y'] == 2).all())\n"
    )
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(sys.path))
    r = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr
    assert r.stdout.splitlines() == [
        "eintup: error: cannot allocate 1600000000 bytes of host memory for the race records of buffer `x` (10 bytes per byte of it; EINTUP_EMU_RACES=off runs without race checks)",
        "True",
    ], r.stdout
