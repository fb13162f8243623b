//! Polynomials over dim symbols: the first form of the *lower-bound
//! relation* of docs/dynamic-shapes.md section 3. Symbols are
//! non-negative, so a polynomial whose coefficients are all non-negative
//! is non-negative at every configuration: `a <= b` is proved when `b - a`
//! is such a polynomial (`%col.0 - 1 <= %col.0 - 1`,
//! `%row.0 * %col.0 - 1 >= (%row.0 - 1) * %col.0 + (%col.0 - 1)`). What this cannot prove (a
//! relation that needs `%k.0 >= 1`) stays unproved: the caller then keeps
//! its guard or its atomic write, which costs time, never correctness.
//!
//! Arithmetic is exact (`i128`, `None` on overflow). An index expression
//! wraps in `i64`; using the exact value is sound where the expression is
//! a shape, a loop bound or an in-bounds offset of a module whose dims the
//! shape program admitted (buffers fit in memory), which is where the
//! passes use it.

use super::{DimId, IBin, IExpr, LoopModule};
use std::collections::BTreeMap;

/// Pseudo-symbol ids of [`Extents`] start here (a module's dims are fewer).
pub const FIRST_EXTENT: DimId = 1 << 30;

/// A module's buffer extents that are not symbols but polynomials of
/// them (a VALID convolution's `((%ipos.0 - %fpos.0) + 1)`), each an
/// *atom* of its own, id `FIRST_EXTENT + i`: never negative, since the
/// runtime (`Manifest::bind`) and the loop interpreter
/// (`LoopModule::bind_dims`) refuse dims that make a buffer extent
/// negative. As an atom the extent keeps a sign its polynomial alone
/// would lose (`%ochan.0 * (%ipos.0 - %fpos.0 + 1)` has a negative
/// coefficient, `%ochan.0 * X` none), and `o < X` gives `o <= X - 1`.
/// A relation proved over the atoms holds at every admitted configuration
/// (there `X` is a non-negative number like any symbol);
/// [`Extents::expand`] replaces the atoms by their polynomials again.
#[derive(Clone, Debug, Default)]
pub struct Extents {
    exprs: Vec<(IExpr, Poly)>,
}

impl Extents {
    /// The distinct composite polynomial extents of `m`'s buffers (an
    /// extent that is no polynomial, `(%n.0 - %k.0) //^ %s.0`, is left out).
    pub fn of(m: &LoopModule) -> Extents {
        let mut out = Extents::default();
        for e in m.buffers.iter().flat_map(|b| &b.shape) {
            if matches!(e, IExpr::Bin(..)) && out.atom(e).is_none() {
                if let Some(p) = Poly::of(e) {
                    out.exprs.push((e.clone(), p));
                }
            }
        }
        out
    }

    /// The atom `e` is, when it is one of the extents (as written).
    pub fn atom(&self, e: &IExpr) -> Option<DimId> {
        self.exprs.iter().position(|(x, _)| x == e).map(|i| FIRST_EXTENT + i)
    }

    /// Is `e` non-negative wherever the module runs? Symbols are, and so
    /// are its buffers' extents (the runtime and the loop interpreter
    /// refuse dims that make one negative); sums, products, minima,
    /// quotients and remainders of such stay so, as does a maximum with
    /// one such operand. Loop variables are not considered.
    pub fn non_negative(&self, e: &IExpr) -> bool {
        if e.is_non_negative() || self.atom(e).is_some() {
            return true;
        }
        match e {
            IExpr::Bin(IBin::Add | IBin::Mul | IBin::FloorDiv | IBin::CeilDiv | IBin::Min, a, b) => self.non_negative(a) && self.non_negative(b),
            IExpr::Bin(IBin::Max, a, b) => self.non_negative(a) || self.non_negative(b),
            IExpr::Bin(IBin::Mod, _, b) => self.non_negative(b),
            _ => false,
        }
    }

    /// Each extent with its atom.
    pub fn iter(&self) -> impl Iterator<Item = (DimId, &IExpr)> {
        self.exprs.iter().enumerate().map(|(i, (e, _))| (FIRST_EXTENT + i, e))
    }

    /// `p` with every extent atom replaced by its polynomial.
    pub fn expand(&self, p: &Poly) -> Option<Poly> {
        let mut p = p.clone();
        for (i, (_, e)) in self.exprs.iter().enumerate() {
            p = p.substitute(FIRST_EXTENT + i, e)?;
        }
        Some(p)
    }
}

