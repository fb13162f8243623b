//! Interval analysis for `simplify-index`: every e-class carries an
//! inclusive `[lo, hi]` that contains the value of each of its e-nodes at
//! every point of the variables' ranges (`Ranges`).
//!
//! The intervals and each operator's bounds on them are the loop
//! dialect's (`ir/loops/interval.rs`, sound under wrapping arithmetic);
//! this module applies them to e-classes.
//!
//! Merging two classes intersects their intervals; a class whose interval
//! is a single value gets that constant as a node (`modify`), which is how
//! constant folding and interval facts such as `x // 4 == 0` for
//! `x in [0, 3]` enter the e-graph.

use super::lang::IndexLang;
use crate::ir::loops::VarId;
use egg::{Analysis, DidMerge, EGraph, Id, Language};
use std::collections::BTreeMap;

pub use crate::ir::loops::Interval;

/// The range of each variable (inclusive); variables not listed range over
/// all of `i64`.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Ranges {
    map: BTreeMap<VarId, Interval>,
}

impl Ranges {
    pub fn new() -> Ranges {
        Ranges::default()
    }

    /// `self` with `v` in `[lo, hi]` (builder form for tests and callers).
    pub fn with(mut self, v: VarId, lo: i64, hi: i64) -> Ranges {
        self.set(v, lo, hi);
        self
    }

    /// `v` ranges over `[lo, hi]`; empty when `lo > hi`.
    pub fn set(&mut self, v: VarId, lo: i64, hi: i64) {
        self.map.insert(v, Interval::new(lo, hi));
    }

    /// Intersects `v`'s range with `[lo, hi]` (a guard's extra knowledge).
    pub fn narrow(&mut self, v: VarId, lo: i64, hi: i64) {
        let cur = self.interval(v);
        self.map.insert(v, cur.intersect(Interval::new(lo, hi)));
    }

    /// `v`'s range as `(lo, hi)` inclusive; all of `i64` when unknown.
    pub fn get(&self, v: VarId) -> (i64, i64) {
        let i = self.interval(v);
        (i.lo, i.hi)
    }

    pub fn interval(&self, v: VarId) -> Interval {
        self.map.get(&v).copied().unwrap_or(Interval::FULL)
    }
}

/// The e-graph analysis: interval per e-class, from `Ranges`.
#[derive(Clone, Debug, Default)]
pub struct IntervalAnalysis {
    pub ranges: Ranges,
}

impl IntervalAnalysis {
    pub fn new(ranges: Ranges) -> IntervalAnalysis {
        IntervalAnalysis { ranges }
    }
}

impl Analysis<IndexLang> for IntervalAnalysis {
    type Data = Interval;

    fn make(egraph: &mut EGraph<IndexLang, Self>, enode: &IndexLang) -> Interval {
        match enode {
            IndexLang::Num(c) => Interval::point(*c),
            IndexLang::Var(v) => egraph.analysis.ranges.interval(v.0),
            IndexLang::Sym(_) => Interval::DIM,
            other => match other.as_bin() {
                Some((op, a, b)) => Interval::apply(op, egraph[a].data, egraph[b].data),
                None => Interval::FULL,
            },
        }
    }

    fn merge(&mut self, a: &mut Interval, b: Interval) -> DidMerge {
        // Both are sound bounds of the same values, so their intersection is
        // too; it is the tighter fact.
        let new = a.intersect(b);
        let did = DidMerge(new != *a, new != b);
        *a = new;
        did
    }

    fn modify(egraph: &mut EGraph<IndexLang, Self>, id: Id) {
        if let Some(c) = egraph[id].data.as_const() {
            let n = egraph.add(IndexLang::Num(c));
            egraph.union(id, n);
            // The value is known: operator nodes of this class can only
            // feed more matches, never a cheaper extraction.
            let id = egraph.find(id);
            egraph[id].nodes.retain(|n| n.is_leaf());
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ranges_default_to_full_and_narrow_by_intersection() {
        let mut r = Ranges::new().with(0, 0, 9);
        assert_eq!(r.get(1), (i64::MIN, i64::MAX));
        r.narrow(0, 3, 20);
        assert_eq!(r.get(0), (3, 9));
    }
}
