//! `plan-products` (et -> et): a statement whose right side is a product
//! of array reads (and constants), summed over the eintups that appear only
//! on the right, becomes a sequence of statements through temporary arrays
//! in the order of least work: `y[i,l] = a[i,j]*b[j,k]*c[k,l]` (n^4 points)
//! becomes `t[i,k] = a[i,j]*b[j,k]` and `y[i,l] = t[i,k]*c[k,l]` (2 n^3).
//! A factor that does not depend on a summed eintup leaves its sum
//! (`y[i] = a[i,j]*b[j]*c[i]` multiplies by `c[i]` once per `i`).
//!
//! **Cost.** A statement with `f` factors does `f - 1` multiplies and one
//! add per point of its iteration space: `f * points` operations. The
//! plan is a binary tree over the factors: each inner node is a statement
//! `t[kept] = A * B` over the eintups of its two operands, keeping those
//! that a factor outside it or the left side uses and summing the rest; a
//! factor may first be summed alone over the eintups only it has
//! (`t[i] = a[i,j]`, one operation per point). The root is the original
//! statement (its left side, `=` or `+=`) over the two last operands.
//!
//! **Search.** Up to `exhaustive` factors (8), dynamic programming over
//! subsets finds the cheapest tree exactly (3^8 = 6561 splits); beyond, a
//! greedy path (opt_einsum's): pre-sum private eintups, then repeatedly
//! contract the pair whose statement costs least. Temporaries must fit
//! `temp-bytes` (1 GiB) for the whole module: a subset whose temporary is
//! larger is not materialised; a plan whose temporaries pass what is left
//! leaves the statement alone. The plan is used only when it is strictly
//! cheaper than the statement as written. egg is not used: the cost of a
//! node depends on which eintups its result keeps, i.e. on the factors
//! outside it, and the memory cap is a constraint on the whole tree, which
//! egg's bottom-up extraction cannot express; the subset DP enumerates the
//! same space (every association and commutation) and is exact.
//!
//! **Semantics.** Out-of-bounds instantiations are skipped, and `=` resets
//! only cells some instantiation reaches (docs/language.md s.3). A temporary
//! sums over every value of its eintups, so the rewrite is exact only when
//! no read can be out of bounds: every index of every read is a plain
//! eintup whose dims fit its position, and no eintup of the statement is
//! empty (an empty sum would leave `=`'s cells untouched, while the planned
//! root would reset them). The left side is kept as written (any index
//! expression, no slice): its eintups are all in the root. Other
//! statements are left alone, with the reason in `--stats`. INT products
//! are always planned (wrapping arithmetic is a ring: any order gives the
//! same bits) when the left array is INT too (an INT product into a FLOAT
//! array is summed in FLOAT). FLOAT products change their rounding, so
//! they are planned only under `fp-contract=fast`; under `off` one with a
//! cheaper order gets the warning W0701 with both costs.

use super::spec::{self, PassOptions};
use super::{DriverOptions, Ir, PassError, Unit};
use crate::ir::et::{Array, EintupId, IndexExpr, IndexKind, IndexSlot, Module, Op, OpKind, Position, SigType, Stmt, ValueId, VarList};
use crate::ir::loops::{FloatWidth, FpContract};
use et_grammar::ast::{AssignOp, BinOp, ElemType};
use et_grammar::{Diagnostic, Span};
use std::collections::HashSet;

/// The temporaries' default cap for a whole module (bytes).
pub const DEFAULT_TEMP_BYTES: u64 = 1 << 30;
/// Factors up to which the search is exhaustive.
pub const DEFAULT_EXHAUSTIVE: usize = 8;
/// The most factors a planned statement may have (the greedy path is
/// cubic in them); statements with more are left alone.
const MAX_FACTORS: usize = 64;
/// The most eintups a planned statement may have (the sets are `u128`).
const MAX_VARS: usize = 128;

