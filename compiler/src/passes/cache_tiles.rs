//! `cache-tiles` (host): a register-tiled contraction whose streamed
//! operand does not fit in the core's cache runs over panels of it that
//! do, so each panel is read from memory once instead of once per row
//! block.
//!
//! After `register-tiles{layout=blocked}` a 1024^3 f64 matmul is
//!
//! ```text
//! for i in [0, 256) parallel { for n in [0, 64) parallel {
//!   for j in [0, 1024) reduce { 4x16 unroll tile: y[4i.., 16n..] += a[4i.., j] * b[j, 16n..] } } }
//! ```
//!
//! and every row block `i` streams all of `b` (8 MiB, four times the L2 of
//! a core) through the cache. Here the column loop `n` and the reduction
//! `j` are cut into blocks, `n := n_c*NB + n` and `j := j_c*KC + j`, and
//! the block loops go outermost:
//!
//! ```text
//! for n_c in [0, 4) parallel { for j_c in [0, 4) reduce {
//!   for i in [0, 256) parallel { for n in [0, 16) parallel {
//!     for j in [0, 256) reduce { tile } } } } }
//! ```
//!
//! so the `KC x NB*16` panel of `b` (512 KiB) stays in L2 while every row
//! block uses it. Each cell still receives its terms in the order of `j`
//! (the `j_c` blocks in order, each block's `j` in order), and the
//! parallel loops write distinct cells, so results are bit-identical. The
//! block loops' bounds are `min`s where a block does not divide the trip.
//! `n_c` is the root loop the host splits over its threads: at least two
//! panels, and an even number of them where a panel size within the
//! budget gives one, so that two threads get equal work.
//!
//! With `pack` (the default) a `pack` kernel first copies the operand into
//! a temporary in which each step of `n` is one contiguous strip of
//! `reduction x tile` values, and the product reads that: the rows of `b`
//! are 8 KiB apart at 1024 f64 columns, so a block's rows all fall into
//! the same two L1 sets, while a strip is read in order ([`packing`]).
//!
//! Applies to a kernel that is a perfect nest of `parallel` loops with
//! constant bounds around one `reduce` loop with constant bounds, around
//! a perfect nest of `unroll` loops (the register tile) around one plain
//! sum, when a load of the sum depends on the reduction and the innermost
//! parallel loop `n`, is reused across another parallel loop of trip at
//! least 2, and would occupy more than `panel-bytes` (what it touches over
//! the whole reduction and all of `n`). Smaller kernels are left alone.

use super::{DriverOptions, Ir, PassError, PassOptions, Unit};
use crate::ir::loops::*;

/// Bytes of the streamed operand one panel may hold: a quarter of a
/// 2 MiB L2, leaving room for the row blocks and the written cells.
pub const DEFAULT_PANEL_BYTES: i64 = 512 << 10;
/// The reduction's block: long enough that the register tile's loads and
/// stores of its cells (once per block) cost little against its terms.
pub const DEFAULT_KC: i64 = 256;

/// `panel-bytes`, `kc` and `pack` (pass options only: the driver sets
/// none of them).
#[derive(Clone, Debug)]
pub struct CacheTilesOptions {
    pub panel_bytes: i64,
    pub kc: i64,
    /// Copy the streamed operand into the panels' order first (module doc).
    pub pack: bool,
}

impl PassOptions for CacheTilesOptions {
    const KEYS: &'static [(&'static str, &'static str)] = &[
        ("panel-bytes", "N: the most bytes of the streamed operand one cache tile holds (default 2^19)"),
        ("kc", "N: the reduction's block in a cache tile (default 256)"),
        ("pack", "true|false: copy the streamed operand into the panels' order first (default true)"),
    ];
    fn from_driver(_: &DriverOptions) -> Self {
        CacheTilesOptions { panel_bytes: DEFAULT_PANEL_BYTES, kc: DEFAULT_KC, pack: true }
    }
    fn set(&mut self, key: &str, value: &str) -> Result<(), String> {
        let positive = |v: &str| v.parse::<i64>().ok().filter(|&n| n > 0).ok_or_else(|| "expected a positive integer".to_string());
        match key {
            "panel-bytes" => self.panel_bytes = positive(value)?,
            "kc" => self.kc = positive(value)?,
            "pack" => self.pack = value.parse().map_err(|_| "expected true or false".to_string())?,
            _ => return Err(format!("option `{key}` is not declared")),
        }
        Ok(())
    }
}

