//! Textual form of the `loop` dialect (docs/ir-loop.md). MLIR-like: one
//! line per buffer, node and value; blocks in braces. Index expressions are
//! fully parenthesised so `parse` needs no precedence rules.
//!
//! The printer never panics, even on a module the verifier rejects: an id
//! out of range prints as `?var5`, `?buf3`, which the parser refuses (so a
//! broken module cannot silently round-trip into a different one).

use super::*;
use std::fmt::Write as _;

/// Prints a whole module: buffers, then each kernel after a blank line.
pub fn module(m: &LoopModule) -> String {
    let mut o = String::new();
    for b in &m.buffers {
        buffer(&mut o, b);
    }
    for k in &m.kernels {
        if !o.is_empty() {
            o.push('\n');
        }
        kernel(&mut o, m, k);
    }
    o
}

/// The role a buffer's `init` follows unless stated otherwise: only inputs
/// come from the caller.
pub(crate) fn default_init(role: Role) -> Init {
    match role {
        Role::Input => Init::Input,
        Role::Output | Role::Temp => Init::Zero,
    }
}

pub(crate) fn role_text(r: Role) -> &'static str {
    match r {
        Role::Input => "input",
        Role::Output => "output",
        Role::Temp => "temp",
    }
}

fn buffer(o: &mut String, b: &Buffer) {
    let dims: Vec<String> = b.shape.iter().map(|d| d.to_string()).collect();
    let _ = write!(o, "buffer {} : {}[{}] {}", b.name, b.dtype.name(), dims.join(", "), role_text(b.role));
    // `init` is printed only when it differs from what the role implies
    // (the verifier rejects that, but the text must still say it).
    if b.init != default_init(b.role) {
        o.push_str(match b.init {
            Init::Zero => " init(zero)",
            Init::Input => " init(input)",
        });
    }
    o.push('\n');
}

/// Can the parser, which numbers variables in the order the text first
/// binds them and resolves a name only after its first binding, rebuild
/// this kernel's numbering without a `vars(..)` clause? It cannot when the
/// numbering differs from binding order, some variable is never bound, or
/// a name is used before its first binding (the verifier rejects the last
/// two, but the text must still express them).
fn numbering_is_implicit(k: &Kernel) -> bool {
    struct W {
        seen: Vec<bool>,
        next: usize,
        ok: bool,
    }
    impl W {
        fn uses(&mut self, e: &IExpr) {
            e.for_each_var(&mut |v| {
                if !self.seen.get(v).copied().unwrap_or(false) {
                    self.ok = false;
                }
            });
        }
        fn bind(&mut self, v: VarId) {
            if v < self.seen.len() && !self.seen[v] {
                // Ids must come in order 0, 1, 2, .. of first binding.
                self.ok &= v == self.next;
                self.seen[v] = true;
                self.next += 1;
            }
        }
        fn nodes(&mut self, ns: &[Node]) {
            for n in ns {
                match n {
                    Node::For(l) => {
                        // Text order: bounds, then the variable, then the body.
                        self.uses(&l.lo);
                        self.uses(&l.hi);
                        self.bind(l.var);
                        self.nodes(&l.body);
                    }
                    Node::Guard(g) => {
                        for c in &g.conds {
                            for e in c.exprs() {
                                self.uses(e);
                            }
                        }
                        self.nodes(&g.body);
                    }
                    Node::LoadIndex { var, offset, .. } => {
                        self.uses(offset);
                        self.bind(*var);
                    }
                    Node::Compute(c) => {
                        for v in &c.values {
                            match &v.op {
                                VOp::Load { offset: e, .. } | VOp::Index(e) | VOp::Lookup { index: e, .. } | VOp::Random { counter: e, .. } => self.uses(e),
                                _ => {}
                            }
                        }
                        self.uses(&c.write.offset);
                    }
                }
            }
        }
    }
    let mut w = W { seen: vec![false; k.vars.len()], next: 0, ok: true };
    w.nodes(&k.body);
    w.ok && w.next == k.vars.len()
}

fn kernel(o: &mut String, m: &LoopModule, k: &Kernel) {
    let _ = write!(o, "kernel @{}", k.name);
    // A `vars(..)` clause records what the parser could not infer, so that
    // parse(print(m)) == m holds for every module.
    if !numbering_is_implicit(k) {
        let names: Vec<&str> = k.vars.iter().map(|v| v.name.as_str()).collect();
        let _ = write!(o, " vars({})", names.join(", "));
    }
    o.push_str(" {\n");
    nodes(o, m, k, &k.body, 1);
    o.push_str("}\n");
}