/// What `plan-products` is told: the float policy (`--fp-contract`) and
/// width (`--float`, the temporaries' element size), and its own cap on
/// the temporaries' bytes and the size of the exhaustive search.
#[derive(Clone, Debug)]
pub struct PlanProductsOptions {
    pub fp_contract: FpContract,
    pub float: FloatWidth,
    pub temp_bytes: u64,
    pub exhaustive: usize,
}

impl PassOptions for PlanProductsOptions {
    const KEYS: &'static [(&'static str, &'static str)] = &[
        spec::FP_CONTRACT,
        spec::FLOAT,
        ("temp-bytes", "N: the most bytes of temporary arrays plan-products adds to a module (default 2^30)"),
        ("exhaustive", "N: plan-products searches every order of products of up to N factors (default 8), greedily beyond"),
    ];
    fn from_driver(d: &DriverOptions) -> Self {
        PlanProductsOptions { fp_contract: d.fp_contract, float: d.float, temp_bytes: DEFAULT_TEMP_BYTES, exhaustive: DEFAULT_EXHAUSTIVE }
    }
    fn set(&mut self, key: &str, value: &str) -> Result<(), String> {
        let count = |v: &str| v.parse::<u64>().map_err(|_| "expected a non-negative integer".to_string());
        match key {
            "fp-contract" => self.fp_contract = spec::parse_fp_contract(value)?,
            "float" => self.float = spec::parse_float(value)?,
            "temp-bytes" => self.temp_bytes = count(value)?,
            // Beyond 16 the table of subsets (2^n) is the limit, not time.
            "exhaustive" => self.exhaustive = usize::try_from(count(value)?.min(16)).unwrap_or(16),
            _ => return Err(format!("option `{key}` is not declared")),
        }
        Ok(())
    }
}

pub fn run(unit: &mut Unit, opts: &PlanProductsOptions) -> Result<Option<String>, PassError> {
    let Ir::Et(prog) = &mut unit.ir else { return Err(PassError::Internal("plan-products runs on the et level".into())) };
    if !prog.module.is_specialized() {
        return Err(PassError::Message("etopt: error: pass `plan-products` needs a specialised module (run `specialize` first)".into()));
    }
    let report = plan_module(&mut prog.module, opts);
    unit.warnings.extend(report.warnings.iter().cloned());
    Ok(Some(report.stats()))
}

