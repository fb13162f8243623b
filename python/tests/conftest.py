"""Every test session compiles into its own temporary on-disk cache, not
the user's (`eintup.cache_dir()`), removed at exit; tests of the cache set
their own."""
import atexit
import os
import shutil
import tempfile

_CACHE = tempfile.mkdtemp(prefix="eintup-test-cache-")
os.environ["EINTUP_CACHE_DIR"] = _CACHE
atexit.register(shutil.rmtree, _CACHE, ignore_errors=True)
