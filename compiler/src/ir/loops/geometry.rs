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
use super::{BufId, For, IBin, IExpr, Kernel, LoopKind, LoopModule, Node, Role, VOp, VarId};

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
    k.walk(&mut |n| atomic |= matches!(n, Node::Compute(c) if c.write.kind.is_atomic()));
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

/// Most computes a shared step holds once unrolled
/// ([`LoopModule::is_shared_step`]): an 8x8 register tile over a k step
/// of 16 is 1,024; twice that bounds the code of one step.
pub const MAX_SHARED_STEP_COMPUTES: i64 = 2048;

impl LoopModule {
    /// Whether `l` is a block step's reduction over shared tiles: a
    /// `reduce` loop with constant bounds whose body is `unroll` loops
    /// (and guards) around computes that load from `shared` buffers only,
    /// at most [`MAX_SHARED_STEP_COMPUTES`] of them once unrolled. Only
    /// `block-tiles` makes such loops; code generation unrolls them whole.
    pub fn is_shared_step(&self, l: &For) -> bool {
        let (Some(lo), Some(hi)) = (l.lo.as_const(), l.hi.as_const()) else { return false };
        l.kind == LoopKind::Reduce
            && self.shared_computes(&l.body).is_some_and(|n| n > 0 && hi.saturating_sub(lo).max(0).saturating_mul(n) <= MAX_SHARED_STEP_COMPUTES)
    }

    /// The computes `nodes` run, counting each `unroll` iteration, when
    /// they are only `unroll` loops, guards and computes loading from
    /// shared buffers; `None` otherwise.
    fn shared_computes(&self, nodes: &[Node]) -> Option<i64> {
        let mut n: i64 = 0;
        for node in nodes {
            let here = match node {
                Node::For(l) if l.kind == LoopKind::Unroll => {
                    l.hi.as_const()?.checked_sub(l.lo.as_const()?)?.max(0).checked_mul(self.shared_computes(&l.body)?)?
                }
                Node::Guard(g) => self.shared_computes(&g.body)?,
                Node::Compute(c) => {
                    let shared = c.values.iter().all(|v| match &v.op {
                        VOp::Load { buf, .. } => self.buffers.get(*buf).is_some_and(|b| b.role == Role::Shared),
                        _ => true,
                    });
                    if !shared {
                        return None;
                    }
                    1
                }
                _ => return None,
            };
            n = n.checked_add(here)?;
        }
        Some(n)
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

    /// The `reduce` loops of `text`'s first kernel that are shared steps,
    /// by variable name.
    fn shared_steps(text: &str) -> Vec<String> {
        let m = crate::ir::loops::parse::parse_module(text).unwrap();
        let k = &m.kernels[0];
        let mut steps = Vec::new();
        k.walk(&mut |n| {
            if let Node::For(l) = n {
                if m.is_shared_step(l) {
                    steps.push(k.vars[l.var].name.clone());
                }
            }
        });
        steps
    }

    fn step_module(load: &str, trips: i64, tile: i64) -> String {
        format!(
            "buffer a : f32[64, 16] input\nbuffer c : f32[16] output\nbuffer t : f32[64, 16] shared\nbuffer acc : f32[16] local\n\n\
             kernel @k role(main, stmt 0) {{\n  for i in [0, 1) parallel {{\n    for th in [0, 4) thread {{\n\
             for s in [0, {trips}) reduce {{\n        for u in [0, {tile}) unroll {{\n\
             %0 = load {load}[((s * 16) + u)] : f32\n          accumulate acc[u] += %0\n        }}\n      }}\n    }}\n  }}\n}}\n"
        )
    }

    #[test]
    fn a_reduction_over_shared_tiles_into_a_register_tile_is_a_shared_step() {
        assert_eq!(shared_steps(&step_module("t", 16, 4)), ["s"]);
        // Global operands: their loads' latency is what a loop hides.
        assert!(shared_steps(&step_module("a", 16, 4)).is_empty());
        // 256 x 16 computes once unrolled is past the code bound; 128 x 16 is not.
        assert!(shared_steps(&step_module("t", 256, 16)).is_empty());
        assert_eq!(shared_steps(&step_module("t", 128, 16)), ["s"]);
        // A step loop with a barrier inside is a block's loop, not a step.
        let synced = step_module("t", 16, 4).replace("for s in [0, 16) reduce {\n", "for s in [0, 16) reduce {\n        sync\n");
        assert!(shared_steps(&synced).is_empty());
        // Symbolic bounds are not unrolled.
        let dynamic = step_module("t", 16, 4).replace("[0, 16) reduce", "[0, (i + 16)) reduce");
        assert!(shared_steps(&dynamic).is_empty());
        // Trips beyond i64 are counted without overflow: too many.
        let huge = step_module("t", 16, 4).replace("[0, 16) reduce", "[-9223372036854775807, 9223372036854775807) reduce");
        assert!(shared_steps(&huge).is_empty());
    }
}
