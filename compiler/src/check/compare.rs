//! Comparing an array computed by eintup with the framework's result:
//! shapes must match exactly, INT values exactly, FLOAT values within
//! `|a - b| <= atol + rtol * |b|` (docs/check.md explains the choice); and
//! how far apart they are at most, for `check --json`.

use super::Tolerance;
use crate::tensor::{Data, Tensor};

/// The first difference found, ready to print under the table.
#[derive(Clone, Debug, PartialEq)]
pub enum Mismatch {
    Shape { ours: Vec<usize>, theirs: Vec<usize> },
    Value { index: Vec<usize>, ours: String, theirs: String },
}

impl std::fmt::Display for Mismatch {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Mismatch::Shape { ours, theirs } => write!(f, "shape {ours:?} differs from the framework's {theirs:?}"),
            Mismatch::Value { index, ours, theirs } => {
                write!(f, "first difference at index {index:?}: eintup {ours}, framework {theirs}")
            }
        }
    }
}

/// The largest differences between two arrays of one shape, element-wise:
/// `abs` = max `|ours - theirs|`, `rel` = max `|ours - theirs| / |theirs|`
/// (where `theirs` is 0, any difference is infinitely relative). Two NaNs
/// or two equal infinities differ by 0; a NaN or infinity on one side only
/// differs infinitely.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Deviation {
    pub abs: f64,
    pub rel: f64,
}

/// `None` when `ours` matches `theirs` within `tol`.
pub fn compare(ours: &Tensor, theirs: &Tensor, tol: Tolerance) -> Option<Mismatch> {
    if ours.shape != theirs.shape {
        return Some(Mismatch::Shape { ours: ours.shape.clone(), theirs: theirs.shape.clone() });
    }
    let exact = is_int(ours) && is_int(theirs);
    let (a, b) = (ours.to_f64_vec(), theirs.to_f64_vec());
    let bad = a.iter().zip(&b).position(|(&x, &y)| {
        if exact {
            x != y
        } else {
            // NaN equals NaN here: both computed the same undefined value.
            !((x.is_nan() && y.is_nan()) || x == y || (x - y).abs() <= tol.atol + tol.rtol * y.abs())
        }
    })?;
    Some(Mismatch::Value { index: unravel(bad, &ours.shape), ours: fmt_value(a[bad], exact), theirs: fmt_value(b[bad], exact) })
}

/// How far apart two arrays of the same shape are (`None` when the shapes
/// differ).
pub fn deviation(ours: &Tensor, theirs: &Tensor) -> Option<Deviation> {
    if ours.shape != theirs.shape {
        return None;
    }
    let mut d = Deviation { abs: 0.0, rel: 0.0 };
    for (x, y) in ours.to_f64_vec().into_iter().zip(theirs.to_f64_vec()) {
        if x == y || (x.is_nan() && y.is_nan()) {
            continue;
        }
        let diff = (x - y).abs();
        let diff = if diff.is_nan() { f64::INFINITY } else { diff };
        d.abs = d.abs.max(diff);
        d.rel = d.rel.max(if y == 0.0 { f64::INFINITY } else { diff / y.abs() });
    }
    Some(d)
}

fn is_int(t: &Tensor) -> bool {
    matches!(t.data, Data::I32(_))
}

fn fmt_value(x: f64, exact: bool) -> String {
    if exact {
        format!("{}", x as i64)
    } else {
        format!("{x:?}")
    }
}

/// Row-major multi-index of flat position `n`.
fn unravel(mut n: usize, shape: &[usize]) -> Vec<usize> {
    let mut idx = vec![0; shape.len()];
    for k in (0..shape.len()).rev() {
        let d = shape[k].max(1);
        idx[k] = n % d;
        n /= d;
    }
    idx
}

#[cfg(test)]
mod tests {
    use super::*;

    const TOL: Tolerance = Tolerance { rtol: super::super::FLOAT_RTOL, atol: super::super::FLOAT_ATOL_F64 };

    fn compare(ours: &Tensor, theirs: &Tensor) -> Option<Mismatch> {
        super::compare(ours, theirs, TOL)
    }

    fn f(shape: &[usize], v: &[f64]) -> Tensor {
        Tensor { shape: shape.to_vec(), data: Data::F64(v.to_vec()) }
    }
    fn i(shape: &[usize], v: &[i32]) -> Tensor {
        Tensor { shape: shape.to_vec(), data: Data::I32(v.to_vec()) }
    }

    #[test]
    fn equal_arrays_match() {
        assert_eq!(compare(&f(&[2], &[1.0, 2.0]), &f(&[2], &[1.0, 2.0])), None);
        assert_eq!(compare(&i(&[0, 3], &[]), &i(&[0, 3], &[])), None);
    }

    #[test]
    fn float_tolerance_is_relative() {
        // 1e6 * (1 + 5e-7) is within rtol 1e-6; 1 + 1e-5 is not.
        assert_eq!(compare(&f(&[1], &[1e6 * (1.0 + 5e-7)]), &f(&[1], &[1e6])), None);
        assert!(compare(&f(&[1], &[1.0 + 1e-5]), &f(&[1], &[1.0])).is_some());
    }

    #[test]
    fn ints_compare_exactly_and_report_the_index() {
        let m = compare(&i(&[2, 2], &[1, 2, 3, 4]), &i(&[2, 2], &[1, 2, 3, 5]));
        assert_eq!(m, Some(Mismatch::Value { index: vec![1, 1], ours: "4".into(), theirs: "5".into() }));
    }

    #[test]
    fn shape_difference_is_reported_before_values() {
        assert!(matches!(compare(&f(&[2], &[0.0, 0.0]), &f(&[1, 2], &[0.0, 0.0])), Some(Mismatch::Shape { .. })));
    }

    #[test]
    fn tolerances_are_the_callers() {
        // 1 + 1e-5 against 1: a mismatch at rtol 1e-6, equal at rtol 1e-4
        // or at atol 1e-4.
        let (a, b) = (f(&[1], &[1.0 + 1e-5]), f(&[1], &[1.0]));
        assert!(super::compare(&a, &b, Tolerance { rtol: 1e-6, atol: 0.0 }).is_some());
        assert!(super::compare(&a, &b, Tolerance { rtol: 1e-4, atol: 0.0 }).is_none());
        assert!(super::compare(&a, &b, Tolerance { rtol: 0.0, atol: 1e-4 }).is_none());
        // INT stays exact under any tolerance.
        assert!(super::compare(&i(&[1], &[3]), &i(&[1], &[4]), Tolerance { rtol: 1.0, atol: 10.0 }).is_some());
    }

    #[test]
    fn deviation_is_the_largest_difference() {
        let d = deviation(&f(&[3], &[1.0, 2.5, 10.0]), &f(&[3], &[1.0, 2.0, 8.0])).unwrap();
        assert_eq!(d, Deviation { abs: 2.0, rel: 0.25 });
        assert_eq!(deviation(&f(&[2], &[f64::NAN, 1.0]), &f(&[2], &[f64::NAN, 1.0])), Some(Deviation { abs: 0.0, rel: 0.0 }));
        let d = deviation(&f(&[2], &[f64::NAN, 1.0]), &f(&[2], &[0.0, 0.0])).unwrap();
        assert!(d.abs.is_infinite() && d.rel.is_infinite());
        assert_eq!(deviation(&f(&[2], &[0.0, 0.0]), &f(&[1, 2], &[0.0, 0.0])), None);
    }
}
