//! The process side of the exit-code contract (docs/architecture.md section 5): a
//! tool's body runs under [`run_main`], which turns its [`Failure`] or a
//! panic into a message and an exit code, and gives SIGPIPE its Unix
//! meaning.

use eintup::driver::{exit, Failure};

/// Runs a tool's body, turning failures and panics into the exit-code
/// contract. A panic is a bug and is reported as an internal error (70),
/// never as a Rust backtrace.
pub fn run_main(body: impl FnOnce() -> Result<(), Failure> + std::panic::UnwindSafe) -> ! {
    run_main_status(|| body().map(|()| exit::OK))
}

/// [`run_main`] for a body that reports some failures itself and goes on
/// (`etopt --split-input-file`, one input chunk after another): it returns
/// the exit code they add up to.
pub fn run_main_status(body: impl FnOnce() -> Result<i32, Failure> + std::panic::UnwindSafe) -> ! {
    set_signals();
    std::panic::set_hook(Box::new(|info| {
        let msg = info
            .payload()
            .downcast_ref::<&str>()
            .map(|s| s.to_string())
            .or_else(|| info.payload().downcast_ref::<String>().cloned())
            .unwrap_or_else(|| "unknown panic".into());
        let loc = info.location().map(|l| format!(" at {}:{}", l.file(), l.line())).unwrap_or_default();
        eprintln!("internal compiler error: {msg}{loc}\nthis is a bug in eintup; please report it");
    }));
    // The environment is input too: an unusable EINTUP_HOST_CPU is the
    // user's error (exit 2) before any work, not a fault of the first JIT.
    let body = move || {
        eintup_codegen::HostCpu::Native.resolve().map_err(|e| Failure::user(format!("error: {e}")))?;
        body()
    };
    let code = match std::panic::catch_unwind(body) {
        Ok(Ok(code)) => code,
        Ok(Err(f)) => {
            if !matches!(f, Failure::CheckFailed) {
                eprintln!("{}", et_grammar::diag::for_stderr(&f.to_string()));
            }
            f.exit_code()
        }
        Err(_) => exit::INTERNAL,
    };
    std::process::exit(code)
}

/// `eintup run ... | head` must end quietly, as Unix tools do, when the
/// reader goes away. Rust starts programs with SIGPIPE ignored, which turns
/// a closed pipe into a write error (and `print!` into a panic); the
/// default action ends the process silently instead. A file size limit
/// (`ulimit -f`), whose SIGXFSZ would kill the process midway through a
/// file, becomes a write error (EFBIG) that names the file and leaves the
/// old one (outputs are written under temporary names).
fn set_signals() {
    #[cfg(unix)]
    // SAFETY: called first thing in main, before any thread exists;
    // SIG_DFL and SIG_IGN are valid dispositions for these signals.
    unsafe {
        libc::signal(libc::SIGPIPE, libc::SIG_DFL);
        libc::signal(libc::SIGXFSZ, libc::SIG_IGN);
    }
}
