//! Output files (`.npy` results, `config.json`, a bundle's two files):
//! written under a fresh temporary name beside the target, then renamed
//! over it. A reader never sees half a file, a failed write (a full disk, a
//! file size limit) leaves the old file as it was, and a symlink already at
//! the target is replaced, never followed, so a tool's `--out DIR` cannot
//! be made to write outside DIR.

use std::fs::{File, OpenOptions};
use std::io;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};

/// A fresh name beside `path` for its temporary: `.NAME.PID-N.tmp`.
pub fn temporary_beside(path: &Path) -> PathBuf {
    static COUNTER: AtomicU64 = AtomicU64::new(0);
    let name = path.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default();
    let n = COUNTER.fetch_add(1, Ordering::Relaxed);
    path.with_file_name(format!(".{name}.{}-{n}.tmp", std::process::id()))
}

/// A new file at `tmp`, filled by `write` (`create_new` fails on anything
/// at `tmp`, a symlink included); removed again if `write` fails.
fn write_new(tmp: &Path, write: impl FnOnce(File) -> io::Result<()>) -> io::Result<()> {
    let file = OpenOptions::new().write(true).create_new(true).open(tmp)?;
    let done = write(file);
    if done.is_err() {
        let _ = std::fs::remove_file(tmp);
    }
    done
}

/// Writes `path` as a new file through `write`.
pub fn replace(path: &Path, write: impl FnOnce(File) -> io::Result<()>) -> io::Result<()> {
    replace_all(vec![(path, Box::new(write))])
}

/// A file's content, written by a function.
pub type Writer<'a> = Box<dyn FnOnce(File) -> io::Result<()> + 'a>;

/// The writer of `bytes`.
pub fn bytes(bytes: &[u8]) -> Writer<'_> {
    Box::new(move |mut f| io::Write::write_all(&mut f, bytes))
}

/// Writes several files that belong together (a bundle's manifest and
/// PTX): every one is written under its temporary name before any
/// replaces its old file, so a failed write changes none of them.
pub fn replace_all(files: Vec<(&Path, Writer<'_>)>) -> io::Result<()> {
    let remove = |done: &[(&Path, PathBuf)]| done.iter().for_each(|(_, t)| drop(std::fs::remove_file(t)));
    let mut written = Vec::with_capacity(files.len());
    for (path, write) in files {
        let tmp = temporary_beside(path);
        if let Err(e) = write_new(&tmp, write) {
            remove(&written);
            return Err(e);
        }
        written.push((path, tmp));
    }
    for (i, (path, tmp)) in written.iter().enumerate() {
        if let Err(e) = std::fs::rename(tmp, path) {
            remove(&written[i..]);
            return Err(e);
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Write;

    #[test]
    fn a_link_at_the_target_is_replaced_not_followed() {
        let dir = std::env::temp_dir().join(format!("etrt-outfile-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        std::fs::write(dir.join("precious"), b"keep").unwrap();
        std::os::unix::fs::symlink(dir.join("precious"), dir.join("out.npy")).unwrap();
        replace(&dir.join("out.npy"), |mut f| f.write_all(b"new")).unwrap();
        assert_eq!(std::fs::read(dir.join("precious")).unwrap(), b"keep");
        assert!(!std::fs::symlink_metadata(dir.join("out.npy")).unwrap().file_type().is_symlink());
        assert_eq!(std::fs::read(dir.join("out.npy")).unwrap(), b"new");
        // A failed write leaves the old file and no temporary.
        let failed = replace(&dir.join("out.npy"), |_| Err(io::Error::other("full")));
        assert!(failed.is_err());
        assert_eq!(std::fs::read(dir.join("out.npy")).unwrap(), b"new");
        let mut names: Vec<_> = std::fs::read_dir(&dir).unwrap().map(|e| e.unwrap().file_name()).collect();
        names.sort();
        assert_eq!(names, ["out.npy", "precious"]);
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
