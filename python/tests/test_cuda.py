"""The `cuda` target and `load(..., device="cuda")` (docs/python.md, "CUDA").

Without a GPU: the DLPack import path, with capsules made here (NumPy's, and
hand-made `DLManagedTensor`/`DLManagedTensorVersioned` structs through
ctypes that claim to be CUDA memory): what is accepted reaches the device
and fails there with the runtime's no-driver message; what is not is
refused first, with a message naming the array; every capsule taken is
renamed and its deleter called exactly once. With a GPU (the tests marked
`gpu`, skipped otherwise): results against NumPy, zero copies, `out=`,
streams, PyTorch interop.
"""
import ctypes
import pathlib
import subprocess
import sys

import numpy as np
import pytest

import eintup

ROOT = pathlib.Path(__file__).resolve().parents[2]
MATMUL = ROOT / "docs" / "examples" / "matmul.et"
HAS_CUDA = eintup.cuda_device_count() > 0
gpu = pytest.mark.skipif(not HAS_CUDA, reason="no CUDA driver or device")
no_gpu = pytest.mark.skipif(HAS_CUDA, reason="checks the no-driver path")
NO_DRIVER = r"error: no CUDA driver found \(libcuda could not be loaded\)"

# ---- DLPack structs (dlpack.h v1.0), as a producer fills them -------------


class DLDevice(ctypes.Structure):
    _fields_ = [("device_type", ctypes.c_int32), ("device_id", ctypes.c_int32)]


class DLDataType(ctypes.Structure):
    _fields_ = [("code", ctypes.c_uint8), ("bits", ctypes.c_uint8), ("lanes", ctypes.c_uint16)]


class DLTensor(ctypes.Structure):
    _fields_ = [("data", ctypes.c_void_p), ("device", DLDevice), ("ndim", ctypes.c_int32), ("dtype", DLDataType),
                ("shape", ctypes.POINTER(ctypes.c_int64)), ("strides", ctypes.POINTER(ctypes.c_int64)), ("byte_offset", ctypes.c_uint64)]


DELETER = ctypes.CFUNCTYPE(None, ctypes.c_void_p)


class DLManagedTensor(ctypes.Structure):
    _fields_ = [("dl_tensor", DLTensor), ("manager_ctx", ctypes.c_void_p), ("deleter", DELETER)]


class DLPackVersion(ctypes.Structure):
    _fields_ = [("major", ctypes.c_uint32), ("minor", ctypes.c_uint32)]


class DLManagedTensorVersioned(ctypes.Structure):
    _fields_ = [("version", DLPackVersion), ("manager_ctx", ctypes.c_void_p), ("deleter", DELETER), ("flags", ctypes.c_uint64), ("dl_tensor", DLTensor)]


_api = ctypes.pythonapi
DESTRUCTOR = ctypes.CFUNCTYPE(None, ctypes.c_void_p)
_api.PyCapsule_New.restype = ctypes.py_object
_api.PyCapsule_New.argtypes = [ctypes.c_void_p, ctypes.c_char_p, DESTRUCTOR]
_api.PyCapsule_IsValid.restype = ctypes.c_int
_api.PyCapsule_IsValid.argtypes = [ctypes.c_void_p, ctypes.c_char_p]
_api.PyCapsule_GetName.restype = ctypes.c_char_p
_api.PyCapsule_GetName.argtypes = [ctypes.py_object]

DTYPES = {"float32": (2, 32, 1), "float64": (2, 64, 1), "int32": (0, 32, 1), "float16": (2, 16, 1), "int64": (0, 64, 1), "float32x2": (2, 32, 2), "bool": (6, 8, 1)}


def capsule_name(cap):
    return _api.PyCapsule_GetName(cap).decode()


