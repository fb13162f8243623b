//! Parser for the textual `et` dialect: reads back exactly what
//! `print::module` writes (docs/ir-et.md describes the format).
//!
//! The format is line oriented, so the parser is too: every line that
//! carries tokens (`text::lines`) is lexed on its own and parsed by its
//! first word (`eintup`, `array`, `stmt`, `%N`, `}`, `call`, `outputs`).
//! Names are resolved against the `eintup`/`array` lines of the whole file,
//! found in a first pass, because an array position may read a later array
//! (`idx[b, :]`). Every diagnostic is located in the text (codes
//! E0601-E0619) and the parser never panics: recursion depth is bounded and
//! numbers are checked.
//!
//! Spans in the result point into the parsed text: an eintup or array at its
//! name on its declaration line, a statement at its header line, an op at its
//! line, index expressions at their own text.

use super::symbolic::{SymCheck, SymbolicDims};
use super::syntax::{self, OpName};
use super::*;
use crate::ir::loops::parse::{self as loop_parse, IExprScope};
use crate::ir::loops::{Dim, DimId, IExpr};
use crate::ir::text::{self, one_of, Cursor, Dialect, PResult, Spelled, Tok, Token};
use et_grammar::ast::{AssignOp, BinOp, CmpOp, ElemType, Func, Literal};
use et_grammar::{Diagnostic, Span};
use std::collections::HashMap;

/// Deepest nesting of index expressions accepted. The printer fully
/// parenthesises, so this bounds the parser's recursion (a stack overflow
/// would abort, not report) while staying far above real programs, whose
/// source lines are limited to 256 operators (E0011).
pub const MAX_DEPTH: usize = 512;

/// Deepest nesting through `FLAT(..)` and slices, the part of the parser
/// that recurses: each level costs native stack (several KiB in debug
/// builds), and 256 stays within a 2 MiB thread stack. A source line has at
/// most 256 operators and brackets, so no printed program nests deeper.
pub const MAX_NESTED: usize = 256;

/// The `et` dialect's codes for lexical and token errors.
static ET: Dialect = Dialect { name: "et", end: "end of line", bad_char: "E0601", bad_number: "E0602", bad_string: "E0603", unexpected: "E0604" };

/// Parses a printed `et` module.
pub fn parse_module(text: &str) -> Result<Module, Vec<Diagnostic>> {
    let mut diags = Vec::new();
    let mut lines = Vec::new();
    for (start, body) in text::lines(text) {
        let (toks, err) = text::lex_line(body, start, &ET);
        let broken = err.is_some();
        diags.extend(err);
        lines.push(LineToks { toks, end: start + body.len(), broken });
    }
    let names = declare(&lines, &mut diags);
    let mut p = ModuleParser {
        module: Module { eintups: vec![], arrays: vec![], stmts: vec![], call: None, outputs: vec![], symbolic: None },
        symbols: HashMap::new(),
        section: Section::Symbols,
        block: None,
        outputs_seen: false,
        skipping: false,
        diags,
    };
    for l in &lines {
        p.line(l, &names);
    }
    if let Some(b) = p.block.take() {
        p.diags.push(Diagnostic::error("E0614", "statement block is not closed").at(b.header, "opened here").note("expected a `}` line"));
    }
    if p.diags.is_empty() {
        Ok(p.module)
    } else {
        p.diags.sort_by_key(|d| d.primary_span().map_or(0, |s| s.start));
        Err(p.diags)
    }
}

/// Parses a module and verifies it: what a tool reading printed IR wants.
/// Verifier errors are located at the line (or index expression) they are
/// about (code E0620).
pub fn parse_verified(text: &str) -> Result<Module, Vec<Diagnostic>> {
    let m = parse_module(text)?;
    verify::verify(&m).map_err(|v| v.diagnostics())?;
    Ok(m)
}

struct LineToks {
    toks: Vec<Token>,
    /// Byte offset of the end of the line (for "unexpected end of line").
    end: usize,
    /// A lexical error was reported; `toks` holds the tokens before it.
    broken: bool,
}

// ------------------------------------------------------- name pre-pass

struct Names {
    eintups: HashMap<String, EintupId>,
    arrays: HashMap<String, ArrayId>,
}

