//! `--backend cpu` (LLVM JIT of the optimised loop module) against the
//! reference interpreter on every example: default configurations with
//! several seeds, f64 and f32, and zero-sized / rank-0 eintups. INT must
//! match bit for bit; FLOAT within 1e-12 relative for f64 (summation order
//! may differ) and 1e-5 for f32.

use eintup::cli::{Backend, FloatWidth};
use eintup::driver::Source;
use eintup::interp::{self, RunOptions};
use eintup::tensor::{Data, Tensor};

fn examples() -> Vec<std::path::PathBuf> {
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../docs/examples");
    let mut v: Vec<_> = std::fs::read_dir(dir).unwrap().flatten().map(|e| e.path()).collect();
    v.sort();
    v
}

fn same(what: &str, want: &Tensor, got: &Tensor, tol: f64) {
    assert_eq!(want.shape, got.shape, "{what}: shape");
    let close = |x: f64, y: f64| x == y || (x - y).abs() <= tol * x.abs().max(y.abs()) || (x.is_nan() && y.is_nan());
    match (&want.data, &got.data) {
        (Data::Int(a), Data::Int(b)) => assert_eq!(a, b, "{what}: INT values"),
        (Data::F64(a), Data::F64(b)) => {
            for (i, (x, y)) in a.iter().zip(b).enumerate() {
                assert!(close(*x, *y), "{what}[{i}]: interpreter {x}, cpu {y}");
            }
        }
        (Data::F32(a), Data::F32(b)) => {
            for (i, (x, y)) in a.iter().zip(b).enumerate() {
                assert!(close(*x as f64, *y as f64), "{what}[{i}]: interpreter {x}, cpu {y}");
            }
        }
        _ => panic!("{what}: element kinds differ"),
    }
}

/// False when the bindings contradict the program's constraints.
fn check(path: &std::path::Path, binds: &[String], seed: u64, float: FloatWidth) -> bool {
    let src = Source::load(path).unwrap();
    let Ok((m, _)) = eintup::pipeline::specialized_module(&src, binds, seed) else { return false };
    let opts = RunOptions { seed, float, inputs: Default::default() };
    let want = interp::run(&m, &opts).unwrap();
    let got = eintup::exec::execute(&src, &m, Backend::Cpu, &opts).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    let tol = if float == FloatWidth::F32 { 1e-5 } else { 1e-12 };
    for (k, a) in m.arrays.iter().enumerate() {
        same(&format!("{} {binds:?} seed {seed} {float:?}: `{}`", path.display(), a.name), &want[k], &got[k], tol);
    }
    true
}

#[test]
fn cpu_backend_matches_the_interpreter_on_every_example() {
    for p in examples() {
        for seed in 0..3 {
            assert!(check(&p, &[], seed, FloatWidth::F64));
        }
        assert!(check(&p, &[], 5, FloatWidth::F32));
    }
}

#[test]
fn cpu_backend_handles_zero_sized_and_rank_0_eintups() {
    let mut tried = 0;
    for p in examples() {
        let src = Source::load(&p).unwrap();
        let prog = eintup::pipeline::resolved(&src).unwrap();
        for e in &prog.module.eintups {
            for b in [format!("{}=[0]", e.name), format!("{}=[]", e.name)] {
                tried += check(&p, &[b], 2, FloatWidth::F64) as usize;
            }
        }
    }
    assert!(tried >= 15, "only {tried} configurations were valid");
}
