//! The bundle writer (`eintup build`): a specialised program compiled to
//! NVPTX plus the manifest the runtime needs (docs/bundle.md; the types
//! are the runtime's own, so writer and reader cannot drift apart).
//!
//! Inputs defined by `RANDOM` get a `generate` entry: kernels lowered from
//! their defining statements, so a runtime can make them on the device with
//! the interpreter's values (docs/bundle.md).
//!
//! Launch configuration ([`launch_dims`]): one thread per point of the
//! kernel's parallel chain (`crate::thread_count`), blocks of
//! `launch_min_block` to `launch_block` threads chosen so that a launch
//! has at least `launch_min_blocks` blocks where it can, at most
//! `grid_cap` blocks (the kernels loop grid-stride over the rest): the
//! fields of the target's [`GpuTarget`] (eintup's ir/loops/target.rs). A
//! kernel with no threads is not launched.

use eintup::ir::loops::FloatWidth;

use crate::FpContract;
use eintup::driver::{Failure, Source};
use eintup::ir::et::{self, Module, OpKind};
use eintup::ir::loops::target::GpuTarget;
use eintup::ir::loops::{self, LoopModule};
use eintup::sema::Config;
use eintup::variants::{KernelVariant, Lowered};
use eintup_runtime::manifest::{self, Buffer, Init, Kernel, RandomSpec, Role, Step};
use eintup_runtime::{Bundle, DType, Manifest};

/// Everything `build` needs besides the modules.
pub struct BuildOptions {
    pub seed: u64,
    pub float: FloatWidth,
    /// Compute capability as `80`, `90`, ...
    pub sm: u32,
    /// Whether the kernels' float multiplies may fuse with adds.
    pub fp_contract: FpContract,
}

/// `lm`'s PTX, and its kernels' registers and spills where ptxas is
/// installed (it must accept the PTX; a build succeeds without it).
fn checked_ptx(lm: &LoopModule, o: &BuildOptions) -> Result<(String, crate::PtxInfo, Vec<crate::KernelResources>), Failure> {
    let (ptx, info) = crate::emit_ptx(lm, o.seed, o.sm, o.fp_contract).map_err(|e| e.into_failure("PTX emission"))?;
    let resources = match crate::ptxas_path() {
        Some(_) => crate::ptxas_check(&ptx, o.sm).map_err(|e| e.into_failure("ptxas"))?,
        None => Vec::new(),
    };
    Ok((ptx, info, resources))
}

/// Compiles `lm` (lowered from `module`) into a bundle.
pub fn build(src: &Source, module: &Module, lm: &LoopModule, config: &Config, o: &BuildOptions) -> Result<Bundle, Failure> {
    // The input generators' kernels go into the same PTX module: they share
    // the buffers, and their names (`s<stmt>_<array>`) differ from the main
    // kernels' because the main lowering skips the statements they come
    // from (code generation refuses a duplicate entry name).
    let (gen, writers) = eintup::pipeline::lower_generators(src, module, o.float)?;
    // They fit when the main module's buffers start with theirs (the GPU
    // passes may add temporaries after the program's arrays).
    let same = |a: &loops::Buffer, b: &loops::Buffer| a.name == b.name && a.dtype == b.dtype && a.shape == b.shape;
    let generators_fit = gen.buffers.len() <= lm.buffers.len() && gen.buffers.iter().zip(&lm.buffers).all(|(a, b)| same(a, b));
    let mut all = lm.clone();
    if generators_fit {
        all.kernels.extend(gen.kernels.iter().cloned());
    }
    let gpu = GpuTarget::for_sm(o.sm);
    let (ptx, info, resources) = checked_ptx(&all, o)?;
    let buffers = lm
        .buffers
        .iter()
        .enumerate()
        // Shared and local buffers live inside their kernel.
        .filter(|(_, b)| !b.role.is_scratch())
        .map(|(id, b)| manifest_buffer(b, random_spec(src, module, id)))
        .collect::<Result<Vec<_>, Failure>>()?;
    let mut kernels = Vec::new();
    let mut launches = std::collections::BTreeMap::new();
    for k in &all.kernels {
        kernels.push(manifest_kernel(&all, k, &resources));
        if let Some(step) = launch_step(&all, k, &gpu, &[]) {
            launches.insert(k.name.clone(), step);
        }
    }
    let steps = lm.kernels.iter().filter_map(|k| launches.get(&k.name).cloned()).collect();
    let generate = if generators_fit {
        writers
            .iter()
            .map(|&(buf, stmt)| manifest::Generator {
                buffer: all.buffers[buf].name.clone(),
                steps: gen.kernels.iter().filter(|k| k.stmt == Some(stmt)).filter_map(|k| launches.get(&k.name).cloned()).collect(),
            })
            .collect()
    } else {
        Vec::new()
    };
    let m = Manifest {
        format_version: manifest::FORMAT_VERSION,
        producer: format!("eintup {}", env!("CARGO_PKG_VERSION")),
        // The file name only: a bundle is shipped, and the absolute path of
        // the machine that built it says nothing to the one that runs it.
        source: manifest::SourceInfo { name: source_file_name(&src.name), text: src.text.clone() },
        config: manifest::Config {
            seed: o.seed,
            float: o.float.dtype(),
            eintups: config.dims.iter().cloned().collect(),
            fp_contract: Some(o.fp_contract.name().to_string()),
        },
        target: manifest::Target { arch: format!("sm_{}", o.sm), ptx_version: info.ptx_version.clone() },
        buffers,
        kernels,
        steps,
        generate,
        dynamic: None,
    };
    m.validate().map_err(|e| Failure::Internal(format!("the bundle manifest does not validate: {e}")))?;
    Bundle::new(m, ptx).map_err(|e| Failure::Internal(format!("bundle: {e}")))
}

