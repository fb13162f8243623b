//! The `loop` dialect: the second IR level (docs/architecture.md section 3). It says
//! *how* a specialised `et` module is computed: static buffers, and kernels
//! made of explicit loops over scalar induction variables, `guard`s that
//! implement the out-of-bounds rule, scalar index arithmetic, and writes
//! (one per kernel when lowered; `fuse-resets` and `block-tiles` add a
//! clear, a copy or an accumulator's write beside it).
//!
//! Everything is static: shapes are numbers, FLOAT has a width (`f64` or
//! `f32`), and every index is an `i64` expression over induction variables
//! and index values loaded from INT buffers. Textual form and verifier live
//! in this folder (`print`, `parse`, `verify`), the interpreter in
//! `interp::loops`; docs/ir-loop.md documents every op.
//!
//! Semantics of a kernel: run its body once. `for v in [lo, hi)` runs its
//! body for `v = lo, lo+1, .., hi-1` (nothing when `hi <= lo`); a `parallel`
//! loop's iterations may run in any order or at once, a `reduce` loop's run
//! in order inside one thread. `guard` runs its body only when every
//! condition holds. Kernels of a module run in order; each sees the writes
//! of the previous ones.

pub mod chain;
pub mod contraction;
pub mod facts;
pub mod geometry;
pub mod iexpr;
pub mod index32;
pub mod interval;
pub mod liveness;
pub mod parse;
pub mod poly;
pub mod print;
pub mod site;
pub mod symbols;
pub mod syntax;
pub mod target;
pub mod types;
pub mod verify;
pub mod walk;
pub mod work;

pub use contraction::KernelSum;
pub use facts::{Fact, Facts};
pub use iexpr::*;
pub use interval::Interval;
pub use types::*;
pub use walk::*;
pub use work::{loop_work, nest_work, WORK_ENUMERATION_BUDGET};
