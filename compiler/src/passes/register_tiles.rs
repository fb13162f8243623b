//! `register-tiles` (GPU): a contraction kernel computes a tile of
//! `TM x TN` cells per thread instead of one, so that each value it loads
//! is used `TM` or `TN` times from a register.
//!
//! One thread per cell loads both operands of every multiply-add: matmul
//! reads `a[row, k]` and `b[k, col]` for each of its `M*N*K` terms (two
//! global loads per FMA, 7% of an H100's FP32 peak). Here the two innermost
//! parallel loops of the chain that the GPU maps to threads (`n`, the
//! fastest thread index, and an outer one `m`) shrink by `TN` and `TM`, and
//! the kernel's computation sits in two `unroll` loops:
//!
//! ```text
//! for m in [0, M/TM) parallel { for n in [0, N/TN) parallel {
//!   .. for k reduce { ..
//!     for m_t in [0, TM) unroll { for n_t in [0, TN) unroll {
//!       compute with m := m + (M/TM)*m_t, n := n + (N/TN)*n_t } } } } }
//! ```
//!
//! The tile is cyclic (`n + (N/TN)*n_t`), so the threads of a warp still
//! read consecutive addresses for each `n_t`; along a dimension every
//! access reads contiguously and aligned, in vectors of 16 bytes
//! (`W*n + n_l + W*(N/TN)*n_v`, [`vector_width`]): one 128-bit access per
//! vector, and a block tile's straight copy into shared memory. Code generation unrolls the
//! `unroll` loops; LLVM then keeps the `TM*TN` sums in registers across the
//! reduction and loads `a[m.., k]` once per `m_t` and `b[k, n..]` once per
//! `n_t`: `TM + TN` loads for `TM*TN` multiply-adds. Each cell still sums
//! its terms in the original order, so results do not change at all.
//!
//! Applies to a kernel whose single sum is a plain `accumulate` (the
//! cells of distinct threads are distinct; a store of a constant into the
//! same cell before it, from `fuse-resets`, is tiled with it), that reads nothing of the
//! buffer it writes, has a `reduce` loop under the chain, has loads that
//! do not depend on `n` and loads that do not depend on `m` (the reuse),
//! and uses `m` and `n` nowhere but in that computation (not in the chain's
//! guards, loop bounds or index loads: those are evaluated once per thread
//! now). The tile is the largest of 8x8, 4x4, 2x2 that divides both trips
//! and leaves at least `min_threads` threads (`GpuTarget`, ir/loops/target.rs):
//! [`candidates`] lists the tiles, [`apply`] makes one.
//!
//! A dynamic kernel's `m` or `n` of symbolic trip `T` (bounds `[lo, hi)`)
//! is tiled too, cyclically: the loop runs `T //^ TM` times, the cell is
//! `m + (T //^ TM)*m_t`, and each cell of the tile is guarded by `lo <=
//! cell < hi`, so the cells past the extent compute and store nothing. In
//! the thread threshold such a trip counts as [`DYN_TRIP`] (256; other
//! symbolic chain loops, a batch, as 1): the build does not know the
//! dims, and the large shapes are the ones whose speed matters. A kernel
//! with nested reductions (a convolution's window) is tiled only along
//! constant trips, unless the option `window=TMxTN` asks for that tile of
//! its symbolic ones (a run-time variant's, docs/dynamic-shapes.md: the
//! build cannot tell few channels from many; the variant's condition can).

use super::tuning::{self, Choosing};
use super::{DriverOptions, Ir, PassError, PassOptions, Unit};
use crate::ir::loops::chain::Chain;
use crate::ir::loops::target::{GpuTarget, HostTarget};
use crate::ir::loops::*;

/// How a thread's tile lies in the iteration space (pass option
/// `layout=cyclic|blocked`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum TileLayout {
    /// `n + (N/TN)*n_t`: the GPU's (the default), so that the threads of a
    /// warp read consecutive addresses for each `n_t`.
    #[default]
    Cyclic,
    /// `n*TN + n_t`: the host's, so that a thread's `TN` cells are
    /// contiguous and LLVM keeps them in vector registers (a register-
    /// blocked micro-kernel: `TM*TN/8` vector sums of 8 floats).
    Blocked,
}

impl std::str::FromStr for TileLayout {
    type Err = String;
    fn from_str(s: &str) -> Result<TileLayout, String> {
        match s {
            "cyclic" => Ok(TileLayout::Cyclic),
            "blocked" => Ok(TileLayout::Blocked),
            _ => Err("expected cyclic or blocked".into()),
        }
    }
}

