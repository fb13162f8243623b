//! `eintup check`: run a program on every configuration the constraints
//! allow and compare its outputs with the framework call written in the
//! file (the original Einsum Tuple tool's purpose). The call is vetted
//! before anything runs (a refused call is E0503, exit 2), and its name
//! resolved by the bridge before the first configuration (E0506); each output of
//! each configuration is then valid, mismatched or a framework error
//! (`check::outcome`), or skipped when eintup cannot run it. Exit 1 when
//! anything mismatched, 2 when the framework failed on every configuration
//! that reached it (E0504) or nothing could be run (E0505), 3 when the
//! framework cannot be imported, 0 otherwise. `--bind` checks one
//! configuration; `--float`, `--rtol`, `--atol` set the width and the
//! tolerances; `--call-timeout` and `--call-memory` bound each framework
//! call; `--json` prints one object per configuration as it finishes (JSON
//! Lines), then a summary object.

use super::{Backend, CheckArgs};
use crate::cli::shapes::{aligned, dims_text};
use eintup::check::bridge::{Bridge, BridgeError, BridgeLocation, CallArgValue, GradientRequest, Literal as WireLiteral, Request};
use eintup::check::compare::Mismatch;
use eintup::check::limits::CallLimits;
use eintup::check::outcome::{judge, Row, Summary, Verdict};
use eintup::check::policy;
use eintup::check::Tolerance;
use eintup::driver::{Failure, Source};
use eintup::interp::RunOptions;
use eintup::ir::et::{CallArg, DimsList, FrameworkCall, Module};
use eintup::pipeline;
use eintup::sema::config::{parse_bindings, Space};
use eintup::tensor::Tensor;
use et_grammar::ast::Literal;
use et_grammar::Diagnostic;
use std::io::IsTerminal;
use std::path::Path;

/// Longest function name quoted in full in a diagnostic's message.
const QUOTED_NAME_CHARS: usize = 80;

/// Checks every file; returns the exit code they add up to (the worst).
/// One file fails as before; of several, each failure is reported under
/// its file's header and the next file is checked, but for a missing
/// framework (exit 3), which no other file could get past.
pub fn main(args: CheckArgs) -> Result<i32, Failure> {
    if args.files.len() > 1 && !args.bind.is_empty() {
        return Err(Failure::user("eintup: error: --bind names one program's eintups: check one file with it, not several"));
    }
    let mut bridge = None;
    if let [file] = args.files.as_slice() {
        return check_file(&args, file, None, &mut bridge).map(|()| eintup::driver::exit::OK);
    }
    let mut code = eintup::driver::exit::OK;
    for file in &args.files {
        if !args.json {
            print_line(&format!("== {}", file.display()));
        }
        match check_file(&args, file, Some(file), &mut bridge) {
            Ok(()) => {}
            Err(f @ Failure::Unavailable(_)) => return Err(f),
            Err(f) => {
                if !matches!(f, Failure::CheckFailed) {
                    eprintln!("{}", et_grammar::diag::for_stderr(&f.to_string()));
                }
                code = worse(code, f.exit_code());
            }
        }
    }
    Ok(code)
}

/// The worse of two exit codes: an internal error (70) over a missing
/// framework (3) over a user error (2) over a mismatch (1) over success.
fn worse(a: i32, b: i32) -> i32 {
    use eintup::driver::exit;
    let rank = |c: i32| [exit::OK, exit::CHECK_FAILED, exit::USER, exit::UNAVAILABLE, exit::INTERNAL].iter().position(|&k| k == c).unwrap_or(5);
    if rank(b) > rank(a) {
        b
    } else {
        a
    }
}

