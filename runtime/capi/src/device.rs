//! Devices and bundles.

use std::ffi::{c_char, CString};
use std::sync::Arc;

use eintup_runtime::{Bundle, Device, DeviceKind, Error};

use crate::status::{entry, give, handle, out_ptr, take, text, EtStatus};

/// A device: a CUDA GPU or the PTX emulator. Programs loaded on it keep it
/// alive (reference-counted), so it may be freed before them.
pub struct EtDevice {
    pub(crate) device: Arc<Device>,
    /// The device's name as a C string (names hold no NUL).
    name: CString,
}

/// A bundle read from disk (`manifest.json` and `kernels.ptx`), checked.
pub struct EtBundle {
    pub(crate) bundle: Bundle,
}

/// Opens a device: `kind` `"emu"` (the emulator; `ordinal` 0) or `"cuda"`
/// (CUDA device `ordinal`). `ET_ERROR_NO_DRIVER` without a driver or
/// device.
///
/// # Safety
/// `kind` is null or a NUL-terminated string; `out` is null or valid for
/// one pointer write.
#[no_mangle]
pub unsafe extern "C" fn et_device_open(kind: *const c_char, ordinal: usize, out: *mut *mut EtDevice) -> EtStatus {
    entry("et_device_open", || {
        let out = out_ptr(out, "out")?;
        // SAFETY: the caller's contract.
        let kind: DeviceKind = unsafe { text(kind, "kind") }?.parse()?;
        let device = match kind {
            DeviceKind::Cuda => Device::new(ordinal)?,
            DeviceKind::Emulator if ordinal == 0 => Device::emulator(),
            DeviceKind::Emulator => return Err(Error::InvalidArgument(format!("the emulator is device 0 only, not {ordinal}"))),
        };
        // SAFETY: checked by out_ptr; the caller's contract.
        let name = CString::new(device.name()).unwrap_or_default();
        unsafe { give(out, EtDevice { device: Arc::new(device), name }) };
        Ok(())
    })
}

/// Frees a device handle (null: nothing). Programs loaded on it stay usable.
///
/// # Safety
/// `device` is null or a handle from `et_device_open`, not freed before.
#[no_mangle]
pub unsafe extern "C" fn et_device_free(device: *mut EtDevice) -> EtStatus {
    // SAFETY: the caller's contract.
    entry("et_device_free", || unsafe { take(device) })
}

/// The device's name (e.g. `"eintup PTX emulator"`), valid while the
/// handle lives.
///
/// # Safety
/// `device` is null or a live device handle; `out` is null or valid for
/// one pointer write.
#[no_mangle]
pub unsafe extern "C" fn et_device_name(device: *const EtDevice, out: *mut *const c_char) -> EtStatus {
    entry("et_device_name", || {
        let out = out_ptr(out, "out")?;
        // SAFETY: the caller's contract.
        let d = unsafe { handle(device, "device") }?;
        // SAFETY: checked by out_ptr.
        unsafe { out.write(d.name.as_ptr()) };
        Ok(())
    })
}

/// Reads and checks the bundle directory at `path` (its manifest, PTX and
/// checksum): `ET_ERROR_INPUT` for a missing or damaged bundle.
///
/// # Safety
/// `path` is null or a NUL-terminated string; `out` is null or valid for
/// one pointer write.
#[no_mangle]
pub unsafe extern "C" fn et_bundle_load(path: *const c_char, out: *mut *mut EtBundle) -> EtStatus {
    entry("et_bundle_load", || {
        let out = out_ptr(out, "out")?;
        // SAFETY: the caller's contract.
        let bundle = Bundle::open(unsafe { text(path, "path") }?)?;
        // SAFETY: checked by out_ptr.
        unsafe { give(out, EtBundle { bundle }) };
        Ok(())
    })
}

/// Frees a bundle (null: nothing). Programs loaded from it stay usable.
///
/// # Safety
/// `bundle` is null or a handle from `et_bundle_load`, not freed before.
#[no_mangle]
pub unsafe extern "C" fn et_bundle_free(bundle: *mut EtBundle) -> EtStatus {
    // SAFETY: the caller's contract.
    entry("et_bundle_free", || unsafe { take(bundle) })
}
