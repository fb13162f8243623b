//! Integer division with the language's rules (LANGUAGE.md s.3-4): floor
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
/// INT (`i32`) `+ - * // //^ %` of LANGUAGE.md s.3: `+ - *` wrap; the
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

/// FLOAT `+ - * / // //^ %`: `//` is floor(a/b), `//^` ceil(a/b), `%` is
/// `a - b*floor(a/b)` (in f64; callers round to f32 where FLOAT is f32).
pub fn float_binary(op: BinOp, x: f64, y: f64) -> f64 {
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
}
