//! What a text is, told by its content rather than its file name: a `.et`
//! program, or printed IR of the `et` or `loop` dialect (`etopt` reads
//! all three, `-` from stdin included; `eintup run` a program or `et` IR).
//!
//! The first line that is neither blank nor an IR comment decides. Printed
//! IR starts with a keyword, a blank and a name (`eintup a : ?`, `array
//! x : ...`, `buffer x : ...`, `kernel @k {`) or with a loop module's
//! `facts(..)` or a dynamic `et` module's `symbols(..)`, which no program
//! line can:
//! a statement starts with an array name and `[`. A `#` comment is the
//! language's, a `//` line an IR comment (in a program `//` is an operator
//! and cannot start a line).

/// The three kinds of input.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum TextKind {
    /// An Einsum Tuple program (`.et`).
    Program,
    /// Printed `et` dialect.
    EtIr,
    /// Printed `loop` dialect.
    LoopIr,
}

/// Keywords that start the first item of a printed `et` module.
const ET_KEYWORDS: &[&str] = &["eintup", "array", "stmt", "call", "outputs"];
/// ... of a printed `loop` module.
const LOOP_KEYWORDS: &[&str] = &["buffer", "kernel"];

/// The kind of `text`. Text with only blanks (and `//` comments) is IR of
/// the `et` dialect when it has a comment, a program otherwise (an empty
/// program is an error the front end reports).
pub fn kind_of(text: &str) -> TextKind {
    let mut comments = false;
    for line in text.lines() {
        let l = line.trim_start_matches('\u{feff}').trim();
        if l.is_empty() {
            continue;
        }
        if l.starts_with("//") {
            comments = true;
            continue;
        }
        if l.starts_with('#') {
            return TextKind::Program;
        }
        let word: String = l.chars().take_while(|c| c.is_alphanumeric() || *c == '_').collect();
        // `KEYWORD NAME`: a blank, then a name, a number or `@` (a program
        // may write `kernel [i] = ..`, an array name, a blank and `[`).
        let rest = &l[word.len()..];
        let blank_follows = rest.starts_with(char::is_whitespace) && rest.trim_start().starts_with(|c: char| c.is_alphanumeric() || c == '_' || c == '@');
        return match word.as_str() {
            // A loop module's pass facts come first: `facts(..)`, which
            // no program line is (a constraint is `DIMS(..)` or `RANK(..)`).
            "facts" if rest.starts_with('(') => TextKind::LoopIr,
            // A dynamic loop module's dim symbols: `dim %NAME`, which no
            // program line is either (`%` starts no index).
            "dim" if rest.starts_with(char::is_whitespace) && rest.trim_start().starts_with('%') => TextKind::LoopIr,
            // A dynamic `et` module's symbols: `symbols(%a.0, ..)` or
            // `symbols()`; no program line starts with a name and `(%`.
            "symbols" if rest.starts_with("(%") || rest.starts_with("()") => TextKind::EtIr,
            w if blank_follows && LOOP_KEYWORDS.contains(&w) => TextKind::LoopIr,
            w if blank_follows && ET_KEYWORDS.contains(&w) => TextKind::EtIr,
            _ if comments => TextKind::EtIr,
            _ => TextKind::Program,
        };
    }
    if comments {
        TextKind::EtIr
    } else {
        TextKind::Program
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_first_significant_line_decides() {
        assert_eq!(kind_of("# matmul\nc[i,j] += a[i,k] * b[k,j]\n"), TextKind::Program);
        assert_eq!(kind_of("\n\nc[i] = 1\n"), TextKind::Program);
        // An array named like a keyword is still a statement.
        assert_eq!(kind_of("eintup[i] = 1\n"), TextKind::Program);
        assert_eq!(kind_of("kernel [i] = 1\n"), TextKind::Program);
        assert_eq!(kind_of("// RUN: etopt %s\n\neintup a : ?\n"), TextKind::EtIr);
        assert_eq!(kind_of("array x : FLOAT [] def=0\n"), TextKind::EtIr);
        assert_eq!(kind_of("// c\nbuffer x : f64[4] input\n"), TextKind::LoopIr);
        assert_eq!(kind_of("kernel @k {\n}\n"), TextKind::LoopIr);
        assert_eq!(kind_of("facts(parallelized)\nbuffer x : f64[4] input\n"), TextKind::LoopIr);
        assert_eq!(kind_of("dim %n.0\nbuffer x : f64[%n.0] input\n"), TextKind::LoopIr);
        assert_eq!(kind_of("dim[i] = 1\n"), TextKind::Program);
        assert_eq!(kind_of("symbols(%n.0)\neintup n : [%n.0]\n"), TextKind::EtIr);
        assert_eq!(kind_of("symbols()\neintup n : [3]\n"), TextKind::EtIr);
        assert_eq!(kind_of("symbols[i] = 1\n"), TextKind::Program);
        assert_eq!(kind_of("// only a comment\n"), TextKind::EtIr);
        assert_eq!(kind_of(""), TextKind::Program);
    }
}
