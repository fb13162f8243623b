//! The `et` dialect: the first IR level, one statement per source statement,
//! every value typed by a *signature* (element type + the eintups it varies
//! over). Index expressions are kept as trees (like MLIR affine maps, they
//! are attributes of the op that uses them); right-hand sides are SSA ops.
//!
//! A module is *rank-polymorphic* while some eintup's rank or dims are
//! unknown, and *specialised* once every eintup has static dims (pass
//! `specialize`). Backends and the interpreter take specialised modules.

/// `DIMS(expr)` by interval arithmetic: the dialect's shape function, which
/// sema, the verifier, lowering and the interpreter all evaluate.
pub mod dims;
pub mod parse;
pub mod print;
pub mod symbolic;
pub mod syntax;
pub mod verify;

use et_grammar::ast::AssignOp;
/// Element type as the language writes it: INT (i32) or FLOAT (f64, or
/// f32 when compiled with `--float f32`; the machine types are
/// `loops::DType`).
pub use et_grammar::ast::ElemType;
use et_grammar::Span;

/// The largest rank of an eintup, of an array (the sum of its positions'
/// ranks) and of a statement's iteration space (the sum of its
/// variables' ranks). Why 64: past 64 dimensions every configuration whose
/// dims are all at least 2 has more than 2^64 elements or iterations,
/// which no memory holds and no loop finishes, so only dims of 0 and 1
/// could ever run, and those add nothing a smaller rank cannot say. 64 is
/// also NumPy's limit on dimensions (NPY_MAXDIMS in NumPy 2), which the
/// `.npy` files and `check`'s framework bridge go through. Checked by rank
/// inference and configuration choice before anything is allocated
/// (E0208), and by the verifier; it also bounds how deep a statement's
/// loop nest can be, so no pass, printer or backend recurses deeper than
/// a few times 64 (docs/shapes.md#maximum-rank).
pub const MAX_RANK: usize = 64;

pub type EintupId = usize;
pub type ArrayId = usize;
/// Index of an op inside its statement's `ops`.
pub type ValueId = usize;

/// Eintup ids in order of first occurrence, without repeats. Membership is
/// a hash lookup, so collecting the variables of a statement with n index
/// positions is linear in n (a `Vec::contains` per id made it quadratic:
/// 20,000 positions took seconds, docs/performance.md).
#[derive(Clone, Debug, Default)]
pub struct VarList {
    ids: Vec<EintupId>,
    seen: std::collections::HashSet<EintupId>,
}

impl VarList {
    /// A list starting with `ids` (repeats dropped).
    pub fn from_ids(ids: &[EintupId]) -> VarList {
        let mut v = VarList::default();
        ids.iter().for_each(|&t| v.push(t));
        v
    }

    /// Appends `t` unless it is already there.
    pub fn push(&mut self, t: EintupId) {
        if self.seen.insert(t) {
            self.ids.push(t);
        }
    }

    pub fn contains(&self, t: EintupId) -> bool {
        self.seen.contains(&t)
    }

    pub fn ids(&self) -> &[EintupId] {
        &self.ids
    }

    pub fn into_vec(self) -> Vec<EintupId> {
        self.ids
    }
}

#[derive(Clone, Debug, PartialEq)]
pub struct Module {
    pub eintups: Vec<Eintup>,
    pub arrays: Vec<Array>,
    pub stmts: Vec<Stmt>,
    /// The framework call and outputs sections, resolved to ids.
    pub call: Option<FrameworkCall>,
    pub outputs: Vec<ArrayId>,
    /// A dynamic module's dims (after `specialize{dynamic=true}`): the
    /// eintups' ranks are fixed, their `dims` stay `None`, and these give
    /// them over dim symbols.
    pub symbolic: Option<symbolic::SymbolicDims>,
}

/// An eintup (row variable). `rank`/`dims` are `None` until known.
#[derive(Clone, Debug, PartialEq)]
pub struct Eintup {
    pub name: String,
    pub rank: Option<usize>,
    /// Static dims (length == rank) after `specialize`.
    pub dims: Option<Vec<i64>>,
    /// Where it is first mentioned.
    pub span: Span,
}

