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

use std::collections::BTreeMap;

use crate::backend::{self, Backend, Prepared};
use crate::check::check_input;
use crate::profile::ProfileReport;
use crate::error::{Error, Result};
use crate::manifest::{Init, Manifest, Role};
use eintup_tensor::tensor::{Data, Tensor};

/// A bundle resident on a device: its module, kernels and buffers, kept
/// between runs.
pub struct Program<'d> {
    manifest: Manifest,
    imp: Box<dyn Resident + 'd>,
    /// Per buffer: an input the caller wrote, or one generated since.
    filled: Vec<bool>,
    /// Whether a run has written the zero-initialised buffers since they
    /// were last zeroed.
    dirty: bool,
}

/// The backend-independent operations a program needs, over one loaded
/// bundle ([`Loaded`]); a trait object so that [`Program`] has no type
/// parameter for its device.
pub(crate) trait Resident {
    fn upload(&mut self, i: usize, name: &str, host: &[u8]) -> Result<()>;
    fn generate(&mut self, i: usize) -> Result<()>;
    fn zero(&mut self, i: usize) -> Result<()>;
    fn execute(&mut self) -> Result<()>;
    /// Another run begins (before its generators, zeroing and steps).
    fn start_run(&mut self);
    /// Buffer `i`'s bytes, after everything enqueued before has finished.
    fn download(&mut self, i: usize) -> Result<Vec<u8>>;
    /// The emulator's profile of the launches since the last call.
    fn take_profile(&mut self) -> Option<ProfileReport>;
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
    fn download(&mut self, i: usize) -> Result<Vec<u8>> {
        let bytes = backend::download_one(&mut self.b, &self.p, i)?;
        // Kernel faults of a GPU surface here, at the first synchronisation.
        self.b.synchronize()?;
        Ok(bytes)
    }
    fn take_profile(&mut self) -> Option<ProfileReport> {
        self.b.take_profile()
    }
}

impl<'d> Program<'d> {
    pub(crate) fn new(manifest: Manifest, imp: Box<dyn Resident + 'd>) -> Program<'d> {
        let n = manifest.buffers.len();
        Program { manifest, imp, filled: vec![false; n], dirty: false }
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
        self.imp.upload(i, name, &t.data.to_ne_bytes())?;
        self.filled[i] = true;
        Ok(())
    }

    /// Makes input `name` the bundle's generated values again (its
    /// generator runs now), after a [`write`](Program::write) replaced them.
    pub fn generate(&mut self, name: &str) -> Result<()> {
        let i = self.manifest.buffer_index(name).filter(|&i| self.manifest.buffers[i].role == Role::Input).ok_or_else(|| Error::Input { name: name.to_string(), reason: "the bundle has no input of this name".into() })?;
        if self.manifest.generator(name).is_none() {
            return Err(Error::Input { name: name.to_string(), reason: "the bundle cannot generate it".into() });
        }
        self.imp.generate(i)?;
        self.filled[i] = true;
        Ok(())
    }

    /// Runs the bundle once, as a fresh one-shot run would: every input
    /// never written is generated on the device (once: it is kept for
    /// later runs), every zero-initialised buffer (outputs, temporaries)
    /// is zeroed again when an earlier run wrote it, and the steps are
    /// enqueued. On a GPU it returns before the kernels finish; [`read`]
    /// waits for them. An input neither written nor generated by the
    /// bundle is an [`Error::Input`], before anything runs.
    ///
    /// [`read`]: Program::read
    pub fn run(&mut self) -> Result<()> {
        for (i, b) in self.manifest.buffers.iter().enumerate() {
            if b.role == Role::Input && !self.filled[i] && self.manifest.generator(&b.name).is_none() {
                let reason = format!("not written (expected {} of shape {:?}) and the bundle cannot generate it", b.dtype, b.shape);
                return Err(Error::Input { name: b.name.clone(), reason });
            }
        }
        self.imp.start_run();
        for i in 0..self.manifest.buffers.len() {
            let b = &self.manifest.buffers[i];
            if b.role == Role::Input && !self.filled[i] {
                self.imp.generate(i)?;
                self.filled[i] = true;
            } else if self.dirty && matches!(b.init, Init::Zero) {
                self.imp.zero(i)?;
            }
        }
        self.dirty = true;
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
        let buf = &self.manifest.buffers[i];
        let data = Data::from_ne_bytes(buf.dtype, &bytes).ok_or_else(|| Error::Driver(format!("buffer `{}`: downloaded {} bytes", buf.name, bytes.len())))?;
        Ok(Tensor { shape: buf.shape.clone(), data })
    }

    /// On the emulator, the profile of every kernel launched since the
    /// program was loaded or this was last called; `None` on a GPU (use
    /// Nsight Compute there).
    pub fn take_profile(&mut self) -> Option<ProfileReport> {
        self.imp.take_profile()
    }
}
