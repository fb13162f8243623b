//! The target stages (docs/architecture.md section 3, levels 4 and 5), after the
//! middle end of `eintup::pipeline`: the `loop` dialect as LLVM IR through
//! inkwell, optimised with LLVM's `default<O3>` pipeline, then either
//! JIT-compiled and run on the host (`host`) or compiled to PTX by the
//! NVPTX backend and checked with `ptxas` (`nvptx`), and packed with its
//! manifest into a bundle (`bundle`) that the runtime runs (`gpu`).
//! `backend` runs a specialised program on any backend, the interpreter
//! included. The IR construction shared by both targets is `lower`.
//! docs/codegen.md describes the lowering, the kernel ABIs and the
//! numerics. This is the only crate of the compiler that links LLVM.

pub mod backend;
pub mod bundle;
pub mod disk_cache;
pub mod gpu;
pub mod host;
pub mod host_cache;
pub mod hostlib;
pub mod lower;
pub mod nvptx;
mod sums;

use eintup::driver::Failure;
use eintup::ir::loops::{BufId, Kernel, LoopModule};
use inkwell::context::Context;
use std::fmt;

pub use host::{compile_cost, compile_groups, run_host, with_compiled, BufferRef, HostCpu, HostProgram};
pub use lower::{block_size, thread_count, thread_count_expr};
pub use nvptx::{emit_ptx, ptxas_check, ptxas_path, KernelResources, PtxInfo};

/// What to generate code for.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Target {
    /// An x86-64 CPU: the machine the compiler runs on (what the JIT runs)
    /// or a named one (what tests and `etopt --target-cpu` compile for, so
    /// that the IR does not depend on the machine); host code contracts
    /// only when asked (`--fp-contract fast`), bit-exact by default.
    Host { fp_contract: FpContract, cpu: HostCpu },
    /// An NVIDIA GPU of compute capability `sm` (80 for sm_80).
    Nvptx { sm: u32, fp_contract: FpContract },
}

/// The float policy (`--fp-contract`); it lives with the loop dialect
/// because a loop pass (`split-reductions`) follows it too. GPU code
/// defaults to `fast`, host code to `off` ([`default_fp_contract`]).
pub use eintup::ir::loops::FpContract;

/// The float policy a target gets unless the user chooses: `fast` on the
/// GPU (what `nvcc -fmad=true` and GPU libraries do), `off` on the host
/// (the interpreter's rounding, bit for bit; FMA is an opt-in there).
pub fn default_fp_contract(host: bool) -> FpContract {
    if host {
        FpContract::Off
    } else {
        FpContract::Fast
    }
}

/// Why code could not be generated or run, by who can act on it: the
/// exit code and the Python or C status follow the kind (docs/cli.md,
/// "Exit codes").
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum CodegenError {
    /// The loop module, the target or the caller's buffers are not what
    /// code generation accepts: a user error where the module is the
    /// user's (`etopt` on textual IR, a C host's buffers), a compiler bug
    /// where a pipeline built it.
    Invalid(String),
    /// The machine refused: no private temporary directory, a tool
    /// (ptxas, the linker) that cannot run, a setting that does not
    /// parse, a library that cannot be loaded. The user can fix it: exit 2.
    Environment(String),
    /// LLVM or ptxas failed on a module code generation accepted: a bug,
    /// exit 70.
    Internal(String),
}

impl CodegenError {
    pub fn message(&self) -> &str {
        match self {
            CodegenError::Invalid(m) | CodegenError::Environment(m) | CodegenError::Internal(m) => m,
        }
    }

    /// As a driver failure of a pipeline that built the module itself
    /// (so an invalid module is the compiler's bug), `what` naming the
    /// step: only the environment's errors are the user's.
    pub fn into_failure(self, what: &str) -> Failure {
        match self {
            CodegenError::Environment(m) => Failure::user(format!("eintup: error: {what}: {m}")),
            CodegenError::Invalid(m) | CodegenError::Internal(m) => Failure::Internal(format!("{what}: {m}")),
        }
    }
}

impl fmt::Display for CodegenError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.message())
    }
}

impl std::error::Error for CodegenError {}

impl From<inkwell::builder::BuilderError> for CodegenError {
    fn from(e: inkwell::builder::BuilderError) -> Self {
        CodegenError::Internal(format!("LLVM builder: {e}"))
    }
}

/// Buffer `b`'s extents: code generation runs on static modules only
/// (dim symbols become kernel parameters in a later step of
/// docs/dynamic-shapes.md; until then a dynamic module is refused here).
pub fn static_extents(b: &eintup::ir::loops::Buffer) -> Result<Vec<usize>, CodegenError> {
    b.dims()
        .map(|d| d.iter().map(|&x| x.max(0) as usize).collect())
        .ok_or_else(|| CodegenError::Invalid(format!("buffer `{}` has a symbolic shape: code generation needs static dims (bind them first)", b.name)))
}

/// The buffers kernel `k` reads or writes, ascending: the kernel's pointer
/// parameters, in this order, on every target. (The module is not needed
/// today: buffer ids are global to it.)
pub fn kernel_params(m: &LoopModule, k: &Kernel) -> Vec<BufId> {
    // Shared and local buffers live in the kernel (docs/codegen.md).
    k.buffers().into_iter().filter(|&b| !m.buffers.get(b).is_some_and(|x| x.role.is_scratch())).collect()
}

/// Textual LLVM IR of every kernel of `m` for `target`, after `default<O3>`.
/// `seed` is the RANDOM seed (it is folded into the generated code).
pub fn emit_llvm(m: &LoopModule, seed: u64, target: Target) -> Result<String, CodegenError> {
    let ctx = Context::create();
    let module = match target {
        Target::Host { fp_contract, cpu } => host::optimized_module(&ctx, m, &(0..m.kernels.len()).collect::<Vec<_>>(), seed, fp_contract, cpu)?.0,
        Target::Nvptx { sm, fp_contract } => nvptx::optimized_module(&ctx, m, seed, sm, fp_contract)?.0,
    };
    Ok(module.print_to_string().to_string())
}
