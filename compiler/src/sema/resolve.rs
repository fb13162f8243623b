//! Resolution: AST -> `et` module (pass `resolve`).
//!
//! Assigns ids to eintups and arrays in order of first mention, fixes each
//! array's signature from its first mention, lowers index expressions to
//! trees and right-hand sides to SSA ops, joins element types, and reports
//! every static error of docs/language.md s.7 that needs no shapes (E01xx).
//! Errors are collected, not stopped at, so one run shows them all.

use super::{Constraint, Program, Rel};
use crate::driver::count;
use crate::ir::et::*;
use et_grammar::ast::{self, AssignOp, BinOp, ConstraintRel, ConstraintSubject, ExprKind};
use et_grammar::suggest::did_you_mean;
use et_grammar::{Diagnostic, Span};
use std::collections::HashMap;

/// Resolves a parsed file. Returns every diagnostic found on failure.
pub fn resolve(file: &ast::File) -> Result<Program, Vec<Diagnostic>> {
    let mut r = Resolver::new(file);
    let prog = r.run(file);
    if r.diags.is_empty() {
        Ok(prog)
    } else {
        Err(r.diags)
    }
}

struct Resolver {
    module: Module,
    diags: Vec<Diagnostic>,
    /// Every name written as `name[...]` anywhere in the program, with the
    /// first statement that has it on the left (if any).
    array_names: HashMap<String, Option<(usize, Span)>>,
    eintup_ids: HashMap<String, EintupId>,
    array_ids: HashMap<String, ArrayId>,
}

/// Where an index expression occurs: decides which forms are legal.
#[derive(Clone, Copy, PartialEq)]
enum Ctx {
    /// Index of the first mention of an array: no slices.
    FirstMention,
    Index,
}

impl Resolver {
    fn new(file: &ast::File) -> Resolver {
        let mut array_names = HashMap::new();
        for (i, s) in file.program.iter().enumerate() {
            let slot = array_names.entry(s.lhs.array.name.clone()).or_insert(None);
            if slot.is_none() {
                *slot = Some((i, s.lhs.array.span));
            }
            collect_reads(&s.rhs, &mut array_names);
            for a in &s.lhs.indices {
                if let ast::IndexArg::Expr(e) = a {
                    collect_reads(e, &mut array_names);
                }
            }
        }
        Resolver {
            module: Module { eintups: vec![], arrays: vec![], stmts: vec![], call: None, outputs: vec![], symbolic: None },
            diags: vec![],
            array_names,
            eintup_ids: HashMap::new(),
            array_ids: HashMap::new(),
        }
    }

    fn run(&mut self, file: &ast::File) -> Program {
        for (i, s) in file.program.iter().enumerate() {
            self.stmt(i, s);
        }
        self.join_dtypes();
        if let Some(call) = &file.call {
            let mut args = Vec::new();
            for a in &call.args {
                let v = match &a.value {
                    ast::CallValue::Array(id) => match self.array_ids.get(&id.name) {
                        Some(&x) => CallArg::Array(x),
                        None => {
                            let mut d = Diagnostic::error("E0114", format!("unknown array `{}` in the framework call", id.name))
                                .at(id.span, "not an array of the program");
                            if let Some(n) = did_you_mean(&id.name, self.written_arrays().iter().map(String::as_str)) {
                                d = d.note(n);
                            }
                            self.diags.push(d);
                            continue;
                        }
                    },
                    ast::CallValue::Dims(l) => CallArg::Dims(self.dims_list(l)),
                    ast::CallValue::Rank(l) => CallArg::Rank(self.eintup_list(l)),
                    ast::CallValue::Tensor(l) => CallArg::Tensor(self.dims_list(l)),
                    ast::CallValue::Literal(l) => CallArg::Literal(l.clone()),
                };
                args.push((a.keyword.as_ref().map(|k| k.name.clone()), v));
            }
            self.module.call = Some(FrameworkCall { func: call.func_name(), args, span: call.span });
        }
        if let Some(outs) = &file.outputs {
            for n in &outs.names {
                match self.array_ids.get(&n.name) {
                    Some(&x) => self.module.outputs.push(x),
                    None => {
                        let mut d =
                            Diagnostic::error("E0114", format!("unknown array `{}` in the outputs section", n.name)).at(n.span, "not an array of the program");
                        if let Some(hint) = did_you_mean(&n.name, self.written_arrays().iter().map(String::as_str)) {
                            d = d.note(hint);
                        }
                        self.diags.push(d);
                    }
                }
            }
        }
        // Every eintup so far is mentioned by a statement or the call;
        // the constraints may only add helpers of those.
        let program_eintups = self.module.eintups.len();
        let mut constraints = Vec::new();
        for c in &file.constraints {
            if let Some(c) = self.constraint(c) {
                constraints.push(c);
            }
        }
        self.diags.extend(super::constraints::unused_names(&self.module, program_eintups, &constraints));
        self.diags.extend(super::constraints::dims_cycle(&self.module, &constraints));
        Program {
            module: std::mem::replace(&mut self.module, Module { eintups: vec![], arrays: vec![], stmts: vec![], call: None, outputs: vec![], symbolic: None }),
            constraints,
        }
    }

