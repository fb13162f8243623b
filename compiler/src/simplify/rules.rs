//! The rewrite rules of `simplify-index`, all in one table (`rules()`),
//! grouped by family. Every rule rewrites in one direction and its right
//! side never has more operators than its left; there is no blanket
//! commutativity or associativity, only the few targeted variants the loop
//! dialect's index expressions need (constants moved to the right, constant
//! re-association, the two operand orders of `+` in div/mod patterns).
//!
//! Soundness is with respect to the dialect's semantics: `i64` arithmetic
//! that wraps, floor division/modulo, ceiling division, and `x // 0 ==
//! x % 0 == 0`. Rules that are ring identities (`+ - *` only) hold under
//! wrapping unconditionally. Rules about division need a non-zero divisor
//! and, where the left side's intermediate could wrap, an overflow check;
//! both are read from the interval analysis (`analysis.rs`).
//!
//! Facts that the analysis already proves are not repeated as rules:
//! constant folding, `x * 0 -> 0`, `x % 1 -> 0`, `x // c -> 0` for
//! `0 <= x < c`, `(x % c) // c -> 0`, and any other expression whose
//! interval is a single value (see docs/pass-simplify-index.md).

use super::analysis::{Interval, IntervalAnalysis};
use super::lang::IndexLang;
use egg::{rewrite as rw, EGraph, Id, Rewrite, Subst, Var};

type EG = EGraph<IndexLang, IntervalAnalysis>;
type Rule = Rewrite<IndexLang, IntervalAnalysis>;

/// A pattern variable; only called on the literal names below.
fn pv(name: &str) -> Var {
    name.parse().unwrap_or_else(|_| panic!("bad pattern variable {name}"))
}

fn iv(eg: &EG, s: &Subst, v: &str) -> Interval {
    eg[s[pv(v)]].data
}

/// `?c` is a constant and `?x` is not (moving constants right, once).
fn const_not_const(c: &'static str, x: &'static str) -> impl Fn(&mut EG, Id, &Subst) -> bool {
    move |eg, _, s| iv(eg, s, c).as_const().is_some() && iv(eg, s, x).as_const().is_none()
}

/// Both `?a` and `?b` are constants.
fn both_const(a: &'static str, b: &'static str) -> impl Fn(&mut EG, Id, &Subst) -> bool {
    move |eg, _, s| iv(eg, s, a).as_const().is_some() && iv(eg, s, b).as_const().is_some()
}

/// `?c` is never 0 on the domain.
fn nonzero(c: &'static str) -> impl Fn(&mut EG, Id, &Subst) -> bool {
    move |eg, _, s| {
        let i = iv(eg, s, c);
        !i.is_empty() && !i.contains(0)
    }
}

/// `?a * ?c + ?b` (or `?a * ?c` when `b` is `None`) stays inside `i64`
/// mathematically at every point, so the wrapping left side computes the
/// true value and floor identities apply to it.
fn no_wrap_mul_add(a: &'static str, c: &'static str, b: Option<&'static str>) -> impl Fn(&mut EG, Id, &Subst) -> bool {
    use crate::ir::loops::IBin::{Add, Mul};
    move |eg, _, s| {
        let Some(ac) = Interval::exact(Mul, iv(eg, s, a), iv(eg, s, c)) else {
            return false;
        };
        match b {
            None => true,
            Some(b) => Interval::exact(Add, ac, iv(eg, s, b)).is_some(),
        }
    }
}

/// `x % c == x` for every `x` in `?x` and `c` in `?c`: `0 <= x < c`, or
/// `c < x <= 0`.
fn mod_is_identity(eg: &mut EG, _: Id, s: &Subst) -> bool {
    let (x, c) = (iv(eg, s, "?x"), iv(eg, s, "?c"));
    if x.is_empty() || c.is_empty() {
        return false;
    }
    (x.lo >= 0 && c.lo > x.hi) || (x.hi <= 0 && c.hi < x.lo)
}

/// Constants `?a > 0`, `?b > 0` whose product fits in `i64`.
fn positive_product(eg: &mut EG, _: Id, s: &Subst) -> bool {
    match (iv(eg, s, "?a").as_const(), iv(eg, s, "?b").as_const()) {
        (Some(a), Some(b)) => a > 0 && b > 0 && a.checked_mul(b).is_some(),
        _ => false,
    }
}

