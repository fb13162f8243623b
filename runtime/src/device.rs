//! Devices: where bundles run.
//!
//! A [`Device`] is a CUDA GPU ([`Device::new`], through the driver API) or
//! the PTX emulator ([`Device::emulator`], on the CPU). Both run a bundle
//! through the same path (`backend`): input and target checks, allocation,
//! uploads and fills, the generators of inputs the caller left out,
//! launches in manifest order with arguments marshalled from the manifest,
//! empty launches skipped, downloads. Only the CUDA device can time a run
//! ([`Device::run_timed`]); only the emulator can profile one
//! ([`Device::run_profiled`]).

use std::collections::BTreeMap;
use std::fmt;

use crate::buffer::{byte_size, DeviceBuffer, DeviceMemory};
use crate::bundle::Bundle;
use crate::cuda::Cuda;
use crate::emu::{EmuOptions, Emulator, ProfileReport};
use crate::error::{Error, Result};
use crate::program::Program;
use eintup_tensor::tensor::{DType, Tensor};

pub use crate::cuda::driver_present;
pub use crate::info::{DeviceInfo, DeviceKind};
pub use crate::timing::{median, LaunchTiming, Timings};

/// A device bundles run on.
pub struct Device {
    imp: Imp,
}

enum Imp {
    Cuda(Cuda),
    Emu(Emulator),
}

impl fmt::Debug for Device {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Device").field("kind", &self.kind()).field("ordinal", &self.ordinal()).field("name", &self.name()).field("arch", &self.arch()).finish()
    }
}

impl Device {
    /// Number of CUDA devices; `Err(NoDriver)` without a driver.
    pub fn count() -> Result<usize> {
        Cuda::count()
    }

    /// Opens CUDA device `ordinal`: [`Error::NoDriver`] when libcuda cannot
    /// be loaded, [`Error::NoDevice`] when there is no such device.
    pub fn new(ordinal: usize) -> Result<Device> {
        Ok(Device { imp: Imp::Cuda(Cuda::new(ordinal)?) })
    }

    /// The PTX emulator with default options (always available).
    pub fn emulator() -> Device {
        Device::emulator_with(EmuOptions::default())
    }

    /// The PTX emulator with the given options.
    pub fn emulator_with(options: EmuOptions) -> Device {
        Device { imp: Imp::Emu(Emulator::new(options)) }
    }

    /// The first device of a kind: CUDA device 0, or the emulator.
    pub fn open(kind: DeviceKind) -> Result<Device> {
        match kind {
            DeviceKind::Cuda => Device::new(0),
            DeviceKind::Emulator => Ok(Device::emulator()),
        }
    }

    pub fn kind(&self) -> DeviceKind {
        match self.imp {
            Imp::Cuda(_) => DeviceKind::Cuda,
            Imp::Emu(_) => DeviceKind::Emulator,
        }
    }

    /// The CUDA ordinal; 0 for the emulator.
    pub fn ordinal(&self) -> usize {
        match &self.imp {
            Imp::Cuda(c) => c.ordinal,
            Imp::Emu(_) => 0,
        }
    }

    /// The device's name, e.g. `"NVIDIA H100 80GB HBM3"`.
    pub fn name(&self) -> &str {
        match &self.imp {
            Imp::Cuda(c) => &c.name,
            Imp::Emu(_) => Emulator::NAME,
        }
    }

    /// Compute capability `(major, minor)`.
    pub fn arch(&self) -> (u32, u32) {
        match &self.imp {
            Imp::Cuda(c) => c.arch,
            Imp::Emu(_) => Emulator::ARCH,
        }
    }

    /// Name, compute capability, multiprocessors, memory and driver version.
    pub fn info(&self) -> Result<DeviceInfo> {
        match &self.imp {
            Imp::Cuda(c) => c.info(),
            Imp::Emu(e) => Ok(e.info()),
        }
    }

