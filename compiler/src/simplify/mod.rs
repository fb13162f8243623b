//! `simplify-index`: equality saturation (egg) over the loop dialect's
//! index expressions. Each expression is added to a fresh e-graph whose
//! analysis knows the variables' ranges; the rules of `rules.rs` run until
//! saturation or a limit, and the cheapest equivalent (fewest operators) is
//! extracted. Guard conditions are decided from the intervals of their
//! simplified sides and differences.
//!
//! Engine only: the language is in `lang.rs`, the interval analysis in
//! `analysis.rs`, the rewrites in `rules.rs`; docs/pass-simplify-index.md
//! describes the pass. The pass never changes the value of an index at a
//! point of its domain, and never returns an expression with more
//! operators than it was given.

pub mod analysis;
pub mod lang;
pub mod rules;

pub use analysis::{Interval, IntervalAnalysis, Ranges};

use crate::ir::loops::poly::Extents;
use crate::ir::loops::{Cond, Guard, IBin, IExpr, Kernel, LoopModule, Node, VOp};
use egg::{BackoffScheduler, CostFunction, EGraph, Extractor, Id, Language, Rewrite, Runner, StopReason};
use lang::{IndexLang, Shape};
use std::fmt;
use std::time::Duration;

/// Most e-nodes one e-graph may grow to. Index expressions from lowering
/// have tens of nodes and the rules mostly shrink them; saturation of such
/// inputs stays in the hundreds of nodes, so 10 000 is reached only by a
/// pathological input, and at that size one run still takes milliseconds.
pub const NODE_LIMIT: usize = 10_000;

/// Most rule-application rounds. A rewrite chain of the rule set (canon,
/// re-associate, cancel, fold) is a handful of steps per nesting level; 30
/// rounds cover expressions nested far deeper than lowering produces.
pub const ITER_LIMIT: usize = 30;

/// Wall-clock limit of one run: a safety net only. Reaching it would make
/// the output depend on machine speed, so it is set far above what the node
/// and iteration limits allow (those stop a run within milliseconds).
pub const TIME_LIMIT: Duration = Duration::from_secs(2);

/// Initial per-rule match limit of the `BackoffScheduler`: a rule matching
/// more often in one round is banned for a few rounds, which keeps a rule
/// that matches everywhere (`mod-small`, `min-left`) from crowding out the
/// others. egg's default (1 000) is ample for expressions of this size.
pub const MATCH_LIMIT: usize = 1_000;

/// Rounds a rule stays banned after exceeding its match limit (doubling
/// each time, egg's scheme); egg's default.
pub const BAN_LENGTH: usize = 5;

/// What one `simplify_kernel`/`simplify_module` did.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Stats {
    /// Index expressions simplified.
    pub exprs: usize,
    /// Their operators before and after.
    pub ops_before: usize,
    pub ops_after: usize,
    /// Guards whose conditions were all proved true (body spliced in place).
    pub guards_removed: usize,
    /// Conditions proved true and dropped (including those of removed guards).
    pub conds_removed: usize,
    /// Guards with a condition proved false (the guarded region is gone).
    pub regions_removed: usize,
    /// Loops proved to run no iteration.
    pub loops_removed: usize,
    /// Largest e-graph (e-nodes) of any run.
    pub egraph_nodes_max: usize,
    /// Runs that stopped at a limit instead of saturating.
    pub stopped_by_limit: usize,
    /// Loop and guard bounds of dynamic kernels whose `min`/`max` lost an
    /// operand the relational bounds prove never chosen
    /// (`Kernel::prune_ordered_bounds`).
    pub bounds_ordered: usize,
}

impl Stats {
    /// Adds `o`'s counts to `self` (maximum for `egraph_nodes_max`).
    pub fn absorb(&mut self, o: &Stats) {
        self.exprs += o.exprs;
        self.ops_before += o.ops_before;
        self.ops_after += o.ops_after;
        self.guards_removed += o.guards_removed;
        self.conds_removed += o.conds_removed;
        self.regions_removed += o.regions_removed;
        self.loops_removed += o.loops_removed;
        self.egraph_nodes_max = self.egraph_nodes_max.max(o.egraph_nodes_max);
        self.stopped_by_limit += o.stopped_by_limit;
        self.bounds_ordered += o.bounds_ordered;
    }
}

