//! Configurations: one rank and dims for every eintup (LANGUAGE.md s.6).
//!
//! Priority: bindings (`--bind NAME=[..]`), then the shapes of input
//! arrays (`--input`, [`inputs`](super::inputs)), then `DIMS(t) = expr`
//! constraints and range inference ([`infer_dims`](super::infer_dims)),
//! then draws: `DIMS(t) IN` ranges, else the default 1..=8. Ranks are
//! enumerated as the cartesian product over rank classes (narrowed by the
//! input shapes); dims are determined per rank combination in dependency
//! order, with a seeded PRNG ([`Rng`]) so a seed always gives the same
//! configurations. Draws that violate a constraint or give a negative
//! derived or inferred dim are discarded and counted. `IN` ranges say what
//! is drawn: a binding or an input outside them is a warning.

use super::infer_dims::{self, Access, InferError};
use super::inputs::{self, InputShape, Split};
use super::rank_limit::{rank_limit_error, RankLimit};
use super::ranks::{eval_rank, RankSystem};
use super::{Program, Rel};
use crate::ir::et::dims::{bound as dims_bound, broadcast, dims_refs, eval_static, EvalError};
use crate::ir::et::print::index_expr;
use crate::ir::et::{ArrayId, EintupId, MAX_RANK};
use crate::random::Rng;
use et_grammar::ast::ConstraintSubject;
use et_grammar::{Diagnostic, Span};
use std::collections::BTreeMap;

/// Default dims range for eintups no constraint mentions.
pub const DEFAULT_DIMS: (i64, i64) = (1, 8);
/// More rank combinations than this is almost surely a mistake in the
/// constraints (and `shapes` would print for ever).
pub const MAX_RANK_COMBOS: usize = 100_000;
/// Draws tried before giving up on finding one valid configuration.
pub const MAX_ATTEMPTS: usize = 1000;

/// One configuration: every eintup in module order with its dims, where
/// they came from, and the warnings choosing it gave.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Config {
    pub dims: Vec<(String, Vec<i64>)>,
    /// Per eintup, in the order of `dims`: how its dims were determined.
    pub sources: Vec<DimsSource>,
    /// Bindings or input arrays outside a `DIMS(..) IN`/`RANK(..) IN`
    /// range (W0301).
    pub warnings: Vec<Diagnostic>,
}

/// How an eintup's dims were determined, in priority order.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum DimsSource {
    /// `--bind`, or fixed by the module (a printed specialised module, a
    /// bundle's configuration).
    Bound,
    /// Taken from the shape of this input array.
    Input(String),
    /// A `DIMS(t) = expr` constraint.
    Constrained,
    /// Range inference from the right-hand-side accesses.
    Inferred,
    /// Drawn from a `DIMS(t) IN` range or the default range.
    Drawn,
}

impl DimsSource {
    /// `bound`, `input x`, `constrained`, `inferred`, `drawn`.
    pub fn text(&self) -> String {
        match self {
            DimsSource::Bound => "bound".into(),
            DimsSource::Input(a) => format!("input {a}"),
            DimsSource::Constrained => "constrained".into(),
            DimsSource::Inferred => "inferred".into(),
            DimsSource::Drawn => "drawn".into(),
        }
    }
}

impl Config {
    /// A configuration whose dims are all given (a printed specialised
    /// module, a bundle's).
    pub fn fixed(dims: Vec<(String, Vec<i64>)>) -> Config {
        let sources = vec![DimsSource::Bound; dims.len()];
        Config { dims, sources, warnings: Vec::new() }
    }

    pub fn get(&self, name: &str) -> Option<&[i64]> {
        self.dims.iter().find(|(n, _)| n == name).map(|(_, d)| d.as_slice())
    }

    /// `b=[2] (input x), k=[3] (inferred), ...`: one line for the user.
    pub fn describe(&self) -> String {
        self.dims
            .iter()
            .enumerate()
            .map(|(k, (n, d))| {
                let src = self.sources.get(k).map_or_else(|| "bound".to_string(), DimsSource::text);
                format!("{n}={} ({src})", dims_text(d))
            })
            .collect::<Vec<_>>()
            .join(", ")
    }
}

/// `[2, 3]`, `[]` for rank 0.
pub fn dims_text(d: &[i64]) -> String {
    format!("[{}]", d.iter().map(|x| x.to_string()).collect::<Vec<_>>().join(", "))
}

