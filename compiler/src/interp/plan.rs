//! Lowering of one specialised `et` statement into an execution plan: loop
//! components with extents, index expressions with every static quantity
//! (dims, strides, FLAT bounds) precomputed, and *checks* (array accesses
//! and `DIMS(l)[t]` lookups) tagged with the loop level at which all the
//! eintups they use are known, so a failing check prunes a whole subtree of
//! the iteration domain instead of being re-tested per point.

use super::RunError;
pub use crate::arith::{ceil_div, floor_div, floor_mod};
use crate::ir::et::dims;
use crate::ir::et::{self, ArrayId, DimsList, EintupId, IndexExpr, IndexKind, IndexOp, IndexSlot, Module, OpKind, VarList};
use et_grammar::ast::{AssignOp, BinOp, CmpOp, ElemType, Func};
use et_grammar::Diagnostic;

/// A compiled index expression. Tuple components are i64.
#[derive(Clone, Debug)]
pub enum IExpr {
    /// Components `cur[off..off + rank]` of the loop state.
    Var {
        off: usize,
        rank: usize,
    },
    /// Literal or `RANK(..)`: broadcast to the partner's rank.
    Scalar(i64),
    /// `DIMS(..)`.
    Tuple(Vec<i64>),
    /// `FLAT(..)`: each argument with its own static dims.
    Flat(Vec<(IExpr, Vec<i64>)>),
    Slice(Box<SliceRead>),
    Bin(IndexOp, Box<IExpr>, Box<IExpr>),
}

/// `a[x, :, y]`: the `len` values from `offset(x, y) + k * colon_stride`.
#[derive(Clone, Debug)]
pub struct SliceRead {
    pub access: Access,
    pub colon_stride: i64,
    pub len: usize,
}

/// An array access: the flat offset is the sum over slots of
/// `component * stride`, each component checked against its dim.
#[derive(Clone, Debug)]
pub struct Access {
    pub array: ArrayId,
    pub slots: Vec<Slot>,
}

#[derive(Clone, Debug)]
pub struct Slot {
    pub expr: IExpr,
    pub dims: Vec<i64>,
    pub strides: Vec<i64>,
}

#[derive(Clone, Debug)]
pub enum CheckKind {
    /// Result: the flat offset.
    Access(Access),
    /// Result: `vec[t]`.
    DimsAt { t: IExpr, vec: Vec<i64> },
}

#[derive(Clone, Debug)]
pub struct Check {
    pub kind: CheckKind,
    /// Number of loop components that must be set before it can run.
    pub level: usize,
}

/// A right-hand-side op; `Load`/`DimsAt` refer to check results.
#[derive(Clone, Debug)]
pub enum ROp {
    Int(i32),
    Float(f64),
    Load { array: ArrayId, check: usize },
    DimsAt { check: usize },
    Random { lo: usize, hi: usize, int: bool },
    Neg(usize),
    Bin(BinOp, usize, usize),
    Cmp(CmpOp, usize, usize),
    Call(Func, Vec<usize>),
}

impl ROp {
    /// The earlier ops it uses.
    fn operands(&self) -> Vec<usize> {
        match self {
            ROp::Random { lo, hi, .. } => vec![*lo, *hi],
            ROp::Neg(a) => vec![*a],
            ROp::Bin(_, a, b) | ROp::Cmp(_, a, b) => vec![*a, *b],
            ROp::Call(_, args) => args.clone(),
            ROp::Int(_) | ROp::Float(_) | ROp::Load { .. } | ROp::DimsAt { .. } => vec![],
        }
    }
}

#[derive(Clone, Debug)]
pub struct StmtPlan {
    pub array: ArrayId,
    /// How the statement combines into its cells (`=` and `max=`/`min=`
    /// reset each reached cell first).
    pub op: AssignOp,
    /// Extent of each loop component, outermost first.
    pub extents: Vec<i64>,
    /// Check 0 is the left-hand access.
    pub checks: Vec<Check>,
    /// `by_level[l]`: checks to run once `l` components are set.
    pub by_level: Vec<Vec<usize>>,
    pub ops: Vec<ROp>,
    pub result: usize,
    /// The statement reads its own left-hand array (needs a snapshot).
    pub reads_self: bool,
}

fn internal(msg: impl Into<String>) -> RunError {
    RunError::Internal(msg.into())
}

struct Ctx<'m> {
    m: &'m Module,
    /// Loop offset of each eintup's first component (None: not a variable).
    off: Vec<Option<usize>>,
}

/// Static rank of a compiled expression: `None` is a broadcast scalar.
type Rank = Option<usize>;