/// Constants `?a > 0`, `?b > 0` with `b` dividing `a`.
fn positive_multiple(eg: &mut EG, _: Id, s: &Subst) -> bool {
    match (iv(eg, s, "?a").as_const(), iv(eg, s, "?b").as_const()) {
        (Some(a), Some(b)) => a > 0 && b > 0 && a % b == 0,
        _ => false,
    }
}

/// Constants `?c != 0`, `?k`, `?m` with `m == c * k` exactly.
fn flat_scale(eg: &mut EG, _: Id, s: &Subst) -> bool {
    match (iv(eg, s, "?c").as_const(), iv(eg, s, "?k").as_const(), iv(eg, s, "?m").as_const()) {
        (Some(c), Some(k), Some(m)) => c != 0 && c.checked_mul(k) == Some(m),
        _ => false,
    }
}

/// `?a` is at most `?b` everywhere (`min` picks `a`, `max` picks `b`).
fn le(a: &'static str, b: &'static str) -> impl Fn(&mut EG, Id, &Subst) -> bool {
    move |eg, _, s| {
        let (x, y) = (iv(eg, s, a), iv(eg, s, b));
        !x.is_empty() && !y.is_empty() && x.hi <= y.lo
    }
}

/// Every rule, by family. The names are what tests and the doc's rule
/// table refer to.
pub fn rules() -> Vec<Rule> {
    let mut r: Vec<Rule> = Vec::new();

    // ---- identity: neutral and absorbing elements (ring identities and
    // the definitions of `//`, `//^`, `%`, `min`, `max`; hold under
    // wrapping without conditions).
    r.extend([
        // x + 0 = x.
        rw!("add-zero"; "(+ ?x 0)" => "?x"),
        // x - 0 = x.
        rw!("sub-zero"; "(- ?x 0)" => "?x"),
        // x - x = 0 (also for wrapped values).
        rw!("sub-self"; "(- ?x ?x)" => "0"),
        // x * 1 = x.
        rw!("mul-one"; "(* ?x 1)" => "?x"),
        // floor(x / 1) = x.
        rw!("div-one"; "(// ?x 1)" => "?x"),
        // ceil(x / 1) = x.
        rw!("ceildiv-one"; "(//^ ?x 1)" => "?x"),
        // min(x, x) = x.
        rw!("min-self"; "(min ?x ?x)" => "?x"),
        // max(x, x) = x.
        rw!("max-self"; "(max ?x ?x)" => "?x"),
    ]);

    // ---- canon: constants to the right of `+` and `*`, and `x - c` as
    // `x + (-c)`, so that the patterns below need one operand order only.
    // Commutativity of wrapping `+`/`*` and `x - c == x + (0 - c)` in the
    // ring; the condition keeps each rule from firing on its own output.
    r.extend([
        // c + x = x + c.
        rw!("add-const-right"; "(+ ?c ?x)" => "(+ ?x ?c)" if const_not_const("?c", "?x")),
        // c * x = x * c.
        rw!("mul-const-right"; "(* ?c ?x)" => "(* ?x ?c)" if const_not_const("?c", "?x")),
        // x - c = x + (-c) (wrapping negation; the constant folds).
        rw!("sub-const-to-add"; "(- ?x ?c)" => "(+ ?x (- 0 ?c))" if const_not_const("?c", "?x")),
    ]);

    // ---- reassoc: targeted re-association and cancellation (ring
    // identities, so wrapping is harmless).
    r.extend([
        // (x + a) + b = x + (a + b) for constants a, b.
        rw!("add-const-const"; "(+ (+ ?x ?a) ?b)" => "(+ ?x (+ ?a ?b))" if both_const("?a", "?b")),
        // (x * a) * b = x * (a * b) for constants a, b.
        rw!("mul-const-const"; "(* (* ?x ?a) ?b)" => "(* ?x (* ?a ?b))" if both_const("?a", "?b")),
        // (a + b) - b = a.
        rw!("add-sub-cancel-right"; "(- (+ ?a ?b) ?b)" => "?a"),
        // (a + b) - a = b.
        rw!("add-sub-cancel-left"; "(- (+ ?a ?b) ?a)" => "?b"),
        // (a - b) + b = a.
        rw!("sub-add-cancel"; "(+ (- ?a ?b) ?b)" => "?a"),
        // (x + a) - (x + b) = a - b: differences of guard bounds.
        rw!("sub-shared-left"; "(- (+ ?x ?a) (+ ?x ?b))" => "(- ?a ?b)"),
        // (a + x) - (b + x) = a - b.
        rw!("sub-shared-right"; "(- (+ ?a ?x) (+ ?b ?x))" => "(- ?a ?b)"),
    ]);

    // ---- divmod: floor/ceiling division and modulo by a divisor that is
    // never zero. For integer a and c != 0, (a*c + b)/c = a + b/c exactly,
    // and floor(a + t) = a + floor(t) for integer a (ceil likewise), so the
    // first identities hold for every b, negative or not, and for either
    // sign of c; `%` follows from x % c = x - c*(x // c). The left side is
    // evaluated with wrapping, so the rules also require that a*c + b does
    // not leave i64 anywhere on the domain.
    r.extend([
        // (a*c + b) // c = a + b // c.
        rw!("div-mul-add"; "(// (+ (* ?a ?c) ?b) ?c)" => "(+ ?a (// ?b ?c))"
            if nonzero("?c") if no_wrap_mul_add("?a", "?c", Some("?b"))),
        // (b + a*c) // c = b // c + a.
        rw!("div-add-mul"; "(// (+ ?b (* ?a ?c)) ?c)" => "(+ (// ?b ?c) ?a)"
            if nonzero("?c") if no_wrap_mul_add("?a", "?c", Some("?b"))),
        // (a*c) // c = a.
        rw!("div-mul"; "(// (* ?a ?c) ?c)" => "?a" if nonzero("?c") if no_wrap_mul_add("?a", "?c", None)),
        // (a*c + b) //^ c = a + b //^ c.
        rw!("ceildiv-mul-add"; "(//^ (+ (* ?a ?c) ?b) ?c)" => "(+ ?a (//^ ?b ?c))"
            if nonzero("?c") if no_wrap_mul_add("?a", "?c", Some("?b"))),
        // (a*c) //^ c = a.
        rw!("ceildiv-mul"; "(//^ (* ?a ?c) ?c)" => "?a" if nonzero("?c") if no_wrap_mul_add("?a", "?c", None)),
        // (a*c + b) % c = b % c.
        rw!("mod-mul-add"; "(% (+ (* ?a ?c) ?b) ?c)" => "(% ?b ?c)"
            if nonzero("?c") if no_wrap_mul_add("?a", "?c", Some("?b"))),
        // (b + a*c) % c = b % c.
        rw!("mod-add-mul"; "(% (+ ?b (* ?a ?c)) ?c)" => "(% ?b ?c)"
            if nonzero("?c") if no_wrap_mul_add("?a", "?c", Some("?b"))),
        // (a*c) % c = 0 (needs no wrap: a wrapped product is not a multiple
        // of c in general).
        rw!("mod-mul"; "(% (* ?a ?c) ?c)" => "0" if nonzero("?c") if no_wrap_mul_add("?a", "?c", None)),
        // x % c = x when 0 <= x < c (or c < x <= 0): the definition of
        // floor modulo with quotient 0.
        rw!("mod-small"; "(% ?x ?c)" => "?x" if mod_is_identity),
        // (x // a) // b = x // (a*b) for a, b > 0: floor(floor(x/a)/b) =
        // floor(x/(ab)) for positive divisors (the product must fit).
        rw!("div-div"; "(// (// ?x ?a) ?b)" => "(// ?x (* ?a ?b))" if positive_product),
        // (x % a) % b = x % b when b divides a (a, b > 0): x % a differs
        // from x by a multiple of a, hence of b.
        rw!("mod-mod"; "(% (% ?x ?a) ?b)" => "(% ?x ?b)" if positive_multiple),
    ]);

    // ---- flat: recombining the div/mod pairs that FLAT and its inverse
    // produce (space-to-depth, reshape). x == (x // c)*c + x % c for every
    // c != 0 (definition of floor modulo); in the wrapping ring this also
    // holds for MIN // -1, whose wrapped quotient times -1 is MIN again.
    r.extend([
        // (x // c)*c + x % c = x.
        rw!("flat-recombine"; "(+ (* (// ?x ?c) ?c) (% ?x ?c))" => "?x" if nonzero("?c")),
        // x % c + (x // c)*c = x.
        rw!("flat-recombine-rev"; "(+ (% ?x ?c) (* (// ?x ?c) ?c))" => "?x" if nonzero("?c")),
        // (y + (x // c)*c) + x % c = y + x (left-nested sums of offsets).
        rw!("flat-recombine-acc"; "(+ (+ ?y (* (// ?x ?c) ?c)) (% ?x ?c))" => "(+ ?y ?x)" if nonzero("?c")),
        // (x // c)*m + (x % c)*k = x*k when m = c*k: k times the identity
        // above (a row-major offset whose strides match the split).
        rw!("flat-scaled"; "(+ (* (// ?x ?c) ?m) (* (% ?x ?c) ?k))" => "(* ?x ?k)" if flat_scale),
        // (y + (x // c)*m) + (x % c)*k = y + x*k when m = c*k.
        rw!("flat-scaled-acc"; "(+ (+ ?y (* (// ?x ?c) ?m)) (* (% ?x ?c) ?k))" => "(+ ?y (* ?x ?k))" if flat_scale),
    ]);

    // ---- minmax: `min`/`max` whose operands' intervals are ordered pick
    // one side (the definition of min and max).
    r.extend([
        // min(a, b) = a when a <= b everywhere.
        rw!("min-left"; "(min ?a ?b)" => "?a" if le("?a", "?b")),
        // min(a, b) = b when b <= a everywhere.
        rw!("min-right"; "(min ?a ?b)" => "?b" if le("?b", "?a")),
        // max(a, b) = a when b <= a everywhere.
        rw!("max-left"; "(max ?a ?b)" => "?a" if le("?b", "?a")),
        // max(a, b) = b when a <= b everywhere.
        rw!("max-right"; "(max ?a ?b)" => "?b" if le("?a", "?b")),
    ]);

    r
}

