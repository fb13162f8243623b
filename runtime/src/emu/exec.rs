//! Running one launch: every block of the grid, one after another; in each
//! block, warps of 32 lanes executing in lockstep.
//!
//! # Reconvergence
//!
//! Each warp keeps a SIMT stack of `(pc, reconvergence pc, mask)` entries
//! (the post-dominator scheme of GPGPU-Sim; `cfg` computes the
//! reconvergence points). The top entry runs. A branch that splits the
//! active lanes turns the top into the join entry at the branch's immediate
//! post-dominator and pushes one entry per side; a side that reaches the
//! join point is popped, so the lanes run together again from there.
//! Exited lanes leave every entry.
//!
//! # Scheduling and barriers
//!
//! A block's warps run round-robin, each until it exits or reaches a
//! barrier. `bar.sync` must be reached by all non-exited lanes of a warp
//! together (it is `.aligned`: executing it in divergent code is undefined
//! in PTX, so it is an error here); once every warp of the block has exited
//! or waits, the barrier completes if all waiting warps wait at the same
//! barrier instruction, and is an error otherwise (threads at different
//! barriers can never all arrive). Memory accesses of different warps are
//! therefore interleaved at barriers only; the race checker
//! ([`super::memory`]) reports every pair of accesses that the program does
//! not order, whatever the interleaving.

use super::arith::{self, mask};
use super::async_copy::{AsyncCopies, MAX_COPY};
use super::inst::{
    Addr, AtomOp, Dst, Kernel, Op, PredSrc, ShflMode, Space, Special, Src, Ty, VoteDst, VoteMode, LOCAL_WINDOW, NO_PC, SHARED_WINDOW, WARP, WINDOW_BYTES,
};
use super::memory::{describe_miss, load, store, Accessor, Conflict, Global, Shadow};
use super::EmuOptions;
use crate::error::{Error, Result};
use crate::fault::{Fault, FaultKind, OtherAccess, RaceKind};
use crate::profile::{sectors, shared_wavefronts, Profile};

mod access;
use access::{Access, Loc};

/// Byte written over shared and local memory before a block runs: reading
/// memory nobody wrote gives NaN floats and -1 integers rather than
/// plausible zeros.
const POISON: u8 = 0xFF;

/// Sector ids a block's list holds before it is deduplicated (8 bytes
/// each: 32 MiB).
const BLOCK_SECTORS_COMPACT: usize = 1 << 22;

/// One launch of a kernel.
pub(crate) struct Launch<'a> {
    pub kernel: &'a Kernel,
    pub grid: [u32; 3],
    pub block: [u32; 3],
    /// One device address per kernel parameter.
    pub args: &'a [u64],
    /// `%gridid`: launches of the run so far.
    pub grid_id: u32,
}

