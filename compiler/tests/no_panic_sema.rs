//! Random but plausible `.et` programs never make the front half panic:
//! resolve + rank inference (`pipeline::ranked`), configuration choice
//! (`Space::new`/`choose`, also with the shapes of supplied inputs),
//! specialisation and the interpreter
//! (`interp::run`, on small configurations only). Errors are fine; a panic
//! fails the test and proptest prints the shrunk program.
//!
//! Programs come from a small grammar over four eintups and three arrays,
//! plus random constraint lines. Every module that gets through also
//! round-trips through the `et` text form and verifies, so the parser and
//! verifier see modules nobody wrote by hand.

use eintup::driver::Source;
use eintup::interp::{self, RunOptions};
use eintup::ir::et::{parse, print, verify};
use eintup::pipeline;
use eintup::sema::config::Space;
use eintup::sema::InputShape;
use eintup::sema::specialize::{specialize, MemoryLimit};
use proptest::prelude::*;

const EINTUPS: &[&str] = &["a", "b", "c", "d"];
const ARRAYS: &[&str] = &["x", "y", "z"];

/// Largest iteration space (product of a statement's variables' dims) and
/// largest array the interpreter is run on: keeps each case in milliseconds.
const MAX_WORK: i64 = 4096;
/// Memory limit for specialisation (bytes): far below the default 4 GiB so
/// big draws are rejected as an error instead of allocated.
const MEMORY_LIMIT: MemoryLimit = MemoryLimit { bytes: 1 << 20, float_bytes: 8 };

