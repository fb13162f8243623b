//! The C ABI called as C calls it (through the extern fns of the rlib):
//! every error path returns its status and message and crashes nothing —
//! null pointers, bad UTF-8, unknown names, wrong dtypes, shapes and sizes,
//! a bad bundle path — and device buffers bind and run in place.

use crate::common;

use std::ffi::{c_char, c_void, CStr, CString};
use std::ptr::{null, null_mut};

use common::{manifest_value, write_bundle, TempDir, N, PTX};
use eintup_rt::*;

fn c(s: &str) -> CString {
    CString::new(s).unwrap()
}

fn last_error() -> String {
    // SAFETY: the library's NUL-terminated message.
    unsafe { CStr::from_ptr(et_last_error()) }.to_str().unwrap().to_string()
}

/// `(status, message)` of a call that must fail.
fn failure(status: EtStatus) -> (EtStatus, String) {
    assert_ne!(status, ET_OK, "expected a failure");
    (status, last_error())
}

fn ok(status: EtStatus) {
    assert_eq!(status, ET_OK, "{}", last_error());
}

struct Loaded {
    _dir: TempDir,
    dev: *mut EtDevice,
    prog: *mut EtProgram,
}

impl Drop for Loaded {
    fn drop(&mut self) {
        // SAFETY: handles made by `load`, freed once.
        unsafe {
            ok(et_program_free(self.prog));
            ok(et_device_free(self.dev));
        }
    }
}

/// The runtime tests' bundle (`z = x + 2` over `N` f32s, temporary `y`,
/// empty output `e`) loaded on the emulator.
fn load() -> Loaded {
    load_bundle(&manifest_value().to_string(), PTX)
}

/// A bundle of this manifest and PTX loaded on the emulator.
fn load_bundle(manifest: &str, ptx: &str) -> Loaded {
    let dir = TempDir::new("capi-errors");
    let path = c(write_bundle(&dir, manifest, ptx).to_str().unwrap());
    let (mut dev, mut bundle, mut prog) = (null_mut(), null_mut(), null_mut());
    // SAFETY: valid strings and out-pointers; handles freed by Loaded.
    unsafe {
        ok(et_device_open(c("emu").as_ptr(), 0, &mut dev));
        ok(et_bundle_load(path.as_ptr(), &mut bundle));
        ok(et_program_load(dev, bundle, &mut prog));
        ok(et_bundle_free(bundle));
    }
    Loaded { _dir: dir, dev, prog }
}

fn xs() -> Vec<f32> {
    common::x_values()
}

/// Writes `data` of `dtype` and shape `shape` into `name`.
unsafe fn write<T>(prog: *mut EtProgram, name: &str, dtype: i32, shape: &[i64], data: &[T]) -> EtStatus {
    // SAFETY: the caller's handle; the slices are valid.
    unsafe { et_program_write(prog, c(name).as_ptr(), dtype, shape.len(), shape.as_ptr(), data.as_ptr().cast(), std::mem::size_of_val(data)) }
}

