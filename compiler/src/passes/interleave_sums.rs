//! `interleave-sums` (host): a kernel whose every cell is one long chain
//! of dependent adds sums several neighbouring cells at once, each in its
//! own order.
//!
//! `reduce_sum` over a contiguous axis adds each row's terms one after the
//! other: every add waits for the previous one (4 cycles on current x86),
//! and LLVM may not vectorise the chain without reassociating it, which
//! would change the result. Here the innermost chain loop `n` the written
//! cell depends on is tiled by `F` (8, 4 or 2, the largest dividing its
//! trip), and the computation runs in an `unroll` loop over the tile:
//!
//! ```text
//! for n in [0, N) parallel { for k reduce { s[n] += x[n, k] } }
//! for n in [0, N/F) parallel { for k reduce { for n_i in [0, F) unroll { s[n*F + n_i] += x[n*F + n_i, k] } } }
//! ```
//!
//! The `F` sums are independent chains the CPU overlaps; each still adds
//! its terms in the original order, so results are bit for bit unchanged.
//! Applies to a kernel whose chain's rest is one perfect nest of `reduce`
//! loops around a single plain `accumulate` that reads nothing it writes,
//! whose cell depends on `n` and on no reduction, where neither a chain
//! guard or index load nor a reduction's bounds use `n`. Kernels that
//! `interchange` or `register-tiles` already reshaped do not have that
//! form. Host only: on the GPU, `n` is the thread index.

use super::{Ir, NoOptions, PassError, Unit};
use crate::ir::loops::chain::Chain;
use crate::ir::loops::*;

/// Tiles tried, largest first.
pub const FACTORS: [i64; 3] = [8, 4, 2];

pub fn run(unit: &mut Unit, _: &NoOptions) -> Result<Option<String>, PassError> {
    let Ir::Loop(m) = &mut unit.ir else { return Err(PassError::Internal("interleave-sums runs on the loop level".into())) };
    let mut done = Vec::new();
    for k in &mut m.kernels {
        if let Some((f, t)) = interleave_kernel(k) {
            done.push(format!("{} x{f}", k.name));
            *k = t;
        }
    }
    let left = m.max_min_left_alone();
    Ok(Some(if done.is_empty() { format!("0 kernels interleaved{left}") } else { format!("{} kernels interleaved ({}){left}", done.len(), done.join(", ")) }))
}

/// The interleaved kernel and its factor, when `k` qualifies.
pub fn interleave_kernel(k: &Kernel) -> Option<(i64, Kernel)> {
    let mut chain = Chain::of(&k.body);
    if chain.thread_nest(&k.body).is_some() {
        return None;
    }
    let [main] = chain.rest(&k.body) else { return None };
    let (reduces, inner) = perfect_nest(std::slice::from_ref(main), LoopKind::Reduce);
    let [Node::Compute(c)] = inner else { return None };
    if reduces.is_empty() || !c.is_plain_sum() {
        return None;
    }
    let w = &c.write.offset;
    let &(n, lo, trip) = chain.loops.last()?;
    let bounds_use_n = reduces.iter().any(|r| r.lo.uses(n) || r.hi.uses(n));
    if reduces.iter().any(|r| w.depends_on(r.var)) || !w.depends_on(n) || chain.exprs.iter().any(|e| e.uses(n)) || bounds_use_n {
        return None;
    }
    let f = FACTORS.into_iter().find(|&f| trip >= f && trip % f == 0)?;
    let mut t = k.clone();
    let ni = add_var(&mut t.vars, &format!("{}_i", k.vars[n].name));
    // n := lo + (n - lo)*F + n_i: the F cells of a tile are neighbours.
    let at = tile_index(n, lo, f, ni);
    chain.set_trip(&mut t.body, n, trip / f);
    let rest = chain.rest_mut(&mut t.body);
    for_each_expr_mut(rest, &mut |e| *e = e.substitute(n, &at));
    // The unroll loop goes around the computation (the only one), inside
    // the reductions.
    wrap_computes(rest, &mut |c| Node::For(For { var: ni, lo: IExpr::c(0), hi: IExpr::c(f), kind: LoopKind::Unroll, body: vec![c] }));
    Some((f, t))
}
