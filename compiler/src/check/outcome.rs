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

use super::compare::{compare, Mismatch};
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
}

/// One configuration: its dims, a verdict per output, and the reasons for
/// anything that is not valid (printed under the table).
#[derive(Clone, Debug, PartialEq)]
pub struct Row {
    pub dims: Vec<Vec<i64>>,
    pub verdicts: Vec<Verdict>,
    pub problems: Vec<String>,
}

impl Row {
    /// A row whose every output got `verdict` for one reason (the call
    /// failed, or eintup could not run the configuration).
    pub fn all(dims: Vec<Vec<i64>>, outputs: usize, verdict: Verdict, problem: String) -> Row {
        Row { dims, verdicts: vec![verdict; outputs], problems: vec![problem] }
    }

    /// The row's place in the summary: the first of mismatched, framework
    /// error and skipped that any output got, or else valid.
    pub fn verdict(&self) -> Verdict {
        [Verdict::Mismatch, Verdict::FrameworkError, Verdict::Skipped]
            .into_iter()
            .find(|v| self.verdicts.contains(v))
            .unwrap_or(Verdict::Valid)
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
        let mut line = format!(
            "{} valid, {} mismatched, {} framework errors, of {} configurations",
            self.valid,
            self.mismatched,
            self.framework_errors,
            self.total()
        );
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
/// (named `name` in messages). The file is read only if it is a regular
/// file no larger than `ours` could need, so a misbehaving bridge cannot
/// make `check` read a device, a pipe or gigabytes.
pub fn judge(name: &str, ours: &Tensor, result: &Path) -> (Verdict, Option<String>) {
    let error = |why: String| (Verdict::FrameworkError, Some(format!("output `{name}`: framework error: {why}")));
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
    match compare(ours, &theirs) {
        None => (Verdict::Valid, None),
        Some(m @ Mismatch::Value { .. }) => (Verdict::Mismatch, Some(format!("output `{name}`: {m}"))),
        // Shapes were compared above; kept for completeness of the match.
        Some(m @ Mismatch::Shape { .. }) => error(m.to_string()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::tensor::Data;

    fn row(v: &[Verdict]) -> Row {
        Row { dims: vec![], verdicts: v.to_vec(), problems: vec![] }
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
        let ours = Tensor { shape: vec![2], data: Data::F64(vec![1.0, 2.0]) };
        let same = d.join("same.npy");
        crate::tensor::npy::write(&same, &ours).unwrap();
        assert_eq!(judge("y", &ours, &same), (Verdict::Valid, None));

        let other = d.join("other.npy");
        crate::tensor::npy::write(&other, &Tensor { shape: vec![2], data: Data::F64(vec![1.0, 3.0]) }).unwrap();
        let (v, why) = judge("y", &ours, &other);
        assert_eq!(v, Verdict::Mismatch);
        assert!(why.unwrap().starts_with("output `y`: first difference at index [1]"));

        let shape = d.join("shape.npy");
        crate::tensor::npy::write(&shape, &Tensor { shape: vec![1, 2], data: Data::F64(vec![1.0, 2.0]) }).unwrap();
        let (v, why) = judge("y", &ours, &shape);
        assert_eq!(v, Verdict::FrameworkError);
        assert!(why.unwrap().contains("shape [1, 2], but `y` has shape [2]"));

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
        let (v, why) = judge("y", &ours, &i8);
        assert_eq!(v, Verdict::FrameworkError, "{why:?}");

        let missing = judge("y", &ours, &d.join("missing.npy"));
        assert_eq!(missing.0, Verdict::FrameworkError);
        let big = d.join("big.npy");
        std::fs::write(&big, vec![0u8; 70 * 1024]).unwrap();
        assert!(judge("y", &ours, &big).1.unwrap().contains("more than an array"));
        let link = d.join("link.npy");
        std::os::unix::fs::symlink(&same, &link).unwrap();
        assert!(judge("y", &ours, &link).1.unwrap().contains("not a regular file"));
        let _ = std::fs::remove_dir_all(&d);
    }
}
