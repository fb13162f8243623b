//! `--verify-diagnostics`: the input states, in comments, the diagnostics
//! compiling it must produce, and etopt checks that exactly those are
//! produced, in the manner of `mlir-opt`:
//!
//! ```text
//! // expected-error@+1 {{unknown buffer `nope`}}
//!   %0 = load nope[0] : f64
//! ```
//!
//! A directive is `expected-KIND[-re][@WHERE] {{TEXT}}` right after the
//! input language's comment marker (`//` in `.etir`, `#` in `.et`). KIND
//! is `error`, `warning` or `note` (the diagnostic's severity); WHERE is
//! absent (the comment's own line), `+N` / `-N` (N lines below / above),
//! `above` / `below` (the nearest line above / below that holds no
//! directive) or `unknown` (a diagnostic with no location). TEXT must occur
//! in the diagnostic's header as rendered after the severity, `[CODE]:
//! message` (so it may be part of the message, or pin the code), or in the
//! whole message of a diagnostic that has no code; with `-re`, each
//! `{{re}}` inside TEXT is a regular expression and the rest is literal.
//! Each expectation matches one diagnostic. A malformed directive is an
//! error of the input (exit 2), not a mismatch.

use super::Lang;
use eintup::driver::exit;
use eintup::passes::PassError;
use et_grammar::diag::{Diagnostic, Severity};
use et_grammar::span::line_col;

/// Where a diagnostic is reported: a line of the input, or nowhere.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum At {
    Line(usize),
    Unknown,
}

/// A diagnostic the compiler produced, reduced to what is matched.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Produced {
    pub severity: Severity,
    /// Line and column of the primary label.
    pub at: Option<(usize, usize)>,
    /// `[CODE]: message`, or a message without a code.
    pub text: String,
}

impl Produced {
    fn located(d: &Diagnostic, source: &str) -> Produced {
        let at = d.primary_span().map(|s| line_col(source, s.start));
        Produced { severity: d.severity, at, text: format!("[{}]: {}", d.code, d.message) }
    }

    fn unlocated(message: &str) -> Produced {
        Produced { severity: Severity::Error, at: None, text: message.to_string() }
    }

    fn line(&self) -> At {
        self.at.map_or(At::Unknown, |(l, _)| At::Line(l))
    }
}

/// The diagnostics of a failed compilation of `source`, or `None` for an
/// internal error (a bug, which no input can expect).
pub fn produced(e: &PassError, source: &str) -> Option<Vec<Produced>> {
    match e {
        PassError::User(diags) => Some(diags.iter().map(|d| Produced::located(d, source)).collect()),
        PassError::Message(m) => Some(vec![Produced::unlocated(m)]),
        PassError::Internal(_) => None,
    }
}

/// Diagnostics of a compilation that went on (warnings), as produced.
pub fn produced_warnings(diags: &[Diagnostic], source: &str) -> Vec<Produced> {
    diags.iter().map(|d| Produced::located(d, source)).collect()
}

/// One expectation of the input.
#[derive(Debug)]
struct Expected {
    severity: Severity,
    at: At,
    /// The text between the outer braces, as written (for messages).
    text: String,
    pattern: Pattern,
    /// Where the directive is written (line, column), for messages.
    written: (usize, usize),
}

/// What a diagnostic's text must contain.
#[derive(Debug)]
enum Pattern {
    Text(String),
    /// `expected-KIND-re`.
    Regex(regex_lite::Regex),
}

impl Pattern {
    fn matches(&self, text: &str) -> bool {
        match self {
            Pattern::Text(t) => text.contains(t.as_str()),
            Pattern::Regex(r) => r.is_match(text),
        }
    }
}

const DIRECTIVE: &str = "expected-";

/// Where a directive starts on `line` (at `expected-`), if it holds one:
/// the directive follows the comment marker, blanks between.
fn directive_start(line: &str, lang: Lang) -> Option<usize> {
    line.match_indices(DIRECTIVE).map(|(p, _)| p).find(|&p| line[..p].trim_end().ends_with(lang.comment()))
}

