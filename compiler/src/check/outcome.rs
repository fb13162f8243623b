//! What `check` concludes, per output, per configuration and overall.
//!
//! An output is *valid* when the framework's result equals eintup's within
//! the tolerances, *mismatched* when both sides produced comparable arrays
//! that differ, and a *framework error* when the framework produced nothing
//! comparable: it raised, returned too few results, a dtype eintup does not
//! compare (int64, bool, strings), a different shape, or its bridge died.
//! Only a mismatch says the program and the framework disagree; a framework
//! error on every configuration says the call itself is wrong. A
//! configuration eintup cannot run at all (it exceeds the memory or size
//! limits) is *skipped*: there is nothing to compare.

use super::compare::{compare, deviation, Deviation, Mismatch};
use super::Tolerance;
use crate::tensor::Tensor;
use std::path::Path;

/// The verdict on one output of one configuration.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Verdict {
    Valid,
    Mismatch,
    FrameworkError,
    Skipped,
}

impl Verdict {
    /// The word in the table's `Valid` column.
    pub fn word(self) -> &'static str {
        match self {
            Verdict::Valid => "True",
            Verdict::Mismatch => "False",
            Verdict::FrameworkError => "Error",
            Verdict::Skipped => "Skipped",
        }
    }

    /// The word in `check --json`.
    pub fn json_word(self) -> &'static str {
        match self {
            Verdict::Valid => "valid",
            Verdict::Mismatch => "mismatch",
            Verdict::FrameworkError => "framework error",
            Verdict::Skipped => "skipped",
        }
    }
}

/// What `check` concluded about one output of one configuration.
#[derive(Clone, Debug, PartialEq)]
pub struct OutputReport {
    pub verdict: Verdict,
    /// Why the output is not valid, as printed after `output `y`: `.
    pub reason: Option<String>,
    /// How far eintup's array is from the framework's, when both had one
    /// shape.
    pub deviation: Option<Deviation>,
    /// For a mismatch: the first element that differs.
    pub first_difference: Option<Mismatch>,
}

impl OutputReport {
    fn bare(verdict: Verdict, reason: Option<String>) -> OutputReport {
        OutputReport { verdict, reason, deviation: None, first_difference: None }
    }
}

/// One configuration: its dims, a report per output, and the reasons for
/// anything that is not valid (printed under the table).
#[derive(Clone, Debug, PartialEq)]
pub struct Row {
    pub dims: Vec<Vec<i64>>,
    pub outputs: Vec<OutputReport>,
    pub problems: Vec<String>,
}

impl Row {
    /// A row whose every output got `verdict` for one reason (the call
    /// failed, or eintup could not run the configuration).
    pub fn all(dims: Vec<Vec<i64>>, outputs: usize, verdict: Verdict, problem: String) -> Row {
        Row { dims, outputs: vec![OutputReport::bare(verdict, Some(problem.clone())); outputs], problems: vec![problem] }
    }

    /// Each output's verdict, in the outputs section's order.
    pub fn verdicts(&self) -> Vec<Verdict> {
        self.outputs.iter().map(|o| o.verdict).collect()
    }

    /// The row's place in the summary: the first of mismatched, framework
    /// error and skipped that any output got, or else valid.
    pub fn verdict(&self) -> Verdict {
        let verdicts = self.verdicts();
        [Verdict::Mismatch, Verdict::FrameworkError, Verdict::Skipped].into_iter().find(|v| verdicts.contains(v)).unwrap_or(Verdict::Valid)
    }
}

/// Counts of rows by verdict.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Summary {
    pub valid: usize,
    pub mismatched: usize,
    pub framework_errors: usize,
    pub skipped: usize,
}

impl Summary {
    pub fn of(rows: &[Row]) -> Summary {
        let mut s = Summary::default();
        for r in rows {
            match r.verdict() {
                Verdict::Valid => s.valid += 1,
                Verdict::Mismatch => s.mismatched += 1,
                Verdict::FrameworkError => s.framework_errors += 1,
                Verdict::Skipped => s.skipped += 1,
            }
        }
        s
    }

