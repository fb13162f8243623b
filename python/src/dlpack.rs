//! DLPack, both ways: importing the caller's device arrays (PyTorch CUDA
//! tensors, CuPy arrays: anything with `__dlpack__`/`__dlpack_device__`)
//! and exporting the package's own results, with no copy.
//!
//! The structs are those of `dlpack.h` v1.0 (dmlc/dlpack, `DLPACK_MAJOR_VERSION
//! 1`, `DLPACK_MINOR_VERSION 0`), written out rather than taken from a crate:
//! five plain `repr(C)` structs, and the crates that have them bring
//! framework features this package does not want. Both capsule kinds are
//! accepted: `dltensor` (a legacy `DLManagedTensor`, what producers give a
//! consumer that asks for no version) and `dltensor_versioned` (a
//! `DLManagedTensorVersioned`, major version 1, with its read-only flag).
//!
//! Ownership follows the Python specification of the protocol
//! (<https://dmlc.github.io/dlpack/latest/python_spec.html>): a consumer
//! renames the capsule it takes to `used_dltensor` (`used_dltensor_versioned`)
//! so that the producer's capsule destructor leaves it alone, and calls the
//! tensor's deleter exactly once when it no longer needs the memory
//! ([`Imported`]'s drop). Every field is checked before the memory is used.

use std::ffi::{c_void, CStr};

use eintup::tensor::DType;
use eintup_runtime::DeviceBuffer;
use pyo3::exceptions::PyTypeError;
use pyo3::ffi;
use pyo3::prelude::*;
use pyo3::types::{PyDict, PyTuple};

use crate::arrays::dtype_name;
use crate::errors::ShapeError;

/// `DLDeviceType` values this package meets.
pub const KDL_CPU: i32 = 1;
pub const KDL_CUDA: i32 = 2;
const KDL_CUDA_HOST: i32 = 3;
const KDL_CUDA_MANAGED: i32 = 13;

#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct DLDevice {
    pub device_type: i32,
    pub device_id: i32,
}

#[repr(C)]
#[derive(Clone, Copy)]
pub struct DLDataType {
    pub code: u8,
    pub bits: u8,
    pub lanes: u16,
}

#[repr(C)]
pub struct DLTensor {
    pub data: *mut c_void,
    pub device: DLDevice,
    pub ndim: i32,
    pub dtype: DLDataType,
    pub shape: *mut i64,
    /// Null: compact row-major.
    pub strides: *mut i64,
    pub byte_offset: u64,
}

#[repr(C)]
pub struct DLManagedTensor {
    pub dl_tensor: DLTensor,
    pub manager_ctx: *mut c_void,
    pub deleter: Option<unsafe extern "C" fn(*mut DLManagedTensor)>,
}

#[repr(C)]
#[derive(Clone, Copy)]
pub struct DLPackVersion {
    pub major: u32,
    pub minor: u32,
}

#[repr(C)]
pub struct DLManagedTensorVersioned {
    pub version: DLPackVersion,
    pub manager_ctx: *mut c_void,
    pub deleter: Option<unsafe extern "C" fn(*mut DLManagedTensorVersioned)>,
    pub flags: u64,
    pub dl_tensor: DLTensor,
}

const FLAG_READ_ONLY: u64 = 1;
const LEGACY: &CStr = c"dltensor";
const VERSIONED: &CStr = c"dltensor_versioned";
const USED_LEGACY: &CStr = c"used_dltensor";
const USED_VERSIONED: &CStr = c"used_dltensor_versioned";

/// The device `obj` says its memory is on (`__dlpack_device__`), or None
/// for an object without the protocol.
pub fn device_of(obj: &Bound<'_, PyAny>, what: &str) -> PyResult<Option<DLDevice>> {
    if !obj.hasattr("__dlpack_device__")? {
        return Ok(None);
    }
    let d = obj.call_method0("__dlpack_device__").map_err(|e| ShapeError::new_err(format!("{what}: its __dlpack_device__() failed: {e}")))?;
    let (device_type, device_id): (i32, i32) =
        d.extract().map_err(|_| ShapeError::new_err(format!("{what}: __dlpack_device__() returned {d}, not a (device_type, device_id) pair")))?;
    Ok(Some(DLDevice { device_type, device_id }))
}

