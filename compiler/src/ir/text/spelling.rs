//! Enums written as a word or an operator in the textual IR (op names,
//! dtypes, roles, index operators, ..). Each has one table, and both the
//! printer (`spelling`) and the parser (`from_spelling`) read it, so a
//! spelling cannot differ between the two, and "expected .." messages list
//! exactly the words the parser accepts.

/// An enum with one spelling per value.
pub trait Spelled: Copy + PartialEq + 'static {
    /// Every value, in the order messages list them.
    const ALL: &'static [Self];

    /// How the textual IR writes this value.
    fn spelling(self) -> &'static str;

    /// The value written `s`, if any.
    fn from_spelling(s: &str) -> Option<Self> {
        Self::ALL.iter().copied().find(|v| v.spelling() == s)
    }

    /// Every spelling, as "`a`, `b` or `c`".
    fn one_of() -> String {
        one_of(Self::ALL.iter().map(|v| v.spelling()))
    }
}

/// Words as "`a`, `b` or `c`" (for "expected .." messages).
pub fn one_of<'a>(words: impl IntoIterator<Item = &'a str>) -> String {
    let quoted: Vec<String> = words.into_iter().map(|w| format!("`{w}`")).collect();
    match quoted.split_last() {
        None => String::new(),
        Some((last, [])) => last.clone(),
        Some((last, rest)) => format!("{} or {last}", rest.join(", ")),
    }
}

/// Implements [`Spelled`] from one table, `Enum { Variant => "word", .. }`.
/// The `match` it generates is exhaustive, so a new variant without a
/// spelling does not compile.
macro_rules! spelled {
    ($ty:ty { $($variant:ident => $text:literal),+ $(,)? }) => {
        impl $crate::ir::text::Spelled for $ty {
            const ALL: &'static [Self] = &[$(Self::$variant),+];
            fn spelling(self) -> &'static str {
                match self {
                    $(Self::$variant => $text),+
                }
            }
        }
    };
}
pub(crate) use spelled;

/// Checks for each dialect's spelling tables (its `syntax.rs` tests).
#[cfg(test)]
pub(crate) mod checks {
    use super::Spelled;
    use crate::ir::text::{lex_line, Dialect};

    /// `w` lexes as one token the parser can match.
    pub fn one_token(w: &str, d: &Dialect) {
        let (toks, err) = lex_line(w, 0, d);
        assert!(err.is_none() && toks.len() == 1, "{w}");
        assert_eq!(toks[0].tok.text(), Some(w));
    }

    /// Every spelling of `S` is one token and reads back as its value.
    pub fn table<S: Spelled + std::fmt::Debug>(d: &Dialect) {
        for &v in S::ALL {
            one_token(v.spelling(), d);
            assert_eq!(S::from_spelling(v.spelling()), Some(v));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(Clone, Copy, Debug, PartialEq)]
    enum Tri {
        A,
        B,
        C,
    }
    spelled!(Tri { A => "a", B => "//", C => "c_c" });

    #[test]
    fn one_table_read_both_ways() {
        for &t in Tri::ALL {
            assert_eq!(Tri::from_spelling(t.spelling()), Some(t));
        }
        assert_eq!(Tri::from_spelling("b"), None);
        assert_eq!(Tri::one_of(), "`a`, `//` or `c_c`");
        assert_eq!(one_of(["x"]), "`x`");
    }
}
