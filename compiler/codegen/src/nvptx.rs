//! The NVPTX target: its side of the lowering (`NvptxLowering`: the
//! kernel ABI, the grid-stride loop over the parallel chain, shared
//! memory and barriers), optimised and compiled to PTX by LLVM's NVPTX backend, the PTX checked like Triton
//! does (one `.entry` per kernel, `.version` and `.target` lines), and
//! optionally assembled by `ptxas` to prove it is accepted and to read
//! register and spill counts.

use super::lower::{lower_and_optimize, KernelLowering, TargetLowering};
use super::{CodegenError, FpContract};
use eintup::ir::loops::chain::Step;
use eintup::ir::loops::geometry::GridChain;
use eintup::ir::loops::target::GpuTarget;
use eintup::ir::loops::{BufId, CopyGroup, DType, IExpr, Kernel, LoopModule, Role, VarId, WriteKind};
use inkwell::context::Context;
use inkwell::module::Module;
use inkwell::targets::{CodeModel, FileType, InitializationConfig, RelocMode, Target, TargetMachine, TargetTriple};
use inkwell::types::{ArrayType, BasicMetadataTypeEnum};
use inkwell::values::{BasicMetadataValueEnum, BasicValueEnum, FunctionValue, IntValue, PointerValue};
use inkwell::OptimizationLevel;
use inkwell::{AddressSpace, IntPredicate};
use std::path::{Path, PathBuf};
use std::process::Command;

const TRIPLE: &str = "nvptx64-nvidia-cuda";

/// LLVM calling convention number of `ptx_kernel` (CallingConv::PTX_Kernel):
/// it is what makes the NVPTX backend emit `.entry` instead of `.func`.
const PTX_KERNEL_CC: u32 = 71;
/// NVPTX's shared address space (a block's scratch).
const NVPTX_SHARED_AS: u16 = 3;
/// The global address space of NVPTX, where kernel arguments point.
const NVPTX_GLOBAL_AS: u16 = 1;

/// The GPU's side of the lowering: the kernel is a `ptx_kernel` taking one
/// global pointer per buffer, its parallel chain one grid-stride loop.
pub(crate) struct NvptxLowering {
    /// The compute capability: `cp.async` needs sm_80.
    pub sm: u32,
    /// Set when a kernel got a vector atomic add, which needs PTX ISA 8.1
    /// ([`VECTOR_ATOMIC_PTX_ISA`]); the module keeps its architecture's
    /// older ISA otherwise, for older drivers.
    pub vector_atomics: std::cell::Cell<bool>,
}

impl NvptxLowering {
    pub(crate) fn new(sm: u32) -> NvptxLowering {
        NvptxLowering { sm, vector_atomics: std::cell::Cell::new(false) }
    }
}

/// The PTX ISA (times ten) of `red.global.add.v{2,4}.f32` (CUDA 12.1).
const VECTOR_ATOMIC_PTX_ISA: u32 = 81;

impl TargetLowering for NvptxLowering {
    /// The PTX entry has exactly the kernel's name.
    fn body_symbol(&self, k: &Kernel) -> String {
        k.name.clone()
    }

    fn buffer_address_space(&self) -> AddressSpace {
        AddressSpace::from(NVPTX_GLOBAL_AS)
    }

