//! `fuse-resets` (GPU): the reset kernel of an `=` statement with a
//! reduction becomes the first store of the statement's own kernel.
//!
//! `lower-to-loops` gives every `=` statement a reset kernel that stores 0
//! into the cells the statement reaches; `direct-stores` removes it when
//! each cell gets one addition, but a reduction (matmul, a convolution,
//! `reduce_sum`'s combine) keeps it: one more launch, one more pass over
//! the output, and the main kernel then reads every cell back before
//! adding to it. When the reset kernel's parallel chain is the main
//! kernel's (the same loops, guards and index loads, so the same cells) and
//! the main kernel's single write is a plain `accumulate` at the reset's
//! offset (each cell owned by one thread), each thread can clear its own
//! cell before summing into it:
//!
//! ```text
//! kernel @K_reset: for cells.. parallel { store c[off] = -0.0 }
//! kernel @K:       for cells.. parallel { for k reduce { .. accumulate c[off] += v } }
//! ```
//!
//! becomes
//!
//! ```text
//! kernel @K:       for cells.. parallel { store c[off] = -0.0
//!                                         for k reduce { .. accumulate c[off] += v } }
//! ```
//!
//! The same cells get the same value first, so results do not change; LLVM
//! forwards the stored constant into the sum it keeps in a register, so
//! the main kernel no longer reads `c` at all. A dynamic reset's clear sits
//! under a guard that its reduction runs (`drop-unused-loops`); the guard
//! moves with it, and the sum's nest moves under it when the guard's
//! conditions are that the nest's loops run (the sum adds nothing where
//! they fail), so the cell's register outlives loops that may be empty. GPU only: the host's
//! `interchange` wants kernels with one computation.

use super::{Ir, NoOptions, PassError, Unit};
use crate::ir::loops::chain::Chain;
use crate::ir::loops::*;

pub fn run(unit: &mut Unit, _: &NoOptions) -> Result<Option<String>, PassError> {
    let Ir::Loop(m) = &mut unit.ir else { return Err(PassError::Internal("fuse-resets runs on the loop level".into())) };
    Ok(Some(format!("{} reset kernels fused", fuse_module(m))))
}

/// Fuses every reset kernel that qualifies into its statement's kernel;
/// returns how many. Kernels between the two (a split reduction's partial
/// kernel) must not touch the reset buffer.
pub fn fuse_module(m: &mut LoopModule) -> usize {
    let mut n = 0;
    let mut i = 0;
    while i < m.kernels.len() {
        if let Some(j) = statement_kernel(m, i) {
            if let Some(fused) = fuse(&m.kernels[i], &m.kernels[j]) {
                m.kernels[j] = fused;
                m.kernels.remove(i);
                n += 1;
                continue;
            }
        }
        i += 1;
    }
    n
}

/// The main kernel of reset kernel `i`'s statement, after it, when the
/// kernels between them neither read nor write the buffer the reset
/// stores into.
fn statement_kernel(m: &LoopModule, i: usize) -> Option<usize> {
    let reset = &m.kernels[i];
    if reset.role != KernelRole::Reset {
        return None;
    }
    let mut buf = None;
    reset.walk(&mut |n| {
        if let Node::Compute(c) = n {
            buf = Some(c.write.buf)
        }
    });
    let buf = buf?;
    for (j, k) in m.kernels.iter().enumerate().skip(i + 1) {
        if k.role == KernelRole::Main && reset.is_role_of(KernelRole::Reset, k) {
            return Some(j);
        }
        if touches(k, buf) {
            return None;
        }
    }
    None
}

/// Does kernel `k` read or write buffer `b`?
fn touches(k: &Kernel, b: BufId) -> bool {
    let mut hit = false;
    k.walk(&mut |n| match n {
        Node::LoadIndex { buf, .. } => hit |= *buf == b,
        Node::Compute(c) => hit |= c.write.buf == b || c.reads(b),
        _ => {}
    });
    hit
}