/// `--bind NAME=[d1, ...]`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Binding {
    pub name: String,
    pub dims: Vec<i64>,
}

/// Parses `--bind` arguments; a malformed one is error E0301 (a message:
/// it has no place in the source).
pub fn parse_bindings(binds: &[String]) -> Result<Vec<Binding>, String> {
    binds.iter().map(|b| parse_binding(b).map_err(|e| format!("error[E0301]: {e}"))).collect()
}

/// Chooses one configuration: bindings, then input shapes, then
/// constraints and range inference, then draws; deterministic in `seed`.
pub fn choose_config(prog: &Program, ranks: &RankSystem, binds: &[Binding], inputs: &[InputShape], seed: u64) -> Result<Config, Vec<Diagnostic>> {
    let space = Space::new(prog, ranks, binds, inputs)?;
    let dims = space.choose(seed)?;
    Ok(space.config(&dims))
}

/// Parses `NAME=[d1,d2,...]` (`NAME=[]` is rank 0).
pub fn parse_binding(s: &str) -> Result<Binding, String> {
    let bad = || format!("invalid binding `{s}`: expected NAME=[d1,d2,...] with non-negative integers (NAME=[] is rank 0)");
    let (name, rest) = s.split_once('=').ok_or_else(bad)?;
    let name = name.trim();
    if name.is_empty() || !name.chars().all(|c| c.is_alphanumeric() || c == '_') {
        return Err(bad());
    }
    let inner = rest.trim().strip_prefix('[').and_then(|r| r.strip_suffix(']')).ok_or_else(bad)?;
    let mut dims = Vec::new();
    if !inner.trim().is_empty() {
        for p in inner.split(',') {
            let d: i64 = p.trim().parse().map_err(|_| bad())?;
            if d < 0 {
                return Err(bad());
            }
            dims.push(d);
        }
    }
    Ok(Binding { name: name.to_string(), dims })
}

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

/// Everything needed to draw configurations of one program.
pub struct Space<'a> {
    pub prog: &'a Program,
    pub ranks: &'a RankSystem,
    bound: Vec<Option<Vec<i64>>>,
    /// The supplied input arrays and their shapes.
    inputs: Vec<(ArrayId, Vec<i64>)>,
    /// What the input shapes determine.
    split: Split,
    /// The rank combinations the input shapes allow (`None` without
    /// inputs: every combination, computed when asked).
    combos: Option<Vec<Vec<usize>>>,
    /// Eintups in dependency order.
    order: Vec<EintupId>,
    /// Per eintup: index of the deriving `DIMS(t) = expr` constraint.
    derive: Vec<Option<usize>>,
    /// Per eintup: the `DIMS(t) IN` constraint it is drawn from.
    draw_in: Vec<Option<usize>>,
    /// Per eintup: how its dims are determined.
    sources: Vec<DimsSource>,
    /// Per inferred eintup: the accesses it is inferred from.
    used: Vec<Vec<Access>>,
    /// W0301: bindings and inputs outside draw ranges.
    warnings: Vec<Diagnostic>,
}

/// Eintups mentioned (as variables or in `DIMS(..)`) by an expression.
fn mentioned(e: &crate::ir::et::IndexExpr, out: &mut Vec<EintupId>) {
    use crate::ir::et::{IndexKind, IndexSlot};
    match &e.kind {
        IndexKind::Var(t) => out.push(*t),
        IndexKind::Dims(l) => out.extend(l.eintups()),
        IndexKind::Lit(_) | IndexKind::Rank(_) => {}
        IndexKind::Flat(v) => v.iter().for_each(|x| mentioned(x, out)),
        IndexKind::Slice { indices, .. } => indices.iter().for_each(|s| {
            if let IndexSlot::Expr(x) = s {
                mentioned(x, out)
            }
        }),
        IndexKind::Bin(_, a, b) => {
            mentioned(a, out);
            mentioned(b, out);
        }
    }
}