class FakeCuda:
    """A producer of (pretend) CUDA memory: `__dlpack__` hands out a fresh
    capsule of a hand-made tensor whose deleter counts its calls. Its data
    pointer is never dereferenced (there is no device), so any address
    does; the checks under test run before any use."""

    def __init__(self, shape, dtype="float32", device=(2, 0), tensor_device=None, strides=None, byte_offset=0,
                 data=0x7F0000000000, versioned=True, version=(1, 0), read_only=False, ndim=None, null_shape=False):
        self.device = device
        self.calls = []  # the kwargs of each __dlpack__ call
        self.capsules = []
        self.deleted = 0
        self.kept = []  # ctypes objects the capsules point into
        self.args = dict(shape=shape, dtype=dtype, tensor_device=tensor_device or device, strides=strides, byte_offset=byte_offset,
                         data=data, versioned=versioned, version=version, read_only=read_only, ndim=ndim, null_shape=null_shape)

    def __dlpack_device__(self):
        return self.device

    def __dlpack__(self, stream=None, max_version=None, **kw):
        a = self.args
        self.calls.append(dict(stream=stream, max_version=max_version, **kw))
        shape = (ctypes.c_int64 * max(1, len(a["shape"])))(*a["shape"])
        strides = None if a["strides"] is None else (ctypes.c_int64 * len(a["strides"]))(*a["strides"])
        t = DLTensor(data=a["data"], device=DLDevice(*a["tensor_device"]), ndim=len(a["shape"]) if a["ndim"] is None else a["ndim"],
                     dtype=DLDataType(*DTYPES[a["dtype"]]), shape=None if a["null_shape"] else shape,
                     strides=strides if strides is not None else None, byte_offset=a["byte_offset"])

        def deleter(_ptr):
            self.deleted += 1

        d = DELETER(deleter)
        versioned = a["versioned"] and max_version is not None
        if versioned:
            m = DLManagedTensorVersioned(version=DLPackVersion(*a["version"]), manager_ctx=None, deleter=d, flags=1 if a["read_only"] else 0, dl_tensor=t)
            name = b"dltensor_versioned"
        else:
            m = DLManagedTensor(dl_tensor=t, manager_ctx=None, deleter=d)
            name = b"dltensor"

        # The producer's capsule destructor, as the protocol asks: frees an
        # unconsumed tensor only.
        def destructor(cap, api=_api):  # `api` bound: may run at exit
            if api.PyCapsule_IsValid(cap, name):
                self.deleted += 1

        dest = DESTRUCTOR(destructor)
        self.kept += [shape, strides, m, d, dest]
        cap = _api.PyCapsule_New(ctypes.addressof(m), name, dest)
        self.capsules.append(cap)
        return cap


class LegacyFakeCuda(FakeCuda):
    """A producer older than DLPack 1.0: no `max_version` keyword."""

    def __dlpack__(self, stream=None):
        return super().__dlpack__(stream=stream)


def call_matmul(**arrays):
    k = eintup.compile(MATMUL, target="cuda")
    return k(**arrays)


# ---- Without a GPU ----------------------------------------------------------


@no_gpu
def test_no_driver_is_an_error_at_the_first_call_and_at_load(tmp_path):
    assert eintup.cuda_device_count() == 0
    k = eintup.compile(MATMUL, target="cuda")  # the device is the arrays': nothing opened yet
    assert k.target == "cuda"
    with pytest.raises(eintup.Error, match=NO_DRIVER) as e:
        k(a=np.ones((2, 3), np.float32), b=np.ones((3, 4), np.float32))
    assert not isinstance(e.value, eintup.ShapeError)
    b = mm_bundle(tmp_path)
    for device in ["cuda", "cuda:1", "gpu"]:
        with pytest.raises(eintup.Error, match=NO_DRIVER):
            eintup.load(b, device=device)
    with pytest.raises(eintup.Error, match="device `cuda:x`"):
        eintup.load(b, device="cuda:x")


