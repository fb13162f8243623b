//! A bundle loaded on a device once and run many times (issue #29 item 1;
//! docs/runtime.md, "Programs").
//!
//! [`Device::load`](crate::Device::load) loads the PTX module (the driver
//! JIT-compiles it, the emulator decodes it) once, resolves every kernel
//! and step, and allocates every buffer once. A [`Program`] then takes new
//! inputs ([`Program::write`]), runs ([`Program::run`]: asynchronous on a
//! GPU) and gives back only the buffers asked for ([`Program::read`]):
//! nothing is reloaded, reallocated or copied that the caller did not ask
//! for. [`Device::run`](crate::Device::run) is the one-shot convenience
//! over it.
//!
//! A caller who keeps data on the device binds its own
//! [`DeviceBuffer`]s to the program's inputs and outputs
//! ([`Program::bind`]): runs then read and write them in place, with no
//! copy at all. On a GPU the caller may also hand over its own stream
//! ([`Program::use_stream`]); [`Program::synchronize`] waits for the work.

use std::collections::BTreeMap;
use std::ffi::c_void;

use crate::backend::{self, Backend, Prepared};
use crate::buffer::{DeviceBuffer, DeviceMemory};
use crate::bundle::Bundle;
use crate::check::{check_input, fits};
use crate::error::{Error, Result};
use crate::manifest::{Init, Manifest, Role};
use crate::profile::ProfileReport;
use eintup_tensor::tensor::{Data, Tensor};

/// Bytes a buffer bound to a program ([`Program::bind`]) must start at a
/// multiple of: code generation assumes every buffer 16-byte aligned and
/// vectorises loads by it (`base_align`, compiler/codegen/src/nvptx.rs).
pub const BUFFER_ALIGN: u64 = 16;

/// A bundle resident on a device: its module, kernels and buffers, kept
/// between runs.
pub struct Program<'d> {
    manifest: Manifest,
    /// A digest of the loaded module's PTX: [`Program::rebind`] takes only
    /// a bundle with the same kernels.
    ptx: u64,
    imp: Box<dyn Resident + Send + 'd>,
    /// Per buffer: an input the caller wrote, or one generated since.
    filled: Vec<bool>,
    /// Per buffer: zero-initialised, and possibly not zero any more (an
    /// earlier run wrote it, or a caller's buffer was bound in its place),
    /// so the next run zeroes it first.
    stale: Vec<bool>,
    /// Per buffer: the caller's buffer bound in place of the program's own.
    /// The handle keeps its memory alive while the program may use it.
    bound: Vec<Option<DeviceBuffer>>,
    /// Whether work may be enqueued that nobody waited for yet.
    pending: bool,
    /// Runs enqueued so far: run `n` is marked `n` on the device
    /// ([`Resident::mark`]) when its steps are enqueued.
    runs: u64,
    /// The caller's buffers the program let go of (unbound, rebound) while
    /// a run that may use them was enqueued, each with that run's mark:
    /// held until the run is seen finished ([`Resident::finished`]), so
    /// that letting go of a buffer never waits for the device.
    retired: Vec<(u64, DeviceBuffer)>,
}

/// The backend-independent operations a program needs, over one loaded
/// bundle ([`Loaded`]); a trait object so that [`Program`] has no type
/// parameter for its device. Held as `dyn Resident + Send`: a program may
/// move to another thread (it is used by one at a time).
pub(crate) trait Resident {
    fn upload(&mut self, i: usize, name: &str, host: &[u8]) -> Result<()>;
    fn generate(&mut self, i: usize) -> Result<()>;
    fn zero(&mut self, i: usize) -> Result<()>;
    fn execute(&mut self) -> Result<()>;
    /// Another run begins (before its generators, zeroing and steps).
    fn start_run(&mut self);
    /// [`Backend::mark`].
    fn mark(&mut self, n: u64) -> Result<()>;
    /// [`Backend::finished`].
    fn finished(&mut self, last: u64) -> Result<u64>;
    /// Buffer `i`'s bytes, after everything enqueued before has finished.
    fn download(&mut self, i: usize) -> Result<Vec<u8>>;
    /// The emulator's profile of the launches since the last call.
    fn take_profile(&mut self) -> Option<ProfileReport>;
    /// [`backend::bind`].
    fn bind(&mut self, i: usize, name: &str, to: Option<&dyn DeviceMemory>) -> Result<()>;
    /// Waits for everything enqueued.
    fn synchronize(&mut self) -> Result<()>;
    /// [`Backend::use_stream`].
    ///
    /// # Safety
    /// As [`Backend::use_stream`].
    unsafe fn use_stream(&mut self, stream: *mut c_void) -> Result<()>;
    /// [`backend::place`]: the buffers and steps of another binding of
    /// the same module.
    fn place(&mut self, manifest: &Manifest) -> Result<Vec<bool>>;
}

