//! The device layer. Without a GPU (or without a driver) `Device::new`
//! must fail cleanly, never panic; the GPU tests then print
//! `skipped: no CUDA device (<reason>)` and return. With a GPU they run a
//! hand-written PTX bundle and check its results against values computed
//! here from the kernel's definition.

mod common;

use std::collections::BTreeMap;
use std::io::Write;

use common::{manifest_value, write_bundle, x_values, TempDir, N, PTX};
use eintup_runtime::device::driver_present;
use eintup_runtime::{Bundle, Device, Error, Data, Tensor};
use serde_json::json;

/// The device, or `None` after printing why the test is skipped. Written to
/// the real stderr (not `eprintln!`, which the test harness captures) so
/// that the skip shows in `cargo test` output.
fn device_or_skip() -> Option<Device> {
    match Device::new(0) {
        Ok(d) => Some(d),
        Err(e) => {
            let _ = writeln!(std::io::stderr(), "skipped: no CUDA device ({e})");
            None
        }
    }
}

fn open(tag: &str, manifest: &serde_json::Value, ptx: &str) -> (TempDir, Bundle) {
    let dir = TempDir::new(tag);
    let path = write_bundle(&dir, &manifest.to_string(), ptx);
    let bundle = Bundle::open(path).unwrap();
    (dir, bundle)
}

fn x_input() -> BTreeMap<String, Tensor> {
    let x = Tensor::new(vec![N], Data::F32(x_values())).unwrap();
    BTreeMap::from([("x".to_string(), x)])
}

#[test]
fn devices_and_bundles_can_be_shared_between_threads() {
    fn send_sync<T: Send + Sync>() {}
    send_sync::<Device>();
    send_sync::<Bundle>();
}

#[test]
fn without_driver_new_reports_no_driver() {
    if driver_present() {
        let _ = writeln!(std::io::stderr(), "skipped: a CUDA driver is installed here");
        return;
    }
    let err = Device::new(0).expect_err("no driver, so no device");
    assert!(matches!(err, Error::NoDriver), "{err:?}");
    assert_eq!(err.to_string(), "no CUDA driver found (libcuda could not be loaded)");
    assert!(matches!(Device::count(), Err(Error::NoDriver)));
}

#[test]
fn new_fails_cleanly_for_any_ordinal() {
    // Never a panic; an absent device is NoDriver or NoDevice, nothing else.
    for ordinal in [0, 1, 7, usize::MAX] {
        match Device::new(ordinal) {
            Ok(d) => assert_eq!(d.ordinal(), ordinal),
            Err(Error::NoDriver) => {}
            Err(Error::NoDevice { ordinal: o, count }) => {
                assert_eq!(o, ordinal);
                assert!(count <= ordinal);
            }
            Err(e) => panic!("ordinal {ordinal}: unexpected {e:?}"),
        }
    }
    if driver_present() {
        assert!(matches!(Device::new(usize::MAX), Err(Error::NoDevice { .. })));
    }
}

#[test]
fn gpu_add_one_bundle() {
    let Some(dev) = device_or_skip() else { return };
    let (_dir, bundle) = open("gpu-run", &manifest_value(), PTX);
    let out = dev.run(&bundle, &x_input()).unwrap();
    assert_eq!(out.keys().collect::<Vec<_>>(), ["e", "x", "y", "z"]);
    // y = x + 1 and z = y + 1 element by element; all values are small
    // multiples of 1/2, so f32 arithmetic is exact. The empty-grid launch
    // (y += 1 in place) was skipped, otherwise z would be x + 3.
    let x = x_values();
    let want_y: Vec<f32> = x.iter().map(|v| v + 1.0).collect();
    let want_z: Vec<f32> = x.iter().map(|v| v + 2.0).collect();
    assert_eq!(out["x"].data, Data::F32(x));
    assert_eq!(out["y"].data, Data::F32(want_y));
    assert_eq!(out["z"].data, Data::F32(want_z));
    assert_eq!(out["z"].shape, vec![N]);
    assert_eq!((out["e"].shape.clone(), out["e"].data.clone()), (vec![0, 3], Data::F64(vec![])));
    // A second run starts from zeroed buffers again.
    let again = dev.run(&bundle, &x_input()).unwrap();
    assert_eq!(again["z"], out["z"]);
}

