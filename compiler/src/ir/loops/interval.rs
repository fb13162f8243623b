//! Intervals of `i64` values and the bounds of each index operator on
//! them: the one interval analysis of the compiler (`simplify-index`'s
//! e-class analysis, `IExpr::interval`, and the work counter of `work.rs`
//! use it).
//!
//! Soundness under the loop dialect's *wrapping* arithmetic is the point of
//! care here. Bounds are computed exactly in `i128`; when a result bound
//! leaves `i64`, some point may wrap, so the interval becomes the full range
//! instead of a saturated one (a saturated `[MAX, MAX]` for `x + 1` would
//! fold to `MAX` while the program computes `MIN`). When every operand is a
//! single constant the operator itself is applied, wrapping included, so
//! constant folding is exact.

use super::{geometry, IBin, IExpr, Kernel, LoopKind, Node, VarId};
use crate::arith::wide;

/// An inclusive range of `i64` values; empty when `lo > hi`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Interval {
    pub lo: i64,
    pub hi: i64,
}

impl Interval {
    /// Every `i64`: what is known about an unconstrained value.
    pub const FULL: Interval = Interval { lo: i64::MIN, hi: i64::MAX };
    /// A dim symbol's values: any non-negative `i64` (what the shape
    /// program admits before a run).
    pub const DIM: Interval = Interval { lo: 0, hi: i64::MAX };
    /// No value: the domain is empty (dead code).
    pub const EMPTY: Interval = Interval { lo: 1, hi: 0 };

    pub fn new(lo: i64, hi: i64) -> Interval {
        Interval { lo, hi }
    }

    pub fn point(c: i64) -> Interval {
        Interval { lo: c, hi: c }
    }

    pub fn is_empty(self) -> bool {
        self.lo > self.hi
    }

    /// The single value, when there is exactly one.
    pub fn as_const(self) -> Option<i64> {
        (self.lo == self.hi).then_some(self.lo)
    }

    pub fn contains(self, x: i64) -> bool {
        self.lo <= x && x <= self.hi
    }

    pub fn intersect(self, o: Interval) -> Interval {
        Interval { lo: self.lo.max(o.lo), hi: self.hi.min(o.hi) }
    }

    /// The hull of two intervals (an empty side contributes nothing).
    fn hull(self, o: Interval) -> Interval {
        if self.is_empty() {
            o
        } else if o.is_empty() {
            self
        } else {
            Interval { lo: self.lo.min(o.lo), hi: self.hi.max(o.hi) }
        }
    }

    /// Exact `i128` bounds: the full range when either leaves `i64`,
    /// because then some point of the domain may wrap.
    pub fn from_wide(lo: i128, hi: i128) -> Interval {
        match (i64::try_from(lo), i64::try_from(hi)) {
            (Ok(lo), Ok(hi)) => Interval { lo, hi },
            _ => Interval::FULL,
        }
    }

    /// Exact bounds of `a + b`, `a - b` or `a * b` taken as mathematical
    /// integers, or `None` when some point leaves `i64` (where the dialect
    /// would wrap). Conditions that need "no wrapping anywhere" use this,
    /// not `apply`, which folds constants *with* wrapping.
    pub fn exact(op: IBin, a: Interval, b: Interval) -> Option<Interval> {
        if a.is_empty() || b.is_empty() {
            return None;
        }
        let (al, ah, bl, bh) = (a.lo as i128, a.hi as i128, b.lo as i128, b.hi as i128);
        let (lo, hi) = match op {
            IBin::Add => (al + bl, ah + bh),
            IBin::Sub => (al - bh, ah - bl),
            IBin::Mul => {
                let p = [al * bl, al * bh, ah * bl, ah * bh];
                (p.iter().copied().min()?, p.iter().copied().max()?)
            }
            _ => return None,
        };
        Some(Interval { lo: i64::try_from(lo).ok()?, hi: i64::try_from(hi).ok()? })
    }