@no_gpu
@pytest.mark.parametrize("producer", [FakeCuda, LegacyFakeCuda])
def test_cuda_arrays_are_taken_checked_and_released_once(producer):
    """Accepted arrays reach the device (the no-driver error comes after
    them); their capsules are renamed and their deleters called once."""
    a, b = producer((2, 3)), producer((3, 4))
    with pytest.raises(eintup.Error, match=NO_DRIVER):
        call_matmul(a=a, b=b)
    for x in (a, b):
        assert len(x.capsules) == 1 and x.deleted == 1
        assert x.calls[0]["stream"] == 1  # the legacy default stream
        if producer is FakeCuda:
            assert x.calls[0]["max_version"] == (1, 0)
            assert capsule_name(x.capsules[0]) == "used_dltensor_versioned"
        else:
            assert capsule_name(x.capsules[0]) == "used_dltensor"
    del a.capsules[:]
    assert a.deleted == 1  # a consumed capsule's destructor frees nothing


class Stream:
    cuda_stream = 0xABC0


@no_gpu
@pytest.mark.parametrize("stream, want", [(None, 1), (0, 1), (2, 2), (0x5000, 0x5000), (Stream(), 0xABC0)])
def test_the_callers_stream_is_passed_to_the_producer(stream, want):
    a, b = FakeCuda((2, 3)), FakeCuda((3, 4))
    with pytest.raises(eintup.Error, match=NO_DRIVER):
        eintup.compile(MATMUL, target="cuda")(a=a, b=b, stream=stream)
    assert a.calls[0]["stream"] == want and b.calls[0]["stream"] == want


@no_gpu
def test_pytorch_tensors_default_to_pytorch_s_current_stream(monkeypatch):
    """Without `stream=`, a call on PyTorch CUDA tensors runs on PyTorch's
    current stream of the tensors' device (as a PyTorch op would, inside
    `with torch.cuda.stream(s)` too); `stream=` still wins. A stand-in
    module named `torch` plays PyTorch, whose tensors export through
    DLPack like `FakeCuda`."""
    import types

    asked = []

    class Tensor(FakeCuda):
        is_cuda = True

    def current_stream(device=None):
        asked.append(device)
        return Stream()

    fake = types.ModuleType("torch")
    fake.Tensor = Tensor
    fake.cuda = types.SimpleNamespace(current_stream=current_stream)
    monkeypatch.setitem(sys.modules, "torch", fake)
    k = eintup.compile(MATMUL, target="cuda")
    a, b = Tensor((2, 3)), Tensor((3, 4))
    with pytest.raises(eintup.Error, match=NO_DRIVER):
        k(a=a, b=b)
    assert a.calls[0]["stream"] == 0xABC0 and b.calls[0]["stream"] == 0xABC0
    assert asked == [(2, 0)]  # the first tensor's device
    a, b = Tensor((2, 3)), Tensor((3, 4))
    with pytest.raises(eintup.Error, match=NO_DRIVER):
        k(a=a, b=b, stream=2)
    assert a.calls[0]["stream"] == 2 and len(asked) == 1
    # Other producers' arrays keep the legacy default stream.
    a, b = FakeCuda((2, 3)), FakeCuda((3, 4))
    with pytest.raises(eintup.Error, match=NO_DRIVER):
        k(a=a, b=b)
    assert a.calls[0]["stream"] == 1 and len(asked) == 1


@pytest.mark.parametrize("stream", [-3, "s", 1.5])
def test_a_bad_stream_is_refused(stream):
    with pytest.raises(eintup.Error, match="stream: "):
        eintup.compile(MATMUL, target="cuda")(a=FakeCuda((2, 3)), b=FakeCuda((3, 4)), stream=stream)


def test_stream_is_for_cuda_kernels_only():
    with pytest.raises(eintup.Error, match="stream: only `cuda` kernels run on a stream"):
        eintup.compile(MATMUL, target="cpu")(a=np.ones((2, 3), np.float32), b=np.ones((3, 4), np.float32), stream=1)


