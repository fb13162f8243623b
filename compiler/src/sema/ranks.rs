//! Rank inference (pass `infer-ranks`): a union-find over eintups.
//!
//! Every equation carries its *reason* (a span and a label), so a
//! contradiction is reported as the chain of facts that forced it. Facts:
//! eintups meeting in one index expression, expressions at the same
//! position of one array, DIMS meeting in one constraint expression, `t`
//! vs a tuple-valued `DIMS(t) = expr`, a `:` slot's eintup (rank 1),
//! `DIMS(l)[t]` (t rank 1), `FLAT` (rank 1), and `RANK(t)` constraints.
//! Equations whose rank is only known with dims (a slice's rank is a dim of
//! its slot eintup) or is a sum of ranks (`DIMS(a, b)`) are *deferred* and
//! checked once a configuration is chosen.

use super::rank_limit::{rank_limit_error, RankLimit};
use super::{Program, Rel};
use crate::ir::et::*;
use et_grammar::ast::ConstraintSubject;
use et_grammar::{Diagnostic, Span};
use std::collections::VecDeque;

/// The rank an index expression has, symbolically.
#[derive(Clone, Debug, PartialEq)]
pub enum Term {
    /// Broadcasts to its partner (literals, RANK).
    Scalar,
    Fixed(usize),
    Var(EintupId),
    /// `DIMS(a, b, ..)`: sum of ranks, plus one per literal in the list
    /// (`DIMS(0, stride, 0)` has rank `RANK(stride) + 2`).
    Sum(Vec<EintupId>, usize),
    /// A slice: rank = the only dim of this (slot) eintup.
    SliceDim(EintupId),
}

#[derive(Clone, Debug, PartialEq)]
pub struct Fact {
    pub span: Span,
    pub label: String,
}

#[derive(Clone, Debug)]
struct RangeFact {
    e: EintupId,
    lo: i64,
    hi: i64,
    fact: Fact,
    /// A `RANK(t) IN` range: it says what is drawn, so an explicit binding
    /// or an input array may leave it (with a warning).
    soft: bool,
}

#[derive(Clone, Debug, PartialEq)]
pub struct Class {
    pub members: Vec<EintupId>,
    /// Allowed ranks (inclusive); `None` when nothing constrains the class
    /// (default rank 1).
    pub range: Option<(i64, i64)>,
    /// The ranks the equations alone allow (`RANK(t) = n`, structural
    /// facts such as a `:` slot's rank 1), without the `RANK(t) IN` draw
    /// ranges; `None` when no equation constrains the class. A binding or
    /// an input array outside `range` but inside `hard` is a warning.
    pub hard: Option<(i64, i64)>,
    /// Index into `Program::constraints` of a `RANK(t) = expr` deriving it.
    pub derived: Option<usize>,
    /// Further `RANK(t) = expr` constraints to check after derivation.
    pub checks: Vec<usize>,
}

/// The solved rank system of a program.
#[derive(Clone, Debug)]
pub struct RankSystem {
    pub class_of: Vec<usize>,
    pub classes: Vec<Class>,
    /// Derived classes in evaluation order.
    pub derived_order: Vec<usize>,
    pub deferred: Vec<(Term, Term, Fact)>,
    edges: Vec<(EintupId, EintupId, Fact)>,
    facts: Vec<RangeFact>,
}

struct Builder<'a> {
    m: &'a Module,
    parent: Vec<usize>,
    edges: Vec<(EintupId, EintupId, Fact)>,
    facts: Vec<RangeFact>,
    deferred: Vec<(Term, Term, Fact)>,
}

impl<'a> Builder<'a> {
    fn find(&mut self, x: usize) -> usize {
        let mut r = x;
        while self.parent[r] != r {
            r = self.parent[r];
        }
        let mut y = x;
        while self.parent[y] != r {
            let n = self.parent[y];
            self.parent[y] = r;
            y = n;
        }
        r
    }

    fn equate(&mut self, a: &Term, b: &Term, fact: &Fact) {
        match (a, b) {
            (Term::Scalar, _) | (_, Term::Scalar) => {}
            (Term::Var(x), Term::Var(y)) => {
                let (rx, ry) = (self.find(*x), self.find(*y));
                self.edges.push((*x, *y, fact.clone()));
                if rx != ry {
                    self.parent[rx] = ry;
                }
            }
            (Term::Var(x), Term::Fixed(n)) | (Term::Fixed(n), Term::Var(x)) => {
                self.facts.push(RangeFact { e: *x, lo: *n as i64, hi: *n as i64, fact: fact.clone(), soft: false })
            }
            (Term::Fixed(p), Term::Fixed(q)) if p == q => {}
            _ => self.deferred.push((a.clone(), b.clone(), fact.clone())),
        }
    }