/// What planning a module did, statement by statement (numbered as in
/// the module it read).
#[derive(Clone, Debug, Default)]
pub struct Report {
    /// `(stmt, operations as written, planned, temporaries, search)`.
    pub planned: Vec<(usize, u128, u128, usize, &'static str)>,
    /// FLOAT statements with a cheaper order, kept under `fp-contract=off`:
    /// `(stmt, as written, planned)`.
    pub kept_exact: Vec<(usize, u128, u128)>,
    /// Products left alone, with why.
    pub left_alone: Vec<(usize, String)>,
    /// W0701, one per statement of `kept_exact`.
    pub warnings: Vec<Diagnostic>,
}

impl Report {
    /// The `--stats` line.
    pub fn stats(&self) -> String {
        let mut s = format!("{} planned", crate::driver::count(self.planned.len(), "statement", "statements"));
        if !self.planned.is_empty() {
            let each: Vec<String> = self
                .planned
                .iter()
                .map(|(si, a, b, t, how)| format!("stmt {si}: {a} -> {b} operations, {}, {how}", crate::driver::count(*t, "temporary", "temporaries")))
                .collect();
            s += &format!(" ({})", each.join("; "));
        }
        if !self.kept_exact.is_empty() {
            let each: Vec<String> = self.kept_exact.iter().map(|(si, a, b)| format!("stmt {si} ({a} -> {b} operations)")).collect();
            s += &format!("; kept as written under fp-contract=off: {}", each.join(", "));
        }
        if !self.left_alone.is_empty() {
            let each: Vec<String> = self.left_alone.iter().map(|(si, why)| format!("stmt {si} ({why})")).collect();
            s += &format!("; left alone: {}", each.join(", "));
        }
        s
    }
}

/// Plans every statement of a specialised module that qualifies.
pub fn plan_module(m: &mut Module, opts: &PlanProductsOptions) -> Report {
    let mut report = Report::default();
    let mut budget = u128::from(opts.temp_bytes);
    let mut names: HashSet<String> = m.arrays.iter().map(|a| a.name.clone()).collect();
    let original = m.stmts.clone();
    // The new statement list, and where each old statement went.
    let mut stmts: Vec<Stmt> = Vec::with_capacity(original.len());
    let mut moved = Vec::with_capacity(original.len());
    // Temporaries: the array and the index of its statement in `stmts`.
    let mut temps: Vec<(Array, usize)> = Vec::new();
    for (si, s) in original.iter().enumerate() {
        let found = match product(m, si, s) {
            Found::NotAProduct => None,
            Found::Refused(why) => {
                report.left_alone.push((si, why));
                None
            }
            Found::Product(p) => match p.search(opts, budget) {
                Err(why) => {
                    report.left_alone.push((si, why));
                    None
                }
                Ok(None) => None,
                Ok(Some(plan)) if p.dtype == ElemType::Float && opts.fp_contract == FpContract::Off => {
                    report.kept_exact.push((si, plan.direct, plan.cost));
                    report.warnings.push(warning(s.span, plan.direct, plan.cost));
                    None
                }
                Ok(Some(plan)) => Some((p, plan)),
            },
        };
        match found {
            None => stmts.push(s.clone()),
            Some((p, plan)) => {
                budget -= plan.bytes;
                let mut emit = Emitter { m, p: &p, s, names: &mut names, stmts: &mut stmts, temps: &mut temps, next: 0 };
                let root = emit.root(&plan.tree);
                report.planned.push((si, plan.direct, plan.cost, emit.next, plan.search));
                stmts.push(root);
            }
        }
        moved.push(stmts.len() - 1);
    }
    for a in &mut m.arrays {
        a.def_stmt = moved.get(a.def_stmt).copied().unwrap_or(a.def_stmt);
    }
    for (mut a, si) in temps {
        a.def_stmt = si;
        m.arrays.push(a);
    }
    m.stmts = stmts;
    report
}

/// W0701: a FLOAT product that a reordering would make cheaper.
fn warning(span: Span, direct: u128, planned: u128) -> Diagnostic {
    Diagnostic::warning(
        "W0701",
        format!("this FLOAT product costs {direct} operations as written; contracted in the order of least work it would cost {planned}"),
    )
    .at(span, "evaluated as written: the order of its sums is part of its rounding")
    .note("--fp-contract fast lets the compiler choose the order (results then differ in rounding); the GPU's default")
}

/// One factor of a product.
#[derive(Clone, Debug)]
struct Factor {
    /// The op of the statement that computes it (a read, or a constant
    /// subtree).
    root: ValueId,
    /// Its eintups, as a set of positions in the statement's `vars`...
    vars: u128,
    /// ... and in the order it reads them.
    order: Vec<usize>,
    dtype: ElemType,
}

/// A statement that is a product.
#[derive(Clone, Debug)]
struct Product {
    factors: Vec<Factor>,
    /// The left side's eintups.
    lhs: u128,
    /// Each statement variable's number of values.
    sizes: Vec<u128>,
    /// The statement's value type.
    dtype: ElemType,
}

enum Found {
    NotAProduct,
    Refused(String),
    Product(Product),
}

/// Whether statement `s` is a product the pass may plan.
fn product(m: &Module, si: usize, s: &Stmt) -> Found {
    if m.defines_input(si) {
        return Found::NotAProduct;
    }
    let Some(roots) = factor_roots(&s.ops, s.result) else { return Found::NotAProduct };
    if roots.len() < 2 {
        return Found::NotAProduct;
    }
    if !matches!(s.op, AssignOp::Assign | AssignOp::AddAssign) {
        return Found::Refused(format!("`{}` keeps a maximum or minimum, not a sum of products", s.op.text()));
    }
    if roots.len() > MAX_FACTORS {
        return Found::Refused(format!("{} factors, more than {MAX_FACTORS}", roots.len()));
    }
    if s.vars.len() > MAX_VARS {
        return Found::Refused(format!("{} eintups, more than {MAX_VARS}", s.vars.len()));
    }
    let name = |e: EintupId| m.eintups[e].name.as_str();
    let bit = |e: EintupId| s.vars.iter().position(|&v| v == e).map(|k| 1u128 << k);
    let mut sizes = Vec::new();
    for &e in &s.vars {
        let dims = m.eintups[e].dims.clone().unwrap_or_default();
        if dims.iter().any(|&d| d <= 0) {
            return Found::Refused(format!("`{}` has an empty dim: `=` leaves the cells of an empty sum untouched", name(e)));
        }
        sizes.push(dims.iter().fold(1u128, |p, &d| p.saturating_mul(d as u128)));
    }
    let mut lhs = 0u128;
    let mut sliced = false;
    for slot in &s.indices {
        slot.for_each(&mut |x| match x.kind {
            IndexKind::Var(e) => lhs |= bit(e).unwrap_or(0),
            IndexKind::Slice { .. } => sliced = true,
            _ => {}
        });
        sliced |= matches!(slot, IndexSlot::Colon(_));
    }
    if sliced {
        return Found::Refused("the left side has a slice".into());
    }
    let dtype = s.ops[s.result].ty.dtype;
    let mut factors = Vec::new();
    for root in roots {
        let op = &s.ops[root];
        let mut vars = 0u128;
        let mut order = Vec::new();
        if let OpKind::Read { array, indices } = &op.kind {
            let a = &m.arrays[*array];
            for (slot, pos) in indices.iter().zip(&a.positions) {
                let IndexSlot::Expr(IndexExpr { kind: IndexKind::Var(e), .. }) = slot else {
                    let text = match slot {
                        IndexSlot::Expr(x) => crate::ir::et::print::index_expr(m, x),
                        IndexSlot::Colon(_) => ":".into(),
                    };
                    return Found::Refused(format!(
                        "`{}` is read at `{text}`, not a plain eintup: the rewrite could change which instantiations are skipped",
                        a.name
                    ));
                };
                let (Some(d), Some(p)) = (&m.eintups[*e].dims, &pos.dims) else { return Found::NotAProduct };
                if d.len() != p.len() || d.iter().zip(p).any(|(x, y)| x > y) {
                    return Found::Refused(format!(
                        "`{}` is read at `{}` with dims {d:?} beyond its position's {p:?}: reads can be out of bounds",
                        a.name,
                        name(*e)
                    ));
                }
                if let Some(k) = s.vars.iter().position(|v| v == e) {
                    if vars >> k & 1 == 0 {
                        order.push(k);
                    }
                    vars |= 1 << k;
                }
            }
        }
        factors.push(Factor { root, vars, order, dtype: op.ty.dtype });
    }
    match dtype {
        ElemType::Int if m.arrays[s.array].dtype != ElemType::Int => {
            return Found::Refused(format!("an INT product into FLOAT `{}` is summed in FLOAT", m.arrays[s.array].name));
        }
        ElemType::Float => {
            let ints = factors.iter().filter(|f| f.dtype == ElemType::Int).count();
            let int_read = factors.iter().any(|f| f.dtype == ElemType::Int && matches!(s.ops[f.root].kind, OpKind::Read { .. }));
            // Two INT factors may meet in INT arithmetic, which wraps,
            // where the statement multiplies them in FLOAT.
            if int_read || ints > 1 {
                return Found::Refused("INT factors in a FLOAT product".into());
            }
        }
        ElemType::Int => {}
    }
    Found::Product(Product { factors, lhs, sizes, dtype })
}

/// The factors of the product at op `result`, left to right: the leaves of
/// its tree of `mul`s that contain a read, each a read or a subtree
/// without reads (a constant). `None` when it is anything else.
fn factor_roots(ops: &[Op], result: ValueId) -> Option<Vec<ValueId>> {
    // Bottom-up (operands come first): which ops read, which are constant.
    let mut reads = vec![false; ops.len()];
    let mut constant = vec![false; ops.len()];
    for (k, op) in ops.iter().enumerate() {
        match op.kind {
            OpKind::Read { .. } => reads[k] = true,
            OpKind::ConstInt(_) | OpKind::ConstFloat(_) | OpKind::Rank(_) => constant[k] = true,
            OpKind::Neg(a) => (reads[k], constant[k]) = (reads[a], constant[a]),
            OpKind::Binary(_, a, b) | OpKind::Compare(_, a, b) => (reads[k], constant[k]) = (reads[a] || reads[b], constant[a] && constant[b]),
            OpKind::Call(_, ref args) => (reads[k], constant[k]) = (args.iter().any(|&a| reads[a]), args.iter().all(|&a| constant[a])),
            OpKind::Random { .. } | OpKind::DimsAt(..) => {}
        }
    }
    // Left to right without recursion: a product may have thousands of
    // factors.
    let mut out = Vec::new();
    let mut stack = vec![result];
    while let Some(v) = stack.pop() {
        match ops.get(v)?.kind {
            OpKind::Binary(BinOp::Mul, a, b) if reads[v] => {
                stack.push(b);
                stack.push(a);
            }
            OpKind::Read { .. } => out.push(v),
            _ if constant[v] => out.push(v),
            _ => return None,
        }
    }
    Some(out)
}

/// A plan: a binary tree over the factors.
#[derive(Clone, Debug)]
enum Tree {
    /// A factor as it is.
    Factor(usize),
    /// A factor summed alone over the eintups only it has.
    Summed(usize),
    /// A statement over two operands; the set of factors below.
    Pair(Box<Tree>, Box<Tree>, u128),
}

#[derive(Clone, Debug)]
struct Plan {
    tree: Tree,
    /// Operations of the plan, and of the statement as written.
    cost: u128,
    direct: u128,
    /// Bytes of its temporaries.
    bytes: u128,
    search: &'static str,
}

/// A candidate operand: what it costs to make, its temporaries' bytes,
/// the eintups it varies over, and how it is made.
#[derive(Clone, Debug)]
struct Cand {
    cost: u128,
    bytes: u128,
    vars: u128,
    tree: Tree,
}

impl Product {
    fn size(&self, set: u128) -> u128 {
        (0..self.sizes.len()).filter(|k| set >> k & 1 == 1).fold(1u128, |p, k| p.saturating_mul(self.sizes[k]))
    }

