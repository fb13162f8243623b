//! `arrange-threads` (GPU): which thread of a block-tiled kernel computes
//! which tile (warp tiling), and in which order the blocks run (grouped
//! block order). Neither changes what any cell computes, only where.
//!
//! **Warps.** `block-tiles` numbers a block's threads row-major over its
//! thread dimensions (the innermost varies fastest with the thread id),
//! so with 16 x 16 threads a warp is 2 rows x 16 columns of threads: per
//! `k` it reads 2 vectors of `a`'s shared row (a broadcast) and 16 of
//! `b`'s (256 bytes, 2 wavefronts), 3 wavefronts per pair of 128-bit
//! reads. Here the two innermost thread loops `r` (trip `R`) and `c`
//! (trip `C`) split into the warp's position and the lane's,
//!
//! ```text
//! for r in [0, R) thread { for c in [0, C) thread { .. } }
//! ```
//!
//! becomes (`r := r_warp*LR + r_lane`, `c := c_warp*LC + c_lane`)
//!
//! ```text
//! for c_warp in [0, C/LC) thread { for r_warp in [0, R/LR) thread {
//!   for r_lane in [0, LR) thread { for c_lane in [0, LC) thread { .. } } } }
//! ```
//!
//! so that the 32 consecutive thread ids of a warp are `LR x LC` threads
//! of the block (CUTLASS's SIMT warp arrangement): 4 x 8 reads 4 `a`
//! vectors and 8 `b` vectors, one wavefront each. `r_warp` sits next to
//! `r_lane` so that `r` is one bit field of the thread id, as it was:
//! with `c_warp` between them LLVM kept a third base address for `a`'s
//! second vector, one more `add` per `k` (+0.7% instructions on matmul
//! 512 x 256 x 512, against +0.06%). The lane shape is the
//! one with the fewest rows plus columns (the distinct vectors a warp
//! reads of the two operands) that divides the thread trips, more columns
//! on a tie (the global accesses left in the thread, the output's stores,
//! then cover 128 bytes of a row); a block whose row-major warps already
//! have that shape (`C` = `LC`) is left alone. `warp=LRxLC` forces a
//! shape, `warp=none` keeps row-major warps.
//!
//! **Blocks.** The grid runs its blocks in the chain's row-major order, so
//! the blocks resident at once cover a few whole rows of block tiles and
//! every column: each needs its own `b` panel from L2. Grouped order
//! (Triton's `GROUP_M`, CUTLASS's threadblock swizzle) runs `G` rows of
//! tiles column by column: the two innermost chain loops `m` (trip `M`)
//! and `n` become `m_group`, `n`, `m_in` (`m := m_group*G + m_in`), so
//! consecutive blocks share `b`'s panel. `auto` counts the block rows
//! plus columns (the panels) the first wave touches, for waves of 1, 2
//! and 4 blocks per SM ([`RESIDENT_PER_SM`]: the occupancy is ptxas's,
//! decided later), and groups only where some power of two dividing `M`
//! touches fewer than row-major order at all three: a group too small for
//! the wave spans a whole group and part of the next, more rows than
//! row-major order. A 64 x 64 grid gets groups of 16 (264 blocks: 16 rows
//! and 17 columns against 5 and 64); 32 x 32 none (at 528 blocks row-major
//! touches 17 + 32, groups of 16 32 + 32); a grid the smallest wave runs
//! whole is left alone. `group=G` forces it (`G` dividing
//! `M`), `group=1` turns it off. The emulator does not model the L2; the
//! instructions it costs are one more digit of the
//! block index (docs/journal/performance.md, section 16).
//!
//! **Choosing.** Like `register-tiles` and `block-tiles`, the pass
//! separates choosing from applying (docs/tuning.md): [`candidates`]
//! lists a kernel's [`Arrangement`]s, the rule's (above) first, and
//! [`apply`] makes one; `choice=DESC` forces one, else the tuning table's
//! recording nearest the block-tiled kernel's shape, else the rule
//! ([`tuning::pick`]). A description is the warp shape and the group,
//! each left out where not applied: `4x8g16`, `8x4`, `g8`, `none`. The
//! candidates are few on purpose (each is a GPU variant the kit times out
//! of a device budget of minutes): the rule's warp shape, its transpose
//! and row-major warps, times the rule's group, no group and the best
//! other powers of two by the same panel count ([`MAX_GROUPS`] in all).
//! `warp=` and `group=` override the chosen candidate's part.
//!
//! Applies to kernels with a `thread` nest (`block-tiles`) right inside a
//! perfect nest of `parallel` chain loops, thread loops from 0; grouping
//! also needs the two innermost chain loops to have constant bounds from
//! 0 and the kernel to write with both.

use super::tuning::{self, Choosing, Source, Table};
use super::{DriverOptions, Ir, PassError, PassOptions, Unit};
use crate::ir::loops::iexpr::tile_index;
use crate::ir::loops::target::GpuTarget;
use crate::ir::loops::*;

/// How one of the two arrangements is chosen.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Pick<T> {
    /// The pass's rule (module doc).
    Auto,
    /// Left as `block-tiles` made it.
    Off,
    /// This one, where it fits the kernel.
    Forced(T),
}

/// What `arrange-threads` is told: the GPU (`--target`), how to choose
/// each kernel's arrangement (`choice=`, the tuning table, the rule:
/// `tuning.rs`) and the `warp=` and `group=` options, which override the
/// chosen arrangement's part where not `auto`.
#[derive(Clone, Debug)]
pub struct ArrangeThreadsOptions {
    pub gpu: GpuTarget,
    /// The lanes of a warp, `(rows, columns)` of the block's threads.
    pub warp: Pick<(i64, i64)>,
    /// Block rows per group.
    pub group: Pick<i64>,
    pub choosing: Choosing,
}

