//! 32-bit index arithmetic for kernels with dim symbols
//! (docs/dynamic-shapes.md, "32-bit indices"). A static kernel computes
//! its indices in `i32` when the interval analysis proves every value fits
//! (`Kernel::index_fits_i32`); a symbol's interval is `[0, 2^63)`, so a
//! dynamic kernel never did. Here every value of a symbolic kernel's index
//! arithmetic is bounded by rational polynomials over the symbols; the
//! upper bounds that are not constants become *limits*, which the bundle
//! records and the runtime checks against the bound dims before a launch
//! (`Manifest::bind`). A Horner offset's bound is its buffer's length minus
//! one, so in practice the limit is "buffers below 2^31 elements".
//!
//! The bounds are relational where it matters: an expression is a
//! polynomial over *atoms* (symbols, loop variables, guarded expressions,
//! and non-polynomial sub-expressions such as `x // 16` or `min(a, b)`),
//! each atom with a lower and upper bound that may use older atoms
//! (a loop variable lies in `[lo, hi - 1]` of its loop's own bounds). An
//! upper bound is found by substituting, newest atom first, each atom's
//! upper or lower bound by the sign of its coefficient, until only symbols
//! are left: `ipos_0 - opos_0` over a window loop `[opos_0, opos_0 +
//! %fpos.0)` is below `%fpos.0`, which intervals cannot see. Every step is
//! a pointwise inequality wherever the expression is evaluated (inside its
//! loops and guards), so a limit that holds at the dims bounds the value.

use super::geometry::GridChain;
use super::interval::Interval;
use super::poly::{gcd, Extents, Poly};
use super::{chain::Step, Cond, DimId, IBin, IExpr, Kernel, LoopKind, LoopModule, Node, VarId};

/// `p / den`, `den > 0`: a rational polynomial over atoms.
#[derive(Clone, Debug, PartialEq)]
pub struct Frac {
    p: Poly,
    den: i128,
}

impl Frac {
    fn int(p: Poly) -> Frac {
        Frac { p, den: 1 }
    }

    fn c(c: i128) -> Frac {
        Frac::int(Poly::constant(c))
    }

    fn atom(a: DimId) -> Frac {
        Frac::int(Poly::of(&IExpr::Sym(a)).expect("a symbol is a polynomial"))
    }

    fn new(p: Poly, den: i128) -> Option<Frac> {
        let g = gcd(p.content(), den).max(1);
        Some(Frac { p: p.div_exact(g)?, den: den / g })
    }

    fn add(&self, o: &Frac) -> Option<Frac> {
        if self.den == o.den {
            return Frac::new(self.p.add(&o.p)?, self.den);
        }
        let p = self.p.mul(&Poly::constant(o.den))?.add(&o.p.mul(&Poly::constant(self.den))?)?;
        Frac::new(p, self.den.checked_mul(o.den)?)
    }

    fn neg(&self) -> Option<Frac> {
        Some(Frac { p: self.p.neg()?, den: self.den })
    }

    fn sub(&self, o: &Frac) -> Option<Frac> {
        self.add(&o.neg()?)
    }

    fn mul(&self, o: &Frac) -> Option<Frac> {
        Frac::new(self.p.mul(&o.p)?, self.den.checked_mul(o.den)?)
    }

    fn div(&self, c: i128) -> Option<Frac> {
        Frac::new(self.p.clone(), self.den.checked_mul(c)?)
    }

    /// Non-negative at every configuration (over symbols only).
    fn nonneg(&self) -> bool {
        self.p.is_nonneg()
    }

    /// `self <= o` at every configuration (over symbols only).
    fn le(&self, o: &Frac) -> bool {
        o.sub(self).is_some_and(|d| d.nonneg())
    }

    fn as_const(&self) -> Option<(i128, i128)> {
        self.p.as_const().map(|c| (c, self.den))
    }

    /// As an index expression over the symbols: `p`, or `p // den` (an
    /// integer below `p / den` is below its floor).
    pub fn to_expr(&self) -> Option<IExpr> {
        let p = self.p.to_expr()?;
        Some(if self.den == 1 { p } else { IExpr::bin(IBin::FloorDiv, p, IExpr::c(i64::try_from(self.den).ok()?)) })
    }

