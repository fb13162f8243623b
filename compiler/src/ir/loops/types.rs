//! The loop dialect's data: modules, buffers, kernels, nodes, scalar
//! computations, and the float policy.

use super::{Facts, IExpr, Multiples};

/// Induction variable or loaded index value; indexes `Kernel::vars`.
pub type VarId = usize;
/// A value computed in a `compute` node; indexes `Compute::values`.
pub type ValId = usize;
pub type BufId = usize;
/// A dim symbol of the module; indexes `LoopModule::dims`.
pub type DimId = usize;

#[derive(Clone, Debug, Default, PartialEq)]
pub struct LoopModule {
    /// What the passes that ran have made true ([`facts`]).
    pub facts: Facts,
    /// The module's dim symbols (docs/dynamic-shapes.md): extents known
    /// only when the module runs, each a non-negative `i64`. Empty for a
    /// static module, which is every module `lower-to-loops` makes today.
    pub dims: Vec<Dim>,
    pub buffers: Vec<Buffer>,
    pub kernels: Vec<Kernel>,
}

/// Scalar element types of buffers and values: the runtime's own, so the
/// compiler, bundles and devices name element types one way.
pub use eintup_tensor::DType;

/// Width of FLOAT at the loop level and below (`--float`); INT is always
/// i32.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub enum FloatWidth {
    #[default]
    F64,
    F32,
}

impl FloatWidth {
    /// The element type FLOAT lowers to.
    pub fn dtype(self) -> DType {
        match self {
            FloatWidth::F64 => DType::F64,
            FloatWidth::F32 => DType::F32,
        }
    }

    /// The machine type of the language's element type `t`: INT is always
    /// i32, FLOAT is this width.
    pub fn dtype_of(self, t: et_grammar::ast::ElemType) -> DType {
        match t {
            et_grammar::ast::ElemType::Int => DType::I32,
            et_grammar::ast::ElemType::Float => self.dtype(),
        }
    }

    /// Bytes of one FLOAT element.
    pub fn bytes(self) -> u64 {
        self.dtype().size() as u64
    }

    /// The `--float` spelling.
    pub fn name(self) -> &'static str {
        self.dtype().name()
    }
}

impl std::str::FromStr for FloatWidth {
    type Err = String;
    fn from_str(s: &str) -> Result<FloatWidth, String> {
        match s {
            "f64" => Ok(FloatWidth::F64),
            "f32" => Ok(FloatWidth::F32),
            _ => Err(format!("invalid float width `{s}` (expected f64 or f32)")),
        }
    }
}

/// The float policy of GPU code (`--fp-contract`;
/// docs/codegen.md#fp-contraction). `Off` keeps the interpreter's
/// roundings; `Fast` lets a float multiply fuse with the add of its result
/// into one `fma` and lets `split-reductions` sum a float reduction as
/// per-lane partial sums (reassociation, and the sign of a zero sum is not
/// kept), as `nvcc -fmad=true` and every GPU library do. Host code always
/// keeps the interpreter's roundings.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub enum FpContract {
    /// Every product and sum rounded as the interpreter rounds it: bit for
    /// bit the interpreter's results.
    Off,
    /// `fma` contraction and split float reductions: fewer roundings,
    /// faster, not bit-exact. The GPU default.
    #[default]
    Fast,
}

impl FpContract {
    /// May a sum into `dtype` add its terms in another order than the
    /// program's under this policy? Always for INT (wrapping sums are
    /// exact in any order), for a float only under `Fast`: what
    /// `split-reductions` and `block-tiles`' halo ask before reordering.
    pub fn reorders_sums_of(self, dtype: DType) -> bool {
        !dtype.is_float() || self == FpContract::Fast
    }

    /// The `--fp-contract` spelling.
    pub fn name(self) -> &'static str {
        match self {
            FpContract::Off => "off",
            FpContract::Fast => "fast",
        }
    }
}

