"""Writes damaged copies of a bundle for test/runtime/exec-checks.test:
tamper.py GOOD.etb OUTDIR -> OUTDIR/NAME.etb for each variant below.

Variants named `*-stale` are changed without updating the manifest's
content checksum, as accidental damage would be; the others are re-sealed
(the checksum recomputed as docs/bundle.md defines it: CRC-32 of the
manifest as canonical JSON without `checksum`, a newline, kernels.ptx), so
that the checks behind the checksum are exercised too."""
import json
import pathlib
import shutil
import sys
import zlib

good, out = pathlib.Path(sys.argv[1]), pathlib.Path(sys.argv[2])


def checksum(m, ptx):
    body = {k: v for k, v in m.items() if k != "checksum"}
    text = json.dumps(body, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    return "crc32:%08x" % zlib.crc32(text.encode() + b"\n" + ptx)


def variant(name, change, reseal=True, ptx_change=None):
    d = out / f"{name}.etb"
    shutil.rmtree(d, ignore_errors=True)
    shutil.copytree(good, d)
    m = json.loads((d / "manifest.json").read_text())
    assert m["checksum"] == checksum(m, (d / "kernels.ptx").read_bytes()), "the good bundle's checksum"
    change(m)
    if ptx_change:
        (d / "kernels.ptx").write_bytes(ptx_change((d / "kernels.ptx").read_bytes()))
    if reseal:
        m["checksum"] = checksum(m, (d / "kernels.ptx").read_bytes())
    (d / "manifest.json").write_text(json.dumps(m, indent=1))


def buffer(m, name):
    return next(b for b in m["buffers"] if b["name"] == name)


def nothing(m):
    pass


# Accidental damage: one character of the PTX, one dim of a shape.
variant("ptx-stale", nothing, reseal=False, ptx_change=lambda p: p.replace(b"mul", b"mal", 1))
variant("shape-stale", lambda m: buffer(m, "dst").update(shape=[d + 1 for d in buffer(m, "dst")["shape"]]), reseal=False)
variant("checksum-stale", lambda m: m.update(checksum="crc32:00000000"), reseal=False)
# Re-indenting the manifest changes no content: still valid.
variant("reindented", nothing)

variant("source", lambda m: m["source"].update(text="garbage (((\n"))
# gather_nd's constraint DIMS(coord) = RANK(loc) makes coord one number;
# two dims contradict it.
variant("config", lambda m: m["config"]["eintups"].update(coord=[2, 2]))
variant("dtype", lambda m: buffer(m, "src").update(dtype="i32"))
variant("shape", lambda m: buffer(m, "dst").update(shape=[d + 1 for d in buffer(m, "dst")["shape"]]))
variant("huge", lambda m: buffer(m, "dst").update(shape=[1 << 40]))
# The output buffer one row short of what the kernel writes.
variant("shrunk", lambda m: buffer(m, "dst").update(shape=[buffer(m, "dst")["shape"][0] - 1] + buffer(m, "dst")["shape"][1:]))
# 20,000 nested `{ }` blocks in the first kernel's body: the PTX reader
# refuses nesting deeper than ptx::MAX_NESTING instead of overflowing its
# stack.
variant("nested", nothing, ptx_change=lambda p: p.replace(b")\n{\n", b")\n{\n" + b"{" * 20000 + b"}" * 20000 + b"\n", 1))
# Buffer names that are not identifiers (`etrun --out DIR` would write
# DIR/NAME.npy, and print the name): a path out of DIR, an absolute path,
# terminal escapes. Every reference to `dst` is renamed with it.
def rename_dst(new):
    def change(m):
        renamed = json.loads(json.dumps(m).replace('"dst"', json.dumps(new)))
        m.clear()
        m.update(renamed)
    return change


variant("name-parent", rename_dst("../escaped"))
variant("name-absolute", rename_dst(str(out / "absolute")))
variant("name-escape", rename_dst("y\x1b[2J\x07"))
# Declarations beyond what a GPU allows (the emulator would allocate them):
# 4 GiB of shared memory, 1 GiB of local memory per thread, 10^8 registers.
for name, decl in [("shared", b".shared .align 4 .b8 big[4294967296];"),
                   ("local", b".local .align 8 .b8 big[1073741824];"),
                   ("registers", b".reg .b64 %big<100000000>;")]:
    variant(name, nothing, ptx_change=lambda p, decl=decl: p.replace(b")\n{\n", b")\n{\n" + decl + b"\n", 1))
