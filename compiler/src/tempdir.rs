//! Private temporary directories, for every file a tool generates on the
//! way (ptxas's input and output, `check`'s arrays): mode 0700 whatever the
//! umask, a random name created exclusively (a directory or link another
//! user planted under a predictable name is never used), removed when the
//! [`TempDir`] is dropped, on every exit path that unwinds.

pub use tempfile::TempDir;

/// A new private directory in the system's temporary directory (`TMPDIR`,
/// else `/tmp`), named `eintup-PURPOSE-XXXXXX`. An error names the
/// directory and says how to choose another: a missing, unwritable or
/// full `TMPDIR` is the user's to fix, not a compiler bug.
pub fn private(purpose: &str) -> Result<TempDir, String> {
    let base = std::env::temp_dir();
    // tempfile's directories follow the umask (0755 under 022): 0700 asked for.
    let private = std::os::unix::fs::PermissionsExt::from_mode(0o700);
    tempfile::Builder::new()
        .prefix(&format!("eintup-{purpose}-"))
        .permissions(private)
        .tempdir_in(&base)
        .map_err(|e| format!("cannot create a private temporary directory in {} ({e}); set TMPDIR to a writable directory", base.display()))
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::PermissionsExt;

    #[test]
    fn a_private_directory_is_0700_fresh_and_removed() {
        let a = private("test").unwrap();
        let b = private("test").unwrap();
        assert_ne!(a.path(), b.path());
        assert_eq!(std::fs::metadata(a.path()).unwrap().permissions().mode() & 0o777, 0o700);
        let p = a.path().to_path_buf();
        std::fs::write(p.join("f"), b"x").unwrap();
        drop(a);
        assert!(!p.exists());
    }
}
