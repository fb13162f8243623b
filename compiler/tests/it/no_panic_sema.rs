//! Random but plausible `.et` programs never make the front half panic:
//! resolve + rank inference (`pipeline::ranked`), configuration choice
//! (`Space::new`/`choose`, also with the shapes of supplied inputs),
//! specialisation and the interpreter
//! (`interp::run`, on small configurations only). Errors are fine; a panic
//! fails the test and proptest prints the shrunk program.
//!
//! Programs come from the shared generator (`eintup_testkit::programs`: a
//! small grammar over four eintups and three arrays, plus random constraint
//! lines). Every module that gets through also round-trips through the
//! `et` text form and verifies, so the parser and verifier see modules
//! nobody wrote by hand.

use eintup::driver::Source;
use eintup::interp::{self, RunOptions};
use eintup::ir::et::{parse, print, verify};
use eintup::pipeline;
use eintup::sema::config::Space;
use eintup::sema::specialize::{specialize, MemoryLimit};
use eintup::sema::InputShape;
use eintup_testkit::programs::program;
use proptest::prelude::*;

/// Largest iteration space (product of a statement's variables' dims) and
/// largest array the interpreter is run on: keeps each case in milliseconds.
const MAX_WORK: i64 = 4096;
/// Memory limit for specialisation (bytes): far below the default 4 GiB so
/// big draws are rejected as an error instead of allocated.
const MEMORY_LIMIT: MemoryLimit = MemoryLimit { bytes: 1 << 20, float_bytes: 8 };

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
    if m.largest_extent() > MAX_WORK {
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
    #![proptest_config(ProptestConfig::with_cases(eintup_testkit::cases(2000)))]

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
