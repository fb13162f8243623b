//! Executing a specialised program on a backend (`--backend
//! interp|cpu|gpu|emu`): the one place `run` and `check` go through, so every
//! backend sees the same inputs (the interpreter's generator, or the
//! user's `.npy` files) and returns every array in module order.

use crate::host_cache::HostCache;
use crate::FpContract;
use eintup::driver::{Failure, Source};
use eintup::interp::{self, RunOptions};
use eintup::ir::et::Module;
use eintup::ir::loops::LoopModule;
use eintup::tensor::Tensor;
use eintup_runtime::DeviceKind;
use std::fmt;
use std::str::FromStr;

/// Where a program runs.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Backend {
    /// The reference interpreter.
    Interp,
    /// LLVM host code (JIT).
    Cpu,
    /// NVPTX through the CUDA runtime.
    Gpu,
    /// NVPTX on the runtime's PTX emulator: the GPU path without a GPU.
    Emu,
}

impl Backend {
    pub const ALL: [Backend; 4] = [Backend::Interp, Backend::Cpu, Backend::Gpu, Backend::Emu];

    /// The float policy this backend gets unless the user chooses one
    /// (`crate::default_fp_contract`; the interpreter never fuses).
    pub fn default_fp_contract(self) -> FpContract {
        crate::default_fp_contract(!matches!(self, Backend::Gpu | Backend::Emu))
    }

    /// The `--backend` spelling.
    pub fn name(self) -> &'static str {
        match self {
            Backend::Interp => "interp",
            Backend::Cpu => "cpu",
            Backend::Gpu => "gpu",
            Backend::Emu => "emu",
        }
    }
}

impl fmt::Display for Backend {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

impl FromStr for Backend {
    type Err = String;
    /// A `--backend` spelling, or `cuda` for `gpu` (`exec --device`'s).
    fn from_str(s: &str) -> Result<Backend, String> {
        let s = if s == "cuda" { "gpu" } else { s };
        Backend::ALL.into_iter().find(|b| b.name() == s).ok_or_else(|| format!("invalid backend `{s}` (expected interp, cpu, gpu or emu)"))
    }
}

/// Runs `module` on `backend`; returns every array, in module order.
/// `fp_contract` applies to the compiled backends (`cpu`, `gpu`, `emu`);
/// the interpreter always rounds every operation.
pub fn execute(src: &Source, module: &Module, backend: Backend, opts: &RunOptions, fp_contract: FpContract) -> Result<Vec<Tensor>, Failure> {
    execute_cached(src, module, backend, opts, fp_contract, None)
}

/// [`execute`], with `cpu` programs taken from and stored in `cache`
/// (`eintup run`; the same arrays either way).
pub fn execute_cached(
    src: &Source,
    module: &Module,
    backend: Backend,
    opts: &RunOptions,
    fp_contract: FpContract,
    cache: Option<&HostCache>,
) -> Result<Vec<Tensor>, Failure> {
    match backend {
        Backend::Interp => interp::run(module, opts).map_err(|e| e.into_failure(src)),
        Backend::Cpu => {
            let (planned, _) = eintup::pipeline::planned(src, module, opts.float, fp_contract)?;
            let host = crate::HostCpu::Native.host_target().map_err(|e| Failure::user(format!("error: {e}")))?;
            let lm = eintup::pipeline::lower_host(src, &planned, opts.float, fp_contract, host)?;
            eintup::pipeline::check_loop_work(src, &planned, &lm, opts.max_work)?;
            let mut bufs = initial_buffers(src, module, &lm, opts)?;
            let prog = match cache {
                Some(c) => c.program(lm, opts.seed, fp_contract).map(|(p, _)| p),
                None => crate::HostProgram::compile(lm, opts.seed, fp_contract),
            };
            prog.and_then(|prog| prog.run(&mut bufs)).map_err(|e| e.into_failure("host backend"))?;
            bufs.truncate(module.arrays.len());
            Ok(bufs)
        }
        Backend::Gpu => crate::gpu::execute(src, module, opts, DeviceKind::Cuda, fp_contract),
        Backend::Emu => crate::gpu::execute(src, module, opts, DeviceKind::Emulator, fp_contract),
    }
}

/// Buffers as compiled code starts: the arrays' initial contents (inputs
/// generated or supplied, the rest zero), then zeroed temporaries (those of
/// the plan, `pipeline::planned`, and of the loop passes).
pub fn initial_buffers(src: &Source, module: &Module, lm: &LoopModule, opts: &RunOptions) -> Result<Vec<Tensor>, Failure> {
    let mut bufs = interp::initial_arrays(module, opts).map_err(|e| e.into_failure(src))?;
    for b in &lm.buffers[bufs.len().min(lm.buffers.len())..] {
        let shape = crate::static_extents(b).map_err(|e| e.into_failure("buffer shapes"))?;
        let t = Tensor::zeros(b.dtype, &shape).ok_or_else(|| {
            let bytes = shape.iter().try_fold(b.dtype.size(), |n, &d| n.checked_mul(d));
            let size = bytes.map_or_else(|| "more bytes than this machine addresses".to_string(), |n| format!("{n} bytes"));
            Failure::user(format!(
                "eintup: error[E0404]: the compiler's temporary buffer `{}` of shape {shape:?} needs {size}, which cannot be allocated",
                b.name
            ))
        })?;
        bufs.push(t);
    }
    Ok(bufs)
}
