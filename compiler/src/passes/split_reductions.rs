//! `split-reductions` (GPU): a reduction over a contiguous axis into few
//! cells becomes per-lane partial sums and a combine kernel, the `rfactor`
//! of Halide and TVM.
//!
//! The GPU maps the parallel loops above a kernel's write to threads, one
//! thread per written cell, and each thread runs the reduction loops alone.
//! When the reduction runs along the unit-stride axis of the loads
//! (`s[keep] = x[keep,drop]`), neighbouring threads read addresses a whole
//! row apart (32 sectors per warp load instead of 4), and when there are
//! few cells most of the machine idles (2^14 rows: 64 blocks for 132 SMs).
//!
//! For such a kernel, with `L` lanes (`GpuTarget::lanes`, ir/loops/target.rs,
//! halved while each lane would sum few terms, [`candidates`]) and the
//! reduction loop `for r in [lo, hi) reduce` (trip `T`):
//!
//! ```text
//! kernel @K_partial:  for cells.. parallel { for lane in [0, L) parallel {
//!                       store P[slot] = -0.0
//!                       .. for r in [0, (T + L-1 - lane) // L) reduce {   // r renamed r_step
//!                            .. body with r := lo + lane + L*r ..
//!                            accumulate P[slot] += value } } }
//! kernel @K:          for cells.. parallel { for lane in [0, L) reduce {
//!                       %0 = load P[slot]
//!                       accumulate buf[offset] += %0 } }
//! slot = (cell // g)*(g*L) + lane*g + cell % g      (cell*L + lane when g = 1)
//! ```
//!
//! where `C` is the number of cells, `cell` their row-major index and `g`
//! the cells whose lanes share a warp (`32 / L` when that divides `C`, else
//! 1). The lanes of a warp now read consecutive addresses, and there are
//! `L` times as many threads. `P` (a zeroed temporary of `C/g` rows of
//! `g*L`) holds `L*C` partial sums, one warp's in one row, so that the
//! partial kernel's stores are coalesced; the combine kernel's warp reads
//! `32/g` runs of `g` words per lane (no layout coalesces both: a warp's
//! row shares only `g` words with a combine warp's read).
//!
//! Summation order changes: INT addition wraps and is exact in any order,
//! so INT reductions always split; FLOAT ones only under
//! `--fp-contract fast` (the GPU default), which allows reassociation and
//! does not keep the sign of a zero sum (docs/codegen.md#fp-contraction).
//! A `maximize`/`minimize` (`max=`, `min=`) splits the same way under
//! either policy: max is exact in any order. Its lanes start from the
//! combine's identity (-inf for a max) and the combine kernel maximizes
//! the lanes into the cell.
//!
//! Applies only when every load that depends on `r` has stride 1 in it
//! (the coalescing this pass exists for), the kernel's single write is a
//! plain `accumulate` whose offset depends only on the parallel loops and
//! is in bounds on all of them, the kernel reads nothing of the buffer it
//! writes, and `C <= split_max_cells` (above that the cells alone fill the GPU).
//! [`candidates`] lists the splits (lane counts), [`apply`] makes one.
//!
//! A dynamic kernel's reduction of symbolic trip `T` (bounds over the dim
//! symbols) splits the same way: the lane's steps end at `(T + L-1 -
//! lane) // L` (in groups, [`DYN_GROUP`]), `C` and `cell` are expressions
//! over the symbols, and so is `P`'s shape. Its thresholds cannot be
//! evaluated at build time, so a symbolic trip counts as [`DYN_TRIP`]
//! (256), the reduction's and each symbolic cell loop's: a reduction
//! splits when at most two of its cell loops are symbolic (256^2 <= 2^17).
//! A symbolic window (a load moving with the reduction and a cell by the
//! same stride, `x[o + w]`) is a filter, usually a few taps: not assumed
//! long, not split. Many short rows then pay for `P` (`L` partial sums a
//! cell) where a static build would not split; a run-time choice of
//! variant would avoid it (docs/dynamic-shapes.md, "Run-time variants:
//! design"). The write must be provably in bounds by the relational
//! bounds over the symbols (`ir/loops/index32.rs`).

use super::{DriverOptions, Ir, PassError, PassOptions, Unit};
use crate::ir::loops::chain::{symbolic_trip, Chain};
use crate::ir::loops::index32::proved_in_bounds;
use crate::ir::loops::target::GpuTarget;
use crate::ir::loops::*;

/// What `split-reductions` is told: the GPU float policy
/// (`--fp-contract`, also a pass option) and the GPU (`--target`).
#[derive(Clone, Debug)]
pub struct SplitReductionsOptions {
    pub fp_contract: FpContract,
    pub gpu: GpuTarget,
}

impl PassOptions for SplitReductionsOptions {
    const KEYS: &'static [(&'static str, &'static str)] = &[super::spec::FP_CONTRACT];
    fn from_driver(d: &DriverOptions) -> Self {
        SplitReductionsOptions { fp_contract: d.fp_contract, gpu: d.gpu }
    }
    fn set(&mut self, key: &str, value: &str) -> Result<(), String> {
        match key {
            "fp-contract" => self.fp_contract = super::spec::parse_fp_contract(value)?,
            _ => return Err(format!("option `{key}` is not declared")),
        }
        Ok(())
    }
}