pub fn run(unit: &mut Unit, opts: &CacheTilesOptions) -> Result<Option<String>, PassError> {
    let Ir::Loop(m) = &mut unit.ir else { return Err(PassError::Internal("cache-tiles runs on the loop level".into())) };
    let mut done = Vec::new();
    let mut ki = 0;
    while ki < m.kernels.len() {
        if let Some(t) = block_kernel(m, &m.kernels[ki], opts) {
            let packed = if t.pack.is_some() { ", packed" } else { "" };
            done.push(format!("{} {}{packed}", m.kernels[ki].name, t.blocks.describe()));
            m.kernels[ki] = t.kernel;
            if let Some((buf, pack)) = t.pack {
                // The panel buffer takes the id `block_kernel` gave it.
                m.buffers.push(buf);
                m.kernels.insert(ki, pack);
                ki += 1;
            }
        }
        ki += 1;
    }
    let left = m.max_min_left_alone();
    Ok(Some(if done.is_empty() { format!("0 kernels tiled{left}") } else { format!("{} kernels tiled ({}){left}", done.len(), done.join(", ")) }))
}

/// The blocks a kernel got.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Blocks {
    /// Iterations of `n` per panel, and panels.
    pub nb: i64,
    pub panels: i64,
    /// Iterations of the reduction per block, and blocks.
    pub kc: i64,
    pub k_blocks: i64,
    /// Bytes of the streamed operand in one panel (at most).
    pub panel_bytes: i64,
}

impl Blocks {
    /// `n 16 x 4, k 256 x 4, panel 524288 B`: what `--stats` prints.
    pub fn describe(&self) -> String {
        format!("n {} x {}, k {} x {}, panel {} B", self.nb, self.panels, self.kc, self.k_blocks, self.panel_bytes)
    }
}

/// What [`block_kernel`] makes of a kernel.
pub struct Tiled {
    pub blocks: Blocks,
    pub kernel: Kernel,
    /// The panel buffer (to be the module's next buffer) and the kernel
    /// that fills it, to run right before `kernel`, when packed.
    pub pack: Option<(Buffer, Kernel)>,
}

/// A loop with constant bounds: its variable, lower bound and trip.
#[derive(Clone, Copy)]
struct Dim {
    var: VarId,
    lo: i64,
    trip: i64,
}

fn dim(f: &For) -> Option<Dim> {
    let (lo, hi) = (f.lo.as_const()?, f.hi.as_const()?);
    Some(Dim { var: f.var, lo, trip: hi.checked_sub(lo)?.max(0) })
}

