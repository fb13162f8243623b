//! Mutated textual IR through `etopt`'s path (issue #49 item 8): the `et`
//! and `loop` forms of the examples, with a few tokens replaced, removed,
//! duplicated or swapped, read back (`Unit::read`), run through the rest
//! of the default GPU pipeline and lowered to PTX. Whatever the text, the
//! outcome is the IR, or a user error (a located diagnostic, exit 2):
//! never a panic, an internal error or a code generation bug (exit 70).
//!
//! The suite runs [`DEFAULT_CASES`] mutations from one fixed seed;
//! `PROPTEST_CASES=N` runs N from fresh seeds (the search for new
//! findings); a failure is shrunk and recorded in
//! `ir_fuzz.proptest-regressions`. Known open: an `et` module whose
//! signature position ranks disagree with a read's slots in ways rank
//! inference does not see ("index of rank 1 at a position of rank 3",
//! about 1 in 30,000 mutations).

use eintup::driver::Source;
use eintup::passes::manager::{Instrument, PassManager, DEFAULT_PIPELINE, GPU_PASSES};
use eintup::passes::{DriverOptions, Ir, PassError, Unit};
use eintup_codegen::{emit_ptx, CodegenError, FpContract};
use eintup_testkit::examples;
use proptest::prelude::*;
use proptest::test_runner::{FileFailurePersistence, RngAlgorithm, TestCaseError, TestRng, TestRunner};
use std::sync::OnceLock;

/// Most mutations stop at a parse or verifier error (microseconds); one in
/// ten or so reaches LLVM (milliseconds): 300 take about a second.
const DEFAULT_CASES: u32 = 300;

/// Words the mutations put in: numbers at the edges of every range the
/// parsers read, op and keyword names of both dialects, brackets.
const WORDS: &[&str] = &[
    "0",
    "-1",
    "1",
    "99999999999",
    "4294967296",
    "1e308",
    "inf",
    "NaN",
    "%0",
    "%9",
    "%99999",
    "f32",
    "i32",
    "f64",
    "INT",
    "FLOAT",
    "(",
    ")",
    "[",
    "]",
    "{",
    "}",
    ",",
    ":",
    "=",
    "+=",
    "max",
    "min",
    "reduce",
    "parallel",
    "thread",
    "unroll",
    "spread",
    "store",
    "accumulate",
    "maximize",
    "atomic_maximize",
    "select",
    "exp",
    "lt",
    "load_index",
    "guard",
    "sync",
    "x",
    "?",
    "?3",
];

/// The examples' IR texts: rank-polymorphic and specialised `et`, and
/// `loop` after the default pipeline (seed 1).
fn corpus() -> &'static [String] {
    static C: OnceLock<Vec<String>> = OnceLock::new();
    C.get_or_init(|| {
        let mut out = Vec::new();
        for p in examples()
            .into_iter()
            .filter(|p| ["matmul", "gather_nd", "softmax", "max_pool", "scatter_nd", "conv_valid"].iter().any(|n| p.ends_with(format!("{n}.et"))))
        {
            let src = Source::load(&p).unwrap();
            for upto in ["infer-ranks", "specialize", "drop-unused-loops"] {
                // max_pool's rank-polymorphic form lacks the `DIMS(opos) =`
                // constraint it needs (test/passes/roundtrip.test says why).
                if upto == "infer-ranks" && p.ends_with("max_pool.et") {
                    continue;
                }
                let mut unit = Unit::read(src.clone()).unwrap();
                let names: Vec<&str> = DEFAULT_PIPELINE.iter().copied().take_while(|n| *n != upto).chain([upto]).collect();
                // `drop-unused-loops` runs twice; the first is enough.
                let pm = PassManager::from_names(&names, Instrument::default()).unwrap();
                let opts = DriverOptions { seed: 1, ..DriverOptions::default() };
                pm.run_passes(&mut unit, &opts, &mut std::io::sink()).unwrap();
                out.push(eintup::passes::manager::print_ir(&unit));
            }
        }
        out
    })
}

/// How far a text got.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
enum Reached {
    /// Refused by the parser or the verifier (a user error).
    Read,
    /// Read, then refused by a pass (a user error).
    Passes,
    /// Refused by code generation as invalid IR (a user error).
    Codegen,
    /// PTX.
    Ptx,
}

/// The rest of the default GPU pipeline and PTX, as etopt runs them on a
/// `.etir` file; `Err` only for a bug.
fn compile(text: &str) -> Result<Reached, String> {
    let mut unit = match Unit::read(Source::from_string("fuzz.etir", text)) {
        Ok(u) => u,
        Err(PassError::Internal(e)) => return Err(format!("reading: internal error: {e}")),
        Err(_) => return Ok(Reached::Read),
    };
    let names: Vec<&str> = DEFAULT_PIPELINE.iter().chain(GPU_PASSES).copied().collect();
    let pm = PassManager::from_names(&names, Instrument::default()).map_err(|e| format!("{e:?}"))?.skip_to(unit.ir.level());
    match pm.run_passes(&mut unit, &DriverOptions::default(), &mut std::io::sink()) {
        Ok(()) => {}
        Err(PassError::Internal(e)) => return Err(format!("passes: internal error: {e}")),
        Err(_) => return Ok(Reached::Passes),
    }
    let Ir::Loop(m) = &unit.ir else { return Err("the pipeline did not end at the loop level".into()) };
    match emit_ptx(m, 0, 80, FpContract::Fast) {
        Err(CodegenError::Internal(e)) => Err(format!("codegen: internal error: {e}")),
        Err(_) => Ok(Reached::Codegen),
        Ok(_) => Ok(Reached::Ptx),
    }
}