impl std::str::FromStr for FpContract {
    type Err = String;
    fn from_str(s: &str) -> Result<FpContract, String> {
        [FpContract::Off, FpContract::Fast].into_iter().find(|c| c.name() == s).ok_or_else(|| format!("invalid --fp-contract `{s}` (expected off or fast)"))
    }
}

/// A dim symbol: one component of an eintup whose dims are not fixed at
/// compile time (`batch.0`), printed `%batch.0` where index expressions
/// use it.
#[derive(Clone, Debug, PartialEq)]
pub struct Dim {
    pub name: String,
}

/// A dense row-major buffer; one per `et` array, plus temporaries.
#[derive(Clone, Debug, PartialEq)]
pub struct Buffer {
    pub name: String,
    pub dtype: DType,
    /// Extents: constants in a static module; index expressions over the
    /// module's dim symbols (never over loop variables) in a dynamic one.
    pub shape: Vec<IExpr>,
    pub role: Role,
    pub init: Init,
}

/// A shape of constant extents, as a [`Buffer`] holds it.
pub fn static_shape(dims: &[i64]) -> Vec<IExpr> {
    dims.iter().map(|&d| IExpr::Const(d)).collect()
}

impl Buffer {
    /// The extents when every one is a constant; `None` when one depends
    /// on a dim symbol.
    pub fn dims(&self) -> Option<Vec<i64>> {
        self.shape.iter().map(IExpr::as_const).collect()
    }

    /// Number of elements (product of the shape; 1 for rank 0), when the
    /// shape is static.
    pub fn len(&self) -> Option<i64> {
        self.dims().map(|d| d.iter().product())
    }

    /// Number of elements as an expression (a constant for a static
    /// shape).
    pub fn len_expr(&self) -> IExpr {
        match self.len() {
            Some(n) => IExpr::Const(n),
            None => self.shape.iter().cloned().reduce(IExpr::mul).unwrap_or(IExpr::Const(1)),
        }
    }

    /// Is the buffer known to hold no element?
    pub fn is_empty(&self) -> bool {
        self.len() == Some(0)
    }

    /// Row-major strides in elements, as expressions (constants for a
    /// static shape).
    pub fn strides(&self) -> Vec<IExpr> {
        let mut st = vec![IExpr::Const(1); self.shape.len()];
        for i in (0..self.shape.len().saturating_sub(1)).rev() {
            st[i] = match (st[i + 1].as_const(), self.shape[i + 1].as_const()) {
                (Some(s), Some(d)) => IExpr::Const(s * d.max(0)),
                (Some(1), None) => self.shape[i + 1].clone(),
                // Symbolic extents are non-negative (the shape program checks
                // them before anything runs), so no clamp.
                _ => IExpr::mul(st[i + 1].clone(), self.shape[i + 1].clone()),
            };
        }
        st
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Role {
    /// Filled by the caller before the first kernel (an `et` array whose
    /// defining statement is `a[..] = RANDOM(..)`; the host generates it
    /// with the shared generator unless the user supplies it).
    Input,
    /// Listed in the program's outputs section.
    Output,
    /// Any other array of the program (its contents at the end are the
    /// array's), and `plan-products`' temporaries (arrays of the planned
    /// `et` module).
    Temp,
    /// A temporary a loop pass made (a snapshot, a panel, partial sums):
    /// no program array, so its contents after the last kernel that uses
    /// it are never read, and `share-buffers` may give its memory to
    /// another transient from then on. Runtimes treat it as `Temp`.
    Transient,
    /// Scratch of one thread block (`block-tiles`): GPU shared memory.
    /// Used by one kernel, inside its `thread` nest only; its contents are
    /// undefined when the block starts. Not a kernel parameter, not in
    /// bundles.
    Shared,
    /// Scratch of one thread (`block-tiles`' accumulators): registers. As
    /// `Shared`, but each thread has its own copy.
    Local,
}

#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Init {
    /// All zeros before the first kernel (every array starts at 0).
    Zero,
    /// Contents come from the caller (role `Input`).
    Input,
}

impl Role {
    /// The init a buffer of this role has unless stated otherwise: only
    /// inputs come from the caller.
    pub fn default_init(self) -> Init {
        match self {
            Role::Input => Init::Input,
            Role::Output | Role::Temp | Role::Transient | Role::Shared | Role::Local => Init::Zero,
        }
    }

