//! `manifest.json`: the description of a bundle (see docs/bundle.md).
//!
//! The manifest lists the bundle's buffers (name, dtype, shape, role), its
//! kernels (name and parameter list) and the steps that run them. This module
//! holds the serde types, [`Manifest::parse`] and the validation that every
//! consumer relies on: after `parse` succeeds, every name a step uses exists,
//! every launch passes as many buffers as its kernel takes, every buffer's
//! byte size fits in memory, and the target architecture is well-formed.

use serde::{Deserialize, Deserializer, Serialize};
use std::collections::{BTreeMap, BTreeSet};

use crate::error::{Error, Result};
use eintup_tensor::tensor::{element_count, DType};

/// The `format_version` of a bundle whose kernels take no dim parameters:
/// what producers write for static programs.
pub const FORMAT_VERSION: u64 = 1;
/// The newest `format_version` this runtime reads: version 2 adds dim
/// parameters (`Kernel::dims`, `Step::Launch::dims`; docs/bundle.md,
/// docs/dynamic-shapes.md). A version-1 bundle is a version-2 bundle
/// without them.
pub const MAX_FORMAT_VERSION: u64 = 2;

/// Most threads in one block, on every compute capability since 2.0 (CUDA C
/// Programming Guide, "Technical Specifications per Compute Capability").
pub const MAX_BLOCK_THREADS: u64 = 1024;
/// Largest block extent per axis (x, y, z), same source.
pub const MAX_BLOCK_DIM: [u32; 3] = [1024, 1024, 64];
/// Largest grid extent per axis (x, y, z) since compute capability 3.0.
pub const MAX_GRID_DIM: [u32; 3] = [i32::MAX as u32, 65535, 65535];

/// Most bytes all buffers of one bundle may hold together: 4 GiB, the
/// compiler's memory limit for one configuration (its arrays and their
/// snapshots, E0306; docs/limits.md), so every bundle `eintup build` writes
/// fits, and a damaged or hand-made shape such as `[1099511627776]` is
/// refused when the bundle is opened rather than by an allocation.
pub const MAX_BUNDLE_BYTES: u64 = 4 << 30;

/// Most steps one bundle may have, `steps` and every generator's together:
/// each launch is a kernel run and a line of profile, so a hand-made
/// manifest of millions of steps would run without bound however small its
/// kernels. eintup writes a few per statement (tens for the largest
/// examples), so 100,000 leaves room for any program a person writes.
pub const MAX_STEPS: usize = 100_000;

/// The whole manifest. Unknown fields are ignored when reading, so that a
/// producer may add informative fields without a version bump (docs/bundle.md).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Manifest {
    pub format_version: u64,
    /// Who wrote the bundle, e.g. `"eintup 0.1.0"`; informative.
    pub producer: String,
    pub source: SourceInfo,
    pub config: Config,
    pub target: Target,
    pub buffers: Vec<Buffer>,
    pub kernels: Vec<Kernel>,
    pub steps: Vec<Step>,
    /// How inputs the caller does not supply are made on the device: one
    /// entry per input buffer defined by `RANDOM`. Optional (an older
    /// reader that ignores it still runs the bundle with every input given).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub generate: Vec<Generator>,
    /// Format 2: how the bundle re-binds to other dims (a dynamic bundle;
    /// docs/bundle.md, "Dynamic bundles"). Its static fields are the
    /// bundle at the configuration it was built for.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub dynamic: Option<Dynamic>,
}

/// What makes a bundle dynamic: its dim symbols, where each one's value
/// comes from, and every shape and launch size as a shape expression
/// ([`crate::shape`]) over them. [`Manifest::bind`] evaluates it.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Dynamic {
    /// The dim symbols by name (`x.0`), as kernels' `dims` name them.
    pub symbols: Vec<String>,
    /// For each symbol an input array gives: which input and axis, in
    /// order. A symbol no rule names must be given by the caller.
    pub derive: Vec<DimSource>,
    /// Every buffer's shape, by buffer name: one expression per axis.
    pub shapes: BTreeMap<String, Vec<String>>,
    /// For each of `steps`: the threads a launch wants (`null` for a fill).
    pub threads: Vec<Option<String>>,
    /// What must hold of the dims before anything runs (a derived dim is
    /// not negative, a divisor not zero), each about an eintup.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub checks: Vec<DimCheck>,
    /// A bundle built from a program (`eintup build --dynamic`): each
    /// eintup the caller determines (by inputs or `--bind`) or the build
    /// bound, as one shape expression per component; `exec` re-specialises
    /// the program with them. Empty for a loop module's bundle.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub eintups: BTreeMap<String, Vec<String>>,
    /// The bundle's kernels compute their indices in 32 bits where each of
    /// these is at most 2^31 - 1 at the bound dims (docs/bundle.md,
    /// "Dynamic bundles"); [`Manifest::bind`] refuses dims where one is
    /// not. Empty: 64-bit kernels (and bundles from before the field).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub index32: Vec<IndexLimit>,
    /// Alternative kernels for launch steps, each launched instead of the
    /// step's own where its condition holds (docs/bundle.md, "Run-time
    /// variants"); [`Manifest::bind`] takes the first that holds. Empty in
    /// bundles from before the field, whose steps keep their kernels.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub variants: Vec<Variant>,
}

