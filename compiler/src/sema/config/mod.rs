//! Configurations: one rank and dims for every eintup (docs/language.md s.6).
//!
//! Priority: bindings (`--bind NAME=[..]`), then the shapes of input
//! arrays (`--input`, [`inputs`]), then `DIMS(t) = expr`
//! constraints and range inference ([`infer_dims`](super::infer_dims)),
//! then draws: `DIMS(t) IN` ranges, else the default 1..=8. Ranks are
//! enumerated as the cartesian product over rank classes (narrowed by the
//! input shapes); dims are determined per rank combination in dependency
//! order, with a seeded PRNG ([`Rng`](crate::random::Rng), splitmix64)
//! so a seed always gives the same configurations. Draws that violate a
//! constraint or give a negative derived or inferred dim are discarded and
//! counted. `IN` ranges say what is drawn: a binding or an input outside
//! them is a warning.
//!
//! One job per module, all on [`Space`] (the configurations of one
//! program):
//! - `binds`: `--bind NAME=[..]` arguments;
//! - `schedule`: where each eintup's dims come from and in which order
//!   they are determined (E0304, E0311);
//! - `warnings`: bindings outside draw ranges (W0301);
//! - `rank_combos`: the rank combinations allowed (E0206, E0207, E0208,
//!   E0303, E0309);
//! - `draw`: the dims of one rank combination, checked against every
//!   constraint;
//! - `choose`: seeded draws of one configuration (E0303, E0308,
//!   E0312, E0313, E0317) or many ([`Space::enumerate`]).

mod binds;
mod choose;
mod draw;
mod rank_combos;
mod schedule;
mod warnings;

pub use binds::{parse_binding, parse_bindings, Binding};
pub use choose::MAX_ATTEMPTS;
pub use draw::{Discard, DiscardKind, DEFAULT_DIMS};
pub use rank_combos::MAX_RANK_COMBOS;

use super::infer_dims::Access;
use super::inputs::{self, InputShape, Split};
use super::ranks::RankSystem;
use super::{Program, Rel};
use crate::ir::et::{ArrayId, EintupId};
use et_grammar::ast::ConstraintSubject;
use et_grammar::Diagnostic;

/// One configuration: every eintup in module order with its dims, where
/// they came from, and the warnings choosing it gave.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Config {
    pub dims: Vec<(String, Vec<i64>)>,
    /// Per eintup, in the order of `dims`: how its dims were determined.
    pub sources: Vec<DimsSource>,
    /// Bindings outside a `DIMS(..) IN`/`RANK(..) IN` range (W0301) and
    /// eintups drawn from the default (W0302).
    pub warnings: Vec<Diagnostic>,
}

/// How an eintup's dims were determined, in priority order.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum DimsSource {
    /// `--bind`, or fixed by the module (a printed specialised module, a
    /// bundle's configuration).
    Bound,
    /// Taken from the shape of this input array.
    Input(String),
    /// A `DIMS(t) = expr` constraint.
    Constrained,
    /// Range inference from the right-hand-side accesses.
    Inferred,
    /// Drawn from a `DIMS(t) IN` range or the default range.
    Drawn,
}

impl DimsSource {
    /// `bound`, `input x`, `constrained`, `inferred`, `drawn`.
    pub fn text(&self) -> String {
        match self {
            DimsSource::Bound => "bound".into(),
            DimsSource::Input(a) => format!("input {a}"),
            DimsSource::Constrained => "constrained".into(),
            DimsSource::Inferred => "inferred".into(),
            DimsSource::Drawn => "drawn".into(),
        }
    }
}

impl Config {
    /// A configuration whose dims are all given (a printed specialised
    /// module, a bundle's).
    pub fn fixed(dims: Vec<(String, Vec<i64>)>) -> Config {
        let sources = vec![DimsSource::Bound; dims.len()];
        Config { dims, sources, warnings: Vec::new() }
    }

    pub fn get(&self, name: &str) -> Option<&[i64]> {
        self.dims.iter().find(|(n, _)| n == name).map(|(_, d)| d.as_slice())
    }

