//! The package's integration tests, one binary (docs/testing.md): each
//! module was a test crate of its own; one crate links the package and
//! its dependencies once.

mod arranged_ptx;
mod block_tiles_host;
mod codegen_cases;
mod codegen_host;
mod codegen_ptx;
mod dynamic_examples;
mod dynamic_ptx;
mod emulator_examples;
mod gradients;
mod host_differential;
mod ir_fuzz;
mod ptx_examples;
mod random_programs;
