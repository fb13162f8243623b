//! Reverse-mode differentiation, from a program to a program
//! (docs/gradients.md): the adjoint of a `.et` program with respect to
//! some of its FLOAT inputs is another `.et` program, which runs wherever
//! the forward one runs. It keeps the forward statements it needs, takes
//! one cotangent input `grad_y` per differentiated output `y`, and writes
//! `grad_x`, the gradient of `sum(grad_y * y)` with respect to `x`, for
//! each `--wrt` array.
//!
//! Each forward statement `a[L] (=|+=|max=|min=) rhs` gives, in reverse
//! order, one statement per read `b[R]` of an active array:
//! `grad_b[R] += grad_a[L] * d(rhs)/d(b[R])`, enumerated over the same
//! instantiations as the forward statement (reads the derivative drops
//! come back as bounds guards), then, where the statement overwrote
//! cells, `grad_a[L] = 0` over the cells it reached. `invert` turns the
//! scatters among them back into gathers where the index map allows.

mod derivative;
mod expr;
mod invert;
mod versions;

use crate::ir::et::{print, ArrayId, EintupId, ElemType, IndexExpr, IndexKind, IndexSlot, Module, OpKind, Position, Stmt};
use crate::sema::Program;
use et_grammar::ast::{AssignOp, BinOp, CmpOp};
use et_grammar::Diagnostic;
use expr::{statement, Expr};
use std::collections::{BTreeSet, HashMap, HashSet};

/// What to differentiate: with respect to which inputs, and which outputs
/// (empty: the program's results, [`Module::result_arrays`], the FLOAT ones).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Request {
    pub wrt: Vec<String>,
    pub of: Vec<String>,
    /// Arrays held constant: no gradient flows through them (what a
    /// framework call sees in a computed array it is passed, `check --grad`).
    pub constant: Vec<String>,
}

/// How one adjoint statement writes its gradient.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Form {
    /// Each instantiation writes its own cell's sum: no atomics.
    Gather,
    /// A scatter rewritten into a gather: the equations it solved.
    Rewritten(String),
    /// Several instantiations add into one cell (atomics on the GPU), and why
    /// it could not be rewritten.
    Scatter(String),
}

/// One adjoint statement that adds into a gradient.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Contribution {
    /// The gradient array written.
    pub target: String,
    /// The forward read it differentiates (`w[ipos - DIMS(stride)*opos, ichan, ochan]`).
    pub read: String,
    pub form: Form,
}

#[derive(Clone, Debug)]
pub struct Adjoint {
    /// The adjoint program as `.et` source ...
    pub source: String,
    /// ... and resolved.
    pub program: Program,
    pub contributions: Vec<Contribution>,
    /// The gradient outputs, in `--wrt` order.
    pub gradients: Vec<String>,
    /// The cotangent inputs, in the order of the differentiated outputs.
    pub cotangents: Vec<String>,
}

impl Adjoint {
    /// The `--bind`s that put the adjoint at a configuration of the forward
    /// program (its eintups' `dims`), so that both take the same arrays; an
    /// eintup the adjoint does not mention is left out.
    pub fn binds_at<'a>(&self, dims: impl IntoIterator<Item = (&'a str, &'a [i64])>) -> Vec<String> {
        dims.into_iter()
            .filter(|(n, _)| self.program.module.eintup_by_name(n).is_some())
            .map(|(n, d)| format!("{n}=[{}]", d.iter().map(|x| x.to_string()).collect::<Vec<_>>().join(",")))
            .collect()
    }

    /// One line per contribution, for `--stats`.
    pub fn summary(&self) -> String {
        let count = |f: fn(&Form) -> bool| self.contributions.iter().filter(|c| f(&c.form)).count();
        format!(
            "{} adjoint statements: {} gathers, {} rewritten from scatters, {} scatters",
            self.contributions.len(),
            count(|f| *f == Form::Gather),
            count(|f| matches!(f, Form::Rewritten(_))),
            count(|f| matches!(f, Form::Scatter(_)))
        )
    }
}

fn user(code: &'static str, msg: String) -> Diagnostic {
    Diagnostic::error(code, msg)
}

