//! Verifier of the `et` dialect: structural invariants of one module
//! (`verify`) and the refinement rule between a module before and after a
//! pass (`verify_refines`, docs/architecture.md s.3: a pass may only shrink the set of
//! values a type admits). docs/ir-et.md states both rule sets.
//!
//! Both find every violation, each naming the eintup, array, statement or
//! op concerned. `verify` also gives each the span of what it is about, so
//! that for a module parsed from text the violations are located
//! diagnostics (`parse::parse_verified`).

use super::dims::bound;
use super::*;
use et_grammar::Diagnostic;
use std::collections::{HashMap, HashSet};
use std::fmt;

/// Code of a verifier error located in parsed text (docs/ir-et.md).
pub const CODE: &str = "E0620";

/// One violated rule.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Violation {
    /// Names the eintup, array, statement or op and what is wrong.
    pub message: String,
    /// The span of what it is about (its line, or an index expression), in
    /// the text the module came from; `None` for the outputs section,
    /// which has no span.
    pub span: Option<Span>,
}

/// Every violation `verify` found, in module order.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Violations(pub Vec<Violation>);

impl fmt::Display for Violations {
    /// One message per line.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let lines: Vec<&str> = self.0.iter().map(|v| v.message.as_str()).collect();
        f.write_str(&lines.join("\n"))
    }
}

impl Violations {
    /// One diagnostic per violation, located at its span.
    pub fn diagnostics(&self) -> Vec<Diagnostic> {
        self.0
            .iter()
            .map(|v| {
                let d = Diagnostic::error(CODE, format!("the module does not verify: {}", v.message));
                match v.span {
                    Some(sp) => d.at(sp, "here"),
                    None => d,
                }
            })
            .collect()
    }
}

/// Checks the structural invariants of a module.
pub fn verify(m: &Module) -> Result<(), Violations> {
    let mut v = Verifier { m, errs: Vec::new(), at: None, vars: HashSet::new() };
    v.module();
    if v.errs.is_empty() {
        Ok(())
    } else {
        Err(Violations(v.errs))
    }
}

struct Verifier<'a> {
    m: &'a Module,
    errs: Vec<Violation>,
    /// The span of the item being checked, given to its violations.
    at: Option<Span>,
    /// The variables of the statement being checked.
    vars: HashSet<EintupId>,
}