/// Runs `launch` to completion, or to its first fault. `tags` numbers
/// launches and blocks for the race records (see [`Accessor::tag`]);
/// `run_issued` counts the warp instructions of all launches of the run
/// (`EmuOptions::run_instruction_limit`). With `sample`, only that many
/// blocks run ([`sampled_blocks`]) and the profile gets their counts scaled
/// to the whole grid: memory is then not what the kernel would leave.
pub(crate) fn run(
    launch: &Launch<'_>,
    global: &mut Global,
    profile: &mut Profile,
    tags: &mut u32,
    run_issued: &mut u64,
    opts: &EmuOptions,
    sample: Option<u32>,
) -> Result<()> {
    let k = launch.kernel;
    let tpb = launch.block.iter().product::<u32>();
    let blocks: u64 = launch.grid.iter().map(|&g| u64::from(g)).product();
    if blocks * u64::from(tpb) >= u64::from(u32::MAX) {
        return Err(Error::InvalidArgument(format!(
            "launch of `{}`: {} threads are more than the emulator numbers (2^32 - 1)",
            k.name,
            blocks * u64::from(tpb)
        )));
    }
    for (what, dims) in [(".reqntid", k.reqntid), (".maxntid", k.maxntid)] {
        let Some(d) = dims else { continue };
        let bad = if what == ".reqntid" { d != launch.block } else { tpb > d.iter().product::<u32>() };
        if bad {
            return Err(Error::InvalidArgument(format!("launch of `{}` with block {:?}, but the kernel declares {what} {:?}", k.name, launch.block, d)));
        }
    }
    let mut params = vec![0u8; k.param_bytes];
    for (i, ((off, size), arg)) in k.params.iter().zip(launch.args).enumerate() {
        if *size != 8 {
            return Err(Error::BadPtx(format!("parameter {i} of `{}` has {size} bytes; bundle kernels take 64-bit pointers", k.name)));
        }
        store(&mut params, *off, 8, *arg);
    }
    *tags = tags.wrapping_add(1);
    let mut ex = Exec {
        k,
        grid: launch.grid,
        block_dim: launch.block,
        tpb,
        params,
        global,
        profile,
        opts,
        launch_tag: *tags,
        grid_id: launch.grid_id,
        block_lin: 0,
        ctaid: [0; 3],
        shared: vec![POISON; k.shared_bytes],
        shared_shadow: vec![Shadow::default(); k.shared_bytes.div_ceil(4)],
        block_tag: 0,
        epoch: 0,
        issued: 0,
        limit: opts.instruction_limit.min(opts.run_instruction_limit.saturating_sub(*run_issued)),
        global_spans: Vec::with_capacity(WARP),
        shared_spans: Vec::with_capacity(WARP),
        scratch: Vec::with_capacity(4 * WARP),
        block_sectors: Vec::new(),
        // The per-block footprint is for the cost model's sampled
        // profiles: every other run skips its bookkeeping (a sort per block).
        track_block_sectors: sample.is_some(),
        copies: AsyncCopies::default(),
    };
    let nwarps = tpb.div_ceil(WARP as u32);
    let mut warps: Vec<Warp> = (0..nwarps)
        .map(|i| {
            let lanes = (tpb - i * WARP as u32).min(WARP as u32);
            Warp {
                index: i,
                valid: if lanes == 32 { u32::MAX } else { (1u32 << lanes) - 1 },
                exited: 0,
                stack: Vec::new(),
                regs: vec![0; k.regs * WARP],
                preds: vec![0; k.preds],
                local: vec![POISON; k.local_bytes * WARP],
                barrier: None,
                clock: 0,
            }
        })
        .collect();
    // Only a sampled run lists its blocks (a bundle's grid may be far
    // larger than memory would hold as a list); every other run counts
    // through them, stopped by the instruction limits.
    let chosen = sample.map(|_| sampled_blocks(blocks, sample));
    let ran = chosen.as_ref().map_or(blocks, |c| c.len() as u64);
    let before = (ran < blocks).then(|| ex.profile.clone());
    let every = chosen.is_none().then_some(0..blocks as u32);
    let mut result = Ok(());
    for b in chosen.iter().flatten().copied().chain(every.into_iter().flatten()) {
        *tags = tags.wrapping_add(1);
        ex.block_tag = *tags;
        result = ex.run_block(b, &mut warps);
        if ex.track_block_sectors {
            ex.block_sectors.sort_unstable();
            ex.block_sectors.dedup();
            ex.profile.global_block_sectors += ex.block_sectors.len() as u64;
            ex.block_sectors.clear();
        }
        if result.is_err() {
            break;
        }
    }
    if let Some(before) = &before {
        ex.profile.scale_since(before, blocks, ran);
    }
    let p = &mut *ex.profile;
    p.launches += 1;
    p.blocks += blocks;
    p.blocks_run += ran;
    p.threads_per_block = u64::from(tpb);
    p.shared_bytes_per_block = k.shared_bytes as u64;
    *run_issued = run_issued.saturating_add(ex.issued);
    result
}

/// The blocks a launch of `blocks` blocks runs: all of them, or with
/// `Some(n)` (n >= 2) `n` of them spread evenly from the first to the last
/// (which catch both the interior blocks and a partial edge block).
pub(crate) fn sampled_blocks(blocks: u64, sample: Option<u32>) -> Vec<u32> {
    match sample.map(|n| u64::from(n.max(2))) {
        Some(n) if n < blocks => (0..n).map(|i| (i * (blocks - 1) / (n - 1)) as u32).collect(),
        _ => (0..blocks as u32).collect(),
    }
}

/// One entry of a warp's SIMT stack.
#[derive(Clone, Copy, Debug)]
struct Entry {
    pc: u32,
    /// Where this entry's lanes join the entry below; [`NO_PC`] for none.
    rpc: u32,
    mask: u32,
}

struct Warp {
    /// Warp number in the block.
    index: u32,
    /// Lanes that exist (the last warp of a block may be partial).
    valid: u32,
    exited: u32,
    stack: Vec<Entry>,
    /// `regs[r * 32 + lane]`.
    regs: Vec<u64>,
    /// One bit per lane.
    preds: Vec<u32>,
    /// `local[lane * local_bytes + offset]`.
    local: Vec<u8>,
    /// `(barrier number, pc)` while waiting at a barrier.
    barrier: Option<(u32, u32)>,
    /// Instructions issued, for `%clock`.
    clock: u64,
}

impl Warp {
    fn live(&self) -> u32 {
        self.valid & !self.exited
    }

