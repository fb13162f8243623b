//! `--backend cpu` (LLVM JIT of the optimised loop module) against the
//! reference interpreter on every example: default configurations with
//! several seeds, f64 and f32, and zero-sized / rank-0 eintups. INT must
//! match bit for bit; FLOAT within 1e-12 relative for f64 (summation order
//! may differ) and 1e-5 for f32.

use eintup::driver::Source;
use eintup::interp::{self, RunOptions};
use eintup::ir::loops::FloatWidth;
use eintup_codegen::backend::Backend;
use eintup_codegen::FpContract;
use eintup_testkit::{assert_tensors_close, examples, Tol};

/// False when the bindings contradict the program's constraints.
fn check(path: &std::path::Path, binds: &[String], seed: u64, float: FloatWidth) -> bool {
    let src = Source::load(path).unwrap();
    let Ok((m, _)) = eintup::pipeline::specialized_module(&src, binds, seed) else { return false };
    let opts = RunOptions { seed, float, inputs: Default::default(), ..RunOptions::default() };
    let want = interp::run(&m, &opts).unwrap();
    let got = eintup_codegen::backend::execute(&src, &m, Backend::Cpu, &opts, FpContract::Off).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    let tol = if float == FloatWidth::F32 { Tol::rel(1e-5) } else { Tol::rel(1e-12) };
    for (k, a) in m.arrays.iter().enumerate() {
        assert_tensors_close(&format!("{} {binds:?} seed {seed} {float:?}: `{}` (cpu vs interpreter)", path.display(), a.name), &got[k], &want[k], tol);
    }
    true
}

/// `module` on the host (`--fp-contract off`) gives the interpreter's
/// arrays bit for bit.
fn assert_cpu_is_the_interpreter(src: &Source, module: &eintup::ir::et::Module, seed: u64, float: FloatWidth, what: &str) {
    let opts = RunOptions { seed, float, inputs: Default::default(), ..RunOptions::default() };
    let want = interp::run(module, &opts).unwrap();
    let got = eintup_codegen::backend::execute(src, module, Backend::Cpu, &opts, FpContract::Off).unwrap();
    for (k, a) in module.arrays.iter().enumerate() {
        assert_tensors_close(&format!("{what} `{}` (cpu vs interpreter)", a.name), &got[k], &want[k], Tol::EXACT);
    }
}

#[test]
fn cpu_backend_matches_the_interpreter_on_every_example() {
    for p in examples() {
        for seed in 0..3 {
            assert!(check(&p, &[], seed, FloatWidth::F64));
        }
        assert!(check(&p, &[], 5, FloatWidth::F32));
    }
}

#[test]
fn cpu_backend_handles_zero_sized_and_rank_0_eintups() {
    let mut tried = 0;
    for p in examples() {
        let src = Source::load(&p).unwrap();
        let prog = eintup::pipeline::resolved(&src).unwrap();
        for e in &prog.module.eintups {
            for b in [format!("{}=[0]", e.name), format!("{}=[]", e.name)] {
                tried += check(&p, &[b], 2, FloatWidth::F64) as usize;
            }
        }
    }
    assert!(tried >= 15, "only {tried} configurations were valid");
}