impl Verifier<'_> {
    fn err(&mut self, message: String) {
        self.errs.push(Violation { message, span: self.at });
    }

    fn eintup_ids(&mut self, what: &str, l: &[EintupId]) {
        for &e in l {
            if e >= self.m.eintups.len() {
                self.err(format!("{what}: eintup id {e} out of range ({} eintups)", self.m.eintups.len()));
            }
        }
    }

    /// A `DIMS(..)` list: its eintups exist and its literals are
    /// non-negative with a component `n + 1` that fits in i64.
    fn dims_list(&mut self, what: &str, l: &DimsList) {
        self.eintup_ids(what, &l.eintups().collect::<Vec<_>>());
        for i in &l.0 {
            if let DimsItem::Lit(n) = i {
                if *n < 0 || *n == i64::MAX {
                    self.err(format!("{what}: literal {n} in DIMS(..) is outside [0, i64::MAX)"));
                }
            }
        }
    }

    fn array_id(&mut self, what: &str, a: ArrayId) -> bool {
        let ok = a < self.m.arrays.len();
        if !ok {
            self.err(format!("{what}: array id {a} out of range ({} arrays)", self.m.arrays.len()));
        }
        ok
    }

    /// Static dims imply a known rank equal to their length.
    fn rank_dims(&mut self, what: &str, rank: Option<usize>, dims: &Option<Vec<i64>>) {
        if let Some(d) = dims {
            match rank {
                Some(r) if r == d.len() => {}
                Some(r) => self.err(format!("{what}: rank {r} but {} static dims {d:?}", d.len())),
                None => self.err(format!("{what}: static dims {d:?} but unknown rank")),
            }
        }
    }

    /// A dynamic module: every eintup has a rank, no static dims, and
    /// symbolic dims of its rank; every symbol is declared once and every
    /// expression names declared ones; checks are about eintups.
    fn symbolic(&mut self, sym: &symbolic::SymbolicDims) {
        let m = self.m;
        let mut names = HashSet::new();
        for d in &sym.symbols {
            if !names.insert(d.name.as_str()) {
                self.err(format!("symbol `%{}` is declared twice", d.name));
            }
        }
        if sym.eintups.len() != m.eintups.len() {
            self.at = None;
            self.err(format!("symbolic dims for {} eintups, the module has {}", sym.eintups.len(), m.eintups.len()));
        }
        let symbols = sym.symbols.len();
        let undeclared = |x: &crate::ir::loops::IExpr| {
            let mut bad = None;
            x.for_each_sym(&mut |d| {
                if d >= symbols {
                    bad = Some(d)
                }
            });
            bad
        };
        for (e, dims) in m.eintups.iter().zip(&sym.eintups) {
            self.at = Some(e.span);
            if e.dims.is_some() {
                self.err(format!("eintup `{}`: static dims in a module with symbolic dims", e.name));
            }
            if e.rank != Some(dims.len()) {
                self.err(format!("eintup `{}`: rank {:?} but {} symbolic dims", e.name, e.rank, dims.len()));
            }
            if let Some(d) = dims.iter().find_map(undeclared) {
                self.err(format!("eintup `{}`: symbol {d} is not declared ({symbols} symbols)", e.name));
            }
        }
        self.at = None;
        for c in &sym.checks {
            if c.about >= m.eintups.len() {
                self.err(format!("check `{}`: eintup id {} out of range", c.rule, c.about));
            }
            if let Some(d) = undeclared(&c.expr) {
                self.err(format!("check `{}`: symbol {d} is not declared ({symbols} symbols)", c.rule));
            }
        }
    }

    /// A known rank is at most [`MAX_RANK`].
    fn rank_limit(&mut self, what: &str, rank: Option<usize>) {
        if let Some(r) = rank.filter(|&r| r > MAX_RANK) {
            self.err(format!("{what}: rank {r} is more than the maximum rank {MAX_RANK}"));
        }
    }

    fn module(&mut self) {
        let m = self.m;
        // Names seen so far: a set, so a module of n items verifies in
        // linear time (a scan of the earlier items made 20,000 statements
        // take seconds, docs/performance.md).
        let mut seen = HashSet::new();
        for e in &m.eintups {
            self.at = Some(e.span);
            if !seen.insert(e.name.as_str()) {
                self.err(format!("eintup `{}` is declared twice", e.name));
            }
            self.rank_dims(&format!("eintup `{}`", e.name), e.rank, &e.dims);
            self.rank_limit(&format!("eintup `{}`", e.name), e.rank);
        }
        if let Some(sym) = &m.symbolic {
            self.symbolic(sym);
        }
        // First-mention dims of a specialised module follow from the
        // eintups' dims (docs/language.md s.5); recompute and compare.
        let all_dims: Option<Vec<Vec<i64>>> = m.eintups.iter().map(|e| e.dims.clone()).collect();
        let mut seen = HashSet::new();
        for (ai, a) in m.arrays.iter().enumerate() {
            self.at = Some(a.span);
            let what = format!("array `{}`", a.name);
            if !seen.insert(a.name.as_str()) {
                self.err(format!("{what} is declared twice"));
            }
            match m.stmts.get(a.def_stmt) {
                None => self.err(format!("{what}: defining statement {} out of range ({} statements)", a.def_stmt, m.stmts.len())),
                Some(s) if s.array != ai => {
                    self.err(format!("{what}: defining statement {} assigns another array", a.def_stmt));
                }
                // The signature is the first mention's index expressions
                // (docs/language.md s.3 rule 1), compared as printed.
                Some(s) => {
                    let sig: Vec<IndexSlot> = a.positions.iter().map(|p| IndexSlot::Expr(p.expr.clone())).collect();
                    let (want, got) = (super::print::slots(m, &sig), super::print::slots(m, &s.indices));
                    if want != got {
                        self.err(format!("{what}: its defining statement {} writes `{}[{got}]`, not its signature `[{want}]`", a.def_stmt, a.name));
                    }
                }
            }
            for (k, p) in a.positions.iter().enumerate() {
                let pw = format!("{what} position {}", k + 1);
                self.expr(&pw, &p.expr, false);
                self.at = Some(p.expr.span);
                self.rank_dims(&pw, p.rank, &p.dims);
                // A stated rank is the expression's (a scalar's is 1), where
                // the eintups' ranks give it: `specialize` recomputes it.
                if let (Some(r), Some(want)) = (p.rank, expr_rank(&p.expr, &|t| m.eintups.get(t).and_then(|e| e.rank))) {
                    let want = want.unwrap_or(1);
                    if r != want {
                        self.err(format!("{pw}: rank {r} but its expression has rank {want}"));
                    }
                }
                if let (Some(d), Some(all)) = (&p.dims, &all_dims) {
                    if self.errs.is_empty() {
                        match bound(&p.expr, all) {
                            Ok(want) if &want == d => {}
                            Ok(want) => self.err(format!("{pw}: dims {d:?} but the eintups' dims give {want:?}")),
                            Err(e) => self.err(format!("{pw}: dims {d:?} but the first mention has no shape ({e:?})")),
                        }
                    }
                }
            }
            self.at = Some(a.span);
            self.rank_limit(&what, a.positions.iter().map(|p| p.rank).sum());
            for at in &a.attrs {
                match at {
                    Attr::Range { lo, hi } => {
                        for b in [lo, hi] {
                            if let Bound::DimsAt(l) = b {
                                self.dims_list(&format!("{what} range"), l);
                            }
                        }
                    }
                }
            }
        }
        for (si, s) in m.stmts.iter().enumerate() {
            self.stmt(si, s);
        }
        if let Some(c) = &m.call {
            self.at = Some(c.span);
            for (_, arg) in &c.args {
                match arg {
                    CallArg::Array(a) => {
                        self.array_id(&format!("call {}", c.func), *a);
                    }
                    CallArg::Dims(l) | CallArg::Tensor(l) => self.dims_list(&format!("call {}", c.func), l),
                    CallArg::Rank(l) => self.eintup_ids(&format!("call {}", c.func), l),
                    CallArg::Literal(_) => {}
                }
            }
        }
        self.at = None;
        for &o in &m.outputs {
            self.array_id("outputs", o);
        }
    }

    fn stmt(&mut self, si: usize, s: &Stmt) {
        self.at = Some(s.span);
        self.vars = s.vars.iter().copied().collect();
        let what = format!("stmt {si}");
        let loops: Option<usize> = s.vars.iter().map(|&e| self.m.eintups.get(e).and_then(|x| x.rank)).sum();
        self.rank_limit(&format!("{what} iteration space"), loops);
        self.eintup_ids(&format!("{what} vars"), &s.vars);
        if self.array_id(&what, s.array) {
            self.slot_count(&what, s.array, s.indices.len());
        }
        self.no_colon(&what, &s.indices);
        self.slots(&what, &s.indices, true);
        if s.result >= s.ops.len() {
            self.err(format!("{what}: result %{} is not one of its {} ops", s.result, s.ops.len()));
        }
        for (k, op) in s.ops.iter().enumerate() {
            self.at = Some(op.span);
            let ow = format!("{what} op %{k}");
            self.eintup_ids(&format!("{ow} type"), &op.ty.eintups);
            let operands: Vec<ValueId> = match &op.kind {
                OpKind::ConstInt(_) | OpKind::ConstFloat(_) => vec![],
                OpKind::Rank(l) => {
                    self.eintup_ids(&ow, l);
                    vec![]
                }
                OpKind::DimsAt(l, t) => {
                    self.dims_list(&ow, l);
                    self.expr(&ow, t, true);
                    vec![]
                }
                OpKind::Read { array, indices } => {
                    if self.array_id(&ow, *array) {
                        self.slot_count(&ow, *array, indices.len());
                    }
                    self.no_colon(&ow, indices);
                    self.slots(&ow, indices, true);
                    vec![]
                }
                OpKind::Random { .. } | OpKind::Neg(_) | OpKind::Binary(..) | OpKind::Compare(..) | OpKind::Call(..) => op.kind.operands(),
            };
            let mut ordered = true;
            for o in operands {
                if o >= k {
                    self.err(format!("{ow}: operand %{o} is not an earlier op (SSA order)"));
                    ordered = false;
                }
            }
            // The typing rules (docs/language.md s.3): a computed op's type
            // is what its operands' give.
            if let (true, Some(d)) = (ordered, op.kind.computed_dtype(|v| s.ops[v].ty.dtype)) {
                if d != op.ty.dtype {
                    self.err(format!("{ow}: type {} but its operands make it {}", op.ty.dtype.text(), d.text()));
                }
            }
        }
    }

    /// A `:` belongs inside a slice (an index expression), never directly
    /// in a read or a left-hand side (docs/language.md s.4, E0115/E0116).
    fn no_colon(&mut self, what: &str, s: &[IndexSlot]) {
        if let Some(IndexSlot::Colon(sp)) = s.iter().find(|x| matches!(x, IndexSlot::Colon(_))) {
            self.errs.push(Violation { message: format!("{what}: a `:` outside a slice"), span: Some(*sp) });
        }
    }

    fn slot_count(&mut self, what: &str, a: ArrayId, n: usize) {
        let arr = &self.m.arrays[a];
        if arr.positions.len() != n {
            self.err(format!("{what}: `{}` indexed with {n} slots but its signature has {} positions", arr.name, arr.positions.len()));
        }
    }

    fn slots(&mut self, what: &str, s: &[IndexSlot], vars: bool) {
        for x in s {
            if let IndexSlot::Expr(e) = x {
                self.expr(what, e, vars);
            }
        }
    }

    /// Ids in range; with `vars`, a `Var` must be one of the statement's
    /// variables (`self.vars`; an eintup used only inside `DIMS`/`RANK` is
    /// not one).
    fn expr(&mut self, what: &str, e: &IndexExpr, vars: bool) {
        match &e.kind {
            IndexKind::Var(t) => {
                self.eintup_ids(what, &[*t]);
                if let (true, Some(x)) = (vars, self.m.eintups.get(*t)) {
                    if !self.vars.contains(t) {
                        let message = format!("{what}: index variable `{}` is not a variable of the statement", x.name);
                        self.errs.push(Violation { message, span: Some(e.span) });
                    }
                }
            }
            IndexKind::Lit(_) => {}
            IndexKind::Dims(l) => self.dims_list(what, l),
            IndexKind::Rank(l) => self.eintup_ids(what, l),
            IndexKind::Flat(v) => v.iter().for_each(|x| self.expr(what, x, vars)),
            IndexKind::Slice { array, indices } => {
                if self.array_id(what, *array) {
                    self.slot_count(what, *array, indices.len());
                }
                // Exactly one `:` (docs/language.md s.4); an array read
                // inside an index without one is no slice.
                let colons = indices.iter().filter(|s| matches!(s, IndexSlot::Colon(_))).count();
                if colons != 1 {
                    self.errs.push(Violation { message: format!("{what}: a slice has {colons} `:` slots, not exactly one"), span: Some(e.span) });
                }
                self.slots(what, indices, vars);
            }
            IndexKind::Bin(_, a, b) => {
                self.expr(what, a, vars);
                self.expr(what, b, vars);
            }
        }
    }
}

