//! The runtime's one error type.
//!
//! Every failure of the runtime — a missing driver, a malformed bundle, a
//! wrong input, a CUDA call that fails, a kernel fault in the emulator —
//! comes back as an [`Error`]; nothing on any path unwraps or panics. `Display` is a one-line message meant to be
//! printed after `error: ` by a command-line tool (the PTX JIT log, when there
//! is one, follows on the next lines).

use std::fmt;
use std::path::PathBuf;

use cudarc::driver::DriverError;

use crate::fault::Fault;

/// What went wrong. Variants carry enough context to print a useful message
/// without the caller adding any.
#[derive(Debug)]
pub enum Error {
    /// The CUDA driver library (`libcuda.so`) could not be loaded.
    NoDriver,
    /// The driver loaded but there is no device with this ordinal.
    NoDevice { ordinal: usize, count: usize },
    /// A CUDA driver call failed; the message names the call and the CUDA error.
    Driver(String),
    /// Reading or writing a bundle file failed.
    Io { path: PathBuf, source: std::io::Error },
    /// `manifest.json` is not valid JSON, does not have the expected fields,
    /// or is inconsistent (unknown names, bad shapes, ...).
    BadManifest(String),
    /// The bundle's content does not match the checksum it was written
    /// with: `manifest.json` or `kernels.ptx` changed after `build`.
    Checksum { recorded: String, computed: String },
    /// `manifest.json` has a `format_version` this runtime does not read.
    UnsupportedVersion { found: u64, supported: u64 },
    /// `kernels.ptx` does not match the manifest (a missing `.entry`, another
    /// target or PTX version, a parameter count that differs).
    BadPtx(String),
    /// The bundle was built for a newer GPU architecture than the device has.
    Target { bundle: String, device: String },
    /// An input tensor is missing, unknown, or has the wrong dtype or shape.
    Input { name: String, reason: String },
    /// Host memory for `what` could not be allocated: the emulator's device
    /// memory and its race records, a download, a tensor. An error with the
    /// size, never an abort of the process (a C host's or Python's).
    OutOfMemory { what: String, bytes: u64 },
    /// A caller-supplied argument other than an input is unusable
    /// (for example zero timing repetitions).
    InvalidArgument(String),
    /// A kernel running on the emulator faulted: an out-of-bounds or
    /// misaligned access, a race, a barrier not every thread reaches, ...
    /// (a GPU reports the first kind as a `Driver` error, the others not
    /// at all).
    Fault(Box<Fault>),
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Error::NoDriver => write!(f, "no CUDA driver found (libcuda could not be loaded)"),
            Error::NoDevice { ordinal, count } => {
                write!(f, "no CUDA device with ordinal {ordinal} ({count} device{} found)", if *count == 1 { "" } else { "s" })
            }
            Error::Driver(msg) => write!(f, "CUDA driver error: {msg}"),
            Error::OutOfMemory { what, bytes } => write!(f, "cannot allocate {bytes} bytes of host memory for {what}"),
            Error::Io { path, source } => write!(f, "{}: {source}", path.display()),
            Error::BadManifest(msg) => write!(f, "bad bundle manifest: {msg}"),
            Error::Checksum { recorded, computed } => write!(
                f,
                "the bundle is damaged: its content checksum is {computed}, but the manifest records {recorded} \
                 (manifest.json or kernels.ptx changed after it was written; rebuild it with `eintup build`)"
            ),
            Error::UnsupportedVersion { found, supported } => {
                write!(f, "bundle format_version {found} is not supported (this runtime reads versions 1 to {supported})")
            }
            Error::BadPtx(msg) => write!(f, "bad bundle kernels.ptx: {msg}"),
            Error::Target { bundle, device } => write!(f, "bundle targets {bundle} but the device is {device}; rebuild the bundle for this GPU"),
            Error::Input { name, reason } => write!(f, "input `{name}`: {reason}"),
            Error::InvalidArgument(msg) => write!(f, "invalid argument: {msg}"),
            Error::Fault(fault) => write!(f, "kernel fault: {fault}"),
        }
    }
}

impl Error {
    /// The exit code of a tool that ran a bundle it was given (`etrun`,
    /// `eintup exec`): 3 without a CUDA driver or device, 70 when the
    /// driver itself failed, and 2 for every defect of the bundle or of
    /// the caller's inputs: its manifest, its PTX, its target, an input,
    /// a kernel that faulted. One classification for both tools (issue
    /// #26 item 4): a bundle is the user's input, so its defect is not a
    /// crash of the tool.
    pub fn exit_code(&self) -> u8 {
        match self {
            Error::NoDriver | Error::NoDevice { .. } => 3,
            Error::Driver(_) => 70,
            _ => 2,
        }
    }
}

impl std::error::Error for Error {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            Error::Io { source, .. } => Some(source),
            _ => None,
        }
    }
}

/// [`Data::from_ne_bytes`](eintup_tensor::Data::from_ne_bytes)'s error for
/// buffer `name`: a download of the wrong size is the driver's failure.
pub(crate) fn from_bytes(name: &str, e: eintup_tensor::tensor::BytesError) -> Error {
    match e {
        eintup_tensor::tensor::BytesError::OutOfMemory { bytes } => {
            Error::OutOfMemory { what: format!("the host copy of buffer `{name}`"), bytes: bytes as u64 }
        }
        ragged => Error::Driver(format!("buffer `{name}`: downloaded {ragged}")),
    }
}

/// Maps a cudarc driver error to [`Error::Driver`], naming the operation that
/// failed: `cuModuleLoadDataEx: CUDA_ERROR_INVALID_PTX (a PTX JIT compilation failed)`.
pub(crate) fn driver(op: &str, err: DriverError) -> Error {
    // `CUresult`'s Debug is the enum name (CUDA_ERROR_...); the description
    // needs another driver call, which can itself fail, so it is optional.
    let description = err.error_string().ok().and_then(|s| s.to_str().ok().map(str::to_owned));
    match description {
        Some(d) => Error::Driver(format!("{op}: {:?} ({d})", err.0)),
        None => Error::Driver(format!("{op}: {:?}", err.0)),
    }
}

/// Shorthand used throughout the crate.
pub type Result<T, E = Error> = std::result::Result<T, E>;
