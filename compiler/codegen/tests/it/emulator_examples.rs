//! Every example's PTX bundle on the PTX emulator against the reference
//! interpreter, without a GPU: default configurations with several seeds,
//! f64 and f32, and every zero-sized and rank-0 binding the constraints
//! allow. Inputs are left to the bundle's generator kernels, so the
//! generated inputs are checked too (bit for bit), then INT outputs exactly
//! and FLOAT outputs within `|got - want| <= rtol * max(1, max |want|)`,
//! rtol 1e-12 for f64 and 1e-5 for f32: the emulator computes in the
//! kernels' order (grid-stride threads, atomics in thread order), not the
//! interpreter's, so only rounding may differ.
//!
//! Planted faults in real bundles are caught: a grid-stride loop bound one
//! too far in the PTX text, and kernel arguments swapped in the manifest.

use std::collections::BTreeMap;
use std::path::Path;
use std::time::{Duration, Instant};

use eintup::driver::Source;
use eintup::interp::{self, RunOptions};
use eintup::ir::loops::FloatWidth;
use eintup::tensor::{Data, Tensor};
use eintup_codegen::bundle::{self, BuildOptions};
use eintup_codegen::FpContract;
use eintup_runtime::manifest::Step;
use eintup_runtime::{Bundle, Device, Error, FaultKind, ProfileReport};
use eintup_testkit::{assert_close, examples, Tol};

/// A compiled configuration and the interpreter's arrays for it.
struct Case {
    what: String,
    bundle: Bundle,
    /// Module arrays: name, whether an input, the interpreter's values.
    arrays: Vec<(String, bool, Tensor)>,
    float: FloatWidth,
}

/// `None` when the bindings contradict the program's constraints. The
/// bundle fuses multiply-adds (`--fp-contract fast`, the GPU default).
fn case(path: &Path, binds: &[String], seed: u64, float: FloatWidth) -> Option<Case> {
    case_with(path, binds, seed, float, FpContract::Fast)
}

fn case_with(path: &Path, binds: &[String], seed: u64, float: FloatWidth, fp_contract: FpContract) -> Option<Case> {
    let src = Source::load(path).unwrap();
    let (m, cfg) = eintup::pipeline::specialized_module(&src, binds, seed).ok()?;
    let what = format!("{} {binds:?} seed {seed} {float:?}", path.file_name().unwrap().to_string_lossy());
    let lm = eintup::pipeline::lower_gpu(&src, &m, &eintup::pipeline::GpuOptions::new(float, fp_contract, eintup::ir::loops::target::DEFAULT_SM))
        .unwrap_or_else(|e| panic!("{what}: {e:?}"));
    let bundle = bundle::build(&src, &m, &lm, &cfg, &BuildOptions { seed, float, sm: 80, fp_contract }).unwrap_or_else(|e| panic!("{what}: {e:?}"));
    let opts = RunOptions { seed, float, inputs: Default::default(), ..RunOptions::default() };
    let want = interp::run(&m, &opts).unwrap_or_else(|e| panic!("{what}: {e:?}"));
    let arrays = m.arrays.iter().zip(want).map(|(a, t)| (a.name.clone(), a.is_input, t)).collect();
    Some(Case { what, bundle, arrays, float })
}

/// Runs a case on the emulator and compares; returns the profile and the
/// time the emulator took.
fn check(c: &Case) -> (ProfileReport, Duration) {
    let start = Instant::now();
    let (out, profile) = Device::emulator().run_profiled(&c.bundle, &BTreeMap::new()).unwrap_or_else(|e| panic!("{}: {e}", c.what));
    let took = start.elapsed();
    let rtol = if c.float == FloatWidth::F32 { 1e-5 } else { 1e-12 };
    for (name, is_input, want) in &c.arrays {
        let got = &out[name];
        let what = format!("{}: `{name}`", c.what);
        assert_eq!(got.shape, want.shape, "{what}: shape");
        match (&got.data, &want.data) {
            (Data::I32(g), Data::I32(w)) => assert_eq!(g, w, "{what}: INT values"),
            _ if *is_input => assert_eq!(got.data, want.data, "{what}: generated input differs from the interpreter's"),
            _ => {
                let (g, w) = (got.to_f64_vec(), want.to_f64_vec());
                let scale = w.iter().fold(1.0f64, |m, x| m.max(x.abs()));
                assert_close(&what, &g, &w, Tol { rel: 0.0, abs: rtol * scale });
            }
        }
    }
    (profile, took)
}

