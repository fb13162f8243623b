//! From source text to [`File`]: lex, parse each logical line with the
//! lalrpop grammar, then group the lines into sections and check their order.
//!
//! Lines are parsed independently, so one syntax error does not hide the
//! errors of later lines.

use crate::ast::*;
use crate::diag::Diagnostic;
use crate::lexer::{lex, LexError, LexErrorKind, Spanned, Tok};
use crate::span::Span;
use lalrpop_util::ParseError;

/// One parsed logical line.
#[derive(Clone, Debug, PartialEq)]
pub enum Line {
    Stmt(Stmt),
    Call(Call),
    Outputs(Outputs),
    Constraint(Constraint),
}

/// Builds a binary expression node (used by the grammar's actions).
pub(crate) fn bin(op: BinOp, a: Expr, b: Expr, l: usize, r: usize) -> Expr {
    Expr { kind: ExprKind::Binary(op, Box::new(a), Box::new(b)), span: Span::new(l, r) }
}

/// Builds a comparison node.
pub(crate) fn compare(op: CmpOp, a: Expr, b: Expr, l: usize, r: usize) -> Expr {
    Expr { kind: ExprKind::Compare(op, Box::new(a), Box::new(b)), span: Span::new(l, r) }
}

/// `max=` / `min=` from the word before `=`.
pub(crate) fn reduction(word: &Ident) -> Result<AssignOp, ParseError<usize, Tok, LexError>> {
    match word.name.as_str() {
        "max" => Ok(AssignOp::MaxAssign),
        "min" => Ok(AssignOp::MinAssign),
        other => Err(custom(word.span, format!("unknown statement operator `{other}=`; a statement is `=`, `+=`, `max=` or `min=`"))),
    }
}

/// `name(args)` on a right-hand side: one of the language's functions,
/// with its number of arguments.
pub(crate) fn call(f: Ident, args: Vec<Expr>, span: Span) -> Result<Expr, ParseError<usize, Tok, LexError>> {
    let Some(func) = Func::from_name(&f.name) else {
        return Err(ParseError::User {
            error: LexError { kind: LexErrorKind::UnknownFunction(f.name.clone()), span: Span::new(f.span.start, f.span.end + 1) },
        });
    };
    if args.len() != func.arity() {
        let n = |k: usize| if k == 1 { "1 argument".to_string() } else { format!("{k} arguments") };
        return Err(custom(span, format!("`{}` takes {}, found {}", func.name(), n(func.arity()), args.len())));
    }
    Ok(Expr { kind: ExprKind::Call(func, args), span })
}

/// A parse error raised by a grammar action.
pub(crate) fn custom(span: Span, message: String) -> ParseError<usize, Tok, LexError> {
    ParseError::User { error: LexError { kind: LexErrorKind::Custom(message), span } }
}

/// `L(lit)` is a literal argument; any other wrapper is an error.
pub(crate) fn wrapper_literal(f: Ident, lit: Literal) -> Result<CallValue, ParseError<usize, Tok, LexError>> {
    if f.name == "L" {
        Ok(CallValue::Literal(lit))
    } else {
        Err(custom(f.span, format!("unknown call-argument wrapper `{}(..)`; expected `L(literal)` or `TENSOR(DIMS(..))`", f.name)))
    }
}

/// Parses a whole `.et` file. On failure returns every diagnostic found.
pub fn parse_file(source: &str) -> Result<File, Vec<Diagnostic>> {
    let (tokens, lex_errors) = lex(source);
    let mut diags: Vec<Diagnostic> = lex_errors.iter().map(lex_diagnostic).collect();
    let mut lines = Vec::new();
    for line in split_lines(&tokens) {
        // A line with a lexical error has already been reported; parsing it
        // again would only add a confusing second error.
        let (lo, hi) = (line[0].0, line[line.len() - 1].2);
        if lex_errors.iter().any(|e| e.span.start >= lo && e.span.start <= hi) {
            continue;
        }
        if let Some(d) = check_nesting(line) {
            diags.push(d);
            continue;
        }
        let parser = crate::et::LineParser::new();
        match parser.parse(line.iter().cloned().map(Ok::<Spanned, LexError>)) {
            Ok(l) => lines.push(l),
            Err(e) => diags.push(parse_diagnostic(e, source)),
        }
    }
    let file = group_sections(lines, &mut diags);
    if diags.is_empty() {
        Ok(file)
    } else {
        diags.sort_by_key(|d| d.primary_span().map(|s| s.start));
        Err(diags)
    }
}

