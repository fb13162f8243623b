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
use unicode_width::UnicodeWidthChar;

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
    /// Rendered as its header line alone, without snippet or notes: for a
    /// warning that may come once per eintup on every run (W0301), where a
    /// seven-line snippet each would bury the output.
    pub brief: bool,
}

impl Diagnostic {
    pub fn error(code: &'static str, message: impl Into<String>) -> Diagnostic {
        Diagnostic { severity: Severity::Error, code, message: message.into(), labels: Vec::new(), notes: Vec::new(), brief: false }
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

    /// Renders as the one header line (see [`Diagnostic::brief`]).
    pub fn brief(mut self) -> Diagnostic {
        self.brief = true;
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
                out.push_str(&format!("{file_name}:{line}:{col}: {kind}[{}]: {}\n", self.code, visible_text(&self.message)));
            }
            None => out.push_str(&format!("{file_name}: {kind}[{}]: {}\n", self.code, visible_text(&self.message))),
        }
        if self.brief {
            return out;
        }
        // Long lines are shown as a window around the labels (a minified
        // file must not echo megabytes per error); the header above keeps
        // the true line and column.
        let spans: Vec<Span> = self.labels.iter().map(|l| l.span).collect();
        let (shown, spans) = excerpt(source, &spans);
        // Control and invisible characters are shown escaped, so the
        // terminal never receives them and the caret has a width.
        let (shown, spans) = visible(&shown, &spans);
        let spans = on_base_chars(&shown, &spans);
        let true_location = self.primary_span().map(|s| line_col(source, s.start));
        let source = shown.as_str();
        let file = SimpleFile::new(file_name, source);
        let severity = match self.severity {
            Severity::Error => codespan_reporting::diagnostic::Severity::Error,
            Severity::Warning => codespan_reporting::diagnostic::Severity::Warning,
            Severity::Note => codespan_reporting::diagnostic::Severity::Note,
        };
        let labels = self
            .labels
            .iter()
            .zip(spans)
            .map(|(l, span)| {
                let range = clamp(span, source.len());
                let label = if l.primary { CsLabel::primary((), range) } else { CsLabel::secondary((), range) };
                label.with_message(visible_text(&l.message))
            })
            .collect();
        let cs = CsDiagnostic::new(severity)
            .with_code(self.code)
            .with_message(visible_text(&self.message))
            .with_labels(labels)
            .with_notes(self.notes.iter().map(|n| visible_text(n)).collect());
        let config = Config { chars: Chars::ascii(), ..Config::default() };
        match term::emit_into_string(&config, &file, &cs) {
            // codespan's first line repeats our header; keep only the snippet.
            Ok(text) => {
                // It also ends with blank lines; `render_all` separates
                // diagnostics itself.
                let mut body: String = text.split_inclusive('\n').skip(1).collect();
                // Its `--> file:line:col` counts columns in the window.
                if let (Some((line, col)), Some(arrow)) = (true_location, body.find("--> ")) {
                    let end = body[arrow..].find('\n').map_or(body.len(), |e| arrow + e);
                    body.replace_range(arrow..end, &format!("--> {file_name}:{line}:{col}"));
                }
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

/// Lines longer than this many characters are shown as a window around
/// the labels on them.
pub const MAX_LINE_CHARS: usize = 160;
/// Characters of context kept before a label on a long line.
const WINDOW_BEFORE: usize = 60;

/// The source as snippets show it: every line a label starts or ends on
/// that is longer than [`MAX_LINE_CHARS`] becomes a window of that many
/// characters around its first label (marked `...` where cut); `spans`
/// are mapped into the result. Line numbers do not change.
fn excerpt(source: &str, spans: &[Span]) -> (String, Vec<Span>) {
    let line_of = |o: usize| source.as_bytes()[..o.min(source.len())].iter().filter(|&&b| b == b'\n').count();
    let mut touched: Vec<usize> = spans.iter().flat_map(|s| [line_of(s.start), line_of(s.end)]).collect();
    touched.sort_unstable();
    touched.dedup();
    let mut out = String::with_capacity(source.len().min(1 << 16));
    // Per line: (old start, old end, new start, window in old bytes, bytes added before it).
    type LineMap = (usize, usize, usize, Option<(usize, usize)>, usize);
    let mut map: Vec<LineMap> = Vec::new();
    let mut start = 0;
    for (n, line) in source.split_inclusive('\n').enumerate() {
        let body = line.trim_end_matches('\n');
        let new_start = out.len();
        let long = touched.binary_search(&n).is_ok() && body.chars().count() > MAX_LINE_CHARS;
        if long {
            let first = spans.iter().map(|s| s.start).filter(|&o| o >= start && o <= start + body.len()).min().unwrap_or(start);
            let chars: Vec<(usize, char)> = body.char_indices().collect();
            let at = chars.iter().position(|&(i, _)| start + i >= first).unwrap_or(chars.len());
            let from = at.saturating_sub(WINDOW_BEFORE);
            let to = (from + MAX_LINE_CHARS).min(chars.len());
            let byte = |k: usize| chars.get(k).map_or(body.len(), |&(i, _)| i);
            let (wa, wb) = (byte(from), byte(to));
            let prefix = if from > 0 { "..." } else { "" };
            out.push_str(prefix);
            out.push_str(&body[wa..wb]);
            if to < chars.len() {
                out.push_str("...");
            }
            out.push_str(&line[body.len()..]);
            map.push((start, start + line.len(), new_start, Some((start + wa, start + wb)), prefix.len()));
        } else {
            out.push_str(line);
            map.push((start, start + line.len(), new_start, None, 0));
        }
        start += line.len();
    }
    let remap = |o: usize| -> usize {
        let k = map.partition_point(|&(_, end, ..)| end <= o);
        match map.get(k) {
            Some(&(old, _, new, None, _)) => new + (o - old),
            Some(&(_, _, new, Some((wa, wb)), pre)) => new + pre + (o.clamp(wa, wb) - wa),
            None => out.len() + o.saturating_sub(source.len()),
        }
    };
    let spans = spans.iter().map(|s| Span::new(remap(s.start), remap(s.end.max(s.start)))).collect();
    (out, spans)
}

/// Characters a snippet must not echo as they are: control characters
/// (ESC would drive the terminal, BEL ring it; a CR not ending a line would
/// overwrite it) and invisible ones (zero-width spaces and joiners, bidi
/// controls that reorder the line as "Trojan source" does, the BOM), which
/// would get no caret. Tab and newline are layout, kept.
fn hidden(c: char, next: Option<char>) -> bool {
    match c {
        '\n' | '\t' => false,
        '\r' => next != Some('\n'),
        '\u{ad}'
        | '\u{61c}'
        | '\u{180e}'
        | '\u{200b}'..='\u{200f}'
        | '\u{2028}'..='\u{202e}'
        | '\u{2060}'..='\u{2064}'
        | '\u{2066}'..='\u{206f}'
        | '\u{feff}'
        | '\u{fff9}'..='\u{fffb}' => true,
        c => c.is_control(),
    }
}

/// `text` with every [`hidden`] character written as `\u{XX}`; `spans`
/// mapped onto the result (a span over such a character covers its
/// escape, so the caret is as wide as what is shown).
fn visible(text: &str, spans: &[Span]) -> (String, Vec<Span>) {
    let mut out = String::with_capacity(text.len());
    // (old byte offset, new byte offset) at the start of every escaped char
    // and just after it; offsets between two entries shift alike.
    let mut shifts: Vec<(usize, usize)> = Vec::new();
    let mut chars = text.char_indices().peekable();
    while let Some((i, c)) = chars.next() {
        if hidden(c, chars.peek().map(|&(_, n)| n)) {
            shifts.push((i, out.len()));
            out.push_str(&format!("\\u{{{:x}}}", c as u32));
            shifts.push((i + c.len_utf8(), out.len()));
        } else {
            out.push(c);
        }
    }
    if shifts.is_empty() {
        return (out, spans.to_vec());
    }
    let map = |o: usize| match shifts.partition_point(|&(old, _)| old <= o) {
        0 => o,
        k => {
            let (old, new) = shifts[k - 1];
            new + (o - old)
        }
    };
    let spans = spans.iter().map(|s| Span::new(map(s.start), map(s.end.max(s.start)))).collect();
    (out, spans)
}

/// A character drawn on the one before it, taking no column of its own
/// (a combining mark such as the U+0301 of `e\u{301}`), by the same
/// `unicode-width` table codespan sizes carets with.
fn zero_width(c: char) -> bool {
    c != '\n' && c.width() == Some(0)
}

/// `spans` widened to whole display cells of `text`: a span starting at a
/// zero-width character starts at its base character (the one before, on
/// the same line), and every span takes the zero-width characters after
/// its end along. A span over a combining mark alone would otherwise get no
/// caret (codespan draws one `^` per column); a mark with no base on its
/// line gets the caret of the character after it.
fn on_base_chars(text: &str, spans: &[Span]) -> Vec<Span> {
    let at = |o: usize| text.get(o..).and_then(|t| t.chars().next());
    spans
        .iter()
        .map(|s| {
            let (mut start, mut end) = (s.start.min(text.len()), s.end.max(s.start).min(text.len()));
            while at(start).is_some_and(zero_width) {
                match text[..start].chars().next_back() {
                    Some(b) if b != '\n' => start -= b.len_utf8(),
                    _ => break,
                }
            }
            if at(start).is_some_and(zero_width) {
                // No base: take the first character after the marks.
                end = end.max(start);
                while at(end).is_some_and(zero_width) {
                    end += at(end).map_or(0, char::len_utf8);
                }
                end += at(end).filter(|&c| c != '\n').map_or(0, char::len_utf8);
            }
            while end > start && at(end).is_some_and(zero_width) {
                end += at(end).map_or(0, char::len_utf8);
            }
            Span::new(start, end)
        })
        .collect()
}

/// A message, label or note with [`hidden`] characters escaped.
fn visible_text(text: &str) -> String {
    visible(text, &[]).0
}

/// At most this many diagnostics are rendered (as clang's
/// `-ferror-limit`); the rest are counted in a final note.
pub const MAX_RENDERED: usize = 20;

/// Rendered diagnostics as they go to stderr: coloured when it is a
/// terminal (not with `NO_COLOR` set, nor `TERM=dumb`), as they are
/// otherwise. Files, pipes and tests get the plain text.
pub fn for_stderr(text: &str) -> std::borrow::Cow<'_, str> {
    use std::io::IsTerminal;
    let wanted =
        std::io::stderr().is_terminal() && std::env::var_os("NO_COLOR").is_none_or(|v| v.is_empty()) && std::env::var_os("TERM").is_none_or(|t| t != "dumb");
    if wanted {
        std::borrow::Cow::Owned(colourize(text))
    } else {
        std::borrow::Cow::Borrowed(text)
    }
}

/// ANSI colours for rendered diagnostics (rustc's scheme): the severity
/// and code of each header (`error[E0001]` bold red, `warning` bold
/// yellow, `note` bold cyan), caret and underline lines (the primary's
/// `^` bold red, secondary `-` bold blue) and the `-->`/`|` gutter in
/// blue. The text is otherwise unchanged.
pub fn colourize(text: &str) -> String {
    const RESET: &str = "\x1b[0m";
    let mut out = String::with_capacity(text.len() + text.len() / 4);
    for line in text.split_inclusive('\n') {
        let (body, nl) = line.strip_suffix('\n').map_or((line, ""), |b| (b, "\n"));
        let header = [("error", "\x1b[1;31m"), ("warning", "\x1b[1;33m"), ("note", "\x1b[1;36m")].iter().find_map(|(word, colour)| {
            // `file:line:col: error[CODE]: message` or `error: message`.
            let at = body.find(&format!("{word}[")).or_else(|| body.find(&format!("{word}:"))).filter(|&i| i == 0 || body[..i].ends_with(": "))?;
            let end = body[at..].find(':').map(|e| at + e)?;
            Some((at, end, *colour))
        });
        if let Some((at, end, colour)) = header {
            out.push_str(&format!("{}{colour}{}{RESET}{}{nl}", &body[..at], &body[at..end], &body[end..]));
            continue;
        }
        let trimmed = body.trim_start();
        if let Some(rest) = trimmed.strip_prefix("--> ") {
            out.push_str(&format!("{}\x1b[1;34m-->{RESET} {rest}{nl}", &body[..body.len() - trimmed.len()]));
        } else if let Some(bar) =
            body.find(" | ").or_else(|| body.strip_suffix(" |").map(|b| b.len())).filter(|&i| body[..i].trim().chars().all(|c| c.is_ascii_digit()))
        {
            let (gutter, rest) = body.split_at(bar + 2);
            let marks = rest.trim_start();
            let rest = if marks.starts_with(['^', '-']) {
                let colour = if marks.starts_with('^') { "\x1b[1;31m" } else { "\x1b[1;34m" };
                format!("{}{colour}{marks}{RESET}", &rest[..rest.len() - marks.len()])
            } else {
                rest.to_string()
            };
            out.push_str(&format!("\x1b[1;34m{gutter}{RESET}{rest}{nl}"));
        } else {
            out.push_str(line);
        }
    }
    out
}

/// Renders a list of diagnostics, one after another: the first
/// [`MAX_RENDERED`], then how many more there were.
pub fn render_all(diags: &[Diagnostic], file_name: &str, source: &str) -> String {
    let mut text = String::new();
    let mut prev: Option<&Diagnostic> = None;
    for d in diags.iter().take(MAX_RENDERED) {
        // A blank line separates snippets; brief ones follow each other.
        if prev.is_some_and(|p| !(p.brief && d.brief)) {
            text.push('\n');
        }
        text.push_str(&d.render(file_name, source));
        prev = Some(d);
    }
    if diags.len() > MAX_RENDERED {
        let more = diags.len() - MAX_RENDERED;
        text.push_str(&format!("\n{file_name}: note: {more} more error{} not shown (the first {MAX_RENDERED} are)\n", if more == 1 { "" } else { "s" }));
    }
    text
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn brief_diagnostics_are_one_line_each() {
        let src = "a[i] = b[i]\nDIMS(i) IN [1,2]\n";
        let w = |m: &str| Diagnostic::warning("W0301", m).at(Span::new(12, 28), "a label").note("a note").brief();
        let text = render_all(&[w("one"), w("two")], "f.et", src);
        assert_eq!(text, "f.et:2:1: warning[W0301]: one\nf.et:2:1: warning[W0301]: two\n");
    }

    #[test]
    fn colours_mark_severity_gutter_and_carets_and_nothing_else() {
        let src = "x[i] = 1\ny[j] = 2\n";
        let text = Diagnostic::error("E0001", "bad").at(Span::new(9, 13), "here").render("f.et", src);
        let c = colourize(&text);
        assert!(c.starts_with("f.et:2:1: \x1b[1;31merror[E0001]\x1b[0m: bad\n"), "{c:?}");
        assert!(c.contains("\x1b[1;34m-->\x1b[0m f.et:2:1"), "{c:?}");
        assert!(c.contains("\x1b[1;31m^^^^ here\x1b[0m"), "{c:?}");
        // Without the escapes, the text is the plain rendering.
        let plain: String = c.split("\x1b[").enumerate().map(|(i, part)| if i == 0 { part } else { part.split_once('m').map_or(part, |(_, r)| r) }).collect();
        assert_eq!(plain, text);
        assert!(colourize("warning[W0301]: w").starts_with("\x1b[1;33mwarning[W0301]\x1b[0m: w"));
    }

    #[test]
    fn render_has_header_caret_and_no_trailing_blank_lines() {
        let src = "a[i] = b[i] $\n";
        let d = Diagnostic::error("E0001", "unexpected character '$'").at(Span::new(12, 13), "not part of the .et language").note("a note");
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
    fn long_lines_show_a_window_around_the_label() {
        let src = format!("a[i] = {}$ + 1\nb[i] = 2\n", "x".repeat(10_000));
        let at = src.find('$').unwrap();
        let d = Diagnostic::error("E0001", "unexpected character '$'").at(Span::new(at, at + 1), "here");
        let text = d.render("f.et", &src);
        assert!(text.starts_with("f.et:1:10008: error[E0001]"), "{text}");
        assert!(text.len() < 1000, "{} bytes", text.len());
        assert!(text.contains("...xxx"), "{text}");
        // The caret still points at the `$` of the window.
        assert!(text.contains("--> f.et:1:10008"), "{text}");
        let line = text.lines().find(|l| l.starts_with("1 |")).unwrap();
        let caret = text.lines().find(|l| l.contains("^ here")).unwrap();
        assert_eq!(line.find('$'), caret.find('^'), "{text}");
    }

    #[test]
    fn at_most_max_rendered_diagnostics_then_a_count() {
        let src = "a\n";
        let d = Diagnostic::error("E0001", "bad").at(Span::new(0, 1), "here");
        let all = vec![d; MAX_RENDERED + 5];
        let text = render_all(&all, "f.et", src);
        assert_eq!(text.matches("error[E0001]").count(), MAX_RENDERED);
        assert!(text.ends_with("f.et: note: 5 more errors not shown (the first 20 are)\n"), "{text}");
        assert_eq!(render_all(&all[..2], "f.et", src).matches("error[E0001]").count(), 2);
    }

    /// The display column of the first `^` under the snippet line, and
    /// how many there are (codespan draws one per column).
    fn caret_of(text: &str) -> (usize, usize) {
        let caret = text.lines().find(|l| l.contains('^')).unwrap_or_else(|| panic!("no caret: {text}"));
        let from = caret.find('^').unwrap();
        (caret[..from].chars().count(), caret[from..].chars().take_while(|&c| c == '^').count())
    }

    #[test]
    fn a_span_at_a_combining_mark_has_a_caret_under_its_base() {
        // `e\u{301}` shows as one column, `é`; a span over the mark alone
        // (what the lexer reports as an unexpected character) or starting
        // at it is drawn under the `e`.
        let src = "a[i] = e\u{301}[i] + \u{301}x[i]\n\u{301}b[i] = 1\n";
        let line = "1 | a[i] = e\u{301}[i] + \u{301}x[i]";
        // display columns, the mark taking none
        let col = |prefix: &str| unicode_width::UnicodeWidthStr::width(&line[..line.find(prefix).unwrap()]);
        let marks: Vec<usize> = src.match_indices('\u{301}').map(|(i, _)| i).collect();
        // (span, display column of the caret in `line`, carets)
        let e = col("e\u{301}");
        for (span, want_col, want_n) in [
            (Span::new(marks[0], marks[0] + 2), e, 1),
            (Span::new(marks[0], marks[0]), e, 1),
            (Span::new(marks[0], marks[0] + 3), e, 2),
            (Span::new(marks[0] - 1, marks[0]), e, 1),
            // a mark after a space: under the space it is drawn on
            (Span::new(marks[1], marks[1] + 2), col(" \u{301}x"), 1),
        ] {
            let text = Diagnostic::error("E0001", "bad").at(span, "here").render("f.et", src);
            assert!(text.contains(line), "{text}");
            assert_eq!(caret_of(&text), (want_col, want_n), "{span:?}: {text}");
        }
        // a mark starting a line has no base: the caret goes under the next character
        let text = Diagnostic::error("E0001", "bad").at(Span::new(marks[2], marks[2] + 2), "here").render("f.et", src);
        let (c, n) = caret_of(&text);
        let shown = text.lines().find(|l| l.starts_with("2 |")).unwrap();
        assert_eq!((c, n), (unicode_width::UnicodeWidthStr::width(&shown[..shown.find('b').unwrap()]), 1), "{text}");
    }

    #[test]
    fn control_and_invisible_characters_are_escaped_with_a_caret() {
        // ESC and BEL from the source never reach the terminal; a
        // zero-width space gets a caret as wide as its escape.
        let src = "y[i] = x[i] \u{1b}[31m + \u{7} 2\nz[i] = \u{200b}1\r\n";
        for (c, esc) in [('\u{1b}', "\\u{1b}"), ('\u{7}', "\\u{7}"), ('\u{200b}', "\\u{200b}")] {
            let at = src.find(c).unwrap();
            let d = Diagnostic::error("E0001", format!("unexpected character {c:?}")).at(Span::new(at, at + c.len_utf8()), "here");
            let text = d.render("f.et", src);
            assert!(!text.chars().any(|x| x != '\n' && (x.is_control() || x == '\u{200b}')), "{text:?}");
            let line = text.lines().find(|l| l.contains(esc) && l.contains(" | ")).unwrap_or_else(|| panic!("{text}"));
            let caret = text.lines().find(|l| l.contains("^")).unwrap();
            // The caret starts under the escape and is as wide as it.
            assert_eq!(caret.find('^'), line.find(esc), "{text}");
            assert_eq!(caret.matches('^').count(), esc.len(), "{text}");
        }
        // A message echoing such a character is escaped too; a CR ending a
        // line is layout.
        assert_eq!(visible_text("a\u{1b}b\r\nc\rd"), "a\\u{1b}b\r\nc\\u{d}d");
    }

    #[test]
    fn spans_past_the_end_do_not_panic() {
        let d = Diagnostic::error("E0006", "x").at(Span::new(50, 60), "far away");
        assert!(d.render("f.et", "ab\n").starts_with("f.et:2:1:"));
    }
}