    /// Bounds of `op` applied to any `a` in `self` and `b` in `o`, under the
    /// loop dialect's semantics (wrapping; division and modulo by 0 give 0).
    pub fn apply(op: IBin, a: Interval, b: Interval) -> Interval {
        if a.is_empty() || b.is_empty() {
            return Interval::EMPTY;
        }
        if let (Some(x), Some(y)) = (a.as_const(), b.as_const()) {
            return Interval::point(op.apply(x, y));
        }
        let (al, ah, bl, bh) = (a.lo as i128, a.hi as i128, b.lo as i128, b.hi as i128);
        match op {
            IBin::Add => Interval::from_wide(al + bl, ah + bh),
            IBin::Sub => Interval::from_wide(al - bh, ah - bl),
            IBin::Mul => {
                let p = [al * bl, al * bh, ah * bl, ah * bh];
                Interval::from_wide(*p.iter().min().unwrap_or(&0), *p.iter().max().unwrap_or(&0))
            }
            IBin::FloorDiv => Interval::divide(a, b, wide::floor_div),
            IBin::CeilDiv => Interval::divide(a, b, wide::ceil_div),
            IBin::Mod => Interval::modulo(a, b),
            IBin::Min => Interval { lo: a.lo.min(b.lo), hi: a.hi.min(b.hi) },
            IBin::Max => Interval { lo: a.lo.max(b.lo), hi: a.hi.max(b.hi) },
        }
    }

    /// The negative and positive parts of a divisor interval (either may
    /// be empty); zero is handled by the callers (it yields 0).
    fn sign_parts(b: Interval) -> [Interval; 2] {
        let neg = if b.lo <= -1 { Interval::new(b.lo, b.hi.min(-1)) } else { Interval::EMPTY };
        let pos = if b.hi >= 1 { Interval::new(b.lo.max(1), b.hi) } else { Interval::EMPTY };
        [neg, pos]
    }

    /// Floor or ceiling division. On a divisor range of one sign the
    /// quotient is monotone in each operand, so its extremes are at the
    /// corners; the two sign parts are joined, plus 0 when 0 is a divisor.
    fn divide(a: Interval, b: Interval, div: fn(i128, i128) -> i128) -> Interval {
        let mut out = if b.contains(0) { Interval::point(0) } else { Interval::EMPTY };
        for part in Interval::sign_parts(b) {
            if part.is_empty() {
                continue;
            }
            let mut lo = i128::MAX;
            let mut hi = i128::MIN;
            for x in [a.lo as i128, a.hi as i128] {
                for d in [part.lo as i128, part.hi as i128] {
                    let q = div(x, d);
                    lo = lo.min(q);
                    hi = hi.max(q);
                }
            }
            // `MIN // -1` leaves i64 and wraps: `from_wide` gives FULL then.
            out = out.hull(Interval::from_wide(lo, hi));
        }
        out
    }

    /// Floor modulo: the result has the divisor's sign and is smaller in
    /// magnitude. Tighter facts: when `a` lies inside one period of a
    /// constant divisor, `a % d == a - k*d` on all of it; when `a` is
    /// already inside `[0, d)` (or `(d, 0]`) for every divisor, `a % d == a`.
    fn modulo(a: Interval, b: Interval) -> Interval {
        let mut out = if b.contains(0) { Interval::point(0) } else { Interval::EMPTY };
        let [neg, pos] = Interval::sign_parts(b);
        if !pos.is_empty() {
            let r = if let Some(d) = pos.as_const().filter(|_| wide::floor_div(a.lo as i128, pos.lo as i128) == wide::floor_div(a.hi as i128, pos.lo as i128)) {
                let k = wide::floor_div(a.lo as i128, d as i128) * d as i128;
                Interval::from_wide(a.lo as i128 - k, a.hi as i128 - k)
            } else if a.lo >= 0 && a.hi < pos.lo {
                a
            } else if a.lo >= 0 {
                Interval::new(0, (pos.hi - 1).min(a.hi))
            } else {
                Interval::new(0, pos.hi - 1)
            };
            out = out.hull(r);
        }
        if !neg.is_empty() {
            let r = if let Some(d) = neg.as_const().filter(|_| wide::floor_div(a.lo as i128, neg.lo as i128) == wide::floor_div(a.hi as i128, neg.lo as i128)) {
                let k = wide::floor_div(a.lo as i128, d as i128) * d as i128;
                Interval::from_wide(a.lo as i128 - k, a.hi as i128 - k)
            } else if a.hi <= 0 && a.lo > neg.hi {
                a
            } else if a.hi <= 0 {
                Interval::new((neg.lo + 1).max(a.lo), 0)
            } else {
                Interval::new(neg.lo + 1, 0)
            };
            out = out.hull(r);
        }
        out
    }
}

