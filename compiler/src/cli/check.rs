//! `eintup check`: run a program on every configuration the constraints
//! allow and compare its outputs with the framework call written in the
//! file (the original Einsum Tuple tool's purpose). Exit 0 iff every row is
//! valid, 1 otherwise, 3 when the framework cannot be imported.

use super::{Backend, CheckArgs};
use crate::check::bridge::{Bridge, BridgeError, BridgeLocation, CallArgValue, Literal as WireLiteral, Request};
use crate::check::compare::compare;
use crate::cli::shapes::{aligned, dims_text};
use crate::driver::{Failure, Source};
use crate::interp::RunOptions;
use crate::ir::et::{CallArg, Module};
use crate::pipeline;
use crate::sema::config::Space;
use crate::sema::specialize::{specialize, DEFAULT_MEMORY_LIMIT};
use crate::tensor::Tensor;
use et_grammar::ast::Literal;
use et_grammar::Diagnostic;
use std::io::IsTerminal;
use std::path::{Path, PathBuf};

/// The verdict on one configuration.
struct Row {
    dims: Vec<Vec<i64>>,
    /// One entry per output array.
    valid: Vec<bool>,
    /// Why something is invalid (printed below the table).
    problems: Vec<String>,
}

pub fn main(args: CheckArgs) -> Result<(), Failure> {
    let src = Source::load(&args.file)?;
    if args.backend == Backend::Gpu {
        // Fail before starting TensorFlow when there is no GPU.
        crate::gpu::device()?;
    }
    let (prog, ranks) = pipeline::ranked(&src)?;
    let m = &prog.module;
    let Some(call) = &m.call else {
        let mut d = Diagnostic::error("E0501", "the file has no framework call to check against");
        if let Some(last) = m.stmts.last() {
            d = d.at(last.span, "the program ends here, and no call section follows");
        }
        return Err(src.failure(vec![d
            .note("add a call section such as `tf.linalg.matmul(a, b)` after the program (LANGUAGE.md section 2)")]));
    };
    if m.outputs.is_empty() {
        return Err(src.failure(vec![Diagnostic::error("E0502", "the file has no outputs section")
            .at(call.span, "the call's results are compared with the outputs list, which is missing")
            .note("add a line naming the arrays to compare, e.g. `y`, after the call")]));
    }
    let space = Space::new(&prog, &ranks, &[]).map_err(|d| src.failure(d))?;
    let (configs, discarded) = space.enumerate(args.reps, args.seed).map_err(|d| src.failure(d))?;
    let mut bridge = Bridge::start(&BridgeLocation::find()?)?;
    let work = TempDir::new()?;
    let progress = progress_bar(configs.len());
    let mut rows = Vec::new();
    for (k, dims) in configs.into_iter().enumerate() {
        let row = check_one(&src, &prog, &space, dims, &args, &mut bridge, &work.0.join(k.to_string()))?;
        rows.push(row);
        if let Some(p) = &progress {
            p.inc(1);
        }
    }
    if let Some(p) = progress {
        p.finish_and_clear();
    }
    let names: Vec<&str> = m.eintups.iter().map(|e| e.name.as_str()).collect();
    print!("{}", table(&names, &rows));
    let mut all_valid = true;
    for (k, row) in rows.iter().enumerate() {
        for p in &row.problems {
            all_valid = false;
            println!("row {k}: {p}");
        }
        all_valid &= row.valid.iter().all(|&v| v);
    }
    let total: usize = discarded.values().sum();
    if total > 0 {
        eprintln!("discarded {total} draw(s) that violate the constraints");
    }
    if all_valid {
        Ok(())
    } else {
        Err(Failure::CheckFailed)
    }
}

/// Runs one configuration through the interpreter and the framework.
fn check_one(
    src: &Source,
    prog: &crate::sema::Program,
    space: &Space,
    dims: Vec<Vec<i64>>,
    args: &CheckArgs,
    bridge: &mut Bridge,
    dir: &Path,
) -> Result<Row, Failure> {
    let n_out = prog.module.outputs.len();
    let mut row = Row { dims: dims.clone(), valid: vec![false; n_out], problems: Vec::new() };
    let mut p = prog.clone();
    let cfg = space.config(&dims);
    if let Err(d) = specialize(&mut p, &cfg, DEFAULT_MEMORY_LIMIT) {
        row.problems.push(format!("cannot specialise: {}", first_line(&src.failure(d).to_string())));
        return Ok(row);
    }
    let m = &p.module;
    let arrays = crate::exec::execute(src, m, args.backend, &RunOptions { seed: args.seed, ..RunOptions::default() })?;
    std::fs::create_dir_all(dir).map_err(|e| Failure::Internal(format!("cannot create {}: {e}", dir.display())))?;
    let request = build_request(m, &arrays, dir)?;
    let results = match bridge.call(&request) {
        Ok(r) => r,
        Err(BridgeError::Unavailable(why)) => return Err(Failure::Unavailable(why)),
        Err(BridgeError::Call(why)) => {
            row.problems.push(why);
            return Ok(row);
        }
        Err(e) => return Err(Failure::Internal(e.to_string())),
    };
    if results.len() != n_out {
        row.problems.push(format!("the call returned {} result(s) but the outputs section names {n_out}", results.len()));
    }
    for (k, (&out, path)) in m.outputs.iter().zip(&results).enumerate() {
        let theirs = Tensor::read_npy(path).map_err(|e| Failure::Internal(format!("reading {}: {e}", path.display())))?;
        match compare(&arrays[out], &theirs) {
            None => row.valid[k] = true,
            Some(mm) => row.problems.push(format!("output `{}`: {}", m.arrays[out].name, mm)),
        }
    }
    Ok(row)
}

