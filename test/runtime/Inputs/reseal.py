"""reseal.py GOOD.etb OUT.etb STATEMENT: copies the bundle, runs the Python
STATEMENT on its manifest `m` (a dict), and re-seals it (the checksum
recomputed as docs/bundle.md defines it), as someone who can write the
bundle would: the checks behind the checksum are what must refuse it."""
import json
import pathlib
import shutil
import sys
import zlib

good, out, statement = pathlib.Path(sys.argv[1]), pathlib.Path(sys.argv[2]), sys.argv[3]
shutil.rmtree(out, ignore_errors=True)
shutil.copytree(good, out)
m = json.loads((out / "manifest.json").read_text())
exec(statement)
body = {k: v for k, v in m.items() if k != "checksum"}
text = json.dumps(body, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
m["checksum"] = "crc32:%08x" % zlib.crc32(text.encode() + b"\n" + (out / "kernels.ptx").read_bytes())
(out / "manifest.json").write_text(json.dumps(m, indent=1))
