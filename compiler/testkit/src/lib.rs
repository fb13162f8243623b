//! What the test suites of every crate share (a dev-dependency only): the
//! example programs of `docs/examples`, comparisons of tensors within a
//! stated tolerance, and the random-program generator ([`programs`]). One
//! copy, so every suite means the same thing by "the examples", by
//! "close" and by "a random program".

pub mod programs;

use eintup_tensor::tensor::{Data, Tensor};
use std::path::{Path, PathBuf};

/// How many cases a property test runs: `PROPTEST_CASES` when set, else
/// `default` (sized for `scripts/test`'s time budget), ten times it under
/// `scripts/test --long` (`EINTUP_TEST_LONG=1`, docs/testing.md).
pub fn cases(default: u32) -> u32 {
    if let Some(n) = std::env::var("PROPTEST_CASES").ok().and_then(|s| s.parse().ok()) {
        return n;
    }
    if std::env::var_os("EINTUP_TEST_LONG").is_some_and(|v| v == "1") {
        default.saturating_mul(10)
    } else {
        default
    }
}

/// The repository's root.
pub fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// Every example program (`docs/examples/*.et`), sorted by name.
pub fn examples() -> Vec<PathBuf> {
    let dir = root().join("docs/examples");
    let mut v: Vec<PathBuf> = std::fs::read_dir(&dir)
        .unwrap_or_else(|e| panic!("{}: {e}", dir.display()))
        .map(|e| e.expect("directory entry").path())
        .filter(|p| p.extension().is_some_and(|e| e == "et"))
        .collect();
    v.sort();
    assert!(v.len() >= 10, "expected the examples in {}", dir.display());
    v
}

/// One example program by file name (`"matmul.et"`).
pub fn example(name: &str) -> PathBuf {
    root().join("docs/examples").join(name)
}

/// How far apart two float values may be: `|x - y| <= abs + rel * max(|x|, |y|)`.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Tol {
    pub rel: f64,
    pub abs: f64,
}

impl Tol {
    /// Relative only: exact agreement required at zero.
    pub const fn rel(rel: f64) -> Tol {
        Tol { rel, abs: 0.0 }
    }

    /// Exact agreement.
    pub const EXACT: Tol = Tol::rel(0.0);
}

/// Whether `x` and `y` agree within `tol` (equal values and two NaNs
/// always agree).
pub fn close(x: f64, y: f64, tol: Tol) -> bool {
    x == y || (x.is_nan() && y.is_nan()) || (x - y).abs() <= tol.abs + tol.rel * x.abs().max(y.abs())
}

/// Asserts elementwise [`close`]; `what` names the comparison in failures.
pub fn assert_close(what: &str, got: &[f64], want: &[f64], tol: Tol) {
    assert_eq!(got.len(), want.len(), "{what}: length");
    for (i, (&g, &w)) in got.iter().zip(want).enumerate() {
        assert!(close(g, w, tol), "{what}[{i}]: got {g}, want {w} ({tol:?})");
    }
}

/// Asserts that two tensors agree: same shape and element type, i32
/// values equal, float values [`close`] within `tol`.
pub fn assert_tensors_close(what: &str, got: &Tensor, want: &Tensor, tol: Tol) {
    assert_eq!(got.shape, want.shape, "{what}: shape");
    match (&got.data, &want.data) {
        (Data::I32(a), Data::I32(b)) => assert_eq!(a, b, "{what}: INT values"),
        (Data::F64(_), Data::F64(_)) | (Data::F32(_), Data::F32(_)) => assert_close(what, &got.to_f64_vec(), &want.to_f64_vec(), tol),
        _ => panic!("{what}: element types differ: got {}, want {}", got.dtype(), want.dtype()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn close_is_relative_plus_absolute_and_matches_nan() {
        assert!(close(1.0, 1.0 + 1e-13, Tol::rel(1e-12)));
        assert!(!close(1.0, 1.0 + 1e-11, Tol::rel(1e-12)));
        assert!(close(f64::NAN, f64::NAN, Tol::EXACT));
        assert!(!close(f64::NAN, 1.0, Tol::rel(1.0)));
        assert!(!close(0.0, 1e-300, Tol::rel(1e-12)));
        assert!(close(0.0, 1e-300, Tol { rel: 0.0, abs: 1e-299 }));
        assert!(close(0.0, 0.0, Tol::EXACT));
    }

    #[test]
    fn examples_are_found() {
        assert!(examples().iter().any(|p| p.ends_with("matmul.et")));
        assert!(example("matmul.et").exists());
    }
}