    /// Provably at most `len - 1`, the last offset of a buffer of that
    /// length (a product of shape expressions).
    pub fn below(&self, shape: &[IExpr]) -> bool {
        let len = shape.iter().try_fold(Poly::constant(1), |acc, e| acc.mul(&Poly::of(e)?));
        len.and_then(|l| Frac::int(l).sub(&Frac::c(1))).is_some_and(|last| self.le(&last))
    }
}

/// The bounds of a non-symbol atom, over older atoms.
struct Atom {
    lo: Frac,
    hi: Frac,
}

/// The walk's state: atoms (ids from `nsyms` on, in creation order), the
/// atom each loop variable is, and guard facts (an expression and its
/// atom), all scoped as a stack.
struct Walk {
    /// Buffer extents that are not symbols (`%n.0 - %k.0 + 1`), as
    /// atoms known non-negative ([`Extents`]), so products of them keep a
    /// sign that their polynomials alone would lose; replaced by their
    /// polynomials in the limits (`Walk::symbols`).
    extents: Extents,
    atoms: Vec<Atom>,
    vars: Vec<Option<DimId>>,
    facts: Vec<(IExpr, DimId)>,
    limits: Vec<Frac>,
}

/// Atom ids from here on are not symbols (a module's dims are fewer);
/// extents' (`poly::FIRST_EXTENT`) between.
const FIRST_ATOM: DimId = 1 << 40;

/// The most a value may be in `i32` and the least.
const MAX: i128 = i32::MAX as i128;
const MIN: i128 = i32::MIN as i128;

impl Walk {
    /// A walk of a kernel with `nvars` variables, `extents` as atoms.
    fn new(extents: Extents, nvars: usize) -> Walk {
        let facts = extents.iter().map(|(a, e)| (e.clone(), a)).collect();
        Walk { extents, atoms: Vec::new(), vars: vec![None; nvars], facts, limits: Vec::new() }
    }

    fn push(&mut self, lo: Frac, hi: Frac) -> DimId {
        self.atoms.push(Atom { lo, hi });
        FIRST_ATOM + self.atoms.len() - 1
    }

    /// Atoms pushed after `n` atoms are gone (their scope ended).
    fn truncate(&mut self, n: usize) {
        self.atoms.truncate(n);
        let top = FIRST_ATOM + n;
        self.facts.retain(|(_, a)| *a < top);
        for v in self.vars.iter_mut() {
            if v.is_some_and(|a| a >= top) {
                *v = None;
            }
        }
    }

    /// `f` with every extent replaced by its polynomial.
    fn symbols(&self, f: &Frac) -> Option<Frac> {
        Frac::new(self.extents.expand(&f.p)?, f.den)
    }

    /// `e` as a polynomial over atoms (new atoms for what is not one).
    fn frac(&mut self, e: &IExpr) -> Option<Frac> {
        if let Some((_, a)) = self.facts.iter().rev().find(|(f, _)| f == e) {
            return Some(Frac::atom(*a));
        }
        match e {
            IExpr::Const(c) => Some(Frac::c(*c as i128)),
            IExpr::Sym(d) => Some(Frac::atom(*d)),
            IExpr::Var(v) => Some(Frac::atom((*self.vars.get(*v)?)?)),
            IExpr::Bin(op, a, b) => {
                let (fa, fb) = (self.frac(a)?, self.frac(b)?);
                match op {
                    IBin::Add => fa.add(&fb),
                    IBin::Sub => fa.sub(&fb),
                    IBin::Mul => fa.mul(&fb),
                    _ => {
                        let (lo, hi) = self.opaque(*op, &fa, &fb)?;
                        Some(Frac::atom(self.push(lo, hi)))
                    }
                }
            }
        }
    }

