//! `block-tiles` (GPU): the threads of a block share the operands of a
//! contraction through shared memory, so that each value is read from
//! global memory once per block instead of once per thread.
//!
//! After `register-tiles` a thread loads `TM + TN` values per `k` for its
//! `TM x TN` cells, but neighbouring threads load the same rows of `a` and
//! columns of `b` again: 0.6 to 1.25 bytes of global loads per FMA. Here
//! the two innermost tiled chain loops `m` and `n` split into blocks and
//! the `TI x TJ` threads of one (`m := m*TI + ti`, `n := n*TJ + tj`), the
//! innermost reduction `k` splits into steps of `BK`, and each step first
//! copies what the block will read of every operand that depends on `k` and
//! on some but not all thread dimensions (values threads share) into a
//! shared buffer, all threads together:
//!
//! ```text
//! for m in [0, M/TI) parallel { for n in [0, N/TJ) parallel {          // blocks
//!   for ti in [0, TI) thread { for tj in [0, TJ) thread {              // threads
//!     acc[..] = -0.0 (the cleared cell, or c's value)                  // registers
//!     for k_o in [0, K/BK) reduce {
//!       for e in [0, |a's box|) spread { a_s[e] = a[.. at e ..] }      // cooperative
//!       for e in [0, |b's box|) spread { b_s[e] = b[.. at e ..] }
//!       sync
//!       for k_i in [0, BK) reduce { unroll.. { acc[..] += a_s[..] * b_s[..] } }
//!       sync }
//!     unroll.. { c[..] = acc[..] } } } } }
//! ```
//!
//! A shared buffer holds an operand's *box*: the values its offset takes
//! over the thread, tile and `k_i` variables it depends on (the others are
//! the same in the whole block). The copy walks it with the variable of
//! smallest stride in the operand fastest, so that consecutive threads
//! read consecutive addresses; where the first of every 4 (`f32`; 2 `f64`)
//! consecutive values is provably 16-byte aligned, a thread copies those 4
//! in one step (an inner `unroll` loop that code generation turns into one
//! 128-bit load). The buffer is laid out for the reads: a row per `k_i`,
//! each thread's register-tile values side by side (`[k_i][t // 4]
//! [thread][t % 4]`), so that a thread reads 4 of them in one 128-bit
//! shared load; where those run across the copy's vectors, a thread copies
//! a 4 x 4 block (4 vector loads, 4 vector stores). Rows are padded by
//! whole vectors where that spreads the copy's stores over the banks. The
//! sums live in a `local` buffer (registers after unrolling) across the
//! barriers. Each cell still adds its terms in
//! the original order, starting from the value the kernel stored or found
//! there: results do not change at all.
//!
//! Applies to a kernel whose chain's rest is an optional clear (`store` of a
//! constant in an `unroll` nest, from `fuse-resets`/`register-tiles`) and
//! one perfect nest of `reduce` loops with constant bounds around an
//! `unroll` nest around the single `accumulate` (no guards, no index loads),
//! whose write offset depends on every `unroll` variable (one accumulator
//! per cell) and not on the reductions, and that reads nothing of the
//! buffer it writes. `m` and `n` are the two innermost chain loops the
//! write depends on that no chain guard or index load uses; `TI`, `TJ` are
//! the largest powers of two up to 16 dividing their trips, and the next
//! such loop out splits too where they leave room in a block of 256 (a
//! convolution's output rows); at least 64 threads. `BK` is the whole
//! reduction up to 16 terms, else 16, 8, 4 or 2 where it divides. Shared
//! buffers take at most 48 KiB.
//!
//! A convolution (reductions around the stepped one: its filter taps)
//! whose sum may add its terms in another order (INT always; float under
//! `fp-contract=fast`) and whose trips are static stages a *halo*: its
//! taps run inside each step, which copies the region of each operand the
//! block reads over the whole window once (`build`, `stage_halo`;
//! docs/passes.md, "A halo"). Under `off` each cell keeps its order. The
//! halo is part of the choice ([`BlockChoice::halo`], described `..h`):
//! [`candidates`] offers each block with and without one, and a choice
//! without it (every tuning-table entry measured before halos) builds none.

use super::tuning::{self, Choosing, Source};
use super::{DriverOptions, Ir, PassError, PassOptions, Unit};
use crate::ir::loops::chain::Chain;
use crate::ir::loops::target::GpuTarget;
use crate::ir::loops::verify::MAX_SHARED_BYTES;
use crate::ir::loops::*;

/// What `block-tiles` is told: the GPU (`--target`) and how to choose
/// each kernel's tiling (`choice=`, the tuning table, the heuristic:
/// `tuning.rs`).
#[derive(Clone, Debug)]
pub struct BlockTilesOptions {
    pub gpu: GpuTarget,
    pub choosing: Choosing,
    /// The float policy: `fast` lets a float convolution's sums run in
    /// another order (its channel steps outermost, a halo staged once for
    /// all filter taps); `off` keeps each cell's order. INT sums are exact.
    pub fp_contract: FpContract,
}

impl PassOptions for BlockTilesOptions {
    const KEYS: &'static [(&'static str, &'static str)] = &[tuning::CHOICE, super::spec::FP_CONTRACT];
    fn from_driver(d: &DriverOptions) -> Self {
        BlockTilesOptions { gpu: d.gpu, choosing: Choosing { forced: None, table_sm: d.tuning.then_some(d.gpu.sm) }, fp_contract: d.fp_contract }
    }
    fn set(&mut self, key: &str, value: &str) -> Result<(), String> {
        match key {
            "choice" => tuning::set_choice(&mut self.choosing, value),
            "fp-contract" => {
                self.fp_contract = super::spec::parse_fp_contract(value)?;
                Ok(())
            }
            _ => Err(format!("option `{key}` is not declared")),
        }
    }
}

pub fn run(unit: &mut Unit, opts: &BlockTilesOptions) -> Result<Option<String>, PassError> {
    let Ir::Loop(m) = &mut unit.ir else { return Err(PassError::Internal("block-tiles runs on the loop level".into())) };
    let mut tiled = Vec::new();
    for ki in 0..m.kernels.len() {
        if let Some((what, k, scratch)) = choose(m, &m.kernels[ki], opts) {
            // Scratch buffer ids were numbered from here by `tile_kernel`.
            for mut b in scratch {
                b.name = m.unique_buffer_name(b.name);
                m.buffers.push(b);
            }
            tiled.push(format!("{} {what}", k.name));
            m.kernels[ki] = k;
        }
    }
    Ok(Some(if tiled.is_empty() { "0 kernels tiled".to_string() } else { format!("{} kernels tiled ({})", tiled.len(), tiled.join(", ")) }))
}

/// The pieces of a kernel's rest `block-tiles` recognises.
struct Contraction<'k> {
    /// The clear before the sum: its unroll nest's leaf.
    clear: Option<&'k Compute>,
    /// The clear's unroll nest, outermost first.
    clear_loops: Vec<&'k For>,
    /// The guard around the clear, in a dynamic kernel: that a reduction
    /// loop runs (`lo <= lo < hi`, `drop-unused-loops`), so where it fails
    /// the sum adds nothing either and the cell is left alone.
    clear_guard: Option<&'k [Cond]>,
    /// The perfect `reduce` nest, outermost first.
    reduces: Vec<&'k For>,
    /// The `unroll` nest inside the innermost reduction, outermost first.
    unrolls: Vec<&'k For>,
    /// The guard around the sum (and the clear) inside the unroll nest, in
    /// a dynamic kernel `register-tiles` tiled: that the tile's cell lies
    /// within the symbolic extents (`cell_guard`).
    cell_guard: Option<&'k [Cond]>,
    sum: &'k Compute,
}

/// The computation under an `unroll` nest's leaf: the compute itself, or
/// the compute under one guard (its conditions).
fn guarded_leaf(leaf: &[Node]) -> Option<(&Compute, Option<&[Cond]>)> {
    match leaf {
        [Node::Compute(c)] => Some((c, None)),
        [Node::Guard(g)] => match &g.body[..] {
            [Node::Compute(c)] => Some((c, Some(&g.conds[..]))),
            _ => None,
        },
        _ => None,
    }
}

fn contraction(rest: &[Node]) -> Option<Contraction<'_>> {
    // A guarded clear, and the sum under its guard too (`fuse-resets`,
    // when the guard is that the sum's loops run): the guard is the same
    // as around the clear alone.
    let (guard, clear, main) = match rest {
        [Node::Guard(g)] if g.body.len() == 2 => (Some(g), Some(&g.body[0]), &g.body[1]),
        [main] => (None, None, main),
        [clear, main] => (None, Some(clear), main),
        _ => return None,
    };
    let (reduces, inner) = perfect_nest(std::slice::from_ref(main), LoopKind::Reduce);
    let (unrolls, leaf) = perfect_nest(inner, LoopKind::Unroll);
    let (sum, cell_guard) = guarded_leaf(leaf)?;
    if cell_guard.is_some() && unrolls.is_empty() {
        return None;
    }
    // Bounds the whole block shares: constants, or dim symbols.
    if reduces.is_empty() || reduces.iter().any(|r| r.lo.uses_any_var() || r.hi.uses_any_var()) {
        return None;
    }
    let guarded_clear = match (guard, clear) {
        (Some(g), _) => Some((g, clear)),
        (None, Some(Node::Guard(g))) if g.body.len() == 1 => Some((g, Some(&g.body[0]))),
        _ => None,
    };
    let (clear_guard, clear_node) = match guarded_clear {
        Some((g, clear)) => {
            let runs = |c: &Cond| reduces.iter().any(|r| *c == Cond::InRange { e: r.lo.clone(), lo: r.lo.clone(), hi: r.hi.clone() });
            if !g.conds.iter().all(runs) {
                return None;
            }
            (Some(&g.conds[..]), clear)
        }
        None => (None, clear),
    };
    let (clear, clear_loops) = match clear_node {
        Some(n) => {
            let (loops, leaf) = perfect_nest(std::slice::from_ref(n), LoopKind::Unroll);
            let (c, guard) = guarded_leaf(leaf)?;
            // The clear's cells are guarded as the sum's (its unroll
            // variables renamed to the sum's).
            let renamed = |conds: &[Cond]| -> Vec<Cond> {
                conds
                    .iter()
                    .map(|c| {
                        let mut c = c.clone();
                        for e in c.exprs_mut() {
                            *e = loops.iter().zip(&unrolls).fold(e.clone(), |e, (a, b)| e.substitute(a.var, &IExpr::v(b.var)));
                        }
                        c
                    })
                    .collect()
            };
            if guard.map(renamed).as_deref() != cell_guard || loops.len() != unrolls.len() {
                return None;
            }
            (Some(c), loops)
        }
        None => (None, Vec::new()),
    };
    Some(Contraction { clear, clear_loops, clear_guard, reduces, unrolls, cell_guard, sum })
}

fn trip(l: &For) -> i64 {
    l.hi.as_const().unwrap_or(0) - l.lo.as_const().unwrap_or(0)
}

/// A loop's trip, `None` when it is symbolic (a dynamic kernel's).
fn known_trip(lo: &IExpr, hi: &IExpr) -> Option<i64> {
    Some(hi.as_const()? - lo.as_const()?)
}

/// Largest power of two up to `cap` dividing `n` (n > 0).
fn pow2_factor(n: i64, cap: i64) -> i64 {
    let mut f = 1;
    while f * 2 <= cap && n % (f * 2) == 0 {
        f *= 2;
    }
    f
}

