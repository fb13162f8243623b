//! The element types and host tensors of eintup (docs/runtime.md, Tensors),
//! the `--bind` grammar every tool reads, the rule for array names, and
//! how output files are written (atomically, never through a link).
//!
//! A leaf crate of its own: the compiler's core, its backends and the
//! runtime all exchange these tensors, and the core must build without the
//! runtime's device dependencies (cudarc, clap). `eintup-runtime`
//! re-exports both modules, so `eintup_runtime::tensor` and
//! `eintup_runtime::npy` name the same items.

pub mod bind;
pub mod infile;
pub mod names;
pub mod npy;
pub mod outfile;
pub mod tensor;
mod zeroed;

pub use tensor::{DType, Data, Tensor};
pub use zeroed::zeroed_bytes;
