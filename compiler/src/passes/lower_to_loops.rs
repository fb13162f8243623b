//! `lower-to-loops`: specialised `et` module -> `loop` dialect.
//!
//! One buffer per array; per statement (input statements `a[..] = RANDOM`
//! excepted: their buffers are filled by the caller):
//! - a *snapshot* kernel when the statement reads the array it writes
//!   (docs/language.md: every read sees the arrays as they were before the
//!   statement), copying it to a temporary that all reads then use;
//! - for `=`, a *reset* kernel that stores 0 (-0.0 for floats) into
//!   exactly the cells the statement reaches (same loops and guards), which
//!   together with accumulation implements "reset a cell when `=` first
//!   reaches it";
//! - the main kernel: one loop per eintup component (left-hand-side
//!   variables outermost, all `reduce` until `parallelize` runs), a guard
//!   for every index component (`0 <= c < dim`, FLAT arguments, `DIMS()[t]`
//!   lookups, non-constant divisors), `load_index` for slices, and the
//!   right-hand side as scalar values accumulated into the left cell.
//!
//! Each guard and `load_index` is placed right after the loop of the last
//! variable it uses, so a failing guard skips a whole subtree (the same
//! pruning the interpreter does) and `tighten-bounds` finds it next to the
//! loop it constrains.

use super::PassError;
use crate::ir::et::dims;
use crate::ir::et::symbolic::SymbolicDims;
use crate::ir::et::{self, ArrayId, DimsList, EintupId, IndexExpr, IndexKind, IndexSlot, Module, OpKind};
use crate::ir::loops::FloatWidth;
use crate::ir::loops::*;
use crate::sema::symbolic;
use et_grammar::ast::{BinOp, ElemType};
use et_grammar::Diagnostic;

/// The extents lowering reads: every eintup's dims and every signature
/// position's, as index expressions. Constants for a specialised module;
/// expressions over the module's dim symbols for a dynamic build
/// (`bind-dims{dynamic}`, docs/dynamic-shapes.md), where the same code
/// gives loop bounds, guards and strides that mention symbols.
pub struct Extents {
    pub symbols: Vec<Dim>,
    pub eintups: Vec<Vec<IExpr>>,
    /// Per array, per signature position.
    pub positions: Vec<Vec<Vec<IExpr>>>,
    /// Every eintup's dims when all are constants (a `FLAT` argument's
    /// own range is then the static rule's), computed once.
    statics: Option<Vec<Vec<i64>>>,
}

impl Extents {
    /// A specialised module's static extents.
    pub fn of_specialized(m: &Module) -> Result<Extents, PassError> {
        if !m.is_specialized() {
            // Reachable from printed IR of a module not yet specialised.
            return Err(PassError::Message("etopt: error: pass `lower-to-loops` needs a specialised module: run `specialize` first".into()));
        }
        let consts = |d: &Option<Vec<i64>>| d.as_deref().map(static_shape).unwrap_or_default();
        Ok(Extents::new(
            Vec::new(),
            m.eintups.iter().map(|e| consts(&e.dims)).collect(),
            m.arrays.iter().map(|a| a.positions.iter().map(|p| consts(&p.dims)).collect()).collect(),
        ))
    }

    /// A dynamic module's extents (ranks fixed, dims over symbols).
    pub fn of_symbolic(m: &Module, sym: &SymbolicDims) -> Result<Extents, PassError> {
        let positions = (0..m.arrays.len()).map(|a| symbolic::array_positions(m, sym, a)).collect::<Result<_, _>>().map_err(|d| PassError::User(vec![d]))?;
        Ok(Extents::new(sym.symbols.clone(), sym.eintups.clone(), positions))
    }

    fn new(symbols: Vec<Dim>, eintups: Vec<Vec<IExpr>>, positions: Vec<Vec<Vec<IExpr>>>) -> Extents {
        let statics = eintups.iter().map(|d| d.iter().map(IExpr::as_const).collect()).collect();
        Extents { symbols, eintups, positions, statics }
    }
}

