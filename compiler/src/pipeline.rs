//! The compiler's stages as named functions, the way Triton's
//! `make_ttir -> make_ttgir -> make_llir -> make_ptx` are: every command
//! (`etopt`, `eintup run|build|exec|check|shapes`, the bench) compiles
//! through these, and each runs its passes under the pass manager, which
//! verifies the IR after every pass.
//!
//! - front end: `.et` text -> [`resolved`] -> [`ranked`] -> [`specialized_for`]
//!   (a static `et` module and the configuration it was specialised to), or
//!   [`symbolic_for`] (ranks fixed, dims symbolic: a dynamic build);
//! - middle end: [`lower`] (the loop module every target starts from),
//!   [`lower_host`] (plus the host-only loop passes), [`lower_generators`]
//!   (the kernels that make `RANDOM` inputs on a device).
//!
//! The target stages (LLVM IR, PTX, bundles, host JIT) start from the
//! middle end's loop module; they are the `eintup-codegen` crate's, so
//! this crate builds without LLVM (docs/architecture.md).

use crate::driver::{Failure, Source};
use crate::ir::et::Module;
use crate::ir::loops::target::{GpuTarget, HostTarget};
use crate::ir::loops::{FloatWidth, FpContract, LoopModule};
use crate::passes::manager::{Instrument, PassManager};
use crate::passes::{DriverOptions, Ir, Level, Unit, FRONT_END, GPU_PASSES, HOST_PASSES, MIDDLE_END, PLAN};
use crate::sema::symbolic::SymbolicConfig;
use crate::sema::{Config, InputShape, Program, RankSystem};
use et_grammar::Diagnostic;

/// The work counter is the loop dialect's (`ir/loops/work.rs`).
pub use crate::ir::loops::loop_work;

/// `resolve`: a source file as a rank-polymorphic program.
pub fn resolved(src: &Source) -> Result<Program, Failure> {
    let unit = run(Unit::from_source(src.clone()), &FRONT_END[..1], &DriverOptions::default())?;
    match unit.ir {
        Ir::Et(p) => Ok(p),
        _ => Err(level_bug("resolve", "et")),
    }
}

/// `resolve`, `infer-ranks`: the program and its rank system. `src` may
/// also be a printed `et` module (as for [`specialized_for`]: `check`
/// reads one as `run` does).
pub fn ranked(src: &Source) -> Result<(Program, RankSystem), Failure> {
    let mut unit = read_et(src)?;
    let pm = PassManager::from_names(&FRONT_END[..2], Instrument::default())?.skip_to(unit.ir.level());
    pm.run(&mut unit, &DriverOptions::default(), &mut std::io::sink())?;
    match (unit.ir, unit.ranks) {
        (Ir::Et(p), Some(r)) => Ok((p, r)),
        _ => Err(level_bug("infer-ranks", "et")),
    }
}

/// The `--bind` arguments checked against `prog` (from [`ranked`]) with no
/// input shapes: malformed ones (E0301) and names no eintup has (E0302),
/// errors that need no arrays (the Python package raises them at
/// `compile`, the CLI at its first configuration).
pub fn check_binds(src: &Source, prog: &Program, ranks: &RankSystem, binds: &[String]) -> Result<(), Failure> {
    let binds = crate::sema::config::parse_bindings(binds).map_err(Failure::User)?;
    crate::sema::config::Space::new(prog, ranks, &binds, &[]).map(|_| ()).map_err(|d| src.failure(d))
}

/// A program, or a printed `et` module (told by its content); a printed
/// `loop` module is a user error: the front end starts from `et`.
fn read_et(src: &Source) -> Result<Unit, Failure> {
    let unit = Unit::read(src.clone()).map_err(|e| e.into_failure(src))?;
    if unit.ir.level() == Level::Loop {
        return Err(Failure::user(format!(
            "{}: error: this is a printed loop module; a program runs from its source or a printed et module (`etopt --emit et`); etopt reads loop modules",
            src.name
        )));
    }
    Ok(unit)
}

