//! PTX syntax ([`crate::ptx`]) to the emulator's compact instruction form.
//!
//! Decoding happens once per module load: registers become indices into a
//! warp's register file, labels become instruction indices, symbols become
//! addresses, immediates become the bits the instruction's type reads, and
//! each opcode with its modifiers becomes one [`Op`] variant. Execution
//! ([`super::exec`]) then never looks at text. Anything outside the
//! supported subset is an [`Error::BadPtx`] naming the line, the instruction
//! and the part that is not supported; nothing is skipped silently.

use std::collections::BTreeMap;
use std::sync::Arc;

use super::cfg;
use crate::error::{Error, Result};
use crate::ptx::{self, Operand, Statement};

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
    fn parse(s: &str) -> Option<Ty> {
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

    fn is_int(self) -> bool {
        !self.is_float() && self != Ty::Pred
    }

    fn is_bits(self) -> bool {
        matches!(self, Ty::B8 | Ty::B16 | Ty::B32 | Ty::B64)
    }

    fn kind(self) -> IntKind {
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
    Int { op: IntOp, k: IntKind, d: Dst, a: Src, b: Src },
    IntUn { op: IntUnOp, k: IntKind, d: Dst, a: Src },
    /// `mad.lo`, `mad.hi`, `mad.wide`.
    Mad { hi: bool, wide: bool, k: IntKind, d: Dst, a: Src, b: Src, c: Src },
    Bfe { k: IntKind, d: Dst, a: Src, b: Src, c: Src },
    /// `shf.{l,r}.{clamp,wrap}.b32`: funnel shift of `b:a` (LLVM's rotates).
    Shf { left: bool, clamp: bool, d: Dst, a: Src, b: Src, c: Src },
    Bfi { bits: u8, d: Dst, a: Src, b: Src, c: Src, e: Src },
    Float { op: FloatOp, f64: bool, ftz: bool, sat: bool, d: Dst, a: Src, b: Src },
    FloatUn { op: FloatUnOp, f64: bool, ftz: bool, d: Dst, a: Src },
    Fma { f64: bool, ftz: bool, sat: bool, d: Dst, a: Src, b: Src, c: Src },
    Cvt { to: Ty, from: Ty, rnd: Rnd, sat: bool, ftz: bool, d: Dst, a: Src },
    /// A bit copy of `bits` bits.
    Mov { bits: u8, d: Dst, a: Src },
    /// `mov.b64 %rd, {%r1, %r2}`: parts from the least significant up.
    Pack { part_bits: u8, d: Dst, parts: Vec<Src> },
    /// `mov.b64 {%r1, %r2}, %rd`.
    Unpack { part_bits: u8, ds: Vec<Option<Dst>>, a: Src },
    Setp { cmp: Cmp, ty: Ty, ftz: bool, p: Option<u32>, q: Option<u32>, a: Src, b: Src, comb: Option<(BoolOp, PredSrc)> },
    Selp { bits: u8, d: Dst, a: Src, b: Src, c: PredSrc },
    /// `mov.pred`, `not.pred`.
    PredMov { d: u32, a: PredSrc },
    /// `and/or/xor.pred`.
    PredLogic { op: BoolOp, d: u32, a: PredSrc, b: PredSrc },
    /// `n` elements of `size` bytes each; `d[i]` is `None` for a sink.
    Ld { space: Space, size: u8, n: u8, nc: bool, d: [Option<Dst>; 4], addr: Addr },
    St { space: Space, size: u8, n: u8, v: [Src; 4], addr: Addr },
    Atom { space: Space, op: AtomOp, ty: Ty, d: Option<Dst>, addr: Addr, b: Src, c: Src },
    /// `red.global.add.v{2,4}.f32 [a], {b0, ..}` (sm_90, PTX 8.1): `n`
    /// consecutive `f32` atomic adds at `a`, which is aligned to their
    /// `4 n` bytes; one request per warp, as one vector access.
    RedV { n: u8, addr: Addr, b: [Src; 4] },
    Cvta { to_generic: bool, space: Space, bits: u8, d: Dst, a: Src },
    /// `target`: instruction index; `rpc`: the reconvergence point (the
    /// branch's immediate post-dominator), [`NO_PC`] if none.
    Bra { target: u32, rpc: u32 },
    /// `bar.sync`/`barrier.sync` on barrier `id` for the whole block.
    Bar { id: Src },
    /// `bar.warp.sync mask`.
    WarpSync { mask: Src },
    Exit,
    Shfl { mode: ShflMode, d: Dst, p: Option<u32>, a: Src, b: Src, c: Src, mask: Option<Src> },
    Vote { mode: VoteMode, d: VoteDst, a: PredSrc, mask: Option<Src> },
    ActiveMask { d: Dst },
    /// `membar`/`fence`: the emulator runs one thread at a time, so every
    /// access is already ordered.
    Fence,
    /// `cp.async.{ca,cg}.shared.global [dst], [src], size{, src_size}`:
    /// `size` bytes (4, 8 or 16) from global to shared memory, landing at
    /// a later `cp.async.wait_group`; bytes past `src_size` are zeros.
    CpAsync { size: u8, dst: Addr, src: Addr, src_size: Option<Src> },
    /// `cp.async.commit_group`.
    CpAsyncCommit,
    /// `cp.async.wait_group n` (`all`: `cp.async.wait_all`, which also
    /// commits the open group and waits for every group).
    CpAsyncWait { n: u32, all: bool },
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
    /// Parses and decodes a module.
    pub(crate) fn load(text: &str) -> Result<Program> {
        let module = ptx::parse(text).map_err(|e| Error::BadPtx(e.to_string()))?;
        if let Some(d) = module.directives.iter().find(|d| !matches!(d.name.as_str(), ".file" | ".loc")) {
            return Err(unsupported(d.line, &format!("the module-scope directive `{}`", d.name)));
        }
        let mut shared = Layout::default();
        for v in &module.variables {
            match v.space.as_str() {
                ".shared" => shared.add(v, None)?,
                _ => return Err(unsupported(v.line, &format!("module-scope `{}` variables (`{}`)", v.space, v.name))),
            }
        }
        let kernels = module
            .entries()
            .map(|f| decode_kernel(f, &shared).map(Arc::new))
            .collect::<Result<Vec<_>>>()?;
        Ok(Program { kernels })
    }

    /// The index of kernel `name`.
    pub(crate) fn kernel(&self, name: &str) -> Option<usize> {
        self.kernels.iter().position(|k| k.name == name)
    }
}

fn unsupported(line: u32, what: &str) -> Error {
    Error::BadPtx(format!("line {line}: the emulator does not support {what}"))
}

/// Variables of one state space laid out one after another.
#[derive(Clone, Debug, Default)]
struct Layout {
    bytes: usize,
    offsets: BTreeMap<String, usize>,
}

impl Layout {
    /// Lays out `v`, a variable of kernel `kernel` (`None`: of the module),
    /// refusing a `.shared` or `.local` space that grows past what a GPU
    /// allows ([`MAX_SHARED_BYTES`], [`MAX_LOCAL_BYTES`]).
    fn add(&mut self, v: &ptx::Variable, kernel: Option<&str>) -> Result<()> {
        let elem = type_bytes(&v.ty).ok_or_else(|| unsupported(v.line, &format!("variables of type `{}`", v.ty)))?
            * v.vector.unwrap_or(1) as usize;
        let mut count = 1usize;
        for d in &v.dims {
            let Some(n) = d else {
                return Err(unsupported(v.line, &format!("the unsized array `{}` (dynamic shared memory)", v.name)));
            };
            count = count.saturating_mul(usize::try_from(*n).unwrap_or(usize::MAX));
        }
        if v.initialized {
            return Err(unsupported(v.line, &format!("the initialised variable `{}`", v.name)));
        }
        let align = v.align.map_or(elem, |a| a as usize).max(1);
        let offset = self.bytes.div_ceil(align) * align;
        let size = elem.saturating_mul(count);
        self.bytes = offset.saturating_add(size);
        let (max, what) = match v.space.as_str() {
            ".shared" => (MAX_SHARED_BYTES, "shared memory per block (48 KiB, the static shared memory of every GPU)"),
            _ => (MAX_LOCAL_BYTES, "local memory per thread (512 KiB, CUDA's limit)"),
        };
        if self.bytes > max {
            let owner = kernel.map_or("the module".to_string(), |k| format!("kernel `{k}`"));
            return Err(Error::BadPtx(format!(
                "line {}: {owner}: `{} {}` ({size} bytes) brings its {} memory to {} bytes, more than the {max} bytes of {what}",
                v.line,
                v.space,
                v.name,
                &v.space[1..],
                self.bytes
            )));
        }
        if self.offsets.insert(v.name.clone(), offset).is_some() {
            return Err(Error::BadPtx(format!("line {}: `{}` is declared twice", v.line, v.name)));
        }
        Ok(())
    }
}

fn type_bytes(ty: &str) -> Option<usize> {
    Ty::parse(ty.trim_start_matches('.')).filter(|t| *t != Ty::Pred).map(|t| t.bits() as usize / 8)
}

/// What a register name stands for.
#[derive(Clone, Copy, Debug)]
enum RegInfo {
    Value { idx: u32, bits: u8 },
    Pred(u32),
}

/// What a symbol names: an address in a state space, or a label.
#[derive(Clone, Copy, Debug)]
enum Sym {
    Var(Space, usize),
    Label(u32),
}

struct Ctx<'a> {
    regs: BTreeMap<String, RegInfo>,
    nregs: u32,
    npreds: u32,
    /// A predicate register no instruction writes (always false): what a
    /// predicate immediate reads (`mov.pred %p1, 0;`, `xor.pred %p2, %p1,
    /// -1;`, as LLVM's NVPTX backend emits them).
    false_pred: u32,
    syms: BTreeMap<String, Sym>,
    line: u32,
    text: &'a str,
    opcode: &'a str,
}

