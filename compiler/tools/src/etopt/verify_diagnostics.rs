//! `--verify-diagnostics`: the input states, in comments, the diagnostics
//! compiling it must produce, and etopt checks that exactly those are
//! produced, in the manner of `mlir-opt`:
//!
//! ```text
//! // expected-error@+1 {{unknown buffer `nope`}}
//!   %0 = load nope[0] : f64
//! ```
//!
//! A directive is `expected-KIND[@WHERE] {{TEXT}}` right after the input
//! language's comment marker (`//` in `.etir`, `#` in `.et`). KIND is
//! `error`, `warning` or `note` (the diagnostic's severity); WHERE is
//! absent (the comment's own line), `+N` / `-N` (N lines below / above)
//! or `unknown` (a diagnostic with no location). TEXT must occur in the
//! diagnostic's header as rendered after the severity, `[CODE]: message`
//! (so it may be part of the message, or pin the code), or in the whole
//! message of a diagnostic that has no code. Each expectation matches one
//! diagnostic.

use super::Lang;
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
#[derive(Clone, Debug, PartialEq, Eq)]
struct Expected {
    severity: Severity,
    at: At,
    text: String,
    /// Where the directive is written (line, column), for messages.
    written: (usize, usize),
}

const DIRECTIVE: &str = "expected-";

/// The expectations written in `source`, or for a malformed directive a
/// problem at its place.
fn expectations(source: &str, lang: Lang) -> (Vec<Expected>, Vec<Problem>) {
    let mut found = Vec::new();
    let mut problems = Vec::new();
    for (i, line) in source.lines().enumerate() {
        // A directive follows the comment marker, blanks between.
        let Some(pos) = line.match_indices(DIRECTIVE).map(|(p, _)| p).find(|&p| line[..p].trim_end().ends_with(lang.comment())) else {
            continue;
        };
        let written = (i + 1, line[..pos].chars().count() + 1);
        match directive(&line[pos + DIRECTIVE.len()..], i + 1) {
            Ok((severity, at, text)) => found.push(Expected { severity, at, text, written }),
            Err(why) => problems.push(Problem { at: Some(written), message: format!("malformed expected diagnostic: {why}") }),
        }
    }
    (found, problems)
}

/// Parses `KIND[@WHERE] {{TEXT}}` (what follows `expected-`) on line `line`.
fn directive(rest: &str, line: usize) -> Result<(Severity, At, String), String> {
    let kind_end = rest.find(|c: char| !c.is_ascii_alphabetic()).unwrap_or(rest.len());
    let severity = match &rest[..kind_end] {
        "error" => Severity::Error,
        "warning" => Severity::Warning,
        "note" => Severity::Note,
        other => return Err(format!("`expected-{other}` is not one of expected-error, expected-warning, expected-note")),
    };
    let rest = &rest[kind_end..];
    let (at, rest) = match rest.strip_prefix('@') {
        None => (At::Line(line), rest),
        Some(r) => {
            let end = r.find(char::is_whitespace).unwrap_or(r.len());
            let at = match &r[..end] {
                "unknown" => At::Unknown,
                w => {
                    let bad = || format!("`@{w}` is not `@+N`, `@-N` or `@unknown` within the file");
                    let (sign, n) = match (w.strip_prefix('+'), w.strip_prefix('-')) {
                        (Some(n), _) => (1, n),
                        (_, Some(n)) => (-1, n),
                        _ => return Err(bad()),
                    };
                    if n.is_empty() || !n.bytes().all(|b| b.is_ascii_digit()) {
                        return Err(bad());
                    }
                    let target = n.parse::<i64>().ok().map(|n| line as i64 + sign * n).filter(|&t| t >= 1);
                    At::Line(target.ok_or_else(bad)? as usize)
                }
            };
            (at, &r[end..])
        }
    };
    let rest = rest.trim();
    let text = rest
        .strip_prefix("{{")
        .and_then(|r| r.strip_suffix("}}"))
        .ok_or_else(|| "the expected text must follow as `{{text}}`, ending the line".to_string())?;
    Ok((severity, at, text.to_string()))
}

