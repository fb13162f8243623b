//! `simplify-index`: egg equality saturation over every index expression
//! of every kernel (`crate::simplify`, where the language, analysis and
//! rules live — the engine is kept apart from the rules as in Cranelift).
//! The pipeline runs it after lowering (fold static dims, prove guards)
//! and again after `tighten-bounds` (clean the new `max`/`min` bounds).

use super::PassError;
use super::{Ir, NoOptions, Unit};

pub fn run(unit: &mut Unit, _: &NoOptions) -> Result<Option<String>, PassError> {
    let Ir::Loop(m) = &mut unit.ir else { return Err(PassError::Internal("simplify-index runs on the loop level".into())) };
    let stats = crate::simplify::simplify_module(m);
    let line = stats.to_string();
    Ok(Some(line.trim_start_matches("simplify-index: ").to_string()))
}
