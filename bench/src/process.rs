//! Whole-process time of `eintup run` on the einsum chains (issue #31's
//! bar): what a user who runs the command waits for, start-up, compile,
//! the inputs' generation and exit included. The compute time is the
//! median process time at size `n` minus the median at [`BASELINE`],
//! whose start-up and compile are the same; the peers' time is their
//! in-process median (peers.py) on the arrays that very run wrote, each
//! result checked against eintup's first.
//!
//! `eintup run` keeps compiled host programs on disk (docs/cli.md, "The
//! compile cache"), so the runs are timed twice: with a cache of the
//! bench's own that an untimed run at each size filled (what a user who
//! runs the program again waits for; the bar's figure), and with the
//! cache off (`EINTUP_CACHE_DIR=""`: every run compiles).

use crate::ops::Op;
use crate::peers::{self, Comparison, Job};
use crate::stats::median;
use serde::Serialize;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::Instant;

/// The size whose process time stands for start-up and compile.
pub const BASELINE: usize = 16;

/// The bar: the 3-chain at this size, in at most `BAR` times
/// NumPy's time (the 4-chain is measured beside it, with no bar).
pub const BAR_OP: &str = "einsum3_f64";
pub use crate::ops::BAR_N;
pub const BAR: f64 = 2.0;

#[derive(Debug, Serialize)]
pub struct ProcessResult {
    pub op: String,
    pub binds: Vec<String>,
    /// Every eintup's one dim (the chains are square).
    pub n: usize,
    /// Process wall times, ms, in the order they ran (rounds alternate
    /// `n` and the baseline).
    pub run_ms: Vec<f64>,
    pub baseline_ms: Vec<f64>,
    /// median(run) - median(baseline), and best(run) - best(baseline).
    pub compute_ms: f64,
    pub compute_best_ms: f64,
    /// The same without the compile cache: every run compiles.
    pub uncached_run_ms: Vec<f64>,
    pub uncached_baseline_ms: Vec<f64>,
    pub uncached_compute_ms: f64,
    /// Peers against `compute_ms` (ratio above 1: eintup is slower).
    #[serde(flatten)]
    pub cmp: Comparison,
}

pub struct Setup<'a> {
    /// Where the programs, the peers and the scratch files are, and the
    /// peers' repetitions (the host section's).
    pub host: &'a crate::host::Setup<'a>,
    /// The release `eintup` whose runs are timed.
    pub eintup: &'a Path,
    /// Rounds of the pair (run at n, run at the baseline).
    pub rounds: usize,
}

/// `eintup run` of `op` with `binds`, quiet, `extra` appended, with the
/// compile cache in `cache` (`None`: off); its wall time in ms.
fn run_once(s: &Setup, op: &Op, binds: &[String], extra: &[&str], cache: Option<&Path>) -> Result<f64, String> {
    let mut cmd = Command::new(s.eintup);
    cmd.env("EINTUP_CACHE_DIR", cache.map_or_else(Default::default, |c| c.as_os_str().to_owned()));
    cmd.arg("run").arg(s.host.ops_dir.join(op.file));
    for b in binds {
        cmd.arg("--bind").arg(b);
    }
    if let Some(fp) = op.fp_contract {
        cmd.arg("--fp-contract").arg(fp.name());
    }
    cmd.arg("--float").arg(format!("{:?}", op.float).to_lowercase()).arg("-q").args(extra);
    let t = Instant::now();
    let out = cmd.stdout(Stdio::null()).stderr(Stdio::piped()).output().map_err(|e| format!("cannot run {}: {e}", s.eintup.display()))?;
    let ms = t.elapsed().as_secs_f64() * 1e3;
    if !out.status.success() {
        return Err(format!("{}: `eintup run` failed: {}", op.name, String::from_utf8_lossy(&out.stderr).trim_end()));
    }
    Ok(ms)
}

/// `op` with every eintup bound to `[n]` (the chains' binds are all square).
fn binds_at(op: &Op, n: usize) -> Vec<String> {
    op.binds.iter().map(|b| format!("{}=[{n}]", b.split('=').next().unwrap_or(b))).collect()
}

/// The `n` of a chain's `NAME=[n]` binds.
fn size_of(op: &Op) -> Result<usize, String> {
    let b = op.binds.first().ok_or_else(|| format!("{}: no binds", op.name))?;
    b.split('[').nth(1).and_then(|x| x.trim_end_matches(']').parse().ok()).ok_or_else(|| format!("{}: bind `{b}` is not NAME=[n]", op.name))
}

