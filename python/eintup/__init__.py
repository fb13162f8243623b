"""eintup: Einsum Tuple programs compiled and called from Python.

    import eintup, numpy as np
    mm = eintup.compile("docs/examples/matmul.et", target="cpu")
    c = mm(a=np.ones((2, 3, 4), np.float32), b=np.ones((2, 4, 5), np.float32))["c"]

A kernel compiles once per set of input shapes and dtypes and keeps the
compiled code in memory (`cache_info()`) and on disk (`cache_dir()`), so
that another process gets it without compiling; its dims come from the
arrays, as `eintup run --input` takes them. On `cpu` it runs on the
arrays' own memory where their dtype and layout fit (`last_copies`); on
`cuda` it runs on CUDA arrays (PyTorch, CuPy: anything with `__dlpack__`)
in place, on their device and the caller's stream, and returns
`CudaArray`s (`torch.from_dlpack(r)`).
Errors are `eintup.Error` (input shapes and dtypes: `eintup.ShapeError`)
with the message the CLI prints. docs/python.md.
"""
from __future__ import annotations

import operator
import os
import sys
from typing import Any, Mapping, Optional, Sequence, Union

import numpy as np

from . import _eintup
from ._eintup import Error, ShapeError

from ._eintup import CudaArray, cuda_device_count

__all__ = ["compile", "load", "cache_dir", "cuda_device_count", "Kernel", "Bundle", "CudaArray", "Error", "ShapeError"]

# DLPack's device type of host memory.
_KDL_CPU = 1


def _build_id() -> str:
    """The extension build's identity (size and modification time of its
    file): a rebuilt extension never reads another build's cache entries."""
    try:
        st = os.stat(_eintup.__file__)
        return f"{st.st_size}-{st.st_mtime_ns}"
    except (OSError, AttributeError):
        return "unknown"


_BUILD = _build_id()


def cache_dir() -> Optional[str]:
    """The on-disk kernel cache directory: `$EINTUP_CACHE_DIR` if set (set
    to the empty string, the cache is disabled and this returns None),
    else `$XDG_CACHE_HOME/eintup`, else `~/.cache/eintup` (the directory
    `eintup run` uses too)."""
    d = _eintup.cache_dir()
    return None if d is None else str(d)


def _device(a: Any) -> Optional[tuple[int, int]]:
    """The DLPack device `a` reports, or None (no `__dlpack_device__`, or
    one that fails: the extension reports it where it matters)."""
    f = getattr(a, "__dlpack_device__", None)
    if f is None:
        return None
    try:
        d = f()
        return (int(d[0]), int(d[1]))
    except Exception:
        return None


def _as_array(name: str, a: Any, device_ok: bool) -> Any:
    """`a` as an object with the buffer protocol: a NumPy array as it is,
    anything with `__dlpack__` (CPU tensors of PyTorch, JAX, CuPy's host
    arrays) through DLPack without a copy, anything else through
    `np.asarray`. Device arrays (not host memory) are passed on unchanged
    where `device_ok` (a `cuda` kernel takes them through DLPack itself)
    and refused elsewhere."""
    dev = _device(a)
    if device_ok and dev != (_KDL_CPU, 0) and hasattr(a, "__dlpack_device__"):
        # Device memory, or a device the extension reports as unreadable.
        return a
    if dev is not None and dev[0] != _KDL_CPU and not isinstance(a, np.ndarray):
        raise ShapeError(f"array `{name}`: it is in device memory (DLPack device {dev}); compile with target=\"cuda\" to run on CUDA arrays, or copy it to the host")
    if hasattr(a, "__dlpack__") and not isinstance(a, np.ndarray):
        try:
            return np.from_dlpack(a)
        except (TypeError, RuntimeError, BufferError, ValueError) as e:
            raise ShapeError(f"array `{name}`: cannot read it through DLPack ({e})") from None
    if isinstance(a, (np.ndarray, memoryview, bytes, bytearray)):
        return a
    try:
        return np.asarray(a)
    except (TypeError, ValueError) as e:
        raise ShapeError(f"array `{name}`: not an array ({e})") from None