#[cfg(test)]
mod tests {
    use super::super::analysis::Ranges;
    use super::*;
    use egg::{RecExpr, Runner};

    /// Are `a` and `b` in one e-class after running `rules` on both?
    fn equal_under(rules: &[Rule], ranges: &Ranges, a: &str, b: &str) -> bool {
        let a: RecExpr<IndexLang> = a.parse().unwrap();
        let b: RecExpr<IndexLang> = b.parse().unwrap();
        let mut runner: Runner<IndexLang, IntervalAnalysis> =
            Runner::new(IntervalAnalysis::new(ranges.clone())).with_iter_limit(10).with_node_limit(2_000).with_expr(&a).with_expr(&b).run(rules);
        let (ra, rb) = (runner.roots[0], runner.roots[1]);
        runner.egraph.rebuild();
        runner.egraph.find(ra) == runner.egraph.find(rb)
    }

    fn named(names: &[&str]) -> Vec<Rule> {
        let all = rules();
        for n in names {
            assert!(all.iter().any(|r| r.name.as_str() == *n), "no rule {n}");
        }
        all.into_iter().filter(|r| names.contains(&r.name.as_str())).collect()
    }

    /// The rule `name` (helped by `helpers`) proves `start == goal`, and
    /// the analysis with the helpers alone does not: the rule fires.
    fn fires_with(name: &str, helpers: &[&str], ranges: &Ranges, start: &str, goal: &str) {
        assert!(!equal_under(&named(helpers), ranges, start, goal), "{start} == {goal} without {name}");
        let mut with: Vec<&str> = helpers.to_vec();
        with.push(name);
        assert!(equal_under(&named(&with), ranges, start, goal), "{name} did not prove {start} == {goal}");
    }

