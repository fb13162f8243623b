//! `etrun` as a user runs it: option and bundle mistakes are exit 2 before
//! any driver call, no driver or device is exit 3 with the reason, and on a
//! GPU a bundle runs and writes its buffers as `.npy`.

mod common;

use std::path::Path;
use std::process::{Command, Output};

use common::{manifest_value, manifest_with_generator, write_bundle, TempDir, N, PTX};
use eintup_runtime::{npy, Device, Data};

/// The binary under test: `ETRUN` when set (the GPU kit runs this test
/// binary far from the build tree), else the one cargo built beside it.
fn etrun(args: &[&str]) -> Output {
    let exe = std::env::var_os("ETRUN").unwrap_or_else(|| env!("CARGO_BIN_EXE_etrun").into());
    Command::new(&exe).args(args).output().unwrap_or_else(|e| panic!("cannot start {}: {e}", exe.to_string_lossy()))
}

fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

/// Exit 2 and a message containing `needle`.
fn user_error(args: &[&str], needle: &str) {
    let o = etrun(args);
    assert_eq!(o.status.code(), Some(2), "{args:?}: {}", stderr(&o));
    assert!(stderr(&o).contains(needle), "{args:?}: {:?} lacks {needle:?}", stderr(&o));
}

fn bundle(dir: &TempDir, manifest: &serde_json::Value) -> String {
    write_bundle(dir, &manifest.to_string(), PTX).display().to_string()
}

#[test]
fn mistakes_are_exit_2_before_the_driver() {
    let dir = TempDir::new("cli-errors");
    let b = bundle(&dir, &manifest_with_generator());
    user_error(&["/no/such.etb"], "/no/such.etb");
    user_error(&[&b, "--input", "x"], "expected NAME=PATH.npy");
    user_error(&[&b, "--input", "x=/no/such.npy"], "cannot read file");
    user_error(&[&b, "--seed", "7"], "compiled for seed 0");
    user_error(&[&b, "--device", "emu"], "the device `cuda` only");
    user_error(&[&b, "--time"], "--time");
    user_error(&[], "BUNDLE");
    // An input the bundle cannot generate must be supplied.
    let plain_dir = TempDir::new("cli-plain");
    let plain = bundle(&plain_dir, &manifest_value());
    user_error(&[&plain], "input `x`: not supplied");
    // A wrongly shaped input file.
    let f = dir.path().join("x3.npy");
    npy::write(&f, &eintup_runtime::Tensor::new(vec![3], Data::F32(vec![1.0; 3])).unwrap()).unwrap();
    user_error(&[&b, "--input", &format!("x={}", f.display())], "shape [3], expected [1000]");
}

#[test]
fn without_a_device_the_exit_code_is_3() {
    if Device::new(0).is_ok() {
        eprintln!("skipped: a CUDA device is present");
        return;
    }
    let dir = TempDir::new("cli-nodev");
    let b = bundle(&dir, &manifest_with_generator());
    for args in [vec![b.as_str()], vec!["--device-info"]] {
        let o = etrun(&args);
        assert_eq!(o.status.code(), Some(3), "{}", stderr(&o));
        assert!(stderr(&o).contains("no CUDA"), "{}", stderr(&o));
    }
}

#[test]
fn gpu_runs_a_bundle_and_writes_npy() {
    if let Err(e) = Device::new(0) {
        eprintln!("skipped: no CUDA device ({e})");
        return;
    }
    let dir = TempDir::new("cli-gpu");
    let b = bundle(&dir, &manifest_with_generator());
    let out = dir.path().join("out");
    let o = etrun(&[&b, "--out", out.to_str().unwrap(), "--time", "3", "--json"]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let j: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(j["timing"]["reps"], 3);
    assert!(j["device"]["multiprocessors"].as_u64().unwrap() > 0);
    // Generated x = 1, so z = 3 (see common::manifest_with_generator).
    let z = npy::read(&out.join("z.npy")).unwrap();
    assert_eq!(z.data, Data::F32(vec![3.0; N]));
    assert!(Path::new(&out.join("x.npy")).exists());
    assert!(!Path::new(&out.join("y.npy")).exists(), "temporaries are not written");
}
