//! `drop-unused-loops`: a loop whose variable nothing inside it uses, that
//! runs at least once, and whose body is idempotent (it only `store`s,
//! and reads no buffer it stores to) does the same work on every
//! iteration: it is replaced by its body, run once.
//!
//! The reset kernels of `=` statements are the case that matters: they
//! keep every loop of their statement, reductions included (a cell is
//! reset only where an instantiation runs, docs/language.md section 3), so
//! `c[i,j] = a[i,k]*b[k,j]` resets each cell once per `k`. Once
//! `simplify-index` and `tighten-bounds` have removed the guards that
//! mention `k`, the `k` loop of the reset is unused and goes: the reset
//! costs one store per cell instead of `|k|`. A loop that may run zero
//! times stays (dropping it would reset cells that no instantiation
//! reaches), except that one whose bounds use dim symbols (a dynamic
//! module's `for k in [0, %k.0)`) becomes a guard that it runs, `guard 0
//! <= 0 < %k.0`: the body once exactly when the loop would run it at all.
//! Nested loops so dropped give one guard of all their conditions (a
//! dynamic convolution's reset: `guard <window runs>, 0 <= 0 < %ichan.0`).

use super::PassError;
use super::{Ir, NoOptions, Unit};
use crate::ir::loops::*;

pub fn run(unit: &mut Unit, _: &NoOptions) -> Result<Option<String>, PassError> {
    let Ir::Loop(m) = &mut unit.ir else { return Err(PassError::Internal("drop-unused-loops runs on the loop level".into())) };
    let mut dropped = 0;
    for k in &mut m.kernels {
        dropped += drop_in(&mut k.body);
    }
    Ok(Some(format!("{dropped} loops dropped")))
}

/// Drops every such loop in `nodes` (innermost first); returns how many.
pub fn drop_in(nodes: &mut Vec<Node>) -> usize {
    let mut dropped = 0;
    let mut i = 0;
    while i < nodes.len() {
        match &mut nodes[i] {
            Node::For(l) => dropped += drop_in(&mut l.body),
            Node::Guard(g) => dropped += drop_in(&mut g.body),
            _ => {}
        }
        if matches!(&nodes[i], Node::For(l) if droppable(l)) {
            if let Node::For(l) = nodes.remove(i) {
                let n = l.body.len();
                nodes.splice(i..i, l.body);
                dropped += 1;
                i += n;
                continue;
            }
        }
        if let Node::For(l) = &mut nodes[i] {
            if once_if_runs(l) {
                let mut body = std::mem::take(&mut l.body);
                let mut conds = vec![Cond::InRange { e: l.lo.clone(), lo: l.lo.clone(), hi: l.hi.clone() }];
                // A guard the body is (an inner loop's, dropped first) joins
                // this one: one guard of all the conditions (`fuse-resets`
                // moves a clear under one guard).
                if let [Node::Guard(inner)] = &mut body[..] {
                    conds.append(&mut inner.conds);
                    body = std::mem::take(&mut inner.body);
                }
                nodes[i] = Node::Guard(Guard { conds, body });
                dropped += 1;
            }
        }
        i += 1;
    }
    dropped
}

fn droppable(l: &For) -> bool {
    let runs = matches!((l.lo.as_const(), l.hi.as_const()), (Some(lo), Some(hi)) if lo < hi);
    runs && !nodes_use(&l.body, l.var) && idempotent(&l.body)
}

/// A loop [`droppable`] but for a symbolic trip that may be 0: it becomes
/// a guard `lo <= lo < hi` around its body.
fn once_if_runs(l: &For) -> bool {
    (l.lo.is_symbolic() || l.hi.is_symbolic()) && !nodes_use(&l.body, l.var) && idempotent(&l.body)
}

