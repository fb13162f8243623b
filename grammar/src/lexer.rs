//! Hand-written lexer for `.et` files.
//!
//! Line structure is decided here, not in the grammar: a newline ends a
//! logical line only when no `(` or `[` is open (so statements and calls may
//! span lines inside brackets), blank and comment-only lines produce nothing,
//! and every logical line ends with exactly one `Newline` token (also at end
//! of file). The parser then sees each line as one statement, call, output
//! list or constraint.

use crate::span::Span;
use std::fmt;

#[derive(Clone, Debug, PartialEq)]
pub enum Tok {
    Ident(String),
    Int(i64),
    Float(f64),
    Str(String),
    // keywords (whole words only: `RANKS` or `Lane` are identifiers)
    Rank,
    Dims,
    Flat,
    Random,
    In,
    // punctuation
    LBracket,
    RBracket,
    LParen,
    RParen,
    Comma,
    Colon,
    Dot,
    Assign,
    PlusAssign,
    Plus,
    Minus,
    Star,
    Slash,
    SlashSlash,
    SlashSlashCaret,
    Percent,
    Lt,
    Le,
    Gt,
    Ge,
    EqEq,
    NotEq,
    Newline,
}

impl fmt::Display for Tok {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Tok::Ident(s) => write!(f, "identifier `{s}`"),
            Tok::Int(n) => write!(f, "integer `{n}`"),
            Tok::Float(x) => write!(f, "number `{x:?}`"),
            Tok::Str(s) => write!(f, "string {s:?}"),
            Tok::Newline => write!(f, "end of line"),
            other => write!(f, "`{}`", other.text()),
        }
    }
}

impl Tok {
    /// Source text of a keyword or punctuation token.
    pub fn text(&self) -> &'static str {
        match self {
            Tok::Rank => "RANK",
            Tok::Dims => "DIMS",
            Tok::Flat => "FLAT",
            Tok::Random => "RANDOM",
            Tok::In => "IN",
            Tok::LBracket => "[",
            Tok::RBracket => "]",
            Tok::LParen => "(",
            Tok::RParen => ")",
            Tok::Comma => ",",
            Tok::Colon => ":",
            Tok::Dot => ".",
            Tok::Assign => "=",
            Tok::PlusAssign => "+=",
            Tok::Plus => "+",
            Tok::Minus => "-",
            Tok::Star => "*",
            Tok::Slash => "/",
            Tok::SlashSlash => "//",
            Tok::SlashSlashCaret => "//^",
            Tok::Percent => "%",
            Tok::Lt => "<",
            Tok::Le => "<=",
            Tok::Gt => ">",
            Tok::Ge => ">=",
            Tok::EqEq => "==",
            Tok::NotEq => "!=",
            Tok::Newline => "newline",
            Tok::Ident(_) | Tok::Int(_) | Tok::Float(_) | Tok::Str(_) => "",
        }
    }
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub enum LexErrorKind {
    UnexpectedChar(char),
    IntTooLarge,
    /// A float literal whose value overflows to infinity (`1e999`).
    FloatTooLarge,
    BadNumber,
    UnterminatedString,
    /// A `(` or `[` still open at the end of the file.
    Unclosed(char),
    /// A lalrpop action rejected a construct (message is complete).
    Custom(String),
    /// `NAME(..)` on a right-hand side where `NAME` is no function.
    UnknownFunction(String),
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct LexError {
    pub kind: LexErrorKind,
    pub span: Span,
}

pub type Spanned = (usize, Tok, usize);

/// Splits `source` into tokens. Errors do not stop lexing: the offending
/// character is skipped so later lines can still be checked.
pub fn lex(source: &str) -> (Vec<Spanned>, Vec<LexError>) {
    Lexer { src: source, bytes: source.as_bytes(), pos: 0, toks: Vec::new(), errors: Vec::new(), open: Vec::new() }.run()
}

struct Lexer<'a> {
    src: &'a str,
    bytes: &'a [u8],
    pos: usize,
    toks: Vec<Spanned>,
    errors: Vec<LexError>,
    /// Open brackets with their positions; newlines inside are whitespace.
    open: Vec<(char, usize)>,
}

impl<'a> Lexer<'a> {
    fn run(mut self) -> (Vec<Spanned>, Vec<LexError>) {
        while self.pos < self.bytes.len() {
            let start = self.pos;
            let c = self.src[start..].chars().next().unwrap_or('\0');
            match c {
                '\n' => {
                    self.pos += 1;
                    if self.open.is_empty() {
                        self.end_line(start);
                    }
                }
                ' ' | '\t' | '\r' => self.pos += 1,
                '#' => {
                    while self.pos < self.bytes.len() && self.bytes[self.pos] != b'\n' {
                        self.pos += 1;
                    }
                }
                '0'..='9' => self.number(),
                '\'' | '"' => self.string(c),
                c if c == '_' || c.is_alphabetic() => self.word(),
                _ => self.punct(c),
            }
        }
        let end = self.bytes.len();
        // A bracket still open at the end swallowed every later newline;
        // point at the bracket itself, which is where the mistake is.
        for (c, at) in std::mem::take(&mut self.open) {
            self.errors.push(LexError { kind: LexErrorKind::Unclosed(c), span: Span::new(at, at + 1) });
        }
        self.end_line(end);
        (self.toks, self.errors)
    }

