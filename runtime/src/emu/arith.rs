//! What one instruction computes for one thread, as the PTX ISA defines
//! it. Values travel as `u64` bit patterns holding a value of the
//! instruction's type, zero-extended; every function here takes and
//! returns such bits.
//!
//! - Integers wrap (two's complement) except where `.sat` says otherwise;
//!   `div` and `rem` truncate toward zero (C semantics, what NVIDIA GPUs
//!   do; the ISA leaves the sign of `rem` machine-dependent).
//! - Floats: `.rn` operations are Rust's IEEE operations, `fma` is
//!   `mul_add` (one rounding). Single precision keeps subnormals unless
//!   `.ftz` flushes them (inputs and results, to a zero of the same sign);
//!   double precision always keeps them.
//! - Approximate instructions (`div.approx`, `rcp.approx`, `sqrt.approx`,
//!   `rsqrt`, `sin`, `cos`, `lg2`, `ex2`, `tanh`) are computed with Rust's
//!   correctly rounded or libm functions: within the error bounds the ISA
//!   documents, though not necessarily the bits a GPU's special function
//!   unit gives.

use super::inst::{AtomOp, Cmp, FloatOp, FloatUnOp, IntKind, IntOp, IntUnOp, Rnd, Ty};

/// The low `bits` bits set.
pub(crate) fn mask(bits: u32) -> u64 {
    if bits >= 64 {
        u64::MAX
    } else {
        (1u64 << bits) - 1
    }
}

/// The low `bits` bits of `v` as a signed value.
pub(crate) fn sext(v: u64, bits: u32) -> i64 {
    if bits >= 64 {
        v as i64
    } else {
        let shift = 64 - bits;
        ((v << shift) as i64) >> shift
    }
}

/// `v` read as a value of kind `k`, widened to i128.
fn wide(v: u64, k: IntKind) -> i128 {
    if k.signed {
        i128::from(sext(v, u32::from(k.bits)))
    } else {
        i128::from(v & mask(u32::from(k.bits)))
    }
}

/// Two-operand integer operations. `None` for a division by zero, whose
/// result the PTX ISA leaves machine-specific (the emulator reports it).
pub(crate) fn int_binary(op: IntOp, k: IntKind, a: u64, b: u64) -> Option<u64> {
    let bits = u32::from(k.bits);
    let m = mask(bits);
    let (x, y) = (wide(a, k), wide(b, k));
    let r = match op {
        IntOp::Add => x.wrapping_add(y),
        IntOp::Sub => x.wrapping_sub(y),
        IntOp::MulLo => x.wrapping_mul(y),
        IntOp::MulHi => x.wrapping_mul(y) >> bits,
        IntOp::MulWide => return Some((x.wrapping_mul(y) as u64) & mask(2 * bits)),
        IntOp::Div | IntOp::Rem if y == 0 => return None,
        // i128 cannot overflow here; MIN / -1 wraps back to MIN when masked.
        IntOp::Div => x / y,
        IntOp::Rem => x % y,
        IntOp::Min => x.min(y),
        IntOp::Max => x.max(y),
        IntOp::And => x & y,
        IntOp::Or => x | y,
        IntOp::Xor => x ^ y,
        // Shift amounts are unsigned 32-bit values clamped to the width.
        IntOp::Shl => {
            let s = (b & 0xFFFF_FFFF).min(u64::from(bits));
            return Some(if s >= u64::from(bits) { 0 } else { (a << s) & m });
        }
        IntOp::Shr => {
            let s = (b & 0xFFFF_FFFF).min(u64::from(bits)) as u32;
            return Some(if k.signed {
                (sext(a, bits) >> s.min(63)) as u64 & m
            } else if s >= bits {
                0
            } else {
                (a & m) >> s
            });
        }
    };
    Some(r as u64 & m)
}

/// One-operand integer operations; `popc` and `clz` give a u32 count.
pub(crate) fn int_unary(op: IntUnOp, k: IntKind, a: u64) -> u64 {
    let bits = u32::from(k.bits);
    let m = mask(bits);
    let v = a & m;
    match op {
        IntUnOp::Neg => v.wrapping_neg() & m,
        IntUnOp::Abs => (sext(v, bits).wrapping_abs() as u64) & m,
        IntUnOp::Not => !v & m,
        IntUnOp::Cnot => u64::from(v == 0),
        IntUnOp::Popc => u64::from(v.count_ones()),
        IntUnOp::Clz => u64::from(v.leading_zeros() - (64 - bits)),
        IntUnOp::Brev => v.reverse_bits() >> (64 - bits),
    }
}

