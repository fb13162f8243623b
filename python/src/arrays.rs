//! The caller's arrays, borrowed through the buffer protocol: what a call
//! may run on in place (C-contiguous, aligned, of a supported dtype) and
//! the one copy made of an array that does not fit. Also the result arrays
//! a call allocates (NumPy arrays, written in place by host code).

use std::ffi::CStr;

use eintup::tensor::{DType, Data, Tensor};
use pyo3::ffi;
use pyo3::prelude::*;
use pyo3::sync::PyOnceLock;
use pyo3::types::{PyDict, PyTuple};

use crate::errors::{Error, ShapeError};

/// One array's memory, exported by its owner (NumPy, or any object with
/// the buffer protocol) for as long as the view lives: the owner cannot
/// resize or free it meanwhile. Only used with the GIL held (not `Send`).
pub struct View {
    raw: Box<ffi::Py_buffer>,
    pub dtype: DType,
    pub shape: Vec<usize>,
}

impl Drop for View {
    fn drop(&mut self) {
        // SAFETY: `raw` was filled by a successful PyObject_GetBuffer and is
        // released exactly once; views live only while the GIL is held.
        unsafe { ffi::PyBuffer_Release(self.raw.as_mut()) }
    }
}

pub fn dtype_name(d: DType) -> &'static str {
    match d {
        DType::I32 => "int32",
        DType::F32 => "float32",
        DType::F64 => "float64",
    }
}

/// The dtype a buffer-protocol format string stands for: a native-order
/// int32, float32 or float64 (NumPy's `i`, `f`, `d`).
fn format_dtype(format: &[u8], itemsize: isize) -> Option<DType> {
    let native = |c: &u8| *c == b'@' || *c == b'=' || (cfg!(target_endian = "little") && *c == b'<');
    let code = match format {
        [p, c] if native(p) => *c,
        [c] => *c,
        _ => return None,
    };
    match (code, itemsize) {
        (b'i' | b'l', 4) => Some(DType::I32),
        (b'f', 4) => Some(DType::F32),
        (b'd', 8) => Some(DType::F64),
        _ => None,
    }
}

impl View {
    /// Borrows `obj`'s memory (writable: for `out=`). `what` names it in
    /// messages (`array `a``, `out: `c``).
    pub fn get(obj: &Bound<'_, PyAny>, what: &str, writable: bool) -> PyResult<View> {
        let mut raw = Box::new(ffi::Py_buffer::new());
        let flags = if writable { ffi::PyBUF_RECORDS } else { ffi::PyBUF_RECORDS_RO };
        // SAFETY: `raw` is a fresh, owned Py_buffer; on success it is
        // released by `Drop`, on failure nothing was exported.
        if unsafe { ffi::PyObject_GetBuffer(obj.as_ptr(), raw.as_mut(), flags) } != 0 {
            let cause = PyErr::fetch(obj.py());
            let kind = obj.get_type().name().map(|n| n.to_string()).unwrap_or_default();
            let why = if writable && obj.hasattr("flags").unwrap_or(false) {
                format!("not a writable array ({cause})")
            } else {
                format!("a {kind}, not an array ({cause})")
            };
            return Err(ShapeError::new_err(format!("{what}: {why}")));
        }
        // SAFETY: the exporter filled format (FORMAT was asked for), and
        // shape (STRIDES implies ND) with ndim entries.
        let (format, shape) = unsafe {
            let f = if raw.format.is_null() { b"B".as_slice() } else { CStr::from_ptr(raw.format).to_bytes() };
            let s = if raw.ndim <= 0 || raw.shape.is_null() { &[][..] } else { std::slice::from_raw_parts(raw.shape, raw.ndim as usize) };
            (f.to_vec(), s.iter().map(|&d| d.max(0) as usize).collect::<Vec<usize>>())
        };
        let Some(dtype) = format_dtype(&format, raw.itemsize) else {
            // Released (by `Drop`) before anything else runs.
            drop(View { raw, dtype: DType::F32, shape });
            let name = obj.getattr("dtype").and_then(|d| d.str()).map(|s| s.to_string()).unwrap_or_else(|_| String::from_utf8_lossy(&format).into_owned());
            return Err(unsupported_dtype(what, &name));
        };
        let view = View { raw, dtype, shape };
        // A shape that does not hold the buffer's bytes (no shape given, or
        // an exporter that lies) is never used as one.
        let elements = view.shape.iter().try_fold(1usize, |n, &d| n.checked_mul(d));
        if elements.and_then(|n| n.checked_mul(dtype.size())) != Some(view.bytes()) {
            return Err(ShapeError::new_err(format!("{what}: its shape {:?} does not hold its {} bytes", view.shape, view.bytes())));
        }
        Ok(view)
    }

    /// Its size in bytes.
    pub fn bytes(&self) -> usize {
        self.raw.len as usize
    }

    pub fn ptr(&self) -> *mut u8 {
        self.raw.buf as *mut u8
    }

    /// Whether compiled code may use its memory as it is: C-contiguous
    /// and aligned to its elements.
    pub fn fits(&self) -> bool {
        // SAFETY: `raw` is a live export.
        let contiguous = unsafe { ffi::PyBuffer_IsContiguous(self.raw.as_ref(), b'C' as std::ffi::c_char) } == 1;
        contiguous && (self.ptr() as usize).is_multiple_of(self.dtype.size())
    }

    /// Its memory range, if it is one contiguous block.
    pub fn range(&self) -> (usize, usize) {
        (self.ptr() as usize, self.ptr() as usize + self.bytes())
    }

