//! Differential test of `plan-products` (issue #31): random products of 2
//! to 5 arrays over shared, summed and broadcast eintups (ranks 0 to 2,
//! `=` and `+=`, a constant factor now and then), planned, then run two
//! ways: the planned `et` module by the et interpreter, and its loop
//! module (the middle end) by the loop interpreter. Both must give the
//! interpreter's results on the program as written: INT bit for bit; FLOAT
//! (inputs in [0, 1), so no cancellation) within the rounding of its sums,
//! `2 (f + L) eps` relative for f factors and L terms per cell.

use eintup::driver::Source;
use eintup::interp::{self, RunOptions};
use eintup::ir::loops::{FloatWidth, FpContract};
use eintup::tensor::Tensor;
use eintup_testkit::{assert_tensors_close, Tol};
use proptest::prelude::*;

/// One eintup: its dims (rank 0 to 2).
fn eintup() -> impl Strategy<Value = Vec<i64>> {
    prop_oneof![Just(vec![]), prop::collection::vec(1i64..5, 1), prop::collection::vec(1i64..4, 2)]
}

/// A random product: eintups, each factor's eintups (indices into them),
/// the left side's (some may be in no factor: broadcast), `+=` or `=`,
/// INT or FLOAT, and where a constant factor goes (if any).
#[derive(Clone, Debug)]
struct Case {
    dims: Vec<Vec<i64>>,
    factors: Vec<Vec<usize>>,
    lhs: Vec<usize>,
    add: bool,
    int: bool,
    constant: Option<usize>,
}

fn case() -> impl Strategy<Value = Case> {
    prop::collection::vec(eintup(), 2..7).prop_flat_map(|dims| {
        let n = dims.len();
        let subset = move |lo: usize| prop::collection::btree_set(0..n, lo..=n.min(3)).prop_map(|s| s.into_iter().collect::<Vec<_>>());
        (Just(dims), prop::collection::vec(subset(1), 2..6), subset(0), any::<bool>(), any::<bool>(), prop::option::of(0usize..6))
            .prop_map(|(dims, factors, lhs, add, int, constant)| Case { dims, factors, lhs, add, int, constant })
    })
}

impl Case {
    fn text(&self) -> String {
        let e = |ids: &[usize]| ids.iter().map(|i| format!("e{i}")).collect::<Vec<_>>().join(", ");
        let random = if self.int { "RANDOM(-9, 10, INT)" } else { "RANDOM(0, 1, FLOAT)" };
        let mut t = String::new();
        for (k, f) in self.factors.iter().enumerate() {
            t += &format!("a{k}[{}] = {random}\n", e(f));
        }
        t += &format!("y[{}] = {random}\n", e(&self.lhs));
        let mut reads: Vec<String> = self.factors.iter().enumerate().map(|(k, f)| format!("a{k}[{}]", e(f))).collect();
        if let Some(c) = self.constant {
            reads.insert(c.min(reads.len()), if self.int { "3".into() } else { "0.5".into() });
        }
        t += &format!("y[{}] {} {}\n\ny\n", e(&self.lhs), if self.add { "+=" } else { "=" }, reads.join(" * "));
        t
    }

    /// Dims of the eintups the program uses.
    fn binds(&self) -> Vec<String> {
        let used = |i: &usize| self.lhs.contains(i) || self.factors.iter().any(|f| f.contains(i));
        self.dims.iter().enumerate().filter(|(i, _)| used(i)).map(|(i, d)| format!("e{i}={d:?}")).collect()
    }

    /// Terms per cell: the product of the summed eintups' sizes.
    fn terms(&self) -> f64 {
        let used: std::collections::BTreeSet<usize> = self.factors.iter().flatten().copied().collect();
        used.iter().filter(|i| !self.lhs.contains(i)).map(|&i| self.dims[i].iter().product::<i64>() as f64).product()
    }
}