/// The lines a directive's `@WHERE` counts from (1-based).
struct Around {
    line: usize,
    /// The nearest lines above and below without a directive (`@above`,
    /// `@below`, as `mlir-opt`: a run of directives may stand above or
    /// below the line they are about).
    above: Option<usize>,
    below: Option<usize>,
}

/// The expectations written in `source`, or for a malformed directive a
/// problem at its place.
fn expectations(source: &str, lang: Lang) -> (Vec<Expected>, Vec<Problem>) {
    let lines: Vec<&str> = source.lines().collect();
    let starts: Vec<Option<usize>> = lines.iter().map(|l| directive_start(l, lang)).collect();
    let plain = |j: &usize| starts[*j].is_none();
    let mut found = Vec::new();
    let mut problems = Vec::new();
    for (i, (line, start)) in lines.iter().zip(&starts).enumerate() {
        let Some(pos) = *start else { continue };
        let written = (i + 1, line[..pos].chars().count() + 1);
        let around = Around { line: i + 1, above: (0..i).rev().find(plain).map(|j| j + 1), below: (i + 1..lines.len()).find(plain).map(|j| j + 1) };
        match directive(&line[pos + DIRECTIVE.len()..], &around) {
            Ok((severity, at, text, pattern)) => found.push(Expected { severity, at, text, pattern, written }),
            Err(why) => problems.push(Problem { at: Some(written), message: format!("malformed expected diagnostic: {why}"), malformed: true }),
        }
    }
    (found, problems)
}

/// Parses `KIND[-re][@WHERE] {{TEXT}}` (what follows `expected-`).
fn directive(rest: &str, around: &Around) -> Result<(Severity, At, String, Pattern), String> {
    let kind_end = rest.find(|c: char| !c.is_ascii_alphabetic() && c != '-').unwrap_or(rest.len());
    let kind = &rest[..kind_end];
    let (name, re) = kind.strip_suffix("-re").map_or((kind, false), |k| (k, true));
    let severity = match name {
        "error" => Severity::Error,
        "warning" => Severity::Warning,
        "note" => Severity::Note,
        _ => return Err(format!("`expected-{kind}` is not one of expected-error, expected-warning, expected-note (each also with `-re`)")),
    };
    let rest = &rest[kind_end..];
    let (at, rest) = match rest.strip_prefix('@') {
        None => (At::Line(around.line), rest),
        Some(r) => {
            let (w, after) = r.split_at(r.find(char::is_whitespace).unwrap_or(r.len()));
            (place(w, around)?, after)
        }
    };
    let text = rest
        .trim()
        .strip_prefix("{{")
        .and_then(|r| r.strip_suffix("}}"))
        .ok_or_else(|| "the expected text must follow as `{{text}}`, ending the line".to_string())?;
    let pattern = if re { Pattern::Regex(regex_of(text)?) } else { Pattern::Text(text.to_string()) };
    Ok((severity, at, text.to_string(), pattern))
}

/// `@WHERE`, without the `@`.
fn place(w: &str, around: &Around) -> Result<At, String> {
    let nearest = |line: Option<usize>| line.map(At::Line).ok_or_else(|| format!("`@{w}`: no line {w} it is free of directives"));
    match w {
        "unknown" => return Ok(At::Unknown),
        "above" => return nearest(around.above),
        "below" => return nearest(around.below),
        _ => {}
    }
    let bad = || format!("`@{w}` is not `@+N`, `@-N` within the file, `@above`, `@below` or `@unknown`");
    let (sign, n) = match (w.strip_prefix('+'), w.strip_prefix('-')) {
        (Some(n), _) => (1, n),
        (_, Some(n)) => (-1, n),
        _ => return Err(bad()),
    };
    if n.is_empty() || !n.bytes().all(|b| b.is_ascii_digit()) {
        return Err(bad());
    }
    let target = n.parse::<i64>().ok().map(|n| around.line as i64 + sign * n).filter(|&t| t >= 1);
    Ok(At::Line(target.ok_or_else(bad)? as usize))
}

