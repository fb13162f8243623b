//! Parser for the textual `loop` dialect that `print` writes (grammar and
//! error codes in docs/ir-loop.md). Tokens come from the shared lexer
//! (`ir::text`), one line at a time, joined into one stream: line breaks
//! only separate tokens. Then recursive descent; index expressions are
//! fully parenthesised, so there are no precedence rules.
//!
//! The parser resolves names (buffers, variables) and checks syntax; it
//! does not check scoping, value order or dtypes, which is the verifier's
//! job (`verify`). `parse_verified` runs both and locates a verifier error
//! in the text through the [`Spans`] the parser records. The parser stops
//! at the first error, which is located. It never panics: nesting is
//! bounded by `MAX_DEPTH`, numbers are range-checked.

use super::site::{Site, Spans};
use super::syntax::{self, write_operator, VOpName};
use super::*;
use crate::ir::text::{self, one_of, Cursor, Dialect, PResult, Spelled, Tok, Token};
use et_grammar::{Diagnostic, Span};
use std::collections::HashMap;

/// Deepest nesting of blocks plus parentheses the parser accepts. Bounds
/// recursion (so hostile input cannot overflow the stack); generated IR
/// stays far below it (a loop per eintup component, an expression level
/// per index operation).
pub const MAX_DEPTH: usize = 256;

/// The `loop` dialect's codes for lexical and token errors.
static LOOP: Dialect = Dialect { name: "loop", end: "end of input", bad_char: "E0640", bad_number: "E0642", bad_string: "E0649", unexpected: "E0641" };

/// Code for an unknown word where a dtype, role, init, loop kind, value
/// operation or write is expected.
const UNKNOWN_WORD: &str = "E0648";

/// Parses a whole module. Errors carry codes E0640-E0650 and spans into
/// `text`; only the first error is reported.
pub fn parse_module(text: &str) -> Result<LoopModule, Vec<Diagnostic>> {
    parse_with_spans(text).map(|(m, _)| m)
}

/// Parses a whole module and records where each buffer, kernel, node,
/// value and write is in `text`.
pub fn parse_with_spans(text: &str) -> Result<(LoopModule, Spans), Vec<Diagnostic>> {
    let mut toks = Vec::new();
    for (start, line) in text::lines(text) {
        let (t, err) = text::lex_line(line, start, &LOOP);
        if let Some(d) = err {
            return Err(vec![d]);
        }
        toks.extend(t);
    }
    let mut p = Parser {
        c: Cursor::new(&toks, text.len(), &LOOP),
        depth: 0,
        buffers: HashMap::new(),
        dims: HashMap::new(),
        m: LoopModule::default(),
        spans: Spans::default(),
        path: Vec::new(),
    };
    p.module().map_err(|d| vec![d])?;
    Ok((p.m, p.spans))
}

/// Parses a module and verifies it: what a tool reading printed IR wants.
/// A verifier error is located at the line of the buffer, kernel, node,
/// value or write it is about (code E0651).
pub fn parse_verified(text: &str) -> Result<LoopModule, Vec<Diagnostic>> {
    let (m, spans) = parse_with_spans(text)?;
    verify::verify(&m).map_err(|e| vec![e.diagnostic(&spans)])?;
    Ok(m)
}

struct Parser<'a> {
    c: Cursor<'a>,
    depth: usize,
    buffers: HashMap<String, BufId>,
    dims: HashMap<String, DimId>,
    m: LoopModule,
    spans: Spans,
    /// Positions of the node being parsed in the kernel being parsed (the
    /// next one in `m.kernels`).
    path: Vec<usize>,
}

/// Name resolution state of the kernel being parsed.
struct KScope {
    names: HashMap<String, VarId>,
    vars: Vec<Var>,
    /// A `vars(..)` clause fixed the variables: bindings may not add any.
    fixed: bool,
}

