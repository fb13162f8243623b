//! Symbolic dims for a dynamic build (`eintup build --dynamic`,
//! docs/dynamic-shapes.md sections 1-2): the ranks fixed, and every
//! eintup's dims as index expressions over dim symbols instead of numbers.
//!
//! The same schedule as a static configuration ([`Space`]) decides where
//! each eintup's dims come from; only the values differ:
//! - bound (`--bind`): constants;
//! - drawn or of an input's signature: one fresh symbol per component
//!   (`batch.0`), given at run time by the input arrays' shapes or a
//!   run-time `--bind`;
//! - constrained (`DIMS(t) = expr`): the expression over the symbols, so
//!   that the compiler sees `opos.0 = ipos.0 - fpos.0 + 1`, not a number;
//! - inferred (range inference): the same bound as [`infer_dims::infer`]
//!   over symbolic extents, per component the least `(D - max(e, 0)) //^ c`
//!   over its accesses, with a run-time check that `D - max(e, 0)` is not
//!   negative (the static rules refuse that, E0313); E0321 where an
//!   access's coefficient is not a positive constant.
//!
//! Array shapes follow from the signatures' index expressions
//! ([`position_dims`]): exact for the monotone expressions first mentions
//! use (sums, products with non-negative factors, division and modulo by
//! run-time constants, `FLAT`), E0321 otherwise.

use super::config::{DimsSource, Space};
use super::infer_dims::Access;
use super::Program;
pub use crate::ir::et::symbolic::SymCheck;
use crate::ir::et::symbolic::SymbolicDims;
use crate::ir::et::{dims as et_dims, ArrayId, DimsList, EintupId, IndexExpr, IndexKind, IndexOp, Module};
use crate::ir::loops::{Dim, IBin, IExpr};
use et_grammar::{Diagnostic, Span};

/// One rank combination with symbolic dims: what `specialize{dynamic}`
/// decided, with why (`sources`); the module carries the dims themselves
/// ([`Module::symbolic`]).
#[derive(Clone, Debug, PartialEq)]
pub struct SymbolicConfig {
    /// Every eintup's rank (module order).
    pub ranks: Vec<usize>,
    /// The symbols, every eintup's dims over them and the run-time checks.
    pub dims: SymbolicDims,
    /// How each eintup's dims are determined (module order).
    pub sources: Vec<DimsSource>,
}

/// The dims of every signature position of array `a` of `m`, at `dims`.
pub fn array_positions(m: &Module, dims: &SymbolicDims, a: ArrayId) -> Result<Vec<Vec<IExpr>>, Diagnostic> {
    let arr = &m.arrays[a];
    let at = |(k, p): (usize, &crate::ir::et::Position)| {
        position_dims(&p.expr, &dims.eintups).map_err(|err| match err {
            PositionError::Static(err) => super::specialize::bound_diagnostic(err, &arr.name, k, p.expr.span),
            PositionError::NotSymbolic(sp) => not_symbolic(sp),
        })
    };
    arr.positions.iter().enumerate().map(at).collect()
}

