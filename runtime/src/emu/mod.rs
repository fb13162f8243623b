//! The SIMT PTX emulator: runs a bundle's PTX on the CPU, as a GPU would,
//! checking what compute-sanitizer checks and counting what a profiler
//! counts (docs/emulator.md).
//!
//! - [`decode`] turns PTX text ([`crate::ptx`]) into a compact instruction
//!   form once per module; [`cfg`] finds each branch's reconvergence point.
//! - [`exec`] runs a launch: blocks in turn, warps of 32 lanes in lockstep
//!   on a SIMT stack, barriers; [`arith`] is what each instruction computes
//!   for one thread.
//! - [`memory`] holds global memory (allocations with red zones, one
//!   address space per emulated device, shared by its programs and the
//!   caller's [`DeviceBuffer`](crate::DeviceBuffer)s) and the race records; faults are [`Fault`]s (module `fault`, beside `emu`
//!   because [`Error`](crate::Error) carries them).
//! - [`crate::profile`] counts instructions, requests, sectors, bank
//!   conflicts and flops per kernel (beside `emu`, because a loaded
//!   [`Program`](crate::Program) hands the profile out).
//!
//! [`Emulator`] is the device; each loaded program gets a fresh
//! [`Session`] (its own profile, allocations in the device's memory), the
//! [`Backend`] the shared run path drives.

mod arith;
mod async_copy;
mod cfg;
pub(crate) mod decode;
mod exec;
pub(crate) mod inst;
mod memory;

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex, MutexGuard};

pub use crate::fault::{Fault, FaultKind, OtherAccess, RaceKind};
pub use crate::profile::{Profile, ProfileReport};

use crate::backend::{self, Backend, Launch};
use crate::buffer::{DeviceId, DeviceMemory};
use crate::bundle::Bundle;
use crate::error::Result;
use crate::info::{DeviceInfo, DeviceKind};
use eintup_tensor::Tensor;
use inst::{Kernel, Program};
use memory::Memory;

/// The environment variable that turns the default options' race checks
/// off (`off`; anything else leaves them on).
pub const RACES_ENV: &str = "EINTUP_EMU_RACES";

/// The environment variable that sets the default options' per-launch
/// warp-instruction limit (a positive number; anything else is ignored).
pub const INSTRUCTIONS_ENV: &str = "EINTUP_EMU_INSTRUCTIONS";

fn instructions_from_env() -> Option<u64> {
    std::env::var(INSTRUCTIONS_ENV).ok()?.trim().parse().ok().filter(|&n| n > 0)
}

/// How the emulator runs.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct EmuOptions {
    /// Warp instructions one launch may issue before it is stopped as
    /// endless.
    pub instruction_limit: u64,
    /// Warp instructions all launches of one loaded program may issue
    /// together (a [`Device::run`](crate::Device::run): the whole run,
    /// generators included; a [`Program`](crate::Program): all its runs),
    /// so that many launches each under `instruction_limit` still end.
    pub run_instruction_limit: u64,
    /// Whether global and shared accesses are checked for races (costs a
    /// shadow record per word, 10 bytes of host memory per byte of a
    /// buffer, and some time). `EINTUP_EMU_RACES=off` turns it off for
    /// [`Device::emulator`](crate::Device::emulator) (large runs).
    pub check_races: bool,
    /// The most bytes of buffers alive at once on one emulated device (its
    /// programs' and the caller's buffers together).
    pub memory_bytes: usize,
}

impl Default for EmuOptions {
    fn default() -> EmuOptions {
        EmuOptions {
            // About 11 times the warp instructions of the largest benchmark
            // kernel (conv2d at bench/ops size: 11.6 M), so only a runaway
            // loop reaches it, in about 10 s at the emulator's ~12 M warp
            // instructions a second (2^30 took 82-85 s: issue #49 item 8).
            // `EINTUP_EMU_INSTRUCTIONS=N` raises it for a larger real kernel.
            instruction_limit: instructions_from_env().unwrap_or(1 << 27),
            // Eight launches at the default per-launch limit: only a bundle
            // of many runaway launches reaches it.
            run_instruction_limit: instructions_from_env().map_or(1 << 30, |n| n.saturating_mul(8)),
            check_races: std::env::var_os(RACES_ENV).is_none_or(|v| v != "off"),
            // Buffers live in host memory, next to their race records.
            memory_bytes: 4 << 30,
        }
    }
}

/// The emulator as a device.
pub(crate) struct Emulator {
    options: EmuOptions,
    /// The device's memory; reference-counted because every allocation in
    /// it (a program's or a caller's buffer) frees itself there when dropped.
    memory: Arc<Mutex<Memory>>,
}

