"""The Rust half of `eintup` (python/src). Use the `eintup` package's API;
these are its building blocks."""
from os import PathLike
from typing import Any, Optional

class Error(Exception):
    """A user error: the message is the one the eintup CLI prints."""

class ShapeError(Error):
    """Arrays whose shapes or dtypes the program cannot take."""

class Kernel:
    """A compiled program: one compiled specialisation per set of input
    names, dtypes and shapes, kept in memory and on disk."""

    @property
    def target(self) -> str:
        """`cpu`, `cuda`, `emu` or `interp`."""
    @property
    def last_copies(self) -> int:
        """Arrays the last call copied (0 on `cpu` when all fit)."""
    @property
    def cache_dir(self) -> Optional[PathLike[str]]:
        """The on-disk cache directory, or None when disabled."""
    def call(self, arrays: dict[str, Any], out: Optional[dict[str, Any]] = None, stream: Any = None) -> dict[str, Any]:
        """Runs on `arrays` (buffer-protocol objects by name; on `cuda`, also
        DLPack CUDA arrays); returns the result arrays by name (the `out`
        arrays where given; on `cuda`, `CudaArray`s). `stream` (`cuda`
        only): an int CUstream or an object with `.cuda_stream`; None is
        the legacy default stream."""
    def synchronize(self) -> None:
        """Waits for the work enqueued on CUDA devices (no-op elsewhere)."""
    def cache_info(self) -> tuple[int, int, int]:
        """`(hits, misses, entries)` of the in-memory cache."""
    def disk_cache_info(self) -> tuple[int, int]:
        """`(hits, misses)` of the on-disk cache."""
    def dynamic_builds(self) -> int:
        """Dynamic bundles built (`dynamic=True`)."""

def read_source(path: str) -> str: ...
def grad(text: str, name: str, wrt: list[str], of: list[str]) -> tuple[str, list[str], list[tuple[str, str]], list[str]]: ...
def compile(
    text: str,
    name: str,
    target: str,
    float: str,
    binds: list[str],
    fp_contract: Optional[str],
    seed: int,
    cache_dir: Optional[str],
    build: str,
    dynamic: bool,
    deterministic: bool,
) -> Kernel:
    """Parses and checks `text`; `cache_dir` None disables the disk cache;
    `build` identifies the extension build in cache keys; `dynamic`: one
    GPU bundle per rank combination, bound to each call's shapes;
    `deterministic`: GPU bundles without float atomics."""

class Bundle:
    """An ahead-of-time bundle loaded on the emulator or a CUDA device."""

    def call(self, arrays: dict[str, Any], out: Optional[dict[str, Any]] = None, stream: Any = None) -> dict[str, Any]:
        """Writes (emulator) or binds (CUDA) the given inputs, runs,
        returns the outputs by name."""
    def synchronize(self) -> None:
        """Waits for the work enqueued on a CUDA device (no-op on `emu`)."""
    @property
    def device(self) -> str:
        """`emu` or `cuda:N`."""
    def inputs(self) -> list[tuple[str, str, list[int], bool]]:
        """`[(name, dtype, shape, generated_if_left_out)]`."""

def load(path: str, device: str, binds: list[tuple[str, list[int]]]) -> Bundle:
    """Opens and loads bundle directory `path` on `device` (`emu`, `cuda`,
    `cuda:N`); `binds` give a dynamic bundle the dims of eintups no input
    gives."""

def cuda_device_count() -> int:
    """CUDA devices this process can use: 0 without a driver or a device."""

def cache_dir() -> Optional[PathLike[str]]:
    """The on-disk cache's directory, or None when `EINTUP_CACHE_DIR=""`
    turns it off (the rules `eintup run` follows too)."""

class CudaArray:
    """A result of a CUDA call: device memory, ready in the order of the
    stream the call ran on; exports itself through DLPack with no copy."""

    def __dlpack__(self, *, stream: Optional[int] = None, max_version: Optional[tuple[int, int]] = None,
                   dl_device: Optional[tuple[int, int]] = None, copy: Optional[bool] = None) -> Any:
        """A DLPack capsule (versioned when `max_version` >= (1, 0)); a
        consumer on another stream gets it after the producing work."""
    def __dlpack_device__(self) -> tuple[int, int]:
        """`(2, ordinal)`: kDLCUDA."""
    @property
    def shape(self) -> list[int]:
        """The array's shape."""
    @property
    def dtype(self) -> str:
        """`int32`, `float32` or `float64`."""
    @property
    def data_ptr(self) -> int:
        """The device address of the first element."""
    def numpy(self) -> Any:
        """A copy on the host (after the producing work)."""