    /// Bounds of `a op b` for the operators that are not polynomial.
    fn opaque(&mut self, op: IBin, a: &Frac, b: &Frac) -> Option<(Frac, Frac)> {
        let (al, ah, bl, bh) = (self.bound(a, false)?, self.bound(a, true)?, self.bound(b, false)?, self.bound(b, true)?);
        // Constant operands: the interval analysis, exact.
        if let (Some(al), Some(ah), Some(bl), Some(bh)) = (al.as_const(), ah.as_const(), bl.as_const(), bh.as_const()) {
            let ceil = |(c, d): (i128, i128)| i64::try_from(c.div_euclid(d) + i128::from(c.rem_euclid(d) != 0)).ok();
            let floor = |(c, d): (i128, i128)| i64::try_from(c.div_euclid(d)).ok();
            let r = Interval::apply(op, Interval::new(ceil(al)?, floor(ah)?), Interval::new(ceil(bl)?, floor(bh)?));
            return (!r.is_empty()).then(|| (Frac::c(r.lo as i128), Frac::c(r.hi as i128)));
        }
        let zero = Frac::c(0);
        let a_nonneg = al.nonneg();
        let divisor = bl.as_const().filter(|_| bl == bh).map(|(c, d)| (c, d == 1));
        // One side always the larger (`max(%n.0 - 0, 0)`): that side,
        // keeping its relations.
        match op {
            IBin::Max if bh.le(&al) => return Some((a.clone(), a.clone())),
            IBin::Max if ah.le(&bl) => return Some((b.clone(), b.clone())),
            IBin::Min if ah.le(&bl) => return Some((a.clone(), a.clone())),
            IBin::Min if bh.le(&al) => return Some((b.clone(), b.clone())),
            _ => {}
        }
        match (op, divisor) {
            (IBin::FloorDiv, Some((c, true))) if c > 0 => Some((a.sub(&Frac::c(c - 1))?.div(c)?, a.div(c)?)),
            (IBin::CeilDiv, Some((c, true))) if c > 0 => Some((a.div(c)?, a.add(&Frac::c(c - 1))?.div(c)?)),
            (IBin::Mod, Some((c, true))) if c > 0 => Some((zero, Frac::c(c - 1))),
            // By a divisor >= 0: 0 when it is 0, else below `a` (`a >= 0`).
            (IBin::FloorDiv | IBin::CeilDiv, _) if a_nonneg && bl.nonneg() => Some((zero, a.clone())),
            (IBin::Mod, _) if bl.nonneg() => Some((zero, b.clone())),
            (IBin::Min, _) => {
                // Either side bounds a minimum from above; the side with
                // atoms keeps its relation (a window's `min(.., o + k)`).
                let relational = |f: &Frac| f.p.atoms().first().is_some_and(|&x| x >= FIRST_ATOM);
                let hi = if relational(b) && !relational(a) { b.clone() } else { a.clone() };
                let lo = if al.le(&bl) {
                    al
                } else if bl.le(&al) {
                    bl
                } else if a_nonneg && bl.nonneg() {
                    zero
                } else {
                    return None;
                };
                Some((lo, hi))
            }
            (IBin::Max, _) => {
                let lo = a.clone();
                let hi = if ah.le(&bh) {
                    bh
                } else if bh.le(&ah) {
                    ah
                } else if a_nonneg && bl.nonneg() {
                    ah.add(&bh)?
                } else {
                    return None;
                };
                Some((lo, hi))
            }
            _ => None,
        }
    }

    /// A bound over symbols only (`up`: from above): each atom, newest
    /// first, replaced by its bound of the sign its coefficient has.
    fn bound(&self, f: &Frac, up: bool) -> Option<Frac> {
        let Some(&a) = f.p.atoms().first().filter(|&&a| a >= FIRST_ATOM) else { return Some(f.clone()) };
        let (c1, c0) = f.p.split_linear(a)?;
        let (c1, c0) = (Frac { p: c1, den: f.den }, Frac { p: c0, den: f.den });
        let atom = self.atoms.get(a - FIRST_ATOM)?;
        let positive = if self.bound(&c1, false).is_some_and(|l| l.nonneg()) {
            true
        } else if self.bound(&c1, true).and_then(|h| h.neg()).is_some_and(|h| h.nonneg()) {
            false
        } else {
            return None;
        };
        let sub = if positive == up { &atom.hi } else { &atom.lo };
        self.bound(&c1.mul(sub)?.add(&c0)?, up)
    }

    /// Records what makes a value within `[lo, hi]` fit `i32`: nothing
    /// when provable now, a limit when it depends on the dims; `false`
    /// when it cannot fit.
    fn fits(&mut self, lo: &Frac, hi: &Frac) -> bool {
        // lo >= MIN  <=>  -lo - 1 <= MAX.
        let below = match lo.neg().and_then(|n| n.sub(&Frac::c(1))) {
            Some(n) => n,
            None => return false,
        };
        [below, hi.clone()].into_iter().all(|h| {
            if h.le(&Frac::c(MAX)) {
                return true;
            }
            if h.as_const().is_some() {
                return false;
            }
            self.limits.push(h);
            true
        })
    }

