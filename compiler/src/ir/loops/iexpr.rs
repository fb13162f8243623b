//! Scalar index expressions (`IExpr`): their operators, evaluation,
//! linear form, substitution and the index arithmetic passes build.

use super::{Cond, DimId, Interval, VarId};

/// Dim symbols known to be multiples of a constant: what a run-time
/// variant's kernel is compiled under (`Kernel::multiples`,
/// docs/dynamic-shapes.md, "Divisibility variants"), so that its residues
/// (`IExpr::residue_under`) prove the 16-byte alignment a symbolic row
/// length otherwise cannot. Code compiled under them is correct only
/// where they hold: its launch condition is exactly [`Multiples::conditions`].
#[derive(Clone, Debug, Default, PartialEq, Eq, Hash)]
pub struct Multiples {
    /// `(dim, n)`: `dim` is a multiple of `n` (`n >= 2`), by dim, each once.
    pub facts: Vec<(DimId, i64)>,
}

impl Multiples {
    /// The `n` that dim `d` is known to be a multiple of (1: nothing known).
    pub fn of(&self, d: DimId) -> i64 {
        self.facts.iter().find(|f| f.0 == d).map_or(1, |f| f.1)
    }

    pub fn is_empty(&self) -> bool {
        self.facts.is_empty()
    }

    /// Both sets of facts (a dim both name: a multiple of the least
    /// common multiple): what a kernel fused from two, each compiled under
    /// its own, assumes.
    pub fn union(&self, other: &Multiples) -> Multiples {
        let mut facts = self.facts.clone();
        for &(d, n) in &other.facts {
            match facts.iter_mut().find(|f| f.0 == d) {
                Some(f) => f.1 = (f.1 / super::poly::gcd(f.1 as i128, n as i128) as i64).saturating_mul(n),
                None => facts.push((d, n)),
            }
        }
        Multiples { facts }
    }

    /// One index expression per fact, non-negative exactly where it holds
    /// (dims are non-negative): `0 - (%d % n)`, as a run-time variant's
    /// `when` writes a condition.
    pub fn conditions(&self) -> Vec<IExpr> {
        self.facts.iter().map(|&(d, n)| IExpr::sub(IExpr::c(0), IExpr::bin(IBin::Mod, IExpr::Sym(d), IExpr::c(n)))).collect()
    }
}

/// Scalar index expression (i64). Pure; total: division or modulo by zero
/// yields 0 (a `NonZero` guard keeps such points from mattering), and
/// arithmetic wraps on overflow.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum IExpr {
    Const(i64),
    Var(VarId),
    /// A dim symbol of the module (`LoopModule::dims`): fixed for a whole
    /// run, non-negative, its value known only when the module runs.
    /// Evaluation needs it bound first ([`IExpr::bind_dims`]).
    Sym(DimId),
    Bin(IBin, Box<IExpr>, Box<IExpr>),
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum IBin {
    Add,
    Sub,
    Mul,
    /// Floor division (Python `//`).
    FloorDiv,
    /// Ceiling division (`//^`).
    CeilDiv,
    /// Floor modulo (Python `%`: sign of the divisor).
    Mod,
    Min,
    Max,
}

impl IBin {
    /// The operation on concrete values (see `IExpr` for the totality
    /// conventions).
    pub fn apply(self, a: i64, b: i64) -> i64 {
        use crate::arith::{ceil_div, floor_div, floor_mod};
        match self {
            IBin::Add => a.wrapping_add(b),
            IBin::Sub => a.wrapping_sub(b),
            IBin::Mul => a.wrapping_mul(b),
            _ if b == 0 && matches!(self, IBin::FloorDiv | IBin::CeilDiv | IBin::Mod) => 0,
            IBin::FloorDiv => floor_div(a, b),
            IBin::CeilDiv => ceil_div(a, b),
            IBin::Mod => floor_mod(a, b),
            IBin::Min => a.min(b),
            IBin::Max => a.max(b),
        }
    }
}