/// The adjoint of `prog` (resolved, rank-polymorphic). User errors are
/// located in `prog`'s source (an unknown name has no place: it is a
/// message without labels).
pub fn differentiate(prog: &Program, req: &Request) -> Result<Adjoint, Vec<Diagnostic>> {
    let m0 = &prog.module;
    let wrt = request_arrays(m0, &req.wrt, "--wrt")?;
    if wrt.is_empty() {
        return Err(vec![user("E0801", "nothing to differentiate with respect to: name FLOAT inputs with --wrt (or the pass's `wrt=` option)".into())]);
    }
    for &a in &wrt {
        let arr = &m0.arrays[a];
        if arr.dtype != ElemType::Float || !arr.is_input {
            let what = if arr.dtype != ElemType::Float { "an INT array" } else { "not an input (defined by RANDOM)" };
            return Err(vec![user("E0801", format!("cannot differentiate with respect to `{}`: it is {what}; only FLOAT inputs can be", arr.name))
                .at(arr.span, "defined here")]);
        }
    }
    let mut of = request_arrays(m0, &req.of, "--of")?;
    if req.of.is_empty() {
        of = m0.result_arrays().into_iter().filter(|&a| m0.arrays[a].dtype == ElemType::Float).collect();
    }
    if of.is_empty() {
        return Err(vec![user("E0802", "the program has no FLOAT result to differentiate: name one with --of".into())]);
    }
    for &a in &of {
        let arr = &m0.arrays[a];
        if arr.dtype != ElemType::Float {
            return Err(vec![user("E0802", format!("cannot differentiate `{}`: it is an INT array", arr.name)).at(arr.span, "defined here")]);
        }
    }

    let mut names: HashSet<String> = m0.arrays.iter().map(|a| a.name.clone()).chain(m0.eintups.iter().map(|e| e.name.clone())).collect();
    let mut fresh = move |want: &str| {
        let mut name = want.to_string();
        while !names.insert(name.clone()) {
            name.push('_');
        }
        name
    };

    // The forward program with one array per write, resolved again.
    let v = versions::versioned(prog, &mut fresh).map_err(|d| vec![d])?;
    let of_last: Vec<String> = of.iter().map(|&a| v.last[a].clone()).collect();
    // An input no statement writes again is the output itself.
    if let Some(&a) = of.iter().find(|&&a| wrt.contains(&a) && v.last[a] == m0.arrays[a].name) {
        let arr = &m0.arrays[a];
        return Err(vec![user("E0802", format!("`{}` is both differentiated and differentiated with respect to", arr.name)).at(arr.span, "defined here")]);
    }
    let constraints: Vec<String> = prog.constraints.iter().map(|c| constraint_source(m0, c)).collect();
    let forward_text = format!("{}\n\n{}\n\n{}\n", v.lines.join("\n"), of_last.join(", "), constraints.join("\n"));
    let forward_file = et_grammar::parse_file(&forward_text).map_err(|d| internal(&forward_text, d))?;
    let p1 = crate::sema::resolve::resolve(&forward_file).map_err(|d| internal(&forward_text, d))?;
    let m = &p1.module;
    let id = |name: &str| {
        m.array_by_name(name).ok_or_else(|| internal(&forward_text, vec![Diagnostic::error("E0899", format!("the versioned program lost `{name}`"))]))
    };

    let mut gen = Generator {
        m,
        fresh: &mut fresh,
        lines: Vec::new(),
        needed: HashSet::new(),
        mentioned: BTreeSet::new(),
        contributions: Vec::new(),
        acc: HashMap::new(),
        cotangent: HashMap::new(),
        domains: HashMap::new(),
    };
    let wrt1: Vec<ArrayId> = wrt.iter().map(|&a| id(&m0.arrays[a].name)).collect::<Result<_, _>>()?;
    let of1: Vec<ArrayId> = of_last.iter().map(|n| id(n)).collect::<Result<_, _>>()?;
    let constant: Vec<ArrayId> = request_arrays(m0, &req.constant, "constant")?.iter().map(|&a| id(&v.last[a])).collect::<Result<_, _>>()?;
    let active = gen.active(&wrt1, &of1, &constant);

    // Cotangents, then the accumulators.
    let mut gradients = Vec::new();
    let mut cotangents = Vec::new();
    let mut declarations = Vec::new();
    for &x in &wrt1 {
        let g = (gen.fresh)(&format!("grad_{}", m.arrays[x].name));
        declarations.push(statement(m, &g, &signature_slots(m, x), AssignOp::Assign, &Expr::Float(0.0)));
        gradients.push(g.clone());
        gen.acc.insert(x, g);
    }
    for (&a, &y) in of.iter().zip(&of1) {
        let cot = (gen.fresh)(&format!("grad_{}", m0.arrays[a].name));
        declarations.push(statement(
            m,
            &cot,
            &signature_slots(m, y),
            AssignOp::Assign,
            &Expr::Random(Box::new(Expr::Int(-1)), Box::new(Expr::Int(1)), ElemType::Float),
        ));
        cotangents.push(cot.clone());
        if !active[y] {
            continue;
        }
        let written_again = m.stmts.iter().filter(|s| s.array == y).count() > 1;
        let read_later = m.stmts.iter().any(|s| s.reads(y));
        if written_again {
            // Its writes mask the accumulator, so it starts as a copy of
            // the cotangent: exact, since an array written again has a
            // distinct eintup at each position (`versions`).
            let acc = (gen.fresh)(&format!("grad_{}_total", m.arrays[y].name));
            declarations.push(statement(m, &acc, &signature_slots(m, y), AssignOp::Assign, &Expr::read(&cot, &signature_slots(m, y))));
            gen.acc.insert(y, acc);
        } else if read_later {
            // Later reads add into an accumulator of their own, and its
            // gradient is the sum of both: a copy over a signature like
            // `z[d //^ 2]` would add each cell once per eintup value.
            let acc = (gen.fresh)(&format!("grad_{}_later", m.arrays[y].name));
            declarations.push(statement(m, &acc, &signature_slots(m, y), AssignOp::Assign, &Expr::Float(0.0)));
            gen.acc.insert(y, acc);
            gen.cotangent.insert(y, cot);
        } else {
            gen.acc.insert(y, cot);
        }
    }
    for (a, &is_active) in active.iter().enumerate() {
        if is_active && !gen.acc.contains_key(&a) {
            let g = (gen.fresh)(&format!("grad_{}", m.arrays[a].name));
            declarations.push(statement(m, &g, &signature_slots(m, a), AssignOp::Assign, &Expr::Float(0.0)));
            gen.acc.insert(a, g);
        }
    }
    for (si, s) in m.stmts.iter().enumerate().rev() {
        if active[s.array] && !m.defines_input(si) {
            gen.statement(si, s, &active);
        }
    }

    // The forward statements the adjoint reads (and every input, so the
    // adjoint takes the forward program's inputs).
    // A statement it does not need is kept too when it alone mentions an
    // eintup: the constraints are about it, and the forward program's
    // accesses are what bound its dims.
    let mut keep = vec![false; m.stmts.len()];
    let mut needed: HashSet<ArrayId> = gen.needed.iter().filter_map(|n| m.array_by_name(n)).collect();
    let mut mentioned = gen.mentioned.clone();
    loop {
        for (si, s) in m.stmts.iter().enumerate().rev() {
            if !keep[si] && (needed.contains(&s.array) || m.defines_input(si)) {
                keep[si] = true;
                needed.extend(reads_of(s));
                mentioned.extend(stmt_mentions(s));
            }
        }
        let Some(si) = (0..m.stmts.len()).find(|&si| !keep[si] && stmt_mentions(&m.stmts[si]).iter().any(|t| !mentioned.contains(t))) else { break };
        needed.insert(m.stmts[si].array);
    }
    let mut text = String::new();
    for (si, s) in m.stmts.iter().enumerate() {
        if keep[si] {
            text.push_str(&statement(m, &m.arrays[s.array].name, &s.indices, s.op, &Expr::of_op(m, s, s.result)));
            text.push('\n');
        }
    }
    for l in declarations.iter().chain(&gen.lines) {
        text.push_str(l);
        text.push('\n');
    }
    text.push('\n');
    text.push_str(&gradients.join(", "));
    text.push_str("\n\n");
    for c in &constraints {
        text.push_str(c);
        text.push('\n');
    }
    // What the adjoint's reader sees; an error here is the differentiator's.
    let file = et_grammar::parse_file(&text).map_err(|d| internal(&text, d))?;
    let program = crate::sema::resolve::resolve(&file).map_err(|d| internal(&text, d))?;
    Ok(Adjoint { source: text, program, contributions: gen.contributions, gradients, cotangents })
}

