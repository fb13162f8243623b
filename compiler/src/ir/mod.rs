//! IR levels below the AST. Each has a textual form that prints and parses
//! back (DESIGN.md section 3).

pub mod et;
pub mod et_parse;
pub mod et_verify;
pub mod loops;
pub mod loops_parse;
pub mod loops_print;
pub mod loops_verify;
pub mod print;
