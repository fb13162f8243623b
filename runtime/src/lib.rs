//! Thin runtime for eintup PTX bundles (docs/runtime.md, docs/bundle.md).
//!
//! A bundle is a directory with `manifest.json` (buffers, kernels, steps)
//! and `kernels.ptx`. [`Bundle::open`] reads and validates one;
//! [`Device::run`] executes it on a device: a GPU through the CUDA driver
//! API ([`Device::new`]; cudarc, loaded at run time so that machines
//! without CUDA build and run everything else) or the PTX emulator
//! ([`Device::emulator`], docs/emulator.md), both through one run path.
//! [`Device::run_timed`] measures a GPU run with CUDA events;
//! [`Device::run_profiled`] profiles an emulated one.
//!
//! [`Device::load`] makes a bundle resident once as a [`Program`], run many
//! times; the caller may bind its own [`DeviceBuffer`]s to the program's
//! inputs and outputs (runs then copy nothing) and hand it a CUDA stream.
//! The C ABI over this API is the crate `eintup-capi` (docs/c-api.md).
//!
//! The runtime compiles nothing itself (the driver JIT-compiles the PTX,
//! the emulator decodes it), uses one stream (or the caller's) and plain
//! device memory, and never generates inputs on the host: the caller
//! supplies every `input` buffer or the bundle's generator kernels make it.

mod backend;
pub mod buffer;
pub mod bundle;
pub mod check;
mod cuda;
pub mod device;
pub mod dynamic;
pub mod emu;
pub mod error;
mod fault;
mod info;
pub mod manifest;
mod module;
mod profile;
pub mod program;
pub mod ptx;
pub mod shape;
mod timing;

// The element types and tensors live in a leaf crate the compiler's core
// uses without the device code; re-exported so both paths name one type.
pub use eintup_tensor::{npy, tensor};

pub use buffer::DeviceBuffer;
pub use bundle::Bundle;
pub use device::{Device, DeviceInfo, DeviceKind, LaunchTiming, Timings};
pub use emu::{EmuOptions, Fault, FaultKind, Profile, ProfileReport};
pub use error::{Error, Result};
pub use manifest::Manifest;
pub use program::{Program, BUFFER_ALIGN};
pub use tensor::{DType, Data, Tensor};