impl IExpr {
    /// The values the expression takes when each variable `v` ranges over
    /// `var(v)` ([`Interval::apply`] on each operator).
    pub fn range(&self, var: &dyn Fn(VarId) -> Interval) -> Interval {
        match self {
            IExpr::Const(c) => Interval::point(*c),
            IExpr::Var(v) => var(*v),
            IExpr::Sym(_) => Interval::DIM,
            IExpr::Bin(op, a, b) => Interval::apply(*op, a.range(var), b.range(var)),
        }
    }
}

/// The `i32` values, as an interval.
const I32: Interval = Interval { lo: i32::MIN as i64, hi: i32::MAX as i64 };

fn fits_i32(r: Interval) -> bool {
    r.is_empty() || (I32.contains(r.lo) && I32.contains(r.hi))
}

/// The range of `e` when it and every sub-expression fit in `i32`.
fn range_i32(e: &IExpr, env: &[Interval]) -> Option<Interval> {
    let r = match e {
        IExpr::Const(c) => Interval::point(*c),
        IExpr::Var(v) => env.get(*v).copied().unwrap_or(Interval::FULL),
        IExpr::Sym(_) => Interval::DIM,
        IExpr::Bin(op, a, b) => Interval::apply(*op, range_i32(a, env)?, range_i32(b, env)?),
    };
    fits_i32(r).then_some(r)
}

impl Kernel {
    /// Whether every value the kernel's index arithmetic can take fits in
    /// `i32`: each sub-expression of each index expression, each loop
    /// variable and bound, each address's `rest` (`IExpr::split_fixed`)
    /// and a `spread` loop's start `lo + tid` (tid below the block size). Then the arithmetic gives the same
    /// results in `i32` as in `i64` (no operation can wrap in either), so
    /// the GPU lowering computes indices in `i32` (cheaper: one instruction
    /// and one register each). Guards are not used to narrow; a loaded
    /// index is any `i32`.
    pub fn index_fits_i32(&self) -> bool {
        let step = geometry::block_size(self).unwrap_or(1).max(1);
        let unrolled = self.unroll_vars();
        let mut env = vec![Interval::FULL; self.vars.len()];
        nodes_fit_i32(&self.body, step, &|v| unrolled.get(v).copied().unwrap_or(false), &mut env)
    }

    /// Which variables `unroll` loops bind (constants once unrolled).
    pub fn unroll_vars(&self) -> Vec<bool> {
        let mut out = vec![false; self.vars.len()];
        self.walk(&mut |n| {
            if let Node::For(l) = n {
                if l.kind == LoopKind::Unroll {
                    if let Some(u) = out.get_mut(l.var) {
                        *u = true;
                    }
                }
            }
        });
        out
    }
}