    /// Names of the arrays some statement writes (candidates for "did you
    /// mean"), sorted so the hint does not depend on hashing.
    fn written_arrays(&self) -> Vec<String> {
        let mut v: Vec<String> = self.array_names.iter().filter(|(_, w)| w.is_some()).map(|(n, _)| n.clone()).collect();
        v.sort();
        v
    }

    fn eintup(&mut self, id: &ast::Ident) -> EintupId {
        if self.array_names.contains_key(&id.name) {
            self.diags.push(
                Diagnostic::error("E0113", format!("`{}` is an array, but is used here as an eintup", id.name))
                    .at(id.span, "used as an eintup")
                    .note("array names and eintup names must differ"),
            );
        }
        if let Some(&e) = self.eintup_ids.get(&id.name) {
            return e;
        }
        let e = self.module.eintups.len();
        self.module.eintups.push(Eintup { name: id.name.clone(), rank: None, dims: None, span: id.span });
        self.eintup_ids.insert(id.name.clone(), e);
        e
    }

    fn eintup_list(&mut self, l: &[ast::Ident]) -> Vec<EintupId> {
        l.iter().map(|i| self.eintup(i)).collect()
    }

    /// A `DIMS(..)` list; a literal `n` is the one component `n + 1`
    /// (docs/language.md s.4), which must fit in i64.
    fn dims_list(&mut self, l: &[ast::DimsArg]) -> DimsList {
        let mut v = Vec::new();
        for a in l {
            match a {
                ast::DimsArg::Name(i) => v.push(DimsItem::Eintup(self.eintup(i))),
                ast::DimsArg::Lit(n, span) => {
                    if *n == i64::MAX {
                        self.diags.push(
                            Diagnostic::error("E0123", format!("integer `{n}` in `DIMS(..)` is too large"))
                                .at(*span, "a literal `n` in DIMS is the component n+1, which overflows 64 bits"),
                        );
                    }
                    v.push(DimsItem::Lit(*n));
                }
            }
        }
        DimsList(v)
    }

    fn stmt(&mut self, i: usize, s: &ast::Stmt) {
        let name = &s.lhs.array.name;
        let first = !self.array_ids.contains_key(name);
        let array = if first {
            // First mention: the signature. No slices allowed (shape would
            // depend on data).
            let mut positions = Vec::new();
            for a in &s.lhs.indices {
                match a {
                    ast::IndexArg::Expr(e) => {
                        if let Some(x) = self.index(e, Ctx::FirstMention) {
                            positions.push(Position { expr: x, rank: None, dims: None });
                        }
                    }
                    ast::IndexArg::Slice(sp) => self.diags.push(
                        Diagnostic::error("E0116", "a `:` cannot index the left-hand side directly")
                            .at(*sp, "slice slot on the left")
                            .note("a scatter writes through an index expression such as `out[idx[u, :], item]`"),
                    ),
                }
            }
            let is_input = s.op == AssignOp::Assign && matches!(s.rhs.kind, ExprKind::Random { .. });
            let a = self.module.arrays.len();
            self.module.arrays.push(Array { name: name.clone(), dtype: ElemType::Int, positions, attrs: vec![], def_stmt: i, is_input, span: s.lhs.span });
            self.array_ids.insert(name.clone(), a);
            a
        } else {
            self.array_ids[name]
        };
        let indices = if first {
            self.module.arrays[array].positions.iter().map(|p| IndexSlot::Expr(p.expr.clone())).collect()
        } else {
            self.check_arity(array, &s.lhs);
            let mut v = Vec::new();
            for a in &s.lhs.indices {
                match a {
                    ast::IndexArg::Expr(e) => {
                        if let Some(x) = self.index(e, Ctx::Index) {
                            v.push(IndexSlot::Expr(x));
                        }
                    }
                    ast::IndexArg::Slice(sp) => self.diags.push(
                        Diagnostic::error("E0116", "a `:` cannot index the left-hand side directly")
                            .at(*sp, "slice slot on the left")
                            .note("a scatter writes through an index expression such as `out[idx[u, :], item]`"),
                    ),
                }
            }
            v
        };
        let mut ops = Vec::new();
        let result = self.rhs(&s.rhs, &mut ops).unwrap_or(0);
        if ops.is_empty() {
            // Errors were reported; keep the statement well formed.
            ops.push(Op { kind: OpKind::ConstInt(0), ty: SigType { dtype: ElemType::Int, eintups: vec![] }, span: s.rhs.span });
        }
        if first {
            if let Some(attr) = range_attr(&ops, result, &self.module.arrays[array]) {
                self.module.arrays[array].attrs.push(attr);
            }
        } else {
            // A later write may take the values out of the definition's
            // range, and an attribute must hold wherever it is used: drop
            // it (a FLAT over the array then says why, E0406).
            self.module.arrays[array].attrs.clear();
        }
        let mut st = Stmt { array, indices, op: s.op, vars: vec![], ops, result, span: s.span };
        st.vars = stmt_vars(&st);
        // SigTypes of reads/randoms need the statement's variables.
        let lhs_vars = lhs_vars(&st);
        for k in 0..st.ops.len() {
            let ev = op_eintups(&st.ops, k, &lhs_vars);
            st.ops[k].ty.eintups = ev;
        }
        self.module.stmts.push(st);
    }