fn decode_kernel(f: &ptx::Function, module_shared: &Layout) -> Result<Kernel> {
    let Some(body) = &f.body else {
        return Err(unsupported(f.line, &format!("the kernel declaration `{}` without a body", f.name)));
    };
    let mut cx = Ctx { regs: BTreeMap::new(), nregs: 0, npreds: 0, false_pred: 0, syms: BTreeMap::new(), line: f.line, text: "", opcode: "" };

    // Parameters: each at its alignment, as the driver lays them out.
    let mut params = Vec::new();
    let mut param_bytes = 0usize;
    for p in &f.params {
        let elem = type_bytes(&p.ty).ok_or_else(|| unsupported(p.line, &format!("parameters of type `{}`", p.ty)))?;
        let count = p.dims.iter().fold(1usize, |n, d| n.saturating_mul(d.map_or(0, |d| usize::try_from(d).unwrap_or(usize::MAX))));
        let size = elem.saturating_mul(count.max(1)).saturating_mul(p.vector.unwrap_or(1) as usize);
        let align = p.align.map_or(elem, |a| a as usize).max(1);
        let offset = param_bytes.div_ceil(align).saturating_mul(align);
        params.push((offset, size));
        param_bytes = offset.saturating_add(size);
        if param_bytes > MAX_PARAM_BYTES {
            return Err(Error::BadPtx(format!(
                "line {}: kernel `{}`: `.param {}` ({size} bytes) brings its parameters to {param_bytes} bytes, more than CUDA's limit of {MAX_PARAM_BYTES}",
                p.line, f.name, p.name
            )));
        }
        cx.syms.insert(p.name.clone(), Sym::Var(Space::Param, offset));
    }

    // Declarations, labels and instruction indices.
    let mut shared = module_shared.clone();
    let mut local = Layout::default();
    let mut insts = Vec::new();
    for s in body {
        match s {
            Statement::Var(v) => match v.space.as_str() {
                ".reg" => declare_regs(&mut cx, v, &f.name)?,
                ".shared" => shared.add(v, Some(&f.name))?,
                ".local" => local.add(v, Some(&f.name))?,
                _ => return Err(unsupported(v.line, &format!("`{}` declarations inside a kernel", v.space))),
            },
            Statement::Label { name, line } => {
                if cx.syms.insert(name.clone(), Sym::Label(insts.len() as u32)).is_some() {
                    return Err(Error::BadPtx(format!("line {line}: label `{name}` is defined twice")));
                }
            }
            Statement::Instruction(i) => insts.push(i),
            Statement::Directive(d) => {
                if !matches!(d.name.as_str(), ".pragma" | ".loc" | ".file") {
                    return Err(unsupported(d.line, &format!("the directive `{}` inside a kernel", d.name)));
                }
            }
        }
    }
    cx.false_pred = cx.npreds;
    cx.npreds += 1;
    for (name, off) in &shared.offsets {
        cx.syms.entry(name.clone()).or_insert(Sym::Var(Space::Shared, *off));
    }
    for (name, off) in &local.offsets {
        cx.syms.entry(name.clone()).or_insert(Sym::Var(Space::Local, *off));
    }

    let mut code = Vec::with_capacity(insts.len());
    for i in &insts {
        cx.line = i.line;
        cx.text = &i.text;
        cx.opcode = &i.opcode;
        let guard = match &i.guard {
            None => None,
            Some((neg, name)) => Some(PredSrc { idx: cx.pred_reg(name)?, neg: *neg }),
        };
        let op = cx.instruction(i)?;
        code.push(Inst { op, guard });
    }
    set_reconvergence_points(&mut code);

    let dims = |name: &str| -> Result<Option<[u32; 3]>> {
        match f.tuning.iter().find(|(n, _)| n == name) {
            None => Ok(None),
            Some((_, v)) if (1..=3).contains(&v.len()) => {
                let mut d = [1u32; 3];
                for (slot, x) in d.iter_mut().zip(v) {
                    *slot = u32::try_from(*x).unwrap_or(u32::MAX);
                }
                Ok(Some(d))
            }
            Some(_) => Err(Error::BadPtx(format!("line {}: `{name}` needs 1 to 3 dimensions", f.line))),
        }
    };
    for (name, _) in &f.tuning {
        if !matches!(name.as_str(), ".reqntid" | ".maxntid" | ".minnctapersm" | ".maxnreg" | ".noreturn" | ".maxnctapersm") {
            return Err(unsupported(f.line, &format!("the kernel directive `{name}`")));
        }
    }
    Ok(Kernel {
        name: f.name.clone(),
        lines: insts.iter().map(|i| i.line).collect(),
        texts: insts.iter().map(|i| i.text.clone()).collect(),
        code,
        regs: cx.nregs as usize,
        preds: cx.npreds as usize,
        params,
        param_bytes,
        shared_bytes: shared.bytes,
        local_bytes: local.bytes,
        reqntid: dims(".reqntid")?,
        maxntid: dims(".maxntid")?,
    })
}

fn declare_regs(cx: &mut Ctx<'_>, v: &ptx::Variable, kernel: &str) -> Result<()> {
    if v.vector.is_some() || !v.dims.is_empty() {
        return Err(unsupported(v.line, &format!("vector or array registers (`{}`)", v.name)));
    }
    let ty = Ty::parse(v.ty.trim_start_matches('.')).ok_or_else(|| unsupported(v.line, &format!("registers of type `{}`", v.ty)))?;
    // Checked before the names are made: `%rd<100000000>` would make 10^8.
    let total = (cx.nregs as usize + cx.npreds as usize).saturating_add(v.range.map_or(1, |n| n as usize));
    if total > MAX_REGISTERS {
        let decl = v.range.map_or(v.name.clone(), |n| format!("{}<{n}>", v.name));
        return Err(Error::BadPtx(format!(
            "line {}: kernel `{kernel}`: `.reg {} {decl}` brings its registers to {total}, more than the emulator's limit of {MAX_REGISTERS}",
            v.line, v.ty
        )));
    }
    let names: Vec<String> = match v.range {
        Some(n) => (0..n).map(|i| format!("{}{i}", v.name)).collect(),
        None => vec![v.name.clone()],
    };
    for name in names {
        let info = if ty == Ty::Pred {
            cx.npreds += 1;
            RegInfo::Pred(cx.npreds - 1)
        } else {
            cx.nregs += 1;
            RegInfo::Value { idx: cx.nregs - 1, bits: ty.bits() as u8 }
        };
        if cx.regs.insert(name.clone(), info).is_some() {
            return Err(Error::BadPtx(format!("line {}: register `{name}` is declared twice", v.line)));
        }
    }
    Ok(())
}

/// The modifiers of an opcode, consumed as the decoder recognises them;
/// any left over is reported.
struct Mods<'a> {
    items: Vec<&'a str>,
    used: Vec<bool>,
}

impl<'a> Mods<'a> {
    fn new(opcode: &'a str) -> (&'a str, Mods<'a>) {
        let mut parts = opcode.split('.');
        let base = parts.next().unwrap_or("");
        let items: Vec<&str> = parts.collect();
        let used = vec![false; items.len()];
        (base, Mods { items, used })
    }

    /// Consumes `m` if present.
    fn has(&mut self, m: &str) -> bool {
        match self.items.iter().position(|x| *x == m) {
            Some(i) if !self.used[i] => {
                self.used[i] = true;
                true
            }
            _ => false,
        }
    }

    /// Consumes the first unused modifier in `set`.
    fn one_of(&mut self, set: &[&'a str]) -> Option<&'a str> {
        let i = (0..self.items.len()).find(|&i| !self.used[i] && set.contains(&self.items[i]))?;
        self.used[i] = true;
        Some(self.items[i])
    }

    /// Consumes every modifier `keep` accepts (cache operators, memory
    /// ordering, scopes: nothing the emulator's one-thread-at-a-time
    /// execution distinguishes).
    fn drop_all(&mut self, keep: impl Fn(&str) -> bool) {
        for i in 0..self.items.len() {
            if !self.used[i] && keep(self.items[i]) {
                self.used[i] = true;
            }
        }
    }

    /// Consumes the type modifiers, in order.
    fn types(&mut self) -> Vec<Result<Ty, &'a str>> {
        let mut out = Vec::new();
        for i in 0..self.items.len() {
            if self.used[i] {
                continue;
            }
            let m = self.items[i];
            if let Some(t) = Ty::parse(m) {
                self.used[i] = true;
                out.push(Ok(t));
            } else if matches!(m, "f16" | "f16x2" | "bf16" | "bf16x2" | "b128" | "tf32" | "u16x2" | "s16x2" | "f32x2") {
                self.used[i] = true;
                out.push(Err(m));
            }
        }
        out
    }

    fn left(&self) -> Option<&'a str> {
        (0..self.items.len()).find(|&i| !self.used[i]).map(|i| self.items[i])
    }
}