    fn extra_params<'ctx>(&self, _ctx: &'ctx Context) -> Vec<BasicMetadataTypeEnum<'ctx>> {
        Vec::new()
    }

    fn declare_body<'ctx>(&self, ctx: &'ctx Context, m: &LoopModule, k: &Kernel, func: FunctionValue<'ctx>) {
        func.set_call_conventions(PTX_KERNEL_CC);
        if super::lower::cheap_to_compile(m, k) {
            super::lower::skip_optimisation(ctx, func);
        }
    }

    /// Shared buffers are per block: an `addrspace(3)` global `KERNEL__BUF`
    /// (internal, undefined initial value, 16-byte aligned). Local buffers
    /// are per thread: `alloca`s.
    fn scratch<'ctx>(&self, kl: &KernelLowering<'_, 'ctx>, buf: BufId, ty: ArrayType<'ctx>) -> Result<PointerValue<'ctx>, CodegenError> {
        let bf = kl.buffer(buf);
        if bf.role != Role::Shared {
            return kl.alloca_scratch(buf, ty);
        }
        let g = kl.module.add_global(ty, Some(AddressSpace::from(NVPTX_SHARED_AS)), &format!("{}__{}", kl.k.name, bf.name));
        g.set_linkage(inkwell::module::Linkage::Internal);
        g.set_initializer(&ty.get_undef());
        // As aligned as every other buffer (`base_align`).
        g.set_alignment(eintup_runtime::BUFFER_ALIGN as u32);
        Ok(g.as_pointer_value())
    }

    /// The grid, not `[begin, end)`, divides a kernel among threads.
    fn split_bounds<'ctx>(&self, _k: &Kernel, _func: FunctionValue<'ctx>, _n_buffers: u32) -> Option<(IntValue<'ctx>, IntValue<'ctx>)> {
        None
    }

    /// 64-bit integer arithmetic costs two instructions and two registers.
    /// A dynamic kernel's limits go into its bundle (`dynamic.index32`),
    /// which the runtime checks before it launches.
    fn narrow_index(&self, m: &LoopModule, k: &Kernel) -> bool {
        k.index32_limits(m).is_some()
    }

    /// Float reductions are split at the loop level (`split-reductions`).
    fn reassoc_sums(&self, _k: &Kernel, _fp_contract: FpContract) -> bool {
        false
    }

    fn kernel_body(&self, kl: &mut KernelLowering<'_, '_>) -> Result<(), CodegenError> {
        grid_stride(kl)
    }

    /// The body function is the entry.
    fn entry(&self, _kl: &KernelLowering<'_, '_>) -> Result<(), CodegenError> {
        Ok(())
    }

    /// `bar.sync 0`.
    fn sync(&self, kl: &mut KernelLowering<'_, '_>) -> Result<(), CodegenError> {
        let f = kl.intrinsic("llvm.nvvm.barrier0", &[])?;
        kl.b.build_call(f, &[], "")?;
        Ok(())
    }

    fn write_kind(&self, kind: WriteKind) -> WriteKind {
        kind
    }

    /// `cp.async.ca.shared.global` of 4 or 8 bytes, `cp.async.cg` (L2
    /// only, as CUTLASS's multistage kernels) of 16.
    fn copy_async<'ctx>(&self, kl: &mut KernelLowering<'_, 'ctx>, dst: PointerValue<'ctx>, src: PointerValue<'ctx>, bytes: u32) -> Result<(), CodegenError> {
        if self.sm < 80 {
            return Err(kl.err(format_args!("`copy_async` needs sm_80 or later (cp.async), not sm_{}", self.sm)));
        }
        let name = match bytes {
            4 | 8 => format!("llvm.nvvm.cp.async.ca.shared.global.{bytes}"),
            16 => "llvm.nvvm.cp.async.cg.shared.global.16".to_string(),
            _ => return Err(kl.err(format_args!("no cp.async of {bytes} bytes (4, 8 or 16)"))),
        };
        let f = kl.intrinsic(&name, &[])?;
        kl.b.build_call(f, &[dst.into(), src.into()], "")?;
        Ok(())
    }

    fn vector_atomic_lanes(&self, dt: DType) -> i64 {
        GpuTarget::for_sm(self.sm).vector_atomic_lanes(dt)
    }

    /// `red.global.add.v{2,4}.f32 [p], {..}` as inline assembly: LLVM 19
    /// has no intrinsic for it, and its `atomicrmw` is scalar.
    fn vector_atomic_add<'ctx>(&self, kl: &mut KernelLowering<'_, 'ctx>, p: PointerValue<'ctx>, vals: &[BasicValueEnum<'ctx>]) -> Result<(), CodegenError> {
        let n = vals.len();
        let all_f32 = vals.iter().all(|v| v.is_float_value() && v.into_float_value().get_type() == kl.ctx.f32_type());
        if !matches!(n, 2 | 4) || !all_f32 || (n as i64) > self.vector_atomic_lanes(DType::F32) {
            return Err(kl.bug(format_args!("no vector atomic add of {n} values on sm_{}", self.sm)));
        }
        let regs: Vec<String> = (1..=n).map(|i| format!("${i}")).collect();
        let asm = format!("red.global.add.v{n}.f32 [$0], {{{}}};", regs.join(", "));
        let constraints = format!("l,{},~{{memory}}", vec!["f"; n].join(","));
        let mut params: Vec<BasicMetadataTypeEnum<'ctx>> = vec![p.get_type().into()];
        params.extend(std::iter::repeat_n(BasicMetadataTypeEnum::from(kl.ctx.f32_type()), n));
        let fn_ty = kl.ctx.void_type().fn_type(&params, false);
        let callee = kl.ctx.create_inline_asm(fn_ty, asm, constraints, true, false, None, false);
        let mut args: Vec<BasicMetadataValueEnum<'ctx>> = vec![p.into()];
        args.extend(vals.iter().map(|&v| BasicMetadataValueEnum::from(v)));
        kl.b.build_indirect_call(fn_ty, callee, &args, "")?;
        self.vector_atomics.set(true);
        Ok(())
    }

    /// `cp.async.commit_group`, `cp.async.wait_group N`.
    fn copy_group(&self, kl: &mut KernelLowering<'_, '_>, g: CopyGroup) -> Result<(), CodegenError> {
        if self.sm < 80 {
            return Err(kl.err(format_args!("`commit_copies`/`wait_copies` need sm_80 or later (cp.async), not sm_{}", self.sm)));
        }
        match g {
            CopyGroup::Commit => {
                let f = kl.intrinsic("llvm.nvvm.cp.async.commit.group", &[])?;
                kl.b.build_call(f, &[], "")?;
            }
            CopyGroup::Wait { pending } => {
                let f = kl.intrinsic("llvm.nvvm.cp.async.wait.group", &[])?;
                kl.b.build_call(f, &[kl.i32.const_int(u64::from(pending), false).into()], "")?;
            }
        }
        Ok(())
    }

    /// A block-tiled kernel works only in blocks of exactly its nest's
    /// threads (its shared tiles and their barriers assume them): `.reqntid
    /// N, 1, 1` on its entry (`nvvm.annotations` `reqntidx`, which the
    /// backend reads once per module, so before the pipeline), so a launch
    /// in other blocks is refused by the driver, by the emulator and, when a
    /// bundle is opened, by the runtime, instead of leaving cells unwritten.
    /// Grid-stride kernels without tiles work in any block and carry none.
    fn annotate<'ctx>(&self, ctx: &'ctx Context, module: &Module<'ctx>, m: &LoopModule, _tm: &TargetMachine) {
        for k in &m.kernels {
            let (Some(size), Some(f)) = (eintup::ir::loops::geometry::block_size(k), module.get_function(&k.name)) else { continue };
            let node = ctx.metadata_node(&[
                f.as_global_value().as_pointer_value().into(),
                ctx.metadata_string("reqntidx").into(),
                ctx.i32_type().const_int(size as u64, false).into(),
            ]);
            // Fails only for a key that is not a named metadata's: never here.
            let _ = module.add_global_metadata("nvvm.annotations", &node);
        }
    }

    /// `.param .u64` after the buffers: one bundle for many shapes.
    fn dims_as_params(&self) -> bool {
        true
    }

    /// The runtime's `BUFFER_ALIGN` (16): `cuMemAlloc` (and the emulator)
    /// start every allocation at a multiple of 256 bytes, `Program::bind`
    /// refuses a caller's buffer that is not so aligned, and shared
    /// buffers are declared `.align 16`. One constant, so that what the
    /// code assumes and what the runtime checks cannot drift apart.
    fn base_align(&self) -> Option<u64> {
        Some(eintup_runtime::BUFFER_ALIGN)
    }

    /// Not measured on a GPU yet: the PTX stays as the GPU runs checked.
    fn register_sums(&self) -> bool {
        false
    }
}

