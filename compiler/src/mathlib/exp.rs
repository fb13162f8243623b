//! exp: fdlibm's e_exp.c, without branches.
//!
//! x = k*ln2 + r with |r| <= ln2/2 (Cody-Waite: `k*LN2_HI` is exact), then
//! exp(r) = 1 + r + r*c/(2-c) with c = r - r^2*P(r^2), P fdlibm's Remez
//! polynomial (error < 2^-59), and exp(x) = 2^k * exp(r). Error < 1 ulp.

use super::{clamp, horner, nan, nearest_k, scale, MathOps, LN2_HI, LN2_LO};

/// fdlibm e_exp.c: the largest x whose exp is finite, and the x below which
/// exp rounds to 0.
const O_THRESHOLD: f64 = f64::from_bits(0x4086_2e42_fefa_39ef); // 7.09782712893383973096e+02
const U_THRESHOLD: f64 = f64::from_bits(0xc087_4910_d52d_3051); // -7.45133219101941108420e+02

/// fdlibm e_exp.c's P1..P5.
const P: [f64; 5] = [
    f64::from_bits(0x3fc5_5555_5555_553e), // P1 1.66666666666666019037e-01
    f64::from_bits(0xbf66_c16c_16be_bd93), // P2 -2.77777777770155933842e-03
    f64::from_bits(0x3f11_566a_af25_de2c), // P3 6.61375632143793436117e-05
    f64::from_bits(0xbebb_bd41_c5d2_6bf1), // P4 -1.65339022054652515390e-06
    f64::from_bits(0x3e66_3769_72be_a4d0), // P5 4.13813679705723846039e-08
];

/// e^x; exp(NaN) = NaN, exp(+inf) = +inf, exp(-inf) = +0.
pub fn exp<M: MathOps>(m: &mut M, x: M::F) -> M::F {
    let zero = m.fconst(0.0);
    let y = exp_dd(m, x, zero);
    let o_threshold = m.fconst(O_THRESHOLD);
    let over = m.flt(o_threshold, x);
    let inf = m.fconst(f64::INFINITY);
    let y = m.fselect(over, inf, y);
    let u_threshold = m.fconst(U_THRESHOLD);
    let under = m.flt(x, u_threshold);
    let y = m.fselect(under, zero, y);
    let is_nan = m.fisnan(x);
    let nan = nan(m);
    m.fselect(is_nan, nan, y)
}

/// e^(hi+lo) for a double-double argument (|lo| at most a few ulps of hi),
/// with the same error as exp: `lo` joins the Cody-Waite low part, so it
/// corrects r before the polynomial. Overflows to +inf and underflows to
/// +0 (through the subnormals) by itself; a NaN `hi` gives +inf.
pub(super) fn exp_dd<M: MathOps>(m: &mut M, hi: M::F, lo: M::F) -> M::F {
    // Beyond [-760, 720] the result is 0 or inf anyway; clamping keeps k in
    // range for every lane. A clamped lane drops lo (it may be inf or NaN).
    let x = clamp(m, hi, -760.0, 720.0);
    let kept = m.feq(x, hi);
    let zero = m.fconst(0.0);
    let lo = m.fselect(kept, lo, zero);

    // r = r_hi - r_lo = x + lo - k*ln2.
    let (kf, k) = nearest_k(m, x);
    let ln2_hi = m.fconst(LN2_HI);
    let t = m.fmul(kf, ln2_hi);
    let r_hi = m.fsub(x, t);
    let ln2_lo = m.fconst(LN2_LO);
    let t = m.fmul(kf, ln2_lo);
    let r_lo = m.fsub(t, lo);
    let r = m.fsub(r_hi, r_lo);

    // c = r - r^2*P(r^2); exp(r) = 1 - ((r_lo - r*c/(2-c)) - r_hi).
    let r2 = m.fmul(r, r);
    let p = horner(m, r2, &P);
    let p = m.fmul(r2, p);
    let c = m.fsub(r, p);
    let rc = m.fmul(r, c);
    let two = m.fconst(2.0);
    let d = m.fsub(two, c);
    let q = m.fdiv(rc, d);
    let u = m.fsub(r_lo, q);
    let u = m.fsub(u, r_hi);
    let one = m.fconst(1.0);
    let y = m.fsub(one, u);
    scale(m, y, k)
}
