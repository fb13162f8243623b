//! A PTX module loaded into a context through the driver's JIT.
//!
//! cudarc's `CudaContext::load_module` only exists with its `nvrtc` feature,
//! which this project leaves off (no NVRTC library is needed or wanted), so
//! the module is loaded with `cuModuleLoadDataEx` directly. Going direct also
//! lets us ask the JIT for its error log, which turns "CUDA_ERROR_INVALID_PTX"
//! into a message naming the offending PTX line.

use std::ffi::{c_void, CString};
use std::mem::MaybeUninit;
use std::sync::Arc;

use cudarc::driver::{result, sys, CudaContext};

use crate::error::{driver, Error, Result};

/// Bytes reserved for the JIT's error log; ptxas messages are a few lines.
const JIT_LOG_BYTES: usize = 16 * 1024;

/// A loaded module; unloaded on drop.
pub(crate) struct Module {
    ctx: Arc<CudaContext>,
    raw: sys::CUmodule,
}

impl Module {
    /// JIT-compiles `ptx` for the context's device. The context must be
    /// current on this thread.
    pub(crate) fn load(ctx: &Arc<CudaContext>, ptx: &str) -> Result<Module> {
        let src = CString::new(ptx).map_err(|_| Error::BadPtx("contains a NUL byte".into()))?;
        let mut log = vec![0u8; JIT_LOG_BYTES];
        let mut options = [sys::CUjit_option::CU_JIT_ERROR_LOG_BUFFER, sys::CUjit_option::CU_JIT_ERROR_LOG_BUFFER_SIZE_BYTES];
        // The driver reads option values as pointer-sized words; a size is
        // passed by value, cast to a pointer (CUDA driver API, cuModuleLoadDataEx).
        let mut values: [*mut c_void; 2] = [log.as_mut_ptr().cast(), JIT_LOG_BYTES as *mut c_void];
        let mut raw = MaybeUninit::uninit();
        // SAFETY: `src` is NUL-terminated and outlives the call; `log` has the
        // size announced in `values`; both arrays hold `options.len()` items.
        let status = unsafe { sys::cuModuleLoadDataEx(raw.as_mut_ptr(), src.as_ptr().cast(), options.len() as u32, options.as_mut_ptr(), values.as_mut_ptr()) };
        match status.result() {
            // SAFETY: on success the driver wrote the module handle.
            Ok(()) => Ok(Module { ctx: ctx.clone(), raw: unsafe { raw.assume_init() } }),
            Err(e) => {
                let end = log.iter().position(|&b| b == 0).unwrap_or(log.len());
                let text = String::from_utf8_lossy(&log[..end]);
                match driver("cuModuleLoadDataEx", e) {
                    Error::Driver(msg) if !text.trim().is_empty() => Err(Error::Driver(format!("{msg}\n{}", text.trim_end()))),
                    other => Err(other),
                }
            }
        }
    }

    /// The kernel `name`; valid while `self` lives.
    pub(crate) fn function(&self, name: &str) -> Result<sys::CUfunction> {
        let c_name = CString::new(name).map_err(|_| Error::BadPtx(format!("kernel name {name:?} contains NUL")))?;
        // SAFETY: `self.raw` is a loaded module until drop.
        unsafe { result::module::get_function(self.raw, c_name) }.map_err(|e| driver(&format!("cuModuleGetFunction({name})"), e))
    }
}

impl Drop for Module {
    fn drop(&mut self) {
        // Errors cannot be returned from drop; cudarc keeps them in the
        // context, where the next checked call reports them.
        self.ctx.record_err(self.ctx.bind_to_thread());
        // SAFETY: loaded in `load`, unloaded only here.
        self.ctx.record_err(unsafe { result::module::unload(self.raw) });
    }
}