/// One backend's session with the bundle made resident on it.
pub(crate) struct Loaded<B: Backend> {
    // Field order is drop order: the buffers and module before the
    // session that made them.
    pub p: Prepared<B>,
    pub b: B,
}

impl<B: Backend> Resident for Loaded<B> {
    fn upload(&mut self, i: usize, name: &str, host: &[u8]) -> Result<()> {
        backend::upload(&mut self.b, &mut self.p, i, name, host)
    }
    fn generate(&mut self, i: usize) -> Result<()> {
        backend::generate(&mut self.b, &self.p, i)
    }
    fn zero(&mut self, i: usize) -> Result<()> {
        backend::zero(&mut self.b, &self.p, i)
    }
    fn execute(&mut self) -> Result<()> {
        backend::execute(&mut self.b, &self.p)
    }
    fn start_run(&mut self) {
        self.b.start_run();
    }
    fn mark(&mut self, n: u64) -> Result<()> {
        self.b.mark(n)
    }
    fn finished(&mut self, last: u64) -> Result<u64> {
        self.b.finished(last)
    }
    fn download(&mut self, i: usize) -> Result<Vec<u8>> {
        let bytes = backend::download_one(&mut self.b, &self.p, i)?;
        // Kernel faults of a GPU surface here, at the first synchronisation.
        self.b.synchronize()?;
        Ok(bytes)
    }
    fn take_profile(&mut self) -> Option<ProfileReport> {
        self.b.take_profile()
    }
    fn bind(&mut self, i: usize, name: &str, to: Option<&dyn DeviceMemory>) -> Result<()> {
        backend::bind(&self.b, &mut self.p, i, name, to)
    }
    fn synchronize(&mut self) -> Result<()> {
        self.b.synchronize()
    }
    unsafe fn use_stream(&mut self, stream: *mut c_void) -> Result<()> {
        // SAFETY: passed on from the caller's promise.
        unsafe { self.b.use_stream(stream) }
    }
    fn place(&mut self, manifest: &Manifest) -> Result<Vec<bool>> {
        backend::place(&mut self.b, &mut self.p, manifest)
    }
}

/// The digest [`Program::rebind`] compares modules by.
fn ptx_digest(ptx: &str) -> u64 {
    use std::hash::{Hash, Hasher};
    let mut h = std::collections::hash_map::DefaultHasher::new();
    ptx.hash(&mut h);
    h.finish()
}