/// The blocked kernel `k` of `m`, its blocks and its packing, when it
/// qualifies (module doc).
pub fn block_kernel(m: &LoopModule, k: &Kernel, opts: &CacheTilesOptions) -> Option<Tiled> {
    let (pars, rest) = perfect_nest(&k.body, LoopKind::Parallel);
    let [Node::For(r)] = rest else { return None };
    if r.kind != LoopKind::Reduce || pars.len() < 2 {
        return None;
    }
    let chain: Vec<Dim> = pars.iter().map(|f| dim(f)).collect::<Option<_>>()?;
    let red = dim(r)?;
    let (unrolls, inner) = perfect_nest(&r.body, LoopKind::Unroll);
    let [Node::Compute(c)] = inner else { return None };
    if unrolls.is_empty() || !c.is_plain_sum() {
        return None;
    }
    let tile: Vec<Dim> = unrolls.iter().map(|f| dim(f)).collect::<Option<_>>()?;
    let n = *chain.last()?;
    // The streamed operand: the largest load that moves with the
    // reduction and `n` and is reused across another chain loop.
    let reused = |o: &IExpr| chain[..chain.len() - 1].iter().any(|d| d.trip >= 2 && !o.depends_on(d.var));
    let (per_step, streamed) = c
        .values
        .iter()
        .enumerate()
        .filter_map(|(vi, v)| match &v.op {
            VOp::Load { offset, .. } if offset.depends_on(red.var) && offset.depends_on(n.var) && reused(offset) => {
                // Bytes it touches per iteration of `n` and of the reduction.
                let bytes = tile.iter().filter(|t| offset.depends_on(t.var)).try_fold(v.dtype.size() as i64, |a, t| a.checked_mul(t.trip))?;
                Some((bytes, vi))
            }
            _ => None,
        })
        .max()?;
    let whole = per_step.checked_mul(red.trip)?.checked_mul(n.trip)?;
    if whole <= opts.panel_bytes || n.trip < 2 {
        return None;
    }
    let kc = opts.kc.min(red.trip).max(1);
    // At least two panels, an even number where some size gives one (the
    // threads' shares, module doc), each within the budget.
    let fits = (opts.panel_bytes / (kc * per_step)).clamp(1, n.trip - 1);
    let nb = (1..=fits).rev().find(|&b| ceil_div(n.trip, b) % 2 == 0).unwrap_or(fits);
    let panels = ceil_div(n.trip, nb);
    let k_blocks = ceil_div(red.trip, kc);
    let blocks = Blocks { nb, panels, kc, k_blocks, panel_bytes: kc * nb * per_step };

    let mut t = k.clone();
    let n_c = add_var(&mut t.vars, &format!("{}_c", k.vars[n.var].name));
    // One block of the reduction (kc = its trip) needs no `j_c` loop.
    let j_c = (k_blocks > 1).then(|| add_var(&mut t.vars, &format!("{}_c", k.vars[red.var].name)));
    // v := lo + block*size + v, v now within its block.
    let at = |d: Dim, block: VarId, size: i64| {
        let e = IExpr::add(IExpr::mul(IExpr::v(block), IExpr::c(size)), IExpr::v(d.var));
        if d.lo == 0 {
            e
        } else {
            IExpr::add(IExpr::c(d.lo), e)
        }
    };
    let n_at = at(n, n_c, nb);
    let j_at = j_c.map(|j_c| at(red, j_c, kc));
    let mut body = r.body.clone();
    let pack = if opts.pack { packing(m, k, c, n, red, &chain, &tile, streamed) } else { None };
    if let Some((_, _, index)) = &pack {
        // The main kernel reads the panel buffer (the module's next) at the
        // panel index, in the original variables: substituted below.
        retarget_load(&mut body, streamed, m.buffers.len(), index);
    }
    for_each_expr_mut(&mut body, &mut |e| {
        *e = e.substitute(n.var, &n_at);
        if let Some(j_at) = &j_at {
            *e = e.substitute(red.var, j_at);
        }
    });
    // A block's bound: its size, or what is left of the trip in the last.
    let in_block = |d: Dim, block: VarId, size: i64| {
        if d.trip % size == 0 {
            IExpr::c(size)
        } else {
            IExpr::bin(IBin::Min, IExpr::c(size), IExpr::sub(IExpr::c(d.trip), IExpr::mul(IExpr::v(block), IExpr::c(size))))
        }
    };
    let for_ = |var, lo, hi, kind, body| vec![Node::For(For { var, lo, hi, kind, body })];
    body = match j_c {
        Some(j_c) => for_(red.var, IExpr::c(0), in_block(red, j_c, kc), LoopKind::Reduce, body),
        None => for_(red.var, r.lo.clone(), r.hi.clone(), LoopKind::Reduce, body),
    };
    body = for_(n.var, IExpr::c(0), in_block(n, n_c, nb), LoopKind::Parallel, body);
    for f in pars[..pars.len() - 1].iter().rev() {
        body = for_(f.var, f.lo.clone(), f.hi.clone(), LoopKind::Parallel, body);
    }
    if let Some(j_c) = j_c {
        body = for_(j_c, IExpr::c(0), IExpr::c(k_blocks), LoopKind::Reduce, body);
    }
    t.body = for_(n_c, IExpr::c(0), IExpr::c(panels), LoopKind::Parallel, body);
    Some(Tiled { blocks, kernel: t, pack: pack.map(|(buf, kernel, _)| (buf, kernel)) })
}