impl PassOptions for ArrangeThreadsOptions {
    const KEYS: &'static [(&'static str, &'static str)] = &[
        tuning::CHOICE,
        ("warp", "auto|none|LRxLC: the threads of a warp, LR rows x LC columns of the block's two innermost thread dimensions (default auto: 4x8 where it fits)"),
        ("group", "auto|G: blocks run G rows of block tiles column by column (1: row-major; default auto: the G whose first waves of 1, 2 and 4 blocks per SM all read fewer panels than row-major)"),
    ];
    fn from_driver(d: &DriverOptions) -> Self {
        ArrangeThreadsOptions { gpu: d.gpu, warp: Pick::Auto, group: Pick::Auto, choosing: Choosing { forced: None, table_sm: d.tuning.then_some(d.gpu.sm) } }
    }
    fn set(&mut self, key: &str, value: &str) -> Result<(), String> {
        match (key, value) {
            ("choice", v) => return tuning::set_choice(&mut self.choosing, v),
            ("warp", "auto") => self.warp = Pick::Auto,
            ("warp", "none") => self.warp = Pick::Off,
            ("warp", v) => {
                let bad = || format!("expected auto, none or LRxLC (powers of two whose product is a warp, 32), got `{v}`");
                let (a, b) = v.split_once('x').ok_or_else(bad)?;
                let (a, b): (i64, i64) = (a.parse().map_err(|_| bad())?, b.parse().map_err(|_| bad())?);
                if a < 1 || b < 1 || a.checked_mul(b) != Some(self.gpu.warp_size) {
                    return Err(bad());
                }
                self.warp = Pick::Forced((a, b));
            }
            ("group", "auto") => self.group = Pick::Auto,
            ("group", v) => {
                let g: i64 = v.parse().map_err(|_| format!("expected auto or a positive integer, got `{v}`"))?;
                self.group = match g {
                    1 => Pick::Off,
                    g if g >= 2 => Pick::Forced(g),
                    _ => return Err(format!("expected auto or a positive integer, got `{v}`")),
                };
            }
            _ => return Err(format!("option `{key}` is not declared")),
        }
        Ok(())
    }
}

pub fn run(unit: &mut Unit, opts: &ArrangeThreadsOptions) -> Result<Option<String>, PassError> {
    let Ir::Loop(m) = &mut unit.ir else { return Err(PassError::Internal("arrange-threads runs on the loop level".into())) };
    let mut changed = Vec::new();
    for ki in 0..m.kernels.len() {
        if let Some((what, t)) = arrange_kernel(m, &m.kernels[ki], opts) {
            changed.push(format!("{} {what}", t.name));
            m.kernels[ki] = t;
        }
    }
    Ok(Some(if changed.is_empty() { "0 kernels arranged".to_string() } else { format!("{} kernels arranged ({})", changed.len(), changed.join("; ")) }))
}

/// A kernel's grid and block as perfect nests: chain loops `(var, lo,
/// hi)`, thread loops `(var, trip)` (from 0), and each thread's program.
struct Nests {
    chain: Vec<(VarId, IExpr, IExpr)>,
    threads: Vec<(VarId, i64)>,
    program: Vec<Node>,
}

impl Nests {
    fn of(k: &Kernel) -> Option<Nests> {
        let (chain, rest) = walk::perfect_nest(&k.body, LoopKind::Parallel);
        let (threads, program) = walk::perfect_nest(rest, LoopKind::Thread);
        let threads =
            threads.iter().map(|l| (l.lo.as_const() == Some(0)).then_some(l.hi.as_const().map(|hi| (l.var, hi))).flatten()).collect::<Option<Vec<_>>>()?;
        (threads.len() >= 2).then(|| Nests { chain: chain.iter().map(|l| (l.var, l.lo.clone(), l.hi.clone())).collect(), threads, program: program.to_vec() })
    }

    /// The kernel body: the chain around the threads around the program.
    fn build(self) -> Vec<Node> {
        let mut body = self.program;
        for (var, trip) in self.threads.into_iter().rev() {
            body = vec![Node::For(For { var, lo: IExpr::c(0), hi: IExpr::c(trip), kind: LoopKind::Thread, body })];
        }
        for (var, lo, hi) in self.chain.into_iter().rev() {
            body = vec![Node::For(For { var, lo, hi, kind: LoopKind::Parallel, body })];
        }
        body
    }

    /// The two innermost thread loops: `(r, rt)`, `(c, ct)`.
    fn thread_pair(&self) -> ((VarId, i64), (VarId, i64)) {
        let n = self.threads.len();
        (self.threads[n - 2], self.threads[n - 1])
    }

    /// `v := by` in the program.
    fn substitute(&mut self, v: VarId, by: &IExpr) {
        walk::for_each_expr_mut(&mut self.program, &mut |e| *e = e.substitute(v, by));
    }
}

/// One way to arrange a kernel's threads and blocks: a candidate of the
/// pass, what `choice=` and the tuning table name by [`Arrangement::describe`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Arrangement {
    /// The lanes of a warp, `(rows, columns)`; `None`: row-major warps,
    /// as `block-tiles` made them.
    pub warp: Option<(i64, i64)>,
    /// Block rows per group; `None`: row-major block order.
    pub group: Option<i64>,
}

impl Arrangement {
    /// The kernel as `block-tiles` left it.
    pub const NONE: Arrangement = Arrangement { warp: None, group: None };