#[test]
fn devices_and_bundles_refuse_bad_arguments() {
    let mut dev = null_mut();
    // SAFETY (all calls): arguments are null, valid, or deliberately wrong
    // in ways the library checks.
    unsafe {
        assert_eq!(failure(et_device_open(null(), 0, &mut dev)), (ET_ERROR_INPUT, "invalid argument: `kind` is a null pointer".into()));
        assert_eq!(
            failure(et_device_open(c("tpu").as_ptr(), 0, &mut dev)),
            (ET_ERROR_INPUT, "invalid argument: unknown device `tpu` (expected `cuda` or `emu`)".into())
        );
        let not_utf8 = [0xffu8, 0];
        assert_eq!(failure(et_device_open(not_utf8.as_ptr().cast::<c_char>(), 0, &mut dev)), (ET_ERROR_INPUT, "invalid argument: `kind` is not UTF-8".into()));
        assert_eq!(failure(et_device_open(c("emu").as_ptr(), 1, &mut dev)), (ET_ERROR_INPUT, "invalid argument: the emulator is device 0 only, not 1".into()));
        assert_eq!(failure(et_device_open(c("emu").as_ptr(), 0, null_mut())), (ET_ERROR_INPUT, "invalid argument: `out` is a null pointer".into()));
        assert!(dev.is_null(), "no handle on failure");
        if !eintup_runtime::device::driver_present() {
            assert_eq!(
                failure(et_device_open(c("cuda").as_ptr(), 0, &mut dev)),
                (ET_ERROR_NO_DRIVER, "no CUDA driver found (libcuda could not be loaded)".into())
            );
        }
        let mut bundle = null_mut();
        let dir = TempDir::new("capi-bad-bundle");
        let missing = dir.path().join("none.etb");
        let (status, message) = failure(et_bundle_load(c(missing.to_str().unwrap()).as_ptr(), &mut bundle));
        assert_eq!((status, message), (ET_ERROR_INPUT, format!("{}: No such file or directory (os error 2)", missing.join("manifest.json").display())));
        let damaged = write_bundle(&dir, "{\"format_version\": 1", PTX);
        let (status, message) = failure(et_bundle_load(c(damaged.to_str().unwrap()).as_ptr(), &mut bundle));
        assert!(status == ET_ERROR_INPUT && message.starts_with("bad bundle manifest: "), "{message}");
        assert_eq!(failure(et_bundle_load(null(), &mut bundle)).1, "invalid argument: `path` is a null pointer");
        assert_eq!(failure(et_program_load(null(), null(), &mut null_mut())).1, "invalid argument: `device` is a null pointer");
        // Freeing null is nothing; a success leaves the last message alone.
        ok(et_device_free(null_mut()));
        ok(et_bundle_free(null_mut()));
        ok(et_program_free(null_mut()));
        ok(et_buffer_free(null_mut()));
        assert_eq!(last_error(), "invalid argument: `device` is a null pointer");
    }
}

#[test]
fn a_program_runs_and_reports_what_its_buffers_hold() {
    let l = load();
    // SAFETY (all calls): live handles, valid or deliberately wrong arguments.
    unsafe {
        let mut count = 0;
        ok(et_program_buffer_count(l.prog, &mut count));
        let names: Vec<String> = (0..count)
            .map(|i| {
                let mut name = null();
                ok(et_program_buffer_name(l.prog, i, &mut name));
                CStr::from_ptr(name).to_str().unwrap().to_string()
            })
            .collect();
        assert_eq!(names, ["x", "y", "z", "e"]);
        let (mut role, mut dtype, mut ndim, mut shape, mut bytes) = (-1, -1, 0usize, [0i64; 2], 0usize);
        ok(et_program_buffer_info(l.prog, c("e").as_ptr(), &mut role, &mut dtype, &mut ndim, shape.as_mut_ptr(), 2, &mut bytes));
        assert_eq!((role, dtype, ndim, shape, bytes), (ET_ROLE_OUTPUT, ET_DTYPE_F64, 2, [0, 3], 0));
        ok(et_program_buffer_info(l.prog, c("x").as_ptr(), &mut role, &mut dtype, &mut ndim, null_mut(), 0, &mut bytes));
        assert_eq!((role, dtype, ndim, bytes), (ET_ROLE_INPUT, ET_DTYPE_F32, 1, N * 4));
        assert_eq!(
            failure(et_program_buffer_info(l.prog, c("e").as_ptr(), null_mut(), null_mut(), null_mut(), shape.as_mut_ptr(), 1, null_mut())).1,
            "invalid argument: buffer `e` has 2 dims; `shape` holds 1"
        );
        assert_eq!(
            failure(et_program_buffer_info(l.prog, c("q").as_ptr(), null_mut(), null_mut(), null_mut(), null_mut(), 0, null_mut())).1,
            "invalid argument: the bundle has no buffer `q`"
        );
        assert_eq!(failure(et_program_buffer_name(l.prog, 4, &mut null())).1, "invalid argument: buffer index 4: the bundle has 4 buffers");

        assert_eq!(
            failure(et_program_run(l.prog)),
            (ET_ERROR_INPUT, "input `x`: not written (expected f32 of shape [1000]) and the bundle cannot generate it".into())
        );
        ok(write(l.prog, "x", ET_DTYPE_F32, &[N as i64], &xs()));
        ok(et_program_run(l.prog));
        ok(et_program_synchronize(l.prog));
        let mut z = vec![0f32; N];
        ok(et_program_read(l.prog, c("z").as_ptr(), z.as_mut_ptr().cast(), N * 4));
        assert_eq!(z, xs().iter().map(|v| v + 2.0).collect::<Vec<_>>(), "z = x + 1 + 1");
        ok(et_program_read(l.prog, c("e").as_ptr(), null_mut(), 0));
    }
}