    fn pred(&self, p: PredSrc) -> u32 {
        let v = self.preds[p.idx as usize];
        if p.neg {
            !v
        } else {
            v
        }
    }

    fn set_pred(&mut self, idx: u32, exec: u32, bits: u32) {
        let p = &mut self.preds[idx as usize];
        *p = (*p & !exec) | (bits & exec);
    }

    fn write(&mut self, d: Dst, exec: u32, vals: &[u64; WARP]) {
        let base = d.reg as usize * WARP;
        let regs = &mut self.regs[base..base + WARP];
        if d.sext == 0 {
            if exec == u32::MAX {
                regs.copy_from_slice(vals);
            } else {
                for l in lanes(exec) {
                    regs[l] = vals[l];
                }
            }
        } else {
            let m = mask(u32::from(d.reg_bits));
            for l in lanes(exec) {
                regs[l] = arith::sext(vals[l], u32::from(d.sext)) as u64 & m;
            }
        }
    }
}

/// The set lanes of a mask, lowest first.
fn lanes(mut m: u32) -> impl Iterator<Item = usize> {
    std::iter::from_fn(move || {
        if m == 0 {
            None
        } else {
            let l = m.trailing_zeros() as usize;
            m &= m - 1;
            Some(l)
        }
    })
}

struct Exec<'a> {
    k: &'a Kernel,
    grid: [u32; 3],
    block_dim: [u32; 3],
    /// Threads per block.
    tpb: u32,
    params: Vec<u8>,
    global: &'a mut Global,
    profile: &'a mut Profile,
    opts: &'a EmuOptions,
    launch_tag: u32,
    grid_id: u32,
    block_lin: u32,
    ctaid: [u32; 3],
    shared: Vec<u8>,
    shared_shadow: Vec<Shadow>,
    block_tag: u32,
    /// Barriers the block has completed.
    epoch: u32,
    /// Warp instructions of this launch so far.
    issued: u64,
    /// Warp instructions this launch may issue: `instruction_limit`, or
    /// less when the run's `run_instruction_limit` is nearer.
    limit: u64,
    global_spans: Vec<(u64, u32)>,
    shared_spans: Vec<(u64, u32)>,
    scratch: Vec<u64>,
    /// Global sectors the current block touched so far (sorted and
    /// deduplicated when it ends, or when it grows large), when
    /// `track_block_sectors`.
    block_sectors: Vec<u64>,
    track_block_sectors: bool,
    /// The block's `cp.async` copies in flight.
    copies: AsyncCopies,
}

