#!/usr/bin/env python3
"""The framework-call bridge of `eintup check` (docs/check.md).

A persistent server: one JSON request per line on stdin, one JSON response per
line on stdout. One process serves every configuration of a `check` run,
because importing TensorFlow costs seconds; TensorFlow (and NumPy) are
imported lazily, once, on the first request.

Requests:
  {"op": "ping"}
      -> {"ok": true, "tf_version": "2.x", "sandbox": "landlock ABI 7"}
  {"op": "resolve", "func": "tf.nn.convolution"}
      -> {"ok": true}: the name resolves to an allowed function (nothing
         is called; `check` asks once before the first configuration)
  {"func": "tf.nn.convolution", "args": [ARG...], "kwargs": {"name": ARG},
   "out_dir": "/path"}
      -> {"ok": true, "outputs": ["/path/result_0.npy", ...]}
where ARG is one of
  {"kind": "array", "path": "x.npy"}      a tensor with the .npy's dtype
  {"kind": "ints", "value": [1, 2]}       a Python list of ints (DIMS(..))
  {"kind": "int", "value": 3}             a Python int (RANK(..))
  {"kind": "literal", "value": "VALID"}   a str/int/float/bool/None (L(..))
  {"kind": "tensor", "value": [1, 2]}     a constant int32 tensor (TENSOR(..))

A `.et` file chose the function and the arguments, and files are shared, so
nothing in a request is trusted: the function must pass framework_policy.py
(a pure TensorFlow operation, resolved without getattr), arguments are data
and never evaluated, arrays are read and results written only below the
working directory, and the process is confined by framework_sandbox.py
before TensorFlow is imported.

Every failure is one response {"ok": false, "error": "<one line>"}, also for
exceptions that are not errors (SystemExit, KeyboardInterrupt); when
TensorFlow cannot be imported every request answers
{"ok": false, "error": "...", "unavailable": true}. Nothing but responses is
ever written to stdout, and nothing but this loop reads stdin.

Debugging: `framework_call.py --request FILE.json` answers one request
(FILE `-` reads stdin) and exits 0 if it succeeded, 3 if TensorFlow is
unavailable, 1 otherwise.

`--memory-limit BYTES` (eintup passes `check --call-memory`): once
TensorFlow is imported, the process may allocate at most BYTES more
(framework_sandbox.limit_memory); a call whose allocation fails over it
answers that it exceeded the limit. The time limit is eintup's: it kills
a process that does not answer in time.
"""

import json
import os
import re
import stat
import sys

# The bridge leaves nothing behind in the source tree (its helper modules
# would otherwise be cached in scripts/__pycache__).
sys.dont_write_bytecode = True

from framework_policy import Policy, Refused  # noqa: E402 (after the line above)
from framework_sandbox import confine_stdio, limit_memory, restrict_filesystem  # noqa: E402

# Must be set before TensorFlow is imported: silences its C++ logging, which
# would otherwise flood stderr with CPU-feature and oneDNN notices.
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
# oneDNN kernels reorder float sums; the plain Eigen kernels keep results
# reproducible from run to run, which a comparison tool wants.
os.environ.setdefault("TF_ENABLE_ONEDNN_OPTS", "0")

# Longest error message passed back; TensorFlow messages can embed whole graphs.
MAX_ERROR_CHARS = 2000

# Result dtypes eintup can compare (INT is int32, FLOAT float64 or float32).
RESULT_DTYPES = ("int32", "float64", "float32")


class BridgeError(Exception):
    """A request that cannot be served; its message becomes the response."""


class Frameworks:
    """TensorFlow and NumPy, imported on first use and remembered (also a
    failed import, so every later request answers "unavailable" at once),
    with the rules every request is held to."""

    def __init__(self, policy, workdir, sandbox, memory_limit=None):
        self.tf = None
        self.np = None
        self.import_error = None
        self.policy = policy
        self.workdir = workdir
        self.sandbox = sandbox
        self.memory_limit = memory_limit

    def load(self):
        if self.tf is None and self.import_error is None:
            try:
                import numpy as np
                import tensorflow as tf
            except BaseException as e:  # ImportError, but also broken installs
                self.import_error = (
                    f"TensorFlow is not available to {sys.executable} "
                    f"({type(e).__name__}: {one_line(str(e))}); "
                    "run `scripts/setup --with-tf` to install it"
                )
            else:
                self.np, self.tf = np, tf
                if self.memory_limit is not None:
                    # After the import and TensorFlow's first operation
                    # (which starts its thread pools): the limit is what
                    # calls may add to that.
                    try:
                        tf.constant(1.0) + 1
                    except Exception:
                        pass
                    self.sandbox += "; " + limit_memory(self.memory_limit)
        return self.import_error is None

    def over_memory(self, e):
        """Whether exception `e` is an allocation that failed over the
        memory limit (NumPy's MemoryError, TensorFlow's ResourceExhausted)."""
        return self.memory_limit is not None and (
            isinstance(e, MemoryError) or type(e).__name__ == "ResourceExhaustedError")

    def inside(self, path, what):
        """`path` made absolute, when it lies (links resolved) below the
        working directory."""
        if not isinstance(path, str) or not path:
            raise BridgeError(f"{what}: expected a non-empty path")
        if os.path.commonpath([os.path.realpath(path), self.workdir]) != self.workdir:
            raise BridgeError(f"{what}: {path} is outside the bridge's working directory {self.workdir}")
        return os.path.abspath(path)


