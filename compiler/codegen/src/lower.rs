//! `lower-to-llvm`: the loop dialect as LLVM IR, one lowering with two
//! flavours. Both flavours share every scalar rule (index arithmetic,
//! values, RANDOM, writes); they differ only in how a kernel gets its
//! buffer pointers and in how the outermost `parallel` loops run:
//!
//! - `Flavour::Host`: `void @et.NAME(ptr %args)`, `args[i]` being the
//!   pointer of the i-th buffer of `kernel_params`; every loop sequential.
//! - `Flavour::Nvptx`: `ptx_kernel void @NAME(ptr addrspace(1) noalias ..)`,
//!   one pointer per buffer of `kernel_params`; the maximal chain of
//!   constant-bound `parallel` loops from the kernel root becomes one
//!   grid-stride loop over the global thread id (see `ParChain`). A
//!   kernel whose chain holds a `thread` nest (`block-tiles`) loops
//!   grid-stride over blocks instead: the chain's points are blocks, the
//!   nest's points the threads of one (`tid.x`), `spread` loops stride by
//!   the block size and `sync` is `bar.sync 0`.
//!
//! Shared buffers are `addrspace(3)` globals of the kernel (NVPTX) and
//! local buffers `alloca`s, as are both on the host, where every loop runs
//! in order and `sync` is nothing.
//!
//! Numerics mirror the loop dialect's documented semantics exactly: no
//! instruction carries fast-math flags or `nsw`/`nuw` on user arithmetic,
//! and every division is total (divisor 0 gives 0) through selects rather
//! than undefined behaviour. docs/codegen.md describes the result.

use super::{kernel_params, CodegenError, FpContract};
use eintup::ir::loops::{
    BufId, Compute, Cond, DType, IBin, IExpr, Kernel, LoopKind, LoopModule, Node, BinOp, VOp, Value, VarId,
    WriteKind,
};
use eintup::ir::loops::chain::{Chain, Step};
use eintup::random::{fnv1a64, GOLDEN, SPLITMIX_ROUNDS};
use inkwell::attributes::{Attribute, AttributeLoc};
use inkwell::builder::Builder;
use inkwell::context::Context;
use inkwell::intrinsics::Intrinsic;
use inkwell::llvm_sys;
use inkwell::module::Module;
use inkwell::types::{BasicType, BasicTypeEnum, IntType};
use inkwell::values::{AsValueRef, BasicValue, BasicValueEnum, FastMathFlags, FloatValue, FunctionValue, IntValue, PointerValue};
use inkwell::{AddressSpace, AtomicOrdering, AtomicRMWBinOp, FloatPredicate, IntPredicate};

/// Which of the two shapes of the same lowering to build.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Flavour {
    Host,
    Nvptx,
}

/// LLVM calling convention number of `ptx_kernel` (CallingConv::PTX_Kernel):
/// it is what makes the NVPTX backend emit `.entry` instead of `.func`.
const PTX_KERNEL_CC: u32 = 71;
/// NVPTX's shared address space (a block's scratch).
const NVPTX_SHARED_AS: u16 = 3;
/// The global address space of NVPTX, where kernel arguments point.
const NVPTX_GLOBAL_AS: u16 = 1;

/// The host symbol of kernel `name`. The prefix contains a `.` so that no
/// kernel can take the name of a C library function the JIT resolves
/// (LLVM turns some loops into calls to `memset`/`memcpy`).
pub fn host_symbol(name: &str) -> String {
    format!("et.{name}")
}

/// Builds the (unoptimised) LLVM module of every kernel of `m`. The caller
/// sets triple and data layout and runs the optimisation pipeline.
pub fn lower_module<'ctx>(
    ctx: &'ctx Context,
    m: &LoopModule,
    seed: u64,
    flavour: Flavour,
    fp_contract: FpContract,
) -> Result<Module<'ctx>, CodegenError> {
    let module = ctx.create_module("eintup");
    let mut seen = std::collections::HashSet::new();
    for k in &m.kernels {
        check_kernel_name(&k.name)?;
        if !seen.insert(k.name.as_str()) {
            return Err(CodegenError(format!("kernel name `{}` is used twice", k.name)));
        }
        KernelLowering::new(ctx, &module, m, k, seed, flavour, fp_contract)?.lower()?;
    }
    module.verify().map_err(|e| CodegenError(format!("internal error: invalid LLVM IR: {}", e.to_string())))?;
    Ok(module)
}

