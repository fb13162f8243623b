//! Loaded programs: write inputs, run, read outputs, query the bundle's
//! buffers (so that C can size its arrays), bind device buffers, streams.

use std::ffi::{c_char, c_void, CString};
use std::sync::Arc;

use eintup_runtime::manifest::Role;
use eintup_runtime::{Device, Error, Program, Result};

use crate::buffer::EtBuffer;
use crate::device::{EtBundle, EtDevice};
use crate::status::{
    array, bytes_mut, dtype_code, entry, give, handle, handle_mut, host_tensor, out_ptr, take, text, EtStatus, ET_ROLE_INPUT, ET_ROLE_OUTPUT, ET_ROLE_TEMP,
};

/// A bundle loaded on a device, run many times. Used by one thread at a
/// time.
pub struct EtProgram {
    // Field order is drop order: the program before the device it borrows.
    program: Program<'static>,
    /// The bundle as loaded: a dynamic one is bound again from it at each
    /// `et_program_reshape`.
    source: eintup_runtime::Bundle,
    /// The buffers' names as C strings, in manifest order.
    names: Vec<CString>,
    _device: Arc<Device>,
}

/// Loads `bundle` on `device` once (module loaded, kernels resolved,
/// buffers allocated) to run many times. The program keeps the device
/// alive; the bundle may be freed at once.
///
/// # Safety
/// `device` and `bundle` are null or live handles; `out` is null or valid
/// for one pointer write.
#[no_mangle]
pub unsafe extern "C" fn et_program_load(device: *const EtDevice, bundle: *const EtBundle, out: *mut *mut EtProgram) -> EtStatus {
    entry("et_program_load", || {
        let out = out_ptr(out, "out")?;
        // SAFETY: the caller's contract.
        let (d, b) = unsafe { (handle(device, "device")?, handle(bundle, "bundle")?) };
        let keep = d.device.clone();
        // SAFETY: the device lives in the Arc's allocation, which neither
        // moves nor is freed while `_device` holds it, and the program is
        // dropped before `_device` (field order): the borrow never dangles.
        let dev: &'static Device = unsafe { &*Arc::as_ptr(&keep) };
        let program = dev.load(&b.bundle)?;
        let names = program.manifest().buffers.iter().map(|b| CString::new(b.name.as_str()).unwrap_or_default()).collect();
        // SAFETY: checked by out_ptr.
        unsafe { give(out, EtProgram { program, source: b.bundle.clone(), names, _device: keep }) };
        Ok(())
    })
}

/// Frees a program (null: nothing), after the work it enqueued finished.
///
/// # Safety
/// `program` is null or a handle from `et_program_load`, not freed before.
#[no_mangle]
pub unsafe extern "C" fn et_program_free(program: *mut EtProgram) -> EtStatus {
    // SAFETY: the caller's contract.
    entry("et_program_free", || unsafe { take(program) })
}

/// The number of buffers of the program's bundle (inputs, outputs,
/// temporaries), numbered from 0 in manifest order.
///
/// # Safety
/// `program` is null or a live handle; `out` is null or valid for a write.
#[no_mangle]
pub unsafe extern "C" fn et_program_buffer_count(program: *const EtProgram, out: *mut usize) -> EtStatus {
    entry("et_program_buffer_count", || {
        let out = out_ptr(out, "out")?;
        // SAFETY: the caller's contract.
        let p = unsafe { handle(program, "program") }?;
        // SAFETY: checked by out_ptr.
        unsafe { out.write(p.names.len()) };
        Ok(())
    })
}

/// The name of buffer `index`, valid while the program lives.
///
/// # Safety
/// `program` is null or a live handle; `out` is null or valid for a write.
#[no_mangle]
pub unsafe extern "C" fn et_program_buffer_name(program: *const EtProgram, index: usize, out: *mut *const c_char) -> EtStatus {
    entry("et_program_buffer_name", || {
        let out = out_ptr(out, "out")?;
        // SAFETY: the caller's contract.
        let p = unsafe { handle(program, "program") }?;
        let name = p.names.get(index).ok_or_else(|| Error::InvalidArgument(format!("buffer index {index}: the bundle has {} buffers", p.names.len())))?;
        // SAFETY: checked by out_ptr.
        unsafe { out.write(name.as_ptr()) };
        Ok(())
    })
}

