//! `interchange` (host pipeline): in a kernel that is one nest of loops
//! down to its compute (guards and index loads allowed between them:
//! `Nest`, ir/loops/chain.rs), the `parallel` loop along which the written
//! cell is contiguous (coefficient 1 in the write offset) moves innermost,
//! inside the reductions. Every load must then be contiguous or invariant
//! along it, so LLVM vectorises the innermost loop without reassociating
//! anything:
//!
//! ```text
//! for row parallel { for col parallel { for k reduce { c[row*N+col] += a[row*K+k] * b[k*N+col] }}}
//! for row parallel { for k reduce { for col parallel { c[row*N+col] += a[row*K+k] * b[k*N+col] }}}
//! ```
//!
//! Why it is exact: the loop is `parallel`, so its iterations write
//! distinct cells and read no written buffer (`parallelize` proved it;
//! statements reading their own array read a snapshot). Moving it inward
//! only interleaves the work of distinct cells; each cell still sums its
//! terms in the original order, so results are bit-identical.
//!
//! Only for the host: on the GPU the same loop is the thread index, and
//! each thread keeps its sum in a register.

use super::PassError;
use super::{Ir, NoOptions, Unit};
use crate::ir::loops::chain::{Nest, NestStep};
use crate::ir::loops::*;

pub fn run(unit: &mut Unit, _: &NoOptions) -> Result<Option<String>, PassError> {
    let Ir::Loop(m) = &mut unit.ir else { return Err(PassError::Internal("interchange runs on the loop level".into())) };
    let mut moved = 0;
    for k in &mut m.kernels {
        if let Some(body) = interchange(&k.body) {
            k.body = body;
            moved += 1;
        }
    }
    Ok(Some(format!("{moved} kernels reordered")))
}

/// One level of a loop chain.
#[derive(Clone)]
enum Item {
    For { var: VarId, lo: IExpr, hi: IExpr, kind: LoopKind },
    Guard(Vec<Cond>),
    LoadIndex { var: VarId, buf: BufId, offset: IExpr },
}

impl Item {
    fn uses(&self, v: VarId) -> bool {
        match self {
            Item::For { lo, hi, .. } => lo.uses(v) || hi.uses(v),
            Item::Guard(conds) => conds.iter().any(|c| c.exprs().iter().any(|e| e.uses(v))),
            Item::LoadIndex { offset, .. } => offset.uses(v),
        }
    }
}

/// The nest of `body` ([`Nest`]) and its compute, when the nest ends in
/// one compute.
fn flatten(body: &[Node]) -> Option<(Vec<Item>, Compute)> {
    let nest = Nest::of(body);
    let [Node::Compute(c)] = nest.rest else { return None };
    let items = nest
        .steps
        .iter()
        .map(|s| match s {
            NestStep::Loop(l) => Item::For { var: l.var, lo: l.lo.clone(), hi: l.hi.clone(), kind: l.kind },
            NestStep::Guard(g) => Item::Guard(g.conds.clone()),
            NestStep::LoadIndex { var, buf, offset } => Item::LoadIndex { var: *var, buf: *buf, offset: (*offset).clone() },
        })
        .collect();
    Some((items, c.clone()))
}

fn rebuild(items: Vec<Item>, c: Compute) -> Vec<Node> {
    let mut cur = vec![Node::Compute(c)];
    for it in items.into_iter().rev() {
        cur = match it {
            Item::For { var, lo, hi, kind } => vec![Node::For(For { var, lo, hi, kind, body: cur })],
            Item::Guard(conds) => vec![Node::Guard(Guard { conds, body: cur })],
            Item::LoadIndex { var, buf, offset } => {
                cur.insert(0, Node::LoadIndex { var, buf, offset });
                cur
            }
        };
    }
    cur
}

/// Coefficient of `v` in `e` when `e` is linear in `v` (v appears only as
/// a term of its own); `None` when `v` sits inside a non-linear atom.
fn coefficient(e: &IExpr, v: VarId) -> Option<i64> {
    let lin = e.linear();
    let atom = IExpr::Var(v);
    if lin.terms.iter().any(|(a, _)| *a != atom && a.uses(v)) {
        return None;
    }
    Some(lin.coef(&atom))
}