pub fn run(unit: &mut Unit, opts: &SplitReductionsOptions) -> Result<Option<String>, PassError> {
    let Ir::Loop(m) = &mut unit.ir else { return Err(PassError::Internal("split-reductions runs on the loop level".into())) };
    let symbolic = m.kernels.iter().any(|k| k.is_symbolic());
    let split = split_module(m, opts.fp_contract, &opts.gpu);
    // The thresholds' rule for trips the build does not know (module doc).
    let rule = if symbolic { format!("; symbolic trips count as {DYN_TRIP} (the reduction's and each cell loop's)") } else { String::new() };
    Ok(Some(format!("{split} reductions split{rule}")))
}

/// What a symbolic trip counts as against the thresholds, the reduction's
/// (`split_min_trip`) and each symbolic cell loop's (`split_max_cells`):
/// the trip `register-tiles` assumes too (its `DYN_TRIP`), so one or two
/// symbolic cell loops split and three do not.
pub const DYN_TRIP: i64 = super::register_tiles::DYN_TRIP;

/// Splits every kernel that qualifies; returns how many.
pub fn split_module(m: &mut LoopModule, policy: FpContract, gpu: &GpuTarget) -> usize {
    let mut n = 0;
    let mut i = 0;
    while i < m.kernels.len() {
        if let Some((partial, combine, buffer)) = split_kernel(m, &m.kernels[i], policy, gpu) {
            m.buffers.push(buffer);
            m.kernels[i] = combine;
            m.kernels.insert(i, partial);
            n += 1;
            i += 1;
        }
        i += 1;
    }
    n
}

/// One way to split a kernel: the reduction loop `r` and the partial sums
/// per cell.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SplitChoice {
    pub r: VarId,
    pub lanes: i64,
}

/// The two kernels and the partial-sum buffer that replace `k`, when `k`
/// qualifies (see the module doc): [`apply`] of the first of
/// [`candidates`].
pub fn split_kernel(m: &LoopModule, k: &Kernel, policy: FpContract, gpu: &GpuTarget) -> Option<(Kernel, Kernel, Buffer)> {
    let choice = *candidates(m, k, policy, gpu).first()?;
    apply(m, k, policy, &choice)
}

/// The splits of `k` the pass would consider, best first (the pass applies
/// the first): the innermost qualifying reduction of at least
/// `gpu.split_min_trip` terms in a kernel of at most `gpu.split_max_cells`
/// cells, first with `gpu.lanes` lanes halved while each lane would sum
/// fewer than `gpu.split_lane_terms` terms, the kernel keeps
/// `gpu.min_threads` threads and at least `gpu.split_min_lanes` lanes are
/// left; then the other powers of two from `gpu.lanes` down to 2.
pub fn candidates(m: &LoopModule, k: &Kernel, policy: FpContract, gpu: &GpuTarget) -> Vec<SplitChoice> {
    let Some((chain, _)) = splittable(m, k, policy) else { return Vec::new() };
    // A symbolic trip counts as `DYN_TRIP` (module doc).
    let cells = chain
        .loops
        .iter()
        .zip(&chain.bounds)
        .fold(1i64, |acc, (&(_, _, trip), (lo, hi))| acc.saturating_mul(if lo.is_symbolic() || hi.is_symbolic() { DYN_TRIP } else { trip }));
    if cells > gpu.split_max_cells {
        return Vec::new();
    }
    // A symbolic window (`x[o + w]`: a filter, usually a few taps) is
    // not assumed long.
    let rest = chain.rest(&k.body);
    let trip = |l: &(VarId, IExpr, IExpr)| match (l.1.as_const(), l.2.as_const()) {
        (Some(lo), Some(hi)) => hi.saturating_sub(lo),
        _ if is_window(rest, l.0, &chain.bound) => 0,
        _ => DYN_TRIP,
    };
    let loops = split_loops(rest);
    let Some(l) = loops.iter().rev().find(|l| trip(l) >= gpu.split_min_trip) else { return Vec::new() };
    let (r, t) = (l.0, trip(l));
    // Fewer lanes where each would sum few terms and the kernel keeps
    // enough threads: the partial sums' bytes stay small beside the loads'.
    let mut first = gpu.lanes;
    while first / 2 >= gpu.split_min_lanes && t < gpu.split_lane_terms * first && cells.saturating_mul(first / 2) >= gpu.min_threads {
        first /= 2;
    }
    let mut out = vec![SplitChoice { r, lanes: first }];
    let mut lanes = gpu.lanes;
    while lanes >= 2 {
        if lanes != first {
            out.push(SplitChoice { r, lanes });
        }
        lanes /= 2;
    }
    out
}

