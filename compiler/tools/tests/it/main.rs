//! The package's integration tests, one binary (docs/testing.md): each
//! module was a test crate of its own; one crate links the package and
//! its dependencies once.

mod interp_cli;
mod shapes_examples;
