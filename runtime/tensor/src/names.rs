//! The names of arrays and buffers: the `.et` language's identifiers (`_`
//! or a letter, then `_`, letters and digits, Unicode). One rule for every
//! tool: the compiler's lexers and verifiers read names by it, and the
//! runtime refuses a bundle whose buffer names break it, because a buffer's
//! name becomes a file name (`etrun --out DIR` writes `DIR/NAME.npy`) and
//! is printed to a terminal: no `/`, `.`, control or escape characters.

/// May `c` start an identifier?
pub fn ident_start(c: char) -> bool {
    c == '_' || c.is_alphabetic()
}

/// May `c` continue an identifier?
pub fn ident_continue(c: char) -> bool {
    c == '_' || c.is_alphanumeric()
}

/// Is `s` one identifier?
pub fn is_ident(s: &str) -> bool {
    let mut cs = s.chars();
    cs.next().is_some_and(ident_start) && cs.all(ident_continue)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_that_are_files_and_terminal_text() {
        assert!(is_ident("y") && is_ident("_t3") && is_ident("Δx") && is_ident("s2_y_shared"));
        for bad in ["", "../x", "/abs/p", "a.b", "a/b", ".", "..", "x\u{1b}[2J", "bell\u{7}", "a b", "3a", "a-b"] {
            assert!(!is_ident(bad), "{bad:?}");
        }
    }
}