    fn fires(name: &str, ranges: &Ranges, start: &str, goal: &str) {
        fires_with(name, &[], ranges, start, goal)
    }

    /// The rule `name` must not rewrite `start` to `goal` (its condition
    /// fails on this domain).
    fn blocked(name: &str, ranges: &Ranges, start: &str, goal: &str) {
        assert!(!equal_under(&named(&[name]), ranges, start, goal), "{name} wrongly proved {start} == {goal}");
    }

    fn free() -> Ranges {
        Ranges::new()
    }

    #[test]
    fn every_rule_name_is_unique() {
        let all = rules();
        let mut names: Vec<_> = all.iter().map(|r| r.name.as_str().to_string()).collect();
        names.sort();
        names.dedup();
        assert_eq!(names.len(), all.len());
    }

    #[test]
    fn identity_rules() {
        fires("add-zero", &free(), "(+ v0 0)", "v0");
        fires("sub-zero", &free(), "(- v0 0)", "v0");
        fires("sub-self", &free(), "(- (* v0 v1) (* v0 v1))", "0");
        fires("mul-one", &free(), "(* v0 1)", "v0");
        fires("div-one", &free(), "(// v0 1)", "v0");
        fires("ceildiv-one", &free(), "(//^ v0 1)", "v0");
        fires("min-self", &free(), "(min v0 v0)", "v0");
        fires("max-self", &free(), "(max v1 v1)", "v1");
    }