/// The memory, also after a panic elsewhere poisoned its lock: every
/// change to it is complete before anything that could panic.
fn lock(memory: &Mutex<Memory>) -> MutexGuard<'_, Memory> {
    memory.lock().unwrap_or_else(|e| e.into_inner())
}

/// One allocation in an emulated device's memory, freed when dropped.
pub(crate) struct Alloc {
    memory: Arc<Mutex<Memory>>,
    base: u64,
}

impl Drop for Alloc {
    fn drop(&mut self) {
        lock(&self.memory).global.free(self.base);
    }
}

/// A caller's buffer in an emulated device's memory: its own allocation, or
/// (wrapped from a raw address) part of one it does not own.
pub(crate) struct EmuMem {
    memory: Arc<Mutex<Memory>>,
    addr: u64,
    _owned: Option<Alloc>,
}

/// Which emulated device `memory` is.
fn device_id(memory: &Arc<Mutex<Memory>>) -> DeviceId {
    DeviceId::Emu(Arc::as_ptr(memory) as usize)
}

impl DeviceMemory for EmuMem {
    fn device(&self) -> DeviceId {
        device_id(&self.memory)
    }
    fn address(&self) -> u64 {
        self.addr
    }
    fn write(&self, host: &[u8]) -> Result<()> {
        lock(&self.memory).write(self.addr, host)
    }
    fn read(&self, bytes: usize) -> Result<Vec<u8>> {
        lock(&self.memory).read(self.addr, bytes)
    }
}

impl Emulator {
    pub(crate) const NAME: &'static str = "eintup PTX emulator";
    /// The newest target whose bundles run: what LLVM 19 (and so eintup)
    /// generates at most. The instructions it decodes are older than that.
    pub(crate) const ARCH: (u32, u32) = (9, 0);

    pub(crate) fn new(options: EmuOptions) -> Emulator {
        let memory = Arc::new(Mutex::new(Memory::new(options.memory_bytes)));
        Emulator { options, memory }
    }

    /// A zeroed buffer of `bytes` bytes for the caller (none for 0 bytes:
    /// its address is null, as a program's empty buffer's).
    pub(crate) fn alloc(&self, bytes: usize) -> Result<EmuMem> {
        if bytes == 0 {
            return Ok(EmuMem { memory: self.memory.clone(), addr: 0, _owned: None });
        }
        let mut m = lock(&self.memory);
        let i = m.global.alloc("DeviceBuffer", bytes)?;
        let base = m.global.allocs[i].base;
        let owned = Alloc { memory: self.memory.clone(), base };
        Ok(EmuMem { memory: self.memory.clone(), addr: base, _owned: Some(owned) })
    }

    /// `bytes` bytes at `addr`, which must lie in one live allocation of
    /// this device (a program's buffer, or a caller's).
    pub(crate) fn wrap(&self, addr: u64, bytes: usize) -> Result<EmuMem> {
        let mut m = lock(&self.memory);
        if bytes > 0 && m.global.find(addr, bytes as u64).is_none() {
            let detail = memory::describe_miss(&m.global.allocs, addr, bytes as u64);
            return Err(crate::Error::InvalidArgument(format!("wrapping {bytes} bytes at {addr:#x}: not inside one buffer of the emulator ({detail})")));
        }
        Ok(EmuMem { memory: self.memory.clone(), addr, _owned: None })
    }

    /// Host<->device copies made on this device so far.
    pub(crate) fn copies(&self) -> u64 {
        lock(&self.memory).copies
    }

    pub(crate) fn info(&self) -> DeviceInfo {
        DeviceInfo {
            kind: DeviceKind::Emulator,
            name: Self::NAME.into(),
            arch: Self::ARCH,
            multiprocessors: 1,
            memory_bytes: self.options.memory_bytes,
            driver_version: 0,
        }
    }

