//! `specialize`: choose one configuration (`--bind`, then the shapes of
//! supplied inputs, then constraints and range inference, then draws,
//! deterministic in `--seed`) and substitute it: every eintup and array
//! position gets static dims (`sema::specialize`). With `dynamic` it fixes
//! the ranks alone (`--rank`, bindings, constraints, inference) and gives
//! unbound eintups symbolic dims (`sema::symbolic`), which the module
//! carries (`Module::symbolic`: printed, read back, lowered).

use super::spec::{self, PassOptions};
use super::{DriverOptions, Ir, PassError, Unit};
use crate::ir::loops::FloatWidth;
use crate::sema::config::{choose_config, parse_bindings, Space};
use crate::sema::specialize::{specialize, MemoryLimit};
use crate::sema::symbolic::symbolic_config;
use crate::sema::InputShape;

/// What `specialize` is told: the driver's `--bind`, `--input`, `--seed`
/// and `--float` (FLOAT arrays count against the memory limit at that
/// width), each but the inputs also a pass option.
#[derive(Clone, Debug)]
pub struct SpecializeOptions {
    pub binds: Vec<String>,
    pub inputs: Vec<InputShape>,
    pub seed: u64,
    pub float: FloatWidth,
    pub dynamic: bool,
    pub ranks: Vec<(String, usize)>,
}

impl PassOptions for SpecializeOptions {
    const KEYS: &'static [(&'static str, &'static str)] = &[spec::SEED, spec::BIND, spec::FLOAT, spec::DYNAMIC, spec::RANK];
    fn from_driver(d: &DriverOptions) -> Self {
        SpecializeOptions { binds: d.binds.clone(), inputs: d.inputs.clone(), seed: d.seed, float: d.float, dynamic: d.dynamic, ranks: d.ranks.clone() }
    }
    fn set(&mut self, key: &str, value: &str) -> Result<(), String> {
        match key {
            "seed" => self.seed = spec::parse_seed(value)?,
            "bind" => spec::add_binding(&mut self.binds, value)?,
            "float" => self.float = spec::parse_float(value)?,
            "dynamic" => self.dynamic = spec::parse_bool(value)?,
            "rank" => self.ranks.push(spec::parse_rank(value)?),
            _ => return Err(format!("option `{key}` is not declared")),
        }
        Ok(())
    }
}

pub fn run(unit: &mut Unit, opts: &SpecializeOptions) -> Result<Option<String>, PassError> {
    let Ir::Et(prog) = &mut unit.ir else { return Err(PassError::Internal("specialize runs on the et level".into())) };
    if prog.module.symbolic.is_some() {
        // A printed dynamic module read back: its ranks and dim symbols
        // are in the text.
        return match opts.binds.is_empty() && opts.ranks.is_empty() {
            true => Ok(Some("already dynamic".into())),
            false => Err(PassError::Message(
                "error: the module is already specialised with symbolic dims (its `symbols(..)` line); `specialize` cannot bind or re-rank them: run it on the program instead".into(),
            )),
        };
    }
    if prog.module.is_specialized() {
        // A printed specialised module read back: keep its configuration;
        // a --bind may only repeat it.
        let dims: Vec<(String, Vec<i64>)> = prog.module.eintups.iter().map(|e| (e.name.clone(), e.dims.clone().unwrap_or_default())).collect();
        for b in parse_bindings(&opts.binds).map_err(PassError::Message)? {
            if let Some((_, d)) = dims.iter().find(|(n, _)| *n == b.name) {
                if *d != b.dims {
                    return Err(PassError::Message(format!(
                        "error[E0303]: --bind {}={:?} contradicts the module, which is specialised to {:?}",
                        b.name, b.dims, d
                    )));
                }
            }
        }
        unit.config = Some(crate::sema::Config::fixed(dims));
        return Ok(Some("already specialised".into()));
    }
    let ranks = match &unit.ranks {
        Some(r) => r.clone(),
        None => crate::sema::ranks::infer(prog).map_err(PassError::User)?,
    };
    let binds = parse_bindings(&opts.binds).map_err(PassError::Message)?;
    if opts.dynamic {
        let space = Space::new(prog, &ranks, &binds, &[]).map_err(PassError::User)?;
        let sym = symbolic_config(prog, &space, &opts.ranks).map_err(PassError::User)?;
        fix_symbolic(&mut prog.module, &sym).map_err(|d| PassError::User(vec![d]))?;
        let stats = prog.module.eintups.iter().zip(&sym.ranks).map(|(e, r)| format!("{}:{r}", e.name)).collect::<Vec<_>>().join(" ");
        unit.ranks = Some(ranks);
        unit.symbolic = Some(sym);
        return Ok(Some(format!("dynamic, ranks {stats}")));
    }
    if !opts.ranks.is_empty() {
        return Err(PassError::Message("error: --rank fixes ranks of a dynamic build (with --dynamic); a static one is fixed by --bind".into()));
    }
    let cfg = choose_config(prog, &ranks, &binds, &opts.inputs, opts.seed).map_err(PassError::User)?;
    specialize(prog, &cfg, MemoryLimit::with_float_bytes(opts.float.bytes())).map_err(PassError::User)?;
    let stats = cfg.dims.iter().map(|(n, d)| format!("{n}={d:?}")).collect::<Vec<_>>().join(" ");
    unit.ranks = Some(ranks);
    unit.config = Some(cfg);
    Ok(Some(stats))
}

/// Writes a dynamic configuration into the module: every eintup's and
/// array position's rank, and the symbolic dims (`Module::symbolic`),
/// which is what `lower-to-loops` reads and the printer prints.
fn fix_symbolic(m: &mut crate::ir::et::Module, sym: &crate::sema::symbolic::SymbolicConfig) -> Result<(), et_grammar::Diagnostic> {
    let positions = (0..m.arrays.len()).map(|a| crate::sema::symbolic::array_positions(m, &sym.dims, a)).collect::<Result<Vec<_>, _>>()?;
    for (e, r) in m.eintups.iter_mut().zip(&sym.ranks) {
        e.rank = Some(*r);
    }
    for (arr, dims) in m.arrays.iter_mut().zip(positions) {
        for (p, d) in arr.positions.iter_mut().zip(dims) {
            p.rank = Some(d.len());
        }
    }
    m.symbolic = Some(sym.dims.clone());
    Ok(())
}
