//! Right-hand sides as trees, printed as `.et` source with the fewest
//! parentheses the grammar's precedence allows: what the differentiator
//! builds adjoint statements from. A forward statement's SSA ops become a
//! tree with [`Expr::of_op`]; reads keep the module's index expressions, so
//! the gather rewrite can substitute eintups inside them.

use crate::ir::et::{print, DimsList, EintupId, IndexExpr, IndexKind, IndexOp, IndexSlot, Module, OpKind, Stmt, ValueId};
use crate::ir::text::Spelled;
use et_grammar::ast::{BinOp, CmpOp, ElemType, Func};

#[derive(Clone, Debug, PartialEq)]
pub enum Expr {
    Int(i64),
    Float(f64),
    /// `name[slots]`: a read of an array of the module or of one the
    /// differentiator adds (by name, since those have no id yet).
    Read(String, Vec<IndexSlot>),
    DimsAt(DimsList, IndexExpr),
    Rank(Vec<EintupId>),
    Random(Box<Expr>, Box<Expr>, ElemType),
    Neg(Box<Expr>),
    Bin(BinOp, Box<Expr>, Box<Expr>),
    Cmp(CmpOp, Box<Expr>, Box<Expr>),
    Call(Func, Vec<Expr>),
}

/// Binding strength, loosest first (docs/language.md, "Operator precedence").
const CMP: u8 = 1;
const ADD: u8 = 2;
const MUL: u8 = 3;
const ATOM: u8 = 5;

impl Expr {
    /// Op `v` of statement `s` and everything it uses, as a tree.
    pub fn of_op(m: &Module, s: &Stmt, v: ValueId) -> Expr {
        let sub = |x: ValueId| Box::new(Expr::of_op(m, s, x));
        match &s.ops[v].kind {
            OpKind::ConstInt(n) => Expr::Int(*n),
            OpKind::ConstFloat(x) => Expr::Float(*x),
            OpKind::Rank(l) => Expr::Rank(l.clone()),
            OpKind::DimsAt(l, t) => Expr::DimsAt(l.clone(), t.clone()),
            OpKind::Read { array, indices } => Expr::Read(m.arrays[*array].name.clone(), indices.clone()),
            OpKind::Random { lo, hi, dtype } => Expr::Random(sub(*lo), sub(*hi), *dtype),
            OpKind::Neg(a) => Expr::Neg(sub(*a)),
            OpKind::Binary(op, a, b) => Expr::Bin(*op, sub(*a), sub(*b)),
            OpKind::Compare(op, a, b) => Expr::Cmp(*op, sub(*a), sub(*b)),
            OpKind::Call(f, args) => Expr::Call(*f, args.iter().map(|&a| Expr::of_op(m, s, a)).collect()),
        }
    }

    pub fn read(name: &str, slots: &[IndexSlot]) -> Expr {
        Expr::Read(name.to_string(), slots.to_vec())
    }

    pub fn bin(op: BinOp, a: Expr, b: Expr) -> Expr {
        Expr::Bin(op, Box::new(a), Box::new(b))
    }

    pub fn cmp(op: CmpOp, a: Expr, b: Expr) -> Expr {
        Expr::Cmp(op, Box::new(a), Box::new(b))
    }

    /// `select(c, a, b)`.
    pub fn select(c: Expr, a: Expr, b: Expr) -> Expr {
        Expr::Call(Func::Select, vec![c, a, b])
    }

    /// `a * b`, leaving out a factor 1 and writing a factor -1 as a
    /// negation.
    pub fn mul(a: Expr, b: Expr) -> Expr {
        match (&a, &b) {
            (Expr::Float(x), _) if *x == 1.0 => b,
            (_, Expr::Float(x)) if *x == 1.0 => a,
            (Expr::Float(x), _) if *x == -1.0 => Expr::Neg(Box::new(b)),
            (_, Expr::Float(x)) if *x == -1.0 => Expr::Neg(Box::new(a)),
            _ => Expr::bin(BinOp::Mul, a, b),
        }
    }

