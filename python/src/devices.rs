//! The devices the package's kernels run on that the process shares: one
//! PTX emulator for every `emu` kernel (and the no-GPU test arrays of
//! `cuda`), so that its buffers can pass from one kernel to the next.

use eintup_runtime::Device;
use std::sync::OnceLock;

/// The emulator all `emu` kernels of the process run on.
pub fn emulator() -> &'static Device {
    static EMU: OnceLock<Device> = OnceLock::new();
    EMU.get_or_init(Device::emulator)
}
