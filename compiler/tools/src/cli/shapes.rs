//! `eintup shapes`: list the configurations the constraints allow, one row
//! per configuration (every rank combination, `--reps` dims draws each).

use super::ShapesArgs;
use eintup::driver::{Failure, Source};
use eintup::pipeline;
use eintup::sema::config::Space;
use eintup::sema::DimsSource;

pub fn main(args: ShapesArgs) -> Result<(), Failure> {
    let src = Source::load(&args.file)?;
    let (prog, ranks) = pipeline::ranked(&src)?;
    let space = Space::new(&prog, &ranks, &[], &[]).map_err(|d| src.failure(d))?;
    let (rows, discarded) = space.enumerate(args.reps, args.seed).map_err(|d| src.failure(d))?;
    let names: Vec<&str> = prog.module.eintups.iter().map(|e| e.name.as_str()).collect();
    let text = match (args.json, args.explain) {
        (false, false) => table(&names, &rows),
        (true, false) => json(&names, &rows),
        (false, true) => explained_table(&names, &rows, space.sources()),
        (true, true) => explained_json(&names, &rows, space.sources()),
    };
    print!("{text}");
    let total: usize = discarded.values().sum();
    if total > 0 {
        eprintln!("discarded {total} draw(s) that violate the constraints:");
        for (why, n) in &discarded {
            eprintln!("  {n} x {why}");
        }
    }
    Ok(())
}

/// `[2, 3]`, `[]` for rank 0.
pub fn dims_text(d: &[i64]) -> String {
    format!("[{}]", d.iter().map(|x| x.to_string()).collect::<Vec<_>>().join(", "))
}

/// Aligned table: one column per eintup, one row per configuration.
pub fn table(names: &[&str], rows: &[Vec<Vec<i64>>]) -> String {
    let header: Vec<String> = names.iter().map(|n| n.to_string()).collect();
    let cells: Vec<Vec<String>> = rows.iter().map(|r| r.iter().map(|d| dims_text(d)).collect()).collect();
    aligned(&header, &cells)
}

/// [`table`] with each cell marked with its source (`[3] inferred`).
pub fn explained_table(names: &[&str], rows: &[Vec<Vec<i64>>], sources: &[DimsSource]) -> String {
    let header: Vec<String> = names.iter().map(|n| n.to_string()).collect();
    let cells: Vec<Vec<String>> = rows.iter().map(|r| r.iter().zip(sources).map(|(d, s)| format!("{} {}", dims_text(d), s.text())).collect()).collect();
    aligned(&header, &cells)
}

/// [`json`] with sources: a list of `{"eintups": {..}, "sources": {..}}`
/// objects, as `run --out` writes `config.json`.
pub fn explained_json(names: &[&str], rows: &[Vec<Vec<i64>>], sources: &[DimsSource]) -> String {
    let objs: Vec<String> = rows
        .iter()
        .map(|r| {
            let eintups: serde_json::Map<String, serde_json::Value> = names.iter().zip(r).map(|(n, d)| (n.to_string(), serde_json::json!(d))).collect();
            let srcs: serde_json::Map<String, serde_json::Value> =
                names.iter().zip(sources).map(|(n, s)| (n.to_string(), serde_json::json!(s.text()))).collect();
            format!("  {}", serde_json::json!({ "eintups": eintups, "sources": srcs }))
        })
        .collect();
    if objs.is_empty() {
        "[]\n".to_string()
    } else {
        format!("[\n{}\n]\n", objs.join(",\n"))
    }
}

/// Left-aligned columns separated by two spaces; shared with `check`,
/// whose table is this one plus a `Valid` column.
/// Widths count characters, and padding is written out (`format!`'s width
/// stops at 65,535, which an eintup's name may pass).
pub fn aligned(header: &[String], cells: &[Vec<String>]) -> String {
    let width = |c: &String| c.chars().count();
    let widths: Vec<usize> =
        (0..header.len()).map(|k| cells.iter().filter_map(|r| r.get(k)).map(width).chain([width(&header[k])]).max().unwrap_or(0)).collect();
    let line = |v: &[String]| {
        let s: Vec<String> = v.iter().zip(&widths).map(|(c, &w)| format!("{c}{}", " ".repeat(w.saturating_sub(width(c))))).collect();
        format!("{}\n", s.join("  ").trim_end())
    };
    let mut out = line(header);
    for r in cells {
        out.push_str(&line(r));
    }
    out
}

/// A JSON list of `{"name": [dims]}` objects, keys in module order.
pub fn json(names: &[&str], rows: &[Vec<Vec<i64>>]) -> String {
    let objs: Vec<String> = rows
        .iter()
        .map(|r| {
            let kv: Vec<String> = names.iter().zip(r).map(|(n, d)| format!("{}: {}", serde_json::Value::String(n.to_string()), dims_text(d))).collect();
            format!("  {{{}}}", kv.join(", "))
        })
        .collect();
    if objs.is_empty() {
        "[]\n".to_string()
    } else {
        format!("[\n{}\n]\n", objs.join(",\n"))
    }
}
