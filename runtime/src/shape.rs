//! Shape expressions of a format-2 manifest (docs/bundle.md, "Dynamic
//! bundles"): the loop dialect's printed index expressions over dim
//! symbols (`((%x.0 - %w.0) + 1)`, docs/ir-loop.md), read and evaluated
//! without the compiler. Evaluation is checked: an overflow, or a division
//! by zero, is an error naming the expression, never a wrapped value (a
//! shape computed from a user's input must not silently wrap).

use std::collections::BTreeMap;

use crate::error::{Error, Result};

/// A parsed shape expression.
#[derive(Clone, Debug, PartialEq)]
pub enum ShapeExpr {
    Const(i64),
    /// A dim symbol by name (`x.0`), without its `%`.
    Sym(String),
    Bin(Op, Box<ShapeExpr>, Box<ShapeExpr>),
}

#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Op {
    Add,
    Sub,
    Mul,
    FloorDiv,
    CeilDiv,
    Mod,
    Min,
    Max,
}

/// Deepest parenthesis nesting read (hostile manifests must not overflow
/// the stack; compiled shapes nest a few levels per eintup component).
const MAX_DEPTH: usize = 256;

impl ShapeExpr {
    /// Parses `text` (fully parenthesised, as the loop dialect prints).
    pub fn parse(text: &str) -> Result<ShapeExpr> {
        let mut p = Parser { s: text.as_bytes(), i: 0, depth: 0 };
        let e = p.expr()?;
        p.blanks();
        if p.i != p.s.len() {
            return Err(p.error("unexpected text after the expression"));
        }
        Ok(e)
    }

    /// The value when every symbol has one in `dims`; checked arithmetic.
    pub fn eval(&self, dims: &BTreeMap<String, i64>) -> Result<i64> {
        match self {
            ShapeExpr::Const(c) => Ok(*c),
            ShapeExpr::Sym(s) => dims.get(s).copied().ok_or_else(|| Error::BadManifest(format!("shape expression uses `%{s}`, which no rule defines"))),
            ShapeExpr::Bin(op, a, b) => {
                let (x, y) = (a.eval(dims)?, b.eval(dims)?);
                let r = match op {
                    Op::Add => x.checked_add(y),
                    Op::Sub => x.checked_sub(y),
                    Op::Mul => x.checked_mul(y),
                    Op::Min => Some(x.min(y)),
                    Op::Max => Some(x.max(y)),
                    _ if y == 0 => None,
                    Op::FloorDiv => floor_div(x, y),
                    Op::CeilDiv => x.checked_neg().and_then(|nx| floor_div(nx, y)).and_then(i64::checked_neg),
                    // Python's `%`: the sign of the divisor.
                    Op::Mod => x.checked_rem(y).map(|r| if r != 0 && (r < 0) != (y < 0) { r + y } else { r }),
                };
                r.ok_or_else(|| Error::Input { name: "shape".into(), reason: format!("`{x} {} {y}` overflows or divides by zero", op.spelling()) })
            }
        }
    }

    /// Every symbol the expression names.
    pub fn symbols(&self, out: &mut Vec<String>) {
        match self {
            ShapeExpr::Const(_) => {}
            ShapeExpr::Sym(s) => out.push(s.clone()),
            ShapeExpr::Bin(_, a, b) => {
                a.symbols(out);
                b.symbols(out);
            }
        }
    }
}

/// Python's `//` (floor), `None` on overflow (`MIN // -1`) or `y == 0`.
fn floor_div(x: i64, y: i64) -> Option<i64> {
    let q = x.checked_div(y)?;
    Some(if x % y != 0 && ((x < 0) != (y < 0)) { q - 1 } else { q })
}

impl Op {
    fn spelling(self) -> &'static str {
        match self {
            Op::Add => "+",
            Op::Sub => "-",
            Op::Mul => "*",
            Op::FloorDiv => "//",
            Op::CeilDiv => "//^",
            Op::Mod => "%",
            Op::Min => "min",
            Op::Max => "max",
        }
    }
}

struct Parser<'a> {
    s: &'a [u8],
    i: usize,
    depth: usize,
}

