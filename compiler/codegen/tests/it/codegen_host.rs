//! Host code generation: loop modules built by hand (tests/codegen_cases)
//! are JIT-compiled and run with `run_host`; results are compared with the
//! same computations written directly in Rust from the semantics
//! (docs/language.md section 3, the loop dialect's doc comments).

use crate::codegen_cases;

use codegen_cases as cases;
use eintup::ir::loops::{DType, For, IBin, IExpr, LoopKind, LoopModule, Node};
use eintup::random::Stream;
use eintup::tensor::{Data, Tensor};
use eintup_codegen::{emit_llvm, kernel_params, run_host, FpContract, HostCpu, Target};
use eintup_testkit::{assert_close, Tol};

/// FLOAT agreement between compiled code and the formulas here.
const TOL: Tol = Tol::rel(1e-12);

/// A zero tensor for every buffer of `m`.
fn zeros(m: &LoopModule) -> Vec<Tensor> {
    m.buffers
        .iter()
        .map(|b| {
            let shape: Vec<usize> = b.dims().expect("static shape").iter().map(|&d| d as usize).collect();
            Tensor::zeros(b.dtype, &shape).unwrap()
        })
        .collect()
}

fn f64s(t: &Tensor) -> &[f64] {
    match &t.data {
        Data::F64(v) => v,
        d => panic!("expected f64 data, got {d:?}"),
    }
}

fn f32s(t: &Tensor) -> &[f32] {
    match &t.data {
        Data::F32(v) => v,
        d => panic!("expected f32 data, got {d:?}"),
    }
}

fn ints(t: &Tensor) -> &[i32] {
    match &t.data {
        Data::I32(v) => v,
        d => panic!("expected int data, got {d:?}"),
    }
}

/// Python `a // b`, `ceil(a / b)` and `a % b` with divisor 0 giving 0,
/// computed through f64 (exact enough for |a|, |b| <= 2^32).
fn py_floor(a: i64, b: i64) -> i64 {
    if b == 0 {
        0
    } else {
        (a as f64 / b as f64).floor() as i64
    }
}
fn py_ceil(a: i64, b: i64) -> i64 {
    if b == 0 {
        0
    } else {
        (a as f64 / b as f64).ceil() as i64
    }
}
fn py_mod(a: i64, b: i64) -> i64 {
    if b == 0 {
        0
    } else {
        a - b * py_floor(a, b)
    }
}

#[test]
fn matmul_then_dependent_kernel() {
    let m = cases::matmul();
    let (mm, kk, nn) = cases::MM;
    let (mm, kk, nn) = (mm as usize, kk as usize, nn as usize);
    let a: Vec<f64> = (0..mm * kk).map(|i| i as f64 * 0.5 - 1.25).collect();
    let b: Vec<f64> = (0..kk * nn).map(|i| (i % 7) as f64 - 3.0).collect();
    let mut bufs = zeros(&m);
    bufs[0].data = Data::F64(a.clone());
    bufs[1].data = Data::F64(b.clone());
    run_host(&m, 0, &mut bufs).unwrap();
    let mut c = vec![0.0; mm * nn];
    for i in 0..mm {
        for j in 0..nn {
            for k in 0..kk {
                c[i * nn + j] += a[i * kk + k] * b[k * nn + j];
            }
        }
    }
    let d: Vec<f64> = c.iter().map(|x| 2.0 * x - 1.0).collect();
    assert_close("c", f64s(&bufs[2]), &c, TOL);
    assert_close("d", f64s(&bufs[3]), &d, TOL);
    assert_eq!(kernel_params(&m, &m.kernels[0]), vec![0, 1, 2]);
    assert_eq!(kernel_params(&m, &m.kernels[1]), vec![2, 3]);
}

