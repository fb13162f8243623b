//! The host target: its side of the lowering (`HostLowering`), optimised
//! for the CPU the compiler runs on, JIT-compiled with MCJIT and run in
//! place on caller-owned tensors.
//!
//! Host ABI (docs/codegen.md): kernel `NAME` is `void @et.NAME(ptr %args,
//! i64 %begin, i64 %end)`; `args[i]` is the data pointer of buffer
//! `kernel_params(m, k)[i]`.

use super::lower::{lower_and_optimize, split_range, KernelLowering, TargetLowering};
use super::{kernel_params, CodegenError, FpContract};
use eintup::ir::loops::target::HostTarget;
use eintup::ir::loops::{BufId, CopyGroup, DType, Kernel, LoopKind, LoopModule, Node, WriteKind};
use eintup::tensor::{Data, Tensor};
use inkwell::attributes::{Attribute, AttributeLoc};
use inkwell::types::{ArrayType, BasicMetadataTypeEnum};
use inkwell::values::{BasicValueEnum, FunctionValue, IntValue, PointerValue};
use inkwell::AddressSpace;

use inkwell::context::Context;
use inkwell::module::Module;
use inkwell::targets::{CodeModel, FileType, InitializationConfig, RelocMode, Target, TargetMachine};
use inkwell::OptimizationLevel;

/// The host symbol of kernel `name`. The prefix contains a `.` so that no
/// kernel can take the name of a C library function the JIT resolves
/// (LLVM turns some loops into calls to `memset`/`memcpy`).
pub fn host_symbol(name: &str) -> String {
    format!("et.{name}")
}

/// The host's side of the lowering: every loop runs sequentially, in
/// order (the semantics of `parallel`, `reduce`, `thread` and `spread`
/// loops allow it), except that a splittable kernel's root loop runs only
/// over the `[begin, end)` slice of this call.
pub(crate) struct HostLowering;

impl TargetLowering for HostLowering {
    /// The body takes one pointer per buffer; `entry` wraps it in the host
    /// ABI and inlining keeps the no-alias facts.
    fn body_symbol(&self, k: &Kernel) -> String {
        format!("{}.body", host_symbol(&k.name))
    }

    fn buffer_address_space(&self) -> AddressSpace {
        AddressSpace::default()
    }