/// Parses a single expression (used by tools and tests).
pub fn parse_expr(source: &str) -> Result<Expr, Vec<Diagnostic>> {
    let (mut tokens, lex_errors) = lex(source);
    if !lex_errors.is_empty() {
        return Err(lex_errors.iter().map(lex_diagnostic).collect());
    }
    if matches!(tokens.last(), Some((_, Tok::Newline, _))) {
        tokens.pop();
    }
    if let Some(d) = check_nesting(&tokens) {
        return Err(vec![d]);
    }
    crate::et::ExprParser::new().parse(tokens.into_iter().map(Ok::<Spanned, LexError>)).map_err(|e| vec![parse_diagnostic(e, source)])
}

/// The most operators and brackets one logical line may hold.
///
/// The parser itself keeps its stack on the heap, but the AST it builds is a
/// tree of boxes, and dropping, printing and every later pass walk it
/// recursively: `a[i] = 1+1+...+1` with ten thousand terms overflowed the
/// stack of a debug build. Each of these tokens adds at most one level to
/// the tree, so counting them bounds its depth before it is built. Real
/// programs stay far below (the longest example line has about 20).
pub const MAX_NESTING: usize = 256;

fn check_nesting(line: &[Spanned]) -> Option<Diagnostic> {
    let deepening = |t: &Tok| {
        matches!(t, Tok::LParen | Tok::LBracket | Tok::Plus | Tok::Minus | Tok::Star | Tok::Slash | Tok::SlashSlash | Tok::SlashSlashCaret | Tok::Percent)
    };
    let (l, _, r) = line.iter().filter(|t| deepening(&t.1)).nth(MAX_NESTING)?;
    Some(
        Diagnostic::error("E0011", format!("line too complex: more than {MAX_NESTING} operators and brackets"))
            .at(Span::new(*l, *r), "limit exceeded here")
            .note("split the computation into several statements with temporary arrays"),
    )
}

fn split_lines(tokens: &[Spanned]) -> Vec<&[Spanned]> {
    tokens.split_inclusive(|t| t.1 == Tok::Newline).filter(|l| l.len() > 1).collect()
}

#[derive(Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Debug)]
enum Section {
    Program,
    Call,
    Outputs,
    Constraints,
}

impl Section {
    fn name(self) -> &'static str {
        match self {
            Section::Program => "program statement",
            Section::Call => "framework call",
            Section::Outputs => "outputs list",
            Section::Constraints => "constraint",
        }
    }

    fn with_article(self) -> String {
        let article = if self == Section::Outputs { "an" } else { "a" };
        format!("{article} {}", self.name())
    }
}

/// Sections are recognised by content and must come in the order
/// program, call, outputs, constraints (docs/language.md section 2).
fn group_sections(lines: Vec<Line>, diags: &mut Vec<Diagnostic>) -> File {
    // Where to point "no program statements": the first line, else the start.
    let first = lines.first().map(|l| match l {
        Line::Stmt(s) => (Section::Program, s.span),
        Line::Call(c) => (Section::Call, c.span),
        Line::Outputs(o) => (Section::Outputs, o.span),
        Line::Constraint(c) => (Section::Constraints, c.span),
    });
    let mut file = File::default();
    let mut last: Option<(Section, Span)> = None;
    for line in lines {
        let (section, span) = match &line {
            Line::Stmt(s) => (Section::Program, s.span),
            Line::Call(c) => (Section::Call, c.span),
            Line::Outputs(o) => (Section::Outputs, o.span),
            Line::Constraint(c) => (Section::Constraints, c.span),
        };
        if let Some((prev, prev_span)) = last {
            let repeated_single = prev == section && matches!(section, Section::Call | Section::Outputs);
            if section < prev || repeated_single {
                let msg = if repeated_single {
                    format!("a second {} (a file has at most one)", section.name())
                } else {
                    format!("{} after the {}", section.name(), prev.name())
                };
                diags.push(
                    Diagnostic::error("E0008", msg)
                        .at(span, "out of order")
                        .also(prev_span, format!("the {} is here", prev.name()))
                        .note("sections come in the order: program, framework call, outputs, constraints"),
                );
                continue;
            }
        }
        last = Some((section, span));
        match line {
            Line::Stmt(s) => file.program.push(s),
            Line::Call(c) => file.call = Some(c),
            Line::Outputs(o) => file.outputs = Some(o),
            Line::Constraint(c) => file.constraints.push(c),
        }
    }
    if file.program.is_empty() && diags.is_empty() {
        let d = Diagnostic::error("E0009", "the file has no program statements");
        let d = match first {
            Some((section, span)) => d.at(span, format!("the first line is {}, not a program statement", section.with_article())),
            None => d.at(Span::new(0, 0), "the file holds only blank lines and comments"),
        };
        diags.push(d.note("a program is one or more lines like `y[i] = x[i]` and comes first; see docs/language.md section 2"));
    }
    file
}

