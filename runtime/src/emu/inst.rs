//! The emulator's compact instruction form: what [`super::decode`] makes of
//! a module's PTX and [`super::exec`] runs. Registers are indices into a
//! warp's register file, labels instruction indices, symbols addresses,
//! immediates the bits the instruction's type reads, and each opcode with
//! its modifiers one [`Op`] variant, so execution never looks at text.

use std::sync::Arc;

/// Lanes per warp.
pub(crate) const WARP: usize = 32;

/// Where the generic address space maps shared memory: a shared-space
/// address `a` is the generic address `SHARED_WINDOW + a`. The windows and
/// the global allocations ([`super::memory::GLOBAL_BASE`]) never overlap,
/// so a generic address says which space it belongs to.
pub(crate) const SHARED_WINDOW: u64 = 0x0000_0001_0000_0000;
/// Where the generic address space maps local memory.
pub(crate) const LOCAL_WINDOW: u64 = 0x0000_0002_0000_0000;
/// Size of each window.
pub(crate) const WINDOW_BYTES: u64 = 0x0000_0001_0000_0000;

/// Static shared memory one block may declare: 48 KiB, what ptxas allows
/// every architecture without dynamic shared memory (which neither eintup
/// nor the emulator uses). Checked when a kernel is decoded, so a tampered
/// `.shared .b8 buf[4294967296]` is an error, not a 4 GiB allocation.
pub(crate) const MAX_SHARED_BYTES: usize = 48 << 10;
/// Local memory one thread may declare: 512 KiB, CUDA's limit per thread.
/// The emulator allocates it for every lane of every warp of a block, so
/// at most 512 MiB for a block of 1024 threads.
pub(crate) const MAX_LOCAL_BYTES: usize = 512 << 10;
/// Registers (value and predicate) one kernel may declare. PTX registers
/// are virtual, so the hardware's 255 per thread does not bound them
/// (ptxas maps them onto those, spilling the rest): eintup's register-tiled
/// matmul declares about 450. The emulator gives each thread a 64-bit slot
/// per register, 64 MiB for a block of 1024 threads at this limit, so a
/// tampered `.reg .b64 %rd<100000000>` is refused.
pub(crate) const MAX_REGISTERS: usize = 8192;

/// Parameter bytes one kernel may declare: 32,764, CUDA's limit (12.1 and
/// later, Volta and later; 4 KiB before). The emulator allocates them per launch.
pub(crate) const MAX_PARAM_BYTES: usize = 32_764;

/// Instruction index meaning "never reached": the reconvergence point of a
/// branch whose paths only meet at the kernel's exit.
pub(crate) const NO_PC: u32 = u32::MAX;

/// A state space of a memory instruction.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Space {
    Global,
    Shared,
    Local,
    Param,
    /// Addresses that say their space themselves (see [`SHARED_WINDOW`]).
    Generic,
}

impl Space {
    pub(crate) fn name(self) -> &'static str {
        match self {
            Space::Global => "global",
            Space::Shared => "shared",
            Space::Local => "local",
            Space::Param => "param",
            Space::Generic => "generic",
        }
    }
}

/// Fundamental types the emulator executes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Ty {
    B8,
    B16,
    B32,
    B64,
    U8,
    U16,
    U32,
    U64,
    S8,
    S16,
    S32,
    S64,
    F32,
    F64,
    Pred,
}

impl Ty {
    pub(crate) fn parse(s: &str) -> Option<Ty> {
        Some(match s {
            "b8" => Ty::B8,
            "b16" => Ty::B16,
            "b32" => Ty::B32,
            "b64" => Ty::B64,
            "u8" => Ty::U8,
            "u16" => Ty::U16,
            "u32" => Ty::U32,
            "u64" => Ty::U64,
            "s8" => Ty::S8,
            "s16" => Ty::S16,
            "s32" => Ty::S32,
            "s64" => Ty::S64,
            "f32" => Ty::F32,
            "f64" => Ty::F64,
            "pred" => Ty::Pred,
            _ => return None,
        })
    }

    pub(crate) fn bits(self) -> u32 {
        match self {
            Ty::B8 | Ty::U8 | Ty::S8 => 8,
            Ty::B16 | Ty::U16 | Ty::S16 => 16,
            Ty::B32 | Ty::U32 | Ty::S32 | Ty::F32 => 32,
            Ty::B64 | Ty::U64 | Ty::S64 | Ty::F64 => 64,
            Ty::Pred => 1,
        }
    }

    pub(crate) fn is_signed(self) -> bool {
        matches!(self, Ty::S8 | Ty::S16 | Ty::S32 | Ty::S64)
    }

    pub(crate) fn is_float(self) -> bool {
        matches!(self, Ty::F32 | Ty::F64)
    }

    pub(crate) fn is_int(self) -> bool {
        !self.is_float() && self != Ty::Pred
    }

    pub(crate) fn is_bits(self) -> bool {
        matches!(self, Ty::B8 | Ty::B16 | Ty::B32 | Ty::B64)
    }

