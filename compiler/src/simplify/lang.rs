//! The egg language of `simplify-index`: one e-node per `IExpr` operator,
//! plus the conversion between `IExpr` trees and egg `RecExpr`s.
//!
//! Operators are spelled as in the loop dialect's text (`+ - * // //^ %
//! min max`) so that rule patterns read like the IR. Constants are `i64`
//! and variables are `v<id>` (`VarRef`), which keeps the `VarId` itself in
//! the node instead of an interned name that would need a side table.

use crate::ir::loops::{DimId, IBin, IExpr, VarId};
use egg::{define_language, Id, RecExpr};
use std::fmt;
use std::str::FromStr;

/// A loop-dialect variable inside the e-graph, printed `v<id>`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct VarRef(pub VarId);

impl fmt::Display for VarRef {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "v{}", self.0)
    }
}

impl FromStr for VarRef {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        s.strip_prefix('v').and_then(|n| n.parse::<VarId>().ok()).map(VarRef).ok_or_else(|| format!("not a variable: {s}"))
    }
}

/// A dim symbol inside the e-graph, printed `d<id>`: a leaf like a
/// variable, but fixed for the whole run and non-negative.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct SymRef(pub DimId);

impl fmt::Display for SymRef {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "d{}", self.0)
    }
}

impl FromStr for SymRef {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        s.strip_prefix('d').and_then(|n| n.parse::<DimId>().ok()).map(SymRef).ok_or_else(|| format!("not a dim symbol: {s}"))
    }
}

define_language! {
    /// Index expressions: the `IExpr` operators over `i64` with the loop
    /// dialect's total, wrapping semantics (`x // 0 == 0`).
    pub enum IndexLang {
        // `Num` is listed before `Var` so that `-3` parses as a constant.
        Num(i64),
        "+" = Add([Id; 2]),
        "-" = Sub([Id; 2]),
        "*" = Mul([Id; 2]),
        "//" = FloorDiv([Id; 2]),
        "//^" = CeilDiv([Id; 2]),
        "%" = Mod([Id; 2]),
        "min" = Min([Id; 2]),
        "max" = Max([Id; 2]),
        Var(VarRef),
        Sym(SymRef),
    }
}

impl IndexLang {
    /// The node for `op` applied to two e-classes.
    pub fn bin(op: IBin, a: Id, b: Id) -> IndexLang {
        let ch = [a, b];
        match op {
            IBin::Add => IndexLang::Add(ch),
            IBin::Sub => IndexLang::Sub(ch),
            IBin::Mul => IndexLang::Mul(ch),
            IBin::FloorDiv => IndexLang::FloorDiv(ch),
            IBin::CeilDiv => IndexLang::CeilDiv(ch),
            IBin::Mod => IndexLang::Mod(ch),
            IBin::Min => IndexLang::Min(ch),
            IBin::Max => IndexLang::Max(ch),
        }
    }

    /// The binary operator and operands of an operator node; `None` for
    /// leaves.
    pub fn as_bin(&self) -> Option<(IBin, Id, Id)> {
        match self.shape() {
            Shape::Bin(op, a, b) => Some((op, a, b)),
            Shape::Leaf(_) => None,
        }
    }

    /// The node as an `IExpr` leaf or an operator over two e-classes.
    pub fn shape(&self) -> Shape {
        let (op, [a, b]) = match self {
            IndexLang::Num(c) => return Shape::Leaf(IExpr::Const(*c)),
            IndexLang::Var(v) => return Shape::Leaf(IExpr::Var(v.0)),
            IndexLang::Sym(d) => return Shape::Leaf(IExpr::Sym(d.0)),
            IndexLang::Add(c) => (IBin::Add, c),
            IndexLang::Sub(c) => (IBin::Sub, c),
            IndexLang::Mul(c) => (IBin::Mul, c),
            IndexLang::FloorDiv(c) => (IBin::FloorDiv, c),
            IndexLang::CeilDiv(c) => (IBin::CeilDiv, c),
            IndexLang::Mod(c) => (IBin::Mod, c),
            IndexLang::Min(c) => (IBin::Min, c),
            IndexLang::Max(c) => (IBin::Max, c),
        };
        Shape::Bin(op, *a, *b)
    }
}

/// What a node is, in `IExpr` terms.
pub enum Shape {
    Leaf(IExpr),
    Bin(IBin, Id, Id),
}

/// Appends `e` to `out` and returns the id of its root node.
pub fn add_to_recexpr(e: &IExpr, out: &mut RecExpr<IndexLang>) -> Id {
    match e {
        IExpr::Const(c) => out.add(IndexLang::Num(*c)),
        IExpr::Var(v) => out.add(IndexLang::Var(VarRef(*v))),
        IExpr::Sym(d) => out.add(IndexLang::Sym(SymRef(*d))),
        IExpr::Bin(op, a, b) => {
            let a = add_to_recexpr(a, out);
            let b = add_to_recexpr(b, out);
            out.add(IndexLang::bin(*op, a, b))
        }
    }
}

/// `e` as a `RecExpr` whose last node is the root.
pub fn to_recexpr(e: &IExpr) -> RecExpr<IndexLang> {
    let mut out = RecExpr::default();
    add_to_recexpr(e, &mut out);
    out
}

/// The tree rooted at the last node of `r`; `None` when `r` is empty.
pub fn from_recexpr(r: &RecExpr<IndexLang>) -> Option<IExpr> {
    // Children precede parents in a RecExpr, so one forward pass builds
    // every subtree before it is needed.
    let mut built: Vec<IExpr> = Vec::with_capacity(r.as_ref().len());
    for node in r.as_ref() {
        let e = match node.shape() {
            Shape::Leaf(e) => e,
            Shape::Bin(op, a, b) => {
                let a = built.get(usize::from(a))?.clone();
                let b = built.get(usize::from(b))?.clone();
                IExpr::bin(op, a, b)
            }
        };
        built.push(e);
    }
    built.pop()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn recexpr_round_trip_keeps_the_tree() {
        // (v0 * 2 + v1) // -3 min 7
        let e = IExpr::bin(IBin::Min, IExpr::bin(IBin::FloorDiv, IExpr::add(IExpr::mul(IExpr::v(0), IExpr::c(2)), IExpr::v(1)), IExpr::c(-3)), IExpr::c(7));
        let r = to_recexpr(&e);
        assert_eq!(r.to_string(), "(min (// (+ (* v0 2) v1) -3) 7)");
        assert_eq!(from_recexpr(&r), Some(e));
    }

    #[test]
    fn text_form_parses_with_negative_constants_and_all_ops() {
        let r: RecExpr<IndexLang> = "(max (//^ (% v3 -4) 5) (- -1 v10))".parse().unwrap();
        let e = from_recexpr(&r).unwrap();
        // v3 = 9: 9 % -4 = -3 (Python), -3 //^ 5 = 0; -1 - v10 with v10 = 2 is -3.
        let mut env = vec![0; 11];
        env[3] = 9;
        env[10] = 2;
        assert_eq!(e.eval(&env), 0);
        assert_eq!(e.op_count(), 4);
    }

    #[test]
    fn var_ref_rejects_other_names() {
        assert!("x".parse::<VarRef>().is_err());
        assert!("v".parse::<VarRef>().is_err());
        assert_eq!("v12".parse::<VarRef>(), Ok(VarRef(12)));
    }
}