    fn check_arity(&mut self, array: ArrayId, acc: &ast::Access) {
        let want = self.module.arrays[array].positions.len();
        if acc.indices.len() != want {
            let a = &self.module.arrays[array];
            self.diags.push(
                Diagnostic::error("E0103", format!("wrong number of indices for `{}`: expected {want}, found {}", acc.array.name, acc.indices.len()))
                    .at(acc.span, format!("{} here", count(acc.indices.len(), "index", "indices")))
                    .also(a.span, format!("signature with {} fixed here", count(want, "position", "positions"))),
            );
        }
    }

    /// Resolves a read of `acc` (on a right-hand side or inside a slice).
    fn read_target(&mut self, acc: &ast::Access) -> Option<ArrayId> {
        if let Some(&a) = self.array_ids.get(&acc.array.name) {
            self.check_arity(a, acc);
            return Some(a);
        }
        match self.array_names.get(&acc.array.name) {
            Some(Some((_, lhs_span))) => self.diags.push(
                Diagnostic::error("E0102", format!("array `{}` is first mentioned on a right-hand side", acc.array.name))
                    .at(acc.array.span, "read before any statement writes it")
                    .also(*lhs_span, "first written here")
                    .note("the first statement that mentions an array must have it on the left"),
            ),
            _ => {
                let mut d = Diagnostic::error("E0101", format!("unknown array `{}`", acc.array.name)).at(acc.array.span, "no statement writes this array");
                if let Some(n) = did_you_mean(&acc.array.name, self.written_arrays().iter().map(String::as_str)) {
                    d = d.note(n);
                }
                self.diags.push(d);
            }
        }
        None
    }