/// One way to block-tile a kernel: the chain loops that become thread
/// dimensions with their threads (`(var, threads)`, outermost first), the
/// reduction step `BK`, and whether a convolution's window is staged as
/// one halo per step (its taps inside the step; [`build`]).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct BlockChoice {
    pub threads: Vec<(VarId, i64)>,
    pub step: i64,
    pub halo: bool,
}

impl BlockChoice {
    /// `16x16k16`: the threads along each thread dimension (outermost
    /// first; they are always the innermost free chain loops) and the
    /// step, then `h` with a halo (`2x2x16k16h`): the name `--stats`,
    /// `choice=` and the tuning table use. A name without the `h` is the
    /// tiling without a halo, as every table entry measured before halos
    /// existed.
    pub fn describe(&self) -> String {
        let threads: Vec<String> = self.threads.iter().map(|t| t.1.to_string()).collect();
        format!("{}k{}{}", threads.join("x"), self.step, if self.halo { HALO_MARK } else { "" })
    }

    /// For the description of a halo choice, that of the same block
    /// without the halo (`2x2x16k16h` -> `2x2x16k16`): its twin, which the
    /// tuner times beside it.
    pub fn halo_twin(described: &str) -> Option<&str> {
        described.strip_suffix(HALO_MARK)
    }
}

/// What ends a halo choice's description ([`BlockChoice::describe`]).
const HALO_MARK: &str = "h";

/// The tiled kernel, a description of the tiling, and the scratch buffers
/// it uses (ids from `m.buffers.len()` on), when `k` qualifies: [`apply`]
/// of the first of [`candidates`].
pub fn tile_kernel(m: &LoopModule, k: &Kernel, gpu: &GpuTarget) -> Option<(String, Kernel, Vec<Buffer>)> {
    first_fitting(m, k, &offered(m, k, gpu, FpContract::Off), gpu, FpContract::Off).map(|(_, t)| t)
}

/// `choice` applied under the float policy `policy` ([`apply_with`]),
/// when its shared buffers fit the target.
fn fitting(m: &LoopModule, k: &Kernel, choice: &BlockChoice, gpu: &GpuTarget, policy: FpContract) -> Option<(String, Kernel, Vec<Buffer>)> {
    apply_with(m, k, choice, policy).filter(|t| shared_bytes(&t.2) <= gpu.shared_bytes_per_block)
}

/// The heuristic's tiling: the first of `all` that fits, applied once
/// (usually the first), with its index. Among [`offered`], a halo that
/// does not fit gives way to the same choice without one.
fn first_fitting(m: &LoopModule, k: &Kernel, all: &[BlockChoice], gpu: &GpuTarget, policy: FpContract) -> Option<(usize, (String, Kernel, Vec<Buffer>))> {
    all.iter().enumerate().find_map(|(j, c)| fitting(m, k, c, gpu, policy).map(|t| (j, t)))
}

/// May `k`'s sum add its terms in another order under `policy`? Always for
/// an exact (INT) sum, for a float one under `fast`.
fn reorders(m: &LoopModule, k: &Kernel, policy: FpContract) -> bool {
    let chain = Chain::of_dynamic(&k.body);
    let Some(c) = contraction(chain.rest(&k.body)) else { return false };
    m.buffers.get(c.sum.write.buf).is_some_and(|b| policy.reorders_sums_of(b.dtype))
}

/// The tiling `opts` chooses for `k` ([`tuning::pick`] among the
/// candidates; a forced or recorded choice that does not fit gives way to
/// the heuristic's), with its description and where it came from.
fn choose(m: &LoopModule, k: &Kernel, opts: &BlockTilesOptions) -> Option<(String, Kernel, Vec<Buffer>)> {
    let policy = opts.fp_contract;
    let all = offered(m, k, &opts.gpu, policy);
    let described: Vec<String> = all.iter().map(BlockChoice::describe).collect();
    let (i, why) = tuning::pick("block-tiles", m, k, &described, &opts.choosing)?;
    let picked = if why == Source::Heuristic { None } else { fitting(m, k, &all[i], &opts.gpu, policy).map(|t| (t, described[i].clone(), why)) };
    let ((what, t, scratch), desc, why) = match picked {
        Some(p) => p,
        None => {
            let (at, t) = first_fitting(m, k, &all, &opts.gpu, policy)?;
            (t, described[at].clone(), Source::Heuristic)
        }
    };
    Some((format!("{desc}: {what}, {why}"), t, scratch))
}

/// The block tilings of `k` the pass would consider under the float
/// policy `policy`, best first (the pass applies the first): the thread
/// dimensions and step of the module doc, then the same threads with the
/// other steps of `gpu.block_tile_steps` that divide the reduction, then
/// blocks with half the threads along one of the two innermost dimensions
/// (at least `gpu.block_tile_min_threads`); where a convolution's halo
/// applies (its sum may reorder under `policy`), each with a halo right
/// before the same without one; only those whose shared buffers (the
/// halo's, for a halo choice) fit `gpu.shared_bytes_per_block`.
pub fn candidates(m: &LoopModule, k: &Kernel, gpu: &GpuTarget, policy: FpContract) -> Vec<BlockChoice> {
    let mut out = offered(m, k, gpu, policy);
    out.retain(|c| fitting(m, k, c, gpu, policy).is_some());
    out
}

/// [`choices`], each right after its halo alternative where `k` is a
/// convolution whose sum may reorder under `policy` (before the
/// shared-memory filter; a halo that does not apply, a dynamic kernel's,
/// fails in [`build`]).
fn offered(m: &LoopModule, k: &Kernel, gpu: &GpuTarget, policy: FpContract) -> Vec<BlockChoice> {
    let plain = choices(k, gpu);
    if !(reorders(m, k, policy) && frame(k).is_some_and(|f| f.2)) {
        return plain;
    }
    plain.into_iter().flat_map(|c| [BlockChoice { halo: true, ..c.clone() }, c]).collect()
}

/// [`candidates`] before the shared-memory filter, best first.
fn choices(k: &Kernel, gpu: &GpuTarget) -> Vec<BlockChoice> {
    let mut out: Vec<BlockChoice> = Vec::new();
    let Some((free, k_trip, windows)) = frame(k) else { return out };
    // A symbolic trip (a dynamic kernel's) takes the largest block and
    // step; the edge blocks and the last step are guarded (`apply`). A
    // convolution's (outer reductions: its window) takes 8 threads along
    // each symbolic dimension, so that its output rows share the block, and
    // a step of 4 channels: its channels are often few, and a step past
    // them copies (and guards) a box mostly empty.
    const ANY: i64 = 1 << 62;
    let symbolic = free.iter().any(|f| f.1.is_none()) || k_trip.is_none();
    let built = if windows { [DYN_WINDOW_THREADS; 3] } else { [ANY; 3] };
    let Some((dims, size)) = thread_dims(&free, built, gpu) else { return out };
    let steps = gpu.block_tile_steps;
    let k_trip = k_trip.unwrap_or(if windows { DYN_WINDOW_STEP } else { ANY });
    let Some(bk) = (if k_trip <= steps[0] { Some(k_trip) } else { steps.iter().copied().find(|&s| k_trip % s == 0) }) else { return out };
    if bk <= 0 {
        return out;
    }
    out.push(BlockChoice { threads: dims.clone(), step: bk, halo: false });
    for &s in &steps {
        if s != bk && s < k_trip && k_trip % s == 0 {
            out.push(BlockChoice { threads: dims.clone(), step: s, halo: false });
        }
    }
    let n = dims.len();
    for d in [n - 1, n - 2] {
        if dims[d].1 >= 2 && size / 2 >= gpu.block_tile_min_threads {
            let mut smaller = dims.clone();
            smaller[d].1 /= 2;
            out.push(BlockChoice { threads: smaller, step: bk, halo: false });
        }
    }
    // A window of symbolic trips also offers the block of many channels
    // (`choice=2x8x16k16`, docs/dynamic-shapes.md).
    if windows && symbolic {
        if let Some((wide, _)) = thread_dims(&free, DYN_WINDOW_WIDE_THREADS, gpu) {
            let wide = BlockChoice { threads: wide, step: DYN_WINDOW_WIDE_STEP, halo: false };
            if !out.contains(&wide) {
                out.push(wide);
            }
        }
        // And the block of few channels (`choice=8x8x1k4`, the `ch8`
        // variant's: a thread's register tile holds them all).
        if let Some((few, _)) = thread_dims(&free, DYN_WINDOW_FEW_THREADS, gpu) {
            let few = BlockChoice { threads: few, step: DYN_WINDOW_STEP, halo: false };
            if !out.contains(&few) {
                out.push(few);
            }
        }
    }
    out
}

/// The thread dimensions from the innermost free chain loop out
/// (`(var, threads)`, outermost first) and the block's size: up to
/// `block_tile_max_dim` threads along each of the first two and a block
/// of `block_tile_max_threads`, a third only where the first two leave
/// room (a convolution's output rows); a symbolic trip counts as
/// `symbolic[i]` at the `i`th from the innermost. `None` when a trip is
/// empty or the block too small.
fn thread_dims(free: &[(VarId, Option<i64>)], symbolic: [i64; 3], gpu: &GpuTarget) -> Option<(Vec<(VarId, i64)>, i64)> {
    let max_block = gpu.block_tile_max_threads;
    let mut dims: Vec<(VarId, i64)> = Vec::new();
    let mut size = 1;
    for (i, &(v, trip)) in free.iter().rev().take(3).enumerate() {
        let trip = trip.unwrap_or(symbolic[i]);
        if trip <= 0 {
            return None;
        }
        let cap = if dims.len() < 2 { gpu.block_tile_max_dim } else { max_block };
        let f = pow2_factor(trip, cap.min(max_block / size));
        if dims.len() == 2 && f < 2 {
            break;
        }
        dims.push((v, f));
        size *= f;
    }
    dims.reverse();
    (dims.len() >= 2 && size >= gpu.block_tile_min_threads).then_some((dims, size))
}

/// Bytes of the shared buffers among `scratch`.
fn shared_bytes(scratch: &[Buffer]) -> i64 {
    scratch.iter().filter(|b| b.role == Role::Shared).map(|b| b.len().unwrap_or(i64::MAX).saturating_mul(b.dtype.size() as i64)).fold(0, i64::saturating_add)
}

/// Threads along each symbolic chain loop of a dynamic convolution.
const DYN_WINDOW_THREADS: i64 = 8;
/// The step of a dynamic convolution's symbolic channel reduction.
const DYN_WINDOW_STEP: i64 = 4;
/// The block of many channels a dynamic convolution also offers: what a
/// symbolic trip counts as, from the innermost (16 output channels, 8
/// columns, the rows the block has room for), and its step.
const DYN_WINDOW_WIDE_THREADS: [i64; 3] = [16, 8, 8];
const DYN_WINDOW_WIDE_STEP: i64 = 16;
/// The block of few channels: one thread along the (tiled) output
/// channels, 8 along the columns and rows.
const DYN_WINDOW_FEW_THREADS: [i64; 3] = [1, 8, 8];

