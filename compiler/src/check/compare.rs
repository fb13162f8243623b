//! Comparing an array computed by eintup with the framework's result:
//! shapes must match exactly, INT values exactly, FLOAT values within
//! `|a - b| <= atol + rtol * |b|` (docs/check.md explains the choice).

use super::{FLOAT_ATOL_F64, FLOAT_RTOL};
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

/// `None` when `ours` matches `theirs`.
pub fn compare(ours: &Tensor, theirs: &Tensor) -> Option<Mismatch> {
    if ours.shape != theirs.shape {
        return Some(Mismatch::Shape { ours: ours.shape.clone(), theirs: theirs.shape.clone() });
    }
    let exact = matches!(ours.data, Data::I32(_)) && matches!(theirs.data, Data::I32(_));
    let (a, b) = (ours.to_f64_vec(), theirs.to_f64_vec());
    let bad = a.iter().zip(&b).position(|(&x, &y)| {
        if exact {
            x != y
        } else {
            // NaN equals NaN here: both computed the same undefined value.
            !((x.is_nan() && y.is_nan()) || x == y || (x - y).abs() <= FLOAT_ATOL_F64 + FLOAT_RTOL * y.abs())
        }
    })?;
    Some(Mismatch::Value { index: unravel(bad, &ours.shape), ours: fmt_value(a[bad], exact), theirs: fmt_value(b[bad], exact) })
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
}