/// `for lin = gid; lin < total; lin += nthreads { vars(lin); steps; rest }`;
/// with a `thread` nest, `gid` and `nthreads` count blocks and the
/// nest's variables come from the thread's id in its block.
fn grid_stride<'ctx>(kl: &mut KernelLowering<'_, 'ctx>) -> Result<(), CodegenError> {
    let k = kl.k;
    let chain = GridChain::of(&k.body);
    if chain.total.as_const() == Some(0) || chain.block == Some(0) {
        // An empty chain loop: nothing runs (and the digit arithmetic
        // below would divide by a zero trip count).
        return Ok(());
    }
    let sreg = |me: &KernelLowering<'_, 'ctx>, name: &str| -> Result<IntValue<'ctx>, CodegenError> {
        let f = me.intrinsic(&format!("llvm.nvvm.read.ptx.sreg.{name}"), &[])?;
        let v = me.call(f, &[], name)?.into_int_value();
        Ok(me.b.build_int_z_extend(v, me.i64, name)?)
    };
    let tid = sreg(kl, "tid.x")?;
    let ctaid = sreg(kl, "ctaid.x")?;
    let nctaid = sreg(kl, "nctaid.x")?;
    let (gid, stride) = match chain.block {
        // Every thread of a block walks the same points, so all reach
        // the same barriers.
        Some(_) => (ctaid, nctaid),
        None => {
            let ntid = sreg(kl, "ntid.x")?;
            (kl.b.build_int_add(kl.b.build_int_mul(ctaid, ntid, "")?, tid, "gid")?, kl.b.build_int_mul(nctaid, ntid, "nthreads")?)
        }
    };
    // A dynamic kernel's total is computed once, from its dim parameters
    // (in i32 when the kernel's limits bound it, `Kernel::index32_limits`).
    let total = match chain.total.as_const() {
        Some(t) => kl.c64(t),
        None => {
            let t = kl.iexpr(&chain.total)?;
            kl.b.build_int_s_extend_or_bit_cast(t, kl.i64, "total")?
        }
    };
    let pre = kl.b.get_insert_block().ok_or_else(|| kl.bug("no insert block"))?;
    let header = kl.block("grid.header");
    let body = kl.block("grid.body");
    let latch = kl.block("grid.latch");
    let exit = kl.block("grid.exit");
    kl.b.build_unconditional_branch(header)?;
    kl.b.position_at_end(header);
    let lin = kl.b.build_phi(kl.i64, "lin")?;
    lin.add_incoming(&[(&gid, pre)]);
    let lin_v = lin.as_basic_value().into_int_value();
    let more = kl.b.build_int_compare(IntPredicate::SLT, lin_v, total, "")?;
    kl.b.build_conditional_branch(more, body, exit)?;
    kl.b.position_at_end(body);
    let loops: Vec<(VarId, IExpr, IExpr)> = chain
        .steps
        .iter()
        .filter_map(|s| match s {
            Step::Loop { var, lo, trip } => Some((*var, lo.clone(), trip.clone())),
            _ => None,
        })
        .collect();
    // A dynamic i32 kernel's total is below 2^31 (one of its limits).
    let narrow = chain.total.as_const().map_or(kl.narrow(), |t| t <= i32::MAX as i64);
    let mut values = digits(kl, lin_v, narrow, &loops)?.into_iter();
    for step in &chain.steps {
        match step {
            Step::Loop { var, .. } => {
                let v = values.next().ok_or_else(|| kl.bug("chain digits"))?;
                kl.bind(*var, v)?;
            }
            Step::Guard(conds) => {
                let c = kl.conds(conds)?;
                let next = kl.block("guard.body");
                kl.b.build_conditional_branch(c, next, latch)?;
                kl.b.position_at_end(next);
            }
            Step::LoadIndex { var, buf, offset } => {
                let v = kl.load_index(*buf, offset)?;
                kl.bind(*var, v)?;
            }
        }
    }
    if let Some(size) = chain.block {
        let threads: Vec<(VarId, IExpr, IExpr)> = chain.threads.iter().map(|&(v, lo, trip)| (v, IExpr::c(lo), IExpr::c(trip))).collect();
        for (&(var, ..), v) in chain.threads.iter().zip(digits(kl, tid, size <= i32::MAX as i64, &threads)?) {
            kl.bind(var, v)?;
        }
        kl.block = Some((kl.to_index(tid)?, size));
    }
    kl.nodes(chain.rest)?;
    kl.b.build_unconditional_branch(latch)?;
    kl.b.position_at_end(latch);
    let next = kl.b.build_int_add(lin_v, stride, "lin.next")?;
    lin.add_incoming(&[(&next, latch)]);
    kl.b.build_unconditional_branch(header)?;
    kl.b.position_at_end(exit);
    Ok(())
}