impl Parser<'_> {
    /// The site of the node being parsed.
    fn node_site(&self) -> Site {
        Site::Node(self.m.kernels.len(), self.path.clone())
    }

    /// The span from `start` to the end of the last token taken.
    fn since(&self, start: Span) -> Span {
        start.to(self.c.prev_span())
    }

    /// Enters one nesting level (block or parenthesis).
    fn enter(&mut self) -> PResult<()> {
        self.depth += 1;
        if self.depth > MAX_DEPTH {
            return Err(Diagnostic::error("E0650", format!("nesting deeper than {MAX_DEPTH} levels")).at(self.c.span(), "too deeply nested"));
        }
        Ok(())
    }

    fn leave(&mut self) {
        self.depth -= 1;
    }

    fn module(&mut self) -> PResult<()> {
        if self.c.eat_word(syntax::FACTS) {
            self.c.punct("(")?;
            while !self.c.eat(")") {
                if !self.m.facts.is_empty() {
                    self.c.punct(",")?;
                }
                let (f, sp) = self.c.spelled::<Fact>(UNKNOWN_WORD, "pass fact")?;
                if self.m.facts.contains(f) {
                    return Err(Diagnostic::error("E0645", format!("fact `{}` is listed twice", f.spelling())).at(sp, "second listing"));
                }
                self.m.facts = self.m.facts.with(f);
            }
        }
        while self.c.is_word(syntax::DIM) {
            self.c.word(syntax::DIM)?;
            let (name, sp) = self.sym_name()?;
            if self.dims.contains_key(&name) {
                return Err(Diagnostic::error("E0647", format!("dim `%{name}` is declared twice")).at(sp, "second declaration"));
            }
            self.dims.insert(name.clone(), self.m.dims.len());
            self.m.dims.push(Dim { name });
        }
        while !self.c.at_end() {
            if self.c.is_word(syntax::BUFFER) {
                self.buffer()?;
            } else if self.c.is_word(syntax::KERNEL) {
                let k = self.kernel()?;
                self.m.kernels.push(k);
            } else {
                return Err(self.c.unexpected(&one_of([syntax::BUFFER, syntax::KERNEL])));
            }
        }
        Ok(())
    }

    fn buffer(&mut self) -> PResult<()> {
        let start = self.c.word(syntax::BUFFER)?;
        let (name, name_sp) = self.c.ident("a buffer name")?;
        if self.buffers.contains_key(&name) {
            return Err(Diagnostic::error("E0647", format!("buffer `{name}` is declared twice")).at(name_sp, "second declaration"));
        }
        self.c.punct(":")?;
        let (dtype, _) = self.c.spelled::<DType>(UNKNOWN_WORD, "dtype")?;
        self.c.punct("[")?;
        let mut shape = Vec::new();
        if !self.c.is_punct("]") {
            // A shape has no loop variables: an empty scope.
            let mut none = KScope { names: HashMap::new(), vars: Vec::new(), fixed: true };
            loop {
                shape.push(self.iexpr(&mut none)?);
                if !self.c.eat(",") {
                    break;
                }
            }
        }
        self.c.punct("]")?;
        let (role, _) = self.c.spelled::<Role>(UNKNOWN_WORD, "buffer role")?;
        let mut init = role.default_init();
        if self.c.eat_word(syntax::INIT) {
            self.c.punct("(")?;
            init = self.c.spelled::<Init>(UNKNOWN_WORD, "init")?.0;
            self.c.punct(")")?;
        }
        let id = self.m.buffers.len();
        self.buffers.insert(name.clone(), id);
        self.spans.insert(Site::Buffer(id), self.since(start));
        self.m.buffers.push(Buffer { name, dtype, shape, role, init });
        Ok(())
    }

    fn kernel(&mut self) -> PResult<Kernel> {
        let start = self.c.word(syntax::KERNEL)?;
        self.c.punct("@")?;
        let (name, _) = self.c.ident("a kernel name")?;
        let (mut role, mut stmt) = (KernelRole::Main, None);
        if self.c.eat_word(syntax::ROLE) {
            self.c.punct("(")?;
            role = self.c.spelled::<KernelRole>(UNKNOWN_WORD, "kernel role")?.0;
            if self.c.eat(",") {
                self.c.word(syntax::STMT)?;
                stmt = Some(self.c.usize("a statement number")?.0);
            }
            self.c.punct(")")?;
        }
        let mut multiples = Multiples::default();
        if self.c.eat_word(syntax::MULTIPLES) {
            self.c.punct("(")?;
            loop {
                let (name, sp) = self.sym_name()?;
                let Some(&d) = self.dims.get(&name) else {
                    return Err(Diagnostic::error("E0644", format!("unknown dim `%{name}`")).at(sp, format!("not declared by a `{}` line above", syntax::DIM)));
                };
                self.c.punct(":")?;
                let (n, nsp) = self.c.int("a positive multiple")?;
                if n < 2 || multiples.facts.iter().any(|f| f.0 == d) {
                    return Err(Diagnostic::error("E0645", format!("`%{name}: {n}` in `{}(..)`: each dim once, a multiple of at least 2", syntax::MULTIPLES))
                        .at(sp.to(nsp), "not a fact"));
                }
                multiples.facts.push((d, n));
                if !self.c.eat(",") {
                    break;
                }
            }
            self.c.punct(")")?;
        }
        let mut sc = KScope { names: HashMap::new(), vars: Vec::new(), fixed: false };
        if self.c.eat_word(syntax::VARS) {
            sc.fixed = true;
            self.c.punct("(")?;
            if !self.c.is_punct(")") {
                loop {
                    let (v, sp) = self.c.ident("a variable name")?;
                    if sc.names.contains_key(&v) {
                        return Err(Diagnostic::error("E0645", format!("variable `{v}` is listed twice in `{}(..)`", syntax::VARS)).at(sp, "second listing"));
                    }
                    sc.names.insert(v.clone(), sc.vars.len());
                    sc.vars.push(Var { name: v });
                    if !self.c.eat(",") {
                        break;
                    }
                }
            }
            self.c.punct(")")?;
        }
        self.spans.insert(Site::Kernel(self.m.kernels.len()), self.since(start));
        let body = self.block(&mut sc)?;
        Ok(Kernel { name, role, stmt, vars: sc.vars, body, multiples })
    }

    /// `{ node* }`.
    fn block(&mut self, sc: &mut KScope) -> PResult<Vec<Node>> {
        self.c.punct("{")?;
        self.enter()?;
        let mut body = Vec::new();
        while !self.c.eat("}") {
            if self.c.at_end() {
                return Err(self.c.unexpected("a node or `}`"));
            }
            self.path.push(body.len());
            body.push(self.node(sc)?);
            self.path.pop();
        }
        self.leave();
        Ok(body)
    }

    /// The id a binding of `name` refers to: a new variable unless the name
    /// is known (a second binding of a name is the verifier's to reject).
    fn bind(&mut self, sc: &mut KScope, name: String, sp: Span) -> PResult<VarId> {
        if let Some(&v) = sc.names.get(&name) {
            return Ok(v);
        }
        if sc.fixed {
            return Err(Diagnostic::error("E0644", format!("variable `{name}` is not listed in the kernel's `{}(..)`", syntax::VARS)).at(sp, "not declared"));
        }
        sc.names.insert(name.clone(), sc.vars.len());
        sc.vars.push(Var { name });
        Ok(sc.vars.len() - 1)
    }

    fn node(&mut self, sc: &mut KScope) -> PResult<Node> {
        let start = self.c.span();
        // `NAME = load_index ..` whatever the name (it may be `for`).
        if matches!(self.c.tok_at(0), Some(Tok::Ident(_))) && self.c.tok_at(1) == Some(&Tok::Punct("=")) {
            let (name, sp) = self.c.ident("a variable name")?;
            self.c.punct("=")?;
            self.c.word(syntax::LOAD_INDEX)?;
            let buf = self.buf_ref()?;
            let offset = self.offset(sc)?;
            let var = self.bind(sc, name, sp)?;
            self.spans.insert(self.node_site(), self.since(start));
            return Ok(Node::LoadIndex { var, buf, offset });
        }
        if self.c.eat_word(syntax::SYNC) {
            self.spans.insert(self.node_site(), self.since(start));
            return Ok(Node::Sync);
        }
        if self.c.eat_word(syntax::COMMIT_COPIES) {
            self.spans.insert(self.node_site(), self.since(start));
            return Ok(Node::Copies(CopyGroup::Commit));
        }
        if self.c.eat_word(syntax::WAIT_COPIES) {
            let (n, sp) = self.c.usize("the number of groups left in flight")?;
            let Ok(pending) = u32::try_from(n) else {
                return Err(Diagnostic::error("E0642", format!("`{}` takes at most {} groups, not {n}", syntax::WAIT_COPIES, u32::MAX)).at(sp, "too large"));
            };
            self.spans.insert(self.node_site(), self.since(start));
            return Ok(Node::Copies(CopyGroup::Wait { pending }));
        }
        if self.c.eat_word(syntax::FOR) {
            let (name, sp) = self.c.ident("a loop variable")?;
            self.c.word(syntax::IN)?;
            self.c.punct("[")?;
            // Bounds are read before the variable is bound: a bound that
            // names the loop's own variable is then an unknown name (or,
            // with `vars(..)`, a scope error for the verifier).
            let lo = self.iexpr(sc)?;
            self.c.punct(",")?;
            let hi = self.iexpr(sc)?;
            self.c.punct(")")?;
            let (kind, _) = self.c.spelled::<LoopKind>(UNKNOWN_WORD, "loop kind")?;
            let var = self.bind(sc, name, sp)?;
            self.header(start);
            let body = self.block(sc)?;
            return Ok(Node::For(For { var, lo, hi, kind, body }));
        }
        if self.c.eat_word(syntax::GUARD) {
            let mut conds = Vec::new();
            if !self.c.is_punct("{") {
                loop {
                    conds.push(self.cond(sc)?);
                    if !self.c.eat(",") {
                        break;
                    }
                }
            }
            self.header(start);
            let body = self.block(sc)?;
            return Ok(Node::Guard(Guard { conds, body }));
        }
        if self.c.is_punct("%") || self.c.peek_spelled::<WriteKind>().is_some() {
            let c = self.compute(sc)?;
            self.spans.insert(self.node_site(), self.since(start));
            return Ok(Node::Compute(c));
        }
        let load_index = format!("NAME = {}", syntax::LOAD_INDEX);
        let starts = [syntax::FOR, syntax::GUARD, syntax::SYNC, syntax::COMMIT_COPIES, syntax::WAIT_COPIES, &load_index, "%N = .."]
            .into_iter()
            .chain(WriteKind::ALL.iter().map(|w| w.spelling()));
        Err(self.c.unexpected(&one_of(starts)))
    }

    /// Records a `for` or `guard` node at its header, up to the `{`.
    fn header(&mut self, start: Span) {
        let end = self.c.span();
        self.spans.insert(self.node_site(), start.to(end));
    }

    fn cond(&mut self, sc: &mut KScope) -> PResult<Cond> {
        let first = self.iexpr(sc)?;
        if self.c.eat("!=") {
            let (zero, sp) = self.c.int("`0`")?;
            if zero != 0 {
                return Err(Diagnostic::error(LOOP.unexpected, "a `!=` condition compares with 0").at(sp, "expected `0`"));
            }
            return Ok(Cond::NonZero(first));
        }
        if !self.c.eat("<=") {
            return Err(self.c.unexpected("`<=` or `!=`"));
        }
        let e = self.iexpr(sc)?;
        self.c.punct("<")?;
        let hi = self.iexpr(sc)?;
        Ok(Cond::InRange { e, lo: first, hi })
    }

    fn buf_ref(&mut self) -> PResult<BufId> {
        let (name, sp) = self.c.ident("a buffer name")?;
        self.buffers
            .get(&name)
            .copied()
            .ok_or_else(|| Diagnostic::error("E0643", format!("unknown buffer `{name}`")).at(sp, "no buffer of this name is declared above"))
    }

    /// `[iexpr]` after a buffer name.
    fn offset(&mut self, sc: &mut KScope) -> PResult<IExpr> {
        self.c.punct("[")?;
        let e = self.iexpr(sc)?;
        self.c.punct("]")?;
        Ok(e)
    }

    /// `%NAME` or `%NAME.N` (the `%` included): a dim symbol's name.
    fn sym_name(&mut self) -> PResult<(String, Span)> {
        sym_name(&mut self.c)
    }

    fn iexpr(&mut self, sc: &mut KScope) -> PResult<IExpr> {
        let mut scope = LoopScope { dims: &self.dims, names: &sc.names, depth: &mut self.depth };
        iexpr(&mut self.c, &mut scope)
    }

    fn compute(&mut self, sc: &mut KScope) -> PResult<Compute> {
        let kernel = self.m.kernels.len();
        let mut values = Vec::new();
        while self.c.is_punct("%") {
            let (k, sp) = self.c.value_ref()?;
            if k != values.len() {
                return Err(Diagnostic::error("E0646", format!("value `%{k}` defined where `%{}` comes next", values.len()))
                    .at(sp, format!("expected `%{}`", values.len())));
            }
            self.c.punct("=")?;
            let op = self.vop(sc)?;
            self.c.punct(":")?;
            let (dtype, _) = self.c.spelled::<DType>(UNKNOWN_WORD, "dtype")?;
            self.spans.insert(Site::Value(kernel, self.path.clone(), k), self.since(sp));
            values.push(Value { op, dtype });
        }
        let start = self.c.span();
        let (kind, _) = self.c.spelled::<WriteKind>(UNKNOWN_WORD, "write")?;
        let buf = self.buf_ref()?;
        let offset = self.offset(sc)?;
        self.c.punct(write_operator(kind))?;
        let (value, _) = self.c.value_ref()?;
        self.spans.insert(Site::Write(kernel, self.path.clone()), self.since(start));
        Ok(Compute { values, write: Write { kind, buf, offset, value } })
    }

    /// Two value operands `%A, %B`.
    fn operands(&mut self) -> PResult<(ValId, ValId)> {
        let a = self.c.value_ref()?.0;
        self.c.punct(",")?;
        Ok((a, self.c.value_ref()?.0))
    }

    fn vop(&mut self, sc: &mut KScope) -> PResult<VOp> {
        let (op, sp) = self.c.ident("a value operation")?;
        if let Some(b) = BinOp::from_spelling(&op) {
            let (a, c) = self.operands()?;
            return Ok(VOp::Bin(b, a, c));
        }
        if let Some(b) = CmpOp::from_spelling(&op) {
            let (a, c) = self.operands()?;
            return Ok(VOp::Cmp(b, a, c));
        }
        if let Some(f) = Func::from_spelling(&op) {
            let mut args = vec![self.c.value_ref()?.0];
            while args.len() < f.arity() {
                self.c.punct(",")?;
                args.push(self.c.value_ref()?.0);
            }
            return Ok(VOp::Call(f, args));
        }
        let Some(name) = VOpName::from_spelling(&op) else {
            let all = VOpName::ALL
                .iter()
                .map(|o| o.spelling())
                .chain(BinOp::ALL.iter().map(|o| o.spelling()))
                .chain(CmpOp::ALL.iter().map(|o| o.spelling()))
                .chain(Func::ALL.iter().map(|o| o.spelling()));
            return Err(Diagnostic::error(UNKNOWN_WORD, format!("unknown value operation `{op}`")).at(sp, format!("expected {}", one_of(all))));
        };
        Ok(match name {
            VOpName::Const => VOp::Const(self.c.float()?),
            VOpName::Load => {
                let buf = self.buf_ref()?;
                VOp::Load { buf, offset: self.offset(sc)? }
            }
            VOpName::Index => VOp::Index(self.iexpr(sc)?),
            VOpName::Lookup => {
                self.c.punct("[")?;
                let mut table = Vec::new();
                if !self.c.is_punct("]") {
                    loop {
                        table.push(self.c.int("a table entry")?.0);
                        if !self.c.eat(",") {
                            break;
                        }
                    }
                }
                self.c.punct("]")?;
                VOp::Lookup { table, index: self.offset(sc)? }
            }
            VOpName::Random => {
                let Some(Tok::Str(stream)) = self.c.tok_at(0) else { return Err(self.c.unexpected("a stream name string")) };
                self.c.bump();
                let counter = self.offset(sc)?;
                self.c.punct(",")?;
                let (lo, hi) = self.operands()?;
                VOp::Random { stream: stream.clone(), counter, lo, hi }
            }
            VOpName::Neg => VOp::Neg(self.c.value_ref()?.0),
            VOpName::Cast => VOp::Cast(self.c.value_ref()?.0),
        })
    }
}

