//! Subcommands of the `eintup` binary, one module each. The argument
//! structs live here so the contract of docs/architecture.md section 5 reads in one
//! place; each module's `main` does the work.

use clap::builder::{PossibleValuesParser, TypedValueParser};
use clap::Args;
use std::path::PathBuf;

pub use eintup::ir::loops::FloatWidth;
pub use eintup_codegen::backend::Backend;
pub use eintup_codegen::FpContract;
pub use eintup_runtime::DeviceKind;

pub mod build;
pub mod check;
pub mod exec;
pub mod grad;
pub mod run;
pub mod shapes;

/// The backend `run` and `check` use without `--backend`: the fastest one
/// every build has. LLVM's host JIT is always built in, and beats the
/// interpreter by far on anything but tiny inputs (a 300^3 matmul: 0.26 s
/// against 8.4 s; its fixed cost is a few tens of milliseconds of
/// compiling). The GPU is never the default: it needs a device, and with
/// `--fp-contract fast` its float results differ in rounding
/// (docs/cli.md#default-backend).
pub const DEFAULT_BACKEND: &str = "cpu";

/// The on-disk cache of host programs that `run` consults
/// (`--backend cpu`; docs/cli.md, "The compile cache"), or `None` where
/// `EINTUP_CACHE_DIR=""` turns it off. Its build identity is this
/// executable's size and modification time, so that a rebuilt `eintup`
/// never loads code an older build stored.
pub fn host_cache() -> Result<Option<eintup_codegen::host_cache::HostCache>, eintup::driver::Failure> {
    let exe = std::env::current_exe().and_then(std::fs::metadata);
    let stamp = exe.as_ref().ok().and_then(|m| m.modified().ok()).and_then(|t| t.duration_since(std::time::UNIX_EPOCH).ok());
    let build = match (exe.as_ref().map(|m| m.len()), stamp) {
        (Ok(len), Some(t)) => format!("eintup {len} {}.{:09}", t.as_secs(), t.subsec_nanos()),
        // No identity for this build: a key no other build shares.
        _ => format!("eintup unidentified {}", std::process::id()),
    };
    eintup_codegen::host_cache::HostCache::from_env(build).map_err(|e| eintup::driver::Failure::user(format!("eintup: error: {e}")))
}

/// `--backend interp|cpu|gpu|emu` (the enum is the codegen crate's);
/// `cuda` is `gpu`, as `exec --device` spells it.
fn backend_parser() -> impl TypedValueParser<Value = Backend> {
    let values = Backend::ALL.map(|b| {
        let v = clap::builder::PossibleValue::new(b.name());
        if b == Backend::Gpu {
            v.alias("cuda")
        } else {
            v
        }
    });
    PossibleValuesParser::new(values).map(|s| s.parse::<Backend>().expect("one of the possible values"))
}

/// `--max-work N|none`: most loop iterations (compiled backends) or
/// instantiations (the interpreter) a run may do; `none` for no limit.
fn max_work_parser(s: &str) -> Result<u64, String> {
    if s == "none" {
        return Ok(eintup::driver::NO_WORK_LIMIT);
    }
    s.parse::<u64>().map_err(|_| format!("`{s}` is not a count of iterations (a non-negative integer, or `none` for no limit)"))
}

/// `--rtol R`, `--atol A`: a finite, non-negative number.
fn tolerance_parser(s: &str) -> Result<f64, String> {
    match s.parse::<f64>() {
        Ok(x) if x.is_finite() && x >= 0.0 => Ok(x),
        _ => Err(format!("`{s}` is not a tolerance (a finite number >= 0, e.g. 1e-6)")),
    }
}

/// A `check --call-*` limit; `Limit(None)` is `none`. (A newtype: clap
/// takes a bare `Option` field for an optional flag.)
#[derive(Clone, Copy, Debug)]
pub struct Limit<T>(pub Option<T>);

/// The help text of `--max-work`.
const MAX_WORK_HELP: &str = "Refuse to run a configuration that needs more than N loop iterations (interpreter: instantiations) in all, estimated before running (default 2^40 = 1099511627776; `none`: no limit; docs/limits.md)";

/// `--float f64|f32` (the enum is the loop dialect's).
pub fn float_parser() -> impl TypedValueParser<Value = FloatWidth> {
    PossibleValuesParser::new(["f64", "f32"]).map(|s| s.parse::<FloatWidth>().expect("one of the possible values"))
}

