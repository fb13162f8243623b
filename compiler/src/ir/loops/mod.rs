//! The `loop` dialect: the second IR level (DESIGN.md section 3). It says
//! *how* a specialised `et` module is computed: static buffers, and kernels
//! made of explicit loops over scalar induction variables, `guard`s that
//! implement the out-of-bounds rule, scalar index arithmetic, and one write
//! per kernel.
//!
//! Everything is static: shapes are numbers, FLOAT has a width (`f64` or
//! `f32`), and every index is an `i64` expression over induction variables
//! and index values loaded from INT buffers. Textual form and verifier live
//! in this folder (`print`, `parse`, `verify`), the interpreter in
//! `interp::loops`; docs/ir-loop.md documents every op.
//!
//! Semantics of a kernel: run its body once. `for v in [lo, hi)` runs its
//! body for `v = lo, lo+1, .., hi-1` (nothing when `hi <= lo`); a `parallel`
//! loop's iterations may run in any order or at once, a `reduce` loop's run
//! in order inside one thread. `guard` runs its body only when every
//! condition holds. Kernels of a module run in order; each sees the writes
//! of the previous ones.

pub mod chain;
pub mod contraction;
pub mod facts;
pub mod parse;
pub mod print;
pub mod site;
pub mod syntax;
pub mod target;
pub mod verify;

/// Induction variable or loaded index value; indexes `Kernel::vars`.
pub type VarId = usize;
/// A value computed in a `compute` node; indexes `Compute::values`.
pub type ValId = usize;
pub type BufId = usize;

pub use contraction::KernelSum;
pub use facts::{Fact, Facts};