impl IExpr {
    pub fn c(v: i64) -> IExpr {
        IExpr::Const(v)
    }

    pub fn v(v: VarId) -> IExpr {
        IExpr::Var(v)
    }

    pub fn bin(op: IBin, a: IExpr, b: IExpr) -> IExpr {
        IExpr::Bin(op, Box::new(a), Box::new(b))
    }

    // A constructor of the `Add` node, not the operator trait (which would
    // make `a + b` build IR silently).
    #[allow(clippy::should_implement_trait)]
    pub fn add(a: IExpr, b: IExpr) -> IExpr {
        IExpr::bin(IBin::Add, a, b)
    }

    // A constructor of the `Sub` node, not the operator trait (which would
    // make `a + b` build IR silently).
    #[allow(clippy::should_implement_trait)]
    pub fn sub(a: IExpr, b: IExpr) -> IExpr {
        IExpr::bin(IBin::Sub, a, b)
    }

    // A constructor of the `Mul` node, not the operator trait (which would
    // make `a + b` build IR silently).
    #[allow(clippy::should_implement_trait)]
    pub fn mul(a: IExpr, b: IExpr) -> IExpr {
        IExpr::bin(IBin::Mul, a, b)
    }

    /// `op(a, b)`, folded where both are constants and where an operand is
    /// an identity (`x + 0`, `1 * x`, `x // 1`, `(x - c) + c`, `max(x, 0)`
    /// of a non-negative `x`): exact rewrites, so static extents stay
    /// constants and symbolic ones stay short.
    pub fn fold(op: IBin, a: IExpr, b: IExpr) -> IExpr {
        match (op, &a, &b) {
            (_, IExpr::Const(x), IExpr::Const(y)) => IExpr::Const(op.apply(*x, *y)),
            (IBin::Add, IExpr::Const(0), _) => b,
            (IBin::Add | IBin::Sub, _, IExpr::Const(0)) => a,
            (IBin::Mul, IExpr::Const(1), _) => b,
            (IBin::Mul | IBin::FloorDiv | IBin::CeilDiv, _, IExpr::Const(1)) => a,
            (IBin::Add, IExpr::Bin(IBin::Sub, x, c), _) if **c == b => (**x).clone(),
            (IBin::Sub, IExpr::Bin(IBin::Add, x, c), _) if **c == b => (**x).clone(),
            (IBin::Max, _, IExpr::Const(0)) if a.is_non_negative() => a,
            _ => IExpr::bin(op, a, b),
        }
    }

    /// Is the expression `>= 0` whatever its dim symbols (which are) and
    /// with no loop variable in it?
    pub fn is_non_negative(&self) -> bool {
        match self {
            IExpr::Const(c) => *c >= 0,
            IExpr::Sym(_) => true,
            IExpr::Var(_) => false,
            IExpr::Bin(op, a, b) => match op {
                IBin::Add | IBin::Mul | IBin::FloorDiv | IBin::CeilDiv | IBin::Min => a.is_non_negative() && b.is_non_negative(),
                IBin::Max => a.is_non_negative() || b.is_non_negative(),
                IBin::Mod => b.is_non_negative(),
                IBin::Sub => false,
            },
        }
    }

    /// Value at a point; `env[v]` is variable `v`'s value. Dim symbols
    /// must have been bound ([`IExpr::bind_dims`]); an unbound one reads
    /// as 0, so that evaluation stays total (the verifier and the
    /// interpreter bind every symbol before anything is evaluated).
    pub fn eval(&self, env: &[i64]) -> i64 {
        match self {
            IExpr::Const(c) => *c,
            IExpr::Var(v) => env[*v],
            IExpr::Sym(_) => 0,
            IExpr::Bin(op, a, b) => op.apply(a.eval(env), b.eval(env)),
        }
    }