BAD = [
    (dict(dtype="float16"), "array `a`: dtype float16 is not supported \\(int32, float32, float64\\)"),
    (dict(dtype="int64"), "array `a`: dtype int64 is not supported"),
    (dict(dtype="bool"), "array `a`: dtype bool is not supported"),
    (dict(dtype="float32x2"), "array `a`: dtype float32x2 is not supported"),
    (dict(strides=(1, 2)), "array `a`: not C-contiguous \\(shape \\[2, 3\\], strides \\[1, 2\\] in elements; dim 1 would need stride 1\\)"),
    (dict(strides=(4, 1)), "array `a`: not C-contiguous"),
    (dict(byte_offset=2), "array `a`: its data at 0x7f0000000002 is not aligned to its 4-byte float32 elements"),
    (dict(data=0), "array `a`: its DLPack data pointer 0x0 plus byte offset 0 is not an address"),
    (dict(tensor_device=(1, 0)), "array `a`: __dlpack_device__\\(\\) says CUDA device 0, but its DLPack tensor is on the CPU"),
    (dict(tensor_device=(2, 1)), "array `a`: __dlpack_device__\\(\\) says CUDA device 0, but its DLPack tensor is on CUDA device 1"),
    (dict(ndim=-1), "array `a`: its DLPack tensor has -1 dims"),
    (dict(ndim=40), "array `a`: its DLPack tensor has 40 dims"),
    (dict(null_shape=True), "array `a`: its DLPack tensor has 2 dims and no shape"),
    (dict(shape=(2, -3)), "array `a`: its DLPack shape \\[2, -3\\] has a negative dim -3"),
]


@no_gpu
@pytest.mark.parametrize("bad, message", BAD, ids=[str(i) for i in range(len(BAD))])
def test_bad_cuda_arrays_are_refused_before_the_device(bad, message):
    args = dict(dict(shape=(2, 3)), **bad)
    a, b = FakeCuda(args.pop("shape"), **args), FakeCuda((3, 4))
    with pytest.raises(eintup.ShapeError, match=message):
        call_matmul(a=a, b=b)
    # Taken (renamed) and released exactly once, even when refused.
    assert capsule_name(a.capsules[0]) == "used_dltensor_versioned" and a.deleted == 1


@no_gpu
def test_layouts_that_are_c_contiguous_are_taken():
    """Explicit compact strides, any stride on a dim of one element, any
    strides on an empty array, an aligned byte offset: all C-contiguous."""
    for a in [FakeCuda((2, 3), strides=(3, 1)), FakeCuda((1, 3), strides=(99, 1)), FakeCuda((0, 3), strides=(7, 7)), FakeCuda((2, 3), byte_offset=8),
              FakeCuda((0, 3), data=0)]:
        with pytest.raises(eintup.Error, match=NO_DRIVER):
            call_matmul(a=a, b=FakeCuda((3, 4)))
        assert a.deleted == 1


def test_an_unknown_major_version_is_refused_and_not_freed():
    """A DLPack 2.x struct may have its deleter elsewhere: never called."""
    a = FakeCuda((2, 3), version=(2, 0))
    with pytest.raises(eintup.ShapeError, match="array `a`: its DLPack capsule has version 2.0; this package reads major version 1"):
        call_matmul(a=a, b=FakeCuda((3, 4)))
    assert a.deleted == 0


def test_a_real_producers_capsule_is_released_once():
    """NumPy's capsule (of host memory) behind a CUDA device claim: refused
    for the mismatch, and NumPy's deleter (which drops the capsule's
    reference to the array) runs exactly once: the array's reference count
    is back where it was."""
    x = np.ones((2, 3), np.float32)

    class Claims:
        def __dlpack_device__(self):
            return (2, 0)

        def __dlpack__(self, stream=None, max_version=None):
            return x.__dlpack__(max_version=max_version)  # NumPy takes no stream

    before = sys.getrefcount(x)
    for _ in range(3):
        with pytest.raises(eintup.ShapeError, match="says CUDA device 0, but its DLPack tensor is on the CPU"):
            call_matmul(a=Claims(), b=FakeCuda((3, 4)))
    assert sys.getrefcount(x) == before


