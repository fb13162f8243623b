//! IR levels below the AST. Each has a textual form that prints and parses
//! back (docs/architecture.md section 3).

pub mod et;
pub mod loops;
pub mod text;
