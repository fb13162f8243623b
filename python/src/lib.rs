//! `eintup._eintup`: the Rust half of the Python package `eintup` (issue
//! #29 item 3; docs/python.md). `python/eintup/__init__.py` is the API
//! users see; this module compiles a program once per input shapes and
//! keeps what it compiled:
//!
//! - `cpu`: the host JIT's [`HostProgram`], which owns its LLVM code;
//! - `emu`: a bundle loaded on the PTX emulator as a runtime [`Program`]
//!   (decoded and allocated once; the emulator is one process-wide device);
//! - `interp`: the specialised module, run by the reference interpreter.
//!
//! `load` runs an ahead-of-time bundle the same way, on the emulator.
//!
//! Arrays cross as `(dtype, shape, bytes)`: NumPy's buffer is read once
//! into the runtime's tensor, results come back as a `bytearray` NumPy
//! wraps without another copy. Every compiler failure is `eintup.Error`
//! (input shapes and dtypes: `eintup.ShapeError`) with the message the CLI
//! prints; a panic becomes `eintup.Error` too, never an abort.

use std::collections::BTreeMap;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::cell::{Cell, RefCell};
use std::rc::Rc;
use std::sync::OnceLock;

use eintup::driver::{Failure, Source};
use eintup::interp::RunOptions;
use eintup::ir::et::Module;
use eintup::ir::loops::{FloatWidth, FpContract};
use eintup::pipeline::{self, GpuOptions};
use eintup::sema::InputShape;
use eintup::tensor::{DType, Data, Tensor};
use eintup_codegen::bundle::BuildOptions;
use eintup_codegen::HostProgram;
use eintup_runtime::{Device, Program};
use pyo3::buffer::PyBuffer;
use pyo3::create_exception;
use pyo3::exceptions::PyException;
use pyo3::prelude::*;
use pyo3::types::PyByteArray;

create_exception!(_eintup, Error, PyException, "A user error: the message is the one the eintup CLI prints.");
create_exception!(_eintup, ShapeError, Error, "Arrays whose shapes or dtypes the program cannot take.");

/// Where a kernel runs.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Target {
    Cpu,
    Emu,
    Interp,
}

impl Target {
    fn parse(s: &str) -> PyResult<Target> {
        match s {
            "cpu" => Ok(Target::Cpu),
            "emu" => Ok(Target::Emu),
            "interp" => Ok(Target::Interp),
            "cuda" | "gpu" => Err(Error::new_err("target `cuda`: the package does not run on a GPU yet (issue #29); use `cpu` or `emu`")),
            _ => Err(Error::new_err(format!("unknown target `{s}` (expected cpu, emu or interp)"))),
        }
    }
}

/// What one call's arrays look like: the cache key.
type Key = Vec<(String, &'static str, Vec<usize>)>;

/// A program compiled for one set of input shapes.
struct Compiled {
    module: Module,
    code: Code,
}

enum Code {
    Host { prog: HostProgram },
    Emu { program: RefCell<Program<'static>> },
    Interp,
}

/// A compiled `.et` program, callable on arrays (`eintup.Kernel` wraps it).
/// Not `Send`: a loaded runtime program holds device handles; Python
/// calls it on the thread that made it (PyO3 checks), so plain cells hold
/// its cache.
#[pyclass(unsendable)]
struct Kernel {
    src: Source,
    target: Target,
    float: FloatWidth,
    fp_contract: FpContract,
    binds: Vec<String>,
    seed: u64,
    cache: RefCell<BTreeMap<Key, Rc<Compiled>>>,
    /// (hits, misses) of `cache`.
    counts: Cell<(u64, u64)>,
}

/// The emulator all `emu` kernels of the process run on.
fn emulator() -> &'static Device {
    static EMU: OnceLock<Device> = OnceLock::new();
    EMU.get_or_init(Device::emulator)
}

/// A compiler failure as the Python exception the CLI's exit code stands
/// for: shape and dtype problems of the inputs as `ShapeError`.
fn failure(f: Failure) -> PyErr {
    let text = f.to_string();
    let shape_codes = ["E0314", "E0315", "E0316", "E0317", "E0403"];
    match f {
        Failure::User(_) if shape_codes.iter().any(|c| text.contains(&format!("[{c}]"))) => ShapeError::new_err(text.trim_end().to_string()),
        _ => Error::new_err(text.trim_end().to_string()),
    }
}

/// Runs `body`, turning a panic into `eintup.Error` (nothing a caller
/// passes may abort the interpreter process).
fn guarded<T>(body: impl FnOnce() -> PyResult<T>) -> PyResult<T> {
    catch_unwind(AssertUnwindSafe(body)).unwrap_or_else(|p| {
        let msg = p.downcast_ref::<String>().cloned().or_else(|| p.downcast_ref::<&str>().map(|s| s.to_string())).unwrap_or_default();
        Err(Error::new_err(format!("internal error (please report): {msg}")))
    })
}

fn dtype(name: &str) -> PyResult<DType> {
    match name {
        "int32" => Ok(DType::I32),
        "float32" => Ok(DType::F32),
        "float64" => Ok(DType::F64),
        _ => Err(ShapeError::new_err(format!("arrays of dtype {name} are not supported (int32, float32, float64)"))),
    }
}

fn dtype_name(d: DType) -> &'static str {
    match d {
        DType::I32 => "int32",
        DType::F32 => "float32",
        DType::F64 => "float64",
    }
}