    /// `4x8g16`: the warp shape (`LRxLC`) and the group (`gG`), each left
    /// out where not applied; `none` for neither.
    pub fn describe(&self) -> String {
        let warp = self.warp.map(|(lr, lc)| format!("{lr}x{lc}")).unwrap_or_default();
        let group = self.group.map(|g| format!("g{g}")).unwrap_or_default();
        if warp.is_empty() && group.is_empty() {
            tuning::NONE.to_string()
        } else {
            warp + &group
        }
    }
}

/// Groups per kernel at most among [`candidates`]: the rule's, none, and
/// the best others by panel count ([`ranked_groups`]) to fill the rest
/// (each candidate is a variant the GPU kit may time: docs/tuning.md).
pub const MAX_GROUPS: usize = 3;

/// The arrangements of `k` the pass would consider, the rule's (module
/// doc) first: every warp shape of [`warp_candidates`] with every group
/// of [`group_candidates`], warps outer. Empty when `k` has no thread
/// nest the pass arranges, or the only arrangement is none.
pub fn candidates(k: &Kernel, gpu: &GpuTarget) -> Vec<Arrangement> {
    let Some(nests) = Nests::of(k) else { return Vec::new() };
    let ((_, rt), (_, ct)) = nests.thread_pair();
    let groups = group_candidates(&nests, k, gpu);
    let out: Vec<Arrangement> =
        warp_candidates(rt, ct, gpu.warp_size).into_iter().flat_map(|warp| groups.iter().map(move |&group| Arrangement { warp, group })).collect();
    if out == [Arrangement::NONE] {
        return Vec::new();
    }
    out
}

/// The warp shapes over thread trips `rt x ct`: the rule's (`None` where
/// row-major warps already have its shape), its transpose where that
/// fits, and row-major warps (`None`), without repeats.
pub fn warp_candidates(rt: i64, ct: i64, warp: i64) -> Vec<Option<(i64, i64)>> {
    let transposed = fewest_lanes(rt, ct, warp).and_then(|(lr, lc)| warp_shape(rt, ct, warp, Pick::Forced((lc, lr))));
    let mut out = vec![warp_shape(rt, ct, warp, Pick::Auto)];
    for w in [transposed, None] {
        if !out.contains(&w) {
            out.push(w);
        }
    }
    out
}

/// The groups of the kernel's grid: the rule's ([`auto_group`]), none,
/// then the others of [`ranked_groups`], at most [`MAX_GROUPS`]; only
/// none where the grid cannot be grouped.
fn group_candidates(nests: &Nests, k: &Kernel, gpu: &GpuTarget) -> Vec<Option<i64>> {
    let Some((_, rows, cols)) = groupable(nests, k) else { return vec![None] };
    let mut out = vec![auto_group(rows, cols, gpu.sm_count)];
    for g in std::iter::once(None).chain(ranked_groups(rows, cols, gpu.sm_count).into_iter().map(Some)) {
        if out.len() < MAX_GROUPS && !out.contains(&g) {
            out.push(g);
        }
    }
    out
}

/// The arrangement `opts` chooses for `k`: [`tuning::pick`] among the
/// [`candidates`] (`none` where a `none` was forced or recorded), then
/// the `warp=` and `group=` options where not `auto` (a choice forced
/// too); with where it came from.
fn choose(m: &LoopModule, k: &Kernel, opts: &ArrangeThreadsOptions, table: Option<&Table>) -> (Arrangement, Source) {
    let all = candidates(k, &opts.gpu);
    let described: Vec<String> = all.iter().map(Arrangement::describe).collect();
    let (mut a, mut why) = match tuning::pick_in("arrange-threads", m, k, &described, opts.choosing.forced.as_deref(), table) {
        Some((i, why)) => (all[i], why),
        None => (Arrangement::NONE, Source::Forced),
    };
    match opts.warp {
        Pick::Auto => {}
        Pick::Off => a.warp = None,
        Pick::Forced(s) => a.warp = Some(s),
    }
    match opts.group {
        Pick::Auto => {}
        Pick::Off => a.group = None,
        Pick::Forced(g) => a.group = Some(g),
    }
    if opts.warp != Pick::Auto || opts.group != Pick::Auto {
        why = Source::Forced;
    }
    (a, why)
}

/// The kernel arranged as `opts` chooses (consulting the target's
/// compiled-in table unless `--no-tuning`), and what changed (`4x8g16:
/// warps of .., groups of .., heuristic`), when that changes something.
pub fn arrange_kernel(m: &LoopModule, k: &Kernel, opts: &ArrangeThreadsOptions) -> Option<(String, Kernel)> {
    arrange_kernel_in(m, k, opts, opts.choosing.table_sm.and_then(Table::builtin))
}

/// [`arrange_kernel`] consulting `table`.
pub fn arrange_kernel_in(m: &LoopModule, k: &Kernel, opts: &ArrangeThreadsOptions, table: Option<&Table>) -> Option<(String, Kernel)> {
    let (a, why) = choose(m, k, opts, table);
    let (applied, what, t) = apply(k, &a, &opts.gpu)?;
    Some((format!("{}: {what}, {why}", applied.describe()), t))
}