/// Kernel names become PTX entry points, so they must be PTX identifiers
/// (LLVM would silently rename anything else, and the runtime would not
/// find the entry).
fn check_kernel_name(name: &str) -> Result<(), CodegenError> {
    let mut chars = name.chars();
    let ok = matches!(chars.next(), Some(c) if c.is_ascii_alphabetic() || c == '_')
        && chars.all(|c| c.is_ascii_alphanumeric() || c == '_');
    if ok {
        Ok(())
    } else {
        Err(CodegenError(format!("kernel name `{name}` is not an identifier ([A-Za-z_][A-Za-z0-9_]*)")))
    }
}

/// Number of threads the NVPTX flavour of `k` wants: the product of the
/// trip counts of its parallel chain (1 when it has none, 0 when a chain
/// loop is empty). Launching fewer is correct (grid-stride); more idle.
pub fn thread_count(k: &Kernel) -> i64 {
    let c = ParChain::of(&k.body);
    c.total.saturating_mul(c.block.unwrap_or(1))
}

/// The block size a kernel with a `thread` nest must be launched with
/// (its barriers need every thread of the nest in one block); `None` for
/// kernels that take any block size.
pub fn block_size(k: &Kernel) -> Option<i64> {
    ParChain::of(&k.body).block
}

/// The root loop's bounds when the host may split kernel `k` across
/// threads: its body is one `parallel` loop with constant bounds and no
/// write is atomic (an atomic sum would be exact but its order, and so
/// its rounding, would change from run to run).
pub fn split_range(k: &Kernel) -> Option<(i64, i64)> {
    let [Node::For(l)] = k.body.as_slice() else { return None };
    let (lo, hi) = (l.lo.as_const()?, l.hi.as_const()?);
    let mut atomic = false;
    k.walk(&mut |n| atomic |= matches!(n, Node::Compute(c) if c.write.kind == WriteKind::AtomicAccumulate));
    (l.kind == LoopKind::Parallel && !atomic).then_some((lo, hi))
}

/// The kernel's parallel chain (`ir::loops::chain`): its iteration space
/// is flattened into one linear id; the steps re-create, per id, the loop
/// variables and then the guards and index loads in their original order.
struct ParChain<'k> {
    steps: Vec<Step<'k>>,
    /// The body of the innermost step, run sequentially in the thread.
    rest: &'k [Node],
    /// Product of the chain loops' trip counts.
    total: i64,
    /// The `thread` nest `rest` holds: `(var, lo, trip)`, outermost first.
    threads: Vec<(VarId, i64, i64)>,
    /// Threads per block when there is a nest.
    block: Option<i64>,
}

