//! Status codes, the thread's last error message, and the guard every
//! entry point runs its body under: no panic and no Rust error crosses the
//! boundary, and every pointer the caller passes is checked before use.

use std::cell::RefCell;
use std::ffi::{c_char, c_void, CStr, CString};
use std::panic::{catch_unwind, AssertUnwindSafe};

use eintup_runtime::{DType, Data, Error, Result, Tensor};

/// What every `et_` function returns: `ET_OK`, or the class of the
/// failure, with its message in `et_last_error()`. The classes are the
/// runtime's exit codes (`Error::exit_code`), so a C tool can exit with
/// the status as `etrun` does.
pub type EtStatus = i32;

/// Success.
pub const ET_OK: EtStatus = 0;
/// A defect of the bundle or of the caller's arguments: a bad bundle, an
/// unknown buffer, a wrong dtype, shape or size, a null pointer, a kernel
/// that faulted on the emulator.
pub const ET_ERROR_INPUT: EtStatus = 2;
/// No CUDA driver, or no device of that ordinal.
pub const ET_ERROR_NO_DRIVER: EtStatus = 3;
/// The CUDA driver failed; also a panic inside the runtime (a bug:
/// sysexits' `EX_SOFTWARE`), caught at the boundary.
pub const ET_ERROR_DRIVER: EtStatus = 70;

/// Element type codes (`int32_t dtype` arguments).
pub const ET_DTYPE_I32: i32 = 0;
pub const ET_DTYPE_F32: i32 = 1;
pub const ET_DTYPE_F64: i32 = 2;

/// Buffer role codes (`et_program_buffer_info`).
pub const ET_ROLE_INPUT: i32 = 0;
pub const ET_ROLE_OUTPUT: i32 = 1;
pub const ET_ROLE_TEMP: i32 = 2;

thread_local! {
    /// The message of this thread's last failed call (empty before any).
    static LAST_ERROR: RefCell<CString> = RefCell::new(CString::default());
}

fn set_last_error(message: String) {
    // A message never holds a NUL; were one there, it is cut there.
    let message = CString::new(message).unwrap_or_else(|e| {
        let end = e.nul_position();
        CString::new(&e.into_vec()[..end]).unwrap_or_default()
    });
    LAST_ERROR.with(|m| *m.borrow_mut() = message);
}

/// The message of the calling thread's last failed `et_` call (one line,
/// as `etrun` prints it after `error: `; empty before any failure).
/// Calls that succeed leave it as it is, as `errno`: read it right after a
/// call returned a status other than `ET_OK`. The string belongs to the
/// library and stays valid until this thread's next failed call.
#[no_mangle]
pub extern "C" fn et_last_error() -> *const c_char {
    LAST_ERROR.with(|m| m.borrow().as_ptr())
}

/// Runs one entry point's body: its error becomes a status and the
/// thread's message, a panic becomes [`ET_ERROR_DRIVER`] (nothing unwinds
/// into C).
pub(crate) fn entry(function: &str, body: impl FnOnce() -> Result<()>) -> EtStatus {
    match catch_unwind(AssertUnwindSafe(body)) {
        // Success leaves the message alone, as errno: it describes the last
        // failure, so that a cleanup call between the failure and the
        // report (a free) does not erase it.
        Ok(Ok(())) => ET_OK,
        Ok(Err(e)) => {
            set_last_error(e.to_string());
            EtStatus::from(e.exit_code())
        }
        Err(payload) => {
            let detail = payload
                .downcast_ref::<String>()
                .cloned()
                .or_else(|| payload.downcast_ref::<&str>().map(|s| s.to_string()))
                .unwrap_or_else(|| "unknown panic".into());
            set_last_error(format!("{function}: internal error (the runtime panicked: {detail}); please report it"));
            ET_ERROR_DRIVER
        }
    }
}

fn invalid(message: String) -> Error {
    Error::InvalidArgument(message)
}