    /// `b=[2] (input x), k=[3] (inferred), ...`: one line for the user.
    pub fn describe(&self) -> String {
        self.dims
            .iter()
            .enumerate()
            .map(|(k, (n, d))| {
                let src = self.sources.get(k).map_or_else(|| "bound".to_string(), DimsSource::text);
                format!("{n}={} ({src})", dims_text(d))
            })
            .collect::<Vec<_>>()
            .join(", ")
    }
}

/// `[2, 3]`, `[]` for rank 0.
pub fn dims_text(d: &[i64]) -> String {
    format!("[{}]", d.iter().map(|x| x.to_string()).collect::<Vec<_>>().join(", "))
}

/// Chooses one configuration: bindings, then input shapes, then
/// constraints and range inference, then draws; deterministic in `seed`.
pub fn choose_config(prog: &Program, ranks: &RankSystem, binds: &[Binding], inputs: &[InputShape], seed: u64) -> Result<Config, Vec<Diagnostic>> {
    let space = Space::new(prog, ranks, binds, inputs)?;
    let dims = space.choose(seed)?;
    Ok(space.config(&dims))
}

/// Everything needed to draw configurations of one program.
pub struct Space<'a> {
    pub prog: &'a Program,
    pub ranks: &'a RankSystem,
    bound: Vec<Option<Vec<i64>>>,
    /// The supplied input arrays and their shapes.
    inputs: Vec<(ArrayId, Vec<i64>)>,
    /// What the input shapes determine.
    split: Split,
    /// The rank combinations the input shapes allow (`None` without
    /// inputs: every combination, computed when asked).
    combos: Option<Vec<Vec<usize>>>,
    /// Eintups in dependency order.
    order: Vec<EintupId>,
    /// Per eintup: index of the deriving `DIMS(t) = expr` constraint.
    derive: Vec<Option<usize>>,
    /// Per eintup: the `DIMS(t) IN` constraint it is drawn from.
    draw_in: Vec<Option<usize>>,
    /// Per eintup: how its dims are determined.
    sources: Vec<DimsSource>,
    /// Per inferred eintup: the accesses it is inferred from.
    used: Vec<Vec<Access>>,
    /// W0301: bindings outside draw ranges; W0302.
    warnings: Vec<Diagnostic>,
}

/// Eintups mentioned (as variables or in `DIMS(..)`) by an expression.
pub(crate) fn mentioned(e: &crate::ir::et::IndexExpr, out: &mut Vec<EintupId>) {
    use crate::ir::et::{IndexKind, IndexSlot};
    match &e.kind {
        IndexKind::Var(t) => out.push(*t),
        IndexKind::Dims(l) => out.extend(l.eintups()),
        IndexKind::Lit(_) | IndexKind::Rank(_) => {}
        IndexKind::Flat(v) => v.iter().for_each(|x| mentioned(x, out)),
        IndexKind::Slice { indices, .. } => indices.iter().for_each(|s| {
            if let IndexSlot::Expr(x) = s {
                mentioned(x, out)
            }
        }),
        IndexKind::Bin(_, a, b) => {
            mentioned(a, out);
            mentioned(b, out);
        }
    }
}

