//! The words of the `loop` dialect's text: its keywords, and the spelling
//! of every enum it writes as a word or an operator. `print` and `parse`
//! both take them from here (docs/ir-loop.md, "Grammar").

use super::{DType, Fact, IBin, Init, KernelRole, LoopKind, Role, WriteKind};
use crate::ir::text::{spelled, Spelled};

pub const BUFFER: &str = "buffer";
/// A dim symbol's declaration, after the facts: `dim %batch.0`.
pub const DIM: &str = "dim";
/// `init(zero)`, `init(input)` after a buffer's role.
pub const INIT: &str = "init";
/// Kernels are named `@NAME`.
pub const KERNEL: &str = "kernel";
/// The module's pass facts, before everything else: `facts(parallelized)`.
pub const FACTS: &str = "facts";
/// A kernel's role and statement: `role(reset, stmt 2)`.
pub const ROLE: &str = "role";
pub const STMT: &str = "stmt";
/// The dim symbols a kernel is compiled as multiples of (`Kernel::multiples`):
/// `multiples(%k.0: 4, %col.0: 4)`.
pub const MULTIPLES: &str = "multiples";
/// A kernel's variables in `VarId` order: `vars(i, j)`.
pub const VARS: &str = "vars";
/// `for V in [LO, HI) KIND { .. }`.
pub const FOR: &str = "for";
pub const IN: &str = "in";
pub const GUARD: &str = "guard";
/// `V = load_index BUF[OFFSET]`.
pub const LOAD_INDEX: &str = "load_index";
/// The block barrier (`Node::Sync`).
pub const SYNC: &str = "sync";
/// `commit_copies` and `wait_copies N` (`Node::Copies`).
pub const COMMIT_COPIES: &str = "commit_copies";
pub const WAIT_COPIES: &str = "wait_copies";

/// The op word of every value operation that is not binary; a binary one
/// is written as its `BinOp`'s spelling.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum VOpName {
    Const,
    Load,
    Index,
    Lookup,
    Random,
    Neg,
    Cast,
}

spelled!(VOpName { Const => "const", Load => "load", Index => "index", Lookup => "lookup", Random => "random", Neg => "neg", Cast => "cast" });

// Infix operators inside `( .. )`; `min` and `max` are written as calls.
spelled!(IBin { Add => "+", Sub => "-", Mul => "*", FloorDiv => "//", CeilDiv => "//^", Mod => "%", Min => "min", Max => "max" });

spelled!(WriteKind {
    Store => "store",
    Accumulate => "accumulate",
    AtomicAccumulate => "atomic_accumulate",
    CopyAsync => "copy_async",
    Maximize => "maximize",
    Minimize => "minimize",
    AtomicMaximize => "atomic_maximize",
    AtomicMinimize => "atomic_minimize",
});

// Comparisons (`CmpOp`) and functions (`Func`) are spelled as in the
// `et` dialect (`ir::et::syntax`).

spelled!(LoopKind { Parallel => "parallel", Reduce => "reduce", Unroll => "unroll", Thread => "thread", Spread => "spread" });

spelled!(Role { Input => "input", Output => "output", Temp => "temp", Transient => "transient", Shared => "shared", Local => "local" });

spelled!(Init { Zero => "zero", Input => "input" });

spelled!(Fact {
    Parallelized => "parallelized",
    LoopsShifted => "loops_shifted",
    ResetsFused => "resets_fused",
    RegisterTiled => "register_tiled",
    BlockTiled => "block_tiled",
    ThreadsArranged => "threads_arranged",
});

spelled!(KernelRole { Main => "main", Reset => "reset", Snapshot => "snapshot", Partial => "partial", Pack => "pack" });

/// Element types are written as the runtime and the bundle manifest name
/// them.
impl Spelled for DType {
    const ALL: &'static [Self] = &[DType::I32, DType::F32, DType::F64];
    fn spelling(self) -> &'static str {
        self.name()
    }
}

/// The operator between a write's target and its value: `+=` for the
/// accumulating writes, `=` for the others (a store; `maximize` and
/// `minimize` say how they combine in their word).
pub fn write_operator(kind: WriteKind) -> &'static str {
    match kind {
        WriteKind::Store | WriteKind::CopyAsync | WriteKind::Maximize | WriteKind::Minimize | WriteKind::AtomicMaximize | WriteKind::AtomicMinimize => "=",
        WriteKind::Accumulate | WriteKind::AtomicAccumulate => "+=",
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ir::loops::{BinOp, CmpOp, Func};
    use crate::ir::text::spelling::checks;
    use crate::ir::text::Dialect;

    static D: Dialect = Dialect { name: "loop", end: "end of input", bad_char: "C", bad_number: "N", bad_string: "S", unexpected: "U" };

    #[test]
    fn every_spelling_is_one_token_and_reads_back() {
        checks::table::<VOpName>(&D);
        checks::table::<BinOp>(&D);
        checks::table::<IBin>(&D);
        checks::table::<WriteKind>(&D);
        checks::table::<CmpOp>(&D);
        checks::table::<Func>(&D);
        checks::table::<LoopKind>(&D);
        checks::table::<Role>(&D);
        checks::table::<Init>(&D);
        checks::table::<KernelRole>(&D);
        checks::table::<Fact>(&D);
        checks::table::<DType>(&D);
        for w in [FACTS, BUFFER, INIT, KERNEL, ROLE, STMT, VARS, FOR, IN, GUARD, LOAD_INDEX, SYNC, COMMIT_COPIES, WAIT_COPIES] {
            checks::one_token(w, &D);
        }
        for k in WriteKind::ALL {
            checks::one_token(write_operator(*k), &D);
        }
        // Value op words and binary op words do not overlap: the parser tries both.
        let words: Vec<&str> = VOpName::ALL
            .iter()
            .map(|o| o.spelling())
            .chain(BinOp::ALL.iter().map(|o| o.spelling()))
            .chain(CmpOp::ALL.iter().map(|o| o.spelling()))
            .chain(Func::ALL.iter().map(|o| o.spelling()))
            .collect();
        assert!(words.iter().enumerate().all(|(i, w)| !words[i + 1..].contains(w)), "{words:?}");
    }
}