/// Numbers the `eintup` and `array` lines in order, so later lines can
/// name arrays declared after them. Duplicates are E0607.
fn declare(lines: &[LineToks], diags: &mut Vec<Diagnostic>) -> Names {
    let mut n = Names { eintups: HashMap::new(), arrays: HashMap::new() };
    let mut first: HashMap<(bool, String), Span> = HashMap::new();
    let (mut ne, mut na) = (0, 0);
    for l in lines {
        let (is_array, count) = match l.toks.first().map(|t| &t.tok) {
            Some(Tok::Ident(w)) if w == syntax::EINTUP => (false, &mut ne),
            Some(Tok::Ident(w)) if w == syntax::ARRAY => (true, &mut na),
            _ => continue,
        };
        let id = *count;
        *count += 1;
        let Some(Token { tok: Tok::Ident(name), span }) = l.toks.get(1) else { continue };
        if let Some(prev) = first.get(&(is_array, name.clone())) {
            let kind = if is_array { syntax::ARRAY } else { syntax::EINTUP };
            diags.push(
                Diagnostic::error("E0607", format!("{kind} `{name}` is declared twice")).at(*span, "second declaration").also(*prev, "first declaration"),
            );
            continue;
        }
        first.insert((is_array, name.clone()), *span);
        if is_array {
            n.arrays.insert(name.clone(), id);
        } else {
            n.eintups.insert(name.clone(), id);
        }
    }
    n
}

// ------------------------------------------------------- module parser

#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
enum Section {
    Symbols,
    Eintups,
    Checks,
    Arrays,
    Stmts,
    Call,
    Outputs,
}

impl Section {
    /// The keyword of the section's lines.
    fn word(self) -> &'static str {
        match self {
            Section::Symbols => syntax::SYMBOLS,
            Section::Eintups => syntax::EINTUP,
            Section::Checks => syntax::CHECK,
            Section::Arrays => syntax::ARRAY,
            Section::Stmts => syntax::STMT,
            Section::Call => syntax::CALL,
            Section::Outputs => syntax::OUTPUTS,
        }
    }
}

/// A statement whose `{` is open.
struct Block {
    stmt: Stmt,
    header: Span,
    result_span: Span,
}

struct ModuleParser {
    module: Module,
    /// A dynamic module's dim symbols by name (its `symbols(..)` line).
    symbols: HashMap<String, DimId>,
    section: Section,
    block: Option<Block>,
    outputs_seen: bool,
    /// Skipping the body of a block whose `stmt` line did not parse.
    skipping: bool,
    diags: Vec<Diagnostic>,
}

fn placeholder_stmt() -> Stmt {
    Stmt { array: 0, indices: vec![], op: AssignOp::Assign, vars: vec![], ops: vec![], result: 0, span: Span::default() }
}

impl ModuleParser {
    fn line(&mut self, text: &LineToks, names: &Names) {
        let Some(first) = text.toks.first() else { return };
        let word = first.tok.text().unwrap_or("");
        let in_block = matches!(word, "%" | "}");
        if self.skipping {
            // The lines of a block whose header failed are not checked.
            if in_block {
                if word == "}" {
                    self.skipping = false;
                    self.module.stmts.push(placeholder_stmt());
                }
                return;
            }
            self.skipping = false;
            self.module.stmts.push(placeholder_stmt());
        }
        if !in_block {
            if let Some(b) = self.block.take() {
                self.diags.push(
                    Diagnostic::error("E0614", "statement block is not closed").at(b.header, "opened here").also(first.span, "next line that is not an op"),
                );
                self.module.stmts.push(b.stmt);
            }
        }
        if text.broken {
            // Already reported by the lexer; only keep numbering aligned.
            self.recover(word);
            return;
        }
        let mut l = Line { c: Cursor::new(&text.toks, text.end, &ET), names, depth: 0, recursion: 0 };
        let r = match word {
            syntax::SYMBOLS => self.ordered(Section::Symbols, first.span).and_then(|_| self.symbols(&mut l)),
            syntax::EINTUP => self.ordered(Section::Eintups, first.span).and_then(|_| self.eintup(&mut l)),
            syntax::CHECK => self.ordered(Section::Checks, first.span).and_then(|_| self.check(&mut l)),
            syntax::ARRAY => self.ordered(Section::Arrays, first.span).and_then(|_| self.array(&mut l)),
            syntax::STMT => self.ordered(Section::Stmts, first.span).and_then(|_| self.stmt_header(&mut l)),
            "%" => self.op(&mut l),
            "}" => self.close(&mut l),
            syntax::CALL => self.ordered(Section::Call, first.span).and_then(|_| self.call(&mut l)),
            syntax::OUTPUTS => self.ordered(Section::Outputs, first.span).and_then(|_| self.outputs(&mut l)),
            _ => {
                let starts = [syntax::SYMBOLS, syntax::EINTUP, syntax::CHECK, syntax::ARRAY, syntax::STMT, "%N = ...", "}", syntax::CALL, syntax::OUTPUTS];
                Err(Diagnostic::error("E0605", format!("unexpected {} at the start of a line", first.tok.describe()))
                    .at(first.span, format!("expected {}", one_of(starts))))
            }
        };
        if let Err(d) = r {
            self.diags.push(d);
            self.recover(word);
        }
    }

