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
//!   taking the pipe), stdout responses only;
//! - it dies with eintup: `PR_SET_PDEATHSIG` sends it SIGKILL when eintup
//!   ends, however it ends, and it holds the scratch janitor's pipe
//!   ([`super::scratch`]) so that its own death lets the janitor clean up.
//!   (The signal follows the *thread* that started the child: `check`
//!   starts bridges from its main thread.)

use std::ffi::OsString;
use std::os::fd::RawFd;
use std::os::unix::process::CommandExt;
use std::path::Path;
use std::process::Command;

/// The descriptor number the bridge process holds the janitor's pipe on.
pub const JANITOR_FD: RawFd = 3;

/// Variables passed through from the user's environment when set: what
/// Python needs to find itself and TensorFlow (`PYTHONPATH`, libraries),
/// the locale, and TensorFlow's own switches. Nothing else is inherited.
const PASSED_THROUGH: &[&str] =
    &["PATH", "LANG", "LC_ALL", "LC_CTYPE", "PYTHONPATH", "PYTHONHOME", "LD_LIBRARY_PATH", "TF_CPP_MIN_LOG_LEVEL", "TF_ENABLE_ONEDNN_OPTS"];

/// Sets `cmd`'s working directory and environment as described above.
pub fn confine(cmd: &mut Command, dir: &Path) {
    confine_with(cmd, dir, |k| std::env::var_os(k));
}

/// Makes the child die with eintup (SIGKILL) and hold `janitor` (the write
/// end of the scratch janitor's pipe) as descriptor [`JANITOR_FD`].
pub fn tie_to_parent(cmd: &mut Command, janitor: Option<RawFd>) {
    let parent = std::process::id() as libc::pid_t;
    // SAFETY: between fork and exec only async-signal-safe calls (prctl,
    // getppid, dup2, fcntl), no allocation.
    unsafe {
        cmd.pre_exec(move || {
            if libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL as libc::c_ulong, 0, 0, 0) != 0 {
                return Err(std::io::Error::last_os_error());
            }
            // eintup died before the prctl: no signal would ever come.
            if libc::getppid() != parent {
                return Err(std::io::Error::other("eintup exited while starting the framework bridge"));
            }
            if let Some(fd) = janitor {
                // dup2 onto itself keeps close-on-exec; clear it instead.
                let r = if fd == JANITOR_FD { libc::fcntl(fd, libc::F_SETFD, 0) } else { libc::dup2(fd, JANITOR_FD) };
                if r < 0 {
                    return Err(std::io::Error::last_os_error());
                }
            }
            Ok(())
        });
    }
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
}
