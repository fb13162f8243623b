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

mod banks;
mod build;
mod halo;
use banks::*;
use build::*;
use halo::*;

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
    let left = m.max_min_left_alone();
    Ok(Some(if tiled.is_empty() { format!("0 kernels tiled{left}") } else { format!("{} kernels tiled ({}){left}", tiled.len(), tiled.join(", ")) }))
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

#[cfg(test)]
mod tests;
