//! The dims of one rank combination: each eintup from its source in the
//! scheduled order (drawing from `DIMS(t) IN` ranges or the default), then
//! every dims constraint checked. A draw that fails is a [`Discard`],
//! counted or reported by [`choose`](super::choose).

use super::{dims_text, DimsSource, Space};
use crate::ir::et::dims::{bound as dims_bound, broadcast, eval_static, EvalError};
use crate::ir::et::print::index_expr;
use crate::ir::et::EintupId;
use crate::random::Rng;
use crate::sema::infer_dims::{self, Access, InferError};
use crate::sema::Rel;
use et_grammar::ast::ConstraintSubject;
use et_grammar::Span;

/// Default dims range for eintups no constraint mentions.
pub const DEFAULT_DIMS: (i64, i64) = (1, 8);

/// Why a draw was discarded (counted per reason for the user).
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub struct Discard {
    pub reason: String,
    pub span: Option<Span>,
    /// A second place the reason refers to (the access an inferred dim
    /// came from).
    pub also: Option<(Span, String)>,
    pub kind: DiscardKind,
}

/// What a discarded draw conflicted with; it picks the error reported
/// when no draw succeeds.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum DiscardKind {
    /// A drawn or derived dim violated a constraint (E0308).
    Draw,
    /// A `--bind` contradicts an equation (E0303).
    Binding,
    /// An input array's shape contradicts an equation or the configuration
    /// (E0317).
    Input,
    /// An inferred dim lies outside a `DIMS(t) IN` range (E0312).
    InferredRange,
    /// An access leaves no room: an inferred dim is negative (E0313).
    InferredNegative,
}

impl<'a> Space<'a> {
    /// Draws one dim of `e` from its `IN` range or the default.
    fn draw_one(&self, e: EintupId, rng: &mut Rng) -> i64 {
        match self.draw_in[e].map(|ci| &self.prog.constraints[ci].rel) {
            Some(Rel::In { lo, hi }) => rng.range(*lo, *hi),
            _ => rng.range(DEFAULT_DIMS.0, DEFAULT_DIMS.1),
        }
    }