def test_what_is_not_a_capsule_is_refused():
    class NotACapsule(FakeCuda):
        def __dlpack__(self, **kw):
            return 42

    class Used(FakeCuda):
        def __dlpack__(self, **kw):
            cap = super().__dlpack__(**kw)
            _api.PyCapsule_SetName.argtypes = [ctypes.py_object, ctypes.c_char_p]
            _api.PyCapsule_SetName(cap, b"used_dltensor_versioned")
            return cap

    class Fails(FakeCuda):
        def __dlpack__(self, **kw):
            raise RuntimeError("no export today")

    for x, message in [(NotACapsule((2, 3)), "__dlpack__\\(\\) returned 42, not an unused DLPack capsule"),
                       (Used((2, 3)), '__dlpack__\\(\\) returned <capsule object "used_dltensor_versioned" at 0x[0-9a-f]+>, not an unused DLPack capsule'),
                       (Fails((2, 3)), "its __dlpack__\\(\\) failed: RuntimeError: no export today")]:
        with pytest.raises(eintup.ShapeError, match="array `a`: " + message):
            call_matmul(a=x, b=FakeCuda((3, 4)))


def test_devices_are_checked_before_anything_is_taken():
    a, b = FakeCuda((2, 3)), FakeCuda((3, 4), device=(2, 1))
    with pytest.raises(eintup.ShapeError, match="array `b` is on CUDA device 1, array `a` on CUDA device 0: one call runs on one device"):
        call_matmul(a=a, b=b)
    assert a.deleted == 1 and b.deleted == 1
    out = FakeCuda((2, 4), device=(2, 1))
    with pytest.raises(eintup.ShapeError, match="out: `c` is on CUDA device 1, array `a` on CUDA device 0: one call runs on one device"):
        call_matmul(a=FakeCuda((2, 3)), b=FakeCuda((3, 4)), out={"c": out})
    assert out.calls == []  # never exported
    rocm = FakeCuda((2, 3), device=(10, 0))
    with pytest.raises(eintup.ShapeError, match="array `a`: it is on DLPack device type 10; the cuda target takes CUDA device arrays"):
        call_matmul(a=rocm, b=FakeCuda((3, 4)))
    assert rocm.calls == []  # never exported

    class BadDevice:
        def __dlpack_device__(self):
            return "cuda"

    with pytest.raises(eintup.ShapeError, match="array `a`: __dlpack_device__\\(\\) returned cuda, not a \\(device_type, device_id\\) pair"):
        call_matmul(a=BadDevice(), b=FakeCuda((3, 4)))


@pytest.mark.parametrize("target", ["cpu", "emu", "interp"])
def test_host_targets_refuse_cuda_arrays(target):
    a = FakeCuda((2, 3))
    with pytest.raises(eintup.ShapeError, match='array `a`: it is in device memory \\(DLPack device \\(2, 0\\)\\); compile with target="cuda"'):
        eintup.compile(MATMUL, target=target)(a=a, b=np.ones((3, 4), np.float32))
    assert a.calls == []


_api.PyCapsule_GetPointer.restype = ctypes.c_void_p
_api.PyCapsule_GetPointer.argtypes = [ctypes.py_object, ctypes.c_char_p]
_api.PyCapsule_SetName.restype = ctypes.c_int
_api.PyCapsule_SetName.argtypes = [ctypes.py_object, ctypes.c_char_p]


def emulated_cuda_array(dtype, shape):
    """A CudaArray over the emulator's memory that says it is on CUDA
    device 0 (python/src/cuda.rs): the export, without a GPU."""
    return eintup._eintup._testing_cuda_array(dtype, shape)


@pytest.mark.parametrize("dtype, code", [("float32", (2, 32, 1)), ("float64", (2, 64, 1)), ("int32", (0, 32, 1))])
@pytest.mark.parametrize("kw, versioned", [({}, False), ({"max_version": (1, 0)}, True), ({"max_version": (0, 8)}, False),
                                           ({"stream": -1, "max_version": (1, 2), "dl_device": (2, 0), "copy": False}, True)])