/// Every example in its default configuration for three seeds (f64) and
/// one (f32), and with each eintup bound to a zero-sized and a rank-0
/// shape (f64 and f32 alternately) where the constraints allow.
fn configurations() -> Vec<Case> {
    let mut cases = Vec::new();
    for p in examples() {
        for (seed, float) in [(0, FloatWidth::F64), (1, FloatWidth::F64), (2, FloatWidth::F64), (5, FloatWidth::F32)] {
            cases.push(case(&p, &[], seed, float).expect("the default configuration is valid"));
        }
        let src = Source::load(&p).unwrap();
        let prog = eintup::pipeline::resolved(&src).unwrap();
        for (i, e) in prog.module.eintups.iter().enumerate() {
            let float = if i % 2 == 0 { FloatWidth::F64 } else { FloatWidth::F32 };
            for b in [format!("{}=[0]", e.name), format!("{}=[]", e.name)] {
                cases.extend(case(&p, &[b], 3, float));
            }
        }
    }
    cases
}

#[test]
fn every_example_on_the_emulator_matches_the_interpreter() {
    let cases = configurations();
    let (mut thread_instructions, mut emulated) = (0u64, Duration::ZERO);
    let (mut zero_sized, mut rank0) = (0, 0);
    for c in &cases {
        let (profile, took) = check(c);
        thread_instructions += profile.kernels.iter().map(|k| k.thread_instructions).sum::<u64>();
        emulated += took;
        zero_sized += c.what.contains("=[0]") as usize;
        rank0 += c.what.contains("=[]") as usize;
    }
    // Most examples' constraints forbid empty dims; a few allow them.
    assert!(zero_sized >= 3 && rank0 >= 20, "only {zero_sized} zero-sized and {rank0} rank-0 configurations were valid");
    eprintln!(
        "{} configurations: {thread_instructions} thread instructions emulated in {:.3} s ({:.1} M/s)",
        cases.len(),
        emulated.as_secs_f64(),
        thread_instructions as f64 / emulated.as_secs_f64().max(1e-9) / 1e6
    );
}

/// The profile of one example's main kernels at its default configuration
/// (f32, seed 0), printed for docs/emulator.md; checks the counters that
/// follow from the program alone.
fn profile_of(name: &str) -> ProfileReport {
    let c = case(&eintup_testkit::example(name), &[], 0, FloatWidth::F32).unwrap();
    let (profile, _) = check(&c);
    eprintln!("{name}:\n{}", profile.table());
    profile
}

#[test]
fn profiles_of_the_examples() {
    // matmul: c[3,1,6,11] from a[3,1,6,10] b[3,1,10,11], 10 multiply-adds
    // per element (`--fp-contract fast`). The reset is the kernel's first
    // store (`fuse-resets`), so the first term is added to -0.0, which
    // leaves it unchanged: a `mul`, then 9 `fma`; `c` is written once and
    // never read.
    let p = profile_of("matmul.et");
    let c = p.get("s2_c").unwrap();
    assert_eq!((c.flops, c.fma), (198 + 2 * 9 * 198, 9 * 198));
    assert_eq!(c.global_bytes, 4 * (198 * (10 + 10) + 198));
    // Generators ran for both inputs.
    assert!(p.get("s0_a").is_some() && p.get("s1_b").is_some());
    for name in ["conv_valid.et", "reduce_sum.et", "gather_nd.et", "space_to_depth.et"] {
        let p = profile_of(name);
        assert!(p.kernels.iter().all(|k| k.launches >= 1 && k.warp_instructions > 0), "{name}");
        if name == "space_to_depth.et" {
            // A data movement: INT elements only, no arithmetic on floats.
            assert!(p.kernels.iter().all(|k| k.flops == 0), "{p:?}");
        }
    }
}

