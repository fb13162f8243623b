//! The `cuda` target (docs/python.md, "CUDA"): programs loaded on a CUDA
//! device, run on the caller's device arrays in place (taken through
//! DLPack, `dlpack`), on the caller's stream, with results left on the
//! device as [`CudaArray`]s that export themselves through DLPack.
//!
//! A call enqueues and returns, as a PyTorch op does: results are ready in
//! stream order. Host arrays given to a CUDA program are uploaded (a copy,
//! counted). The caller's memory stays alive while the program may use it:
//! the imported tensors of a call are held (their deleters not called)
//! until a later call has released them from the program and the run that
//! used them is seen finished (`Program::finished_runs`, an event query:
//! nothing waits), or until a `synchronize`.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use eintup::tensor::{DType, Tensor};
use eintup_runtime::manifest::Role;
use eintup_runtime::{Device, DeviceBuffer, Program};
use pyo3::exceptions::PyBufferError;
use pyo3::prelude::*;
use pyo3::types::PyDict;

use crate::arrays::{dtype_name, zeros, ResultSpec, View};
use crate::dlpack::{self, device_name, DLDevice, Imported, KDL_CPU, KDL_CUDA};
use crate::errors::{Error, ShapeError};
use crate::SameThread;

/// CUDA device `ordinal`, opened once per process (its context and stream
/// live as long as the process). No driver or no such device is the
/// runtime's message (the CLI's exit-code-3 class) as `eintup.Error`.
pub fn device(ordinal: usize) -> PyResult<&'static Device> {
    static DEVICES: Mutex<BTreeMap<usize, &'static Device>> = Mutex::new(BTreeMap::new());
    let mut devices = DEVICES.lock().unwrap_or_else(|p| p.into_inner());
    if let Some(d) = devices.get(&ordinal) {
        return Ok(d);
    }
    let d = Device::new(ordinal).map_err(|e| match e.exit_code() {
        3 => Error::new_err(format!("error: {e}")),
        _ => Error::new_err(format!("CUDA: {e}")),
    })?;
    let d: &'static Device = Box::leak(Box::new(d));
    devices.insert(ordinal, d);
    Ok(d)
}

/// The CUDA stream a call runs on, as a `CUstream` value: `stream=None`
/// is the legacy default stream (DLPack's `1`, which is also the driver's
/// `CU_STREAM_LEGACY` handle); `0` (the driver's null stream) is the same
/// stream; `2` is the per-thread default stream; any other int is a
/// `CUstream`/`cudaStream_t`; an object with `.cuda_stream` (a
/// `torch.cuda.Stream`, a `cupy.cuda.Stream`) gives its handle.
pub fn stream_of(stream: Option<&Bound<'_, PyAny>>) -> PyResult<u64> {
    let Some(s) = stream.filter(|s| !s.is_none()) else { return Ok(1) };
    let handle = match s.getattr("cuda_stream") {
        Ok(h) => h,
        Err(_) => s.clone(),
    };
    let v: i128 = handle.extract().map_err(|_| {
        Error::new_err(format!(
            "stream: expected an int CUstream handle or an object with `.cuda_stream`, got {}",
            s.repr().map(|r| r.to_string()).unwrap_or_default()
        ))
    })?;
    match u64::try_from(v) {
        Ok(0) => Ok(1),
        Ok(v) => Ok(v),
        Err(_) => Err(Error::new_err(format!("stream: {v} is not a CUDA stream handle"))),
    }
}

/// One argument of a CUDA call: device memory taken through DLPack, or a
/// host array (uploaded).
pub enum Arg {
    Cuda(Imported),
    Host(View),
}

impl Arg {
    /// The array's shape, wherever it lives.
    pub fn shape(&self) -> &[usize] {
        match self {
            Arg::Cuda(i) => &i.shape,
            Arg::Host(v) => &v.shape,
        }
    }
}

/// The call's arrays: CUDA arrays imported (checked, consumed) for
/// `stream`, host arrays borrowed; arrays elsewhere (another device type)
/// refused.
pub fn arguments(arrays: &Bound<'_, PyDict>, stream: u64) -> PyResult<Vec<(String, Arg)>> {
    let mut args = Vec::with_capacity(arrays.len());
    for (k, v) in arrays.iter() {
        let name: String = k.extract()?;
        let what = format!("array `{name}`");
        let arg = match dlpack::device_of(&v, &what)? {
            Some(d) if d.device_type == KDL_CUDA => Arg::Cuda(dlpack::import(&v, d, Some(stream), &what)?),
            Some(d) if d.device_type != KDL_CPU => {
                return Err(ShapeError::new_err(format!(
                    "{what}: it is on {}; the cuda target takes CUDA device arrays (kDLCUDA) and host arrays",
                    device_name(d)
                )));
            }
            _ => Arg::Host(View::get(&v, &what, false)?),
        };
        args.push((name, arg));
    }
    Ok(args)
}