    /// The expression with dim symbol `d` replaced by `value[d]`, folded
    /// where both operands become constants: what a dynamic module is at
    /// one configuration of its dims.
    pub fn bind_dims(&self, value: &[i64]) -> IExpr {
        match self {
            IExpr::Sym(d) => value.get(*d).map_or_else(|| self.clone(), |&v| IExpr::Const(v)),
            IExpr::Const(_) | IExpr::Var(_) => self.clone(),
            IExpr::Bin(op, a, b) => match (a.bind_dims(value), b.bind_dims(value)) {
                (IExpr::Const(x), IExpr::Const(y)) => IExpr::Const(op.apply(x, y)),
                (x, y) => IExpr::bin(*op, x, y),
            },
        }
    }

    /// Does the expression mention any loop variable?
    pub fn uses_any_var(&self) -> bool {
        let mut any = false;
        self.for_each_var(&mut |_| any = true);
        any
    }

    /// Does the expression mention a dim symbol?
    pub fn is_symbolic(&self) -> bool {
        match self {
            IExpr::Sym(_) => true,
            IExpr::Const(_) | IExpr::Var(_) => false,
            IExpr::Bin(_, a, b) => a.is_symbolic() || b.is_symbolic(),
        }
    }

    /// Calls `f` on every dim symbol occurrence.
    pub fn for_each_sym(&self, f: &mut impl FnMut(DimId)) {
        match self {
            IExpr::Sym(d) => f(*d),
            IExpr::Const(_) | IExpr::Var(_) => {}
            IExpr::Bin(_, a, b) => {
                a.for_each_sym(f);
                b.for_each_sym(f);
            }
        }
    }

    pub fn as_const(&self) -> Option<i64> {
        match self {
            IExpr::Const(c) => Some(*c),
            _ => None,
        }
    }

    /// Does the expression mention `v`?
    pub fn uses(&self, v: VarId) -> bool {
        match self {
            IExpr::Const(_) | IExpr::Sym(_) => false,
            IExpr::Var(x) => *x == v,
            IExpr::Bin(_, a, b) => a.uses(v) || b.uses(v),
        }
    }

    /// Does the expression's value depend on `v`? Unlike [`IExpr::uses`],
    /// occurrences that cancel (`(i + o) - o`) do not count, also inside
    /// the factors of a product (`((i + o) - o) * %n.0`, what `shift-loops`
    /// leaves of a dynamic window's offset).
    pub fn depends_on(&self, v: VarId) -> bool {
        self.uses(v)
            && self.linear().terms.iter().any(|(atom, _)| match atom {
                IExpr::Bin(IBin::Mul, a, b) => a.depends_on(v) || b.depends_on(v),
                _ => atom.uses(v),
            })
    }

    /// Calls `f` on every variable occurrence.
    pub fn for_each_var(&self, f: &mut impl FnMut(VarId)) {
        match self {
            IExpr::Const(_) | IExpr::Sym(_) => {}
            IExpr::Var(x) => f(*x),
            IExpr::Bin(_, a, b) => {
                a.for_each_var(f);
                b.for_each_var(f);
            }
        }
    }

    /// Number of operations (the cost `simplify-index` minimises).
    pub fn op_count(&self) -> usize {
        match self {
            IExpr::Const(_) | IExpr::Var(_) | IExpr::Sym(_) => 0,
            IExpr::Bin(_, a, b) => 1 + a.op_count() + b.op_count(),
        }
    }
}

/// An expression as `constant + sum(coef * atom)`: sums, differences and
/// products by constants are expanded; any other subexpression (a
/// variable, a division, a product of two non-constants) is an atom.
/// Equal atoms are merged.
#[derive(Clone, Debug, PartialEq)]
pub struct Linear {
    pub constant: i64,
    pub terms: Vec<(IExpr, i64)>,
}

impl Linear {
    fn scale(mut self, c: i64) -> Linear {
        self.constant = self.constant.wrapping_mul(c);
        for t in &mut self.terms {
            t.1 = t.1.wrapping_mul(c);
        }
        self
    }