fn nodes_fit_i32(nodes: &[Node], spread_step: i64, unrolled: &dyn Fn(VarId) -> bool, env: &mut Vec<Interval>) -> bool {
    nodes.iter().all(|n| {
        if !n.own_exprs().iter().all(|e| range_i32(e, env).is_some()) {
            return false;
        }
        // An address's `rest` (`IExpr::split_fixed`) is computed too.
        let rest_fits = |e: &IExpr| e.split_fixed(unrolled).is_none_or(|(rest, _)| range_i32(&rest, env).is_some());
        if !n.offsets().into_iter().all(rest_fits) {
            return false;
        }
        match n {
            Node::For(l) => {
                let (Some(lo), Some(hi)) = (range_i32(&l.lo, env), range_i32(&l.hi, env)) else { return false };
                let step = if l.kind == LoopKind::Spread { spread_step } else { 1 };
                // A spread loop starts at `lo + tid` (tid < step), in i32;
                // the counter itself is i64 (codegen, `Node::For`).
                if !fits_i32(Interval::new(lo.lo, lo.hi.saturating_add(step - 1))) {
                    return false;
                }
                let Some(slot) = env.get_mut(l.var) else { return false };
                *slot = Interval::new(lo.lo, hi.hi.saturating_sub(1));
                nodes_fit_i32(&l.body, spread_step, unrolled, env)
            }
            Node::Guard(g) => nodes_fit_i32(&g.body, spread_step, unrolled, env),
            Node::LoadIndex { var, .. } => match env.get_mut(*var) {
                Some(slot) => {
                    *slot = I32;
                    true
                }
                None => false,
            },
            Node::Compute(_) | Node::Sync | Node::Copies(_) => true,
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ir::loops::IBin::*;

    fn iv(lo: i64, hi: i64) -> Interval {
        Interval::new(lo, hi)
    }

    /// Checks `apply` against every point of small intervals: each result
    /// lies inside the computed bounds, and the bounds are attained.
    fn exhaustive(op: IBin, a: Interval, b: Interval) {
        let r = Interval::apply(op, a, b);
        let mut seen_lo = i64::MAX;
        let mut seen_hi = i64::MIN;
        for x in a.lo..=a.hi {
            for y in b.lo..=b.hi {
                let v = op.apply(x, y);
                assert!(r.contains(v), "{op:?} {x} {y} = {v} not in {r:?} (a {a:?}, b {b:?})");
                seen_lo = seen_lo.min(v);
                seen_hi = seen_hi.max(v);
            }
        }
        // Exact for everything but modulo, whose bounds are a hull.
        if op != Mod {
            assert_eq!(r, iv(seen_lo, seen_hi), "{op:?} {a:?} {b:?}");
        }
    }

    #[test]
    fn bounds_contain_every_point_of_small_intervals() {
        let ivs = [iv(-7, -3), iv(-4, 4), iv(0, 0), iv(0, 5), iv(2, 2), iv(3, 11), iv(-1, 0), iv(-9, -9), iv(-5, 1)];
        for op in [Add, Sub, Mul, FloorDiv, CeilDiv, Mod, Min, Max] {
            for a in ivs {
                for b in ivs {
                    exhaustive(op, a, b);
                }
            }
        }
    }

    #[test]
    fn modulo_inside_one_period_shifts() {
        // x in [8, 10], x % 4 is x - 8.
        assert_eq!(Interval::apply(Mod, iv(8, 10), Interval::point(4)), iv(0, 2));
        // x in [-3, -1], x % -4 is x itself.
        assert_eq!(Interval::apply(Mod, iv(-3, -1), Interval::point(-4)), iv(-3, -1));
        // Straddling a period boundary: the whole residue range.
        assert_eq!(Interval::apply(Mod, iv(3, 5), Interval::point(4)), iv(0, 3));
    }

    #[test]
    fn possible_wrap_gives_full_range() {
        let top = iv(i64::MAX - 1, i64::MAX);
        assert_eq!(Interval::apply(Add, top, iv(0, 1)), Interval::FULL);
        assert_eq!(Interval::apply(Mul, iv(1 << 40, 1 << 41), iv(1 << 30, 1 << 31)), Interval::FULL);
        // MIN // -1 wraps to MIN in the dialect.
        assert_eq!(Interval::apply(FloorDiv, iv(i64::MIN, i64::MIN + 1), iv(-1, -1)), Interval::FULL);
        // Constants fold exactly, wrapping like the program does.
        assert_eq!(Interval::apply(Add, Interval::point(i64::MAX), Interval::point(1)), Interval::point(i64::MIN));
    }

    #[test]
    fn exact_refuses_wrapping_even_for_constants() {
        let big = Interval::point(1 << 62);
        assert_eq!(Interval::exact(Mul, big, Interval::point(3)), None);
        assert_eq!(Interval::exact(Mul, big, Interval::point(1)), Some(big));
        assert_eq!(Interval::exact(Sub, iv(0, 5), iv(-2, 1)), Some(iv(-1, 7)));
        assert_eq!(Interval::exact(Sub, Interval::point(i64::MIN), Interval::point(1)), None);
    }

    /// The kernel of a module of buffers `x`, `y` (f32[2^20]) and `ix`
    /// (i32[4]) whose body is `body`.
    fn kernel(body: &str) -> Kernel {
        let text = format!("buffer x : f32[1048576] input\nbuffer y : f32[1048576] output\nbuffer ix : i32[4] input\nkernel @k {{\n{body}\n}}\n");
        crate::ir::loops::parse::parse_module(&text).expect("parses").kernels.remove(0)
    }

    #[test]
    fn index_width_is_i32_only_when_every_value_fits() {
        let fits = |body: &str| kernel(body).index_fits_i32();
        // Offsets below 2^20, negative values, division: i32.
        assert!(fits("for i in [0, 1024) parallel { for k in [0, 1024) reduce { %0 = load x[((k * 1024) + i)] : f32\n accumulate y[i] += %0 } }"));
        assert!(fits("for i in [0, 1024) parallel { %0 = load x[((((i - 512) // -3) + 171) % 1024)] : f32\n store y[i] = %0 }"));
        // A register tile's unrolled variable; a loop right up to i32::MAX.
        assert!(fits("for i in [0, 1024) parallel { for t in [0, 4) unroll { %0 = const 0.0 : f32\n store y[((i * 4) + t)] = %0 } }"));
        assert!(fits("for i in [0, 2147483647) reduce { %0 = const 0.0 : f32\n store y[(i % 1048576)] = %0 }"));
        // An intermediate reaches 2^32 though the offset is below 2^20.
        assert!(!fits(
            "for i in [0, 1024) parallel { for j in [0, 1024) parallel { %0 = load x[(((i * j) * 4096) % 1048576)] : f32\n store y[((i * 1024) + j)] = %0 } }"
        ));
        // A bound or a guard's value beyond i32.
        assert!(!fits("for i in [0, 2147483648) reduce { %0 = const 0.0 : f32\n store y[(i % 1048576)] = %0 }"));
        assert!(!fits("for i in [0, 1024) parallel { guard 0 <= (i * 4294967296) < 1 { %0 = const 0.0 : f32\n store y[i] = %0 } }"));
        // A loaded index is any i32: itself fits, one more may not.
        assert!(fits("v = load_index ix[0]\n guard 0 <= v < 1048576 { %0 = load x[v] : f32\n store y[0] = %0 }"));
        assert!(!fits("v = load_index ix[0]\n guard 0 <= (v + 1) < 1048576 { %0 = load x[(v + 1)] : f32\n store y[0] = %0 }"));
    }

    #[test]
    fn division_by_a_range_through_zero_includes_zero() {
        assert_eq!(Interval::apply(FloorDiv, iv(10, 10), iv(0, 0)), iv(0, 0));
        assert_eq!(Interval::apply(FloorDiv, iv(10, 20), iv(0, 5)), iv(0, 20));
    }
}