/// Lowers a specialised module. `float` is the width of FLOAT.
pub fn lower(m: &Module, float: FloatWidth) -> Result<LoopModule, PassError> {
    lower_with(m, &Extents::of_specialized(m)?, float)
}

/// Lowers a module at `ext` (static or symbolic): every statement but
/// the inputs' definitions.
pub fn lower_with(m: &Module, ext: &Extents, float: FloatWidth) -> Result<LoopModule, PassError> {
    let fty = float.dtype();
    let mut out = LoopModule { dims: ext.symbols.clone(), buffers: buffers(m, ext, fty), ..LoopModule::default() };
    for (si, s) in m.stmts.iter().enumerate() {
        let arr = &m.arrays[s.array];
        if arr.is_input && arr.def_stmt == si {
            continue;
        }
        lower_stmt(m, ext, si, s, fty, &mut out)?;
    }
    Ok(out)
}

/// The statements that define input arrays (their `RANDOM` calls), lowered
/// like any other statement, over the same buffers as [`lower`]: the
/// kernels a bundle runs to make the inputs its caller leaves out. Returns
/// each input buffer with the statement that writes it (the `stmt` of its
/// kernels), in module order.
pub fn lower_inputs(m: &Module, float: FloatWidth) -> Result<(LoopModule, Vec<(BufId, usize)>), PassError> {
    let ext = Extents::of_specialized(m)?;
    let fty = float.dtype();
    let mut out = LoopModule { buffers: buffers(m, &ext, fty), ..LoopModule::default() };
    let mut writers = Vec::new();
    for (si, s) in m.stmts.iter().enumerate() {
        let arr = &m.arrays[s.array];
        if !(arr.is_input && arr.def_stmt == si) {
            continue;
        }
        lower_stmt(m, &ext, si, s, fty, &mut out)?;
        writers.push((s.array, si));
    }
    Ok((out, writers))
}

/// One buffer per array, in module order: inputs, outputs (the program's
/// results: its outputs section, or without one the arrays nothing reads
/// after their last write, as `run` prints), temporaries.
fn buffers(m: &Module, ext: &Extents, fty: DType) -> Vec<Buffer> {
    let results = m.result_arrays();
    let mut out = Vec::new();
    for (id, a) in m.arrays.iter().enumerate() {
        let role = if a.is_input {
            Role::Input
        } else if results.contains(&id) {
            Role::Output
        } else {
            Role::Temp
        };
        out.push(Buffer {
            name: a.name.clone(),
            dtype: dtype_of(a.dtype, fty),
            shape: ext.positions[id].concat(),
            role,
            init: if a.is_input { Init::Input } else { Init::Zero },
        });
    }
    out
}

fn dtype_of(t: ElemType, fty: DType) -> DType {
    match t {
        ElemType::Int => DType::I32,
        ElemType::Float => fty,
    }
}

/// A lowered index value: a scalar that broadcasts, or a tuple.
#[derive(Clone, Debug)]
enum Tup {
    Scalar(IExpr),
    Tuple(Vec<IExpr>),
}

impl Tup {
    fn at(&self, k: usize) -> IExpr {
        match self {
            Tup::Scalar(e) => e.clone(),
            Tup::Tuple(v) => v.get(k).cloned().unwrap_or(IExpr::Const(-1)),
        }
    }
}

/// A guard condition or an index load, placed at a loop level.
enum ItemKind {
    Cond(Cond),
    Load { var: VarId, buf: BufId, offset: IExpr },
}

struct Item {
    level: usize,
    kind: ItemKind,
}

