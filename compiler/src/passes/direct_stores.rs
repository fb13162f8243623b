//! `direct-stores`: an `=` statement whose main kernel writes each cell at
//! most once needs no reset kernel.
//!
//! `lower-to-loops` gives every `=` statement a reset kernel that stores 0
//! into exactly the cells the statement reaches, followed by the main
//! kernel that accumulates into them (docs/language.md section 3: a cell is
//! reset when `=` first reaches it). When every loop above the main
//! kernel's write is `parallel` and the write is a plain `accumulate`
//! (`parallelize` proved the written offset injective in all of them),
//! each reached cell gets exactly one addition, onto the 0 just stored:
//! that is a `store` of the value, and the reset kernel does nothing the
//! main kernel does not. Copies (tile, slice, gather, space_to_depth, the
//! input generators) then move only their compulsory bytes: one pass over
//! the output instead of two, and no read of it.
//!
//! Left alone: statements with a reduction loop (several additions per
//! cell), atomic writes (several threads per cell), and a main kernel that
//! reads the buffer it writes.

use super::PassError;
use super::{Ir, NoOptions, Unit};
use crate::ir::loops::*;

pub fn run(unit: &mut Unit, _: &NoOptions) -> Result<Option<String>, PassError> {
    let Ir::Loop(m) = &mut unit.ir else { return Err(PassError::Internal("direct-stores runs on the loop level".into())) };
    let fused = fuse_resets(m);
    Ok(Some(format!("{fused} reset kernels removed")))
}

/// Removes each reset kernel whose statement writes every cell once and
/// makes that statement's write a `store`; returns how many went.
pub fn fuse_resets(m: &mut LoopModule) -> usize {
    // Mark, then drop in one sweep: removing each kernel from the vector
    // in turn moved all the later ones (quadratic: 20,000 statements took
    // a second here).
    let mut drop = vec![false; m.kernels.len()];
    for i in 0..m.kernels.len().saturating_sub(1) {
        let (head, tail) = m.kernels.split_at_mut(i + 1);
        let (reset, main) = (&head[i], &mut tail[0]);
        if is_reset_of(reset, main) {
            if let Some(write) = single_write_once(main) {
                write.kind = WriteKind::Store;
                drop[i] = true;
            }
        }
    }
    let mut marks = drop.iter();
    m.kernels.retain(|_| !marks.next().copied().unwrap_or(false));
    drop.iter().filter(|&&d| d).count()
}

/// `reset` is the reset kernel of `main`'s statement, right before it,
/// storing the constant 0 into the buffer `main` writes.
fn is_reset_of(reset: &Kernel, main: &Kernel) -> bool {
    if main.role != KernelRole::Main || !reset.is_role_of(KernelRole::Reset, main) {
        return false;
    }
    let (Some(r), Some(w)) = (only_compute(&reset.body), only_compute(&main.body)) else { return false };
    // The combine's identity (`WriteKind::identity`: a zero for a sum,
    // -inf for a max): one combine onto it gives the value itself.
    let identity = r
        .values
        .get(r.write.value)
        .is_some_and(|v| matches!(v.op, VOp::Const(c) if c.to_bits() == w.write.kind.identity(v.dtype).to_bits() || (w.write.kind.adds() && c == 0.0)));
    r.stores_constant() && identity && r.write.buf == w.write.buf
}

/// The kernel's one write, when every loop above it is `parallel`, it is a
/// plain `accumulate`, and the kernel reads nothing of the buffer it writes.
fn single_write_once(k: &mut Kernel) -> Option<&mut Write> {
    if !all_parallel(&k.body) {
        return None;
    }
    let c = only_compute_mut(&mut k.body)?;
    c.is_plain_reduction().then_some(&mut c.write)
}

fn all_parallel(nodes: &[Node]) -> bool {
    nodes.iter().all(|n| match n {
        Node::For(l) => l.kind == LoopKind::Parallel && all_parallel(&l.body),
        Node::Guard(g) => all_parallel(&g.body),
        Node::LoadIndex { .. } | Node::Compute(_) => true,
        Node::Sync | Node::Copies(_) => false,
    })
}

/// The single `Compute` of a body (none or several: `None`).
fn only_compute(nodes: &[Node]) -> Option<&Compute> {
    let mut found = None;
    let mut count = 0;
    fn go<'a>(nodes: &'a [Node], found: &mut Option<&'a Compute>, count: &mut usize) {
        for n in nodes {
            match n {
                Node::Compute(c) => {
                    *found = Some(c);
                    *count += 1;
                }
                Node::For(l) => go(&l.body, found, count),
                Node::Guard(g) => go(&g.body, found, count),
                Node::LoadIndex { .. } | Node::Sync | Node::Copies(_) => {}
            }
        }
    }
    go(nodes, &mut found, &mut count);
    if count == 1 {
        found
    } else {
        None
    }
}

fn only_compute_mut(nodes: &mut [Node]) -> Option<&mut Compute> {
    only_compute(nodes)?;
    fn go(nodes: &mut [Node]) -> Option<&mut Compute> {
        for n in nodes {
            let found = match n {
                Node::Compute(c) => Some(c),
                Node::For(l) => go(&mut l.body),
                Node::Guard(g) => go(&mut g.body),
                Node::LoadIndex { .. } | Node::Sync | Node::Copies(_) => None,
            };
            if found.is_some() {
                return found;
            }
        }
        None
    }
    go(nodes)
}
