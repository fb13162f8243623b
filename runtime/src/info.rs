//! What a device is: its kind and the description `Device::info` returns.
//! A leaf below `device`, `cuda` and `emu`, which all name these types
//! (keeping them in `device` made `emu` and `device` use each other).

use std::fmt;
use std::str::FromStr;

use crate::error::{Error, Result};

/// Which kind of device.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum DeviceKind {
    /// A GPU through the CUDA driver.
    Cuda,
    /// The PTX emulator.
    Emulator,
}

impl FromStr for DeviceKind {
    type Err = Error;

    /// `cuda` or `emu`, as the command-line tools spell them (`gpu`, as
    /// `run --backend` spells it, is `cuda`).
    fn from_str(s: &str) -> Result<DeviceKind> {
        match s {
            "cuda" | "gpu" => Ok(DeviceKind::Cuda),
            "emu" => Ok(DeviceKind::Emulator),
            _ => Err(Error::InvalidArgument(format!("unknown device `{s}` (expected `cuda` or `emu`)"))),
        }
    }
}

impl fmt::Display for DeviceKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            DeviceKind::Cuda => "cuda",
            DeviceKind::Emulator => "emu",
        })
    }
}

/// What `etrun --device-info` prints: enough to tell which device (and
/// which GPU and driver) a report came from.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct DeviceInfo {
    pub kind: DeviceKind,
    pub name: String,
    /// Compute capability `(major, minor)`; for the emulator, the newest
    /// target whose bundles it accepts.
    pub arch: (u32, u32),
    /// Multiprocessors; the emulator models one, running blocks in turn.
    pub multiprocessors: u32,
    /// Device memory; for the emulator, its limit on a run's buffers.
    pub memory_bytes: usize,
    /// `cuDriverGetVersion`, e.g. `13000` for CUDA 13.0; 0 for the emulator.
    pub driver_version: i32,
}

impl fmt::Display for DeviceInfo {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let gib = self.memory_bytes as f64 / (1u64 << 30) as f64;
        match self.kind {
            DeviceKind::Cuda => write!(
                f,
                "{} (sm_{}{}, {} SMs, {gib:.1} GiB), driver API {}.{}",
                self.name,
                self.arch.0,
                self.arch.1,
                self.multiprocessors,
                self.driver_version / 1000,
                self.driver_version % 1000 / 10
            ),
            DeviceKind::Emulator => write!(
                f,
                "{} (runs PTX for sm_{}{} and older; {gib:.1} GiB of buffers): warps of 32 lanes in lockstep with \
                 post-dominator reconvergence, blocks one after another, bar.sync, global/shared/local/param memory \
                 with bounds and race checks, IEEE numerics as the PTX ISA defines them; no timing, caches or occupancy",
                self.name, self.arch.0, self.arch.1
            ),
        }
    }
}
