//! Executing a specialised program on a backend (`--backend
//! interp|cpu|gpu`): the one place `run` and `check` go through, so every
//! backend sees the same inputs (the interpreter's generator, or the
//! user's `.npy` files) and returns every array in module order.

use crate::cli::{Backend, FloatWidth};
use crate::driver::{Failure, Source};
use crate::interp::{self, RunOptions};
use crate::ir::et::Module;
use crate::ir::loops::{DType, LoopModule};
use crate::passes::{manager, Ir, Options, Unit, HOST_PASSES, MIDDLE_END};
use crate::sema::Program;
use crate::tensor::{ElemKind, Tensor};

/// Runs `module` on `backend`; returns every array, in module order.
pub fn execute(src: &Source, module: &Module, backend: Backend, opts: &RunOptions) -> Result<Vec<Tensor>, Failure> {
    match backend {
        Backend::Interp => interp::run(module, opts).map_err(|e| e.into_failure(src)),
        Backend::Cpu => {
            let lm = lower_host(src, module, opts.float)?;
            let mut bufs = initial_buffers(src, module, &lm, opts)?;
            crate::codegen::run_host(&lm, opts.seed, &mut bufs).map_err(|e| Failure::Internal(format!("host backend: {e}")))?;
            bufs.truncate(module.arrays.len());
            Ok(bufs)
        }
        Backend::Gpu => crate::gpu::execute(src, module, opts),
    }
}

/// The middle end on a specialised module: `lower-to-loops` and the loop
/// passes of the default pipeline (the loop module every target starts
/// from; the GPU takes it as it is).
pub fn lower(src: &Source, module: &Module, float: FloatWidth) -> Result<LoopModule, Failure> {
    run_passes(src, module, float, MIDDLE_END)
}

/// `lower`, then the host-only loop passes (`--backend cpu`).
pub fn lower_host(src: &Source, module: &Module, float: FloatWidth) -> Result<LoopModule, Failure> {
    let names: Vec<&str> = MIDDLE_END.iter().chain(HOST_PASSES).copied().collect();
    run_passes(src, module, float, &names)
}

fn run_passes(src: &Source, module: &Module, float: FloatWidth, names: &[&str]) -> Result<LoopModule, Failure> {
    run_from(src, Ir::Et(Program { module: module.clone(), constraints: Vec::new() }), float, names)
}

/// The kernels that make a program's `RANDOM` inputs on the device (what a
/// bundle's `generate` section runs), through the loop passes of the
/// middle end; with each input buffer's kernels, in order.
pub fn lower_generators(src: &Source, module: &Module, float: FloatWidth) -> Result<(LoopModule, Vec<(usize, Vec<String>)>), Failure> {
    let (lm, writers) = crate::passes::lower_to_loops::lower_inputs(module, float)
        .map_err(|e| e.into_failure(src))?;
    let loop_passes: Vec<&str> = MIDDLE_END.iter().copied().filter(|&p| p != "lower-to-loops").collect();
    Ok((run_from(src, Ir::Loop(lm), float, &loop_passes)?, writers))
}

fn run_from(src: &Source, ir: Ir, float: FloatWidth, names: &[&str]) -> Result<LoopModule, Failure> {
    let mut unit = Unit::from_source(src.clone());
    unit.ir = ir;
    let pm = manager::PassManager::from_names(names, manager::Instrument::default())?;
    let opts = Options { binds: Vec::new(), seed: 0, float };
    pm.run(&mut unit, &opts, &mut std::io::sink())?;
    match unit.ir {
        Ir::Loop(m) => Ok(m),
        _ => Err(Failure::Internal("the middle end did not reach the loop level".into())),
    }
}

/// Buffers as compiled code starts: the arrays' initial contents (inputs
/// generated or supplied, the rest zero), then zeroed temporaries.
pub fn initial_buffers(src: &Source, module: &Module, lm: &LoopModule, opts: &RunOptions) -> Result<Vec<Tensor>, Failure> {
    let mut bufs = interp::initial_arrays(module, opts).map_err(|e| e.into_failure(src))?;
    for b in &lm.buffers[bufs.len().min(lm.buffers.len())..] {
        let shape: Vec<usize> = b.shape.iter().map(|&d| d.max(0) as usize).collect();
        let t = Tensor::zeros(elem_kind(b.dtype), &shape)
            .ok_or_else(|| Failure::Internal(format!("temporary buffer `{}` is too large", b.name)))?;
        bufs.push(t);
    }
    Ok(bufs)
}

pub fn elem_kind(d: DType) -> ElemKind {
    match d {
        DType::I32 => ElemKind::Int,
        DType::F64 => ElemKind::F64,
        DType::F32 => ElemKind::F32,
    }
}
