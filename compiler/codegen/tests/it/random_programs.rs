//! Random small programs through the whole pipeline, on every backend that
//! runs without a GPU, against the reference interpreter (issue #17 item 5,
//! issue #20 item 4). docs/testing.md, "Random programs", says what is
//! covered and what is skipped.
//!
//! Programs come from the shared generator (`eintup_testkit::programs`,
//! also behind `compiler/tests/it/no_panic_sema.rs`), plus hand-picked corner
//! programs. For each program that passes the front end
//! (`pipeline::specialized_for`, the configuration drawn from the seed) and
//! is small ([`MAX_WORK`]), for `--float f64` and `f32`: the interpreter
//! (`interp::run`), the host backend (`Backend::Cpu`: LLVM JIT) and the PTX
//! emulator (`Backend::Emu`: the bundle built in memory, its PTX run on the
//! runtime's emulator with the interpreter's inputs) run it, and:
//!
//! - a user error of the front end skips the program; a user error of the
//!   interpreter (`E0406`, say) must be a user error on every backend;
//! - an internal error (exit 70, `Failure::Internal`) or a panic anywhere
//!   fails the test, as does a kernel fault on the emulator;
//! - every array has the interpreter's shape and element type; INT values
//!   are equal;
//! - FLOAT values of arrays that get one term per cell are bit-identical
//!   (the sign of zero included; any NaN matches any NaN): every backend
//!   evaluates each term with the same IEEE operations in the float width
//!   (no contraction into FMA; in f32 every FLOAT operation, each step of
//!   `// //^ %` included, is an f32 operation, docs/semantics.md) and
//!   RANDOM is one formula;
//! - FLOAT values of arrays written by a *summing* statement (one whose
//!   variables do not all appear as bare eintups on the left, so several
//!   combinations may add into one cell), and of arrays computed from
//!   them, only agree to rounding, because the order of the terms is not
//!   the language's (docs/semantics.md): the interpreter enumerates the
//!   eintups of compound index expressions outermost, the host follows the
//!   statement's variable order (`interchange` moves only `parallel`
//!   loops), the emulator adds atomically in thread order. They must
//!   satisfy `|got - want| <= rtol * max(1, M)`, `M` the largest finite
//!   |value| of the interpreter's FLOAT arrays and `rtol = 2 * MAX_WORK *
//!   u` (`u` the unit roundoff, 2^-53 or 2^-24): reordering a sum of at
//!   most `MAX_WORK` terms moves it by at most about `n * u * sum |terms|`,
//!   with the sum of magnitudes taken to be at most `2 M`. An array
//!   computed by a FLOAT `// //^ %` from such values is not compared (a
//!   floor turns a rounding difference into a difference of one; counted
//!   in the tally).
//!
//! Skipped on purpose (counted, and printed with `--nocapture`):
//! - arrays computed by a FLOAT floor from a sum (above).
//!
//! Index arithmetic overflowing i64 is out of the generator's reach (its
//! index values stay far below 2^63);
//! `index_arithmetic_beyond_64_bits_is_refused_before_any_backend` covers it.
//!
//! `PROPTEST_CASES=N` runs N random programs instead of [`DEFAULT_CASES`].

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::Mutex;

use eintup::driver::{Failure, Source};
use eintup::interp::{self, RunError, RunOptions};
use eintup::ir::et::{ElemType, IndexExpr, IndexKind, IndexSlot, Module, OpKind};
use eintup::ir::loops::FloatWidth;
use eintup::tensor::{Data, Tensor};
use eintup_codegen::backend::{execute, Backend};
use eintup_codegen::FpContract;
use eintup_testkit::programs::program;
use et_grammar::ast::BinOp;
use proptest::prelude::*;
use proptest::test_runner::{FileFailurePersistence, TestCaseError, TestRunner};

/// Largest iteration space (product of a statement's variables' dims) and
/// largest array a case runs: keeps each case in tens of milliseconds.
const MAX_WORK: i64 = 4096;

/// Random programs per run (PROPTEST_CASES overrides); about a third pass
/// the front end and are compared, in about 25 s of a debug build.
const DEFAULT_CASES: u32 = 600;

/// Programs of [`random_programs_at_gpu_pass_sizes_agree_on_every_backend`].
const GPU_SIZE_CASES: u32 = 24;

