//! `exp`, `log`, `tanh` and `pow` in binary64 (and float `max`/`min`,
//! minmax.rs), written once for every target.
//!
//! The reference interpreter and the generated code (host CPU and NVIDIA
//! PTX) must agree bit for bit, and the platforms' libms do not agree with
//! each other. So each function is written here once, generically, against
//! [`MathOps`]: a handful of primitive IEEE-754 operations, each correctly
//! rounded, whose results are therefore the same on every target. The
//! interpreter instantiates the functions with [`scalar::Scalar`] (plain
//! `f64` values); the code generator instantiates them with an LLVM IR
//! builder, so the emitted IR performs the very same sequence of
//! operations.
//!
//! That shapes how the algorithms are written:
//! - Branch-free on data: a builder cannot branch on a value it does not
//!   know yet, so every case is computed and the results are combined with
//!   `fselect`/`iselect` (the trait's opaque `B` makes anything else fail to
//!   compile). Lanes that are not selected may compute garbage (never
//!   traps: integer ops wrap), as long as it is discarded.
//! - Only the trait's primitives touch values; Rust arithmetic is used only
//!   on constants.
//! - No fused operations except the explicit `fma`: the code generator
//!   must not contract `fmul`+`fadd` (no fast-math).
//! - Every NaN result is the canonical quiet NaN (`f64::NAN`, bits
//!   `0x7ff8000000000000`), selected explicitly: the payload and sign of a
//!   NaN produced by arithmetic differ between x86 and PTX.
//!
//! - `ftoi` only ever sees finite values of magnitude below 1100: the
//!   arguments of the reductions are clamped first, NaN included.
//!
//! The algorithms are fdlibm's (Sun, 1993) ported to selects; `pow`'s
//! logarithm and the last steps of `tanh` are carried in double-double
//! with `fma` for accuracy (pow.rs, tanh.rs).

pub mod scalar;

mod exp;
mod log;
mod minmax;
mod pow;
mod tanh;

#[cfg(test)]
mod tests;

pub use exp::exp;
pub use log::log;
pub use minmax::{max, min};
pub use pow::pow;
pub use tanh::tanh;

/// Primitive IEEE-754 binary64 operations, each correctly rounded (round to nearest even), no fast-math.
pub trait MathOps {
    type F: Copy; // an f64 value
    type I: Copy; // an i64 value (two's complement, wrapping)
    type B: Copy; // a boolean
    fn fconst(&mut self, c: f64) -> Self::F;
    fn iconst(&mut self, c: i64) -> Self::I;
    fn fadd(&mut self, a: Self::F, b: Self::F) -> Self::F;
    fn fsub(&mut self, a: Self::F, b: Self::F) -> Self::F;
    fn fmul(&mut self, a: Self::F, b: Self::F) -> Self::F;
    fn fdiv(&mut self, a: Self::F, b: Self::F) -> Self::F;
    /// a*b+c with one rounding.
    fn fma(&mut self, a: Self::F, b: Self::F, c: Self::F) -> Self::F;
    fn fsqrt(&mut self, a: Self::F) -> Self::F;
    fn ffloor(&mut self, a: Self::F) -> Self::F;
    fn to_bits(&mut self, a: Self::F) -> Self::I;
    #[allow(clippy::wrong_self_convention)] // named after f64::from_bits; self is the builder
    fn from_bits(&mut self, a: Self::I) -> Self::F;
    fn iadd(&mut self, a: Self::I, b: Self::I) -> Self::I;
    fn isub(&mut self, a: Self::I, b: Self::I) -> Self::I;
    fn iand(&mut self, a: Self::I, b: Self::I) -> Self::I;
    fn ior(&mut self, a: Self::I, b: Self::I) -> Self::I;
    fn shl(&mut self, a: Self::I, n: u32) -> Self::I; // n < 64
    fn ashr(&mut self, a: Self::I, n: u32) -> Self::I; // arithmetic
    fn lshr(&mut self, a: Self::I, n: u32) -> Self::I; // logical
    /// signed i64 -> f64, rounded (exact for |a| < 2^53).
    fn itof(&mut self, a: Self::I) -> Self::F;
    /// f64 -> i64 truncating toward zero; only called on values known to be in i64 range (never NaN/inf in a lane whose result is used; lanes whose result is discarded by select may hold anything, so the impl must not trap: Scalar uses `as i64`).
    fn ftoi(&mut self, a: Self::F) -> Self::I;
    /// Ordered comparisons: false when either is NaN.
    fn flt(&mut self, a: Self::F, b: Self::F) -> Self::B;
    fn fle(&mut self, a: Self::F, b: Self::F) -> Self::B;
    fn feq(&mut self, a: Self::F, b: Self::F) -> Self::B;
    /// true when a is NaN.
    fn fisnan(&mut self, a: Self::F) -> Self::B;
    fn ilt(&mut self, a: Self::I, b: Self::I) -> Self::B; // signed
    fn ieq(&mut self, a: Self::I, b: Self::I) -> Self::B;
    fn and(&mut self, a: Self::B, b: Self::B) -> Self::B;
    fn or(&mut self, a: Self::B, b: Self::B) -> Self::B;
    fn not(&mut self, a: Self::B) -> Self::B;
    fn fselect(&mut self, c: Self::B, a: Self::F, b: Self::F) -> Self::F;
    fn iselect(&mut self, c: Self::B, a: Self::I, b: Self::I) -> Self::I;
}

