//! The Einsum Tuple compiler: everything between the AST and the backends.
//!
//! Levels (DESIGN.md section 3): AST (crate `et-grammar`) -> `et` dialect ->
//! `loop` dialect -> LLVM IR -> PTX. This crate also holds the reference
//! interpreter and the two command-line tools, `etopt` and `eintup`.

pub mod check;
pub mod codegen;
pub mod cli;
pub mod arith;
pub mod driver;
pub mod bundle;
pub mod exec;
pub mod gpu;
pub mod interp;
pub mod ir;
pub mod passes;
pub mod pipeline;
pub mod random;
pub mod sema;
pub mod simplify;
pub mod tensor;

pub use et_grammar as grammar;
