//! `etrun` as a user runs it: option and bundle mistakes are exit 2 before
//! any driver call, no driver or device is exit 3 with the reason, a bundle
//! runs on the emulator anywhere (and on a GPU when there is one) and
//! writes its buffers as `.npy` and its profile as JSON, and a kernel fault
//! is exit 2 (the bundle's defect, `Error::exit_code`).

use crate::common;

use std::path::Path;
use std::process::{Command, Output};

use common::{manifest_value, manifest_with_generator, write_bundle, TempDir, N, PTX};
use eintup_runtime::{npy, Data, Device};

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
    user_error(&[&b, "--device", "tpu"], "unknown device `tpu` (expected `cuda` or `emu`)");
    user_error(&[&b, "--device", "emu", "--time", "3"], "the emulator does not model time");
    user_error(&[&b, "--profile"], "--profile and --profile-json need --device emu");
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
fn the_emulator_runs_a_bundle_writes_npy_and_a_profile() {
    let dir = TempDir::new("cli-emu");
    let b = bundle(&dir, &manifest_with_generator());
    let out = dir.path().join("out");
    let prof = dir.path().join("profile.json");
    let o = etrun(&[&b, "--device", "emu", "--out", out.to_str().unwrap(), "--profile-json", prof.to_str().unwrap(), "--profile", "--json"]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let j: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(j["device"]["kind"], "emu");
    assert_eq!(j["profile"]["kernels"][0]["name"], "add_one");
    let z = npy::read(&out.join("z.npy")).unwrap();
    assert_eq!(z.data, Data::F32(vec![3.0; N]));
    let p: serde_json::Value = serde_json::from_str(&std::fs::read_to_string(&prof).unwrap()).unwrap();
    // The generator's launch and the two main ones (the empty one skipped).
    assert_eq!(p["kernels"][0]["launches"], 3);
    assert_eq!(p["kernels"][1]["name"], "noop");
    // Text output: outputs, then the profile table.
    let o = etrun(&[&b, "--device", "emu", "--profile"]);
    let text = String::from_utf8_lossy(&o.stdout);
    assert!(text.starts_with("z: f32 [1000], sum 3000\ne: f64 [0, 3], sum -0\nprofile:\nkernel "), "{text}");
    let o = etrun(&["--device-info", "--device", "emu"]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    assert!(String::from_utf8_lossy(&o.stdout).starts_with("device: eintup PTX emulator (runs PTX for sm_90 and older"));
}

#[test]
fn a_kernel_fault_is_exit_2() {
    let dir = TempDir::new("cli-fault");
    // The loop bound one too far: add_one reads element 1000, first in
    // the generator's launch (from `y` into `x`, grid 4x256).
    let ptx = PTX.replace("setp.gt.s32 \t%p1, %r9, 999;", "setp.gt.s32 \t%p1, %r9, 1000;");
    let b = write_bundle(&dir, &manifest_with_generator().to_string(), &ptx).display().to_string();
    let o = etrun(&[&b, "--device", "emu"]);
    // The bundle's defect, not the tool's (Error::exit_code).
    assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
    assert!(stderr(&o).starts_with("etrun: error: kernel fault: kernel `add_one`, block (3, 0, 0), thread (232, 0, 0), line 35 `ld.global.f32 %f1, [%rd6];`: out-of-bounds global load of 4 bytes at 0x"), "{}", stderr(&o));
    assert!(stderr(&o).contains(": 4 bytes past the end of buffer `y` (4000 bytes at 0x"), "{}", stderr(&o));
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
