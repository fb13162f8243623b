//! W0301: a binding outside a `DIMS(..) IN` or `RANK(..) IN` range. The
//! ranges say what is drawn; bound dims are used as given (and still
//! checked against every equation, [`draw`](super::draw)). Dims taken from
//! input arrays are not warned about: the user's own data is not a draw.
//! W0302: an eintup that nothing determines, used inside an index
//! expression, drawn from the default 1..=8.

use super::{dims_text, mentioned, DimsSource, Space};
use crate::sema::Rel;
use et_grammar::ast::ConstraintSubject;
use et_grammar::Diagnostic;

impl<'a> Space<'a> {
    /// W0301: a binding outside a `DIMS(..) IN` or `RANK(..) IN` range
    /// (the ranges say what is drawn; bound dims are used as given). One
    /// line each (`brief`): it comes on every run with such a binding.
    pub(super) fn warn(&mut self) {
        let prog = self.prog;
        let m = &prog.module;
        for (e, src) in self.sources.iter().enumerate() {
            let (dims, who) = match (src, &self.bound[e]) {
                (DimsSource::Bound, Some(d)) => (d, format!("--bind {}={}", m.eintups[e].name, dims_text(d))),
                _ => continue,
            };
            for c in prog.constraints.iter().filter(|c| c.target == e && c.subject == ConstraintSubject::Dims) {
                if let Rel::In { lo, hi } = c.rel {
                    if dims.iter().any(|d| *d < lo || *d > hi) {
                        self.warnings.push(
                            Diagnostic::warning("W0301", format!("{who}, outside the draw range `{}` (used as given)", c.describe(m)))
                                .at(c.span, "this range says what is drawn")
                                .brief(),
                        );
                    }
                }
            }
        }
        // Ranks: a bound class.
        for (ci, cl) in self.ranks.classes.iter().enumerate() {
            let Some((lo, hi)) = cl.range else { continue };
            let soft = self.ranks.class_soft_facts(ci);
            if soft.is_empty() {
                continue;
            }
            let Some((e, k)) = cl.members.iter().find_map(|&e| self.bound[e].as_ref().map(|b| (e, b.len()))) else { continue };
            if (k as i64) < lo || (k as i64) > hi {
                let name = &m.eintups[e].name;
                let mut d = Diagnostic::warning("W0301", format!("--bind {name}=.. has rank {k}, outside the draw range of ranks {lo}..={hi} (used as given)"));
                for (j, (sp, l)) in soft.into_iter().enumerate() {
                    d = if j == 0 { d.at(sp, l) } else { d.also(sp, l) };
                }
                self.warnings.push(d.brief());
            }
        }
        self.warn_default_draws();
        // In source order, as errors are.
        self.warnings.sort_by_key(|d| d.primary_span().map(|s| s.start));
    }

    /// W0302: an eintup drawn from the default 1..=8 (no binding, input,
    /// constraint, range or readable access) although an index expression
    /// uses it (`q - j`). Out-of-bounds points are skipped, so such a draw
    /// silently cuts the result; the warning is located at the first such
    /// expression. Eintups of an input's signature are sizes, drawn as the
    /// input is generated: not warned about.
    fn warn_default_draws(&mut self) {
        let m = &self.prog.module;
        let mut of_input = Vec::new();
        for a in m.arrays.iter().filter(|a| a.is_input) {
            for p in &a.positions {
                mentioned(&p.expr, &mut of_input);
            }
        }
        for (e, src) in self.sources.iter().enumerate() {
            if *src != DimsSource::Drawn || self.draw_in[e].is_some() || of_input.contains(&e) {
                continue;
            }
            let Some(span) = first_compound_use(m, e) else { continue };
            let name = &m.eintups[e].name;
            self.warnings.push(
                Diagnostic::warning("W0302", format!("nothing determines the dims of `{name}`: drawn from the default 1..=8"))
                    .at(span, format!("`{name}` is used in this index expression"))
                    .note(format!(
                        "points out of bounds are skipped, so a drawn size can silently cut the result; give `DIMS({name}) IN [..]`, a `DIMS({name}) = ..` constraint or --bind {name}=[..]"
                    )),
            );
        }
    }
}

/// The span of the first index expression of a statement (left side, then
/// reads in order) that uses `e` without being `e` alone.
fn first_compound_use(m: &crate::ir::et::Module, e: crate::ir::et::EintupId) -> Option<et_grammar::Span> {
    use crate::ir::et::{IndexExpr, IndexKind, IndexSlot, OpKind};
    fn uses(x: &IndexExpr, e: usize) -> bool {
        let mut v = Vec::new();
        mentioned(x, &mut v);
        v.contains(&e)
    }
    let slot = |s: &IndexSlot| match s {
        IndexSlot::Expr(x) if !matches!(x.kind, IndexKind::Var(_)) && uses(x, e) => Some(x.span),
        _ => None,
    };
    m.stmts.iter().find_map(|st| {
        st.indices.iter().find_map(slot).or_else(|| {
            st.ops.iter().find_map(|op| match &op.kind {
                OpKind::Read { indices, .. } => indices.iter().find_map(slot),
                _ => None,
            })
        })
    })
}