/// `mad.lo`, `mad.hi` and `mad.wide`: the product's chosen part plus `c`.
pub(crate) fn mad(hi: bool, wide_: bool, k: IntKind, a: u64, b: u64, c: u64) -> u64 {
    let bits = u32::from(k.bits);
    let p = wide(a, k).wrapping_mul(wide(b, k));
    if wide_ {
        let m = mask(2 * bits);
        return ((p as u64).wrapping_add(c)) & m;
    }
    let part = if hi { (p >> bits) as u64 } else { p as u64 };
    part.wrapping_add(c) & mask(bits)
}

/// `bfe`: extract `len` bits at `pos`, zero- or sign-filled.
pub(crate) fn bfe(k: IntKind, a: u64, pos: u64, len: u64) -> u64 {
    let msb = u64::from(k.bits) - 1;
    let (pos, len) = (pos & 0xFF, len & 0xFF);
    let sbit = if !k.signed || len == 0 { 0 } else { (a >> (pos + len - 1).min(msb)) & 1 };
    let mut d = 0u64;
    for i in 0..=msb {
        let bit = if i < len && pos + i <= msb { (a >> (pos + i)) & 1 } else { sbit };
        d |= bit << i;
    }
    d
}

/// `shf.{l,r}.{clamp,wrap}.b32` (PTX ISA): shift the 64-bit `b:a` (`b` the
/// high half) by `n` = `min(c, 32)` (clamp) or `c & 31` (wrap); `l` keeps
/// the high 32 bits, `r` the low 32.
pub(crate) fn shf(left: bool, clamp: bool, a: u64, b: u64, c: u64) -> u64 {
    let n = if clamp { c.min(32) } else { c & 31 };
    let v = (b & 0xFFFF_FFFF) << 32 | (a & 0xFFFF_FFFF);
    if left {
        ((v << n) >> 32) & 0xFFFF_FFFF
    } else {
        (v >> n) & 0xFFFF_FFFF
    }
}

/// `bfi`: insert the low `len` bits of `a` into `b` at `pos`.
pub(crate) fn bfi(bits: u8, a: u64, b: u64, pos: u64, len: u64) -> u64 {
    let msb = u64::from(bits) - 1;
    let (pos, len) = (pos & 0xFF, len & 0xFF);
    let mut f = b;
    let mut i = 0;
    while i < len && pos + i <= msb {
        f = (f & !(1 << (pos + i))) | (((a >> i) & 1) << (pos + i));
        i += 1;
    }
    f
}

fn flush32(x: f32) -> f32 {
    if x.is_subnormal() {
        0.0f32.copysign(x)
    } else {
        x
    }
}

fn flush64(x: f64) -> f64 {
    if x.is_subnormal() {
        0.0f64.copysign(x)
    } else {
        x
    }
}

fn in32(bits: u64, ftz: bool) -> f32 {
    let x = f32::from_bits(bits as u32);
    if ftz {
        flush32(x)
    } else {
        x
    }
}

fn in64(bits: u64, ftz: bool) -> f64 {
    let x = f64::from_bits(bits);
    if ftz {
        flush64(x)
    } else {
        x
    }
}

/// `.sat`: clamp to [0, 1], NaN to +0.
fn saturate<T: Into<f64> + Copy>(x: T, zero: T, one: T) -> T {
    let v: f64 = x.into();
    if v > 1.0 {
        one
    } else if v > 0.0 {
        x
    } else {
        zero
    }
}

fn out32(x: f32, ftz: bool, sat: bool) -> u64 {
    let x = if ftz { flush32(x) } else { x };
    let x = if sat { saturate(x, 0.0, 1.0) } else { x };
    u64::from(x.to_bits())
}

fn out64(x: f64, ftz: bool, sat: bool) -> u64 {
    let x = if ftz { flush64(x) } else { x };
    let x = if sat { saturate(x, 0.0, 1.0) } else { x };
    x.to_bits()
}

