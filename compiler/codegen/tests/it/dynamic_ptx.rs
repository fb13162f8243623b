//! One PTX for many shapes (docs/dynamic-shapes.md, step 3's code
//! generation): a loop module with dim symbols, through the GPU passes,
//! compiled to PTX once; its kernels take the dims as `.param .u64`
//! after the buffers and walk a grid-stride chain whose trip counts come
//! from them. The same PTX runs on the emulator at many configurations
//! (tile non-multiples, zero-sized dims) against the loop interpreter on
//! the module as written, at the same dims.

use eintup::driver::Source;
use eintup::interp::loops as li;
use eintup::ir::loops::{parse, LoopModule};
use eintup::passes::{manager, DriverOptions, Ir, Unit, GPU_PASSES, MIDDLE_END};
use eintup::tensor::{Data, Tensor};
use eintup_codegen::bundle::bind_dynamic;
use eintup_codegen::FpContract;
use eintup_runtime::Device;
use std::collections::BTreeMap;

const MATMUL: &str = include_str!("../../../tests/Inputs/dynamic_matmul.etir");
const CONV: &str = include_str!("../../../tests/Inputs/dynamic_conv.etir");
const SM: u32 = 80;

/// The middle end and the GPU passes, as `etopt --emit ptx` runs them.
fn gpu_pipeline(m: &LoopModule) -> LoopModule {
    let names: Vec<&str> = MIDDLE_END.iter().chain(GPU_PASSES).copied().filter(|p| *p != "lower-to-loops").collect();
    let mut unit = Unit { ir: Ir::Loop(m.clone()), ..Unit::from_source(Source::from_string("dyn.etir", "")) };
    let pm = manager::PassManager::from_names(&names, manager::Instrument::default()).unwrap();
    pm.run(&mut unit, &DriverOptions::default(), &mut std::io::sink()).unwrap();
    let Ir::Loop(lm) = unit.ir else { panic!("the passes left the loop level") };
    lm
}

fn ints(n: usize, salt: i32) -> Vec<i32> {
    (0..n as i32).map(|i| (i.wrapping_mul(7919).wrapping_add(salt * 31)) % 23 - 11).collect()
}

/// Runs the dynamic module `m` at each configuration twice: its PTX (made
/// once) on the emulator, and the loop interpreter on `m` as written.
fn one_ptx_many_shapes(text: &str, configs: &[Vec<i64>]) {
    let m = parse::parse_verified(text).unwrap();
    let lm = gpu_pipeline(&m);
    assert!(lm.is_dynamic());
    let (ptx, info) = eintup_codegen::emit_ptx(&lm, 0, SM, FpContract::Off).unwrap();
    for dims in configs {
        let bound = m.bind_dims(dims).unwrap();
        let mut bufs: Vec<Tensor> = Vec::new();
        let mut inputs = BTreeMap::new();
        for (i, b) in bound.buffers.iter().enumerate() {
            let shape: Vec<usize> = b.dims().unwrap().iter().map(|&d| d as usize).collect();
            let n = shape.iter().product();
            let t = Tensor::new(shape, Data::I32(if b.init == eintup::ir::loops::Init::Input { ints(n, i as i32) } else { vec![0; n] })).unwrap();
            if b.init == eintup::ir::loops::Init::Input {
                inputs.insert(b.name.clone(), t.clone());
            }
            bufs.push(t);
        }
        li::run_at(&m, dims, 0, &mut bufs).unwrap();
        let bundle = bind_dynamic(&lm, &ptx, &info.ptx_version, SM, dims).unwrap_or_else(|e| panic!("{dims:?}: {e:?}"));
        let got = Device::emulator().run(&bundle, &inputs).unwrap_or_else(|e| panic!("{dims:?}: {e}"));
        for (b, want) in bound.buffers.iter().zip(&bufs) {
            if b.role == eintup::ir::loops::Role::Output {
                assert_eq!(got[&b.name].data, want.data, "`{}` at dims {dims:?}", b.name);
            }
        }
    }
}

