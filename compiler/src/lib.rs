//! The Einsum Tuple compiler's core: everything between the AST and the
//! targets, without LLVM.
//!
//! Levels (docs/architecture.md section 3, docs/architecture.md): AST (crate
//! `et-grammar`) -> `et` dialect -> `loop` dialect; the stages that move
//! between them are [`pipeline`]'s functions. LLVM IR, PTX and bundles are
//! the `eintup-codegen` crate's; the command-line tools are
//! `eintup-tools`'. This crate also holds the reference interpreters and
//! the framework bridge of `eintup check`.
//!
//! Calls flow one way: `variants` -> `pipeline` -> `passes` -> `sema`, `simplify` ->
//! `ir`; `interp`, `check` and `tensor` sit beside them.

pub mod arith;
pub mod autodiff;
pub mod check;
pub mod driver;
pub mod interp;
pub mod ir;
pub mod mathlib;
pub mod passes;
pub mod pipeline;
pub mod random;
pub mod sema;
pub mod simplify;
pub mod tempdir;
pub mod tensor;
pub mod variants;

pub use et_grammar as grammar;
