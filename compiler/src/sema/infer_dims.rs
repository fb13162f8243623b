//! Range inference (docs/language.md s.6, after Tensor Comprehensions): the
//! dims of an eintup that nothing else determines, read off the arrays it
//! indexes on right-hand sides.
//!
//! An access bounds `t` when the array's shape does not depend on `t` and
//! the index expression at one of its positions has one of the forms
//! `t + e`, `t - e` or `c*t + e` (`c` static, `t` in exactly one term, with
//! a plus sign); `e` is any sum of other terms. At a position of extent `D`
//! it allows `t` up to `(D - max(e, 0)) //^ c` per component, where
//! `max(e)` is the largest value `e` takes while its eintups range over
//! their dims (the et dialect's shape function, `ir/et/dims.rs`, computes
//! it): `t` alone gives `D`, `t + e` gives `D - max(e)`, `t - e` gives `D`
//! (a subtraction never widens the range). Other forms (`t*u`, `t // c`,
//! `%`, `FLAT`, slices, `e - t`) give no information.
//!
//! Order ([`plan`]): in rounds, every eintup that has an access whose
//! other eintups are all known is inferred from those accesses (the
//! smallest bound wins, per component); eintups that appear alone come
//! first, then those whose other terms are known, as in Tensor
//! Comprehensions. What is left when no round makes progress is a cycle.

use crate::arith::wide::ceil_div;
use crate::ir::et::dims::{bound, broadcast, eval_static};
use crate::ir::et::*;
use et_grammar::Span;

/// A right-hand-side access that bounds one eintup.
#[derive(Clone, Debug, PartialEq)]
pub struct Access {
    pub array: ArrayId,
    /// The index position of `array` (0-based).
    pub position: usize,
    /// The index expression as written.
    pub expr: IndexExpr,
    pub span: Span,
    /// `c` of `c*t + e`; `None` for 1.
    coef: Option<IndexExpr>,
    /// `e`, the other terms with their signs; `None` when `t` is alone.
    rest: Option<IndexExpr>,
    /// The eintups whose dims the bound needs: the signature position's,
    /// `e`'s and `c`'s.
    pub deps: Vec<EintupId>,
}

impl Access {
    /// `c` of `c*t + e` (`None` for 1).
    pub fn coef(&self) -> Option<&IndexExpr> {
        self.coef.as_ref()
    }

    /// `e`, the other terms (`None` when `t` is alone).
    pub fn rest(&self) -> Option<&IndexExpr> {
        self.rest.as_ref()
    }

    /// ``the read of `x` at position 2 (`(o + k)`)``, for messages.
    pub fn describe(&self, m: &Module) -> String {
        let array = m.arrays.get(self.array).map_or("?", |a| a.name.as_str());
        format!("the read of `{array}` at position {} (`{}`)", self.position + 1, crate::ir::et::print::index_expr(m, &self.expr))
    }
}

/// What an inference found for one component of an eintup.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Component {
    pub dim: i64,
    /// Index (in the accesses given to [`infer`]) of the access that gave
    /// the smallest bound.
    pub access: usize,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub enum InferError {
    /// The access at this index leaves no room: `D - max(e)` is negative
    /// in some component (`extent` and `reach` are that component's `D`
    /// and `max(e)`).
    Negative { access: usize, extent: i64, reach: i64 },
    /// A bound could not be evaluated (zero divisor, overflow) at this
    /// access.
    Eval { access: usize },
}

/// Does `e` mention `t`, as a variable or inside `DIMS(..)`?
fn mentions(e: &IndexExpr, t: EintupId) -> bool {
    match &e.kind {
        IndexKind::Var(x) => *x == t,
        IndexKind::Dims(l) => l.eintups().any(|x| x == t),
        IndexKind::Lit(_) | IndexKind::Rank(_) => false,
        IndexKind::Flat(v) => v.iter().any(|x| mentions(x, t)),
        IndexKind::Slice { indices, .. } => indices.iter().any(|s| matches!(s, IndexSlot::Expr(x) if mentions(x, t))),
        IndexKind::Bin(_, a, b) => mentions(a, t) || mentions(b, t),
    }
}

