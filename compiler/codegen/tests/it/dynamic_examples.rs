//! One dynamic bundle per example (`eintup build FILE.et --dynamic`,
//! docs/dynamic-shapes.md): built once at fixed ranks, then bound to many
//! configurations of those ranks (drawn ones, tile non-multiples,
//! zero-sized dims) and run on the PTX emulator against the interpreter at
//! the same dims. The bundle gets the inputs' arrays and, for eintups no
//! input gives (a stride, a tile count), their dims as a caller's
//! `--bind`. Under `--fp-contract off` the emulator computes every product
//! as the interpreter does; only summation order may differ, so FLOAT
//! outputs are compared within `1e-12 * max(1, max |want|)`.

use std::collections::BTreeMap;
use std::path::PathBuf;

use eintup::driver::Source;
use eintup::interp::{self, RunOptions};
use eintup::ir::loops::FloatWidth;
use eintup::sema::symbolic::SymbolicConfig;
use eintup::sema::Program;
use eintup::tensor::Data;
use eintup::variants::Lowered;
use eintup_codegen::bundle::{build_dynamic, BuildOptions};
use eintup_codegen::FpContract;
use eintup_runtime::{Bundle, Device};
use eintup_testkit::{assert_close, Tol};

/// An example, the ranks its dynamic build fixes, and static `--bind`
/// sets (beyond drawn configurations) it is also run at.
struct Example {
    file: &'static str,
    ranks: &'static [(&'static str, usize)],
    at: &'static [&'static [&'static str]],
}

const EXAMPLES: &[Example] = &[
    Example {
        file: "matmul",
        ranks: &[("batch", 1)],
        at: &[
            &["batch=[2]", "row=[33]", "k=[17]", "col=[65]"],
            &["batch=[3]", "row=[0]", "k=[4]", "col=[5]"],
            &["batch=[1]", "row=[64]", "k=[64]", "col=[64]"],
        ],
    },
    Example { file: "bias_add", ranks: &[("pos", 2)], at: &[&["batch=[2]", "pos=[3,0]", "chan=[5]"]] },
    Example { file: "conv_valid", ranks: &[("ipos", 2)], at: &[&["ipos=[17,9]", "fpos=[3,2]", "stride=[2,1]"]] },
    Example { file: "conv_valid_alt", ranks: &[("ipos", 1)], at: &[&["ipos=[40]", "fpos=[5]", "stride=[3]", "ichan=[3]", "ochan=[2]"]] },
    Example { file: "conv_same", ranks: &[("ipos", 1)], at: &[&["ipos=[23]", "fpos=[5]"]] },
    Example { file: "conv_transpose", ranks: &[("ipos", 1)], at: &[&["ipos=[13]", "fpos=[3]", "stride=[2]"]] },
    Example {
        file: "gather_nd",
        ranks: &[("batch", 1), ("loc", 2), ("w", 1), ("item", 1)],
        at: &[
            &["batch=[2]", "loc=[5,7]", "w=[9]", "item=[3]"],
            &["batch=[1]", "loc=[33,2]", "w=[0]", "item=[4]"],
            &["batch=[3]", "loc=[1,1]", "w=[70]", "item=[0]"],
        ],
    },
    Example { file: "scatter_nd", ranks: &[("upd", 1), ("item", 1), ("dest", 2)], at: &[&["upd=[0]", "dest=[3,4]", "item=[2]"]] },
    Example { file: "reduce_sum", ranks: &[("keep", 2)], at: &[&["keep=[5,33]", "drop=[130]"], &["keep=[2,3]", "drop=[0]"]] },
    Example { file: "flatten", ranks: &[("a", 1), ("b", 2), ("c", 0)], at: &[&["a=[0]", "b=[2,3]", "c=[]"]] },
    Example { file: "kron", ranks: &[("i", 2)], at: &[&["i=[3,4]", "k=[5,2]"]] },
    Example { file: "meshgrid", ranks: &[], at: &[&["i=[7]", "j=[0]", "k=[3]"]] },
    Example { file: "slice", ranks: &[("e", 2)], at: &[&["e=[20,9]", "lo=[2,1]", "hi=[3,4]"]] },
    Example { file: "space_to_depth", ranks: &[], at: &[&["batch=[2]", "pos=[6,4]", "chan=[3]", "blk=[2,2]"]] },
    Example { file: "tile", ranks: &[("e", 2)], at: &[&["e=[3,5]", "rep=[2,3]"]] },
    Example { file: "relu", ranks: &[("e", 2)], at: &[&["e=[3,5]"], &["e=[0,4]"]] },
    Example { file: "max_pool", ranks: &[("ipos", 2)], at: &[&["batch=[1]", "ipos=[9,7]", "win=[3,2]", "stride=[2,2]", "chan=[2]"]] },
    Example { file: "softmax", ranks: &[("batch", 1)], at: &[&["batch=[3]", "class=[7]"]] },
    Example { file: "logsumexp", ranks: &[("keep", 1)], at: &[&["keep=[4]", "drop=[5]"]] },
    Example { file: "layer_norm", ranks: &[("batch", 1)], at: &[&["batch=[2]", "feat=[6]"]] },
    Example { file: "gelu", ranks: &[("e", 1)], at: &[&["e=[9]"]] },
    Example { file: "cross_entropy", ranks: &[("batch", 1)], at: &[&["batch=[3]", "class=[4]"]] },
];