fn lex_diagnostic(e: &LexError) -> Diagnostic {
    match &e.kind {
        LexErrorKind::UnexpectedChar(c) => Diagnostic::error("E0001", format!("unexpected character {c:?}")).at(e.span, "not part of the .et language"),
        LexErrorKind::IntTooLarge => Diagnostic::error("E0002", "integer literal too large").at(e.span, "does not fit in a 64-bit signed integer"),
        LexErrorKind::FloatTooLarge => Diagnostic::error("E0002", "number literal too large").at(e.span, "does not fit in a 64-bit float"),
        LexErrorKind::BadNumber => Diagnostic::error("E0003", "malformed number").at(e.span, "not a valid number"),
        LexErrorKind::UnterminatedString => Diagnostic::error("E0004", "unterminated string literal").at(e.span, "the closing quote is missing on this line"),
        LexErrorKind::Unclosed(c) => Diagnostic::error("E0005", format!("unclosed `{c}`"))
            .at(e.span, "opened here and never closed")
            .note("inside brackets a statement continues on the next line, so everything after this was read as part of it"),
        LexErrorKind::Custom(msg) => Diagnostic::error("E0007", msg.clone()).at(e.span, "here"),
        LexErrorKind::UnknownFunction(name) => unknown_function_named(name, e.span),
    }
}

fn parse_diagnostic(e: ParseError<usize, Tok, LexError>, source: &str) -> Diagnostic {
    match e {
        ParseError::InvalidToken { location } => Diagnostic::error("E0001", "invalid token").at(Span::new(location, location + 1), "here"),
        ParseError::UnrecognizedEof { location, expected } => {
            Diagnostic::error("E0006", format!("unexpected end of file, expected {}", describe_expected(&expected)))
                .at(Span::new(location, location), "input ends here")
        }
        ParseError::UnrecognizedToken { token: (l, tok, r), expected } => {
            let (span, found) = if tok == Tok::Newline {
                // Point just past the last character of the line.
                let at = source[..l.min(source.len())].trim_end_matches([' ', '\t', '\r']).len();
                (Span::new(at, at), "end of line".to_string())
            } else {
                (Span::new(l, r), tok.to_string())
            };
            if tok == Tok::LParen {
                if let Some(d) = unknown_function(source, l) {
                    return d;
                }
            }
            let mut d = Diagnostic::error("E0006", format!("unexpected {found}, expected {}", describe_expected(&expected)))
                .at(span, format!("expected {}", describe_expected(&expected)));
            if tok == Tok::Newline && expected.iter().any(|x| x == "\"]\"" || x == "\")\"") {
                d = d.note("a bracket opened on this line is never closed");
            }
            d
        }
        ParseError::ExtraToken { token: (l, tok, r) } => Diagnostic::error("E0006", format!("unexpected {tok}")).at(Span::new(l, r), "extra token"),
        ParseError::User { error } => lex_diagnostic(&error),
    }
}

/// `NAME(` where the grammar allows no call: a function the language does
/// not have (`WRAP(..)` of other einsum tools, a typo of `DIMS`). `paren`
/// is the offset of the `(`.
fn unknown_function(source: &str, paren: usize) -> Option<Diagnostic> {
    let before = &source[..paren.min(source.len())];
    let name_start = before.rfind(|c: char| !(c.is_alphanumeric() || c == '_')).map_or(0, |i| i + before[i..].chars().next().map_or(1, char::len_utf8));
    let name = &before[name_start..];
    if name.is_empty() || name.starts_with(|c: char| c.is_ascii_digit()) {
        return None;
    }
    Some(unknown_function_named(name, Span::new(name_start, paren + 1)))
}

