//! The reference interpreter: executes a specialised `et` module exactly as
//! LANGUAGE.md section 3 states (docs/semantics.md walks through it). Every
//! backend is tested against it, so clarity wins over speed; the one
//! optimisation is that bounds checks run as soon as the eintups they use
//! are fixed (see `plan`), which keeps convolutions fast.
//!
//! Per statement: enumerate the box of the statement's variables; evaluate
//! every index (left, right, slices, `DIMS(l)[t]`); skip the combination if
//! any component is out of range; else evaluate the right-hand side against
//! a snapshot of the arrays and add it into the left cell (`=` resets a cell
//! the first time an executed combination reaches it).

pub mod loops;
mod plan;

pub use plan::{ceil_div, floor_div, floor_mod};

use crate::cli::FloatWidth;
use crate::driver::{Failure, Source};
use crate::ir::et::{ArrayId, IndexOp, Module};
use crate::random::Stream;
use crate::tensor::{element_count, shape_text, Data, ElemKind, Tensor};
use et_grammar::ast::{BinOp, ElemType};
use et_grammar::Diagnostic;
use plan::{Access, CheckKind, IExpr, ROp, StmtPlan};
use smallvec::SmallVec;
use std::collections::BTreeMap;

#[derive(Clone, Debug)]
pub struct RunOptions {
    pub seed: u64,
    pub float: FloatWidth,
    /// User-supplied contents of input arrays, by array name.
    pub inputs: BTreeMap<String, Tensor>,
}

impl Default for RunOptions {
    fn default() -> Self {
        RunOptions { seed: 0, float: FloatWidth::F64, inputs: BTreeMap::new() }
    }
}

/// Why a run failed: a user error located in the program, or a bug.
#[derive(Clone, Debug)]
pub enum RunError {
    User(Diagnostic),
    Internal(String),
}

impl RunError {
    pub fn into_failure(self, src: &Source) -> Failure {
        match self {
            RunError::User(d) => src.failure(vec![d]),
            RunError::Internal(m) => Failure::Internal(m),
        }
    }
}

/// Largest array the interpreter allocates (2^31 elements).
pub const MAX_ELEMENTS: usize = 1 << 31;

/// Runs a specialised module; returns every array, in module order.
pub fn run(m: &Module, opts: &RunOptions) -> Result<Vec<Tensor>, RunError> {
    let f32 = opts.float == FloatWidth::F32;
    let mut arrays = Vec::with_capacity(m.arrays.len());
    for (id, a) in m.arrays.iter().enumerate() {
        let shape = array_shape(m, id)?;
        let kind = elem_kind(a.dtype, f32);
        // Refuse before allocating: an abort on allocation failure would
        // not be a clear error.
        let t = element_count(&shape).filter(|&n| n <= MAX_ELEMENTS).and_then(|_| Tensor::zeros(kind, &shape)).ok_or_else(|| {
            RunError::User(Diagnostic::error("E0404", format!("array `{}` of shape {} has too many elements", a.name, shape_text(&shape))).at(a.span, "defined here"))
        })?;
        arrays.push(t);
    }
    let supplied = check_inputs(m, opts, &arrays)?;
    for (id, t) in &supplied {
        arrays[*id] = t.clone().with_float_width(f32);
    }
    for (si, s) in m.stmts.iter().enumerate() {
        if supplied.iter().any(|(id, _)| *id == s.array && m.arrays[*id].def_stmt == si) {
            continue;
        }
        let p = plan::plan_stmt(m, s)?;
        let stream = Stream::new(opts.seed, &m.arrays[s.array].name);
        exec_stmt(&p, &mut arrays, stream, f32)?;
    }
    Ok(arrays)
}

fn elem_kind(d: ElemType, f32: bool) -> ElemKind {
    match (d, f32) {
        (ElemType::Int, _) => ElemKind::Int,
        (ElemType::Float, false) => ElemKind::F64,
        (ElemType::Float, true) => ElemKind::F32,
    }
}

