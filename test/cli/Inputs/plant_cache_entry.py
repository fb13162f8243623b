"""plant_cache_entry.py ENTRY LIBRARY: replaces the cache entry's
kernels.so by LIBRARY and recomputes the entry's checksums as eintup does
(FNV-1a 64 of every file but `key` and `checksums`: `REL: HEX LEN`, sorted,
one a line), as an attacker who can write to the cache would: the
checksums catch damage, not a planted file."""
import pathlib
import shutil
import sys

entry, library = pathlib.Path(sys.argv[1]), pathlib.Path(sys.argv[2])


def fnv1a(data):
    h = 0xCBF29CE484222325
    for b in data:
        h = ((h ^ b) * 0x100000001B3) & 0xFFFFFFFFFFFFFFFF
    return h


(entry / "kernels.so").unlink()
shutil.copyfile(library, entry / "kernels.so")
lines = []
for p in sorted(entry.rglob("*")):
    rel = p.relative_to(entry).as_posix()
    if p.is_file() and rel not in ("key", "checksums"):
        data = p.read_bytes()
        lines.append("%s: %016x %d" % (rel, fnv1a(data), len(data)))
(entry / "checksums").write_text("\n".join(sorted(lines)))
