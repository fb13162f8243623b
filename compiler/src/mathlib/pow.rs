//! pow: x^y = exp(y*log|x|) with log|x| and the product in double-double,
//! then C99 Annex F's special cases and the sign, all by select.
//!
//! log|x| = k*ln2 + 2*atanh(s), s = f/(2+f) as in log, but carried as
//! hi + lo to about 2^-68 relative: s, s^2, s^3 and the series' first
//! three terms are double-double (fma residuals), the rest,
//! s^7*(2/7 + ...), is small enough for plain doubles, and the partial sums
//! are exact two-sums. The product with y is split the same way, and
//! exp_dd takes its low part into the reduction, so the result carries
//! exp's error (< 1 ulp) plus at most 745*2^-68 relative (0.03 ulp) from
//! the logarithm.

use super::exp::exp_dd;
use super::{fabs, horner, log_reduce, nan, neg, MathOps, LN2_HI, LN2_LO};

/// 2/3 and 2/5 as double-doubles: the low parts are exactly 1/(3*2^53) and
/// -1/(5*2^53), rounded.
const TWO_THIRDS_HI: f64 = 2.0 / 3.0;
const TWO_THIRDS_LO: f64 = 1.0 / 3.0 / 9007199254740992.0;
const TWO_FIFTHS_HI: f64 = 2.0 / 5.0;
const TWO_FIFTHS_LO: f64 = -1.0 / 5.0 / 9007199254740992.0;

/// 2*atanh(s) = 2s + s^3*(2/3 + z*(2/5 + z*V(z))), z = s^2, V's Taylor
/// coefficients 2/(2n+1). |s| <= 3-2*sqrt(2), so z < 0.0295 and the first
/// term left out, z^13/27 relative to 2s, is below 2^-70.
const V: [f64; 10] = [2.0 / 7.0, 2.0 / 9.0, 2.0 / 11.0, 2.0 / 13.0, 2.0 / 15.0, 2.0 / 17.0, 2.0 / 19.0, 2.0 / 21.0, 2.0 / 23.0, 2.0 / 25.0];

/// x raised to y, with C99/IEEE's special cases: pow(x, ±0) = 1 and
/// pow(1, y) = 1 even for NaN, pow(-1, ±inf) = 1, NaN otherwise propagates;
/// a negative finite x with a non-integer finite y gives NaN; for a negative
/// x (or -0, -inf) the sign of the result is negative exactly when y is an
/// odd integer; zeros and infinities of x and y give the limits.
pub fn pow<M: MathOps>(m: &mut M, x: M::F, y: M::F) -> M::F {
    let ax = fabs(m, x);
    let (l_hi, l_lo) = log_dd(m, ax);
    // y*log|x| = p_hi + p_lo.
    let p_hi = m.fmul(y, l_hi);
    let minus_p_hi = neg(m, p_hi);
    let err = m.fma(y, l_hi, minus_p_hi);
    let t = m.fmul(y, l_lo);
    let p_lo = m.fadd(err, t);
    // Infinite or huge p_hi (x = 0 or inf, y huge) saturates to 0 or inf.
    let r = exp_dd(m, p_hi, p_lo);

    // y is an odd integer when it is an integer, below 2^53 (all larger
    // doubles are even) and y/2 (exact) is not an integer. Infinities pass
    // the integer test and fail the others.
    let fy = m.ffloor(y);
    let y_int = m.feq(fy, y);
    let half = m.fconst(0.5);
    let half_y = m.fmul(y, half);
    let fh = m.ffloor(half_y);
    let two = m.fconst(2.0);
    let even = m.fmul(fh, two);
    let is_even = m.feq(even, y);
    let not_even = m.not(is_even);
    let ay = fabs(m, y);
    let two53 = m.fconst(9007199254740992.0);
    let below_2_53 = m.flt(ay, two53);
    let y_odd = m.and(y_int, not_even);
    let y_odd = m.and(y_odd, below_2_53);

    // The sign bit of x, not x < 0: -0 and -inf count as negative.
    let x_bits = m.to_bits(x);
    let i0 = m.iconst(0);
    let x_signed = m.ilt(x_bits, i0);
    let negate = m.and(x_signed, y_odd);
    let minus_r = neg(m, r);
    let r = m.fselect(negate, minus_r, r);

    // NaN: a NaN argument, or a negative finite x with a non-integer y.
    let zero = m.fconst(0.0);
    let x_negative = m.flt(x, zero);
    let neg_inf = m.fconst(f64::NEG_INFINITY);
    let x_finite = m.flt(neg_inf, x);
    let y_frac = m.not(y_int);
    let bad = m.and(x_negative, x_finite);
    let bad = m.and(bad, y_frac);
    let x_nan = m.fisnan(x);
    let y_nan = m.fisnan(y);
    let any_nan = m.or(x_nan, y_nan);
    let bad = m.or(bad, any_nan);
    let nan = nan(m);
    let r = m.fselect(bad, nan, r);

    // 1, even against NaN: y = ±0, x = 1, and |x| = 1 with y = ±inf (where
    // y*log|x| is inf*0).
    let y_zero = m.feq(y, zero);
    let one = m.fconst(1.0);
    let x_one = m.feq(x, one);
    let ax_one = m.feq(ax, one);
    let inf = m.fconst(f64::INFINITY);
    let y_inf = m.feq(ay, inf);
    let unit = m.and(ax_one, y_inf);
    let is_one = m.or(y_zero, x_one);
    let is_one = m.or(is_one, unit);
    m.fselect(is_one, one, r)
}

