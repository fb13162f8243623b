//! `shift-loops` (GPU): a loop whose bounds move with outer variables by
//! the same amount, `for v in [c1 + e, c2 + e)`, becomes `for v in [c1,
//! c2)` with `v + e` in its body.
//!
//! `tighten-bounds` gives convolutions such loops (`for ipos in [opos,
//! opos + 3)`: range inference over the filter footprint). The iterations
//! and their order are the same, but afterwards the loop's bounds no longer
//! mention `opos`, so `register-tiles` may tile the output positions: only
//! the computation then depends on them.

use super::{Ir, NoOptions, PassError, Unit};
use crate::ir::loops::*;

pub fn run(unit: &mut Unit, _: &NoOptions) -> Result<Option<String>, PassError> {
    let Ir::Loop(m) = &mut unit.ir else { return Err(PassError::Internal("shift-loops runs on the loop level".into())) };
    let mut n = 0;
    for k in &mut m.kernels {
        n += shift(&mut k.body);
    }
    Ok(Some(format!("{n} loops shifted")))
}

/// Shifts every qualifying loop of `nodes`, outermost first; returns how
/// many.
pub fn shift(nodes: &mut [Node]) -> usize {
    let mut n = 0;
    for node in nodes {
        if let Node::For(f) = node {
            if let Some((e, lo, hi)) = common_offset(&f.lo, &f.hi) {
                let at = IExpr::add(IExpr::v(f.var), e);
                for_each_expr_mut(&mut f.body, &mut |x| *x = x.substitute(f.var, &at));
                f.lo = lo;
                f.hi = hi;
                n += 1;
            }
        }
        if let Node::Guard(g) = node {
            for c in &mut g.conds {
                if let Cond::InRange { e, lo, hi } = c {
                    if let Some((e2, l2, h2)) = common_move(e, lo, hi) {
                        (*e, *lo, *hi) = (e2, l2, h2);
                    }
                }
            }
        }
        n += match node {
            Node::For(f) => shift(&mut f.body),
            Node::Guard(g) => shift(&mut g.body),
            _ => 0,
        };
    }
    n
}

/// `(e, c1, c2)` when `lo = c1 + e` and `hi = c2 + e` for `c1`, `c2` free
/// of variables (constants, or in a dynamic kernel expressions of dim
/// symbols: a window `[o, o + %k.0)` gives `[0, %k.0)`) and one `e` that
/// uses a variable (compared as linear forms).
fn common_offset(lo: &IExpr, hi: &IExpr) -> Option<(IExpr, IExpr, IExpr)> {
    let ((a, c1), (b, c2)) = (split(lo), split(hi));
    (same(&a, &b) && !a.is_empty()).then(|| (Linear { constant: 0, terms: a }.to_expr(), c1, c2))
}

/// The condition `lo <= e < hi` with the same moving part taken off its
/// three sides (`opos <= opos < opos + %k.0`, the guard `drop-unused-loops`
/// left of a window loop, becomes `0 <= 0 < %k.0`, the guard of the
/// shifted loop running), when they share one.
fn common_move(e: &IExpr, lo: &IExpr, hi: &IExpr) -> Option<(IExpr, IExpr, IExpr)> {
    let ((a, e), (b, lo), (c, hi)) = (split(e), split(lo), split(hi));
    (same(&a, &b) && same(&a, &c) && !a.is_empty()).then_some((e, lo, hi))
}

/// An expression's linear terms that use a variable, and the rest.
fn split(e: &IExpr) -> (Vec<(IExpr, i64)>, IExpr) {
    let l = e.linear();
    let (moving, fixed): (Vec<_>, Vec<_>) = l.terms.into_iter().partition(|(atom, _)| atom.uses_any_var());
    (moving, Linear { constant: l.constant, terms: fixed }.to_expr())
}

fn same(a: &[(IExpr, i64)], b: &[(IExpr, i64)]) -> bool {
    a.len() == b.len() && a.iter().all(|(atom, c)| b.iter().any(|(x, d)| x == atom && d == c))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_window_loop_starts_at_zero_and_its_uses_move() {
        let m = parse::parse_verified(
            "buffer x : i32[10] input\nbuffer y : i32[8] output\n\nkernel @k {\n  for o in [0, 8) parallel {\n    for i in [(0 - (o * -1)), ((2 - (o * -1)) + 1)) reduce {\n      %0 = load x[i] : i32\n      accumulate y[o] += %0\n    }\n  }\n}\n",
        )
        .unwrap();
        let mut s = m.clone();
        assert_eq!(shift(&mut s.kernels[0].body), 1);
        verify::verify(&s).unwrap();
        let text = crate::ir::loops::print::module(&s);
        assert!(text.contains("for i in [0, 3) reduce"), "{text}");
        assert!(text.contains("load x[(i + o)]"), "{text}");
        // Same sums: y[o] = x[o] + x[o+1] + x[o+2].
        let x: Vec<i32> = (0..10).map(|i| i * i).collect();
        let run = |m: &LoopModule| {
            let mut b = vec![
                crate::tensor::Tensor::new(vec![10], crate::tensor::Data::I32(x.clone())).unwrap(),
                crate::tensor::Tensor::zeros(DType::I32, &[8]).unwrap(),
            ];
            crate::interp::loops::run(m, 0, &mut b).unwrap();
            b.swap_remove(1)
        };
        let want: Vec<i32> = (0..8).map(|o| x[o] + x[o + 1] + x[o + 2]).collect();
        assert_eq!(run(&s).data, crate::tensor::Data::I32(want));
        assert_eq!(run(&s), run(&m));
    }

    #[test]
    fn a_dynamic_window_ends_at_its_symbol_and_its_guard_moves_too() {
        let text = "dim %n.0\ndim %k.0\nbuffer x : i32[%n.0] input\nbuffer y : i32[((%n.0 - %k.0) + 1)] output\n\nkernel @k {\n  for o in [0, ((%n.0 - %k.0) + 1)) parallel {\n    guard o <= o < (o + %k.0) {\n      %0 = const 0 : i32\n      store y[o] = %0\n    }\n    for i in [o, (o + %k.0)) reduce {\n      %0 = load x[i] : i32\n      accumulate y[o] += %0\n    }\n  }\n}\n";
        let mut m = parse::parse_verified(text).unwrap();
        assert_eq!(shift(&mut m.kernels[0].body), 1);
        verify::verify(&m).unwrap();
        let text = crate::ir::loops::print::module(&m);
        assert!(text.contains("guard 0 <= 0 < %k.0 {"), "{text}");
        assert!(text.contains("for i in [0, %k.0) reduce"), "{text}");
        assert!(text.contains("load x[(i + o)]"), "{text}");
    }

    #[test]
    fn bounds_that_move_differently_stay() {
        for (lo, hi) in [("o", "(o * 2)"), ("0", "(o + 1)"), ("0", "3")] {
            let text = format!(
                "buffer x : i32[30] input\nbuffer y : i32[8] output\n\nkernel @k {{\n  for o in [0, 8) parallel {{\n    for i in [{lo}, {hi}) reduce {{\n      %0 = load x[i] : i32\n      accumulate y[o] += %0\n    }}\n  }}\n}}\n"
            );
            let mut m = parse::parse_verified(&text).unwrap();
            assert_eq!(shift(&mut m.kernels[0].body), 0, "[{lo}, {hi})");
        }
    }
}
