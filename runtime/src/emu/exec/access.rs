//! The memory side of execution: each lane's address resolved and checked
//! (space, bounds, alignment, races against the shadow), loads and stores
//! at a checked location, `cp.async` copies, and the profile's sector and
//! wavefront counts.

use super::*;

/// How a thread touches memory.
#[derive(Clone, Copy, PartialEq, Eq)]
pub(super) enum Access {
    Load {
        nc: bool,
    },
    /// The bytes stored, little-endian (a `.v4` of 8-byte values at most).
    Store([u8; 32]),
    Atomic,
}

impl Access {
    pub(super) fn name(self) -> &'static str {
        match self {
            Access::Load { .. } => "load",
            Access::Store(_) => "store",
            Access::Atomic => "atomic",
        }
    }
}

/// A checked location.
#[derive(Clone, Copy)]
pub(super) enum Loc {
    Global(usize, usize),
    Shared(usize),
    Local(usize),
    Param(usize),
}

impl Loc {
    pub(super) fn plus(self, d: usize) -> Loc {
        match self {
            Loc::Global(a, o) => Loc::Global(a, o + d),
            Loc::Shared(o) => Loc::Shared(o + d),
            Loc::Local(o) => Loc::Local(o + d),
            Loc::Param(o) => Loc::Param(o + d),
        }
    }
}