/// log(a) = hi + lo for a >= 0 (error about 2^-68 relative for finite
/// a > 0; (-inf, 0) for 0 and (inf, 0) for +inf; garbage for NaN).
fn log_dd<M: MathOps>(m: &mut M, a: M::F) -> (M::F, M::F) {
    let (f, k) = log_reduce(m, a);

    // f/(2+f) = s + s_lo, with 2+f = d + d_lo exactly (|f| < 2).
    let two = m.fconst(2.0);
    let d = m.fadd(two, f);
    let t = m.fsub(two, d);
    let d_lo = m.fadd(t, f);
    let s = m.fdiv(f, d);
    let minus_s = neg(m, s);
    let rem = m.fma(minus_s, d, f);
    let t = m.fmul(s, d_lo);
    let rem = m.fsub(rem, t);
    let s_lo = m.fdiv(rem, d);

    // s^2 = z + z_lo (fma residual of s*s, plus 2*s*s_lo), then
    // s^3 = c + c_lo = (z + z_lo)*(s + s_lo) to the same order.
    let z = m.fmul(s, s);
    let minus_z = neg(m, z);
    let z_err = m.fma(s, s, minus_z);
    let two_s = m.fmul(two, s);
    let t = m.fmul(two_s, s_lo);
    let z_lo = m.fadd(z_err, t);
    let c = m.fmul(z, s);
    let minus_c = neg(m, c);
    let c_err = m.fma(z, s, minus_c);
    let t1 = m.fmul(z_lo, s);
    let t2 = m.fmul(z, s_lo);
    let t = m.fadd(t1, t2);
    let c_lo = m.fadd(c_err, t);

    // w = 2/3 + z*(2/5 + z*V(z)) = w + w_lo: the two leading terms in
    // double-double, z*V(z) (< 0.0085) in plain double.
    let v = horner(m, z, &V);
    let v = m.fmul(z, v);
    let tf_hi = m.fconst(TWO_FIFTHS_HI);
    let g = m.fadd(tf_hi, v);
    let t = m.fsub(tf_hi, g);
    let t = m.fadd(t, v);
    let tf_lo = m.fconst(TWO_FIFTHS_LO);
    let g_lo = m.fadd(t, tf_lo);
    let zg = m.fmul(z, g);
    let minus_zg = neg(m, zg);
    let zg_err = m.fma(z, g, minus_zg);
    let t1 = m.fmul(z, g_lo);
    let t2 = m.fmul(z_lo, g);
    let t = m.fadd(t1, t2);
    let zg_lo = m.fadd(zg_err, t);
    let tt_hi = m.fconst(TWO_THIRDS_HI);
    let w = m.fadd(tt_hi, zg);
    let t = m.fsub(tt_hi, w);
    let t = m.fadd(t, zg);
    let tt_lo = m.fconst(TWO_THIRDS_LO);
    let t2 = m.fadd(tt_lo, zg_lo);
    let w_lo = m.fadd(t, t2);

    // s^3*w = u + u_lo.
    let u = m.fmul(c, w);
    let minus_u = neg(m, u);
    let u_err = m.fma(c, w, minus_u);
    let t1 = m.fmul(c, w_lo);
    let t2 = m.fmul(c_lo, w);
    let t = m.fadd(t1, t2);
    let u_lo = m.fadd(u_err, t);

    // k*ln2_hi + 2s + u by fast two-sums (each sum's first term is 0 or the
    // larger), the low parts summed apart.
    let dk = m.itof(k);
    let ln2_hi = m.fconst(LN2_HI);
    let a_hi = m.fmul(dk, ln2_hi);
    let h1 = m.fadd(a_hi, two_s);
    let t = m.fsub(h1, a_hi);
    let e1 = m.fsub(two_s, t);
    let h2 = m.fadd(h1, u);
    let t = m.fsub(h2, h1);
    let e2 = m.fsub(u, t);
    let ln2_lo = m.fconst(LN2_LO);
    let a_lo = m.fmul(dk, ln2_lo);
    let s_lo2 = m.fmul(two, s_lo);
    let t = m.fadd(a_lo, s_lo2);
    let t = m.fadd(t, u_lo);
    let e = m.fadd(e1, e2);
    let lo = m.fadd(e, t);
    let hi = m.fadd(h2, lo);
    let t = m.fsub(hi, h2);
    let lo = m.fsub(lo, t);

    let zero = m.fconst(0.0);
    let inf = m.fconst(f64::INFINITY);
    let is_inf = m.feq(a, inf);
    let hi = m.fselect(is_inf, inf, hi);
    let is_zero = m.feq(a, zero);
    let neg_inf = m.fconst(f64::NEG_INFINITY);
    let hi = m.fselect(is_zero, neg_inf, hi);
    let special = m.or(is_inf, is_zero);
    let lo = m.fselect(special, zero, lo);
    (hi, lo)
}