impl fmt::Display for Stats {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "simplify-index: {} exprs, ops {} -> {}, guards removed {}, conds removed {}, regions removed {}, loops removed {}, max e-graph {} nodes, {} runs stopped by a limit, {} dynamic bounds ordered",
            self.exprs,
            self.ops_before,
            self.ops_after,
            self.guards_removed,
            self.conds_removed,
            self.regions_removed,
            self.loops_removed,
            self.egraph_nodes_max,
            self.stopped_by_limit,
            self.bounds_ordered
        )
    }
}

/// Extraction cost: operators first, then variable occurrences; constants
/// are free. Compared lexicographically, so the extracted term never has
/// more operators than any other term of its class, the input included.
struct FewestOps;

impl CostFunction<IndexLang> for FewestOps {
    type Cost = (usize, usize);

    fn cost<C>(&mut self, enode: &IndexLang, mut costs: C) -> (usize, usize)
    where
        C: FnMut(Id) -> (usize, usize),
    {
        match enode {
            IndexLang::Num(_) => (0, 0),
            IndexLang::Var(_) | IndexLang::Sym(_) => (0, 1),
            op => op.fold((1, 0), |(o, v), id| {
                let (co, cv) = costs(id);
                (o.saturating_add(co), v.saturating_add(cv))
            }),
        }
    }
}

type Rules = Vec<Rewrite<IndexLang, IntervalAnalysis>>;

/// The pass with its rule table built once; reuse one for many
/// expressions (`simplify_expr` and `decide` build a new one per call).
pub struct Simplifier {
    rules: Rules,
}

impl Default for Simplifier {
    fn default() -> Self {
        Simplifier::new()
    }
}

/// One saturated e-graph and the e-classes of the expressions given to it.
struct Saturated {
    egraph: EGraph<IndexLang, IntervalAnalysis>,
    roots: Vec<Id>,
}

impl Saturated {
    fn interval(&self, root: usize) -> Interval {
        self.egraph[self.roots[root]].data
    }
}

/// Does any variable of `exprs` have an empty range? Then the domain is
/// empty and every statement about it is vacuous; the pass leaves such
/// expressions alone rather than derive arbitrary facts from it.
fn empty_domain(exprs: &[&IExpr], r: &Ranges) -> bool {
    let mut empty = false;
    for e in exprs {
        e.for_each_var(&mut |v| empty |= r.interval(v).is_empty());
    }
    empty
}

/// The tree of the cheapest term of `id` (see `FewestOps`).
fn extract(ex: &Extractor<FewestOps, IndexLang, IntervalAnalysis>, id: Id) -> IExpr {
    // Terminates: a best node's operator cost is larger than each of its
    // children's best costs, so the chosen nodes form no cycle.
    match ex.find_best_node(id).shape() {
        Shape::Leaf(e) => e,
        Shape::Bin(op, a, b) => IExpr::bin(op, extract(ex, a), extract(ex, b)),
    }
}

impl Simplifier {
    pub fn new() -> Simplifier {
        Simplifier { rules: rules::rules() }
    }

    /// Adds `exprs` to one e-graph over `r` and runs the rules within the
    /// limits; records the e-graph size and a limit stop in `st`.
    fn saturate(&self, exprs: &[&IExpr], r: &Ranges, st: &mut Stats) -> Saturated {
        let mut runner: Runner<IndexLang, IntervalAnalysis> = Runner::new(IntervalAnalysis::new(r.clone()))
            .with_node_limit(NODE_LIMIT)
            .with_iter_limit(ITER_LIMIT)
            .with_time_limit(TIME_LIMIT)
            .with_scheduler(BackoffScheduler::default().with_initial_match_limit(MATCH_LIMIT).with_ban_length(BAN_LENGTH));
        for e in exprs {
            runner = runner.with_expr(&lang::to_recexpr(e));
        }
        let mut runner = runner.run(&self.rules);
        runner.egraph.rebuild();
        let peak = runner.iterations.iter().map(|i| i.egraph_nodes).max().unwrap_or(0);
        st.egraph_nodes_max = st.egraph_nodes_max.max(peak).max(runner.egraph.total_number_of_nodes());
        if !matches!(runner.stop_reason, Some(StopReason::Saturated) | None) {
            st.stopped_by_limit += 1;
        }
        let roots = runner.roots.iter().map(|&id| runner.egraph.find(id)).collect();
        Saturated { egraph: runner.egraph, roots }
    }

