//! Scatters become gathers where the index map is invertible
//! (docs/gradients.md, "Scatters and gathers"): an adjoint statement
//! `grad_w[ipos - DIMS(stride)*opos, ..] += rhs` writes each cell from many
//! instantiations, which on the GPU takes atomics. When the left index at
//! a position is `t ± rest` for an eintup `t` that occurs there once (and
//! the array's signature at that position is an eintup `u` the statement
//! does not use), the statement is enumerated over `u` instead: `t` is
//! replaced by its solution (`ipos = fpos + DIMS(stride)*opos`) everywhere,
//! and the left index becomes `u`. The instantiations that ran stay
//! exactly those that run: `u`'s enumeration is the left side's old bounds
//! check, and `t`'s old enumeration becomes a bounds check — a read whose
//! signature at that position is `t` itself, or else a read of a
//! `domain_t[t]` array that exists for that check alone.

use super::expr::Expr;
use crate::ir::et::{print, ArrayId, EintupId, IndexExpr, IndexKind, IndexOp, IndexSlot, Module, Position};

/// One solved position: `t = solution`, enumerated over `u`.
#[derive(Clone, Debug)]
pub struct Solved {
    pub t: EintupId,
    pub u: EintupId,
    pub solution: IndexExpr,
    /// No read of the statement bounds `t`: the caller declares
    /// `domain_t[t]` and the statement reads it.
    pub needs_domain: bool,
}

/// A statement `lhs[slots] += rhs` of the adjoint: its target's signature,
/// and a way to find any read array's signature by name.
pub struct Scatter<'a> {
    pub m: &'a Module,
    pub target: ArrayId,
    pub slots: Vec<IndexSlot>,
    pub rhs: Expr,
}

/// Rewrites the statement into a gather, or says why it stays a scatter.
/// `signature` gives a read's array signature by name (adjoint arrays
/// have their forward array's).
pub fn to_gather<'a>(st: &mut Scatter<'a>, signature: impl Fn(&str) -> Option<&'a [Position]>) -> Result<Vec<Solved>, String> {
    let m = st.m;
    let sig = &m.arrays[st.target].positions;
    let mut used = Vec::new();
    st.rhs.for_each_index(&mut |e| e.for_each(&mut |x| collect_var(x, &mut used)));
    for s in &st.slots {
        s.for_each(&mut |x| collect_var(x, &mut used));
    }
    let mut solved: Vec<(usize, Solved)> = Vec::new();
    for (i, slot) in st.slots.iter().enumerate() {
        let IndexSlot::Expr(e) = slot else { return Err("a slice on the left".into()) };
        if matches!(e.kind, IndexKind::Var(_)) {
            continue;
        }
        let text = print::index_expr(m, e);
        let mut sliced = false;
        e.for_each(&mut |x| sliced |= matches!(x.kind, IndexKind::Slice { .. } | IndexKind::Flat(_)));
        if sliced {
            return Err(format!("`{text}` goes through an index array or FLAT"));
        }
        let Some(IndexKind::Var(u)) = sig.get(i).map(|p| &p.expr.kind) else {
            return Err(format!("the signature of `{}` at position {} is not an eintup", m.arrays[st.target].name, i + 1));
        };
        if used.contains(u) || solved.iter().any(|(_, s)| s.u == *u) {
            return Err(format!("`{}` already occurs in the statement", m.eintups[*u].name));
        }
        let others: Vec<EintupId> = st.slots.iter().enumerate().filter(|(j, _)| *j != i).flat_map(|(_, s)| slot_vars(s)).collect();
        let mut vars = Vec::new();
        e.for_each(&mut |x| collect_var(x, &mut vars));
        let target = IndexExpr { kind: IndexKind::Var(*u), span: e.span };
        let pick = vars
            .iter()
            .copied()
            .filter(|t| !others.contains(t) && !solved.iter().any(|(_, s)| s.t == *t))
            .find_map(|t| solve(e, target.clone(), t).map(|sol| (t, sol)));
        let Some((t, solution)) = pick else { return Err(format!("`{text}` is not an eintup plus or minus a rest")) };
        solved.push((i, Solved { t, u: *u, solution, needs_domain: false }));
    }
    if solved.is_empty() {
        return Ok(Vec::new());
    }
    // Bounds of each eliminated `t`: some read of `t` at a position whose
    // signature is `t` itself.
    for (_, s) in solved.iter_mut() {
        let mut bounded = false;
        st.rhs.for_each_read(&mut |name, slots| {
            if let Some(sig) = signature(name) {
                bounded |= slots.iter().zip(sig).any(|(slot, p)| is_var(slot, s.t) && matches!(p.expr.kind, IndexKind::Var(v) if v == s.t));
            }
        });
        s.needs_domain = !bounded;
    }
    for (i, s) in &solved {
        let IndexSlot::Expr(whole) = &st.slots[*i] else { unreachable!("slices were refused above") };
        let whole_text = print::index_expr(m, whole);
        st.rhs.for_each_index_mut(&mut |e| replace(m, e, &whole_text, s.u, s.t, &s.solution));
        st.slots[*i] = IndexSlot::Expr(IndexExpr { kind: IndexKind::Var(s.u), span: whole.span });
    }
    Ok(solved.into_iter().map(|(_, s)| s).collect())
}

