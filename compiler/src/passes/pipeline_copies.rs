//! `pipeline-copies` (GPU): the copy of a block-tiled step overlaps the
//! compute of the step before it (docs/async-copies.md).
//!
//! `block-tiles` leaves each step `for k { COPIES(k); sync; COMPUTE(k);
//! sync }`: the copy's latency is exposed once per step and every step
//! waits at two barriers. Here every shared buffer the copies write gets a
//! leading dim of 2 (step `s = k - lo` in buffer `s % 2`) and the loop
//! becomes a two-stage pipeline:
//!
//! ```text
//! COPIES(lo) -> buffer 0; commit_copies
//! for p in [0, (n - 1) / 2) reduce {            // steps s = 2p and 2p + 1
//!   wait_copies 0; sync                         // step s landed and is visible, step s-1's reads are done
//!   COPIES(lo + 2p + 1) -> buffer 1; commit_copies
//!   COMPUTE(lo + 2p) <- buffer 0
//!   wait_copies 0; sync
//!   COPIES(lo + 2p + 2) -> buffer 0; commit_copies
//!   COMPUTE(lo + 2p + 1) <- buffer 1 }
//! [the same for step n - 2 alone, when n - 1 is odd]
//! wait_copies 0; sync; COMPUTE(hi - 1) <- buffer (n - 1) % 2      // the last step, peeled
//! sync                                                            // before the buffers are reused
//! ```
//!
//! Steps go in pairs so that every buffer offset is a constant (a `k % 2`
//! selector costs index arithmetic each step, which LLVM widened to i64).
//! One barrier per step orders both hazards: passing it, every thread has
//! finished step `k-1`'s reads of the buffer the copy of `k+1` overwrites.
//! The last step is peeled rather than its copy guarded: a `spread` loop
//! may not sit under a guard (every thread must reach it), and a guard
//! would cost a branch per step.
//!
//! On sm_80 and later a copy becomes a `copy_async` (`cp.async`) where a
//! thread's run is one element, or an `unroll` run contiguous and aligned
//! in both offsets of 8 or 16 bytes; a run scattered in shared memory (a
//! transposed copy) stays a synchronous store, which keeps its 128-bit
//! load, into the other buffer all the same. Below sm_80 every copy is
//! synchronous: the same pipeline, one barrier per step instead of two.
//!
//! Applies to a `reduce` loop inside a `thread` nest with constant bounds
//! and at least two steps whose body is copies (nodes storing only into
//! shared buffers), `sync`, the compute (reading those buffers, writing
//! none of them, no `sync`), `sync`; the copied buffers used nowhere else
//! in the kernel, and the kernel's shared memory doubled within 48 KiB.

use super::{DriverOptions, Ir, PassError, PassOptions, Unit};
use crate::ir::loops::verify::MAX_SHARED_BYTES;
use crate::ir::loops::*;

/// What `pipeline-copies` is told: how many copies of each tile
/// (`stages`: 1 leaves kernels alone, 2 double-buffers) and whether copies
/// may be asynchronous (`cp.async`: sm_80 and later).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PipelineCopiesOptions {
    pub stages: u32,
    pub async_copies: bool,
}

/// The compute capability that introduced `cp.async`.
pub const CP_ASYNC_SM: u32 = 80;

impl PassOptions for PipelineCopiesOptions {
    const KEYS: &'static [(&'static str, &'static str)] = &[
        ("stages", "1|2: copies of each shared tile (2: the copy of step k+1 overlaps step k; 1: leave kernels alone)"),
        ("async", "true|false: copies may be cp.async (default: the target is sm_80 or later)"),
    ];
    fn from_driver(d: &DriverOptions) -> Self {
        PipelineCopiesOptions { stages: 2, async_copies: d.gpu.sm >= CP_ASYNC_SM }
    }
    fn set(&mut self, key: &str, value: &str) -> Result<(), String> {
        match key {
            "stages" => {
                self.stages = match value {
                    "1" => 1,
                    "2" => 2,
                    _ => return Err(format!("`stages` takes 1 or 2, not `{value}`")),
                }
            }
            "async" => self.async_copies = value.parse().map_err(|_| format!("`async` takes true or false, not `{value}`"))?,
            _ => return Err(format!("option `{key}` is not declared")),
        }
        Ok(())
    }
}