/// The chain loops `k`'s write depends on that no chain guard or index
/// load uses (`(var, lo, trip)`, outermost first), the innermost
/// reduction's trip, and whether reductions enclose it (a convolution's
/// window), when `k` has the shape the pass needs.
fn frame(k: &Kernel) -> Option<(Vec<(VarId, Option<i64>)>, Option<i64>, bool)> {
    let chain = Chain::of_dynamic(&k.body);
    if chain.thread_nest(&k.body).is_some() {
        return None;
    }
    let c = contraction(chain.rest(&k.body))?;
    let w = &c.sum.write.offset;
    let free = chain
        .loops
        .iter()
        .zip(&chain.bounds)
        .filter(|(&(v, ..), _)| w.depends_on(v) && !chain.exprs.iter().any(|e| e.uses(v)))
        .map(|(&(v, ..), (lo, hi))| (v, known_trip(lo, hi)))
        .collect();
    let kl = c.reduces.last()?;
    Some((free, known_trip(&kl.lo, &kl.hi), c.reduces.len() > 1))
}

/// `k` tiled as `choice` says, when the kernel has the shape the pass
/// needs (see the module doc), `choice.threads` are thread dimensions it
/// allows (in chain order, each dividing its loop's trip, at most
/// `MAX_BLOCK_THREADS` together), `choice.step` divides the innermost
/// reduction, and the shared buffers fit the portable 48 KiB (any such
/// choice computes the same cells; [`candidates`] adds the target's
/// thresholds). Returns what [`tile_kernel`] returns.
pub fn apply(m: &LoopModule, k: &Kernel, choice: &BlockChoice) -> Option<(String, Kernel, Vec<Buffer>)> {
    apply_with(m, k, choice, FpContract::Off)
}

/// [`apply`] under the float policy `policy`: exactly `choice`, so a
/// halo choice only where the sum may add its terms in another order
/// ([`reorders`]) and the kernel is a static convolution (reductions
/// around the stepped one; see [`build`]); `None` where it is not.
pub fn apply_with(m: &LoopModule, k: &Kernel, choice: &BlockChoice, policy: FpContract) -> Option<(String, Kernel, Vec<Buffer>)> {
    if choice.halo && !reorders(m, k, policy) {
        return None;
    }
    build(m, k, choice, choice.halo)
}

