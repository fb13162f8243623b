//! The `loop` dialect end to end: hand-written texts are parsed, verified,
//! printed back (byte-identical) and interpreted; results are compared with
//! the same computations written directly in Rust. Also: the verifier
//! rejects each kind of violation. (Parse errors: the lit test
//! test/ir-errors/loop-parse.etir.)

use eintup::interp::loops::run;
use eintup::ir::loops::parse::parse_module;
use eintup::ir::loops::print::{iexpr, module as print};
use eintup::ir::loops::verify::verify;
use eintup::ir::loops::*;
use eintup::random::Stream;
use eintup::tensor::{Data, Tensor};

/// Parses (panicking with the rendered error), checks the round trip and
/// verifies.
fn parse(text: &str) -> LoopModule {
    let m = parse_module(text).unwrap_or_else(|d| panic!("{}", et_grammar::diag::render_all(&d, "t.loop", text)));
    assert_eq!(print(&m), text, "printing the parsed text gives it back");
    let again = parse_module(&print(&m)).unwrap();
    // NaN constants are never equal to themselves; the text check above
    // covers them.
    if !text.contains("NaN") {
        assert_eq!(again, m, "parse(print(m)) == m");
    }
    verify(&m).unwrap_or_else(|e| panic!("verify: {e}"));
    m
}

/// Zeroed tensors for every buffer, with `inputs` (name, data) filled in.
fn buffers(m: &LoopModule, inputs: Vec<(&str, Data)>) -> Vec<Tensor> {
    let mut out: Vec<Tensor> = m
        .buffers
        .iter()
        .map(|b| {
            let shape: Vec<usize> = b.dims().expect("static shape").iter().map(|&d| d as usize).collect();
            let n = b.len().expect("static shape") as usize;
            let data = match b.dtype {
                DType::I32 => Data::I32(vec![0; n]),
                DType::F64 => Data::F64(vec![0.0; n]),
                DType::F32 => Data::F32(vec![0.0; n]),
            };
            Tensor { shape, data }
        })
        .collect();
    for (name, data) in inputs {
        out[m.buffer_by_name(name).expect("input buffer")].data = data;
    }
    out
}

fn run_text(text: &str, seed: u64, inputs: Vec<(&str, Data)>) -> (LoopModule, Vec<Tensor>) {
    let m = parse(text);
    let mut bufs = buffers(&m, inputs);
    run(&m, seed, &mut bufs).unwrap_or_else(|e| panic!("run: {e}"));
    (m, bufs)
}

fn get<'a>(m: &LoopModule, bufs: &'a [Tensor], name: &str) -> &'a Data {
    &bufs[m.buffer_by_name(name).unwrap()].data
}

const MATMUL: &str = "\
buffer a : f64[2, 3] input
buffer b : f64[3, 4] input
buffer c : f64[2, 4] output

kernel @c_main {
  for i in [0, 2) parallel {
    for j in [0, 4) parallel {
      for k in [0, 3) reduce {
        %0 = load a[((i * 3) + k)] : f64
        %1 = load b[((k * 4) + j)] : f64
        %2 = mul %0, %1 : f64
        accumulate c[((i * 4) + j)] += %2
      }
    }
  }
}
";

#[test]
fn matmul() {
    let a: Vec<f64> = (0..6).map(|x| x as f64 - 2.5).collect();
    let b: Vec<f64> = (0..12).map(|x| (x * x) as f64 * 0.25).collect();
    let (m, bufs) = run_text(MATMUL, 0, vec![("a", Data::F64(a.clone())), ("b", Data::F64(b.clone()))]);
    let mut want = vec![0.0; 8];
    for i in 0..2 {
        for j in 0..4 {
            for k in 0..3 {
                want[i * 4 + j] += a[i * 3 + k] * b[k * 4 + j];
            }
        }
    }
    assert_eq!(get(&m, &bufs, "c"), &Data::F64(want));
}

/// Stride-2 1-D convolution with a 4-tap filter; the reduction loop is
/// tightened to the filter footprint and the guard restates it.
const CONV: &str = "\
buffer x : f64[2, 8, 1] input
buffer w : f64[4] input
buffer y : f64[2, 3, 1] output

