//! The bundle writer (`eintup build`): a specialised program compiled to
//! NVPTX plus the manifest the runtime needs (docs/bundle.md; the types
//! are the runtime's own, so writer and reader cannot drift apart).
//!
//! Launch configuration: one thread per point of the kernel's parallel
//! chain (`codegen::thread_count`), blocks of [`BLOCK`] threads, at most
//! [`GRID_CAP`] blocks (the kernels loop grid-stride over the rest). A
//! kernel with no threads is not launched at all.

use crate::cli::FloatWidth;
use crate::codegen;
use crate::driver::{Failure, Source};
use crate::ir::et::{self, Module, OpKind};
use crate::ir::loops::{self, LoopModule};
use crate::sema::Config;
use eintup_runtime::manifest::{self, Buffer, Init, Kernel, RandomSpec, Role, Step};
use eintup_runtime::{Bundle, DType, Manifest};

/// Threads per block. 256 is the usual choice for memory-bound kernels on
/// sm_80/sm_90 (8 warps; full occupancy with <= 32 registers per thread).
pub const BLOCK: u32 = 256;
/// Blocks per launch at most: 4096 x 256 = 1M threads, several waves on
/// the largest GPUs (132 SMs x 2048 threads); more only adds scheduling.
pub const GRID_CAP: u32 = 4096;

/// Everything `build` needs besides the modules.
pub struct BuildOptions {
    pub seed: u64,
    pub float: FloatWidth,
    /// Compute capability as `80`, `90`, ...
    pub sm: u32,
}

/// Compiles `lm` (lowered from `module`) into a bundle.
pub fn build(src: &Source, module: &Module, lm: &LoopModule, config: &Config, o: &BuildOptions) -> Result<Bundle, Failure> {
    let (ptx, info) = codegen::emit_ptx(lm, o.seed, o.sm).map_err(|e| Failure::Internal(format!("PTX emission: {e}")))?;
    // Registers and spills when ptxas is installed; the build succeeds
    // without it.
    let resources = match codegen::ptxas_path() {
        Some(_) => codegen::ptxas_check(&ptx, o.sm).map_err(|e| Failure::Internal(format!("ptxas rejected the generated PTX: {e}")))?,
        None => Vec::new(),
    };
    let buffers = lm
        .buffers
        .iter()
        .enumerate()
        .map(|(id, b)| Buffer {
            name: b.name.clone(),
            dtype: dtype(b.dtype),
            shape: b.shape.iter().map(|&d| d.max(0) as usize).collect(),
            role: match b.role {
                loops::Role::Input => Role::Input,
                loops::Role::Output => Role::Output,
                loops::Role::Temp => Role::Temp,
            },
            init: match b.init {
                loops::Init::Input => Init::Input { random: random_spec(src, module, id) },
                loops::Init::Zero => Init::Zero,
            },
        })
        .collect();
    let mut kernels = Vec::new();
    let mut steps = Vec::new();
    for k in &lm.kernels {
        let params: Vec<String> = codegen::kernel_params(lm, k).into_iter().map(|b| lm.buffers[b].name.clone()).collect();
        let r = resources.iter().find(|r| r.name == k.name);
        kernels.push(Kernel {
            name: k.name.clone(),
            params: params.clone(),
            registers: r.map(|r| r.registers),
            spill_stores: r.map(|r| u32::try_from(r.spill_stores).unwrap_or(u32::MAX)),
            spill_loads: r.map(|r| u32::try_from(r.spill_loads).unwrap_or(u32::MAX)),
        });
        let threads = codegen::thread_count(k);
        if threads <= 0 {
            continue;
        }
        let (grid, block) = launch_dims(threads);
        steps.push(Step::Launch { kernel: k.name.clone(), grid: [grid, 1, 1], block: [block, 1, 1], args: params });
    }
    let m = Manifest {
        format_version: manifest::FORMAT_VERSION,
        producer: format!("eintup {}", env!("CARGO_PKG_VERSION")),
        source: manifest::SourceInfo { name: src.name.clone(), text: src.text.clone() },
        config: manifest::Config {
            seed: o.seed,
            float: match o.float {
                FloatWidth::F64 => DType::F64,
                FloatWidth::F32 => DType::F32,
            },
            eintups: config.dims.iter().cloned().collect(),
        },
        target: manifest::Target { arch: format!("sm_{}", o.sm), ptx_version: info.ptx_version.clone() },
        buffers,
        kernels,
        steps,
    };
    m.validate().map_err(|e| Failure::Internal(format!("the bundle manifest does not validate: {e}")))?;
    Bundle::new(m, ptx).map_err(|e| Failure::Internal(format!("bundle: {e}")))
}

/// Grid and block for `threads` threads (> 0).
pub fn launch_dims(threads: i64) -> (u32, u32) {
    let block = if threads < BLOCK as i64 { (((threads + 31) / 32) * 32) as u32 } else { BLOCK };
    let grid = ((threads + block as i64 - 1) / block as i64).min(GRID_CAP as i64) as u32;
    (grid, block)
}

pub fn dtype(d: loops::DType) -> DType {
    match d {
        loops::DType::I32 => DType::I32,
        loops::DType::F32 => DType::F32,
        loops::DType::F64 => DType::F64,
    }
}

/// `RANDOM(lo, hi, T)` of an input array's defining statement, as written.
fn random_spec(src: &Source, m: &Module, array: usize) -> Option<RandomSpec> {
    let a = m.arrays.get(array)?;
    let s: &et::Stmt = m.stmts.get(a.def_stmt)?;
    let OpKind::Random { lo, hi, dtype } = &s.ops.get(s.result)?.kind else { return None };
    let text = |v: usize| -> Option<String> {
        let sp = s.ops.get(v)?.span;
        src.text.get(sp.start..sp.end).map(|t| t.trim().to_string())
    };
    Some(RandomSpec { lo: text(*lo)?, hi: text(*hi)?, ty: dtype.text().to_string() })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn launches_cover_every_thread_up_to_the_cap() {
        assert_eq!(launch_dims(1), (1, 32));
        assert_eq!(launch_dims(33), (1, 64));
        assert_eq!(launch_dims(256), (1, 256));
        assert_eq!(launch_dims(257), (2, 256));
        assert_eq!(launch_dims(1 << 40), (GRID_CAP, 256));
    }
}
