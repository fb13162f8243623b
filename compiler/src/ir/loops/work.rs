//! How many points loop nests visit: the one work counter of the
//! compiler, in two modes. [`Kernel::iteration_count`] is exact or
//! nothing (codegen's split threshold, bundles, `etopt --stats`);
//! [`loop_work`] is an upper bound under an enumeration budget (the work
//! check, E0318).

use super::{bounds_use, Cond, IExpr, Interval, Kernel, LoopModule, Node};

/// Outer-loop values [`loop_work`] may enumerate, in all, to count a
/// loop nest whose inner bounds depend on outer variables exactly (a
/// convolution's tightened filter loops depend on the output position);
/// past it, such loops are bounded by intervals instead. 2^20 keeps the
/// estimate under a few milliseconds.
pub const WORK_ENUMERATION_BUDGET: u64 = 1 << 20;

impl Kernel {
    /// Exactly how many points the loop nest visits (innermost bodies run,
    /// guards ignored), summing over outer variables where bounds depend
    /// on them. `None` when a bound depends on a loaded index value or the
    /// count overflows.
    pub fn iteration_count(&self) -> Option<u128> {
        Counter { exact: true, budget: 0 }.count(&self.body, &mut vec![Interval::FULL; self.vars.len()])
    }
}

/// How many points each kernel of `lm` visits at most (every innermost
/// body, guards counted as taken), in kernel order, saturating at
/// `u128::MAX`. Exact where loop bounds are constants, or depend on outer
/// variables whose values can be enumerated within
/// [`WORK_ENUMERATION_BUDGET`] (shared by the kernels); otherwise the
/// interval of each bound gives an upper bound (a loaded index value
/// ranges over all of `i64`, which tightened bounds clamp to the loop's
/// original extent by `min`/`max`).
pub fn loop_work(lm: &LoopModule) -> Vec<u128> {
    let mut budget = WORK_ENUMERATION_BUDGET;
    lm.kernels.iter().map(|k| nest_work(&k.body, k.vars.len(), &mut budget)).collect()
}

/// [`loop_work`] of one loop nest over `vars` variables, enumerating at
/// most `budget` outer-loop values (what it uses is taken off).
pub fn nest_work(nodes: &[Node], vars: usize, budget: &mut u64) -> u128 {
    let mut counter = Counter { exact: false, budget: *budget };
    let n = counter.count(nodes, &mut vec![Interval::FULL; vars]).unwrap_or(u128::MAX);
    *budget = counter.budget;
    n
}

/// The counter. `exact`: every bound must be a constant once the outer
/// loops it depends on are enumerated (all are, with no budget), each
/// body of computes counts once, and overflow is `None`. Otherwise loops
/// whose bounds depend on outer variables are enumerated while `budget`
/// lasts and bounded by intervals past it, each compute counts, and sums
/// saturate (never `None`).
struct Counter {
    exact: bool,
    budget: u64,
}

impl Counter {
    fn count(&mut self, nodes: &[Node], env: &mut Vec<Interval>) -> Option<u128> {
        let mut total: u128 = 0;
        let mut leaf = false;
        for n in nodes {
            match n {
                Node::For(l) => {
                    let (lo, hi) = (self.bound(&l.lo, env)?, self.bound(&l.hi, env)?);
                    if lo.is_empty() || hi.is_empty() || hi.hi <= lo.lo {
                        continue;
                    }
                    let depends = bounds_use(&l.body, l.var);
                    match (lo.as_const(), hi.as_const()) {
                        (Some(a), Some(b)) if depends && (self.exact || (b as i128 - a as i128) as u128 <= u128::from(self.budget)) => {
                            if !self.exact {
                                self.budget -= (b as i128 - a as i128) as u64;
                            }
                            for v in a..b {
                                env[l.var] = Interval::point(v);
                                let inner = self.count(&l.body, env)?;
                                total = self.add(total, inner)?;
                            }
                        }
                        _ => {
                            let trips = (hi.hi as i128 - lo.lo as i128) as u128;
                            env[l.var] = Interval::new(lo.lo, hi.hi - 1);
                            let inner = self.count(&l.body, env)?;
                            let work = if self.exact { trips.checked_mul(inner)? } else { trips.saturating_mul(inner) };
                            total = self.add(total, work)?;
                        }
                    }
                    env[l.var] = Interval::FULL;
                }
                Node::Guard(g) => {
                    // The body runs only where the guard holds, so its
                    // range conditions narrow their variables there: a
                    // loaded index checked by `0 <= ld < n` is in [0, n-1],
                    // and a bound such as `3 - 7*ld` is then at most 3, not
                    // any `i64` (issue #26 item 11: ~2^64 for a loop whose
                    // bound can go negative). Like `simplify`'s `narrow`.
                    // Exact counts ignore guards (their callers' contract).
                    let saved = env.clone();
                    let taken = self.exact || g.conds.iter().all(|c| self.narrow(c, env));
                    if taken {
                        let inner = self.count(&g.body, env)?;
                        total = self.add(total, inner)?;
                    }
                    *env = saved;
                }
                Node::LoadIndex { var, .. } => env[*var] = Interval::FULL,
                Node::Compute(_) if self.exact => leaf = true,
                Node::Compute(_) => total = total.saturating_add(1),
                Node::Sync | Node::Copies(_) => {}
            }
        }
        self.add(total, leaf as u128)
    }