struct StmtLowering<'m> {
    m: &'m Module,
    ext: &'m Extents,
    buffers: &'m [Buffer],
    vars: Vec<Var>,
    /// Level of each variable: loop `i` binds level `i + 1`; a loaded
    /// value, the level of its `load_index`.
    level: Vec<usize>,
    /// Component variables of each eintup that is a loop variable.
    comps: Vec<Option<Vec<VarId>>>,
    items: Vec<Item>,
    /// Reads of the left array go to its snapshot.
    redirect: Option<(ArrayId, BufId)>,
    loaded: usize,
}

fn add(a: IExpr, b: IExpr) -> IExpr {
    match (&a, &b) {
        (IExpr::Const(0), _) => b,
        (_, IExpr::Const(0)) => a,
        _ => IExpr::add(a, b),
    }
}

fn mul(a: IExpr, c: IExpr) -> IExpr {
    match c {
        IExpr::Const(1) => a,
        _ => IExpr::mul(a, c),
    }
}

/// Why a `FLAT` argument's dims could not be computed, as the pass says it.
fn flat_dims_error(err: dims::FlatDimsError) -> PassError {
    match err {
        dims::FlatDimsError::User(d) => PassError::User(vec![d]),
        dims::FlatDimsError::Internal(s) => internal(s),
    }
}

fn internal(msg: impl Into<String>) -> PassError {
    PassError::Internal(msg.into())
}

impl<'m> StmtLowering<'m> {
    fn level_of(&self, e: &IExpr) -> usize {
        let mut l = 0;
        e.for_each_var(&mut |v| l = l.max(self.level[v]));
        l
    }

    fn cond(&mut self, c: Cond) {
        if self.items.iter().any(|it| matches!(&it.kind, ItemKind::Cond(x) if *x == c)) {
            return;
        }
        let level = c.exprs().iter().map(|e| self.level_of(e)).max().unwrap_or(0);
        self.items.push(Item { level, kind: ItemKind::Cond(c) });
    }

    fn in_range(&mut self, e: IExpr, hi: IExpr) {
        self.cond(Cond::InRange { e, lo: IExpr::Const(0), hi });
    }