/// Compiled in groups of kernels on several threads (`compile_groups`),
/// a program computes what it computes compiled in one piece: the matmul
/// and its dependent kernel in one group or two, against the formula.
#[test]
fn kernels_compiled_on_several_threads_run_as_one_program() {
    let m = cases::matmul();
    assert_eq!(eintup_codegen::compile_groups(&m, 1), vec![vec![0, 1]]);
    assert_eq!(eintup_codegen::compile_groups(&m, 2), vec![vec![0], vec![1]]);
    for threads in [1, 2, 3] {
        check_matmul_case(&m, &eintup_codegen::HostProgram::compile_on(m.clone(), 0, FpContract::Off, threads).unwrap());
    }
}

/// Groups balance the kernels' compile cost (largest first into the
/// cheapest group), keep each group in module order, and never outnumber
/// the kernels or `MAX_COMPILE_GROUPS`.
#[test]
fn compile_groups_balance_the_kernels_cost() {
    let base = cases::matmul();
    let (mut mm, post) = (base.kernels[0].clone(), base.kernels[1].clone());
    // Under an `unroll` loop of 4, the nest counts 4 times (never run).
    let u = mm.vars.len();
    mm.vars.push(eintup::ir::loops::Var { name: "u".into() });
    mm.body = vec![Node::For(For { var: u, lo: IExpr::c(0), hi: IExpr::c(4), kind: LoopKind::Unroll, body: mm.body })];
    let (cm, cp) = (eintup_codegen::compile_cost(&mm), eintup_codegen::compile_cost(&post));
    assert!(cm > cp, "the matmul's nest ({cm}) costs more than the scaling loop ({cp})");
    // Kernels 0..3 cost cm, 3..6 cost cp.
    let mut m = base.clone();
    m.kernels = (0..6)
        .map(|i| {
            let mut k = if i < 3 { mm.clone() } else { post.clone() };
            k.name = format!("k{i}");
            k
        })
        .collect();
    let two = eintup_codegen::compile_groups(&m, 2);
    assert_eq!(two.len(), 2);
    let cost = |g: &Vec<usize>| g.iter().map(|&i| eintup_codegen::compile_cost(&m.kernels[i])).sum::<u128>();
    let (c0, c1) = (cost(&two[0]), cost(&two[1]));
    assert!(c0.abs_diff(c1) <= cm, "balanced within one kernel: {two:?} ({c0} vs {c1})");
    assert!(two.iter().all(|g| g.windows(2).all(|w| w[0] < w[1])));
    let mut all: Vec<usize> = two.concat();
    all.sort_unstable();
    assert_eq!(all, (0..6).collect::<Vec<_>>());
    assert_eq!(eintup_codegen::compile_groups(&m, 64).len(), 6);
    assert_eq!(eintup_codegen::compile_groups(&m, 0).len(), 1);
}

#[test]
fn guarded_strided_conv_with_min_max_bounds() {
    let m = cases::conv1d();
    let (l, w, s, p) = cases::CONV;
    let x: Vec<f32> = (0..l).map(|i| i as f32 * 0.25 - 1.0).collect();
    let f = vec![0.5f32, -1.0, 2.0];
    let mut bufs = zeros(&m);
    bufs[0].data = Data::F32(x.clone());
    bufs[1].data = Data::F32(f.clone());
    run_host(&m, 0, &mut bufs).unwrap();
    let want: Vec<f32> = (0..cases::conv_out_len())
        .map(|o| {
            let mut acc = 0.0f32;
            for t in 0..w {
                let pos = o * s + t - p;
                if (0..l).contains(&pos) {
                    acc += x[pos as usize] * f[t as usize];
                }
            }
            acc
        })
        .collect();
    assert_eq!(f32s(&bufs[2]), &want[..]);
    // Padding really happens: the first output only sees two taps.
    assert_eq!(want[0], x[0] * f[1] + x[1] * f[2]);
}