/// `main` with `reset`'s store as the first node of its per-cell body,
/// when `reset` is `main`'s reset kernel over the same cells.
fn fuse(reset: &Kernel, main: &Kernel) -> Option<Kernel> {
    // The store moves as it is: its variables must be `main`'s (a split
    // reduction's kernel has one more, its lane).
    if main.role != KernelRole::Main || !reset.is_role_of(KernelRole::Reset, main) || !main.vars.starts_with(&reset.vars) {
        return None;
    }
    // The same cells: the same chain, except that `main` may keep loops
    // of one iteration that `drop-unused-loops` removed from the reset.
    // A dynamic kernel's chain loops have symbolic bounds: compared as written.
    let (rc, mc) = (Chain::of_dynamic(&reset.body), Chain::of_dynamic(&main.body));
    // A block's `thread` nest must stay the whole of the chain's body (the
    // block-tiled kernel clears its accumulators itself).
    if mc.thread_nest(&main.body).is_some() {
        return None;
    }
    let extra = |v: VarId| mc.loops.iter().zip(&mc.bounds).any(|(l, b)| l.0 == v && l.2 == 1 && !b.1.is_symbolic()) && !rc.bound.contains(&v);
    let main_loops: Vec<_> = mc.loops.iter().zip(&mc.bounds).filter(|(l, _)| !extra(l.0)).map(|(l, b)| (*l, b.clone())).collect();
    let reset_loops: Vec<_> = rc.loops.iter().zip(&rc.bounds).map(|(l, b)| (*l, b.clone())).collect();
    let main_bound: Vec<_> = mc.bound.iter().filter(|v| !extra(**v)).copied().collect();
    if reset_loops != main_loops || rc.bound != main_bound || rc.exprs != mc.exprs {
        return None;
    }
    // The clear, or the clear under a guard (a dynamic reset's `guard 0 <=
    // 0 < %k.0`, what `drop-unused-loops` leaves of a reduction loop that
    // may be empty): it moves with its guard, so the same cells are
    // cleared.
    let node = match rc.rest(&reset.body) {
        [n @ Node::Compute(_)] => n,
        [n @ Node::Guard(g)] if matches!(g.body[..], [Node::Compute(_)]) => n,
        _ => return None,
    };
    let clear = match node {
        Node::Guard(g) => &g.body[0],
        n => n,
    };
    let (Node::Compute(clear), KernelSum { sum, clear: None }) = (clear, main.reduction()?) else { return None };
    if !clear.clears_cell_of(sum) {
        return None;
    }
    let mut fused = main.clone();
    // Code of each, compiled under its dim facts (a run-time variant's).
    fused.multiples = main.multiples.union(&reset.multiples);
    let rest = mc.rest_mut(&mut fused.body);
    match node {
        // The guard says that the loops of the sum's nest run: where it
        // fails the sum adds nothing either, so the sum moves under it
        // too. Code generation then sees a nest that runs whenever the
        // clear does, and keeps the cell in a register across it (LLVM
        // cannot move a store out of loops that may run zero times).
        Node::Guard(g) if guards_its_nest(&g.conds, rest) => {
            let mut g = g.clone();
            g.body.append(rest);
            rest.push(Node::Guard(g));
        }
        _ => rest.insert(0, node.clone()),
    }
    Some(fused)
}