/// A constraint line as `.et` source.
fn constraint_source(m: &Module, c: &crate::sema::Constraint) -> String {
    match &c.rel {
        crate::sema::Rel::Eq(e) => {
            let described = c.describe(m);
            let head = described.split(" = ").next().unwrap_or_default();
            format!("{head} = {}", expr::index_source(m, e))
        }
        crate::sema::Rel::In { .. } => c.describe(m),
    }
}

fn internal(text: &str, d: Vec<Diagnostic>) -> Vec<Diagnostic> {
    let msg = d.iter().map(|d| d.render("adjoint.et", text)).collect::<String>();
    vec![Diagnostic::error("E0899", format!("internal error: the differentiated program does not read back:\n{msg}\n{text}"))]
}

fn request_arrays(m: &Module, names: &[String], flag: &str) -> Result<Vec<ArrayId>, Vec<Diagnostic>> {
    let mut out = Vec::new();
    for n in names {
        match m.array_by_name(n) {
            Some(a) if !out.contains(&a) => out.push(a),
            Some(_) => {}
            None => {
                let known: Vec<&str> = m.arrays.iter().map(|a| a.name.as_str()).collect();
                return Err(vec![user("E0801", format!("{flag} names `{n}`, which is not an array of the program (its arrays: {})", known.join(", ")))]);
            }
        }
    }
    Ok(out)
}