    pub(crate) fn kind(self) -> IntKind {
        IntKind { bits: self.bits() as u8, signed: self.is_signed() }
    }
}

/// Width and signedness of an integer operation.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct IntKind {
    pub bits: u8,
    pub signed: bool,
}

/// A special register, read per lane.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Special {
    Tid(u8),
    Ntid(u8),
    Ctaid(u8),
    Nctaid(u8),
    LaneId,
    WarpId,
    NWarpId,
    /// `%lanemask_eq/le/lt/ge/gt`.
    LaneMask(Cmp),
    /// `%clock`, `%clock64`: the warp's issued instructions so far.
    Clock,
    SmId,
    NSmId,
    GridId,
}

/// A source operand.
#[derive(Clone, Copy, Debug, PartialEq)]
pub(crate) enum Src {
    Reg(u32),
    /// The bits the instruction's type reads.
    Imm(u64),
    Special(Special),
}

/// A destination register. Values are kept zero-extended to the width
/// of their type; `sext` (when not 0) is the width to sign-extend from into
/// a wider register (PTX ISA, "Operand Size Exceeding Instruction-Type Size").
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Dst {
    pub reg: u32,
    pub sext: u8,
    pub reg_bits: u8,
}

/// A predicate operand, possibly negated.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct PredSrc {
    pub idx: u32,
    pub neg: bool,
}