/// The regular expression of an `-re` text, by `mlir-opt`'s rule: each
/// `{{re}}` (up to the first `}}` after it) is a regular expression, the
/// text around them is literal. The search is unanchored, as `contains`.
fn regex_of(text: &str) -> Result<regex_lite::Regex, String> {
    let mut pattern = String::new();
    let mut rest = text;
    while let Some(open) = rest.find("{{") {
        pattern.push_str(&regex_lite::escape(&rest[..open]));
        let after = &rest[open + 2..];
        let close = after.find("}}").ok_or_else(|| format!("a regex `{{{{` with no `}}}}` after it in `{{{{{text}}}}}`"))?;
        let re = &after[..close];
        // Checked alone, so the error names the part that is wrong.
        regex_lite::Regex::new(re).map_err(|e| format!("invalid regex `{{{{{re}}}}}`: {}", e.to_string().trim_end()))?;
        pattern.push_str(&format!("(?:{re})"));
        rest = &after[close + 2..];
    }
    pattern.push_str(&regex_lite::escape(rest));
    regex_lite::Regex::new(&pattern).map_err(|e| format!("invalid regex `{pattern}`: {e}"))
}

/// A mismatch, or a malformed directive, reported at a place of the input.
struct Problem {
    at: Option<(usize, usize)>,
    message: String,
    malformed: bool,
}

fn kind(s: Severity) -> &'static str {
    match s {
        Severity::Error => "error",
        Severity::Warning => "warning",
        Severity::Note => "note",
    }
}

/// The outcome of [`check`].
#[derive(Debug, PartialEq, Eq)]
pub struct Verdict {
    /// One rendered line per problem, in file order.
    pub lines: Vec<String>,
    /// A directive did not parse: the input is wrong, whatever was
    /// produced.
    pub malformed: bool,
}

impl Verdict {
    /// 0 when the check passed, 1 for a mismatch (as `mlir-opt`), 2 for a
    /// malformed directive (a wrong input, as every other).
    pub fn exit_code(&self) -> i32 {
        if self.malformed {
            exit::USER
        } else if self.lines.is_empty() {
            exit::OK
        } else {
            exit::CHECK_FAILED
        }
    }
}

/// Checks the diagnostics produced for `source` (a chunk, padded to its
/// place in the file named `name`) against its expectations: one rendered
/// line per problem, `name:line:col: error: ...`, for each diagnostic no
/// expectation matches, each expectation no diagnostic matched and each
/// malformed directive.
pub fn check(name: &str, source: &str, lang: Lang, produced: &[Produced]) -> Verdict {
    let (mut expected, mut problems) = expectations(source, lang);
    for p in produced {
        let hit = expected.iter().position(|e| e.severity == p.severity && e.at == p.line() && e.pattern.matches(&p.text));
        match hit {
            Some(i) => {
                expected.remove(i);
            }
            None => problems.push(Problem { at: p.at, message: format!("unexpected {}{}", kind(p.severity), unexpected_text(&p.text)), malformed: false }),
        }
    }
    for e in expected {
        let at = match e.at {
            At::Line(l) => format!("on line {l}"),
            At::Unknown => "with no location".to_string(),
        };
        problems.push(Problem {
            at: Some(e.written),
            message: format!("expected {} {at} was not produced: {{{{{}}}}}", kind(e.severity), e.text),
            malformed: false,
        });
    }
    problems.sort_by_key(|p| p.at);
    let lines = problems
        .iter()
        .map(|p| match p.at {
            Some((l, c)) => format!("{name}:{l}:{c}: error: {}", p.message),
            None => format!("{name}: error: {}", p.message),
        })
        .collect();
    Verdict { lines, malformed: problems.iter().any(|p| p.malformed) }
}