/// [`apply`]'s tiling; with `halo`, only for a static kernel with
/// reductions around the stepped one (a convolution's window, its filter
/// taps), which then run inside each step: the step stages, once for all
/// taps, the region of each operand the block's cells read over the
/// window (the input's rows and columns of all its output positions
/// widened by the window, a halo) and sums every tap from shared memory.
/// Each cell then adds its terms channel step by channel step, the taps
/// inside: another order than the original's (taps outside, channels
/// inside), so `apply_with` asks for it only where the float policy allows
/// reordering. `None` with `halo` where it does not apply.
fn build(m: &LoopModule, k: &Kernel, choice: &BlockChoice, halo: bool) -> Option<(String, Kernel, Vec<Buffer>)> {
    let mut chain = Chain::of_dynamic(&k.body);
    if chain.thread_nest(&k.body).is_some() {
        return None;
    }
    let rest = chain.rest(&k.body);
    let c = contraction(rest)?;
    // The sum and its clear, as every reshaping pass decides them (the
    // clear's cell is compared below: its unroll nest has its own names).
    let sum = c.sum;
    if !sum.is_plain_sum() || c.clear.is_some_and(|cl| !cl.stores_constant()) {
        return None;
    }
    let (unroll_vars, reduce_vars): (Vec<VarId>, Vec<VarId>) = (c.unrolls.iter().map(|l| l.var).collect(), c.reduces.iter().map(|l| l.var).collect());
    let w = &sum.write.offset;
    if reduce_vars.iter().any(|&v| w.depends_on(v)) || !unroll_vars.iter().all(|&v| w.depends_on(v)) {
        return None;
    }
    let distinct = match c.cell_guard {
        None => cells_distinct(w, &c.unrolls, k.vars.len()),
        Some(conds) => guarded_cells_distinct(w, &c.unrolls, conds, &chain, k.vars.len()),
    };
    if !distinct {
        return None;
    }
    // The clear stores into the same cells, by an unroll nest of the same
    // trips.
    let clear_nest = c.clear.map(|cl| (cl, &c.clear_loops));
    if let Some((cl, loops)) = &clear_nest {
        let same_trips = loops.len() == c.unrolls.len() && loops.iter().zip(&c.unrolls).all(|(a, b)| a.lo == b.lo && a.hi == b.hi);
        let renamed = loops.iter().zip(&c.unrolls).fold(cl.write.offset.clone(), |e, (a, b)| e.substitute(a.var, &IExpr::v(b.var)));
        if !same_trips || cl.write.buf != sum.write.buf || renamed != *w {
            return None;
        }
    }
    // The thread dimensions: the two innermost chain loops the write
    // depends on, free of the chain's guards and index loads.
    // `(var, lo, trip, hi)`: a dynamic chain loop has trip `None`, a
    // constant `lo` and its symbolic `hi`.
    let free: Vec<(VarId, i64, Option<i64>, IExpr)> = chain
        .loops
        .iter()
        .zip(&chain.bounds)
        .filter(|(&(v, ..), _)| w.depends_on(v) && !chain.exprs.iter().any(|e| e.uses(v)))
        .map(|(&(v, lo, _), (elo, ehi))| (v, elo.as_const().unwrap_or(lo), known_trip(elo, ehi), ehi.clone()))
        .collect();
    if chain.bounds.iter().any(|(lo, _)| lo.as_const().is_none()) {
        return None;
    }
    // `(var, lo, trip, threads)`, outermost first, in chain order; a
    // symbolic trip is `None`: its last block is guarded (`edge` below).
    let mut dims: Vec<(VarId, i64, Option<i64>, i64)> = Vec::new();
    let mut next = 0;
    for &(v, f) in &choice.threads {
        let at = free[next..].iter().position(|l| l.0 == v)? + next;
        let (_, lo, trip, _) = free[at];
        if f < 1 || trip.is_some_and(|trip| trip <= 0 || trip % f != 0) {
            return None;
        }
        dims.push((v, lo, trip, f));
        next = at + 1;
    }
    let size: i64 = dims.iter().map(|d| d.3).product();
    if dims.is_empty() || size > MAX_BLOCK_THREADS {
        return None;
    }
    let kl = *c.reduces.last()?;
    // A symbolic reduction runs `K //^ BK` steps, the last one short.
    let k_trip = known_trip(&kl.lo, &kl.hi);
    let bk = choice.step;
    if bk <= 0 || k_trip.is_some_and(|t| t % bk != 0) {
        return None;
    }

    let mut t = k.clone();
    let mut vars = t.vars.clone();
    // `(chain var, lo, trip, threads, thread var)`, outermost first.
    let threads: Vec<(VarId, i64, Option<i64>, i64, VarId)> =
        dims.iter().map(|&(v, lo, trip, f)| (v, lo, trip, f, add_var(&mut vars, &format!("{}_thread", &k.vars[v].name)))).collect();
    let is_thread = |v: VarId| threads.iter().any(|t| t.4 == v);
    let ko_v = add_var(&mut vars, &format!("{}_o", &k.vars[kl.var].name));
    let ki_v = add_var(&mut vars, &format!("{}_i", &k.vars[kl.var].name));
    // m := m_lo + (m - m_lo)*TI + ti for each thread dimension; k := lo +
    // k_o*BK + k_i.
    let at: Vec<(VarId, IExpr)> = threads.iter().map(|&(v, lo, _, f, t)| (v, tile_index(v, lo, f, t))).collect();
    let k_lo = kl.lo.as_const()?;
    let k_at = IExpr::add(IExpr::add(IExpr::c(k_lo), IExpr::mul(IExpr::v(ko_v), IExpr::c(bk))), IExpr::v(ki_v));
    let subst = |e: &IExpr| at.iter().fold(e.clone(), |e, (v, by)| e.substitute(*v, by)).substitute(kl.var, &k_at);
    // A dynamic kernel's edges: the last block along a chain loop of
    // symbolic trip and the last step of a symbolic reduction reach past
    // the ends. `edge(deps, point)` is `lo <= index < hi` for each such
    // loop whose variable `deps` says is used, the index as the tiling
    // writes it (`subst`) at `point` (the copy's element, the tile's cell).
    let edge = |deps: &dyn Fn(VarId) -> bool, point: &dyn Fn(&IExpr) -> IExpr| -> Vec<Cond> {
        let mut conds: Vec<Cond> = dims
            .iter()
            .filter(|d| d.2.is_none() && deps(d.0))
            .filter_map(|&(v, lo, ..)| Some(Cond::InRange { e: point(&subst(&IExpr::v(v))), lo: IExpr::c(lo), hi: free.iter().find(|f| f.0 == v)?.3.clone() }))
            .collect();
        if k_trip.is_none() && deps(kl.var) {
            conds.push(Cond::InRange { e: point(&k_at), lo: kl.lo.clone(), hi: kl.hi.clone() });
        }
        conds
    };
    let subst_all = |c: &Compute| {
        let mut n = vec![Node::Compute(c.clone())];
        for_each_expr_mut(&mut n, &mut |e| *e = subst(e));
        match n.pop() {
            Some(Node::Compute(c)) => c,
            _ => c.clone(),
        }
    };

    // The window's reductions, where they run inside the step (`halo`):
    // static trips, a static kernel.
    let outer = &c.reduces[..c.reduces.len() - 1];
    let static_kernel = k_trip.is_some() && threads.iter().all(|t| t.2.is_some()) && c.cell_guard.is_none() && c.clear_guard.is_none();
    if halo && (outer.is_empty() || !static_kernel || outer.iter().any(|l| known_trip(&l.lo, &l.hi).is_none_or(|t| t <= 0))) {
        return None;
    }
    // Box variables and their trips: threads, tiles, (with a halo the
    // window's reductions,) the step's k_i.
    let mut box_vars: Vec<(VarId, i64, i64)> = threads.iter().map(|t| (t.4, 0, t.3)).collect();
    box_vars.extend(c.unrolls.iter().map(|l| (l.var, l.lo.as_const().unwrap_or(0), trip(l))));
    if halo {
        box_vars.extend(outer.iter().map(|l| (l.var, l.lo.as_const().unwrap_or(0), trip(l))));
    }
    box_vars.push((ki_v, 0, bk));
    let block: i64 = threads.iter().map(|t| t.3).product();
    let uniform = |v: VarId| !box_vars.iter().any(|b| b.0 == v);

    // The sum with the substitutions; operands to stage.
    let mut body = subst_all(sum);
    let mut scratch: Vec<Buffer> = Vec::new();
    let mut stages: Vec<Node> = Vec::new();
    // A symbolic reduction's last step, when short, runs apart (below):
    // its copies also stop at the reduction's end.
    let mut last_stages: Vec<Node> = Vec::new();
    let mut shared_bytes = 0i64;
    // Copies under no edge guard: a guard around each element would keep
    // LLVM from merging a thread's loads, whose spacing then costs sectors.
    let unguarded = k_trip.is_some() && threads.iter().all(|t| t.2.is_some()) && c.cell_guard.is_none();
    for j in 0..body.values.len() {
        let VOp::Load { buf, offset } = body.values[j].op.clone() else { continue };
        let depends = |v: VarId| offset.depends_on(v);
        // Staged only when threads of the block share its values: an
        // operand every thread reads its own of (the partial sums of a
        // split reduction) gains nothing from shared memory.
        if !depends(ki_v) || !threads.iter().any(|t| depends(t.4)) || threads.iter().all(|t| depends(t.4)) {
            continue;
        }
        // Every variable it uses is a box variable or the same in the
        // whole block (chain loops, outer reductions, k_o).
        let mut ok = true;
        offset.for_each_var(&mut |v| ok &= !uniform(v) || chain.bound.contains(&v) || reduce_vars.contains(&v) || v == ko_v);
        if !ok {
            return None;
        }
        if halo {
            let sh = m.buffers.len() + scratch.len();
            let staged = stage_halo(m, k, buf, &offset, &box_vars, ki_v, &is_thread, block, body.values[j].dtype, &mut vars, sh)?;
            shared_bytes += staged.bytes;
            if shared_bytes > MAX_SHARED_BYTES {
                return None;
            }
            scratch.push(staged.buffer);
            body.values[j].op = VOp::Load { buf: sh, offset: staged.read };
            stages.push(staged.copy);
            continue;
        }
        // The copy walks the box with the variable of smallest stride in
        // the operand fastest, so that a warp reads consecutive addresses.
        let lin = offset.linear();
        let stride = |v: VarId| -> i64 {
            let atom = IExpr::v(v);
            let nonlinear = lin.terms.iter().any(|(a, _)| a.uses(v) && *a != atom);
            if nonlinear {
                i64::MAX
            } else {
                lin.coef(&atom).saturating_abs()
            }
        };
        let mut dims: Vec<(VarId, i64, i64)> = box_vars.iter().copied().filter(|&(v, ..)| depends(v)).collect();
        dims.sort_by_key(|&(v, ..)| std::cmp::Reverse(stride(v)));
        let len: i64 = dims.iter().map(|d| d.2).product();
        let dtype = body.values[j].dtype;
        // The shared buffer is laid out for the reads (docs/passes.md,
        // "Shared layout"): one row per k_i, and in a row each thread's
        // values of its register tile side by side, so that it reads up to
        // 16 bytes of them in one vector load; the threads of a warp read
        // consecutive vectors or one broadcast vector.
        let (row_digits, width) = shared_row(&box_vars, ki_v, &depends, &is_thread, 16 / dtype.size() as i64);
        let inner: i64 = row_digits.iter().map(|d| d.trip).product();
        // The element of the box at the point where each box variable `v`
        // is `at(v)`, in rows of `row` elements.
        let sh_index = |row: i64, at: &dyn Fn(VarId) -> IExpr| {
            let cols = row_digits.iter().fold(IExpr::c(0), |a, d| IExpr::add(IExpr::mul(a, IExpr::c(d.trip)), d.of(at(d.var))));
            IExpr::add(IExpr::mul(at(ki_v), IExpr::c(row)), cols)
        };
        let e_v = add_var(&mut vars, &format!("{}_e", &m.buffers[buf].name));
        // Copy element e: the point whose digits (in `dims` order) are e's.
        // A dimension in `groups` (`(var, n, lane)`) takes `n` consecutive
        // values per element (`digit * n + lane`): with `lanes` > 1 the
        // fastest one, with a block also the read vector's tile variable.
        let copy_digits = |e_v: VarId, groups: &[(VarId, i64, IExpr)]| {
            let mut digits: Vec<(VarId, IExpr)> = Vec::new();
            let mut inner_stride = 1i64;
            for (i, &(v, lo, tr)) in dims.iter().enumerate().rev() {
                let group = groups.iter().find(|g| g.0 == v);
                let tr = tr / group.map_or(1, |g| g.1);
                let q = IExpr::bin(IBin::FloorDiv, IExpr::v(e_v), IExpr::c(inner_stride));
                let mut digit = if i == 0 { q } else { IExpr::bin(IBin::Mod, q, IExpr::c(tr)) };
                if let Some((_, n, lane)) = group {
                    digit = IExpr::add(IExpr::mul(digit, IExpr::c(*n)), lane.clone());
                }
                digits.push((v, IExpr::add(digit, IExpr::c(lo))));
                inner_stride *= tr;
            }
            digits
        };
        // Box variables it uses without depending on them (`(i + t) - t`)
        // may take any value: their first.
        let unused = box_vars.iter().filter(|b| !dims.contains(b)).fold(offset.clone(), |e, &(v, lo, _)| e.substitute(v, &IExpr::c(lo)));
        let source_at = |digits: &[(VarId, IExpr)]| digits.iter().fold(unused.clone(), |e, (v, d)| e.substitute(*v, d));
        // A 16-byte load per thread (docs/passes.md, "Vector copies"): the
        // fastest dimension walks the operand with stride 1, its trip is a
        // multiple of the `lanes` elements of 16 bytes, and the first of a
        // thread's elements is provably at a multiple of `lanes`, so that
        // code generation can align it (`IExpr::residue`).
        let lanes = 16 / dtype.size() as i64;
        let fastest = dims.last().map(|d| d.0);
        let stride_1 = dims.last().is_some_and(|&(v, _, tr)| {
            let atom = IExpr::v(v);
            lanes > 1 && tr % lanes == 0 && lin.coef(&atom) == 1 && !lin.terms.iter().any(|(a, _)| a.uses(v) && *a != atom)
        });
        // Guarded copies too in a kernel with dim facts (a run-time
        // variant's): their guards test a vector's first element where that
        // decides all of it (`stage`).
        let vector = (unguarded || !k.multiples.is_empty())
            && stride_1
            && fastest.is_some_and(|f| source_at(&copy_digits(e_v, &[(f, lanes, IExpr::c(0))])).residue_under(lanes, &k.multiples) == Some(0));
        // A dynamic kernel's copy (guarded, its alignment unknown) still
        // takes a thread's `lanes` consecutive elements in one `unroll`:
        // one guard and one address for them (offsets by immediates, scalar
        // loads), where a `spread` over each element divides and guards per
        // element (the bench convolution's copies: 2.3x fewer instructions).
        // Not in a step whose guard moves with the lanes (a last step's
        // channels, a copy along a guarded edge): `index32` bounds an
        // offset without its unrolled part, which a guard on the lanes does
        // not bound (the matmul's operands would lose their limits at their
        // buffers' lengths); such a step copies one element at a time.
        let original = &sum.values[j].op;
        let deps = |v: VarId| matches!(original, VOp::Load { offset, .. } if offset.depends_on(v));
        let main_edges = |at: &dyn Fn(&IExpr) -> IExpr| edge(&|v| v != kl.var && deps(v), at);
        let last_edges = |at: &dyn Fn(&IExpr) -> IExpr| edge(&deps, at);
        let groups_in = |edges: &dyn Fn(&dyn Fn(&IExpr) -> IExpr) -> Vec<Cond>| {
            let cells = c.cell_guard.unwrap_or_default().iter().flat_map(|c| c.exprs()).map(subst);
            let mut exprs = edges(&|e| e.clone()).iter().flat_map(|c| c.exprs()).cloned().collect::<Vec<_>>().into_iter().chain(cells);
            !unguarded && stride_1 && !exprs.any(|e| fastest.is_some_and(|f| e.depends_on(f)))
        };
        let (group_main, group_last) = (groups_in(&main_edges), groups_in(&last_edges));
        let grouped = group_main || group_last;
        let (lanes, e_l) = if vector || grouped { (lanes, Some(add_var(&mut vars, &format!("{}_l", &m.buffers[buf].name)))) } else { (1, None) };
        // Where the reads' vectors run across the copy's (`a`, and `b` of a
        // cyclic tile), a thread copies a block of `width` vectors, one per
        // value of the read vector's tile variable, each of whose `lanes`
        // values goes to another read vector: `width` 16-byte loads and
        // `lanes` vector stores instead of `width * lanes` scalar stores.
        let read_var = row_digits.last().filter(|_| width > 1).map(|d| d.var);
        let across = read_var.filter(|&r| {
            let e_m = IExpr::v(vars.len());
            let groups = [(r, width, e_m), (fastest.unwrap_or(r), lanes, IExpr::c(0))];
            vector && Some(r) != fastest && source_at(&copy_digits(e_v, &groups)).residue_under(lanes, &k.multiples) == Some(0)
        });
        let e_m = across.map(|r| (r, add_var(&mut vars, &format!("{}_m", &m.buffers[buf].name))));
        let mut groups: Vec<(VarId, i64, IExpr)> = e_m.iter().map(|&(r, v)| (r, width, IExpr::v(v))).collect();
        if let (Some(f), Some(l)) = (fastest, e_l) {
            groups.push((f, lanes, IExpr::v(l)));
        }
        let per_element = lanes * if e_m.is_some() { width } else { 1 };
        let digits = copy_digits(e_v, &groups);
        let at_of = |digits: &[(VarId, IExpr)]| {
            let digits = digits.to_vec();
            move |v: VarId| digits.iter().find(|d| d.0 == v).map_or(IExpr::c(0), |d| d.1.clone())
        };
        // Rows padded where that spreads the copy's stores over more banks,
        // by whole vectors so that every row starts aligned for the reads.
        let mut unrolled: Vec<(VarId, i64)> = e_m.iter().map(|&(_, v)| (v, width)).collect();
        unrolled.extend(e_l.map(|l| (l, lanes)));
        let copies = CopyWarps { e_v, unrolled: unrolled.clone(), iterations: len / per_element, block, elem: dtype.size() as i64, nvars: vars.len() };
        // The least padding with the fewest conflicts; counting stops at
        // the first conflict-free one (a straight copy's: no padding).
        let mut best = (i64::MAX, inner);
        for r in (0..).map(|p| inner + p * width).take_while(|&r| (r - inner) * (dtype.size() as i64) <= 4 * BANKS) {
            let conflicts = copies.bank_conflicts(&sh_index(r, &at_of(&digits)));
            if conflicts < best.0 {
                best = (conflicts, r);
            }
            if conflicts == 0 {
                break;
            }
        }
        let row = best.1;
        shared_bytes += bk * row * dtype.size() as i64;
        if shared_bytes > MAX_SHARED_BYTES {
            return None;
        }
        let sh = m.buffers.len() + scratch.len();
        scratch.push(Buffer {
            name: format!("{}_{}_shared", k.name, m.buffers[buf].name),
            dtype,
            shape: static_shape(&[bk, row]),
            role: Role::Shared,
            init: Init::Zero,
        });
        body.values[j].op = VOp::Load { buf: sh, offset: sh_index(row, &IExpr::v) };
        // Past an edge the copy loads nothing: the slots it leaves are read
        // only by cells past the edge (never stored) or by `k_i` the
        // shortened last step does not reach. One step's copy: `spread`
        // over the elements, a thread's `lanes` of them `unrolled` where
        // `whole` (else one at a time), under the edge conditions `edges`
        // gives at the element.
        let alone = copy_digits(e_v, &[]);
        let stage = |whole: bool, edges: &dyn Fn(&dyn Fn(&IExpr) -> IExpr) -> Vec<Cond>| -> Option<Node> {
            let (digits, unrolled, per_element) = if whole { (&digits[..], &unrolled[..], per_element) } else { (&alone[..], &[][..], 1) };
            let copy = Compute {
                values: vec![Value { op: VOp::Load { buf, offset: source_at(digits) }, dtype }],
                write: Write { kind: WriteKind::Store, buf: sh, offset: sh_index(row, &at_of(digits)), value: 0 },
            };
            let at_copy = |e: &IExpr| {
                box_vars
                    .iter()
                    .filter(|b| !dims.contains(b))
                    .fold(digits.iter().fold(e.clone(), |e, (v, d)| e.substitute(*v, d)), |e, &(v, lo, _)| e.substitute(v, &IExpr::c(lo)))
            };
            let mut conds = edges(&at_copy);
            // A register tile's cells past a symbolic extent (`cell_guard`):
            // the copy loads only where the cell its element belongs to is
            // in range, when the operand moves with that cell (a `b` does
            // not move with `a`'s rows: any row it is read for is in range).
            for cond in c.cell_guard.unwrap_or_default() {
                let Cond::InRange { e, lo, hi } = cond else { return None };
                let e = subst(e);
                let moves: Vec<bool> = box_vars.iter().filter(|b| e.depends_on(b.0)).map(|b| offset.depends_on(b.0)).collect();
                if moves.iter().all(|&d| d) && !moves.is_empty() {
                    conds.push(Cond::InRange { e: at_copy(&e), lo: lo.clone(), hi: at_copy(&subst(hi)) });
                } else if moves.iter().any(|&d| d) {
                    return None;
                }
            }
            // A condition the same for each lane (one that does not move
            // with the lanes, or moves by whole vectors under the kernel's
            // dim facts) is tested once, at the first lane, around the
            // lanes: one guard for a thread's elements, and a vector's
            // loads stay together (one 128-bit load); the others guard
            // each element.
            let (at_first, each): (Vec<Cond>, Vec<Cond>) = match e_l.filter(|_| whole) {
                Some(l) => conds.into_iter().partition(|c| c.same_across_lanes(l, lanes, &k.multiples)),
                None => (Vec::new(), conds),
            };
            let body = unrolled.iter().rev().fold(guarded(each, copy), |body, &(l, n)| {
                let lanes = Node::For(For { var: l, lo: IExpr::c(0), hi: IExpr::c(n), kind: LoopKind::Unroll, body: vec![body] });
                if Some(l) != e_l || at_first.is_empty() {
                    return lanes;
                }
                let mut first = at_first.clone();
                for e in first.iter_mut().flat_map(Cond::exprs_mut) {
                    *e = e.substitute(l, &IExpr::c(0));
                }
                Node::Guard(Guard { conds: first, body: vec![lanes] })
            });
            Some(Node::For(For { var: e_v, lo: IExpr::c(0), hi: IExpr::c(len / per_element), kind: LoopKind::Spread, body: vec![body] }))
        };
        stages.push(stage(vector || group_main, &main_edges)?);
        last_stages.push(stage(vector || group_last, &last_edges)?);
    }
    // An operand left in global memory that moves with a thread dimension
    // of symbolic trip would be read past the edge by the last block's
    // cells past it (never stored, but the read may leave the array).
    // So would one that moves with a guarded cell of a register tile.
    let mut cell_vars: Vec<VarId> = Vec::new();
    for cond in c.cell_guard.unwrap_or_default() {
        for e in cond.exprs() {
            subst(e).for_each_var(&mut |v| cell_vars.push(v));
        }
    }
    let past_edge = |e: &IExpr| threads.iter().any(|t| t.2.is_none() && e.depends_on(t.4)) || cell_vars.iter().any(|&v| !uniform(v) && e.depends_on(v));
    if stages.is_empty() || body.values.iter().any(|v| matches!(&v.op, VOp::Load { buf, offset } if *buf < m.buffers.len() && past_edge(offset))) {
        return None;
    }

    // One accumulator per cell of the thread's tile, in a local buffer.
    let acc = m.buffers.len() + scratch.len();
    let dtype = m.buffers[sum.write.buf].dtype;
    let tile: Vec<(VarId, i64, i64)> = c.unrolls.iter().map(|l| (l.var, l.lo.as_const().unwrap_or(0), trip(l))).collect();
    scratch.push(Buffer {
        name: format!("{}_acc", k.name),
        dtype,
        shape: if tile.is_empty() { static_shape(&[1]) } else { tile.iter().map(|d| IExpr::Const(d.2)).collect() },
        role: Role::Local,
        init: Init::Zero,
    });
    let acc_at = |vs: &[VarId]| {
        tile.iter().zip(vs).fold(IExpr::c(0), |a, (&(_, lo, tr), &v)| IExpr::add(IExpr::mul(a, IExpr::c(tr)), IExpr::sub(IExpr::v(v), IExpr::c(lo))))
    };
    body.write = Write { kind: WriteKind::Accumulate, buf: acc, offset: acc_at(&unroll_vars), value: body.write.value };
    // `unroll` loops over fresh copies of the tile variables around `leaf`.
    let mut tile_nest = |what: &str, make: &dyn Fn(&[VarId]) -> Node| {
        let fresh: Vec<VarId> = tile.iter().map(|&(v, ..)| add_var(&mut vars, &format!("{}_{what}", &k.vars[v].name))).collect();
        let leaf = make(&fresh);
        tile.iter().zip(&fresh).rev().fold(leaf, |inner, (&(_, lo, tr), &v)| {
            Node::For(For { var: v, lo: IExpr::c(lo), hi: IExpr::c(lo + tr), kind: LoopKind::Unroll, body: vec![inner] })
        })
    };
    let rename = |e: &IExpr, to: &[VarId]| unroll_vars.iter().zip(to).fold(subst(e), |e, (&u, &f)| e.substitute(u, &IExpr::v(f)));
    // The cell's own edges (the write depends on every thread dimension),
    // and, with a guarded clear, that the reduction runs at all: where it
    // does not, the kernel leaves the cell alone.
    let cell_edges = |f: &[VarId]| {
        let mut conds = edge(&|v| dims.iter().any(|d| d.0 == v), &|e| unroll_vars.iter().zip(f).fold(e.clone(), |e, (&u, &f)| e.substitute(u, &IExpr::v(f))));
        conds.extend(c.clear_guard.unwrap_or_default().iter().cloned());
        // A register tile's cells within the symbolic extents.
        for cond in c.cell_guard.unwrap_or_default() {
            let mut cond = cond.clone();
            for e in cond.exprs_mut() {
                *e = rename(e, f);
            }
            conds.push(cond);
        }
        conds
    };
    let init = tile_nest("init", &|f| match c.clear {
        Some(cl) => Node::Compute(Compute {
            values: vec![cl.values[cl.write.value].clone()],
            write: Write { kind: WriteKind::Store, buf: acc, offset: acc_at(f), value: 0 },
        }),
        None => guarded(
            cell_edges(f),
            Compute {
                values: vec![Value { op: VOp::Load { buf: sum.write.buf, offset: rename(w, f) }, dtype }],
                write: Write { kind: WriteKind::Store, buf: acc, offset: acc_at(f), value: 0 },
            },
        ),
    });
    let flush = tile_nest("out", &|f| {
        guarded(
            cell_edges(f),
            Compute {
                values: vec![Value { op: VOp::Load { buf: acc, offset: acc_at(f) }, dtype }],
                write: Write { kind: WriteKind::Store, buf: sum.write.buf, offset: rename(w, f), value: 0 },
            },
        )
    });
    t.vars = vars;

    // The step: stage, sync, the original unroll nest over k_i, sync.
    let leaf = Node::Compute(body);
    let unrolled = c
        .unrolls
        .iter()
        .rev()
        .fold(leaf, |inner, l| Node::For(For { var: l.var, lo: l.lo.clone(), hi: l.hi.clone(), kind: LoopKind::Unroll, body: vec![inner] }));
    // With a halo the window's reductions run inside the step, around k_i.
    let inside = if halo { outer } else { &[][..] };
    let step = |stages: Vec<Node>, ki_hi: IExpr| {
        let mut step = stages;
        step.push(Node::Sync);
        let sum = Node::For(For { var: ki_v, lo: IExpr::c(0), hi: ki_hi, kind: LoopKind::Reduce, body: vec![unrolled.clone()] });
        step.push(
            inside
                .iter()
                .rev()
                .fold(sum, |inner, l| Node::For(For { var: l.var, lo: l.lo.clone(), hi: l.hi.clone(), kind: LoopKind::Reduce, body: vec![inner] })),
        );
        step.push(Node::Sync);
        step
    };
    let steps = match k_trip {
        Some(t) => vec![Node::For(For { var: ko_v, lo: IExpr::c(0), hi: IExpr::c(t / bk), kind: LoopKind::Reduce, body: step(stages, IExpr::c(bk)) })],
        // A symbolic reduction: its whole steps, then its last `K % BK`
        // terms in a loop of zero or one step (bounds the same for every
        // thread: no guard around `sync`). Whole steps keep a constant
        // `k_i` trip, which code generation unrolls.
        None => {
            let len = offset_from(&kl.hi, k_lo);
            let whole = IExpr::bin(IBin::FloorDiv, len.clone(), IExpr::c(bk));
            let short = IExpr::sub(len.clone(), IExpr::mul(IExpr::v(ko_v), IExpr::c(bk)));
            let last = Node::For(For {
                var: ko_v,
                lo: whole.clone(),
                hi: IExpr::bin(IBin::CeilDiv, len, IExpr::c(bk)),
                kind: LoopKind::Reduce,
                body: step(last_stages, short),
            });
            let mut nodes = vec![Node::For(For { var: ko_v, lo: IExpr::c(0), hi: whole, kind: LoopKind::Reduce, body: step(stages, IExpr::c(bk)) })];
            nodes.extend(fresh_copy(&[last], &mut t.vars, "last"));
            nodes
        }
    };
    let around = if halo { &[][..] } else { outer };
    let reduction = around
        .iter()
        .rev()
        .fold(steps, |inner, l| vec![Node::For(For { var: l.var, lo: l.lo.clone(), hi: l.hi.clone(), kind: LoopKind::Reduce, body: inner })]);
    let mut program = vec![init];
    program.extend(reduction);
    program.push(flush);
    let nest =
        threads.iter().rev().fold(program, |body, &(.., f, t)| vec![Node::For(For { var: t, lo: IExpr::c(0), hi: IExpr::c(f), kind: LoopKind::Thread, body })]);
    for &(v, lo, trip, f, _) in &threads {
        match trip {
            Some(trip) => chain.set_trip(&mut t.body, v, trip / f),
            // `(hi - lo) //^ f` blocks, the last one guarded.
            None => {
                let blocks = IExpr::bin(IBin::CeilDiv, offset_from(&free.iter().find(|x| x.0 == v)?.3, lo), IExpr::c(f));
                chain.set_hi(&mut t.body, v, if lo == 0 { blocks } else { IExpr::add(IExpr::c(lo), blocks) })
            }
        }
    }
    *chain.rest_mut(&mut t.body) = nest;
    let shape: Vec<String> = threads.iter().map(|t| t.3.to_string()).collect();
    let what = format!("{} threads, k step {bk}, {}{} shared bytes", shape.join("x"), if halo { "halo, " } else { "" }, shared_bytes);
    Some((what, t, scratch))
}