/// The whole front end (`resolve`, `infer-ranks`, `specialize`): the
/// module every backend and the interpreter start from, specialised to the
/// configuration chosen from `binds`, the shapes of the supplied input
/// arrays (`inputs`; their contents go to the backend) and `seed`. FLOAT
/// arrays count against the memory limit at the width `float`.
///
/// `src` may also be a printed `et` module (`etopt --emit et`, told by its
/// content): the front end then starts at the first pass that reads it. A
/// printed `loop` module is a user error: backends start from `et`.
pub fn specialized_for(src: &Source, binds: &[String], inputs: &[InputShape], seed: u64, float: FloatWidth) -> Result<(Module, Config), Failure> {
    let opts = DriverOptions { binds: binds.to_vec(), inputs: inputs.to_vec(), seed, float, ..DriverOptions::default() };
    let mut unit = read_et(src)?;
    let pm = PassManager::from_names(FRONT_END, Instrument::default())?.skip_to(unit.ir.level());
    pm.run(&mut unit, &opts, &mut std::io::sink())?;
    match (unit.ir, unit.config) {
        (Ir::Et(p), Some(cfg)) => Ok((p.module, cfg)),
        _ => Err(level_bug("specialize", "et")),
    }
}

/// `specialize` alone, on a program `ranked` returned, to a configuration
/// chosen beforehand (`eintup check` walks the configurations of a
/// `Space`): the configuration goes in as bindings of every eintup.
pub fn specialized_to(src: &Source, prog: &Program, ranks: &RankSystem, config: &Config, float: FloatWidth) -> Result<Module, Failure> {
    let binds = config.dims.iter().map(|(n, d)| format!("{n}={d:?}")).collect();
    let mut unit = Unit::from_source(src.clone());
    unit.ir = Ir::Et(prog.clone());
    unit.ranks = Some(ranks.clone());
    let unit = run(unit, &FRONT_END[2..], &DriverOptions { binds, float, ..DriverOptions::default() })?;
    match unit.ir {
        Ir::Et(p) => Ok(p.module),
        _ => Err(level_bug("specialize", "et")),
    }
}

/// The front end of a dynamic build (`specialize{dynamic}`): the program
/// with its ranks fixed by `ranks` (`--rank NAME=R`), `binds` and the
/// constraints, and every eintup's dims, symbolic where not bound
/// (docs/dynamic-shapes.md).
pub fn symbolic_for(src: &Source, binds: &[String], ranks: &[(String, usize)]) -> Result<(Program, SymbolicConfig), Failure> {
    let opts = DriverOptions { binds: binds.to_vec(), dynamic: true, ranks: ranks.to_vec(), ..DriverOptions::default() };
    let unit = run(Unit::from_source(src.clone()), FRONT_END, &opts)?;
    match (unit.ir, unit.symbolic) {
        (Ir::Et(p), Some(sym)) => Ok((p, sym)),
        _ => Err(level_bug("specialize{dynamic}", "et")),
    }
}

/// [`lower_gpu`] for a dynamic build: the loop module with dim symbols
/// that one bundle for many shapes runs.
pub fn lower_gpu_symbolic(src: &Source, prog: &Program, opts: &GpuOptions) -> Result<LoopModule, Failure> {
    lower_gpu_symbolic_before(src, prog, opts, None)
}

/// [`lower_gpu_symbolic`] stopped before the GPU pass `stop` (all:
/// `None`): the kernels a run-time variant's condition is about
/// (`crate::variants`).
pub fn lower_gpu_symbolic_before(src: &Source, prog: &Program, opts: &GpuOptions, stop: Option<&str>) -> Result<LoopModule, Failure> {
    if stop.is_some_and(|s| !GPU_PASSES.contains(&s)) {
        return Err(Failure::Internal(format!("`{stop:?}` is not a GPU pass")));
    }
    // The module carries its symbolic dims (`Module::symbolic`).
    loops_of(run(et_unit(src, &prog.module), &opts.passes(stop), &opts.driver())?)
}

/// [`specialized_for`] with FLOAT counted as f64 (what the interpreter
/// runs by default).
pub fn specialized_module(src: &Source, binds: &[String], seed: u64) -> Result<(Module, Config), Failure> {
    specialized_for(src, binds, &[], seed, FloatWidth::F64)
}

