//! The rank combinations a program allows: the cartesian product over the
//! free rank classes, narrowed by bindings, derived by `RANK(t) = expr`
//! constraints, within the maximum rank, and, with supplied inputs, only
//! those that fit their shapes.

use super::{mentioned, Space};
use crate::ir::et::{EintupId, MAX_RANK};
use crate::sema::inputs;
use crate::sema::rank_limit::{rank_limit_error, RankLimit};
use crate::sema::ranks::eval_rank;
use crate::sema::Rel;
use et_grammar::ast::ConstraintSubject;
use et_grammar::Diagnostic;

/// More rank combinations than this is almost surely a mistake in the
/// constraints (and `shapes` would print for ever).
pub const MAX_RANK_COMBOS: usize = 100_000;

impl<'a> Space<'a> {
    /// The rank combinations that fit every supplied input's shape,
    /// preferring the fewest rank classes outside their draw ranges (rank
    /// 1 where nothing constrains a class): an eintup keeps its default
    /// rank unless a shape needs another.
    pub(super) fn input_combos(&self) -> Result<Vec<Vec<usize>>, Vec<Diagnostic>> {
        let m = &self.prog.module;
        let rs = self.ranks;
        let mut widen: Vec<Option<i64>> = vec![None; rs.classes.len()];
        for (a, shape) in &self.inputs {
            let mut v = Vec::new();
            for p in &m.arrays[*a].positions {
                mentioned(&p.expr, &mut v);
            }
            if shape.len() > MAX_RANK {
                let what = format!("input `{}` has {} dims", m.arrays[*a].name, shape.len());
                return Err(vec![rank_limit_error(&what, m.arrays[*a].span)]);
            }
            for e in v {
                let Some(&c) = rs.class_of.get(e) else { continue };
                let l = shape.len() as i64;
                widen[c] = Some(widen[c].map_or(l, |w: i64| w.max(l)));
            }
        }
        let all = self.rank_combos_with(&widen)?;
        let fit: Vec<Vec<usize>> = all.iter().filter(|r| inputs::fits(m, &self.inputs, r)).cloned().collect();
        if fit.is_empty() {
            return Err(vec![inputs::unsplittable(m, &self.inputs, &all)]);
        }
        let deviations = |r: &Vec<usize>| {
            (0..rs.classes.len())
                .filter(|&c| widen[c].is_some() && rs.classes[c].derived.is_none())
                .filter(|&c| {
                    let cl = &rs.classes[c];
                    let (lo, hi) = cl.range.unwrap_or((1, 1));
                    let k = cl.members.first().and_then(|e| r.get(*e)).map_or(0, |k| *k as i64);
                    k < lo || k > hi
                })
                .count()
        };
        let best = fit.iter().map(deviations).min().unwrap_or(0);
        Ok(fit.into_iter().filter(|r| deviations(r) == best).collect())
    }

    /// Every rank vector (per eintup) allowed by the rank constraints,
    /// bindings and input shapes, in lexicographic order of the free
    /// classes.
    pub fn rank_combos(&self) -> Result<Vec<Vec<usize>>, Vec<Diagnostic>> {
        match &self.combos {
            Some(c) => Ok(c.clone()),
            None => self.rank_combos_with(&vec![None; self.ranks.classes.len()]),
        }
    }