/// The values of `loops` (`(var, lo, trip)`, innermost fastest) at
/// point `lin` (an i64 below the product of the trips; a dynamic kernel's
/// bounds are expressions of its dim parameters, evaluated here).
/// `narrow`: the product is below 2^31, so the digit arithmetic runs in
/// i32, which is far cheaper on the GPU.
fn digits<'ctx>(
    kl: &mut KernelLowering<'_, 'ctx>,
    lin: IntValue<'ctx>,
    narrow: bool,
    loops: &[(VarId, IExpr, IExpr)],
) -> Result<Vec<IntValue<'ctx>>, CodegenError> {
    let ity = if narrow { kl.i32 } else { kl.i64 };
    let mut rem = if narrow { kl.b.build_int_truncate(lin, kl.i32, "")? } else { lin };
    let mut values = vec![None; loops.len()];
    for (i, (_, lo, trip)) in loops.iter().enumerate().rev() {
        let digit = if i == 0 {
            rem
        } else {
            let t = match trip.as_const() {
                Some(t) => ity.const_int(t as u64, false),
                // Non-zero here: a zero trip makes the total 0 and no
                // point reaches this code.
                None => {
                    let t = kl.iexpr(trip)?;
                    kl.b.build_int_s_extend_or_bit_cast(t, ity, "")?
                }
            };
            let d = kl.b.build_int_unsigned_rem(rem, t, "")?;
            rem = kl.b.build_int_unsigned_div(rem, t, "")?;
            d
        };
        // digit + lo is a value of the loop, so it fits the index type.
        let digit = if narrow { kl.b.build_int_z_extend_or_bit_cast(digit, kl.ix, "")? } else { kl.to_index(digit)? };
        let lo = kl.iexpr(lo)?;
        values[i] = Some(kl.b.build_int_add(digit, lo, "")?);
    }
    values.into_iter().map(|v| v.ok_or_else(|| kl.bug("chain digits"))).collect()
}