    /// Calls `f` on every read inside the tree, in order.
    pub fn for_each_read(&self, f: &mut impl FnMut(&str, &[IndexSlot])) {
        match self {
            Expr::Read(name, slots) => f(name, slots),
            Expr::Random(a, b, _) | Expr::Bin(_, a, b) | Expr::Cmp(_, a, b) => {
                a.for_each_read(f);
                b.for_each_read(f);
            }
            Expr::Neg(a) => a.for_each_read(f),
            Expr::Call(_, args) => args.iter().for_each(|a| a.for_each_read(f)),
            Expr::Int(_) | Expr::Float(_) | Expr::DimsAt(..) | Expr::Rank(_) => {}
        }
    }

    /// Calls `f` on every index expression of the tree (reads' slots and
    /// the index of `DIMS(..)[t]`).
    pub fn for_each_index(&self, f: &mut impl FnMut(&IndexExpr)) {
        match self {
            Expr::Read(_, slots) => slots.iter().for_each(|s| {
                if let IndexSlot::Expr(e) = s {
                    f(e)
                }
            }),
            Expr::DimsAt(_, t) => f(t),
            Expr::Random(a, b, _) | Expr::Bin(_, a, b) | Expr::Cmp(_, a, b) => {
                a.for_each_index(f);
                b.for_each_index(f);
            }
            Expr::Neg(a) => a.for_each_index(f),
            Expr::Call(_, args) => args.iter().for_each(|a| a.for_each_index(f)),
            Expr::Int(_) | Expr::Float(_) | Expr::Rank(_) => {}
        }
    }

    /// [`Expr::for_each_index`], mutably.
    pub fn for_each_index_mut(&mut self, f: &mut impl FnMut(&mut IndexExpr)) {
        match self {
            Expr::Read(_, slots) => slots.iter_mut().for_each(|s| {
                if let IndexSlot::Expr(e) = s {
                    f(e)
                }
            }),
            Expr::DimsAt(_, t) => f(t),
            Expr::Random(a, b, _) | Expr::Bin(_, a, b) | Expr::Cmp(_, a, b) => {
                a.for_each_index_mut(f);
                b.for_each_index_mut(f);
            }
            Expr::Neg(a) => a.for_each_index_mut(f),
            Expr::Call(_, args) => args.iter_mut().for_each(|a| a.for_each_index_mut(f)),
            Expr::Int(_) | Expr::Float(_) | Expr::Rank(_) => {}
        }
    }

    /// Calls `f` with the eintups of every `DIMS(..)[t]` and `RANK(..)`
    /// list in the tree.
    pub fn for_each_list(&self, f: &mut impl FnMut(Vec<EintupId>)) {
        match self {
            Expr::DimsAt(l, _) => f(l.eintups().collect()),
            Expr::Rank(l) => f(l.clone()),
            Expr::Random(a, b, _) | Expr::Bin(_, a, b) | Expr::Cmp(_, a, b) => {
                a.for_each_list(f);
                b.for_each_list(f);
            }
            Expr::Neg(a) => a.for_each_list(f),
            Expr::Call(_, args) => args.iter().for_each(|a| a.for_each_list(f)),
            Expr::Int(_) | Expr::Float(_) | Expr::Read(..) => {}
        }
    }

    fn strength(&self) -> u8 {
        match self {
            Expr::Cmp(..) => CMP,
            Expr::Bin(BinOp::Add | BinOp::Sub, ..) => ADD,
            Expr::Bin(..) => MUL,
            // Negative numbers and negations are parenthesised wherever
            // they are an operand, so their strength is never compared.
            _ => ATOM,
        }
    }

