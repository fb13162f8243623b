//! The one matcher for the sums the GPU and host loop passes reshape
//! (`split-reductions`, `fuse-resets`, `register-tiles`, `block-tiles`,
//! `interleave-sums`, `direct-stores`): each pass adds its own structural
//! conditions, but what makes a write safe to move, split or tile is
//! decided here once.

use super::{Compute, Kernel, VOp, WriteKind};

impl Compute {
    /// A plain sum: an `accumulate` (not atomic: one thread owns each cell
    /// it adds to) whose values read nothing of the buffer it writes, so
    /// its terms may be summed elsewhere first (in registers, lanes or
    /// shared memory) and the cell's order of additions kept.
    pub fn is_plain_sum(&self) -> bool {
        self.write.kind == WriteKind::Accumulate && self.is_plain_reduction()
    }

    /// A plain sum, or a `maximize`/`minimize` that reads nothing of the
    /// buffer it writes: one thread owns each cell it combines into.
    pub fn is_plain_reduction(&self) -> bool {
        matches!(self.write.kind, WriteKind::Accumulate | WriteKind::Maximize | WriteKind::Minimize) && !self.reads(self.write.buf)
    }

    /// A store of a constant (a reset's or a fused reset's clear).
    pub fn stores_constant(&self) -> bool {
        self.write.kind == WriteKind::Store && self.values.get(self.write.value).is_some_and(|v| matches!(v.op, VOp::Const(_)))
    }

    /// Does this clear the cell `sum` adds to (same buffer, same offset)?
    pub fn clears_cell_of(&self, sum: &Compute) -> bool {
        self.stores_constant() && self.write.buf == sum.write.buf && self.write.offset == sum.write.offset
    }
}

/// A kernel's sum: its computes are one plain sum and, at most, one clear
/// of the sum's cell (what `fuse-resets` leaves), in any nesting.
#[derive(Clone, Copy, Debug)]
pub struct KernelSum<'k> {
    pub sum: &'k Compute,
    pub clear: Option<&'k Compute>,
}

impl super::LoopModule {
    /// What a pass that reshapes sums only says about the module's max and
    /// min kernels, which it leaves alone (`""` when there are none): the
    /// `--stats` suffix of `register-tiles`, `block-tiles`, `cache-tiles`
    /// and `interleave-sums`.
    pub fn max_min_left_alone(&self) -> String {
        let n =
            self.kernels.iter().filter(|k| k.computes().iter().any(|c| matches!(c.write.kind.non_atomic(), WriteKind::Maximize | WriteKind::Minimize))).count();
        if n == 0 {
            String::new()
        } else {
            format!("; left alone: {n} max/min kernels (this pass takes sums only)")
        }
    }
}

impl Kernel {
    /// The kernel's sum, when it has exactly that shape.
    pub fn sum(&self) -> Option<KernelSum<'_>> {
        self.reduction().filter(|r| r.sum.is_plain_sum())
    }

    /// [`Kernel::sum`], or the same shape with a `maximize`/`minimize`:
    /// what passes that only move a reset (`fuse-resets`) accept; the
    /// passes that split or reorder the combine itself take only sums.
    pub fn reduction(&self) -> Option<KernelSum<'_>> {
        let (sums, clears): (Vec<&Compute>, Vec<&Compute>) = self.computes().into_iter().partition(|c| c.write.kind.combines());
        let [sum] = sums[..] else { return None };
        if !sum.is_plain_reduction() {
            return None;
        }
        match clears[..] {
            [] => Some(KernelSum { sum, clear: None }),
            [clear] if clear.clears_cell_of(sum) => Some(KernelSum { sum, clear: Some(clear) }),
            _ => None,
        }
    }
}