/// What the PTX holds, as read back from its text.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PtxInfo {
    /// The `.version` line's value, e.g. `7.0`.
    pub ptx_version: String,
    /// `.entry` names, in module order.
    pub kernels: Vec<String>,
}

/// Per-kernel resource use reported by `ptxas -v`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct KernelResources {
    pub name: String,
    pub registers: u32,
    pub spill_stores: u64,
    pub spill_loads: u64,
}

/// The compute capabilities eintup compiles for, each with the PTX ISA
/// version (times ten) it is emitted in: the first version that supports
/// it, and at least 7.0 from sm_80 on and 7.8 for sm_89/sm_90 (CUDA 11.0
/// and 11.8). What LLVM 19's NVPTX back end knows from sm_60 on (below it
/// there is no f64 `atomicrmw fadd`); the newest last.
const SM_PTX_ISA: [(u32, u32); 11] = [(60, 50), (61, 50), (62, 50), (70, 60), (72, 61), (75, 63), (80, 70), (86, 71), (87, 74), (89, 78), (90, 78)];

/// The newest compute capability eintup compiles for.
pub const NEWEST_SM: u32 = SM_PTX_ISA[SM_PTX_ISA.len() - 1].0;

/// The GPU target a name such as `sm_80` gives (`--target` of `eintup
/// build` and `etopt`): the one place a target's name is read. The syntax
/// is the bundle format's (`eintup_runtime::manifest::parse_arch`, which
/// reads a manifest's `target.arch`), the range [`SM_PTX_ISA`]'s.
pub fn parse_gpu_target(name: &str) -> Result<GpuTarget, String> {
    match eintup_runtime::manifest::parse_arch(name).map(|(major, minor)| major * 10 + minor) {
        Some(sm) if ptx_isa(sm).is_ok() => Ok(GpuTarget::for_sm(sm)),
        _ => Err(format!("`{name}` is not a GPU target eintup compiles for (expected one of {})", supported_names())),
    }
}