#[test]
fn gather_through_load_index_and_lookup() {
    let m = cases::gather();
    let mut bufs = zeros(&m);
    bufs[0].data = Data::F64(vec![10.5, -1.0, 3.25, 8.0]);
    bufs[1].data = Data::I32(vec![3, -1, 0, 4, 2, 2]);
    run_host(&m, 0, &mut bufs).unwrap();
    assert_eq!(f64s(&bufs[2]), &[8.0, 0.0, 10.5, 0.0, 3.25, 3.25]);
    let want: Vec<i32> = cases::TABLE.iter().enumerate().map(|(i, &t)| t as i32 + i as i32).collect();
    assert_eq!(ints(&bufs[3]), &want[..]);
}

#[test]
fn int_arithmetic_wraps_and_divides_like_python() {
    let m = cases::int_ops();
    let a = vec![7, -7, 7, -7, i32::MAX, i32::MIN, i32::MIN, 0, 5, -9];
    let b = vec![2, 2, -2, -2, 1, -1, 0, 3, 0, 4];
    let mut bufs = zeros(&m);
    bufs[0].data = Data::I32(a.clone());
    bufs[1].data = Data::I32(b.clone());
    run_host(&m, 0, &mut bufs).unwrap();
    let r = ints(&bufs[2]);
    let n = cases::INT_N as usize;
    for i in 0..n {
        let (x, y) = (a[i] as i64, b[i] as i64);
        let want =
            [a[i].wrapping_add(b[i]), a[i].wrapping_sub(b[i]), a[i].wrapping_mul(b[i]), py_floor(x, y) as i32, py_ceil(x, y) as i32, py_mod(x, y) as i32];
        for (o, w) in want.iter().enumerate() {
            assert_eq!(r[o * n + i], *w, "{} {:?} {}", a[i], cases::INT_OPS[o], b[i]);
        }
    }
    // Spot checks written out by hand.
    assert_eq!(r[3 * n + 1], -4); // -7 // 2
    assert_eq!(r[5 * n + 2], -1); // 7 % -2
    assert_eq!(r[3 * n + 5], i32::MIN); // MIN // -1 wraps
    assert_eq!(r[3 * n + 6], 0); // MIN // 0
    assert_eq!(r[5 * n + 8], 0); // 5 % 0
    assert_eq!(r[2 * n + 4], i32::MAX); // MAX * 1
    assert_eq!(r[4], i32::MIN); // MAX + 1 wraps
    assert_eq!(r[n + 5], i32::MIN + 1); // MIN - (-1)
}

#[test]
fn index_arithmetic_with_runtime_and_constant_divisors() {
    let m = cases::index_ops();
    let d = vec![3, -3, 0, 1, -1, 2, -2, 5, -5, 4, 7, -7];
    let mut bufs = zeros(&m);
    bufs[0].data = Data::I32(d.clone());
    run_host(&m, 0, &mut bufs).unwrap();
    let r = ints(&bufs[1]);
    let n = cases::INDEX_N as usize;
    for i in 0..n {
        let (x, t) = (i as i64 - 6, d[i] as i64);
        let want = [py_floor(x, t), py_ceil(x, t), py_mod(x, t), x.min(t), x.max(t), py_floor(t, -3), 0];
        for (o, w) in want.iter().enumerate() {
            let op = cases::INDEX_OPS.get(o).copied().unwrap_or(IBin::FloorDiv);
            assert_eq!(r[o * n + i] as i64, *w, "kernel {o} ({op:?}) at x={x}, t={t}");
        }
    }
}