/// `sum(coef * product of symbols)`; a monomial is its symbols, sorted,
/// with repetition (`[]` is the constant term).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Poly {
    terms: BTreeMap<Vec<DimId>, i128>,
}

impl Poly {
    pub fn constant(c: i128) -> Poly {
        let mut p = Poly::default();
        if c != 0 {
            p.terms.insert(Vec::new(), c);
        }
        p
    }

    /// The polynomial an index expression of constants and symbols with
    /// `+ - *` is; `None` for anything else (a variable, a division, a
    /// `min`).
    pub fn of(e: &IExpr) -> Option<Poly> {
        Poly::of_in(e, &Extents::default())
    }

    /// [`Poly::of`] with `ext`'s extents as atoms wherever they occur.
    pub fn of_in(e: &IExpr, ext: &Extents) -> Option<Poly> {
        if let Some(a) = ext.atom(e) {
            return Some(Poly { terms: [(vec![a], 1)].into() });
        }
        match e {
            IExpr::Const(c) => Some(Poly::constant(*c as i128)),
            IExpr::Sym(d) => Some(Poly { terms: [(vec![*d], 1)].into() }),
            IExpr::Var(_) => None,
            IExpr::Bin(op, a, b) => {
                let (a, b) = (Poly::of_in(a, ext)?, Poly::of_in(b, ext)?);
                match op {
                    IBin::Add => a.add(&b),
                    IBin::Sub => a.sub(&b),
                    IBin::Mul => a.mul(&b),
                    _ => None,
                }
            }
        }
    }

    /// A polynomial `p` with `e <= p` at every configuration, for an `e`
    /// without variables: `e` itself, or through `min` (either side),
    /// `max` (the side proved larger), sums and constant multiples.
    pub fn upper(e: &IExpr) -> Option<Poly> {
        Poly::bound(e, true, &Extents::default())
    }

    /// [`Poly::upper`] over `ext`'s atoms too.
    pub fn upper_in(e: &IExpr, ext: &Extents) -> Option<Poly> {
        Poly::bound(e, true, ext)
    }

    /// [`Poly::lower`] over `ext`'s atoms too.
    pub fn lower_in(e: &IExpr, ext: &Extents) -> Option<Poly> {
        Poly::bound(e, false, ext)
    }

    /// A polynomial `p` with `p <= e` at every configuration ([`Poly::upper`]
    /// mirrored).
    pub fn lower(e: &IExpr) -> Option<Poly> {
        Poly::bound(e, false, &Extents::default())
    }

    fn bound(e: &IExpr, up: bool, ext: &Extents) -> Option<Poly> {
        if let Some(p) = Poly::of_in(e, ext) {
            return Some(p);
        }
        let IExpr::Bin(op, a, b) = e else { return None };
        // Either side bounds `min` from above (`max` from below); the
        // other way, the side proved beyond the other does.
        let either = |a: Option<Poly>, b: Option<Poly>| a.or(b);
        let beyond = |a: Option<Poly>, b: Option<Poly>| {
            let (a, b) = (a?, b?);
            let (small, big) = if a.le(&b) {
                (a, b)
            } else if b.le(&a) {
                (b, a)
            } else {
                return None;
            };
            Some(if up { big } else { small })
        };
        match (op, up) {
            (IBin::Min, true) | (IBin::Max, false) => either(Poly::bound(a, up, ext), Poly::bound(b, up, ext)),
            (IBin::Min, false) | (IBin::Max, true) => beyond(Poly::bound(a, up, ext), Poly::bound(b, up, ext)),
            (IBin::Add, _) => Poly::bound(a, up, ext)?.add(&Poly::bound(b, up, ext)?),
            (IBin::Sub, _) => Poly::bound(a, up, ext)?.sub(&Poly::bound(b, !up, ext)?),
            (IBin::Mul, _) => {
                let (c, x) = match (a.as_const(), b.as_const()) {
                    (Some(c), _) => (c, b),
                    (_, Some(c)) => (c, a),
                    _ => return None,
                };
                Poly::bound(x, up == (c >= 0), ext)?.mul(&Poly::constant(c as i128))
            }
            _ => None,
        }
    }

    pub fn add(&self, o: &Poly) -> Option<Poly> {
        let mut p = self.clone();
        for (m, c) in &o.terms {
            let slot = p.terms.entry(m.clone()).or_insert(0);
            *slot = slot.checked_add(*c)?;
        }
        p.terms.retain(|_, c| *c != 0);
        Some(p)
    }

