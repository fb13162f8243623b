//! `eintup run`: execute a program on one configuration (docs/architecture.md s.5).
//! Backends: the interpreter, compiled host code (`cpu`), NVPTX (`gpu`,
//! or `emu` on the PTX emulator).

use super::{Backend, FpContract, RunArgs};
use eintup::driver::{Failure, Source};
use eintup::interp::RunOptions;
use eintup::ir::et::Module;
use eintup::sema::{Config, InputShape};
use eintup::tensor::{shape_text, Tensor};
use et_grammar::diag::render_all;
use std::collections::BTreeMap;
use std::path::Path;

pub fn main(args: RunArgs) -> Result<(), Failure> {
    let src = Source::load(&args.file)?;
    // The inputs' shapes take part in choosing the configuration.
    let inputs = read_inputs(&args.input)?;
    let shapes: Vec<InputShape> =
        inputs.iter().map(|(name, t)| InputShape { name: name.clone(), shape: t.shape.iter().map(|&d| d as i64).collect() }).collect();
    let (module, config) = eintup::pipeline::specialized_for(&src, &args.bind, &shapes, args.seed, args.float)?;
    if !args.quiet {
        report_config(&src, &config);
    }
    let fp_contract = fp_contract(&args)?;
    if !args.quiet && args.backend != Backend::Interp && fp_contract == FpContract::Off {
        // W0701: FLOAT products that compiled code keeps as written under
        // `off` although another order is cheaper (the interpreter has no
        // policy to change, so nothing to say there).
        let (_, warnings) = eintup::pipeline::planned(&src, &module, args.float, fp_contract)?;
        print_warnings(&src, &warnings);
    }
    let opts = RunOptions { seed: args.seed, float: args.float, inputs, max_work: args.max_work };
    let cache = if args.backend == Backend::Cpu { super::host_cache()? } else { None };
    let arrays = eintup_codegen::backend::execute_cached(&src, &module, args.backend, &opts, fp_contract, cache.as_ref())?;
    emit(args.out.as_deref(), &args.print, &module, &arrays, args.seed, &config)
}

/// The arrays as `--out DIR` files, or printed (`--print summary|full`):
/// what `run` and `exec` end with.
pub fn emit(out: Option<&Path>, print: &str, m: &Module, arrays: &[Tensor], seed: u64, config: &Config) -> Result<(), Failure> {
    match out {
        Some(dir) => write_out(dir, m, arrays, seed, config),
        None => {
            print!("{}", render_outputs(m, arrays, print == "full"));
            Ok(())
        }
    }
}

/// `--fp-contract`, which compiled code honours: asked of the
/// interpreter, it is a usage error rather than silently ignored.
fn fp_contract(args: &RunArgs) -> Result<FpContract, Failure> {
    match (args.fp_contract, args.backend) {
        (Some(_), Backend::Interp) => Err(Failure::user(
            "eintup: error: --fp-contract applies to compiled code (--backend cpu|gpu|emu); `interp` never fuses, it is the definition of the rounding"
                .to_string(),
        )),
        (Some(c), _) => Ok(c),
        (None, b) => Ok(b.default_fp_contract()),
    }
}

/// On stderr: the warnings choosing the configuration gave, then one
/// line saying which dims were bound, taken from inputs, constrained,
/// inferred or drawn.
pub fn report_config(src: &Source, config: &Config) {
    print_warnings(src, &config.warnings);
    eprintln!("configuration: {}", config.describe());
}

/// Warnings (choosing a configuration: W0301, W0302; planning: W0701), on stderr.
pub fn print_warnings(src: &Source, warnings: &[et_grammar::Diagnostic]) {
    if !warnings.is_empty() {
        eprintln!("{}", et_grammar::diag::for_stderr(render_all(warnings, &src.name, &src.text).trim_end()));
    }
}

/// Every `--input NAME=PATH.npy`, by name.
pub fn read_inputs(specs: &[String]) -> Result<BTreeMap<String, Tensor>, Failure> {
    let mut inputs = BTreeMap::new();
    for spec in specs {
        let (name, tensor) = parse_input(spec)?;
        if inputs.insert(name.to_string(), tensor).is_some() {
            return Err(Failure::user(format!("eintup: error[E0407]: `--input {spec}`: `{name}` is supplied twice")));
        }
    }
    Ok(inputs)
}

/// `NAME=PATH.npy` -> (NAME, contents).
fn parse_input(spec: &str) -> Result<(&str, Tensor), Failure> {
    let Some((name, path)) = spec.split_once('=') else {
        return Err(Failure::user(format!("eintup: error[E0407]: `--input {spec}`: expected NAME=PATH.npy")));
    };
    let name = name.trim();
    if name.is_empty() || path.is_empty() {
        return Err(Failure::user(format!("eintup: error[E0407]: `--input {spec}`: expected NAME=PATH.npy")));
    }
    let t = eintup::tensor::npy::read(Path::new(path)).map_err(|e| Failure::user(format!("eintup: error[E0408]: `--input {spec}`: {path}: {e}")))?;
    Ok((name, t))
}

/// Writes every array as `DIR/NAME.npy` and `DIR/config.json`
/// (`{"seed": S, "eintups": {NAME: DIMS}, "sources": {NAME: SOURCE}}`).
pub fn write_out(dir: &Path, m: &Module, arrays: &[Tensor], seed: u64, config: &Config) -> Result<(), Failure> {
    let io = |what: &str, e: std::io::Error| Failure::user(format!("eintup: error[E0409]: cannot write {what}: {e}"));
    std::fs::create_dir_all(dir).map_err(|e| io(&dir.display().to_string(), e))?;
    for (a, t) in m.arrays.iter().zip(arrays) {
        let p = dir.join(format!("{}.npy", a.name));
        eintup::tensor::npy::write(&p, t).map_err(|e| io(&p.display().to_string(), e))?;
    }
    let eintups: serde_json::Map<String, serde_json::Value> = config.dims.iter().map(|(n, d)| (n.clone(), serde_json::json!(d))).collect();
    let sources: serde_json::Map<String, serde_json::Value> =
        config.dims.iter().zip(&config.sources).map(|((n, _), s)| (n.clone(), serde_json::json!(s.text()))).collect();
    let cfg = serde_json::json!({ "seed": seed, "eintups": eintups, "sources": sources });
    let p = dir.join("config.json");
    let text = serde_json::to_string(&cfg).map_err(|e| Failure::Internal(e.to_string()))?;
    eintup::tensor::outfile::replace(&p, |mut f| std::io::Write::write_all(&mut f, (text + "\n").as_bytes())).map_err(|e| io(&p.display().to_string(), e))
}

/// The program's results (`Module::result_arrays`), each under a `name: TYPE [shape]` line; large ones
/// summarised as NumPy prints them unless `full`.
pub fn render_outputs(m: &Module, arrays: &[Tensor], full: bool) -> String {
    let mut out = String::new();
    for (k, a) in m.result_arrays().into_iter().enumerate() {
        let (Some(arr), Some(t)) = (m.arrays.get(a), arrays.get(a)) else { continue };
        if k > 0 {
            out.push('\n');
        }
        let text = if full { t.to_string() } else { t.summarized() };
        out.push_str(&format!("{}: {} {}\n{text}\n", arr.name, eintup::tensor::type_text(t.dtype()), shape_text(&t.shape)));
    }
    out
}
