//! `etopt`: the `mlir-opt` of eintup. Reads a `.et` file (or, later, a
//! printed IR file), runs passes, and prints the IR at the requested level.

use clap::{Parser, ValueEnum};
use eintup::ir::loops::FloatWidth;
use eintup_codegen::{self as codegen, Target};
use eintup::driver::{Failure, Source};
use eintup_tools::process::run_main;
use eintup::passes::manager::{print_ir, Instrument};
use eintup::passes::{Ir, Level, Options, PassManager, Unit, DEFAULT_PIPELINE, HOST_PASSES};
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
#[command(name = "etopt", version, about = "Drive eintup's passes and print IR at any level")]
struct Args {
    /// Input: a `.et` program or a printed IR file (`.etir`).
    file: PathBuf,
    /// Fix an eintup's dims: NAME=[d1,d2,...] (NAME=[] is rank 0).
    #[arg(long = "bind", value_name = "NAME=[..]")]
    bind: Vec<String>,
    /// Seed for dims drawn from constraints and defaults.
    #[arg(long, default_value_t = 0)]
    seed: u64,
    /// Comma-separated passes to run, in order.
    #[arg(long, value_delimiter = ',', conflicts_with = "pipeline")]
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
    /// Target the host: the default pipeline adds the host-only loop
    /// passes (`interchange`), and `--emit llvm` gives host IR.
    #[arg(long)]
    host: bool,
    /// Print each pass's statistics on stderr.
    #[arg(long)]
    stats: bool,
    /// Print the IR after every pass on stderr.
    #[arg(long)]
    dump_ir: bool,
    /// Print the IR after the named pass on stderr.
    #[arg(long, value_name = "PASS")]
    dump_ir_after: Vec<String>,
    /// Print the time each pass took on stderr.
    #[arg(long)]
    time_passes: bool,
    /// Write the output here instead of stdout.
    #[arg(short = 'o', value_name = "FILE")]
    output: Option<PathBuf>,
}

fn main() {
    let args = Args::parse();
    run_main(move || run(args))
}

fn run(args: Args) -> Result<(), Failure> {
    let source = Source::load(&args.file)?;
    if args.emit == Some(Emit::Ast) {
        let file = et_grammar::parse_file(&source.text).map_err(|d| source.failure(d))?;
        return write_out(&args, et_grammar::print::print_file(&file, &source.text));
    }
    let mut unit = load_unit(source)?;
    let explicit = !args.passes.is_empty();
    let names: Vec<String> = if explicit {
        args.passes.clone()
    } else {
        match args.pipeline.as_deref() {
            Some("default") | None => default_pipeline(&args),
            Some(other) => return Err(Failure::user(format!("etopt: error: unknown pipeline `{other}` (known: default)"))),
        }
    };
    let instrument = Instrument { dump_all: args.dump_ir, dump_after: args.dump_ir_after.clone(), time: args.time_passes, stats: args.stats };
    let mut pm = PassManager::from_names(&names, instrument)?;
    if !explicit {
        pm = pm.skip_to(unit.ir.level());
    }
    let opts = Options { binds: args.bind.clone(), seed: args.seed, float: args.float };
    pm.run(&mut unit, &opts, &mut std::io::stderr().lock())?;
    if args.stats {
        if let Ir::Loop(m) = &unit.ir {
            // Per kernel: exact points visited and guard conditions left.
            for k in &m.kernels {
                let n = k.iteration_count().map_or("unknown".to_string(), |n| n.to_string());
                eprintln!("stats: kernel={} iterations={n} guards={}", k.name, k.guard_count());
            }
        }
    }
    let text = match (args.emit, unit.ir.level()) {
        (None, _) | (Some(Emit::Et), Level::Et) | (Some(Emit::Loop), Level::Loop) => print_ir(&unit),
        (Some(Emit::Ast), _) => unreachable_ast(),
        (Some(e @ (Emit::Llvm | Emit::Ptx)), Level::Loop) => {
            let Ir::Loop(m) = &unit.ir else { unreachable_ast(); return Ok(()) };
            let sm = eintup_tools::cli::build::parse_target(&args.target)?;
            let target = if args.host { Target::Host } else { Target::Nvptx { sm } };
            let t = std::time::Instant::now();
            let (r, what) = match e {
                Emit::Llvm if args.host => (codegen::emit_llvm(m, args.seed, target), "codegen-llvm-host"),
                Emit::Llvm => (codegen::emit_llvm(m, args.seed, target), "codegen-llvm-nvptx"),
                _ => (codegen::emit_ptx(m, args.seed, sm).map(|(p, _)| p), "codegen-ptx"),
            };
            if args.time_passes {
                // Lowering, `default<O3>` and (for PTX) the asm printer,
                // which --time-passes' pass table does not cover.
                eprint!("{}", eintup::passes::manager::codegen_timing_report(what, t.elapsed()));
            }
            r.map_err(|e| Failure::Internal(format!("code generation: {e}")))?
        }
        (Some(e), l) => {
            return Err(Failure::user(format!(
                "etopt: error: --emit {} asked for, but the pipeline leaves the IR at the {} level",
                format!("{e:?}").to_lowercase(),
                l.name()
            )))
        }
    };
    write_out(&args, text)
}

fn unreachable_ast() -> String {
    String::new()
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
    }
    v
}

/// A `.et` program, or printed IR (`.etir`) at the `et` or `loop` level,
/// told apart by the first keyword.
fn load_unit(source: Source) -> Result<Unit, Failure> {
    let is_ir = source.path.extension().is_some_and(|e| e == "etir");
    if !is_ir {
        return Ok(Unit::from_source(source));
    }
    let first = source.text.lines().map(str::trim).find(|l| !l.is_empty() && !l.starts_with("//")).unwrap_or("");
    let keyword = first.split_whitespace().next().unwrap_or("");
    let ir = match keyword {
        "buffer" | "kernel" => Ir::Loop(eintup::ir::loops::parse::parse_verified(&source.text).map_err(|d| source.failure(d))?),
        _ => {
            let module = eintup::ir::et::parse::parse_verified(&source.text).map_err(|d| source.failure(d))?;
            Ir::Et(eintup::sema::Program { module, constraints: Vec::new() })
        }
    };
    let mut unit = Unit::from_source(source);
    unit.ir = ir;
    Ok(unit)
}

fn write_out(args: &Args, text: String) -> Result<(), Failure> {
    match &args.output {
        Some(path) => std::fs::write(path, text)
            .map_err(|e| Failure::user(format!("etopt: error: cannot write {}: {e}", path.display()))),
        None => {
            print!("{text}");
            Ok(())
        }
    }
}
