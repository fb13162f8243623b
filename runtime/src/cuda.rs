//! A CUDA GPU through the driver API (cudarc), as a [`Backend`].
//!
//! [`Cuda::new`] finds the driver and the device without ever panicking:
//! the driver library is probed before the first driver call (cudarc's
//! dynamic loader panics when it is absent), and every driver-touching body
//! runs under `catch_unwind` so that a symbol missing from an old driver
//! becomes an [`Error::Driver`] too. Buffers are plain device allocations
//! (never managed memory) and all work goes to the device's one stream,
//! unless the caller hands a program its own ([`Backend::use_stream`]).

use std::collections::{BTreeMap, VecDeque};
use std::ffi::c_void;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::Arc;

use cudarc::driver::{result, sys, CudaContext, CudaEvent, CudaSlice, CudaStream, DevicePtr};

use crate::backend::{self, Backend, Launch};
use crate::buffer::{DeviceId, DeviceMemory};
use crate::bundle::Bundle;
use crate::error::{driver, Error, Result};
use crate::info::{DeviceInfo, DeviceKind};
use crate::module::Module;
use crate::timing::{median, LaunchTiming, Timings};
use eintup_tensor::tensor::Tensor;

/// A CUDA device with its primary context and the one stream all work goes to.
pub(crate) struct Cuda {
    ctx: Arc<CudaContext>,
    stream: Arc<CudaStream>,
    pub ordinal: usize,
    pub name: String,
    pub arch: (u32, u32),
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

/// Device count, with "no device" (cuInit's answer when the driver sees
/// no GPU) as zero.
fn device_count() -> Result<usize> {
    match CudaContext::device_count() {
        Ok(n) => Ok(usize::try_from(n).unwrap_or(0)),
        Err(e) if e.0 == sys::CUresult::CUDA_ERROR_NO_DEVICE => Ok(0),
        Err(e) => Err(driver("cuInit", e)),
    }
}

impl Cuda {
    pub(crate) fn count() -> Result<usize> {
        if !driver_present() {
            return Err(Error::NoDriver);
        }
        guarded("counting devices", device_count)
    }