    fn elem_bytes(&self, float: FloatWidth) -> u128 {
        match self.dtype {
            ElemType::Int => 4,
            ElemType::Float => float.bytes() as u128,
        }
    }

    fn vars_of(&self, mask: u128) -> u128 {
        (0..self.factors.len()).filter(|i| mask >> i & 1 == 1).fold(0, |v, i| v | self.factors[i].vars)
    }

    /// The eintups the factors of `mask` share with the other factors or
    /// the left side: what a temporary of them keeps.
    fn kept(&self, mask: u128) -> u128 {
        let all = (1u128 << self.factors.len()) - 1;
        self.vars_of(mask) & (self.vars_of(all & !mask) | self.lhs)
    }

    /// The ways to use factor `i` as an operand: as it is, or summed
    /// alone over its private eintups (when it has any and the
    /// temporary fits `cap`).
    fn leaf(&self, i: usize, cap: u128, eb: u128) -> Vec<Cand> {
        let f = &self.factors[i];
        let mut v = vec![Cand { cost: 0, bytes: 0, vars: f.vars, tree: Tree::Factor(i) }];
        let kept = self.kept(1 << i);
        let bytes = self.size(kept).saturating_mul(eb);
        if kept != f.vars && bytes <= cap {
            v.push(Cand { cost: self.size(f.vars), bytes, vars: kept, tree: Tree::Summed(i) });
        }
        v
    }