/// The reordered body, or `None` when the kernel keeps its order.
pub fn interchange(body: &[Node]) -> Option<Vec<Node>> {
    let (items, c) = flatten(body)?;
    if c.write.kind.is_atomic() {
        return None;
    }
    let loads_ok = |v: VarId| {
        c.values.iter().all(|val| match &val.op {
            VOp::Load { offset, .. } => matches!(coefficient(offset, v), Some(0 | 1)),
            _ => true,
        })
    };
    // The innermost parallel loop that is contiguous in the write.
    let pos = items.iter().rposition(|it| match it {
        Item::For { var, kind: LoopKind::Parallel, .. } => coefficient(&c.write.offset, *var) == Some(1) && loads_ok(*var),
        _ => false,
    })?;
    let Item::For { var: v, .. } = items[pos] else { return None };
    let inner = &items[pos + 1..];
    // Something to move past; nothing inside may need `v` except guards
    // (which move along with it).
    if !inner.iter().any(|it| matches!(it, Item::For { .. })) {
        return None;
    }
    if inner.iter().any(|it| !matches!(it, Item::Guard(_)) && it.uses(v)) {
        return None;
    }
    let (with_v, without_v): (Vec<Item>, Vec<Item>) = inner.iter().cloned().partition(|it| it.uses(v));
    let mut order: Vec<Item> = items[..pos].to_vec();
    order.extend(without_v);
    order.push(items[pos].clone());
    order.extend(with_v);
    Some(rebuild(order, c))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn for_(var: VarId, hi: i64, kind: LoopKind, body: Vec<Node>) -> Node {
        Node::For(For { var, lo: IExpr::c(0), hi: IExpr::c(hi), kind, body })
    }

    /// c[r*8+col] (+)= a[r*4+k] * b[k*8+col] with loops r, col, k.
    fn matmul(kind: WriteKind, b_offset: IExpr) -> Vec<Node> {
        let (r, col, k) = (0, 1, 2);
        let values = vec![
            Value { op: VOp::Load { buf: 0, offset: IExpr::add(IExpr::mul(IExpr::v(r), IExpr::c(4)), IExpr::v(k)) }, dtype: DType::F32 },
            Value { op: VOp::Load { buf: 1, offset: b_offset }, dtype: DType::F32 },
            Value { op: VOp::Bin(BinOp::Mul, 0, 1), dtype: DType::F32 },
        ];
        let write = Write { kind, buf: 2, offset: IExpr::add(IExpr::mul(IExpr::v(r), IExpr::c(8)), IExpr::v(col)), value: 2 };
        let compute = Node::Compute(Compute { values, write });
        vec![for_(r, 2, LoopKind::Parallel, vec![for_(col, 8, LoopKind::Parallel, vec![for_(k, 4, LoopKind::Reduce, vec![compute])])])]
    }

    fn loop_vars(mut nodes: &[Node]) -> Vec<VarId> {
        let mut out = Vec::new();
        while let Some(Node::For(l)) = nodes.last() {
            out.push(l.var);
            nodes = &l.body;
        }
        out
    }

    #[test]
    fn contiguous_parallel_loop_moves_inside_the_reduction() {
        let b = IExpr::add(IExpr::mul(IExpr::v(2), IExpr::c(8)), IExpr::v(1));
        let after = interchange(&matmul(WriteKind::Accumulate, b)).expect("reordered");
        assert_eq!(loop_vars(&after), [0, 2, 1]);
    }

    #[test]
    fn strided_loads_atomics_and_innermost_loops_keep_the_order() {
        // b read along col with stride 8: not worth (or able) to vectorise.
        let strided = IExpr::add(IExpr::mul(IExpr::v(1), IExpr::c(8)), IExpr::v(2));
        assert!(interchange(&matmul(WriteKind::Accumulate, strided)).is_none());
        let b = IExpr::add(IExpr::mul(IExpr::v(2), IExpr::c(8)), IExpr::v(1));
        assert!(interchange(&matmul(WriteKind::AtomicAccumulate, b.clone())).is_none());
        // Already innermost after one move: a second run changes nothing.
        let once = interchange(&matmul(WriteKind::Accumulate, b)).unwrap();
        assert!(interchange(&once).is_none());
    }
}