/// An array's first-mention positions as slots: a statement with them on
/// the left gets the array's shape.
fn signature_slots(m: &Module, a: ArrayId) -> Vec<IndexSlot> {
    m.arrays[a].positions.iter().map(|p| IndexSlot::Expr(p.expr.clone())).collect()
}

/// Arrays `s` reads, as values or through slices.
fn reads_of(s: &Stmt) -> Vec<ArrayId> {
    let mut out = Vec::new();
    s.for_each_index_expr(&mut |e| {
        if let IndexKind::Slice { array, .. } = e.kind {
            out.push(array)
        }
    });
    for op in &s.ops {
        if let OpKind::Read { array, .. } = op.kind {
            out.push(array);
        }
    }
    out
}

/// The eintups an index expression mentions: as variables and in
/// `DIMS(..)` and `RANK(..)` lists.
fn index_mentions(e: &IndexExpr, out: &mut BTreeSet<EintupId>) {
    e.for_each(&mut |x| match &x.kind {
        IndexKind::Var(t) => {
            out.insert(*t);
        }
        IndexKind::Dims(l) => out.extend(l.eintups()),
        IndexKind::Rank(l) => out.extend(l.iter().copied()),
        _ => {}
    });
}

/// The eintups statement `s` mentions anywhere.
fn stmt_mentions(s: &Stmt) -> BTreeSet<EintupId> {
    let mut out = BTreeSet::new();
    s.for_each_index_expr(&mut |e| index_mentions(e, &mut out));
    for op in &s.ops {
        match &op.kind {
            OpKind::DimsAt(l, _) => out.extend(l.eintups()),
            OpKind::Rank(l) => out.extend(l.iter().copied()),
            _ => {}
        }
    }
    out
}

fn read_key(name: &str, m: &Module, slots: &[IndexSlot]) -> String {
    format!("{name}[{}]", print::slots(m, slots))
}

fn vars_of_slots(slots: &[IndexSlot], out: &mut BTreeSet<EintupId>) {
    for s in slots {
        s.for_each(&mut |e| {
            if let IndexKind::Var(t) = e.kind {
                out.insert(t);
            }
        });
    }
}