/// A (non-scratch, static) loop buffer as the manifest lists it; `random`
/// is how an input is generated, if the bundle says.
fn manifest_buffer(b: &loops::Buffer, random: Option<RandomSpec>) -> Result<Buffer, Failure> {
    Ok(Buffer {
        name: b.name.clone(),
        dtype: dtype(b.dtype),
        shape: crate::static_extents(b).map_err(|e| e.into_failure("buffer shapes"))?,
        role: match b.role {
            loops::Role::Input => Role::Input,
            loops::Role::Output => Role::Output,
            loops::Role::Temp | loops::Role::Transient | loops::Role::Shared | loops::Role::Local => Role::Temp,
        },
        init: match b.init {
            loops::Init::Input => Init::Input { random },
            loops::Init::Zero => Init::Zero,
        },
    })
}

/// Kernel `k`'s manifest entry: its buffer parameters with the types and
/// element counts it was compiled for, its dim parameters (format 2), and
/// ptxas's register and spill counts when there are any.
fn manifest_kernel(all: &LoopModule, k: &loops::Kernel, resources: &[crate::KernelResources]) -> Kernel {
    let param_bufs = crate::kernel_params(all, k);
    let r = resources.iter().find(|r| r.name == k.name);
    Kernel {
        name: k.name.clone(),
        params: param_bufs.iter().map(|&b| all.buffers[b].name.clone()).collect(),
        registers: r.map(|r| r.registers),
        spill_stores: r.map(|r| u32::try_from(r.spill_stores).unwrap_or(u32::MAX)),
        spill_loads: r.map(|r| u32::try_from(r.spill_loads).unwrap_or(u32::MAX)),
        // A symbolic extent has no element count the kernel was compiled
        // for: none is listed (the launch's buffers are checked instead).
        param_types: match param_bufs.iter().map(|&b| all.buffers[b].len()).collect::<Option<Vec<i64>>>() {
            Some(lens) => {
                param_bufs.iter().zip(lens).map(|(&b, n)| manifest::ParamType { dtype: dtype(all.buffers[b].dtype), elements: n.max(0) as u64 }).collect()
            }
            None => Vec::new(),
        },
        // Every kernel eintup generates loops grid-stride, over threads
        // or over blocks (docs/codegen.md).
        grid_stride: true,
        dims: k.dims_used().iter().map(|&d| all.dims[d].name.clone()).collect(),
    }
}