impl Exec<'_> {
    /// Checks one thread's access of `size` bytes at `addr` in `space`:
    /// bounds, alignment and (for global and shared memory) races.
    #[allow(clippy::too_many_arguments)]
    pub(super) fn resolve(&mut self, w: &Warp, lane: usize, pc: u32, space: Space, addr: u64, size: u32, access: Access) -> Result<Loc> {
        let (space, off) = match space {
            Space::Generic if (SHARED_WINDOW..SHARED_WINDOW + WINDOW_BYTES).contains(&addr) => (Space::Shared, addr - SHARED_WINDOW),
            Space::Generic if (LOCAL_WINDOW..LOCAL_WINDOW + WINDOW_BYTES).contains(&addr) => (Space::Local, addr - LOCAL_WINDOW),
            Space::Generic => (Space::Global, addr),
            s => (s, addr),
        };
        let name = space.name();
        if off % u64::from(size) != 0 {
            return Err(self.fault(w, lane, pc, FaultKind::Misaligned { space: name, access: access.name(), address: addr, size }));
        }
        let oob = |detail: String| FaultKind::OutOfBounds { space: name, access: access.name(), address: addr, size, detail };
        let within = |len: usize| off.checked_add(u64::from(size)).is_some_and(|end| end <= len as u64);
        let acc = Accessor { tag: 0, thread: self.block_lin * self.tpb + w.index * WARP as u32 + lane as u32, block: self.block_lin, epoch: self.epoch, pc };
        let words = |o: usize| (o / 4)..=((o + size as usize - 1) / 4);
        match space {
            Space::Global => {
                let Some((a, o)) = self.global.find(off, u64::from(size)) else {
                    let detail = describe_miss(&self.global.allocs, off, u64::from(size));
                    return Err(self.fault(w, lane, pc, oob(detail)));
                };
                if self.opts.check_races && access != Access::Atomic {
                    let acc = Accessor { tag: self.launch_tag, ..acc };
                    let alloc = &mut self.global.allocs[a];
                    if alloc.shadow.is_empty() {
                        alloc.shadow = shadow_for(&alloc.name, alloc.data.len())?;
                    }
                    for wd in words(o) {
                        let r = match access {
                            Access::Load { nc } => alloc.shadow[wd].read(&acc, nc),
                            Access::Store(new) => alloc.shadow[wd].write(&acc, word_unchanged(&alloc.data, o, &new[..size as usize], wd)),
                            Access::Atomic => unreachable!("atomics are not race-checked"),
                        };
                        if let Err(c) = r {
                            return Err(self.race(w, lane, pc, "global", addr, c));
                        }
                    }
                }
                Ok(Loc::Global(a, o))
            }
            Space::Shared => {
                if !within(self.shared.len()) {
                    let detail = format!("the kernel has {} bytes of shared memory", self.shared.len());
                    return Err(self.fault(w, lane, pc, oob(detail)));
                }
                let o = off as usize;
                if self.opts.check_races {
                    if let Some((thread, other)) = self.copies.pending_in(o, size as usize) {
                        return Err(self.race(w, lane, pc, "shared", addr, Conflict { kind: RaceKind::PendingAsyncCopy, thread: Some(thread), pc: other }));
                    }
                }
                if self.opts.check_races && access != Access::Atomic {
                    let acc = Accessor { tag: self.block_tag, ..acc };
                    for wd in words(o) {
                        let r = match access {
                            Access::Load { nc } => self.shared_shadow[wd].read(&acc, nc),
                            Access::Store(new) => self.shared_shadow[wd].write(&acc, word_unchanged(&self.shared, o, &new[..size as usize], wd)),
                            Access::Atomic => unreachable!("atomics are not race-checked"),
                        };
                        if let Err(c) = r {
                            return Err(self.race(w, lane, pc, "shared", addr, c));
                        }
                    }
                }
                Ok(Loc::Shared(o))
            }
            Space::Local => {
                if access == Access::Atomic || !within(self.k.local_bytes) {
                    let detail = if access == Access::Atomic {
                        "atomics address global or shared memory".to_string()
                    } else {
                        format!("the kernel has {} bytes of local memory per thread", self.k.local_bytes)
                    };
                    return Err(self.fault(w, lane, pc, oob(detail)));
                }
                Ok(Loc::Local(off as usize))
            }
            _ => {
                if !within(self.params.len()) {
                    let detail = format!("the kernel has {} bytes of parameters", self.params.len());
                    return Err(self.fault(w, lane, pc, oob(detail)));
                }
                Ok(Loc::Param(off as usize))
            }
        }
    }

    /// `cp.async`: each lane reads its global bytes now (a checked global
    /// load) and leaves them in flight to its shared destination, which
    /// must be in bounds and aligned to the copy's size. Profiled as the
    /// global load request it is and the shared store it will be.
    #[allow(clippy::too_many_arguments)]
    pub(super) fn cp_async(&mut self, w: &mut Warp, pc: u32, exec: u32, size: u8, dst: Addr, src: Addr, src_size: Option<Src>) -> Result<()> {
        let (dbase, sbase) = (dst.base.map(|r| self.read(w, Src::Reg(r))), src.base.map(|r| self.read(w, Src::Reg(r))));
        let src_sizes = src_size.map(|s| self.read(w, s));
        self.global_spans.clear();
        self.shared_spans.clear();
        for l in lanes(exec) {
            let d = dbase.map_or(0, |b| b[l]).wrapping_add(dst.offset as u64);
            let s = sbase.map_or(0, |b| b[l]).wrapping_add(src.offset as u64);
            let n = src_sizes.map_or(u64::from(size), |v| v[l]);
            if n > u64::from(size) {
                let detail = format!("the source size {n} is more than the copy's {size} bytes");
                return Err(self.fault(w, l, pc, FaultKind::OutOfBounds { space: "global", access: "cp.async", address: s, size: u32::from(size), detail }));
            }
            let oob = |detail: String| FaultKind::OutOfBounds { space: "shared", access: "cp.async", address: d, size: u32::from(size), detail };
            if d % u64::from(size) != 0 {
                return Err(self.fault(w, l, pc, FaultKind::Misaligned { space: "shared", access: "cp.async", address: d, size: u32::from(size) }));
            }
            if d.checked_add(u64::from(size)).is_none_or(|end| end > self.shared.len() as u64) {
                let detail = format!("the kernel has {} bytes of shared memory", self.shared.len());
                return Err(self.fault(w, l, pc, oob(detail)));
            }
            let mut bytes = [0u8; MAX_COPY];
            // The bytes past the source size are zeros (`src-size`).
            if n == u64::from(size) {
                let loc = self.resolve(w, l, pc, Space::Global, s, u32::from(size), Access::Load { nc: false })?;
                for (i, b) in bytes.iter_mut().enumerate().take(usize::from(size)) {
                    *b = self.load_at(w, l, loc.plus(i), 1) as u8;
                }
                self.note(loc, s, u32::from(size));
            } else {
                for (i, b) in bytes.iter_mut().enumerate().take(n as usize) {
                    let loc = self.resolve(w, l, pc, Space::Global, s + i as u64, 1, Access::Load { nc: false })?;
                    *b = self.load_at(w, l, loc, 1) as u8;
                    self.note(loc, s + i as u64, 1);
                }
            }
            if self.opts.check_races {
                // Two copies in flight to one word land in no defined order.
                if let Some((thread, other)) = self.copies.pending_in(d as usize, usize::from(size)) {
                    return Err(self.race(w, l, pc, "shared", d, Conflict { kind: RaceKind::PendingAsyncCopy, thread: Some(thread), pc: other }));
                }
            }
            let t = w.index * WARP as u32 + l as u32;
            self.copies.issue(t as usize, self.block_lin * self.tpb + t, d as usize, bytes, size, pc);
            self.shared_spans.push((d, u32::from(size)));
        }
        self.count_requests(true);
        Ok(())
    }

    pub(super) fn race(&self, w: &Warp, lane: usize, pc: u32, space: &'static str, address: u64, c: Conflict) -> Error {
        let other = OtherAccess {
            thread: c.thread.map(|t| (Self::coords(t / self.tpb, self.grid), Self::coords(t % self.tpb, self.block_dim))),
            line: self.k.lines.get(c.pc as usize).copied().unwrap_or(0),
        };
        self.fault(w, lane, pc, FaultKind::Race { space, kind: c.kind, address, other })
    }

    pub(super) fn load_at(&self, w: &Warp, lane: usize, loc: Loc, size: usize) -> u64 {
        match loc {
            Loc::Global(a, o) => load(&self.global.allocs[a].data, o, size),
            Loc::Shared(o) => load(&self.shared, o, size),
            Loc::Local(o) => load(&w.local, lane * self.k.local_bytes + o, size),
            Loc::Param(o) => load(&self.params, o, size),
        }
    }

    pub(super) fn store_at(&mut self, w: &mut Warp, lane: usize, loc: Loc, size: usize, v: u64) {
        match loc {
            Loc::Global(a, o) => store(&mut self.global.allocs[a].data, o, size, v),
            Loc::Shared(o) => store(&mut self.shared, o, size, v),
            Loc::Local(o) => store(&mut w.local, lane * self.k.local_bytes + o, size, v),
            // Decoding rejects stores to the parameter space.
            Loc::Param(_) => {}
        }
    }

    /// Remembers one thread's access for the request's profile.
    pub(super) fn note(&mut self, loc: Loc, addr: u64, bytes: u32) {
        match loc {
            Loc::Global(..) => self.global_spans.push((addr, bytes)),
            Loc::Shared(o) => self.shared_spans.push((o as u64, bytes)),
            Loc::Local(_) | Loc::Param(_) => {}
        }
    }

    /// Counts the request(s) of one warp-level load or store.
    pub(super) fn count_requests(&mut self, is_load: bool) {
        if !self.global_spans.is_empty() {
            let s = sectors(&mut self.scratch, &self.global_spans);
            // `sectors` leaves the request's distinct sectors in `scratch`.
            if self.track_block_sectors {
                self.block_sectors.extend_from_slice(&self.scratch);
            }
            if self.block_sectors.len() >= BLOCK_SECTORS_COMPACT {
                self.block_sectors.sort_unstable();
                self.block_sectors.dedup();
            }
            let bytes: u64 = self.global_spans.iter().map(|&(_, b)| u64::from(b)).sum();
            let p = &mut *self.profile;
            if is_load {
                p.global_load_requests += 1;
                p.global_load_sectors += s;
            } else {
                p.global_store_requests += 1;
                p.global_store_sectors += s;
            }
            p.global_bytes += bytes;
        }
        if !self.shared_spans.is_empty() {
            let (w, c) = shared_wavefronts(&mut self.scratch, &self.shared_spans);
            self.profile.shared_requests += 1;
            self.profile.shared_wavefronts += w;
            self.profile.shared_bank_conflicts += c;
        }
    }
}

