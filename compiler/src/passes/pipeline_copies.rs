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
//! Applies to a `reduce` loop inside a `thread` nest with at least two
//! steps (or a symbolic count not provably below two) whose body is
//! copies (nodes storing only into shared buffers), `sync`, the compute
//! (reading those buffers, writing none of them, no `sync`), `sync`; the
//! copied buffers used nowhere else in the kernel but in other such step
//! loops, and the kernel's shared memory doubled within 48 KiB.
//!
//! A symbolic step count (a dynamic kernel's whole steps, docs/passes.md
//! "Dynamic trips") gets the same pipeline, the steps it may lack guarded
//! by conditions on dims alone (inside `spread` loops; waits and barriers
//! unguarded), and alignment proven under the kernel's dim facts.

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
        let mut step_uses = vec![0; m.buffers.len()];
        step_loop_uses(&body, m, &mut step_uses);
        let mut p = Pipeliner { m, ki, opts, uses, step_uses, doubled: Vec::new(), shared_bytes, notes: Vec::new(), done: 0 };
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
    /// Uses of each buffer inside step loops whose copies write it
    /// ([`step_loop_uses`]), as the kernel was before the pass.
    step_uses: Vec<usize>,
    /// The tiles this pass has doubled in the kernel.
    doubled: Vec<BufId>,
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
        // Constant bounds: the steps written out around a loop of pairs;
        // symbolic ones (dynamic kernels): loops of 0 or 1 trips around it.
        let fixed = match (l.lo.as_const(), l.hi.as_const()) {
            (Some(lo), Some(hi)) => {
                let n = hi.checked_sub(lo).unwrap_or(0);
                if n < 2 {
                    self.notes.push(format!("`{name}` left alone: fewer than 2 steps"));
                    return None;
                }
                Some((lo, hi, n))
            }
            _ if at_most_one_step(&l.lo, &l.hi) => {
                self.notes.push(format!("`{name}` left alone: at most 1 step"));
                return None;
            }
            _ => None,
        };
        if let Some(b) = step.tiles.iter().find(|&&b| self.doubled.contains(&b)) {
            self.notes.push(format!("`{name}` left alone: `{}` is already double-buffered", self.m.buffers[*b].name));
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
            self.doubled.push(b);
        }
        // The copies as they go async (decided once, on the prologue's copy).
        let mut stats = CopyStats::default();
        let mut probe = step.copies.clone();
        if self.opts.async_copies {
            let facts = self.kernel().multiples.clone();
            make_async(&mut probe, self.m, &lens, &facts, &mut stats);
        }
        let any_async = stats.async_runs > 0;
        let shape = Shape { k: l.var, lens, any_async };
        let vars = &mut self.m.kernels[self.ki].vars;
        // Steps `lo + 2p` and `lo + 2p + 1` (buffer 0, then 1), for `p` in
        // [0, pairs): constant buffer offsets (a `k % 2` would cost index
        // arithmetic every step, and LLVM widens it to i64). `k` counts
        // the pairs now.
        let pair_loop = |vars: &mut Vec<Var>, lo: IExpr, pairs: IExpr| {
            let pair = IExpr::add(lo, IExpr::mul(IExpr::c(2), IExpr::v(l.var)));
            let mut body = shape.step(&probe, &step.compute, vars, None, &pair, 0);
            let odd = IExpr::add(pair.clone(), IExpr::c(1));
            body.extend(shape.step(&probe, &step.compute, vars, Some("odd"), &odd, 1));
            vars[l.var].name = unique_var_name(vars, &format!("{name}_pair"));
            Node::For(For { var: l.var, lo: IExpr::c(0), hi: pairs, kind: LoopKind::Reduce, body })
        };
        let mut out;
        if let Some((lo, hi, n)) = fixed {
            // Prologue: step 0's copies into buffer 0.
            out = shape.copies(&probe, vars, "first", &IExpr::c(lo), 0);
            let pairs = (n - 1) / 2;
            if pairs > 0 {
                out.push(pair_loop(vars, IExpr::c(lo), IExpr::c(pairs)));
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
        } else {
            // A symbolic trip `n = hi - lo` (a dynamic kernel's whole
            // steps): the same pipeline, the steps it may not have guarded
            // by conditions on dims alone (the same for every thread).
            // `spread` loops and barriers may not sit under a guard, so a
            // copy's guard goes inside its `spread` loops, and the waits
            // and barriers run unguarded (a group of no copies, a barrier
            // more). Bounds and conditions use no `min`/`max`, which the
            // 32-bit index proof (`Kernel::index32_limits`) cannot bound.
            let (lo, hi) = (l.lo.clone(), l.hi.clone());
            let n = IExpr::fold(IBin::Sub, hi.clone(), lo.clone());
            let at_least = |steps: i64| Cond::InRange { e: IExpr::c(steps - 1), lo: IExpr::c(0), hi: n.clone() };
            // Prologue: step `lo`'s copies into buffer 0, where n >= 1.
            out = shape.copies(&probe, vars, "first", &lo, 0);
            guard_copies(&mut out, &[at_least(1)]);
            // `(n - 1) // 2` pairs (none where n <= 2; `[0, -1)` at n = 0).
            let pairs = IExpr::fold(IBin::FloorDiv, IExpr::fold(IBin::Sub, n.clone(), IExpr::c(1)), IExpr::c(2));
            out.push(pair_loop(vars, lo.clone(), pairs));
            // Step `hi - 2` in buffer 0, copying `hi - 1` into buffer 1,
            // where `n - 1` is odd and n >= 2.
            let odd =
                Cond::InRange { e: IExpr::fold(IBin::Mod, IExpr::fold(IBin::Sub, n.clone(), IExpr::c(1)), IExpr::c(2)), lo: IExpr::c(1), hi: IExpr::c(2) };
            let mut rest = shape.step(&probe, &step.compute, vars, Some("rest"), &IExpr::fold(IBin::Sub, hi.clone(), IExpr::c(2)), 0);
            guard_copies(&mut rest, &[at_least(2), odd]);
            out.extend(rest);
            // The last step, peeled, where n >= 1: in buffer `(n - 1) % 2`.
            out.extend(shape.wait());
            let mut last = fresh_copy(&step.compute, vars, "last");
            substitute(&mut last, l.var, &IExpr::fold(IBin::Sub, hi, IExpr::c(1)));
            select_at(&mut last, &shape.lens, &IExpr::fold(IBin::Mod, IExpr::fold(IBin::Sub, n.clone(), IExpr::c(1)), IExpr::c(2)));
            out.push(Node::Guard(Guard { conds: vec![at_least(1)], body: last }));
        }
        // Before the buffers are reused.
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

    /// Does a node of the kernel outside loop `l` use buffer `b`, other
    /// than another step loop whose copies write it (a dynamic kernel's
    /// short last step, after the whole ones): that loop reads what its
    /// own copies wrote, into buffer 0 of the two, after the pipeline's
    /// closing barrier (or before its prologue, behind its own).
    fn uses_outside(&self, b: BufId, l: &For) -> bool {
        let all = self.uses.get(b).copied().unwrap_or(0);
        all != uses(&l.body, b) && all != self.step_uses.get(b).copied().unwrap_or(0)
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

/// Adds to `out[b]` the uses of each buffer `b` inside the step loops of
/// `nodes` (`reduce` loops of the form [`split_step`] takes) whose copies
/// write `b`.
fn step_loop_uses(nodes: &[Node], m: &LoopModule, out: &mut [usize]) {
    for n in nodes {
        match n {
            Node::For(l) => match (l.kind, split_step(&l.body, m)) {
                (LoopKind::Reduce, Some(step)) => {
                    for &b in &step.tiles {
                        if let Some(o) = out.get_mut(b) {
                            *o += uses(&l.body, b);
                        }
                    }
                }
                _ => step_loop_uses(&l.body, m, out),
            },
            Node::Guard(g) => step_loop_uses(&g.body, m, out),
            Node::LoadIndex { .. } | Node::Compute(_) | Node::Sync | Node::Copies(_) => {}
        }
    }
}

/// Whether `[lo, hi)` provably has at most one step: `[x // c, x //^ c)`
/// (a dynamic kernel's short last step, `block-tiles`), or constant.
fn at_most_one_step(lo: &IExpr, hi: &IExpr) -> bool {
    match (lo, hi) {
        (IExpr::Bin(IBin::FloorDiv, x, c), IExpr::Bin(IBin::CeilDiv, y, d)) => x == y && c == d && c.as_const().is_some_and(|c| c > 0),
        _ => lo.as_const().zip(hi.as_const()).is_some_and(|(lo, hi)| hi.saturating_sub(lo) <= 1),
    }
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
    if sel != 0 {
        select_at(nodes, tiles, &IExpr::c(sel));
    }
}

/// Every node of `nodes` but the waits and barriers under `conds`: a
/// `spread` loop's body (the loop itself may not sit under a guard), any
/// other node whole.
fn guard_copies(nodes: &mut [Node], conds: &[Cond]) {
    for n in nodes.iter_mut() {
        match n {
            Node::Sync | Node::Copies(_) => {}
            Node::For(l) if l.kind == LoopKind::Spread => {
                let body = std::mem::take(&mut l.body);
                l.body = vec![Node::Guard(Guard { conds: conds.to_vec(), body })];
            }
            Node::For(l) if l.body.iter().any(|x| has(x, &|y| matches!(y, Node::For(f) if f.kind == LoopKind::Spread))) => guard_copies(&mut l.body, conds),
            _ => {
                let node = std::mem::replace(n, Node::Sync);
                *n = Node::Guard(Guard { conds: conds.to_vec(), body: vec![node] });
            }
        }
    }
}

/// [`select`] with a buffer `sel` that may be symbolic (0 or 1 wherever
/// it runs): offset `len * sel + offset`.
fn select_at(nodes: &mut [Node], tiles: &[(BufId, i64)], sel: &IExpr) {
    for_each_access_mut(nodes, &mut |buf, off| {
        if let Some(&(_, len)) = tiles.iter().find(|t| t.0 == *buf) {
            *off = IExpr::add(IExpr::fold(IBin::Mul, IExpr::c(len), sel.clone()), off.clone());
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
/// which a wide copy into it must keep aligned); `facts`: the kernel's dim
/// facts (`Kernel::multiples`), which alignment is proven under.
fn make_async(nodes: &mut [Node], m: &LoopModule, lens: &[(BufId, i64)], facts: &Multiples, stats: &mut CopyStats) {
    for n in nodes.iter_mut() {
        match n {
            // A run is the innermost `unroll` loop: an outer one (a
            // thread's block of runs, each under its guard) repeats it.
            Node::For(l) if l.kind == LoopKind::Unroll && !matches!(l.body.as_slice(), [Node::For(_) | Node::Guard(_)]) => match run_verdict(l, m, lens, facts)
            {
                Ok(()) => {
                    if let [Node::Compute(c)] = l.body.as_mut_slice() {
                        c.write.kind = WriteKind::CopyAsync;
                        stats.async_runs += 1;
                    }
                }
                Err(why) => {
                    // A run whose alignment turns on dims it is not
                    // proven under loads one element at a time all the
                    // same: a `cp.async` of 4 or 8 bytes per element.
                    let scalar = match l.body.as_slice() {
                        [Node::Compute(c)] => element_copy(c, m).is_some_and(|(_, src)| src.is_symbolic() && !vector_load(l, src, facts)),
                        _ => false,
                    };
                    match l.body.as_mut_slice() {
                        [Node::Compute(c)] if scalar => {
                            c.write.kind = WriteKind::CopyAsync;
                            stats.async_runs += 1;
                        }
                        _ => stats.sync_reasons.push(why),
                    }
                }
            },
            Node::For(l) => make_async(&mut l.body, m, lens, facts, stats),
            // An edge tile's guarded copy (dynamic bundles) keeps its
            // guard: a thread copies only what it holds.
            Node::Guard(g) => make_async(&mut g.body, m, lens, facts, stats),
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
    (c.write.kind == WriteKind::Store
        && c.write.value == 0
        && !src.role.is_scratch()
        && dst.role == Role::Shared
        && src.dtype == *dtype
        && dst.dtype == *dtype
        && matches!(dtype.size(), 4 | 8))
    .then_some((*buf, offset))
}

/// The bytes of `unroll` run `l` of copy `c`, where they are a `cp.async`
/// size (8 or 16).
fn run_bytes(l: &For, c: &Compute, m: &LoopModule) -> Option<i64> {
    let (lo, hi) = (l.lo.as_const()?, l.hi.as_const()?);
    let bytes = (hi - lo).checked_mul(m.buffers.get(c.write.buf)?.dtype.size() as i64)?;
    matches!(bytes, 8 | 16).then_some(bytes)
}

/// Whether the global side of run `l` (source offset `src`) is one vector
/// load: contiguous, and its first element aligned to the run's bytes
/// under `facts` (code generation's `load_align`).
fn vector_load(l: &For, src: &IExpr, facts: &Multiples) -> bool {
    let (Some(lo), Some(hi)) = (l.lo.as_const(), l.hi.as_const()) else { return false };
    let lanes = hi - lo;
    matches!(lanes, 2 | 4) && src.unit_stride_in(l.var) && src.substitute(l.var, &IExpr::c(lo)).residue_under(lanes, facts) == Some(0)
}

/// Whether an `unroll` run of one copy is one `cp.async` of 8 or 16
/// bytes: contiguous in both offsets and aligned to its size in both
/// (under the kernel's dim facts `facts`).
fn run_verdict(l: &For, m: &LoopModule, lens: &[(BufId, i64)], facts: &Multiples) -> Result<(), String> {
    let [Node::Compute(c)] = l.body.as_slice() else { return Err("a copy run of several nodes".into()) };
    let dst = m.buffers.get(c.write.buf).map_or("?", |b| b.name.as_str());
    let Some((_, src_off)) = element_copy(c, m) else { return Err(format!("`{dst}` is not a plain global load")) };
    let (Some(lo), Some(hi)) = (l.lo.as_const(), l.hi.as_const()) else { return Err(format!("`{dst}`'s run has no constant bounds")) };
    let elem = m.buffers[c.write.buf].dtype.size() as i64;
    let Some(bytes) = run_bytes(l, c, m) else {
        return Err(format!("`{dst}`'s run of {} bytes is no cp.async size", (hi - lo) * elem));
    };
    if !c.write.offset.unit_stride_in(l.var) || !src_off.unit_stride_in(l.var) {
        return Err(format!("`{dst}`'s run is not contiguous in shared memory (a transposed copy keeps its 128-bit load)"));
    }
    let lanes = bytes / elem;
    let aligned = |e: &IExpr| e.substitute(l.var, &IExpr::c(lo)).residue_under(lanes, facts) == Some(0);
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
    use crate::passes::test_kernels::{matmul, run_matmul};

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

    /// The dynamic matmul of `test/passes/dynamic-pipeline-copies.etir`
    /// (f32), with `facts` on its kernel (`""` for none).
    fn dynamic_matmul(facts: &str) -> LoopModule {
        let text = format!(
            "facts(parallelized, loops_shifted, resets_fused)
dim %row.0
dim %k.0
dim %col.0
buffer a : f32[%row.0, %k.0] input
buffer b : f32[%k.0, %col.0] input
buffer c : f32[%row.0, %col.0] output

kernel @s2_c role(main, stmt 2){facts} {{
  for row_0 in [0, %row.0) parallel {{
    for col_0 in [0, %col.0) parallel {{
      guard 0 <= 0 < %k.0 {{
        %0 = const -0.0 : f32
        store c[((row_0 * %col.0) + col_0)] = %0
        for k_0 in [0, %k.0) reduce {{
          %0 = load a[((row_0 * %k.0) + k_0)] : f32
          %1 = load b[((k_0 * %col.0) + col_0)] : f32
          %2 = mul %0, %1 : f32
          accumulate c[((row_0 * %col.0) + col_0)] += %2
        }}
      }}
    }}
  }}
}}
"
        );
        crate::ir::loops::parse::parse_module(&text).unwrap()
    }

    /// `lm` through `passes` (default options).
    fn through(lm: &LoopModule, passes: &[&str]) -> LoopModule {
        let mut unit = Unit::from_source(Source::from_string("mm.etir", ""));
        unit.ir = Ir::Loop(lm.clone());
        let d = DriverOptions::default();
        for pass in passes {
            let info = crate::passes::manager::lookup(pass).unwrap();
            (info.run.run)(&mut unit, pass, &[], &d).unwrap();
        }
        let Ir::Loop(out) = unit.ir else { panic!("not a loop module") };
        out
    }

    /// `c` of the dynamic matmul `lm` at `[row, k, col]`, and the product
    /// computed directly (f32 inputs small integers: every sum exact, in
    /// any order).
    fn run_dynamic(lm: &LoopModule, dims: [i64; 3]) -> (Vec<f32>, Vec<f32>) {
        use crate::tensor::{Data, Tensor};
        let bound = lm.bind_dims(&dims).unwrap();
        let [row, k, col] = dims.map(|d| d as usize);
        let a: Vec<f32> = (0..row * k).map(|i| ((i * 7919) % 13) as f32 - 6.0).collect();
        let b: Vec<f32> = (0..k * col).map(|i| ((i * 104_729) % 11) as f32 - 5.0).collect();
        let want = (0..row * col).map(|rc| (0..k).map(|i| a[rc / col * k + i] * b[i * col + rc % col]).sum()).collect();
        let mut bufs = Vec::new();
        for (i, buf) in bound.buffers.iter().enumerate() {
            let shape: Vec<usize> = buf.dims().unwrap().iter().map(|&d| d as usize).collect();
            bufs.push(match i {
                0 => Tensor::new(shape, Data::F32(a.clone())).unwrap(),
                1 => Tensor::new(shape, Data::F32(b.clone())).unwrap(),
                _ => Tensor::zeros(buf.dtype, &shape).unwrap(),
            });
        }
        crate::interp::loops::run(&bound, 0, &mut bufs).unwrap();
        match bufs.swap_remove(2).data {
            Data::F32(c) => (c, want),
            d => panic!("c is {d:?}"),
        }
    }

    #[test]
    fn symbolic_step_counts_are_double_buffered_and_compute_the_same() {
        for (facts, async_copies) in [("", true), ("", false), (" multiples(%k.0: 4, %col.0: 4)", true)] {
            let tiled = through(&dynamic_matmul(facts), &["register-tiles", "block-tiles"]);
            let (out, stats) = pipelined(&tiled, &PipelineCopiesOptions { stages: 2, async_copies });
            assert!(stats.contains("`k_0_o` double-buffered") && stats.contains("`k_0_o_last` left alone: at most 1 step"), "{stats}");
            let asyncs = count(&out, &|x| matches!(x, Node::Compute(c) if c.write.kind == WriteKind::CopyAsync));
            // The general kernel: `a` and `b` one element each, in 4
            // copies (prologue, pair twice, the odd step); under the facts
            // `b` only (`a` keeps its 128-bit loads).
            let want = match (async_copies, facts.is_empty()) {
                (false, _) => 0,
                (true, true) => 8,
                (true, false) => 4,
            };
            assert_eq!(asyncs, want, "{facts}: {stats}");
            // Whole steps 0 to 6, each with a short last step but the
            // 4th and 6th, edge blocks; under the facts, `k` and `col`
            // multiples of 4.
            for k in [4, 16, 20, 36, 52, 64, 100] {
                for (row, col) in [(5, 8), (66, 4)] {
                    let dims = [row, k + facts.is_empty() as i64 * (k % 3), col];
                    let (got, want) = run_dynamic(&out, dims);
                    assert_eq!(got, want, "{facts} {dims:?}: {stats}");
                }
            }
        }
    }

    #[test]
    fn at_most_one_step_is_proven_for_the_short_last_step_alone() {
        let x = IExpr::Sym(0);
        let fl = IExpr::bin(IBin::FloorDiv, x.clone(), IExpr::c(16));
        let ce = IExpr::bin(IBin::CeilDiv, x.clone(), IExpr::c(16));
        assert!(at_most_one_step(&fl, &ce));
        assert!(!at_most_one_step(&IExpr::c(0), &fl));
        assert!(!at_most_one_step(&fl, &IExpr::bin(IBin::CeilDiv, x, IExpr::c(8))));
        assert!(at_most_one_step(&IExpr::c(3), &IExpr::c(4)) && !at_most_one_step(&IExpr::c(3), &IExpr::c(5)));
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
