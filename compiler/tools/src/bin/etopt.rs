//! `etopt`: the `mlir-opt` of eintup. Reads a `.et` program or printed IR
//! (`.etir`), runs passes, and prints the IR at the requested level; with
//! `--split-input-file` for each chunk of the input, with
//! `--verify-diagnostics` checking the diagnostics the input expects.

use clap::{Parser, ValueEnum};
use eintup::driver::{exit, Failure, Source};
use eintup::ir::loops::FloatWidth;
use eintup::passes::manager::{print_ir, Instrument};
use eintup::passes::{DriverOptions, Ir, Level, PassError, PassManager, Unit, DEFAULT_PIPELINE, GPU_PASSES, HOST_PASSES};
use eintup_codegen::{self as codegen, CodegenError, Target};
use eintup_tools::etopt::{list::list_passes, split, verify_diagnostics, Lang};
use eintup_tools::process::run_main_status;
use et_grammar::diag::{render_all, Diagnostic};
use std::path::PathBuf;

#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
enum Emit {
    Ast,
    Et,
    Loop,
    Llvm,
    Ptx,
}

#[derive(Parser, Debug)]
#[command(name = "etopt", version = eintup_tools::VERSION, about = "Drive eintup's passes and print IR at any level")]
struct Args {
    /// Input: a program or printed IR of either dialect, told apart by
    /// its content; `-`, or no FILE with a pipe on stdin, reads standard
    /// input.
    file: Option<PathBuf>,
    /// Fix an eintup's dims: NAME=[d1,d2,...] (NAME=[] is rank 0).
    #[arg(long = "bind", value_name = "NAME=[..]")]
    bind: Vec<String>,
    /// Seed for dims drawn from constraints and defaults.
    #[arg(long, default_value_t = 0)]
    seed: u64,
    /// Comma-separated passes to run, in order, each with optional options
    /// in braces: `resolve,infer-ranks,specialize{seed=3 bind=a=[2,3]}`.
    #[arg(long, alias = "pass-pipeline", conflicts_with = "pipeline")]
    passes: Vec<String>,
    /// A named pipeline (`default`).
    #[arg(long)]
    pipeline: Option<String>,
    /// Which level to print (default: the level the pipeline ends at).
    #[arg(long, value_enum)]
    emit: Option<Emit>,
    /// Width of FLOAT in the loop level and below.
    #[arg(long = "float", value_parser = eintup_tools::cli::float_parser(), default_value = "f64")]
    float: FloatWidth,
    /// GPU architecture for `--emit llvm|ptx` (sm_60 .. sm_90).
    #[arg(long, default_value = "sm_80", value_name = "sm_XX")]
    target: String,
    /// Float policy (`--emit llvm|ptx`, `split-reductions`): `fast` lets a
    /// float multiply fuse with its add and GPU float reductions split into
    /// partial sums; `off` keeps the interpreter's rounding. Default: `fast`
    /// for the GPU, `off` with `--host`.
    #[arg(long = "fp-contract", value_parser = eintup_tools::cli::fp_contract_parser(), value_name = "off|fast")]
    fp_contract: Option<codegen::FpContract>,
    /// Target the host: the default pipeline adds the host-only loop
    /// passes (`interchange`), and `--emit llvm` gives host IR.
    #[arg(long)]
    host: bool,
    /// The x86-64 CPU that `--host` compiles for: `native` (this machine,
    /// what `eintup run` uses) or a psABI level (`x86-64`, `x86-64-v2`,
    /// `x86-64-v3`, `x86-64-v4`), whose loop IR and LLVM IR are the same on
    /// every machine (its vector registers bound the register tiles).
    #[arg(long, value_name = "CPU", default_value = "native", value_parser = |s: &str| codegen::HostCpu::parse(s), requires = "host")]
    target_cpu: codegen::HostCpu,
    /// The GPU passes choose by their heuristics alone, not the target's
    /// tuning table (docs/tuning.md).
    #[arg(long)]
    no_tuning: bool,
    /// Print each pass's statistics on stderr.
    #[arg(long)]
    stats: bool,
    /// Print the IR after every pass on stderr.
    #[arg(long, alias = "print-ir-after-all")]
    dump_ir: bool,
    /// Print the IR after the named pass on stderr (every run of it, or
    /// one run: `simplify-index#2`).
    #[arg(long, alias = "print-ir-after", value_name = "PASS")]
    dump_ir_after: Vec<String>,
    /// Print the IR before the named pass on stderr.
    #[arg(long, value_name = "PASS")]
    print_ir_before: Vec<String>,
    /// Print the IR after every pass that changed it, on stderr.
    #[arg(long)]
    print_ir_after_change: bool,
    /// When a pass fails, print the IR it read on stderr.
    #[arg(long)]
    print_ir_after_failure: bool,
    /// Print the time each pass took on stderr.
    #[arg(long)]
    time_passes: bool,
    /// Write the output here instead of stdout (`-`: stdout).
    #[arg(short = 'o', value_name = "FILE")]
    output: Option<PathBuf>,
    /// Cut the input at `// -----` lines and run each chunk on its own;
    /// the outputs are joined by `// -----` lines.
    #[arg(long)]
    split_input_file: bool,
    /// Check the diagnostics against the `expected-error` comments of the
    /// input instead of printing them (exit 1 on a mismatch).
    #[arg(long)]
    verify_diagnostics: bool,
    /// Print every registered pass and the named pipelines, and exit.
    #[arg(long)]
    list_passes: bool,
}

