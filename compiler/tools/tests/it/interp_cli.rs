//! `eintup run` as a user calls it: exit codes, `--out`, `--input`.

use eintup::tensor::{Data, Tensor};
use std::process::Command;

fn eintup(args: &[&str]) -> (i32, String, String) {
    let o = Command::new(env!("CARGO_BIN_EXE_eintup")).args(args).current_dir(eintup_testkit::root()).output().unwrap();
    (o.status.code().unwrap_or(-1), String::from_utf8_lossy(&o.stdout).into(), String::from_utf8_lossy(&o.stderr).into())
}

#[test]
fn out_dir_inputs_and_exit_codes() {
    let dir = std::env::temp_dir().join(format!("eintup-run-cli-{}", std::process::id()));
    let d = dir.to_str().unwrap();
    let (code, _, err) = eintup(&["run", "--backend", "interp", "docs/examples/reduce_sum.et", "--bind", "keep=[2]", "--bind", "drop=[3]", "--out", d]);
    assert_eq!(code, 0, "{err}");
    let cfg: serde_json::Value = serde_json::from_str(&std::fs::read_to_string(dir.join("config.json")).unwrap()).unwrap();
    assert_eq!(cfg, serde_json::json!({"seed": 0, "eintups": {"keep": [2], "drop": [3]}, "sources": {"keep": "bound", "drop": "bound"}}));
    let x = eintup::tensor::npy::read(&dir.join("x.npy")).unwrap();
    assert_eq!(x.shape, vec![2, 3]);

    // Supplying x: s = row sums, printed with a header.
    let xin = dir.join("xin.npy");
    eintup::tensor::npy::write(&xin, &Tensor { shape: vec![2, 3], data: Data::F64(vec![1.0, 2.0, 3.0, 4.0, 5.0, 6.5]) }).unwrap();
    let spec = format!("x={}", xin.display());
    let (code, out, err) = eintup(&["run", "--backend", "interp", "docs/examples/reduce_sum.et", "--bind", "keep=[2]", "--bind", "drop=[3]", "--input", &spec]);
    assert_eq!(code, 0, "{err}");
    assert_eq!(out, "s: FLOAT(f64) [2]\n[6.0, 15.5]\n");

    // The input alone fixes the dims (keep and drop from x's shape), and
    // the configuration line on stderr says so.
    let (code, out, err) = eintup(&["run", "--backend", "interp", "docs/examples/reduce_sum.et", "--input", &spec]);
    assert_eq!(code, 0, "{err}");
    assert_eq!(out, "s: FLOAT(f64) [2]\n[6.0, 15.5]\n");
    assert_eq!(err, "configuration: keep=[2] (input x), drop=[3] (input x)\n");

    // A binding that contradicts the input: exit 2, names both.
    let (code, _, err) = eintup(&["run", "--backend", "interp", "docs/examples/reduce_sum.et", "--bind", "keep=[3]", "--bind", "drop=[3]", "--input", &spec]);
    assert_eq!(code, 2);
    assert!(err.contains("E0316") && err.contains("--bind keep=[3]") && err.contains("input `x`") && err.contains("reduce_sum.et:2:"), "{err}");
    // Wrong type: exit 2, names the array and both types.
    let xint = dir.join("xint.npy");
    eintup::tensor::npy::write(&xint, &Tensor { shape: vec![2, 3], data: Data::I32(vec![1, 2, 3, 4, 5, 6]) }).unwrap();
    let (code, _, err) = eintup(&["run", "--backend", "interp", "docs/examples/reduce_sum.et", "--input", &format!("x={}", xint.display())]);
    assert_eq!(code, 2);
    assert!(err.contains("E0403") && err.contains("INT") && err.contains("FLOAT") && err.contains("reduce_sum.et:2:"), "{err}");
    let (code, _, err) = eintup(&["run", "--backend", "interp", "docs/examples/reduce_sum.et", "--input", "nope=/nonexistent.npy"]);
    assert_eq!(code, 2, "{err}");

    // The compiled host backend prints what the interpreter prints.
    let (code, cpu, _) = eintup(&["run", "docs/examples/matmul.et", "--backend", "cpu"]);
    assert_eq!(code, 0);
    let (_, reference, _) = eintup(&["run", "--backend", "interp", "docs/examples/matmul.et"]);
    assert_eq!(cpu, reference);
    std::fs::remove_dir_all(&dir).ok();
}