/// Eintups `e` mentions (variables and `DIMS(..)` lists), appended.
fn mentioned(e: &IndexExpr, out: &mut Vec<EintupId>) {
    match &e.kind {
        IndexKind::Var(x) => out.push(*x),
        IndexKind::Dims(l) => out.extend(l.eintups()),
        IndexKind::Lit(_) | IndexKind::Rank(_) => {}
        IndexKind::Flat(v) => v.iter().for_each(|x| mentioned(x, out)),
        IndexKind::Slice { indices, .. } => {
            for s in indices {
                if let IndexSlot::Expr(x) = s {
                    mentioned(x, out);
                }
            }
        }
        IndexKind::Bin(_, a, b) => {
            mentioned(a, out);
            mentioned(b, out);
        }
    }
}

fn has_slice(e: &IndexExpr) -> bool {
    match &e.kind {
        IndexKind::Slice { .. } => true,
        IndexKind::Flat(v) => v.iter().any(has_slice),
        IndexKind::Bin(_, a, b) => has_slice(a) || has_slice(b),
        _ => false,
    }
}

fn is_static(e: &IndexExpr) -> bool {
    match &e.kind {
        IndexKind::Lit(_) | IndexKind::Dims(_) | IndexKind::Rank(_) => true,
        IndexKind::Bin(_, a, b) => is_static(a) && is_static(b),
        _ => false,
    }
}

/// The terms of a sum with their signs (`true`: subtracted).
fn terms<'e>(e: &'e IndexExpr, neg: bool, out: &mut Vec<(bool, &'e IndexExpr)>) {
    match &e.kind {
        IndexKind::Bin(IndexOp::Add, a, b) => {
            terms(a, neg, out);
            terms(b, neg, out);
        }
        IndexKind::Bin(IndexOp::Sub, a, b) => {
            terms(a, neg, out);
            terms(b, !neg, out);
        }
        _ => out.push((neg, e)),
    }
}

fn bin(op: IndexOp, a: IndexExpr, b: IndexExpr, span: Span) -> IndexExpr {
    IndexExpr { kind: IndexKind::Bin(op, Box::new(a), Box::new(b)), span }
}

/// Reads `e` as `c*t + rest`: `Some((c, rest))` for a readable form.
fn read(e: &IndexExpr, t: EintupId) -> Option<(Option<IndexExpr>, Option<IndexExpr>)> {
    let mut ts = Vec::new();
    terms(e, false, &mut ts);
    let mut with_t = ts.iter().enumerate().filter(|(_, (_, x))| mentions(x, t));
    let (k, &(neg, term)) = with_t.next()?;
    if with_t.next().is_some() || neg {
        return None;
    }
    let is_t = |x: &IndexExpr| matches!(x.kind, IndexKind::Var(v) if v == t);
    let coef = match &term.kind {
        IndexKind::Var(_) if is_t(term) => None,
        IndexKind::Bin(IndexOp::Mul, a, b) if is_t(a) && is_static(b) && !mentions(b, t) => Some((**b).clone()),
        IndexKind::Bin(IndexOp::Mul, a, b) if is_t(b) && is_static(a) && !mentions(a, t) => Some((**a).clone()),
        _ => return None,
    };
    let mut rest: Option<IndexExpr> = None;
    for (j, &(neg, x)) in ts.iter().enumerate() {
        if j == k {
            continue;
        }
        if has_slice(x) {
            return None;
        }
        rest = Some(match rest {
            None if neg => bin(IndexOp::Sub, IndexExpr { kind: IndexKind::Lit(0), span: x.span }, x.clone(), x.span),
            None => x.clone(),
            Some(acc) => bin(if neg { IndexOp::Sub } else { IndexOp::Add }, acc, x.clone(), x.span),
        });
    }
    Some((coef, rest))
}