    /// Shared and local buffers exist only while a kernel runs: no memory
    /// outside it, no parameter.
    pub fn is_scratch(self) -> bool {
        matches!(self, Role::Shared | Role::Local)
    }
}

/// One kernel: a loop nest whose innermost nodes write one buffer.
#[derive(Clone, Debug, PartialEq)]
pub struct Kernel {
    /// Unique in the module; also the LLVM/PTX entry point name. Only a
    /// name: what the kernel is for is `role` and `stmt`.
    pub name: String,
    /// Which part of its statement's lowering the kernel is.
    pub role: KernelRole,
    /// The `et` statement (its index in the module) the kernel computes,
    /// `None` for a kernel of no statement (written by hand).
    pub stmt: Option<usize>,
    /// Every variable the body binds, by `VarId`.
    pub vars: Vec<Var>,
    pub body: Vec<Node>,
    /// Dim symbols the kernel was compiled as multiples of (a run-time
    /// variant's, `crate::variants`): it may be launched only where they
    /// are. Empty for every other kernel.
    pub multiples: Multiples,
}

/// What a kernel does for its statement (docs/ir-loop.md#kernel-roles).
/// Passes pair kernels by role and statement, never by name.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub enum KernelRole {
    /// The statement's computation: every point writes into the left
    /// array (and, once fused, the reset's clears too).
    #[default]
    Main,
    /// Clears the cells of an `=` statement's left array before its main
    /// kernel runs.
    Reset,
    /// Copies the left array before the statement runs, for a statement
    /// that reads the array it writes.
    Snapshot,
    /// Partial sums of a split reduction (`split-reductions`), which the
    /// statement's main kernel then adds up.
    Partial,
    /// Copies an operand of the statement's main kernel into the order
    /// that kernel reads it in (`cache-tiles`' panels), right before it.
    Pack,
}

impl Kernel {
    /// A main kernel of no statement.
    pub fn new(name: impl Into<String>, vars: Vec<Var>, body: Vec<Node>) -> Kernel {
        Kernel { name: name.into(), role: KernelRole::Main, stmt: None, vars, body, multiples: Multiples::default() }
    }

    /// Is this `role`'s kernel of the same statement as `other`?
    pub fn is_role_of(&self, role: KernelRole, other: &Kernel) -> bool {
        self.role == role && self.stmt.is_some() && self.stmt == other.stmt
    }
}

#[derive(Clone, Debug, PartialEq)]
pub struct Var {
    /// Printed name (unique in the kernel), e.g. `opos0` for component 0
    /// of eintup `opos`, or `t3` for a loaded index value.
    pub name: String,
}

#[derive(Clone, Debug, PartialEq)]
pub enum Node {
    For(For),
    Guard(Guard),
    /// `var = load_index buf[offset]`: an INT element read as an index
    /// (gather/scatter through array slices). The offset must be in
    /// bounds wherever the node runs (guards above ensure it).
    LoadIndex {
        var: VarId,
        buf: BufId,
        offset: IExpr,
    },
    /// Scalar computation ending in the kernel's write.
    Compute(Compute),
    /// `sync`: every thread of the block waits here until all arrive, and
    /// sees the others' writes to shared buffers (`bar.sync`). Only in a
    /// kernel's `thread` nest, at a point every thread reaches (see
    /// `Thread`); a no-op for sequential execution.
    Sync,
    /// `commit_copies` / `wait_copies N`: this thread's groups of
    /// asynchronous copies (`WriteKind::CopyAsync`; docs/async-copies.md).
    /// Only in a kernel's `thread` nest; a no-op for sequential execution.
    Copies(CopyGroup),
}

