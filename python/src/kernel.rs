//! `eintup.Kernel`'s Rust half: a program compiled once per set of input
//! names, dtypes and shapes (kept in memory, and on disk through
//! `cache`), and called on the caller's arrays.
//!
//! - `cpu`: the host JIT's [`HostProgram`] runs on the caller's memory
//!   where it fits (`arrays::View::fits`): inputs read in place, results
//!   written into `out=` arrays or new NumPy arrays; an array that does
//!   not fit is copied once, and counted (`last_copies`).
//! - `emu`: the bundle loaded on the PTX emulator as a runtime [`Program`]
//!   (decoded and allocated once); arrays cross by copy, as to a device.
//! - `cuda`: the bundle built for the arrays' device's compute capability
//!   and loaded there (`cuda::CudaProgram`), run on the caller's CUDA
//!   arrays in place, on the caller's stream.
//! - `interp`: the specialised module, run by the reference interpreter.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, OnceLock};

use crate::lock;

use eintup::driver::{Failure, Source};
use eintup::interp::RunOptions;
use eintup::ir::et::Module;
use eintup::ir::loops::{FloatWidth, FpContract, LoopModule};
use eintup::pipeline::{self, GpuOptions};
use eintup::sema::InputShape;
use eintup::tensor::{DType, Data, Tensor};
use eintup_codegen::bundle::BuildOptions;
use eintup_codegen::{BufferRef, HostProgram};
use eintup_runtime::{Device, Program};
use pyo3::prelude::*;
use pyo3::types::PyDict;

use crate::arrays::{dtype_name, result_views, ResultSpec, View};
use crate::cuda::{self, Arg, CudaProgram};
use crate::devices::emulator;
use crate::errors::{failure, guarded, Error};
use eintup_codegen::disk_cache::DiskCache;

/// Where a kernel runs.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Target {
    Cpu,
    Emu,
    Cuda,
    Interp,
}

impl Target {
    pub fn parse(s: &str) -> PyResult<Target> {
        match s {
            "cpu" => Ok(Target::Cpu),
            "emu" => Ok(Target::Emu),
            "interp" => Ok(Target::Interp),
            "cuda" | "gpu" => Ok(Target::Cuda),
            _ => Err(Error::new_err(format!("unknown target `{s}` (expected cpu, cuda, emu or interp)"))),
        }
    }

    pub fn name(self) -> &'static str {
        match self {
            Target::Cpu => "cpu",
            Target::Emu => "emu",
            Target::Cuda => "cuda",
            Target::Interp => "interp",
        }
    }
}

/// How a kernel's GPU bundles are built (`compile`'s `dynamic=` and
/// `deterministic=`).
#[derive(Clone, Copy, Debug, Default)]
pub struct GpuBuild {
    pub dynamic: bool,
    pub deterministic: bool,
}