    /// Loads `bundle` once, to run it many times ([`Program`]): checks its
    /// target, loads its module, resolves its kernels and allocates its
    /// buffers.
    pub fn load(&self, bundle: &Bundle) -> Result<Program<'_>> {
        match &self.imp {
            Imp::Cuda(c) => c.load(bundle),
            Imp::Emu(e) => e.load(bundle),
        }
    }

    /// A zeroed buffer of `dtype` elements of `shape` on this device, owned
    /// by the caller ([`DeviceBuffer`]; bound to programs with
    /// [`Program::bind`](crate::Program::bind)). On the emulator it lives in
    /// the emulator's memory, beside its programs' buffers.
    pub fn alloc(&self, dtype: DType, shape: &[usize]) -> Result<DeviceBuffer> {
        let bytes = byte_size(dtype, shape)?;
        let memory: Box<dyn DeviceMemory> = match &self.imp {
            Imp::Cuda(c) => Box::new(c.alloc(bytes)?),
            Imp::Emu(e) => Box::new(e.alloc(bytes)?),
        };
        Ok(DeviceBuffer::new(dtype, shape.to_vec(), bytes, memory))
    }

    /// A buffer holding a copy of `t`: [`alloc`](Device::alloc), then
    /// [`DeviceBuffer::write`].
    pub fn upload(&self, t: &Tensor) -> Result<DeviceBuffer> {
        let buffer = self.alloc(t.dtype(), &t.shape)?;
        buffer.write(t)?;
        Ok(buffer)
    }

    /// Device memory someone else owns (a PyTorch tensor's, say) at `ptr`,
    /// `bytes` bytes holding `dtype` elements of `shape` (`bytes` must be
    /// their size), as a [`DeviceBuffer`]: bound and copied like any other,
    /// never freed by the runtime. On the emulator `ptr` must lie in one of
    /// its live buffers (checked); on a GPU the driver cannot check it.
    ///
    /// # Safety
    /// On a GPU, `ptr` must be an allocation of this device's context of at
    /// least `bytes` bytes, alive as long as any handle to the returned
    /// buffer (the caller's or a program's it is bound to) may use it.
    pub unsafe fn wrap(&self, ptr: u64, bytes: usize, dtype: DType, shape: &[usize]) -> Result<DeviceBuffer> {
        let want = byte_size(dtype, shape)?;
        if bytes != want {
            return Err(Error::InvalidArgument(format!("wrapping {bytes} bytes at {ptr:#x} as {dtype} of shape {shape:?}, which has {want} bytes")));
        }
        if ptr == 0 && bytes > 0 {
            return Err(Error::InvalidArgument(format!("wrapping a null pointer as {bytes} bytes")));
        }
        // Kernels load whole elements: a misaligned one faults on a GPU
        // and in the emulator, later and further from the cause.
        if !ptr.is_multiple_of(dtype.size() as u64) {
            return Err(Error::InvalidArgument(format!("wrapping {ptr:#x} as {dtype}: the address is not aligned to its {}-byte elements", dtype.size())));
        }
        let memory: Box<dyn DeviceMemory> = match &self.imp {
            Imp::Cuda(c) => Box::new(c.wrap(ptr)),
            Imp::Emu(e) => Box::new(e.wrap(ptr, bytes)?),
        };
        Ok(DeviceBuffer::new(dtype, shape.to_vec(), bytes, memory))
    }

    /// On the emulator, the host<->device copies made on this device so
    /// far (every upload and download: a program's `write`/`read`, a
    /// [`DeviceBuffer`]'s `write`/`read`), so that a caller can check that
    /// work on bound buffers copies nothing; `None` on a GPU.
    pub fn copies(&self) -> Option<u64> {
        match &self.imp {
            Imp::Cuda(_) => None,
            Imp::Emu(e) => Some(e.copies()),
        }
    }

    /// Runs `bundle` once and returns every buffer by name: [`load`],
    /// write the inputs, run, read every buffer.
    ///
    /// [`load`]: Device::load
    pub fn run(&self, bundle: &Bundle, inputs: &BTreeMap<String, Tensor>) -> Result<BTreeMap<String, Tensor>> {
        // A dynamic bundle runs at the dims its inputs give.
        let bundle = &*bundle.bind_inputs(inputs)?;
        match &self.imp {
            Imp::Cuda(c) => c.run(bundle, inputs),
            Imp::Emu(e) => e.run(bundle, inputs).map(|(out, _)| out),
        }
    }

    /// Runs `bundle` once on the emulator and returns every buffer and the
    /// profile of every kernel launched; `InvalidArgument` on a GPU (use
    /// Nsight Compute there).
    pub fn run_profiled(&self, bundle: &Bundle, inputs: &BTreeMap<String, Tensor>) -> Result<(BTreeMap<String, Tensor>, ProfileReport)> {
        let bundle = &*bundle.bind_inputs(inputs)?;
        match &self.imp {
            Imp::Cuda(_) => Err(Error::InvalidArgument("profiles come from the emulator (device `emu`); on a GPU use Nsight Compute".into())),
            Imp::Emu(e) => e.run(bundle, inputs),
        }
    }

    /// The profile of one run of `bundle` on the emulator in which each
    /// launch runs only `blocks` of its blocks (the first, the last and
    /// others spread between), their counts scaled to the whole grid: a
    /// GPU-size kernel's profile in seconds. Returns no outputs (most were
    /// never computed); `InvalidArgument` on a GPU. Exact for kernels whose
    /// blocks all do the same work (docs/emulator.md, "Sampled profiles").
    pub fn profile_sampled(&self, bundle: &Bundle, inputs: &BTreeMap<String, Tensor>, blocks: u32) -> Result<ProfileReport> {
        let bundle = &*bundle.bind_inputs(inputs)?;
        match &self.imp {
            Imp::Cuda(_) => Err(Error::InvalidArgument("profiles come from the emulator (device `emu`); on a GPU use Nsight Compute".into())),
            Imp::Emu(e) => e.profile_sampled(bundle, inputs, blocks),
        }
    }

    /// Runs `bundle` `warmup` times untimed, then `reps` times timed, and
    /// returns median times. Each timed repetition runs the steps twice: once
    /// bracketed by two events only (the total, undisturbed by inner events),
    /// once with events around every launch (the per-launch times). A GPU
    /// only: the emulator does not model time.
    pub fn run_timed(&self, bundle: &Bundle, inputs: &BTreeMap<String, Tensor>, warmup: usize, reps: usize) -> Result<Timings> {
        match &self.imp {
            Imp::Cuda(c) => c.run_timed(bundle, inputs, warmup, reps),
            Imp::Emu(_) => Err(Error::InvalidArgument("the emulator does not model time; profile the run instead".into())),
        }
    }

    /// Median time, in milliseconds, of one device-to-device copy of
    /// `bytes` bytes over `reps` timed repetitions after `warmup` untimed
    /// ones: the bandwidth baseline memory-bound kernels are judged against
    /// (a copy reads and writes `bytes` each). A GPU only.
    pub fn copy_timed(&self, bytes: usize, warmup: usize, reps: usize) -> Result<f64> {
        match &self.imp {
            Imp::Cuda(c) => c.copy_timed(bytes, warmup, reps),
            Imp::Emu(_) => Err(Error::InvalidArgument("the emulator does not model time".into())),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn device_kinds_parse_and_print() {
        assert_eq!("cuda".parse::<DeviceKind>().unwrap(), DeviceKind::Cuda);
        assert_eq!("emu".parse::<DeviceKind>().unwrap(), DeviceKind::Emulator);
        assert_eq!("gpu".parse::<DeviceKind>().unwrap(), DeviceKind::Cuda, "`run --backend`'s name");
        assert!("tpu".parse::<DeviceKind>().is_err());
        assert_eq!(DeviceKind::Emulator.to_string(), "emu");
        let emu = Device::open(DeviceKind::Emulator).unwrap();
        assert_eq!(emu.kind(), DeviceKind::Emulator);
        let info = emu.info().unwrap();
        assert!(info.to_string().starts_with(Emulator::NAME), "{info}");
    }
}