/// One dimension of a halo box: the operand's elements `stride` apart,
/// `ext` of them, at the index `sum(mult * (var - lo))` of the box
/// variables `parts` (`(var, lo, mult)`).
#[derive(Clone, Debug, PartialEq)]
struct HaloDim {
    stride: i64,
    ext: i64,
    parts: Vec<(VarId, i64, i64)>,
}

/// The operand offset `offset` as `base + sum(stride * index)` over halo
/// dimensions: `base` the offset at the first point of the box (free of
/// box variables), then `k_i`'s dimension alone (a shared row each), then
/// the others. The box variables the offset depends on, in order of
/// stride, join the first dimension whose stride divides theirs by at
/// most its extent so far (its indices then still run without a gap:
/// `x + 8*t` over `x < 8`, then `+ i` over a filter's `i < 3`: 34 columns,
/// not 8 x 4 x 3), else open their own. `None` where the offset is not
/// affine in them with positive strides.
fn halo_dims(offset: &IExpr, box_vars: &[(VarId, i64, i64)], ki_v: VarId) -> Option<(IExpr, HaloDim, Vec<HaloDim>)> {
    let lin = offset.linear();
    let mut base = offset.clone();
    let mut used: Vec<(VarId, i64, i64, i64)> = Vec::new();
    for &(v, lo, trip) in box_vars {
        base = base.substitute(v, &IExpr::c(lo));
        if !offset.depends_on(v) {
            continue;
        }
        let atom = IExpr::v(v);
        let c = lin.coef(&atom);
        if c <= 0 || trip <= 0 || lin.terms.iter().any(|(a, _)| a.uses(v) && *a != atom) {
            return None;
        }
        used.push((v, lo, trip, c));
    }
    let at = used.iter().position(|u| u.0 == ki_v)?;
    let (v, lo, trip, c) = used.remove(at);
    let k = HaloDim { stride: c, ext: trip, parts: vec![(v, lo, 1)] };
    used.sort_by_key(|u| u.3);
    let mut dims: Vec<HaloDim> = Vec::new();
    for (v, lo, trip, c) in used {
        match dims.iter_mut().find(|d| c % d.stride == 0 && c / d.stride <= d.ext) {
            Some(d) => {
                let mult = c / d.stride;
                d.ext = d.ext.checked_add(mult.checked_mul(trip - 1)?)?;
                d.parts.push((v, lo, mult));
            }
            None => dims.push(HaloDim { stride: c, ext: trip, parts: vec![(v, lo, 1)] }),
        }
    }
    Some((base, k, dims))
}