    /// `a * b` as the statement for the factors `mask` (the root when it
    /// is every factor).
    fn join(&self, a: &Cand, b: &Cand, mask: u128, root: bool, eb: u128) -> Cand {
        let points = a.vars | b.vars | if root { self.lhs } else { 0 };
        let kept = if root { points } else { self.kept(mask) };
        let bytes = if root { 0 } else { self.size(kept).saturating_mul(eb) };
        Cand {
            cost: a.cost.saturating_add(b.cost).saturating_add(self.size(points).saturating_mul(2)),
            bytes: a.bytes.saturating_add(b.bytes).saturating_add(bytes),
            vars: kept,
            tree: Tree::Pair(Box::new(a.tree.clone()), Box::new(b.tree.clone()), mask),
        }
    }

    /// The cheapest plan within `budget` bytes of temporaries, if it is
    /// cheaper than the statement as written; an error says why there is
    /// none that fits.
    fn search(&self, opts: &PlanProductsOptions, budget: u128) -> Result<Option<Plan>, String> {
        let n = self.factors.len();
        let eb = self.elem_bytes(opts.float);
        let all_vars = self.vars_of((1u128 << n) - 1) | self.lhs;
        let direct = self.size(all_vars).saturating_mul(n as u128);
        let (best, search) = if n <= opts.exhaustive { (self.exhaustive(budget, eb), "exhaustive") } else { (self.greedy(budget, eb), "greedy") };
        match best {
            None => Err(format!("no order's temporaries fit the {budget} bytes left of temp-bytes")),
            Some(c) if c.bytes > budget => Err(format!("temporaries of {} bytes, more than the {budget} left of temp-bytes", c.bytes)),
            Some(c) if c.cost < direct => Ok(Some(Plan { tree: c.tree, cost: c.cost, direct, bytes: c.bytes, search })),
            Some(_) => Ok(None),
        }
    }