const BACKENDS: [Backend; 2] = [Backend::Cpu, Backend::Emu];
const WIDTHS: [FloatWidth; 2] = [FloatWidth::F64, FloatWidth::F32];

/// What happened to one program.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
enum Outcome {
    /// The front end rejected it (a user error).
    FrontEnd,
    /// An iteration space or array above `MAX_WORK`.
    Large,
    /// The interpreter and both backends reported the same user error.
    UserErrorEverywhere,
    /// Compared in f64 and f32.
    Compared,
}

/// (Array, float width) pairs left uncompared because a FLOAT floor acts
/// on a sum's rounding.
static FLOORED: AtomicUsize = AtomicUsize::new(0);

/// The largest difference seen where a tolerance applies, as a fraction
/// of it (the bits of a non-negative f64).
static WORST: AtomicU64 = AtomicU64::new(0);

/// Checks one program under one seed on every backend; `Err` says what
/// disagreed.
fn check(text: &str, seed: u64) -> Result<Outcome, String> {
    check_within(text, seed, MAX_WORK)
}

/// [`check`] with another cap on iteration spaces and arrays (the GPU
/// passes' programs: each sum still has at most `MAX_WORK` terms, which
/// the tolerance assumes).
fn check_within(text: &str, seed: u64, max_work: i64) -> Result<Outcome, String> {
    let src = Source::from_string("p.et", text);
    let m = match eintup::pipeline::specialized_for(&src, &[], &[], seed, FloatWidth::F64) {
        Ok((m, _)) => m,
        Err(Failure::User(_)) => return Ok(Outcome::FrontEnd),
        Err(e) => return Err(format!("the front end: {e}")),
    };
    if m.largest_extent() > max_work {
        return Ok(Outcome::Large);
    }
    let order = OrderSensitive::of(&m);
    for float in WIDTHS {
        let opts = RunOptions { seed, float, inputs: Default::default(), ..RunOptions::default() };
        let want = match interp::run(&m, &opts) {
            Ok(w) => w,
            Err(RunError::User(d)) => {
                // The backends must refuse it the same way.
                for b in BACKENDS {
                    match execute(&src, &m, b, &opts, FpContract::Off) {
                        Err(Failure::User(_)) => {}
                        Err(e) => return Err(format!("{float:?} {b}: {e}\n(the interpreter: user error {d:?})")),
                        Ok(_) => return Err(format!("{float:?} {b}: ran, but the interpreter reports a user error: {d:?}")),
                    }
                }
                return Ok(Outcome::UserErrorEverywhere);
            }
            Err(RunError::Internal(e)) => return Err(format!("{float:?} interpreter: internal error: {e}")),
        };
        let rtol = 2.0 * MAX_WORK as f64 * if float == FloatWidth::F32 { f32::EPSILON as f64 / 2.0 } else { f64::EPSILON / 2.0 };
        let scale =
            want.iter().flat_map(|t| if t.dtype().is_float() { t.to_f64_vec() } else { vec![] }).filter(|x| x.is_finite()).fold(1.0f64, |a, x| a.max(x.abs()));
        for b in BACKENDS {
            let got = execute(&src, &m, b, &opts, FpContract::Off).map_err(|e| format!("{float:?} {b}: {e}"))?;
            if got.len() != want.len() {
                return Err(format!("{float:?} {b}: {} arrays, the interpreter {}", got.len(), want.len()));
            }
            for (k, a) in m.arrays.iter().enumerate() {
                let tol = if order.floored[k] {
                    if b == Backend::Cpu {
                        FLOORED.fetch_add(1, Ordering::Relaxed);
                    }
                    continue;
                } else if order.summed[k] {
                    rtol * scale
                } else {
                    0.0
                };
                compare(&got[k], &want[k], tol).map_err(|e| format!("{float:?} {b}: `{}` {e}", a.name))?;
            }
        }
    }
    Ok(Outcome::Compared)
}