/// Index expression skeleton; arrays are chosen by number and fitted to
/// what is defined when the program is rendered.
#[derive(Clone, Debug)]
enum Ix {
    Var(usize),
    Lit(i64),
    Dims(usize),
    Rank(usize),
    /// With `true`, a `* // //^ %` gets a static right operand (the static
    /// rules of LANGUAGE.md s.4); with `false` it may break them.
    Bin(&'static str, Box<Ix>, Box<Ix>, bool),
    Flat(Vec<Ix>),
    /// `a[t, .., :]` of the defined array number `.0`.
    Slice(usize, usize),
}

#[derive(Clone, Debug)]
enum Rhs {
    Read(usize, Vec<Ix>),
    Int(i64),
    Float,
    DimsAt(usize, usize),
    Rank(usize),
    Random(i64, i64, bool),
    Bin(&'static str, Box<Rhs>, Box<Rhs>),
    Neg(Box<Rhs>),
}

#[derive(Clone, Debug)]
struct St {
    array: usize,
    lhs: Vec<Ix>,
    assign: bool,
    rhs: Rhs,
}

fn ix() -> impl Strategy<Value = Ix> {
    let e = 0..EINTUPS.len();
    let leaf = prop_oneof![
        6 => e.clone().prop_map(Ix::Var),
        1 => (0i64..4).prop_map(Ix::Lit),
        1 => e.clone().prop_map(Ix::Dims),
        1 => e.clone().prop_map(Ix::Rank),
        1 => (0..3usize, e).prop_map(|(a, t)| Ix::Slice(a, t)),
    ];
    leaf.prop_recursive(3, 12, 3, |inner| {
        prop_oneof![
            3 => (prop::sample::select(&["+", "-", "*", "//", "//^", "%"][..]), inner.clone(), inner.clone(), prop::bool::weighted(0.9))
                .prop_map(|(op, a, b, strict)| Ix::Bin(op, Box::new(a), Box::new(b), strict)),
            1 => prop::collection::vec(inner, 1..3).prop_map(Ix::Flat),
        ]
    })
}

fn rhs() -> impl Strategy<Value = Rhs> {
    let e = 0..EINTUPS.len();
    let leaf = prop_oneof![
        4 => (0..3usize, prop::collection::vec(ix(), 0..4)).prop_map(|(a, v)| Rhs::Read(a, v)),
        1 => (-3i64..10).prop_map(Rhs::Int),
        1 => Just(Rhs::Float),
        1 => (e.clone(), e.clone()).prop_map(|(l, t)| Rhs::DimsAt(l, t)),
        1 => e.prop_map(Rhs::Rank),
        2 => (0i64..3, 1i64..12, prop::bool::ANY).prop_map(|(lo, hi, f)| Rhs::Random(lo, hi, f)),
    ];
    leaf.prop_recursive(2, 8, 2, |inner| {
        prop_oneof![
            3 => (prop::sample::select(&["+", "-", "*", "/", "//", "%"][..]), inner.clone(), inner.clone())
                .prop_map(|(op, a, b)| Rhs::Bin(op, Box::new(a), Box::new(b))),
            1 => inner.prop_map(|e| Rhs::Neg(Box::new(e))),
        ]
    })
}

fn stmt() -> impl Strategy<Value = St> {
    (0..ARRAYS.len(), prop::collection::vec(ix(), 0..4), prop::bool::weighted(0.85), rhs())
        .prop_map(|(array, lhs, assign, rhs)| St { array, lhs, assign, rhs })
}

/// Arrays defined so far, with their number of index positions.
type Defined = Vec<(&'static str, usize)>;

fn render_ix(e: &Ix, defined: &Defined, first_mention: bool) -> String {
    match e {
        Ix::Var(t) => EINTUPS[*t].to_string(),
        Ix::Lit(n) => n.to_string(),
        Ix::Dims(t) => format!("DIMS({})", EINTUPS[*t]),
        Ix::Rank(t) => format!("RANK({})", EINTUPS[*t]),
        Ix::Bin(op, a, b, strict) => {
            let right = match &**b {
                Ix::Lit(_) | Ix::Dims(_) | Ix::Rank(_) => render_ix(b, defined, first_mention),
                Ix::Var(t) if *strict && !matches!(*op, "+" | "-") => format!("DIMS({})", EINTUPS[*t]),
                _ if *strict && !matches!(*op, "+" | "-") => "2".to_string(),
                _ => render_ix(b, defined, first_mention),
            };
            format!("({}{op}{right})", render_ix(a, defined, first_mention))
        }
        Ix::Flat(v) => format!("FLAT({})", v.iter().map(|x| render_ix(x, defined, first_mention)).collect::<Vec<_>>().join(",")),
        Ix::Slice(a, t) => {
            // A slice in a first mention is an error the generator mostly
            // avoids; elsewhere it slices a defined array's last position.
            let usable: Vec<_> = defined.iter().filter(|(_, n)| *n > 0).collect();
            if first_mention || usable.is_empty() {
                return EINTUPS[*t].to_string();
            }
            let (name, n) = usable[a % usable.len()];
            let mut slots = vec![EINTUPS[*t].to_string(); n - 1];
            slots.push(":".into());
            format!("{name}[{}]", slots.join(","))
        }
    }
}

fn render_rhs(r: &Rhs, defined: &Defined) -> String {
    match r {
        Rhs::Read(a, ix) => {
            if defined.is_empty() {
                return "1".into();
            }
            let (name, n) = defined[a % defined.len()];
            let slots: Vec<String> = (0..n).map(|k| ix.get(k).map_or_else(|| EINTUPS[k % EINTUPS.len()].to_string(), |e| render_ix(e, defined, false))).collect();
            format!("{name}[{}]", slots.join(","))
        }
        Rhs::Int(n) => n.to_string(),
        Rhs::Float => "2.5".into(),
        Rhs::DimsAt(l, t) => format!("DIMS({})[{}]", EINTUPS[*l], EINTUPS[*t]),
        Rhs::Rank(t) => format!("RANK({})", EINTUPS[*t]),
        Rhs::Random(lo, hi, f) => format!("RANDOM({lo}, {hi}, {})", if *f { "FLOAT" } else { "INT" }),
        Rhs::Bin(op, a, b) => format!("({} {op} {})", render_rhs(a, defined), render_rhs(b, defined)),
        Rhs::Neg(a) => format!("-{}", render_rhs(a, defined)),
    }
}

/// Renders statements so that they are mostly well-formed: reads name
/// arrays defined earlier with the right number of indices, and first
/// mentions have no slices.
fn render(stmts: &[St]) -> String {
    let mut defined: Defined = Vec::new();
    let mut lines = Vec::new();
    for s in stmts {
        let name = ARRAYS[s.array];
        let rhs = render_rhs(&s.rhs, &defined);
        let lhs = match defined.iter().find(|(n, _)| *n == name) {
            Some(&(_, n)) => {
                (0..n).map(|k| s.lhs.get(k).map_or_else(|| EINTUPS[k].to_string(), |e| render_ix(e, &defined, false))).collect::<Vec<_>>()
            }
            None => {
                defined.push((name, s.lhs.len()));
                s.lhs.iter().map(|e| render_ix(e, &defined, true)).collect()
            }
        };
        lines.push(format!("{name}[{}] {} {rhs}", lhs.join(","), if s.assign { "=" } else { "+=" }));
    }
    lines.join("\n")
}

fn constraint() -> impl Strategy<Value = String> {
    let e = || prop::sample::select(EINTUPS);
    prop_oneof![
        1 => (e(), 0i64..4).prop_map(|(t, n)| format!("RANK({t}) = {n}")),
        1 => (e(), 0i64..3, 0i64..3).prop_map(|(t, lo, w)| format!("RANK({t}) IN [{lo},{}]", lo + w)),
        3 => (e(), 0i64..4, 0i64..4).prop_map(|(t, lo, w)| format!("DIMS({t}) IN [{lo},{}]", lo + w)),
        1 => (e(), e(), -1i64..3).prop_map(|(t, u, k)| format!("DIMS({t}) = DIMS({u}) + {k}")),
        1 => (e(), e()).prop_map(|(t, u)| format!("DIMS({t}) = RANK({u})")),
        1 => (e(), e(), e()).prop_map(|(t, u, v)| format!("DIMS({t}) = DIMS({u}) - DIMS({v})")),
    ]
}

fn program() -> impl Strategy<Value = String> {
    (prop::collection::vec(stmt(), 1..5), prop::option::of(prop::sample::select(ARRAYS)), prop::collection::vec(constraint(), 0..6)).prop_map(
        |(s, out, c)| {
            let mut text = render(&s);
            text.push_str("\n\n");
            if let Some(o) = out {
                text.push_str(o);
                text.push_str("\n\n");
            }
            text.push_str(&c.join("\n"));
            text.push('\n');
            text
        },
    )
}

/// print -> parse -> print is identical and both modules verify.
fn text_round_trip(m: &eintup::ir::et::Module, what: &str, src: &str) {
    let text = print::module(m);
    let parsed = parse::parse_module(&text).unwrap_or_else(|d| panic!("{what} of\n{src}\ndoes not parse back: {d:?}\n{text}"));
    assert_eq!(print::module(&parsed), text, "{what} of\n{src}");
    assert_eq!(verify::verify(m), Ok(()), "{what} of\n{src}\n{text}");
    assert_eq!(verify::verify(&parsed), Ok(()), "{what} of\n{src}");
}

fn front_half(src_text: &str, seed: u64) {
    let src = Source::from_string("p.et", src_text);
    let Ok((mut prog, ranks)) = pipeline::ranked(&src) else { return };
    let before = prog.module.clone();
    text_round_trip(&before, "ranked module", src_text);
    with_inputs(&prog, &ranks, seed);
    let Ok(space) = Space::new(&prog, &ranks, &[], &[]) else { return };
    let Ok(dims) = space.choose(seed) else { return };
    let cfg = space.config(&dims);
    if specialize(&mut prog, &cfg, MEMORY_LIMIT).is_err() {
        return;
    }
    let m = prog.module;
    text_round_trip(&m, "specialised module", src_text);
    assert_eq!(verify::verify_refines(&before, &m), Ok(()), "specialising must refine:\n{src_text}");
    // Small configurations only: the interpreter enumerates every
    // statement's iteration space.
    let size = |ids: &[usize]| -> i64 {
        ids.iter()
            .try_fold(1i64, |acc, e| m.eintups.get(*e)?.dims.as_ref()?.iter().try_fold(acc, |a, d| a.checked_mul(*d)))
            .unwrap_or(i64::MAX)
    };
    let big_stmt = m.stmts.iter().any(|s| size(&s.vars) > MAX_WORK);
    let big_array = (0..m.arrays.len()).any(|a| m.array_shape(a).is_none_or(|s| s.iter().try_fold(1i64, |p, d| p.checked_mul(*d)).is_none_or(|n| n > MAX_WORK)));
    if big_stmt || big_array {
        return;
    }
    let _ = interp::run(&m, &RunOptions { seed, ..RunOptions::default() });
}

/// Supplies every input array with a shape made from the seed (any
/// length, zero dims included): splitting it over the signature and range
/// inference from it must not panic either.
fn with_inputs(prog: &eintup::sema::Program, ranks: &eintup::sema::RankSystem, seed: u64) {
    let inputs: Vec<InputShape> = prog
        .module
        .arrays
        .iter()
        .enumerate()
        .filter(|(_, a)| a.is_input)
        .map(|(k, a)| {
            let len = (seed as usize + k) % 4;
            InputShape { name: a.name.clone(), shape: (0..len).map(|j| (seed as i64 + j as i64 * 3 + k as i64) % 5).collect() }
        })
        .collect();
    let Ok(space) = Space::new(prog, ranks, &[], &inputs) else { return };
    let Ok(dims) = space.choose(seed) else { return };
    let cfg = space.config(&dims);
    let mut p = prog.clone();
    let _ = specialize(&mut p, &cfg, MEMORY_LIMIT);
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(2000))]

    #[test]
    fn front_half_never_panics(text in program(), seed in 0u64..4) {
        front_half(&text, seed);
    }
}

/// Hand-picked programs the generator reaches only rarely.
#[test]
fn corner_programs_do_not_panic() {
    let cases = [
        "x[] = 1\n",
        "x[a] = RANDOM(0, 3, INT)\ny[x[a,:]] = 1\n",
        "x[a,b] = a[b]\n",
        "x[a] = 1\n\nRANK(a) = 0\n",
        "x[a//0] = 1\n",
        "x[a] = 1\ny[b] = x[a] // 0\n\nDIMS(a) IN [0,0]\n",
        "x[FLAT()] = 1\n",
        "x[a-DIMS(b)] = 1\n\nDIMS(b) = DIMS(a) + 2\n",
        "x[a] = DIMS(b)[a]\n\nRANK(a) = 1\nDIMS(a) = RANK(b)\n",
        "x[a] = 1\n\nDIMS(a) = DIMS(b) + 1\nDIMS(b) = DIMS(a) + 1\n",
    ];
    for c in cases {
        for seed in 0..3 {
            front_half(c, seed);
        }
    }
}
