//! `etbench`, run by `scripts/bench`: compile time of every example, host
//! execution against NumPy and TensorFlow, and GPU execution against
//! PyTorch and a device copy, the Python package's call overhead against
//! NumPy, and whole `eintup run` processes of the einsum chains against
//! NumPy and TensorFlow. Prints tables and writes one JSON file.
//! docs/performance.md explains every column and records the results.

mod compile;
mod cost;
mod gpu;
mod host;
mod kit;
mod model;
mod ops;
mod overhead;
mod peers;
mod prepare;
mod process;
mod stats;
mod tune;
mod variants;

use clap::{Parser, ValueEnum};
use std::collections::BTreeMap;
use std::path::PathBuf;
use std::time::Duration;

#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
enum Section {
    Compile,
    Host,
    Gpu,
    /// The Python package's call overhead against NumPy (bench/overhead.py).
    Overhead,
    /// Whole `eintup run` processes of the einsum chains against NumPy
    /// (issue #31's bar: the time at n minus the time at 16).
    Process,
}

#[derive(Parser, Debug)]
#[command(name = "etbench", about = "eintup benchmarks against NumPy, TensorFlow and PyTorch")]
struct Args {
    /// Sections to run.
    #[arg(long, value_enum, value_delimiter = ',', default_value = "compile,host,gpu,overhead,process")]
    sections: Vec<Section>,
    /// Tiny sizes and few repetitions: checks the whole harness in seconds.
    #[arg(long)]
    quick: bool,
    /// Only the ops whose name contains one of these.
    #[arg(long, value_delimiter = ',')]
    only: Vec<String>,
    /// Where the JSON results go.
    #[arg(long, default_value = "bench/results.json")]
    out: PathBuf,
    /// Repository root (examples, bench/ops, bench/peers.py).
    #[arg(long, default_value = ".")]
    root: PathBuf,
    /// The Python with NumPy/TensorFlow (and PyTorch for the GPU section).
    #[arg(long, default_value = ".venv/bin/python")]
    python: PathBuf,
    /// The `etopt` whose compile time is measured (a release build).
    #[arg(long, default_value = "target/release/etopt")]
    etopt: PathBuf,
    /// The `eintup` whose whole runs the process section times (a release
    /// build).
    #[arg(long, default_value = "target/release/eintup")]
    eintup: PathBuf,
    /// Scratch directory for inputs and outputs shared with the peers.
    #[arg(long, default_value = "target/bench-work")]
    work: PathBuf,
    /// Instead of benchmarking, write the GPU-size ops as bundles for
    /// `scripts/gpu-check` into this directory.
    #[arg(long, value_name = "DIR")]
    gpu_kit: Option<PathBuf>,
    /// With `--gpu-kit`: also the tuner's variants of the tuned ops at a
    /// few sizes (`DIR/tune`; docs/tuning.md).
    #[arg(long, requires = "gpu_kit")]
    tune: bool,
    /// Host code's float policy: `off` (the default: the interpreter's
    /// rounding) or `fast` (fused multiply-adds, as `run --backend cpu
    /// --fp-contract fast`).
    #[arg(long = "host-fp-contract", default_value = "off", value_name = "off|fast")]
    host_fp_contract: eintup_codegen::FpContract,
    /// Instead of benchmarking, model every tuner variant of the tuned ops
    /// on the emulator (sampled profiles, the cost model's H100 times) and
    /// write them to this file (docs/tuning.md, "Cost model").
    #[arg(long, value_name = "FILE", conflicts_with = "gpu_kit")]
    model: Option<PathBuf>,
    /// Instead of benchmarking, compare a `--model` file with a kit's
    /// measured tuning.json (`--measured`): the fit table, refitted
    /// constants and leave-one-group-out errors.
    #[arg(long, value_name = "FILE", requires = "measured", conflicts_with_all = ["gpu_kit", "model"])]
    model_fit: Option<PathBuf>,
    /// With `--model-fit`: the measured tuning.json.
    #[arg(long, value_name = "FILE")]
    measured: Option<PathBuf>,
    /// Runs of each `etopt` command for the compile-time medians.
    #[arg(long, default_value_t = 5)]
    compile_runs: usize,
}

fn main() {
    let args = Args::parse();
    if let Err(e) = run(&args) {
        eprintln!("etbench: error: {e}");
        std::process::exit(1);
    }
}

