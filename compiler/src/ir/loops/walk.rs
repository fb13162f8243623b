//! Visitors and rewrites over loop nests: walking nodes, the index
//! expressions and buffers each node uses, perfect nests, fresh variables.

use super::*;

/// The value operations that carry an index expression, and which one:
/// the one list of them, for a match on `&VOp` and on `&mut VOp` alike.
macro_rules! index_expr_of {
    ($op:expr) => {
        match $op {
            VOp::Load { offset, .. } => Some(offset),
            VOp::Index(e) => Some(e),
            VOp::Lookup { index, .. } => Some(index),
            VOp::Random { counter, .. } => Some(counter),
            VOp::Const(_) | VOp::Neg(_) | VOp::Bin(..) | VOp::Cast(_) | VOp::Cmp(..) | VOp::Call(..) => None,
        }
    };
}

impl VOp {
    /// The index expression the operation evaluates: a load's offset, an
    /// index value, a lookup's index, a random counter.
    pub fn index_expr(&self) -> Option<&IExpr> {
        index_expr_of!(self)
    }

    /// [`VOp::index_expr`], to rewrite it.
    pub fn index_expr_mut(&mut self) -> Option<&mut IExpr> {
        index_expr_of!(self)
    }
}

impl Node {
    /// The index expressions this node itself evaluates (loop bounds,
    /// guard conditions, offsets, index values), not those of its body.
    pub fn own_exprs(&self) -> Vec<&IExpr> {
        match self {
            Node::For(l) => vec![&l.lo, &l.hi],
            Node::Guard(g) => g.conds.iter().flat_map(|c| c.exprs()).collect(),
            Node::LoadIndex { offset, .. } => vec![offset],
            Node::Sync | Node::Copies(_) => vec![],
            Node::Compute(c) => {
                let mut v: Vec<&IExpr> = c.values.iter().filter_map(|v| v.op.index_expr()).collect();
                v.push(&c.write.offset);
                v
            }
        }
    }

    /// The element offsets this node itself addresses (loads, its write,
    /// an index load), a subset of [`Node::own_exprs`].
    pub fn offsets(&self) -> Vec<&IExpr> {
        match self {
            Node::LoadIndex { offset, .. } => vec![offset],
            Node::Compute(c) => {
                let mut v: Vec<&IExpr> = c.values.iter().filter_map(|v| if let VOp::Load { offset, .. } = &v.op { Some(offset) } else { None }).collect();
                v.push(&c.write.offset);
                v
            }
            _ => vec![],
        }
    }

    /// The buffers this node itself reads or writes (not its body's).
    pub fn buffers(&self) -> Vec<BufId> {
        match self {
            Node::LoadIndex { buf, .. } => vec![*buf],
            Node::Compute(c) => {
                let mut v: Vec<BufId> = c.values.iter().filter_map(|v| if let VOp::Load { buf, .. } = v.op { Some(buf) } else { None }).collect();
                v.push(c.write.buf);
                v
            }
            _ => Vec::new(),
        }
    }

    /// The nodes directly inside this one.
    pub fn body(&self) -> &[Node] {
        match self {
            Node::For(l) => &l.body,
            Node::Guard(g) => &g.body,
            _ => &[],
        }
    }
}

/// Does any node of `nodes`, at any depth, use variable `v`?
pub fn nodes_use(nodes: &[Node], v: VarId) -> bool {
    nodes.iter().any(|n| n.own_exprs().iter().any(|e| e.uses(v)) || nodes_use(n.body(), v))
}

impl Node {
    /// Visits this node and every node inside it, outermost first.
    pub fn walk<'a>(&'a self, f: &mut impl FnMut(&'a Node)) {
        f(self);
        for n in self.body() {
            n.walk(f);
        }
    }
}

impl Kernel {
    /// Visits every node, outermost first.
    pub fn walk<'a>(&'a self, f: &mut impl FnMut(&'a Node)) {
        for n in &self.body {
            n.walk(f);
        }
    }

    /// Every buffer the kernel reads or writes, in id order.
    pub fn buffers(&self) -> Vec<BufId> {
        let mut used = Vec::new();
        self.walk(&mut |n| used.extend(n.buffers()));
        used.sort_unstable();
        used.dedup();
        used
    }

    /// Every `Compute` node, outermost first.
    pub fn computes(&self) -> Vec<&Compute> {
        let mut out = Vec::new();
        self.walk(&mut |n| {
            if let Node::Compute(c) = n {
                out.push(c)
            }
        });
        out
    }

    /// `base`, with `_` appended until no variable has the name.
    pub fn unique_var_name(&self, base: &str) -> String {
        unique_var_name(&self.vars, base)
    }

    /// Number of guard conditions left in the kernel.
    pub fn guard_count(&self) -> usize {
        let mut n = 0;
        self.walk(&mut |x| {
            if let Node::Guard(g) = x {
                n += g.conds.len()
            }
        });
        n
    }

    /// Applies `f` to every index expression in the kernel (loop bounds,
    /// guard conditions, offsets, index values).
    pub fn for_each_expr_mut(&mut self, f: &mut impl FnMut(&mut IExpr)) {
        for_each_expr_mut(&mut self.body, f)
    }
}

/// `nodes` as a perfect nest of loops of `kind` (each the only node of its
/// parent's body), outermost first, and what is inside the innermost.
pub fn perfect_nest(mut nodes: &[Node], kind: LoopKind) -> (Vec<&For>, &[Node]) {
    let mut loops = Vec::new();
    while let [Node::For(l)] = nodes {
        if l.kind != kind {
            break;
        }
        loops.push(l);
        nodes = &l.body;
    }
    (loops, nodes)
}

