//! Textual form of the `et` dialect (see docs/ir-et.md). One line per
//! eintup, array and op; index expressions fully parenthesised so the
//! parser (`parse`) needs no precedence rules. Every id is printed
//! as a name; the parser resolves names back to ids, so `parse(print(m))`
//! equals `m` up to spans for any module that passes `verify::verify`.

use super::*;
use std::fmt::Write;

fn names(m: &Module, l: &[EintupId]) -> String {
    l.iter().map(|e| m.eintups.get(*e).map_or("?", |x| x.name.as_str()).to_string()).collect::<Vec<_>>().join(", ")
}

fn array_name(m: &Module, a: ArrayId) -> &str {
    m.arrays.get(a).map_or("?", |x| x.name.as_str())
}

fn op_text(op: IndexOp) -> &'static str {
    match op {
        IndexOp::Add => "+",
        IndexOp::Sub => "-",
        IndexOp::Mul => "*",
        IndexOp::FloorDiv => "//",
        IndexOp::CeilDiv => "//^",
        IndexOp::Mod => "%",
    }
}

/// An index expression as source-like text.
pub fn index_expr(m: &Module, e: &IndexExpr) -> String {
    match &e.kind {
        IndexKind::Var(t) => names(m, &[*t]),
        IndexKind::Lit(n) => n.to_string(),
        IndexKind::Dims(l) => format!("DIMS({})", names(m, l)),
        IndexKind::Rank(l) => format!("RANK({})", names(m, l)),
        IndexKind::Flat(v) => format!("FLAT({})", v.iter().map(|x| index_expr(m, x)).collect::<Vec<_>>().join(", ")),
        IndexKind::Slice { array, indices } => format!("{}[{}]", array_name(m, *array), slots(m, indices)),
        IndexKind::Bin(op, a, b) => format!("({} {} {})", index_expr(m, a), op_text(*op), index_expr(m, b)),
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
    format!("{}<{}>", t.dtype.text(), ev)
}

fn bound(m: &Module, b: &Bound) -> String {
    match b {
        Bound::Int(n) => n.to_string(),
        Bound::DimsAt(l) => format!("DIMS({})", names(m, l)),
    }
}

/// Prints a whole module.
pub fn module(m: &Module) -> String {
    let mut o = String::new();
    for e in &m.eintups {
        let _ = writeln!(o, "eintup {} : {}", e.name, dims_text(e.rank, &e.dims));
    }
    for a in &m.arrays {
        let pos = a
            .positions
            .iter()
            .map(|p| format!("{} : {}", index_expr(m, &p.expr), dims_text(p.rank, &p.dims)))
            .collect::<Vec<_>>()
            .join(", ");
        let mut flags = format!(" def={}", a.def_stmt);
        if a.is_input {
            flags.push_str(" input");
        }
        for at in &a.attrs {
            match at {
                Attr::Range { lo, hi } => {
                    let _ = write!(flags, " range=[{}, {})", bound(m, lo), bound(m, hi));
                }
            }
        }
        let _ = writeln!(o, "array {} : {} [{}]{}", a.name, a.dtype.text(), pos, flags);
    }
    for (si, s) in m.stmts.iter().enumerate() {
        let _ = writeln!(
            o,
            "stmt {si} {}[{}] {} %{} vars({}) {{",
            array_name(m, s.array),
            slots(m, &s.indices),
            s.op.text(),
            s.result,
            names(m, &s.vars)
        );
        for (k, op) in s.ops.iter().enumerate() {
            let body = match &op.kind {
                OpKind::ConstInt(n) => format!("const {n}"),
                OpKind::ConstFloat(f) => format!("const {f:?}"),
                OpKind::Rank(l) => format!("rank({})", names(m, l)),
                OpKind::DimsAt(l, t) => format!("dims_at({})[{}]", names(m, l), index_expr(m, t)),
                OpKind::Read { array, indices } => format!("read {}[{}]", array_name(m, *array), slots(m, indices)),
                OpKind::Random { lo, hi, dtype } => format!("random %{lo}, %{hi}, {}", dtype.text()),
                OpKind::Neg(a) => format!("neg %{a}"),
                OpKind::Binary(op, a, b) => format!("{} %{a}, %{b}", binop_name(*op)),
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
                    CallArg::Dims(l) => format!("DIMS({})", names(m, l)),
                    CallArg::Rank(l) => format!("RANK({})", names(m, l)),
                    CallArg::Tensor(l) => format!("TENSOR(DIMS({}))", names(m, l)),
                    CallArg::Literal(l) => format!("L({})", et_grammar::print::literal(l)),
                };
                match k {
                    Some(k) => format!("{k}={v}"),
                    None => v,
                }
            })
            .collect::<Vec<_>>()
            .join(", ");
        let _ = writeln!(o, "call {}({})", c.func, args);
    }
    if !m.outputs.is_empty() {
        let outs = m.outputs.iter().map(|a| array_name(m, *a).to_string()).collect::<Vec<_>>().join(", ");
        let _ = writeln!(o, "outputs {outs}");
    }
    o
}

pub fn binop_name(op: et_grammar::ast::BinOp) -> &'static str {
    use et_grammar::ast::BinOp::*;
    match op {
        Add => "add",
        Sub => "sub",
        Mul => "mul",
        Div => "div",
        FloorDiv => "floordiv",
        CeilDiv => "ceildiv",
        Mod => "mod",
    }
}