// ---------------------------------------------------------- refinement

/// Checks that `after` only refines the types of `before`: the same eintups
/// and arrays by name; known ranks and static dims kept; array dtypes kept;
/// every range attribute kept or narrowed; statement and op signature types
/// keep their eintups (by name) and dtype. Ids may be renumbered.
///
/// A pass may add arrays that no statement of `before` mentions, and
/// statements that assign only them (`plan-products`' temporaries): the
/// statements of `after` that assign arrays of `before` correspond, in
/// order, to the statements of `before`.
pub fn verify_refines(before: &Module, after: &Module) -> Result<(), String> {
    let mut errs = Vec::new();
    // By name, through maps: linear in the module's size.
    let after_eintups: HashMap<&str, &Eintup> = after.eintups.iter().map(|e| (e.name.as_str(), e)).collect();
    let before_eintups: HashSet<&str> = before.eintups.iter().map(|e| e.name.as_str()).collect();
    let after_arrays: HashMap<&str, &Array> = after.arrays.iter().map(|a| (a.name.as_str(), a)).collect();
    let before_arrays: HashSet<&str> = before.arrays.iter().map(|a| a.name.as_str()).collect();
    for e in &before.eintups {
        let Some(a) = after_eintups.get(e.name.as_str()) else {
            errs.push(format!("eintup `{}` was removed", e.name));
            continue;
        };
        let what = format!("eintup `{}`", e.name);
        keep_rank_dims(&mut errs, &what, (e.rank, &e.dims), (a.rank, &a.dims));
    }
    for a in &after.eintups {
        if !before_eintups.contains(a.name.as_str()) {
            errs.push(format!("eintup `{}` was added", a.name));
        }
    }
    for b in &before.arrays {
        let Some(a) = after_arrays.get(b.name.as_str()) else {
            errs.push(format!("array `{}` was removed", b.name));
            continue;
        };
        let what = format!("array `{}`", b.name);
        if a.dtype != b.dtype {
            errs.push(format!("{what}: dtype changed from {} to {}", b.dtype.text(), a.dtype.text()));
        }
        if a.positions.len() != b.positions.len() {
            errs.push(format!("{what}: {} positions became {}", b.positions.len(), a.positions.len()));
        } else {
            for (k, (pb, pa)) in b.positions.iter().zip(&a.positions).enumerate() {
                keep_rank_dims(&mut errs, &format!("{what} position {}", k + 1), (pb.rank, &pb.dims), (pa.rank, &pa.dims));
            }
        }
        for Attr::Range { lo, hi } in &b.attrs {
            let narrower = a
                .attrs
                .iter()
                .any(|Attr::Range { lo: lo2, hi: hi2 }| bound_le(before, lo, after, lo2) == Some(true) && bound_le(after, hi2, before, hi) == Some(true));
            if !narrower {
                let old = range_text(before, lo, hi);
                let new: Vec<String> = a.attrs.iter().map(|Attr::Range { lo, hi }| range_text(after, lo, hi)).collect();
                if new.is_empty() {
                    errs.push(format!("{what}: range {old} was dropped"));
                } else {
                    errs.push(format!("{what}: range {old} was widened (or cannot be shown no wider) to {}", new.join(", ")));
                }
            }
        }
    }
    // Added arrays are temporaries: only added statements assign them.
    let kept: Vec<&Stmt> = after.stmts.iter().filter(|s| before_arrays.contains(array_name(after, s.array))).collect();
    if before.stmts.len() != kept.len() {
        errs.push(format!("{} statements became {}", before.stmts.len(), kept.len()));
    } else {
        for (si, (sb, sa)) in before.stmts.iter().zip(kept).enumerate() {
            let (nb, na) = (array_name(before, sb.array), array_name(after, sa.array));
            if nb != na {
                errs.push(format!("stmt {si}: assigns `{na}` instead of `{nb}`"));
                continue;
            }
            // The result's type always corresponds; the other ops only
            // while the pass kept the op list's shape. A right side that
            // reads temporaries may vary over fewer eintups: those a
            // temporary summed (never one of the left side's).
            let reads_temporary = sa.ops.iter().any(|o| matches!(o.kind, OpKind::Read { array, .. } if !before_arrays.contains(array_name(after, array))));
            let reshaped = sb.ops.len() != sa.ops.len() || reads_temporary;
            let mut lhs = Vec::new();
            sb.indices.iter().for_each(|x| {
                x.for_each(&mut |e| {
                    if let IndexKind::Var(t) = e.kind {
                        lhs.push(t)
                    }
                })
            });
            let lhs = eintup_names(before, &lhs);
            let pairs: Vec<(usize, usize)> =
                if !reshaped { (0..sb.ops.len()).collect::<Vec<_>>().into_iter().map(|k| (k, k)).collect() } else { vec![(sb.result, sa.result)] };
            for (kb, ka) in pairs {
                let (Some(ob), Some(oa)) = (sb.ops.get(kb), sa.ops.get(ka)) else { continue };
                let what = format!("stmt {si} ({nb}) op %{ka}");
                if ob.ty.dtype != oa.ty.dtype {
                    errs.push(format!("{what}: dtype changed from {} to {}", ob.ty.dtype.text(), oa.ty.dtype.text()));
                }
                let eb = eintup_names(before, &ob.ty.eintups);
                let ea = eintup_names(after, &oa.ty.eintups);
                let summed_away = reshaped && ea.iter().all(|x| eb.contains(x)) && eb.iter().all(|x| ea.contains(x) || !lhs.contains(x));
                if eb != ea && !summed_away {
                    errs.push(format!("{what}: signature eintups changed from <{}> to <{}>", eb.join(", "), ea.join(", ")));
                }
            }
        }
    }
    if errs.is_empty() {
        Ok(())
    } else {
        Err(errs.join("\n"))
    }
}