pub fn run(unit: &mut Unit, opts: &PipelineCopiesOptions) -> Result<Option<String>, PassError> {
    let Ir::Loop(m) = &mut unit.ir else { return Err(PassError::Internal("pipeline-copies runs on the loop level".into())) };
    if opts.stages < 2 {
        return Ok(Some("0 loops pipelined (stages=1)".into()));
    }
    let mut notes = Vec::new();
    let mut pipelined = 0;
    for ki in 0..m.kernels.len() {
        let shared_bytes = m.kernels[ki].scratch_buffers(m).into_iter().filter(|&b| m.buffers[b].role == Role::Shared).map(|b| bytes(&m.buffers[b])).sum();
        let mut body = std::mem::take(&mut m.kernels[ki].body);
        let uses = (0..m.buffers.len()).map(|b| uses(&body, b)).collect();
        let mut p = Pipeliner { m, ki, opts, uses, shared_bytes, notes: Vec::new(), done: 0 };
        p.nodes(&mut body, false);
        let (done, kn) = (p.done, p.notes);
        m.kernels[ki].body = body;
        pipelined += done;
        if !kn.is_empty() {
            notes.push(format!("{}: {}", m.kernels[ki].name, kn.join("; ")));
        }
    }
    let mut s = format!("{pipelined} loops pipelined");
    if !notes.is_empty() {
        s.push_str(&format!(" ({})", notes.join(" | ")));
    }
    Ok(Some(s))
}

struct Pipeliner<'a> {
    m: &'a mut LoopModule,
    ki: usize,
    opts: &'a PipelineCopiesOptions,
    /// Uses of each buffer in the kernel, as it was before the pass.
    uses: Vec<usize>,
    /// The kernel's shared memory so far.
    shared_bytes: i64,
    /// What happened to each candidate loop, for `--stats`.
    notes: Vec<String>,
    done: usize,
}

/// A step loop's body split as `block-tiles` makes it.
struct Step {
    copies: Vec<Node>,
    compute: Vec<Node>,
    /// The shared buffers the copies write.
    tiles: Vec<BufId>,
}

