"""eintup: Einsum Tuple programs compiled and called from Python.

    import eintup, numpy as np
    mm = eintup.compile("docs/examples/matmul.et", target="cpu")
    c = mm(a=np.ones((2, 3, 4), np.float32), b=np.ones((2, 4, 5), np.float32))["c"]

A kernel compiles once per set of input shapes and dtypes and keeps the
compiled code (`cache_info()`); its dims come from the arrays, as `eintup
run --input` takes them. Errors are `eintup.Error` (input shapes and dtypes:
`eintup.ShapeError`) with the message the CLI prints. docs/python.md.
"""
from __future__ import annotations

import builtins
import os
from typing import Any, Mapping, Optional

import numpy as np

from . import _eintup
from ._eintup import Error, ShapeError

__all__ = ["compile", "load", "Kernel", "Bundle", "Error", "ShapeError"]

_DTYPES = {np.dtype(np.int32): "int32", np.dtype(np.float32): "float32", np.dtype(np.float64): "float64"}


def _as_numpy(name: str, a: Any) -> np.ndarray:
    """`a` as a NumPy array: itself, or through DLPack (`__dlpack__`: CPU
    tensors of PyTorch, JAX, CuPy's host arrays) without a copy."""
    if isinstance(a, np.ndarray):
        return a
    if hasattr(a, "__dlpack__"):
        try:
            return np.from_dlpack(a)
        except (TypeError, RuntimeError, BufferError, ValueError) as e:
            raise ShapeError(f"array `{name}`: cannot read it through DLPack ({e}); the package runs on the CPU") from None
    try:
        return np.asarray(a)
    except (TypeError, ValueError) as e:
        raise ShapeError(f"array `{name}`: not an array ({e})") from None


def _arguments(arrays: Mapping[str, Any]) -> list:
    """The arrays as the extension takes them: `(name, dtype, shape, bytes)`,
    the bytes of a C-contiguous array without a copy."""
    args = []
    for name, a in arrays.items():
        arr = _as_numpy(name, a)
        dt = _DTYPES.get(arr.dtype)
        if dt is None:
            raise ShapeError(f"array `{name}`: dtype {arr.dtype} is not supported (int32, float32, float64)")
        arr = np.ascontiguousarray(arr)
        args.append((name, dt, list(arr.shape), arr.reshape(-1).view(np.uint8)))
    return args


def _results(raw: list, out: Optional[Mapping[str, np.ndarray]], what: str) -> dict[str, np.ndarray]:
    """The extension's results as arrays; those named in `out` copied into
    the caller's arrays (which are returned in their place)."""
    results = {name: np.frombuffer(buf, dtype=dt).reshape(shape) for name, dt, shape, buf in raw}
    for name, dst in (out or {}).items():
        if name not in results:
            raise Error(f"out: `{name}` is not a result of {what} (results: {', '.join(results) or 'none'})")
        got = results[name]
        if not isinstance(dst, np.ndarray) or dst.shape != got.shape or dst.dtype != got.dtype:
            shown = f"{dst.dtype}{list(dst.shape)}" if isinstance(dst, np.ndarray) else type(dst).__name__
            raise ShapeError(f"out: `{name}` is {shown}, the result is {got.dtype}{list(got.shape)}")
        np.copyto(dst, got)
        results[name] = dst
    return results


class Kernel:
    """A compiled `.et` program. Call it with the program's input arrays as
    keywords; it returns the program's result arrays (its outputs section,
    or the arrays nothing reads after their last write) by name."""

    def __init__(self, inner: Any, name: str) -> None:
        self._inner = inner
        self.name = name

    @property
    def target(self) -> str:
        return self._inner.target

    def __call__(self, out: Optional[Mapping[str, np.ndarray]] = None, **arrays: Any) -> dict[str, np.ndarray]:
        return _results(self._inner.run(_arguments(arrays)), out, self.name)

    def cache_info(self) -> tuple[int, int, int]:
        """`(hits, misses, entries)` of the compiled-code cache."""
        return self._inner.cache_info()

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
) -> Kernel:
    """Compiles an `.et` program: a path to a `.et` file, or the program's
    text. `target`: `cpu` (host code), `emu` (the GPU code on the PTX
    emulator) or `interp` (the reference interpreter); `float`: the width
    of FLOAT (`f32`, `f64`); `binds`: dims fixed as `--bind` does
    (`{"batch": [2]}`); `fp_contract`: `off`/`fast` (compiled targets).
    Errors that need no shapes are raised here; the rest at the call."""
    text, name = _read(source)
    bind_args = [f"{k}=[{', '.join(str(int(d)) for d in v)}]" for k, v in (binds or {}).items()]
    inner = _eintup.compile(text, name, target, float, bind_args, fp_contract, int(seed))
    return Kernel(inner, name)


class Bundle:
    """An ahead-of-time bundle (`eintup build`) loaded once; call it with its
    input buffers (those left out are generated by the bundle); it returns
    its output buffers by name. Shapes are the bundle's own."""

    def __init__(self, inner: Any, path: str) -> None:
        self._inner = inner
        self.path = path

    @property
    def inputs(self) -> list[tuple[str, str, list[int], bool]]:
        """`[(name, dtype, shape, generated_if_left_out)]`."""
        return self._inner.inputs()

    def __call__(self, out: Optional[Mapping[str, np.ndarray]] = None, **arrays: Any) -> dict[str, np.ndarray]:
        return _results(self._inner.run(_arguments(arrays)), out, self.path)

    def __repr__(self) -> str:
        return f"<eintup.Bundle {self.path}>"


def load(path: str | os.PathLike, *, device: str = "emu") -> Bundle:
    """Loads a bundle directory made by `eintup build` on `device` (`emu`,
    the PTX emulator), once."""
    p = os.fspath(path)
    return Bundle(_eintup.load(p, device), p)


def _read(source: str | os.PathLike) -> tuple[str, str]:
    if isinstance(source, os.PathLike) or (isinstance(source, str) and "\n" not in source and source.endswith(".et")):
        path = os.fspath(source)
        try:
            with builtins.open(path, encoding="utf-8") as f:
                return f.read(), path
        except OSError as e:
            raise Error(f"eintup: error: cannot read {path}: {e.strerror}") from None
    if not isinstance(source, str):
        raise TypeError("compile() takes a path to a .et file or the program's text")
    return source, "<string>"