    pub fn neg(&self) -> Option<Poly> {
        let mut p = self.clone();
        for c in p.terms.values_mut() {
            *c = c.checked_neg()?;
        }
        Some(p)
    }

    pub fn sub(&self, o: &Poly) -> Option<Poly> {
        self.add(&o.neg()?)
    }

    pub fn mul(&self, o: &Poly) -> Option<Poly> {
        let mut p = Poly::default();
        for (ma, ca) in &self.terms {
            for (mb, cb) in &o.terms {
                let mut m: Vec<DimId> = ma.iter().chain(mb).copied().collect();
                m.sort_unstable();
                p = p.add(&Poly { terms: [(m, ca.checked_mul(*cb)?)].into() })?;
            }
        }
        Some(p)
    }

    /// Every coefficient non-negative: the value is `>= 0` whatever the
    /// (non-negative) symbols are.
    pub fn is_nonneg(&self) -> bool {
        self.terms.values().all(|c| *c >= 0)
    }

    pub fn as_const(&self) -> Option<i128> {
        match self.terms.iter().next() {
            None => Some(0),
            Some((m, c)) if m.is_empty() && self.terms.len() == 1 => Some(*c),
            _ => None,
        }
    }

    /// Is `self <= o` at every configuration (provably)?
    pub fn le(&self, o: &Poly) -> bool {
        o.sub(self).is_some_and(|d| d.is_nonneg())
    }

    /// The symbols (atoms) the polynomial uses, the largest first.
    pub fn atoms(&self) -> Vec<DimId> {
        let mut out: Vec<DimId> = self.terms.keys().flatten().copied().collect();
        out.sort_unstable_by(|a, b| b.cmp(a));
        out.dedup();
        out
    }

    /// `(c1, c0)` with `self = c1 * a + c0` and neither using `a`;
    /// `None` when `a` appears squared.
    pub fn split_linear(&self, a: DimId) -> Option<(Poly, Poly)> {
        let (mut c1, mut c0) = (Poly::default(), Poly::default());
        for (m, c) in &self.terms {
            match m.iter().filter(|&&d| d == a).count() {
                0 => {
                    c0.terms.insert(m.clone(), *c);
                }
                1 => {
                    c1.terms.insert(m.iter().copied().filter(|&d| d != a).collect(), *c);
                }
                _ => return None,
            }
        }
        Some((c1, c0))
    }

    /// The polynomial with symbol `a` replaced by `by`.
    pub fn substitute(&self, a: DimId, by: &Poly) -> Option<Poly> {
        let mut out = Poly::default();
        for (m, c) in &self.terms {
            let rest: Vec<DimId> = m.iter().copied().filter(|&d| d != a).collect();
            let mut term = Poly { terms: [(rest, *c)].into() };
            for _ in 0..m.len() - term.terms.keys().next().map_or(0, Vec::len) {
                term = term.mul(by)?;
            }
            out = out.add(&term)?;
        }
        Some(out)
    }

    /// Every coefficient divided by `d` (exactly), or `None`.
    pub fn div_exact(&self, d: i128) -> Option<Poly> {
        let mut p = self.clone();
        for c in p.terms.values_mut() {
            if d == 0 || *c % d != 0 {
                return None;
            }
            *c /= d;
        }
        Some(p)
    }

    /// The greatest common divisor of the coefficients (0 for 0).
    pub fn content(&self) -> i128 {
        self.terms.values().fold(0i128, |g, &c| gcd(g, c.abs()))
    }

    /// The polynomial as an index expression (symbols' monomials
    /// summed, positive terms first), or `None` when a coefficient
    /// leaves `i64`.
    pub fn to_expr(&self) -> Option<IExpr> {
        let mut terms: Vec<(&Vec<DimId>, i128)> = self.terms.iter().map(|(m, c)| (m, *c)).collect();
        terms.sort_by_key(|(m, c)| (*c < 0, m.is_empty()));
        let mut out: Option<IExpr> = None;
        for (m, c) in terms {
            let mono = m.iter().fold(None, |acc: Option<IExpr>, &d| Some(acc.map_or(IExpr::Sym(d), |a| IExpr::mul(a, IExpr::Sym(d)))));
            let mag = i64::try_from(c.abs()).ok()?;
            let term = match mono {
                None => IExpr::c(mag),
                Some(x) if mag == 1 => x,
                Some(x) => IExpr::mul(IExpr::c(mag), x),
            };
            out = Some(match (out, c < 0) {
                (None, false) => term,
                (None, true) => IExpr::sub(IExpr::c(0), term),
                (Some(a), false) => IExpr::add(a, term),
                (Some(a), true) => IExpr::sub(a, term),
            });
        }
        Some(out.unwrap_or(IExpr::c(0)))
    }
}

