//! The on-disk cache of compiled code (`EINTUP_CACHE_DIR`; docs/python.md,
//! "The cache", and docs/cli.md): the Python package's kernels and the
//! host programs of `eintup run` ([`crate::host_cache`]). One
//! directory per compiled specialisation, named by a hash of
//! its key and holding the key's full text, so that a hash collision is a
//! miss, never a wrong kernel, and a checksum of every other file, so that
//! a damaged file is never used (a loop module that does not match its
//! library would run that code on the wrong buffers). The cache is best
//! effort: an entry that cannot be read is removed and recompiled, and a
//! failed write only costs the next process a compile.
//!
//! It trusts only what the current user alone can have written ([`trust`]:
//! a cache another user can write to would run their code): anything else
//! is refused with one warning, and the program compiled without it.
//! Stores make their directories 0700 and files 0600 whatever the umask.
//!
//! It is bounded (`EINTUP_CACHE_MAX_BYTES`, default [`DEFAULT_MAX_BYTES`]):
//! a hit marks its entry used (the key file's modification time), and each
//! store removes the least recently used entries beyond the bound, as
//! ccache does, and what killed processes left half-written.

mod trust;

use std::fs;
use std::io::{self, Read};
use std::os::unix::fs::DirBuilderExt;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};

use trust::{Distrust, Unusable};

/// The file holding an entry's full key.
const KEY_FILE: &str = "key";
/// The file holding the checksums of the entry's other files.
const SUMS_FILE: &str = "checksums";

/// The bound of the cache's size without `EINTUP_CACHE_MAX_BYTES`: room
/// for hundreds of `cpu` entries (a library of tens of kilobytes) or
/// dozens of large bundles.
pub const DEFAULT_MAX_BYTES: u64 = 1 << 30;

/// Private directories of a store or a discard older than this were left
/// by a process that died in between: removed by the next prune.
const STALE_SECS: u64 = 3600;

pub struct DiskCache {
    dir: PathBuf,
    max_bytes: u64,
}

/// FNV-1a, 64 bits: a stable name for a key (std's hashers may change
/// between Rust versions; a collision only costs a miss, see `KEY_FILE`).
fn fnv1a(text: &str) -> u64 {
    fnv1a_bytes(text.as_bytes())
}

fn fnv1a_bytes(bytes: &[u8]) -> u64 {
    bytes.iter().fold(0xcbf2_9ce4_8422_2325, |h, b| (h ^ u64::from(*b)).wrapping_mul(0x0000_0100_0000_01b3))
}

/// `path relative to dir: checksum` of every file under `dir` but the key
/// and the checksums, one a line, sorted; every directory and file checked
/// as the user's alone on the way, and read without following links.
fn checksums(dir: &Path) -> Result<String, Unusable> {
    fn walk(root: &Path, dir: &Path, out: &mut Vec<String>) -> Result<(), Unusable> {
        trust::check_own(dir, &fs::symlink_metadata(dir)?)?;
        for e in fs::read_dir(dir)? {
            let p = e?.path();
            let meta = fs::symlink_metadata(&p)?;
            if meta.is_dir() {
                walk(root, &p, out)?;
                continue;
            }
            let mut bytes = Vec::new();
            trust::open_own(&p)?.read_to_end(&mut bytes)?;
            let rel = p.strip_prefix(root).map_err(io::Error::other)?.to_string_lossy().into_owned();
            if rel != KEY_FILE && rel != SUMS_FILE {
                out.push(format!("{rel}: {:016x} {}", fnv1a_bytes(&bytes), bytes.len()));
            }
        }
        Ok(())
    }
    let mut lines = Vec::new();
    walk(dir, dir, &mut lines)?;
    lines.sort();
    Ok(lines.join("\n"))
}

/// A file of a trusted entry, read without following a link.
fn read_own(path: &Path) -> Result<String, Unusable> {
    let mut text = String::new();
    trust::open_own(path)?.read_to_string(&mut text)?;
    Ok(text)
}

/// One warning per process for a distrusted cache root, and one for
/// distrusted entries: the program is compiled all the same.
static ROOT_WARNED: AtomicBool = AtomicBool::new(false);
static ENTRY_WARNED: AtomicBool = AtomicBool::new(false);

fn warn_once(flag: &AtomicBool, text: String) {
    if !flag.swap(true, Ordering::Relaxed) {
        eprintln!("eintup: warning: {text}");
    }
}

/// The environment variable naming the cache's directory (empty: no cache).
pub const DIR_ENV: &str = "EINTUP_CACHE_DIR";