impl<'k> ParChain<'k> {
    fn of(body: &'k [Node]) -> ParChain<'k> {
        let c = Chain::of(body);
        let (rest, threads, block) = match c.thread_nest(body) {
            Some(n) => (n.body, n.threads.clone(), Some(n.size())),
            None => (c.rest(body), Vec::new(), None),
        };
        ParChain { steps: c.steps(body), rest, total: c.cells(), threads, block }
    }
}

struct KernelLowering<'a, 'ctx> {
    ctx: &'ctx Context,
    module: &'a Module<'ctx>,
    b: Builder<'ctx>,
    m: &'a LoopModule,
    k: &'a Kernel,
    seed: u64,
    flavour: Flavour,
    /// Whether a float multiply may fuse with the add that uses it.
    fp_contract: FpContract,
    func: FunctionValue<'ctx>,
    i1: IntType<'ctx>,
    i32: IntType<'ctx>,
    i64: IntType<'ctx>,
    /// Pointer of each buffer the kernel uses (`None` for the others).
    bufs: Vec<Option<PointerValue<'ctx>>>,
    /// Current value (i64) of each variable in scope.
    env: Vec<Option<IntValue<'ctx>>>,
    /// Host: `[begin, end)` that clamps the root loop of a splittable
    /// kernel (see `split_range`); taken by the first loop lowered.
    split: Option<(IntValue<'ctx>, IntValue<'ctx>)>,
    /// NVPTX, inside a `thread` nest: the thread's id in its block and the
    /// block size, by which `spread` loops stride.
    block: Option<(IntValue<'ctx>, i64)>,
    /// Host under `fast`, a kernel without a register tile: sums into a
    /// cell may be reassociated (see `add`).
    reassoc_sums: bool,
}

impl<'a, 'ctx> KernelLowering<'a, 'ctx> {
    fn new(
        ctx: &'ctx Context,
        module: &'a Module<'ctx>,
        m: &'a LoopModule,
        k: &'a Kernel,
        seed: u64,
        flavour: Flavour,
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
        let (func, addr_space) = match flavour {
            // The body takes one pointer per buffer; `host_entry` wraps it
            // in the host ABI and inlining keeps the no-alias facts.
            Flavour::Host => (format!("{}.body", host_symbol(&k.name)), AddressSpace::default()),
            Flavour::Nvptx => (k.name.clone(), AddressSpace::from(NVPTX_GLOBAL_AS)),
        };
        let ptr = ctx.ptr_type(addr_space);
        let mut tys: Vec<_> = params.iter().map(|_| ptr.into()).collect();
        if flavour == Flavour::Host {
            // begin, end: the slice of the root loop this call runs.
            let i64: inkwell::types::BasicMetadataTypeEnum = ctx.i64_type().into();
            tys.extend([i64, i64]);
        }
        let func = module.add_function(&func, ctx.void_type().fn_type(&tys, false), None);
        for i in 0..params.len() {
            func.add_attribute(AttributeLoc::Param(i as u32), noalias);
        }
        match flavour {
            Flavour::Nvptx => func.set_call_conventions(PTX_KERNEL_CC),
            Flavour::Host => {
                func.set_linkage(inkwell::module::Linkage::Internal);
                let inline = ctx.create_enum_attribute(Attribute::get_named_enum_kind_id("alwaysinline"), 0);
                func.add_attribute(AttributeLoc::Function, inline);
            }
        }
        func.add_attribute(AttributeLoc::Function, nounwind);
        let b = ctx.create_builder();
        let entry = ctx.append_basic_block(func, "entry");
        b.position_at_end(entry);
        let mut bufs = vec![None; m.buffers.len()];
        for (i, &buf) in params.iter().enumerate() {
            let p = func.get_nth_param(i as u32).map(|p| p.into_pointer_value());
            bufs[buf] = Some(p.ok_or_else(|| CodegenError("internal error: missing kernel parameter".into()))?);
        }
        // Scratch: per block (shared) or per thread (local). The host runs
        // a block's threads in order, so one copy of either is enough.
        for buf in eintup::ir::loops::verify::scratch_buffers(m, k) {
            let bf = &m.buffers[buf];
            let n = u32::try_from(bf.len()).map_err(|_| CodegenError(format!("scratch buffer `{}` is too large", bf.name)))?;
            let ty = basic_type(ctx, bf.dtype).array_type(n);
            bufs[buf] = Some(if flavour == Flavour::Nvptx && bf.role == eintup::ir::loops::Role::Shared {
                let g = module.add_global(ty, Some(AddressSpace::from(NVPTX_SHARED_AS)), &format!("{}__{}", k.name, bf.name));
                g.set_linkage(inkwell::module::Linkage::Internal);
                g.set_initializer(&ty.get_undef());
                g.set_alignment(16);
                g.as_pointer_value()
            } else {
                let a = b.build_alloca(ty, &bf.name)?;
                if let Some(i) = a.as_instruction() {
                    let _ = i.set_alignment(16);
                }
                a
            });
        }
        let split = match (flavour, split_range(k)) {
            (Flavour::Host, Some(_)) => {
                let n = params.len() as u32;
                let p = |i| func.get_nth_param(i).map(|p| p.into_int_value());
                p(n).zip(p(n + 1))
            }
            _ => None,
        };
        Ok(KernelLowering {
            ctx,
            module,
            b,
            m,
            k,
            seed,
            flavour,
            fp_contract,
            func,
            i1: ctx.bool_type(),
            i32: ctx.i32_type(),
            i64: ctx.i64_type(),
            bufs,
            env: vec![None; k.vars.len()],
            split,
            block: None,
            reassoc_sums: flavour == Flavour::Host && fp_contract == FpContract::Fast && {
                let mut tiled = false;
                k.walk(&mut |n| tiled |= matches!(n, Node::For(l) if l.kind == LoopKind::Unroll));
                !tiled
            },
        })
    }