/// `--fp-contract`, or the target's default (`fast` on the GPU, `off` on
/// the host).
fn fp_contract(args: &Args) -> codegen::FpContract {
    args.fp_contract.unwrap_or(codegen::default_fp_contract(args.host))
}

fn main() {
    let args = Args::parse();
    run_main_status(move || run(args))
}

/// What does not depend on the input: checked once, before any chunk.
struct Plan {
    /// The pass manager before `skip_to` (`None` for `--emit ast`).
    pm: Option<PassManager>,
    /// `--passes` given: no pass is skipped.
    explicit: bool,
    opts: DriverOptions,
    /// `--target` of `--emit llvm|ptx`.
    sm: Option<u32>,
}

fn run(args: Args) -> Result<i32, Failure> {
    if args.list_passes {
        print!("{}", list_passes());
        return Ok(exit::OK);
    }
    // Without a file, a pipe or a redirected file on stdin is the input
    // (as for mlir-opt); a terminal is not waited on.
    let stdin = PathBuf::from("-");
    let file = match &args.file {
        Some(f) => f,
        None if !std::io::IsTerminal::is_terminal(&std::io::stdin()) => &stdin,
        None => return Err(Failure::user("etopt: error: no input file (give FILE, or `-` or a pipe for stdin)")),
    };
    let source = Source::load(file)?;
    let plan = plan(&args)?;
    let lang = Lang::of(&source.text);
    let chunks = if args.split_input_file { split::split(&source.text, lang) } else { vec![source.text.clone()] };
    let mut outputs = Vec::new();
    let mut status = exit::OK;
    // Warnings about the options (a dump of a pass the pipeline does not
    // run), printed once however many chunks there are.
    let mut warned = std::collections::BTreeSet::new();
    for text in chunks {
        let chunk = Source { path: source.path.clone(), name: source.name.clone(), text };
        let mut warnings = Vec::new();
        let result = process(&args, &plan, chunk.clone(), &mut warnings, &mut warned);
        if !args.verify_diagnostics && !warnings.is_empty() {
            eprintln!("{}", et_grammar::diag::for_stderr(render_all(&warnings, &chunk.name, &chunk.text).trim_end()));
        }
        let code = match &result {
            _ if args.verify_diagnostics => verify_chunk(&chunk, lang, &result, &warnings),
            Ok(_) => exit::OK,
            // Without chunks, a failure is the command's, exactly as before.
            Err(e) if !args.split_input_file => return Err(e.clone().into_failure(&chunk)),
            Err(e) => report_failure(e, &chunk),
        };
        // The worst outcome wins: internal (70) over user error (2) over a
        // mismatch of expected diagnostics (1).
        status = status.max(code);
        outputs.push(result.unwrap_or_default());
    }
    write_out(&args, split::join(&outputs))?;
    Ok(status)
}

/// Prints a chunk's failure as `run_main` would and goes on.
fn report_failure(e: &PassError, chunk: &Source) -> i32 {
    let f = e.clone().into_failure(chunk);
    eprintln!("{f}");
    f.exit_code()
}