/// What buffer `name` holds, so that C can size its arrays: its role
/// (`ET_ROLE_*`), dtype (`ET_DTYPE_*`), rank, dims (written to `shape` when
/// it is not null; `shape_capacity` must be at least the rank) and byte
/// size. Any out-pointer may be null to skip it.
///
/// # Safety
/// `program` is null or a live handle; `name` is null or a NUL-terminated
/// string; each out-pointer is null or valid for its writes (`shape`:
/// `shape_capacity` values).
#[no_mangle]
pub unsafe extern "C" fn et_program_buffer_info(
    program: *const EtProgram,
    name: *const c_char,
    role: *mut i32,
    dtype: *mut i32,
    ndim: *mut usize,
    shape: *mut i64,
    shape_capacity: usize,
    bytes: *mut usize,
) -> EtStatus {
    entry("et_program_buffer_info", || {
        // SAFETY: the caller's contract.
        let (p, name) = unsafe { (handle(program, "program")?, text(name, "name")?) };
        let m = p.program.manifest();
        let b = &m.buffers[m.buffer_index(name).ok_or_else(|| Error::InvalidArgument(format!("the bundle has no buffer `{name}`")))?];
        if !shape.is_null() && shape_capacity < b.shape.len() {
            return Err(Error::InvalidArgument(format!("buffer `{name}` has {} dims; `shape` holds {shape_capacity}", b.shape.len())));
        }
        let size = b.byte_size().ok_or_else(|| Error::BadManifest(format!("buffer `{name}` has more bytes than this machine addresses")))?;
        let role_code = match b.role {
            Role::Input => ET_ROLE_INPUT,
            Role::Output => ET_ROLE_OUTPUT,
            Role::Temp => ET_ROLE_TEMP,
        };
        // SAFETY (every write): null is skipped, the rest the caller's contract.
        unsafe {
            if let Some(r) = role.as_mut() {
                *r = role_code;
            }
            if let Some(d) = dtype.as_mut() {
                *d = dtype_code(b.dtype);
            }
            if let Some(n) = ndim.as_mut() {
                *n = b.shape.len();
            }
            if !shape.is_null() {
                for (k, &d) in b.shape.iter().enumerate() {
                    // A dim that fits in memory fits in i64.
                    shape.add(k).write(i64::try_from(d).unwrap_or(i64::MAX));
                }
            }
            if let Some(s) = bytes.as_mut() {
                *s = size;
            }
        }
        Ok(())
    })
}

/// Copies host data into input `name`: `ndim` dims at `shape` and `bytes`
/// bytes at `data` of `dtype` (`ET_DTYPE_*`), row-major, native byte
/// order. They must be the buffer's dtype and shape (`ET_ERROR_INPUT`
/// naming the buffer, what was expected and what came otherwise). The
/// shape comes with every write so that bundles whose dims come from their
/// inputs need no other call.
///
/// # Safety
/// `program` is null or a live handle; `name` is null or a NUL-terminated
/// string; `shape` is null or valid for `ndim` values; `data` is null or
/// valid for `bytes` bytes.
#[no_mangle]
pub unsafe extern "C" fn et_program_write(
    program: *mut EtProgram,
    name: *const c_char,
    dtype: i32,
    ndim: usize,
    shape: *const i64,
    data: *const c_void,
    bytes: usize,
) -> EtStatus {
    entry("et_program_write", || {
        // SAFETY: the caller's contract.
        let (p, name) = unsafe { (handle_mut(program, "program")?, text(name, "name")?) };
        // SAFETY: the caller's contract.
        let t = unsafe { host_tensor(dtype, ndim, shape, data, bytes) }?;
        p.program.write(name, &t)
    })
}

/// Re-binds a program loaded from a dynamic bundle (`eintup build
/// --dynamic`) to the dims its inputs' shapes give: `count` inputs, input
/// `names[i]` with `ndims[i]` extents at `shapes[i]`. The module stays
/// loaded (no second driver JIT); buffers whose size changed are allocated
/// anew, inputs whose shape changed must be written again, and a device
/// buffer bound where the shape changed is unbound (`Program::rebind`,
/// docs/runtime.md). `et_program_buffer_info` then reports the new shapes.
/// Shapes that contradict each other or the bundle, and a static bundle's
/// program, are `ET_ERROR_INPUT`, the message naming the input and the dim.
///
/// # Safety
/// `program` is null or a live handle; `names`, `ndims` and `shapes` are
/// null or valid for `count` values; each `names[i]` is a NUL-terminated
/// string and each `shapes[i]` valid for `ndims[i]` values.
#[no_mangle]
pub unsafe extern "C" fn et_program_reshape(
    program: *mut EtProgram,
    count: usize,
    names: *const *const c_char,
    ndims: *const usize,
    shapes: *const *const i64,
) -> EtStatus {
    entry("et_program_reshape", || {
        // SAFETY: the caller's contract.
        let p = unsafe { handle_mut(program, "program") }?;
        if p.source.manifest().dynamic.is_none() {
            return Err(Error::InvalidArgument(
                "reshaping a program: its bundle is static (its shapes are fixed); build it with `eintup build --dynamic`".into(),
            ));
        }
        // SAFETY (each): the caller's contract.
        let (names, ndims, shapes) = unsafe { (array(names, count, "names")?, array(ndims, count, "ndims")?, array(shapes, count, "shapes")?) };
        let mut given = std::collections::BTreeMap::new();
        for ((&name, &n), &shape) in names.iter().zip(ndims).zip(shapes) {
            // SAFETY: the caller's contract.
            let name = unsafe { text(name, "names[i]") }?;
            // SAFETY: the caller's contract.
            let dims = unsafe { array(shape, n, "shapes[i]") }?;
            let dims = dims
                .iter()
                .map(|&d| usize::try_from(d).map_err(|_| Error::Input { name: name.to_string(), reason: format!("shape {dims:?} has a negative extent") }))
                .collect::<Result<Vec<usize>>>()?;
            given.insert(name.to_string(), dims);
        }
        let (bound, _) = p.source.bind_given(&given, &std::collections::BTreeMap::new())?;
        p.program.rebind(&bound)
    })
}

