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

mod index;
mod math;
mod values;
use values::basic_type;

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
    /// Function attributes for target machine `tm` and annotations of
    /// `m`'s kernels, set before the optimisation pipeline.
    fn annotate<'ctx>(&self, ctx: &'ctx Context, module: &Module<'ctx>, m: &LoopModule, tm: &TargetMachine);
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
        return Err(CodegenError::Invalid(format!("the module has {} dim symbols: host code needs static dims (bind them first)", m.dims.len())));
    }
    let module = ctx.create_module("eintup");
    let mut seen = std::collections::HashSet::new();
    for k in &m.kernels {
        check_kernel_name(&k.name)?;
        if !seen.insert(k.name.as_str()) {
            return Err(CodegenError::Invalid(format!("kernel name `{}` is used twice", k.name)));
        }
    }
    for &ki in which {
        let k = m.kernels.get(ki).ok_or_else(|| CodegenError::Internal(format!("no kernel {ki}")))?;
        KernelLowering::new(ctx, &module, m, k, seed, target, fp_contract)?.lower()?;
    }
    module.verify().map_err(|e| CodegenError::Internal(format!("invalid LLVM IR: {}", e.to_string())))?;
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
        Err(CodegenError::Invalid(format!("kernel name `{name}` is not an identifier ([A-Za-z_][A-Za-z0-9_]*)")))
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
            return Err(CodegenError::Invalid(format!("kernel `{}` uses buffer {bad}, the module has {}", k.name, m.buffers.len())));
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
            return Err(CodegenError::Invalid(format!("kernel `{}` uses dim symbol {bad}, the module has {}", k.name, m.dims.len())));
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
            bufs[buf] = Some(p.ok_or_else(|| CodegenError::Internal("missing kernel parameter".into()))?);
        }
        let mut dims = vec![None; m.dims.len()];
        for (j, &d) in kdims.iter().enumerate() {
            let p = func.get_nth_param((params.len() + j) as u32).map(|p| p.into_int_value());
            dims[d] = Some(p.ok_or_else(|| CodegenError::Internal("missing dim parameter".into()))?);
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
            let n = bf
                .len()
                .and_then(|n| u32::try_from(n).ok())
                .ok_or(())
                .map_err(|_| CodegenError::Invalid(format!("scratch buffer `{}` is too large", bf.name)))?;
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

    /// The kernel uses what this target or lowering does not accept.
    pub(crate) fn err(&self, msg: impl std::fmt::Display) -> CodegenError {
        CodegenError::Invalid(format!("kernel `{}`: {msg}", self.k.name))
    }

    /// An invariant of lowering broke: a bug.
    pub(crate) fn bug(&self, msg: impl std::fmt::Display) -> CodegenError {
        CodegenError::Internal(format!("kernel `{}`: {msg}", self.k.name))
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
                    return Err(self.bug("an `unroll` loop without constant bounds"));
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
                let pre = self.b.get_insert_block().ok_or_else(|| self.bug("no insert block"))?;
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
                let latch = self.b.get_insert_block().ok_or_else(|| self.bug("no insert block"))?;
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
        let Some((sums, cells)) = self.sums.take() else { return Err(self.bug("no register sums to store")) };
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
        let (_, k) = sums.split(&c.write.offset, &value).ok_or_else(|| self.bug("a register sum's cell is not constant"))?;
        let i = sums.cells.iter().position(|cell| cell.0 == c.write.buf && cell.2 == k).ok_or_else(|| self.bug("no register sum for a cell"))?;
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
    target.annotate(ctx, &module, m, tm);
    module
        .run_passes("default<O3>", tm, inkwell::passes::PassBuilderOptions::create())
        .map_err(|e| CodegenError::Internal(format!("LLVM optimisation failed: {}", e.to_string())))?;
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
