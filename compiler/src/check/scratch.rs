//! The scratch directory of a `check` run, and the janitor that removes it
//! when eintup dies without running its destructors (SIGKILL, the OOM
//! killer, a timeout's kill).
//!
//! Every framework call's arrays and results live in one private directory,
//! `$TMPDIR/eintup-check-XXXXXX` ([`crate::tempdir::private`]: mode 0700,
//! a random name created exclusively); each bridge process works in a
//! fresh subdirectory of it (`p0`, then `p1` after a call was stopped and
//! the bridge restarted). Dropping [`Scratch`] removes it all.
//!
//! So that it also goes when eintup is killed, a janitor starts with it:
//! `/bin/sh` in its own session (a Ctrl-C or a kill of eintup's process
//! group does not reach it, and it ignores INT, TERM and HUP), waiting for
//! end of file on a pipe whose write ends only eintup and the bridge
//! processes hold ([`Scratch::janitor_fd`], passed on by
//! [`super::sandbox::tie_to_parent`]). The kernel closes them when those
//! processes end, however they end; then the janitor removes the directory.
//! It waits for the bridges too because a bridge dies with eintup
//! (`PR_SET_PDEATHSIG`) a moment after eintup's files are closed: removing
//! the directory while a bridge still writes would leave files behind.
//! An unlinked directory or `O_TMPFILE` would not do: nothing can be created
//! in a removed directory, and the bridge hands TensorFlow file paths.

use crate::driver::Failure;
use std::os::fd::{AsRawFd, RawFd};
use std::os::unix::fs::DirBuilderExt;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};

/// The janitor's script: `$1` is the directory. `cat` inherits the ignored
/// signals and returns at end of file.
const JANITOR_SCRIPT: &str = "trap '' INT TERM HUP; cat >/dev/null; rm -rf -- \"$1\"";

/// A private scratch directory, removed on drop, or by the janitor when
/// eintup and its bridges are gone.
#[derive(Debug)]
pub struct Scratch {
    root: PathBuf,
    /// `None` when `/bin/sh` could not be started: the directory is then
    /// removed on drop only.
    janitor: Option<Child>,
}

impl Scratch {
    /// Creates `eintup-check-XXXXXX` in the system's temporary directory
    /// and starts its janitor. A directory that cannot be made (a missing,
    /// unwritable or full `TMPDIR`) is the user's error, naming it.
    pub fn new() -> Result<Scratch, Failure> {
        // Kept: removed by `drop` or the janitor, whichever comes first.
        let root = crate::tempdir::private("check").map_err(|e| Failure::user(format!("eintup: error: {e}")))?.keep();
        let janitor = start_janitor(&root);
        Ok(Scratch { root, janitor })
    }

    pub fn path(&self) -> &Path {
        &self.root
    }

    /// A new empty subdirectory for bridge process number `n` (mode 0700).
    pub fn process_dir(&self, n: usize) -> Result<PathBuf, Failure> {
        let d = self.root.join(format!("p{n}"));
        std::fs::DirBuilder::new()
            .mode(0o700)
            .create(&d)
            .map_err(|e| Failure::Internal(format!("cannot create the scratch directory {}: {e}", d.display())))?;
        Ok(d)
    }

    /// The write end of the janitor's pipe, for a bridge process to hold.
    pub fn janitor_fd(&self) -> Option<RawFd> {
        self.janitor.as_ref().and_then(|j| j.stdin.as_ref()).map(|s| s.as_raw_fd())
    }
}

fn start_janitor(root: &Path) -> Option<Child> {
    let mut cmd = Command::new("/bin/sh");
    cmd.arg("-c").arg(JANITOR_SCRIPT).arg("eintup-check-janitor").arg(root);
    cmd.stdin(Stdio::piped()).stdout(Stdio::null()).stderr(Stdio::null()).current_dir("/").env_clear().env("PATH", "/usr/bin:/bin");
    // SAFETY: setsid is async-signal-safe and touches no memory.
    unsafe {
        cmd.pre_exec(|| {
            if libc::setsid() < 0 {
                return Err(std::io::Error::last_os_error());
            }
            Ok(())
        });
    }
    cmd.spawn().ok()
}

impl Drop for Scratch {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.root);
        if let Some(mut j) = self.janitor.take() {
            // End of file: the janitor finds the directory gone and exits.
            // Reaped if it does so promptly; it never holds eintup up.
            drop(j.stdin.take());
            for _ in 0..100 {
                if !matches!(j.try_wait(), Ok(None)) {
                    break;
                }
                std::thread::sleep(std::time::Duration::from_millis(10));
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::PermissionsExt;

    #[test]
    fn the_scratch_is_private_and_removed() {
        let s = Scratch::new().unwrap();
        let p = s.path().to_path_buf();
        assert_eq!(std::fs::metadata(&p).unwrap().permissions().mode() & 0o777, 0o700);
        let d = s.process_dir(0).unwrap();
        std::fs::write(d.join("x.npy"), b"x").unwrap();
        assert!(s.process_dir(0).is_err(), "a process directory is never reused");
        let other = Scratch::new().unwrap();
        assert_ne!(other.path(), p);
        drop(s);
        assert!(!p.exists());
    }

    #[test]
    fn the_janitor_removes_the_scratch_when_its_pipe_closes() {
        let mut s = Scratch::new().unwrap();
        let p = s.path().to_path_buf();
        std::fs::write(s.process_dir(0).unwrap().join("x.npy"), b"x").unwrap();
        // As when eintup is killed: the pipe closes, no destructor runs.
        let mut j = s.janitor.take().expect("the janitor started");
        drop(j.stdin.take());
        let status = j.wait().unwrap();
        assert!(status.success(), "{status:?}");
        assert!(!p.exists(), "{} survived", p.display());
        drop(s);
    }
}
