//! The C example `docs/examples/c/run_bundle.c`, compiled with the system C
//! compiler against `include/eintup.h` and this crate's `libeintup_rt.so`
//! (cargo builds the crate's cdylib before its integration tests), run on
//! the emulator over the runtime tests' hand-written bundle, its output
//! checked against the bundle's semantics.

use crate::common;

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use common::{manifest_value, write_bundle, TempDir, N, PTX};

/// The directory holding `libeintup_rt.so`: the test binary's own
/// (`target/debug/deps`), where cargo writes the cdylib it built for
/// these tests.
fn library_dir() -> PathBuf {
    let exe = std::env::current_exe().expect("the test binary's path");
    let deps = exe.parent().expect("the test binary is in a directory").to_path_buf();
    assert!(deps.join("libeintup_rt.so").is_file(), "no libeintup_rt.so beside {}", exe.display());
    deps
}

fn repo() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR")).parent().and_then(Path::parent).expect("runtime/capi is two levels down")
}

/// Compiles the example into `dir`, warnings as errors.
fn compile(dir: &TempDir) -> PathBuf {
    let lib = library_dir();
    let exe = dir.path().join("run_bundle");
    let out = Command::new("cc")
        .arg(repo().join("docs/examples/c/run_bundle.c"))
        .arg("-I")
        .arg(repo().join("runtime/capi/include"))
        .arg("-L")
        .arg(&lib)
        .arg("-leintup_rt")
        .arg(format!("-Wl,-rpath,{}", lib.display()))
        .args(["-std=c11", "-Wall", "-Wextra", "-Werror", "-o"])
        .arg(&exe)
        .output()
        .expect("run cc (scripts/setup installs gcc)");
    assert!(out.status.success(), "cc failed:\n{}", String::from_utf8_lossy(&out.stderr));
    exe
}

fn run(exe: &Path, args: &[&str]) -> Output {
    // cargo's LD_LIBRARY_PATH for tests names target/debug before deps/,
    // where an older libeintup_rt.so from `cargo build` may lie; it would
    // win over the rpath.
    Command::new(exe).args(args).env("LD_LIBRARY_PATH", library_dir()).output().expect("run the example")
}

#[test]
fn the_c_example_runs_a_bundle_on_the_emulator() {
    let dir = TempDir::new("capi-example");
    let exe = compile(&dir);
    let bundle = write_bundle(&dir, &manifest_value().to_string(), PTX);
    let out = run(&exe, &[bundle.to_str().unwrap(), "emu"]);
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{stdout}\n{}", String::from_utf8_lossy(&out.stderr));
    // The example fills input x with x[k] = (k % 8) / 2 - 1; the bundle
    // computes y = x + 1 and z = y + 1 (exact in f32), and the empty e.
    let z: Vec<f64> = (0..N).map(|k| (k % 8) as f64 / 2.0 - 1.0 + 2.0).collect();
    let shown: Vec<String> = z.iter().take(8).map(|v| v.to_string()).collect();
    let want = format!("device: eintup PTX emulator\nz f32 [{N}]: {} ... (sum {})\ne f64 [0, 3]: (sum 0)\n", shown.join(" "), z.iter().sum::<f64>());
    assert_eq!(stdout, want);
}

#[test]
fn the_c_example_reports_errors_with_their_status() {
    let dir = TempDir::new("capi-example-errors");
    let exe = compile(&dir);
    let missing = dir.path().join("missing.etb");
    let out = run(&exe, &[missing.to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(2), "a missing bundle is the caller's defect");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(stderr, format!("error: {}: No such file or directory (os error 2)\n", missing.join("manifest.json").display()));
    let bundle = write_bundle(&dir, &manifest_value().to_string(), PTX);
    let out = run(&exe, &[bundle.to_str().unwrap(), "tpu"]);
    assert_eq!(
        (out.status.code(), String::from_utf8_lossy(&out.stderr).into_owned()),
        (Some(2), "error: invalid argument: unknown device `tpu` (expected `cuda` or `emu`)\n".to_string())
    );
    if !eintup_runtime::device::driver_present() {
        let out = run(&exe, &[bundle.to_str().unwrap(), "cuda"]);
        assert_eq!(out.status.code(), Some(3), "{}", String::from_utf8_lossy(&out.stderr));
    }
}