/// `device`'s name in messages.
pub fn device_name(device: DLDevice) -> String {
    match device.device_type {
        KDL_CPU => "the CPU".into(),
        KDL_CUDA => format!("CUDA device {}", device.device_id),
        KDL_CUDA_HOST => "CUDA pinned host memory".into(),
        KDL_CUDA_MANAGED => "CUDA managed memory".into(),
        t => format!("DLPack device type {t}"),
    }
}

/// Who frees an imported tensor: its producer's deleter, called once.
enum Owner {
    Legacy(*mut DLManagedTensor),
    Versioned(*mut DLManagedTensorVersioned),
}

// SAFETY: the pointer is only passed to the producer's deleter, once,
// when the owner drops; the package drops its imported arrays with the
// GIL held (in a call, in `synchronize`, or when the kernel or array
// holding them is collected), on whichever thread that is, as a producer
// whose deleter needs the interpreter expects (DLPack lets a consumer
// release a tensor from any thread).
unsafe impl Send for Owner {}

impl Drop for Owner {
    fn drop(&mut self) {
        // SAFETY: the pointer came out of a capsule this package consumed
        // (renamed), so nobody else calls its deleter; it is called once.
        unsafe {
            match *self {
                Owner::Legacy(m) => {
                    if let Some(d) = (*m).deleter {
                        d(m)
                    }
                }
                Owner::Versioned(m) => {
                    if let Some(d) = (*m).deleter {
                        d(m)
                    }
                }
            }
        }
    }
}

/// A device array taken from its producer through DLPack: checked
/// (dtype, layout, device), alive until dropped.
pub struct Imported {
    _owner: Owner,
    pub device: DLDevice,
    pub dtype: DType,
    pub shape: Vec<usize>,
    /// The first element's address (`data + byte_offset`).
    pub ptr: u64,
    pub bytes: usize,
    pub read_only: bool,
}

/// The `stream` argument of `__dlpack__` for a consumer running on CUDA
/// stream `stream` (the protocol's integers: 1 the legacy default stream,
/// 2 the per-thread one, else a `cudaStream_t`).
fn dlpack_kwargs<'py>(py: Python<'py>, stream: Option<u64>, versioned: bool) -> PyResult<Bound<'py, PyDict>> {
    let kw = PyDict::new(py);
    if let Some(s) = stream {
        kw.set_item("stream", s)?;
    }
    if versioned {
        kw.set_item("max_version", PyTuple::new(py, [1u32, 0])?)?;
    }
    Ok(kw)
}