fn vars_of_expr(e: &Expr, out: &mut BTreeSet<EintupId>) {
    e.for_each_index(&mut |x: &IndexExpr| {
        x.for_each(&mut |y| {
            if let IndexKind::Var(t) = y.kind {
                out.insert(t);
            }
        })
    });
}

/// A read no bounds check can skip: every slot is the eintup the array's
/// signature has there.
fn trivially_in_bounds(positions: &[Position], slots: &[IndexSlot]) -> bool {
    positions.len() == slots.len()
        && positions.iter().zip(slots).all(|(p, s)| match (&p.expr.kind, s) {
            (IndexKind::Var(a), IndexSlot::Expr(IndexExpr { kind: IndexKind::Var(b), .. })) => a == b,
            // DIMS(n) is n + 1: the literal n is always in bounds.
            (IndexKind::Lit(a), IndexSlot::Expr(IndexExpr { kind: IndexKind::Lit(b), .. })) => a == b,
            _ => false,
        })
}

struct Generator<'a, F: FnMut(&str) -> String> {
    m: &'a Module,
    fresh: &'a mut F,
    lines: Vec<String>,
    /// Names of the arrays the adjoint statements read.
    needed: HashSet<String>,
    /// The eintups the adjoint statements mention.
    mentioned: BTreeSet<EintupId>,
    contributions: Vec<Contribution>,
    /// Each active array's gradient accumulator.
    acc: HashMap<ArrayId, String>,
    /// An output read later: its cotangent, which its gradient adds to
    /// the accumulator's.
    cotangent: HashMap<ArrayId, String>,
    /// `domain_t` arrays declared for the gather rewrite.
    domains: HashMap<EintupId, String>,
}

impl<'a, F: FnMut(&str) -> String> Generator<'a, F> {
    /// FLOAT arrays that depend on a `wrt` array and that an `of` array
    /// depends on (each array is written by its first mention and at most
    /// one copy-then-write pair, so one pass each way sees every path).
    fn active(&self, wrt: &[ArrayId], of: &[ArrayId], constant: &[ArrayId]) -> Vec<bool> {
        let m = self.m;
        let float = |a: ArrayId| m.arrays[a].dtype == ElemType::Float;
        let value_reads =
            |s: &Stmt| s.ops.iter().filter_map(|op| if let OpKind::Read { array, .. } = op.kind { Some(array) } else { None }).collect::<Vec<_>>();
        let mut varied = vec![false; m.arrays.len()];
        wrt.iter().for_each(|&a| varied[a] = true);
        for s in &m.stmts {
            if float(s.array) && !constant.contains(&s.array) && value_reads(s).iter().any(|&b| varied[b]) {
                varied[s.array] = true;
            }
        }
        let mut useful = vec![false; m.arrays.len()];
        of.iter().for_each(|&a| useful[a] = true);
        for s in m.stmts.iter().rev() {
            if useful[s.array] {
                value_reads(s).into_iter().filter(|&b| float(b)).for_each(|b| useful[b] = true);
            }
        }
        (0..m.arrays.len()).map(|a| varied[a] && useful[a] && float(a)).collect()
    }

    fn emit(&mut self, name: &str, slots: &[IndexSlot], op: AssignOp, rhs: &Expr) {
        let m = self.m;
        rhs.for_each_read(&mut |n, _| {
            self.needed.insert(n.to_string());
        });
        let mut slices = Vec::new();
        let mut note = |e: &IndexExpr| {
            if let IndexKind::Slice { array, .. } = e.kind {
                slices.push(m.arrays[array].name.clone())
            }
        };
        slots.iter().for_each(|s| s.for_each(&mut note));
        rhs.for_each_index(&mut |e| e.for_each(&mut note));
        self.needed.extend(slices);
        let mut mentioned = BTreeSet::new();
        slots.iter().for_each(|s| s.for_each(&mut |e| index_mentions(e, &mut mentioned)));
        rhs.for_each_index(&mut |e| index_mentions(e, &mut mentioned));
        rhs.for_each_list(&mut |l| mentioned.extend(l));
        self.mentioned.extend(mentioned);
        self.lines.push(statement(m, name, slots, op, rhs));
    }