/// The panel layout of the streamed load (value `vi` of the sum) when
/// its offset uses only the reduction, `n` and the register tile's
/// variables: a temporary `[n, reduction, tile]` in which each step of
/// `n` is one contiguous strip of `reduction x tile` values. Gives the
/// buffer, the kernel copying the operand into it, and the panel index in
/// terms of the original variables (`n`, the reduction and the tile's),
/// for the main kernel.
#[allow(clippy::too_many_arguments)]
fn packing(m: &LoopModule, k: &Kernel, c: &Compute, n: Dim, red: Dim, chain: &[Dim], tile: &[Dim], vi: usize) -> Option<(Buffer, Kernel, IExpr)> {
    let v = c.values.get(vi)?;
    let VOp::Load { buf, offset } = &v.op else { return None };
    let used: Vec<Dim> = tile.iter().copied().filter(|t| offset.uses(t.var)).collect();
    let others = chain[..chain.len() - 1].iter().map(|d| d.var).chain(tile.iter().filter(|t| !offset.uses(t.var)).map(|t| t.var));
    if others.clone().any(|o| offset.uses(o)) || used.iter().any(|t| !offset.depends_on(t.var)) {
        return None;
    }
    let strip: i64 = used.iter().try_fold(1i64, |a, t| a.checked_mul(t.trip))?;
    let len = n.trip.checked_mul(red.trip)?.checked_mul(strip)?;
    if len <= 0 {
        return None;
    }
    let zero_based = |d: Dim| if d.lo == 0 { IExpr::v(d.var) } else { IExpr::sub(IExpr::v(d.var), IExpr::c(d.lo)) };
    // ((n * R + j) * T + t), t row-major over the tile variables used.
    let mut index = IExpr::add(IExpr::mul(zero_based(n), IExpr::c(red.trip)), zero_based(red));
    for t in &used {
        index = IExpr::add(IExpr::mul(index, IExpr::c(t.trip)), zero_based(*t));
    }
    let panel = Buffer {
        name: m.unique_buffer_name(format!("{}_panel", m.buffers.get(*buf)?.name)),
        dtype: v.dtype,
        shape: static_shape(&[n.trip, red.trip, strip]),
        role: Role::Transient,
        init: Init::Zero,
    };
    // The copy: one parallel loop per variable of the index, the same
    // variables (so the same names) with the same bounds.
    let copy = Compute {
        values: vec![Value { op: VOp::Load { buf: *buf, offset: offset.clone() }, dtype: v.dtype }],
        write: Write { kind: WriteKind::Store, buf: m.buffers.len(), offset: index.clone(), value: 0 },
    };
    let mut body = vec![Node::Compute(copy)];
    for d in [n, red].iter().chain(&used).rev() {
        body = vec![Node::For(For { var: d.var, lo: IExpr::c(d.lo), hi: IExpr::c(d.lo + d.trip), kind: LoopKind::Parallel, body })];
    }
    // Kernel names are symbols: one no other kernel has.
    let mut name = format!("{}_pack", k.name);
    while m.kernels.iter().any(|o| o.name == name) {
        name.push('_');
    }
    // Packed under the facts of the kernel it packs for.
    let pack = Kernel { name, role: KernelRole::Pack, stmt: k.stmt, vars: k.vars.clone(), body, multiples: k.multiples.clone() };
    Some((panel, pack, index))
}