/// `min`/`max` on floats: the non-NaN operand if only one is NaN, and
/// -0.0 below +0.0 (PTX ISA, "Floating Point Instructions: min").
fn fmin<T: PartialOrd + Copy>(a: T, b: T, nan_a: bool, nan_b: bool, neg_a: bool) -> T {
    if nan_a {
        b
    } else if nan_b || a < b || (a == b && neg_a) {
        a
    } else {
        b
    }
}

fn fmax<T: PartialOrd + Copy>(a: T, b: T, nan_a: bool, nan_b: bool, neg_a: bool) -> T {
    if nan_a {
        b
    } else if nan_b || a > b || (a == b && !neg_a) {
        a
    } else {
        b
    }
}

/// Two-operand float operations.
pub(crate) fn float_binary(op: FloatOp, f64_: bool, ftz: bool, sat: bool, a: u64, b: u64) -> u64 {
    if f64_ {
        let (x, y) = (in64(a, ftz), in64(b, ftz));
        let r = match op {
            FloatOp::Add => x + y,
            FloatOp::Sub => x - y,
            FloatOp::Mul => x * y,
            FloatOp::Div | FloatOp::DivApprox => x / y,
            FloatOp::Min => fmin(x, y, x.is_nan(), y.is_nan(), x.is_sign_negative()),
            FloatOp::Max => fmax(x, y, x.is_nan(), y.is_nan(), x.is_sign_negative()),
            FloatOp::MinNan | FloatOp::MaxNan if x.is_nan() || y.is_nan() => f64::NAN,
            FloatOp::MinNan => fmin(x, y, false, false, x.is_sign_negative()),
            FloatOp::MaxNan => fmax(x, y, false, false, x.is_sign_negative()),
        };
        return out64(r, ftz, sat);
    }
    let (x, y) = (in32(a, ftz), in32(b, ftz));
    let r = match op {
        FloatOp::Add => x + y,
        FloatOp::Sub => x - y,
        FloatOp::Mul => x * y,
        FloatOp::Div => x / y,
        FloatOp::DivApprox => {
            // For 2^126 < |b| < 2^128 the ISA specifies zero (NaN for an
            // infinite `a`); elsewhere `a * (1/b)`.
            let big = y.abs() > 2f32.powi(126) && y.is_finite();
            if big {
                if x.is_infinite() {
                    f32::NAN
                } else {
                    0.0f32.copysign(x) * 1.0f32.copysign(y)
                }
            } else {
                x * (1.0 / y)
            }
        }
        FloatOp::Min => fmin(x, y, x.is_nan(), y.is_nan(), x.is_sign_negative()),
        FloatOp::Max => fmax(x, y, x.is_nan(), y.is_nan(), x.is_sign_negative()),
        FloatOp::MinNan | FloatOp::MaxNan if x.is_nan() || y.is_nan() => f32::from_bits(0x7FFF_FFFF),
        FloatOp::MinNan => fmin(x, y, false, false, x.is_sign_negative()),
        FloatOp::MaxNan => fmax(x, y, false, false, x.is_sign_negative()),
    };
    out32(r, ftz, sat)
}

/// One-operand float operations.
pub(crate) fn float_unary(op: FloatUnOp, f64_: bool, ftz: bool, a: u64) -> u64 {
    if f64_ {
        let x = in64(a, ftz);
        let r = match op {
            // Sign-bit operations: NaNs pass through with their payload.
            FloatUnOp::Neg => return a ^ (1 << 63),
            FloatUnOp::Abs => return a & !(1 << 63),
            FloatUnOp::Sqrt => x.sqrt(),
            FloatUnOp::Rcp => 1.0 / x,
            FloatUnOp::Rsqrt => 1.0 / x.sqrt(),
            FloatUnOp::Sin => x.sin(),
            FloatUnOp::Cos => x.cos(),
            FloatUnOp::Lg2 => x.log2(),
            FloatUnOp::Ex2 => x.exp2(),
            FloatUnOp::Tanh => x.tanh(),
        };
        return out64(r, ftz, false);
    }
    let x = in32(a, ftz);
    let r = match op {
        FloatUnOp::Neg => -x,
        FloatUnOp::Abs => x.abs(),
        FloatUnOp::Sqrt => x.sqrt(),
        FloatUnOp::Rcp => 1.0 / x,
        FloatUnOp::Rsqrt => 1.0 / x.sqrt(),
        FloatUnOp::Sin => x.sin(),
        FloatUnOp::Cos => x.cos(),
        FloatUnOp::Lg2 => x.log2(),
        FloatUnOp::Ex2 => x.exp2(),
        FloatUnOp::Tanh => x.tanh(),
    };
    out32(r, ftz, false)
}

