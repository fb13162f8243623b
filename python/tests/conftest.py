"""Every test process compiles into its own temporary on-disk cache, not
the user's (`eintup.cache_dir()`); tests of the cache set their own."""
import os
import tempfile

os.environ["EINTUP_CACHE_DIR"] = tempfile.mkdtemp(prefix="eintup-test-cache-")