    fn plus(mut self, o: Linear) -> Linear {
        self.constant = self.constant.wrapping_add(o.constant);
        for (a, c) in o.terms {
            match self.terms.iter_mut().find(|(b, _)| *b == a) {
                Some(t) => t.1 = t.1.wrapping_add(c),
                None => self.terms.push((a, c)),
            }
        }
        self.terms.retain(|t| t.1 != 0);
        self
    }

    /// Coefficient of an atom (0 when absent).
    pub fn coef(&self, atom: &IExpr) -> i64 {
        self.terms.iter().find(|(a, _)| a == atom).map_or(0, |t| t.1)
    }

    /// Back to an expression (terms in order, then the constant).
    pub fn to_expr(&self) -> IExpr {
        let mut e: Option<IExpr> = None;
        for (a, c) in &self.terms {
            let t = if *c == 1 { a.clone() } else { IExpr::mul(a.clone(), IExpr::Const(*c)) };
            e = Some(match e {
                None => t,
                Some(x) => IExpr::add(x, t),
            });
        }
        match (e, self.constant) {
            (None, c) => IExpr::Const(c),
            (Some(x), 0) => x,
            (Some(x), c) => IExpr::add(x, IExpr::Const(c)),
        }
    }
}

impl IExpr {
    /// The expression as `rest + fixed` ([`IExpr::linear`] regrouped):
    /// `fixed` holds the constant and the terms whose atom is a variable
    /// `is_fixed` selects, `rest` the other terms; `None` when `fixed` is
    /// empty. The GPU's addresses are formed so (`rest` in i32, `fixed`
    /// a constant offset once `unroll` loops are unrolled), and
    /// `Kernel::index_fits_i32` checks `rest` too.
    pub fn split_fixed(&self, is_fixed: &dyn Fn(VarId) -> bool) -> Option<(IExpr, Linear)> {
        let l = self.linear();
        let (fixed, rest): (Vec<_>, Vec<_>) = l.terms.into_iter().partition(|(a, _)| matches!(a, IExpr::Var(v) if is_fixed(*v)));
        if fixed.is_empty() && l.constant == 0 {
            return None;
        }
        Some((Linear { constant: 0, terms: rest }.to_expr(), Linear { constant: l.constant, terms: fixed }))
    }

    /// `lo + w*(v - lo)`: the first of the `w` consecutive elements that
    /// value `v` of a loop from `lo` covers (a thread's vector:
    /// `register-tiles`' vector cells, `widen-threads`' lanes).
    pub fn vector_start(v: VarId, lo: i64, w: i64) -> IExpr {
        match lo {
            0 => IExpr::mul(IExpr::c(w), IExpr::v(v)),
            lo => IExpr::add(IExpr::c(lo), IExpr::mul(IExpr::c(w), IExpr::sub(IExpr::v(v), IExpr::c(lo)))),
        }
    }

    /// Is this offset, taken at the `w` consecutive values of each
    /// vector along `v` ([`IExpr::vector_start`]), one aligned access of
    /// `w` elements: unit stride in `v`, and a multiple of `w` at each
    /// vector's start (under the kernel's dim `facts`)?
    pub fn vector_aligned(&self, v: VarId, lo: i64, w: i64, facts: &Multiples) -> bool {
        self.unit_stride_in(v) && self.substitute(v, &IExpr::vector_start(v, lo, w)).residue_under(w, facts) == Some(0)
    }

    /// Is the expression `v + rest` with `rest` free of `v`: do
    /// consecutive values of `v` give consecutive elements? (A run of an
    /// `unroll` loop that one wide access can copy.)
    pub fn unit_stride_in(&self, v: VarId) -> bool {
        let l = self.linear();
        let me = IExpr::Var(v);
        l.coef(&me) == 1
            && l.terms.iter().all(|(a, _)| {
                let mut uses = false;
                a.for_each_var(&mut |x| uses |= x == v);
                *a == me || !uses
            })
    }