#[derive(Args, Debug)]
pub struct ShapesArgs {
    pub file: PathBuf,
    /// Draws of dims per rank combination.
    #[arg(long, default_value_t = 1)]
    pub reps: usize,
    #[arg(long, default_value_t = 0)]
    pub seed: u64,
    /// Print a JSON list of {"name": [dims]} objects instead of a table.
    #[arg(long)]
    pub json: bool,
    /// Mark each dims with how it was determined (constrained, inferred,
    /// drawn); with --json, objects {"eintups": {..}, "sources": {..}}.
    #[arg(long)]
    pub explain: bool,
}

#[derive(Args, Debug)]
pub struct CheckArgs {
    /// The programs to check. Several are checked one after the other by
    /// one framework process (TensorFlow is imported once), each under a
    /// `== FILE` header; the exit code is the worst of theirs.
    #[arg(required = true, value_name = "FILE")]
    pub files: Vec<PathBuf>,
    /// Draws of dims per rank combination.
    #[arg(long, default_value_t = 1, conflicts_with = "bind")]
    pub reps: usize,
    /// Seed for dims and for RANDOM array contents.
    #[arg(long, default_value_t = 0)]
    pub seed: u64,
    /// Check one configuration: fix an eintup's dims, NAME=[d1,d2,...]
    /// (repeatable; the others are chosen as `run` chooses them). Binding
    /// every eintup of a row of the table re-runs that row.
    #[arg(long = "bind", value_name = "NAME=[..]")]
    pub bind: Vec<String>,
    /// Where each configuration runs: `cpu` (the default: LLVM host code,
    /// JIT-compiled), `interp` (the reference interpreter, the definition
    /// of the language), `gpu` (CUDA) or `emu` (the PTX emulator).
    #[arg(long, value_parser = backend_parser(), default_value = DEFAULT_BACKEND)]
    pub backend: Backend,
    /// Width FLOAT runs at, in eintup and in the framework (its arrays are
    /// passed as float32 or float64).
    #[arg(long = "float", value_parser = float_parser(), default_value = "f64")]
    pub float: FloatWidth,
    /// Relative tolerance for FLOAT outputs (default 1e-6; 1e-5 with
    /// --float f32).
    #[arg(long, value_name = "R", value_parser = tolerance_parser)]
    pub rtol: Option<f64>,
    /// Absolute tolerance for FLOAT outputs (default 1e-9; 1e-5 with
    /// --float f32).
    #[arg(long, value_name = "A", value_parser = tolerance_parser)]
    pub atol: Option<f64>,
    /// Print JSON Lines instead of the table: one object per configuration
    /// as it finishes (the configuration, each output's verdict and largest
    /// error, the first difference of a mismatch), then {"summary": ..};
    /// the summary line also goes to stderr.
    #[arg(long)]
    pub json: bool,
    #[arg(long = "max-work", value_name = "N|none", value_parser = max_work_parser, default_value_t = eintup::driver::DEFAULT_MAX_WORK, help = MAX_WORK_HELP)]
    pub max_work: u64,
    /// Print no warnings and, when stderr is not a terminal, no line per
    /// finished row on stderr (errors, the table and the summary still print).
    #[arg(short = 'q', long)]
    pub quiet: bool,
    /// Stop a framework call that has not answered after SECONDS (its
    /// process is killed and replaced; the row is a framework error).
    /// Default 60; `none`: no limit (docs/check.md#limits).
    #[arg(long = "call-timeout", value_name = "SECONDS|none", value_parser = |s: &str| eintup::check::limits::parse_seconds(s).map(Limit), default_value = "60")]
    pub call_timeout: Limit<std::time::Duration>,
    /// Memory a framework call may allocate beyond what TensorFlow holds
    /// after importing (e.g. 512MiB, 8GiB); an allocation over it fails the
    /// call. Default 8GiB; `none`: no limit (docs/check.md#limits).
    #[arg(long = "call-memory", value_name = "SIZE|none", value_parser = |s: &str| eintup::check::limits::parse_size(s).map(Limit), default_value = "8GiB")]
    pub call_memory: Limit<u64>,
    /// Keep each mismatching row's arrays in DIR/row-K/ (eintup's every
    /// array, the framework's results, the configuration) for a closer look.
    #[arg(long = "keep", value_name = "DIR")]
    pub keep: Option<PathBuf>,
    /// Compare gradients instead of results: the program's adjoint (as
    /// `eintup grad` writes it) with respect to the call's FLOAT input
    /// arguments, against `tf.GradientTape` over the call with the same
    /// cotangents (docs/check.md#gradients).
    #[arg(long)]
    pub grad: bool,
}