    /// Sections come in printing order; a call and an outputs line at most once.
    fn ordered(&mut self, s: Section, at: Span) -> PResult<()> {
        let again = (s == Section::Call && self.module.call.is_some()) || (s == Section::Outputs && self.outputs_seen);
        if again {
            return Err(Diagnostic::error("E0606", format!("a second `{}` line", s.word())).at(at, "already given above"));
        }
        if s < self.section {
            let order =
                [Section::Symbols, Section::Eintups, Section::Checks, Section::Arrays, Section::Stmts, Section::Call, Section::Outputs].map(Section::word);
            return Err(Diagnostic::error("E0606", format!("`{}` line after the `{}` section", s.word(), self.section.word()))
                .at(at, "out of order")
                .note(format!("lines come in this order: {}", order.join(", "))));
        }
        self.section = s;
        Ok(())
    }

    /// After a failed line: keep ids aligned with the name pre-pass (the
    /// i-th `eintup`/`array` line is id i) and op/statement numbers aligned
    /// with the text, so one mistake gives one diagnostic, not a cascade.
    /// The module is rejected anyway.
    fn recover(&mut self, word: &str) {
        let dummy = Span::default();
        match word {
            syntax::EINTUP => {
                self.module.eintups.push(Eintup { name: String::new(), rank: None, dims: None, span: dummy });
                if let Some(sym) = self.module.symbolic.as_mut() {
                    sym.eintups.push(Vec::new());
                }
            }
            syntax::ARRAY => self.module.arrays.push(Array {
                name: String::new(),
                dtype: ElemType::Int,
                positions: vec![],
                attrs: vec![],
                def_stmt: 0,
                is_input: false,
                span: dummy,
            }),
            syntax::STMT => self.skipping = true,
            "%" => {
                if let Some(b) = self.block.as_mut() {
                    b.stmt.ops.push(Op { kind: OpKind::ConstInt(0), ty: SigType { dtype: ElemType::Int, eintups: vec![] }, span: dummy });
                }
            }
            _ => {}
        }
    }

    /// `symbols(%a.0, %b.0)`: the module is dynamic, with these symbols.
    fn symbols(&mut self, l: &mut Line) -> PResult<()> {
        l.c.word(syntax::SYMBOLS)?;
        l.c.punct("(")?;
        let mut sym = SymbolicDims::default();
        if !l.c.eat(")") {
            loop {
                let (name, sp) = loop_parse::sym_name(&mut l.c)?;
                if self.symbols.insert(name.clone(), sym.symbols.len()).is_some() {
                    return Err(Diagnostic::error("E0607", format!("symbol `%{name}` is declared twice")).at(sp, "second declaration"));
                }
                sym.symbols.push(Dim { name });
                if l.c.eat(")") {
                    break;
                }
                l.c.punct(",")?;
            }
        }
        l.c.finish()?;
        self.module.symbolic = Some(sym);
        Ok(())
    }

    fn eintup(&mut self, l: &mut Line) -> PResult<()> {
        l.c.word(syntax::EINTUP)?;
        let (name, span) = l.c.ident("an eintup name")?;
        l.c.punct(":")?;
        if self.module.symbolic.is_some() {
            // A dynamic module's dims: expressions over its symbols.
            let dims = l.sym_dims(&self.symbols)?;
            l.c.finish()?;
            self.module.eintups.push(Eintup { name, rank: Some(dims.len()), dims: None, span });
            if let Some(s) = self.module.symbolic.as_mut() {
                s.eintups.push(dims);
            }
            return Ok(());
        }
        let (rank, dims) = l.dims()?;
        l.c.finish()?;
        self.module.eintups.push(Eintup { name, rank, dims, span });
        Ok(())
    }

    /// `check EXPR >= MIN about NAME "rule"`, in a dynamic module.
    fn check(&mut self, l: &mut Line) -> PResult<()> {
        let at = l.c.word(syntax::CHECK)?;
        if self.module.symbolic.is_none() {
            return Err(Diagnostic::error("E0606", format!("a `{}` line in a module without a `{}(..)` line", syntax::CHECK, syntax::SYMBOLS))
                .at(at, "not a dynamic module"));
        }
        let expr = l.sym_expr(&self.symbols)?;
        l.c.punct(">")?;
        l.c.punct("=")?;
        let (min, _) = l.c.int("the least value")?;
        l.c.word(syntax::ABOUT)?;
        let (about, _) = l.eintup_name()?;
        let rule = match l.c.tok_at(0) {
            Some(Tok::Str(r)) => r.clone(),
            _ => return Err(l.c.unexpected("the rule as a string")),
        };
        l.c.bump();
        l.c.finish()?;
        if let Some(s) = self.module.symbolic.as_mut() {
            s.checks.push(SymCheck { expr, min, about, rule });
        }
        Ok(())
    }

