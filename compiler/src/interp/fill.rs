//! The inputs compiled backends start from (`initial_arrays`), drawn
//! without the interpreter's per-cell work: a statement that draws every
//! cell of its array once, `a[i, j] = RANDOM(lo, hi, T)` with the loop
//! variables as the left indices in order, fills the array by flat
//! position, on every core.
//!
//! The value at a cell depends only on its flat position (the `Stream` is
//! counter-based), so the cells may be drawn in any order and by any
//! thread: the array is the one `Exec::level` would write, bit for bit
//! (the same `draw` and the same conversion to the cell's type). The
//! general path enumerates the box, evaluates the left access and the
//! right-hand side's op list per cell, and costs ~50 ns a cell, which made
//! the three 1024^2 inputs of `bench/ops/chain3.et` slower than its two
//! matrix products. `interp::run` never takes this path, so every
//! backend's differential test against the interpreter checks it.

use super::plan::{CheckKind, IExpr, ROp, StmtPlan};
use super::{draw, Exec};
use crate::tensor::Data;

/// Fewer cells than this are drawn on the calling thread: starting a
/// thread costs tens of microseconds.
const MIN_SPLIT_CELLS: usize = 1 << 16;

impl Exec<'_, '_> {
    /// Fills the target when the statement is such a draw (module doc);
    /// false leaves it untouched for the general path.
    pub(super) fn fill(&mut self) -> bool {
        let Some(r) = random_fill(self.p) else { return false };
        if self.p.extents.iter().try_fold(1usize, |n, &e| n.checked_mul(usize::try_from(e).ok()?)) != Some(self.target.len()) {
            return false;
        }
        // The bounds: constant ops, evaluated as the general path does.
        for i in 0..r {
            self.vals[i] = self.op(i, 0);
        }
        let ROp::Random { lo, hi, int } = self.p.ops[r] else { return false };
        let (lo, hi, stream, f32) = (self.vals[lo], self.vals[hi], self.stream, self.f32);
        let at = move |cell: usize| draw(stream, cell as i64, lo, hi, int, f32);
        match &mut self.target.data {
            Data::I32(d) => par_fill(d, |c| at(c).as_i32()),
            Data::F64(d) => par_fill(d, |c| at(c).as_f64()),
            Data::F32(d) => par_fill(d, |c| at(c).as_f64() as f32),
        }
        true
    }
}

/// The index of the RANDOM op when `p` is `a[i, j, ..] = RANDOM(..)` with
/// constant bounds, its left indices the box's variables in order over the
/// whole array (row-major strides, dims the box's extents), reading no
/// array: the cell of the box point `cur` is then its row-major position.
fn random_fill(p: &StmtPlan) -> Option<usize> {
    if p.op != et_grammar::ast::AssignOp::Assign || p.reads_self || p.checks.len() != 1 || p.result + 1 != p.ops.len() {
        return None;
    }
    let CheckKind::Access(a) = &p.checks[0].kind else { return None };
    if a.array != p.array {
        return None;
    }
    let (mut dims, mut strides) = (Vec::new(), Vec::new());
    for s in &a.slots {
        let IExpr::Var { off, rank } = s.expr else { return None };
        if off != dims.len() || rank != s.dims.len() || rank != s.strides.len() {
            return None;
        }
        dims.extend_from_slice(&s.dims);
        strides.extend_from_slice(&s.strides);
    }
    let mut stride = 1i64;
    for (&d, &st) in dims.iter().zip(&strides).rev() {
        if st != stride {
            return None;
        }
        stride = stride.checked_mul(d)?;
    }
    let constant = |op: &ROp| matches!(op, ROp::Int(_) | ROp::Float(_) | ROp::Neg(_) | ROp::Bin(..));
    let ok = dims == p.extents && matches!(p.ops[p.result], ROp::Random { .. }) && p.ops[..p.result].iter().all(constant);
    ok.then_some(p.result)
}

/// `d[c] = f(c)` for every cell, in contiguous slices on every core.
fn par_fill<T: Send>(d: &mut [T], f: impl Fn(usize) -> T + Sync) {
    let threads = std::thread::available_parallelism().map_or(1, |n| n.get());
    if threads < 2 || d.len() < MIN_SPLIT_CELLS {
        d.iter_mut().enumerate().for_each(|(c, x)| *x = f(c));
        return;
    }
    let chunk = d.len().div_ceil(threads);
    std::thread::scope(|s| {
        for (i, part) in d.chunks_mut(chunk).enumerate() {
            let f = &f;
            s.spawn(move || part.iter_mut().enumerate().for_each(|(c, x)| *x = f(i * chunk + c)));
        }
    });
}

#[cfg(test)]
mod tests {
    use crate::driver::Source;
    use crate::interp::{initial_arrays, run_statements, RunOptions};
    use crate::ir::loops::FloatWidth;
    use crate::pipeline::specialized_module;

    /// Inputs drawn by the fill equal the general path's, for
    /// every element type, bounds given as expressions, sizes on both
    /// sides of the thread threshold, and an empty array; a draw that is
    /// not a fill (a sum over another axis) too.
    #[test]
    fn fills_equal_the_reference_draws() {
        let src = "a[i,j] = RANDOM(-1, 2.5 * 2, FLOAT)\nb[i] = RANDOM(-3, 7, INT)\nc[i,k] = RANDOM(0, 1, FLOAT)\nd[j] = RANDOM(0, 9, INT)\nd[j] = d[j] + b[i]\nz[k,j] = RANDOM(0, 1, FLOAT)\nz, d\n";
        for (i, j, k) in [(3, 5, 0), (300, 257, 2)] {
            for float in [FloatWidth::F64, FloatWidth::F32] {
                let binds = [format!("i=[{i}]"), format!("j=[{j}]"), format!("k=[{k}]")];
                let (m, _) = specialized_module(&Source::from_string("fill.et", src), &binds, 0).unwrap();
                let opts = RunOptions { seed: 7, float, ..RunOptions::default() };
                let fast = initial_arrays(&m, &opts).unwrap();
                let reference = run_statements(&m, &opts, true, false).unwrap();
                assert_eq!(fast, reference, "{i}x{j}x{k} {float:?}");
            }
        }
    }
}