/// Kernel `k`'s launch at dim values `dims` (one per module symbol; none
/// for a static module); `None` when it has no threads there. A dynamic
/// module's kernels keep a launch even without threads (the runtime may
/// bind other dims), and take blocks of `launch_block` threads whatever
/// their count (a runtime re-binding the bundle recomputes only grids).
fn launch_step(all: &LoopModule, k: &loops::Kernel, gpu: &GpuTarget, dims: &[i64]) -> Option<Step> {
    let threads = crate::thread_count_expr(k).bind_dims(dims).as_const()?;
    let (grid, block) = match crate::block_size(k) {
        _ if threads <= 0 && !all.is_dynamic() => return None,
        // A block-tiled kernel: one block per point of its chain (grid-
        // stride over the rest), its nest's threads in each. Grids are at
        // least one block: a grid-stride kernel without work returns at
        // once, and the runtime refuses an empty launch of one.
        Some(size) => ((threads.max(0) / size).clamp(1, gpu.grid_cap) as u32, size as u32),
        None if all.is_dynamic() => (((threads.max(0) + gpu.launch_block - 1) / gpu.launch_block).clamp(1, gpu.grid_cap) as u32, gpu.launch_block as u32),
        None => gpu.launch_dims(threads),
    };
    let args = crate::kernel_params(all, k).iter().map(|&b| all.buffers[b].name.clone()).collect();
    let dims = k.dims_used().iter().map(|&d| dims[d]).collect();
    Some(Step::Launch { kernel: k.name.clone(), grid: [grid, 1, 1], block: [block, 1, 1], args, dims })
}

/// A dynamic loop module's bundle at one configuration of its dims
/// (format 2, docs/dynamic-shapes.md): `ptx` is the module's PTX
/// ([`crate::emit_ptx`] of the dynamic module), whose kernels take the dims
/// as parameters, so the same PTX serves every configuration; buffers and
/// grids are those of the module bound to `dims`, and each launch passes
/// its kernel's dim values. Inputs are the caller's (no generators). The
/// manifest's shape program, which will let the runtime do this binding
/// from input shapes, is step 3 of the note, not built yet.
pub fn bind_dynamic(lm: &LoopModule, ptx: &str, ptx_version: &str, sm: u32, dims: &[i64]) -> Result<Bundle, Failure> {
    let m = dynamic_manifest(lm, &[], ptx_version, sm, dims)?;
    m.validate().map_err(|e| Failure::Internal(format!("the bundle manifest does not validate: {e}")))?;
    Bundle::new(m, ptx.to_string()).map_err(|e| Failure::Internal(format!("bundle: {e}")))
}

/// A dynamic build of a program (`eintup build FILE.et --dynamic`): the
/// loop module `lm` lowered at `sym`'s symbolic dims, to one bundle whose
/// manifest also says how each eintup's dims follow from the symbols (so
/// `exec` re-specialises the program to the dims its inputs give) and the
/// checks the dims must pass. Recorded at the first small configuration
/// the checks accept: every symbol `v`, or (a slice's `e - lo - hi`) the
/// symbols inputs give `4v` and the others `v`. The run-time variants of
/// `lowered` go into the PTX and the manifest's `dynamic.variants`.
pub fn build_dynamic(
    src: &Source,
    prog: &eintup::sema::Program,
    sym: &eintup::sema::symbolic::SymbolicConfig,
    lowered: &Lowered,
    o: &BuildOptions,
) -> Result<Bundle, Failure> {
    let (ptx, info, _) = checked_ptx(&lowered.with_variants(), o)?;
    let lm = &lowered.module;
    let m = &prog.module;
    let text = |e: &loops::IExpr| loops::print::shape_extent(lm, e);
    let checks: Vec<manifest::DimCheck> = sym
        .dims
        .checks
        .iter()
        .map(|c| manifest::DimCheck { expr: text(&c.expr), min: c.min, about: m.eintups[c.about].name.clone(), rule: c.rule.clone() })
        .collect();
    let holds = |dims: &[i64]| {
        sym.dims.checks.iter().all(|c| c.expr.bind_dims(dims).as_const().is_some_and(|x| x >= c.min))
            && lm.buffers.iter().all(|b| b.shape.iter().all(|e| e.bind_dims(dims).as_const().is_some_and(|x| x >= 0)))
    };
    let from_input: Vec<bool> =
        (0..lm.dims.len()).map(|d| lm.buffers.iter().any(|b| b.role == loops::Role::Input && b.shape.contains(&loops::IExpr::Sym(d)))).collect();
    let candidates = (1..=16i64).flat_map(|v| [vec![v; from_input.len()], from_input.iter().map(|&i| if i { 4 * v } else { v }).collect()]);
    let Some(at) = candidates.into_iter().find(|d| holds(d)) else {
        return Err(Failure::user(format!("eintup: error: {}: no small configuration passes the program's dims checks; bind some eintups (--bind)", src.name)));
    };
    let mut man = dynamic_manifest(lm, &lowered.variants, &info.ptx_version, o.sm, &at)?;
    man.source = manifest::SourceInfo { name: src.name.clone(), text: src.text.clone() };
    man.config.seed = o.seed;
    man.config.fp_contract = Some(o.fp_contract.name().to_string());
    if man.dynamic.is_none() {
        // No dim symbols are left (every eintup bound, or all of rank 0):
        // a static bundle, which records its configuration as `build` does
        // (what `exec` re-specialises the program to).
        for (e, t) in m.eintups.iter().enumerate() {
            let dims: Option<Vec<i64>> = sym.dims.eintups[e].iter().map(|x| x.as_const()).collect();
            let dims = dims.ok_or_else(|| Failure::Internal(format!("eintup `{}` has symbolic dims in a bundle without dim symbols", t.name)))?;
            man.config.eintups.insert(t.name.clone(), dims);
        }
    }
    if let Some(d) = &mut man.dynamic {
        d.checks = checks;
        // Every eintup but the derived ones (the program's equations give
        // those again when `exec` re-specialises it).
        d.eintups = m
            .eintups
            .iter()
            .enumerate()
            .filter(|(e, _)| sym.sources[*e] != eintup::sema::DimsSource::Constrained)
            .map(|(e, t)| (t.name.clone(), sym.dims.eintups[e].iter().map(text).collect()))
            .collect();
    }
    man.validate().map_err(|e| Failure::Internal(format!("the bundle manifest does not validate: {e}")))?;
    Bundle::new(man, ptx).map_err(|e| Failure::Internal(format!("bundle: {e}")))
}