    fn array(&mut self, l: &mut Line) -> PResult<()> {
        l.c.word(syntax::ARRAY)?;
        let (name, span) = l.c.ident("an array name")?;
        l.c.punct(":")?;
        let dtype = l.dtype()?;
        l.c.punct("[")?;
        let mut positions = Vec::new();
        if !l.c.eat("]") {
            loop {
                let expr = l.index_expr()?;
                l.c.punct(":")?;
                let (rank, dims) = l.dims()?;
                positions.push(Position { expr, rank, dims });
                if l.c.eat("]") {
                    break;
                }
                l.c.punct(",")?;
            }
        }
        let mut def_stmt = None;
        let mut is_input = false;
        let mut attrs = Vec::new();
        while !l.c.at_end() {
            let flag = l.c.span();
            if l.c.eat_word(syntax::DEF) {
                l.c.punct("=")?;
                let (n, sp) = l.c.usize("a statement number")?;
                if def_stmt.replace(n).is_some() {
                    return Err(Diagnostic::error("E0617", format!("array `{name}` has two `{}=` flags", syntax::DEF)).at(flag.to(sp), "second one"));
                }
            } else if l.c.eat_word(syntax::INPUT) {
                if std::mem::replace(&mut is_input, true) {
                    return Err(Diagnostic::error("E0617", format!("array `{name}` has two `{}` flags", syntax::INPUT)).at(flag, "second one"));
                }
            } else if l.c.eat_word(syntax::RANGE) {
                l.c.punct("=")?;
                l.c.punct("[")?;
                let lo = l.bound()?;
                l.c.punct(",")?;
                let hi = l.bound()?;
                l.c.punct(")")?;
                attrs.push(Attr::Range { lo, hi });
            } else {
                let flags = format!("`{}=N`, `{}`, `{}=[lo, hi)` or end of line", syntax::DEF, syntax::INPUT, syntax::RANGE);
                return Err(l.c.unexpected(&flags));
            }
        }
        let Some(def_stmt) = def_stmt else {
            return Err(Diagnostic::error("E0617", format!("array `{name}` has no `{}=N` flag", syntax::DEF))
                .at(l.c.span(), format!("expected `{}=N` (the defining statement)", syntax::DEF)));
        };
        self.module.arrays.push(Array { name, dtype, positions, attrs, def_stmt, is_input, span });
        Ok(())
    }

    fn stmt_header(&mut self, l: &mut Line) -> PResult<()> {
        let start = l.c.word(syntax::STMT)?;
        let (n, nspan) = l.c.usize("a statement number")?;
        let expect = self.module.stmts.len();
        if n != expect {
            return Err(Diagnostic::error("E0610", format!("statement numbered {n}, expected {expect}")).at(nspan, "statements are numbered from 0 in order"));
        }
        let (array, _) = l.array_name()?;
        let indices = l.slots()?;
        let op = if let Some(op) = l.c.peek_spelled::<AssignOp>() {
            l.c.bump();
            op
        } else if let Some(&(op, w)) = syntax::REDUCTIONS.iter().find(|(_, w)| l.c.is_word(w)) {
            l.c.word(w)?;
            l.c.punct("=")?;
            op
        } else {
            let all = AssignOp::ALL.iter().chain(syntax::REDUCTIONS.iter().map(|(o, _)| o)).map(|o| o.text());
            return Err(l.c.unexpected(&one_of(all)));
        };
        let (result, result_span) = l.c.value_ref()?;
        l.c.word(syntax::VARS)?;
        let vars = l.eintup_list()?;
        let close = l.c.punct("{")?;
        l.c.finish()?;
        let header = start.to(close);
        self.block = Some(Block { stmt: Stmt { array, indices, op, vars, ops: vec![], result, span: header }, header, result_span });
        Ok(())
    }

