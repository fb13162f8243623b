"""Prints each tracked .rs file over 1,000 lines (`over: PATH N`), then the
largest file's size."""
import os
import subprocess
import sys

root = sys.argv[1]
files = subprocess.run(["git", "-C", root, "ls-files", "-co", "--exclude-standard", "*.rs"], capture_output=True, text=True, check=True).stdout.split()
sizes = []
for f in files:
    path = os.path.join(root, f)
    if os.path.isfile(path):
        with open(path, encoding="utf-8") as fh:
            sizes.append((sum(1 for _ in fh), f))
print(f"largest: {max(sizes)[0]} lines ({max(sizes)[1]})")
for n, f in sorted(sizes, reverse=True):
    if n > 1000:
        print(f"over: {f} {n}")
