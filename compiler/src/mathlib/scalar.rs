//! [`MathOps`] on plain values: the reference interpreter's instance, and
//! the functions it calls.

use super::MathOps;

/// Evaluates the primitives immediately with Rust's IEEE operations.
pub struct Scalar;

impl MathOps for Scalar {
    type F = f64;
    type I = i64;
    type B = bool;
    fn fconst(&mut self, c: f64) -> f64 {
        c
    }
    fn iconst(&mut self, c: i64) -> i64 {
        c
    }
    fn fadd(&mut self, a: f64, b: f64) -> f64 {
        a + b
    }
    fn fsub(&mut self, a: f64, b: f64) -> f64 {
        a - b
    }
    fn fmul(&mut self, a: f64, b: f64) -> f64 {
        a * b
    }
    fn fdiv(&mut self, a: f64, b: f64) -> f64 {
        a / b
    }
    fn fma(&mut self, a: f64, b: f64, c: f64) -> f64 {
        a.mul_add(b, c)
    }
    fn fsqrt(&mut self, a: f64) -> f64 {
        a.sqrt()
    }
    fn ffloor(&mut self, a: f64) -> f64 {
        a.floor()
    }
    fn to_bits(&mut self, a: f64) -> i64 {
        a.to_bits() as i64
    }
    fn from_bits(&mut self, a: i64) -> f64 {
        f64::from_bits(a as u64)
    }
    fn iadd(&mut self, a: i64, b: i64) -> i64 {
        a.wrapping_add(b)
    }
    fn isub(&mut self, a: i64, b: i64) -> i64 {
        a.wrapping_sub(b)
    }
    fn iand(&mut self, a: i64, b: i64) -> i64 {
        a & b
    }
    fn ior(&mut self, a: i64, b: i64) -> i64 {
        a | b
    }
    fn shl(&mut self, a: i64, n: u32) -> i64 {
        a.wrapping_shl(n)
    }
    fn ashr(&mut self, a: i64, n: u32) -> i64 {
        a.wrapping_shr(n)
    }
    fn lshr(&mut self, a: i64, n: u32) -> i64 {
        (a as u64).wrapping_shr(n) as i64
    }
    fn itof(&mut self, a: i64) -> f64 {
        a as f64
    }
    fn ftoi(&mut self, a: f64) -> i64 {
        a as i64
    }
    fn flt(&mut self, a: f64, b: f64) -> bool {
        a < b
    }
    fn fle(&mut self, a: f64, b: f64) -> bool {
        a <= b
    }
    fn feq(&mut self, a: f64, b: f64) -> bool {
        a == b
    }
    fn fisnan(&mut self, a: f64) -> bool {
        a.is_nan()
    }
    fn ilt(&mut self, a: i64, b: i64) -> bool {
        a < b
    }
    fn ieq(&mut self, a: i64, b: i64) -> bool {
        a == b
    }
    fn and(&mut self, a: bool, b: bool) -> bool {
        a && b
    }
    fn or(&mut self, a: bool, b: bool) -> bool {
        a || b
    }
    fn not(&mut self, a: bool) -> bool {
        !a
    }
    fn fselect(&mut self, c: bool, a: f64, b: f64) -> f64 {
        if c {
            a
        } else {
            b
        }
    }
    fn iselect(&mut self, c: bool, a: i64, b: i64) -> i64 {
        if c {
            a
        } else {
            b
        }
    }
}

/// e^x (see [`super::exp`]).
pub fn exp(x: f64) -> f64 {
    super::exp(&mut Scalar, x)
}

/// The natural logarithm (see [`super::log`]).
pub fn log(x: f64) -> f64 {
    super::log(&mut Scalar, x)
}

/// The hyperbolic tangent (see [`super::tanh`]).
pub fn tanh(x: f64) -> f64 {
    super::tanh(&mut Scalar, x)
}

/// x^y (see [`super::pow`]).
pub fn pow(x: f64, y: f64) -> f64 {
    super::pow(&mut Scalar, x, y)
}

/// NaN-propagating maximum (see [`super::max`]).
pub fn max(a: f64, b: f64) -> f64 {
    super::max(&mut Scalar, a, b)
}

/// NaN-propagating minimum (see [`super::min`]).
pub fn min(a: f64, b: f64) -> f64 {
    super::min(&mut Scalar, a, b)
}

// The f32 functions are defined as the f64 function on the widened
// argument, rounded to f32 (one more rounding: the result can be off the
// correctly rounded f32 only in rare double-rounding cases). Generated code
// for f32 must do the same: extend, call the f64 routine, truncate.

/// e^x in f32: `exp(x as f64) as f32`.
pub fn exp_f32(x: f32) -> f32 {
    exp(x as f64) as f32
}

/// log in f32: `log(x as f64) as f32`.
pub fn log_f32(x: f32) -> f32 {
    log(x as f64) as f32
}

/// tanh in f32: `tanh(x as f64) as f32`.
pub fn tanh_f32(x: f32) -> f32 {
    tanh(x as f64) as f32
}

/// x^y in f32: `pow(x as f64, y as f64) as f32`.
pub fn pow_f32(x: f32, y: f32) -> f32 {
    pow(x as f64, y as f64) as f32
}
