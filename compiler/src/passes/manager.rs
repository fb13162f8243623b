//! The pass manager: a registry of named passes, pipelines (`--passes
//! a,b` or `--pipeline default`), verification after every pass, IR dumps
//! (`--dump-ir`, `--dump-ir-after`, `--print-ir-after-failure`) and timing
//! (`--time-passes`), in the manner of `mlir-opt`.

use super::spec::{self, PassOptions};
use super::{DriverOptions, Ir, Level, PassError, Unit};
use crate::driver::Failure;
use crate::ir::loops::{Fact, Facts};
use crate::ir::text::Spelled;
use std::fmt::Write as _;
use std::time::{Duration, Instant};

/// A registered pass. `run` returns an optional one-line statistics
/// summary (printed with `--stats`).
pub struct PassInfo {
    pub name: &'static str,
    pub summary: &'static str,
    pub input: Level,
    pub output: Level,
    /// Loop passes: the facts the module must have before the pass runs
    /// (without them it would find nothing to do)...
    pub needs: &'static [Fact],
    /// ... the facts it must not have (the pass would not recognise the
    /// shapes they leave) ...
    pub refuses: &'static [Fact],
    /// ... and the facts it makes true.
    pub provides: &'static [Fact],
    /// et -> et passes: whether the pass keeps the program's meaning and
    /// only refines its types (checked after it runs, `verify_refines`),
    /// or makes another program of it (`differentiate`).
    pub refines: bool,
    /// The pass, with its options (`name{key=value}`, [`super::spec`]):
    /// made by `run_with!`.
    pub run: PassRun,
}

/// A pass's entry point, which builds the pass's own options
/// ([`PassOptions`]) from the driver's and the `{key=value}` items written
/// with it, then runs the pass. Made by `run_with!`, so the keys, the check
/// and the run all come from one options type.
#[derive(Clone, Copy)]
pub struct PassRun {
    /// The keys the pass accepts, with their forms (`PassOptions::KEYS`).
    pub keys: &'static [(&'static str, &'static str)],
    /// Builds the options against the default driver settings: a bad key
    /// or value fails before any input is read.
    pub check: fn(pass: &str, options: &[(String, String)]) -> Result<(), String>,
    /// Builds the options against `driver` and runs the pass.
    pub run: fn(unit: &mut Unit, pass: &str, options: &[(String, String)], driver: &DriverOptions) -> Result<Option<String>, PassError>,
}

/// The [`PassRun`] of a pass function `run(&mut Unit, &O)`, `O` its
/// options type.
macro_rules! run_with {
    ($opts:ty, $run:path) => {
        PassRun {
            keys: <$opts as PassOptions>::KEYS,
            check: |pass, options| spec::build::<$opts>(pass, options, &DriverOptions::default()).map(drop),
            run: |unit, pass, options, driver| {
                let o = spec::build::<$opts>(pass, options, driver).map_err(|e| PassError::Message(format!("etopt: error: {e}")))?;
                $run(unit, &o)
            },
        }
    };
}