/// `sm_60, sm_61, ..., sm_90`.
fn supported_names() -> String {
    SM_PTX_ISA.iter().map(|(sm, _)| format!("sm_{sm}")).collect::<Vec<_>>().join(", ")
}

/// PTX ISA version (times ten) to target for `sm` ([`SM_PTX_ISA`]).
fn ptx_isa(sm: u32) -> Result<u32, CodegenError> {
    SM_PTX_ISA
        .iter()
        .find(|&&(s, _)| s == sm)
        .map(|&(_, isa)| isa)
        .ok_or_else(|| CodegenError::Invalid(format!("unsupported GPU architecture sm_{sm} (supported: {})", supported_names())))
}

/// The NVPTX machine for `sm_{sm}` emitting PTX ISA `isa` (times ten).
fn machine(sm: u32, isa: u32) -> Result<TargetMachine, CodegenError> {
    Target::initialize_nvptx(&InitializationConfig::default());
    let triple = TargetTriple::create(TRIPLE);
    let target = Target::from_triple(&triple).map_err(|e| CodegenError::Internal(format!("NVPTX target: {}", e.to_string())))?;
    target
        .create_target_machine(&triple, &format!("sm_{sm}"), &format!("+ptx{isa}"), OptimizationLevel::Aggressive, RelocMode::Default, CodeModel::Default)
        .ok_or_else(|| CodegenError::Internal(format!("cannot create an NVPTX target machine for sm_{sm}")))
}

/// The NVPTX module of `m` after `default<O3>`, with its machine.
pub(crate) fn optimized_module<'ctx>(
    ctx: &'ctx Context,
    m: &LoopModule,
    seed: u64,
    sm: u32,
    fp_contract: FpContract,
) -> Result<(Module<'ctx>, TargetMachine), CodegenError> {
    let isa = ptx_isa(sm)?;
    let tm = machine(sm, isa)?;
    let all: Vec<usize> = (0..m.kernels.len()).collect();
    let lowering = NvptxLowering::new(sm);
    let module = lower_and_optimize(ctx, m, &all, seed, &lowering, fp_contract, &tm)?;
    // The ISA only names the PTX's `.version` (and the instructions LLVM
    // may select): emitting under a newer one is the same code.
    let tm = if lowering.vector_atomics.get() && isa < VECTOR_ATOMIC_PTX_ISA { machine(sm, VECTOR_ATOMIC_PTX_ISA)? } else { tm };
    Ok((module, tm))
}