/// An op that turns a rounding difference in its operands into a large
/// one: a floor (`// //^ %`), a comparison or `select` (a jump), and the
/// functions whose derivative is unbounded or grows with the value (`exp
/// log sqrt pow`). `abs`, `max`, `min` and `tanh` move a difference by at
/// most its size.
fn is_floor(k: &OpKind) -> bool {
    use et_grammar::ast::Func;
    matches!(
        k,
        OpKind::Binary(BinOp::FloorDiv | BinOp::CeilDiv | BinOp::Mod, ..)
            | OpKind::Compare(..)
            | OpKind::Call(Func::Exp | Func::Log | Func::Sqrt | Func::Pow | Func::Select, _)
    )
}

/// Which FLOAT arrays' values depend on the order in which a summing
/// statement adds its terms, and which of those went through a FLOAT
/// floor (`// //^ %`) afterwards.
struct OrderSensitive {
    summed: Vec<bool>,
    floored: Vec<bool>,
}

impl OrderSensitive {
    fn of(m: &Module) -> OrderSensitive {
        let n = m.arrays.len();
        let float = |a: usize| m.arrays[a].dtype == ElemType::Float;
        // One term per cell: every variable is a bare eintup on the left.
        let one_term = |s: &eintup::ir::et::Stmt| {
            s.vars.iter().all(|v| s.indices.iter().any(|i| matches!(i, IndexSlot::Expr(IndexExpr { kind: IndexKind::Var(t), .. }) if t == v)))
        };
        let mut summed: Vec<bool> = (0..n).map(|a| float(a) && m.stmts.iter().any(|s| s.array == a && !one_term(s))).collect();
        let mut floored = vec![false; n];
        loop {
            let mut changed = false;
            for s in &m.stmts {
                let reads = |set: &[bool]| (0..n).any(|a| set[a] && s.reads(a));
                // A comparison of FLOAT values is INT: an INT array can
                // depend on a sum's order through it.
                let floors = s.ops.iter().any(|o| (o.ty.dtype == ElemType::Float || matches!(o.kind, OpKind::Compare(..))) && is_floor(&o.kind));
                let (sum, flo) = (reads(&summed), reads(&floored) || (floors && reads(&summed)));
                for (set, now, any_dtype) in [(&mut summed, sum, false), (&mut floored, flo, true)] {
                    if now && (any_dtype || float(s.array)) && !set[s.array] {
                        set[s.array] = true;
                        changed = true;
                    }
                }
            }
            if !changed {
                return OrderSensitive { summed, floored };
            }
        }
    }
}

/// Same shape and element type; INT equal; FLOAT within `tol` (absolute;
/// 0 is bit-identical up to the sign of zero, NaN matching NaN).
fn compare(got: &Tensor, want: &Tensor, tol: f64) -> Result<(), String> {
    if got.shape != want.shape {
        return Err(format!("has shape {:?}, the interpreter {:?}", got.shape, want.shape));
    }
    match (&got.data, &want.data) {
        (Data::I32(g), Data::I32(w)) => match (0..g.len()).find(|&i| g[i] != w[i]) {
            Some(i) => Err(format!("[{i}] = {}, the interpreter {} (INT)", g[i], w[i])),
            None => Ok(()),
        },
        (Data::F64(_), Data::F64(_)) | (Data::F32(_), Data::F32(_)) => {
            let (g, w) = (got.to_f64_vec(), want.to_f64_vec());
            // Exact: the same bits (any NaN matches any NaN, the one thing
            // the ISA and Rust leave open); else within `tol`.
            let ok = |x: f64, y: f64| {
                if x.to_bits() == y.to_bits() || (x.is_nan() && y.is_nan()) {
                    return true;
                }
                let d = (x - y).abs();
                if tol > 0.0 && d > 0.0 {
                    WORST.fetch_max((d / tol).to_bits(), Ordering::Relaxed);
                }
                tol > 0.0 && d <= tol
            };
            match (0..g.len()).find(|&i| !ok(g[i], w[i])) {
                Some(i) => Err(format!("[{i}] = {:e}, the interpreter {:e} (FLOAT, tolerance {tol:e})", g[i], w[i])),
                None => Ok(()),
            }
        }
        _ => Err(format!("has element type {}, the interpreter {}", got.dtype(), want.dtype())),
    }
}