    pub(crate) fn new(ordinal: usize) -> Result<Cuda> {
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
            Ok(Cuda { ctx, stream, ordinal, name, arch })
        })
    }

    pub(crate) fn info(&self) -> Result<DeviceInfo> {
        guarded("querying the device", || {
            let sms = self.ctx.attribute(sys::CUdevice_attribute::CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT).map_err(|e| driver("cuDeviceGetAttribute", e))?;
            let memory_bytes = self.ctx.total_mem().map_err(|e| driver("cuDeviceTotalMem", e))?;
            let mut version = 0;
            // SAFETY: the driver was loaded by Cuda::new; the call writes one int.
            let r = unsafe { sys::cuDriverGetVersion(&mut version) };
            if r != sys::CUresult::CUDA_SUCCESS {
                return Err(Error::Driver(format!("cuDriverGetVersion: {r:?}")));
            }
            Ok(DeviceInfo {
                kind: DeviceKind::Cuda,
                name: self.name.clone(),
                arch: self.arch,
                multiprocessors: u32::try_from(sms).unwrap_or(0),
                memory_bytes,
                driver_version: version,
            })
        })
    }

    /// Loads `bundle` once (module JIT-compiled once, buffers allocated
    /// once) to run many times.
    pub(crate) fn load(&self, bundle: &Bundle) -> Result<crate::Program<'_>> {
        crate::check::check_target(bundle.manifest(), self.arch, &self.name)?;
        guarded("loading the bundle", || {
            let mut b = self.session()?;
            let p = backend::load(&mut b, bundle)?;
            b.synchronize()?;
            Ok(crate::Program::new(bundle, Box::new(Guarded(crate::program::Loaded { p, b }))))
        })
    }

    pub(crate) fn run(&self, bundle: &Bundle, inputs: &BTreeMap<String, Tensor>) -> Result<BTreeMap<String, Tensor>> {
        // The target is checked by `load`, after the inputs as before.
        crate::check::check_inputs(bundle.manifest(), inputs)?;
        let mut p = self.load(bundle)?;
        p.run_with(inputs)?;
        p.read_all()
    }

    pub(crate) fn run_timed(&self, bundle: &Bundle, inputs: &BTreeMap<String, Tensor>, warmup: usize, reps: usize) -> Result<Timings> {
        if reps == 0 {
            return Err(Error::InvalidArgument("timing needs at least one repetition".into()));
        }
        backend::check(bundle, inputs, self.arch, &self.name)?;
        guarded("timing the bundle", || {
            let mut run = self.session()?;
            let prepared = backend::prepare(&mut run, bundle, inputs)?;
            for _ in 0..warmup {
                backend::execute(&mut run, &prepared)?;
            }
            let (start, end) = (self.event()?, self.event()?);
            let launches: Vec<(usize, String)> = prepared.launches().map(|(s, k)| (s, k.to_string())).collect();
            let mut pairs = (0..launches.len()).map(|_| Ok((self.event()?, self.event()?))).collect::<Result<Vec<_>>>()?;

            let mut totals = Vec::with_capacity(reps);
            let mut per_launch = vec![Vec::with_capacity(reps); launches.len()];
            for _ in 0..reps {
                // The whole sequence between two events only, undisturbed by
                // inner events; then again with an event pair per launch.
                start.record(&self.stream).map_err(|e| driver("cuEventRecord", e))?;
                backend::execute(&mut run, &prepared)?;
                end.record(&self.stream).map_err(|e| driver("cuEventRecord", e))?;
                totals.push(f64::from(start.elapsed_ms(&end).map_err(|e| driver("cuEventElapsedTime", e))?));

                run.events = Some((pairs, 0));
                let executed = backend::execute(&mut run, &prepared);
                pairs = run.events.take().map(|(p, _)| p).unwrap_or_default();
                executed?;
                for (times, (a, b)) in per_launch.iter_mut().zip(&pairs) {
                    times.push(f64::from(a.elapsed_ms(b).map_err(|e| driver("cuEventElapsedTime", e))?));
                }
            }
            let launches =
                launches.into_iter().zip(per_launch).map(|((step, kernel), mut times)| LaunchTiming { step, kernel, median_ms: median(&mut times) }).collect();
            Ok(Timings { reps, total_ms: median(&mut totals), launches })
        })
    }

    pub(crate) fn copy_timed(&self, bytes: usize, warmup: usize, reps: usize) -> Result<f64> {
        if reps == 0 || bytes == 0 {
            return Err(Error::InvalidArgument("a timed copy needs at least one repetition and one byte".into()));
        }
        guarded("timing a device copy", || {
            self.ctx.bind_to_thread().map_err(|e| driver("cuCtxSetCurrent", e))?;
            let src = self.stream.alloc_zeros::<u8>(bytes).map_err(|e| driver("cuMemAlloc", e))?;
            let mut dst = self.stream.alloc_zeros::<u8>(bytes).map_err(|e| driver("cuMemAlloc", e))?;
            let (start, end) = (self.event()?, self.event()?);
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

    fn event(&self) -> Result<CudaEvent> {
        self.ctx.new_event(Some(sys::CUevent_flags::CU_EVENT_DEFAULT)).map_err(|e| driver("cuEventCreate", e))
    }

    fn session(&self) -> Result<CudaRun<'_>> {
        self.ctx.bind_to_thread().map_err(|e| driver("cuCtxSetCurrent", e))?;
        Ok(CudaRun { dev: self, stream: self.stream.cu_stream(), staged: Vec::new(), events: None, marks: VecDeque::new(), marked: 0, done: 0 })
    }

    /// A zeroed buffer of `bytes` bytes for the caller (none for 0 bytes:
    /// its address is null, as a program's empty buffer's).
    pub(crate) fn alloc(&self, bytes: usize) -> Result<CudaMem> {
        guarded("allocating a buffer", || {
            self.ctx.bind_to_thread().map_err(|e| driver("cuCtxSetCurrent", e))?;
            let owned = match bytes {
                0 => None,
                _ => Some(self.stream.alloc_zeros::<u8>(bytes).map_err(|e| driver("cuMemAlloc", e))?),
            };
            let addr = owned.as_ref().map_or(0, |m| m.device_ptr(&self.stream).0);
            self.stream.synchronize().map_err(|e| driver("cuStreamSynchronize", e))?;
            Ok(CudaMem { ctx: self.ctx.clone(), stream: self.stream.clone(), addr, _owned: owned })
        })
    }

    /// Memory someone else owns, at `addr`: the driver cannot tell its size,
    /// so the caller vouches for it ([`Device::wrap`](crate::Device::wrap)).
    pub(crate) fn wrap(&self, addr: u64) -> CudaMem {
        CudaMem { ctx: self.ctx.clone(), stream: self.stream.clone(), addr, _owned: None }
    }
}

/// A caller's buffer on a GPU: its own allocation, or a wrapped address it
/// does not own. Copies go through the device's stream and are complete
/// when they return (the host side is the caller's slice).
pub(crate) struct CudaMem {
    ctx: Arc<CudaContext>,
    stream: Arc<CudaStream>,
    addr: u64,
    _owned: Option<CudaSlice<u8>>,
}

impl Drop for CudaMem {
    /// An owned allocation is freed after all work of the context finished
    /// (as `cudaFree` does): its last handle may be dropped while kernels
    /// on another stream than the device's (the caller's, or a DLPack
    /// consumer's) still use it, and cudarc would free it ordered on the
    /// device's stream alone.
    fn drop(&mut self) {
        if let Some(owned) = self._owned.take() {
            let _ = guarded("freeing a buffer", || {
                self.ctx.bind_to_thread().map_err(|e| driver("cuCtxSetCurrent", e))?;
                self.ctx.synchronize().map_err(|e| driver("cuCtxSynchronize", e))?;
                drop(owned);
                Ok(())
            });
        }
    }
}

impl DeviceMemory for CudaMem {
    fn device(&self) -> DeviceId {
        DeviceId::Cuda(self.ctx.cu_ctx() as usize)
    }

    fn address(&self) -> u64 {
        self.addr
    }

    fn write(&self, host: &[u8]) -> Result<()> {
        if host.is_empty() {
            return Ok(());
        }
        guarded("writing a buffer", || {
            self.ctx.bind_to_thread().map_err(|e| driver("cuCtxSetCurrent", e))?;
            // SAFETY: `addr` holds the buffer's bytes (an allocation of this
            // context, or memory the caller vouched for in `wrap`), and the
            // synchronisation keeps `host` alive until the copy has read it.
            unsafe { result::memcpy_htod_async(self.addr, host, self.stream.cu_stream()) }.map_err(|e| driver("cuMemcpyHtoDAsync", e))?;
            self.stream.synchronize().map_err(|e| driver("cuStreamSynchronize", e))
        })
    }

    fn read(&self, bytes: usize) -> Result<Vec<u8>> {
        let mut host = eintup_tensor::zeroed_bytes(bytes).ok_or_else(|| Error::OutOfMemory { what: "a download".into(), bytes: bytes as u64 })?;
        if bytes == 0 {
            return Ok(host);
        }
        guarded("reading a buffer", || {
            self.ctx.bind_to_thread().map_err(|e| driver("cuCtxSetCurrent", e))?;
            // SAFETY: as in `write`; `host` has the buffer's size and lives
            // until the synchronisation.
            unsafe { result::memcpy_dtoh_async(&mut host, self.addr, self.stream.cu_stream()) }.map_err(|e| driver("cuMemcpyDtoHAsync", e))?;
            self.stream.synchronize().map_err(|e| driver("cuStreamSynchronize", e))
        })?;
        Ok(host)
    }
}

/// A loaded program whose every driver call runs under [`guarded`] (with
/// the context current on the calling thread).
struct Guarded<'a>(crate::program::Loaded<CudaRun<'a>>);

