//! Repetition and medians: every time in the report is the median of
//! repeated runs after one warm-up run.

use std::time::{Duration, Instant};

pub use eintup_runtime::device::median;

/// How long to keep repeating.
#[derive(Clone, Copy, Debug)]
pub struct Budget {
    pub min_reps: usize,
    pub max_reps: usize,
    /// Stop once this much time was spent and `min_reps` are done.
    pub time: Duration,
}

/// Median seconds of `f` (after one untimed warm-up call) and the number
/// of timed runs. `f` returns an error to stop early.
pub fn time_median<E>(budget: Budget, mut f: impl FnMut() -> Result<(), E>) -> Result<(f64, usize), E> {
    f()?;
    let mut times = Vec::new();
    let start = Instant::now();
    while times.len() < budget.max_reps && (times.len() < budget.min_reps || start.elapsed() < budget.time) {
        let t = Instant::now();
        f()?;
        times.push(t.elapsed().as_secs_f64());
    }
    let n = times.len();
    Ok((median(&mut times), n))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn median_of_odd_and_even_counts() {
        assert_eq!(median(&mut [3.0, 1.0, 2.0]), 2.0);
        assert_eq!(median(&mut [4.0, 1.0, 3.0, 2.0]), 2.5);
        assert!(median(&mut []).is_nan());
    }

    #[test]
    fn repeats_at_least_min_and_at_most_max() {
        let mut calls = 0;
        let b = Budget { min_reps: 4, max_reps: 6, time: Duration::ZERO };
        let (_, n) = time_median::<()>(b, || {
            calls += 1;
            Ok(())
        })
        .unwrap();
        assert_eq!((n, calls), (4, 5));
        let b = Budget { min_reps: 1, max_reps: 6, time: Duration::from_secs(60) };
        let (_, n) = time_median::<()>(b, || Ok(())).unwrap();
        assert_eq!(n, 6);
    }
}