impl Pipeliner<'_> {
    fn nodes(&mut self, nodes: &mut Vec<Node>, in_threads: bool) {
        let mut i = 0;
        while i < nodes.len() {
            let replaced = match &nodes[i] {
                Node::For(l) if in_threads && l.kind == LoopKind::Reduce => self.try_loop(l),
                _ => None,
            };
            match replaced {
                Some(new) => {
                    let n = new.len();
                    nodes.splice(i..=i, new);
                    i += n;
                }
                None => {
                    match &mut nodes[i] {
                        Node::For(l) => {
                            let inside = in_threads || l.kind == LoopKind::Thread;
                            self.nodes(&mut l.body, inside);
                        }
                        // `sync` may not sit under a guard: nothing to find there.
                        Node::Guard(_) | Node::LoadIndex { .. } | Node::Compute(_) | Node::Sync | Node::Copies(_) => {}
                    }
                    i += 1;
                }
            }
        }
    }

    fn kernel(&self) -> &Kernel {
        &self.m.kernels[self.ki]
    }

    /// The pipelined form of step loop `l` (prologue, loop, peeled last
    /// step), or `None` with a note when it does not apply.
    fn try_loop(&mut self, l: &For) -> Option<Vec<Node>> {
        let step = split_step(&l.body, self.m)?;
        let name = self.kernel().vars.get(l.var).map_or("?", |v| v.name.as_str()).to_string();
        let (Some(lo), Some(hi)) = (l.lo.as_const(), l.hi.as_const()) else {
            self.notes.push(format!("`{name}` left alone: its bounds are not constants"));
            return None;
        };
        let n = hi.checked_sub(lo).unwrap_or(0);
        if n < 2 {
            self.notes.push(format!("`{name}` left alone: fewer than 2 steps"));
            return None;
        }
        if let Some(b) = step.tiles.iter().find(|&&b| self.uses_outside(b, l)) {
            self.notes.push(format!("`{name}` left alone: `{}` is used outside it", self.m.buffers[*b].name));
            return None;
        }
        let total = step.tiles.iter().fold(self.shared_bytes, |t, &b| t.saturating_add(bytes(&self.m.buffers[b])));
        if total > MAX_SHARED_BYTES {
            self.notes.push(format!("`{name}` left alone: double buffers would take {total} bytes of shared memory, more than {MAX_SHARED_BYTES}"));
            return None;
        }
        self.shared_bytes = total;
        // Element offsets of the second buffer of each tile.
        let lens: Vec<(BufId, i64)> = step.tiles.iter().map(|&b| (b, self.m.buffers[b].len().unwrap_or(0))).collect();
        for &b in &step.tiles {
            let buf = &mut self.m.buffers[b];
            buf.shape.insert(0, IExpr::c(2));
        }
        // The copies as they go async (decided once, on the prologue's copy).
        let mut stats = CopyStats::default();
        let mut probe = step.copies.clone();
        if self.opts.async_copies {
            make_async(&mut probe, self.m, &lens, &mut stats);
        }
        let any_async = stats.async_runs > 0;
        let shape = Shape { k: l.var, lens, any_async };
        let vars = &mut self.m.kernels[self.ki].vars;
        // Prologue: step 0's copies into buffer 0.
        let mut out = shape.copies(&probe, vars, "first", &IExpr::c(lo), 0);
        // Steps 0 .. n-2 in pairs, buffer 0 then 1: constant buffer
        // offsets (a `k % 2` would cost index arithmetic every step, and
        // LLVM widens it to i64). `k` counts the pairs now.
        let pairs = (n - 1) / 2;
        if pairs > 0 {
            let pair = IExpr::add(IExpr::c(lo), IExpr::mul(IExpr::c(2), IExpr::v(l.var)));
            let mut body = shape.step(&probe, &step.compute, vars, None, &pair, 0);
            let odd = IExpr::add(pair.clone(), IExpr::c(1));
            body.extend(shape.step(&probe, &step.compute, vars, Some("odd"), &odd, 1));
            vars[l.var].name = unique_var_name(vars, &format!("{name}_pair"));
            out.push(Node::For(For { var: l.var, lo: IExpr::c(0), hi: IExpr::c(pairs), kind: LoopKind::Reduce, body }));
        }
        if (n - 1) % 2 == 1 {
            out.extend(shape.step(&probe, &step.compute, vars, Some("rest"), &IExpr::c(hi - 2), 0));
        }
        // The last step, peeled: nothing to copy.
        out.extend(shape.wait());
        let mut last = fresh_copy(&step.compute, vars, "last");
        substitute(&mut last, l.var, &IExpr::c(hi - 1));
        select(&mut last, &shape.lens, (n - 1) % 2);
        out.extend(last);
        out.push(Node::Sync);

        self.done += 1;
        let tiles: Vec<&str> = step.tiles.iter().map(|&b| self.m.buffers[b].name.as_str()).collect();
        let mut note = format!("`{name}` double-buffered ({})", tiles.join(", "));
        if !self.opts.async_copies {
            note.push_str(", copies synchronous (no cp.async below sm_80, or async=false)");
        } else {
            note.push_str(&format!(", {} copies cp.async", stats.async_runs));
            if !stats.sync_reasons.is_empty() {
                note.push_str(&format!(", synchronous: {}", stats.sync_reasons.join(", ")));
            }
        }
        self.notes.push(note);
        Some(out)
    }

    /// Does a node of the kernel outside loop `l` use buffer `b`?
    fn uses_outside(&self, b: BufId, l: &For) -> bool {
        self.uses.get(b).copied().unwrap_or(0) != uses(&l.body, b)
    }

}

