//! `resolve`: `.et` source -> rank-polymorphic `et` module (names,
//! signatures, element types, every error found without shapes). The work
//! is `sema::resolve`; this file makes it a pass.

use super::{Ir, Options, Unit};
use crate::driver::Failure;

pub fn run(unit: &mut Unit, _: &Options) -> Result<Option<String>, Failure> {
    let prog = crate::pipeline::resolved(&unit.source)?;
    let stats = format!("{} eintups, {} arrays, {} statements", prog.module.eintups.len(), prog.module.arrays.len(), prog.module.stmts.len());
    unit.ir = Ir::Et(prog);
    Ok(Some(stats))
}