    /// Whether every sub-expression of `e` has bounds, recording limits.
    fn check(&mut self, e: &IExpr) -> bool {
        if let IExpr::Bin(_, a, b) = e {
            if !self.check(a) || !self.check(b) {
                return false;
            }
        }
        let n = self.atoms.len();
        let ok = (|| {
            let f = self.frac(e)?;
            Some((self.bound(&f, false)?, self.bound(&f, true)?))
        })()
        .is_some_and(|(lo, hi)| self.fits(&lo, &hi));
        self.truncate(n);
        ok
    }

    /// `x <= y` wherever both are evaluated (inside the walk's loops and
    /// guards): the lower bound of `y - x` over the symbols is provably
    /// non-negative, over the extents as atoms or their polynomials.
    fn proved_le(&mut self, x: &IExpr, y: &IExpr) -> bool {
        let n = self.atoms.len();
        let ok = (|| {
            let d = self.frac(y)?.sub(&self.frac(x)?)?;
            let lo = self.bound(&d, false)?;
            Some(lo.nonneg() || self.symbols(&lo)?.nonneg())
        })()
        .unwrap_or(false);
        self.truncate(n);
        ok
    }

    /// `e` with every `min`/`max` of which one operand is provably the
    /// smaller (larger) replaced by that operand.
    fn prune(&mut self, e: &IExpr) -> IExpr {
        let IExpr::Bin(op, a, b) = e else { return e.clone() };
        let (a, b) = (self.prune(a), self.prune(b));
        let keep_b = match op {
            IBin::Min if self.proved_le(&b, &a) => true,
            IBin::Max if self.proved_le(&a, &b) => true,
            IBin::Min if self.proved_le(&a, &b) => false,
            IBin::Max if self.proved_le(&b, &a) => false,
            _ => return IExpr::bin(*op, a, b),
        };
        if keep_b {
            b
        } else {
            a
        }
    }

    /// [`Walk::prune`] on every loop bound and guard bound of `nodes`,
    /// each under the bounds of the loops and guards around it; how many
    /// expressions changed.
    fn prune_nodes(&mut self, nodes: &mut [Node]) -> usize {
        let mut changed = 0;
        let prune = |w: &mut Walk, e: &mut IExpr| {
            let p = w.prune(e);
            let same = p == *e;
            *e = p;
            usize::from(!same)
        };
        for n in nodes {
            let n_atoms = self.atoms.len();
            match n {
                Node::For(l) => {
                    changed += prune(self, &mut l.lo) + prune(self, &mut l.hi);
                    let atom = (|| Some((self.frac(&l.lo)?, self.frac(&l.hi)?.sub(&Frac::c(1))?)))().map(|(lo, hi)| self.push(lo, hi));
                    if let Some(slot) = self.vars.get_mut(l.var) {
                        *slot = atom;
                    }
                    changed += self.prune_nodes(&mut l.body);
                }
                Node::Guard(g) => {
                    for c in &mut g.conds {
                        if let Cond::InRange { e, lo, hi } = c {
                            changed += prune(self, lo) + prune(self, hi);
                            if let Some((lo, hi)) = (|| Some((self.frac(lo)?, self.frac(hi)?.sub(&Frac::c(1))?)))() {
                                let a = self.push(lo, hi);
                                self.facts.push((e.clone(), a));
                            }
                        }
                    }
                    changed += self.prune_nodes(&mut g.body);
                }
                // A loaded index is unknown to the nodes after it.
                Node::LoadIndex { var, .. } => {
                    if let Some(slot) = self.vars.get_mut(*var) {
                        *slot = None;
                    }
                    continue;
                }
                Node::Compute(_) | Node::Sync | Node::Copies(_) => {}
            }
            self.truncate(n_atoms);
        }
        changed
    }