#[test]
fn bad_writes_and_reads_are_errors() {
    let l = load();
    let x = xs();
    // SAFETY (all calls): live handles, valid or deliberately wrong arguments.
    unsafe {
        let n = N as i64;
        assert_eq!(failure(write(l.prog, "q", ET_DTYPE_F32, &[n], &x)), (ET_ERROR_INPUT, "input `q`: the bundle has no buffer of this name".into()));
        assert_eq!(failure(write(l.prog, "z", ET_DTYPE_F32, &[n], &x)).1, "input `z`: is an output buffer, not an input");
        let ints = vec![0i32; N];
        assert_eq!(failure(write(l.prog, "x", ET_DTYPE_I32, &[n], &ints)).1, "input `x`: dtype i32, expected f32");
        assert_eq!(failure(write(l.prog, "x", ET_DTYPE_F32, &[2, n / 2], &x)).1, "input `x`: shape [2, 500], expected [1000]");
        assert_eq!(
            failure(write(l.prog, "x", 7, &[n], &x)).1,
            "invalid argument: dtype code 7 is none of ET_DTYPE_I32 (0), ET_DTYPE_F32 (1), ET_DTYPE_F64 (2)"
        );
        assert_eq!(failure(write(l.prog, "x", ET_DTYPE_F32, &[-1], &x)).1, "invalid argument: shape [-1] has a negative dim");
        assert_eq!(failure(write(l.prog, "x", ET_DTYPE_F32, &[n], &x[..10])).1, "invalid argument: 40 bytes for f32 of shape [1000], which has 4000 bytes");
        let status = et_program_write(l.prog, c("x").as_ptr(), ET_DTYPE_F32, 1, [n].as_ptr(), null(), N * 4);
        assert_eq!(failure(status).1, "invalid argument: `data` is a null pointer");
        let status = et_program_write(l.prog, c("x").as_ptr(), ET_DTYPE_F32, 1, null(), x.as_ptr().cast(), N * 4);
        assert_eq!(failure(status).1, "invalid argument: `shape` is a null pointer with ndim 1");
        assert_eq!(
            failure(et_program_write(null_mut(), c("x").as_ptr(), ET_DTYPE_F32, 0, null(), null(), 0)).1,
            "invalid argument: `program` is a null pointer"
        );
        assert_eq!(failure(et_program_write(l.prog, null(), ET_DTYPE_F32, 0, null(), null(), 0)).1, "invalid argument: `name` is a null pointer");

        let mut z = vec![0f32; N];
        assert_eq!(
            failure(et_program_read(l.prog, c("z").as_ptr(), z.as_mut_ptr().cast(), 8)).1,
            "invalid argument: reading buffer `z` (f32 of shape [1000], 4000 bytes) into 8 bytes"
        );
        assert_eq!(failure(et_program_read(l.prog, c("z").as_ptr(), null_mut(), N * 4)).1, "invalid argument: `out` is a null pointer");
        assert_eq!(failure(et_program_read(l.prog, c("w").as_ptr(), z.as_mut_ptr().cast(), N * 4)).1, "invalid argument: the bundle has no buffer `w`");
        assert_eq!(failure(et_program_run(null_mut())).1, "invalid argument: `program` is a null pointer");
    }
}