/// The chain and its number of cells (an expression over the dim symbols
/// in a dynamic kernel), when `k`'s write allows a split under `policy`
/// (see the module doc).
fn splittable(m: &LoopModule, k: &Kernel, policy: FpContract) -> Option<(Chain, IExpr)> {
    let dynamic = k.is_symbolic();
    let chain = if dynamic { Chain::of_dynamic(&k.body) } else { Chain::of(&k.body) };
    let cells = chain.cells_expr();
    if cells == IExpr::c(0) || cells.uses_any_var() {
        return None;
    }
    let KernelSum { sum: c, clear: None } = k.reduction()? else { return None };
    let w = &c.write;
    let buf = &m.buffers[w.buf];
    // A max or min is exact in any order; a float sum is not.
    if w.kind.adds() && !policy.reorders_sums_of(buf.dtype) {
        return None;
    }
    let mut outside = false;
    w.offset.for_each_var(&mut |v| outside |= !chain.bound.contains(&v));
    let in_bounds = match buf.len() {
        Some(len) if !dynamic => in_bounds_on_chain(&w.offset, &chain, len),
        // Symbolic extents: the relational bounds over the chain's loops.
        _ => {
            let loops: Vec<_> = chain.loops.iter().zip(&chain.bounds).map(|(l, (lo, hi))| (l.0, lo.clone(), hi.clone())).collect();
            proved_in_bounds(m, k.vars.len(), &loops, &w.offset, &buf.shape)
        }
    };
    if outside || !in_bounds {
        return None;
    }
    Some((chain, cells))
}

/// `k` split as `choice` says, when its write allows a split under
/// `policy`, `choice.r` is a `reduce` loop below the chain with constant
/// (or symbolic) bounds and stride 1 in every load that uses it, and
/// `choice.lanes` is positive (any such choice computes the same sums, in
/// another order; [`candidates`] adds the target's thresholds).
pub fn apply(m: &LoopModule, k: &Kernel, policy: FpContract, choice: &SplitChoice) -> Option<(Kernel, Kernel, Buffer)> {
    let (chain, cells) = splittable(m, k, policy)?;
    let (r, lo, hi) = split_loops(chain.rest(&k.body)).into_iter().find(|l| l.0 == choice.r)?;
    let lanes = choice.lanes;
    if lanes < 1 {
        return None;
    }
    // The steps' arithmetic below is in i64: a trip near its range (hand-
    // written IR; no program's buffers are that long) is left alone.
    if let (Some(a), Some(b)) = (lo.as_const(), hi.as_const()) {
        b.checked_sub(a).and_then(|t| t.checked_add(2 * lanes))?;
    }
    let KernelSum { sum: c, .. } = k.reduction()?;
    let w = &c.write;
    let buf = &m.buffers[w.buf];
    let exact = !buf.dtype.is_float();
    let kind = w.kind;

    // A warp of the partial kernel runs `g` consecutive cells' lanes
    // (threads `cell*L + lane`); one row of `P` holds its partial sums,
    // lane-major within the row: `P[cell / g, lane*g + cell % g]`. The
    // warp's stores fill one row (4 sectors of f32, not one per lane), and
    // the combine kernel's warp, 32 cells at one lane, reads `32/g` runs of
    // `g` words. A warp cannot have both coalesced: each of its store rows
    // shares only `g` words with a combine warp's read.
    let g = warp_group(lanes, &cells);
    let lane = k.vars.len();
    let lane_name = k.unique_var_name("lane");
    let cell = chain.cell_expr();
    let rows = IExpr::fold(IBin::FloorDiv, cells.clone(), IExpr::c(g));
    let partial_buf = Buffer {
        name: m.unique_buffer_name(format!("{}_partial", k.name)),
        dtype: buf.dtype,
        shape: vec![rows, IExpr::c(lanes * g)],
        role: Role::Transient,
        init: Init::Zero,
    };
    let pbuf = m.buffers.len();
    let slot = if g == 1 {
        IExpr::fold(IBin::Add, IExpr::fold(IBin::Mul, cell, IExpr::c(lanes)), IExpr::v(lane))
    } else {
        let row = IExpr::mul(IExpr::bin(IBin::FloorDiv, cell.clone(), IExpr::c(g)), IExpr::c(lanes * g));
        let within = IExpr::add(IExpr::mul(IExpr::v(lane), IExpr::c(g)), IExpr::bin(IBin::Mod, cell, IExpr::c(g)));
        IExpr::add(row, within)
    };

    // The partial kernel: a lane loop around the innermost body, `r`
    // strided by the lanes, the write into `P`.
    let mut partial = k.clone();
    partial.name = format!("{}_partial", k.name);
    partial.role = KernelRole::Partial;
    partial.vars.push(Var { name: lane_name });
    partial.vars[r].name = k.unique_var_name(&format!("{}_step", k.vars[r].name));
    // A symbolic trip, or more than `DYN_GROUP` steps a lane: the steps in
    // unrolled groups plus a last loop (`stride_by_lanes`), over three more
    // variables (LLVM unrolls 64 constant steps only by 8, 3.6 instructions
    // a term against 2).
    // The groups copy `r`'s body (unrolled steps, and the last loop): a
    // body that binds variables itself (an inner loop, an index load) would
    // bind them twice, so it keeps one strided loop.
    let long = match (lo.as_const(), hi.as_const()) {
        (Some(a), Some(b)) => b.saturating_sub(a).saturating_add(lanes - 1) / lanes > DYN_GROUP,
        _ => true,
    } && !loop_body(chain.rest(&k.body), r).is_some_and(binds_variables);
    let groups = long.then(|| {
        let base = k.vars[r].name.clone();
        let mut var = |suffix: &str| {
            partial.vars.push(Var { name: partial.unique_var_name(&format!("{base}_{suffix}")) });
            partial.vars.len() - 1
        };
        Groups { half: var("half"), unroll: var("unroll"), last: var("last") }
    });
    let rest = chain.rest_mut(&mut partial.body);
    let tail = stride_by_lanes(rest, r, &lo, &hi, lane, lanes, groups);
    retarget_write(rest, pbuf, slot.clone());
    // The lane's slot starts from the combine's identity (for a sum -0.0,
    // which keeps the sign of an all-(-0.0) sum; -inf for a max): the
    // kernel does not rely on what `P` holds, and LLVM combines in a
    // register instead of reading `P` first.
    let identity = if kind.adds() && exact { 0.0 } else { kind.identity(buf.dtype) };
    let zero = Value { op: VOp::Const(identity), dtype: buf.dtype };
    let clear = Compute { values: vec![zero], write: Write { kind: WriteKind::Store, buf: pbuf, offset: slot.clone(), value: 0 } };
    let mut body = vec![Node::Compute(clear)];
    body.append(rest);
    rest.push(Node::For(For { var: lane, lo: IExpr::c(0), hi: IExpr::c(lanes), kind: LoopKind::Parallel, body }));

    // Whole groups for every lane (constant steps, a multiple of
    // `DYN_GROUP`): no last loop, no variable for it.
    if let Some(g) = groups.filter(|g| !tail && g.last + 1 == partial.vars.len()) {
        partial.vars.truncate(g.last);
    }

    // The combine kernel: the same cells, the lanes' sums added in order.
    let mut combine = k.clone();
    combine.vars.push(Var { name: k.unique_var_name("lane") });
    let load = Value { op: VOp::Load { buf: pbuf, offset: slot }, dtype: buf.dtype };
    let add = Compute { values: vec![load], write: Write { kind, buf: w.buf, offset: w.offset.clone(), value: 0 } };
    let rest = chain.rest_mut(&mut combine.body);
    *rest = vec![Node::For(For { var: lane, lo: IExpr::c(0), hi: IExpr::c(lanes), kind: LoopKind::Reduce, body: vec![Node::Compute(add)] })];
    Some((partial, combine, partial_buf))
}