/// One operand staged as a halo: its shared buffer, the copy loop, the
/// index the sum reads it at, and the buffer's bytes.
struct HaloStage {
    buffer: Buffer,
    copy: Node,
    read: IExpr,
    bytes: i64,
}

/// Stages the operand `buf` read at `offset` as a halo ([`halo_dims`]):
/// the shared buffer holds a row per `k_i`, in it the other dimensions
/// (largest stride outermost); the copy walks the box in the operand's
/// order (smallest stride fastest: consecutive threads, consecutive
/// addresses), a thread's 4 (`f32`; 2 `f64`) consecutive elements in one
/// 128-bit load where the fastest dimension has stride 1 and they provably
/// start aligned; rows are padded where that spreads the copy's stores over
/// more banks (by whole vectors where the reads could be vectors).
#[allow(clippy::too_many_arguments)]
fn stage_halo(
    m: &LoopModule,
    k: &Kernel,
    buf: BufId,
    offset: &IExpr,
    box_vars: &[(VarId, i64, i64)],
    ki_v: VarId,
    is_thread: &dyn Fn(VarId) -> bool,
    block: i64,
    dtype: DType,
    vars: &mut Vec<Var>,
    sh: BufId,
) -> Option<HaloStage> {
    let (base, kd, mut others) = halo_dims(offset, box_vars, ki_v)?;
    others.sort_by_key(|d| std::cmp::Reverse(d.stride));
    let inner = others.iter().try_fold(1i64, |a, d| a.checked_mul(d.ext))?;
    let len = inner.checked_mul(kd.ext)?;
    if len.checked_mul(dtype.size() as i64)? > MAX_SHARED_BYTES {
        return None;
    }
    // All dimensions (0: k_i's, 1..: `others`) in the copy's order,
    // outermost first.
    let all: Vec<&HaloDim> = std::iter::once(&kd).chain(&others).collect();
    let mut order: Vec<usize> = (0..all.len()).collect();
    order.sort_by_key(|&d| std::cmp::Reverse(all[d].stride));
    let fastest = *order.last()?;
    let name = &m.buffers[buf].name;
    let e_v = add_var(vars, &format!("{name}_e"));
    let max_lanes = 16 / dtype.size() as i64;
    let lanes_var = vars.len();
    // The copy's element `e` (lane `l`): a digit per dimension.
    let digits = |lanes: i64, l: &IExpr| -> Vec<IExpr> {
        let mut out = vec![IExpr::c(0); all.len()];
        let mut stride = 1i64;
        for (i, &d) in order.iter().enumerate().rev() {
            let tr = if d == fastest { all[d].ext / lanes } else { all[d].ext };
            let q = IExpr::bin(IBin::FloorDiv, IExpr::v(e_v), IExpr::c(stride));
            let mut digit = if i == 0 { q } else { IExpr::bin(IBin::Mod, q, IExpr::c(tr)) };
            if d == fastest && lanes > 1 {
                digit = IExpr::add(IExpr::mul(digit, IExpr::c(lanes)), l.clone());
            }
            out[d] = digit;
            stride *= tr;
        }
        out
    };
    let source = |ds: &[IExpr]| all.iter().zip(ds).fold(base.clone(), |e, (d, x)| IExpr::add(e, IExpr::mul(x.clone(), IExpr::c(d.stride))));
    let vector = max_lanes > 1
        && all[fastest].stride == 1
        && all[fastest].ext % max_lanes == 0
        && source(&digits(max_lanes, &IExpr::c(0))).residue_under(max_lanes, &k.multiples) == Some(0);
    let lanes = if vector { max_lanes } else { 1 };
    let e_l = vector.then(|| add_var(vars, &format!("{name}_l")));
    debug_assert!(e_l.is_none_or(|l| l == lanes_var));
    let ds = digits(lanes, &IExpr::v(lanes_var));
    // Shared strides of `others`: row-major, innermost 1.
    let mut sstrides = vec![1i64; others.len()];
    for i in (0..others.len().saturating_sub(1)).rev() {
        sstrides[i] = sstrides[i + 1] * others[i + 1].ext;
    }
    let sh_at = |row: i64, ki: IExpr, rest: &[IExpr]| {
        rest.iter().zip(&sstrides).fold(IExpr::mul(ki, IExpr::c(row)), |e, (x, &s)| IExpr::add(e, IExpr::mul(x.clone(), IExpr::c(s))))
    };
    let store_at = |row: i64| sh_at(row, ds[0].clone(), &ds[1..]);
    // Padding: by whole vectors where a thread reads the innermost
    // dimension's elements as vectors (a register tile's `W` consecutive
    // values, every other part moving by whole vectors), else by elements.
    let vector_reads = others.last().is_some_and(|d| {
        d.parts.iter().any(|&(v, _, mult)| mult == 1 && !is_thread(v) && box_vars.iter().any(|b| b.0 == v && b.2 % max_lanes == 0))
            && d.parts.iter().all(|&(v, _, mult)| mult % max_lanes == 0 || (mult == 1 && !is_thread(v)))
    });
    let pad = if vector_reads { max_lanes } else { 1 };
    let copies = CopyWarps {
        e_v,
        unrolled: e_l.map(|l| (l, lanes)).into_iter().collect(),
        iterations: len / lanes,
        block,
        elem: dtype.size() as i64,
        nvars: vars.len(),
    };
    let mut best = (i64::MAX, inner);
    for r in (0..).map(|p| inner + p * pad).take_while(|&r| (r - inner) * (dtype.size() as i64) <= 4 * BANKS) {
        let conflicts = copies.bank_conflicts(&store_at(r));
        if conflicts < best.0 {
            best = (conflicts, r);
        }
        if conflicts == 0 {
            break;
        }
    }
    let row = best.1;
    let index = |d: &HaloDim| d.parts.iter().fold(IExpr::c(0), |e, &(v, lo, mult)| IExpr::add(e, IExpr::mul(offset_from(&IExpr::v(v), lo), IExpr::c(mult))));
    let read = sh_at(row, index(&kd), &others.iter().map(index).collect::<Vec<_>>());
    let copy = Compute {
        values: vec![Value { op: VOp::Load { buf, offset: source(&ds) }, dtype }],
        write: Write { kind: WriteKind::Store, buf: sh, offset: store_at(row), value: 0 },
    };
    let mut node = Node::Compute(copy);
    if let Some(l) = e_l {
        node = Node::For(For { var: l, lo: IExpr::c(0), hi: IExpr::c(lanes), kind: LoopKind::Unroll, body: vec![node] });
    }
    let copy = Node::For(For { var: e_v, lo: IExpr::c(0), hi: IExpr::c(len / lanes), kind: LoopKind::Spread, body: vec![node] });
    let bytes = kd.ext.checked_mul(row)?.checked_mul(dtype.size() as i64)?;
    let buffer = Buffer { name: format!("{}_{name}_shared", k.name), dtype, shape: static_shape(&[kd.ext, row]), role: Role::Shared, init: Init::Zero };
    Some(HaloStage { buffer, copy, read, bytes })
}

/// Shared-memory banks: 32 of 4 bytes.
const BANKS: i64 = 32;

/// One digit of a shared row's index: `((x - lo) // div) % trip` of the
/// box variable `var` at `x`, where `whole` is the variable's trip.
#[derive(Clone, Copy, Debug)]
struct Digit {
    var: VarId,
    lo: i64,
    div: i64,
    trip: i64,
    whole: i64,
}

impl Digit {
    fn of(&self, x: IExpr) -> IExpr {
        let mut e = IExpr::sub(x, IExpr::c(self.lo));
        if self.div > 1 {
            e = IExpr::bin(IBin::FloorDiv, e, IExpr::c(self.div));
        }
        if self.div * self.trip < self.whole {
            e = IExpr::bin(IBin::Mod, e, IExpr::c(self.trip));
        }
        e
    }
}

/// The digits of a shared row (after `k_i`), outermost first, and the
/// elements a thread reads in one vector load: the register tile's
/// variables the operand `depends` on, the innermost of them (trip `T`)
/// split at `W`, the largest power of two up to `lanes` (16 bytes)
/// dividing `T`; its outer digit with the other tile variables, then the
/// thread variables, then its inner digit. A thread's `W` values for one
/// outer digit lie side by side, aligned to `W` elements where the row's
/// length is a multiple of `W`; the threads of a warp read consecutive
/// vectors (or one, broadcast). `W` is 1 (no vector) for an odd tile.
fn shared_row(
    box_vars: &[(VarId, i64, i64)],
    ki_v: VarId,
    depends: &dyn Fn(VarId) -> bool,
    is_thread: &dyn Fn(VarId) -> bool,
    lanes: i64,
) -> (Vec<Digit>, i64) {
    let whole = |&(var, lo, trip): &(VarId, i64, i64)| Digit { var, lo, div: 1, trip, whole: trip };
    let tiles: Vec<Digit> = box_vars.iter().filter(|&&(v, ..)| v != ki_v && !is_thread(v) && depends(v)).map(whole).collect();
    let threads = box_vars.iter().filter(|&&(v, ..)| is_thread(v) && depends(v)).map(whole);
    let Some((&last, outer)) = tiles.split_last() else { return (threads.collect(), 1) };
    let width = pow2_factor(last.trip, lanes);
    let mut row = outer.to_vec();
    if width < last.trip {
        row.push(Digit { div: width, trip: last.trip / width, ..last });
    }
    row.extend(threads);
    row.push(Digit { trip: width, ..last });
    (row, width)
}

