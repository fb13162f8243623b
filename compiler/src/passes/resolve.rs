//! `resolve`: `.et` source -> rank-polymorphic `et` module (names,
//! signatures, element types, every error found without shapes). The work
//! is the parser (`et_grammar`) and `sema::resolve`; this file makes it a
//! pass.

use super::{Ir, NoOptions, PassError, Unit};

pub fn run(unit: &mut Unit, _: &NoOptions) -> Result<Option<String>, PassError> {
    let file = et_grammar::parse_file(&unit.source.text).map_err(PassError::User)?;
    let prog = crate::sema::resolve::resolve(&file).map_err(PassError::User)?;
    let stats = format!("{} eintups, {} arrays, {} statements", prog.module.eintups.len(), prog.module.arrays.len(), prog.module.stmts.len());
    unit.ir = Ir::Et(prog);
    Ok(Some(stats))
}
