//! Compile time of every example: `etopt --time-passes` run as a user
//! would (a fresh process each time), once to host LLVM IR (what the JIT
//! of `--backend cpu` compiles) and once to PTX. Reported per pass and end
//! to end (process wall time), as medians.

use crate::stats::median;
use serde::Serialize;
use std::path::Path;
use std::process::Command;
use std::time::Instant;

#[derive(Debug, Serialize)]
pub struct CompileResult {
    pub example: String,
    pub runs: usize,
    /// Process wall time of `etopt EX --emit llvm --host` (parse, every
    /// pass, LLVM lowering and O3), median.
    pub end_to_end_host_ms: f64,
    /// The same to PTX for sm_80 (adds the NVPTX backend).
    pub end_to_end_ptx_ms: f64,
    /// Median time of each pass of the default pipeline, in order; a pass
    /// run twice appears as `name`, `name#2`.
    pub passes_ms: Vec<(String, f64)>,
    pub codegen_host_ms: f64,
    pub codegen_ptx_ms: f64,
}

/// A dependency chain of `n` small statements (`a_k[i] = a_{k-1}[i] * 1.5
/// + 1.0`, four iterations each): the long program of issue #26 item 6,
/// whose compile time was super-linear in `n` (7.6 s for 1,000) until
/// small kernels of large modules skipped O3. Written to `dir`.
pub fn long_chain(dir: &Path, n: usize) -> Result<std::path::PathBuf, String> {
    let mut text = String::from("a0[i] = RANDOM(0, 1, FLOAT)\n");
    for k in 1..n {
        text.push_str(&format!("a{k}[i] = a{}[i] * 1.5 + 1.0\n", k - 1));
    }
    text.push_str(&format!("\na{}\n\nDIMS(i) IN [4,4]\n", n - 1));
    let path = dir.join(format!("chain_{n}.et"));
    std::fs::write(&path, text).map_err(|e| format!("{}: {e}", path.display()))?;
    Ok(path)
}

/// One `etopt` run: wall time and the timing lines of stderr.
fn etopt_once(etopt: &Path, example: &Path, emit: &[&str]) -> Result<(f64, Vec<(String, f64)>), String> {
    let t = Instant::now();
    let out = Command::new(etopt)
        .arg(example)
        .args(emit)
        .args(["--time-passes", "-o", "/dev/null"])
        .output()
        .map_err(|e| format!("cannot run {}: {e}", etopt.display()))?;
    let wall = t.elapsed().as_secs_f64() * 1e3;
    let stderr = String::from_utf8_lossy(&out.stderr);
    if !out.status.success() {
        return Err(format!("{} {} failed: {stderr}", etopt.display(), example.display()));
    }
    Ok((wall, parse_timing(&stderr)))
}

/// `NNN.NNN ms [PP.P%]  name` lines, in order (the pass table's `total`
/// excluded); repeated names get `#2`, `#3`. A name may have spaces
/// (`(verify after each pass)`).
pub fn parse_timing(text: &str) -> Vec<(String, f64)> {
    let mut out: Vec<(String, f64)> = Vec::new();
    for line in text.lines() {
        let mut words = line.split_whitespace().peekable();
        let (Some(ms), Some("ms")) = (words.next().and_then(|w| w.parse::<f64>().ok()), words.next()) else { continue };
        words.next_if(|w| w.ends_with('%'));
        let name = words.collect::<Vec<_>>().join(" ");
        let name = name.as_str();
        if name.is_empty() {
            continue;
        }
        if name == "total" {
            continue;
        }
        let seen = out.iter().filter(|(n, _)| n == name || n.starts_with(&format!("{name}#"))).count();
        let key = if seen == 0 { name.to_string() } else { format!("{name}#{}", seen + 1) };
        out.push((key, ms));
    }
    out
}

pub fn run(etopt: &Path, examples: &[std::path::PathBuf], runs: usize) -> Result<Vec<CompileResult>, String> {
    let mut results = Vec::new();
    for ex in examples {
        let mut host_wall = Vec::new();
        let mut ptx_wall = Vec::new();
        let mut lines: Vec<Vec<(String, f64)>> = Vec::new();
        let mut ptx_codegen = Vec::new();
        for _ in 0..runs {
            let (w, l) = etopt_once(etopt, ex, &["--emit", "llvm", "--host"])?;
            host_wall.push(w);
            lines.push(l);
            let (w, l) = etopt_once(etopt, ex, &["--emit", "ptx", "--target", "sm_80"])?;
            ptx_wall.push(w);
            ptx_codegen.extend(l.into_iter().filter(|(n, _)| n == "codegen-ptx").map(|(_, ms)| ms));
        }
        let names: Vec<String> = lines.first().map(|l| l.iter().map(|(n, _)| n.clone()).collect()).unwrap_or_default();
        let med = |name: &str| -> f64 {
            let mut v: Vec<f64> = lines.iter().filter_map(|l| l.iter().find(|(n, _)| n == name).map(|(_, ms)| *ms)).collect();
            median(&mut v)
        };
        let passes_ms = names.iter().filter(|n| !n.starts_with("codegen-")).map(|n| (n.clone(), med(n))).collect();
        results.push(CompileResult {
            example: ex.file_stem().map(|s| s.to_string_lossy().into_owned()).unwrap_or_default(),
            runs,
            end_to_end_host_ms: median(&mut host_wall),
            end_to_end_ptx_ms: median(&mut ptx_wall),
            passes_ms,
            codegen_host_ms: med("codegen-llvm-host"),
            codegen_ptx_ms: median(&mut ptx_codegen),
        });
    }
    Ok(results)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn timing_lines_in_order_with_repeats_numbered() {
        let text = "// ----- pass timing ----- //\n     0.145 ms   7.5%  resolve\n     1.392 ms  72.4%  simplify-index\n     0.201 ms  10.5%  simplify-index\n     0.050 ms   2.6%  (verify after each pass)\n     1.923 ms 100.0%  total\n// ----- codegen timing ----- //\n    20.642 ms  codegen-llvm-host\n";
        let t = parse_timing(text);
        let names: Vec<&str> = t.iter().map(|(n, _)| n.as_str()).collect();
        assert_eq!(names, ["resolve", "simplify-index", "simplify-index#2", "(verify after each pass)", "codegen-llvm-host"]);
        assert_eq!(t[2].1, 0.201);
        assert_eq!(t[3].1, 0.05);
        assert_eq!(t[4].1, 20.642);
    }
}
