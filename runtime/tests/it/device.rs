//! The device layer. Every test that runs a bundle runs it on the PTX
//! emulator, and on CUDA device 0 as well when there is one: both go
//! through the same run path, so these tests exercise input checks,
//! allocation, fills, generators, launch order and argument marshalling
//! on every machine. Without a GPU (or without a driver) `Device::new`
//! must fail cleanly, never panic; the GPU half of a test then prints
//! `skipped: no CUDA device (<reason>)`.

use crate::common;

use std::collections::BTreeMap;
use std::io::Write;

use common::{manifest_value, write_bundle, x_values, TempDir, N, PTX};
use eintup_runtime::device::driver_present;
use eintup_runtime::{Bundle, Data, Device, DeviceKind, Error, Tensor};
use serde_json::json;

use common::devices;

fn gpu_or_skip() -> Option<Device> {
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
    // The emulator is there regardless.
    assert_eq!(Device::open(DeviceKind::Emulator).unwrap().kind(), DeviceKind::Emulator);
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
fn add_one_bundle_runs_on_every_device() {
    for dev in devices() {
        let (_dir, bundle) = open("run", &manifest_value(), PTX);
        let out = dev.run(&bundle, &x_input()).unwrap();
        assert_eq!(out.keys().collect::<Vec<_>>(), ["e", "x", "y", "z"]);
        // y = x + 1 and z = y + 1 element by element; all values are small
        // multiples of 1/2, so f32 arithmetic is exact. The empty-grid launch
        // (y += 1 in place) was skipped, otherwise z would be x + 3.
        let x = x_values();
        let want_y: Vec<f32> = x.iter().map(|v| v + 1.0).collect();
        let want_z: Vec<f32> = x.iter().map(|v| v + 2.0).collect();
        assert_eq!(out["x"].data, Data::F32(x), "{dev:?}");
        assert_eq!(out["y"].data, Data::F32(want_y), "{dev:?}");
        assert_eq!(out["z"].data, Data::F32(want_z), "{dev:?}");
        assert_eq!(out["z"].shape, vec![N]);
        assert_eq!((out["e"].shape.clone(), out["e"].data.clone()), (vec![0, 3], Data::F64(vec![])));
        // A second run starts from zeroed buffers again.
        let again = dev.run(&bundle, &x_input()).unwrap();
        assert_eq!(again["z"], out["z"]);
    }
}

#[test]
fn the_emulator_profiles_what_ran() {
    let (_dir, bundle) = open("profile", &manifest_value(), PTX);
    let (out, profile) = Device::emulator().run_profiled(&bundle, &x_input()).unwrap();
    assert_eq!(out["z"].data, Data::F32(x_values().iter().map(|v| v + 2.0).collect()));
    // Two launches of add_one (the empty one is skipped), one of noop.
    let names: Vec<(&str, u64)> = profile.kernels.iter().map(|p| (p.name.as_str(), p.launches)).collect();
    assert_eq!(names, [("add_one", 2), ("noop", 1)]);
    let p = profile.get("add_one").unwrap();
    // Each launch moves N floats in and N out: coalesced, 4000 bytes are
    // 125 sectors each way, one request per warp and loop trip.
    assert_eq!(p.global_bytes, 2 * 2 * 4 * N as u64);
    assert_eq!((p.global_load_sectors, p.global_store_sectors), (250, 250));
    assert_eq!(p.flops, 2 * N as u64);
    // Grid 2x128 covers 1000 elements in 4 trips (256 threads), 3x64 in 6.
    assert_eq!(p.global_load_requests, 32 + 32);
    assert_eq!(profile.get("noop").unwrap().warp_instructions, 1);
    assert!(Device::new(0).map_or(true, |gpu| gpu.run_profiled(&bundle, &x_input()).is_err()));
}

#[test]
fn input_errors_come_before_any_launch() {
    for dev in devices() {
        let (_dir, bundle) = open("inputs", &manifest_value(), PTX);
        match dev.run(&bundle, &BTreeMap::new()) {
            Err(Error::Input { name, .. }) => assert_eq!(name, "x"),
            other => panic!("{dev:?}: {other:?}"),
        }
    }
}

#[test]
fn newer_target_is_rejected() {
    for dev in devices() {
        let mut v = manifest_value();
        v["target"]["arch"] = json!("sm_990");
        let (_dir, bundle) = open("target", &v, &PTX.replace(".target sm_80", ".target sm_990"));
        match dev.run(&bundle, &x_input()) {
            Err(Error::Target { bundle, device }) => {
                assert_eq!(bundle, "sm_990");
                assert!(device.contains(dev.name()), "{device}");
            }
            other => panic!("{dev:?}: {other:?}"),
        }
    }
}

#[test]
fn bad_instructions_are_reported_with_their_line() {
    for dev in devices() {
        let (_dir, bundle) = open("jit", &manifest_value(), &PTX.replace("add.rn.f32", "add.bogus.f32"));
        match (dev.kind(), dev.run(&bundle, &x_input())) {
            (DeviceKind::Cuda, Err(Error::Driver(msg))) => assert!(msg.starts_with("cuModuleLoadDataEx"), "{msg}"),
            (DeviceKind::Emulator, Err(Error::BadPtx(msg))) => {
                assert!(msg.starts_with("line 36: the emulator does not support `.bogus` on `add.bogus.f32`"), "{msg}")
            }
            (_, other) => panic!("{dev:?}: {other:?}"),
        }
    }
}

#[test]
fn inputs_left_out_are_generated_on_the_device() {
    for dev in devices() {
        let (_dir, bundle) = open("generate", &common::manifest_with_generator(), PTX);
        // Generated: x = 0 + 1 everywhere, so z = x + 2 = 3 (exact in f32).
        let out = dev.run(&bundle, &BTreeMap::new()).unwrap();
        assert_eq!(out["x"].data, Data::F32(vec![1.0; N]));
        assert_eq!(out["z"].data, Data::F32(vec![3.0; N]));
        // Supplied, the input wins and no generator runs.
        let out = dev.run(&bundle, &x_input()).unwrap();
        assert_eq!(out["x"].data, Data::F32(x_values()));
    }
}

#[test]
fn timing_is_for_gpus_only() {
    let (_dir, bundle) = open("emu-timed", &manifest_value(), PTX);
    let emu = Device::emulator();
    assert!(matches!(emu.run_timed(&bundle, &x_input(), 0, 1), Err(Error::InvalidArgument(_))));
    assert!(matches!(emu.copy_timed(16, 0, 1), Err(Error::InvalidArgument(_))));
}

#[test]
fn gpu_run_timed_times_each_launch() {
    let Some(dev) = gpu_or_skip() else { return };
    let (_dir, bundle) = open("gpu-timed", &manifest_value(), PTX);
    let t = dev.run_timed(&bundle, &x_input(), 2, 5).unwrap();
    assert_eq!(t.reps, 5);
    // Steps 1, 3 and 5 are launched; step 2 has an empty grid.
    assert_eq!(t.launches.iter().map(|l| (l.step, l.kernel.as_str())).collect::<Vec<_>>(), [(1, "add_one"), (3, "add_one"), (5, "noop")]);
    assert!(t.total_ms.is_finite() && t.total_ms > 0.0, "{t:?}");
    assert!(t.launches.iter().all(|l| l.median_ms.is_finite() && l.median_ms >= 0.0), "{t:?}");
    assert!(matches!(dev.run_timed(&bundle, &x_input(), 0, 0), Err(Error::InvalidArgument(_))));
    // Timing uses generated inputs too.
    let (_dir, gen) = open("gpu-timed-gen", &common::manifest_with_generator(), PTX);
    assert!(dev.run_timed(&gen, &BTreeMap::new(), 1, 2).is_ok());
}

#[test]
fn gpu_copy_timed_gives_a_positive_time_and_rejects_empty_copies() {
    let Some(dev) = gpu_or_skip() else { return };
    let ms = dev.copy_timed(1 << 24, 1, 3).unwrap();
    assert!(ms.is_finite() && ms > 0.0, "{ms}");
    assert!(matches!(dev.copy_timed(0, 0, 1), Err(Error::InvalidArgument(_))));
    assert!(matches!(dev.copy_timed(16, 0, 0), Err(Error::InvalidArgument(_))));
}