impl<'d> Program<'d> {
    pub(crate) fn new(bundle: &Bundle, imp: Box<dyn Resident + Send + 'd>) -> Program<'d> {
        let manifest = bundle.manifest().clone();
        let n = manifest.buffers.len();
        Program {
            manifest,
            ptx: ptx_digest(bundle.ptx()),
            imp,
            filled: vec![false; n],
            stale: vec![false; n],
            bound: vec![None; n],
            pending: false,
            runs: 0,
            retired: Vec::new(),
        }
    }

    /// Re-binds the program to `bundle`: the dynamic bundle (format 2) it
    /// was loaded from, bound to other dims ([`Bundle::bind_inputs`],
    /// [`Bundle::bind_given`]). The module stays loaded (no second decode
    /// on the emulator, no second driver JIT on a GPU), and only buffers
    /// whose size changed are allocated anew. An input whose shape changed
    /// must be written again or is generated again; a caller's buffer
    /// bound where the shape changed is unbound; everything else (inputs
    /// written, bindings) stays. A bundle with other kernels or buffers is
    /// [`Error::InvalidArgument`]: load it with
    /// [`Device::load`](crate::Device::load). On an error the program is
    /// as it was, but for bindings of buffers whose shape changes.
    pub fn rebind(&mut self, bundle: &Bundle) -> Result<()> {
        let m = bundle.manifest();
        let same_buffers = m.buffers.len() == self.manifest.buffers.len()
            && m.buffers
                .iter()
                .zip(&self.manifest.buffers)
                .all(|(a, b)| a.name == b.name && a.role == b.role && a.dtype == b.dtype && a.shape.len() == b.shape.len());
        if ptx_digest(bundle.ptx()) != self.ptx || !same_buffers {
            return Err(Error::InvalidArgument("rebinding a program: the bundle's kernels or buffers are not the loaded ones (only the same dynamic bundle at other dims re-binds); load it with Device::load".into()));
        }
        // Buffers may be freed or replaced: the work using them finishes.
        if self.pending {
            self.synchronize()?;
        }
        let changed: Vec<bool> = m.buffers.iter().zip(&self.manifest.buffers).map(|(a, b)| a.shape != b.shape).collect();
        for (i, _) in changed.iter().enumerate().filter(|(_, c)| **c) {
            if self.bound[i].take().is_some() {
                self.imp.bind(i, &m.buffers[i].name, None)?;
            }
        }
        let anew = self.imp.place(m)?;
        for i in 0..m.buffers.len() {
            if changed[i] || anew[i] {
                self.filled[i] = false;
            }
            if anew[i] {
                // A fresh allocation is zeroed.
                self.stale[i] = false;
            }
        }
        self.manifest = m.clone();
        Ok(())
    }

    pub fn manifest(&self) -> &Manifest {
        &self.manifest
    }

    /// Uploads `t` into input buffer `name`: checked as [`Device::run`]
    /// checks its inputs (an input of this name, dtype and shape the
    /// buffer's). Later runs use it until it is written again.
    ///
    /// [`Device::run`]: crate::Device::run
    pub fn write(&mut self, name: &str, t: &Tensor) -> Result<()> {
        let i = check_input(&self.manifest, name, t)?;
        self.refuse_bound(i)?;
        self.imp.upload(i, name, t.data.as_ne_bytes())?;
        self.filled[i] = true;
        Ok(())
    }

    /// Makes input `name` the bundle's generated values again (its
    /// generator runs now), after a [`write`](Program::write) replaced them.
    pub fn generate(&mut self, name: &str) -> Result<()> {
        let i = self
            .manifest
            .buffer_index(name)
            .filter(|&i| self.manifest.buffers[i].role == Role::Input)
            .ok_or_else(|| Error::Input { name: name.to_string(), reason: "the bundle has no input of this name".into() })?;
        if self.manifest.generator(name).is_none() {
            return Err(Error::Input { name: name.to_string(), reason: "the bundle cannot generate it".into() });
        }
        self.refuse_bound(i)?;
        self.imp.generate(i)?;
        self.filled[i] = true;
        Ok(())
    }

    /// Writes into the caller's buffer go through the buffer itself: the
    /// program copies nothing into memory it does not own.
    fn refuse_bound(&self, i: usize) -> Result<()> {
        match self.bound[i] {
            Some(_) => Err(Error::InvalidArgument(format!(
                "buffer `{}` is bound to a DeviceBuffer: write that buffer (DeviceBuffer::write), or unbind it first",
                self.manifest.buffers[i].name
            ))),
            None => Ok(()),
        }
    }

    /// Binds the caller's `buffer` to the bundle's input or output `name`:
    /// from now on the kernels read or write it in place of the program's
    /// own buffer, and runs copy nothing to or from it ([`read`] still
    /// downloads it on request). Its dtype and shape must be the manifest
    /// buffer's; it must come from this program's device. An output bound
    /// is zeroed on the device before each run where the bundle says so
    /// (`init: zero`), as the program's own is. The program keeps a handle
    /// to the buffer until it is unbound, rebound or the program is
    /// dropped.
    ///
    /// [`read`]: Program::read
    /// Its memory must start at a multiple of [`BUFFER_ALIGN`] bytes.
    pub fn bind(&mut self, name: &str, buffer: &DeviceBuffer) -> Result<()> {
        let i = self
            .manifest
            .buffer_index(name)
            .ok_or_else(|| Error::InvalidArgument(format!("binding buffer `{name}`: the bundle has no buffer of this name")))?;
        let b = &self.manifest.buffers[i];
        if b.role == Role::Temp {
            return Err(Error::InvalidArgument(format!("binding buffer `{name}`: it is a temporary of the bundle; only inputs and outputs are bound")));
        }
        if let Err(reason) = fits(b, buffer.dtype(), buffer.shape()) {
            return Err(Error::InvalidArgument(format!("binding buffer `{name}`: the DeviceBuffer has {reason}")));
        }
        // The kernels may load 16 bytes at a time where an offset is a
        // multiple of 16 bytes from the buffer's start (docs/codegen.md,
        // "Vector loads"): a start the device allocator gives (256-byte
        // aligned), not a view at an odd element of one.
        if buffer.byte_size() > 0 && !buffer.device_ptr().is_multiple_of(BUFFER_ALIGN) {
            return Err(Error::InvalidArgument(format!(
                "binding buffer `{name}`: the DeviceBuffer starts at {:#x}, not a multiple of {BUFFER_ALIGN} bytes (the kernels load 16 bytes at a time); copy it into an allocation of its own first",
                buffer.device_ptr()
            )));
        }
        self.check_aliasing(i, buffer)?;
        let zeroed = matches!(b.init, Init::Zero);
        self.release(i)?;
        self.imp.bind(i, name, Some(buffer.memory()))?;
        self.bound[i] = Some(buffer.clone());
        self.stale[i] = zeroed;
        Ok(())
    }

    /// Refuses a buffer whose memory overlaps another one bound to this
    /// program unless both are inputs: the kernels assume that what they
    /// write is distinct from everything else (a matmul writing `c` while
    /// reading `a` from the same memory computes garbage), while two inputs
    /// reading one array is harmless.
    fn check_aliasing(&self, i: usize, buffer: &DeviceBuffer) -> Result<()> {
        let span = |b: &DeviceBuffer| (b.device_ptr(), b.device_ptr().saturating_add(b.byte_size() as u64));
        let (lo, hi) = span(buffer);
        for (j, other) in self.bound.iter().enumerate() {
            let Some(other) = other.as_ref().filter(|_| j != i) else { continue };
            let (olo, ohi) = span(other);
            let both_inputs = self.manifest.buffers[i].role == Role::Input && self.manifest.buffers[j].role == Role::Input;
            if lo < ohi && olo < hi && !both_inputs {
                return Err(Error::InvalidArgument(format!(
                    "binding buffer `{}`: the DeviceBuffer overlaps the one bound to `{}`; an output may share memory with no other buffer",
                    self.manifest.buffers[i].name, self.manifest.buffers[j].name
                )));
            }
        }
        Ok(())
    }

    /// Gives input or output `name` its own buffer back (as it was before
    /// the binding: an input the program was written or generated keeps
    /// that value) and drops the program's handle to the caller's.
    pub fn unbind(&mut self, name: &str) -> Result<()> {
        let i = self
            .manifest
            .buffer_index(name)
            .ok_or_else(|| Error::InvalidArgument(format!("unbinding buffer `{name}`: the bundle has no buffer of this name")))?;
        if self.bound[i].is_none() {
            return Ok(());
        }
        self.release(i)?;
        self.imp.bind(i, name, None)?;
        self.bound[i] = None;
        self.stale[i] = matches!(self.manifest.buffers[i].init, Init::Zero);
        Ok(())
    }

    /// Before the program lets go of the buffer bound to `i` (the caller
    /// sets `bound[i]` once the device side is rebound): a run that may
    /// use it can still be on the device, and the caller's handle may be
    /// the last one, so a handle is retired until that run is seen
    /// finished. Nothing waits: consecutive runs on new buffers stay
    /// asynchronous (issue #29 item 1).
    fn release(&mut self, i: usize) -> Result<()> {
        self.collect()?;
        if let Some(b) = self.bound[i].as_ref().filter(|_| self.pending) {
            self.retired.push((self.runs, b.clone()));
        }
        Ok(())
    }

    /// Drops the retired handles whose run has finished (and lets the
    /// device free what it staged for finished work); the last run known
    /// finished.
    fn collect(&mut self) -> Result<u64> {
        if !self.pending {
            return Ok(self.runs);
        }
        let done = self.imp.finished(self.runs)?;
        self.retired.retain(|(run, _)| *run > done);
        Ok(done)
    }

    /// Everything enqueued has finished: nothing is pending or retired.
    fn waited(&mut self) {
        self.pending = false;
        self.retired.clear();
    }

    /// Runs enqueued so far ([`run`](Program::run) numbers them from 1).
    pub fn runs(&self) -> u64 {
        self.runs
    }

    /// The last run known to have finished on the device, without waiting
    /// (every run on the emulator, which runs them when enqueued): a
    /// caller that keeps memory alive for the program's runs (the Python
    /// package, for the arrays it imported) may let go of what runs up to
    /// this one used.
    pub fn finished_runs(&mut self) -> Result<u64> {
        self.collect()
    }

    /// The caller's buffer bound to `name`, if any.
    pub fn bound(&self, name: &str) -> Option<&DeviceBuffer> {
        self.manifest.buffer_index(name).and_then(|i| self.bound[i].as_ref())
    }

    /// Enqueues this program's later work (runs, writes, reads) on the
    /// caller's CUDA stream `stream` (a `CUstream`, e.g. PyTorch's
    /// `torch.cuda.current_stream().cuda_stream`), or on the device's own
    /// stream again when it is null; the work already enqueued finishes
    /// first. Runs then return before the kernels finish, until
    /// [`synchronize`](Program::synchronize) or a [`read`](Program::read).
    /// The emulator runs everything when it is enqueued, so there a stream
    /// changes nothing (any value is accepted).
    ///
    /// # Safety
    /// On a GPU, `stream` must be null or a live stream of the device's
    /// context, and stay alive while the program has work enqueued on it
    /// (until the next `synchronize`, `read`, or the program's drop, all
    /// of which wait for it).
    pub unsafe fn use_stream(&mut self, stream: *mut c_void) -> Result<()> {
        // SAFETY: the caller's promise.
        unsafe { self.imp.use_stream(stream) }?;
        self.waited();
        Ok(())
    }

    /// Waits for the work enqueued so far (a GPU's kernel faults surface
    /// here).
    pub fn synchronize(&mut self) -> Result<()> {
        self.imp.synchronize()?;
        self.waited();
        Ok(())
    }

    /// Runs the bundle once, as a fresh one-shot run would: every input
    /// neither bound nor written is generated on the device (once: it is
    /// kept for later runs), every zero-initialised buffer (outputs,
    /// temporaries) is zeroed again when an earlier run wrote it or a
    /// caller's buffer was bound in its place, and the steps are enqueued.
    /// On a GPU it returns before the kernels finish; [`read`] or
    /// [`synchronize`] waits for them. An input neither bound, written nor
    /// generated by the bundle is an [`Error::Input`], before anything
    /// runs.
    ///
    /// [`read`]: Program::read
    /// [`synchronize`]: Program::synchronize
    pub fn run(&mut self) -> Result<()> {
        for (i, b) in self.manifest.buffers.iter().enumerate() {
            if b.role == Role::Input && !self.filled[i] && self.bound[i].is_none() && self.manifest.generator(&b.name).is_none() {
                let reason = format!("not written (expected {} of shape {:?}) and the bundle cannot generate it", b.dtype, b.shape);
                return Err(Error::Input { name: b.name.clone(), reason });
            }
        }
        self.collect()?;
        self.imp.start_run();
        self.pending = true;
        let enqueued = self.enqueue_run();
        // Marked even where enqueueing failed part way: what was enqueued
        // may use the bound buffers.
        self.runs += 1;
        let marked = self.imp.mark(self.runs);
        enqueued.and(marked)
    }

    /// [`run`](Program::run)'s work: generators, zeroing, the steps.
    fn enqueue_run(&mut self) -> Result<()> {
        for i in 0..self.manifest.buffers.len() {
            let b = &self.manifest.buffers[i];
            if b.role == Role::Input && !self.filled[i] && self.bound[i].is_none() {
                self.imp.generate(i)?;
                self.filled[i] = true;
            } else if self.stale[i] {
                self.imp.zero(i)?;
            }
        }
        for (stale, b) in self.stale.iter_mut().zip(&self.manifest.buffers) {
            *stale = matches!(b.init, Init::Zero);
        }
        self.imp.execute()
    }

    /// [`write`](Program::write) each of `inputs`, then [`run`](Program::run).
    pub fn run_with(&mut self, inputs: &BTreeMap<String, Tensor>) -> Result<()> {
        for (name, t) in inputs {
            self.write(name, t)?;
        }
        self.run()
    }

    /// Downloads buffer `name` (any role) as it is after the work enqueued
    /// so far.
    pub fn read(&mut self, name: &str) -> Result<Tensor> {
        let i = self.manifest.buffer_index(name).ok_or_else(|| Error::InvalidArgument(format!("the bundle has no buffer `{name}`")))?;
        self.read_at(i)
    }

    /// Every buffer by name, as [`Device::run`](crate::Device::run) returns them.
    pub fn read_all(&mut self) -> Result<BTreeMap<String, Tensor>> {
        (0..self.manifest.buffers.len()).map(|i| Ok((self.manifest.buffers[i].name.clone(), self.read_at(i)?))).collect()
    }

    fn read_at(&mut self, i: usize) -> Result<Tensor> {
        let bytes = self.imp.download(i)?;
        self.waited();
        let buf = &self.manifest.buffers[i];
        let data = Data::from_ne_bytes(buf.dtype, &bytes).map_err(|e| crate::error::from_bytes(&buf.name, e))?;
        Ok(Tensor { shape: buf.shape.clone(), data })
    }

    /// On the emulator, the profile of every kernel launched since the
    /// program was loaded or this was last called; `None` on a GPU (use
    /// Nsight Compute there).
    pub fn take_profile(&mut self) -> Option<ProfileReport> {
        self.imp.take_profile()
    }
}

impl Drop for Program<'_> {
    /// Work still enqueued finishes before the program's buffers, and its
    /// handles to the caller's, are released (their memory is freed on the
    /// device's stream, which need not be the one the work runs on).
    fn drop(&mut self) {
        if self.pending {
            // Nothing to report to: the error of a run surfaces at the
            // caller's `read` or `synchronize`, or not at all.
            let _ = self.imp.synchronize();
        }
    }
}

