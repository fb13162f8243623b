//! Front end for Einsum Tuple (`.et`) files: lexer, lalrpop grammar,
//! span-carrying AST, the AST printer used by `etopt --emit ast`, and the
//! diagnostics type every compiler stage reports errors with.

pub mod ast;
pub mod diag;
pub mod lexer;
mod parse;
pub mod print;
pub mod span;
pub mod suggest;

#[allow(clippy::all, unused_parens, dead_code)]
mod et {
    include!(concat!(env!("OUT_DIR"), "/et.rs"));
}

pub use diag::Diagnostic;
pub use parse::{parse_expr, parse_file, Line};
pub use span::Span;
