//! Reconvergence points of branches: immediate post-dominators.
//!
//! A warp that splits at a branch runs one side, then the other, and joins
//! again at the first instruction every path from the branch must pass
//! through: the branch's immediate post-dominator (the PDOM scheme of
//! GPGPU-Sim, and where NVIDIA's compilers place the convergence barrier).
//! The analysis runs on instructions, not basic blocks: kernels are small,
//! and it saves building blocks. It is the iterative dominator algorithm of
//! Cooper, Harvey and Kennedy ("A Simple, Fast Dominance Algorithm") on the
//! reversed control-flow graph, rooted at a virtual exit node. This module
//! is the graph algorithm alone; `decode` builds the graph from its
//! instructions and stores the result, so the two do not import each other.

/// The immediate post-dominator of each node of a graph given by its
/// successors `succ`, whose last node is the virtual exit (it has no
/// successors), or `None` for a node from which the exit cannot be
/// reached. The exit is its own.
pub(crate) fn immediate_postdominators(succ: &[Vec<usize>]) -> Vec<Option<usize>> {
    let Some(n) = succ.len().checked_sub(1) else { return Vec::new() };
    let exit = n;
    let mut pred = vec![Vec::new(); n + 1];
    for (v, ss) in succ.iter().enumerate() {
        for &s in ss {
            pred[s].push(v);
        }
    }

    // Postorder of the reversed graph from the exit (iterative DFS).
    const UNSEEN: usize = usize::MAX;
    let mut po = vec![UNSEEN; n + 1];
    let mut order = Vec::with_capacity(n + 1);
    let mut visited = vec![false; n + 1];
    let mut stack = vec![(exit, 0usize)];
    visited[exit] = true;
    while let Some((v, i)) = stack.pop() {
        if let Some(&p) = pred[v].get(i) {
            stack.push((v, i + 1));
            if !visited[p] {
                visited[p] = true;
                stack.push((p, 0));
            }
        } else {
            po[v] = order.len();
            order.push(v);
        }
    }

    let mut ipdom = vec![UNSEEN; n + 1];
    ipdom[exit] = exit;
    let intersect = |ipdom: &[usize], mut a: usize, mut b: usize| {
        while a != b {
            while po[a] < po[b] {
                a = ipdom[a];
            }
            while po[b] < po[a] {
                b = ipdom[b];
            }
        }
        a
    };
    let mut changed = true;
    while changed {
        changed = false;
        for &v in order.iter().rev().skip(1) {
            let mut new = UNSEEN;
            for &s in &succ[v] {
                if ipdom[s] == UNSEEN {
                    continue;
                }
                new = if new == UNSEEN { s } else { intersect(&ipdom, s, new) };
            }
            if new != UNSEEN && ipdom[v] != new {
                ipdom[v] = new;
                changed = true;
            }
        }
    }

    (0..=n).map(|v| (ipdom[v] != UNSEEN).then_some(ipdom[v])).collect()
}

#[cfg(test)]
mod tests {
    use crate::emu::decode::set_reconvergence_points;
    use crate::emu::inst::{Inst, Op, PredSrc, NO_PC};

    fn inst(op: Op, guarded: bool) -> Inst {
        Inst { op, guard: guarded.then_some(PredSrc { idx: 0, neg: false }) }
    }

    fn bra(target: u32, guarded: bool) -> Inst {
        inst(Op::Bra { target, rpc: 0 }, guarded)
    }

    fn rpcs(code: &mut [Inst]) -> Vec<u32> {
        set_reconvergence_points(code);
        code.iter()
            .filter_map(|i| match i.op {
                Op::Bra { rpc, .. } => Some(rpc),
                _ => None,
            })
            .collect()
    }

    #[test]
    fn if_else_joins_after_both_sides() {
        // 0: @p bra 3; 1: fence; 2: bra 4; 3: fence; 4: fence; 5: exit
        let mut code = vec![bra(3, true), inst(Op::Fence, false), bra(4, false), inst(Op::Fence, false), inst(Op::Fence, false), inst(Op::Exit, false)];
        assert_eq!(rpcs(&mut code), [4, 4]);
    }

    #[test]
    fn loop_exit_and_latch_before_body() {
        // The layout LLVM gives scatter kernels: the latch (1-2) precedes
        // the body (4-6), whose guarded branch joins at the latch.
        // 0: bra 4; 1: fence; 2: @p bra 4; 3: exit; 4: fence; 5: @p bra 7; 6: bra 1; 7: fence; 8: bra 1
        let mut code = vec![
            bra(4, false),
            inst(Op::Fence, false),
            bra(4, true),
            inst(Op::Exit, false),
            inst(Op::Fence, false),
            bra(7, true),
            bra(1, false),
            inst(Op::Fence, false),
            bra(1, false),
        ];
        assert_eq!(rpcs(&mut code), [4, 3, 1, 1, 1]);
    }

    #[test]
    fn early_exit_joins_nowhere() {
        // 0: @p exit; 1: @p bra 3; 2: exit; 3: exit
        let mut code = vec![inst(Op::Exit, true), bra(3, true), inst(Op::Exit, false), inst(Op::Exit, false)];
        assert_eq!(rpcs(&mut code), [NO_PC]);
    }
}