    /// `e` simplified over `r`, with an interval of its value; counted in `st`.
    fn expr_in(&self, e: &IExpr, r: &Ranges, st: &mut Stats) -> (IExpr, Interval) {
        st.exprs += 1;
        st.ops_before += e.op_count();
        if empty_domain(&[e], r) || matches!(e, IExpr::Const(_)) {
            // A constant has nothing to simplify; an empty domain nothing
            // to say.
            st.ops_after += e.op_count();
            let i = e.as_const().map(Interval::point).unwrap_or(Interval::FULL);
            return (e.clone(), i);
        }
        let sat = self.saturate(&[e], r, st);
        let ex = Extractor::new(&sat.egraph, FewestOps);
        let best = extract(&ex, sat.roots[0]);
        // The extractor minimises operators over a class that contains `e`,
        // so this holds; the check makes the promise independent of it.
        let out = if best.op_count() <= e.op_count() { best } else { e.clone() };
        st.ops_after += out.op_count();
        (out, sat.interval(0))
    }

    /// `e` simplified for every point of `r`: equal value everywhere, no
    /// more operators.
    pub fn expr(&self, e: &IExpr, r: &Ranges) -> IExpr {
        self.expr_in(e, r, &mut Stats::default()).0
    }

    /// `expr`, adding what the run did to `st` (expression and operator
    /// counts, e-graph size, limit stops).
    pub fn expr_counted(&self, e: &IExpr, r: &Ranges, st: &mut Stats) -> IExpr {
        self.expr_in(e, r, st).0
    }

    /// `Some(b)` when `c` is `b` at every point of `r` (proved from the
    /// intervals of its simplified sides and of their differences).
    pub fn decide(&self, c: &Cond, r: &Ranges) -> Option<bool> {
        self.decide_in(c, r, &mut Stats::default())
    }

    fn decide_in(&self, c: &Cond, r: &Ranges, st: &mut Stats) -> Option<bool> {
        if empty_domain(&c.exprs(), r) {
            return None;
        }
        match c {
            Cond::NonZero(e) => {
                let i = self.saturate(&[e], r, st).interval(0);
                if i.is_empty() {
                    None
                } else if !i.contains(0) {
                    Some(true)
                } else if i == Interval::point(0) {
                    Some(false)
                } else {
                    None
                }
            }
            Cond::InRange { e, lo, hi } => {
                // The differences `e - lo` and `hi - e` let rules cancel
                // shared terms (`(x + 2) - x`), which independent intervals
                // of the sides cannot see.
                let d_lo = IExpr::sub(e.clone(), lo.clone());
                let d_hi = IExpr::sub(hi.clone(), e.clone());
                let sat = self.saturate(&[e, lo, hi, &d_lo, &d_hi], r, st);
                let [ie, il, ih, dl, dh] = [0, 1, 2, 3, 4].map(|i| sat.interval(i));
                if [ie, il, ih, dl, dh].iter().any(|i| i.is_empty()) {
                    return None;
                }
                // A difference's interval bounds the true difference only
                // where the subtraction cannot wrap.
                let dl = Interval::exact(IBin::Sub, ie, il).map(|_| dl);
                let dh = Interval::exact(IBin::Sub, ih, ie).map(|_| dh);
                let lower_true = il.hi <= ie.lo || dl.is_some_and(|d| d.lo >= 0);
                let upper_true = ie.hi < ih.lo || dh.is_some_and(|d| d.lo >= 1);
                let lower_false = ie.hi < il.lo || dl.is_some_and(|d| d.hi < 0);
                let upper_false = ie.lo >= ih.hi || dh.is_some_and(|d| d.hi <= 0);
                if lower_false || upper_false {
                    Some(false)
                } else if lower_true && upper_true {
                    Some(true)
                } else {
                    None
                }
            }
        }
    }

