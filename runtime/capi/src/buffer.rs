//! Device buffers the caller owns: allocate, write, read, wrap a raw
//! device pointer (interop), free.

use std::ffi::c_void;

use eintup_runtime::{DeviceBuffer, Error};

use crate::device::EtDevice;
use crate::status::{bytes_mut, entry, give, handle, host_tensor, out_ptr, parse_dtype, parse_shape, take, EtStatus};

/// Device memory with a dtype and shape. Reference-counted: a program it
/// is bound to keeps it alive after `et_buffer_free`.
pub struct EtBuffer {
    pub(crate) buffer: DeviceBuffer,
}

/// A zeroed buffer of `dtype` (`ET_DTYPE_*`) and `ndim` dims at `shape`.
///
/// # Safety
/// `device` is null or a live handle; `shape` is null or valid for `ndim`
/// values; `out` is null or valid for one pointer write.
#[no_mangle]
pub unsafe extern "C" fn et_buffer_alloc(device: *const EtDevice, dtype: i32, ndim: usize, shape: *const i64, out: *mut *mut EtBuffer) -> EtStatus {
    entry("et_buffer_alloc", || {
        let out = out_ptr(out, "out")?;
        // SAFETY: the caller's contract.
        let (d, dims) = unsafe { (handle(device, "device")?, parse_shape(ndim, shape)?) };
        let buffer = d.device.alloc(parse_dtype(dtype)?, &dims)?;
        // SAFETY: checked by out_ptr.
        unsafe { give(out, EtBuffer { buffer }) };
        Ok(())
    })
}

/// Device memory someone else owns at `ptr` (`bytes` bytes holding `dtype`
/// elements of `shape`; `bytes` must be their size), as a buffer the
/// runtime never frees. The emulator checks that it lies in one of its
/// buffers; a GPU cannot.
///
/// # Safety
/// As `et_buffer_alloc`; on a GPU `ptr` is memory of the device's context
/// of at least `bytes` bytes, alive while any handle to the buffer (the
/// caller's, a program's) may use it.
#[no_mangle]
pub unsafe extern "C" fn et_buffer_wrap(
    device: *const EtDevice,
    ptr: u64,
    bytes: usize,
    dtype: i32,
    ndim: usize,
    shape: *const i64,
    out: *mut *mut EtBuffer,
) -> EtStatus {
    entry("et_buffer_wrap", || {
        let out = out_ptr(out, "out")?;
        // SAFETY: the caller's contract.
        let (d, dims) = unsafe { (handle(device, "device")?, parse_shape(ndim, shape)?) };
        // SAFETY: the caller's contract.
        let buffer = unsafe { d.device.wrap(ptr, bytes, parse_dtype(dtype)?, &dims) }?;
        // SAFETY: checked by out_ptr.
        unsafe { give(out, EtBuffer { buffer }) };
        Ok(())
    })
}

/// Frees the caller's handle (null: nothing); the memory goes when no
/// program holds it either.
///
/// # Safety
/// `buffer` is null or a handle from `et_buffer_alloc`/`et_buffer_wrap`,
/// not freed before.
#[no_mangle]
pub unsafe extern "C" fn et_buffer_free(buffer: *mut EtBuffer) -> EtStatus {
    // SAFETY: the caller's contract.
    entry("et_buffer_free", || unsafe { take(buffer) })
}

/// Copies host data into the buffer: its dtype and shape, `bytes` bytes at
/// `data` (checked as `et_program_write` checks).
///
/// # Safety
/// `buffer` is null or a live handle; `shape` is null or valid for `ndim`
/// values; `data` is null or valid for `bytes` bytes.
#[no_mangle]
pub unsafe extern "C" fn et_buffer_write(buffer: *const EtBuffer, dtype: i32, ndim: usize, shape: *const i64, data: *const c_void, bytes: usize) -> EtStatus {
    entry("et_buffer_write", || {
        // SAFETY: the caller's contract.
        let b = unsafe { handle(buffer, "buffer") }?;
        // SAFETY: the caller's contract.
        let t = unsafe { host_tensor(dtype, ndim, shape, data, bytes) }?;
        b.buffer.write(&t)
    })
}

/// Copies the buffer into `out`, which must have exactly its byte size.
///
/// # Safety
/// `buffer` is null or a live handle; `out` is null or valid for writing
/// `bytes` bytes.
#[no_mangle]
pub unsafe extern "C" fn et_buffer_read(buffer: *const EtBuffer, out: *mut c_void, bytes: usize) -> EtStatus {
    entry("et_buffer_read", || {
        // SAFETY: the caller's contract.
        let b = unsafe { handle(buffer, "buffer") }?;
        if bytes != b.buffer.byte_size() {
            return Err(Error::InvalidArgument(format!("reading a buffer of {} bytes into {bytes} bytes", b.buffer.byte_size())));
        }
        // SAFETY: the caller's contract.
        let out = unsafe { bytes_mut(out.cast(), bytes, "out") }?;
        out.copy_from_slice(b.buffer.read()?.data.as_ne_bytes());
        Ok(())
    })
}

/// The buffer's device address (null for an empty buffer), for interop.
///
/// # Safety
/// `buffer` is null or a live handle; `out` is null or valid for a write.
#[no_mangle]
pub unsafe extern "C" fn et_buffer_device_ptr(buffer: *const EtBuffer, out: *mut u64) -> EtStatus {
    entry("et_buffer_device_ptr", || {
        let out = out_ptr(out, "out")?;
        // SAFETY: the caller's contract.
        let b = unsafe { handle(buffer, "buffer") }?;
        // SAFETY: checked by out_ptr.
        unsafe { out.write(b.buffer.device_ptr()) };
        Ok(())
    })
}