/// Fixes the ranks (`rank_args`: `NAME=R` from `--rank`, else bindings,
/// constraints and rank inference must leave one combination) and gives
/// every eintup symbolic dims.
pub fn symbolic_config(prog: &Program, space: &Space, rank_args: &[(String, usize)]) -> Result<SymbolicConfig, Vec<Diagnostic>> {
    let m = &prog.module;
    let mut diags = Vec::new();
    let mut want: Vec<Option<usize>> = vec![None; m.eintups.len()];
    for (name, r) in rank_args {
        match m.eintup_by_name(name) {
            Some(e) => want[e] = Some(*r),
            None => diags.push(Diagnostic::error("E0302", format!("--rank names `{name}`, which is not an eintup of this program"))),
        }
    }
    if !diags.is_empty() {
        return Err(diags);
    }
    let all = space.rank_combos()?;
    let combos: Vec<&Vec<usize>> = all.iter().filter(|c| want.iter().zip(c.iter()).all(|(w, r)| w.is_none_or(|w| w == *r))).collect();
    let ranks = match combos.as_slice() {
        [one] => (*one).clone(),
        [] => {
            let asked: Vec<String> = rank_args.iter().map(|(n, r)| format!("{n}={r}")).collect();
            return Err(vec![Diagnostic::error("E0320", format!("no rank combination of the program has --rank {}", asked.join(" --rank ")))
                .note("the constraints and --bind values allow other ranks; `eintup shapes FILE` lists them")]);
        }
        several => {
            // Name the first eintup whose rank is still open.
            let open = (0..m.eintups.len()).find(|&e| several.iter().any(|c| c[e] != several[0][e])).unwrap_or(0);
            let mut rs: Vec<usize> = several.iter().map(|c| c[open]).collect();
            rs.sort_unstable();
            rs.dedup();
            let e = &m.eintups[open];
            let list = rs.iter().map(|r| r.to_string()).collect::<Vec<_>>().join(", ");
            return Err(vec![Diagnostic::error(
                "E0320",
                format!("the rank of `{}` is open (it may be {list}): a dynamic bundle has one rank per eintup", e.name),
            )
            .at(e.span, "rank not fixed")
            .note(format!("fix it with --rank {}=R (or --bind, or a RANK({}) = .. constraint)", e.name, e.name))]);
        }
    };
    let n = m.eintups.len();
    let mut dims: Vec<Option<Vec<IExpr>>> = vec![None; n];
    let mut symbols = Vec::new();
    let mut checks = Vec::new();
    for &e in space.order() {
        let t = &m.eintups[e];
        let d = match &space.sources()[e] {
            DimsSource::Bound => space.bound(e).unwrap_or_default().iter().map(|&v| IExpr::Const(v)).collect(),
            DimsSource::Input(_) | DimsSource::Drawn => (0..ranks[e])
                .map(|k| {
                    symbols.push(Dim { name: format!("{}.{k}", t.name) });
                    IExpr::Sym(symbols.len() - 1)
                })
                .collect(),
            DimsSource::Constrained => {
                let derived = space.derive(e).map(|ci| &prog.constraints[ci]);
                let Some((c, super::Rel::Eq(x))) = derived.map(|c| (c, &c.rel)) else {
                    return Err(vec![Diagnostic::error("E0321", format!("`{}` is constrained, but no equation gives it", t.name))]);
                };
                let rule = c.describe(m);
                let mut divisors = Vec::new();
                let v = eval(x, &dims, &ranks, &mut divisors)
                    .map_err(|sp| vec![Diagnostic::error("E0321", format!("`{rule}` cannot be computed from symbolic dims")).at(sp, "here").note(BIND_HINT)])?;
                let d = broadcast(v, ranks[e]).ok_or_else(|| {
                    vec![Diagnostic::error("E0321", format!("`{rule}` gives a tuple of another rank than {}", ranks[e])).at(c.span, "this equation")]
                })?;
                // The static rules discard a negative derived dim and a
                // zero divisor; at run time these checks refuse them.
                for q in divisors {
                    checks.push(SymCheck { expr: q, min: 1, about: e, rule: rule.clone() });
                }
                for x in d.iter().filter(|x| !x.is_non_negative()) {
                    checks.push(SymCheck { expr: x.clone(), min: 0, about: e, rule: rule.clone() });
                }
                d
            }
            DimsSource::Inferred => {
                let known: Vec<Vec<IExpr>> = dims.iter().map(|d| d.clone().unwrap_or_default()).collect();
                let mut d = Vec::new();
                for k in 0..ranks[e] {
                    let comp = infer_component(m, space.used(e), k, &ranks, &known, e, &mut checks).map_err(|sp| {
                        vec![Diagnostic::error("E0321", format!("the dims of `{}` are inferred from an access a dynamic build cannot bound", t.name))
                            .at(sp, "this access")
                            .note(format!("give them: --bind {}=[..] at build time, or a `DIMS({}) = ..` constraint", t.name, t.name))]
                    })?;
                    d.push(comp.unwrap_or_else(|| {
                        // No access bounds this component: drawn, so given.
                        symbols.push(Dim { name: format!("{}.{k}", t.name) });
                        IExpr::Sym(symbols.len() - 1)
                    }));
                }
                d
            }
        };
        dims[e] = Some(d);
    }
    let eintups: Vec<Vec<IExpr>> = dims.into_iter().map(Option::unwrap_or_default).collect();
    Ok(SymbolicConfig { ranks, dims: SymbolicDims { symbols, eintups, checks }, sources: space.sources().to_vec() })
}