/// `DEFAULT_CASES` random programs (`PROPTEST_CASES` overrides), each
/// with a seed for its configuration and inputs; a failure is shrunk to a
/// small program and recorded in `random_programs.proptest-regressions`.
#[test]
fn random_programs_agree_on_every_backend() {
    let cases = eintup_testkit::cases(DEFAULT_CASES);
    let config = ProptestConfig {
        cases,
        source_file: Some(file!()),
        failure_persistence: Some(Box::new(FileFailurePersistence::WithSource("proptest-regressions"))),
        ..ProptestConfig::default()
    };
    let tally = Mutex::new(BTreeMap::<Outcome, usize>::new());
    let start = std::time::Instant::now();
    let result = TestRunner::new(config).run(&(program(), 0u64..4), |(text, seed)| match check(&text, seed) {
        Ok(o) => {
            *tally.lock().unwrap().entry(o).or_default() += 1;
            Ok(())
        }
        Err(e) => Err(TestCaseError::fail(format!("seed {seed}:\n{text}\n{e}"))),
    });
    let tally = tally.into_inner().unwrap();
    let floored = FLOORED.load(Ordering::Relaxed);
    let worst = f64::from_bits(WORST.load(Ordering::Relaxed));
    eprintln!(
        "{cases} random programs in {:.1} s: {tally:?}; {floored} arrays not compared after a FLOAT floor of a sum; largest difference of a sum {worst:.2e} of its tolerance",
        start.elapsed().as_secs_f64()
    );
    if let Err(e) = result {
        panic!("{e}");
    }
    // The generator must keep reaching the backends.
    let compared = tally.get(&Outcome::Compared).copied().unwrap_or(0);
    assert!(compared as u32 >= cases / 10, "only {compared} of {cases} programs were compared: {tally:?}");
}