impl Parser<'_> {
    fn error(&self, what: &str) -> Error {
        Error::BadManifest(format!("shape expression `{}`: {what} at byte {}", String::from_utf8_lossy(self.s), self.i))
    }

    fn blanks(&mut self) {
        while self.s.get(self.i).is_some_and(|c| c.is_ascii_whitespace()) {
            self.i += 1;
        }
    }

    fn eat(&mut self, t: &str) -> bool {
        self.blanks();
        if self.s[self.i..].starts_with(t.as_bytes()) {
            self.i += t.len();
            true
        } else {
            false
        }
    }

    fn expect(&mut self, t: &str) -> Result<()> {
        if self.eat(t) {
            Ok(())
        } else {
            Err(self.error(&format!("expected `{t}`")))
        }
    }

    fn expr(&mut self) -> Result<ShapeExpr> {
        self.depth += 1;
        if self.depth > MAX_DEPTH {
            return Err(self.error("nested too deeply"));
        }
        let e = self.expr_inner();
        self.depth -= 1;
        e
    }

    fn expr_inner(&mut self) -> Result<ShapeExpr> {
        self.blanks();
        for (word, op) in [("min", Op::Min), ("max", Op::Max)] {
            if self.eat(&format!("{word}(")) {
                let a = self.expr()?;
                self.expect(",")?;
                let b = self.expr()?;
                self.expect(")")?;
                return Ok(ShapeExpr::Bin(op, Box::new(a), Box::new(b)));
            }
        }
        if self.eat("(") {
            let a = self.expr()?;
            // Longest operator first: `//^` before `//`.
            let ops = [("//^", Op::CeilDiv), ("//", Op::FloorDiv), ("+", Op::Add), ("-", Op::Sub), ("*", Op::Mul), ("%", Op::Mod)];
            let Some(op) = ops.iter().find(|(t, _)| self.eat(t)).map(|&(_, op)| op) else { return Err(self.error("expected an operator")) };
            let b = self.expr()?;
            self.expect(")")?;
            return Ok(ShapeExpr::Bin(op, Box::new(a), Box::new(b)));
        }
        if self.eat("%") {
            let start = self.i;
            while self.s.get(self.i).is_some_and(|&c| c.is_ascii_alphanumeric() || c == b'_' || c == b'.' || c >= 0x80) {
                self.i += 1;
            }
            let name = std::str::from_utf8(&self.s[start..self.i]).map_err(|_| self.error("a symbol name that is not UTF-8"))?;
            if name.is_empty() {
                return Err(self.error("expected a symbol name after `%`"));
            }
            return Ok(ShapeExpr::Sym(name.to_string()));
        }
        let start = self.i;
        if self.s.get(self.i) == Some(&b'-') {
            self.i += 1;
        }
        while self.s.get(self.i).is_some_and(u8::is_ascii_digit) {
            self.i += 1;
        }
        let digits = std::str::from_utf8(&self.s[start..self.i]).unwrap_or_default();
        digits.parse::<i64>().map(ShapeExpr::Const).map_err(|_| self.error("expected a number, a `%symbol` or `(`"))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn dims(v: &[(&str, i64)]) -> BTreeMap<String, i64> {
        v.iter().map(|(k, v)| (k.to_string(), *v)).collect()
    }

    #[test]
    fn printed_loop_expressions_parse_and_evaluate() {
        let e = ShapeExpr::parse("((%x.0 - %w.0) + 1)").unwrap();
        assert_eq!(e.eval(&dims(&[("x.0", 7), ("w.0", 3)])).unwrap(), 5);
        let e = ShapeExpr::parse("max(0, min((%a // 2), (%a //^ 2)))").unwrap();
        assert_eq!(e.eval(&dims(&[("a", 7)])).unwrap(), 3);
        assert_eq!(ShapeExpr::parse("(-7 // 2)").unwrap().eval(&dims(&[])).unwrap(), -4);
        assert_eq!(ShapeExpr::parse("(-7 % 2)").unwrap().eval(&dims(&[])).unwrap(), 1);
        assert_eq!(ShapeExpr::parse("(7 % -2)").unwrap().eval(&dims(&[])).unwrap(), -1);
        assert_eq!(ShapeExpr::parse("(7 //^ 2)").unwrap().eval(&dims(&[])).unwrap(), 4);
        assert_eq!(ShapeExpr::parse("(-7 //^ 2)").unwrap().eval(&dims(&[])).unwrap(), -3);
        assert_eq!(ShapeExpr::parse("(7 // -2)").unwrap().eval(&dims(&[])).unwrap(), -4);
    }

    #[test]
    fn overflow_division_by_zero_and_bad_text_are_errors() {
        let e = ShapeExpr::parse("(%a * %a)").unwrap();
        assert!(e.eval(&dims(&[("a", 1 << 40)])).is_err());
        assert!(ShapeExpr::parse("(%a // 0)").unwrap().eval(&dims(&[("a", 1)])).is_err());
        assert!(ShapeExpr::parse("(%a // 0)").unwrap().eval(&dims(&[])).is_err());
        for bad in ["", "(1 + 2", "(1 ? 2)", "%", "1 2", "min(1)", &"(".repeat(1000)] {
            assert!(ShapeExpr::parse(bad).is_err(), "{bad:?}");
        }
    }
}
