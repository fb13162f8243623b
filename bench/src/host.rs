//! Host execution: the op JIT-compiled once, then `HostProgram::run`
//! timed alone (compile excluded), against NumPy and TensorFlow on the
//! same inputs in the same run.

use crate::ops::Op;
use crate::peers::{self, Comparison, Job};
use crate::prepare::prepare;
use crate::stats::{time_median, Budget};
use serde::Serialize;
use std::collections::BTreeMap;
use std::path::Path;
use std::time::Instant;

#[derive(Debug, Serialize)]
pub struct HostResult {
    pub op: String,
    pub binds: Vec<String>,
    pub unit: &'static str,
    /// Flops or bytes of one run.
    pub work: f64,
    /// JIT compile time (LLVM lowering, O3, MCJIT), once.
    pub compile_ms: f64,
    pub eintup_ms: f64,
    pub reps: usize,
    /// Peers' results, ratios and rates (in `unit`).
    #[serde(flatten)]
    pub cmp: Comparison,
}

pub struct Setup<'a> {
    pub ops_dir: &'a Path,
    pub work_dir: &'a Path,
    pub python: &'a Path,
    pub peers_script: &'a Path,
    pub budget: Budget,
    /// `--host-fp-contract`: may host code fuse multiply-adds?
    pub fp_contract: eintup_codegen::FpContract,
}

pub fn run(s: &Setup, ops: &[Op]) -> Result<(Vec<HostResult>, BTreeMap<String, String>), String> {
    let mut results = Vec::new();
    let mut jobs = Vec::new();
    for op in ops {
        eprintln!("bench: host {}", op.name);
        let fp_contract = op.fp_contract.unwrap_or(s.fp_contract);
        let mut p = prepare(s.ops_dir, op, true, fp_contract)?;
        let dir = s.work_dir.join(&op.name);
        let inputs = p.write_inputs(&dir)?;
        let out_id = p.output()?;
        let t = Instant::now();
        let mut compile_ms = 0.0;
        let timed = eintup_codegen::with_compiled(&p.loops, 0, fp_contract, |prog| {
            compile_ms = t.elapsed().as_secs_f64() * 1e3;
            time_median(s.budget, || prog.run(&mut p.buffers))
        })
        .and_then(|r| r)
        .map_err(|e| format!("{}: {e}", op.name))?;
        let out = dir.join("eintup_out.npy");
        eintup::tensor::npy::write(&out, &p.buffers[out_id]).map_err(|e| format!("{}: {e}", out.display()))?;
        jobs.push(Job::new(op, inputs, out));
        results.push(HostResult {
            op: op.name.clone(),
            binds: op.binds.clone(),
            unit: op.metric.unit(),
            work: op.work,
            compile_ms,
            eintup_ms: timed.0 * 1e3,
            reps: timed.1,
            cmp: Comparison::new(op.work, timed.0 * 1e3),
        });
    }
    eprintln!("bench: host peers (NumPy, TensorFlow)");
    let b = s.budget;
    let req = peers::Request { device: "cpu", min_reps: b.min_reps, max_reps: b.max_reps, budget_s: b.time.as_secs_f64(), jobs };
    let resp = peers::run(s.python, s.peers_script, s.work_dir, &req)?;
    for r in &mut results {
        r.cmp.add_peers(&resp, &r.op, r.work, r.eintup_ms);
    }
    Ok((results, resp.versions))
}