/// Value `vi` of every compute in `nodes` (the sum, the only one) loads
/// `buf` at `offset` instead.
fn retarget_load(nodes: &mut [Node], vi: usize, buf: BufId, offset: &IExpr) {
    for n in nodes {
        match n {
            Node::Compute(c) => {
                if let Some(Value { op: VOp::Load { buf: b, offset: o }, .. }) = c.values.get_mut(vi) {
                    (*b, *o) = (buf, offset.clone());
                }
            }
            Node::For(l) => retarget_load(&mut l.body, vi, buf, offset),
            Node::Guard(g) => retarget_load(&mut g.body, vi, buf, offset),
            Node::LoadIndex { .. } | Node::Sync | Node::Copies(_) => {}
        }
    }
}

fn ceil_div(a: i64, b: i64) -> i64 {
    (a + b - 1) / b
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ir::loops::target::HostTarget;
    use crate::passes::register_tiles::{tile_kernel, Tiling};
    use crate::passes::test_kernels::{matmul, run_matmul};

    /// The host's register-tiled matmul, then cache-tiled with `opts`.
    fn blocked(m: i64, n: i64, k: i64, opts: &CacheTilesOptions) -> (LoopModule, Option<Blocks>) {
        let mut lm = matmul(m, n, k);
        let (_, tiled) = tile_kernel(&lm.kernels[0], Tiling::Host(&HostTarget::AVX2)).expect("register-tiled");
        lm.kernels[0] = tiled;
        let got = block_kernel(&lm, &lm.kernels[0], opts);
        let b = got.as_ref().map(|g| g.blocks);
        if let Some(t) = got {
            lm.kernels[0] = t.kernel;
            if let Some((buf, pack)) = t.pack {
                lm.buffers.push(buf);
                lm.kernels.insert(0, pack);
            }
        }
        verify::verify(&lm).unwrap();
        (lm, b)
    }

    #[test]
    fn blocks_compute_the_same_cells_in_the_same_order() {
        // Small panels so that small matmuls are blocked, with blocks
        // that do and do not divide the trips.
        for (m, n, k, kc) in [(8, 64, 12, 4), (8, 80, 10, 4), (12, 48, 7, 3), (8, 160, 9, 9)] {
            for pack in [false, true] {
                let opts = CacheTilesOptions { panel_bytes: 4 * 16 * 4 * 2, kc, pack };
                let (lm, b) = blocked(m, n, k, &opts);
                let b = b.unwrap_or_else(|| panic!("{m}x{n}x{k} not blocked"));
                assert!(b.panels >= 2 && (b.panel_bytes <= opts.panel_bytes || b.nb == 1), "{b:?}");
                // Packed: the copy kernel first, then the product.
                assert_eq!(lm.kernels.len(), 1 + pack as usize, "{m}x{n}x{k}");
                assert_eq!(lm.kernels[0].role == KernelRole::Pack, pack);
                assert_eq!(run_matmul(&lm, m, n, k), run_matmul(&matmul(m, n, k), m, n, k), "{m}x{n}x{k} {b:?} pack={pack}");
            }
        }
    }

    #[test]
    fn default_blocks_of_the_1024_matmul() {
        let (_, b) = blocked(1024, 1024, 1024, &CacheTilesOptions::from_driver(&DriverOptions::default()));
        // i32: 16 columns of 4 bytes per step of `n` and `k`, so a panel
        // of 512 KiB is 256 steps of k by 32 of n: two panels of 32.
        assert_eq!(b, Some(Blocks { nb: 32, panels: 2, kc: 256, k_blocks: 4, panel_bytes: 256 * 32 * 64 }));
    }

    #[test]
    fn small_or_unreused_operands_are_left_alone() {
        let opts = CacheTilesOptions::from_driver(&DriverOptions::default());
        // 256 x 256 x 4 bytes of b: fits a panel.
        assert_eq!(blocked(256, 256, 256, &opts).1, None);
        // One row block (4 rows): b is read once anyway.
        assert_eq!(blocked(4, 4096, 4096, &opts).1, None);
        // Not register-tiled: no unroll nest.
        let untiled = matmul(512, 512, 512);
        assert!(block_kernel(&untiled, &untiled.kernels[0], &opts).is_none());
    }
}
