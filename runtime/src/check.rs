//! Checks made before anything is launched: the caller's inputs against the
//! manifest, and the bundle's target against the device. Both are pure so
//! that they are tested on machines without a GPU.

use std::collections::BTreeMap;

use crate::error::{Error, Result};
use crate::manifest::{Manifest, Role};
use crate::tensor::HostTensor;

/// Every input buffer supplied, no unknown or non-input names, dtype and
/// shape equal to the buffer's, and each tensor internally consistent.
/// Reports the first problem, in manifest order for missing inputs.
pub fn check_inputs(manifest: &Manifest, inputs: &BTreeMap<String, HostTensor>) -> Result<()> {
    let err = |name: &str, reason: String| Err(Error::Input { name: name.to_string(), reason });
    for (name, t) in inputs {
        let Some(b) = manifest.buffer(name) else {
            return err(name, "the bundle has no buffer of this name".into());
        };
        if b.role != Role::Input {
            let role = if b.role == Role::Output { "an output" } else { "a temporary" };
            return err(name, format!("is {role} buffer, not an input"));
        }
        if let Err(reason) = t.check() {
            return err(name, reason);
        }
        if t.dtype != b.dtype {
            return err(name, format!("dtype {}, expected {}", t.dtype, b.dtype));
        }
        if t.shape != b.shape {
            return err(name, format!("shape {:?}, expected {:?}", t.shape, b.shape));
        }
    }
    if let Some(missing) = manifest.inputs().find(|b| !inputs.contains_key(&b.name)) {
        return err(&missing.name, format!("not supplied (expected {} of shape {:?})", missing.dtype, missing.shape));
    }
    Ok(())
}

/// PTX is JIT-compiled forward: PTX for `sm_80` runs on 8.0 and every later
/// compute capability, never on an earlier one.
pub fn check_target(manifest: &Manifest, device: (u32, u32), device_name: &str) -> Result<()> {
    let bundle = manifest.target_arch()?;
    if bundle > device {
        return Err(Error::Target {
            bundle: manifest.target.arch.clone(),
            device: format!("sm_{}{} ({device_name})", device.0, device.1),
        });
    }
    Ok(())
}