/// Random programs at the sizes where the GPU passes fire, which
/// [`MAX_WORK`] keeps the generator's programs below (register tiles need
/// 4096 threads after tiling, so 16384 cells): contractions (register
/// tiles, block tiles), long row sums (split reductions) and broadcasts
/// (sunk broadcast loops), with random sizes, layouts and element types,
/// through [`check_within`] on every backend. Each pass must fire on some
/// (`pipeline::lower_gpu`, as the emulator's bundle is built): each
/// program's own passes, and no other of the four.
/// `PROPTEST_CASES` does not apply: [`GPU_SIZE_CASES`] cases.
#[test]
fn random_programs_at_gpu_pass_sizes_agree_on_every_backend() {
    use eintup::ir::loops::{KernelRole, LoopKind, Node};
    let ty = prop_oneof![Just("INT"), Just("FLOAT")];
    // (row, col) with row*col >= 16384, both even: at least 2x2 tiles.
    let contraction = (prop_oneof![Just((128, 128)), Just((64, 256)), Just((256, 64)), Just((96, 256))], 2i64..6, any::<bool>(), any::<bool>(), ty.clone())
        .prop_map(|((r, c), k, at, bt, ty)| {
            let a = if at { "a[k,row]" } else { "a[row,k]" };
            let b = if bt { "b[col,k]" } else { "b[k,col]" };
            let text = format!(
                "{a} = RANDOM(0, 9, {ty})\n{b} = RANDOM(0, 9, {ty})\nc[row,col] = {a} * {b}\n\n\
                 RANK(row) = 1\nRANK(col) = 1\nRANK(k) = 1\nDIMS(row) IN [{r},{r}]\nDIMS(col) IN [{c},{c}]\nDIMS(k) IN [{k},{k}]\n"
            );
            (text, [true, true, false, false])
        });
    // INT: FLOAT sums split only under `--fp-contract fast`, and the
    // backends run `off`.
    let row_sums = (1i64..9, 64i64..300).prop_map(|(keep, drop)| {
        let text = format!("x[keep,drop] = RANDOM(-9, 9, INT)\ns[keep] = x[keep,drop]\n\nRANK(keep) = 1\nRANK(drop) = 1\nDIMS(keep) IN [{keep},{keep}]\nDIMS(drop) IN [{drop},{drop}]\n");
        (text, [false, false, true, false])
    });
    let broadcast = (4096i64..4200, 2i64..4, ty).prop_map(|(e, rep, ty)| {
        let text = format!(
            "x[e] = RANDOM(0, 100, {ty})\ny[rep*DIMS(e)+e] = x[e] + 1\n\nRANK(e) = 1\nRANK(rep) = 1\nDIMS(e) IN [{e},{e}]\nDIMS(rep) IN [{rep},{rep}]\n"
        );
        (text, [false, false, false, true])
    });
    let config = ProptestConfig {
        cases: eintup_testkit::cases(GPU_SIZE_CASES),
        source_file: Some(file!()),
        failure_persistence: Some(Box::new(FileFailurePersistence::WithSource("proptest-regressions"))),
        ..ProptestConfig::default()
    };
    // (register tiles, block tiles, split reductions, sunk broadcasts).
    let fired = Mutex::new([0usize; 4]);
    let start = std::time::Instant::now();
    let result = TestRunner::new(config).run(&(prop_oneof![contraction, row_sums, broadcast], 0u64..4), |((text, want), seed)| {
        let src = Source::from_string("p.et", &text);
        let (m, _) = eintup::pipeline::specialized_for(&src, &[], &[], seed, FloatWidth::F64).map_err(|e| TestCaseError::fail(format!("{text}\n{e}")))?;
        let lm =
            eintup::pipeline::lower_gpu(&src, &m, &eintup::pipeline::GpuOptions::new(FloatWidth::F64, FpContract::Off, eintup::ir::loops::target::DEFAULT_SM))
                .map_err(|e| TestCaseError::fail(format!("{text}\n{e}")))?;
        let mut f = [false; 4];
        for k in &lm.kernels {
            let has_thread = {
                let mut t = false;
                k.walk(&mut |n| t |= matches!(n, Node::For(l) if l.kind == LoopKind::Thread));
                t
            };
            let has_unroll = {
                let mut u = false;
                k.walk(&mut |n| u |= matches!(n, Node::For(l) if l.kind == LoopKind::Unroll));
                u
            };
            let mut reduces = false;
            k.walk(&mut |n| reduces |= matches!(n, Node::For(l) if l.kind == LoopKind::Reduce));
            // Tiles are `unroll` loops around a reduction's sum (inside a
            // block-tiled kernel too: an untiled one's has no unroll loop).
            f[0] |= has_unroll && reduces;
            f[1] |= has_thread;
            f[2] |= k.role == KernelRole::Partial;
            f[3] |= has_unroll && !reduces && !has_thread;
        }
        if f != want {
            return Err(TestCaseError::fail(format!("{text}\n(register tiles, block tiles, split reductions, sunk broadcasts): {f:?}, expected {want:?}")));
        }
        {
            let mut fired = fired.lock().unwrap();
            for i in 0..4 {
                fired[i] += f[i] as usize;
            }
        }
        match check_within(&text, seed, 1 << 18) {
            Ok(Outcome::Compared) => Ok(()),
            Ok(o) => Err(TestCaseError::fail(format!("seed {seed}:\n{text}\nnot compared: {o:?}"))),
            Err(e) => Err(TestCaseError::fail(format!("seed {seed}:\n{text}\n{e}"))),
        }
    });
    let fired = fired.into_inner().unwrap();
    eprintln!(
        "{GPU_SIZE_CASES} programs at GPU pass sizes in {:.1} s; (register tiles, block tiles, split reductions, sunk broadcasts) fired in {fired:?}",
        start.elapsed().as_secs_f64()
    );
    if let Err(e) = result {
        panic!("{e}");
    }
    assert!(fired.iter().all(|&n| n > 0), "a GPU pass never fired: {fired:?}");
}

fn assert_agrees(text: &str, seeds: std::ops::Range<u64>) -> Vec<Outcome> {
    seeds.map(|seed| check(text, seed).unwrap_or_else(|e| panic!("seed {seed}:\n{text}\n{e}"))).collect()
}