/// Whether storing `new` at byte `o` of `data` leaves word `wd` (which the
/// store overlaps) as it is.
fn word_unchanged(data: &[u8], o: usize, new: &[u8], wd: usize) -> bool {
    let (lo, hi) = ((wd * 4).max(o), (wd * 4 + 4).min(o + new.len()));
    data[lo..hi] == new[lo - o..hi - o]
}

/// The race records of a global buffer of `bytes` bytes (one per word,
/// made at its first checked access): allocated fallibly, since they cost
/// [`Shadow`]'s size per 4 bytes of the buffer (10 bytes per byte), and a
/// large run must fail with the size, not abort its host process.
fn shadow_for(name: &str, bytes: usize) -> Result<Vec<Shadow>> {
    let words = bytes.div_ceil(4);
    let mut v = Vec::new();
    if v.try_reserve_exact(words).is_err() {
        return Err(Error::OutOfMemory {
            what: format!(
                "the race records of buffer `{name}` ({} bytes per byte of it; EINTUP_EMU_RACES=off runs without race checks)",
                std::mem::size_of::<Shadow>() / 4
            ),
            bytes: (words as u64).saturating_mul(std::mem::size_of::<Shadow>() as u64),
        });
    }
    v.resize(words, Shadow::default());
    Ok(v)
}