    /// begin, end: the slice of the root loop this call runs.
    fn extra_params<'ctx>(&self, ctx: &'ctx Context) -> Vec<BasicMetadataTypeEnum<'ctx>> {
        let i64: BasicMetadataTypeEnum = ctx.i64_type().into();
        vec![i64, i64]
    }

    fn declare_body<'ctx>(&self, ctx: &'ctx Context, m: &LoopModule, k: &Kernel, func: FunctionValue<'ctx>) {
        func.set_linkage(inkwell::module::Linkage::Internal);
        if super::lower::cheap_to_compile(m, k) {
            // The body is left as lowered (and called, not inlined): O3's
            // per-function pipeline is most of a long program's compile
            // time, and buys a few cycles over a few iterations.
            super::lower::skip_optimisation(ctx, func);
            return;
        }
        let inline = ctx.create_enum_attribute(Attribute::get_named_enum_kind_id("alwaysinline"), 0);
        func.add_attribute(AttributeLoc::Function, inline);
    }

    /// The host runs a block's threads in order, so one copy of a shared
    /// or a local buffer is enough.
    fn scratch<'ctx>(&self, kl: &KernelLowering<'_, 'ctx>, buf: BufId, ty: ArrayType<'ctx>) -> Result<PointerValue<'ctx>, CodegenError> {
        kl.alloca_scratch(buf, ty)
    }

    fn split_bounds<'ctx>(&self, k: &Kernel, func: FunctionValue<'ctx>, n_buffers: u32) -> Option<(IntValue<'ctx>, IntValue<'ctx>)> {
        split_range(k)?;
        let p = |i| func.get_nth_param(i).map(|p| p.into_int_value());
        p(n_buffers).zip(p(n_buffers + 1))
    }

    /// `i64` indices: 64-bit arithmetic costs the CPU nothing extra.
    fn narrow_index(&self, _m: &LoopModule, _k: &Kernel) -> bool {
        false
    }

    /// The host's split reductions: under `fast`, a sum into a cell may be
    /// reassociated, so that LLVM vectorises a reduction into lanes of
    /// partial sums (the GPU splits them at the loop level,
    /// `split-reductions`). Not in a register-tiled kernel: there the
    /// vectors run across the tile's cells, and LLVM would vectorise along
    /// the reduction instead (4x slower).
    fn reassoc_sums(&self, k: &Kernel, fp_contract: FpContract) -> bool {
        fp_contract == FpContract::Fast && !k.is_register_tiled()
    }

    fn kernel_body(&self, kl: &mut KernelLowering<'_, '_>) -> Result<(), CodegenError> {
        kl.nodes(&kl.k.body)
    }

    /// `void @et.NAME(ptr %args, i64 %begin, i64 %end)`: loads `args[i]`
    /// and calls the body with the slice of the root loop to run.
    fn entry(&self, kl: &KernelLowering<'_, '_>) -> Result<(), CodegenError> {
        let ptr = kl.ctx.ptr_type(AddressSpace::default());
        let fty = kl.ctx.void_type().fn_type(&[ptr.into(), kl.i64.into(), kl.i64.into()], false);
        let f = kl.module.add_function(&host_symbol(&kl.k.name), fty, None);
        if super::lower::cheap_to_compile(kl.m, kl.k) {
            // As its body (`declare_body`).
            super::lower::skip_optimisation(kl.ctx, f);
        }
        let b = &kl.b;
        b.position_at_end(kl.ctx.append_basic_block(f, "entry"));
        let param = |i| f.get_nth_param(i).ok_or_else(|| kl.bug("host entry parameter missing"));
        let args = param(0)?.into_pointer_value();
        let mut ptrs = Vec::new();
        for i in 0..kl.func.count_params() - 2 {
            let slot = unsafe { b.build_in_bounds_gep(ptr, args, &[kl.i64.const_int(u64::from(i), false)], "arg")? };
            ptrs.push(b.build_load(ptr, slot, "")?.into());
        }
        ptrs.push(param(1)?.into());
        ptrs.push(param(2)?.into());
        b.build_call(kl.func, &ptrs, "")?;
        b.build_return(None)?;
        Ok(())
    }

    /// A block's threads run one after another: nothing to wait for.
    fn sync(&self, _kl: &mut KernelLowering<'_, '_>) -> Result<(), CodegenError> {
        Ok(())
    }

    /// The host runs a kernel with atomic writes on one thread only
    /// (`split_range`), where a plain add is exact and far cheaper than an
    /// atomic read-modify-write (a compare-exchange loop for floats).
    fn write_kind(&self, kind: WriteKind) -> WriteKind {
        kind.non_atomic()
    }

    /// Asynchronous copies are made for the GPU only (`pipeline-copies`).
    fn copy_async<'ctx>(&self, kl: &mut KernelLowering<'_, 'ctx>, _dst: PointerValue<'ctx>, _src: PointerValue<'ctx>, _bytes: u32) -> Result<(), CodegenError> {
        Err(kl.err("`copy_async` is GPU-only (host code runs no `pipeline-copies`)"))
    }

    fn copy_group(&self, kl: &mut KernelLowering<'_, '_>, _g: CopyGroup) -> Result<(), CodegenError> {
        Err(kl.err("`commit_copies`/`wait_copies` are GPU-only (host code runs no `pipeline-copies`)"))
    }

    /// The host's atomic adds are plain ones (`write_kind`): none to merge.
    fn vector_atomic_lanes(&self, _dt: DType) -> i64 {
        1
    }

    fn vector_atomic_add<'ctx>(&self, kl: &mut KernelLowering<'_, 'ctx>, _p: PointerValue<'ctx>, _vals: &[BasicValueEnum<'ctx>]) -> Result<(), CodegenError> {
        Err(kl.bug("a vector atomic add on the host"))
    }

    /// The JIT makes its own target machine for a generic CPU (MCJIT has
    /// no CPU option in LLVM's C API); these attributes make it generate
    /// code for the vector units and FMA of this CPU, as O3 assumed when
    /// it vectorised.
    /// The JIT compiles a module at known dims.
    fn dims_as_params(&self) -> bool {
        false
    }

    /// `None`: a caller's host buffer is aligned to its element only.
    fn base_align(&self) -> Option<u64> {
        None
    }

    /// The host's register tiles: LLVM would otherwise prove by alias
    /// analysis of every unrolled cell that it may keep them in registers.
    fn register_sums(&self) -> bool {
        true
    }

    fn annotate<'ctx>(&self, ctx: &'ctx Context, module: &Module<'ctx>, _m: &LoopModule, tm: &TargetMachine) {
        let cpu = ctx.create_string_attribute("target-cpu", &tm.get_cpu().to_string());
        // A named CPU (HostCpu) has no feature string: its name implies them.
        let features = tm.get_feature_string().to_string_lossy().into_owned();
        let features = (!features.is_empty()).then(|| ctx.create_string_attribute("target-features", &features));
        for f in module.get_functions() {
            if f.count_basic_blocks() > 0 {
                f.add_attribute(AttributeLoc::Function, cpu);
                if let Some(features) = features {
                    f.add_attribute(AttributeLoc::Function, features);
                }
            }
        }
    }
}

/// The environment variable naming the CPU the JIT compiles for instead of
/// this machine's ([`HostCpu::resolve`]).
pub const HOST_CPU_ENV: &str = "EINTUP_HOST_CPU";

/// Which x86-64 CPU host code is generated for.
///
/// The JIT always runs `Native` code; a named CPU's code may use features
/// this machine lacks, so it is only ever printed (`emit_llvm`). Tests that
/// read vectorised IR compile for a named CPU: the host's model and
/// features (AVX2 or AVX-512, Intel or AMD) must not change what they see.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum HostCpu {
    /// The CPU the compiler runs on, with its features.
    #[default]
    Native,
    /// `x86-64`: the baseline (SSE2).
    X86_64,
    /// `x86-64-v2`: SSE4.2, POPCNT.
    X86_64V2,
    /// `x86-64-v3`: AVX2, FMA, BMI2.
    X86_64V3,
    /// `x86-64-v4`: AVX-512 (F, BW, CD, DQ, VL).
    X86_64V4,
}