/// Every pass, in the order of the GPU pipeline (the host's runs
/// `interleave-sums`, `interchange` and `cache-tiles` after
/// `register-tiles`).
pub static PASSES: &[PassInfo] = &[
    PassInfo {
        name: "resolve",
        summary: "names, signatures, element types, all errors found without shapes",
        input: Level::Source,
        output: Level::Et,
        needs: &[],
        refuses: &[],
        provides: &[],
        refines: true,
        run: run_with!(super::NoOptions, super::resolve::run),
    },
    PassInfo {
        name: "differentiate",
        summary: "the module becomes its adjoint: reverse-mode gradients of `of` with respect to `wrt`, scatters rewritten into gathers where the index map is invertible",
        input: Level::Et,
        output: Level::Et,
        needs: &[],
        refuses: &[],
        provides: &[],
        refines: false,
        run: run_with!(super::differentiate::DifferentiateOptions, super::differentiate::run),
    },
    PassInfo {
        name: "infer-ranks",
        summary: "union-find of rank classes with the reason for every equation",
        input: Level::Et,
        output: Level::Et,
        needs: &[],
        refuses: &[],
        provides: &[],
        refines: true,
        run: run_with!(super::NoOptions, super::infer_ranks::run),
    },
    PassInfo {
        name: "specialize",
        summary: "choose a configuration (--bind, --seed) and make every type static; with `dynamic`, fix the ranks and leave unbound dims symbolic",
        input: Level::Et,
        output: Level::Et,
        needs: &[],
        refuses: &[],
        provides: &[],
        refines: true,
        run: run_with!(super::specialize::SpecializeOptions, super::specialize::run),
    },
    PassInfo {
        name: "plan-products",
        summary: "a product of array reads becomes contractions through temporaries, in the order of least work",
        input: Level::Et,
        output: Level::Et,
        needs: &[],
        refuses: &[],
        provides: &[],
        refines: true,
        run: run_with!(super::plan_products::PlanProductsOptions, super::plan_products::run),
    },
    PassInfo {
        name: "lower-to-loops",
        summary: "loop nests, guards, index loads and reset/snapshot kernels",
        input: Level::Et,
        output: Level::Loop,
        needs: &[],
        refuses: &[],
        provides: &[],
        refines: true,
        run: run_with!(super::lower_to_loops::LowerToLoopsOptions, super::lower_to_loops::run),
    },
    PassInfo {
        name: "simplify-index",
        summary: "egg equality saturation: fold dims, div/mod/FLAT identities, prove guards",
        input: Level::Loop,
        output: Level::Loop,
        needs: &[],
        refuses: &[],
        provides: &[],
        refines: true,
        run: run_with!(super::NoOptions, super::simplify_index::run),
    },
    PassInfo {
        name: "tighten-bounds",
        summary: "turn guards on a loop variable into that loop's bounds",
        input: Level::Loop,
        output: Level::Loop,
        needs: &[],
        refuses: &[],
        provides: &[],
        refines: true,
        run: run_with!(super::NoOptions, super::tighten_bounds::run),
    },
    PassInfo {
        name: "drop-unused-loops",
        summary: "run once the idempotent body of a loop whose variable it does not use",
        input: Level::Loop,
        output: Level::Loop,
        needs: &[],
        refuses: &[],
        provides: &[],
        refines: true,
        run: run_with!(super::NoOptions, super::drop_unused_loops::run),
    },
    PassInfo {
        name: "parallelize",
        summary: "mark parallel loops; atomics only where the write is not injective",
        input: Level::Loop,
        output: Level::Loop,
        needs: &[],
        refuses: &[],
        provides: &[Fact::Parallelized],
        refines: true,
        run: run_with!(super::parallelize::ParallelizeOptions, super::parallelize::run),
    },
    PassInfo {
        name: "direct-stores",
        summary: "drop the reset kernel of an `=` statement that writes each cell once; store directly",
        input: Level::Loop,
        output: Level::Loop,
        needs: &[Fact::Parallelized],
        refuses: &[],
        provides: &[],
        refines: true,
        run: run_with!(super::NoOptions, super::direct_stores::run),
    },
    PassInfo {
        name: "split-reductions",
        summary: "GPU: sum a contiguous reduction of few cells as per-lane partial sums, then combine",
        input: Level::Loop,
        output: Level::Loop,
        needs: &[Fact::Parallelized],
        refuses: &[Fact::RegisterTiled, Fact::BlockTiled],
        provides: &[],
        refines: true,
        run: run_with!(super::split_reductions::SplitReductionsOptions, super::split_reductions::run),
    },
    PassInfo {
        name: "fuse-resets",
        summary: "GPU: the reset kernel of a reduction becomes the first store of its kernel",
        input: Level::Loop,
        output: Level::Loop,
        needs: &[Fact::Parallelized],
        refuses: &[Fact::RegisterTiled, Fact::BlockTiled],
        provides: &[Fact::ResetsFused],
        refines: true,
        run: run_with!(super::NoOptions, super::fuse_resets::run),
    },
    PassInfo {
        name: "shift-loops",
        summary: "GPU: a loop whose bounds move with outer variables starts at a constant",
        input: Level::Loop,
        output: Level::Loop,
        needs: &[],
        refuses: &[Fact::RegisterTiled, Fact::BlockTiled],
        provides: &[Fact::LoopsShifted],
        refines: true,
        run: run_with!(super::NoOptions, super::shift_loops::run),
    },
    PassInfo {
        name: "register-tiles",
        summary: "each thread of a contraction computes a tile of cells, operands reused from registers",
        input: Level::Loop,
        output: Level::Loop,
        needs: &[Fact::Parallelized, Fact::LoopsShifted],
        refuses: &[Fact::RegisterTiled, Fact::BlockTiled],
        provides: &[Fact::RegisterTiled],
        refines: true,
        run: run_with!(super::register_tiles::RegisterTilesOptions, super::register_tiles::run),
    },
    PassInfo {
        name: "block-tiles",
        summary: "GPU: the threads of a block stage a contraction's operands in shared memory",
        input: Level::Loop,
        output: Level::Loop,
        needs: &[Fact::Parallelized, Fact::RegisterTiled],
        refuses: &[Fact::BlockTiled],
        provides: &[Fact::BlockTiled],
        refines: true,
        run: run_with!(super::block_tiles::BlockTilesOptions, super::block_tiles::run),
    },
    PassInfo {
        name: "arrange-threads",
        summary: "GPU: a block-tiled kernel's warps cover 4x8 threads of its tile, its blocks run in groups of rows",
        input: Level::Loop,
        output: Level::Loop,
        needs: &[Fact::BlockTiled],
        refuses: &[Fact::ThreadsArranged],
        provides: &[Fact::ThreadsArranged],
        refines: true,
        run: run_with!(super::arrange_threads::ArrangeThreadsOptions, super::arrange_threads::run),
    },
    PassInfo {
        name: "sink-broadcasts",
        summary: "GPU: a copy's loops its loads do not depend on run inside each thread, one load per value",
        input: Level::Loop,
        output: Level::Loop,
        needs: &[Fact::Parallelized],
        refuses: &[],
        provides: &[],
        refines: true,
        run: run_with!(super::sink_broadcasts::SinkBroadcastsOptions, super::sink_broadcasts::run),
    },
    PassInfo {
        name: "fuse-kernels",
        summary: "GPU: a kernel over the same cells as the one before it runs in its threads, after it",
        input: Level::Loop,
        output: Level::Loop,
        needs: &[Fact::Parallelized],
        refuses: &[],
        provides: &[],
        refines: true,
        run: run_with!(super::NoOptions, super::fuse_kernels::run),
    },
    PassInfo {
        name: "widen-threads",
        summary: "GPU: each thread of a copy or elementwise kernel handles 16 consecutive bytes of cells, one vector access each",
        input: Level::Loop,
        output: Level::Loop,
        needs: &[Fact::Parallelized],
        refuses: &[],
        provides: &[],
        refines: true,
        run: run_with!(super::widen_threads::WidenThreadsOptions, super::widen_threads::run),
    },
    PassInfo {
        name: "pipeline-copies",
        summary: "GPU: double-buffer a block-tiled step's shared tiles, the copy of step k+1 (cp.async on sm_80+) overlapping step k",
        input: Level::Loop,
        output: Level::Loop,
        needs: &[Fact::BlockTiled],
        refuses: &[],
        provides: &[],
        refines: true,
        run: run_with!(super::pipeline_copies::PipelineCopiesOptions, super::pipeline_copies::run),
    },
    PassInfo {
        name: "interleave-sums",
        summary: "host: sum neighbouring cells of a long reduction at once, each in its own order",
        input: Level::Loop,
        output: Level::Loop,
        needs: &[Fact::Parallelized],
        refuses: &[Fact::BlockTiled],
        provides: &[],
        refines: true,
        run: run_with!(super::NoOptions, super::interleave_sums::run),
    },
    PassInfo {
        name: "interchange",
        summary: "host: move the loop along the contiguous written dim inside the reductions",
        input: Level::Loop,
        output: Level::Loop,
        needs: &[Fact::Parallelized],
        refuses: &[Fact::BlockTiled],
        provides: &[],
        refines: true,
        run: run_with!(super::NoOptions, super::interchange::run),
    },
    PassInfo {
        name: "cache-tiles",
        summary: "host: a register-tiled contraction runs over panels of its streamed operand that fit in the cache",
        input: Level::Loop,
        output: Level::Loop,
        needs: &[Fact::Parallelized, Fact::RegisterTiled],
        refuses: &[Fact::BlockTiled],
        provides: &[],
        refines: true,
        run: run_with!(super::cache_tiles::CacheTilesOptions, super::cache_tiles::run),
    },
    PassInfo {
        name: "share-buffers",
        summary: "a transient buffer used only after another's last use takes its memory (buffer assignment)",
        input: Level::Loop,
        output: Level::Loop,
        needs: &[],
        refuses: &[],
        provides: &[],
        refines: true,
        run: run_with!(super::NoOptions, super::share_buffers::run),
    },
];

