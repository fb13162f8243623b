//! `lower-to-llvm`: the loop dialect as LLVM IR, one lowering for both
//! targets. This file holds everything the targets share: every scalar
//! rule (index arithmetic, values, RANDOM, writes), loops, guards, index
//! loads and the kernel function's parameters. What differs is behind
//! [`TargetLowering`], implemented once per target beside the rest of it:
//!
//! - `host::HostLowering`: `void @et.NAME(ptr %args, i64, i64)` calling an
//!   `alwaysinline` body with one `noalias` pointer per buffer of
//!   `kernel_params`; every loop sequential, the root loop of a splittable
//!   kernel clamped to `[begin, end)`, scratch as `alloca`s, `sync` nothing.
//! - `nvptx::NvptxLowering`: `ptx_kernel void @NAME(ptr addrspace(1)
//!   noalias ..)`; the kernel's parallel chain (`geometry::GridChain`)
//!   becomes one grid-stride loop over the global thread id, or over
//!   blocks when the chain holds a `thread` nest (`block-tiles`): then
//!   the nest's points are the threads of a block (`tid.x`), `spread`
//!   loops stride by the block size and `sync` is `bar.sync 0`; shared
//!   buffers are `addrspace(3)` globals.
//!
//! Numerics mirror the loop dialect's documented semantics exactly: no
//! instruction carries fast-math flags or `nsw`/`nuw` on user arithmetic,
//! and every division is total (divisor 0 gives 0) through selects rather
//! than undefined behaviour. docs/codegen.md describes the result.

use super::sums::RegisterSums;
use super::{kernel_params, CodegenError, FpContract};
use eintup::ir::loops::poly::Extents;
use eintup::ir::loops::{BinOp, BufId, Compute, Cond, CopyGroup, DType, For, IBin, IExpr, Kernel, LoopKind, LoopModule, Node, VOp, Value, VarId, WriteKind};
use eintup::random::{fnv1a64, GOLDEN, SPLITMIX_ROUNDS};
use inkwell::attributes::{Attribute, AttributeLoc};
use inkwell::builder::Builder;
use inkwell::context::Context;
use inkwell::intrinsics::Intrinsic;
use inkwell::llvm_sys;
use inkwell::module::Module;
use inkwell::targets::TargetMachine;
use inkwell::types::{ArrayType, BasicMetadataTypeEnum, BasicType, BasicTypeEnum, IntType};
use inkwell::values::{AsValueRef, BasicValue, BasicValueEnum, FastMathFlags, FloatValue, FunctionValue, IntValue, PointerValue};
use inkwell::{AddressSpace, AtomicOrdering, AtomicRMWBinOp, FloatPredicate, IntPredicate};

pub use eintup::ir::loops::geometry::{block_size, split_range, thread_count, thread_count_expr};

/// Everything the two targets do differently, as hooks the shared
/// lowering calls (`host::HostLowering`, `nvptx::NvptxLowering`). The
/// hooks are called in the order listed, each at a fixed point of the
/// construction, so a target decides *what* is built there and never the
/// order of the IR around it.
pub(crate) trait TargetLowering {
    /// The symbol of the function that holds kernel `k`'s loops.
    fn body_symbol(&self, k: &Kernel) -> String;
    /// The address space the buffer pointer parameters point into.
    fn buffer_address_space(&self) -> AddressSpace;
    /// Parameters of the body function after the buffer pointers.
    fn extra_params<'ctx>(&self, ctx: &'ctx Context) -> Vec<BasicMetadataTypeEnum<'ctx>>;
    /// Calling convention, linkage and attributes of the body function
    /// beyond `noalias` parameters and `nounwind`.
    fn declare_body<'ctx>(&self, ctx: &'ctx Context, m: &LoopModule, k: &Kernel, func: FunctionValue<'ctx>);
    /// The storage of scratch buffer `buf` (of array type `ty`), made in
    /// the body's entry block.
    fn scratch<'ctx>(&self, kl: &KernelLowering<'_, 'ctx>, buf: BufId, ty: ArrayType<'ctx>) -> Result<PointerValue<'ctx>, CodegenError>;
    /// `[begin, end)`, the body's parameters that clamp the root loop of a
    /// splittable kernel, if the target splits it (`split_range`).
    fn split_bounds<'ctx>(&self, k: &Kernel, func: FunctionValue<'ctx>, n_buffers: u32) -> Option<(IntValue<'ctx>, IntValue<'ctx>)>;
    /// Whether kernel `k`'s index arithmetic runs in `i32` rather than
    /// `i64` (`Kernel::index32_limits`; only where `i64` costs more).
    fn narrow_index(&self, m: &LoopModule, k: &Kernel) -> bool;
    /// Whether float sums into a cell also carry `reassoc` (see `add`).
    fn reassoc_sums(&self, k: &Kernel, fp_contract: FpContract) -> bool;
    /// Lowers the kernel body into the body function: where the kernel's
    /// parallel loops go (sequential loops, or the grid).
    fn kernel_body(&self, kl: &mut KernelLowering<'_, '_>) -> Result<(), CodegenError>;
    /// After the body function is complete: the entry point, if it is not
    /// the body function itself.
    fn entry(&self, kl: &KernelLowering<'_, '_>) -> Result<(), CodegenError>;
    /// `sync`: a barrier among a block's threads.
    fn sync(&self, kl: &mut KernelLowering<'_, '_>) -> Result<(), CodegenError>;
    /// The write a `Compute` of kind `kind` becomes.
    fn write_kind(&self, kind: WriteKind) -> WriteKind;
    /// A `copy_async` of `bytes` (4, 8 or 16) from global `src` to
    /// shared `dst` (docs/async-copies.md); an error where the target has
    /// no asynchronous copies.
    fn copy_async<'ctx>(&self, kl: &mut KernelLowering<'_, 'ctx>, dst: PointerValue<'ctx>, src: PointerValue<'ctx>, bytes: u32) -> Result<(), CodegenError>;
    /// The most elements of `dt` one atomic add may cover (a vector
    /// reduction); 1 where the target has none.
    fn vector_atomic_lanes(&self, dt: DType) -> i64;
    /// Atomic adds of `vals` to the consecutive elements from `p` (aligned
    /// to their bytes) as one instruction; an error where the target has
    /// no such instruction for their number (`vector_atomic_lanes`).
    fn vector_atomic_add<'ctx>(&self, kl: &mut KernelLowering<'_, 'ctx>, p: PointerValue<'ctx>, vals: &[BasicValueEnum<'ctx>]) -> Result<(), CodegenError>;
    /// `commit_copies` / `wait_copies N`.
    fn copy_group(&self, kl: &mut KernelLowering<'_, '_>, g: CopyGroup) -> Result<(), CodegenError>;
    /// Function attributes for target machine `tm`, set on every defined
    /// function before the optimisation pipeline.
    fn annotate<'ctx>(&self, ctx: &'ctx Context, module: &Module<'ctx>, tm: &TargetMachine);
    /// Whether a dynamic module's dim symbols can be kernel parameters
    /// (`i64`, after the buffers' pointers): the GPU's bundles are built
    /// once for many shapes; the host JIT compiles at known dims.
    fn dims_as_params(&self) -> bool;
    /// Bytes (a power of two) that every buffer's first element is
    /// aligned to, parameters and scratch alike, when more than its
    /// element: loads then carry the alignment their offsets prove
    /// (`load_align`), which lets LLVM merge a thread's consecutive loads
    /// into one vector load. `None`: each access keeps its element's.
    fn base_align(&self) -> Option<u64>;
    /// Whether a reduction's accumulated cells are kept in registers across
    /// it by the code generator ([`crate::sums`]).
    fn register_sums(&self) -> bool;
}

/// Kernels beyond this many in one module compile cheaply when they are
/// small (`cheap_to_compile`): a program of a few statements keeps O3
/// everywhere.
pub const MANY_KERNELS: usize = 64;
/// At most this many iterations make a kernel small.
pub const SMALL_KERNEL_ITERATIONS: u128 = 1 << 12;

