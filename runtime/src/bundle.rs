//! A bundle on disk: a directory `NAME.etb/` holding `manifest.json` and
//! `kernels.ptx` (docs/bundle.md).
//!
//! [`Bundle::open`] reads both files and checks them against each other;
//! [`Bundle::new`] does the same checks for a bundle built in memory and
//! [`Bundle::write`] stores it. A `Bundle` value is therefore always
//! consistent: every manifest kernel has an `.entry` with as many parameters,
//! and the PTX header agrees with the manifest's target.

use std::collections::BTreeMap;
use std::path::Path;

use crate::error::{Error, Result};
use crate::manifest::{parse_ptx_version, Manifest};
use crate::ptx;
use eintup_tensor::outfile;
use eintup_tensor::tensor::Tensor;

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
    ///
    /// When the manifest records a `checksum` (every bundle `eintup build`
    /// writes does), the content must match it: a damaged bundle is
    /// reported as such ([`Error::Checksum`]) before its fields are
    /// interpreted.
    pub fn open(dir: impl AsRef<Path>) -> Result<Bundle> {
        let dir = dir.as_ref();
        let manifest_text = read(&dir.join(MANIFEST_FILE), MAX_MANIFEST_BYTES)?;
        let ptx = read(&dir.join(PTX_FILE), MAX_PTX_BYTES)?;
        verify_checksum(&manifest_text, &ptx)?;
        let manifest = Manifest::parse(&manifest_text)?;
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

    /// The bundle for these inputs: a dynamic bundle (format 2) bound to
    /// the dims the inputs' shapes give (`Manifest::derive_dims`, then
    /// `Manifest::bind`); any other bundle as it is.
    pub fn bind_inputs(&self, inputs: &BTreeMap<String, Tensor>) -> Result<std::borrow::Cow<'_, Bundle>> {
        if self.manifest.dynamic.is_none() {
            return Ok(std::borrow::Cow::Borrowed(self));
        }
        let shapes = inputs.iter().map(|(n, t)| (n.clone(), t.shape.clone())).collect();
        self.bind_shapes(&shapes).map(std::borrow::Cow::Owned)
    }

    /// The bundle bound to the dims that inputs of these shapes (by name)
    /// give: [`Bundle::bind_inputs`] for callers that hold no tensors (a
    /// Python caller's device arrays); a static bundle as it is.
    pub fn bind_shapes(&self, shapes: &BTreeMap<String, Vec<usize>>) -> Result<Bundle> {
        Ok(self.bind_given(shapes, &BTreeMap::new())?.0)
    }

    /// [`Bundle::bind_shapes`] with dims `given` by the caller (see
    /// [`Manifest::given_dims`]) for symbols no input gives; also returns
    /// every symbol's value.
    pub fn bind_given(&self, shapes: &BTreeMap<String, Vec<usize>>, given: &BTreeMap<String, i64>) -> Result<(Bundle, BTreeMap<String, i64>)> {
        let dims = self.manifest.derive_dims(shapes, given)?;
        let manifest = self.manifest.bind(&dims)?;
        Ok((Bundle { manifest, ptx: self.ptx.clone() }, dims))
    }

    /// Writes the bundle into `dir`, creating the directory if needed and
    /// replacing the two files if present; on failure whatever was at
    /// `dir` is left as it was (and no temporary stays).
    pub fn write(&self, dir: impl AsRef<Path>) -> Result<()> {
        let dir = dir.as_ref();
        let value = serde_json::to_value(&self.manifest).map_err(|e| Error::BadManifest(e.to_string()))?;
        // The manifest's fields in their usual order, the checksum last.
        #[derive(serde::Serialize)]
        struct Sealed<'a> {
            #[serde(flatten)]
            manifest: &'a Manifest,
            checksum: String,
        }
        let sealed = Sealed { manifest: &self.manifest, checksum: content_checksum(&value, &self.ptx) };
        let mut json = serde_json::to_string_pretty(&sealed).map_err(|e| Error::BadManifest(e.to_string()))?;
        json.push('\n');
        let io = |path: &Path| {
            let path = path.to_path_buf();
            move |source| Error::Io { path, source }
        };
        // A failure midway (a full disk, a file size limit) must leave the
        // bundle that was there, or none: a new bundle is written into a
        // fresh directory beside `dir` and renamed into place; in an
        // existing one both files are written under temporary names before
        // either replaces its old file (a reader between the two renames
        // finds a checksum that does not match, never a wrong kernel).
        let files = |d: &Path| {
            let (manifest, ptx) = (d.join(MANIFEST_FILE), d.join(PTX_FILE));
            outfile::replace_all(vec![(ptx.as_path(), outfile::bytes(self.ptx.as_bytes())), (manifest.as_path(), outfile::bytes(json.as_bytes()))])
                .map_err(io(d))
        };
        match std::fs::symlink_metadata(dir) {
            Ok(m) if m.is_dir() => files(dir),
            Ok(_) => Err(Error::Io { path: dir.to_path_buf(), source: std::io::Error::other("exists and is not a directory") }),
            Err(_) => {
                if let Some(parent) = dir.parent().filter(|p| !p.as_os_str().is_empty()) {
                    std::fs::create_dir_all(parent).map_err(io(parent))?;
                }
                let tmp = outfile::temporary_beside(dir);
                std::fs::create_dir(&tmp).map_err(io(&tmp))?;
                let done = files(&tmp).and_then(|()| std::fs::rename(&tmp, dir).map_err(io(dir)));
                if done.is_err() {
                    let _ = std::fs::remove_dir_all(&tmp);
                }
                done
            }
        }
    }

    pub fn manifest(&self) -> &Manifest {
        &self.manifest
    }

    /// The PTX module text, as given to the driver's JIT.
    pub fn ptx(&self) -> &str {
        &self.ptx
    }
}