/// The static shape of an array as `usize`s.
pub fn array_shape(m: &Module, id: ArrayId) -> Result<Vec<usize>, RunError> {
    let a = &m.arrays[id];
    let shape = m.array_shape(id).ok_or_else(|| RunError::Internal(format!("array `{}` has no static shape (module not specialised)", a.name)))?;
    shape.iter().map(|&d| usize::try_from(d).map_err(|_| RunError::Internal(format!("array `{}` has a negative dim {d}", a.name)))).collect()
}

/// Validates supplied inputs: known name, an input array, same shape, same
/// element type (FLOAT accepts `<f8` and `<f4`; INT needs `<i4`).
fn check_inputs(m: &Module, opts: &RunOptions, arrays: &[Tensor]) -> Result<Vec<(ArrayId, Tensor)>, RunError> {
    let mut out = Vec::new();
    for (name, t) in &opts.inputs {
        let Some(id) = m.array_by_name(name) else {
            let names: Vec<&str> = m.arrays.iter().filter(|a| a.is_input).map(|a| a.name.as_str()).collect();
            return Err(RunError::User(
                Diagnostic::error("E0401", format!("`--input {name}=...`: the program has no array named `{name}`"))
                    .note(format!("the input arrays are: {}", if names.is_empty() { "(none)".to_string() } else { names.join(", ") })),
            ));
        };
        let a = &m.arrays[id];
        if !a.is_input {
            return Err(RunError::User(
                Diagnostic::error("E0402", format!("`--input {name}=...`: array `{name}` is not an input"))
                    .at(a.span, "its defining statement is not `= RANDOM(...)`, so the program computes it"),
            ));
        }
        let want = &arrays[id].shape;
        let want_float = a.dtype == ElemType::Float;
        if &t.shape != want || t.kind().is_float() != want_float {
            return Err(RunError::User(
                Diagnostic::error(
                    "E0403",
                    format!(
                        "input `{name}` has shape {} and type {}, but the program's array `{name}` has shape {} and type {}",
                        shape_text(&t.shape),
                        t.kind().text(),
                        shape_text(want),
                        a.dtype.text()
                    ),
                )
                .at(a.span, format!("`{name}` is defined here with shape {}", shape_text(want))),
            ));
        }
        out.push((id, t.clone()));
    }
    Ok(out)
}

/// A right-hand-side value.
#[derive(Clone, Copy, Debug, PartialEq)]
enum Val {
    I(i32),
    F(f64),
}

impl Val {
    fn as_f64(self) -> f64 {
        match self {
            Val::I(i) => i as f64,
            Val::F(f) => f,
        }
    }
}

/// An index value: a broadcast scalar or a tuple.
enum IVal {
    S(i64),
    T(SmallVec<[i64; 8]>),
}

impl IVal {
    /// Component `k` of the value broadcast to any rank.
    fn at(&self, k: usize) -> i64 {
        match self {
            IVal::S(v) => *v,
            IVal::T(t) => t.get(k).copied().unwrap_or(i64::MIN),
        }
    }
}

/// Arrays as the right-hand side sees them: the left array is read from its
/// snapshot (it has been moved out of `arrays` for writing).
struct Reads<'a> {
    arrays: &'a [Tensor],
    lhs: ArrayId,
    snap: Option<&'a Tensor>,
}

impl Reads<'_> {
    fn get(&self, a: ArrayId) -> &Tensor {
        match self.snap {
            Some(s) if a == self.lhs => s,
            _ => &self.arrays[a],
        }
    }
}

struct Exec<'a, 'p> {
    p: &'p StmtPlan,
    reads: Reads<'a>,
    target: &'a mut Tensor,
    /// For `=`: cells already reset.
    touched: Vec<bool>,
    cur: Vec<i64>,
    results: Vec<i64>,
    vals: Vec<Val>,
    f32: bool,
    stream: Stream,
}