    #[test]
    fn analysis_folds_constants_and_interval_facts() {
        let r = Ranges::new().with(0, 0, 3).with(1, -100, 100);
        for (start, goal) in [
            ("(+ 2 (* 3 4))", "14"),
            ("(// 7 0)", "0"),
            ("(- -7 (% 7 -2))", "-6"),
            ("(* v1 0)", "0"),
            ("(% v1 1)", "0"),
            ("(// v0 4)", "0"),
            ("(% (// v1 8) 1)", "0"),
            ("(// (% v1 5) 5)", "0"),
            ("(//^ (- v0 3) 4)", "0"),
        ] {
            assert!(equal_under(&[], &r, start, goal), "{start} != {goal}");
        }
        // Not a single value: no fold.
        assert!(!equal_under(&[], &r, "(// v0 2)", "0"));
    }

    #[test]
    fn canon_rules() {
        fires("add-const-right", &free(), "(+ 3 v0)", "(+ v0 3)");
        fires("mul-const-right", &free(), "(* 3 v0)", "(* v0 3)");
        fires("sub-const-to-add", &free(), "(- v0 3)", "(+ v0 -3)");
        // Two constants: left to the analysis, the rule does not apply.
        blocked("add-const-right", &free(), "(+ 3 v0)", "(+ 4 v0)");
    }

    #[test]
    fn reassoc_rules() {
        fires("add-const-const", &free(), "(+ (+ v0 3) 4)", "(+ v0 7)");
        fires("mul-const-const", &free(), "(* (* v0 3) 4)", "(* v0 12)");
        fires("add-sub-cancel-right", &free(), "(- (+ v0 v1) v1)", "v0");
        fires("add-sub-cancel-left", &free(), "(- (+ v0 v1) v0)", "v1");
        fires("sub-add-cancel", &free(), "(+ (- v0 v1) v1)", "v0");
        fires("sub-shared-left", &free(), "(- (+ v0 v1) (+ v0 3))", "(- v1 3)");
        fires("sub-shared-right", &free(), "(- (+ v1 v0) (+ 3 v0))", "(- v1 3)");
        // Wrapping does not matter for ring identities: cancellation at
        // the top of the range.
        fires("add-sub-cancel-right", &Ranges::new().with(0, i64::MAX - 1, i64::MAX).with(1, 1, 5), "(- (+ v0 v1) v1)", "v0");
    }

    #[test]
    fn divmod_rules() {
        let r = Ranges::new().with(0, -50, 50).with(1, -50, 50);
        fires("div-mul-add", &r, "(// (+ (* v0 4) v1) 4)", "(+ v0 (// v1 4))");
        fires("div-add-mul", &r, "(// (+ v1 (* v0 4)) 4)", "(+ (// v1 4) v0)");
        // Negative divisor: still floor((a*c+b)/c) = a + floor(b/c).
        fires("div-mul-add", &r, "(// (+ (* v0 -3) v1) -3)", "(+ v0 (// v1 -3))");
        fires("div-mul", &r, "(// (* v0 7) 7)", "v0");
        fires("ceildiv-mul-add", &r, "(//^ (+ (* v0 4) v1) 4)", "(+ v0 (//^ v1 4))");
        fires("ceildiv-mul", &r, "(//^ (* v0 -7) -7)", "v0");
        fires("mod-mul-add", &r, "(% (+ (* v0 4) v1) 4)", "(% v1 4)");
        fires("mod-add-mul", &r, "(% (+ v1 (* v0 4)) 4)", "(% v1 4)");
        fires("mod-mul", &r, "(% (* v0 6) 6)", "0");
        let small = Ranges::new().with(0, 0, 3).with(1, -3, 0).with(2, 4, 9);
        fires("mod-small", &small, "(% v0 4)", "v0");
        fires("mod-small", &small, "(% v1 -4)", "v1");
        fires("mod-small", &small, "(% v0 v2)", "v0");
        fires("div-div", &r, "(// (// v0 2) 3)", "(// v0 6)");
        fires("mod-mod", &r, "(% (% v0 12) 4)", "(% v0 4)");
        // A symbolic divisor that is never zero.
        fires("div-mul-add", &small, "(// (+ (* v0 v2) v1) v2)", "(+ v0 (// v1 v2))");
    }