/// Hand-picked programs the generator reaches rarely or not at all.
#[test]
fn corner_programs_agree_on_every_backend() {
    let cases = [
        // no_panic_sema's corners.
        "x[] = 1\n",
        "x[a] = RANDOM(0, 3, INT)\ny[x[a,:]] = 1\n",
        "x[a] = 1\n\nRANK(a) = 0\n",
        "x[a] = 1\ny[b] = x[a] // 0\n\nDIMS(a) IN [0,0]\n",
        "x[FLAT()] = 1\n",
        "x[a-DIMS(b)] = 1\n\nDIMS(b) = DIMS(a) + 2\n",
        "x[a] = DIMS(b)[a]\n\nRANK(a) = 1\nDIMS(a) = RANK(b)\n",
        // Zero-sized and rank-0 eintups everywhere.
        "x[a,b] = RANDOM(0, 5, FLOAT)\ny[b] += x[a,b]\n\nDIMS(a) IN [0,0]\n",
        "x[a,b] = RANDOM(0, 5, FLOAT)\ny[b] += x[a,b]\n\nRANK(a) = 0\nRANK(b) = 0\n",
        // Gather and scatter through slices: out-of-range addresses skip,
        // duplicates accumulate (INT atomics, then FLOAT atomics).
        "i[w,c] = RANDOM(-1, 6, INT)\ns[p] = RANDOM(0, 9, INT)\ng[w] = s[i[w,:]]\n\nRANK(c) = 1\nDIMS(c) = RANK(p)\nDIMS(p) IN [4,4]\n",
        "i[u,c] = RANDOM(0, 3, INT)\nv[u] = RANDOM(0, 4, INT)\no[d] = 0\no[i[u,:]] += v[u]\n\nDIMS(c) IN [1,1]\nDIMS(d) IN [3,3]\nDIMS(u) IN [40,40]\n",
        "i[u,c] = RANDOM(0, 3, INT)\nv[u] = RANDOM(0, 4, FLOAT)\no[d] = 0\no[i[u,:]] += v[u] / 3\n\nDIMS(c) IN [1,1]\nDIMS(d) IN [3,3]\nDIMS(u) IN [40,40]\n",
        // A statement reading the array it writes sees a snapshot.
        "x[a] = RANDOM(0, 9, INT)\nx[a] = x[a+1] + x[a]\n",
        // = over a non-injective left side resets each cell once.
        "x[a] = RANDOM(0, 9, FLOAT)\ny[a//2] = x[a] * 2\ny[a%3] += x[a]\n\nDIMS(a) IN [7,7]\n",
        // INT: wrap-around, floor division and modulo of negatives, by zero.
        "x[] = 2147483647 + 1\nn[a] = RANDOM(-9, 9, INT)\ny[a] = n[a] // 4 + n[a] % -4 + n[a] //^ 3 + n[a] // 0 + n[a] % 0 + x[] * n[a]\n\nDIMS(a) IN [9,9]\n",
        // INT / INT is FLOAT, also beyond 2^24 in f32; FLOAT by zero.
        "x[] = 16777217 / 3\ny[] = 1 / 0\nz[] = 0 / 0 + -1 / 0\n",
        // Index arithmetic: ceiling division, modulo, FLAT skipping.
        "y[FLAT(a+1, b)] = 1\nz[(a-3)//^2, b%2] += 1\n\nDIMS(a) IN [5,5]\nDIMS(b) IN [3,3]\n",
        // Sums in another order: atomics in thread order on the emulator;
        // the interpreter's compound-index eintup `c` outermost.
        "x[(b+(b%2))] = -RANDOM(2, 9, INT)\ny[(a//2),FLAT(b)] = (x[FLAT(d)] - (2.5 - RANDOM(1, 4, FLOAT)))\n",
        "x[(b-c)] += RANDOM(0, 1, FLOAT)\nx[b] += ((x[a] + x[a]) + (x[(c*DIMS(c))] + x[a]))\n",
    ];
    // Errors of the front end (a slice in a first mention, FLAT of
    // nothing): nothing to compare, but no internal error either.
    let rejected = [cases[1], cases[4]];
    for c in cases {
        let outcomes = assert_agrees(c, 0..3);
        let compared = outcomes.iter().all(|o| *o == Outcome::Compared);
        assert_eq!(compared, !rejected.contains(&c), "{c}\n{outcomes:?}");
    }
}

// Disagreements the random programs found, minimised; fixed with these as
// regression tests.