/// Runs `c`: returns whether it was planned.
fn check(c: &Case) -> Result<bool, TestCaseError> {
    let text = c.text();
    let src = Source::from_string("p.et", &text);
    let (module, _) = eintup::pipeline::specialized_for(&src, &c.binds(), &[], 1, FloatWidth::F64).map_err(|e| TestCaseError::fail(format!("{text}{e}")))?;
    let opts = RunOptions { seed: 1, float: FloatWidth::F64, inputs: Default::default(), ..RunOptions::default() };
    let want = interp::run(&module, &opts).map_err(|e| TestCaseError::fail(format!("{e:?}")))?;
    let (planned, warnings) =
        eintup::pipeline::planned(&src, &module, FloatWidth::F64, FpContract::Fast).map_err(|e| TestCaseError::fail(format!("{text}{e}")))?;
    prop_assert!(warnings.is_empty());
    let factors = c.factors.len() + usize::from(c.constant.is_some());
    let tol = if c.int { Tol::EXACT } else { Tol::rel(2.0 * (factors as f64 + c.terms()) * f64::EPSILON) };
    let n = module.arrays.len();
    // The planned module by the et interpreter.
    let got = interp::run(&planned, &opts).map_err(|e| TestCaseError::fail(format!("{e:?}")))?;
    for k in 0..n {
        assert_tensors_close(&format!("{text}et, `{}`", module.arrays[k].name), &got[k], &want[k], tol);
    }
    // Its loop module by the loop interpreter, from the arrays' initial
    // contents and zeroed temporaries.
    let lm = eintup::pipeline::lower(&src, &planned, FloatWidth::F64).map_err(|e| TestCaseError::fail(format!("{text}{e}")))?;
    let mut bufs = interp::initial_arrays(&module, &opts).map_err(|e| TestCaseError::fail(format!("{e:?}")))?;
    for b in &lm.buffers[n..] {
        let shape: Vec<usize> = b.dims().expect("static shape").iter().map(|&d| d as usize).collect();
        bufs.push(Tensor::zeros(b.dtype, &shape).expect("small"));
    }
    interp::loops::run(&lm, 1, &mut bufs).map_err(TestCaseError::fail)?;
    for k in 0..n {
        assert_tensors_close(&format!("{text}loops, `{}`", module.arrays[k].name), &bufs[k], &want[k], tol);
    }
    Ok(planned.stmts.len() > module.stmts.len())
}

proptest! {
    #![proptest_config(ProptestConfig { cases: eintup_testkit::cases(400), ..ProptestConfig::default() })]
    #[test]
    fn planned_products_give_the_interpreters_results(c in case()) {
        check(&c)?;
    }
}

/// The generator reaches the pass: most of its products have a cheaper
/// order (a fixed sample, so the count is stable).
#[test]
fn most_random_products_are_planned() {
    use proptest::strategy::ValueTree;
    use proptest::test_runner::{Config, RngAlgorithm, TestRng, TestRunner};
    let mut runner = TestRunner::new_with_rng(Config::default(), TestRng::from_seed(RngAlgorithm::ChaCha, &[7; 32]));
    let (mut planned, mut total) = (0, 0);
    for _ in 0..100 {
        let c = case().new_tree(&mut runner).expect("a case").current();
        total += 1;
        planned += usize::from(check(&c).expect("agrees"));
    }
    assert!(planned * 3 >= total, "only {planned} of {total} random products were planned");
}

/// The examples, INT, at sizes where the plan is much cheaper:
/// the chain of three and four matrices and a factor outside its sum.
#[test]
fn chains_and_factors() {
    let cases = [
        ("a[i,j] = RANDOM(-99, 100, INT)\nb[j,k] = RANDOM(-99, 100, INT)\nc[k,l] = RANDOM(-99, 100, INT)\ny[i,l] = a[i,j] * b[j,k] * c[k,l]\n\ny\n", &["i=[7]", "j=[9]", "k=[11]", "l=[5]"][..], 1),
        (
            "a[i,j] = RANDOM(-99, 100, INT)\nb[j,k] = RANDOM(-99, 100, INT)\nc[k,l] = RANDOM(-99, 100, INT)\nd[l,m] = RANDOM(-99, 100, INT)\ny[i,m] = a[i,j] * b[j,k] * c[k,l] * d[l,m]\n\ny\n",
            &["i=[3, 2]", "j=[6]", "k=[5]", "l=[7]", "m=[]"][..],
            2,
        ),
        ("a[i,j] = RANDOM(-99, 100, INT)\nb[j] = RANDOM(-99, 100, INT)\nc[i] = RANDOM(-99, 100, INT)\ny[i] = a[i,j] * b[j] * c[i]\n\ny\n", &["i=[6]", "j=[40]"][..], 1),
    ];
    for (text, binds, temporaries) in cases {
        let src = Source::from_string("c.et", text);
        let binds: Vec<String> = binds.iter().map(|b| b.to_string()).collect();
        let (module, _) = eintup::pipeline::specialized_for(&src, &binds, &[], 3, FloatWidth::F64).unwrap();
        // INT is planned under off too.
        let (planned, _) = eintup::pipeline::planned(&src, &module, FloatWidth::F64, FpContract::Off).unwrap();
        assert_eq!(planned.stmts.len(), module.stmts.len() + temporaries, "{text}");
        let opts = RunOptions { seed: 3, float: FloatWidth::F64, inputs: Default::default(), ..RunOptions::default() };
        let (want, got) = (interp::run(&module, &opts).unwrap(), interp::run(&planned, &opts).unwrap());
        for k in 0..module.arrays.len() {
            assert_tensors_close(text, &got[k], &want[k], Tol::EXACT);
        }
    }
}
