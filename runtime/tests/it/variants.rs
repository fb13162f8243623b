//! Run-time kernel variants of dynamic bundles (docs/bundle.md, "Run-time
//! variants"; docs/runtime.md): `Manifest::bind` launches, for each step,
//! the first variant whose conditions hold, else the step's own kernel;
//! checks the 32-bit limits of the kernels it launches only; a bundle
//! without `variants` binds as before; a malformed variant is a clear
//! error (exit 2 from `etrun`), never a panic.

use crate::common;

use std::collections::BTreeMap;
use std::process::Command;

use common::{dynamic_manifest_value, write_bundle, TempDir, DYN_PTX};
use eintup_runtime::manifest::Step;
use eintup_runtime::{Bundle, Data, Device, Error, Manifest, Tensor};
use serde_json::{json, Value};

/// [`DYN_PTX`] with a second entry, `add_n__wide`: the same code under
/// another name (what a variant is to the runtime: another kernel
/// computing the same cells).
fn ptx_with_variant() -> String {
    let entry = &DYN_PTX[DYN_PTX.find(".visible .entry").expect("DYN_PTX has an entry")..];
    format!("{DYN_PTX}\n{}", entry.replace("add_n", "add_n__wide"))
}

/// The dynamic `y = x + 1` bundle with variant `add_n__wide` of step 0
/// (blocks of 256) where `n.0 >= 16`, and the variants `extra` after it.
fn with_variants(extra: &[Value]) -> Value {
    let mut m = dynamic_manifest_value();
    m["kernels"].as_array_mut().unwrap().push(json!(
        {"name": "add_n__wide", "params": ["x", "y"], "registers": null, "spill_stores": null, "spill_loads": null, "grid_stride": true, "dims": ["n.0"]}
    ));
    let mut variants = vec![json!({"step": 0, "kernel": "add_n__wide", "threads": "%n.0", "block": [256, 1, 1], "when": ["(%n.0 - 16)"]})];
    variants.extend(extra.iter().cloned());
    m["dynamic"]["variants"] = Value::Array(variants);
    m
}

fn dims(n: i64) -> BTreeMap<String, i64> {
    [("n.0".to_string(), n)].into()
}

fn launch(m: &Manifest) -> (&str, [u32; 3], [u32; 3]) {
    match &m.steps[0] {
        Step::Launch { kernel, grid, block, .. } => (kernel.as_str(), *grid, *block),
        Step::Fill { .. } => panic!("step 0 is a launch"),
    }
}

#[test]
fn the_first_variant_whose_condition_holds_is_launched() {
    let m = Manifest::parse(&with_variants(&[]).to_string()).unwrap();
    assert_eq!(launch(&m.bind(&dims(1000)).unwrap()), ("add_n__wide", [4, 1, 1], [256, 1, 1]));
    assert_eq!(launch(&m.bind(&dims(16)).unwrap()), ("add_n__wide", [1, 1, 1], [256, 1, 1]));
    // Below the condition: the step's own kernel and block.
    assert_eq!(launch(&m.bind(&dims(15)).unwrap()), ("add_n", [1, 1, 1], [128, 1, 1]));
    // No threads: still one block, which finds no work (a thread count
    // only sizes the grid of these grid-stride kernels).
    assert_eq!(launch(&m.bind(&dims(0)).unwrap()), ("add_n", [1, 1, 1], [128, 1, 1]));
    // A later variant whose condition also holds loses to the first; one
    // holding where the first does not wins there.
    let later = json!({"step": 0, "kernel": "add_n", "threads": "(%n.0 * 2)", "block": [64, 1, 1], "when": ["(%n.0 - 8)"]});
    let m = Manifest::parse(&with_variants(&[later]).to_string()).unwrap();
    assert_eq!(launch(&m.bind(&dims(100)).unwrap()).0, "add_n__wide");
    assert_eq!(launch(&m.bind(&dims(10)).unwrap()), ("add_n", [1, 1, 1], [64, 1, 1]));
    assert_eq!(launch(&m.bind(&dims(7)).unwrap()), ("add_n", [1, 1, 1], [128, 1, 1]));
    // The bound manifest is an ordinary one.
    assert!(m.bind(&dims(100)).unwrap().dynamic.is_none());
}

#[test]
fn a_condition_that_overflows_does_not_hold() {
    let mut v = with_variants(&[]);
    v["dynamic"]["variants"][0]["when"] = json!(["((%n.0 * 9223372036854775807) * 4)"]);
    let m = Manifest::parse(&v.to_string()).unwrap();
    assert_eq!(launch(&m.bind(&dims(100)).unwrap()).0, "add_n");
}

#[test]
fn only_the_launched_kernels_limits_are_checked() {
    let mut v = with_variants(&[]);
    // The variant's 32-bit arithmetic reaches 2^31 from n.0 = 2^21 on;
    // the general kernel's from 2^30 on.
    v["dynamic"]["index32"] = json!([
        {"expr": "(%n.0 * 1024)", "kernel": "add_n__wide"},
        {"expr": "(%n.0 * 2)", "kernel": "add_n"}
    ]);
    let m = Manifest::parse(&v.to_string()).unwrap();
    // Below the variant's condition its limit is not checked, however low.
    let mut low = v.clone();
    low["dynamic"]["index32"][0]["expr"] = json!("(%n.0 * 9223372036854775807)");
    assert_eq!(launch(&Manifest::parse(&low.to_string()).unwrap().bind(&dims(10)).unwrap()).0, "add_n");
    // Chosen, it is.
    let e = m.bind(&dims(1 << 21)).unwrap_err().to_string();
    assert!(e.contains("add_n__wide") && e.contains("32-bit"), "{e}");
    assert_eq!(launch(&m.bind(&dims((1 << 21) - 1)).unwrap()).0, "add_n__wide");
    // The general kernel's, where it runs.
    let mut general = v.clone();
    general["dynamic"]["variants"][0]["when"] = json!(["(0 - 1)"]);
    let g = Manifest::parse(&general.to_string()).unwrap();
    assert_eq!(launch(&g.bind(&dims(1 << 21)).unwrap()).0, "add_n");
    let e = g.bind(&dims(1 << 30)).unwrap_err().to_string();
    assert!(e.contains("kernel `add_n` reaches"), "{e}");
}

