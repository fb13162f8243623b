//! Differential test of the middle end (issue #6): for every example and
//! many configurations (zero-sized dims and rank-0 eintups included), the
//! `loop` module after *each* pass of the default pipeline, run by the
//! loop interpreter, gives the `et` interpreter's results: INT bit for
//! bit, FLOAT within 1e-12 relative (summation order may differ).

use eintup::driver::Source;
use eintup::interp::{self, RunOptions};
use eintup::ir::loops::{FloatWidth, KernelRole};
use eintup::passes::{manager, DriverOptions, Ir, Unit, DEFAULT_PIPELINE, GPU_PASSES, HOST_PASSES};
use eintup::tensor::Tensor;
use eintup_testkit::{assert_tensors_close, examples, Tol};

/// Relative tolerance for FLOAT: summation order may differ between the
/// two interpreters; f32 rounds every partial sum.
fn tolerance(float: FloatWidth) -> Tol {
    match float {
        FloatWidth::F64 => Tol::rel(1e-12),
        FloatWidth::F32 => Tol::rel(1e-5),
    }
}

/// Runs the default pipeline pass by pass, then the GPU passes and, on the
/// default pipeline's module again, the host passes; after every pass at
/// the loop level, checks the loop interpreter against the et interpreter.
/// Returns false when the configuration is not valid (the bindings
/// contradict the constraints).
fn check(path: &std::path::Path, binds: &[String], seed: u64, float: FloatWidth) -> bool {
    let src = Source::load(path).unwrap();
    let mut unit = Unit::from_source(src);
    let opts = DriverOptions { binds: binds.to_vec(), seed, float, ..DriverOptions::default() };
    let mut expected = None;
    if !check_passes(path, binds, seed, float, &mut unit, &opts, DEFAULT_PIPELINE, &mut expected) {
        return false;
    }
    for tail in [GPU_PASSES, HOST_PASSES] {
        assert!(check_passes(path, binds, seed, float, &mut unit.clone(), &opts, tail, &mut expected), "{}: a target's passes failed", path.display());
    }
    true
}

type Expected = Option<(eintup::ir::et::Module, Vec<Tensor>, Vec<Tensor>)>;

#[allow(clippy::too_many_arguments)]
fn check_passes(
    path: &std::path::Path,
    binds: &[String],
    seed: u64,
    float: FloatWidth,
    unit: &mut Unit,
    opts: &DriverOptions,
    passes: &[&str],
    expected: &mut Expected,
) -> bool {
    for name in passes {
        let pm = manager::PassManager::from_names(&[name], manager::Instrument::default()).unwrap();
        if let Err(e) = pm.run(unit, opts, &mut std::io::sink()) {
            assert!(!matches!(e, eintup::driver::Failure::Internal(_)), "{}: pass {name}: {e:?}", path.display());
            assert!(expected.is_none(), "{}: pass {name} failed after specialisation", path.display());
            return false;
        }
        match &unit.ir {
            Ir::Et(p) if p.module.is_specialized() && expected.is_none() => {
                let ro = RunOptions { seed, float, inputs: Default::default(), ..RunOptions::default() };
                let want = interp::run(&p.module, &ro).unwrap();
                let init = interp::initial_arrays(&p.module, &ro).unwrap();
                *expected = Some((p.module.clone(), want, init));
            }
            Ir::Loop(lm) => {
                let (m, want, init) = expected.as_ref().expect("specialised before lowering");
                let mut bufs: Vec<Tensor> = init.clone();
                for b in &lm.buffers[init.len()..] {
                    let shape: Vec<usize> = b.dims().expect("static shape").iter().map(|&d| d as usize).collect();
                    bufs.push(Tensor::zeros(b.dtype, &shape).unwrap());
                }
                let what = format!("{} {binds:?} seed {seed} {float:?} after {name}", path.display());
                interp::loops::run(lm, seed, &mut bufs).unwrap_or_else(|e| panic!("{what}: {e}"));
                for (k, a) in m.arrays.iter().enumerate() {
                    assert_tensors_close(&format!("{what}: `{}`", a.name), &bufs[k], &want[k], tolerance(float));
                }
            }
            _ => {}
        }
    }
    true
}

