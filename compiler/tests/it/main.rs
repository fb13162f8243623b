//! The package's integration tests, one binary (docs/testing.md): each
//! module was a test crate of its own; one crate links the package and
//! its dependencies once.

mod bridge_tf;
mod bridge_unavailable;
mod dynamic_loops;
mod et_roundtrip;
mod interp_examples;
mod interp_hand;
mod loop_ir;
mod loops_differential;
mod no_panic_sema;
mod plan_differential;
mod policy_examples;
mod simplify_props;
