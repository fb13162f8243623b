"""Calls every function the framework-call policy admits with hostile
arguments and fails if any of them touches the file system.

Usage: poke_admitted.py DIR (DIR holds keep/file; run with DIR as cwd).
For each admitted function (scripts/framework_policy.py resolves the same
names the bridge would), each hostile string -- a path to create, a file://
URL, a directory and a file that must survive -- is passed in the first
three positional slots, as all three, and as each keyword parameter, next to
an ordinary tensor. A .et file can pass exactly such strings with L(..).
Unconfined on purpose (no Landlock), so an attempt would succeed and show.
Prints the number of functions and calls; exit 1 on any side effect.
"""

import collections
import inspect
import os
import sys

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
sys.dont_write_bytecode = True
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "..", "scripts"))

import numpy as np  # noqa: E402
import tensorflow as tf  # noqa: E402
from framework_policy import Policy  # noqa: E402


def admitted(policy):
    for ns in policy.namespaces:
        module = tf
        for part in ns.split(".")[1:]:
            module = vars(module)[part]
        for name in sorted(vars(module)):
            try:
                yield f"{ns}.{name}", policy.resolve(tf, f"{ns}.{name}")
            except Exception:
                pass


def trials(fn, x, hostile):
    yield (hostile,), {}
    yield (x, hostile), {}
    yield (x, x, hostile), {}
    yield (hostile, hostile, hostile), {}
    try:
        params = [p for p in inspect.signature(fn).parameters.values()
                  if p.kind in (p.POSITIONAL_OR_KEYWORD, p.KEYWORD_ONLY)]
    except (TypeError, ValueError):
        params = []
    for k, p in enumerate(params):
        yield ((x,) if k else ()), {p.name: hostile}


def main(d):
    before = sorted(os.listdir(d))
    hostile = [os.path.join(d, "pwned"), "file://" + os.path.join(d, "pwned"),
               os.path.join(d, "keep"), os.path.join(d, "keep", "file")]
    x = tf.constant(np.ones((2, 3)))
    outcomes = collections.Counter()
    functions = 0
    for name, fn in admitted(Policy.load()):
        functions += 1
        for h in hostile:
            for args, kwargs in trials(fn, x, h):
                try:
                    fn(*args, **kwargs)
                    outcomes["returned"] += 1
                except BaseException:  # refusing the strings is the expected outcome
                    outcomes["raised"] += 1
                if sorted(os.listdir(d)) != before or not os.path.isfile(os.path.join(d, "keep", "file")):
                    print(f"side effect: {name}{args}{kwargs}")
                    return 1
    print(f"{functions} functions, {sum(outcomes.values())} calls, no side effect")
    return 0


if __name__ == "__main__":
    sys.exit(main(os.path.realpath(sys.argv[1])))