/// `%NAME` or `%NAME.N` (the `%` included): a dim symbol's name.
pub(crate) fn sym_name(c: &mut Cursor) -> PResult<(String, Span)> {
    let start = c.span();
    c.punct("%")?;
    let (mut name, _) = c.ident("a dim name")?;
    if c.eat(".") {
        let (n, _) = c.usize("a dim component")?;
        name = format!("{name}.{n}");
    }
    Ok((name, start.to(c.prev_span())))
}

/// What parsing an index expression needs from the dialect it is part
/// of: its dim symbols, its variables (a loop's; the `et` dialect's dims
/// have none), its nesting limit, and its error codes for them.
pub(crate) trait IExprScope {
    /// The dim symbol `%name` names, or a located error.
    fn sym(&self, name: &str, at: Span) -> PResult<IExpr>;
    /// The variable `name` names, or a located error.
    fn var(&self, name: &str, at: Span) -> PResult<IExpr>;
    /// Enters one parenthesis (bounding recursion); `leave` leaves it.
    fn enter(&mut self, at: Span) -> PResult<()>;
    fn leave(&mut self);
}

/// A loop body's scope: the variables bound around it.
struct LoopScope<'a> {
    dims: &'a HashMap<String, DimId>,
    names: &'a HashMap<String, VarId>,
    depth: &'a mut usize,
}

