"""Writes damaged copies of a bundle for test/runtime/exec-checks.test:
tamper.py GOOD.etb OUTDIR -> OUTDIR/{source,config,dtype,shape}.etb."""
import json
import pathlib
import shutil
import sys

good, out = pathlib.Path(sys.argv[1]), pathlib.Path(sys.argv[2])


def variant(name, change):
    d = out / f"{name}.etb"
    shutil.rmtree(d, ignore_errors=True)
    shutil.copytree(good, d)
    m = json.loads((d / "manifest.json").read_text())
    change(m)
    (d / "manifest.json").write_text(json.dumps(m, indent=1))


def buffer(m, name):
    return next(b for b in m["buffers"] if b["name"] == name)


variant("source", lambda m: m["source"].update(text="garbage (((\n"))
# gather_nd's constraint DIMS(coord) = RANK(loc) makes coord one number;
# two dims contradict it.
variant("config", lambda m: m["config"]["eintups"].update(coord=[2, 2]))
variant("dtype", lambda m: buffer(m, "src").update(dtype="i32"))
variant("shape", lambda m: buffer(m, "dst").update(shape=[d + 1 for d in buffer(m, "dst")["shape"]]))