    /// Simplifies every index expression of `k` and removes what the
    /// ranges prove dead or redundant (see `simplify_kernel`).
    pub fn kernel(&self, k: &mut Kernel) -> Stats {
        let mut st = Stats::default();
        let body = std::mem::take(&mut k.body);
        k.body = self.nodes(body, &Ranges::new(), &mut st);
        st
    }

    /// One node list under `outer` (the ranges of enclosing variables).
    fn nodes(&self, nodes: Vec<Node>, outer: &Ranges, st: &mut Stats) -> Vec<Node> {
        // A `load_index` binds its variable for the nodes after it.
        let mut r = outer.clone();
        let mut out = Vec::with_capacity(nodes.len());
        for node in nodes {
            match node {
                Node::For(mut l) => {
                    let (lo, ilo) = self.expr_in(&l.lo, &r, st);
                    let (hi, ihi) = self.expr_in(&l.hi, &r, st);
                    l.lo = lo;
                    l.hi = hi;
                    if !ilo.is_empty() && !ihi.is_empty() && ihi.hi <= ilo.lo {
                        // hi <= lo at every point: no iteration ever runs.
                        st.loops_removed += 1;
                        continue;
                    }
                    let mut inner = r.clone();
                    // v in [lo, hi) with lo >= ilo.lo and hi <= ihi.hi.
                    inner.set(l.var, ilo.lo, ihi.hi.saturating_sub(1));
                    l.body = self.nodes(l.body, &inner, st);
                    out.push(Node::For(l));
                }
                Node::Guard(g) => {
                    let mut conds = Vec::with_capacity(g.conds.len());
                    let mut inner = r.clone();
                    let mut dead = false;
                    for c in g.conds {
                        let (c, bounds) = self.cond_in(c, &r, st);
                        match self.decide_in(&c, &r, st) {
                            Some(true) => st.conds_removed += 1,
                            Some(false) => {
                                dead = true;
                                break;
                            }
                            None => {
                                narrow(&c, bounds, &mut inner);
                                conds.push(c);
                            }
                        }
                    }
                    if dead {
                        st.regions_removed += 1;
                        continue;
                    }
                    let body = self.nodes(g.body, &inner, st);
                    if conds.is_empty() {
                        st.guards_removed += 1;
                        out.extend(body);
                    } else {
                        out.push(Node::Guard(Guard { conds, body }));
                    }
                }
                Node::LoadIndex { var, buf, offset } => {
                    let (offset, _) = self.expr_in(&offset, &r, st);
                    // An INT element: any i32.
                    r.set(var, i32::MIN as i64, i32::MAX as i64);
                    out.push(Node::LoadIndex { var, buf, offset });
                }
                Node::Compute(mut c) => {
                    for v in &mut c.values {
                        self.vop_in(&mut v.op, &r, st);
                    }
                    c.write.offset = self.expr_in(&c.write.offset, &r, st).0;
                    out.push(Node::Compute(c));
                }
                Node::Sync => out.push(Node::Sync),
                Node::Copies(g) => out.push(Node::Copies(g)),
            }
        }
        out
    }

    /// A condition with simplified sides, and the intervals of its bounds
    /// (for narrowing).
    fn cond_in(&self, c: Cond, r: &Ranges, st: &mut Stats) -> (Cond, Option<(Interval, Interval)>) {
        match c {
            Cond::InRange { e, lo, hi } => {
                let (e, _) = self.expr_in(&e, r, st);
                let (lo, ilo) = self.expr_in(&lo, r, st);
                let (hi, ihi) = self.expr_in(&hi, r, st);
                (Cond::InRange { e, lo, hi }, Some((ilo, ihi)))
            }
            Cond::NonZero(e) => (Cond::NonZero(self.expr_in(&e, r, st).0), None),
        }
    }

    fn vop_in(&self, op: &mut VOp, r: &Ranges, st: &mut Stats) {
        match op {
            VOp::Load { offset, .. } => *offset = self.expr_in(offset, r, st).0,
            VOp::Index(e) => *e = self.expr_in(e, r, st).0,
            VOp::Random { counter, .. } => *counter = self.expr_in(counter, r, st).0,
            VOp::Lookup { table, index } => {
                let idx = self.expr_in(index, r, st).0;
                // A constant position in the table is the entry itself.
                let entry = idx.as_const().and_then(|i| usize::try_from(i).ok()).and_then(|i| table.get(i).copied());
                *op = match entry {
                    Some(v) => VOp::Index(IExpr::Const(v)),
                    None => VOp::Lookup { table: std::mem::take(table), index: idx },
                };
            }
            VOp::Const(_) | VOp::Neg(_) | VOp::Bin(..) | VOp::Cast(_) | VOp::Cmp(..) | VOp::Call(..) => {}
        }
    }

