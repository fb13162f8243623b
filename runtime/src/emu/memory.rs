//! The emulated device memory: global allocations with red zones between
//! them, and the shadow state that finds races.
//!
//! Global memory is a list of allocations at addresses from
//! [`GLOBAL_BASE`] up, each followed by at least [`RED_ZONE`] unmapped
//! bytes, so that running off the end of one buffer is an out-of-bounds
//! access rather than a silent write into the next (compute-sanitizer's
//! memcheck works the same way). Shared and local memory live with the
//! block and warp that own them ([`super::exec`]); they share the
//! [`Shadow`] race records defined here.
//!
//! # Races
//!
//! Every 4-byte word of global and shared memory has a [`Shadow`] record:
//! its last writer and its reader(s) since, each with the barrier epoch of
//! its block at the time. Two accesses to a word are ordered when the same
//! thread made them, or when both threads are in one block and a
//! `bar.sync` completed between them (the earlier one's epoch is smaller).
//! A write unordered with the previous write or read of another thread, or
//! a read unordered with the previous write of another thread, is a race.
//! Atomics neither check nor update the records: they are the one way
//! threads of a launch may meet at an address. Records carry the tag of the
//! launch (global) or block run (shared) that wrote them, so a new launch
//! starts clean without clearing anything. The granularity is a word: two
//! threads writing different bytes of one word are reported too (the
//! runtime's element types are 4 and 8 bytes wide, so this never happens
//! in bundles).

use crate::error::{Error, Result};
use crate::fault::RaceKind;

/// Address of the first allocation: far above the generic windows of
/// shared and local memory (see `inst::SHARED_WINDOW`), and not 0, so that
/// a null pointer is never inside an allocation.
pub(crate) const GLOBAL_BASE: u64 = 0x0000_7000_0000_0000;
/// Unmapped bytes after each allocation (and the alignment of each start,
/// as `cuMemAlloc`'s 256 bytes at least).
pub(crate) const RED_ZONE: u64 = 4096;

/// One global allocation.
pub(crate) struct Allocation {
    pub base: u64,
    pub name: String,
    pub data: Vec<u8>,
    /// Race records, one per word; allocated on first checked access.
    pub shadow: Vec<Shadow>,
}

/// Global memory of one run.
pub(crate) struct Global {
    /// In address order.
    pub allocs: Vec<Allocation>,
    next: u64,
    bytes: usize,
    limit: usize,
    /// Allocation of the last successful lookup: accesses come in runs.
    last: usize,
}

/// Where an address falls when it is in no allocation, for messages.
pub(crate) fn describe_miss(allocs: &[Allocation], addr: u64, size: u64) -> String {
    if addr == 0 {
        return "a null pointer (zero-sized buffers are passed as null)".into();
    }
    // The allocation just below the address, if the address is in its
    // red zone or past it.
    let below = allocs.iter().rev().find(|a| a.base <= addr);
    let above = allocs.iter().find(|a| a.base > addr);
    match (below, above) {
        (Some(a), _) if addr - a.base < a.data.len() as u64 + RED_ZONE => {
            format!("{} bytes past the end of buffer `{}` ({} bytes at {:#x})", addr + size - (a.base + a.data.len() as u64), a.name, a.data.len(), a.base)
        }
        (_, Some(a)) if a.base - addr <= RED_ZONE => {
            format!("{} bytes before buffer `{}` ({} bytes at {:#x})", a.base - addr, a.name, a.data.len(), a.base)
        }
        _ => "not in any buffer".into(),
    }
}

impl Global {
    /// Empty memory holding at most `limit` bytes in all.
    pub(crate) fn new(limit: usize) -> Global {
        Global { allocs: Vec::new(), next: GLOBAL_BASE, bytes: 0, limit, last: 0 }
    }

    /// A zeroed allocation of `bytes` bytes (not 0); returns its index.
    pub(crate) fn alloc(&mut self, name: &str, bytes: usize) -> Result<usize> {
        if self.bytes.saturating_add(bytes) > self.limit {
            return Err(Error::InvalidArgument(format!(
                "buffer `{name}` ({bytes} bytes) does not fit in the emulator's {} bytes of global memory",
                self.limit
            )));
        }
        let base = self.next;
        let span = (bytes as u64).div_ceil(RED_ZONE) * RED_ZONE + RED_ZONE;
        self.next = base + span;
        self.bytes += bytes;
        let data = eintup_tensor::zeroed_bytes(bytes)
            .ok_or_else(|| Error::OutOfMemory { what: format!("buffer `{name}` in the emulator's memory"), bytes: bytes as u64 })?;
        self.allocs.push(Allocation { base, name: name.to_string(), data, shadow: Vec::new() });
        Ok(self.allocs.len() - 1)
    }