/// How a block's threads run one copy loop (`spread` over `iterations`
/// of `e_v`, iteration `e` on thread `e mod block`, the `unrolled` loops
/// `(var, trip)` inside, outermost first: at most two), for counting its
/// stores' bank conflicts.
struct CopyWarps {
    e_v: VarId,
    unrolled: Vec<(VarId, i64)>,
    iterations: i64,
    block: i64,
    /// Bytes of an element.
    elem: i64,
    nvars: usize,
}

impl CopyWarps {
    /// The extra wavefronts (beyond 32 distinct words each) of the copy's
    /// warp-level stores to the shared element `index`, per warp and
    /// round: where each thread's elements along one unrolled loop are
    /// consecutive and aligned, one vector store per value of the other
    /// (as LLVM merges them), else one store per element.
    fn bank_conflicts(&self, index: &IExpr) -> i64 {
        let mut env = vec![0i64; self.nvars];
        let (outer, inner) = match self.unrolled[..] {
            [] => ((self.e_v, 1), (self.e_v, 1)),
            [i] => ((self.e_v, 1), i),
            [o, i, ..] => (o, i),
        };
        let mut total = 0;
        for first in (0..self.iterations).step_by(self.block.max(1) as usize) {
            for warp in (first..(first + self.block).min(self.iterations)).step_by(BANKS as usize) {
                let end = (warp + BANKS).min(first + self.block).min(self.iterations);
                // `at[t][o][i]`: the element thread `t` stores at the
                // unrolled point `(o, i)`.
                let at: Vec<Vec<Vec<i64>>> = (warp..end)
                    .map(|e| {
                        env[self.e_v] = e;
                        (0..outer.1)
                            .map(|o| {
                                env[outer.0] = if outer.1 > 1 { o } else { env[outer.0] };
                                (0..inner.1)
                                    .map(|i| {
                                        env[inner.0] = if inner.1 > 1 { i } else { env[inner.0] };
                                        index.eval(&env)
                                    })
                                    .collect()
                            })
                            .collect()
                    })
                    .collect();
                let run = |xs: &[i64]| xs.len() > 1 && xs[0] % xs.len() as i64 == 0 && xs.iter().enumerate().all(|(l, &x)| x == xs[0] + l as i64);
                let column = |t: &Vec<Vec<i64>>, i: usize| -> Vec<i64> { t.iter().map(|o| o[i]).collect() };
                let along_inner = at.iter().all(|t| t.iter().all(|o| run(o)));
                let along_outer = at.iter().all(|t| (0..inner.1 as usize).all(|i| run(&column(t, i))));
                let requests: Vec<Vec<i64>> = if along_inner {
                    (0..outer.1 as usize).map(|o| at.iter().flat_map(|t| t[o].clone()).collect()).collect()
                } else if along_outer {
                    (0..inner.1 as usize).map(|i| at.iter().flat_map(|t| column(t, i)).collect()).collect()
                } else {
                    (0..outer.1 as usize).flat_map(|o| (0..inner.1 as usize).map(move |i| (o, i))).map(|(o, i)| at.iter().map(|t| t[o][i]).collect()).collect()
                };
                for elems in requests {
                    total += self.request_conflicts(&elems);
                }
            }
        }
        total
    }

    fn request_conflicts(&self, elems: &[i64]) -> i64 {
        let mut words: Vec<i64> = elems.iter().flat_map(|&e| (e * self.elem).div_euclid(4)..=((e + 1) * self.elem - 1).div_euclid(4)).collect();
        words.sort_unstable();
        words.dedup();
        let mut per_bank = [0i64; BANKS as usize];
        for w in &words {
            per_bank[w.rem_euclid(BANKS) as usize] += 1;
        }
        let wavefronts = per_bank.iter().copied().max().unwrap_or(0);
        wavefronts - (words.len() as i64 + BANKS - 1) / BANKS
    }
}

/// `e - lo`, written as `e` when `lo` is 0.
fn offset_from(e: &IExpr, lo: i64) -> IExpr {
    if lo == 0 {
        e.clone()
    } else {
        IExpr::sub(e.clone(), IExpr::c(lo))
    }
}

/// `c` under a guard of `conds` (none: `c` itself).
fn guarded(conds: Vec<Cond>, c: Compute) -> Node {
    if conds.is_empty() {
        Node::Compute(c)
    } else {
        Node::Guard(Guard { conds, body: vec![Node::Compute(c)] })
    }
}

/// [`cells_distinct`] for a dynamic kernel's register tile: each
/// condition of the cell guard is `0 <= v + E*v_t < H` with `v` a chain
/// loop over `[0, E)`, `v_t` an unroll loop over `[0, T)` and `E = H //^
/// T` (as `register-tiles` writes it; its vector cells `T*v + v_t`
/// likewise), so the points `(v, v_t)` whose cell is in range are the
/// original loop's `[0, H)`, one to one. Where `w`
/// uses `v` and `v_t` only in `v + E*v_t`, its guarded cells are the
/// original kernel's (distinct: the chain is parallel); the other unroll
/// variables are checked as [`cells_distinct`] does.
fn guarded_cells_distinct(w: &IExpr, unrolls: &[&For], conds: &[Cond], chain: &Chain, nvars: usize) -> bool {
    let mut w = w.clone();
    let mut rest: Vec<&For> = unrolls.to_vec();
    let mut next = nvars;
    for c in conds {
        let Cond::InRange { e, lo, hi } = c else { return false };
        let IExpr::Bin(IBin::Add, a, b) = e else { return false };
        // `v + E*v_t` (cyclic), or `T*v + v_t` (one vector per thread,
        // `register-tiles`' vector cells): either way `(v, v_t)` walks
        // `[0, T*E)` one to one.
        let (v, vt, cells) = match (&**a, &**b) {
            (IExpr::Var(v), IExpr::Bin(IBin::Mul, stride, vt)) => (*v, &**vt, Some(&**stride)),
            (IExpr::Bin(IBin::Mul, t, v), vt) => match (&**t, &**v) {
                (IExpr::Const(_), IExpr::Var(v)) => (*v, vt, None),
                _ => return false,
            },
            _ => return false,
        };
        let IExpr::Var(vt) = vt else { return false };
        let vt = *vt;
        let Some(at) = rest.iter().position(|l| l.var == vt) else { return false };
        let l = rest.remove(at);
        let (Some(0), Some(t)) = (l.lo.as_const(), l.hi.as_const()) else { return false };
        let Some(ci) = chain.loops.iter().position(|x| x.0 == v) else { return false };
        let stride = IExpr::bin(IBin::CeilDiv, hi.clone(), IExpr::c(t));
        let form = match cells {
            Some(s) => *s == stride,
            None => **a == IExpr::mul(IExpr::c(t), IExpr::v(v)),
        };
        if lo.as_const() != Some(0) || !form || chain.bounds[ci] != (IExpr::c(0), stride) {
            return false;
        }
        w = replace(&w, e, &IExpr::v(next));
        next += 1;
        if w.uses(v) || w.uses(vt) {
            return false;
        }
    }
    cells_distinct(&w, &rest, next)
}

/// `e` with each occurrence of `from` replaced by `to`.
fn replace(e: &IExpr, from: &IExpr, to: &IExpr) -> IExpr {
    if e == from {
        return to.clone();
    }
    match e {
        IExpr::Bin(op, a, b) => IExpr::bin(*op, replace(a, from, to), replace(b, from, to)),
        _ => e.clone(),
    }
}

