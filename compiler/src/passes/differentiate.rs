//! `differentiate{wrt=x,w of=y}`: the module becomes its adjoint
//! (`autodiff`, docs/gradients.md). It runs on a rank-polymorphic module
//! (after `resolve`, before `infer-ranks`) and leaves one: the adjoint
//! program, whose source replaces the unit's, so later diagnostics point
//! into the text `eintup grad` would print.

use super::spec::PassOptions;
use super::{DriverOptions, Ir, PassError, Unit};
use crate::autodiff::{differentiate, Request};

/// The arrays to differentiate with respect to and of; names separated by
/// blanks or commas (`wrt=x,w` or `wrt=x wrt=w`).
#[derive(Clone, Debug, Default)]
pub struct DifferentiateOptions {
    pub request: Request,
}

fn names(v: &str) -> Vec<String> {
    v.split([',', ' ']).map(str::trim).filter(|s| !s.is_empty()).map(String::from).collect()
}

impl PassOptions for DifferentiateOptions {
    const KEYS: &'static [(&'static str, &'static str)] = &[
        ("wrt", "NAME[,NAME..]: the FLOAT inputs to differentiate with respect to (as eintup grad --wrt)"),
        ("of", "NAME[,NAME..]: the outputs to differentiate (as --of; default the program's FLOAT results)"),
    ];
    fn from_driver(_: &DriverOptions) -> Self {
        DifferentiateOptions::default()
    }
    fn set(&mut self, key: &str, value: &str) -> Result<(), String> {
        let list = names(value);
        if list.is_empty() {
            return Err("expected one or more array names".into());
        }
        match key {
            "wrt" => self.request.wrt.extend(list),
            "of" => self.request.of.extend(list),
            _ => return Err(format!("option `{key}` is not declared")),
        }
        Ok(())
    }
}

pub fn run(unit: &mut Unit, opts: &DifferentiateOptions) -> Result<Option<String>, PassError> {
    let Ir::Et(prog) = &unit.ir else { return Err(PassError::Internal("differentiate runs on the et level".into())) };
    if unit.ranks.is_some()
        || unit.config.is_some()
        || unit.symbolic.is_some()
        || prog.module.symbolic.is_some()
        || prog.module.is_specialized() && !prog.module.eintups.is_empty()
    {
        return Err(PassError::Message(
            "error: `differentiate` runs on the program as resolved, before `infer-ranks` and `specialize` (put it right after `resolve`)".into(),
        ));
    }
    let adjoint = differentiate(prog, &opts.request).map_err(PassError::User)?;
    let source = crate::driver::Source::from_string(&format!("{} (adjoint)", unit.source.name), &adjoint.source);
    unit.source = source;
    unit.ir = Ir::Et(adjoint.program.clone());
    Ok(Some(adjoint.summary()))
}