/// Every right-hand-side access of `m` that bounds `t`, in source order:
/// reads, and arrays read inside their indices (slices). An access to an
/// array whose signature mentions `t` is skipped: its shape depends on `t`.
pub fn accesses(m: &Module, t: EintupId) -> Vec<Access> {
    let mut out = Vec::new();
    for st in &m.stmts {
        for op in &st.ops {
            if let OpKind::Read { array, indices } = &op.kind {
                visit(m, t, *array, indices, &mut out);
            }
        }
    }
    out
}

fn visit(m: &Module, t: EintupId, array: ArrayId, slots: &[IndexSlot], out: &mut Vec<Access>) {
    let Some(arr) = m.arrays.get(array) else { return };
    let depends = arr.positions.iter().any(|p| mentions(&p.expr, t));
    for (k, s) in slots.iter().enumerate() {
        let IndexSlot::Expr(e) = s else { continue };
        nested(m, t, e, out);
        let Some(pos) = arr.positions.get(k) else { continue };
        if depends || !mentions(e, t) {
            continue;
        }
        let Some((coef, rest)) = read(e, t) else { continue };
        let mut deps = Vec::new();
        mentioned(&pos.expr, &mut deps);
        for x in coef.iter().chain(rest.iter()) {
            mentioned(x, &mut deps);
        }
        deps.retain(|d| *d != t);
        deps.sort_unstable();
        deps.dedup();
        out.push(Access { array, position: k, expr: e.clone(), span: e.span, coef, rest, deps });
    }
}

/// Slices inside an index expression are accesses too.
fn nested(m: &Module, t: EintupId, e: &IndexExpr, out: &mut Vec<Access>) {
    match &e.kind {
        IndexKind::Slice { array, indices } => visit(m, t, *array, indices, out),
        IndexKind::Flat(v) => v.iter().for_each(|x| nested(m, t, x, out)),
        IndexKind::Bin(_, a, b) => {
            nested(m, t, a, out);
            nested(m, t, b, out);
        }
        _ => {}
    }
}

/// The dims `accs` allow an eintup of rank `rank`, given the dims of
/// every eintup they depend on (`None`: not known) and every rank. Per
/// component the smallest bound and the access that gave it; `None` for
/// a component no access bounds (a static `c` that is not positive).
pub fn infer(m: &Module, accs: &[Access], rank: usize, dims: &[Option<Vec<i64>>], ranks: &[usize]) -> Result<Vec<Option<Component>>, InferError> {
    let full: Vec<Vec<i64>> = dims.iter().map(|d| d.clone().unwrap_or_default()).collect();
    let mut out: Vec<Option<Component>> = vec![None; rank];
    for (ai, a) in accs.iter().enumerate() {
        let err = InferError::Eval { access: ai };
        let Some(pos) = m.arrays.get(a.array).and_then(|arr| arr.positions.get(a.position)) else { continue };
        let extent = bound(&pos.expr, &full).map_err(|_| err.clone())?;
        if extent.len() != rank {
            // Ranks that do not meet give no bound (rank inference equates
            // them, so only a broken module gets here).
            continue;
        }
        // max(e, 0): DIMS(e) is one past the largest value, 0 when e never
        // takes a non-negative value or takes no value at all.
        let reach: Vec<i64> = match &a.rest {
            None => vec![0; rank],
            Some(r) => {
                let d = bound(r, &full).map_err(|_| err.clone())?;
                let d = if d.len() == 1 && rank != 1 { vec![d[0]; rank] } else { d };
                if d.len() != rank {
                    continue;
                }
                d.into_iter().map(|x| (x - 1).max(0)).collect()
            }
        };
        let coef: Vec<i64> = match &a.coef {
            None => vec![1; rank],
            Some(c) => match eval_static(c, dims, ranks).ok().and_then(|v| broadcast(&v, rank)) {
                Some(v) => v,
                None => return Err(err),
            },
        };
        for k in 0..rank {
            if coef[k] <= 0 {
                continue;
            }
            let room = extent[k].checked_sub(reach[k]).ok_or(err.clone())?;
            if room < 0 {
                return Err(InferError::Negative { access: ai, extent: extent[k], reach: reach[k] });
            }
            let dim = i64::try_from(ceil_div(room as i128, coef[k] as i128)).map_err(|_| err.clone())?;
            if out[k].is_none_or(|c| dim < c.dim) {
                out[k] = Some(Component { dim, access: ai });
            }
        }
    }
    Ok(out)
}