/// Does the write offset `w` give each point of the unroll nest its own
/// cell? Checked point by point with every other variable at 0, on an
/// offset affine in the unroll variables (then it holds everywhere).
fn cells_distinct(w: &IExpr, unrolls: &[&For], nvars: usize) -> bool {
    let lin = w.linear();
    let affine = unrolls.iter().all(|l| lin.terms.iter().all(|(a, _)| !a.uses(l.var) || *a == IExpr::v(l.var)));
    if !affine {
        return false;
    }
    let mut env = vec![0i64; nvars];
    let mut seen = std::collections::HashSet::new();
    fn go(i: usize, unrolls: &[&For], w: &IExpr, env: &mut Vec<i64>, seen: &mut std::collections::HashSet<i64>) -> bool {
        let Some(l) = unrolls.get(i) else { return seen.insert(w.eval(env)) };
        for x in l.lo.as_const().unwrap_or(0)..l.hi.as_const().unwrap_or(0) {
            env[l.var] = x;
            if !go(i + 1, unrolls, w, env, seen) {
                return false;
            }
        }
        true
    }
    go(0, unrolls, w, &mut env, &mut seen)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::passes::test_kernels::{matmul, run_matmul};

    fn tiled(lm: &LoopModule, (what, k, scratch): (String, Kernel, Vec<Buffer>)) -> (String, LoopModule) {
        let mut t = lm.clone();
        t.buffers.extend(scratch);
        t.kernels[0] = k;
        verify::verify(&t).unwrap_or_else(|e| panic!("{what}: {e:?}"));
        (what, t)
    }

    #[test]
    fn operands_no_two_threads_share_are_not_staged() {
        // A row sum split into 32 lanes: the partial-sum kernel reads each
        // x[keep, lane + 32*r] in one thread only, so no block tiling
        // (found by random_programs: keep 4, drop 288 was block-tiled).
        let text =
            "x[keep,drop] = RANDOM(-9, 9, INT)\ns[keep] = x[keep,drop]\n\nRANK(keep) = 1\nRANK(drop) = 1\nDIMS(keep) IN [4,4]\nDIMS(drop) IN [288,288]\n";
        let src = crate::driver::Source::from_string("rs.et", text);
        let (m, _) = crate::pipeline::specialized_for(&src, &[], &[], 0, FloatWidth::F64).unwrap();
        let opts = crate::pipeline::GpuOptions::new(FloatWidth::F64, FpContract::Off, crate::ir::loops::target::DEFAULT_SM);
        let lm = crate::pipeline::lower_gpu_before(&src, &m, &opts, "block-tiles").unwrap();
        let partial = lm.kernels.iter().find(|k| k.role == KernelRole::Partial).expect("the sum is split");
        assert!(tile_kernel(&lm, partial, &GpuTarget::default()).is_none());
        // A matmul still stages both operands.
        let mm = matmul(512, 512, 32);
        let (what, _, scratch) = tile_kernel(&mm, &mm.kernels[0], &GpuTarget::default()).expect("tiled");
        assert_eq!(scratch.iter().filter(|b| b.role == Role::Shared).count(), 2, "{what}");
    }

    /// The bench convolution's statement with `dtype` operands, at 18 x 18
    /// inputs, a 3 x 3 filter and 32 -> 16 channels, before `block-tiles`,
    /// with the module it came from.
    fn conv(dtype: &str, fp: FpContract) -> (crate::ir::et::Module, LoopModule) {
        let binds = ["batch=[1]", "ipos=[18,18]", "fpos=[3,3]", "stride=[1,1]", "ichan=[32]", "ochan=[16]"];
        crate::passes::test_kernels::conv_before(dtype, &binds, fp, "block-tiles")
    }

    /// Elements of `x` a block's copies load per run of their loops (a
    /// `spread` loop's trip times its `unroll` lanes).
    fn copied(t: &LoopModule, k: &Kernel, name: &str) -> i64 {
        let x = t.buffers.iter().position(|b| b.name == name).unwrap();
        let mut n = 0;
        k.walk(&mut |node| {
            if let Node::For(f) = node {
                if f.kind == LoopKind::Spread {
                    let (lanes, leaf) = perfect_nest(&f.body, LoopKind::Unroll);
                    if matches!(leaf, [Node::Compute(c)] if matches!(c.values[0].op, VOp::Load { buf, .. } if buf == x)) {
                        n += trip(f) * lanes.iter().map(|l| trip(l)).product::<i64>();
                    }
                }
            }
        });
        n
    }

    #[test]
    fn a_convolutions_halo_is_staged_once_for_all_taps_where_sums_may_reorder() {
        // f32 under `fast`: the window's 9 taps run inside each channel
        // step and read one staged halo; under `off` each tap stages its
        // own rows (the original order of every cell's terms).
        let (_, fast) = conv("FLOAT", FpContract::Fast);
        let k = fast.kernels.iter().find(|k| k.role == KernelRole::Main).unwrap();
        let gpu = GpuTarget::default();
        // The candidates: each block with a halo, then without; under
        // `off` those without only.
        let cands = candidates(&fast, k, &gpu, FpContract::Fast);
        let choice = cands[0].clone();
        assert!(choice.halo, "{choice:?}");
        let no_halo = BlockChoice { halo: false, ..choice.clone() };
        assert_eq!(cands[1], no_halo);
        assert!(cands.chunks(2).all(|p| p.len() == 2 && p[0].halo && p[1] == BlockChoice { halo: false, ..p[0].clone() }), "{cands:?}");
        assert_eq!(candidates(&fast, k, &gpu, FpContract::Off), cands.iter().filter(|c| !c.halo).cloned().collect::<Vec<_>>());
        // A choice is built as it says: a halo choice is refused where the
        // sum may not reorder.
        assert!(apply_with(&fast, k, &choice, FpContract::Off).is_none());
        let (what, halo) = tiled(&fast, apply_with(&fast, k, &choice, FpContract::Fast).unwrap());
        assert!(what.contains("halo"), "{what}");
        let (plain_what, plain) = tiled(&fast, apply_with(&fast, k, &no_halo, FpContract::Fast).unwrap());
        assert!(!plain_what.contains("halo"), "{plain_what}");
        // Per channel step: the halo is the block's output positions
        // widened by the window (rows + 2 by columns + 2 for 3 x 3), loaded
        // once; without it each tap loads the positions themselves.
        let ki = fast.kernels.iter().position(|x| x.role == KernelRole::Main).unwrap();
        let (once, per_tap) = (copied(&halo, &halo.kernels[ki], "x"), copied(&plain, &plain.kernels[ki], "x"));
        // At these sizes the block is 16 output columns of one row by 16
        // channels (no register tiles): a tap copies 16 columns per
        // channel, the halo 3 rows of 18.
        assert_eq!(choice.threads.len(), 2, "{choice:?}");
        let cols = per_tap / choice.step;
        assert_eq!(cols, 16, "{plain_what}");
        assert_eq!(once, 3 * (cols + 2) * choice.step, "{what}");
        assert!(9 * per_tap > 2 * once, "{once} {per_tap}");
        // Through the pass: its float policy decides.
        let run_forced = |fp, forced: Option<String>| {
            let mut unit = Unit { ir: Ir::Loop(fast.clone()), ..Unit::from_source(crate::driver::Source::from_string("c.et", "")) };
            let opts = BlockTilesOptions { gpu: GpuTarget::default(), choosing: Choosing { forced, table_sm: None }, fp_contract: fp };
            run(&mut unit, &opts).unwrap().unwrap()
        };
        let run_pass = |fp| run_forced(fp, None);
        let (h, plain_desc) = (choice.describe(), no_halo.describe());
        assert_eq!(h, format!("{plain_desc}h"));
        let fast_stats = run_pass(FpContract::Fast);
        assert!(fast_stats.contains(&format!("{h}: ")) && fast_stats.contains("halo") && fast_stats.contains("heuristic"), "{fast_stats}");
        assert!(!run_pass(FpContract::Off).contains("halo"));
        // Forced: with the mark a halo, without it none; a halo forced
        // under `off` is no candidate: the heuristic's tiling.
        let forced_halo = run_forced(FpContract::Fast, Some(h.clone()));
        assert!(forced_halo.contains(&format!("{h}: ")) && forced_halo.contains("halo") && forced_halo.contains("forced"), "{forced_halo}");
        let forced_plain = run_forced(FpContract::Fast, Some(plain_desc.clone()));
        assert!(forced_plain.contains(&format!("{plain_desc}: ")) && !forced_plain.contains("halo") && forced_plain.contains("forced"), "{forced_plain}");
        let off = run_forced(FpContract::Off, Some(h.clone()));
        assert!(off.contains(&format!("{plain_desc}: ")) && !off.contains("halo") && off.contains("heuristic"), "{off}");
        // A table's entry is matched by its description: with the mark the
        // halo candidate, without it the tiling without one.
        let shape = tuning::KernelShape::of(&fast, k).unwrap();
        let table = |choice: &str| tuning::Table {
            format: tuning::FORMAT,
            sm: 90,
            device: String::new(),
            measured: String::new(),
            entries: vec![tuning::Entry {
                pass: "block-tiles".into(),
                shape: shape.clone(),
                choice: choice.into(),
                op: "conv".into(),
                ms: 1.0,
                others: Default::default(),
            }],
        };
        let described: Vec<String> = offered(&fast, k, &gpu, FpContract::Fast).iter().map(BlockChoice::describe).collect();
        for (recorded, want) in [(&h, &choice), (&plain_desc, &no_halo)] {
            let t = tuning::Table::parse(&serde_json::to_string(&table(recorded)).unwrap()).unwrap();
            let (i, why) = tuning::pick_in("block-tiles", &fast, k, &described, None, Some(&t)).unwrap();
            assert_eq!((&described[i], &cands[i]), (recorded, want));
            assert!(matches!(why, Source::Table { .. }), "{why:?}");
        }

        // INT sums are exact: a halo under any policy, and the tiled
        // kernel's cells are the untiled kernel's.
        let (m, int) = conv("INT", FpContract::Off);
        let ki = int.kernels.iter().position(|k| k.role == KernelRole::Main).unwrap();
        let choice = candidates(&int, &int.kernels[ki], &gpu, FpContract::Off)[0].clone();
        assert!(choice.halo, "{choice:?}");
        let (what, t) = tiled(&int, apply(&int, &int.kernels[ki], &choice).unwrap());
        assert!(what.contains("halo"), "{what}");
        let ro = crate::interp::RunOptions { seed: 0, float: FloatWidth::F32, ..Default::default() };
        let inputs = crate::interp::initial_arrays(&m, &ro).unwrap();
        let outputs = |lm: &LoopModule| {
            let mut bufs = inputs.clone();
            for b in &lm.buffers[bufs.len()..] {
                bufs.push(crate::tensor::Tensor::zeros(b.dtype, &b.dims().unwrap().iter().map(|&d| d as usize).collect::<Vec<_>>()).unwrap());
            }
            crate::interp::loops::run(lm, 0, &mut bufs).unwrap();
            bufs.truncate(m.arrays.len());
            bufs.into_iter().map(|b| b.data).collect::<Vec<_>>()
        };
        assert_eq!(outputs(&t), outputs(&int), "{what}");
    }

    #[test]
    fn copy_store_conflicts_count_a_warps_banks() {
        // e_v = 0, e_l = 1; one warp of 32 threads, one round.
        let warps = |unrolled: Vec<(VarId, i64)>, elem| CopyWarps { e_v: 0, unrolled, iterations: 32, block: 256, elem, nvars: 2 };
        let (e, l) = (IExpr::v(0), IExpr::v(1));
        // A row: 32 consecutive words, one wavefront.
        assert_eq!(warps(vec![], 4).bank_conflicts(&e), 0);
        // A column of a 64-word row: every thread in bank 0, 32 wavefronts.
        assert_eq!(warps(vec![], 4).bank_conflicts(&IExpr::mul(e.clone(), IExpr::c(64))), 31);
        // A padded column (65 words): every bank once.
        assert_eq!(warps(vec![], 4).bank_conflicts(&IExpr::mul(e.clone(), IExpr::c(65))), 0);
        // 4 lanes side by side and aligned: one vector store of 128 words,
        // 4 wavefronts, none extra.
        let side_by_side = IExpr::add(IExpr::mul(e.clone(), IExpr::c(4)), l.clone());
        assert_eq!(warps(vec![(1, 4)], 4).bank_conflicts(&side_by_side), 0);
        // 4 lanes 64 words apart, threads side by side: 4 scalar stores,
        // each a row.
        let rows = IExpr::add(IExpr::mul(l.clone(), IExpr::c(64)), e.clone());
        assert_eq!(warps(vec![(1, 4)], 4).bank_conflicts(&rows), 0);
        // Threads 4 words apart, lanes 64 apart: 4 stores whose 32 words
        // share 8 banks, 4 wavefronts each (3 extra).
        let spread = IExpr::add(IExpr::mul(l, IExpr::c(64)), IExpr::mul(e.clone(), IExpr::c(4)));
        assert_eq!(warps(vec![(1, 4)], 4).bank_conflicts(&spread), 4 * 3);
        // f64 side by side: 64 words, 2 wavefronts, none extra.
        assert_eq!(warps(vec![], 8).bank_conflicts(&e), 0);
    }

    #[test]
    fn candidates_list_blocks_and_steps_and_any_one_applies() {
        let (m, n, k) = (32, 64, 32);
        let lm = matmul(m, n, k);
        let gpu = GpuTarget::default();
        let (row, col) = (0, 1);
        let cs = candidates(&lm, &lm.kernels[0], &gpu, FpContract::Fast);
        let c = |ti, tj, step| BlockChoice { threads: vec![(row, ti), (col, tj)], step, halo: false };
        assert_eq!(cs, vec![c(16, 16, 16), c(16, 16, 8), c(16, 16, 4), c(16, 16, 2), c(16, 8, 16), c(8, 16, 16)]);
        let (what, _) = tiled(&lm, tile_kernel(&lm, &lm.kernels[0], &gpu).unwrap());
        assert!(what.starts_with("16x16 threads, k step 16"), "{what}");
        // Every candidate and choices the pass never makes (4 threads, one
        // thread along a dimension, steps of 1 and of the whole reduction)
        // compute the same cells as the untiled kernel.
        let want = run_matmul(&lm, m, n, k);
        let forced = [c(2, 2, 1), c(1, 32, 32)];
        for choice in cs.iter().chain(&forced) {
            let (what, t) = tiled(&lm, apply(&lm, &lm.kernels[0], choice).unwrap_or_else(|| panic!("{choice:?}")));
            assert_eq!(run_matmul(&t, m, n, k), want, "{choice:?}: {what}");
        }
        // Refused: threads that do not divide the trip, a step that does
        // not divide the reduction, dimensions out of chain order, a block
        // above 1024 threads, a block along `col` alone (every thread
        // reads its own `b` and the same `a`: nothing to share), and a
        // halo (a matmul has no window).
        for bad in [
            c(3, 16, 16),
            c(16, 16, 5),
            BlockChoice { threads: vec![(col, 16), (row, 16)], step: 16, halo: false },
            c(32, 64, 16),
            BlockChoice { threads: vec![(col, 64)], step: 4, halo: false },
            BlockChoice { halo: true, ..c(16, 16, 16) },
        ] {
            assert!(apply(&lm, &lm.kernels[0], &bad).is_none(), "{bad:?}");
        }
    }
}
