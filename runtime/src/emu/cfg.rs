//! Reconvergence points of branches: immediate post-dominators.
//!
//! A warp that splits at a branch runs one side, then the other, and joins
//! again at the first instruction every path from the branch must pass
//! through: the branch's immediate post-dominator (the PDOM scheme of
//! GPGPU-Sim, and where NVIDIA's compilers place the convergence barrier).
//! The analysis runs on instructions, not basic blocks: kernels are small,
//! and it saves building blocks. It is the iterative dominator algorithm of
//! Cooper, Harvey and Kennedy ("A Simple, Fast Dominance Algorithm") on the
//! reversed control-flow graph, rooted at a virtual exit node.

use super::decode::{Inst, Op, NO_PC};

/// Sets `rpc` of every branch in `code` to its immediate post-dominator,
/// or [`NO_PC`] when the paths only meet at the exit (or never reach it).
pub(crate) fn set_reconvergence_points(code: &mut [Inst]) {
    let n = code.len();
    let exit = n;
    // Control-flow successors; index `n` is the virtual exit.
    let succ: Vec<Vec<usize>> = code
        .iter()
        .enumerate()
        .map(|(pc, inst)| {
            let next = pc + 1; // `n` past the end: falling off the end exits
            let guarded = inst.guard.is_some();
            match inst.op {
                Op::Bra { target, .. } if guarded => vec![target as usize, next],
                Op::Bra { target, .. } => vec![target as usize],
                Op::Exit if guarded => vec![exit, next],
                Op::Exit => vec![exit],
                _ => vec![next],
            }
        })
        .collect();
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

    for (pc, inst) in code.iter_mut().enumerate() {
        if let Op::Bra { rpc, .. } = &mut inst.op {
            let p = ipdom[pc];
            *rpc = if p == UNSEEN || p == exit { NO_PC } else { p as u32 };
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::emu::decode::PredSrc;

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
