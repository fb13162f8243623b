//! The text toolkit both IR dialects share (docs/ir-et.md, "Lexical
//! rules"): what a token is and how strings and floats are written
//! (`lexical`), a cursor over tokens that reports located diagnostics
//! (`cursor`), and enums spelled by one table that printer and parser both
//! read (`spelling`); and what kind a text is, program or IR of either
//! dialect, told by its content (`kind`). Each dialect keeps its own grammar and error codes;
//! everything below the grammar is here, so the two cannot drift apart.

pub mod cursor;
pub mod kind;
pub mod lexical;
pub mod spelling;

pub use cursor::{Cursor, PResult};
pub use kind::{kind_of, TextKind};
pub use lexical::{float_text, is_ident, lex_line, lines, quote, Dialect, Tok, Token};
pub(crate) use spelling::spelled;
pub use spelling::{one_of, Spelled};