fn is_var(slot: &IndexSlot, t: EintupId) -> bool {
    matches!(slot, IndexSlot::Expr(IndexExpr { kind: IndexKind::Var(v), .. }) if *v == t)
}

fn collect_var(e: &IndexExpr, out: &mut Vec<EintupId>) {
    if let IndexKind::Var(t) = e.kind {
        if !out.contains(&t) {
            out.push(t);
        }
    }
}

fn slot_vars(s: &IndexSlot) -> Vec<EintupId> {
    let mut v = Vec::new();
    s.for_each(&mut |x| collect_var(x, &mut v));
    v
}

fn occurrences(e: &IndexExpr, t: EintupId) -> usize {
    let mut n = 0;
    e.for_each(&mut |x| n += matches!(x.kind, IndexKind::Var(v) if v == t) as usize);
    n
}

fn bin(op: IndexOp, a: IndexExpr, b: IndexExpr) -> IndexExpr {
    let span = a.span;
    IndexExpr { kind: IndexKind::Bin(op, Box::new(a), Box::new(b)), span }
}

/// `t` from `e = v`, when `t` occurs once in `e` and only under `+` and `-`.
fn solve(e: &IndexExpr, v: IndexExpr, t: EintupId) -> Option<IndexExpr> {
    if occurrences(e, t) != 1 {
        return None;
    }
    match &e.kind {
        IndexKind::Var(x) if *x == t => Some(v),
        IndexKind::Bin(IndexOp::Add, a, b) if occurrences(a, t) == 1 => solve(a, bin(IndexOp::Sub, v, (**b).clone()), t),
        IndexKind::Bin(IndexOp::Add, a, b) => solve(b, bin(IndexOp::Sub, v, (**a).clone()), t),
        IndexKind::Bin(IndexOp::Sub, a, b) if occurrences(a, t) == 1 => solve(a, bin(IndexOp::Add, v, (**b).clone()), t),
        IndexKind::Bin(IndexOp::Sub, a, b) => solve(b, bin(IndexOp::Sub, (**a).clone(), v), t),
        _ => None,
    }
}

/// In `e`: the solved left index itself becomes `u`, and `t` its solution.
fn replace(m: &Module, e: &mut IndexExpr, whole: &str, u: EintupId, t: EintupId, solution: &IndexExpr) {
    if print::index_expr(m, e) == whole {
        e.kind = IndexKind::Var(u);
        return;
    }
    match &mut e.kind {
        IndexKind::Var(x) if *x == t => e.kind = solution.kind.clone(),
        IndexKind::Bin(_, a, b) => {
            replace(m, a, whole, u, t, solution);
            replace(m, b, whole, u, t, solution);
        }
        IndexKind::Flat(args) => args.iter_mut().for_each(|a| replace(m, a, whole, u, t, solution)),
        IndexKind::Slice { indices, .. } => indices.iter_mut().for_each(|s| {
            if let IndexSlot::Expr(x) = s {
                replace(m, x, whole, u, t, solution)
            }
        }),
        IndexKind::Var(_) | IndexKind::Lit(_) | IndexKind::Dims(_) | IndexKind::Rank(_) => {}
    }
}
