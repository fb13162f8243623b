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
//! block index (docs/performance.md, section 16).
//!
//! Applies to kernels with a `thread` nest (`block-tiles`) right inside a
//! perfect nest of `parallel` chain loops, thread loops from 0; grouping
//! also needs the two innermost chain loops to have constant bounds from
//! 0 and the kernel to write with both.

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

/// What `arrange-threads` is told: the GPU (`--target`) and the `warp=`
/// and `group=` options.
#[derive(Clone, Debug)]
pub struct ArrangeThreadsOptions {
    pub gpu: GpuTarget,
    /// The lanes of a warp, `(rows, columns)` of the block's threads.
    pub warp: Pick<(i64, i64)>,
    /// Block rows per group.
    pub group: Pick<i64>,
}

impl PassOptions for ArrangeThreadsOptions {
    const KEYS: &'static [(&'static str, &'static str)] = &[
        ("warp", "auto|none|LRxLC: the threads of a warp, LR rows x LC columns of the block's two innermost thread dimensions (default auto: 4x8 where it fits)"),
        ("group", "auto|G: blocks run G rows of block tiles column by column (1: row-major; default auto: the G whose first waves of 1, 2 and 4 blocks per SM all read fewer panels than row-major)"),
    ];
    fn from_driver(d: &DriverOptions) -> Self {
        ArrangeThreadsOptions { gpu: d.gpu, warp: Pick::Auto, group: Pick::Auto }
    }
    fn set(&mut self, key: &str, value: &str) -> Result<(), String> {
        match (key, value) {
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
    for k in &mut m.kernels {
        if let Some((what, t)) = arrange_kernel(k, opts) {
            changed.push(format!("{} {what}", k.name));
            *k = t;
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
        let threads = threads.iter().map(|l| (l.lo.as_const() == Some(0)).then_some(l.hi.as_const().map(|hi| (l.var, hi))).flatten()).collect::<Option<Vec<_>>>()?;
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

    /// `v := by` in the program.
    fn substitute(&mut self, v: VarId, by: &IExpr) {
        walk::for_each_expr_mut(&mut self.program, &mut |e| *e = e.substitute(v, by));
    }
}

/// The kernel arranged, and what changed, when `opts` changes something.
pub fn arrange_kernel(k: &Kernel, opts: &ArrangeThreadsOptions) -> Option<(String, Kernel)> {
    let mut nests = Nests::of(k)?;
    let mut t = k.clone();
    let mut what = Vec::new();
    let n = nests.threads.len();
    let ((r, rt), (c, ct)) = (nests.threads[n - 2], nests.threads[n - 1]);
    if let Some((lr, lc)) = warp_shape(rt, ct, opts.gpu.warp_size, opts.warp) {
        let mut name = |v: VarId, s: &str| walk::add_var(&mut t.vars, &format!("{}_{s}", k.vars[v].name));
        let (rw, cw, rl, cl) = (name(r, "warp"), name(c, "warp"), name(r, "lane"), name(c, "lane"));
        nests.substitute(r, &tile_index(rw, 0, lr, rl));
        nests.substitute(c, &tile_index(cw, 0, lc, cl));
        nests.threads.truncate(n - 2);
        // `r`'s two digits adjacent: one bit field of the thread id (module doc).
        nests.threads.extend([(cw, ct / lc), (rw, rt / lr), (rl, lr), (cl, lc)]);
        what.push(format!("warps of {lr}x{lc} threads in {rt}x{ct}"));
    }
    if let Some((mi, g)) = group_of(&nests, k, &opts.gpu, opts.group) {
        let (m, _, hi) = nests.chain[mi].clone();
        let rows = hi.as_const()?;
        let (mg, min) = (walk::add_var(&mut t.vars, &format!("{}_group", k.vars[m].name)), walk::add_var(&mut t.vars, &format!("{}_in", k.vars[m].name)));
        nests.substitute(m, &tile_index(mg, 0, g, min));
        let n_loop = nests.chain.remove(mi + 1);
        nests.chain[mi] = (mg, IExpr::c(0), IExpr::c(rows / g));
        nests.chain.push(n_loop);
        nests.chain.push((min, IExpr::c(0), IExpr::c(g)));
        what.push(format!("groups of {g} of {rows}x{} blocks", nests.chain[mi + 1].2.as_const()?));
    }
    if what.is_empty() {
        return None;
    }
    t.body = nests.build();
    Some((what.join(", "), t))
}

/// The lanes of a warp `(rows, columns)` over thread trips `rt x ct`, when
/// they differ from the row-major warps'.
pub fn warp_shape(rt: i64, ct: i64, warp: i64, pick: Pick<(i64, i64)>) -> Option<(i64, i64)> {
    let fits = |(lr, lc): (i64, i64)| lr >= 1 && lc >= 1 && lr * lc == warp && rt % lr == 0 && ct % lc == 0;
    let shape = match pick {
        Pick::Off => return None,
        Pick::Forced(s) => Some(s).filter(|&s| fits(s)),
        // Fewest rows plus columns, then the most columns.
        Pick::Auto => (0..=warp.trailing_zeros()).map(|e| (warp >> e, 1i64 << e)).filter(|&s| fits(s)).min_by_key(|&(lr, lc)| (lr + lc, -lc)),
    }?;
    // Row-major warps already are `shape` when a warp spans `ct` columns.
    (shape.1 != ct).then_some(shape)
}

/// The chain loop to group (the second innermost: `m`) and the group,
/// when the grid is grouped.
fn group_of(nests: &Nests, k: &Kernel, gpu: &GpuTarget, pick: Pick<i64>) -> Option<(usize, i64)> {
    let mi = nests.chain.len().checked_sub(2)?;
    let trip = |i: usize| {
        let (_, lo, hi) = &nests.chain[i];
        (lo.as_const() == Some(0)).then(|| hi.as_const()).flatten()
    };
    let (rows, cols) = (trip(mi)?, trip(mi + 1)?);
    let (m, n) = (nests.chain[mi].0, nests.chain[mi + 1].0);
    let writes_both = k.computes().iter().any(|c| c.write.offset.uses(m) && c.write.offset.uses(n));
    if !writes_both {
        return None;
    }
    let g = match pick {
        Pick::Off => return None,
        Pick::Forced(g) => g,
        Pick::Auto => auto_group(rows, cols, gpu.sm_count)?,
    };
    (g >= 2 && rows % g == 0).then_some((mi, g))
}

/// Resident blocks per SM the default group must suit: ptxas fixes the
/// occupancy after this pass (registers), and the block-tiled matmuls
/// run 1 to 4 (the cost model: 2 of the 8x8 kernels' 256-thread blocks at
/// about 124 registers, 4 of the sm_90 table's 128-thread ones).
const RESIDENT_PER_SM: [i64; 3] = [1, 2, 4];

/// The group of block rows for the waves of `sm_count` times each of
/// [`RESIDENT_PER_SM`] blocks: among the powers of two dividing `rows`,
/// those whose first wave touches fewer block rows plus columns (the `a`
/// and `b` panels it reads from L2) than row-major order's at every one of
/// those waves, the one touching fewest over them (the smaller on a tie).
/// `None` where the grid fits in the smallest wave (the order changes
/// nothing) or no group is better at every wave.
pub fn auto_group(rows: i64, cols: i64, sm_count: i64) -> Option<i64> {
    let waves = RESIDENT_PER_SM.map(|r| r.saturating_mul(sm_count));
    if rows.saturating_mul(cols) <= waves[0] {
        return None;
    }
    let row_major = waves.map(|w| wave_panels(rows, cols, 1, w));
    let groups = (1..63).map(|e| 1i64 << e).take_while(|&g| g <= rows).filter(|g| rows % g == 0);
    groups
        .filter_map(|g| {
            let panels = waves.map(|w| wave_panels(rows, cols, g, w));
            panels.iter().zip(&row_major).all(|(p, r)| p < r).then(|| (panels.iter().sum::<i64>(), g))
        })
        .min()
        .map(|(_, g)| g)
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
    use crate::passes::test_matmul::{matmul, run_matmul};

    fn opts(warp: Pick<(i64, i64)>, group: Pick<i64>) -> ArrangeThreadsOptions {
        ArrangeThreadsOptions { gpu: GpuTarget::default(), warp, group }
    }

    /// `lm` with its kernel block-tiled, then arranged as `o` says.
    fn tiled_and_arranged(lm: &LoopModule, o: &ArrangeThreadsOptions) -> (LoopModule, LoopModule, String) {
        let mut tiled = lm.clone();
        let (_, k, scratch) = tile_kernel(lm, &lm.kernels[0], &o.gpu).expect("block-tiled");
        tiled.buffers.extend(scratch);
        tiled.kernels[0] = k;
        let mut arranged = tiled.clone();
        let (what, k) = arrange_kernel(&tiled.kernels[0], o).expect("arranged");
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
        assert_eq!(what, "warps of 4x8 threads in 16x16");
        let old: Vec<VarId> = nest(&tiled.kernels[0], LoopKind::Thread).iter().map(|l| l.var).collect();
        let k = &arranged.kernels[0];
        let new: Vec<(VarId, i64)> = nest(k, LoopKind::Thread).iter().map(|l| (l.var, l.hi.as_const().unwrap())).collect();
        assert_eq!(new.iter().map(|t| t.1).collect::<Vec<_>>(), vec![2, 4, 4, 8]);
        // The old thread variables are bound no more, nor used.
        let mut uses = false;
        k.walk(&mut |x| uses |= matches!(x, Node::For(l) if old.contains(&l.var)));
        walk::for_each_expr_mut(&mut k.body.clone(), &mut |e| uses |= old.iter().any(|&v| e.uses(v)));
        assert!(!uses);
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
        assert_eq!(what, "warps of 8x4 threads in 16x16");
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
        assert_eq!(what, "groups of 16 of 64x64 blocks");
        let col_b = nest(&tiled.kernels[0], LoopKind::Parallel)[1].var;
        let k = &arranged.kernels[0];
        let chain: Vec<(VarId, i64)> = nest(k, LoopKind::Parallel).iter().map(|l| (l.var, l.hi.as_const().unwrap())).collect();
        assert_eq!(chain.iter().map(|c| c.1).collect::<Vec<_>>(), vec![4, 64, 16]);
        assert_eq!(chain[1].0, col_b);
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
        assert_eq!(what, "warps of 4x8 threads in 16x16");
        let (_, arranged, what) = tiled_and_arranged(&lm, &opts(Pick::Off, Pick::Forced(2)));
        assert_eq!(what, "groups of 2 of 4x4 blocks");
        assert_eq!(run_matmul(&arranged, 64, 64, 16), run_matmul(&lm, 64, 64, 16));
        // A group that does not divide the rows, or nothing to do.
        let (_, k, _) = tile_kernel(&lm, &lm.kernels[0], &GpuTarget::default()).unwrap();
        assert!(arrange_kernel(&k, &opts(Pick::Off, Pick::Forced(3))).is_none());
        assert!(arrange_kernel(&k, &opts(Pick::Off, Pick::Off)).is_none());
        // A kernel without threads.
        assert!(arrange_kernel(&lm.kernels[0], &opts(Pick::Auto, Pick::Forced(2))).is_none());
    }
}