/// `rest` is a perfect nest of loops around its one computation, and each
/// of `conds` is that one of its loops runs (`lo <= lo < hi`), a loop
/// whose bounds use no variable the nest binds: where one fails, the
/// computation does not run at all.
fn guards_its_nest(conds: &[Cond], rest: &[Node]) -> bool {
    let (loops, leaf) = perfect_nest(rest, LoopKind::Reduce);
    let bound = |e: &IExpr| loops.iter().any(|l| e.uses(l.var));
    matches!(leaf, [Node::Compute(_)])
        && conds
            .iter()
            .all(|c| loops.iter().any(|l| !bound(&l.lo) && !bound(&l.hi) && *c == Cond::InRange { e: l.lo.clone(), lo: l.lo.clone(), hi: l.hi.clone() }))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn module(main_loop: &str) -> LoopModule {
        let text = format!(
            "buffer x : i32[4, 300] input\nbuffer s : i32[4] output\n\n\
             kernel @s1_s_reset role(reset, stmt 1) vars(k, d) {{\n  for k in [0, 4) parallel {{\n    %0 = const 0 : i32\n    store s[k] = %0\n  }}\n}}\n\n\
             kernel @s1_s role(main, stmt 1) vars(k, d) {{\n  {main_loop} {{\n    for d in [0, 300) reduce {{\n      %0 = load x[((k * 300) + d)] : i32\n      accumulate s[k] += %0\n    }}\n  }}\n}}\n"
        );
        parse::parse_verified(&text).unwrap_or_else(|e| panic!("{e:?}\n{text}"))
    }

    #[test]
    fn the_reset_becomes_the_first_store_and_results_stay() {
        let m = module("for k in [0, 4) parallel");
        let mut f = m.clone();
        assert_eq!(fuse_module(&mut f), 1);
        verify::verify(&f).unwrap();
        assert_eq!(f.kernels.len(), 1);
        let text = print::module(&f);
        assert!(text.contains("for k in [0, 4) parallel {\n    %0 = const 0 : i32\n    store s[k] = %0\n    for d in [0, 300) reduce {"), "{text}");
        // Both run from an `s` that is not zero: the reset must still happen.
        let run = |m: &LoopModule| {
            let x = crate::tensor::Tensor::new(vec![4, 300], crate::tensor::Data::I32((0..1200).collect())).unwrap();
            let s = crate::tensor::Tensor::new(vec![4], crate::tensor::Data::I32(vec![7; 4])).unwrap();
            let mut b = vec![x, s];
            crate::interp::loops::run(m, 0, &mut b).unwrap();
            b.swap_remove(1)
        };
        assert_eq!(run(&f), run(&m));
    }

    #[test]
    fn other_cells_or_atomic_writes_keep_the_reset() {
        // The main kernel covers fewer cells than the reset.
        assert_eq!(fuse_module(&mut module("for k in [0, 3) parallel")), 0);
        // Several threads add to the cell.
        let mut m = module("for k in [0, 4) parallel");
        m.kernels[1].walk(&mut |_| {});
        if let Node::For(f) = &mut m.kernels[1].body[0] {
            if let Node::For(g) = &mut f.body[0] {
                if let Node::Compute(c) = &mut g.body[0] {
                    c.write.kind = WriteKind::AtomicAccumulate;
                }
            }
        }
        assert_eq!(fuse_module(&mut m), 0);
    }

    #[test]
    fn the_sum_moves_under_the_clears_guard_only_when_it_is_that_the_sum_runs() {
        let module = |hi: &str| {
            let text = format!(
                "dim %k.0\ndim %j.0\nbuffer x : i32[4, {hi}] input\nbuffer s : i32[4] output\n\n\
                 kernel @s1_s_reset role(reset, stmt 1) vars(k, d) {{\n  for k in [0, 4) parallel {{\n    guard 0 <= 0 < %k.0 {{\n      %0 = const 0 : i32\n      store s[k] = %0\n    }}\n  }}\n}}\n\n\
                 kernel @s1_s role(main, stmt 1) vars(k, d) {{\n  for k in [0, 4) parallel {{\n    for d in [0, {hi}) reduce {{\n      %0 = load x[((k * {hi}) + d)] : i32\n      accumulate s[k] += %0\n    }}\n  }}\n}}\n"
            );
            let mut m = parse::parse_verified(&text).unwrap_or_else(|e| panic!("{e:?}\n{text}"));
            assert_eq!(fuse_module(&mut m), 1);
            verify::verify(&m).unwrap();
            print::module(&m)
        };
        // `0 <= 0 < %k.0` is that `for d in [0, %k.0)` runs: one guard.
        let t = module("%k.0");
        assert!(t.contains("store s[k] = %0\n      for d in [0, %k.0) reduce {"), "{t}");
        // Another loop (here one that runs more often): the sum stays out.
        let t = module("(%k.0 + %j.0)");
        assert!(t.contains("store s[k] = %0\n    }\n    for d in [0, (%k.0 + %j.0)) reduce {"), "{t}");
    }
}