/// `fma.rn`: `a * b + c` rounded once.
pub(crate) fn fma(f64_: bool, ftz: bool, sat: bool, a: u64, b: u64, c: u64) -> u64 {
    if f64_ {
        out64(in64(a, false).mul_add(in64(b, false), in64(c, false)), false, sat)
    } else {
        out32(in32(a, ftz).mul_add(in32(b, ftz), in32(c, ftz)), ftz, sat)
    }
}

/// `setp`'s comparison of `a` and `b` read as `ty`.
pub(crate) fn compare(cmp: Cmp, ty: Ty, ftz: bool, a: u64, b: u64) -> bool {
    if ty.is_float() {
        let (x, y) = if ty == Ty::F64 { (in64(a, false), in64(b, false)) } else { (f64::from(in32(a, ftz)), f64::from(in32(b, ftz))) };
        let unordered = x.is_nan() || y.is_nan();
        return match cmp {
            Cmp::Eq => x == y,
            Cmp::Ne => !unordered && x != y,
            Cmp::Lt => x < y,
            Cmp::Le => x <= y,
            Cmp::Gt => x > y,
            Cmp::Ge => x >= y,
            Cmp::Equ => unordered || x == y,
            Cmp::Neu => x != y,
            Cmp::Ltu => unordered || x < y,
            Cmp::Leu => unordered || x <= y,
            Cmp::Gtu => unordered || x > y,
            Cmp::Geu => unordered || x >= y,
            Cmp::Num => !unordered,
            Cmp::Nan => unordered,
        };
    }
    let k = IntKind { bits: ty.bits() as u8, signed: ty.is_signed() };
    let (x, y) = (wide(a, k), wide(b, k));
    match cmp {
        Cmp::Eq => x == y,
        Cmp::Ne => x != y,
        Cmp::Lt => x < y,
        Cmp::Le => x <= y,
        Cmp::Gt => x > y,
        Cmp::Ge => x >= y,
        // Decoding admits only the six ordered comparisons for integers.
        _ => false,
    }
}

/// `cvt`: converts the bits of a `from` value to the bits of a `to` value.
pub(crate) fn cvt(to: Ty, from: Ty, rnd: Rnd, sat: bool, ftz: bool, a: u64) -> u64 {
    let ftz_in = ftz && from == Ty::F32;
    let ftz_out = ftz && to == Ty::F32;
    match (from.is_float(), to.is_float()) {
        (false, false) => {
            let v = wide(a, IntKind { bits: from.bits() as u8, signed: from.is_signed() });
            let v = if sat { clamp_int(v, to) } else { v };
            v as u64 & mask(to.bits())
        }
        (false, true) => {
            let v = wide(a, IntKind { bits: from.bits() as u8, signed: from.is_signed() });
            if to == Ty::F64 {
                out64(int_to_f64(v, rnd), false, sat)
            } else {
                out32(int_to_f32(v, rnd), ftz_out, sat)
            }
        }
        (true, false) => {
            let x = if from == Ty::F64 { in64(a, false) } else { f64::from(in32(a, ftz_in)) };
            if x.is_nan() {
                // PTX ISA, cvt: NaN converts to 0, except from .f64 or to a
                // 64-bit integer, where it converts to 1 << (width - 1).
                return if from != Ty::F64 && to.bits() != 64 { 0 } else { 1u64 << (to.bits() - 1) };
            }
            clamp_int(round_int(x, rnd) as i128, to) as u64 & mask(to.bits())
        }
        (true, true) => {
            if from == to {
                if to == Ty::F64 {
                    out64(round_int(in64(a, false), rnd), false, sat)
                } else {
                    let x = in32(a, ftz_in);
                    out32(round_int(f64::from(x), rnd) as f32, ftz_out, sat)
                }
            } else if to == Ty::F64 {
                out64(f64::from(in32(a, ftz_in)), false, sat)
            } else {
                out32(f64_to_f32(in64(a, false), rnd), ftz_out, sat)
            }
        }
    }
}