def test_results_export_themselves_through_dlpack(dtype, code, kw, versioned):
    x = emulated_cuda_array(dtype, [2, 3, 5])
    assert isinstance(x, eintup.CudaArray) and x.__dlpack_device__() == (2, 0)
    assert x.shape == [2, 3, 5] and x.dtype == dtype
    np.testing.assert_array_equal(x.numpy(), np.zeros((2, 3, 5), dtype))
    cap = x.__dlpack__(**kw)
    name = "dltensor_versioned" if versioned else "dltensor"
    assert capsule_name(cap) == name
    ptr = _api.PyCapsule_GetPointer(cap, name.encode())
    if versioned:
        m = DLManagedTensorVersioned.from_address(ptr)
        assert (m.version.major, m.version.minor, m.flags) == (1, 0, 0)
    else:
        m = DLManagedTensor.from_address(ptr)
    t = m.dl_tensor
    assert t.data == x.data_ptr and x.data_ptr != 0
    assert (t.device.device_type, t.device.device_id, t.ndim, t.byte_offset) == (2, 0, 3, 0)
    assert [t.shape[i] for i in range(3)] == [2, 3, 5] and not t.strides
    assert (t.dtype.code, t.dtype.bits, t.dtype.lanes) == code
    # Consumed as a consumer does: renamed, then its deleter called once.
    assert _api.PyCapsule_SetName(cap, b"used_" + name.encode()) == 0
    m.deleter(ptr)
    del cap  # a consumed capsule's destructor frees nothing more


def test_exported_memory_lives_until_the_last_consumer():
    """The emulator bounds its live memory (4 GiB): as many 1 GiB arrays
    fit after six were exported, each consumed or its capsule dropped, as
    fitted before, only if every deleter (or unconsumed capsule's
    destructor) let its handle go; and an export keeps the memory alive
    after the array object is gone (its address still in the struct)."""

    def capacity():
        keep = []
        with pytest.raises(eintup.Error, match="memory"):
            while len(keep) < 16:
                keep.append(emulated_cuda_array("float32", [256 << 20]))
        return len(keep)

    before = capacity()
    assert before >= 2
    for i in range(6):
        x = emulated_cuda_array("float32", [256 << 20])
        cap = x.__dlpack__(max_version=(1, 0) if i % 2 else None)
        addr = x.data_ptr
        del x
        if i % 3 == 0:
            del cap  # never consumed: the capsule's destructor frees it
            continue
        name = capsule_name(cap)
        ptr = _api.PyCapsule_GetPointer(cap, name.encode())
        m = (DLManagedTensorVersioned if i % 2 else DLManagedTensor).from_address(ptr)
        assert m.dl_tensor.data == addr
        _api.PyCapsule_SetName(cap, b"used_" + name.encode())
        m.deleter(ptr)
    assert capacity() == before


def test_export_refuses_another_device_and_copies():
    x = emulated_cuda_array("float32", [4])
    with pytest.raises(BufferError, match="the array is on CUDA device 0; it exports only there, not to device \\(1, 0\\)"):
        x.__dlpack__(dl_device=(1, 0))
    with pytest.raises(BufferError, match="copy=True is not supported"):
        x.__dlpack__(copy=True)
    assert repr(x) == "<eintup.CudaArray float32[4] on cuda:0>"


@no_gpu
def test_the_packages_own_results_are_taken_back():
    """Our export, imported by our own call: it reaches the device (the
    no-driver error), the capsules are consumed, nothing crashes."""
    a, b = emulated_cuda_array("float32", [2, 3]), emulated_cuda_array("float32", [3, 4])
    with pytest.raises(eintup.Error, match=NO_DRIVER):
        call_matmul(a=a, b=b)
    with pytest.raises(eintup.ShapeError, match="array `a`: it is in device memory"):
        eintup.compile(MATMUL, target="cpu")(a=a, b=b)


# ---- On a GPU ----------------------------------------------------------------


def rand(shape, dtype=np.float32, seed=0):
    return np.random.default_rng(seed).random(shape).astype(dtype)


