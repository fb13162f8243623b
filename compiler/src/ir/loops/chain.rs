//! The nest of a kernel ([`Nest`]): the loops of any kind from the root,
//! along the single path on which only `guard` and `load_index` nodes sit
//! between them. Its parallel chain ([`Chain`]): the nest's leading
//! `parallel` loops with constant bounds. The chain is what the GPU maps
//! to threads (one thread per point of the chain, docs/codegen.md), so the
//! GPU loop passes reshape kernels around it; the host's `interchange`
//! reorders the whole nest.

use super::{BufId, Cond, For, Guard, IBin, IExpr, LoopKind, Node, VarId};

/// One node of a kernel's [`Nest`], borrowed from the body.
pub enum NestStep<'k> {
    Loop(&'k For),
    Guard(&'k Guard),
    LoadIndex { var: VarId, buf: BufId, offset: &'k IExpr },
}

/// The perfect nest of a kernel body from the root, loops of any kind:
/// in each node list, its leading index loads, then, when a single loop or
/// guard is all that follows them, that node, entered. It stops at the
/// first list that is not of that form.
pub struct Nest<'k> {
    /// Outermost first.
    pub steps: Vec<NestStep<'k>>,
    /// What follows the index loads of the list the nest stopped at (the
    /// compute, in a kernel that is one nest).
    pub rest: &'k [Node],
    /// At each loop or guard step: its index in its node list.
    path: Vec<usize>,
}

impl<'k> Nest<'k> {
    pub fn of(body: &'k [Node]) -> Nest<'k> {
        let (mut steps, mut path) = (Vec::new(), Vec::new());
        let mut cur = body;
        loop {
            let loads = cur.iter().take_while(|n| matches!(n, Node::LoadIndex { .. })).count();
            for n in &cur[..loads] {
                if let Node::LoadIndex { var, buf, offset } = n {
                    steps.push(NestStep::LoadIndex { var: *var, buf: *buf, offset });
                }
            }
            let rest = &cur[loads..];
            cur = match rest {
                [Node::For(f)] => {
                    steps.push(NestStep::Loop(f));
                    &f.body
                }
                [Node::Guard(g)] => {
                    steps.push(NestStep::Guard(g));
                    &g.body
                }
                _ => return Nest { steps, rest, path },
            };
            path.push(loads);
        }
    }
}

/// One node of the chain, in the order the GPU lowering re-creates them
/// per thread.
pub enum Step<'k> {
    /// A chain loop: `var` takes `lo + digit` where `trip` is its extent.
    /// Constants, except in a dynamic kernel's chain
    /// (`geometry::GridChain`), where they may use dim symbols.
    Loop {
        var: VarId,
        lo: IExpr,
        trip: IExpr,
    },
    Guard(&'k [Cond]),
    LoadIndex {
        var: VarId,
        buf: BufId,
        offset: &'k IExpr,
    },
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
    /// `(var, lo, trip)`, outermost first. In a chain of
    /// [`Chain::of_dynamic`], a loop with symbolic bounds is `(var, 0, 0)`
    /// here: read [`Chain::bounds`].
    pub loops: Vec<(VarId, i64, i64)>,
    /// Each loop's bounds `[lo, hi)` as written, outermost first.
    pub bounds: Vec<(IExpr, IExpr)>,
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
        Chain::take(body, false)
    }

    /// The chain of a dynamic kernel: [`Chain::of`] that also takes
    /// `parallel` loops whose bounds use dim symbols but no variable (their
    /// trips are known when the kernel starts: `geometry::GridChain`), so
    /// `fuse-resets` and `register-tiles` see the cells of a dynamic kernel.
    pub fn of_dynamic(body: &[Node]) -> Chain {
        Chain::take(body, true)
    }

    fn take(body: &[Node], symbolic: bool) -> Chain {
        let mut chain = Chain { loops: Vec::new(), bounds: Vec::new(), bound: Vec::new(), exprs: Vec::new(), path: Vec::new() };
        let nest = Nest::of(body);
        let mut total: i64 = 1;
        // Steps since the last chain loop count only if a loop follows.
        let (mut pending_bound, mut pending_exprs) = (Vec::new(), Vec::new());
        // Loop and guard steps so far: the length of the path to the
        // current one's body.
        let mut depth = 0;
        for step in &nest.steps {
            match step {
                NestStep::LoadIndex { var, offset, .. } => {
                    pending_bound.push(*var);
                    pending_exprs.push((*offset).clone());
                }
                NestStep::Guard(g) => {
                    depth += 1;
                    pending_exprs.extend(g.conds.iter().flat_map(|c| c.exprs()).cloned());
                }
                NestStep::Loop(f) => {
                    depth += 1;
                    if f.kind != LoopKind::Parallel {
                        break;
                    }
                    if let (Some(lo), Some(hi)) = (f.lo.as_const(), f.hi.as_const()) {
                        let Some(trip) = hi.checked_sub(lo).map(|t| t.max(0)) else { break };
                        let Some(product) = total.checked_mul(trip) else { break };
                        total = product;
                        chain.loops.push((f.var, lo, trip));
                    } else if symbolic && !f.lo.uses_any_var() && !f.hi.uses_any_var() {
                        chain.loops.push((f.var, 0, 0));
                    } else {
                        break;
                    }
                    chain.bounds.push((f.lo.clone(), f.hi.clone()));
                    chain.bound.append(&mut pending_bound);
                    chain.bound.push(f.var);
                    chain.exprs.append(&mut pending_exprs);
                    chain.path = nest.path[..depth].to_vec();
                }
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
        let mut loops = self.loops.iter().zip(&self.bounds);
        let mut cur = body;
        for &i in &self.path {
            for n in &cur[..i] {
                if let Node::LoadIndex { var, buf, offset } = n {
                    steps.push(Step::LoadIndex { var: *var, buf: *buf, offset });
                }
            }
            cur = match &cur[i] {
                Node::For(f) => {
                    let (&(var, lo, trip), (elo, ehi)) = loops.next().expect("one recorded loop per loop on the path");
                    let step = if elo.is_symbolic() || ehi.is_symbolic() {
                        Step::Loop { var, lo: elo.clone(), trip: symbolic_trip(elo, ehi) }
                    } else {
                        Step::Loop { var, lo: IExpr::c(lo), trip: IExpr::c(trip) }
                    };
                    steps.push(step);
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

    /// The product of the trips: [`Chain::cells`], or in a dynamic chain
    /// an expression over dim symbols.
    pub fn cells_expr(&self) -> IExpr {
        self.bounds.iter().zip(&self.loops).fold(IExpr::c(1), |total, ((lo, hi), &(_, _, trip))| {
            let trip = if lo.is_symbolic() || hi.is_symbolic() { symbolic_trip(lo, hi) } else { IExpr::c(trip) };
            IExpr::fold(IBin::Mul, total, trip)
        })
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

    /// [`Chain::cell`] of a dynamic chain: digits and strides are
    /// expressions over the dim symbols where the trips are symbolic (the
    /// same as [`Chain::cell`] where every trip is constant).
    pub fn cell_expr(&self) -> IExpr {
        let mut e: Option<IExpr> = None;
        let mut stride = IExpr::c(1);
        for (&(v, _, trip), (lo, hi)) in self.loops.iter().zip(&self.bounds).rev() {
            let symbolic = lo.is_symbolic() || hi.is_symbolic();
            let digit = if matches!(lo, IExpr::Const(0)) { IExpr::v(v) } else { IExpr::sub(IExpr::v(v), lo.clone()) };
            let term = if stride == IExpr::c(1) { digit } else { IExpr::mul(digit, stride.clone()) };
            e = Some(match e {
                None => term,
                Some(inner) => IExpr::add(term, inner),
            });
            let trip = if symbolic { symbolic_trip(lo, hi) } else { IExpr::c(trip) };
            stride = IExpr::fold(IBin::Mul, stride, trip);
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
        let lo = self.loops.iter().find(|l| l.0 == var).map_or(0, |l| l.1);
        self.set_hi(body, var, IExpr::c(lo + trip));
        if let Some(l) = self.loops.iter_mut().find(|l| l.0 == var) {
            l.2 = trip;
        }
    }

    /// Sets the upper bound of chain loop `var` (a dynamic chain's may be
    /// symbolic; [`Chain::loops`] then keeps its placeholder).
    pub fn set_hi(&mut self, body: &mut [Node], var: VarId, hi: IExpr) {
        let mut cur = body;
        for &i in &self.path {
            let next = match &mut cur[i] {
                Node::For(f) => {
                    if f.var == var {
                        f.hi = hi.clone();
                    }
                    &mut f.body
                }
                Node::Guard(g) => &mut g.body,
                _ => unreachable!("Chain::of only records loops and guards"),
            };
            cur = next;
        }
        if let Some(at) = self.loops.iter().position(|l| l.0 == var) {
            self.bounds[at].1 = hi;
        }
    }
}

/// `max(hi - lo, 0)`, folded where constant.
pub fn symbolic_trip(lo: &IExpr, hi: &IExpr) -> IExpr {
    IExpr::fold(IBin::Max, IExpr::fold(IBin::Sub, hi.clone(), lo.clone()), IExpr::c(0))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ir::loops::{Compute, DType, VOp, Value, Write, WriteKind};

    fn for_(var: VarId, hi: IExpr, kind: LoopKind, body: Vec<Node>) -> Node {
        Node::For(For { var, lo: IExpr::c(0), hi, kind, body })
    }

    /// p0 parallel; load_index v1; guard; p2 parallel; r3 reduce; p4
    /// parallel (bound by r3); compute.
    fn kernel() -> Vec<Node> {
        let compute = Node::Compute(Compute {
            values: vec![Value { op: VOp::Const(1.0), dtype: DType::F32 }],
            write: Write { kind: WriteKind::Accumulate, buf: 0, offset: IExpr::v(0), value: 0 },
        });
        let p4 = for_(4, IExpr::v(3), LoopKind::Parallel, vec![compute]);
        let r3 = for_(3, IExpr::c(5), LoopKind::Reduce, vec![p4]);
        let p2 = for_(2, IExpr::c(3), LoopKind::Parallel, vec![r3]);
        let guard = Node::Guard(Guard { conds: vec![Cond::InRange { e: IExpr::v(1), lo: IExpr::c(0), hi: IExpr::c(4) }], body: vec![p2] });
        let load = Node::LoadIndex { var: 1, buf: 1, offset: IExpr::v(0) };
        vec![for_(0, IExpr::c(2), LoopKind::Parallel, vec![load, guard])]
    }

    #[test]
    fn the_nest_reaches_the_compute_and_the_chain_stops_at_the_reduction() {
        let body = kernel();
        let nest = Nest::of(&body);
        let kinds: Vec<String> = nest
            .steps
            .iter()
            .map(|s| match s {
                NestStep::Loop(f) => format!("for {}", f.var),
                NestStep::Guard(_) => "guard".into(),
                NestStep::LoadIndex { var, .. } => format!("load {var}"),
            })
            .collect();
        assert_eq!(kinds, ["for 0", "load 1", "guard", "for 2", "for 3", "for 4"]);
        assert!(matches!(nest.rest, [Node::Compute(_)]));
        let chain = Chain::of(&body);
        assert_eq!(chain.loops, [(0, 0, 2), (2, 0, 3)]);
        assert_eq!(chain.bound, [0, 1, 2]);
        // The index load's offset and the guard's e, lo and hi.
        assert_eq!(chain.exprs.len(), 4);
        assert!(matches!(chain.rest(&body), [Node::For(f)] if f.var == 3));
        assert_eq!(chain.steps(&body).len(), 4);
    }

    #[test]
    fn a_dynamic_chains_cell_index_strides_by_its_symbolic_trips() {
        // a in [0, %0), b in [0, 3), c in [1, %1): the row-major cell is
        // a * (T * 3) + (b * T + (c - 1)) for T = max(%1 - 1, 0), as `cell` is where
        // every trip is constant.
        let compute = Node::Compute(Compute {
            values: vec![Value { op: VOp::Const(1.0), dtype: DType::F32 }],
            write: Write { kind: WriteKind::Store, buf: 0, offset: IExpr::v(0), value: 0 },
        });
        let c = Node::For(For { var: 2, lo: IExpr::c(1), hi: IExpr::Sym(1), kind: LoopKind::Parallel, body: vec![compute] });
        let body = vec![for_(0, IExpr::Sym(0), LoopKind::Parallel, vec![for_(1, IExpr::c(3), LoopKind::Parallel, vec![c])])];
        let chain = Chain::of_dynamic(&body);
        let c_trip = symbolic_trip(&IExpr::c(1), &IExpr::Sym(1));
        let inner = IExpr::add(IExpr::mul(IExpr::v(1), c_trip.clone()), IExpr::sub(IExpr::v(2), IExpr::c(1)));
        let want = IExpr::add(IExpr::mul(IExpr::v(0), IExpr::fold(IBin::Mul, c_trip.clone(), IExpr::c(3))), inner);
        assert_eq!(chain.cell_expr(), want);
        assert_eq!(chain.cells_expr(), IExpr::fold(IBin::Mul, IExpr::fold(IBin::Mul, IExpr::Sym(0), IExpr::c(3)), c_trip));
        // Static, it is `cell`.
        let st = kernel();
        let chain = Chain::of(&st);
        assert_eq!(chain.cell_expr(), chain.cell());
    }
}
