//! Dims from input arrays (docs/language.md s.6): the shape of an array the
//! user supplies (`--input NAME=PATH.npy`) is split over the positions of
//! its signature, and a plain eintup at a position takes that part of the
//! shape as its dims.
//!
//! How many dims each position takes is its rank (1 for a scalar such as a
//! literal), so the split is a choice of ranks: [`config`](super::config)
//! enumerates the rank combinations, keeps those under which every
//! supplied shape has the right length, and asks [`split`] whether they
//! cut each shape one way. A position holding an expression (`x[a+b]`,
//! `x[FLAT(a,b)]`) gives no dims to its eintups; the configuration must
//! reproduce its extent ([`Split::checks`]).

use super::rank_limit::expr_width;
use crate::ir::et::print::index_expr;
use crate::ir::et::*;
use et_grammar::Diagnostic;

/// The shape of an array the user supplies.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct InputShape {
    pub name: String,
    pub shape: Vec<i64>,
}

/// An eintup's dims as an input array gives them.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Given {
    pub dims: Vec<i64>,
    pub array: ArrayId,
}

/// What the supplied shapes determine under the chosen ranks.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Split {
    /// Per eintup: the dims a plain position of an input gives it.
    pub given: Vec<Option<Given>>,
    /// Positions holding expressions: (array, position, extent from the
    /// file), checked once the configuration is chosen.
    pub checks: Vec<(ArrayId, usize, Vec<i64>)>,
}

/// Resolves the names of supplied inputs: an unknown name is E0401, an
/// array that the program computes is E0402 (the codes `run` has always
/// used for them).
pub fn resolve(m: &Module, inputs: &[InputShape]) -> Result<Vec<(ArrayId, Vec<i64>)>, Vec<Diagnostic>> {
    let mut out = Vec::new();
    let mut diags = Vec::new();
    for i in inputs {
        let name = &i.name;
        match m.array_by_name(name) {
            None => {
                let names: Vec<&str> = m.arrays.iter().filter(|a| a.is_input).map(|a| a.name.as_str()).collect();
                let mut d = Diagnostic::error("E0401", format!("`--input {name}=...`: the program has no array named `{name}`"));
                if let Some(hint) = et_grammar::suggest::did_you_mean(name, names.iter().copied()) {
                    d = d.note(hint);
                }
                diags.push(d.note(format!("the input arrays are: {}", if names.is_empty() { "(none)".to_string() } else { names.join(", ") })));
            }
            Some(a) if !m.arrays[a].is_input => diags.push(
                Diagnostic::error("E0402", format!("`--input {name}=...`: array `{name}` is not an input"))
                    .at(m.arrays[a].span, "its defining statement is not `= RANDOM(...)`, so the program computes it"),
            ),
            Some(a) => out.push((a, i.shape.clone())),
        }
    }
    if diags.is_empty() {
        Ok(out)
    } else {
        Err(diags)
    }
}

/// How many dims each position of array `a` takes under `ranks`.
pub fn widths(m: &Module, a: ArrayId, ranks: &[usize]) -> Option<Vec<usize>> {
    m.arrays.get(a)?.positions.iter().map(|p| expr_width(&p.expr, ranks)).collect()
}

/// Does every supplied shape have as many dims as its signature takes?
pub fn fits(m: &Module, inputs: &[(ArrayId, Vec<i64>)], ranks: &[usize]) -> bool {
    inputs.iter().all(|(a, shape)| widths(m, *a, ranks).is_some_and(|w| w.iter().sum::<usize>() == shape.len()))
}

/// Cuts a shape into the parts of consecutive widths.
pub fn cut(shape: &[i64], widths: &[usize]) -> Vec<Vec<i64>> {
    let mut at = 0;
    widths
        .iter()
        .map(|w| {
            let end = (at + w).min(shape.len());
            let part = shape.get(at..end).map(<[i64]>::to_vec).unwrap_or_default();
            at = end;
            part
        })
        .collect()
}

