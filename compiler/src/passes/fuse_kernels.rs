//! `fuse-kernels` (GPU): consecutive kernels over the same cells become
//! one kernel, each thread running the first's body and then the second's.
//!
//! A chain of element-wise statements (`b = f(a)`, `c = g(b)`, ..., or
//! `meshgrid`'s independent outputs) lowers to one kernel per statement:
//! one launch each, and each consumer reading back from global memory what
//! its producer just stored. When two neighbouring kernels have the same
//! parallel chain (the same loops with the same bounds, no guard or index
//! load on it) the second's per-cell body can follow the first's in the
//! same thread:
//!
//! ```text
//! kernel @s1_b: for i in [0, 64) parallel { %0 = load a[i] .. store b[i] = .. }
//! kernel @s2_c: for i in [0, 64) parallel { %0 = load b[i] .. store c[i] = .. }
//! ```
//!
//! becomes
//!
//! ```text
//! kernel @s1_b: for i in [0, 64) parallel { %0 = load a[i] .. store b[i] = ..
//!                                           %0 = load b[i] .. store c[i] = .. }
//! ```
//!
//! It is exact when no thread can see another thread's work in a way the
//! two launches did not allow: the second kernel writes nothing the first
//! reads or writes, and reads what the first writes only at the cell the
//! same thread wrote (the first kernel's one write of that buffer, a plain
//! store or accumulate at an offset of the chain's variables, which
//! `parallelize` proved injective: no other thread writes it). Kernels
//! with threads of a block (`block-tiles`) or barriers are left alone: it
//! runs after the passes that tile a kernel by its single computation,
//! which a fused body would hide from them. GPU only: the host's passes
//! want one computation per kernel.
//!
//! A fused kernel takes at most [`MAX_BUFFERS`] buffers (each a kernel
//! parameter). It keeps the first kernel's name, role and statement (its
//! work is both bodies'), and takes the second kernel's variables as new
//! ones (its chain variables become the first's).

use super::{Ir, NoOptions, PassError, Unit};
use crate::ir::loops::chain::Chain;
use crate::ir::loops::walk::{rename_vars, unique_var_name};
use crate::ir::loops::*;
use std::collections::BTreeSet;

pub fn run(unit: &mut Unit, _: &NoOptions) -> Result<Option<String>, PassError> {
    let Ir::Loop(m) = &mut unit.ir else { return Err(PassError::Internal("fuse-kernels runs on the loop level".into())) };
    let before = m.kernels.len();
    let fused = fuse_module(m);
    Ok(Some(format!("{fused} kernels fused into their predecessor ({before} -> {})", m.kernels.len())))
}

/// The most buffers a fused kernel may take: each is a kernel parameter,
/// and PTX before ISA 8.1 allows 4,352 bytes of them (544 pointers); dim
/// symbols take parameters too.
pub const MAX_BUFFERS: usize = 256;

/// Fuses every kernel that qualifies into the kernel before it (which may
/// itself be a fusion); returns how many were fused.
pub fn fuse_module(m: &mut LoopModule) -> usize {
    // Built into a new vector: removing kernels one by one would move all
    // the later ones each time (quadratic on long programs).
    let mut out: Vec<Kernel> = Vec::with_capacity(m.kernels.len());
    let mut n = 0;
    for k in std::mem::take(&mut m.kernels) {
        if let Some(f) = out.last().and_then(|p| fuse(p, &k)) {
            *out.last_mut().expect("checked above") = f;
            n += 1;
        } else {
            out.push(k);
        }
    }
    m.kernels = out;
    n
}

/// A chain with loops only (no guard or index load between them), and the
/// per-cell body after it, free of block threads and barriers.
fn plain_chain(k: &Kernel) -> Option<Chain> {
    let c = Chain::of_dynamic(&k.body);
    let only_loops = !c.loops.is_empty() && c.exprs.is_empty() && c.bound.len() == c.loops.len();
    let mut plain = true;
    for n in c.rest(&k.body) {
        n.walk(&mut |n| plain &= !matches!(n, Node::Sync | Node::For(For { kind: LoopKind::Thread, .. })));
    }
    (only_loops && plain).then_some(c)
}

/// Buffers written, and per buffer read, the offsets it is read at, in
/// `nodes`.
fn accesses(nodes: &[Node]) -> (Vec<(BufId, &IExpr, WriteKind)>, Vec<(BufId, &IExpr)>) {
    let (mut writes, mut reads) = (Vec::new(), Vec::new());
    for n in nodes {
        n.walk(&mut |n| match n {
            Node::LoadIndex { buf, offset, .. } => reads.push((*buf, offset)),
            Node::Compute(c) => {
                for v in &c.values {
                    if let VOp::Load { buf, offset } = &v.op {
                        reads.push((*buf, offset));
                    }
                }
                writes.push((c.write.buf, &c.write.offset, c.write.kind));
            }
            _ => {}
        });
    }
    (writes, reads)
}

