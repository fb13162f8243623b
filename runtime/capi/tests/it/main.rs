//! The package's integration tests, one binary (docs/testing.md): each
//! module was a test crate of its own; one crate links the package and
//! its dependencies once.

mod c_example;
#[path = "../../../tests/it/common/mod.rs"]
mod common;
mod errors;