fn example(file: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../docs/examples").join(format!("{file}.et"))
}

/// `src` as `eintup build --dynamic` lowers it for sm_80: the program at
/// `ranks` (and the fixed `binds`), its symbolic configuration, and its
/// GPU lowering with run-time variants.
fn lower_dynamic(src: &Source, binds: &[String], ranks: &[(String, usize)], float: FloatWidth, fp_contract: FpContract) -> (Program, SymbolicConfig, Lowered) {
    let (prog, sym) = eintup::pipeline::symbolic_for(src, binds, ranks).unwrap_or_else(|e| panic!("{}: {e:?}", src.name));
    let opts = eintup::pipeline::GpuOptions::new(float, fp_contract, 80);
    let lowered = eintup::variants::lower_gpu_dynamic(src, &prog, &opts).unwrap_or_else(|e| panic!("{}: {e:?}", src.name));
    (prog, sym, lowered)
}

/// The bundle of [`lower_dynamic`]'s results.
fn build(src: &Source, (prog, sym, lowered): &(Program, SymbolicConfig, Lowered), float: FloatWidth, fp_contract: FpContract) -> Bundle {
    build_dynamic(src, prog, sym, lowered, &BuildOptions { seed: 0, float, sm: 80, fp_contract }).unwrap_or_else(|e| panic!("{}: {e:?}", src.name))
}

/// The example's dynamic bundle and the ranks it was built for.
fn dynamic_bundle(ex: &Example) -> (Source, Bundle, Vec<usize>) {
    let src = Source::load(&example(ex.file)).unwrap();
    let ranks: Vec<(String, usize)> = ex.ranks.iter().map(|(n, r)| (n.to_string(), *r)).collect();
    let l = lower_dynamic(&src, &[], &ranks, FloatWidth::F64, FpContract::Off);
    assert!(l.2.module.is_dynamic(), "{}: no dim symbols", ex.file);
    let b = build(&src, &l, FloatWidth::F64, FpContract::Off);
    (src, b, l.1.ranks)
}

/// Runs `bundle` at the configuration `binds` and `seed` give, if it has
/// the bundle's ranks; `false` when it does not (or is not valid).
fn run_at(src: &Source, bundle: &Bundle, ranks: &[usize], binds: &[String], seed: u64) -> bool {
    run_within(src, bundle, ranks, binds, seed, 1e-12)
}

/// [`run_at`], FLOAT outputs compared within `rel * max(1, max |want|)`.
fn run_within(src: &Source, bundle: &Bundle, ranks: &[usize], binds: &[String], seed: u64, rel: f64) -> bool {
    run_kernels(src, bundle, ranks, binds, seed, rel, 1 << 18).is_some()
}

/// [`run_within`] where the statements' instantiations and arrays are at
/// most `largest` (the interpreter's work), returning the kernels that
/// ran (the emulator's profile names each: a run-time variant by its own
/// name).
fn run_kernels(src: &Source, bundle: &Bundle, ranks: &[usize], binds: &[String], seed: u64, rel: f64, largest: i64) -> Option<Vec<String>> {
    let Ok((m, _)) = eintup::pipeline::specialized_module(src, binds, seed) else { return None };
    if m.eintups.iter().zip(ranks).any(|(e, r)| e.dims.as_ref().map(Vec::len) != Some(*r)) || m.largest_extent() > largest {
        return None;
    }
    let what = format!("{} {binds:?} seed {seed}", src.name);
    let want = interp::run(&m, &RunOptions { seed, ..RunOptions::default() }).unwrap_or_else(|e| panic!("{what}: {e:?}"));
    let man = bundle.manifest();
    // The interpreter's inputs at the bundle's float width (`--float f32`).
    let f32 = man.buffers.iter().any(|b| b.dtype == eintup_runtime::DType::F32);
    let inputs: BTreeMap<_, _> =
        m.arrays.iter().zip(&want).filter(|(a, _)| a.is_input).map(|(a, t)| (a.name.clone(), t.clone().with_float_width(f32))).collect();
    // A caller's --bind for each eintup whose symbols no input gives.
    let derived: Vec<String> = man.dynamic.as_ref().unwrap().derive.iter().map(|r| format!("%{}", r.sym)).collect();
    let given: Vec<(String, Vec<i64>)> = man
        .dynamic
        .as_ref()
        .unwrap()
        .eintups
        .iter()
        .filter(|(_, exprs)| exprs.iter().any(|e| e.starts_with('%') && !derived.contains(e)))
        .map(|(name, _)| (name.clone(), m.eintups[m.eintup_by_name(name).unwrap()].dims.clone().unwrap()))
        .collect();
    let shapes = inputs.iter().map(|(n, t)| (n.clone(), t.shape.clone())).collect();
    let given = man.given_dims(&given).unwrap_or_else(|e| panic!("{what}: {e}"));
    let (bound, _) = bundle.bind_given(&shapes, &given).unwrap_or_else(|e| panic!("{what}: {e}"));
    let (out, profile) = Device::emulator().run_profiled(&bound, &inputs).unwrap_or_else(|e| panic!("{what}: {e}"));
    for a in m.result_arrays() {
        let (name, want) = (&m.arrays[a].name, &want[a]);
        let got = &out[name];
        assert_eq!(got.shape, want.shape, "{what}: `{name}` shape");
        match (&got.data, &want.data) {
            (Data::I32(g), Data::I32(w)) => assert_eq!(g, w, "{what}: `{name}`"),
            _ => {
                let w = want.to_f64_vec();
                let scale = w.iter().fold(1.0f64, |s, x| s.max(x.abs()));
                assert_close(&format!("{what}: `{name}`"), &got.to_f64_vec(), &w, Tol { rel: 0.0, abs: rel * scale });
            }
        }
    }
    Some(profile.kernels.iter().map(|p| p.name.clone()).collect())
}