    fn index(&mut self, e: &ast::Expr, ctx: Ctx) -> Option<IndexExpr> {
        let kind = match &e.kind {
            ExprKind::Int(n) => IndexKind::Lit(*n),
            ExprKind::Name(id) => IndexKind::Var(self.eintup(id)),
            ExprKind::Dims(l) => IndexKind::Dims(self.dims_list(l)),
            ExprKind::Rank(l) => IndexKind::Rank(self.eintup_list(l)),
            ExprKind::Flat(es) => {
                let mut v = Vec::new();
                for x in es {
                    v.push(self.index(x, ctx)?);
                }
                IndexKind::Flat(v)
            }
            ExprKind::Access(acc) => {
                let colons = acc.indices.iter().filter(|a| matches!(a, ast::IndexArg::Slice(_))).count();
                if colons != 1 {
                    self.diags.push(
                        Diagnostic::error("E0107", format!("an array read inside an index must have exactly one `:`, found {colons}"))
                            .at(acc.span, "bad slice")
                            .note("`a[x, :, y]` uses the vector stored at the `:` position as an index tuple"),
                    );
                    return None;
                }
                if ctx == Ctx::FirstMention {
                    self.diags.push(
                        Diagnostic::error("E0109", "a slice may not appear in the first mention of an array")
                            .at(acc.span, "slice in a first mention")
                            .note("the array's shape would depend on data"),
                    );
                    return None;
                }
                let array = self.read_target(acc)?;
                let mut indices = Vec::new();
                for (k, a) in acc.indices.iter().enumerate() {
                    match a {
                        ast::IndexArg::Slice(sp) => {
                            let pos = self.module.arrays[array].positions.get(k);
                            if let Some(p) = pos {
                                if !matches!(p.expr.kind, IndexKind::Var(_)) {
                                    self.diags.push(
                                        Diagnostic::error("E0108", "the `:` slot of a slice must be a plain eintup in the array's signature")
                                            .at(*sp, "slice slot")
                                            .also(p.expr.span, "signature position here is not a plain eintup"),
                                    );
                                    return None;
                                }
                            }
                            indices.push(IndexSlot::Colon(*sp));
                        }
                        ast::IndexArg::Expr(x) => indices.push(IndexSlot::Expr(self.index(x, Ctx::Index)?)),
                    }
                }
                IndexKind::Slice { array, indices }
            }
            ExprKind::Float(_) => {
                return self.not_in_index(e, "a float literal");
            }
            ExprKind::Neg(_) => {
                return self.not_in_index(e, "a negative value");
            }
            ExprKind::DimsAt(..) => return self.not_in_index(e, "`DIMS(..)[t]`"),
            ExprKind::Random { .. } => return self.not_in_index(e, "`RANDOM(..)`"),
            ExprKind::Compare(op, ..) => return self.not_in_index(e, &format!("the comparison `{}` (a value)", op.text())),
            ExprKind::Call(f, _) => return self.not_in_index(e, &format!("the function `{}(..)` (a value)", f.name())),
            ExprKind::Binary(op, l, r) => {
                let iop = match op {
                    BinOp::Add => IndexOp::Add,
                    BinOp::Sub => IndexOp::Sub,
                    BinOp::Mul => IndexOp::Mul,
                    BinOp::FloorDiv => IndexOp::FloorDiv,
                    BinOp::CeilDiv => IndexOp::CeilDiv,
                    BinOp::Mod => IndexOp::Mod,
                    BinOp::Div => return self.not_in_index(e, "true division `/`"),
                };
                let (a, b) = (self.index(l, ctx), self.index(r, ctx));
                let (a, b) = (a?, b?);
                let (sa, sb) = (is_static(&a), is_static(&b));
                match iop {
                    IndexOp::FloorDiv | IndexOp::CeilDiv | IndexOp::Mod if !sb => {
                        self.diags.push(
                            Diagnostic::error("E0104", format!("the divisor of `{}` must be static", op.text()))
                                .at(r.span, "not static")
                                .note("a static operand is a literal, DIMS(..), RANK(..), or arithmetic of those"),
                        );
                        return None;
                    }
                    IndexOp::Mul if !sa && !sb => {
                        self.diags.push(
                            Diagnostic::error("E0105", "`*` in an index needs at least one static operand")
                                .at(e.span, "both operands vary")
                                .also(l.span, "not static")
                                .also(r.span, "not static"),
                        );
                        return None;
                    }
                    _ => {}
                }
                IndexKind::Bin(iop, Box::new(a), Box::new(b))
            }
        };
        Some(IndexExpr { kind, span: e.span })
    }

    fn not_in_index(&mut self, e: &ast::Expr, what: &str) -> Option<IndexExpr> {
        self.diags.push(
            Diagnostic::error("E0111", format!("{what} is not allowed in an index expression"))
                .at(e.span, "not an index expression")
                .note("index expressions use eintups, non-negative integer literals, DIMS, RANK, FLAT, slices and + - * // //^ %"),
        );
        None
    }

