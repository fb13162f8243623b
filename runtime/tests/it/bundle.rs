//! Bundle directories: opening a good one, and each way `kernels.ptx` or the
//! files themselves can disagree with the manifest.

use crate::common;

use common::{manifest_value, write_bundle, TempDir, PTX};
use eintup_runtime::bundle::{MANIFEST_FILE, PTX_FILE};
use eintup_runtime::{Bundle, Error, Manifest};

fn open_with(tag: &str, ptx: &str) -> Result<Bundle, Error> {
    let dir = TempDir::new(tag);
    let path = write_bundle(&dir, &manifest_value().to_string(), ptx);
    Bundle::open(path)
}

fn bad_ptx(tag: &str, ptx: &str, needle: &str) {
    match open_with(tag, ptx) {
        Err(Error::BadPtx(msg)) => assert!(msg.contains(needle), "message {msg:?} lacks {needle:?}"),
        other => panic!("expected BadPtx containing {needle:?}, got {other:?}"),
    }
}

#[test]
fn opens_a_valid_bundle() {
    let b = open_with("valid", PTX).unwrap();
    assert_eq!(b.ptx(), PTX);
    assert_eq!(b.manifest().kernels.len(), 2);
    assert_eq!(b.manifest().source.name, "add_one.et");
}

#[test]
fn missing_directory_or_file_is_io_with_path() {
    let dir = TempDir::new("missing");
    match Bundle::open(dir.path().join("nope.etb")) {
        Err(Error::Io { path, .. }) => assert!(path.ends_with(MANIFEST_FILE)),
        other => panic!("{other:?}"),
    }
    let path = write_bundle(&dir, &manifest_value().to_string(), PTX);
    std::fs::remove_file(path.join(PTX_FILE)).unwrap();
    let err = Bundle::open(&path).unwrap_err();
    assert!(matches!(&err, Error::Io { path, .. } if path.ends_with(PTX_FILE)), "{err:?}");
    assert!(err.to_string().contains("kernels.ptx"), "{err}");
}

#[test]
fn bad_manifest_is_reported_before_the_ptx_is_read() {
    let dir = TempDir::new("badmanifest");
    let path = write_bundle(&dir, "{}", "not ptx");
    assert!(matches!(Bundle::open(path), Err(Error::BadManifest(_))));
}

#[test]
fn every_kernel_needs_an_entry() {
    bad_ptx("noentry", &PTX.replace(".entry noop", ".func noop"), "no `.entry noop` for manifest kernel `noop`");
}

#[test]
fn an_entry_in_a_comment_does_not_count() {
    let ptx = PTX.replace(".visible .entry noop", "// .visible .entry noop\n.visible .func noop");
    bad_ptx("commented", &ptx, "no `.entry noop`");
}

#[test]
fn unlisted_entry_is_rejected() {
    let ptx = format!("{PTX}\n.visible .entry extra()\n{{\n\tret;\n}}\n");
    bad_ptx("extra", &ptx, ".entry extra is not listed");
}

#[test]
fn parameter_count_must_match() {
    let ptx = PTX.replace(".param .u64 noop_param_0", ".param .u64 noop_param_0,\n\t.param .u64 noop_param_1");
    bad_ptx("params", &ptx, ".entry noop has 2 parameters but the manifest lists 1");
}

#[test]
fn header_must_match_target() {
    bad_ptx("version", &PTX.replace(".version 7.0", ".version 7.8"), ".version 7.8 but the manifest says ptx_version 7.0");
    bad_ptx("target", &PTX.replace(".target sm_80", ".target sm_86"), ".target sm_86 but the manifest says arch sm_80");
    bad_ptx("addr", &PTX.replace(".address_size 64", ""), ".address_size is absent (32), expected 64");
    bad_ptx("noversion", &PTX.replace(".version 7.0", ""), "no `.version` directive");
}

#[test]
fn nul_byte_is_rejected() {
    bad_ptx("nul", &format!("{PTX}\0"), "NUL");
}

#[test]
fn new_write_open_round_trip() {
    let manifest = Manifest::parse(&manifest_value().to_string()).unwrap();
    let bundle = Bundle::new(manifest.clone(), PTX.to_string()).unwrap();
    let dir = TempDir::new("roundtrip");
    let path = dir.path().join("nested").join("out.etb");
    bundle.write(&path).unwrap();
    let back = Bundle::open(&path).unwrap();
    assert_eq!(back.manifest(), &manifest);
    assert_eq!(back.ptx(), PTX);
}