kernel @y_main {
  for b0 in [0, 2) parallel {
    for opos0 in [0, 3) parallel {
      for ipos0 in [max(0, (2 * opos0)), min(8, ((2 * opos0) + 4))) reduce {
        guard 0 <= (ipos0 - (2 * opos0)) < 4, 0 <= ipos0 < 8 {
          %0 = load w[(ipos0 - (2 * opos0))] : f64
          %1 = load x[((b0 * 8) + ipos0)] : f64
          %2 = mul %0, %1 : f64
          accumulate y[((b0 * 3) + opos0)] += %2
        }
      }
    }
  }
}
";

/// The same convolution with an untightened loop: the guard alone keeps
/// the filter index in range.
const CONV_GUARD_ONLY: &str = "\
buffer x : f64[2, 8, 1] input
buffer w : f64[4] input
buffer y : f64[2, 3, 1] output

kernel @y_main {
  for b0 in [0, 2) parallel {
    for opos0 in [0, 3) parallel {
      for ipos0 in [0, 8) reduce {
        guard 0 <= (ipos0 - (2 * opos0)) < 4 {
          %0 = load w[(ipos0 - (2 * opos0))] : f64
          %1 = load x[((b0 * 8) + ipos0)] : f64
          %2 = mul %0, %1 : f64
          accumulate y[((b0 * 3) + opos0)] += %2
        }
      }
    }
  }
}
";

#[test]
fn guarded_conv_1d() {
    let x: Vec<f64> = (0..16).map(|v| v as f64 * 0.5 - 1.0).collect();
    let w = vec![1.0, -2.0, 0.5, 3.0];
    let mut want = vec![0.0; 6];
    for b in 0..2 {
        for o in 0..3 {
            for (t, wt) in w.iter().enumerate() {
                let i = 2 * o + t;
                if i < 8 {
                    want[b * 3 + o] += wt * x[b * 8 + i];
                }
            }
        }
    }
    for text in [CONV, CONV_GUARD_ONLY] {
        let (m, bufs) = run_text(text, 0, vec![("x", Data::F64(x.clone())), ("w", Data::F64(w.clone()))]);
        assert_eq!(get(&m, &bufs, "y"), &Data::F64(want.clone()));
    }
}

/// `out[n] = src[idx[n]]` where the index is in range, else 0.
const GATHER: &str = "\
buffer idx : i32[5] input
buffer src : f32[4] input
buffer out : f32[5] output

kernel @out_main {
  for n in [0, 5) parallel {
    t0 = load_index idx[n]
    guard 0 <= t0 < 4 {
      %0 = load src[t0] : f32
      %1 = const 0.5 : f32
      %2 = add %0, %1 : f32
      store out[n] = %2
    }
  }
}
";

#[test]
fn gather_through_load_index() {
    let idx = vec![3, -1, 0, 7, 3];
    let src = vec![1.25f32, 2.5, -3.0, 1e8];
    let (m, bufs) = run_text(GATHER, 0, vec![("idx", Data::I32(idx.clone())), ("src", Data::F32(src.clone()))]);
    let want: Vec<f32> = idx.iter().map(|&i| if (0..4).contains(&i) { src[i as usize] + 0.5 } else { 0.0 }).collect();
    assert_eq!(get(&m, &bufs, "out"), &Data::F32(want));
    // 1e8 + 0.5 is not representable in f32: the f32 rule rounds it away.
    assert_eq!(get(&m, &bufs, "out"), &Data::F32(vec![1e8, 0.0, 1.25 + 0.5, 0.0, 1e8]));
}

/// Sum of an i32 vector into a rank-0 buffer (wrapping), then a rank-0
/// f64 constant; the second kernel reads what the first wrote.
const REDUCE: &str = "\
buffer v : i32[6] input
buffer s : i32[] output
buffer r : f64[] output

kernel @s_main {
  for i in [0, 6) reduce {
    %0 = load v[i] : i32
    accumulate s[0] += %0
  }
}

kernel @r_main {
  %0 = load s[0] : i32
  %1 = cast %0 : f64
  %2 = const 2.5 : f64
  %3 = div %1, %2 : f64
  store r[0] = %3
}
";

#[test]
fn reduction_into_rank0_buffers() {
    let v = vec![5, i32::MAX, 1, -7, 100, 3];
    let (m, bufs) = run_text(REDUCE, 0, vec![("v", Data::I32(v.clone()))]);
    let sum = v.iter().fold(0i32, |a, &x| a.wrapping_add(x));
    assert_eq!(sum, i32::MIN + 101, "the sum wraps");
    assert_eq!(get(&m, &bufs, "s"), &Data::I32(vec![sum]));
    assert_eq!(get(&m, &bufs, "r"), &Data::F64(vec![sum as f64 / 2.5]));
    assert_eq!(bufs[1].shape, Vec::<usize>::new());
}

