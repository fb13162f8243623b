//! Random but plausible `.et` programs, as proptest strategies: one
//! generator for every suite that feeds the compiler programs nobody wrote
//! by hand (`compiler/tests/it/no_panic_sema.rs`: the front end never panics;
//! `compiler/codegen/tests/it/random_programs.rs`: every backend computes what
//! the interpreter computes).
//!
//! Programs come from a small grammar over four eintups ([`EINTUPS`]) and
//! three arrays ([`ARRAYS`]): one to four statements ([`stmt`]), an
//! optional output line, and up to five constraint lines ([`constraint`]).
//! Statements are drawn as skeletons ([`St`]) and rendered ([`render`]) so
//! that they are mostly well-formed: reads name arrays defined earlier with
//! the right number of indices, first mentions have no slices, and the
//! right operand of an index `* // //^ %` is mostly static. The rest
//! (undefined eintups, rank conflicts, dynamic divisors, contradictory
//! constraints) is left in on purpose: the front end must reject it
//! cleanly.
//!
//! What the strategies draw:
//! - index expressions: eintups, literals `0..4`, `DIMS(t)`, `DIMS(n)`
//!   (a literal in a DIMS list), `RANK(t)`,
//!   `+ - * // //^ %`, `FLAT(..)`, slices `a[t, .., :]` of defined arrays;
//! - right-hand sides: reads, INT literals `-3..10`, the FLOAT literal
//!   `2.5`, `DIMS(l)[t]`, `RANK(t)`, `RANDOM(lo, hi, INT|FLOAT)`,
//!   `+ - * / // %`, negation, the comparisons and the functions
//!   ([`FUNCS`]);
//! - statements `=`, `+=`, `max=` and `min=`;
//! - constraints: `RANK(t) = n`, `RANK(t) IN [..]`, `DIMS(t) IN [..]`,
//!   `DIMS(t) = DIMS(u) + k`, `DIMS(t) = RANK(u)`,
//!   `DIMS(t) = DIMS(u) - DIMS(v)`, mostly about eintups the statements
//!   use (a constraint about another eintup is E0124).

use proptest::prelude::*;

/// The eintups programs use.
pub const EINTUPS: &[&str] = &["a", "b", "c", "d"];
/// The arrays programs write.
pub const ARRAYS: &[&str] = &["x", "y", "z"];