/// The benchmark programs (bench/ops) at sizes where the host splits the
/// root loop across threads (`MIN_SPLIT_ITERATIONS`) and, after
/// `interchange`, vectorises: the results must still be the interpreter's,
/// bit for bit (each cell sums its terms in the interpreter's order).
#[test]
fn cpu_backend_split_across_threads_matches_the_interpreter_exactly() {
    use eintup_codegen::{host::MIN_SPLIT_ITERATIONS, lower::split_range};
    let dir = eintup_testkit::root().join("bench/ops");
    let cases: [(&str, &[&str], bool); 6] = [
        ("matmul.et", &["batch=[3]", "row=[40]", "k=[30]", "col=[40]"], true),
        ("conv2d.et", &["batch=[3]", "ipos=[20,20]", "fpos=[3,3]", "stride=[1,1]", "ichan=[4]", "ochan=[8]"], true),
        ("reduce_sum.et", &["keep=[300]", "drop=[300]"], true),
        ("space_to_depth.et", &["batch=[2]", "pos=[200,200]", "chan=[2]", "blk=[2,2]"], true),
        ("gather_nd.et", &["batch=[]", "loc=[30,30]", "item=[3]", "w=[30000]"], true),
        // Duplicate targets: the atomic kernel stays on one thread.
        ("scatter_nd.et", &["upd=[70000]", "dest=[50]", "item=[2]"], false),
    ];
    for (file, binds, split) in cases {
        let src = Source::load(&dir.join(file)).unwrap();
        let binds: Vec<String> = binds.iter().map(|s| s.to_string()).collect();
        let (module, _) = eintup::pipeline::specialized_module(&src, &binds, 1).unwrap();
        for float in [FloatWidth::F64, FloatWidth::F32] {
            let lm =
                eintup::pipeline::lower_host(&src, &module, float, eintup_codegen::FpContract::Off, eintup_codegen::HostCpu::Native.host_target().unwrap())
                    .unwrap();
            let big = lm.kernels.iter().filter(|k| k.iteration_count().unwrap() >= MIN_SPLIT_ITERATIONS);
            let splits = big.filter(|k| split_range(k).is_some()).count();
            assert_eq!(splits > 0, split, "{file}: kernels split across threads");
            assert_cpu_is_the_interpreter(&src, &module, 1, float, &format!("{file} {float:?}"));
        }
    }
}