#[derive(Clone, Debug)]
enum Edit {
    /// A number becomes another ([`NUMBERS`]): the text still parses, and
    /// the verifier, the passes and code generation see odd values.
    Number(usize, usize),
    /// Any token becomes one of [`WORDS`].
    Word(usize, usize),
    Remove(usize),
    Duplicate(usize, usize),
    Swap(usize, usize),
}

/// Numbers at the edges of what the parsers and the passes handle, up to
/// 2^32 (docs/limits.md, "Loop bounds in textual IR": a constant bound
/// beyond 2^48 is refused, but one inside a bound expression near it can
/// still take a pass past that bound: an open finding).
const NUMBERS: &[&str] = &["0", "1", "2", "3", "7", "16", "31", "32", "33", "1023", "1024", "1025", "65536", "2147483647", "2147483648", "4294967296"];

fn edit() -> impl Strategy<Value = Edit> {
    prop_oneof![
        6 => (any::<usize>(), 0..NUMBERS.len()).prop_map(|(i, w)| Edit::Number(i, w)),
        2 => (any::<usize>(), 0..WORDS.len()).prop_map(|(i, w)| Edit::Word(i, w)),
        1 => any::<usize>().prop_map(Edit::Remove),
        1 => (any::<usize>(), any::<usize>()).prop_map(|(i, j)| Edit::Duplicate(i, j)),
        1 => (any::<usize>(), any::<usize>()).prop_map(|(i, j)| Edit::Swap(i, j)),
    ]
}

/// The text's tokens: runs of digits, of word characters, and single
/// other characters (whitespace included), so that joining them gives the
/// text back.
fn tokens(text: &str) -> Vec<String> {
    let mut out: Vec<String> = Vec::new();
    let class = |c: char| {
        if c.is_ascii_digit() {
            0
        } else if c.is_alphanumeric() || c == '_' {
            1
        } else {
            2
        }
    };
    for c in text.chars() {
        match out.last_mut() {
            Some(t) if class(c) != 2 && t.chars().last().is_some_and(|l| class(l) == class(c)) => t.push(c),
            _ => out.push(c.to_string()),
        }
    }
    out
}

/// `text` with the edits applied to its tokens.
fn mutate(text: &str, edits: &[Edit]) -> String {
    let mut toks = tokens(text);
    let numbers: Vec<usize> = (0..toks.len()).filter(|&i| toks[i].starts_with(|c: char| c.is_ascii_digit())).collect();
    for e in edits {
        let n = toks.len();
        if n == 0 {
            break;
        }
        match *e {
            Edit::Number(i, w) if !numbers.is_empty() => {
                let k = numbers[i % numbers.len()];
                if k < n {
                    toks[k] = NUMBERS[w].to_string();
                }
            }
            Edit::Word(i, w) => toks[i % n] = WORDS[w].to_string(),
            Edit::Remove(i) => {
                toks.remove(i % n);
            }
            Edit::Duplicate(i, j) => {
                let t = toks[j % n].clone();
                toks.insert(i % n, t);
            }
            Edit::Swap(i, j) => toks.swap(i % n, j % n),
            Edit::Number(..) => {}
        }
    }
    toks.concat()
}

/// [`DEFAULT_CASES`] mutations (`PROPTEST_CASES` overrides).
#[test]
fn mutated_ir_is_compiled_or_refused_never_a_bug() {
    let config = ProptestConfig {
        cases: eintup_testkit::cases(DEFAULT_CASES),
        source_file: Some(file!()),
        failure_persistence: Some(Box::new(FileFailurePersistence::WithSource("proptest-regressions"))),
        ..ProptestConfig::default()
    };
    let tally = std::sync::Mutex::new(std::collections::BTreeMap::<Reached, usize>::new());
    // The suite's run is reproducible (one fixed seed): the search for new
    // findings is `PROPTEST_CASES=N`, which draws fresh seeds.
    let mut runner = match std::env::var_os("PROPTEST_CASES") {
        Some(_) => TestRunner::new(config),
        None => TestRunner::new_with_rng(config, TestRng::deterministic_rng(RngAlgorithm::ChaCha)),
    };
    let result = runner.run(&(any::<usize>(), prop::collection::vec(edit(), 1..4)), |(which, edits)| {
        let base = &corpus()[which % corpus().len()];
        let text = mutate(base, &edits);
        let r = compile(&text).map_err(|e| TestCaseError::fail(format!("{e}\n--- input ---\n{text}")))?;
        *tally.lock().unwrap().entry(r).or_default() += 1;
        Ok(())
    });
    if let Err(e) = result {
        panic!("{e}");
    }
    let tally = tally.into_inner().unwrap();
    eprintln!("mutated IR: {tally:?}");
    // The mutations must reach the passes and code generation, not only
    // the parser's errors.
    assert!(tally.get(&Reached::Ptx).copied().unwrap_or(0) * 20 >= tally.values().sum::<usize>(), "{tally:?}");
}

#[test]
fn the_corpus_itself_compiles() {
    assert_eq!(corpus().len(), 17);
    for t in corpus() {
        assert_eq!(compile(t), Ok(Reached::Ptx), "{t}");
        // Unmutated, it reaches PTX.
        let unit = Unit::read(Source::from_string("c.etir", t)).unwrap();
        assert!(matches!(unit.ir, Ir::Et(_) | Ir::Loop(_)));
    }
}
