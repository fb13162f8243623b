//! Who may have written what the cache holds (docs/cli.md, "The compile
//! cache: who it trusts"). An entry's library is loaded into the process,
//! so a cache anyone else can write to runs their code: the checksums only
//! catch damage (anyone can recompute them). As ssh does with `~/.ssh`, the
//! cache is used only where the current user alone can have written it:
//! its root and every directory and file below it belong to the user and
//! are not writable by group or others, no entry holds a symbolic link or
//! a special file, and no directory above the root lets another user swap
//! it (writable by others without the sticky bit, or owned by someone
//! other than the user or root). Files are opened without following links
//! and judged by what was opened (`fstat`), so nothing changes between the
//! check and the read.

use std::fs::{File, Metadata, OpenOptions};
use std::io;
use std::os::unix::fs::{MetadataExt, OpenOptionsExt};
use std::path::{Path, PathBuf};

/// Mode bits that let group or others change a file or a directory's entries.
const WRITABLE_BY_OTHERS: u32 = 0o022;
const STICKY: u32 = 0o1000;

/// Why a path of the cache is not trusted: the message of the warning.
#[derive(Debug)]
pub struct Distrust(pub String);

/// Why a file of an entry was not opened: it is gone or unreadable (another
/// process removed the entry meanwhile: a miss), or it is not trusted.
pub enum Unusable {
    Io(io::Error),
    Distrusted(Distrust),
}

impl From<io::Error> for Unusable {
    fn from(e: io::Error) -> Unusable {
        Unusable::Io(e)
    }
}

impl From<Distrust> for Unusable {
    fn from(d: Distrust) -> Unusable {
        Unusable::Distrusted(d)
    }
}

fn euid() -> u32 {
    // SAFETY: geteuid has no preconditions and cannot fail.
    unsafe { libc::geteuid() }
}

fn owner_text(uid: u32) -> String {
    format!("uid {uid}")
}

/// A directory or file of the cache (`meta` not following links): the
/// user's, and writable by the user alone.
pub fn check_own(path: &Path, meta: &Metadata) -> Result<(), Distrust> {
    if meta.file_type().is_symlink() {
        return Err(Distrust(format!("{} is a symbolic link", path.display())));
    }
    if !meta.is_dir() && !meta.is_file() {
        return Err(Distrust(format!("{} is not a regular file or a directory", path.display())));
    }
    if meta.uid() != euid() {
        return Err(Distrust(format!("{} belongs to {}, not to you ({})", path.display(), owner_text(meta.uid()), owner_text(euid()))));
    }
    if meta.mode() & WRITABLE_BY_OTHERS != 0 {
        return Err(Distrust(format!("{} is writable by group or others (mode {:04o})", path.display(), meta.mode() & 0o7777)));
    }
    Ok(())
}

/// The cache's root, if it exists, as a path without links, after checking
/// it and every directory above it. `Ok(None)`: there is no root yet.
pub fn check_root(dir: &Path) -> Result<Option<PathBuf>, Distrust> {
    let link = match std::fs::symlink_metadata(dir) {
        Ok(m) => m,
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(Distrust(format!("{}: {e}", dir.display()))),
    };
    // A link to the root (a cache on another disk) is fine if the user or
    // root made it: nobody else can point it elsewhere later.
    if link.file_type().is_symlink() && link.uid() != euid() && link.uid() != 0 {
        return Err(Distrust(format!("{} is a symbolic link that belongs to {}", dir.display(), owner_text(link.uid()))));
    }
    let root = dir.canonicalize().map_err(|e| Distrust(format!("{}: {e}", dir.display())))?;
    let meta = std::fs::symlink_metadata(&root).map_err(|e| Distrust(format!("{}: {e}", root.display())))?;
    if !meta.is_dir() {
        return Err(Distrust(format!("{} is not a directory", root.display())));
    }
    check_own(&root, &meta)?;
    for above in root.ancestors().skip(1) {
        let m = std::fs::metadata(above).map_err(|e| Distrust(format!("{}: {e}", above.display())))?;
        if m.uid() != euid() && m.uid() != 0 {
            return Err(Distrust(format!("{} (above the cache) belongs to {}", above.display(), owner_text(m.uid()))));
        }
        // Writable by others: only a sticky directory (/tmp) keeps them from
        // renaming the user's entries in it.
        if m.mode() & 0o002 != 0 && m.mode() & STICKY == 0 {
            return Err(Distrust(format!("{} (above the cache) is writable by others (mode {:04o})", above.display(), m.mode() & 0o7777)));
        }
    }
    Ok(Some(root))
}

/// Opens a file of an entry without following a link, checked as
/// [`check_own`] by what was opened.
pub fn open_own(path: &Path) -> Result<File, Unusable> {
    // O_NONBLOCK: a FIFO planted under an entry's name is refused below,
    // not waited on.
    let f = OpenOptions::new().read(true).custom_flags(libc::O_NOFOLLOW | libc::O_NONBLOCK).open(path).map_err(|e| {
        if e.raw_os_error() == Some(libc::ELOOP) {
            Unusable::Distrusted(Distrust(format!("{} is a symbolic link", path.display())))
        } else {
            Unusable::Io(e)
        }
    })?;
    let meta = f.metadata()?;
    if !meta.is_file() {
        return Err(Distrust(format!("{} is not a regular file", path.display())).into());
    }
    check_own(path, &meta)?;
    Ok(f)
}

/// Makes what a store wrote private whatever the umask (and whatever mode
/// the linker gave the library): directories 0700, files 0600. Links and
/// special files are not the store's and fail the entry.
pub fn make_private(dir: &Path) -> io::Result<()> {
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(dir, std::fs::Permissions::from_mode(0o700))?;
    for e in std::fs::read_dir(dir)? {
        let p = e?.path();
        let m = std::fs::symlink_metadata(&p)?;
        if m.is_dir() {
            make_private(&p)?;
        } else if m.is_file() {
            std::fs::set_permissions(&p, std::fs::Permissions::from_mode(0o600))?;
        } else {
            return Err(io::Error::other(format!("{} is not a regular file or a directory", p.display())));
        }
    }
    Ok(())
}