impl HostCpu {
    /// Every CPU by its name (`--target-cpu`): the psABI's micro-architecture
    /// levels, which every x86-64 LLVM knows and which name no vendor.
    pub const ALL: [(&'static str, HostCpu); 5] = [
        ("native", HostCpu::Native),
        ("x86-64", HostCpu::X86_64),
        ("x86-64-v2", HostCpu::X86_64V2),
        ("x86-64-v3", HostCpu::X86_64V3),
        ("x86-64-v4", HostCpu::X86_64V4),
    ];

    /// The CPU called `name`, or an error that lists the names.
    pub fn parse(name: &str) -> Result<HostCpu, String> {
        Self::ALL.iter().find(|(n, _)| *n == name).map(|&(_, c)| c).ok_or_else(|| {
            let names: Vec<&str> = Self::ALL.iter().map(|(n, _)| *n).collect();
            format!("unknown host CPU `{name}` (expected one of: {})", names.join(", "))
        })
    }

    /// The CPU `Native` stands for: this machine's, or the named one
    /// `EINTUP_HOST_CPU` gives, so that a test run or a bug report
    /// reproduces another machine's host code (an AVX2 EPYC's on an
    /// AVX-512 Xeon). The JIT runs it, so a level whose features this CPU
    /// lacks is refused rather than left to fault.
    pub fn resolve(self) -> Result<HostCpu, String> {
        let named = match (self, std::env::var(HOST_CPU_ENV)) {
            (HostCpu::Native, Ok(name)) if !name.is_empty() => HostCpu::parse(&name).map_err(|e| format!("{HOST_CPU_ENV}: {e}"))?,
            _ => return Ok(self),
        };
        match named.missing_feature() {
            Some(f) => Err(format!("{HOST_CPU_ENV}={}: this CPU lacks `{f}`, which that level needs", std::env::var(HOST_CPU_ENV).unwrap_or_default())),
            None => Ok(named),
        }
    }

    /// The vector register file the host passes tile for
    /// ([`HostTarget`]): this CPU's (or `EINTUP_HOST_CPU`'s level, as
    /// [`HostCpu::resolve`]), or the named level's. AVX-512 counts only
    /// with VL, which gives 256-bit operations the upper 16 registers.
    pub fn host_target(self) -> Result<HostTarget, String> {
        Ok(match self.resolve()? {
            HostCpu::Native => {
                if std::is_x86_feature_detected!("avx512f") && std::is_x86_feature_detected!("avx512vl") {
                    HostTarget::AVX512
                } else if std::is_x86_feature_detected!("avx") {
                    HostTarget::AVX2
                } else {
                    HostTarget::SSE
                }
            }
            HostCpu::X86_64 | HostCpu::X86_64V2 => HostTarget::SSE,
            HostCpu::X86_64V3 => HostTarget::AVX2,
            HostCpu::X86_64V4 => HostTarget::AVX512,
        })
    }

    /// A feature of this level the running CPU lacks, if any.
    fn missing_feature(self) -> Option<&'static str> {
        let needs: &[(&str, bool)] = match self {
            HostCpu::Native | HostCpu::X86_64 => &[],
            HostCpu::X86_64V2 => &[("sse4.2", std::is_x86_feature_detected!("sse4.2")), ("popcnt", std::is_x86_feature_detected!("popcnt"))],
            HostCpu::X86_64V3 => &[
                ("avx2", std::is_x86_feature_detected!("avx2")),
                ("fma", std::is_x86_feature_detected!("fma")),
                ("bmi2", std::is_x86_feature_detected!("bmi2")),
            ],
            HostCpu::X86_64V4 => &[
                ("avx512f", std::is_x86_feature_detected!("avx512f")),
                ("avx512bw", std::is_x86_feature_detected!("avx512bw")),
                ("avx512dq", std::is_x86_feature_detected!("avx512dq")),
                ("avx512vl", std::is_x86_feature_detected!("avx512vl")),
            ],
        };
        needs.iter().find(|(_, has)| !has).map(|(f, _)| *f)
    }

    /// LLVM's CPU name and feature string for this CPU (`Native` as
    /// [`HostCpu::resolve`] resolves it; an unusable `EINTUP_HOST_CPU` is
    /// reported by [`host_machine`], which every compilation goes through).
    pub(crate) fn llvm_cpu(self) -> (String, String) {
        match self.resolve().unwrap_or(self) {
            HostCpu::Native => (TargetMachine::get_host_cpu_name().to_string(), TargetMachine::get_host_cpu_features().to_string()),
            // A named CPU brings its own features.
            named => (Self::ALL.iter().find(|(_, c)| *c == named).map_or("x86-64", |(n, _)| n).to_string(), String::new()),
        }
    }
}

