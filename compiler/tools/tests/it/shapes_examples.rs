//! Runs `eintup shapes --json` on every shipped example and checks each
//! configuration against the file's constraints, re-evaluated here from the
//! printed dims with an evaluator independent of the solver (it works on
//! the AST and Python-style integer semantics written out below).

use eintup_testkit::examples;
use et_grammar::ast::{BinOp, ConstraintRel, ConstraintSubject, DimsArg, Expr, ExprKind};
use std::collections::HashMap;
use std::process::Command;

#[derive(Debug, Clone, PartialEq)]
enum V {
    S(i64),
    T(Vec<i64>),
}

fn fdiv(a: i64, b: i64) -> i64 {
    (a as f64 / b as f64).floor() as i64
}

fn ev(e: &Expr, cfg: &HashMap<String, Vec<i64>>) -> V {
    match &e.kind {
        ExprKind::Int(n) => V::S(*n),
        ExprKind::Neg(x) => match ev(x, cfg) {
            V::S(a) => V::S(-a),
            V::T(v) => V::T(v.into_iter().map(|a| -a).collect()),
        },
        ExprKind::Rank(l) => V::S(l.iter().map(|i| cfg[&i.name].len() as i64).sum()),
        // A literal `n` in a DIMS list is the one component `n + 1`.
        ExprKind::Dims(l) => V::T(
            l.iter()
                .flat_map(|a| match a {
                    DimsArg::Name(i) => cfg[&i.name].clone(),
                    DimsArg::Lit(n, _) => vec![n + 1],
                })
                .collect(),
        ),
        ExprKind::Binary(op, a, b) => {
            let f = |x: i64, y: i64| match op {
                BinOp::Add => x + y,
                BinOp::Sub => x - y,
                BinOp::Mul => x * y,
                BinOp::FloorDiv => fdiv(x, y),
                BinOp::CeilDiv => -fdiv(-x, y),
                BinOp::Mod => x - y * fdiv(x, y),
                BinOp::Div => panic!("no / in constraints"),
            };
            match (ev(a, cfg), ev(b, cfg)) {
                (V::S(x), V::S(y)) => V::S(f(x, y)),
                (V::S(x), V::T(w)) => V::T(w.into_iter().map(|y| f(x, y)).collect()),
                (V::T(v), V::S(y)) => V::T(v.into_iter().map(|x| f(x, y)).collect()),
                (V::T(v), V::T(w)) => {
                    assert_eq!(v.len(), w.len());
                    V::T(v.into_iter().zip(w).map(|(x, y)| f(x, y)).collect())
                }
            }
        }
        k => panic!("unexpected constraint form {k:?}"),
    }
}

#[test]
fn every_configuration_satisfies_the_constraints() {
    let bin = env!("CARGO_BIN_EXE_eintup");
    let mut saw_rank0 = false;
    let mut saw_zero_dim = false;
    for path in examples() {
        let src = std::fs::read_to_string(&path).unwrap();
        let file = et_grammar::parse_file(&src).unwrap();
        let out = Command::new(bin).args(["shapes", "--json", "--reps", "3", "--seed", "5"]).arg(&path).output().unwrap();
        assert!(out.status.success(), "{}: {}", path.display(), String::from_utf8_lossy(&out.stderr));
        let rows: Vec<serde_json::Map<String, serde_json::Value>> = serde_json::from_slice(&out.stdout).unwrap();
        assert!(!rows.is_empty(), "{}", path.display());
        // Every rank combination allowed by RANK(t) IN must appear: count
        // distinct rank vectors against the product of the IN ranges of
        // eintups constrained only by IN (checked below where easy).
        for row in &rows {
            let cfg: HashMap<String, Vec<i64>> =
                row.iter().map(|(k, v)| (k.clone(), v.as_array().unwrap().iter().map(|x| x.as_i64().unwrap()).collect())).collect();
            for d in cfg.values() {
                saw_rank0 |= d.is_empty();
                saw_zero_dim |= d.contains(&0);
                assert!(d.iter().all(|x| *x >= 0), "{}: negative dim in {cfg:?}", path.display());
            }
            for c in &file.constraints {
                let t = &cfg[&c.target.name];
                let ok = match (&c.subject, &c.rel) {
                    (ConstraintSubject::Rank, ConstraintRel::In { lo, hi, .. }) => (*lo..=*hi).contains(&(t.len() as i64)),
                    (ConstraintSubject::Rank, ConstraintRel::Eq(e)) => ev(e, &cfg) == V::S(t.len() as i64),
                    (ConstraintSubject::Dims, ConstraintRel::In { lo, hi, .. }) => t.iter().all(|d| (lo..=hi).contains(&d)),
                    (ConstraintSubject::Dims, ConstraintRel::Eq(e)) => match ev(e, &cfg) {
                        V::S(s) => t.iter().all(|d| *d == s),
                        V::T(v) => &v == t,
                    },
                };
                assert!(ok, "{}: {cfg:?} violates constraint at {:?}", path.display(), c.span);
            }
        }
    }
    // reduce_sum/gather_nd allow rank 0; flatten/reduce_sum/scatter allow 0 dims.
    assert!(saw_rank0 && saw_zero_dim);
}

#[test]
fn rank_combinations_are_enumerated() {
    // matmul: RANK(batch) IN [0,3], row/col/k fixed to 1 -> exactly 4 rank
    // combinations; with --reps 2 that is 8 rows.
    let bin = env!("CARGO_BIN_EXE_eintup");
    let path = eintup_testkit::example("matmul.et");
    let out = Command::new(bin).args(["shapes", "--json", "--reps", "2"]).arg(&path).output().unwrap();
    let rows: Vec<serde_json::Map<String, serde_json::Value>> = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(rows.len(), 8);
    let mut ranks: Vec<usize> = rows.iter().map(|r| r["batch"].as_array().unwrap().len()).collect();
    ranks.dedup();
    assert_eq!(ranks, vec![0, 1, 2, 3]);
}

#[test]
fn table_and_determinism() {
    let bin = env!("CARGO_BIN_EXE_eintup");
    let path = eintup_testkit::example("meshgrid.et");
    let run = |seed: &str| Command::new(bin).args(["shapes", "--reps", "3", "--seed", seed]).arg(&path).output().unwrap().stdout;
    let a = String::from_utf8(run("1")).unwrap();
    assert_eq!(a, String::from_utf8(run("1")).unwrap());
    let lines: Vec<&str> = a.lines().collect();
    assert_eq!(lines.len(), 4);
    assert!(lines[0].starts_with('i') && lines[0].contains('j') && lines[0].contains('k'));
    assert!(lines[1].starts_with('['));
}