/// The bytes of `buf` (C-contiguous, checked by the caller) as a tensor.
fn tensor(py: Python<'_>, name: &str, dt: DType, shape: Vec<usize>, buf: &PyBuffer<u8>) -> PyResult<Tensor> {
    let bytes = buf.to_vec(py)?;
    let data = Data::from_ne_bytes(dt, &bytes).ok_or_else(|| ShapeError::new_err(format!("array `{name}`: {} bytes are not whole {} elements", bytes.len(), dtype_name(dt))))?;
    Tensor::new(shape, data).ok_or_else(|| ShapeError::new_err(format!("array `{name}`: its shape does not hold its elements")))
}

impl Kernel {
    fn compile_for(&self, inputs: &BTreeMap<String, Tensor>) -> Result<Compiled, Failure> {
        let shapes: Vec<InputShape> = inputs.iter().map(|(n, t)| InputShape { name: n.clone(), shape: t.shape.iter().map(|&d| d as i64).collect() }).collect();
        let (module, config) = pipeline::specialized_for(&self.src, &self.binds, &shapes, self.seed, self.float)?;
        let code = match self.target {
            Target::Interp => Code::Interp,
            Target::Cpu => {
                let lm = pipeline::lower_host(&self.src, &module, self.float, self.fp_contract)?;
                pipeline::check_loop_work(&self.src, &module, &lm, eintup::driver::DEFAULT_MAX_WORK)?;
                let prog = HostProgram::compile(lm, self.seed, self.fp_contract).map_err(|e| Failure::Internal(format!("host backend: {e}")))?;
                Code::Host { prog }
            }
            Target::Emu => {
                let sm = eintup::ir::loops::target::DEFAULT_SM;
                let lm = pipeline::lower_gpu(&self.src, &module, &GpuOptions::new(self.float, self.fp_contract, sm))?;
                pipeline::check_loop_work(&self.src, &module, &lm, eintup::driver::DEFAULT_MAX_WORK)?;
                let b = eintup_codegen::bundle::build(&self.src, &module, &lm, &config, &BuildOptions { seed: self.seed, float: self.float, sm, fp_contract: self.fp_contract })?;
                let program = emulator().load(&b).map_err(eintup_codegen::gpu::runtime_failure)?;
                Code::Emu { program: RefCell::new(program) }
            }
        };
        Ok(Compiled { module, code })
    }