#[derive(Args, Debug)]
pub struct RunArgs {
    pub file: PathBuf,
    /// Fix an eintup's dims: NAME=[d1,d2,...] (NAME=[] is rank 0).
    #[arg(long = "bind", value_name = "NAME=[..]")]
    pub bind: Vec<String>,
    #[arg(long, default_value_t = 0)]
    pub seed: u64,
    /// Where the program runs: `cpu` (the default: LLVM host code,
    /// JIT-compiled), `interp` (the reference interpreter, the definition
    /// of the language), `gpu` (CUDA) or `emu` (the PTX emulator).
    #[arg(long, value_parser = backend_parser(), default_value = DEFAULT_BACKEND)]
    pub backend: Backend,
    #[arg(long = "float", value_parser = float_parser(), default_value = "f64")]
    pub float: FloatWidth,
    /// Compiled code: may a float multiply fuse with the add of its result
    /// (`fast`: the default of `gpu` and `emu`), or must every product be
    /// rounded first, bit for bit as the interpreter (`off`: the default
    /// of `cpu`, where `fast` is an opt-in)?
    #[arg(long = "fp-contract", value_parser = fp_contract_parser(), value_name = "off|fast")]
    pub fp_contract: Option<FpContract>,
    /// Supply an input array: NAME=PATH.npy.
    #[arg(long = "input", value_name = "NAME=PATH.npy")]
    pub input: Vec<String>,
    /// How arrays print: `summary` (default: arrays of more than 1000
    /// elements show the first and last 3 entries of each axis, as NumPy
    /// prints them) or `full` (every element).
    #[arg(long = "print", value_parser = ["summary", "full"], default_value = "summary")]
    pub print: String,
    /// Write every array as DIR/NAME.npy plus DIR/config.json.
    #[arg(long, value_name = "DIR")]
    pub out: Option<PathBuf>,
    #[arg(long = "max-work", value_name = "N|none", value_parser = max_work_parser, default_value_t = eintup::driver::DEFAULT_MAX_WORK, help = MAX_WORK_HELP)]
    pub max_work: u64,
    /// Print no warnings and no `configuration:` line on stderr (errors,
    /// and the results, still print).
    #[arg(short = 'q', long)]
    pub quiet: bool,
}

#[derive(Args, Debug)]
pub struct BuildArgs {
    pub file: PathBuf,
    /// Fix an eintup's dims: NAME=[d1,d2,...] (NAME=[] is rank 0).
    #[arg(long = "bind", value_name = "NAME=[..]")]
    pub bind: Vec<String>,
    #[arg(long, default_value_t = 0)]
    pub seed: u64,
    #[arg(long = "float", value_parser = float_parser(), default_value = "f64")]
    pub float: FloatWidth,
    /// May a float multiply fuse with the add of its result into one
    /// `fma` (`fast`), or must every product be rounded first, bit for bit
    /// as the interpreter (`off`)?
    #[arg(long = "fp-contract", value_parser = fp_contract_parser(), default_value = "fast")]
    pub fp_contract: FpContract,
    /// GPU architecture: sm_60 .. sm_90.
    #[arg(long, default_value = "sm_80", value_name = "sm_XX")]
    pub target: String,
    /// The bundle directory to write (conventionally NAME.etb).
    #[arg(short = 'o', value_name = "OUT.etb")]
    pub output: PathBuf,
    /// For a loop module with dim symbols (`.etir`): the value of `%NAME`
    /// at the configuration the dynamic bundle records (default 1; `etrun`
    /// re-binds it to its inputs' shapes). Repeatable.
    #[arg(long = "dim", value_name = "NAME=N")]
    pub dim: Vec<String>,
    /// One bundle for many shapes: fix every eintup's rank (`--rank`,
    /// `--bind`, constraints) and leave the dims of eintups not bound
    /// symbolic, taken at run time from the inputs' shapes or `--bind`
    /// (docs/dynamic-shapes.md).
    #[arg(long)]
    pub dynamic: bool,
    /// With --dynamic: fix an eintup's rank, NAME=R. Repeatable.
    #[arg(long = "rank", value_name = "NAME=R", requires = "dynamic")]
    pub rank: Vec<String>,
    /// Also build the adjoint with respect to these FLOAT inputs
    /// (`eintup grad`, docs/gradients.md) into OUT.grad.etb, at the same
    /// configuration.
    #[arg(long, value_delimiter = ',', value_name = "NAME")]
    pub grad: Vec<String>,
    /// No float atomics: a float scatter (a `+=` through an index array,
    /// as a gather's gradient) runs its scattered loops in order inside
    /// each thread, so its sums do not depend on thread timing
    /// (docs/gradients.md#scatters-and-gathers).
    #[arg(long)]
    pub deterministic: bool,
}