fn indent(o: &mut String, depth: usize) {
    for _ in 0..depth {
        o.push_str("  ");
    }
}

fn var_name(k: &Kernel, v: VarId) -> String {
    k.vars.get(v).map_or_else(|| format!("?var{v}"), |x| x.name.clone())
}

fn buf_name(m: &LoopModule, b: BufId) -> String {
    m.buffers.get(b).map_or_else(|| format!("?buf{b}"), |x| x.name.clone())
}

fn nodes(o: &mut String, m: &LoopModule, k: &Kernel, ns: &[Node], depth: usize) {
    for n in ns {
        match n {
            Node::For(l) => {
                indent(o, depth);
                let kind = match l.kind {
                    LoopKind::Parallel => "parallel",
                    LoopKind::Reduce => "reduce",
                };
                let _ = writeln!(o, "for {} in [{}, {}) {} {{", var_name(k, l.var), iexpr(k, &l.lo), iexpr(k, &l.hi), kind);
                nodes(o, m, k, &l.body, depth + 1);
                indent(o, depth);
                o.push_str("}\n");
            }
            Node::Guard(g) => {
                indent(o, depth);
                let conds: Vec<String> = g.conds.iter().map(|c| cond(k, c)).collect();
                let _ = writeln!(o, "guard {} {{", conds.join(", "));
                nodes(o, m, k, &g.body, depth + 1);
                indent(o, depth);
                o.push_str("}\n");
            }
            Node::LoadIndex { var, buf, offset } => {
                indent(o, depth);
                let _ = writeln!(o, "{} = load_index {}[{}]", var_name(k, *var), buf_name(m, *buf), iexpr(k, offset));
            }
            Node::Compute(c) => compute(o, m, k, c, depth),
        }
    }
}

/// A guard condition: `lo <= e < hi` or `e != 0`.
pub fn cond(k: &Kernel, c: &Cond) -> String {
    match c {
        Cond::InRange { e, lo, hi } => format!("{} <= {} < {}", iexpr(k, lo), iexpr(k, e), iexpr(k, hi)),
        Cond::NonZero(e) => format!("{} != 0", iexpr(k, e)),
    }
}

/// An index expression: constants, variable names, `(a op b)`, `min(a, b)`,
/// `max(a, b)`.
pub fn iexpr(k: &Kernel, e: &IExpr) -> String {
    let mut s = String::new();
    iexpr_into(&mut s, k, e);
    s
}

fn iexpr_into(o: &mut String, k: &Kernel, e: &IExpr) {
    match e {
        IExpr::Const(c) => {
            let _ = write!(o, "{c}");
        }
        IExpr::Var(v) => o.push_str(&var_name(k, *v)),
        IExpr::Bin(op @ (IBin::Min | IBin::Max), a, b) => {
            o.push_str(op.text());
            o.push('(');
            iexpr_into(o, k, a);
            o.push_str(", ");
            iexpr_into(o, k, b);
            o.push(')');
        }
        IExpr::Bin(op, a, b) => {
            o.push('(');
            iexpr_into(o, k, a);
            let _ = write!(o, " {} ", op.text());
            iexpr_into(o, k, b);
            o.push(')');
        }
    }
}

/// A float constant in Rust's shortest round-trip form (`1.0`, `1e-7`,
/// `inf`, `NaN`), which `str::parse::<f64>` reads back exactly.
pub(crate) fn float_text(x: f64) -> String {
    format!("{x:?}")
}

/// A RANDOM stream name as a double-quoted string; `\` and `"` and control
/// characters are escaped so any name survives the round trip.
pub(crate) fn quote(s: &str) -> String {
    let mut o = String::from("\"");
    for ch in s.chars() {
        match ch {
            '"' => o.push_str("\\\""),
            '\\' => o.push_str("\\\\"),
            '\n' => o.push_str("\\n"),
            '\t' => o.push_str("\\t"),
            c if c.is_control() => {
                let _ = write!(o, "\\u{{{:x}}}", c as u32);
            }
            c => o.push(c),
        }
    }
    o.push('"');
    o
}