    fn lower(mut self) -> Result<(), CodegenError> {
        match self.flavour {
            Flavour::Host => self.nodes(&self.k.body)?,
            Flavour::Nvptx => self.grid_stride()?,
        }
        self.b.build_return(None)?;
        if self.flavour == Flavour::Host {
            self.host_entry()?;
        }
        Ok(())
    }

    /// `void @et.NAME(ptr %args, i64 %begin, i64 %end)`: loads `args[i]`
    /// and calls the body with the slice of the root loop to run.
    fn host_entry(&self) -> Result<(), CodegenError> {
        let ptr = self.ctx.ptr_type(AddressSpace::default());
        let fty = self.ctx.void_type().fn_type(&[ptr.into(), self.i64.into(), self.i64.into()], false);
        let f = self.module.add_function(&host_symbol(&self.k.name), fty, None);
        let b = &self.b;
        b.position_at_end(self.ctx.append_basic_block(f, "entry"));
        let param = |i| f.get_nth_param(i).ok_or_else(|| self.err("internal error: host entry parameter missing"));
        let args = param(0)?.into_pointer_value();
        let mut ptrs = Vec::new();
        for i in 0..self.func.count_params() - 2 {
            let slot = unsafe { b.build_in_bounds_gep(ptr, args, &[self.i64.const_int(u64::from(i), false)], "arg")? };
            ptrs.push(b.build_load(ptr, slot, "")?.into());
        }
        ptrs.push(param(1)?.into());
        ptrs.push(param(2)?.into());
        b.build_call(self.func, &ptrs, "")?;
        b.build_return(None)?;
        Ok(())
    }

    fn err(&self, msg: impl std::fmt::Display) -> CodegenError {
        CodegenError(format!("kernel `{}`: {msg}", self.k.name))
    }

    fn block(&self, name: &str) -> inkwell::basic_block::BasicBlock<'ctx> {
        self.ctx.append_basic_block(self.func, name)
    }

    fn c64(&self, v: i64) -> IntValue<'ctx> {
        self.i64.const_int(v as u64, true)
    }

    fn bind(&mut self, var: VarId, v: IntValue<'ctx>) -> Result<(), CodegenError> {
        match self.env.get_mut(var) {
            Some(slot) => {
                *slot = Some(v);
                Ok(())
            }
            None => Err(self.err(format_args!("variable {var} is not declared ({} vars)", self.k.vars.len()))),
        }
    }

    // ---- NVPTX parallel chain -------------------------------------------