/// The `default` pipeline: front end, plan, then middle end.
pub const DEFAULT_PIPELINE: &[&str] = &[
    "resolve",
    "infer-ranks",
    "specialize",
    "plan-products",
    "lower-to-loops",
    "simplify-index",
    "tighten-bounds",
    "simplify-index",
    "drop-unused-loops",
    "parallelize",
    "direct-stores",
    "drop-unused-loops",
];
/// From a `.et` file to a specialised `et` module.
pub const FRONT_END: &[&str] = &["resolve", "infer-ranks", "specialize"];
/// The et-level plan between them (`pipeline::planned`): products of
/// several arrays as contractions, under the target's float policy.
pub const PLAN: &[&str] = &["plan-products"];
/// From a specialised `et` module to the optimised `loop` module.
pub const MIDDLE_END: &[&str] =
    &["lower-to-loops", "simplify-index", "tighten-bounds", "simplify-index", "drop-unused-loops", "parallelize", "direct-stores", "drop-unused-loops"];
/// Loop passes for the host target only, after the middle end: register
/// tiles laid out for vector registers, then `interchange` for the
/// kernels they leave (the GPU wants the loop order the middle end leaves),
/// and last cache tiles around the large register-tiled contractions.
pub const HOST_PASSES: &[&str] = &["shift-loops", "register-tiles{layout=blocked}", "interchange", "interleave-sums", "cache-tiles", "share-buffers"];
/// Loop passes for the GPU only, after the middle end: they reshape
/// kernels around the parallel chain the GPU maps to threads.
pub const GPU_PASSES: &[&str] = &[
    "split-reductions",
    "shift-loops",
    "drop-unused-loops",
    "fuse-resets",
    "register-tiles",
    "block-tiles",
    "arrange-threads",
    "sink-broadcasts",
    "fuse-kernels",
    "widen-threads",
    "pipeline-copies",
    "simplify-index",
    "share-buffers",
];