/// `[E0101]: msg` reads as the rendered header (`error[E0101]: msg`);
/// a message without a code follows a colon.
fn unexpected_text(text: &str) -> String {
    if text.starts_with('[') {
        text.to_string()
    } else {
        format!(": {text}")
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use et_grammar::Span;

    fn error_at(line: usize, code: &'static str, msg: &str) -> Produced {
        Produced { severity: Severity::Error, at: Some((line, 1)), text: format!("[{code}]: {msg}") }
    }

    #[test]
    fn directives_parse() {
        let src = "a\n// expected-error@+1 {{x y}}\n// expected-note@-1 {{n}}\n  //expected-warning {{w}}\n// expected-error@unknown {{u}}\n";
        let (e, p) = expectations(src, Lang::Ir);
        assert!(p.is_empty());
        let got: Vec<(Severity, At, &str)> = e.iter().map(|e| (e.severity, e.at, e.text.as_str())).collect();
        assert_eq!(
            got,
            vec![
                (Severity::Error, At::Line(3), "x y"),
                (Severity::Note, At::Line(2), "n"),
                (Severity::Warning, At::Line(4), "w"),
                (Severity::Error, At::Unknown, "u"),
            ]
        );
        assert_eq!(e[2].written, (4, 5));
        // `#` in .et, after code too; `//` is not a comment there.
        let (e, _) = expectations("y[i] = q[i]  # expected-error {{unknown array}}\n// expected-error {{no}}\n", Lang::Et);
        assert_eq!(e.len(), 1);
        assert_eq!(e[0].at, At::Line(1));
        // Not after a comment marker: not a directive (a CHECK line naming one).
        let (e, p) = expectations("// CHECK: expected-error@+1 {{x}}\n", Lang::Ir);
        assert!(e.is_empty() && p.is_empty());
    }

    #[test]
    fn malformed_directives_are_problems() {
        for bad in [
            "// expected-eror {{x}}",
            "// expected-error@+x {{x}}",
            "// expected-error@-5 {{x}}",
            "// expected-error x",
            "// expected-error {{x}} tail",
            "// expected-error-er {{x}}",
            "// expected-error@below {{x}}",
            "// expected-error@above {{x}}",
            "// expected-error-re {{a {{[0-9}} b}}",
            "// expected-error-re {{a {{[0-9]+ b}}",
        ] {
            let (e, p) = expectations(bad, Lang::Ir);
            assert!(e.is_empty() && p.len() == 1 && p[0].malformed, "{bad}");
        }
        let (_, p) = expectations("// expected-error-re {{a {{(}} b}}", Lang::Ir);
        assert!(p[0].message.starts_with("malformed expected diagnostic: invalid regex `{{(}}`"), "{}", p[0].message);
        // A malformed directive makes the verdict exit 2, mismatches or not.
        let v = check("f", "// expected-error@+x {{x}}\n", Lang::Ir, &[error_at(1, "E1", "m")]);
        assert_eq!(v.lines.len(), 2);
        assert_eq!((v.malformed, v.exit_code()), (true, exit::USER));
        assert_eq!(check("f", "", Lang::Ir, &[error_at(1, "E1", "m")]).exit_code(), exit::CHECK_FAILED);
        assert_eq!(check("f", "", Lang::Ir, &[]).exit_code(), exit::OK);
    }

    #[test]
    fn above_and_below_skip_the_lines_of_directives() {
        let src = "a\n// expected-error@below {{1}}\n// expected-note@below {{2}}\nb\n// expected-error@above {{3}}\n  // expected-error-re@above {{4}}\n\n// expected-warning@above {{5}}\n";
        let (e, p) = expectations(src, Lang::Ir);
        assert!(p.is_empty());
        let at: Vec<At> = e.iter().map(|e| e.at).collect();
        // A blank line holds no directive: the last one is about it.
        assert_eq!(at, [At::Line(4), At::Line(4), At::Line(4), At::Line(4), At::Line(7)]);
        // In `.et`, a line of code with a trailing directive holds one.
        let (e, _) = expectations("a = b\nc = d  # expected-error {{x}}\n# expected-error@above {{y}}\n", Lang::Et);
        assert_eq!(e[1].at, At::Line(1));
    }

    #[test]
    fn re_texts_are_literal_around_their_regexes() {
        let m = |text: &str, against: &str| regex_of(text).unwrap().is_match(against);
        // MLIR's example: the braces delimit the regex, the rest is literal.
        assert!(m("some {{[0-9]+}} text", "[E1]: some 42 text here"));
        assert!(!m("some {{[0-9]+}} text", "some x text"));
        // Literal parts keep regex metacharacters as text.
        assert!(m("a[i] (x.y) {{.*}}$", "[E1]: a[i] (x.y) anything$"));
        assert!(!m("a.b", "axb"));
        // No braces: plain text, searched anywhere; `\d` is ASCII digits.
        assert!(m("unknown", "[E0101]: unknown array"));
        assert!(m("{{\\d+}} cells", "has 12 cells"));
        // Alternation stays inside its own braces.
        assert!(m("x {{a|b}} y", "x b y") && !m("x {{a|b}} y", "b y"));
        let src = "// expected-error-re@+1 {{[E0640]: unexpected character '{{.}}'}}\nx\n";
        assert_eq!(check("f", src, Lang::Ir, &[error_at(2, "E0640", "unexpected character '$'")]).lines, Vec::<String>::new());
        let r = check("f", src, Lang::Ir, &[error_at(2, "E0640", "unexpected character '$$'")]).lines;
        assert_eq!(r[0], "f:1:4: error: expected error on line 2 was not produced: {{[E0640]: unexpected character '{{.}}'}}");
    }

    #[test]
    fn matching_is_by_severity_line_and_text() {
        let src = "\n// expected-error@+1 {{[E0640]: unexpected}}\nx\n// expected-error@unknown {{does not verify}}\n";
        let ok = [error_at(3, "E0640", "unexpected character '$'"), Produced::unlocated("f: error: the IR does not verify: bad")];
        assert_eq!(check("f", src, Lang::Ir, &ok), Verdict { lines: vec![], malformed: false });
        // Wrong line, wrong code, wrong severity: each is one unexpected
        // diagnostic and leaves the expectation unmatched.
        let wrong = [
            vec![error_at(4, "E0640", "unexpected character '$'")],
            vec![error_at(3, "E0641", "unexpected character '$'")],
            vec![Produced { severity: Severity::Warning, ..error_at(3, "E0640", "unexpected character '$'") }],
        ];
        for w in wrong {
            let r = check("f", "\n// expected-error@+1 {{[E0640]: unexpected}}\nx\n", Lang::Ir, &w).lines;
            assert_eq!(r.len(), 2, "{r:?}");
            assert!(r.iter().any(|l| l.starts_with("f:2:4: error: expected error on line 3 was not produced: {{[E0640]: unexpected}}")), "{r:?}");
        }
        let r = check("f", "", Lang::Ir, &[error_at(3, "E0640", "m"), Produced::unlocated("plain")]).lines;
        assert_eq!(r, vec!["f: error: unexpected error: plain", "f:3:1: error: unexpected error[E0640]: m"]);
        // Each expectation matches one diagnostic.
        let r = check("f", "// expected-error@+1 {{m}}\n", Lang::Ir, &[error_at(2, "E1", "m"), error_at(2, "E1", "m")]).lines;
        assert_eq!(r.len(), 1);
    }

    #[test]
    fn located_diagnostics_use_the_primary_label() {
        let d = Diagnostic::error("E0101", "unknown array `q`").also(Span::new(0, 1), "elsewhere").at(Span::new(4, 5), "here");
        let p = produced(&PassError::User(vec![d]), "ab\ncdef\n").unwrap();
        assert_eq!(p, vec![Produced { severity: Severity::Error, at: Some((2, 2)), text: "[E0101]: unknown array `q`".into() }]);
        assert_eq!(produced(&PassError::Internal("bug".into()), ""), None);
    }
}
