//! Where each eintup's dims come from ([`DimsSource`]) and the order they
//! are determined in: bindings and inputs first, then `DIMS(t) = expr`
//! constraints and range inference in dependency order, then draws. Range
//! inference never makes a program fail that draws resolve: an eintup with
//! a `DIMS(t) IN [..]` draw range on a cycle of inference is drawn from its
//! range instead, which breaks the cycle (docs/shapes.md). A cycle left is
//! E0304 (dims constraints alone) or E0311 (through range inference).

use super::{mentioned, DimsSource, Space};
use crate::ir::et::dims::dims_refs;
use crate::ir::et::EintupId;
use crate::sema::infer_dims::{self, Access};
use crate::sema::Rel;
use et_grammar::Diagnostic;

impl<'a> Space<'a> {
    /// Decides each eintup's source and the order dims are determined in;
    /// a cycle is E0304 (dims constraints alone) or E0311 (through range
    /// inference).
    pub(super) fn schedule(&mut self) -> Result<(), Diagnostic> {
        let prog = self.prog;
        let m = &prog.module;
        let n = m.eintups.len();
        // An eintup of an input array's signature takes its dims from that
        // array (supplied, or drawn as it is generated): never inferred.
        let mut of_input = vec![false; n];
        for a in m.arrays.iter().filter(|a| a.is_input) {
            let mut v = Vec::new();
            for p in &a.positions {
                mentioned(&p.expr, &mut v);
            }
            for e in v {
                if let Some(x) = of_input.get_mut(e) {
                    *x = true;
                }
            }
        }
        let given = |e: EintupId| self.bound[e].is_some() || self.split.given[e].is_some();
        let derive_refs: Vec<Option<Vec<EintupId>>> = (0..n)
            .map(|e| match self.derive[e].map(|ci| &prog.constraints[ci].rel) {
                Some(Rel::Eq(x)) if !given(e) => {
                    let mut v = Vec::new();
                    dims_refs(x, &mut v);
                    Some(v)
                }
                _ => None,
            })
            .collect();
        let mut readable: Vec<Option<Vec<Access>>> = (0..n)
            .map(|e| {
                if given(e) || derive_refs[e].is_some() || self.derive[e].is_some() || of_input[e] {
                    return None;
                }
                Some(infer_dims::accesses(m, e)).filter(|a| !a.is_empty())
            })
            .collect();
        let mut plan = infer_dims::plan(&readable, &derive_refs);
        // Draw ranges break what inference cannot order: the first eintup
        // of the cycle (in declaration order) that would be inferred but
        // has a range is drawn, until no cycle is left or none has one.
        while let Some(e) = plan.cycle.iter().copied().filter(|&e| readable[e].is_some() && self.draw_in[e].is_some()).min() {
            readable[e] = None;
            plan = infer_dims::plan(&readable, &derive_refs);
        }
        self.sources = (0..n)
            .map(|e| {
                if self.bound[e].is_some() {
                    DimsSource::Bound
                } else if let Some(g) = &self.split.given[e] {
                    DimsSource::Input(m.arrays[g.array].name.clone())
                } else if derive_refs[e].is_some() {
                    DimsSource::Constrained
                } else if readable[e].is_some() {
                    DimsSource::Inferred
                } else {
                    DimsSource::Drawn
                }
            })
            .collect();
        self.order = plan.order;
        self.used = plan.used;
        let cyc = plan.cycle;
        if cyc.is_empty() {
            return Ok(());
        }
        let names = cyc.iter().map(|e| format!("`{}`", m.eintups[*e].name)).collect::<Vec<_>>().join(", ");
        if cyc.iter().all(|e| readable[*e].is_none()) {
            let mut d = Diagnostic::error("E0304", format!("dims constraints form a cycle through {names}"));
            for (k, e) in cyc.iter().enumerate() {
                if let Some(ci) = self.derive[*e] {
                    let sp = prog.constraints[ci].span;
                    d = if k == 0 { d.at(sp, "depends on the others") } else { d.also(sp, "part of the cycle") };
                }
            }
            return Err(d.note("dims constraints must form an acyclic dependency graph"));
        }
        let mut d = Diagnostic::error("E0311", format!("range inference forms a cycle through {names}"));
        let mut first = true;
        for e in &cyc {
            let name = &m.eintups[*e].name;
            let (sp, l) = if let Some(a) = readable[*e].as_ref().and_then(|v| v.first()) {
                let needs: Vec<String> = a.deps.iter().filter(|x| cyc.contains(x)).map(|x| format!("`{}`", m.eintups[*x].name)).collect();
                (a.span, format!("`{name}` is inferred from this access, which needs the dims of {}", needs.join(", ")))
            } else if let Some(ci) = self.derive[*e] {
                (prog.constraints[ci].span, format!("`{name}` is derived here from the others"))
            } else {
                continue;
            };
            d = if first { d.at(sp, l) } else { d.also(sp, l) };
            first = false;
        }
        Err(d.note("each of these eintups needs another's dims first; fix one of them with --bind or a `DIMS(t) = ..` constraint"))
    }
}