/// Host tiles (`blocked`), largest first: 4 rows of 16, 8 or 4 contiguous
/// cells (two, one or half an AVX-512 vector of f32), those that fit the
/// host's vector registers ([`HostTarget::fits`]). The GPU's (`cyclic`)
/// are [`GpuTarget::register_tiles`].
pub const HOST_TILES: [(i64, i64); 6] = [(4, 16), (4, 8), (4, 4), (2, 16), (2, 8), (2, 4)];

/// The tile a reused program ([`HostTarget::reused`]) also considers: it
/// wins where 4 x 16 does not fit and 6 divides the rows (AVX2 f64, SSE
/// f32). Its 12 sums of one vector hide the FMA latency that 4 x 8's 8
/// sums only just cover (two FMA pipes x 4 cycles on Zen 3): products
/// 8-16% faster, but LLVM takes 15-18 ms more to compile the two kernels
/// of the 768-1152 chain, more than one `eintup run` gains
/// (docs/journal/performance.md section 19).
pub const REUSED_HOST_TILE: (i64, i64) = (6, 8);

/// The tiles `register-tiles{layout=blocked}` considers for `host`:
/// [`HOST_TILES`], and [`REUSED_HOST_TILE`] for a reused program (the
/// candidates are ordered by size, so its place in the list is theirs).
pub fn host_tiles(host: &HostTarget) -> Vec<(i64, i64)> {
    HOST_TILES.iter().copied().chain(host.reused.then_some(REUSED_HOST_TILE)).collect()
}

/// What `register-tiles` is told: the layout of a thread's tile (pass
/// option only: `cyclic`, the GPU's, unless the pipeline says
/// `register-tiles{layout=blocked}`, as the host's does), the GPU
/// (`--target`) and the host CPU (`--target-cpu`, or the options
/// `vector-registers` and `vector-bytes`).
/// The tile of each kernel is the forced `choice=`, the GPU's tuning
/// table's or the heuristic's (`tuning.rs`); the host's (`blocked`) is
/// the heuristic's or the forced one: the tables record GPUs.
#[derive(Clone, Debug)]
pub struct RegisterTilesOptions {
    pub layout: TileLayout,
    pub gpu: GpuTarget,
    pub host: HostTarget,
    pub choosing: Choosing,
    /// The tile of a window's symbolic trips (`window=TMxTN`); `None`:
    /// they stay whole.
    pub window: Option<(i64, i64)>,
}

impl PassOptions for RegisterTilesOptions {
    const KEYS: &'static [(&'static str, &'static str)] = &[
        ("layout", "cyclic|blocked: a thread's register tile, strided (GPU) or contiguous (host)"),
        tuning::CHOICE,
        ("window", "TMxTN: tile a window's symbolic trips (a dynamic convolution's) so, their cells guarded (default: whole)"),
        ("vector-registers", "N: the host's vector registers, which a blocked tile must fit (default: the CPU compiled for; 16 without one)"),
        ("vector-bytes", "N: the bytes of the host's vectors (default: the CPU compiled for; 32 without one)"),
        ("reused", "true|false: the host program is run many times, so 6x8 tiles are worth their compile time (default: false; true in the Python package)"),
    ];
    fn from_driver(d: &DriverOptions) -> Self {
        RegisterTilesOptions {
            layout: TileLayout::default(),
            gpu: d.gpu,
            host: d.host,
            choosing: Choosing { forced: None, table_sm: d.tuning.then_some(d.gpu.sm) },
            window: None,
        }
    }
    fn set(&mut self, key: &str, value: &str) -> Result<(), String> {
        let positive = |v: &str| v.parse::<i64>().ok().filter(|&n| (1..=1024).contains(&n)).ok_or_else(|| "expected an integer from 1 to 1024".to_string());
        match key {
            "layout" => self.layout = value.parse()?,
            "window" => self.window = Some(parse_tile(value)?),
            "choice" => tuning::set_choice(&mut self.choosing, value)?,
            "vector-registers" => self.host.vector_registers = positive(value)?,
            "vector-bytes" => self.host.vector_bytes = positive(value)?,
            "reused" => self.host.reused = value.parse().map_err(|_| "expected true or false".to_string())?,
            _ => return Err(format!("option `{key}` is not declared")),
        }
        Ok(())
    }
}

impl RegisterTilesOptions {
    /// Whose tiles the layout asks for.
    pub fn tiling(&self) -> Tiling<'_> {
        match self.layout {
            TileLayout::Cyclic => Tiling::Gpu(&self.gpu),
            TileLayout::Blocked => Tiling::Host(&self.host),
        }
    }
}

