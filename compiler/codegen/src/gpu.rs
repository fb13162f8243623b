//! The GPU backends: bundles run through the thin runtime
//! (`eintup-runtime`), on a CUDA device or on the runtime's PTX emulator
//! (docs/emulator.md). Machines without a CUDA driver or device get exit
//! code 3 with the runtime's one-line reason, before anything is compiled.

use crate::bundle::{self, BuildOptions};
use crate::FpContract;
use eintup::driver::{Failure, Source};
use eintup::interp::RunOptions;
use eintup::ir::et::Module;
use eintup::tensor::Tensor;
use eintup_runtime::{Bundle, Device, DeviceKind, ProfileReport};
use std::collections::BTreeMap;

/// Compute capability the in-memory bundle of `run --backend gpu` targets
/// by default: the oldest the project tests on, so it runs on every device
/// we test (the core's `--target` default).
pub use eintup::ir::loops::target::DEFAULT_SM;

/// Opens CUDA device 0 or the emulator, mapping "no driver"/"no device"
/// to exit code 3.
pub fn device(kind: DeviceKind) -> Result<Device, Failure> {
    Device::open(kind).map_err(|e| match e {
        eintup_runtime::Error::NoDriver | eintup_runtime::Error::NoDevice { .. } => Failure::Unavailable(e.to_string()),
        e => Failure::Internal(format!("CUDA: {e}")),
    })
}

/// The compute capability eintup builds for on `dev` (`sm_XX` as XX): the
/// device's own, within the range the project supports.
pub fn device_sm(dev: &Device) -> u32 {
    sm_for_arch(dev.arch())
}

/// The compute capability eintup builds for on a device of capability
/// `(major, minor)`: its own, from [`DEFAULT_SM`] to the newest eintup
/// supports (a newer device runs that PTX).
pub fn sm_for_arch((major, minor): (u32, u32)) -> u32 {
    (major * 10 + minor).clamp(DEFAULT_SM, crate::nvptx::NEWEST_SM)
}

/// A runtime error of a bundle eintup built: the compiler's bug, with the
/// device's words (a kernel fault names kernel, block, thread and line).
pub fn runtime_failure(e: eintup_runtime::Error) -> Failure {
    match e {
        eintup_runtime::Error::Fault(f) => Failure::Internal(format!("kernel fault on the emulator: {f}")),
        // The configuration is too large for this machine: the user's to change.
        e @ eintup_runtime::Error::OutOfMemory { .. } => Failure::user(format!("eintup: error: {e}")),
        e => Failure::Internal(format!("CUDA: {e}")),
    }
}

/// A runtime error of a bundle the user gave (`exec`): classified as
/// `etrun` classifies it (`Error::exit_code`), so a defect of the bundle
/// is exit 2 and says so, not an internal compiler error.
pub fn bundle_failure(path: &std::path::Path, e: eintup_runtime::Error) -> Failure {
    match e.exit_code() {
        2 => Failure::User(format!("eintup: error: {}: {e}", path.display())),
        3 => Failure::Unavailable(e.to_string()),
        _ => Failure::Internal(format!("CUDA: {e}")),
    }
}

/// `run --backend gpu|emu`: build the bundle in memory and run it.
pub fn execute(src: &Source, module: &Module, opts: &RunOptions, kind: DeviceKind, fp_contract: FpContract) -> Result<Vec<Tensor>, Failure> {
    let dev = device(kind)?;
    let sm = device_sm(&dev);
    let (planned, _) = eintup::pipeline::planned(src, module, opts.float, fp_contract)?;
    let lm = eintup::pipeline::lower_gpu(src, &planned, &eintup::pipeline::GpuOptions::new(opts.float, fp_contract, sm))?;
    eintup::pipeline::check_loop_work(src, &planned, &lm, opts.max_work)?;
    let config = eintup::sema::Config::fixed(module.eintups.iter().map(|e| (e.name.clone(), e.dims.clone().unwrap_or_default())).collect());
    let b = bundle::build(src, module, &lm, &config, &BuildOptions { seed: opts.seed, float: opts.float, sm, fp_contract })?;
    let init = eintup::interp::initial_arrays(module, opts).map_err(|e| e.into_failure(src))?;
    run_bundle(&dev, &b, module, &init, runtime_failure)
}

/// Runs a bundle whose first buffers are `module`'s arrays, with their
/// initial contents `init`; returns every array in module order. `fail`
/// says whose defect a runtime error is: [`runtime_failure`] for a bundle
/// eintup just built, [`bundle_failure`] for one the user gave.
pub fn run_bundle(dev: &Device, b: &Bundle, module: &Module, init: &[Tensor], fail: impl Fn(eintup_runtime::Error) -> Failure) -> Result<Vec<Tensor>, Failure> {
    let out = dev.run(b, &bundle_inputs(module, init)).map_err(fail)?;
    module_arrays(module, out)
}

/// [`run_bundle`] on the emulator, with its memory profile
/// (docs/emulator.md).
pub fn run_bundle_profiled(
    dev: &Device,
    b: &Bundle,
    module: &Module,
    init: &[Tensor],
    fail: impl Fn(eintup_runtime::Error) -> Failure,
) -> Result<(Vec<Tensor>, ProfileReport), Failure> {
    let (out, profile) = dev.run_profiled(b, &bundle_inputs(module, init)).map_err(fail)?;
    Ok((module_arrays(module, out)?, profile))
}

/// The input arrays by name, as the runtime takes them.
fn bundle_inputs(module: &Module, init: &[Tensor]) -> BTreeMap<String, Tensor> {
    module.arrays.iter().zip(init).filter(|(a, _)| a.is_input).map(|(a, t)| (a.name.clone(), t.clone())).collect()
}

/// The device's buffers as the module's arrays, in module order.
fn module_arrays(module: &Module, mut out: BTreeMap<String, Tensor>) -> Result<Vec<Tensor>, Failure> {
    module.arrays.iter().map(|a| out.remove(&a.name).ok_or_else(|| Failure::Internal(format!("the device returned no buffer `{}`", a.name)))).collect()
}