fn run(args: &Args) -> Result<(), String> {
    let keep = |name: &str| args.only.is_empty() || args.only.iter().any(|o| name.contains(o.as_str()));
    if let Some(dir) = &args.gpu_kit {
        let size = if args.quick { ops::Size::Quick } else { ops::Size::Gpu };
        let list: Vec<ops::Op> = ops::ops(size).into_iter().filter(|o| keep(&o.name)).collect();
        kit::write(&args.root.join("bench/ops"), dir, &list)?;
        if args.tune {
            let list: Vec<ops::Op> = ops::tuned(args.quick).into_iter().filter(|o| keep(&o.name)).collect();
            tune::write(&args.root.join("bench/ops"), dir, &list)?;
        }
        return Ok(());
    }
    if let Some(file) = &args.model {
        let list: Vec<ops::Op> = ops::tuned(args.quick).into_iter().filter(|o| keep(&o.name)).collect();
        return model::run(&args.root.join("bench/ops"), file, &list);
    }
    if let (Some(file), Some(measured)) = (&args.model_fit, &args.measured) {
        print!("{}", model::fit_report(file, measured)?);
        return Ok(());
    }
    let mut report = serde_json::Map::new();
    report.insert("command".into(), serde_json::json!(std::env::args().collect::<Vec<_>>().join(" ")));
    report.insert("machine".into(), serde_json::json!(machine()));
    report.insert("quick".into(), serde_json::json!(args.quick));
    report.insert("host_fp_contract".into(), serde_json::json!(args.host_fp_contract.name()));
    std::fs::create_dir_all(&args.work).map_err(|e| format!("{}: {e}", args.work.display()))?;
    let setup = host::Setup {
        ops_dir: &args.root.join("bench/ops"),
        work_dir: &args.work,
        python: &args.python,
        peers_script: &args.root.join("bench/peers.py"),
        budget: if args.quick {
            stats::Budget { min_reps: 3, max_reps: 5, time: Duration::ZERO }
        } else {
            stats::Budget { min_reps: 5, max_reps: 50, time: Duration::from_secs(2) }
        },
        fp_contract: args.host_fp_contract,
    };
    if args.sections.contains(&Section::Compile) {
        let mut examples: Vec<PathBuf> = std::fs::read_dir(args.root.join("docs/examples"))
            .map_err(|e| format!("docs/examples: {e}"))?
            .filter_map(|e| e.ok().map(|e| e.path()))
            .filter(|p| p.extension().is_some_and(|x| x == "et") && keep(&p.to_string_lossy()))
            .collect();
        examples.sort();
        // Beside the examples, a long program (1,000 statements).
        let chain = compile::long_chain(&std::env::temp_dir(), 1000)?;
        if keep(&chain.to_string_lossy()) {
            examples.push(chain);
        }
        let runs = if args.quick { 1 } else { args.compile_runs.max(1) };
        eprintln!("bench: compile time of {} examples, {runs} runs each", examples.len());
        let r = compile::run(&args.etopt, &examples, runs)?;
        print_compile(&r);
        report.insert("compile".into(), serde_json::to_value(&r).map_err(|e| e.to_string())?);
    }
    if args.sections.contains(&Section::Host) {
        let size = if args.quick { ops::Size::Quick } else { ops::Size::Host };
        let list: Vec<ops::Op> = ops::ops(size).into_iter().filter(|o| keep(&o.name)).collect();
        let (r, versions) = host::run(&setup, &list)?;
        print_host(&r, &versions);
        let bad: Vec<String> = r
            .iter()
            .flat_map(|h| {
                h.cmp.peers.iter().filter(|(_, p)| p.error.as_deref().is_some_and(|e| e.starts_with("MISMATCH"))).map(move |(f, _)| format!("{} vs {f}", h.op))
            })
            .collect();
        report.insert("host".into(), serde_json::json!({ "versions": versions, "results": r }));
        write(&args.out, &report)?;
        if !bad.is_empty() {
            return Err(format!("eintup's result differs from a peer's: {}", bad.join(", ")));
        }
    }
    if args.sections.contains(&Section::Gpu) {
        let size = if args.quick { ops::Size::Quick } else { ops::Size::Gpu };
        let list: Vec<ops::Op> = ops::ops(size).into_iter().filter(|o| keep(&o.name)).collect();
        let (warmup, reps) = if args.quick { (1, 3) } else { (5, 50) };
        let g = gpu::run(&setup, &list, warmup, reps);
        print_gpu(&g);
        report.insert("gpu".into(), serde_json::to_value(&g).map_err(|e| e.to_string())?);
    }
    if args.sections.contains(&Section::Overhead) {
        let o = overhead::run(&args.python, &args.root.join("bench/overhead.py"), &args.work, args.quick)?;
        overhead::print(&o);
        report.insert("overhead".into(), serde_json::to_value(&o).map_err(|e| e.to_string())?);
    }
    if args.sections.contains(&Section::Process) {
        let list: Vec<ops::Op> = ops::process(args.quick).into_iter().filter(|o| keep(&o.name)).collect();
        let s = process::Setup { host: &setup, eintup: &args.eintup, rounds: if args.quick { 2 } else { 10 } };
        let (r, versions) = process::run(&s, &list)?;
        process::print(&r, &versions);
        report.insert("process".into(), serde_json::json!({ "versions": versions, "results": r }));
    }
    write(&args.out, &report)?;
    eprintln!("bench: wrote {}", args.out.display());
    Ok(())
}