def _arguments(arrays: dict[str, Any], device_ok: bool = False) -> dict[str, Any]:
    """The arrays as the extension borrows them (NumPy arrays unchanged;
    CUDA arrays unchanged where `device_ok`)."""
    for name, a in arrays.items():
        if type(a) is not np.ndarray:
            arrays[name] = _as_array(name, a, device_ok)
    return arrays


class Kernel:
    """A compiled `.et` program. Call it with the program's input arrays as
    keywords; it returns the program's result arrays (its outputs section,
    or the arrays nothing reads after their last write) by name. Inputs
    left out are drawn by the program's own RANDOM statements."""

    def __init__(self, inner: _eintup.Kernel, name: str, adjoint: Optional["_Adjoint"] = None) -> None:
        self._inner = inner
        self.name = name
        self._adjoint = adjoint
        # The program's text and `compile`'s options: what pickling keeps.
        self._recipe: Optional[tuple[str, str, dict[str, Any]]] = None

    def __reduce__(self) -> Any:
        """A kernel pickles as its program's text and `compile`'s options;
        unpickling compiles it again (from the disk cache where it is
        there), so it crosses to `spawn` workers and other processes."""
        if self._recipe is None:
            raise TypeError(f"{self!r} cannot be pickled: only kernels made by eintup.compile can")
        return (_compile_text, self._recipe)

    @property
    def grad(self) -> list[str]:
        """The inputs `vjp` gives gradients for (`compile(..., grad=...)`)."""
        return [] if self._adjoint is None else list(self._adjoint.wrt)

    def vjp(self, inputs: Mapping[str, Any], cotangents: Mapping[str, Any]) -> dict[str, Any]:
        """The vector-Jacobian product: runs the compiled adjoint program
        (`eintup grad`, docs/gradients.md) on the forward `inputs` and one
        cotangent per differentiated output (`{"y": grad_y}`, each of that
        output's shape), and returns the gradient of `sum(grad_y * y)` with
        respect to each input named in `compile(..., grad=...)`, by that
        input's name. Every input the forward call would take must be given
        (a drawn one would differ from the forward call's)."""
        if self._adjoint is None:
            raise Error(f"{self.name}: compiled without grad=[...]; compile(..., grad=['x']) to get gradients")
        return self._adjoint.vjp(inputs, cotangents)

    @property
    def target(self) -> str:
        """Where it runs: `cpu`, `cuda`, `emu` or `interp`."""
        return self._inner.target

    @property
    def last_copies(self) -> int:
        """How many arrays the last call copied: on `cpu`, the inputs and
        `out=` arrays whose dtype or layout did not fit (0 when all are
        C-contiguous, aligned and of the buffer's dtype); on `cuda`, the host
        arrays uploaded (0 when every array is a CUDA array); on `emu` and
        `interp`, every input and result."""
        return self._inner.last_copies

    @property
    def cache_dir(self) -> Optional[str]:
        """The on-disk cache this kernel uses, or None (disabled)."""
        d = self._inner.cache_dir
        return None if d is None else os.fspath(d)

    def __call__(self, *args: Any, out: Optional[Mapping[str, Any]] = None, stream: Any = None, **arrays: Any) -> dict[str, Any]:
        """Runs the program on `arrays` and returns its results by name.
        `out={"name": array}` writes a result into the caller's array (of
        its exact dtype and shape), which is returned in its place.

        `cuda` only: `stream` is the CUDA stream the call is enqueued on (an
        int `CUstream`, or an object with `.cuda_stream` such as
        `torch.cuda.current_stream()`); None, the default, is PyTorch's
        current stream when a PyTorch CUDA tensor is among the arrays, else
        the legacy default stream (DLPack's `stream=1`). The call returns once the work
        is enqueued: results (`CudaArray`s, or the `out=` CUDA arrays) are
        ready in that stream's order; `synchronize()` waits for them."""
        _no_positional(repr(self), args)
        cuda = self.target == "cuda"
        outs = _out_map(out)
        if cuda and stream is None:
            stream = _torch_stream(arrays, outs)
        return self._inner.call(_arguments(arrays, cuda), outs, stream)

    def synchronize(self) -> None:
        """Waits for the work this kernel enqueued on CUDA devices (a no-op
        on other targets, whose calls finish before they return)."""
        self._inner.synchronize()

    def cache_info(self) -> tuple[int, int, int]:
        """`(hits, misses, entries)` of the in-memory compiled-code cache."""
        return self._inner.cache_info()

    def disk_cache_info(self) -> tuple[int, int]:
        """`(hits, misses)` of the on-disk cache: specialisations this kernel
        loaded from disk, and those it compiled and stored."""
        return self._inner.disk_cache_info()

    def dynamic_builds(self) -> int:
        """With `dynamic=True`: the dynamic bundles built so far, one per
        rank combination (and GPU) the calls needed; a new shape of the
        same ranks binds one of them and compiles nothing."""
        return self._inner.dynamic_builds()

    def __repr__(self) -> str:
        return f"<eintup.Kernel {self.name} target={self.target}>"