impl<'a> Space<'a> {
    /// The configurations of `prog` under bindings and the shapes of the
    /// supplied input arrays.
    pub fn new(prog: &'a Program, ranks: &'a RankSystem, binds: &[Binding], inputs: &[InputShape]) -> Result<Space<'a>, Vec<Diagnostic>> {
        let m = &prog.module;
        let n = m.eintups.len();
        let mut bound = vec![None; n];
        let mut diags = Vec::new();
        for b in binds {
            match m.eintup_by_name(&b.name) {
                Some(e) => bound[e] = Some(b.dims.clone()),
                None => {
                    let names = || m.eintups.iter().map(|e| e.name.as_str());
                    let mut d = Diagnostic::error("E0302", format!("--bind names `{}`, which is not an eintup of this program", b.name));
                    if let Some(hint) = et_grammar::suggest::did_you_mean(&b.name, names()) {
                        d = d.note(hint);
                    }
                    diags.push(d.note(format!("eintups: {}", names().collect::<Vec<_>>().join(", "))));
                }
            }
        }
        let supplied = inputs::resolve(m, inputs).unwrap_or_else(|d| {
            diags.extend(d);
            Vec::new()
        });
        let mut derive = vec![None; n];
        let mut draw_in = vec![None; n];
        for (ci, c) in prog.constraints.iter().enumerate() {
            if c.subject != ConstraintSubject::Dims {
                continue;
            }
            match c.rel {
                Rel::Eq(_) if derive[c.target].is_none() => derive[c.target] = Some(ci),
                Rel::In { .. } if draw_in[c.target].is_none() => draw_in[c.target] = Some(ci),
                _ => {}
            }
        }
        let mut space = Space {
            prog,
            ranks,
            bound,
            inputs: supplied,
            split: Split { given: vec![None; n], checks: Vec::new() },
            combos: None,
            order: Vec::new(),
            derive,
            draw_in,
            sources: Vec::new(),
            used: vec![Vec::new(); n],
            warnings: Vec::new(),
        };
        if diags.is_empty() && !space.inputs.is_empty() {
            let combos = space.input_combos()?;
            let cuts = inputs::split(m, &space.inputs, &combos)?;
            space.split = inputs::given(m, &space.inputs, &cuts, &space.bound)?;
            space.combos = Some(combos);
        }
        if let Err(d) = space.schedule() {
            diags.push(d);
        }
        if !diags.is_empty() {
            return Err(diags);
        }
        space.warn();
        Ok(space)
    }

    /// How each eintup's dims are determined (module order).
    pub fn sources(&self) -> &[DimsSource] {
        &self.sources
    }

    /// Eintups in the order their dims are determined.
    pub fn order(&self) -> &[EintupId] {
        &self.order
    }

    /// The `DIMS(e) = expr` constraint that derives eintup `e` (its index
    /// in the program's constraints), if one does.
    pub fn derive(&self, e: EintupId) -> Option<usize> {
        self.derive.get(e).copied().flatten()
    }

    /// The accesses an inferred eintup `e` is inferred from.
    pub fn used(&self, e: EintupId) -> &[Access] {
        self.used.get(e).map_or(&[], Vec::as_slice)
    }

    /// The `--bind` dims of eintup `e`, if bound.
    pub fn bound(&self, e: EintupId) -> Option<Vec<i64>> {
        self.bound.get(e).cloned().flatten()
    }

    /// Warnings: bindings outside draw ranges (W0301), default draws (W0302).
    pub fn warnings(&self) -> &[Diagnostic] {
        &self.warnings
    }

    /// Names, dims and sources in module order.
    pub fn config(&self, dims: &[Vec<i64>]) -> Config {
        Config {
            dims: self.prog.module.eintups.iter().zip(dims).map(|(e, d)| (e.name.clone(), d.clone())).collect(),
            sources: self.sources.clone(),
            warnings: self.warnings.clone(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::driver::Source;
    use crate::pipeline::ranked;

    const CONV: &str = "x[b,ipos,c1] = RANDOM(0, 1, FLOAT)\nw[fpos,c1,c2] = RANDOM(0, 1, FLOAT)\ny[b,o,c2] = x[b,o+k,c1] * w[k,c1,c2]\n\ny\n\nRANK(b) = 1\nRANK(c1) = 1\nRANK(c2) = 1\n";

    fn input(name: &str, shape: &[i64]) -> InputShape {
        InputShape { name: name.into(), shape: shape.to_vec() }
    }

    /// The chosen configuration of `text` as (name, dims, source) text, or
    /// the error codes.
    fn choose(text: &str, binds: &[&str], inputs: &[InputShape]) -> Result<(Config, Vec<&'static str>), Vec<&'static str>> {
        let (prog, ranks) = ranked(&Source::from_string("t.et", text)).expect("resolves");
        let binds: Vec<Binding> = binds.iter().map(|b| parse_binding(b).expect("binding parses")).collect();
        let codes = |d: Vec<Diagnostic>| d.iter().map(|d| d.code).collect::<Vec<_>>();
        let space = Space::new(&prog, &ranks, &binds, inputs).map_err(codes)?;
        let dims = space.choose(0).map_err(codes)?;
        let cfg = space.config(&dims);
        let warnings = cfg.warnings.iter().map(|d| d.code).collect();
        Ok((cfg, warnings))
    }

    #[test]
    fn conv_from_inputs_alone() {
        // 2-D: ipos and fpos take rank 2 from the shapes; k = fpos, o =
        // ipos - fpos + 1, component-wise.
        let (cfg, w) = choose(CONV, &[], &[input("x", &[2, 9, 7, 3]), input("w", &[3, 2, 3, 4])]).unwrap();
        assert!(w.is_empty());
        assert_eq!(cfg.get("k"), Some(&[3, 2][..]));
        assert_eq!(cfg.get("o"), Some(&[7, 6][..]));
        assert_eq!(
            cfg.describe(),
            "b=[2] (input x), ipos=[9, 7] (input x), c1=[3] (input x), fpos=[3, 2] (input w), c2=[4] (input w), o=[7, 6] (inferred), k=[3, 2] (inferred)"
        );
        // 1-D and 3-D alike.
        let (cfg, _) = choose(CONV, &[], &[input("x", &[1, 5, 1]), input("w", &[5, 1, 1])]).unwrap();
        assert_eq!((cfg.get("k"), cfg.get("o")), (Some(&[5][..]), Some(&[1][..])));
        let (cfg, _) = choose(CONV, &[], &[input("x", &[1, 4, 4, 4, 2]), input("w", &[2, 3, 4, 2, 1])]).unwrap();
        assert_eq!(cfg.get("o"), Some(&[3, 2, 1][..]));
    }

    #[test]
    fn without_inputs_the_inputs_eintups_are_drawn_and_the_rest_inferred() {
        let (prog, ranks) = ranked(&Source::from_string("t.et", CONV)).unwrap();
        let space = Space::new(&prog, &ranks, &[], &[]).unwrap();
        let src: Vec<String> = space.sources().iter().map(DimsSource::text).collect();
        assert_eq!(src, ["drawn", "drawn", "drawn", "drawn", "drawn", "inferred", "inferred"]);
        let (rows, _) = space.enumerate(20, 1).unwrap();
        for r in rows {
            // k = fpos, o = ipos - fpos + 1 whenever that is not negative.
            assert_eq!(r[6], r[3]);
            assert_eq!(r[5][0], r[1][0] - r[3][0] + 1);
        }
    }

    #[test]
    fn splits_prefer_the_default_rank_and_report_ambiguity() {
        let two = "x[a,b] = RANDOM(0, 1, FLOAT)\ny[a,b] = x[a,b]\n";
        // Two dims: both keep rank 1.
        let (cfg, _) = choose(two, &[], &[input("x", &[2, 3])]).unwrap();
        assert_eq!((cfg.get("a"), cfg.get("b")), (Some(&[2][..]), Some(&[3][..])));
        // Three dims: a=[2] b=[3,4] or a=[2,3] b=[4].
        assert_eq!(choose(two, &[], &[input("x", &[2, 3, 4])]).unwrap_err(), ["E0315"]);
        // A binding settles it.
        let (cfg, _) = choose(two, &["a=[2]"], &[input("x", &[2, 3, 4])]).unwrap();
        assert_eq!(cfg.get("b"), Some(&[3, 4][..]));
        assert_eq!(cfg.sources[0], DimsSource::Bound);
        // So does a rank constraint; a rank the shape cannot have is E0314.
        let (cfg, _) = choose(&format!("{two}\nRANK(b) = 2\n"), &[], &[input("x", &[2, 3, 4])]).unwrap();
        assert_eq!(cfg.get("a"), Some(&[2][..]));
        assert_eq!(choose(&format!("{two}\nRANK(b) = 4\n"), &[], &[input("x", &[2, 3, 4])]).unwrap_err(), ["E0314"]);
        let (cfg, _) = choose(&format!("{two}\nRANK(b) = 3\n"), &[], &[input("x", &[2, 3, 4])]).unwrap();
        assert_eq!(cfg.get("a"), Some(&[][..]));
        // Rank 0 and zero-sized dims.
        let (cfg, _) = choose(&format!("{two}\nRANK(a) = 1\n"), &[], &[input("x", &[0])]).unwrap();
        assert_eq!((cfg.get("a"), cfg.get("b")), (Some(&[0][..]), Some(&[][..])));
    }

    #[test]
    fn conflicts_name_both_sides() {
        let two = "x[a] = RANDOM(0, 1, FLOAT)\nw[a] = RANDOM(0, 1, FLOAT)\ny[a] = x[a] * w[a]\n";
        assert_eq!(choose(two, &[], &[input("x", &[3]), input("w", &[4])]).unwrap_err(), ["E0316"]);
        assert_eq!(choose(two, &["a=[4]"], &[input("x", &[3])]).unwrap_err(), ["E0316"]);
        assert!(choose(two, &["a=[3]"], &[input("x", &[3]), input("w", &[3])]).is_ok());
        // An input against an equation, and an expression position.
        assert_eq!(choose(&format!("{two}\nDIMS(a) = 4\n"), &[], &[input("x", &[3])]).unwrap_err(), ["E0317"]);
        let sum = "x[a+b] = RANDOM(0, 1, FLOAT)\ny[a,b] = x[a+b]\n";
        assert_eq!(choose(sum, &["a=[2]", "b=[2]"], &[input("x", &[9])]).unwrap_err(), ["E0317"]);
        let (cfg, _) = choose(sum, &["a=[2]"], &[input("x", &[9])]).unwrap();
        assert_eq!(cfg.get("b"), Some(&[8][..]));
        // Unknown and computed arrays.
        assert_eq!(choose(two, &[], &[input("q", &[3])]).unwrap_err(), ["E0401"]);
        assert_eq!(choose(two, &[], &[input("y", &[3])]).unwrap_err(), ["E0402"]);
    }

    #[test]
    fn explicit_dims_outside_draw_ranges_warn() {
        let p = "x[a] = RANDOM(0, 1, FLOAT)\ny[a] = x[a]\n\nRANK(a) IN [1,1]\nDIMS(a) IN [2,3]\n";
        assert_eq!(choose(p, &["a=[9]"], &[]).unwrap().1, ["W0301"]);
        assert_eq!(choose(p, &["a=[9,9]"], &[]).unwrap().1, ["W0301", "W0301"]);
        // The user's own arrays are not draws: no warning.
        assert!(choose(p, &[], &[input("x", &[9])]).unwrap().1.is_empty());
        assert!(choose(p, &["a=[3]"], &[]).unwrap().1.is_empty());
        // An equation still binds.
        assert_eq!(choose(&format!("{p}DIMS(a) = 2\n"), &["a=[9]"], &[]).unwrap_err(), ["E0303"]);
        assert_eq!(choose(&format!("{p}RANK(a) = 1\n"), &["a=[9,9]"], &[]).unwrap_err(), ["E0303"]);
    }

    #[test]
    fn inference_errors() {
        let shift = "x[j] = RANDOM(0, 1, FLOAT)\ny[i] = x[i+2]\n";
        let (cfg, _) = choose(shift, &[], &[input("x", &[10])]).unwrap();
        assert_eq!(cfg.get("i"), Some(&[8][..]));
        assert_eq!(choose(shift, &[], &[input("x", &[1])]).unwrap_err(), ["E0313"]);
        assert_eq!(choose(&format!("{shift}\nDIMS(i) IN [1,3]\n"), &[], &[input("x", &[10])]).unwrap_err(), ["E0312"]);
        // A binding, or an equation, comes before inference.
        let (cfg, _) = choose(shift, &["i=[3]"], &[input("x", &[10])]).unwrap();
        assert_eq!(cfg.get("i"), Some(&[3][..]));
        let (cfg, _) = choose(&format!("{shift}\nDIMS(i) = 5\n"), &[], &[input("x", &[10])]).unwrap();
        assert_eq!((cfg.get("i"), &cfg.sources[1]), (Some(&[5][..]), &DimsSource::Constrained));
        assert_eq!(choose("x[p] = RANDOM(0, 1, FLOAT)\ny[i,j] = x[i+j] * x[j+i]\n", &[], &[]).unwrap_err(), ["E0311"]);
        // A derived eintup waits for the inferred one it reads.
        let (cfg, _) = choose(&format!("{shift}z[u] = 1\n\nDIMS(u) = DIMS(i) + 1\n"), &[], &[input("x", &[10])]).unwrap();
        assert_eq!(cfg.get("u"), Some(&[9][..]));
    }
}