/// Takes `obj`'s memory through `obj.__dlpack__(stream=stream)`: the
/// capsule is consumed (renamed) and its fields checked. `expected`: the
/// device `__dlpack_device__` reported, which the tensor must be on.
/// `what` names the array in messages.
pub fn import(obj: &Bound<'_, PyAny>, expected: DLDevice, stream: Option<u64>, what: &str) -> PyResult<Imported> {
    let py = obj.py();
    // Ask for a versioned capsule; a producer older than DLPack 1.0 has no
    // `max_version` keyword and gets the call without it.
    let capsule = match obj.call_method("__dlpack__", (), Some(&dlpack_kwargs(py, stream, true)?)) {
        Ok(c) => c,
        Err(e) if e.is_instance_of::<PyTypeError>(py) => obj
            .call_method("__dlpack__", (), Some(&dlpack_kwargs(py, stream, false)?))
            .map_err(|e| ShapeError::new_err(format!("{what}: its __dlpack__() failed: {e}")))?,
        Err(e) => return Err(ShapeError::new_err(format!("{what}: its __dlpack__() failed: {e}"))),
    };
    let cap = capsule.as_ptr();
    // SAFETY: PyCapsule_IsValid takes any object and sets no exception.
    let (versioned, legacy) = unsafe { (ffi::PyCapsule_IsValid(cap, VERSIONED.as_ptr()) == 1, ffi::PyCapsule_IsValid(cap, LEGACY.as_ptr()) == 1) };
    if !versioned && !legacy {
        return Err(ShapeError::new_err(format!(
            "{what}: __dlpack__() returned {}, not an unused DLPack capsule (`dltensor` or `dltensor_versioned`)",
            capsule.repr().map(|r| r.to_string()).unwrap_or_default()
        )));
    }
    let (name, used) = if versioned { (VERSIONED, USED_VERSIONED) } else { (LEGACY, USED_LEGACY) };
    // SAFETY: a valid capsule of this name (checked above).
    let raw = unsafe { ffi::PyCapsule_GetPointer(cap, name.as_ptr()) };
    if raw.is_null() {
        return Err(PyErr::take(py).unwrap_or_else(|| ShapeError::new_err(format!("{what}: its DLPack capsule holds a null pointer"))));
    }
    // From here the package owns the tensor: renamed, the producer's
    // capsule destructor no longer frees it, and `Owner` calls its deleter.
    // SAFETY: a valid capsule; the name is a static string.
    if unsafe { ffi::PyCapsule_SetName(cap, used.as_ptr()) } != 0 {
        return Err(PyErr::fetch(py));
    }
    // SAFETY: a capsule of this name holds this struct (the protocol).
    let (owner, t, read_only) = unsafe {
        if versioned {
            let m = raw as *mut DLManagedTensorVersioned;
            let v = (*m).version;
            if v.major != 1 {
                // Its deleter may not be where this struct says: leaked
                // rather than called.
                return Err(ShapeError::new_err(format!("{what}: its DLPack capsule has version {}.{}; this package reads major version 1", v.major, v.minor)));
            }
            (Owner::Versioned(m), &(*m).dl_tensor as *const DLTensor, (*m).flags & FLAG_READ_ONLY != 0)
        } else {
            let m = raw as *mut DLManagedTensor;
            (Owner::Legacy(m), &(*m).dl_tensor as *const DLTensor, false)
        }
    };
    // SAFETY: the struct the producer filled, alive until `owner` drops.
    let t = unsafe { &*t };
    let (dtype, shape, ptr, bytes) = check(t, expected, what)?;
    Ok(Imported { _owner: owner, device: t.device, dtype, shape, ptr, bytes, read_only })
}

/// The dtype named in messages: NumPy's name for a DLPack type.
fn dl_type_name(d: DLDataType) -> String {
    let base = match d.code {
        0 => format!("int{}", d.bits),
        1 => format!("uint{}", d.bits),
        2 => format!("float{}", d.bits),
        4 => format!("bfloat{}", d.bits),
        5 => format!("complex{}", d.bits),
        6 => "bool".into(),
        c => format!("DLPack type code {c} of {} bits", d.bits),
    };
    if d.lanes == 1 {
        base
    } else {
        format!("{base}x{}", d.lanes)
    }
}

