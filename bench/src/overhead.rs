//! The Python package's call overhead (issue #29's bar: a cached kernel's
//! call on tiny arrays within 10x of NumPy's own `matmul`), measured in
//! one Python process by bench/overhead.py, which also times a compile
//! with and without an on-disk cache hit. docs/python.md records it.

use serde::{Deserialize, Serialize};
use std::path::Path;
use std::process::Command;

/// bench/overhead.py's report.
#[derive(Debug, Deserialize, Serialize)]
pub struct Overhead {
    pub op: String,
    /// Microseconds per call: the kernel, the kernel with `out=`, NumPy.
    pub eintup_us: f64,
    pub eintup_out_us: f64,
    pub numpy_us: f64,
    pub ratio: f64,
    pub ratio_out: f64,
    pub bar: f64,
    pub copies_per_call: u64,
    /// `eintup.compile` to the first result: compiled, and from disk.
    pub compile_miss_ms: f64,
    pub compile_hit_ms: f64,
    pub numpy_version: String,
    pub calls_timed: u64,
}

/// Runs bench/overhead.py with `python` (which must import `eintup`).
pub fn run(python: &Path, script: &Path, work: &Path, quick: bool) -> Result<Overhead, String> {
    let json = work.join("overhead.json");
    let mut cmd = Command::new(python);
    cmd.arg(script).arg("--json").arg(&json);
    if quick {
        cmd.arg("--quick");
    }
    let out = cmd.output().map_err(|e| format!("cannot run {}: {e}", python.display()))?;
    if !out.status.success() {
        return Err(format!("{} failed: {}", script.display(), String::from_utf8_lossy(&out.stderr).trim_end()));
    }
    let text = std::fs::read_to_string(&json).map_err(|e| format!("{}: {e}", json.display()))?;
    serde_json::from_str(&text).map_err(|e| format!("{}: {e}", json.display()))
}

pub fn print(o: &Overhead) {
    println!("\n== Python call overhead ({}; us per call, median; NumPy {})", o.op, o.numpy_version);
    println!("{:<28} {:>9} {:>8}", "", "us", "ratio");
    println!("{:<28} {:>9.2} {:>7.2}x", "eintup kernel(a=, b=)", o.eintup_us, o.ratio);
    println!("{:<28} {:>9.2} {:>7.2}x", "eintup kernel(.., out=)", o.eintup_out_us, o.ratio_out);
    println!("{:<28} {:>9.2} {:>8}", "numpy.matmul", o.numpy_us, "1.00x");
    let verdict = if o.ratio <= o.bar { "within" } else { "OVER" };
    println!("bar: {verdict} {}x of NumPy; arrays copied per call: {}", o.bar, o.copies_per_call);
    println!("compile to first result: {:.1} ms compiled, {:.2} ms from the disk cache", o.compile_miss_ms, o.compile_hit_ms);
}