/// A target machine for `cpu` (its name and features, so that O3
/// vectorises for its vector units).
pub(crate) fn host_machine(cpu: HostCpu) -> Result<TargetMachine, CodegenError> {
    Target::initialize_native(&InitializationConfig::default()).map_err(|e| CodegenError::Internal(format!("cannot initialise the host target: {e}")))?;
    let triple = TargetMachine::get_default_triple();
    let target = Target::from_triple(&triple).map_err(|e| CodegenError::Internal(format!("host target: {}", e.to_string())))?;
    let (cpu, features) = cpu.resolve().map_err(CodegenError::Environment)?.llvm_cpu();
    target
        .create_target_machine(&triple, &cpu, &features, OptimizationLevel::Aggressive, RelocMode::Default, CodeModel::JITDefault)
        .ok_or_else(|| CodegenError::Internal(format!("cannot create a target machine for {}", triple.as_str().to_string_lossy())))
}

/// The host module of the kernels `which` of `m` after `default<O3>`,
/// with the machine used.
pub(crate) fn optimized_module<'ctx>(
    ctx: &'ctx Context,
    m: &LoopModule,
    which: &[usize],
    seed: u64,
    fp_contract: FpContract,
    cpu: HostCpu,
) -> Result<(Module<'ctx>, TargetMachine), CodegenError> {
    let tm = host_machine(cpu)?;
    let module = lower_and_optimize(ctx, m, which, seed, &HostLowering, fp_contract, &tm)?;
    Ok((module, tm))
}

/// At most this many LLVM modules (and threads) compile one program.
pub const MAX_COMPILE_GROUPS: usize = 8;

/// The environment variable capping the threads a host program compiles
/// on (a positive integer; by default, this process's CPUs).
pub const COMPILE_THREADS_ENV: &str = "EINTUP_COMPILE_THREADS";

/// The threads a program compiles on: `EINTUP_COMPILE_THREADS`, else this
/// process's CPUs.
fn compile_threads() -> Result<usize, CodegenError> {
    match std::env::var(COMPILE_THREADS_ENV) {
        Ok(v) => v
            .trim()
            .parse::<usize>()
            .ok()
            .filter(|&n| n > 0)
            .ok_or_else(|| CodegenError::Environment(format!("{COMPILE_THREADS_ENV}={v}: expected a positive integer"))),
        Err(_) => Ok(std::thread::available_parallelism().map_or(1, |n| n.get())),
    }
}

/// The kernels of `m` split into at most `threads` groups (by index, each
/// in module order) of about equal compile cost ([`compile_cost`]; largest
/// first into the cheapest group), each compiled as its own LLVM module on
/// its own thread: LLVM's O3 and code generation are single-threaded and
/// take most of a small program's run (docs/codegen.md, "Compiling on
/// several threads"). One group where there is one kernel or one thread.
pub fn compile_groups(m: &LoopModule, threads: usize) -> Vec<Vec<usize>> {
    let n = threads.clamp(1, MAX_COMPILE_GROUPS).min(m.kernels.len()).max(1);
    let mut order: Vec<(u128, usize)> = m.kernels.iter().enumerate().map(|(i, k)| (compile_cost(k), i)).collect();
    order.sort_by(|a, b| b.cmp(a));
    let mut groups: Vec<(u128, Vec<usize>)> = vec![(0, Vec::new()); n];
    for (cost, i) in order {
        if let Some(g) = groups.iter_mut().min_by_key(|g| g.0) {
            g.0 += cost;
            g.1.push(i);
        }
    }
    let mut groups: Vec<Vec<usize>> = groups.into_iter().map(|g| g.1).filter(|g| !g.is_empty()).collect();
    for g in &mut groups {
        g.sort_unstable();
    }
    groups.sort();
    groups
}

/// A kernel's size as LLVM sees it: its loop nodes and computed values,
/// each counted once per copy an enclosing `unroll` loop makes.
pub fn compile_cost(k: &Kernel) -> u128 {
    fn cost(nodes: &[Node], copies: u128) -> u128 {
        nodes
            .iter()
            .map(|n| match n {
                Node::For(l) => {
                    let trip = if l.kind == LoopKind::Unroll { l.lo.as_const().zip(l.hi.as_const()).map_or(1, |(a, b)| (b - a).max(1) as u128) } else { 1 };
                    copies + cost(&l.body, copies.saturating_mul(trip))
                }
                Node::Compute(c) => copies.saturating_mul(c.values.len() as u128 + 1),
                Node::Guard(g) => copies + cost(&g.body, copies),
                _ => copies,
            })
            .fold(0u128, |a, b| a.saturating_add(b))
    }
    cost(&k.body, 1)
}

/// Runs every kernel of `m`, in order, on `buffers` (one tensor per
/// buffer, in module order, of the buffer's dtype and element count; the
/// caller fills inputs and zeroes the rest). The module must satisfy the
/// loop dialect's contract (every access in bounds where it runs), as the
/// verifier ensures: the generated code does not check bounds.
pub fn run_host(m: &LoopModule, seed: u64, buffers: &mut [Tensor]) -> Result<(), CodegenError> {
    with_compiled(m, seed, FpContract::Off, |prog| prog.run(buffers))?
}