/// Rounds to an integral value with an integer rounding modifier (the
/// value itself when there is none).
fn round_int(x: f64, rnd: Rnd) -> f64 {
    match rnd {
        Rnd::Rni => x.round_ties_even(),
        Rnd::Rzi => x.trunc(),
        Rnd::Rmi => x.floor(),
        Rnd::Rpi => x.ceil(),
        _ => x,
    }
}

/// Saturates `v` to the range of the integer type `to`. Float values
/// beyond i128 arrive already saturated by the `as` cast.
fn clamp_int(v: i128, to: Ty) -> i128 {
    let bits = to.bits();
    let (lo, hi) = if to.is_signed() { (-(1i128 << (bits - 1)), (1i128 << (bits - 1)) - 1) } else { (0, (1i128 << bits) - 1) };
    v.clamp(lo, hi)
}

/// Integer to float under a float rounding modifier, for f64 and f32.
/// Rust's `as` rounds to nearest; the directed modes step one ulp where
/// that overshot.
macro_rules! int_to_float {
    ($name:ident, $t:ty) => {
        fn $name(v: i128, rnd: Rnd) -> $t {
            let r = v as $t;
            let exact = r as i128; // r is integral and within i128 here
            match rnd {
                Rnd::Rz if (v > 0 && exact > v) => r.next_down(),
                Rnd::Rz if (v < 0 && exact < v) => r.next_up(),
                Rnd::Rm if exact > v => r.next_down(),
                Rnd::Rp if exact < v => r.next_up(),
                _ => r,
            }
        }
    };
}
int_to_float!(int_to_f64, f64);
int_to_float!(int_to_f32, f32);

/// f64 to f32 under a float rounding modifier.
fn f64_to_f32(x: f64, rnd: Rnd) -> f32 {
    let r = x as f32;
    if x.is_nan() {
        return r;
    }
    let back = f64::from(r);
    match rnd {
        Rnd::Rz if x > 0.0 && back > x => r.next_down(),
        Rnd::Rz if x < 0.0 && back < x => r.next_up(),
        Rnd::Rm if back > x => r.next_down(),
        Rnd::Rp if back < x => r.next_up(),
        _ => r,
    }
}

