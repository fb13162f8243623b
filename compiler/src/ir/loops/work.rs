//! How many points a kernel's loop nest visits.

use super::{bounds_use, IExpr, Kernel, Node};

impl Kernel {
    /// Exactly how many points the loop nest visits (innermost bodies run,
    /// guards ignored), summing over outer variables where bounds depend
    /// on them. `None` when a bound depends on a loaded index value or the
    /// count overflows.
    pub fn iteration_count(&self) -> Option<u128> {
        fn count(nodes: &[Node], env: &mut Vec<Option<i64>>) -> Option<u128> {
            let mut total: u128 = 0;
            let mut leaf = false;
            for n in nodes {
                match n {
                    Node::For(l) => {
                        let lo = eval(&l.lo, env)?;
                        let hi = eval(&l.hi, env)?;
                        if hi <= lo {
                            continue;
                        }
                        let trips = (hi - lo) as u128;
                        let depends = bounds_use(&l.body, l.var);
                        if depends {
                            for v in lo..hi {
                                env[l.var] = Some(v);
                                total = total.checked_add(count(&l.body, env)?)?;
                            }
                            env[l.var] = None;
                        } else {
                            total = total.checked_add(trips.checked_mul(count(&l.body, env)?)?)?;
                        }
                    }
                    Node::Guard(g) => total = total.checked_add(count(&g.body, env)?)?,
                    Node::LoadIndex { .. } | Node::Sync => {}
                    Node::Compute(_) => leaf = true,
                }
            }
            Some(total + leaf as u128)
        }
        fn eval(e: &IExpr, env: &[Option<i64>]) -> Option<i64> {
            let mut ok = true;
            e.for_each_var(&mut |v| ok &= env.get(v).copied().flatten().is_some());
            ok.then(|| e.eval(&env.iter().map(|x| x.unwrap_or(0)).collect::<Vec<_>>()))
        }
        count(&self.body, &mut vec![None; self.vars.len()])
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ir::loops::*;

    #[test]
    fn iteration_count_sums_over_dependent_bounds() {
        // for i in [0, 4) { for j in [i, 4) { for k in [0, 3) { compute } } }
        // visits sum_i (4 - i) * 3 = 30 points; guards do not count.
        let compute = Node::Compute(Compute {
            values: vec![Value { op: VOp::Const(0.0), dtype: DType::F64 }],
            write: Write { kind: WriteKind::Store, buf: 0, offset: IExpr::c(0), value: 0 },
        });
        let k_loop = Node::For(For { var: 2, lo: IExpr::c(0), hi: IExpr::c(3), kind: LoopKind::Reduce, body: vec![compute] });
        let guard = Node::Guard(Guard { conds: vec![Cond::NonZero(IExpr::v(1))], body: vec![k_loop] });
        let j_loop = Node::For(For { var: 1, lo: IExpr::v(0), hi: IExpr::c(4), kind: LoopKind::Reduce, body: vec![guard] });
        let i_loop = Node::For(For { var: 0, lo: IExpr::c(0), hi: IExpr::c(4), kind: LoopKind::Parallel, body: vec![j_loop] });
        let vars = ["i", "j", "k"].iter().map(|n| Var { name: n.to_string() }).collect();
        let k = Kernel::new("t", vars, vec![i_loop]);
        assert_eq!(k.iteration_count(), Some(30));
        assert_eq!(k.guard_count(), 1);
        // A bound on a loaded value cannot be counted statically.
        let load = Node::LoadIndex { var: 1, buf: 0, offset: IExpr::c(0) };
        let inner = Node::For(For { var: 2, lo: IExpr::c(0), hi: IExpr::v(1), kind: LoopKind::Reduce, body: vec![] });
        let k2 = Kernel::new("u", k.vars.clone(), vec![load, inner]);
        assert_eq!(k2.iteration_count(), None);
    }
}