    fn op(&mut self, l: &mut Line) -> PResult<()> {
        let Some(block) = self.block.as_mut() else {
            return Err(Diagnostic::error("E0614", "op line outside a statement block").at(l.c.span(), "expected a `stmt ... {` line before it"));
        };
        let (k, kspan) = l.c.value_ref()?;
        let expect = block.stmt.ops.len();
        if k != expect {
            return Err(Diagnostic::error("E0611", format!("op numbered %{k}, expected %{expect}")).at(kspan, "ops are numbered from %0 in order"));
        }
        l.c.punct("=")?;
        let (kw, kwspan) = l.c.ident("an op name")?;
        let operand = |l: &mut Line| -> PResult<ValueId> {
            let (v, sp) = l.c.value_ref()?;
            if v >= k {
                return Err(Diagnostic::error("E0612", format!("operand %{v} is not defined before %{k}"))
                    .at(sp, "an operand must name an earlier op of the statement"));
            }
            Ok(v)
        };
        let kind = if let Some(op) = BinOp::from_spelling(&kw) {
            let a = operand(l)?;
            l.c.punct(",")?;
            let b = operand(l)?;
            OpKind::Binary(op, a, b)
        } else if let Some(op) = CmpOp::from_spelling(&kw) {
            let a = operand(l)?;
            l.c.punct(",")?;
            let b = operand(l)?;
            OpKind::Compare(op, a, b)
        } else if let Some(f) = Func::from_spelling(&kw) {
            let mut args = vec![operand(l)?];
            while args.len() < f.arity() {
                l.c.punct(",")?;
                args.push(operand(l)?);
            }
            OpKind::Call(f, args)
        } else {
            let Some(name) = OpName::from_spelling(&kw) else {
                let all = OpName::ALL
                    .iter()
                    .map(|o| o.spelling())
                    .chain(BinOp::ALL.iter().map(|o| o.spelling()))
                    .chain(CmpOp::ALL.iter().map(|o| o.spelling()))
                    .chain(Func::ALL.iter().map(|o| o.spelling()));
                return Err(Diagnostic::error("E0616", format!("unknown op `{kw}`"))
                    .at(kwspan, "not an et op")
                    .note(format!("ops: {}", all.collect::<Vec<_>>().join(", "))));
            };
            match name {
                OpName::Const => l.constant()?,
                OpName::Rank => OpKind::Rank(l.eintup_list()?),
                OpName::DimsAt => {
                    let list = l.dims_list()?;
                    l.c.punct("[")?;
                    let t = l.index_expr()?;
                    l.c.punct("]")?;
                    OpKind::DimsAt(list, t)
                }
                OpName::Read => {
                    let (array, _) = l.array_name()?;
                    OpKind::Read { array, indices: l.slots()? }
                }
                OpName::Random => {
                    let lo = operand(l)?;
                    l.c.punct(",")?;
                    let hi = operand(l)?;
                    l.c.punct(",")?;
                    OpKind::Random { lo, hi, dtype: l.dtype()? }
                }
                OpName::Neg => OpKind::Neg(operand(l)?),
            }
        };
        l.c.punct(":")?;
        let ty = l.sig(&self.module)?;
        let span = kspan.to(l.c.prev_span());
        l.c.finish()?;
        block.stmt.ops.push(Op { kind, ty, span });
        Ok(())
    }

    fn close(&mut self, l: &mut Line) -> PResult<()> {
        let sp = l.c.punct("}")?;
        l.c.finish()?;
        let Some(b) = self.block.take() else {
            return Err(Diagnostic::error("E0614", "`}` without an open statement block").at(sp, "nothing to close"));
        };
        let (result, n) = (b.stmt.result, b.stmt.ops.len());
        // Pushed even when wrong, so later statement numbers still match.
        self.module.stmts.push(b.stmt);
        if result >= n {
            return Err(Diagnostic::error("E0613", format!("statement result %{result} is not an op of its block"))
                .at(b.result_span, format!("the block has {n} ops"))
                .also(sp, "block ends here"));
        }
        Ok(())
    }

    fn call(&mut self, l: &mut Line) -> PResult<()> {
        let start = l.c.word(syntax::CALL)?;
        let (mut func, _) = l.c.ident("a function name")?;
        while l.c.eat(".") {
            func.push('.');
            func.push_str(&l.c.ident("a function name")?.0);
        }
        l.c.punct("(")?;
        let mut args = Vec::new();
        if !l.c.eat(")") {
            loop {
                let key = match (l.c.tok_at(0), l.c.tok_at(1)) {
                    (Some(Tok::Ident(k)), Some(Tok::Punct("="))) => {
                        l.c.bump();
                        l.c.bump();
                        Some(k.clone())
                    }
                    _ => None,
                };
                args.push((key, l.call_arg()?));
                if l.c.eat(")") {
                    break;
                }
                l.c.punct(",")?;
            }
        }
        let span = start.to(l.c.prev_span());
        l.c.finish()?;
        self.module.call = Some(FrameworkCall { func, args, span });
        Ok(())
    }

    fn outputs(&mut self, l: &mut Line) -> PResult<()> {
        l.c.word(syntax::OUTPUTS)?;
        self.outputs_seen = true;
        let mut outs = vec![l.array_name()?.0];
        while l.c.eat(",") {
            outs.push(l.array_name()?.0);
        }
        l.c.finish()?;
        self.module.outputs = outs;
        Ok(())
    }
}

// ------------------------------------------------------- one line

/// The cursor over one line, with the names of the module and the nesting
/// of the index expression being read.
struct Line<'a> {
    c: Cursor<'a>,
    names: &'a Names,
    /// Nesting of index expressions (parentheses and recursion).
    depth: usize,
    /// Nesting through `FLAT(..)` and slices only.
    recursion: usize,
}

