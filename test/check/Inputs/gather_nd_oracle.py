"""An oracle for gather_nd independent of eintup and TensorFlow:
gather_nd_oracle.py DIR BATCH_RANK reads DIR/{src,idx,dst}.npy written by
`eintup run --out DIR` and checks dst[b, w, item] = src[b, idx[b, w, :], item]
for every b (BATCH_RANK axes) and w, with NumPy indexing. Prints `oracle
agrees` or exits 1."""
import sys

import numpy as np

d, nb = sys.argv[1], int(sys.argv[2])
src, idx, dst = (np.load(f"{d}/{n}.npy") for n in ("src", "idx", "dst"))
depth = idx.shape[-1]
want = np.zeros_like(dst)
for b in np.ndindex(*src.shape[:nb]):
    for w in np.ndindex(*idx.shape[nb:-1]):
        want[b + w] = src[b + tuple(idx[b + w])]
assert src.ndim >= nb + depth
if not np.array_equal(want, dst):
    sys.exit(f"oracle disagrees: {want.ravel()[:8]} vs {dst.ravel()[:8]}")
print(f"oracle agrees on {dst.size} elements (index depth {nb + depth})")