/// Threads per warp, for the partial buffer's rows ([`warp_group`]).
const WARP: i64 = 32;

/// The cells whose lanes share a warp of the partial kernel and a row of
/// `P`: `32 / lanes` when `lanes` divides 32 and that many divide a
/// constant `cells` (rows of whole cells), else 1 (cell-major: still one
/// warp's stores in consecutive words).
fn warp_group(lanes: i64, cells: &IExpr) -> i64 {
    match cells.as_const() {
        Some(c) if lanes > 0 && lanes < WARP && WARP % lanes == 0 => {
            (crate::ir::loops::poly::gcd((WARP / lanes) as i128, c as i128).unsigned_abs() as i64).max(1)
        }
        _ => 1,
    }
}

/// Is `offset` in `[0, len)` for every value of the chain's loops?
fn in_bounds_on_chain(offset: &IExpr, chain: &Chain, len: i64) -> bool {
    let range = |v: VarId| chain.loops.iter().find(|l| l.0 == v).map_or((i64::MIN, i64::MAX), |&(_, lo, trip)| (lo, lo + trip - 1));
    let (a, b) = offset.interval(&range);
    a >= 0 && b < len
}

/// The `reduce` loops of `rest` whose bounds use no loop variable
/// (constants, or dim symbols in a dynamic kernel) and with stride 1 in
/// every load that depends on them (at least one does), outermost first:
/// `(var, lo, hi)`.
fn split_loops(rest: &[Node]) -> Vec<(VarId, IExpr, IExpr)> {
    let mut found = Vec::new();
    fn go(nodes: &[Node], all: &[Node], found: &mut Vec<(VarId, IExpr, IExpr)>) {
        for n in nodes {
            if let Node::For(f) = n {
                if f.kind == LoopKind::Reduce && !f.lo.uses_any_var() && !f.hi.uses_any_var() && unit_stride_loads(all, f.var) {
                    found.push((f.var, f.lo.clone(), f.hi.clone()));
                }
            }
            go(n.body(), all, found);
        }
    }
    go(rest, rest, &mut found);
    found
}

/// Calls `f` on the offset of every load (value or index) in `nodes`.
fn load_offsets(nodes: &[Node], f: &mut impl FnMut(&IExpr)) {
    for n in nodes {
        match n {
            Node::LoadIndex { offset, .. } => f(offset),
            Node::Compute(c) => {
                for val in &c.values {
                    if let VOp::Load { offset, .. } = &val.op {
                        f(offset)
                    }
                }
            }
            _ => {}
        }
        load_offsets(n.body(), f);
    }
}

