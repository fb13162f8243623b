//! The maximum rank of arrays and statements under a rank combination
//! ([`MAX_RANK`], docs/shapes.md#maximum-rank).
//!
//! Each eintup's own rank is bounded where it is stated (rank inference,
//! `--bind`, input shapes); an array's rank is the sum of its positions'
//! ranks, and a statement's iteration space the sum of its variables'
//! ranks, so both are known only per rank combination. Most programs
//! cannot come near the limit: [`RankLimit::new`] bounds every array and
//! statement by the largest ranks the classes allow, and only those that
//! could pass the limit are checked per combination.
//!
//! Rank inference (`ranks`) and configurations (`config`) both check the
//! limit, so this module depends on neither: the width of an index
//! expression under given ranks ([`expr_width`]) and the E0208 error
//! ([`rank_limit_error`]) live here.

use crate::ir::et::{ArrayId, IndexExpr, IndexKind, Module, MAX_RANK};
use et_grammar::{Diagnostic, Span};

/// The arrays and statements that some rank combination could take past
/// [`MAX_RANK`].
pub struct RankLimit {
    arrays: Vec<ArrayId>,
    stmts: Vec<usize>,
}

impl RankLimit {
    /// `max_rank[e]`: the largest rank eintup `e` can have.
    pub fn new(m: &Module, max_rank: &[usize]) -> RankLimit {
        let arrays = (0..m.arrays.len()).filter(|&a| array_rank(m, a, max_rank) > MAX_RANK).collect();
        let stmts = (0..m.stmts.len()).filter(|&s| stmt_rank(m, s, max_rank) > MAX_RANK).collect();
        RankLimit { arrays, stmts }
    }

    /// The first array or statement over the limit with the per-eintup
    /// `ranks`, as an error located at it.
    pub fn violation(&self, m: &Module, ranks: &[usize]) -> Option<Diagnostic> {
        for &a in &self.arrays {
            let r = array_rank(m, a, ranks);
            if r > MAX_RANK {
                let what = format!("array `{}` would have rank {r}", m.arrays[a].name);
                return Some(rank_limit_error(&what, m.arrays[a].span));
            }
        }
        for &s in &self.stmts {
            let r = stmt_rank(m, s, ranks);
            if r > MAX_RANK {
                let what = format!("this statement would loop over {r} dimensions");
                return Some(rank_limit_error(&what, m.stmts[s].span));
            }
        }
        None
    }
}

/// E0208: a rank above [`MAX_RANK`], located at what asks for it.
pub fn rank_limit_error(what: &str, span: Span) -> Diagnostic {
    Diagnostic::error("E0208", format!("{what}, more than the maximum rank {MAX_RANK}"))
        .at(span, "rank too large")
        .note(format!("eintups, arrays and the iteration space of a statement have at most {MAX_RANK} dimensions"))
}

/// How many components an index expression has when every eintup has the
/// given rank: its rank, or 1 for a scalar (a literal position indexes one
/// component, docs/language.md s.5). `None` for a slice, whose rank is data.
pub fn expr_width(e: &IndexExpr, ranks: &[usize]) -> Option<usize> {
    fn rank(e: &IndexExpr, ranks: &[usize]) -> Option<Option<usize>> {
        Some(match &e.kind {
            IndexKind::Var(t) => Some(*ranks.get(*t)?),
            IndexKind::Lit(_) | IndexKind::Rank(_) => None,
            IndexKind::Dims(l) => Some(l.rank(|t| ranks.get(t).copied())?),
            IndexKind::Flat(_) => Some(1),
            IndexKind::Slice { .. } => return None,
            IndexKind::Bin(_, a, b) => rank(a, ranks)?.or(rank(b, ranks)?),
        })
    }
    Some(rank(e, ranks)?.unwrap_or(1))
}

/// The sum of an array's position ranks (a position whose rank is data, a
/// slice, counts 1; first mentions have none).
fn array_rank(m: &Module, a: ArrayId, ranks: &[usize]) -> usize {
    m.arrays[a].positions.iter().fold(0usize, |acc, p| acc.saturating_add(expr_width(&p.expr, ranks).unwrap_or(1)))
}

/// The number of loops a statement's iteration space has.
fn stmt_rank(m: &Module, s: usize, ranks: &[usize]) -> usize {
    m.stmts[s].vars.iter().fold(0usize, |acc, &e| acc.saturating_add(ranks.get(e).copied().unwrap_or(0)))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::driver::Source;

    fn module(text: &str) -> Module {
        crate::pipeline::ranked(&Source::from_string("t.et", text)).expect("ranks").0.module
    }

    #[test]
    fn arrays_sum_their_positions_and_statements_their_variables() {
        // x[a, b] has rank RANK(a) + RANK(b); y[] += x[a, b] * z[c] loops
        // over a, b and c.
        let m = module("x[a,b] = RANDOM(0, 1, FLOAT)\nz[c] = RANDOM(0, 1, FLOAT)\ny[] += x[a,b] * z[c]\n");
        let (a, b, c) = (m.eintup_by_name("a").unwrap(), m.eintup_by_name("b").unwrap(), m.eintup_by_name("c").unwrap());
        let mut ranks = vec![0; m.eintups.len()];
        ranks[a] = 32;
        ranks[b] = 32;
        ranks[c] = 1;
        // x is at the limit (64), the statement one past it (65).
        let limit = RankLimit::new(&m, &ranks);
        assert_eq!(limit.arrays, Vec::<usize>::new());
        assert_eq!(limit.stmts, vec![2]);
        let d = limit.violation(&m, &ranks).expect("over the limit");
        assert_eq!(d.code, "E0208");
        assert!(d.message.contains("would loop over 65 dimensions"), "{}", d.message);
        ranks[b] = 33;
        let d = RankLimit::new(&m, &ranks).violation(&m, &ranks).expect("over the limit");
        assert!(d.message.contains("array `x` would have rank 65"), "{}", d.message);
        // Smaller ranks than the bound the limit was built with pass.
        ranks[b] = 31;
        assert!(limit.violation(&m, &ranks).is_none());
    }
}