fn exec_stmt(p: &StmtPlan, arrays: &mut [Tensor], stream: Stream, f32: bool) -> Result<(), RunError> {
    // A zero-sized dim anywhere in the box: no combinations at all.
    if p.extents.iter().any(|&e| e <= 0) {
        return Ok(());
    }
    let mut target = std::mem::take(&mut arrays[p.array]);
    let snap = if p.reads_self { Some(target.clone()) } else { None };
    let touched = if p.assign { vec![false; target.len()] } else { Vec::new() };
    {
        let mut ex = Exec {
            p,
            reads: Reads { arrays, lhs: p.array, snap: snap.as_ref() },
            target: &mut target,
            touched,
            cur: vec![0; p.extents.len()],
            results: vec![0; p.checks.len()],
            vals: vec![Val::I(0); p.ops.len()],
            f32,
            stream,
        };
        if ex.checks(0) {
            ex.level(0);
        }
    }
    arrays[p.array] = target;
    Ok(())
}

impl Exec<'_, '_> {
    fn level(&mut self, l: usize) {
        if l == self.p.extents.len() {
            self.execute();
            return;
        }
        for v in 0..self.p.extents[l] {
            self.cur[l] = v;
            if self.checks(l + 1) {
                self.level(l + 1);
            }
        }
    }

    /// Runs the checks that become decidable at level `l`; false skips.
    fn checks(&mut self, l: usize) -> bool {
        for &c in &self.p.by_level[l] {
            let r = match &self.p.checks[c].kind {
                CheckKind::Access(a) => offset(a, &self.cur, &self.reads),
                CheckKind::DimsAt { t, vec } => eval(t, &self.cur, &self.reads)
                    .and_then(|v| usize::try_from(v.at(0)).ok())
                    .and_then(|i| vec.get(i).copied()),
            };
            match r {
                Some(r) => self.results[c] = r,
                None => return false,
            }
        }
        true
    }

    fn fl(&self, x: f64) -> f64 {
        if self.f32 {
            x as f32 as f64
        } else {
            x
        }
    }

    fn execute(&mut self) {
        let cell = self.results[0];
        for i in 0..self.p.ops.len() {
            let v = match &self.p.ops[i] {
                ROp::Int(v) => Val::I(*v),
                ROp::Float(f) => Val::F(self.fl(*f)),
                ROp::Load { array, check } => load(self.reads.get(*array), self.results[*check] as usize),
                ROp::DimsAt { check } => Val::I(self.results[*check] as i32),
                ROp::Random { lo, hi, int } => {
                    let (lo, hi) = (self.vals[*lo], self.vals[*hi]);
                    if *int {
                        let b = |v: Val| match v {
                            Val::I(i) => i as i64,
                            Val::F(f) => f.floor() as i64,
                        };
                        Val::I(self.stream.int(cell as u64, b(lo), b(hi)) as i32)
                    } else {
                        Val::F(self.fl(self.stream.float(cell as u64, lo.as_f64(), hi.as_f64())))
                    }
                }
                ROp::Neg(a) => match self.vals[*a] {
                    Val::I(i) => Val::I(i.wrapping_neg()),
                    Val::F(f) => Val::F(-f),
                },
                ROp::Bin(op, a, b) => self.binary(*op, self.vals[*a], self.vals[*b]),
            };
            self.vals[i] = v;
        }
        let v = self.vals[self.p.result];
        let cell = cell as usize;
        let reset = self.p.assign && !std::mem::replace(&mut self.touched[cell], true);
        match &mut self.target.data {
            Data::Int(d) => {
                let x = match v {
                    Val::I(i) => i,
                    Val::F(f) => f as i32,
                };
                d[cell] = if reset { x } else { d[cell].wrapping_add(x) };
            }
            Data::F64(d) => d[cell] = if reset { v.as_f64() } else { d[cell] + v.as_f64() },
            Data::F32(d) => d[cell] = if reset { v.as_f64() as f32 } else { d[cell] + v.as_f64() as f32 },
        }
    }