pub fn run(s: &Setup, ops: &[Op]) -> Result<(Vec<ProcessResult>, BTreeMap<String, String>), String> {
    let mut results = Vec::new();
    let mut jobs = Vec::new();
    for op in ops {
        eprintln!("bench: process {}", op.name);
        let n = size_of(op)?;
        // One untimed run writes the inputs and the output the peers are
        // checked against (and brings the binary into the page cache).
        let dir = s.host.work_dir.join(format!("process-{}", op.name));
        let _ = std::fs::remove_dir_all(&dir);
        let cache = s.host.work_dir.join("process-cache");
        let _ = std::fs::remove_dir_all(&cache);
        run_once(s, op, &op.binds, &["--out", &dir.to_string_lossy()], Some(&cache))?;
        let operands = op.params["operands"].as_array().ok_or_else(|| format!("{}: no operands for the peers", op.name))?;
        let inputs: BTreeMap<String, PathBuf> = operands.iter().filter_map(|o| o.as_str()).map(|o| (o.to_string(), dir.join(format!("{o}.npy")))).collect();
        jobs.push(Job::new(op, inputs, dir.join("y.npy")));
        let baseline = binds_at(op, BASELINE);
        run_once(s, op, &baseline, &[], Some(&cache))?;
        let (mut run_ms, mut baseline_ms, mut uncached_run_ms, mut uncached_baseline_ms) = (Vec::new(), Vec::new(), Vec::new(), Vec::new());
        for _ in 0..s.rounds.max(1) {
            run_ms.push(run_once(s, op, &op.binds, &[], Some(&cache))?);
            baseline_ms.push(run_once(s, op, &baseline, &[], Some(&cache))?);
            uncached_run_ms.push(run_once(s, op, &op.binds, &[], None)?);
            uncached_baseline_ms.push(run_once(s, op, &baseline, &[], None)?);
        }
        let best = |v: &[f64]| v.iter().copied().fold(f64::INFINITY, f64::min);
        let compute_ms = median(&mut run_ms.clone()) - median(&mut baseline_ms.clone());
        let compute_best_ms = best(&run_ms) - best(&baseline_ms);
        let uncached_compute_ms = median(&mut uncached_run_ms.clone()) - median(&mut uncached_baseline_ms.clone());
        results.push(ProcessResult {
            op: op.name.clone(),
            binds: op.binds.clone(),
            n,
            run_ms,
            baseline_ms,
            compute_ms,
            compute_best_ms,
            uncached_run_ms,
            uncached_baseline_ms,
            uncached_compute_ms,
            cmp: Comparison::new(op.work, compute_ms),
        });
    }
    eprintln!("bench: process peers (NumPy, TensorFlow)");
    let (h, b) = (s.host, s.host.budget);
    let req = peers::Request { device: "cpu", min_reps: b.min_reps, max_reps: b.max_reps, budget_s: b.time.as_secs_f64(), jobs };
    let resp = peers::run(h.python, h.peers_script, h.work_dir, &req)?;
    // `results` is in the order of `ops`.
    for (r, op) in results.iter_mut().zip(ops) {
        r.cmp.add_peers(&resp, &r.op, op.work, r.compute_ms);
    }
    Ok((results, resp.versions))
}

pub fn print(results: &[ProcessResult], versions: &BTreeMap<String, String>) {
    println!("\n== process time (`eintup run` at n minus at {BASELINE}, ms, median; compile cache warm, and off; peers in process; bar: {BAR}x NumPy)");
    let v: Vec<String> = versions.iter().map(|(k, v)| format!("{k} {v}")).collect();
    println!("peers: {}", v.join(", "));
    println!(
        "{:<14} {:>6} {:>9} {:>9} {:>9} {:>9} {:>9} {:>9} {:>7} {:>9} {:>7}",
        "op",
        "n",
        "run n",
        format!("run {BASELINE}"),
        "compute",
        "(best)",
        "no cache",
        "numpy",
        "ratio",
        "tf",
        "ratio"
    );
    for r in results {
        let peer = |fw: &str| match (r.cmp.peers.get(fw), r.cmp.ratio.get(fw)) {
            (Some(p), Some(x)) => format!("{:>9.1} {:>6.2}x", p.median_s.unwrap_or(f64::NAN) * 1e3, x),
            (Some(p), None) => format!("{:>17}", p.error.as_deref().unwrap_or("-").chars().take(17).collect::<String>()),
            _ => format!("{:>17}", "-"),
        };
        println!(
            "{:<14} {:>6} {:>9.1} {:>9.1} {:>9.1} {:>9.1} {:>9.1} {} {}",
            r.op,
            r.n,
            median(&mut r.run_ms.clone()),
            median(&mut r.baseline_ms.clone()),
            r.compute_ms,
            r.compute_best_ms,
            r.uncached_compute_ms,
            peer("numpy"),
            peer("tensorflow")
        );
    }
    for r in results.iter().filter(|r| r.n == BAR_N && r.op == BAR_OP) {
        if let Some(x) = r.cmp.ratio.get("numpy") {
            let verdict = if *x <= BAR { "within" } else { "OVER" };
            let numpy = r.cmp.peers.get("numpy").and_then(|p| p.median_s).map_or(f64::NAN, |t| t * 1e3);
            println!("bar (issue #31, {} at {BAR_N}): {verdict} {BAR}x of NumPy ({x:.2}x; without the cache {:.2}x)", r.op, r.uncached_compute_ms / numpy);
        }
    }
}
