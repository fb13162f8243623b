//! Textual form of the `et` dialect (see docs/ir-et.md). One line per
//! eintup, array and op; index expressions fully parenthesised so the
//! parser (`parse`) needs no precedence rules. Every id is printed
//! as a name; the parser resolves names back to ids, so `parse(print(m))`
//! equals `m` up to spans for any module that passes `verify::verify`.

use super::syntax::{self, OpName};
use super::*;
use crate::ir::loops::print::sym_expr;
use crate::ir::text::{float_text, quote, Spelled};
use et_grammar::ast::Literal;
use std::fmt::Write;

fn names(m: &Module, l: &[EintupId]) -> String {
    l.iter().map(|e| m.eintups.get(*e).map_or("?", |x| x.name.as_str()).to_string()).collect::<Vec<_>>().join(", ")
}

/// A `DIMS(..)` list's items: eintup names and literals.
fn dims_list(m: &Module, l: &DimsList) -> String {
    let item = |i: &DimsItem| match i {
        DimsItem::Eintup(t) => names(m, &[*t]),
        DimsItem::Lit(n) => n.to_string(),
    };
    l.0.iter().map(item).collect::<Vec<_>>().join(", ")
}

fn array_name(m: &Module, a: ArrayId) -> &str {
    m.arrays.get(a).map_or("?", |x| x.name.as_str())
}

/// An index expression as source-like text.
pub fn index_expr(m: &Module, e: &IndexExpr) -> String {
    match &e.kind {
        IndexKind::Var(t) => names(m, &[*t]),
        IndexKind::Lit(n) => n.to_string(),
        IndexKind::Dims(l) => format!("{}({})", syntax::DIMS, dims_list(m, l)),
        IndexKind::Rank(l) => format!("{}({})", syntax::RANK, names(m, l)),
        IndexKind::Flat(v) => format!("{}({})", syntax::FLAT, v.iter().map(|x| index_expr(m, x)).collect::<Vec<_>>().join(", ")),
        IndexKind::Slice { array, indices } => format!("{}[{}]", array_name(m, *array), slots(m, indices)),
        IndexKind::Bin(op, a, b) => format!("({} {} {})", index_expr(m, a), op.spelling(), index_expr(m, b)),
    }
}

pub fn slots(m: &Module, s: &[IndexSlot]) -> String {
    s.iter()
        .map(|x| match x {
            IndexSlot::Expr(e) => index_expr(m, e),
            IndexSlot::Colon(_) => ":".to_string(),
        })
        .collect::<Vec<_>>()
        .join(", ")
}

fn dims_text(rank: Option<usize>, dims: &Option<Vec<i64>>) -> String {
    match (rank, dims) {
        (_, Some(d)) => format!("{d:?}"),
        (Some(r), None) => format!("?{r}"),
        (None, None) => "?".to_string(),
    }
}

fn sig(m: &Module, t: &SigType) -> String {
    let ev = t
        .eintups
        .iter()
        .map(|e| match m.eintups.get(*e) {
            Some(x) => format!("{}:{}", x.name, dims_text(x.rank, &x.dims)),
            None => "?".into(),
        })
        .collect::<Vec<_>>()
        .join(", ");
    format!("{}<{}>", t.dtype.spelling(), ev)
}

fn bound(m: &Module, b: &Bound) -> String {
    match b {
        Bound::Int(n) => n.to_string(),
        Bound::DimsAt(l) => format!("{}({})", syntax::DIMS, dims_list(m, l)),
    }
}