#[derive(Clone, Debug, PartialEq)]
pub struct LoopModule {
    /// What the passes that ran have made true ([`facts`]).
    pub facts: Facts,
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

/// A dense row-major buffer; one per `et` array, plus temporaries.
#[derive(Clone, Debug, PartialEq)]
pub struct Buffer {
    pub name: String,
    pub dtype: DType,
    pub shape: Vec<i64>,
    pub role: Role,
    pub init: Init,
}

impl Buffer {
    /// Number of elements (product of the shape; 1 for rank 0).
    pub fn len(&self) -> i64 {
        self.shape.iter().product()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Row-major strides in elements.
    pub fn strides(&self) -> Vec<i64> {
        let mut st = vec![1i64; self.shape.len()];
        for i in (0..self.shape.len().saturating_sub(1)).rev() {
            st[i] = st[i + 1] * self.shape[i + 1].max(0);
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
    /// Any other array, and compiler temporaries (snapshots).
    Temp,
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
            Role::Output | Role::Temp | Role::Shared | Role::Local => Init::Zero,
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
}

impl Kernel {
    /// A main kernel of no statement.
    pub fn new(name: impl Into<String>, vars: Vec<Var>, body: Vec<Node>) -> Kernel {
        Kernel { name: name.into(), role: KernelRole::Main, stmt: None, vars, body }
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
    LoadIndex { var: VarId, buf: BufId, offset: IExpr },
    /// Scalar computation ending in the kernel's write.
    Compute(Compute),
    /// `sync`: every thread of the block waits here until all arrive, and
    /// sees the others' writes to shared buffers (`bar.sync`). Only in a
    /// kernel's `thread` nest, at a point every thread reaches (see
    /// `Thread`); a no-op for sequential execution.
    Sync,
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
/// the out-of-bounds rule of LANGUAGE.md section 3.
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

/// Scalar index expression (i64). Pure; total: division or modulo by zero
/// yields 0 (a `NonZero` guard keeps such points from mattering), and
/// arithmetic wraps on overflow.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum IExpr {
    Const(i64),
    Var(VarId),
    Bin(IBin, Box<IExpr>, Box<IExpr>),
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum IBin {
    Add,
    Sub,
    Mul,
    /// Floor division (Python `//`).
    FloorDiv,
    /// Ceiling division (`//^`).
    CeilDiv,
    /// Floor modulo (Python `%`: sign of the divisor).
    Mod,
    Min,
    Max,
}

impl IBin {
    /// The operation on concrete values (see `IExpr` for the totality
    /// conventions).
    pub fn apply(self, a: i64, b: i64) -> i64 {
        use crate::arith::{ceil_div, floor_div, floor_mod};
        match self {
            IBin::Add => a.wrapping_add(b),
            IBin::Sub => a.wrapping_sub(b),
            IBin::Mul => a.wrapping_mul(b),
            _ if b == 0 && matches!(self, IBin::FloorDiv | IBin::CeilDiv | IBin::Mod) => 0,
            IBin::FloorDiv => floor_div(a, b),
            IBin::CeilDiv => ceil_div(a, b),
            IBin::Mod => floor_mod(a, b),
            IBin::Min => a.min(b),
            IBin::Max => a.max(b),
        }
    }
}

impl IExpr {
    pub fn c(v: i64) -> IExpr {
        IExpr::Const(v)
    }

    pub fn v(v: VarId) -> IExpr {
        IExpr::Var(v)
    }

    pub fn bin(op: IBin, a: IExpr, b: IExpr) -> IExpr {
        IExpr::Bin(op, Box::new(a), Box::new(b))
    }

    pub fn add(a: IExpr, b: IExpr) -> IExpr {
        IExpr::bin(IBin::Add, a, b)
    }

    pub fn sub(a: IExpr, b: IExpr) -> IExpr {
        IExpr::bin(IBin::Sub, a, b)
    }

    pub fn mul(a: IExpr, b: IExpr) -> IExpr {
        IExpr::bin(IBin::Mul, a, b)
    }

    /// Value at a point; `env[v]` is variable `v`'s value.
    pub fn eval(&self, env: &[i64]) -> i64 {
        match self {
            IExpr::Const(c) => *c,
            IExpr::Var(v) => env[*v],
            IExpr::Bin(op, a, b) => op.apply(a.eval(env), b.eval(env)),
        }
    }

    pub fn as_const(&self) -> Option<i64> {
        match self {
            IExpr::Const(c) => Some(*c),
            _ => None,
        }
    }

    /// Does the expression mention `v`?
    pub fn uses(&self, v: VarId) -> bool {
        match self {
            IExpr::Const(_) => false,
            IExpr::Var(x) => *x == v,
            IExpr::Bin(_, a, b) => a.uses(v) || b.uses(v),
        }
    }

    /// Does the expression's value depend on `v`? Unlike [`IExpr::uses`],
    /// occurrences that cancel (`(i + o) - o`) do not count.
    pub fn depends_on(&self, v: VarId) -> bool {
        self.uses(v) && self.linear().terms.iter().any(|(atom, _)| atom.uses(v))
    }

    /// Calls `f` on every variable occurrence.
    pub fn for_each_var(&self, f: &mut impl FnMut(VarId)) {
        match self {
            IExpr::Const(_) => {}
            IExpr::Var(x) => f(*x),
            IExpr::Bin(_, a, b) => {
                a.for_each_var(f);
                b.for_each_var(f);
            }
        }
    }

    /// Number of operations (the cost `simplify-index` minimises).
    pub fn op_count(&self) -> usize {
        match self {
            IExpr::Const(_) | IExpr::Var(_) => 0,
            IExpr::Bin(_, a, b) => 1 + a.op_count() + b.op_count(),
        }
    }
}

/// An expression as `constant + sum(coef * atom)`: sums, differences and
/// products by constants are expanded; any other subexpression (a
/// variable, a division, a product of two non-constants) is an atom.
/// Equal atoms are merged.
#[derive(Clone, Debug, PartialEq)]
pub struct Linear {
    pub constant: i64,
    pub terms: Vec<(IExpr, i64)>,
}

impl Linear {
    fn scale(mut self, c: i64) -> Linear {
        self.constant = self.constant.wrapping_mul(c);
        for t in &mut self.terms {
            t.1 = t.1.wrapping_mul(c);
        }
        self
    }

    fn plus(mut self, o: Linear) -> Linear {
        self.constant = self.constant.wrapping_add(o.constant);
        for (a, c) in o.terms {
            match self.terms.iter_mut().find(|(b, _)| *b == a) {
                Some(t) => t.1 = t.1.wrapping_add(c),
                None => self.terms.push((a, c)),
            }
        }
        self.terms.retain(|t| t.1 != 0);
        self
    }

    /// Coefficient of an atom (0 when absent).
    pub fn coef(&self, atom: &IExpr) -> i64 {
        self.terms.iter().find(|(a, _)| a == atom).map_or(0, |t| t.1)
    }

    /// Back to an expression (terms in order, then the constant).
    pub fn to_expr(&self) -> IExpr {
        let mut e: Option<IExpr> = None;
        for (a, c) in &self.terms {
            let t = if *c == 1 { a.clone() } else { IExpr::mul(a.clone(), IExpr::Const(*c)) };
            e = Some(match e {
                None => t,
                Some(x) => IExpr::add(x, t),
            });
        }
        match (e, self.constant) {
            (None, c) => IExpr::Const(c),
            (Some(x), 0) => x,
            (Some(x), c) => IExpr::add(x, IExpr::Const(c)),
        }
    }
}

impl IExpr {
    pub fn linear(&self) -> Linear {
        match self {
            IExpr::Const(c) => Linear { constant: *c, terms: vec![] },
            IExpr::Bin(IBin::Add, a, b) => a.linear().plus(b.linear()),
            IExpr::Bin(IBin::Sub, a, b) => a.linear().plus(b.linear().scale(-1)),
            IExpr::Bin(IBin::Mul, a, b) => match (a.as_const(), b.as_const()) {
                (_, Some(c)) => a.linear().scale(c),
                (Some(c), _) => b.linear().scale(c),
                _ => Linear { constant: 0, terms: vec![(self.clone(), 1)] },
            },
            _ => Linear { constant: 0, terms: vec![(self.clone(), 1)] },
        }
    }

    /// Inclusive interval of the expression's values given each
    /// variable's interval (saturating; division by an interval that
    /// contains 0 gives the full range).
    pub fn interval(&self, var: &dyn Fn(VarId) -> (i64, i64)) -> (i64, i64) {
        const FULL: (i64, i64) = (i64::MIN, i64::MAX);
        match self {
            IExpr::Const(c) => (*c, *c),
            IExpr::Var(v) => var(*v),
            IExpr::Bin(op, a, b) => {
                let (x, y) = (a.interval(var), b.interval(var));
                let corners = |f: &dyn Fn(i64, i64) -> i64| {
                    let v = [f(x.0, y.0), f(x.0, y.1), f(x.1, y.0), f(x.1, y.1)];
                    (*v.iter().min().unwrap_or(&i64::MIN), *v.iter().max().unwrap_or(&i64::MAX))
                };
                match op {
                    IBin::Add => (x.0.saturating_add(y.0), x.1.saturating_add(y.1)),
                    IBin::Sub => (x.0.saturating_sub(y.1), x.1.saturating_sub(y.0)),
                    IBin::Mul => corners(&|p, q| p.saturating_mul(q)),
                    IBin::Min => (x.0.min(y.0), x.1.min(y.1)),
                    IBin::Max => (x.0.max(y.0), x.1.max(y.1)),
                    IBin::FloorDiv | IBin::CeilDiv if y.0 > 0 || y.1 < 0 => {
                        if x == FULL || y == FULL {
                            FULL
                        } else {
                            corners(&|p, q| op.apply(p, q))
                        }
                    }
                    IBin::Mod if y.0 > 0 => {
                        // Floor modulo by a positive divisor lies in [0, d-1];
                        // when x is already inside, it is x itself.
                        if y.0 == y.1 && x.0 >= 0 && x.1 < y.0 {
                            x
                        } else {
                            (0, y.1 - 1)
                        }
                    }
                    IBin::Mod if y.1 < 0 => (y.0 + 1, 0),
                    _ => FULL,
                }
            }
        }
    }
}

impl Cond {
    pub fn holds(&self, env: &[i64]) -> bool {
        match self {
            Cond::InRange { e, lo, hi } => {
                let x = e.eval(env);
                lo.eval(env) <= x && x < hi.eval(env)
            }
            Cond::NonZero(e) => e.eval(env) != 0,
        }
    }

    pub fn exprs(&self) -> Vec<&IExpr> {
        match self {
            Cond::InRange { e, lo, hi } => vec![e, lo, hi],
            Cond::NonZero(e) => vec![e],
        }
    }

    pub fn exprs_mut(&mut self) -> Vec<&mut IExpr> {
        match self {
            Cond::InRange { e, lo, hi } => vec![e, lo, hi],
            Cond::NonZero(e) => vec![e],
        }
    }
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
    Load { buf: BufId, offset: IExpr },
    /// An index expression's value as `i32` (`RANK`, `DIMS(l)[t]` after
    /// simplification, ...). Truncates like `as i32`.
    Index(IExpr),
    /// `table[index]` with `0 <= index < table.len()` guaranteed by a
    /// guard: `DIMS(list)[t]` with a non-constant `t`.
    Lookup { table: Vec<i64>, index: IExpr },
    /// The shared RANDOM generator (src/random.rs) of stream `stream`
    /// (the array name) at counter `counter` (the written cell's offset);
    /// `lo`/`hi` are values of type `dtype` (INT: floor of the bounds).
    Random { stream: String, counter: IExpr, lo: ValId, hi: ValId },
    Neg(ValId),
    Bin(BinOp, ValId, ValId),
    /// Conversion to the value's dtype: int -> float exact (rounded for
    /// f32); float -> int truncates toward zero, saturating, NaN -> 0
    /// (Rust `as`); f64 <-> f32 rounds to nearest.
    Cast(ValId),
}

/// Binary value operations: the language's own operators
/// (`et_grammar::ast::BinOp`), with LANGUAGE.md section 3 semantics
/// (`crate::arith`): on i32 `+ - *` wrap, `// //^ %` are floor/ceil/
/// floor-mod with divisor 0 giving 0; on floats `//` is floor(a/b), `//^`
/// ceil(a/b), `%` is `a - b*floor(a/b)`. `Div` is only on floats (lowering
/// casts INT `/`). Spelled as in the et dialect (`add`, `floordiv`, ..).
pub use et_grammar::ast::BinOp;

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
}

impl Node {
    /// The index expressions this node itself evaluates (loop bounds,
    /// guard conditions, offsets, index values), not those of its body.
    pub fn own_exprs(&self) -> Vec<&IExpr> {
        match self {
            Node::For(l) => vec![&l.lo, &l.hi],
            Node::Guard(g) => g.conds.iter().flat_map(|c| c.exprs()).collect(),
            Node::LoadIndex { offset, .. } => vec![offset],
            Node::Sync => vec![],
            Node::Compute(c) => {
                let mut v: Vec<&IExpr> = c
                    .values
                    .iter()
                    .filter_map(|v| match &v.op {
                        VOp::Load { offset, .. } => Some(offset),
                        VOp::Index(e) => Some(e),
                        VOp::Lookup { index, .. } => Some(index),
                        VOp::Random { counter, .. } => Some(counter),
                        _ => None,
                    })
                    .collect();
                v.push(&c.write.offset);
                v
            }
        }
    }

    /// The buffers this node itself reads or writes (not its body's).
    pub fn buffers(&self) -> Vec<BufId> {
        match self {
            Node::LoadIndex { buf, .. } => vec![*buf],
            Node::Compute(c) => {
                let mut v: Vec<BufId> = c.values.iter().filter_map(|v| if let VOp::Load { buf, .. } = v.op { Some(buf) } else { None }).collect();
                v.push(c.write.buf);
                v
            }
            _ => Vec::new(),
        }
    }

    /// The nodes directly inside this one.
    pub fn body(&self) -> &[Node] {
        match self {
            Node::For(l) => &l.body,
            Node::Guard(g) => &g.body,
            _ => &[],
        }
    }
}

/// Does any node of `nodes`, at any depth, use variable `v`?
pub fn nodes_use(nodes: &[Node], v: VarId) -> bool {
    nodes.iter().any(|n| n.own_exprs().iter().any(|e| e.uses(v)) || nodes_use(n.body(), v))
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

impl Node {
    /// Visits this node and every node inside it, outermost first.
    pub fn walk<'a>(&'a self, f: &mut impl FnMut(&'a Node)) {
        f(self);
        for n in self.body() {
            n.walk(f);
        }
    }
}

impl Kernel {
    /// Visits every node, outermost first.
    pub fn walk<'a>(&'a self, f: &mut impl FnMut(&'a Node)) {
        for n in &self.body {
            n.walk(f);
        }
    }

    /// Exactly how many points the loop nest visits (innermost bodies run,
    /// guards ignored), summing over outer variables where bounds depend
    /// on them. `None` when a bound depends on a loaded index value or the
    /// count overflows.
    pub fn iteration_count(&self) -> Option<u128> {
        fn count(nodes: &[Node], env: &mut Vec<Option<i64>>) -> Option<u128> {
            let mut total: u128 = 0;
            let mut leaf = false;
            for n in nodes {
                match n {
                    Node::For(l) => {
                        let lo = eval(&l.lo, env)?;
                        let hi = eval(&l.hi, env)?;
                        if hi <= lo {
                            continue;
                        }
                        let trips = (hi - lo) as u128;
                        let depends = bounds_use(&l.body, l.var);
                        if depends {
                            for v in lo..hi {
                                env[l.var] = Some(v);
                                total = total.checked_add(count(&l.body, env)?)?;
                            }
                            env[l.var] = None;
                        } else {
                            total = total.checked_add(trips.checked_mul(count(&l.body, env)?)?)?;
                        }
                    }
                    Node::Guard(g) => total = total.checked_add(count(&g.body, env)?)?,
                    Node::LoadIndex { .. } | Node::Sync => {}
                    Node::Compute(_) => leaf = true,
                }
            }
            Some(total + leaf as u128)
        }
        fn eval(e: &IExpr, env: &[Option<i64>]) -> Option<i64> {
            let mut ok = true;
            e.for_each_var(&mut |v| ok &= env.get(v).copied().flatten().is_some());
            ok.then(|| e.eval(&env.iter().map(|x| x.unwrap_or(0)).collect::<Vec<_>>()))
        }
        count(&self.body, &mut vec![None; self.vars.len()])
    }

    /// Every buffer the kernel reads or writes, in id order.
    pub fn buffers(&self) -> Vec<BufId> {
        let mut used = Vec::new();
        self.walk(&mut |n| used.extend(n.buffers()));
        used.sort_unstable();
        used.dedup();
        used
    }

    /// Every `Compute` node, outermost first.
    pub fn computes(&self) -> Vec<&Compute> {
        let mut out = Vec::new();
        self.walk(&mut |n| {
            if let Node::Compute(c) = n {
                out.push(c)
            }
        });
        out
    }

    /// `base`, with `_` appended until no variable has the name.
    pub fn unique_var_name(&self, base: &str) -> String {
        unique_var_name(&self.vars, base)
    }

    /// Number of guard conditions left in the kernel.
    pub fn guard_count(&self) -> usize {
        let mut n = 0;
        self.walk(&mut |x| {
            if let Node::Guard(g) = x {
                n += g.conds.len()
            }
        });
        n
    }

    /// Applies `f` to every index expression in the kernel (loop bounds,
    /// guard conditions, offsets, index values).
    pub fn for_each_expr_mut(&mut self, f: &mut impl FnMut(&mut IExpr)) {
        for_each_expr_mut(&mut self.body, f)
    }
}

/// `nodes` as a perfect nest of loops of `kind` (each the only node of its
/// parent's body), outermost first, and what is inside the innermost.
pub fn perfect_nest(mut nodes: &[Node], kind: LoopKind) -> (Vec<&For>, &[Node]) {
    let mut loops = Vec::new();
    while let [Node::For(l)] = nodes {
        if l.kind != kind {
            break;
        }
        loops.push(l);
        nodes = &l.body;
    }
    (loops, nodes)
}

/// Does a loop bound inside `nodes`, at any depth, use `v`?
pub fn bounds_use(nodes: &[Node], v: VarId) -> bool {
    nodes.iter().any(|n| match n {
        Node::For(l) => l.lo.uses(v) || l.hi.uses(v) || bounds_use(&l.body, v),
        Node::Guard(g) => bounds_use(&g.body, v),
        _ => false,
    })
}

/// A new variable named `base` (made unique by [`unique_var_name`]).
pub fn add_var(vars: &mut Vec<Var>, base: &str) -> VarId {
    let name = unique_var_name(vars, base);
    vars.push(Var { name });
    vars.len() - 1
}

/// `v` split into tiles of `factor` contiguous points, `t` the point in
/// the tile: `lo + (v - lo)*factor + t` for `v` from `lo` (the tiled
/// loops of `register-tiles{layout=blocked}`, `block-tiles`,
/// `interleave-sums`).
pub fn tile_index(v: VarId, lo: i64, factor: i64, t: VarId) -> IExpr {
    let tile = |x: IExpr| IExpr::add(IExpr::mul(x, IExpr::c(factor)), IExpr::v(t));
    if lo == 0 {
        tile(IExpr::v(v))
    } else {
        IExpr::add(IExpr::c(lo), tile(IExpr::sub(IExpr::v(v), IExpr::c(lo))))
    }
}

/// Replaces each `Compute` node of `nodes` (at any depth) by `f(node)`.
pub fn wrap_computes(nodes: &mut [Node], f: &mut impl FnMut(Node) -> Node) {
    for n in nodes {
        match n {
            Node::Compute(_) => {
                let c = std::mem::replace(n, Node::Sync);
                *n = f(c);
            }
            Node::For(l) => wrap_computes(&mut l.body, f),
            Node::Guard(g) => wrap_computes(&mut g.body, f),
            Node::LoadIndex { .. } | Node::Sync => {}
        }
    }
}

/// `base`, with `_` appended until none of `vars` has the name.
pub fn unique_var_name(vars: &[Var], base: &str) -> String {
    let mut name = base.to_string();
    while vars.iter().any(|v| v.name == name) {
        name.push('_');
    }
    name
}

/// Applies `f` to every index expression of `nodes`, at any depth.
pub fn for_each_expr_mut(nodes: &mut [Node], f: &mut impl FnMut(&mut IExpr)) {
    for n in nodes {
        match n {
            Node::For(l) => {
                f(&mut l.lo);
                f(&mut l.hi);
                for_each_expr_mut(&mut l.body, f);
            }
            Node::Guard(g) => {
                for c in &mut g.conds {
                    for e in c.exprs_mut() {
                        f(e);
                    }
                }
                for_each_expr_mut(&mut g.body, f);
            }
            Node::LoadIndex { offset, .. } => f(offset),
            Node::Sync => {}
            Node::Compute(c) => {
                for v in &mut c.values {
                    match &mut v.op {
                        VOp::Load { offset, .. } => f(offset),
                        VOp::Index(e) => f(e),
                        VOp::Lookup { index, .. } => f(index),
                        VOp::Random { counter, .. } => f(counter),
                        _ => {}
                    }
                }
                f(&mut c.write.offset);
            }
        }
    }
}

impl IExpr {
    /// The expression with every occurrence of `v` replaced by `by`.
    pub fn substitute(&self, v: VarId, by: &IExpr) -> IExpr {
        match self {
            IExpr::Var(x) if *x == v => by.clone(),
            IExpr::Const(_) | IExpr::Var(_) => self.clone(),
            IExpr::Bin(op, a, b) => IExpr::bin(*op, a.substitute(v, by), b.substitute(v, by)),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn index_ops_follow_python_and_are_total() {
        assert_eq!(IBin::FloorDiv.apply(-7, 2), -4);
        assert_eq!(IBin::CeilDiv.apply(-7, 2), -3);
        assert_eq!(IBin::Mod.apply(-7, 2), 1);
        assert_eq!(IBin::Mod.apply(7, -2), -1);
        assert_eq!(IBin::FloorDiv.apply(5, 0), 0);
        assert_eq!(IBin::Min.apply(3, -1), -1);
        let e = IExpr::sub(IExpr::v(0), IExpr::mul(IExpr::c(2), IExpr::v(1)));
        assert_eq!(e.eval(&[7, 3]), 1);
        assert!(e.uses(1) && !e.uses(2));
        assert_eq!(e.op_count(), 2);
    }

    #[test]
    fn iteration_count_sums_over_dependent_bounds() {
        // for i in [0, 4) { for j in [i, 4) { for k in [0, 3) { compute } } }
        // visits sum_i (4 - i) * 3 = 30 points; guards do not count.
        let compute = Node::Compute(Compute {
            values: vec![Value { op: VOp::Const(0.0), dtype: DType::F64 }],
            write: Write { kind: WriteKind::Store, buf: 0, offset: IExpr::c(0), value: 0 },
        });
        let k_loop = Node::For(For { var: 2, lo: IExpr::c(0), hi: IExpr::c(3), kind: LoopKind::Reduce, body: vec![compute] });
        let guard = Node::Guard(Guard { conds: vec![Cond::NonZero(IExpr::v(1))], body: vec![k_loop] });
        let j_loop = Node::For(For { var: 1, lo: IExpr::v(0), hi: IExpr::c(4), kind: LoopKind::Reduce, body: vec![guard] });
        let i_loop = Node::For(For { var: 0, lo: IExpr::c(0), hi: IExpr::c(4), kind: LoopKind::Parallel, body: vec![j_loop] });
        let vars = ["i", "j", "k"].iter().map(|n| Var { name: n.to_string() }).collect();
        let k = Kernel::new("t", vars, vec![i_loop]);
        assert_eq!(k.iteration_count(), Some(30));
        assert_eq!(k.guard_count(), 1);
        // A bound on a loaded value cannot be counted statically.
        let load = Node::LoadIndex { var: 1, buf: 0, offset: IExpr::c(0) };
        let inner = Node::For(For { var: 2, lo: IExpr::c(0), hi: IExpr::v(1), kind: LoopKind::Reduce, body: vec![] });
        let k2 = Kernel::new("u", k.vars.clone(), vec![load, inner]);
        assert_eq!(k2.iteration_count(), None);
    }

    #[test]
    fn strides_are_row_major() {
        let b = Buffer { name: "y".into(), dtype: DType::F64, shape: vec![2, 3, 4], role: Role::Temp, init: Init::Zero };
        assert_eq!(b.strides(), vec![12, 4, 1]);
        assert_eq!(b.len(), 24);
        let r0 = Buffer { shape: vec![], ..b.clone() };
        assert_eq!(r0.len(), 1);
        assert!(r0.strides().is_empty());
    }
}