/// `--verify-diagnostics`: the chunk's diagnostics (none when it compiled)
/// against its expectations; each mismatch on stderr, exit 1 (as
/// `mlir-opt`) if any, 2 if a directive is malformed. An internal error is
/// a bug, reported as such (exit 70) whatever the input expects.
fn verify_chunk(chunk: &Source, lang: Lang, result: &Result<String, PassError>, warnings: &[Diagnostic]) -> i32 {
    let mut produced = verify_diagnostics::produced_warnings(warnings, &chunk.text);
    match result {
        Ok(_) => {}
        Err(e) => match verify_diagnostics::produced(e, &chunk.text) {
            Some(p) => produced.extend(p),
            None => return report_failure(e, chunk),
        },
    }
    let verdict = verify_diagnostics::check(&chunk.name, &chunk.text, lang, &produced);
    for p in &verdict.lines {
        eprintln!("{p}");
    }
    verdict.exit_code()
}

fn plan(args: &Args) -> Result<Plan, Failure> {
    let opts = DriverOptions {
        binds: args.bind.clone(),
        inputs: Vec::new(),
        seed: args.seed,
        float: args.float,
        fp_contract: fp_contract(args),
        ..DriverOptions::default()
    };
    // The GPU passes tile for `--target`, and PTX or LLVM IR is emitted for
    // it: read once, and a bad one is refused whatever is emitted (the
    // passes' policy is the same for every sm: docs/passes.md, "The GPU
    // target").
    let gpu = eintup_tools::cli::build::parse_target("etopt", &args.target)?;
    let opts = DriverOptions { gpu, tuning: !args.no_tuning, ..opts };
    // The host passes tile for `--target-cpu` (this machine's by default:
    // what `eintup run` compiles for); without `--host`, for AVX2.
    let opts = match args.host {
        true => DriverOptions { host: args.target_cpu.host_target().map_err(|e| Failure::user(format!("error: {e}")))?, ..opts },
        false => opts,
    };
    if args.emit == Some(Emit::Ast) {
        return Ok(Plan { pm: None, explicit: false, opts, sm: None });
    }
    let explicit = !args.passes.is_empty();
    let names: Vec<String> = if explicit {
        let mut v = Vec::new();
        for p in &args.passes {
            v.extend(eintup::passes::spec::split_pipeline(p).map_err(|e| Failure::user(format!("etopt: error: --passes: {e}")))?);
        }
        v
    } else {
        match args.pipeline.as_deref() {
            Some("default") | None => default_pipeline(args),
            Some(other) => return Err(Failure::user(format!("etopt: error: unknown pipeline `{other}` (known: default)"))),
        }
    };
    let instrument = Instrument {
        dump_all: args.dump_ir,
        dump_after: args.dump_ir_after.clone(),
        print_before: args.print_ir_before.clone(),
        after_change: args.print_ir_after_change,
        after_failure: args.print_ir_after_failure,
        time: args.time_passes,
        stats: args.stats,
    };
    let pm = PassManager::from_names(&names, instrument)?;
    let sm = match args.emit {
        Some(Emit::Llvm | Emit::Ptx) => Some(gpu.sm),
        _ => None,
    };
    Ok(Plan { pm: Some(pm), explicit, opts, sm })
}