impl DiskCache {
    /// Where the cache is: `$EINTUP_CACHE_DIR` if set (`None` when it is
    /// empty: the cache is off), else `$XDG_CACHE_HOME/eintup`, else
    /// `$HOME/.cache/eintup` (`None` without a home).
    pub fn dir_from_env() -> Option<PathBuf> {
        if let Some(dir) = std::env::var_os(DIR_ENV) {
            return (!dir.is_empty()).then(|| PathBuf::from(dir));
        }
        let base = std::env::var_os("XDG_CACHE_HOME").filter(|d| !d.is_empty()).map(PathBuf::from);
        let base = base.or_else(|| std::env::var_os("HOME").filter(|d| !d.is_empty()).map(|h| PathBuf::from(h).join(".cache")))?;
        Some(base.join("eintup"))
    }

    /// The cache in `dir`, bounded by `EINTUP_CACHE_MAX_BYTES` (bytes; an
    /// unreadable value is an error naming it).
    pub fn new(dir: PathBuf) -> Result<DiskCache, String> {
        let max_bytes = match std::env::var("EINTUP_CACHE_MAX_BYTES") {
            Ok(v) if !v.trim().is_empty() => {
                v.trim().parse::<u64>().map_err(|_| format!("EINTUP_CACHE_MAX_BYTES=`{}`: expected a number of bytes", v.escape_debug()))?
            }
            _ => DEFAULT_MAX_BYTES,
        };
        Ok(DiskCache { dir, max_bytes })
    }

    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// The cache's root as a path without links, if it exists and only
    /// the user can have written it; `Ok(None)` where it does not exist.
    /// A distrusted root is warned about (once) and not used.
    fn root(&self) -> Result<Option<PathBuf>, ()> {
        trust::check_root(&self.dir).map_err(|Distrust(why)| {
            warn_once(
                &ROOT_WARNED,
                format!(
                    "not using the compile cache {}: {why}; it must belong to you and be writable by you alone (docs/cli.md, \"The compile cache\")",
                    self.dir.display()
                ),
            )
        })
    }

    fn entry(root: &Path, key: &str) -> PathBuf {
        root.join(format!("{:016x}", fnv1a(key)))
    }

    /// `key`'s entry as `read` makes it from the entry's directory, if
    /// there is an entry for exactly `key` and its files are intact (as
    /// stored); an entry that is damaged or that `read` cannot use is
    /// removed (the caller then compiles and stores it again).
    pub fn load<T>(&self, key: &str, read: impl FnOnce(&Path) -> Option<T>) -> Option<T> {
        let (dir, intact) = self.find(key)?;
        let got = if intact { read(&dir) } else { None };
        if got.is_none() {
            self.discard(key);
        }
        got
    }

    /// The directory of `key`'s entry, if there is one for exactly `key`,
    /// and whether its files are intact (as stored).
    fn find(&self, key: &str) -> Option<(PathBuf, bool)> {
        let dir = Self::entry(&self.root().ok()??, key);
        let verdict = (|| {
            // Another key of the same hash is a miss, left alone.
            if read_own(&dir.join(KEY_FILE))? != key {
                return Ok(None);
            }
            let sums = read_own(&dir.join(SUMS_FILE))?;
            Ok(Some(checksums(&dir)? == sums))
        })();
        let intact = match verdict {
            Ok(None) => return None,
            Ok(Some(intact)) => intact,
            Err(Unusable::Io(e)) if e.kind() == io::ErrorKind::NotFound && !dir.exists() => return None,
            Err(Unusable::Io(_)) => false,
            Err(Unusable::Distrusted(Distrust(why))) => {
                warn_once(&ENTRY_WARNED, format!("compile cache entry {}: {why}; not loaded, compiled again", dir.display()));
                false
            }
        };
        if intact {
            // Used now: the last entry a prune removes (best effort).
            let _ = trust::open_own(&dir.join(KEY_FILE)).map(|f| f.set_modified(std::time::SystemTime::now()));
        }
        Some((dir, intact))
    }

    /// Removes `key`'s entry (unreadable or corrupt). Renamed away first,
    /// so that no other process finds half of it.
    fn discard(&self, key: &str) {
        let Ok(Some(root)) = self.root() else { return };
        let dir = Self::entry(&root, key);
        let gone = root.join(format!("gone-{}-{:016x}", std::process::id(), fnv1a(key)));
        if fs::rename(&dir, &gone).is_ok() {
            let _ = fs::remove_dir_all(&gone);
        }
    }