#[test]
fn a_dynamic_matmul_compiles_once_and_runs_at_every_configuration() {
    // Block-tiled: edge blocks (33, 65, 17 rows), short last steps (k 17, 33).
    let configs = [vec![2, 3, 4, 5], vec![1, 33, 17, 65], vec![2, 17, 33, 16], vec![3, 0, 4, 5], vec![2, 3, 0, 5], vec![1, 1, 1, 1], vec![2, 64, 8, 64]];
    one_ptx_many_shapes(MATMUL, &configs);
}

#[test]
fn a_dynamic_convolution_compiles_once_and_runs_at_every_configuration() {
    let configs = [vec![7, 3], vec![3, 3], vec![33, 5], vec![5, 1], vec![4, 0], vec![300, 7]];
    one_ptx_many_shapes(CONV, &configs);
}

#[test]
fn dims_are_kernel_parameters_after_the_buffers() {
    let lm = gpu_pipeline(&parse::parse_verified(CONV).unwrap());
    let (ptx, _) = eintup_codegen::emit_ptx(&lm, 0, SM, FpContract::Off).unwrap();
    // conv takes x, f, y, then %x.0 and %w.0.
    let entry = &ptx[ptx.find(".entry conv(").expect("entry")..];
    let params = &entry[..entry.find(')').unwrap()];
    assert_eq!(params.matches(".param .u64").count(), 5, "{params}");
    // The manifest names them; a launch passes their values.
    let b = bind_dynamic(&lm, &ptx, "7.0", SM, &[9, 4]).unwrap();
    let k = b.manifest().kernel("conv").unwrap();
    assert_eq!(k.dims, ["x.0", "w.0"]);
    assert_eq!(b.manifest().format_version, 2);
    assert!(b.manifest().steps.iter().any(|s| matches!(s, eintup_runtime::manifest::Step::Launch { dims, .. } if dims == &[9, 4])));
    // A configuration that gives a buffer a negative extent is refused.
    assert!(bind_dynamic(&lm, &ptx, "7.0", SM, &[2, 4]).is_err());
}

/// A dynamic bundle written at one configuration and opened again: the
/// runtime alone derives the dims from the caller's inputs (the manifest's
/// `dynamic` section: no compiler) and runs the same PTX at each.
#[test]
fn a_dynamic_bundle_runs_at_the_dims_its_inputs_give() {
    let m = parse::parse_verified(MATMUL).unwrap();
    let lm = gpu_pipeline(&m);
    let (ptx, info) = eintup_codegen::emit_ptx(&lm, 0, SM, FpContract::Off).unwrap();
    let dir = std::env::temp_dir().join(format!("eintup-dynamic-{}.etb", std::process::id()));
    bind_dynamic(&lm, &ptx, &info.ptx_version, SM, &[2, 3, 4, 5]).unwrap().write(&dir).unwrap();
    let bundle = eintup_runtime::Bundle::open(&dir).unwrap();
    std::fs::remove_dir_all(&dir).unwrap();
    assert!(bundle.manifest().dynamic.is_some());
    for dims in [[2i64, 3, 4, 5], [1, 33, 17, 65], [3, 0, 4, 5], [1, 64, 64, 64]] {
        let [n, r, k, c] = dims.map(|d| d as usize);
        let (a, b) = (ints(n * r * k, 1), ints(n * k * c, 2));
        let inputs: BTreeMap<String, Tensor> = [
            ("a".to_string(), Tensor::new(vec![n, r, k], Data::I32(a.clone())).unwrap()),
            ("b".to_string(), Tensor::new(vec![n, k, c], Data::I32(b.clone())).unwrap()),
        ]
        .into();
        let mut want = vec![0i32; n * r * c];
        for (nn, i, j) in (0..n).flat_map(|nn| (0..r).flat_map(move |i| (0..c).map(move |j| (nn, i, j)))) {
            want[(nn * r + i) * c + j] = (0..k).map(|kk| a[(nn * r + i) * k + kk].wrapping_mul(b[(nn * k + kk) * c + j])).fold(0, i32::wrapping_add);
        }
        let got = Device::emulator().run(&bundle, &inputs).unwrap_or_else(|e| panic!("{dims:?}: {e}"));
        assert_eq!(got["c"].shape, vec![n, r, c]);
        assert_eq!(got["c"].data, Data::I32(want), "at {dims:?}");
    }
    // Inputs that contradict each other, or the bundle, are refused before
    // anything runs, naming the input and the dim.
    let t = |shape: Vec<usize>| Tensor::new(shape.clone(), Data::I32(vec![0; shape.iter().product()])).unwrap();
    let run =
        |a: Vec<usize>, b: Vec<usize>| Device::emulator().run(&bundle, &[("a".to_string(), t(a)), ("b".to_string(), t(b))].into()).unwrap_err().to_string();
    let e = run(vec![2, 3, 4], vec![2, 5, 6]);
    // `k.0` comes from `a` (its first input axis); `b`'s axis of the same
    // symbol disagrees, said with where the value came from (a loop
    // module's bundle names no eintups: the symbol).
    assert!(e.contains("input `b`: dim 1 is 5, but it is dim `k.0`, which `a` gives as 4 (its dim 2)"), "{e}");
    let e = run(vec![2, 3, 4], vec![2, 4]);
    assert!(e.contains("`b`") && e.contains("has rank 2, the bundle's `b` has rank 3"), "{e}");
    let e = Device::emulator().run(&bundle, &[("a".to_string(), t(vec![2, 3, 4]))].into()).unwrap_err().to_string();
    assert!(e.contains("col.0") && e.contains("given by no input"), "{e}");
}