#[test]
fn gpu_run_timed_times_each_launch() {
    let Some(dev) = device_or_skip() else { return };
    let (_dir, bundle) = open("gpu-timed", &manifest_value(), PTX);
    let t = dev.run_timed(&bundle, &x_input(), 2, 5).unwrap();
    assert_eq!(t.reps, 5);
    // Steps 1, 3 and 5 are launched; step 2 has an empty grid.
    assert_eq!(t.launches.iter().map(|l| (l.step, l.kernel.as_str())).collect::<Vec<_>>(), [(1, "add_one"), (3, "add_one"), (5, "noop")]);
    assert!(t.total_ms.is_finite() && t.total_ms > 0.0, "{t:?}");
    assert!(t.launches.iter().all(|l| l.median_ms.is_finite() && l.median_ms >= 0.0), "{t:?}");
    assert!(matches!(dev.run_timed(&bundle, &x_input(), 0, 0), Err(Error::InvalidArgument(_))));
}

#[test]
fn gpu_input_errors_come_before_any_launch() {
    let Some(dev) = device_or_skip() else { return };
    let (_dir, bundle) = open("gpu-inputs", &manifest_value(), PTX);
    match dev.run(&bundle, &BTreeMap::new()) {
        Err(Error::Input { name, .. }) => assert_eq!(name, "x"),
        other => panic!("{other:?}"),
    }
}

#[test]
fn gpu_newer_target_is_rejected() {
    let Some(dev) = device_or_skip() else { return };
    let mut v = manifest_value();
    v["target"]["arch"] = json!("sm_990");
    let (_dir, bundle) = open("gpu-target", &v, &PTX.replace(".target sm_80", ".target sm_990"));
    match dev.run(&bundle, &x_input()) {
        Err(Error::Target { bundle, device }) => {
            assert_eq!(bundle, "sm_990");
            assert!(device.contains(dev.name()), "{device}");
        }
        other => panic!("{other:?}"),
    }
}

#[test]
fn gpu_jit_error_carries_the_log() {
    let Some(dev) = device_or_skip() else { return };
    let (_dir, bundle) = open("gpu-jit", &manifest_value(), &PTX.replace("add.rn.f32", "add.bogus.f32"));
    match dev.run(&bundle, &x_input()) {
        Err(Error::Driver(msg)) => assert!(msg.starts_with("cuModuleLoadDataEx"), "{msg}"),
        other => panic!("{other:?}"),
    }
}

#[test]
fn gpu_copy_timed_gives_a_positive_time_and_rejects_empty_copies() {
    let Some(dev) = device_or_skip() else { return };
    let ms = dev.copy_timed(1 << 24, 1, 3).unwrap();
    assert!(ms.is_finite() && ms > 0.0, "{ms}");
    assert!(matches!(dev.copy_timed(0, 0, 1), Err(Error::InvalidArgument(_))));
    assert!(matches!(dev.copy_timed(16, 0, 0), Err(Error::InvalidArgument(_))));
}

#[test]
fn gpu_inputs_left_out_are_generated_on_the_device() {
    let Some(dev) = device_or_skip() else { return };
    let (_dir, bundle) = open("gpu-generate", &common::manifest_with_generator(), PTX);
    // Generated: x = 0 + 1 everywhere, so z = x + 2 = 3 (exact in f32).
    let out = dev.run(&bundle, &BTreeMap::new()).unwrap();
    assert_eq!(out["x"].data, Data::F32(vec![1.0; N]));
    assert_eq!(out["z"].data, Data::F32(vec![3.0; N]));
    // Supplied, the input wins and no generator runs.
    let out = dev.run(&bundle, &x_input()).unwrap();
    assert_eq!(out["x"].data, Data::F32(x_values()));
    // Timing uses the generated input too.
    assert!(dev.run_timed(&bundle, &BTreeMap::new(), 1, 2).is_ok());
}