#[test]
fn one_dynamic_bundle_per_example_runs_at_many_configurations() {
    for ex in EXAMPLES {
        let (src, bundle, ranks) = dynamic_bundle(ex);
        let mut ran = 0;
        for seed in 0..64 {
            ran += run_at(&src, &bundle, &ranks, &[], seed) as usize;
        }
        for binds in ex.at {
            let binds: Vec<String> = binds.iter().map(|b| b.to_string()).collect();
            assert!(run_at(&src, &bundle, &ranks, &binds, 0), "{}: {binds:?} is not a configuration of the bundle's ranks", ex.file);
            ran += 1;
        }
        assert!(ran >= 3, "{}: only {ran} configurations had the bundle's ranks", ex.file);
    }
}

#[test]
fn every_example_is_covered() {
    let names: Vec<String> = eintup_testkit::examples().iter().map(|p| p.file_stem().unwrap().to_string_lossy().into_owned()).collect();
    for n in &names {
        assert!(EXAMPLES.iter().any(|e| e.file == n), "example {n} has no dynamic-bundle case");
    }
}

/// The kernels a dynamic bundle computes in 32 bits: those its
/// `index32` limits name (docs/bundle.md, "Dynamic bundles").
fn narrow_kernels(b: &Bundle) -> Vec<String> {
    let mut k: Vec<String> = b.manifest().dynamic.as_ref().unwrap().index32.iter().map(|l| l.kernel.clone()).collect();
    k.dedup();
    k
}

#[test]
fn the_bar_cases_compute_their_indices_in_32_bits() {
    // matmul, reduce_sum and gather_nd as the runs above build them; the
    // convolution with the bench's stride 1 (a symbolic stride's
    // `(n - k + 1) //^ s` extent is not a polynomial: i64).
    // The divisibility variants of the matmul and of the gather (16-byte
    // rows, `widen-threads`) too; no window and no vector access for the
    // row sum: no run-time variant.
    for (file, want) in [("matmul", &["s2_c", "s2_c__div4"][..]), ("reduce_sum", &["s1_s"]), ("gather_nd", &["s2_dst", "s2_dst__div4"])] {
        let ex = EXAMPLES.iter().find(|e| e.file == file).unwrap();
        let b = dynamic_bundle(ex).1;
        assert_eq!(narrow_kernels(&b), want, "{file}");
        assert_eq!(b.manifest().dynamic.as_ref().unwrap().variants.len(), want.len() - 1, "{file}");
    }
    let (src, b, ranks, _) = conv_stride_1(2);
    assert_eq!(narrow_kernels(&b), ["s2_y", "s2_y__ch8", "s2_y__rt4x4", "s2_y__rt2x2", "s2_y__div4"]);
    // And it runs, at a size that is no multiple of anything.
    assert!(run_at(
        &src,
        &b,
        &ranks,
        &["batch=[2]".into(), "ipos=[11,7]".into(), "fpos=[3,2]".into(), "stride=[1,1]".into(), "ichan=[3]".into(), "ochan=[5]".into()],
        0
    ));
}

/// reduce_sum's dynamic bundle at `--rank keep=1` under `--fp-contract
/// fast` (what `eintup build` does): its symbolic reduction is split
/// (docs/passes.md, `split-reductions`) into a partial kernel of 32 lanes
/// and a combine kernel, as the static bundle's, both in 32 bits.
#[test]
fn the_dynamic_row_sum_is_split_like_the_static_one() {
    let src = Source::load(&example("reduce_sum")).unwrap();
    let l = lower_dynamic(&src, &[], &[("keep".to_string(), 1)], FloatWidth::F64, FpContract::Fast);
    let b = build(&src, &l, FloatWidth::F64, FpContract::Fast);
    let (_, sym, lowered) = &l;
    let lm = &lowered.module;
    let names: Vec<&str> = lm.kernels.iter().map(|k| k.name.as_str()).collect();
    assert_eq!(names, ["s1_s_partial", "s1_s"]);
    assert_eq!(narrow_kernels(&b), ["s1_s_partial", "s1_s"]);
    // Rows shorter than the lanes, one group of 32 steps per lane (1024
    // terms) and past it, non-multiples of 32, empty rows, no rows. The
    // sums are reordered (lanes, then lanes in order): f64 within 1e-9.
    for binds in [
        ["keep=[5]", "drop=[130]"],
        ["keep=[3]", "drop=[7]"],
        ["keep=[2]", "drop=[1024]"],
        ["keep=[3]", "drop=[2081]"],
        ["keep=[4]", "drop=[0]"],
        ["keep=[0]", "drop=[40]"],
        ["keep=[1]", "drop=[1]"],
    ] {
        let binds: Vec<String> = binds.iter().map(|s| s.to_string()).collect();
        assert!(run_within(&src, &b, &sym.ranks, &binds, 0, 1e-9), "{binds:?}");
    }
}