/// Compiles one input (the file, or one chunk of it) and returns what to
/// print; warnings (a `--bind` outside a draw range) go to `warnings`.
fn process(
    args: &Args,
    plan: &Plan,
    source: Source,
    warnings: &mut Vec<Diagnostic>,
    warned: &mut std::collections::BTreeSet<String>,
) -> Result<String, PassError> {
    let Some(pm) = &plan.pm else {
        let file = et_grammar::parse_file(&source.text).map_err(PassError::User)?;
        return Ok(et_grammar::print::print_file(&file, &source.text));
    };
    let mut unit = Unit::read(source)?;
    let pm = if plan.explicit { pm.clone() } else { pm.clone().skip_to(unit.ir.level()) };
    for w in pm.unmatched_selectors() {
        if warned.insert(w.clone()) {
            eprintln!("{w}");
        }
    }
    let ran = pm.run_passes(&mut unit, &plan.opts, &mut std::io::stderr().lock());
    if let Some(cfg) = &unit.config {
        warnings.extend(cfg.warnings.iter().cloned());
    }
    warnings.extend(unit.warnings.iter().cloned());
    ran?;
    if args.stats {
        if let Ir::Loop(m) = &unit.ir {
            // Per kernel: exact points visited and guard conditions left.
            for k in &m.kernels {
                let n = k.iteration_count().map_or("unknown".to_string(), |n| n.to_string());
                eprintln!("stats: kernel={} iterations={n} guards={}", k.name, k.guard_count());
            }
        }
    }
    match (args.emit, unit.ir.level()) {
        (None, _) | (Some(Emit::Et), Level::Et) | (Some(Emit::Loop), Level::Loop) => Ok(print_ir(&unit)),
        (Some(e @ (Emit::Llvm | Emit::Ptx)), Level::Loop) => {
            let (Ir::Loop(m), Some(sm)) = (&unit.ir, plan.sm) else { unreachable!("a loop module, and --target checked by plan()") };
            if args.host && m.is_dynamic() {
                // The host JIT compiles at known dims; only GPU code takes
                // dim symbols as parameters (docs/dynamic-shapes.md).
                return Err(PassError::Message(format!(
                    "etopt: error: --host needs static dims, and the module declares {} dim symbols (`dim %..`)",
                    m.dims.len()
                )));
            }
            let target = if args.host {
                Target::Host { fp_contract: fp_contract(args), cpu: args.target_cpu }
            } else {
                Target::Nvptx { sm, fp_contract: fp_contract(args) }
            };
            let t = std::time::Instant::now();
            let (r, what) = match e {
                Emit::Llvm if args.host => (codegen::emit_llvm(m, args.seed, target), "codegen-llvm-host"),
                Emit::Llvm => (codegen::emit_llvm(m, args.seed, target), "codegen-llvm-nvptx"),
                _ => (codegen::emit_ptx(m, args.seed, sm, fp_contract(args)).map(|(p, _)| p), "codegen-ptx"),
            };
            if args.time_passes {
                // Lowering, `default<O3>` and (for PTX) the asm printer,
                // which --time-passes' pass table does not cover.
                eprint!("{}", eintup::passes::manager::codegen_timing_report(what, t.elapsed()));
            }
            r.map_err(|e| match e {
                // The module is the user's here (textual IR), and so is the machine.
                CodegenError::Invalid(m) | CodegenError::Environment(m) => PassError::Message(format!("etopt: error: code generation: {m}")),
                CodegenError::Internal(m) => PassError::Internal(format!("code generation: {m}")),
            })
        }
        (Some(e), l) => Err(PassError::Message(format!(
            "etopt: error: --emit {} asked for, but the pipeline leaves the IR at the {} level",
            format!("{e:?}").to_lowercase(),
            l.name()
        ))),
    }
}

/// The pipeline when neither `--passes` nor `--pipeline` is given: up to
/// the level `--emit` asks for. `--emit et` without `--bind`/`--seed`
/// shows the rank-polymorphic module.
fn default_pipeline(args: &Args) -> Vec<String> {
    let specialise = !args.bind.is_empty() || args.seed != 0 || args.pipeline.is_some();
    let stop = match args.emit {
        Some(Emit::Et) if !specialise => "infer-ranks",
        Some(Emit::Et) => "specialize",
        _ => "",
    };
    let mut v = Vec::new();
    for p in DEFAULT_PIPELINE {
        v.push(p.to_string());
        if *p == stop {
            return v;
        }
    }
    if args.host {
        v.extend(HOST_PASSES.iter().map(|p| p.to_string()));
    } else if matches!(args.emit, Some(Emit::Llvm | Emit::Ptx)) {
        v.extend(GPU_PASSES.iter().map(|p| p.to_string()));
    }
    v
}

fn write_out(args: &Args, text: String) -> Result<(), Failure> {
    match &args.output {
        // `-o -` is stdout, as for every LLVM tool.
        Some(path) if path.as_os_str() != "-" => {
            std::fs::write(path, text).map_err(|e| Failure::user(format!("etopt: error: cannot write {}: {e}", path.display())))
        }
        _ => {
            print!("{text}");
            Ok(())
        }
    }
}
