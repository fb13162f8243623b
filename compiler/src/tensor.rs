//! Array values exchanged between the interpreter, the backends and the
//! user: `eintup-tensor`'s [`Tensor`] (row-major data with a shape), which
//! the runtime shares, so the compiler, bundles and devices have one
//! vocabulary of element types and tensors. INT is i32; FLOAT is f64, or
//! f32 when a program runs with `--float f32`. `.npy` files are read and
//! written by that crate's [`npy`] module.

pub use eintup_tensor::tensor::{element_count, shape_text, DType, Data, Tensor};
pub use eintup_tensor::{npy, outfile};

/// The element type as the language names it, for messages and printed
/// headers: `INT`, `FLOAT(f64)`, `FLOAT(f32)`.
pub fn type_text(d: DType) -> &'static str {
    match d {
        DType::I32 => "INT",
        DType::F64 => "FLOAT(f64)",
        DType::F32 => "FLOAT(f32)",
    }
}
