//! `etbench --gpu-kit DIR --tune`: the tuner's bundles (issue #30 item
//! 6; docs/tuning.md). For each tuned op and size, every combination of
//! the `register-tiles` candidates and, for each, the `block-tiles`
//! candidates of the kernel it leaves; and, on the heuristic's
//! combination only, the `arrange-threads` candidates that differ from
//! the heuristic's arrangement in one part (the warp shape or the group),
//! as one bundle each under
//! `DIR/tune/`, listed in `DIR/tune/tune.json` with the kernel shape each
//! pass saw (the key the tuning table records the winner under). The kit
//! (`KIT/run OUT --tune`) times them on a GPU; `scripts/gpu-check import`
//! turns the times into the tuning table. Each variant also carries the
//! cost model's prediction (`predicted_ms`, `kernels`: [`crate::model`]),
//! which the kit's report compares with what it measures.
//! The variants themselves are [`crate::variants`]'s.

use crate::kit::{compile_bundle, Specialized, KIT_SM};
use crate::ops::Op;
use crate::variants::variants;
use std::path::Path;

pub fn write(ops_dir: &Path, dir: &Path, ops: &[Op]) -> Result<(), String> {
    let tdir = dir.join("tune");
    std::fs::create_dir_all(&tdir).map_err(|e| format!("{}: {e}", tdir.display()))?;
    let dev = crate::model::emulator();
    let mut groups = Vec::new();
    for (gi, op) in ops.iter().enumerate() {
        let size = op.binds.join(" ");
        eprintln!("bench: tune {} {size}", op.name);
        let (spec, variants) = match Specialized::of(ops_dir, op).and_then(|s| variants(&s).map(|v| (s, v))) {
            Ok(sv) => sv,
            Err(e) => {
                eprintln!("bench: tune {}: {e}", op.name);
                groups.push(serde_json::json!({ "op": op.name, "size": size, "error": e }));
                continue;
            }
        };
        let mut listed = Vec::new();
        for (vi, v) in variants.iter().enumerate() {
            let file = format!("{}-{gi}-{vi}.etb", op.name);
            let written = compile_bundle(&spec, &v.choices).and_then(|b| b.write(tdir.join(&file)).map(|()| b).map_err(|e| e.to_string()));
            match written {
                Ok(b) => {
                    let mut entry = serde_json::json!({
                        "bundle": file,
                        "choices": crate::model::choice_map(&v.choices),
                        "shapes": v.shapes.iter().map(|(p, s)| (p.clone(), serde_json::to_value(s).unwrap_or_default())).collect::<serde_json::Map<_, _>>(),
                    });
                    // A variant the model cannot profile is still timed.
                    match crate::model::model(&dev, &b, crate::model::registers(&v.choices), crate::cost::LATEST.0, crate::cost::LATEST.1) {
                        Ok(m) => {
                            entry["predicted_ms"] = serde_json::json!(m.predicted_ms);
                            entry["kernels"] = serde_json::json!(m.kernels);
                        }
                        Err(e) => eprintln!("bench: tune {} variant {vi}: no prediction: {e}", op.name),
                    }
                    listed.push(entry);
                }
                Err(e) => eprintln!("bench: tune {} variant {vi}: {e}", op.name),
            }
        }
        groups.push(serde_json::json!({ "op": op.name, "size": size, "float": op.float.name(), "variants": listed }));
    }
    let model = serde_json::json!({ "gpu": crate::cost::LATEST.0.name, "fitted": crate::cost::LATEST.1, "sample_blocks": crate::model::SAMPLE_BLOCKS });
    let text = serde_json::to_string_pretty(&serde_json::json!({ "sm": KIT_SM, "model": model, "groups": groups })).map_err(|e| e.to_string())?;
    let path = tdir.join("tune.json");
    std::fs::write(&path, text + "\n").map_err(|e| format!("{}: {e}", path.display()))
}