/// Kernel `kernel` computes what step `step`'s kernel does, with another
/// tiling: launched with its own parameters (by name, as the step passes
/// its kernel's), `threads` threads (a shape expression) in blocks of
/// `block`, where every expression of `when` is non-negative at the bound
/// dims.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Variant {
    pub step: usize,
    pub kernel: String,
    pub threads: String,
    pub block: [u32; 3],
    pub when: Vec<String>,
}

/// `expr` bounds values of kernel `kernel`'s 32-bit index arithmetic;
/// `buffer` names a buffer whose last offset it is at most, when there is
/// one (what the error then names).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct IndexLimit {
    pub expr: String,
    pub kernel: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub buffer: Option<String>,
}

/// `expr` must be at least `min` at the bound dims; `about` names the
/// eintup, `rule` the program's rule it comes from.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct DimCheck {
    pub expr: String,
    pub min: i64,
    pub about: String,
    pub rule: String,
}

/// `sym` is the extent of axis `axis` of input `input`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct DimSource {
    pub sym: String,
    pub input: String,
    pub axis: usize,
}

/// Steps that fill one input buffer with the values of its `RANDOM`
/// definition under `config.seed` (bit-identical to the compiler's
/// interpreter), run once before `steps` when the caller leaves the input out.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Generator {
    pub buffer: String,
    pub steps: Vec<Step>,
}

/// The `.et` program the bundle was compiled from; informative.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct SourceInfo {
    pub name: String,
    pub text: String,
}

/// The specialisation the bundle was compiled for; informative (the shapes
/// that matter are the buffers').
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Config {
    /// Seed of the `RANDOM` inputs the producer generated.
    pub seed: u64,
    /// The floating-point type `FLOAT` was compiled as (`f32` or `f64`).
    pub float: DType,
    /// Every eintup's dimensions.
    pub eintups: BTreeMap<String, Vec<i64>>,
    /// Whether float multiplies were fused with adds (`"fast"`) or not
    /// (`"off"`): results equal the interpreter's bit for bit only with
    /// `"off"`. Absent in bundles of earlier producers.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub fp_contract: Option<String>,
}

/// The GPU the PTX was generated for.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Target {
    /// `sm_NN` (or `sm_NNN`): the oldest compute capability that can run it.
    pub arch: String,
    /// The PTX ISA version in `kernels.ptx`'s `.version` line, e.g. `"7.0"`.
    pub ptx_version: String,
}

/// What a buffer is for.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Role {
    /// Supplied by the caller.
    Input,
    /// A result of the program.
    Output,
    /// Scratch memory between kernels.
    Temp,
}

/// How a buffer starts out before the first step.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "lowercase")]
pub enum Init {
    /// The caller supplies the contents; `random` records how the producer
    /// generated them, for information only.
    Input {
        #[serde(default, skip_serializing_if = "Option::is_none")]
        random: Option<RandomSpec>,
    },
    /// All bytes zero.
    Zero,
}

/// The `RANDOM(lo, hi, type)` call that defines an input, as source text.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct RandomSpec {
    pub lo: String,
    pub hi: String,
    #[serde(rename = "type")]
    pub ty: String,
}

/// One device buffer: a dense row-major array.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Buffer {
    pub name: String,
    pub dtype: DType,
    #[serde(deserialize_with = "non_negative_shape")]
    pub shape: Vec<usize>,
    pub role: Role,
    pub init: Init,
}

impl Buffer {
    /// Number of elements (validated not to overflow by [`Manifest::parse`];
    /// saturates for a manifest built by hand and never validated).
    pub fn len(&self) -> usize {
        element_count(&self.shape).unwrap_or(usize::MAX)
    }

