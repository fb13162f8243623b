//! The times `Device::run_timed` measures, and the median they are taken
//! with. A leaf below `device` and `cuda`, like `info`.

/// Median times of [`Device::run_timed`](crate::Device::run_timed), in milliseconds.
#[derive(Clone, Debug, PartialEq)]
pub struct Timings {
    /// Timed repetitions the medians are taken over.
    pub reps: usize,
    /// The whole step sequence (fills and launches), from CUDA events
    /// recorded before the first and after the last step.
    pub total_ms: f64,
    /// One entry per launch that is not skipped, in step order.
    pub launches: Vec<LaunchTiming>,
}

/// Median time of one launch step.
#[derive(Clone, Debug, PartialEq)]
pub struct LaunchTiming {
    /// Index of the step in the manifest's `steps`.
    pub step: usize,
    pub kernel: String,
    pub median_ms: f64,
}

/// Median of `xs` (sorted in place); NaN when empty. Shared with the
/// benchmark harness so that every reported median means the same.
pub fn median(xs: &mut [f64]) -> f64 {
    xs.sort_by(f64::total_cmp);
    let n = xs.len();
    match n {
        0 => f64::NAN,
        _ if !n.is_multiple_of(2) => xs[n / 2],
        _ => (xs[n / 2 - 1] + xs[n / 2]) / 2.0,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn median_odd_even() {
        assert_eq!(median(&mut [3.0, 1.0, 2.0]), 2.0);
        assert_eq!(median(&mut [4.0, 1.0, 3.0, 2.0]), 2.5);
        assert_eq!(median(&mut [7.5]), 7.5);
    }
}