    pub fn linear(&self) -> Linear {
        match self {
            IExpr::Const(c) => Linear { constant: *c, terms: vec![] },
            IExpr::Bin(IBin::Add, a, b) => a.linear().plus(b.linear()),
            IExpr::Bin(IBin::Sub, a, b) => a.linear().plus(b.linear().scale(-1)),
            IExpr::Bin(IBin::Mul, a, b) => match (a.as_const(), b.as_const()) {
                (_, Some(c)) => a.linear().scale(c),
                (Some(c), _) => b.linear().scale(c),
                _ => Linear { constant: 0, terms: vec![(self.clone(), 1)] },
            },
            _ => Linear { constant: 0, terms: vec![(self.clone(), 1)] },
        }
    }

    /// The value of an expression of constants alone.
    fn closed(&self) -> Option<i64> {
        match self {
            IExpr::Const(c) => Some(*c),
            IExpr::Var(_) | IExpr::Sym(_) => None,
            IExpr::Bin(op, a, b) => Some(op.apply(a.closed()?, b.closed()?)),
        }
    }

    /// `Some(r)` when every value of the expression is `r` modulo `m`
    /// (`0 <= r < m`, `m > 0`) whatever its variables and symbols are: a
    /// congruence from its constants alone (`(k_o * 16) + 4` is 0 modulo 4,
    /// `(e % 16) * 4` too). Code generation aligns a load to the bytes its
    /// offset is provably a multiple of, and `block-tiles` gives a thread
    /// `W` consecutive elements only where their first is a multiple of `W`.
    pub fn residue(&self, m: i64) -> Option<i64> {
        self.residue_under(m, &Multiples::default())
    }

    /// [`IExpr::residue`] where the dim symbols are the multiples `facts`
    /// says (a run-time variant's kernel, `Kernel::multiples`): `k * %col.0`
    /// is 0 modulo 4 where `%col.0` is a multiple of 4.
    pub fn residue_under(&self, m: i64, facts: &Multiples) -> Option<i64> {
        if m <= 0 {
            return None;
        }
        let r = |x: i128| Some(x.rem_euclid(m as i128) as i64);
        match self {
            IExpr::Const(c) => r(*c as i128),
            IExpr::Sym(d) if facts.of(*d) % m == 0 => Some(0),
            IExpr::Var(_) | IExpr::Sym(_) => None,
            IExpr::Bin(op, a, b) => {
                let (x, y) = (a.residue_under(m, facts), b.residue_under(m, facts));
                match op {
                    IBin::Add => r(x? as i128 + y? as i128),
                    IBin::Sub => r(x? as i128 - y? as i128),
                    // A multiple of m times anything is a multiple of m.
                    IBin::Mul => match (x, y) {
                        (Some(0), _) | (_, Some(0)) => Some(0),
                        (x, y) => r(x? as i128 * y? as i128),
                    },
                    // a % c = a - c * (a // c) is a modulo any m dividing c.
                    IBin::Mod => match b.as_const() {
                        Some(c) if c != 0 && c % m == 0 => x,
                        _ => self.closed().and_then(|v| r(v as i128)),
                    },
                    IBin::Min | IBin::Max => x.filter(|&x| Some(x) == y),
                    // Of constants alone (an unrolled tile variable's digit
                    // `(3 - 0) // 4`, once code generation knows it): its value.
                    IBin::FloorDiv | IBin::CeilDiv => match (a.closed(), b.closed()) {
                        (Some(x), Some(y)) => r(op.apply(x, y) as i128),
                        _ => None,
                    },
                }
            }
        }
    }

    /// Inclusive interval of the expression's values given each
    /// variable's interval, as `(lo, hi)`: [`IExpr::range`] (the one
    /// interval analysis, `interval.rs`), empty when `lo > hi`.
    pub fn interval(&self, var: &dyn Fn(VarId) -> (i64, i64)) -> (i64, i64) {
        let r = self.range(&|v| {
            let (lo, hi) = var(v);
            Interval::new(lo, hi)
        });
        (r.lo, r.hi)
    }
}