fn compute(o: &mut String, m: &LoopModule, k: &Kernel, c: &Compute, depth: usize) {
    for (i, v) in c.values.iter().enumerate() {
        indent(o, depth);
        let _ = writeln!(o, "%{i} = {}", value(m, k, v));
    }
    indent(o, depth);
    let w = &c.write;
    let _ = match w.kind {
        WriteKind::Store => writeln!(o, "store {}[{}] = %{}", buf_name(m, w.buf), iexpr(k, &w.offset), w.value),
        kind => writeln!(o, "{} {}[{}] += %{}", kind.text(), buf_name(m, w.buf), iexpr(k, &w.offset), w.value),
    };
}

/// The right-hand side of a value line: `op operands : dtype`.
pub fn value(m: &LoopModule, k: &Kernel, v: &Value) -> String {
    format!("{} : {}", vop(m, k, &v.op, v.dtype), v.dtype.name())
}

/// Integers below 2^53 are exact in f64; an i32 constant prints as one.
const EXACT_INT: f64 = 9007199254740992.0;

fn vop(m: &LoopModule, k: &Kernel, op: &VOp, dtype: DType) -> String {
    match op {
        VOp::Const(x) if dtype == DType::I32 && x.fract() == 0.0 && x.abs() < EXACT_INT => format!("const {}", *x as i64),
        VOp::Const(x) => format!("const {}", float_text(*x)),
        VOp::Load { buf, offset } => format!("load {}[{}]", buf_name(m, *buf), iexpr(k, offset)),
        VOp::Index(e) => format!("index {}", iexpr(k, e)),
        VOp::Lookup { table, index } => {
            let t: Vec<String> = table.iter().map(|x| x.to_string()).collect();
            format!("lookup [{}][{}]", t.join(", "), iexpr(k, index))
        }
        VOp::Random { stream, counter, lo, hi } => format!("random {}[{}], %{lo}, %{hi}", quote(stream), iexpr(k, counter)),
        VOp::Neg(a) => format!("neg %{a}"),
        VOp::Bin(op, a, b) => format!("{} %{a}, %{b}", op.text()),
        VOp::Cast(a) => format!("cast %{a}"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn kernel_with(vars: &[&str], body: Vec<Node>) -> Kernel {
        Kernel { name: "k".into(), vars: vars.iter().map(|n| Var { name: n.to_string() }).collect(), body }
    }

    #[test]
    fn index_expressions_are_fully_parenthesised() {
        let k = kernel_with(&["i", "j"], vec![]);
        let e = IExpr::bin(IBin::Max, IExpr::c(0), IExpr::add(IExpr::mul(IExpr::c(2), IExpr::v(0)), IExpr::bin(IBin::Mod, IExpr::v(1), IExpr::c(-3))));
        assert_eq!(iexpr(&k, &e), "max(0, ((2 * i) + (j % -3)))");
        assert_eq!(iexpr(&k, &IExpr::bin(IBin::CeilDiv, IExpr::v(0), IExpr::v(7))), "(i //^ ?var7)");
    }

    #[test]
    fn strings_and_floats_are_escaped_for_the_parser() {
        assert_eq!(quote("a\"b\\c\n"), "\"a\\\"b\\\\c\\n\"");
        assert_eq!(float_text(1.0), "1.0");
        assert_eq!(float_text(-0.5), "-0.5");
        assert_eq!(float_text(f64::INFINITY), "inf");
    }

    #[test]
    fn vars_clause_only_when_numbering_differs_from_binding_order() {
        let body = |a, b| {
            vec![Node::For(For {
                var: a,
                lo: IExpr::c(0),
                hi: IExpr::c(1),
                kind: LoopKind::Reduce,
                body: vec![Node::For(For { var: b, lo: IExpr::c(0), hi: IExpr::c(1), kind: LoopKind::Parallel, body: vec![] })],
            })]
        };
        let m = LoopModule { buffers: vec![], kernels: vec![kernel_with(&["i", "j"], body(0, 1))] };
        assert_eq!(module(&m), "kernel @k {\n  for i in [0, 1) reduce {\n    for j in [0, 1) parallel {\n    }\n  }\n}\n");
        let m = LoopModule { buffers: vec![], kernels: vec![kernel_with(&["i", "j"], body(1, 0))] };
        assert!(module(&m).starts_with("kernel @k vars(i, j) {\n  for j in"), "{}", module(&m));
    }
}