/// `NAME(..)` where `NAME` is no function of the language; `span` covers
/// the name and its `(`.
fn unknown_function_named(name: &str, span: Span) -> Diagnostic {
    let d =
        Diagnostic::error("E0006", format!("`{name}(..)` is not part of the Einsum Tuple language")).at(span, "not a function of the language").note(format!(
        "index positions may use `DIMS(..)`, `RANK(..)`, `FLAT(..)` and arithmetic; right-hand sides also `RANDOM(..)` and the functions {} (docs/language.md)",
        Func::names()
    ));
    if name == "WRAP" {
        d.note("there is no wrap-around indexing: an out-of-bounds index skips the term; write the wrap explicitly, e.g. `x[(i + 1) % DIMS(i)]`")
    } else {
        d
    }
}

/// Turns lalrpop's list of expected terminals into readable English.
fn describe_expected(expected: &[String]) -> String {
    let mut items: Vec<String> = expected
        .iter()
        .map(|e| {
            let t = e.trim_matches('"');
            match t {
                "identifier" | "integer" | "number" | "string" | "end of line" => t.to_string(),
                _ => format!("`{t}`"),
            }
        })
        .collect();
    items.sort();
    items.dedup();
    // An expression position lists a dozen starters; say so instead.
    let expr_starters = ["`(`", "`-`", "`DIMS`", "`FLAT`", "`RANDOM`", "`RANK`", "identifier", "integer", "number"];
    if expr_starters.iter().all(|s| items.contains(&s.to_string())) {
        items.retain(|i| !expr_starters.contains(&i.as_str()));
        items.insert(0, "an expression".to_string());
    }
    match items.len() {
        0 => "nothing more".to_string(),
        1 => items.remove(0),
        _ => {
            let last = items.pop().unwrap_or_default();
            format!("{} or {}", items.join(", "), last)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn codes(src: &str) -> Vec<&'static str> {
        match parse_file(src) {
            Ok(_) => Vec::new(),
            Err(d) => d.iter().map(|d| d.code).collect(),
        }
    }

    /// `a[i] = 1+1+...` with `n` plus signs: `n + 1` deepening tokens
    /// (the `[` counts too).
    fn sum_line(n: usize) -> String {
        format!("a[i] = 1{}\n", "+1".repeat(n))
    }

    #[test]
    fn nesting_limit_is_exact() {
        assert_eq!(codes(&sum_line(MAX_NESTING - 1)), Vec::<&str>::new());
        assert_eq!(codes(&sum_line(MAX_NESTING)), ["E0011"]);
    }

    #[test]
    fn very_deep_lines_are_errors_not_stack_overflows() {
        // These overflowed the stack before the limit existed.
        assert_eq!(codes(&sum_line(100_000)), ["E0011"]);
        assert_eq!(codes(&format!("a[i] = {}1\n", "-".repeat(100_000))), ["E0011"]);
        assert!(parse_expr(&"-".repeat(100_000)).is_err());
    }

    #[test]
    fn nesting_error_points_at_the_first_token_over_the_limit() {
        let src = sum_line(MAX_NESTING + 10);
        let d = parse_file(&src).unwrap_err();
        // `a[i] = 1` is 8 bytes, then each `+1` is 2: plus number k (1-based)
        // starts at 8 + 2(k-1); `[` is deepening token 1, so the token after
        // the limit is plus number MAX_NESTING.
        let at = 8 + 2 * (MAX_NESTING - 1);
        assert_eq!(d[0].primary_span(), Some(Span::new(at, at + 1)));
    }

    #[test]
    fn no_program_points_at_the_first_line() {
        let d = parse_file("\n# c\ny, z\n").unwrap_err();
        assert_eq!(d.len(), 1);
        assert_eq!(d[0].code, "E0009");
        assert_eq!(d[0].primary_span(), Some(Span::new(5, 9)));
        let label = &d[0].labels[0].message;
        assert_eq!(label, "the first line is an outputs list, not a program statement");
        let d = parse_file("# only a comment\n").unwrap_err();
        assert_eq!(d[0].primary_span(), Some(Span::new(0, 0)));
    }

    #[test]
    fn float_overflow_is_e0002() {
        assert_eq!(codes("a[i] = 1e999\n"), ["E0002"]);
        assert_eq!(codes("a[i] = 1e308\n"), Vec::<&str>::new());
    }

    #[test]
    fn unterminated_string_is_reported_once() {
        assert_eq!(codes("a[i] = 1\nf(x, p='abc)\ny\n"), ["E0004"]);
    }
}