    /// Whether the buffer has no elements (it is then passed as a null pointer).
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Size in bytes, `None` on overflow.
    pub fn byte_size(&self) -> Option<usize> {
        element_count(&self.shape)?.checked_mul(self.dtype.size())
    }
}

/// One PTX kernel of `kernels.ptx`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Kernel {
    /// The `.entry` name.
    pub name: String,
    /// Formal parameter names, one device pointer each, in order.
    pub params: Vec<String>,
    /// Register count and spills reported by ptxas; `null` when the producer
    /// had no ptxas.
    pub registers: Option<u32>,
    pub spill_stores: Option<u32>,
    pub spill_loads: Option<u32>,
    /// For each parameter, the buffer the kernel was compiled for: its
    /// element type and element count. A launch must pass a buffer of that
    /// type with at least that many elements (the kernel's offsets are
    /// within them). Optional: absent in bundles of earlier producers.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub param_types: Vec<ParamType>,
    /// The kernel loops over its grid (grid-stride over threads or over
    /// blocks), so a launch may use fewer blocks than its step's grid and
    /// still do all the work: a runtime then caps the grid at the blocks
    /// the device runs at once. Optional: absent (false) in bundles of
    /// earlier producers and hand-written ones.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub grid_stride: bool,
    /// Format 2: the dim symbols the kernel takes after its buffers (one
    /// `.param .u64` each, in this order), by name (`batch.0`).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub dims: Vec<String>,
}

/// What a kernel parameter points to: a buffer of `dtype` with at least
/// `elements` elements.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ParamType {
    pub dtype: DType,
    pub elements: u64,
}

/// One step of the program, run in order on one stream.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(tag = "op", rename_all = "lowercase")]
pub enum Step {
    /// Set every byte of `buffer` to `value` (only 0 in format version 1).
    Fill { buffer: String, value: i64 },
    /// Launch `kernel` with the device pointers of `args`, then (format 2)
    /// the values of its `dims`. Skipped when any grid or block component
    /// is 0 (an empty iteration space).
    Launch {
        kernel: String,
        grid: [u32; 3],
        block: [u32; 3],
        args: Vec<String>,
        #[serde(default, skip_serializing_if = "Vec::is_empty")]
        dims: Vec<i64>,
    },
}

impl Step {
    /// Whether this is a launch that is skipped because it has no threads.
    pub fn is_empty_launch(&self) -> bool {
        match self {
            Step::Launch { grid, block, .. } => grid.contains(&0) || block.contains(&0),
            Step::Fill { .. } => false,
        }
    }
}

/// Reads a shape as signed integers so that a negative dimension gets a
/// message of its own rather than serde's "expected usize".
fn non_negative_shape<'de, D: Deserializer<'de>>(d: D) -> std::result::Result<Vec<usize>, D::Error> {
    let dims = Vec::<i64>::deserialize(d)?;
    dims.iter().map(|&x| usize::try_from(x).map_err(|_| serde::de::Error::custom(format!("shape {dims:?} has a negative dimension {x}")))).collect()
}

/// Just the version, read before anything else so that a manifest of another
/// version is reported as such instead of as a missing field.
#[derive(Deserialize)]
struct VersionProbe {
    format_version: u64,
}

impl Manifest {
    /// Parses and validates `manifest.json` text.
    pub fn parse(text: &str) -> Result<Manifest> {
        let probe: VersionProbe = serde_json::from_str(text).map_err(|e| Error::BadManifest(e.to_string()))?;
        if !(FORMAT_VERSION..=MAX_FORMAT_VERSION).contains(&probe.format_version) {
            return Err(Error::UnsupportedVersion { found: probe.format_version, supported: MAX_FORMAT_VERSION });
        }
        let manifest: Manifest = serde_json::from_str(text).map_err(|e| Error::BadManifest(e.to_string()))?;
        manifest.validate()?;
        Ok(manifest)
    }

    /// Pretty-printed JSON, as a producer writes it.
    pub fn to_json(&self) -> Result<String> {
        serde_json::to_string_pretty(self).map_err(|e| Error::BadManifest(e.to_string()))
    }

    /// The buffer called `name`.
    pub fn buffer(&self, name: &str) -> Option<&Buffer> {
        self.buffers.iter().find(|b| b.name == name)
    }

