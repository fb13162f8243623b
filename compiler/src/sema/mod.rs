//! Semantic analysis: from the AST to a specialised `et` module.
//!
//! Stages, each its own module:
//! - [`resolve`]: names, array signatures, SSA right-hand sides, every static
//!   error that needs no shapes (E01xx);
//! - [`constraints`]: what the constraints section must satisfy as a whole
//!   (names the program uses, no dims cycle), checked by `resolve`;
//! - [`ranks`]: rank inference as a union-find over eintups, every equation
//!   kept with its reason so contradictions can be explained (E02xx);
//! - [`rank_limit`]: arrays and statements within the maximum rank (E0208),
//!   below both `ranks` and `config`;
//! - [`config`]: bindings, rank combinations and dims draws (E03xx), one
//!   submodule per job;
//! - [`inputs`]: dims from the shapes of supplied input arrays;
//! - [`infer_dims`]: range inference of dims from right-hand-side accesses;
//! - [`specialize`]: substitute one configuration into the module;
//! - [`symbolic`]: or, for a dynamic build, fix the ranks and give dims as
//!   expressions over dim symbols.

pub mod config;
pub mod constraints;
pub mod infer_dims;
pub mod inputs;
pub mod rank_limit;
pub mod ranks;
pub mod resolve;
pub mod specialize;
pub mod symbolic;

use crate::ir::et::{EintupId, IndexExpr, Module};
use et_grammar::ast::ConstraintSubject;
use et_grammar::Span;

pub use config::{parse_binding, Binding, Config, DimsSource};
pub use inputs::InputShape;
pub use ranks::RankSystem;

/// A resolved program: the (rank-polymorphic) `et` module plus the
/// constraints section, which the module itself does not carry.
#[derive(Clone, Debug, PartialEq)]
pub struct Program {
    pub module: Module,
    pub constraints: Vec<Constraint>,
}

/// One line of the constraints section with its subject resolved.
#[derive(Clone, Debug, PartialEq)]
pub struct Constraint {
    pub subject: ConstraintSubject,
    pub target: EintupId,
    pub rel: Rel,
    /// The whole constraint line.
    pub span: Span,
    /// The target's name (`ipos` in `DIMS(ipos) IN [6, 12]`).
    pub target_span: Span,
}

#[derive(Clone, Debug, PartialEq)]
pub enum Rel {
    /// `IN [lo, hi]`, inclusive.
    In { lo: i64, hi: i64 },
    /// `= expr`; the expression uses only `Lit`, `Dims`, `Rank` and `Bin`
    /// (a unary minus is stored as `0 - e`).
    Eq(IndexExpr),
}

impl Constraint {
    /// The constraint as written, for messages (`DIMS(t) IN [1, 3]`).
    pub fn describe(&self, m: &Module) -> String {
        let subj = match self.subject {
            ConstraintSubject::Rank => "RANK",
            ConstraintSubject::Dims => "DIMS",
        };
        let name = m.eintups.get(self.target).map_or("?", |e| e.name.as_str());
        match &self.rel {
            Rel::In { lo, hi } => format!("{subj}({name}) IN [{lo}, {hi}]"),
            Rel::Eq(e) => format!("{subj}({name}) = {}", crate::ir::et::print::index_expr(m, e)),
        }
    }
}