/// Bytes of a (static) buffer; a symbolic one counts as too large.
fn bytes(buf: &Buffer) -> i64 {
    buf.len().unwrap_or(i64::MAX).saturating_mul(buf.dtype.size() as i64)
}

/// How a pipelined step is written: the step loop's variable, the tiles (`(buffer, elements per buffer)`), and whether copies
/// went async (then `commit_copies`/`wait_copies` frame them).
struct Shape {
    k: VarId,
    lens: Vec<(BufId, i64)>,
    any_async: bool,
}

impl Shape {
    /// Waiting for a step's copies: its group, then the block.
    fn wait(&self) -> Vec<Node> {
        let mut out = Vec::new();
        if self.any_async {
            out.push(Node::Copies(CopyGroup::Wait { pending: 0 }));
        }
        out.push(Node::Sync);
        out
    }

    /// The copies of step `k := at` into buffer `buf` (fresh variables
    /// with `suffix`), closed into a group.
    fn copies(&self, copies: &[Node], vars: &mut Vec<Var>, suffix: &str, at: &IExpr, buf: i64) -> Vec<Node> {
        let mut out = fresh_copy(copies, vars, suffix);
        substitute(&mut out, self.k, at);
        select(&mut out, &self.lens, buf);
        if self.any_async {
            out.push(Node::Copies(CopyGroup::Commit));
        }
        out
    }

    /// One pipelined step `k := at` reading buffer `buf`: wait, copy step
    /// `at + 1` into the other buffer, compute. `suffix`: fresh variables
    /// for a second copy of the body, `None` to keep the originals.
    fn step(&self, copies: &[Node], compute: &[Node], vars: &mut Vec<Var>, suffix: Option<&str>, at: &IExpr, buf: i64) -> Vec<Node> {
        let mut out = self.wait();
        let next = IExpr::add(at.clone(), IExpr::c(1));
        let (cs, mut body) = match suffix {
            Some(sx) => (self.copies(copies, vars, &format!("{sx}_next"), &next, 1 - buf), fresh_copy(compute, vars, sx)),
            None => {
                let mut cs = copies.to_vec();
                substitute(&mut cs, self.k, &next);
                select(&mut cs, &self.lens, 1 - buf);
                if self.any_async {
                    cs.push(Node::Copies(CopyGroup::Commit));
                }
                (cs, compute.to_vec())
            }
        };
        out.extend(cs);
        substitute(&mut body, self.k, at);
        select(&mut body, &self.lens, buf);
        out.extend(body);
        out
    }
}

/// The copies, compute and copied tiles of a step loop's body `copies;
/// sync; compute; sync`, or `None` when it is not of that form.
fn split_step(body: &[Node], m: &LoopModule) -> Option<Step> {
    let [rest @ .., Node::Sync] = body else { return None };
    let at = rest.iter().position(|n| matches!(n, Node::Sync))?;
    let (copies, compute) = (&rest[..at], &rest[at + 1..]);
    if copies.is_empty() || compute.iter().any(|n| has(n, &|x| matches!(x, Node::Sync | Node::Copies(_)))) {
        return None;
    }
    let mut tiles = Vec::new();
    let mut ok = true;
    for n in copies {
        n.walk(&mut |x| match x {
            Node::Compute(c) if c.write.kind == WriteKind::Store && m.buffers.get(c.write.buf).is_some_and(|b| b.role == Role::Shared) => {
                if !tiles.contains(&c.write.buf) {
                    tiles.push(c.write.buf);
                }
            }
            Node::Compute(_) | Node::Sync | Node::Copies(_) => ok = false,
            Node::For(_) | Node::Guard(_) | Node::LoadIndex { .. } => {}
        });
    }
    // The copies read none of the tiles; the compute writes none.
    for n in copies {
        n.walk(&mut |x| {
            if let Node::Compute(c) = x {
                ok &= !tiles.iter().any(|&t| c.reads(t));
            }
        });
    }
    for n in compute {
        n.walk(&mut |x| {
            if let Node::Compute(c) = x {
                ok &= !tiles.contains(&c.write.buf);
            }
        });
    }
    (ok && !tiles.is_empty()).then(|| Step { copies: copies.to_vec(), compute: compute.to_vec(), tiles })
}