    /// The rank term of an index expression; equates the ranks of the
    /// non-scalar operands of every operator on the way.
    fn term(&mut self, e: &IndexExpr) -> Term {
        match &e.kind {
            IndexKind::Var(t) => Term::Var(*t),
            IndexKind::Lit(_) | IndexKind::Rank(_) => Term::Scalar,
            IndexKind::Dims(l) => {
                let ts: Vec<EintupId> = l.eintups().collect();
                match (&ts[..], l.literals()) {
                    ([t], 0) => Term::Var(*t),
                    ([], n) => Term::Fixed(n),
                    (_, n) => Term::Sum(ts, n),
                }
            }
            IndexKind::Flat(v) => {
                for x in v {
                    self.term(x);
                }
                Term::Fixed(1)
            }
            IndexKind::Slice { array, indices } => {
                self.positions(*array, indices, e.span);
                let pos = indices.iter().position(|s| matches!(s, IndexSlot::Colon(_)));
                match pos.and_then(|k| self.m.arrays[*array].positions.get(k)) {
                    Some(Position { expr: IndexExpr { kind: IndexKind::Var(c), .. }, .. }) => Term::SliceDim(*c),
                    _ => Term::Scalar,
                }
            }
            IndexKind::Bin(_, a, b) => {
                let (ta, tb) = (self.term(a), self.term(b));
                let fact = Fact { span: e.span, label: "operands of one index expression have one rank".into() };
                self.equate(&ta, &tb, &fact);
                // The expression's rank is either operand's; an eintup
                // represents it best, since equations between eintups are
                // unions (in `DIMS(0,s,0)*q` the position gets `q`'s class,
                // while `RANK(s) + 2` is only checked per configuration).
                match (&ta, &tb) {
                    (Term::Scalar, _) | (Term::Fixed(_) | Term::Sum(..) | Term::SliceDim(_), Term::Var(_)) => tb,
                    _ => ta,
                }
            }
        }
    }

    /// Equations of one access against the array's signature.
    fn positions(&mut self, array: ArrayId, slots: &[IndexSlot], _span: Span) {
        let arr = &self.m.arrays[array];
        for (k, s) in slots.iter().enumerate() {
            let Some(p) = arr.positions.get(k) else { continue };
            match s {
                IndexSlot::Colon(sp) => {
                    if let IndexKind::Var(c) = p.expr.kind {
                        let f = Fact { span: *sp, label: format!("the `:` slot's eintup `{}` has rank 1", self.m.eintups[c].name) };
                        self.equate(&Term::Var(c), &Term::Fixed(1), &f);
                    }
                }
                IndexSlot::Expr(x) => {
                    let t = self.term(x);
                    if std::ptr::eq(x, &p.expr) || x.span == p.expr.span {
                        continue;
                    }
                    let sig = match self.term(&p.expr) {
                        // A scalar signature (`x[0]`, `x[RANK(t)]`) defines
                        // a position of one component (DIMS(n) = [n+1],
                        // docs/language.md s.5): other indices there have rank 1
                        // (or are scalars, which broadcast).
                        Term::Scalar => Term::Fixed(1),
                        t => t,
                    };
                    let f = Fact { span: x.span, label: format!("position {} of `{}`, equal in rank to its signature", k + 1, arr.name) };
                    self.equate(&t, &sig, &f);
                }
            }
        }
    }
}