    #[test]
    fn divmod_conditions_block_unsound_rewrites() {
        // Divisor may be 0: (a*0 + b) // 0 = 0 but a + b // 0 = a.
        let r = Ranges::new().with(0, -5, 5).with(1, -5, 5).with(2, 0, 3);
        blocked("div-mul-add", &r, "(// (+ (* v0 v2) v1) v2)", "(+ v0 (// v1 v2))");
        blocked("mod-mul", &r, "(% (* v0 v2) v2)", "0");
        blocked("flat-recombine", &r, "(+ (* (// v0 v2) v2) (% v0 v2))", "v0");
        // a*c may wrap: (a*3) % 3 is not 0 for a = 2^62.
        let big = Ranges::new().with(0, 0, 1 << 62);
        blocked("mod-mul", &big, "(% (* v0 3) 3)", "0");
        blocked("div-mul", &big, "(// (* v0 3) 3)", "v0");
        // Also when the wrapping product is a constant the analysis folds.
        let point = Ranges::new().with(0, 1 << 62, 1 << 62);
        blocked("mod-mul", &point, "(% (* v0 3) 3)", "0");
        blocked("div-mul-add", &point, "(// (+ (* v0 3) 1) 3)", "(+ v0 (// 1 3))");
        // x reaches c: x % c is not x.
        blocked("mod-small", &Ranges::new().with(0, 0, 4), "(% v0 4)", "v0");
        // b does not divide a; negative divisors for div-div.
        blocked("mod-mod", &r, "(% (% v0 10) 4)", "(% v0 4)");
        blocked("div-div", &r, "(// (// v0 -2) 3)", "(// v0 -6)");
    }

    #[test]
    fn flat_rules() {
        let r = Ranges::new().with(0, 0, 100).with(1, 0, 9);
        fires("flat-recombine", &r, "(+ (* (// v0 4) 4) (% v0 4))", "v0");
        fires("flat-recombine-rev", &r, "(+ (% v0 4) (* (// v0 4) 4))", "v0");
        fires("flat-recombine-acc", &r, "(+ (+ v1 (* (// v0 4) 4)) (% v0 4))", "(+ v1 v0)");
        fires("flat-scaled", &r, "(+ (* (// v0 2) 6) (* (% v0 2) 3))", "(* v0 3)");
        fires("flat-scaled-acc", &r, "(+ (+ v1 (* (// v0 2) 6)) (* (% v0 2) 3))", "(+ v1 (* v0 3))");
        // Negative v0 and divisor: the identity is the definition of floor
        // modulo, so the rule still applies.
        let neg = Ranges::new().with(0, -100, 100);
        fires("flat-recombine", &neg, "(+ (* (// v0 -3) -3) (% v0 -3))", "v0");
        // Strides that do not match the split.
        blocked("flat-scaled", &r, "(+ (* (// v0 2) 5) (* (% v0 2) 3))", "(* v0 3)");
    }

    #[test]
    fn minmax_rules() {
        let r = Ranges::new().with(0, 0, 3).with(1, 3, 9);
        fires("min-left", &r, "(min v0 v1)", "v0");
        fires("min-right", &r, "(min v1 v0)", "v0");
        fires("max-left", &r, "(max v1 v0)", "v1");
        fires("max-right", &r, "(max v0 v1)", "v1");
        let overlap = Ranges::new().with(0, 0, 4).with(1, 3, 9);
        blocked("min-left", &overlap, "(min v0 v1)", "v0");
        blocked("max-right", &overlap, "(max v0 v1)", "v1");
    }
}