/// A NUL-terminated UTF-8 string argument.
///
/// # Safety
/// `p` is null or points to a NUL-terminated string alive for `'a`.
pub(crate) unsafe fn text<'a>(p: *const c_char, what: &str) -> Result<&'a str> {
    if p.is_null() {
        return Err(invalid(format!("`{what}` is a null pointer")));
    }
    // SAFETY: non-null, and NUL-terminated by the caller's contract.
    unsafe { CStr::from_ptr(p) }.to_str().map_err(|_| invalid(format!("`{what}` is not UTF-8")))
}

/// A handle argument.
///
/// # Safety
/// `p` is null or a live handle of this library, not used elsewhere
/// mutably for `'a`.
pub(crate) unsafe fn handle<'a, T>(p: *const T, what: &str) -> Result<&'a T> {
    // SAFETY: the caller's contract.
    unsafe { p.as_ref() }.ok_or_else(|| invalid(format!("`{what}` is a null pointer")))
}

/// A handle argument the call changes.
///
/// # Safety
/// As [`handle`], and used by no other thread meanwhile.
pub(crate) unsafe fn handle_mut<'a, T>(p: *mut T, what: &str) -> Result<&'a mut T> {
    // SAFETY: the caller's contract.
    unsafe { p.as_mut() }.ok_or_else(|| invalid(format!("`{what}` is a null pointer")))
}

/// Checks an out-pointer before any work, so that a null one fails without
/// side effects.
pub(crate) fn out_ptr<T>(p: *mut T, what: &str) -> Result<*mut T> {
    match p.is_null() {
        true => Err(invalid(format!("`{what}` is a null pointer"))),
        false => Ok(p),
    }
}

/// Moves `value` into a new handle stored at `out` (checked by [`out_ptr`]).
///
/// # Safety
/// `out` is valid for one pointer write.
pub(crate) unsafe fn give<T>(out: *mut *mut T, value: T) {
    // SAFETY: the caller's contract.
    unsafe { out.write(Box::into_raw(Box::new(value))) }
}

/// Drops a handle made by [`give`]; null is nothing.
///
/// # Safety
/// `p` is null or a handle of this library not freed before.
pub(crate) unsafe fn take<T>(p: *mut T) -> Result<()> {
    if !p.is_null() {
        // SAFETY: made by `Box::into_raw` in `give`.
        drop(unsafe { Box::from_raw(p) });
    }
    Ok(())
}

/// `count` values at `p` (any pointer when 0).
///
/// # Safety
/// `p` is null or valid for reading `count` values.
pub(crate) unsafe fn array<'a, T>(p: *const T, count: usize, what: &str) -> Result<&'a [T]> {
    match (p.is_null(), count) {
        (_, 0) => Ok(&[]),
        (true, _) => Err(invalid(format!("`{what}` is a null pointer"))),
        // SAFETY: the caller's contract.
        (false, _) => Ok(unsafe { std::slice::from_raw_parts(p, count) }),
    }
}

/// `bytes` bytes at `p` (any pointer when 0).
///
/// # Safety
/// `p` is null or valid for reading `bytes` bytes.
pub(crate) unsafe fn bytes<'a>(p: *const u8, bytes: usize, what: &str) -> Result<&'a [u8]> {
    // SAFETY: the caller's contract.
    unsafe { array(p, bytes, what) }
}

/// `bytes` writable bytes at `p` (any pointer when 0).
///
/// # Safety
/// `p` is null or valid for writing `bytes` bytes.
pub(crate) unsafe fn bytes_mut<'a>(p: *mut u8, bytes: usize, what: &str) -> Result<&'a mut [u8]> {
    match (p.is_null(), bytes) {
        (_, 0) => Ok(&mut []),
        (true, _) => Err(invalid(format!("`{what}` is a null pointer"))),
        // SAFETY: the caller's contract.
        (false, _) => Ok(unsafe { std::slice::from_raw_parts_mut(p, bytes) }),
    }
}

