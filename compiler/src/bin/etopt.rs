//! `etopt`: the `mlir-opt` of eintup. Reads a `.et` file (or, later, a
//! printed IR file), runs passes, and prints the IR at the requested level.

use clap::{Parser, ValueEnum};
use eintup::driver::{run_main, Failure, Source};
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
    /// Which level to print.
    #[arg(long, value_enum, default_value = "et")]
    emit: Emit,
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
    let text = match args.emit {
        Emit::Ast => {
            let file = et_grammar::parse_file(&source.text).map_err(|d| source.failure(d))?;
            et_grammar::print::print_file(&file, &source.text)
        }
        Emit::Et => {
            // Without a pass manager yet: `--bind`/`--seed`/`--pipeline`
            // select the specialised module, otherwise the resolved one.
            let specialise = !args.bind.is_empty() || args.seed != 0 || args.pipeline.is_some();
            if !args.passes.is_empty() || args.dump_ir || !args.dump_ir_after.is_empty() || args.time_passes {
                return Err(Failure::user("etopt: error: --passes, --dump-ir, --dump-ir-after and --time-passes are not implemented yet"));
            }
            if specialise {
                let (m, _) = eintup::pipeline::specialized_module(&source, &args.bind, args.seed)?;
                eintup::ir::print::module(&m)
            } else {
                let (p, _) = eintup::pipeline::ranked(&source)?;
                eintup::ir::print::module(&p.module)
            }
        }
        other => {
            return Err(Failure::user(format!(
                "etopt: error: --emit {} is not implemented yet (available: ast, et)",
                format!("{other:?}").to_lowercase()
            )))
        }
    };
    match &args.output {
        Some(path) => std::fs::write(path, text)
            .map_err(|e| Failure::user(format!("etopt: error: cannot write {}: {e}", path.display()))),
        None => {
            print!("{text}");
            Ok(())
        }
    }
}