/// Checks one program. `json_file`: the file named in each JSON object
/// (when several are checked). The bridge is started on the first file
/// that reaches a framework call and serves the later ones.
fn check_file(args: &CheckArgs, file: &Path, json_file: Option<&Path>, bridge_slot: &mut Option<Bridge>) -> Result<(), Failure> {
    let src = Source::load(file)?;
    if args.backend == Backend::Gpu {
        // Fail before starting TensorFlow when there is no GPU.
        eintup_codegen::gpu::device(eintup_runtime::DeviceKind::Cuda)?;
    }
    let (prog, ranks) = pipeline::ranked(&src)?;
    let m = &prog.module;
    let Some(call) = &m.call else {
        let mut d = Diagnostic::error("E0501", "the file has no framework call to check against");
        if let Some(last) = m.stmts.last() {
            d = d.at(last.span, "the program ends here, and no call section follows");
        }
        return Err(src.failure(vec![d.note("add a call section such as `tf.linalg.matmul(a, b)` after the program (docs/language.md section 2)")]));
    };
    if m.outputs.is_empty() {
        return Err(src.failure(vec![Diagnostic::error("E0502", "the file has no outputs section")
            .at(call.span, "the call's results are compared with the outputs list, which is missing")
            .note("add a line naming the arrays to compare, e.g. `y`, after the call")]));
    }
    // Before any Python starts: the file chose the call, and files are shared.
    vet_call(&src, call)?;
    let binds = parse_bindings(&args.bind).map_err(Failure::user)?;
    let space = Space::new(&prog, &ranks, &binds, &[]).map_err(|d| src.failure(d))?;
    let (configs, discarded) = if binds.is_empty() {
        space.enumerate(args.reps, args.seed).map_err(|d| src.failure(d))?
    } else {
        // One configuration, the one `run` would choose with these bindings.
        let dims = space.choose(args.seed).map_err(|d| src.failure(d))?;
        if !args.quiet {
            super::run::print_warnings(&src, &space.config(&dims).warnings);
        }
        (vec![dims], Default::default())
    };
    let defaults = Tolerance::default_for(args.float);
    let tol = Tolerance { rtol: args.rtol.unwrap_or(defaults.rtol), atol: args.atol.unwrap_or(defaults.atol) };
    let limits = CallLimits { time: args.call_timeout.0, memory: args.call_memory.0 };
    let bridge = match bridge_slot {
        Some(b) => b,
        None => {
            let b = Bridge::start_with(&BridgeLocation::find()?, limits)?;
            if b.sandbox().starts_with("none") {
                eprintln!("note: the framework bridge runs without a sandbox: {}", b.sandbox());
            }
            bridge_slot.insert(b)
        }
    };
    let grad = if args.grad { Some(GradCheck::new(&src, &prog, call)?) } else { None };
    let names: Vec<&str> = m.eintups.iter().map(|e| e.name.as_str()).collect();
    let outputs: Vec<&str> = match &grad {
        Some(g) => g.gradients.iter().map(String::as_str).collect(),
        None => m.outputs.iter().map(|&a| m.arrays[a].name.as_str()).collect(),
    };
    // Rows stream: a long check shows what it has done so far, on a
    // terminal as a bar, elsewhere (CI logs, pipes) one line per row;
    // `--json` rows go to stdout as they finish.
    resolve_call(&src, call, bridge)?;
    let progress = Progress::new(configs.len(), args.quiet || args.json);
    let mut rows = Vec::new();
    for (k, dims) in configs.into_iter().enumerate() {
        let row = check_one(&src, &prog, &space, dims, args, Compared { tol, grad: grad.as_ref() }, bridge, k)?;
        if args.json {
            print_line(&with_file(json_row(k, &names, &outputs, &row), json_file).to_string());
        }
        progress.row_done(k, &names, &row);
        rows.push(row);
    }
    progress.finish();
    let summary = Summary::of(&rows);
    if args.json {
        print_line(&with_file(json_summary(&summary), json_file).to_string());
        eprintln!("{}", summary.line());
    } else {
        print!("{}", table(&names, &rows));
        for (k, row) in rows.iter().enumerate() {
            for p in &row.problems {
                println!("row {k}: {p}");
            }
        }
        println!("{}", summary.line());
    }
    let total: usize = discarded.values().sum();
    if total > 0 {
        eprintln!("discarded {total} draw(s) that violate the constraints");
    }
    if summary.mismatched > 0 {
        return Err(Failure::CheckFailed);
    }
    if summary.nothing_compared() {
        return Err(src.failure(vec![Diagnostic::error("E0505", "no configuration could be run to compare")
            .at(call.span, "this call was never compared")
            .note("every configuration the constraints allowed exceeds eintup's limits (rows above); narrow the DIMS ranges")]));
    }
    if summary.call_always_failed() {
        let first = rows.iter().flat_map(|r| r.problems.first()).next().cloned().unwrap_or_default();
        // A call over a limit is not a wrong call: say which flag to raise.
        let why = if first.contains("(--call-timeout)") || first.contains("(--call-memory)") {
            "the call went over a limit of `check` on every configuration: raise --call-timeout or --call-memory, or narrow the DIMS ranges (docs/check.md#limits)"
        } else {
            "the call is wrong (a misspelt function, wrong arguments) or unsupported by the framework; the rows above give each reason"
        };
        return Err(src.failure(vec![Diagnostic::error("E0504", "the framework call failed on every configuration")
            .at(call.span, "no configuration got a comparable result from this call")
            .note(format!("the first reason: {first}"))
            .note(why)]));
    }
    Ok(())
}

