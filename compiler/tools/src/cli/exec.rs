//! `eintup exec`: run a bundle on the GPU or the PTX emulator (`--device
//! emu`, with `--profile`/`--profile-json`). Inputs not given with `--input`
//! are generated on the host by the shared RANDOM generator from the
//! program and configuration recorded in the manifest, so `exec` of a
//! bundle gives what `run` of its program gives.

use super::ExecArgs;
use eintup::driver::{Failure, Source};
use eintup::interp::RunOptions;
use eintup_runtime::{Bundle, DType, DeviceKind};

pub fn main(args: ExecArgs) -> Result<(), Failure> {
    let b = Bundle::open(&args.bundle).map_err(|e| Failure::user(format!("eintup: error: {}: {e}", args.bundle.display())))?;
    let m = b.manifest();
    let profiling = args.profile || args.profile_json.is_some();
    if profiling && args.device != DeviceKind::Emulator {
        return Err(Failure::user("eintup: error: --profile and --profile-json need --device emu (the profile is the emulator's)"));
    }
    // Everything that can be checked without a device is checked first
    // (exit 2): the program re-specialised to the recorded configuration,
    // its arrays against the bundle's buffers, and the inputs.
    let src = Source::from_string(&m.source.name, &m.source.text);
    if eintup::ir::text::kind_of(&src.text) == eintup::ir::text::TextKind::LoopIr {
        // Built from a loop module (`eintup build M.etir`): there is no
        // program to re-check it against.
        return Err(Failure::user(format!(
            "eintup: error: {}: this bundle was built from a loop module, and `exec` checks a bundle against its source program; run it with `etrun` (the runtime alone: dims from the inputs)",
            args.bundle.display()
        )));
    }
    let inputs = super::run::read_inputs(&args.input)?;
    let bad = |e: eintup_runtime::Error| Failure::user(format!("eintup: error: {}: {e}", args.bundle.display()));
    // A dynamic bundle is bound to the dims its inputs and --binds give,
    // and the program re-specialised to them; a static one keeps its own.
    let (b, binds) = if m.dynamic.is_some() {
        let given = eintup_runtime::dynamic::parse_binds(&args.bind).map_err(bad)?;
        let shapes = inputs.iter().map(|(n, t)| (n.clone(), t.shape.clone())).collect();
        let (bound, dims) = b.bind_given(&shapes, &m.given_dims(&given).map_err(bad)?).map_err(bad)?;
        let binds = m.eintup_binds(&dims).map_err(bad)?;
        eintup_runtime::check::check_inputs(bound.manifest(), &inputs).map_err(bad)?;
        (bound, binds)
    } else if !args.bind.is_empty() {
        return Err(Failure::user(format!(
            "eintup: error: {}: --bind gives dims to a dynamic bundle; this one is static (rebuild it with `eintup build --bind`)",
            args.bundle.display()
        )));
    } else {
        let binds = m.config.eintups.iter().map(|(n, d)| format!("{n}={d:?}")).collect();
        (b, binds)
    };
    let m = b.manifest();
    let seed = args.seed.unwrap_or(m.config.seed);
    let float = match m.config.float {
        DType::F32 => super::FloatWidth::F32,
        _ => super::FloatWidth::F64,
    };
    let (module, config) = eintup::pipeline::specialized_for(&src, &binds, &[], seed, float)?;
    let opts = RunOptions { seed, float, inputs, max_work: args.max_work };
    check_buffers(&module, m, float)
        .map_err(|why| Failure::user(format!("eintup: error: {}: the bundle does not match its own program: {why}", args.bundle.display())))?;
    // The work the bundle's kernels do, estimated from the same lowering
    // `build` made them by (the GPU passes under the bundle's float policy).
    let fp_contract = m.config.fp_contract.as_deref().and_then(|c| c.parse().ok()).unwrap_or_default();
    // The bundle opened, so its manifest's target validated.
    let sm = m.target_arch().map(|(major, minor)| major * 10 + minor).map_err(|e| Failure::user(format!("eintup: error: {}: {e}", args.bundle.display())))?;
    let (planned, _) = eintup::pipeline::planned(&src, &module, float, fp_contract)?;
    let lm = eintup::pipeline::lower_gpu(&src, &planned, &eintup::pipeline::GpuOptions::new(float, fp_contract, sm))?;
    eintup::pipeline::check_loop_work(&src, &planned, &lm, opts.max_work)?;
    let init = eintup::interp::initial_arrays(&module, &opts).map_err(|e| e.into_failure(&src))?;
    let dev = eintup_codegen::gpu::device(args.device)?;
    let arrays = if profiling {
        let (arrays, profile) = eintup_codegen::gpu::run_bundle_profiled(&dev, &b, &module, &init, |e| eintup_codegen::gpu::bundle_failure(&args.bundle, e))?;
        if args.profile {
            eprint!("{}", profile.table());
        }
        if let Some(path) = &args.profile_json {
            std::fs::write(path, profile.to_json()).map_err(|e| Failure::user(format!("eintup: error: cannot write {}: {e}", path.display())))?;
        }
        arrays
    } else {
        eintup_codegen::gpu::run_bundle(&dev, &b, &module, &init, |e| eintup_codegen::gpu::bundle_failure(&args.bundle, e))?
    };
    super::run::emit(args.out.as_deref(), &args.print, &module, &arrays, seed, &config)
}

/// Each array of the re-specialised program must be a buffer of the
/// bundle with the same element type and shape: a bundle edited or damaged
/// after `build` is refused here, not by a device.
fn check_buffers(module: &eintup::ir::et::Module, m: &eintup_runtime::Manifest, float: super::FloatWidth) -> Result<(), String> {
    for (id, a) in module.arrays.iter().enumerate() {
        let b = m.buffers.iter().find(|b| b.name == a.name).ok_or_else(|| format!("it has no buffer for array `{}`", a.name))?;
        let dtype = float.dtype_of(a.dtype);
        let shape: Vec<usize> = module.array_shape(id).unwrap_or_default().iter().map(|&d| d.max(0) as usize).collect();
        if b.dtype != dtype || b.shape != shape {
            return Err(format!("buffer `{}` is {} {:?}, but the program's array is {dtype} {shape:?}", b.name, b.dtype, b.shape));
        }
    }
    Ok(())
}
