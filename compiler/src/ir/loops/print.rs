//! Textual form of the `loop` dialect (docs/ir-loop.md). MLIR-like: one
//! line per buffer, node and value; blocks in braces. Index expressions are
//! fully parenthesised so `parse` needs no precedence rules.
//!
//! The printer never panics, even on a module the verifier rejects: an id
//! out of range prints as `?var5`, `?buf3`, which the parser refuses (so a
//! broken module cannot silently round-trip into a different one).

use super::site::Site;
use super::syntax::{self, write_operator, VOpName};
use super::*;
use crate::ir::text::{float_text, quote, Spelled};
use std::fmt::Write as _;

/// Prints a whole module: buffers, then each kernel after a blank line.
pub fn module(m: &LoopModule) -> String {
    let mut o = String::new();
    if !m.facts.is_empty() {
        let names: Vec<&str> = m.facts.iter().map(|f| f.spelling()).collect();
        let _ = writeln!(o, "{}({})", syntax::FACTS, names.join(", "));
    }
    for d in &m.dims {
        let _ = writeln!(o, "{} %{}", syntax::DIM, d.name);
    }
    for b in &m.buffers {
        o.push_str(&buffer(m, b));
        o.push('\n');
    }
    for k in &m.kernels {
        if !o.is_empty() {
            o.push('\n');
        }
        kernel(&mut o, m, k);
    }
    o
}

/// The line that declares a buffer.
/// One extent of a buffer's shape (a constant, or an expression over dim
/// symbols).
pub fn shape_extent(m: &LoopModule, e: &IExpr) -> String {
    sym_expr(&m.dims, e)
}

/// An expression over the dim symbols `dims` alone (a buffer's extent, a
/// dynamic `et` module's dims).
pub fn sym_expr(dims: &[Dim], e: &IExpr) -> String {
    let mut s = String::new();
    iexpr_into(&mut s, dims, &[], e);
    s
}

fn buffer(m: &LoopModule, b: &Buffer) -> String {
    let dims: Vec<String> = b.shape.iter().map(|e| shape_extent(m, e)).collect();
    let mut o = format!("{} {} : {}[{}] {}", syntax::BUFFER, b.name, b.dtype.spelling(), dims.join(", "), b.role.spelling());
    // `init` is printed only when it differs from what the role implies
    // (the verifier rejects that, but the text must still say it).
    if b.init != b.role.default_init() {
        let _ = write!(o, " {}({})", syntax::INIT, b.init.spelling());
    }
    o
}