/// Cache, eviction and memory-ordering qualifiers of loads, stores and
/// atomics, which the emulator's sequential execution makes moot.
fn is_ordering_or_cache(m: &str) -> bool {
    matches!(
        m,
        "ca" | "cg" | "cs" | "lu" | "cv" | "wb" | "wt" | "volatile" | "relaxed" | "acquire" | "release" | "acq_rel"
            | "weak" | "cta" | "gpu" | "sys"
    ) || ((m.starts_with("L1::") || m.starts_with("L2::")) && m != "L2::cache_hint")
}

impl<'a> Ctx<'a> {
    fn err(&self, what: String) -> Error {
        Error::BadPtx(format!("line {}: {what} (in `{}`)", self.line, self.text))
    }

    fn unsupported(&self, what: &str) -> Error {
        self.err(format!("the emulator does not support {what}"))
    }

    fn pred_reg(&self, name: &str) -> Result<u32> {
        match self.regs.get(name) {
            Some(RegInfo::Pred(i)) => Ok(*i),
            Some(RegInfo::Value { .. }) => Err(self.err(format!("`{name}` is not a predicate register"))),
            None => Err(self.err(format!("undeclared register `{name}`"))),
        }
    }

    fn pred_src(&self, o: &Operand) -> Result<PredSrc> {
        match o {
            Operand::Reg(r) => Ok(PredSrc { idx: self.pred_reg(r)?, neg: false }),
            // An immediate: 0 is false, anything else true.
            Operand::Int(v) => Ok(PredSrc { idx: self.false_pred, neg: *v != 0 }),
            Operand::Not(inner) => match inner.as_ref() {
                Operand::Reg(r) => Ok(PredSrc { idx: self.pred_reg(r)?, neg: true }),
                _ => Err(self.err(format!("`{o}` is not a predicate"))),
            },
            _ => Err(self.err(format!("`{o}` is not a predicate"))),
        }
    }

    fn pred_dst(&self, o: &Operand) -> Result<Option<u32>> {
        match o {
            Operand::Sink => Ok(None),
            Operand::Reg(r) => Ok(Some(self.pred_reg(r)?)),
            _ => Err(self.err(format!("`{o}` is not a predicate register"))),
        }
    }

    fn value_reg(&self, name: &str) -> Result<(u32, u8)> {
        match self.regs.get(name) {
            Some(RegInfo::Value { idx, bits }) => Ok((*idx, *bits)),
            Some(RegInfo::Pred(_)) => Err(self.err(format!("the predicate `{name}` is used as a value"))),
            None => Err(self.err(format!("undeclared register `{name}`"))),
        }
    }

    /// A destination register of an instruction of type `ty`.
    fn dst(&self, o: &Operand, ty: Ty) -> Result<Dst> {
        let Operand::Reg(r) = o else {
            return Err(self.err(format!("the destination `{o}` is not a register")));
        };
        let (reg, reg_bits) = self.value_reg(r)?;
        let bits = ty.bits() as u8;
        if reg_bits < bits {
            return Err(self.err(format!("`{r}` has {reg_bits} bits, too few for .{}", ty_name(ty))));
        }
        let sext = if ty.is_signed() && reg_bits > bits { bits } else { 0 };
        Ok(Dst { reg, sext, reg_bits })
    }

    fn dst_or_sink(&self, o: &Operand, ty: Ty) -> Result<Option<Dst>> {
        match o {
            Operand::Sink => Ok(None),
            _ => self.dst(o, ty).map(Some),
        }
    }

    /// A source operand read as type `ty`.
    fn src(&self, o: &Operand, ty: Ty) -> Result<Src> {
        let bits = ty.bits();
        let mask = |v: u64| if bits >= 64 { v } else { v & ((1u64 << bits) - 1) };
        match o {
            Operand::Reg(r) => {
                if let Some(s) = special(r) {
                    return Ok(Src::Special(s));
                }
                if !self.regs.contains_key(r.as_str()) && is_special_name(r) {
                    return Err(self.unsupported(&format!("the special register `{r}`")));
                }
                let (idx, reg_bits) = self.value_reg(r)?;
                if u32::from(reg_bits) < bits {
                    return Err(self.err(format!("`{r}` has {reg_bits} bits, too few for .{}", ty_name(ty))));
                }
                Ok(Src::Reg(idx))
            }
            Operand::Int(v) => Ok(Src::Imm(match ty {
                Ty::F32 => (*v as f32).to_bits() as u64,
                Ty::F64 => (*v as f64).to_bits(),
                _ => mask(*v as u64),
            })),
            Operand::F32(b) => Ok(Src::Imm(match ty {
                Ty::F64 => f64::from(f32::from_bits(*b)).to_bits(),
                _ => mask(u64::from(*b)),
            })),
            Operand::F64(b) => Ok(Src::Imm(match ty {
                Ty::F32 => (f64::from_bits(*b) as f32).to_bits() as u64,
                _ => mask(*b),
            })),
            Operand::Float(x) => match ty {
                Ty::F32 => Ok(Src::Imm((*x as f32).to_bits() as u64)),
                Ty::F64 => Ok(Src::Imm(x.to_bits())),
                _ => Err(self.err(format!("the floating-point literal `{o}` needs a floating-point type"))),
            },
            Operand::Symbol { name, offset } => match self.syms.get(name) {
                Some(Sym::Var(_, addr)) => Ok(Src::Imm(mask((*addr as u64).wrapping_add(*offset as u64)))),
                Some(Sym::Label(_)) => Err(self.err(format!("the label `{name}` is used as a value"))),
                None => Err(self.err(format!("undeclared symbol `{name}`"))),
            },
            _ => Err(self.err(format!("`{o}` is not a value operand"))),
        }
    }

    /// The address operand of a memory instruction in `space`.
    fn addr(&self, o: &Operand, space: Space) -> Result<Addr> {
        let Operand::Address { base, offset } = o else {
            return Err(self.err(format!("`{o}` is not an address `[...]`")));
        };
        let Some(base) = base else {
            return Ok(Addr { base: None, offset: *offset });
        };
        if base.starts_with('%') {
            let (idx, _) = self.value_reg(base)?;
            return Ok(Addr { base: Some(idx), offset: *offset });
        }
        match self.syms.get(base.as_str()) {
            Some(Sym::Var(s, a)) if *s == space => Ok(Addr { base: None, offset: *a as i64 + offset }),
            Some(Sym::Var(Space::Shared, a)) if space == Space::Generic => {
                Ok(Addr { base: None, offset: (SHARED_WINDOW + *a as u64) as i64 + offset })
            }
            Some(Sym::Var(Space::Local, a)) if space == Space::Generic => {
                Ok(Addr { base: None, offset: (LOCAL_WINDOW + *a as u64) as i64 + offset })
            }
            Some(Sym::Var(s, _)) => {
                Err(self.err(format!("`{base}` is in the {} space, the instruction accesses {}", s.name(), space.name())))
            }
            Some(Sym::Label(_)) => Err(self.err(format!("the label `{base}` is used as an address"))),
            None => Err(self.err(format!("undeclared symbol `{base}`"))),
        }
    }