impl Cond {
    pub fn holds(&self, env: &[i64]) -> bool {
        match self {
            Cond::InRange { e, lo, hi } => {
                let x = e.eval(env);
                lo.eval(env) <= x && x < hi.eval(env)
            }
            Cond::NonZero(e) => e.eval(env) != 0,
        }
    }

    pub fn exprs(&self) -> Vec<&IExpr> {
        match self {
            Cond::InRange { e, lo, hi } => vec![e, lo, hi],
            Cond::NonZero(e) => vec![e],
        }
    }

    pub fn exprs_mut(&mut self) -> Vec<&mut IExpr> {
        match self {
            Cond::InRange { e, lo, hi } => vec![e, lo, hi],
            Cond::NonZero(e) => vec![e],
        }
    }

    /// Does the condition hold at every `v` in `[0, lanes)` exactly where
    /// it holds at `v = 0`, under the dim facts `facts`? So where `v` does
    /// not matter, and for `lo <= e0 + v < hi` with `e0 - lo` and `hi -
    /// e0` multiples of `lanes` (a vector of `lanes` elements aligned to
    /// a range whose ends are: wholly in or wholly out). A guard of a
    /// vector's elements can then test its first alone.
    pub fn same_across_lanes(&self, v: VarId, lanes: i64, facts: &Multiples) -> bool {
        let Cond::InRange { e, lo, hi } = self else { return !self.exprs().iter().any(|e| e.depends_on(v)) };
        if lo.depends_on(v) || hi.depends_on(v) {
            return false;
        }
        if !e.depends_on(v) {
            return true;
        }
        let lin = e.linear();
        let atom = IExpr::v(v);
        if lin.coef(&atom) != 1 || lin.terms.iter().any(|(a, _)| a.uses(v) && *a != atom) {
            return false;
        }
        let e0 = e.substitute(v, &IExpr::c(0));
        let aligned = |x: IExpr| x.residue_under(lanes, facts) == Some(0);
        aligned(IExpr::sub(e0.clone(), lo.clone())) && aligned(IExpr::sub(hi.clone(), e0))
    }
}

impl IExpr {
    /// The expression with every variable `v` renamed `f(v)`.
    pub fn rename_vars(&self, f: &impl Fn(VarId) -> VarId) -> IExpr {
        match self {
            IExpr::Var(x) => IExpr::Var(f(*x)),
            IExpr::Const(_) | IExpr::Sym(_) => self.clone(),
            IExpr::Bin(op, a, b) => IExpr::bin(*op, a.rename_vars(f), b.rename_vars(f)),
        }
    }

    /// The expression with every occurrence of `v` replaced by `by`.
    pub fn substitute(&self, v: VarId, by: &IExpr) -> IExpr {
        match self {
            IExpr::Var(x) if *x == v => by.clone(),
            IExpr::Const(_) | IExpr::Var(_) | IExpr::Sym(_) => self.clone(),
            IExpr::Bin(op, a, b) => IExpr::bin(*op, a.substitute(v, by), b.substitute(v, by)),
        }
    }
}

