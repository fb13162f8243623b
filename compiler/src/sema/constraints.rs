//! Checks of the constraints section as a whole, run by `resolve` because
//! they are properties of the program, not of a configuration: every
//! constraint is about an eintup the program uses (a typo such as
//! `DIMS(ipso)` would otherwise be accepted and ignored), and the
//! `DIMS(t) = expr` equations form an acyclic graph (docs/language.md s.6).

use super::{Constraint, Rel};
use crate::ir::et::dims::dims_refs;
use crate::ir::et::{EintupId, IndexExpr, IndexKind, Module};
use et_grammar::ast::ConstraintSubject;
use et_grammar::suggest::did_you_mean;
use et_grammar::Diagnostic;

/// E0124 for every eintup that only the constraints name and that neither
/// shapes the program nor gets dims of its own. Eintups `0..program` are
/// those the statements and the call mention. A constraint may introduce a
/// helper eintup (`DIMS(a) = DIMS(h) * 2` with `DIMS(h) IN [1, 4]`): one
/// that a used eintup's constraint reads and that a constraint of its own
/// defines.
pub fn unused_names(m: &Module, program: usize, constraints: &[Constraint]) -> Vec<Diagnostic> {
    let n = m.eintups.len();
    let mut used: Vec<bool> = (0..n).map(|e| e < program).collect();
    // Helpers read by the constraint of a used eintup are used, transitively.
    loop {
        let mut changed = false;
        for c in constraints {
            if let (true, Rel::Eq(x)) = (used[c.target], &c.rel) {
                let mut refs = Vec::new();
                names_in(x, &mut refs);
                for r in refs {
                    changed |= !std::mem::replace(&mut used[r], true);
                }
            }
        }
        if !changed {
            break;
        }
    }
    let known: Vec<&str> = m.eintups[..program.min(n)].iter().map(|e| e.name.as_str()).collect();
    let unknown = |e: EintupId, d: Diagnostic| match did_you_mean(&m.eintups[e].name, known.iter().copied()) {
        Some(hint) => d.note(hint),
        None => d.note("constraints are about the eintups the statements use"),
    };
    let mut diags = Vec::new();
    // A constraint about an eintup nothing else uses.
    let mut reported = vec![false; n];
    for c in constraints.iter().filter(|c| !used[c.target]) {
        let name = &m.eintups[c.target].name;
        let d = Diagnostic::error("E0124", format!("the constraint names `{name}`, which no statement uses")).at(c.target_span, "not an eintup of the program");
        diags.push(unknown(c.target, d));
        reported[c.target] = true;
    }
    // A helper read by a constraint but given dims by none: drawn
    // silently, which is how a typo on a right side would show.
    let mut defined = vec![false; n];
    for c in constraints {
        defined[c.target] = true;
    }
    for e in program..n {
        if used[e] && !defined[e] && !reported[e] {
            let name = &m.eintups[e].name;
            let d = Diagnostic::error("E0124", format!("the constraints read `{name}`, which no statement uses and no constraint defines"))
                .at(m.eintups[e].span, "not an eintup of the program");
            diags.push(unknown(e, d));
        }
    }
    diags.sort_by_key(|d| d.primary_span());
    diags
}

/// Eintups a constraint expression reads, in `DIMS(..)` or `RANK(..)`.
fn names_in(e: &IndexExpr, out: &mut Vec<EintupId>) {
    match &e.kind {
        IndexKind::Dims(l) => out.extend(l.eintups()),
        IndexKind::Rank(l) => out.extend(l.iter().copied()),
        IndexKind::Bin(_, a, b) => {
            names_in(a, out);
            names_in(b, out);
        }
        _ => {}
    }
}

/// E0304 for a cycle among the `DIMS(t) = expr` equations (the first one
/// of each eintup derives it; later ones are checks, as in `config`).
pub fn dims_cycle(m: &Module, constraints: &[Constraint]) -> Option<Diagnostic> {
    let n = m.eintups.len();
    let mut derive: Vec<Option<&Constraint>> = vec![None; n];
    for c in constraints {
        if let (ConstraintSubject::Dims, Rel::Eq(_), None) = (c.subject, &c.rel, derive[c.target]) {
            derive[c.target] = Some(c);
        }
    }
    let deps = |e: EintupId| -> Vec<EintupId> {
        let mut v = Vec::new();
        if let Some(Constraint { rel: Rel::Eq(x), .. }) = derive[e] {
            dims_refs(x, &mut v);
        }
        v
    };
    let cycle = find_cycle(n, deps)?;
    let names = cycle.iter().map(|e| format!("`{}`", m.eintups[*e].name)).collect::<Vec<_>>().join(", ");
    let mut d = Diagnostic::error("E0304", format!("dims constraints form a cycle through {names}"));
    for (k, e) in cycle.iter().enumerate() {
        if let Some(c) = derive[*e] {
            d = if k == 0 { d.at(c.span, "depends on the others") } else { d.also(c.span, "part of the cycle") };
        }
    }
    Some(d.note("dims constraints must form an acyclic dependency graph"))
}

/// The first cycle of a graph (nodes `0..n`, edges `deps`), from the
/// smallest node on it in search order; iterative, so no recursion in
/// proportion to the number of constraints.
fn find_cycle(n: usize, deps: impl Fn(EintupId) -> Vec<EintupId>) -> Option<Vec<EintupId>> {
    #[derive(Clone, Copy, PartialEq)]
    enum State {
        New,
        Open,
        Done,
    }
    let mut state = vec![State::New; n];
    for root in 0..n {
        if state[root] != State::New {
            continue;
        }
        // The path from the root, each node with its successors still to visit.
        let mut path: Vec<(EintupId, Vec<EintupId>)> = vec![(root, deps(root))];
        state[root] = State::Open;
        while let Some((_, next)) = path.last_mut() {
            match next.pop() {
                Some(s) if s < n && state[s] == State::Open => {
                    let at = path.iter().position(|(e, _)| *e == s).unwrap_or(0);
                    return Some(path[at..].iter().map(|(e, _)| *e).collect());
                }
                Some(s) if s < n && state[s] == State::New => {
                    state[s] = State::Open;
                    path.push((s, deps(s)));
                }
                Some(_) => {}
                None => {
                    if let Some((e, _)) = path.pop() {
                        state[e] = State::Done;
                    }
                }
            }
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::find_cycle;

    #[test]
    fn cycles_are_found_in_order() {
        // 0 -> 1 -> 2 -> 1: the cycle is [1, 2].
        let g = |e: usize| match e {
            0 => vec![1],
            1 => vec![2],
            2 => vec![1],
            _ => vec![],
        };
        assert_eq!(find_cycle(4, g), Some(vec![1, 2]));
        assert_eq!(find_cycle(3, |e| if e == 2 { vec![2] } else { vec![] }), Some(vec![2]));
        assert_eq!(find_cycle(3, |e| if e < 2 { vec![e + 1] } else { vec![] }), None);
    }
}