    /// Dynamic programming over subsets of the factors: the cheapest tree
    /// (then the fewest bytes) of every subset whose temporary fits.
    fn exhaustive(&self, cap: u128, eb: u128) -> Option<Cand> {
        let n = self.factors.len();
        let full = (1usize << n) - 1;
        // Per subset, its candidates: a factor has one or two (as it is,
        // summed alone), a larger subset its best tree.
        let mut best: Vec<Vec<Cand>> = vec![Vec::new(); full + 1];
        for i in 0..n {
            best[1 << i] = self.leaf(i, cap, eb);
        }
        for mask in 1..=full {
            if mask.count_ones() < 2 {
                continue;
            }
            let root = mask == full;
            let bytes = self.size(self.kept(mask as u128)).saturating_mul(eb);
            if !root && bytes > cap {
                continue;
            }
            let low = mask & mask.wrapping_neg();
            let mut choice: Option<Cand> = None;
            // Each split once: `a` holds the lowest factor.
            let mut a = (mask - 1) & mask;
            while a > 0 {
                let b = mask ^ a;
                if a & low != 0 {
                    for x in &best[a] {
                        for y in &best[b] {
                            let c = self.join(x, y, mask as u128, root, eb);
                            if c.bytes <= cap && choice.as_ref().is_none_or(|d| (c.cost, c.bytes) < (d.cost, d.bytes)) {
                                choice = Some(c);
                            }
                        }
                    }
                }
                a = (a - 1) & mask;
            }
            best[mask] = choice.into_iter().collect();
        }
        best[full].pop()
    }

