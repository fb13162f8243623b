//! What the test suites of every crate share (a dev-dependency only): the
//! example programs of `docs/examples` and comparisons of tensors within a
//! stated tolerance. One copy, so every suite means the same thing by
//! "the examples" and by "close".

use eintup_runtime::tensor::{Data, Tensor};
use std::path::{Path, PathBuf};

/// The repository's root.
pub fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("..")
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

/// Whether `x` and `y` agree within the relative tolerance `rtol` (equal
/// values, both NaN, or |x - y| <= rtol * max(|x|, |y|)).
pub fn close(x: f64, y: f64, rtol: f64) -> bool {
    x == y || (x.is_nan() && y.is_nan()) || (x - y).abs() <= rtol * x.abs().max(y.abs())
}

/// Asserts elementwise [`close`]; `what` names the comparison in failures.
pub fn assert_close(what: &str, got: &[f64], want: &[f64], rtol: f64) {
    assert_eq!(got.len(), want.len(), "{what}: length");
    for (i, (&g, &w)) in got.iter().zip(want).enumerate() {
        assert!(close(g, w, rtol), "{what}[{i}]: got {g}, want {w} (rtol {rtol})");
    }
}

/// Asserts that two tensors agree: same shape and element type, i32
/// values equal, float values [`close`] within `rtol`.
pub fn assert_tensors_close(what: &str, got: &Tensor, want: &Tensor, rtol: f64) {
    assert_eq!(got.shape, want.shape, "{what}: shape");
    match (&got.data, &want.data) {
        (Data::I32(a), Data::I32(b)) => assert_eq!(a, b, "{what}: INT values"),
        (Data::F64(_), Data::F64(_)) | (Data::F32(_), Data::F32(_)) => assert_close(what, &got.to_f64_vec(), &want.to_f64_vec(), rtol),
        _ => panic!("{what}: element types differ: got {}, want {}", got.dtype(), want.dtype()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn close_is_relative_and_matches_nan() {
        assert!(close(1.0, 1.0 + 1e-13, 1e-12));
        assert!(!close(1.0, 1.0 + 1e-11, 1e-12));
        assert!(close(f64::NAN, f64::NAN, 0.0));
        assert!(!close(0.0, 1e-300, 1e-12));
        assert!(close(0.0, 0.0, 0.0));
    }

    #[test]
    fn examples_are_found() {
        assert!(examples().iter().any(|p| p.ends_with("matmul.et")));
        assert!(example("matmul.et").exists());
    }
}