/// Collects every rank equation of a program and solves it.
pub fn infer(p: &Program) -> Result<RankSystem, Vec<Diagnostic>> {
    let m = &p.module;
    let n = m.eintups.len();
    let mut b = Builder { m, parent: (0..n).collect(), edges: vec![], facts: vec![], deferred: vec![] };
    // A rank the module already states (`?r` in printed IR read back, where
    // the constraints that proved it are not printed) is a fact like a
    // `RANK(t) = r` constraint.
    for (id, e) in m.eintups.iter().enumerate() {
        if let Some(r) = e.rank {
            let fact = Fact { span: e.span, label: format!("the module gives `{}` rank {r}", e.name) };
            b.facts.push(RangeFact { e: id, lo: r as i64, hi: r as i64, fact, soft: false });
        }
    }
    for a in &m.arrays {
        for (k, p) in a.positions.iter().enumerate() {
            let t = b.term(&p.expr);
            // So is a position's stated rank (`?3` read back): the rank of
            // its expression.
            if let (Some(r), false) = (p.rank, matches!(t, Term::Scalar)) {
                let fact = Fact { span: p.expr.span, label: format!("the module gives position {} of `{}` rank {r}", k + 1, a.name) };
                b.equate(&t, &Term::Fixed(r), &fact);
            }
        }
    }
    for st in &m.stmts {
        b.positions(st.array, &st.indices, st.span);
        for op in &st.ops {
            match &op.kind {
                OpKind::Read { array, indices } => b.positions(*array, indices, op.span),
                OpKind::DimsAt(_, t) => {
                    let tt = b.term(t);
                    let f = Fact { span: t.span, label: "the index of `DIMS(..)[t]` has rank 1".into() };
                    b.equate(&tt, &Term::Fixed(1), &f);
                }
                _ => {}
            }
        }
    }
    let mut diags = Vec::new();
    let mut derived_of: Vec<(EintupId, usize)> = Vec::new();
    let mut checks: Vec<(EintupId, usize)> = Vec::new();
    for (ci, c) in p.constraints.iter().enumerate() {
        let fact = Fact { span: c.span, label: format!("constraint `{}`", c.describe(m)) };
        match (c.subject, &c.rel) {
            (ConstraintSubject::Rank, Rel::In { lo, hi }) => b.facts.push(RangeFact { e: c.target, lo: *lo, hi: *hi, fact, soft: true }),
            (ConstraintSubject::Rank, Rel::Eq(e)) => {
                if let IndexKind::Rank(l) = &e.kind {
                    if let [u] = l[..] {
                        // `RANK(t) = RANK(u)` says the two have one rank: a
                        // union like any other rank equation, never a rule
                        // deriving a class from itself (the original tool's
                        // conv_same_v1.et states such redundant lines).
                        b.equate(&Term::Var(c.target), &Term::Var(u), &fact);
                        continue;
                    }
                }
                if has_rank_ref(e) {
                    if derived_of.iter().any(|(t, _)| *t == c.target) {
                        checks.push((c.target, ci));
                    } else {
                        derived_of.push((c.target, ci));
                    }
                } else {
                    match eval_rank(e, &[]) {
                        Some(v) if v >= 0 => b.facts.push(RangeFact { e: c.target, lo: v, hi: v, fact, soft: false }),
                        _ => diags.push(
                            Diagnostic::error("E0204", "a rank must be a non-negative integer").at(e.span, "evaluates to a negative rank or divides by zero"),
                        ),
                    }
                }
            }
            (ConstraintSubject::Dims, Rel::Eq(e)) => {
                let t = b.term(e);
                let f = Fact { span: c.span, label: format!("`{}` equates ranks", c.describe(m)) };
                b.equate(&Term::Var(c.target), &t, &f);
            }
            (ConstraintSubject::Dims, Rel::In { .. }) => {}
        }
    }
    // A rank fact above the maximum (`RANK(t) = 4294967296`, a range
    // reaching past it, `?100` in printed IR) is refused here, before any
    // configuration allocates dims for it.
    for f in &b.facts {
        if f.hi > MAX_RANK as i64 {
            diags.push(rank_limit_error(&format!("{} allows rank {}", f.fact.label, f.hi), f.fact.span));
        }
    }
    // Classes: dense ids in order of first member.
    let mut class_of = vec![usize::MAX; n];
    let mut classes: Vec<Class> = Vec::new();
    for e in 0..n {
        let r = b.find(e);
        if class_of[r] == usize::MAX {
            class_of[r] = classes.len();
            classes.push(Class { members: vec![], range: None, hard: None, derived: None, checks: vec![] });
        }
        class_of[e] = class_of[r];
        classes[class_of[e]].members.push(e);
    }
    let sys_edges = b.edges.clone();
    // Intersect the range facts of every class; an empty intersection is a
    // contradiction explained by the two facts and the chain between them.
    for (ci, class) in classes.iter_mut().enumerate() {
        let fs: Vec<&RangeFact> = b.facts.iter().filter(|f| class_of[f.e] == ci).collect();
        if fs.is_empty() {
            continue;
        }
        let lo_f = fs.iter().max_by_key(|f| f.lo).copied();
        let hi_f = fs.iter().min_by_key(|f| f.hi).copied();
        let (Some(lo_f), Some(hi_f)) = (lo_f, hi_f) else { continue };
        if lo_f.lo > hi_f.hi {
            let pinned = lo_f.lo == lo_f.hi && hi_f.lo == hi_f.hi;
            let (code, what) = if pinned { ("E0201", "contradictory ranks") } else { ("E0202", "rank ranges that cannot meet") };
            let name = |e: EintupId| m.eintups[e].name.clone();
            let msg = if lo_f.e == hi_f.e {
                format!("rank mismatch: `{}` is given {what}", name(lo_f.e))
            } else {
                format!("rank mismatch: `{}` and `{}` must have equal ranks, but are given {what}", name(lo_f.e), name(hi_f.e))
            };
            let mut d = Diagnostic::error(code, msg)
                .at(lo_f.fact.span, format!("{}: RANK({}) >= {}", lo_f.fact.label, name(lo_f.e), lo_f.lo))
                .also(hi_f.fact.span, format!("{}: RANK({}) <= {}", hi_f.fact.label, name(hi_f.e), hi_f.hi));
            for (x, y, f) in path(&sys_edges, n, lo_f.e, hi_f.e) {
                d = d.also(f.span, format!("{} (`{}` ~ `{}`)", f.label, name(x), name(y)));
            }
            diags.push(d.note("ranks are equated by the labelled facts, in order"));
            continue;
        }
        class.range = Some((lo_f.lo, hi_f.hi));
        let hard: Vec<&&RangeFact> = fs.iter().filter(|f| !f.soft).collect();
        if let (Some(lo), Some(hi)) = (hard.iter().map(|f| f.lo).max(), hard.iter().map(|f| f.hi).min()) {
            class.hard = Some((lo, hi));
        }
    }
    for (t, ci) in &derived_of {
        let cl = class_of[*t];
        if classes[cl].derived.is_none() {
            classes[cl].derived = Some(*ci);
        } else {
            classes[cl].checks.push(*ci);
        }
    }
    for (t, ci) in checks {
        classes[class_of[t]].checks.push(ci);
    }
    // Evaluation order of derived classes; a cycle is an error.
    let mut order = Vec::new();
    let mut done: Vec<bool> = classes.iter().map(|c| c.derived.is_none()).collect();
    loop {
        let mut progress = false;
        for cl in 0..classes.len() {
            if done[cl] {
                continue;
            }
            let Some(ci) = classes[cl].derived else { continue };
            let Rel::Eq(e) = &p.constraints[ci].rel else { continue };
            let mut refs = Vec::new();
            rank_refs(e, &mut refs);
            if refs.iter().all(|r| done[class_of[*r]]) {
                done[cl] = true;
                order.push(cl);
                progress = true;
            }
        }
        if !progress {
            break;
        }
    }
    if let Some(cl) = (0..classes.len()).find(|c| !done[*c]) {
        let mut d = Diagnostic::error("E0203", "rank constraints form a cycle");
        for c2 in (0..classes.len()).filter(|c| !done[*c]) {
            if let Some(ci) = classes[c2].derived {
                d = if c2 == cl { d.at(p.constraints[ci].span, "part of the cycle") } else { d.also(p.constraints[ci].span, "part of the cycle") };
            }
        }
        diags.push(d);
    }
    if !diags.is_empty() {
        return Err(diags);
    }
    // An array or statement over the maximum rank with the smallest ranks
    // the classes allow is over it in every configuration (and the ranks
    // fixed here go into the module, which the verifier checks).
    let least: Vec<usize> = (0..n)
        .map(|e| {
            let c = &classes[class_of[e]];
            match (c.derived, c.range) {
                (Some(_), _) => 0,
                (None, Some((lo, _))) => usize::try_from(lo).unwrap_or(0),
                (None, None) => 1,
            }
        })
        .collect();
    if let Some(d) = RankLimit::new(m, &least).violation(m, &least) {
        return Err(vec![d]);
    }
    Ok(RankSystem { class_of, classes, derived_order: order, deferred: b.deferred, edges: b.edges, facts: b.facts })
}