/// Refuses a framework call the policy does not allow (E0503), pointing at
/// the function name or the keyword (docs/check.md, "Which calls are
/// allowed"). What is vetted is the resolved call, the one the bridge would
/// be sent; the syntax tree is read again only for the spans of the name and
/// keywords, falling back to the whole call.
fn vet_call(src: &Source, call: &FrameworkCall) -> Result<(), Failure> {
    let ast = et_grammar::parse_file(&src.text).ok().and_then(|f| f.call);
    let name_span = name_span(ast.as_ref(), call);
    let keyword_span = |kw: &str| {
        let ast_kw = ast.as_ref().and_then(|c| c.args.iter().filter_map(|a| a.keyword.as_ref()).find(|k| k.name == kw));
        ast_kw.map_or(call.span, |k| k.span)
    };
    let note = format!(
        "`check` runs only pure TensorFlow operations from {}; see docs/check.md",
        policy::allowed_namespaces().iter().map(|n| format!("`{n}`")).collect::<Vec<_>>().join(", ")
    );
    let mut diags = Vec::new();
    if let Err(why) = policy::vet_function(&call.func) {
        diags.push(
            Diagnostic::error("E0503", format!("the framework call `{}` is not allowed", shortened(&call.func))).at(name_span, why.to_string()).note(note),
        );
    }
    for kw in call.args.iter().filter_map(|(kw, _)| kw.as_deref()) {
        if let Err(why) = policy::vet_keyword(kw) {
            diags.push(
                Diagnostic::error("E0503", format!("the keyword `{}` is not allowed in a framework call", shortened(kw))).at(keyword_span(kw), why.to_string()),
            );
        }
    }
    if diags.is_empty() {
        Ok(())
    } else {
        Err(src.failure(diags))
    }
}

/// The span of the call's function name in the syntax tree, or the whole
/// call.
fn name_span(ast: Option<&et_grammar::ast::Call>, call: &FrameworkCall) -> et_grammar::Span {
    ast.and_then(|c| Some(c.func.first()?.span.to(c.func.last()?.span))).unwrap_or(call.span)
}

/// Asks the bridge, once before any configuration runs, whether the call's
/// name resolves to a function it would call: a misspelt `tf.linalg.matmull`
/// is E0506 (exit 2) at the name now, not a framework error on every row
/// after all of them ran. A bridge that dies here is left to the rows,
/// which report it as they always have.
fn resolve_call(src: &Source, call: &FrameworkCall, bridge: &mut Bridge) -> Result<(), Failure> {
    match bridge.resolve(&call.func) {
        Ok(()) | Err(BridgeError::Protocol(_) | BridgeError::Stopped(_)) => Ok(()),
        Err(BridgeError::Unavailable(why)) => Err(Failure::Unavailable(why)),
        Err(BridgeError::Call(why)) => {
            let ast = et_grammar::parse_file(&src.text).ok().and_then(|f| f.call);
            // The bridge's reason starts with the name, which the header gives.
            let why = why.strip_prefix(&format!("{}: ", call.func)).unwrap_or(&why).to_string();
            Err(src.failure(vec![Diagnostic::error("E0506", format!("the framework call `{}` cannot be resolved", shortened(&call.func)))
                .at(name_span(ast.as_ref(), call), why)
                .note("found before any configuration ran; the name is resolved as the bridge resolves it (docs/check.md)")]))
        }
        Err(e @ BridgeError::Encode(_)) => Err(Failure::Internal(e.to_string())),
    }
}

/// `name`, cut to its first characters when it is very long.
fn shortened(name: &str) -> String {
    if name.chars().count() <= QUOTED_NAME_CHARS {
        name.to_string()
    } else {
        format!("{}...", name.chars().take(QUOTED_NAME_CHARS).collect::<String>())
    }
}