pub fn lookup(name: &str) -> Option<&'static PassInfo> {
    PASSES.iter().find(|p| p.name == name)
}

/// What to print while running.
#[derive(Clone, Debug, Default)]
pub struct Instrument {
    /// IR after every pass, on stderr.
    pub dump_all: bool,
    /// IR after these passes, on stderr: a name (every run of the pass) or
    /// a numbered label `simplify-index#2` (that run only).
    pub dump_after: Vec<String>,
    /// IR before these passes (names or labels, as `dump_after`).
    pub print_before: Vec<String>,
    /// IR after every pass that changed it (its printed form differs).
    pub after_change: bool,
    /// The IR a failing pass read, when it fails (an error, a missing
    /// fact, the wrong level, IR that does not verify after it).
    pub after_failure: bool,
    pub time: bool,
    pub stats: bool,
}

/// One pass of a pipeline: the registered pass, the options written with
/// it, and its label (the name, numbered `name#k` when the pipeline runs
/// the pass more than once).
#[derive(Clone, Debug)]
pub struct Scheduled {
    pub info: &'static PassInfo,
    pub options: Vec<(String, String)>,
    pub label: String,
}

impl std::fmt::Debug for PassInfo {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name)
    }
}

#[derive(Clone)]
pub struct PassManager {
    pub passes: Vec<Scheduled>,
    pub instrument: Instrument,
}