#[test]
fn float_division_family() {
    let m = cases::float_ops();
    let a = vec![7.5, -7.5, 7.5, -7.5, 1.0, 0.0, 3.0, -2.0];
    let b = vec![2.0, 2.0, -2.0, -2.0, 0.0, 0.0, 0.1, 3.0];
    let mut bufs = zeros(&m);
    bufs[0].data = Data::F64(a.clone());
    bufs[1].data = Data::F64(b.clone());
    run_host(&m, 0, &mut bufs).unwrap();
    let r = f64s(&bufs[2]);
    let n = cases::FLOAT_N as usize;
    for i in 0..n {
        let (x, y) = (a[i], b[i]);
        let q = x / y;
        let want = [q, q.floor(), q.ceil(), x - y * q.floor()];
        let got: Vec<f64> = (0..4).map(|o| r[o * n + i]).collect();
        assert_close(&format!("{x} op {y}"), &got, &want, TOL);
    }
    assert_eq!(r[n + 1], -4.0); // -7.5 // 2
    assert_eq!(r[3 * n + 2], -0.5); // 7.5 % -2
    assert!(r[3 * n + 4].is_nan()); // 1 % 0 = 1 - 0*inf
}

#[test]
fn casts_saturate_and_round() {
    let m = cases::casts();
    let x = vec![2.7, -2.7, 1e10, -1e10, f64::NAN, f64::INFINITY, -0.5, 123456789.123];
    let mut bufs = zeros(&m);
    bufs[0].data = Data::F64(x.clone());
    run_host(&m, 0, &mut bufs).unwrap();
    let want_i = [2, -2, i32::MAX, i32::MIN, 0, i32::MAX, 0, 123456789];
    assert_eq!(ints(&bufs[1]), &want_i);
    let want_f: Vec<f32> = x.iter().map(|&v| v as f32).collect();
    let got_f = f32s(&bufs[2]);
    for (g, w) in got_f.iter().zip(&want_f) {
        assert!(g.to_bits() == w.to_bits() || (g.is_nan() && w.is_nan()), "{g} vs {w}");
    }
    let want_g: Vec<f64> = want_i.iter().map(|&v| v as f64).collect();
    assert_eq!(f64s(&bufs[3]), &want_g[..]);
}

#[test]
fn random_matches_the_shared_generator() {
    let m = cases::random();
    for seed in [0u64, 12345, u64::MAX] {
        let mut bufs = zeros(&m);
        run_host(&m, seed, &mut bufs).unwrap();
        let n = (cases::RANDOM_SHAPE[0] * cases::RANDOM_SHAPE[1]) as u64;
        let (si, sf, ss) = (Stream::new(seed, "ri"), Stream::new(seed, "rf"), Stream::new(seed, "rs"));
        let want_i: Vec<i32> = (0..n).map(|k| si.int(k, -3, 10) as i32).collect();
        let want_f: Vec<f64> = (0..n).map(|k| sf.float(k, -5.0, 5.0)).collect();
        let want_s: Vec<f32> = (0..n).map(|k| ss.float(k, 0.0, 1.0) as f32).collect();
        assert_eq!(ints(&bufs[0]), &want_i[..], "seed {seed}");
        assert_eq!(f64s(&bufs[1]), &want_f[..], "seed {seed}");
        assert_eq!(f32s(&bufs[2]), &want_s[..], "seed {seed}");
        assert!(ints(&bufs[3]).iter().all(|&v| v == 4), "empty range gives lo");
        // The draws are not degenerate.
        assert!(want_i.iter().any(|&v| v != want_i[0]));
    }
}

#[test]
fn rank0_and_zero_sized_buffers() {
    let m = cases::scalars_and_empty();
    let mut bufs = zeros(&m);
    bufs[0].data = Data::F64(vec![1.0, 2.0, 3.0, 4.0, 5.5]);
    run_host(&m, 0, &mut bufs).unwrap();
    assert_eq!(f64s(&bufs[1]), &[15.5]);
    assert!(bufs[2].is_empty() && bufs[3].is_empty());
}

