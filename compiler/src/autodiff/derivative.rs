//! The partial derivative of a statement's right side with respect to one
//! of its reads, as an expression of the language: forward mode over the
//! statement's SSA ops, one rule per op, with zeros and ones folded so
//! the adjoint reads like a hand-written one. Where a function has no
//! derivative the rule takes TensorFlow's choice (docs/gradients.md,
//! "Rules").

use super::expr::Expr;
use crate::ir::et::{Module, OpKind, Stmt, ValueId};
use et_grammar::ast::{BinOp, CmpOp, Func};

/// A tangent: zero, one, or an expression.
#[derive(Clone, Debug)]
enum Tan {
    Zero,
    One,
    E(Expr),
}

impl Tan {
    fn expr(self) -> Expr {
        match self {
            Tan::Zero => Expr::Float(0.0),
            Tan::One => Expr::Float(1.0),
            Tan::E(e) => e,
        }
    }

    /// `self * factor`.
    fn times(self, factor: Expr) -> Tan {
        match self {
            Tan::Zero => Tan::Zero,
            Tan::One => Tan::E(factor),
            Tan::E(e) => Tan::E(Expr::mul(e, factor)),
        }
    }

    fn plus(self, other: Tan) -> Tan {
        match (self, other) {
            (Tan::Zero, t) | (t, Tan::Zero) => t,
            (a, b) => Tan::E(Expr::bin(BinOp::Add, a.expr(), b.expr())),
        }
    }

    fn neg(self) -> Tan {
        match self {
            Tan::Zero => Tan::Zero,
            Tan::One => Tan::E(Expr::Float(-1.0)),
            t => Tan::E(Expr::Neg(Box::new(t.expr()))),
        }
    }
}

/// d(result of `s`)/d(the cell that the read ops `wrt` all read), or
/// `None` when it is zero.
pub fn of_reads(m: &Module, s: &Stmt, wrt: &[ValueId]) -> Option<Expr> {
    match tangent(m, s, s.result, wrt) {
        Tan::Zero => None,
        t => Some(t.expr()),
    }
}

fn tangent(m: &Module, s: &Stmt, v: ValueId, wrt: &[ValueId]) -> Tan {
    let p = |x: ValueId| Expr::of_op(m, s, x);
    let t = |x: ValueId| tangent(m, s, x, wrt);
    match &s.ops[v].kind {
        OpKind::Read { .. } if wrt.contains(&v) => Tan::One,
        OpKind::ConstInt(_) | OpKind::ConstFloat(_) | OpKind::Rank(_) | OpKind::DimsAt(..) | OpKind::Read { .. } | OpKind::Random { .. } => Tan::Zero,
        // Comparisons are piecewise constant.
        OpKind::Compare(..) => Tan::Zero,
        OpKind::Neg(a) => t(*a).neg(),
        OpKind::Binary(op, a, b) => match op {
            BinOp::Add => t(*a).plus(t(*b)),
            BinOp::Sub => t(*a).plus(t(*b).neg()),
            BinOp::Mul => t(*a).times(p(*b)).plus(t(*b).times(p(*a))),
            // d(a/b) = da/b - a*db/b^2.
            BinOp::Div => {
                let da = match t(*a) {
                    Tan::Zero => Tan::Zero,
                    Tan::One => Tan::E(Expr::bin(BinOp::Div, Expr::Float(1.0), p(*b))),
                    Tan::E(e) => Tan::E(Expr::bin(BinOp::Div, e, p(*b))),
                };
                let db = t(*b).times(Expr::bin(BinOp::Div, p(*a), Expr::bin(BinOp::Mul, p(*b), p(*b))));
                da.plus(db.neg())
            }
            // Floor and ceiling divisions are piecewise constant.
            BinOp::FloorDiv | BinOp::CeilDiv => Tan::Zero,
            // a % b = a - b * (a // b): TensorFlow's floormod gradient.
            BinOp::Mod => t(*a).plus(t(*b).times(Expr::bin(BinOp::FloorDiv, p(*a), p(*b))).neg()),
        },
        OpKind::Call(f, args) => {
            let arg = |i: usize| p(args[i]);
            let targ = |i: usize| t(args[i]);
            match f {
                Func::Exp => targ(0).times(p(v)),
                Func::Log => match targ(0) {
                    Tan::Zero => Tan::Zero,
                    Tan::One => Tan::E(Expr::bin(BinOp::Div, Expr::Float(1.0), arg(0))),
                    Tan::E(e) => Tan::E(Expr::bin(BinOp::Div, e, arg(0))),
                },
                // 0.5 / sqrt(a): +inf at 0, as TensorFlow's.
                Func::Sqrt => targ(0).times(Expr::bin(BinOp::Div, Expr::Float(0.5), p(v))),
                Func::Tanh => targ(0).times(Expr::bin(BinOp::Sub, Expr::Float(1.0), Expr::mul(p(v), p(v)))),
                // sign(a): 0 at 0, as TensorFlow's.
                Func::Abs => targ(0).times(Expr::bin(BinOp::Sub, Expr::cmp(CmpOp::Gt, arg(0), Expr::Int(0)), Expr::cmp(CmpOp::Lt, arg(0), Expr::Int(0)))),
                // A tie goes to the first argument, as TensorFlow's
                // maximum/minimum gradients (`x >= y`, `x <= y`).
                Func::Max | Func::Min => {
                    let (da, db) = (targ(0), targ(1));
                    if matches!((&da, &db), (Tan::Zero, Tan::Zero)) {
                        return Tan::Zero;
                    }
                    let first = Expr::cmp(if *f == Func::Max { CmpOp::Ge } else { CmpOp::Le }, arg(0), arg(1));
                    Tan::E(Expr::select(first, da.expr(), db.expr()))
                }
                // d(a^b) = b * a^(b-1) da + log(a) * a^b db, the log taken
                // as 0 where a <= 0 (TensorFlow's pow gradient).
                Func::Pow => {
                    let da = targ(0).times(Expr::mul(arg(1), Expr::Call(Func::Pow, vec![arg(0), Expr::bin(BinOp::Sub, arg(1), Expr::Float(1.0))])));
                    let log = Expr::select(Expr::cmp(CmpOp::Gt, arg(0), Expr::Int(0)), Expr::Call(Func::Log, vec![arg(0)]), Expr::Float(0.0));
                    let db = targ(1).times(Expr::mul(log, p(v)));
                    da.plus(db)
                }
                // The branch taken gets the gradient.
                Func::Select => {
                    let (da, db) = (targ(1), targ(2));
                    if matches!((&da, &db), (Tan::Zero, Tan::Zero)) {
                        return Tan::Zero;
                    }
                    Tan::E(Expr::select(arg(0), da.expr(), db.expr()))
                }
            }
        }
    }
}
