//! What `etopt` does around the pass manager, in the manner of `mlir-opt`:
//! cutting the input into independent chunks (`--split-input-file`,
//! [`split`]), checking the diagnostics the input expects
//! (`--verify-diagnostics`, [`verify_diagnostics`]) and describing the
//! registry (`--list-passes`, [`list`]). `src/bin/etopt.rs` drives them.

pub mod list;
pub mod split;
pub mod verify_diagnostics;

use std::path::Path;

/// The language of an input file, told by its extension. It decides how
/// the file is read and which comment syntax carries split markers and
/// expected diagnostics.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Lang {
    /// A `.et` program: `#` comments.
    Et,
    /// Printed IR (`.etir`), either dialect: whole-line `//` comments.
    Ir,
}

impl Lang {
    pub fn of(path: &Path) -> Lang {
        if path.extension().is_some_and(|e| e == "etir") {
            Lang::Ir
        } else {
            Lang::Et
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