/// Whether kernel `k` skips LLVM's optimisation pipeline (`optnone`): only
/// in a module of more than [`MANY_KERNELS`] kernels, and only when it runs
/// at most [`SMALL_KERNEL_ITERATIONS`] iterations. A long chain of small
/// statements compiled in 7.6 s for 1,000 statements, nearly all of it O3
/// (issue #26 item 6), and a GPU bundle's NVPTX code generation was as
/// slow; unoptimised code costs such a kernel microseconds on either.
pub(crate) fn cheap_to_compile(m: &LoopModule, k: &Kernel) -> bool {
    m.kernels.len() > MANY_KERNELS && k.iteration_count().is_some_and(|n| n <= SMALL_KERNEL_ITERATIONS)
}

/// Leaves `func` out of LLVM's optimisation pipeline (`optnone`, which
/// needs `noinline`): a kernel that is [`cheap_to_compile`].
pub(crate) fn skip_optimisation(ctx: &Context, func: FunctionValue<'_>) {
    for attr in ["optnone", "noinline"] {
        func.add_attribute(AttributeLoc::Function, ctx.create_enum_attribute(Attribute::get_named_enum_kind_id(attr), 0));
    }
}

/// Builds the (unoptimised) LLVM module of the kernels `which` of `m` (by
/// index, in that order; every kernel's name is checked). The caller sets
/// triple and data layout and runs the optimisation pipeline. A kernel's
/// code depends on it and `m` alone, so the host may compile parts of a
/// module in separate LLVM modules (`host::compile_groups`).
pub(crate) fn lower_module<'ctx>(
    ctx: &'ctx Context,
    m: &LoopModule,
    which: &[usize],
    seed: u64,
    target: &dyn TargetLowering,
    fp_contract: FpContract,
) -> Result<Module<'ctx>, CodegenError> {
    if m.is_dynamic() && !target.dims_as_params() {
        return Err(CodegenError(format!("the module has {} dim symbols: host code needs static dims (bind them first)", m.dims.len())));
    }
    let module = ctx.create_module("eintup");
    let mut seen = std::collections::HashSet::new();
    for k in &m.kernels {
        check_kernel_name(&k.name)?;
        if !seen.insert(k.name.as_str()) {
            return Err(CodegenError(format!("kernel name `{}` is used twice", k.name)));
        }
    }
    for &ki in which {
        let k = m.kernels.get(ki).ok_or_else(|| CodegenError(format!("internal error: no kernel {ki}")))?;
        KernelLowering::new(ctx, &module, m, k, seed, target, fp_contract)?.lower()?;
    }
    module.verify().map_err(|e| CodegenError(format!("internal error: invalid LLVM IR: {}", e.to_string())))?;
    Ok(module)
}

/// Kernel names become PTX entry points, so they must be PTX identifiers
/// (LLVM would silently rename anything else, and the runtime would not
/// find the entry).
fn check_kernel_name(name: &str) -> Result<(), CodegenError> {
    let mut chars = name.chars();
    let ok = matches!(chars.next(), Some(c) if c.is_ascii_alphabetic() || c == '_') && chars.all(|c| c.is_ascii_alphanumeric() || c == '_');
    if ok {
        Ok(())
    } else {
        Err(CodegenError(format!("kernel name `{name}` is not an identifier ([A-Za-z_][A-Za-z0-9_]*)")))
    }
}

/// One kernel being lowered: the builder, the kernel's function and
/// buffers, and the variables in scope. The targets' hooks read and build
/// through it.
pub(crate) struct KernelLowering<'a, 'ctx> {
    pub(crate) ctx: &'ctx Context,
    pub(crate) module: &'a Module<'ctx>,
    pub(crate) b: Builder<'ctx>,
    pub(crate) m: &'a LoopModule,
    pub(crate) k: &'a Kernel,
    seed: u64,
    target: &'a dyn TargetLowering,
    /// Whether a float multiply may fuse with the add that uses it.
    fp_contract: FpContract,
    /// The function holding the kernel's loops (`body_symbol`).
    pub(crate) func: FunctionValue<'ctx>,
    i1: IntType<'ctx>,
    pub(crate) i32: IntType<'ctx>,
    pub(crate) i64: IntType<'ctx>,
    /// The type of index values and loop variables: `i32` when
    /// `narrow_index`, else `i64`.
    pub(crate) ix: IntType<'ctx>,
    /// Which variables `unroll` loops bind (`Kernel::unroll_vars`).
    unrolled: Vec<bool>,
    /// Pointer of each buffer the kernel uses (`None` for the others).
    bufs: Vec<Option<PointerValue<'ctx>>>,
    /// Current value (`ix`) of each variable in scope.
    env: Vec<Option<IntValue<'ctx>>>,
    /// Each dim symbol the kernel uses (`Kernel::dims_used`): its `i64`
    /// parameter.
    dims: Vec<Option<IntValue<'ctx>>>,
    /// `[begin, end)` that clamps the root loop of a splittable kernel
    /// (`split_bounds`; host only); taken by the first loop lowered.
    split: Option<(IntValue<'ctx>, IntValue<'ctx>)>,
    /// Inside a `thread` nest (set by the grid, NVPTX only): the thread's
    /// id in its block and the block size, by which `spread` loops stride.
    pub(crate) block: Option<(IntValue<'ctx>, i64)>,
    /// Sums into a cell may be reassociated (`reassoc_sums`; see `add`).
    reassoc_sums: bool,
    /// The module's buffer extents, known non-negative (`iexpr`'s
    /// unsigned division).
    extents: Extents,
    /// Inside a reduction whose cells are in registers: the cells, and
    /// each one's address and stack slot.
    sums: Option<(RegisterSums, Vec<(PointerValue<'ctx>, PointerValue<'ctx>)>)>,
}

impl<'a, 'ctx> KernelLowering<'a, 'ctx> {
    fn new(
        ctx: &'ctx Context,
        module: &'a Module<'ctx>,
        m: &'a LoopModule,
        k: &'a Kernel,
        seed: u64,
        target: &'a dyn TargetLowering,
        fp_contract: FpContract,
    ) -> Result<Self, CodegenError> {
        let params = kernel_params(m, k);
        if let Some(&bad) = params.iter().find(|&&b| b >= m.buffers.len()) {
            return Err(CodegenError(format!("kernel `{}` uses buffer {bad}, the module has {}", k.name, m.buffers.len())));
        }
        let nounwind = ctx.create_enum_attribute(Attribute::get_named_enum_kind_id("nounwind"), 0);
        let noalias = ctx.create_enum_attribute(Attribute::get_named_enum_kind_id("noalias"), 0);
        // Buffers are distinct allocations, so no two parameters ever
        // overlap: `noalias` is true. It lets LLVM keep an accumulated cell
        // in a register across a reduction, vectorise without runtime
        // overlap checks, and (NVPTX) use the read-only data path.
        let ptr = ctx.ptr_type(target.buffer_address_space());
        let kdims = k.dims_used();
        if let Some(&bad) = kdims.iter().find(|&&d| d >= m.dims.len()) {
            return Err(CodegenError(format!("kernel `{}` uses dim symbol {bad}, the module has {}", k.name, m.dims.len())));
        }
        let mut tys: Vec<_> = params.iter().map(|_| ptr.into()).collect();
        tys.extend(kdims.iter().map(|_| BasicMetadataTypeEnum::from(ctx.i64_type())));
        tys.extend(target.extra_params(ctx));
        let func = module.add_function(&target.body_symbol(k), ctx.void_type().fn_type(&tys, false), None);
        for i in 0..params.len() {
            func.add_attribute(AttributeLoc::Param(i as u32), noalias);
        }
        target.declare_body(ctx, m, k, func);
        func.add_attribute(AttributeLoc::Function, nounwind);
        let narrow = target.narrow_index(m, k);
        // Visible in `--emit llvm`: which width the kernel's indices use.
        func.add_attribute(AttributeLoc::Function, ctx.create_string_attribute("eintup-index", if narrow { "i32" } else { "i64" }));
        let b = ctx.create_builder();
        let entry = ctx.append_basic_block(func, "entry");
        b.position_at_end(entry);
        let mut bufs = vec![None; m.buffers.len()];
        for (i, &buf) in params.iter().enumerate() {
            let p = func.get_nth_param(i as u32).map(|p| p.into_pointer_value());
            bufs[buf] = Some(p.ok_or_else(|| CodegenError("internal error: missing kernel parameter".into()))?);
        }
        let mut dims = vec![None; m.dims.len()];
        for (j, &d) in kdims.iter().enumerate() {
            let p = func.get_nth_param((params.len() + j) as u32).map(|p| p.into_int_value());
            dims[d] = Some(p.ok_or_else(|| CodegenError("internal error: missing dim parameter".into()))?);
        }
        let mut kl = KernelLowering {
            ctx,
            module,
            b,
            m,
            k,
            seed,
            target,
            fp_contract,
            func,
            i1: ctx.bool_type(),
            i32: ctx.i32_type(),
            i64: ctx.i64_type(),
            ix: if narrow { ctx.i32_type() } else { ctx.i64_type() },
            unrolled: k.unroll_vars(),
            bufs,
            env: vec![None; k.vars.len()],
            dims,
            split: target.split_bounds(k, func, (params.len() + kdims.len()) as u32),
            block: None,
            reassoc_sums: target.reassoc_sums(k, fp_contract),
            extents: Extents::of(m),
            sums: None,
        };
        // Scratch: per block (shared) or per thread (local).
        for buf in k.scratch_buffers(m) {
            let bf = &m.buffers[buf];
            let n = bf.len().and_then(|n| u32::try_from(n).ok()).ok_or(()).map_err(|_| CodegenError(format!("scratch buffer `{}` is too large", bf.name)))?;
            let ty = basic_type(ctx, bf.dtype).array_type(n);
            kl.bufs[buf] = Some(target.scratch(&kl, buf, ty)?);
        }
        Ok(kl)
    }

