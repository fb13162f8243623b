//! How long one framework call may run and how much memory it may take
//! (`check --call-timeout`, `--call-memory`; docs/check.md, "Limits").
//!
//! An allowed operation with huge literal sizes can run for minutes or take
//! the machine's memory (`tf.linalg.svd` of 3000² took 101 s), so both are
//! bounded by default. The time limit is enforced by eintup (it stops
//! waiting and kills the bridge, [`super::bridge`]); the memory limit by the
//! bridge's process itself (`RLIMIT_DATA`, `scripts/framework_sandbox.py`),
//! so an allocation over it fails inside the call instead of the machine
//! running out.

use std::time::Duration;

/// Default time limit of one call: far above what a configuration of the
/// shipped programs takes (well under a second), far below "hung".
pub const DEFAULT_CALL_SECONDS: u64 = 60;

/// Default memory limit of one call, on top of what TensorFlow holds after
/// importing: eintup refuses configurations with more than 4 GiB of arrays
/// (docs/limits.md), and the framework holds the inputs, the results and
/// its temporaries, so twice that.
pub const DEFAULT_CALL_MEMORY: u64 = 8 << 30;

/// The limits of every framework call of one `check` run; `None` is
/// unlimited.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct CallLimits {
    pub time: Option<Duration>,
    pub memory: Option<u64>,
}

impl Default for CallLimits {
    fn default() -> CallLimits {
        CallLimits { time: Some(Duration::from_secs(DEFAULT_CALL_SECONDS)), memory: Some(DEFAULT_CALL_MEMORY) }
    }
}

/// `--call-timeout`: seconds (a positive number, fractions allowed) or `none`.
pub fn parse_seconds(s: &str) -> Result<Option<Duration>, String> {
    if s == "none" {
        return Ok(None);
    }
    match s.parse::<f64>() {
        Ok(x) if x.is_finite() && x > 0.0 && x <= 1e9 => Ok(Some(Duration::from_secs_f64(x))),
        _ => Err(format!("`{s}` is not a time limit (seconds > 0, e.g. 60 or 0.5, or `none`)")),
    }
}

/// `--call-memory`: a size in bytes with an optional binary unit (`512MiB`,
/// `8GiB`, `1048576`) or `none`.
pub fn parse_size(s: &str) -> Result<Option<u64>, String> {
    if s == "none" {
        return Ok(None);
    }
    let bad = || format!("`{s}` is not a memory size (bytes > 0 with an optional KiB, MiB or GiB, e.g. 8GiB, or `none`)");
    let split = s.find(|c: char| !c.is_ascii_digit()).unwrap_or(s.len());
    let (digits, unit) = s.split_at(split);
    let shift = match unit {
        "" | "B" => 0,
        "KiB" => 10,
        "MiB" => 20,
        "GiB" => 30,
        "TiB" => 40,
        _ => return Err(bad()),
    };
    let n: u64 = digits.parse().map_err(|_| bad())?;
    match n.checked_mul(1u64 << shift) {
        Some(b) if b > 0 => Ok(Some(b)),
        _ => Err(bad()),
    }
}

/// `8 GiB`, `512 MiB`, `1000 bytes`: a size as messages print it.
pub fn size_text(bytes: u64) -> String {
    for (shift, unit) in [(30, "GiB"), (20, "MiB"), (10, "KiB")] {
        if bytes >= 1 << shift && bytes.is_multiple_of(1 << shift) {
            return format!("{} {unit}", bytes >> shift);
        }
    }
    format!("{bytes} bytes")
}

/// `60 s`, `0.5 s`.
pub fn seconds_text(d: Duration) -> String {
    format!("{} s", d.as_secs_f64())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sizes_and_times_parse() {
        assert_eq!(parse_size("8GiB"), Ok(Some(8 << 30)));
        assert_eq!(parse_size("512MiB"), Ok(Some(512 << 20)));
        assert_eq!(parse_size("1000"), Ok(Some(1000)));
        assert_eq!(parse_size("none"), Ok(None));
        for bad in ["", "0", "8GB", "-1", "1.5GiB", "99999999999TiB", "GiB"] {
            assert!(parse_size(bad).is_err(), "{bad}");
        }
        assert_eq!(parse_seconds("60"), Ok(Some(Duration::from_secs(60))));
        assert_eq!(parse_seconds("0.5"), Ok(Some(Duration::from_millis(500))));
        assert_eq!(parse_seconds("none"), Ok(None));
        for bad in ["0", "-1", "inf", "nan", "1e300", "x"] {
            assert!(parse_seconds(bad).is_err(), "{bad}");
        }
        assert_eq!(size_text(8 << 30), "8 GiB");
        assert_eq!(size_text(1536 << 20), "1536 MiB");
        assert_eq!(size_text(1000), "1000 bytes");
        assert_eq!(seconds_text(Duration::from_millis(1500)), "1.5 s");
    }
}