    fn nodes(&mut self, nodes: &[Node], spread_step: i64, unrolled: &[bool]) -> bool {
        nodes.iter().all(|n| {
            let rest_ok =
                n.offsets().into_iter().all(|e| e.split_fixed(&|v| unrolled.get(v).copied().unwrap_or(false)).is_none_or(|(rest, _)| self.check(&rest)));
            if !rest_ok || !n.own_exprs().into_iter().all(|e| self.check(e)) {
                return false;
            }
            let n_atoms = self.atoms.len();
            let ok = match n {
                Node::For(l) => (|| {
                    let (lo, hi) = (self.frac(&l.lo)?, self.frac(&l.hi)?.sub(&Frac::c(1))?);
                    // A spread loop starts at `lo + tid`, tid below the step.
                    let step = if l.kind == LoopKind::Spread { spread_step } else { 1 };
                    let start = (self.bound(&lo, false)?, self.bound(&lo.add(&Frac::c(step as i128 - 1))?, true)?);
                    if !self.fits(&start.0, &start.1) {
                        return None;
                    }
                    let a = self.push(lo, hi);
                    *self.vars.get_mut(l.var)? = Some(a);
                    self.nodes(&l.body, spread_step, unrolled).then_some(())
                })()
                .is_some(),
                Node::Guard(g) => (|| {
                    for c in &g.conds {
                        if let Cond::InRange { e, lo, hi } = c {
                            let (lo, hi) = (self.frac(lo)?, self.frac(hi)?.sub(&Frac::c(1))?);
                            let a = self.push(lo, hi);
                            self.facts.push((e.clone(), a));
                        }
                    }
                    self.nodes(&g.body, spread_step, unrolled).then_some(())
                })()
                .is_some(),
                // A loaded index is any i32.
                Node::LoadIndex { var, .. } => {
                    let a = self.push(Frac::c(MIN), Frac::c(MAX));
                    match self.vars.get_mut(*var) {
                        Some(slot) => {
                            *slot = Some(a);
                            // Visible to the following nodes: not truncated.
                            return true;
                        }
                        None => false,
                    }
                }
                Node::Compute(_) | Node::Sync | Node::Copies(_) => true,
            };
            self.truncate(n_atoms);
            ok
        })
    }
}

impl Kernel {
    /// When the GPU may compute the kernel's index arithmetic in `i32`:
    /// `None` when some value may not fit, else the limits under which
    /// every value does — polynomials over the dim symbols, each of which
    /// must be at most `2^31 - 1` at the bound dims (none for a static
    /// kernel, `Kernel::index_fits_i32`; pruned of limits another one
    /// implies). Besides what `index_fits_i32` bounds, a dynamic kernel's
    /// grid chain computes its trips and total from the symbols.
    pub fn index32_limits(&self, m: &LoopModule) -> Option<Vec<Frac>> {
        if !self.is_symbolic() {
            return self.index_fits_i32().then(Vec::new);
        }
        let mut w = Walk::new(Extents::of(m), self.vars.len());
        let chain = GridChain::of(&self.body);
        let chain_ok = w.check(&chain.total)
            && chain.steps.iter().all(|s| match s {
                Step::Loop { lo, trip, .. } => w.check(lo) && w.check(trip),
                _ => true,
            });
        let step = chain.block.unwrap_or(1).max(1);
        if !chain_ok || !w.nodes(&self.body, step, &self.unroll_vars()) {
            return None;
        }
        // A limit below another one adds nothing.
        let all = std::mem::take(&mut w.limits).iter().map(|f| w.symbols(f)).collect::<Option<Vec<Frac>>>()?;
        let mut kept: Vec<Frac> = Vec::new();
        for (i, f) in all.iter().enumerate() {
            let implied = all.iter().enumerate().any(|(j, g)| j != i && f.le(g) && (!g.le(f) || j < i));
            if !implied {
                kept.push(f.clone());
            }
        }
        Some(kept)
    }
}

impl Kernel {
    /// Drops the operands of `min`/`max` in loop and guard bounds that the
    /// relational bounds above prove never chosen (a window's `min(%n.0,
    /// o + %k.0)` where `o < %n.0 - %k.0 + 1`, `ext`'s atom, is `o +
    /// %k.0`); how many bounds changed. The value of every bound is the
    /// same wherever it is evaluated.
    pub fn prune_ordered_bounds(&mut self, ext: &Extents) -> usize {
        let mut w = Walk::new(ext.clone(), self.vars.len());
        w.prune_nodes(&mut self.body)
    }
}