/// What a row compares, and how closely: the outputs, or with `--grad`
/// the gradients.
#[derive(Clone, Copy)]
struct Compared<'a> {
    tol: Tolerance,
    grad: Option<&'a GradCheck>,
}

/// Runs one configuration through the interpreter and the framework.
fn check_one(
    src: &Source,
    prog: &eintup::sema::Program,
    space: &Space,
    dims: Vec<Vec<i64>>,
    args: &CheckArgs,
    compared: Compared<'_>,
    bridge: &mut Bridge,
    row_index: usize,
) -> Result<Row, Failure> {
    let Compared { tol, grad } = compared;
    let n_out = grad.map_or(prog.module.outputs.len(), |g| g.gradients.len());
    let cfg = space.config(&dims);
    let module = match pipeline::specialized_to(src, prog, space.ranks, &cfg, args.float) {
        Ok(m) => m,
        // eintup cannot run this configuration (too large): nothing to compare.
        Err(f @ Failure::User(_)) => return Ok(Row::all(dims, n_out, Verdict::Skipped, format!("skipped: {}", first_line(&f.to_string())))),
        Err(f) => return Err(f),
    };
    let m = &module;
    let opts = RunOptions { seed: args.seed, float: args.float, max_work: args.max_work, ..RunOptions::default() };
    let arrays = match eintup_codegen::backend::execute(src, m, args.backend, &opts, args.backend.default_fp_contract()) {
        Ok(a) => a,
        // Refused before running (the work limit, E0318; an array too
        // large for the interpreter): nothing to compare.
        Err(f @ Failure::User(_)) => return Ok(Row::all(dims, n_out, Verdict::Skipped, format!("skipped: {}", first_line(&f.to_string())))),
        Err(f) => return Err(f),
    };
    // Asked now: the bridge's directory changes when a stopped process
    // was replaced.
    let dir = &bridge.work_dir().join(row_index.to_string());
    std::fs::create_dir_all(dir).map_err(|e| Failure::Internal(format!("cannot create {}: {e}", dir.display())))?;
    let mut request = build_request(m, &arrays, dir)?;
    // With --grad: the adjoint at this configuration and these inputs,
    // and the call's gradient with the adjoint's cotangents.
    let adjoint = match grad {
        None => None,
        Some(g) => match g.run(m, &arrays, args, dir, &mut request) {
            Ok(a) => Some(a),
            Err(f @ Failure::User(_)) => return Ok(Row::all(dims, n_out, Verdict::Skipped, format!("skipped: {}", first_line(&f.to_string())))),
            Err(f) => return Err(f),
        },
    };
    let results = match bridge.call(&request) {
        Ok(r) => r,
        Err(BridgeError::Unavailable(why)) => return Err(Failure::Unavailable(why)),
        // The call raised or went over a limit, or the bridge died or broke
        // the protocol (a new process serves the next row): the framework
        // gave nothing.
        Err(BridgeError::Call(why)) => return Ok(Row::all(dims, n_out, Verdict::FrameworkError, format!("framework error: {why}"))),
        Err(e @ (BridgeError::Protocol(_) | BridgeError::Stopped(_))) => {
            return Ok(Row::all(dims, n_out, Verdict::FrameworkError, format!("framework error: {e}")));
        }
        Err(e @ BridgeError::Encode(_)) => return Err(Failure::Internal(e.to_string())),
    };
    if results.len() != n_out {
        let why = format!("framework error: the call returned {} result(s) but the outputs section names {n_out}", results.len());
        return Ok(Row::all(dims, n_out, Verdict::FrameworkError, why));
    }
    // What is compared: the outputs, or with --grad the gradients.
    let (cm, carrays, compared): (&Module, &[Tensor], Vec<usize>) = match &adjoint {
        None => (m, &arrays, m.outputs.clone()),
        Some((am, a)) => (am, a, grad.map(|g| g.gradients.iter().filter_map(|n| am.array_by_name(n)).collect()).unwrap_or_default()),
    };
    let mut row = Row { dims, outputs: Vec::new(), problems: Vec::new() };
    for (&out, path) in compared.iter().zip(&results) {
        let name = &cm.arrays[out].name;
        let report = judge(name, &carrays[out], path, tol);
        row.problems.extend(report.reason.as_ref().map(|r| format!("output `{name}`: {r}")));
        row.outputs.push(report);
    }
    if let Some(keep) = &args.keep {
        if row.verdicts().contains(&Verdict::Mismatch) {
            let kept = keep_row(keep, row_index, cm, carrays, &compared, &results, &row.dims)?;
            row.problems.push(format!("arrays kept in {}", kept.display()));
        }
    }
    Ok(row)
}