impl<'m> Ctx<'m> {
    fn dims(&self, t: EintupId) -> Result<&'m [i64], RunError> {
        self.m.eintups.get(t).and_then(|e| e.dims.as_deref()).ok_or_else(|| internal("eintup without static dims (module not specialised)"))
    }

    /// The static vector of a `DIMS(..)` list.
    fn dims_of_list(&self, l: &DimsList) -> Result<Vec<i64>, RunError> {
        for t in l.eintups() {
            self.dims(t)?;
        }
        l.value(|t| self.dims(t).ok().map(<[i64]>::to_vec)).ok_or_else(|| internal("a DIMS(..) literal overflows i64"))
    }

    /// `RANK(list)`: the sum of the eintups' ranks.
    fn rank_of_list(&self, l: &[EintupId]) -> Result<usize, RunError> {
        l.iter().map(|&t| self.dims(t).map(|d| d.len())).sum()
    }

    fn position_dims(&self, a: ArrayId) -> Result<Vec<Vec<i64>>, RunError> {
        let arr = self.m.arrays.get(a).ok_or_else(|| internal("array id out of range"))?;
        arr.positions.iter().map(|p| p.dims.clone().ok_or_else(|| internal(format!("array `{}` has no static shape", arr.name)))).collect()
    }

    /// Compiles an expression; returns it with its static rank and the
    /// loop level it needs.
    fn expr(&self, e: &IndexExpr) -> Result<(IExpr, Rank, usize), RunError> {
        Ok(match &e.kind {
            IndexKind::Var(t) => {
                let rank = self.dims(*t)?.len();
                let off = self.off[*t].ok_or_else(|| internal("eintup used in an index is not a statement variable"))?;
                (IExpr::Var { off, rank }, Some(rank), off + rank)
            }
            IndexKind::Lit(n) => (IExpr::Scalar(*n), None, 0),
            IndexKind::Rank(l) => (IExpr::Scalar(self.rank_of_list(l)? as i64), None, 0),
            IndexKind::Dims(l) => {
                let v = self.dims_of_list(l)?;
                let r = v.len();
                (IExpr::Tuple(v), Some(r), 0)
            }
            IndexKind::Flat(args) => {
                let mut out = Vec::new();
                let mut level = 0;
                for a in args {
                    let (x, _, l) = self.expr(a)?;
                    level = level.max(l);
                    let dims = flat_arg_dims(self, a)?;
                    out.push((x, dims));
                }
                (IExpr::Flat(out), Some(1), level)
            }
            IndexKind::Slice { array, indices } => {
                let (s, level) = self.slice(*array, indices, e)?;
                let len = s.len;
                (IExpr::Slice(Box::new(s)), Some(len), level)
            }
            IndexKind::Bin(op, a, b) => {
                let (x, ra, la) = self.expr(a)?;
                let (y, rb, lb) = self.expr(b)?;
                let r = match (ra, rb) {
                    (Some(p), Some(q)) if p != q => return Err(internal(format!("index operands of ranks {p} and {q} meet"))),
                    (Some(p), _) | (_, Some(p)) => Some(p),
                    (None, None) => None,
                };
                (IExpr::Bin(*op, Box::new(x), Box::new(y)), r, la.max(lb))
            }
        })
    }

    fn slice(&self, array: ArrayId, indices: &[IndexSlot], e: &IndexExpr) -> Result<(SliceRead, usize), RunError> {
        let arr = &self.m.arrays[array];
        if arr.dtype != ElemType::Int {
            return Err(RunError::User(
                Diagnostic::error("E0405", format!("the slice of `{}` is used as an index, but `{}` is FLOAT", arr.name, arr.name))
                    .at(e.span, "index values must be INT"),
            ));
        }
        let pdims = self.position_dims(array)?;
        let strides = position_strides(&pdims);
        let colon = indices.iter().position(|s| matches!(s, IndexSlot::Colon(_))).ok_or_else(|| internal("slice without `:`"))?;
        let len = match pdims.get(colon).map(|d| d.as_slice()) {
            Some([l]) => usize::try_from(*l).map_err(|_| internal("negative dim"))?,
            _ => return Err(internal("the `:` position of a slice is not rank 1")),
        };
        let colon_stride = strides[colon][0];
        let (access, level) = self.access(array, indices, Some(colon))?;
        Ok((SliceRead { access, colon_stride, len }, level))
    }

    /// An access to `array`; `skip` is the `:` slot of a slice.
    fn access(&self, array: ArrayId, indices: &[IndexSlot], skip: Option<usize>) -> Result<(Access, usize), RunError> {
        let pdims = self.position_dims(array)?;
        if pdims.len() != indices.len() {
            return Err(internal(format!("`{}` accessed with {} indices, signature has {}", self.m.arrays[array].name, indices.len(), pdims.len())));
        }
        let strides = position_strides(&pdims);
        let mut slots = Vec::new();
        let mut level = 0;
        for (k, slot) in indices.iter().enumerate() {
            if Some(k) == skip {
                continue;
            }
            let IndexSlot::Expr(e) = slot else { return Err(internal("`:` outside a slice")) };
            let (x, r, l) = self.expr(e)?;
            if let Some(r) = r {
                if r != pdims[k].len() {
                    return Err(internal(format!("index of rank {r} at a position of rank {}", pdims[k].len())));
                }
            }
            level = level.max(l);
            slots.push(Slot { expr: x, dims: pdims[k].clone(), strides: strides[k].clone() });
        }
        Ok((Access { array, slots }, level))
    }
}

