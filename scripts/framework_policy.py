"""Which framework calls the bridge may run, and how a name is resolved.

The second of two gates (docs/check.md, "Which calls are allowed"): eintup
already refused the name before starting Python (compiler/src/check/policy.rs),
and both read the rules from framework_policy.json next to this file. This
side repeats the name rules, then resolves the name without `getattr`: it
walks the allowed namespace modules' own dictionaries (no module
`__getattr__` hooks, lazy loaders or descriptors run), checks that every step
is a TensorFlow API module, and accepts only a plain Python function whose
implementation module is on the list of pure-op modules. So a name can reach
neither a module outside TensorFlow (os, sys, builtins, mock, ...) nor a
class, builtin or callable object, whatever TensorFlow exports.
"""

import difflib
import inspect
import json
import os
import re
import types

POLICY_FILE = os.path.join(os.path.dirname(os.path.abspath(__file__)), "framework_policy.json")

# One dotted part of a function name: lower-case ASCII, no leading `_`.
PART = re.compile(r"[a-z][a-z0-9_]*")

MISSING = object()


class Refused(Exception):
    """A name the policy refuses; the message says why."""


class Policy:
    def __init__(self, data):
        self.max_name_chars = int(data["max_name_chars"])
        self.namespaces = list(data["namespaces"])
        # (rank, reason) per denied name; rank 0 is the gravest group.
        self.denied = {}
        for rank, group in enumerate(data["denied"]):
            for name in group["names"]:
                self.denied.setdefault(name, (rank, group["reason"]))
        self.modules = frozenset(data["modules"])

    @classmethod
    def load(cls, path=POLICY_FILE):
        with open(path, encoding="utf-8") as f:
            return cls(json.load(f))

    def vet_function(self, name):
        """Raises Refused unless `name` passes the rules of policy.rs."""
        if not isinstance(name, str):
            raise Refused(f"a function name must be a string, got {json.dumps(name)}")
        if len(name) > self.max_name_chars:
            raise Refused(f"the name has {len(name)} characters; at most {self.max_name_chars} are allowed")
        parts = name.split(".")
        for part in parts:
            check_part(part)
        if parts[0] != "tf" or len(parts) < 2:
            raise Refused("only TensorFlow operations (`tf.` names) can be called")
        # The gravest reason wins, the leftmost among equals (as policy.rs).
        # Parts of the longest allowed namespace are exempt (policy.rs).
        denied = [p for p in parts[self.reviewed_parts(parts[:-1]):] if p in self.denied]
        if denied:
            part = min(denied, key=lambda p: self.denied[p][0])
            raise Refused(f"`{part}` {self.denied[part][1]}")
        namespace = ".".join(parts[:-1])
        if namespace not in self.namespaces:
            raise Refused(f"`{namespace}` is not one of the allowed namespaces ({', '.join(self.namespaces)})")

    def reviewed_parts(self, namespace):
        """How many leading parts of `namespace` form the longest allowed
        namespace (at least 1): a listed namespace was reviewed as a whole."""
        for k in range(len(namespace), 0, -1):
            if ".".join(namespace[:k]) in self.namespaces:
                return k
        return 1

    def vet_keyword(self, key):
        if not isinstance(key, str) or not 0 < len(key) <= self.max_name_chars:
            raise Refused(f"a keyword must be a string of 1 to {self.max_name_chars} characters")
        if not key.isascii() or not key.isidentifier():
            raise Refused(f"`{key}` is not a plain ASCII keyword")
        if key.startswith("_"):
            raise Refused(f"`{key}`: private and special (`_`, `__x__`) keywords are refused")

    def resolve(self, tf, name):
        """`tf.nn.convolution` -> the function object, or Refused / LookupError."""
        self.vet_function(name)
        parts = name.split(".")
        if not isinstance(tf, types.ModuleType) or tf.__name__ != "tensorflow":
            raise Refused("the `tf` module is not TensorFlow")
        obj = tf
        for i, part in enumerate(parts[1:-1], start=1):
            obj = vars(obj).get(part)
            if not is_tf_module(obj, part):
                raise Refused(f"`{'.'.join(parts[:i + 1])}` is not a TensorFlow API module")
        fn = vars(obj).get(parts[-1], MISSING)
        if fn is MISSING:
            # A misspelling is the usual cause: name the closest public name.
            close = difflib.get_close_matches(parts[-1], [k for k in vars(obj) if not k.startswith("_")], n=1)
            hint = f"; did you mean `{'.'.join(parts[:-1] + close)}`?" if close else ""
            raise LookupError(f"`{'.'.join(parts[:-1])}` has no attribute `{parts[-1]}`{hint}")
        if not inspect.isfunction(fn):
            raise Refused(f"not a function but a {type(fn).__name__}")
        if fn.__module__ not in self.modules:
            raise Refused(f"implemented in `{fn.__module__}`, which is not one of the pure-op modules of framework_policy.json")
        return fn


def check_part(part):
    if not part.isascii():
        c = next(c for c in part if not c.isascii())
        raise Refused(f"the character {c!r} (U+{ord(c):04X}) is not ASCII; names must be plain ASCII, so look-alikes cannot pass")
    if part.startswith("_"):
        raise Refused(f"`{part}` is private or special (`_`, `__x__`); such names are refused")
    if not PART.fullmatch(part):
        raise Refused(f"`{part}` is not a lower-case name (letters, digits and `_`, starting with a letter)")


def is_tf_module(obj, part):
    """A module of TensorFlow's API tree named `part` (tf.math is
    `tensorflow._api.v2.math`), not a module TensorFlow merely imported."""
    return (isinstance(obj, types.ModuleType)
            and isinstance(getattr(obj, "__name__", None), str)
            and obj.__name__.startswith("tensorflow.")
            and obj.__name__.rsplit(".", 1)[-1] == part)
