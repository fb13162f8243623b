//! The verifier's rules for thread blocks (docs/ir-loop.md, "Thread
//! blocks"): where `thread` and `spread` loops, `sync` and the `shared` and
//! `local` buffers may appear. They are what makes a block-tiled kernel
//! mean the same run sequentially (interpreter, host) and as a GPU block
//! (every thread reaches every barrier; which thread runs a shared
//! iteration does not matter).

use super::super::chain::Chain;
use super::super::*;
use super::VerifyError;
use crate::ir::loops::site::Site;
use crate::ir::text::Spelled;

/// Static shared memory a kernel may use (every GPU since sm_20 has 48
/// KiB without opting in to more): the portable limit of ir/loops/target.rs.
pub const MAX_SHARED_BYTES: i64 = super::super::target::STATIC_SHARED_BYTES;

/// Where a node sits with respect to the kernel's thread nest.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Place {
    /// Not inside a thread nest.
    Outside,
    /// A point of a thread's program every thread of the block reaches
    /// together: `sync` and `spread` may be here.
    Uniform,
    /// Inside a thread's program, but not every thread gets here (a
    /// guard, or a loop whose bounds differ between threads).
    Divergent,
    /// Inside a `spread` loop.
    Spread,
}

struct Blocks<'a> {
    m: &'a LoopModule,
    k: &'a Kernel,
    ki: usize,
    path: Vec<usize>,
    /// Variables whose value may differ between the threads of a block.
    varying: Vec<bool>,
    /// The nest's thread variables.
    thread_var: Vec<bool>,
}

pub(super) fn kernel(m: &LoopModule, ki: usize, k: &Kernel) -> Result<(), VerifyError> {
    let err = |message: String| VerifyError { site: Site::Kernel(ki), message: format!("kernel `@{}`: {message}", k.name) };
    let mut threads = 0;
    k.walk(&mut |n| threads += matches!(n, Node::For(l) if l.kind == LoopKind::Thread) as usize);
    let mut b = Blocks { m, k, ki, path: Vec::new(), varying: vec![false; k.vars.len()], thread_var: vec![false; k.vars.len()] };
    if threads == 0 {
        return b.nodes(&k.body, Place::Outside);
    }
    // A dynamic kernel's blocks sit in a chain of symbolic trips.
    let chain = Chain::of_dynamic(&k.body);
    let Some(nest) = chain.thread_nest(&k.body).filter(|n| n.threads.len() == threads) else {
        return Err(err("`thread` loops must form one perfect nest with constant bounds, directly inside the kernel's parallel chain".into()));
    };
    if nest.size() > MAX_BLOCK_THREADS {
        return Err(err(format!("its `thread` nest has {} threads, more than a block's {MAX_BLOCK_THREADS}", nest.size())));
    }
    let mut shared = 0i64;
    for buf in k.scratch_buffers(m) {
        let bf = &m.buffers[buf];
        if bf.role == Role::Shared {
            // Scratch shapes are static (`buffers` checks it first).
            shared = shared.saturating_add(bf.len().unwrap_or(i64::MAX).saturating_mul(bf.dtype.size() as i64));
        }
    }
    if shared > MAX_SHARED_BYTES {
        return Err(err(format!("its shared buffers take {shared} bytes, more than {MAX_SHARED_BYTES}")));
    }
    for &(v, ..) in &nest.threads {
        b.varying[v] = true;
        b.thread_var[v] = true;
    }
    // Walk the outer nodes (the chain, the thread loops) as `Outside`, the
    // innermost thread loop's body as `Uniform`.
    b.outer(&k.body, nest.body)
}