/// ln2 split as in fdlibm: `LN2_HI` has 32 significant bits, so `k*LN2_HI`
/// is exact for |k| < 2^21; `LN2_LO` is the rest, rounded.
const LN2_HI: f64 = f64::from_bits(0x3fe6_2e42_fee0_0000); // 6.93147180369123816490e-01
const LN2_LO: f64 = f64::from_bits(0x3dea_39ef_3579_3c76); // 1.90821492927058770002e-10
const INV_LN2: f64 = f64::from_bits(0x3ff7_1547_652b_82fe); // 1.44269504088896338700e+00

/// The mantissa field and the sign bit of a binary64.
const MANT_MASK: i64 = 0x000f_ffff_ffff_ffff;
const SIGN_MASK: i64 = i64::MIN;

/// The canonical NaN every function returns for a NaN result.
fn nan<M: MathOps>(m: &mut M) -> M::F {
    m.fconst(f64::NAN)
}

/// |a|, by clearing the sign bit.
fn fabs<M: MathOps>(m: &mut M, a: M::F) -> M::F {
    let bits = m.to_bits(a);
    let mask = m.iconst(i64::MAX);
    let abs = m.iand(bits, mask);
    m.from_bits(abs)
}

/// -a (exact, also for zeros and infinities).
fn neg<M: MathOps>(m: &mut M, a: M::F) -> M::F {
    let minus_zero = m.fconst(-0.0);
    m.fsub(minus_zero, a)
}

/// c0 + x*(c1 + x*(c2 + ...)), with separate multiply and add as fdlibm
/// evaluates its polynomials.
fn horner<M: MathOps>(m: &mut M, x: M::F, coeffs: &[f64]) -> M::F {
    let (last, rest) = coeffs.split_last().expect("a polynomial has a coefficient");
    let mut acc = m.fconst(*last);
    for &c in rest.iter().rev() {
        let p = m.fmul(acc, x);
        let c = m.fconst(c);
        acc = m.fadd(c, p);
    }
    acc
}

/// 2^k for -1022 <= k <= 1023, built from its exponent field.
fn pow2<M: MathOps>(m: &mut M, k: M::I) -> M::F {
    let bias = m.iconst(1023);
    let e = m.iadd(k, bias);
    let bits = m.shl(e, 52);
    m.from_bits(bits)
}

/// y * 2^k for |k| <= 2044, rounded once. The scale is applied in two
/// halves, each a normal power of two: for y in [0.5, 2] and |k| <= 1100 the
/// first product is exact, so a subnormal result is rounded only by the
/// second, and 2^1024 (needed when y < 1) is reachable.
fn scale<M: MathOps>(m: &mut M, y: M::F, k: M::I) -> M::F {
    let k1 = m.ashr(k, 1);
    let k2 = m.isub(k, k1);
    let s1 = pow2(m, k1);
    let s2 = pow2(m, k2);
    let y = m.fmul(y, s1);
    m.fmul(y, s2)
}

/// The integer nearest to `x*INV_LN2` (ties up), as f64 and as i64, for
/// the Cody-Waite reductions of exp and expm1. `x` must be finite and small
/// enough (|x| < 2^20) for `ftoi` and the exact `k*LN2_HI`.
fn nearest_k<M: MathOps>(m: &mut M, x: M::F) -> (M::F, M::I) {
    let inv_ln2 = m.fconst(INV_LN2);
    let half = m.fconst(0.5);
    let t = m.fmul(x, inv_ln2);
    let t = m.fadd(t, half);
    let kf = m.ffloor(t);
    let k = m.ftoi(kf);
    (kf, k)
}

/// `x` limited to [lo, hi]; NaN becomes `hi`. Keeps the reductions' integer
/// parts in range in every lane.
fn clamp<M: MathOps>(m: &mut M, x: M::F, lo: f64, hi: f64) -> M::F {
    let hi = m.fconst(hi);
    let below = m.flt(x, hi);
    let x = m.fselect(below, x, hi);
    let lo = m.fconst(lo);
    let above = m.flt(lo, x);
    m.fselect(above, x, lo)
}

/// Splits a positive finite x into 2^k * (1+f) with sqrt(2)/2 <= 1+f <
/// sqrt(2), f exact (fdlibm e_log.c's reduction, in musl's form). Subnormal
/// x is scaled by 2^54 first. Garbage for x <= 0, inf and NaN.
fn log_reduce<M: MathOps>(m: &mut M, x: M::F) -> (M::F, M::I) {
    let min_normal = m.fconst(f64::MIN_POSITIVE);
    let subnormal = m.flt(x, min_normal);
    let two54 = m.fconst(18014398509481984.0);
    let scaled = m.fmul(x, two54);
    let x = m.fselect(subnormal, scaled, x);
    let minus54 = m.iconst(-54);
    let zero = m.iconst(0);
    let k0 = m.iselect(subnormal, minus54, zero);

    // Adding 0x3ff00000 - 0x3fe6a09e to the high word carries mantissas at
    // or above sqrt(2)'s (0x6a09e) into the exponent, so the exponent field
    // becomes k; the mantissa is then rebased to start at sqrt(2)/2.
    let bits = m.to_bits(x);
    let offset = m.iconst((0x3ff0_0000 - 0x3fe6_a09e) << 32);
    let bits = m.iadd(bits, offset);
    let e = m.lshr(bits, 52);
    let bias = m.iconst(1023);
    let k = m.isub(e, bias);
    let k = m.iadd(k, k0);
    let mant_mask = m.iconst(MANT_MASK);
    let mant = m.iand(bits, mant_mask);
    let base = m.iconst(0x3fe6_a09e << 32);
    let bits = m.iadd(mant, base);
    let one_plus_f = m.from_bits(bits);
    let one = m.fconst(1.0);
    let f = m.fsub(one_plus_f, one);
    (f, k)
}