/// `k` arranged as `a` says, as far as it fits the kernel (a warp shape
/// of `gpu`'s warp size dividing the thread trips and not already the
/// row-major warps'; a group of at least 2 dividing the block rows of a
/// grid the pass can group): what was applied, a description of it and
/// the kernel; `None` when nothing was.
pub fn apply(k: &Kernel, a: &Arrangement, gpu: &GpuTarget) -> Option<(Arrangement, String, Kernel)> {
    let mut nests = Nests::of(k)?;
    let mut t = k.clone();
    let mut what = Vec::new();
    let mut applied = Arrangement::NONE;
    let mut replaced = Vec::new();
    let n = nests.threads.len();
    let ((r, rt), (c, ct)) = nests.thread_pair();
    if let Some((lr, lc)) = a.warp.and_then(|s| warp_shape(rt, ct, gpu.warp_size, Pick::Forced(s))) {
        let mut name = |v: VarId, s: &str| walk::add_var(&mut t.vars, &format!("{}_{s}", k.vars[v].name));
        let (rw, cw, rl, cl) = (name(r, "warp"), name(c, "warp"), name(r, "lane"), name(c, "lane"));
        nests.substitute(r, &tile_index(rw, 0, lr, rl));
        nests.substitute(c, &tile_index(cw, 0, lc, cl));
        nests.threads.truncate(n - 2);
        // `r`'s two digits adjacent: one bit field of the thread id (module doc).
        nests.threads.extend([(cw, ct / lc), (rw, rt / lr), (rl, lr), (cl, lc)]);
        what.push(format!("warps of {lr}x{lc} threads in {rt}x{ct}"));
        applied.warp = Some((lr, lc));
        replaced.extend([r, c]);
    }
    if let Some((mi, rows, cols)) = groupable(&nests, k) {
        if let Some(g) = a.group.filter(|&g| g >= 2 && rows % g == 0) {
            let m = nests.chain[mi].0;
            let (mg, min) = (walk::add_var(&mut t.vars, &format!("{}_group", k.vars[m].name)), walk::add_var(&mut t.vars, &format!("{}_in", k.vars[m].name)));
            nests.substitute(m, &tile_index(mg, 0, g, min));
            let n_loop = nests.chain.remove(mi + 1);
            nests.chain[mi] = (mg, IExpr::c(0), IExpr::c(rows / g));
            nests.chain.push(n_loop);
            nests.chain.push((min, IExpr::c(0), IExpr::c(g)));
            what.push(format!("groups of {g} of {rows}x{cols} blocks"));
            applied.group = Some(g);
            replaced.push(m);
        }
    }
    if what.is_empty() {
        return None;
    }
    t.body = nests.build();
    drop_vars(&mut t, &replaced);
    Some((applied, what.join(", "), t))
}

/// Removes the variables `dead` from `k.vars`, renumbering the others in
/// the body, where the body neither binds nor uses them (the variables an
/// arrangement replaced: bound by no loop, substituted everywhere).
fn drop_vars(k: &mut Kernel, dead: &[VarId]) {
    let mut bound = Vec::new();
    for n in &k.body {
        n.walk(&mut |n| match n {
            Node::For(l) => bound.push(l.var),
            Node::LoadIndex { var, .. } => bound.push(*var),
            _ => {}
        });
    }
    let gone: Vec<VarId> = dead.iter().copied().filter(|&v| !bound.contains(&v) && !walk::nodes_use(&k.body, v)).collect();
    if gone.is_empty() {
        return;
    }
    // Old id -> new id: each kept variable moves down by the removed ones before it.
    let new_id: Vec<VarId> = (0..k.vars.len()).map(|v| v - gone.iter().filter(|&&g| g < v).count()).collect();
    walk::rename_vars(&mut k.body, &|v| new_id[v]);
    let mut i = 0;
    k.vars.retain(|_| {
        i += 1;
        !gone.contains(&(i - 1))
    });
}

/// The warp shape over thread trips `rt x ct` with the fewest rows plus
/// columns (the distinct vectors a warp reads of the two operands), the
/// most columns on a tie, that divides them.
fn fewest_lanes(rt: i64, ct: i64, warp: i64) -> Option<(i64, i64)> {
    (0..=warp.trailing_zeros()).map(|e| (warp >> e, 1i64 << e)).filter(|&(lr, lc)| rt % lr == 0 && ct % lc == 0).min_by_key(|&(lr, lc)| (lr + lc, -lc))
}

/// The lanes of a warp `(rows, columns)` over thread trips `rt x ct`, when
/// they differ from the row-major warps'.
pub fn warp_shape(rt: i64, ct: i64, warp: i64, pick: Pick<(i64, i64)>) -> Option<(i64, i64)> {
    let fits = |(lr, lc): (i64, i64)| lr >= 1 && lc >= 1 && lr * lc == warp && rt % lr == 0 && ct % lc == 0;
    let shape = match pick {
        Pick::Off => return None,
        Pick::Forced(s) => Some(s).filter(|&s| fits(s)),
        Pick::Auto => fewest_lanes(rt, ct, warp),
    }?;
    // Row-major warps already are `shape` when a warp spans `ct` columns.
    (shape.1 != ct).then_some(shape)
}

/// The chain loop to group (the second innermost: `m`), its trip (the
/// block rows) and the next one's (the block columns), when the grid can
/// be grouped: both loops from 0 to a constant, and the kernel writes
/// with both.
fn groupable(nests: &Nests, k: &Kernel) -> Option<(usize, i64, i64)> {
    let mi = nests.chain.len().checked_sub(2)?;
    let trip = |i: usize| {
        let (_, lo, hi) = &nests.chain[i];
        (lo.as_const() == Some(0)).then(|| hi.as_const()).flatten()
    };
    let (rows, cols) = (trip(mi)?, trip(mi + 1)?);
    let (m, n) = (nests.chain[mi].0, nests.chain[mi + 1].0);
    let writes_both = k.computes().iter().any(|c| c.write.offset.uses(m) && c.write.offset.uses(n));
    writes_both.then_some((mi, rows, cols))
}

