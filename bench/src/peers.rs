//! The peers (NumPy, TensorFlow, PyTorch) run in one Python process,
//! bench/peers.py, on the very inputs eintup used (written as `.npy`).
//! Each peer's result is compared with eintup's output before it is
//! timed, so a ratio is only ever reported for the same computation.

use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Command;

/// One op for peers.py.
#[derive(Debug, Serialize)]
pub struct Job {
    pub name: String,
    pub kind: String,
    pub float: String,
    pub params: serde_json::Value,
    /// Input array name -> `.npy` path.
    pub inputs: BTreeMap<String, PathBuf>,
    /// eintup's output, the reference each peer is checked against.
    pub output: PathBuf,
}

#[derive(Debug, Serialize)]
pub struct Request<'a> {
    /// `cpu` (NumPy, TensorFlow) or `cuda` (PyTorch on the GPU).
    pub device: &'a str,
    pub min_reps: usize,
    pub max_reps: usize,
    pub budget_s: f64,
    pub jobs: Vec<Job>,
}

/// A peer's outcome on one op.
#[derive(Clone, Debug, Deserialize, Serialize)]
pub struct PeerResult {
    /// Median seconds (absent when the peer failed or is unavailable).
    pub median_s: Option<f64>,
    #[serde(default)]
    pub reps: usize,
    /// max |peer - eintup| / max(1, max |eintup|).
    pub max_rel_err: Option<f64>,
    /// Why there is no time: not installed, failed, or disagreed with eintup.
    pub error: Option<String>,
}

#[derive(Debug, Deserialize)]
pub struct Response {
    /// Framework name -> version (or why it is unavailable).
    pub versions: BTreeMap<String, String>,
    /// Op name -> framework name -> result.
    pub results: BTreeMap<String, BTreeMap<String, PeerResult>>,
}

/// Runs peers.py on `req`, using `dir` for the request file.
pub fn run(python: &Path, script: &Path, dir: &Path, req: &Request) -> Result<Response, String> {
    let path = dir.join(format!("peers-{}.json", req.device));
    let text = serde_json::to_string_pretty(req).map_err(|e| e.to_string())?;
    std::fs::write(&path, text).map_err(|e| format!("cannot write {}: {e}", path.display()))?;
    let out = Command::new(python)
        .arg(script)
        .arg(&path)
        .env("TF_CPP_MIN_LOG_LEVEL", "3")
        .output()
        .map_err(|e| format!("cannot run {} {}: {e}", python.display(), script.display()))?;
    if !out.status.success() {
        return Err(format!("peers.py failed: {}", String::from_utf8_lossy(&out.stderr)));
    }
    serde_json::from_slice(&out.stdout).map_err(|e| format!("peers.py printed no valid JSON ({e}): {}", String::from_utf8_lossy(&out.stdout)))
}

impl Job {
    pub fn new(op: &crate::ops::Op, inputs: BTreeMap<String, PathBuf>, output: PathBuf) -> Job {
        Job { name: op.name.clone(), kind: op.kind.into(), float: format!("{:?}", op.float).to_lowercase(), params: op.params.clone(), inputs, output }
    }
}

/// eintup against its peers on one op.
#[derive(Debug, Default, Serialize)]
pub struct Comparison {
    /// Framework -> what it did.
    pub peers: BTreeMap<String, PeerResult>,
    /// Framework -> eintup time / its time (above 1: eintup is slower).
    pub ratio: BTreeMap<String, f64>,
    /// `eintup` and each framework -> achieved rate (work / time / 1e9).
    pub rate: BTreeMap<String, f64>,
}

impl Comparison {
    /// eintup alone, `work` done in `eintup_ms`.
    pub fn new(work: f64, eintup_ms: f64) -> Comparison {
        let rate = BTreeMap::from([("eintup".to_string(), work / (eintup_ms / 1e3) / 1e9)]);
        Comparison { rate, ..Default::default() }
    }

    /// Adds every peer's result on op `name` from `resp`.
    pub fn add_peers(&mut self, resp: &Response, name: &str, work: f64, eintup_ms: f64) {
        let eintup_s = eintup_ms / 1e3;
        for (fw, pr) in resp.results.get(name).into_iter().flatten() {
            if let Some(t) = pr.median_s {
                self.ratio.insert(fw.clone(), eintup_s / t);
                self.rate.insert(fw.clone(), work / t / 1e9);
            }
            self.peers.insert(fw.clone(), pr.clone());
        }
    }
}
