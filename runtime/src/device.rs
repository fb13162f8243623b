//! One GPU, and running bundles on it.
//!
//! [`Device::new`] finds the driver and the device without ever panicking:
//! the driver library is probed before the first driver call (cudarc's
//! dynamic loader panics when it is absent), and every driver-touching body
//! runs under `catch_unwind` so that a symbol missing from an old driver
//! becomes an [`Error::Driver`] too.
//!
//! [`Device::run`] executes a bundle: check inputs and target, JIT the PTX,
//! allocate one plain device buffer per manifest buffer (never managed
//! memory), upload inputs, zero the rest, generate the inputs the caller
//! left out (the manifest's `generate` steps), run the steps in order on
//! the device's one stream, download everything.

use std::collections::BTreeMap;
use std::ffi::c_void;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::Arc;

use cudarc::driver::{result, sys, CudaContext, CudaSlice, CudaStream, DevicePtr};

use crate::bundle::Bundle;
use crate::check::{check_inputs, check_target};
use crate::error::{driver, Error, Result};
use crate::manifest::{Manifest, Role, Step};
use crate::module::Module;
use crate::tensor::{Data, Tensor};

/// A CUDA device with its primary context and the one stream all work goes to.
pub struct Device {
    ctx: Arc<CudaContext>,
    stream: Arc<CudaStream>,
    ordinal: usize,
    name: String,
    arch: (u32, u32),
}

impl std::fmt::Debug for Device {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Device")
            .field("ordinal", &self.ordinal)
            .field("name", &self.name)
            .field("arch", &self.arch)
            .finish()
    }
}

/// Median times of [`Device::run_timed`], in milliseconds.
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

/// What `etrun --device-info` prints: enough to tell which GPU and driver
/// a report came from.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct DeviceInfo {
    pub name: String,
    /// Compute capability `(major, minor)`.
    pub arch: (u32, u32),
    pub multiprocessors: u32,
    pub memory_bytes: usize,
    /// `cuDriverGetVersion`, e.g. `13000` for CUDA 13.0.
    pub driver_version: i32,
}

impl std::fmt::Display for DeviceInfo {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "{} (sm_{}{}, {} SMs, {:.1} GiB), driver API {}.{}",
            self.name,
            self.arch.0,
            self.arch.1,
            self.multiprocessors,
            self.memory_bytes as f64 / (1u64 << 30) as f64,
            self.driver_version / 1000,
            self.driver_version % 1000 / 10
        )
    }
}

/// Whether the CUDA driver library can be loaded. Probing first matters:
/// cudarc's dynamic loader panics on the first driver call when it cannot.
pub fn driver_present() -> bool {
    // SAFETY: loads and unloads libcuda, running its initialisers; that is
    // what any later driver call does anyway.
    catch_unwind(|| unsafe { sys::is_culib_present() }).unwrap_or(false)
}

/// Runs a body that calls the driver, turning a panic inside cudarc (its
/// loader panics on a symbol the installed driver lacks) into an error.
fn guarded<T>(what: &str, body: impl FnOnce() -> Result<T>) -> Result<T> {
    match catch_unwind(AssertUnwindSafe(body)) {
        Ok(r) => r,
        Err(payload) => {
            let msg = payload
                .downcast_ref::<String>()
                .cloned()
                .or_else(|| payload.downcast_ref::<&str>().map(|s| s.to_string()))
                .unwrap_or_else(|| "unknown panic".into());
            Err(Error::Driver(format!("{what}: the CUDA bindings panicked: {msg}")))
        }
    }
}

impl Device {
    /// Number of CUDA devices; `Err(NoDriver)` without a driver.
    pub fn count() -> Result<usize> {
        if !driver_present() {
            return Err(Error::NoDriver);
        }
        guarded("counting devices", device_count)
    }