/// Resident blocks per SM the default group must suit: ptxas fixes the
/// occupancy after this pass (registers), and the block-tiled matmuls
/// run 1 to 4 (the cost model: 2 of the 8x8 kernels' 256-thread blocks at
/// about 124 registers, 4 of the sm_90 table's 128-thread ones).
const RESIDENT_PER_SM: [i64; 3] = [1, 2, 4];

/// The powers of two dividing `rows` whose first wave touches fewer block
/// rows plus columns than row-major order's at some wave of `sm_count`
/// times each of [`RESIDENT_PER_SM`] blocks, fewest panels over those
/// waves first (the smaller group on a tie), each with whether it touches
/// fewer at every wave; none where the grid fits in the smallest wave.
fn scored_groups(rows: i64, cols: i64, sm_count: i64) -> Vec<(i64, bool)> {
    let waves = RESIDENT_PER_SM.map(|r| r.saturating_mul(sm_count));
    if rows.saturating_mul(cols) <= waves[0] {
        return Vec::new();
    }
    let row_major = waves.map(|w| wave_panels(rows, cols, 1, w));
    let mut scored: Vec<(i64, i64, bool)> = (1..63)
        .map(|e| 1i64 << e)
        .take_while(|&g| g <= rows)
        .filter(|g| rows % g == 0)
        .filter_map(|g| {
            let panels = waves.map(|w| wave_panels(rows, cols, g, w));
            let fewer = panels.iter().zip(&row_major).map(|(p, r)| p < r);
            let (some, all) = (fewer.clone().any(|f| f), fewer.clone().all(|f| f));
            some.then(|| (panels.iter().sum::<i64>(), g, all))
        })
        .collect();
    scored.sort();
    scored.into_iter().map(|(_, g, all)| (g, all)).collect()
}

/// The rule's group of block rows: among [`scored_groups`], the first of
/// those touching fewer panels than row-major order at every wave. `None`
/// where the grid fits in the smallest wave (the order changes nothing)
/// or no group is better at every wave.
pub fn auto_group(rows: i64, cols: i64, sm_count: i64) -> Option<i64> {
    scored_groups(rows, cols, sm_count).into_iter().find(|&(_, all)| all).map(|(g, _)| g)
}

/// The groups better than row-major order at some wave, best first
/// ([`scored_groups`]): the tuner's alternatives to the rule's.
pub fn ranked_groups(rows: i64, cols: i64, sm_count: i64) -> Vec<i64> {
    scored_groups(rows, cols, sm_count).into_iter().map(|(g, _)| g).collect()
}