/// conv_valid's dynamic bundle at `rank` spatial dims with the bench's
/// stride 1 bound, and its loop module.
fn conv_stride_1(rank: usize) -> (Source, Bundle, Vec<usize>, eintup::ir::loops::LoopModule) {
    let (src, b, ranks, lowered) = conv_stride_1_variants(&example("conv_valid"), rank);
    (src, b, ranks, lowered.module)
}

/// [`conv_stride_1`] of the convolution in `file`, with the run-time
/// variants the build made.
fn conv_stride_1_variants(file: &std::path::Path, rank: usize) -> (Source, Bundle, Vec<usize>, eintup::variants::Lowered) {
    let src = Source::load(file).unwrap();
    let stride = format!("stride=[{}]", vec!["1"; rank].join(","));
    let l = lower_dynamic(&src, &[stride], &[("ipos".to_string(), rank)], FloatWidth::F64, FpContract::Off);
    let b = build(&src, &l, FloatWidth::F64, FpContract::Off);
    let (_, sym, lowered) = l;
    (src, b, sym.ranks, lowered)
}

#[test]
fn the_stride_1_convolution_sums_in_one_kernel_without_atomics() {
    // The output's extent `(%ipos.0 - %fpos.0) + 1` is an atom known
    // non-negative to `parallelize`: the write is injective, the reset
    // fuses into the sum (one launch), as in the static bundle.
    for (rank, at) in [
        (
            1,
            &[
                &["batch=[2]", "ipos=[13]", "fpos=[3]", "ichan=[3]", "ochan=[5]"][..],
                &["batch=[1]", "ipos=[4]", "fpos=[5]", "ichan=[2]", "ochan=[3]"],
                &["batch=[3]", "ipos=[7]", "fpos=[7]", "ichan=[0]", "ochan=[2]"],
                &["batch=[0]", "ipos=[9]", "fpos=[2]", "ichan=[1]", "ochan=[1]"],
                &["batch=[2]", "ipos=[6]", "fpos=[2]", "ichan=[2]", "ochan=[0]"],
            ][..],
        ),
        // 8 x 8 x 4 threads, steps of 4 channels: edge
        // blocks along every thread dimension, channels past a step (9, 1),
        // an empty output (`ipos` below `fpos`), no channels, no batch.
        (
            2,
            &[
                &["batch=[2]", "ipos=[11,7]", "fpos=[3,2]", "ichan=[3]", "ochan=[5]"][..],
                &["batch=[1]", "ipos=[5,17]", "fpos=[6,1]", "ichan=[2]", "ochan=[2]"],
                &["batch=[1]", "ipos=[3,9]", "fpos=[3,9]", "ichan=[4]", "ochan=[3]"],
                &["batch=[1]", "ipos=[11,4]", "fpos=[3,2]", "ichan=[9]", "ochan=[9]"],
                &["batch=[1]", "ipos=[10,10]", "fpos=[3,3]", "ichan=[1]", "ochan=[17]"],
                &["batch=[2]", "ipos=[2,8]", "fpos=[3,3]", "ichan=[2]", "ochan=[2]"],
                &["batch=[1]", "ipos=[6,6]", "fpos=[2,2]", "ichan=[0]", "ochan=[3]"],
                &["batch=[0]", "ipos=[6,6]", "fpos=[2,2]", "ichan=[2]", "ochan=[3]"],
            ],
        ),
    ] {
        let (src, b, ranks, lm) = conv_stride_1(rank);
        let writes: Vec<_> = lm.kernels.iter().flat_map(|k| k.computes()).map(|c| c.write.kind).collect();
        assert_eq!(lm.kernels.len(), 1, "rank {rank}: {writes:?}");
        assert!(!writes.contains(&eintup::ir::loops::WriteKind::AtomicAccumulate), "rank {rank}: {writes:?}");
        // The window's `min` bounds go (simplify-index), the window loops
        // shift to `[0, %fpos.d)`, and the kernel is block-tiled (both
        // operands staged).
        let shared = lm.kernels[0].buffers().iter().filter(|&&b| lm.buffers[b].role == eintup::ir::loops::Role::Shared).count();
        assert_eq!(shared, 2, "rank {rank}");
        let stride = format!("stride=[{}]", vec!["1"; rank].join(","));
        for binds in at {
            let binds: Vec<String> = binds.iter().map(|s| s.to_string()).chain([stride.clone()]).collect();
            assert!(run_at(&src, &b, &ranks, &binds, 0), "rank {rank}: {binds:?}");
        }
    }
}