/// Component `k` of inferred eintup `about`: the least
/// bound its accesses give, as [`infer_dims::infer`] computes it, over
/// symbolic extents; `None` when no access bounds it. Pushes the check
/// that each bound's room is not negative.
fn infer_component(
    m: &Module,
    accs: &[Access],
    k: usize,
    ranks: &[usize],
    dims: &[Vec<IExpr>],
    about: EintupId,
    checks: &mut Vec<SymCheck>,
) -> Result<Option<IExpr>, Span> {
    let rank = ranks[about];
    let at = |v: Vec<IExpr>, sp: Span| -> Result<IExpr, Span> {
        match v.len() {
            1 => Ok(v[0].clone()),
            n if n == rank => Ok(v[k].clone()),
            _ => Err(sp),
        }
    };
    let mut best: Option<IExpr> = None;
    for a in accs {
        let Some(pos) = m.arrays.get(a.array).and_then(|arr| arr.positions.get(a.position)) else { continue };
        let extent = at(position_dims(&pos.expr, dims).map_err(|_| a.span)?, a.span)?;
        // max(e, 0): one below e's extent, at least 0.
        let reach = match a.rest() {
            None => IExpr::Const(0),
            Some(r) => {
                IExpr::fold(IBin::Max, IExpr::fold(IBin::Sub, at(position_dims(r, dims).map_err(|_| a.span)?, a.span)?, IExpr::Const(1)), IExpr::Const(0))
            }
        };
        let coef = match a.coef() {
            None => IExpr::Const(1),
            Some(c) => match eval(c, &dims.iter().cloned().map(Some).collect::<Vec<_>>(), ranks, &mut Vec::new()).map_err(|_| a.span)? {
                SymVal::Scalar(v) => v,
                SymVal::Tuple(v) => at(v, a.span)?,
            },
        };
        match coef {
            IExpr::Const(c) if c > 0 => {}
            // The static rule skips a coefficient <= 0.
            IExpr::Const(_) => continue,
            _ => return Err(a.span),
        }
        let room = IExpr::fold(IBin::Sub, extent, reach);
        if !room.is_non_negative() {
            checks.push(SymCheck { expr: room.clone(), min: 0, about, rule: format!("range inference from {}", a.describe(m)) });
        }
        let dim = IExpr::fold(IBin::CeilDiv, room, coef);
        best = Some(match best {
            None => dim,
            Some(b) => IExpr::fold(IBin::Min, b, dim),
        });
    }
    Ok(best)
}

const BIND_HINT: &str = "bind the eintups it reads at build time (--bind NAME=[..])";

pub fn index_bin(op: IndexOp) -> IBin {
    match op {
        IndexOp::Add => IBin::Add,
        IndexOp::Sub => IBin::Sub,
        IndexOp::Mul => IBin::Mul,
        IndexOp::FloorDiv => IBin::FloorDiv,
        IndexOp::CeilDiv => IBin::CeilDiv,
        IndexOp::Mod => IBin::Mod,
    }
}

