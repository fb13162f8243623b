//! The `cp.async` state of one block: each thread's copies in flight,
//! grouped by `cp.async.commit_group`, and which shared words they will
//! write (docs/emulator.md, "Asynchronous copies").
//!
//! A copy reads global memory when it issues (the emulator runs one thread
//! at a time, so when it reads does not matter to the thread) and holds the
//! bytes here; they land in shared memory when a `cp.async.wait_group` of
//! the issuing thread completes the copy's group. Until then the
//! destination words are *pending*: the executor reports any access to
//! one as a race, since on a GPU it would see the old or the new bytes
//! depending on timing.

/// Most bytes one `cp.async` copies.
pub(crate) const MAX_COPY: usize = 16;

/// One copy in flight.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct InFlight {
    /// Byte offset in the block's shared memory.
    pub dst: usize,
    pub bytes: [u8; MAX_COPY],
    pub size: u8,
    /// The `cp.async` instruction (for race reports).
    pub pc: u32,
    /// Its group; `None` until a commit closes the open group.
    group: Option<u32>,
}

/// One thread's copies.
#[derive(Clone, Debug, Default)]
struct Thread {
    copies: Vec<InFlight>,
    /// Groups committed so far (the next group's number).
    committed: u32,
}

/// The copies of one block's threads, and the shared words they will
/// write: `(thread, pc)` of the copy, per 4-byte word.
#[derive(Clone, Debug, Default)]
pub(crate) struct AsyncCopies {
    threads: Vec<Thread>,
    pending: Vec<Option<(u32, u32)>>,
}

impl AsyncCopies {
    /// Empty state for a block of `threads` threads and `shared_bytes` of
    /// shared memory.
    pub fn reset(&mut self, threads: usize, shared_bytes: usize) {
        self.threads.clear();
        self.threads.resize(threads, Thread::default());
        self.pending.clear();
        self.pending.resize(shared_bytes.div_ceil(4), None);
    }

    fn words(dst: usize, size: u8) -> std::ops::Range<usize> {
        dst / 4..(dst + usize::from(size)).div_ceil(4)
    }

    /// The copy (thread, pc) still to land in a word of `[dst, dst+size)`.
    pub fn pending_in(&self, dst: usize, size: usize) -> Option<(u32, u32)> {
        let end = (dst + size).div_ceil(4).min(self.pending.len());
        self.pending.get(dst / 4..end)?.iter().flatten().next().copied()
    }

    /// Records a copy of thread `t` (in its block); `id` names the thread
    /// in race reports (its number in the launch).
    pub fn issue(&mut self, t: usize, id: u32, dst: usize, bytes: [u8; MAX_COPY], size: u8, pc: u32) {
        for w in Self::words(dst, size) {
            if let Some(p) = self.pending.get_mut(w) {
                *p = Some((id, pc));
            }
        }
        if let Some(th) = self.threads.get_mut(t) {
            th.copies.push(InFlight { dst, bytes, size, pc, group: None });
        }
    }

    /// `cp.async.commit_group` of thread `t`.
    pub fn commit(&mut self, t: usize) {
        let Some(th) = self.threads.get_mut(t) else { return };
        let g = th.committed;
        for c in th.copies.iter_mut().filter(|c| c.group.is_none()) {
            c.group = Some(g);
        }
        th.committed += 1;
    }

    /// `cp.async.wait_group n` of thread `t`: takes the copies of every
    /// group but the newest `n` out of flight, in issue order, their words
    /// no longer pending. The caller writes them to shared memory.
    pub fn land(&mut self, t: usize, n: u32) -> Vec<InFlight> {
        let Some(th) = self.threads.get_mut(t) else { return Vec::new() };
        let done = |c: &InFlight| c.group.is_some_and(|g| g.saturating_add(n) < th.committed);
        let (landed, left): (Vec<InFlight>, Vec<InFlight>) = th.copies.iter().partition(|c| done(c));
        th.copies = left;
        for c in &landed {
            for w in Self::words(c.dst, c.size) {
                if let Some(p) = self.pending.get_mut(w) {
                    *p = None;
                }
            }
        }
        landed
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn groups_land_oldest_first_and_only_when_waited_for() {
        let mut a = AsyncCopies::default();
        a.reset(2, 64);
        a.issue(0, 0, 0, [1; MAX_COPY], 16, 7);
        a.commit(0);
        a.issue(0, 0, 16, [2; MAX_COPY], 4, 8);
        assert_eq!(a.pending_in(12, 8), Some((0, 7)));
        assert_eq!(a.pending_in(16, 4), Some((0, 8)));
        assert_eq!(a.pending_in(20, 4), None);
        // The second copy is in no group yet: wait_group 0 lands the first only.
        let l = a.land(0, 0);
        assert_eq!(l.iter().map(|c| c.dst).collect::<Vec<_>>(), vec![0]);
        assert_eq!(a.pending_in(0, 16), None);
        a.commit(0);
        // One group may stay in flight: nothing lands.
        assert!(a.land(0, 1).is_empty());
        assert_eq!(a.land(0, 0).len(), 1);
        // Another thread's wait lands nothing of thread 0's.
        a.issue(0, 0, 32, [3; MAX_COPY], 8, 9);
        a.commit(0);
        assert!(a.land(1, 0).is_empty());
        assert_eq!(a.pending_in(32, 8), Some((0, 9)));
    }
}
