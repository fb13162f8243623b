//! tanh: fdlibm's s_tanh.c, without branches, on a double-double expm1
//! built from fdlibm's s_expm1.c.
//!
//! With a = |x| and t = expm1(2a): tanh(a) = t/(t+2) for a < 1, 1 - 2/(t+2)
//! for 1 <= a < 22 and 1 beyond (tanh(22) rounds to 1); the sign is x's.
//! fdlibm takes t = expm1(-2a) for a < 1, which amplifies t's error by up
//! to 1.76 and gives ~2 ulp; t = expm1(2a) amplifies it by at most 1, and
//! carrying t and t+2 as double-doubles leaves about the final rounding.

use super::{clamp, fabs, horner, nan, nearest_k, neg, pow2, MathOps, LN2_HI, LN2_LO, SIGN_MASK};

/// fdlibm s_expm1.c's Q1..Q5 (behind a leading 1): the rational
/// approximation of expm1 on [-ln2/2, ln2/2] (error < 2^-61).
const Q: [f64; 6] = [
    1.0,
    f64::from_bits(0xbfa1_1111_1111_10f4), // Q1 -3.33333333333331316428e-02
    f64::from_bits(0x3f5a_01a0_19fe_5585), // Q2 1.58730158725481460165e-03
    f64::from_bits(0xbf14_ce19_9eaa_dbb7), // Q3 -7.93650757867487942473e-05
    f64::from_bits(0x3ed0_cfca_86e6_5239), // Q4 4.00821782732936239552e-06
    f64::from_bits(0xbe8a_fdb7_6e09_c32d), // Q5 -2.01099218183624371326e-07
];

/// The hyperbolic tangent; tanh(±0) = ±0, tanh(±inf) = ±1, tanh(NaN) = NaN.
pub fn tanh<M: MathOps>(m: &mut M, x: M::F) -> M::F {
    let a = fabs(m, x);
    // Beyond 22 the result is 1 anyway; the clamp keeps expm1 in its domain
    // (NaN too).
    let ac = clamp(m, a, 0.0, 22.0);
    let two = m.fconst(2.0);
    let two_a = m.fmul(two, ac);
    let (t, t_lo) = expm1_dd(m, two_a);

    // t + 2 = d + d_lo (two-sum, plus t's low part).
    let d = m.fadd(t, two);
    let bb = m.fsub(d, t);
    let at = m.fsub(d, bb);
    let et = m.fsub(t, at);
    let e2 = m.fsub(two, bb);
    let d_lo = m.fadd(et, e2);
    let d_lo = m.fadd(d_lo, t_lo);

    // w = n/(t+2) with n = t for a < 1 (tanh = w) and n = 2 beyond
    // (tanh = 1 - w): w = q + rem/d, rem the division's remainder (fma)
    // corrected for the low parts, so w is rounded once.
    let one = m.fconst(1.0);
    let below_one = m.flt(a, one);
    let n = m.fselect(below_one, t, two);
    let zero = m.fconst(0.0);
    let n_lo = m.fselect(below_one, t_lo, zero);
    let q = m.fdiv(n, d);
    let minus_q = neg(m, q);
    let rem = m.fma(minus_q, d, n);
    let rem = m.fadd(rem, n_lo);
    let qd = m.fmul(q, d_lo);
    let rem = m.fsub(rem, qd);
    let corr = m.fdiv(rem, d);
    let w = m.fadd(q, corr);
    let one_minus_w = m.fsub(one, w);
    let z = m.fselect(below_one, w, one_minus_w);
    let twenty_two = m.fconst(22.0);
    let below_22 = m.flt(a, twenty_two);
    let z = m.fselect(below_22, z, one);
    // tanh(a) rounds to a for a < 2^-55.
    let tiny = m.fconst(1.0 / (1u64 << 55) as f64);
    let is_tiny = m.flt(a, tiny);
    let z = m.fselect(is_tiny, a, z);

    // z >= 0: give it x's sign.
    let x_bits = m.to_bits(x);
    let sign_mask = m.iconst(SIGN_MASK);
    let sign = m.iand(x_bits, sign_mask);
    let z_bits = m.to_bits(z);
    let bits = m.ior(z_bits, sign);
    let y = m.from_bits(bits);
    let is_nan = m.fisnan(x);
    let nan = nan(m);
    m.fselect(is_nan, nan, y)
}