#[test]
fn dims_past_the_32_bit_limit_are_refused_before_anything_runs() {
    let ex = EXAMPLES.iter().find(|e| e.file == "matmul").unwrap();
    let (_, bundle, _) = dynamic_bundle(ex);
    let bind = |a: [usize; 3], b: [usize; 3]| {
        let shapes: BTreeMap<String, Vec<usize>> = [("a".to_string(), a.to_vec()), ("b".to_string(), b.to_vec())].into();
        bundle.bind_given(&shapes, &BTreeMap::new()).map(|_| ()).map_err(|e| e.to_string())
    };
    // `a` of 3 x 2^15 x 2^15 elements: its offsets leave i32. The bound
    // the kernel proves on them (its double-buffered steps peeled at
    // `hi - 1` and `hi - 2`, their guards unused by the proof) is a step
    // of 16 past the last row's start, not the buffer's last element.
    let err = bind([3, 1 << 15, 1 << 15], [3, 1 << 15, 1]).unwrap_err();
    assert!(
        err.starts_with("input `s2_c`: kernel `s2_c` reaches 3221192719 (`((((%batch.0 * %row.0) * %k.0) + 15) - %k.0)`)") && err.contains("32-bit indices"),
        "{err}"
    );
    // One matrix of 2^31 elements: its last offset, 2^31 - 1, fits, but
    // the batch stride `%row.0 * %k.0` (computed, times batch 0) does not.
    let err = bind([1, 1 << 16, 1 << 15], [1, 1 << 15, 1]).unwrap_err();
    assert!(err.starts_with("input `s2_c`: kernel `s2_c` reaches 2147483648 (`(%row.0 * %k.0)`)"), "{err}");
    // Empty arrays but a row count at the top of i32: the kernel's padded
    // last row (`%row.0 + 17`: register tiles of 4 rows in blocks of 16)
    // would wrap, so the kernel is named: the one launched there, the
    // divisibility variant (0 is a multiple of 4).
    let err = bind([1, i32::MAX as usize, 0], [1, 0, 0]).unwrap_err();
    assert!(err.starts_with("input `s2_c__div4`: kernel `s2_c__div4` reaches 2147483664"), "{err}");
    // One row fewer of `a` is within the limit (the memory limit refuses
    // it then, a separate rule), and small dims bind.
    let err = bind([1, (1 << 16) - 1, 1 << 15], [1, 1 << 15, 1]).unwrap_err();
    assert!(!err.contains("32-bit"), "{err}");
    bind([1, 33, 17], [1, 17, 65]).unwrap();
}

/// A dynamic `et` module prints and parses back (docs/ir-et.md, "Dynamic
/// modules"): each example's module after `specialize{dynamic}` reads back
/// from its text to the same text and the same dims, and lowers to the
/// same loop module with no second `specialize`.
#[test]
fn every_dynamic_module_prints_and_reads_back() {
    use eintup::ir::et::{parse, print};
    for ex in EXAMPLES {
        let src = Source::load(&example(ex.file)).unwrap();
        let ranks: Vec<(String, usize)> = ex.ranks.iter().map(|(n, r)| (n.to_string(), *r)).collect();
        let (prog, _) = eintup::pipeline::symbolic_for(&src, &[], &ranks).unwrap_or_else(|e| panic!("{}: {e:?}", ex.file));
        let text = print::module(&prog.module);
        assert!(text.starts_with("symbols("), "{}: {text}", ex.file);
        let back = parse::parse_verified(&text).unwrap_or_else(|e| panic!("{}: {e:?}\n{text}", ex.file));
        assert_eq!(print::module(&back), text, "{}", ex.file);
        assert_eq!(back.symbolic, prog.module.symbolic, "{}", ex.file);
        let lower = |m| eintup::ir::loops::print::module(&eintup::pipeline::lower(&src, m, FloatWidth::F64).unwrap_or_else(|e| panic!("{}: {e:?}", ex.file)));
        assert_eq!(lower(&back), lower(&prog.module), "{}", ex.file);
    }
}

/// `b` with its run-time variants replaced by `variants`.
fn with_variants(b: &Bundle, variants: Vec<eintup_runtime::manifest::Variant>) -> Bundle {
    let mut m = b.manifest().clone();
    m.dynamic.as_mut().unwrap().variants = variants;
    Bundle::new(m, b.ptx().to_string()).unwrap()
}