/// Is `r` a window's loop: does a load move with `r` and with a cell
/// variable (one of `cells`) by the same stride (`x[o + w]`)?
fn is_window(nodes: &[Node], r: VarId, cells: &[VarId]) -> bool {
    let mut found = false;
    let mut check = |offset: &IExpr| {
        let lin = offset.linear();
        let stride = lin.coef(&IExpr::v(r));
        found |= stride != 0 && cells.iter().any(|&c| lin.coef(&IExpr::v(c)) == stride);
    };
    load_offsets(nodes, &mut check);
    found
}

/// Does every load (value or index) whose offset uses `v` have stride 1
/// in it, with `v` in no other term, and does at least one load use it?
fn unit_stride_loads(nodes: &[Node], v: VarId) -> bool {
    let (mut ok, mut any) = (true, false);
    let mut check = |offset: &IExpr| {
        if !offset.uses(v) {
            return;
        }
        any = true;
        let lin = offset.linear();
        ok &= lin.coef(&IExpr::v(v)) == 1 && lin.terms.iter().all(|(atom, _)| *atom == IExpr::v(v) || !atom.uses(v));
    };
    load_offsets(nodes, &mut check);
    ok && any
}

/// Steps a lane takes per iteration of its group loop when the trip is
/// symbolic or longer than this (a constant trip: LLVM unrolls 64 steps
/// only by 8, 3.6 instructions a term): two `unroll` loops of [`MAX_UNROLL`]. LLVM unrolls a loop of
/// symbolic trip itself, but keeps one 32-bit index per term and widens
/// each to an address (5 instructions a term: reduce_sum 512x1024 split
/// was 2.5x the static bundle's instructions); the terms of an `unroll`
/// loop are constant offsets from one address (2 a term), and 32 steps
/// are a whole 1024-term row in one group, as the static kernel unrolls it.
const DYN_GROUP: i64 = 2 * MAX_UNROLL;

/// The variables of a symbolic trip's grouped steps: step `DYN_GROUP*r +
/// MAX_UNROLL*half + unroll` in the groups, `last` after them.
#[derive(Clone, Copy)]
struct Groups {
    half: VarId,
    unroll: VarId,
    last: VarId,
}

/// Replaces loop `r` (`[lo, hi)`, trip `T`) by one over the same variable
/// that now counts the lane's steps, `[0, n)` with `n = (T + L-1 - lane)
/// // L` for `L` = `lanes`: every use of `r` below becomes `lo + lane +
/// L*step`. The bound, not a guard, ends the lanes that get one term
/// fewer, so that the body stays unconditional and LLVM keeps the partial
/// sum in a register. A symbolic `T` is `max(hi - lo, 0)`, so no lane's
/// count is negative. With `groups` (a symbolic `T`, or more than
/// [`DYN_GROUP`] steps) the steps go in order [`DYN_GROUP`] at a time
/// (`r` counting groups, `groups`' unrolled loops within one), then the
/// last `n % DYN_GROUP` in a loop over `groups.last`, left out where it
/// is empty for every lane. Returns whether that loop was added.
fn stride_by_lanes(nodes: &mut Vec<Node>, r: VarId, lo: &IExpr, hi: &IExpr, lane: VarId, lanes: i64, groups: Option<Groups>) -> bool {
    let mut inserted = false;
    let term = |step: IExpr| {
        let k = IExpr::add(IExpr::v(lane), IExpr::mul(IExpr::c(lanes), step));
        if *lo == IExpr::c(0) {
            k
        } else {
            IExpr::add(lo.clone(), k)
        }
    };
    for i in 0..nodes.len() {
        match &mut nodes[i] {
            Node::For(f) if f.var == r => {
                f.lo = IExpr::c(0);
                match (lo.as_const(), hi.as_const(), groups) {
                    (Some(clo), Some(chi), None) => {
                        let at = term(IExpr::v(r));
                        for_each_expr_mut(&mut f.body, &mut |e| *e = e.substitute(r, &at));
                        let trip = chi - clo;
                        f.hi = if trip % lanes == 0 {
                            IExpr::c(trip / lanes)
                        } else {
                            IExpr::bin(IBin::FloorDiv, IExpr::sub(IExpr::c(trip + lanes - 1), IExpr::v(lane)), IExpr::c(lanes))
                        };
                    }
                    (_, _, None) => {
                        let at = term(IExpr::v(r));
                        for_each_expr_mut(&mut f.body, &mut |e| *e = e.substitute(r, &at));
                        f.hi = IExpr::bin(IBin::FloorDiv, IExpr::sub(IExpr::add(symbolic_trip(lo, hi), IExpr::c(lanes - 1)), IExpr::v(lane)), IExpr::c(lanes));
                    }
                    (clo, chi, Some(g)) => {
                        // Constant steps where every lane takes as many.
                        let n = match (clo, chi) {
                            (Some(a), Some(b)) if (b - a) % lanes == 0 => IExpr::c((b - a) / lanes),
                            _ => {
                                IExpr::bin(IBin::FloorDiv, IExpr::sub(IExpr::add(symbolic_trip(lo, hi), IExpr::c(lanes - 1)), IExpr::v(lane)), IExpr::c(lanes))
                            }
                        };
                        let whole = IExpr::fold(IBin::FloorDiv, n.clone(), IExpr::c(DYN_GROUP));
                        let mut tail = f.body.clone();
                        let at_last = term(IExpr::v(g.last));
                        for_each_expr_mut(&mut tail, &mut |e| *e = e.substitute(r, &at_last));
                        let step = IExpr::add(
                            IExpr::add(IExpr::mul(IExpr::c(DYN_GROUP), IExpr::v(r)), IExpr::mul(IExpr::c(MAX_UNROLL), IExpr::v(g.half))),
                            IExpr::v(g.unroll),
                        );
                        let at = term(step);
                        let mut body = std::mem::take(&mut f.body);
                        for_each_expr_mut(&mut body, &mut |e| *e = e.substitute(r, &at));
                        let unroll = |var, hi, body| Node::For(For { var, lo: IExpr::c(0), hi: IExpr::c(hi), kind: LoopKind::Unroll, body });
                        f.body = vec![unroll(g.half, DYN_GROUP / MAX_UNROLL, vec![unroll(g.unroll, MAX_UNROLL, body)])];
                        f.hi = whole.clone();
                        let tail_lo = IExpr::fold(IBin::Mul, whole, IExpr::c(DYN_GROUP));
                        if tail_lo != n {
                            nodes.insert(i + 1, Node::For(For { var: g.last, lo: tail_lo, hi: n, kind: LoopKind::Reduce, body: tail }));
                            return true;
                        }
                    }
                }
                return false;
            }
            Node::For(f) => inserted |= stride_by_lanes(&mut f.body, r, lo, hi, lane, lanes, groups),
            Node::Guard(g) => inserted |= stride_by_lanes(&mut g.body, r, lo, hi, lane, lanes, groups),
            _ => {}
        }
    }
    inserted
}