/// How many nodes of `nodes`, at any depth, read or write buffer `b`.
fn uses(nodes: &[Node], b: BufId) -> usize {
    let mut n = 0;
    for x in nodes {
        x.walk(&mut |y| n += y.buffers().iter().filter(|&&y| y == b).count());
    }
    n
}

fn has(n: &Node, p: &dyn Fn(&Node) -> bool) -> bool {
    let mut found = false;
    n.walk(&mut |x| found |= p(x));
    found
}

/// `v` replaced by `by` in every expression of `nodes`.
fn substitute(nodes: &mut [Node], v: VarId, by: &IExpr) {
    for_each_expr_mut(nodes, &mut |e| *e = e.substitute(v, by));
}

/// Every access of a tile (`(buf, len)`) in `nodes` moved into buffer
/// `sel` (0 or 1) of its two: offset `sel * len + offset`.
fn select(nodes: &mut [Node], tiles: &[(BufId, i64)], sel: i64) {
    if sel == 0 {
        return;
    }
    for_each_access_mut(nodes, &mut |buf, off| {
        if let Some(&(_, len)) = tiles.iter().find(|t| t.0 == *buf) {
            *off = IExpr::add(IExpr::c(sel * len), off.clone());
        }
    });
}

/// Which copies went asynchronous, and why the others did not.
#[derive(Default)]
struct CopyStats {
    async_runs: usize,
    sync_reasons: Vec<String>,
}

/// Turns the copies of `nodes` that one `cp.async` per element or per
/// `unroll` run can do into `copy_async` writes (module doc).
/// `lens`: each tile's elements per buffer (the second buffer's offset,
/// which a wide copy into it must keep aligned).
fn make_async(nodes: &mut [Node], m: &LoopModule, lens: &[(BufId, i64)], stats: &mut CopyStats) {
    for n in nodes.iter_mut() {
        match n {
            // A run is the innermost `unroll` loop: an outer one (a
            // thread's block of runs) repeats it.
            Node::For(l) if l.kind == LoopKind::Unroll && !matches!(l.body.as_slice(), [Node::For(_)]) => match run_verdict(l, m, lens) {
                Ok(()) => {
                    if let [Node::Compute(c)] = l.body.as_mut_slice() {
                        c.write.kind = WriteKind::CopyAsync;
                        stats.async_runs += 1;
                    }
                }
                Err(why) => stats.sync_reasons.push(why),
            },
            Node::For(l) => make_async(&mut l.body, m, lens, stats),
            // An edge tile's guarded copy (dynamic bundles) stays a store:
            // its elements are not all there to copy.
            Node::Guard(_) => stats.sync_reasons.push("a guarded copy".into()),
            Node::Compute(c) => match element_copy(c, m) {
                Some(_) => {
                    c.write.kind = WriteKind::CopyAsync;
                    stats.async_runs += 1;
                }
                None => stats.sync_reasons.push(format!("`{}` is not a plain global load", m.buffers[c.write.buf].name)),
            },
            Node::LoadIndex { .. } | Node::Sync | Node::Copies(_) => {}
        }
    }
}

