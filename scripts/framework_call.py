#!/usr/bin/env python3
"""The framework-call bridge of `eintup check` (docs/check.md).

A persistent server: one JSON request per line on stdin, one JSON response per
line on stdout. One process serves every configuration of a `check` run,
because importing TensorFlow costs seconds; TensorFlow (and NumPy) are
imported lazily, once, on the first request.

Requests:
  {"op": "ping"}
      -> {"ok": true, "tf_version": "2.x"}
  {"func": "tf.nn.convolution", "args": [ARG...], "kwargs": {"name": ARG},
   "out_dir": "/path"}
      -> {"ok": true, "outputs": ["/path/result_0.npy", ...]}
where ARG is one of
  {"kind": "array", "path": "x.npy"}      a tensor with the .npy's dtype
  {"kind": "ints", "value": [1, 2]}       a Python list of ints (DIMS(..))
  {"kind": "int", "value": 3}             a Python int (RANK(..))
  {"kind": "literal", "value": "VALID"}   a str/int/float/bool/None (L(..))
  {"kind": "tensor", "value": [1, 2]}     a constant int32 tensor (TENSOR(..))

Every failure is one response {"ok": false, "error": "<one line>"}; when
TensorFlow cannot be imported every request answers
{"ok": false, "error": "...", "unavailable": true}. Nothing but responses is
ever written to stdout: the real stdout is kept for the protocol and file
descriptor 1 is pointed at stderr, so prints from TensorFlow or its C++ side
cannot corrupt the stream.

Debugging: `framework_call.py --request FILE.json` answers one request
(FILE `-` reads stdin) and exits 0 if it succeeded, 3 if TensorFlow is
unavailable, 1 otherwise.
"""

import json
import os
import re
import sys

# Must be set before TensorFlow is imported: silences its C++ logging, which
# would otherwise flood stderr with CPU-feature and oneDNN notices.
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
# oneDNN kernels reorder float sums; the plain Eigen kernels keep results
# reproducible from run to run, which a comparison tool wants.
os.environ.setdefault("TF_ENABLE_ONEDNN_OPTS", "0")

# Longest error message passed back; TensorFlow messages can embed whole graphs.
MAX_ERROR_CHARS = 2000


class BridgeError(Exception):
    """A request that cannot be served; its message becomes the response."""


class Frameworks:
    """TensorFlow and NumPy, imported on first use and remembered (also a
    failed import, so every later request answers "unavailable" at once)."""

    def __init__(self):
        self.tf = None
        self.np = None
        self.import_error = None

    def load(self):
        if self.tf is None and self.import_error is None:
            try:
                import numpy as np
                import tensorflow as tf
            except Exception as e:  # ImportError, but also broken installs
                self.import_error = (
                    f"TensorFlow is not available to {sys.executable} "
                    f"({type(e).__name__}: {one_line(str(e))}); "
                    "run `scripts/setup --with-tf` to install it"
                )
            else:
                self.np, self.tf = np, tf
        return self.import_error is None


# TensorFlow prefixes eager errors with the wrapped op's device placement
# and ends them with an empty op name; neither helps a user.
TF_NOISE = re.compile(r"\{\{function_node [^}]*\}\}\s*|\s*name:\s*$")


def one_line(text):
    """Collapses a (possibly multi-line) message into one bounded line."""
    text = TF_NOISE.sub("", " ".join(str(text).split()))
    if len(text) > MAX_ERROR_CHARS:
        text = text[:MAX_ERROR_CHARS] + " ..."
    return text


def resolve_function(tf, name):
    """`tf.nn.convolution` -> the callable, by a getattr chain from `tf`.
    Only public names under `tf.` are allowed: the bridge runs what a .et
    file says, so it must not become a way to call arbitrary Python."""
    if not isinstance(name, str):
        raise BridgeError(f"function name must be a string, got {json.dumps(name)}")
    parts = name.split(".")
    if len(parts) < 2 or parts[0] != "tf":
        raise BridgeError(f"{name}: only functions under `tf.` can be called")
    obj = tf
    for i, part in enumerate(parts[1:], start=1):
        if not part.isidentifier() or part.startswith("_"):
            raise BridgeError(f"{name}: `{part}` is not a public attribute name")
        try:
            obj = getattr(obj, part)
        except AttributeError:
            prefix = ".".join(parts[:i])
            raise BridgeError(f"{name}: unknown function (`{prefix}` has no attribute `{part}`)")
    if not callable(obj):
        raise BridgeError(f"{name}: not a function")
    return obj


def int_list(value, what):
    if not isinstance(value, list) or not all(isinstance(v, int) and not isinstance(v, bool) for v in value):
        raise BridgeError(f"{what}: expected a list of ints, got {json.dumps(value)}")
    return value


