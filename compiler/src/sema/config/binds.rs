//! `--bind NAME=[d1, ...]`: an eintup's dims given on the command line,
//! the first source of dims ([`Space::new`](super::Space::new)). The
//! grammar is shared with the runtime's tools (`eintup_tensor::bind`);
//! here its errors get their code.

pub use eintup_tensor::bind::{parse_binding, Binding};

/// Parses `--bind` arguments; a malformed one, or one eintup bound twice,
/// is error E0301 (a message: it has no place in the source).
pub fn parse_bindings(binds: &[String]) -> Result<Vec<Binding>, String> {
    eintup_tensor::bind::parse_bindings(binds).map_err(|e| format!("error[E0301]: {e}"))
}
