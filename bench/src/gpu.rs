//! GPU execution: each op built into a PTX bundle for the device found,
//! timed with CUDA events (`Device::run_timed`: median of many runs after
//! warm-up), against PyTorch on the same inputs and against a
//! device-to-device copy measured in the same run. Without a CUDA driver
//! or device the section records why it was skipped.

use crate::host::Setup;
use crate::ops::{Metric, Op};
use crate::peers::{self, Comparison, Job};
use crate::prepare::prepare;
use eintup_codegen::bundle::{build, BuildOptions};
use serde::Serialize;
use std::collections::BTreeMap;

#[derive(Debug, Serialize)]
#[serde(untagged)]
pub enum GpuSection {
    Skipped {
        skipped: String,
    },
    Ran {
        device: String,
        copy_gbps: f64,
        results: Vec<GpuResult>,
        /// Ops that could not be built or run, with why; the others still ran.
        failed: BTreeMap<String, String>,
        versions: BTreeMap<String, String>,
    },
}

#[derive(Debug, Serialize)]
pub struct GpuResult {
    pub op: String,
    pub binds: Vec<String>,
    pub unit: &'static str,
    pub work: f64,
    /// Median of the whole bundle (every launch, resets included).
    pub eintup_ms: f64,
    /// Median of each launch, by kernel.
    pub launches_ms: Vec<(String, f64)>,
    /// Memory-bound ops: eintup's GB/s over the copy's.
    pub fraction_of_copy: Option<f64>,
    /// Peers' results, ratios and rates (in `unit`).
    #[serde(flatten)]
    pub cmp: Comparison,
}

/// Bytes of the copy baseline: large enough to leave every cache.
const COPY_BYTES: usize = 1 << 30;

pub fn run(s: &Setup, ops: &[Op], warmup: usize, reps: usize) -> GpuSection {
    let dev = match eintup_runtime::Device::new(0) {
        Ok(d) => d,
        Err(e) => return GpuSection::Skipped { skipped: format!("no CUDA device: {e}") },
    };
    match run_on(&dev, s, ops, warmup, reps) {
        Ok(section) => section,
        Err(e) => GpuSection::Skipped { skipped: format!("failed on {}: {e}", dev.name()) },
    }
}

fn run_on(dev: &eintup_runtime::Device, s: &Setup, ops: &[Op], warmup: usize, reps: usize) -> Result<GpuSection, String> {
    let sm = eintup_codegen::gpu::device_sm(dev);
    let copy_ms = dev.copy_timed(COPY_BYTES, warmup, reps).map_err(|e| e.to_string())?;
    let copy_gbps = 2.0 * COPY_BYTES as f64 / (copy_ms / 1e3) / 1e9;
    let mut results = Vec::new();
    let mut jobs = Vec::new();
    let mut failed = BTreeMap::new();
    for op in ops {
        eprintln!("bench: gpu {}", op.name);
        // A size or build problem in one op is reported and the others go on.
        match run_op(dev, s, op, sm, warmup, reps, copy_gbps) {
            Ok((result, job)) => {
                results.push(result);
                jobs.push(job);
            }
            Err(e) => {
                eprintln!("bench: gpu {}: {e}", op.name);
                failed.insert(op.name.clone(), e);
            }
        }
    }
    let req = peers::Request { device: "cuda", min_reps: reps, max_reps: reps, budget_s: 0.0, jobs };
    let resp = peers::run(s.python, s.peers_script, s.work_dir, &req)?;
    for r in &mut results {
        r.cmp.add_peers(&resp, &r.op, r.work, r.eintup_ms);
    }
    Ok(GpuSection::Ran { device: dev.name().to_string(), copy_gbps, results, failed, versions: resp.versions })
}

/// Builds, times and runs one op; the job asks the peers to check and time
/// the same computation.
fn run_op(dev: &eintup_runtime::Device, s: &Setup, op: &Op, sm: u32, warmup: usize, reps: usize, copy_gbps: f64) -> Result<(GpuResult, Job), String> {
    let p = prepare(s.ops_dir, op, false, eintup_codegen::default_fp_contract(false))?;
    let bundle =
        build(&p.src, &p.module, &p.loops, &p.config, &BuildOptions { seed: 0, float: op.float, sm, fp_contract: eintup_codegen::FpContract::default() })
            .map_err(|e| e.to_string())?;
    let inputs: BTreeMap<String, eintup_runtime::Tensor> =
        p.module.arrays.iter().zip(&p.buffers).filter(|(a, _)| a.is_input).map(|(a, t)| (a.name.clone(), t.clone())).collect();
    let t = dev.run_timed(&bundle, &inputs, warmup, reps).map_err(|e| e.to_string())?;
    // The result PyTorch is checked against comes from this device.
    let arrays = eintup_codegen::gpu::run_bundle(dev, &bundle, &p.module, &p.buffers, eintup_codegen::gpu::runtime_failure).map_err(|e| e.to_string())?;
    let dir = s.work_dir.join(format!("gpu-{}", op.name));
    let input_paths = p.write_inputs(&dir)?;
    let out = dir.join("eintup_out.npy");
    eintup::tensor::npy::write(&out, &arrays[p.output()?]).map_err(|e| format!("{}: {e}", out.display()))?;
    let gbps = op.work / (t.total_ms / 1e3) / 1e9;
    let result = GpuResult {
        op: op.name.clone(),
        binds: op.binds.clone(),
        unit: op.metric.unit(),
        work: op.work,
        eintup_ms: t.total_ms,
        launches_ms: t.launches.iter().map(|l| (l.kernel.clone(), l.median_ms)).collect(),
        fraction_of_copy: (op.metric == Metric::Gbytes).then_some(gbps / copy_gbps),
        cmp: Comparison::new(op.work, t.total_ms),
    };
    Ok((result, Job::new(op, input_paths, out)))
}