/// The stride-1 convolution's run-time variants (docs/dynamic-shapes.md,
/// "Run-time variants" and "A variant for few output channels"): all of a
/// cell's output channels in one thread's 1x8 register tile, launched
/// where they are at most 8; else a 4x4 register tile of output columns
/// and channels where both are at least 32; else a 2x2 tile where either
/// is at least 16. At each
/// configuration the bundle launches the kernel its conditions pick (the
/// profile names it), and each kernel forced alone — the general one (no
/// variants), each variant (its conditions dropped) — computes what the
/// interpreter does: few and many channels, input channels past a step
/// of 4, tiles and blocks cut by the edges, empty dims.
#[test]
fn the_convolution_launches_its_variant_where_its_condition_holds() {
    // The bench's convolution: the example's constraints allow 3 channels at most.
    let bench = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../bench/ops/conv2d.et");
    let (src, b, ranks, lowered) = conv_stride_1_variants(&bench, 2);
    let names: Vec<&str> = lowered.variants.iter().map(|v| v.kernel.name.as_str()).collect();
    assert_eq!(names, ["s2_y__ch8", "s2_y__rt4x4", "s2_y__rt2x2", "s2_y__div4"]);
    let listed = &b.manifest().dynamic.as_ref().unwrap().variants;
    let conditions: Vec<(&str, &[String])> = listed.iter().map(|v| (v.kernel.as_str(), &v.when[..])).collect();
    let div4 = ["(0 - (%ichan.0 % 4))".to_string(), "(0 - (%ochan.0 % 4))".to_string()];
    assert_eq!(
        conditions,
        [
            ("s2_y__ch8", &["(8 - %ochan.0)".to_string()][..]),
            ("s2_y__rt4x4", &["(((%ipos.1 - %fpos.1) + 1) - 32)".to_string(), "(%ochan.0 - 32)".to_string()][..]),
            ("s2_y__rt2x2", &["(((%ipos.1 - %fpos.1) + 1) - 16)".to_string()][..]),
            ("s2_y__rt2x2", &["(%ochan.0 - 16)".to_string()][..]),
            ("s2_y__div4", &div4[..])
        ]
    );
    let general = with_variants(&b, Vec::new());
    let forced = |i: usize| with_variants(&b, vec![eintup_runtime::manifest::Variant { when: Vec::new(), ..listed[i].clone() }]);
    let (channels, tiled4, tiled) = (forced(0), forced(1), forced(2));
    for (binds, chosen) in [
        // The bench's: 5 channels, 8 output columns.
        (&["batch=[2]", "ipos=[10,10]", "fpos=[3,3]", "ichan=[4]", "ochan=[5]"][..], &["s2_y__ch8"][..]),
        // 32 channels, 16 columns: the realistic case (a row of it).
        (&["batch=[1]", "ipos=[3,18]", "fpos=[3,3]", "ichan=[32]", "ochan=[32]"], &["s2_y__rt2x2"]),
        // 32 columns and 32 channels: the 4x4 tile; 38 columns and 33
        // channels cut its edge tiles; 32 channels on 16 columns keep 2x2
        // (above), as do 40 columns of 16 channels.
        (&["batch=[1]", "ipos=[3,34]", "fpos=[3,3]", "ichan=[4]", "ochan=[32]"], &["s2_y__rt4x4"]),
        (&["batch=[1]", "ipos=[3,40]", "fpos=[2,3]", "ichan=[5]", "ochan=[33]"], &["s2_y__rt4x4"]),
        (&["batch=[1]", "ipos=[3,42]", "fpos=[3,3]", "ichan=[3]", "ochan=[16]"], &["s2_y__rt2x2"]),
        // Either condition of the 2x2 tile alone; edges of both tiled
        // loops cut a tile.
        (&["batch=[1]", "ipos=[10,10]", "fpos=[3,3]", "ichan=[4]", "ochan=[17]"], &["s2_y__rt2x2"]),
        (&["batch=[1]", "ipos=[7,21]", "fpos=[2,3]", "ichan=[3]", "ochan=[9]"], &["s2_y__rt2x2"]),
        (&["batch=[2]", "ipos=[9,18]", "fpos=[3,4]", "ichan=[5]", "ochan=[15]"], &["s2_y"]),
        // Few channels win over 16 columns; the edge blocks of 8x8
        // positions cut along both, input channels past whole steps.
        (&["batch=[1]", "ipos=[7,21]", "fpos=[2,3]", "ichan=[3]", "ochan=[5]"], &["s2_y__ch8"]),
        (&["batch=[2]", "ipos=[11,13]", "fpos=[3,2]", "ichan=[9]", "ochan=[8]"], &["s2_y__ch8"]),
        (&["batch=[1]", "ipos=[4,9]", "fpos=[1,1]", "ichan=[1]", "ochan=[1]"], &["s2_y__ch8"]),
        // One channel in, a filter as large as the input: one output row.
        (&["batch=[1]", "ipos=[5,18]", "fpos=[5,1]", "ichan=[1]", "ochan=[16]"], &["s2_y__rt2x2"]),
        // Empty: no output channels, no input channels (every sum 0), no
        // batch. Each launch is one block, which finds no work where there
        // are no outputs (a launch's thread count only sizes its grid).
        (&["batch=[1]", "ipos=[6,6]", "fpos=[2,2]", "ichan=[3]", "ochan=[0]"], &["s2_y__ch8"]),
        (&["batch=[1]", "ipos=[6,6]", "fpos=[2,2]", "ichan=[0]", "ochan=[3]"], &["s2_y__ch8"]),
        (&["batch=[0]", "ipos=[6,6]", "fpos=[2,2]", "ichan=[2]", "ochan=[3]"], &["s2_y__ch8"]),
    ] {
        let binds: Vec<String> = binds.iter().map(|s| s.to_string()).chain(["stride=[1,1]".to_string()]).collect();
        let launched = |name: &'static str| vec![name];
        for (bundle, want) in [
            (&b, chosen.to_vec()),
            (&general, launched("s2_y")),
            (&channels, launched("s2_y__ch8")),
            (&tiled4, launched("s2_y__rt4x4")),
            (&tiled, launched("s2_y__rt2x2")),
        ] {
            let ran = run_kernels(&src, bundle, &ranks, &binds, 0, 1e-12, 1 << 22).unwrap_or_else(|| panic!("{binds:?} is not a configuration of the bundle"));
            assert_eq!(ran, want, "{binds:?}");
        }
    }
}