/// `[base + offset]`; no base for an absolute address.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Addr {
    pub base: Option<u32>,
    pub offset: i64,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum IntOp {
    Add,
    Sub,
    MulLo,
    MulHi,
    MulWide,
    Div,
    Rem,
    Min,
    Max,
    And,
    Or,
    Xor,
    Shl,
    Shr,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum IntUnOp {
    Neg,
    Abs,
    Not,
    Cnot,
    Popc,
    Clz,
    Brev,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum FloatOp {
    Add,
    Sub,
    Mul,
    Div,
    /// `div.approx.f32`: `a * (1/b)`, zero for huge `b`.
    DivApprox,
    Min,
    Max,
    /// `min.NaN`/`max.NaN`: NaN if either input is NaN.
    MinNan,
    MaxNan,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum FloatUnOp {
    Neg,
    Abs,
    Sqrt,
    Rcp,
    Rsqrt,
    Sin,
    Cos,
    Lg2,
    Ex2,
    Tanh,
}

/// Comparison operators of `setp` (and the lane masks).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Cmp {
    Eq,
    Ne,
    Lt,
    Le,
    Gt,
    Ge,
    Equ,
    Neu,
    Ltu,
    Leu,
    Gtu,
    Geu,
    Num,
    Nan,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum BoolOp {
    And,
    Or,
    Xor,
}

/// Rounding modifiers of `cvt`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Rnd {
    None,
    Rn,
    Rz,
    Rm,
    Rp,
    Rni,
    Rzi,
    Rmi,
    Rpi,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum AtomOp {
    Add,
    Min,
    Max,
    Inc,
    Dec,
    And,
    Or,
    Xor,
    Exch,
    Cas,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum ShflMode {
    Up,
    Down,
    Bfly,
    Idx,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum VoteMode {
    All,
    Any,
    Uni,
    Ballot,
}

/// One decoded operation.
#[derive(Clone, Debug, PartialEq)]
pub(crate) enum Op {
    Int {
        op: IntOp,
        k: IntKind,
        d: Dst,
        a: Src,
        b: Src,
    },
    IntUn {
        op: IntUnOp,
        k: IntKind,
        d: Dst,
        a: Src,
    },
    /// `mad.lo`, `mad.hi`, `mad.wide`.
    Mad {
        hi: bool,
        wide: bool,
        k: IntKind,
        d: Dst,
        a: Src,
        b: Src,
        c: Src,
    },
    Bfe {
        k: IntKind,
        d: Dst,
        a: Src,
        b: Src,
        c: Src,
    },
    /// `shf.{l,r}.{clamp,wrap}.b32`: funnel shift of `b:a` (LLVM's rotates).
    Shf {
        left: bool,
        clamp: bool,
        d: Dst,
        a: Src,
        b: Src,
        c: Src,
    },
    Bfi {
        bits: u8,
        d: Dst,
        a: Src,
        b: Src,
        c: Src,
        e: Src,
    },
    Float {
        op: FloatOp,
        f64: bool,
        ftz: bool,
        sat: bool,
        d: Dst,
        a: Src,
        b: Src,
    },
    FloatUn {
        op: FloatUnOp,
        f64: bool,
        ftz: bool,
        d: Dst,
        a: Src,
    },
    Fma {
        f64: bool,
        ftz: bool,
        sat: bool,
        d: Dst,
        a: Src,
        b: Src,
        c: Src,
    },
    Cvt {
        to: Ty,
        from: Ty,
        rnd: Rnd,
        sat: bool,
        ftz: bool,
        d: Dst,
        a: Src,
    },
    /// A bit copy of `bits` bits.
    Mov {
        bits: u8,
        d: Dst,
        a: Src,
    },
    /// `mov.b64 %rd, {%r1, %r2}`: parts from the least significant up.
    Pack {
        part_bits: u8,
        d: Dst,
        parts: Vec<Src>,
    },
    /// `mov.b64 {%r1, %r2}, %rd`.
    Unpack {
        part_bits: u8,
        ds: Vec<Option<Dst>>,
        a: Src,
    },
    Setp {
        cmp: Cmp,
        ty: Ty,
        ftz: bool,
        p: Option<u32>,
        q: Option<u32>,
        a: Src,
        b: Src,
        comb: Option<(BoolOp, PredSrc)>,
    },
    Selp {
        bits: u8,
        d: Dst,
        a: Src,
        b: Src,
        c: PredSrc,
    },
    /// `mov.pred`, `not.pred`.
    PredMov {
        d: u32,
        a: PredSrc,
    },
    /// `and/or/xor.pred`.
    PredLogic {
        op: BoolOp,
        d: u32,
        a: PredSrc,
        b: PredSrc,
    },
    /// `n` elements of `size` bytes each; `d[i]` is `None` for a sink.
    Ld {
        space: Space,
        size: u8,
        n: u8,
        nc: bool,
        d: [Option<Dst>; 4],
        addr: Addr,
    },
    St {
        space: Space,
        size: u8,
        n: u8,
        v: [Src; 4],
        addr: Addr,
    },
    Atom {
        space: Space,
        op: AtomOp,
        ty: Ty,
        d: Option<Dst>,
        addr: Addr,
        b: Src,
        c: Src,
    },
    /// `red.global.add.v{2,4}.f32 [a], {b0, ..}` (sm_90, PTX 8.1): `n`
    /// consecutive `f32` atomic adds at `a`, which is aligned to their
    /// `4 n` bytes; one request per warp, as one vector access.
    RedV {
        n: u8,
        addr: Addr,
        b: [Src; 4],
    },
    Cvta {
        to_generic: bool,
        space: Space,
        bits: u8,
        d: Dst,
        a: Src,
    },
    /// `target`: instruction index; `rpc`: the reconvergence point (the
    /// branch's immediate post-dominator), [`NO_PC`] if none.
    Bra {
        target: u32,
        rpc: u32,
    },
    /// `bar.sync`/`barrier.sync` on barrier `id` for the whole block.
    Bar {
        id: Src,
    },
    /// `bar.warp.sync mask`.
    WarpSync {
        mask: Src,
    },
    Exit,
    Shfl {
        mode: ShflMode,
        d: Dst,
        p: Option<u32>,
        a: Src,
        b: Src,
        c: Src,
        mask: Option<Src>,
    },
    Vote {
        mode: VoteMode,
        d: VoteDst,
        a: PredSrc,
        mask: Option<Src>,
    },
    ActiveMask {
        d: Dst,
    },
    /// `membar`/`fence`: the emulator runs one thread at a time, so every
    /// access is already ordered.
    Fence,
    /// `cp.async.{ca,cg}.shared.global [dst], [src], size{, src_size}`:
    /// `size` bytes (4, 8 or 16) from global to shared memory, landing at
    /// a later `cp.async.wait_group`; bytes past `src_size` are zeros.
    CpAsync {
        size: u8,
        dst: Addr,
        src: Addr,
        src_size: Option<Src>,
    },
    /// `cp.async.commit_group`.
    CpAsyncCommit,
    /// `cp.async.wait_group n` (`all`: `cp.async.wait_all`, which also
    /// commits the open group and waits for every group).
    CpAsyncWait {
        n: u32,
        all: bool,
    },
}

/// Where `vote` writes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum VoteDst {
    Pred(u32),
    Reg(Dst),
}

/// A decoded instruction.
#[derive(Clone, Debug, PartialEq)]
pub(crate) struct Inst {
    pub op: Op,
    pub guard: Option<PredSrc>,
}

/// A kernel ready to run.
#[derive(Clone, Debug)]
pub(crate) struct Kernel {
    pub name: String,
    pub code: Vec<Inst>,
    /// PTX line of each instruction.
    pub lines: Vec<u32>,
    /// Text of each instruction, for messages.
    pub texts: Vec<String>,
    /// Value registers (64-bit slots) per thread.
    pub regs: usize,
    /// Predicate registers per thread.
    pub preds: usize,
    /// Byte offset and size of each parameter in the parameter space.
    pub params: Vec<(usize, usize)>,
    pub param_bytes: usize,
    pub shared_bytes: usize,
    pub local_bytes: usize,
    /// `.reqntid` / `.maxntid` of the entry.
    pub reqntid: Option<[u32; 3]>,
    pub maxntid: Option<[u32; 3]>,
}

/// A decoded module: every `.entry`.
#[derive(Clone, Debug)]
pub(crate) struct Program {
    pub kernels: Vec<Arc<Kernel>>,
}

impl Program {
    /// The index of kernel `name`.
    pub(crate) fn kernel(&self, name: &str) -> Option<usize> {
        self.kernels.iter().position(|k| k.name == name)
    }
}