/// `plan-products` on a specialised module, under the target's float
/// policy: products of several arrays become contractions through
/// temporary arrays (INT always, FLOAT under `FpContract::Fast`). Every
/// compiled backend lowers this module; the interpreter runs the one it
/// was given (the definition). Its statements are what the loop module's
/// kernels are numbered by, so [`check_loop_work`] takes it too. The
/// warnings (W0701: a FLOAT product kept as written under `Off` that has
/// a cheaper order) are for the caller to print.
pub fn planned(src: &Source, module: &Module, float: FloatWidth, fp_contract: FpContract) -> Result<(Module, Vec<Diagnostic>), Failure> {
    let unit = run(et_unit(src, module), PLAN, &DriverOptions { float, fp_contract, ..DriverOptions::default() })?;
    match unit.ir {
        Ir::Et(p) => Ok((p.module, unit.warnings)),
        _ => Err(level_bug("plan-products", "et")),
    }
}

/// The middle end on a specialised module: `lower-to-loops` and the loop
/// passes of the default pipeline. Every target starts from this loop
/// module; the GPU takes it as it is.
pub fn lower(src: &Source, module: &Module, float: FloatWidth) -> Result<LoopModule, Failure> {
    loops_of(run(et_unit(src, module), MIDDLE_END, &float_options(float))?)
}

/// [`lower`], then the host-only loop passes (`--backend cpu`), under the
/// host's float policy `fp_contract` (`off` unless the user opts in), for
/// the CPU `host` (its vector registers bound the register tiles).
pub fn lower_host(src: &Source, module: &Module, float: FloatWidth, fp_contract: FpContract, host: HostTarget) -> Result<LoopModule, Failure> {
    let names: Vec<&str> = MIDDLE_END.iter().chain(HOST_PASSES).copied().collect();
    loops_of(run(et_unit(src, module), &names, &DriverOptions { float, fp_contract, host, ..DriverOptions::default() })?)
}

/// How the GPU stages lower a module: the float width and policy, the
/// GPU the passes tile for, whether they consult its tuning table,
/// candidates forced on passes (`(pass, choice)`: the tuner's variants;
/// docs/tuning.md) and other options given to passes (`(pass,
/// "key=value")`: a run-time variant's rule, `crate::variants`).
#[derive(Clone, Debug)]
pub struct GpuOptions {
    pub float: FloatWidth,
    pub fp_contract: FpContract,
    pub gpu: GpuTarget,
    pub tuning: bool,
    pub choices: Vec<(String, String)>,
    pub options: Vec<(String, String)>,
    /// `--deterministic`: no float atomics (`parallelize`).
    pub deterministic: bool,
}

impl GpuOptions {
    /// For `sm`, with its tuning table and nothing forced.
    pub fn new(float: FloatWidth, fp_contract: FpContract, sm: u32) -> GpuOptions {
        GpuOptions { float, fp_contract, gpu: GpuTarget::for_sm(sm), tuning: true, choices: Vec::new(), options: Vec::new(), deterministic: false }
    }

    fn driver(&self) -> DriverOptions {
        DriverOptions {
            float: self.float,
            fp_contract: self.fp_contract,
            gpu: self.gpu,
            tuning: self.tuning,
            deterministic: self.deterministic,
            ..DriverOptions::default()
        }
    }

    /// The GPU passes up to (not including) `stop` (all: `None`), each
    /// with its forced choice and options.
    fn passes(&self, stop: Option<&str>) -> Vec<String> {
        let end = stop.and_then(|s| GPU_PASSES.iter().position(|p| *p == s)).unwrap_or(GPU_PASSES.len());
        let gpu = GPU_PASSES[..end].iter().map(|p| {
            let choice = self.choices.iter().filter(|(pass, _)| pass == p).take(1).map(|(_, c)| format!("choice={c}"));
            let given: Vec<String> = choice.chain(self.options.iter().filter(|(pass, _)| pass == p).map(|(_, o)| o.clone())).collect();
            if given.is_empty() {
                p.to_string()
            } else {
                format!("{p}{{{}}}", given.join(" "))
            }
        });
        MIDDLE_END.iter().map(|p| p.to_string()).chain(gpu).collect()
    }
}

/// [`lower`], then the GPU-only loop passes (what bundles and
/// `--backend gpu|emu` run).
pub fn lower_gpu(src: &Source, module: &Module, opts: &GpuOptions) -> Result<LoopModule, Failure> {
    loops_of(run(et_unit(src, module), &opts.passes(None), &opts.driver())?)
}

