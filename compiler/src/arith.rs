//! Integer division with the language's rules (docs/language.md s.3-4): floor
//! division, ceiling division and floor modulo, as in Python. One
//! definition, instantiated for `i64` (run-time index and INT arithmetic)
//! and `i128` (shape arithmetic that must not overflow). Divisors are
//! non-zero: callers decide what a zero divisor means where they are.

use et_grammar::ast::BinOp;

macro_rules! python_division {
    ($t:ty) => {
        /// Floor division; `b != 0`.
        pub fn floor_div(a: $t, b: $t) -> $t {
            let q = a.wrapping_div(b);
            if a.wrapping_rem(b) != 0 && ((a < 0) != (b < 0)) {
                q - 1
            } else {
                q
            }
        }

        /// Ceiling division; `b != 0`.
        pub fn ceil_div(a: $t, b: $t) -> $t {
            let q = a.wrapping_div(b);
            if a.wrapping_rem(b) != 0 && ((a < 0) == (b < 0)) {
                q + 1
            } else {
                q
            }
        }

        /// Floor modulo (the sign of the divisor); `b != 0`.
        pub fn floor_mod(a: $t, b: $t) -> $t {
            let r = a.wrapping_rem(b);
            if r != 0 && ((r < 0) != (b < 0)) {
                r + b
            } else {
                r
            }
        }
    };
}

python_division!(i64);

/// The same rules on `i128`, for interval arithmetic over shapes.
/// INT (`i32`) `+ - * // //^ %` of docs/language.md s.3: `+ - *` wrap; the
/// divisions are floor/ceil/floor-mod computed in i64 and wrapped
/// (`i32::MIN // -1`), divisor 0 gives 0. `None` for `/` (INT / INT is
/// FLOAT). The one definition both interpreters use.
pub fn int_binary(op: BinOp, x: i32, y: i32) -> Option<i32> {
    Some(match op {
        BinOp::Add => x.wrapping_add(y),
        BinOp::Sub => x.wrapping_sub(y),
        BinOp::Mul => x.wrapping_mul(y),
        BinOp::Div => return None,
        _ if y == 0 => 0,
        BinOp::FloorDiv => floor_div(x as i64, y as i64) as i32,
        BinOp::CeilDiv => ceil_div(x as i64, y as i64) as i32,
        BinOp::Mod => floor_mod(x as i64, y as i64) as i32,
    })
}

macro_rules! float_ops {
    ($name:ident, $t:ty) => {
        /// FLOAT `+ - * / // //^ %` with every step in this width:
        /// `//` is floor(a/b), `//^` ceil(a/b), `%` is `a - b*floor(a/b)`,
        /// the quotient and the product each rounded (no fused multiply-add).
        pub fn $name(op: BinOp, x: $t, y: $t) -> $t {
            match op {
                BinOp::Add => x + y,
                BinOp::Sub => x - y,
                BinOp::Mul => x * y,
                BinOp::Div => x / y,
                BinOp::FloorDiv => (x / y).floor(),
                BinOp::CeilDiv => (x / y).ceil(),
                BinOp::Mod => x - y * (x / y).floor(),
            }
        }
    };
}

float_ops!(float_binary_f64, f64);
float_ops!(float_binary_f32, f32);

/// FLOAT arithmetic in the program's float width (docs/semantics.md,
/// "Values"): in f32 every operation, each step of `//`, `//^` and `%`
/// included, is an f32 operation, as compiled code and frameworks compute
/// it. Computing `//` in f64 and rounding once floors a different quotient
/// (2.5 / 0.1 is 25 in f32 but 24.99999996 in f64). With `f32`, `x` and `y`
/// must be f32 values (held in f64, as the interpreters keep them).
pub fn float_binary(op: BinOp, x: f64, y: f64, f32: bool) -> f64 {
    if f32 {
        float_binary_f32(op, x as f32, y as f32) as f64
    } else {
        float_binary_f64(op, x, y)
    }
}

pub mod wide {
    python_division!(i128);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn python_division_rules() {
        // (a, b, a // b, a % b, ceil(a / b)) from Python.
        for (a, b, q, r, c) in [(7, 2, 3, 1, 4), (-7, 2, -4, 1, -3), (7, -2, -4, -1, -3), (-7, -2, 3, -1, 4), (6, 3, 2, 0, 2), (0, 5, 0, 0, 0)] {
            assert_eq!(floor_div(a, b), q, "{a} // {b}");
            assert_eq!(floor_mod(a, b), r, "{a} % {b}");
            assert_eq!(ceil_div(a, b), c, "ceil({a} / {b})");
            assert_eq!(wide::floor_div(a as i128, b as i128), q as i128, "wide {a} // {b}");
            assert_eq!(wide::floor_mod(a as i128, b as i128), r as i128, "wide {a} % {b}");
            assert_eq!(wide::ceil_div(a as i128, b as i128), c as i128, "wide ceil({a} / {b})");
        }
    }

    #[test]
    fn float_steps_round_in_the_float_width() {
        use BinOp::*;
        // f32: 2.5f32 / 0.1f32 rounds to exactly 25, so 2.5 // 0.1 = 25 and
        // 2.5 % 0.1 = 2.5 - fl(0.1 * 25) = 2.5 - 2.5 = 0; 0.3 / 0.1 rounds
        // to 3, so 0.3 //^ 0.1 = 3.
        let (a, b) = (2.5f32 as f64, 0.1f32 as f64);
        assert_eq!(float_binary(FloorDiv, a, b, true), 25.0);
        assert_eq!(float_binary(Mod, a, b, true), 0.0);
        assert_eq!(float_binary(CeilDiv, 0.3f32 as f64, b, true), 3.0);
        // f64 on the same values: the quotient is 24.9999996..., so the
        // floor is 24 and the remainder is 0.1f32 - 3.7e-8 (what rounding
        // once after f64 arithmetic gave in f32 mode before).
        assert_eq!(float_binary(FloorDiv, a, b, false), 24.0);
        assert!((float_binary(Mod, a, b, false) - 0.09999996).abs() < 1e-8);
        assert_eq!(float_binary(CeilDiv, 0.3f32 as f64, b, false), 4.0);
        // Python's rules in f64: -7.5 // 2 = -4, -7.5 % 2 = 0.5, 7.5 //^ 2 = 4.
        assert_eq!(float_binary(FloorDiv, -7.5, 2.0, false), -4.0);
        assert_eq!(float_binary(Mod, -7.5, 2.0, false), 0.5);
        assert_eq!(float_binary(CeilDiv, 7.5, 2.0, false), 4.0);
    }
}