    /// Lowers a right-hand side expression, appending ops; returns its value.
    fn rhs(&mut self, e: &ast::Expr, ops: &mut Vec<Op>) -> Option<ValueId> {
        let ty = |d| SigType { dtype: d, eintups: vec![] };
        let (kind, dtype) = match &e.kind {
            ExprKind::Int(n) => (OpKind::ConstInt(*n), ElemType::Int),
            ExprKind::Float(f) => (OpKind::ConstFloat(*f), ElemType::Float),
            ExprKind::Rank(l) => (OpKind::Rank(self.eintup_list(l)), ElemType::Int),
            ExprKind::DimsAt(l, t) => {
                let l = self.dims_list(l);
                let t = self.index(t, Ctx::Index)?;
                (OpKind::DimsAt(l, t), ElemType::Int)
            }
            ExprKind::Name(id) => {
                self.eintup(id);
                self.diags.push(
                    Diagnostic::error("E0110", format!("eintup `{}` cannot be used as a value", id.name))
                        .at(id.span, "an eintup is an index, not a value")
                        .note("use it inside an array index, or `DIMS(list)[t]` for a component of a static vector"),
                );
                return None;
            }
            ExprKind::Dims(_) => {
                self.diags.push(
                    Diagnostic::error("E0112", "`DIMS(..)` is a tuple; a right-hand side needs one component")
                        .at(e.span, "tuple used as a value")
                        .note("write `DIMS(list)[t]` with a rank-1 eintup `t`"),
                );
                return None;
            }
            ExprKind::Flat(_) => {
                self.diags.push(Diagnostic::error("E0112", "`FLAT(..)` is only allowed in an index expression").at(e.span, "not a value"));
                return None;
            }
            ExprKind::Access(acc) => {
                let array = self.read_target(acc);
                let mut indices = Vec::new();
                let mut ok = true;
                for a in &acc.indices {
                    match a {
                        ast::IndexArg::Slice(sp) => {
                            self.diags.push(
                                Diagnostic::error("E0115", "a slice is a tuple and cannot be used as a value")
                                    .at(*sp, "`:` in a right-hand-side read")
                                    .note("slices may only appear inside an index expression, e.g. `src[idx[w, :]]`"),
                            );
                            ok = false;
                        }
                        ast::IndexArg::Expr(x) => match self.index(x, Ctx::Index) {
                            Some(x) => indices.push(IndexSlot::Expr(x)),
                            None => ok = false,
                        },
                    }
                }
                let array = array?;
                if !ok {
                    return None;
                }
                (OpKind::Read { array, indices }, ElemType::Int)
            }
            ExprKind::Random { lo, hi, ty: t, .. } => {
                let lo = self.rhs(lo, ops);
                let hi = self.rhs(hi, ops);
                (OpKind::Random { lo: lo?, hi: hi?, dtype: *t }, *t)
            }
            ExprKind::Neg(x) => {
                let v = self.rhs(x, ops)?;
                (OpKind::Neg(v), ops[v].ty.dtype)
            }
            ExprKind::Binary(op, l, r) => {
                let a = self.rhs(l, ops);
                let b = self.rhs(r, ops);
                computed(OpKind::Binary(*op, a?, b?), ops)
            }
            ExprKind::Compare(op, l, r) => {
                let a = self.rhs(l, ops);
                let b = self.rhs(r, ops);
                computed(OpKind::Compare(*op, a?, b?), ops)
            }
            ExprKind::Call(f, args) => {
                let vals: Vec<Option<ValueId>> = args.iter().map(|x| self.rhs(x, ops)).collect();
                computed(OpKind::Call(*f, vals.into_iter().collect::<Option<Vec<_>>>()?), ops)
            }
        };
        ops.push(Op { kind, ty: ty(dtype), span: e.span });
        Some(ops.len() - 1)
    }

    /// Array element types are the join over every value written into the
    /// array; reads propagate types, so iterate to the (monotone) fixpoint.
    fn join_dtypes(&mut self) {
        loop {
            let mut changed = false;
            for si in 0..self.module.stmts.len() {
                let n = self.module.stmts[si].ops.len();
                for k in 0..n {
                    let d = {
                        let ops = &self.module.stmts[si].ops;
                        match &ops[k].kind {
                            OpKind::Read { array, .. } => self.module.arrays[*array].dtype,
                            kind => kind.computed_dtype(|v| ops[v].ty.dtype).unwrap_or(ops[k].ty.dtype),
                        }
                    };
                    self.module.stmts[si].ops[k].ty.dtype = d;
                }
                let st = &self.module.stmts[si];
                let d = st.ops[st.result].ty.dtype;
                let arr = &mut self.module.arrays[st.array];
                let j = join(arr.dtype, d);
                if j != arr.dtype {
                    arr.dtype = j;
                    changed = true;
                }
            }
            if !changed {
                break;
            }
        }
    }

    fn constraint(&mut self, c: &ast::Constraint) -> Option<Constraint> {
        let target = self.eintup(&c.target);
        let rel = match &c.rel {
            ConstraintRel::In { lo, hi, span } => {
                if lo > hi || *lo < 0 {
                    self.diags.push(Diagnostic::error("E0122", format!("invalid range [{lo}, {hi}]")).at(*span, "needs 0 <= lo <= hi"));
                    return None;
                }
                Rel::In { lo: *lo, hi: *hi }
            }
            ConstraintRel::Eq(e) => Rel::Eq(self.cexpr(e, c.subject)?),
        };
        Some(Constraint { subject: c.subject, target, rel, span: c.span, target_span: c.target.span })
    }