    /// Every array of the program, in module order, after one run.
    fn execute(&self, c: &Compiled, inputs: BTreeMap<String, Tensor>) -> Result<Vec<Tensor>, Failure> {
        let opts = RunOptions { seed: self.seed, float: self.float, inputs, ..RunOptions::default() };
        let m = &c.module;
        match &c.code {
            Code::Interp => eintup::interp::run(m, &opts).map_err(|e| e.into_failure(&self.src)),
            Code::Host { prog } => {
                let mut bufs = eintup_codegen::backend::initial_buffers(&self.src, m, prog.module(), &opts)?;
                prog.run(&mut bufs).map_err(|e| Failure::Internal(format!("host backend: {e}")))?;
                bufs.truncate(m.arrays.len());
                Ok(bufs)
            }
            Code::Emu { program } => {
                // The inputs as every backend sees them (supplied, or drawn
                // by the interpreter's generator, as `run --backend emu`).
                let init = eintup::interp::initial_arrays(m, &opts).map_err(|e| e.into_failure(&self.src))?;
                let mut p = program.try_borrow_mut().map_err(|_| Failure::Internal("the kernel is already running".into()))?;
                let run = |p: &mut Program<'static>| -> eintup_runtime::Result<Vec<Tensor>> {
                    for (a, t) in m.arrays.iter().zip(&init).filter(|(a, _)| a.is_input) {
                        p.write(&a.name, t)?;
                    }
                    p.run()?;
                    m.arrays.iter().map(|a| p.read(&a.name)).collect()
                };
                run(&mut p).map_err(eintup_codegen::gpu::runtime_failure)
            }
        }
    }

    fn lookup(&self, key: &Key, inputs: &BTreeMap<String, Tensor>) -> Result<Rc<Compiled>, Failure> {
        let (hits, misses) = self.counts.get();
        if let Some(c) = self.cache.borrow().get(key).cloned() {
            self.counts.set((hits + 1, misses));
            return Ok(c);
        }
        let c = Rc::new(self.compile_for(inputs)?);
        self.counts.set((hits, misses + 1));
        self.cache.borrow_mut().insert(key.clone(), c.clone());
        Ok(c)
    }
}

#[pymethods]
impl Kernel {
    /// Runs the program on `arrays` (`[(name, dtype, shape, buffer)]`, each
    /// buffer C-contiguous) and returns the program's result arrays as
    /// `[(name, dtype, shape, bytearray)]`.
    fn run(&self, py: Python<'_>, arrays: Vec<(String, String, Vec<usize>, PyBuffer<u8>)>) -> PyResult<Vec<(String, &'static str, Vec<usize>, Py<PyByteArray>)>> {
        guarded(|| {
            let mut inputs = BTreeMap::new();
            let mut key = Key::new();
            for (name, dt, shape, buf) in &arrays {
                if !buf.is_c_contiguous() {
                    return Err(ShapeError::new_err(format!("array `{name}` is not C-contiguous")));
                }
                let dt = dtype(dt)?;
                key.push((name.clone(), dtype_name(dt), shape.clone()));
                inputs.insert(name.clone(), tensor(py, name, dt, shape.clone(), buf)?);
            }
            key.sort();
            let c = self.lookup(&key, &inputs).map_err(failure)?;
            let arrays = self.execute(&c, inputs).map_err(failure)?;
            let mut result = Vec::new();
            for id in c.module.result_arrays() {
                let (a, t) = (&c.module.arrays[id], &arrays[id]);
                let bytes = PyByteArray::new(py, &t.data.to_ne_bytes()).unbind();
                result.push((a.name.clone(), dtype_name(t.dtype()), t.shape.clone(), bytes));
            }
            Ok(result)
        })
    }

    /// `(hits, misses, entries)` of the compiled-code cache.
    fn cache_info(&self) -> (u64, u64, usize) {
        let (h, m) = self.counts.get();
        (h, m, self.cache.borrow().len())
    }

    /// Where the kernel runs: `cpu`, `emu` or `interp`.
    #[getter]
    fn target(&self) -> &'static str {
        match self.target {
            Target::Cpu => "cpu",
            Target::Emu => "emu",
            Target::Interp => "interp",
        }
    }
}

/// An ahead-of-time bundle (`eintup build`) loaded on the emulator once:
/// called with its input buffers, it returns its output buffers.
#[pyclass(unsendable)]
struct Bundle {
    path: String,
    program: Program<'static>,
    /// Inputs the last call wrote: a call that leaves one out gets the
    /// bundle's generated values again, not the last call's array.
    written: Vec<String>,
}

/// A runtime error as a Python exception: a bad input as `ShapeError`.
fn runtime_error(path: &str, e: eintup_runtime::Error) -> PyErr {
    match e {
        eintup_runtime::Error::Input { .. } => ShapeError::new_err(format!("{path}: {e}")),
        e => Error::new_err(format!("{path}: {e}")),
    }
}

