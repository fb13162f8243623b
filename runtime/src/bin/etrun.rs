//! `etrun`: runs a PTX bundle with the runtime alone — no compiler, no
//! LLVM — so it can be copied to a GPU machine that has only a driver
//! (docs/runtime.md, docs/gpu-check.md), or run it on the PTX emulator
//! with `--device emu` (docs/emulator.md).
//!
//! Inputs come from `--input NAME=PATH.npy`; the others are generated on
//! the device by the bundle's `generate` kernels (the interpreter's
//! `RANDOM` values for the bundle's seed). Exit codes follow eintup's CLI
//! contract: 2 for a wrong bundle, input or option, 3 without a CUDA
//! driver or device, 70 when a driver call fails or a kernel faults.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::ExitCode;

use clap::Parser;
use eintup_runtime::manifest::Role;
use eintup_runtime::{npy, Bundle, Data, Device, DeviceKind, Error, ProfileReport, Tensor};

#[derive(Parser, Debug)]
#[command(name = "etrun", version, about = "Run an eintup PTX bundle on a GPU or the PTX emulator (the runtime alone, no compiler)")]
struct Args {
    /// The bundle directory (`NAME.etb`, written by `eintup build`).
    #[arg(required_unless_present = "device_info")]
    bundle: Option<PathBuf>,
    /// Supply input NAME from a .npy file (repeatable); inputs not given are
    /// generated on the device with the bundle's seed.
    #[arg(long = "input", value_name = "NAME=PATH.npy")]
    inputs: Vec<String>,
    /// For a dynamic bundle: the dims of an eintup no input gives
    /// (repeatable).
    #[arg(long = "bind", value_name = "NAME=[..]")]
    binds: Vec<String>,
    /// Must equal the seed the bundle was built with (its generators have it
    /// compiled in); another seed needs `eintup build --seed S`.
    #[arg(long)]
    seed: Option<u64>,
    /// Write every input and output buffer as DIR/NAME.npy.
    #[arg(long, value_name = "DIR")]
    out: Option<PathBuf>,
    /// Where to run: `cuda` (GPU 0) or `emu` (the PTX emulator).
    #[arg(long, default_value = "cuda")]
    device: String,
    /// Print each kernel's profile (emulator only): instructions, memory
    /// requests and sectors, bank conflicts, atomics, flops.
    #[arg(long)]
    profile: bool,
    /// Write the profile as JSON, `{"kernels": [...]}` (emulator only).
    #[arg(long, value_name = "FILE")]
    profile_json: Option<PathBuf>,
    /// Time N runs after warm-up and print the medians (total and per
    /// launch; GPU only).
    #[arg(long, value_name = "N")]
    time: Option<usize>,
    /// Untimed runs before timing.
    #[arg(long, value_name = "N", default_value_t = 3)]
    warmup: usize,
    /// Print the device (name, compute capability, SMs, memory, driver).
    #[arg(long)]
    device_info: bool,
    /// Print results (device, outputs summary, timings) as one JSON object.
    #[arg(long)]
    json: bool,
}

/// A failure and its exit code.
struct Failure {
    code: u8,
    msg: String,
}

fn user(msg: impl Into<String>) -> Failure {
    Failure { code: 2, msg: msg.into() }
}

impl From<Error> for Failure {
    fn from(e: Error) -> Failure {
        Failure { code: e.exit_code(), msg: e.to_string() }
    }
}

fn main() -> ExitCode {
    let args = match Args::try_parse() {
        Ok(a) => a,
        Err(e) => {
            let code = if e.use_stderr() { 2 } else { 0 };
            let _ = e.print();
            return ExitCode::from(code);
        }
    };
    match run(&args) {
        Ok(()) => ExitCode::SUCCESS,
        Err(f) => {
            eprintln!("etrun: error: {}", f.msg);
            ExitCode::from(f.code)
        }
    }
}