/// `p` followed, per cell, by `c`'s body, when that is exact (module doc).
fn fuse(p: &Kernel, c: &Kernel) -> Option<Kernel> {
    let (pc, cc) = (plain_chain(p)?, plain_chain(c)?);
    if pc.loops.len() != cc.loops.len() {
        return None;
    }
    // `c`'s variables after `p`'s; its chain variables become `p`'s.
    let base = p.vars.len();
    let chain_of_c = |v: VarId| cc.loops.iter().position(|l| l.0 == v);
    let rename = |v: VarId| match chain_of_c(v) {
        Some(k) => pc.loops[k].0,
        None => base + v,
    };
    // The same cells: the same bounds, once renamed.
    let same = pc.bounds.iter().zip(&cc.bounds).all(|((plo, phi), (clo, chi))| *plo == clo.rename_vars(&rename) && *phi == chi.rename_vars(&rename));
    if !same {
        return None;
    }
    let mut body = cc.rest(&c.body).to_vec();
    rename_vars(&mut body, &rename);
    let prest = pc.rest(&p.body);
    let (pw, pr) = accesses(prest);
    let (cw, cr) = accesses(&body);
    let chain_vars: Vec<VarId> = pc.loops.iter().map(|l| l.0).collect();
    // `c` writes nothing `p` reads or writes.
    if cw.iter().any(|(b, ..)| pr.iter().any(|(x, _)| x == b) || pw.iter().any(|(x, ..)| x == b)) {
        return None;
    }
    // `c` reads what `p` writes only at the one cell this thread wrote.
    for (b, off) in &cr {
        let written: Vec<_> = pw.iter().filter(|(x, ..)| x == b).collect();
        match written.as_slice() {
            [] => {}
            [(_, w, kind)] => {
                let own_cell = matches!(kind, WriteKind::Store | WriteKind::Accumulate) && *w == *off && {
                    let mut ok = true;
                    w.for_each_var(&mut |v| ok &= chain_vars.contains(&v));
                    ok
                };
                if !own_cell {
                    return None;
                }
            }
            _ => return None,
        }
    }
    let buffers: BTreeSet<BufId> = p.buffers().into_iter().chain(c.buffers()).collect();
    if buffers.len() > MAX_BUFFERS {
        return None;
    }
    let mut fused = p.clone();
    // Code of each, compiled under its dim facts (a run-time variant's).
    fused.multiples = p.multiples.union(&c.multiples);
    for v in &c.vars {
        let name = unique_var_name(&fused.vars, &v.name);
        fused.vars.push(Var { name });
    }
    pc.rest_mut(&mut fused.body).extend(body);
    Some(fused)
}

#[cfg(test)]
mod tests {
    use super::*;

    const CHAIN: &str = "buffer a : i32[4, 5] input\nbuffer b : i32[4, 5] temp\nbuffer c : i32[4, 5] output\n\n\
        kernel @s1_b role(main, stmt 1) vars(i, j) {\n  for i in [0, 4) parallel {\n    for j in [0, 5) parallel {\n      %0 = load a[((i * 5) + j)] : i32\n      %1 = const 3 : i32\n      %2 = mul %0, %1 : i32\n      store b[((i * 5) + j)] = %2\n    }\n  }\n}\n\n\
        kernel @s2_c role(main, stmt 2) vars(x, y) {\n  for x in [0, 4) parallel {\n    for y in [0, 5) parallel {\n      %0 = load b[((x * 5) + y)] : i32\n      %1 = load a[((x * 5) + y)] : i32\n      %2 = add %0, %1 : i32\n      store c[((x * 5) + y)] = %2\n    }\n  }\n}\n";

    fn run(m: &LoopModule) -> Vec<crate::tensor::Tensor> {
        let a = crate::tensor::Tensor::new(vec![4, 5], crate::tensor::Data::I32((0..20).collect())).unwrap();
        let z = || crate::tensor::Tensor::new(vec![4, 5], crate::tensor::Data::I32(vec![0; 20])).unwrap();
        let mut b = vec![a, z(), z()];
        crate::interp::loops::run(m, 0, &mut b).unwrap();
        b
    }

    #[test]
    fn a_consumer_of_the_same_cells_joins_its_producer() {
        let m = parse::parse_verified(CHAIN).unwrap();
        let mut f = m.clone();
        assert_eq!(fuse_module(&mut f), 1);
        verify::verify(&f).unwrap();
        assert_eq!(f.kernels.len(), 1);
        let text = print::module(&f);
        assert!(text.contains("store b[((i * 5) + j)] = %2\n      %0 = load b[((i * 5) + j)] : i32"), "{text}");
        assert_eq!(run(&f)[2].data, run(&m)[2].data);
    }

    #[test]
    fn other_cells_other_bounds_and_write_after_read_stay_apart() {
        // The consumer reads a neighbour's cell.
        let shifted = CHAIN.replace("load b[((x * 5) + y)]", "load b[((((x + 1) % 4) * 5) + y)]");
        assert_eq!(fuse_module(&mut parse::parse_verified(&shifted).unwrap()), 0);
        // Other bounds.
        let fewer = CHAIN.replace("for y in [0, 5) parallel", "for y in [0, 4) parallel");
        assert_eq!(fuse_module(&mut parse::parse_verified(&fewer).unwrap()), 0);
        // The consumer writes what the producer reads.
        let overwrite = CHAIN.replace("store c[((x * 5) + y)]", "store a[((x * 5) + y)]").replace("buffer a : i32[4, 5] input", "buffer a : i32[4, 5] output");
        assert_eq!(fuse_module(&mut parse::parse_verified(&overwrite).unwrap()), 0);
        // An atomic producer: other threads add to the cell too.
        let atomic = CHAIN.replace("store b[((i * 5) + j)] = %2", "atomic_accumulate b[((i * 5) + j)] += %2");
        assert_eq!(fuse_module(&mut parse::parse_verified(&atomic).unwrap()), 0);
    }
}
