//! What `etopt` does around the pass manager, in the manner of `mlir-opt`:
//! cutting the input into independent chunks (`--split-input-file`,
//! [`split`]), checking the diagnostics the input expects
//! (`--verify-diagnostics`, [`verify_diagnostics`]) and describing the
//! registry (`--list-passes`, [`list`]). `src/bin/etopt.rs` drives them.

pub mod list;
pub mod split;
pub mod verify_diagnostics;

use eintup::ir::text::{kind_of, TextKind};

/// The language of an input, told by its content
/// ([`eintup::ir::text::kind_of`]), not its file name. It decides how the
/// input is read and which comment syntax carries split markers and
/// expected diagnostics.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Lang {
    /// A program: `#` comments.
    Et,
    /// Printed IR, either dialect: whole-line `//` comments.
    Ir,
}

impl Lang {
    pub fn of(text: &str) -> Lang {
        match kind_of(text) {
            TextKind::Program => Lang::Et,
            TextKind::EtIr | TextKind::LoopIr => Lang::Ir,
        }
    }

    /// What starts a comment.
    pub fn comment(self) -> &'static str {
        match self {
            Lang::Et => "#",
            Lang::Ir => "//",
        }
    }
}