/// PTX for every kernel of `m` on `sm_{sm}`, checked (see `PtxInfo`).
pub fn emit_ptx(m: &LoopModule, seed: u64, sm: u32, fp_contract: FpContract) -> Result<(String, PtxInfo), CodegenError> {
    let ctx = Context::create();
    let (module, tm) = optimized_module(&ctx, m, seed, sm, fp_contract)?;
    let buf = tm
        .write_to_memory_buffer(&module, FileType::Assembly)
        .map_err(|e| CodegenError::Internal(format!("NVPTX code generation failed: {}", e.to_string())))?;
    let ptx = String::from_utf8_lossy(buf.as_slice()).into_owned();
    let parsed = eintup_runtime::ptx::parse(&ptx).map_err(|e| CodegenError::Internal(format!("NVPTX output does not parse as PTX: {e}")))?;
    let info = read_ptx(&parsed)?;
    if parsed.target.as_deref() != Some(format!("sm_{sm}").as_str()) {
        return Err(CodegenError::Internal(format!("PTX has no `.target sm_{sm}` line")));
    }
    let want: Vec<&str> = m.kernels.iter().map(|k| k.name.as_str()).collect();
    if info.kernels != want {
        return Err(CodegenError::Internal(format!("PTX entries {:?} do not match the kernels {:?}", info.kernels, want)));
    }
    Ok((ptx, info))
}

/// The `.version` and the `.entry` names of a parsed PTX module (the
/// runtime's reader, the one the bundle checks and the emulator use).
fn read_ptx(module: &eintup_runtime::ptx::Module) -> Result<PtxInfo, CodegenError> {
    let ptx_version = module.version.clone().ok_or_else(|| CodegenError::Internal("PTX has no `.version` line".into()))?;
    Ok(PtxInfo { ptx_version, kernels: module.entries().map(|f| f.name.clone()).collect() })
}

/// Where `ptxas` is: `$PTXAS`, else the one `scripts/setup --with-ptxas`
/// installs in the repository's `.venv` (Python package
/// `nvidia-cuda-nvcc-cu12`), else the first `ptxas` on `PATH`.
pub fn ptxas_path() -> Option<PathBuf> {
    if let Some(p) = std::env::var_os("PTXAS") {
        let p = PathBuf::from(p);
        if p.is_file() {
            return Some(p);
        }
    }
    // This crate lives in `<repo>/compiler/codegen`.
    let venv_lib = Path::new(env!("CARGO_MANIFEST_DIR")).parent().and_then(Path::parent).map(|repo| repo.join(".venv/lib"));
    if let Some(Ok(dirs)) = venv_lib.map(std::fs::read_dir) {
        let mut dirs: Vec<PathBuf> = dirs.filter_map(|d| d.ok().map(|d| d.path())).collect();
        dirs.sort();
        for d in dirs {
            let is_python = d.file_name().and_then(|n| n.to_str()).is_some_and(|n| n.starts_with("python3"));
            let p = d.join("site-packages/nvidia/cuda_nvcc/bin/ptxas");
            if is_python && p.is_file() {
                return Some(p);
            }
        }
    }
    std::env::split_paths(&std::env::var_os("PATH")?).map(|d| d.join("ptxas")).find(|p| p.is_file())
}

/// Assembles `ptx` for `sm_{sm}` with `ptxas -v --warning-as-error` and
/// returns each kernel's resources; any warning or error is an `Err`
/// carrying ptxas's message.
pub fn ptxas_check(ptx: &str, sm: u32) -> Result<Vec<KernelResources>, CodegenError> {
    let ptxas = ptxas_path().ok_or_else(|| CodegenError::Environment("ptxas not found (set PTXAS or run scripts/setup --with-ptxas)".into()))?;
    // A private directory (removed when `dir` drops, on every path out):
    // no other user can plant or read the files ptxas is handed.
    let dir = eintup::tempdir::private("ptxas").map_err(CodegenError::Environment)?;
    let input = dir.path().join("kernels.ptx");
    let output = dir.path().join("kernels.cubin");
    std::fs::write(&input, ptx).map_err(|e| CodegenError::Environment(format!("cannot write {}: {e}", input.display())))?;
    let result = Command::new(&ptxas).arg("-v").arg("--gpu-name").arg(format!("sm_{sm}")).arg("--warning-as-error").arg("-o").arg(&output).arg(&input).output();
    drop(dir);
    let out = result.map_err(|e| CodegenError::Environment(format!("cannot run {}: {e}", ptxas.display())))?;
    let stderr = String::from_utf8_lossy(&out.stderr);
    if !out.status.success() {
        return Err(CodegenError::Internal(format!("ptxas failed ({}):\n{}", out.status, stderr.trim_end())));
    }
    Ok(parse_ptxas(&stderr))
}