/// Block tiles' copies load 16 bytes per thread (docs/codegen.md, "Vector
/// loads"): a 256 x 64 x 256 f32 matmul (16 blocks of 16 x 16 threads, 64
/// x 64 cells, 4 steps of 16) copies 64 x 16 values of `a` and of `b` per
/// block and step, 2,048 in all: 16 warp requests of 32 lanes x 4 values,
/// 16 sectors each. One `f32` per thread would take 4x the requests (64
/// per block and step, 4 sectors each) for the same sectors. Without
/// contraction the results are the interpreter's bit for bit.
#[test]
fn block_tile_copies_load_16_bytes_per_thread() {
    let binds: Vec<String> = ["batch=[]", "row=[256]", "k=[64]", "col=[256]"].iter().map(|b| b.to_string()).collect();
    let c = case_with(&eintup_testkit::example("matmul.et"), &binds, 0, FloatWidth::F32, FpContract::Off).unwrap();
    let ptx = c.bundle.ptx();
    let (start, end) = kernel_text(ptx, "s2_c");
    let text = &ptx[start..end];
    assert!(text.contains("ld.global.nc.v4.f32") && !text.contains("ld.global.nc.f32"), "{text}");
    let (p, _) = check(&c);
    let want = c.arrays.iter().find(|(n, _, _)| n == "c").unwrap().2.clone();
    let got = Device::emulator().run(&c.bundle, &BTreeMap::new()).unwrap();
    assert_eq!(got["c"].data, want.data, "bit for bit");
    let k = p.get("s2_c").unwrap();
    let (blocks, steps, values) = (16, 4, 2 * 64 * 16);
    assert_eq!(k.global_load_requests, blocks * steps * values / (32 * 4));
    assert_eq!(k.global_load_sectors, blocks * steps * values * 4 / 32);
    assert_eq!(k.global_load_sectors, 16 * k.global_load_requests);
}

/// Copies and elementwise kernels move 16 bytes per thread
/// (`widen-threads`, docs/passes.md): a gather of 4,096 rows of 32 f32 is
/// 1,024 warp stores of 32 lanes x 4 values (16 sectors each) where one
/// value per thread took 4,096 requests; a space-to-depth in f64 and a
/// bias add in f64 move 2 values per access. Copies are exact, so the
/// results are the interpreter's bit for bit.
#[test]
fn copies_and_elementwise_kernels_move_16_bytes_per_thread() {
    // (example, binds, FLOAT, kernel, output, lanes, stored vector, cells)
    let cases: [(&str, &[&str], FloatWidth, &str, &str, u64, &str, u64); 3] = [
        ("gather_nd.et", &["batch=[]", "loc=[64,64]", "item=[32]", "w=[4096]"], FloatWidth::F32, "s2_dst", "dst", 4, "st.global.v4.f32", 4096 * 32),
        // INT elements, 4 bytes whatever FLOAT is.
        ("space_to_depth.et", &["batch=[2]", "pos=[64,64]", "chan=[16]", "blk=[2,2]"], FloatWidth::F64, "s1_y", "y", 4, "st.global.v4.u32", 2 * 64 * 64 * 16),
        ("bias_add.et", &["batch=[64]", "pos=[16]", "chan=[64]"], FloatWidth::F64, "s2_y", "y", 2, "st.global.v2.f64", 64 * 16 * 64),
    ];
    for (file, binds, float, kernel, out, lanes, vector, cells) in cases {
        let binds: Vec<String> = binds.iter().map(|b| b.to_string()).collect();
        let c = case_with(&eintup_testkit::example(file), &binds, 0, float, FpContract::Off).unwrap();
        let ptx = c.bundle.ptx();
        let (start, end) = kernel_text(ptx, kernel);
        let text = &ptx[start..end];
        assert!(text.contains(vector) && text.matches("st.global").count() == 1, "{file}:\n{text}");
        let (p, _) = check(&c);
        let want = c.arrays.iter().find(|(n, _, _)| n == out).unwrap().2.clone();
        let got = Device::emulator().run(&c.bundle, &BTreeMap::new()).unwrap();
        assert_eq!(got[out].data, want.data, "{file}: bit for bit");
        let k = p.get(kernel).unwrap();
        assert_eq!(k.global_store_requests, cells / (32 * lanes), "{file}");
        assert_eq!(k.global_store_sectors, 16 * k.global_store_requests, "{file}");
    }
}

/// A matmul bundle (f64) and the interpreter's `c`.
fn matmul(binds: &[&str]) -> (Bundle, Tensor) {
    let binds: Vec<String> = binds.iter().map(|b| b.to_string()).collect();
    // Without contraction, so the interpreter's result is exact.
    let c = case_with(&eintup_testkit::example("matmul.et"), &binds, 0, FloatWidth::F64, FpContract::Off).unwrap();
    let want = c.arrays.iter().find(|(n, _, _)| n == "c").unwrap().2.clone();
    (c.bundle, want)
}

/// The text of kernel `name` in `ptx`, with the rest.
fn kernel_text(ptx: &str, name: &str) -> (usize, usize) {
    let start = ptx.find(&format!(".entry {name}(")).unwrap();
    let end = start + ptx[start..].find("\n}").unwrap();
    (start, end)
}