/// `b=[2] ipos=[5, 5] c1=[3]`: a shape cut over a signature.
fn split_text(m: &Module, a: ArrayId, shape: &[i64], widths: &[usize]) -> String {
    let arr = &m.arrays[a];
    arr.positions.iter().zip(cut(shape, widths)).map(|(p, d)| format!("{}={}", index_expr(m, &p.expr), dims_text(&d))).collect::<Vec<_>>().join(" ")
}

fn dims_text(d: &[i64]) -> String {
    format!("[{}]", d.iter().map(|x| x.to_string()).collect::<Vec<_>>().join(", "))
}

fn signature_text(m: &Module, a: ArrayId) -> String {
    let arr = &m.arrays[a];
    format!("{}[{}]", arr.name, arr.positions.iter().map(|p| index_expr(m, &p.expr)).collect::<Vec<_>>().join(", "))
}

/// The cut of every supplied shape, given the rank combinations that fit
/// them all (and are preferred, see `config`): one cut per input, or
/// E0315 for an input that more than one combination cuts differently.
pub fn split(m: &Module, inputs: &[(ArrayId, Vec<i64>)], combos: &[Vec<usize>]) -> Result<Vec<Vec<usize>>, Vec<Diagnostic>> {
    let mut out = Vec::new();
    let mut diags = Vec::new();
    for (a, shape) in inputs {
        let mut cands: Vec<Vec<usize>> = Vec::new();
        for r in combos {
            if let Some(w) = widths(m, *a, r) {
                if !cands.contains(&w) {
                    cands.push(w);
                }
            }
        }
        match cands.len() {
            0 => return Err(vec![Diagnostic::error("E0314", "no rank combination fits the input arrays").at(m.arrays[*a].span, "this input")]),
            1 => out.push(cands.swap_remove(0)),
            _ => diags.push(ambiguous(m, *a, shape, &cands)),
        }
    }
    if diags.is_empty() {
        Ok(out)
    } else {
        Err(diags)
    }
}

/// E0315: the candidate splits and the `--bind` that settles it.
fn ambiguous(m: &Module, a: ArrayId, shape: &[i64], cands: &[Vec<usize>]) -> Diagnostic {
    let arr = &m.arrays[a];
    let mut d = Diagnostic::error(
        "E0315",
        format!("the shape {} of input `{}` can be split over `{}` in {} ways", dims_text(shape), arr.name, signature_text(m, a), cands.len()),
    )
    .at(arr.span, "the eintups of this signature have no fixed ranks");
    const SHOWN: usize = 6;
    for c in cands.iter().take(SHOWN) {
        d = d.note(format!("candidate: {}", split_text(m, a, shape, c)));
    }
    if cands.len() > SHOWN {
        d = d.note(format!("... and {} more", cands.len() - SHOWN));
    }
    // A plain eintup whose part differs between the first two candidates:
    // binding it to its part in the first settles at least that choice.
    let first = cut(shape, &cands[0]);
    let hint = arr.positions.iter().enumerate().find_map(|(k, p)| match p.expr.kind {
        IndexKind::Var(t) if cands[0].get(k) != cands[1].get(k) => Some((t, first.get(k).cloned().unwrap_or_default())),
        _ => None,
    });
    match hint {
        Some((t, dims)) => d.note(format!(
            "settle it with `--bind {}={}` (the first candidate), or state the rank with `RANK({}) = ..`",
            m.eintups[t].name,
            dims_text(&dims),
            m.eintups[t].name
        )),
        None => d.note("settle it with `--bind` of the eintups of this signature, or with `RANK(..) = ..` constraints"),
    }
}