/// Compiles `m` once and hands the JIT-compiled program to `f`, which may
/// run it any number of times (benchmarks time `HostProgram::run` alone).
/// Under `FpContract::Fast` a float multiply may fuse with the add of its
/// result (`vfmadd` where the CPU has FMA): fewer roundings, not the
/// interpreter's bits. [`HostProgram::compile`] gives a program to keep.
pub fn with_compiled<R>(m: &LoopModule, seed: u64, fp_contract: FpContract, f: impl FnOnce(&HostProgram) -> R) -> Result<R, CodegenError> {
    Ok(f(&HostProgram::compile(m.clone(), seed, fp_contract)?))
}

pub(crate) type KernelFn = unsafe extern "C" fn(*const *mut u8, i64, i64);

/// Below this many iterations a kernel runs on the calling thread: starting
/// threads costs tens of microseconds.
pub const MIN_SPLIT_ITERATIONS: u128 = 1 << 16;

struct HostKernel {
    /// The JIT entry: valid while the program's execution engine lives.
    f: KernelFn,
    /// The buffers it takes, in parameter order.
    params: Vec<usize>,
    /// Root-loop bounds when the kernel runs split across threads.
    split: Option<(i64, i64)>,
}

/// A module compiled for this CPU: one entry per kernel, with the buffers
/// it takes. It owns its code (a JIT, or a shared library loaded from the
/// on-disk cache: `hostlib`), so a caller may keep it and run it many
/// times (the Python package caches one per program and shapes).
pub struct HostProgram {
    m: LoopModule,
    kernels: Vec<HostKernel>,
    /// Threads a splittable kernel is spread over.
    threads: usize,
    /// Per buffer: whether some kernel writes it.
    written: Vec<bool>,
    /// The code the entries point to; dropped after nothing else uses it.
    _code: Code,
}

/// Where a program's machine code lives.
pub(crate) enum Code {
    /// One engine per group of kernels compiled together (`compile_groups`),
    /// only owned: the entries were looked up when they were compiled.
    Jit(#[allow(dead_code)] Vec<Jit>),
    Library(Library),
}

/// A shared library loaded with `dlopen` (local symbols, bound now;
/// `hostlib` loads it); closed on drop.
pub(crate) struct Library(pub(crate) *mut std::ffi::c_void);

impl Drop for Library {
    fn drop(&mut self) {
        // SAFETY: a handle from a successful dlopen, closed once, after
        // every entry into it is gone (the program owning it is dropped).
        unsafe { libc::dlclose(self.0) };
    }
}

/// One group's compiled code and its kernels' entries by symbol.
struct Part {
    jit: Jit,
    entries: Vec<(String, KernelFn)>,
}

/// A part made on a compile thread, handed to the thread that owns the
/// program.
struct SendPart(Part);
// SAFETY: the part's LLVM context, module and engine were made and used by
// the one thread that compiled them, which ends before the part moves;
// nothing else refers to them, and after the move they are only dropped
// (the entries are plain machine code).
unsafe impl Send for SendPart {}

/// How hard LLVM's code generation works on `m`. Machine code generation
/// at `Aggressive` costs a long program of small kernels most of its
/// compile time even where the IR was left unoptimised
/// (`cheap_to_compile`): when every kernel is such, the fast instruction
/// selector and register allocator do.
fn codegen_level(m: &LoopModule) -> OptimizationLevel {
    if m.kernels.iter().all(|k| super::lower::cheap_to_compile(m, k)) {
        OptimizationLevel::None
    } else {
        OptimizationLevel::Aggressive
    }
}

/// `f` on every group, each on a thread of its own (on this one where
/// there is one group), results in the groups' order.
fn on_groups<T: Send>(groups: &[Vec<usize>], f: impl Fn(&[usize]) -> Result<T, CodegenError> + Sync) -> Result<Vec<T>, CodegenError> {
    match groups {
        [one] => Ok(vec![f(one)?]),
        _ => std::thread::scope(|s| {
            let handles: Vec<_> = groups.iter().map(|g| s.spawn(|| f(g))).collect();
            handles.into_iter().map(|h| h.join().map_err(|_| CodegenError::Internal("a compile thread panicked".into()))?).collect()
        }),
    }
}

/// The kernels `which` of `m` compiled for this CPU in a context of their
/// own. The entries are looked up here because MCJIT generates machine
/// code at the first lookup: so this thread does that work too.
fn compile_part(m: &LoopModule, which: &[usize], seed: u64, fp_contract: FpContract, level: OptimizationLevel) -> Result<Part, CodegenError> {
    let ctx = Box::new(Context::create());
    // SAFETY: the context lives in a Box that `Jit` drops only after the
    // engine (see `Drop`), and the module borrowing it is moved into the
    // engine or dropped first, so the reference outlives every use;
    // 'static only names that.
    let ctx_ref: &'static Context = unsafe { &*(ctx.as_ref() as *const Context) };
    let (module, _tm) = optimized_module(ctx_ref, m, which, seed, fp_contract, HostCpu::Native)?;
    let ee = module.create_jit_execution_engine(level).map_err(|e| CodegenError::Internal(format!("cannot create the JIT: {}", e.to_string())))?;
    let jit = Jit { ee: std::mem::ManuallyDrop::new(ee), ctx: std::mem::ManuallyDrop::new(ctx) };
    let mut entries = Vec::with_capacity(which.len());
    for &ki in which {
        let name = host_symbol(&m.kernels[ki].name);
        // SAFETY: the symbol was generated by `lower` with exactly this
        // signature (host ABI, docs/codegen.md); the raw entry is used only
        // while the engine lives (the program owns it).
        let f =
            unsafe { jit.ee.get_function::<KernelFn>(&name) }.map_err(|e| CodegenError::Internal(format!("kernel `{}` not found: {e}", m.kernels[ki].name)))?;
        entries.push((name, unsafe { f.as_raw() }));
    }
    Ok(Part { jit, entries })
}

/// MCJIT's engine and the context it was made in.
pub(crate) struct Jit {
    /// Keeps the JIT (and the code the entries point to) alive; dropped
    /// before `ctx` (`Drop`), the context it borrows.
    ee: std::mem::ManuallyDrop<inkwell::execution_engine::ExecutionEngine<'static>>,
    /// Boxed so that its address, which `ee` holds, does not move.
    ctx: std::mem::ManuallyDrop<Box<Context>>,
}

impl Drop for Jit {
    fn drop(&mut self) {
        // SAFETY: each is dropped exactly once, the engine (and the module
        // it owns) before the context it was created in.
        unsafe {
            std::mem::ManuallyDrop::drop(&mut self.ee);
            std::mem::ManuallyDrop::drop(&mut self.ctx);
        }
    }
}

// SAFETY: the program is only read after construction (`run` takes
// `&self`); the LLVM context and engine, or the library, are not touched
// again until drop, and the code is plain machine code.
unsafe impl Send for HostProgram {}
unsafe impl Sync for HostProgram {}

/// Kernel arguments shared by the threads of one launch.
#[derive(Clone, Copy)]
struct Args(*const *mut u8);
// SAFETY: the pointers are only dereferenced by the generated code, and
// threads of one split launch write disjoint cells (root loop `parallel`,
// so distinct iterations write distinct cells) and read no written buffer.
unsafe impl Send for Args {}
unsafe impl Sync for Args {}

impl Args {
    /// A method, so closures capture the whole (Send) wrapper.
    fn ptr(self) -> *const *mut u8 {
        self.0
    }
}

impl HostProgram {
    /// Compiles `m` for this CPU (`HostCpu::Native`) and JIT-loads it.
    pub fn compile(m: LoopModule, seed: u64, fp_contract: FpContract) -> Result<HostProgram, CodegenError> {
        Self::compile_on(m, seed, fp_contract, compile_threads()?)
    }