/// Only `store` writes, and no read of a buffer stored to: running the
/// body twice leaves what running it once does.
fn idempotent(nodes: &[Node]) -> bool {
    let mut stored = Vec::new();
    let mut read = Vec::new();
    let mut only_stores = true;
    fn go(nodes: &[Node], stored: &mut Vec<BufId>, read: &mut Vec<BufId>, only_stores: &mut bool) {
        for n in nodes {
            match n {
                Node::Compute(c) => {
                    *only_stores &= c.write.kind == WriteKind::Store;
                    stored.push(c.write.buf);
                    read.extend(c.values.iter().filter_map(|v| match v.op {
                        VOp::Load { buf, .. } => Some(buf),
                        _ => None,
                    }));
                }
                Node::LoadIndex { buf, .. } => read.push(*buf),
                _ => go(n.body(), stored, read, only_stores),
            }
        }
    }
    go(nodes, &mut stored, &mut read, &mut only_stores);
    only_stores && !stored.iter().any(|b| read.contains(b))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn store(buf: BufId, offset: IExpr) -> Node {
        Node::Compute(Compute {
            values: vec![Value { op: VOp::Const(0.0), dtype: DType::F64 }],
            write: Write { kind: WriteKind::Store, buf, offset, value: 0 },
        })
    }

    fn for_(var: VarId, lo: i64, hi: i64, body: Vec<Node>) -> Node {
        Node::For(For { var, lo: IExpr::c(lo), hi: IExpr::c(hi), kind: LoopKind::Reduce, body })
    }

    #[test]
    fn unused_reduce_loop_of_a_reset_goes() {
        let mut body = vec![for_(0, 0, 4, vec![for_(1, 0, 8, vec![store(0, IExpr::v(0))])])];
        assert_eq!(drop_in(&mut body), 1);
        assert_eq!(body, vec![for_(0, 0, 4, vec![store(0, IExpr::v(0))])]);
    }

    #[test]
    fn an_unused_loop_of_symbolic_trip_becomes_a_guard_that_it_runs() {
        let sym = |lo: i64, hi: IExpr, body| Node::For(For { var: 1, lo: IExpr::c(lo), hi, kind: LoopKind::Reduce, body });
        let mut body = vec![for_(0, 0, 4, vec![sym(0, IExpr::Sym(0), vec![store(0, IExpr::v(0))])])];
        assert_eq!(drop_in(&mut body), 1);
        let runs = Cond::InRange { e: IExpr::c(0), lo: IExpr::c(0), hi: IExpr::Sym(0) };
        assert_eq!(body, vec![for_(0, 0, 4, vec![Node::Guard(Guard { conds: vec![runs], body: vec![store(0, IExpr::v(0))] })])]);
        // Two nested ones: one guard of both conditions, outer first.
        let mut body = vec![sym(
            0,
            IExpr::Sym(0),
            vec![Node::For(For { var: 2, lo: IExpr::c(0), hi: IExpr::Sym(1), kind: LoopKind::Reduce, body: vec![store(0, IExpr::c(0))] })],
        )];
        assert_eq!(drop_in(&mut body), 2);
        let inner = Cond::InRange { e: IExpr::c(0), lo: IExpr::c(0), hi: IExpr::Sym(1) };
        let runs = Cond::InRange { e: IExpr::c(0), lo: IExpr::c(0), hi: IExpr::Sym(0) };
        assert_eq!(body, vec![Node::Guard(Guard { conds: vec![runs, inner], body: vec![store(0, IExpr::c(0))] })]);
        // Used, or accumulating: stays a loop.
        let mut b = vec![sym(0, IExpr::Sym(0), vec![store(0, IExpr::v(1))])];
        assert_eq!(drop_in(&mut b), 0);
    }

    #[test]
    fn used_possibly_empty_or_accumulating_loops_stay() {
        // Used in the offset.
        let mut b = vec![for_(1, 0, 8, vec![store(0, IExpr::v(1))])];
        assert_eq!(drop_in(&mut b), 0);
        // Used only by a guard: the guard decides which cells are reset.
        let g = Node::Guard(Guard { conds: vec![Cond::NonZero(IExpr::v(1))], body: vec![store(0, IExpr::c(0))] });
        let mut b = vec![for_(1, 0, 8, vec![g])];
        assert_eq!(drop_in(&mut b), 0);
        // Empty loop: no cell is reset, so the body must not run.
        let mut b = vec![for_(1, 3, 3, vec![store(0, IExpr::c(0))])];
        assert_eq!(drop_in(&mut b), 0);
        // Accumulating: every iteration adds.
        let mut acc = store(0, IExpr::c(0));
        if let Node::Compute(c) = &mut acc {
            c.write.kind = WriteKind::Accumulate;
        }
        let mut b = vec![for_(1, 0, 8, vec![acc])];
        assert_eq!(drop_in(&mut b), 0);
        // Reads what it stores (a shift): not idempotent in general.
        let mut st = store(0, IExpr::c(0));
        if let Node::Compute(c) = &mut st {
            c.values = vec![Value { op: VOp::Load { buf: 0, offset: IExpr::c(1) }, dtype: DType::F64 }];
        }
        let mut b = vec![for_(1, 0, 8, vec![st])];
        assert_eq!(drop_in(&mut b), 0);
    }
}