/// `--fp-contract off|fast` (the codegen crate's `FpContract`).
pub fn fp_contract_parser() -> impl TypedValueParser<Value = FpContract> {
    PossibleValuesParser::new(["off", "fast"]).map(|s| s.parse::<FpContract>().expect("one of the possible values"))
}

/// `--device cuda|emu` (the runtime's `DeviceKind`); `gpu` is `cuda`, as
/// `run --backend` spells it.
fn device_parser() -> impl TypedValueParser<Value = DeviceKind> {
    PossibleValuesParser::new([clap::builder::PossibleValue::new("cuda").alias("gpu"), clap::builder::PossibleValue::new("emu")])
        .map(|s| s.parse::<DeviceKind>().expect("one of the possible values"))
}

#[derive(Args, Debug)]
pub struct ExecArgs {
    /// A bundle directory written by `eintup build`.
    pub bundle: PathBuf,
    /// Where to run: a CUDA GPU, or the PTX emulator (docs/emulator.md).
    #[arg(long, value_parser = device_parser(), default_value = "cuda")]
    pub device: DeviceKind,
    /// Print the emulator's per-kernel profile on stderr (`--device emu`).
    #[arg(long)]
    pub profile: bool,
    /// Write the emulator's profile as JSON (`--device emu`).
    #[arg(long, value_name = "FILE")]
    pub profile_json: Option<PathBuf>,
    /// Supply an input array: NAME=PATH.npy.
    #[arg(long = "input", value_name = "NAME=PATH.npy")]
    pub input: Vec<String>,
    /// For a dynamic bundle: the dims of an eintup no input gives,
    /// NAME=[d1,..]. Repeatable.
    #[arg(long = "bind", value_name = "NAME=[..]")]
    pub bind: Vec<String>,
    /// Seed for RANDOM inputs not supplied (default: the bundle's).
    #[arg(long)]
    pub seed: Option<u64>,
    /// How arrays print: `summary` (default: arrays of more than 1000
    /// elements show the first and last 3 entries of each axis, as NumPy
    /// prints them) or `full` (every element).
    #[arg(long = "print", value_parser = ["summary", "full"], default_value = "summary")]
    pub print: String,
    /// Write every array as DIR/NAME.npy plus DIR/config.json.
    #[arg(long, value_name = "DIR")]
    pub out: Option<PathBuf>,
    #[arg(long = "max-work", value_name = "N|none", value_parser = max_work_parser, default_value_t = eintup::driver::DEFAULT_MAX_WORK, help = MAX_WORK_HELP)]
    pub max_work: u64,
}

#[derive(Args, Debug)]
pub struct GradArgs {
    pub file: PathBuf,
    /// The FLOAT inputs to differentiate with respect to (comma-separated,
    /// repeatable).
    #[arg(long, required = true, value_delimiter = ',', value_name = "NAME")]
    pub wrt: Vec<String>,
    /// The outputs to differentiate (default: the program's FLOAT results).
    #[arg(long, value_delimiter = ',', value_name = "NAME")]
    pub of: Vec<String>,
    /// Write the adjoint program here instead of standard output.
    #[arg(short = 'o', long = "output", value_name = "OUT.et")]
    pub output: Option<PathBuf>,
    /// Print to stderr how each adjoint statement writes its gradient
    /// (gather, rewritten from a scatter, scatter) and why.
    #[arg(long)]
    pub stats: bool,
}