/// Header of an IR dump (docs/architecture.md section 5); `label` is the pass name,
/// numbered (`simplify-index#2`) for a pass the pipeline runs twice.
pub fn dump_header(label: &str) -> String {
    format!("// ----- IR after {label} ----- //")
}

/// Header of a dump before a pass (`--print-ir-before`).
pub fn dump_before_header(label: &str) -> String {
    format!("// ----- IR before {label} ----- //")
}

/// Header of the dump of a pass that failed (`--print-ir-after-failure`).
/// As in `mlir-opt`, it names the failed pass; a pass that fails leaves no
/// IR of its own, so what follows is the IR it read.
pub fn dump_failure_header(label: &str) -> String {
    format!("// ----- IR after {label} failed ----- //")
}

/// Prints any level of IR in its textual form.
pub fn print_ir(unit: &Unit) -> String {
    match &unit.ir {
        Ir::Source => unit.source.text.clone(),
        Ir::Et(p) => crate::ir::et::print::module(&p.module),
        Ir::Loop(m) => crate::ir::loops::print::module(m),
    }
}

/// A name given to `--dump-ir-after`/`--print-ir-before`: a registered
/// pass, optionally numbered (`simplify-index#2`).
fn known_selector(sel: &str) -> bool {
    let name = sel.split_once('#').map_or(sel, |(n, k)| if k.parse::<usize>().is_ok_and(|k| k > 0) { n } else { "" });
    lookup(name).is_some()
}

impl PassManager {
    /// Resolves pass names, each with optional options (`specialize{seed=3}`,
    /// [`super::spec`]); an unknown name lists the known ones, an option
    /// the pass does not read or a malformed one is an error too.
    pub fn from_names(names: &[impl AsRef<str>], instrument: Instrument) -> Result<PassManager, Failure> {
        let mut passes = Vec::new();
        for n in names {
            let spec = super::spec::parse_spec(n.as_ref()).map_err(|e| Failure::user(format!("etopt: error: --passes: {e}")))?;
            let p = lookup(&spec.name).ok_or_else(|| {
                let known: Vec<&str> = PASSES.iter().map(|p| p.name).collect();
                Failure::user(format!("etopt: error: unknown pass `{}` (known passes: {})", spec.name, known.join(", ")))
            })?;
            // Checked now, so a bad option fails before any input is read.
            (p.run.check)(p.name, &spec.options).map_err(|e| Failure::user(format!("etopt: error: {e}")))?;
            passes.push(Scheduled { info: p, options: spec.options, label: p.name.to_string() });
        }
        for (flag, list) in [("--dump-ir-after", &instrument.dump_after), ("--print-ir-before", &instrument.print_before)] {
            for d in list {
                if !known_selector(d) {
                    return Err(Failure::user(format!("etopt: error: {flag}: unknown pass `{d}`")));
                }
            }
        }
        check_facts_in_order(&passes)?;
        let mut pm = PassManager { passes, instrument };
        pm.number();
        Ok(pm)
    }

    /// Labels: `name#k` for the k-th run of a pass the pipeline runs more
    /// than once, the plain name otherwise.
    fn number(&mut self) {
        for i in 0..self.passes.len() {
            let name = self.passes[i].info.name;
            let total = self.passes.iter().filter(|s| s.info.name == name).count();
            let k = self.passes[..=i].iter().filter(|s| s.info.name == name).count();
            self.passes[i].label = if total > 1 { format!("{name}#{k}") } else { name.to_string() };
        }
    }

    /// The passes named by `--dump-ir-after` or `--print-ir-before` that
    /// this pipeline does not run: one warning each (`etopt` prints them;
    /// the dump would silently never appear).
    pub fn unmatched_selectors(&self) -> Vec<String> {
        let mut out = Vec::new();
        let running: Vec<&str> = self.passes.iter().map(|s| s.label.as_str()).collect();
        for (flag, list) in [("--dump-ir-after", &self.instrument.dump_after), ("--print-ir-before", &self.instrument.print_before)] {
            for d in list {
                if !self.passes.iter().any(|s| selects(d, s)) {
                    let pipeline = if running.is_empty() { "no passes".to_string() } else { running.join(", ") };
                    out.push(format!("etopt: warning: {flag} {d}: the pipeline does not run this pass (it runs {pipeline})"));
                }
            }
        }
        out
    }