/// A mismatch, reported at a place of the input.
struct Problem {
    at: Option<(usize, usize)>,
    message: String,
}

fn kind(s: Severity) -> &'static str {
    match s {
        Severity::Error => "error",
        Severity::Warning => "warning",
        Severity::Note => "note",
    }
}

/// Checks the diagnostics produced for `source` (a chunk, padded to its
/// place in the file named `name`) against its expectations. Returns one
/// rendered line per mismatch, `name:line:col: error: ...`: each
/// diagnostic no expectation matches, each expectation no diagnostic
/// matched, each malformed directive. Empty means the check passed.
pub fn check(name: &str, source: &str, lang: Lang, produced: &[Produced]) -> Vec<String> {
    let (mut expected, mut problems) = expectations(source, lang);
    for p in produced {
        let hit = expected.iter().position(|e| e.severity == p.severity && e.at == p.line() && p.text.contains(&e.text));
        match hit {
            Some(i) => {
                expected.remove(i);
            }
            None => problems.push(Problem { at: p.at, message: format!("unexpected {}{}", kind(p.severity), unexpected_text(&p.text)) }),
        }
    }
    for e in expected {
        let at = match e.at {
            At::Line(l) => format!("on line {l}"),
            At::Unknown => "with no location".to_string(),
        };
        problems.push(Problem { at: Some(e.written), message: format!("expected {} {at} was not produced: {{{{{}}}}}", kind(e.severity), e.text) });
    }
    problems.sort_by_key(|p| p.at);
    problems
        .iter()
        .map(|p| match p.at {
            Some((l, c)) => format!("{name}:{l}:{c}: error: {}", p.message),
            None => format!("{name}: error: {}", p.message),
        })
        .collect()
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
        for bad in ["// expected-eror {{x}}", "// expected-error@+x {{x}}", "// expected-error@-5 {{x}}", "// expected-error x", "// expected-error {{x}} tail"] {
            let (e, p) = expectations(bad, Lang::Ir);
            assert!(e.is_empty() && p.len() == 1, "{bad}");
        }
    }

    #[test]
    fn matching_is_by_severity_line_and_text() {
        let src = "\n// expected-error@+1 {{[E0640]: unexpected}}\nx\n// expected-error@unknown {{does not verify}}\n";
        let ok = [error_at(3, "E0640", "unexpected character '$'"), Produced::unlocated("f: error: the IR does not verify: bad")];
        assert!(check("f", src, Lang::Ir, &ok).is_empty());
        // Wrong line, wrong code, wrong severity: each is one unexpected
        // diagnostic and leaves the expectation unmatched.
        let wrong = [
            vec![error_at(4, "E0640", "unexpected character '$'")],
            vec![error_at(3, "E0641", "unexpected character '$'")],
            vec![Produced { severity: Severity::Warning, ..error_at(3, "E0640", "unexpected character '$'") }],
        ];
        for w in wrong {
            let r = check("f", "\n// expected-error@+1 {{[E0640]: unexpected}}\nx\n", Lang::Ir, &w);
            assert_eq!(r.len(), 2, "{r:?}");
            assert!(r.iter().any(|l| l.starts_with("f:2:4: error: expected error on line 3 was not produced: {{[E0640]: unexpected}}")), "{r:?}");
        }
        let r = check("f", "", Lang::Ir, &[error_at(3, "E0640", "m"), Produced::unlocated("plain")]);
        assert_eq!(r, vec!["f: error: unexpected error: plain", "f:3:1: error: unexpected error[E0640]: m"]);
        // Each expectation matches one diagnostic.
        let r = check("f", "// expected-error@+1 {{m}}\n", Lang::Ir, &[error_at(2, "E1", "m"), error_at(2, "E1", "m")]);
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