#[pymethods]
impl Bundle {
    /// Writes `arrays` (as `Kernel.run` takes them) into the bundle's input
    /// buffers, runs it (inputs never written are generated by the bundle,
    /// once) and returns its output buffers.
    fn run(&mut self, py: Python<'_>, arrays: Vec<(String, String, Vec<usize>, PyBuffer<u8>)>) -> PyResult<Vec<(String, &'static str, Vec<usize>, Py<PyByteArray>)>> {
        guarded(|| {
            let m = self.program.manifest();
            if let Some(b) = m.inputs().find(|b| m.generator(&b.name).is_none() && !arrays.iter().any(|a| a.0 == b.name)) {
                return Err(ShapeError::new_err(format!("{}: input `{}` is not given (expected {} of shape {:?}) and the bundle cannot generate it", self.path, b.name, dtype_name(b.dtype), b.shape)));
            }
            for (name, dt, shape, buf) in &arrays {
                let t = tensor(py, name, dtype(dt)?, shape.clone(), buf)?;
                self.program.write(name, &t).map_err(|e| runtime_error(&self.path, e))?;
            }
            for name in std::mem::take(&mut self.written) {
                if !arrays.iter().any(|a| a.0 == name) && self.program.manifest().generator(&name).is_some() {
                    self.program.generate(&name).map_err(|e| runtime_error(&self.path, e))?;
                }
            }
            self.written = arrays.iter().map(|a| a.0.clone()).collect();
            self.program.run().map_err(|e| runtime_error(&self.path, e))?;
            let outputs: Vec<String> = self.program.manifest().buffers.iter().filter(|b| b.role == eintup_runtime::manifest::Role::Output).map(|b| b.name.clone()).collect();
            let mut result = Vec::new();
            for name in outputs {
                let t = self.program.read(&name).map_err(|e| runtime_error(&self.path, e))?;
                result.push((name, dtype_name(t.dtype()), t.shape.clone(), PyByteArray::new(py, &t.data.to_ne_bytes()).unbind()));
            }
            Ok(result)
        })
    }

    /// The input buffers: `[(name, dtype, shape, generated)]`.
    fn inputs(&self) -> Vec<(String, &'static str, Vec<usize>, bool)> {
        let m = self.program.manifest();
        m.inputs().map(|b| (b.name.clone(), dtype_name(b.dtype), b.shape.clone(), m.generator(&b.name).is_some())).collect()
    }
}

/// Opens bundle directory `path` and loads it on `device` (`emu`).
#[pyfunction]
fn load(path: String, device: &str) -> PyResult<Bundle> {
    guarded(|| {
        if device != "emu" {
            return Err(Error::new_err(format!("device `{device}`: the package runs bundles on the emulator (`emu`) for now (issue #29)")));
        }
        let b = eintup_runtime::Bundle::open(&path).map_err(|e| Error::new_err(format!("{path}: {e}")))?;
        let program = emulator().load(&b).map_err(|e| runtime_error(&path, e))?;
        Ok(Bundle { path, program, written: Vec::new() })
    })
}

/// Parses and checks `text` (named `name` in messages) and returns a
/// kernel that compiles for each new set of input shapes.
#[pyfunction]
#[pyo3(signature = (text, name, target, float, binds, fp_contract, seed))]
fn compile(text: String, name: String, target: &str, float: &str, binds: Vec<String>, fp_contract: Option<&str>, seed: u64) -> PyResult<Kernel> {
    guarded(|| {
        let target = Target::parse(target)?;
        let float = match float {
            "f32" => FloatWidth::F32,
            "f64" => FloatWidth::F64,
            _ => return Err(Error::new_err(format!("float `{float}`: expected f32 or f64"))),
        };
        let fp_contract = match fp_contract {
            None => eintup_codegen::default_fp_contract(target == Target::Cpu || target == Target::Interp),
            Some(s) => s.parse().map_err(|e: String| Error::new_err(format!("fp_contract: {e}")))?,
        };
        if target == Target::Interp && fp_contract == FpContract::Fast {
            return Err(Error::new_err("fp_contract applies to compiled code; `interp` never fuses".to_string()));
        }
        let src = Source { path: std::path::PathBuf::from(&name), name, text };
        // Every error that needs no shapes, now rather than at the first call.
        pipeline::ranked(&src).map_err(failure)?;
        Ok(Kernel { src, target, float, fp_contract, binds, seed, cache: RefCell::new(BTreeMap::new()), counts: Cell::new((0, 0)) })
    })
}

#[pymodule]
fn _eintup(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_function(wrap_pyfunction!(compile, m)?)?;
    m.add_class::<Kernel>()?;
    m.add_function(wrap_pyfunction!(load, m)?)?;
    m.add_class::<Bundle>()?;
    m.add("Error", m.py().get_type::<Error>())?;
    m.add("ShapeError", m.py().get_type::<ShapeError>())?;
    Ok(())
}