/// E0314: no rank combination fits; blames the first input that fits no
/// combination on its own, or all of them together.
pub fn unsplittable(m: &Module, inputs: &[(ArrayId, Vec<i64>)], combos: &[Vec<usize>]) -> Diagnostic {
    for (a, shape) in inputs {
        let one = [(*a, shape.clone())];
        if combos.iter().any(|r| fits(m, &one, r)) {
            continue;
        }
        let arr = &m.arrays[*a];
        // The widths each position may take, for the note.
        let n = arr.positions.len();
        let mut seen: Vec<Vec<usize>> = vec![Vec::new(); n];
        for r in combos {
            for (k, w) in widths(m, *a, r).unwrap_or_default().into_iter().enumerate() {
                if k < n && !seen[k].contains(&w) {
                    seen[k].push(w);
                }
            }
        }
        let allowed: Vec<String> = arr
            .positions
            .iter()
            .zip(&mut seen)
            .map(|(p, s)| {
                s.sort_unstable();
                let ws: Vec<String> = s.iter().map(|w| w.to_string()).collect();
                format!("`{}`: {}", index_expr(m, &p.expr), if ws.is_empty() { "none".to_string() } else { ws.join(" or ") })
            })
            .collect();
        return Diagnostic::error(
            "E0314",
            format!("input `{}` has shape {} ({} dims), which cannot be split over `{}`", arr.name, dims_text(shape), shape.len(), signature_text(m, *a)),
        )
        .at(arr.span, "the ranks of this signature's positions do not add up to the input's dims")
        .note(format!("dims each position may take: {}", allowed.join(", ")));
    }
    let names: Vec<String> = inputs.iter().map(|(a, _)| format!("`{}`", m.arrays[*a].name)).collect();
    let mut d = Diagnostic::error("E0314", format!("the shapes of the inputs {} need different ranks for the same eintups", names.join(", ")));
    for (k, (a, shape)) in inputs.iter().enumerate() {
        let l = format!("`{}` has shape {}", m.arrays[*a].name, dims_text(shape));
        d = if k == 0 { d.at(m.arrays[*a].span, l) } else { d.also(m.arrays[*a].span, l) };
    }
    d.note("each input fits some ranks on its own, but no ranks fit them all")
}

/// The dims the cut shapes give: plain positions give their eintup dims
/// (two inputs, or an input and a `--bind`, that disagree are E0316);
/// other positions become checks.
pub fn given(m: &Module, inputs: &[(ArrayId, Vec<i64>)], cuts: &[Vec<usize>], bound: &[Option<Vec<i64>>]) -> Result<Split, Vec<Diagnostic>> {
    let mut s = Split { given: vec![None; m.eintups.len()], checks: Vec::new() };
    let mut diags = Vec::new();
    for ((a, shape), w) in inputs.iter().zip(cuts) {
        let arr = &m.arrays[*a];
        for (k, (p, part)) in arr.positions.iter().zip(cut(shape, w)).enumerate() {
            let IndexKind::Var(t) = p.expr.kind else {
                s.checks.push((*a, k, part));
                continue;
            };
            let name = &m.eintups[t].name;
            if let Some(b) = bound.get(t).and_then(|b| b.as_ref()) {
                if *b != part {
                    diags.push(
                        Diagnostic::error("E0316", format!("`--bind {name}={}` and input `{}` give `{name}` different dims", dims_text(b), arr.name))
                            .at(p.expr.span, format!("input `{}` gives `{name}` dims {} here", arr.name, dims_text(&part)))
                            .note("a binding and an input array must agree; drop the binding or supply another array"),
                    );
                }
                continue;
            }
            match &s.given[t] {
                Some(g) if g.dims != part => {
                    let other = &m.arrays[g.array];
                    diags.push(
                        Diagnostic::error("E0316", format!("inputs `{}` and `{}` give `{name}` different dims", other.name, arr.name))
                            .at(p.expr.span, format!("input `{}` gives `{name}` dims {} here", arr.name, dims_text(&part)))
                            .also(other.span, format!("input `{}` gives `{name}` dims {}", other.name, dims_text(&g.dims))),
                    );
                }
                Some(_) => {}
                None => s.given[t] = Some(Given { dims: part, array: *a }),
            }
        }
    }
    if diags.is_empty() {
        Ok(s)
    } else {
        Err(diags)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cut_follows_widths() {
        assert_eq!(cut(&[2, 3, 4, 5], &[1, 2, 1]), vec![vec![2], vec![3, 4], vec![5]]);
        assert_eq!(cut(&[2], &[0, 1, 0]), vec![vec![], vec![2], vec![]]);
        // Never panics on a shape shorter than the widths.
        assert_eq!(cut(&[2], &[2, 1]), vec![vec![2], vec![]]);
    }
}