    fn cexpr(&mut self, e: &ast::Expr, subject: ConstraintSubject) -> Option<IndexExpr> {
        let kind = match &e.kind {
            ExprKind::Int(n) => IndexKind::Lit(*n),
            ExprKind::Rank(l) => IndexKind::Rank(self.eintup_list(l)),
            ExprKind::Dims(l) if subject == ConstraintSubject::Dims => IndexKind::Dims(self.dims_list(l)),
            ExprKind::Dims(_) => {
                self.diags.push(
                    Diagnostic::error("E0120", "a rank constraint may only use RANK(..) and integers")
                        .at(e.span, "DIMS in a rank constraint")
                        .note("ranks are resolved before dims"),
                );
                return None;
            }
            ExprKind::Neg(x) => {
                let x = self.cexpr(x, subject)?;
                IndexKind::Bin(IndexOp::Sub, Box::new(IndexExpr { kind: IndexKind::Lit(0), span: e.span }), Box::new(x))
            }
            ExprKind::Binary(op, l, r) if *op != BinOp::Div => {
                let iop = match op {
                    BinOp::Add => IndexOp::Add,
                    BinOp::Sub => IndexOp::Sub,
                    BinOp::Mul => IndexOp::Mul,
                    BinOp::FloorDiv => IndexOp::FloorDiv,
                    BinOp::CeilDiv => IndexOp::CeilDiv,
                    _ => IndexOp::Mod,
                };
                let (a, b) = (self.cexpr(l, subject), self.cexpr(r, subject));
                IndexKind::Bin(iop, Box::new(a?), Box::new(b?))
            }
            _ => {
                self.diags.push(
                    Diagnostic::error("E0121", "not allowed in a constraint expression")
                        .at(e.span, "here")
                        .note("constraint expressions use integers, DIMS(t), RANK(t), + - * // //^ % and parentheses"),
                );
                return None;
            }
        };
        Some(IndexExpr { kind, span: e.span })
    }
}

fn collect_reads(e: &ast::Expr, out: &mut HashMap<String, Option<(usize, Span)>>) {
    match &e.kind {
        ExprKind::Access(a) => {
            out.entry(a.array.name.clone()).or_insert(None);
            for i in &a.indices {
                if let ast::IndexArg::Expr(x) = i {
                    collect_reads(x, out);
                }
            }
        }
        ExprKind::Flat(v) => v.iter().for_each(|x| collect_reads(x, out)),
        ExprKind::DimsAt(_, x) | ExprKind::Neg(x) => collect_reads(x, out),
        ExprKind::Random { lo, hi, .. } => {
            collect_reads(lo, out);
            collect_reads(hi, out);
        }
        ExprKind::Binary(_, a, b) | ExprKind::Compare(_, a, b) => {
            collect_reads(a, out);
            collect_reads(b, out);
        }
        ExprKind::Call(_, args) => args.iter().for_each(|x| collect_reads(x, out)),
        _ => {}
    }
}

/// A computed op with the type its operands give it.
fn computed(kind: OpKind, ops: &[Op]) -> (OpKind, ElemType) {
    let d = kind.computed_dtype(|v| ops[v].ty.dtype).unwrap_or(ElemType::Float);
    (kind, d)
}

pub fn join(a: ElemType, b: ElemType) -> ElemType {
    if a == ElemType::Float || b == ElemType::Float {
        ElemType::Float
    } else {
        ElemType::Int
    }
}

/// Static: a literal, DIMS, RANK, or arithmetic of those (docs/language.md s.4).
pub fn is_static(e: &IndexExpr) -> bool {
    match &e.kind {
        IndexKind::Lit(_) | IndexKind::Dims(_) | IndexKind::Rank(_) => true,
        IndexKind::Bin(_, a, b) => is_static(a) && is_static(b),
        _ => false,
    }
}

/// Eintups occurring in an index expression as values (not inside DIMS or
/// RANK), in order of first occurrence, appended to `out` without repeats.
pub fn index_vars(e: &IndexExpr, out: &mut VarList) {
    match &e.kind {
        IndexKind::Var(t) => out.push(*t),
        IndexKind::Flat(v) => v.iter().for_each(|x| index_vars(x, out)),
        IndexKind::Slice { indices, .. } => slot_vars(indices, out),
        IndexKind::Bin(_, a, b) => {
            index_vars(a, out);
            index_vars(b, out);
        }
        IndexKind::Lit(_) | IndexKind::Dims(_) | IndexKind::Rank(_) => {}
    }
}