/// Prints a whole module.
pub fn module(m: &Module) -> String {
    let mut o = String::new();
    if let Some(sym) = &m.symbolic {
        let names = sym.symbols.iter().map(|d| format!("%{}", d.name)).collect::<Vec<_>>().join(", ");
        let _ = writeln!(o, "{}({names})", syntax::SYMBOLS);
    }
    for (i, e) in m.eintups.iter().enumerate() {
        let dims = match m.symbolic.as_ref() {
            Some(sym) => {
                format!("[{}]", sym.eintups.get(i).map_or(&[][..], Vec::as_slice).iter().map(|x| sym_expr(&sym.symbols, x)).collect::<Vec<_>>().join(", "))
            }
            None => dims_text(e.rank, &e.dims),
        };
        let _ = writeln!(o, "{} {} : {dims}", syntax::EINTUP, e.name);
    }
    if let Some(sym) = &m.symbolic {
        for c in &sym.checks {
            let about = names(m, &[c.about]);
            let _ = writeln!(o, "{} {} >= {} {} {about} {}", syntax::CHECK, sym_expr(&sym.symbols, &c.expr), c.min, syntax::ABOUT, quote(&c.rule));
        }
    }
    for a in &m.arrays {
        let pos = a.positions.iter().map(|p| format!("{} : {}", index_expr(m, &p.expr), dims_text(p.rank, &p.dims))).collect::<Vec<_>>().join(", ");
        let mut flags = format!(" {}={}", syntax::DEF, a.def_stmt);
        if a.is_input {
            let _ = write!(flags, " {}", syntax::INPUT);
        }
        for at in &a.attrs {
            match at {
                Attr::Range { lo, hi } => {
                    let _ = write!(flags, " {}=[{}, {})", syntax::RANGE, bound(m, lo), bound(m, hi));
                }
            }
        }
        let _ = writeln!(o, "{} {} : {} [{}]{}", syntax::ARRAY, a.name, a.dtype.spelling(), pos, flags);
    }
    for (si, s) in m.stmts.iter().enumerate() {
        let _ = writeln!(
            o,
            "{} {si} {}[{}] {} %{} {}({}) {{",
            syntax::STMT,
            array_name(m, s.array),
            slots(m, &s.indices),
            s.op.text(),
            s.result,
            syntax::VARS,
            names(m, &s.vars)
        );
        for (k, op) in s.ops.iter().enumerate() {
            let body = match &op.kind {
                OpKind::ConstInt(n) => format!("{} {n}", OpName::Const.spelling()),
                OpKind::ConstFloat(f) => format!("{} {}", OpName::Const.spelling(), float_text(*f)),
                OpKind::Rank(l) => format!("{}({})", OpName::Rank.spelling(), names(m, l)),
                OpKind::DimsAt(l, t) => format!("{}({})[{}]", OpName::DimsAt.spelling(), dims_list(m, l), index_expr(m, t)),
                OpKind::Read { array, indices } => format!("{} {}[{}]", OpName::Read.spelling(), array_name(m, *array), slots(m, indices)),
                OpKind::Random { lo, hi, dtype } => format!("{} %{lo}, %{hi}, {}", OpName::Random.spelling(), dtype.spelling()),
                OpKind::Neg(a) => format!("{} %{a}", OpName::Neg.spelling()),
                OpKind::Binary(op, a, b) => format!("{} %{a}, %{b}", op.spelling()),
                OpKind::Compare(op, a, b) => format!("{} %{a}, %{b}", op.spelling()),
                OpKind::Call(f, args) => format!("{} {}", f.spelling(), args.iter().map(|a| format!("%{a}")).collect::<Vec<_>>().join(", ")),
            };
            let _ = writeln!(o, "  %{k} = {body} : {}", sig(m, &op.ty));
        }
        o.push_str("}\n");
    }
    if let Some(c) = &m.call {
        let args = c
            .args
            .iter()
            .map(|(k, v)| {
                let v = match v {
                    CallArg::Array(a) => array_name(m, *a).to_string(),
                    CallArg::Dims(l) => format!("{}({})", syntax::DIMS, dims_list(m, l)),
                    CallArg::Rank(l) => format!("{}({})", syntax::RANK, names(m, l)),
                    CallArg::Tensor(l) => format!("{}({}({}))", syntax::TENSOR, syntax::DIMS, dims_list(m, l)),
                    CallArg::Literal(l) => format!("{}({})", syntax::LITERAL, literal(l)),
                };
                match k {
                    Some(k) => format!("{k}={v}"),
                    None => v,
                }
            })
            .collect::<Vec<_>>()
            .join(", ");
        let _ = writeln!(o, "{} {}({})", syntax::CALL, c.func, args);
    }
    if !m.outputs.is_empty() {
        let outs = m.outputs.iter().map(|a| array_name(m, *a).to_string()).collect::<Vec<_>>().join(", ");
        let _ = writeln!(o, "{} {outs}", syntax::OUTPUTS);
    }
    o
}

/// A call literal; strings with the IR's escapes (`text::quote`).
fn literal(l: &Literal) -> String {
    match l {
        Literal::Str(s) => quote(s),
        Literal::Int(n) => n.to_string(),
        Literal::Float(x) => float_text(*x),
        Literal::Word(w) => w.clone(),
    }
}