/// e^x - 1 = hi + lo for 0 <= x <= 44: hi within 0.6 ulp and hi + lo
/// within about 2^-56 relative (measured), the limit of fdlibm's
/// approximation evaluated in doubles. Beyond x = 53*ln2, 2^k - 1 rounds and
/// lo is lost; tanh does not notice, as it only needs 2/(t+2) < 2^-51 there
/// to a few bits.
///
/// fdlibm's reduction and rational approximation give expm1(r + c) = r - e
/// for x = k*ln2 + r + c, with e small against r; fdlibm then picks, by k,
/// a formula for 2^k*(1 + r - e) - 1 that avoids cancellation. In
/// double-double one formula serves every k: (2^k - 1) + 2^k*(r - e), with
/// r - e and the sum as exact two-sums.
fn expm1_dd<M: MathOps>(m: &mut M, x: M::F) -> (M::F, M::F) {
    // x = k*ln2 + r + c: r = hi - lo rounded, c its rounding error.
    let (kf, k) = nearest_k(m, x);
    let ln2_hi = m.fconst(LN2_HI);
    let t = m.fmul(kf, ln2_hi);
    let hi = m.fsub(x, t);
    let ln2_lo = m.fconst(LN2_LO);
    let lo = m.fmul(kf, ln2_lo);
    let r = m.fsub(hi, lo);
    let t = m.fsub(hi, r);
    let c = m.fsub(t, lo);

    // fdlibm: e from the rational approximation, then corrected for c:
    // e = r*(e - c) - c - r^2/2 (c = 0 when k = 0).
    let half = m.fconst(0.5);
    let hfx = m.fmul(half, r);
    let hxs = m.fmul(r, hfx);
    let r1 = horner(m, hxs, &Q);
    let three = m.fconst(3.0);
    let t = m.fmul(r1, hfx);
    let t = m.fsub(three, t);
    let six = m.fconst(6.0);
    let rt = m.fmul(r, t);
    let den = m.fsub(six, rt);
    let num = m.fsub(r1, t);
    let q = m.fdiv(num, den);
    let e = m.fmul(hxs, q);
    let ec = m.fsub(e, c);
    let e = m.fmul(r, ec);
    let e1 = m.fsub(e, c);
    let e = m.fsub(e1, hxs);

    // expm1(r + c) = u + u_lo = r - e. e is up to a sixth of that, so its
    // main term's errors are kept: hxs = r^2/2 - hxs_err exactly (fma), and
    // e = e1 - hxs - e_err (fast two-sum: |e1| < hxs); r - e is a fast
    // two-sum too (|e| < |r|).
    let minus_hxs = neg(m, hxs);
    let hxs_err = m.fma(r, hfx, minus_hxs);
    let t = m.fadd(e, hxs);
    let e_err = m.fsub(e1, t);
    let u = m.fsub(r, e);
    let t = m.fsub(r, u);
    let u_lo = m.fsub(t, e);
    let t = m.fsub(hxs_err, e_err);
    let u_lo = m.fadd(u_lo, t);

    // (2^k - 1) + 2^k*u by a two-sum; 2^k*u_lo joins the low part.
    let p = pow2(m, k);
    let one = m.fconst(1.0);
    let a = m.fsub(p, one);
    let b = m.fmul(p, u);
    let s = m.fadd(a, b);
    let bb = m.fsub(s, a);
    let ab = m.fsub(s, bb);
    let ea = m.fsub(a, ab);
    let eb = m.fsub(b, bb);
    let err = m.fadd(ea, eb);
    let pl = m.fmul(p, u_lo);
    let lo = m.fadd(err, pl);
    let hi = m.fadd(s, lo);
    let t = m.fsub(hi, s);
    let lo = m.fsub(lo, t);
    (hi, lo)
}
