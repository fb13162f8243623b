//! Thin runtime for eintup PTX bundles (docs/runtime.md, docs/bundle.md).
//!
//! A bundle is a directory with `manifest.json` (buffers, kernels, steps)
//! and `kernels.ptx`. [`Bundle::open`] reads and validates one;
//! [`Device::run`] executes it on a GPU through the CUDA driver API
//! (cudarc, loaded at run time so that machines without CUDA build and run
//! everything else); [`Device::run_timed`] measures it with CUDA events.
//!
//! The runtime compiles nothing itself (the driver JIT-compiles the PTX),
//! uses one stream and plain device memory, and never generates inputs: the
//! caller supplies every `input` buffer.

pub mod bundle;
pub mod check;
pub mod device;
pub mod error;
pub mod manifest;
mod module;
pub mod npy;
pub mod ptx;
pub mod tensor;

pub use bundle::Bundle;
pub use device::{Device, DeviceInfo, LaunchTiming, Timings};
pub use error::{Error, Result};
pub use manifest::Manifest;
pub use tensor::{DType, Data, Tensor};