    /// Frees the allocation starting at `base`; false when there is none.
    /// Addresses are not reused while any allocation lives (a stale pointer
    /// then faults as "not in any buffer"); once none does, allocation
    /// starts again at [`GLOBAL_BASE`], so that each one-shot run on a device
    /// sees the same addresses.
    pub(crate) fn free(&mut self, base: u64) -> bool {
        let Ok(i) = self.allocs.binary_search_by_key(&base, |a| a.base) else {
            return false;
        };
        let a = self.allocs.remove(i);
        self.bytes -= a.data.len();
        self.last = 0;
        if self.allocs.is_empty() {
            self.next = GLOBAL_BASE;
        }
        true
    }

    /// The allocation and offset holding `[addr, addr + size)` entirely.
    pub(crate) fn find(&mut self, addr: u64, size: u64) -> Option<(usize, usize)> {
        let hit = |a: &Allocation| addr >= a.base && addr.checked_add(size).is_some_and(|end| end <= a.base + a.data.len() as u64);
        if let Some(a) = self.allocs.get(self.last) {
            if hit(a) {
                return Some((self.last, (addr - a.base) as usize));
            }
        }
        let i = self.allocs.partition_point(|a| a.base <= addr).checked_sub(1)?;
        let a = &self.allocs[i];
        if hit(a) {
            self.last = i;
            Some((i, (addr - a.base) as usize))
        } else {
            None
        }
    }
}

/// The emulator's device memory, one per emulated device: every program
/// loaded on it and every [`DeviceBuffer`](crate::DeviceBuffer) made by it
/// allocate here, so that a caller's buffer is an address the kernels of
/// any of its programs can use.
pub(crate) struct Memory {
    pub global: Global,
    /// Numbers launches and blocks for the race records: device-wide,
    /// because records of one program's launch must never look like
    /// another's.
    pub tags: u32,
    /// Host<->device copies made so far (uploads and downloads): what a
    /// caller proves "no copy" with.
    pub copies: u64,
}

impl Memory {
    pub(crate) fn new(limit: usize) -> Memory {
        Memory { global: Global::new(limit), tags: 0, copies: 0 }
    }

    /// The bytes `[addr, addr + len)`, inside one live allocation.
    fn span(&mut self, addr: u64, len: usize) -> Result<&mut [u8]> {
        let Some((a, off)) = self.global.find(addr, len as u64) else {
            let detail = describe_miss(&self.global.allocs, addr, len as u64);
            return Err(Error::InvalidArgument(format!("{len} bytes at {addr:#x} are not in one emulator buffer: {detail}")));
        };
        Ok(&mut self.global.allocs[a].data[off..off + len])
    }

    /// Copies `host` to device address `addr` (a host->device copy).
    pub(crate) fn write(&mut self, addr: u64, host: &[u8]) -> Result<()> {
        if host.is_empty() {
            return Ok(());
        }
        self.span(addr, host.len())?.copy_from_slice(host);
        self.copies += 1;
        Ok(())
    }

    /// The `len` bytes at device address `addr` (a device->host copy).
    pub(crate) fn read(&mut self, addr: u64, len: usize) -> Result<Vec<u8>> {
        if len == 0 {
            return Ok(Vec::new());
        }
        let span = self.span(addr, len)?;
        let mut bytes = eintup_tensor::zeroed_bytes(len).ok_or_else(|| Error::OutOfMemory { what: "a download".into(), bytes: len as u64 })?;
        bytes.copy_from_slice(span);
        self.copies += 1;
        Ok(bytes)
    }

    /// Zeroes `len` bytes at `addr`: device work, not a copy.
    pub(crate) fn zero(&mut self, addr: u64, len: usize) -> Result<()> {
        if len > 0 {
            self.span(addr, len)?.fill(0);
        }
        Ok(())
    }
}

/// Reads `size` (1..=8) little-endian bytes.
pub(crate) fn load(bytes: &[u8], off: usize, size: usize) -> u64 {
    let mut v = [0u8; 8];
    v[..size].copy_from_slice(&bytes[off..off + size]);
    u64::from_le_bytes(v)
}

/// Writes the low `size` (1..=8) bytes of `value`, little-endian.
pub(crate) fn store(bytes: &mut [u8], off: usize, size: usize, value: u64) {
    bytes[off..off + size].copy_from_slice(&value.to_le_bytes()[..size]);
}

/// Who accesses: a thread of the launch, its block, the block's barrier
/// epoch, and the instruction.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Accessor {
    /// The launch (global memory) or block run (shared memory) the
    /// access belongs to.
    pub tag: u32,
    /// Linear thread index in the launch.
    pub thread: u32,
    /// Linear block index in the launch.
    pub block: u32,
    /// Barriers completed by the block so far.
    pub epoch: u32,
    /// Instruction index.
    pub pc: u32,
}

