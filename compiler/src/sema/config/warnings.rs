//! W0301: a binding or an input array outside a `DIMS(..) IN` or
//! `RANK(..) IN` range. The ranges say what is drawn; given dims are used
//! as given (and still checked against every equation, [`draw`](super::draw)).

use super::{dims_text, mentioned, DimsSource, Space};
use crate::sema::Rel;
use et_grammar::ast::ConstraintSubject;
use et_grammar::Diagnostic;

impl<'a> Space<'a> {

    /// W0301: a binding or an input array outside a `DIMS(..) IN` or
    /// `RANK(..) IN` range (the ranges say what is drawn; given dims are
    /// used as given).
    pub(super) fn warn(&mut self) {
        let prog = self.prog;
        let m = &prog.module;
        for (e, src) in self.sources.iter().enumerate() {
            let (dims, who) = match src {
                DimsSource::Bound => match &self.bound[e] {
                    Some(d) => (d, format!("--bind {}={}", m.eintups[e].name, dims_text(d))),
                    None => continue,
                },
                DimsSource::Input(a) => match &self.split.given[e] {
                    Some(g) => (&g.dims, format!("input `{a}` gives `{}` dims {}", m.eintups[e].name, dims_text(&g.dims))),
                    None => continue,
                },
                _ => continue,
            };
            for c in prog.constraints.iter().filter(|c| c.target == e && c.subject == ConstraintSubject::Dims) {
                if let Rel::In { lo, hi } = c.rel {
                    if dims.iter().any(|d| *d < lo || *d > hi) {
                        self.warnings.push(
                            Diagnostic::warning("W0301", format!("{who}, outside the draw range `{}`", c.describe(m)))
                                .at(c.span, "this range says what is drawn")
                                .note("the given dims are used; they are still checked against every equation"),
                        );
                    }
                }
            }
        }
        // Ranks: a bound class, or one the input shapes fixed.
        let combo0 = self.combos.as_ref().and_then(|c| c.first());
        for (ci, cl) in self.ranks.classes.iter().enumerate() {
            let Some((lo, hi)) = cl.range else { continue };
            let soft = self.ranks.class_soft_facts(ci);
            if soft.is_empty() {
                continue;
            }
            let bound = cl.members.iter().find_map(|&e| self.bound[e].as_ref().map(|b| (e, b.len())));
            let given = || {
                let combos = self.combos.as_ref()?;
                let e = cl.members.iter().copied().find(|&e| self.inputs.iter().any(|(a, _)| m.arrays[*a].positions.iter().any(|p| {
                    let mut v = Vec::new();
                    mentioned(&p.expr, &mut v);
                    v.contains(&e)
                })))?;
                let r = combo0?.get(e).copied()?;
                combos.iter().all(|c| c.get(e) == Some(&r)).then_some((e, r))
            };
            let (who, k) = match (bound, given()) {
                (Some((e, k)), _) => (format!("--bind {}=.. has rank {k}", m.eintups[e].name), k),
                (None, Some((e, k))) => (format!("the input shapes give `{}` rank {k}", m.eintups[e].name), k),
                _ => continue,
            };
            if (k as i64) < lo || (k as i64) > hi {
                let mut d = Diagnostic::warning("W0301", format!("{who}, outside the draw range of ranks {lo}..={hi}"));
                for (j, (sp, l)) in soft.into_iter().enumerate() {
                    d = if j == 0 { d.at(sp, l) } else { d.also(sp, l) };
                }
                self.warnings.push(d.note("the given rank is used; it is still checked against every equation"));
            }
        }
        // In source order, as errors are.
        self.warnings.sort_by_key(|d| d.primary_span().map(|s| s.start));
    }
}