/// Is `offset` in `[0, len)` of a buffer of `shape` at every point of
/// `loops` (`(var, lo, hi)`, outermost first; `nvars` is the kernel's
/// variable count), by the relational bounds above over `m`'s extents?
/// `lane * %k.0 + k` for `lane < 32`, `k < %k.0` is below `32 * %k.0`,
/// which intervals over `[0, 2^63)` symbols cannot see.
pub fn proved_in_bounds(m: &LoopModule, nvars: usize, loops: &[(VarId, IExpr, IExpr)], offset: &IExpr, shape: &[IExpr]) -> bool {
    let mut w = Walk::new(Extents::of(m), nvars);
    (|| {
        for (v, lo, hi) in loops {
            let (lo, hi) = (w.frac(lo)?, w.frac(hi)?.sub(&Frac::c(1))?);
            let a = w.push(lo, hi);
            *w.vars.get_mut(*v)? = Some(a);
        }
        let f = w.frac(offset)?;
        let (lo, hi) = (w.bound(&f, false)?, w.bound(&f, true)?);
        let nonneg = lo.nonneg() || w.symbols(&lo)?.nonneg();
        Some(nonneg && (hi.below(shape) || w.symbols(&hi)?.below(shape)))
    })()
    .unwrap_or(false)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ir::loops::{parse::parse_module, print::shape_extent};

    fn module(text: &str) -> LoopModule {
        parse_module(text).expect("parses")
    }

    fn limits(m: &LoopModule) -> Option<Vec<String>> {
        let l = m.kernels[0].index32_limits(m)?;
        Some(l.iter().map(|f| shape_extent(m, &f.to_expr().expect("fits i64"))).collect())
    }

    #[test]
    fn a_guarded_edge_tile_is_bounded_by_its_buffers() {
        // A 16-row block of a dynamic copy, rows past `%r.0` guarded.
        let m = module(
            "dim %r.0\ndim %c.0\nbuffer x : f32[%r.0, %c.0] input\nbuffer y : f32[%r.0, %c.0] output\n\
             kernel @k {\n for b in [0, (%r.0 //^ 16)) parallel {\n for t in [0, 16) reduce {\n for j in [0, %c.0) reduce {\n\
             guard 0 <= ((b * 16) + t) < %r.0 {\n %0 = load x[((((b * 16) + t) * %c.0) + j)] : f32\n store y[((((b * 16) + t) * %c.0) + j)] = %0\n }\n }\n }\n }\n}\n",
        );
        let l = limits(&m).expect("i32");
        // The offset's bound is the buffer's last offset; the guarded row
        // itself reaches `%r.0 + 14` (the last block's padding), the row's
        // start `(%r.0 - 1) * %c.0` (not below the length when `%c.0` is 0).
        assert_eq!(l, ["%c.0", "(%r.0 + 14)", "((%r.0 * %c.0) - %c.0)", "((%r.0 * %c.0) - 1)"]);
        let last = m.kernels[0].index32_limits(&m).unwrap().pop().unwrap();
        assert!(last.below(&m.buffers[0].shape));
    }

    #[test]
    fn a_window_loop_keeps_its_relation_to_the_output_position() {
        // y[o] += w[i - o] * x[i], i in [o, min(%n.0, o + %k.0)).
        let m = module(
            "dim %n.0\ndim %k.0\nbuffer x : f32[%n.0] input\nbuffer w : f32[%k.0] input\nbuffer y : f32[((%n.0 - %k.0) + 1)] output\n\
             kernel @k {\n for o in [0, ((%n.0 - %k.0) + 1)) parallel {\n for i in [o, min(%n.0, (o + %k.0))) reduce {\n\
             %0 = load w[(i - o)] : f32\n %1 = load x[i] : f32\n %2 = mul %0, %1 : f32\n accumulate y[o] += %2\n }\n }\n}\n",
        );
        // w's offset is below %k.0 and x's below %n.0 (the window ends
        // at `o + %k.0` and `o <= %n.0 - %k.0`): the symbols themselves
        // are the limits, with the output's length.
        assert_eq!(limits(&m).expect("i32"), ["%n.0", "%k.0", "((%n.0 + 1) - %k.0)"]);
    }

    #[test]
    fn a_window_bound_loses_the_min_its_extent_proves_never_chosen() {
        // w in [0, min(%w.0, %n.0 - o)) with o < %n.0 - %w.0 + 1: `%w.0`.
        // `min(%n.0, o + 1)` stays (o + 1 <= %n.0 needs %w.0 >= 1), and a
        // max of a proved-smaller operand goes.
        let text = |lo: &str, hi: &str| {
            format!(
                "dim %n.0\ndim %w.0\nbuffer x : f32[%n.0] input\nbuffer y : f32[((%n.0 - %w.0) + 1)] output\n\
                 kernel @k {{\n for o in [0, ((%n.0 - %w.0) + 1)) parallel {{\n for w in [{lo}, {hi}) reduce {{\n\
                 %0 = load x[(o + w)] : f32\n accumulate y[o] += %0\n }}\n }}\n}}\n"
            )
        };
        let pruned = |lo: &str, hi: &str| {
            let mut m = module(&text(lo, hi));
            let ext = Extents::of(&m);
            let n = m.kernels[0].prune_ordered_bounds(&ext);
            let Node::For(o) = &m.kernels[0].body[0] else { panic!() };
            let Node::For(w) = &o.body[0] else { panic!() };
            (n, shape_extent(&m, &w.lo), shape_extent(&m, &w.hi))
        };
        assert_eq!(pruned("0", "min(%w.0, (%n.0 - o))"), (1, "0".into(), "%w.0".into()));
        // (`shape_extent` prints the loop variable `o` as `?var0`.)
        assert_eq!(pruned("max(0, (o - %n.0))", "min(%n.0, (o + 1))"), (1, "0".into(), "min(%n.0, (?var0 + 1))".into()));
    }

    #[test]
    fn a_lane_major_slot_is_proved_in_its_buffer() {
        // P : [32, %k.0], slot lane * %k.0 + k for lane < 32, k < %k.0:
        // at most 32 * %k.0 - 1. One more is not provable, nor a slot
        // past a buffer of 31 lanes.
        let m = module("dim %k.0\nbuffer p : f32[32, %k.0] temp\nbuffer q : f32[31, %k.0] temp\n");
        let loops = [(0, IExpr::c(0), IExpr::Sym(0)), (1, IExpr::c(0), IExpr::c(32))];
        let slot = IExpr::add(IExpr::mul(IExpr::v(1), IExpr::Sym(0)), IExpr::v(0));
        assert!(proved_in_bounds(&m, 2, &loops, &slot, &m.buffers[0].shape));
        assert!(!proved_in_bounds(&m, 2, &loops, &IExpr::add(slot.clone(), IExpr::c(1)), &m.buffers[0].shape));
        assert!(!proved_in_bounds(&m, 2, &loops, &slot, &m.buffers[1].shape));
        // A negative offset is not in bounds either.
        assert!(!proved_in_bounds(&m, 2, &loops, &IExpr::sub(slot, IExpr::c(1)), &m.buffers[0].shape));
    }

    #[test]
    fn a_loaded_index_used_unguarded_keeps_i64() {
        let m = module(
            "dim %n.0\nbuffer x : f32[%n.0, 4] input\nbuffer ix : i32[%n.0] input\nbuffer y : f32[%n.0] output\n\
             kernel @k {\n for i in [0, %n.0) parallel {\n v = load_index ix[i]\n %0 = load x[(v * 4)] : f32\n store y[i] = %0\n }\n}\n",
        );
        assert_eq!(limits(&m), None);
        // Guarded, it is bounded by the guard.
        let g = module(
            "dim %n.0\nbuffer x : f32[%n.0, 4] input\nbuffer ix : i32[%n.0] input\nbuffer y : f32[%n.0] output\n\
             kernel @k {\n for i in [0, %n.0) parallel {\n v = load_index ix[i]\n guard 0 <= v < %n.0 {\n %0 = load x[(v * 4)] : f32\n store y[i] = %0\n }\n }\n}\n",
        );
        assert_eq!(limits(&g).expect("i32"), ["%n.0", "((4 * %n.0) - 4)"]);
    }

    #[test]
    fn a_product_of_two_variables_of_unknown_sign_keeps_i64() {
        let m = module(
            "dim %n.0\nbuffer y : f32[%n.0] output\n\
             kernel @k {\n for i in [0, %n.0) parallel {\n for j in [(0 - %n.0), %n.0) reduce {\n %0 = const 0.0 : f32\n store y[((i * j) % %n.0)] = %0\n }\n }\n}\n",
        );
        assert_eq!(limits(&m), None);
    }
}
