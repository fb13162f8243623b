//! The cache's trust model (issue #49 item 1): only what the current user
//! alone can have written is loaded; stores are private whatever the umask.

use super::*;
use std::os::unix::fs::{MetadataExt, PermissionsExt};

/// An empty directory of this test process (not created).
fn fresh(name: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("eintup-disk-cache-{}-{name}", std::process::id()));
    let _ = fs::remove_dir_all(&d);
    d
}

const KEY: &str = "a key\nwith lines";

/// Stores `KEY` with a file `lib` and a file in a subdirectory.
fn store(cache: &DiskCache) -> io::Result<()> {
    cache.store(KEY, |dir| {
        fs::write(dir.join("lib"), b"library bytes")?;
        fs::create_dir(dir.join("bundle"))?;
        fs::write(dir.join("bundle/manifest.json"), b"{}")
    })
}

/// What `load` gives for `KEY`: the library's bytes, if the entry is used.
fn load(cache: &DiskCache) -> Option<Vec<u8>> {
    cache.load(KEY, |dir| fs::read(dir.join("lib")).ok())
}

fn mode(p: &Path) -> u32 {
    fs::symlink_metadata(p).unwrap().mode() & 0o7777
}

fn the_entry(root: &Path) -> PathBuf {
    let v: Vec<_> = fs::read_dir(root).unwrap().map(|e| e.unwrap().path()).collect();
    assert_eq!(v.len(), 1, "{v:?}");
    v.into_iter().next().unwrap()
}

#[test]
fn stores_are_private_whatever_the_umask() {
    let base = fresh("umask");
    let root = base.join("nested/cache");
    // SAFETY: umask has no preconditions; nextest runs each test in its own
    // process, so no other test's files are made under it.
    let old = unsafe { libc::umask(0) };
    let stored = store(&DiskCache::new(root.clone()).unwrap());
    unsafe { libc::umask(old) };
    stored.unwrap();
    assert_eq!(mode(&root), 0o700);
    let entry = the_entry(&root);
    assert_eq!(mode(&entry), 0o700);
    assert_eq!(mode(&entry.join("bundle")), 0o700);
    for f in ["lib", "bundle/manifest.json", KEY_FILE, SUMS_FILE] {
        assert_eq!(mode(&entry.join(f)), 0o600, "{f}");
    }
    assert_eq!(load(&DiskCache::new(root.clone()).unwrap()).as_deref(), Some(&b"library bytes"[..]));
    fs::remove_dir_all(&base).unwrap();
}

#[test]
fn a_root_others_can_write_to_is_not_used() {
    let root = fresh("shared-root");
    let cache = DiskCache::new(root.clone()).unwrap();
    store(&cache).unwrap();
    assert!(load(&cache).is_some());
    for shared in [0o777, 0o1777, 0o770] {
        fs::set_permissions(&root, fs::Permissions::from_mode(shared)).unwrap();
        assert_eq!(load(&cache), None, "mode {shared:o}");
        let e = store(&cache).unwrap_err();
        assert_eq!(e.kind(), io::ErrorKind::PermissionDenied, "mode {shared:o}");
    }
    // Readable by others is fine: nobody else can change it.
    fs::set_permissions(&root, fs::Permissions::from_mode(0o755)).unwrap();
    assert!(load(&cache).is_some());
    fs::remove_dir_all(&root).unwrap();
}

