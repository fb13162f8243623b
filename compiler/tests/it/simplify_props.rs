//! Property tests of `simplify-index` (docs/architecture.md section 4): simplification
//! never changes an index's value on its domain, never adds operators, and
//! `decide` is only ever right. Values are checked with `IExpr::eval` and
//! `Cond::holds` (the dialect's semantics: wrapping, floor division,
//! `x // 0 == x % 0 == 0`), independently of the e-graph.

use eintup::ir::loops::{Cond, For, Guard, IBin, IExpr, Kernel, LoopKind, Node, Var};
use eintup::simplify::{decide, simplify_expr, simplify_kernel, Ranges, Simplifier, Stats};
use proptest::prelude::*;

const NVARS: usize = 3;

fn arb_op() -> impl Strategy<Value = IBin> {
    prop::sample::select(vec![IBin::Add, IBin::Sub, IBin::Mul, IBin::FloorDiv, IBin::CeilDiv, IBin::Mod, IBin::Min, IBin::Max])
}

/// Expressions of depth <= 5 over constants in -20..20 and 3 variables.
fn arb_expr() -> impl Strategy<Value = IExpr> {
    let leaf = prop_oneof![(-20i64..20).prop_map(IExpr::Const), (0..NVARS).prop_map(IExpr::Var)];
    leaf.prop_recursive(5, 64, 2, |inner| (arb_op(), inner.clone(), inner).prop_map(|(op, a, b)| IExpr::bin(op, a, b)))
}

/// Index-shaped expressions: small non-negative ranges, small divisors,
/// and the forms the rules look for (`a*c + b`, `x // c`, `x % c`, FLAT
/// recombination), so that conditional rules meet their boundary cases.
fn arb_index_expr() -> impl Strategy<Value = IExpr> {
    let leaf = prop_oneof![(-3i64..7).prop_map(IExpr::Const), (0..NVARS).prop_map(IExpr::Var)];
    leaf.prop_recursive(4, 32, 2, |inner| {
        // Divisors: small constants (0 included) or a variable (whose range
        // may contain 0).
        let d = prop_oneof![3 => (-4i64..6).prop_map(IExpr::Const), 1 => (0..NVARS).prop_map(IExpr::Var)];
        let divop = prop::sample::select(vec![IBin::FloorDiv, IBin::CeilDiv, IBin::Mod]);
        prop_oneof![
            (arb_op(), inner.clone(), inner.clone()).prop_map(|(op, a, b)| IExpr::bin(op, a, b)),
            (inner.clone(), d.clone(), inner.clone(), divop.clone()).prop_map(|(a, c, b, op)| IExpr::bin(op, IExpr::add(IExpr::mul(a, c.clone()), b), c)),
            (inner.clone(), d.clone(), divop).prop_map(|(a, c, op)| IExpr::bin(op, IExpr::mul(a, c.clone()), c)),
            (inner.clone(), d.clone(), prop::sample::select(vec![IBin::FloorDiv, IBin::Mod])).prop_map(|(x, c, op)| IExpr::bin(op, x, c)),
            (inner.clone(), d, 0i64..4).prop_map(|(x, c, k)| IExpr::add(
                IExpr::mul(IExpr::mul(IExpr::bin(IBin::FloorDiv, x.clone(), c.clone()), c.clone()), IExpr::c(k)),
                IExpr::mul(IExpr::bin(IBin::Mod, x, c), IExpr::c(k))
            )),
            (inner.clone(), inner).prop_map(|(a, b)| IExpr::bin(IBin::Min, a.clone(), IExpr::add(b, a))),
        ]
    })
}

/// Small ranges (checked at every point), sometimes one near 2^62 where
/// products wrap.
fn arb_small_ranges() -> impl Strategy<Value = Vec<(i64, i64)>> {
    let small = (-4i64..8, 0i64..12).prop_map(|(lo, w)| (lo, lo + w));
    let huge = ((1i64 << 61)..(1i64 << 62), 0i64..3).prop_map(|(lo, w)| (lo, lo + w));
    prop::collection::vec(prop_oneof![6 => small, 1 => huge], NVARS)
}

/// Per variable `(lo, hi)`: mostly small ranges around 0 (where the
/// div/mod rules matter), sometimes huge ones (where products wrap).
fn arb_ranges() -> impl Strategy<Value = Vec<(i64, i64)>> {
    let small = (-30i64..30, 0i64..40).prop_map(|(lo, w)| (lo, lo + w));
    let huge = (-(1i64 << 40)..(1i64 << 40), 0i64..(1i64 << 41)).prop_map(|(lo, w)| (lo, lo + w));
    prop::collection::vec(prop_oneof![4 => small, 1 => huge], NVARS)
}

