//! log: fdlibm's e_log.c, without branches, in musl's formulation.
//!
//! x = 2^k * (1+f) with sqrt(2)/2 <= 1+f < sqrt(2); s = f/(2+f) and
//! log(1+f) = f - f^2/2 + s*(f^2/2 + R(s^2)), R fdlibm's Remez polynomial
//! (error < 2^-58.45); log(x) = k*ln2 + log(1+f). Error < 1 ulp.

use super::{horner, log_reduce, nan, MathOps, LN2_HI, LN2_LO};

/// fdlibm e_log.c's Lg1..Lg7: R(z) = z*(Lg1 + z*(Lg2 + ... + z*Lg7)), here
/// split into its odd and even parts as fdlibm evaluates it.
const LG_ODD: [f64; 4] = [
    f64::from_bits(0x3fe5_5555_5555_5593), // Lg1 6.666666666666735130e-01
    f64::from_bits(0x3fd2_4924_9422_9359), // Lg3 2.857142874366239149e-01
    f64::from_bits(0x3fc7_4664_96cb_03de), // Lg5 1.818357216161805012e-01
    f64::from_bits(0x3fc2_f112_df3e_5244), // Lg7 1.479819860511658591e-01
];
const LG_EVEN: [f64; 3] = [
    f64::from_bits(0x3fd9_9999_9997_fa04), // Lg2 3.999999999940941908e-01
    f64::from_bits(0x3fcc_71c5_1d8e_78af), // Lg4 2.222219843214978396e-01
    f64::from_bits(0x3fc3_9a09_d078_c69f), // Lg6 1.531383769920937332e-01
];

/// The natural logarithm; log(x < 0) = NaN, log(±0) = -inf,
/// log(+inf) = +inf, log(NaN) = NaN.
pub fn log<M: MathOps>(m: &mut M, x: M::F) -> M::F {
    let (f, k) = log_reduce(m, x);
    let half = m.fconst(0.5);
    let hf = m.fmul(half, f);
    let hfsq = m.fmul(hf, f);
    let two = m.fconst(2.0);
    let d = m.fadd(two, f);
    let s = m.fdiv(f, d);
    let z = m.fmul(s, s);
    let w = m.fmul(z, z);
    let t1 = horner(m, w, &LG_EVEN);
    let t1 = m.fmul(w, t1);
    let t2 = horner(m, w, &LG_ODD);
    let t2 = m.fmul(z, t2);
    let r = m.fadd(t2, t1);

    // s*(hfsq+R) + k*ln2_lo - hfsq + f + k*ln2_hi, left to right.
    let dk = m.itof(k);
    let t = m.fadd(hfsq, r);
    let acc = m.fmul(s, t);
    let ln2_lo = m.fconst(LN2_LO);
    let t = m.fmul(dk, ln2_lo);
    let acc = m.fadd(acc, t);
    let acc = m.fsub(acc, hfsq);
    let acc = m.fadd(acc, f);
    let ln2_hi = m.fconst(LN2_HI);
    let t = m.fmul(dk, ln2_hi);
    let y = m.fadd(acc, t);

    let inf = m.fconst(f64::INFINITY);
    let is_inf = m.feq(x, inf);
    let y = m.fselect(is_inf, inf, y);
    let zero = m.fconst(0.0);
    let is_zero = m.feq(x, zero);
    let neg_inf = m.fconst(f64::NEG_INFINITY);
    let y = m.fselect(is_zero, neg_inf, y);
    let negative = m.flt(x, zero);
    let is_nan = m.fisnan(x);
    let bad = m.or(negative, is_nan);
    let nan = nan(m);
    m.fselect(bad, nan, y)
}