/// Whose tiles [`candidates`] offers: the GPU's (`cyclic`: its menu, and
/// enough threads left) or the host's (`blocked`: [`HOST_TILES`] that fit
/// its vector registers).
#[derive(Clone, Copy, Debug)]
pub enum Tiling<'a> {
    Gpu(&'a GpuTarget),
    Host(&'a HostTarget),
}

impl Tiling<'_> {
    pub fn layout(self) -> TileLayout {
        match self {
            Tiling::Gpu(_) => TileLayout::Cyclic,
            Tiling::Host(_) => TileLayout::Blocked,
        }
    }
}

pub fn run(unit: &mut Unit, opts: &RegisterTilesOptions) -> Result<Option<String>, PassError> {
    let Ir::Loop(m) = &mut unit.ir else { return Err(PassError::Internal("register-tiles runs on the loop level".into())) };
    let mut tiled = Vec::new();
    let choosing = Choosing { table_sm: opts.choosing.table_sm.filter(|_| opts.layout == TileLayout::Cyclic), ..opts.choosing.clone() };
    let mut symbolic = false;
    for ki in 0..m.kernels.len() {
        let k = &m.kernels[ki];
        symbolic |= k.is_symbolic();
        let cands = candidates(k, opts.tiling(), opts.window);
        let described: Vec<String> = cands.iter().map(|c| c.describe(k)).collect();
        let Some((i, why)) = tuning::pick("register-tiles", m, k, &described, &choosing) else { continue };
        if let Some(t) = apply(k, &cands[i]) {
            tiled.push(format!("{} {} {why}", k.name, described[i]));
            m.kernels[ki] = t;
        }
    }
    // The threshold's rule for trips the build does not know (module doc).
    let mut rule = if symbolic { format!("; symbolic trips count as {DYN_TRIP} along the tile, 1 elsewhere, their cells guarded") } else { String::new() };
    rule += &m.max_min_left_alone();
    Ok(Some(if tiled.is_empty() { format!("0 kernels tiled{rule}") } else { format!("{} kernels tiled ({}){rule}", tiled.len(), tiled.join(", ")) }))
}

/// What a symbolic trip of `m` or `n` counts as in the thread threshold
/// (other symbolic chain loops, a batch, count as 1): the large shapes
/// are the ones whose speed matters, and 256 is the tile a 256x256 output
/// gets (4x4 at `min_threads` 4096).
pub const DYN_TRIP: i64 = 256;

/// `TMxTN`, both positive and at most 16 (a thread's cells are registers).
fn parse_tile(s: &str) -> Result<(i64, i64), String> {
    let bad = || format!("expected TMxTN (each 1 to 16), got `{s}`");
    let (a, b) = s.split_once('x').ok_or_else(bad)?;
    let (a, b): (i64, i64) = (a.parse().map_err(|_| bad())?, b.parse().map_err(|_| bad())?);
    if !(1..=16).contains(&a) || !(1..=16).contains(&b) {
        return Err(bad());
    }
    Ok((a, b))
}

/// One way to tile a kernel: the chain loop `m` tiled with the innermost
/// one (`n`), the tile `(TM, TN)` and its layout.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct TileChoice {
    pub m: VarId,
    pub tile: (i64, i64),
    pub layout: TileLayout,
}

impl TileChoice {
    /// `TMxTN@P`, `P` the position of `m` among `k`'s chain loops
    /// (outermost 0): the name `--stats`, `choice=` and the tuning table
    /// use, the same for every kernel of the chain's length.
    pub fn describe(&self, k: &Kernel) -> String {
        let at = Chain::of_dynamic(&k.body).loops.iter().position(|l| l.0 == self.m).map_or(-1, |p| p as i64);
        format!("{}x{}@{at}", self.tile.0, self.tile.1)
    }
}

/// The tiled kernel and its tile, when `k` qualifies (see the module doc):
/// [`apply`] of the first of [`candidates`].
pub fn tile_kernel(k: &Kernel, tiling: Tiling<'_>) -> Option<((i64, i64), Kernel)> {
    let choice = *candidates(k, tiling, None).first()?;
    Some((choice.tile, apply(k, &choice)?))
}

/// A chain loop the tile may use: its variable, constant lower bound,
/// trip (`None`: symbolic, a dynamic kernel's) and upper bound.
#[derive(Clone)]
struct Dim {
    var: VarId,
    lo: i64,
    trip: Option<i64>,
    hi: IExpr,
}

/// What the tiling of `k` starts from, when its shape allows a tile: the
/// chain, the innermost chain loop `n`, and the chain loops usable as
/// `m`, innermost first.
struct Tileable {
    chain: Chain,
    n: Dim,
    ms: Vec<Dim>,
}