impl Exec<'_> {
    fn coords(lin: u32, dims: [u32; 3]) -> [u32; 3] {
        [lin % dims[0], (lin / dims[0]) % dims[1], lin / (dims[0] * dims[1])]
    }

    fn fault(&self, w: &Warp, lane: usize, pc: u32, kind: FaultKind) -> Error {
        let lin = w.index * WARP as u32 + lane as u32;
        self.fault_at(lin, pc, kind)
    }

    fn fault_at(&self, thread_in_block: u32, pc: u32, kind: FaultKind) -> Error {
        let pc = (pc as usize).min(self.k.code.len().saturating_sub(1));
        Error::Fault(Box::new(Fault {
            kernel: self.k.name.clone(),
            block: self.ctaid,
            thread: Self::coords(thread_in_block, self.block_dim),
            line: self.k.lines.get(pc).copied().unwrap_or(0),
            instruction: self.k.texts.get(pc).cloned().unwrap_or_default(),
            kind,
        }))
    }

    fn run_block(&mut self, b: u32, warps: &mut [Warp]) -> Result<()> {
        self.block_lin = b;
        self.ctaid = Self::coords(b, self.grid);
        self.epoch = 0;
        self.shared.fill(POISON);
        // Copies a thread never waited for die with its block.
        self.copies.reset(self.tpb as usize, self.shared.len());
        for w in warps.iter_mut() {
            w.exited = 0;
            w.stack.clear();
            w.stack.push(Entry { pc: 0, rpc: NO_PC, mask: w.valid });
            w.regs.fill(0);
            w.preds.fill(0);
            w.local.fill(POISON);
            w.barrier = None;
            w.clock = 0;
        }
        loop {
            for w in warps.iter_mut() {
                if w.barrier.is_none() && !w.stack.is_empty() {
                    self.run_warp(w)?;
                }
            }
            // Every warp has exited or waits at a barrier.
            let mut waiting = warps.iter().filter_map(|w| w.barrier.map(|bar| (w, bar)));
            let Some((first, (id, pc))) = waiting.next() else { return Ok(()) };
            if let Some((other, (id2, pc2))) = waiting.find(|(_, bar)| *bar != (id, pc)) {
                let lane = other.live().trailing_zeros() as usize;
                let msg = format!(
                    "warp {} waits at barrier {id2} (line {}) while warp {} waits at barrier {id} (line {}); neither can complete",
                    other.index, self.k.lines[pc2 as usize], first.index, self.k.lines[pc as usize]
                );
                return Err(self.fault(other, lane, pc2, FaultKind::Barrier(msg)));
            }
            for w in warps.iter_mut() {
                if w.barrier.take().is_some() {
                    if let Some(top) = w.stack.last_mut() {
                        top.pc += 1;
                    }
                }
            }
            self.epoch += 1;
        }
    }

    /// Runs a warp until it exits or waits at a barrier.
    fn run_warp(&mut self, w: &mut Warp) -> Result<()> {
        let code = &self.k.code;
        loop {
            let Some(&top) = w.stack.last() else { return Ok(()) };
            if top.mask == 0 || top.pc == top.rpc {
                w.stack.pop();
                continue;
            }
            let pc = top.pc;
            let Some(inst) = code.get(pc as usize) else {
                // Running off the end of the code ends the threads.
                w.exited |= top.mask;
                for e in w.stack.iter_mut() {
                    e.mask &= !top.mask;
                }
                continue;
            };
            self.issued += 1;
            if self.issued > self.limit {
                let lane = top.mask.trailing_zeros() as usize;
                let kind = if self.limit < self.opts.instruction_limit {
                    FaultKind::RunInstructionLimit(self.opts.run_instruction_limit)
                } else {
                    FaultKind::InstructionLimit(self.opts.instruction_limit)
                };
                return Err(self.fault(w, lane, pc, kind));
            }
            w.clock += 1;
            let exec = match inst.guard {
                Some(g) => top.mask & w.pred(g),
                None => top.mask,
            };
            self.profile.warp_instructions += 1;
            self.profile.thread_instructions += u64::from(exec.count_ones());
            let Some(t) = w.stack.last_mut() else { return Ok(()) };
            match &inst.op {
                Op::Bra { target, rpc } => {
                    let taken = exec;
                    let not_taken = top.mask & !exec;
                    if not_taken == 0 {
                        t.pc = *target;
                    } else if taken == 0 {
                        t.pc += 1;
                    } else {
                        // Divergence: the top becomes the join entry.
                        t.pc = *rpc;
                        if pc + 1 != *rpc {
                            w.stack.push(Entry { pc: pc + 1, rpc: *rpc, mask: not_taken });
                        }
                        if *target != *rpc {
                            w.stack.push(Entry { pc: *target, rpc: *rpc, mask: taken });
                        }
                    }
                }
                Op::Exit => {
                    // Lanes whose guard failed go on; the others leave every entry.
                    if t.mask & !exec != 0 {
                        t.pc += 1;
                    }
                    w.exited |= exec;
                    for e in w.stack.iter_mut() {
                        e.mask &= !exec;
                    }
                }
                Op::Bar { id } => {
                    if exec == 0 {
                        t.pc += 1;
                        continue;
                    }
                    if exec != w.live() {
                        let missing = w.live() & !exec;
                        let lane = exec.trailing_zeros() as usize;
                        let msg = format!(
                            "lanes {} of warp {} reach this barrier, lanes {} of the same warp do not (a barrier in divergent code)",
                            lane_list(exec),
                            w.index,
                            lane_list(missing)
                        );
                        return Err(self.fault(w, lane, pc, FaultKind::Barrier(msg)));
                    }
                    let ids = self.read(w, *id);
                    let first = exec.trailing_zeros() as usize;
                    if let Some(l) = lanes(exec).find(|&l| ids[l] != ids[first]) {
                        let msg = format!("lanes name different barriers ({} and {})", ids[first], ids[l]);
                        return Err(self.fault(w, l, pc, FaultKind::Barrier(msg)));
                    }
                    if ids[first] > 15 {
                        let msg = format!("barrier {} does not exist (0 to 15)", ids[first]);
                        return Err(self.fault(w, first, pc, FaultKind::Barrier(msg)));
                    }
                    // The top entry stays at the barrier until it completes.
                    w.barrier = Some((ids[first] as u32, pc));
                    self.profile.barriers += 1;
                    return Ok(());
                }
                op => {
                    t.pc += 1;
                    self.execute(w, pc, op, exec, top.mask)?;
                }
            }
        }
    }

    /// A source operand for every lane.
    fn read(&self, w: &Warp, s: Src) -> [u64; WARP] {
        match s {
            Src::Reg(r) => {
                let base = r as usize * WARP;
                let mut out = [0u64; WARP];
                out.copy_from_slice(&w.regs[base..base + WARP]);
                out
            }
            Src::Imm(v) => [v; WARP],
            Src::Special(sp) => std::array::from_fn(|lane| self.special(w, sp, lane)),
        }
    }

    fn special(&self, w: &Warp, sp: Special, lane: usize) -> u64 {
        let lin = w.index * WARP as u32 + lane as u32;
        let l = lane as u32;
        u64::from(match sp {
            Special::Tid(a) => Self::coords(lin, self.block_dim)[a as usize],
            Special::Ntid(a) => self.block_dim[a as usize],
            Special::Ctaid(a) => self.ctaid[a as usize],
            Special::Nctaid(a) => self.grid[a as usize],
            Special::LaneId => l,
            Special::WarpId => w.index,
            // The most warps an SM of compute capability 8.0 holds.
            Special::NWarpId => 64,
            Special::LaneMask(c) => {
                let eq = 1u32 << l;
                let lt = eq - 1;
                match c {
                    super::inst::Cmp::Eq => eq,
                    super::inst::Cmp::Lt => lt,
                    super::inst::Cmp::Le => lt | eq,
                    super::inst::Cmp::Ge => !lt,
                    _ => !(lt | eq),
                }
            }
            Special::Clock => return w.clock,
            Special::SmId => 0,
            Special::NSmId => 1,
            Special::GridId => self.grid_id,
        })
    }

    /// Applies `f` to every executing lane and writes `d`.
    fn map1(&self, w: &mut Warp, exec: u32, d: Dst, a: Src, f: impl Fn(u64) -> u64) {
        let a = self.read(w, a);
        let mut out = [0u64; WARP];
        for l in lanes(exec) {
            out[l] = f(a[l]);
        }
        w.write(d, exec, &out);
    }

    fn map2(&self, w: &mut Warp, exec: u32, d: Dst, a: Src, b: Src, f: impl Fn(u64, u64) -> u64) {
        let (a, b) = (self.read(w, a), self.read(w, b));
        let mut out = [0u64; WARP];
        for l in lanes(exec) {
            out[l] = f(a[l], b[l]);
        }
        w.write(d, exec, &out);
    }

    #[allow(clippy::too_many_arguments)]
    fn map3(&self, w: &mut Warp, exec: u32, d: Dst, a: Src, b: Src, c: Src, f: impl Fn(u64, u64, u64) -> u64) {
        let (a, b, c) = (self.read(w, a), self.read(w, b), self.read(w, c));
        let mut out = [0u64; WARP];
        for l in lanes(exec) {
            out[l] = f(a[l], b[l], c[l]);
        }
        w.write(d, exec, &out);
    }

    /// Executes a non-control-flow instruction for the lanes in `exec`;
    /// `active` are the lanes at this instruction, guard aside.
    fn execute(&mut self, w: &mut Warp, pc: u32, op: &Op, exec: u32, active: u32) -> Result<()> {
        let lanes_on = u64::from(exec.count_ones());
        match *op {
            Op::Int { op, k, d, a, b } => {
                let (av, bv) = (self.read(w, a), self.read(w, b));
                let mut out = [0u64; WARP];
                for l in lanes(exec) {
                    out[l] = match arith::int_binary(op, k, av[l], bv[l]) {
                        Some(v) => v,
                        None => return Err(self.fault(w, l, pc, FaultKind::DivisionByZero)),
                    };
                }
                w.write(d, exec, &out);
            }
            Op::IntUn { op, k, d, a } => self.map1(w, exec, d, a, |x| arith::int_unary(op, k, x)),
            Op::Mad { hi, wide, k, d, a, b, c } => self.map3(w, exec, d, a, b, c, |x, y, z| arith::mad(hi, wide, k, x, y, z)),
            Op::Bfe { k, d, a, b, c } => self.map3(w, exec, d, a, b, c, |x, y, z| arith::bfe(k, x, y, z)),
            Op::Shf { left, clamp, d, a, b, c } => self.map3(w, exec, d, a, b, c, |x, y, z| arith::shf(left, clamp, x, y, z)),
            Op::Bfi { bits, d, a, b, c, e } => {
                let (av, bv, cv, ev) = (self.read(w, a), self.read(w, b), self.read(w, c), self.read(w, e));
                let mut out = [0u64; WARP];
                for l in lanes(exec) {
                    out[l] = arith::bfi(bits, av[l], bv[l], cv[l], ev[l]);
                }
                w.write(d, exec, &out);
            }
            Op::Float { op, f64, ftz, sat, d, a, b } => {
                if matches!(op, super::inst::FloatOp::Add | super::inst::FloatOp::Sub | super::inst::FloatOp::Mul) {
                    self.profile.flops += lanes_on;
                }
                self.map2(w, exec, d, a, b, |x, y| arith::float_binary(op, f64, ftz, sat, x, y));
            }
            Op::FloatUn { op, f64, ftz, d, a } => self.map1(w, exec, d, a, |x| arith::float_unary(op, f64, ftz, x)),
            Op::Fma { f64, ftz, sat, d, a, b, c } => {
                self.profile.flops += 2 * lanes_on;
                self.profile.fma += lanes_on;
                self.map3(w, exec, d, a, b, c, |x, y, z| arith::fma(f64, ftz, sat, x, y, z));
            }
            Op::Cvt { to, from, rnd, sat, ftz, d, a } => self.map1(w, exec, d, a, |x| arith::cvt(to, from, rnd, sat, ftz, x)),
            Op::Mov { bits, d, a } => {
                let m = mask(u32::from(bits));
                self.map1(w, exec, d, a, |x| x & m);
            }
            Op::Pack { part_bits, d, ref parts } => {
                let m = mask(u32::from(part_bits));
                let mut out = [0u64; WARP];
                for (i, p) in parts.iter().enumerate() {
                    let v = self.read(w, *p);
                    for l in lanes(exec) {
                        out[l] |= (v[l] & m) << (i as u32 * u32::from(part_bits));
                    }
                }
                w.write(d, exec, &out);
            }
            Op::Unpack { part_bits, ref ds, a } => {
                let m = mask(u32::from(part_bits));
                let v = self.read(w, a);
                for (i, d) in ds.iter().enumerate() {
                    let Some(d) = d else { continue };
                    let out: [u64; WARP] = std::array::from_fn(|l| (v[l] >> (i as u32 * u32::from(part_bits))) & m);
                    w.write(*d, exec, &out);
                }
            }
            Op::Setp { cmp, ty, ftz, p, q, a, b, comb } => {
                let (av, bv) = (self.read(w, a), self.read(w, b));
                let mut t = 0u32;
                for l in lanes(exec) {
                    if arith::compare(cmp, ty, ftz, av[l], bv[l]) {
                        t |= 1 << l;
                    }
                }
                let (pv, qv) = match comb {
                    None => (t, !t),
                    Some((op, c)) => {
                        let c = w.pred(c);
                        let f = |x: u32| match op {
                            super::inst::BoolOp::And => x & c,
                            super::inst::BoolOp::Or => x | c,
                            super::inst::BoolOp::Xor => x ^ c,
                        };
                        (f(t), f(!t))
                    }
                };
                if let Some(p) = p {
                    w.set_pred(p, exec, pv);
                }
                if let Some(q) = q {
                    w.set_pred(q, exec, qv);
                }
            }
            Op::Selp { bits, d, a, b, c } => {
                let m = mask(u32::from(bits));
                let (av, bv, cv) = (self.read(w, a), self.read(w, b), w.pred(c));
                let out: [u64; WARP] = std::array::from_fn(|l| if cv >> l & 1 == 1 { av[l] & m } else { bv[l] & m });
                w.write(d, exec, &out);
            }
            Op::PredMov { d, a } => {
                let v = w.pred(a);
                w.set_pred(d, exec, v);
            }
            Op::PredLogic { op, d, a, b } => {
                let (x, y) = (w.pred(a), w.pred(b));
                let v = match op {
                    super::inst::BoolOp::And => x & y,
                    super::inst::BoolOp::Or => x | y,
                    super::inst::BoolOp::Xor => x ^ y,
                };
                w.set_pred(d, exec, v);
            }
            Op::Cvta { to_generic, space, bits, d, a } => {
                let window = match space {
                    Space::Shared => SHARED_WINDOW,
                    Space::Local => LOCAL_WINDOW,
                    _ => 0,
                };
                let m = mask(u32::from(bits));
                self.map1(w, exec, d, a, |x| if to_generic { x.wrapping_add(window) & m } else { x.wrapping_sub(window) & m });
            }
            Op::Ld { space, size, n, nc, d, addr } => {
                let base = addr.base.map(|r| self.read(w, Src::Reg(r)));
                let total = u32::from(size) * u32::from(n);
                let mut vals = [[0u64; WARP]; 4];
                self.global_spans.clear();
                self.shared_spans.clear();
                for l in lanes(exec) {
                    let at = base.map_or(0, |b| b[l]).wrapping_add(addr.offset as u64);
                    let loc = self.resolve(w, l, pc, space, at, total, Access::Load { nc })?;
                    for (i, v) in vals.iter_mut().enumerate().take(n as usize) {
                        v[l] = self.load_at(w, l, loc.plus(i * size as usize), size as usize);
                    }
                    self.note(loc, at, total);
                }
                for (dst, v) in d.iter().zip(&vals).take(n as usize) {
                    if let Some(dst) = dst {
                        w.write(*dst, exec, v);
                    }
                }
                self.count_requests(true);
            }
            Op::St { space, size, n, v, addr } => {
                let base = addr.base.map(|r| self.read(w, Src::Reg(r)));
                let total = u32::from(size) * u32::from(n);
                let m = mask(u32::from(size) * 8);
                let vals: Vec<[u64; WARP]> = v.iter().take(n as usize).map(|s| self.read(w, *s)).collect();
                self.global_spans.clear();
                self.shared_spans.clear();
                for l in lanes(exec) {
                    let at = base.map_or(0, |b| b[l]).wrapping_add(addr.offset as u64);
                    let mut bytes = [0u8; 32];
                    for (i, v) in vals.iter().enumerate() {
                        let s = i * size as usize;
                        bytes[s..s + size as usize].copy_from_slice(&(v[l] & m).to_le_bytes()[..size as usize]);
                    }
                    let loc = self.resolve(w, l, pc, space, at, total, Access::Store(bytes))?;
                    for (i, v) in vals.iter().enumerate() {
                        self.store_at(w, l, loc.plus(i * size as usize), size as usize, v[l] & m);
                    }
                    self.note(loc, at, total);
                }
                self.count_requests(false);
            }
            Op::Atom { space, op, ty, d, addr, b, c } => {
                let base = addr.base.map(|r| self.read(w, Src::Reg(r)));
                let size = ty.bits() / 8;
                let (bv, cv) = (self.read(w, b), self.read(w, c));
                let mut out = [0u64; WARP];
                // Lanes update one after another, in lane order.
                for l in lanes(exec) {
                    let at = base.map_or(0, |b| b[l]).wrapping_add(addr.offset as u64);
                    let loc = self.resolve(w, l, pc, space, at, size, Access::Atomic)?;
                    // atom.add.f32 flushes subnormals on global memory only.
                    let ftz = matches!(loc, Loc::Global(..)) && ty == Ty::F32 && op == AtomOp::Add;
                    let old = self.load_at(w, l, loc, size as usize);
                    let new = arith::atom(op, ty, ftz, old, bv[l], cv[l]);
                    self.store_at(w, l, loc, size as usize, new);
                    out[l] = old;
                    if matches!(loc, Loc::Global(..)) {
                        self.profile.global_bytes += u64::from(size);
                    }
                }
                if exec != 0 {
                    self.profile.atomic_requests += 1;
                }
                if let Some(d) = d {
                    w.write(d, exec, &out);
                }
            }
            Op::RedV { n, addr, b } => {
                let base = addr.base.map(|r| self.read(w, Src::Reg(r)));
                let vals: Vec<[u64; WARP]> = b[..usize::from(n)].iter().map(|&s| self.read(w, s)).collect();
                let size = 4 * u32::from(n);
                for l in lanes(exec) {
                    let at = base.map_or(0, |b| b[l]).wrapping_add(addr.offset as u64);
                    // One aligned vector: the whole `4 n` bytes are checked
                    // before any element is added.
                    let loc = self.resolve(w, l, pc, Space::Global, at, size, Access::Atomic)?;
                    for (i, v) in vals.iter().enumerate() {
                        let e = loc.plus(4 * i);
                        let old = self.load_at(w, l, e, 4);
                        // As `atom.add.f32` on global memory: subnormals flush.
                        let new = arith::atom(AtomOp::Add, Ty::F32, true, old, v[l], 0);
                        self.store_at(w, l, e, 4, new);
                    }
                    self.profile.global_bytes += u64::from(size);
                }
                if exec != 0 {
                    self.profile.atomic_requests += 1;
                }
            }
            Op::Shfl { mode, d, p, a, b, c, mask: member } => {
                self.check_converged(w, pc, exec, member, "shfl.sync")?;
                let (av, bv, cv) = (self.read(w, a), self.read(w, b), self.read(w, c));
                let mut out = [0u64; WARP];
                let mut pbits = 0u32;
                for l in lanes(exec) {
                    let lane = l as i32;
                    let bval = (bv[l] & 0x1F) as i32;
                    let cval = (cv[l] & 0x1F) as i32;
                    let seg = ((cv[l] >> 8) & 0x1F) as i32;
                    let max_lane = (lane & seg) | (cval & !seg);
                    let min_lane = lane & seg;
                    let (j, ok) = match mode {
                        ShflMode::Up => (lane - bval, lane - bval >= max_lane),
                        ShflMode::Down => (lane + bval, lane + bval <= max_lane),
                        ShflMode::Bfly => (lane ^ bval, (lane ^ bval) <= max_lane),
                        ShflMode::Idx => {
                            let j = min_lane | (bval & !seg);
                            (j, j <= max_lane)
                        }
                    };
                    let src = if ok { j as usize } else { l };
                    out[l] = av[src] & 0xFFFF_FFFF;
                    if ok {
                        pbits |= 1 << l;
                    }
                }
                w.write(d, exec, &out);
                if let Some(p) = p {
                    w.set_pred(p, exec, pbits);
                }
            }
            Op::Vote { mode, d, a, mask: member } => {
                self.check_converged(w, pc, exec, member, "vote.sync")?;
                let members = match member {
                    Some(m) => self.read(w, m)[exec.trailing_zeros() as usize % WARP] as u32 & exec,
                    None => exec,
                };
                let yes = w.pred(a) & members;
                match (mode, d) {
                    (VoteMode::Ballot, VoteDst::Reg(d)) => w.write(d, exec, &[u64::from(yes); WARP]),
                    (_, VoteDst::Pred(p)) => {
                        let v = match mode {
                            VoteMode::All => yes == members,
                            VoteMode::Any => yes != 0,
                            _ => yes == members || yes == 0,
                        };
                        w.set_pred(p, exec, if v { u32::MAX } else { 0 });
                    }
                    _ => {}
                }
            }
            Op::WarpSync { mask: member } => self.check_converged(w, pc, exec, Some(member), "bar.warp.sync")?,
            Op::ActiveMask { d } => w.write(d, exec, &[u64::from(active); WARP]),
            // Fences order nothing in a sequential execution; control flow
            // is run_warp's.
            Op::CpAsync { size, dst, src, src_size } => self.cp_async(w, pc, exec, size, dst, src, src_size)?,
            Op::CpAsyncCommit => {
                for l in lanes(exec) {
                    self.copies.commit(w.index as usize * WARP + l);
                }
            }
            Op::CpAsyncWait { n, all } => {
                for l in lanes(exec) {
                    let t = w.index as usize * WARP + l;
                    if all {
                        self.copies.commit(t);
                    }
                    for c in self.copies.land(t, n) {
                        // A shared store of the issuing thread, now.
                        let mut bytes = [0u8; 32];
                        bytes[..MAX_COPY].copy_from_slice(&c.bytes);
                        let size = u32::from(c.size);
                        self.resolve(w, l, pc, Space::Shared, c.dst as u64, size, Access::Store(bytes))?;
                        self.shared[c.dst..c.dst + size as usize].copy_from_slice(&c.bytes[..size as usize]);
                    }
                }
            }
            Op::Fence | Op::Bra { .. } | Op::Exit | Op::Bar { .. } => {}
        }
        Ok(())
    }

    /// Lanes a warp-synchronous instruction names (its member mask) must
    /// all execute it together.
    fn check_converged(&self, w: &Warp, pc: u32, exec: u32, member: Option<Src>, what: &str) -> Result<()> {
        let Some(m) = member else { return Ok(()) };
        let mv = self.read(w, m);
        for l in lanes(exec) {
            let named = mv[l] as u32 & w.live();
            if named & !exec != 0 {
                let msg = format!("{what} names lanes {} of warp {} that do not execute it with lane {l}", lane_list(named & !exec), w.index);
                return Err(self.fault(w, l, pc, FaultKind::Convergence(msg)));
            }
        }
        Ok(())
    }
}