/// `Shadow::reader` when several threads read since the last write.
const MANY: u32 = u32::MAX;
/// `Shadow::read_block` when readers are in several blocks.
const MULTI_BLOCK: u32 = u32::MAX;

/// The race record of one word.
#[derive(Clone, Copy, Debug, Default)]
pub(crate) struct Shadow {
    tag: u32,
    /// Thread + 1 of the last write; 0 for none.
    writer: u32,
    write_block: u32,
    write_epoch: u32,
    write_pc: u32,
    /// Thread + 1 of the reader since the last write, [`MANY`], or 0.
    reader: u32,
    read_block: u32,
    read_epoch: u32,
    read_pc: u32,
    /// Whether a non-coherent (`ld.global.nc`) load read the word.
    nc_read: bool,
}

/// The other side of a race: a thread (`None` when several threads read)
/// and its instruction.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Conflict {
    pub kind: RaceKind,
    pub thread: Option<u32>,
    pub pc: u32,
}

/// Whether an earlier access by `thread` in `block` at `epoch` is ordered
/// before `acc`.
fn ordered(thread: u32, block: u32, epoch: u32, acc: &Accessor) -> bool {
    thread == acc.thread || (block == acc.block && epoch < acc.epoch)
}

impl Shadow {
    fn refresh(&mut self, tag: u32) {
        if self.tag != tag {
            *self = Shadow { tag, ..Shadow::default() };
        }
    }

    fn write_conflict(&self, acc: &Accessor) -> bool {
        self.writer != 0 && !ordered(self.writer - 1, self.write_block, self.write_epoch, acc)
    }

    /// Records a read; the conflict if it races with a write.
    pub(crate) fn read(&mut self, acc: &Accessor, nc: bool) -> Result<(), Conflict> {
        self.refresh(acc.tag);
        if nc && self.writer != 0 {
            return Err(Conflict { kind: RaceKind::NonCoherentRead, thread: Some(self.writer - 1), pc: self.write_pc });
        }
        if self.write_conflict(acc) {
            return Err(Conflict { kind: RaceKind::ReadAfterWrite, thread: Some(self.writer - 1), pc: self.write_pc });
        }
        self.nc_read |= nc;
        let me = acc.thread + 1;
        let replace = self.reader == 0
            || self.reader == me
            || (self.reader != MANY && ordered(self.reader - 1, self.read_block, self.read_epoch, acc))
            || (self.reader == MANY && self.read_block == acc.block && self.read_epoch < acc.epoch);
        if replace {
            self.reader = me;
            self.read_block = acc.block;
        } else {
            self.reader = MANY;
            if self.read_block != acc.block {
                self.read_block = MULTI_BLOCK;
            }
        }
        self.read_epoch = acc.epoch;
        self.read_pc = acc.pc;
        Ok(())
    }

