"""Confines the framework bridge's process (docs/check.md, "The sandbox").

The policy (framework_policy.py) decides which TensorFlow function may run;
this module limits what the process could do if a function ever did more
than it should:

- `confine_stdio` keeps stdin and stdout for the protocol only: fd 0 is
  pointed at /dev/null and fd 1 at stderr, so nothing TensorFlow (or its
  C++ side) prints or reads can touch the request and response streams.
- `restrict_filesystem` uses Linux Landlock, before TensorFlow is imported
  and before any thread exists, so every later thread inherits it: the
  process may read files (Python and TensorFlow load from everywhere) but
  write, create, delete or rename only below its working directory, may run
  no program, may open no TCP connection and may signal no process outside
  itself. It needs no privileges; on a kernel without Landlock the bridge
  runs unconfined and says so in its ping response.
- `limit_memory` caps the process's data memory (RLIMIT_DATA: heap and
  private writable mappings, which is where NumPy and TensorFlow put
  tensors) at what it holds now plus the `check --call-memory` allowance,
  soft and hard, so a call cannot raise it again. An allocation over it
  fails (MemoryError, ResourceExhaustedError) instead of the machine
  running out of memory. Address space (RLIMIT_AS) is not limited:
  TensorFlow and glibc reserve far more of it than they use.
"""

import ctypes
import os
import resource
import sys

# Landlock system calls: the same numbers on every Linux architecture.
SYS_CREATE_RULESET, SYS_ADD_RULE, SYS_RESTRICT_SELF = 444, 445, 446
CREATE_RULESET_VERSION = 1
RULE_PATH_BENEATH = 1
PR_SET_NO_NEW_PRIVS = 38

# Filesystem access rights (linux/landlock.h) and the ABI that added them.
EXECUTE, WRITE_FILE = 1 << 0, 1 << 1
REMOVE_DIR, REMOVE_FILE = 1 << 4, 1 << 5
MAKE_CHAR, MAKE_DIR, MAKE_REG, MAKE_SOCK = 1 << 6, 1 << 7, 1 << 8, 1 << 9
MAKE_FIFO, MAKE_BLOCK, MAKE_SYM = 1 << 10, 1 << 11, 1 << 12
REFER = 1 << 13  # ABI 2
TRUNCATE = 1 << 14  # ABI 3
NET_BIND_TCP, NET_CONNECT_TCP = 1 << 0, 1 << 1  # ABI 4
SCOPE_ABSTRACT_UNIX_SOCKET, SCOPE_SIGNAL = 1 << 0, 1 << 1  # ABI 6


class RulesetAttr(ctypes.Structure):
    _fields_ = [("handled_access_fs", ctypes.c_uint64),
                ("handled_access_net", ctypes.c_uint64),
                ("scoped", ctypes.c_uint64)]


class PathBeneathAttr(ctypes.Structure):
    _pack_ = 1  # packed in the kernel's header
    _fields_ = [("allowed_access", ctypes.c_uint64), ("parent_fd", ctypes.c_int32)]


def confine_stdio():
    """-> (requests, responses): private handles on the original stdin and
    stdout. Afterwards fd 0 reads /dev/null and fd 1 writes to stderr."""
    sys.stdout.flush()
    responses = os.fdopen(os.dup(1), "w", encoding="utf-8", buffering=1)
    requests = os.fdopen(os.dup(0), "r", encoding="utf-8")
    null = os.open(os.devnull, os.O_RDONLY)
    os.dup2(null, 0)
    os.close(null)
    os.dup2(2, 1)
    sys.stdin = os.fdopen(0, "r", encoding="utf-8", closefd=False)
    sys.stdout = sys.stderr
    return requests, responses


def restrict_filesystem(workdir):
    """Applies the Landlock rules above; -> one line describing the result
    ("landlock ABI 7" or "none (reason)"). Call before importing TensorFlow."""
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        syscall = libc.syscall
        syscall.restype = ctypes.c_long
    except (OSError, AttributeError) as e:
        return f"none (no C library: {e})"

    def call(*args):
        r = syscall(*args)
        if r < 0:
            raise OSError(ctypes.get_errno(), os.strerror(ctypes.get_errno()))
        return r

    try:
        abi = call(ctypes.c_long(SYS_CREATE_RULESET), None, ctypes.c_size_t(0), ctypes.c_uint32(CREATE_RULESET_VERSION))
    except OSError as e:
        return f"none (this kernel has no Landlock: {e.strerror})"
    writes = WRITE_FILE | REMOVE_DIR | REMOVE_FILE | MAKE_DIR | MAKE_REG
    handled = EXECUTE | writes | MAKE_CHAR | MAKE_SOCK | MAKE_FIFO | MAKE_BLOCK | MAKE_SYM
    if abi >= 2:
        handled |= REFER
        writes |= REFER
    if abi >= 3:
        handled |= TRUNCATE
        writes |= TRUNCATE
    attr = RulesetAttr(handled, NET_BIND_TCP | NET_CONNECT_TCP if abi >= 4 else 0,
                       SCOPE_ABSTRACT_UNIX_SOCKET | SCOPE_SIGNAL if abi >= 6 else 0)
    size = 8 if abi < 4 else 16 if abi < 6 else 24
    fds = []
    try:
        ruleset = call(ctypes.c_long(SYS_CREATE_RULESET), ctypes.byref(attr), ctypes.c_size_t(size), ctypes.c_uint32(0))
        fds.append(ruleset)
        # The working directory: everything but running programs. /dev/null:
        # writing only, which some libraries open for output they discard.
        for path, allowed in ((workdir, writes), (os.devnull, WRITE_FILE | (TRUNCATE if abi >= 3 else 0))):
            fd = os.open(path, os.O_PATH | os.O_CLOEXEC)
            fds.append(fd)
            rule = PathBeneathAttr(allowed, fd)
            call(ctypes.c_long(SYS_ADD_RULE), ctypes.c_int(ruleset), ctypes.c_int(RULE_PATH_BENEATH), ctypes.byref(rule), ctypes.c_uint32(0))
        if libc.prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0:
            raise OSError(ctypes.get_errno(), "prctl(PR_SET_NO_NEW_PRIVS)")
        call(ctypes.c_long(SYS_RESTRICT_SELF), ctypes.c_int(ruleset), ctypes.c_uint32(0))
    except OSError as e:
        return f"none (Landlock refused the rules: {e})"
    finally:
        for fd in fds:
            os.close(fd)
    return f"landlock ABI {abi}"


def data_bytes():
    """The process's data memory now (VmData of /proc/self/status), or 0."""
    try:
        with open("/proc/self/status", encoding="ascii") as f:
            for line in f:
                if line.startswith("VmData:"):
                    return int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        pass
    return 0


def limit_memory(allowance):
    """Caps data memory at its present size plus `allowance` bytes; -> one
    line describing the result ("memory limit: ..." or "no memory limit (reason)")."""
    cap = data_bytes() + allowance
    try:
        resource.setrlimit(resource.RLIMIT_DATA, (cap, cap))
    except (ValueError, OSError) as e:
        return f"no memory limit ({e})"
    return f"memory limit: {allowance >> 20} MiB beyond {data_bytes() >> 20} MiB at start"