    fn binary(&self, op: BinOp, a: Val, b: Val) -> Val {
        match (a, b) {
            (Val::I(x), Val::I(y)) => match op {
                BinOp::Add => Val::I(x.wrapping_add(y)),
                BinOp::Sub => Val::I(x.wrapping_sub(y)),
                BinOp::Mul => Val::I(x.wrapping_mul(y)),
                BinOp::Div => Val::F(self.fl(x as f64 / y as f64)),
                // INT division by zero yields 0 (LANGUAGE.md s.3); results
                // are computed in i64 and wrapped (i32::MIN // -1).
                _ if y == 0 => Val::I(0),
                BinOp::FloorDiv => Val::I(floor_div(x as i64, y as i64) as i32),
                BinOp::CeilDiv => Val::I(ceil_div(x as i64, y as i64) as i32),
                BinOp::Mod => Val::I(floor_mod(x as i64, y as i64) as i32),
            },
            _ => {
                let (x, y) = (self.fl(a.as_f64()), self.fl(b.as_f64()));
                let r = match op {
                    BinOp::Add => x + y,
                    BinOp::Sub => x - y,
                    BinOp::Mul => x * y,
                    BinOp::Div => x / y,
                    BinOp::FloorDiv => (x / y).floor(),
                    BinOp::CeilDiv => (x / y).ceil(),
                    BinOp::Mod => x - y * (x / y).floor(),
                };
                Val::F(self.fl(r))
            }
        }
    }
}

fn load(t: &Tensor, i: usize) -> Val {
    match &t.data {
        Data::Int(d) => Val::I(d.get(i).copied().unwrap_or(0)),
        Data::F64(d) => Val::F(d.get(i).copied().unwrap_or(0.0)),
        Data::F32(d) => Val::F(d.get(i).map_or(0.0, |&x| x as f64)),
    }
}

/// Flat offset of an access, or `None` when any component is out of range.
fn offset(a: &Access, cur: &[i64], reads: &Reads) -> Option<i64> {
    let mut off = 0i64;
    for s in &a.slots {
        let v = eval(&s.expr, cur, reads)?;
        for (k, (&d, &st)) in s.dims.iter().zip(&s.strides).enumerate() {
            let c = v.at(k);
            if c < 0 || c >= d {
                return None;
            }
            off += c * st;
        }
    }
    Some(off)
}

/// Evaluates an index expression; `None` makes the combination out of
/// bounds (FLAT component outside its range, slice out of bounds, zero
/// divisor, overflow).
fn eval(e: &IExpr, cur: &[i64], reads: &Reads) -> Option<IVal> {
    Some(match e {
        IExpr::Var { off, rank } => IVal::T(SmallVec::from_slice(&cur[*off..off + rank])),
        IExpr::Scalar(v) => IVal::S(*v),
        IExpr::Tuple(t) => IVal::T(SmallVec::from_slice(t)),
        IExpr::Flat(args) => {
            let mut pos = 0i64;
            for (a, dims) in args {
                let v = eval(a, cur, reads)?;
                for (k, &d) in dims.iter().enumerate() {
                    let c = v.at(k);
                    if c < 0 || c >= d {
                        return None;
                    }
                    pos = pos.checked_mul(d)?.checked_add(c)?;
                }
            }
            IVal::T(SmallVec::from_slice(&[pos]))
        }
        IExpr::Slice(s) => {
            let base = offset(&s.access, cur, reads)?;
            let t = reads.get(s.access.array);
            let Data::Int(d) = &t.data else { return None };
            let mut out = SmallVec::new();
            for k in 0..s.len {
                out.push(*d.get((base + k as i64 * s.colon_stride) as usize)? as i64);
            }
            IVal::T(out)
        }
        IExpr::Bin(op, a, b) => {
            let x = eval(a, cur, reads)?;
            let y = eval(b, cur, reads)?;
            match (&x, &y) {
                (IVal::S(p), IVal::S(q)) => IVal::S(index_op(*op, *p, *q)?),
                (IVal::T(t), _) | (_, IVal::T(t)) => {
                    let mut out = SmallVec::with_capacity(t.len());
                    for k in 0..t.len() {
                        out.push(index_op(*op, x.at(k), y.at(k))?);
                    }
                    IVal::T(out)
                }
            }
        }
    })
}

fn index_op(op: IndexOp, a: i64, b: i64) -> Option<i64> {
    match op {
        IndexOp::Add => a.checked_add(b),
        IndexOp::Sub => a.checked_sub(b),
        IndexOp::Mul => a.checked_mul(b),
        _ if b == 0 => None,
        IndexOp::FloorDiv => Some(floor_div(a, b)),
        IndexOp::CeilDiv => Some(ceil_div(a, b)),
        IndexOp::Mod => Some(floor_mod(a, b)),
    }
}
