//! `eintup build`: compile one configuration of a program ahead of time
//! into a PTX bundle (docs/bundle.md).

use super::BuildArgs;
use eintup::driver::{count, Failure, Source};
use eintup_codegen::bundle::{self, BuildOptions};
use std::path::{Path, PathBuf};

pub fn main(args: BuildArgs) -> Result<(), Failure> {
    let sm = parse_target("eintup", &args.target)?.sm;
    let src = Source::load(&args.file)?;
    if eintup::ir::text::kind_of(&src.text) == eintup::ir::text::TextKind::LoopIr {
        if !args.grad.is_empty() {
            return Err(Failure::user(
                "eintup: error: --grad differentiates a program; a loop module has none (differentiate its program and build that)".to_string(),
            ));
        }
        return build_loop_module(&args, &src, sm);
    }
    if !args.dim.is_empty() {
        return Err(Failure::user("eintup: error: --dim gives the dims of a loop module's symbols; a program's dims are --bind's".to_string()));
    }
    // The adjoint first: a `--grad` name that cannot be differentiated
    // fails before any bundle is written.
    let adjoint = match args.grad.is_empty() {
        true => None,
        false => {
            let prog = eintup::pipeline::resolved(&src)?;
            let request = eintup::autodiff::Request { wrt: args.grad.clone(), of: Vec::new(), constant: Vec::new() };
            let a = eintup::autodiff::differentiate(&prog, &request).map_err(|d| src.failure(d))?;
            let adj_src = Source::from_string(&format!("{} (adjoint)", src.name), &a.source);
            Some((a, adj_src))
        }
    };
    let grad_out = grad_path(&args.output);
    if args.dynamic {
        build_dynamic(&args, &src, sm, &args.bind, &args.output)?;
        return adjoint.map_or(Ok(()), |(_, a)| build_dynamic(&args, &a, sm, &args.bind, &grad_out));
    }
    let config = build_static(&args, &src, sm, &args.bind, &args.output)?;
    let Some((adjoint, adj_src)) = adjoint else { return Ok(()) };
    // The adjoint at the forward bundle's dims, so the two take the same arrays.
    let binds = adjoint.binds_at(config.dims.iter().map(|(n, d)| (n.as_str(), d.as_slice())));
    build_static(&args, &adj_src, sm, &binds, &grad_out).map(|_| ())
}

/// `OUT.etb` -> `OUT.grad.etb`: where `--grad` writes the adjoint's bundle.
fn grad_path(out: &Path) -> PathBuf {
    let stem = out.file_stem().map(|s| s.to_string_lossy().into_owned()).unwrap_or_default();
    let ext = out.extension().map(|e| format!(".{}", e.to_string_lossy())).unwrap_or_default();
    out.with_file_name(format!("{stem}.grad{ext}"))
}

/// One configuration of `src` (chosen with `binds`) into a bundle at
/// `output`; returns the configuration.
fn build_static(args: &BuildArgs, src: &Source, sm: u32, binds: &[String], output: &Path) -> Result<eintup::sema::Config, Failure> {
    let (module, config) = eintup::pipeline::specialized_for(src, binds, &[], args.seed, args.float)?;
    super::run::print_warnings(src, &config.warnings);
    let (planned, warnings) = eintup::pipeline::planned(src, &module, args.float, args.fp_contract)?;
    super::run::print_warnings(src, &warnings);
    let gpu = eintup::pipeline::GpuOptions { deterministic: args.deterministic, ..eintup::pipeline::GpuOptions::new(args.float, args.fp_contract, sm) };
    let lm = eintup::pipeline::lower_gpu(src, &planned, &gpu)?;
    let b = bundle::build(src, &module, &lm, &config, &BuildOptions { seed: args.seed, float: args.float, sm, fp_contract: args.fp_contract })?;
    let generated = format!("{} generated on the device", count(b.manifest().generate.len(), "input", "inputs"));
    write(&b, output, sm, &generated)?;
    Ok(config)
}

/// Writes bundle `b` to `output` and reports it: kernels, launches,
/// `what` (how its inputs or shapes come), target and PTX version.
fn write(b: &eintup_runtime::Bundle, output: &Path, sm: u32, what: &str) -> Result<(), Failure> {
    b.write(output).map_err(|e| Failure::user(format!("eintup: error: cannot write bundle {}: {e}", output.display())))?;
    let m = b.manifest();
    eprintln!(
        "wrote {} ({}, {}, {what}, sm_{sm}, PTX {})",
        output.display(),
        count(m.kernels.len(), "kernel", "kernels"),
        count(m.steps.len(), "launch", "launches"),
        m.target.ptx_version
    );
    Ok(())
}