fn write(path: &std::path::Path, report: &serde_json::Map<String, serde_json::Value>) -> Result<(), String> {
    if let Some(d) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
        std::fs::create_dir_all(d).map_err(|e| format!("{}: {e}", d.display()))?;
    }
    let text = serde_json::to_string_pretty(report).map_err(|e| e.to_string())?;
    std::fs::write(path, text + "\n").map_err(|e| format!("{}: {e}", path.display()))
}

/// CPU model and core count, so numbers are read with their machine.
fn machine() -> BTreeMap<&'static str, String> {
    let cpu = std::fs::read_to_string("/proc/cpuinfo")
        .ok()
        .and_then(|t| t.lines().find(|l| l.starts_with("model name")).and_then(|l| l.split(':').nth(1)).map(|s| s.trim().to_string()))
        .unwrap_or_else(|| "unknown".into());
    let cores = std::thread::available_parallelism().map(|n| n.get().to_string()).unwrap_or_else(|_| "?".into());
    BTreeMap::from([("cpu", cpu), ("threads", cores)])
}

fn print_compile(r: &[compile::CompileResult]) {
    println!("\n== compile time (ms, median of {} runs; etopt process wall time end to end)", r.first().map_or(0, |c| c.runs));
    println!("{:<16} {:>9} {:>9} {:>9} {:>9} {:>9}  slowest pass", "example", "host e2e", "ptx e2e", "passes", "llvm-O3", "ptx-cg");
    for c in r {
        let passes: f64 = c.passes_ms.iter().map(|(_, ms)| ms).sum();
        let slow = c.passes_ms.iter().max_by(|a, b| a.1.total_cmp(&b.1)).map(|(n, ms)| format!("{n} {ms:.2}")).unwrap_or_default();
        println!(
            "{:<16} {:>9.1} {:>9.1} {:>9.2} {:>9.1} {:>9.1}  {slow}",
            c.example, c.end_to_end_host_ms, c.end_to_end_ptx_ms, passes, c.codegen_host_ms, c.codegen_ptx_ms
        );
    }
}

fn fmt_peer(ms: Option<f64>, ratio: Option<&f64>) -> String {
    match (ms, ratio) {
        (Some(ms), Some(r)) => format!("{ms:>9.3} {r:>6.2}x"),
        _ => format!("{:>9} {:>7}", "-", ""),
    }
}

fn print_host(r: &[host::HostResult], versions: &BTreeMap<String, String>) {
    println!("\n== host execution (ms, median; ratio = eintup time / peer time, >1 means eintup is slower)");
    let v: Vec<String> = versions.iter().map(|(k, v)| format!("{k} {v}")).collect();
    println!("peers: {}", v.join(", "));
    println!("{:<20} {:>9} {:>18} {:>17} {:>17} {:>10} {:>10}", "op", "eintup", "eintup rate", "numpy  ratio", "tf  ratio", "numpy rate", "tf rate");
    for h in r {
        let peer = |f: &str| fmt_peer(h.cmp.peers.get(f).and_then(|p| p.median_s).map(|s| s * 1e3), h.cmp.ratio.get(f));
        let rate = |f: &str| h.cmp.rate.get(f).map_or("-".to_string(), |x| format!("{x:.2}"));
        println!(
            "{:<20} {:>9.3} {:>10.2} {:<7} {} {} {:>10} {:>10}",
            h.op,
            h.eintup_ms,
            h.cmp.rate["eintup"],
            h.unit,
            peer("numpy"),
            peer("tensorflow"),
            rate("numpy"),
            rate("tensorflow")
        );
        for (f, p) in &h.cmp.peers {
            if let Some(e) = &p.error {
                println!("    {f}: {e}");
            }
        }
    }
}

fn print_gpu(g: &gpu::GpuSection) {
    match g {
        gpu::GpuSection::Skipped { skipped } => println!("\n== GPU execution: skipped ({skipped})"),
        gpu::GpuSection::Ran { device, copy_gbps, results, failed, .. } => {
            println!("\n== GPU execution on {device} (ms by CUDA events, median); device copy {copy_gbps:.0} GB/s");
            println!("{:<20} {:>9} {:>18} {:>9} {:>17}", "op", "eintup", "eintup rate", "of copy", "torch  ratio");
            for r in results {
                let frac = r.fraction_of_copy.map_or("-".to_string(), |f| format!("{:.0}%", f * 100.0));
                let torch = fmt_peer(r.cmp.peers.get("torch").and_then(|p| p.median_s).map(|s| s * 1e3), r.cmp.ratio.get("torch"));
                println!("{:<20} {:>9.3} {:>10.2} {:<7} {:>9} {}", r.op, r.eintup_ms, r.cmp.rate["eintup"], r.unit, frac, torch);
                for (f, p) in &r.cmp.peers {
                    if let Some(e) = &p.error {
                        println!("    {f}: {e}");
                    }
                }
            }
            for (op, why) in failed {
                println!("{op:<20} failed: {why}");
            }
        }
    }
}