@gpu
def test_gpu_matmul_from_host_arrays_and_device_results():
    k = eintup.compile(MATMUL, target="cuda")
    for shapes in [((2, 3, 4), (2, 4, 5)), ((5, 7), (7, 2)), ((2, 33, 17), (2, 17, 65)), ((3, 0, 4), (3, 4, 5))]:
        a, b = rand(shapes[0], seed=1), rand(shapes[1], seed=2)
        c = k(a=a, b=b)["c"]
        assert isinstance(c, eintup.CudaArray) and c.__dlpack_device__() == (2, 0)
        assert k.last_copies == 2  # the two host inputs, uploaded
        np.testing.assert_allclose(c.numpy(), a @ b, rtol=1e-5, atol=1e-6)
        assert c.shape == list((a @ b).shape) and c.dtype == "float32"


@gpu
def test_gpu_results_feed_later_calls_with_no_copy_and_out_writes_in_place():
    k = eintup.compile(MATMUL, target="cuda")
    a, b = rand((4, 3), seed=3), rand((3, 4), seed=4)
    c = k(a=a, b=b)["c"]
    d = k(a=c, b=c)["c"]  # DLPack round trip: our own export, imported
    assert k.last_copies == 0
    np.testing.assert_allclose(d.numpy(), (a @ b) @ (a @ b), rtol=1e-5)
    ptr = d.data_ptr
    got = k(a=c, b=c, out={"c": d})["c"]
    assert got is d and d.data_ptr == ptr and k.last_copies == 0
    np.testing.assert_allclose(d.numpy(), (a @ b) @ (a @ b), rtol=1e-5)
    with pytest.raises(eintup.ShapeError, match="out: `c`: it is on the CPU; the call runs on CUDA device 0, where out= arrays must be"):
        k(a=c, b=c, out={"c": np.zeros((4, 4), np.float32)})
    with pytest.raises(eintup.ShapeError, match="float32\\[4, 4\\], the program's input is float64"):
        eintup.compile(MATMUL, target="cuda", float="f64")(a=c, b=c)
    k.synchronize()


@gpu
def test_gpu_disk_cache_is_keyed_by_sm(tmp_path, monkeypatch):
    monkeypatch.setenv("EINTUP_CACHE_DIR", str(tmp_path))
    a, b = rand((2, 3)), rand((3, 4))
    k1 = eintup.compile(MATMUL, target="cuda")
    k1(a=a, b=b)
    assert k1.disk_cache_info() == (0, 1)
    k2 = eintup.compile(MATMUL, target="cuda")
    np.testing.assert_allclose(k2(a=a, b=b)["c"].numpy(), a @ b, rtol=1e-5)
    assert k2.disk_cache_info() == (1, 0)


@gpu
def test_gpu_torch_tensors_in_place_on_the_current_stream():
    torch = pytest.importorskip("torch")
    if not torch.cuda.is_available():
        pytest.skip("PyTorch has no CUDA")
    k = eintup.compile(MATMUL, target="cuda")
    a = torch.rand((2, 3, 4), device="cuda")
    b = torch.rand((2, 4, 5), device="cuda")
    c = torch.from_dlpack(k(a=a, b=b)["c"])
    assert k.last_copies == 0
    torch.testing.assert_close(c, a @ b, rtol=1e-5, atol=1e-6)
    out = torch.full((2, 3, 5), float("nan"), device="cuda")
    assert k(a=a, b=b, out={"c": out})["c"] is out
    torch.testing.assert_close(out, a @ b, rtol=1e-5, atol=1e-6)
    s = torch.cuda.Stream()
    with torch.cuda.stream(s):
        x = torch.rand((64, 64), device="cuda")
        y = torch.rand((64, 64), device="cuda")
        z = torch.from_dlpack(k(a=x, b=y, stream=torch.cuda.current_stream())["c"])
        torch.testing.assert_close(z, x @ y, rtol=1e-4, atol=1e-5)
        # Without stream=: PyTorch's current stream (s) all the same.
        z = torch.from_dlpack(k(a=x, b=y)["c"])
        torch.testing.assert_close(z, x @ y, rtol=1e-4, atol=1e-5)
    with pytest.raises(eintup.ShapeError, match="not C-contiguous"):
        k(a=a[0].t().contiguous().t(), b=b[0])
    with pytest.raises(eintup.ShapeError, match="float64"):
        k(a=a.double(), b=b.double())


