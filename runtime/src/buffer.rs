//! Device buffers the caller owns (issue #29 item 1; docs/runtime.md,
//! "Device buffers").
//!
//! A [`DeviceBuffer`] is device memory with a dtype and a shape, made by a
//! [`Device`](crate::Device): allocated zeroed ([`Device::alloc`]), uploaded
//! from a tensor ([`Device::upload`]), or wrapping memory someone else owns
//! ([`Device::wrap`], for interop: a PyTorch tensor's pointer). A
//! [`Program`](crate::Program) bound to it ([`Program::bind`]) runs its
//! kernels on it in place of its own buffer, with no copy.
//!
//! Lifetimes are reference-counted rather than borrowed: a `DeviceBuffer`
//! is a handle (clones share the memory), and a program keeps a handle to
//! every buffer bound to it, so memory can never be freed while a program
//! may still launch on it, whatever order the caller drops things in. A
//! borrow (`Program<'b>` over `&'b DeviceBuffer`) would prove the same at
//! compile time, but could not cross the C ABI or a Python object, which
//! own their handles.
//!
//! [`Device::alloc`]: crate::Device::alloc
//! [`Device::upload`]: crate::Device::upload
//! [`Device::wrap`]: crate::Device::wrap
//! [`Program::bind`]: crate::Program::bind

use std::fmt;
use std::sync::Arc;

use crate::error::{Error, Result};
use eintup_tensor::tensor::element_count;
use eintup_tensor::tensor::{DType, Data, Tensor};

/// Device memory the caller owns, with the dtype and shape of its contents.
/// Cloning gives another handle to the same memory; it is freed (unless
/// wrapped) when the last handle, the caller's or a program's, is dropped.
#[derive(Clone)]
pub struct DeviceBuffer {
    inner: Arc<Inner>,
}

struct Inner {
    dtype: DType,
    shape: Vec<usize>,
    bytes: usize,
    memory: Box<dyn DeviceMemory>,
}

/// The device a buffer's memory belongs to: a program binds only its own
/// device's buffers. The emulator's memory, or a CUDA context (two devices
/// of one ordinal share the primary context, and so their memory).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum DeviceId {
    Emu(usize),
    Cuda(usize),
}

/// One kind of device's memory behind a [`DeviceBuffer`] (implemented in
/// `emu` and `cuda`, which sit above this module).
pub(crate) trait DeviceMemory: Send + Sync {
    fn device(&self) -> DeviceId;
    /// The device address kernels receive.
    fn address(&self) -> u64;
    /// Copies `host` (the buffer's size) in; complete when it returns.
    fn write(&self, host: &[u8]) -> Result<()>;
    /// The buffer's `bytes` bytes.
    fn read(&self, bytes: usize) -> Result<Vec<u8>>;
}

impl fmt::Debug for DeviceBuffer {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("DeviceBuffer")
            .field("dtype", &self.inner.dtype)
            .field("shape", &self.inner.shape)
            .field("device_ptr", &format_args!("{:#x}", self.device_ptr()))
            .finish()
    }
}

/// The byte size of `dtype` elements of `shape`; `InvalidArgument` when it
/// overflows.
pub fn byte_size(dtype: DType, shape: &[usize]) -> Result<usize> {
    element_count(shape)
        .and_then(|n| n.checked_mul(dtype.size()))
        .ok_or_else(|| Error::InvalidArgument(format!("a buffer of {dtype} and shape {shape:?} has more bytes than this machine addresses")))
}

impl DeviceBuffer {
    pub(crate) fn new(dtype: DType, shape: Vec<usize>, bytes: usize, memory: Box<dyn DeviceMemory>) -> DeviceBuffer {
        DeviceBuffer { inner: Arc::new(Inner { dtype, shape, bytes, memory }) }
    }

    pub fn dtype(&self) -> DType {
        self.inner.dtype
    }

    pub fn shape(&self) -> &[usize] {
        &self.inner.shape
    }

    /// Bytes of the contents (the shape's elements times the dtype's size).
    pub fn byte_size(&self) -> usize {
        self.inner.bytes
    }

    /// The device address kernels receive (null for an empty buffer).
    pub fn device_ptr(&self) -> u64 {
        self.inner.memory.address()
    }

    pub(crate) fn memory(&self) -> &dyn DeviceMemory {
        &*self.inner.memory
    }

    /// Copies `t` (this buffer's dtype and shape) into the buffer; returns
    /// when the copy is done. On a GPU it goes through the device's own
    /// stream: work the caller enqueued on another stream is not waited for.
    pub fn write(&self, t: &Tensor) -> Result<()> {
        if let Err(reason) = t.check() {
            return Err(Error::InvalidArgument(format!("writing a DeviceBuffer: {reason}")));
        }
        if t.dtype() != self.inner.dtype || t.shape != self.inner.shape {
            return Err(Error::InvalidArgument(format!(
                "writing a DeviceBuffer of {} and shape {:?} from a tensor of {} and shape {:?}",
                self.inner.dtype,
                self.inner.shape,
                t.dtype(),
                t.shape
            )));
        }
        self.inner.memory.write(t.data.as_ne_bytes())
    }

    /// The buffer's contents as a host tensor (after the work enqueued on
    /// the device's own stream; see [`write`](DeviceBuffer::write)).
    pub fn read(&self) -> Result<Tensor> {
        let bytes = self.inner.memory.read(self.inner.bytes)?;
        let data = Data::from_ne_bytes(self.inner.dtype, &bytes).map_err(|e| crate::error::from_bytes("DeviceBuffer", e))?;
        Ok(Tensor { shape: self.inner.shape.clone(), data })
    }
}