    /// Opens device `ordinal`: [`Error::NoDriver`] when libcuda cannot be
    /// loaded, [`Error::NoDevice`] when there is no such device.
    pub fn new(ordinal: usize) -> Result<Device> {
        if !driver_present() {
            return Err(Error::NoDriver);
        }
        guarded("opening the device", || {
            let count = device_count()?;
            if ordinal >= count {
                return Err(Error::NoDevice { ordinal, count });
            }
            let ctx = CudaContext::new(ordinal).map_err(|e| driver("cuDevicePrimaryCtxRetain", e))?;
            // SAFETY: all work of this context goes to one stream, so cudarc's
            // cross-stream event tracking has nothing to order; switching it
            // off before any allocation also keeps its events out of timings.
            unsafe { ctx.disable_event_tracking() };
            let name = ctx.name().map_err(|e| driver("cuDeviceGetName", e))?;
            let (major, minor) = ctx.compute_capability().map_err(|e| driver("cuDeviceGetAttribute", e))?;
            let arch = (u32::try_from(major).unwrap_or(0), u32::try_from(minor).unwrap_or(0));
            let stream = ctx.new_stream().map_err(|e| driver("cuStreamCreate", e))?;
            Ok(Device { ctx, stream, ordinal, name, arch })
        })
    }

    pub fn ordinal(&self) -> usize {
        self.ordinal
    }

    /// The device's name, e.g. `"NVIDIA H100 80GB HBM3"`.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// Compute capability `(major, minor)`.
    pub fn arch(&self) -> (u32, u32) {
        self.arch
    }

    /// Name, compute capability, multiprocessors, memory and driver version.
    pub fn info(&self) -> Result<DeviceInfo> {
        guarded("querying the device", || {
            let sms = self
                .ctx
                .attribute(sys::CUdevice_attribute::CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT)
                .map_err(|e| driver("cuDeviceGetAttribute", e))?;
            let memory_bytes = self.ctx.total_mem().map_err(|e| driver("cuDeviceTotalMem", e))?;
            let mut version = 0;
            // SAFETY: the driver was loaded by Device::new; the call writes one int.
            let r = unsafe { sys::cuDriverGetVersion(&mut version) };
            if r != sys::CUresult::CUDA_SUCCESS {
                return Err(Error::Driver(format!("cuDriverGetVersion: {r:?}")));
            }
            Ok(DeviceInfo {
                name: self.name.clone(),
                arch: self.arch,
                multiprocessors: u32::try_from(sms).unwrap_or(0),
                memory_bytes,
                driver_version: version,
            })
        })
    }

    /// Runs `bundle` once and returns every buffer by name.
    pub fn run(&self, bundle: &Bundle, inputs: &BTreeMap<String, Tensor>) -> Result<BTreeMap<String, Tensor>> {
        self.check(bundle, inputs)?;
        guarded("running the bundle", || {
            let prepared = self.prepare(bundle, inputs)?;
            self.execute(&prepared.actions, None)?;
            self.download(bundle.manifest(), &prepared)
        })
    }

    /// Runs `bundle` `warmup` times untimed, then `reps` times timed, and
    /// returns median times. Each timed repetition runs the steps twice: once
    /// bracketed by two events only (the total, undisturbed by inner events),
    /// once with events around every launch (the per-launch times).
    pub fn run_timed(
        &self,
        bundle: &Bundle,
        inputs: &BTreeMap<String, Tensor>,
        warmup: usize,
        reps: usize,
    ) -> Result<Timings> {
        if reps == 0 {
            return Err(Error::InvalidArgument("timing needs at least one repetition".into()));
        }
        self.check(bundle, inputs)?;
        guarded("timing the bundle", || {
            let prepared = self.prepare(bundle, inputs)?;
            for _ in 0..warmup {
                self.execute(&prepared.actions, None)?;
            }
            let event = || {
                self.ctx
                    .new_event(Some(sys::CUevent_flags::CU_EVENT_DEFAULT))
                    .map_err(|e| driver("cuEventCreate", e))
            };
            let (start, end) = (event()?, event()?);
            let launches = prepared.actions.iter().filter(|a| matches!(a, Action::Launch { .. })).count();
            let pairs = (0..launches).map(|_| Ok((event()?, event()?))).collect::<Result<Vec<_>>>()?;

            let mut totals = Vec::with_capacity(reps);
            let mut per_launch = vec![Vec::with_capacity(reps); launches];
            for _ in 0..reps {
                start.record(&self.stream).map_err(|e| driver("cuEventRecord", e))?;
                self.execute(&prepared.actions, None)?;
                end.record(&self.stream).map_err(|e| driver("cuEventRecord", e))?;
                totals.push(f64::from(start.elapsed_ms(&end).map_err(|e| driver("cuEventElapsedTime", e))?));

                self.execute(&prepared.actions, Some(&pairs))?;
                for (times, (a, b)) in per_launch.iter_mut().zip(&pairs) {
                    times.push(f64::from(a.elapsed_ms(b).map_err(|e| driver("cuEventElapsedTime", e))?));
                }
            }
            let launches = prepared
                .actions
                .iter()
                .filter_map(|a| match a {
                    Action::Launch { step, kernel, .. } => Some((*step, kernel.clone())),
                    Action::Fill { .. } => None,
                })
                .zip(per_launch)
                .map(|((step, kernel), mut times)| LaunchTiming { step, kernel, median_ms: median(&mut times) })
                .collect();
            Ok(Timings { reps, total_ms: median(&mut totals), launches })
        })
    }