/// The order in which dims are determined, and the accesses each
/// inferred eintup is inferred from.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Plan {
    /// Every eintup, dependencies first.
    pub order: Vec<EintupId>,
    /// Per eintup: the accesses it is inferred from (empty unless
    /// inferred).
    pub used: Vec<Vec<Access>>,
    /// Eintups left in a cycle (empty when there is none).
    pub cycle: Vec<EintupId>,
}

/// Orders the eintups. `readable[t]`: the accesses of an eintup to infer
/// (`None` for any other); `derive[t]`: the eintups a `DIMS(t) = expr`
/// constraint reads (`None` unless `t` is derived). Every other eintup
/// (bound, from an input, drawn) is known from the start.
///
/// The order is the same index-ordered sweep as before range inference
/// existed (each sweep takes every eintup whose dependencies are done), so
/// programs without inferred eintups draw their dims in the same order.
pub fn plan(readable: &[Option<Vec<Access>>], derive: &[Option<Vec<EintupId>>]) -> Plan {
    let n = readable.len();
    let mut known: Vec<bool> = (0..n).map(|e| readable[e].is_none() && derive.get(e).is_none_or(|d| d.is_none())).collect();
    let mut used: Vec<Vec<Access>> = vec![Vec::new(); n];
    loop {
        let mut progress = false;
        // Derived eintups whose references are known, to a fixpoint.
        loop {
            let mut p = false;
            for e in 0..n {
                if let Some(Some(refs)) = derive.get(e) {
                    if !known[e] && refs.iter().all(|r| known.get(*r).copied().unwrap_or(false)) {
                        known[e] = true;
                        p = true;
                    }
                }
            }
            if !p {
                break;
            }
            progress = true;
        }
        // One round of inference: each eintup with an access whose other
        // eintups are known, from all such accesses at once.
        let snapshot = known.clone();
        for e in 0..n {
            let Some(list) = &readable[e] else { continue };
            if snapshot[e] {
                continue;
            }
            let usable: Vec<Access> = list.iter().filter(|a| a.deps.iter().all(|d| snapshot.get(*d).copied().unwrap_or(false))).cloned().collect();
            if !usable.is_empty() {
                used[e] = usable;
                known[e] = true;
                progress = true;
            }
        }
        if !progress {
            break;
        }
    }
    let cycle: Vec<EintupId> = (0..n).filter(|e| !known[*e]).collect();
    // Dependencies as the sweep sees them.
    let deps = |e: EintupId| -> Vec<EintupId> {
        if let Some(Some(refs)) = derive.get(e) {
            return refs.clone();
        }
        used[e].iter().flat_map(|a| a.deps.iter().copied()).collect()
    };
    let mut order = Vec::new();
    let mut done = vec![false; n];
    for e in &cycle {
        done[*e] = true;
    }
    loop {
        let mut progress = false;
        for e in 0..n {
            if !done[e] && deps(e).iter().all(|d| done.get(*d).copied().unwrap_or(true)) {
                done[e] = true;
                order.push(e);
                progress = true;
            }
        }
        if !progress {
            break;
        }
    }
    Plan { order, used, cycle }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::driver::Source;
    use crate::pipeline::ranked;

    /// The module of a program and the id of eintup `name`.
    fn module(text: &str) -> Module {
        let (p, _) = ranked(&Source::from_string("t.et", text)).expect("program resolves");
        p.module
    }

    fn id(m: &Module, name: &str) -> EintupId {
        m.eintup_by_name(name).expect("eintup exists")
    }

    /// Infers `name` with every other eintup's dims given (rank 1 each
    /// unless given otherwise).
    fn infer_named(m: &Module, name: &str, given: &[(&str, Vec<i64>)], rank: usize) -> Result<Vec<Option<i64>>, InferError> {
        let t = id(m, name);
        let mut dims: Vec<Option<Vec<i64>>> = vec![None; m.eintups.len()];
        let mut ranks = vec![rank; m.eintups.len()];
        for (n, d) in given {
            dims[id(m, n)] = Some(d.clone());
            ranks[id(m, n)] = d.len();
        }
        let accs = accesses(m, t);
        Ok(infer(m, &accs, rank, &dims, &ranks)?.into_iter().map(|c| c.map(|c| c.dim)).collect())
    }

    const SHIFT: &str = "x[j] = RANDOM(0, 1, FLOAT)\ny[i] = x[i+2]\n";

    #[test]
    fn plus_subtracts_the_largest_other_value() {
        let m = module(SHIFT);
        assert_eq!(infer_named(&m, "i", &[("j", vec![10])], 1), Ok(vec![Some(8)]));
        // Exactly fits: 2 elements, nothing left.
        assert_eq!(infer_named(&m, "i", &[("j", vec![2])], 1), Ok(vec![Some(0)]));
        // Too small: negative.
        assert_eq!(infer_named(&m, "i", &[("j", vec![1])], 1), Err(InferError::Negative { access: 0, extent: 1, reach: 2 }));
    }

    #[test]
    fn alone_minus_and_the_smallest_of_several() {
        // TC's A(i) = B(i) + C(i-2): i alone gives |b|, i - 2 gives |c|.
        let m = module("b[p] = RANDOM(0, 1, FLOAT)\nc[q] = RANDOM(0, 1, FLOAT)\na[i] = b[i] + c[i-2]\n");
        assert_eq!(infer_named(&m, "i", &[("p", vec![7]), ("q", vec![5])], 1), Ok(vec![Some(5)]));
        assert_eq!(infer_named(&m, "i", &[("p", vec![4]), ("q", vec![5])], 1), Ok(vec![Some(4)]));
    }

    #[test]
    fn strided_form_divides_rounding_up() {
        // O(o) = I(s*o + k) * W(k): k = |w|, then o = (|in| - max k) //^ s.
        let m = module("in[p] = RANDOM(0, 1, FLOAT)\nw[f] = RANDOM(0, 1, FLOAT)\nout[o] = in[DIMS(s)*o + k] * w[k]\n");
        assert_eq!(infer_named(&m, "k", &[("f", vec![3])], 1), Ok(vec![Some(3)]));
        // (10 - 2) //^ 3 = 3: o in 0..3 reads up to 3*2 + 2 = 8 < 10.
        let given = [("p", vec![10]), ("s", vec![3]), ("k", vec![3])];
        assert_eq!(infer_named(&m, "o", &given, 1), Ok(vec![Some(3)]));
        // A zero stride bounds nothing.
        let given = [("p", vec![10]), ("s", vec![0]), ("k", vec![3])];
        assert_eq!(infer_named(&m, "o", &given, 1), Ok(vec![None]));
    }

    #[test]
    fn tuples_are_inferred_component_wise() {
        let m = module("x[b,ipos,c1] = RANDOM(0, 1, FLOAT)\nw[fpos,c1,c2] = RANDOM(0, 1, FLOAT)\ny[b,o,c2] = x[b,o+k,c1] * w[k,c1,c2]\n");
        let k = infer_named(&m, "k", &[("fpos", vec![3, 2]), ("c1", vec![1]), ("c2", vec![1])], 2);
        assert_eq!(k, Ok(vec![Some(3), Some(2)]));
        let given = [("ipos", vec![10, 6]), ("k", vec![3, 2]), ("b", vec![1]), ("c1", vec![1])];
        assert_eq!(infer_named(&m, "o", &given, 2), Ok(vec![Some(8), Some(5)]));
        // Zero-sized and rank-0 work: an empty filter leaves the whole input.
        let given = [("ipos", vec![4]), ("k", vec![0]), ("b", vec![1]), ("c1", vec![1])];
        assert_eq!(infer_named(&m, "o", &given, 1), Ok(vec![Some(4)]));
        assert_eq!(infer_named(&m, "k", &[("fpos", vec![]), ("c1", vec![1]), ("c2", vec![1])], 0), Ok(vec![]));
    }

    #[test]
    fn unreadable_forms_give_no_access() {
        for rhs in ["x[i*DIMS(j)//2]", "x[i // 2]", "x[i % 3]", "x[2 - i]", "x[FLAT(i)]", "x[i] * x[0]"] {
            let m = module(&format!("x[j] = RANDOM(0, 1, FLOAT)\ny[i] = {rhs}\n"));
            let n = accesses(&m, id(&m, "i")).len();
            assert_eq!(n, usize::from(rhs == "x[i] * x[0]"), "{rhs}");
        }
        // An array whose shape depends on the eintup tells nothing about it.
        let m = module("x[i] = RANDOM(0, 1, FLOAT)\ny[i] = x[i]\n");
        assert!(accesses(&m, id(&m, "i")).is_empty());
        // t*u of two eintups is refused by resolve already; t + u is read.
        let m = module("x[j] = RANDOM(0, 1, FLOAT)\ny[i,u] = x[i+u]\n");
        assert_eq!(accesses(&m, id(&m, "i"))[0].deps, vec![id(&m, "j"), id(&m, "u")]);
    }

    #[test]
    fn plan_orders_alone_first_then_known_terms() {
        let m = module("x[b,ipos,c1] = RANDOM(0, 1, FLOAT)\nw[fpos,c1,c2] = RANDOM(0, 1, FLOAT)\ny[b,o,c2] = x[b,o+k,c1] * w[k,c1,c2]\n");
        let n = m.eintups.len();
        let (o, k) = (id(&m, "o"), id(&m, "k"));
        let mut readable = vec![None; n];
        readable[o] = Some(accesses(&m, o));
        readable[k] = Some(accesses(&m, k));
        let p = plan(&readable, &vec![None; n]);
        assert!(p.cycle.is_empty());
        let at = |e| p.order.iter().position(|x| *x == e).unwrap();
        assert!(at(k) < at(o));
        // k from w alone; o + k in x then bounds o (and not k).
        assert_eq!(p.used[k].iter().map(|a| a.array).collect::<Vec<_>>(), vec![m.array_by_name("w").unwrap()]);
        assert_eq!(p.used[o].iter().map(|a| a.array).collect::<Vec<_>>(), vec![m.array_by_name("x").unwrap()]);
    }

    #[test]
    fn plan_finds_cycles() {
        let m = module("x[p] = RANDOM(0, 1, FLOAT)\ny[i,j] = x[i+j] * x[j+i]\n");
        let n = m.eintups.len();
        let (i, j) = (id(&m, "i"), id(&m, "j"));
        let mut readable = vec![None; n];
        readable[i] = Some(accesses(&m, i));
        readable[j] = Some(accesses(&m, j));
        let p = plan(&readable, &vec![None; n]);
        assert_eq!(p.cycle, vec![i, j]);
        assert!(!p.order.contains(&i) && !p.order.contains(&j));
    }
}
