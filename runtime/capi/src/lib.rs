//! The C ABI of the eintup runtime (issue #29 item 2; docs/c-api.md):
//! `libeintup_rt.so` and its header `include/eintup.h`, generated from
//! this crate by cbindgen (`build.rs`).
//!
//! Handles are opaque pointers the library allocates and the caller frees
//! with the matching `et_*_free`: a device ([`EtDevice`]), a bundle
//! ([`EtBundle`]), a loaded program ([`EtProgram`]), a device buffer
//! ([`EtBuffer`]). Every function returns an [`EtStatus`]; the message of a
//! failure is [`et_last_error`]. Nothing panics across the boundary, and a
//! null pointer or a string that is not UTF-8 is an error, not a crash.
//!
//! - [`status`]: codes, the last error, argument checks;
//! - [`device`]: devices and bundles;
//! - [`program`]: load, write, run, read, query buffers, bind;
//! - [`buffer`]: device buffers the caller owns.

pub mod buffer;
pub mod device;
pub mod program;
pub mod status;

pub use buffer::*;
pub use device::*;
pub use program::*;
pub use status::*;