/// A loop module (printed IR, static or with dim symbols) through the
/// loop passes of the middle end and the GPU's, as [`lower_gpu`] takes an
/// `et` module through them: what `eintup build` does with a `.etir` loop
/// module (docs/dynamic-shapes.md).
pub fn optimize_gpu(src: &Source, lm: LoopModule, opts: &GpuOptions) -> Result<LoopModule, Failure> {
    let names: Vec<String> = opts.passes(None).into_iter().filter(|p| p != "lower-to-loops").collect();
    run_loop_passes(src, lm, &names, opts)
}

/// The GPU passes alone on `lm`, a module through the middle end
/// ([`lower_gpu_symbolic_before`] stopped at the first GPU pass), up to
/// (not including) `stop` (all: `None`): what [`lower_gpu_symbolic_before`]
/// gives at the same `stop`, the middle end run once for a dynamic build's
/// general module and every run-time variant's (`crate::variants`, whose
/// rules give GPU passes alone options and dim facts).
pub fn finish_gpu(src: &Source, lm: LoopModule, opts: &GpuOptions, stop: Option<&str>) -> Result<LoopModule, Failure> {
    if stop.is_some_and(|s| !GPU_PASSES.contains(&s)) {
        return Err(Failure::Internal(format!("`{stop:?}` is not a GPU pass")));
    }
    let names: Vec<String> = opts.passes(stop).into_iter().skip(MIDDLE_END.len()).collect();
    run_loop_passes(src, lm, &names, opts)
}

/// The passes `names` on the loop module `lm`.
fn run_loop_passes(src: &Source, lm: LoopModule, names: &[String], opts: &GpuOptions) -> Result<LoopModule, Failure> {
    let mut unit = Unit::from_source(src.clone());
    unit.ir = Ir::Loop(lm);
    loops_of(run(unit, names, &opts.driver())?)
}

/// [`lower_gpu`] stopped before the GPU pass `stop`: the module that pass
/// would choose for (the tuner lists its candidates on it).
pub fn lower_gpu_before(src: &Source, module: &Module, opts: &GpuOptions, stop: &str) -> Result<LoopModule, Failure> {
    if !GPU_PASSES.contains(&stop) {
        return Err(Failure::Internal(format!("`{stop}` is not a GPU pass")));
    }
    loops_of(run(et_unit(src, module), &opts.passes(Some(stop)), &opts.driver())?)
}

/// The kernels that make a program's `RANDOM` inputs on a device (a
/// bundle's `generate` section), through the loop passes of the middle
/// end; with each input buffer's kernels, in order.
pub fn lower_generators(src: &Source, module: &Module, float: FloatWidth) -> Result<(LoopModule, Vec<(usize, usize)>), Failure> {
    let (lm, writers) = crate::passes::lower_to_loops::lower_inputs(module, float).map_err(|e| e.into_failure(src))?;
    let loop_passes: Vec<&str> = MIDDLE_END.iter().copied().filter(|&p| p != "lower-to-loops").collect();
    let mut unit = Unit::from_source(src.clone());
    unit.ir = Ir::Loop(lm);
    Ok((loops_of(run(unit, &loop_passes, &float_options(float))?)?, writers))
}

/// Refuses (E0318, at the statement doing the most) to run `lm`, the
/// loop module of `module` (the [`planned`] module the backend lowered:
/// its statements number the kernels, and a temporary's statement is
/// located at the statement it was planned from), when its kernels visit more than `max_work`
/// points in all ([`loop_work`]), counting each kernel's work to its
/// statement (`Kernel::stmt`), plus the instantiations of the statements
/// generating the RANDOM inputs: every compiled backend generates them on
/// the host (`interp::initial_arrays`) outside `lm`, enumerating each one's
/// box as the interpreter does, so they count as in [`crate::interp::check_work`]
/// (otherwise `--max-work` would not bound a run that only generates).
pub fn check_loop_work(src: &Source, module: &Module, lm: &LoopModule, max_work: u64) -> Result<(), Failure> {
    let work = loop_work(lm);
    let inst = module.instantiations();
    let generation = (0..module.stmts.len()).filter(|&si| module.defines_input(si)).map(|si| inst[si]);
    let total = work.iter().copied().chain(generation).fold(0u128, |a, n| a.saturating_add(n));
    if crate::driver::within_work_limit(total, max_work) {
        return Ok(());
    }
    let mut per_stmt: Vec<u128> = (0..module.stmts.len()).map(|si| if module.defines_input(si) { inst[si] } else { 0 }).collect();
    for (k, n) in lm.kernels.iter().zip(&work) {
        if let Some(w) = k.stmt.and_then(|s| per_stmt.get_mut(s)) {
            *w = w.saturating_add(*n);
        }
    }
    let (k, &most) = per_stmt.iter().enumerate().max_by_key(|(_, n)| **n).ok_or_else(|| Failure::Internal("work without statements".into()))?;
    Err(src.failure(vec![crate::driver::work_refusal(module.stmts[k].span, most, total, max_work, "loop iterations")]))
}