pub fn slot_vars(slots: &[IndexSlot], out: &mut VarList) {
    for s in slots {
        if let IndexSlot::Expr(x) = s {
            index_vars(x, out);
        }
    }
}

fn lhs_vars(st: &Stmt) -> Vec<EintupId> {
    let mut v = VarList::default();
    slot_vars(&st.indices, &mut v);
    v.into_vec()
}

/// docs/language.md s.3 rule 2: every eintup of the statement, left side first,
/// except those only inside DIMS/RANK.
pub fn stmt_vars(st: &Stmt) -> Vec<EintupId> {
    let mut v = VarList::default();
    slot_vars(&st.indices, &mut v);
    for op in &st.ops {
        match &op.kind {
            OpKind::Read { indices, .. } => slot_vars(indices, &mut v),
            OpKind::DimsAt(_, t) => index_vars(t, &mut v),
            _ => {}
        }
    }
    v.into_vec()
}

/// The eintups an op's value varies over. A `RANDOM` draws one value per
/// written cell, so it varies over the left side's eintups too.
fn op_eintups(ops: &[Op], k: usize, lhs: &[EintupId]) -> Vec<EintupId> {
    let mut v = VarList::default();
    let add = |xs: &[EintupId], v: &mut VarList| xs.iter().for_each(|&x| v.push(x));
    match &ops[k].kind {
        OpKind::ConstInt(_) | OpKind::ConstFloat(_) | OpKind::Rank(_) => {}
        OpKind::DimsAt(_, t) => index_vars(t, &mut v),
        OpKind::Read { indices, .. } => slot_vars(indices, &mut v),
        OpKind::Random { lo, hi, .. } => {
            add(lhs, &mut v);
            add(&ops[*lo].ty.eintups, &mut v);
            add(&ops[*hi].ty.eintups, &mut v);
        }
        OpKind::Neg(_) | OpKind::Binary(..) | OpKind::Compare(..) | OpKind::Call(..) => {
            ops[k].kind.operands().iter().for_each(|&a| add(&ops[a].ty.eintups, &mut v))
        }
    }
    v.into_vec()
}

/// `a[..] = RANDOM(lo, hi, INT)` with constant `lo` and a constant or
/// `DIMS(list)[t]` `hi` (t the innermost position's eintup) gives a range
/// attribute later passes may use to bound gathers.
fn range_attr(ops: &[Op], result: ValueId, a: &Array) -> Option<Attr> {
    let OpKind::Random { lo, hi, dtype: ElemType::Int } = ops.get(result)?.kind else { return None };
    let l = const_int(ops, lo)?;
    let hi = match &ops[hi].kind {
        _ if const_int(ops, hi).is_some() => Bound::Int(const_int(ops, hi)?),
        OpKind::DimsAt(list, t) => {
            let last = a.positions.last()?;
            match (&t.kind, &last.expr.kind) {
                (IndexKind::Var(x), IndexKind::Var(y)) if x == y => Bound::DimsAt(list.clone()),
                _ => return None,
            }
        }
        _ => return None,
    };
    Some(Attr::Range { lo: Bound::Int(l), hi })
}