#[cfg(test)]
mod tests {
    //! Letting go of a bound buffer while a run may still use it, against
    //! a device whose runs finish when the test says (a GPU's are
    //! asynchronous; the emulator's finish when enqueued).

    use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
    use std::sync::Arc;

    use super::*;
    use crate::buffer::DeviceId;
    use eintup_tensor::tensor::DType;

    /// What the fake device was asked, and the last run it has finished.
    #[derive(Default)]
    struct State {
        finished: AtomicU64,
        synchronized: AtomicUsize,
    }

    struct FakeDevice(Arc<State>);

    impl Resident for FakeDevice {
        fn upload(&mut self, _: usize, _: &str, _: &[u8]) -> Result<()> {
            Ok(())
        }
        fn generate(&mut self, _: usize) -> Result<()> {
            Ok(())
        }
        fn zero(&mut self, _: usize) -> Result<()> {
            Ok(())
        }
        fn execute(&mut self) -> Result<()> {
            Ok(())
        }
        fn start_run(&mut self) {}
        fn mark(&mut self, _: u64) -> Result<()> {
            Ok(())
        }
        fn finished(&mut self, _: u64) -> Result<u64> {
            Ok(self.0.finished.load(Ordering::SeqCst))
        }
        fn download(&mut self, _: usize) -> Result<Vec<u8>> {
            Ok(vec![0; 16])
        }
        fn take_profile(&mut self) -> Option<ProfileReport> {
            None
        }
        fn bind(&mut self, _: usize, _: &str, _: Option<&dyn DeviceMemory>) -> Result<()> {
            Ok(())
        }
        fn synchronize(&mut self) -> Result<()> {
            self.0.synchronized.fetch_add(1, Ordering::SeqCst);
            Ok(())
        }
        unsafe fn use_stream(&mut self, _: *mut c_void) -> Result<()> {
            Ok(())
        }
        fn place(&mut self, m: &Manifest) -> Result<Vec<bool>> {
            Ok(vec![false; m.buffers.len()])
        }
    }