    /// Simplifies every kernel of `m`; in a kernel with dim symbols, then
    /// drops the `min`/`max` operands of bounds that the relational bounds
    /// over the symbols and `m`'s extents prove never chosen (the interval
    /// analysis cannot: a window's `min(%n.0, o + %k.0)`).
    pub fn module(&self, m: &mut LoopModule) -> Stats {
        let mut st = Stats::default();
        let ext = Extents::of(m);
        for k in &mut m.kernels {
            st.absorb(&self.kernel(k));
            if k.is_symbolic() {
                st.bounds_ordered += k.prune_ordered_bounds(&ext);
            }
        }
        st
    }
}

/// Inside a guard, a remaining condition on a bare variable narrows that
/// variable's range for the body: `lo <= v < hi` gives `[lo.lo, hi.hi - 1]`,
/// and `v != 0` moves a range bound that sits at 0.
fn narrow(c: &Cond, bounds: Option<(Interval, Interval)>, r: &mut Ranges) {
    match (c, bounds) {
        (Cond::InRange { e: IExpr::Var(v), .. }, Some((ilo, ihi))) if !ilo.is_empty() && !ihi.is_empty() => {
            r.narrow(*v, ilo.lo, ihi.hi.saturating_sub(1));
        }
        (Cond::NonZero(IExpr::Var(v)), _) => {
            let i = r.interval(*v);
            if i.lo == 0 {
                r.narrow(*v, 1, i64::MAX);
            } else if i.hi == 0 {
                r.narrow(*v, i64::MIN, -1);
            }
        }
        _ => {}
    }
}

/// `e` simplified for every point of `r` (same value, no more operators).
pub fn simplify_expr(e: &IExpr, r: &Ranges) -> IExpr {
    Simplifier::new().expr(e, r)
}

/// `Some(b)` when `c` provably evaluates to `b` at every point of `r`.
pub fn decide(c: &Cond, r: &Ranges) -> Option<bool> {
    Simplifier::new().decide(c, r)
}

/// Simplifies a kernel in place: every index expression (loop bounds,
/// guard conditions, offsets, `Index`/`Lookup`/`Random` operands) under the
/// ranges of the variables in scope. A loop variable ranges over its
/// bounds' intervals (`lo.lo ..= hi.hi - 1`); a loaded index over `i32`; a
/// guard `lo <= v < hi` on a bare variable narrows `v` inside it. Loops
/// that never iterate are removed; guard conditions proved true are
/// dropped (a guard left without conditions is replaced by its body);
/// guards with a condition proved false are removed with their region; a
/// `Lookup` at a constant position becomes that entry.
pub fn simplify_kernel(k: &mut Kernel) -> Stats {
    Simplifier::new().kernel(k)
}