    fn push(&mut self, start: usize, tok: Tok) {
        self.toks.push((start, tok, self.pos));
    }

    fn end_line(&mut self, at: usize) {
        if matches!(self.toks.last(), Some((_, t, _)) if *t != Tok::Newline) {
            self.toks.push((at, Tok::Newline, at));
        }
        self.open.clear();
    }

    fn number(&mut self) {
        let start = self.pos;
        self.eat_digits();
        let mut is_float = false;
        if self.peek(0) == Some(b'.') && self.peek(1).is_some_and(|b| b.is_ascii_digit()) {
            is_float = true;
            self.pos += 1;
            self.eat_digits();
        } else if self.peek(0) == Some(b'.') && !self.peek(1).is_some_and(|b| b.is_ascii_alphabetic() || b == b'_') {
            // `3.` is a float, `tf.nn` style dots after a number are not.
            is_float = true;
            self.pos += 1;
        }
        if matches!(self.peek(0), Some(b'e' | b'E')) {
            let sign = usize::from(matches!(self.peek(1), Some(b'+' | b'-')));
            if self.peek(1 + sign).is_some_and(|b| b.is_ascii_digit()) {
                is_float = true;
                self.pos += 1 + sign;
                self.eat_digits();
            }
        }
        // `12abc` is one malformed number, not `12` followed by `abc`.
        let digits_end = self.pos;
        for c in self.src[digits_end..].chars() {
            if c == '_' || c.is_alphanumeric() {
                self.pos += c.len_utf8();
            } else {
                break;
            }
        }
        if self.pos > digits_end {
            self.error(start, LexErrorKind::BadNumber);
            return;
        }
        let text = &self.src[start..self.pos];
        if is_float {
            match text.parse::<f64>() {
                // Rust parses `1e999` as infinity; a literal that cannot be
                // represented is the user's mistake, not a value.
                Ok(x) if x.is_infinite() => self.error(start, LexErrorKind::FloatTooLarge),
                Ok(x) => self.push(start, Tok::Float(x)),
                Err(_) => self.error(start, LexErrorKind::BadNumber),
            }
        } else {
            match text.parse::<i64>() {
                Ok(n) => self.push(start, Tok::Int(n)),
                Err(_) => self.error(start, LexErrorKind::IntTooLarge),
            }
        }
    }

    fn eat_digits(&mut self) {
        while self.peek(0).is_some_and(|b| b.is_ascii_digit()) {
            self.pos += 1;
        }
    }

    fn string(&mut self, quote: char) {
        let start = self.pos;
        self.pos += 1;
        let mut value = String::new();
        loop {
            match self.src[self.pos..].chars().next() {
                None | Some('\n') => {
                    self.error(start, LexErrorKind::UnterminatedString);
                    // A bracket opened before the string was probably closed
                    // inside it (`f(p='x)`); keeping it open would join the
                    // following lines to this one and add a misleading
                    // "unclosed bracket" error.
                    self.open.clear();
                    return;
                }
                Some(c) if c == quote => {
                    self.pos += 1;
                    break;
                }
                Some('\\') => {
                    self.pos += 1;
                    if let Some(c) = self.src[self.pos..].chars().next() {
                        if c != '\n' {
                            value.push(c);
                            self.pos += c.len_utf8();
                        }
                    }
                }
                Some(c) => {
                    value.push(c);
                    self.pos += c.len_utf8();
                }
            }
        }
        self.push(start, Tok::Str(value));
    }

    fn word(&mut self) {
        let start = self.pos;
        for c in self.src[start..].chars() {
            if c == '_' || c.is_alphanumeric() {
                self.pos += c.len_utf8();
            } else {
                break;
            }
        }
        let tok = match &self.src[start..self.pos] {
            "RANK" => Tok::Rank,
            "DIMS" => Tok::Dims,
            "FLAT" => Tok::Flat,
            "RANDOM" => Tok::Random,
            "IN" => Tok::In,
            w => Tok::Ident(w.to_string()),
        };
        self.push(start, tok);
    }