fn tileable(k: &Kernel) -> Option<Tileable> {
    let chain = Chain::of_dynamic(&k.body);
    let rest = chain.rest(&k.body);
    let mut reduces = false;
    k.walk(&mut |n| reduces |= matches!(n, Node::For(f) if f.kind == LoopKind::Reduce));
    // The sum, and at most a clear of its cell before it (`fuse-resets`).
    let KernelSum { sum: c, .. } = k.sum()?;
    if !reduces {
        return None;
    }
    let loads: Vec<&IExpr> = c
        .values
        .iter()
        .filter_map(|v| match &v.op {
            VOp::Load { offset, .. } => Some(offset),
            _ => None,
        })
        .collect();
    let usable = |v: VarId| !chain.exprs.iter().any(|e| e.uses(v)) && !used_outside_compute(rest, v) && loads.iter().any(|o| !o.depends_on(v));
    let dims: Vec<Option<Dim>> = chain
        .loops
        .iter()
        .zip(&chain.bounds)
        .map(|(&(var, ..), (lo, hi))| {
            let lo_c = lo.as_const()?;
            Some(Dim { var, lo: lo_c, trip: hi.as_const().map(|h| h - lo_c), hi: hi.clone() })
        })
        .collect();
    let n = dims.last()?.clone()?;
    if !usable(n.var) {
        return None;
    }
    let ms = dims[..dims.len() - 1].iter().rev().flatten().filter(|d| usable(d.var)).cloned().collect();
    Some(Tileable { chain, n, ms })
}

/// Every tile of `k` that the pass would consider, best first: the one
/// `register-tiles` applies is the first.
///
/// The GPU (`cyclic`) tiles the innermost loop that qualifies (its threads
/// then still step along neighbouring cells), with the largest of the
/// target's tiles that divides both trips and leaves at least
/// `gpu.min_threads` threads; later candidates are the smaller tiles, then
/// the loops further out. A kernel with a window (several `reduce` loops:
/// a convolution) takes the largest tile of any loop, innermost on ties.
/// A symbolic trip (a dynamic kernel's) need not divide: its cells past
/// the extent are guarded; in the threshold it counts as [`DYN_TRIP`]
/// when it is `m`'s or `n`'s, else as 1. The host (`blocked`) takes the
/// largest tile of any loop with constant trips (innermost on ties) among
/// those whose sums, operand vectors and broadcast fit its vector
/// registers (`HostTarget::fits`, the cells' dtype): a convolution with 62
/// output columns tiles 4 images x 16 channels, 8 vector sums of f32,
/// rather than 2 columns x 16 channels, 4 (too few independent chains to
/// hide the adds' latency); in f64 on an AVX2 CPU, 4 x 8.
/// A window's symbolic trips take the tile `window` alone (cyclic, no
/// thread threshold: a run-time variant's condition stands for it), or
/// none.
pub fn candidates(k: &Kernel, tiling: Tiling<'_>, window: Option<(i64, i64)>) -> Vec<TileChoice> {
    let Some(t) = tileable(k) else { return Vec::new() };
    let layout = tiling.layout();
    // The cells' dtype: that of the sum's value.
    let elem_bytes = k.sum().and_then(|s| s.sum.values.last()).map_or(8, |v| v.dtype.size() as i64);
    let mut out: Vec<TileChoice> = Vec::new();
    // A window (reductions nested around the innermost, a convolution's)
    // keeps symbolic trips whole: its channels are often few, so a tile of
    // them would be mostly guarded off, and `block-tiles` shares its
    // operands without one.
    let mut reduces = 0;
    k.walk(&mut |n| reduces += matches!(n, Node::For(f) if f.kind == LoopKind::Reduce) as usize);
    let windows = reduces > 1;
    let host_list = match tiling {
        Tiling::Host(host) => host_tiles(host),
        Tiling::Gpu(_) => Vec::new(),
    };
    for m in t.ms.iter() {
        let symbolic = m.trip.is_none() || t.n.trip.is_none();
        if windows && symbolic {
            if let (Some(tile), TileLayout::Cyclic) = (window, layout) {
                out.push(TileChoice { m: m.var, tile, layout });
            }
            continue;
        }
        let cells: i64 = t
            .chain
            .loops
            .iter()
            .zip(&t.chain.bounds)
            .map(|(&(v, _, trip), (elo, ehi))| match known_trip(elo, ehi) {
                Some(_) => trip.max(0),
                None if v == m.var || v == t.n.var => DYN_TRIP,
                None => 1,
            })
            .fold(1i64, |a, b| a.saturating_mul(b));
        let (tiles, fits): (&[(i64, i64)], &dyn Fn((i64, i64)) -> bool) = match tiling {
            // Enough threads must be left.
            Tiling::Gpu(gpu) => (&gpu.register_tiles, &move |(tm, tn)| cells / (tm * tn) >= gpu.min_threads),
            // The host runs every cell in one or two threads anyway; the
            // tile must fit its registers.
            Tiling::Host(host) => (&host_list, &move |tile| host.fits(tile, elem_bytes)),
        };
        // A symbolic trip is guarded, on the GPU's cyclic tile only.
        let divides = |d: &Dim, f: i64| d.trip.map_or(layout == TileLayout::Cyclic, |trip| trip % f == 0);
        for &(tm, tn) in tiles {
            if divides(m, tm) && divides(&t.n, tn) && fits((tm, tn)) {
                out.push(TileChoice { m: m.var, tile: (tm, tn), layout });
            }
        }
    }
    // A window's kernel (a convolution) on the GPU, at constant trips, takes
    // the largest tile of any loop too: measured on an H200 (2026-11-27,
    // docs/tuning.md), a batch tile 8x8 beat the output-column tile 2x2
    // by 1.3x-2.7x at the three tuned sizes, where the innermost loop's
    // trip (222, 54) admits only 2x2. A matmul keeps the innermost loop.
    let largest_first = layout == TileLayout::Blocked || (windows && window.is_none());
    if largest_first {
        // Stable: the innermost loop wins a tie (each loop's largest tile
        // is its first in the target's list).
        out.sort_by_key(|c| std::cmp::Reverse(c.tile.0 * c.tile.1));
    }
    out
}