/// `--keep DIR`: a mismatching row's arrays, for a closer look, in
/// `DIR/row-K/`: `eintup/NAME.npy` for every array of the program,
/// `framework/NAME.npy` for each result of the call (named by the outputs
/// section), and `config.json` (every eintup's dims). A file already there
/// is replaced, never written through (a planted link stays untouched).
fn keep_row(
    keep: &Path,
    k: usize,
    m: &Module,
    arrays: &[Tensor],
    compared: &[usize],
    results: &[std::path::PathBuf],
    dims: &[Vec<i64>],
) -> Result<std::path::PathBuf, Failure> {
    let dir = keep.join(format!("row-{k}"));
    let io = |what: &Path, e: std::io::Error| Failure::user(format!("eintup: error: --keep: cannot write {}: {e}", what.display()));
    for sub in ["eintup", "framework"] {
        std::fs::create_dir_all(dir.join(sub)).map_err(|e| io(&dir.join(sub), e))?;
    }
    let fresh = |path: &Path| match std::fs::remove_file(path) {
        Err(e) if e.kind() != std::io::ErrorKind::NotFound => Err(io(path, e)),
        _ => Ok(()),
    };
    for (a, t) in m.arrays.iter().zip(arrays) {
        let path = dir.join("eintup").join(format!("{}.npy", a.name));
        fresh(&path)?;
        eintup::tensor::npy::write(&path, t).map_err(|e| Failure::user(format!("eintup: error: --keep: cannot write {}: {e}", path.display())))?;
    }
    for (&out, from) in compared.iter().zip(results) {
        let path = dir.join("framework").join(format!("{}.npy", m.arrays[out].name));
        fresh(&path)?;
        std::fs::copy(from, &path).map_err(|e| io(&path, e))?;
    }
    let config: serde_json::Map<String, serde_json::Value> = m.eintups.iter().zip(dims).map(|(e, d)| (e.name.clone(), serde_json::json!(d))).collect();
    let path = dir.join("config.json");
    fresh(&path)?;
    std::fs::write(&path, serde_json::Value::Object(config).to_string() + "\n").map_err(|e| io(&path, e))?;
    Ok(dir)
}

/// `check --grad` of one file: the adjoint with respect to the call's
/// FLOAT input arguments, the computed FLOAT arguments held constant (the
/// framework sees them as given tensors), of the FLOAT outputs.
struct GradCheck {
    src: Source,
    adjoint: eintup::autodiff::Adjoint,
    /// Forward names of the arrays differentiated with respect to.
    wrt: Vec<String>,
    /// The adjoint's gradient arrays, in `wrt` order.
    gradients: Vec<String>,
    /// Per output of the outputs section: the adjoint's cotangent input
    /// (`None` for an INT output).
    cotangents: Vec<Option<String>>,
}

impl GradCheck {
    fn new(src: &Source, prog: &eintup::sema::Program, call: &FrameworkCall) -> Result<GradCheck, Failure> {
        use eintup::ir::et::ElemType;
        let m = &prog.module;
        let mut wrt = Vec::new();
        let mut constant = Vec::new();
        for (_, arg) in &call.args {
            if let CallArg::Array(a) = arg {
                let arr = &m.arrays[*a];
                if arr.dtype == ElemType::Float {
                    (if arr.is_input { &mut wrt } else { &mut constant }).push(arr.name.clone());
                }
            }
        }
        if wrt.is_empty() {
            return Err(src.failure(vec![Diagnostic::error("E0507", "check --grad: the call takes no FLOAT input array to differentiate with respect to")
                .at(call.span, "no argument of this call is a FLOAT array defined by RANDOM")]));
        }
        let of: Vec<String> = m.outputs.iter().map(|&a| &m.arrays[a]).filter(|a| a.dtype == ElemType::Float).map(|a| a.name.clone()).collect();
        if of.is_empty() {
            return Err(src.failure(vec![Diagnostic::error("E0507", "check --grad: the outputs section names no FLOAT array to differentiate")
                .at(call.span, "its results are compared with the outputs")]));
        }
        let request = eintup::autodiff::Request { wrt: wrt.clone(), of: of.clone(), constant };
        let adjoint = eintup::autodiff::differentiate(prog, &request).map_err(|d| src.failure(d))?;
        let mut cot = of.iter().zip(&adjoint.cotangents);
        let cotangents = m.outputs.iter().map(|&a| if m.arrays[a].dtype == ElemType::Float { cot.next().map(|(_, c)| c.clone()) } else { None }).collect();
        let src = Source::from_string(&format!("{} (adjoint)", src.name), &adjoint.source);
        Ok(GradCheck { src, wrt, gradients: adjoint.gradients.clone(), cotangents, adjoint })
    }

