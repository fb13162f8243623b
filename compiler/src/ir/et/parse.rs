//! Parser for the textual `et` dialect: reads back exactly what
//! `print::module` writes (docs/ir-et.md describes the format).
//!
//! The format is line oriented, so the parser is too: every non-blank line
//! that does not start with `//` is lexed on its own and parsed by its first
//! word (`eintup`, `array`, `stmt`, `%N`, `}`, `call`, `outputs`). Names are
//! resolved against the `eintup`/`array` lines of the whole file, found in a
//! first pass, because an array position may read a later array
//! (`idx[b, :]`). Every diagnostic is located in the text (codes
//! E0601-E0619) and the parser never panics: recursion depth is bounded and
//! numbers are checked.
//!
//! Spans in the result point into the parsed text: an eintup or array at its
//! name on its declaration line, a statement at its header line, an op at its
//! line, index expressions at their own text.

use super::*;
use et_grammar::ast::{AssignOp, BinOp, ElemType, Literal};
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

/// Parses a printed `et` module.
pub fn parse_module(text: &str) -> Result<Module, Vec<Diagnostic>> {
    let mut diags = Vec::new();
    let mut lines = Vec::new();
    let mut offset = 0;
    for raw in text.split_inclusive('\n') {
        let start = offset;
        offset += raw.len();
        let body = raw.trim_end_matches(['\n', '\r']);
        let trimmed = body.trim_start();
        if trimmed.is_empty() || trimmed.starts_with("//") {
            continue;
        }
        let (toks, err) = lex_line(body, start);
        let broken = err.is_some();
        diags.extend(err);
        lines.push(LineToks { toks, end: start + body.len(), broken });

    }
    let names = declare(&lines, &mut diags);
    let mut p = ModuleParser {
        module: Module { eintups: vec![], arrays: vec![], stmts: vec![], call: None, outputs: vec![] },
        section: Section::Eintups,
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

// ---------------------------------------------------------------- lexer

#[derive(Clone, Debug, PartialEq)]
enum Tok {
    Ident(String),
    /// Unsigned integer digits; the sign is a separate `-` token so that
    /// `i64::MIN` can be read.
    Int(String),
    /// Float text without sign (`1.5`, `1e-7`).
    Float(String),
    Str(String),
    Punct(&'static str),
}

#[derive(Clone, Debug)]
struct Token {
    tok: Tok,
    span: Span,
}

struct LineToks {
    toks: Vec<Token>,
    /// Byte offset of the end of the line (for "unexpected end of line").
    end: usize,
    /// A lexical error was reported; `toks` holds the tokens before it.
    broken: bool,
}

/// Longest first, so `//^` is not read as `//` then `^`.
const PUNCTS: &[&str] = &["//^", "//", "+=", "[", "]", "(", ")", "<", ">", "{", "}", ",", ":", "=", "+", "-", "*", "%", "?", "."];

fn describe(t: &Tok) -> String {
    match t {
        Tok::Ident(s) => format!("`{s}`"),
        Tok::Int(s) | Tok::Float(s) => format!("number `{s}`"),
        Tok::Str(s) => format!("string {s:?}"),
        Tok::Punct(p) => format!("`{p}`"),
    }
}

/// The tokens of one line, up to the first lexical error if any.
fn lex_line(line: &str, base: usize) -> (Vec<Token>, Option<Diagnostic>) {
    let mut toks = Vec::new();
    let err = lex_into(line, base, &mut toks).err();
    (toks, err)
}

fn lex_into(line: &str, base: usize, toks: &mut Vec<Token>) -> Result<(), Diagnostic> {
    let mut i = 0;
    let bytes = line.as_bytes();
    while i < line.len() {
        let c = line[i..].chars().next().unwrap_or(' ');
        let start = i;
        if c.is_whitespace() {
            i += c.len_utf8();
        } else if c == '_' || c.is_alphabetic() {
            for ch in line[i..].chars() {
                if ch == '_' || ch.is_alphanumeric() {
                    i += ch.len_utf8();
                } else {
                    break;
                }
            }
            toks.push(Token { tok: Tok::Ident(line[start..i].to_string()), span: Span::new(base + start, base + i) });
        } else if c.is_ascii_digit() {
            let digits = |i: &mut usize| {
                while *i < bytes.len() && bytes[*i].is_ascii_digit() {
                    *i += 1;
                }
            };
            digits(&mut i);
            let mut float = false;
            if i + 1 < bytes.len() && bytes[i] == b'.' && bytes[i + 1].is_ascii_digit() {
                float = true;
                i += 1;
                digits(&mut i);
            }
            if i < bytes.len() && (bytes[i] == b'e' || bytes[i] == b'E') {
                let sign = usize::from(i + 1 < bytes.len() && (bytes[i + 1] == b'-' || bytes[i + 1] == b'+'));
                if i + 1 + sign < bytes.len() && bytes[i + 1 + sign].is_ascii_digit() {
                    float = true;
                    i += 1 + sign;
                    digits(&mut i);
                }
            }
            let span = Span::new(base + start, base + i);
            // Digits run into letters (`12abc`): one malformed number, not
            // a number and a name.
            if line[i..].chars().next().is_some_and(|ch| ch == '_' || ch.is_alphanumeric()) {
                let end = line[i..].find(|ch: char| !(ch == '_' || ch.is_alphanumeric())).map_or(line.len(), |k| i + k);
                return Err(Diagnostic::error("E0602", "malformed number").at(Span::new(base + start, base + end), "not a number"));
            }
            let text = line[start..i].to_string();
            if float {
                match text.parse::<f64>() {
                    Ok(v) if v.is_finite() => toks.push(Token { tok: Tok::Float(text), span }),
                    _ => return Err(Diagnostic::error("E0602", "number literal too large").at(span, "beyond f64")),
                }
            } else {
                toks.push(Token { tok: Tok::Int(text), span });
            }
        } else if c == '"' {
            let (s, len) = string_literal(&line[i..], base + i)?;
            i += len;
            toks.push(Token { tok: Tok::Str(s), span: Span::new(base + start, base + i) });
        } else if let Some(p) = PUNCTS.iter().find(|p| line[i..].starts_with(**p)) {
            i += p.len();
            toks.push(Token { tok: Tok::Punct(p), span: Span::new(base + start, base + i) });
        } else {
            let span = Span::new(base + start, base + start + c.len_utf8());
            return Err(Diagnostic::error("E0601", format!("unexpected character {c:?}")).at(span, "not part of the et dialect"));
        }
    }
    Ok(())
}

/// A string as Rust's `{:?}` prints it (the printer's format); returns the
/// value and the byte length consumed, quotes included.
fn string_literal(s: &str, base: usize) -> Result<(String, usize), Diagnostic> {
    let mut out = String::new();
    let mut chars = s.char_indices().skip(1);
    while let Some((k, c)) = chars.next() {
        match c {
            '"' => return Ok((out, k + 1)),
            '\\' => {
                let bad = |k: usize| Diagnostic::error("E0603", "invalid escape in string literal").at(Span::new(base + k, base + k + 2), "escape");
                let Some((_, e)) = chars.next() else { break };
                match e {
                    'n' => out.push('\n'),
                    'r' => out.push('\r'),
                    't' => out.push('\t'),
                    '0' => out.push('\0'),
                    '\\' | '"' | '\'' => out.push(e),
                    'u' => {
                        if chars.next().map(|x| x.1) != Some('{') {
                            return Err(bad(k));
                        }
                        let mut hex = String::new();
                        loop {
                            match chars.next() {
                                Some((_, '}')) => break,
                                Some((_, h)) if h.is_ascii_hexdigit() && hex.len() < 6 => hex.push(h),
                                _ => return Err(bad(k)),
                            }
                        }
                        match u32::from_str_radix(&hex, 16).ok().and_then(char::from_u32) {
                            Some(ch) => out.push(ch),
                            None => return Err(bad(k)),
                        }
                    }
                    _ => return Err(bad(k)),
                }
            }
            c => out.push(c),
        }
    }
    Err(Diagnostic::error("E0603", "unterminated string literal").at(Span::new(base, base + 1), "opened here"))
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
            Some(Tok::Ident(w)) if w == "eintup" => (false, &mut ne),
            Some(Tok::Ident(w)) if w == "array" => (true, &mut na),
            _ => continue,
        };
        let id = *count;
        *count += 1;
        let Some(Token { tok: Tok::Ident(name), span }) = l.toks.get(1) else { continue };
        if let Some(prev) = first.get(&(is_array, name.clone())) {
            let kind = if is_array { "array" } else { "eintup" };
            diags.push(
                Diagnostic::error("E0607", format!("{kind} `{name}` is declared twice"))
                    .at(*span, "second declaration")
                    .also(*prev, "first declaration"),
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
    Eintups,
    Arrays,
    Stmts,
    Call,
    Outputs,
}

impl Section {
    fn word(self) -> &'static str {
        match self {
            Section::Eintups => "eintup",
            Section::Arrays => "array",
            Section::Stmts => "stmt",
            Section::Call => "call",
            Section::Outputs => "outputs",
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

type PResult<T> = Result<T, Diagnostic>;

impl ModuleParser {
    fn line(&mut self, l: &LineToks, names: &Names) {
        let Some(first) = l.toks.first() else { return };
        let word = match &first.tok {
            Tok::Ident(w) => w.as_str(),
            Tok::Punct(p) => p,
            _ => "",
        };
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
                    Diagnostic::error("E0614", "statement block is not closed")
                        .at(b.header, "opened here")
                        .also(first.span, "next line that is not an op"),
                );
                self.module.stmts.push(b.stmt);
            }
        }
        if l.broken {
            // Already reported by the lexer; only keep numbering aligned.
            self.recover(word);
            return;
        }
        let mut c = Cursor { toks: &l.toks, pos: 0, end: l.end, names, depth: 0, recursion: 0 };
        let r = match word {
            "eintup" => self.ordered(Section::Eintups, first.span).and_then(|_| self.eintup(&mut c)),
            "array" => self.ordered(Section::Arrays, first.span).and_then(|_| self.array(&mut c)),
            "stmt" => self.ordered(Section::Stmts, first.span).and_then(|_| self.stmt_header(&mut c)),
            "%" => self.op(&mut c),
            "}" => self.close(&mut c),
            "call" => self.ordered(Section::Call, first.span).and_then(|_| self.call(&mut c)),
            "outputs" => self.ordered(Section::Outputs, first.span).and_then(|_| self.outputs(&mut c)),
            _ => Err(Diagnostic::error("E0605", format!("unexpected {} at the start of a line", describe(&first.tok)))
                .at(first.span, "expected `eintup`, `array`, `stmt`, `%N = ...`, `}`, `call` or `outputs`")),
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
            return Err(Diagnostic::error("E0606", format!("`{}` line after the `{}` section", s.word(), self.section.word()))
                .at(at, "out of order")
                .note("lines come in this order: eintup, array, stmt blocks, call, outputs"));
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
            "eintup" => self.module.eintups.push(Eintup { name: String::new(), rank: None, dims: None, span: dummy }),
            "array" => self.module.arrays.push(Array {
                name: String::new(),
                dtype: ElemType::Int,
                positions: vec![],
                attrs: vec![],
                def_stmt: 0,
                is_input: false,
                span: dummy,
            }),
            "stmt" => self.skipping = true,
            "%" => {
                if let Some(b) = self.block.as_mut() {
                    b.stmt.ops.push(Op { kind: OpKind::ConstInt(0), ty: SigType { dtype: ElemType::Int, eintups: vec![] }, span: dummy });
                }
            }
            _ => {}
        }
    }

    fn eintup(&mut self, c: &mut Cursor) -> PResult<()> {
        c.word("eintup")?;
        let (name, span) = c.ident("an eintup name")?;
        c.punct(":")?;
        let (rank, dims) = c.dims()?;
        c.finish()?;
        self.module.eintups.push(Eintup { name, rank, dims, span });
        Ok(())
    }

    fn array(&mut self, c: &mut Cursor) -> PResult<()> {
        c.word("array")?;
        let (name, span) = c.ident("an array name")?;
        c.punct(":")?;
        let dtype = c.dtype()?;
        c.punct("[")?;
        let mut positions = Vec::new();
        if !c.eat("]") {
            loop {
                let expr = c.index_expr()?;
                c.punct(":")?;
                let (rank, dims) = c.dims()?;
                positions.push(Position { expr, rank, dims });
                if c.eat("]") {
                    break;
                }
                c.punct(",")?;
            }
        }
        let mut def_stmt = None;
        let mut is_input = false;
        let mut attrs = Vec::new();
        while let Some(t) = c.peek() {
            let t = t.clone();
            match &t.tok {
                Tok::Ident(w) if w == "def" => {
                    c.next();
                    c.punct("=")?;
                    let (n, sp) = c.usize_lit()?;
                    if def_stmt.replace(n).is_some() {
                        return Err(Diagnostic::error("E0617", format!("array `{name}` has two `def=` flags")).at(sp.to(t.span), "second one"));
                    }
                }
                Tok::Ident(w) if w == "input" => {
                    c.next();
                    if std::mem::replace(&mut is_input, true) {
                        return Err(Diagnostic::error("E0617", format!("array `{name}` has two `input` flags")).at(t.span, "second one"));
                    }
                }
                Tok::Ident(w) if w == "range" => {
                    c.next();
                    c.punct("=")?;
                    c.punct("[")?;
                    let lo = c.bound()?;
                    c.punct(",")?;
                    let hi = c.bound()?;
                    c.punct(")")?;
                    attrs.push(Attr::Range { lo, hi });
                }
                other => return Err(c.unexpected_tok(other, t.span, "`def=N`, `input`, `range=[lo, hi)` or end of line")),
            }
        }
        let Some(def_stmt) = def_stmt else {
            return Err(Diagnostic::error("E0617", format!("array `{name}` has no `def=N` flag"))
                .at(Span::new(c.end, c.end), "expected `def=N` (the defining statement)"));
        };
        self.module.arrays.push(Array { name, dtype, positions, attrs, def_stmt, is_input, span });
        Ok(())
    }

    fn stmt_header(&mut self, c: &mut Cursor) -> PResult<()> {
        let start = c.word("stmt")?;
        let (n, nspan) = c.usize_lit()?;
        let expect = self.module.stmts.len();
        if n != expect {
            return Err(Diagnostic::error("E0610", format!("statement numbered {n}, expected {expect}"))
                .at(nspan, "statements are numbered from 0 in order"));
        }
        let (array, _) = c.array_name()?;
        let indices = c.slots()?;
        let op = if c.eat("=") {
            AssignOp::Assign
        } else if c.eat("+=") {
            AssignOp::AddAssign
        } else {
            return Err(c.unexpected("`=` or `+=`"));
        };
        let (result, result_span) = c.value_ref()?;
        c.word("vars")?;
        let vars = c.eintup_list()?;
        let close = c.punct("{")?;
        c.finish()?;
        let header = start.to(close);
        self.block = Some(Block {
            stmt: Stmt { array, indices, op, vars, ops: vec![], result, span: header },
            header,
            result_span,
        });
        Ok(())
    }

    fn op(&mut self, c: &mut Cursor) -> PResult<()> {
        let Some(block) = self.block.as_mut() else {
            let t = c.peek().map_or(Span::new(c.end, c.end), |t| t.span);
            return Err(Diagnostic::error("E0614", "op line outside a statement block").at(t, "expected a `stmt ... {` line before it"));
        };
        let (k, kspan) = c.value_ref()?;
        let expect = block.stmt.ops.len();
        if k != expect {
            return Err(Diagnostic::error("E0611", format!("op numbered %{k}, expected %{expect}")).at(kspan, "ops are numbered from %0 in order"));
        }
        c.punct("=")?;
        let (kw, kwspan) = c.ident("an op name")?;
        let operand = |c: &mut Cursor| -> PResult<ValueId> {
            let (v, sp) = c.value_ref()?;
            if v >= k {
                return Err(Diagnostic::error("E0612", format!("operand %{v} is not defined before %{k}"))
                    .at(sp, "an operand must name an earlier op of the statement"));
            }
            Ok(v)
        };
        let kind = match kw.as_str() {
            "const" => c.constant()?,
            "rank" => OpKind::Rank(c.eintup_list()?),
            "dims_at" => {
                let l = c.eintup_list()?;
                c.punct("[")?;
                let t = c.index_expr()?;
                c.punct("]")?;
                OpKind::DimsAt(l, t)
            }
            "read" => {
                let (array, _) = c.array_name()?;
                OpKind::Read { array, indices: c.slots()? }
            }
            "random" => {
                let lo = operand(c)?;
                c.punct(",")?;
                let hi = operand(c)?;
                c.punct(",")?;
                OpKind::Random { lo, hi, dtype: c.dtype()? }
            }
            "neg" => OpKind::Neg(operand(c)?),
            other => {
                let Some(op) = binop_by_name(other) else {
                    return Err(Diagnostic::error("E0616", format!("unknown op `{other}`"))
                        .at(kwspan, "not an et op")
                        .note("ops: const, rank, dims_at, read, random, neg, add, sub, mul, div, floordiv, ceildiv, mod"));
                };
                let a = operand(c)?;
                c.punct(",")?;
                let b = operand(c)?;
                OpKind::Binary(op, a, b)
            }
        };
        c.punct(":")?;
        let ty = c.sig(&self.module)?;
        let span = kspan.to(c.prev_span());
        c.finish()?;
        block.stmt.ops.push(Op { kind, ty, span });
        Ok(())
    }

    fn close(&mut self, c: &mut Cursor) -> PResult<()> {
        let sp = c.punct("}")?;
        c.finish()?;
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

    fn call(&mut self, c: &mut Cursor) -> PResult<()> {
        let start = c.word("call")?;
        let (mut func, _) = c.ident("a function name")?;
        while c.eat(".") {
            func.push('.');
            func.push_str(&c.ident("a function name")?.0);
        }
        c.punct("(")?;
        let mut args = Vec::new();
        if !c.eat(")") {
            loop {
                let key = match (c.peek().map(|t| &t.tok), c.peek_at(1).map(|t| &t.tok)) {
                    (Some(Tok::Ident(k)), Some(Tok::Punct("="))) => {
                        let k = k.clone();
                        c.next();
                        c.next();
                        Some(k)
                    }
                    _ => None,
                };
                args.push((key, c.call_arg()?));
                if c.eat(")") {
                    break;
                }
                c.punct(",")?;
            }
        }
        let span = start.to(c.prev_span());
        c.finish()?;
        self.module.call = Some(FrameworkCall { func, args, span });
        Ok(())
    }

    fn outputs(&mut self, c: &mut Cursor) -> PResult<()> {
        c.word("outputs")?;
        self.outputs_seen = true;
        let mut outs = vec![c.array_name()?.0];
        while c.eat(",") {
            outs.push(c.array_name()?.0);
        }
        c.finish()?;
        self.module.outputs = outs;
        Ok(())
    }
}

fn binop_by_name(s: &str) -> Option<BinOp> {
    use BinOp::*;
    [Add, Sub, Mul, Div, FloorDiv, CeilDiv, Mod].into_iter().find(|op| super::print::binop_name(*op) == s)
}

// ------------------------------------------------------- line cursor

struct Cursor<'a> {
    toks: &'a [Token],
    pos: usize,
    end: usize,
    names: &'a Names,
    /// Nesting of index expressions (parentheses and recursion).
    depth: usize,
    /// Nesting through `FLAT(..)` and slices only.
    recursion: usize,
}

impl<'a> Cursor<'a> {
    fn peek(&self) -> Option<&'a Token> {
        self.toks.get(self.pos)
    }

    fn peek_at(&self, k: usize) -> Option<&'a Token> {
        self.toks.get(self.pos + k)
    }

    fn next(&mut self) -> Option<&'a Token> {
        let t = self.toks.get(self.pos);
        self.pos += 1;
        t
    }

    fn prev_end(&self) -> usize {
        self.pos.checked_sub(1).and_then(|k| self.toks.get(k)).map_or(self.end, |t| t.span.end)
    }

    /// An empty span at the end of the last consumed token.
    fn prev_span(&self) -> Span {
        Span::new(self.prev_end(), self.prev_end())
    }

    fn unexpected_tok(&self, t: &Tok, span: Span, expected: &str) -> Diagnostic {
        Diagnostic::error("E0604", format!("unexpected {}, expected {expected}", describe(t))).at(span, format!("expected {expected}"))
    }

    fn unexpected(&self, expected: &str) -> Diagnostic {
        match self.peek() {
            Some(t) => self.unexpected_tok(&t.tok, t.span, expected),
            None => Diagnostic::error("E0604", format!("unexpected end of line, expected {expected}"))
                .at(Span::new(self.end, self.end), format!("expected {expected}")),
        }
    }

    fn is_punct(&self, p: &str) -> bool {
        matches!(self.peek(), Some(Token { tok: Tok::Punct(q), .. }) if *q == p)
    }

    fn eat(&mut self, p: &str) -> bool {
        let yes = self.is_punct(p);
        if yes {
            self.pos += 1;
        }
        yes
    }

    fn punct(&mut self, p: &str) -> PResult<Span> {
        if self.is_punct(p) {
            Ok(self.next().map_or(Span::default(), |t| t.span))
        } else {
            Err(self.unexpected(&format!("`{p}`")))
        }
    }

    fn word(&mut self, w: &str) -> PResult<Span> {
        match self.peek() {
            Some(Token { tok: Tok::Ident(x), span }) if x == w => {
                self.pos += 1;
                Ok(*span)
            }
            _ => Err(self.unexpected(&format!("`{w}`"))),
        }
    }

    fn ident(&mut self, what: &str) -> PResult<(String, Span)> {
        match self.peek() {
            Some(Token { tok: Tok::Ident(x), span }) => {
                self.pos += 1;
                Ok((x.clone(), *span))
            }
            _ => Err(self.unexpected(what)),
        }
    }

    fn finish(&self) -> PResult<()> {
        match self.peek() {
            None => Ok(()),
            Some(_) => Err(self.unexpected("end of line")),
        }
    }

    fn eintup_name(&mut self) -> PResult<(EintupId, Span)> {
        let (n, sp) = self.ident("an eintup name")?;
        match self.names.eintups.get(&n) {
            Some(id) => Ok((*id, sp)),
            None => Err(Diagnostic::error("E0608", format!("unknown eintup `{n}`")).at(sp, "no `eintup` line declares it")),
        }
    }

    fn array_name(&mut self) -> PResult<(ArrayId, Span)> {
        let (n, sp) = self.ident("an array name")?;
        match self.names.arrays.get(&n) {
            Some(id) => Ok((*id, sp)),
            None => Err(Diagnostic::error("E0609", format!("unknown array `{n}`")).at(sp, "no `array` line declares it")),
        }
    }

    /// `(a, b, ...)`, possibly empty.
    fn eintup_list(&mut self) -> PResult<Vec<EintupId>> {
        self.punct("(")?;
        let mut v = Vec::new();
        if self.eat(")") {
            return Ok(v);
        }
        loop {
            v.push(self.eintup_name()?.0);
            if self.eat(")") {
                return Ok(v);
            }
            self.punct(",")?;
        }
    }

    /// An integer with optional leading `-`.
    fn int_lit(&mut self) -> PResult<(i64, Span)> {
        let neg = self.is_punct("-");
        let start = self.peek().map(|t| t.span);
        if neg {
            self.pos += 1;
        }
        match self.peek() {
            Some(Token { tok: Tok::Int(d), span }) => {
                self.pos += 1;
                let sp = start.map_or(*span, |s| s.to(*span));
                let text = if neg { format!("-{d}") } else { d.clone() };
                text.parse::<i64>()
                    .map(|v| (v, sp))
                    .map_err(|_| Diagnostic::error("E0602", "integer literal too large").at(sp, "beyond signed 64 bits"))
            }
            _ => Err(self.unexpected("an integer")),
        }
    }

    fn usize_lit(&mut self) -> PResult<(usize, Span)> {
        match self.peek() {
            Some(Token { tok: Tok::Int(d), span }) => {
                self.pos += 1;
                d.parse::<usize>().map(|v| (v, *span)).map_err(|_| Diagnostic::error("E0602", "integer literal too large").at(*span, "too large"))
            }
            _ => Err(self.unexpected("a number")),
        }
    }

    /// `%N`.
    fn value_ref(&mut self) -> PResult<(ValueId, Span)> {
        let start = self.punct("%")?;
        let (n, sp) = self.usize_lit()?;
        Ok((n, start.to(sp)))
    }

    fn dtype(&mut self) -> PResult<DType> {
        let (w, sp) = self.ident("`INT` or `FLOAT`")?;
        match w.as_str() {
            "INT" => Ok(ElemType::Int),
            "FLOAT" => Ok(ElemType::Float),
            _ => Err(Diagnostic::error("E0618", format!("unknown element type `{w}`")).at(sp, "expected `INT` or `FLOAT`")),
        }
    }

    /// `?` (unknown), `?R` (rank R, dims unknown) or `[d1, ...]` (static).
    fn dims(&mut self) -> PResult<(Option<usize>, Option<Vec<i64>>)> {
        if self.eat("?") {
            if matches!(self.peek(), Some(Token { tok: Tok::Int(_), .. })) {
                return Ok((Some(self.usize_lit()?.0), None));
            }
            return Ok((None, None));
        }
        if !self.is_punct("[") {
            return Err(self.unexpected("`?`, `?RANK` or `[dims]`"));
        }
        self.pos += 1;
        let mut d = Vec::new();
        if !self.eat("]") {
            loop {
                d.push(self.int_lit()?.0);
                if self.eat("]") {
                    break;
                }
                self.punct(",")?;
            }
        }
        Ok((Some(d.len()), Some(d)))
    }

    /// `[lo, hi)` bound: an integer or `DIMS(list)`.
    fn bound(&mut self) -> PResult<Bound> {
        if matches!(self.peek(), Some(Token { tok: Tok::Ident(w), .. }) if w == "DIMS") {
            self.pos += 1;
            return Ok(Bound::DimsAt(self.eintup_list()?));
        }
        Ok(Bound::Int(self.int_lit()?.0))
    }

    /// `[slot, ...]` where a slot is `:` or an index expression.
    fn slots(&mut self) -> PResult<Vec<IndexSlot>> {
        self.punct("[")?;
        let mut v = Vec::new();
        if self.eat("]") {
            return Ok(v);
        }
        loop {
            if self.is_punct(":") {
                v.push(IndexSlot::Colon(self.punct(":")?));
            } else {
                v.push(IndexSlot::Expr(self.index_expr()?));
            }
            if self.eat("]") {
                return Ok(v);
            }
            self.punct(",")?;
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
            while self.is_punct("(") {
                if base + stack.len() >= MAX_DEPTH {
                    break 'outer Err(self.too_deep());
                }
                let sp = self.next().map_or(Span::default(), |t| t.span);
                stack.push(Frame::Open(sp));
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
                        let op = match self.peek() {
                            Some(Token { tok: Tok::Punct(p), .. }) if index_op(p).is_some() => index_op(p),
                            _ => None,
                        };
                        let Some(op) = op else { break 'outer Err(self.unexpected("an index operator (`+ - * // //^ %`)")) };
                        self.pos += 1;
                        stack.push(Frame::Right(sp, e, op));
                        continue 'outer;
                    }
                    Some(Frame::Right(sp, l, op)) => {
                        let close = match self.punct(")") {
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
        let sp = self.peek().map_or(Span::new(self.end, self.end), |t| t.span);
        Diagnostic::error("E0619", "index expression nested too deeply")
            .at(sp, "too deep")
            .note(format!("at most {MAX_DEPTH} levels, {MAX_NESTED} of them through FLAT(..) or slices"))
    }

    /// An index expression that does not start with `(`.
    fn atom(&mut self) -> PResult<IndexExpr> {
        let Some(t) = self.peek() else { return Err(self.unexpected("an index expression")) };
        match &t.tok {
            Tok::Punct("-") | Tok::Int(_) => {
                let (v, sp) = self.int_lit()?;
                Ok(IndexExpr { kind: IndexKind::Lit(v), span: sp })
            }
            Tok::Ident(w) => {
                let next = self.peek_at(1).map(|t| &t.tok);
                if next == Some(&Tok::Punct("(")) {
                    self.builtin(w, t.span)
                } else if next == Some(&Tok::Punct("[")) {
                    self.nested(|c| {
                        let (array, _) = c.array_name()?;
                        let indices = c.slots()?;
                        Ok(IndexExpr { kind: IndexKind::Slice { array, indices }, span: t.span.to(c.prev_span()) })
                    })
                } else {
                    let (id, sp) = self.eintup_name()?;
                    Ok(IndexExpr { kind: IndexKind::Var(id), span: sp })
                }
            }
            _ => Err(self.unexpected("an index expression")),
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
        self.pos += 1;
        let kind = match w {
            "DIMS" => IndexKind::Dims(self.eintup_list()?),
            "RANK" => IndexKind::Rank(self.eintup_list()?),
            "FLAT" => {
                return self.nested(|c| {
                    c.punct("(")?;
                    let mut v = Vec::new();
                    if !c.eat(")") {
                        loop {
                            v.push(c.index_expr()?);
                            if c.eat(")") {
                                break;
                            }
                            c.punct(",")?;
                        }
                    }
                    Ok(IndexExpr { kind: IndexKind::Flat(v), span: at.to(c.prev_span()) })
                })
            }
            _ => return Err(Diagnostic::error("E0616", format!("unknown index function `{w}`")).at(at, "expected `DIMS`, `RANK` or `FLAT`")),
        };
        Ok(IndexExpr { kind, span: at.to(self.prev_span()) })
    }

    /// The operand of `const`: an integer, a float, `inf` or `NaN`, any of
    /// them with a leading `-` (the printer uses Rust's `{:?}` for floats).
    fn constant(&mut self) -> PResult<OpKind> {
        let neg = self.is_punct("-");
        let at = self.pos;
        if neg {
            self.pos += 1;
        }
        let sign = if neg { -1.0 } else { 1.0 };
        match self.peek().map(|t| &t.tok) {
            Some(Tok::Float(f)) => {
                self.pos += 1;
                Ok(OpKind::ConstFloat(sign * f.parse::<f64>().unwrap_or(f64::NAN)))
            }
            Some(Tok::Ident(w)) if w == "inf" => {
                self.pos += 1;
                Ok(OpKind::ConstFloat(sign * f64::INFINITY))
            }
            Some(Tok::Ident(w)) if w == "NaN" => {
                self.pos += 1;
                Ok(OpKind::ConstFloat(f64::NAN))
            }
            Some(Tok::Int(_)) => {
                self.pos = at;
                Ok(OpKind::ConstInt(self.int_lit()?.0))
            }
            _ => Err(self.unexpected("a number")),
        }
    }

    /// `INT<a:?, b:[2, 3]>`. The dims repeat the eintup's declaration (for
    /// readers); they must agree with it.
    fn sig(&mut self, m: &Module) -> PResult<SigType> {
        let dtype = self.dtype()?;
        self.punct("<")?;
        let mut eintups = Vec::new();
        if !self.eat(">") {
            loop {
                let (id, sp) = self.eintup_name()?;
                self.punct(":")?;
                let (rank, dims) = self.dims()?;
                // A placeholder (its line failed) has no name: already reported.
                if let Some(e) = m.eintups.get(id).filter(|e| !e.name.is_empty()) {
                    if e.dims != dims || (e.dims.is_none() && e.rank != rank) {
                        let sp = sp.to(Span::new(self.prev_end(), self.prev_end()));
                        return Err(Diagnostic::error("E0615", format!("signature type disagrees with the declaration of eintup `{}`", e.name))
                            .at(sp, "differs from the `eintup` line")
                            .also(e.span, "declared here"));
                    }
                }
                eintups.push(id);
                if self.eat(">") {
                    break;
                }
                self.punct(",")?;
            }
        }
        Ok(SigType { dtype, eintups })
    }

    fn call_arg(&mut self) -> PResult<CallArg> {
        let Some(t) = self.peek() else { return Err(self.unexpected("a call argument")) };
        let Tok::Ident(w) = &t.tok else { return Err(self.unexpected("a call argument")) };
        if self.peek_at(1).map(|t| &t.tok) != Some(&Tok::Punct("(")) {
            return Ok(CallArg::Array(self.array_name()?.0));
        }
        self.pos += 1;
        match w.as_str() {
            "DIMS" => Ok(CallArg::Dims(self.eintup_list()?)),
            "RANK" => Ok(CallArg::Rank(self.eintup_list()?)),
            "TENSOR" => {
                self.punct("(")?;
                self.word("DIMS")?;
                let l = self.eintup_list()?;
                self.punct(")")?;
                Ok(CallArg::Tensor(l))
            }
            "L" => {
                self.punct("(")?;
                let lit = self.literal()?;
                self.punct(")")?;
                Ok(CallArg::Literal(lit))
            }
            _ => Err(Diagnostic::error("E0616", format!("unknown call-argument wrapper `{w}`"))
                .at(t.span, "expected `DIMS(..)`, `RANK(..)`, `TENSOR(DIMS(..))` or `L(literal)`")),
        }
    }

    fn literal(&mut self) -> PResult<Literal> {
        match self.peek().map(|t| &t.tok) {
            Some(Tok::Str(s)) => {
                self.pos += 1;
                Ok(Literal::Str(s.clone()))
            }
            Some(Tok::Ident(w)) => {
                self.pos += 1;
                Ok(Literal::Word(w.clone()))
            }
            Some(Tok::Float(_)) => self.float_lit(),
            Some(Tok::Punct("-")) if matches!(self.peek_at(1).map(|t| &t.tok), Some(Tok::Float(_))) => self.float_lit(),
            _ => Ok(Literal::Int(self.int_lit()?.0)),
        }
    }

    fn float_lit(&mut self) -> PResult<Literal> {
        let neg = self.eat("-");
        match self.next().map(|t| &t.tok) {
            Some(Tok::Float(f)) => {
                let v = f.parse::<f64>().unwrap_or(f64::NAN);
                Ok(Literal::Float(if neg { -v } else { v }))
            }
            _ => {
                self.pos -= 1;
                Err(self.unexpected("a float"))
            }
        }
    }
}

fn index_op(p: &str) -> Option<IndexOp> {
    Some(match p {
        "+" => IndexOp::Add,
        "-" => IndexOp::Sub,
        "*" => IndexOp::Mul,
        "//" => IndexOp::FloorDiv,
        "//^" => IndexOp::CeilDiv,
        "%" => IndexOp::Mod,
        _ => return None,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ir::et::print;

    const BASE: &str = "\
eintup i : ?
array x : INT [i : ?] def=0 input range=[0, 10)
stmt 0 x[i] = %2 vars(i) {
  %0 = const 0 : INT<>
  %1 = const 10 : INT<>
  %2 = random %0, %1, INT : INT<i:?>
}
outputs x
";

    /// The first diagnostic's code and the text under its primary label.
    fn first_error(text: &str) -> (&'static str, String) {
        match parse_module(text) {
            Ok(m) => panic!("accepted:\n{text}\nas {m:?}"),
            Err(d) => {
                let sp = d[0].primary_span().expect("located");
                (d[0].code, text[sp.range()].to_string())
            }
        }
    }

    fn edit(from: &str, to: &str) -> String {
        assert!(BASE.contains(from), "{from}");
        BASE.replacen(from, to, 1)
    }

    #[test]
    fn base_parses_with_expected_content() {
        let m = parse_module(BASE).expect("parses");
        assert_eq!(m.eintups.len(), 1);
        assert_eq!(m.arrays[0].attrs, vec![Attr::Range { lo: Bound::Int(0), hi: Bound::Int(10) }]);
        assert!(m.arrays[0].is_input);
        assert_eq!(m.stmts[0].ops[2].kind, OpKind::Random { lo: 0, hi: 1, dtype: ElemType::Int });
        assert_eq!(m.stmts[0].result, 2);
        assert_eq!(m.outputs, vec![0]);
        assert_eq!(print::module(&m), BASE);
    }

    #[test]
    fn comments_and_blank_lines_are_ignored() {
        let text = format!("// RUN: etopt %s | FileCheck %s\n\n{}  // CHECK: x\n", BASE.replace("stmt 0", "\n// a comment\nstmt 0"));
        let m = parse_module(&text).expect("parses");
        assert_eq!(print::module(&m), BASE);
        // Spans point into the commented text.
        assert_eq!(&text[m.eintups[0].span.range()], "i");
        assert_eq!(&text[m.stmts[0].ops[1].span.range()], "%1 = const 10 : INT<>");
    }

    /// Every line form and op; reprinted byte for byte.
    const ALL: &str = r#"eintup a : ?
eintup b : ?2
eintup c : [2, 0]
eintup d : []
array x : INT [a : ?, (b + 1) : ?2] def=0 input range=[-5, 7) range=[0, DIMS(c, d))
array y : FLOAT [FLAT(a, b) : ?, ((RANK(b) * DIMS(c)) //^ 2) : [3, 1]] def=1
array z : FLOAT [] def=2
stmt 0 x[a, (b + 1)] = %3 vars(a, b) {
  %0 = const -5 : INT<>
  %1 = const 7 : INT<>
  %2 = random %0, %1, INT : INT<a:?, b:?2>
  %3 = neg %2 : INT<a:?, b:?2>
}
stmt 1 y[FLAT(a, b), ((RANK(b) * DIMS(c)) //^ 2)] += %11 vars(a, b) {
  %0 = const -0.0 : FLOAT<>
  %1 = const 1e20 : FLOAT<>
  %2 = const inf : FLOAT<>
  %3 = const -9223372036854775808 : INT<>
  %4 = rank(a, b) : INT<>
  %5 = dims_at(c)[(a % 2)] : INT<a:?>
  %6 = read x[a, :] : INT<a:?>
  %7 = read y[x[a, :], (((a // 2) - 3) + -1)] : FLOAT<a:?, c:[2, 0]>
  %8 = add %0, %1 : FLOAT<>
  %9 = sub %8, %2 : FLOAT<>
  %10 = mul %9, %3 : FLOAT<>
  %11 = div %10, %4 : FLOAT<d:[]>
}
stmt 2 z[] = %3 vars() {
  %0 = const 0.1 : FLOAT<>
  %1 = floordiv %0, %0 : FLOAT<>
  %2 = ceildiv %1, %0 : FLOAT<>
  %3 = mod %2, %1 : FLOAT<>
}
call tf.nn.f(x, k=DIMS(a, b), r=RANK(c), t=TENSOR(DIMS(a)), s=L("q\"uo\\te\n"), n=L(-1), f=L(-2.5), g=L(1e-7), w=L(True))
outputs z, y
"#;

    #[test]
    fn every_form_round_trips() {
        let m = parse_module(ALL).unwrap_or_else(|d| panic!("{}", d.iter().map(|d| d.render("all", ALL)).collect::<String>()));
        assert_eq!(print::module(&m), ALL);
        assert_eq!((m.eintups[1].rank, &m.eintups[1].dims), (Some(2), &None));
        assert_eq!((m.eintups[2].rank, &m.eintups[2].dims), (Some(2), &Some(vec![2, 0])));
        assert_eq!((m.eintups[3].rank, &m.eintups[3].dims), (Some(0), &Some(vec![])));
        let s1 = &m.stmts[1];
        assert_eq!(s1.op, AssignOp::AddAssign);
        assert!(matches!(s1.ops[0].kind, OpKind::ConstFloat(f) if f == 0.0 && f.is_sign_negative()));
        assert_eq!(s1.ops[1].kind, OpKind::ConstFloat(1e20));
        assert_eq!(s1.ops[2].kind, OpKind::ConstFloat(f64::INFINITY));
        assert_eq!(s1.ops[3].kind, OpKind::ConstInt(i64::MIN));
        assert_eq!(s1.ops[11].kind, OpKind::Binary(BinOp::Div, 10, 4));
        let call = m.call.as_ref().expect("call");
        assert_eq!(call.func, "tf.nn.f");
        assert_eq!(call.args[4], (Some("s".into()), CallArg::Literal(Literal::Str("q\"uo\\te\n".into()))));
        assert_eq!(call.args[6].1, CallArg::Literal(Literal::Float(-2.5)));
        assert_eq!(call.args[8].1, CallArg::Literal(Literal::Word("True".into())));
        assert_eq!(m.outputs, vec![2, 1]);
        // y's first position reads x, declared above; the read in stmt 1
        // slices x: ids resolve regardless of order.
        let OpKind::Read { array, indices } = &s1.ops[7].kind else { panic!() };
        assert_eq!(*array, 1);
        assert!(matches!(&indices[0], IndexSlot::Expr(IndexExpr { kind: IndexKind::Slice { array: 0, .. }, .. })));
        assert!(matches!(&indices[1], IndexSlot::Expr(IndexExpr { kind: IndexKind::Bin(IndexOp::Add, _, r), .. }) if r.kind == IndexKind::Lit(-1)));
    }

    #[test]
    fn each_error_code_is_located() {
        let deep = format!("array x : INT [{}i{} : ?] def=0", "(".repeat(600), " + 1)".repeat(600));
        let cases: Vec<(String, &str, &str)> = vec![
            (edit("eintup i : ?", "eintup i : $"), "E0601", "$"),
            (edit("const 10", "const 12abc"), "E0602", "12abc"),
            (edit("const 10", "const 99999999999999999999"), "E0602", "99999999999999999999"),
            (edit("const 10", "const 1e999"), "E0602", "1e999"),
            (format!("{BASE}call f(L(\"abc)\n"), "E0603", "\""),
            (format!("{BASE}call f(L(\"a\\qb\"))\n"), "E0603", "\\q"),
            (edit("eintup i : ?", "eintup i ?"), "E0604", "?"),
            (edit("%2 = random %0, %1, INT : INT<i:?>", "%2 = random %0, %1, INT : INT<i:?> extra"), "E0604", "extra"),
            (edit("outputs x", "bogus x"), "E0605", "bogus"),
            (format!("{BASE}eintup j : ?\n"), "E0606", "eintup"),
            (format!("{BASE}outputs x\n"), "E0606", "outputs"),
            (edit("eintup i : ?", "eintup i : ?\neintup i : []"), "E0607", "i"),
            (edit("[i : ?]", "[j : ?]"), "E0608", "j"),
            (edit("outputs x", "outputs q"), "E0609", "q"),
            (edit("stmt 0", "stmt 1"), "E0610", "1"),
            (edit("%0 = const 0", "%1 = const 0"), "E0611", "%1"),
            (edit("random %0, %1", "random %0, %2"), "E0612", "%2"),
            (edit("= %2 vars", "= %5 vars"), "E0613", "%5"),
            (edit("}\n", ""), "E0614", "stmt 0 x[i] = %2 vars(i) {"),
            (edit("stmt 0 x[i] = %2 vars(i) {\n", ""), "E0614", "%"),
            (format!("{BASE}}}\n"), "E0614", "}"),
            (edit("INT<i:?>", "INT<i:[2]>"), "E0615", "i:[2]"),
            (edit("random %0, %1, INT", "frob %0, %1, INT"), "E0616", "frob"),
            (edit("[i : ?]", "[ROOT(i) : ?]"), "E0616", "ROOT"),
            (edit(" def=0", ""), "E0617", ""),
            (edit("input", "input input"), "E0617", "input"),
            (edit("INT [i", "DOUBLE [i"), "E0618", "DOUBLE"),
            (edit("array x : INT [i : ?] def=0 input range=[0, 10)", &deep), "E0619", "("),
        ];
        for (text, code, under) in cases {
            let (c, u) = first_error(&text);
            assert_eq!((c, u.as_str()), (code, under), "in:\n{text}");
        }
    }

    /// Nesting a source program can reach parses on a test thread's 2 MiB
    /// stack; deeper nesting is E0619, not a stack overflow.
    #[test]
    fn deep_nesting_is_bounded() {
        let pos = |open: &str, close: &str, d: usize| format!("eintup i : ?\narray x : INT [{}i{} : ?] def=0\n", open.repeat(d), close.repeat(d));
        let cases = [
            (pos("(", " + 1)", 500), true),
            (pos("(", " + 1)", 600), false),
            (pos("FLAT(", ")", 250), true),
            (pos("FLAT(", ")", 300), false),
            (pos("x[", "]", 250), true),
            (pos("(FLAT(", ") + 1)", 200), true),
        ];
        for (text, ok) in cases {
            let t = std::thread::Builder::new().stack_size(2 << 20).spawn(move || parse_module(&text).map(|m| print::module(&m)).map_err(|d| d[0].code));
            let r = t.expect("thread starts").join().expect("no stack overflow");
            match r {
                Ok(_) => assert!(ok),
                Err(code) => assert_eq!((ok, code), (false, "E0619")),
            }
        }
    }

    #[test]
    fn one_mistake_one_diagnostic() {
        // A failed op line still numbers the following ops.
        let text = edit("%0 = const 0 : INT<>", "%0 = const zero : INT<>");
        let d = parse_module(&text).unwrap_err();
        assert_eq!(d.iter().map(|d| d.code).collect::<Vec<_>>(), ["E0604"]);
        // A failed eintup line keeps the ids of later lines.
        let text = format!("eintup j : $\n{BASE}");
        let d = parse_module(&text).unwrap_err();
        assert_eq!(d.iter().map(|d| d.code).collect::<Vec<_>>(), ["E0601"]);
        // A failed header skips its block quietly.
        let text = edit("stmt 0 x[i] =", "stmt 0 x[i] ==");
        let d = parse_module(&text).unwrap_err();
        assert_eq!(d.len(), 1, "{d:?}");
    }

    #[test]
    fn empty_text_is_an_empty_module() {
        let m = parse_module("// nothing\n\n").expect("parses");
        assert!(m.eintups.is_empty() && m.stmts.is_empty() && m.call.is_none() && m.outputs.is_empty());
        assert_eq!(print::module(&m), "");
    }
}
