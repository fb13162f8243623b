//! Passes and the pass manager (docs/architecture.md section 4). One file per pass;
//! `manager` holds the registry, pipelines, verification between passes,
//! `--dump-ir` and `--time-passes`.
//!
//! A compilation is a [`Unit`]: the source (for diagnostics), the IR at its
//! current level ([`Ir`]), and what passes learnt on the way (rank system,
//! chosen configuration). Each pass declares the level it reads and the
//! level it leaves.

pub mod arrange_threads;
pub mod block_tiles;
pub mod cache_tiles;
pub mod differentiate;
pub mod direct_stores;
pub mod drop_unused_loops;
pub mod fuse_kernels;
pub mod fuse_resets;
pub mod infer_ranks;
pub mod interchange;
pub mod interleave_sums;
pub mod lower_to_loops;
pub mod manager;
pub mod parallelize;
pub mod pipeline_copies;
pub mod plan_products;
pub mod register_tiles;
pub mod resolve;
pub mod share_buffers;
pub mod shift_loops;
pub mod simplify_index;
pub mod sink_broadcasts;
pub mod spec;
pub mod specialize;
pub mod split_reductions;
pub mod tighten_bounds;
pub mod tuning;
pub mod widen_threads;

use crate::driver::{Failure, Source};
use crate::ir::loops::target::{GpuTarget, HostTarget};
use crate::ir::loops::LoopModule;
use crate::ir::loops::{FloatWidth, FpContract};
use crate::sema::symbolic::SymbolicConfig;
use crate::sema::{Config, InputShape, Program, RankSystem};
use et_grammar::Diagnostic;

pub use manager::{PassInfo, PassManager, DEFAULT_PIPELINE, FRONT_END, GPU_PASSES, HOST_PASSES, MIDDLE_END, PLAN};
pub use spec::{NoOptions, PassOptions};

/// The IR levels a pass reads or writes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Level {
    /// Unparsed `.et` text.
    Source,
    /// The `et` dialect (rank-polymorphic or specialised).
    Et,
    /// The `loop` dialect.
    Loop,
}

impl Level {
    pub fn name(self) -> &'static str {
        match self {
            Level::Source => "source",
            Level::Et => "et",
            Level::Loop => "loop",
        }
    }
}

#[derive(Clone, Debug)]
pub enum Ir {
    Source,
    Et(Program),
    Loop(LoopModule),
}

impl Ir {
    pub fn level(&self) -> Level {
        match self {
            Ir::Source => Level::Source,
            Ir::Et(_) => Level::Et,
            Ir::Loop(_) => Level::Loop,
        }
    }
}

/// One compilation in flight.
#[derive(Clone, Debug)]
pub struct Unit {
    pub source: Source,
    pub ir: Ir,
    /// Set by `infer-ranks`.
    pub ranks: Option<RankSystem>,
    /// Set by `specialize`: the configuration the module was specialised to.
    pub config: Option<Config>,
    /// Set by `specialize{dynamic}` instead of `config`: the ranks fixed
    /// and the dims as expressions over dim symbols, which
    /// `lower-to-loops` lowers with (docs/dynamic-shapes.md).
    pub symbolic: Option<SymbolicConfig>,
    /// Warnings passes found on the way (`plan-products`' W0701), located
    /// in the source; the tool that runs the passes prints them.
    pub warnings: Vec<Diagnostic>,
}

impl Unit {
    /// A `.et` program, before `resolve`.
    pub fn from_source(source: Source) -> Unit {
        Unit { source, ir: Ir::Source, ranks: None, config: None, symbolic: None, warnings: Vec::new() }
    }

    /// Any input, its kind told by its content ([`crate::ir::text::kind_of`],
    /// not the file name): a program (before `resolve`), or printed IR of
    /// the `et` or `loop` dialect, parsed and verified (located errors,
    /// E06xx). A printed `et` module carries no constraints section.
    pub fn read(source: Source) -> Result<Unit, PassError> {
        use crate::ir::text::{kind_of, TextKind};
        let ir = match kind_of(&source.text) {
            TextKind::Program => return Ok(Unit::from_source(source)),
            TextKind::LoopIr => Ir::Loop(crate::ir::loops::parse::parse_verified(&source.text).map_err(PassError::User)?),
            TextKind::EtIr => {
                let module = crate::ir::et::parse::parse_verified(&source.text).map_err(PassError::User)?;
                Ir::Et(Program { module, constraints: Vec::new() })
            }
        };
        let mut unit = Unit::from_source(source);
        unit.ir = ir;
        Ok(unit)
    }
}

/// What the driver tells the passes (`--bind`, `--input`, `--seed`,
/// `--float`, `--fp-contract`, `--target`): the manager holds it and
/// builds each pass's own options from it ([`spec::PassOptions`]); no pass
/// reads it directly (docs/passes.md, "Pass options").
#[derive(Clone, Debug)]
pub struct DriverOptions {
    /// `--bind NAME=[..]`.
    pub binds: Vec<String>,
    /// The shapes of the input arrays the user supplies (`--input`).
    pub inputs: Vec<InputShape>,
    pub seed: u64,
    /// Width of FLOAT.
    pub float: FloatWidth,
    /// The GPU float policy (`--fp-contract`).
    pub fp_contract: FpContract,
    /// The GPU the GPU passes tile and split for (`--target sm_XX`;
    /// default sm_80): docs/passes.md, "The GPU target".
    pub gpu: GpuTarget,
    /// The host CPU the host passes tile for (`etopt --host --target-cpu`,
    /// and the CPU `eintup run` compiles for): docs/passes.md, "The host
    /// target".
    pub host: HostTarget,
    /// Whether the GPU passes consult `gpu`'s tuning table (`--no-tuning`:
    /// their heuristics alone): docs/tuning.md.
    pub tuning: bool,
    /// `eintup build --dynamic`: `specialize` fixes ranks only and leaves
    /// the dims of eintups not bound symbolic.
    pub dynamic: bool,
    /// `--rank NAME=R`: ranks a dynamic build fixes.
    pub ranks: Vec<(String, usize)>,
    /// `--deterministic`: no float atomics (`parallelize`).
    pub deterministic: bool,
}