    fn operands<const N: usize>(&self, i: &'a ptx::Instruction) -> Result<&'a [Operand; N]> {
        i.operands.as_slice().try_into().map_err(|_| {
            self.err(format!("`{}` takes {N} operands, {} given", i.opcode, i.operands.len()))
        })
    }

    /// The one type modifier of an instruction that takes one.
    fn one_type(&self, m: &mut Mods<'a>) -> Result<Ty> {
        let types = m.types();
        match types.as_slice() {
            [Ok(t)] => Ok(*t),
            [Err(t)] => Err(self.unsupported(&format!("the type `.{t}`"))),
            [] => Err(self.err(format!("`{}` has no type", self.opcode))),
            _ => Err(self.err(format!("`{}` has more than one type", self.opcode))),
        }
    }

    fn finish(&self, m: &Mods<'a>) -> Result<()> {
        match m.left() {
            None => Ok(()),
            Some(x) => Err(self.unsupported(&format!("`.{x}` on `{}`", self.opcode))),
        }
    }

    fn instruction(&self, i: &'a ptx::Instruction) -> Result<Op> {
        let (base, mut m) = Mods::new(&i.opcode);
        let m = &mut m;
        let op = match base {
            "add" | "sub" | "mul" | "div" | "rem" | "min" | "max" | "and" | "or" | "xor" | "shl" | "shr" => self.binary(base, m, i)?,
            "mad" | "fma" => self.mad(base, m, i)?,
            "neg" | "abs" | "not" | "cnot" | "popc" | "clz" | "brev" => self.unary(base, m, i)?,
            "sqrt" | "rcp" | "rsqrt" | "sin" | "cos" | "lg2" | "ex2" | "tanh" => self.float_unary(base, m, i)?,
            "bfe" => {
                let ty = self.one_type(m)?;
                if !matches!(ty, Ty::U32 | Ty::S32 | Ty::U64 | Ty::S64) {
                    return Err(self.unsupported(&format!("`bfe.{}`", ty_name(ty))));
                }
                let [d, a, b, c] = self.operands(i)?;
                Op::Bfe { k: ty.kind(), d: self.dst(d, ty)?, a: self.src(a, ty)?, b: self.src(b, Ty::U32)?, c: self.src(c, Ty::U32)? }
            }
            "shf" => {
                let left = match (m.has("l"), m.has("r")) {
                    (true, false) => true,
                    (false, true) => false,
                    _ => return Err(self.unsupported(&format!("`{}`", i.opcode))),
                };
                let clamp = match (m.has("clamp"), m.has("wrap")) {
                    (true, false) => true,
                    (false, true) => false,
                    _ => return Err(self.unsupported(&format!("`{}`", i.opcode))),
                };
                let ty = self.one_type(m)?;
                if ty != Ty::B32 {
                    return Err(self.unsupported(&format!("`shf.{}`", ty_name(ty))));
                }
                let [d, a, b, c] = self.operands(i)?;
                Op::Shf { left, clamp, d: self.dst(d, ty)?, a: self.src(a, ty)?, b: self.src(b, ty)?, c: self.src(c, Ty::U32)? }
            }
            "bfi" => {
                let ty = self.one_type(m)?;
                if !matches!(ty, Ty::B32 | Ty::B64) {
                    return Err(self.unsupported(&format!("`bfi.{}`", ty_name(ty))));
                }
                let [d, a, b, c, e] = self.operands(i)?;
                Op::Bfi {
                    bits: ty.bits() as u8,
                    d: self.dst(d, ty)?,
                    a: self.src(a, ty)?,
                    b: self.src(b, ty)?,
                    c: self.src(c, Ty::U32)?,
                    e: self.src(e, Ty::U32)?,
                }
            }
            "mov" => self.mov(m, i)?,
            "cvt" => self.cvt(m, i)?,
            "cvta" => {
                let to_generic = !m.has("to");
                let space = self.space(m)?;
                if !matches!(space, Space::Global | Space::Shared | Space::Local) {
                    return Err(self.unsupported(&format!("`cvta` for the {} space", space.name())));
                }
                let ty = self.one_type(m)?;
                if !matches!(ty, Ty::U32 | Ty::U64) {
                    return Err(self.unsupported(&format!("`cvta.{}`", ty_name(ty))));
                }
                let [d, a] = self.operands(i)?;
                Op::Cvta { to_generic, space, bits: ty.bits() as u8, d: self.dst(d, ty)?, a: self.src(a, ty)? }
            }
            "setp" => self.setp(m, i)?,
            "selp" => {
                let ty = self.one_type(m)?;
                let [d, a, b, c] = self.operands(i)?;
                Op::Selp { bits: ty.bits() as u8, d: self.dst(d, ty)?, a: self.src(a, ty)?, b: self.src(b, ty)?, c: self.pred_src(c)? }
            }
            "ld" | "ldu" => self.load(m, i)?,
            "st" => self.store(m, i)?,
            "atom" | "red" => self.atom(base == "atom", m, i)?,
            "bra" => {
                m.has("uni");
                let [target] = self.operands(i)?;
                let Operand::Symbol { name, offset: 0 } = target else {
                    return Err(self.err(format!("`{target}` is not a label")));
                };
                match self.syms.get(name.as_str()) {
                    Some(Sym::Label(pc)) => Op::Bra { target: *pc, rpc: NO_PC },
                    _ => return Err(self.err(format!("undefined label `{name}`"))),
                }
            }
            "ret" | "exit" => {
                m.has("uni");
                self.operands::<0>(i)?;
                Op::Exit
            }
            "bar" | "barrier" => {
                m.has("cta");
                if m.has("warp") {
                    m.has("sync");
                    self.finish(m)?;
                    let [mask] = self.operands(i)?;
                    return Ok(Op::WarpSync { mask: self.src(mask, Ty::B32)? });
                }
                // `bar.sync` is `barrier.sync.aligned`; `.arrive` and `.red`
                // stay unconsumed and are reported below.
                if !m.has("sync") {
                    return Err(self.unsupported(&format!("`{}`", i.opcode)));
                }
                m.has("aligned");
                match i.operands.as_slice() {
                    [id] => Op::Bar { id: self.src(id, Ty::U32)? },
                    [_, _] => return Err(self.unsupported("barriers with a thread count")),
                    _ => return Err(self.err(format!("`{}` takes a barrier number", i.opcode))),
                }
            }
            "membar" | "fence" => {
                m.drop_all(|x| matches!(x, "cta" | "gl" | "sys" | "gpu" | "sc" | "acq_rel"));
                self.operands::<0>(i)?;
                Op::Fence
            }
            "cp" if m.has("async") => self.cp_async(m, i)?,
            "shfl" => self.shfl(m, i)?,
            "vote" => self.vote(m, i)?,
            "activemask" => {
                self.one_type(m)?;
                let [d] = self.operands(i)?;
                Op::ActiveMask { d: self.dst(d, Ty::B32)? }
            }
            _ => return Err(self.unsupported(&format!("the instruction `{}`", i.opcode))),
        };
        self.finish(m)?;
        Ok(op)
    }

    fn space(&self, m: &mut Mods<'a>) -> Result<Space> {
        match m.one_of(&["global", "shared", "shared::cta", "local", "param", "param::entry", "const", "shared::cluster", "param::func"]) {
            None => Ok(Space::Generic),
            Some("global") => Ok(Space::Global),
            Some("shared") | Some("shared::cta") => Ok(Space::Shared),
            Some("local") => Ok(Space::Local),
            Some("param") | Some("param::entry") => Ok(Space::Param),
            Some(other) => Err(self.unsupported(&format!("the `.{other}` state space"))),
        }
    }

    /// Rounding modifiers of arithmetic: `.rn` (the default) only.
    fn float_rounding(&self, m: &mut Mods<'a>) -> Result<()> {
        match m.one_of(&["rn", "rz", "rm", "rp"]) {
            None | Some("rn") => Ok(()),
            Some(r) => Err(self.unsupported(&format!("the rounding modifier `.{r}` on `{}`", self.opcode))),
        }
    }

    fn binary(&self, base: &str, m: &mut Mods<'a>, i: &'a ptx::Instruction) -> Result<Op> {
        let lo = m.has("lo");
        let hi = m.has("hi");
        let wide = m.has("wide");
        let approx = m.has("approx");
        let full = m.has("full");
        let nan = m.has("NaN");
        let ftz = m.has("ftz");
        let sat = m.has("sat");
        let has_rnd = m.items.iter().any(|x| matches!(*x, "rn" | "rz" | "rm" | "rp"));
        self.float_rounding(m)?;
        let ty = self.one_type(m)?;
        let [d, a, b] = self.operands(i)?;
        if ty == Ty::Pred {
            let op = match base {
                "and" => BoolOp::And,
                "or" => BoolOp::Or,
                "xor" => BoolOp::Xor,
                _ => return Err(self.unsupported(&format!("`{}`", i.opcode))),
            };
            let Some(dp) = self.pred_dst(d)? else { return Err(self.err("a predicate sink".into())) };
            return Ok(Op::PredLogic { op, d: dp, a: self.pred_src(a)?, b: self.pred_src(b)? });
        }
        if ty.is_float() {
            let f64 = ty == Ty::F64;
            if f64 && (ftz || sat) || lo || hi || wide {
                return Err(self.unsupported(&format!("`{}`", i.opcode)));
            }
            let op = match (base, approx, full, nan) {
                ("add", false, false, false) => FloatOp::Add,
                ("sub", false, false, false) => FloatOp::Sub,
                ("mul", false, false, false) => FloatOp::Mul,
                ("div", false, false, false) if has_rnd => FloatOp::Div,
                // div.full's error bound (2 ulp) admits the IEEE quotient.
                ("div", false, true, false) if !f64 => FloatOp::Div,
                ("div", true, false, false) if !f64 => FloatOp::DivApprox,
                ("min", false, false, false) => FloatOp::Min,
                ("max", false, false, false) => FloatOp::Max,
                ("min", false, false, true) if !f64 => FloatOp::MinNan,
                ("max", false, false, true) if !f64 => FloatOp::MaxNan,
                _ => return Err(self.unsupported(&format!("`{}`", i.opcode))),
            };
            if sat && !matches!(op, FloatOp::Add | FloatOp::Sub | FloatOp::Mul) {
                return Err(self.unsupported(&format!("`.sat` on `{}`", i.opcode)));
            }
            return Ok(Op::Float { op, f64, ftz, sat, d: self.dst(d, ty)?, a: self.src(a, ty)?, b: self.src(b, ty)? });
        }
        if approx || full || nan || ftz || sat || has_rnd {
            return Err(self.unsupported(&format!("`{}`", i.opcode)));
        }
        let op = match base {
            "add" => IntOp::Add,
            "sub" => IntOp::Sub,
            "mul" if wide => IntOp::MulWide,
            "mul" if hi => IntOp::MulHi,
            "mul" if lo => IntOp::MulLo,
            "div" => IntOp::Div,
            "rem" => IntOp::Rem,
            "min" => IntOp::Min,
            "max" => IntOp::Max,
            "and" => IntOp::And,
            "or" => IntOp::Or,
            "xor" => IntOp::Xor,
            "shl" => IntOp::Shl,
            "shr" => IntOp::Shr,
            _ => return Err(self.err(format!("`{}` needs `.lo`, `.hi` or `.wide`", i.opcode))),
        };
        if (lo || hi || wide) && base != "mul" {
            return Err(self.unsupported(&format!("`{}`", i.opcode)));
        }
        let logic = matches!(op, IntOp::And | IntOp::Or | IntOp::Xor | IntOp::Shl);
        if ty.bits() < 16 || (logic && !ty.is_bits()) || (!logic && op != IntOp::Shr && ty.is_bits()) {
            return Err(self.unsupported(&format!("`{}`", i.opcode)));
        }
        if op == IntOp::MulWide && ty.bits() > 32 {
            return Err(self.err("`.wide` is for 16- and 32-bit types".into()));
        }
        let dty = if op == IntOp::MulWide { widen(ty) } else { ty };
        // Shift amounts are .u32 whatever the shifted type.
        let bty = if matches!(op, IntOp::Shl | IntOp::Shr) { Ty::U32 } else { ty };
        Ok(Op::Int { op, k: ty.kind(), d: self.dst(d, dty)?, a: self.src(a, ty)?, b: self.src(b, bty)? })
    }

    fn mad(&self, base: &str, m: &mut Mods<'a>, i: &'a ptx::Instruction) -> Result<Op> {
        let lo = m.has("lo");
        let hi = m.has("hi");
        let wide = m.has("wide");
        let ftz = m.has("ftz");
        let sat = m.has("sat");
        let rnd = m.one_of(&["rn", "rz", "rm", "rp"]);
        let ty = self.one_type(m)?;
        let [d, a, b, c] = self.operands(i)?;
        if ty.is_float() {
            let f64 = ty == Ty::F64;
            match rnd {
                Some("rn") => {}
                Some(r) => return Err(self.unsupported(&format!("the rounding modifier `.{r}` on `{}`", i.opcode))),
                None => return Err(self.err(format!("`{}` needs a rounding modifier", i.opcode))),
            }
            if lo || hi || wide || (f64 && (ftz || sat)) {
                return Err(self.unsupported(&format!("`{}`", i.opcode)));
            }
            return Ok(Op::Fma { f64, ftz, sat, d: self.dst(d, ty)?, a: self.src(a, ty)?, b: self.src(b, ty)?, c: self.src(c, ty)? });
        }
        if base == "fma" || rnd.is_some() || ftz || sat || !ty.is_int() || ty.is_bits() || ty.bits() < 16 || lo as u8 + hi as u8 + wide as u8 != 1 {
            return Err(self.unsupported(&format!("`{}`", i.opcode)));
        }
        if wide && ty.bits() > 32 {
            return Err(self.err("`.wide` is for 16- and 32-bit types".into()));
        }
        let dty = if wide { widen(ty) } else { ty };
        Ok(Op::Mad { hi, wide, k: ty.kind(), d: self.dst(d, dty)?, a: self.src(a, ty)?, b: self.src(b, ty)?, c: self.src(c, dty)? })
    }

    fn unary(&self, base: &str, m: &mut Mods<'a>, i: &'a ptx::Instruction) -> Result<Op> {
        let ftz = m.has("ftz");
        let ty = self.one_type(m)?;
        let [d, a] = self.operands(i)?;
        if ty == Ty::Pred {
            if base != "not" {
                return Err(self.unsupported(&format!("`{}`", i.opcode)));
            }
            let Some(dp) = self.pred_dst(d)? else { return Err(self.err("a predicate sink".into())) };
            let mut a = self.pred_src(a)?;
            a.neg = !a.neg;
            return Ok(Op::PredMov { d: dp, a });
        }
        if ty.is_float() {
            let op = match base {
                "neg" => FloatUnOp::Neg,
                "abs" => FloatUnOp::Abs,
                _ => return Err(self.unsupported(&format!("`{}`", i.opcode))),
            };
            if ftz && ty == Ty::F64 {
                return Err(self.unsupported(&format!("`{}`", i.opcode)));
            }
            return Ok(Op::FloatUn { op, f64: ty == Ty::F64, ftz, d: self.dst(d, ty)?, a: self.src(a, ty)? });
        }
        let (op, ok) = match base {
            "neg" => (IntUnOp::Neg, ty.is_signed()),
            "abs" => (IntUnOp::Abs, ty.is_signed()),
            "not" => (IntUnOp::Not, ty.is_bits()),
            "cnot" => (IntUnOp::Cnot, ty.is_bits()),
            "popc" => (IntUnOp::Popc, matches!(ty, Ty::B32 | Ty::B64)),
            "clz" => (IntUnOp::Clz, matches!(ty, Ty::B32 | Ty::B64)),
            _ => (IntUnOp::Brev, matches!(ty, Ty::B32 | Ty::B64)),
        };
        if !ok || ftz || ty.bits() < 16 {
            return Err(self.unsupported(&format!("`{}`", i.opcode)));
        }
        // popc and clz write a .u32 count.
        let dty = if matches!(op, IntUnOp::Popc | IntUnOp::Clz) { Ty::U32 } else { ty };
        Ok(Op::IntUn { op, k: ty.kind(), d: self.dst(d, dty)?, a: self.src(a, ty)? })
    }

    fn float_unary(&self, base: &str, m: &mut Mods<'a>, i: &'a ptx::Instruction) -> Result<Op> {
        let approx = m.has("approx");
        let ftz = m.has("ftz");
        let rnd = m.one_of(&["rn", "rz", "rm", "rp"]);
        let ty = self.one_type(m)?;
        let [d, a] = self.operands(i)?;
        let f64 = match ty {
            Ty::F32 => false,
            Ty::F64 => true,
            _ => return Err(self.unsupported(&format!("`{}`", i.opcode))),
        };
        let op = match (base, approx, rnd) {
            ("sqrt", true, None) if !f64 => FloatUnOp::Sqrt,
            ("sqrt", false, Some("rn")) => FloatUnOp::Sqrt,
            ("rcp", true, None) if !f64 || ftz => FloatUnOp::Rcp,
            ("rcp", false, Some("rn")) => FloatUnOp::Rcp,
            ("rsqrt", true, None) => FloatUnOp::Rsqrt,
            ("sin", true, None) if !f64 => FloatUnOp::Sin,
            ("cos", true, None) if !f64 => FloatUnOp::Cos,
            ("lg2", true, None) if !f64 => FloatUnOp::Lg2,
            ("ex2", true, None) if !f64 => FloatUnOp::Ex2,
            ("tanh", true, None) if !f64 && !ftz => FloatUnOp::Tanh,
            _ => return Err(self.unsupported(&format!("`{}`", i.opcode))),
        };
        // `.ftz` on f64 exists only for rcp/rsqrt.approx.ftz.f64.
        if f64 && ftz && !approx {
            return Err(self.unsupported(&format!("`{}`", i.opcode)));
        }
        Ok(Op::FloatUn { op, f64, ftz, d: self.dst(d, ty)?, a: self.src(a, ty)? })
    }

    fn mov(&self, m: &mut Mods<'a>, i: &'a ptx::Instruction) -> Result<Op> {
        let ty = self.one_type(m)?;
        let [d, a] = self.operands(i)?;
        if ty == Ty::Pred {
            let Some(dp) = self.pred_dst(d)? else { return Err(self.err("a predicate sink".into())) };
            return Ok(Op::PredMov { d: dp, a: self.pred_src(a)? });
        }
        let bits = ty.bits();
        match (d, a) {
            (_, Operand::Vector(parts)) => {
                let part = part_type(bits / parts.len().max(1) as u32).filter(|_| bits % parts.len() as u32 == 0);
                let Some(pt) = part.filter(|_| matches!(parts.len(), 2 | 4)) else {
                    return Err(self.unsupported(&format!("packing {} values into .{}", parts.len(), ty_name(ty))));
                };
                let parts = parts.iter().map(|p| self.src(p, pt)).collect::<Result<Vec<_>>>()?;
                Ok(Op::Pack { part_bits: pt.bits() as u8, d: self.dst(d, ty)?, parts })
            }
            (Operand::Vector(parts), _) => {
                let part = part_type(bits / parts.len().max(1) as u32).filter(|_| bits % parts.len() as u32 == 0);
                let Some(pt) = part.filter(|_| matches!(parts.len(), 2 | 4)) else {
                    return Err(self.unsupported(&format!("unpacking .{} into {} values", ty_name(ty), parts.len())));
                };
                let ds = parts.iter().map(|p| self.dst_or_sink(p, pt)).collect::<Result<Vec<_>>>()?;
                Ok(Op::Unpack { part_bits: pt.bits() as u8, ds, a: self.src(a, ty)? })
            }
            _ => Ok(Op::Mov { bits: bits as u8, d: self.dst(d, ty)?, a: self.src(a, ty)? }),
        }
    }

    fn cvt(&self, m: &mut Mods<'a>, i: &'a ptx::Instruction) -> Result<Op> {
        let ftz = m.has("ftz");
        let sat = m.has("sat");
        let rnd = match m.one_of(&["rn", "rz", "rm", "rp", "rni", "rzi", "rmi", "rpi", "rna", "rs"]) {
            None => Rnd::None,
            Some("rn") => Rnd::Rn,
            Some("rz") => Rnd::Rz,
            Some("rm") => Rnd::Rm,
            Some("rp") => Rnd::Rp,
            Some("rni") => Rnd::Rni,
            Some("rzi") => Rnd::Rzi,
            Some("rmi") => Rnd::Rmi,
            Some("rpi") => Rnd::Rpi,
            Some(r) => return Err(self.unsupported(&format!("the rounding modifier `.{r}`"))),
        };
        let types = m.types();
        let (to, from) = match types.as_slice() {
            [Ok(to), Ok(from)] => (*to, *from),
            [..] if types.iter().any(|t| t.is_err()) => {
                let bad = types.iter().find_map(|t| t.err()).unwrap_or("?");
                return Err(self.unsupported(&format!("conversions of `.{bad}`")));
            }
            _ => return Err(self.err("`cvt` needs a destination and a source type".into())),
        };
        if to == Ty::Pred || from == Ty::Pred || to.is_bits() || from.is_bits() {
            return Err(self.unsupported(&format!("`{}`", i.opcode)));
        }
        let int_rnd = matches!(rnd, Rnd::Rni | Rnd::Rzi | Rnd::Rmi | Rnd::Rpi);
        let float_rnd = matches!(rnd, Rnd::Rn | Rnd::Rz | Rnd::Rm | Rnd::Rp);
        // The ISA's rules for which rounding a conversion must and may have.
        let ok = match (from.is_float(), to.is_float()) {
            (true, false) => int_rnd,
            (false, true) => float_rnd,
            (true, true) if to.bits() < from.bits() => float_rnd,
            (true, true) if to.bits() > from.bits() => rnd == Rnd::None,
            (true, true) => rnd == Rnd::None || int_rnd,
            (false, false) => rnd == Rnd::None,
        };
        if !ok {
            let what = if rnd == Rnd::None { "no rounding modifier" } else { "this rounding modifier" };
            return Err(self.err(format!("`{}` has {what}; the PTX ISA requires integer rounding (.rni/.rzi/.rmi/.rpi) from float to integer, float rounding (.rn/.rz/.rm/.rp) from integer to float and to a narrower float", i.opcode)));
        }
        if ftz && to != Ty::F32 && from != Ty::F32 {
            return Err(self.err("`.ftz` needs an .f32 source or destination".into()));
        }
        let [d, a] = self.operands(i)?;
        Ok(Op::Cvt { to, from, rnd, sat, ftz, d: self.dst(d, to)?, a: self.src(a, from)? })
    }

    fn setp(&self, m: &mut Mods<'a>, i: &'a ptx::Instruction) -> Result<Op> {
        let cmp = match m.one_of(&["eq", "ne", "lt", "le", "gt", "ge", "lo", "ls", "hi", "hs", "equ", "neu", "ltu", "leu", "gtu", "geu", "num", "nan"]) {
            Some("eq") => Cmp::Eq,
            Some("ne") => Cmp::Ne,
            Some("lt") | Some("lo") => Cmp::Lt,
            Some("le") | Some("ls") => Cmp::Le,
            Some("gt") | Some("hi") => Cmp::Gt,
            Some("ge") | Some("hs") => Cmp::Ge,
            Some("equ") => Cmp::Equ,
            Some("neu") => Cmp::Neu,
            Some("ltu") => Cmp::Ltu,
            Some("leu") => Cmp::Leu,
            Some("gtu") => Cmp::Gtu,
            Some("geu") => Cmp::Geu,
            Some("num") => Cmp::Num,
            Some("nan") => Cmp::Nan,
            _ => return Err(self.err("`setp` needs a comparison".into())),
        };
        let spelled_unsigned = i.opcode.split('.').any(|x| matches!(x, "lo" | "ls" | "hi" | "hs"));
        let bool_op = match m.one_of(&["and", "or", "xor"]) {
            Some("and") => Some(BoolOp::And),
            Some("or") => Some(BoolOp::Or),
            Some("xor") => Some(BoolOp::Xor),
            _ => None,
        };
        let ftz = m.has("ftz");
        let ty = self.one_type(m)?;
        let unordered = matches!(cmp, Cmp::Equ | Cmp::Neu | Cmp::Ltu | Cmp::Leu | Cmp::Gtu | Cmp::Geu | Cmp::Num | Cmp::Nan);
        let bad = ty == Ty::Pred
            || (!ty.is_float() && (unordered || ftz))
            || (ty.is_bits() && !matches!(cmp, Cmp::Eq | Cmp::Ne))
            || (spelled_unsigned && ty.is_signed())
            || (ftz && ty == Ty::F64)
            || ty.bits() < 16;
        if bad {
            return Err(self.unsupported(&format!("`{}`", i.opcode)));
        }
        let (dest, a, b, c) = match (bool_op, i.operands.as_slice()) {
            (None, [d, a, b]) => (d, a, b, None),
            (Some(_), [d, a, b, c]) => (d, a, b, Some(c)),
            _ => return Err(self.err(format!("wrong number of operands for `{}`", i.opcode))),
        };
        let (p, q) = match dest {
            Operand::Pair(p, q) => (
                self.pred_dst(&Operand::Reg(p.clone()))?,
                if q == "_" { None } else { self.pred_dst(&Operand::Reg(q.clone()))? },
            ),
            _ => (self.pred_dst(dest)?, None),
        };
        let comb = match (bool_op, c) {
            (Some(op), Some(c)) => Some((op, self.pred_src(c)?)),
            _ => None,
        };
        Ok(Op::Setp { cmp, ty, ftz, p, q, a: self.src(a, ty)?, b: self.src(b, ty)?, comb })
    }

    /// `.v2`/`.v4` and the element type of a load or store.
    fn vector_type(&self, m: &mut Mods<'a>) -> Result<(u8, Ty)> {
        let n = match m.one_of(&["v2", "v4", "v8"]) {
            None => 1,
            Some("v2") => 2,
            Some("v4") => 4,
            Some(_) => return Err(self.unsupported("`.v8` accesses")),
        };
        let ty = self.one_type(m)?;
        if ty == Ty::Pred {
            return Err(self.unsupported("predicate loads and stores"));
        }
        if n * ty.bits() > 128 {
            return Err(self.err(format!("a vector of {n} .{} exceeds 128 bits", ty_name(ty))));
        }
        Ok((n as u8, ty))
    }

    fn load(&self, m: &mut Mods<'a>, i: &'a ptx::Instruction) -> Result<Op> {
        let space = self.space(m)?;
        let nc = m.has("nc");
        if nc && space != Space::Global {
            return Err(self.err("`.nc` loads are from the global space".into()));
        }
        m.drop_all(is_ordering_or_cache);
        let (n, ty) = self.vector_type(m)?;
        let [d, a] = self.operands(i)?;
        let dsts: Vec<&Operand> = match d {
            Operand::Vector(v) if n > 1 && v.len() == n as usize => v.iter().collect(),
            _ if n == 1 => vec![d],
            _ => return Err(self.err(format!("`{}` needs {n} destinations", i.opcode))),
        };
        let mut out = [None; 4];
        for (slot, o) in out.iter_mut().zip(dsts) {
            *slot = self.dst_or_sink(o, ty)?;
        }
        Ok(Op::Ld { space, size: (ty.bits() / 8) as u8, n, nc, d: out, addr: self.addr(a, space)? })
    }

    /// The `cp.async` family (sm_80): copies, `commit_group`,
    /// `wait_group N`, `wait_all`.
    fn cp_async(&self, m: &mut Mods<'a>, i: &'a ptx::Instruction) -> Result<Op> {
        if m.has("commit_group") {
            self.operands::<0>(i)?;
            return Ok(Op::CpAsyncCommit);
        }
        if m.has("wait_all") {
            self.operands::<0>(i)?;
            return Ok(Op::CpAsyncWait { n: 0, all: true });
        }
        if m.has("wait_group") {
            let [n] = self.operands(i)?;
            let Operand::Int(n) = n else { return Err(self.err(format!("`{}` takes a constant group count", i.opcode))) };
            let n = u32::try_from(*n).map_err(|_| self.err(format!("`{}`: group count {n} out of range", i.opcode)))?;
            return Ok(Op::CpAsyncWait { n, all: false });
        }
        // `.ca` may copy 4, 8 or 16 bytes, `.cg` (L2 only) 16.
        let cg = match (m.has("ca"), m.has("cg")) {
            (true, false) => false,
            (false, true) => true,
            _ => return Err(self.unsupported(&format!("`{}`", i.opcode))),
        };
        if !(m.has("shared") || m.has("shared::cta")) || !m.has("global") {
            return Err(self.unsupported(&format!("`{}` (cp.async copies global to shared memory)", i.opcode)));
        }
        // L2 prefetch hints change nothing the emulator models.
        m.drop_all(|x| matches!(x, "L2::64B" | "L2::128B" | "L2::256B"));
        let (d, s, size, src_size) = match i.operands.as_slice() {
            [d, s, size] => (d, s, size, None),
            [d, s, size, src_size] => (d, s, size, Some(self.src(src_size, Ty::U32)?)),
            _ => return Err(self.err(format!("`{}` takes [dst], [src], size and an optional source size", i.opcode))),
        };
        let size = match size {
            Operand::Int(4) if !cg => 4,
            Operand::Int(8) if !cg => 8,
            Operand::Int(16) => 16,
            _ => return Err(self.err(format!("`{}` copies {} bytes: .ca takes 4, 8 or 16, .cg 16", i.opcode, size))),
        };
        Ok(Op::CpAsync { size, dst: self.addr(d, Space::Shared)?, src: self.addr(s, Space::Global)?, src_size })
    }

    fn store(&self, m: &mut Mods<'a>, i: &'a ptx::Instruction) -> Result<Op> {
        let space = self.space(m)?;
        if space == Space::Param {
            return Err(self.unsupported("stores to the parameter space"));
        }
        m.drop_all(is_ordering_or_cache);
        let (n, ty) = self.vector_type(m)?;
        let [a, v] = self.operands(i)?;
        let vals: Vec<&Operand> = match v {
            Operand::Vector(v) if n > 1 && v.len() == n as usize => v.iter().collect(),
            _ if n == 1 => vec![v],
            _ => return Err(self.err(format!("`{}` needs {n} values", i.opcode))),
        };
        let mut out = [Src::Imm(0); 4];
        for (slot, o) in out.iter_mut().zip(vals) {
            *slot = self.src(o, ty)?;
        }
        Ok(Op::St { space, size: (ty.bits() / 8) as u8, n, v: out, addr: self.addr(a, space)? })
    }

    fn atom(&self, returns: bool, m: &mut Mods<'a>, i: &'a ptx::Instruction) -> Result<Op> {
        let space = self.space(m)?;
        if !matches!(space, Space::Global | Space::Shared | Space::Generic) {
            return Err(self.unsupported(&format!("atomics in the {} space", space.name())));
        }
        m.drop_all(is_ordering_or_cache);
        let op = match m.one_of(&["add", "min", "max", "inc", "dec", "and", "or", "xor", "exch", "cas"]) {
            Some("add") => AtomOp::Add,
            Some("min") => AtomOp::Min,
            Some("max") => AtomOp::Max,
            Some("inc") => AtomOp::Inc,
            Some("dec") => AtomOp::Dec,
            Some("and") => AtomOp::And,
            Some("or") => AtomOp::Or,
            Some("xor") => AtomOp::Xor,
            Some("exch") => AtomOp::Exch,
            Some("cas") => AtomOp::Cas,
            _ => return Err(self.err(format!("`{}` needs an operation", i.opcode))),
        };
        let n = match m.one_of(&["v2", "v4"]) {
            None => 1,
            Some("v2") => 2,
            Some(_) => 4,
        };
        let ty = self.one_type(m)?;
        if n > 1 {
            return self.vector_red(returns, space, op, ty, n, i);
        }
        let ok = match op {
            AtomOp::Add => matches!(ty, Ty::U32 | Ty::S32 | Ty::U64 | Ty::F32 | Ty::F64),
            AtomOp::Min | AtomOp::Max => matches!(ty, Ty::U32 | Ty::S32 | Ty::U64 | Ty::S64),
            AtomOp::Inc | AtomOp::Dec => ty == Ty::U32,
            AtomOp::And | AtomOp::Or | AtomOp::Xor | AtomOp::Exch | AtomOp::Cas => matches!(ty, Ty::B32 | Ty::B64),
        };
        if !ok || (op == AtomOp::Cas && !returns) {
            return Err(self.unsupported(&format!("`{}`", i.opcode)));
        }
        let ops = i.operands.as_slice();
        let (d, a, b, c) = match (returns, op == AtomOp::Cas, ops) {
            (true, false, [d, a, b]) => (Some(d), a, b, None),
            (true, true, [d, a, b, c]) => (Some(d), a, b, Some(c)),
            (false, false, [a, b]) => (None, a, b, None),
            _ => return Err(self.err(format!("wrong number of operands for `{}`", i.opcode))),
        };
        Ok(Op::Atom {
            space,
            op,
            ty,
            d: d.map(|d| self.dst_or_sink(d, ty)).transpose()?.flatten(),
            addr: self.addr(a, space)?,
            b: self.src(b, ty)?,
            c: c.map(|c| self.src(c, ty)).transpose()?.unwrap_or(Src::Imm(0)),
        })
    }

    /// The vector form of `red` (PTX ISA 8.1, sm_90): only `add` of `f32`
    /// into the global space, `{..}` holding one value per element.
    fn vector_red(&self, returns: bool, space: Space, op: AtomOp, ty: Ty, n: u8, i: &'a ptx::Instruction) -> Result<Op> {
        if returns || op != AtomOp::Add || ty != Ty::F32 || space != Space::Global {
            return Err(self.unsupported(&format!("`{}` (vector atomics are `red.global.add.v2|v4.f32`)", i.opcode)));
        }
        let [a, v] = self.operands(i)?;
        let Operand::Vector(vals) = v else { return Err(self.err(format!("`{}` needs {{..}} with {n} values", i.opcode))) };
        if vals.len() != usize::from(n) {
            return Err(self.err(format!("`{}` needs {n} values", i.opcode)));
        }
        let mut b = [Src::Imm(0); 4];
        for (slot, o) in b.iter_mut().zip(vals) {
            *slot = self.src(o, ty)?;
        }
        Ok(Op::RedV { n, addr: self.addr(a, space)?, b })
    }

    fn shfl(&self, m: &mut Mods<'a>, i: &'a ptx::Instruction) -> Result<Op> {
        let sync = m.has("sync");
        let mode = match m.one_of(&["up", "down", "bfly", "idx"]) {
            Some("up") => ShflMode::Up,
            Some("down") => ShflMode::Down,
            Some("bfly") => ShflMode::Bfly,
            Some("idx") => ShflMode::Idx,
            _ => return Err(self.err("`shfl` needs a mode".into())),
        };
        if self.one_type(m)? != Ty::B32 {
            return Err(self.unsupported(&format!("`{}`", i.opcode)));
        }
        let (d, a, b, c, mask) = match (sync, i.operands.as_slice()) {
            (true, [d, a, b, c, mask]) => (d, a, b, c, Some(mask)),
            (false, [d, a, b, c]) => (d, a, b, c, None),
            _ => return Err(self.err(format!("wrong number of operands for `{}`", i.opcode))),
        };
        let (d, p) = match d {
            Operand::Pair(d, p) => (Operand::Reg(d.clone()), self.pred_dst(&Operand::Reg(p.clone()))?),
            d => (d.clone(), None),
        };
        Ok(Op::Shfl {
            mode,
            d: self.dst(&d, Ty::B32)?,
            p,
            a: self.src(a, Ty::B32)?,
            b: self.src(b, Ty::B32)?,
            c: self.src(c, Ty::B32)?,
            mask: mask.map(|x| self.src(x, Ty::B32)).transpose()?,
        })
    }

    fn vote(&self, m: &mut Mods<'a>, i: &'a ptx::Instruction) -> Result<Op> {
        let sync = m.has("sync");
        let mode = match m.one_of(&["all", "any", "uni", "ballot"]) {
            Some("all") => VoteMode::All,
            Some("any") => VoteMode::Any,
            Some("uni") => VoteMode::Uni,
            Some("ballot") => VoteMode::Ballot,
            _ => return Err(self.err("`vote` needs a mode".into())),
        };
        let ty = self.one_type(m)?;
        let (d, a, mask) = match (sync, i.operands.as_slice()) {
            (true, [d, a, mask]) => (d, a, Some(mask)),
            (false, [d, a]) => (d, a, None),
            _ => return Err(self.err(format!("wrong number of operands for `{}`", i.opcode))),
        };
        let d = match (mode, ty) {
            (VoteMode::Ballot, Ty::B32) => VoteDst::Reg(self.dst(d, Ty::B32)?),
            (VoteMode::Ballot, _) => return Err(self.unsupported(&format!("`{}`", i.opcode))),
            (_, Ty::Pred) => match self.pred_dst(d)? {
                Some(p) => VoteDst::Pred(p),
                None => return Err(self.err("a predicate sink".into())),
            },
            _ => return Err(self.unsupported(&format!("`{}`", i.opcode))),
        };
        Ok(Op::Vote { mode, d, a: self.pred_src(a)?, mask: mask.map(|x| self.src(x, Ty::B32)).transpose()? })
    }
}

/// The type twice as wide (for `.wide` results).
fn widen(ty: Ty) -> Ty {
    match ty {
        Ty::U16 => Ty::U32,
        Ty::S16 => Ty::S32,
        Ty::U32 => Ty::U64,
        Ty::S32 => Ty::S64,
        other => other,
    }
}

/// The bit type of one part of a packed `mov`.
fn part_type(bits: u32) -> Option<Ty> {
    match bits {
        8 => Some(Ty::B8),
        16 => Some(Ty::B16),
        32 => Some(Ty::B32),
        _ => None,
    }
}

pub(crate) fn ty_name(ty: Ty) -> &'static str {
    match ty {
        Ty::B8 => "b8",
        Ty::B16 => "b16",
        Ty::B32 => "b32",
        Ty::B64 => "b64",
        Ty::U8 => "u8",
        Ty::U16 => "u16",
        Ty::U32 => "u32",
        Ty::U64 => "u64",
        Ty::S8 => "s8",
        Ty::S16 => "s16",
        Ty::S32 => "s32",
        Ty::S64 => "s64",
        Ty::F32 => "f32",
        Ty::F64 => "f64",
        Ty::Pred => "pred",
    }
}