#[test]
fn a_bundle_without_variants_binds_its_own_kernels() {
    let text = dynamic_manifest_value().to_string();
    assert!(!text.contains("variants"));
    let m = Manifest::parse(&text).unwrap();
    assert!(m.dynamic.as_ref().unwrap().variants.is_empty());
    assert_eq!(launch(&m.bind(&dims(1000)).unwrap()), ("add_n", [8, 1, 1], [128, 1, 1]));
    // And it writes none back.
    assert!(!m.to_json().unwrap().contains("variants"));
}

#[test]
fn malformed_variants_are_errors_naming_the_variant() {
    let cases = [
        (json!({"step": 1, "kernel": "add_n__wide", "threads": "%n.0", "block": [256, 1, 1], "when": []}), "variant 1: step 1 is not a launch"),
        (json!({"step": 0, "kernel": "nope", "threads": "%n.0", "block": [256, 1, 1], "when": []}), "variant 1: unknown kernel `nope`"),
        (json!({"step": 0, "kernel": "add_n", "threads": "%n.0", "block": [0, 1, 1], "when": []}), "variant 1: block [0, 1, 1] has no threads"),
        (json!({"step": 0, "kernel": "add_n", "threads": "%n.0", "block": [2048, 1, 1], "when": []}), "exceeds the CUDA limit"),
        (json!({"step": 0, "kernel": "add_n", "threads": "%n.0", "block": [64, 64, 1], "when": []}), "more than 1024"),
        (json!({"step": 0, "kernel": "add_n", "threads": "%m.0", "block": [32, 1, 1], "when": []}), "`%m.0`, which is not among the symbols"),
        (json!({"step": 0, "kernel": "add_n", "threads": "%n.0", "block": [32, 1, 1], "when": ["(%n.0 -"]}), "(%n.0 -"),
        (json!({"step": 0, "kernel": "add_n", "threads": "%n.0", "block": [32, 1, 1], "when": ["%k.0"]}), "`%k.0`, which is not among the symbols"),
    ];
    for (bad, needle) in cases {
        let e = Manifest::parse(&with_variants(std::slice::from_ref(&bad)).to_string()).unwrap_err();
        assert!(matches!(e, Error::BadManifest(_)), "{bad}: {e:?}");
        assert!(e.to_string().contains(needle), "{bad}: {e} lacks {needle:?}");
    }
    // Fields of the wrong type or missing: serde's error, no panic.
    for bad in [json!({"step": -1, "kernel": "add_n", "threads": "%n.0", "block": [32, 1, 1], "when": []}), json!({"step": 0, "kernel": "add_n"}), json!(7)] {
        let e = Manifest::parse(&with_variants(std::slice::from_ref(&bad)).to_string()).unwrap_err();
        assert!(e.to_string().contains("manifest"), "{bad}: {e}");
    }
}

/// On the emulator: each variant computes `y = x + 1`, and the profile
/// names the kernel that ran.
#[test]
fn the_profile_names_the_variant_that_ran() {
    let b = Bundle::new(Manifest::parse(&with_variants(&[]).to_string()).unwrap(), ptx_with_variant()).unwrap();
    let dev = Device::emulator();
    for (n, kernel) in [(40usize, "add_n__wide"), (9, "add_n")] {
        let x = Tensor::new(vec![n], Data::F32((0..n).map(|i| i as f32).collect())).unwrap();
        let inputs: BTreeMap<String, Tensor> = [("x".to_string(), x)].into();
        let (out, profile) = dev.run_profiled(&b, &inputs).unwrap();
        assert_eq!(out["y"], Tensor::new(vec![n], Data::F32((0..n).map(|i| i as f32 + 1.0).collect())).unwrap(), "n = {n}");
        let names: Vec<&str> = profile.kernels.iter().map(|p| p.name.as_str()).collect();
        assert_eq!(names, [kernel], "n = {n}");
    }
}

/// `etrun` refuses a bundle with a malformed variant: exit 2, the message
/// naming it, before any device.
#[test]
fn etrun_refuses_a_malformed_variant_with_exit_2() {
    let dir = TempDir::new("variants-cli");
    let bad = json!({"step": 0, "kernel": "missing", "threads": "%n.0", "block": [32, 1, 1], "when": []});
    let path = write_bundle(&dir, &with_variants(&[bad]).to_string(), &ptx_with_variant());
    let exe = std::env::var_os("ETRUN").unwrap_or_else(|| env!("CARGO_BIN_EXE_etrun").into());
    let o = Command::new(&exe).arg(&path).args(["--device", "emu"]).output().unwrap();
    let err = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(2), "{err}");
    assert!(err.contains("variant 1: unknown kernel `missing`") && err.lines().count() == 1, "{err}");
}