    /// The index of the buffer called `name` among `buffers`.
    pub fn buffer_index(&self, name: &str) -> Option<usize> {
        self.buffers.iter().position(|b| b.name == name)
    }

    /// The kernel called `name`.
    pub fn kernel(&self, name: &str) -> Option<&Kernel> {
        self.kernels.iter().find(|k| k.name == name)
    }

    /// The input buffers, in manifest order.
    pub fn inputs(&self) -> impl Iterator<Item = &Buffer> {
        self.buffers.iter().filter(|b| b.role == Role::Input)
    }

    /// The steps that generate input buffer `name` on the device, if any.
    pub fn generator(&self, name: &str) -> Option<&Generator> {
        self.generate.iter().find(|g| g.buffer == name)
    }

    /// The target as `(major, minor)` compute capability.
    pub fn target_arch(&self) -> Result<(u32, u32)> {
        parse_arch(&self.target.arch).ok_or_else(|| Error::BadManifest(format!("target.arch `{}` is not of the form sm_NN", self.target.arch)))
    }

    /// Checks everything that does not need `kernels.ptx` or a device.
    /// [`Manifest::parse`] calls it; a producer that builds a `Manifest` in
    /// memory should call it before writing.
    pub fn validate(&self) -> Result<()> {
        let bad = |msg: String| Err(Error::BadManifest(msg));
        if !(FORMAT_VERSION..=MAX_FORMAT_VERSION).contains(&self.format_version) {
            return Err(Error::UnsupportedVersion { found: self.format_version, supported: MAX_FORMAT_VERSION });
        }
        self.target_arch()?;
        if parse_ptx_version(&self.target.ptx_version).is_none() {
            return bad(format!("target.ptx_version `{}` is not of the form MAJOR.MINOR", self.target.ptx_version));
        }
        if !matches!(self.config.float, DType::F32 | DType::F64) {
            return bad(format!("config.float is {}, expected f32 or f64", self.config.float));
        }

        let mut buffer_names = BTreeSet::new();
        let mut total_bytes: u64 = 0;
        for b in &self.buffers {
            // A buffer's name becomes a file name (`etrun --out DIR` writes
            // DIR/NAME.npy) and terminal text: the compiler's rule for
            // array names, so `../x`, `/abs/p` and escapes never get there.
            if !eintup_tensor::names::is_ident(&b.name) {
                return bad(format!("buffer name {:?} is not an identifier (`_` or a letter, then `_`, letters and digits)", b.name));
            }
            if !buffer_names.insert(b.name.as_str()) {
                return bad(format!("buffer `{}` is declared twice", b.name));
            }
            // Vec<u8> (the download buffer) cannot exceed isize::MAX bytes.
            match b.byte_size() {
                Some(n) if n <= isize::MAX as usize => total_bytes = total_bytes.saturating_add(n as u64),
                _ => return bad(format!("buffer `{}`: shape {:?} of {} is too large", b.name, b.shape, b.dtype)),
            }
            if total_bytes > MAX_BUNDLE_BYTES {
                return bad(format!(
                    "buffer `{}`: shape {:?} of {} brings the buffers to {total_bytes} bytes, more than the limit of {MAX_BUNDLE_BYTES}",
                    b.name, b.shape, b.dtype
                ));
            }
            let input_init = matches!(b.init, Init::Input { .. });
            if (b.role == Role::Input) != input_init {
                return bad(format!(
                    "buffer `{}`: role {} needs init kind {}",
                    b.name,
                    role_name(b.role),
                    if b.role == Role::Input { "input" } else { "zero" }
                ));
            }
        }

        let mut kernel_names = BTreeSet::new();
        for k in &self.kernels {
            if !is_ptx_identifier(&k.name) {
                return bad(format!("kernel name `{}` is not a PTX identifier", k.name));
            }
            if !kernel_names.insert(k.name.as_str()) {
                return bad(format!("kernel `{}` is declared twice", k.name));
            }
            let mut params = BTreeSet::new();
            for p in &k.params {
                if !params.insert(p.as_str()) {
                    return bad(format!("kernel `{}`: parameter `{p}` is listed twice", k.name));
                }
            }
            if !k.dims.is_empty() && self.format_version < 2 {
                return bad(format!("kernel `{}` takes dims, which need format_version 2", k.name));
            }
            if let Some(d) = k.dims.iter().find(|d| !params.insert(d.as_str())) {
                return bad(format!("kernel `{}`: `{d}` is listed twice among its parameters and dims", k.name));
            }
            if !k.param_types.is_empty() && k.param_types.len() != k.params.len() {
                return bad(format!("kernel `{}`: {} parameters but {} param_types", k.name, k.params.len(), k.param_types.len()));
            }
        }

        if let Some(d) = &self.dynamic {
            d.validate(self)?;
        }
        let steps = self.generate.iter().fold(self.steps.len(), |n, g| n.saturating_add(g.steps.len()));
        if steps > MAX_STEPS {
            return bad(format!("{steps} steps (generators included), more than the limit of {MAX_STEPS}"));
        }
        self.validate_steps("step", &self.steps, &buffer_names)?;
        let mut generated = BTreeSet::new();
        for g in &self.generate {
            match self.buffer(&g.buffer) {
                None => return bad(format!("generate: unknown buffer `{}`", g.buffer)),
                Some(b) if b.role != Role::Input => return bad(format!("generate: buffer `{}` is not an input", g.buffer)),
                Some(_) => {}
            }
            if !generated.insert(g.buffer.as_str()) {
                return bad(format!("generate: buffer `{}` has two generators", g.buffer));
            }
            self.validate_steps(&format!("generate `{}` step", g.buffer), &g.steps, &buffer_names)?;
        }
        Ok(())
    }

