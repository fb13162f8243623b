//! The package's integration tests, one binary (docs/testing.md): each
//! module was a test crate of its own; one crate links the package and
//! its dependencies once.

mod bundle;
mod cli;
mod common;
mod device;
mod emulator;
mod inputs;
mod manifest;
mod program;
mod variants;