    /// Its elements in C order, as a tensor: the one copy of an array that
    /// does not fit.
    pub fn to_tensor(&self, what: &str) -> PyResult<Tensor> {
        let mut data = Data::try_zeros(self.dtype, self.bytes() / self.dtype.size())
            .ok_or_else(|| Error::new_err(format!("{what}: no memory for its copy ({} bytes)", self.bytes())))?;
        let dst = data_ptr(&mut data);
        // SAFETY: `dst` has room for exactly `len` bytes (the element count
        // times the element size); `raw` is a live export.
        if unsafe { ffi::PyBuffer_ToContiguous(dst as *mut std::ffi::c_void, self.raw.as_ref(), self.raw.len, b'C' as std::ffi::c_char) } != 0 {
            return Err(ShapeError::new_err(format!("{what}: cannot read its memory")));
        }
        Tensor::new(self.shape.clone(), data).ok_or_else(|| ShapeError::new_err(format!("{what}: its shape does not hold its elements")))
    }

    /// Writes `t`'s elements (its dtype and shape, checked by the caller)
    /// into this writable view, in C order, whatever its strides.
    pub fn fill_from(&self, mut t: Tensor, what: &str) -> PyResult<()> {
        if t.dtype() != self.dtype || t.len() * t.dtype().size() != self.bytes() || self.raw.readonly != 0 {
            return Err(ShapeError::new_err(format!("{what}: cannot write the result into it")));
        }
        let src = data_ptr(&mut t.data);
        // SAFETY: `src` holds exactly `len` bytes; `raw` is a live
        // writable export.
        if unsafe { ffi::PyBuffer_FromContiguous(self.raw.as_ref(), src as *const std::ffi::c_void, self.raw.len, b'C' as std::ffi::c_char) } != 0 {
            return Err(ShapeError::new_err(format!("{what}: cannot write its memory")));
        }
        Ok(())
    }
}

/// The first byte of a tensor's elements.
pub fn data_ptr(d: &mut Data) -> *mut u8 {
    match d {
        Data::I32(v) => v.as_mut_ptr() as *mut u8,
        Data::F32(v) => v.as_mut_ptr() as *mut u8,
        Data::F64(v) => v.as_mut_ptr() as *mut u8,
    }
}

/// A new zero-filled NumPy array of `shape` and `dtype`: a call's result.
pub fn zeros<'py>(py: Python<'py>, dtype: DType, shape: &[usize]) -> PyResult<Bound<'py, PyAny>> {
    static ZEROS: PyOnceLock<Py<PyAny>> = PyOnceLock::new();
    let f = ZEROS.get_or_try_init(py, || py.import("numpy")?.getattr("zeros").map(Bound::unbind))?;
    f.bind(py).call1((PyTuple::new(py, shape)?, dtype_name(dtype)))
}

/// A result array a call returns.
pub struct ResultSpec {
    pub name: String,
    pub dtype: DType,
    pub shape: Vec<usize>,
}

/// The result arrays of one call, with their writable views: `out=`
/// arrays where given (dtype and shape checked; `caller` true), new
/// zero-filled NumPy arrays otherwise. `what` names the program.
pub fn result_views<'a, 'py>(
    py: Python<'py>,
    specs: impl Iterator<Item = &'a ResultSpec> + Clone,
    out: Option<&Bound<'py, PyDict>>,
    what: &str,
) -> PyResult<Vec<(Bound<'py, PyAny>, View, bool)>> {
    if let Some(out) = out {
        for k in out.keys() {
            let name: String = k.extract()?;
            if !specs.clone().any(|s| s.name == name) {
                let names: Vec<&str> = specs.clone().map(|s| s.name.as_str()).collect();
                return Err(Error::new_err(format!(
                    "out: `{name}` is not a result of {what} (results: {})",
                    if names.is_empty() { "none".into() } else { names.join(", ") }
                )));
            }
        }
    }
    let mut results = Vec::new();
    for s in specs {
        let given = out.map(|o| o.get_item(&s.name)).transpose()?.flatten();
        let (obj, caller) = match given {
            Some(o) => (o, true),
            None => (zeros(py, s.dtype, &s.shape)?, false),
        };
        let what = format!("out: `{}`", s.name);
        let view = View::get(&obj, &what, true)?;
        if view.dtype != s.dtype || view.shape != s.shape {
            return Err(ShapeError::new_err(format!(
                "{what} is {}{:?}, the result is {}{:?}",
                dtype_name(view.dtype),
                view.shape,
                dtype_name(s.dtype),
                s.shape
            )));
        }
        results.push((obj, view, caller));
    }
    Ok(results)
}

/// The error for an array of a dtype eintup has no buffers of, with the
/// conversion that fits: INT is 32-bit signed (docs/language.md), FLOAT is
/// `float32` or `float64`; eintup never narrows an array silently.
pub(crate) fn unsupported_dtype(what: &str, dtype: &str) -> PyErr {
    let hint = if dtype.contains("int") || dtype.contains("bool") {
        "; INT is 32-bit signed: convert it with `.astype(numpy.int32)` (`.to(torch.int32)`)"
    } else if dtype.contains("float") {
        "; convert it with `.astype(numpy.float32)` (`.to(torch.float32)`)"
    } else {
        ""
    };
    ShapeError::new_err(format!("{what}: dtype {dtype} is not supported (int32, float32, float64){hint}"))
}
