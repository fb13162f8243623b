//! Errors of a kernel running on the emulator, with the place they
//! happened: what compute-sanitizer would print, or what a GPU would turn
//! into `CUDA_ERROR_ILLEGAL_ADDRESS` or a hang.
//!
//! A leaf module rather than part of `emu`: [`crate::error::Error`] carries
//! a [`Fault`], and the emulator returns errors, so keeping the type here
//! keeps `error` below `emu`.

use std::fmt;

/// What kind of race.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum RaceKind {
    /// Two threads write the word, unordered.
    WriteAfterWrite,
    /// A thread reads what another wrote, unordered.
    ReadAfterWrite,
    /// A thread writes what another read, unordered.
    WriteAfterRead,
    /// An `ld.global.nc` reads a word written during the launch: the
    /// non-coherent path may return stale data.
    NonCoherentRead,
    /// A thread accesses a shared word that a `cp.async` (of the other
    /// thread) has not yet landed in: no `cp.async.wait_group` completed
    /// the copy's group (and, for another thread, no barrier after it).
    PendingAsyncCopy,
}

/// A kernel fault: which kernel, block, thread and instruction, and what.
#[derive(Clone, Debug, PartialEq)]
pub struct Fault {
    pub kernel: String,
    /// `%ctaid` of the faulting thread.
    pub block: [u32; 3],
    /// `%tid` of the faulting thread.
    pub thread: [u32; 3],
    /// PTX line of the instruction (1-based).
    pub line: u32,
    /// The instruction as written.
    pub instruction: String,
    pub kind: FaultKind,
}

/// The other thread of a race.
#[derive(Clone, Debug, PartialEq)]
pub struct OtherAccess {
    /// `None` when several threads read the word.
    pub thread: Option<([u32; 3], [u32; 3])>,
    /// The PTX line of its access.
    pub line: u32,
}

/// What went wrong.
#[derive(Clone, Debug, PartialEq)]
pub enum FaultKind {
    /// An access outside every buffer (global) or outside the declared
    /// shared, local or parameter space.
    OutOfBounds { space: &'static str, access: &'static str, address: u64, size: u32, detail: String },
    /// An address not a multiple of the access size.
    Misaligned { space: &'static str, access: &'static str, address: u64, size: u32 },
    /// Two threads of one launch meet at a word without ordering.
    Race { space: &'static str, kind: RaceKind, address: u64, other: OtherAccess },
    /// Integer `div` or `rem` by zero (machine-specific in the PTX ISA).
    DivisionByZero,
    /// A barrier or warp-synchronous instruction not every thread it
    /// waits for can reach, or threads waiting at different barriers.
    Barrier(String),
    /// `shfl.sync`, `vote.sync` or `bar.warp.sync` naming threads that are
    /// not converged at the instruction.
    Convergence(String),
    /// The launch ran more warp instructions than the emulator's limit:
    /// most likely an endless loop or a spin wait.
    InstructionLimit(u64),
    /// All launches of the run together issued more warp instructions than
    /// `EmuOptions::run_instruction_limit`.
    RunInstructionLimit(u64),
}

impl fmt::Display for Fault {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let [bx, by, bz] = self.block;
        let [tx, ty, tz] = self.thread;
        write!(f, "kernel `{}`, block ({bx}, {by}, {bz}), thread ({tx}, {ty}, {tz}), line {} `{}`: ", self.kernel, self.line, self.instruction)?;
        match &self.kind {
            FaultKind::OutOfBounds { space, access, address, size, detail } => {
                write!(f, "out-of-bounds {space} {access} of {size} bytes at {address:#x}: {detail}")
            }
            FaultKind::Misaligned { space, access, address, size } => {
                write!(f, "misaligned {space} {access} of {size} bytes at {address:#x}")
            }
            FaultKind::Race { space, kind, address, other } => {
                let what = match kind {
                    RaceKind::WriteAfterWrite => "writes a word another thread wrote",
                    RaceKind::ReadAfterWrite => "reads a word another thread wrote",
                    RaceKind::WriteAfterRead => "writes a word another thread read",
                    RaceKind::NonCoherentRead => "non-coherent load (ld.global.nc) of a word written in this launch",
                    RaceKind::PendingAsyncCopy => "accesses a word a cp.async copies into, before the cp.async.wait_group that lands it",
                };
                let who = match &other.thread {
                    Some(([bx, by, bz], [tx, ty, tz])) => format!("thread ({tx}, {ty}, {tz}) of block ({bx}, {by}, {bz})"),
                    None => "several threads".to_string(),
                };
                let order = match kind {
                    RaceKind::NonCoherentRead | RaceKind::PendingAsyncCopy => String::new(),
                    _ => " with no barrier between".to_string(),
                };
                write!(f, "{space} memory race: {what} at {address:#x} (the other access: {who} at line {}){order}", other.line)
            }
            FaultKind::DivisionByZero => write!(f, "integer division by zero (its result is machine-specific in PTX)"),
            FaultKind::Barrier(msg) => write!(f, "barrier error: {msg}"),
            FaultKind::Convergence(msg) => write!(f, "warp not converged: {msg}"),
            FaultKind::InstructionLimit(n) => {
                write!(f, "the launch issued more than {n} warp instructions (an endless loop or spin wait? EINTUP_EMU_INSTRUCTIONS=N raises the limit)")
            }
            FaultKind::RunInstructionLimit(n) => {
                write!(f, "the run's launches together issued more than {n} warp instructions (EINTUP_EMU_INSTRUCTIONS=N raises the limit to 8 N)")
            }
        }
    }
}