/// The reset kernel of an `=` whose left side is not injective stores 0
/// into one cell from several threads (`parallelize` keeps it a plain
/// store on purpose: the race is harmless). The emulator's race checker
/// reported it as a kernel fault (exit 70); now a store that leaves the
/// word as it is is no race.
#[test]
fn reset_stores_from_several_points_run_on_the_emulator() {
    let text = "x[a//2] = 1\n\nDIMS(a) IN [4,4]\n";
    assert_agrees(text, 0..2);
    let m = eintup::pipeline::specialized_for(&Source::from_string("p.et", text), &[], &[], 0, FloatWidth::F64).unwrap().0;
    let got = execute(&Source::from_string("p.et", text), &m, Backend::Emu, &RunOptions::default(), FpContract::Off).unwrap();
    // Two points reach each cell: reset, then 1 + 1.
    assert_eq!(got[0].data, Data::I32(vec![2, 2]));
}

/// LLVM's NVPTX backend writes predicate immediates (`xor.pred %p13, %p10,
/// -1;` here, in the `//^` arithmetic of the offset); the emulator's
/// decoder refused the bundle ("`-1` is not a predicate", exit 70).
#[test]
fn predicate_immediates_in_the_ptx_run_on_the_emulator() {
    assert_agrees("z[(FLAT(1,d)//^2),(d//^DIMS(a))] = 1\n\nRANK(a) = 1\n", 0..2);
    assert_agrees(
        "y[] += (1 * 1)\nz[(d+(a*DIMS(b))),(d+(a-b))] = RANDOM(0, 7, FLOAT)\nz[(DIMS(a)//^2),(FLAT(2,0)//2)] += (-RANK(d) % -RANDOM(0, 1, INT))\n",
        1..2,
    );
}

/// LLVM writes a 64-bit rotate (here in the RANDOM generator's
/// arithmetic) as a nested block declaring `%lhs` and `%rhs`; the
/// emulator's reader flattened the blocks and refused the second
/// declaration ("register `%lhs` is declared twice", exit 70).
#[test]
fn nested_ptx_blocks_declaring_one_register_run_on_the_emulator() {
    assert_agrees("x[(a-b)] += (1 // RANDOM(1, 7, INT))\n", 0..4);
}

/// A zero static divisor inside a FLAT argument of a read: every
/// instantiation that uses it is out of bounds (docs/language.md s.4), but the
/// FLAT argument's bounds were an internal error on every backend.
#[test]
fn a_zero_divisor_in_a_flat_argument_skips_the_read() {
    let text = "x[a] = 1\ny[b] = x[FLAT(b//DIMS(c))]\n\nDIMS(c) IN [0,0]\nDIMS(b) IN [3,3]\n";
    assert_agrees(text, 0..2);
    let m = eintup::pipeline::specialized_for(&Source::from_string("p.et", text), &[], &[], 0, FloatWidth::F64).unwrap().0;
    let want = interp::run(&m, &RunOptions::default()).unwrap();
    assert_eq!(want[1].data, Data::I32(vec![0, 0, 0]));
}

/// A scalar in a first mention makes a position of rank 1; rank inference
/// did not say so, so `RANK(a) = 3` got through to an internal error
/// ("index of rank 3 at a position of rank 1") in the interpreter and in
/// `lower-to-loops`. Now `a` gets rank 1, or the constraint is E0201.
#[test]
fn an_index_at_a_scalar_signature_position_has_rank_1() {
    assert!(assert_agrees("x[0] = 1\nx[a] += 9\n", 0..2).iter().all(|o| *o == Outcome::Compared));
    assert_eq!(assert_agrees("x[0] = 1\nx[a] += 9\n\nRANK(a) = 3\n", 0..1), [Outcome::FrontEnd]);
    assert!(assert_agrees("y[] = 1\nx[(0*2),(d//RANK(d))] = y[] + 1\nx[a,b] += 9\n\nRANK(a) IN [0,2]\n", 0..4).iter().all(|o| *o == Outcome::Compared));
}

/// `=` over a sum of `-0.0` terms: the interpreter stores the first term as
/// it is (`-0.0`), compiled code reset the cell to `+0.0` and added
/// (`+0.0 + -0.0 = +0.0`), so `1 / x` was `-inf` against `+inf`. The reset
/// now stores `-0.0`, which adds exactly.
#[test]
fn an_assignment_keeps_the_sign_of_a_zero_sum() {
    let text = "y[a] = 0.0\nx[] = -y[a]\nz[] = 1 / x[]\n\nDIMS(a) IN [3,3]\n";
    assert_agrees(text, 0..1);
    let m = eintup::pipeline::specialized_for(&Source::from_string("p.et", text), &[], &[], 0, FloatWidth::F64).unwrap().0;
    for b in [Backend::Interp, Backend::Cpu, Backend::Emu] {
        let got = execute(&Source::from_string("p.et", text), &m, b, &RunOptions::default(), FpContract::Off).unwrap();
        assert_eq!(got[2].to_f64_vec(), [f64::NEG_INFINITY], "{b}");
    }
}