fn array_name(m: &Module, a: ArrayId) -> &str {
    m.arrays.get(a).map_or("?", |x| x.name.as_str())
}

fn eintup_names<'a>(m: &'a Module, l: &[EintupId]) -> Vec<&'a str> {
    l.iter().map(|e| m.eintups.get(*e).map_or("?", |x| x.name.as_str())).collect()
}

fn dims_list_names(m: &Module, l: &DimsList) -> Vec<String> {
    l.0.iter()
        .map(|i| match i {
            DimsItem::Eintup(e) => m.eintups.get(*e).map_or("?", |x| x.name.as_str()).to_string(),
            DimsItem::Lit(n) => n.to_string(),
        })
        .collect()
}

/// The rank of an index expression given the eintups' ranks: `Some(None)`
/// for a scalar (a literal, `RANK(..)`, which broadcast), `Some(Some(r))`
/// for a tuple, `None` when an eintup's rank is unknown or the expression
/// holds a slice (its rank is data's).
fn expr_rank(e: &IndexExpr, rank_of: &dyn Fn(EintupId) -> Option<usize>) -> Option<Option<usize>> {
    Some(match &e.kind {
        IndexKind::Var(t) => Some(rank_of(*t)?),
        IndexKind::Lit(_) | IndexKind::Rank(_) => None,
        IndexKind::Dims(l) => Some(l.rank(rank_of)?),
        IndexKind::Flat(_) => Some(1),
        IndexKind::Slice { .. } => return None,
        IndexKind::Bin(_, a, b) => expr_rank(a, rank_of)?.or(expr_rank(b, rank_of)?),
    })
}

