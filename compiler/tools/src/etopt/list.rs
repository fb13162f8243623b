//! `--list-passes`: the pass registry and the named pipelines, as a table.

use eintup::ir::loops::Fact;
use eintup::ir::text::Spelled;
use eintup::passes::manager::PASSES;
use eintup::passes::{DEFAULT_PIPELINE, GPU_PASSES, HOST_PASSES};
use std::fmt::Write as _;

/// One line per registered pass, in registry order (`NAME  IN -> OUT
/// SUMMARY {OPTIONS}`, aligned), then one line per pass option, then one
/// line per pipeline.
pub fn list_passes() -> String {
    let width = PASSES.iter().map(|p| p.name.len()).max().unwrap_or(0).max("default --host".len());
    let level = PASSES.iter().map(|p| p.input.name().len()).max().unwrap_or(0);
    let mut out = String::from("passes (level read -> level left):\n");
    for p in PASSES {
        let levels = format!("{:<level$} -> {}", p.input.name(), p.output.name());
        let keys: Vec<&str> = p.run.keys.iter().map(|(k, _)| *k).collect();
        let options = if keys.is_empty() { String::new() } else { format!(" {{{}}}", keys.join(" ")) };
        let _ = writeln!(out, "  {:<width$}  {:<levels_w$}  {}{options}", p.name, levels, p.summary, levels_w = 2 * level + 4);
    }
    out.push_str("pass options (`--passes name{key=value ...}`):\n");
    for (k, what) in pass_options() {
        let _ = writeln!(out, "  {k:<width$}  {what}");
    }
    out.push_str("pass facts (a loop pass needs, refuses, provides; docs/passes.md#pass-facts):\n");
    for p in PASSES.iter().filter(|p| !(p.needs.is_empty() && p.refuses.is_empty() && p.provides.is_empty())) {
        let list = |fs: &[Fact]| if fs.is_empty() { "-".to_string() } else { fs.iter().map(|f| f.spelling()).collect::<Vec<_>>().join(" ") };
        let _ = writeln!(out, "  {:<width$}  needs {}; refuses {}; provides {}", p.name, list(p.needs), list(p.refuses), list(p.provides));
    }
    out.push_str("pipelines:\n");
    let _ = writeln!(out, "  {:<width$}  {}", "default", DEFAULT_PIPELINE.join(", "));
    let _ = writeln!(out, "  {:<width$}  default, then {}", "default --host", HOST_PASSES.join(", "));
    let _ = writeln!(out, "  {:<width$}  default, then {} (--emit llvm|ptx without --host)", "default (GPU)", GPU_PASSES.join(", "));
    out
}

/// Every pass option, as the passes declare them, each key once (in the
/// order of its first pass).
fn pass_options() -> Vec<(&'static str, &'static str)> {
    let mut out: Vec<(&str, &str)> = Vec::new();
    for &(k, what) in PASSES.iter().flat_map(|p| p.run.keys) {
        if !out.iter().any(|(o, _)| *o == k) {
            out.push((k, what));
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_pass_is_listed_once() {
        let text = list_passes();
        for p in PASSES {
            let passes = text.split("pass options").next().unwrap();
            let lines = passes.lines().filter(|l| l.split_whitespace().next() == Some(p.name)).count();
            assert_eq!(lines, 1, "{}\n{text}", p.name);
        }
    }

    #[test]
    fn a_key_shared_by_passes_means_the_same_in_each() {
        for &(k, what) in PASSES.iter().flat_map(|p| p.run.keys) {
            let listed = pass_options().into_iter().find(|(o, _)| *o == k).unwrap();
            assert_eq!(listed.1, what, "option `{k}` is declared with two descriptions");
        }
    }
}