/// Issue #20 item 4: in `--float f32` the interpreter computed FLOAT `//`,
/// `//^` and `%` in f64 and rounded once, the backends in f32. Every FLOAT
/// operation is now computed in the float width (docs/semantics.md). In
/// f32, 2.5 / 0.1 rounds to exactly 25 (2.5 // 0.1 = 25, 2.5 % 0.1 =
/// 2.5 - fl(0.1 * 25) = 0), where f64 gives 24.99999996 (24 and
/// 0.09999996); 0.3 / 0.1 rounds to 3 in f32 (0.3 //^ 0.1 = 3), 3.00000007
/// in f64 (4).
#[test]
fn f32_float_floor_division_matches_the_interpreter() {
    let text = "x[] = 2.5 % 0.1\ny[] = 2.5 // 0.1\nz[] = 0.3 //^ 0.1\n";
    let src = Source::from_string("p.et", text);
    let m = eintup::pipeline::specialized_for(&src, &[], &[], 0, FloatWidth::F32).unwrap().0;
    let opts = RunOptions { float: FloatWidth::F32, ..RunOptions::default() };
    let want = interp::run(&m, &opts).unwrap();
    // The values of f32 arithmetic, step by step.
    let f = |x: f32, y: f32| (x / y).floor();
    let expect = [2.5f32 - 0.1f32 * f(2.5, 0.1), f(2.5, 0.1), (0.3f32 / 0.1f32).ceil()];
    assert_eq!(expect, [0.0, 25.0, 3.0]);
    for k in 0..expect.len() {
        assert_eq!(want[k].data, Data::F32(vec![expect[k]]), "interpreter: `{}`", m.arrays[k].name);
    }
    for b in BACKENDS {
        let got = execute(&src, &m, b, &opts, FpContract::Off).unwrap();
        for k in 0..expect.len() {
            assert_eq!(got[k], want[k], "{b}: `{}`", m.arrays[k].name);
        }
    }
}

/// Issue #20 item 4: `x[j*DIMS(big)]` with `j` in 0..5 and `big = 2^61`
/// reaches 4 * 2^61 = 2^63, beyond i64. The interpreter skipped that point
/// (y = [5, 0, 0, 0, 0]); compiled code wrapped 2^63 * 2 to 0 and read
/// `x[0]` ([5, 0, 0, 0, 5] for big = 2^62). Such a configuration is now a
/// user error (E0319) before any backend runs; one just inside the range
/// runs alike everywhere, its reads beyond `x` out of bounds.
#[test]
fn index_arithmetic_beyond_64_bits_is_refused_before_any_backend() {
    let src = Source::from_string("p.et", "x[i] = 5\ny[j] = x[j*DIMS(big)]\n");
    let bind = |big: u64| vec!["i=[1]".to_string(), "j=[5]".to_string(), format!("big=[{big}]")];
    for big in [1u64 << 61, 1 << 62] {
        match eintup::pipeline::specialized_for(&src, &bind(big), &[], 0, FloatWidth::F64) {
            Err(Failure::User(d)) => assert!(d.contains("error[E0319]"), "big = {big}: {d}"),
            other => panic!("big = {big}: expected E0319, got {:?}", other.map(|_| ())),
        }
    }
    // 4 * 2^60 = 2^62 fits: only j = 0 reads inside x.
    let m = eintup::pipeline::specialized_for(&src, &bind(1 << 60), &[], 0, FloatWidth::F64).unwrap().0;
    for b in [Backend::Interp, Backend::Cpu, Backend::Emu] {
        let got = execute(&src, &m, b, &RunOptions::default(), FpContract::Off).unwrap();
        assert_eq!(got[1].data, Data::I32(vec![5, 0, 0, 0, 0]), "{b}");
    }
}