#[test]
fn every_pass_preserves_results_on_every_example() {
    for p in examples() {
        for seed in 0..4 {
            assert!(check(&p, &[], seed, FloatWidth::F64), "{}: default configuration invalid", p.display());
        }
        check(&p, &[], 7, FloatWidth::F32);
    }
}

#[test]
fn zero_sized_and_rank_0_eintups() {
    let mut tried = 0;
    for p in examples() {
        let src = Source::load(&p).unwrap();
        let prog = eintup::pipeline::resolved(&src).unwrap();
        for e in &prog.module.eintups {
            for bind in [format!("{}=[0]", e.name), format!("{}=[]", e.name), format!("{}=[2,0]", e.name)] {
                if check(&p, &[bind], 1, FloatWidth::F64) {
                    tried += 1;
                }
            }
        }
    }
    // Most examples admit some zero-sized or rank-0 configuration.
    assert!(tried >= 20, "only {tried} zero/rank-0 configurations were valid");
}

/// The GPU passes at sizes where they fire (the examples' own ranges are
/// too small for any of them): each pass's result, run by the loop
/// interpreter, gives the et interpreter's results, and the passes did
/// reshape the kernels (split reductions, fused resets, register and
/// block tiles, sunk broadcast loops).
#[test]
fn gpu_passes_at_sizes_where_they_fire() {
    use eintup::ir::loops::{FpContract, LoopKind, Node};
    let cases: [(&str, &[&str], &str); 5] = [
        ("reduce_sum.et", &["keep=[3]", "drop=[100]"], "split"),
        ("matmul.et", &["batch=[]", "row=[128]", "col=[128]", "k=[3]"], "tile"),
        ("matmul.et", &["batch=[2]", "row=[64]", "col=[128]", "k=[2]"], "tile"),
        ("conv_valid.et", &["batch=[1]", "ipos=[18,18]", "fpos=[3,3]", "stride=[1,1]", "ichan=[2]", "ochan=[64]"], "tile"),
        ("tile.et", &["e=[64,64]", "rep=[4,2]"], "sink"),
    ];
    for (file, binds, what) in cases {
        let path = eintup_testkit::example(file);
        let binds: Vec<String> = binds.iter().map(|b| b.to_string()).collect();
        for float in [FloatWidth::F64, FloatWidth::F32] {
            assert!(check(&path, &binds, 0, float), "{file} {binds:?}: configuration invalid");
        }
        let src = Source::load(&path).unwrap();
        let (m, _) = eintup::pipeline::specialized_for(&src, &binds, &[], 0, FloatWidth::F32).unwrap();
        let lm =
            eintup::pipeline::lower_gpu(&src, &m, &eintup::pipeline::GpuOptions::new(FloatWidth::F32, FpContract::Fast, eintup::ir::loops::target::DEFAULT_SM))
                .unwrap();
        let mut unrolled = false;
        for k in &lm.kernels {
            k.walk(&mut |n| unrolled |= matches!(n, Node::For(f) if f.kind == LoopKind::Unroll));
        }
        let mut blocks = false;
        for k in &lm.kernels {
            k.walk(&mut |n| blocks |= matches!(n, Node::For(f) if f.kind == LoopKind::Thread));
        }
        let split = lm.kernels.iter().any(|k| k.role == KernelRole::Partial);
        let resets = lm.kernels.iter().filter(|k| k.role == KernelRole::Reset).count();
        match what {
            "split" => assert!(split, "{file}: not split"),
            // The repetitions became `unroll` loops inside the thread.
            "sink" => assert!(unrolled && !blocks, "{file} {binds:?}: broadcast loops not sunk"),
            _ => assert!(unrolled && blocks, "{file} {binds:?}: not tiled (register tiles {unrolled}, block tiles {blocks})"),
        }
        assert_eq!(resets, 0, "{file} {binds:?}: a reset kernel was not fused");
    }
}