    /// The tree as `.et` source.
    pub fn source(&self, m: &Module) -> String {
        // A negation binds tightest (`-a * b` is `(-a) * b`), so only a
        // right operand writes it in parentheses, for the reader.
        let operand = |e: &Expr, min: u8, right: bool| {
            let text = e.source(m);
            let negative = matches!(e, Expr::Neg(_)) || matches!(e, Expr::Int(n) if *n < 0) || matches!(e, Expr::Float(x) if x.is_sign_negative());
            if e.strength() < min || negative && right {
                format!("({text})")
            } else {
                text
            }
        };
        match self {
            Expr::Int(n) => n.to_string(),
            Expr::Float(x) => format!("{x:?}"),
            Expr::Read(name, slots) => format!("{name}[{}]", slots_source(m, slots)),
            Expr::DimsAt(l, t) => format!("DIMS({})[{}]", dims_list(m, l), index_source(m, t)),
            Expr::Rank(l) => format!("RANK({})", l.iter().map(|&t| m.eintups[t].name.as_str()).collect::<Vec<_>>().join(", ")),
            Expr::Random(lo, hi, ty) => format!("RANDOM({}, {}, {})", lo.source(m), hi.source(m), ty.text()),
            Expr::Neg(a) => format!("-{}", operand(a, ATOM, true)),
            // Left-associative: the right operand of an equal strength
            // needs parentheses (`a - (b - c)`).
            Expr::Bin(op, a, b) => {
                let s = self.strength();
                format!("{} {} {}", operand(a, s, false), op.text(), operand(b, s + 1, true))
            }
            // Comparisons do not chain: both operands bind tighter.
            Expr::Cmp(op, a, b) => format!("{} {} {}", operand(a, ADD, false), op.text(), operand(b, ADD, true)),
            Expr::Call(f, args) => format!("{}({})", f.name(), args.iter().map(|a| a.source(m)).collect::<Vec<_>>().join(", ")),
        }
    }
}

fn dims_list(m: &Module, l: &DimsList) -> String {
    let text = print::index_expr(m, &IndexExpr { kind: IndexKind::Dims(l.clone()), span: Default::default() });
    text.strip_prefix("DIMS(").and_then(|t| t.strip_suffix(')')).unwrap_or(&text).to_string()
}

/// An index expression as `.et` source, parenthesised only where the
/// precedence of `+ -` below `* // //^ %` needs it.
pub fn index_source(m: &Module, e: &IndexExpr) -> String {
    let strength = |e: &IndexExpr| match &e.kind {
        IndexKind::Bin(IndexOp::Add | IndexOp::Sub, ..) => ADD,
        IndexKind::Bin(..) => MUL,
        _ => ATOM,
    };
    match &e.kind {
        IndexKind::Bin(op, a, b) => {
            let s = strength(e);
            let operand = |x: &IndexExpr, min: u8| if strength(x) < min { format!("({})", index_source(m, x)) } else { index_source(m, x) };
            format!("{} {} {}", operand(a, s), op.spelling(), operand(b, s + 1))
        }
        IndexKind::Flat(v) => format!("FLAT({})", v.iter().map(|x| index_source(m, x)).collect::<Vec<_>>().join(", ")),
        IndexKind::Slice { array, indices } => format!("{}[{}]", m.arrays[*array].name, slots_source(m, indices)),
        _ => print::index_expr(m, e),
    }
}

pub fn slots_source(m: &Module, slots: &[IndexSlot]) -> String {
    slots
        .iter()
        .map(|s| match s {
            IndexSlot::Expr(e) => index_source(m, e),
            IndexSlot::Colon(_) => ":".to_string(),
        })
        .collect::<Vec<_>>()
        .join(", ")
}

/// `name[slots] op rhs` as one line of `.et` source.
pub fn statement(m: &Module, name: &str, slots: &[IndexSlot], op: et_grammar::ast::AssignOp, rhs: &Expr) -> String {
    format!("{name}[{}] {} {}", slots_source(m, slots), op.text(), rhs.source(m))
}