    fn dims(&self, t: EintupId) -> Result<&'m [IExpr], PassError> {
        self.ext.eintups.get(t).map(Vec::as_slice).ok_or_else(|| internal("eintup without dims"))
    }

    /// The vector of a `DIMS(..)` list.
    fn dims_list(&self, l: &DimsList) -> Result<Vec<IExpr>, PassError> {
        symbolic::dims_list(l, |t| self.ext.eintups.get(t).cloned()).ok_or_else(|| internal("a DIMS(..) literal overflows i64"))
    }

    /// The dims of a `FLAT` argument: its own range (docs/language.md s.4).
    fn flat_dims(&self, a: &IndexExpr) -> Result<Vec<IExpr>, PassError> {
        if let Some(st) = &self.ext.statics {
            return Ok(static_shape(&dims::flat_arg_dims_with(self.m, st, a).map_err(flat_dims_error)?));
        }
        match symbolic::position_dims(a, &self.ext.eintups) {
            Ok(d) => Ok(d),
            // A slice inside: its range attribute bounds it, whatever row
            // it reads, as a static build evaluates it; so here too where
            // every dim that bound depends on is static.
            Err(err) => match self.flat_dims_by_ranges(a)? {
                Some(d) => Ok(d),
                None => Err(PassError::User(vec![symbolic::not_symbolic(match err {
                    symbolic::PositionError::NotSymbolic(sp) => sp,
                    symbolic::PositionError::Static(_) => a.span,
                })])),
            },
        }
    }

    /// The dims of `FLAT` argument `a` by the static rule over its slices'
    /// ranges, when every dim they depend on is static; `None` otherwise.
    fn flat_dims_by_ranges(&self, a: &IndexExpr) -> Result<Option<Vec<IExpr>>, PassError> {
        let consts: Vec<Option<Vec<i64>>> = self.ext.eintups.iter().map(|d| d.iter().map(IExpr::as_const).collect()).collect();
        let mut sliced = false;
        a.for_each(&mut |x| sliced |= matches!(x.kind, IndexKind::Slice { .. }));
        if !sliced || dims::flat_arg_eintups(self.m, a).iter().any(|&t| consts.get(t).is_none_or(Option::is_none)) {
            return Ok(None);
        }
        let consts: Vec<Vec<i64>> = consts.into_iter().map(Option::unwrap_or_default).collect();
        Ok(Some(static_shape(&dims::flat_arg_dims_with(self.m, &consts, a).map_err(flat_dims_error)?)))
    }

    fn read_buf(&self, a: ArrayId) -> BufId {
        match self.redirect {
            Some((arr, snap)) if arr == a => snap,
            _ => a,
        }
    }

    fn expr(&mut self, e: &IndexExpr) -> Result<Tup, PassError> {
        Ok(match &e.kind {
            IndexKind::Var(t) => {
                let c = self.comps.get(*t).and_then(|c| c.clone()).ok_or_else(|| internal("an index uses an eintup that is not a statement variable"))?;
                Tup::Tuple(c.into_iter().map(IExpr::Var).collect())
            }
            IndexKind::Lit(n) => Tup::Scalar(IExpr::Const(*n)),
            IndexKind::Rank(l) => {
                let mut r = 0;
                for &t in l {
                    r += self.dims(t)?.len() as i64;
                }
                Tup::Scalar(IExpr::Const(r))
            }
            IndexKind::Dims(l) => Tup::Tuple(self.dims_list(l)?),
            IndexKind::Flat(args) => {
                let mut pos: Option<IExpr> = None;
                for a in args {
                    let x = self.expr(a)?;
                    let d = self.flat_dims(a)?;
                    for (k, dk) in d.into_iter().enumerate() {
                        let c = x.at(k);
                        self.in_range(c.clone(), dk.clone());
                        pos = Some(match pos {
                            None => c,
                            Some(p) => add(mul(p, dk), c),
                        });
                    }
                }
                // FLAT of no components is the single position 0.
                Tup::Tuple(vec![pos.unwrap_or(IExpr::Const(0))])
            }
            IndexKind::Slice { array, indices } => self.slice(*array, indices, e)?,
            IndexKind::Bin(op, a, b) => {
                let x = self.expr(a)?;
                let y = self.expr(b)?;
                let n = match (&x, &y) {
                    (Tup::Tuple(p), Tup::Tuple(q)) if p.len() != q.len() => {
                        return Err(internal(format!("index operands of ranks {} and {} meet", p.len(), q.len())))
                    }
                    (Tup::Tuple(p), _) | (_, Tup::Tuple(p)) => Some(p.len()),
                    _ => None,
                };
                let op = symbolic::index_bin(*op);
                let comp = |k: usize, me: &mut Self| {
                    let (p, q) = (x.at(k), y.at(k));
                    if matches!(op, IBin::FloorDiv | IBin::CeilDiv | IBin::Mod) && q.as_const().is_none_or(|c| c == 0) {
                        // A zero divisor makes the instantiation out of bounds.
                        me.cond(Cond::NonZero(q.clone()));
                    }
                    IExpr::bin(op, p, q)
                };
                match n {
                    None => Tup::Scalar(comp(0, self)),
                    Some(n) => Tup::Tuple((0..n).map(|k| comp(k, self)).collect()),
                }
            }
        })
    }

    /// `a[x, :, y]`: guards for the other slots, then one `load_index` per
    /// element of the `:` position.
    fn slice(&mut self, array: ArrayId, indices: &[IndexSlot], e: &IndexExpr) -> Result<Tup, PassError> {
        let arr = &self.m.arrays[array];
        if arr.dtype != ElemType::Int {
            return Err(PassError::User(vec![Diagnostic::error(
                "E0405",
                format!("the slice of `{}` is used as an index, but `{}` is FLOAT", arr.name, arr.name),
            )
            .at(e.span, "index values must be INT")]));
        }
        let colon = indices.iter().position(|s| matches!(s, IndexSlot::Colon(_))).ok_or_else(|| internal("slice without `:`"))?;
        let len = match self.ext.positions[array].get(colon).map(Vec::as_slice) {
            Some([IExpr::Const(l)]) => *l,
            Some([_]) => {
                // One `load_index` per element: the count is code.
                return Err(PassError::User(vec![Diagnostic::error("E0321", format!("the slice of `{}` has a symbolic length", arr.name))
                    .at(e.span, "a slice's length decides the code, so it must be static")
                    .note("bind the eintup of its `:` position at build time (--bind NAME=[..])")]));
            }
            _ => return Err(internal("the `:` position of a slice is not rank 1")),
        };
        let buf = self.read_buf(array);
        let (base, strides) = self.access(array, indices, Some(colon))?;
        let colon_stride = strides[colon].first().cloned().unwrap_or(IExpr::Const(1));
        let mut out = Vec::new();
        for k in 0..len.max(0) {
            let offset = add(base.clone(), IExpr::fold(IBin::Mul, colon_stride.clone(), IExpr::Const(k)));
            let var = self.vars.len();
            self.vars.push(Var { name: format!("ld{}", self.loaded) });
            self.loaded += 1;
            let level = self.level_of(&offset);
            self.level.push(level);
            self.items.push(Item { level, kind: ItemKind::Load { var, buf, offset } });
            out.push(IExpr::Var(var));
        }
        Ok(Tup::Tuple(out))
    }

    /// Offset of an access (guards emitted for every component) and the
    /// per-position strides; `skip` is the `:` slot of a slice.
    fn access(&mut self, array: ArrayId, indices: &[IndexSlot], skip: Option<usize>) -> Result<(IExpr, Vec<Vec<IExpr>>), PassError> {
        let arr = &self.m.arrays[array];
        let pdims = &self.ext.positions[array];
        if pdims.len() != indices.len() {
            return Err(internal(format!("`{}` accessed with {} indices, signature has {}", arr.name, indices.len(), pdims.len())));
        }
        let flat = self.buffers[array].strides();
        let mut strides = Vec::new();
        let mut i = 0;
        for p in pdims {
            strides.push(flat[i..i + p.len()].to_vec());
            i += p.len();
        }
        let mut off = IExpr::Const(0);
        for (k, slot) in indices.iter().enumerate() {
            if Some(k) == skip {
                continue;
            }
            let IndexSlot::Expr(e) = slot else { return Err(internal("`:` outside a slice")) };
            let x = self.expr(e)?;
            if let Tup::Tuple(v) = &x {
                if v.len() != pdims[k].len() {
                    return Err(internal(format!("index of rank {} at a position of rank {}", v.len(), pdims[k].len())));
                }
            }
            for (j, d) in pdims[k].iter().enumerate() {
                let c = x.at(j);
                self.in_range(c.clone(), d.clone());
                off = add(off, mul(c, strides[k][j].clone()));
            }
        }
        Ok((off, strides))
    }
}