/// `0-3, 8, 10-31`.
fn lane_list(m: u32) -> String {
    let mut parts = Vec::new();
    let mut l = 0;
    while l < 32 {
        if m >> l & 1 == 1 {
            let start = l;
            while l + 1 < 32 && m >> (l + 1) & 1 == 1 {
                l += 1;
            }
            parts.push(if start == l { start.to_string() } else { format!("{start}-{l}") });
        }
        l += 1;
    }
    parts.join(", ")
}

#[cfg(test)]
mod tests {
    use super::{lane_list, sampled_blocks};

    #[test]
    fn lane_lists() {
        assert_eq!(lane_list(0b1011_0000_1111), "0-3, 8-9, 11");
        assert_eq!(lane_list(u32::MAX), "0-31");
        assert_eq!(lane_list(1 << 31), "31");
    }

    #[test]
    fn samples_spread_from_the_first_block_to_the_last() {
        assert_eq!(sampled_blocks(16, Some(6)), vec![0, 3, 6, 9, 12, 15]);
        assert_eq!(sampled_blocks(1000, Some(2)), vec![0, 999]);
        // At least 2; a grid no larger than the sample runs whole.
        assert_eq!(sampled_blocks(10, Some(1)), vec![0, 9]);
        assert_eq!(sampled_blocks(4, Some(6)), vec![0, 1, 2, 3]);
        assert_eq!(sampled_blocks(3, None), vec![0, 1, 2]);
    }
}