    /// The values of a loop bound: in exact mode only a bound whose
    /// variables are each one value (the bound itself), else `None`.
    fn bound(&self, e: &IExpr, env: &[Interval]) -> Option<Interval> {
        let mut known = true;
        if self.exact {
            e.for_each_var(&mut |v| known &= env.get(v).is_some_and(|i| i.as_const().is_some()));
        }
        known.then(|| e.range(&|v| env.get(v).copied().unwrap_or(Interval::FULL)))
    }

    /// Narrows `env` by `c` holding (`lo <= v < hi` on a bare variable
    /// `v`); `false` when it cannot hold, so the guarded body never runs.
    fn narrow(&self, c: &Cond, env: &mut [Interval]) -> bool {
        let Cond::InRange { e: IExpr::Var(v), lo, hi } = c else { return true };
        let range = |v: usize| env.get(v).copied().unwrap_or(Interval::FULL);
        let (lo, hi) = (lo.range(&range), hi.range(&range));
        if lo.is_empty() || hi.is_empty() {
            return true;
        }
        let Some(slot) = env.get_mut(*v) else { return true };
        *slot = slot.intersect(Interval::new(lo.lo, hi.hi.saturating_sub(1)));
        !slot.is_empty()
    }

    fn add(&self, a: u128, b: u128) -> Option<u128> {
        if self.exact {
            a.checked_add(b)
        } else {
            Some(a.saturating_add(b))
        }
    }
}

#[cfg(test)]
mod tests {
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

    #[test]
    fn guards_narrow_loaded_bounds_and_negative_trips_count_zero() {
        // ld = load_index idx[0]; guard 0 <= ld < 4 { for u in [0, 3 - 7*ld) { compute } }
        // (issue #26 item 11): the bound is at most 3 where the guard holds
        // and negative for ld >= 1, which runs zero times; not 2^63 trips.
        let compute = Node::Compute(Compute {
            values: vec![Value { op: VOp::Const(0.0), dtype: DType::F64 }],
            write: Write { kind: WriteKind::Store, buf: 0, offset: IExpr::c(0), value: 0 },
        });
        let hi = IExpr::bin(IBin::Sub, IExpr::c(3), IExpr::bin(IBin::Mul, IExpr::v(1), IExpr::c(7)));
        let u_loop = Node::For(For { var: 0, lo: IExpr::c(0), hi, kind: LoopKind::Reduce, body: vec![compute.clone()] });
        let load = Node::LoadIndex { var: 1, buf: 0, offset: IExpr::c(0) };
        let in_range = Cond::InRange { e: IExpr::v(1), lo: IExpr::c(0), hi: IExpr::c(4) };
        let guard = Node::Guard(Guard { conds: vec![in_range.clone()], body: vec![u_loop.clone()] });
        let mut budget = WORK_ENUMERATION_BUDGET;
        assert_eq!(nest_work(&[load.clone(), guard], 2, &mut budget), 3);
        // Unguarded, the loaded value is any i64: still a bound, not a wrap.
        assert!(nest_work(&[load.clone(), u_loop], 2, &mut budget) >= 1 << 62);
        // A loop with hi < lo runs zero times; a guard that cannot hold
        // (0 <= ld < 0) hides its body.
        let back = Node::For(For { var: 0, lo: IExpr::c(5), hi: IExpr::c(-3), kind: LoopKind::Reduce, body: vec![compute.clone()] });
        assert_eq!(nest_work(&[back], 2, &mut budget), 0);
        let never = Cond::InRange { e: IExpr::v(1), lo: IExpr::c(0), hi: IExpr::c(0) };
        let dead = Node::Guard(Guard { conds: vec![never], body: vec![compute] });
        assert_eq!(nest_work(&[load, dead], 2, &mut budget), 0);
        // `--max-work none` allows any count, even a saturated one.
        assert!(crate::driver::within_work_limit(u128::MAX, crate::driver::NO_WORK_LIMIT));
        assert!(!crate::driver::within_work_limit(u128::from(u64::MAX - 1) + 1, u64::MAX - 1));
    }
}