/// The manifest field holding the content checksum.
pub const CHECKSUM_FIELD: &str = "checksum";

/// `crc32:` and 8 lower-case hex digits: the CRC-32 (IEEE 802.3, as zlib's
/// `crc32` and `cksum -a crc32b`) of the bundle's content, which is the
/// manifest as canonical JSON without its `checksum` field ([`canonical_json`]),
/// a newline, and the bytes of `kernels.ptx`. A checksum detects accidental
/// damage (a truncated copy, a flipped bit, a half-written file); it is no
/// signature: anyone can recompute it (docs/bundle.md).
pub fn content_checksum(manifest: &serde_json::Value, ptx: &str) -> String {
    let mut text = String::new();
    match manifest {
        serde_json::Value::Object(fields) => {
            let rest: serde_json::Map<String, serde_json::Value> =
                fields.iter().filter(|(k, _)| k.as_str() != CHECKSUM_FIELD).map(|(k, v)| (k.clone(), v.clone())).collect();
            canonical_json(&serde_json::Value::Object(rest), &mut text);
        }
        other => canonical_json(other, &mut text),
    }
    text.push('\n');
    let mut h = crc32fast::Hasher::new();
    h.update(text.as_bytes());
    h.update(ptx.as_bytes());
    format!("crc32:{:08x}", h.finalize())
}

/// JSON without whitespace and with every object's keys sorted (by their
/// UTF-8 bytes), so that the checksum does not depend on how the manifest
/// was indented or ordered; what Python's `json.dumps(v, sort_keys=True,
/// separators=(",", ":"), ensure_ascii=False)` writes for a manifest.
pub fn canonical_json(v: &serde_json::Value, out: &mut String) {
    use serde_json::Value;
    match v {
        Value::Object(fields) => {
            let sorted: BTreeMap<&String, &Value> = fields.iter().collect();
            out.push('{');
            for (k, (name, value)) in sorted.into_iter().enumerate() {
                if k > 0 {
                    out.push(',');
                }
                out.push_str(&Value::String(name.clone()).to_string());
                out.push(':');
                canonical_json(value, out);
            }
            out.push('}');
        }
        Value::Array(items) => {
            out.push('[');
            for (k, item) in items.iter().enumerate() {
                if k > 0 {
                    out.push(',');
                }
                canonical_json(item, out);
            }
            out.push(']');
        }
        scalar => out.push_str(&scalar.to_string()),
    }
}

/// Checks the manifest's `checksum` against the content, when it has one
/// (bundles of earlier producers have none and are read as before). Text
/// that is not a JSON object is left to [`Manifest::parse`] to report.
fn verify_checksum(manifest_text: &str, ptx: &str) -> Result<()> {
    let Ok(value) = serde_json::from_str::<serde_json::Value>(manifest_text) else { return Ok(()) };
    // Another format version is reported as such by `Manifest::parse`.
    if value.get("format_version").and_then(|v| v.as_u64()) != Some(crate::manifest::FORMAT_VERSION) {
        return Ok(());
    }
    let Some(recorded) = value.get(CHECKSUM_FIELD) else { return Ok(()) };
    let computed = content_checksum(&value, ptx);
    match recorded.as_str() {
        Some(r) if r == computed => Ok(()),
        Some(r) if !r.starts_with("crc32:") => Err(Error::BadManifest(format!("checksum `{r}` is not of the form crc32:XXXXXXXX"))),
        _ => Err(Error::Checksum { recorded: recorded.to_string().trim_matches('"').to_string(), computed }),
    }
}

