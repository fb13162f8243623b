//! Diagnostics shared by every stage of the compiler.
//!
//! A [`Diagnostic`] is plain data (code, message, labelled spans, notes);
//! rendering goes through `codespan-reporting` so every stage prints errors
//! the same way: a `file:line:col` header, the source line and a caret.
//! Error codes are stable: tests and users may match on them.

use crate::span::{line_col, Span};
use codespan_reporting::diagnostic::{Diagnostic as CsDiagnostic, Label as CsLabel};
use codespan_reporting::files::SimpleFile;
use codespan_reporting::term::{self, Chars, Config};

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Severity {
    Error,
    Warning,
    Note,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Label {
    pub span: Span,
    pub message: String,
    /// The primary label is the one the `file:line:col` header points at.
    pub primary: bool,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Diagnostic {
    pub severity: Severity,
    /// Stable code such as `E0101`; see docs/diagnostics.md.
    pub code: &'static str,
    pub message: String,
    pub labels: Vec<Label>,
    pub notes: Vec<String>,
}

impl Diagnostic {
    pub fn error(code: &'static str, message: impl Into<String>) -> Diagnostic {
        Diagnostic {
            severity: Severity::Error,
            code,
            message: message.into(),
            labels: Vec::new(),
            notes: Vec::new(),
        }
    }

    /// A warning: printed like an error, but the command goes on.
    pub fn warning(code: &'static str, message: impl Into<String>) -> Diagnostic {
        Diagnostic { severity: Severity::Warning, ..Diagnostic::error(code, message) }
    }

    /// Adds the primary label (the location the error is reported at).
    pub fn at(mut self, span: Span, message: impl Into<String>) -> Diagnostic {
        self.labels.push(Label { span, message: message.into(), primary: true });
        self
    }

    /// Adds a secondary label (related location, e.g. a reason).
    pub fn also(mut self, span: Span, message: impl Into<String>) -> Diagnostic {
        self.labels.push(Label { span, message: message.into(), primary: false });
        self
    }

    pub fn note(mut self, note: impl Into<String>) -> Diagnostic {
        self.notes.push(note.into());
        self
    }

    /// The span of the primary label, if any.
    pub fn primary_span(&self) -> Option<Span> {
        self.labels.iter().find(|l| l.primary).map(|l| l.span)
    }

    /// Renders as text: `file:line:col: error[CODE]: message`, then the
    /// annotated source snippet. Plain text (no colour) so output is stable.
    pub fn render(&self, file_name: &str, source: &str) -> String {
        let mut out = String::new();
        let kind = match self.severity {
            Severity::Error => "error",
            Severity::Warning => "warning",
            Severity::Note => "note",
        };
        match self.primary_span() {
            Some(span) => {
                let (line, col) = line_col(source, span.start);
                out.push_str(&format!("{file_name}:{line}:{col}: {kind}[{}]: {}\n", self.code, self.message));
            }
            None => out.push_str(&format!("{file_name}: {kind}[{}]: {}\n", self.code, self.message)),
        }
        let file = SimpleFile::new(file_name, source);
        let severity = match self.severity {
            Severity::Error => codespan_reporting::diagnostic::Severity::Error,
            Severity::Warning => codespan_reporting::diagnostic::Severity::Warning,
            Severity::Note => codespan_reporting::diagnostic::Severity::Note,
        };
        let labels = self
            .labels
            .iter()
            .map(|l| {
                let range = clamp(l.span, source.len());
                let label = if l.primary { CsLabel::primary((), range) } else { CsLabel::secondary((), range) };
                label.with_message(l.message.clone())
            })
            .collect();
        let cs = CsDiagnostic::new(severity)
            .with_code(self.code)
            .with_message(self.message.clone())
            .with_labels(labels)
            .with_notes(self.notes.clone());
        let config = Config { chars: Chars::ascii(), ..Config::default() };
        match term::emit_into_string(&config, &file, &cs) {
            // codespan's first line repeats our header; keep only the snippet.
            Ok(text) => {
                // It also ends with blank lines; `render_all` separates
                // diagnostics itself.
                let body: String = text.split_inclusive('\n').skip(1).collect();
                out.push_str(body.trim_end());
                out.push('\n');
            }
            Err(e) => out.push_str(&format!("  (could not render source snippet: {e})\n")),
        }
        out
    }
}

fn clamp(span: Span, len: usize) -> std::ops::Range<usize> {
    let start = span.start.min(len);
    let end = span.end.clamp(start, len);
    start..end
}

/// Renders a list of diagnostics, one after another.
pub fn render_all(diags: &[Diagnostic], file_name: &str, source: &str) -> String {
    diags.iter().map(|d| d.render(file_name, source)).collect::<Vec<_>>().join("\n")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn render_has_header_caret_and_no_trailing_blank_lines() {
        let src = "a[i] = b[i] $\n";
        let d = Diagnostic::error("E0001", "unexpected character '$'")
            .at(Span::new(12, 13), "not part of the .et language")
            .note("a note");
        let text = d.render("f.et", src);
        // Column 13: twelve characters precede the `$`.
        assert!(text.starts_with("f.et:1:13: error[E0001]: unexpected character '$'\n"), "{text}");
        assert!(text.contains("^ not part of the .et language"), "{text}");
        assert!(text.ends_with("= a note\n"), "{text:?}");
        // Two diagnostics are separated by exactly one blank line.
        let both = render_all(&[d.clone(), d], "f.et", src);
        assert_eq!(both.matches("\n\nf.et:1:13").count(), 1, "{both:?}");
    }

    #[test]
    fn spans_past_the_end_do_not_panic() {
        let d = Diagnostic::error("E0006", "x").at(Span::new(50, 60), "far away");
        assert!(d.render("f.et", "ab\n").starts_with("f.et:2:1:"));
    }
}