    /// `for lin = gid; lin < total; lin += nthreads { vars(lin); steps; rest }`;
    /// with a `thread` nest, `gid` and `nthreads` count blocks and the
    /// nest's variables come from the thread's id in its block.
    fn grid_stride(&mut self) -> Result<(), CodegenError> {
        let chain = ParChain::of(&self.k.body);
        if chain.total == 0 || chain.block == Some(0) {
            // An empty chain loop: nothing runs (and the digit arithmetic
            // below would divide by a zero trip count).
            return Ok(());
        }
        let sreg = |me: &Self, name: &str| -> Result<IntValue<'ctx>, CodegenError> {
            let f = me.intrinsic(&format!("llvm.nvvm.read.ptx.sreg.{name}"), &[])?;
            let v = me.call(f, &[], name)?.into_int_value();
            Ok(me.b.build_int_z_extend(v, me.i64, name)?)
        };
        let tid = sreg(self, "tid.x")?;
        let ctaid = sreg(self, "ctaid.x")?;
        let nctaid = sreg(self, "nctaid.x")?;
        let (gid, stride) = match chain.block {
            // Every thread of a block walks the same points, so all reach
            // the same barriers.
            Some(_) => (ctaid, nctaid),
            None => {
                let ntid = sreg(self, "ntid.x")?;
                (self.b.build_int_add(self.b.build_int_mul(ctaid, ntid, "")?, tid, "gid")?, self.b.build_int_mul(nctaid, ntid, "nthreads")?)
            }
        };
        let pre = self.b.get_insert_block().ok_or_else(|| self.err("no insert block"))?;
        let header = self.block("grid.header");
        let body = self.block("grid.body");
        let latch = self.block("grid.latch");
        let exit = self.block("grid.exit");
        self.b.build_unconditional_branch(header)?;
        self.b.position_at_end(header);
        let lin = self.b.build_phi(self.i64, "lin")?;
        lin.add_incoming(&[(&gid, pre)]);
        let lin_v = lin.as_basic_value().into_int_value();
        let more = self.b.build_int_compare(IntPredicate::SLT, lin_v, self.c64(chain.total), "")?;
        self.b.build_conditional_branch(more, body, exit)?;
        self.b.position_at_end(body);
        let loops: Vec<(VarId, i64, i64)> = chain
            .steps
            .iter()
            .filter_map(|s| match s {
                Step::Loop { var, lo, trip } => Some((*var, *lo, *trip)),
                _ => None,
            })
            .collect();
        let mut values = self.digits(lin_v, chain.total, &loops)?.into_iter();
        for step in &chain.steps {
            match step {
                Step::Loop { var, .. } => {
                    let v = values.next().ok_or_else(|| self.err("internal error: chain digits"))?;
                    self.bind(*var, v)?;
                }
                Step::Guard(conds) => {
                    let c = self.conds(conds)?;
                    let next = self.block("guard.body");
                    self.b.build_conditional_branch(c, next, latch)?;
                    self.b.position_at_end(next);
                }
                Step::LoadIndex { var, buf, offset } => {
                    let v = self.load_index(*buf, offset)?;
                    self.bind(*var, v)?;
                }
            }
        }
        if let Some(size) = chain.block {
            for (&(var, ..), v) in chain.threads.iter().zip(self.digits(tid, size, &chain.threads)?) {
                self.bind(var, v)?;
            }
            self.block = Some((tid, size));
        }
        self.nodes(chain.rest)?;
        self.b.build_unconditional_branch(latch)?;
        self.b.position_at_end(latch);
        let next = self.b.build_int_add(lin_v, stride, "lin.next")?;
        lin.add_incoming(&[(&next, latch)]);
        self.b.build_unconditional_branch(header)?;
        self.b.position_at_end(exit);
        Ok(())
    }

    /// The values of `loops` (`(var, lo, trip)`, innermost fastest) at
    /// point `lin` (an i64 below `total`, the product of the trips).
    fn digits(&mut self, lin: IntValue<'ctx>, total: i64, loops: &[(VarId, i64, i64)]) -> Result<Vec<IntValue<'ctx>>, CodegenError> {
        // When the point fits in 31 bits the digit arithmetic runs in
        // i32, which is far cheaper on the GPU.
        let narrow = total <= i32::MAX as i64;
        let ity = if narrow { self.i32 } else { self.i64 };
        let mut rem = if narrow { self.b.build_int_truncate(lin, self.i32, "")? } else { lin };
        let mut values = vec![None; loops.len()];
        for (i, &(_, lo, trip)) in loops.iter().enumerate().rev() {
            let digit = if i == 0 {
                rem
            } else {
                let t = ity.const_int(trip as u64, false);
                let d = self.b.build_int_unsigned_rem(rem, t, "")?;
                rem = self.b.build_int_unsigned_div(rem, t, "")?;
                d
            };
            let digit = if narrow { self.b.build_int_z_extend(digit, self.i64, "")? } else { digit };
            values[i] = Some(self.b.build_int_add(digit, self.c64(lo), "")?);
        }
        values.into_iter().map(|v| v.ok_or_else(|| self.err("internal error: chain digits"))).collect()
    }

    // ---- structure ------------------------------------------------------

    /// Lowers a node list; variables bound in it go out of scope after it.
    fn nodes(&mut self, nodes: &[Node]) -> Result<(), CodegenError> {
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
                for i in lo..hi {
                    let saved = self.env.clone();
                    self.bind(l.var, self.c64(i))?;
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
                let pre = self.b.get_insert_block().ok_or_else(|| self.err("no insert block"))?;
                let header = self.block("for.header");
                let body = self.block("for.body");
                let exit = self.block("for.exit");
                self.b.build_unconditional_branch(header)?;
                self.b.position_at_end(header);
                let name = self.k.vars.get(l.var).map(|v| v.name.as_str()).unwrap_or("v");
                let phi = self.b.build_phi(self.i64, name)?;
                phi.add_incoming(&[(&lo, pre)]);
                let v = phi.as_basic_value().into_int_value();
                let more = self.b.build_int_compare(IntPredicate::SLT, v, hi, "")?;
                self.b.build_conditional_branch(more, body, exit)?;
                self.b.position_at_end(body);
                let saved = self.env.clone();
                self.bind(l.var, v)?;
                self.nodes(&l.body)?;
                self.env = saved;
                // v < hi <= i64::MAX, so the increment cannot overflow
                // (a spread loop's step is at most 1024 and its bounds
                // are far from the top): `nsw` gives LLVM exact trip counts.
                let next = self.b.build_int_nsw_add(v, self.c64(step), "")?;
                let latch = self.b.get_insert_block().ok_or_else(|| self.err("no insert block"))?;
                phi.add_incoming(&[(&next, latch)]);
                self.b.build_unconditional_branch(header)?;
                self.b.position_at_end(exit);
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
                if self.flavour == Flavour::Nvptx {
                    let f = self.intrinsic("llvm.nvvm.barrier0", &[])?;
                    self.b.build_call(f, &[], "")?;
                }
            }
        }
        Ok(())
    }

    /// Conjunction of guard conditions (all are pure and total, so they
    /// are evaluated without short-circuit).
    fn conds(&mut self, conds: &[Cond]) -> Result<IntValue<'ctx>, CodegenError> {
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
                    self.b.build_int_compare(IntPredicate::NE, x, self.c64(0), "")?
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
        let off = self.iexpr(offset)?;
        // In bounds wherever it runs (loop dialect contract), so `inbounds`
        // is true and lets LLVM reason about the address.
        let p = unsafe { self.b.build_in_bounds_gep(self.ty(dt), base, &[off], "")? };
        Ok((p, dt))
    }

    fn load_index(&mut self, buf: BufId, offset: &IExpr) -> Result<IntValue<'ctx>, CodegenError> {
        let (p, dt) = self.elem_ptr(buf, offset)?;
        if dt != DType::I32 {
            return Err(self.err(format_args!("load_index from {} buffer `{}`", dt.name(), self.m.buffers[buf].name)));
        }
        let v = self.b.build_load(self.i32, p, "")?.into_int_value();
        Ok(self.b.build_int_s_extend(v, self.i64, "")?)
    }

    // ---- index arithmetic (i64) -----------------------------------------

    fn iexpr(&mut self, e: &IExpr) -> Result<IntValue<'ctx>, CodegenError> {
        match e {
            IExpr::Const(c) => Ok(self.c64(*c)),
            IExpr::Var(v) => self.env.get(*v).copied().flatten().ok_or_else(|| self.err(format_args!("variable {v} used out of scope"))),
            IExpr::Bin(op, a, b) => {
                let a = self.iexpr(a)?;
                let b = self.iexpr(b)?;
                self.ibin(*op, a, b)
            }
        }
    }

    /// One index operation on i64 values (wrapping; division total). Also
    /// used for i32 `// //^ %` after sign extension.
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
    /// `x // -1 = -x` wrapping (as `i64::wrapping_div`). With a constant
    /// divisor every select folds away and LLVM's multiply-by-reciprocal
    /// replaces the division.
    fn python_div(&mut self, op: IBin, a: IntValue<'ctx>, b: IntValue<'ctx>) -> Result<IntValue<'ctx>, CodegenError> {
        let bl = &self.b;
        let zero = self.i64.const_zero();
        let one = self.i64.const_int(1, false);
        let minus1 = self.i64.const_all_ones();
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

    // ---- values ---------------------------------------------------------

    fn ty(&self, d: DType) -> BasicTypeEnum<'ctx> {
        basic_type(self.ctx, d)
    }

    fn intrinsic(&self, name: &str, tys: &[BasicTypeEnum<'ctx>]) -> Result<FunctionValue<'ctx>, CodegenError> {
        Intrinsic::find(name)
            .and_then(|i| i.get_declaration(self.module, tys))
            .ok_or_else(|| self.err(format_args!("internal error: LLVM has no intrinsic {name}")))
    }

    fn call(&self, f: FunctionValue<'ctx>, args: &[BasicValueEnum<'ctx>], name: &str) -> Result<BasicValueEnum<'ctx>, CodegenError> {
        let args: Vec<_> = args.iter().map(|a| (*a).into()).collect();
        self.b
            .build_call(f, &args, name)?
            .try_as_basic_value()
            .basic()
            .ok_or_else(|| self.err("internal error: intrinsic returns void"))
    }

    fn compute(&mut self, c: &Compute) -> Result<(), CodegenError> {
        let mut vals: Vec<BasicValueEnum<'ctx>> = Vec::with_capacity(c.values.len());
        for (i, v) in c.values.iter().enumerate() {
            let x = self.value(v, &vals, &c.values[..i])?;
            vals.push(x);
        }
        let w = &c.write;
        let (val, vdt) = operand(&vals, &c.values, w.value).map_err(|e| self.err(e))?;
        let (p, dt) = self.elem_ptr(w.buf, &w.offset)?;
        if vdt != dt {
            return Err(self.err(format_args!(
                "writes a {} value into {} buffer `{}`",
                vdt.name(),
                dt.name(),
                self.m.buffers[w.buf].name
            )));
        }
        // The host runs a kernel with atomic writes on one thread only
        // (`split_range`), where a plain add is exact and far cheaper than
        // an atomic read-modify-write (a compare-exchange loop for floats).
        let kind = match (self.flavour, w.kind) {
            (Flavour::Host, WriteKind::AtomicAccumulate) => WriteKind::Accumulate,
            (_, k) => k,
        };
        match kind {
            WriteKind::Store => {
                self.b.build_store(p, val)?;
            }
            WriteKind::Accumulate => {
                let old = self.b.build_load(self.ty(dt), p, "")?;
                let sum = self.add(dt, old, val)?;
                self.b.build_store(p, sum)?;
            }
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
                self.b.build_load(self.ty(dt), p, "")?
            }
            VOp::Index(e) => {
                let x = self.iexpr(e)?;
                match dt {
                    DType::I32 => self.b.build_int_truncate(x, self.i32, "")?.into(),
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
                    let here = self.b.build_int_compare(IntPredicate::EQ, idx, self.c64(i as i64), "")?;
                    let tv = entry(self, t);
                    acc = self.b.build_select(here, tv, acc, "")?;
                }
                acc
            }
            VOp::Random { stream, counter, lo, hi } => {
                let lo = opnd(*lo, Some(dt))?;
                let hi = opnd(*hi, Some(dt))?;
                let n = self.iexpr(counter)?;
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

#[cfg(test)]
mod tests {
    use super::*;
    use eintup::ir::loops::{For, Var};

    fn pfor(var: VarId, lo: i64, hi: i64, body: Vec<Node>) -> Node {
        Node::For(For { var, lo: IExpr::c(lo), hi: IExpr::c(hi), kind: LoopKind::Parallel, body })
    }

    #[test]
    fn chain_takes_constant_parallel_loops_through_guards() {
        let inner = Node::For(For { var: 2, lo: IExpr::c(0), hi: IExpr::v(1), kind: LoopKind::Reduce, body: vec![] });
        let g = Node::Guard(eintup::ir::loops::Guard { conds: vec![Cond::NonZero(IExpr::v(0))], body: vec![pfor(1, 2, 5, vec![inner])] });
        let body = vec![pfor(0, 0, 4, vec![g])];
        let c = ParChain::of(&body);
        assert_eq!(c.total, 12);
        assert_eq!(c.steps.len(), 3);
        assert_eq!(c.rest.len(), 1);
        let k = Kernel::new("k", (0..3).map(|i| Var { name: format!("v{i}") }).collect(), body);
        assert_eq!(thread_count(&k), 12);
    }

    #[test]
    fn chain_stops_at_reduce_and_keeps_trailing_guards_sequential() {
        let g = Node::Guard(eintup::ir::loops::Guard { conds: vec![], body: vec![] });
        let body = vec![pfor(0, 0, 3, vec![g])];
        let c = ParChain::of(&body);
        assert_eq!(c.total, 3);
        assert_eq!(c.steps.len(), 1);
        assert!(matches!(c.rest[0], Node::Guard(_)));
        // Two sibling loops are not a single path: nothing is parallel.
        let two = vec![pfor(0, 0, 3, vec![]), pfor(1, 0, 3, vec![])];
        assert_eq!(ParChain::of(&two).total, 1);
        // Empty loop: no thread has work.
        assert_eq!(ParChain::of(&[pfor(0, 5, 2, vec![])]).total, 0);
    }

    #[test]
    fn kernel_names_must_be_identifiers() {
        assert!(check_kernel_name("k0_y").is_ok());
        assert!(check_kernel_name("0k").is_err());
        assert!(check_kernel_name("a.b").is_err());
        assert!(check_kernel_name("").is_err());
    }
}

/// `m` lowered for `flavour`, given `tm`'s triple and data layout, and
/// optimised with LLVM's `default<O3>` pipeline: the one path both the
/// host JIT and PTX emission take.
pub(crate) fn lower_and_optimize<'ctx>(
    ctx: &'ctx Context,
    m: &LoopModule,
    seed: u64,
    flavour: Flavour,
    fp_contract: FpContract,
    tm: &inkwell::targets::TargetMachine,
) -> Result<Module<'ctx>, CodegenError> {
    let module = lower_module(ctx, m, seed, flavour, fp_contract)?;
    module.set_triple(&tm.get_triple());
    module.set_data_layout(&tm.get_target_data().get_data_layout());
    if flavour == Flavour::Host {
        // The JIT makes its own target machine for a generic CPU (MCJIT
        // has no CPU option in LLVM's C API); these attributes make it
        // generate code for the vector units and FMA of this CPU, as O3
        // assumed when it vectorised.
        let cpu = ctx.create_string_attribute("target-cpu", &tm.get_cpu().to_string());
        // A named CPU (HostCpu) has no feature string: its name implies them.
        let features = tm.get_feature_string().to_string_lossy().into_owned();
        let features = (!features.is_empty()).then(|| ctx.create_string_attribute("target-features", &features));
        for f in module.get_functions() {
            if f.count_basic_blocks() > 0 {
                f.add_attribute(AttributeLoc::Function, cpu);
                if let Some(features) = features {
                    f.add_attribute(AttributeLoc::Function, features);
                }
            }
        }
    }
    module
        .run_passes("default<O3>", tm, inkwell::passes::PassBuilderOptions::create())
        .map_err(|e| CodegenError(format!("LLVM optimisation failed: {}", e.to_string())))?;
    Ok(module)
}