/// Empty and reversed ranges run nothing: their bodies would write far out
/// of bounds (an error) if they ran.
const EMPTY_LOOPS: &str = "\
buffer z : f64[0] output
buffer y : f64[2] output

kernel @empty {
  for i in [0, 0) parallel {
    %0 = const 1.0 : f64
    store z[(i + 100)] = %0
  }
  for j in [5, 2) reduce {
    %0 = const 1.0 : f64
    store y[(j + 100)] = %0
  }
  for k in [0, 2) parallel {
    for l in [k, k) reduce {
      %0 = const 1.0 : f64
      store y[(l + 100)] = %0
    }
    %0 = index (k + 1) : i32
    %1 = cast %0 : f64
    store y[k] = %1
  }
}
";

#[test]
fn zero_sized_loops_and_buffers() {
    let (m, bufs) = run_text(EMPTY_LOOPS, 0, vec![]);
    assert_eq!(get(&m, &bufs, "z"), &Data::F64(vec![]));
    assert_eq!(get(&m, &bufs, "y"), &Data::F64(vec![1.0, 2.0]));
}

const SCALAR_OPS: &str = "\
buffer o : i32[8] output
buffer f : f32[3] output

kernel @ints {
  for i in [0, 1) parallel {
    %0 = const -7 : i32
    %1 = const 2 : i32
    %2 = floordiv %0, %1 : i32
    store o[0] = %2
  }
  %0 = const -7 : i32
  %1 = const 2 : i32
  %2 = ceildiv %0, %1 : i32
  accumulate o[1] += %2
  %0 = const 7 : i32
  %1 = const -2 : i32
  %2 = mod %0, %1 : i32
  store o[2] = %2
  %0 = const 7 : i32
  %1 = const 0 : i32
  %2 = mod %0, %1 : i32
  %3 = const 9 : i32
  %4 = add %2, %3 : i32
  store o[3] = %4
  %0 = const -2.7 : f64
  %1 = cast %0 : i32
  store o[4] = %1
  %0 = const 10000000000.0 : f64
  %1 = cast %0 : i32
  store o[5] = %1
  %0 = const NaN : f64
  %1 = cast %0 : i32
  %2 = neg %1 : i32
  store o[6] = %2
  %0 = lookup [10, 20, 30][((17 // 2) % 3)] : i32
  %1 = index (((-7 //^ 2) * 1000) - 1) : i32
  %2 = sub %0, %1 : i32
  store o[7] = %2
}

kernel @floats {
  %0 = const 16777216.0 : f32
  %1 = const 1.0 : f32
  %2 = add %0, %1 : f32
  store f[0] = %2
  %0 = const 16777217 : i32
  %1 = cast %0 : f32
  store f[1] = %1
  %0 = const -7.5 : f64
  %1 = const 2.0 : f64
  %2 = mod %0, %1 : f64
  %3 = cast %2 : f32
  %4 = const 0.1 : f32
  %5 = mul %3, %4 : f32
  store f[2] = %5
}
";

#[test]
fn scalar_operations_follow_the_language_rules() {
    // Expected values from docs/language.md section 3 (Python division, Rust
    // `as` casts, f32 rounding after every operation).
    let (m, bufs) = run_text(SCALAR_OPS, 0, vec![]);
    // lookup index 8 % 3 = 2 -> 30; index (-3 * 1000) - 1 = -3001.
    assert_eq!(get(&m, &bufs, "o"), &Data::I32(vec![-4, -3, -1, 9, -2, i32::MAX, 0, 30 + 3001]));
    let f = match get(&m, &bufs, "f") {
        Data::F32(f) => f.clone(),
        d => panic!("{d:?}"),
    };
    assert_eq!(f[0], 16777216.0, "2^24 + 1 rounds back to 2^24 in f32");
    assert_eq!(f[1], 16777216.0, "int -> f32 rounds to nearest (even)");
    assert_eq!(f[2], 0.5f32 * 0.1f32);
}

/// RANDOM draws: expected values from random.rs's independently computed
/// references (seed 0 stream "a" at 0; seed 7 stream "x" at 5).
#[test]
fn random_matches_the_shared_generator() {
    let text = "\
buffer a : i32[6] output
buffer x : f64[6] output

kernel @a_main {
  for n in [0, 6) parallel {
    %0 = const 3 : i32
    %1 = const 10 : i32
    %2 = random \"a\"[n], %0, %1 : i32
    store a[n] = %2
  }
}

kernel @x_main {
  for n in [0, 6) parallel {
    %0 = const 3 : i32
    %1 = const 10 : i32
    %2 = random \"x\"[n], %0, %1 : i32
    %3 = cast %2 : f64
    %4 = const -5.0 : f64
    %5 = const 5.0 : f64
    %6 = random \"x\"[n], %4, %5 : f64
    %7 = add %3, %6 : f64
    store x[n] = %7
  }
}
";
    let (m, bufs) = run_text(text, 0, vec![]);
    let Data::I32(a) = get(&m, &bufs, "a") else { panic!() };
    assert_eq!(a[0], 4);
    assert!(a.iter().all(|v| (3..10).contains(v)));
    let (m, bufs) = run_text(text, 7, vec![]);
    let Data::F64(x) = get(&m, &bufs, "x") else { panic!() };
    assert!((x[5] - (9.0 + 3.364829058307878)).abs() < 1e-12, "{}", x[5]);
    let s = Stream::new(7, "x");
    for (n, xn) in x.iter().enumerate() {
        assert_eq!(*xn, s.int(n as u64, 3, 10) as f64 + s.float(n as u64, -5.0, 5.0));
    }
}

#[test]
fn out_of_bounds_offsets_are_errors_not_panics() {
    let text = "\
buffer y : f64[3] output

kernel @bad {
  for i in [0, 3) parallel {
    %0 = const 1.0 : f64
    store y[(i + 1)] = %0
  }
}
";
    let m = parse(text);
    let mut bufs = buffers(&m, vec![]);
    let e = run(&m, 0, &mut bufs).unwrap_err();
    assert!(e.contains("@bad") && e.contains("offset 3 out of bounds of buffer `y`") && e.contains("i=2"), "{e}");
    // Wrong tensors for the buffers are refused too.
    let e = run(&m, 0, &mut []).unwrap_err();
    assert!(e.contains("0 tensors passed for 1 buffers"), "{e}");
    let mut wrong = vec![Tensor { shape: vec![3], data: Data::F32(vec![0.0; 3]) }];
    assert!(run(&m, 0, &mut wrong).unwrap_err().contains("buffer `y`"));
}

#[test]
fn iexpr_printer_is_public_for_messages() {
    let m = parse(CONV);
    let k = &m.kernels[0];
    let Node::For(b) = &k.body[0] else { panic!() };
    let Node::For(o) = &b.body[0] else { panic!() };
    let Node::For(i) = &o.body[0] else { panic!() };
    assert_eq!(iexpr(&m, k, &i.lo), "max(0, (2 * opos0))");
}

#[test]
fn vars_clause_keeps_numbering_and_unusual_names_round_trip() {
    // Variables numbered against binding order, keyword-like names, an
    // init that differs from the role (verifier rejects it, text keeps it).
    let text = "\
buffer for : i32[2] temp init(input)
buffer q : f64[2] output

kernel @k vars(min, for) {
  for for in [0, 2) parallel {
    min = load_index for[for]
    guard min != 0, -3 <= (min // -2) < 9 {
      %0 = const -0.0 : f64
      %1 = random \"we\\\"ird\\\\\\n\"[((min - -1) % 2)], %0, %0 : f64
      atomic_accumulate q[for] += %1
    }
  }
}
";
    let m = parse_module(text).unwrap();
    assert_eq!(print(&m), text);
    assert_eq!(parse_module(&print(&m)).unwrap(), m);
    assert_eq!(m.kernels[0].vars[0].name, "min");
    let Node::For(l) = &m.kernels[0].body[0] else { panic!() };
    assert_eq!(l.var, 1);
    let e = verify(&m).unwrap_err().message;
    assert!(e.contains("buffer `for`") && e.contains("init"), "{e}");
}

// ---------------------------------------------------------------- verifier

/// Parses (must succeed) and returns the verifier's message.
fn rejected(text: &str) -> String {
    let m = parse_module(text).unwrap_or_else(|d| panic!("{d:?}"));
    verify(&m).expect_err("verifier must reject").message
}

fn k(body: &str) -> String {
    format!("buffer y : f64[4] output\nbuffer n : i32[4] input\nkernel @kk {{\n{body}\n}}\n")
}

#[test]
fn verifier_rejects_scope_violations() {
    let cases = [
        // A loop variable after its loop.
        ("for i in [0, 4) reduce {\n}\n%0 = const 1.0 : f64\nstore y[i] = %0", "`i` used outside its scope"),
        // Bound twice (same name, two loops).
        ("for i in [0, 4) reduce {\n}\nfor i in [0, 4) reduce {\n}", "`i` is bound twice"),
        // A load_index variable outside the guard that loaded it.
        ("guard {\nt = load_index n[0]\n}\n%0 = load y[t] : f64\nstore y[0] = %0", "`t` used outside its scope"),
        // A load_index inside a loop used after the loop.
        ("for i in [0, 4) reduce {\nt = load_index n[i]\n}\nfor j in [0, t) reduce {\n}", "upper bound of loop over `j`: variable `t` used outside its scope"),
    ];
    for (body, want) in cases {
        let e = rejected(&k(body));
        assert!(e.contains("kernel `@kk`") && e.contains(want), "{e}\nwanted: {want}");
    }
    // Only a vars clause can express these two.
    let e = rejected("kernel @kk vars(i) {\nfor i in [0, i) reduce {\n}\n}\n");
    assert!(e.contains("upper bound of loop over `i`: variable `i` used outside its scope"), "{e}");
    // A declared variable that nothing binds (a pass deleted its empty
    // loop) is fine; a use of it is not.
    let m = eintup::ir::loops::parse::parse_module("kernel @kk vars(i, unused) {\nfor i in [0, 1) reduce {\n}\n}\n").unwrap();
    assert_eq!(eintup::ir::loops::verify::verify(&m), Ok(()));
    let e = rejected("kernel @kk vars(i, unused) {\nfor i in [0, unused) reduce {\n}\n}\n");
    assert!(e.contains("variable `unused` used outside its scope"), "{e}");
}

#[test]
fn verifier_rejects_value_and_dtype_errors() {
    let cases = [
        ("%0 = add %0, %0 : f64\nstore y[0] = %0", "value %0 uses %0, which is not defined before it"),
        ("%0 = const 1.0 : f64\n%1 = neg %2 : f64\nstore y[0] = %1", "value %1 uses %2"),
        ("%0 = const 1.0 : f64\n%1 = const 1 : i32\n%2 = add %0, %1 : f64\nstore y[0] = %2", "value %2 is f64 but its right operand %1 is i32"),
        ("%0 = const 1 : i32\n%1 = div %0, %0 : i32\n%2 = cast %1 : f64\nstore y[0] = %2", "`div` on i32"),
        ("%0 = load n[0] : f64\nstore y[0] = %0", "loads buffer `n` of i32"),
        ("t = load_index y[0]", "buffer `y` is f64, not i32"),
        ("%0 = index 3 : f64\nstore y[0] = %0", "`index` gives i32"),
        ("%0 = lookup [1][0] : f32\n%1 = cast %0 : f64\nstore y[0] = %1", "`lookup` gives i32"),
        ("%0 = const 0 : i32\n%1 = const 1.0 : f64\n%2 = random \"y\"[0], %0, %1 : f64\nstore y[0] = %2", "its lower bound %0 is i32"),
        ("%0 = const 1 : i32\nstore y[0] = %0", "value %0 is i32 but the buffer is f64"),
        ("%0 = const 1.0 : f64\nstore y[0] = %3", "value %3 is not defined"),
        ("%0 = const 1.5 : i32\n%1 = cast %0 : f64\nstore y[0] = %1", "i32 constant 1.5"),
        ("%0 = const 3e9 : i32\n%1 = cast %0 : f64\nstore y[0] = %1", "not an integer in the i32 range"),
    ];
    for (body, want) in cases {
        let e = rejected(&k(body));
        assert!(e.contains("kernel `@kk`") && e.contains(want), "{e}\nwanted: {want}");
    }
}

#[test]
fn verifier_rejects_module_level_errors() {
    let e = rejected("kernel @k {\n}\nkernel @k {\n}\n");
    assert!(e.contains("`@k`") && e.contains("already used"), "{e}");
    let e = rejected("buffer x : f64[2] input init(zero)\n");
    assert!(e.contains("buffer `x`") && e.contains("init"), "{e}");
    let e = rejected("buffer x : f64[2] output init(input)\n");
    assert!(e.contains("buffer `x`"), "{e}");
    let e = rejected("buffer x : f64[2, -1] temp\n");
    assert!(e.contains("negative dimension -1"), "{e}");
    let e = rejected("buffer x : f64[4294967296, 4294967296] temp\n");
    assert!(e.contains("overflows"), "{e}");

    // Violations the text cannot express: built directly.
    let base = parse(MATMUL);
    let mut m = base.clone();
    m.buffers[1].name = m.buffers[0].name.clone();
    assert!(verify(&m).unwrap_err().message.contains("buffer `a` is declared twice"));
    let mut m = base.clone();
    m.kernels[0].name = "c-main".into();
    assert!(verify(&m).unwrap_err().message.contains("`c-main` is not an identifier"));
    let mut m = base.clone();
    m.kernels[0].vars[1].name = "i".into();
    assert!(verify(&m).unwrap_err().message.contains("two variables are named `i`"));
    fn rename(e: &mut IExpr, from: VarId, to: VarId) {
        match e {
            IExpr::Var(v) if *v == from => *v = to,
            IExpr::Bin(_, a, b) => {
                rename(a, from, to);
                rename(b, from, to);
            }
            _ => {}
        }
    }
    let mut m = base.clone();
    m.kernels[0].for_each_expr_mut(&mut |e| rename(e, 2, 9));
    let e = verify(&m).unwrap_err().message;
    assert!(e.contains("`@c_main`") && e.contains("variable id 9 out of range"), "{e}");
    let mut m = base.clone();
    let Node::For(l) = &mut m.kernels[0].body[0] else { panic!() };
    let Node::For(l) = &mut l.body[0] else { panic!() };
    let Node::For(l) = &mut l.body[0] else { panic!() };
    let Node::Compute(c) = &mut l.body[0] else { panic!() };
    c.write.buf = 7;
    let e = verify(&m).unwrap_err().message;
    assert!(e.contains("buffer id 7 out of range"), "{e}");
    // The printer copes with the broken module (for messages).
    assert!(print(&m).contains("?buf7"));
}

// ------------------------------------------------------- round-trip property

mod round_trip {
    use super::*;
    use proptest::prelude::*;

    fn ibin() -> impl Strategy<Value = IBin> {
        prop::sample::select(vec![IBin::Add, IBin::Sub, IBin::Mul, IBin::FloorDiv, IBin::CeilDiv, IBin::Mod, IBin::Min, IBin::Max])
    }

    /// Expressions over the kernel's two variables (`i`, `t`) and the
    /// module's two dim symbols.
    fn iexpr() -> impl Strategy<Value = IExpr> {
        let leaf = prop_oneof![any::<i64>().prop_map(IExpr::Const), (0usize..2).prop_map(IExpr::Var), (0usize..2).prop_map(IExpr::Sym)];
        leaf.prop_recursive(4, 24, 2, |inner| (ibin(), inner.clone(), inner).prop_map(|(op, a, b)| IExpr::bin(op, a, b)))
    }

    fn dtype() -> impl Strategy<Value = DType> {
        prop::sample::select(vec![DType::I32, DType::F32, DType::F64])
    }

    fn vop() -> impl Strategy<Value = VOp> {
        let v = || 0usize..6;
        prop_oneof![
            any::<f64>().prop_filter("NaN is not equal to itself", |x| !x.is_nan()).prop_map(VOp::Const),
            (-1_000_000i32..1_000_000).prop_map(|x| VOp::Const(x as f64)),
            (0usize..2, iexpr()).prop_map(|(buf, offset)| VOp::Load { buf, offset }),
            iexpr().prop_map(VOp::Index),
            (prop::collection::vec(any::<i64>(), 0..4), iexpr()).prop_map(|(table, index)| VOp::Lookup { table, index }),
            (".{0,6}", iexpr(), v(), v()).prop_map(|(stream, counter, lo, hi)| VOp::Random { stream, counter, lo, hi }),
            v().prop_map(VOp::Neg),
            v().prop_map(VOp::Cast),
            (prop::sample::select(vec![BinOp::Add, BinOp::Sub, BinOp::Mul, BinOp::Div, BinOp::FloorDiv, BinOp::CeilDiv, BinOp::Mod]), v(), v())
                .prop_map(|(op, a, b)| VOp::Bin(op, a, b)),
        ]
    }

    fn cond() -> impl Strategy<Value = Cond> {
        prop_oneof![(iexpr(), iexpr(), iexpr()).prop_map(|(e, lo, hi)| Cond::InRange { e, lo, hi }), iexpr().prop_map(Cond::NonZero)]
    }

    fn module() -> impl Strategy<Value = LoopModule> {
        let values = prop::collection::vec((vop(), dtype()).prop_map(|(op, dtype)| Value { op, dtype }), 0..6);
        let write = (prop::sample::select(vec![WriteKind::Store, WriteKind::Accumulate, WriteKind::AtomicAccumulate]), 0usize..2, iexpr(), 0usize..6);
        // Extents: constants, dim symbols, and expressions of them.
        let extent = prop_oneof![
            (0i64..5).prop_map(IExpr::Const),
            (0usize..2).prop_map(IExpr::Sym),
            (0usize..2, 0i64..3).prop_map(|(d, c)| IExpr::add(IExpr::Sym(d), IExpr::Const(c)))
        ];
        let buffer =
            move || (dtype(), prop::collection::vec(extent.clone(), 0..3), prop::sample::select(vec![Role::Input, Role::Output, Role::Temp]), any::<bool>());
        (
            (buffer(), buffer()),
            (iexpr(), iexpr(), any::<bool>(), any::<bool>()),
            prop::collection::vec(cond(), 0..3),
            iexpr(),
            values,
            write,
            (
                prop::sample::select(vec![KernelRole::Main, KernelRole::Reset, KernelRole::Snapshot, KernelRole::Partial, KernelRole::Pack]),
                prop::option::of(0usize..1000),
            ),
        )
            .prop_map(|(bufs, (lo, hi, par, swap), conds, li_off, values, (kind, wbuf, woff, wval), (role, stmt))| {
                let mk = |name: &str, (dtype, shape, role, zero): (DType, Vec<IExpr>, Role, bool)| Buffer {
                    name: name.into(),
                    dtype,
                    shape,
                    role,
                    init: if zero { Init::Zero } else { Init::Input },
                };
                // `swap` numbers the variables against binding order, which
                // the printer must record in a `vars(..)` clause.
                let (i, t) = if swap { (1, 0) } else { (0, 1) };
                let names = if swap { ["t", "i"] } else { ["i", "t"] };
                let remap = |mut e: IExpr| {
                    fn go(e: &mut IExpr, i: VarId, t: VarId) {
                        match e {
                            IExpr::Var(v) => *v = if *v == 0 { i } else { t },
                            IExpr::Bin(_, a, b) => {
                                go(a, i, t);
                                go(b, i, t);
                            }
                            IExpr::Const(_) | IExpr::Sym(_) => {}
                        }
                    }
                    go(&mut e, i, t);
                    e
                };
                let compute = Node::Compute(Compute { values, write: Write { kind, buf: wbuf, offset: woff, value: wval } });
                let body = vec![Node::LoadIndex { var: t, buf: 0, offset: remap(li_off) }, Node::Guard(Guard { conds, body: vec![compute] })];
                let kind = if par { LoopKind::Parallel } else { LoopKind::Reduce };
                LoopModule {
                    dims: vec![Dim { name: "n".into() }, Dim { name: "w.0".into() }],
                    facts: Facts::NONE,
                    buffers: vec![mk("a", bufs.0), mk("b", bufs.1)],
                    kernels: vec![Kernel {
                        name: "k".into(),
                        role,
                        stmt,
                        vars: names.iter().map(|n| Var { name: n.to_string() }).collect(),
                        body: vec![Node::For(For { var: i, lo: remap(lo), hi: remap(hi), kind, body })],
                        multiples: Multiples::default(),
                    }],
                }
            })
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(eintup_testkit::cases(256)))]
        #[test]
        fn print_parse_print(m in module()) {
            let text = print(&m);
            let back = parse_module(&text).map_err(|d| TestCaseError::fail(format!("{d:?}\n{text}")))?;
            prop_assert_eq!(print(&back), text);
            prop_assert_eq!(back, m);
        }

        #[test]
        fn parser_never_panics(text in "(buffer|kernel|role|stmt|for|guard|load_index|store|[-%@{}()\\[\\],:=<!+*/^\"0-9a-z_ \n.]){0,60}") {
            let _ = parse_module(&text);
        }
    }
}
