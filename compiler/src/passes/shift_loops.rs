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
            if let Some(e) = common_offset(&f.lo, &f.hi) {
                let (lo, hi) = (f.lo.linear().constant, f.hi.linear().constant);
                let at = IExpr::add(IExpr::v(f.var), e);
                for_each_expr_mut(&mut f.body, &mut |x| *x = x.substitute(f.var, &at));
                f.lo = IExpr::c(lo);
                f.hi = IExpr::c(hi);
                n += 1;
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

/// `e` when `lo = c1 + e` and `hi = c2 + e` for constants `c1`, `c2` and
/// one non-constant `e` (compared as linear forms).
fn common_offset(lo: &IExpr, hi: &IExpr) -> Option<IExpr> {
    let (a, b) = (lo.linear(), hi.linear());
    let same = a.terms.len() == b.terms.len() && a.terms.iter().all(|(atom, c)| b.coef(atom) == *c);
    (same && !a.terms.is_empty()).then(|| Linear { constant: 0, terms: a.terms }.to_expr())
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