    /// Runs the adjoint at the configuration of `m` with its inputs, and
    /// asks `request` for the gradient with the adjoint's cotangents.
    fn run(&self, m: &Module, arrays: &[Tensor], args: &CheckArgs, dir: &Path, request: &mut Request) -> Result<(Module, Vec<Tensor>), Failure> {
        let binds = self.adjoint.binds_at(m.eintups.iter().map(|e| (e.name.as_str(), e.dims.as_deref().unwrap_or_default())));
        let (am, _) = pipeline::specialized_for(&self.src, &binds, &[], args.seed, args.float)?;
        let inputs = am.arrays.iter().filter(|a| a.is_input).filter_map(|a| Some((a.name.clone(), arrays[m.array_by_name(&a.name)?].clone()))).collect();
        let opts = RunOptions { seed: args.seed, float: args.float, max_work: args.max_work, inputs };
        let got = eintup_codegen::backend::execute(&self.src, &am, args.backend, &opts, args.backend.default_fp_contract())?;
        let write = |name: &str| -> Result<std::path::PathBuf, Failure> {
            let path = dir.join(format!("{name}.npy"));
            let a = am.array_by_name(name).ok_or_else(|| Failure::Internal(format!("the adjoint lost `{name}`")))?;
            eintup::tensor::npy::write(&path, &got[a]).map_err(|e| Failure::Internal(format!("writing {}: {e}", path.display())))?;
            Ok(path)
        };
        let cotangents = self.cotangents.iter().map(|c| c.as_deref().map(write).transpose()).collect::<Result<_, _>>()?;
        // build_request wrote each array argument as dir/NAME.npy.
        let wrt = self.wrt.iter().map(|n| dir.join(format!("{n}.npy"))).collect();
        request.gradient = Some(GradientRequest { wrt, cotangents });
        Ok((am, got))
    }
}