    /// Determines dims for one rank combination. `Err(discard)` when the
    /// draw violates a constraint.
    pub fn draw(&self, ranks: &[usize], rng: &mut Rng) -> Result<Vec<Vec<i64>>, Discard> {
        let m = &self.prog.module;
        let n = m.eintups.len();
        let mut dims: Vec<Option<Vec<i64>>> = vec![None; n];
        // Per inferred eintup and component: the access that bounded it.
        let mut via: Vec<Vec<Option<usize>>> = vec![Vec::new(); n];
        let disc = |reason: String, span: Option<Span>, kind: DiscardKind| Discard { reason, span, also: None, kind };
        for &e in &self.order {
            let r = ranks[e];
            let d = match &self.sources[e] {
                DimsSource::Bound => self.bound[e].clone().unwrap_or_default(),
                DimsSource::Input(_) => self.split.given[e].as_ref().map(|g| g.dims.clone()).unwrap_or_default(),
                DimsSource::Constrained => {
                    let Some(ci) = self.derive[e] else { continue };
                    let c = &self.prog.constraints[ci];
                    let Rel::Eq(x) = &c.rel else { continue };
                    match eval_static(x, &dims, ranks) {
                        Ok(v) => match broadcast(&v, r) {
                            Some(d) => {
                                if d.iter().any(|x| *x < 0) {
                                    return Err(disc(format!("`{}` gave a negative dim", c.describe(m)), Some(c.span), DiscardKind::Draw));
                                }
                                d
                            }
                            None => return Err(disc(format!("`{}` has a tuple of another rank", c.describe(m)), Some(c.span), DiscardKind::Draw)),
                        },
                        Err(EvalError::DivZero(_)) => return Err(disc(format!("`{}` divides by zero", c.describe(m)), Some(c.span), DiscardKind::Draw)),
                        Err(_) => return Err(disc(format!("`{}` cannot be evaluated", c.describe(m)), Some(c.span), DiscardKind::Draw)),
                    }
                }
                DimsSource::Inferred => {
                    let accs = &self.used[e];
                    match infer_dims::infer(m, accs, r, &dims, ranks) {
                        Ok(comps) => {
                            via[e] = comps.iter().map(|c| c.map(|c| c.access)).collect();
                            comps.iter().map(|c| c.map_or_else(|| self.draw_one(e, rng), |c| c.dim)).collect()
                        }
                        Err(InferError::Negative { access, extent, reach }) => {
                            let a = &accs[access];
                            let text = self.access_text(a);
                            return Err(disc(
                                format!(
                                    "`{}` would be inferred negative from {text}: the position's extent is {extent}, and the other terms reach {reach}",
                                    m.eintups[e].name
                                ),
                                Some(a.span),
                                DiscardKind::InferredNegative,
                            ));
                        }
                        Err(InferError::Eval { access }) => {
                            let a = &accs[access];
                            return Err(disc(
                                format!("the bound {} gives `{}` cannot be evaluated", self.access_text(a), m.eintups[e].name),
                                Some(a.span),
                                DiscardKind::Draw,
                            ));
                        }
                    }
                }
                DimsSource::Drawn => (0..r).map(|_| self.draw_one(e, rng)).collect(),
            };
            dims[e] = Some(d);
        }
        let dims: Vec<Vec<i64>> = dims.into_iter().map(|d| d.unwrap_or_default()).collect();
        let known: Vec<Option<Vec<i64>>> = dims.iter().cloned().map(Some).collect();
        // Every dims constraint must hold: equations always, `IN` ranges
        // except for given dims (a warning, `warn`) and the constraint that
        // produced the dims.
        for (ci, c) in self.prog.constraints.iter().enumerate() {
            if c.subject != ConstraintSubject::Dims {
                continue;
            }
            let e = c.target;
            let is_in = matches!(c.rel, Rel::In { .. });
            let kind = match &self.sources[e] {
                DimsSource::Bound if is_in => continue,
                DimsSource::Input(_) if is_in => continue,
                DimsSource::Bound => DiscardKind::Binding,
                DimsSource::Input(_) => DiscardKind::Input,
                DimsSource::Constrained if self.derive[e] == Some(ci) => continue,
                DimsSource::Drawn if self.draw_in[e] == Some(ci) => continue,
                DimsSource::Inferred if is_in => DiscardKind::InferredRange,
                _ => DiscardKind::Draw,
            };
            let ok = match &c.rel {
                Rel::In { lo, hi } => dims[e].iter().all(|d| d >= lo && d <= hi),
                Rel::Eq(x) => match eval_static(x, &known, ranks) {
                    Ok(v) => broadcast(&v, dims[e].len()).as_deref() == Some(dims[e].as_slice()),
                    Err(_) => false,
                },
            };
            if ok {
                continue;
            }
            let mut x = disc(format!("violates `{}`", c.describe(m)), Some(c.span), kind);
            match kind {
                DiscardKind::Input => {
                    if let DimsSource::Input(a) = &self.sources[e] {
                        x.reason = format!("input `{a}` gives `{}` dims {}, which violates `{}`", m.eintups[e].name, dims_text(&dims[e]), c.describe(m));
                    }
                }
                DiscardKind::InferredRange => {
                    let Rel::In { lo, hi } = c.rel else { continue };
                    let bad = dims[e].iter().position(|d| *d < lo || *d > hi).unwrap_or(0);
                    if let Some(a) = via[e].get(bad).copied().flatten().and_then(|k| self.used[e].get(k)) {
                        x.reason =
                            format!("`{}` is inferred as {} from {}, outside `{}`", m.eintups[e].name, dims_text(&dims[e]), self.access_text(a), c.describe(m));
                        x.also = Some((a.span, "inferred from this access".to_string()));
                    }
                }
                _ => {}
            }
            return Err(x);
        }
        // Positions of inputs that hold expressions must reproduce the
        // file's extent.
        for (a, k, want) in &self.split.checks {
            let arr = &m.arrays[*a];
            let Some(p) = arr.positions.get(*k) else { continue };
            let got = dims_bound(&p.expr, &dims).ok();
            if got.as_deref() != Some(want.as_slice()) {
                return Err(disc(
                    format!(
                        "input `{}` has extent {} at position {} (`{}`), but the configuration gives {}",
                        arr.name,
                        dims_text(want),
                        k + 1,
                        index_expr(m, &p.expr),
                        got.map_or_else(|| "none".to_string(), |g| dims_text(&g))
                    ),
                    Some(p.expr.span),
                    DiscardKind::Input,
                ));
            }
        }
        if let Some((_, _, f)) = self.ranks.check_deferred(ranks, &dims) {
            return Err(disc(format!("rank mismatch: {}", f.label), Some(f.span), DiscardKind::Draw));
        }
        Ok(dims)
    }

    /// The read an inferred dim came from, for messages.
    fn access_text(&self, a: &Access) -> String {
        a.describe(&self.prog.module)
    }
}
