# The output of a VALID convolution (bench/ops/conv2d.et) against NumPy:
# `conv_reference.py DIR STRIDES` reads x, w and y from DIR (eintup run
# --out) and prints `exact ok` (INT) or `rel E ok` (float, E < 1e-5).
import numpy as np, sys
d=sys.argv[1]; s=[int(v) for v in sys.argv[2].split(',')]
x=np.load(d+'/x.npy'); w=np.load(d+'/w.npy'); y=np.load(d+'/y.npy')
exact = x.dtype.kind == 'i'
x=x.astype(np.int64 if exact else np.float64); w=w.astype(np.int64 if exact else np.float64)
fs=w.shape[:-2]; sp=x.shape[1:-1]; r=len(fs)
osz=[(sp[i]-fs[i])//s[i]+1 for i in range(r)]
ref=np.zeros((x.shape[0],*osz,w.shape[-1]), dtype=x.dtype)
for f in np.ndindex(*fs):
  sl=tuple(slice(f[i], f[i]+s[i]*(osz[i]-1)+1, s[i]) for i in range(r))
  ref+=np.tensordot(x[(slice(None),)+sl], w[f], axes=([x.ndim-1],[0]))
if exact:
  print(y.shape, 'exact', 'ok' if (y.astype(np.int64)==ref).all() else 'BAD')
else:
  err=np.abs(y-ref).max()/np.abs(ref).max(); print(y.shape, 'rel %.1e'%err, 'ok' if err<1e-5 else 'BAD')