/// `simplify_kernel` on every kernel of the module.
pub fn simplify_module(m: &mut LoopModule) -> Stats {
    Simplifier::new().module(m)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ir::loops::{Compute, DType, Facts, For, LoopKind, Value, Var, Write, WriteKind};

    fn v(i: usize) -> IExpr {
        IExpr::v(i)
    }
    fn c(x: i64) -> IExpr {
        IExpr::c(x)
    }
    fn b(op: IBin, x: IExpr, y: IExpr) -> IExpr {
        IExpr::bin(op, x, y)
    }
    fn range(e: IExpr, lo: i64, hi: i64) -> Cond {
        Cond::InRange { e, lo: c(lo), hi: c(hi) }
    }
    fn for_(var: usize, lo: IExpr, hi: IExpr, body: Vec<Node>) -> Node {
        Node::For(For { var, lo, hi, kind: LoopKind::Reduce, body })
    }
    fn guard(conds: Vec<Cond>, body: Vec<Node>) -> Node {
        Node::Guard(Guard { conds, body })
    }
    /// A compute node storing `Index(value)` at `offset`.
    fn store(offset: IExpr, value: VOp) -> Node {
        Node::Compute(Compute { values: vec![Value { op: value, dtype: DType::I32 }], write: Write { kind: WriteKind::Store, buf: 0, offset, value: 0 } })
    }
    fn kernel(nvars: usize, body: Vec<Node>) -> Kernel {
        Kernel::new("k", (0..nvars).map(|i| Var { name: format!("x{i}") }).collect(), body)
    }

    #[test]
    fn space_to_depth_split_folds_back() {
        // v0 in [0, 3], v1 in [0, 1]: p = v0*2 + v1 is a position inside a
        // block of 2; p // 2 is v0 and p % 2 is v1.
        let r = Ranges::new().with(0, 0, 3).with(1, 0, 1);
        let p = IExpr::add(IExpr::mul(v(0), c(2)), v(1));
        assert_eq!(simplify_expr(&b(IBin::FloorDiv, p.clone(), c(2)), &r), v(0));
        assert_eq!(simplify_expr(&b(IBin::Mod, p.clone(), c(2)), &r), v(1));
        // FLAT(p // 2, p % 2) with dims (4, 2) is p itself.
        let flat = IExpr::add(IExpr::mul(b(IBin::FloorDiv, p.clone(), c(2)), c(2)), b(IBin::Mod, p.clone(), c(2)));
        assert_eq!(simplify_expr(&flat, &r), p);
    }

    #[test]
    fn result_never_has_more_ops_and_constants_fold() {
        let r = Ranges::new().with(0, -10, 10);
        // 2 + 3*4 - v0 + v0: everything but 14 cancels.
        let e = IExpr::add(IExpr::sub(IExpr::add(c(2), IExpr::mul(c(3), c(4))), v(0)), v(0));
        assert_eq!(simplify_expr(&e, &r), c(14));
        // Nothing to do: unchanged.
        let e = b(IBin::Max, v(0), v(1));
        assert_eq!(simplify_expr(&e, &r), e);
    }

    #[test]
    fn empty_domain_leaves_expressions_alone() {
        let r = Ranges::new().with(0, 5, 4);
        let e = IExpr::add(v(0), c(0));
        assert_eq!(simplify_expr(&e, &r), e);
        assert_eq!(decide(&range(v(0), 0, 1), &r), None);
    }

    #[test]
    fn decide_uses_sides_and_differences() {
        let r = Ranges::new().with(0, 0, 5).with(1, 0, 2);
        // Valid convolution: 0 <= oh + kh < 8 with oh in [0, 5], kh in [0, 2].
        assert_eq!(decide(&range(IExpr::add(v(0), v(1)), 0, 8), &r), Some(true));
        assert_eq!(decide(&range(IExpr::add(v(0), v(1)), 0, 7), &r), None);
        assert_eq!(decide(&range(IExpr::add(v(0), v(1)), 8, 9), &r), Some(false));
        // v0 <= v0 + v1 < v0 + 3: intervals of the sides overlap, but the
        // differences v1 and 3 - v1 are in [0, 2] and [1, 3].
        let c2 = Cond::InRange { e: IExpr::add(v(0), v(1)), lo: v(0), hi: IExpr::add(v(0), c(3)) };
        assert_eq!(decide(&c2, &r), Some(true));
        let c3 = Cond::InRange { e: IExpr::add(v(0), v(1)), lo: IExpr::add(v(0), c(3)), hi: IExpr::add(v(0), c(9)) };
        assert_eq!(decide(&c3, &r), Some(false));
        assert_eq!(decide(&Cond::NonZero(IExpr::add(v(0), c(1))), &r), Some(true));
        assert_eq!(decide(&Cond::NonZero(IExpr::sub(v(0), v(0))), &r), Some(false));
        assert_eq!(decide(&Cond::NonZero(v(0)), &r), None);
    }

    #[test]
    fn decide_does_not_trust_a_wrapping_difference() {
        // e = v0 in [MIN, MIN+1], lo = 1: e - lo wraps to near MAX, yet e < lo.
        let r = Ranges::new().with(0, i64::MIN, i64::MIN + 1);
        assert_eq!(decide(&Cond::InRange { e: v(0), lo: c(1), hi: c(i64::MAX) }, &r), Some(false));
    }

    #[test]
    fn kernel_walk_removes_proved_guards_dead_regions_and_empty_loops() {
        // vars: 0 = i in [0, 4), 1 = j in [0, 2), 2 = t (loaded), 3 = k.
        let p = IExpr::add(IExpr::mul(v(0), c(2)), v(1));
        let inner = guard(
            vec![range(b(IBin::FloorDiv, p.clone(), c(2)), 0, 4), range(v(1), 0, 2)],
            vec![store(
                IExpr::add(IExpr::mul(b(IBin::FloorDiv, p.clone(), c(2)), c(2)), b(IBin::Mod, p.clone(), c(2))),
                VOp::Lookup { table: vec![10, 20, 30], index: IExpr::add(IExpr::sub(v(1), v(1)), c(2)) },
            )],
        );
        let body = vec![for_(
            0,
            c(0),
            c(4),
            vec![
                for_(1, c(0), IExpr::add(c(1), c(1)), vec![inner]),
                // i - 5 is in [-5, -2]: never in [0, 3).
                guard(vec![range(IExpr::sub(v(0), c(5)), 0, 3)], vec![store(c(0), VOp::Index(c(1)))]),
                // k in [i + 3, 2): i + 3 >= 3 > 2, no iteration.
                for_(3, IExpr::add(v(0), c(3)), c(2), vec![store(v(3), VOp::Index(c(1)))]),
                // Not provable (i reaches 3), but inside it i < 2 proves i < 3.
                guard(vec![range(v(0), 0, 2)], vec![guard(vec![range(v(0), 0, 3)], vec![store(v(0), VOp::Index(c(0)))])]),
                Node::LoadIndex { var: 2, buf: 1, offset: IExpr::add(v(0), c(0)) },
                // A loaded index is an i32: this holds, 0 <= t < 5 does not.
                guard(
                    vec![range(v(2), i32::MIN as i64, 1 << 31), range(v(2), 0, 5), Cond::NonZero(v(2))],
                    vec![store(b(IBin::FloorDiv, v(2), v(2)), VOp::Index(c(0)))],
                ),
            ],
        )];
        let mut k = kernel(4, body);
        let st = simplify_kernel(&mut k);

        let want = vec![for_(
            0,
            c(0),
            c(4),
            vec![
                for_(1, c(0), c(2), vec![store(p.clone(), VOp::Index(c(30)))]),
                guard(vec![range(v(0), 0, 2)], vec![store(v(0), VOp::Index(c(0)))]),
                Node::LoadIndex { var: 2, buf: 1, offset: v(0) },
                guard(
                    vec![range(v(2), 0, 5), Cond::NonZero(v(2))],
                    // t in [1, 4] inside the guard: t // t is not folded by
                    // intervals alone (no rule for x // x), so it stays.
                    vec![store(b(IBin::FloorDiv, v(2), v(2)), VOp::Index(c(0)))],
                ),
            ],
        )];
        assert_eq!(k.body, want);
        assert_eq!(st.guards_removed, 2, "{st}");
        assert_eq!(st.conds_removed, 4, "{st}");
        assert_eq!(st.regions_removed, 1, "{st}");
        assert_eq!(st.loops_removed, 1, "{st}");
        assert!(st.ops_after < st.ops_before, "{st}");
        assert_eq!(st.stopped_by_limit, 0, "{st}");
        assert!(st.to_string().starts_with("simplify-index: "), "{st}");
    }

    #[test]
    fn module_stats_add_up_over_kernels() {
        let k = kernel(1, vec![for_(0, c(0), c(3), vec![store(IExpr::add(v(0), c(0)), VOp::Index(c(0)))])]);
        let mut m = LoopModule { facts: Facts::NONE, dims: vec![], buffers: vec![], kernels: vec![k.clone(), k] };
        let st = simplify_module(&mut m);
        // Per kernel: two bounds, the offset, the index value.
        assert_eq!(st.exprs, 8);
        assert_eq!((st.ops_before, st.ops_after), (2, 0));
        for k in &m.kernels {
            assert_eq!(k.body, vec![for_(0, c(0), c(3), vec![store(v(0), VOp::Index(c(0)))])]);
        }
    }
}