impl<'a> Space<'a> {
    /// The configurations of `prog` under bindings and the shapes of the
    /// supplied input arrays.
    pub fn new(prog: &'a Program, ranks: &'a RankSystem, binds: &[Binding], inputs: &[InputShape]) -> Result<Space<'a>, Vec<Diagnostic>> {
        let m = &prog.module;
        let n = m.eintups.len();
        let mut bound = vec![None; n];
        let mut diags = Vec::new();
        for b in binds {
            match m.eintup_by_name(&b.name) {
                Some(e) => bound[e] = Some(b.dims.clone()),
                None => {
                    let names = || m.eintups.iter().map(|e| e.name.as_str());
                    let mut d = Diagnostic::error("E0302", format!("--bind names `{}`, which is not an eintup of this program", b.name));
                    if let Some(hint) = et_grammar::suggest::did_you_mean(&b.name, names()) {
                        d = d.note(hint);
                    }
                    diags.push(d.note(format!("eintups: {}", names().collect::<Vec<_>>().join(", "))));
                }
            }
        }
        let supplied = inputs::resolve(m, inputs).unwrap_or_else(|d| {
            diags.extend(d);
            Vec::new()
        });
        let mut derive = vec![None; n];
        let mut draw_in = vec![None; n];
        for (ci, c) in prog.constraints.iter().enumerate() {
            if c.subject != ConstraintSubject::Dims {
                continue;
            }
            match c.rel {
                Rel::Eq(_) if derive[c.target].is_none() => derive[c.target] = Some(ci),
                Rel::In { .. } if draw_in[c.target].is_none() => draw_in[c.target] = Some(ci),
                _ => {}
            }
        }
        let mut space = Space {
            prog,
            ranks,
            bound,
            inputs: supplied,
            split: Split { given: vec![None; n], checks: Vec::new() },
            combos: None,
            order: Vec::new(),
            derive,
            draw_in,
            sources: Vec::new(),
            used: vec![Vec::new(); n],
            warnings: Vec::new(),
        };
        if diags.is_empty() && !space.inputs.is_empty() {
            let combos = space.input_combos()?;
            let cuts = inputs::split(m, &space.inputs, &combos)?;
            space.split = inputs::given(m, &space.inputs, &cuts, &space.bound)?;
            space.combos = Some(combos);
        }
        if let Err(d) = space.schedule() {
            diags.push(d);
        }
        if !diags.is_empty() {
            return Err(diags);
        }
        space.warn();
        Ok(space)
    }

    /// How each eintup's dims are determined (module order).
    pub fn sources(&self) -> &[DimsSource] {
        &self.sources
    }

    /// Warnings (W0301) about bindings and inputs outside draw ranges.
    pub fn warnings(&self) -> &[Diagnostic] {
        &self.warnings
    }

    /// Decides each eintup's source and the order dims are determined in;
    /// a cycle is E0304 (dims constraints alone) or E0311 (through range
    /// inference).
    fn schedule(&mut self) -> Result<(), Diagnostic> {
        let prog = self.prog;
        let m = &prog.module;
        let n = m.eintups.len();
        // An eintup of an input array's signature takes its dims from that
        // array (supplied, or drawn as it is generated): never inferred.
        let mut of_input = vec![false; n];
        for a in m.arrays.iter().filter(|a| a.is_input) {
            let mut v = Vec::new();
            for p in &a.positions {
                mentioned(&p.expr, &mut v);
            }
            for e in v {
                if let Some(x) = of_input.get_mut(e) {
                    *x = true;
                }
            }
        }
        let given = |e: EintupId| self.bound[e].is_some() || self.split.given[e].is_some();
        let derive_refs: Vec<Option<Vec<EintupId>>> = (0..n)
            .map(|e| match self.derive[e].map(|ci| &prog.constraints[ci].rel) {
                Some(Rel::Eq(x)) if !given(e) => {
                    let mut v = Vec::new();
                    dims_refs(x, &mut v);
                    Some(v)
                }
                _ => None,
            })
            .collect();
        let readable: Vec<Option<Vec<Access>>> = (0..n)
            .map(|e| {
                if given(e) || derive_refs[e].is_some() || self.derive[e].is_some() || of_input[e] {
                    return None;
                }
                Some(infer_dims::accesses(m, e)).filter(|a| !a.is_empty())
            })
            .collect();
        let plan = infer_dims::plan(&readable, &derive_refs);
        self.sources = (0..n)
            .map(|e| {
                if self.bound[e].is_some() {
                    DimsSource::Bound
                } else if let Some(g) = &self.split.given[e] {
                    DimsSource::Input(m.arrays[g.array].name.clone())
                } else if derive_refs[e].is_some() {
                    DimsSource::Constrained
                } else if readable[e].is_some() {
                    DimsSource::Inferred
                } else {
                    DimsSource::Drawn
                }
            })
            .collect();
        self.order = plan.order;
        self.used = plan.used;
        let cyc = plan.cycle;
        if cyc.is_empty() {
            return Ok(());
        }
        let names = cyc.iter().map(|e| format!("`{}`", m.eintups[*e].name)).collect::<Vec<_>>().join(", ");
        if cyc.iter().all(|e| readable[*e].is_none()) {
            let mut d = Diagnostic::error("E0304", format!("dims constraints form a cycle through {names}"));
            for (k, e) in cyc.iter().enumerate() {
                if let Some(ci) = self.derive[*e] {
                    let sp = prog.constraints[ci].span;
                    d = if k == 0 { d.at(sp, "depends on the others") } else { d.also(sp, "part of the cycle") };
                }
            }
            return Err(d.note("dims constraints must form an acyclic dependency graph"));
        }
        let mut d = Diagnostic::error("E0311", format!("range inference forms a cycle through {names}"));
        let mut first = true;
        for e in &cyc {
            let name = &m.eintups[*e].name;
            let (sp, l) = if let Some(a) = readable[*e].as_ref().and_then(|v| v.first()) {
                let needs: Vec<String> = a.deps.iter().filter(|x| cyc.contains(x)).map(|x| format!("`{}`", m.eintups[*x].name)).collect();
                (a.span, format!("`{name}` is inferred from this access, which needs the dims of {}", needs.join(", ")))
            } else if let Some(ci) = self.derive[*e] {
                (prog.constraints[ci].span, format!("`{name}` is derived here from the others"))
            } else {
                continue;
            };
            d = if first { d.at(sp, l) } else { d.also(sp, l) };
            first = false;
        }
        Err(d.note("each of these eintups needs another's dims first; fix one of them with --bind or a `DIMS(t) = ..` constraint"))
    }

    /// W0301: a binding or an input array outside a `DIMS(..) IN` or
    /// `RANK(..) IN` range (the ranges say what is drawn; given dims are
    /// used as given).
    fn warn(&mut self) {
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

    /// The rank combinations that fit every supplied input's shape,
    /// preferring the fewest rank classes outside their draw ranges (rank
    /// 1 where nothing constrains a class): an eintup keeps its default
    /// rank unless a shape needs another.
    fn input_combos(&self) -> Result<Vec<Vec<usize>>, Vec<Diagnostic>> {
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
            let wide = self.prog.constraints.iter().filter(|c| {
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
                            None => {
                                return Err(disc(format!("`{}` has a tuple of another rank", c.describe(m)), Some(c.span), DiscardKind::Draw))
                            }
                        },
                        Err(EvalError::DivZero(_)) => {
                            return Err(disc(format!("`{}` divides by zero", c.describe(m)), Some(c.span), DiscardKind::Draw))
                        }
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
                        x.reason = format!(
                            "`{}` is inferred as {} from {}, outside `{}`",
                            m.eintups[e].name,
                            dims_text(&dims[e]),
                            self.access_text(a),
                            c.describe(m)
                        );
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

    /// Draws `reps` configurations per rank combination (discarding
    /// invalid ones), returning them and the discard counts.
    pub fn enumerate(&self, reps: usize, seed: u64) -> Result<(Vec<Vec<Vec<i64>>>, BTreeMap<String, usize>), Vec<Diagnostic>> {
        let combos = self.rank_combos()?;
        let mut rng = Rng::new(seed);
        let mut out = Vec::new();
        let mut discarded = BTreeMap::new();
        for ranks in &combos {
            for _ in 0..reps {
                match self.draw(ranks, &mut rng) {
                    Ok(d) => out.push(d),
                    Err(x) => *discarded.entry(x.reason).or_insert(0) += 1,
                }
            }
        }
        Ok((out, discarded))
    }

    /// One configuration, deterministic in `seed`: a rank combination drawn
    /// among the allowed ones, then dims; retried on discarded draws.
    pub fn choose(&self, seed: u64) -> Result<Vec<Vec<i64>>, Vec<Diagnostic>> {
        let combos = self.rank_combos()?;
        let mut rng = Rng::new(seed);
        let mut last: Option<Discard> = None;
        let mut conflict: Option<Discard> = None;
        for _ in 0..MAX_ATTEMPTS {
            let k = (rng.next() % combos.len() as u64) as usize;
            match self.draw(&combos[k], &mut rng) {
                Ok(d) => return Ok(d),
                Err(x) => {
                    if matches!(x.kind, DiscardKind::Binding | DiscardKind::Input) {
                        conflict = Some(x.clone());
                    }
                    last = Some(x);
                }
            }
        }
        let x = conflict.or(last);
        let (code, msg, label) = match &x {
            Some(x) => match x.kind {
                DiscardKind::Binding => ("E0303", format!("the --bind values violate a constraint: {}", x.reason), "this constraint"),
                DiscardKind::Input => ("E0317", format!("the input arrays' shapes contradict the program: {}", x.reason), "contradicted by the input"),
                DiscardKind::InferredRange => ("E0312", x.reason.clone(), "this draw range"),
                DiscardKind::InferredNegative => ("E0313", x.reason.clone(), "this access needs more room than the array has"),
                DiscardKind::Draw => ("E0308", format!("no valid configuration found in {MAX_ATTEMPTS} draws; last draw {}", x.reason), "this constraint"),
            },
            None => ("E0308", "no valid configuration found".to_string(), "this constraint"),
        };
        let mut d = Diagnostic::error(code, msg);
        if let Some(x) = &x {
            if let Some(sp) = x.span {
                d = d.at(sp, label);
            }
            if let Some((sp, l)) = &x.also {
                d = d.also(*sp, l.clone());
            }
            match x.kind {
                DiscardKind::InferredRange => {
                    d = d.note("`DIMS(t) IN` ranges say what is drawn; an inferred dim must lie inside (bind the eintup, or widen the range)")
                }
                DiscardKind::InferredNegative => {
                    d = d.note("range inference gives the largest dims for which the access stays in bounds; here none do (supply a larger array, or bind the eintup)")
                }
                _ => {}
            }
        }
        Err(vec![d])
    }

    /// Names, dims and sources in module order.
    pub fn config(&self, dims: &[Vec<i64>]) -> Config {
        Config {
            dims: self.prog.module.eintups.iter().zip(dims).map(|(e, d)| (e.name.clone(), d.clone())).collect(),
            sources: self.sources.clone(),
            warnings: self.warnings.clone(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::driver::Source;
    use crate::pipeline::ranked;

    const CONV: &str = "x[b,ipos,c1] = RANDOM(0, 1, FLOAT)\nw[fpos,c1,c2] = RANDOM(0, 1, FLOAT)\ny[b,o,c2] = x[b,o+k,c1] * w[k,c1,c2]\n\ny\n\nRANK(b) = 1\nRANK(c1) = 1\nRANK(c2) = 1\n";

    fn input(name: &str, shape: &[i64]) -> InputShape {
        InputShape { name: name.into(), shape: shape.to_vec() }
    }

    /// The chosen configuration of `text` as (name, dims, source) text, or
    /// the error codes.
    fn choose(text: &str, binds: &[&str], inputs: &[InputShape]) -> Result<(Config, Vec<&'static str>), Vec<&'static str>> {
        let (prog, ranks) = ranked(&Source::from_string("t.et", text)).expect("resolves");
        let binds: Vec<Binding> = binds.iter().map(|b| parse_binding(b).expect("binding parses")).collect();
        let codes = |d: Vec<Diagnostic>| d.iter().map(|d| d.code).collect::<Vec<_>>();
        let space = Space::new(&prog, &ranks, &binds, inputs).map_err(codes)?;
        let dims = space.choose(0).map_err(codes)?;
        let cfg = space.config(&dims);
        let warnings = cfg.warnings.iter().map(|d| d.code).collect();
        Ok((cfg, warnings))
    }

    #[test]
    fn conv_from_inputs_alone() {
        // 2-D: ipos and fpos take rank 2 from the shapes; k = fpos, o =
        // ipos - fpos + 1, component-wise.
        let (cfg, w) = choose(CONV, &[], &[input("x", &[2, 9, 7, 3]), input("w", &[3, 2, 3, 4])]).unwrap();
        assert!(w.is_empty());
        assert_eq!(cfg.get("k"), Some(&[3, 2][..]));
        assert_eq!(cfg.get("o"), Some(&[7, 6][..]));
        assert_eq!(
            cfg.describe(),
            "b=[2] (input x), ipos=[9, 7] (input x), c1=[3] (input x), fpos=[3, 2] (input w), c2=[4] (input w), o=[7, 6] (inferred), k=[3, 2] (inferred)"
        );
        // 1-D and 3-D alike.
        let (cfg, _) = choose(CONV, &[], &[input("x", &[1, 5, 1]), input("w", &[5, 1, 1])]).unwrap();
        assert_eq!((cfg.get("k"), cfg.get("o")), (Some(&[5][..]), Some(&[1][..])));
        let (cfg, _) = choose(CONV, &[], &[input("x", &[1, 4, 4, 4, 2]), input("w", &[2, 3, 4, 2, 1])]).unwrap();
        assert_eq!(cfg.get("o"), Some(&[3, 2, 1][..]));
    }

    #[test]
    fn without_inputs_the_inputs_eintups_are_drawn_and_the_rest_inferred() {
        let (prog, ranks) = ranked(&Source::from_string("t.et", CONV)).unwrap();
        let space = Space::new(&prog, &ranks, &[], &[]).unwrap();
        let src: Vec<String> = space.sources().iter().map(DimsSource::text).collect();
        assert_eq!(src, ["drawn", "drawn", "drawn", "drawn", "drawn", "inferred", "inferred"]);
        let (rows, _) = space.enumerate(20, 1).unwrap();
        for r in rows {
            // k = fpos, o = ipos - fpos + 1 whenever that is not negative.
            assert_eq!(r[6], r[3]);
            assert_eq!(r[5][0], r[1][0] - r[3][0] + 1);
        }
    }

    #[test]
    fn splits_prefer_the_default_rank_and_report_ambiguity() {
        let two = "x[a,b] = RANDOM(0, 1, FLOAT)\ny[a,b] = x[a,b]\n";
        // Two dims: both keep rank 1.
        let (cfg, _) = choose(two, &[], &[input("x", &[2, 3])]).unwrap();
        assert_eq!((cfg.get("a"), cfg.get("b")), (Some(&[2][..]), Some(&[3][..])));
        // Three dims: a=[2] b=[3,4] or a=[2,3] b=[4].
        assert_eq!(choose(two, &[], &[input("x", &[2, 3, 4])]).unwrap_err(), ["E0315"]);
        // A binding settles it.
        let (cfg, _) = choose(two, &["a=[2]"], &[input("x", &[2, 3, 4])]).unwrap();
        assert_eq!(cfg.get("b"), Some(&[3, 4][..]));
        assert_eq!(cfg.sources[0], DimsSource::Bound);
        // So does a rank constraint; a rank the shape cannot have is E0314.
        let (cfg, _) = choose(&format!("{two}\nRANK(b) = 2\n"), &[], &[input("x", &[2, 3, 4])]).unwrap();
        assert_eq!(cfg.get("a"), Some(&[2][..]));
        assert_eq!(choose(&format!("{two}\nRANK(b) = 4\n"), &[], &[input("x", &[2, 3, 4])]).unwrap_err(), ["E0314"]);
        let (cfg, _) = choose(&format!("{two}\nRANK(b) = 3\n"), &[], &[input("x", &[2, 3, 4])]).unwrap();
        assert_eq!(cfg.get("a"), Some(&[][..]));
        // Rank 0 and zero-sized dims.
        let (cfg, _) = choose(&format!("{two}\nRANK(a) = 1\n"), &[], &[input("x", &[0])]).unwrap();
        assert_eq!((cfg.get("a"), cfg.get("b")), (Some(&[0][..]), Some(&[][..])));
    }

    #[test]
    fn conflicts_name_both_sides() {
        let two = "x[a] = RANDOM(0, 1, FLOAT)\nw[a] = RANDOM(0, 1, FLOAT)\ny[a] = x[a] * w[a]\n";
        assert_eq!(choose(two, &[], &[input("x", &[3]), input("w", &[4])]).unwrap_err(), ["E0316"]);
        assert_eq!(choose(two, &["a=[4]"], &[input("x", &[3])]).unwrap_err(), ["E0316"]);
        assert!(choose(two, &["a=[3]"], &[input("x", &[3]), input("w", &[3])]).is_ok());
        // An input against an equation, and an expression position.
        assert_eq!(choose(&format!("{two}\nDIMS(a) = 4\n"), &[], &[input("x", &[3])]).unwrap_err(), ["E0317"]);
        let sum = "x[a+b] = RANDOM(0, 1, FLOAT)\ny[a,b] = x[a+b]\n";
        assert_eq!(choose(sum, &["a=[2]", "b=[2]"], &[input("x", &[9])]).unwrap_err(), ["E0317"]);
        let (cfg, _) = choose(sum, &["a=[2]"], &[input("x", &[9])]).unwrap();
        assert_eq!(cfg.get("b"), Some(&[8][..]));
        // Unknown and computed arrays.
        assert_eq!(choose(two, &[], &[input("q", &[3])]).unwrap_err(), ["E0401"]);
        assert_eq!(choose(two, &[], &[input("y", &[3])]).unwrap_err(), ["E0402"]);
    }

    #[test]
    fn explicit_dims_outside_draw_ranges_warn() {
        let p = "x[a] = RANDOM(0, 1, FLOAT)\ny[a] = x[a]\n\nRANK(a) IN [1,1]\nDIMS(a) IN [2,3]\n";
        assert_eq!(choose(p, &["a=[9]"], &[]).unwrap().1, ["W0301"]);
        assert_eq!(choose(p, &["a=[9,9]"], &[]).unwrap().1, ["W0301", "W0301"]);
        assert_eq!(choose(p, &[], &[input("x", &[9])]).unwrap().1, ["W0301"]);
        assert!(choose(p, &["a=[3]"], &[]).unwrap().1.is_empty());
        // An equation still binds.
        assert_eq!(choose(&format!("{p}DIMS(a) = 2\n"), &["a=[9]"], &[]).unwrap_err(), ["E0303"]);
        assert_eq!(choose(&format!("{p}RANK(a) = 1\n"), &["a=[9,9]"], &[]).unwrap_err(), ["E0303"]);
    }

    #[test]
    fn inference_errors() {
        let shift = "x[j] = RANDOM(0, 1, FLOAT)\ny[i] = x[i+2]\n";
        let (cfg, _) = choose(shift, &[], &[input("x", &[10])]).unwrap();
        assert_eq!(cfg.get("i"), Some(&[8][..]));
        assert_eq!(choose(shift, &[], &[input("x", &[1])]).unwrap_err(), ["E0313"]);
        assert_eq!(choose(&format!("{shift}\nDIMS(i) IN [1,3]\n"), &[], &[input("x", &[10])]).unwrap_err(), ["E0312"]);
        // A binding, or an equation, comes before inference.
        let (cfg, _) = choose(shift, &["i=[3]"], &[input("x", &[10])]).unwrap();
        assert_eq!(cfg.get("i"), Some(&[3][..]));
        let (cfg, _) = choose(&format!("{shift}\nDIMS(i) = 5\n"), &[], &[input("x", &[10])]).unwrap();
        assert_eq!((cfg.get("i"), &cfg.sources[1]), (Some(&[5][..]), &DimsSource::Constrained));
        assert_eq!(choose("x[p] = RANDOM(0, 1, FLOAT)\ny[i,j] = x[i+j] * x[j+i]\n", &[], &[]).unwrap_err(), ["E0311"]);
        // A derived eintup waits for the inferred one it reads.
        let (cfg, _) = choose(&format!("{shift}z[u] = 1\n\nDIMS(u) = DIMS(i) + 1\n"), &[], &[input("x", &[10])]).unwrap();
        assert_eq!(cfg.get("u"), Some(&[9][..]));
    }

    #[test]
    fn bindings_parse() {
        assert_eq!(parse_binding("a=[2, 3]"), Ok(Binding { name: "a".into(), dims: vec![2, 3] }));
        assert_eq!(parse_binding("r=[]"), Ok(Binding { name: "r".into(), dims: vec![] }));
        assert_eq!(parse_binding("z=[0]"), Ok(Binding { name: "z".into(), dims: vec![0] }));
        assert!(parse_binding("a=[-1]").is_err());
        assert!(parse_binding("a=2").is_err());
        assert!(parse_binding("=[2]").is_err());
        assert!(parse_binding("a=[x]").is_err());
    }
}