#[derive(Clone, Debug, PartialEq)]
pub struct Array {
    pub name: String,
    pub dtype: ElemType,
    /// One entry per index position of the first mention (the signature).
    pub positions: Vec<Position>,
    /// Refinement attributes (e.g. value range of a RANDOM INT array).
    pub attrs: Vec<Attr>,
    /// The statement that first mentions (defines) the array.
    pub def_stmt: usize,
    /// True when the defining statement is exactly `a[...] = RANDOM(...)`:
    /// a user may supply its contents.
    pub is_input: bool,
    pub span: Span,
}

/// One index position of an array signature: the first-mention expression
/// and, once known, its rank and its dims `DIMS(expr)` (docs/language.md s.5).
#[derive(Clone, Debug, PartialEq)]
pub struct Position {
    pub expr: IndexExpr,
    pub rank: Option<usize>,
    pub dims: Option<Vec<i64>>,
}

#[derive(Clone, Debug, PartialEq)]
pub enum Attr {
    /// Every element lies in `[lo, hi)` (component-wise over the last
    /// position when `lo`/`hi` are tuples; see docs/ir-et.md).
    Range { lo: Bound, hi: Bound },
}

/// A bound of a range attribute: an integer or the static `DIMS(list)`
/// indexed by the innermost position's eintup.
#[derive(Clone, Debug, PartialEq)]
pub enum Bound {
    Int(i64),
    DimsAt(DimsList),
}

/// The list of a `DIMS(..)`: its value is the concatenation of its items'
/// components, so its length is the sum of the eintups' ranks plus one per
/// literal (docs/language.md s.4).
#[derive(Clone, Debug, PartialEq, Eq, Default)]
pub struct DimsList(pub Vec<DimsItem>);

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum DimsItem {
    /// An eintup: its dims.
    Eintup(EintupId),
    /// A non-negative integer literal `n`: the one component `n + 1` (the
    /// `DIMS` of the literal, docs/language.md s.5). `resolve` keeps `n` below
    /// `i64::MAX`, so the component fits.
    Lit(i64),
}

impl DimsList {
    /// A list of eintups only.
    pub fn of(ids: impl IntoIterator<Item = EintupId>) -> DimsList {
        DimsList(ids.into_iter().map(DimsItem::Eintup).collect())
    }

    /// The eintups the list names, in order.
    pub fn eintups(&self) -> impl Iterator<Item = EintupId> + '_ {
        self.0.iter().filter_map(|i| match i {
            DimsItem::Eintup(t) => Some(*t),
            DimsItem::Lit(_) => None,
        })
    }

    /// How many literals the list holds: each adds one component.
    pub fn literals(&self) -> usize {
        self.0.iter().filter(|i| matches!(i, DimsItem::Lit(_))).count()
    }

    /// The list's length given each eintup's rank (`None` if one is unknown).
    pub fn rank(&self, rank_of: impl Fn(EintupId) -> Option<usize>) -> Option<usize> {
        self.0
            .iter()
            .map(|i| match i {
                DimsItem::Eintup(t) => rank_of(*t),
                DimsItem::Lit(_) => Some(1),
            })
            .sum()
    }

    /// The static vector given each eintup's dims (`None` if one is unknown).
    pub fn value(&self, dims_of: impl Fn(EintupId) -> Option<Vec<i64>>) -> Option<Vec<i64>> {
        self.value_with(dims_of, |n| n.checked_add(1))
    }

    /// [`DimsList::value`] over any representation of dims (constants, or
    /// expressions over dim symbols): `lit(n)` is a literal's component.
    pub fn value_with<T>(&self, dims_of: impl Fn(EintupId) -> Option<Vec<T>>, lit: impl Fn(i64) -> Option<T>) -> Option<Vec<T>> {
        let mut v = Vec::new();
        for i in &self.0 {
            match i {
                DimsItem::Eintup(t) => v.extend(dims_of(*t)?),
                DimsItem::Lit(n) => v.push(lit(*n)?),
            }
        }
        Some(v)
    }
}