fn keep_rank_dims(errs: &mut Vec<String>, what: &str, before: (Option<usize>, &Option<Vec<i64>>), after: (Option<usize>, &Option<Vec<i64>>)) {
    if let Some(r) = before.0 {
        match after.0 {
            None => errs.push(format!("{what}: rank {r} became unknown")),
            Some(r2) if r2 != r => errs.push(format!("{what}: rank changed from {r} to {r2}")),
            Some(_) => {}
        }
    }
    if let Some(d) = before.1 {
        match after.1 {
            None => errs.push(format!("{what}: static dims {d:?} became unknown")),
            Some(d2) if d2 != d => errs.push(format!("{what}: static dims changed from {d:?} to {d2:?}")),
            Some(_) => {}
        }
    }
}

fn range_text(m: &Module, lo: &Bound, hi: &Bound) -> String {
    let b = |x: &Bound| match x {
        Bound::Int(n) => n.to_string(),
        Bound::DimsAt(l) => format!("DIMS({})", dims_list_names(m, l).join(", ")),
    };
    format!("[{}, {})", b(lo), b(hi))
}

/// A bound's values: one for every component, or one per component of the
/// innermost position (static `DIMS(list)`).
enum BoundVal {
    All(i64),
    Each(Vec<i64>),
}

fn bound_val(m: &Module, b: &Bound) -> Option<BoundVal> {
    match b {
        Bound::Int(n) => Some(BoundVal::All(*n)),
        Bound::DimsAt(l) => Some(BoundVal::Each(l.value(|e| m.eintups.get(e)?.dims.clone())?)),
    }
}