#[test]
fn atomic_accumulate_sums_every_contribution() {
    let m = cases::atomics();
    let n = cases::HIST_N as usize;
    let bins = cases::HIST_BINS as usize;
    let x: Vec<f64> = (0..n).map(|i| i as f64 * 0.5 - 3.0).collect();
    let xs: Vec<f32> = (0..n).map(|i| i as f32 * 0.25).collect();
    let mut bufs = zeros(&m);
    bufs[0].data = Data::F64(x.clone());
    bufs[1].data = Data::F32(xs.clone());
    run_host(&m, 0, &mut bufs).unwrap();
    let mut w = vec![0.0f64; bins];
    let mut ws = vec![0.0f32; bins];
    for i in 0..n {
        w[i % bins] += x[i];
        ws[i % bins] += xs[i];
    }
    assert_eq!(ints(&bufs[2]), &vec![(n / bins) as i32; bins][..]);
    assert_close("w", f64s(&bufs[3]), &w, TOL);
    assert_eq!(f32s(&bufs[4]), &ws[..]);
}

#[test]
fn mismatched_tensors_are_errors() {
    let m = cases::matmul();
    let mut bufs = zeros(&m);
    bufs.pop();
    assert!(run_host(&m, 0, &mut bufs).is_err());
    let mut bufs = zeros(&m);
    bufs[0].data = Data::F32(vec![0.0; 12]);
    let e = run_host(&m, 0, &mut bufs).unwrap_err();
    assert!(e.to_string().contains("buffer `a`"), "{e}");
    let mut bufs = zeros(&m);
    bufs[1].data = Data::F64(vec![0.0; 3]);
    assert!(run_host(&m, 0, &mut bufs).is_err());
}

#[test]
fn malformed_modules_are_errors_not_panics() {
    // A variable used outside the loop that binds it.
    let mut m = cases::gather();
    m.kernels[1].body.push(cases::compute(
        vec![cases::val(eintup::ir::loops::VOp::Index(cases::v(0)), DType::I32)],
        eintup::ir::loops::WriteKind::Store,
        3,
        cases::c(0),
        0,
    ));
    let e = emit_llvm(&m, 0, HOST).unwrap_err();
    assert!(e.to_string().contains("out of scope"), "{e}");
    // A kernel name that is not a PTX identifier, and duplicate names.
    let mut m = cases::matmul();
    m.kernels[0].name = "mat-mul".into();
    assert!(emit_llvm(&m, 0, HOST).is_err());
    let mut m = cases::matmul();
    m.kernels[1].name = "matmul".into();
    assert!(emit_llvm(&m, 0, HOST).is_err());
    // A value used before it is defined, and a buffer that does not exist.
    let mut m = cases::gather();
    if let eintup::ir::loops::Node::For(f) = &mut m.kernels[1].body[0] {
        if let eintup::ir::loops::Node::Compute(c) = &mut f.body[0] {
            c.values[2].op = eintup::ir::loops::VOp::Bin(eintup::ir::loops::BinOp::Add, 0, 2);
        }
    }
    assert!(emit_llvm(&m, 0, HOST).is_err());
    let mut m = cases::matmul();
    m.buffers.truncate(2);
    assert!(emit_llvm(&m, 0, HOST).is_err());
}

/// Host code for a named CPU (AVX2 and FMA): the vectorised IR these tests
/// read must not depend on the machine that runs them.
const HOST: Target = Target::Host { fp_contract: FpContract::Off, cpu: HostCpu::X86_64V3 };