    /// Records a write; the conflict if it races with an earlier access.
    /// `unchanged`: the write stores the bytes the word already holds. Such
    /// a write unordered with another thread's write is no race: the word
    /// ends up the same in either order (reset kernels store one constant
    /// from every thread that reaches a cell, docs/passes.md
    /// `parallelize`). The earlier writer's record is kept.
    pub(crate) fn write(&mut self, acc: &Accessor, unchanged: bool) -> Result<(), Conflict> {
        self.refresh(acc.tag);
        if self.nc_read {
            return Err(Conflict { kind: RaceKind::NonCoherentRead, thread: (self.reader != MANY).then(|| self.reader - 1), pc: self.read_pc });
        }
        let unordered_write = self.write_conflict(acc);
        if unordered_write && !unchanged {
            return Err(Conflict { kind: RaceKind::WriteAfterWrite, thread: Some(self.writer - 1), pc: self.write_pc });
        }
        let me = acc.thread + 1;
        let read_ordered = match self.reader {
            0 => true,
            r if r == me => true,
            MANY => self.read_block == acc.block && self.read_epoch < acc.epoch,
            r => ordered(r - 1, self.read_block, self.read_epoch, acc),
        };
        if !read_ordered {
            let thread = (self.reader != MANY).then(|| self.reader - 1);
            return Err(Conflict { kind: RaceKind::WriteAfterRead, thread, pc: self.read_pc });
        }
        if unordered_write {
            return Ok(());
        }
        self.writer = me;
        self.write_block = acc.block;
        self.write_epoch = acc.epoch;
        self.write_pc = acc.pc;
        self.reader = 0;
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn acc(thread: u32, block: u32, epoch: u32) -> Accessor {
        Accessor { tag: 1, thread, block, epoch, pc: thread }
    }

    #[test]
    fn allocations_are_separated_by_red_zones() {
        let mut g = Global::new(1 << 20);
        let a = g.alloc("a", 100).unwrap();
        let b = g.alloc("b", 8).unwrap();
        let (ba, bb) = (g.allocs[a].base, g.allocs[b].base);
        assert_eq!(g.find(ba + 96, 4), Some((a, 96)));
        assert_eq!(g.find(ba + 98, 4), None);
        assert!(bb >= ba + 100 + RED_ZONE);
        assert_eq!(g.find(bb, 8), Some((b, 0)));
        assert_eq!(describe_miss(&g.allocs, ba + 100, 4), format!("4 bytes past the end of buffer `a` (100 bytes at {ba:#x})"));
        assert_eq!(describe_miss(&g.allocs, bb - 4, 4), format!("4 bytes before buffer `b` (8 bytes at {bb:#x})"));
        assert!(describe_miss(&g.allocs, 0, 4).contains("null"));
        assert!(g.alloc("c", 1 << 21).is_err());
        // Freed memory counts no more; addresses start over once all is free.
        assert!(g.free(ba) && !g.free(ba));
        assert_eq!(g.find(ba, 4), None, "a freed buffer is gone");
        assert_eq!(g.find(bb, 8), Some((0, 0)));
        assert!(g.alloc("c", (1 << 20) - 8).is_ok());
        assert!(g.free(bb));
        let c = g.allocs[0].base;
        assert!(g.free(c));
        let d = g.alloc("d", 4).unwrap();
        assert_eq!(g.allocs[d].base, GLOBAL_BASE);
    }

    #[test]
    fn race_rules() {
        // One thread may do anything to its own word.
        let mut s = Shadow::default();
        s.write(&acc(1, 0, 0), false).unwrap();
        s.read(&acc(1, 0, 0), false).unwrap();
        s.write(&acc(1, 0, 0), false).unwrap();
        // Another thread of the block reading it without a barrier races...
        assert_eq!(s.read(&acc(2, 0, 0), false).unwrap_err().kind, RaceKind::ReadAfterWrite);
        // ...but not after one.
        s.read(&acc(2, 0, 1), false).unwrap();
        // A thread of another block is never ordered with it.
        let mut s = Shadow::default();
        s.write(&acc(1, 0, 5), false).unwrap();
        assert_eq!(s.write(&acc(40, 1, 9), false).unwrap_err().kind, RaceKind::WriteAfterWrite);
        // Several readers, then a write by one of them.
        let mut s = Shadow::default();
        s.read(&acc(1, 0, 0), false).unwrap();
        s.read(&acc(2, 0, 0), false).unwrap();
        let c = s.write(&acc(1, 0, 0), false).unwrap_err();
        assert_eq!((c.kind, c.thread), (RaceKind::WriteAfterRead, None));
        s.write(&acc(1, 0, 1), false).unwrap();
        // A new launch starts clean.
        s.write(&Accessor { tag: 2, ..acc(7, 3, 0) }, false).unwrap();
        // Threads of two blocks storing the value the word already holds
        // (one constant from every thread): no race, and the first
        // writer's record stays...
        let mut s = Shadow::default();
        s.write(&acc(1, 0, 0), false).unwrap();
        s.write(&acc(2, 0, 0), true).unwrap();
        s.write(&acc(40, 1, 0), true).unwrap();
        // ...so a read by another thread still races with it,
        let c = s.read(&acc(3, 0, 0), false).unwrap_err();
        assert_eq!((c.kind, c.thread), (RaceKind::ReadAfterWrite, Some(1)));
        // and so does a store of a new value.
        let c = s.write(&acc(41, 1, 0), false).unwrap_err();
        assert_eq!((c.kind, c.thread), (RaceKind::WriteAfterWrite, Some(1)));
        // An unchanged store still races with an unordered read.
        let mut s = Shadow::default();
        s.read(&acc(1, 0, 0), false).unwrap();
        assert_eq!(s.write(&acc(2, 0, 0), true).unwrap_err().kind, RaceKind::WriteAfterRead);
        // Non-coherent loads of written data, either order.
        let mut s = Shadow::default();
        s.write(&acc(1, 0, 0), false).unwrap();
        assert_eq!(s.read(&acc(1, 0, 0), true).unwrap_err().kind, RaceKind::NonCoherentRead);
        let mut s = Shadow::default();
        s.read(&acc(1, 0, 0), true).unwrap();
        assert_eq!(s.write(&acc(2, 1, 0), false).unwrap_err().kind, RaceKind::NonCoherentRead);
    }
}