/// Evaluates the call section against one specialised module.
fn build_request(m: &Module, arrays: &[Tensor], dir: &Path) -> Result<Request, Failure> {
    let dims = |ids: &[usize]| -> Vec<i64> { ids.iter().flat_map(|&e| m.eintups[e].dims.clone().unwrap_or_default()).collect() };
    let Some(call) = &m.call else { return Err(Failure::Internal("call section vanished".into())) };
    let mut args = Vec::new();
    let mut kwargs = Vec::new();
    for (kw, arg) in &call.args {
        let value = match arg {
            CallArg::Array(a) => {
                let path = dir.join(format!("{}.npy", m.arrays[*a].name));
                arrays[*a].write_npy(&path).map_err(|e| Failure::Internal(format!("writing {}: {e}", path.display())))?;
                CallArgValue::Array { path }
            }
            CallArg::Dims(ids) => CallArgValue::Ints { value: dims(ids) },
            CallArg::Rank(ids) => CallArgValue::Int { value: ids.iter().map(|&e| m.eintups[e].rank.unwrap_or(0) as i64).sum() },
            CallArg::Tensor(ids) => CallArgValue::Tensor { value: dims(ids) },
            CallArg::Literal(l) => CallArgValue::Literal {
                value: match l {
                    Literal::Str(s) => WireLiteral::Str(s.clone()),
                    Literal::Int(n) => WireLiteral::Int(*n),
                    Literal::Float(x) => WireLiteral::Float(*x),
                    Literal::Word(w) if w == "True" => WireLiteral::Bool(true),
                    Literal::Word(w) if w == "False" => WireLiteral::Bool(false),
                    Literal::Word(_) => WireLiteral::Null,
                },
            },
        };
        match kw {
            Some(k) => kwargs.push((k.clone(), value)),
            None => args.push(value),
        }
    }
    Ok(Request { func: call.func.clone(), args, kwargs, out_dir: dir.to_path_buf() })
}

/// The `shapes` table plus a `Valid` column such as `[True, False]`.
fn table(names: &[&str], rows: &[Row]) -> String {
    let mut header: Vec<String> = names.iter().map(|s| s.to_string()).collect();
    header.push("Valid".into());
    let cells: Vec<Vec<String>> = rows
        .iter()
        .map(|r| {
            let mut c: Vec<String> = r.dims.iter().map(|d| dims_text(d)).collect();
            let v: Vec<&str> = r.valid.iter().map(|&b| if b { "True" } else { "False" }).collect();
            c.push(format!("[{}]", v.join(", ")));
            c
        })
        .collect();
    aligned(&header, &cells)
}

fn first_line(s: &str) -> String {
    s.lines().next().unwrap_or("").to_string()
}

/// A progress bar on stderr, only when stderr is a terminal.
fn progress_bar(n: usize) -> Option<indicatif::ProgressBar> {
    if !std::io::stderr().is_terminal() {
        return None;
    }
    let p = indicatif::ProgressBar::new(n as u64);
    p.set_style(
        indicatif::ProgressStyle::with_template("checking {bar:30} {pos}/{len} configurations")
            .unwrap_or_else(|_| indicatif::ProgressStyle::default_bar()),
    );
    Some(p)
}

/// A scratch directory for the arrays exchanged with the framework,
/// removed when the check ends.
struct TempDir(PathBuf);

impl TempDir {
    fn new() -> Result<TempDir, Failure> {
        let base = std::env::temp_dir();
        for k in 0..1000u32 {
            let p = base.join(format!("eintup-check-{}-{k}", std::process::id()));
            if std::fs::create_dir(&p).is_ok() {
                return Ok(TempDir(p));
            }
        }
        Err(Failure::Internal(format!("cannot create a scratch directory in {}", base.display())))
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}