    /// The pipeline with passes whose input level comes before the unit's
    /// current level dropped (so the default pipeline also starts from a
    /// printed `et` or `loop` file).
    pub fn skip_to(mut self, level: Level) -> PassManager {
        if let Some(first) = self.passes.iter().position(|p| p.info.input == level) {
            self.passes.drain(..first);
        } else if self.passes.iter().all(|p| p.info.input != level) {
            self.passes.retain(|p| order(p.info.input) > order(level));
        }
        self
    }

    /// Runs every pass in order, verifying after each. Dumps, timings and
    /// statistics go to `err`.
    pub fn run(&self, unit: &mut Unit, opts: &DriverOptions, err: &mut dyn std::io::Write) -> Result<(), Failure> {
        self.run_passes(unit, opts, err).map_err(|e| e.into_failure(&unit.source))
    }

    /// [`run`](Self::run), with the error as data: `etopt
    /// --verify-diagnostics` matches its diagnostics against the input's
    /// expectations instead of rendering them.
    pub fn run_passes(&self, unit: &mut Unit, opts: &DriverOptions, err: &mut dyn std::io::Write) -> Result<(), PassError> {
        let mut times: Vec<(&str, Duration)> = Vec::new();
        // Verification after each pass, summed: one line of --time-passes.
        let mut verifying = Duration::ZERO;
        let total = Instant::now();
        let ins = &self.instrument;
        for s in &self.passes {
            // The text before the pass: to tell whether it changed the IR,
            // and what a failure of it shows.
            let text_before = (ins.after_change || ins.after_failure).then(|| print_ir(unit));
            let changed_from = text_before.as_deref().filter(|_| ins.after_change);
            let (ran, verified) = match self.run_one(s, unit, opts, err, changed_from) {
                Ok(t) => t,
                Err(e) => {
                    if let Some(text) = text_before.filter(|_| ins.after_failure) {
                        let _ = write!(err, "{}\n{}", dump_failure_header(&s.label), text);
                    }
                    return Err(e);
                }
            };
            times.push((&s.label, ran));
            verifying += verified;
        }
        if ins.time {
            times.push(("(verify after each pass)", verifying));
            let _ = err.write_all(timing_report(&times, total.elapsed()).as_bytes());
        }
        Ok(())
    }

    /// One pass of [`run_passes`](Self::run_passes): the level and facts
    /// it needs, the pass, verification and the dumps after it. Returns the
    /// pass's time and its verification's. `changed_from` is the IR's text
    /// before the pass, with `--print-ir-after-change`.
    fn run_one(
        &self,
        s: &Scheduled,
        unit: &mut Unit,
        opts: &DriverOptions,
        err: &mut dyn std::io::Write,
        changed_from: Option<&str>,
    ) -> Result<(Duration, Duration), PassError> {
        let ins = &self.instrument;
        let p = s.info;
        if unit.ir.level() != p.input {
            return Err(PassError::Message(format!(
                "etopt: error: pass `{}` reads the {} level, but the IR is at the {} level here",
                p.name,
                p.input.name(),
                unit.ir.level().name()
            )));
        }
        if let Ir::Loop(m) = &unit.ir {
            facts_allow(p, m.facts).map_err(PassError::Message)?;
        }
        if ins.print_before.iter().any(|d| selects(d, s)) {
            let _ = write!(err, "{}\n{}", dump_before_header(&s.label), print_ir(unit));
        }
        let before = match &unit.ir {
            Ir::Et(prog) if p.refines => Some(prog.module.clone()),
            _ => None,
        };
        let t = Instant::now();
        let stats = (p.run.run)(unit, p.name, &s.options, opts)?;
        let ran = t.elapsed();
        if let Ir::Loop(m) = &mut unit.ir {
            m.facts = m.facts.union(Facts::of(p.provides));
        }
        let t = Instant::now();
        verify(p.name, before.as_ref(), &unit.ir)?;
        let verified = t.elapsed();
        if ins.stats {
            if let Some(st) = stats {
                let _ = writeln!(err, "// stats {}: {st}", s.label);
            }
        }
        let after = if ins.dump_all || ins.dump_after.iter().any(|d| selects(d, s)) {
            Some(print_ir(unit))
        } else {
            changed_from.filter(|b| *b != print_ir(unit)).map(|_| print_ir(unit))
        };
        if let Some(text) = after {
            let _ = write!(err, "{}\n{}", dump_header(&s.label), text);
        }
        Ok((ran, verified))
    }
}