/// A dynamic bundle loaded once and re-bound to each new shape
/// (`Program::rebind`): the module is decoded once, buffers follow the
/// shapes, and each run equals the matmul's definition. An input whose
/// shape changed must be written again; a caller's buffer stays bound
/// while its shape holds and is unbound when it changes; a bundle with
/// other kernels is refused.
#[test]
fn a_loaded_dynamic_program_rebinds_to_every_shape() {
    let lm = gpu_pipeline(&parse::parse_verified(MATMUL).unwrap());
    let (ptx, info) = eintup_codegen::emit_ptx(&lm, 0, SM, FpContract::Off).unwrap();
    let bundle = bind_dynamic(&lm, &ptx, &info.ptx_version, SM, &[2, 3, 4, 5]).unwrap();
    let dev = Device::emulator();
    let mut program = dev.load(&bundle).unwrap();
    let matmul = |dims: [usize; 4]| {
        let [n, r, k, c] = dims;
        let (a, b) = (ints(n * r * k, 3), ints(n * k * c, 4));
        let mut want = vec![0i32; n * r * c];
        for (nn, i, j) in (0..n).flat_map(|nn| (0..r).flat_map(move |i| (0..c).map(move |j| (nn, i, j)))) {
            want[(nn * r + i) * c + j] = (0..k).map(|kk| a[(nn * r + i) * k + kk].wrapping_mul(b[(nn * k + kk) * c + j])).fold(0, i32::wrapping_add);
        }
        let inputs: BTreeMap<String, Tensor> =
            [("a".to_string(), Tensor::new(vec![n, r, k], Data::I32(a)).unwrap()), ("b".to_string(), Tensor::new(vec![n, k, c], Data::I32(b)).unwrap())].into();
        (inputs, Data::I32(want))
    };
    // Growing, shrinking, zero-sized, and a shape seen before.
    for dims in [[2, 3, 4, 5], [1, 33, 17, 65], [3, 0, 4, 5], [1, 64, 64, 64], [2, 3, 4, 5]] {
        let (inputs, want) = matmul(dims);
        program.rebind(&bundle.bind_inputs(&inputs).unwrap()).unwrap_or_else(|e| panic!("{dims:?}: {e}"));
        program.run_with(&inputs).unwrap_or_else(|e| panic!("{dims:?}: {e}"));
        let got = program.read("c").unwrap();
        assert_eq!(got.shape, vec![dims[0], dims[1], dims[3]]);
        assert_eq!(got.data, want, "at {dims:?}");
    }
    // Inputs written at another shape are not used at this one.
    let (inputs, want) = matmul([2, 5, 3, 4]);
    program.rebind(&bundle.bind_inputs(&inputs).unwrap()).unwrap();
    let e = program.run().unwrap_err().to_string();
    assert!(e.contains("input `a`") && e.contains("not written"), "{e}");
    // A caller's output buffer stays bound while its shape holds.
    let out = dev.alloc(eintup_runtime::DType::I32, &[2, 5, 4]).unwrap();
    program.bind("c", &out).unwrap();
    program.run_with(&inputs).unwrap();
    assert_eq!(out.read().unwrap().data, want);
    let (same_c, want2) = matmul([2, 5, 7, 4]);
    program.rebind(&bundle.bind_inputs(&same_c).unwrap()).unwrap();
    assert!(program.bound("c").is_some(), "`c` keeps its shape [2, 5, 4]");
    program.run_with(&same_c).unwrap();
    assert_eq!(out.read().unwrap().data, want2);
    let (other_c, _) = matmul([2, 6, 7, 4]);
    program.rebind(&bundle.bind_inputs(&other_c).unwrap()).unwrap();
    assert!(program.bound("c").is_none(), "`c` is [2, 6, 4] now");
    // Another module does not re-bind.
    let conv = gpu_pipeline(&parse::parse_verified(CONV).unwrap());
    let (cptx, cinfo) = eintup_codegen::emit_ptx(&conv, 0, SM, FpContract::Off).unwrap();
    let e = program.rebind(&bind_dynamic(&conv, &cptx, &cinfo.ptx_version, SM, &[9, 4]).unwrap()).unwrap_err().to_string();
    assert!(e.contains("not the loaded ones"), "{e}");
}