/// A loop's trip, `None` when a bound is not a constant.
fn known_trip(lo: &IExpr, hi: &IExpr) -> Option<i64> {
    Some(hi.as_const()? - lo.as_const()?)
}

/// `k` tiled as `choice` says, when the kernel has the shape the pass
/// needs, `choice.m` is a usable loop and the tile divides both trips
/// (any such choice computes the same cells; [`candidates`] adds the
/// target's thresholds). A symbolic trip (cyclic layout only) need not
/// divide: the loop runs `T //^ TM` times and each cell of the tile is
/// guarded by `lo <= m + (T //^ TM)*m_t < hi`, so a cell past the extent
/// computes and stores nothing.
pub fn apply(k: &Kernel, choice: &TileChoice) -> Option<Kernel> {
    let Tileable { mut chain, n, ms } = tileable(k)?;
    let m = ms.iter().find(|l| l.var == choice.m)?.clone();
    let (tm, tn) = choice.tile;
    let layout = choice.layout;
    let fits = |d: &Dim, f: i64| d.trip.map_or(layout == TileLayout::Cyclic, |trip| trip % f == 0);
    if tm <= 0 || tn <= 0 || !fits(&m, tm) || !fits(&n, tn) {
        return None;
    }

    let mut t = k.clone();
    // Each dimension's stride between the cells of a tile: `trip / T`,
    // or `(hi - lo) //^ T` when symbolic (then the chain loop's new hi).
    let stride = |d: &Dim, f: i64| match d.trip {
        Some(trip) => IExpr::c(trip / f),
        None => IExpr::bin(IBin::CeilDiv, if d.lo == 0 { d.hi.clone() } else { IExpr::sub(d.hi.clone(), IExpr::c(d.lo)) }, IExpr::c(f)),
    };
    for (d, f) in [(&m, tm), (&n, tn)] {
        match d.trip {
            Some(trip) => chain.set_trip(&mut t.body, d.var, trip / f),
            None => chain.set_hi(&mut t.body, d.var, if d.lo == 0 { stride(d, f) } else { IExpr::add(IExpr::c(d.lo), stride(d, f)) }),
        }
    }
    // A cyclic tile along a dimension every access of the sum reads or
    // writes contiguously keeps a thread's cells in vectors (`vector_width`).
    let widths = [vector_width(k, &m, tm, layout), vector_width(k, &n, tn, layout)];
    // Each computation (the sum, and a clear before it) gets its own tile
    // variables: a variable is bound once.
    let mut vars = t.vars.clone();
    wrap_computes(chain.rest_mut(&mut t.body), &mut |node| {
        // Per dimension: the cell, and the unroll loops `(var, trip)` of its
        // tile, outermost first.
        let mut tile = |d: &Dim, f: i64, w: i64| -> (IExpr, Vec<(VarId, i64)>) {
            let name = &k.vars[d.var].name;
            if w > 1 {
                // `lo + w*(m - lo) + m_l + w*(trip/T)*m_v`: vectors of `w`
                // consecutive cells, cyclic beyond.
                // (One vector per thread: no `m_v` loop.)
                let mv = (f > w).then(|| add_var(&mut vars, &format!("{name}_tv")));
                let ml = add_var(&mut vars, &format!("{name}_tl"));
                let cell = IExpr::add(IExpr::vector_start(d.var, d.lo, w), IExpr::v(ml));
                return match mv {
                    None => (cell, vec![(ml, w)]),
                    Some(mv) => {
                        let s = d.trip.map_or(0, |trip| trip / f);
                        (IExpr::add(cell, IExpr::mul(IExpr::c(w * s), IExpr::v(mv))), vec![(mv, f / w), (ml, w)])
                    }
                };
            }
            let vt = add_var(&mut vars, &format!("{name}_t"));
            let cell = match layout {
                TileLayout::Cyclic => IExpr::add(IExpr::v(d.var), IExpr::mul(stride(d, f), IExpr::v(vt))),
                TileLayout::Blocked => tile_index(d.var, d.lo, f, vt),
            };
            (cell, vec![(vt, f)])
        };
        let ((m_at, m_loops), (n_at, n_loops)) = (tile(&m, tm, widths[0]), tile(&n, tn, widths[1]));
        let mut inner = vec![node];
        for_each_expr_mut(&mut inner, &mut |e| *e = e.substitute(m.var, &m_at).substitute(n.var, &n_at));
        // The cells past a symbolic extent compute nothing.
        let conds: Vec<Cond> = [(&m, &m_at), (&n, &n_at)]
            .into_iter()
            .filter(|(d, _)| d.trip.is_none())
            .map(|(d, at)| Cond::InRange { e: at.clone(), lo: IExpr::c(d.lo), hi: d.hi.clone() })
            .collect();
        if !conds.is_empty() {
            inner = vec![Node::Guard(Guard { conds, body: inner })];
        }
        let loops = m_loops.into_iter().chain(n_loops).rev();
        let nest = loops.fold(inner, |body, (var, trip)| vec![Node::For(For { var, lo: IExpr::c(0), hi: IExpr::c(trip), kind: LoopKind::Unroll, body })]);
        nest.into_iter().next().unwrap_or(Node::Sync)
    });
    t.vars = vars;
    Some(t)
}