#[test]
fn device_buffers_bind_and_run_in_place() {
    let l = load();
    let x = xs();
    let n = [N as i64];
    // SAFETY (all calls): live handles, valid or deliberately wrong arguments.
    unsafe {
        let (mut bx, mut bz, mut bad) = (null_mut(), null_mut(), null_mut());
        ok(et_buffer_alloc(l.dev, ET_DTYPE_F32, 1, n.as_ptr(), &mut bx));
        ok(et_buffer_alloc(l.dev, ET_DTYPE_F32, 1, n.as_ptr(), &mut bz));
        ok(et_buffer_write(bx, ET_DTYPE_F32, 1, n.as_ptr(), x.as_ptr().cast(), N * 4));
        ok(et_program_bind(l.prog, c("x").as_ptr(), bx));
        ok(et_program_bind(l.prog, c("z").as_ptr(), bz));
        // The program holds its own references: the caller's go at once.
        ok(et_buffer_free(bx));
        ok(et_program_run(l.prog));
        let mut z = vec![0f32; N];
        ok(et_buffer_read(bz, z.as_mut_ptr().cast(), N * 4));
        assert_eq!(z, x.iter().map(|v| v + 2.0).collect::<Vec<_>>());
        // Wrapping the output's address gives the same memory.
        let mut addr = 0;
        ok(et_buffer_device_ptr(bz, &mut addr));
        let mut wrapped = null_mut();
        ok(et_buffer_wrap(l.dev, addr, N * 4, ET_DTYPE_F32, 1, n.as_ptr(), &mut wrapped));
        let mut again = vec![0f32; N];
        ok(et_buffer_read(wrapped, again.as_mut_ptr().cast(), N * 4));
        assert_eq!(again, z);
        ok(et_buffer_free(wrapped));

        ok(et_buffer_alloc(l.dev, ET_DTYPE_I32, 1, n.as_ptr(), &mut bad));
        assert_eq!(
            failure(et_program_bind(l.prog, c("z").as_ptr(), bad)),
            (ET_ERROR_INPUT, "invalid argument: binding buffer `z`: the DeviceBuffer has dtype i32, expected f32".into())
        );
        assert_eq!(failure(et_program_bind(l.prog, c("z").as_ptr(), null())).1, "invalid argument: `buffer` is a null pointer");
        assert_eq!(failure(et_buffer_read(bz, z.as_mut_ptr().cast(), 4)).1, "invalid argument: reading a buffer of 4000 bytes into 4 bytes");
        let ints = vec![1i32; N];
        assert_eq!(
            failure(et_buffer_write(bz, ET_DTYPE_I32, 1, n.as_ptr(), ints.as_ptr().cast(), N * 4)).1,
            "invalid argument: writing a DeviceBuffer of f32 and shape [1000] from a tensor of i32 and shape [1000]"
        );
        assert_eq!(failure(et_buffer_alloc(l.dev, ET_DTYPE_F32, 1, [-5i64].as_ptr(), &mut bad)).1, "invalid argument: shape [-5] has a negative dim");
        let (status, message) = failure(et_buffer_wrap(l.dev, 0x10, 4, ET_DTYPE_F32, 1, [1i64].as_ptr(), &mut bad));
        assert!(status == ET_ERROR_INPUT && message.contains("not inside one buffer of the emulator"), "{message}");
        // The stream call is accepted and changes nothing on the emulator.
        ok(et_program_use_stream(l.prog, 0x1234 as *mut c_void));
        ok(et_program_unbind(l.prog, c("z").as_ptr()));
        ok(et_program_run(l.prog));
        let mut own = vec![0f32; N];
        ok(et_program_read(l.prog, c("z").as_ptr(), own.as_mut_ptr().cast(), N * 4));
        assert_eq!(own, z, "the program's own output again");
        ok(et_buffer_free(bz));
        ok(et_buffer_free(bad));
    }
}