def convert_arg(fw, arg, what):
    """One ARG of the protocol -> the Python value passed to the function."""
    if not isinstance(arg, dict) or "kind" not in arg:
        raise BridgeError(f"{what}: expected an object with a `kind`, got {json.dumps(arg)}")
    kind = arg["kind"]
    if kind == "array":
        path = arg.get("path")
        if not isinstance(path, str):
            raise BridgeError(f"{what}: array argument needs a string `path`")
        try:
            a = fw.np.load(path, allow_pickle=False)
        except Exception as e:
            raise BridgeError(f"{what}: cannot load {path}: {type(e).__name__}: {e}")
        # TensorFlow wants native byte order; the dtype itself is kept, so
        # INT (int32) arrays stay int32 and FLOAT (float64) stays float64.
        # (np.asarray with order="C", not np.ascontiguousarray: the latter
        # turns a rank-0 array into rank 1.)
        a = fw.np.asarray(a, dtype=a.dtype.newbyteorder("="), order="C")
        return fw.tf.convert_to_tensor(a)
    if kind == "ints":
        return list(int_list(arg.get("value"), what))
    if kind == "int":
        v = arg.get("value")
        if not isinstance(v, int) or isinstance(v, bool):
            raise BridgeError(f"{what}: expected an int, got {json.dumps(v)}")
        return v
    if kind == "literal":
        v = arg.get("value")
        if v is not None and not isinstance(v, (str, int, float, bool)):
            raise BridgeError(f"{what}: a literal must be a string, number, bool or null, got {json.dumps(v)}")
        return v
    if kind == "tensor":
        return fw.tf.constant(int_list(arg.get("value"), what), dtype=fw.tf.int32)
    raise BridgeError(f"{what}: unknown argument kind {json.dumps(kind)}")


def write_outputs(fw, result, out_dir):
    """Writes the result (one tensor, or a list/tuple of them as from
    tf.meshgrid) as out_dir/result_K.npy in C order, dtype unchanged."""
    items = list(result) if isinstance(result, (list, tuple)) else [result]
    os.makedirs(out_dir, exist_ok=True)
    paths = []
    for k, item in enumerate(items):
        try:
            value = item.numpy() if hasattr(item, "numpy") else item
            a = fw.np.asarray(value, order="C")  # keeps rank 0 (see convert_arg)
        except Exception as e:
            raise BridgeError(f"result {k} of type {type(item).__name__} is not an array: {e}")
        if a.dtype == object:
            raise BridgeError(f"result {k} of type {type(item).__name__} is not a numeric array")
        path = os.path.join(out_dir, f"result_{k}.npy")
        fw.np.save(path, a, allow_pickle=False)
        paths.append(os.path.abspath(path))
    return paths


def serve_call(fw, req):
    func = req.get("func")
    tf_func = resolve_function(fw.tf, func)
    args = req.get("args", [])
    kwargs = req.get("kwargs", {})
    out_dir = req.get("out_dir")
    if not isinstance(args, list):
        raise BridgeError(f"{func}: `args` must be a list")
    if not isinstance(kwargs, dict):
        raise BridgeError(f"{func}: `kwargs` must be an object")
    if not isinstance(out_dir, str) or not out_dir:
        raise BridgeError(f"{func}: `out_dir` must be a non-empty string")
    py_args = [convert_arg(fw, a, f"{func}: argument {i + 1}") for i, a in enumerate(args)]
    py_kwargs = {}
    for key, a in kwargs.items():
        if not key.isidentifier():
            raise BridgeError(f"{func}: `{key}` is not a keyword argument name")
        py_kwargs[key] = convert_arg(fw, a, f"{func}: argument `{key}`")
    try:
        result = tf_func(*py_args, **py_kwargs)
    except Exception as e:
        raise BridgeError(f"{func} raised {type(e).__name__}: {e}")
    try:
        return write_outputs(fw, result, out_dir)
    except BridgeError as e:
        raise BridgeError(f"{func}: {e}")
    except OSError as e:
        raise BridgeError(f"{func}: cannot write results to {out_dir}: {e}")


def handle(fw, line):
    """One request line -> one response object."""
    try:
        req = json.loads(line)
    except json.JSONDecodeError as e:
        return {"ok": False, "error": f"bad request: not JSON ({e})"}
    if not isinstance(req, dict):
        return {"ok": False, "error": "bad request: expected a JSON object"}
    if not fw.load():
        return {"ok": False, "error": fw.import_error, "unavailable": True}
    op = req.get("op", "call")
    try:
        if op == "ping":
            return {"ok": True, "tf_version": fw.tf.__version__}
        if op == "call":
            return {"ok": True, "outputs": serve_call(fw, req)}
        return {"ok": False, "error": f"bad request: unknown op {json.dumps(op)}"}
    except BridgeError as e:
        return {"ok": False, "error": one_line(e)}
    except Exception as e:  # a bug here must still answer with one line
        return {"ok": False, "error": one_line(f"bridge failure: {type(e).__name__}: {e}")}


def protocol_stdout():
    """Keeps the real stdout for responses and sends everything else that
    would be written to file descriptor 1 (Python or C++) to stderr."""
    sys.stdout.flush()
    out = os.fdopen(os.dup(1), "w", encoding="utf-8", buffering=1)
    os.dup2(2, 1)
    sys.stdout = sys.stderr
    return out


def main(argv):
    fw = Frameworks()
    if len(argv) == 2 and argv[0] == "--request":
        out = protocol_stdout()
        try:
            text = sys.stdin.read() if argv[1] == "-" else open(argv[1], encoding="utf-8").read()
        except OSError as e:
            resp = {"ok": False, "error": f"cannot read request: {e}"}
        else:
            resp = handle(fw, text)
        out.write(json.dumps(resp) + "\n")
        out.flush()
        return 0 if resp["ok"] else (3 if resp.get("unavailable") else 1)
    if argv:
        print("usage: framework_call.py [--request FILE.json]  (no argument: serve stdin)", file=sys.stderr)
        return 2
    out = protocol_stdout()
    for line in sys.stdin:
        if not line.strip():
            continue
        out.write(json.dumps(handle(fw, line)) + "\n")
        out.flush()
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