// SAFETY: what keeps it from being `Send` are the driver's handles
// (module, functions, stream, device memory), which belong to the
// device's context, not to a thread: every driver call this type makes
// first binds that context to the calling thread (`bound`, under
// `guarded`), and it is used by one thread at a time (`&mut self`). So a
// loaded program may move to another thread and run there (the Python
// package calls its kernels from any thread).
unsafe impl Send for Guarded<'_> {}

impl crate::program::Resident for Guarded<'_> {
    fn upload(&mut self, i: usize, name: &str, host: &[u8]) -> Result<()> {
        self.bound("uploading an input", |l| l.upload(i, name, host))
    }
    fn generate(&mut self, i: usize) -> Result<()> {
        self.bound("generating an input", |l| l.generate(i))
    }
    fn zero(&mut self, i: usize) -> Result<()> {
        self.bound("zeroing a buffer", |l| l.zero(i))
    }
    fn execute(&mut self) -> Result<()> {
        self.bound("running the bundle", |l| l.execute())
    }
    fn start_run(&mut self) {
        self.0.start_run();
    }
    fn mark(&mut self, n: u64) -> Result<()> {
        self.bound("marking a run", |l| l.mark(n))
    }
    fn finished(&mut self, last: u64) -> Result<u64> {
        self.bound("querying finished runs", |l| l.finished(last))
    }
    fn download(&mut self, i: usize) -> Result<Vec<u8>> {
        self.bound("downloading a buffer", |l| l.download(i))
    }
    fn bind(&mut self, i: usize, name: &str, to: Option<&dyn DeviceMemory>) -> Result<()> {
        self.0.bind(i, name, to)
    }
    fn place(&mut self, manifest: &crate::manifest::Manifest) -> Result<Vec<bool>> {
        self.bound("re-binding the program", |l| l.place(manifest))
    }
    fn synchronize(&mut self) -> Result<()> {
        self.bound("synchronising", |l| l.synchronize())
    }
    unsafe fn use_stream(&mut self, stream: *mut c_void) -> Result<()> {
        // SAFETY: passed on from the caller's promise.
        self.bound("switching streams", |l| unsafe { l.use_stream(stream) })
    }
    fn take_profile(&mut self) -> Option<crate::profile::ProfileReport> {
        self.0.take_profile()
    }
}