/// The block rows plus block columns that the first `wave` blocks of a
/// `rows x cols` grid touch, run in groups of `group` rows column by
/// column (`group` 1: row-major).
pub fn wave_panels(rows: i64, cols: i64, group: i64, wave: i64) -> i64 {
    let (mut r, mut c) = (std::collections::BTreeSet::new(), std::collections::BTreeSet::new());
    for id in 0..wave.min(rows.saturating_mul(cols)) {
        let (grouped, rest) = (id / (group * cols), id % (group * cols));
        r.insert(grouped * group + rest % group);
        c.insert(rest / group);
    }
    (r.len() + c.len()) as i64
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::passes::block_tiles::tile_kernel;
    use crate::passes::test_kernels::{matmul, run_matmul};

    fn opts(warp: Pick<(i64, i64)>, group: Pick<i64>) -> ArrangeThreadsOptions {
        ArrangeThreadsOptions { gpu: GpuTarget::default(), warp, group, choosing: Choosing::default() }
    }

    /// `lm` with its kernel block-tiled, then arranged as `o` says.
    fn tiled_and_arranged(lm: &LoopModule, o: &ArrangeThreadsOptions) -> (LoopModule, LoopModule, String) {
        let mut tiled = lm.clone();
        let (_, k, scratch) = tile_kernel(lm, &lm.kernels[0], &o.gpu).expect("block-tiled");
        tiled.buffers.extend(scratch);
        tiled.kernels[0] = k;
        let mut arranged = tiled.clone();
        let (what, k) = arrange_kernel(&tiled, &tiled.kernels[0], o).expect("arranged");
        arranged.kernels[0] = k;
        verify::verify(&arranged).unwrap_or_else(|e| panic!("{what}: {e:?}"));
        (tiled, arranged, what)
    }

    /// Each point of a perfect nest of `kind` loops, in launch order (the
    /// innermost fastest, as code generation numbers threads and blocks),
    /// with the values of the variables the old nest bound, evaluated
    /// from the substitutions found in the program's expressions.
    fn points(k: &Kernel, kind: LoopKind) -> Vec<Vec<i64>> {
        let loops = nest(k, kind);
        let trips: Vec<i64> = loops.iter().map(|l| l.hi.as_const().unwrap() - l.lo.as_const().unwrap()).collect();
        let total: i64 = trips.iter().product();
        (0..total)
            .map(|id| {
                // Mixed radix, innermost digit fastest.
                let mut env = vec![0i64; k.vars.len()];
                let mut rest = id;
                for (l, &t) in loops.iter().zip(&trips).rev() {
                    env[l.var] = l.lo.as_const().unwrap() + rest % t;
                    rest /= t;
                }
                env
            })
            .collect()
    }

    /// The loops of a perfect nest of `kind` in `k` (the chain, or the
    /// threads inside it).
    fn nest(k: &Kernel, kind: LoopKind) -> Vec<&For> {
        let (chain, rest) = walk::perfect_nest(&k.body, LoopKind::Parallel);
        if kind == LoopKind::Parallel {
            chain
        } else {
            walk::perfect_nest(rest, LoopKind::Thread).0
        }
    }

    #[test]
    fn warps_of_4x8_cover_the_block_once() {
        let (m, n, kk) = (64, 64, 8);
        let lm = matmul(m, n, kk);
        let (tiled, arranged, what) = tiled_and_arranged(&lm, &opts(Pick::Auto, Pick::Off));
        assert_eq!(what, "4x8: warps of 4x8 threads in 16x16, forced");
        let old: Vec<String> = nest(&tiled.kernels[0], LoopKind::Thread).iter().map(|l| tiled.kernels[0].vars[l.var].name.clone()).collect();
        let k = &arranged.kernels[0];
        let new: Vec<(VarId, i64)> = nest(k, LoopKind::Thread).iter().map(|l| (l.var, l.hi.as_const().unwrap())).collect();
        assert_eq!(new.iter().map(|t| t.1).collect::<Vec<_>>(), vec![2, 4, 4, 8]);
        // The old thread variables are gone from the kernel's variables
        // (2 replaced by 4), the others renumbered: the same names bound
        // but for the old ones, and the new ones.
        assert!(old.iter().all(|o| k.vars.iter().all(|v| v.name != *o)), "{:?}", k.vars);
        assert_eq!(k.vars.len(), tiled.kernels[0].vars.len() + 2);
        let bound = |k: &Kernel| {
            let mut names = Vec::new();
            k.walk(&mut |x| match x {
                Node::For(l) => names.push(k.vars[l.var].name.clone()),
                Node::LoadIndex { var, .. } => names.push(k.vars[*var].name.clone()),
                _ => {}
            });
            names.sort();
            names
        };
        let mut want: Vec<String> = bound(&tiled.kernels[0]).into_iter().filter(|n| !old.contains(n)).collect();
        want.extend(["row_thread_warp", "col_thread_warp", "row_thread_lane", "col_thread_lane"].map(String::from));
        want.sort();
        assert_eq!(bound(k), want);
        // The cell each thread id (in launch order) stores, read off the
        // program's store of `c` in block (0, 0): `row * 64 + col`.
        let store = k.computes().into_iter().find(|c| c.write.buf == 2 && !c.write.kind.adds()).expect("the store of c").write.offset.clone();
        let cells: Vec<(i64, i64)> = points(k, LoopKind::Thread).iter().map(|env| (store.eval(env) / n, store.eval(env) % n)).collect();
        // A bijection onto the block's 16 x 16 threads.
        let mut seen = cells.clone();
        seen.sort();
        seen.dedup();
        assert_eq!((cells.len(), seen.len()), (256, 256));
        assert!(seen.iter().all(|&(r, c)| (0..16).contains(&r) && (0..16).contains(&c)));
        // Each warp is 4 rows x 8 columns of threads.
        for w in cells.chunks(32) {
            let rows: std::collections::BTreeSet<i64> = w.iter().map(|p| p.0).collect();
            let cols: std::collections::BTreeSet<i64> = w.iter().map(|p| p.1).collect();
            assert_eq!((rows.len(), cols.len()), (4, 8), "{w:?}");
        }
        // The same cells, the same sums (the loop interpreter).
        assert_eq!(run_matmul(&arranged, m, n, kk), run_matmul(&lm, m, n, kk));
        // Forced 8 x 4: also the same sums.
        let (_, forced, what) = tiled_and_arranged(&lm, &opts(Pick::Forced((8, 4)), Pick::Off));
        assert_eq!(what, "8x4: warps of 8x4 threads in 16x16, forced");
        assert_eq!(run_matmul(&forced, m, n, kk), run_matmul(&lm, m, n, kk));
    }

    #[test]
    fn the_warp_shape_follows_the_thread_trips() {
        let auto = |r, c| warp_shape(r, c, 32, Pick::Auto);
        assert_eq!(auto(16, 16), Some((4, 8)));
        assert_eq!(auto(8, 16), Some((4, 8)));
        // Row-major warps already 4 x 8 (a convolution's 8 channels), or
        // no 4 x 8 / 8 x 4 fitting: left alone or the next best.
        assert_eq!(auto(4, 8), None);
        assert_eq!(auto(16, 4), None);
        assert_eq!(auto(2, 16), None);
        assert_eq!(auto(4, 64), Some((4, 8)));
        assert_eq!(warp_shape(16, 16, 32, Pick::Forced((8, 4))), Some((8, 4)));
        assert_eq!(warp_shape(16, 16, 32, Pick::Forced((2, 16))), None);
        assert_eq!(warp_shape(4, 16, 32, Pick::Forced((8, 4))), None);
        assert_eq!(warp_shape(16, 16, 32, Pick::Off), None);
    }

    #[test]
    fn grouped_order_is_a_permutation_of_the_grid() {
        // 1024 x 1024 in blocks of 16 x 16 cells: 64 x 64 blocks.
        let (m, n, kk) = (1024, 1024, 1);
        let lm = matmul(m, n, kk);
        let (tiled, arranged, what) = tiled_and_arranged(&lm, &opts(Pick::Off, Pick::Auto));
        assert_eq!(what, "g16: groups of 16 of 64x64 blocks, forced");
        let col_b = &tiled.kernels[0].vars[nest(&tiled.kernels[0], LoopKind::Parallel)[1].var].name;
        let k = &arranged.kernels[0];
        let chain: Vec<(VarId, i64)> = nest(k, LoopKind::Parallel).iter().map(|l| (l.var, l.hi.as_const().unwrap())).collect();
        assert_eq!(chain.iter().map(|c| c.1).collect::<Vec<_>>(), vec![4, 64, 16]);
        assert_eq!(&k.vars[chain[1].0].name, col_b);
        // The replaced block row variable is gone from the kernel's variables.
        let row_b = &tiled.kernels[0].vars[nest(&tiled.kernels[0], LoopKind::Parallel)[0].var].name;
        assert!(k.vars.iter().all(|v| v.name != *row_b));
        // The block each block id (in launch order) computes, read off the
        // cell its thread 0 stores: `(row * 1024 + col) / 16` per dimension.
        let store = k.computes().into_iter().find(|c| c.write.buf == 2 && !c.write.kind.adds()).expect("the store of c").write.offset.clone();
        let blocks: Vec<(i64, i64)> = points(k, LoopKind::Parallel).iter().map(|env| (store.eval(env) / n / 16, store.eval(env) % n / 16)).collect();
        let mut seen = blocks.clone();
        seen.sort();
        seen.dedup();
        assert_eq!((blocks.len(), seen.len()), (4096, 4096));
        assert!(seen.iter().all(|&(r, c)| (0..64).contains(&r) && (0..64).contains(&c)));
        // Consecutive blocks: 16 rows of one column, then the next column;
        // the second group after 64 columns.
        let first: Vec<(i64, i64)> = (0..16).map(|r| (r, 0)).chain([(0, 1), (1, 1)]).collect();
        assert_eq!(&blocks[..18], &first[..]);
        assert_eq!(blocks[1024], (16, 0));
        assert_eq!(run_matmul(&arranged, m, n, kk), run_matmul(&lm, m, n, kk));
    }

    #[test]
    fn the_default_group_reads_fewer_panels_at_every_wave() {
        // A 32 x 32 grid, a wave of 264 blocks (counted by hand): row-major
        // 8.25 rows, so 9 rows and 32 columns; groups of 16, 16 rows and
        // 16.5 columns; groups of 8, a whole group of 8 x 32 and 8 blocks
        // of the next.
        assert_eq!(wave_panels(32, 32, 1, 264), 9 + 32);
        assert_eq!(wave_panels(32, 32, 16, 264), 16 + 17);
        assert_eq!(wave_panels(32, 32, 8, 264), 16 + 32);
        assert_eq!(wave_panels(32, 32, 32, 264), 32 + 9);
        // At 528, groups of 16 are a whole group and part of the next.
        assert_eq!(wave_panels(32, 32, 1, 528), 17 + 32);
        assert_eq!(wave_panels(32, 32, 16, 528), 32 + 32);
        assert_eq!(auto_group(32, 32, 132), None);
        // 64 x 64: groups of 16 touch 16 + 9, 16 + 17 and 16 + 33 at 132,
        // 264 and 528 blocks; row-major 3 + 64, 5 + 64, 9 + 64.
        assert_eq!((wave_panels(64, 64, 16, 132), wave_panels(64, 64, 16, 264), wave_panels(64, 64, 16, 528)), (25, 33, 49));
        assert_eq!((wave_panels(64, 64, 1, 132), wave_panels(64, 64, 1, 264), wave_panels(64, 64, 1, 528)), (67, 69, 73));
        assert_eq!(auto_group(64, 64, 132), Some(16));
        // The smallest wave runs the grid: no group.
        assert_eq!(auto_group(8, 16, 132), None);
        // Rows with no power-of-two divisor: nothing to group by.
        assert_eq!(auto_group(33, 64, 132), None);
    }

    #[test]
    fn small_grids_keep_their_order() {
        // 64 x 64: 4 x 4 blocks run in one wave; a forced group applies.
        let lm = matmul(64, 64, 16);
        let (_, _, what) = tiled_and_arranged(&lm, &opts(Pick::Auto, Pick::Auto));
        assert_eq!(what, "4x8: warps of 4x8 threads in 16x16, heuristic");
        let (_, arranged, what) = tiled_and_arranged(&lm, &opts(Pick::Off, Pick::Forced(2)));
        assert_eq!(what, "g2: groups of 2 of 4x4 blocks, forced");
        assert_eq!(run_matmul(&arranged, 64, 64, 16), run_matmul(&lm, 64, 64, 16));
        // A group that does not divide the rows, or nothing to do.
        let (_, k, _) = tile_kernel(&lm, &lm.kernels[0], &GpuTarget::default()).unwrap();
        assert!(arrange_kernel(&lm, &k, &opts(Pick::Off, Pick::Forced(3))).is_none());
        assert!(arrange_kernel(&lm, &k, &opts(Pick::Off, Pick::Off)).is_none());
        // A kernel without threads.
        assert!(arrange_kernel(&lm, &lm.kernels[0], &opts(Pick::Auto, Pick::Forced(2))).is_none());
    }

    #[test]
    fn candidates_put_the_rule_first_and_stay_few() {
        // 1024 x 1024 in blocks of 16 x 16 threads: a 64 x 64 grid.
        let gpu = GpuTarget::default();
        let lm = matmul(1024, 1024, 1);
        let (_, k, scratch) = tile_kernel(&lm, &lm.kernels[0], &gpu).expect("block-tiled");
        let mut tiled = lm.clone();
        tiled.buffers.extend(scratch);
        tiled.kernels[0] = k.clone();
        // The rule's 16, none, then the next fewest panels: 32 (16 + 17,
        // 32 + 9, 32 + 17 at 132, 264, 528 blocks; fewer than row-major
        // at every wave, but more in all than 16's 25 + 33 + 49).
        assert_eq!(ranked_groups(64, 64, gpu.sm_count).first(), Some(&16));
        let d: Vec<String> = candidates(&k, &gpu).iter().map(Arrangement::describe).collect();
        assert_eq!(d, ["4x8g16", "4x8", "4x8g32", "8x4g16", "8x4", "8x4g32", "g16", "none", "g32"]);
        assert!(d.len() <= 3 * MAX_GROUPS);
        // The first is what the rule applies; each one, forced, is applied
        // as described (and computes the same cells).
        let (what, _) = arrange_kernel(&tiled, &k, &opts(Pick::Auto, Pick::Auto)).unwrap();
        assert_eq!(what, "4x8g16: warps of 4x8 threads in 16x16, groups of 16 of 64x64 blocks, heuristic");
        let want = run_matmul(&lm, 1024, 1024, 1);
        for c in d.iter().filter(|c| *c != "none") {
            let mut o = opts(Pick::Auto, Pick::Auto);
            tuning::set_choice(&mut o.choosing, c).unwrap();
            let (what, t) = arrange_kernel(&tiled, &k, &o).unwrap();
            assert!(what.starts_with(&format!("{c}: ")) && what.ends_with(", forced"), "{what}");
            let mut arranged = tiled.clone();
            arranged.kernels[0] = t;
            verify::verify(&arranged).unwrap_or_else(|e| panic!("{what}: {e:?}"));
            // The loop interpreter takes seconds a run: the one candidate
            // with both parts forced apart from the rule's.
            if c == "8x4g32" {
                assert_eq!(run_matmul(&arranged, 1024, 1024, 1), want, "{what}");
            }
        }
        let mut o = opts(Pick::Auto, Pick::Auto);
        tuning::set_choice(&mut o.choosing, "none").unwrap();
        assert!(arrange_kernel(&tiled, &k, &o).is_none());
        // `group=` overrides the chosen candidate's group.
        let mut o = opts(Pick::Auto, Pick::Off);
        tuning::set_choice(&mut o.choosing, "8x4g32").unwrap();
        assert_eq!(arrange_kernel(&tiled, &k, &o).unwrap().0, "8x4: warps of 8x4 threads in 16x16, forced");
    }

    #[test]
    fn warp_candidates_are_the_rules_its_transpose_and_row_major() {
        assert_eq!(warp_candidates(16, 16, 32), [Some((4, 8)), Some((8, 4)), None]);
        // Row-major warps already 4 x 8: the rule's is none, first.
        assert_eq!(warp_candidates(16, 8, 32), [None, Some((8, 4))]);
        // 8 x 4 does not fit 4 rows of threads.
        assert_eq!(warp_candidates(4, 64, 32), [Some((4, 8)), None]);
        // A 4 x 4 grid runs in one wave: no group; 16 x 8 threads keep
        // their warps by the rule.
        let gpu = GpuTarget::default();
        let lm = matmul(64, 128, 16);
        let k = tile_kernel(&lm, &lm.kernels[0], &gpu).unwrap().1;
        let d: Vec<String> = candidates(&k, &gpu).iter().map(Arrangement::describe).collect();
        assert_eq!(d, ["4x8", "8x4", "none"]);
        assert!(candidates(&lm.kernels[0], &gpu).is_empty(), "no threads");
    }

    #[test]
    fn a_recorded_arrangement_is_applied_and_near_sizes_take_it() {
        let gpu = GpuTarget::default();
        let tiled_at = |m: i64| {
            let lm = matmul(m, m, 16);
            let (_, k, scratch) = tile_kernel(&lm, &lm.kernels[0], &gpu).unwrap();
            let mut tiled = lm.clone();
            tiled.buffers.extend(scratch);
            tiled.kernels[0] = k;
            tiled
        };
        let at1024 = tiled_at(1024);
        let shape = tuning::KernelShape::of(&at1024, &at1024.kernels[0]).expect("the block-tiled kernel has a shape");
        let entry = |choice: &str| tuning::Entry {
            pass: "arrange-threads".into(),
            shape: shape.clone(),
            choice: choice.into(),
            op: "mm@1024".into(),
            ms: 1.0,
            others: Default::default(),
        };
        let table = |choice: &str| Table { format: tuning::FORMAT, sm: 90, device: String::new(), measured: String::new(), entries: vec![entry(choice)] };
        let o = opts(Pick::Auto, Pick::Auto);
        let (what, _) = arrange_kernel_in(&at1024, &at1024.kernels[0], &o, Some(&table("8x4g32"))).unwrap();
        assert_eq!(what, "8x4g32: warps of 8x4 threads in 16x16, groups of 32 of 64x64 blocks, sm_90 table, as mm@1024");
        // 2048: within 4x, the recording applies (its 128 x 128 grid has
        // groups of 32 too).
        let at2048 = tiled_at(2048);
        let (what, _) = arrange_kernel_in(&at2048, &at2048.kernels[0], &o, Some(&table("8x4g32"))).unwrap();
        assert!(what.starts_with("8x4g32: ") && what.ends_with("sm_90 table, as mm@1024"), "{what}");
        // A recorded `none` leaves the kernel alone; a forced choice wins
        // over the table; no table: the rule.
        assert!(arrange_kernel_in(&at1024, &at1024.kernels[0], &o, Some(&table("none"))).is_none());
        let mut forced = opts(Pick::Auto, Pick::Auto);
        tuning::set_choice(&mut forced.choosing, "4x8").unwrap();
        assert_eq!(arrange_kernel_in(&at1024, &at1024.kernels[0], &forced, Some(&table("8x4g32"))).unwrap().0, "4x8: warps of 4x8 threads in 16x16, forced");
        assert!(arrange_kernel_in(&at1024, &at1024.kernels[0], &o, None).unwrap().0.ends_with("heuristic"));
        // 256: 16x smaller, too far.
        let at256 = tiled_at(256);
        assert!(arrange_kernel_in(&at256, &at256.kernels[0], &o, Some(&table("8x4g32"))).unwrap().0.ends_with("heuristic"));
    }
}