/// Whether bound `a` (in module `ma`) is component-wise <= bound `b` (in
/// `mb`); `None` when that cannot be decided (symbolic dims of different
/// eintups, or tuples of different lengths).
fn bound_le(ma: &Module, a: &Bound, mb: &Module, b: &Bound) -> Option<bool> {
    if let (Bound::DimsAt(la), Bound::DimsAt(lb)) = (a, b) {
        if dims_list_names(ma, la) == dims_list_names(mb, lb) {
            return Some(true);
        }
    }
    Some(match (bound_val(ma, a)?, bound_val(mb, b)?) {
        (BoundVal::All(x), BoundVal::All(y)) => x <= y,
        (BoundVal::All(x), BoundVal::Each(v)) => v.iter().all(|y| x <= *y),
        (BoundVal::Each(v), BoundVal::All(y)) => v.iter().all(|x| *x <= y),
        (BoundVal::Each(v), BoundVal::Each(w)) => {
            if v.len() != w.len() {
                return None;
            }
            v.iter().zip(&w).all(|(x, y)| x <= y)
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::driver::Source;
    use crate::ir::et::parse::parse_module;
    use crate::ir::et::print;

    fn text(m: &Module) -> String {
        print::module(m)
    }

    /// gather_nd's shape: a range attribute, a slice, a DIMS-only eintup.
    const GATHER: &str = "\
src[batch,loc,item] = RANDOM(0, 10, FLOAT)
idx[batch,w,coord] = RANDOM(0, DIMS(loc)[coord], INT)
dst[batch,w,item] = src[batch,idx[batch,w,:],item]
dst

DIMS(coord) = RANK(loc)
";

    fn ranked() -> Module {
        let (p, _) = crate::pipeline::ranked(&Source::from_string("g.et", GATHER)).expect("ranks");
        p.module
    }

    fn special() -> Module {
        let binds: Vec<String> = ["batch=[2]", "loc=[3,4]", "item=[]", "w=[5]"].iter().map(|s| s.to_string()).collect();
        crate::pipeline::specialized_module(&Source::from_string("g.et", GATHER), &binds, 0).expect("specialises").0
    }

    fn fails(m: &Module, needle: &str) {
        match verify(m) {
            Ok(()) => panic!("verifier accepted a module violating `{needle}`:\n{}", text(m)),
            Err(e) => assert!(e.to_string().contains(needle), "expected `{needle}` in:\n{e}"),
        }
    }

    fn refine_fails(before: &Module, after: &Module, needle: &str) {
        match verify_refines(before, after) {
            Ok(()) => panic!("refinement accepted `{needle}`"),
            Err(e) => assert!(e.contains(needle), "expected `{needle}` in:\n{e}"),
        }
    }

    #[test]
    fn pipeline_modules_verify() {
        assert_eq!(verify(&ranked()), Ok(()));
        let s = special();
        assert_eq!(verify(&s), Ok(()));
        // loc=[3,4] -> coord has dims [2] (= RANK(loc)).
        assert_eq!(s.eintups[s.eintup_by_name("coord").unwrap()].dims, Some(vec![2]));
    }

    #[test]
    fn a_position_s_rank_is_its_expression_s() {
        // Found by the IR fuzz target (codegen tests/it/ir_fuzz.rs): a
        // rank-polymorphic module whose position states rank 3 for an
        // eintup of rank 1 made `specialize` fail its own check (exit 70).
        let mut m = ranked();
        let (a, k, t) = m
            .arrays
            .iter()
            .enumerate()
            .find_map(|(a, arr)| arr.positions.iter().enumerate().find_map(|(k, p)| if let IndexKind::Var(t) = p.expr.kind { Some((a, k, t)) } else { None }))
            .unwrap();
        let r = 1;
        m.eintups[t].rank = Some(r);
        m.eintups[t].dims = None;
        m.arrays[a].positions[k].rank = Some(r + 2);
        m.arrays[a].positions[k].dims = None;
        fails(&m, &format!("position {}: rank {} but its expression has rank {r}", k + 1, r + 2));
    }

    #[test]
    fn rank_must_match_static_dims() {
        let mut m = special();
        m.eintups[0].rank = Some(2);
        fails(&m, "eintup `batch`: rank 2 but 1 static dims [2]");
        let mut m = special();
        m.arrays[0].positions[1].rank = None;
        fails(&m, "array `src` position 2: static dims [3, 4] but unknown rank");
    }

    #[test]
    fn position_dims_follow_from_eintups() {
        let mut m = special();
        // src's first position is batch, whose dims are [2].
        m.arrays[0].positions[0].dims = Some(vec![3]);
        fails(&m, "array `src` position 1: dims [3] but the eintups' dims give [2]");
    }

    #[test]
    fn ssa_operands_must_be_earlier() {
        let mut m = ranked();
        // stmt 0: %0 const 0, %1 const 10, %2 random %0, %1.
        m.stmts[0].ops[2].kind = OpKind::Random { lo: 0, hi: 2, dtype: ElemType::Float };
        fails(&m, "stmt 0 op %2: operand %2 is not an earlier op");
        let mut m = ranked();
        m.stmts[0].ops[1].kind = OpKind::Neg(1);
        fails(&m, "stmt 0 op %1: operand %1");
    }

    #[test]
    fn result_must_be_an_op() {
        let mut m = ranked();
        m.stmts[2].result = 1;
        fails(&m, "stmt 2: result %1 is not one of its 1 ops");
    }

    #[test]
    fn ids_must_be_in_range() {
        let mut m = ranked();
        m.stmts[1].ops[0].ty.eintups.push(99);
        fails(&m, "stmt 1 op %0 type: eintup id 99 out of range");
        let mut m = ranked();
        m.outputs.push(7);
        fails(&m, "outputs: array id 7 out of range");
        let mut m = ranked();
        m.arrays[1].def_stmt = 5;
        fails(&m, "array `idx`: defining statement 5 out of range");
        let mut m = ranked();
        m.arrays[1].def_stmt = 0;
        fails(&m, "array `idx`: defining statement 0 assigns another array");
        let mut m = ranked();
        m.call = Some(FrameworkCall { func: "f".into(), args: vec![(None, CallArg::Array(3))], span: Default::default() });
        fails(&m, "call f: array id 3 out of range");
    }

    #[test]
    fn index_vars_must_be_statement_vars() {
        let mut m = ranked();
        // stmt 0 is src[batch, loc, item]; `w` is not one of its vars.
        let w = m.eintup_by_name("w").unwrap();
        m.stmts[0].indices[0] = IndexSlot::Expr(IndexExpr { kind: IndexKind::Var(w), span: Default::default() });
        fails(&m, "stmt 0: index variable `w` is not a variable of the statement");
    }

    #[test]
    fn slot_count_must_match_signature() {
        let mut m = ranked();
        if let OpKind::Read { indices, .. } = &mut m.stmts[2].ops[0].kind {
            indices.pop();
        }
        fails(&m, "stmt 2 op %0: `src` indexed with 2 slots but its signature has 3 positions");
    }

    #[test]
    fn specialising_refines() {
        let (r, s) = (ranked(), special());
        assert_eq!(verify_refines(&r, &s), Ok(()));
        assert_eq!(verify_refines(&s, &s), Ok(()));
        // The reverse forgets static dims.
        refine_fails(&s, &r, "eintup `batch`: rank 1 became unknown");
        refine_fails(&s, &r, "eintup `loc`: static dims [3, 4] became unknown");
        refine_fails(&s, &r, "array `src` position 2: static dims [3, 4] became unknown");
    }

    #[test]
    fn static_dims_and_dtype_may_not_change() {
        let s = special();
        let mut t = s.clone();
        t.eintups[0].dims = Some(vec![3]);
        refine_fails(&s, &t, "eintup `batch`: static dims changed from [2] to [3]");
        let mut t = s.clone();
        t.arrays[2].dtype = ElemType::Int;
        refine_fails(&s, &t, "array `dst`: dtype changed from FLOAT to INT");
        let mut t = s.clone();
        t.arrays[0].name = "source".into();
        refine_fails(&s, &t, "array `src` was removed");
    }

    #[test]
    fn ranges_may_narrow_but_not_widen_or_vanish() {
        let s = special();
        let idx = s.array_by_name("idx").unwrap();
        let loc = s.eintup_by_name("loc").unwrap();
        assert_eq!(s.arrays[idx].attrs, vec![Attr::Range { lo: Bound::Int(0), hi: Bound::DimsAt(DimsList::of([loc])) }]);
        let with = |lo: Bound, hi: Bound| {
            let mut t = s.clone();
            t.arrays[idx].attrs = vec![Attr::Range { lo, hi }];
            t
        };
        // loc = [3, 4]: [0, 3) is inside [0, DIMS(loc)) component-wise, [1, 3) too.
        assert_eq!(verify_refines(&s, &with(Bound::Int(0), Bound::Int(3))), Ok(()));
        assert_eq!(verify_refines(&s, &with(Bound::Int(1), Bound::Int(3))), Ok(()));
        refine_fails(&s, &with(Bound::Int(0), Bound::Int(4)), "array `idx`: range [0, DIMS(loc)) was widened");
        refine_fails(&s, &with(Bound::Int(-1), Bound::DimsAt(DimsList::of([loc]))), "was widened");
        let mut t = s.clone();
        t.arrays[idx].attrs.clear();
        refine_fails(&s, &t, "array `idx`: range [0, DIMS(loc)) was dropped");
        // Symbolic: DIMS(loc) vs a number cannot be shown no wider.
        let r = ranked();
        let mut t = r.clone();
        t.arrays[idx].attrs = vec![Attr::Range { lo: Bound::Int(0), hi: Bound::Int(3) }];
        refine_fails(&r, &t, "cannot be shown no wider");
    }

    #[test]
    fn op_types_keep_eintups_and_dtype() {
        let s = special();
        let mut t = s.clone();
        t.stmts[2].ops[0].ty.dtype = ElemType::Int;
        refine_fails(&s, &t, "stmt 2 (dst) op %0: dtype changed from FLOAT to INT");
        let mut t = s.clone();
        t.stmts[0].ops[2].ty.eintups.pop();
        refine_fails(&s, &t, "stmt 0 (src) op %2: signature eintups changed from <batch, loc, item> to <batch, loc>");
    }

    #[test]
    fn parsed_text_verifies() {
        let m = parse_module(&print::module(&special())).expect("parses");
        assert_eq!(verify(&m), Ok(()));
    }
}