    fn lower(mut self) -> Result<(), CodegenError> {
        self.target.kernel_body(&mut self)?;
        self.b.build_return(None)?;
        self.target.entry(&self)
    }

    /// Scratch buffer `buf` as a 16-byte aligned `alloca` of the kernel.
    pub(crate) fn alloca_scratch(&self, buf: BufId, ty: ArrayType<'ctx>) -> Result<PointerValue<'ctx>, CodegenError> {
        let a = self.b.build_alloca(ty, &self.m.buffers[buf].name)?;
        if let Some(i) = a.as_instruction() {
            let _ = i.set_alignment(16);
        }
        Ok(a)
    }

    /// The buffer `buf` of the module.
    pub(crate) fn buffer(&self, buf: BufId) -> &'a eintup::ir::loops::Buffer {
        &self.m.buffers[buf]
    }

    pub(crate) fn err(&self, msg: impl std::fmt::Display) -> CodegenError {
        CodegenError(format!("kernel `{}`: {msg}", self.k.name))
    }

    pub(crate) fn block(&self, name: &str) -> inkwell::basic_block::BasicBlock<'ctx> {
        self.ctx.append_basic_block(self.func, name)
    }

    pub(crate) fn c64(&self, v: i64) -> IntValue<'ctx> {
        self.i64.const_int(v as u64, true)
    }

    /// An index constant (of type `ix`; it fits when `ix` is `i32`).
    pub(crate) fn cix(&self, v: i64) -> IntValue<'ctx> {
        self.ix.const_int(v as u64, true)
    }

    pub(crate) fn narrow(&self) -> bool {
        self.ix == self.i32
    }

    /// An `i32` or `i64` integer as an index value (type `ix`), sign
    /// extended or truncated (exact for the values it is used on).
    pub(crate) fn to_index(&self, v: IntValue<'ctx>) -> Result<IntValue<'ctx>, CodegenError> {
        let w = v.get_type().get_bit_width();
        Ok(match w.cmp(&self.ix.get_bit_width()) {
            std::cmp::Ordering::Equal => v,
            std::cmp::Ordering::Less => self.b.build_int_s_extend(v, self.ix, "")?,
            std::cmp::Ordering::Greater => self.b.build_int_truncate(v, self.ix, "")?,
        })
    }

    /// An index value as `i64` (addresses, RANDOM's counter).
    fn to_i64(&self, v: IntValue<'ctx>) -> Result<IntValue<'ctx>, CodegenError> {
        Ok(if self.narrow() { self.b.build_int_s_extend(v, self.i64, "")? } else { v })
    }

    pub(crate) fn bind(&mut self, var: VarId, v: IntValue<'ctx>) -> Result<(), CodegenError> {
        match self.env.get_mut(var) {
            Some(slot) => {
                *slot = Some(v);
                Ok(())
            }
            None => Err(self.err(format_args!("variable {var} is not declared ({} vars)", self.k.vars.len()))),
        }
    }

    // ---- structure ------------------------------------------------------

    /// Lowers a node list; variables bound in it go out of scope after it.
    pub(crate) fn nodes(&mut self, nodes: &[Node]) -> Result<(), CodegenError> {
        let saved = self.env.clone();
        for n in nodes {
            self.node(n)?;
        }
        self.env = saved;
        Ok(())
    }

    fn node(&mut self, n: &Node) -> Result<(), CodegenError> {
        match n {
            // A register tile: the body once per iteration, the variable a
            // constant, so that LLVM sees every cell of the tile at once.
            Node::For(l) if l.kind == LoopKind::Unroll && self.split.is_none() => {
                let (Some(lo), Some(hi)) = (l.lo.as_const(), l.hi.as_const()) else {
                    return Err(self.err("internal error: an `unroll` loop without constant bounds"));
                };
                if self.copy_run(l, lo, hi)? || self.atomic_run(l, lo, hi)? {
                    return Ok(());
                }
                for i in lo..hi {
                    let saved = self.env.clone();
                    self.bind(l.var, self.cix(i))?;
                    self.nodes(&l.body)?;
                    self.env = saved;
                }
            }
            Node::For(l) => {
                let mut lo = self.iexpr(&l.lo)?;
                let mut hi = self.iexpr(&l.hi)?;
                if let Some((begin, end)) = self.split.take() {
                    lo = self.ibin(IBin::Max, lo, begin)?;
                    hi = self.ibin(IBin::Min, hi, end)?;
                }
                // A `spread` loop on the GPU: iteration e on thread
                // e mod size, the block's threads side by side.
                let mut step = 1;
                if let (LoopKind::Spread, Some((tid, size))) = (l.kind, self.block) {
                    lo = self.b.build_int_add(lo, tid, "")?;
                    step = size;
                }
                // The counter is i64 even in an i32 kernel (the variable
                // is its truncation, free): LLVM's LSR turns an i32 counter
                // into an i64 offset compared through a truncation, from
                // which ptxas derives no trip count and so no longer
                // unrolls the loop (a 3x3 convolution: 40 -> 48 registers).
                // In a dynamic i32 kernel a step-1 loop with symbolic bounds
                // counts in i32 instead (v < hi <= 2^31 - 1, so `v + 1`
                // cannot wrap): with the truncation LLVM cannot prove the
                // variable fits, and every address became a 64-bit shift
                // pair (reduce_sum 512x1024: 1.9x the instructions of i64).
                let ity = if self.narrow() && step == 1 && (l.lo.is_symbolic() || l.hi.is_symbolic()) { self.ix } else { self.i64 };
                if ity == self.i64 {
                    lo = self.to_i64(lo)?;
                    hi = self.to_i64(hi)?;
                }
                let sums = if self.target.register_sums() && self.sums.is_none() { RegisterSums::of(l) } else { None };
                let sums_end = match sums {
                    Some(sums) => Some(self.load_sums(sums, lo, hi)?),
                    None => None,
                };
                let pre = self.b.get_insert_block().ok_or_else(|| self.err("no insert block"))?;
                let header = self.block("for.header");
                let body = self.block("for.body");
                let exit = self.block("for.exit");
                self.b.build_unconditional_branch(header)?;
                self.b.position_at_end(header);
                let name = self.k.vars.get(l.var).map(|v| v.name.as_str()).unwrap_or("v");
                let phi = self.b.build_phi(ity, name)?;
                phi.add_incoming(&[(&lo, pre)]);
                let v = phi.as_basic_value().into_int_value();
                let more = self.b.build_int_compare(IntPredicate::SLT, v, hi, "")?;
                self.b.build_conditional_branch(more, body, exit)?;
                self.b.position_at_end(body);
                let saved = self.env.clone();
                let vi = self.to_index(v)?;
                self.bind(l.var, vi)?;
                self.nodes(&l.body)?;
                self.env = saved;
                // v < hi <= i64::MAX, so the increment cannot overflow
                // (a spread loop's step is at most 1024 and its bounds
                // are far from the top): `nsw` gives LLVM exact trip counts.
                let next = self.b.build_int_nsw_add(v, ity.const_int(step as u64, true), "")?;
                let latch = self.b.get_insert_block().ok_or_else(|| self.err("no insert block"))?;
                phi.add_incoming(&[(&next, latch)]);
                let br = self.b.build_unconditional_branch(header)?;
                // In i32 the block's copy loops would be runtime-unrolled
                // (4096^3 matmul: 128 registers; 96 without).
                if l.kind == LoopKind::Spread && self.narrow() {
                    self.loop_hint(br, "llvm.loop.unroll.disable");
                }
                // A block step's reduction over shared tiles: its loop
                // control and address arithmetic cost as much issue as
                // its shared loads (4096^3 matmul: 5 of 9 instructions per
                // 64 FMAs), and ptxas keeps it rolled. Unrolled whole,
                // every shared offset is an immediate. LLVM unrolls it
                // after simplifying the body once (emitting the copies
                // here took twice the compile time for the same PTX).
                if self.m.is_shared_step(l) {
                    self.loop_hint(br, "llvm.loop.unroll.full");
                }
                self.b.position_at_end(exit);
                if let Some(end) = sums_end {
                    self.store_sums(end)?;
                }
            }
            Node::Guard(g) => {
                let c = self.conds(&g.conds)?;
                let body = self.block("guard.body");
                let cont = self.block("guard.end");
                self.b.build_conditional_branch(c, body, cont)?;
                self.b.position_at_end(body);
                self.nodes(&g.body)?;
                self.b.build_unconditional_branch(cont)?;
                self.b.position_at_end(cont);
            }
            Node::LoadIndex { var, buf, offset } => {
                let v = self.load_index(*buf, offset)?;
                self.bind(*var, v)?;
            }
            Node::Compute(c) => self.compute(c)?,
            Node::Sync => {
                let target = self.target;
                target.sync(self)?;
            }
            Node::Copies(g) => {
                let target = self.target;
                target.copy_group(self, *g)?;
            }
        }
        Ok(())
    }

    /// Before a reduction from `lo` to `hi` whose cells are `sums`: where
    /// it runs at least once (a cell's address need not be in bounds
    /// otherwise), each cell is loaded into a stack slot in the entry
    /// block. Returns the block after the loop's store-back.
    fn load_sums(&mut self, sums: RegisterSums, lo: IntValue<'ctx>, hi: IntValue<'ctx>) -> Result<inkwell::basic_block::BasicBlock<'ctx>, CodegenError> {
        let load = self.block("sums.load");
        let end = self.block("sums.end");
        let runs = self.b.build_int_compare(IntPredicate::SLT, lo, hi, "")?;
        self.b.build_conditional_branch(runs, load, end)?;
        self.b.position_at_end(load);
        let entry = self.func.get_first_basic_block().ok_or_else(|| self.err("no entry block"))?;
        let slots = self.ctx.create_builder();
        let mut cells = Vec::with_capacity(sums.cells.len());
        for (buf, rest, k) in &sums.cells {
            let (p, dt) = self.elem_ptr(*buf, &IExpr::add(rest.clone(), IExpr::c(*k)))?;
            match entry.get_first_instruction() {
                Some(i) => slots.position_before(&i),
                None => slots.position_at_end(entry),
            }
            let slot = slots.build_alloca(self.ty(dt), "sum")?;
            let v = self.b.build_load(self.ty(dt), p, "")?;
            self.b.build_store(slot, v)?;
            cells.push((p, slot));
        }
        self.sums = Some((sums, cells));
        Ok(end)
    }

    /// After the reduction: each cell's sum back to memory, then `end`.
    fn store_sums(&mut self, end: inkwell::basic_block::BasicBlock<'ctx>) -> Result<(), CodegenError> {
        let Some((sums, cells)) = self.sums.take() else { return Err(self.err("internal error: no register sums to store")) };
        for ((buf, _, _), (p, slot)) in sums.cells.iter().zip(&cells) {
            let ty = self.ty(self.m.buffers[*buf].dtype);
            let v = self.b.build_load(ty, *slot, "")?;
            self.b.build_store(*p, v)?;
        }
        self.b.build_unconditional_branch(end)?;
        self.b.position_at_end(end);
        Ok(())
    }

    /// The stack slot `c` accumulates into, when it adds into a register
    /// sum.
    fn sum_slot(&self, c: &Compute) -> Result<Option<PointerValue<'ctx>>, CodegenError> {
        let Some((sums, cells)) = &self.sums else { return Ok(None) };
        if !sums.holds(c) {
            return Ok(None);
        }
        let value = |v: VarId| self.env.get(v).copied().flatten().and_then(|x| x.get_sign_extended_constant());
        let (_, k) = sums.split(&c.write.offset, &value).ok_or_else(|| self.err("internal error: a register sum's cell is not constant"))?;
        let i =
            sums.cells.iter().position(|cell| cell.0 == c.write.buf && cell.2 == k).ok_or_else(|| self.err("internal error: no register sum for a cell"))?;
        Ok(Some(cells[i].1))
    }

    /// A vector access's first lane: binds `var` to `lo` and, where every
    /// offset of `offsets` (of its dtype) is provably aligned to `bytes`
    /// there (`load_align`), returns the environment to restore once the
    /// vector is built; otherwise restores it and returns `None`. What
    /// `copy_run` and `atomic_run` both need before forming one wide
    /// access from their lanes.
    fn first_lane_aligned(
        &mut self,
        var: VarId,
        lo: i64,
        offsets: &[(&IExpr, DType)],
        bytes: i64,
    ) -> Result<Option<Vec<Option<IntValue<'ctx>>>>, CodegenError> {
        let saved = self.env.clone();
        self.bind(var, self.cix(lo))?;
        if offsets.iter().all(|&(off, dt)| self.load_align(off, dt).is_some_and(|a| i64::from(a) >= bytes)) {
            return Ok(Some(saved));
        }
        self.env = saved;
        Ok(None)
    }

    /// An `unroll` loop whose body is one `copy_async` contiguous in both
    /// offsets, of 8 or 16 bytes aligned to its size in both: one wide
    /// `cp.async` for the whole run (LLVM does not merge the intrinsics as
    /// it merges loads). `false`: not such a run, nothing built.
    fn copy_run(&mut self, l: &For, lo: i64, hi: i64) -> Result<bool, CodegenError> {
        let [Node::Compute(c)] = l.body.as_slice() else { return Ok(false) };
        let (w, [Value { op: VOp::Load { buf: src, offset: src_off }, dtype }]) = (&c.write, c.values.as_slice()) else { return Ok(false) };
        let bytes = (hi - lo).saturating_mul(dtype.size() as i64);
        if w.kind != WriteKind::CopyAsync || !matches!(bytes, 8 | 16) || !w.offset.unit_stride_in(l.var) || !src_off.unit_stride_in(l.var) {
            return Ok(false);
        }
        let Some(saved) = self.first_lane_aligned(l.var, lo, &[(&w.offset, *dtype), (src_off, *dtype)], bytes)? else { return Ok(false) };
        let (d, _) = self.elem_ptr(w.buf, &w.offset)?;
        let (s, _) = self.elem_ptr(*src, src_off)?;
        let target = self.target;
        target.copy_async(self, d, s, bytes as u32)?;
        self.env = saved;
        Ok(true)
    }

    /// An `unroll` loop of `W` lanes whose one compute atomically adds
    /// to consecutive cells (a scatter's lanes, `widen-threads`): one
    /// vector atomic add of the `W` values where the target has one for
    /// the dtype and the first lane's offset proves the vector's
    /// alignment (as `copy_run`); `false` leaves the lanes to the scalar
    /// path. No LLVM pass merges atomics, so the vector is formed here.
    fn atomic_run(&mut self, l: &For, lo: i64, hi: i64) -> Result<bool, CodegenError> {
        let [Node::Compute(c)] = l.body.as_slice() else { return Ok(false) };
        let w = &c.write;
        let dt = self.m.buffers[w.buf].dtype;
        let lanes = hi - lo;
        if self.target.write_kind(w.kind) != WriteKind::AtomicAccumulate
            || lanes < 2
            || lanes > self.target.vector_atomic_lanes(dt)
            || !w.offset.unit_stride_in(l.var)
        {
            return Ok(false);
        }
        let Some(saved) = self.first_lane_aligned(l.var, lo, &[(&w.offset, dt)], lanes * dt.size() as i64)? else { return Ok(false) };
        let (p, _) = self.elem_ptr(w.buf, &w.offset)?;
        let mut vals = Vec::with_capacity(lanes as usize);
        for i in lo..hi {
            self.bind(l.var, self.cix(i))?;
            let (v, vdt) = self.written_value(c)?;
            if vdt != dt {
                self.env = saved;
                return Err(self.err(format_args!("adds a {} value into {} buffer `{}`", vdt.name(), dt.name(), self.m.buffers[w.buf].name)));
            }
            vals.push(v);
        }
        self.env = saved;
        let target = self.target;
        target.vector_atomic_add(self, p, &vals)?;
        Ok(true)
    }

    /// Gives the loop whose back edge is `br` the hint `name`
    /// (`llvm.loop.unroll.disable`, `llvm.loop.unroll.full`).
    fn loop_hint(&self, br: inkwell::values::InstructionValue<'ctx>, name: &str) {
        use llvm_sys::core::*;
        // SAFETY: every reference is created here in the kernel's live
        // context; the temporary node is replaced (and freed) by the
        // self-referential loop ID, as LLVM requires of `llvm.loop`.
        unsafe {
            let ctx = self.ctx.raw();
            let s = LLVMMDStringInContext2(ctx, name.as_ptr().cast(), name.len());
            let mut hint = [s];
            let hint = LLVMMDNodeInContext2(ctx, hint.as_mut_ptr(), 1);
            let mut tmp_ops: [llvm_sys::prelude::LLVMMetadataRef; 0] = [];
            let tmp = llvm_sys::debuginfo::LLVMTemporaryMDNode(ctx, tmp_ops.as_mut_ptr(), 0);
            let mut ops = [tmp, hint];
            let id = LLVMMDNodeInContext2(ctx, ops.as_mut_ptr(), 2);
            llvm_sys::debuginfo::LLVMMetadataReplaceAllUsesWith(tmp, id);
            let kind = LLVMGetMDKindIDInContext(ctx, "llvm.loop".as_ptr().cast(), 9);
            LLVMSetMetadata(br.as_value_ref(), kind, LLVMMetadataAsValue(ctx, id));
        }
    }

    /// Conjunction of guard conditions (all are pure and total, so they
    /// are evaluated without short-circuit).
    pub(crate) fn conds(&mut self, conds: &[Cond]) -> Result<IntValue<'ctx>, CodegenError> {
        let mut all = self.i1.const_int(1, false);
        for c in conds {
            let holds = match c {
                Cond::InRange { e, lo, hi } => {
                    let x = self.iexpr(e)?;
                    let lo = self.iexpr(lo)?;
                    let hi = self.iexpr(hi)?;
                    let a = self.b.build_int_compare(IntPredicate::SLE, lo, x, "")?;
                    let z = self.b.build_int_compare(IntPredicate::SLT, x, hi, "")?;
                    self.b.build_and(a, z, "")?
                }
                Cond::NonZero(e) => {
                    let x = self.iexpr(e)?;
                    self.b.build_int_compare(IntPredicate::NE, x, self.cix(0), "")?
                }
            };
            all = self.b.build_and(all, holds, "")?;
        }
        Ok(all)
    }

    /// Pointer to element `offset` of `buf`, and the buffer's dtype.
    fn elem_ptr(&mut self, buf: BufId, offset: &IExpr) -> Result<(PointerValue<'ctx>, DType), CodegenError> {
        let base = self.bufs.get(buf).copied().flatten().ok_or_else(|| self.err(format_args!("buffer {buf} is unknown")))?;
        let dt = self.m.buffers[buf].dtype;
        let off = self.offset(offset)?;
        // In bounds wherever it runs (loop dialect contract), so `inbounds`
        // is true and lets LLVM reason about the address.
        let p = unsafe { self.b.build_in_bounds_gep(self.ty(dt), base, &[off], "")? };
        Ok((p, dt))
    }

    /// An element offset as `i64`. In i32, as `rest + fixed`
    /// (`IExpr::split_fixed`): `rest` in i32 and extended, then the
    /// constant `fixed` (constants and `unroll` variables) added in i64,
    /// so that the unrolled accesses of a tile share one address and
    /// differ by an immediate (an extension hides a constant inside it
    /// from LLVM). Equal to the offset modulo 2^64, as the address is.
    fn offset(&mut self, offset: &IExpr) -> Result<IntValue<'ctx>, CodegenError> {
        let unrolled = &self.unrolled;
        let split = if self.narrow() { offset.split_fixed(&|v| unrolled.get(v).copied().unwrap_or(false)) } else { None };
        let Some((rest, fixed)) = split else {
            let off = self.iexpr(offset)?;
            return self.to_i64(off);
        };
        let mut k = self.c64(fixed.constant);
        for (atom, coef) in &fixed.terms {
            let x = self.iexpr(atom)?;
            let x = self.to_i64(x)?;
            let term = self.b.build_int_mul(x, self.c64(*coef), "")?;
            k = self.b.build_int_add(k, term, "")?;
        }
        let rest = self.iexpr(&rest)?;
        let rest = self.to_i64(rest)?;
        Ok(self.b.build_int_add(rest, k, "")?)
    }

    /// The alignment of element `offset` of a buffer of `dt` (a load or a
    /// store) when the
    /// target's buffers start aligned beyond the element (`base_align`):
    /// the largest power of two up to it that divides the byte offset for
    /// every value of the variables, `unroll` variables (constants here)
    /// at their value. A thread's four `f32` loads at `16q + 0..3` are then
    /// aligned 16, 4, 8, 4 and LLVM's load-store vectorizer makes them one
    /// `ld.global.nc.v4.f32` (stores: `st.shared.v4.f32`), and a gather's
    /// two coordinates at `2w + 0..1` one `ld.global.nc.v2.u32`; an access
    /// aligned to its element only gets `None`.
    fn load_align(&self, offset: &IExpr, dt: DType) -> Option<u32> {
        let base = self.target.base_align()?;
        let elem = dt.size() as u64;
        let lanes = (base / elem) as i64;
        if lanes <= 1 {
            return None;
        }
        let mut known = offset.clone();
        let mut vars = Vec::new();
        offset.for_each_var(&mut |v| vars.push(v));
        for v in vars {
            if let Some(c) = self.env.get(v).copied().flatten().and_then(|x| x.get_sign_extended_constant()) {
                known = known.substitute(v, &IExpr::c(c));
            }
        }
        // Under the kernel's dim facts (a run-time variant's): `k * %col.0`
        // is a multiple of 4 where `%col.0` is. A residue unknown modulo
        // `lanes` may be known modulo a divisor: `w * 2` is 0 modulo 2
        // (8 bytes of i32), not known modulo 4.
        let mut m = lanes;
        while m > 1 {
            if let Some(r) = known.residue_under(m, &self.k.multiples) {
                // The largest power of two dividing both `m` and `r` elements.
                let elems = if r == 0 { m } else { 1i64 << r.trailing_zeros().min(m.trailing_zeros()) };
                return (elems > 1).then(|| (elems as u64 * elem) as u32);
            }
            m /= 2;
        }
        None
    }

    pub(crate) fn load_index(&mut self, buf: BufId, offset: &IExpr) -> Result<IntValue<'ctx>, CodegenError> {
        let (p, dt) = self.elem_ptr(buf, offset)?;
        if dt != DType::I32 {
            return Err(self.err(format_args!("load_index from {} buffer `{}`", dt.name(), self.m.buffers[buf].name)));
        }
        let x = self.b.build_load(self.i32, p, "")?;
        // Aligned as a value load, so that a row of index values a thread
        // reads (a gather's coordinates) can be one vector load.
        if let (Some(align), Some(i)) = (self.load_align(offset, DType::I32), x.as_instruction_value()) {
            i.set_alignment(align).map_err(|e| self.err(e))?;
        }
        self.to_index(x.into_int_value())
    }

    // ---- index arithmetic (i64, or i32 when proven to fit) ---------------

    pub(crate) fn iexpr(&mut self, e: &IExpr) -> Result<IntValue<'ctx>, CodegenError> {
        match e {
            IExpr::Const(c) => Ok(self.cix(*c)),
            IExpr::Var(v) => self.env.get(*v).copied().flatten().ok_or_else(|| self.err(format_args!("variable {v} used out of scope"))),
            IExpr::Sym(d) => {
                let v = self.dims.get(*d).copied().flatten().ok_or_else(|| self.err(format_args!("dim symbol {d} is not a parameter")))?;
                self.to_index(v)
            }
            // A non-negative dividend over the symbols (a grid's `X //^ 4`
            // of an extent X) by a positive constant: unsigned, which LLVM
            // makes a shift (and a mask) for a power of two, where Python's
            // signed rounding costs a fix-up per operation.
            IExpr::Bin(op @ (IBin::FloorDiv | IBin::CeilDiv | IBin::Mod), a, b)
                if b.as_const().is_some_and(|c| c > 0) && !a.uses_any_var() && self.extents.non_negative(a) =>
            {
                let (a, b) = (self.iexpr(a)?, self.iexpr(b)?);
                let bl = &self.b;
                Ok(match op {
                    IBin::Mod => bl.build_int_unsigned_rem(a, b, "")?,
                    IBin::FloorDiv => bl.build_int_unsigned_div(a, b, "")?,
                    // `a + c - 1` cannot wrap unsigned: `a` is below 2^31
                    // (2^63) and so is `c`.
                    _ => {
                        let c1 = bl.build_int_sub(b, a.get_type().const_int(1, false), "")?;
                        let padded = bl.build_int_nuw_add(a, c1, "")?;
                        bl.build_int_unsigned_div(padded, b, "")?
                    }
                })
            }
            IExpr::Bin(op, a, b) => {
                let a = self.iexpr(a)?;
                let b = self.iexpr(b)?;
                let bl = &self.b;
                // In i32 no value leaves the range (`index_fits_i32`), so
                // `nsw` is true; it lets LLVM fold the extension to i64 at
                // an address into the arithmetic.
                match op {
                    IBin::Add if self.narrow() => Ok(bl.build_int_nsw_add(a, b, "")?),
                    IBin::Sub if self.narrow() => Ok(bl.build_int_nsw_sub(a, b, "")?),
                    IBin::Mul if self.narrow() => Ok(bl.build_int_nsw_mul(a, b, "")?),
                    _ => self.ibin(*op, a, b),
                }
            }
        }
    }

    /// One index operation on i64 or i32 values (wrapping; division
    /// total). Also used for i32 `// //^ %` after sign extension to i64.
    fn ibin(&mut self, op: IBin, a: IntValue<'ctx>, b: IntValue<'ctx>) -> Result<IntValue<'ctx>, CodegenError> {
        let bl = &self.b;
        Ok(match op {
            IBin::Add => bl.build_int_add(a, b, "")?,
            IBin::Sub => bl.build_int_sub(a, b, "")?,
            IBin::Mul => bl.build_int_mul(a, b, "")?,
            IBin::Min => {
                let lt = bl.build_int_compare(IntPredicate::SLT, a, b, "")?;
                bl.build_select(lt, a, b, "")?.into_int_value()
            }
            IBin::Max => {
                let gt = bl.build_int_compare(IntPredicate::SGT, a, b, "")?;
                bl.build_select(gt, a, b, "")?.into_int_value()
            }
            IBin::FloorDiv | IBin::CeilDiv | IBin::Mod => self.python_div(op, a, b)?,
        })
    }

    /// Python floor/ceil division and floor modulo. `sdiv`/`srem` are
    /// undefined for `b == 0` and for `MIN / -1`, so both get divisor 1 and
    /// are fixed up with selects: `x // 0 = 0`, `x % 0 = 0`, and
    /// `x // -1 = -x` wrapping (as `wrapping_div`). With a constant
    /// divisor every select folds away and LLVM's multiply-by-reciprocal
    /// replaces the division.
    fn python_div(&mut self, op: IBin, a: IntValue<'ctx>, b: IntValue<'ctx>) -> Result<IntValue<'ctx>, CodegenError> {
        let bl = &self.b;
        let ty = a.get_type();
        let zero = ty.const_zero();
        let one = ty.const_int(1, false);
        let minus1 = ty.const_all_ones();
        let bz = bl.build_int_compare(IntPredicate::EQ, b, zero, "")?;
        let bm1 = bl.build_int_compare(IntPredicate::EQ, b, minus1, "")?;
        let unsafe_div = bl.build_or(bz, bm1, "")?;
        let bs = bl.build_select(unsafe_div, one, b, "")?.into_int_value();
        let r = bl.build_int_signed_rem(a, bs, "")?;
        // Truncated remainder is non-zero with the sign opposite to b's:
        // the truncated quotient is one above the floor.
        let rnz = bl.build_int_compare(IntPredicate::NE, r, zero, "")?;
        let rb = bl.build_xor(r, b, "")?;
        let opposite = bl.build_int_compare(IntPredicate::SLT, rb, zero, "")?;
        Ok(match op {
            IBin::Mod => {
                let fix = bl.build_and(rnz, opposite, "")?;
                let rp = bl.build_int_add(r, b, "")?;
                // b == 0 and b == -1 already give r == 0 (divisor 1).
                bl.build_select(fix, rp, r, "")?.into_int_value()
            }
            _ => {
                let q0 = bl.build_int_signed_div(a, bs, "")?;
                let neg = bl.build_int_sub(zero, a, "")?;
                let q = bl.build_select(bm1, neg, q0, "")?.into_int_value();
                let q = if op == IBin::FloorDiv {
                    let fix = bl.build_and(rnz, opposite, "")?;
                    let qm = bl.build_int_sub(q, one, "")?;
                    bl.build_select(fix, qm, q, "")?.into_int_value()
                } else {
                    let same = bl.build_not(opposite, "")?;
                    let fix = bl.build_and(rnz, same, "")?;
                    let qp = bl.build_int_add(q, one, "")?;
                    bl.build_select(fix, qp, q, "")?.into_int_value()
                };
                bl.build_select(bz, zero, q, "")?.into_int_value()
            }
        })
    }

    /// One element's `copy_async` (the verifier made the compute one
    /// global load into shared memory of the same dtype).
    fn copy_async(&mut self, c: &Compute) -> Result<(), CodegenError> {
        let [Value { op: VOp::Load { buf, offset }, dtype }] = c.values.as_slice() else {
            return Err(self.err("internal error: a `copy_async` whose compute is not one load"));
        };
        let (d, dt) = self.elem_ptr(c.write.buf, &c.write.offset)?;
        if dt != *dtype {
            return Err(self.err("internal error: a `copy_async` between buffers of different dtypes"));
        }
        let (s, _) = self.elem_ptr(*buf, offset)?;
        let target = self.target;
        target.copy_async(self, d, s, dt.size() as u32)
    }

    // ---- values ---------------------------------------------------------

    fn ty(&self, d: DType) -> BasicTypeEnum<'ctx> {
        basic_type(self.ctx, d)
    }

    pub(crate) fn intrinsic(&self, name: &str, tys: &[BasicTypeEnum<'ctx>]) -> Result<FunctionValue<'ctx>, CodegenError> {
        Intrinsic::find(name)
            .and_then(|i| i.get_declaration(self.module, tys))
            .ok_or_else(|| self.err(format_args!("internal error: LLVM has no intrinsic {name}")))
    }

    pub(crate) fn call(&self, f: FunctionValue<'ctx>, args: &[BasicValueEnum<'ctx>], name: &str) -> Result<BasicValueEnum<'ctx>, CodegenError> {
        let args: Vec<_> = args.iter().map(|a| (*a).into()).collect();
        self.b.build_call(f, &args, name)?.try_as_basic_value().basic().ok_or_else(|| self.err("internal error: intrinsic returns void"))
    }

    /// The value `c` writes, with its dtype.
    fn written_value(&mut self, c: &Compute) -> Result<(BasicValueEnum<'ctx>, DType), CodegenError> {
        let mut vals: Vec<BasicValueEnum<'ctx>> = Vec::with_capacity(c.values.len());
        for (i, v) in c.values.iter().enumerate() {
            let x = self.value(v, &vals, &c.values[..i])?;
            vals.push(x);
        }
        operand(&vals, &c.values, c.write.value).map_err(|e| self.err(e))
    }

    fn compute(&mut self, c: &Compute) -> Result<(), CodegenError> {
        if c.write.kind == WriteKind::CopyAsync {
            return self.copy_async(c);
        }
        let w = &c.write;
        let (val, vdt) = self.written_value(c)?;
        // A register sum's cell has its slot: no address in the loop.
        let (p, dt) = match self.sum_slot(c)? {
            Some(slot) => (slot, self.m.buffers[w.buf].dtype),
            None => self.elem_ptr(w.buf, &w.offset)?,
        };
        if vdt != dt {
            return Err(self.err(format_args!("writes a {} value into {} buffer `{}`", vdt.name(), dt.name(), self.m.buffers[w.buf].name)));
        }
        match self.target.write_kind(w.kind) {
            WriteKind::Store => {
                let st = self.b.build_store(p, val)?;
                if let Some(align) = self.load_align(&w.offset, dt) {
                    st.set_alignment(align).map_err(|e| self.err(e))?;
                }
            }
            WriteKind::Accumulate => {
                let old = self.b.build_load(self.ty(dt), p, "")?;
                let sum = self.add(dt, old, val)?;
                self.b.build_store(p, sum)?;
            }
            WriteKind::CopyAsync => return Err(self.err("internal error: `copy_async` reached the store path")),
            WriteKind::AtomicAccumulate => {
                // Monotonic (relaxed) suffices: only the sum must be
                // atomic; kernel boundaries order everything else.
                if dt == DType::I32 {
                    self.b.build_atomicrmw(AtomicRMWBinOp::Add, p, val.into_int_value(), AtomicOrdering::Monotonic)?;
                } else {
                    // inkwell's build_atomicrmw accepts integers only.
                    let r = unsafe {
                        llvm_sys::core::LLVMBuildAtomicRMW(
                            self.b.as_mut_ptr(),
                            llvm_sys::LLVMAtomicRMWBinOp::LLVMAtomicRMWBinOpFAdd,
                            p.as_value_ref(),
                            val.as_value_ref(),
                            llvm_sys::LLVMAtomicOrdering::LLVMAtomicOrderingMonotonic,
                            0,
                        )
                    };
                    if r.is_null() {
                        return Err(self.err("internal error: atomicrmw fadd was not built"));
                    }
                }
            }
        }
        Ok(())
    }

    fn add(&self, dt: DType, a: BasicValueEnum<'ctx>, b: BasicValueEnum<'ctx>) -> Result<BasicValueEnum<'ctx>, CodegenError> {
        Ok(if dt == DType::I32 {
            self.b.build_int_add(a.into_int_value(), b.into_int_value(), "")?.into()
        } else {
            let sum = self.b.build_float_add(a.into_float_value(), b.into_float_value(), "")?;
            let sum = self.contractible(sum);
            // The host's split reductions: under `fast`, a sum into a cell
            // may be reassociated, so that LLVM vectorises a reduction
            // into lanes of partial sums (the GPU splits them at the loop
            // level, `split-reductions`). Not in a register-tiled kernel:
            // there the vectors run across the tile's cells, and LLVM
            // would vectorise along the reduction instead (4x slower).
            if self.reassoc_sums {
                if let Some(i) = sum.as_instruction_value() {
                    let _ = i.set_fast_math_flags(FastMathFlags::AllowContract | FastMathFlags::AllowReassoc);
                }
            }
            sum.into()
        })
    }

    /// `x` (a float add, sub or mul the program wrote) marked `contract`
    /// under `--fp-contract fast`, so LLVM may fuse a multiply with the
    /// add of its result into one `fma` (one rounding instead of two).
    /// Adds and multiplies made up by the lowering itself (`%`, `//`) are
    /// never marked: their rounding is part of the language's definition.
    fn contractible(&self, x: FloatValue<'ctx>) -> FloatValue<'ctx> {
        if self.fp_contract == FpContract::Fast {
            if let Some(i) = x.as_instruction_value() {
                // Only float arithmetic reaches here, which takes the flags.
                let _ = i.set_fast_math_flags(FastMathFlags::AllowContract);
            }
        }
        x
    }

    fn value(&mut self, v: &Value, vals: &[BasicValueEnum<'ctx>], defs: &[Value]) -> Result<BasicValueEnum<'ctx>, CodegenError> {
        let dt = v.dtype;
        let opnd = |id: usize, want: Option<DType>| -> Result<BasicValueEnum<'ctx>, CodegenError> {
            let (x, xdt) = operand(vals, defs, id).map_err(|e| self.err(e))?;
            match want {
                Some(w) if w != xdt => Err(self.err(format_args!("operand %{id} is {}, expected {}", xdt.name(), w.name()))),
                _ => Ok(x),
            }
        };
        Ok(match &v.op {
            VOp::Const(c) => self.constant(dt, *c),
            VOp::Load { buf, offset } => {
                let (p, bdt) = self.elem_ptr(*buf, offset)?;
                if bdt != dt {
                    return Err(self.err(format_args!("loads {} from {} buffer", dt.name(), bdt.name())));
                }
                let x = self.b.build_load(self.ty(dt), p, "")?;
                if let (Some(align), Some(i)) = (self.load_align(offset, dt), x.as_instruction_value()) {
                    i.set_alignment(align).map_err(|e| self.err(e))?;
                }
                x
            }
            VOp::Index(e) => {
                let x = self.iexpr(e)?;
                match dt {
                    DType::I32 => self.b.build_int_truncate_or_bit_cast(x, self.i32, "")?.into(),
                    _ => self.b.build_signed_int_to_float(x, self.ty(dt).into_float_type(), "")?.into(),
                }
            }
            VOp::Lookup { table, index } => {
                // Tables are `DIMS` lists (one entry per rank), so a select
                // chain is small and needs no constant memory on the GPU.
                let idx = self.iexpr(index)?;
                let entry = |me: &Self, t: i64| -> BasicValueEnum<'ctx> {
                    match dt {
                        DType::I32 => me.i32.const_int(t as i32 as u64, true).into(),
                        _ => me.constant(dt, t as f64),
                    }
                };
                let mut acc = entry(self, table.first().copied().unwrap_or(0));
                for (i, &t) in table.iter().enumerate().skip(1) {
                    let here = self.b.build_int_compare(IntPredicate::EQ, idx, self.cix(i as i64), "")?;
                    let tv = entry(self, t);
                    acc = self.b.build_select(here, tv, acc, "")?;
                }
                acc
            }
            VOp::Random { stream, counter, lo, hi } => {
                let lo = opnd(*lo, Some(dt))?;
                let hi = opnd(*hi, Some(dt))?;
                let n = self.iexpr(counter)?;
                let n = self.to_i64(n)?;
                self.random(dt, stream, n, lo, hi)?
            }
            VOp::Neg(a) => {
                let a = opnd(*a, Some(dt))?;
                match dt {
                    DType::I32 => self.b.build_int_sub(self.i32.const_zero(), a.into_int_value(), "")?.into(),
                    _ => self.b.build_float_neg(a.into_float_value(), "")?.into(),
                }
            }
            VOp::Bin(op, a, b) => {
                let a = opnd(*a, Some(dt))?;
                let b = opnd(*b, Some(dt))?;
                if dt == DType::I32 {
                    self.int_bin(*op, a.into_int_value(), b.into_int_value())?.into()
                } else {
                    self.float_bin(dt, *op, a.into_float_value(), b.into_float_value())?.into()
                }
            }
            VOp::Cast(a) => {
                let (x, from) = operand(vals, defs, *a).map_err(|e| self.err(e))?;
                self.cast(x, from, dt)?
            }
        })
    }

    fn constant(&self, dt: DType, c: f64) -> BasicValueEnum<'ctx> {
        match dt {
            // INT constants are integral; out-of-range ones wrap like i32
            // arithmetic does.
            DType::I32 => self.i32.const_int((c as i64 as i32) as u64, true).into(),
            DType::F32 => self.ctx.f32_type().const_float(c as f32 as f64).into(),
            DType::F64 => self.ctx.f64_type().const_float(c).into(),
        }
    }

    fn int_bin(&mut self, op: BinOp, a: IntValue<'ctx>, b: IntValue<'ctx>) -> Result<IntValue<'ctx>, CodegenError> {
        let ib = match op {
            BinOp::Add => return Ok(self.b.build_int_add(a, b, "")?),
            BinOp::Sub => return Ok(self.b.build_int_sub(a, b, "")?),
            BinOp::Mul => return Ok(self.b.build_int_mul(a, b, "")?),
            BinOp::Div => return Err(self.err("`div` on i32 (INT `/` is lowered through a cast to FLOAT)")),
            BinOp::FloorDiv => IBin::FloorDiv,
            BinOp::CeilDiv => IBin::CeilDiv,
            BinOp::Mod => IBin::Mod,
        };
        // In i64 the only i32 overflow (MIN // -1) cannot happen; the
        // result is truncated back, wrapping like i32 arithmetic.
        let a64 = self.b.build_int_s_extend(a, self.i64, "")?;
        let b64 = self.b.build_int_s_extend(b, self.i64, "")?;
        let r = self.ibin(ib, a64, b64)?;
        Ok(self.b.build_int_truncate(r, self.i32, "")?)
    }

    fn float_bin(&mut self, dt: DType, op: BinOp, a: FloatValue<'ctx>, b: FloatValue<'ctx>) -> Result<FloatValue<'ctx>, CodegenError> {
        let bl = &self.b;
        let ty = self.ty(dt);
        Ok(match op {
            BinOp::Add => self.contractible(bl.build_float_add(a, b, "")?),
            BinOp::Sub => self.contractible(bl.build_float_sub(a, b, "")?),
            BinOp::Mul => self.contractible(bl.build_float_mul(a, b, "")?),
            BinOp::Div => bl.build_float_div(a, b, "")?,
            BinOp::FloorDiv | BinOp::CeilDiv | BinOp::Mod => {
                let q = bl.build_float_div(a, b, "")?;
                let name = if op == BinOp::CeilDiv { "llvm.ceil" } else { "llvm.floor" };
                let f = self.intrinsic(name, &[ty])?;
                let r = self.call(f, &[q.into()], "")?.into_float_value();
                if op == BinOp::Mod {
                    let bl = &self.b;
                    let p = bl.build_float_mul(b, r, "")?;
                    bl.build_float_sub(a, p, "")?
                } else {
                    r
                }
            }
        })
    }

    fn cast(&mut self, x: BasicValueEnum<'ctx>, from: DType, to: DType) -> Result<BasicValueEnum<'ctx>, CodegenError> {
        let bl = &self.b;
        Ok(match (from, to) {
            _ if from == to => x,
            (DType::I32, _) => bl.build_signed_int_to_float(x.into_int_value(), self.ty(to).into_float_type(), "")?.into(),
            (_, DType::I32) => {
                // Saturating, NaN -> 0: exactly Rust's `as i32`.
                let f = self.intrinsic("llvm.fptosi.sat", &[self.i32.into(), self.ty(from)])?;
                self.call(f, &[x], "")?
            }
            (DType::F64, DType::F32) => bl.build_float_trunc(x.into_float_value(), self.ctx.f32_type(), "")?.into(),
            _ => bl.build_float_ext(x.into_float_value(), self.ctx.f64_type(), "")?.into(),
        })
    }

    /// `eintup::random::Stream` in IR: `x = splitmix64(key ^ n*GOLDEN)` with
    /// `key = seed ^ fnv1a64(stream)` folded at compile time, then the INT
    /// or FLOAT draw. F32 draws are computed in f64 and rounded.
    fn random(
        &mut self,
        dt: DType,
        stream: &str,
        n: IntValue<'ctx>,
        lo: BasicValueEnum<'ctx>,
        hi: BasicValueEnum<'ctx>,
    ) -> Result<BasicValueEnum<'ctx>, CodegenError> {
        let key = self.seed ^ fnv1a64(stream.as_bytes());
        let bl = &self.b;
        let k = |v: u64| self.i64.const_int(v, false);
        let spread = bl.build_int_mul(n, k(GOLDEN), "")?;
        let mut z = bl.build_xor(spread, k(key), "")?;
        // splitmix64 (`eintup::random::splitmix64`), from its constants.
        z = bl.build_int_add(z, k(GOLDEN), "")?;
        for (shift, mul) in SPLITMIX_ROUNDS {
            let s = bl.build_right_shift(z, k(u64::from(shift)), false, "")?;
            z = bl.build_xor(z, s, "")?;
            if let Some(mul) = mul {
                z = bl.build_int_mul(z, k(mul), "")?;
            }
        }
        if dt == DType::I32 {
            let lo64 = bl.build_int_s_extend(lo.into_int_value(), self.i64, "")?;
            let hi64 = bl.build_int_s_extend(hi.into_int_value(), self.i64, "")?;
            let nonempty = bl.build_int_compare(IntPredicate::SGT, hi64, lo64, "")?;
            let span = bl.build_int_sub(hi64, lo64, "")?;
            let span = bl.build_select(nonempty, span, k(1), "")?.into_int_value();
            let r = bl.build_int_unsigned_rem(z, span, "")?;
            let draw = bl.build_int_add(lo64, r, "")?;
            let out = bl.build_select(nonempty, draw, lo64, "")?.into_int_value();
            return Ok(bl.build_int_truncate(out, self.i32, "")?.into());
        }
        let f64t = self.ctx.f64_type();
        let (lo64, hi64) = if dt == DType::F32 {
            (bl.build_float_ext(lo.into_float_value(), f64t, "")?, bl.build_float_ext(hi.into_float_value(), f64t, "")?)
        } else {
            (lo.into_float_value(), hi.into_float_value())
        };
        let top = bl.build_right_shift(z, k(11), false, "")?;
        let unit = bl.build_unsigned_int_to_float(top, f64t, "")?;
        let unit = bl.build_float_mul(unit, f64t.const_float(1.0 / (1u64 << 53) as f64), "")?;
        let width = bl.build_float_sub(hi64, lo64, "")?;
        let scaled = bl.build_float_mul(width, unit, "")?;
        let draw = bl.build_float_add(lo64, scaled, "")?;
        // `!(hi > lo)`: ordered compare, so a NaN bound also gives lo.
        let nonempty = bl.build_float_compare(FloatPredicate::OGT, hi64, lo64, "")?;
        let out = bl.build_select(nonempty, draw, lo64, "")?.into_float_value();
        Ok(if dt == DType::F32 { bl.build_float_trunc(out, self.ctx.f32_type(), "")?.into() } else { out.into() })
    }
}