/// How many consecutive cells of a cyclic tile of `f` along `d` a thread
/// keeps side by side (1: none): the most that fit 16 bytes of the sum's
/// element and divide `f`, where `d`'s trip is constant (or symbolic, in
/// a kernel with dim facts, with `f` one vector) and every load and write
/// of the sum that depends on `d` is contiguous along it and starts each
/// vector 16-byte aligned (under the kernel's facts). A thread's cells then make one
/// 128-bit access per vector where they made `w` scalar ones, and a
/// block tile's copy of them into shared memory, laid out for 128-bit
/// reads (`block-tiles`), stays a straight copy that `cp.async` can do
/// (docs/passes.md, "Vector cells"). Other dimensions (a matmul's rows,
/// strided in both operands) stay plainly cyclic.
fn vector_width(k: &Kernel, d: &Dim, f: i64, layout: TileLayout) -> i64 {
    let Some(KernelSum { sum, .. }) = k.sum() else { return 1 };
    let Some(elem) = sum.values.last().map(|v| v.dtype.size() as i64) else { return 1 };
    let mut w = 16 / elem.max(1);
    while w > 1 && f % w != 0 {
        w /= 2;
    }
    // A symbolic trip takes one vector per thread (`w*m + m_l`, its cells
    // guarded as the cyclic tile's), where the kernel's dim facts
    // (`Kernel::multiples`, a run-time variant's) prove the alignment.
    let fits = d.trip.map_or(f == w && !k.multiples.is_empty(), |trip| trip % f == 0);
    if layout != TileLayout::Cyclic || w <= 1 || !fits {
        return 1;
    }
    let offsets = sum.values.iter().filter_map(|v| match &v.op {
        VOp::Load { offset, .. } => Some(offset),
        _ => None,
    });
    // At the first cell of a vector (`lo + w*(m - lo) + w*s*m_v`; `m_v`,
    // like `m`, any value): what an aligned vector access needs.
    let aligned = |o: &IExpr| !o.depends_on(d.var) || o.vector_aligned(d.var, d.lo, w, &k.multiples);
    if offsets.chain([&sum.write.offset]).all(aligned) {
        w
    } else {
        1
    }
}

