//! `max(a, b)` and `min(a, b)` on floats, and the combine of `max=` /
//! `min=` (docs/semantics.md, "max and min"): a NaN operand is the result
//! (NumPy's `maximum`, TensorFlow's `reduce_max`), and of two zeros `max`
//! gives +0 unless both are -0 (`min` the reverse), so the result does not
//! depend on the order of the operands or of a reduction.
//!
//! Only comparisons, selects, adds and multiplies by -1 (all exact), so
//! the same code is exact in f32 and f64, and the NaN returned is an
//! operand itself (no arithmetic produces a new one).

use super::MathOps;

pub fn max<M: MathOps>(m: &mut M, a: M::F, b: M::F) -> M::F {
    let (gt, lt) = (m.flt(b, a), m.flt(a, b));
    // Equal: zeros of either sign add to the larger zero; other values are
    // the same value.
    let zero = m.fconst(0.0);
    let a_zero = m.feq(a, zero);
    let sum = m.fadd(a, b);
    let equal = m.fselect(a_zero, sum, a);
    let ordered = m.fselect(lt, b, equal);
    let ordered = m.fselect(gt, a, ordered);
    nan_first(m, a, b, ordered)
}

pub fn min<M: MathOps>(m: &mut M, a: M::F, b: M::F) -> M::F {
    let (lt, gt) = (m.flt(a, b), m.flt(b, a));
    // Equal zeros: -(-a + -b) is -0 unless both are +0.
    let (zero, neg) = (m.fconst(0.0), m.fconst(-1.0));
    let a_zero = m.feq(a, zero);
    let (na, nb) = (m.fmul(neg, a), m.fmul(neg, b));
    let sum = m.fadd(na, nb);
    let sum = m.fmul(neg, sum);
    let equal = m.fselect(a_zero, sum, a);
    let ordered = m.fselect(gt, b, equal);
    let ordered = m.fselect(lt, a, ordered);
    nan_first(m, a, b, ordered)
}

/// `a` if it is NaN, else `b` if it is NaN, else `ordered`.
fn nan_first<M: MathOps>(m: &mut M, a: M::F, b: M::F, ordered: M::F) -> M::F {
    let (a_nan, b_nan) = (m.fisnan(a), m.fisnan(b));
    let x = m.fselect(b_nan, b, ordered);
    m.fselect(a_nan, a, x)
}
