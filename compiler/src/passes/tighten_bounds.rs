//! `tighten-bounds`: a guard condition `lo <= a*v + r < hi` on the loop
//! variable `v` (constant `a != 0`; `r`, `lo`, `hi` free of `v` and of
//! anything bound inside the loop) becomes bounds of `v`:
//!
//! - `a > 0`: `v in [max(old_lo, ceil((lo - r) / a)), min(old_hi, floor((hi - 1 - r) / a) + 1))`
//! - `a < 0`: `v in [max(old_lo, ceil((hi - 1 - r) / a)), min(old_hi, floor((lo - r) / a) + 1))`
//!
//! and the condition is dropped. This is the range inference of Tensor
//! Comprehensions: after it, `w[ipos - s*opos]` iterates only the filter
//! footprint instead of every input position. It applies only when the
//! guard is the loop body's last node and everything before it is a
//! `load_index` (no side effects), so skipping iterations skips nothing
//! but work. Loops whose bounds become constant and empty are removed. An
//! `unroll` loop takes only conditions that leave its bounds constant.

use super::PassError;
use super::{Ir, NoOptions, Unit};
use crate::ir::loops::*;

pub fn run(unit: &mut Unit, _: &NoOptions) -> Result<Option<String>, PassError> {
    let Ir::Loop(m) = &mut unit.ir else { return Err(PassError::Internal("tighten-bounds runs on the loop level".into())) };
    let mut stats = Stats::default();
    for k in &mut m.kernels {
        tighten_kernel(k, &mut stats);
    }
    Ok(Some(format!("{} conditions became bounds, {} empty loops removed", stats.tightened, stats.removed)))
}

#[derive(Default, Debug)]
pub struct Stats {
    pub tightened: usize,
    pub removed: usize,
}

pub fn tighten_kernel(k: &mut Kernel, stats: &mut Stats) {
    let mut scope = Vec::new();
    nodes(&mut k.body, &mut scope, stats);
}

fn nodes(ns: &mut Vec<Node>, scope: &mut Vec<VarId>, stats: &mut Stats) {
    let depth = scope.len();
    let mut i = 0;
    while i < ns.len() {
        match &mut ns[i] {
            Node::For(l) => {
                tighten_loop(l, scope, stats);
                scope.push(l.var);
                nodes(&mut l.body, scope, stats);
                scope.pop();
                if let (Some(lo), Some(hi)) = (l.lo.as_const(), l.hi.as_const()) {
                    if hi <= lo {
                        ns.remove(i);
                        stats.removed += 1;
                        continue;
                    }
                }
            }
            Node::Guard(g) => nodes(&mut g.body, scope, stats),
            Node::LoadIndex { var, .. } => scope.push(*var),
            Node::Compute(_) | Node::Sync | Node::Copies(_) => {}
        }
        i += 1;
    }
    scope.truncate(depth);
}

/// Moves the conditions of the body's guard that bound `l.var` into the
/// loop's bounds.
fn tighten_loop(l: &mut For, scope: &[VarId], stats: &mut Stats) {
    let Some((last, before)) = l.body.split_last_mut() else { return };
    if !before.iter().all(|n| matches!(n, Node::LoadIndex { .. })) {
        return;
    }
    let Node::Guard(g) = last else { return };
    let v = l.var;
    let outer = |e: &IExpr| {
        let mut ok = true;
        e.for_each_var(&mut |x| ok &= scope.contains(&x));
        ok
    };
    let mut kept = Vec::new();
    for c in std::mem::take(&mut g.conds) {
        let Cond::InRange { e, lo, hi } = &c else {
            kept.push(c);
            continue;
        };
        let lin = e.linear();
        let a = lin.coef(&IExpr::Var(v));
        let mut rest = lin.clone();
        rest.terms.retain(|(atom, _)| *atom != IExpr::Var(v));
        let r = rest.to_expr();
        if a == 0 || !outer(&r) || !outer(lo) || !outer(hi) {
            kept.push(c);
            continue;
        }
        // lo <= a*v + r < hi  <=>  lo - r <= a*v <= hi - 1 - r
        let low = IExpr::sub(lo.clone(), r.clone());
        let high = IExpr::sub(IExpr::sub(hi.clone(), IExpr::Const(1)), r);
        let (new_lo, new_hi_incl) = if a > 0 {
            (IExpr::bin(IBin::CeilDiv, low, IExpr::Const(a)), IExpr::bin(IBin::FloorDiv, high, IExpr::Const(a)))
        } else {
            (IExpr::bin(IBin::CeilDiv, high, IExpr::Const(a)), IExpr::bin(IBin::FloorDiv, low, IExpr::Const(a)))
        };
        let (lo, hi) = (fold(IExpr::bin(IBin::Max, l.lo.clone(), new_lo)), fold(IExpr::bin(IBin::Min, l.hi.clone(), IExpr::add(new_hi_incl, IExpr::Const(1)))));
        // An `unroll` loop's bounds must stay constants (the dialect's
        // rule): a condition that would make them symbolic stays a guard.
        if l.kind == LoopKind::Unroll && (lo.as_const().is_none() || hi.as_const().is_none()) {
            kept.push(c);
            continue;
        }
        (l.lo, l.hi) = (lo, hi);
        stats.tightened += 1;
    }
    g.conds = kept;
    if g.conds.is_empty() {
        let body = std::mem::take(&mut g.body);
        l.body.pop();
        l.body.extend(body);
    }
}

/// Folds constant subexpressions so bounds stay readable without
/// `simplify-index` (which does far more).
pub fn fold(e: IExpr) -> IExpr {
    match e {
        IExpr::Bin(op, a, b) => {
            let (a, b) = (fold(*a), fold(*b));
            match (a.as_const(), b.as_const()) {
                (Some(x), Some(y)) => IExpr::Const(op.apply(x, y)),
                _ => IExpr::bin(op, a, b),
            }
        }
        e => e,
    }
}