/// The body of the loop over `r` in `nodes`.
fn loop_body(nodes: &[Node], r: VarId) -> Option<&[Node]> {
    nodes.iter().find_map(|n| match n {
        Node::For(f) if f.var == r => Some(f.body.as_slice()),
        Node::For(f) => loop_body(&f.body, r),
        Node::Guard(g) => loop_body(&g.body, r),
        _ => None,
    })
}

/// Does `nodes` bind a variable (a loop, an index load)?
fn binds_variables(nodes: &[Node]) -> bool {
    nodes.iter().any(|n| match n {
        Node::For(_) | Node::LoadIndex { .. } => true,
        Node::Guard(g) => binds_variables(&g.body),
        _ => false,
    })
}

/// Points the (single) write of `nodes` at `buf[offset]`.
fn retarget_write(nodes: &mut [Node], buf: BufId, offset: IExpr) {
    for n in nodes {
        match n {
            Node::Compute(c) => {
                c.write.buf = buf;
                c.write.offset = offset.clone();
            }
            Node::For(f) => retarget_write(&mut f.body, buf, offset.clone()),
            Node::Guard(g) => retarget_write(&mut g.body, buf, offset.clone()),
            Node::LoadIndex { .. } | Node::Sync | Node::Copies(_) => {}
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::interp::loops as li;
    use crate::tensor::{Data, Tensor};

    /// `s[keep] += x[keep, drop]` over `keep` x `drop` as the middle end
    /// leaves it: the parallel `keep` loop, the `drop` reduction.
    fn row_sums(keep: i64, drop: i64, dtype: DType) -> LoopModule {
        let text = format!(
            "buffer x : {t}[{keep}, {drop}] input\nbuffer s : {t}[{keep}] output\n\n\
             kernel @s1_s {{\n  for keep_0 in [0, {keep}) parallel {{\n    for drop_0 in [0, {drop}) reduce {{\n      \
             %0 = load x[((keep_0 * {drop}) + drop_0)] : {t}\n      accumulate s[keep_0] += %0\n    }}\n  }}\n}}\n",
            t = dtype.name()
        );
        parse::parse_verified(&text).unwrap_or_else(|e| panic!("{e:?}\n{text}"))
    }

    fn run(m: &LoopModule, x: &Tensor) -> Tensor {
        let mut bufs: Vec<Tensor> = vec![x.clone()];
        for b in &m.buffers[1..] {
            let shape: Vec<usize> = b.dims().expect("static shape").iter().map(|&d| d as usize).collect();
            bufs.push(Tensor::zeros(b.dtype, &shape).unwrap());
        }
        li::run(m, 0, &mut bufs).unwrap();
        bufs.swap_remove(1)
    }

    #[test]
    fn int_row_sums_split_and_stay_exact() {
        // 100 is not a multiple of 32: the last step is guarded.
        for (keep, drop) in [(3, 100), (5, 64), (1, 4096)] {
            let m = row_sums(keep, drop, DType::I32);
            let mut split = m.clone();
            assert_eq!(split_module(&mut split, FpContract::Off, &GpuTarget::default()), 1, "INT splits under any policy");
            verify::verify(&split).unwrap();
            assert_eq!(split.kernels.len(), 2);
            // Few cells keep all the lanes, one row of `P` per cell.
            assert_eq!(split.buffers[2].shape, static_shape(&[keep, GpuTarget::default().lanes]));
            // Values chosen so that i32 sums wrap: order must not matter.
            let data: Vec<i32> = (0..keep * drop).map(|i| (i as i32).wrapping_mul(1_000_003).wrapping_add(7)).collect();
            let x = Tensor::new(vec![keep as usize, drop as usize], Data::I32(data.clone())).unwrap();
            let want: Vec<i32> =
                (0..keep as usize).map(|r| data[r * drop as usize..(r + 1) * drop as usize].iter().fold(0i32, |a, &b| a.wrapping_add(b))).collect();
            assert_eq!(run(&split, &x).data, Data::I32(want), "{keep}x{drop}");
        }
    }

    #[test]
    fn float_reductions_split_only_when_fast() {
        let m = row_sums(4, 256, DType::F32);
        assert_eq!(split_module(&mut m.clone(), FpContract::Off, &GpuTarget::default()), 0);
        let mut split = m.clone();
        assert_eq!(split_module(&mut split, FpContract::Fast, &GpuTarget::default()), 1);
        let data: Vec<f32> = (0..4 * 256).map(|i| ((i * 37 % 101) as f32) * 0.25).collect();
        let x = Tensor::new(vec![4, 256], Data::F32(data.clone())).unwrap();
        // Lane j sums terms j, j+32, ..; then lanes in order: an
        // independent formula for the new order, compared exactly.
        let want: Vec<f32> = (0..4)
            .map(|r| {
                let row = &data[r * 256..(r + 1) * 256];
                (0..32).map(|j| (0..8).fold(0.0f32, |a, t| a + row[j + 32 * t])).fold(-0.0f32, |a, p| a + p)
            })
            .collect();
        assert_eq!(run(&split, &x).data, Data::F32(want));
    }

    /// Lane `j` of `lanes` sums terms `j, j + lanes, ..` of a row in order,
    /// then the lanes are added in order from -0.0: an independent formula
    /// for the split order.
    fn lanes_then_combine(row: &[f32], lanes: usize) -> f32 {
        (0..lanes).map(|j| row.iter().skip(j).step_by(lanes).fold(-0.0f32, |a, &t| a + t)).fold(-0.0f32, |a, p| a + p)
    }

    #[test]
    fn lanes_halve_where_each_would_sum_few_terms() {
        let gpu = GpuTarget::default();
        let first = |keep, drop| candidates(&row_sums(keep, drop, DType::F32), &row_sums(keep, drop, DType::F32).kernels[0], FpContract::Fast, &gpu)[0].lanes;
        // 512 x 1024: 32 lanes would re-read 1/16 of the loads' bytes; 16
        // lanes keep 8192 threads. Long rows, or few rows, keep 32.
        assert_eq!(first(512, 1024), 16);
        assert_eq!(first(4096, 4096), 32);
        assert_eq!(first(64, 65536), 32);
        assert_eq!(first(64, 1024), 32, "64 x 16 lanes would be fewer than min_threads");
        assert_eq!(first(8192, 64), gpu.split_min_lanes, "no fewer than split_min_lanes");
        // Every power of two still listed, the first one first.
        let m = row_sums(512, 1024, DType::F32);
        let lanes: Vec<i64> = candidates(&m, &m.kernels[0], FpContract::Fast, &gpu).iter().map(|c| c.lanes).collect();
        assert_eq!(lanes, [16, 32, 8, 4, 2]);
    }

    /// The partial kernel's store offset.
    fn store_slot(k: &Kernel) -> IExpr {
        fn go(nodes: &[Node]) -> Option<IExpr> {
            nodes.iter().find_map(|n| match n {
                Node::Compute(c) if c.write.kind == WriteKind::Store => Some(c.write.offset.clone()),
                _ => go(n.body()),
            })
        }
        go(&k.body).expect("the partial kernel clears its slot")
    }

    #[test]
    fn a_warps_partial_stores_fill_one_row() {
        // Thread `cell * L + lane` (the lane loop innermost): the 32 slots
        // of every warp are one aligned run of 32 words, 4 sectors of f32,
        // and all slots are distinct and in the buffer.
        for (keep, drop) in [(512, 1024), (3, 100), (8192, 64), (6, 4096), (1, 4096)] {
            let m = row_sums(keep, drop, DType::F32);
            let mut split = m.clone();
            assert_eq!(split_module(&mut split, FpContract::Fast, &GpuTarget::default()), 1);
            let (partial, len) = (&split.kernels[0], split.buffers[2].len().expect("static"));
            let lanes = split.kernels[0].body.iter().find_map(|n| match n {
                Node::For(f) => f.body.iter().find_map(|n| match n {
                    Node::For(l) => l.hi.as_const(),
                    _ => None,
                }),
                _ => None,
            });
            let (slot, lanes) = (store_slot(partial), lanes.unwrap_or(GpuTarget::default().lanes));
            let lane_var = partial.vars.iter().position(|v| v.name == "lane").expect("lane");
            let mut seen = vec![false; len as usize];
            let mut env = vec![0; partial.vars.len()];
            for t in 0..keep * lanes {
                (env[0], env[lane_var]) = (t / lanes, t % lanes);
                let at = slot.eval(&env);
                assert!((0..len).contains(&at) && !seen[at as usize], "{keep}x{drop}: thread {t} slot {at}");
                seen[at as usize] = true;
                if keep * lanes % 32 == 0 {
                    assert_eq!(at / 32, t / 32, "{keep}x{drop}: thread {t} leaves its warp's row");
                }
            }
            assert!(seen.iter().all(|&s| s), "{keep}x{drop}: every slot written");
        }
    }

    #[test]
    fn float_order_with_fewer_lanes_and_grouped_steps() {
        // 512 x 1024 takes 16 lanes of 64 steps (two groups of 32); 4 x
        // 4096 keeps 32 lanes of 128 steps (four groups), and 4 x 1000 has
        // lanes of 31 and 32 steps. Each lane's terms and the lane order
        // are the independent formula's, compared exactly.
        for (keep, drop, lanes) in [(512, 1024, 16), (4, 4096, 32), (4, 1000, 32), (3, 2100, 32)] {
            let m = row_sums(keep, drop, DType::F32);
            let mut split = m.clone();
            assert_eq!(split_module(&mut split, FpContract::Fast, &GpuTarget::default()), 1);
            verify::verify(&split).unwrap();
            let data: Vec<f32> = (0..keep * drop).map(|i| ((i * 37 % 101) as f32 - 50.0) * 0.37).collect();
            let x = Tensor::new(vec![keep as usize, drop as usize], Data::F32(data.clone())).unwrap();
            let want: Vec<f32> = data.chunks(drop as usize).map(|row| lanes_then_combine(row, lanes)).collect();
            assert_eq!(run(&split, &x).data, Data::F32(want), "{keep}x{drop}");
        }
    }

    #[test]
    fn left_alone_strided_short_or_many_cells() {
        // Column sums: the reduction has stride `keep`, not 1.
        let cols = parse::parse_verified(
            "buffer x : i32[256, 4] input\nbuffer s : i32[4] output\n\nkernel @c {\n  for k in [0, 4) parallel {\n    for d in [0, 256) reduce {\n      %0 = load x[((d * 4) + k)] : i32\n      accumulate s[k] += %0\n    }\n  }\n}\n",
        )
        .unwrap();
        assert_eq!(split_module(&mut cols.clone(), FpContract::Fast, &GpuTarget::default()), 0);
        assert_eq!(
            split_module(&mut row_sums(4, GpuTarget::default().split_min_trip - 1, DType::I32), FpContract::Fast, &GpuTarget::default()),
            0,
            "too short"
        );
        assert_eq!(
            split_module(&mut row_sums(GpuTarget::default().split_max_cells + 1, 64, DType::I32), FpContract::Fast, &GpuTarget::default()),
            0,
            "enough cells"
        );
    }

    #[test]
    fn candidates_list_lane_counts_and_any_one_applies() {
        let (keep, drop) = (3, 100);
        let m = row_sums(keep, drop, DType::I32);
        let gpu = GpuTarget::default();
        let cs = candidates(&m, &m.kernels[0], FpContract::Off, &gpu);
        let drop_var = 1;
        assert_eq!(cs, [32, 16, 8, 4, 2].map(|lanes| SplitChoice { r: drop_var, lanes }).to_vec());
        let data: Vec<i32> = (0..keep * drop).map(|i| (i as i32).wrapping_mul(1_000_003).wrapping_add(7)).collect();
        let x = Tensor::new(vec![keep as usize, drop as usize], Data::I32(data)).unwrap();
        let want = run(&m, &x);
        // Every candidate, and lane counts the pass never picks (3 does not
        // divide 100; 100 lanes of one term each), give the same sums.
        for choice in cs.iter().copied().chain([3, 100, 1].map(|lanes| SplitChoice { r: drop_var, lanes })) {
            let (partial, combine, buffer) = apply(&m, &m.kernels[0], FpContract::Off, &choice).unwrap_or_else(|| panic!("{choice:?}"));
            let mut split = m.clone();
            split.buffers.push(buffer);
            split.kernels = vec![partial, combine];
            verify::verify(&split).unwrap();
            assert_eq!(split.buffers[2].shape, static_shape(&[keep, choice.lanes]), "3 cells: one a row");
            assert_eq!(run(&split, &x).data, want.data, "{choice:?}");
        }
        // The parallel loop is no reduction; FLOAT needs `fast`.
        assert!(apply(&m, &m.kernels[0], FpContract::Off, &SplitChoice { r: 0, lanes: 4 }).is_none());
        let f = row_sums(keep, drop, DType::F32);
        assert!(apply(&f, &f.kernels[0], FpContract::Off, &SplitChoice { r: drop_var, lanes: 4 }).is_none());
        // A target with fewer lanes splits shorter reductions.
        let short = row_sums(keep, 40, DType::I32);
        assert!(candidates(&short, &short.kernels[0], FpContract::Off, &gpu).is_empty());
        let narrow = GpuTarget { lanes: 8, split_min_trip: 16, ..gpu };
        assert_eq!(candidates(&short, &short.kernels[0], FpContract::Off, &narrow).first(), Some(&SplitChoice { r: drop_var, lanes: 8 }));
    }
}
