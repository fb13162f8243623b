//! The element types and host tensors of eintup (docs/runtime.md, Tensors),
//! and the `--bind` grammar every tool reads.
//!
//! A leaf crate of its own: the compiler's core, its backends and the
//! runtime all exchange these tensors, and the core must build without the
//! runtime's device dependencies (cudarc, clap). `eintup-runtime`
//! re-exports both modules, so `eintup_runtime::tensor` and
//! `eintup_runtime::npy` name the same items.

pub mod bind;
pub mod npy;
pub mod tensor;
mod zeroed;

pub use tensor::{DType, Data, Tensor};
