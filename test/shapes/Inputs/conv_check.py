"""Checks eintup's y.npy against a VALID convolution computed here, with
NumPy only, by shifting x over every filter position and accumulating:
usage conv_check.py X.npy W.npy Y.npy."""
import sys

import numpy as np

x, w, y = (np.load(p) for p in sys.argv[1:4])
n = x.ndim - 2  # spatial dims
fs = w.shape[:n]
out = tuple(i - f + 1 for i, f in zip(x.shape[1:1 + n], fs))
want = np.zeros((x.shape[0],) + out + (w.shape[-1],))
for k in np.ndindex(*fs):
    window = (slice(None),) + tuple(slice(kk, kk + o) for kk, o in zip(k, out)) + (slice(None),)
    want += np.tensordot(x[window], w[k], axes=([x.ndim - 1], [0]))
assert y.shape == want.shape, (y.shape, want.shape)
np.testing.assert_allclose(y, want, rtol=1e-12, atol=1e-12)
print("conv ok", list(y.shape))
