//! Configurations: one rank and dims for every eintup (LANGUAGE.md s.6).
//!
//! Priority: bindings (`--bind NAME=[..]`), then constraints, then defaults
//! (rank 1, dims uniform in 1..=8). Ranks are enumerated as the cartesian
//! product over rank classes; dims are drawn per rank combination in
//! dependency order of the `DIMS(t) = expr` constraints, with a small
//! seeded PRNG so a seed always gives the same configurations. Draws that
//! violate a constraint or give a negative derived dim are discarded and
//! counted.

use crate::ir::et::dims::{broadcast, dims_refs, eval_static, EvalError};
use super::ranks::{eval_rank, RankSystem};
use super::{Program, Rel};
use crate::ir::et::EintupId;
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

/// One configuration: every eintup in module order with its dims.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Config {
    pub dims: Vec<(String, Vec<i64>)>,
}

impl Config {
    pub fn get(&self, name: &str) -> Option<&[i64]> {
        self.dims.iter().find(|(n, _)| n == name).map(|(_, d)| d.as_slice())
    }
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

/// Chooses one configuration: bindings, then constraints, then defaults;
/// deterministic in `seed`.
pub fn choose_config(prog: &Program, ranks: &RankSystem, binds: &[Binding], seed: u64) -> Result<Config, Vec<Diagnostic>> {
    let space = Space::new(prog, ranks, binds)?;
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

/// splitmix64: tiny, seedable, good enough to draw dims (array contents
/// use the interpreter's generator, LANGUAGE.md s.3).
#[derive(Clone, Debug)]
pub struct Rng(u64);

impl Rng {
    pub fn new(seed: u64) -> Rng {
        Rng(seed ^ 0x5EED_D1A5_0F_E1_u64)
    }
    pub fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }
    /// Uniform in `[lo, hi]` (inclusive); `lo` when `hi < lo`.
    pub fn range(&mut self, lo: i64, hi: i64) -> i64 {
        if hi <= lo {
            return lo;
        }
        let span = (hi as i128 - lo as i128 + 1) as u128;
        (lo as i128 + (self.next() as u128 % span) as i128) as i64
    }
}

/// Why a draw was discarded (counted per reason for the user).
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub struct Discard {
    pub reason: String,
    pub span: Option<Span>,
    /// The draw conflicted with a `--bind`.
    pub binding: bool,
}

/// Everything needed to draw configurations of one program.
pub struct Space<'a> {
    pub prog: &'a Program,
    pub ranks: &'a RankSystem,
    bound: Vec<Option<Vec<i64>>>,
    /// Eintups in dims dependency order.
    order: Vec<EintupId>,
    /// Per eintup: index of the deriving `DIMS(t) = expr` constraint.
    derive: Vec<Option<usize>>,
    /// Per eintup: the `DIMS(t) IN` constraint it is drawn from.
    draw_in: Vec<Option<usize>>,
}