/// The manifest of loop module `lm` (static, or dynamic with its symbols
/// recorded at `dims` and the run-time `variants` of its kernels), its
/// source the printed module.
fn dynamic_manifest(lm: &LoopModule, variants: &[KernelVariant], ptx_version: &str, sm: u32, dims: &[i64]) -> Result<Manifest, Failure> {
    // A step launches its kernel at any dims: one compiled under dim
    // facts would be wrong where they fail (only a variant's `when` can
    // hold them to it).
    if let Some(k) = lm.kernels.iter().find(|k| !k.multiples.is_empty()) {
        return Err(Failure::user(format!(
            "eintup: error: kernel `@{}` is compiled under dim facts (`multiples(..)`): only a run-time variant, launched where they hold, may be",
            k.name
        )));
    }
    let bound = lm.bind_dims(dims).map_err(Failure::user)?;
    let buffers = bound.buffers.iter().filter(|b| !b.role.is_scratch()).map(|b| manifest_buffer(b, None)).collect::<Result<Vec<_>, Failure>>()?;
    let gpu = GpuTarget::for_sm(sm);
    let float = lm.buffers.iter().map(|b| dtype(b.dtype)).find(|d| *d != DType::I32).unwrap_or(DType::F64);
    let m = Manifest {
        format_version: if lm.is_dynamic() { manifest::MAX_FORMAT_VERSION } else { manifest::FORMAT_VERSION },
        producer: format!("eintup {}", env!("CARGO_PKG_VERSION")),
        source: manifest::SourceInfo { name: "loop module".into(), text: loops::print::module(lm) },
        config: manifest::Config { seed: 0, float, eintups: lm.dims.iter().zip(dims).map(|(d, &v)| (d.name.clone(), vec![v])).collect(), fp_contract: None },
        target: manifest::Target { arch: format!("sm_{sm}"), ptx_version: ptx_version.to_string() },
        buffers,
        kernels: lm.kernels.iter().chain(variants.iter().map(|v| &v.kernel)).map(|k| manifest_kernel(lm, k, &[])).collect(),
        steps: lm.kernels.iter().filter_map(|k| launch_step(lm, k, &gpu, dims)).collect(),
        generate: Vec::new(),
        dynamic: lm.is_dynamic().then(|| dynamic_section(lm, variants, &gpu)),
    };
    Ok(m)
}