# TensorFlow prefixes eager errors with the wrapped op's device placement
# and ends them with an empty op name; neither helps a user.
TF_NOISE = re.compile(r"\{\{function_node [^}]*\}\}\s*|\s*name:\s*$")


def one_line(text):
    """Collapses a (possibly multi-line) message into one bounded line.
    Control characters (a string literal of the .et file can hold any) are
    escaped, so a message cannot drive the user's terminal."""
    text = TF_NOISE.sub("", " ".join(str(text).split()))
    text = "".join(c if c.isprintable() else repr(c)[1:-1] for c in text)
    if len(text) > MAX_ERROR_CHARS:
        text = text[:MAX_ERROR_CHARS] + " ..."
    return text


def resolve_function(fw, name):
    """The function a request names, if the policy allows it."""
    try:
        return fw.policy.resolve(fw.tf, name)
    except Refused as e:
        raise BridgeError(f"{name}: refused: {e}")
    except LookupError as e:
        raise BridgeError(f"{name}: unknown function ({e.args[0]})")


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
        path = fw.inside(arg.get("path"), f"{what}: array")
        try:
            if not stat.S_ISREG(os.stat(path).st_mode):
                raise BridgeError(f"{what}: {path} is not a regular file")
            a = fw.np.load(path, allow_pickle=False)
        except BridgeError:
            raise
        except Exception as e:
            raise BridgeError(f"{what}: cannot load {path}: {type(e).__name__}: {e}")
        if not isinstance(a, fw.np.ndarray):
            raise BridgeError(f"{what}: {path} is not a .npy array")
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
    tf.meshgrid) as out_dir/result_K.npy in C order, dtype unchanged. Only
    tensors of the dtypes eintup compares are results."""
    items = list(result) if isinstance(result, (list, tuple)) else [result]
    os.makedirs(out_dir, exist_ok=True)
    paths = []
    for k, item in enumerate(items):
        if isinstance(item, fw.tf.Tensor):
            a = fw.np.asarray(item.numpy(), order="C")  # keeps rank 0 (see convert_arg)
        elif isinstance(item, fw.np.ndarray):
            a = fw.np.asarray(item, order="C")
        else:
            raise BridgeError(f"result {k} is a {type(item).__name__}, not a tensor")
        if a.dtype.name not in RESULT_DTYPES:
            raise BridgeError(
                f"result {k} has dtype {a.dtype.name}; eintup compares only {', '.join(RESULT_DTYPES)} results "
                "(an op with an `output_type` or `dtype` argument can be asked for int32)")
        path = os.path.join(out_dir, f"result_{k}.npy")
        if os.path.lexists(path):
            os.unlink(path)  # never write through a link left in its place
        fw.np.save(path, a, allow_pickle=False)
        paths.append(path)
    return paths


def call_gradient(fw, func, tf_func, args, kwargs, py_args, py_kwargs, gradient):
    """`check --grad`: the vector-Jacobian product of the call. The array
    arguments loaded from the paths in `gradient["wrt"]` are watched; the
    call's results are weighed by the cotangents (`gradient["cotangents"]`,
    one path or null per result: null leaves that result out) and the
    gradient with respect to each watched argument is the result list, in
    `wrt` order (zeros where the result does not depend on it)."""
    if not isinstance(gradient, dict):
        raise BridgeError(f"{func}: `gradient` must be an object")
    wrt = gradient.get("wrt")
    cotangents = gradient.get("cotangents")
    if not isinstance(wrt, list) or not isinstance(cotangents, list):
        raise BridgeError(f"{func}: `gradient` needs the lists `wrt` and `cotangents`")
    wrt = [fw.inside(p, f"{func}: gradient source") for p in wrt]
    # Where each source sits among the arguments: ("arg", i) or ("kw", key).
    slots = []
    for path in wrt:
        found = [("arg", i) for i, a in enumerate(args) if is_array_at(fw, a, path, func)]
        found += [("kw", k) for k, a in kwargs.items() if is_array_at(fw, a, path, func)]
        if not found:
            raise BridgeError(f"{func}: gradient source {path} is not an array argument of the call")
        slots.append(found[0])
    sources = [py_args[i] if kind == "arg" else py_kwargs[i] for kind, i in slots]
    weights = []
    for k, c in enumerate(cotangents):
        weights.append(None if c is None else convert_arg(fw, {"kind": "array", "path": c}, f"{func}: cotangent {k}"))
    kept = [k for k, w in enumerate(weights) if w is not None]

    def vjp(*tensors):
        srcs = tensors[:len(sources)]
        call_args, call_kwargs = list(py_args), dict(py_kwargs)
        for (kind, i), t in zip(slots, srcs):
            if kind == "arg":
                call_args[i] = t
            else:
                call_kwargs[i] = t
        with fw.tf.GradientTape() as tape:
            for t in srcs:
                tape.watch(t)
            result = tf_func(*call_args, **call_kwargs)
        items = list(result) if isinstance(result, (list, tuple)) else [result]
        if len(items) != len(weights):
            raise BridgeError(f"{func}: {len(weights)} cotangents for {len(items)} results")
        targets = [items[k] for k in kept]
        ws = [fw.tf.cast(w, items[k].dtype) for k, w in zip(kept, tensors[len(sources):])]
        grads = tape.gradient(targets, list(srcs), output_gradients=ws)
        return [fw.tf.zeros_like(s) if g is None else fw.tf.convert_to_tensor(g) for s, g in zip(srcs, grads)]

    # Traced as a graph: some eager gradient functions read op attributes
    # that only graph ops have (Conv3D's data_format).
    return fw.tf.function(vjp, autograph=False)(*sources, *[weights[k] for k in kept])


def is_array_at(fw, arg, path, func):
    return isinstance(arg, dict) and arg.get("kind") == "array" and fw.inside(arg.get("path"), func) == path


def serve_call(fw, req):
    func = req.get("func")
    tf_func = resolve_function(fw, func)
    args = req.get("args", [])
    kwargs = req.get("kwargs", {})
    if not isinstance(args, list):
        raise BridgeError(f"{func}: `args` must be a list")
    if not isinstance(kwargs, dict):
        raise BridgeError(f"{func}: `kwargs` must be an object")
    out_dir = fw.inside(req.get("out_dir"), f"{func}: `out_dir`")
    py_args = [convert_arg(fw, a, f"{func}: argument {i + 1}") for i, a in enumerate(args)]
    py_kwargs = {}
    for key, a in kwargs.items():
        try:
            fw.policy.vet_keyword(key)
        except Refused as e:
            raise BridgeError(f"{func}: refused: {e}")
        py_kwargs[key] = convert_arg(fw, a, f"{func}: argument `{key}`")
    gradient = req.get("gradient")
    try:
        if gradient is None:
            result = tf_func(*py_args, **py_kwargs)
        else:
            result = call_gradient(fw, func, tf_func, args, kwargs, py_args, py_kwargs, gradient)
    except BridgeError:
        raise
    except BaseException as e:  # also SystemExit and the like: one failed call, not a dead bridge
        if fw.over_memory(e):
            raise BridgeError(f"{func} exceeded the memory limit of {mib(fw.memory_limit)} beyond TensorFlow's own "
                              f"(--call-memory): {type(e).__name__}: {e}")
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
            return {"ok": True, "tf_version": fw.tf.__version__, "sandbox": fw.sandbox}
        if op == "resolve":
            resolve_function(fw, req.get("func"))
            return {"ok": True}
        if op == "call":
            return {"ok": True, "outputs": serve_call(fw, req)}
        return {"ok": False, "error": f"bad request: unknown op {json.dumps(op)}"}
    except BridgeError as e:
        return {"ok": False, "error": one_line(e)}
    except BaseException as e:  # a bug here must still answer with one line
        return {"ok": False, "error": one_line(f"bridge failure: {type(e).__name__}: {e}")}


def mib(n):
    """A byte count as messages print it: `512 MiB`, or bytes."""
    return f"{n >> 20} MiB" if n >= 1 << 20 and n % (1 << 20) == 0 else f"{n} bytes"


def parse_args(argv):
    """-> {"--request": FILE or None, "--memory-limit": int or None}, or
    None for a bad command line."""
    opts = {"--request": None, "--memory-limit": None}
    if len(argv) % 2:
        return None
    for flag, value in zip(argv[::2], argv[1::2]):
        if flag not in opts or opts[flag] is not None:
            return None
        if flag == "--memory-limit":
            if not value.isdigit() or int(value) <= 0:
                return None
            value = int(value)
        opts[flag] = value
    return opts


def main(argv):
    opts = parse_args(argv)
    if opts is None:
        print("usage: framework_call.py [--memory-limit BYTES] [--request FILE.json]  (no --request: serve stdin)",
              file=sys.stderr)
        return 2
    requests, responses = confine_stdio()
    # The working directory is the only place arrays are read from and
    # results written to; confine the process to it before TensorFlow
    # starts any thread.
    workdir = os.path.realpath(os.getcwd())
    policy = Policy.load()
    fw = Frameworks(policy, workdir, restrict_filesystem(workdir), opts["--memory-limit"])
    if opts["--request"] is not None:
        try:
            if opts["--request"] == "-":
                text = requests.read()
            else:
                with open(opts["--request"], encoding="utf-8") as f:
                    text = f.read()
        except OSError as e:
            resp = {"ok": False, "error": f"cannot read request: {e}"}
        else:
            resp = handle(fw, text)
        responses.write(json.dumps(resp) + "\n")
        responses.flush()
        return 0 if resp["ok"] else (3 if resp.get("unavailable") else 1)
    for line in requests:
        if not line.strip():
            continue
        responses.write(json.dumps(handle(fw, line)) + "\n")
        responses.flush()
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