    fn punct(&mut self, c: char) {
        let start = self.pos;
        let two = |s: &Self, b: u8| s.peek(1) == Some(b);
        let (tok, len) = match c {
            '[' => (Tok::LBracket, 1),
            ']' => (Tok::RBracket, 1),
            '(' => (Tok::LParen, 1),
            ')' => (Tok::RParen, 1),
            ',' => (Tok::Comma, 1),
            ':' => (Tok::Colon, 1),
            '.' => (Tok::Dot, 1),
            '=' if two(self, b'=') => (Tok::EqEq, 2),
            '=' => (Tok::Assign, 1),
            '!' if two(self, b'=') => (Tok::NotEq, 2),
            '<' if two(self, b'=') => (Tok::Le, 2),
            '<' => (Tok::Lt, 1),
            '>' if two(self, b'=') => (Tok::Ge, 2),
            '>' => (Tok::Gt, 1),
            '+' if two(self, b'=') => (Tok::PlusAssign, 2),
            '+' => (Tok::Plus, 1),
            '-' => (Tok::Minus, 1),
            '*' => (Tok::Star, 1),
            '%' => (Tok::Percent, 1),
            '/' if two(self, b'/') && self.peek(2) == Some(b'^') => (Tok::SlashSlashCaret, 3),
            '/' if two(self, b'/') => (Tok::SlashSlash, 2),
            '/' => (Tok::Slash, 1),
            other => {
                self.pos += other.len_utf8();
                self.error(start, LexErrorKind::UnexpectedChar(other));
                return;
            }
        };
        self.pos += len;
        match c {
            '[' | '(' => self.open.push((c, start)),
            ']' | ')' => {
                let want = if c == ']' { '[' } else { '(' };
                match self.open.last() {
                    Some(&(o, _)) if o == want => {
                        self.open.pop();
                    }
                    // Keep the token: the parser gives the better message
                    // ("expected `]`, found `)`"); just keep depth sane.
                    Some(_) => {
                        self.open.pop();
                    }
                    None => {}
                }
            }
            _ => {}
        }
        self.push(start, tok);
    }

    fn peek(&self, ahead: usize) -> Option<u8> {
        self.bytes.get(self.pos + ahead).copied()
    }

    fn error(&mut self, start: usize, kind: LexErrorKind) {
        self.errors.push(LexError { kind, span: Span::new(start, self.pos.max(start + 1).min(self.bytes.len().max(start))) });
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn kinds(src: &str) -> Vec<Tok> {
        let (toks, errs) = lex(src);
        assert!(errs.is_empty(), "{errs:?}");
        toks.into_iter().map(|t| t.1).collect()
    }

    #[test]
    fn newlines_inside_brackets_are_whitespace() {
        let t = kinds("a[i,\n  j] = b[i]\n");
        assert_eq!(t.iter().filter(|t| **t == Tok::Newline).count(), 1);
    }

    #[test]
    fn blank_and_comment_lines_produce_no_tokens() {
        let t = kinds("# c\n\n  # d\na[i] = 1 # trailing\n\n\n");
        assert_eq!(t.len(), 7, "{t:?}");
    }

    #[test]
    fn comparisons() {
        assert_eq!(
            kinds("a < b <= c > d >= e == f != g = h")[1..16].iter().step_by(2).cloned().collect::<Vec<_>>(),
            [Tok::Lt, Tok::Le, Tok::Gt, Tok::Ge, Tok::EqEq, Tok::NotEq, Tok::Assign, Tok::Newline]
        );
    }

    #[test]
    fn ceil_div_and_floor_div() {
        assert_eq!(kinds("a //^ b // c / d")[1], Tok::SlashSlashCaret);
        assert_eq!(kinds("a //^ b // c / d")[3], Tok::SlashSlash);
        assert_eq!(kinds("a //^ b // c / d")[5], Tok::Slash);
    }

    #[test]
    fn keywords_are_whole_words() {
        assert_eq!(kinds("INDEX Lane RANKS IN")[..4], [Tok::Ident("INDEX".into()), Tok::Ident("Lane".into()), Tok::Ident("RANKS".into()), Tok::In]);
    }

    #[test]
    fn numbers() {
        assert_eq!(kinds("3 3.0 1e3 2.5e-1")[..4], [Tok::Int(3), Tok::Float(3.0), Tok::Float(1000.0), Tok::Float(0.25)]);
    }

    #[test]
    fn huge_float_is_an_error_not_infinity() {
        let (_, errs) = lex("a[i] = 1e999");
        assert_eq!(errs.len(), 1);
        assert_eq!(errs[0].kind, LexErrorKind::FloatTooLarge);
        assert_eq!(errs[0].span, Span::new(7, 12));
    }

    #[test]
    fn unterminated_string_does_not_keep_brackets_open() {
        // Only the string is reported, and the next line is its own line.
        let (toks, errs) = lex("f(p='x)\ny\n");
        assert_eq!(errs.iter().map(|e| &e.kind).collect::<Vec<_>>(), [&LexErrorKind::UnterminatedString]);
        assert_eq!(toks.iter().filter(|t| t.1 == Tok::Newline).count(), 2);
    }

    #[test]
    fn digits_followed_by_letters_are_one_malformed_number() {
        for src in ["12abc", "99999999999999999999x", "3.5e", "7\u{e9}"] {
            let (toks, errs) = lex(src);
            assert_eq!(errs.len(), 1, "{src}: {errs:?}");
            assert_eq!(errs[0].kind, LexErrorKind::BadNumber, "{src}");
            assert_eq!(errs[0].span, Span::new(0, src.len()), "{src}");
            assert_eq!(toks.len(), 0, "{src}: {toks:?}");
        }
    }

    #[test]
    fn huge_int_is_an_error_not_a_panic() {
        let (_, errs) = lex("a[i] = 99999999999999999999999");
        assert_eq!(errs[0].kind, LexErrorKind::IntTooLarge);
    }
}