    /// Median time, in milliseconds, of one device-to-device copy of
    /// `bytes` bytes over `reps` timed repetitions after `warmup` untimed
    /// ones: the bandwidth baseline memory-bound kernels are judged against
    /// (a copy reads and writes `bytes` each).
    pub fn copy_timed(&self, bytes: usize, warmup: usize, reps: usize) -> Result<f64> {
        if reps == 0 || bytes == 0 {
            return Err(Error::InvalidArgument("a timed copy needs at least one repetition and one byte".into()));
        }
        guarded("timing a device copy", || {
            self.ctx.bind_to_thread().map_err(|e| driver("cuCtxSetCurrent", e))?;
            let src = self.stream.alloc_zeros::<u8>(bytes).map_err(|e| driver("cuMemAlloc", e))?;
            let mut dst = self.stream.alloc_zeros::<u8>(bytes).map_err(|e| driver("cuMemAlloc", e))?;
            let event = || {
                self.ctx
                    .new_event(Some(sys::CUevent_flags::CU_EVENT_DEFAULT))
                    .map_err(|e| driver("cuEventCreate", e))
            };
            let (start, end) = (event()?, event()?);
            for _ in 0..warmup {
                self.stream.memcpy_dtod(&src, &mut dst).map_err(|e| driver("cuMemcpyDtoDAsync", e))?;
            }
            let mut times = Vec::with_capacity(reps);
            for _ in 0..reps {
                start.record(&self.stream).map_err(|e| driver("cuEventRecord", e))?;
                self.stream.memcpy_dtod(&src, &mut dst).map_err(|e| driver("cuMemcpyDtoDAsync", e))?;
                end.record(&self.stream).map_err(|e| driver("cuEventRecord", e))?;
                times.push(f64::from(start.elapsed_ms(&end).map_err(|e| driver("cuEventElapsedTime", e))?));
            }
            Ok(median(&mut times))
        })
    }

    /// Everything checked before any device work.
    fn check(&self, bundle: &Bundle, inputs: &BTreeMap<String, Tensor>) -> Result<()> {
        check_inputs(bundle.manifest(), inputs)?;
        check_target(bundle.manifest(), self.arch, &self.name)
    }