/// Whether pass `p` may run on a module with `facts`: an error naming the
/// missing (or refused) fact and the pass that provides it otherwise.
pub fn facts_allow(p: &PassInfo, facts: Facts) -> Result<(), String> {
    if let Some(f) = p.needs.iter().find(|&&f| !facts.contains(f)) {
        return Err(format!(
            "etopt: error: pass `{}` needs the fact `{}`, which no pass before it provided (run `{}` before it)",
            p.name,
            f.spelling(),
            provider(*f)
        ));
    }
    if let Some(f) = p.refuses.iter().find(|&&f| facts.contains(f)) {
        return Err(format!(
            "etopt: error: pass `{}` cannot run after `{}` (the module has the fact `{}`): run it before `{}`",
            p.name,
            provider(*f),
            f.spelling(),
            provider(*f)
        ));
    }
    Ok(())
}

/// The pass that provides fact `f`.
fn provider(f: Fact) -> &'static str {
    PASSES.iter().find(|p| p.provides.contains(&f)).map_or("?", |p| p.name)
}

/// From the first `lower-to-loops` of a pipeline on, the module's facts
/// are known (it makes a module without any): a pipeline in the wrong
/// order fails here, before any input is read. (Earlier loop passes run
/// on a module read from text, whose facts `run_passes` checks.)
fn check_facts_in_order(passes: &[Scheduled]) -> Result<(), Failure> {
    let Some(first) = passes.iter().position(|s| s.info.output == Level::Loop && s.info.input != Level::Loop) else { return Ok(()) };
    let mut facts = Facts::NONE;
    for s in &passes[first..] {
        facts_allow(s.info, facts).map_err(Failure::user)?;
        facts = facts.union(Facts::of(s.info.provides));
    }
    Ok(())
}

/// Whether `--dump-ir-after`/`--print-ir-before` value `sel` names this
/// run: its pass name (every run) or its label (`simplify-index#2`).
fn selects(sel: &str, s: &Scheduled) -> bool {
    sel == s.info.name || sel == s.label
}

fn order(l: Level) -> u8 {
    match l {
        Level::Source => 0,
        Level::Et => 1,
        Level::Loop => 2,
    }
}

/// Verifies the IR after a pass: structure, and for et -> et passes that
/// no type was widened.
fn verify(pass: &str, before: Option<&crate::ir::et::Module>, ir: &Ir) -> Result<(), PassError> {
    let r = match ir {
        Ir::Source => Ok(()),
        Ir::Et(p) => crate::ir::et::verify::verify(&p.module)
            .map_err(|v| v.to_string())
            .and_then(|()| before.map_or(Ok(()), |b| crate::ir::et::verify::verify_refines(b, &p.module))),
        // A pass's module has no text: the error shows the offending line.
        Ir::Loop(m) => crate::ir::loops::verify::verify(m).map_err(|e| e.describe(m)),
    };
    r.map_err(|e| PassError::Internal(format!("IR after pass `{pass}` does not verify: {e}")))
}

/// `--time-passes`: one line per pass run, like `mlir-opt --mlir-timing`.
pub fn timing_report(times: &[(&str, Duration)], total: Duration) -> String {
    let mut o = String::from("// ----- pass timing ----- //\n");
    let tot = total.as_secs_f64().max(1e-12);
    for (name, d) in times {
        let _ = writeln!(o, "{:>10.3} ms {:>5.1}%  {name}", d.as_secs_f64() * 1e3, 100.0 * d.as_secs_f64() / tot);
    }
    let _ = writeln!(o, "{:>10.3} ms 100.0%  total", tot * 1e3);
    o
}