/// The edges of a shortest chain of equations from `a` to `b`.
fn path(edges: &[(EintupId, EintupId, Fact)], n: usize, a: EintupId, b: EintupId) -> Vec<(EintupId, EintupId, Fact)> {
    let mut prev: Vec<Option<(usize, usize)>> = vec![None; n];
    let mut seen = vec![false; n];
    let mut q = VecDeque::from([a]);
    seen[a] = true;
    while let Some(x) = q.pop_front() {
        if x == b {
            break;
        }
        for (ei, (u, v, _)) in edges.iter().enumerate() {
            let y = if *u == x {
                *v
            } else if *v == x {
                *u
            } else {
                continue;
            };
            if !seen[y] {
                seen[y] = true;
                prev[y] = Some((x, ei));
                q.push_back(y);
            }
        }
    }
    let mut out = Vec::new();
    let mut cur = b;
    while let Some((p, ei)) = prev[cur] {
        out.push((p, cur, edges[ei].2.clone()));
        cur = p;
    }
    out.reverse();
    out
}

fn has_rank_ref(e: &IndexExpr) -> bool {
    let mut v = Vec::new();
    rank_refs(e, &mut v);
    !v.is_empty() || matches!(e.kind, IndexKind::Rank(_))
}

fn rank_refs(e: &IndexExpr, out: &mut Vec<EintupId>) {
    match &e.kind {
        IndexKind::Rank(l) => out.extend(l),
        IndexKind::Bin(_, a, b) => {
            rank_refs(a, out);
            rank_refs(b, out);
        }
        _ => {}
    }
}