    /// Loads the module, resolves kernels, allocates and fills the buffers,
    /// and turns the steps into actions on raw pointers.
    fn prepare(&self, bundle: &Bundle, inputs: &BTreeMap<String, Tensor>) -> Result<Prepared> {
        self.ctx.bind_to_thread().map_err(|e| driver("cuCtxSetCurrent", e))?;
        let manifest = bundle.manifest();
        let module = Module::load(&self.ctx, bundle.ptx())?;

        let mut buffers = Vec::with_capacity(manifest.buffers.len());
        // Host copies stay alive until the stream has finished reading them.
        let mut staged = Vec::new();
        for b in &manifest.buffers {
            let bytes = b.byte_size().unwrap_or(0);
            if bytes == 0 {
                // cuMemAlloc rejects 0 bytes; kernels receive a null pointer.
                buffers.push(DeviceBuffer { bytes, mem: None });
                continue;
            }
            let mem = match (b.role, inputs.get(&b.name)) {
                (Role::Input, Some(t)) => {
                    let host = t.data.to_ne_bytes();
                    if host.len() != bytes {
                        // check_inputs compared shapes and dtypes, so this
                        // only trips if that check and byte_size disagree.
                        let reason = format!("{} bytes supplied, the buffer has {bytes}", host.len());
                        return Err(Error::Input { name: b.name.clone(), reason });
                    }
                    // SAFETY: every byte is overwritten by the copy just below.
                    let mut mem = unsafe { self.stream.alloc::<u8>(bytes) }.map_err(|e| driver("cuMemAlloc", e))?;
                    self.stream.memcpy_htod(&host, &mut mem).map_err(|e| driver("cuMemcpyHtoDAsync", e))?;
                    staged.push(host);
                    mem
                }
                _ => self.stream.alloc_zeros::<u8>(bytes).map_err(|e| driver("cuMemAlloc", e))?,
            };
            buffers.push(DeviceBuffer { bytes, mem: Some(mem) });
        }
        self.stream.synchronize().map_err(|e| driver("cuStreamSynchronize", e))?;
        drop(staged);

        let index: BTreeMap<&str, usize> = manifest.buffers.iter().enumerate().map(|(i, b)| (b.name.as_str(), i)).collect();
        let actions_of = |steps: &[Step]| self.actions(steps, &index, &buffers, &module);
        // Inputs the caller left out are made on the device, once, by their
        // generators (check_inputs made sure each has one).
        for g in manifest.generate.iter().filter(|g| !inputs.contains_key(&g.buffer)) {
            self.execute(&actions_of(&g.steps)?, None)?;
        }
        let actions = actions_of(&manifest.steps)?;
        Ok(Prepared { actions, buffers, _module: module })
    }

    /// Steps resolved to actions on this preparation's buffers; empty
    /// launches are dropped.
    fn actions(&self, steps: &[Step], index: &BTreeMap<&str, usize>, buffers: &[DeviceBuffer], module: &Module) -> Result<Vec<Action>> {
        let ptr = |name: &str| -> Result<sys::CUdeviceptr> {
            let i = *index.get(name).ok_or_else(|| Error::BadManifest(format!("unknown buffer `{name}`")))?;
            Ok(buffers[i].ptr(&self.stream))
        };
        let mut actions = Vec::with_capacity(steps.len());
        for (step, s) in steps.iter().enumerate() {
            if s.is_empty_launch() {
                continue;
            }
            match s {
                Step::Fill { buffer, .. } => {
                    let i = *index.get(buffer.as_str()).ok_or_else(|| Error::BadManifest(format!("unknown buffer `{buffer}`")))?;
                    actions.push(Action::Fill { ptr: buffers[i].ptr(&self.stream), bytes: buffers[i].bytes });
                }
                Step::Launch { kernel, grid, block, args } => {
                    actions.push(Action::Launch {
                        step,
                        kernel: kernel.clone(),
                        func: module.function(kernel)?,
                        grid: (grid[0], grid[1], grid[2]),
                        block: (block[0], block[1], block[2]),
                        args: args.iter().map(|a| ptr(a)).collect::<Result<_>>()?,
                    });
                }
            }
        }
        Ok(actions)
    }

