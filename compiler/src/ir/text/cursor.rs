//! A cursor over tokens for the recursive-descent parsers of both
//! dialects: look at the next token, take it if it is what the grammar
//! wants, or report what was expected where. Every error is a located
//! [`Diagnostic`] with the dialect's code.

use super::lexical::{Dialect, Tok, Token, INF, NAN};
use super::spelling::Spelled;
use et_grammar::{Diagnostic, Span};

pub type PResult<T> = Result<T, Diagnostic>;

pub struct Cursor<'a> {
    toks: &'a [Token],
    pos: usize,
    /// Byte offset where the tokens end: the span of "end of line/input".
    end: usize,
    dialect: &'static Dialect,
}

impl<'a> Cursor<'a> {
    pub fn new(toks: &'a [Token], end: usize, dialect: &'static Dialect) -> Cursor<'a> {
        Cursor { toks, pos: 0, end, dialect }
    }

    pub fn peek(&self) -> Option<&'a Token> {
        self.toks.get(self.pos)
    }

    /// The token `k` places ahead (0 is the next one).
    pub fn tok_at(&self, k: usize) -> Option<&'a Tok> {
        self.toks.get(self.pos + k).map(|t| &t.tok)
    }

    /// Takes the next token.
    pub fn bump(&mut self) -> Option<&'a Token> {
        let t = self.toks.get(self.pos);
        self.pos += 1;
        t
    }

    pub fn at_end(&self) -> bool {
        self.pos >= self.toks.len()
    }

    /// The next token's span, or an empty span where the tokens end.
    pub fn span(&self) -> Span {
        self.peek().map_or(Span::new(self.end, self.end), |t| t.span)
    }

    /// The end of the last token taken.
    fn prev_end(&self) -> usize {
        self.pos.checked_sub(1).and_then(|k| self.toks.get(k)).map_or(self.end, |t| t.span.end)
    }

    /// An empty span at the end of the last token taken.
    pub fn prev_span(&self) -> Span {
        Span::new(self.prev_end(), self.prev_end())
    }

    /// "unexpected X, expected Y" at the next token (or the end).
    pub fn unexpected(&self, expected: &str) -> Diagnostic {
        let found = self.peek().map_or_else(|| self.dialect.end.to_string(), |t| t.tok.describe());
        Diagnostic::error(self.dialect.unexpected, format!("unexpected {found}, expected {expected}")).at(self.span(), format!("expected {expected}"))
    }

    pub fn is_punct(&self, p: &str) -> bool {
        matches!(self.tok_at(0), Some(Tok::Punct(q)) if *q == p)
    }

    /// Takes punctuation `p` if it comes next.
    pub fn eat(&mut self, p: &str) -> bool {
        let yes = self.is_punct(p);
        self.pos += usize::from(yes);
        yes
    }

    /// Punctuation `p`, which must come next.
    pub fn punct(&mut self, p: &str) -> PResult<Span> {
        let sp = self.span();
        if self.eat(p) {
            Ok(sp)
        } else {
            Err(self.unexpected(&format!("`{p}`")))
        }
    }

    pub fn is_word(&self, w: &str) -> bool {
        matches!(self.tok_at(0), Some(Tok::Ident(x)) if x == w)
    }

    /// Takes the word `w` if it comes next.
    pub fn eat_word(&mut self, w: &str) -> bool {
        let yes = self.is_word(w);
        self.pos += usize::from(yes);
        yes
    }

    /// The word `w`, which must come next.
    pub fn word(&mut self, w: &str) -> PResult<Span> {
        let sp = self.span();
        if self.eat_word(w) {
            Ok(sp)
        } else {
            Err(self.unexpected(&format!("`{w}`")))
        }
    }

    /// Any identifier; `what` says what it names, for the error.
    pub fn ident(&mut self, what: &str) -> PResult<(String, Span)> {
        match self.peek() {
            Some(Token { tok: Tok::Ident(x), span }) => {
                self.pos += 1;
                Ok((x.clone(), *span))
            }
            _ => Err(self.unexpected(what)),
        }
    }

    /// Nothing may follow.
    pub fn finish(&self) -> PResult<()> {
        if self.at_end() {
            Ok(())
        } else {
            Err(self.unexpected(self.dialect.end))
        }
    }

    /// The value of `S` spelled by the next token (a word or an operator),
    /// without taking it.
    pub fn peek_spelled<S: Spelled>(&self) -> Option<S> {
        self.tok_at(0).and_then(Tok::text).and_then(S::from_spelling)
    }

    /// A word naming a value of `S` (a dtype, a role, ..). A word that
    /// spells none is error `code`, "unknown WHAT `word`", listing them.
    pub fn spelled<S: Spelled>(&mut self, code: &'static str, what: &str) -> PResult<(S, Span)> {
        let (w, sp) = self.ident(&format!("{what} ({})", S::one_of()))?;
        S::from_spelling(&w)
            .map(|s| (s, sp))
            .ok_or_else(|| Diagnostic::error(code, format!("unknown {what} `{w}`")).at(sp, format!("expected {}", S::one_of())))
    }

    /// An integer with an optional leading `-`, in the i64 range.
    pub fn int(&mut self, what: &str) -> PResult<(i64, Span)> {
        let start = self.span();
        let neg = self.eat("-");
        match self.peek() {
            Some(Token { tok: Tok::Int(d), span }) => {
                self.pos += 1;
                let sp = start.to(*span);
                let text = if neg { format!("-{d}") } else { d.clone() };
                text.parse::<i64>()
                    .map(|v| (v, sp))
                    .map_err(|_| Diagnostic::error(self.dialect.bad_number, format!("integer `{text}` is beyond the 64-bit range")).at(sp, "beyond i64"))
            }
            _ => Err(self.unexpected(what)),
        }
    }

    /// An unsigned integer that fits in `usize`.
    pub fn usize(&mut self, what: &str) -> PResult<(usize, Span)> {
        match self.peek() {
            Some(Token { tok: Tok::Int(d), span }) => {
                self.pos += 1;
                d.parse::<usize>()
                    .map(|v| (v, *span))
                    .map_err(|_| Diagnostic::error(self.dialect.bad_number, format!("number `{d}` is too large")).at(*span, "too large"))
            }
            _ => Err(self.unexpected(what)),
        }
    }

    /// A value reference `%N`, with its span.
    pub fn value_ref(&mut self) -> PResult<(usize, Span)> {
        let start = self.punct("%")?;
        let (n, sp) = self.usize("a value number after `%`")?;
        Ok((n, start.to(sp)))
    }

    /// Does an integer (possibly negative) come next?
    pub fn at_int(&self) -> bool {
        let k = usize::from(self.is_punct("-"));
        matches!(self.tok_at(k), Some(Tok::Int(_)))
    }

    /// A float as `float_text` writes it, with an optional leading `-`: a
    /// number (integers too), `inf` or `NaN`.
    pub fn float(&mut self) -> PResult<f64> {
        let start = self.span();
        let neg = self.eat("-");
        let x = match self.peek() {
            Some(Token { tok: Tok::Int(s) | Tok::Float(s), span }) => {
                // The lexer checked float tokens; a long run of digits may
                // still be beyond f64.
                let x = s.parse::<f64>().unwrap_or(f64::INFINITY);
                if x.is_infinite() {
                    let sp = start.to(*span);
                    return Err(Diagnostic::error(self.dialect.bad_number, format!("number `{s}` is too large for f64")).at(sp, "beyond f64"));
                }
                x
            }
            Some(Token { tok: Tok::Ident(w), .. }) if w == INF => f64::INFINITY,
            Some(Token { tok: Tok::Ident(w), .. }) if w == NAN => f64::NAN,
            _ => return Err(self.unexpected("a number")),
        };
        self.pos += 1;
        Ok(if neg { -x } else { x })
    }
}