#[test]
fn host_llvm_is_optimised_without_fast_math() {
    let ir = emit_llvm(&cases::matmul(), 0, HOST).unwrap();
    assert!(ir.contains("@et.matmul(ptr"), "{ir}");
    assert!(ir.contains("@et.scale(ptr"), "{ir}");
    // Kernel bodies take `noalias` buffers; inlined into the host entry
    // that becomes scoped alias metadata on every access.
    assert!(ir.contains("!alias.scope") && ir.contains("!noalias"), "{ir}");
    assert!(!ir.contains("define internal"), "every body is inlined into its entry:\n{ir}");
    for flag in ["fast ", "nnan", "ninf", "nsz", "arcp", "contract", "reassoc"] {
        assert!(!ir.contains(flag), "fast-math flag `{flag}` in\n{ir}");
    }
    // Constant divisor: after O3 no select guards the divisor any more,
    // whatever the vector width (SSE2, AVX2, AVX-512).
    for cpu in [HostCpu::X86_64, HostCpu::X86_64V3, HostCpu::X86_64V4] {
        let ir = emit_llvm(&cases::index_ops(), 0, Target::Host { fp_contract: FpContract::Off, cpu }).unwrap();
        let f = ir.split("define").find(|f| f.contains("@et.index5(")).unwrap();
        // (The guards compare the divisor with 0 and -1.)
        let divisor_guard = |l: &str| l.contains("icmp eq") && [", 0", ", -1", "zeroinitializer", " -1>"].iter().any(|e| l.trim_end().ends_with(e));
        assert!(!f.lines().any(divisor_guard), "{cpu:?}: {f}");
        // ... which a run-time divisor (kernel index0) does need.
        let f0 = ir.split("define").find(|f| f.contains("@et.index0(")).unwrap();
        assert!(f0.lines().any(divisor_guard), "{cpu:?}: {f0}");
        // (Scalar `, 3` or, vectorised since kernels are `noalias`, a splat `i32 3>`.)
        let constant = |l: &str| [", 3", ", -3", " 3>", " -3>"].iter().any(|e| l.trim_end().ends_with(e));
        assert!(f.lines().filter(|l| l.contains("sdiv") || l.contains("srem")).all(constant), "{cpu:?}: {f}");
    }
}

/// matmul's inputs and its expected `c` and `d = 2c - 1`, from the formula.
/// Runs `p`, compiled from `cases::matmul()` (`m`), on `matmul_case`'s
/// inputs and checks both results against its formulas.
fn check_matmul_case(m: &LoopModule, p: &eintup_codegen::HostProgram) {
    let (a, b, c_want, d_want) = matmul_case();
    let mut bufs = zeros(m);
    bufs[0].data = Data::F64(a);
    bufs[1].data = Data::F64(b);
    p.run(&mut bufs).unwrap();
    assert_close("c", f64s(&bufs[2]), &c_want, TOL);
    assert_close("d", f64s(&bufs[3]), &d_want, TOL);
}

fn matmul_case() -> (Vec<f64>, Vec<f64>, Vec<f64>, Vec<f64>) {
    let (mm, kk, nn) = cases::MM;
    let (mm, kk, nn) = (mm as usize, kk as usize, nn as usize);
    let a: Vec<f64> = (0..mm * kk).map(|i| i as f64 * 0.25 - 2.0).collect();
    let b: Vec<f64> = (0..kk * nn).map(|i| (i % 5) as f64 - 1.5).collect();
    let mut c = vec![0.0; mm * nn];
    for i in 0..mm {
        for j in 0..nn {
            for k in 0..kk {
                c[i * nn + j] += a[i * kk + k] * b[k * nn + j];
            }
        }
    }
    let d = c.iter().map(|x| 2.0 * x - 1.0).collect();
    (a, b, c, d)
}