/// The tensor's dtype, shape, first address and size, after checking that
/// it is on `expected`, of a supported dtype, C-contiguous and aligned.
fn check(t: &DLTensor, expected: DLDevice, what: &str) -> PyResult<(DType, Vec<usize>, u64, usize)> {
    if t.device != expected {
        return Err(ShapeError::new_err(format!(
            "{what}: __dlpack_device__() says {}, but its DLPack tensor is on {}",
            device_name(expected),
            device_name(t.device)
        )));
    }
    let dtype = match (t.dtype.code, t.dtype.bits, t.dtype.lanes) {
        (0, 32, 1) => DType::I32,
        (2, 32, 1) => DType::F32,
        (2, 64, 1) => DType::F64,
        _ => return Err(crate::arrays::unsupported_dtype(what, &dl_type_name(t.dtype))),
    };
    // 32 dims is more than any framework allows; a larger count is garbage.
    if !(0..=32).contains(&t.ndim) || (t.ndim > 0 && t.shape.is_null()) {
        return Err(ShapeError::new_err(format!("{what}: its DLPack tensor has {} dims and {} shape", t.ndim, if t.shape.is_null() { "no" } else { "a" })));
    }
    let n = t.ndim as usize;
    // SAFETY: `shape` (non-null when ndim > 0, checked) has ndim entries,
    // as does `strides` when non-null (the protocol).
    let dims = if n == 0 { &[][..] } else { unsafe { std::slice::from_raw_parts(t.shape, n) } };
    let strides = if t.strides.is_null() || n == 0 { None } else { Some(unsafe { std::slice::from_raw_parts(t.strides, n) }) };
    if let Some(d) = dims.iter().find(|&&d| d < 0) {
        return Err(ShapeError::new_err(format!("{what}: its DLPack shape {dims:?} has a negative dim {d}")));
    }
    let shape: Vec<usize> = dims.iter().map(|&d| d as usize).collect();
    let elements = shape.iter().try_fold(1usize, |a, &d| a.checked_mul(d));
    let bytes = elements.and_then(|e| e.checked_mul(dtype.size())).filter(|&b| b <= isize::MAX as usize);
    let Some(bytes) = bytes else {
        return Err(ShapeError::new_err(format!("{what}: its shape {shape:?} has more bytes than this machine addresses")));
    };
    // Row-major compact: each dim's stride (in elements) is the product of
    // the later dims. A dim of one element may have any stride (it is never
    // stepped), and an empty array has no layout at all.
    if let (Some(strides), true) = (strides, bytes > 0) {
        let mut want: i64 = 1;
        for (i, (&d, &s)) in dims.iter().zip(strides).enumerate().rev() {
            if d != 1 && s != want {
                return Err(ShapeError::new_err(format!(
                    "{what}: not C-contiguous (shape {dims:?}, strides {strides:?} in elements; dim {i} would need stride {want}): make it contiguous first (e.g. `.contiguous()`)"
                )));
            }
            want = want.saturating_mul(d);
        }
    }
    let ptr = (t.data as u64).checked_add(t.byte_offset);
    let Some(ptr) = ptr.filter(|&p| bytes == 0 || p != 0) else {
        return Err(ShapeError::new_err(format!("{what}: its DLPack data pointer {:#x} plus byte offset {} is not an address", t.data as u64, t.byte_offset)));
    };
    if bytes > 0 && !ptr.is_multiple_of(dtype.size() as u64) {
        return Err(ShapeError::new_err(format!("{what}: its data at {ptr:#x} is not aligned to its {}-byte {} elements", dtype.size(), dtype_name(dtype))));
    }
    Ok((dtype, shape, ptr, bytes))
}

// ---- Export ----------------------------------------------------------------

/// What an exported capsule owns: the tensor struct the consumer reads
/// (first, so that its address is the allocation's), its shape, and a
/// handle that keeps the device memory alive until the consumer's deleter.
#[repr(C)]
struct Export<M> {
    managed: M,
    shape: Vec<i64>,
    _buffer: DeviceBuffer,
}

fn dl_dtype(d: DType) -> DLDataType {
    match d {
        DType::I32 => DLDataType { code: 0, bits: 32, lanes: 1 },
        DType::F32 => DLDataType { code: 2, bits: 32, lanes: 1 },
        DType::F64 => DLDataType { code: 2, bits: 64, lanes: 1 },
    }
}

unsafe extern "C" fn delete_legacy(m: *mut DLManagedTensor) {
    // SAFETY: `m` is the `managed` field at the start of a leaked
    // `Box<Export<DLManagedTensor>>` (`export`), freed once (the protocol).
    drop(unsafe { Box::from_raw(m as *mut Export<DLManagedTensor>) });
}

