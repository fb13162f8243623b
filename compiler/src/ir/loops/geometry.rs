//! How a kernel maps onto the machine: the analyses both code generators
//! and the loop passes read, kept here (LLVM-free) rather than in codegen.
//!
//! - [`GridChain`]: the kernel's parallel chain as the GPU runs it, one
//!   grid-stride point per chain point, with the `thread` nest of a
//!   `block-tiles` kernel as the threads of a block; [`thread_count`] and
//!   [`block_size`] are its launch geometry (what a bundle launches).
//! - [`split_range`]: the root loop the host may split across CPU threads.
//! - [`Kernel::scratch_buffers`]: the shared and local buffers a kernel
//!   holds itself (never parameters), for the verifier and codegen.
//! - [`Kernel::is_register_tiled`]: whether `register-tiles` gave the
//!   kernel a tile (`unroll` loops), which the host's float policy reads.
//!
//! docs/codegen.md describes how the lowering uses each.

use super::chain::{Chain, Step};
use super::{BufId, IBin, IExpr, Kernel, LoopKind, LoopModule, Node, VarId, WriteKind};

/// The kernel's parallel chain (`ir::loops::chain`) as one grid-stride
/// loop: its iteration space is flattened into one linear id; the steps
/// re-create, per id, the loop variables and then the guards and index
/// loads in their original order.
pub struct GridChain<'k> {
    pub steps: Vec<Step<'k>>,
    /// The body of the innermost step, run sequentially in the thread
    /// (with a `thread` nest: the innermost `thread` loop's body).
    pub rest: &'k [Node],
    /// Product of the chain loops' trip counts: a constant, or in a
    /// dynamic kernel an expression over dim symbols.
    pub total: IExpr,
    /// The `thread` nest the chain's rest holds: `(var, lo, trip)`,
    /// outermost first.
    pub threads: Vec<(VarId, i64, i64)>,
    /// Threads per block when there is a nest.
    pub block: Option<i64>,
}

impl<'k> GridChain<'k> {
    /// The chain of a dynamic kernel is [`Chain::of_dynamic`]'s: its
    /// leading `parallel` loops whose bounds use no variable (constants and
    /// dim symbols), so that their trips, and the grid-stride loop's total,
    /// are known when the kernel starts.
    pub fn of(body: &'k [Node]) -> GridChain<'k> {
        let c = if body.iter().any(|n| n.uses_dims()) { Chain::of_dynamic(body) } else { Chain::of(body) };
        let (rest, threads, block) = match c.thread_nest(body) {
            Some(n) => (n.body, n.threads.clone(), Some(n.size())),
            None => (c.rest(body), Vec::new(), None),
        };
        GridChain { steps: c.steps(body), rest, total: c.cells_expr(), threads, block }
    }
}

/// Number of threads the GPU code of `k` wants: the product of the trip
/// counts of its parallel chain (1 when it has none, 0 when a chain loop
/// is empty), times the block size of a `thread` nest. Launching fewer is
/// correct (grid-stride); more idle.
pub fn thread_count(k: &Kernel) -> i64 {
    let c = GridChain::of(&k.body);
    // A dynamic kernel's count is known at run time (`thread_count_expr`).
    c.total.as_const().unwrap_or(i64::MAX).saturating_mul(c.block.unwrap_or(1))
}

/// [`thread_count`] as an expression over the module's dim symbols: what a
/// dynamic bundle's launch computes its grid from.
pub fn thread_count_expr(k: &Kernel) -> IExpr {
    let c = GridChain::of(&k.body);
    match c.total.as_const() {
        // As `thread_count`: saturating, never wrapping.
        Some(t) => IExpr::c(t.saturating_mul(c.block.unwrap_or(1))),
        None => IExpr::fold(IBin::Mul, c.total, IExpr::c(c.block.unwrap_or(1))),
    }
}

/// The block size a kernel with a `thread` nest must be launched with
/// (its barriers need every thread of the nest in one block); `None` for
/// kernels that take any block size.
pub fn block_size(k: &Kernel) -> Option<i64> {
    GridChain::of(&k.body).block
}

/// The root loop's bounds when the host may split kernel `k` across
/// threads: its body is one `parallel` loop with constant bounds and no
/// write is atomic (an atomic sum would be exact but its order, and so
/// its rounding, would change from run to run).
pub fn split_range(k: &Kernel) -> Option<(i64, i64)> {
    let [Node::For(l)] = k.body.as_slice() else { return None };
    let (lo, hi) = (l.lo.as_const()?, l.hi.as_const()?);
    let mut atomic = false;
    k.walk(&mut |n| atomic |= matches!(n, Node::Compute(c) if c.write.kind == WriteKind::AtomicAccumulate));
    (l.kind == LoopKind::Parallel && !atomic).then_some((lo, hi))
}

impl Kernel {
    /// The shared and local buffers kernel `k` uses, ascending: they live
    /// in the kernel (per block or per thread), never as its parameters.
    pub fn scratch_buffers(&self, m: &LoopModule) -> Vec<BufId> {
        self.buffers().into_iter().filter(|&b| m.buffers.get(b).is_some_and(|x| x.role.is_scratch())).collect()
    }

