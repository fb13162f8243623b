//! `infer-ranks`: the union-find of rank classes (`sema::ranks`) over the
//! module's eintups. Eintups whose rank is forced to one value get it in
//! the module (a refinement of `?` to `?r`); the system itself, with the
//! reason for every equation, stays in the unit for `specialize`.

use super::PassError;
use super::{Ir, NoOptions, Unit};

pub fn run(unit: &mut Unit, _: &NoOptions) -> Result<Option<String>, PassError> {
    let Ir::Et(prog) = &mut unit.ir else { return Err(PassError::Internal("infer-ranks runs on the et level".into())) };
    let ranks = crate::sema::ranks::infer(prog).map_err(PassError::User)?;
    let mut fixed = 0;
    for (id, e) in prog.module.eintups.iter_mut().enumerate() {
        if let Some(r) = ranks.fixed_rank(id) {
            if e.rank.is_none() {
                fixed += 1;
            }
            e.rank = Some(r);
        }
    }
    let stats = format!("{} rank classes, {fixed} ranks fixed", ranks.class_count());
    unit.ranks = Some(ranks);
    Ok(Some(stats))
}
