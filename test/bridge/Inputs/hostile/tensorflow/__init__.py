"""A hostile stand-in for TensorFlow, for test/bridge/sandbox.test and
test/check/framework-errors.test.

It exports, under the names of pure operations, functions that misbehave in
every way the bridge must survive or contain: at import time and in `tile`
it tries to escape (write, delete, run a program, connect, signal its
parent), `reshape` raises SystemExit, `identity` reads stdin and prints to
stdout, `squeeze` kills the process, `fill` returns strings, `pad` raises
with terminal control characters in its message, `transpose` never returns
(it writes its pid to `bridge.pid` in its working directory, then sleeps),
`zeros` reserves 2 GiB with NumPy (untouched, so cheap without a limit) and
returns zeros shaped like its argument, `ones` fills its working directory with
files, then never returns. Each attempt is
reported in the function's exception message. HOSTILE_DIR names the
directory whose `pwned` must never appear and whose `keep/file` must never
disappear.
"""

import os
import socket
import sys
import time

import numpy as np

__version__ = "0.0-hostile"
HOSTILE_DIR = os.environ.get("HOSTILE_DIR", "/nonexistent")


class Tensor:
    pass


int32 = np.int32


def convert_to_tensor(a):
    return a


def constant(value, dtype=None):
    return np.asarray(value, dtype=np.int32)


def attempt(what, action):
    try:
        result = action()
    except BaseException as e:
        return f"{what}: {type(e).__name__}"
    return f"{what}: {'done' if result is None else result}"


def escapes(tag):
    """Every way out a misbehaving operation could try; -> a report."""
    pwned = os.path.join(HOSTILE_DIR, "pwned")

    def write():
        with open(pwned, "w") as f:
            f.write(tag)

    def connect():
        socket.create_connection(("127.0.0.1", 9), timeout=1).close()

    return [
        attempt(f"{tag} write outside", write),
        attempt(f"{tag} delete outside", lambda: os.remove(os.path.join(HOSTILE_DIR, "keep", "file"))),
        attempt(f"{tag} run a program", lambda: "exit status %d" % os.system(f"touch {pwned}")),
        attempt(f"{tag} connect", connect),
        attempt(f"{tag} signal the parent", lambda: os.kill(os.getppid(), 0)),
        attempt(f"{tag} write inside", lambda: open("inside.txt", "w").close()),
    ]


# At import time, before any request: the sandbox must already hold.
IMPORT_REPORT = escapes("import")


def pure(f):
    """Disguises `f` as an operation of a pure-op module."""
    f.__module__ = "tensorflow.python.ops.array_ops"
    return f


@pure
def tile(*args, **kwargs):
    raise RuntimeError("; ".join(IMPORT_REPORT + escapes("call")))


@pure
def reshape(*args, **kwargs):
    raise SystemExit(3)


@pure
def identity(x, *args, **kwargs):
    """Returns how many bytes it could read from stdin, after printing."""
    print("noise from print")
    os.write(1, b"noise on fd 1\n")
    n = len(os.read(0, 100)) + len(sys.stdin.read())
    return np.full(x.shape, n, dtype=x.dtype)


@pure
def squeeze(*args, **kwargs):
    os._exit(9)


@pure
def fill(*args, **kwargs):
    return np.array(["a", "b"])


@pure
def pad(*args, **kwargs):
    raise ValueError("\x1b[2Jcleared\x07")


@pure
def transpose(*args, **kwargs):
    with open("bridge.pid", "w") as f:
        f.write(str(os.getpid()))
    while True:
        time.sleep(1)


@pure
def zeros(x, *args, **kwargs):
    big = np.empty(1 << 28)
    del big
    return np.zeros(x.shape, dtype=x.dtype)


@pure
def ones(*args, **kwargs):
    os.makedirs("litter", exist_ok=True)
    for k in range(200):
        open(os.path.join("litter", str(k)), "w").close()
    return transpose()
