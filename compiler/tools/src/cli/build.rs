//! `eintup build`: compile one configuration of a program ahead of time
//! into a PTX bundle (docs/bundle.md).

use super::BuildArgs;
use eintup_codegen::bundle::{self, BuildOptions};
use eintup::driver::{count, Failure, Source};

pub fn main(args: BuildArgs) -> Result<(), Failure> {
    let sm = parse_target(&args.target)?;
    let src = Source::load(&args.file)?;
    let (module, config) = eintup::pipeline::specialized_for(&src, &args.bind, &[], args.seed, args.float)?;
    super::run::print_warnings(&src, &config.warnings);
    let lm = eintup::pipeline::lower_gpu(&src, &module, &eintup::pipeline::GpuOptions::new(args.float, args.fp_contract, sm))?;
    let b = bundle::build(&src, &module, &lm, &config, &BuildOptions { seed: args.seed, float: args.float, sm, fp_contract: args.fp_contract })?;
    b.write(&args.output).map_err(|e| Failure::user(format!("eintup: error: cannot write bundle {}: {e}", args.output.display())))?;
    let m = b.manifest();
    eprintln!(
        "wrote {} ({}, {}, {} generated on the device, sm_{sm}, PTX {})",
        args.output.display(),
        count(m.kernels.len(), "kernel", "kernels"),
        count(m.steps.len(), "launch", "launches"),
        count(m.generate.len(), "input", "inputs"),
        m.target.ptx_version
    );
    Ok(())
}

/// `sm_80` -> 80; the architectures LLVM 19's NVPTX backend and the
/// bundle format support.
pub fn parse_target(t: &str) -> Result<u32, Failure> {
    let sm = t.strip_prefix("sm_").and_then(|n| n.parse::<u32>().ok());
    match sm {
        Some(sm) if (60..=90).contains(&sm) => Ok(sm),
        _ => Err(Failure::user(format!("eintup: error: --target {t}: expected sm_60 .. sm_90 (e.g. sm_80, sm_90)"))),
    }
}