/// One statement: `lhs[indices] (=|+=) ops[result]`.
#[derive(Clone, Debug, PartialEq)]
pub struct Stmt {
    pub array: ArrayId,
    pub indices: Vec<IndexSlot>,
    pub op: AssignOp,
    /// The statement's variables (docs/language.md s.3 rule 2), in order of
    /// first occurrence, left side first.
    pub vars: Vec<EintupId>,
    /// Right-hand side in SSA form; operands refer to earlier ops.
    pub ops: Vec<Op>,
    pub result: ValueId,
    pub span: Span,
}

#[derive(Clone, Debug, PartialEq)]
pub struct Op {
    pub kind: OpKind,
    /// Signature type: element type + the eintups the value varies over.
    pub ty: SigType,
    pub span: Span,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SigType {
    pub dtype: ElemType,
    pub eintups: Vec<EintupId>,
}

#[derive(Clone, Debug, PartialEq)]
pub enum OpKind {
    ConstInt(i64),
    ConstFloat(f64),
    /// `RANK(list)` (static once ranks are inferred).
    Rank(Vec<EintupId>),
    /// `DIMS(list)[t]`: component `t` of the static vector.
    DimsAt(DimsList, IndexExpr),
    /// `a[indices]` (slices allowed).
    Read {
        array: ArrayId,
        indices: Vec<IndexSlot>,
    },
    /// `RANDOM(lo, hi, T)`; see docs/language.md s.3 for the generator.
    Random {
        lo: ValueId,
        hi: ValueId,
        dtype: ElemType,
    },
    Neg(ValueId),
    /// `+ - * / // //^ %` on values (mixed INT/FLOAT is FLOAT).
    Binary(et_grammar::ast::BinOp, ValueId, ValueId),
    /// `a < b`, ..: INT 1 or 0, the operands compared in their join.
    Compare(et_grammar::ast::CmpOp, ValueId, ValueId),
    /// `exp(a)`, `max(a, b)`, `select(c, a, b)`, .. (docs/language.md s.3).
    Call(et_grammar::ast::Func, Vec<ValueId>),
}

impl OpKind {
    /// The element type of a computed op given its operands' (`None` for
    /// the ops whose type is their own: constants, reads, `RANDOM`). The
    /// one statement of the typing rules: sema, the verifier and the type
    /// join use it.
    pub fn computed_dtype(&self, operand: impl Fn(ValueId) -> ElemType) -> Option<ElemType> {
        use et_grammar::ast::{BinOp, Func};
        let join = |a: ElemType, b: ElemType| if a == ElemType::Float || b == ElemType::Float { ElemType::Float } else { ElemType::Int };
        Some(match self {
            OpKind::Neg(a) => operand(*a),
            OpKind::Binary(BinOp::Div, ..) => ElemType::Float,
            OpKind::Binary(_, a, b) => join(operand(*a), operand(*b)),
            OpKind::Compare(..) => ElemType::Int,
            OpKind::Call(f, _) if f.always_float() => ElemType::Float,
            // `select`'s condition does not type the result.
            OpKind::Call(Func::Select, args) => args.iter().skip(1).map(|&a| operand(a)).fold(ElemType::Int, join),
            OpKind::Call(_, args) => args.iter().map(|&a| operand(a)).fold(ElemType::Int, join),
            OpKind::ConstInt(_) | OpKind::ConstFloat(_) | OpKind::Rank(_) | OpKind::DimsAt(..) | OpKind::Read { .. } | OpKind::Random { .. } => return None,
        })
    }