fn ranges_of(rs: &[(i64, i64)]) -> Ranges {
    rs.iter().enumerate().fold(Ranges::new(), |r, (v, &(lo, hi))| r.with(v, lo, hi))
}

/// Every point when the domain is small (up to `ALL_POINTS`), else random
/// points inside the ranges plus every corner.
fn points(rs: &[(i64, i64)], seeds: &[[u64; NVARS]]) -> Vec<Vec<i64>> {
    const ALL_POINTS: u64 = 3_000;
    let size = rs.iter().try_fold(1u64, |n, &(lo, hi)| n.checked_mul((hi - lo) as u64 + 1));
    if size.is_some_and(|n| n <= ALL_POINTS) {
        let mut out = vec![vec![]];
        for &(lo, hi) in rs {
            out = out.into_iter().flat_map(|p: Vec<i64>| (lo..=hi).map(move |x| [p.clone(), vec![x]].concat())).collect();
        }
        return out;
    }
    let mut out: Vec<Vec<i64>> = seeds.iter().map(|s| rs.iter().zip(s).map(|(&(lo, hi), &u)| lo + (u % ((hi - lo) as u64 + 1)) as i64).collect()).collect();
    for mask in 0..(1 << NVARS) {
        out.push(rs.iter().enumerate().map(|(i, &(lo, hi))| if mask >> i & 1 == 1 { hi } else { lo }).collect());
    }
    out
}

fn arb_cond() -> impl Strategy<Value = Cond> {
    prop_oneof![
        (arb_expr(), arb_expr(), arb_expr()).prop_map(|(e, lo, hi)| Cond::InRange { e, lo, hi }),
        // Constant bounds, the shape lowering produces most.
        (arb_expr(), -25i64..25, 0i64..30).prop_map(|(e, lo, w)| Cond::InRange { e, lo: IExpr::c(lo), hi: IExpr::c(lo + w) }),
        arb_expr().prop_map(Cond::NonZero),
    ]
}

proptest! {
    #![proptest_config(ProptestConfig { cases: eintup_testkit::cases(400), ..ProptestConfig::default() })]

    #[test]
    fn simplify_keeps_values_and_never_adds_ops(
        e in arb_expr(),
        rs in arb_ranges(),
        seeds in prop::collection::vec(any::<[u64; NVARS]>(), 24),
    ) {
        let s = simplify_expr(&e, &ranges_of(&rs));
        prop_assert!(s.op_count() <= e.op_count(), "{:?} -> {:?}", e, s);
        for p in points(&rs, &seeds) {
            prop_assert_eq!(s.eval(&p), e.eval(&p), "at {:?}: {:?} -> {:?}", p, e, s);
        }
    }

    #[test]
    fn simplify_keeps_values_of_index_shaped_expressions(
        e in arb_index_expr(),
        rs in arb_small_ranges(),
    ) {
        let s = simplify_expr(&e, &ranges_of(&rs));
        prop_assert!(s.op_count() <= e.op_count(), "{:?} -> {:?}", e, s);
        for p in points(&rs, &[]) {
            prop_assert_eq!(s.eval(&p), e.eval(&p), "at {:?}: {:?} -> {:?}", p, e, s);
        }
    }

    #[test]
    fn decide_is_never_wrong_on_index_shaped_conditions(
        e in arb_index_expr(),
        lo in -3i64..5,
        w in 0i64..12,
        rs in arb_small_ranges(),
    ) {
        let c = Cond::InRange { e, lo: IExpr::c(lo), hi: IExpr::c(lo + w) };
        if let Some(b) = decide(&c, &ranges_of(&rs)) {
            for p in points(&rs, &[]) {
                prop_assert_eq!(c.holds(&p), b, "at {:?}: {:?}", p, c);
            }
        }
    }

    #[test]
    fn decide_is_never_wrong(
        c in arb_cond(),
        rs in arb_ranges(),
        seeds in prop::collection::vec(any::<[u64; NVARS]>(), 24),
    ) {
        if let Some(b) = decide(&c, &ranges_of(&rs)) {
            for p in points(&rs, &seeds) {
                prop_assert_eq!(c.holds(&p), b, "at {:?}: {:?}", p, c);
            }
        }
    }
}