impl Guarded<'_> {
    fn bound<T>(&mut self, what: &str, f: impl FnOnce(&mut dyn crate::program::Resident) -> Result<T>) -> Result<T> {
        guarded(what, || {
            self.0.b.dev.ctx.bind_to_thread().map_err(|e| driver("cuCtxSetCurrent", e))?;
            f(&mut self.0)
        })
    }
}

/// One session on the device (a run, or a loaded program): the
/// [`Backend`] the shared run path drives.
struct CudaRun<'a> {
    dev: &'a Cuda,
    /// Where work is enqueued: the device's stream, or the caller's.
    stream: sys::CUstream,
    /// Host copies of uploads, alive until the stream has read them: each
    /// with the first mark recorded after it (`marked + 1` when made).
    staged: Vec<(u64, Vec<u8>)>,
    /// When timing launches: one event pair per launch, and the next one.
    events: Option<(Vec<(CudaEvent, CudaEvent)>, usize)>,
    /// Events recorded after runs ([`Backend::mark`]), oldest first, until
    /// seen complete.
    marks: VecDeque<(u64, CudaEvent)>,
    /// The last mark recorded, and the last one seen complete.
    marked: u64,
    done: u64,
}

impl Backend for CudaRun<'_> {
    type Module = Module;
    type Kernel = sys::CUfunction;
    type Buffer = CudaSlice<u8>;

    fn load(&mut self, ptx: &str) -> Result<Module> {
        Module::load(&self.dev.ctx, ptx)
    }

    fn resident_blocks(&mut self, kernel: &sys::CUfunction, block: [u32; 3]) -> Result<Option<u32>> {
        let threads = block.iter().map(|&b| b as u64).product::<u64>();
        let threads = i32::try_from(threads).map_err(|_| Error::BadManifest(format!("block {block:?} is too large")))?;
        // SAFETY: the function comes from a loaded module of this context.
        let per_sm = unsafe { result::occupancy::max_active_block_per_multiprocessor(*kernel, threads, 0) }
            .map_err(|e| driver("cuOccupancyMaxActiveBlocksPerMultiprocessor", e))?;
        let sms = self.dev.ctx.attribute(sys::CUdevice_attribute::CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT).map_err(|e| driver("cuDeviceGetAttribute", e))?;
        Ok(u32::try_from(per_sm.max(0)).ok().zip(u32::try_from(sms.max(0)).ok()).map(|(a, b)| a.saturating_mul(b)))
    }

    fn kernel(&mut self, module: &Module, name: &str) -> Result<sys::CUfunction> {
        module.function(name)
    }

    fn alloc(&mut self, _name: &str, bytes: usize) -> Result<CudaSlice<u8>> {
        self.dev.stream.alloc_zeros::<u8>(bytes).map_err(|e| driver("cuMemAlloc", e))
    }

    fn address(&self, buffer: &CudaSlice<u8>) -> u64 {
        // With event tracking off the returned guard records nothing.
        buffer.device_ptr(&self.dev.stream).0
    }

    fn device_id(&self) -> DeviceId {
        DeviceId::Cuda(self.dev.ctx.cu_ctx() as usize)
    }

    fn write(&mut self, addr: u64, host: &[u8]) -> Result<()> {
        // The copy is asynchronous: the bytes it reads live in `staged`
        // until the next synchronisation.
        self.staged.push((self.marked + 1, host.to_vec()));
        let staged = self.staged.last().map(|(_, v)| v.as_slice()).unwrap_or_default();
        // SAFETY: `addr` is a live buffer of the host slice's size (the
        // program's, or a bound one the program holds a handle to).
        unsafe { result::memcpy_htod_async(addr, staged, self.stream) }.map_err(|e| driver("cuMemcpyHtoDAsync", e))
    }

    fn zero(&mut self, addr: u64, bytes: usize) -> Result<()> {
        // SAFETY: as in `write`, `bytes` bytes at `addr`.
        unsafe { result::memset_d8_async(addr, 0, bytes, self.stream) }.map_err(|e| driver("cuMemsetD8Async", e))
    }

    fn launch(&mut self, l: &Launch<'_, sys::CUfunction>) -> Result<()> {
        let stream = &self.dev.stream;
        let pair = match &mut self.events {
            Some((pairs, next)) => {
                *next += 1;
                pairs.get(*next - 1)
            }
            None => None,
        };
        if let Some((before, _)) = pair {
            before.record(stream).map_err(|e| driver("cuEventRecord", e))?;
        }
        // cuLaunchKernel takes one pointer per parameter, pointing at the
        // parameter's value (here a device address).
        let mut values: Vec<sys::CUdeviceptr> = l.args.to_vec();
        let mut params: Vec<*mut c_void> = values.iter_mut().map(|v| (v as *mut sys::CUdeviceptr).cast()).collect();
        let (grid, block) = ((l.grid[0], l.grid[1], l.grid[2]), (l.block[0], l.block[1], l.block[2]));
        // SAFETY: the manifest and the PTX were checked to agree on the
        // parameter count, every parameter is a 64-bit pointer to a live
        // buffer of the declared size (or null for an empty one), and
        // `values` outlives the call (the driver copies parameters at launch).
        unsafe { result::launch_kernel(*l.kernel, grid, block, 0, self.stream, &mut params) }.map_err(|e| driver(&format!("cuLaunchKernel({})", l.name), e))?;
        if let Some((_, after)) = pair {
            after.record(stream).map_err(|e| driver("cuEventRecord", e))?;
        }
        Ok(())
    }

    fn synchronize(&mut self) -> Result<()> {
        // SAFETY: the stream is the device's, or one the caller keeps alive
        // while the program uses it (`use_stream`).
        unsafe { result::stream::synchronize(self.stream) }.map_err(|e| driver("cuStreamSynchronize", e))?;
        self.staged.clear();
        self.marks.clear();
        self.done = self.marked;
        self.dev.ctx.check_err().map_err(|e| driver("deferred error", e))
    }

    fn mark(&mut self, n: u64) -> Result<()> {
        // Timing is off: a query is all these events are for.
        let event = self.dev.ctx.new_event(Some(sys::CUevent_flags::CU_EVENT_DISABLE_TIMING)).map_err(|e| driver("cuEventCreate", e))?;
        // SAFETY: the event is this context's and the stream is the one
        // work is enqueued on (as in `synchronize`).
        unsafe { result::event::record(event.cu_event(), self.stream) }.map_err(|e| driver("cuEventRecord", e))?;
        self.marks.push_back((n, event));
        self.marked = n;
        Ok(())
    }

    fn finished(&mut self, _last: u64) -> Result<u64> {
        while let Some((n, event)) = self.marks.front() {
            // A kernel fault of an earlier launch surfaces here, as at a
            // synchronisation.
            if !event.try_is_complete().map_err(|e| driver("cuEventQuery", e))? {
                break;
            }
            self.done = *n;
            self.marks.pop_front();
        }
        let done = self.done;
        self.staged.retain(|(first_mark, _)| *first_mark > done);
        Ok(done)
    }

    fn download(&mut self, addr: u64, bytes: usize) -> Result<Vec<u8>> {
        let mut host = eintup_tensor::zeroed_bytes(bytes).ok_or_else(|| Error::OutOfMemory { what: "a download".into(), bytes: bytes as u64 })?;
        // SAFETY: `bytes` bytes at `addr`, as in `write`; `host` lives until
        // the synchronisation that follows.
        unsafe { result::memcpy_dtoh_async(&mut host, addr, self.stream) }.map_err(|e| driver("cuMemcpyDtoHAsync", e))?;
        // SAFETY: as in `synchronize`.
        unsafe { result::stream::synchronize(self.stream) }.map_err(|e| driver("cuStreamSynchronize", e))?;
        Ok(host)
    }

    unsafe fn use_stream(&mut self, stream: *mut c_void) -> Result<()> {
        // Work already enqueued finishes first: nothing orders two streams.
        self.synchronize()?;
        self.stream = match stream.is_null() {
            true => self.dev.stream.cu_stream(),
            false => stream.cast(),
        };
        Ok(())
    }
}
