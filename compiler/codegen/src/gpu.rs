//! The GPU backend: bundles run through the thin runtime
//! (`eintup-runtime`). Machines without a CUDA driver or device get exit
//! code 3 with the runtime's one-line reason, before anything is compiled.

use crate::bundle::{self, BuildOptions};
use eintup::driver::{Failure, Source};
use eintup::interp::RunOptions;
use eintup::ir::et::Module;
use eintup::tensor::Tensor;
use eintup_runtime::{Bundle, Device};
use std::collections::BTreeMap;

/// Compute capability the in-memory bundle of `run --backend gpu` targets:
/// the oldest the project supports, so it runs on every device we test.
pub const DEFAULT_SM: u32 = 80;

/// Opens device 0, mapping "no driver"/"no device" to exit code 3.
pub fn device() -> Result<Device, Failure> {
    Device::new(0).map_err(|e| match e {
        eintup_runtime::Error::NoDriver | eintup_runtime::Error::NoDevice { .. } => Failure::Unavailable(e.to_string()),
        e => Failure::Internal(format!("CUDA: {e}")),
    })
}

/// `run --backend gpu`: build the bundle in memory and run it.
pub fn execute(src: &Source, module: &Module, opts: &RunOptions) -> Result<Vec<Tensor>, Failure> {
    let dev = device()?;
    let lm = eintup::pipeline::lower(src, module, opts.float)?;
    let config = eintup::sema::Config::fixed(module.eintups.iter().map(|e| (e.name.clone(), e.dims.clone().unwrap_or_default())).collect());
    let sm = (dev.arch().0 * 10 + dev.arch().1).clamp(DEFAULT_SM, 90);
    let b = bundle::build(src, module, &lm, &config, &BuildOptions { seed: opts.seed, float: opts.float, sm })?;
    let init = eintup::interp::initial_arrays(module, opts).map_err(|e| e.into_failure(src))?;
    run_bundle(&dev, &b, module, &init)
}

/// Runs a bundle whose first buffers are `module`'s arrays, with their
/// initial contents `init`; returns every array in module order.
pub fn run_bundle(dev: &Device, b: &Bundle, module: &Module, init: &[Tensor]) -> Result<Vec<Tensor>, Failure> {
    let mut inputs = BTreeMap::new();
    for (a, t) in module.arrays.iter().zip(init) {
        if a.is_input {
            inputs.insert(a.name.clone(), t.clone());
        }
    }
    let mut out = dev.run(b, &inputs).map_err(|e| Failure::Internal(format!("CUDA: {e}")))?;
    module
        .arrays
        .iter()
        .map(|a| out.remove(&a.name).ok_or_else(|| Failure::Internal(format!("the device returned no buffer `{}`", a.name))))
        .collect()
}