    /// Enqueues every action on the stream; with `events`, records the i-th
    /// pair around the i-th launch. Does not wait for completion.
    fn execute(&self, actions: &[Action], events: Option<&[(cudarc::driver::CudaEvent, cudarc::driver::CudaEvent)]>) -> Result<()> {
        self.ctx.bind_to_thread().map_err(|e| driver("cuCtxSetCurrent", e))?;
        let mut launch_no = 0;
        for a in actions {
            match a {
                Action::Fill { ptr, bytes } => {
                    if *bytes > 0 {
                        // SAFETY: `ptr` is a live allocation of `bytes` bytes.
                        unsafe { result::memset_d8_async(*ptr, 0, *bytes, self.stream.cu_stream()) }
                            .map_err(|e| driver("cuMemsetD8Async", e))?;
                    }
                }
                Action::Launch { kernel, func, grid, block, args, .. } => {
                    let pair = events.and_then(|ev| ev.get(launch_no));
                    if let Some((before, _)) = pair {
                        before.record(&self.stream).map_err(|e| driver("cuEventRecord", e))?;
                    }
                    // cuLaunchKernel takes one pointer per parameter, pointing
                    // at the parameter's value (here a device address).
                    let mut values = args.clone();
                    let mut params: Vec<*mut c_void> =
                        values.iter_mut().map(|v| (v as *mut sys::CUdeviceptr).cast()).collect();
                    // SAFETY: the manifest and the PTX were checked to agree on
                    // the parameter count, every parameter is a 64-bit pointer
                    // to a live buffer of the declared size, and `values`
                    // outlives the call (the driver copies parameters at launch).
                    unsafe { result::launch_kernel(*func, *grid, *block, 0, self.stream.cu_stream(), &mut params) }
                        .map_err(|e| driver(&format!("cuLaunchKernel({kernel})"), e))?;
                    if let Some((_, after)) = pair {
                        after.record(&self.stream).map_err(|e| driver("cuEventRecord", e))?;
                    }
                    launch_no += 1;
                }
            }
        }
        Ok(())
    }

    /// Copies every buffer back, in manifest order.
    fn download(&self, manifest: &Manifest, p: &Prepared) -> Result<BTreeMap<String, Tensor>> {
        let mut raw = Vec::with_capacity(p.buffers.len());
        for buf in &p.buffers {
            raw.push(match &buf.mem {
                Some(mem) => self.stream.clone_dtoh(mem).map_err(|e| driver("cuMemcpyDtoHAsync", e))?,
                None => Vec::new(),
            });
        }
        // Kernel faults surface here, at the first synchronisation after them.
        self.stream.synchronize().map_err(|e| driver("cuStreamSynchronize", e))?;
        self.ctx.check_err().map_err(|e| driver("deferred error", e))?;
        let mut out = BTreeMap::new();
        for (b, bytes) in manifest.buffers.iter().zip(raw) {
            let data = Data::from_ne_bytes(b.dtype, &bytes)
                .ok_or_else(|| Error::Driver(format!("buffer `{}`: downloaded {} bytes", b.name, bytes.len())))?;
            out.insert(b.name.clone(), Tensor { shape: b.shape.clone(), data });
        }
        Ok(out)
    }
}

/// Device count, with "no device" (cuInit's answer when the driver sees
/// no GPU) as zero.
fn device_count() -> Result<usize> {
    match CudaContext::device_count() {
        Ok(n) => Ok(usize::try_from(n).unwrap_or(0)),
        Err(e) if e.0 == sys::CUresult::CUDA_ERROR_NO_DEVICE => Ok(0),
        Err(e) => Err(driver("cuInit", e)),
    }
}

/// Resolved state for executing a bundle's steps, possibly many times.
struct Prepared {
    actions: Vec<Action>,
    buffers: Vec<DeviceBuffer>,
    // Keeps the kernels' functions valid; dropped after the buffers' users.
    _module: Module,
}

/// A manifest buffer on the device; `None` when it has no bytes.
struct DeviceBuffer {
    bytes: usize,
    mem: Option<CudaSlice<u8>>,
}

impl DeviceBuffer {
    fn ptr(&self, stream: &CudaStream) -> sys::CUdeviceptr {
        match &self.mem {
            // With event tracking off the returned guard records nothing.
            Some(mem) => mem.device_ptr(stream).0,
            None => 0,
        }
    }
}

/// One non-skipped step with everything resolved to driver handles.
enum Action {
    Fill { ptr: sys::CUdeviceptr, bytes: usize },
    Launch {
        step: usize,
        kernel: String,
        func: sys::CUfunction,
        grid: (u32, u32, u32),
        block: (u32, u32, u32),
        args: Vec<sys::CUdeviceptr>,
    },
}

/// Median of `xs` (the mean of the middle two for an even count); `xs` is
/// not empty where it is called.
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
    use super::median;

    #[test]
    fn median_odd_even() {
        assert_eq!(median(&mut [3.0, 1.0, 2.0]), 2.0);
        assert_eq!(median(&mut [4.0, 1.0, 3.0, 2.0]), 2.5);
        assert_eq!(median(&mut [7.5]), 7.5);
    }
}