/// Reads the `-v` report: `Compiling entry function 'NAME' for 'sm_XX'`
/// opens a kernel; `N bytes spill stores, M bytes spill loads` and
/// `Used R registers` fill it in.
fn parse_ptxas(stderr: &str) -> Vec<KernelResources> {
    let mut out: Vec<KernelResources> = Vec::new();
    // The number just before `word` in `line`, e.g. 12 in "12 bytes spill stores".
    fn number_before(line: &str, word: &str) -> Option<u64> {
        let head = &line[..line.find(word)?];
        head.split(|c: char| !c.is_ascii_digit()).rfind(|s| !s.is_empty())?.parse().ok()
    }
    for line in stderr.lines() {
        if let Some(rest) = line.split("Compiling entry function '").nth(1) {
            let name = rest.split('\'').next().unwrap_or("").to_string();
            out.push(KernelResources { name, registers: 0, spill_stores: 0, spill_loads: 0 });
            continue;
        }
        let Some(k) = out.last_mut() else { continue };
        if line.contains("spill stores") {
            k.spill_stores = number_before(line, "bytes spill stores").unwrap_or(0);
            k.spill_loads = number_before(line, "bytes spill loads").unwrap_or(0);
        }
        if line.contains("Used ") && line.contains(" registers") {
            k.registers = number_before(line, " registers").unwrap_or(0) as u32;
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ptxas_report_is_parsed() {
        let report = "ptxas info    : 0 bytes gmem\n\
            ptxas info    : Compiling entry function 'k0' for 'sm_80'\n\
            ptxas info    : Function properties for k0\n    \
            8 bytes stack frame, 4 bytes spill stores, 12 bytes spill loads\n\
            ptxas info    : Used 18 registers, 368 bytes cmem[0]\n\
            ptxas info    : Compiling entry function 'k1' for 'sm_80'\n\
            ptxas info    : Function properties for k1\n    \
            0 bytes stack frame, 0 bytes spill stores, 0 bytes spill loads\n\
            ptxas info    : Used 6 registers, 360 bytes cmem[0]\n";
        let r = parse_ptxas(report);
        assert_eq!(
            r,
            vec![
                KernelResources { name: "k0".into(), registers: 18, spill_stores: 4, spill_loads: 12 },
                KernelResources { name: "k1".into(), registers: 6, spill_stores: 0, spill_loads: 0 },
            ]
        );
    }

    #[test]
    fn ptx_isa_versions_follow_the_architecture() {
        assert_eq!(ptx_isa(80).ok(), Some(70));
        assert_eq!(ptx_isa(90).ok(), Some(78));
        assert!(ptx_isa(50).is_err());
        assert!(ptx_isa(100).is_err());
    }

    #[test]
    fn ptx_header_and_entries_are_read() {
        let ptx = "//\n.version 7.8\n.target sm_90\n.address_size 64\n\n\t// .globl\tk0\n.visible .entry k0(\n\t.param .u64 k0_param_0\n)\n{\n}\n.visible .entry k1()\n{\n}\n";
        let read = |text: &str| read_ptx(&eintup_runtime::ptx::parse(text).unwrap());
        let info = read(ptx).unwrap();
        assert_eq!(info.ptx_version, "7.8");
        assert_eq!(info.kernels, vec!["k0".to_string(), "k1".to_string()]);
        assert!(read(".target sm_80\n").is_err());
    }
}