    /// As [`HostProgram::compile`], on at most `threads` compile threads
    /// ([`compile_groups`]; the same code whatever the count).
    pub fn compile_on(m: LoopModule, seed: u64, fp_contract: FpContract, threads: usize) -> Result<HostProgram, CodegenError> {
        let level = codegen_level(&m);
        let parts = on_groups(&compile_groups(&m, threads), |g| compile_part(&m, g, seed, fp_contract, level).map(SendPart))?;
        let mut entries = std::collections::HashMap::new();
        let mut jits = Vec::with_capacity(parts.len());
        for SendPart(p) in parts {
            entries.extend(p.entries);
            jits.push(p.jit);
        }
        Self::with_code(m, Code::Jit(jits), |_, name| entries.get(name).copied().ok_or_else(|| "not compiled".to_string()))
    }

    /// The program as position-independent objects for this CPU (one per
    /// compile group), with no JIT: what an on-disk cache links into a
    /// library and loads ([`crate::host_cache`]): one code generation,
    /// where a JIT beside them would pay two (MCJIT generates its own).
    pub fn compile_objects(m: &LoopModule, seed: u64, fp_contract: FpContract) -> Result<Vec<Vec<u8>>, CodegenError> {
        let level = codegen_level(m);
        on_groups(&compile_groups(m, compile_threads()?), |g| {
            let ctx = Context::create();
            let (module, _tm) = optimized_module(&ctx, m, g, seed, fp_contract, HostCpu::Native)?;
            emit_object(&module, level)
        })
    }

    /// The program over `code`, whose entries `entry` finds by symbol.
    pub(crate) fn with_code(m: LoopModule, code: Code, entry: impl Fn(&Code, &str) -> Result<KernelFn, String>) -> Result<HostProgram, CodegenError> {
        let mut kernels = Vec::with_capacity(m.kernels.len());
        for k in &m.kernels {
            let f = entry(&code, &host_symbol(&k.name)).map_err(|e| CodegenError::Internal(format!("kernel `{}` not found: {e}", k.name)))?;
            let split = split_range(k).filter(|_| k.iteration_count().is_some_and(|n| n >= MIN_SPLIT_ITERATIONS));
            kernels.push(HostKernel { f, params: kernel_params(&m, k), split });
        }
        let threads = std::thread::available_parallelism().map_or(1, |n| n.get());
        let mut written = vec![false; m.buffers.len()];
        for k in &m.kernels {
            for c in k.computes() {
                if let Some(w) = written.get_mut(c.write.buf) {
                    *w = true;
                }
            }
        }
        Ok(HostProgram { m, kernels, threads, written, _code: code })
    }