/// What a [`Node::Copies`] does with the thread's asynchronous copies.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum CopyGroup {
    /// Close the copies issued since the last commit into one group
    /// (`cp.async.commit_group`).
    Commit,
    /// Wait until at most `pending` committed groups are in flight; the
    /// others have landed (`cp.async.wait_group`).
    Wait { pending: u32 },
}

#[derive(Clone, Debug, PartialEq)]
pub struct For {
    pub var: VarId,
    /// Inclusive lower bound; may use variables of enclosing loops.
    pub lo: IExpr,
    /// Exclusive upper bound.
    pub hi: IExpr,
    pub kind: LoopKind,
    pub body: Vec<Node>,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum LoopKind {
    /// Iterations are independent: the GPU maps them to threads.
    Parallel,
    /// Iterations run in order inside one thread (they accumulate into the
    /// same cells). `lower-to-loops` marks every loop `reduce`; the
    /// `parallelize` pass chooses which become `parallel`.
    Reduce,
    /// Iterations are independent, as `parallel`, but each thread runs all
    /// of them and code generation unrolls them: a register tile
    /// (`register-tiles`). Constant bounds, at most [`MAX_UNROLL`] trips.
    Unroll,
    /// The threads of one GPU block (`block-tiles`): a perfect nest of
    /// `thread` loops with constant bounds directly inside the kernel's
    /// parallel chain (whose points become blocks); each iteration is one
    /// thread, its body that thread's program. Sequentially, a parallel
    /// loop. Inside it, `spread` loops and `sync` may appear only where
    /// every thread gets to: under `reduce`/`unroll` loops whose bounds do
    /// not use the thread variables, not under guards.
    Thread,
    /// A loop the block's threads share (cooperative staging): iteration
    /// `e` runs on thread `e mod threads`. Its body must not use the
    /// thread variables or local buffers, so which thread runs an
    /// iteration does not matter; sequentially, an ordinary loop.
    Spread,
}

/// Most threads a `thread` nest may have (the GPU's block limit).
pub const MAX_BLOCK_THREADS: i64 = 1024;

/// Most iterations an `unroll` loop may have (code size).
pub const MAX_UNROLL: i64 = 16;

/// `guard c1, c2, .. { body }`: the body runs only when all hold. This is
/// the out-of-bounds rule of docs/language.md section 3.
#[derive(Clone, Debug, PartialEq)]
pub struct Guard {
    pub conds: Vec<Cond>,
    pub body: Vec<Node>,
}

#[derive(Clone, Debug, PartialEq)]
pub enum Cond {
    /// `lo <= e < hi`.
    InRange { e: IExpr, lo: IExpr, hi: IExpr },
    /// `e != 0` (a divisor that is not a constant).
    NonZero(IExpr),
}

/// The scalar computation of one point: SSA values, then one write.
#[derive(Clone, Debug, PartialEq)]
pub struct Compute {
    pub values: Vec<Value>,
    pub write: Write,
}

#[derive(Clone, Debug, PartialEq)]
pub struct Value {
    pub op: VOp,
    pub dtype: DType,
}

/// Value operations. Operands are earlier values of the same `Compute`;
/// binary operands have the value's own dtype except where noted.
#[derive(Clone, Debug, PartialEq)]
pub enum VOp {
    /// A constant (integers in `f64` are exact up to 2^53).
    Const(f64),
    /// `buf[offset]` (offset in bounds wherever it runs).
    Load {
        buf: BufId,
        offset: IExpr,
    },
    /// An index expression's value as `i32` (`RANK`, `DIMS(l)[t]` after
    /// simplification, ...). Truncates like `as i32`.
    Index(IExpr),
    /// `table[index]` with `0 <= index < table.len()` guaranteed by a
    /// guard: `DIMS(list)[t]` with a non-constant `t`.
    Lookup {
        table: Vec<i64>,
        index: IExpr,
    },
    /// The shared RANDOM generator (src/random.rs) of stream `stream`
    /// (the array name) at counter `counter` (the written cell's offset);
    /// `lo`/`hi` are values of type `dtype` (INT: floor of the bounds).
    Random {
        stream: String,
        counter: IExpr,
        lo: ValId,
        hi: ValId,
    },
    Neg(ValId),
    Bin(BinOp, ValId, ValId),
    /// `a < b`, ..: i32 1 or 0; both operands of one dtype (IEEE: every
    /// comparison with a NaN is false but `ne`).
    Cmp(CmpOp, ValId, ValId),
    /// A function of the language (docs/language.md s.3) on operands of
    /// the value's dtype, except `select`'s condition (any dtype, tested
    /// `!= 0`). `exp log tanh pow` are `crate::mathlib`'s, computed in
    /// f64; `max min` on floats are `mathlib`'s NaN-propagating ones.
    Call(Func, Vec<ValId>),
    /// Conversion to the value's dtype: int -> float exact (rounded for
    /// f32); float -> int truncates toward zero, saturating, NaN -> 0
    /// (Rust `as`); f64 <-> f32 rounds to nearest.
    Cast(ValId),
}

/// Binary value operations: the language's own operators
/// (`et_grammar::ast::BinOp`), with docs/language.md section 3 semantics
/// (`crate::arith`): on i32 `+ - *` wrap, `// //^ %` are floor/ceil/
/// floor-mod with divisor 0 giving 0; on floats `//` is floor(a/b), `//^`
/// ceil(a/b), `%` is `a - b*floor(a/b)`. `Div` is only on floats (lowering
/// casts INT `/`). Spelled as in the et dialect (`add`, `floordiv`, ..).
pub use et_grammar::ast::BinOp;
/// Comparisons and functions of values, as in the language.
pub use et_grammar::ast::{CmpOp, Func};

#[derive(Clone, Debug, PartialEq)]
pub struct Write {
    pub kind: WriteKind,
    pub buf: BufId,
    /// Flat element offset (in bounds wherever it runs).
    pub offset: IExpr,
    /// The value written (converted to the buffer's dtype already).
    pub value: ValId,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum WriteKind {
    /// `buf[offset] = value`.
    Store,
    /// `buf[offset] += value` by one thread (no other thread writes the
    /// cell during the kernel).
    Accumulate,
    /// `buf[offset] += value` where other threads may add to the same cell.
    AtomicAccumulate,
    /// `buf[offset] = max(buf[offset], value)` by one thread (`max=`; the
    /// reset stored the identity -inf or INT's minimum first). Floats:
    /// `mathlib::max` (NaN-propagating).
    Maximize,
    /// As `Maximize`, keeping the smaller (`min=`).
    Minimize,
    /// `Maximize` where other threads may combine into the same cell (a
    /// scatter `max=`): an atomic max on i32, a compare-exchange loop on
    /// floats. Max is exact in any order, so the result is the same.
    AtomicMaximize,
    /// `Minimize` where other threads may combine into the same cell.
    AtomicMinimize,
    /// `buf[offset] = value` where `buf` is shared and the value is the
    /// compute's only one, a load of a global buffer: on the GPU an
    /// asynchronous copy (`cp.async`) that lands when a `wait_copies` of
    /// this thread completes its group; sequentially a store.
    CopyAsync,
}

impl WriteKind {
    /// Does the write add to the cell (rather than replace it)?
    pub fn adds(self) -> bool {
        matches!(self, WriteKind::Accumulate | WriteKind::AtomicAccumulate)
    }