/// Evaluates a rank expression given the ranks of eintups (empty slice: no
/// RANK references allowed). `None` on division by zero or overflow.
pub fn eval_rank(e: &IndexExpr, ranks: &[usize]) -> Option<i64> {
    match &e.kind {
        IndexKind::Lit(n) => Some(*n),
        IndexKind::Rank(l) => l.iter().map(|t| ranks.get(*t).map(|r| *r as i64)).sum(),
        IndexKind::Bin(op, a, b) => crate::ir::et::dims::scalar_op(*op, eval_rank(a, ranks)?, eval_rank(b, ranks)?),
        _ => None,
    }
}

impl RankSystem {
    /// The facts constraining a class, for messages (a binding that
    /// contradicts them, say).
    /// The rank of `e` when its class allows exactly one value.
    pub fn fixed_rank(&self, e: EintupId) -> Option<usize> {
        let c = &self.classes[*self.class_of.get(e)?];
        match c.range {
            Some((lo, hi)) if lo == hi && c.derived.is_none() => usize::try_from(lo).ok(),
            _ => None,
        }
    }

    pub fn class_count(&self) -> usize {
        self.classes.len()
    }

    pub fn class_facts(&self, class: usize) -> Vec<(Span, String)> {
        self.facts.iter().filter(|f| self.class_of[f.e] == class).map(|f| (f.fact.span, f.fact.label.clone())).collect()
    }

    /// The facts behind [`Class::hard`]: the class's equations, without
    /// its `RANK(t) IN` draw ranges.
    pub fn class_hard_facts(&self, class: usize) -> Vec<(Span, String)> {
        self.facts.iter().filter(|f| self.class_of[f.e] == class && !f.soft).map(|f| (f.fact.span, f.fact.label.clone())).collect()
    }

    /// The `RANK(t) IN` draw ranges of a class, for warnings.
    pub fn class_soft_facts(&self, class: usize) -> Vec<(Span, String)> {
        self.facts.iter().filter(|f| self.class_of[f.e] == class && f.soft).map(|f| (f.fact.span, f.fact.label.clone())).collect()
    }

    /// The chain of equations explaining why `a` and `b` share a rank.
    pub fn explain(&self, a: EintupId, b: EintupId) -> Vec<(Span, String)> {
        path(&self.edges, self.class_of.len(), a, b).into_iter().map(|(_, _, f)| (f.span, f.label)).collect()
    }

    /// Checks the deferred equations for full ranks and dims; returns the
    /// first that fails.
    pub fn check_deferred(&self, ranks: &[usize], dims: &[Vec<i64>]) -> Option<&(Term, Term, Fact)> {
        let val = |t: &Term| -> Option<Option<i64>> {
            Some(match t {
                Term::Scalar => None,
                Term::Fixed(n) => Some(*n as i64),
                Term::Var(e) => Some(*ranks.get(*e)? as i64),
                Term::Sum(l, lits) => Some(l.iter().map(|e| ranks.get(*e).map(|r| *r as i64)).sum::<Option<i64>>()? + *lits as i64),
                Term::SliceDim(c) => {
                    let d = dims.get(*c)?;
                    if d.len() != 1 {
                        return Some(Some(-1));
                    }
                    Some(d[0])
                }
            })
        };
        self.deferred.iter().find(|(a, b, _)| match (val(a), val(b)) {
            (Some(Some(x)), Some(Some(y))) => x != y,
            _ => false,
        })
    }
}