/// Runs `names` on `unit` under the pass manager (verifying after each
/// pass); the one place the stages above meet the passes.
fn run(mut unit: Unit, names: &[impl AsRef<str>], opts: &DriverOptions) -> Result<Unit, Failure> {
    let pm = PassManager::from_names(names, Instrument::default())?;
    pm.run(&mut unit, opts, &mut std::io::sink())?;
    Ok(unit)
}

fn et_unit(src: &Source, module: &Module) -> Unit {
    let mut unit = Unit::from_source(src.clone());
    unit.ir = Ir::Et(Program { module: module.clone(), constraints: Vec::new() });
    unit
}

/// The target-independent passes' options: no target's float policy
/// applies before a target is chosen, so the exact one.
fn float_options(float: FloatWidth) -> DriverOptions {
    DriverOptions { float, fp_contract: FpContract::Off, ..DriverOptions::default() }
}

fn loops_of(unit: Unit) -> Result<LoopModule, Failure> {
    match unit.ir {
        Ir::Loop(m) => Ok(m),
        _ => Err(level_bug("the middle end", "loop")),
    }
}

fn level_bug(stage: &str, level: &str) -> Failure {
    Failure::Internal(format!("{stage} did not leave the IR at the {level} level"))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ir::loops::{Kernel, KernelRole};
    use eintup_testkit::examples;

    #[test]
    fn every_example_specialises() {
        let ex = examples();
        assert!(ex.len() >= 10);
        for p in ex {
            let src = Source::load(&p).expect("example loads");
            for seed in 0..5 {
                let (m, cfg) = match specialized_module(&src, &[], seed) {
                    Ok(x) => x,
                    Err(e) => panic!("{}: {e}", p.display()),
                };
                assert!(m.is_specialized(), "{}", p.display());
                assert_eq!(cfg.dims.len(), m.eintups.len());
                // The examples state every dim they need: range inference
                // changes none of them (their configurations are as before).
                assert!(!cfg.sources.contains(&crate::sema::DimsSource::Inferred), "{}", p.display());
                for s in &m.stmts {
                    assert!(!s.vars.is_empty() || s.indices.is_empty());
                }
            }
        }
    }

    fn loops_for(text: &str, binds: &[&str]) -> (Source, Module, LoopModule) {
        let src = Source::from_string("w.et", text);
        let binds: Vec<String> = binds.iter().map(|b| b.to_string()).collect();
        let (m, _) = specialized_for(&src, &binds, &[], 0, FloatWidth::F32).unwrap();
        let lm = lower(&src, &m, FloatWidth::F32).unwrap();
        (src, m, lm)
    }

    /// The reproducer: 10^18 iterations over arrays of 3 cells,
    /// counted without running, and refused at the statement.
    #[test]
    fn work_of_a_loop_nest_with_constant_bounds_is_its_product() {
        let text = "x[a] = RANDOM(0, 10, INT)\ny[i % DIMS(a)] += x[j % DIMS(a)]\n\ny\n";
        let (src, m, lm) = loops_for(text, &["a=[3]", "i=[1000000000]", "j=[1000000000]"]);
        assert_eq!(loop_work(&lm).iter().sum::<u128>(), 1_000_000_000_000_000_000);
        let e = check_loop_work(&src, &m, &lm, crate::driver::DEFAULT_MAX_WORK).unwrap_err().to_string();
        assert!(e.contains("w.et:2:1: error[E0318]: this configuration needs 1000000000000000003 loop iterations"), "{e}");
        // the limit is inclusive
        let (src, m, lm) = loops_for(text, &["a=[3]", "i=[4]", "j=[5]"]);
        // 4*5 loop iterations and x's 3 generated cells
        assert!(check_loop_work(&src, &m, &lm, 23).is_ok());
        assert!(check_loop_work(&src, &m, &lm, 22).is_err());
        // generation alone is counted too, at its statement
        let (src, m, lm) = loops_for("x[a] = RANDOM(0, 10, INT)\n\nx\n", &["a=[5]"]);
        assert!(check_loop_work(&src, &m, &lm, 5).is_ok());
        let e = check_loop_work(&src, &m, &lm, 4).unwrap_err().to_string();
        assert!(e.contains("w.et:1:1: error[E0318]: this configuration needs 5 loop iterations"), "{e}");
    }

    /// A convolution's filter loops are tightened to the footprint, whose
    /// bounds depend on the output position: the count is the
    /// convolution's multiply-adds, b*o^2*co*k^2*ci, not the box of every
    /// input position (b*o^2*co*i^2*ci), also at the benchmark's GPU size.
    #[test]
    fn work_of_a_convolution_counts_its_footprint() {
        let text = std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/../bench/ops/conv2d.et")).unwrap();
        let binds = ["batch=[32]", "ipos=[224,224]", "fpos=[3,3]", "stride=[1,1]", "ichan=[64]", "ochan=[64]"];
        let (_, m, lm) = loops_for(&text, &binds);
        let (b, o, co, k, ci) = (32u128, 222u128, 64u128, 3u128, 64u128);
        let work = loop_work(&lm);
        let is_conv = |k: &Kernel| k.role == KernelRole::Main && k.stmt == Some(2);
        let conv = lm.kernels.iter().zip(&work).find(|(k, _)| is_conv(k)).map(|(_, n)| *n).unwrap();
        assert_eq!(conv, b * o * o * co * k * k * ci);
        let box_size: u128 = m.instantiations()[2];
        assert_eq!(box_size, b * o * o * co * 224 * 224 * ci);
        assert!(work.iter().sum::<u128>() < u128::from(crate::driver::DEFAULT_MAX_WORK));
        // Without enumeration the dependent bounds are taken as intervals:
        // an upper bound, never below the exact count.
        let k = lm.kernels.iter().find(|k| is_conv(k)).unwrap();
        let bound = crate::ir::loops::nest_work(&k.body, k.vars.len(), &mut 0);
        assert!(bound >= conv && bound <= box_size, "{bound}");
    }

    #[test]
    fn bindings_fix_dims_and_positions() {
        let src = Source::from_string("t.et", "x[a,b] = RANDOM(0, 10, FLOAT)\ny[a+b, FLAT(a,b)] = x[a,b]\n");
        let (m, cfg) = specialized_module(&src, &["a=[2,3]".into(), "b=[4,0]".into()], 1).unwrap();
        assert_eq!(cfg.get("a"), Some(&[2, 3][..]));
        // a+b -> d+e-1 per component, but component 1 of b is empty -> [2+4-1, 0].
        assert_eq!(m.array_shape(1), Some(vec![5, 0, 0]));
        assert_eq!(m.array_shape(0), Some(vec![2, 3, 4, 0]));
        assert!(m.arrays[0].is_input && !m.arrays[1].is_input);
        assert_eq!(m.arrays[1].dtype, crate::ir::et::ElemType::Float);
        let (m, _) = specialized_module(&src, &["a=[2,3]".into(), "b=[4,5]".into()], 1).unwrap();
        // [2+4-1, 3+5-1] then FLAT = 2*3*4*5
        assert_eq!(m.array_shape(1), Some(vec![5, 7, 120]));
        let (m, _) = specialized_module(&src, &["a=[]".into(), "b=[]".into()], 1).unwrap();
        assert_eq!(m.array_shape(0), Some(vec![]));
        // a+b of two rank-0 tuples is rank 0; FLAT of nothing has one value.
        assert_eq!(m.array_shape(1), Some(vec![1]));
    }
}
