//! `etbench --gpu-kit DIR`: the benchmark ops at GPU sizes as PTX bundles
//! for `scripts/gpu-check`, plus `DIR/ops.json` describing each (what the
//! PyTorch peer computes and how much work it is). No input is generated
//! here: `etrun` makes the inputs on the device from the bundles'
//! `generate` kernels, so nothing large is shipped.

use crate::ops::{Metric, Op};
use eintup::driver::Source;
use eintup::pipeline::GpuOptions;
use eintup_codegen::bundle::{build, BuildOptions};
use std::path::Path;

/// The architecture the kit's bundles target: Hopper, the GPUs we are lent.
pub const KIT_SM: u32 = 90;

pub fn write(ops_dir: &Path, dir: &Path, ops: &[Op]) -> Result<(), String> {
    std::fs::create_dir_all(dir).map_err(|e| format!("{}: {e}", dir.display()))?;
    let mut listed = Vec::new();
    for op in ops {
        eprintln!("bench: gpu kit {}", op.name);
        // One failing op is reported and the others go on.
        match bundle(ops_dir, dir, op) {
            Ok(()) => listed.push(serde_json::json!({
                "name": op.name,
                "kind": op.kind,
                "params": op.params,
                "float": match op.float { eintup::ir::loops::FloatWidth::F32 => "f32", eintup::ir::loops::FloatWidth::F64 => "f64" },
                "binds": op.binds,
                "unit": op.metric.unit(),
                "memory_bound": op.metric == Metric::Gbytes,
                "work": op.work,
                "bundle": format!("{}.etb", op.name),
            })),
            Err(e) => {
                eprintln!("bench: gpu kit {}: {e}", op.name);
                listed.push(serde_json::json!({ "name": op.name, "error": e }));
            }
        }
    }
    let text = serde_json::to_string_pretty(&listed).map_err(|e| e.to_string())?;
    let path = dir.join("ops.json");
    std::fs::write(&path, text + "\n").map_err(|e| format!("{}: {e}", path.display()))
}

fn bundle(ops_dir: &Path, dir: &Path, op: &Op) -> Result<(), String> {
    write_bundle(&Specialized::of(ops_dir, op)?, &[], &dir.join(format!("{}.etb", op.name)))
}

/// An op's program specialised to its sizes: what every bundle of it
/// (the benchmark's and each tuning variant's) is compiled from.
pub struct Specialized {
    pub src: Source,
    pub module: eintup::ir::et::Module,
    pub config: eintup::sema::Config,
    pub float: eintup::ir::loops::FloatWidth,
}

impl Specialized {
    pub fn of(ops_dir: &Path, op: &Op) -> Result<Specialized, String> {
        let src = Source::load(&ops_dir.join(op.file)).map_err(|e| e.to_string())?;
        let (module, config) = eintup::pipeline::specialized_for(&src, &op.binds, &[], 0, op.float).map_err(|e| e.to_string())?;
        Ok(Specialized { src, module, config, float: op.float })
    }
}

/// `s` compiled for the kit's GPU with the candidates `choices` forced
/// (`(pass, choice)`; none: the tuning table's or the heuristic's), written
/// to `path`; it must generate all its inputs on the device.
pub fn write_bundle(s: &Specialized, choices: &[(String, String)], path: &Path) -> Result<(), String> {
    compile_bundle(s, choices)?.write(path).map_err(|e| e.to_string())
}

/// `s` compiled for the kit's GPU with `choices` forced, as a bundle that
/// generates all its inputs on the device.
pub fn compile_bundle(s: &Specialized, choices: &[(String, String)]) -> Result<eintup_runtime::Bundle, String> {
    let (src, module, config, float) = (&s.src, &s.module, &s.config, s.float);
    let fp_contract = eintup_codegen::FpContract::default();
    let opts = GpuOptions { choices: choices.to_vec(), ..GpuOptions::new(float, fp_contract, KIT_SM) };
    let (planned, _) = eintup::pipeline::planned(src, module, float, fp_contract).map_err(|e| e.to_string())?;
    let loops = eintup::pipeline::lower_gpu(src, &planned, &opts).map_err(|e| e.to_string())?;
    let b = build(src, module, &loops, config, &BuildOptions { seed: 0, float, sm: KIT_SM, fp_contract }).map_err(|e| e.to_string())?;
    let missing: Vec<&str> = b.manifest().inputs().filter(|i| b.manifest().generator(&i.name).is_none()).map(|i| i.name.as_str()).collect();
    if !missing.is_empty() {
        return Err(format!("the bundle cannot generate input(s) {}", missing.join(", ")));
    }
    Ok(b)
}