    /// [`rank_combos`](Self::rank_combos) where a class with `widen[c] =
    /// Some(l)` (its eintups index a supplied input of `l` dims) ranges
    /// over its equations' ranks, or `0..=l` when none constrains it.
    fn rank_combos_with(&self, widen: &[Option<i64>]) -> Result<Vec<Vec<usize>>, Vec<Diagnostic>> {
        let m = &self.prog.module;
        let rs = self.ranks;
        let nc = rs.classes.len();
        // Per class: allowed range, narrowed by bindings.
        let mut ranges: Vec<(i64, i64)> = Vec::with_capacity(nc);
        let mut diags = Vec::new();
        for (ci, cl) in rs.classes.iter().enumerate() {
            let mut r = cl.range.unwrap_or(if cl.derived.is_some() { (0, i64::MAX) } else { (1, 1) });
            if let (Some(l), None) = (widen.get(ci).copied().flatten(), cl.derived) {
                r = cl.hard.unwrap_or((0, l));
            }
            let mut by: Option<EintupId> = None;
            for &e in &cl.members {
                let Some(b) = &self.bound[e] else { continue };
                let k = b.len() as i64;
                if b.len() > MAX_RANK {
                    diags.push(
                        Diagnostic::error("E0208", format!("--bind {}=.. has rank {k}, more than the maximum rank {MAX_RANK}", m.eintups[e].name))
                            .at(m.eintups[e].span, "this eintup"),
                    );
                    continue;
                }
                if let Some(prev) = by {
                    let pk = self.bound[prev].as_ref().map_or(0, |v| v.len());
                    if pk as i64 != k {
                        let mut d = Diagnostic::error(
                            "E0309",
                            format!("--bind gives `{}` rank {pk} and `{}` rank {k}, but their ranks are equal", m.eintups[prev].name, m.eintups[e].name),
                        );
                        for (k, (sp, l)) in rs.explain(prev, e).into_iter().enumerate() {
                            d = if k == 0 { d.at(sp, l) } else { d.also(sp, l) };
                        }
                        diags.push(d);
                        continue;
                    }
                }
                // Outside a `RANK(t) IN` range is a warning (`warn`);
                // against an equation it is an error.
                if let Some((lo, hi)) = cl.hard {
                    if k < lo || k > hi {
                        let mut d = Diagnostic::error(
                            "E0303",
                            format!("--bind {}=.. has rank {k}, which violates the rank constraints (allowed: {lo}..={hi})", m.eintups[e].name),
                        );
                        for (j, (sp, l)) in rs.class_hard_facts(ci).into_iter().enumerate() {
                            d = if j == 0 { d.at(sp, l) } else { d.also(sp, l) };
                        }
                        diags.push(d);
                    }
                }
                r = (k, k);
                by = Some(e);
            }
            ranges.push(r);
        }
        if !diags.is_empty() {
            return Err(diags);
        }
        let free: Vec<usize> = (0..nc).filter(|c| rs.classes[*c].derived.is_none()).collect();
        let mut total: usize = 1;
        for c in &free {
            let (lo, hi) = ranges[*c];
            total = total.saturating_mul((hi - lo + 1).max(0) as usize);
        }
        if total > MAX_RANK_COMBOS {
            let mut d = Diagnostic::error("E0206", format!("the rank constraints allow {total} rank combinations (limit {MAX_RANK_COMBOS})"))
                .note("narrow the `RANK(t) IN [lo, hi]` ranges");
            // Located at the ranges that multiply up (issue #20, item 6).
            let wide =
                self.prog.constraints.iter().filter(|c| {
                    c.subject == ConstraintSubject::Rank && matches!(c.rel, Rel::In { lo, hi } if hi > lo) && free.contains(&rs.class_of[c.target])
                });
            for (k, c) in wide.enumerate() {
                d = if k == 0 { d.at(c.span, "a range of ranks") } else { d.also(c.span, "another range") };
            }
            if widen.iter().any(Option::is_some) {
                d = d.note("the ranks of eintups that index a supplied input range over every rank its shape allows; fix some with `RANK(t) = ..` or --bind");
            }
            return Err(vec![d]);
        }
        // The largest rank each eintup can have (a derived class is
        // refused above MAX_RANK): arrays and statements that cannot pass
        // the limit are not checked per combination.
        let max_rank: Vec<usize> = (0..m.eintups.len())
            .map(|e| {
                let c = rs.class_of[e];
                if rs.classes[c].derived.is_some() {
                    MAX_RANK
                } else {
                    usize::try_from(ranges[c].1.max(0)).unwrap_or(usize::MAX).min(MAX_RANK + 1)
                }
            })
            .collect();
        let limit = RankLimit::new(m, &max_rank);
        // Why combinations were dropped for the rank limit: the error if
        // none is left.
        let mut too_big: Option<Diagnostic> = None;
        let mut out = Vec::new();
        let mut cur: Vec<i64> = free.iter().map(|c| ranges[*c].0).collect();
        let mut failed: Option<usize> = None;
        if total > 0 {
            loop {
                let mut class_rank = vec![0usize; nc];
                for (k, c) in free.iter().enumerate() {
                    class_rank[*c] = cur[k] as usize;
                }
                let mut ok = true;
                let mut per_e = vec![0usize; m.eintups.len()];
                for &c in &rs.derived_order {
                    for (e, r) in per_e.iter_mut().enumerate() {
                        *r = class_rank[rs.class_of[e]];
                    }
                    let Some(ci) = rs.classes[c].derived else { continue };
                    let Rel::Eq(x) = &self.prog.constraints[ci].rel else { continue };
                    match eval_rank(x, &per_e) {
                        Some(v) if v > MAX_RANK as i64 => {
                            ok = false;
                            let c = &self.prog.constraints[ci];
                            too_big.get_or_insert_with(|| rank_limit_error(&format!("constraint `{}` gives rank {v}", c.describe(m)), c.span));
                            break;
                        }
                        Some(v) if v >= ranges[c].0 && v <= ranges[c].1 && v >= 0 => class_rank[c] = v as usize,
                        _ => {
                            ok = false;
                            failed = Some(ci);
                            break;
                        }
                    }
                }
                for (e, r) in per_e.iter_mut().enumerate() {
                    *r = class_rank[rs.class_of[e]];
                }
                if ok {
                    for cl in &rs.classes {
                        for &ci in &cl.checks {
                            let Rel::Eq(x) = &self.prog.constraints[ci].rel else { continue };
                            if eval_rank(x, &per_e) != Some(per_e[cl.members[0]] as i64) {
                                ok = false;
                                failed = Some(ci);
                            }
                        }
                    }
                }
                if ok {
                    if let Some(d) = limit.violation(m, &per_e) {
                        ok = false;
                        too_big.get_or_insert(d);
                    }
                }
                if ok {
                    out.push(per_e);
                }
                // Next combination (odometer, last class fastest).
                let mut k = free.len();
                loop {
                    if k == 0 {
                        break;
                    }
                    k -= 1;
                    if cur[k] < ranges[free[k]].1 {
                        cur[k] += 1;
                        for j in k + 1..free.len() {
                            cur[j] = ranges[free[j]].0;
                        }
                        k = usize::MAX;
                        break;
                    }
                }
                if k != usize::MAX {
                    break;
                }
            }
        }
        if out.is_empty() {
            if let Some(d) = too_big {
                return Err(vec![d]);
            }
            let mut d = Diagnostic::error("E0207", "no combination of ranks satisfies the rank constraints");
            if let Some(ci) = failed {
                d = d.at(self.prog.constraints[ci].span, "cannot be satisfied");
            } else if let Some(c) = self.prog.constraints.iter().find(|c| c.subject == ConstraintSubject::Rank) {
                d = d.at(c.span, "among the rank constraints");
            }
            if self.bound.iter().any(|b| b.is_some()) {
                d = d.note("with the ranks fixed by --bind");
            }
            return Err(vec![d]);
        }
        Ok(out)
    }
}