    /// Every step names known buffers and kernels and launches within
    /// CUDA's limits; `what` prefixes the messages (`step 3: ...`).
    fn validate_steps(&self, what: &str, steps: &[Step], buffer_names: &BTreeSet<&str>) -> Result<()> {
        let bad = |msg: String| Err(Error::BadManifest(msg));
        for (i, step) in steps.iter().enumerate() {
            match step {
                Step::Fill { buffer, value } => {
                    if !buffer_names.contains(buffer.as_str()) {
                        return bad(format!("{what} {i}: fill of unknown buffer `{buffer}`"));
                    }
                    if *value != 0 {
                        return bad(format!("{what} {i}: fill of `{buffer}` with {value}; format version 1 fills with 0 only"));
                    }
                }
                Step::Launch { kernel, grid, block, args, dims } => {
                    let Some(k) = self.kernel(kernel) else {
                        return bad(format!("{what} {i}: launch of unknown kernel `{kernel}`"));
                    };
                    if dims.len() != k.dims.len() {
                        return bad(format!(
                            "{what} {i}: kernel `{kernel}` takes {} dims ({}), the launch passes {}",
                            k.dims.len(),
                            k.dims.join(", "),
                            dims.len()
                        ));
                    }
                    if let Some((d, v)) = k.dims.iter().zip(dims).find(|(_, &v)| v < 0) {
                        return bad(format!("{what} {i}: launch of `{kernel}` passes {v} for dim `{d}`; dims are non-negative"));
                    }
                    if args.len() != k.params.len() {
                        return bad(format!(
                            "{what} {i}: kernel `{kernel}` takes {} arguments ({}), the launch passes {}",
                            k.params.len(),
                            k.params.join(", "),
                            args.len()
                        ));
                    }
                    if let Some(a) = args.iter().find(|a| !buffer_names.contains(a.as_str())) {
                        return bad(format!("{what} {i}: launch of `{kernel}` passes unknown buffer `{a}`"));
                    }
                    // The kernel reads and writes within the buffers it was
                    // compiled for: each argument must be of that type and
                    // at least that large.
                    for ((a, t), p) in args.iter().zip(&k.param_types).zip(&k.params) {
                        let Some(b) = self.buffer(a) else { continue };
                        if b.dtype != t.dtype {
                            return bad(format!(
                                "{what} {i}: launch of `{kernel}` passes buffer `{a}` of {} for parameter `{p}`, compiled for {}",
                                b.dtype, t.dtype
                            ));
                        }
                        // Exactly: a smaller one would be overrun, a larger
                        // one returned with cells no kernel wrote.
                        if b.len() as u64 != t.elements {
                            return bad(format!(
                                "{what} {i}: launch of `{kernel}` passes buffer `{a}` of {} elements (shape {:?}) for parameter `{p}`, compiled for a buffer of {} elements",
                                b.len(),
                                b.shape,
                                t.elements
                            ));
                        }
                    }
                    check_launch_dims(&format!("{what} {i}"), kernel, grid, block)?;
                    // A grid-stride kernel decides its own work from its
                    // arguments: skipping it as empty would leave its cells
                    // unwritten.
                    if k.grid_stride && (grid.contains(&0) || block.contains(&0)) {
                        return bad(format!(
                            "{what} {i}: launch of grid-stride kernel `{kernel}` with grid {grid:?} and block {block:?}: it needs at least one thread"
                        ));
                    }
                }
            }
        }
        Ok(())
    }
}