#[test]
fn a_loop_bound_one_too_far_in_the_ptx_is_an_out_of_bounds_access() {
    let (b, _) = matmul(&[]);
    // The matmul kernel's iteration space is 3 * 1 * 6 * 11 = 198 points:
    // its grid-stride loop tests `> 197` before and `< 198` after a trip.
    let ptx = b.ptx();
    let (s, e) = kernel_text(ptx, "s2_c");
    let body = ptx[s..e].replace(", 197;", ", 198;").replace(", 198;", ", 199;");
    assert_ne!(body, ptx[s..e], "the bounds were not found in\n{}", &ptx[s..e]);
    let planted = Bundle::new(b.manifest().clone(), format!("{}{body}{}", &ptx[..s], &ptx[e..])).unwrap();
    match Device::emulator().run(&planted, &BTreeMap::new()) {
        Err(Error::Fault(f)) => {
            assert_eq!(f.kernel, "s2_c");
            // Point 198, in the launch's blocks (`launch_dims`).
            let (_, block) = eintup_codegen::bundle::launch_dims(198);
            assert_eq!((f.block, f.thread), ([198 / block, 0, 0], [198 % block, 0, 0]));
            let FaultKind::OutOfBounds { detail, .. } = &f.kind else { panic!("{f}") };
            // Its first access: a load of `a` (`c` is only stored at the end).
            assert!(detail.contains("past the end of buffer `a`"), "{f}");
        }
        other => panic!("expected an out-of-bounds fault, got {other:?}"),
    }
}

/// `m` with the arguments `x` and `y` of the `s2_c` launch swapped.
fn swapped(b: &Bundle, x: &str, y: &str) -> Bundle {
    swapped_manifest(b, x, y, true).unwrap()
}

/// The manifest of `b` with the arguments `x` and `y` of the `s2_c` launch
/// swapped, with or without the kernels' `param_types` (a bundle of an
/// earlier producer has none), as a bundle if it validates.
fn swapped_manifest(b: &Bundle, x: &str, y: &str, param_types: bool) -> Result<Bundle, Error> {
    let mut m = b.manifest().clone();
    if !param_types {
        for k in &mut m.kernels {
            k.param_types.clear();
        }
    }
    for s in &mut m.steps {
        if let Step::Launch { kernel, args, .. } = s {
            if kernel == "s2_c" {
                let (i, j) = (args.iter().position(|a| a == x).unwrap(), args.iter().position(|a| a == y).unwrap());
                args.swap(i, j);
            }
        }
    }
    Bundle::new(m, b.ptx().to_string())
}

#[test]
fn swapped_kernel_arguments_in_the_manifest_are_caught() {
    // a[3,1,6,10] and c[3,1,6,11] swapped: the kernel indexes the smaller
    // `a` as if it were `c`. The kernel's param_types say it was compiled
    // for 180 elements for `a` (and 198 for `c`), so the bundle is refused
    // before it runs, at the first parameter that does not match.
    let (b, _) = matmul(&[]);
    match swapped_manifest(&b, "a", "c", true) {
        Err(Error::BadManifest(m)) => {
            assert!(m.contains("passes buffer `c` of 198 elements (shape [3, 1, 6, 11]) for parameter `a`, compiled for a buffer of 180 elements"), "{m}")
        }
        other => panic!("expected the manifest to be refused, got {other:?}"),
    }
    // Without param_types, the emulator catches it when it runs.
    match Device::emulator().run(&swapped_manifest(&b, "a", "c", false).unwrap(), &BTreeMap::new()) {
        Err(Error::Fault(f)) => {
            let FaultKind::OutOfBounds { detail, .. } = &f.kind else { panic!("{f}") };
            assert!(detail.contains("past the end of buffer `a`"), "{f}");
        }
        other => panic!("expected a fault, got {other:?}"),
    }
    // Square matrices: a and b have one shape, so swapping them stays in
    // bounds and computes b a instead of a b; the comparison with the
    // interpreter is what catches it.
    let (b, want) = matmul(&["row=[4]", "k=[4]", "col=[4]"]);
    let out = Device::emulator().run(&swapped(&b, "a", "b"), &BTreeMap::new()).unwrap();
    assert_eq!(out["c"].shape, want.shape);
    assert_ne!(out["c"], want);
    assert_eq!(Device::emulator().run(&b, &BTreeMap::new()).unwrap()["c"], want);
}