pub(crate) fn parse_dtype(code: i32) -> Result<DType> {
    match code {
        ET_DTYPE_I32 => Ok(DType::I32),
        ET_DTYPE_F32 => Ok(DType::F32),
        ET_DTYPE_F64 => Ok(DType::F64),
        _ => Err(invalid(format!("dtype code {code} is none of ET_DTYPE_I32 (0), ET_DTYPE_F32 (1), ET_DTYPE_F64 (2)"))),
    }
}

pub(crate) fn dtype_code(d: DType) -> i32 {
    match d {
        DType::I32 => ET_DTYPE_I32,
        DType::F32 => ET_DTYPE_F32,
        DType::F64 => ET_DTYPE_F64,
    }
}

/// A shape argument: `ndim` dims at `shape`, none negative.
///
/// # Safety
/// `shape` is null or valid for reading `ndim` values.
pub(crate) unsafe fn parse_shape(ndim: usize, shape: *const i64) -> Result<Vec<usize>> {
    if ndim == 0 {
        return Ok(Vec::new());
    }
    if shape.is_null() {
        return Err(invalid(format!("`shape` is a null pointer with ndim {ndim}")));
    }
    // SAFETY: the caller's contract.
    let dims = unsafe { std::slice::from_raw_parts(shape, ndim) };
    dims.iter().map(|&d| usize::try_from(d).map_err(|_| invalid(format!("shape {dims:?} has a negative dim")))).collect()
}

/// A host tensor from C arguments: the dtype code known, the dims not
/// negative, `bytes` exactly their size.
///
/// # Safety
/// `shape` is null or valid for `ndim` values, `data` null or valid for
/// `size` bytes.
pub(crate) unsafe fn host_tensor(dtype: i32, ndim: usize, shape: *const i64, data: *const c_void, size: usize) -> Result<Tensor, Error> {
    let dtype = parse_dtype(dtype)?;
    // SAFETY: the caller's contract.
    let dims = unsafe { parse_shape(ndim, shape) }?;
    let want = eintup_runtime::buffer::byte_size(dtype, &dims)?;
    if size != want {
        return Err(Error::InvalidArgument(format!("{size} bytes for {dtype} of shape {dims:?}, which has {want} bytes")));
    }
    // SAFETY: the caller's contract.
    let host = unsafe { bytes(data.cast(), size, "data") }?;
    // The size is a whole number of elements (checked just above).
    let data = Data::from_ne_bytes(dtype, host).map_err(|e| match e {
        eintup_runtime::tensor::BytesError::OutOfMemory { bytes } => Error::OutOfMemory { what: "a host tensor".into(), bytes: bytes as u64 },
        ragged => Error::InvalidArgument(ragged.to_string()),
    })?;
    Tensor::new(dims.clone(), data).ok_or_else(|| Error::InvalidArgument(format!("shape {dims:?} does not match the data")))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn message() -> String {
        // SAFETY: the library's NUL-terminated message.
        unsafe { CStr::from_ptr(et_last_error()) }.to_string_lossy().into_owned()
    }

    #[test]
    fn errors_and_panics_become_statuses() {
        assert_eq!(entry("f", || Err(Error::NoDriver)), ET_ERROR_NO_DRIVER);
        assert_eq!(message(), "no CUDA driver found (libcuda could not be loaded)");
        assert_eq!(entry("f", || Err(Error::Driver("cuInit: boom".into()))), ET_ERROR_DRIVER);
        assert_eq!(entry("f", || Ok(())), ET_OK);
        assert_eq!(message(), "CUDA driver error: cuInit: boom", "a success leaves the message");
        assert_eq!(entry("et_thing", || panic!("a bug")), ET_ERROR_DRIVER);
        assert_eq!(message(), "et_thing: internal error (the runtime panicked: a bug); please report it");
    }
}
