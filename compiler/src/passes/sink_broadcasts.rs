//! `sink-broadcasts` (GPU): a copy that sends each value it loads to many
//! cells (a broadcast: `tile`, a bias repeated over a batch) runs the
//! loops it repeats along inside each thread, so each thread loads its
//! value once and stores it to every cell it goes to.
//!
//! One thread per cell of `y[rep*DIMS(e)+e] = x[e]` reads `x[e]` once per
//! repetition: the loads move `reps` times the bytes of `x` (1.78x the
//! compulsory bytes of a 4 x 2 tile in the emulator's count). Here a
//! parallel chain loop that no load, index load or chain guard depends on
//! leaves the chain and becomes a loop around the thread's computation:
//!
//! ```text
//! for rep in [0, R) parallel { for e in [0, E) parallel { %0 = load x[e]; store y[rep*E + e] = %0 } }
//! ```
//!
//! becomes
//!
//! ```text
//! for e in [0, E) parallel { for rep in [0, R) unroll { %0 = load x[e]; store y[rep*E + e] = %0 } }
//! ```
//!
//! and LLVM loads `x[e]` once (it is invariant in `rep`; buffers do not
//! alias). Every cell is still written once, by one thread, with the same
//! value. The loops move from the outermost inwards while the chain keeps
//! at least `min_threads` threads (`GpuTarget`, ir/loops/target.rs, as
//! for `register-tiles`), never the innermost chain loop (the
//! one consecutive threads step along, which keeps the stores coalesced).
//! They become `unroll` loops when their trips multiply to at most
//! [`MAX_UNROLL`], sequential `reduce` loops otherwise. Applies to kernels
//! with no loop below the chain (copies and elementwise kernels) that load
//! something.

use super::{DriverOptions, Ir, PassError, PassOptions, Unit};
use crate::ir::loops::chain::Chain;
use crate::ir::loops::target::GpuTarget;
use crate::ir::loops::*;

/// What `sink-broadcasts` is told: the GPU (`--target`); no pass option.
#[derive(Clone, Debug)]
pub struct SinkBroadcastsOptions {
    pub gpu: GpuTarget,
}

impl PassOptions for SinkBroadcastsOptions {
    const KEYS: &'static [(&'static str, &'static str)] = &[];
    fn from_driver(d: &DriverOptions) -> Self {
        SinkBroadcastsOptions { gpu: d.gpu }
    }
    fn set(&mut self, key: &str, _: &str) -> Result<(), String> {
        Err(format!("option `{key}` is not declared"))
    }
}

pub fn run(unit: &mut Unit, opts: &SinkBroadcastsOptions) -> Result<Option<String>, PassError> {
    let Ir::Loop(m) = &mut unit.ir else { return Err(PassError::Internal("sink-broadcasts runs on the loop level".into())) };
    let mut sunk = Vec::new();
    for k in &mut m.kernels {
        if let Some((names, t)) = sink_kernel(k, &opts.gpu) {
            sunk.push(format!("{} {}", k.name, names.join(",")));
            *k = t;
        }
    }
    Ok(Some(if sunk.is_empty() { "0 kernels changed".to_string() } else { format!("{} kernels changed ({})", sunk.len(), sunk.join("; ")) }))
}

/// The kernel with its broadcast loops inside the thread, and their names,
/// when `k` qualifies (see the module doc).
pub fn sink_kernel(k: &Kernel, gpu: &GpuTarget) -> Option<(Vec<String>, Kernel)> {
    let chain = Chain::of(&k.body);
    if chain.thread_nest(&k.body).is_some() {
        return None;
    }
    let rest = chain.rest(&k.body);
    let mut loops_below = false;
    let mut loads: Vec<IExpr> = Vec::new();
    for n in rest {
        n.walk(&mut |n| match n {
            Node::For(_) => loops_below = true,
            Node::LoadIndex { offset, .. } => loads.push(offset.clone()),
            Node::Compute(c) => loads.extend(c.values.iter().filter_map(|v| if let VOp::Load { offset, .. } = &v.op { Some(offset.clone()) } else { None })),
            _ => {}
        });
    }
    if loops_below || loads.is_empty() {
        return None;
    }
    // Broadcast loops, outermost first; never the innermost chain loop.
    let (_, outer) = chain.loops.split_last()?;
    let mut cells = chain.cells();
    let mut moved: Vec<(VarId, i64, i64)> = Vec::new();
    for &(v, lo, trip) in outer {
        let repeats = !loads.iter().any(|o| o.depends_on(v)) && !chain.exprs.iter().any(|e| e.uses(v)) && !rest_guards_use(rest, v);
        if repeats && trip > 0 && cells / trip >= gpu.min_threads {
            moved.push((v, lo, trip));
            cells /= trip;
        }
    }
    if moved.is_empty() {
        return None;
    }
    let mut t = k.clone();
    for &(v, ..) in &moved {
        Chain::of(&t.body).remove_loop(&mut t.body, v);
    }
    let kind = if moved.iter().map(|m| m.2).product::<i64>() <= MAX_UNROLL { LoopKind::Unroll } else { LoopKind::Reduce };
    let chain = Chain::of(&t.body);
    let body = std::mem::take(chain.rest_mut(&mut t.body));
    let nest = moved.iter().rev().fold(body, |body, &(var, lo, trip)| vec![Node::For(For { var, lo: IExpr::c(lo), hi: IExpr::c(lo + trip), kind, body })]);
    *chain.rest_mut(&mut t.body) = nest;
    let names = moved.iter().map(|m| k.vars[m.0].name.clone()).collect();
    Some((names, t))
}

/// Does a guard among `nodes` (at any depth) use `v`? Such a guard would
/// then be evaluated inside the moved loop, which is correct, but it
/// decides per repetition what the loads are: not a pure broadcast.
fn rest_guards_use(nodes: &[Node], v: VarId) -> bool {
    let mut used = false;
    for n in nodes {
        n.walk(&mut |n| {
            if let Node::Guard(g) = n {
                used |= g.conds.iter().flat_map(|c| c.exprs()).any(|e| e.uses(v));
            }
        });
    }
    used
}