#[test]
fn run_on_runs_on_borrowed_memory_and_checks_it_first() {
    use eintup_codegen::{BufferRef, HostProgram};
    let m = cases::matmul();
    let p = HostProgram::compile(m.clone(), 0, FpContract::Off).unwrap();
    let (a, b, c_want, d_want) = matmul_case();
    let (mut c, mut d) = (vec![0.0f64; c_want.len()], vec![0.0f64; d_want.len()]);
    // Inputs read-only, in place; c and d written in place.
    let mut refs = vec![BufferRef::of_read_only(&a), BufferRef::of_read_only(&b), BufferRef::of_slice(&mut c), BufferRef::of_slice(&mut d)];
    p.run_on(&mut refs).unwrap();
    drop(refs);
    assert_close("c", &c, &c_want, TOL);
    assert_close("d", &d, &d_want, TOL);
    assert!(!p.writes(0) && !p.writes(1) && p.writes(2) && p.writes(3));

    let err = |mut refs: Vec<BufferRef<'_>>| p.run_on(&mut refs).unwrap_err().to_string();
    let (mut c, mut d) = (vec![0.0f64; c_want.len()], vec![0.0f64; d_want.len()]);
    // A buffer the program writes, given read-only.
    let e = err(vec![BufferRef::of_read_only(&a), BufferRef::of_read_only(&b), BufferRef::of_read_only(&c), BufferRef::of_slice(&mut d)]);
    assert!(e.contains("buffer `c` is written by the program but given read-only"), "{e}");
    // Wrong byte size; too few buffers.
    let e = err(vec![BufferRef::of_read_only(&a[1..]), BufferRef::of_read_only(&b), BufferRef::of_slice(&mut c), BufferRef::of_slice(&mut d)]);
    assert!(e.contains("buffer `a`") && e.contains("bytes"), "{e}");
    assert!(err(vec![BufferRef::of_read_only(&a), BufferRef::of_read_only(&b)]).contains("2 buffers given for 4"));
    // Misaligned f64s: one byte into a buffer.
    let raw = vec![0u8; a.len() * 8 + 8];
    let off = if (raw.as_ptr() as usize).is_multiple_of(8) { 1 } else { 0 };
    // SAFETY: `raw` outlives the run, is only read, and holds the bytes.
    let mis = unsafe { BufferRef::from_raw(raw.as_ptr().add(off) as *mut u8, a.len() * 8, false) };
    let e = err(vec![mis, BufferRef::of_read_only(&b), BufferRef::of_slice(&mut c), BufferRef::of_slice(&mut d)]);
    assert!(e.contains("buffer `a` is not aligned"), "{e}");
    // A written buffer aliasing another: refused before any kernel runs.
    let mut cd = vec![7.0f64; c_want.len().max(d_want.len())];
    // SAFETY: `cd` outlives the run; the aliasing is what is tested (refused before use).
    let (c1, d1) = unsafe {
        (BufferRef::from_raw(cd.as_mut_ptr() as *mut u8, c_want.len() * 8, true), BufferRef::from_raw(cd.as_mut_ptr() as *mut u8, d_want.len() * 8, true))
    };
    let e = err(vec![BufferRef::of_read_only(&a), BufferRef::of_read_only(&b), c1, d1]);
    assert!(e.contains("overlaps"), "{e}");
    assert!(cd.iter().all(|&x| x == 7.0), "nothing ran");
}

#[test]
fn a_host_program_as_a_shared_library_runs_as_the_jit_does() {
    use eintup_codegen::{hostlib, HostProgram};
    let m = cases::matmul();
    let jit = HostProgram::compile(m.clone(), 0, FpContract::Off).unwrap();
    let objects = HostProgram::compile_objects(&m, 0, FpContract::Off).unwrap();
    assert!(!objects.is_empty() && objects.iter().all(|o| o.starts_with(b"\x7fELF")), "ELF objects");
    let dir = std::env::temp_dir().join(format!("eintup-hostlib-test-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let lib = dir.join("kernels.so");
    if let Err(e) = hostlib::link_shared(&objects, &lib) {
        eprintln!("skipped: no C compiler to link with ({e})");
        return;
    }
    // SAFETY: the library just linked from this module's object.
    let loaded = unsafe { HostProgram::load_library(m.clone(), &lib) }.unwrap();
    for p in [&jit, &loaded] {
        check_matmul_case(&m, p);
    }
    // Not a library: an error, not a crash.
    std::fs::write(dir.join("bad.so"), b"not an ELF file").unwrap();
    assert!(unsafe { HostProgram::load_library(m, &dir.join("bad.so")) }.is_err());
    std::fs::remove_dir_all(&dir).unwrap();
}