    pub fn total(&self) -> usize {
        self.valid + self.mismatched + self.framework_errors + self.skipped
    }

    /// The framework failed on every configuration that reached it (and
    /// one did): the call is wrong, not the program.
    pub fn call_always_failed(&self) -> bool {
        self.framework_errors > 0 && self.valid == 0 && self.mismatched == 0
    }

    /// Every configuration was skipped: nothing was compared.
    pub fn nothing_compared(&self) -> bool {
        self.skipped > 0 && self.skipped == self.total()
    }

    /// `N valid, M mismatched, K framework errors, of T configurations`,
    /// followed by `; S skipped ...` when eintup could not run some.
    pub fn line(&self) -> String {
        let mut line =
            format!("{} valid, {} mismatched, {} framework errors, of {} configurations", self.valid, self.mismatched, self.framework_errors, self.total());
        if self.skipped > 0 {
            line.push_str(&format!("; {} skipped (too large for eintup to run)", self.skipped));
        }
        line
    }
}

/// Largest `.npy` header accepted in a result file (NPY headers are padded
/// to 64 bytes and hold a short dict; numpy itself caps them near 10 KB).
const MAX_NPY_HEADER: u64 = 64 * 1024;

/// Compares one result file of the framework with eintup's output `ours`
/// (named `name` in messages) within `tol`. The file is read only if it is a regular file no larger
/// than `ours` could need, so a misbehaving bridge cannot make `check`
/// read a device, a pipe or gigabytes.
pub fn judge(name: &str, ours: &Tensor, result: &Path, tol: Tolerance) -> OutputReport {
    let error = |why: String| OutputReport::bare(Verdict::FrameworkError, Some(format!("framework error: {why}")));
    let limit = MAX_NPY_HEADER + ours.len() as u64 * 8;
    match std::fs::symlink_metadata(result) {
        Ok(m) if !m.file_type().is_file() => return error("the result is not a regular file".into()),
        Ok(m) if m.len() > limit => {
            return error(format!("the result has {} bytes, more than an array of `{name}`'s shape {:?} can need", m.len(), ours.shape))
        }
        Ok(_) => {}
        Err(e) => return error(format!("cannot read the result: {e}")),
    }
    let theirs = match crate::tensor::npy::read(result) {
        Ok(t) => t,
        Err(e) => return error(format!("unusable result: {e}")),
    };
    if theirs.shape != ours.shape {
        return error(format!("the result has shape {:?}, but `{name}` has shape {:?}", theirs.shape, ours.shape));
    }
    let dev = deviation(ours, &theirs);
    match compare(ours, &theirs, tol) {
        None => OutputReport { verdict: Verdict::Valid, reason: None, deviation: dev, first_difference: None },
        Some(m @ Mismatch::Value { .. }) => OutputReport { verdict: Verdict::Mismatch, reason: Some(m.to_string()), deviation: dev, first_difference: Some(m) },
        // Shapes were compared above; kept for completeness of the match.
        Some(m @ Mismatch::Shape { .. }) => error(m.to_string()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::tensor::Data;

    fn row(v: &[Verdict]) -> Row {
        Row { dims: vec![], outputs: v.iter().map(|&v| OutputReport::bare(v, None)).collect(), problems: vec![] }
    }

    #[test]
    fn a_mismatch_outranks_a_framework_error() {
        use Verdict::*;
        assert_eq!(row(&[Valid, Valid]).verdict(), Valid);
        assert_eq!(row(&[Valid, FrameworkError]).verdict(), FrameworkError);
        assert_eq!(row(&[FrameworkError, Mismatch]).verdict(), Mismatch);
        assert_eq!(row(&[Skipped, Skipped]).verdict(), Skipped);
        assert_eq!(row(&[]).verdict(), Valid);
    }

    #[test]
    fn the_summary_counts_rows() {
        use Verdict::*;
        let rows = [row(&[Valid]), row(&[Mismatch]), row(&[FrameworkError]), row(&[FrameworkError])];
        let s = Summary::of(&rows);
        assert_eq!(s.line(), "1 valid, 1 mismatched, 2 framework errors, of 4 configurations");
        assert!(!s.call_always_failed());
        assert!(Summary::of(&rows[2..]).call_always_failed());
        assert!(!Summary::of(&[]).call_always_failed());
        // skipped rows count in the total, and do not save a failing call
        let skipped = [row(&[Skipped]), row(&[FrameworkError])];
        let s = Summary::of(&skipped);
        assert_eq!(s.line(), "0 valid, 0 mismatched, 1 framework errors, of 2 configurations; 1 skipped (too large for eintup to run)");
        assert!(s.call_always_failed() && !s.nothing_compared());
        assert!(Summary::of(&skipped[..1]).nothing_compared());
        assert!(!Summary::of(&skipped[..1]).call_always_failed());
    }

    use crate::check::scratch_dir as scratch;

    #[test]
    fn unusable_results_are_framework_errors() {
        let d = scratch("judge");
        let tol = Tolerance::default();
        let ours = Tensor { shape: vec![2], data: Data::F64(vec![1.0, 2.0]) };
        let same = d.join("same.npy");
        crate::tensor::npy::write(&same, &ours).unwrap();
        let r = judge("y", &ours, &same, tol);
        assert_eq!((r.verdict, r.reason, r.deviation), (Verdict::Valid, None, Some(Deviation { abs: 0.0, rel: 0.0 })));

        let other = d.join("other.npy");
        crate::tensor::npy::write(&other, &Tensor { shape: vec![2], data: Data::F64(vec![1.0, 4.0]) }).unwrap();
        let r = judge("y", &ours, &other, tol);
        assert_eq!(r.verdict, Verdict::Mismatch);
        assert_eq!(r.reason.as_deref(), Some("first difference at index [1]: eintup 2.0, framework 4.0"));
        assert_eq!(r.deviation, Some(Deviation { abs: 2.0, rel: 0.5 }));
        // within a tolerance the caller widened, the same arrays are valid
        assert_eq!(judge("y", &ours, &other, Tolerance { rtol: 0.5, atol: 0.0 }).verdict, Verdict::Valid);

        let shape = d.join("shape.npy");
        crate::tensor::npy::write(&shape, &Tensor { shape: vec![1, 2], data: Data::F64(vec![1.0, 2.0]) }).unwrap();
        let r = judge("y", &ours, &shape, tol);
        assert_eq!(r.verdict, Verdict::FrameworkError);
        assert!(r.reason.unwrap().contains("shape [1, 2], but `y` has shape [2]"));

        // int64: an npy header with `<i8`, as numpy writes it
        let i8 = d.join("i8.npy");
        let mut bytes = b"\x93NUMPY\x01\x00".to_vec();
        let mut header = "{'descr': '<i8', 'fortran_order': False, 'shape': (2,), }".to_string();
        while !(10 + header.len() + 1).is_multiple_of(64) {
            header.push(' ');
        }
        header.push('\n');
        bytes.extend_from_slice(&(header.len() as u16).to_le_bytes());
        bytes.extend_from_slice(header.as_bytes());
        bytes.extend_from_slice(&[0u8; 16]);
        std::fs::write(&i8, bytes).unwrap();
        let r = judge("y", &ours, &i8, tol);
        assert_eq!(r.verdict, Verdict::FrameworkError, "{:?}", r.reason);

        assert_eq!(judge("y", &ours, &d.join("missing.npy"), tol).verdict, Verdict::FrameworkError);
        let big = d.join("big.npy");
        std::fs::write(&big, vec![0u8; 70 * 1024]).unwrap();
        assert!(judge("y", &ours, &big, tol).reason.unwrap().contains("more than an array"));
        let link = d.join("link.npy");
        std::os::unix::fs::symlink(&same, &link).unwrap();
        assert!(judge("y", &ours, &link, tol).reason.unwrap().contains("not a regular file"));
        let _ = std::fs::remove_dir_all(&d);
    }
}
