//! The lexical rules of the textual IR, one set for both dialects, in both
//! directions: the lexer reads exactly the strings and floats that
//! [`quote`] and [`float_text`] write, and an identifier is the same thing
//! to the lexer and to the loop verifier ([`is_ident`]).
//!
//! Lexing is per line: a token never spans a line break, so the `et`
//! parser, which is line oriented, can report one error per bad line,
//! while the `loop` parser joins the lines' tokens into one stream.

use et_grammar::{Diagnostic, Span};

/// How a dialect names its lexical errors. The codes stay per dialect
/// (E06xx: users and tests match on them); the rules do not.
#[derive(Debug)]
pub struct Dialect {
    /// `et` or `loop`, for "not part of the .. dialect".
    pub name: &'static str,
    /// What the parser calls running out of tokens (`end of line`).
    pub end: &'static str,
    /// A character that starts no token.
    pub bad_char: &'static str,
    /// A malformed number or one out of range.
    pub bad_number: &'static str,
    /// An unterminated string or an invalid escape.
    pub bad_string: &'static str,
    /// A token the grammar does not expect here.
    pub unexpected: &'static str,
}

#[derive(Clone, Debug, PartialEq)]
pub enum Tok {
    Ident(String),
    /// Unsigned digits; a sign is a separate `-` token so that `i64::MIN`
    /// can be read.
    Int(String),
    /// Digits with a fraction or an exponent, finite as `f64`, no sign.
    Float(String),
    /// A string's value, escapes resolved.
    Str(String),
    Punct(&'static str),
}

#[derive(Clone, Debug)]
pub struct Token {
    pub tok: Tok,
    pub span: Span,
}

impl Tok {
    /// The token as messages quote it.
    pub fn describe(&self) -> String {
        match self {
            Tok::Ident(s) => format!("`{s}`"),
            Tok::Int(s) | Tok::Float(s) => format!("number `{s}`"),
            Tok::Str(s) => format!("string {}", quote(s)),
            Tok::Punct(p) => format!("`{p}`"),
        }
    }

    /// The word or operator as written, for tables of spellings.
    pub fn text(&self) -> Option<&str> {
        match self {
            Tok::Ident(s) => Some(s),
            Tok::Punct(p) => Some(p),
            _ => None,
        }
    }
}

/// Punctuation of both dialects, longest first so that `//^` is not read
/// as `//` then `^` (nor `+=` as `+` then `=`). Inside a line `//` is floor
/// division; only at the start of a line does it begin a comment.
const PUNCTS: &[&str] = &["//^", "//", "+=", "<=", "!=", "[", "]", "(", ")", "{", "}", "<", ">", ",", ":", "=", "+", "-", "*", "%", "?", ".", "@"];

/// The non-finite floats as [`float_text`] writes them (Rust's `{:?}`).
pub const INF: &str = "inf";
pub const NAN: &str = "NaN";

/// The `.et` language's identifiers, so every name a program can use
/// prints as one token; the rule is `eintup-tensor`'s, which the runtime
/// checks a bundle's buffer names against too.
pub use eintup_tensor::names::is_ident;
use eintup_tensor::names::{ident_continue, ident_start};

/// A string as the dialects write it: in double quotes, with `\"`, `\\`,
/// `\n`, `\r`, `\t`, and `\u{HEX}` (lower-case hex) for every other control
/// character; everything else as itself. These are exactly the escapes the
/// lexer reads.
pub fn quote(s: &str) -> String {
    let mut o = String::with_capacity(s.len() + 2);
    o.push('"');
    for c in s.chars() {
        match c {
            '"' => o.push_str("\\\""),
            '\\' => o.push_str("\\\\"),
            '\n' => o.push_str("\\n"),
            '\r' => o.push_str("\\r"),
            '\t' => o.push_str("\\t"),
            c if c.is_control() => o.push_str(&format!("\\u{{{:x}}}", c as u32)),
            c => o.push(c),
        }
    }
    o.push('"');
    o
}

/// A float in Rust's shortest round-trip form (`0.1`, `1e-7`, `-0.0`,
/// `inf`, `NaN`): `str::parse::<f64>` reads it back exactly, and the lexer
/// reads it as one number token (or the words [`INF`] and [`NAN`]).
pub fn float_text(x: f64) -> String {
    format!("{x:?}")
}

/// The lines that carry tokens, each with its byte offset and without its
/// line break: blank lines and lines whose first non-blank characters are
/// `//` (comments, such as lit's `RUN:` and `CHECK:` lines) are skipped.
pub fn lines(src: &str) -> impl Iterator<Item = (usize, &str)> {
    src.split_inclusive('\n')
        .scan(0, |offset, raw| {
            let start = *offset;
            *offset += raw.len();
            Some((start, raw.trim_end_matches(['\n', '\r'])))
        })
        .filter(|(_, line)| {
            let t = line.trim_start();
            !t.is_empty() && !t.starts_with("//")
        })
}

/// The tokens of one line that starts at byte `base` of the text, and the
/// first lexical error if any (the tokens before it are kept).
pub fn lex_line(line: &str, base: usize, d: &Dialect) -> (Vec<Token>, Option<Diagnostic>) {
    let mut l = Lexer { line, base, d, toks: Vec::new() };
    let err = l.run().err();
    (l.toks, err)
}

struct Lexer<'a> {
    line: &'a str,
    base: usize,
    d: &'a Dialect,
    toks: Vec<Token>,
}

