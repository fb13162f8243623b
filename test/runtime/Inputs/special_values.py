"""Writes x.npy, w.npy (FLOAT) and n.npy (INT) of special values into a
directory, in f64 or f32: `special_values.py DIR f64|f32`."""
import sys

import numpy as np

out, width = sys.argv[1], sys.argv[2]
dt = np.float64 if width == "f64" else np.float32
tiny = np.finfo(dt).tiny
x = [np.nan, np.inf, -np.inf, 0.0, -0.0, tiny / 4, -tiny / 4, tiny, np.finfo(dt).max, -np.finfo(dt).max,
     1.0, -1.0, 0.5, -0.5, 2.0, -2.0, 3.0, 1e-8, 20.0, -20.0, 88.7, 709.0, 710.0, -745.0, 1.0000001, 0.9999999, 1e10, -1e10]
w = [np.nan, np.inf, -np.inf, 0.0, -0.0, 0.5, -0.5, 1.0, -1.0, 2.0, 3.0, -3.0, 1e-3, 1e3, 0.3333333333333333, 1e10, -1e10]
np.save(f"{out}/x.npy", np.array(x, dtype=dt))
np.save(f"{out}/w.npy", np.array(w, dtype=dt))
np.save(f"{out}/n.npy", np.array([-(2**31), 2**31 - 1, -5, -1, 0, 1, 7], dtype=np.int32))