/// The variables of a statement in loop order: left-hand-side variables
/// first (they become the parallel loops), then the others.
fn loop_order(s: &et::Stmt) -> Vec<EintupId> {
    let mut all = et::VarList::from_ids(&s.vars);
    crate::sema::resolve::slot_vars(&s.indices, &mut all);
    for op in &s.ops {
        match &op.kind {
            OpKind::Read { indices, .. } => crate::sema::resolve::slot_vars(indices, &mut all),
            OpKind::DimsAt(_, t) => crate::sema::resolve::index_vars(t, &mut all),
            _ => {}
        }
    }
    all.into_vec()
}

fn lower_stmt(m: &Module, ext: &Extents, si: usize, s: &et::Stmt, fty: DType, out: &mut LoopModule) -> Result<(), PassError> {
    let lhs = s.array;
    let lhs_name = m.arrays[lhs].name.clone();
    let lhs_ty = out.buffers[lhs].dtype;

    // Snapshot: copy the left array before anything of this statement runs.
    let redirect = if s.reads(lhs) {
        let name = out.unique_buffer_name(format!("{lhs_name}_snap{si}"));
        let b = Buffer { name, role: Role::Transient, init: Init::Zero, ..out.buffers[lhs].clone() };
        let len = b.len_expr();
        out.buffers.push(b);
        let snap = out.buffers.len() - 1;
        let i = IExpr::Var(0);
        out.kernels.push(Kernel {
            name: format!("s{si}_{lhs_name}_snapshot"),
            role: KernelRole::Snapshot,
            stmt: Some(si),
            vars: vec![Var { name: "i".into() }],
            body: vec![Node::For(For {
                var: 0,
                lo: IExpr::Const(0),
                hi: len,
                kind: LoopKind::Reduce,
                body: vec![Node::Compute(Compute {
                    values: vec![Value { op: VOp::Load { buf: lhs, offset: i.clone() }, dtype: lhs_ty }],
                    write: Write { kind: WriteKind::Store, buf: snap, offset: i, value: 0 },
                })],
            })],
            multiples: Multiples::default(),
        });
        Some((lhs, snap))
    } else {
        None
    };

    // Loop variables: one per eintup component.
    let order = loop_order(s);
    let mut lw = StmtLowering {
        m,
        ext,
        buffers: &out.buffers,
        vars: Vec::new(),
        level: Vec::new(),
        comps: vec![None; m.eintups.len()],
        items: Vec::new(),
        redirect,
        loaded: 0,
    };
    let mut loops: Vec<(VarId, IExpr)> = Vec::new();
    for &t in &order {
        let e = &m.eintups[t];
        let dims = ext.eintups.get(t).ok_or_else(|| internal("eintup without dims"))?;
        let mut c = Vec::new();
        for (k, d) in dims.iter().cloned().enumerate() {
            let v = lw.vars.len();
            lw.vars.push(Var { name: format!("{}_{k}", e.name) });
            loops.push((v, d));
            lw.level.push(loops.len());
            c.push(v);
        }
        lw.comps[t] = Some(c);
    }

    let (lhs_off, _) = lw.access(lhs, &s.indices, None)?;

    // Right-hand side.
    let mut values: Vec<Value> = Vec::new();
    let push = |values: &mut Vec<Value>, op: VOp, dtype: DType| -> ValId {
        values.push(Value { op, dtype });
        values.len() - 1
    };
    let cast = |values: &mut Vec<Value>, v: ValId, to: DType| -> ValId {
        if values[v].dtype == to {
            v
        } else {
            values.push(Value { op: VOp::Cast(v), dtype: to });
            values.len() - 1
        }
    };
    let mut map: Vec<ValId> = Vec::new();
    for op in &s.ops {
        let id = match &op.kind {
            OpKind::ConstInt(i) => push(&mut values, VOp::Const(*i as i32 as f64), DType::I32),
            OpKind::ConstFloat(f) => {
                let f = if fty == DType::F32 { *f as f32 as f64 } else { *f };
                push(&mut values, VOp::Const(f), fty)
            }
            OpKind::Rank(l) => {
                let mut r = 0;
                for &t in l {
                    r += lw.dims(t)?.len() as i64;
                }
                push(&mut values, VOp::Const(r as f64), DType::I32)
            }
            OpKind::DimsAt(l, t) => {
                let Some(table) = lw.dims_list(l)?.iter().map(IExpr::as_const).collect::<Option<Vec<i64>>>() else {
                    return Err(PassError::User(vec![Diagnostic::error("E0321", "`DIMS(..)[k]` of symbolic dims is not supported in a dynamic build")
                        .at(s.span, "in this statement")
                        .note("bind the eintups it reads at build time (--bind NAME=[..])")]));
                };
                let idx = lw.expr(t)?.at(0);
                lw.in_range(idx.clone(), IExpr::Const(table.len() as i64));
                push(&mut values, VOp::Lookup { table, index: idx }, DType::I32)
            }
            OpKind::Read { array, indices } => {
                let (off, _) = lw.access(*array, indices, None)?;
                let buf = lw.read_buf(*array);
                push(&mut values, VOp::Load { buf, offset: off }, lw.buffers[*array].dtype)
            }
            OpKind::Random { lo, hi, dtype } => {
                let ty = dtype_of(*dtype, fty);
                let bound = |values: &mut Vec<Value>, v: ValId| -> ValId {
                    if ty == DType::I32 && values[v].dtype.is_float() {
                        // INT draws use floor of FLOAT bounds.
                        let one = push(values, VOp::Const(1.0), values[v].dtype);
                        let dt = values[v].dtype;
                        let f = push(values, VOp::Bin(BinOp::FloorDiv, v, one), dt);
                        cast(values, f, ty)
                    } else {
                        cast(values, v, ty)
                    }
                };
                let lo = bound(&mut values, map[*lo]);
                let hi = bound(&mut values, map[*hi]);
                push(&mut values, VOp::Random { stream: lhs_name.clone(), counter: lhs_off.clone(), lo, hi }, ty)
            }
            OpKind::Neg(a) => {
                let a = map[*a];
                let dt = values[a].dtype;
                push(&mut values, VOp::Neg(a), dt)
            }
            OpKind::Binary(op, a, b) => {
                let (a, b) = (map[*a], map[*b]);
                let (ta, tb) = (values[a].dtype, values[b].dtype);
                if ta == DType::I32 && tb == DType::I32 {
                    if *op == BinOp::Div {
                        // INT / INT is FLOAT, computed in f64 then rounded
                        // to the FLOAT width (as the interpreter does).
                        let x = cast(&mut values, a, DType::F64);
                        let y = cast(&mut values, b, DType::F64);
                        let q = push(&mut values, VOp::Bin(BinOp::Div, x, y), DType::F64);
                        cast(&mut values, q, fty)
                    } else {
                        push(&mut values, VOp::Bin(*op, a, b), DType::I32)
                    }
                } else {
                    let x = cast(&mut values, a, fty);
                    let y = cast(&mut values, b, fty);
                    push(&mut values, VOp::Bin(*op, x, y), fty)
                }
            }
            OpKind::Compare(op, a, b) => {
                // Compared in the operands' join.
                let (a, b) = (map[*a], map[*b]);
                let t = if values[a].dtype == DType::I32 && values[b].dtype == DType::I32 { DType::I32 } else { fty };
                let (x, y) = (cast(&mut values, a, t), cast(&mut values, b, t));
                push(&mut values, VOp::Cmp(*op, x, y), DType::I32)
            }
            OpKind::Call(f, args) => {
                // The operands in the result's type (`select`'s condition
                // as it is).
                let t = dtype_of(op.ty.dtype, fty);
                let args: Vec<ValId> =
                    args.iter().enumerate().map(|(k, a)| if *f == Func::Select && k == 0 { map[*a] } else { cast(&mut values, map[*a], t) }).collect();
                push(&mut values, VOp::Call(*f, args), t)
            }
        };
        map.push(id);
    }
    let result = *map.get(s.result).ok_or_else(|| internal("statement result out of range"))?;
    let result = cast(&mut values, result, lhs_ty);

    let StmtLowering { vars, items, .. } = lw;
    let nest = |inner: Node| build_nest(&loops, &items, inner);

    let kind = WriteKind::of_statement(s.op);
    if s.op.resets() {
        // A cell is reset to the combine's identity (`WriteKind::identity`:
        // -0.0 for a float sum, the zero that adds exactly, -inf for a
        // max): the reset and the combine then leave what the interpreter
        // does, the first value as it is and the others combined (+0.0
        // would turn a sum of -0.0 terms into +0.0).
        let zero = Compute {
            values: vec![Value { op: VOp::Const(kind.identity(lhs_ty)), dtype: lhs_ty }],
            write: Write { kind: WriteKind::Store, buf: lhs, offset: lhs_off.clone(), value: 0 },
        };
        out.kernels.push(Kernel {
            name: format!("s{si}_{lhs_name}_reset"),
            role: KernelRole::Reset,
            stmt: Some(si),
            vars: vars.clone(),
            body: nest(Node::Compute(zero)),
            multiples: Multiples::default(),
        });
    }
    let main = Compute { values, write: Write { kind, buf: lhs, offset: lhs_off, value: result } };
    out.kernels.push(Kernel {
        name: format!("s{si}_{lhs_name}"),
        role: KernelRole::Main,
        stmt: Some(si),
        vars,
        body: nest(Node::Compute(main)),
        multiples: Multiples::default(),
    });
    Ok(())
}

