//! `eintup check`: run every configuration of a program and compare its
//! outputs with the framework call written in the file (docs/architecture.md section 5,
//! docs/check.md).
//!
//! A `.et` file chose the call and files are shared, so the call is vetted
//! by [`policy`] before any Python starts. The framework then runs in a
//! Python process driven through [`bridge`], confined as [`sandbox`]
//! describes; [`compare`] and [`outcome`] turn its results into verdicts.
//! This module also fixes the comparison tolerances so that every part of
//! `check` (and its documentation) uses the same numbers.

pub mod bridge;
pub mod compare;
pub mod limits;
pub mod outcome;
pub mod policy;
pub mod sandbox;
pub mod scratch;

/// Relative tolerance for FLOAT outputs. The framework sums in a different
/// order than the interpreter, so bit equality is not expected; 1e-6 is the
/// contract of docs/architecture.md section 5 and leaves room for f32 runs as well.
pub const FLOAT_RTOL: f64 = 1e-6;

/// Absolute tolerance for FLOAT outputs computed in f64. Needed where the exact
/// result is 0 but both sides carry round-off from cancelling sums (a relative
/// bound is then meaningless); 1e-9 is far above f64 round-off of the value
/// ranges RANDOM produces and far below any real discrepancy.
pub const FLOAT_ATOL_F64: f64 = 1e-9;

/// Relative tolerance for FLOAT outputs under `--float f32`: both sides
/// then compute in f32 (unit round-off 6e-8) and sum in different orders,
/// so a sum of n terms may differ by up to about n ulps. The examples at
/// `--reps 3` differ by at most 2.3e-7 (measured); 1e-5 (about 170 ulps)
/// leaves room for sums of a few hundred terms and is still far below any
/// real discrepancy.
pub const FLOAT_RTOL_F32: f64 = 1e-5;

/// Absolute tolerance for FLOAT outputs under `--float f32`, for results
/// near 0 from cancelling sums: the relative tolerance at values of order 1.
pub const FLOAT_ATOL_F32: f64 = 1e-5;

/// How close a FLOAT output must be to the framework's:
/// `|ours - theirs| <= atol + rtol * |theirs|`, element-wise. INT outputs
/// are compared exactly whatever the tolerance.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Tolerance {
    pub rtol: f64,
    pub atol: f64,
}

impl Tolerance {
    /// The defaults for FLOAT computed at `float`'s width (`--rtol` and
    /// `--atol` override either).
    pub fn default_for(float: crate::ir::loops::FloatWidth) -> Tolerance {
        match float {
            crate::ir::loops::FloatWidth::F64 => Tolerance { rtol: FLOAT_RTOL, atol: FLOAT_ATOL_F64 },
            crate::ir::loops::FloatWidth::F32 => Tolerance { rtol: FLOAT_RTOL_F32, atol: FLOAT_ATOL_F32 },
        }
    }
}

impl Default for Tolerance {
    fn default() -> Tolerance {
        Tolerance { rtol: FLOAT_RTOL, atol: FLOAT_ATOL_F64 }
    }
}

/// An empty scratch folder unique to this test process and name (for the
/// tests of the submodules).
#[cfg(test)]
pub(crate) fn scratch_dir(name: &str) -> std::path::PathBuf {
    let d = std::env::temp_dir().join(format!("eintup-check-{}-{name}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).unwrap();
    d
}