/// A symbolic value: a scalar broadcasts against a tuple.
#[derive(Clone, Debug)]
enum SymVal {
    Scalar(IExpr),
    Tuple(Vec<IExpr>),
}

fn broadcast(v: SymVal, rank: usize) -> Option<Vec<IExpr>> {
    match v {
        SymVal::Scalar(s) => Some(vec![s; rank]),
        SymVal::Tuple(t) if t.len() == rank => Some(t),
        SymVal::Tuple(_) => None,
    }
}

/// `DIMS(l)` over symbolic dims, `dims_of(t)` an eintup's (`None` where
/// one is not known).
pub fn dims_list(l: &DimsList, dims_of: impl Fn(EintupId) -> Option<Vec<IExpr>>) -> Option<Vec<IExpr>> {
    l.value_with(dims_of, |n| Some(IExpr::Const(n.checked_add(1)?)))
}

/// A constraint's right side (`Lit`, `Dims`, `Rank`, `Bin`) over the dims
/// known so far, collecting the symbolic non-negative divisors (which
/// must not be zero); the span of what cannot be computed.
fn eval(e: &IndexExpr, dims: &[Option<Vec<IExpr>>], ranks: &[usize], divisors: &mut Vec<IExpr>) -> Result<SymVal, Span> {
    Ok(match &e.kind {
        IndexKind::Lit(n) => SymVal::Scalar(IExpr::Const(*n)),
        IndexKind::Rank(l) => SymVal::Scalar(IExpr::Const(l.iter().map(|t| ranks.get(*t).copied().unwrap_or(0) as i64).sum())),
        IndexKind::Dims(l) => SymVal::Tuple(dims_list(l, |t| dims.get(t).cloned().flatten()).ok_or(e.span)?),
        IndexKind::Bin(op, a, b) => {
            let (x, y) = (eval(a, dims, ranks, divisors)?, eval(b, dims, ranks, divisors)?);
            if matches!(op, IndexOp::FloorDiv | IndexOp::CeilDiv | IndexOp::Mod) {
                let qs = match &y {
                    SymVal::Scalar(q) => std::slice::from_ref(q),
                    SymVal::Tuple(v) => v.as_slice(),
                };
                divisors.extend(qs.iter().filter(|q| q.is_symbolic() && q.is_non_negative() && !divisors.contains(q)).cloned().collect::<Vec<_>>());
            }
            let op = index_bin(*op);
            match (x, y) {
                (SymVal::Scalar(p), SymVal::Scalar(q)) => SymVal::Scalar(IExpr::fold(op, p, q)),
                (SymVal::Scalar(p), SymVal::Tuple(v)) => SymVal::Tuple(v.into_iter().map(|q| IExpr::fold(op, p.clone(), q)).collect()),
                (SymVal::Tuple(v), SymVal::Scalar(q)) => SymVal::Tuple(v.into_iter().map(|p| IExpr::fold(op, p, q.clone())).collect()),
                (SymVal::Tuple(v), SymVal::Tuple(w)) if v.len() == w.len() => SymVal::Tuple(v.into_iter().zip(w).map(|(p, q)| IExpr::fold(op, p, q)).collect()),
                _ => return Err(e.span),
            }
        }
        _ => return Err(e.span),
    })
}

/// The values one component of an index expression takes, symbolically:
/// exactly one value, or an interval `[lo, hi]` that holds when every
/// extent in `lives` is positive (a zero extent leaves no value at all).
#[derive(Clone, Debug)]
enum Comp {
    Exact(IExpr),
    Range { lo: IExpr, hi: IExpr, lives: Vec<IExpr> },
}

impl Comp {
    fn parts(self) -> (IExpr, IExpr, Vec<IExpr>) {
        match self {
            Comp::Exact(v) => (v.clone(), v, Vec::new()),
            Comp::Range { lo, hi, lives } => (lo, hi, lives),
        }
    }

