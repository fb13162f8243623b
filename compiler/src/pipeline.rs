//! The front half of the compiler as functions other tools call:
//! parse -> resolve -> infer ranks -> choose a configuration -> specialise.
//! Each step is also a pass of the pass manager (`passes/`).

use crate::cli::FloatWidth;
use crate::driver::{Failure, Source};
use crate::ir::et::Module;
use crate::sema::config::Space;
use crate::sema::{self, Config, Program, RankSystem};

/// Parses and resolves a source file into a rank-polymorphic program.
pub fn resolved(src: &Source) -> Result<Program, Failure> {
    let file = et_grammar::parse_file(&src.text).map_err(|d| src.failure(d))?;
    sema::resolve::resolve(&file).map_err(|d| src.failure(d))
}

/// Resolves and infers ranks.
pub fn ranked(src: &Source) -> Result<(Program, RankSystem), Failure> {
    let prog = resolved(src)?;
    let ranks = sema::ranks::infer(&prog).map_err(|d| src.failure(d))?;
    Ok((prog, ranks))
}

/// Parses `--bind` arguments.
pub fn parse_bindings(binds: &[String]) -> Result<Vec<sema::Binding>, Failure> {
    binds.iter().map(|b| sema::parse_binding(b).map_err(|e| Failure::user(format!("error[E0301]: {e}")))).collect()
}

/// Chooses one configuration (bindings, then constraints, then defaults;
/// deterministic in `seed`).
pub fn choose_config(src: &Source, prog: &Program, ranks: &RankSystem, binds: &[String], seed: u64) -> Result<Config, Failure> {
    let binds = parse_bindings(binds)?;
    let space = Space::new(prog, ranks, &binds).map_err(|d| src.failure(d))?;
    let dims = space.choose(seed).map_err(|d| src.failure(d))?;
    Ok(space.config(&dims))
}

/// Parse, resolve, infer ranks, choose a configuration and specialise: the
/// module every backend and the interpreter start from.
/// FLOAT arrays count as f64 against the memory limit.
pub fn specialized_module(src: &Source, binds: &[String], seed: u64) -> Result<(Module, Config), Failure> {
    specialized_for(src, binds, seed, FloatWidth::F64)
}

/// [`specialized_module`] for a program that will run with FLOAT of width
/// `float` (which its arrays count with against the memory limit).
pub fn specialized_for(src: &Source, binds: &[String], seed: u64, float: FloatWidth) -> Result<(Module, Config), Failure> {
    let (mut prog, ranks) = ranked(src)?;
    let cfg = choose_config(src, &prog, &ranks, binds, seed)?;
    let limit = sema::specialize::MemoryLimit::with_float_bytes(float_bytes(float));
    sema::specialize::specialize(&mut prog, &cfg, limit).map_err(|d| src.failure(d))?;
    Ok((prog.module, cfg))
}

/// Bytes of one FLOAT element.
pub fn float_bytes(float: FloatWidth) -> u64 {
    match float {
        FloatWidth::F64 => 8,
        FloatWidth::F32 => 4,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn examples() -> Vec<std::path::PathBuf> {
        let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../docs/examples");
        let mut v: Vec<_> = std::fs::read_dir(dir).into_iter().flatten().flatten().map(|e| e.path()).collect();
        v.sort();
        v
    }

    #[test]
    fn every_example_specialises() {
        let ex = examples();
        assert!(ex.len() >= 10);
        for p in ex {
            let src = Source::load(&p).expect("example loads");
            for seed in 0..5 {
                let (m, cfg) = match specialized_module(&src, &[], seed) {
                    Ok(x) => x,
                    Err(e) => panic!("{}: {e}", p.display()),
                };
                assert!(m.is_specialized(), "{}", p.display());
                assert_eq!(cfg.dims.len(), m.eintups.len());
                for s in &m.stmts {
                    assert!(!s.vars.is_empty() || s.indices.is_empty());
                }
            }
        }
    }

    #[test]
    fn bindings_fix_dims_and_positions() {
        let src = Source::from_string("t.et", "x[a,b] = RANDOM(0, 10, FLOAT)\ny[a+b, FLAT(a,b)] = x[a,b]\n");
        let (m, cfg) = specialized_module(&src, &["a=[2,3]".into(), "b=[4,0]".into()], 1).unwrap();
        assert_eq!(cfg.get("a"), Some(&[2, 3][..]));
        // a+b -> d+e-1 per component, but component 1 of b is empty -> [2+4-1, 0].
        assert_eq!(m.array_shape(1), Some(vec![5, 0, 0]));
        assert_eq!(m.array_shape(0), Some(vec![2, 3, 4, 0]));
        assert!(m.arrays[0].is_input && !m.arrays[1].is_input);
        assert_eq!(m.arrays[1].dtype, crate::ir::et::DType::Float);
        let (m, _) = specialized_module(&src, &["a=[2,3]".into(), "b=[4,5]".into()], 1).unwrap();
        // [2+4-1, 3+5-1] then FLAT = 2*3*4*5
        assert_eq!(m.array_shape(1), Some(vec![5, 7, 120]));
        let (m, _) = specialized_module(&src, &["a=[]".into(), "b=[]".into()], 1).unwrap();
        assert_eq!(m.array_shape(0), Some(vec![]));
        // a+b of two rank-0 tuples is rank 0; FLAT of nothing has one value.
        assert_eq!(m.array_shape(1), Some(vec![1]));
    }
}