#[cfg(test)]
mod tests {
    use super::super::lexical::lex_line;
    use super::*;

    static D: Dialect = Dialect { name: "test", end: "end of line", bad_char: "C", bad_number: "N", bad_string: "S", unexpected: "U" };

    fn with<T>(line: &str, f: impl FnOnce(&mut Cursor) -> T) -> T {
        let (toks, err) = lex_line(line, 0, &D);
        assert!(err.is_none());
        f(&mut Cursor::new(&toks, line.len(), &D))
    }

    #[test]
    fn numbers_with_signs_and_limits() {
        with("-9223372036854775808 9223372036854775808", |c| {
            assert_eq!(c.int("i").map(|x| x.0), Ok(i64::MIN));
            let e = c.int("i").unwrap_err();
            assert_eq!((e.code, e.primary_span()), ("N", Some(Span::new(21, 40))));
        });
        with("-1.5 7 -inf NaN 1e5", |c| {
            assert_eq!(c.float(), Ok(-1.5));
            assert_eq!(c.float(), Ok(7.0));
            assert_eq!(c.float(), Ok(f64::NEG_INFINITY));
            assert!(c.float().unwrap().is_nan());
            assert_eq!(c.float(), Ok(1e5));
            assert_eq!(c.float().unwrap_err().message, "unexpected end of line, expected a number");
        });
        let huge = "9".repeat(400);
        with(&huge, |c| assert_eq!(c.float().unwrap_err().code, "N"));
        with("%3 %99999999999999999999999", |c| {
            assert_eq!(c.value_ref(), Ok((3, Span::new(0, 2))));
            assert_eq!(c.value_ref().unwrap_err().code, "N");
        });
    }

    #[test]
    fn expectations_name_what_was_found() {
        with("a ( \"s\"", |c| {
            assert_eq!(c.word("b").unwrap_err().message, "unexpected `a`, expected `b`");
            assert!(c.eat_word("a") && !c.eat(")") && c.eat("("));
            let e = c.finish().unwrap_err();
            assert_eq!((e.code, e.message.as_str()), ("U", "unexpected string \"s\", expected end of line"));
            assert_eq!(e.primary_span(), Some(Span::new(4, 7)));
        });
    }
}
