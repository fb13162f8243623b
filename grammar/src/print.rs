//! Stable textual form of the AST (`etopt --emit ast`), for parser tests:
//! one item per line, prefixed by its kind and `line:col`, with every
//! compound expression fully parenthesised so the parse tree is visible.

use crate::ast::*;
use crate::span::line_col;
use std::fmt::Write;

pub fn print_file(file: &File, source: &str) -> String {
    let mut out = String::new();
    let loc = |span: crate::Span| {
        let (l, c) = line_col(source, span.start);
        format!("{l}:{c}")
    };
    for s in &file.program {
        let _ = writeln!(out, "stmt {} {} {} {}", loc(s.span), access(&s.lhs), s.op.text(), expr(&s.rhs));
    }
    if let Some(c) = &file.call {
        let _ = writeln!(out, "call {} {}", loc(c.span), call(c));
    }
    if let Some(o) = &file.outputs {
        let _ = writeln!(out, "outputs {} {}", loc(o.span), names(&o.names));
    }
    for c in &file.constraints {
        let _ = writeln!(out, "constraint {} {}", loc(c.span), constraint(c));
    }
    out
}

fn names(ns: &[Ident]) -> String {
    ns.iter().map(|i| i.name.as_str()).collect::<Vec<_>>().join(", ")
}

fn dims_list(l: &[DimsArg]) -> String {
    let item = |a: &DimsArg| match a {
        DimsArg::Name(i) => i.name.clone(),
        DimsArg::Lit(n, _) => n.to_string(),
    };
    l.iter().map(item).collect::<Vec<_>>().join(", ")
}

pub fn access(a: &Access) -> String {
    let args: Vec<String> = a
        .indices
        .iter()
        .map(|i| match i {
            IndexArg::Expr(e) => expr(e),
            IndexArg::Slice(_) => ":".to_string(),
        })
        .collect();
    format!("{}[{}]", a.array.name, args.join(", "))
}

pub fn expr(e: &Expr) -> String {
    match &e.kind {
        ExprKind::Int(n) => n.to_string(),
        ExprKind::Float(x) => format!("{x:?}"),
        ExprKind::Name(i) => i.name.clone(),
        ExprKind::Dims(ns) => format!("DIMS({})", dims_list(ns)),
        ExprKind::DimsAt(ns, t) => format!("DIMS({})[{}]", dims_list(ns), expr(t)),
        ExprKind::Rank(ns) => format!("RANK({})", names(ns)),
        ExprKind::Flat(es) => format!("FLAT({})", es.iter().map(expr).collect::<Vec<_>>().join(", ")),
        ExprKind::Access(a) => access(a),
        ExprKind::Random { lo, hi, ty, .. } => format!("RANDOM({}, {}, {})", expr(lo), expr(hi), ty.text()),
        ExprKind::Neg(inner) => format!("(-{})", expr(inner)),
        ExprKind::Binary(op, a, b) => format!("({} {} {})", expr(a), op.text(), expr(b)),
        ExprKind::Compare(op, a, b) => format!("({} {} {})", expr(a), op.text(), expr(b)),
        ExprKind::Call(f, args) => format!("{}({})", f.name(), args.iter().map(expr).collect::<Vec<_>>().join(", ")),
    }
}

fn call(c: &Call) -> String {
    let args: Vec<String> = c
        .args
        .iter()
        .map(|a| {
            let v = match &a.value {
                CallValue::Array(i) => i.name.clone(),
                CallValue::Dims(ns) => format!("DIMS({})", dims_list(ns)),
                CallValue::Rank(ns) => format!("RANK({})", names(ns)),
                CallValue::Tensor(ns) => format!("TENSOR(DIMS({}))", dims_list(ns)),
                CallValue::Literal(l) => format!("L({})", literal(l)),
            };
            match &a.keyword {
                Some(k) => format!("{}={v}", k.name),
                None => v,
            }
        })
        .collect();
    format!("{}({})", c.func_name(), args.join(", "))
}

pub fn literal(l: &Literal) -> String {
    match l {
        Literal::Str(s) => format!("{s:?}"),
        Literal::Int(n) => n.to_string(),
        Literal::Float(x) => format!("{x:?}"),
        Literal::Word(w) => w.clone(),
    }
}

fn constraint(c: &Constraint) -> String {
    let subject = match c.subject {
        ConstraintSubject::Rank => "RANK",
        ConstraintSubject::Dims => "DIMS",
    };
    match &c.rel {
        ConstraintRel::In { lo, hi, .. } => format!("{subject}({}) IN [{lo}, {hi}]", c.target.name),
        ConstraintRel::Eq(e) => format!("{subject}({}) = {}", c.target.name, expr(e)),
    }
}