/// The line a site is about, as `module` prints it (without indentation):
/// a node's first line; `None` for the whole module or a site the module
/// does not have.
pub fn site_line(m: &LoopModule, site: &Site) -> Option<String> {
    match site {
        Site::Module => None,
        Site::Buffer(b) => m.buffers.get(*b).map(|b| buffer(m, b)),
        Site::Kernel(k) => m.kernels.get(*k).map(|k| kernel_header(m, k)),
        Site::Node(k, _) => Some(node_line(m, &m.kernels[*k], site.node(m)?)),
        Site::Value(k, _, i) => match site.node(m)? {
            Node::Compute(c) => c.values.get(*i).map(|v| value_line(m, &m.kernels[*k], *i, v)),
            _ => None,
        },
        Site::Write(k, _) => match site.node(m)? {
            Node::Compute(c) => Some(write_line(m, &m.kernels[*k], &c.write)),
            _ => None,
        },
    }
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
                    Node::Sync | Node::Copies(_) => {}
                    Node::Compute(c) => {
                        for e in c.values.iter().filter_map(|v| v.op.index_expr()) {
                            self.uses(e);
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
    o.push_str(&kernel_header(m, k));
    o.push('\n');
    nodes(o, m, k, &k.body, 1);
    o.push_str("}\n");
}

/// `kernel @NAME [role(ROLE[, stmt N])] [multiples(%D: N, ..)] [vars(..)] {`.
fn kernel_header(m: &LoopModule, k: &Kernel) -> String {
    let mut o = format!("{} @{}", syntax::KERNEL, k.name);
    // A main kernel of no statement (one written by hand) says nothing.
    if k.role != KernelRole::Main || k.stmt.is_some() {
        let _ = write!(o, " {}({}", syntax::ROLE, k.role.spelling());
        if let Some(s) = k.stmt {
            let _ = write!(o, ", {} {s}", syntax::STMT);
        }
        o.push(')');
    }
    if !k.multiples.is_empty() {
        let facts: Vec<String> = k.multiples.facts.iter().map(|&(d, n)| format!("{}: {n}", sym_name(&m.dims, d))).collect();
        let _ = write!(o, " {}({})", syntax::MULTIPLES, facts.join(", "));
    }
    // A `vars(..)` clause records what the parser could not infer, so that
    // parse(print(m)) == m holds for every module.
    if !numbering_is_implicit(k) {
        let names: Vec<&str> = k.vars.iter().map(|v| v.name.as_str()).collect();
        let _ = write!(o, " {}({})", syntax::VARS, names.join(", "));
    }
    o.push_str(" {");
    o
}

fn indent(o: &mut String, depth: usize) {
    for _ in 0..depth {
        o.push_str("  ");
    }
}

fn var_name(k: &Kernel, v: VarId) -> String {
    let mut s = String::new();
    iexpr_into(&mut s, &[], &k.vars, &IExpr::Var(v));
    s
}

fn buf_name(m: &LoopModule, b: BufId) -> String {
    m.buffers.get(b).map_or_else(|| format!("?buf{b}"), |x| x.name.clone())
}

fn nodes(o: &mut String, m: &LoopModule, k: &Kernel, ns: &[Node], depth: usize) {
    for n in ns {
        match n {
            Node::Compute(c) => compute(o, m, k, c, depth),
            Node::LoadIndex { .. } | Node::Sync | Node::Copies(_) => {
                indent(o, depth);
                let _ = writeln!(o, "{}", node_line(m, k, n));
            }
            Node::For(_) | Node::Guard(_) => {
                indent(o, depth);
                let _ = writeln!(o, "{}", node_line(m, k, n));
                nodes(o, m, k, n.body(), depth + 1);
                indent(o, depth);
                o.push_str("}\n");
            }
        }
    }
}

/// The first line of a node: a `for` or `guard` header up to its `{`, a
/// `load_index`, a compute's first value (or its write).
fn node_line(m: &LoopModule, k: &Kernel, n: &Node) -> String {
    match n {
        Node::For(l) => {
            let (lo, hi) = (iexpr(m, k, &l.lo), iexpr(m, k, &l.hi));
            format!("{} {} {} [{lo}, {hi}) {} {{", syntax::FOR, var_name(k, l.var), syntax::IN, l.kind.spelling())
        }
        Node::Guard(g) => {
            let conds: Vec<String> = g.conds.iter().map(|c| cond(m, k, c)).collect();
            format!("{} {} {{", syntax::GUARD, conds.join(", "))
        }
        Node::LoadIndex { var, buf, offset } => format!("{} = {} {}[{}]", var_name(k, *var), syntax::LOAD_INDEX, buf_name(m, *buf), iexpr(m, k, offset)),
        Node::Compute(c) => c.values.first().map_or_else(|| write_line(m, k, &c.write), |v| value_line(m, k, 0, v)),
        Node::Sync => syntax::SYNC.to_string(),
        Node::Copies(CopyGroup::Commit) => syntax::COMMIT_COPIES.to_string(),
        Node::Copies(CopyGroup::Wait { pending }) => format!("{} {pending}", syntax::WAIT_COPIES),
    }
}

/// A guard condition: `lo <= e < hi` or `e != 0`.
pub fn cond(m: &LoopModule, k: &Kernel, c: &Cond) -> String {
    match c {
        Cond::InRange { e, lo, hi } => format!("{} <= {} < {}", iexpr(m, k, lo), iexpr(m, k, e), iexpr(m, k, hi)),
        Cond::NonZero(e) => format!("{} != 0", iexpr(m, k, e)),
    }
}

/// An index expression: constants, variable names, `(a op b)`, `min(a, b)`,
/// `max(a, b)`.
pub fn iexpr(m: &LoopModule, k: &Kernel, e: &IExpr) -> String {
    let mut s = String::new();
    iexpr_into(&mut s, &m.dims, &k.vars, e);
    s
}

/// A dim symbol's reference: `%` and its name (`%batch.0`).
fn sym_name(dims: &[Dim], d: DimId) -> String {
    dims.get(d).map_or_else(|| format!("?dim{d}"), |x| format!("%{}", x.name))
}

/// `e` with symbols named from `dims` and variables from `vars` (none in
/// a buffer's shape).
fn iexpr_into(o: &mut String, dims: &[Dim], vars: &[Var], e: &IExpr) {
    match e {
        IExpr::Const(c) => {
            let _ = write!(o, "{c}");
        }
        IExpr::Var(v) => o.push_str(&vars.get(*v).map_or_else(|| format!("?var{v}"), |x| x.name.clone())),
        IExpr::Sym(d) => o.push_str(&sym_name(dims, *d)),
        IExpr::Bin(op @ (IBin::Min | IBin::Max), a, b) => {
            o.push_str(op.spelling());
            o.push('(');
            iexpr_into(o, dims, vars, a);
            o.push_str(", ");
            iexpr_into(o, dims, vars, b);
            o.push(')');
        }
        IExpr::Bin(op, a, b) => {
            o.push('(');
            iexpr_into(o, dims, vars, a);
            let _ = write!(o, " {} ", op.spelling());
            iexpr_into(o, dims, vars, b);
            o.push(')');
        }
    }
}

fn compute(o: &mut String, m: &LoopModule, k: &Kernel, c: &Compute, depth: usize) {
    for (i, v) in c.values.iter().enumerate() {
        indent(o, depth);
        let _ = writeln!(o, "{}", value_line(m, k, i, v));
    }
    indent(o, depth);
    o.push_str(&write_line(m, k, &c.write));
    o.push('\n');
}

/// The write that ends a compute.
fn write_line(m: &LoopModule, k: &Kernel, w: &Write) -> String {
    format!("{} {}[{}] {} %{}", w.kind.spelling(), buf_name(m, w.buf), iexpr(m, k, &w.offset), write_operator(w.kind), w.value)
}

/// `%I = op operands : dtype`.
fn value_line(m: &LoopModule, k: &Kernel, i: ValId, v: &Value) -> String {
    format!("%{i} = {}", value(m, k, v))
}

/// The right-hand side of a value line: `op operands : dtype`.
pub fn value(m: &LoopModule, k: &Kernel, v: &Value) -> String {
    format!("{} : {}", vop(m, k, &v.op, v.dtype), v.dtype.spelling())
}

/// Integers below 2^53 are exact in f64; an i32 constant prints as one.
const EXACT_INT: f64 = 9007199254740992.0;

fn vop(m: &LoopModule, k: &Kernel, op: &VOp, dtype: DType) -> String {
    match op {
        VOp::Const(x) if dtype == DType::I32 && x.fract() == 0.0 && x.abs() < EXACT_INT => format!("{} {}", VOpName::Const.spelling(), *x as i64),
        VOp::Const(x) => format!("{} {}", VOpName::Const.spelling(), float_text(*x)),
        VOp::Load { buf, offset } => format!("{} {}[{}]", VOpName::Load.spelling(), buf_name(m, *buf), iexpr(m, k, offset)),
        VOp::Index(e) => format!("{} {}", VOpName::Index.spelling(), iexpr(m, k, e)),
        VOp::Lookup { table, index } => {
            let t: Vec<String> = table.iter().map(|x| x.to_string()).collect();
            format!("{} [{}][{}]", VOpName::Lookup.spelling(), t.join(", "), iexpr(m, k, index))
        }
        VOp::Random { stream, counter, lo, hi } => format!("{} {}[{}], %{lo}, %{hi}", VOpName::Random.spelling(), quote(stream), iexpr(m, k, counter)),
        VOp::Neg(a) => format!("{} %{a}", VOpName::Neg.spelling()),
        VOp::Bin(op, a, b) => format!("{} %{a}, %{b}", op.spelling()),
        VOp::Cmp(op, a, b) => format!("{} %{a}, %{b}", op.spelling()),
        VOp::Call(f, args) => format!("{} {}", f.spelling(), args.iter().map(|a| format!("%{a}")).collect::<Vec<_>>().join(", ")),
        VOp::Cast(a) => format!("{} %{a}", VOpName::Cast.spelling()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn kernel_with(vars: &[&str], body: Vec<Node>) -> Kernel {
        Kernel::new("k", vars.iter().map(|n| Var { name: n.to_string() }).collect(), body)
    }

    #[test]
    fn index_expressions_are_fully_parenthesised() {
        let k = kernel_with(&["i", "j"], vec![]);
        let m = LoopModule { dims: vec![Dim { name: "n.0".into() }], ..LoopModule::default() };
        let e = IExpr::bin(IBin::Max, IExpr::c(0), IExpr::add(IExpr::mul(IExpr::c(2), IExpr::v(0)), IExpr::bin(IBin::Mod, IExpr::v(1), IExpr::c(-3))));
        assert_eq!(iexpr(&m, &k, &e), "max(0, ((2 * i) + (j % -3)))");
        assert_eq!(iexpr(&m, &k, &IExpr::bin(IBin::CeilDiv, IExpr::v(0), IExpr::v(7))), "(i //^ ?var7)");
        // Dim symbols by name; one the module does not declare is marked.
        assert_eq!(iexpr(&m, &k, &IExpr::sub(IExpr::Sym(0), IExpr::Sym(3))), "(%n.0 - ?dim3)");
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
        let m = LoopModule { facts: Facts::NONE, dims: vec![], buffers: vec![], kernels: vec![kernel_with(&["i", "j"], body(0, 1))] };
        assert_eq!(module(&m), "kernel @k {\n  for i in [0, 1) reduce {\n    for j in [0, 1) parallel {\n    }\n  }\n}\n");
        let m = LoopModule { facts: Facts::NONE, dims: vec![], buffers: vec![], kernels: vec![kernel_with(&["i", "j"], body(1, 0))] };
        assert!(module(&m).starts_with("kernel @k vars(i, j) {\n  for j in"), "{}", module(&m));
    }
}