    /// Whether the kernel holds a register tile: an `unroll` loop, which
    /// only `register-tiles` makes. The host's `--fp-contract fast` lets
    /// LLVM reassociate sums only in kernels without one (there the
    /// vectors already run across the tile's cells; docs/codegen.md).
    pub fn is_register_tiled(&self) -> bool {
        let mut tiled = false;
        self.walk(&mut |n| tiled |= matches!(n, Node::For(l) if l.kind == LoopKind::Unroll));
        tiled
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ir::loops::{Cond, For, Guard, IExpr, Var};

    fn pfor(var: VarId, lo: i64, hi: i64, body: Vec<Node>) -> Node {
        Node::For(For { var, lo: IExpr::c(lo), hi: IExpr::c(hi), kind: LoopKind::Parallel, body })
    }

    #[test]
    fn chain_takes_constant_parallel_loops_through_guards() {
        let inner = Node::For(For { var: 2, lo: IExpr::c(0), hi: IExpr::v(1), kind: LoopKind::Reduce, body: vec![] });
        let g = Node::Guard(Guard { conds: vec![Cond::NonZero(IExpr::v(0))], body: vec![pfor(1, 2, 5, vec![inner])] });
        let body = vec![pfor(0, 0, 4, vec![g])];
        let c = GridChain::of(&body);
        assert_eq!(c.total, IExpr::c(12));
        assert_eq!(c.steps.len(), 3);
        assert_eq!(c.rest.len(), 1);
        let k = Kernel::new("k", (0..3).map(|i| Var { name: format!("v{i}") }).collect(), body);
        assert_eq!(thread_count(&k), 12);
        assert_eq!(block_size(&k), None);
    }

    #[test]
    fn chain_stops_at_reduce_and_keeps_trailing_guards_sequential() {
        let g = Node::Guard(Guard { conds: vec![], body: vec![] });
        let body = vec![pfor(0, 0, 3, vec![g])];
        let c = GridChain::of(&body);
        assert_eq!(c.total, IExpr::c(3));
        assert_eq!(c.steps.len(), 1);
        assert!(matches!(c.rest[0], Node::Guard(_)));
        // Two sibling loops are not a single path: nothing is parallel.
        let two = vec![pfor(0, 0, 3, vec![]), pfor(1, 0, 3, vec![])];
        assert_eq!(GridChain::of(&two).total, IExpr::c(1));
        // Empty loop: no thread has work.
        assert_eq!(GridChain::of(&[pfor(0, 5, 2, vec![])]).total, IExpr::c(0));
    }

    #[test]
    fn thread_nest_sets_the_block_size() {
        let t = Node::For(For { var: 1, lo: IExpr::c(0), hi: IExpr::c(32), kind: LoopKind::Thread, body: vec![] });
        let body = vec![pfor(0, 0, 10, vec![t])];
        let k = Kernel::new("k", (0..2).map(|i| Var { name: format!("v{i}") }).collect(), body);
        assert_eq!(block_size(&k), Some(32));
        assert_eq!(thread_count(&k), 320);
        assert!(!k.is_register_tiled());
        assert_eq!(split_range(&k), Some((0, 10)));
    }
}