impl Blocks<'_> {
    fn err(&self, msg: impl std::fmt::Display) -> VerifyError {
        VerifyError { site: Site::Node(self.ki, self.path.clone()), message: format!("kernel `@{}`: {msg}", self.k.name) }
    }

    /// Nodes outside the thread program; `program` is that program's node
    /// list, checked as `Uniform` when reached.
    fn outer(&mut self, ns: &[Node], program: &[Node]) -> Result<(), VerifyError> {
        if std::ptr::eq(ns, program) {
            return self.nodes(ns, Place::Uniform);
        }
        for (i, n) in ns.iter().enumerate() {
            self.path.push(i);
            self.own(n, Place::Outside)?;
            self.outer(n.body(), program)?;
            self.path.pop();
        }
        Ok(())
    }

    fn nodes(&mut self, ns: &[Node], place: Place) -> Result<(), VerifyError> {
        for (i, n) in ns.iter().enumerate() {
            self.path.push(i);
            self.own(n, place)?;
            let inner = match n {
                Node::For(l) => {
                    let bounds_vary = self.varies(&l.lo) || self.varies(&l.hi);
                    match (place, l.kind) {
                        (Place::Uniform, LoopKind::Spread) => {
                            self.varying[l.var] = true;
                            Place::Spread
                        }
                        // Misplaced ones were refused by `own`.
                        (p, LoopKind::Spread | LoopKind::Thread) => p,
                        (Place::Uniform, _) if bounds_vary => {
                            self.varying[l.var] = true;
                            Place::Divergent
                        }
                        (p, _) => {
                            self.varying[l.var] = bounds_vary || p != Place::Uniform && p != Place::Outside;
                            p
                        }
                    }
                }
                Node::Guard(_) if place == Place::Uniform => Place::Divergent,
                Node::LoadIndex { var, offset, .. } => {
                    self.varying[*var] = place != Place::Outside && (place != Place::Uniform || self.varies(offset));
                    place
                }
                _ => place,
            };
            self.nodes(n.body(), inner)?;
            self.path.pop();
        }
        Ok(())
    }

    fn varies(&self, e: &IExpr) -> bool {
        let mut v = false;
        e.for_each_var(&mut |x| v |= self.varying.get(x).copied().unwrap_or(false));
        v
    }

    /// The rules of node `n` itself at `place`.
    fn own(&self, n: &Node, place: Place) -> Result<(), VerifyError> {
        match (n, place) {
            (Node::For(l), _) if l.kind == LoopKind::Thread && place != Place::Outside => {
                Err(self.err("a `thread` loop inside a thread's program (the nest must be perfect)"))
            }
            (Node::For(l), Place::Outside) if l.kind == LoopKind::Spread => Err(self.err("a `spread` loop outside a `thread` nest")),
            (Node::For(l), Place::Divergent | Place::Spread) if l.kind == LoopKind::Spread => Err(self.err(
                "a `spread` loop where not every thread of the block gets (under a guard, a `spread` loop, or a loop whose bounds differ between threads)",
            )),
            (Node::Sync, Place::Outside) => Err(self.err("`sync` outside a `thread` nest")),
            (Node::Sync, Place::Divergent | Place::Spread) => {
                Err(self.err("`sync` where not every thread of the block gets (under a guard, a `spread` loop, or a loop whose bounds differ between threads)"))
            }
            // Copy groups are per thread: any place inside the nest will do.
            (Node::Copies(_), Place::Outside) => Err(self.err("`commit_copies`/`wait_copies` outside a `thread` nest")),
            _ => {
                for e in n.own_exprs() {
                    let mut thread = false;
                    e.for_each_var(&mut |x| thread |= self.thread_var.get(x).copied().unwrap_or(false));
                    if thread && place == Place::Spread {
                        return Err(self.err("a `spread` loop's body uses a thread variable (which thread runs an iteration must not matter)"));
                    }
                }
                for buf in n.buffers() {
                    let Some(b) = self.m.buffers.get(buf) else { continue };
                    match (b.role, place) {
                        (Role::Shared | Role::Local, Place::Outside) => {
                            return Err(self.err(format_args!("{} buffer `{}` used outside a `thread` nest", b.role.spelling(), b.name)))
                        }
                        (Role::Local, Place::Spread) => {
                            return Err(self.err(format_args!("local buffer `{}` used in a `spread` loop (a thread's own copy)", b.name)))
                        }
                        _ => {}
                    }
                }
                match n {
                    Node::Compute(c) if c.write.kind == WriteKind::CopyAsync => self.copy_async(c, place),
                    _ => Ok(()),
                }
            }
        }
    }
}

impl Blocks<'_> {
    /// A `copy_async` (docs/async-copies.md): inside a `thread` nest, the
    /// compute one load of a global buffer, the write into a shared buffer
    /// of the same dtype, so that it is a `cp.async` from global to shared
    /// memory and nothing else.
    fn copy_async(&self, c: &Compute, place: Place) -> Result<(), VerifyError> {
        if place == Place::Outside {
            return Err(self.err("`copy_async` outside a `thread` nest"));
        }
        let dst = self.m.buffers.get(c.write.buf);
        let src = match c.values.as_slice() {
            [Value { op: VOp::Load { buf, .. }, .. }] if c.write.value == 0 => self.m.buffers.get(*buf),
            _ => return Err(self.err("`copy_async` writes the compute's only value, a `load`")),
        };
        match (src, dst) {
            (Some(s), Some(d)) if !s.role.is_scratch() && d.role == Role::Shared && s.dtype == d.dtype => Ok(()),
            (Some(s), Some(d)) => Err(self.err(format_args!(
                "`copy_async` from {} {} buffer `{}` into {} {} buffer `{}` (only global into shared memory of one dtype)",
                s.role.spelling(),
                s.dtype.name(),
                s.name,
                d.role.spelling(),
                d.dtype.name(),
                d.name
            ))),
            // Unknown ids are the main verifier's to report.
            _ => Ok(()),
        }
    }
}

/// Each shared or local buffer belongs to one kernel: its contents do not
/// outlive a block, so two kernels cannot communicate through it.
pub(super) fn scratch_owners(m: &LoopModule) -> Result<(), VerifyError> {
    let mut owner: Vec<Option<usize>> = vec![None; m.buffers.len()];
    for (ki, k) in m.kernels.iter().enumerate() {
        for b in k.scratch_buffers(m) {
            if let Some(first) = owner[b].replace(ki) {
                return Err(VerifyError {
                    site: Site::Buffer(b),
                    message: format!(
                        "{} buffer `{}` is used by kernels `@{}` and `@{}` (scratch belongs to one kernel)",
                        m.buffers[b].role.spelling(),
                        m.buffers[b].name,
                        m.kernels[first].name,
                        k.name
                    ),
                });
            }
        }
    }
    Ok(())
}