/// The value an atomic stores, from the old value `old` and operands `b`
/// (and `c` for `cas`). `ftz`: global `atom.add.f32` flushes subnormal
/// inputs and results (PTX ISA, atom); the shared one does not.
pub(crate) fn atom(op: AtomOp, ty: Ty, ftz: bool, old: u64, b: u64, c: u64) -> u64 {
    let m = mask(ty.bits());
    match (op, ty) {
        (AtomOp::Add, Ty::F32) => out32(in32(old, ftz) + in32(b, ftz), ftz, false),
        (AtomOp::Add, Ty::F64) => (f64::from_bits(old) + f64::from_bits(b)).to_bits(),
        (AtomOp::Add, _) => old.wrapping_add(b) & m,
        (AtomOp::Min | AtomOp::Max, _) => {
            let k = IntKind { bits: ty.bits() as u8, signed: ty.is_signed() };
            let (x, y) = (wide(old, k), wide(b, k));
            let r = if op == AtomOp::Min { x.min(y) } else { x.max(y) };
            r as u64 & m
        }
        (AtomOp::Inc, _) => {
            if old >= b {
                0
            } else {
                old + 1
            }
        }
        (AtomOp::Dec, _) => {
            if old == 0 || old > b {
                b
            } else {
                old - 1
            }
        }
        (AtomOp::And, _) => old & b,
        (AtomOp::Or, _) => old | b,
        (AtomOp::Xor, _) => old ^ b,
        (AtomOp::Exch, _) => b,
        (AtomOp::Cas, _) => {
            if old == b {
                c
            } else {
                old
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const S32: IntKind = IntKind { bits: 32, signed: true };
    const U32: IntKind = IntKind { bits: 32, signed: false };

    fn s32(v: i32) -> u64 {
        u64::from(v as u32)
    }

    #[test]
    fn division_and_remainder_truncate_toward_zero() {
        assert_eq!(int_binary(IntOp::Div, S32, s32(-7), s32(2)), Some(s32(-3)));
        assert_eq!(int_binary(IntOp::Rem, S32, s32(-7), s32(2)), Some(s32(-1)));
        assert_eq!(int_binary(IntOp::Rem, S32, s32(7), s32(-2)), Some(s32(1)));
        assert_eq!(int_binary(IntOp::Div, S32, s32(i32::MIN), s32(-1)), Some(s32(i32::MIN)));
        assert_eq!(int_binary(IntOp::Div, U32, 0xFFFF_FFF9, 2), Some(0x7FFF_FFFC));
        assert_eq!(int_binary(IntOp::Div, S32, 5, 0), None);
        assert_eq!(int_binary(IntOp::Rem, IntKind { bits: 64, signed: false }, 5, 0), None);
    }

    #[test]
    fn integers_wrap_and_shifts_clamp() {
        assert_eq!(int_binary(IntOp::Add, S32, s32(i32::MAX), 1), Some(s32(i32::MIN)));
        assert_eq!(int_binary(IntOp::MulHi, S32, s32(-2), s32(3)), Some(s32(-1)));
        assert_eq!(int_binary(IntOp::MulWide, S32, s32(-2), s32(3)), Some((-6i64) as u64));
        assert_eq!(int_binary(IntOp::MulHi, IntKind { bits: 64, signed: false }, u64::MAX, u64::MAX), Some(u64::MAX - 1));
        assert_eq!(int_binary(IntOp::Shl, U32, 1, 40), Some(0));
        assert_eq!(int_binary(IntOp::Shr, S32, s32(-8), 100), Some(s32(-1)));
        assert_eq!(int_binary(IntOp::Shr, U32, s32(-8), 1), Some(0x7FFF_FFFC));
        assert_eq!(int_binary(IntOp::Min, U32, s32(-1), 3), Some(3));
        assert_eq!(int_binary(IntOp::Min, S32, s32(-1), 3), Some(s32(-1)));
        assert_eq!(int_unary(IntUnOp::Clz, U32, 1), 31);
        assert_eq!(int_unary(IntUnOp::Brev, U32, 1), 0x8000_0000);
        assert_eq!(int_unary(IntUnOp::Abs, S32, s32(i32::MIN)), s32(i32::MIN));
        assert_eq!(mad(false, true, U32, 0xFFFF_FFFF, 2, 1), 0x1_FFFF_FFFF);
    }

    #[test]
    fn bit_fields() {
        let s = IntKind { bits: 32, signed: true };
        assert_eq!(bfe(U32, 0xF0, 4, 4), 0xF);
        // shf with a == b is a rotate (what LLVM emits for `rotr`/`rotl`).
        for (x, n) in [(0x8000_0001u32, 1u32), (0x1234_5678, 4), (0xDEAD_BEEF, 0), (0xDEAD_BEEF, 31)] {
            assert_eq!(shf(false, false, x as u64, x as u64, n as u64), x.rotate_right(n) as u64);
            assert_eq!(shf(true, false, x as u64, x as u64, n as u64), x.rotate_left(n) as u64);
        }
        // wrap takes the amount mod 32; clamp saturates at 32 (then `l`
        // gives `a`, `r` gives `b`).
        assert_eq!(shf(false, false, 0x1, 0x2, 33), 0x0);
        assert_eq!(shf(false, true, 0x1, 0x2, 33), 0x2);
        assert_eq!(shf(true, true, 0x1, 0x2, 40), 0x1);
        assert_eq!(shf(true, false, 0xF000_0000, 0x0, 4), 0xF);
        assert_eq!(bfe(s, 0xF0, 4, 4), 0xFFFF_FFFF);
        assert_eq!(bfe(s, 0xF0, 4, 0), 0);
        assert_eq!(bfe(s, 0x8000_0000, 40, 8), 0xFFFF_FFFF);
        assert_eq!(bfi(32, 0b101, 0xFFFF_0000, 4, 3), 0xFFFF_0050);
    }

    #[test]
    fn fma_is_fused_and_mul_add_is_not() {
        // (1 + 2^-12)^2 = 1 + 2^-11 + 2^-24: the last term is lost when the
        // product is rounded to f32 first, kept by a single rounding.
        let a = 1.0f32 + 2f32.powi(-12);
        let c = -(1.0f32 + 2f32.powi(-11));
        let fused = f32::from_bits(fma(false, false, false, u64::from(a.to_bits()), u64::from(a.to_bits()), u64::from(c.to_bits())) as u32);
        let p = float_binary(FloatOp::Mul, false, false, false, u64::from(a.to_bits()), u64::from(a.to_bits()));
        let unfused = f32::from_bits(float_binary(FloatOp::Add, false, false, false, p, u64::from(c.to_bits())) as u32);
        assert_eq!(fused, 2f32.powi(-24));
        assert_eq!(unfused, 0.0);
    }

    #[test]
    fn ftz_and_sat() {
        let tiny = u64::from(f32::MIN_POSITIVE.to_bits() >> 1); // a subnormal
        let two = u64::from(2.0f32.to_bits());
        assert_eq!(float_binary(FloatOp::Mul, false, false, false, tiny, two), u64::from(f32::MIN_POSITIVE.to_bits()));
        assert_eq!(float_binary(FloatOp::Mul, false, true, false, tiny, two), 0);
        assert_eq!(float_binary(FloatOp::Add, false, false, true, two, two), u64::from(1.0f32.to_bits()));
        let nan = u64::from(f32::NAN.to_bits());
        assert_eq!(float_binary(FloatOp::Add, false, false, true, nan, two), 0);
        // min/max: NaN loses, -0 < +0.
        let (pz, nz) = (0u64, u64::from((-0.0f32).to_bits()));
        assert_eq!(float_binary(FloatOp::Min, false, false, false, pz, nz), nz);
        assert_eq!(float_binary(FloatOp::Max, false, false, false, nz, pz), pz);
        assert_eq!(float_binary(FloatOp::Min, false, false, false, nan, two), two);
    }

    fn f2i(to: Ty, from: Ty, rnd: Rnd, x: f64) -> i64 {
        let bits = if from == Ty::F64 { x.to_bits() } else { u64::from((x as f32).to_bits()) };
        sext(cvt(to, from, rnd, false, false, bits), to.bits())
    }

    #[test]
    fn cvt_float_to_int_rounds_and_saturates() {
        assert_eq!(f2i(Ty::S32, Ty::F64, Rnd::Rni, 2.5), 2);
        assert_eq!(f2i(Ty::S32, Ty::F64, Rnd::Rni, 3.5), 4);
        assert_eq!(f2i(Ty::S32, Ty::F64, Rnd::Rzi, -2.7), -2);
        assert_eq!(f2i(Ty::S32, Ty::F64, Rnd::Rmi, -2.2), -3);
        assert_eq!(f2i(Ty::S32, Ty::F64, Rnd::Rpi, -2.7), -2);
        assert_eq!(f2i(Ty::S32, Ty::F64, Rnd::Rzi, 1e300), i64::from(i32::MAX));
        assert_eq!(f2i(Ty::S32, Ty::F32, Rnd::Rzi, -1e30), i64::from(i32::MIN));
        assert_eq!(cvt(Ty::U32, Ty::F32, Rnd::Rzi, false, false, u64::from((-5.0f32).to_bits())), 0);
        assert_eq!(cvt(Ty::U8, Ty::F32, Rnd::Rni, false, false, u64::from(300.0f32.to_bits())), 255);
        // NaN: 0 from f32 to a 32-bit integer, MININT from f64.
        assert_eq!(f2i(Ty::S32, Ty::F32, Rnd::Rzi, f64::NAN), 0);
        assert_eq!(f2i(Ty::S32, Ty::F64, Rnd::Rzi, f64::NAN), i64::from(i32::MIN));
        assert_eq!(f2i(Ty::S64, Ty::F32, Rnd::Rzi, f64::NAN), i64::MIN);
        assert_eq!(cvt(Ty::U64, Ty::F64, Rnd::Rzi, false, false, f64::NAN.to_bits()), 1 << 63);
    }

    #[test]
    fn cvt_to_float_rounding_modes() {
        let big = (1i64 << 53) + 1; // not representable in f64
        let to64 = |rnd| f64::from_bits(cvt(Ty::F64, Ty::S64, rnd, false, false, big as u64));
        assert_eq!(to64(Rnd::Rn), (1u64 << 53) as f64);
        assert_eq!(to64(Rnd::Rz), (1u64 << 53) as f64);
        assert_eq!(to64(Rnd::Rp), ((1u64 << 53) + 2) as f64);
        let neg = |rnd| f64::from_bits(cvt(Ty::F64, Ty::S64, rnd, false, false, (-big) as u64));
        assert_eq!(neg(Rnd::Rm), -(((1u64 << 53) + 2) as f64));
        assert_eq!(neg(Rnd::Rz), -((1u64 << 53) as f64));
        let third = 1.0f64 / 3.0;
        let to32 = |rnd| f32::from_bits(cvt(Ty::F32, Ty::F64, rnd, false, false, third.to_bits()) as u32);
        assert!(f64::from(to32(Rnd::Rz)) < third && f64::from(to32(Rnd::Rp)) > third);
        assert_eq!(to32(Rnd::Rz), to32(Rnd::Rm));
        assert_eq!(to32(Rnd::Rp).next_down(), to32(Rnd::Rz));
        // Overflow: .rz gives the largest finite value, .rn infinity.
        let huge = 1e300f64.to_bits();
        assert_eq!(f32::from_bits(cvt(Ty::F32, Ty::F64, Rnd::Rz, false, false, huge) as u32), f32::MAX);
        assert_eq!(f32::from_bits(cvt(Ty::F32, Ty::F64, Rnd::Rn, false, false, huge) as u32), f32::INFINITY);
        // .rni on floats keeps the type; .sat clamps; .ftz flushes.
        assert_eq!(f64::from_bits(cvt(Ty::F64, Ty::F64, Rnd::Rni, false, false, 2.5f64.to_bits())), 2.0);
        assert_eq!(f32::from_bits(cvt(Ty::F32, Ty::F64, Rnd::Rn, true, false, 7.0f64.to_bits()) as u32), 1.0);
        let sub = f64::from(f32::MIN_POSITIVE) / 4.0;
        assert_eq!(cvt(Ty::F32, Ty::F64, Rnd::Rn, false, true, sub.to_bits()), 0);
        assert_ne!(cvt(Ty::F32, Ty::F64, Rnd::Rn, false, false, sub.to_bits()), 0);
    }

    #[test]
    fn integer_conversions_extend_chop_and_saturate() {
        assert_eq!(cvt(Ty::S16, Ty::S8, Rnd::None, false, false, 0x80), 0xFF80);
        assert_eq!(cvt(Ty::U64, Ty::U32, Rnd::None, false, false, 0xFFFF_FFFF), 0xFFFF_FFFF);
        assert_eq!(cvt(Ty::S64, Ty::S32, Rnd::None, false, false, 0xFFFF_FFFF), u64::MAX);
        assert_eq!(cvt(Ty::U16, Ty::U64, Rnd::None, false, false, 0x1_2345), 0x2345);
        assert_eq!(cvt(Ty::S8, Ty::S32, Rnd::None, true, false, s32(-1000)), 0x80);
        assert_eq!(cvt(Ty::U8, Ty::S32, Rnd::None, true, false, s32(-5)), 0);
    }

    #[test]
    fn atomics() {
        let tiny = u64::from(f32::MIN_POSITIVE.to_bits() >> 1);
        assert_eq!(atom(AtomOp::Add, Ty::F32, true, tiny, tiny, 0), 0);
        assert_ne!(atom(AtomOp::Add, Ty::F32, false, tiny, tiny, 0), 0);
        assert_eq!(atom(AtomOp::Inc, Ty::U32, false, 5, 5, 0), 0);
        assert_eq!(atom(AtomOp::Dec, Ty::U32, false, 0, 5, 0), 5);
        assert_eq!(atom(AtomOp::Cas, Ty::B32, false, 3, 3, 9), 9);
        assert_eq!(atom(AtomOp::Max, Ty::S32, false, s32(-1), 2, 0), 2);
    }
}
