//! The parallel chain of a kernel: the `parallel` loops with constant
//! bounds from the root, along the single path on which only `guard` and
//! `load_index` nodes sit between them. It is what the GPU maps to threads
//! (one thread per point of the chain, docs/codegen.md), so the GPU loop
//! passes reshape kernels around it.

use super::{BufId, Cond, For, IExpr, LoopKind, Node, VarId};

/// One node of the chain, in the order the GPU lowering re-creates them
/// per thread.
pub enum Step<'k> {
    /// A chain loop: `var` takes `lo + digit` where `trip` is its extent.
    Loop { var: VarId, lo: i64, trip: i64 },
    Guard(&'k [Cond]),
    LoadIndex { var: VarId, buf: BufId, offset: &'k IExpr },
}

/// The threads of one block: a perfect nest of `thread` loops with
/// constant bounds.
pub struct ThreadNest<'k> {
    /// `(var, lo, trip)`, outermost first; the innermost varies fastest
    /// with the thread id.
    pub threads: Vec<(VarId, i64, i64)>,
    /// Each thread's program: the innermost `thread` loop's body.
    pub body: &'k [Node],
}

impl ThreadNest<'_> {
    /// Threads per block: the product of the trips.
    pub fn size(&self) -> i64 {
        self.threads.iter().fold(1i64, |a, t| a.saturating_mul(t.2))
    }
}

pub struct Chain {
    /// `(var, lo, trip)`, outermost first.
    pub loops: Vec<(VarId, i64, i64)>,
    /// Variables bound on the chain (its loops and index loads).
    pub bound: Vec<VarId>,
    /// Index expressions the chain's guards and index loads evaluate.
    pub exprs: Vec<IExpr>,
    /// Path to the innermost loop's body: at each step the index of the
    /// node to enter in the current body.
    path: Vec<usize>,
}

impl Chain {
    /// The chain stops before a loop whose trip count, or the product of
    /// the trips so far, does not fit in i64.
    pub fn of(body: &[Node]) -> Chain {
        let mut chain = Chain { loops: Vec::new(), bound: Vec::new(), exprs: Vec::new(), path: Vec::new() };
        let mut total: i64 = 1;
        // Steps since the last chain loop count only if a loop follows.
        let (mut pending_path, mut pending_bound, mut pending_exprs) = (Vec::new(), Vec::new(), Vec::new());
        let mut cur = body;
        while let Some((last, prefix)) = cur.split_last() {
            if !prefix.iter().all(|n| matches!(n, Node::LoadIndex { .. })) {
                break;
            }
            for n in prefix {
                if let Node::LoadIndex { var, offset, .. } = n {
                    pending_bound.push(*var);
                    pending_exprs.push(offset.clone());
                }
            }
            pending_path.push(prefix.len());
            match last {
                Node::For(For { var, lo, hi, kind: LoopKind::Parallel, body }) => {
                    let (Some(lo), Some(hi)) = (lo.as_const(), hi.as_const()) else { break };
                    let Some(trip) = hi.checked_sub(lo).map(|t| t.max(0)) else { break };
                    let Some(product) = total.checked_mul(trip) else { break };
                    total = product;
                    chain.loops.push((*var, lo, trip));
                    chain.bound.append(&mut pending_bound);
                    chain.bound.push(*var);
                    chain.exprs.append(&mut pending_exprs);
                    chain.path.append(&mut pending_path);
                    cur = body;
                }
                Node::Guard(g) => {
                    pending_exprs.extend(g.conds.iter().flat_map(|c| c.exprs()).cloned());
                    cur = &g.body;
                }
                _ => break,
            }
        }
        chain
    }

    /// Number of points: the product of the trips (1 without a loop, 0
    /// when one is empty).
    pub fn cells(&self) -> i64 {
        self.loops.iter().map(|l| l.2).product()
    }

