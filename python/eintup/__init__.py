"""eintup: Einsum Tuple programs compiled and called from Python.

    import eintup, numpy as np
    mm = eintup.compile("docs/examples/matmul.et", target="cpu")
    c = mm(a=np.ones((2, 3, 4), np.float32), b=np.ones((2, 4, 5), np.float32))["c"]

A kernel compiles once per set of input shapes and dtypes and keeps the
compiled code in memory (`cache_info()`) and on disk (`cache_dir()`), so
that another process gets it without compiling; its dims come from the
arrays, as `eintup run --input` takes them. On `cpu` it runs on the
arrays' own memory where their dtype and layout fit (`last_copies`).
Errors are `eintup.Error` (input shapes and dtypes: `eintup.ShapeError`)
with the message the CLI prints. docs/python.md.
"""
from __future__ import annotations

import builtins
import os
from typing import Any, Mapping, Optional, Union

import numpy as np

from . import _eintup
from ._eintup import Error, ShapeError

__all__ = ["compile", "load", "cache_dir", "Kernel", "Bundle", "Error", "ShapeError"]


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
    else `$XDG_CACHE_HOME/eintup`, else `~/.cache/eintup`."""
    env = os.environ.get("EINTUP_CACHE_DIR")
    if env is not None:
        return env or None
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return os.path.join(base, "eintup")


def _as_array(name: str, a: Any) -> Any:
    """`a` as an object with the buffer protocol: a NumPy array as it is,
    anything with `__dlpack__` (CPU tensors of PyTorch, JAX, CuPy's host
    arrays) through DLPack without a copy, anything else through
    `np.asarray`."""
    if hasattr(a, "__dlpack__") and not isinstance(a, np.ndarray):
        try:
            return np.from_dlpack(a)
        except (TypeError, RuntimeError, BufferError, ValueError) as e:
            raise ShapeError(f"array `{name}`: cannot read it through DLPack ({e}); the package runs on the CPU") from None
    if isinstance(a, (np.ndarray, memoryview, bytes, bytearray)):
        return a
    try:
        return np.asarray(a)
    except (TypeError, ValueError) as e:
        raise ShapeError(f"array `{name}`: not an array ({e})") from None


def _arguments(arrays: dict[str, Any]) -> dict[str, Any]:
    """The arrays as the extension borrows them (NumPy arrays unchanged)."""
    for name, a in arrays.items():
        if type(a) is not np.ndarray:
            arrays[name] = _as_array(name, a)
    return arrays


class Kernel:
    """A compiled `.et` program. Call it with the program's input arrays as
    keywords; it returns the program's result arrays (its outputs section,
    or the arrays nothing reads after their last write) by name. Inputs
    left out are drawn by the program's own RANDOM statements."""

    def __init__(self, inner: _eintup.Kernel, name: str) -> None:
        self._inner = inner
        self.name = name

    @property
    def target(self) -> str:
        """Where it runs: `cpu`, `emu` or `interp`."""
        return self._inner.target

    @property
    def last_copies(self) -> int:
        """How many arrays the last call copied: on `cpu`, the inputs and
        `out=` arrays whose dtype or layout did not fit (0 when all are
        C-contiguous, aligned and of the buffer's dtype); on `emu` and
        `interp`, every input and result."""
        return self._inner.last_copies

    @property
    def cache_dir(self) -> Optional[str]:
        """The on-disk cache this kernel uses, or None (disabled)."""
        d = self._inner.cache_dir
        return None if d is None else os.fspath(d)

    def __call__(self, out: Optional[Mapping[str, Any]] = None, **arrays: Any) -> dict[str, np.ndarray]:
        """Runs the program on `arrays` and returns its results by name.
        `out={"name": array}` writes a result into the caller's array (of
        its exact dtype and shape), which is returned in its place."""
        return self._inner.call(_arguments(arrays), None if out is None else dict(out))

    def cache_info(self) -> tuple[int, int, int]:
        """`(hits, misses, entries)` of the in-memory compiled-code cache."""
        return self._inner.cache_info()

    def disk_cache_info(self) -> tuple[int, int]:
        """`(hits, misses)` of the on-disk cache: specialisations this kernel
        loaded from disk, and those it compiled and stored."""
        return self._inner.disk_cache_info()

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
) -> Kernel:
    """Compiles an `.et` program: a path to a `.et` file, or the program's
    text. `target`: `cpu` (host code), `emu` (the GPU code on the PTX
    emulator) or `interp` (the reference interpreter); `float`: the width
    of FLOAT (`f32`, `f64`); `binds`: dims fixed as `--bind` does
    (`{"batch": [2]}`); `fp_contract`: `off`/`fast` (compiled targets);
    `seed`: the seed of drawn dims and of inputs left out; `cache`: False
    keeps compiled code in this process only (not in `cache_dir()`).
    Errors that need no shapes are raised here; the rest at the call."""
    text, name = _read(source)
    bind_args = [f"{k}=[{', '.join(str(int(d)) for d in v)}]" for k, v in (binds or {}).items()]
    inner = _eintup.compile(text, name, target, float, bind_args, fp_contract, int(seed), cache_dir() if cache else None, _BUILD)
    return Kernel(inner, name)


class Bundle:
    """An ahead-of-time bundle (`eintup build`) loaded once; call it with its
    input buffers (those left out are generated by the bundle); it returns
    its output buffers by name. Shapes are the bundle's own."""

    def __init__(self, inner: _eintup.Bundle, path: str) -> None:
        self._inner = inner
        self.path = path

    @property
    def inputs(self) -> list[tuple[str, str, list[int], bool]]:
        """`[(name, dtype, shape, generated_if_left_out)]`."""
        return self._inner.inputs()

    def __call__(self, out: Optional[Mapping[str, Any]] = None, **arrays: Any) -> dict[str, np.ndarray]:
        """Runs the bundle on `arrays` and returns its outputs by name
        (written into the `out=` arrays where given)."""
        return self._inner.call(_arguments(arrays), None if out is None else dict(out))

    def __repr__(self) -> str:
        return f"<eintup.Bundle {self.path}>"


def load(path: str | os.PathLike, *, device: str = "emu") -> Bundle:
    """Loads a bundle directory made by `eintup build` on `device` (`emu`,
    the PTX emulator), once."""
    p = os.fspath(path)
    return Bundle(_eintup.load(p, device), p)


def _read(source: Union[str, os.PathLike]) -> tuple[str, str]:
    """The program's text and its name in messages."""
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