    /// The values the op uses, in order.
    pub fn operands(&self) -> Vec<ValueId> {
        match self {
            OpKind::Random { lo, hi, .. } => vec![*lo, *hi],
            OpKind::Neg(a) => vec![*a],
            OpKind::Binary(_, a, b) | OpKind::Compare(_, a, b) => vec![*a, *b],
            OpKind::Call(_, args) => args.clone(),
            OpKind::ConstInt(_) | OpKind::ConstFloat(_) | OpKind::Rank(_) | OpKind::DimsAt(..) | OpKind::Read { .. } => vec![],
        }
    }
}

#[derive(Clone, Debug, PartialEq)]
pub enum IndexSlot {
    Expr(IndexExpr),
    /// `:` of an array slice.
    Colon(Span),
}

#[derive(Clone, Debug, PartialEq)]
pub struct IndexExpr {
    pub kind: IndexKind,
    pub span: Span,
}

#[derive(Clone, Debug, PartialEq)]
pub enum IndexKind {
    Var(EintupId),
    /// Non-negative literal, broadcast to its partner's rank.
    Lit(i64),
    /// `DIMS(list)`: static tuple.
    Dims(DimsList),
    /// `RANK(list)`: static scalar.
    Rank(Vec<EintupId>),
    /// `FLAT(e1, ..., ek)`: rank 1.
    Flat(Vec<IndexExpr>),
    /// `a[x, :, y]`: the vector stored at the `:` slot, used as a tuple.
    Slice {
        array: ArrayId,
        indices: Vec<IndexSlot>,
    },
    Bin(IndexOp, Box<IndexExpr>, Box<IndexExpr>),
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum IndexOp {
    Add,
    Sub,
    Mul,
    FloorDiv,
    CeilDiv,
    Mod,
}

/// The framework call, with argument values resolved.
#[derive(Clone, Debug, PartialEq)]
pub struct FrameworkCall {
    pub func: String,
    pub args: Vec<(Option<String>, CallArg)>,
    pub span: Span,
}

#[derive(Clone, Debug, PartialEq)]
pub enum CallArg {
    Array(ArrayId),
    Dims(DimsList),
    Rank(Vec<EintupId>),
    Literal(et_grammar::ast::Literal),
    Tensor(DimsList),
}

impl IndexExpr {
    /// Calls `f` on the expression and every expression inside it: operands,
    /// `FLAT` arguments and the index slots of slices.
    pub fn for_each(&self, f: &mut impl FnMut(&IndexExpr)) {
        f(self);
        match &self.kind {
            IndexKind::Slice { indices, .. } => indices.iter().for_each(|s| s.for_each(f)),
            IndexKind::Flat(x) => x.iter().for_each(|e| e.for_each(f)),
            IndexKind::Bin(_, x, y) => {
                x.for_each(f);
                y.for_each(f);
            }
            IndexKind::Var(_) | IndexKind::Lit(_) | IndexKind::Dims(_) | IndexKind::Rank(_) => {}
        }
    }
}

impl IndexSlot {
    /// [`IndexExpr::for_each`] on the slot's expression (none for `:`).
    pub fn for_each(&self, f: &mut impl FnMut(&IndexExpr)) {
        if let IndexSlot::Expr(e) = self {
            e.for_each(f);
        }
    }
}

impl Stmt {
    /// Calls `f` on every index expression of the statement, at any depth:
    /// its left-hand side's, its reads', and those of `DIMS(..)[t]`.
    pub fn for_each_index_expr(&self, f: &mut impl FnMut(&IndexExpr)) {
        self.indices.iter().for_each(|s| s.for_each(f));
        for op in &self.ops {
            match &op.kind {
                OpKind::Read { indices, .. } => indices.iter().for_each(|s| s.for_each(f)),
                OpKind::DimsAt(_, t) => t.for_each(f),
                _ => {}
            }
        }
    }

    /// Does the statement read array `a` (in a read, a slice, or inside an
    /// index)? Such a statement reads `a` through a snapshot when it also
    /// writes `a` (docs/language.md s.3).
    pub fn reads(&self, a: ArrayId) -> bool {
        let mut sliced = false;
        self.for_each_index_expr(&mut |e| sliced |= matches!(e.kind, IndexKind::Slice { array, .. } if array == a));
        sliced || self.ops.iter().any(|op| matches!(op.kind, OpKind::Read { array, .. } if array == a))
    }
}

impl Module {
    /// The arrays whose `range` attribute gives the dims of a `FLAT`
    /// argument (a slice of them inside `FLAT`): their values must lie in
    /// that range for the program to mean what it says (docs/language.md,
    /// "DIMS of a slice"), so supplied inputs are checked against it.
    pub fn ranges_flat_relies_on(&self) -> Vec<ArrayId> {
        let mut out = Vec::new();
        for s in &self.stmts {
            s.for_each_index_expr(&mut |e| {
                if let IndexKind::Flat(args) = &e.kind {
                    for arg in args {
                        arg.for_each(&mut |x| {
                            if let IndexKind::Slice { array, .. } = x.kind {
                                if !out.contains(&array) {
                                    out.push(array);
                                }
                            }
                        });
                    }
                }
            });
        }
        out
    }

