//! Pass facts: what the passes that ran have made true of a loop module.
//! A pass declares the facts it needs, the facts it must not find and the
//! facts it provides (`passes::manager::PassInfo`); the pass manager checks
//! them before each pass, so a pipeline in the wrong order is an error
//! naming the missing fact instead of passes that silently do nothing.
//! The module carries its facts (`facts(..)` in the text, spelled in
//! `syntax.rs`), so a printed module goes on where it stopped.

/// One fact about a module.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Fact {
    /// `parallelize` ran: a loop is `parallel` exactly where it was proved
    /// safe, and the parallel chains the GPU passes reshape exist.
    Parallelized,
    /// `shift-loops` ran: window loops start at constants.
    LoopsShifted,
    /// `fuse-resets` ran: a reduction's reset is its kernel's first store.
    ResetsFused,
    /// `register-tiles` ran: contractions compute tiles of cells in
    /// `unroll` loops.
    RegisterTiled,
    /// `block-tiles` ran: contractions run as thread blocks with shared
    /// memory.
    BlockTiled,
    /// `arrange-threads` ran: block-tiled kernels' warps and block order
    /// are chosen (splitting them again would change nothing computed but
    /// lose the shape).
    ThreadsArranged,
}

/// A set of facts.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct Facts(u8);

impl Facts {
    pub const NONE: Facts = Facts(0);

    pub fn of(facts: &[Fact]) -> Facts {
        facts.iter().fold(Facts::NONE, |s, &f| s.with(f))
    }

    pub fn with(self, f: Fact) -> Facts {
        Facts(self.0 | 1 << f as u8)
    }

    pub fn contains(self, f: Fact) -> bool {
        self.0 & (1 << f as u8) != 0
    }

    pub fn union(self, o: Facts) -> Facts {
        Facts(self.0 | o.0)
    }

    pub fn is_empty(self) -> bool {
        self.0 == 0
    }

    /// The facts in declaration order.
    pub fn iter(self) -> impl Iterator<Item = Fact> {
        <Fact as crate::ir::text::Spelled>::ALL.iter().copied().filter(move |&f| self.contains(f))
    }
}