/// Not a test: the emulator profiles of a dynamic module's PTX and of the
/// same module bound before compiling (so every static pass applies), at
/// the same dims, for docs/dynamic-shapes.md. It asserts nothing (speed
/// is measured, never asserted); run it with
/// `cargo test -p eintup-codegen --test it dynamic_ptx::measure -- --ignored --nocapture`.
#[test]
#[ignore]
fn measure_dynamic_against_static() {
    for (text, dims) in [(MATMUL, vec![1i64, 64, 64, 64]), (CONV, vec![4096, 7])] {
        let m = parse::parse_verified(text).unwrap();
        let lm = gpu_pipeline(&m);
        let (ptx, info) = eintup_codegen::emit_ptx(&lm, 0, SM, FpContract::Off).unwrap();
        let bound = m.bind_dims(&dims).unwrap();
        let slm = gpu_pipeline(&bound);
        let (sptx, sinfo) = eintup_codegen::emit_ptx(&slm, 0, SM, FpContract::Off).unwrap();
        let mut inputs = BTreeMap::new();
        for (i, b) in bound.buffers.iter().enumerate() {
            if b.init == eintup::ir::loops::Init::Input {
                let shape: Vec<usize> = b.dims().unwrap().iter().map(|&d| d as usize).collect();
                let n = shape.iter().product();
                inputs.insert(b.name.clone(), Tensor::new(shape, Data::I32(ints(n, i as i32))).unwrap());
            }
        }
        let d = bind_dynamic(&lm, &ptx, &info.ptx_version, SM, &dims).unwrap();
        let s = bind_dynamic(&slm, &sptx, &sinfo.ptx_version, SM, &[]).unwrap();
        let (_, pd) = Device::emulator().run_profiled(&d, &inputs).unwrap();
        let (_, ps) = Device::emulator().run_profiled(&s, &inputs).unwrap();
        println!("{dims:?}\nDYNAMIC\n{}\nSTATIC\n{}", pd.table(), ps.table());
    }
}