    /// The chain's loops, guards and index loads in their order in `body`
    /// (the kernel body the chain was taken from).
    pub fn steps<'k>(&self, body: &'k [Node]) -> Vec<Step<'k>> {
        let mut steps = Vec::new();
        let mut loops = self.loops.iter();
        let mut cur = body;
        for &i in &self.path {
            for n in &cur[..i] {
                if let Node::LoadIndex { var, buf, offset } = n {
                    steps.push(Step::LoadIndex { var: *var, buf: *buf, offset });
                }
            }
            cur = match &cur[i] {
                Node::For(f) => {
                    let &(var, lo, trip) = loops.next().expect("one recorded loop per loop on the path");
                    steps.push(Step::Loop { var, lo, trip });
                    &f.body
                }
                Node::Guard(g) => {
                    steps.push(Step::Guard(&g.conds));
                    &g.body
                }
                _ => unreachable!("Chain::of only records loops and guards"),
            };
        }
        steps
    }

    /// The row-major index of the current point, innermost loop fastest.
    pub fn cell(&self) -> IExpr {
        let mut e = None;
        let mut stride = 1;
        for &(v, lo, trip) in self.loops.iter().rev() {
            let digit = if lo == 0 { IExpr::v(v) } else { IExpr::sub(IExpr::v(v), IExpr::c(lo)) };
            let term = if stride == 1 { digit } else { IExpr::mul(digit, IExpr::c(stride)) };
            e = Some(match e {
                None => term,
                Some(inner) => IExpr::add(term, inner),
            });
            stride *= trip;
        }
        e.unwrap_or(IExpr::c(0))
    }

    /// The innermost loop's body (the kernel body when there is no loop).
    pub fn rest<'a>(&self, body: &'a [Node]) -> &'a [Node] {
        let mut cur = body;
        for &i in &self.path {
            cur = cur[i].body();
        }
        cur
    }

    /// The `thread` nest the chain's rest consists of, if it is one: the
    /// shape `block-tiles` gives a kernel (the chain's points are blocks).
    pub fn thread_nest<'a>(&self, body: &'a [Node]) -> Option<ThreadNest<'a>> {
        let mut threads = Vec::new();
        let mut cur = self.rest(body);
        while let [Node::For(For { var, lo, hi, kind: LoopKind::Thread, body })] = cur {
            let (lo, hi) = (lo.as_const()?, hi.as_const()?);
            threads.push((*var, lo, hi.checked_sub(lo)?.max(0)));
            cur = body;
        }
        (!threads.is_empty()).then_some(ThreadNest { threads, body: cur })
    }

    /// Takes chain loop `var` out of `body` (the kernel body the chain was
    /// taken from): its body takes its place. The chain is stale after.
    pub fn remove_loop(&self, body: &mut Vec<Node>, var: VarId) {
        let mut cur = body;
        for &i in &self.path {
            if matches!(&cur[i], Node::For(f) if f.var == var) {
                if let Node::For(f) = cur.remove(i) {
                    cur.splice(i..i, f.body);
                }
                return;
            }
            cur = match &mut cur[i] {
                Node::For(f) => &mut f.body,
                Node::Guard(g) => &mut g.body,
                _ => return,
            };
        }
    }

    /// [`Chain::rest`], mutable.
    pub fn rest_mut<'a>(&self, body: &'a mut Vec<Node>) -> &'a mut Vec<Node> {
        let mut cur = body;
        for &i in &self.path {
            cur = match &mut cur[i] {
                Node::For(f) => &mut f.body,
                Node::Guard(g) => &mut g.body,
                _ => unreachable!("Chain::of only records loops and guards"),
            };
        }
        cur
    }

    /// Sets the trip of chain loop `var` (its lower bound stays).
    pub fn set_trip(&mut self, body: &mut [Node], var: VarId, trip: i64) {
        let mut cur = body;
        for &i in &self.path {
            let next = match &mut cur[i] {
                Node::For(f) => {
                    if f.var == var {
                        let lo = f.lo.as_const().unwrap_or(0);
                        f.hi = IExpr::c(lo + trip);
                    }
                    &mut f.body
                }
                Node::Guard(g) => &mut g.body,
                _ => unreachable!("Chain::of only records loops and guards"),
            };
            cur = next;
        }
        if let Some(l) = self.loops.iter_mut().find(|l| l.0 == var) {
            l.2 = trip;
        }
    }
}