/// Does a node of `nodes` other than the computation (a loop bound, a
/// guard, an index load) use `v`?
fn used_outside_compute(nodes: &[Node], v: VarId) -> bool {
    nodes.iter().any(|n| !matches!(n, Node::Compute(_)) && (n.own_exprs().iter().any(|e| e.uses(v)) || used_outside_compute(n.body(), v)))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::interp::loops as li;
    use crate::passes::test_kernels::{matmul, run_matmul};
    use crate::tensor::{Data, Tensor};

    #[test]
    fn matmul_tiles_and_computes_the_same_cells() {
        for (m, n, k, tile) in [(512, 512, 2, (8, 8)), (256, 256, 3, (4, 4)), (64, 256, 2, (2, 2))] {
            let lm = matmul(m, n, k);
            let (got, t) = tile_kernel(&lm.kernels[0], Tiling::Gpu(&GpuTarget::default())).expect("tiled");
            assert_eq!(got, tile, "{m}x{n}");
            let mut tiled = lm.clone();
            tiled.kernels[0] = t;
            verify::verify(&tiled).unwrap();
            // Against a direct product (wrapping, as INT does).
            let a: Vec<i32> = (0..m * k).map(|i| (i as i32).wrapping_mul(7919) % 1000).collect();
            let b: Vec<i32> = (0..k * n).map(|i| (i as i32).wrapping_mul(104_729) % 777).collect();
            let mut want = vec![0i32; (m * n) as usize];
            for r in 0..m as usize {
                for c in 0..n as usize {
                    for j in 0..k as usize {
                        want[r * n as usize + c] = want[r * n as usize + c].wrapping_add(a[r * k as usize + j].wrapping_mul(b[j * n as usize + c]));
                    }
                }
            }
            let mut bufs = vec![
                Tensor::new(vec![m as usize, k as usize], Data::I32(a)).unwrap(),
                Tensor::new(vec![k as usize, n as usize], Data::I32(b)).unwrap(),
                Tensor::zeros(DType::I32, &[m as usize, n as usize]).unwrap(),
            ];
            li::run(&tiled, 0, &mut bufs).unwrap();
            assert_eq!(bufs[2].data, Data::I32(want), "{m}x{n}x{k}");
        }
    }

    #[test]
    fn left_alone_small_indivisible_or_without_reuse() {
        // 64x64 cells: 2x2 tiles would leave 1024 threads.
        assert!(tile_kernel(&matmul(64, 64, 8).kernels[0], Tiling::Gpu(&GpuTarget::default())).is_none());
        // 4097 rows: no tile divides it; the next loop out does not exist.
        assert!(tile_kernel(&matmul(4097, 3, 8).kernels[0], Tiling::Gpu(&GpuTarget::default())).is_none());
        // A copy has no reduction to reuse loads across.
        let copy = parse::parse_verified(
            "buffer x : i32[128, 128] input\nbuffer y : i32[128, 128] output\n\nkernel @cp {\n  for i in [0, 128) parallel {\n    for j in [0, 128) parallel {\n      %0 = load x[((i * 128) + j)] : i32\n      accumulate y[((i * 128) + j)] += %0\n    }\n  }\n}\n",
        )
        .unwrap();
        assert!(tile_kernel(&copy.kernels[0], Tiling::Gpu(&GpuTarget::default())).is_none());
    }

    #[test]
    fn candidates_list_every_tile_and_any_one_applies() {
        let (m, n, k) = (256, 128, 3);
        let lm = matmul(m, n, k);
        let gpu = GpuTarget::default();
        let row = 0; // the kernel's first variable
        let cs = candidates(&lm.kernels[0], Tiling::Gpu(&gpu), None);
        // 32768 cells: 8x8 would leave 512 threads, 4x4 2048, 2x2 8192.
        assert_eq!(cs, vec![TileChoice { m: row, tile: (2, 2), layout: TileLayout::Cyclic }]);
        // Without the thread threshold every tile is a candidate, largest first.
        let all = candidates(&lm.kernels[0], Tiling::Gpu(&GpuTarget { min_threads: 1, ..gpu }), None);
        assert_eq!(all.iter().map(|c| c.tile).collect::<Vec<_>>(), vec![(8, 8), (4, 4), (2, 2)]);
        // i32 cells: every host tile fits AVX2's 16 registers.
        let host = candidates(&lm.kernels[0], Tiling::Host(&HostTarget::AVX2), None);
        assert_eq!(host.first().map(|c| c.tile), Some((4, 16)));
        assert_eq!(host.len(), HOST_TILES.len());
        // The default is the first candidate.
        assert_eq!(tile_kernel(&lm.kernels[0], Tiling::Gpu(&gpu)).map(|t| t.0), Some((2, 2)));
        // Forced choices, the pass would not make, compute the same cells
        // as the untiled kernel.
        let want = run_matmul(&lm, m, n, k);
        let forced = all.iter().chain(&host).copied().chain([TileChoice { m: row, tile: (1, 4), layout: TileLayout::Cyclic }]);
        for choice in forced {
            let mut tiled = lm.clone();
            tiled.kernels[0] = apply(&lm.kernels[0], &choice).unwrap_or_else(|| panic!("{choice:?}"));
            verify::verify(&tiled).unwrap();
            assert_eq!(run_matmul(&tiled, m, n, k), want, "{choice:?}");
        }
        // A tile that does not divide the trips, or a loop that is not a
        // chain loop the tile may use, is refused.
        assert!(apply(&lm.kernels[0], &TileChoice { m: row, tile: (3, 2), layout: TileLayout::Cyclic }).is_none());
        assert!(apply(&lm.kernels[0], &TileChoice { m: 2, tile: (2, 2), layout: TileLayout::Cyclic }).is_none());
    }

    #[test]
    fn a_convolution_on_the_gpu_takes_the_largest_tile_of_any_loop() {
        // 32 images of 22 x 22 outputs, 32 channels: the innermost loop
        // (the output column, 22) admits only 2x2; the batch admits 8x8
        // (7744 threads left). The largest comes first (measured on an
        // H200: docs/tuning.md, "Results (H200)").
        let binds = ["batch=[32]", "ipos=[24,24]", "fpos=[3,3]", "stride=[1,1]", "ichan=[8]", "ochan=[32]"];
        let (_, lm) = crate::passes::test_kernels::conv_before("FLOAT", &binds, FpContract::Fast, "register-tiles");
        let k = lm.kernels.iter().find(|k| k.sum().is_some()).expect("the convolution's kernel");
        let gpu = GpuTarget::default();
        let cs = candidates(k, Tiling::Gpu(&gpu), None);
        let name = |c: &TileChoice| k.vars[c.m].name.clone();
        let got: Vec<(String, (i64, i64))> = cs.iter().map(|c| (name(c), c.tile)).collect();
        assert_eq!(got.first().map(|(v, t)| (v.starts_with("batch"), *t)), Some((true, (8, 8))), "{got:?}");
        // The output column's 2x2 is still offered, after the larger tiles.
        assert!(got.iter().any(|(v, t)| v.starts_with("opos") && *t == (2, 2)), "{got:?}");
    }

    #[test]
    fn host_tiles_fit_the_cpus_vector_registers() {
        // The same product in f64: 4x16 needs 21 vectors of 32 bytes.
        let lm = parse::parse_verified(&print::module(&matmul(256, 128, 3)).replace("i32", "f64")).unwrap();
        assert_eq!(lm.buffers[0].dtype, DType::F64);
        let tiles = |host: &HostTarget| candidates(&lm.kernels[0], Tiling::Host(host), None).iter().map(|c| c.tile).collect::<Vec<_>>();
        // Largest first (2x16 before 4x4).
        assert_eq!(tiles(&HostTarget::AVX512), [(4, 16), (4, 8), (2, 16), (4, 4), (2, 8), (2, 4)]);
        assert_eq!(tiles(&HostTarget::AVX2), [(4, 8), (2, 16), (4, 4), (2, 8), (2, 4)]);
        assert_eq!(tiles(&HostTarget::SSE), [(4, 4), (2, 8), (2, 4)]);
        // Every one of them fits.
        for host in [HostTarget::SSE, HostTarget::AVX2, HostTarget::AVX512] {
            assert!(tiles(&host).iter().all(|&t| host.fits(t, 8)), "{host:?}");
        }
        // 96 rows: a reused program takes 6 x 8 (15 registers) where 4 x 16
        // does not fit; one run, or 4 x 16 fitting, keeps the other tiles.
        let lm = parse::parse_verified(&print::module(&matmul(96, 128, 3)).replace("i32", "f64")).unwrap();
        let tiles = |host: &HostTarget| candidates(&lm.kernels[0], Tiling::Host(host), None).iter().map(|c| c.tile).collect::<Vec<_>>();
        assert_eq!(tiles(&HostTarget::AVX2.reused())[0], (6, 8));
        assert_eq!(HostTarget::AVX2.tile_registers((6, 8), 8), 15);
        assert_eq!(tiles(&HostTarget::AVX2)[0], (4, 8));
        assert_eq!(tiles(&HostTarget::AVX512.reused())[..2], [(4, 16), (6, 8)]);
        assert!(!tiles(&HostTarget::SSE.reused()).contains(&(6, 8)));
        // The 6 x 8 tile computes the same cells as the untiled kernel.
        let i32_lm = matmul(96, 128, 3);
        let choice = candidates(&i32_lm.kernels[0], Tiling::Host(&HostTarget::AVX2.reused()), None).into_iter().find(|c| c.tile == (6, 8)).unwrap();
        let mut tiled = i32_lm.clone();
        tiled.kernels[0] = apply(&i32_lm.kernels[0], &choice).unwrap();
        verify::verify(&tiled).unwrap();
        assert_eq!(run_matmul(&tiled, 96, 128, 3), run_matmul(&i32_lm, 96, 128, 3));
    }
}