/// The value of `v` when it is an INT literal, negated or not (`-1` is
/// `Neg(1)` in the SSA form).
fn const_int(ops: &[Op], v: ValueId) -> Option<i64> {
    match ops.get(v)?.kind {
        OpKind::ConstInt(c) => Some(c),
        OpKind::Neg(x) => const_int(ops, x)?.checked_neg(),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The codes of every diagnostic for `src` (resolution, then ranks).
    fn codes(src: &str) -> Vec<&'static str> {
        let file = et_grammar::parse_file(src).expect("parses");
        match resolve(&file) {
            Err(d) => d.iter().map(|d| d.code).collect(),
            Ok(p) => match crate::sema::ranks::infer(&p) {
                Err(d) => d.iter().map(|d| d.code).collect(),
                Ok(_) => vec![],
            },
        }
    }

    #[test]
    fn static_errors() {
        assert_eq!(codes("y[i] = q[i]\n"), vec!["E0101"]);
        assert_eq!(codes("y[i] = q[i]\nq[i] = 1\n"), vec!["E0102"]);
        assert_eq!(codes("x[i,j] = 1\ny[i] = x[i]\n"), vec!["E0103"]);
        assert_eq!(codes("x[i] = 1\nx[i,j] = 2\n"), vec!["E0103"]);
        assert_eq!(codes("x[i] = 1\ny[i//j] = x[i]\n"), vec!["E0104"]);
        assert_eq!(codes("x[i] = 1\ny[i%(j+1)] = x[i]\n"), vec!["E0104"]);
        assert_eq!(codes("x[i] = 1\ny[i*j] = x[i]\n"), vec!["E0105"]);
        assert_eq!(codes("x[i,c] = 1\ny[j] = 0\ny[x[i,:,:]] = 1\n"), vec!["E0107"]);
        assert_eq!(codes("x[i,c] = 1\ny[x[i,c]] = 1\n"), vec!["E0107"]);
        assert_eq!(codes("x[i,c+1] = 1\ny[j] = 0\ny[x[i,:]] = 1\n"), vec!["E0108"]);
        assert_eq!(codes("x[i,c] = 1\ny[x[i,:]] = 1\n"), vec!["E0109"]);
        assert_eq!(codes("x[i] = i\n"), vec!["E0110"]);
        assert_eq!(codes("x[i+1.5] = 1\n"), vec!["E0111"]);
        assert_eq!(codes("x[i] = 1\ny[x] = 1\n"), vec!["E0113"]);
        assert_eq!(codes("x[i] = 1\ny[i] = x[:]\n"), vec!["E0115"]);
        assert_eq!(codes("x[i] = DIMS(i)\n"), vec!["E0112"]);
        assert_eq!(codes("x[i] = 1\n\nRANK(i) = DIMS(j)\n"), vec!["E0120"]);
    }

    #[test]
    fn legal_programs_pass() {
        // two non-static operands may be added or subtracted; `*` with one
        // static operand; shift reads the array itself.
        assert_eq!(codes("x[i] = 1\ny[i+j] = x[i-j] * 2\nx[i] = x[i+1]\n"), Vec::<&str>::new());
        assert_eq!(codes("x[i,c] = 1\ny[j] = 0\ny[x[i,:]] += 1\n"), Vec::<&str>::new());
    }

    #[test]
    fn signatures_vars_and_types() {
        let src = "t[d] = 0\nx[d] = RANDOM(0, 1, FLOAT)\nu[d] = t[d]\nt[d] = x[d] / 2\ns[k] = x[d] + DIMS(k)[k]\n";
        let p = resolve(&et_grammar::parse_file(src).unwrap()).unwrap();
        let m = &p.module;
        let id = |n| m.array_by_name(n).unwrap();
        // t is written an INT and a FLOAT value: FLOAT; u reads t: FLOAT too.
        assert_eq!(m.arrays[id("t")].dtype, ElemType::Float);
        assert_eq!(m.arrays[id("u")].dtype, ElemType::Float);
        assert!(m.arrays[id("x")].is_input && !m.arrays[id("t")].is_input);
        assert_eq!(m.arrays[id("u")].def_stmt, 2);
        let d = m.eintup_by_name("d").unwrap();
        let k = m.eintup_by_name("k").unwrap();
        // s[k] = x[d] + DIMS(k)[k]: k on the left first, then d.
        assert_eq!(m.stmts[4].vars, vec![k, d]);
        // k occurs only inside DIMS in `y[i] = DIMS(k)[i]`-like positions is
        // not a variable: here `x[d] = RANDOM(0, 1, FLOAT)` has only d.
        assert_eq!(m.stmts[1].vars, vec![d]);
    }

    #[test]
    fn rank_contradictions_explain_their_chain() {
        let src = "x[a] = 1\ny[a+b] = x[a]\n\nRANK(a) = 1\nRANK(b) = 2\n";
        let p = resolve(&et_grammar::parse_file(src).unwrap()).unwrap();
        let d = crate::sema::ranks::infer(&p).unwrap_err();
        assert_eq!(d[0].code, "E0201");
        // Both constraints and the index expression `a+b` are labelled.
        let starts: Vec<usize> = d[0].labels.iter().map(|l| l.span.start).collect();
        assert!(starts.contains(&src.find("RANK(a)").unwrap()));
        assert!(starts.contains(&src.find("RANK(b)").unwrap()));
        assert!(starts.contains(&src.find("a+b").unwrap()));
        let src2 = "x[a] = 1\ny[a] = 0\ny[b] = x[b]\n\nRANK(a) IN [0,1]\nRANK(b) IN [2,3]\n";
        let p = resolve(&et_grammar::parse_file(src2).unwrap()).unwrap();
        let d = crate::sema::ranks::infer(&p).unwrap_err();
        assert_eq!(d[0].code, "E0202");
        let src3 = "x[c] = 1\ny[j] = 0\ny[x[:]] = 1\n\nRANK(c) = 2\n";
        assert_eq!(codes(src3), vec!["E0201"]);
    }
}