    /// Does the write combine its value with what the cell holds (a sum,
    /// a max or a min) rather than replace it?
    pub fn combines(self) -> bool {
        self.adds() || matches!(self, WriteKind::Maximize | WriteKind::Minimize | WriteKind::AtomicMaximize | WriteKind::AtomicMinimize)
    }

    /// May other threads write the cell during the kernel?
    pub fn is_atomic(self) -> bool {
        matches!(self, WriteKind::AtomicAccumulate | WriteKind::AtomicMaximize | WriteKind::AtomicMinimize)
    }

    /// The atomic form of a combine (`parallelize`, when several threads
    /// reach one cell); `None` for a write that has none.
    pub fn atomic(self) -> Option<WriteKind> {
        match self {
            WriteKind::Accumulate | WriteKind::AtomicAccumulate => Some(WriteKind::AtomicAccumulate),
            WriteKind::Maximize | WriteKind::AtomicMaximize => Some(WriteKind::AtomicMaximize),
            WriteKind::Minimize | WriteKind::AtomicMinimize => Some(WriteKind::AtomicMinimize),
            WriteKind::Store | WriteKind::CopyAsync => None,
        }
    }

    /// The write one thread does alone (the host runs a kernel with
    /// atomic writes on one thread).
    pub fn non_atomic(self) -> WriteKind {
        match self {
            WriteKind::AtomicAccumulate => WriteKind::Accumulate,
            WriteKind::AtomicMaximize => WriteKind::Maximize,
            WriteKind::AtomicMinimize => WriteKind::Minimize,
            k => k,
        }
    }