/// `--time-passes` with `--emit llvm|ptx`: code generation, which runs
/// after the pass pipeline, in the same line format.
pub fn codegen_timing_report(what: &str, d: Duration) -> String {
    format!("// ----- codegen timing ----- //\n{:>10.3} ms  {what}\n", d.as_secs_f64() * 1e3)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn default_pipeline_is_front_then_middle_end() {
        let joined: Vec<&str> = FRONT_END.iter().chain(PLAN).chain(MIDDLE_END).copied().collect();
        assert_eq!(joined, DEFAULT_PIPELINE);
        for p in DEFAULT_PIPELINE {
            assert!(lookup(p).is_some(), "{p} is not registered");
        }
    }

    #[test]
    fn passes_run_twice_are_numbered() {
        let pm = PassManager::from_names(DEFAULT_PIPELINE, Instrument::default()).unwrap();
        let labels: Vec<&str> = pm.passes.iter().map(|s| s.label.as_str()).collect();
        assert_eq!(
            labels,
            [
                "resolve",
                "infer-ranks",
                "specialize",
                "plan-products",
                "lower-to-loops",
                "simplify-index#1",
                "tighten-bounds",
                "simplify-index#2",
                "drop-unused-loops#1",
                "parallelize",
                "direct-stores",
                "drop-unused-loops#2"
            ]
        );
    }

    /// A pass that breaks the module: its second kernel takes the first's
    /// name, which the verifier refuses after the pass.
    static BREAKS: PassInfo = PassInfo {
        name: "breaks",
        summary: "",
        input: Level::Loop,
        output: Level::Loop,
        needs: &[],
        refuses: &[],
        provides: &[],
        refines: true,
        run: run_with!(super::super::NoOptions, break_module),
    };

    fn break_module(unit: &mut Unit, _: &super::super::NoOptions) -> Result<Option<String>, PassError> {
        if let Ir::Loop(m) = &mut unit.ir {
            let k = m.kernels[0].clone();
            m.kernels.push(k);
        }
        Ok(None)
    }

    #[test]
    fn a_failure_after_a_pass_dumps_the_ir_the_pass_read() {
        let module = super::super::test_kernels::matmul(2, 3, 4);
        let input = crate::ir::loops::print::module(&module);
        let source = crate::driver::Source { path: "m.etir".into(), name: "m.etir".into(), text: input.clone() };
        let run = |after_failure| {
            let mut unit = Unit { ir: Ir::Loop(module.clone()), ..Unit::from_source(source.clone()) };
            let pm = PassManager {
                passes: vec![Scheduled { info: &BREAKS, options: vec![], label: "breaks".into() }],
                instrument: Instrument { after_failure, ..Instrument::default() },
            };
            let mut err = Vec::new();
            let r = pm.run_passes(&mut unit, &DriverOptions::default(), &mut err);
            (r, String::from_utf8(err).unwrap())
        };
        let (r, err) = run(true);
        assert!(matches!(r, Err(PassError::Internal(m)) if m.contains("IR after pass `breaks` does not verify")));
        assert_eq!(err, format!("{}\n{input}", dump_failure_header("breaks")));
        assert_eq!(run(false).1, "");
    }

    #[test]
    fn selectors_outside_the_pipeline_are_reported() {
        let ins = Instrument { dump_after: vec!["specialize".into(), "resolve".into(), "simplify-index#3".into()], ..Instrument::default() };
        let pm = PassManager::from_names(&["resolve", "infer-ranks"], ins).unwrap();
        let w = pm.unmatched_selectors();
        assert_eq!(w.len(), 2, "{w:?}");
        assert_eq!(w[0], "etopt: warning: --dump-ir-after specialize: the pipeline does not run this pass (it runs resolve, infer-ranks)");
        let ins = Instrument { dump_after: vec!["fold".into()], ..Instrument::default() };
        assert!(PassManager::from_names(&["resolve"], ins).is_err());
    }
}