    /// Stores `key`'s entry: `fill` writes its files into a private
    /// directory, which is then renamed into place (atomic: readers see
    /// the whole entry or none). An entry another process stored first
    /// wins.
    /// Nothing is stored in a root the user cannot trust (it is created,
    /// 0700, where there is none), and the entry is made private (0700 and
    /// 0600) before it is renamed into place.
    pub fn store(&self, key: &str, fill: impl FnOnce(&Path) -> io::Result<()>) -> io::Result<()> {
        let distrusted = || io::Error::new(io::ErrorKind::PermissionDenied, "the cache's directory is not yours alone");
        let root = match self.root().map_err(|()| distrusted())? {
            Some(root) => root,
            None => {
                fs::DirBuilder::new().recursive(true).mode(0o700).create(&self.dir)?;
                // Checked again: another user may have made it first.
                self.root().map_err(|()| distrusted())?.ok_or_else(distrusted)?
            }
        };
        let nanos = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.subsec_nanos());
        let tmp = root.join(format!("tmp-{}-{nanos}-{:016x}", std::process::id(), fnv1a(key)));
        let entry = Self::entry(&root, key);
        let result = (|| {
            fs::DirBuilder::new().mode(0o700).create(&tmp)?;
            fill(&tmp)?;
            trust::make_private(&tmp)?;
            let sums = checksums(&tmp).map_err(|e| match e {
                Unusable::Io(e) => e,
                Unusable::Distrusted(Distrust(why)) => io::Error::other(why),
            })?;
            write_private(&tmp.join(SUMS_FILE), sums.as_bytes())?;
            // The key last: an entry without it is never read.
            write_private(&tmp.join(KEY_FILE), key.as_bytes())?;
            fs::rename(&tmp, &entry)
        })();
        if result.is_err() {
            let _ = fs::remove_dir_all(&tmp);
        }
        result?;
        self.prune(&root, &entry);
        Ok(())
    }

    /// Removes the least recently used entries until the others, `keep`
    /// among them, fit in the bound, and private directories of stores and
    /// discards that died. Best effort: another process may be removing or
    /// reading the same entries (a reader that loses an entry compiles).
    fn prune(&self, root: &Path, keep: &Path) {
        let Ok(list) = fs::read_dir(root) else { return };
        let now = std::time::SystemTime::now();
        let age = |t: std::time::SystemTime| now.duration_since(t).map_or(0, |d| d.as_secs());
        let mut entries = Vec::new();
        for e in list.flatten() {
            let (path, name) = (e.path(), e.file_name().to_string_lossy().into_owned());
            let modified = |p: &Path| fs::metadata(p).and_then(|m| m.modified()).unwrap_or(now);
            if name.len() == 16 && name.bytes().all(|b| b.is_ascii_hexdigit()) {
                entries.push((modified(&path.join(KEY_FILE)), size_of(&path), path));
            } else if (name.starts_with("tmp-") || name.starts_with("gone-")) && age(modified(&path)) > STALE_SECS {
                let _ = fs::remove_dir_all(&path);
            }
        }
        let mut total: u64 = entries.iter().map(|e| e.1).sum();
        entries.sort_by_key(|e| e.0);
        for (_, bytes, path) in entries {
            if total <= self.max_bytes {
                break;
            }
            if path == keep {
                continue;
            }
            // Renamed away first, as `discard` does: no process finds half of it.
            let gone = root.join(format!("gone-{}-{}", std::process::id(), path.file_name().map_or_else(String::new, |n| n.to_string_lossy().into_owned())));
            if fs::rename(&path, &gone).is_ok() {
                let _ = fs::remove_dir_all(&gone);
                total = total.saturating_sub(bytes);
            }
        }
    }
}

/// A new file, mode 0600 whatever the umask, never through a link.
fn write_private(path: &Path, bytes: &[u8]) -> io::Result<()> {
    use std::io::Write;
    use std::os::unix::fs::OpenOptionsExt;
    fs::OpenOptions::new().write(true).create_new(true).mode(0o600).open(path)?.write_all(bytes)
}

/// The bytes of the files under `dir`.
fn size_of(dir: &Path) -> u64 {
    let Ok(list) = fs::read_dir(dir) else { return 0 };
    list.flatten()
        .map(|e| match e.file_type() {
            Ok(t) if t.is_dir() => size_of(&e.path()),
            _ => e.metadata().map_or(0, |m| m.len()),
        })
        .sum()
}

#[cfg(test)]
mod tests;