/// The matmul's divisibility variant (docs/dynamic-shapes.md,
/// "Divisibility variants"), built as the bar measures it (`f32`, rank-0
/// batch): its kernel is compiled under `%k.0` and `%col.0` (the row
/// lengths of `a`, `b` and `c`) being multiples of 4, and its conditions
/// are exactly those facts. The bundle launches it where they hold (0 is a
/// multiple: an empty reduction), edges of blocks and of the short last
/// step included, and the general kernel where one does not; each equals
/// the interpreter.
#[test]
fn the_matmul_launches_its_divisibility_variant_where_its_row_lengths_are_multiples_of_4() {
    let src = Source::load(&example("matmul")).unwrap();
    let l = lower_dynamic(&src, &[], &[("batch".to_string(), 0)], FloatWidth::F32, FpContract::Off);
    let (_, sym, lowered) = &l;
    let names: Vec<&str> = lowered.variants.iter().map(|v| v.kernel.name.as_str()).collect();
    assert_eq!(names, ["s2_c__div4"]);
    let b = build(&src, &l, FloatWidth::F32, FpContract::Off);
    let listed = &b.manifest().dynamic.as_ref().unwrap().variants;
    let conditions: Vec<&[String]> = listed.iter().map(|v| &v.when[..]).collect();
    assert_eq!(conditions, [&["(0 - (%k.0 % 4))".to_string(), "(0 - (%col.0 % 4))".to_string()][..]]);
    // Its copies load 128 bits: the general kernel's PTX has no such load.
    let ptx = b.ptx();
    let variant_ptx = &ptx[ptx.find(".entry s2_c__div4").unwrap()..];
    assert!(variant_ptx.contains("ld.global.nc.v4.f32") && !ptx[..ptx.len() - variant_ptx.len()].contains("ld.global.nc.v4.f32"));
    // The bar's sizes, chosen by binding alone (the interpreter takes
    // minutes on them in a debug build; docs/dynamic-shapes.md reports
    // their runs against the static bundle).
    for ([row, k, col], chosen) in [([256, 256, 256], "s2_c__div4"), ([260, 252, 244], "s2_c__div4"), ([255, 257, 253], "s2_c")] {
        let shapes: BTreeMap<String, Vec<usize>> = [("a".to_string(), vec![row, k]), ("b".to_string(), vec![k, col])].into();
        let (bound, _) = b.bind_given(&shapes, &BTreeMap::new()).unwrap();
        let launched: Vec<&str> = bound
            .manifest()
            .steps
            .iter()
            .filter_map(|s| match s {
                eintup_runtime::manifest::Step::Launch { kernel, .. } => Some(kernel.as_str()),
                _ => None,
            })
            .collect();
        assert_eq!(launched, [chosen], "{row}x{k}x{col}");
    }
    // Run: multiples of 4 that are no multiples of the 64x64 block or the
    // 16-step (edge blocks, a short last step), whole blocks, tiny and
    // empty reductions; one non-multiple of each kind.
    for ([row, k, col], chosen) in [
        ([68, 36, 132], "s2_c__div4"),
        ([64, 32, 64], "s2_c__div4"),
        ([7, 12, 4], "s2_c__div4"),
        ([5, 0, 8], "s2_c__div4"),
        ([67, 37, 133], "s2_c"),
        ([9, 20, 6], "s2_c"),
        ([9, 6, 20], "s2_c"),
    ] {
        let binds = vec!["batch=[]".to_string(), format!("row=[{row}]"), format!("k=[{k}]"), format!("col=[{col}]")];
        let ran = run_kernels(&src, &b, &sym.ranks, &binds, 0, 1e-4, 1 << 20).unwrap_or_else(|| panic!("{binds:?} is not a configuration of the bundle"));
        assert_eq!(ran, [chosen], "{binds:?}");
    }
    // The condition is what makes it correct: forced where `%k.0` is 6,
    // its 128-bit loads are misaligned (the emulator faults).
    let forced = with_variants(&b, vec![eintup_runtime::manifest::Variant { when: Vec::new(), ..listed[0].clone() }]);
    let inputs: BTreeMap<String, eintup_runtime::Tensor> = [("a", [9, 6]), ("b", [6, 20])]
        .into_iter()
        .map(|(n, s)| (n.to_string(), eintup_runtime::Tensor { shape: s.to_vec(), data: Data::F32(vec![1.0; s[0] * s[1]]) }))
        .collect();
    let err = Device::emulator().run_profiled(&forced, &inputs).unwrap_err().to_string();
    assert!(err.contains("s2_c__div4") && err.contains("misaligned"), "{err}");
}

/// The gather's divisibility variant (`widen-threads` under the facts of
/// `div4`, docs/passes.md): where the rows' length `%item.0` is a multiple
/// of 4, each thread copies 16 bytes of a row (`ld.global.nc.v4.f32`,
/// `st.global.v4.f32`, a quarter of the store requests); elsewhere the
/// general kernel copies one value per thread. Both equal the interpreter.
#[test]
fn the_gather_copies_16_bytes_per_thread_where_its_rows_are_multiples_of_4() {
    let src = Source::load(&example("gather_nd")).unwrap();
    let ranks: Vec<(String, usize)> = [("batch", 0), ("loc", 2), ("w", 1), ("item", 1)].iter().map(|(n, r)| (n.to_string(), *r)).collect();
    let l = lower_dynamic(&src, &[], &ranks, FloatWidth::F32, FpContract::Off);
    let b = build(&src, &l, FloatWidth::F32, FpContract::Off);
    let listed = &b.manifest().dynamic.as_ref().unwrap().variants;
    let conditions: Vec<&[String]> = listed.iter().map(|v| &v.when[..]).collect();
    assert_eq!(conditions, [&["(0 - (%item.0 % 4))".to_string()][..]]);
    let ptx = b.ptx();
    let variant_ptx = &ptx[ptx.find(".entry s2_dst__div4").unwrap()..];
    assert!(variant_ptx.contains("st.global.v4.f32") && !ptx[..ptx.len() - variant_ptx.len()].contains("st.global.v4.f32"));
    // Empty rows launch one block, which finds no work (a launch's thread
    // count only sizes its grid): 0 items are a multiple of 4.
    for (item, chosen) in [(32, &["s2_dst__div4"][..]), (4, &["s2_dst__div4"]), (0, &["s2_dst__div4"]), (30, &["s2_dst"]), (3, &["s2_dst"])] {
        let binds = vec!["batch=[]".to_string(), "loc=[9,7]".to_string(), "w=[70]".to_string(), format!("item=[{item}]")];
        // The interpreter computes in f64: the copies are its values rounded to f32.
        let ran = run_kernels(&src, &b, &l.1.ranks, &binds, 0, 1e-6, 1 << 20).unwrap_or_else(|| panic!("{binds:?} is not a configuration of the bundle"));
        assert_eq!(ran, chosen, "{binds:?}");
    }
}