/// Runs the bundle once: inputs never written are generated on the device
/// where the bundle can, zero-initialised buffers are zeroed again, the
/// kernels are enqueued. On a GPU it returns before they finish (see
/// `et_program_synchronize`).
///
/// # Safety
/// `program` is null or a live handle.
#[no_mangle]
pub unsafe extern "C" fn et_program_run(program: *mut EtProgram) -> EtStatus {
    // SAFETY: the caller's contract.
    entry("et_program_run", || unsafe { handle_mut(program, "program") }?.program.run())
}

/// Waits for the work the program enqueued (a GPU's kernel faults surface
/// here).
///
/// # Safety
/// `program` is null or a live handle.
#[no_mangle]
pub unsafe extern "C" fn et_program_synchronize(program: *mut EtProgram) -> EtStatus {
    // SAFETY: the caller's contract.
    entry("et_program_synchronize", || unsafe { handle_mut(program, "program") }?.program.synchronize())
}

/// Copies buffer `name` (any role) into `out`, which must have exactly its
/// byte size (`et_program_buffer_info`), after the work enqueued so far.
///
/// # Safety
/// `program` is null or a live handle; `name` is null or a NUL-terminated
/// string; `out` is null or valid for writing `bytes` bytes.
#[no_mangle]
pub unsafe extern "C" fn et_program_read(program: *mut EtProgram, name: *const c_char, out: *mut c_void, bytes: usize) -> EtStatus {
    entry("et_program_read", || {
        // SAFETY: the caller's contract.
        let (p, name) = unsafe { (handle_mut(program, "program")?, text(name, "name")?) };
        let m = p.program.manifest();
        let b = &m.buffers[m.buffer_index(name).ok_or_else(|| Error::InvalidArgument(format!("the bundle has no buffer `{name}`")))?];
        let want = b.byte_size().unwrap_or(usize::MAX);
        if bytes != want {
            return Err(Error::InvalidArgument(format!("reading buffer `{name}` ({} of shape {:?}, {want} bytes) into {bytes} bytes", b.dtype, b.shape)));
        }
        // SAFETY: the caller's contract.
        let out = unsafe { bytes_mut(out.cast(), bytes, "out") }?;
        out.copy_from_slice(p.program.read(name)?.data.as_ne_bytes());
        Ok(())
    })
}

/// Binds the caller's device buffer to input or output `name`: runs read
/// or write it in place, with no copy (`ET_ERROR_INPUT` for another dtype
/// or shape, another device's buffer, a temporary). The program holds its
/// own reference to the buffer: the caller may free its handle at once.
///
/// # Safety
/// `program` and `buffer` are null or live handles; `name` is null or a
/// NUL-terminated string.
#[no_mangle]
pub unsafe extern "C" fn et_program_bind(program: *mut EtProgram, name: *const c_char, buffer: *const EtBuffer) -> EtStatus {
    entry("et_program_bind", || {
        // SAFETY: the caller's contract.
        let (p, name, b) = unsafe { (handle_mut(program, "program")?, text(name, "name")?, handle(buffer, "buffer")?) };
        p.program.bind(name, &b.buffer)
    })
}

/// Gives `name` the program's own buffer back.
///
/// # Safety
/// `program` is null or a live handle; `name` is null or a NUL-terminated
/// string.
#[no_mangle]
pub unsafe extern "C" fn et_program_unbind(program: *mut EtProgram, name: *const c_char) -> EtStatus {
    entry("et_program_unbind", || {
        // SAFETY: the caller's contract.
        let (p, name) = unsafe { (handle_mut(program, "program")?, text(name, "name")?) };
        p.program.unbind(name)
    })
}

/// Enqueues the program's later work on the caller's CUDA stream (a
/// `CUstream`; null: the device's own). The emulator accepts any value and
/// runs work at once.
///
/// # Safety
/// `program` is null or a live handle; on a GPU `stream` is null or a live
/// stream of the device's context, alive while work is enqueued on it.
#[no_mangle]
pub unsafe extern "C" fn et_program_use_stream(program: *mut EtProgram, stream: *mut c_void) -> EtStatus {
    entry("et_program_use_stream", || {
        // SAFETY: the caller's contract.
        let p = unsafe { handle_mut(program, "program") }?;
        // SAFETY: the caller's contract.
        unsafe { p.program.use_stream(stream) }
    })
}
