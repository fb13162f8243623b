# lit configuration for eintup: runs `# RUN:` lines with etopt, eintup and
# LLVM 19's FileCheck on the files below this folder.
import os
import lit.formats

config.name = "eintup"
config.test_format = lit.formats.ShTest(execute_external=True)
config.suffixes = [".et", ".etir", ".test"]
config.excludes = ["Inputs"]
config.test_source_root = os.path.dirname(__file__)
config.test_exec_root = os.path.join(config.test_source_root, "Output")

root = os.path.dirname(config.test_source_root)
bindir = os.environ.get("EINTUP_BIN_DIR", os.path.join(root, "target", "debug"))
llvm_bin = os.environ.get("LLVM_BIN_DIR", "/usr/lib/llvm-19/bin")
config.environment["PATH"] = os.pathsep.join([bindir, llvm_bin, os.path.join(root, ".venv", "bin"), os.environ.get("PATH", "")])
# `eintup run` keeps compiled host programs on disk (docs/cli.md, "The
# compile cache"): the suite's own cache, empty at the start of each lit
# run, never the user's ~/.cache.
import shutil
test_cache = os.path.join(config.test_exec_root, "eintup-cache")
shutil.rmtree(test_cache, ignore_errors=True)
config.environment["EINTUP_CACHE_DIR"] = test_cache
config.substitutions.append(("%examples", os.path.join(root, "docs", "examples")))
config.substitutions.append(("%root", root))
config.substitutions.append(("%bindir", bindir))
config.substitutions.append(("%inputs", os.path.join(config.test_source_root, "Inputs")))
# Feature `root`: tests that hand files to a second uid (the cache's trust
# checks) need it; elsewhere they are reported unsupported, not skipped
# silently.
if os.geteuid() == 0:
    config.available_features.add("root")

# %python: the repository's virtual environment (numpy; TensorFlow after
# `scripts/setup --with-tf`). Feature `tensorflow` when it imports, so tests
# of the framework bridge say `REQUIRES: tensorflow` and are reported as
# unsupported, not failed, without it.
import subprocess
venv_python = os.path.join(root, ".venv", "bin", "python")
config.substitutions.append(("%python", venv_python))
# Importing TensorFlow takes ~10 s, so the answer is kept beside the venv,
# keyed by what `scripts/setup` installed (its stamp) and the site-packages
# folder's change time: running one test does not pay for the probe again.
def _tf_probe():
    venv = os.path.join(root, ".venv")
    key = []
    for p in [os.path.join(venv, ".stamp-tf"), venv_python]:
        try:
            st = os.stat(p)
            key.append("%s:%d:%d" % (p, st.st_mtime_ns, st.st_size))
        except OSError:
            key.append(p + ":-")
    key = "|".join(key)
    cache = os.path.join(venv, ".lit-tensorflow-probe")
    try:
        with open(cache) as f:
            k, answer = f.read().rsplit("\n", 1)
        if k == key:
            return answer == "yes"
    except (OSError, ValueError):
        pass
    try:
        ok = subprocess.run([venv_python, "-c", "import tensorflow"], env=dict(os.environ, TF_CPP_MIN_LOG_LEVEL="3"),
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, timeout=300).returncode == 0
    except (OSError, subprocess.TimeoutExpired):
        return False
    try:
        with open(cache, "w") as f:
            f.write(key + "\n" + ("yes" if ok else "no"))
    except OSError:
        pass
    return ok

if _tf_probe():
    config.available_features.add("tensorflow")

# Feature `landlock` when the framework bridge's sandbox
# (scripts/framework_sandbox.py) can confine a process on this kernel. Asked
# in a child process: the call confines whoever makes it.
try:
    import sys
    _ll = subprocess.run([sys.executable, "-B", "-c", "import sys; sys.path.insert(0, sys.argv[1]); import framework_sandbox as s; print(s.restrict_filesystem('.'))",
                          os.path.join(root, "scripts")], capture_output=True, text=True, timeout=60)
    if _ll.stdout.startswith("landlock"):
        config.available_features.add("landlock")
except (OSError, subprocess.TimeoutExpired):
    pass

# Feature `cuda` when the CUDA driver library loads: tests of the no-GPU
# paths say `%if cuda %{ ... %} %else %{ ... %}` or `UNSUPPORTED: cuda`.
import ctypes
try:
    ctypes.CDLL("libcuda.so.1")
    config.available_features.add("cuda")
except OSError:
    pass