    /// Loads `bundle` once (decoded once, buffers allocated in this
    /// program's own memory) to run many times.
    pub(crate) fn load(&self, bundle: &Bundle) -> Result<crate::Program<'_>> {
        crate::check::check_target(bundle.manifest(), Self::ARCH, Self::NAME)?;
        let mut b = self.session();
        let p = backend::load(&mut b, bundle)?;
        Ok(crate::Program::new(bundle, Box::new(crate::program::Loaded { p, b })))
    }

    /// Runs `bundle` once: every buffer, and every launched kernel's profile.
    pub(crate) fn run(&self, bundle: &Bundle, inputs: &BTreeMap<String, Tensor>) -> Result<(BTreeMap<String, Tensor>, ProfileReport)> {
        // The target is checked by `load`, after the inputs as before.
        crate::check::check_inputs(bundle.manifest(), inputs)?;
        let mut p = self.load(bundle)?;
        p.run_with(inputs)?;
        let out = p.read_all()?;
        Ok((out, p.take_profile().unwrap_or_default()))
    }

    /// Runs `bundle` once with only `blocks` blocks of each launch (at
    /// least 2: the first, the last and others spread between) and returns
    /// the profile, its counters scaled to the whole grids; no outputs,
    /// since most of them were never computed. Exact for kernels whose
    /// blocks all do the same work (docs/emulator.md, "Sampled profiles").
    pub(crate) fn profile_sampled(&self, bundle: &Bundle, inputs: &BTreeMap<String, Tensor>, blocks: u32) -> Result<ProfileReport> {
        crate::check::check_inputs(bundle.manifest(), inputs)?;
        crate::check::check_target(bundle.manifest(), Self::ARCH, Self::NAME)?;
        let mut b = self.session_sampled(Some(blocks));
        let p = backend::load(&mut b, bundle)?;
        let mut program = crate::Program::new(bundle, Box::new(crate::program::Loaded { p, b }));
        program.run_with(inputs)?;
        Ok(program.take_profile().unwrap_or_default())
    }

    fn session(&self) -> Session<'_> {
        self.session_sampled(None)
    }

    fn session_sampled(&self, sample: Option<u32>) -> Session<'_> {
        Session { options: &self.options, memory: self.memory.clone(), profile: ProfileReport::default(), launches: 0, issued: 0, sample }
    }
}

/// One loaded program: its profile, and the device's memory it allocates in.
pub(crate) struct Session<'a> {
    options: &'a EmuOptions,
    memory: Arc<Mutex<Memory>>,
    profile: ProfileReport,
    launches: u32,
    /// Warp instructions of all launches so far (`run_instruction_limit`).
    issued: u64,
    /// Blocks each launch runs, for a sampled profile
    /// ([`Emulator::profile_sampled`]); `None`: all.
    sample: Option<u32>,
}

impl Backend for Session<'_> {
    type Module = Program;
    type Kernel = Arc<Kernel>;
    type Buffer = Alloc;

    fn load(&mut self, ptx: &str) -> Result<Program> {
        Program::load(ptx)
    }

    /// The emulator runs one block at a time whatever the grid: capping it
    /// would change nothing but the profile's launch shape.
    fn resident_blocks(&mut self, _: &Arc<Kernel>, _: [u32; 3]) -> Result<Option<u32>> {
        Ok(None)
    }

    fn kernel(&mut self, module: &Program, name: &str) -> Result<Arc<Kernel>> {
        module.kernel(name).map(|i| module.kernels[i].clone()).ok_or_else(|| crate::error::Error::BadPtx(format!("no `.entry {name}`")))
    }

    fn alloc(&mut self, name: &str, bytes: usize) -> Result<Alloc> {
        let mut m = lock(&self.memory);
        let i = m.global.alloc(name, bytes)?;
        Ok(Alloc { memory: self.memory.clone(), base: m.global.allocs[i].base })
    }

    fn address(&self, buffer: &Alloc) -> u64 {
        buffer.base
    }

    fn device_id(&self) -> DeviceId {
        device_id(&self.memory)
    }

    fn write(&mut self, addr: u64, host: &[u8]) -> Result<()> {
        lock(&self.memory).write(addr, host)
    }

    fn zero(&mut self, addr: u64, bytes: usize) -> Result<()> {
        lock(&self.memory).zero(addr, bytes)
    }

    fn launch(&mut self, l: &Launch<'_, Arc<Kernel>>) -> Result<()> {
        let launch = exec::Launch { kernel: l.kernel, grid: l.grid, block: l.block, args: l.args, grid_id: self.launches };
        self.launches += 1;
        let profile = self.profile.kernel(l.name);
        let mut m = lock(&self.memory);
        let Memory { global, tags, .. } = &mut *m;
        exec::run(&launch, global, profile, tags, &mut self.issued, self.options, self.sample)
    }

    fn synchronize(&mut self) -> Result<()> {
        Ok(())
    }

    fn start_run(&mut self) {
        self.issued = 0;
    }

    fn take_profile(&mut self) -> Option<ProfileReport> {
        Some(std::mem::take(&mut self.profile))
    }

    fn download(&mut self, addr: u64, bytes: usize) -> Result<Vec<u8>> {
        lock(&self.memory).read(addr, bytes)
    }
}