/// The source buffer and offset of a copy that can be one `copy_async`:
/// the compute is one load of a global buffer of the tile's dtype, of a
/// `cp.async` size (4 or 8 bytes).
fn element_copy<'c>(c: &'c Compute, m: &LoopModule) -> Option<(BufId, &'c IExpr)> {
    let [Value { op: VOp::Load { buf, offset }, dtype }] = c.values.as_slice() else { return None };
    let (src, dst) = (m.buffers.get(*buf)?, m.buffers.get(c.write.buf)?);
    (c.write.kind == WriteKind::Store && c.write.value == 0 && !src.role.is_scratch() && dst.role == Role::Shared && src.dtype == *dtype && dst.dtype == *dtype && matches!(dtype.size(), 4 | 8))
        .then_some((*buf, offset))
}

/// Whether an `unroll` run of one copy is one `cp.async` of 8 or 16
/// bytes: contiguous in both offsets and aligned to its size in both.
fn run_verdict(l: &For, m: &LoopModule, lens: &[(BufId, i64)]) -> Result<(), String> {
    let [Node::Compute(c)] = l.body.as_slice() else { return Err("a copy run of several nodes".into()) };
    let dst = m.buffers.get(c.write.buf).map_or("?", |b| b.name.as_str());
    let Some((_, src_off)) = element_copy(c, m) else { return Err(format!("`{dst}` is not a plain global load")) };
    let (Some(lo), Some(hi)) = (l.lo.as_const(), l.hi.as_const()) else { return Err(format!("`{dst}`'s run has no constant bounds")) };
    let elem = m.buffers[c.write.buf].dtype.size() as i64;
    let bytes = (hi - lo) * elem;
    if !matches!(bytes, 8 | 16) {
        return Err(format!("`{dst}`'s run of {bytes} bytes is no cp.async size"));
    }
    if !c.write.offset.unit_stride_in(l.var) || !src_off.unit_stride_in(l.var) {
        return Err(format!("`{dst}`'s run is not contiguous in shared memory (a transposed copy keeps its 128-bit load)"));
    }
    let lanes = bytes / elem;
    let aligned = |e: &IExpr| e.substitute(l.var, &IExpr::c(lo)).residue(lanes) == Some(0);
    let second = lens.iter().find(|t| t.0 == c.write.buf).map_or(0, |t| t.1);
    if !aligned(&c.write.offset) || !aligned(src_off) || second % lanes != 0 {
        return Err(format!("`{dst}`'s run is not {bytes}-byte aligned"));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::driver::Source;
    use crate::passes::test_matmul::{matmul, run_matmul};

    /// The matmul block-tiled (`block-tiles` on the GPU pipeline's earlier
    /// passes), then `pipeline-copies` with `opts`: the module and the stats.
    fn pipelined(lm: &LoopModule, opts: &PipelineCopiesOptions) -> (LoopModule, String) {
        let mut unit = Unit::from_source(Source::from_string("mm.etir", ""));
        unit.ir = Ir::Loop(lm.clone());
        let stats = run(&mut unit, opts).unwrap().unwrap_or_default();
        let Ir::Loop(out) = unit.ir else { panic!("not a loop module") };
        verify::verify(&out).unwrap_or_else(|e| panic!("{stats}: {e:?}"));
        (out, stats)
    }

    fn block_tiled(m: i64, n: i64, k: i64) -> LoopModule {
        let mut lm = matmul(m, n, k);
        let mut unit = Unit::from_source(Source::from_string("mm.etir", ""));
        unit.ir = Ir::Loop(lm.clone());
        let d = DriverOptions::default();
        for pass in ["shift-loops", "register-tiles", "block-tiles"] {
            let info = crate::passes::manager::lookup(pass).unwrap();
            (info.run.run)(&mut unit, pass, &[], &d).unwrap();
        }
        if let Ir::Loop(t) = unit.ir {
            lm = t;
        }
        lm
    }

    fn count(m: &LoopModule, p: &dyn Fn(&Node) -> bool) -> usize {
        let mut n = 0;
        for k in &m.kernels {
            k.walk(&mut |x| n += p(x) as usize);
        }
        n
    }

    #[test]
    fn double_buffered_steps_compute_what_the_single_buffered_ones_do() {
        let (m, n, k) = (64, 64, 64);
        let tiled = block_tiled(m, n, k);
        assert_eq!(count(&tiled, &|x| matches!(x, Node::Sync)), 2, "block-tiles made one step loop");
        let want = run_matmul(&matmul(m, n, k), m, n, k);
        assert_eq!(run_matmul(&tiled, m, n, k), want);
        for async_copies in [true, false] {
            let (out, stats) = pipelined(&tiled, &PipelineCopiesOptions { stages: 2, async_copies });
            assert!(stats.starts_with("1 loops pipelined"), "{stats}");
            // 4 steps of 16: the prologue's copy, a loop over one pair of
            // steps, the third step, the peeled last step and a final
            // barrier. One barrier per step, one after.
            assert_eq!(count(&out, &|x| matches!(x, Node::Sync)), 4 + 1, "{stats}");
            let asyncs = count(&out, &|x| matches!(x, Node::Compute(c) if c.write.kind == WriteKind::CopyAsync));
            let commits = count(&out, &|x| matches!(x, Node::Copies(CopyGroup::Commit)));
            let waits = count(&out, &|x| matches!(x, Node::Copies(CopyGroup::Wait { pending: 0 })));
            // `b`'s copy (rows of 4 contiguous values) of steps 0, 1 + 2 (the pair) and 3.
            assert_eq!((asyncs, commits, waits), if async_copies { (4, 4, 4) } else { (0, 0, 0) }, "{stats}");
            for b in out.buffers.iter().filter(|b| b.role == Role::Shared) {
                assert_eq!(b.shape[0], IExpr::c(2), "{}", b.name);
            }
            // The loop interpreter runs copy_async as a store.
            assert_eq!(run_matmul(&out, m, n, k), want, "{stats}");
        }
    }

    #[test]
    fn single_steps_and_stages_1_are_left_alone() {
        // k = 16: one step of 16.
        let tiled = block_tiled(64, 64, 16);
        let (out, stats) = pipelined(&tiled, &PipelineCopiesOptions { stages: 2, async_copies: true });
        assert_eq!(out, tiled);
        assert!(stats.contains("left alone: fewer than 2 steps"), "{stats}");
        let tiled = block_tiled(64, 64, 64);
        let (out, stats) = pipelined(&tiled, &PipelineCopiesOptions { stages: 1, async_copies: true });
        assert_eq!((out, stats.as_str()), (tiled, "0 loops pipelined (stages=1)"));
    }

    #[test]
    fn tiles_that_would_pass_48_kib_doubled_are_left_alone() {
        let mut tiled = block_tiled(64, 64, 64);
        // A (padded) tile of 25 KiB: within the limit once, not twice.
        let a = tiled.buffers.iter().position(|b| b.role == Role::Shared).unwrap();
        tiled.buffers[a].shape = static_shape(&[16, 400]);
        verify::verify(&tiled).unwrap();
        let (out, stats) = pipelined(&tiled, &PipelineCopiesOptions { stages: 2, async_copies: true });
        assert_eq!(out, tiled);
        assert!(stats.contains("more than 49152"), "{stats}");
    }

    #[test]
    fn options_parse() {
        let mut o = PipelineCopiesOptions::from_driver(&DriverOptions::default());
        assert_eq!(o, PipelineCopiesOptions { stages: 2, async_copies: DriverOptions::default().gpu.sm >= CP_ASYNC_SM });
        o.set("stages", "1").unwrap();
        o.set("async", "false").unwrap();
        assert_eq!(o, PipelineCopiesOptions { stages: 1, async_copies: false });
        assert!(o.set("stages", "3").is_err());
        assert!(o.set("async", "maybe").is_err());
        assert!(o.set("depth", "2").is_err());
    }
}