/// Builds the loop nest: at each level, the items of that level (in the
/// order they were emitted, so a load follows the guards of its offset and
/// precedes the guards that use it), then the next loop.
fn build_nest(loops: &[(VarId, IExpr)], items: &[Item], inner: Node) -> Vec<Node> {
    fn level(loops: &[(VarId, IExpr)], items: &[Item], l: usize, inner: &Node) -> Vec<Node> {
        let mut body = if l == loops.len() {
            vec![inner.clone()]
        } else {
            let (var, hi) = loops[l].clone();
            vec![Node::For(For { var, lo: IExpr::Const(0), hi, kind: LoopKind::Reduce, body: level(loops, items, l + 1, inner) })]
        };
        // Wrap from the last item outwards; consecutive conditions share
        // one guard.
        let mut pending: Vec<Cond> = Vec::new();
        for it in items.iter().rev().filter(|it| it.level.min(loops.len()) == l) {
            match &it.kind {
                ItemKind::Cond(c) => pending.insert(0, c.clone()),
                ItemKind::Load { var, buf, offset } => {
                    if !pending.is_empty() {
                        body = vec![Node::Guard(Guard { conds: std::mem::take(&mut pending), body })];
                    }
                    body.insert(0, Node::LoadIndex { var: *var, buf: *buf, offset: offset.clone() });
                }
            }
        }
        if !pending.is_empty() {
            body = vec![Node::Guard(Guard { conds: pending, body })];
        }
        body
    }
    level(loops, items, 0, &inner)
}