#[test]
fn an_entry_with_a_link_or_a_file_others_can_write_is_refused_and_replaced() {
    let root = fresh("entry");
    let cache = DiskCache::new(root.clone()).unwrap();
    // The library replaced by a link to a copy: the same bytes, so the
    // checksums still match if the link is followed.
    store(&cache).unwrap();
    let lib = the_entry(&root).join("lib");
    let copy = fresh("entry-copy");
    fs::write(&copy, fs::read(&lib).unwrap()).unwrap();
    fs::remove_file(&lib).unwrap();
    std::os::unix::fs::symlink(&copy, &lib).unwrap();
    assert_eq!(load(&cache), None);
    assert!(fs::read_dir(&root).unwrap().next().is_none(), "the refused entry is removed");
    // A file of the entry writable by others (an entry an older eintup
    // made under umask 000).
    store(&cache).unwrap();
    let sums = the_entry(&root).join("bundle/manifest.json");
    fs::set_permissions(&sums, fs::Permissions::from_mode(0o666)).unwrap();
    assert_eq!(load(&cache), None);
    // A FIFO in place of a file is refused, not waited on.
    store(&cache).unwrap();
    let lib = the_entry(&root).join("lib");
    fs::remove_file(&lib).unwrap();
    let c = std::ffi::CString::new(lib.as_os_str().as_encoded_bytes()).unwrap();
    // SAFETY: a valid NUL-terminated path.
    assert_eq!(unsafe { libc::mkfifo(c.as_ptr(), 0o600) }, 0);
    assert_eq!(load(&cache), None);
    // Stored again, it is used again.
    store(&cache).unwrap();
    assert!(load(&cache).is_some());
    fs::remove_dir_all(&root).unwrap();
    fs::remove_file(&copy).unwrap();
}

#[test]
fn a_root_reached_through_the_users_own_link_is_used() {
    let real = fresh("real-root");
    let link = fresh("link-root");
    fs::create_dir(&real).unwrap();
    std::os::unix::fs::symlink(&real, &link).unwrap();
    let cache = DiskCache::new(link.clone()).unwrap();
    store(&cache).unwrap();
    assert!(load(&cache).is_some());
    assert_eq!(fs::read_dir(&real).unwrap().count(), 1);
    fs::remove_file(&link).unwrap();
    fs::remove_dir_all(&real).unwrap();
}

/// Hands `path` and everything under it to `uid` (root only).
fn chown_all(path: &Path, uid: u32) {
    let c = std::ffi::CString::new(path.as_os_str().as_encoded_bytes()).unwrap();
    // SAFETY: a valid NUL-terminated path; gid unchanged.
    assert_eq!(unsafe { libc::lchown(c.as_ptr(), uid, u32::MAX) }, 0, "lchown {}", path.display());
    if fs::symlink_metadata(path).unwrap().is_dir() {
        for e in fs::read_dir(path).unwrap() {
            chown_all(&e.unwrap().path(), uid);
        }
    }
}

/// An entry another user planted, with checksums they recomputed (here:
/// an honest entry handed to uid 65534), is not loaded; nor is a cache
/// root of theirs. Needs root to hand files to another user.
#[test]
fn entries_and_roots_of_another_user_are_refused() {
    // SAFETY: geteuid has no preconditions.
    if unsafe { libc::geteuid() } != 0 {
        eprintln!("skipped: handing files to a second uid needs root (this test runs as uid {})", unsafe { libc::geteuid() });
        return;
    }
    let root = fresh("other-user");
    let cache = DiskCache::new(root.clone()).unwrap();
    store(&cache).unwrap();
    let entry = the_entry(&root);
    chown_all(&entry, 65534);
    assert_eq!(fs::metadata(entry.join("lib")).unwrap().uid(), 65534);
    assert_eq!(load(&cache), None);
    // The whole root theirs: nothing loaded or stored.
    store(&cache).unwrap();
    chown_all(&root, 65534);
    assert_eq!(load(&cache), None);
    assert_eq!(store(&cache).unwrap_err().kind(), io::ErrorKind::PermissionDenied);
    // A root below a directory of theirs: they could swap it.
    let theirs = fresh("other-user-parent");
    fs::create_dir(&theirs).unwrap();
    chown_all(&theirs, 65534);
    let below = DiskCache::new(theirs.join("cache")).unwrap();
    assert_eq!(store(&below).unwrap_err().kind(), io::ErrorKind::PermissionDenied);
    fs::remove_dir_all(&root).unwrap();
    fs::remove_dir_all(&theirs).unwrap();
}