/// Rejects grids and blocks no CUDA device can launch, so that the error
/// names the step instead of being a bare CUDA_ERROR_INVALID_VALUE.
pub(crate) fn check_launch_dims(at: &str, kernel: &str, grid: &[u32; 3], block: &[u32; 3]) -> Result<()> {
    let bad = |msg: String| Err(Error::BadManifest(format!("{at}: launch of `{kernel}`: {msg}")));
    for axis in 0..3 {
        if grid[axis] > MAX_GRID_DIM[axis] {
            return bad(format!("grid {grid:?} exceeds the CUDA limit {MAX_GRID_DIM:?}"));
        }
        if block[axis] > MAX_BLOCK_DIM[axis] {
            return bad(format!("block {block:?} exceeds the CUDA limit {MAX_BLOCK_DIM:?}"));
        }
    }
    let threads: u64 = block.iter().map(|&d| u64::from(d)).product();
    if threads > MAX_BLOCK_THREADS {
        return bad(format!("block {block:?} has {threads} threads, more than {MAX_BLOCK_THREADS}"));
    }
    Ok(())
}

fn role_name(r: Role) -> &'static str {
    match r {
        Role::Input => "input",
        Role::Output => "output",
        Role::Temp => "temp",
    }
}

/// `sm_NN` / `sm_NNN` to `(major, minor)`: `sm_80` is (8, 0), `sm_120` is
/// (12, 0). Architecture-specific variants (`sm_90a`) are not accepted: their
/// PTX does not run on later GPUs, which the forward-compatibility rule of
/// [`crate::check::check_target`] assumes.
pub fn parse_arch(arch: &str) -> Option<(u32, u32)> {
    let digits = arch.strip_prefix("sm_")?;
    if !(2..=3).contains(&digits.len()) || !digits.bytes().all(|c| c.is_ascii_digit()) || digits.starts_with('0') {
        return None;
    }
    let n: u32 = digits.parse().ok()?;
    Some((n / 10, n % 10))
}

/// `"7.0"` to `(7, 0)`.
pub fn parse_ptx_version(v: &str) -> Option<(u32, u32)> {
    let (major, minor) = v.split_once('.')?;
    let num = |s: &str| -> Option<u32> {
        if s.is_empty() || !s.bytes().all(|c| c.is_ascii_digit()) {
            return None;
        }
        s.parse().ok()
    };
    Some((num(major)?, num(minor)?))
}

/// PTX identifiers: `[a-zA-Z][a-zA-Z0-9_$]*` or `[_$%][a-zA-Z0-9_$]+`
/// (PTX ISA, "Identifiers").
pub fn is_ptx_identifier(s: &str) -> bool {
    let mut chars = s.chars();
    let Some(first) = chars.next() else { return false };
    let rest_ok = |c: char| c.is_ascii_alphanumeric() || c == '_' || c == '$';
    if first.is_ascii_alphabetic() {
        chars.all(rest_ok)
    } else if matches!(first, '_' | '$' | '%') {
        s.len() > 1 && chars.all(rest_ok)
    } else {
        false
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn arch_forms() {
        assert_eq!(parse_arch("sm_80"), Some((8, 0)));
        assert_eq!(parse_arch("sm_86"), Some((8, 6)));
        assert_eq!(parse_arch("sm_120"), Some((12, 0)));
        for bad in ["sm80", "sm_8", "sm_90a", "compute_80", "sm_08", "sm_1000", ""] {
            assert_eq!(parse_arch(bad), None, "{bad}");
        }
    }

    #[test]
    fn ptx_version_forms() {
        assert_eq!(parse_ptx_version("7.0"), Some((7, 0)));
        assert_eq!(parse_ptx_version("8.5"), Some((8, 5)));
        for bad in ["7", "7.", ".0", "7.0.1", "a.b", ""] {
            assert_eq!(parse_ptx_version(bad), None, "{bad}");
        }
    }

    #[test]
    fn identifiers() {
        assert!(is_ptx_identifier("s2_y"));
        assert!(is_ptx_identifier("_k"));
        assert!(!is_ptx_identifier("_"));
        assert!(!is_ptx_identifier("2k"));
        assert!(!is_ptx_identifier("a-b"));
        assert!(!is_ptx_identifier(""));
    }
}