/// How a runtime re-binds a dynamic module's bundle (format 2): each
/// symbol from the first input axis whose extent it is, every buffer's
/// shape and every launch's thread count as printed shape expressions,
/// and each variant with its launch and condition (one launch step per
/// kernel of `lm`: a variant's step is its general kernel's index).
fn dynamic_section(lm: &LoopModule, variants: &[KernelVariant], gpu: &GpuTarget) -> manifest::Dynamic {
    let text = |e: &loops::IExpr| loops::print::shape_extent(lm, e);
    let mut derive = Vec::new();
    for d in 0..lm.dims.len() {
        let found = lm.buffers.iter().filter(|b| b.role == loops::Role::Input).find_map(|b| {
            b.shape.iter().position(|e| *e == loops::IExpr::Sym(d)).map(|axis| manifest::DimSource {
                sym: lm.dims[d].name.clone(),
                input: b.name.clone(),
                axis,
            })
        });
        derive.extend(found);
    }
    manifest::Dynamic {
        symbols: lm.dims.iter().map(|d| d.name.clone()).collect(),
        derive,
        shapes: lm.buffers.iter().filter(|b| !b.role.is_scratch()).map(|b| (b.name.clone(), b.shape.iter().map(text).collect())).collect(),
        threads: lm.kernels.iter().map(|k| Some(text(&crate::thread_count_expr(k)))).collect(),
        checks: Vec::new(),
        eintups: Default::default(),
        index32: index_limits(lm, variants),
        // One entry per alternative of a variant's condition.
        variants: variants
            .iter()
            .flat_map(|v| {
                v.when.iter().map(|all| manifest::Variant {
                    step: v.of,
                    kernel: v.kernel.name.clone(),
                    threads: text(&crate::thread_count_expr(&v.kernel)),
                    block: [crate::block_size(&v.kernel).unwrap_or(gpu.launch_block) as u32, 1, 1],
                    when: all.iter().map(text).collect(),
                })
            })
            .collect(),
    }
}

/// The limits of the module's 32-bit kernels and their variants
/// (`Kernel::index32_limits`, the same decision code generation makes),
/// each once per kernel (the runtime checks those of the kernels it
/// launches), naming the first buffer whose last offset bounds it.
fn index_limits(lm: &LoopModule, variants: &[KernelVariant]) -> Vec<manifest::IndexLimit> {
    let mut out: Vec<manifest::IndexLimit> = Vec::new();
    for k in lm.kernels.iter().chain(variants.iter().map(|v| &v.kernel)) {
        for f in k.index32_limits(lm).unwrap_or_default() {
            // A limit beyond i64 cannot be printed: no run could meet it.
            let expr = f.to_expr().map_or_else(|| i64::MAX.to_string(), |e| loops::print::shape_extent(lm, &e));
            if out.iter().any(|l| l.expr == expr && l.kernel == k.name) {
                continue;
            }
            let buffer = lm.buffers.iter().find(|b| !b.role.is_scratch() && f.below(&b.shape)).map(|b| b.name.clone());
            out.push(manifest::IndexLimit { expr, kernel: k.name.clone(), buffer });
        }
    }
    out
}

/// Grid and block for `threads` threads (> 0) on the default target
/// ([`GpuTarget::launch_dims`]; the launch policy is the same for every
/// `sm`).
pub fn launch_dims(threads: i64) -> (u32, u32) {
    GpuTarget::default().launch_dims(threads)
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

/// The last component of a source's name (`/home/u/conv.et` ->
/// `conv.et`; `<stdin>` stays).
fn source_file_name(name: &str) -> String {
    std::path::Path::new(name).file_name().map_or_else(|| name.to_string(), |f| f.to_string_lossy().into_owned())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn launches_cover_every_thread_up_to_the_cap() {
        assert_eq!(launch_dims(1), (1, 32));
        assert_eq!(launch_dims(33), (1, 64));
        assert_eq!(launch_dims(64), (1, 64));
        assert_eq!(launch_dims(256), (4, 64));
        assert_eq!(launch_dims(257), (5, 64));
        // 2^14 threads: 256 blocks of 64, not 64 blocks of 256.
        assert_eq!(launch_dims(1 << 14), (256, 64));
        assert_eq!(launch_dims(3 << 13), (384, 64));
        assert_eq!(launch_dims(1 << 15), (256, 128));
        assert_eq!(launch_dims(1 << 16), (256, 256));
        assert_eq!(launch_dims((1 << 16) + 1), (257, 256));
        for t in [1i64, 31, 63, 64, 65, 1000, 12345, 1 << 20] {
            let (g, b) = launch_dims(t);
            assert!(g as i64 * b as i64 >= t && b % 32 == 0 && b as i64 <= GpuTarget::default().launch_block, "{t}: {g} x {b}");
        }
        assert_eq!(launch_dims(1 << 40), (GpuTarget::default().grid_cap as u32, 256));
    }
}