def compile(
    source: str | os.PathLike,
    *,
    target: str = "cpu",
    float: str = "f32",
    binds: Optional[Mapping[str, list[int]]] = None,
    fp_contract: Optional[str] = None,
    seed: int = 0,
    cache: bool = True,
    dynamic: bool = False,
    grad: Optional[Sequence[str]] = None,
    grad_of: Optional[Sequence[str]] = None,
    deterministic: bool = False,
) -> Kernel:
    """Compiles an `.et` program: a path to a `.et` file, or the program's
    text. `target`: `cpu` (host code), `cuda` (a CUDA GPU: each call runs
    on its CUDA arrays' device, compiled for that device's compute
    capability; the driver is needed from the first call, not here), `emu`
    (the GPU code on the PTX emulator) or `interp` (the reference
    interpreter); `float`: the width
    of FLOAT (`f32`, `f64`); `binds`: dims fixed as `--bind` does
    (`{"batch": [2]}`); `fp_contract`: `off`/`fast` (compiled targets);
    `seed`: the seed of drawn dims and of inputs left out; `cache`: False
    keeps compiled code in this process only (not in `cache_dir()`);
    `dynamic` (`emu`, `cuda`): compile one bundle per rank combination
    (`eintup build --dynamic`) and bind it to each new set of shapes, with
    no compilation after the first call of those ranks (its kernels may
    be slower than a build for one shape; docs/dynamic-shapes.md);
    `grad`: FLOAT inputs to differentiate with respect to, and `grad_of`
    the outputs (default: the program's FLOAT results): the adjoint program
    is compiled alongside with the same settings, and `Kernel.vjp` runs it
    (docs/gradients.md); `deterministic` (`emu`, `cuda`): no float
    atomics, so a scatter's float sums (a gather's gradient) are the same
    on every run (`eintup build --deterministic`).
    Errors that need no shapes are raised here; the rest at the call."""
    text, name = _read(source)
    options = dict(target=target, float=float, binds=binds, fp_contract=fp_contract, seed=seed, cache=cache, dynamic=dynamic, grad=grad, grad_of=grad_of,
                   deterministic=deterministic)
    return _compile_text(text, name, options)