/// What `lower-to-loops` is told: the width of FLOAT (`--float`).
#[derive(Clone, Copy, Debug)]
pub struct LowerToLoopsOptions {
    pub float: FloatWidth,
}

impl super::PassOptions for LowerToLoopsOptions {
    const KEYS: &'static [(&'static str, &'static str)] = &[super::spec::FLOAT];
    fn from_driver(d: &super::DriverOptions) -> Self {
        LowerToLoopsOptions { float: d.float }
    }
    fn set(&mut self, key: &str, value: &str) -> Result<(), String> {
        match key {
            "float" => self.float = super::spec::parse_float(value)?,
            _ => return Err(format!("option `{key}` is not declared")),
        }
        Ok(())
    }
}

/// The pass: et (specialised) -> loop.
pub fn run(unit: &mut super::Unit, opts: &LowerToLoopsOptions) -> Result<Option<String>, PassError> {
    let super::Ir::Et(prog) = &unit.ir else { return Err(PassError::Internal("lower-to-loops runs on the et level".into())) };
    let m = match &prog.module.symbolic {
        Some(sym) => lower_with(&prog.module, &Extents::of_symbolic(&prog.module, sym)?, opts.float)?,
        None => lower(&prog.module, opts.float)?,
    };
    let guards = m.kernels.iter().map(|k| k.guard_count());
    let stats = format!("{} buffers, {} kernels, {} guard conditions", m.buffers.len(), m.kernels.len(), guards.sum::<usize>());
    unit.ir = super::Ir::Loop(m);
    Ok(Some(stats))
}