/// A loop module (`.etir`, printed IR) into a bundle: through the GPU's
/// loop passes, to PTX once. A module with dim symbols gives a dynamic
/// bundle (format 2, docs/bundle.md#dynamic-bundles) recorded at the
/// configuration `--dim NAME=V` gives (every symbol 1 when not given), which
/// `etrun` re-binds to its inputs' shapes. Inputs are the caller's.
fn build_loop_module(args: &BuildArgs, src: &Source, sm: u32) -> Result<(), Failure> {
    let lm = eintup::ir::loops::parse::parse_verified(&src.text).map_err(|d| src.failure(d))?;
    let mut dims = vec![1i64; lm.dims.len()];
    for spec in &args.dim {
        let parsed = spec.split_once('=').and_then(|(n, v)| Some((n.trim_start_matches('%'), v.parse::<i64>().ok().filter(|v| *v >= 0)?)));
        let Some((name, v)) = parsed else { return Err(Failure::user(format!("eintup: error: --dim {spec}: expected NAME=N with N >= 0"))) };
        let Some(d) = lm.dims.iter().position(|d| d.name == name) else {
            let names: Vec<&str> = lm.dims.iter().map(|d| d.name.as_str()).collect();
            return Err(Failure::user(format!(
                "eintup: error: --dim {spec}: the module has no dim `%{name}` (its dims: {})",
                if names.is_empty() { "none".to_string() } else { names.join(", ") }
            )));
        };
        dims[d] = v;
    }
    check_bundle_size(&lm, &dims)?;
    let opts = eintup::pipeline::GpuOptions { deterministic: args.deterministic, ..eintup::pipeline::GpuOptions::new(args.float, args.fp_contract, sm) };
    let lm = eintup::pipeline::optimize_gpu(src, lm, &opts)?;
    let (ptx, info) = eintup_codegen::emit_ptx(&lm, args.seed, sm, args.fp_contract).map_err(|e| e.into_failure("PTX emission"))?;
    let b = bundle::bind_dynamic(&lm, &ptx, &info.ptx_version, sm, &dims)?;
    let what = if lm.is_dynamic() { count(lm.dims.len(), "dim symbol", "dim symbols") } else { "static".to_string() };
    write(&b, &args.output, sm, &what)
}

/// The module is the user's: buffers beyond what a bundle holds (4 GiB in
/// all, `MAX_BUNDLE_BYTES`) at the dims given are their error, exit 2
/// naming the buffer, not a manifest that fails to validate later (70).
fn check_bundle_size(lm: &eintup::ir::loops::LoopModule, dims: &[i64]) -> Result<(), Failure> {
    let limit = eintup_runtime::manifest::MAX_BUNDLE_BYTES;
    let mut total: u64 = 0;
    for b in lm.buffers.iter().filter(|b| !b.role.is_scratch()) {
        let shape: Vec<Option<i64>> = b.shape.iter().map(|e| e.bind_dims(dims).as_const()).collect();
        let bytes = shape.iter().try_fold(b.dtype.size() as u64, |n, e| e.and_then(|e| u64::try_from(e).ok()).and_then(|e| n.checked_mul(e)));
        total = bytes.and_then(|n| total.checked_add(n)).filter(|&t| t <= limit).ok_or_else(|| {
            let shape: Vec<String> = shape.iter().map(|e| e.map_or_else(|| "?".to_string(), |e| e.to_string())).collect();
            Failure::user(format!(
                "eintup: error: buffer `{}` of shape [{}] ({}) brings the bundle's buffers beyond the limit of {limit} bytes",
                b.name,
                shape.join(", "),
                b.dtype.name()
            ))
        })?;
    }
    Ok(())
}

/// `build --dynamic`: ranks fixed, dims of unbound eintups symbolic, one
/// bundle whose inputs are the caller's (docs/dynamic-shapes.md).
fn build_dynamic(args: &BuildArgs, src: &Source, sm: u32, binds: &[String], output: &Path) -> Result<(), Failure> {
    let ranks = args
        .rank
        .iter()
        .map(|r| eintup::passes::spec::parse_rank(r).map_err(|e| Failure::user(format!("eintup: error: --rank {e}"))))
        .collect::<Result<Vec<_>, _>>()?;
    let (prog, sym) = eintup::pipeline::symbolic_for(src, binds, &ranks)?;
    let opts = eintup::pipeline::GpuOptions { deterministic: args.deterministic, ..eintup::pipeline::GpuOptions::new(args.float, args.fp_contract, sm) };
    let lowered = eintup::variants::lower_gpu_dynamic(src, &prog, &opts)?;
    let b = bundle::build_dynamic(src, &prog, &sym, &lowered, &BuildOptions { seed: args.seed, float: args.float, sm, fp_contract: args.fp_contract })?;
    let symbolic: Vec<&str> = prog.module.eintups.iter().enumerate().filter(|(e, _)| sym.dims.is_symbolic(*e)).map(|(_, t)| t.name.as_str()).collect();
    let mut what = format!(
        "{}; symbolic eintups: {}",
        count(sym.dims.symbols.len(), "dim symbol", "dim symbols"),
        if symbolic.is_empty() { "none".to_string() } else { symbolic.join(", ") }
    );
    if !lowered.variants.is_empty() {
        let names: Vec<&str> = lowered.variants.iter().map(|v| v.kernel.name.as_str()).collect();
        what += &format!("; {} ({})", count(names.len(), "run-time variant", "run-time variants"), names.join(" "));
    }
    write(&b, output, sm, &what)
}

/// `--target sm_80`: the GPU target, read by the one parser of target
/// names (`eintup_codegen::nvptx::parse_gpu_target`); `tool` names the
/// program in the message.
pub fn parse_target(tool: &str, t: &str) -> Result<eintup::ir::loops::target::GpuTarget, Failure> {
    eintup_codegen::nvptx::parse_gpu_target(t).map_err(|why| Failure::user(format!("{tool}: error: --target: {why}")))
}