def _compile_text(text: str, name: str, options: dict[str, Any]) -> Kernel:
    """`compile` of a program's text: what a pickled kernel is rebuilt from."""
    target, float, binds, fp_contract, seed, cache, dynamic, grad, grad_of, deterministic = (
        options[k] for k in ("target", "float", "binds", "fp_contract", "seed", "cache", "dynamic", "grad", "grad_of", "deterministic"))
    _check_text(text, name)
    if isinstance(seed, bool) or not isinstance(seed, int) or not 0 <= seed < 2**64:
        raise Error(f"seed={seed!r}: expected an integer in [0, 2**64)")
    if binds is not None and not isinstance(binds, Mapping):
        raise Error(f"binds={binds!r}: expected a mapping from eintup names to dims, such as {{'batch': [2]}}")
    bind_args = [f"{k}=[{', '.join(str(d) for d in _bind_dims(k, v))}]" for k, v in (binds or {}).items()]

    def build(text: str, name: str) -> _eintup.Kernel:
        return _eintup.compile(text, name, target, float, bind_args, fp_contract, int(seed), cache_dir() if cache else None, _BUILD, bool(dynamic),
                               bool(deterministic))

    inner = build(text, name)
    adjoint = None
    if grad is not None:
        wrt = [grad] if isinstance(grad, str) else list(grad)
        of = [] if grad_of is None else ([grad_of] if isinstance(grad_of, str) else list(grad_of))
        adj_text, gradients, cotangents, inputs = _eintup.grad(text, name, wrt, of)
        adj_name = f"{name} (adjoint)"
        adjoint = _Adjoint(build(adj_text, adj_name), adj_name, dict(zip(wrt, gradients)), dict(cotangents), inputs)
    kernel = Kernel(inner, name, adjoint)
    kernel._recipe = (text, name, dict(options))
    return kernel


def _check_text(text: str, name: str) -> None:
    """A program's text must be Unicode the compiler can read: a lone
    surrogate (from a `surrogateescape` decode) is an error, located."""
    try:
        text.encode("utf-8")
    except UnicodeEncodeError as e:
        line = text.count("\n", 0, e.start) + 1
        col = e.start - (text.rfind("\n", 0, e.start) + 1) + 1
        raise Error(f"{name}:{line}:{col}: error: the source holds a lone surrogate (U+{ord(text[e.start]):04X}), which is no Unicode character") from None


class _Adjoint:
    """A kernel's compiled adjoint: which of its arrays are the gradients
    (by forward input) and the cotangents (by forward output)."""

    def __init__(self, inner: _eintup.Kernel, name: str, wrt: dict[str, str], cotangents: dict[str, str], inputs: list[str]) -> None:
        self.kernel = Kernel(inner, name)
        self.wrt = wrt
        self.cotangents = cotangents
        self.inputs = inputs

    def vjp(self, inputs: Mapping[str, Any], cotangents: Mapping[str, Any]) -> dict[str, Any]:
        unknown = sorted(set(cotangents) - set(self.cotangents))
        missing = sorted(set(self.cotangents) - set(cotangents))
        if unknown or missing:
            what = "; ".join(p for p in [unknown and f"not differentiated outputs: {', '.join(unknown)}", missing and f"missing: {', '.join(missing)}"] if p)
            raise Error(f"{self.kernel.name}: vjp takes one cotangent per differentiated output ({', '.join(self.cotangents)}); {what}")
        absent = [a for a in self.inputs if a not in inputs]
        if absent:
            raise Error(f"{self.kernel.name}: vjp needs every input of the forward call (a drawn one would not be the forward call's); missing: {', '.join(absent)}")
        clash = sorted(set(inputs) & set(self.cotangents.values()))
        if clash:
            raise Error(f"{self.kernel.name}: `{clash[0]}` is a cotangent's name in the adjoint; pass it in `cotangents` by its output's name")
        arrays = dict(inputs)
        arrays.update({self.cotangents[y]: g for y, g in cotangents.items()})
        out = self.kernel(**arrays)
        return {x: out[g] for x, g in self.wrt.items()}