impl Default for DriverOptions {
    fn default() -> Self {
        DriverOptions {
            binds: Vec::new(),
            inputs: Vec::new(),
            seed: 0,
            float: FloatWidth::F64,
            fp_contract: FpContract::default(),
            gpu: GpuTarget::default(),
            host: HostTarget::default(),
            tuning: true,
            dynamic: false,
            ranks: Vec::new(),
            deterministic: false,
        }
    }
}

/// Why a pass failed: the passes' own error type (the pass manager turns
/// it into a [`Failure`] of the tool that runs it).
#[derive(Clone, Debug)]
pub enum PassError {
    /// User errors located in the source.
    User(Vec<Diagnostic>),
    /// A user error with no place in the source (a bad `--bind`), as a
    /// complete message.
    Message(String),
    /// A bug.
    Internal(String),
}

impl PassError {
    pub fn into_failure(self, src: &Source) -> Failure {
        match self {
            PassError::User(d) => src.failure(d),
            PassError::Message(m) => Failure::User(m),
            PassError::Internal(m) => Failure::Internal(m),
        }
    }
}

/// Kernels for the unit tests of the tiling passes (`register-tiles`,
/// `block-tiles`, ...): a matmul and a run of it on fixed inputs, and the
/// bench convolution lowered for the GPU up to a pass.
#[cfg(test)]
pub(crate) mod test_kernels {
    use crate::interp::loops as li;
    use crate::ir::loops::{parse, FloatWidth, FpContract, LoopModule};
    use crate::tensor::{Data, Tensor};

    /// The bench convolution's statement (2-D, `dtype` operands) at
    /// `binds`, lowered for the default GPU target up to (not including)
    /// the pass `stop`, with the `et` module it came from.
    pub fn conv_before(dtype: &str, binds: &[&str], fp: FpContract, stop: &str) -> (crate::ir::et::Module, LoopModule) {
        let text = format!(
            "x[batch,ipos,ichan] = RANDOM(-9, 9, {dtype})\nw[fpos,ichan,ochan] = RANDOM(-9, 9, {dtype})\n\
             y[batch,opos,ochan] = w[ipos-DIMS(stride)*opos,ichan,ochan] * x[batch,ipos,ichan]\n\ny\n\n\
             RANK(ipos) = 2\nDIMS(opos) = (DIMS(ipos) - DIMS(fpos) + 1) //^ DIMS(stride)\n"
        );
        let src = crate::driver::Source::from_string("conv.et", &text);
        let binds: Vec<String> = binds.iter().map(|b| b.to_string()).collect();
        let (m, _) = crate::pipeline::specialized_for(&src, &binds, &[], 0, FloatWidth::F32).unwrap();
        let opts = crate::pipeline::GpuOptions::new(FloatWidth::F32, fp, crate::ir::loops::target::DEFAULT_SM);
        let lm = crate::pipeline::lower_gpu_before(&src, &m, &opts, stop).unwrap();
        (m, lm)
    }

    /// `c[row, col] += a[row, k] * b[k, col]` as the middle end leaves it.
    pub fn matmul(m: i64, n: i64, k: i64) -> LoopModule {
        let text = format!(
            "buffer a : i32[{m}, {k}] input\nbuffer b : i32[{k}, {n}] input\nbuffer c : i32[{m}, {n}] output\n\n\
             kernel @mm {{\n  for row in [0, {m}) parallel {{\n    for col in [0, {n}) parallel {{\n      for k in [0, {k}) reduce {{\n        \
             %0 = load a[((row * {k}) + k)] : i32\n        %1 = load b[((k * {n}) + col)] : i32\n        %2 = mul %0, %1 : i32\n        \
             accumulate c[((row * {n}) + col)] += %2\n      }}\n    }}\n  }}\n}}\n"
        );
        parse::parse_verified(&text).unwrap_or_else(|e| panic!("{e:?}\n{text}"))
    }

    /// Runs `lm` (a, b, c and its scratch buffers, zeroed) on fixed inputs.
    pub fn run_matmul(lm: &LoopModule, m: i64, n: i64, k: i64) -> Data {
        let a: Vec<i32> = (0..m * k).map(|i| (i as i32).wrapping_mul(7919) % 1000).collect();
        let b: Vec<i32> = (0..k * n).map(|i| (i as i32).wrapping_mul(104_729) % 777).collect();
        let mut bufs = vec![Tensor::new(vec![m as usize, k as usize], Data::I32(a)).unwrap(), Tensor::new(vec![k as usize, n as usize], Data::I32(b)).unwrap()];
        for buf in &lm.buffers[2..] {
            bufs.push(Tensor::zeros(buf.dtype, &buf.dims().expect("static shape").iter().map(|&d| d as usize).collect::<Vec<_>>()).unwrap());
        }
        li::run(lm, 0, &mut bufs).unwrap();
        bufs.swap_remove(2).data
    }
}