/// `v` split into tiles of `factor` contiguous points, `t` the point in
/// the tile: `lo + (v - lo)*factor + t` for `v` from `lo` (the tiled
/// loops of `register-tiles{layout=blocked}`, `block-tiles`,
/// `interleave-sums`).
pub fn tile_index(v: VarId, lo: i64, factor: i64, t: VarId) -> IExpr {
    let tile = |x: IExpr| IExpr::add(IExpr::mul(x, IExpr::c(factor)), IExpr::v(t));
    if lo == 0 {
        tile(IExpr::v(v))
    } else {
        IExpr::add(IExpr::c(lo), tile(IExpr::sub(IExpr::v(v), IExpr::c(lo))))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn split_fixed_separates_constants_and_chosen_variables() {
        // ((r * 16 + t) * 256 + c) + 5 with t fixed: r*4096 + c, and t*256 + 5.
        let (r, t, c) = (IExpr::v(0), IExpr::v(1), IExpr::v(2));
        let e = IExpr::add(IExpr::add(IExpr::mul(IExpr::add(IExpr::mul(r.clone(), IExpr::c(16)), t.clone()), IExpr::c(256)), c.clone()), IExpr::c(5));
        let (rest, fixed) = e.split_fixed(&|v| v == 1).expect("splits");
        assert_eq!(rest, IExpr::add(IExpr::mul(r.clone(), IExpr::c(4096)), c.clone()));
        assert_eq!((fixed.constant, fixed.terms), (5, vec![(t, 256)]));
        // Nothing fixed, no constant: no split.
        assert_eq!(IExpr::add(r, c).split_fixed(&|v| v == 1), None);
    }

    #[test]
    fn residue_holds_for_every_value() {
        let (e, k) = (IExpr::v(0), IExpr::v(1));
        // The copy's source offset: ((e // 16) % 16) * 256 + k * 16 + (e % 4) * 4 + 8.
        let off = IExpr::add(
            IExpr::add(
                IExpr::add(
                    IExpr::mul(IExpr::bin(IBin::Mod, IExpr::bin(IBin::FloorDiv, e.clone(), IExpr::c(16)), IExpr::c(16)), IExpr::c(256)),
                    IExpr::mul(k.clone(), IExpr::c(16)),
                ),
                IExpr::mul(IExpr::bin(IBin::Mod, e.clone(), IExpr::c(4)), IExpr::c(4)),
            ),
            IExpr::c(8),
        );
        assert_eq!(off.residue(4), Some(0));
        assert_eq!(off.residue(2), Some(0));
        // `(e % 4) * 4` is 0, 4, 8 or 12 modulo 16.
        assert_eq!(off.residue(16), None);
        // `e % 16` is e modulo 4; `e // 4` is anything; a variable is anything.
        let m = IExpr::add(IExpr::bin(IBin::Mod, IExpr::mul(e.clone(), IExpr::c(4)), IExpr::c(16)), IExpr::c(-3));
        assert_eq!(m.residue(4), Some(1));
        assert_eq!(IExpr::mul(IExpr::bin(IBin::FloorDiv, e.clone(), IExpr::c(4)), IExpr::c(2)).residue(4), None);
        // A quotient of constants is known: `(7 - 0) // 4` is 1.
        let q = IExpr::bin(IBin::FloorDiv, IExpr::sub(IExpr::c(7), IExpr::c(0)), IExpr::c(4));
        assert_eq!(IExpr::add(IExpr::mul(q.clone(), IExpr::c(64)), IExpr::mul(e.clone(), IExpr::c(4))).residue(4), Some(0));
        assert_eq!(q.residue(4), Some(1));
        assert_eq!(IExpr::add(k.clone(), IExpr::c(4)).residue(4), None);
        for (x, y) in (-40..40).flat_map(|x| (-5..5).map(move |y| (x, y))) {
            assert_eq!(off.eval(&[x, y]).rem_euclid(4), 0);
            assert_eq!(m.eval(&[x, y]).rem_euclid(4), 1);
        }
    }

    #[test]
    fn residues_count_the_dim_facts_and_nothing_else() {
        // `(r * %1 + 4 * c) + l` with `%1` (a row length) a multiple of 4.
        let (r, c, l) = (IExpr::v(0), IExpr::v(1), IExpr::v(2));
        let row = IExpr::add(IExpr::mul(r.clone(), IExpr::Sym(1)), IExpr::mul(IExpr::c(4), c.clone()));
        let facts = Multiples { facts: vec![(1, 4)] };
        assert_eq!(row.residue(4), None);
        assert_eq!(row.residue_under(4, &facts), Some(0));
        assert_eq!(row.residue_under(2, &facts), Some(0));
        // A multiple of 4 is not known modulo 8, nor is another symbol.
        assert_eq!(row.residue_under(8, &facts), None);
        assert_eq!(IExpr::mul(r.clone(), IExpr::Sym(0)).residue_under(4, &facts), None);
        assert_eq!(IExpr::add(IExpr::Sym(1), IExpr::c(6)).residue_under(4, &facts), Some(2));
        // Every value agrees, at dims that meet the fact.
        let e = IExpr::add(IExpr::add(row.clone(), IExpr::Sym(1)), IExpr::c(3));
        assert_eq!(e.residue_under(4, &facts), Some(3));
        for (x, y, d) in (-6..6).flat_map(|x| (-3..3).flat_map(move |y| (0..40).step_by(4).map(move |d| (x, y, d)))) {
            assert_eq!(e.bind_dims(&[7, d]).eval(&[x, y, 0]).rem_euclid(4), 3);
        }
        // A fused kernel assumes both kernels' facts.
        let both = facts.union(&Multiples { facts: vec![(0, 2), (1, 6)] });
        assert_eq!(both, Multiples { facts: vec![(1, 12), (0, 2)] });
        // The conditions are exactly the facts: non-negative at multiples.
        let when = facts.conditions();
        assert_eq!(when.len(), 1);
        for d in 0..20 {
            assert_eq!(when[0].bind_dims(&[5, d]).eval(&[]) >= 0, d % 4 == 0, "{d}");
        }
        // Lanes: `0 <= row + l < %1` holds for all of `l` in [0, 4) exactly
        // where it holds at `l = 0` under the fact, not without it, and not
        // for a row that does not start at a multiple.
        let lanes = Cond::InRange { e: IExpr::add(row.clone(), l.clone()), lo: IExpr::c(0), hi: IExpr::Sym(1) };
        assert!(lanes.same_across_lanes(2, 4, &facts));
        assert!(!lanes.same_across_lanes(2, 4, &Multiples::default()));
        let off = Cond::InRange { e: IExpr::add(IExpr::add(row.clone(), IExpr::c(1)), l.clone()), lo: IExpr::c(0), hi: IExpr::Sym(1) };
        assert!(!off.same_across_lanes(2, 4, &facts));
        let twice = Cond::InRange { e: IExpr::add(row.clone(), IExpr::mul(IExpr::c(2), l.clone())), lo: IExpr::c(0), hi: IExpr::Sym(1) };
        assert!(!twice.same_across_lanes(2, 4, &facts));
        assert!(Cond::InRange { e: row.clone(), lo: IExpr::c(0), hi: IExpr::Sym(0) }.same_across_lanes(2, 4, &Multiples::default()));
        for (x, y, d) in (-3..6).flat_map(|x| (-3..12).flat_map(move |y| (0..24).step_by(4).map(move |d| (x, y, d)))) {
            let at = |lv: i64| Cond::InRange { e: lanes.exprs()[0].bind_dims(&[0, d]), lo: IExpr::c(0), hi: IExpr::c(d) }.holds(&[x, y, lv]);
            assert!((0..4).all(|lv| at(lv) == at(0)), "{x} {y} {d}");
        }
    }

    #[test]
    fn index_ops_follow_python_and_are_total() {
        assert_eq!(IBin::FloorDiv.apply(-7, 2), -4);
        assert_eq!(IBin::CeilDiv.apply(-7, 2), -3);
        assert_eq!(IBin::Mod.apply(-7, 2), 1);
        assert_eq!(IBin::Mod.apply(7, -2), -1);
        assert_eq!(IBin::FloorDiv.apply(5, 0), 0);
        assert_eq!(IBin::Min.apply(3, -1), -1);
        let e = IExpr::sub(IExpr::v(0), IExpr::mul(IExpr::c(2), IExpr::v(1)));
        assert_eq!(e.eval(&[7, 3]), 1);
        assert!(e.uses(1) && !e.uses(2));
        assert_eq!(e.op_count(), 2);
    }
}