    /// The greedy path: every factor summed alone over its private
    /// eintups, then the pair whose statement costs least (then whose
    /// temporary is smallest) contracted, until one statement is left.
    fn greedy(&self, cap: u128, eb: u128) -> Option<Cand> {
        let n = self.factors.len();
        let mut ops: Vec<(u128, Cand)> = (0..n)
            .map(|i| {
                let mut c = self.leaf(i, cap, eb);
                (1u128 << i, c.pop().expect("a factor is an operand as it is"))
            })
            .collect();
        let mut used = ops.iter().fold(0u128, |s, (_, c)| s.saturating_add(c.bytes));
        while ops.len() > 2 {
            let mut pick: Option<(u128, u128, usize, usize)> = None;
            for x in 0..ops.len() {
                for y in x + 1..ops.len() {
                    let mask = ops[x].0 | ops[y].0;
                    let step = self.size(ops[x].1.vars | ops[y].1.vars);
                    let bytes = self.size(self.kept(mask)).saturating_mul(eb);
                    if used.saturating_add(bytes) <= cap && pick.is_none_or(|(s, b, _, _)| (step, bytes) < (s, b)) {
                        pick = Some((step, bytes, x, y));
                    }
                }
            }
            let (_, bytes, x, y) = pick?;
            let (my, cy) = ops.remove(y);
            let (mx, cx) = ops.remove(x);
            let joined = self.join(&cx, &cy, mx | my, false, eb);
            used = used.saturating_add(bytes);
            ops.push((mx | my, joined));
        }
        let (mb, cb) = ops.pop()?;
        let (ma, ca) = ops.pop()?;
        Some(self.join(&ca, &cb, ma | mb, true, eb))
    }
}

/// Writes a plan as statements: the temporaries' into `stmts` (and their
/// arrays into `temps`), returning the root, which replaces `s`.
struct Emitter<'a> {
    m: &'a Module,
    p: &'a Product,
    s: &'a Stmt,
    names: &'a mut HashSet<String>,
    stmts: &'a mut Vec<Stmt>,
    temps: &'a mut Vec<(Array, usize)>,
    /// Temporaries made so far for `s`.
    next: usize,
}

/// How a statement reads an operand: a factor's ops, or a temporary.
enum Operand {
    Factor(usize),
    Temp { array: usize, vars: Vec<EintupId>, dtype: ElemType },
}

