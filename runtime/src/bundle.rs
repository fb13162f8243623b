//! A bundle on disk: a directory `NAME.etb/` holding `manifest.json` and
//! `kernels.ptx` (docs/bundle.md).
//!
//! [`Bundle::open`] reads both files and checks them against each other;
//! [`Bundle::new`] does the same checks for a bundle built in memory and
//! [`Bundle::write`] stores it. A `Bundle` value is therefore always
//! consistent: every manifest kernel has an `.entry` with as many parameters,
//! and the PTX header agrees with the manifest's target.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use crate::error::{Error, Result};
use crate::manifest::{parse_ptx_version, Manifest};
use crate::ptx;

/// File name of the manifest inside a bundle directory.
pub const MANIFEST_FILE: &str = "manifest.json";
/// File name of the PTX module inside a bundle directory.
pub const PTX_FILE: &str = "kernels.ptx";

/// A validated bundle: the manifest and the PTX text of its kernels.
#[derive(Clone, Debug)]
pub struct Bundle {
    manifest: Manifest,
    ptx: String,
}

impl Bundle {
    /// Reads and validates the bundle directory `dir`.
    pub fn open(dir: impl AsRef<Path>) -> Result<Bundle> {
        let dir = dir.as_ref();
        let manifest_text = read(&dir.join(MANIFEST_FILE))?;
        let manifest = Manifest::parse(&manifest_text)?;
        let ptx = read(&dir.join(PTX_FILE))?;
        check_ptx(&manifest, &ptx)?;
        Ok(Bundle { manifest, ptx })
    }

    /// A bundle from parts built in memory (by a compiler), validated as
    /// [`Bundle::open`] would.
    pub fn new(manifest: Manifest, ptx: String) -> Result<Bundle> {
        manifest.validate()?;
        check_ptx(&manifest, &ptx)?;
        Ok(Bundle { manifest, ptx })
    }

    /// Writes the bundle into `dir`, creating the directory if needed and
    /// replacing the two files if present.
    pub fn write(&self, dir: impl AsRef<Path>) -> Result<()> {
        let dir = dir.as_ref();
        std::fs::create_dir_all(dir).map_err(|source| Error::Io { path: dir.to_path_buf(), source })?;
        let mut json = self.manifest.to_json()?;
        json.push('\n');
        write(&dir.join(MANIFEST_FILE), &json)?;
        write(&dir.join(PTX_FILE), &self.ptx)
    }

    pub fn manifest(&self) -> &Manifest {
        &self.manifest
    }

    /// The PTX module text, as given to the driver's JIT.
    pub fn ptx(&self) -> &str {
        &self.ptx
    }
}

fn read(path: &Path) -> Result<String> {
    std::fs::read_to_string(path).map_err(|source| Error::Io { path: path.to_path_buf(), source })
}

fn write(path: &Path, text: &str) -> Result<()> {
    std::fs::write(path, text).map_err(|source| Error::Io { path: PathBuf::from(path), source })
}

/// Checks `kernels.ptx` against the manifest: header directives, one
/// `.entry` per manifest kernel with the same parameter count, and no
/// `.entry` the manifest does not list.
fn check_ptx(manifest: &Manifest, ptx: &str) -> Result<()> {
    let bad = |msg: String| Err(Error::BadPtx(msg));
    if ptx.contains('\0') {
        // The driver reads the module as a NUL-terminated string.
        return bad("contains a NUL byte".into());
    }
    let info = ptx::parse(ptx).map_err(|e| Error::BadPtx(e.to_string()))?;

    let want_version = parse_ptx_version(&manifest.target.ptx_version);
    match &info.version {
        None => return bad("no `.version` directive".into()),
        Some(v) if parse_ptx_version(v) != want_version => {
            return bad(format!(".version {v} but the manifest says ptx_version {}", manifest.target.ptx_version))
        }
        Some(_) => {}
    }
    match &info.target {
        None => return bad("no `.target` directive".into()),
        Some(t) if *t != manifest.target.arch => {
            return bad(format!(".target {t} but the manifest says arch {}", manifest.target.arch))
        }
        Some(_) => {}
    }
    // Kernel arguments are 64-bit device pointers.
    if info.address_size.as_deref() != Some("64") {
        return bad(format!(
            ".address_size is {}, expected 64",
            info.address_size.as_deref().unwrap_or("absent (32)")
        ));
    }

    let mut entries: BTreeMap<&str, usize> = BTreeMap::new();
    for e in info.entries() {
        if entries.insert(e.name.as_str(), e.params.len()).is_some() {
            return bad(format!(".entry {} is defined twice", e.name));
        }
    }
    for k in &manifest.kernels {
        match entries.remove(k.name.as_str()) {
            None => return bad(format!("no `.entry {}` for manifest kernel `{}`", k.name, k.name)),
            Some(n) if n != k.params.len() => {
                return bad(format!(
                    ".entry {} has {n} parameters but the manifest lists {}",
                    k.name,
                    k.params.len()
                ))
            }
            Some(_) => {}
        }
    }
    if let Some(extra) = entries.keys().next() {
        return bad(format!(".entry {extra} is not listed in the manifest's kernels"));
    }
    Ok(())
}