pub fn gcd(a: i128, b: i128) -> i128 {
    if b == 0 {
        a
    } else {
        gcd(b, a % b)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn s(d: DimId) -> IExpr {
        IExpr::Sym(d)
    }

    #[test]
    fn mixed_radix_relations_of_a_matmul_hold() {
        let (row, col) = (Poly::of(&s(0)).unwrap(), Poly::of(&s(1)).unwrap());
        let one = Poly::constant(1);
        // (row - 1) * col + (col - 1) <= row * col - 1
        let reach = row.sub(&one).unwrap().mul(&col).unwrap().add(&col.sub(&one).unwrap()).unwrap();
        assert!(reach.le(&row.mul(&col).unwrap().sub(&one).unwrap()));
        // col - 1 < col, but not col <= col - 1, nor 1 <= col (col may be 0).
        assert!(col.sub(&one).unwrap().le(&col));
        assert!(!col.le(&col.sub(&one).unwrap()));
        assert!(!one.le(&col));
        assert_eq!(Poly::of(&IExpr::sub(s(0), s(0))).unwrap().as_const(), Some(0));
    }

    #[test]
    fn a_buffer_extent_and_what_is_built_of_it_are_non_negative() {
        // y : [%n.0 - %k.0 + 1]: the extent X is; X //^ 4, X % 8 and
        // max(X - 5, 0) are; X - 5 and a loop variable are not.
        let m = crate::ir::loops::parse::parse_module("dim %n.0\ndim %k.0\nbuffer y : f32[((%n.0 - %k.0) + 1)] output\n").expect("parses");
        let ext = Extents::of(&m);
        let x = m.buffers[0].shape[0].clone();
        assert!(ext.non_negative(&x) && !x.is_non_negative());
        assert!(ext.non_negative(&IExpr::bin(IBin::CeilDiv, x.clone(), IExpr::c(4))));
        assert!(ext.non_negative(&IExpr::bin(IBin::Mod, x.clone(), IExpr::c(8))));
        let less = IExpr::sub(x.clone(), IExpr::c(5));
        assert!(!ext.non_negative(&less));
        assert!(ext.non_negative(&IExpr::bin(IBin::Max, less, IExpr::c(0))));
        assert!(!ext.non_negative(&IExpr::v(0)));
        assert!(!ext.non_negative(&IExpr::sub(s(0), s(1))));
    }

    #[test]
    fn bounds_go_through_min_and_max() {
        // min(%0, o + 1) <= %0; max(0, %0 - 3) >= %0 - 3.
        let e = IExpr::bin(IBin::Min, s(0), IExpr::add(IExpr::v(0), IExpr::c(1)));
        assert_eq!(Poly::upper(&e), Poly::of(&s(0)));
        assert_eq!(Poly::lower(&e), None);
        let e = IExpr::bin(IBin::Max, IExpr::c(0), IExpr::sub(s(0), IExpr::c(3)));
        assert_eq!(Poly::lower(&e), Some(Poly::constant(0)));
        // max(%0, %0 + 2) <= %0 + 2: the larger side is proved.
        let e = IExpr::bin(IBin::Max, s(0), IExpr::add(s(0), IExpr::c(2)));
        assert_eq!(Poly::upper(&e), Poly::of(&IExpr::add(s(0), IExpr::c(2))));
        // max(%0, %1): neither is proved larger.
        assert_eq!(Poly::upper(&IExpr::bin(IBin::Max, s(0), s(1))), None);
        // 10 - 2 * min(%0, 4) >= 10 - 2 * %0... a lower bound needs min's
        // upper bound: either side.
        let e = IExpr::sub(IExpr::c(10), IExpr::mul(IExpr::c(2), IExpr::bin(IBin::Min, s(0), IExpr::c(4))));
        assert!(Poly::lower(&e).is_some());
        assert_eq!(Poly::upper(&e), None);
    }
}