/// Row-major strides of a shape given as position dims.
fn position_strides(pdims: &[Vec<i64>]) -> Vec<Vec<i64>> {
    let flat: Vec<i64> = pdims.iter().flatten().copied().collect();
    let mut st = vec![0i64; flat.len()];
    let mut s = 1i64;
    for i in (0..flat.len()).rev() {
        st[i] = s;
        s = s.saturating_mul(flat[i].max(0));
    }
    let mut out = Vec::new();
    let mut i = 0;
    for p in pdims {
        out.push(st[i..i + p.len()].to_vec());
        i += p.len();
    }
    out
}

/// `DIMS` of a `FLAT` argument (shared with `lower-to-loops`), with the
/// interpreter's error conventions.
fn flat_arg_dims(cx: &Ctx, e: &IndexExpr) -> Result<Vec<i64>, RunError> {
    dims::flat_arg_dims(cx.m, e).map_err(|err| match err {
        dims::FlatDimsError::User(d) => RunError::User(d),
        dims::FlatDimsError::Internal(m) => internal(m),
    })
}

fn collect_vars(e: &IndexExpr, out: &mut VarList) {
    crate::sema::resolve::index_vars(e, out)
}

fn collect_slot_vars(slots: &[IndexSlot], out: &mut VarList) {
    crate::sema::resolve::slot_vars(slots, out)
}

/// Eintups that occur inside a compound index expression (anything but a
/// bare eintup in a slot). Looping over them first lets the bounds checks
/// of those expressions prune early.
fn compound_vars(slots: &[IndexSlot], out: &mut VarList) {
    for s in slots {
        if let IndexSlot::Expr(e) = s {
            if !matches!(e.kind, IndexKind::Var(_)) {
                collect_vars(e, out);
            }
        }
    }
}

pub fn plan_stmt(m: &Module, s: &et::Stmt) -> Result<StmtPlan, RunError> {
    // Variables: the statement's own list plus anything it missed.
    let mut all = VarList::from_ids(&s.vars);
    let mut compound = VarList::default();
    collect_slot_vars(&s.indices, &mut all);
    compound_vars(&s.indices, &mut compound);
    let reads_self = s.reads(s.array);
    for op in &s.ops {
        match &op.kind {
            OpKind::Read { indices, .. } => {
                collect_slot_vars(indices, &mut all);
                compound_vars(indices, &mut compound);
            }
            OpKind::DimsAt(_, t) => {
                collect_vars(t, &mut all);
                collect_vars(t, &mut compound);
            }
            _ => {}
        }
    }
    let mut order: Vec<EintupId> = all.ids().iter().copied().filter(|&t| compound.contains(t)).collect();
    order.extend(all.ids().iter().copied().filter(|&t| !compound.contains(t)));

    let mut off = vec![None; m.eintups.len()];
    let mut extents = Vec::new();
    for &t in &order {
        let d = m.eintups.get(t).and_then(|e| e.dims.as_ref()).ok_or_else(|| internal("eintup without static dims (module not specialised)"))?;
        off[t] = Some(extents.len());
        extents.extend_from_slice(d);
    }
    let cx = Ctx { m, off };

    let mut checks = Vec::new();
    let (lhs, level) = cx.access(s.array, &s.indices, None)?;
    checks.push(Check { kind: CheckKind::Access(lhs), level });

    let mut ops = Vec::new();
    for op in &s.ops {
        let r = match &op.kind {
            OpKind::ConstInt(i) => ROp::Int(*i as i32),
            OpKind::ConstFloat(f) => ROp::Float(*f),
            OpKind::Rank(l) => ROp::Int(cx.rank_of_list(l)? as i32),
            OpKind::DimsAt(l, t) => {
                let vec = cx.dims_of_list(l)?;
                let (t, _, level) = cx.expr(t)?;
                checks.push(Check { kind: CheckKind::DimsAt { t, vec }, level });
                ROp::DimsAt { check: checks.len() - 1 }
            }
            OpKind::Read { array, indices } => {
                let (acc, level) = cx.access(*array, indices, None)?;
                checks.push(Check { kind: CheckKind::Access(acc), level });
                ROp::Load { array: *array, check: checks.len() - 1 }
            }
            OpKind::Random { lo, hi, dtype } => ROp::Random { lo: *lo, hi: *hi, int: *dtype == ElemType::Int },
            OpKind::Neg(a) => ROp::Neg(*a),
            OpKind::Binary(b, x, y) => ROp::Bin(*b, *x, *y),
            OpKind::Compare(c, x, y) => ROp::Cmp(*c, *x, *y),
            OpKind::Call(f, args) => ROp::Call(*f, args.clone()),
        };
        ops.push(r);
    }
    let n = ops.len();
    for (i, op) in ops.iter().enumerate() {
        if op.operands().iter().any(|&v| v >= i) {
            return Err(internal("SSA operand does not refer to an earlier op"));
        }
    }
    if s.result >= n {
        return Err(internal("statement result out of range"));
    }
    let mut by_level = vec![Vec::new(); extents.len() + 1];
    for (i, c) in checks.iter().enumerate() {
        by_level[c.level.min(extents.len())].push(i);
    }
    Ok(StmtPlan { array: s.array, op: s.op, extents, checks, by_level, ops, result: s.result, reads_self })
}