/// The LLVM type of an element of `d`.
fn basic_type(ctx: &Context, d: DType) -> BasicTypeEnum<'_> {
    match d {
        DType::I32 => ctx.i32_type().as_basic_type_enum(),
        DType::F32 => ctx.f32_type().as_basic_type_enum(),
        DType::F64 => ctx.f64_type().as_basic_type_enum(),
    }
}

/// Value `id` of a compute (defined before the current one) and its dtype.
fn operand<'ctx>(vals: &[BasicValueEnum<'ctx>], defs: &[Value], id: usize) -> Result<(BasicValueEnum<'ctx>, DType), String> {
    match (vals.get(id), defs.get(id)) {
        (Some(v), Some(d)) => Ok((*v, d.dtype)),
        _ => Err(format!("value %{id} is used before it is defined")),
    }
}

/// `m` lowered for `target`, given `tm`'s triple and data layout, and
/// optimised with LLVM's `default<O3>` pipeline: the one path both the
/// host JIT and PTX emission take.
pub(crate) fn lower_and_optimize<'ctx>(
    ctx: &'ctx Context,
    m: &LoopModule,
    which: &[usize],
    seed: u64,
    target: &dyn TargetLowering,
    fp_contract: FpContract,
    tm: &TargetMachine,
) -> Result<Module<'ctx>, CodegenError> {
    let module = lower_module(ctx, m, which, seed, target, fp_contract)?;
    module.set_triple(&tm.get_triple());
    module.set_data_layout(&tm.get_target_data().get_data_layout());
    target.annotate(ctx, &module, tm);
    module
        .run_passes("default<O3>", tm, inkwell::passes::PassBuilderOptions::create())
        .map_err(|e| CodegenError(format!("LLVM optimisation failed: {}", e.to_string())))?;
    Ok(module)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn kernel_names_must_be_identifiers() {
        assert!(check_kernel_name("k0_y").is_ok());
        assert!(check_kernel_name("0k").is_err());
        assert!(check_kernel_name("a.b").is_err());
        assert!(check_kernel_name("").is_err());
    }
}
