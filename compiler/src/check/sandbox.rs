//! What the framework bridge's process is given: no more than it needs.
//!
//! The bridge runs a call a `.et` file chose (vetted by [`super::policy`]),
//! so it is treated as untrusted (docs/check.md, "The sandbox"):
//! - its working directory is a fresh private directory (mode 0700), which
//!   is also `HOME` and `TMPDIR`; arrays go in and results come out there,
//!   the bridge refuses paths outside it, and on Linux it confines its own
//!   writes to it with Landlock (`scripts/framework_sandbox.py`);
//! - its environment is rebuilt from a short list instead of inherited, so
//!   tokens, keys and credentials in the user's environment never reach it;
//! - stdin carries requests only (the bridge points fd 0 at /dev/null after
//!   taking the pipe), stdout responses only.

use crate::driver::Failure;
use std::ffi::OsString;
use std::os::unix::fs::DirBuilderExt;
use std::path::{Path, PathBuf};
use std::process::Command;

/// Variables passed through from the user's environment when set: what
/// Python needs to find itself and TensorFlow (`PYTHONPATH`, libraries),
/// the locale, and TensorFlow's own switches. Nothing else is inherited.
const PASSED_THROUGH: &[&str] = &[
    "PATH",
    "LANG",
    "LC_ALL",
    "LC_CTYPE",
    "PYTHONPATH",
    "PYTHONHOME",
    "LD_LIBRARY_PATH",
    "TF_CPP_MIN_LOG_LEVEL",
    "TF_ENABLE_ONEDNN_OPTS",
];

/// A private scratch directory, removed with everything in it on drop.
#[derive(Debug)]
pub struct WorkDir(PathBuf);

impl WorkDir {
    /// Creates `eintup-check-PID-K` in the system's temporary directory.
    /// `create` fails on an existing name, so a directory or link planted
    /// under a predictable name is never reused.
    pub fn new() -> Result<WorkDir, Failure> {
        let base = std::env::temp_dir();
        for k in 0..1000u32 {
            let p = base.join(format!("eintup-check-{}-{k}", std::process::id()));
            if std::fs::DirBuilder::new().mode(0o700).create(&p).is_ok() {
                return Ok(WorkDir(p));
            }
        }
        Err(Failure::Internal(format!("cannot create a private scratch directory in {}", base.display())))
    }

    pub fn path(&self) -> &Path {
        &self.0
    }
}

impl Drop for WorkDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// Sets `cmd`'s working directory and environment as described above.
pub fn confine(cmd: &mut Command, work: &WorkDir) {
    confine_with(cmd, work.path(), |k| std::env::var_os(k));
}

/// [`confine`] with the environment explicit, for tests.
fn confine_with(cmd: &mut Command, dir: &Path, env: impl Fn(&str) -> Option<OsString>) {
    cmd.current_dir(dir).env_clear();
    for k in PASSED_THROUGH {
        if let Some(v) = env(k) {
            cmd.env(k, v);
        }
    }
    // A user-site TensorFlow (`pip install --user`) lives below the real
    // HOME; keep finding it although HOME moves.
    if let Some(base) = env("PYTHONUSERBASE").or_else(|| env("HOME").map(|h| Path::new(&h).join(".local").into_os_string())) {
        cmd.env("PYTHONUSERBASE", base);
    }
    cmd.env("HOME", dir).env("TMPDIR", dir).env("TF_CPP_MIN_LOG_LEVEL", env("TF_CPP_MIN_LOG_LEVEL").unwrap_or_else(|| "3".into()));
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::BTreeMap;
    use std::os::unix::fs::PermissionsExt;

    fn env_of(cmd: &Command) -> BTreeMap<String, String> {
        cmd.get_envs().filter_map(|(k, v)| Some((k.to_str()?.to_string(), v?.to_str()?.to_string()))).collect()
    }

    #[test]
    fn secrets_are_not_inherited_and_home_is_private() {
        let user: BTreeMap<&str, &str> = [
            ("PATH", "/usr/bin"),
            ("HOME", "/home/u"),
            ("AWS_SECRET_ACCESS_KEY", "s3cr3t"),
            ("GITHUB_TOKEN", "ghp_x"),
            ("SSH_AUTH_SOCK", "/run/agent"),
            ("PYTHONPATH", "/opt/tf"),
            ("PYTHONSTARTUP", "/home/u/evil.py"),
            ("LD_PRELOAD", "/tmp/x.so"),
        ]
        .into();
        let mut cmd = Command::new("python");
        confine_with(&mut cmd, Path::new("/w"), |k| user.get(k).map(OsString::from));
        let env = env_of(&cmd);
        let want: BTreeMap<String, String> = [
            ("PATH", "/usr/bin"),
            ("PYTHONPATH", "/opt/tf"),
            ("PYTHONUSERBASE", "/home/u/.local"),
            ("HOME", "/w"),
            ("TMPDIR", "/w"),
            ("TF_CPP_MIN_LOG_LEVEL", "3"),
        ]
        .into_iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect();
        assert_eq!(env, want);
        assert_eq!(cmd.get_current_dir(), Some(Path::new("/w")));
    }

    #[test]
    fn the_workdir_is_private_and_removed() {
        let w = WorkDir::new().unwrap();
        let p = w.path().to_path_buf();
        assert_eq!(std::fs::metadata(&p).unwrap().permissions().mode() & 0o777, 0o700);
        std::fs::write(p.join("x.npy"), b"x").unwrap();
        let other = WorkDir::new().unwrap();
        assert_ne!(other.path(), p);
        drop(w);
        assert!(!p.exists());
    }
}