/// Does a loop bound inside `nodes`, at any depth, use `v`?
pub fn bounds_use(nodes: &[Node], v: VarId) -> bool {
    nodes.iter().any(|n| match n {
        Node::For(l) => l.lo.uses(v) || l.hi.uses(v) || bounds_use(&l.body, v),
        Node::Guard(g) => bounds_use(&g.body, v),
        _ => false,
    })
}

/// A new variable named `base` (made unique by [`unique_var_name`]).
pub fn add_var(vars: &mut Vec<Var>, base: &str) -> VarId {
    let name = unique_var_name(vars, base);
    vars.push(Var { name });
    vars.len() - 1
}

/// A copy of `nodes` in which every variable they bind (loops, index
/// loads) is a new one, named after it with `suffix` (a variable is bound
/// once per kernel: a second copy of a loop needs its own).
pub fn fresh_copy(nodes: &[Node], vars: &mut Vec<Var>, suffix: &str) -> Vec<Node> {
    let mut out = nodes.to_vec();
    let mut bound = Vec::new();
    for n in &out {
        n.walk(&mut |n| match n {
            Node::For(l) => bound.push(l.var),
            Node::LoadIndex { var, .. } => bound.push(*var),
            _ => {}
        });
    }
    for old in bound {
        let new = add_var(vars, &format!("{}_{suffix}", vars[old].name));
        rebind(&mut out, old, new);
    }
    out
}

/// `old` renamed `new` in `nodes`: bindings and uses.
fn rebind(nodes: &mut [Node], old: VarId, new: VarId) {
    rename_vars(nodes, &|v| if v == old { new } else { v });
}

/// Every variable `v` renamed `f(v)` in `nodes`, bindings and uses at
/// once (so a renaming may permute variables).
pub fn rename_vars(nodes: &mut [Node], f: &impl Fn(VarId) -> VarId) {
    fn binders(nodes: &mut [Node], f: &impl Fn(VarId) -> VarId) {
        for n in nodes.iter_mut() {
            match n {
                Node::For(l) => {
                    l.var = f(l.var);
                    binders(&mut l.body, f);
                }
                Node::LoadIndex { var, .. } => *var = f(*var),
                Node::Guard(g) => binders(&mut g.body, f),
                Node::Compute(_) | Node::Sync | Node::Copies(_) => {}
            }
        }
    }
    binders(nodes, f);
    for_each_expr_mut(nodes, &mut |e| *e = e.rename_vars(f));
}

/// Applies `f` to the buffer and offset of every access of `nodes` (index
/// loads, loads, writes), at any depth.
pub fn for_each_access_mut(nodes: &mut [Node], f: &mut impl FnMut(&mut BufId, &mut IExpr)) {
    for n in nodes {
        match n {
            Node::For(l) => for_each_access_mut(&mut l.body, f),
            Node::Guard(g) => for_each_access_mut(&mut g.body, f),
            Node::LoadIndex { buf, offset, .. } => f(buf, offset),
            Node::Compute(c) => {
                for v in &mut c.values {
                    if let VOp::Load { buf, offset } = &mut v.op {
                        f(buf, offset);
                    }
                }
                f(&mut c.write.buf, &mut c.write.offset);
            }
            Node::Sync | Node::Copies(_) => {}
        }
    }
}

/// Every buffer `b` that `nodes` read or write renamed `f(b)`, at any
/// depth (a kernel moved into another module's numbering).
pub fn rename_buffers(nodes: &mut [Node], f: &impl Fn(BufId) -> BufId) {
    for_each_access_mut(nodes, &mut |b, _| *b = f(*b));
}

/// Replaces each `Compute` node of `nodes` (at any depth) by `f(node)`.
pub fn wrap_computes(nodes: &mut [Node], f: &mut impl FnMut(Node) -> Node) {
    for n in nodes {
        match n {
            Node::Compute(_) => {
                let c = std::mem::replace(n, Node::Sync);
                *n = f(c);
            }
            Node::For(l) => wrap_computes(&mut l.body, f),
            Node::Guard(g) => wrap_computes(&mut g.body, f),
            Node::LoadIndex { .. } | Node::Sync | Node::Copies(_) => {}
        }
    }
}

/// `base`, with `_` appended until none of `vars` has the name.
pub fn unique_var_name(vars: &[Var], base: &str) -> String {
    let mut name = base.to_string();
    while vars.iter().any(|v| v.name == name) {
        name.push('_');
    }
    name
}

/// Applies `f` to every index expression of `nodes`, at any depth.
pub fn for_each_expr_mut(nodes: &mut [Node], f: &mut impl FnMut(&mut IExpr)) {
    for n in nodes {
        match n {
            Node::For(l) => {
                f(&mut l.lo);
                f(&mut l.hi);
                for_each_expr_mut(&mut l.body, f);
            }
            Node::Guard(g) => {
                for c in &mut g.conds {
                    for e in c.exprs_mut() {
                        f(e);
                    }
                }
                for_each_expr_mut(&mut g.body, f);
            }
            Node::LoadIndex { offset, .. } => f(offset),
            Node::Sync | Node::Copies(_) => {}
            Node::Compute(c) => {
                for e in c.values.iter_mut().filter_map(|v| v.op.index_expr_mut()) {
                    f(e);
                }
                f(&mut c.write.offset);
            }
        }
    }
}