    /// The extent: `hi + 1` (at least 0) where every live extent is
    /// positive, else 0 (the rule of `et::dims::bound`).
    fn extent(self) -> IExpr {
        if let Comp::Range { lo: IExpr::Const(0), hi, lives } = &self {
            // A variable's own range: its dim (never negative: derived dims
            // are checked).
            if let [l] = lives.as_slice() {
                if *hi == IExpr::fold(IBin::Sub, l.clone(), IExpr::Const(1)) {
                    return l.clone();
                }
            }
        }
        let (_, hi, lives) = self.parts();
        let mut x = IExpr::fold(IBin::Max, IExpr::fold(IBin::Add, hi, IExpr::Const(1)), IExpr::Const(0));
        for l in lives {
            if l != x {
                x = IExpr::fold(IBin::Mul, x, IExpr::fold(IBin::Min, l, IExpr::Const(1)));
            }
        }
        x
    }
}

/// `op` on two components, where the interval rule is exact for the
/// monotone forms first mentions use; `None` otherwise.
fn comp_op(op: IndexOp, x: Comp, y: Comp) -> Option<Comp> {
    if let (Comp::Exact(p), Comp::Exact(q)) = (&x, &y) {
        return Some(Comp::Exact(IExpr::fold(index_bin(op), p.clone(), q.clone())));
    }
    let exact_y = match &y {
        Comp::Exact(c) => Some(c.clone()),
        Comp::Range { .. } => None,
    };
    let (xl, xh, mut lives) = x.parts();
    let (yl, yh, ly) = y.parts();
    lives.extend(ly);
    let (lo, hi) = match op {
        IndexOp::Add => (IExpr::fold(IBin::Add, xl, yl), IExpr::fold(IBin::Add, xh, yh)),
        IndexOp::Sub => (IExpr::fold(IBin::Sub, xl, yh), IExpr::fold(IBin::Sub, xh, yl)),
        IndexOp::Mul => match (&exact_y, xl.is_non_negative() && yl.is_non_negative()) {
            (Some(IExpr::Const(c)), _) if *c < 0 => (IExpr::fold(IBin::Mul, xh, yh), IExpr::fold(IBin::Mul, xl, yl)),
            (_, true) => (IExpr::fold(IBin::Mul, xl, yl), IExpr::fold(IBin::Mul, xh, yh)),
            _ => return None,
        },
        IndexOp::FloorDiv | IndexOp::CeilDiv => {
            let c = exact_y.filter(IExpr::is_non_negative)?;
            let b = index_bin(op);
            (IExpr::fold(b, xl, c.clone()), IExpr::fold(b, xh, c))
        }
        IndexOp::Mod => {
            // x % c with x from 0: [0, min(hi, c - 1)].
            let c = exact_y.filter(IExpr::is_non_negative)?;
            if xl != IExpr::Const(0) {
                return None;
            }
            (xl, IExpr::fold(IBin::Min, xh, IExpr::fold(IBin::Sub, c, IExpr::Const(1))))
        }
    };
    Some(Comp::Range { lo, hi, lives })
}