/// The CUDA device of the call: that of its CUDA arrays (inputs, then
/// `out=`), which must all be one; device 0 for host arrays alone.
pub fn ordinal_of(args: &[(String, Arg)], out: Option<&Bound<'_, PyDict>>) -> PyResult<usize> {
    let mut found: Option<(i32, String)> = None;
    let mut see = |id: i32, what: String| -> PyResult<()> {
        match &found {
            Some((first, w)) if *first != id => {
                Err(ShapeError::new_err(format!("{what} is on CUDA device {id}, {w} on CUDA device {first}: one call runs on one device")))
            }
            Some(_) => Ok(()),
            None => {
                found = Some((id, what));
                Ok(())
            }
        }
    };
    for (name, a) in args {
        if let Arg::Cuda(i) = a {
            see(i.device.device_id, format!("array `{name}`"))?;
        }
    }
    if let Some(out) = out {
        for (k, v) in out.iter() {
            let what = format!("out: `{}`", k.str()?);
            if let Some(d) = dlpack::device_of(&v, &what)?.filter(|d| d.device_type == KDL_CUDA) {
                see(d.device_id, what)?;
            }
        }
    }
    let id = found.map_or(0, |(id, _)| id);
    usize::try_from(id).map_err(|_| ShapeError::new_err(format!("CUDA device id {id} is not an ordinal")))
}

/// A program loaded on a CUDA device, with what a call leaves behind.
pub struct CudaProgram {
    // Field order is drop order: the program (which waits for its work)
    // before the caller's tensors it may still use.
    program: Mutex<Program<'static>>,
    /// Each call's imported tensors, with the run that may use them.
    held: Mutex<Vec<(u64, Vec<Imported>)>>,
    pub ordinal: usize,
    device: &'static Device,
    /// Inputs the last call uploaded from the host: a later call that
    /// leaves one out gets the program's generated values again.
    written: Mutex<BTreeSet<String>>,
    /// The stream the program enqueues on (0: not chosen yet).
    stream: AtomicU64,
}

impl CudaProgram {
    pub fn new(program: Program<'static>, ordinal: usize, device: &'static Device) -> CudaProgram {
        CudaProgram { program: Mutex::new(program), held: Mutex::default(), ordinal, device, written: Mutex::default(), stream: AtomicU64::new(0) }
    }

    pub fn manifest_inputs(&self) -> Vec<(String, DType, Vec<usize>, bool)> {
        let p = crate::lock(&self.program);
        let m = p.manifest();
        m.inputs().map(|b| (b.name.clone(), b.dtype, b.shape.clone(), m.generator(&b.name).is_some())).collect()
    }

    /// The output buffers: `(name, dtype, shape)`.
    pub fn manifest_outputs(&self) -> Vec<(String, DType, Vec<usize>)> {
        let p = crate::lock(&self.program);
        p.manifest().buffers.iter().filter(|b| b.role == Role::Output).map(|b| (b.name.clone(), b.dtype, b.shape.clone())).collect()
    }

    /// [`Program::rebind`]: the same dynamic bundle at other dims.
    pub fn rebind(&self, bundle: &eintup_runtime::Bundle) -> eintup_runtime::Result<()> {
        let mut p = self.program.try_lock().map_err(|_| eintup_runtime::Error::InvalidArgument("the program is running".into()))?;
        p.rebind(bundle)
    }

    /// Waits for the work enqueued so far (the GIL released meanwhile),
    /// then lets the caller's tensors of the last call go: no launch uses
    /// them before the next call binds its own in their place.
    pub fn synchronize(&self, py: Python<'_>) -> PyResult<()> {
        let mut p = crate::lock_detached(py, &self.program);
        let p = SameThread(&mut *p);
        py.detach(move || {
            let p = p;
            p.0.synchronize()
        })
        .map_err(|e| Error::new_err(format!("CUDA: {e}")))?;
        crate::lock(&self.held).clear();
        Ok(())
    }

