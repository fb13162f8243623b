//! A dynamic module's dims (docs/dynamic-shapes.md, "Printing a dynamic
//! `et` module"): after `specialize{dynamic=true}` every eintup has a
//! fixed rank and dims that are index expressions over dim symbols, which
//! the caller's arrays give at run time. They are part of the dialect, so
//! that a printed dynamic module reads back and lowers with no second
//! `specialize`. The expressions are the `loop` dialect's ([`IExpr`]), so
//! one syntax prints both levels' dims.

use super::EintupId;
use crate::ir::loops::{Dim, IExpr};

/// The dims of a dynamic module: its symbols, every eintup's dims over
/// them, and what must hold of the symbols' values.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct SymbolicDims {
    /// The dim symbols, in the order the eintups declare them.
    pub symbols: Vec<Dim>,
    /// Every eintup's dims over [`symbols`](Self::symbols) (module order),
    /// one expression per component; a bound eintup's are constants.
    pub eintups: Vec<Vec<IExpr>>,
    /// What must hold at run time for the dims to be a configuration the
    /// static rules accept: a derived dim not negative, a divisor in a
    /// dims equation not zero.
    pub checks: Vec<SymCheck>,
}

/// `expr >= min` must hold; `about` is the eintup, `rule` the equation.
#[derive(Clone, Debug, PartialEq)]
pub struct SymCheck {
    pub expr: IExpr,
    pub min: i64,
    pub about: EintupId,
    pub rule: String,
}

impl SymbolicDims {
    /// Whether eintup `e`'s dims mention a symbol: what a run-time caller
    /// gives (by input shapes or `--bind`).
    pub fn is_symbolic(&self, e: EintupId) -> bool {
        self.eintups.get(e).is_some_and(|d| d.iter().any(IExpr::is_symbolic))
    }
}