@gpu
def test_gpu_consecutive_calls_on_fresh_tensors_stay_correct():
    """Calls enqueue without waiting for earlier ones' kernels (each call's
    tensors are let go once its run is seen finished): inputs deleted right
    after each call, their memory refilled by PyTorch, never reach a run."""
    torch = pytest.importorskip("torch")
    if not torch.cuda.is_available():
        pytest.skip("PyTorch has no CUDA")
    k = eintup.compile(MATMUL, target="cuda")
    want, got = [], []
    for _ in range(64):
        a = torch.rand((2, 48, 64), device="cuda")
        b = torch.rand((2, 64, 32), device="cuda")
        want.append(a @ b)
        got.append(torch.from_dlpack(k(a=a, b=b)["c"]))
        del a, b
        # Likely the freed blocks: overwritten while earlier runs may be queued.
        torch.full((2, 48, 64), float("nan"), device="cuda")
        torch.full((2, 64, 32), float("nan"), device="cuda")
    k.synchronize()
    torch.cuda.synchronize()
    for w, g in zip(want, got):
        torch.testing.assert_close(g, w, rtol=1e-4, atol=1e-5)


def shipped_or_built(tmp_path, name, args):
    """`python/NAME` where the GPU kit ships it (scripts/gpu-check: the kit
    machine has no compiler); in the repository, `eintup build ARGS` with
    target/debug/eintup."""
    shipped = ROOT / "python" / name
    if shipped.exists():
        return shipped
    eintup_bin = ROOT / "target" / "debug" / "eintup"
    if not eintup_bin.exists():
        pytest.skip("target/debug/eintup is not built")
    b = tmp_path / name
    subprocess.run([str(eintup_bin), "build", str(MATMUL), *args, "--float", "f32", "-o", str(b)], check=True, capture_output=True)
    return b


def mm_bundle(tmp_path):
    """matmul.et built for batch 2, row 3, k 4, col 5."""
    return shipped_or_built(tmp_path, "mm-2x3x4x5.etb", ["--bind", "batch=[2]", "--bind", "row=[3]", "--bind", "k=[4]", "--bind", "col=[5]"])


@gpu
def test_gpu_load_runs_a_bundle(tmp_path):
    b = mm_bundle(tmp_path)
    bk = eintup.load(b, device="cuda")
    assert bk.device == "cuda:0"
    a, bb = rand((2, 3, 4), seed=3), rand((2, 4, 5), seed=4)
    np.testing.assert_allclose(bk(a=a, b=bb)["c"].numpy(), a @ bb, rtol=1e-5)
    bk.synchronize()


@gpu
def test_gpu_load_rebinds_a_dynamic_bundle_to_each_shape(tmp_path):
    """One `build --dynamic` bundle loaded on the GPU once: each call with
    new shapes re-binds the loaded program (no second driver JIT), shapes
    seen before, smaller ones and empty ones included."""
    b = shipped_or_built(tmp_path, "mm-dyn.etb", ["--dynamic", "--rank", "batch=1"])
    bk = eintup.load(b, device="cuda")
    for n, r, k, c in [(2, 3, 4, 5), (1, 64, 64, 64), (2, 33, 17, 65), (3, 0, 4, 5), (2, 3, 4, 5)]:
        a, bb = rand((n, r, k), seed=r), rand((n, k, c), seed=c)
        got = bk(a=a, b=bb)["c"].numpy()
        assert got.shape == (n, r, c)
        np.testing.assert_allclose(got, a @ bb, rtol=1e-5, atol=1e-6)
    bk.synchronize()