/// Evaluates the call section against one specialised module.
fn build_request(m: &Module, arrays: &[Tensor], dir: &Path) -> Result<Request, Failure> {
    // A literal `n` in the list renders as `n + 1` (`DIMS(0,stride,0)` is `[1, s.., 1]`).
    let dims = |l: &DimsList| -> Vec<i64> { l.value(|e| Some(m.eintups[e].dims.clone().unwrap_or_default())).unwrap_or_default() };
    let Some(call) = &m.call else { return Err(Failure::Internal("call section vanished".into())) };
    let mut args = Vec::new();
    let mut kwargs = Vec::new();
    for (kw, arg) in &call.args {
        let value = match arg {
            CallArg::Array(a) => {
                let path = dir.join(format!("{}.npy", m.arrays[*a].name));
                eintup::tensor::npy::write(&path, &arrays[*a]).map_err(|e| Failure::Internal(format!("writing {}: {e}", path.display())))?;
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
    Ok(Request { func: call.func.clone(), args, kwargs, out_dir: dir.to_path_buf(), gradient: None })
}

/// The `shapes` table plus a `Valid` column such as `[True, False]`, with
/// `Error` for an output the framework gave nothing comparable for.
fn table(names: &[&str], rows: &[Row]) -> String {
    let mut header: Vec<String> = names.iter().map(|s| s.to_string()).collect();
    header.push("Valid".into());
    let cells: Vec<Vec<String>> = rows
        .iter()
        .map(|r| {
            let mut c: Vec<String> = r.dims.iter().map(|d| dims_text(d)).collect();
            let v: Vec<&str> = r.verdicts().iter().map(|v| v.word()).collect();
            c.push(format!("[{}]", v.join(", ")));
            c
        })
        .collect();
    aligned(&header, &cells)
}

/// One row of `check --json` (JSON Lines, printed as the row finishes):
/// `{"row": K, "configuration": {EINTUP: DIMS}, "verdict": V, "outputs":
/// [{"name", "verdict", "largest_error": {"abs", "rel"} | null,
/// "first_difference": {"index", "eintup", "framework"} | null, "reason"}]}`.
/// An infinite error (a NaN or infinity on one side only) is `null`.
fn json_row(k: usize, eintups: &[&str], outputs: &[&str], r: &Row) -> serde_json::Value {
    use serde_json::{json, Value};
    let number = |x: f64| if x.is_finite() { json!(x) } else { Value::Null };
    let config: serde_json::Map<String, Value> = eintups.iter().zip(&r.dims).map(|(n, d)| (n.to_string(), json!(d))).collect();
    let outs: Vec<Value> = outputs
        .iter()
        .zip(&r.outputs)
        .map(|(name, o)| {
            let first = match &o.first_difference {
                Some(Mismatch::Value { index, ours, theirs }) => json!({"index": index, "eintup": ours, "framework": theirs}),
                _ => Value::Null,
            };
            json!({
                "name": name,
                "verdict": o.verdict.json_word(),
                "largest_error": o.deviation.map_or(Value::Null, |d| json!({"abs": number(d.abs), "rel": number(d.rel)})),
                "first_difference": first,
                "reason": o.reason,
            })
        })
        .collect();
    json!({"row": k, "configuration": config, "verdict": r.verdict().json_word(), "outputs": outs})
}

/// The last line of `check --json`: `{"summary": {"valid", "mismatched",
/// "framework_errors", "skipped", "configurations"}}`.
fn json_summary(s: &Summary) -> serde_json::Value {
    serde_json::json!({"summary": {
        "valid": s.valid,
        "mismatched": s.mismatched,
        "framework_errors": s.framework_errors,
        "skipped": s.skipped,
        "configurations": s.total(),
    }})
}

/// A JSON object with `"file": PATH` added, when several files are checked.
fn with_file(v: serde_json::Value, file: Option<&Path>) -> serde_json::Value {
    match (v, file) {
        (serde_json::Value::Object(o), Some(f)) => {
            let mut o = o;
            o.insert("file".into(), serde_json::json!(f.display().to_string()));
            serde_json::Value::Object(o)
        }
        (v, _) => v,
    }
}

/// One line on stdout, flushed now: a reader of a pipe sees each row as
/// it finishes, not when the buffer fills.
fn print_line(line: &str) {
    use std::io::Write;
    let mut out = std::io::stdout().lock();
    let _ = writeln!(out, "{line}").and_then(|()| out.flush());
}

fn first_line(s: &str) -> String {
    s.lines().next().unwrap_or("").to_string()
}

/// Progress on stderr as rows finish: a bar on a terminal, else one line
/// per row (`row K of T: a=[2], b=[3]: [True]`), or nothing (`-q`, or
/// `--json`, whose rows stream on stdout; on a terminal it keeps the bar).
enum Progress {
    Bar(indicatif::ProgressBar),
    Lines(usize),
    Silent,
}

impl Progress {
    fn new(n: usize, no_lines: bool) -> Progress {
        if std::io::stderr().is_terminal() {
            let p = indicatif::ProgressBar::new(n as u64);
            p.set_style(
                indicatif::ProgressStyle::with_template("checking {bar:30} {pos}/{len} configurations")
                    .unwrap_or_else(|_| indicatif::ProgressStyle::default_bar()),
            );
            Progress::Bar(p)
        } else if no_lines {
            Progress::Silent
        } else {
            Progress::Lines(n)
        }
    }

    fn row_done(&self, k: usize, names: &[&str], row: &Row) {
        match self {
            Progress::Bar(p) => p.inc(1),
            Progress::Lines(n) => {
                let dims: Vec<String> = names.iter().zip(&row.dims).map(|(e, d)| format!("{e}={}", dims_text(d))).collect();
                let v: Vec<&str> = row.verdicts().iter().map(|v| v.word()).collect();
                eprintln!("row {k} of {n}: {}: [{}]", dims.join(", "), v.join(", "));
            }
            Progress::Silent => {}
        }
    }

    fn finish(self) {
        if let Progress::Bar(p) = self {
            p.finish_and_clear();
        }
    }
}