/// The 1-D convolution's few-channel variant: the same rule, a window of
/// one loop (its block's third dimension is the batch), against the
/// interpreter wherever it is forced.
#[test]
fn the_1d_convolution_has_the_few_channel_variant() {
    let bench = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../bench/ops/conv2d.et");
    let (src, b, ranks, lowered) = conv_stride_1_variants(&bench, 1);
    let names: Vec<&str> = lowered.variants.iter().map(|v| v.kernel.name.as_str()).collect();
    assert!(names.contains(&"s2_y__ch8"), "{names:?}");
    let listed = &b.manifest().dynamic.as_ref().unwrap().variants;
    let at = listed.iter().position(|v| v.kernel == "s2_y__ch8").unwrap();
    let channels = with_variants(&b, vec![eintup_runtime::manifest::Variant { when: Vec::new(), ..listed[at].clone() }]);
    for binds in [
        ["batch=[3]", "ipos=[13]", "fpos=[3]", "ichan=[4]", "ochan=[5]"],
        ["batch=[9]", "ipos=[21]", "fpos=[4]", "ichan=[7]", "ochan=[11]"],
        ["batch=[1]", "ipos=[3]", "fpos=[3]", "ichan=[1]", "ochan=[8]"],
    ] {
        let binds: Vec<String> = binds.iter().map(|s| s.to_string()).chain(["stride=[1]".to_string()]).collect();
        let ran = run_kernels(&src, &channels, &ranks, &binds, 0, 1e-12, 1 << 22).unwrap_or_else(|| panic!("{binds:?} is not a configuration of the bundle"));
        assert_eq!(ran, ["s2_y__ch8"], "{binds:?}");
    }
}

/// The dynamic matmul's whole steps (`for k_o in [0, %k.0 // 16)`) are
/// double-buffered by `pipeline-copies` (docs/passes.md, "Dynamic
/// trips"): the general kernel copies with 4-byte `cp.async` (its
/// alignment unknown), the divisibility variant `b` with 16-byte ones.
/// Run at step counts 0 to 6, with and without the short last step, at
/// edge blocks, on the emulator (which checks that no thread reads a
/// buffer an unwaited copy writes) against the interpreter.
#[test]
fn the_dynamic_matmul_double_buffers_its_steps_with_cp_async() {
    let src = Source::load(&example("matmul")).unwrap();
    let l = lower_dynamic(&src, &[], &[("batch".to_string(), 1)], FloatWidth::F32, FpContract::Off);
    let (_, sym, lowered) = &l;
    let all = lowered.with_variants();
    for k in &all.kernels {
        let mut copies = 0;
        k.walk(&mut |n| copies += matches!(n, eintup::ir::loops::Node::Compute(c) if c.write.kind == eintup::ir::loops::WriteKind::CopyAsync) as usize);
        assert!(copies > 0, "{}: no copy_async", k.name);
    }
    let b = build(&src, &l, FloatWidth::F32, FpContract::Off);
    let ptx = b.ptx();
    let at = ptx.find(".entry s2_c__div4").unwrap();
    let (general, variant) = (&ptx[..at], &ptx[at..]);
    assert!(general.contains("cp.async.ca.shared.global") && !general.contains("], 16;"), "the general kernel: 4-byte cp.async only");
    assert!(variant.contains("cp.async.cg.shared.global") && variant.contains("], 16;"), "the variant: 16-byte cp.async");
    for ([batch, row, k, col], chosen) in [
        ([2, 33, 17, 65], "s2_c"),
        // No rows: one block that finds no work (a launch's thread count
        // only sizes its grid).
        ([3, 0, 4, 5], "s2_c"),
        ([1, 64, 64, 64], "s2_c__div4"),
        ([1, 9, 15, 7], "s2_c"),
        ([1, 20, 32, 12], "s2_c__div4"),
        ([2, 17, 49, 3], "s2_c"),
        ([1, 70, 80, 68], "s2_c__div4"),
        ([1, 5, 95, 66], "s2_c"),
        ([1, 3, 100, 8], "s2_c__div4"),
    ] {
        let binds = vec![format!("batch=[{batch}]"), format!("row=[{row}]"), format!("k=[{k}]"), format!("col=[{col}]")];
        let ran = run_kernels(&src, &b, &sym.ranks, &binds, 0, 1e-4, 1 << 20).unwrap_or_else(|| panic!("{binds:?} is not a configuration of the bundle"));
        assert_eq!(ran, [chosen], "{binds:?}");
    }
}