    /// The loop module it was compiled from.
    pub fn module(&self) -> &LoopModule {
        &self.m
    }

    /// Runs every kernel, in order, on `buffers` (see `run_host`): a thin
    /// wrapper over [`HostProgram::run_on`] that checks each tensor's dtype.
    pub fn run(&self, buffers: &mut [Tensor]) -> Result<(), CodegenError> {
        check_buffers(&self.m, buffers)?;
        let mut refs: Vec<BufferRef<'_>> = buffers
            .iter_mut()
            .map(|t| match &mut t.data {
                Data::I32(v) => BufferRef::of_slice(v.as_mut_slice()),
                Data::F32(v) => BufferRef::of_slice(v.as_mut_slice()),
                Data::F64(v) => BufferRef::of_slice(v.as_mut_slice()),
            })
            .collect();
        self.run_on(&mut refs)
    }

    /// Runs every kernel, in order, on caller-owned memory: one
    /// [`BufferRef`] per buffer of the module, in module order, of exactly
    /// the buffer's byte size, aligned to its element. The caller fills the
    /// inputs and zeroes the rest (every non-input buffer starts at 0).
    /// Buffers a kernel writes must be writable and overlap no other
    /// buffer (the generated code assumes its pointers do not alias);
    /// read-only buffers (inputs) are only read. A kernel whose root loop
    /// is `parallel` (and that is large enough) runs with that loop split
    /// into one contiguous slice per thread.
    pub fn run_on(&self, buffers: &mut [BufferRef<'_>]) -> Result<(), CodegenError> {
        self.check_refs(buffers)?;
        // Empty buffers get a private scratch word instead of a dangling
        // pointer; no access runs on them, but no kernel ever sees a
        // pointer that does not point to memory.
        let mut scratch = vec![0u64; buffers.len()];
        let ptrs: Vec<*mut u8> = buffers.iter().zip(scratch.iter_mut()).map(|(r, s)| if r.bytes == 0 { s as *mut u64 as *mut u8 } else { r.ptr }).collect();
        for k in &self.kernels {
            let args: Vec<*mut u8> = k.params.iter().map(|&b| ptrs[b]).collect();
            // SAFETY (at the calls below): `args` holds one live pointer per
            // parameter, each to memory of the size and alignment the
            // kernel was compiled for, writable where it writes and
            // aliasing nothing it writes (`check_refs`); the raw entry
            // stays valid while the program's code lives.
            let f = k.f;
            let a = Args(args.as_ptr());
            match k.split {
                Some((lo, hi)) if self.threads > 1 && hi - lo > 1 => {
                    let n = (self.threads as i64).min(hi - lo);
                    std::thread::scope(|s| {
                        for t in 1..n {
                            let (b, e) = (lo + (hi - lo) * t / n, lo + (hi - lo) * (t + 1) / n);
                            s.spawn(move || unsafe { f(a.ptr(), b, e) });
                        }
                        unsafe { f(a.0, lo, lo + (hi - lo) / n) };
                    });
                }
                _ => unsafe { f(a.0, i64::MIN, i64::MAX) },
            }
        }
        drop(scratch);
        Ok(())
    }

    /// Whether some kernel writes buffer `b` (a caller may then pass it
    /// read-only only if it is not).
    pub fn writes(&self, b: BufId) -> bool {
        self.written.get(b).copied().unwrap_or(false)
    }

    /// `run_on`'s contract: count, byte sizes, alignment, writability and
    /// no overlap of a written buffer with any other.
    fn check_refs(&self, buffers: &[BufferRef<'_>]) -> Result<(), CodegenError> {
        let m = &self.m;
        if buffers.len() != m.buffers.len() {
            return Err(CodegenError::Invalid(format!("run_on: {} buffers given for {} buffers", buffers.len(), m.buffers.len())));
        }
        for (i, (b, r)) in m.buffers.iter().zip(buffers).enumerate() {
            let want = buffer_bytes(b);
            if want != Some(r.bytes) {
                return Err(CodegenError::Invalid(format!(
                    "run_on: buffer `{}` ({} {:?}) needs {want:?} bytes, {} given",
                    b.name,
                    b.dtype.name(),
                    b.dims(),
                    r.bytes
                )));
            }
            if r.bytes > 0 && !(r.ptr as usize).is_multiple_of(b.dtype.size()) {
                return Err(CodegenError::Invalid(format!("run_on: buffer `{}` is not aligned to its {}-byte elements", b.name, b.dtype.size())));
            }
            if self.written[i] && !r.writable {
                return Err(CodegenError::Invalid(format!("run_on: buffer `{}` is written by the program but given read-only", b.name)));
            }
        }
        for (i, r) in buffers.iter().enumerate().filter(|(i, r)| self.written[*i] && r.bytes > 0) {
            if let Some((j, _)) = buffers.iter().enumerate().find(|(j, o)| *j != i && o.bytes > 0 && r.overlaps(o)) {
                return Err(CodegenError::Invalid(format!(
                    "run_on: buffer `{}` overlaps buffer `{}`, which the program writes",
                    m.buffers[j].name, m.buffers[i].name
                )));
            }
        }
        Ok(())
    }
}

/// The byte size of buffer `b`, if its shape is static and valid.
pub fn buffer_bytes(b: &eintup::ir::loops::Buffer) -> Option<usize> {
    if b.dims()?.iter().any(|&d| d < 0) {
        return None;
    }
    usize::try_from(b.len()?).ok()?.checked_mul(b.dtype.size())
}

/// Memory a [`HostProgram`] runs on: a pointer and a byte length, borrowed
/// for `'a`, read-only or writable. Made from a slice (safe) or a raw
/// pointer (the caller vouches for it: the Python package's NumPy arrays).
pub struct BufferRef<'a> {
    ptr: *mut u8,
    bytes: usize,
    writable: bool,
    _borrow: std::marker::PhantomData<&'a mut [u8]>,
}

impl<'a> BufferRef<'a> {
    /// A writable buffer over `data`.
    pub fn of_slice<T: Copy>(data: &'a mut [T]) -> BufferRef<'a> {
        BufferRef { ptr: data.as_mut_ptr() as *mut u8, bytes: std::mem::size_of_val(data), writable: true, _borrow: std::marker::PhantomData }
    }

    /// A read-only buffer over `data` (an input: no kernel writes it).
    pub fn of_read_only<T: Copy>(data: &'a [T]) -> BufferRef<'a> {
        BufferRef { ptr: data.as_ptr() as *mut u8, bytes: std::mem::size_of_val(data), writable: false, _borrow: std::marker::PhantomData }
    }

    /// # Safety
    /// `ptr` must point to `bytes` bytes valid for reads (and for writes if
    /// `writable`) for `'a`, which nothing else reads or writes while a
    /// run uses them (other read-only buffers may share them).
    pub unsafe fn from_raw(ptr: *mut u8, bytes: usize, writable: bool) -> BufferRef<'a> {
        BufferRef { ptr, bytes, writable, _borrow: std::marker::PhantomData }
    }

    fn overlaps(&self, o: &BufferRef<'_>) -> bool {
        let (a, b) = (self.ptr as usize, o.ptr as usize);
        a < b.saturating_add(o.bytes) && b < a.saturating_add(self.bytes)
    }
}

/// One tensor per buffer, of its dtype and element count.
fn check_buffers(m: &LoopModule, buffers: &[Tensor]) -> Result<(), CodegenError> {
    if buffers.len() != m.buffers.len() {
        return Err(CodegenError::Invalid(format!("run_host: {} tensors given for {} buffers", buffers.len(), m.buffers.len())));
    }
    for (b, t) in m.buffers.iter().zip(buffers.iter()) {
        let kind_ok = matches!((b.dtype, &t.data), (DType::I32, Data::I32(_)) | (DType::F64, Data::F64(_)) | (DType::F32, Data::F32(_)));
        if !kind_ok {
            return Err(CodegenError::Invalid(format!(
                "run_host: buffer `{}` is {}, the tensor is {}",
                b.name,
                b.dtype.name(),
                eintup::tensor::type_text(t.dtype())
            )));
        }
        if b.dims().is_none_or(|d| d.iter().any(|&d| d < 0)) || b.len().and_then(|n| usize::try_from(n).ok()) != Some(t.len()) {
            return Err(CodegenError::Invalid(format!("run_host: buffer `{}` has shape {:?}, the tensor has {} elements", b.name, b.dims(), t.len())));
        }
    }
    Ok(())
}
/// `module` (optimised for the native CPU) as a position-independent
/// object file, for a shared library, its machine code generated at
/// `level` (the JIT's for the same module).
pub(crate) fn emit_object(module: &Module<'_>, level: OptimizationLevel) -> Result<Vec<u8>, CodegenError> {
    // The JIT's machine (for its CPU, target and features); the object
    // needs position-independent code and the default code model.
    let jit = host_machine(HostCpu::Native)?;
    let target = inkwell::targets::Target::from_triple(&jit.get_triple()).map_err(|e| CodegenError::Internal(format!("host target: {}", e.to_string())))?;
    let tm = target
        .create_target_machine(
            &jit.get_triple(),
            &jit.get_cpu().to_string(),
            &jit.get_feature_string().to_string_lossy(),
            level,
            RelocMode::PIC,
            CodeModel::Default,
        )
        .ok_or_else(|| CodegenError::Internal("cannot create a target machine for a host object".into()))?;
    let buf =
        tm.write_to_memory_buffer(module, FileType::Object).map_err(|e| CodegenError::Internal(format!("cannot emit a host object: {}", e.to_string())))?;
    Ok(buf.as_slice().to_vec())
}