fn v(i: usize) -> IExpr {
    IExpr::v(i)
}

#[test]
fn space_to_depth_indices_fold() {
    // v0 in [0, 3] (block row), v1 in [0, 1] (position in the block).
    let r = Ranges::new().with(0, 0, 3).with(1, 0, 1);
    let pos = IExpr::add(IExpr::mul(v(0), IExpr::c(2)), v(1));
    assert_eq!(simplify_expr(&IExpr::bin(IBin::FloorDiv, pos.clone(), IExpr::c(2)), &r), v(0));
    assert_eq!(simplify_expr(&IExpr::bin(IBin::Mod, pos.clone(), IExpr::c(2)), &r), v(1));
    // The written channel FLAT(pos % 2, chan) with 3 channels, chan = v2:
    // (pos % 2) * 3 + chan becomes v1 * 3 + v2.
    let r = r.with(2, 0, 2);
    let chan = IExpr::add(IExpr::mul(IExpr::bin(IBin::Mod, pos, IExpr::c(2)), IExpr::c(3)), v(2));
    assert_eq!(simplify_expr(&chan, &r), IExpr::add(IExpr::mul(v(1), IExpr::c(3)), v(2)));
}

#[test]
fn conv_guard_proved_by_loop_bounds_disappears() {
    // Valid 1-D convolution, H = 8, K = 3: oh in [0, 6), kh in [0, 3);
    // the input position oh + kh is in [0, 8) by the bounds alone.
    let write = Node::LoadIndex { var: 2, buf: 0, offset: IExpr::add(v(0), v(1)) };
    let g = Node::Guard(Guard { conds: vec![Cond::InRange { e: IExpr::add(v(0), v(1)), lo: IExpr::c(0), hi: IExpr::c(8) }], body: vec![write.clone()] });
    let inner = Node::For(For { var: 1, lo: IExpr::c(0), hi: IExpr::c(3), kind: LoopKind::Reduce, body: vec![g] });
    let outer = Node::For(For { var: 0, lo: IExpr::c(0), hi: IExpr::c(6), kind: LoopKind::Parallel, body: vec![inner] });
    let vars = ["oh", "kh", "t"].iter().map(|n| Var { name: n.to_string() }).collect();
    let mut k = Kernel::new("conv", vars, vec![outer]);
    let st = simplify_kernel(&mut k);
    assert_eq!((st.guards_removed, st.conds_removed, st.regions_removed), (1, 1, 0));
    let Node::For(o) = &k.body[0] else { panic!("outer loop kept") };
    let Node::For(i) = &o.body[0] else { panic!("inner loop kept") };
    assert_eq!(i.body, vec![write]);

    // With padding 1 (position oh + kh - 1) the guard is needed and stays.
    let r = Ranges::new().with(0, 0, 7).with(1, 0, 2);
    let padded = Cond::InRange { e: IExpr::sub(IExpr::add(v(0), v(1)), IExpr::c(1)), lo: IExpr::c(0), hi: IExpr::c(8) };
    assert_eq!(decide(&padded, &r), None);
}

/// Simplifies a few hundred random expressions; run with
/// `cargo test --release -p eintup --test it simplify_props:: -- --ignored --nocapture`
/// (the figure in docs/pass-simplify-index.md).
#[test]
#[ignore]
fn timing_few_hundred_expressions() {
    use proptest::strategy::ValueTree;
    use proptest::test_runner::{Config, RngAlgorithm, TestRng, TestRunner};
    let mut runner = TestRunner::new_with_rng(Config::default(), TestRng::from_seed(RngAlgorithm::ChaCha, &[7; 32]));
    let cases: Vec<(IExpr, Vec<(i64, i64)>)> =
        (0..400).map(|_| (arb_expr().new_tree(&mut runner).unwrap().current(), arb_ranges().new_tree(&mut runner).unwrap().current())).collect();
    let s = Simplifier::new();
    let mut st = Stats::default();
    let t = std::time::Instant::now();
    for (e, rs) in &cases {
        s.expr_counted(e, &ranges_of(rs), &mut st);
    }
    let dt = t.elapsed();
    println!("{st}");
    println!("{} expressions, {:.1} ms total, {:.1} us each", cases.len(), dt.as_secs_f64() * 1e3, dt.as_secs_f64() * 1e6 / cases.len() as f64);
}