impl Line<'_> {
    fn eintup_name(&mut self) -> PResult<(EintupId, Span)> {
        let (n, sp) = self.c.ident("an eintup name")?;
        match self.names.eintups.get(&n) {
            Some(id) => Ok((*id, sp)),
            None => Err(Diagnostic::error("E0608", format!("unknown eintup `{n}`")).at(sp, format!("no `{}` line declares it", syntax::EINTUP))),
        }
    }

    fn array_name(&mut self) -> PResult<(ArrayId, Span)> {
        let (n, sp) = self.c.ident("an array name")?;
        match self.names.arrays.get(&n) {
            Some(id) => Ok((*id, sp)),
            None => Err(Diagnostic::error("E0609", format!("unknown array `{n}`")).at(sp, format!("no `{}` line declares it", syntax::ARRAY))),
        }
    }

    /// `(a, b, ...)`, possibly empty.
    fn eintup_list(&mut self) -> PResult<Vec<EintupId>> {
        self.c.punct("(")?;
        let mut v = Vec::new();
        if self.c.eat(")") {
            return Ok(v);
        }
        loop {
            v.push(self.eintup_name()?.0);
            if self.c.eat(")") {
                return Ok(v);
            }
            self.c.punct(",")?;
        }
    }

    /// `(item, ...)` of a `DIMS`: eintup names and non-negative integer
    /// literals (a literal `n` is the one component `n + 1`).
    fn dims_list(&mut self) -> PResult<DimsList> {
        self.c.punct("(")?;
        let mut v = Vec::new();
        if self.c.eat(")") {
            return Ok(DimsList(v));
        }
        loop {
            if matches!(self.c.tok_at(0), Some(Tok::Int(_))) {
                let (n, sp) = self.c.int("an integer")?;
                if n == i64::MAX {
                    return Err(Diagnostic::error("E0602", format!("integer `{n}` in `DIMS(..)` is too large")).at(sp, "its component n+1 overflows i64"));
                }
                v.push(DimsItem::Lit(n));
            } else {
                v.push(DimsItem::Eintup(self.eintup_name()?.0));
            }
            if self.c.eat(")") {
                return Ok(DimsList(v));
            }
            self.c.punct(",")?;
        }
    }

    fn dtype(&mut self) -> PResult<ElemType> {
        Ok(self.c.spelled::<ElemType>("E0618", "element type")?.0)
    }

    /// `?` (unknown), `?R` (rank R, dims unknown) or `[d1, ...]` (static).
    /// `[e, ...]`: a dynamic module's dims over `symbols`.
    fn sym_dims(&mut self, symbols: &HashMap<String, DimId>) -> PResult<Vec<IExpr>> {
        self.c.punct("[")?;
        let mut d = Vec::new();
        if !self.c.eat("]") {
            loop {
                d.push(self.sym_expr(symbols)?);
                if self.c.eat("]") {
                    break;
                }
                self.c.punct(",")?;
            }
        }
        Ok(d)
    }

    /// An expression over a dynamic module's `symbols`, in the `loop`
    /// dialect's syntax (the same printer writes both).
    fn sym_expr(&mut self, symbols: &HashMap<String, DimId>) -> PResult<IExpr> {
        let mut sc = SymScope { symbols, depth: &mut self.depth };
        loop_parse::iexpr(&mut self.c, &mut sc)
    }

    fn dims(&mut self) -> PResult<(Option<usize>, Option<Vec<i64>>)> {
        if self.c.eat("?") {
            if matches!(self.c.tok_at(0), Some(Tok::Int(_))) {
                return Ok((Some(self.c.usize("a rank")?.0), None));
            }
            return Ok((None, None));
        }
        if !self.c.eat("[") {
            return Err(self.c.unexpected("`?`, `?RANK` or `[dims]`"));
        }
        let mut d = Vec::new();
        if !self.c.eat("]") {
            loop {
                d.push(self.c.int("a dim")?.0);
                if self.c.eat("]") {
                    break;
                }
                self.c.punct(",")?;
            }
        }
        Ok((Some(d.len()), Some(d)))
    }

    /// `[lo, hi)` bound: an integer or `DIMS(list)`.
    fn bound(&mut self) -> PResult<Bound> {
        if self.c.eat_word(syntax::DIMS) {
            return Ok(Bound::DimsAt(self.dims_list()?));
        }
        Ok(Bound::Int(self.c.int("an integer")?.0))
    }

    /// `[slot, ...]` where a slot is `:` or an index expression.
    fn slots(&mut self) -> PResult<Vec<IndexSlot>> {
        self.c.punct("[")?;
        let mut v = Vec::new();
        if self.c.eat("]") {
            return Ok(v);
        }
        loop {
            if self.c.is_punct(":") {
                v.push(IndexSlot::Colon(self.c.punct(":")?));
            } else {
                v.push(IndexSlot::Expr(self.index_expr()?));
            }
            if self.c.eat("]") {
                return Ok(v);
            }
            self.c.punct(",")?;
        }
    }

    /// An index expression. Parenthesised binary expressions (the printer
    /// writes every one as `(a op b)`) are parsed with an explicit stack,
    /// so long operator chains cost no native stack; only `FLAT(..)` and
    /// slices recurse. `depth` counts both, bounded by [`MAX_DEPTH`].
    fn index_expr(&mut self) -> PResult<IndexExpr> {
        enum Frame {
            /// Saw `(` at this span; the left operand comes next.
            Open(Span),
            /// Saw `( left op`; the right operand comes next.
            Right(Span, IndexExpr, IndexOp),
        }
        let base = self.depth;
        let mut stack: Vec<Frame> = Vec::new();
        let r = 'outer: loop {
            while self.c.is_punct("(") {
                if base + stack.len() >= MAX_DEPTH {
                    break 'outer Err(self.too_deep());
                }
                stack.push(Frame::Open(self.c.span()));
                self.c.bump();
            }
            self.depth = base + stack.len();
            let mut e = match self.atom() {
                Ok(e) => e,
                Err(d) => break 'outer Err(d),
            };
            loop {
                match stack.pop() {
                    None => break 'outer Ok(e),
                    Some(Frame::Open(sp)) => {
                        let Some(op) = self.c.peek_spelled::<IndexOp>() else {
                            break 'outer Err(self.c.unexpected(&format!("an index operator ({})", IndexOp::one_of())));
                        };
                        self.c.bump();
                        stack.push(Frame::Right(sp, e, op));
                        continue 'outer;
                    }
                    Some(Frame::Right(sp, l, op)) => {
                        let close = match self.c.punct(")") {
                            Ok(c) => c,
                            Err(d) => break 'outer Err(d),
                        };
                        e = IndexExpr { kind: IndexKind::Bin(op, Box::new(l), Box::new(e)), span: sp.to(close) };
                    }
                }
            }
        };
        self.depth = base;
        r
    }

    fn too_deep(&self) -> Diagnostic {
        Diagnostic::error("E0619", "index expression nested too deeply")
            .at(self.c.span(), "too deep")
            .note(format!("at most {MAX_DEPTH} levels, {MAX_NESTED} of them through {}(..) or slices", syntax::FLAT))
    }

    /// An index expression that does not start with `(`.
    fn atom(&mut self) -> PResult<IndexExpr> {
        if self.c.at_int() {
            let (v, sp) = self.c.int("an index expression")?;
            return Ok(IndexExpr { kind: IndexKind::Lit(v), span: sp });
        }
        let Some(Token { tok: Tok::Ident(w), span: at }) = self.c.peek() else { return Err(self.c.unexpected("an index expression")) };
        match self.c.tok_at(1) {
            Some(Tok::Punct("(")) => self.builtin(w, *at),
            Some(Tok::Punct("[")) => self.nested(|l| {
                let (array, _) = l.array_name()?;
                let indices = l.slots()?;
                Ok(IndexExpr { kind: IndexKind::Slice { array, indices }, span: at.to(l.c.prev_span()) })
            }),
            _ => {
                let (id, sp) = self.eintup_name()?;
                Ok(IndexExpr { kind: IndexKind::Var(id), span: sp })
            }
        }
    }

    /// One level of recursion through `FLAT(..)` or a slice's slots.
    fn nested(&mut self, f: impl FnOnce(&mut Self) -> PResult<IndexExpr>) -> PResult<IndexExpr> {
        if self.depth + 1 >= MAX_DEPTH || self.recursion >= MAX_NESTED {
            return Err(self.too_deep());
        }
        self.depth += 1;
        self.recursion += 1;
        let r = f(self);
        self.depth -= 1;
        self.recursion -= 1;
        r
    }

    /// `DIMS(..)`, `RANK(..)` or `FLAT(..)`; the cursor is at the name.
    fn builtin(&mut self, w: &str, at: Span) -> PResult<IndexExpr> {
        self.c.bump();
        let kind = match w {
            syntax::DIMS => IndexKind::Dims(self.dims_list()?),
            syntax::RANK => IndexKind::Rank(self.eintup_list()?),
            syntax::FLAT => {
                return self.nested(|l| {
                    l.c.punct("(")?;
                    let mut v = Vec::new();
                    if !l.c.eat(")") {
                        loop {
                            v.push(l.index_expr()?);
                            if l.c.eat(")") {
                                break;
                            }
                            l.c.punct(",")?;
                        }
                    }
                    Ok(IndexExpr { kind: IndexKind::Flat(v), span: at.to(l.c.prev_span()) })
                })
            }
            _ => {
                return Err(Diagnostic::error("E0616", format!("unknown index function `{w}`"))
                    .at(at, format!("expected {}", one_of([syntax::DIMS, syntax::RANK, syntax::FLAT]))))
            }
        };
        Ok(IndexExpr { kind, span: at.to(self.c.prev_span()) })
    }

    /// The operand of `const`: an integer, or a float as `text::float_text`
    /// writes it.
    fn constant(&mut self) -> PResult<OpKind> {
        if self.c.at_int() {
            return Ok(OpKind::ConstInt(self.c.int("a number")?.0));
        }
        Ok(OpKind::ConstFloat(self.c.float()?))
    }

    /// `INT<a:?, b:[2, 3]>`. The dims repeat the eintup's declaration (for
    /// readers); they must agree with it.
    fn sig(&mut self, m: &Module) -> PResult<SigType> {
        let dtype = self.dtype()?;
        self.c.punct("<")?;
        let mut eintups = Vec::new();
        if !self.c.eat(">") {
            loop {
                let (id, sp) = self.eintup_name()?;
                self.c.punct(":")?;
                let (rank, dims) = self.dims()?;
                // A placeholder (its line failed) has no name: already reported.
                if let Some(e) = m.eintups.get(id).filter(|e| !e.name.is_empty()) {
                    if e.dims != dims || (e.dims.is_none() && e.rank != rank) {
                        let sp = sp.to(self.c.prev_span());
                        return Err(Diagnostic::error("E0615", format!("signature type disagrees with the declaration of eintup `{}`", e.name))
                            .at(sp, format!("differs from the `{}` line", syntax::EINTUP))
                            .also(e.span, "declared here"));
                    }
                }
                eintups.push(id);
                if self.c.eat(">") {
                    break;
                }
                self.c.punct(",")?;
            }
        }
        Ok(SigType { dtype, eintups })
    }

    fn call_arg(&mut self) -> PResult<CallArg> {
        let Some(Token { tok: Tok::Ident(w), span }) = self.c.peek() else { return Err(self.c.unexpected("a call argument")) };
        if self.c.tok_at(1) != Some(&Tok::Punct("(")) {
            return Ok(CallArg::Array(self.array_name()?.0));
        }
        self.c.bump();
        match w.as_str() {
            syntax::DIMS => Ok(CallArg::Dims(self.dims_list()?)),
            syntax::RANK => Ok(CallArg::Rank(self.eintup_list()?)),
            syntax::TENSOR => {
                self.c.punct("(")?;
                self.c.word(syntax::DIMS)?;
                let list = self.dims_list()?;
                self.c.punct(")")?;
                Ok(CallArg::Tensor(list))
            }
            syntax::LITERAL => {
                self.c.punct("(")?;
                let lit = self.literal()?;
                self.c.punct(")")?;
                Ok(CallArg::Literal(lit))
            }
            _ => {
                let (d, r, t, l) = (syntax::DIMS, syntax::RANK, syntax::TENSOR, syntax::LITERAL);
                Err(Diagnostic::error("E0616", format!("unknown call-argument wrapper `{w}`"))
                    .at(*span, format!("expected `{d}(..)`, `{r}(..)`, `{t}({d}(..))` or `{l}(literal)`")))
            }
        }
    }

    /// A call literal: a string, a bare word, an integer or a float.
    fn literal(&mut self) -> PResult<Literal> {
        if self.c.at_int() {
            return Ok(Literal::Int(self.c.int("a literal")?.0));
        }
        match self.c.tok_at(0) {
            Some(Tok::Str(s)) => {
                self.c.bump();
                Ok(Literal::Str(s.clone()))
            }
            Some(Tok::Ident(w)) => {
                self.c.bump();
                Ok(Literal::Word(w.clone()))
            }
            _ => Ok(Literal::Float(self.c.float()?)),
        }
    }
}

/// The scope of a dynamic module's dims: its symbols, no variables.
struct SymScope<'a> {
    symbols: &'a HashMap<String, DimId>,
    depth: &'a mut usize,
}

impl IExprScope for SymScope<'_> {
    fn sym(&self, name: &str, at: Span) -> PResult<IExpr> {
        self.symbols
            .get(name)
            .map(|&d| IExpr::Sym(d))
            .ok_or_else(|| Diagnostic::error("E0608", format!("unknown symbol `%{name}`")).at(at, format!("not in the `{}(..)` line", syntax::SYMBOLS)))
    }
    fn var(&self, name: &str, at: Span) -> PResult<IExpr> {
        Err(Diagnostic::error("E0604", format!("unexpected `{name}`, expected a number, a `%` symbol or `(`")).at(at, "a dim has no variables"))
    }
    fn enter(&mut self, at: Span) -> PResult<()> {
        *self.depth += 1;
        if *self.depth > MAX_DEPTH {
            return Err(Diagnostic::error("E0619", "index expression nested too deeply").at(at, "too deep").note(format!("at most {MAX_DEPTH} levels")));
        }
        Ok(())
    }
    fn leave(&mut self) {
        *self.depth -= 1;
    }
}

#[cfg(test)]
mod tests;