/// What one call's arrays look like, sorted by name: the cache key.
type Key = Vec<(String, &'static str, Vec<usize>)>;

/// A program compiled for one set of input shapes.
struct Compiled {
    module: Module,
    /// `module` was read from the disk cache: its spans point into the
    /// printed IR, so errors are located again from the source.
    from_disk: bool,
    code: Code,
    /// Inputs the program draws itself (for callers that leave them out),
    /// drawn once.
    generated: OnceLock<Vec<Tensor>>,
    /// The host program's own buffers (temporaries), zeroed before each
    /// run; `u64`s, so every element is aligned. A call that finds them in
    /// use by another thread's call makes its own.
    scratch: Mutex<Vec<Scratch>>,
}

/// One buffer of [`Compiled::scratch`]: its memory, and whether it must
/// be zeroed again before a run (not where the program writes it whole
/// before reading it: `LoopModule::initial_contents_unread`).
struct Scratch {
    words: Vec<u64>,
    clear: bool,
}

enum Code {
    Host { prog: HostProgram },
    // Boxed: an emulator program is four times the other variants.
    Emu { program: Box<Mutex<Program<'static>>> },
    Cuda { program: Arc<CudaProgram> },
    Interp,
}

/// The printed `et` module and loop module of a cache entry.
const MODULE_FILE: &str = "module.et";
const LOOPS_FILE: &str = "loops.etl";
const BUNDLE_DIR: &str = "bundle";
/// `cpu`: the program as a shared library.
const LIBRARY_FILE: &str = eintup_codegen::host_cache::LIBRARY_FILE;

/// A compiled `.et` program, callable on arrays (`eintup.Kernel` wraps it),
/// from any thread: its caches are behind locks taken briefly, calls run
/// without the GIL, and a compiled entry used by two calls at once gives
/// the second its own scratch buffers (`emu`: calls of one entry take
/// turns on its program, waiting without the GIL).
#[pyclass]
pub struct Kernel {
    pub src: Source,
    /// The program's module before specialisation: what a call's array
    /// names are checked against before any array is read.
    pub front: Module,
    pub target: Target,
    pub float: FloatWidth,
    pub fp_contract: FpContract,
    pub binds: Vec<String>,
    pub seed: u64,
    /// The on-disk cache, unless disabled, and the build identity that
    /// keys its entries with the compiler version.
    pub disk: Option<(DiskCache, String)>,
    /// By CUDA device ordinal (0 off `cuda`) and key.
    cache: Mutex<BTreeMap<(usize, Key), Arc<Compiled>>>,
    /// (hits, misses) of `cache`, and of the disk cache.
    counts: Mutex<(u64, u64)>,
    disk_counts: Mutex<(u64, u64)>,
    /// Arrays the last call copied.
    copies: AtomicU64,
    /// `emu`/`cuda` with `dynamic=True`: one dynamic bundle per rank
    /// combination (and GPU), bound to each new set of shapes instead of
    /// compiled again (docs/dynamic-shapes.md).
    pub dynamic: bool,
    /// `deterministic=True`: GPU bundles without float atomics
    /// (`parallelize{deterministic}`, docs/passes.md).
    pub deterministic: bool,
    /// By (compute capability, every eintup's rank).
    /// Each with its loop module, which counts a call's work at its dims.
    dynamic_bundles: Mutex<BTreeMap<(u32, Vec<usize>), Arc<(eintup_runtime::Bundle, LoopModule)>>>,
}

impl Kernel {
    #[allow(clippy::too_many_arguments)]
    pub fn new(
        src: Source,
        front: Module,
        target: Target,
        float: FloatWidth,
        fp_contract: FpContract,
        binds: Vec<String>,
        seed: u64,
        disk: Option<(DiskCache, String)>,
        gpu: GpuBuild,
    ) -> Kernel {
        Kernel {
            src,
            front,
            target,
            float,
            fp_contract,
            binds,
            seed,
            disk,
            cache: Mutex::default(),
            counts: Mutex::default(),
            disk_counts: Mutex::default(),
            copies: AtomicU64::new(0),
            dynamic: gpu.dynamic,
            deterministic: gpu.deterministic,
            dynamic_bundles: Mutex::default(),
        }
    }

    /// The GPU bundle of `module` (specialised to `config`) for `sm`: built
    /// for these dims, or with `dynamic`, the rank combination's dynamic
    /// bundle (built once) bound to them.
    fn gpu_bundle(&self, module: &Module, config: &eintup::sema::Config, sm: u32) -> Result<eintup_runtime::Bundle, Failure> {
        let opts = BuildOptions { seed: self.seed, float: self.float, sm, fp_contract: self.fp_contract };
        let gpu = GpuOptions { deterministic: self.deterministic, ..GpuOptions::new(self.float, self.fp_contract, sm) };
        if !self.dynamic {
            let (planned, _) = pipeline::planned(&self.src, module, self.float, self.fp_contract)?;
            let lm = pipeline::lower_gpu(&self.src, &planned, &gpu)?;
            pipeline::check_loop_work(&self.src, &planned, &lm, eintup::driver::DEFAULT_MAX_WORK)?;
            return eintup_codegen::bundle::build(&self.src, module, &lm, config, &opts);
        }
        let ranks: Vec<usize> = config.dims.iter().map(|(_, d)| d.len()).collect();
        let key = (sm, ranks);
        let cached = lock(&self.dynamic_bundles).get(&key).cloned();
        let b = match cached {
            Some(b) => b,
            None => {
                let rank_args: Vec<(String, usize)> = config.dims.iter().map(|(n, d)| (n.clone(), d.len())).collect();
                let (prog, sym) = pipeline::symbolic_for(&self.src, &self.binds, &rank_args)?;
                let lowered = eintup::variants::lower_gpu_dynamic(&self.src, &prog, &gpu)?;
                let b = Arc::new((eintup_codegen::bundle::build_dynamic(&self.src, &prog, &sym, &lowered, &opts)?, lowered.module));
                lock(&self.dynamic_bundles).insert(key, b.clone());
                b
            }
        };
        let (b, dyn_lm) = (&b.0, &b.1);
        // Every eintup's dims as the caller's `--bind`s: the inputs'
        // shapes agree with them (they were derived from them), and inputs
        // left out get theirs.
        let m = b.manifest();
        let given: Vec<(String, Vec<i64>)> =
            config.dims.iter().filter(|(n, _)| m.dynamic.as_ref().is_some_and(|d| d.eintups.contains_key(n))).cloned().collect();
        let shapes = module
            .arrays
            .iter()
            .enumerate()
            .filter(|(_, a)| a.is_input)
            .map(|(i, a)| (a.name.clone(), module.array_shape(i).unwrap_or_default().iter().map(|&d| d.max(0) as usize).collect()))
            .collect();
        let given = m.given_dims(&given).map_err(eintup_codegen::gpu::runtime_failure)?;
        let (bound, dims) = b.bind_given(&shapes, &given).map_err(eintup_codegen::gpu::runtime_failure)?;
        // The work limit, counted on the dynamic loop module at these dims
        // (no lowering per shape: that is what `dynamic` saves).
        let values: Vec<i64> = dyn_lm.dims.iter().map(|d| dims.get(&d.name).copied().unwrap_or(0)).collect();
        let at = dyn_lm.bind_dims(&values).map_err(|e| Failure::Internal(format!("binding the dynamic loop module: {e}")))?;
        pipeline::check_loop_work(&self.src, module, &at, eintup::driver::DEFAULT_MAX_WORK)?;
        Ok(bound)
    }

    fn shapes(key: &Key) -> Vec<InputShape> {
        key.iter().map(|(n, _, s)| InputShape { name: n.clone(), shape: s.iter().map(|&d| d as i64).collect() }).collect()
    }

    /// The specialised module of `key`, with its spans in the source.
    fn specialized(&self, key: &Key) -> Result<(Module, eintup::sema::Config), Failure> {
        pipeline::specialized_for(&self.src, &self.binds, &Self::shapes(key), self.seed, self.float)
    }

    /// `key`'s program compiled now. With `store` (the disk cache and the
    /// entry's key), a `cpu` program is compiled into its new entry
    /// (`host_cache::store_compiled`: objects once, linked and loaded);
    /// the other targets return the files for the caller to store.
    fn compile_for(
        &self,
        key: &Key,
        dev: Option<(usize, &'static Device)>,
        store: Option<(&DiskCache, &str)>,
    ) -> Result<(Compiled, Option<CacheFiles>), Failure> {
        let (module, config) = self.specialized(key)?;
        let (code, files) = match self.target {
            Target::Interp => (Code::Interp, None),
            Target::Cpu => {
                let (planned, _) = pipeline::planned(&self.src, &module, self.float, self.fp_contract)?;
                // Kept in memory and on disk, and called many times.
                let host = eintup_codegen::HostCpu::Native.host_target().map_err(|e| Failure::user(format!("error: {e}")))?.reused();
                let lm = pipeline::lower_host(&self.src, &planned, self.float, self.fp_contract, host)?;
                pipeline::check_loop_work(&self.src, &planned, &lm, eintup::driver::DEFAULT_MAX_WORK)?;
                let host = |e: eintup_codegen::CodegenError| e.into_failure("host backend");
                let prog = match store {
                    Some((cache, k)) => {
                        let loops = eintup::ir::loops::print::module(&lm);
                        let files = |dir: &Path| {
                            std::fs::write(dir.join(MODULE_FILE), eintup::ir::et::print::module(&module))?;
                            std::fs::write(dir.join(LOOPS_FILE), &loops)
                        };
                        // Without a linker, the entry holds the loop module
                        // alone (a hit then JIT-compiles it).
                        eintup_codegen::host_cache::store_compiled(cache, k, lm, self.seed, self.fp_contract, files, true).map_err(host)?.0
                    }
                    None => HostProgram::compile(lm, self.seed, self.fp_contract).map_err(host)?,
                };
                (Code::Host { prog }, None)
            }
            Target::Emu => {
                let b = self.gpu_bundle(&module, &config, eintup::ir::loops::target::DEFAULT_SM)?;
                let program = emulator().load(&b).map_err(eintup_codegen::gpu::runtime_failure)?;
                (Code::Emu { program: Box::new(Mutex::new(program)) }, Some(CacheFiles::Bundle(Box::new(b))))
            }
            Target::Cuda => {
                let (ordinal, dev) = dev.ok_or_else(|| Failure::Internal("a cuda kernel compiled without a device".into()))?;
                let b = self.gpu_bundle(&module, &config, eintup_codegen::gpu::device_sm(dev))?;
                let program = dev.load(&b).map_err(eintup_codegen::gpu::runtime_failure)?;
                (Code::Cuda { program: Arc::new(CudaProgram::new(program, ordinal, dev)) }, Some(CacheFiles::Bundle(Box::new(b))))
            }
        };
        Ok((Compiled::new(module, false, code), files))
    }

    /// The disk cache's key text of `key`: everything that selects the
    /// compiled code.
    fn disk_key(&self, build: &str, key: &Key, dev: Option<(usize, &'static Device)>) -> String {
        // A CUDA bundle is built for its device's compute capability.
        let sm = dev.map_or(String::new(), |(_, d)| format!(" sm_{}", eintup_codegen::gpu::device_sm(d)));
        format!(
            "eintup {} build {build}\ncpu {}\ntarget {}{sm}{}{}\nfloat {:?}\nfp_contract {}\nseed {}\nbinds {:?}\ninputs {key:?}\nsource\n{}",
            env!("CARGO_PKG_VERSION"),
            eintup_codegen::hostlib::native_cpu_id(),
            self.target.name(),
            if self.dynamic { " dynamic" } else { "" },
            if self.deterministic { " deterministic" } else { "" },
            self.float,
            self.fp_contract.name(),
            self.seed,
            self.binds,
            self.src.text
        )
    }

    /// The entry at `dir`, loaded: the front end, every pass and LLVM
    /// skipped (`cpu` loads the shared library, or JIT-compiles the loop
    /// module where none could be linked; `emu` loads the bundle).
    fn load_entry(&self, dir: &Path, dev: Option<(usize, &'static Device)>) -> Option<Compiled> {
        let text = std::fs::read_to_string(dir.join(MODULE_FILE)).ok()?;
        let module = eintup::ir::et::parse::parse_verified(&text).ok()?;
        let code = match self.target {
            Target::Cpu => {
                let lm = eintup::ir::loops::parse::parse_verified(&std::fs::read_to_string(dir.join(LOOPS_FILE)).ok()?).ok()?;
                let lib = dir.join(LIBRARY_FILE);
                let prog = if lib.exists() {
                    // SAFETY: the library this entry's process linked from
                    // this loop module's object (`find` checked both files
                    // against their checksums; the key names the build and
                    // the CPU).
                    unsafe { HostProgram::load_library(lm, &lib) }.ok()?
                } else {
                    HostProgram::compile(lm, self.seed, self.fp_contract).ok()?
                };
                Code::Host { prog }
            }
            Target::Emu => {
                let b = eintup_runtime::Bundle::open(dir.join(BUNDLE_DIR)).ok()?;
                Code::Emu { program: Box::new(Mutex::new(emulator().load(&b).ok()?)) }
            }
            Target::Cuda => {
                let (ordinal, d) = dev?;
                let b = eintup_runtime::Bundle::open(dir.join(BUNDLE_DIR)).ok()?;
                Code::Cuda { program: Arc::new(CudaProgram::new(d.load(&b).ok()?, ordinal, d)) }
            }
            Target::Interp => return None,
        };
        Some(Compiled::new(module, true, code))
    }

    /// `key`'s compiled program: from memory, from disk, or compiled now
    /// (and stored on disk, best effort).
    fn lookup(&self, key: &Key, dev: Option<(usize, &'static Device)>) -> Result<Arc<Compiled>, Failure> {
        let ckey = (dev.map_or(0, |(o, _)| o), key.clone());
        if let Some(c) = lock(&self.cache).get(&ckey).cloned() {
            lock(&self.counts).0 += 1;
            return Ok(c);
        }
        let disk = self.disk.as_ref().filter(|_| self.target != Target::Interp);
        let dkey = disk.map(|(_, build)| self.disk_key(build, key, dev));
        let found = disk.zip(dkey.as_ref()).and_then(|((cache, _), k)| cache.load(k, |dir| self.load_entry(dir, dev)));
        let c = match found {
            Some(c) => {
                lock(&self.disk_counts).0 += 1;
                c
            }
            None => {
                let store = disk.map(|(cache, _)| cache).zip(dkey.as_deref());
                let (c, files) = self.compile_for(key, dev, store)?;
                if store.is_some() {
                    lock(&self.disk_counts).1 += 1;
                }
                if let (Some((cache, k)), Some(files)) = (store, files) {
                    // Best effort: a failed write costs a later process a compile.
                    let _ = cache.store(k, |dir| files.write(dir, &c.module));
                }
                c
            }
        };
        // Two threads may have compiled the same entry at once: the first
        // one stored is kept, so every call shares it.
        let mut cache = lock(&self.cache);
        let c = cache.entry(ckey).or_insert_with(|| Arc::new(c)).clone();
        lock(&self.counts).1 += 1;
        Ok(c)
    }

    /// `err` located in the source: a module read from disk has no source
    /// spans, so the check that failed runs again on the module the front
    /// end makes.
    fn located(&self, c: &Compiled, key: &Key, err: Failure, inputs: BTreeMap<String, Tensor>) -> Failure {
        if !c.from_disk || !matches!(err, Failure::User(_)) {
            return err;
        }
        match self.specialized(key) {
            Ok((m, _)) => match eintup::interp::initial_arrays(&m, &self.run_options(inputs)) {
                Err(e) => e.into_failure(&self.src),
                Ok(_) => err,
            },
            Err(e) => e,
        }
    }

    fn run_options(&self, inputs: BTreeMap<String, Tensor>) -> RunOptions {
        RunOptions { seed: self.seed, float: self.float, inputs, ..RunOptions::default() }
    }

    /// The inputs the program draws itself, drawn once per compiled entry.
    fn generated<'c>(&self, c: &'c Compiled) -> Result<&'c [Tensor], Failure> {
        if c.generated.get().is_none() {
            let all = eintup::interp::initial_arrays(&c.module, &self.run_options(BTreeMap::new())).map_err(|e| e.into_failure(&self.src))?;
            // Keep only the inputs: the rest are zeros nobody reads.
            let inputs = all.into_iter().zip(&c.module.arrays).map(|(t, a)| if a.is_input { t } else { Tensor::zeros(t.dtype(), &[0]).unwrap_or(t) }).collect();
            let _ = c.generated.set(inputs);
        }
        Ok(c.generated.get().map(Vec::as_slice).unwrap_or(&[]))
    }

    /// Every array of the program, in module order, after one run on
    /// tensors (`emu`, `interp`).
    fn execute(&self, c: &Compiled, inputs: BTreeMap<String, Tensor>) -> Result<Vec<Tensor>, Failure> {
        let opts = self.run_options(inputs);
        let m = &c.module;
        match &c.code {
            Code::Interp => eintup::interp::run(m, &opts).map_err(|e| e.into_failure(&self.src)),
            Code::Host { .. } => Err(Failure::Internal("host programs run on buffers (run_host)".into())),
            Code::Cuda { .. } => Err(Failure::Internal("CUDA programs run on device arrays (call_cuda)".into())),
            Code::Emu { program } => {
                // The inputs as every backend sees them (supplied, or drawn
                // by the interpreter's generator, as `run --backend emu`).
                let init = eintup::interp::initial_arrays(m, &opts).map_err(|e| e.into_failure(&self.src))?;
                let mut p = lock(program);
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

    /// Runs the host program on the caller's memory (module docs). Returns
    /// the number of arrays copied.
    fn run_host(&self, py: Python<'_>, c: &Compiled, prog: &HostProgram, key: &Key, args: &[(String, View)], results: &[Result_<'_>]) -> PyResult<u64> {
        let lm = prog.module();
        let m = &c.module;
        let mut copies = 0;
        let needs_generated = m.arrays.iter().any(|a| a.is_input && !args.iter().any(|(n, _)| *n == a.name));
        let generated = if needs_generated { self.generated(c).map_err(failure)? } else { &[] };
        // Ranges of the inputs used in place: an `out=` array overlapping
        // one would be written while read (the code assumes no aliasing).
        let mut inplace: Vec<(usize, usize)> = Vec::new();
        let mut bufs: Vec<Buf<'_>> = Vec::with_capacity(lm.buffers.len());
        for (i, b) in lm.buffers.iter().enumerate() {
            // The loop module's first buffers are the module's arrays, in order.
            let array = m.arrays.get(i);
            if array.is_some_and(|a| a.name != b.name) {
                return Err(Error::new_err(format!("internal error (please report): buffer {i} is `{}`, array {i} is `{}`", b.name, m.arrays[i].name)));
            }
            let buf = match array {
                Some(a) if a.is_input => match args.iter().find(|(n, _)| *n == a.name) {
                    Some((_, v)) if v.dtype == b.dtype && v.fits() => {
                        inplace.push(v.range());
                        Buf::In(v)
                    }
                    Some((name, v)) => {
                        copies += 1;
                        let t = v.to_tensor(&format!("array `{name}`"))?;
                        if t.dtype() == b.dtype {
                            Buf::Owned(t)
                        } else if t.dtype().is_float() && b.dtype.is_float() {
                            // Another float width, converted as `run --input` does.
                            Buf::Owned(t.with_float_width(b.dtype == DType::F32))
                        } else {
                            let t_dtype = t.dtype();
                            let inputs = BTreeMap::from([(name.clone(), t)]);
                            // The interpreter's check says why, located.
                            let located = match eintup::interp::initial_arrays(m, &self.run_options(inputs.clone())) {
                                Err(e) => self.located(c, key, e.into_failure(&self.src), inputs),
                                Ok(_) => Failure::Internal(format!("array `{name}`: {} for a {} buffer", dtype_name(t_dtype), dtype_name(b.dtype))),
                            };
                            return Err(failure(located));
                        }
                    }
                    None => Buf::Generated(i),
                },
                Some(_) => match results.iter().find(|r| r.id == i) {
                    Some(r) => Buf::Result(r),
                    None => Buf::Scratch,
                },
                None => Buf::Scratch,
            };
            bufs.push(buf);
        }
        // An `out=` array is written in place if it fits and overlaps no
        // input used in place, else through a tensor and copied (counted).
        let overlaps = |inplace: &[(usize, usize)], (a, b): (usize, usize)| inplace.iter().any(|&(c, d)| a < d && c < b);
        let mut owned_out: Vec<(usize, Tensor)> = Vec::new();
        for (i, buf) in bufs.iter().enumerate() {
            if let Buf::Result(r) = buf {
                if !(r.view.dtype == lm.buffers[i].dtype && r.view.fits() && !overlaps(&inplace, r.view.range())) {
                    let t = Tensor::zeros(lm.buffers[i].dtype, &r.view.shape).ok_or_else(|| Error::new_err("a result is too large"))?;
                    owned_out.push((i, t));
                } else if r.caller_owned {
                    // SAFETY: a writable, C-contiguous export of exactly
                    // `bytes` bytes (`fits`, `View::get(.., true)`).
                    unsafe { std::ptr::write_bytes(r.view.ptr(), 0, r.view.bytes()) };
                }
                inplace.push(r.view.range());
            }
        }
        // The entry's scratch, or this call's own while another call of
        // the entry (on another thread) holds it.
        let mut shared = c.scratch.try_lock().ok();
        let mut own = Vec::new();
        let scratch: &mut Vec<Scratch> = match &mut shared {
            Some(g) => g,
            None => &mut own,
        };
        if scratch.is_empty() {
            let unread = lm.initial_contents_unread();
            *scratch = lm
                .buffers
                .iter()
                .zip(&bufs)
                .zip(unread)
                .map(|((b, x), unread)| match x {
                    Buf::Scratch => Scratch { words: vec![0u64; eintup_codegen::host::buffer_bytes(b).unwrap_or(0).div_ceil(8)], clear: !unread },
                    _ => Scratch { words: Vec::new(), clear: false },
                })
                .collect();
        } else {
            scratch.iter_mut().filter(|s| s.clear).for_each(|s| s.words.fill(0));
        }
        let mut refs: Vec<BufferRef<'_>> = Vec::with_capacity(bufs.len());
        let mut owned_iter = owned_out.iter_mut().peekable();
        for (i, ((buf, s), b)) in bufs.iter().zip(scratch.iter_mut()).zip(&lm.buffers).enumerate() {
            let r = match buf {
                // SAFETY: a live, C-contiguous, aligned export of `bytes`
                // bytes (`fits`), only read (`run_on` refuses a read-only
                // buffer the program writes).
                Buf::In(v) => unsafe { BufferRef::from_raw(v.ptr(), v.bytes(), false) },
                Buf::Owned(t) => tensor_ref(t),
                Buf::Generated(j) => tensor_ref(&generated[*j]),
                Buf::Result(r) => match owned_iter.peek() {
                    Some((j, _)) if *j == i => tensor_mut(&mut owned_iter.next().expect("peeked").1),
                    // SAFETY: a live, writable, C-contiguous, aligned export
                    // of `bytes` bytes, overlapping no other buffer (above).
                    _ => unsafe { BufferRef::from_raw(r.view.ptr(), r.view.bytes(), true) },
                },
                // SAFETY: `s` holds at least the buffer's bytes (sized above
                // from the same module) and is borrowed for the run.
                Buf::Scratch => unsafe { BufferRef::from_raw(s.words.as_mut_ptr() as *mut u8, eintup_codegen::host::buffer_bytes(b).unwrap_or(0), true) },
            };
            refs.push(r);
        }
        // The GIL is released while the kernel runs, as NumPy's own
        // operations do: other Python threads go on meanwhile.
        let run = crate::SameThread((prog, &mut refs));
        py.detach(move || {
            let run = run;
            let (prog, refs) = run.0;
            prog.run_on(refs)
        })
        .map_err(|e| Error::new_err(format!("host backend: {e}")))?;
        drop(refs);
        // A result that is an input: the input's values, copied.
        for r in results.iter().filter(|r| m.arrays[r.id].is_input) {
            let t = match &bufs[r.id] {
                Buf::In(v) => v.to_tensor("an input")?,
                Buf::Owned(t) => t.clone(),
                Buf::Generated(j) => generated[*j].clone(),
                _ => continue,
            };
            r.view.fill_from(t, &format!("out: `{}`", m.arrays[r.id].name))?;
            copies += 1;
        }
        for (i, t) in owned_out {
            if let Buf::Result(r) = &bufs[i] {
                r.view.fill_from(t, &format!("out: `{}`", lm.buffers[i].name))?;
                copies += 1;
            }
        }
        Ok(copies)
    }
}

impl Kernel {
    /// A `cuda` call (module `cuda`): the arrays are checked and taken
    /// first, then the device opened (the driver is needed from here), the
    /// program compiled for it (or found), bound and enqueued.
    fn call_cuda<'py>(
        &self,
        py: Python<'py>,
        arrays: &Bound<'py, PyDict>,
        out: Option<&Bound<'py, PyDict>>,
        stream: Option<&Bound<'py, PyAny>>,
    ) -> PyResult<Bound<'py, PyDict>> {
        let stream = cuda::stream_of(stream)?;
        let args = cuda::arguments(arrays, stream)?;
        let ordinal = cuda::ordinal_of(&args, out)?;
        let dev = cuda::device(ordinal)?;
        let mut key: Key = args
            .iter()
            .map(|(n, a)| match a {
                Arg::Cuda(i) => (n.clone(), dtype_name(i.dtype), i.shape.clone()),
                Arg::Host(v) => (n.clone(), dtype_name(v.dtype), v.shape.clone()),
            })
            .collect();
        key.sort();
        let c = self.lookup(&key, Some((ordinal, dev))).map_err(failure)?;
        let Code::Cuda { program } = &c.code else { return Err(Error::new_err("internal error (please report): a cuda kernel's entry is not a CUDA program")) };
        let specs: Vec<ResultSpec> = result_specs(&c.module, self.float)?.into_iter().map(|(_, s)| s).collect();
        let (dict, copies) = program.call(py, &self.src.name, args, &specs, out, stream)?;
        self.copies.store(copies, Ordering::Relaxed);
        Ok(dict)
    }
}

/// A result array of one call: the caller's `out=` array or a new one.
struct Result_<'v> {
    id: usize,
    view: &'v View,
    caller_owned: bool,
}

/// Where one buffer of a host run lives.
enum Buf<'a> {
    /// The caller's input, in place.
    In(&'a View),
    /// A copy of the caller's input (it did not fit).
    Owned(Tensor),
    /// Drawn by the program (the caller left it out).
    Generated(usize),
    /// A result array.
    Result(&'a Result_<'a>),
    /// The program's own temporary.
    Scratch,
}

fn tensor_ref(t: &Tensor) -> BufferRef<'_> {
    match &t.data {
        Data::I32(v) => BufferRef::of_read_only(v),
        Data::F32(v) => BufferRef::of_read_only(v),
        Data::F64(v) => BufferRef::of_read_only(v),
    }
}

fn tensor_mut(t: &mut Tensor) -> BufferRef<'_> {
    match &mut t.data {
        Data::I32(v) => BufferRef::of_slice(v),
        Data::F32(v) => BufferRef::of_slice(v),
        Data::F64(v) => BufferRef::of_slice(v),
    }
}

impl Compiled {
    fn new(module: Module, from_disk: bool, code: Code) -> Compiled {
        Compiled { module, from_disk, code, generated: OnceLock::new(), scratch: Mutex::default() }
    }
}

/// What a GPU cache entry holds besides the `et` module (a `cpu` entry is
/// written as it is compiled: `compile_for`).
enum CacheFiles {
    /// `emu`, `cuda`: the bundle.
    Bundle(Box<eintup_runtime::Bundle>),
}

impl CacheFiles {
    fn write(&self, dir: &Path, module: &Module) -> std::io::Result<()> {
        std::fs::write(dir.join(MODULE_FILE), eintup::ir::et::print::module(module))?;
        match self {
            CacheFiles::Bundle(b) => b.write(dir.join(BUNDLE_DIR)).map_err(|e| std::io::Error::other(e.to_string())),
        }
    }
}

/// The result arrays of `m` (name, dtype, shape), in module order.
fn result_specs(m: &Module, float: FloatWidth) -> PyResult<Vec<(usize, ResultSpec)>> {
    m.result_arrays()
        .into_iter()
        .map(|id| {
            let a = &m.arrays[id];
            let shape = eintup::interp::array_shape(m, id).map_err(|e| Error::new_err(format!("array `{}`: {e:?}", a.name)))?;
            Ok((id, ResultSpec { name: a.name.clone(), dtype: float.dtype_of(a.dtype), shape }))
        })
        .collect()
}

#[pymethods]
impl Kernel {
    /// Runs the program on `arrays` (`{name: array}`, objects with the
    /// buffer protocol) and returns its result arrays by name: the `out=`
    /// arrays given, new NumPy arrays for the rest.
    #[pyo3(signature = (arrays, out=None, stream=None))]
    fn call<'py>(
        &self,
        py: Python<'py>,
        arrays: &Bound<'py, PyDict>,
        out: Option<&Bound<'py, PyDict>>,
        stream: Option<&Bound<'py, PyAny>>,
    ) -> PyResult<Bound<'py, PyDict>> {
        guarded(|| {
            // Names first: a keyword that names no array (`seed=3`) is
            // E0401, whatever its value.
            for k in arrays.keys() {
                let name: String = k.extract()?;
                eintup::interp::input_array(&self.front, &name).map_err(|e| failure(e.into_failure(&self.src)))?;
            }
            if self.target == Target::Cuda {
                return self.call_cuda(py, arrays, out, stream);
            }
            if stream.is_some_and(|s| !s.is_none()) {
                return Err(Error::new_err(format!("stream: only `cuda` kernels run on a stream; this one's target is `{}`", self.target.name())));
            }
            let mut args = Vec::with_capacity(arrays.len());
            for (k, v) in arrays.iter() {
                let name: String = k.extract()?;
                let view = View::get(&v, &format!("array `{name}`"), false)?;
                args.push((name, view));
            }
            let mut key: Key = args.iter().map(|(n, v)| (n.clone(), dtype_name(v.dtype), v.shape.clone())).collect();
            key.sort();
            let c = self.lookup(&key, None).map_err(failure)?;
            let specs = result_specs(&c.module, self.float)?;
            let views = result_views(py, specs.iter().map(|(_, s)| s), out, &self.src.name)?;
            let results: Vec<(usize, Bound<'py, PyAny>, View, bool)> =
                specs.iter().zip(views).map(|((id, _), (obj, v, caller))| (*id, obj, v, caller)).collect();
            let copies = match &c.code {
                Code::Host { prog } => {
                    let rs: Vec<Result_<'_>> = results.iter().map(|(id, _, view, caller)| Result_ { id: *id, view, caller_owned: *caller }).collect();
                    self.run_host(py, &c, prog, &key, &args, &rs)?
                }
                _ => {
                    let mut inputs = BTreeMap::new();
                    for (name, v) in &args {
                        inputs.insert(name.clone(), v.to_tensor(&format!("array `{name}`"))?);
                    }
                    // The interpreter and the emulator run without the GIL too.
                    let run = crate::SameThread((self, &c, inputs.clone()));
                    let arrays = py
                        .detach(move || {
                            let run = run;
                            let (k, c, inputs) = run.0;
                            k.execute(c, inputs)
                        })
                        .map_err(|e| failure(self.located(&c, &key, e, inputs)))?;
                    for (id, _, view, _) in &results {
                        view.fill_from(arrays[*id].clone(), &format!("out: `{}`", c.module.arrays[*id].name))?;
                    }
                    (args.len() + results.len()) as u64
                }
            };
            self.copies.store(copies, Ordering::Relaxed);
            let dict = PyDict::new(py);
            for (id, obj, _, _) in results {
                dict.set_item(&c.module.arrays[id].name, obj)?;
            }
            Ok(dict)
        })
    }

    /// Waits for the work this kernel enqueued on CUDA devices (a no-op on
    /// other targets, whose calls finish before they return).
    fn synchronize(&self, py: Python<'_>) -> PyResult<()> {
        let entries: Vec<Arc<Compiled>> = lock(&self.cache).values().cloned().collect();
        for c in entries {
            if let Code::Cuda { program } = &c.code {
                program.synchronize(py)?;
            }
        }
        Ok(())
    }

    /// `(hits, misses, entries)` of the in-memory compiled-code cache.
    fn cache_info(&self) -> (u64, u64, usize) {
        let (h, m) = *lock(&self.counts);
        (h, m, lock(&self.cache).len())
    }

    /// `(hits, misses)` of the on-disk cache (compilations this kernel
    /// found on disk, and those it compiled and stored).
    fn disk_cache_info(&self) -> (u64, u64) {
        *lock(&self.disk_counts)
    }

    /// Dynamic bundles built (`dynamic=True`): one per rank combination
    /// and GPU the calls needed.
    fn dynamic_builds(&self) -> usize {
        lock(&self.dynamic_bundles).len()
    }

    /// Arrays the last call copied: on `cpu`, inputs and `out=` arrays that
    /// did not fit (0 when all fit); on `cuda`, host arrays uploaded (0 when
    /// all are CUDA arrays); on `emu` and `interp`, every array.
    #[getter]
    fn last_copies(&self) -> u64 {
        self.copies.load(Ordering::Relaxed)
    }

    /// Where the kernel runs: `cpu`, `cuda`, `emu` or `interp`.
    #[getter]
    fn target(&self) -> &'static str {
        self.target.name()
    }

    /// The on-disk cache directory, or None when disabled.
    #[getter]
    fn cache_dir(&self) -> Option<PathBuf> {
        self.disk.as_ref().map(|(d, _)| d.dir().to_path_buf())
    }
}
