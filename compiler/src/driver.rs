//! What every stage and tool shares: the source file being compiled (so
//! diagnostics from any stage can quote it), and [`Failure`], the outcome
//! of a command that did not succeed, one kind per exit code of docs/architecture.md
//! section 5. The process side (panics, signals, `exit`) is the tools'
//! (`eintup_tools::process`).

use et_grammar::diag::{render_all, Diagnostic};
use std::fmt;
use std::path::{Path, PathBuf};

/// Exit codes (docs/architecture.md section 5).
pub mod exit {
    pub const OK: i32 = 0;
    /// `check` found a configuration whose outputs differ from the
    /// framework's; `etopt --verify-diagnostics` found diagnostics that
    /// differ from the expected ones.
    pub const CHECK_FAILED: i32 = 1;
    /// The user's input is wrong.
    pub const USER: i32 = 2;
    /// A requested backend or framework is not available.
    pub const UNAVAILABLE: i32 = 3;
    /// A bug in eintup.
    pub const INTERNAL: i32 = 70;
}

/// Most work one run may do unless the user raises it (`--max-work N`,
/// docs/limits.md): the points a compiled backend's loop nests visit, or
/// the instantiations the interpreter enumerates. 2^40 (about 1.1e12) is
/// about 20 minutes of host code at 10^9 points per second and seconds
/// on a GPU, above every benchmark at its largest size (a 4096^3 matmul is
/// 6.9e10 points), and far below the 10^18 a few characters of `.et` can
/// ask for (`y[i % DIMS(a)] += x[j % DIMS(a)]` with large `i`, `j`).
pub const DEFAULT_MAX_WORK: u64 = 1 << 40;

/// `--max-work none`: no limit. The work counters saturate in `u128`
/// (an unbounded loop counts as 2^63 or more), so this one value must mean
/// "no limit" rather than "2^64 - 1", or `none` would still refuse.
pub const NO_WORK_LIMIT: u64 = u64::MAX;

/// Whether `total` (work in either counter's unit) is allowed under
/// `limit` (inclusive; [`NO_WORK_LIMIT`] allows everything).
pub fn within_work_limit(total: u128, limit: u64) -> bool {
    limit == NO_WORK_LIMIT || total <= u128::from(limit)
}

/// E0318: running this configuration would do more work than `limit`;
/// `span` is the statement doing the most (`stmt_work` of `total`), `what`
/// the unit counted ("loop iterations", "instantiations").
pub fn work_refusal(span: et_grammar::Span, stmt_work: u128, total: u128, limit: u64, what: &str) -> Diagnostic {
    Diagnostic::error("E0318", format!("this configuration needs {total} {what}, more than the work limit of {limit}"))
        .at(span, format!("this statement alone needs {stmt_work}"))
        .note("choose smaller dims (--bind or constraints), or raise the limit with --max-work N (docs/limits.md)")
}

/// The largest source (`.et`, printed `et` or `loop` IR) a tool reads, so a
/// FIFO, `/dev/zero` or a runaway file is refused before memory runs out
/// (docs/limits.md, "Files"): the largest printed loop module of the
/// examples and benchmarks is well under a megabyte.
pub const MAX_SOURCE_BYTES: u64 = 64 << 20;

/// A source file held in memory for the whole compilation, so diagnostics
/// from any stage can quote it.
#[derive(Clone, Debug)]
pub struct Source {
    pub path: PathBuf,
    /// Name used in diagnostics (the path as the user wrote it).
    pub name: String,
    pub text: String,
}

impl Source {
    /// Reads a file; `-` is standard input (named `<stdin>` in
    /// diagnostics), as `mlir-opt` and most Unix tools read it.
    pub fn load(path: &Path) -> Result<Source, Failure> {
        let stdin = path.as_os_str() == "-";
        let name = if stdin { "<stdin>".to_string() } else { path.display().to_string() };
        let bytes = if stdin {
            eintup_tensor::infile::read_stream(std::io::stdin().lock(), MAX_SOURCE_BYTES)
        } else {
            eintup_tensor::infile::read_regular(path, MAX_SOURCE_BYTES)
        };
        let bytes = bytes.map_err(|e| Failure::user(format!("{name}: error: cannot read file: {e}")))?;
        match String::from_utf8(bytes) {
            // A UTF-8 byte order mark (some Windows editors write one) is
            // not part of the program.
            Ok(text) => Ok(Source { path: path.to_path_buf(), name, text: text.strip_prefix('\u{feff}').map(str::to_string).unwrap_or(text) }),
            Err(e) => {
                let valid = e.utf8_error().valid_up_to();
                let text = String::from_utf8_lossy(e.as_bytes()).into_owned();
                let src = Source { path: path.to_path_buf(), name, text };
                let at = src.text.char_indices().nth(String::from_utf8_lossy(&e.as_bytes()[..valid]).chars().count());
                let at = at.map_or(valid, |(i, _)| i);
                let d = Diagnostic::error("E0010", "the file is not valid UTF-8").at(et_grammar::Span::new(at, at + 1), "invalid byte sequence here");
                Err(src.failure(vec![d]))
            }
        }
    }

    pub fn from_string(name: &str, text: &str) -> Source {
        Source { path: PathBuf::from(name), name: name.to_string(), text: text.to_string() }
    }

    /// Renders diagnostics against this file as a user error.
    pub fn failure(&self, diags: Vec<Diagnostic>) -> Failure {
        Failure::User(render_all(&diags, &self.name, &self.text))
    }
}

/// Why a command did not succeed; each kind maps to one exit code.
#[derive(Debug)]
pub enum Failure {
    /// Wrong input: rendered message, exit 2.
    User(String),
    /// Backend or framework missing: one-line reason, exit 3.
    Unavailable(String),
    /// `check` found invalid rows (the table was already printed), exit 1.
    CheckFailed,
    /// A bug: exit 70.
    Internal(String),
}

impl Failure {
    pub fn user(msg: impl Into<String>) -> Failure {
        Failure::User(msg.into())
    }

    pub fn exit_code(&self) -> i32 {
        match self {
            Failure::User(_) => exit::USER,
            Failure::Unavailable(_) => exit::UNAVAILABLE,
            Failure::CheckFailed => exit::CHECK_FAILED,
            Failure::Internal(_) => exit::INTERNAL,
        }
    }
}

impl fmt::Display for Failure {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Failure::User(m) => write!(f, "{}", m.trim_end()),
            Failure::Unavailable(m) => write!(f, "error: {}", m.trim_end()),
            Failure::CheckFailed => write!(f, "check failed: some configurations differ from the framework"),
            Failure::Internal(m) => write!(f, "internal compiler error: {}\nthis is a bug in eintup; please report it", m.trim_end()),
        }
    }
}

/// `1 index`, `2 indices`: a count with its noun, for messages.
pub fn count(n: usize, one: &str, many: &str) -> String {
    format!("{n} {}", if n == 1 { one } else { many })
}
