//! `eintup exec`: run a bundle on the GPU. Inputs not given with `--input`
//! are generated on the host by the shared RANDOM generator from the
//! program and configuration recorded in the manifest, so `exec` of a
//! bundle gives what `run` of its program gives.

use super::ExecArgs;
use eintup::driver::{Failure, Source};
use eintup::interp::RunOptions;
use eintup_runtime::{Bundle, DType};

pub fn main(args: ExecArgs) -> Result<(), Failure> {
    let b = Bundle::open(&args.bundle).map_err(|e| Failure::user(format!("eintup: error: {}: {e}", args.bundle.display())))?;
    let m = b.manifest();
    let dev = eintup_codegen::gpu::device()?;
    // The program, re-specialised to the recorded configuration.
    let src = Source::from_string(&m.source.name, &m.source.text);
    let binds: Vec<String> = m.config.eintups.iter().map(|(n, d)| format!("{n}={d:?}")).collect();
    let seed = args.seed.unwrap_or(m.config.seed);
    let float = match m.config.float {
        DType::F32 => super::FloatWidth::F32,
        _ => super::FloatWidth::F64,
    };
    let (module, config) = eintup::pipeline::specialized_for(&src, &binds, &[], seed, float)?;
    let inputs = super::run::read_inputs(&args.input)?;
    let opts = RunOptions { seed, float, inputs };
    let init = eintup::interp::initial_arrays(&module, &opts).map_err(|e| e.into_failure(&src))?;
    let arrays = eintup_codegen::gpu::run_bundle(&dev, &b, &module, &init)?;
    match &args.out {
        Some(dir) => super::run::write_out(dir, &module, &arrays, seed, &config),
        None => {
            print!("{}", super::run::render_outputs(&module, &arrays));
            Ok(())
        }
    }
}