    /// The program's results: the outputs section, or else every array
    /// that no statement after its last write reads (what `run` prints and
    /// bundles mark `output`).
    pub fn result_arrays(&self) -> Vec<ArrayId> {
        if !self.outputs.is_empty() {
            return self.outputs.clone();
        }
        (0..self.arrays.len())
            .filter(|&a| {
                let last_write = self.stmts.iter().rposition(|s| s.array == a).unwrap_or(0);
                !self.stmts.iter().skip(last_write + 1).any(|s| s.reads(a))
            })
            .collect()
    }

    pub fn eintup_by_name(&self, name: &str) -> Option<EintupId> {
        self.eintups.iter().position(|e| e.name == name)
    }

    pub fn array_by_name(&self, name: &str) -> Option<ArrayId> {
        self.arrays.iter().position(|a| a.name == name)
    }

    /// True when every eintup has static dims (after `specialize`).
    pub fn is_specialized(&self) -> bool {
        self.eintups.iter().all(|e| e.dims.is_some()) && self.arrays.iter().all(|a| a.positions.iter().all(|p| p.dims.is_some()))
    }

    /// The most points any statement iterates over or any array holds
    /// (`i64::MAX` when one is unknown or overflows): what running the
    /// specialised module costs at least, so tests can skip large draws.
    pub fn largest_extent(&self) -> i64 {
        let stmt = |s: &Stmt| {
            s.vars.iter().try_fold(1i64, |acc, e| self.eintups.get(*e)?.dims.as_ref()?.iter().try_fold(acc, |a, d| a.checked_mul(*d))).unwrap_or(i64::MAX)
        };
        let array = |a: ArrayId| self.array_shape(a).and_then(|s| s.iter().try_fold(1i64, |p, d| p.checked_mul(*d))).unwrap_or(i64::MAX);
        self.stmts.iter().map(stmt).chain((0..self.arrays.len()).map(array)).max().unwrap_or(0)
    }

    /// True when statement `si` defines an input array (`a[..] = RANDOM(..)`):
    /// the statements every backend runs on the host before anything else
    /// (`interp::initial_arrays`).
    pub fn defines_input(&self, si: usize) -> bool {
        self.stmts.get(si).is_some_and(|s| self.arrays[s.array].is_input && self.arrays[s.array].def_stmt == si)
    }

    /// Each statement's instantiations (docs/language.md s.3: one per
    /// combination of its variables' values, out-of-bounds ones included),
    /// saturating at `u128::MAX`; unknown dims count as the maximum. What
    /// the interpreter enumerates at most.
    pub fn instantiations(&self) -> Vec<u128> {
        self.stmts
            .iter()
            .map(|s| {
                s.vars.iter().fold(1u128, |acc, &e| match self.eintups.get(e).and_then(|e| e.dims.as_ref()) {
                    Some(d) => d.iter().fold(acc, |a, &x| a.saturating_mul(x.max(0) as u128)),
                    None => u128::MAX,
                })
            })
            .collect()
    }

    /// Static shape of an array (concatenated position dims), if known.
    pub fn array_shape(&self, a: ArrayId) -> Option<Vec<i64>> {
        let mut shape = Vec::new();
        for p in &self.arrays[a].positions {
            shape.extend_from_slice(p.dims.as_ref()?);
        }
        Some(shape)
    }
}

#[cfg(test)]
mod tests {
    use super::VarList;

    #[test]
    fn var_list_keeps_first_occurrences_in_order() {
        let mut v = VarList::from_ids(&[3, 1, 3]);
        for t in [2, 1, 0, 2] {
            v.push(t);
        }
        assert_eq!(v.ids(), &[3, 1, 2, 0]);
        assert!(v.contains(0) && !v.contains(4));
        assert_eq!(v.into_vec(), vec![3, 1, 2, 0]);
    }
}