fn run(args: &Args) -> Result<(), Failure> {
    let kind: DeviceKind = args.device.parse().map_err(|e: Error| user(format!("--device {}: {e}", args.device)))?;
    let profiling = args.profile || args.profile_json.is_some();
    match kind {
        DeviceKind::Cuda if profiling => return Err(user("--profile and --profile-json need --device emu (on a GPU, use Nsight Compute)")),
        DeviceKind::Emulator if args.time.is_some() => return Err(user("--time needs a GPU: the emulator does not model time (use --profile)")),
        _ => {}
    }
    // Everything about the bundle and the inputs is checked before the
    // driver is touched, so mistakes are reported the same with or without a GPU.
    let prepared = match &args.bundle {
        Some(path) => Some(open(path, args)?),
        None => None,
    };
    let dev = Device::open(kind)?;
    let info = dev.info()?;
    if args.device_info && !args.json {
        println!("device: {info}");
    }
    let Some((bundle, inputs)) = prepared else {
        if args.json {
            println!("{}", serde_json::json!({ "device": device_json(&info) }));
        }
        return Ok(());
    };
    let (out, profile) = match kind {
        DeviceKind::Emulator => {
            let (out, p) = dev.run_profiled(&bundle, &inputs)?;
            (out, Some(p))
        }
        DeviceKind::Cuda => (dev.run(&bundle, &inputs)?, None),
    };
    let timings = match args.time {
        Some(n) => Some(dev.run_timed(&bundle, &inputs, args.warmup, n)?),
        None => None,
    };
    if let Some(dir) = &args.out {
        write_out(dir, &bundle, &out)?;
    }
    if let (Some(path), Some(p)) = (&args.profile_json, &profile) {
        std::fs::write(path, p.to_json() + "\n").map_err(|e| user(format!("--profile-json {}: {e}", path.display())))?;
    }
    let profile = profile.filter(|_| args.profile);
    let outputs: Vec<(&str, &Tensor)> =
        bundle.manifest().buffers.iter().filter(|b| b.role == Role::Output).filter_map(|b| out.get(&b.name).map(|t| (b.name.as_str(), t))).collect();
    if args.json {
        let j = serde_json::json!({
            "device": device_json(&info),
            "bundle": args.bundle.as_ref().map(|p| p.display().to_string()),
            "outputs": outputs.iter().map(|(n, t)| serde_json::json!({
                "name": n, "dtype": t.dtype().name(), "shape": t.shape, "sum": sum(t),
            })).collect::<Vec<_>>(),
            "profile": profile.as_ref().map(profile_json),
            "timing": timings.as_ref().map(|t| serde_json::json!({
                "reps": t.reps,
                "warmup": args.warmup,
                "total_ms": t.total_ms,
                "launches": t.launches.iter().map(|l| serde_json::json!({
                    "step": l.step, "kernel": l.kernel, "median_ms": l.median_ms,
                })).collect::<Vec<_>>(),
            })),
        });
        println!("{j}");
        return Ok(());
    }
    for (name, t) in &outputs {
        println!("{name}: {} {:?}, sum {}", t.dtype(), t.shape, sum(t));
    }
    if let Some(p) = &profile {
        print!("profile:\n{}", p.table());
    }
    if let Some(t) = &timings {
        println!("timing: median of {} runs after {} warm-up: {:.4} ms in all", t.reps, args.warmup, t.total_ms);
        for l in &t.launches {
            println!("  step {:>3} {:<32} {:.4} ms", l.step, l.kernel, l.median_ms);
        }
    }
    Ok(())
}

/// Opens the bundle and reads the `--input` files.
fn open(path: &Path, args: &Args) -> Result<(Bundle, BTreeMap<String, Tensor>), Failure> {
    let bundle = Bundle::open(path).map_err(|e| user(format!("{}: {e}", path.display())))?;
    let m = bundle.manifest();
    if let Some(seed) = args.seed {
        if seed != m.config.seed {
            return Err(user(format!(
                "--seed {seed}: the bundle's input generators were compiled for seed {}; rebuild with `eintup build --seed {seed}` or pass the inputs with --input",
                m.config.seed
            )));
        }
    }
    let mut inputs = BTreeMap::new();
    for spec in &args.inputs {
        let (name, file) =
            spec.split_once('=').filter(|(n, f)| !n.is_empty() && !f.is_empty()).ok_or_else(|| user(format!("--input {spec}: expected NAME=PATH.npy")))?;
        let t = npy::read(Path::new(file)).map_err(|e| user(format!("--input {spec}: {file}: {e}")))?;
        if inputs.insert(name.to_string(), t).is_some() {
            return Err(user(format!("--input {spec}: `{name}` is given twice")));
        }
    }
    // A dynamic bundle (format 2) is bound to the dims its inputs give,
    // here, before any device is touched.
    let bundle = if args.binds.is_empty() {
        bundle.bind_inputs(&inputs)?.into_owned()
    } else {
        let binds = eintup_runtime::dynamic::parse_binds(&args.binds)?;
        let shapes = inputs.iter().map(|(n, t)| (n.clone(), t.shape.clone())).collect();
        bundle.bind_given(&shapes, &bundle.manifest().given_dims(&binds)?)?.0
    };
    eintup_runtime::check::check_inputs(bundle.manifest(), &inputs)?;
    Ok((bundle, inputs))
}

fn write_out(dir: &Path, bundle: &Bundle, out: &BTreeMap<String, Tensor>) -> Result<(), Failure> {
    std::fs::create_dir_all(dir).map_err(|e| user(format!("--out {}: {e}", dir.display())))?;
    for b in bundle.manifest().buffers.iter().filter(|b| b.role != Role::Temp) {
        if let Some(t) = out.get(&b.name) {
            let p = dir.join(format!("{}.npy", b.name));
            npy::write(&p, t).map_err(|e| user(format!("cannot write {}: {e}", p.display())))?;
        }
    }
    Ok(())
}

/// Sum of all elements in f64: a one-number fingerprint for the summary.
fn sum(t: &Tensor) -> f64 {
    match &t.data {
        Data::I32(v) => v.iter().map(|&x| f64::from(x)).sum(),
        Data::F32(v) => v.iter().map(|&x| f64::from(x)).sum(),
        Data::F64(v) => v.iter().sum(),
    }
}

fn profile_json(p: &ProfileReport) -> serde_json::Value {
    serde_json::to_value(p).unwrap_or_default()
}

fn device_json(info: &eintup_runtime::DeviceInfo) -> serde_json::Value {
    serde_json::json!({
        "kind": info.kind.to_string(),
        "name": info.name,
        "arch": format!("sm_{}{}", info.arch.0, info.arch.1),
        "multiprocessors": info.multiprocessors,
        "memory_bytes": info.memory_bytes,
        "driver_version": info.driver_version,
    })
}
