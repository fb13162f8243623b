//! Records the commit the tools are built from, for `--version`: a bug
//! report that says `eintup 0.1.0 (9dcbb2d)` names the code that ran.
//! Outside a git checkout (a source archive) the commit is `unknown`.

use std::process::Command;

fn git(args: &[&str]) -> Option<String> {
    let out = Command::new("git").args(args).output().ok()?;
    out.status.success().then(|| String::from_utf8_lossy(&out.stdout).trim().to_string()).filter(|s| !s.is_empty())
}

fn main() {
    let commit = git(&["rev-parse", "--short=12", "HEAD"]).unwrap_or_else(|| "unknown".to_string());
    // A new commit moves HEAD or the branch it points to. Only paths that
    // exist: cargo takes a missing one (a checkout without `packed-refs`)
    // as changed, and rebuilt the tools on every build.
    for what in ["HEAD", "refs/heads", "packed-refs"] {
        if let Some(p) = git(&["rev-parse", "--git-path", what]).filter(|p| std::path::Path::new(p).exists()) {
            println!("cargo:rerun-if-changed={p}");
        }
    }
    println!("cargo:rerun-if-changed=build.rs");
    println!("cargo:rustc-env=EINTUP_COMMIT={commit}");
}