    /// The signature of an array read by name: a forward array's, or the
    /// forward array's whose accumulator it is.
    fn signature(&self, name: &str) -> Option<&'a [Position]> {
        let m: &'a Module = self.m;
        if let Some(a) = m.array_by_name(name) {
            return Some(&m.arrays[a].positions);
        }
        self.acc.iter().find(|(_, n)| n.as_str() == name).map(|(&a, _)| m.arrays[a].positions.as_slice())
    }

    /// The gradient of array `a` at `slots`: its accumulator, plus its
    /// cotangent where that is apart.
    fn gradient(&self, a: ArrayId, slots: &[IndexSlot]) -> Expr {
        let acc = Expr::read(&self.acc[&a], slots);
        match self.cotangent.get(&a) {
            Some(c) => Expr::bin(BinOp::Add, Expr::read(c, slots), acc),
            None => acc,
        }
    }

    /// `rhs` wrapped so that it runs exactly where the forward statement
    /// `s` ran: `select(1, rhs, q1 + q2 + ..)` over the forward reads
    /// (and `DIMS(..)[t]`) whose bounds checks or eintups the adjoint
    /// statement would otherwise lose. `present` are the reads whose
    /// bounds the statement checks already (by key).
    fn guarded(&self, s: &Stmt, lhs: &[IndexSlot], rhs: Expr, present: &HashSet<String>) -> Expr {
        let m = self.m;
        let mut covered = BTreeSet::new();
        vars_of_slots(lhs, &mut covered);
        vars_of_expr(&rhs, &mut covered);
        let mut present = present.clone();
        rhs.for_each_read(&mut |n, slots| {
            present.insert(read_key(n, m, slots));
        });
        let mut guards: Vec<Expr> = Vec::new();
        let mut trivial = Vec::new();
        for (v, op) in s.ops.iter().enumerate() {
            match &op.kind {
                OpKind::Read { array, indices } => {
                    if present.contains(&read_key(&m.arrays[*array].name, m, indices)) {
                        continue;
                    }
                    if trivially_in_bounds(&m.arrays[*array].positions, indices) {
                        trivial.push(v);
                    } else {
                        guards.push(Expr::of_op(m, s, v));
                    }
                }
                OpKind::DimsAt(..) => trivial.push(v),
                _ => {}
            }
        }
        for g in &guards {
            vars_of_expr(g, &mut covered);
        }
        for v in trivial {
            let e = Expr::of_op(m, s, v);
            let mut vars = BTreeSet::new();
            vars_of_expr(&e, &mut vars);
            if !vars.is_subset(&covered) {
                covered.extend(vars);
                guards.push(e);
            }
        }
        match guards.into_iter().reduce(|a, b| Expr::bin(BinOp::Add, a, b)) {
            None => rhs,
            Some(g) => Expr::select(Expr::Int(1), rhs, g),
        }
    }

    /// The adjoint statements of forward statement `s` (number `si`).
    fn statement(&mut self, si: usize, s: &Stmt, active: &[bool]) {
        let m = self.m;
        let a = s.array;
        let g = self.acc[&a].clone();
        let a_name = m.arrays[a].name.clone();
        let lhs_key = read_key(&a_name, m, &s.indices);
        let rhs = Expr::of_op(m, s, s.result);
        let first = m.arrays[a].def_stmt == si;
        // max=/min=: the instantiations that reached the kept value share
        // its gradient equally (ties split, as tf.reduce_max's).
        let weight = match s.op {
            AssignOp::Assign | AssignOp::AddAssign => self.gradient(a, &s.indices),
            AssignOp::MaxAssign | AssignOp::MinAssign => {
                let count = (self.fresh)(&format!("count_{a_name}"));
                if !first {
                    self.emit(&count, &signature_slots(m, a), AssignOp::Assign, &Expr::Int(0));
                }
                let hit = Expr::cmp(CmpOp::Eq, rhs.clone(), Expr::read(&a_name, &s.indices));
                self.emit(&count, &s.indices, AssignOp::Assign, &hit);
                Expr::select(hit, Expr::bin(BinOp::Div, self.gradient(a, &s.indices), Expr::read(&count, &s.indices)), Expr::Float(0.0))
            }
        };
        // Reads of one cell (`x[e] * x[e]`) are one variable: one
        // statement adds their derivatives.
        let mut groups: Vec<(ArrayId, Vec<IndexSlot>, Vec<usize>)> = Vec::new();
        for (v, op) in s.ops.iter().enumerate() {
            let OpKind::Read { array: b, indices } = &op.kind else { continue };
            if !active[*b] {
                continue;
            }
            let key = read_key(&m.arrays[*b].name, m, indices);
            match groups.iter_mut().find(|(a, slots, _)| read_key(&m.arrays[*a].name, m, slots) == key) {
                Some(g) => g.2.push(v),
                None => groups.push((*b, indices.clone(), vec![v])),
            }
        }
        for (b, indices, reads) in groups {
            let Some(d) = derivative::of_reads(m, s, &reads) else { continue };
            let target = self.acc[&b].clone();
            let read = read_key(&m.arrays[b].name, m, &indices);
            let present: HashSet<String> = [lhs_key.clone(), read.clone()].into();
            let rhs_adj = self.guarded(s, &s.indices, Expr::mul(weight.clone(), d), &present);
            self.contribute(b, target, indices, rhs_adj, read);
        }
        // The cells the statement overwrote had no gradient before it.
        if matches!(s.op, AssignOp::Assign | AssignOp::MaxAssign | AssignOp::MinAssign) && !first {
            let mask = self.guarded(s, &s.indices, Expr::Float(0.0), &[lhs_key].into());
            self.emit(&g, &s.indices, AssignOp::Assign, &mask);
        }
    }

    /// `target[slots] += rhs`, as a gather where `invert` can make it one.
    fn contribute(&mut self, b: ArrayId, target: String, slots: Vec<IndexSlot>, rhs: Expr, read: String) {
        let m = self.m;
        let plain = slots.iter().all(|s| matches!(s, IndexSlot::Expr(IndexExpr { kind: IndexKind::Var(_) | IndexKind::Lit(_), .. })));
        if plain {
            self.emit(&target, &slots, AssignOp::AddAssign, &rhs);
            self.contributions.push(Contribution { target, read, form: Form::Gather });
            return;
        }
        let mut st = invert::Scatter { m, target: b, slots: slots.clone(), rhs: rhs.clone() };
        let result = invert::to_gather(&mut st, |name| self.signature(name));
        match result {
            Ok(solved) => {
                let mut rhs = st.rhs;
                let mut eqs = Vec::new();
                for s in &solved {
                    eqs.push(format!("{} = {}", m.eintups[s.t].name, print::index_expr(m, &s.solution)));
                    if s.needs_domain {
                        let dom = self.domain(s.t);
                        rhs = Expr::select(Expr::Int(1), rhs, Expr::read(&dom, &[IndexSlot::Expr(s.solution.clone())]));
                    }
                }
                self.emit(&target, &st.slots, AssignOp::AddAssign, &rhs);
                self.contributions.push(Contribution { target, read, form: Form::Rewritten(eqs.join(", ")) });
            }
            Err(why) => {
                self.emit(&target, &slots, AssignOp::AddAssign, &rhs);
                self.contributions.push(Contribution { target, read, form: Form::Scatter(why) });
            }
        }
    }

    /// `domain_t[t] = 0`: an array whose only use is the bounds check of `t`.
    fn domain(&mut self, t: EintupId) -> String {
        if let Some(d) = self.domains.get(&t) {
            return d.clone();
        }
        let name = (self.fresh)(&format!("domain_{}", self.m.eintups[t].name));
        let slot = IndexSlot::Expr(IndexExpr { kind: IndexKind::Var(t), span: Default::default() });
        self.emit(&name, &[slot], AssignOp::Assign, &Expr::Int(0));
        self.domains.insert(t, name.clone());
        name
    }
}