impl Emitter<'_> {
    fn root(&mut self, t: &Tree) -> Stmt {
        let Tree::Pair(a, b, _) = t else { unreachable!("a plan's root joins two operands") };
        let (x, y) = (self.operand(a), self.operand(b));
        let (ops, result) = self.product_ops(&[x, y]);
        let mut st = Stmt { ops, result, ..self.s.clone() };
        st.vars = crate::sema::resolve::stmt_vars(&st);
        st
    }

    /// Emits what `t` needs and says how to read it.
    fn operand(&mut self, t: &Tree) -> Operand {
        match t {
            Tree::Factor(i) => Operand::Factor(*i),
            Tree::Summed(i) => self.temporary(&[Operand::Factor(*i)], 1 << i),
            Tree::Pair(a, b, mask) => {
                let (x, y) = (self.operand(a), self.operand(b));
                self.temporary(&[x, y], *mask)
            }
        }
    }

    /// The temporary of the factors `mask`, `name[kept] = product of
    /// operands`, and its statement.
    fn temporary(&mut self, operands: &[Operand], mask: u128) -> Operand {
        let span = self.s.span;
        let kept = self.p.kept(mask);
        // Its eintups in the order its factors read them, as einsum keeps
        // its operands' order (a chain's temporaries stay row-major
        // operands of the next contraction).
        let mut order = VarList::default();
        let factors = self.p.factors.iter().enumerate().filter(|(i, _)| mask >> i & 1 == 1);
        factors.flat_map(|(_, f)| f.order.iter().copied()).filter(|k| kept >> k & 1 == 1).for_each(|k| order.push(k));
        let vars: Vec<EintupId> = order.ids().iter().map(|&k| self.s.vars[k]).collect();
        let (ops, result) = self.product_ops(operands);
        let dtype = ops[result].ty.dtype;
        let lhs = &self.m.arrays[self.s.array].name;
        let name = loop {
            let n = format!("{lhs}_t{}", self.next);
            self.next += 1;
            if self.names.insert(n.clone()) {
                break n;
            }
        };
        let var = |e: EintupId| IndexExpr { kind: IndexKind::Var(e), span };
        let positions = vars.iter().map(|&e| Position { expr: var(e), rank: self.m.eintups[e].rank, dims: self.m.eintups[e].dims.clone() }).collect();
        let array = self.m.arrays.len() + self.temps.len();
        let mut st = Stmt {
            array,
            indices: vars.iter().map(|&e| IndexSlot::Expr(var(e))).collect(),
            op: et_grammar::ast::AssignOp::Assign,
            vars: Vec::new(),
            ops,
            result,
            span,
        };
        st.vars = crate::sema::resolve::stmt_vars(&st);
        self.temps.push((Array { name, dtype, positions, attrs: Vec::new(), def_stmt: 0, is_input: false, span }, self.stmts.len()));
        self.stmts.push(st);
        Operand::Temp { array, vars, dtype }
    }

    /// The ops of the product of `operands` (one or two), and its result.
    fn product_ops(&self, operands: &[Operand]) -> (Vec<Op>, ValueId) {
        let mut ops = Vec::new();
        let mut values = Vec::new();
        for o in operands {
            values.push(match o {
                Operand::Factor(i) => copy_subtree(&self.s.ops, self.p.factors[*i].root, &mut ops),
                Operand::Temp { array, vars, dtype } => {
                    let span = self.s.span;
                    let indices = vars.iter().map(|&e| IndexSlot::Expr(IndexExpr { kind: IndexKind::Var(e), span })).collect();
                    ops.push(Op { kind: OpKind::Read { array: *array, indices }, ty: SigType { dtype: *dtype, eintups: vars.clone() }, span });
                    ops.len() - 1
                }
            });
        }
        let mut acc = values[0];
        for &v in &values[1..] {
            let mut eintups = VarList::from_ids(&ops[acc].ty.eintups);
            ops[v].ty.eintups.iter().for_each(|&e| eintups.push(e));
            let dtype = if ops[acc].ty.dtype == ElemType::Float || ops[v].ty.dtype == ElemType::Float { ElemType::Float } else { ElemType::Int };
            ops.push(Op { kind: OpKind::Binary(BinOp::Mul, acc, v), ty: SigType { dtype, eintups: eintups.into_vec() }, span: self.s.span });
            acc = ops.len() - 1;
        }
        (ops, acc)
    }
}

/// Appends to `out` the ops of `from` that `root` is computed from,
/// renumbered; returns the new number of `root`.
fn copy_subtree(from: &[Op], root: ValueId, out: &mut Vec<Op>) -> ValueId {
    let mut needed = vec![false; root + 1];
    needed[root] = true;
    // Operands come before their op: one pass from `root` down.
    for k in (0..=root).rev() {
        if !needed[k] {
            continue;
        }
        match from[k].kind {
            OpKind::Neg(a) => needed[a] = true,
            OpKind::Binary(_, a, b) => (needed[a], needed[b]) = (true, true),
            OpKind::Random { lo, hi, .. } => (needed[lo], needed[hi]) = (true, true),
            _ => {}
        }
    }
    let mut new = vec![0; root + 1];
    for k in (0..=root).filter(|&k| needed[k]) {
        let mut op = from[k].clone();
        op.kind = match op.kind {
            OpKind::Neg(a) => OpKind::Neg(new[a]),
            OpKind::Binary(o, a, b) => OpKind::Binary(o, new[a], new[b]),
            OpKind::Random { lo, hi, dtype } => OpKind::Random { lo: new[lo], hi: new[hi], dtype },
            kind => kind,
        };
        out.push(op);
        new[k] = out.len() - 1;
    }
    new[root]
}