/// Index expression skeleton; arrays are chosen by number and fitted to
/// what is defined when the program is rendered.
#[derive(Clone, Debug)]
pub enum Ix {
    Var(usize),
    Lit(i64),
    Dims(usize),
    /// `DIMS(n)`: a literal in a DIMS list, the one component `n+1`.
    DimsLit(i64),
    Rank(usize),
    /// With `true`, a `* // //^ %` gets a static right operand (the static
    /// rules of docs/language.md s.4); with `false` it may break them.
    Bin(&'static str, Box<Ix>, Box<Ix>, bool),
    Flat(Vec<Ix>),
    /// `a[t, .., :]` of the defined array number `.0`.
    Slice(usize, usize),
}

/// The functions right-hand sides call, with their arities.
pub const FUNCS: &[(&str, usize)] = &[("exp", 1), ("log", 1), ("sqrt", 1), ("tanh", 1), ("abs", 1), ("max", 2), ("min", 2), ("pow", 2), ("select", 3)];

/// Statement operators, `=` most often.
pub const ASSIGN_OPS: &[&str] = &["=", "=", "=", "=", "=", "=", "+=", "max=", "min="];

/// Right-hand side skeleton.
#[derive(Clone, Debug)]
pub enum Rhs {
    Read(usize, Vec<Ix>),
    Int(i64),
    Float,
    DimsAt(usize, usize),
    Rank(usize),
    Random(i64, i64, bool),
    Bin(&'static str, Box<Rhs>, Box<Rhs>),
    Neg(Box<Rhs>),
    /// `a < b` and the other comparisons.
    Cmp(&'static str, Box<Rhs>, Box<Rhs>),
    /// A function of [`FUNCS`] and its arguments.
    Call(&'static str, Vec<Rhs>),
}

/// Statement skeleton: `ARRAYS[array][lhs] op rhs`.
#[derive(Clone, Debug)]
pub struct St {
    pub array: usize,
    pub lhs: Vec<Ix>,
    /// One of [`ASSIGN_OPS`].
    pub op: &'static str,
    pub rhs: Rhs,
}

/// Index expressions.
pub fn ix() -> impl Strategy<Value = Ix> {
    let e = 0..EINTUPS.len();
    let leaf = prop_oneof![
        6 => e.clone().prop_map(Ix::Var),
        1 => (0i64..4).prop_map(Ix::Lit),
        1 => e.clone().prop_map(Ix::Dims),
        1 => (0i64..3).prop_map(Ix::DimsLit),
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

/// Right-hand sides.
pub fn rhs() -> impl Strategy<Value = Rhs> {
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
            1 => inner.clone().prop_map(|e| Rhs::Neg(Box::new(e))),
            1 => (prop::sample::select(&["<", "<=", ">", ">=", "==", "!="][..]), inner.clone(), inner.clone())
                .prop_map(|(op, a, b)| Rhs::Cmp(op, Box::new(a), Box::new(b))),
            2 => (prop::sample::select(FUNCS), prop::collection::vec(inner, 3)).prop_map(|((f, n), mut args)| {
                args.truncate(n);
                Rhs::Call(f, args)
            }),
        ]
    })
}

/// Statements.
pub fn stmt() -> impl Strategy<Value = St> {
    (0..ARRAYS.len(), prop::collection::vec(ix(), 0..4), prop::sample::select(ASSIGN_OPS), rhs()).prop_map(|(array, lhs, op, rhs)| St { array, lhs, op, rhs })
}

/// Arrays defined so far, with their number of index positions.
type Defined = Vec<(&'static str, usize)>;

fn render_ix(e: &Ix, defined: &Defined, first_mention: bool) -> String {
    match e {
        Ix::Var(t) => EINTUPS[*t].to_string(),
        Ix::Lit(n) => n.to_string(),
        Ix::Dims(t) => format!("DIMS({})", EINTUPS[*t]),
        Ix::DimsLit(n) => format!("DIMS({n})"),
        Ix::Rank(t) => format!("RANK({})", EINTUPS[*t]),
        Ix::Bin(op, a, b, strict) => {
            let right = match &**b {
                Ix::Lit(_) | Ix::Dims(_) | Ix::DimsLit(_) | Ix::Rank(_) => render_ix(b, defined, first_mention),
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
            let slots: Vec<String> =
                (0..n).map(|k| ix.get(k).map_or_else(|| EINTUPS[k % EINTUPS.len()].to_string(), |e| render_ix(e, defined, false))).collect();
            format!("{name}[{}]", slots.join(","))
        }
        Rhs::Int(n) => n.to_string(),
        Rhs::Float => "2.5".into(),
        Rhs::DimsAt(l, t) => format!("DIMS({})[{}]", EINTUPS[*l], EINTUPS[*t]),
        Rhs::Rank(t) => format!("RANK({})", EINTUPS[*t]),
        Rhs::Random(lo, hi, f) => format!("RANDOM({lo}, {hi}, {})", if *f { "FLOAT" } else { "INT" }),
        Rhs::Bin(op, a, b) => format!("({} {op} {})", render_rhs(a, defined), render_rhs(b, defined)),
        Rhs::Neg(a) => format!("-{}", render_rhs(a, defined)),
        Rhs::Cmp(op, a, b) => format!("({} {op} {})", render_rhs(a, defined), render_rhs(b, defined)),
        Rhs::Call(f, args) => format!("{f}({})", args.iter().map(|a| render_rhs(a, defined)).collect::<Vec<_>>().join(", ")),
    }
}

/// Renders statements so that they are mostly well-formed: reads name
/// arrays defined earlier with the right number of indices, and first
/// mentions have no slices.
pub fn render(stmts: &[St]) -> String {
    let mut defined: Defined = Vec::new();
    let mut lines = Vec::new();
    for s in stmts {
        let name = ARRAYS[s.array];
        let rhs = render_rhs(&s.rhs, &defined);
        let lhs = match defined.iter().find(|(n, _)| *n == name) {
            Some(&(_, n)) => (0..n).map(|k| s.lhs.get(k).map_or_else(|| EINTUPS[k].to_string(), |e| render_ix(e, &defined, false))).collect::<Vec<_>>(),
            None => {
                defined.push((name, s.lhs.len()));
                s.lhs.iter().map(|e| render_ix(e, &defined, true)).collect()
            }
        };
        lines.push(format!("{name}[{}] {} {rhs}", lhs.join(","), s.op));
    }
    lines.join("\n")
}

/// Constraint lines.
pub fn constraint() -> impl Strategy<Value = String> {
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

/// Does every eintup a constraint line names occur in the statements?
fn about_used_eintups(stmts: &str, constraint: &str) -> bool {
    let words = |t: &str| t.split(|c: char| !c.is_alphanumeric() && c != '_').filter(|w| EINTUPS.contains(w)).map(str::to_string).collect::<Vec<_>>();
    let used = words(stmts);
    words(constraint).iter().all(|w| used.contains(w))
}

/// Whole programs: statements, an optional output line, constraints.
pub fn program() -> impl Strategy<Value = String> {
    (prop::collection::vec(stmt(), 1..5), prop::option::of(prop::sample::select(ARRAYS)), prop::collection::vec(constraint(), 0..6)).prop_map(|(s, out, c)| {
        // Constraints about eintups no statement mentions are E0124
        // (see `about_used_eintups`); most programs keep only the others
        // so that they reach the backends, one in eight keeps them all.
        assemble(&s, out, c, |text| text.len().is_multiple_of(8))
    })
}

/// The program text of statements `stmts`, an optional output line, and
/// the constraints `c`: all of them where `keep_all` says so of the
/// rendered statements, else those about eintups the statements use.
fn assemble(stmts: &[St], out: Option<&str>, c: Vec<String>, keep_all: impl Fn(&str) -> bool) -> String {
    let mut text = render(stmts);
    let keep_all = keep_all(&text);
    let c: Vec<String> = c.into_iter().filter(|c| keep_all || about_used_eintups(&text, c)).collect();
    text.push_str("\n\n");
    if let Some(o) = out {
        text.push_str(o);
        text.push_str("\n\n");
    }
    text.push_str(&c.join("\n"));
    text.push('\n');
    text
}

/// Right-hand sides that are smooth where they are finite: reads,
/// literals, `+ - * /`, negation, `exp` and `tanh` (no comparisons,
/// floor divisions, kinks or draws). For gradients against finite
/// differences (`compiler/codegen/tests/it/gradients.rs`).
pub fn smooth_rhs() -> impl Strategy<Value = Rhs> {
    let leaf = prop_oneof![
        5 => (0..3usize, prop::collection::vec(ix(), 0..4)).prop_map(|(a, v)| Rhs::Read(a, v)),
        1 => (-3i64..10).prop_map(Rhs::Int),
        1 => Just(Rhs::Float),
    ];
    leaf.prop_recursive(2, 8, 2, |inner| {
        prop_oneof![
            4 => (prop::sample::select(&["+", "-", "*", "/"][..]), inner.clone(), inner.clone()).prop_map(|(op, a, b)| Rhs::Bin(op, Box::new(a), Box::new(b))),
            1 => inner.clone().prop_map(|e| Rhs::Neg(Box::new(e))),
            1 => (prop::sample::select(&["exp", "tanh"][..]), inner).prop_map(|(f, a)| Rhs::Call(f, vec![a])),
        ]
    })
}

/// Programs for gradients: one or two FLOAT inputs (`RANDOM(-2, 2,
/// FLOAT)`), then one to three `=`/`+=` statements with [`smooth_rhs`]
/// (which may write an input or an earlier array again), an optional
/// output line and constraints.
pub fn smooth_program() -> impl Strategy<Value = String> {
    let input = (0..2usize, prop::collection::vec(ix(), 0..3)).prop_map(|(array, lhs)| St { array, lhs, op: "=", rhs: Rhs::Random(-2, 2, true) });
    let body = (0..ARRAYS.len(), prop::collection::vec(ix(), 0..3), prop::sample::select(&["=", "=", "+="][..]), smooth_rhs())
        .prop_map(|(array, lhs, op, rhs)| St { array, lhs, op, rhs });
    (
        prop::collection::vec(input, 1..3),
        prop::collection::vec(body, 1..4),
        prop::option::of(prop::sample::select(ARRAYS)),
        prop::collection::vec(constraint(), 0..4),
    )
        .prop_map(|(inputs, body, out, c)| {
            let stmts: Vec<St> = inputs.into_iter().chain(body).collect();
            assemble(&stmts, out, c, |_| false)
        })
}