/// A write that fails midway (issue #49 item 6: a file size limit, as a
/// full disk would) leaves the bundle that was there, byte for byte, or
/// none where there was none, and no temporary beside it. The limit is
/// this process's own (nextest runs each test in its own process).
#[test]
fn a_failed_write_leaves_the_old_bundle_or_none() {
    let manifest = Manifest::parse(&manifest_value().to_string()).unwrap();
    let dir = TempDir::new("failed-write");
    let old = dir.path().join("b.etb");
    Bundle::new(manifest.clone(), PTX.to_string()).unwrap().write(&old).unwrap();
    let before = [std::fs::read(old.join(MANIFEST_FILE)).unwrap(), std::fs::read(old.join(PTX_FILE)).unwrap()];
    // Valid PTX past the limit (a comment of 64 KiB).
    let big = Bundle::new(manifest, format!("{PTX}\n// {}\n", "x".repeat(64 << 10))).unwrap();
    let limit = libc::rlimit { rlim_cur: 16 << 10, rlim_max: libc::RLIM_INFINITY };
    let mut saved = libc::rlimit { rlim_cur: 0, rlim_max: 0 };
    // SAFETY: valid pointers to rlimit values; SIG_IGN is a valid
    // disposition (the write then fails with EFBIG instead of a kill).
    unsafe {
        assert_eq!(libc::getrlimit(libc::RLIMIT_FSIZE, &mut saved), 0);
        libc::signal(libc::SIGXFSZ, libc::SIG_IGN);
        assert_eq!(libc::setrlimit(libc::RLIMIT_FSIZE, &limit), 0);
    }
    let replaced = big.write(&old);
    let fresh = big.write(dir.path().join("c.etb"));
    // SAFETY: as above.
    unsafe { assert_eq!(libc::setrlimit(libc::RLIMIT_FSIZE, &saved), 0) };
    assert!(matches!(replaced, Err(Error::Io { .. })), "{replaced:?}");
    assert!(matches!(fresh, Err(Error::Io { .. })), "{fresh:?}");
    assert_eq!([std::fs::read(old.join(MANIFEST_FILE)).unwrap(), std::fs::read(old.join(PTX_FILE)).unwrap()], before);
    let mut names: Vec<_> = std::fs::read_dir(dir.path()).unwrap().map(|e| e.unwrap().file_name()).collect();
    names.sort();
    assert_eq!(names, ["b.etb"]);
    assert_eq!(std::fs::read_dir(&old).unwrap().count(), 2);
    // And without the limit the same bundle replaces the old one.
    big.write(&old).unwrap();
    assert_eq!(Bundle::open(&old).unwrap().ptx(), big.ptx());
}

#[test]
fn new_validates_too() {
    let mut manifest = Manifest::parse(&manifest_value().to_string()).unwrap();
    assert!(matches!(Bundle::new(manifest.clone(), "".into()), Err(Error::BadPtx(_))));
    manifest.buffers[1].name = "x".into();
    assert!(matches!(Bundle::new(manifest, PTX.into()), Err(Error::BadManifest(_))));
}

/// `Bundle::write` records a content checksum; `open` recomputes it, so a
/// changed byte of either file is reported as damage, while re-indenting
/// the manifest (same content) is not.
#[test]
fn the_content_checksum_detects_damage() {
    let manifest = Manifest::parse(&manifest_value().to_string()).unwrap();
    let dir = TempDir::new("checksum");
    let path = dir.path().join("b.etb");
    Bundle::new(manifest, PTX.to_string()).unwrap().write(&path).unwrap();
    let text = std::fs::read_to_string(path.join(MANIFEST_FILE)).unwrap();
    let value: serde_json::Value = serde_json::from_str(&text).unwrap();
    let recorded = value["checksum"].as_str().unwrap().to_string();
    assert!(recorded.starts_with("crc32:") && recorded.len() == 14, "{recorded}");
    // Independently: CRC-32 of the canonical manifest without the field,
    // a newline, and the PTX, computed here by crc32fast on text built by
    // serde_json's own sorted map.
    let mut body = value.clone();
    body.as_object_mut().unwrap().remove("checksum");
    let canonical = serde_json::to_string(&body).unwrap();
    assert!(!canonical.contains("\n  "));
    let mut h = crc32fast::Hasher::new();
    h.update(canonical.as_bytes());
    h.update(b"\n");
    h.update(PTX.as_bytes());
    assert_eq!(recorded, format!("crc32:{:08x}", h.finalize()));

    // One byte of kernels.ptx.
    std::fs::write(path.join(PTX_FILE), PTX.replacen("add", "adc", 1)).unwrap();
    match Bundle::open(&path) {
        Err(e @ Error::Checksum { .. }) => assert!(e.to_string().contains("the bundle is damaged"), "{e}"),
        other => panic!("expected a checksum error, got {other:?}"),
    }
    std::fs::write(path.join(PTX_FILE), PTX).unwrap();
    // One dim of the manifest.
    std::fs::write(path.join(MANIFEST_FILE), text.replacen("\"seed\": 0", "\"seed\": 1", 1)).unwrap();
    assert!(matches!(Bundle::open(&path), Err(Error::Checksum { .. })));
    // The same content, indented otherwise: still valid.
    std::fs::write(path.join(MANIFEST_FILE), serde_json::to_string(&value).unwrap()).unwrap();
    Bundle::open(&path).unwrap();
    // A bundle of an earlier producer, without a checksum, still opens.
    std::fs::write(path.join(MANIFEST_FILE), body.to_string()).unwrap();
    Bundle::open(&path).unwrap();
}