/// Special registers of the PTX ISA the emulator does not provide (the
/// vector forms `%tid` etc. without a component among them).
fn is_special_name(name: &str) -> bool {
    const PREFIXES: [&str; 14] = [
        "%tid", "%ntid", "%ctaid", "%nctaid", "%envreg", "%pm", "%globaltimer", "%cluster", "%nclusterid",
        "%is_explicit_cluster", "%total_smem_size", "%aggr_smem_size", "%dynamic_smem_size", "%reserved_smem",
    ];
    PREFIXES.iter().any(|p| name.starts_with(p)) || matches!(name, "%clock_hi" | "%current_graph_exec")
}

/// A special register by name.
fn special(name: &str) -> Option<Special> {
    let axis = |s: &str| match s {
        "x" => Some(0u8),
        "y" => Some(1),
        "z" => Some(2),
        _ => None,
    };
    if let Some((reg, comp)) = name.split_once('.') {
        let a = axis(comp)?;
        return match reg {
            "%tid" => Some(Special::Tid(a)),
            "%ntid" => Some(Special::Ntid(a)),
            "%ctaid" => Some(Special::Ctaid(a)),
            "%nctaid" => Some(Special::Nctaid(a)),
            _ => None,
        };
    }
    Some(match name {
        "%laneid" => Special::LaneId,
        "%warpid" => Special::WarpId,
        "%nwarpid" => Special::NWarpId,
        "%lanemask_eq" => Special::LaneMask(Cmp::Eq),
        "%lanemask_le" => Special::LaneMask(Cmp::Le),
        "%lanemask_lt" => Special::LaneMask(Cmp::Lt),
        "%lanemask_ge" => Special::LaneMask(Cmp::Ge),
        "%lanemask_gt" => Special::LaneMask(Cmp::Gt),
        "%clock" | "%clock64" => Special::Clock,
        "%smid" => Special::SmId,
        "%nsmid" => Special::NSmId,
        "%gridid" => Special::GridId,
        _ => return None,
    })
}