    /// The write of a statement's main kernel for `op` (`=` and `+=` add).
    pub fn of_statement(op: et_grammar::ast::AssignOp) -> WriteKind {
        match op {
            et_grammar::ast::AssignOp::MaxAssign => WriteKind::Maximize,
            et_grammar::ast::AssignOp::MinAssign => WriteKind::Minimize,
            et_grammar::ast::AssignOp::Assign | et_grammar::ast::AssignOp::AddAssign => WriteKind::Accumulate,
        }
    }

    /// What a reset stores so that combining the first value gives that
    /// value: -0.0 for a float sum (-0.0 + v is v for every v, -0.0 too),
    /// 0 for an INT sum, -inf / INT's minimum for a max, +inf / INT's
    /// maximum for a min.
    pub fn identity(self, dtype: DType) -> f64 {
        match (self, dtype.is_float()) {
            (WriteKind::Maximize | WriteKind::AtomicMaximize, true) => f64::NEG_INFINITY,
            (WriteKind::Maximize | WriteKind::AtomicMaximize, false) => i32::MIN as f64,
            (WriteKind::Minimize | WriteKind::AtomicMinimize, true) => f64::INFINITY,
            (WriteKind::Minimize | WriteKind::AtomicMinimize, false) => i32::MAX as f64,
            (_, true) => -0.0,
            (_, false) => 0.0,
        }
    }
}

impl LoopModule {
    pub fn buffer_by_name(&self, name: &str) -> Option<BufId> {
        self.buffers.iter().position(|b| b.name == name)
    }

    /// `base`, with `_` appended until no buffer has the name.
    pub fn unique_buffer_name(&self, base: String) -> String {
        let mut name = base;
        while self.buffer_by_name(&name).is_some() {
            name.push('_');
        }
        name
    }
}

impl Compute {
    /// Does the computation load from buffer `b`?
    pub fn reads(&self, b: BufId) -> bool {
        self.values.iter().any(|v| matches!(v.op, VOp::Load { buf, .. } if buf == b))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn strides_are_row_major() {
        let b = Buffer { name: "y".into(), dtype: DType::F64, shape: static_shape(&[2, 3, 4]), role: Role::Temp, init: Init::Zero };
        assert_eq!(b.strides(), static_shape(&[12, 4, 1]));
        assert_eq!(b.len(), Some(24));
        let r0 = Buffer { shape: vec![], ..b.clone() };
        assert_eq!(r0.len(), Some(1));
        assert!(r0.strides().is_empty());
    }
}
