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
        """`cpu`, `emu` or `interp`."""
    @property
    def last_copies(self) -> int:
        """Arrays the last call copied (0 on `cpu` when all fit)."""
    @property
    def cache_dir(self) -> Optional[PathLike[str]]:
        """The on-disk cache directory, or None when disabled."""
    def call(self, arrays: dict[str, Any], out: Optional[dict[str, Any]] = None) -> dict[str, Any]:
        """Runs on `arrays` (buffer-protocol objects by name); returns the
        result arrays by name (the `out` arrays where given)."""
    def cache_info(self) -> tuple[int, int, int]:
        """`(hits, misses, entries)` of the in-memory cache."""
    def disk_cache_info(self) -> tuple[int, int]:
        """`(hits, misses)` of the on-disk cache."""

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
) -> Kernel:
    """Parses and checks `text`; `cache_dir` None disables the disk cache;
    `build` identifies the extension build in cache keys."""

class Bundle:
    """An ahead-of-time bundle loaded on the emulator."""

    def call(self, arrays: dict[str, Any], out: Optional[dict[str, Any]] = None) -> dict[str, Any]:
        """Writes the given inputs, runs, returns the outputs by name."""
    def inputs(self) -> list[tuple[str, str, list[int], bool]]:
        """`[(name, dtype, shape, generated_if_left_out)]`."""

def load(path: str, device: str) -> Bundle:
    """Opens and loads bundle directory `path` on `device` (`emu`)."""