    /// Runs the program on `args` (names checked against the program's
    /// inputs) on `stream` and returns its `results` by name: the caller's
    /// `out=` arrays where given, else new [`CudaArray`]s. Returns the
    /// number of arrays copied (host inputs uploaded, results that are not
    /// output buffers). `what` names the program in messages.
    pub fn call<'py>(
        self: &Arc<Self>,
        py: Python<'py>,
        what: &str,
        args: Vec<(String, Arg)>,
        results: &[ResultSpec],
        out: Option<&Bound<'py, PyDict>>,
        stream: u64,
    ) -> PyResult<(Bound<'py, PyDict>, u64)> {
        let mut fresh: Vec<Imported> = Vec::new();
        let r = self.bind_and_run(py, what, args, results, out, stream, &mut fresh);
        let mut held = crate::lock(&self.held);
        if let Ok(mut p) = self.program.try_lock() {
            // Earlier calls' tensors were rebound or unbound by this one:
            // they go once their run has finished. An error of the query
            // (a kernel fault) keeps them; the next call or `synchronize`
            // reports it.
            let done = p.finished_runs().unwrap_or(0);
            held.retain(|(run, _)| *run > done);
            // A failed call's tensors may be bound, and a run may have
            // been enqueued on them or be the next: kept at least until
            // that one finishes.
            let run = if r.is_ok() { p.runs() } else { p.runs() + 1 };
            held.push((run, fresh));
        } else {
            held.push((u64::MAX, fresh));
        }
        r
    }

    #[allow(clippy::too_many_arguments)]
    fn bind_and_run<'py>(
        self: &Arc<Self>,
        py: Python<'py>,
        what: &str,
        args: Vec<(String, Arg)>,
        results: &[ResultSpec],
        out: Option<&Bound<'py, PyDict>>,
        stream: u64,
        fresh: &mut Vec<Imported>,
    ) -> PyResult<(Bound<'py, PyDict>, u64)> {
        // out= arrays (taken first: exporting one of this program's own
        // results may wait for the program): results, CUDA arrays of this device, of the
        // result's dtype and shape, writable and contiguous.
        let mut outs: BTreeMap<String, (Bound<'py, PyAny>, Imported)> = BTreeMap::new();
        if let Some(out) = out {
            for (k, v) in out.iter() {
                let name: String = k.extract()?;
                let w = format!("out: `{name}`");
                let Some(s) = results.iter().find(|s| s.name == name) else {
                    let names: Vec<&str> = results.iter().map(|s| s.name.as_str()).collect();
                    return Err(Error::new_err(format!("{w} is not a result of {what} (results: {})", names.join(", "))));
                };
                let d = dlpack::device_of(&v, &w)?;
                let Some(d) = d.filter(|d| *d == DLDevice { device_type: KDL_CUDA, device_id: self.ordinal as i32 }) else {
                    let on = d.map_or("host memory".to_string(), device_name);
                    return Err(ShapeError::new_err(format!("{w}: it is on {on}; the call runs on CUDA device {}, where out= arrays must be", self.ordinal)));
                };
                let i = dlpack::import(&v, d, Some(stream), &w)?;
                if i.read_only {
                    return Err(ShapeError::new_err(format!("{w}: its producer exports it read-only")));
                }
                if i.dtype != s.dtype || i.shape != s.shape {
                    return Err(ShapeError::new_err(format!(
                        "{w} is {}{:?}, the result is {}{:?}",
                        dtype_name(i.dtype),
                        i.shape,
                        dtype_name(s.dtype),
                        s.shape
                    )));
                }
                outs.insert(name, (v, i));
            }
        }
        // Calls of one program take turns; a call waits without the GIL.
        let mut p = crate::lock_detached(py, &self.program);
        let rt = |e: eintup_runtime::Error| match e {
            eintup_runtime::Error::Input { .. } => ShapeError::new_err(format!("{what}: {e}")),
            e => Error::new_err(format!("{what}: {e}")),
        };
        let m = p.manifest().clone();
        let inputs: Vec<&str> = m.inputs().map(|b| b.name.as_str()).collect();
        let mut given: BTreeMap<String, Arg> = BTreeMap::new();
        for (name, a) in args {
            let Some(b) = m.buffers.iter().find(|b| b.name == name && b.role == Role::Input) else {
                return Err(ShapeError::new_err(format!("{what}: `{name}` is not an input (inputs: {})", inputs.join(", "))));
            };
            let (dtype, shape) = match &a {
                Arg::Cuda(i) => (i.dtype, i.shape.clone()),
                Arg::Host(v) => (v.dtype, v.shape.clone()),
            };
            let host_float = matches!(a, Arg::Host(_)) && dtype.is_float() && b.dtype.is_float();
            if (dtype != b.dtype && !host_float) || shape != b.shape {
                let hint = if matches!(a, Arg::Cuda(_)) && dtype.is_float() && b.dtype.is_float() {
                    " (nothing is converted on the device: pass the program's dtype, or compile with the other `float=`)"
                } else {
                    ""
                };
                return Err(ShapeError::new_err(format!(
                    "{what}: array `{name}` is {}{shape:?}, the program's input is {}{:?}{hint}",
                    dtype_name(dtype),
                    dtype_name(b.dtype),
                    b.shape
                )));
            }
            given.insert(name, a);
        }
        if let Some(b) = m.inputs().find(|b| !given.contains_key(&b.name) && m.generator(&b.name).is_none()) {
            return Err(ShapeError::new_err(format!(
                "{what}: input `{}` is not given (expected {} of shape {:?}) and the program cannot generate it",
                b.name,
                dtype_name(b.dtype),
                b.shape
            )));
        }
        // Everything is checked: now the device.
        if self.stream.load(Ordering::Relaxed) != stream {
            // SAFETY: the stream is the caller's (docs: it must be a live
            // stream of this device's context while work is enqueued on
            // it) or the legacy default stream, which always is.
            unsafe { p.use_stream(stream as usize as *mut std::ffi::c_void) }.map_err(rt)?;
            self.stream.store(stream, Ordering::Relaxed);
        }
        let mut copies = 0u64;
        let mut written = crate::lock(&self.written);
        for b in m.inputs() {
            match given.remove(&b.name) {
                Some(Arg::Cuda(i)) => {
                    // SAFETY: `i` is a checked CUDA allocation of this
                    // device (its producer's), kept alive in `held` until
                    // the program has released it.
                    let buf = unsafe { self.device.wrap(i.ptr, i.bytes, i.dtype, &i.shape) }.map_err(rt)?;
                    fresh.push(i);
                    p.bind(&b.name, &buf).map_err(rt)?;
                    written.remove(&b.name);
                }
                Some(Arg::Host(v)) => {
                    let t = v.to_tensor(&format!("array `{}`", b.name))?;
                    let t = if t.dtype() == b.dtype { t } else { t.with_float_width(b.dtype == DType::F32) };
                    p.unbind(&b.name).map_err(rt)?;
                    p.write(&b.name, &t).map_err(rt)?;
                    written.insert(b.name.clone());
                    copies += 1;
                }
                None => {
                    p.unbind(&b.name).map_err(rt)?;
                    if written.remove(&b.name) {
                        p.generate(&b.name).map_err(rt)?;
                    }
                }
            }
        }
        drop(written);
        let mut bound_results: Vec<(String, Result<Bound<'py, PyAny>, DeviceBuffer>)> = Vec::new();
        for s in results {
            let Some(b) = m.buffers.iter().find(|b| b.name == s.name && b.role == Role::Output) else { continue };
            let (buf, obj) = match outs.remove(&s.name) {
                Some((obj, i)) => {
                    // SAFETY: as for inputs.
                    let buf = unsafe { self.device.wrap(i.ptr, i.bytes, i.dtype, &i.shape) }.map_err(rt)?;
                    fresh.push(i);
                    (buf, Some(obj))
                }
                None => (self.device.alloc(b.dtype, &b.shape).map_err(rt)?, None),
            };
            p.bind(&b.name, &buf).map_err(rt)?;
            bound_results.push((s.name.clone(), obj.ok_or(buf)));
        }
        let run = SameThread(&mut *p);
        py.detach(move || {
            let run = run;
            run.0.run()
        })
        .map_err(rt)?;
        let dict = PyDict::new(py);
        for s in results {
            match bound_results.iter().position(|(n, _)| *n == s.name) {
                Some(k) => match &bound_results[k].1 {
                    Ok(obj) => dict.set_item(&s.name, obj)?,
                    Err(buf) => dict.set_item(&s.name, CudaArray { buffer: buf.clone(), ordinal: self.ordinal, program: Some(self.clone()), stream })?,
                },
                // A result that is not an output buffer (an input, say):
                // read back and uploaded again, a copy.
                None => {
                    let t = p.read(&s.name).map_err(rt)?;
                    let buf = self.device.upload(&t).map_err(rt)?;
                    copies += 1;
                    if let Some((obj, i)) = outs.remove(&s.name) {
                        // SAFETY: as for inputs; the copy is complete when
                        // `write` returns.
                        let dst = unsafe { self.device.wrap(i.ptr, i.bytes, i.dtype, &i.shape) }.map_err(rt)?;
                        dst.write(&t).map_err(rt)?;
                        dict.set_item(&s.name, obj)?;
                    } else {
                        dict.set_item(&s.name, CudaArray { buffer: buf, ordinal: self.ordinal, program: Some(self.clone()), stream })?;
                    }
                }
            }
        }
        Ok((dict, copies))
    }
}

/// A result of a CUDA call: device memory the package allocated, ready in
/// the order of the stream the call ran on. It exports itself through
/// DLPack (`torch.from_dlpack(r)`, `cupy.from_dlpack(r)`) without a copy;
/// the memory lives until this object and every consumer's tensor are gone.
#[pyclass(module = "eintup._eintup")]
pub struct CudaArray {
    buffer: DeviceBuffer,
    ordinal: usize,
    /// The program whose call produced it (waited for before a consumer on
    /// another stream reads it); None for `_testing_cuda_array`'s.
    program: Option<Arc<CudaProgram>>,
    /// The stream the producing call ran on.
    stream: u64,
}

impl CudaArray {
    fn synchronize(&self, py: Python<'_>) -> PyResult<()> {
        self.program.as_ref().map_or(Ok(()), |p| p.synchronize(py))
    }
}

/// A `CudaArray` over zeroed memory of the PTX emulator that says it is on
/// CUDA device 0: it exists so that the DLPack export (capsules, structs,
/// deleters) and the import of the package's own results are tested on
/// machines without a GPU (python/tests/test_cuda.py). Its address is the
/// emulator's, so only the package itself (which fails without a driver
/// before using it) and tests that read the capsule's fields may take it.
#[pyfunction]
pub fn _testing_cuda_array(dtype: &str, shape: Vec<usize>) -> PyResult<CudaArray> {
    let dtype = match dtype {
        "int32" => DType::I32,
        "float32" => DType::F32,
        "float64" => DType::F64,
        _ => return Err(Error::new_err(format!("dtype `{dtype}`: expected int32, float32 or float64"))),
    };
    let buffer = crate::devices::emulator().alloc(dtype, &shape).map_err(|e| Error::new_err(e.to_string()))?;
    Ok(CudaArray { buffer, ordinal: 0, program: None, stream: 1 })
}

#[pymethods]
impl CudaArray {
    /// A DLPack capsule of the array (the protocol's `__dlpack__`). A
    /// consumer on another stream than the producing call's (`stream`, the
    /// protocol's integers: None or 1 the legacy default stream) gets the
    /// array after the producing work finished (the host waits); `-1`
    /// skips that. `max_version` (1, x) gives a versioned capsule.
    #[pyo3(signature = (*, stream=None, max_version=None, dl_device=None, copy=None))]
    fn __dlpack__<'py>(
        &self,
        py: Python<'py>,
        stream: Option<i64>,
        max_version: Option<(u32, u32)>,
        dl_device: Option<(i32, i32)>,
        copy: Option<bool>,
    ) -> PyResult<Bound<'py, PyAny>> {
        if let Some(d) = dl_device.filter(|&d| d != (KDL_CUDA, self.ordinal as i32)) {
            return Err(PyBufferError::new_err(format!("the array is on CUDA device {}; it exports only there, not to device {d:?}", self.ordinal)));
        }
        if copy == Some(true) {
            return Err(PyBufferError::new_err("the array exports its own memory only (copy=True is not supported)"));
        }
        let consumer = match stream {
            None | Some(0) => 1,
            Some(s) => s,
        };
        if consumer != -1 && u64::try_from(consumer).ok() != Some(self.stream) {
            self.synchronize(py)?;
        }
        dlpack::export(py, &self.buffer, self.ordinal, max_version.is_some_and(|(major, _)| major >= 1))
    }

    /// `(kDLCUDA, device ordinal)`.
    fn __dlpack_device__(&self) -> (i32, i32) {
        (KDL_CUDA, self.ordinal as i32)
    }

    /// The array's shape.
    #[getter]
    fn shape(&self) -> Vec<usize> {
        self.buffer.shape().to_vec()
    }

    /// `int32`, `float32` or `float64`.
    #[getter]
    fn dtype(&self) -> &'static str {
        dtype_name(self.buffer.dtype())
    }

    /// The device address of the first element.
    #[getter]
    fn data_ptr(&self) -> u64 {
        self.buffer.device_ptr()
    }

    /// A copy on the host, as a NumPy array (after the producing work).
    fn numpy<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        self.synchronize(py)?;
        let t: Tensor = self.buffer.read().map_err(|e| Error::new_err(format!("CUDA: {e}")))?;
        let a = zeros(py, t.dtype(), &t.shape)?;
        View::get(&a, "a result", true)?.fill_from(t, "a result")?;
        Ok(a)
    }

    fn __repr__(&self) -> String {
        format!("<eintup.CudaArray {}{:?} on cuda:{}>", dtype_name(self.buffer.dtype()), self.buffer.shape(), self.ordinal)
    }
}