/// Sets `rpc` of every branch in `code` to its immediate post-dominator
/// ([`cfg`]), or [`NO_PC`] when the paths only meet at the exit (or never
/// reach it).
pub(crate) fn set_reconvergence_points(code: &mut [Inst]) {
    let n = code.len();
    let exit = n;
    // Control-flow successors; node `n` is the virtual exit.
    let mut succ: Vec<Vec<usize>> = code
        .iter()
        .enumerate()
        .map(|(pc, inst)| {
            let next = pc + 1; // `n` past the end: falling off the end exits
            let guarded = inst.guard.is_some();
            match inst.op {
                Op::Bra { target, .. } if guarded => vec![target as usize, next],
                Op::Bra { target, .. } => vec![target as usize],
                Op::Exit if guarded => vec![exit, next],
                Op::Exit => vec![exit],
                _ => vec![next],
            }
        })
        .collect();
    succ.push(Vec::new());
    let ipdom = cfg::immediate_postdominators(&succ);
    for (pc, inst) in code.iter_mut().enumerate() {
        if let Op::Bra { rpc, .. } = &mut inst.op {
            *rpc = match ipdom[pc] {
                Some(p) if p != exit => p as u32,
                _ => NO_PC,
            };
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn kernel(body: &str) -> Result<Kernel> {
        let text = format!(
            ".version 7.0\n.target sm_80\n.address_size 64\n.visible .entry k(.param .u64 k_param_0)\n{{\n.reg .pred %p<4>;\n.reg .b16 %rs<4>;\n.reg .b32 %r<8>;\n.reg .b64 %rd<8>;\n.reg .f32 %f<4>;\n.reg .f64 %fd<4>;\n.shared .align 4 .b8 buf[64];\n{body}\nret;\n}}\n"
        );
        Program::load(&text).map(|p| Kernel::clone(&p.kernels[0]))
    }

    fn op(body: &str) -> Op {
        kernel(body).unwrap().code[0].op.clone()
    }

    fn err(body: &str) -> String {
        kernel(body).unwrap_err().to_string()
    }

    #[test]
    fn registers_and_immediates() {
        assert_eq!(
            op("add.s32 %r1, %r2, -1;"),
            Op::Int { op: IntOp::Add, k: IntKind { bits: 32, signed: true }, d: Dst { reg: 5, sext: 0, reg_bits: 32 }, a: Src::Reg(6), b: Src::Imm(0xFFFF_FFFF) }
        );
        assert_eq!(op("mul.hi.u16 %rs1, %rs2, -17873;"), Op::Int { op: IntOp::MulHi, k: IntKind { bits: 16, signed: false }, d: Dst { reg: 1, sext: 0, reg_bits: 16 }, a: Src::Reg(2), b: Src::Imm(0xBA2F) });
        // A signed load into a wider register sign-extends.
        let Op::Ld { d, addr, space: Space::Global, size: 4, .. } = op("ld.global.s32 %rd1, [%rd2+-8];") else { panic!() };
        assert_eq!(d[0], Some(Dst { reg: 13, sext: 32, reg_bits: 64 }));
        assert_eq!(addr, Addr { base: Some(14), offset: -8 });
        let Op::Ld { addr, space: Space::Param, .. } = op("ld.param.u64 %rd1, [k_param_0];") else { panic!() };
        assert_eq!(addr, Addr { base: None, offset: 0 });
        assert_eq!(op("mov.u32 %r1, %tid.y;"), Op::Mov { bits: 32, d: Dst { reg: 5, sext: 0, reg_bits: 32 }, a: Src::Special(Special::Tid(1)) });
        assert_eq!(op("mov.f32 %f1, 0f3F800000;"), Op::Mov { bits: 32, d: Dst { reg: 21, sext: 0, reg_bits: 32 }, a: Src::Imm(0x3F80_0000) });
        let Op::Ld { addr, .. } = op("ld.shared.f32 %f1, [buf+8];") else { panic!() };
        assert_eq!(addr, Addr { base: None, offset: 8 });
    }

    #[test]
    fn predicate_immediates_read_a_register_that_is_always_false() {
        // %p0..%p3 are declared: the always-false register is the fifth.
        assert_eq!(op("mov.pred %p1, 0;"), Op::PredMov { d: 1, a: PredSrc { idx: 4, neg: false } });
        assert_eq!(
            op("xor.pred %p2, %p1, -1;"),
            Op::PredLogic { op: BoolOp::Xor, d: 2, a: PredSrc { idx: 1, neg: false }, b: PredSrc { idx: 4, neg: true } }
        );
        assert_eq!(kernel("mov.pred %p1, 1;").unwrap().preds, 5);
    }

    #[test]
    fn branches_resolve_labels_and_reconvergence() {
        let k = kernel("setp.gt.s32 %p1, %r1, 0;\n@%p1 bra $L1;\nadd.s32 %r2, %r2, 1;\n$L1:\nadd.s32 %r3, %r3, 1;").unwrap();
        assert_eq!(k.code[1].op, Op::Bra { target: 3, rpc: 3 });
        assert_eq!(k.code[1].guard, Some(PredSrc { idx: 1, neg: false }));
        assert_eq!(k.lines[1], 14);
        assert_eq!(k.texts[1], "@%p1 bra $L1;");
    }

    #[test]
    fn unsupported_things_name_instruction_and_line() {
        let e = err("foo.bar.f32 %f1, %f2;");
        assert_eq!(e, "bad bundle kernels.ptx: line 13: the emulator does not support the instruction `foo.bar.f32` (in `foo.bar.f32 %f1, %f2;`)");
        assert!(err("add.rz.f32 %f1, %f2, %f3;").contains("the rounding modifier `.rz` on `add.rz.f32`"));
        assert!(err("ld.global.foo.f32 %f1, [%rd1];").contains("`.foo` on `ld.global.foo.f32`"));
        assert!(err("add.f16 %rs1, %rs2, %rs3;").contains("the type `.f16`"));
        assert!(err("cvt.f32.f64 %f1, %fd1;").contains("requires"));
        assert!(err("bra $nowhere;").contains("undefined label `$nowhere`"));
        assert!(err("add.s32 %r1, %r2, %q;").contains("undeclared register `%q`"));
        assert!(err("call foo;").contains("the instruction `call`"));
        assert!(err("ld.const.f32 %f1, [%rd1];").contains("`.const` state space"));
        assert!(err("mov.u32 %r1, %globaltimer_lo;").contains("the special register `%globaltimer_lo`"));
        assert!(err("mov.u32 %r1, %tid;").contains("the special register `%tid`"));
    }

    #[test]
    fn declarations_are_held_to_what_a_gpu_allows() {
        let load = |decl: &str| {
            Program::load(&format!(".version 7.0\n.target sm_80\n.address_size 64\n.visible .entry k(.param .u64 a)\n{{\n{decl}\nret;\n}}\n"))
                .map(|p| (p.kernels[0].shared_bytes, p.kernels[0].local_bytes, p.kernels[0].regs))
        };
        // Exactly at each limit: accepted.
        assert_eq!(load(".shared .align 4 .b8 s[49152];\n.local .align 8 .b8 l[524288];\n.reg .b64 %rd<8191>;").unwrap(), (49152, 524288, 8191));
        // One over, or a tampered bundle's gigabytes: refused, naming the
        // kernel and the declaration, before anything is allocated.
        let e = load(".shared .align 4 .b8 s[4294967296];").unwrap_err().to_string();
        assert_eq!(e, "bad bundle kernels.ptx: line 6: kernel `k`: `.shared s` (4294967296 bytes) brings its shared memory to 4294967296 bytes, more than the 49152 bytes of shared memory per block (48 KiB, the static shared memory of every GPU)");
        let e = load(".shared .b8 a[40000];\n.shared .b8 b[10000];").unwrap_err().to_string();
        assert!(e.contains("line 7: kernel `k`: `.shared b` (10000 bytes) brings its shared memory to 50000 bytes"), "{e}");
        let e = load(".local .align 8 .b8 l[1073741824];").unwrap_err().to_string();
        assert!(e.contains("kernel `k`: `.local l` (1073741824 bytes) brings its local memory to 1073741824 bytes, more than the 524288 bytes of local memory per thread"), "{e}");
        let e = load(".reg .pred %p<2>;\n.reg .b64 %rd<100000000>;").unwrap_err().to_string();
        assert_eq!(e, "bad bundle kernels.ptx: line 7: kernel `k`: `.reg .b64 %rd<100000000>` brings its registers to 100000002, more than the emulator's limit of 8192");
        // Module-scope shared memory counts for every kernel.
        let e = Program::load(".version 7.0\n.target sm_80\n.address_size 64\n.shared .b8 g[65536];\n").unwrap_err().to_string();
        assert!(e.contains("line 4: the module: `.shared g` (65536 bytes)"), "{e}");
        let e = Program::load(".version 7.0\n.target sm_80\n.address_size 64\n.visible .entry k(.param .align 8 .b8 p[4294967296])\n{\nret;\n}\n").unwrap_err().to_string();
        assert!(e.contains("line 4: kernel `k`: `.param p` (4294967296 bytes) brings its parameters to 4294967296 bytes, more than CUDA's limit of 32764"), "{e}");
    }
}