impl<'a> Space<'a> {
    pub fn new(prog: &'a Program, ranks: &'a RankSystem, binds: &[Binding]) -> Result<Space<'a>, Vec<Diagnostic>> {
        let m = &prog.module;
        let n = m.eintups.len();
        let mut bound = vec![None; n];
        let mut diags = Vec::new();
        for b in binds {
            match m.eintup_by_name(&b.name) {
                Some(e) => bound[e] = Some(b.dims.clone()),
                None => diags.push(Diagnostic::error("E0302", format!("--bind names `{}`, which is not an eintup of this program", b.name))
                    .note(format!("eintups: {}", m.eintups.iter().map(|e| e.name.as_str()).collect::<Vec<_>>().join(", ")))),
            }
        }
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
        // Dependency order; bound eintups need nothing.
        let deps = |e: EintupId| -> Vec<EintupId> {
            let mut v = Vec::new();
            if bound[e].is_none() {
                if let Some(ci) = derive[e] {
                    if let Rel::Eq(x) = &prog.constraints[ci].rel {
                        dims_refs(x, &mut v);
                    }
                }
            }
            v
        };
        let mut order = Vec::new();
        let mut done = vec![false; n];
        loop {
            let mut progress = false;
            for e in 0..n {
                if !done[e] && deps(e).iter().all(|d| done[*d]) {
                    done[e] = true;
                    order.push(e);
                    progress = true;
                }
            }
            if !progress {
                break;
            }
        }
        let cyc: Vec<EintupId> = (0..n).filter(|e| !done[*e]).collect();
        if !cyc.is_empty() {
            let mut d = Diagnostic::error(
                "E0304",
                format!("dims constraints form a cycle through {}", cyc.iter().map(|e| format!("`{}`", m.eintups[*e].name)).collect::<Vec<_>>().join(", ")),
            );
            for (k, e) in cyc.iter().enumerate() {
                if let Some(ci) = derive[*e] {
                    let sp = prog.constraints[ci].span;
                    d = if k == 0 { d.at(sp, "depends on the others") } else { d.also(sp, "part of the cycle") };
                }
            }
            diags.push(d.note("dims constraints must form an acyclic dependency graph"));
        }
        if diags.is_empty() {
            Ok(Space { prog, ranks, bound, order, derive, draw_in })
        } else {
            Err(diags)
        }
    }

    /// Every rank vector (per eintup) allowed by the rank constraints and
    /// bindings, in lexicographic order of the free classes.
    pub fn rank_combos(&self) -> Result<Vec<Vec<usize>>, Vec<Diagnostic>> {
        let m = &self.prog.module;
        let rs = self.ranks;
        let nc = rs.classes.len();
        // Per class: allowed range, narrowed by bindings.
        let mut ranges: Vec<(i64, i64)> = Vec::with_capacity(nc);
        let mut diags = Vec::new();
        for (ci, cl) in rs.classes.iter().enumerate() {
            let mut r = cl.range.unwrap_or(if cl.derived.is_some() { (0, i64::MAX) } else { (1, 1) });
            let mut by: Option<EintupId> = None;
            for &e in &cl.members {
                let Some(b) = &self.bound[e] else { continue };
                let k = b.len() as i64;
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
                if cl.range.is_some() && (k < r.0 || k > r.1) {
                    let mut d = Diagnostic::error(
                        "E0303",
                        format!("--bind {}=.. has rank {k}, which violates the rank constraints (allowed: {}..={})", m.eintups[e].name, r.0, r.1),
                    );
                    for (j, (sp, l)) in rs.class_facts(ci).into_iter().enumerate() {
                        d = if j == 0 { d.at(sp, l) } else { d.also(sp, l) };
                    }
                    diags.push(d);
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
            return Err(vec![Diagnostic::error("E0206", format!("the rank constraints allow {total} rank combinations (limit {MAX_RANK_COMBOS})"))
                .note("narrow the `RANK(t) IN [lo, hi]` ranges")]);
        }
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
            let mut d = Diagnostic::error("E0207", "no combination of ranks satisfies the rank constraints");
            if let Some(ci) = failed {
                d = d.at(self.prog.constraints[ci].span, "cannot be satisfied");
            }
            if self.bound.iter().any(|b| b.is_some()) {
                d = d.note("with the ranks fixed by --bind");
            }
            return Err(vec![d]);
        }
        Ok(out)
    }

    /// Draws dims for one rank combination. `Ok(Err(discard))` when the
    /// draw violates a constraint.
    pub fn draw(&self, ranks: &[usize], rng: &mut Rng) -> Result<Vec<Vec<i64>>, Discard> {
        let m = &self.prog.module;
        let n = m.eintups.len();
        let mut dims: Vec<Option<Vec<i64>>> = vec![None; n];
        let disc = |reason: String, span: Option<Span>, binding: bool| Discard { reason, span, binding };
        for &e in &self.order {
            let r = ranks[e];
            let d = if let Some(b) = &self.bound[e] {
                b.clone()
            } else if let Some(ci) = self.derive[e] {
                let c = &self.prog.constraints[ci];
                let Rel::Eq(x) = &c.rel else { continue };
                match eval_static(x, &dims, ranks) {
                    Ok(v) => match broadcast(&v, r) {
                        Some(d) => {
                            if d.iter().any(|x| *x < 0) {
                                return Err(disc(format!("`{}` gave a negative dim", c.describe(m)), Some(c.span), false));
                            }
                            d
                        }
                        None => return Err(disc(format!("`{}` has a tuple of another rank", c.describe(m)), Some(c.span), false)),
                    },
                    Err(EvalError::DivZero(_)) => {
                        return Err(disc(format!("`{}` divides by zero", c.describe(m)), Some(c.span), false))
                    }
                    Err(_) => return Err(disc(format!("`{}` cannot be evaluated", c.describe(m)), Some(c.span), false)),
                }
            } else if let Some(ci) = self.draw_in[e] {
                let Rel::In { lo, hi } = self.prog.constraints[ci].rel else { continue };
                (0..r).map(|_| rng.range(lo, hi)).collect()
            } else {
                (0..r).map(|_| rng.range(DEFAULT_DIMS.0, DEFAULT_DIMS.1)).collect()
            };
            dims[e] = Some(d);
        }
        let dims: Vec<Vec<i64>> = dims.into_iter().map(|d| d.unwrap_or_default()).collect();
        let known: Vec<Option<Vec<i64>>> = dims.iter().cloned().map(Some).collect();
        // Every dims constraint must hold (the deriving ones hold unless the
        // eintup is bound; the others are checks).
        for (ci, c) in self.prog.constraints.iter().enumerate() {
            if c.subject != ConstraintSubject::Dims {
                continue;
            }
            let e = c.target;
            let binding = self.bound[e].is_some();
            // Skip only the constraint that produced the dims: an `IN` range
            // of a derived eintup is a check.
            let produced = self.derive[e] == Some(ci) || (self.derive[e].is_none() && self.draw_in[e] == Some(ci));
            if !binding && produced {
                continue;
            }
            let ok = match &c.rel {
                Rel::In { lo, hi } => dims[e].iter().all(|d| d >= lo && d <= hi),
                Rel::Eq(x) => match eval_static(x, &known, ranks) {
                    Ok(v) => broadcast(&v, dims[e].len()).as_deref() == Some(dims[e].as_slice()),
                    Err(_) => false,
                },
            };
            if !ok {
                return Err(disc(format!("violates `{}`", c.describe(m)), Some(c.span), binding));
            }
        }
        if let Some((_, _, f)) = self.ranks.check_deferred(ranks, &dims) {
            return Err(disc(format!("rank mismatch: {}", f.label), Some(f.span), false));
        }
        Ok(dims)
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
        let mut binding_conflict: Option<Discard> = None;
        for _ in 0..MAX_ATTEMPTS {
            let k = (rng.next() % combos.len() as u64) as usize;
            match self.draw(&combos[k], &mut rng) {
                Ok(d) => return Ok(d),
                Err(x) => {
                    if x.binding {
                        binding_conflict = Some(x.clone());
                    }
                    last = Some(x);
                }
            }
        }
        let x = binding_conflict.or(last);
        let (code, msg) = match &x {
            Some(x) if x.binding => ("E0303", format!("the --bind values violate a constraint: {}", x.reason)),
            Some(x) => ("E0308", format!("no valid configuration found in {MAX_ATTEMPTS} draws; last draw {}", x.reason)),
            None => ("E0308", "no valid configuration found".to_string()),
        };
        let mut d = Diagnostic::error(code, msg);
        if let Some(Discard { span: Some(sp), .. }) = x {
            d = d.at(sp, "this constraint");
        }
        Err(vec![d])
    }

    /// Names and dims in module order.
    pub fn config(&self, dims: &[Vec<i64>]) -> Config {
        Config { dims: self.prog.module.eintups.iter().zip(dims).map(|(e, d)| (e.name.clone(), d.clone())).collect() }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

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

    #[test]
    fn rng_is_deterministic_and_in_range() {
        let (mut a, mut b) = (Rng::new(7), Rng::new(7));
        for _ in 0..100 {
            let x = a.range(3, 5);
            assert_eq!(x, b.range(3, 5));
            assert!((3..=5).contains(&x));
        }
        assert_eq!(a.range(4, 4), 4);
    }
}