/// The components of `e` (a scalar broadcasts).
fn comps(e: &IndexExpr, dims: &[Vec<IExpr>]) -> Result<SymComps, Span> {
    let known = |t: &EintupId| dims.get(*t).cloned().ok_or(e.span);
    Ok(match &e.kind {
        IndexKind::Lit(n) => SymComps::Scalar(Comp::Exact(IExpr::Const(*n))),
        IndexKind::Rank(l) => SymComps::Scalar(Comp::Exact(IExpr::Const(l.iter().map(|t| dims.get(*t).map_or(0, Vec::len) as i64).sum()))),
        IndexKind::Dims(l) => SymComps::Tuple(dims_list(l, |t| dims.get(t).cloned()).ok_or(e.span)?.into_iter().map(Comp::Exact).collect()),
        IndexKind::Var(t) => SymComps::Tuple(
            known(t)?
                .into_iter()
                .map(|d| Comp::Range { lo: IExpr::Const(0), hi: IExpr::fold(IBin::Sub, d.clone(), IExpr::Const(1)), lives: vec![d] })
                .collect(),
        ),
        IndexKind::Flat(args) => {
            let mut prod = IExpr::Const(1);
            for a in args {
                for d in position_dims_at(a, dims)? {
                    prod = IExpr::fold(IBin::Mul, prod, d);
                }
            }
            SymComps::Tuple(vec![Comp::Range { lo: IExpr::Const(0), hi: IExpr::fold(IBin::Sub, prod.clone(), IExpr::Const(1)), lives: vec![prod] }])
        }
        IndexKind::Slice { .. } => return Err(e.span),
        IndexKind::Bin(op, a, b) => {
            let (x, y) = (comps(a, dims)?, comps(b, dims)?);
            let f = |p: Comp, q: Comp| comp_op(*op, p, q).ok_or(e.span);
            match (x, y) {
                (SymComps::Scalar(p), SymComps::Scalar(q)) => SymComps::Scalar(f(p, q)?),
                (SymComps::Scalar(p), SymComps::Tuple(v)) => SymComps::Tuple(v.into_iter().map(|q| f(p.clone(), q)).collect::<Result<_, _>>()?),
                (SymComps::Tuple(v), SymComps::Scalar(q)) => SymComps::Tuple(v.into_iter().map(|p| f(p, q.clone())).collect::<Result<_, _>>()?),
                (SymComps::Tuple(v), SymComps::Tuple(w)) if v.len() == w.len() => {
                    SymComps::Tuple(v.into_iter().zip(w).map(|(p, q)| f(p, q)).collect::<Result<_, _>>()?)
                }
                _ => return Err(e.span),
            }
        }
    })
}

#[derive(Clone, Debug)]
enum SymComps {
    Scalar(Comp),
    Tuple(Vec<Comp>),
}

fn position_dims_at(e: &IndexExpr, dims: &[Vec<IExpr>]) -> Result<Vec<IExpr>, Span> {
    Ok(match comps(e, dims)? {
        SymComps::Scalar(c) => vec![c.extent()],
        SymComps::Tuple(v) => v.into_iter().map(Comp::extent).collect(),
    })
}

/// Why a position has no symbolic extent.
#[derive(Clone, Debug, PartialEq)]
pub enum PositionError {
    /// The static rule's error (every eintup it mentions is static).
    Static(et_dims::BoundError),
    /// Not a form whose extent follows from symbolic dims.
    NotSymbolic(Span),
}

/// `DIMS(e)` of a signature position (or a `FLAT` argument) over symbolic
/// eintup dims. Where every eintup it mentions is static this is
/// [`et_dims::bound`] itself, as constants.
pub fn position_dims(e: &IndexExpr, dims: &[Vec<IExpr>]) -> Result<Vec<IExpr>, PositionError> {
    let mut used = Vec::new();
    super::config::mentioned(e, &mut used);
    if used.iter().all(|t| dims.get(*t).is_some_and(|d| d.iter().all(|x| x.as_const().is_some()))) {
        let st: Vec<Vec<i64>> = dims.iter().map(|d| d.iter().map(|x| x.as_const().unwrap_or(0)).collect()).collect();
        return et_dims::bound(e, &st).map(|v| v.into_iter().map(IExpr::Const).collect()).map_err(PositionError::Static);
    }
    position_dims_at(e, dims).map_err(PositionError::NotSymbolic)
}

/// The refusal of a position without a symbolic extent.
pub fn not_symbolic(span: Span) -> Diagnostic {
    Diagnostic::error("E0321", "this index expression has no extent over symbolic dims").at(span, "its extent must follow from the dims alone").note(BIND_HINT)
}