unsafe extern "C" fn delete_versioned(m: *mut DLManagedTensorVersioned) {
    // SAFETY: as in `delete_legacy`.
    drop(unsafe { Box::from_raw(m as *mut Export<DLManagedTensorVersioned>) });
}

/// The capsule destructor: a capsule nobody consumed frees its tensor.
unsafe extern "C" fn capsule_destructor(cap: *mut ffi::PyObject) {
    // SAFETY: called by Python on a capsule `export` made; its name tells
    // which struct it holds, and a consumed one is renamed and skipped.
    unsafe {
        if ffi::PyCapsule_IsValid(cap, LEGACY.as_ptr()) == 1 {
            let m = ffi::PyCapsule_GetPointer(cap, LEGACY.as_ptr()) as *mut DLManagedTensor;
            if let Some(d) = (*m).deleter {
                d(m)
            }
        } else if ffi::PyCapsule_IsValid(cap, VERSIONED.as_ptr()) == 1 {
            let m = ffi::PyCapsule_GetPointer(cap, VERSIONED.as_ptr()) as *mut DLManagedTensorVersioned;
            if let Some(d) = (*m).deleter {
                d(m)
            }
        }
    }
}

/// A DLPack capsule of `buffer` on CUDA device `ordinal` (versioned when
/// the consumer asked for major version 1 or later): the consumer reads
/// the device memory in place; the capsule's tensor holds a handle to the
/// buffer until the consumer's deleter (or the unconsumed capsule's
/// destructor) frees it.
pub fn export<'py>(py: Python<'py>, buffer: &DeviceBuffer, ordinal: usize, versioned: bool) -> PyResult<Bound<'py, PyAny>> {
    let mut shape: Vec<i64> = buffer.shape().iter().map(|&d| d as i64).collect();
    let tensor = DLTensor {
        data: buffer.device_ptr() as *mut c_void,
        device: DLDevice { device_type: KDL_CUDA, device_id: ordinal as i32 },
        ndim: shape.len() as i32,
        dtype: dl_dtype(buffer.dtype()),
        shape: shape.as_mut_ptr(),
        strides: std::ptr::null_mut(),
        byte_offset: 0,
    };
    // The Vec's heap block does not move with the Vec, so `shape` stays valid.
    let (ptr, name): (*mut c_void, &CStr) = if versioned {
        let e = Box::new(Export {
            managed: DLManagedTensorVersioned {
                version: DLPackVersion { major: 1, minor: 0 },
                manager_ctx: std::ptr::null_mut(),
                deleter: Some(delete_versioned),
                flags: 0,
                dl_tensor: tensor,
            },
            shape,
            _buffer: buffer.clone(),
        });
        let p = Box::into_raw(e);
        // SAFETY: `p` is the live allocation just leaked.
        unsafe { (*p).managed.manager_ctx = p as *mut c_void };
        (p as *mut c_void, VERSIONED)
    } else {
        let e = Box::new(Export {
            managed: DLManagedTensor { dl_tensor: tensor, manager_ctx: std::ptr::null_mut(), deleter: Some(delete_legacy) },
            shape,
            _buffer: buffer.clone(),
        });
        let p = Box::into_raw(e);
        // SAFETY: as above.
        unsafe { (*p).managed.manager_ctx = p as *mut c_void };
        (p as *mut c_void, LEGACY)
    };
    // SAFETY: a non-null pointer, a static name, a destructor that reads
    // the capsule's name before its pointer.
    let cap = unsafe { ffi::PyCapsule_New(ptr, name.as_ptr(), Some(capsule_destructor)) };
    if cap.is_null() {
        // SAFETY: the capsule was not made, so the tensor is still ours.
        unsafe {
            if versioned {
                delete_versioned(ptr as *mut DLManagedTensorVersioned)
            } else {
                delete_legacy(ptr as *mut DLManagedTensor)
            }
        }
        return Err(PyErr::fetch(py));
    }
    // SAFETY: a new reference, just checked non-null.
    Ok(unsafe { Bound::from_owned_ptr(py, cap) })
}