class Bundle:
    """An ahead-of-time bundle (`eintup build`) loaded once; call it with its
    input buffers (those left out are generated by the bundle); it returns
    its output buffers by name. Shapes are the bundle's own. Loaded on
    `cuda`, it runs on CUDA arrays in place and returns `CudaArray`s, as a
    `cuda` kernel does."""

    def __init__(self, inner: _eintup.Bundle, path: str) -> None:
        self._inner = inner
        self.path = path

    @property
    def inputs(self) -> list[tuple[str, str, list[int], bool]]:
        """`[(name, dtype, shape, generated_if_left_out)]`."""
        return self._inner.inputs()

    @property
    def device(self) -> str:
        """`emu` or `cuda:N`."""
        return self._inner.device

    def __call__(self, *args: Any, out: Optional[Mapping[str, Any]] = None, stream: Any = None, **arrays: Any) -> dict[str, Any]:
        """Runs the bundle on `arrays` and returns its outputs by name
        (written into the `out=` arrays where given). `stream`: as for
        `Kernel.__call__` (CUDA only)."""
        _no_positional(repr(self), args)
        cuda = self.device.startswith("cuda")
        outs = _out_map(out)
        if cuda and stream is None:
            stream = _torch_stream(arrays, outs)
        return self._inner.call(_arguments(arrays, cuda), outs, stream)

    def synchronize(self) -> None:
        """Waits for the work enqueued on a CUDA device (a no-op on `emu`)."""
        self._inner.synchronize()

    def __repr__(self) -> str:
        return f"<eintup.Bundle {self.path}>"


def load(path: str | os.PathLike, *, device: str = "emu", binds: Optional[Mapping[str, Sequence[int]]] = None) -> Bundle:
    """Loads a bundle directory made by `eintup build` on `device`, once:
    `emu` (the PTX emulator), or `cuda` / `cuda:N` (CUDA device N; the
    bundle must target its compute capability or an older one). A dynamic
    bundle (`eintup build --dynamic`) runs at the dims each call's arrays
    give; `binds` gives the dims of eintups no input gives (a stride:
    `binds={"stride": [2, 1]}`), as `exec --bind` does."""
    p = os.fspath(path)
    pairs = [(str(k), _bind_dims(k, v)) for k, v in (binds or {}).items()]
    return Bundle(_eintup.load(p, device, pairs), p)


def _bind_dims(name: Any, dims: Any) -> list[int]:
    """The dims of `binds={name: dims}`; dims that are not a sequence of
    integers are an `Error` (the extension checks names and values)."""
    try:
        return [operator.index(d) for d in dims]
    except TypeError:
        raise Error(f"error[E0301]: invalid binding for `{name}`: {dims!r} is not a list of integers (binds={{\"{name}\": [2, 3]}}; [] is rank 0)") from None


def _out_map(out: Any) -> Optional[dict[str, Any]]:
    """`out=` as a dict of result name to array."""
    if out is None:
        return None
    if not isinstance(out, Mapping):
        raise Error(f"out: expected a dict of result name to array (out={{\"c\": array}}), not a {type(out).__name__}")
    return dict(out)


def _torch_stream(arrays: Mapping[str, Any], outs: Optional[Mapping[str, Any]]) -> Any:
    """A CUDA call's default stream: PyTorch's current stream on the device
    of the first PyTorch CUDA tensor among the arguments (what a PyTorch op
    on them would use, inside `with torch.cuda.stream(s)` too), as Triton
    launches; None (the legacy default stream) when no argument is one.
    PyTorch is looked up only where a tensor of it was passed, so it is
    never imported here."""
    torch = sys.modules.get("torch")
    if torch is None:
        return None
    for a in list(arrays.values()) + list((outs or {}).values()):
        if isinstance(a, torch.Tensor) and getattr(a, "is_cuda", False):
            return torch.cuda.current_stream(a.device)
    return None


def _no_positional(what: str, args: tuple) -> None:
    """Arrays are passed by name: `kernel(a=..., b=...)`."""
    if args:
        raise TypeError(f"{what}: pass arrays by name (kernel(a=..., b=...)), not by position ({len(args)} positional argument{'s' if len(args) > 1 else ''} given)")


def _read(source: Union[str, os.PathLike]) -> tuple[str, str]:
    """The program's text and its name in messages."""
    if isinstance(source, os.PathLike) or (isinstance(source, str) and "\n" not in source and source.endswith(".et")):
        path = os.fspath(source)
        return _eintup.read_source(path), path
    if not isinstance(source, str):
        raise TypeError("compile() takes a path to a .et file or the program's text")
    return source, "<string>"