    /// Memory that says when it is freed.
    struct Memory(Arc<AtomicBool>);

    impl DeviceMemory for Memory {
        fn device(&self) -> DeviceId {
            DeviceId::Emu(0)
        }
        fn address(&self) -> u64 {
            // Distinct, aligned, never overlapping: each is its own handle.
            Arc::as_ptr(&self.0) as u64 & !0xf
        }
        fn write(&self, _: &[u8]) -> Result<()> {
            Ok(())
        }
        fn read(&self, bytes: usize) -> Result<Vec<u8>> {
            Ok(vec![0; bytes])
        }
    }

    impl Drop for Memory {
        fn drop(&mut self) {
            self.0.store(true, Ordering::SeqCst);
        }
    }

    fn buffer() -> (DeviceBuffer, Arc<AtomicBool>) {
        let freed = Arc::new(AtomicBool::new(false));
        (DeviceBuffer::new(DType::F32, vec![4], 16, Box::new(Memory(freed.clone()))), freed)
    }

    fn program(state: &Arc<State>) -> Program<'static> {
        let m = serde_json::json!({
            "format_version": 1,
            "producer": "program unit tests",
            "source": {"name": "t.et", "text": ""},
            "config": {"seed": 0, "float": "f32", "eintups": {}},
            "target": {"arch": "sm_80", "ptx_version": "7.0"},
            "buffers": [{"name": "y", "dtype": "f32", "shape": [4], "role": "output", "init": {"kind": "zero"}}],
            "kernels": [{"name": "k", "params": ["y"], "registers": null, "spill_stores": null, "spill_loads": null}],
            "steps": [{"op": "launch", "kernel": "k", "grid": [1, 1, 1], "block": [4, 1, 1], "args": ["y"]}],
        });
        let ptx = ".version 7.0\n.target sm_80\n.address_size 64\n.visible .entry k(.param .u64 k_param_0)\n{\n\tret;\n}\n";
        let bundle = Bundle::new(Manifest::parse(&m.to_string()).unwrap(), ptx.to_string()).unwrap();
        Program::new(&bundle, Box::new(FakeDevice(state.clone())))
    }

    #[test]
    fn a_buffer_let_go_of_during_a_run_is_held_until_the_run_finishes_without_waiting() {
        let state = Arc::new(State::default());
        let mut p = program(&state);
        let (first, first_freed) = buffer();
        p.bind("y", &first).unwrap();
        drop(first);
        p.run().unwrap();
        assert_eq!(p.runs(), 1);
        // The next call's buffer: the first may still be in use by run 1.
        let (second, second_freed) = buffer();
        p.bind("y", &second).unwrap();
        assert!(!first_freed.load(Ordering::SeqCst), "the program's handle was the last: run 1 may still write it");
        assert_eq!(state.synchronized.load(Ordering::SeqCst), 0, "binding waited for the device");
        p.run().unwrap();
        assert_eq!(p.finished_runs().unwrap(), 0);
        assert!(!first_freed.load(Ordering::SeqCst));
        // Run 1 done: its buffer goes, not the one run 2 uses.
        state.finished.store(1, Ordering::SeqCst);
        assert_eq!(p.finished_runs().unwrap(), 1);
        assert!(first_freed.load(Ordering::SeqCst));
        p.unbind("y").unwrap();
        drop(second);
        assert!(!second_freed.load(Ordering::SeqCst), "run 2 has not finished");
        assert_eq!(state.synchronized.load(Ordering::SeqCst), 0);
        // Waiting for everything lets go of everything.
        p.synchronize().unwrap();
        assert!(second_freed.load(Ordering::SeqCst));
        assert_eq!(p.finished_runs().unwrap(), 2);
    }

    #[test]
    fn a_buffer_let_go_of_with_nothing_enqueued_goes_at_once() {
        let state = Arc::new(State::default());
        let mut p = program(&state);
        let (b, freed) = buffer();
        p.bind("y", &b).unwrap();
        drop(b);
        p.unbind("y").unwrap();
        assert!(freed.load(Ordering::SeqCst));
        let (b, freed) = buffer();
        p.bind("y", &b).unwrap();
        drop(b);
        p.run().unwrap();
        p.read("y").unwrap();
        // `read` waited for run 1.
        p.unbind("y").unwrap();
        assert!(freed.load(Ordering::SeqCst));
    }
}