/// The largest `manifest.json` and `kernels.ptx` a reader takes (a FIFO or
/// `/dev/zero` in their place is refused without reading; docs/limits.md,
/// "Files"): far above what `eintup build` writes (kilobytes to a few
/// megabytes).
pub const MAX_MANIFEST_BYTES: u64 = 64 << 20;
pub const MAX_PTX_BYTES: u64 = 256 << 20;

fn read(path: &Path, limit: u64) -> Result<String> {
    let io = |source: std::io::Error| Error::Io { path: path.to_path_buf(), source };
    let bytes = eintup_tensor::infile::read_regular(path, limit).map_err(|e| io(e.into()))?;
    String::from_utf8(bytes).map_err(|_| io(std::io::Error::new(std::io::ErrorKind::InvalidData, "stream did not contain valid UTF-8")))
}

/// Every launch of a kernel compiled for one block shape (`.reqntid`: a
/// block-tiled kernel, whose shared tiles and barriers assume it) uses
/// exactly that block: a re-sealed bundle with another block is refused
/// when it is opened, not run into unwritten cells (the driver and the
/// emulator would refuse it only at the launch).
fn check_blocks(manifest: &Manifest, required: &BTreeMap<&str, [u64; 3]>) -> Result<()> {
    let lists =
        std::iter::once(("step".to_string(), &manifest.steps)).chain(manifest.generate.iter().map(|g| (format!("generate `{}` step", g.buffer), &g.steps)));
    let mut checked: Vec<(String, &str, [u32; 3])> = Vec::new();
    for (what, steps) in lists {
        for (i, s) in steps.iter().enumerate() {
            if let crate::manifest::Step::Launch { kernel, block, .. } = s {
                checked.push((format!("{what} {i}"), kernel.as_str(), *block));
            }
        }
    }
    for (i, v) in manifest.dynamic.iter().flat_map(|d| d.variants.iter()).enumerate() {
        checked.push((format!("dynamic variant {i}"), v.kernel.as_str(), v.block));
    }
    for (at, kernel, block) in checked {
        if let Some(want) = required.get(kernel) {
            if block.map(u64::from) != *want {
                return Err(Error::BadManifest(format!(
                    "{at}: launch of `{kernel}` in blocks of {block:?}, but the kernel was compiled for blocks of exactly {want:?} (`.reqntid`)"
                )));
            }
        }
    }
    Ok(())
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
        Some(t) if *t != manifest.target.arch => return bad(format!(".target {t} but the manifest says arch {}", manifest.target.arch)),
        Some(_) => {}
    }
    // Kernel arguments are 64-bit device pointers.
    if info.address_size.as_deref() != Some("64") {
        return bad(format!(".address_size is {}, expected 64", info.address_size.as_deref().unwrap_or("absent (32)")));
    }

    let mut entries: BTreeMap<&str, usize> = BTreeMap::new();
    let mut required: BTreeMap<&str, [u64; 3]> = BTreeMap::new();
    for e in info.entries() {
        if entries.insert(e.name.as_str(), e.params.len()).is_some() {
            return bad(format!(".entry {} is defined twice", e.name));
        }
        if let Some((_, dims)) = e.tuning.iter().find(|(d, _)| d == ".reqntid") {
            required.insert(e.name.as_str(), [0, 1, 2].map(|i| dims.get(i).copied().unwrap_or(1)));
        }
    }
    check_blocks(manifest, &required)?;
    for k in &manifest.kernels {
        match entries.remove(k.name.as_str()) {
            None => return bad(format!("no `.entry {}` for manifest kernel `{}`", k.name, k.name)),
            // Buffer pointers, then (format 2) dim values.
            Some(n) if n != k.params.len() + k.dims.len() => {
                return bad(format!(".entry {} has {n} parameters but the manifest lists {}", k.name, k.params.len() + k.dims.len()))
            }
            Some(_) => {}
        }
    }
    if let Some(extra) = entries.keys().next() {
        return bad(format!(".entry {extra} is not listed in the manifest's kernels"));
    }
    Ok(())
}