impl IExprScope for LoopScope<'_> {
    fn sym(&self, name: &str, at: Span) -> PResult<IExpr> {
        self.dims
            .get(name)
            .map(|&d| IExpr::Sym(d))
            .ok_or_else(|| Diagnostic::error("E0644", format!("unknown dim `%{name}`")).at(at, format!("not declared by a `{}` line above", syntax::DIM)))
    }
    fn var(&self, name: &str, at: Span) -> PResult<IExpr> {
        self.names.get(name).map(|&v| IExpr::Var(v)).ok_or_else(|| {
            Diagnostic::error("E0644", format!("unknown variable `{name}`")).at(at, format!("not bound by a loop or {} above", syntax::LOAD_INDEX))
        })
    }
    fn enter(&mut self, at: Span) -> PResult<()> {
        *self.depth += 1;
        if *self.depth > MAX_DEPTH {
            return Err(Diagnostic::error("E0650", format!("nesting deeper than {MAX_DEPTH} levels")).at(at, "too deeply nested"));
        }
        Ok(())
    }
    fn leave(&mut self) {
        *self.depth -= 1;
    }
}

/// An index expression as `print` writes it: constants, `%dim` symbols
/// and variables of `sc`, `(a op b)`, `min(a, b)`, `max(a, b)`. Both
/// dialects read their index expressions with it.
pub(crate) fn iexpr(c: &mut Cursor, sc: &mut impl IExprScope) -> PResult<IExpr> {
    if c.at_int() {
        return Ok(IExpr::Const(c.int("an index expression")?.0));
    }
    if c.is_punct("%") {
        let (name, sp) = sym_name(c)?;
        return sc.sym(&name, sp);
    }
    let call = c.tok_at(1) == Some(&Tok::Punct("("));
    match (c.peek(), c.peek_spelled::<IBin>()) {
        (Some(Token { tok: Tok::Ident(_), span }), Some(op @ (IBin::Min | IBin::Max))) if call => {
            sc.enter(*span)?;
            c.bump();
            c.bump();
            let a = iexpr(c, sc)?;
            c.punct(",")?;
            let b = iexpr(c, sc)?;
            c.punct(")")?;
            sc.leave();
            Ok(IExpr::bin(op, a, b))
        }
        (Some(Token { tok: Tok::Ident(s), span }), _) => {
            c.bump();
            sc.var(s, *span)
        }
        (Some(Token { tok: Tok::Punct("("), span }), _) => {
            sc.enter(*span)?;
            c.bump();
            let a = iexpr(c, sc)?;
            let infix = |op: &IBin| !matches!(op, IBin::Min | IBin::Max);
            let Some(op) = c.peek_spelled::<IBin>().filter(infix) else {
                let ops = IBin::ALL.iter().filter(|op| infix(op)).map(|op| op.spelling());
                return Err(c.unexpected(&format!("an index operator ({})", one_of(ops))));
            };
            c.bump();
            let b = iexpr(c, sc)?;
            c.punct(")")?;
            sc.leave();
            Ok(IExpr::bin(op, a, b))
        }
        _ => Err(c.unexpected("an index expression")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use et_grammar::span::line_col;

    fn err(text: &str) -> (&'static str, (usize, usize)) {
        let d = parse_module(text).expect_err("should fail");
        let sp = d[0].primary_span().expect("located");
        (d[0].code, line_col(text, sp.start))
    }

    #[test]
    fn a_kernels_dim_facts_read_back_and_bad_ones_are_refused() {
        let text = "dim %n.0\ndim %w.0\nbuffer a : f32[%n.0, %w.0] output\n\nkernel @k multiples(%w.0: 4, %n.0: 2) {\n  for i in [0, %w.0) parallel {\n    %0 = const 1.0 : f32\n    store a[i] = %0\n  }\n}\n";
        let m = parse_module(text).unwrap();
        assert_eq!(m.kernels[0].multiples, Multiples { facts: vec![(1, 4), (0, 2)] });
        assert_eq!(super::super::print::module(&m), text);
        crate::ir::loops::verify::verify(&m).unwrap();
        let with = |facts: &str| text.replace("multiples(%w.0: 4, %n.0: 2)", facts);
        assert_eq!(err(&with("multiples(%w.0: 4, %w.0: 8)")).0, "E0645");
        assert_eq!(err(&with("multiples(%w.0: 1)")).0, "E0645");
        assert_eq!(err(&with("multiples(%x.0: 4)")).0, "E0644");
        // Built by hand: a fact of no declared dim does not verify.
        let mut bad = m.clone();
        bad.kernels[0].multiples.facts.push((7, 4));
        assert!(crate::ir::loops::verify::verify(&bad).is_err());
    }

    #[test]
    fn lexer_tells_comment_lines_from_floor_division() {
        let m = parse_module("// RUN: etopt %s\nbuffer a : i32[4] output\n  // note\nkernel @k {\n  for i in [0, (9 // 2)) reduce {\n    %0 = index (i // 2) : i32\n    store a[i] = %0\n  }\n}\n").unwrap();
        let Node::For(l) = &m.kernels[0].body[0] else { panic!() };
        assert_eq!(l.hi, IExpr::bin(IBin::FloorDiv, IExpr::c(9), IExpr::c(2)));
    }

    #[test]
    fn numbers_strings_and_limits() {
        let m = parse_module("buffer a : f64[] output\nkernel @k {\n  %0 = const -1.5e-3 : f64\n  %1 = const inf : f64\n  %2 = random \"a\\\"\\u{1f}\"[-9223372036854775808], %0, %1 : f64\n  store a[0] = %2\n}\n").unwrap();
        let c = match &m.kernels[0].body[0] {
            Node::Compute(c) => c,
            _ => panic!(),
        };
        assert_eq!(c.values[0].op, VOp::Const(-1.5e-3));
        assert_eq!(c.values[1].op, VOp::Const(f64::INFINITY));
        assert_eq!(c.values[2].op, VOp::Random { stream: "a\"\u{1f}".into(), counter: IExpr::c(i64::MIN), lo: 0, hi: 1 });
        assert_eq!(err("buffer a : f64[9223372036854775808] temp"), ("E0642", (1, 16)));
        assert_eq!(err("buffer a : f64[] temp\nkernel @k {\n %0 = const 1e999 : f64\n store a[0] = %0\n}"), ("E0642", (3, 13)));
        assert_eq!(err("kernel @k { %0 = random \"ab"), ("E0649", (1, 25)));
        let deep = format!("buffer b : i32[1] temp\nkernel @k {{ x = load_index b[{}0{}] }}", "(".repeat(1000), " + 1)".repeat(1000));
        assert_eq!(err(&deep).0, "E0650");
    }

    #[test]
    fn names_are_identifiers_of_the_et_language() {
        let text = "buffer ä : f64[2] output\n\nkernel @k_Δ {\n  for ö1 in [0, 2) parallel {\n    %0 = const 1.0 : f64\n    store ä[ö1] = %0\n  }\n}\n";
        let m = parse_verified(text).unwrap();
        assert_eq!(super::super::print::module(&m), text);
        assert_eq!(err("buffer 1ä : f64[2] output"), ("E0642", (1, 8)));
    }

    #[test]
    fn arbitrary_bytes_never_panic() {
        // A cheap fuzz: every prefix and some mutations of a valid text.
        let text = "buffer a : f64[2] output\nkernel @k vars(i) {\n  for i in [max(0, (1 - 2)), 2) parallel {\n    guard 0 <= (i % 2) < 2, i != 0 {\n      %0 = const 2.0 : f64\n      accumulate a[i] += %0\n    }\n  }\n}\n";
        for end in 0..=text.len() {
            let _ = parse_module(&text[..end]);
        }
        for (i, _) in text.char_indices() {
            for rep in ["\"", "%", "(", "}", "é", "-", "\\"] {
                let t = format!("{}{}{}", &text[..i], rep, &text[i + 1..]);
                let _ = parse_module(&t);
            }
        }
    }
}