/// A dynamic bundle (`y = x + 1` over `n` f32s) reshaped from C
/// (`et_program_reshape`): each shape runs, `et_program_buffer_info`
/// follows it; bad shapes, a static bundle and null arrays are refused.
#[test]
fn a_dynamic_program_is_reshaped_from_c() {
    let l = load_bundle(&common::dynamic_manifest_value().to_string(), common::DYN_PTX);
    let x_name = c("x");
    let names = [x_name.as_ptr()];
    // SAFETY (all calls): valid handles and arrays of the given lengths, or
    // deliberately wrong ones the library checks.
    unsafe {
        for n in [1000usize, 0, 5] {
            let shape = [n as i64];
            let shapes = [shape.as_ptr()];
            ok(et_program_reshape(l.prog, 1, names.as_ptr(), [1usize].as_ptr(), shapes.as_ptr()));
            let (mut ndim, mut dims, mut bytes) = (0usize, [0i64; 1], 0usize);
            ok(et_program_buffer_info(l.prog, c("y").as_ptr(), null_mut(), null_mut(), &mut ndim, dims.as_mut_ptr(), 1, &mut bytes));
            assert_eq!((ndim, dims[0], bytes), (1, n as i64, n * 4));
            let x: Vec<f32> = (0..n).map(|i| i as f32 - 7.5).collect();
            ok(write(l.prog, "x", ET_DTYPE_F32, &shape, &x));
            ok(et_program_run(l.prog));
            let mut y = vec![0f32; n];
            ok(et_program_read(l.prog, c("y").as_ptr(), y.as_mut_ptr().cast(), n * 4));
            assert_eq!(y, x.iter().map(|v| v + 1.0).collect::<Vec<f32>>(), "n = {n}");
        }
        // A rank the bundle does not have names the input.
        let shape = [2i64, 3];
        let (status, msg) = failure(et_program_reshape(l.prog, 1, names.as_ptr(), [2usize].as_ptr(), [shape.as_ptr()].as_ptr()));
        assert_eq!(status, ET_ERROR_INPUT, "{msg}");
        assert!(msg.contains("`x`") && msg.contains("rank 2"), "{msg}");
        let shape = [-1i64];
        let (status, msg) = failure(et_program_reshape(l.prog, 1, names.as_ptr(), [1usize].as_ptr(), [shape.as_ptr()].as_ptr()));
        assert_eq!(status, ET_ERROR_INPUT, "{msg}");
        assert!(msg.contains("negative"), "{msg}");
        let (_, msg) = failure(et_program_reshape(l.prog, 1, null(), [1usize].as_ptr(), [shape.as_ptr()].as_ptr()));
        assert!(msg.contains("`names` is a null pointer"), "{msg}");
        // No input: nothing gives `n.0`.
        let (_, msg) = failure(et_program_reshape(l.prog, 0, null(), null(), null()));
        assert!(msg.contains("n.0") && msg.contains("given by no input"), "{msg}");
        // The refusals left the program at 5 elements.
        let mut y = vec![0f32; 5];
        ok(et_program_read(l.prog, c("y").as_ptr(), y.as_mut_ptr().cast(), 20));
    }
    let s = load();
    // SAFETY: a valid handle; no arrays.
    let (_, msg) = failure(unsafe { et_program_reshape(s.prog, 0, null(), null(), null()) });
    assert!(msg.contains("static"), "{msg}");
}