impl Lexer<'_> {
    fn span(&self, start: usize, end: usize) -> Span {
        Span::new(self.base + start, self.base + end)
    }

    fn push(&mut self, tok: Tok, start: usize, end: usize) {
        let span = self.span(start, end);
        self.toks.push(Token { tok, span });
    }

    fn run(&mut self) -> Result<(), Diagnostic> {
        let line = self.line;
        let mut i = 0;
        while let Some(c) = line[i..].chars().next() {
            let start = i;
            if c.is_whitespace() {
                i += c.len_utf8();
            } else if ident_start(c) {
                i = self.word_end(i);
                self.push(Tok::Ident(line[start..i].to_string()), start, i);
            } else if c.is_ascii_digit() {
                i = self.number(start)?;
            } else if c == '"' {
                let (s, end) = self.string(start)?;
                i = end;
                self.push(Tok::Str(s), start, i);
            } else if let Some(p) = PUNCTS.iter().find(|p| line[i..].starts_with(**p)) {
                i += p.len();
                self.push(Tok::Punct(p), start, i);
            } else {
                return Err(Diagnostic::error(self.d.bad_char, format!("unexpected character {c:?}"))
                    .at(self.span(start, start + c.len_utf8()), format!("not part of the {} dialect", self.d.name)));
            }
        }
        Ok(())
    }

    /// The end of the identifier characters from `i`.
    fn word_end(&self, i: usize) -> usize {
        self.line[i..].find(|c| !ident_continue(c)).map_or(self.line.len(), |k| i + k)
    }

    /// `DIGITS ('.' DIGITS)? ([eE] [+-]? DIGITS)?`; returns the end.
    fn number(&mut self, start: usize) -> Result<usize, Diagnostic> {
        let b = self.line.as_bytes();
        let digits = |mut i: usize| {
            while i < b.len() && b[i].is_ascii_digit() {
                i += 1;
            }
            i
        };
        let mut i = digits(start);
        let mut float = false;
        if i + 1 < b.len() && b[i] == b'.' && b[i + 1].is_ascii_digit() {
            float = true;
            i = digits(i + 1);
        }
        if i < b.len() && (b[i] == b'e' || b[i] == b'E') {
            let sign = usize::from(i + 1 < b.len() && (b[i + 1] == b'-' || b[i + 1] == b'+'));
            if i + 1 + sign < b.len() && b[i + 1 + sign].is_ascii_digit() {
                float = true;
                i = digits(i + 1 + sign);
            }
        }
        // Digits running into letters (`12abc`) are one malformed number,
        // not a number and a name.
        if self.line[i..].chars().next().is_some_and(ident_continue) {
            let end = self.word_end(i);
            let text = &self.line[start..end];
            return Err(Diagnostic::error(self.d.bad_number, format!("malformed number `{text}`")).at(self.span(start, end), "not a number"));
        }
        let text = self.line[start..i].to_string();
        if !float {
            self.push(Tok::Int(text), start, i);
        } else if text.parse::<f64>().is_ok_and(f64::is_finite) {
            self.push(Tok::Float(text), start, i);
        } else {
            return Err(Diagnostic::error(self.d.bad_number, format!("number `{text}` is too large for f64")).at(self.span(start, i), "beyond f64"));
        }
        Ok(i)
    }

    /// The string whose opening quote is at `start`: its value and the end
    /// of the closing quote. Reads exactly the escapes [`quote`] writes.
    fn string(&self, start: usize) -> Result<(String, usize), Diagnostic> {
        let mut out = String::new();
        let mut chars = self.line[start + 1..].char_indices().map(|(k, c)| (start + 1 + k, c));
        while let Some((k, c)) = chars.next() {
            match c {
                '"' => return Ok((out, k + 1)),
                '\\' => {
                    let bad = |end: usize| {
                        Diagnostic::error(self.d.bad_string, "invalid escape in string").at(self.span(k, end), "expected \\\", \\\\, \\n, \\r, \\t or \\u{hex}")
                    };
                    let Some((e, esc)) = chars.next() else { break };
                    let end = e + esc.len_utf8();
                    out.push(match esc {
                        '"' => '"',
                        '\\' => '\\',
                        'n' => '\n',
                        'r' => '\r',
                        't' => '\t',
                        'u' => {
                            // `{`, one to six hex digits, `}`, a Unicode scalar value.
                            let rest = &self.line[end..];
                            let close = rest.find('}').filter(|&c| rest.starts_with('{') && (2..=7).contains(&c));
                            let Some(close) = close else { return Err(bad(end)) };
                            let hex = &rest[1..close];
                            let ch = hex.chars().all(|h| h.is_ascii_hexdigit()).then(|| u32::from_str_radix(hex, 16).ok().and_then(char::from_u32)).flatten();
                            let Some(ch) = ch else { return Err(bad(end + close + 1)) };
                            for _ in 0..=close {
                                chars.next();
                            }
                            ch
                        }
                        _ => return Err(bad(end)),
                    });
                }
                c => out.push(c),
            }
        }
        Err(Diagnostic::error(self.d.bad_string, "unterminated string").at(self.span(start, start + 1), "this string is not closed on its line"))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const D: Dialect = Dialect { name: "test", end: "end of line", bad_char: "C", bad_number: "N", bad_string: "S", unexpected: "U" };

    fn toks(line: &str) -> Vec<Tok> {
        let (t, err) = lex_line(line, 0, &D);
        assert_eq!(err, None, "{line}");
        t.into_iter().map(|t| t.tok).collect()
    }

    /// (code, text under the primary label) of a line's lexical error.
    fn error(line: &str) -> (&'static str, String) {
        let d = lex_line(line, 0, &D).1.expect("an error");
        (d.code, line[d.primary_span().expect("located").range()].to_string())
    }

    #[test]
    fn tokens_and_punctuation() {
        use Tok::*;
        assert_eq!(
            toks("%0 = ceildiv //^ // +=<= != x_1 é9 _ 12 1.5 1e-7 2E+3 1. @k"),
            [
                Punct("%"),
                Int("0".into()),
                Punct("="),
                Ident("ceildiv".into()),
                Punct("//^"),
                Punct("//"),
                Punct("+="),
                Punct("<="),
                Punct("!="),
                Ident("x_1".into()),
                Ident("é9".into()),
                Ident("_".into()),
                Int("12".into()),
                Float("1.5".into()),
                Float("1e-7".into()),
                Float("2E+3".into()),
                Int("1".into()),
                Punct("."),
                Punct("@"),
                Ident("k".into()),
            ]
        );
    }

    #[test]
    fn identifiers_are_the_et_languages() {
        assert!(is_ident("y_main") && is_ident("_t3") && is_ident("A9") && is_ident("é") && is_ident("Δx"));
        assert!(!is_ident("") && !is_ident("3a") && !is_ident("a-b") && !is_ident("a b"));
        // What the lexer reads as one identifier token is what is_ident accepts.
        for s in ["é", "Δx", "y_main", "_"] {
            assert_eq!(toks(s), [Tok::Ident(s.into())]);
        }
    }

    #[test]
    fn strings_round_trip_through_quote() {
        for s in ["", "plain", "q\"uo\\te", "a\nb\rc\td", "nul\0 bell\u{7} del\u{7f}", "é ∑ 😀", "\u{1f}"] {
            let q = quote(s);
            assert_eq!(toks(&q), [Tok::Str(s.into())], "{q}");
        }
        assert_eq!(quote("\0\u{7f}\"\\"), r#""\u{0}\u{7f}\"\\""#);
        assert_eq!(toks(r#""\u{41}\u{1F600}""#), [Tok::Str("A😀".into())]);
    }

    #[test]
    fn lexical_errors_are_located() {
        assert_eq!(error("a $ b"), ("C", "$".into()));
        assert_eq!(error("x 12abc y"), ("N", "12abc".into()));
        assert_eq!(error("1e999"), ("N", "1e999".into()));
        assert_eq!(error("f(\"abc)"), ("S", "\"".into()));
        for bad in [r"\q", r"\0", r"\'", r"\u{}", r"\u{1234567}", r"\u{d800}", r"\u{zz}", r"\u41"] {
            let line = format!("\"a{bad}b\"");
            let (code, under) = error(&line);
            assert_eq!(code, "S", "{line}");
            assert!(under.starts_with('\\'), "{line}: {under}");
        }
        // A line ending in a backslash leaves the string open.
        assert_eq!(error("\"ab\\"), ("S", "\"".into()));
    }

    #[test]
    fn comment_and_blank_lines_are_skipped() {
        let src = "// RUN: x\n\n  a\r\n  // note\nb // not a comment\n";
        let got: Vec<(usize, &str)> = lines(src).collect();
        assert_eq!(got, [(11, "  a"), (26, "b // not a comment")]);
    }

    #[test]
    fn floats_print_in_the_lexers_form() {
        assert_eq!(float_text(1.0), "1.0");
        assert_eq!(float_text(-0.5), "-0.5");
        assert_eq!(float_text(1e-7), "1e-7");
        assert_eq!(float_text(f64::INFINITY), INF);
        assert_eq!(float_text(f64::NAN), NAN);
    }
}