/// Programs whose dims are inferred (range inference, docs/shapes.md):
/// the host agrees with the interpreter on every seed's configuration, in
/// 1, 2 and 3 spatial dims, zero-sized and rank-0 ones included.
#[test]
fn cpu_backend_matches_the_interpreter_on_inferred_dims() {
    let conv = "x[b,ipos,c1] = RANDOM(0, 1, FLOAT)\nw[fpos,c1,c2] = RANDOM(0, 1, FLOAT)\ny[b,o,c2] = x[b,o+k,c1] * w[k,c1,c2]\n\ny\n\nRANK(b) = 1\nRANK(c1) = 1\nRANK(c2) = 1\nRANK(ipos) IN [0,3]\n";
    let strided = "in[p] = RANDOM(0, 10, INT)\nw[f] = RANDOM(0, 10, INT)\nout[o] = in[DIMS(s)*o + k] * w[k]\n\nDIMS(s) IN [1,3]\n";
    let shift = "x[j] = RANDOM(0, 1, FLOAT)\ny[i] = x[i+2] + x[i-1]\n\nDIMS(j) IN [0,9]\n";
    let dir = std::env::temp_dir().join(format!("eintup-inferred-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let mut ran = 0;
    for (name, text) in [("conv.et", conv), ("strided.et", strided), ("shift.et", shift)] {
        let path = dir.join(name);
        std::fs::write(&path, text).unwrap();
        for seed in 0..6 {
            ran += check(&path, &[], seed, FloatWidth::F64) as usize;
        }
        for b in ["ipos=[]", "fpos=[0]", "j=[2]"] {
            ran += check(&path, &[b.to_string()], 1, FloatWidth::F64) as usize;
        }
    }
    std::fs::remove_dir_all(&dir).ok();
    assert!(ran >= 15, "only {ran} configurations were valid");
}

/// Matrix products large enough for `cache-tiles` (their `b` more than a
/// 512 KiB panel), with blocks that do and do not divide the trips, f64,
/// f32 and INT, and zero-sized dims: the host's results are the
/// interpreter's bit for bit (each cell still adds its terms in order).
#[test]
fn cpu_backend_cache_tiled_matches_the_interpreter_exactly() {
    use eintup::ir::loops::{LoopKind, Node};
    let dir = std::env::temp_dir().join(format!("eintup-cache-tiles-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let program = |t: &str| format!("a[i,j] = RANDOM(0, 9, {t})\nb[j,l] = RANDOM(0, 9, {t})\nc[i,l] = a[i,j] * b[j,l]\n\nc\n");
    // (type, float width, i, j, l, blocked): j is the reduction, l the
    // columns (tiles of 16).
    let cases = [
        ("FLOAT", FloatWidth::F64, 8, 300, 272, true),  // 256 + 44 steps of j; panels of 16 + 1 column tiles
        ("FLOAT", FloatWidth::F64, 12, 256, 512, true), // one block of j, two panels
        ("FLOAT", FloatWidth::F32, 8, 520, 320, true),  // 256 + 256 + 8 steps of j
        ("INT", FloatWidth::F64, 8, 520, 320, true),    // 4-byte cells: as the f32 case
        ("FLOAT", FloatWidth::F64, 4, 300, 272, false), // one row block: b is read once
        ("FLOAT", FloatWidth::F64, 0, 300, 272, false),
        ("FLOAT", FloatWidth::F64, 8, 0, 272, false),
        ("FLOAT", FloatWidth::F64, 8, 300, 0, false),
    ];
    for (t, float, i, j, l, blocked) in cases {
        let path = dir.join(format!("mm_{t}.et"));
        std::fs::write(&path, program(t)).unwrap();
        let src = Source::load(&path).unwrap();
        let binds = vec![format!("i=[{i}]"), format!("j=[{j}]"), format!("l=[{l}]")];
        let what = format!("{t} {float:?} {i}x{j}x{l}");
        let (module, _) = eintup::pipeline::specialized_module(&src, &binds, 3).unwrap();
        let lm = eintup::pipeline::lower_host(&src, &module, float, FpContract::Off, eintup_codegen::HostCpu::Native.host_target().unwrap()).unwrap();
        // A cache-tiled product has one parallel loop (panels) before the
        // blocks of the reduction, or three (panels, rows, columns) when
        // the reduction is one block; the register tiles alone leave two.
        let leading = |mut nodes: &[Node]| {
            let mut n = 0;
            while let [Node::For(f)] = nodes {
                if f.kind != LoopKind::Parallel {
                    break;
                }
                n += 1;
                nodes = &f.body;
            }
            n
        };
        let fired = lm.kernels.iter().any(|k| k.is_register_tiled() && leading(&k.body) != 2);
        assert_eq!(fired, blocked, "{what}: cache-tiled");
        assert_cpu_is_the_interpreter(&src, &module, 3, float, &what);
    }
    std::fs::remove_dir_all(&dir).ok();
}

/// Two products in a row, each packing its streamed operand (`cache-tiles`):
/// `share-buffers` gives the second panel the first's memory, and the
/// results stay the interpreter's bit for bit (the second pack writes
/// every element before the second product reads any).
#[test]
fn cpu_backend_shares_dead_panels_and_matches_the_interpreter_exactly() {
    use eintup::ir::loops::{KernelRole, Role};
    let dir = std::env::temp_dir().join(format!("eintup-share-buffers-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let program = |t: &str| {
        format!("a[i,j] = RANDOM(0, 9, {t})\nb[j,l] = RANDOM(0, 9, {t})\nc[i,l] = a[i,j] * b[j,l]\nd[l,m] = RANDOM(0, 9, {t})\ne[i,m] = c[i,l] * d[l,m]\n\ne\n")
    };
    for (t, float) in [("FLOAT", FloatWidth::F64), ("INT", FloatWidth::F64), ("FLOAT", FloatWidth::F32)] {
        let path = dir.join(format!("two_{t}.et"));
        std::fs::write(&path, program(t)).unwrap();
        let src = Source::load(&path).unwrap();
        // Both streamed operands exceed the 512 KiB panel bound (f64: 272 x
        // 272; 4-byte cells: 400 x 384 and 384 x 384); 272 and 384 are
        // multiples of every host tile's columns.
        let (j, n) = if t == "FLOAT" && float == FloatWidth::F64 { (272, 272) } else { (400, 384) };
        let binds = vec!["i=[8]".to_string(), format!("j=[{j}]"), format!("l=[{n}]"), format!("m=[{n}]")];
        let what = format!("{t} {float:?}");
        let (module, _) = eintup::pipeline::specialized_module(&src, &binds, 3).unwrap();
        let lm = eintup::pipeline::lower_host(&src, &module, float, FpContract::Off, eintup_codegen::HostCpu::Native.host_target().unwrap()).unwrap();
        let packs = lm.kernels.iter().filter(|k| k.role == KernelRole::Pack).count();
        let transients = lm.buffers.iter().filter(|b| b.role == Role::Transient).count();
        assert_eq!((packs, transients), (2, 1), "{what}: two packs, one panel buffer");
        assert_cpu_is_the_interpreter(&src, &module, 3, float, &what);
    }
    std::fs::remove_dir_all(&dir).ok();
}
