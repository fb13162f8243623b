//! Parser for the textual `loop` dialect that `print` writes
//! (grammar and error codes in docs/ir-loop.md). Hand-written: a lexer to
//! spanned tokens, then recursive descent. Index expressions are fully
//! parenthesised, so there are no precedence rules.
//!
//! The parser resolves names (buffers, variables) and checks syntax; it
//! does not check scoping, value order or dtypes, which is the verifier's
//! job (`verify`). It stops at the first error, which is located.
//! It never panics: nesting is bounded by `MAX_DEPTH`, numbers are
//! range-checked.

use super::*;
use super::print::default_init;
use et_grammar::{Diagnostic, Span};
use std::collections::HashMap;

/// Deepest nesting of blocks plus parentheses the parser accepts. Bounds
/// recursion (so hostile input cannot overflow the stack); generated IR
/// stays far below it (a loop per eintup component, an expression level
/// per index operation).
pub const MAX_DEPTH: usize = 256;

/// Parses a whole module. Errors carry codes E0640-E0650 and spans into
/// `text`; only the first error is reported.
pub fn parse_module(text: &str) -> Result<LoopModule, Vec<Diagnostic>> {
    let toks = lex(text).map_err(|d| vec![d])?;
    let mut p = Parser { toks, pos: 0, end: text.len(), depth: 0, buffers: HashMap::new(), m: LoopModule { buffers: vec![], kernels: vec![] } };
    p.module().map_err(|d| vec![d])?;
    Ok(p.m)
}

#[derive(Clone, Debug, PartialEq)]
enum T {
    Ident(String),
    /// Digits, optional fraction and exponent, as written.
    Num(String),
    Str(String),
    /// Punctuation and operators, as written (`{`, `+=`, `//^`, ...).
    P(&'static str),
}

#[derive(Clone, Debug)]
struct Tok {
    t: T,
    span: Span,
}

/// Longest first, so `//^` wins over `//` and `+=` over `+`.
const PUNCT: [&str; 20] = ["//^", "//", "+=", "<=", "!=", "{", "}", "[", "]", "(", ")", ",", ":", "=", "<", "%", "@", "-", "+", "*"];

fn lex(src: &str) -> Result<Vec<Tok>, Diagnostic> {
    let b = src.as_bytes();
    let mut toks = Vec::new();
    let mut i = 0;
    // True while only whitespace precedes `i` on its line: a `//` there
    // starts a comment line (elsewhere `//` is floor division).
    let mut line_start = true;
    while i < b.len() {
        let c = b[i];
        if c == b'\n' {
            line_start = true;
            i += 1;
            continue;
        }
        if c.is_ascii_whitespace() {
            i += 1;
            continue;
        }
        if line_start && src[i..].starts_with("//") {
            while i < b.len() && b[i] != b'\n' {
                i += 1;
            }
            continue;
        }
        line_start = false;
        let start = i;
        if c.is_ascii_alphabetic() || c == b'_' {
            while i < b.len() && (b[i].is_ascii_alphanumeric() || b[i] == b'_') {
                i += 1;
            }
            toks.push(Tok { t: T::Ident(src[start..i].to_string()), span: Span::new(start, i) });
        } else if c.is_ascii_digit() {
            let digits = |i: &mut usize| {
                while *i < b.len() && b[*i].is_ascii_digit() {
                    *i += 1;
                }
            };
            digits(&mut i);
            if i + 1 < b.len() && b[i] == b'.' && b[i + 1].is_ascii_digit() {
                i += 1;
                digits(&mut i);
            }
            if i < b.len() && (b[i] == b'e' || b[i] == b'E') {
                let mut j = i + 1;
                if j < b.len() && (b[j] == b'+' || b[j] == b'-') {
                    j += 1;
                }
                if j < b.len() && b[j].is_ascii_digit() {
                    i = j;
                    digits(&mut i);
                }
            }
            toks.push(Tok { t: T::Num(src[start..i].to_string()), span: Span::new(start, i) });
        } else if c == b'"' {
            let (s, next) = lex_string(src, start)?;
            i = next;
            toks.push(Tok { t: T::Str(s), span: Span::new(start, i) });
        } else if let Some(p) = PUNCT.iter().find(|p| src[i..].starts_with(**p)) {
            i += p.len();
            toks.push(Tok { t: T::P(p), span: Span::new(start, i) });
        } else {
            let ch = src[i..].chars().next().unwrap_or('?');
            return Err(Diagnostic::error("E0640", format!("unexpected character {ch:?}")).at(Span::new(i, i + ch.len_utf8()), "not part of the loop dialect"));
        }
    }
    Ok(toks)
}

/// A double-quoted string starting at `start`; returns it and the offset
/// after the closing quote. Escapes: `\"`, `\\`, `\n`, `\t`, `\u{hex}`.
fn lex_string(src: &str, start: usize) -> Result<(String, usize), Diagnostic> {
    let mut out = String::new();
    let mut it = src[start + 1..].char_indices().map(|(k, c)| (k + start + 1, c));
    let unterminated = || Diagnostic::error("E0649", "unterminated string").at(Span::new(start, start + 1), "this string is not closed on its line");
    while let Some((k, c)) = it.next() {
        match c {
            '"' => return Ok((out, k + 1)),
            '\n' => return Err(unterminated()),
            '\\' => {
                let bad = |end: usize| Diagnostic::error("E0649", "invalid escape in string").at(Span::new(k, end), "expected \\\", \\\\, \\n, \\t or \\u{hex}");
                match it.next() {
                    Some((_, '"')) => out.push('"'),
                    Some((_, '\\')) => out.push('\\'),
                    Some((_, 'n')) => out.push('\n'),
                    Some((_, 't')) => out.push('\t'),
                    Some((u, 'u')) => {
                        let rest = &src[u + 1..];
                        let close = rest.find('}').filter(|_| rest.starts_with('{')).ok_or_else(|| bad(u + 1))?;
                        let hex = &rest[1..close];
                        let ch = u32::from_str_radix(hex, 16).ok().and_then(char::from_u32).ok_or_else(|| bad(u + 2 + close))?;
                        out.push(ch);
                        // Skip the `{hex}` the iterator has not consumed.
                        for _ in 0..close + 1 {
                            it.next();
                        }
                    }
                    Some((e, ch)) => return Err(bad(e + ch.len_utf8())),
                    None => return Err(unterminated()),
                }
            }
            c => out.push(c),
        }
    }
    Err(unterminated())
}

fn describe(t: &T) -> String {
    match t {
        T::Ident(s) => format!("identifier `{s}`"),
        T::Num(s) => format!("number `{s}`"),
        T::Str(_) => "string".to_string(),
        T::P(p) => format!("`{p}`"),
    }
}

struct Parser {
    toks: Vec<Tok>,
    pos: usize,
    /// Length of the text: the span of "end of input".
    end: usize,
    depth: usize,
    buffers: HashMap<String, BufId>,
    m: LoopModule,
}

/// Name resolution state of the kernel being parsed.
struct KScope {
    names: HashMap<String, VarId>,
    vars: Vec<Var>,
    /// A `vars(..)` clause fixed the variables: bindings may not add any.
    fixed: bool,
}

type R<T> = Result<T, Diagnostic>;

impl Parser {
    fn peek(&self) -> Option<&T> {
        self.toks.get(self.pos).map(|t| &t.t)
    }

    fn peek2(&self) -> Option<&T> {
        self.toks.get(self.pos + 1).map(|t| &t.t)
    }

    fn span(&self) -> Span {
        self.toks.get(self.pos).map_or(Span::new(self.end, self.end), |t| t.span)
    }

    fn unexpected(&self, expected: &str) -> Diagnostic {
        let found = self.peek().map_or("end of input".to_string(), describe);
        Diagnostic::error("E0641", format!("unexpected {found}, expected {expected}")).at(self.span(), format!("expected {expected}"))
    }

    fn is_p(&self, p: &str) -> bool {
        matches!(self.peek(), Some(T::P(q)) if *q == p)
    }

    fn is_kw(&self, kw: &str) -> bool {
        matches!(self.peek(), Some(T::Ident(s)) if s == kw)
    }

    fn eat_p(&mut self, p: &str) -> bool {
        let yes = self.is_p(p);
        if yes {
            self.pos += 1;
        }
        yes
    }

    fn expect_p(&mut self, p: &str) -> R<Span> {
        let sp = self.span();
        if self.eat_p(p) {
            Ok(sp)
        } else {
            Err(self.unexpected(&format!("`{p}`")))
        }
    }

    fn expect_kw(&mut self, kw: &str) -> R<()> {
        if self.is_kw(kw) {
            self.pos += 1;
            Ok(())
        } else {
            Err(self.unexpected(&format!("`{kw}`")))
        }
    }

    fn ident(&mut self, what: &str) -> R<(String, Span)> {
        match self.peek() {
            Some(T::Ident(s)) => {
                let r = (s.clone(), self.span());
                self.pos += 1;
                Ok(r)
            }
            _ => Err(self.unexpected(what)),
        }
    }

    /// Enters one nesting level (block or parenthesis).
    fn enter(&mut self) -> R<()> {
        self.depth += 1;
        if self.depth > MAX_DEPTH {
            return Err(Diagnostic::error("E0650", format!("nesting deeper than {MAX_DEPTH} levels")).at(self.span(), "too deeply nested"));
        }
        Ok(())
    }

    fn leave(&mut self) {
        self.depth -= 1;
    }

    /// An integer literal, optionally negative, as `i64`.
    fn int(&mut self, what: &str) -> R<i64> {
        let start = self.span();
        let neg = self.eat_p("-");
        let sp = self.span();
        let Some(T::Num(s)) = self.peek() else { return Err(self.unexpected(what)) };
        let s = s.clone();
        self.pos += 1;
        let too_big = || Diagnostic::error("E0642", format!("`{s}` is not an integer in the 64-bit range")).at(start.to(sp), "expected a 64-bit integer");
        let mag: i128 = s.parse::<u64>().map_err(|_| too_big())? as i128;
        let v = if neg { -mag } else { mag };
        i64::try_from(v).map_err(|_| too_big())
    }

    fn module(&mut self) -> R<()> {
        while self.peek().is_some() {
            if self.is_kw("buffer") {
                self.buffer()?;
            } else if self.is_kw("kernel") {
                let k = self.kernel()?;
                self.m.kernels.push(k);
            } else {
                return Err(self.unexpected("`buffer` or `kernel`"));
            }
        }
        Ok(())
    }

    fn dtype(&mut self) -> R<DType> {
        let (s, sp) = self.ident("a dtype (`i32`, `f32` or `f64`)")?;
        match s.as_str() {
            "i32" => Ok(DType::I32),
            "f32" => Ok(DType::F32),
            "f64" => Ok(DType::F64),
            _ => Err(Diagnostic::error("E0648", format!("unknown dtype `{s}`")).at(sp, "expected `i32`, `f32` or `f64`")),
        }
    }

    fn buffer(&mut self) -> R<()> {
        self.expect_kw("buffer")?;
        let (name, name_sp) = self.ident("a buffer name")?;
        if self.buffers.contains_key(&name) {
            return Err(Diagnostic::error("E0647", format!("buffer `{name}` is declared twice")).at(name_sp, "second declaration"));
        }
        self.expect_p(":")?;
        let dtype = self.dtype()?;
        self.expect_p("[")?;
        let mut shape = Vec::new();
        if !self.is_p("]") {
            loop {
                shape.push(self.int("a dimension")?);
                if !self.eat_p(",") {
                    break;
                }
            }
        }
        self.expect_p("]")?;
        let (r, rsp) = self.ident("a role (`input`, `output` or `temp`)")?;
        let role = match r.as_str() {
            "input" => Role::Input,
            "output" => Role::Output,
            "temp" => Role::Temp,
            _ => return Err(Diagnostic::error("E0648", format!("unknown buffer role `{r}`")).at(rsp, "expected `input`, `output` or `temp`")),
        };
        let mut init = default_init(role);
        if self.is_kw("init") {
            self.pos += 1;
            self.expect_p("(")?;
            let (i, isp) = self.ident("`zero` or `input`")?;
            init = match i.as_str() {
                "zero" => Init::Zero,
                "input" => Init::Input,
                _ => return Err(Diagnostic::error("E0648", format!("unknown init `{i}`")).at(isp, "expected `zero` or `input`")),
            };
            self.expect_p(")")?;
        }
        self.buffers.insert(name.clone(), self.m.buffers.len());
        self.m.buffers.push(Buffer { name, dtype, shape, role, init });
        Ok(())
    }

    fn kernel(&mut self) -> R<Kernel> {
        self.expect_kw("kernel")?;
        self.expect_p("@")?;
        let (name, _) = self.ident("a kernel name")?;
        let mut sc = KScope { names: HashMap::new(), vars: Vec::new(), fixed: false };
        if self.is_kw("vars") {
            self.pos += 1;
            sc.fixed = true;
            self.expect_p("(")?;
            if !self.is_p(")") {
                loop {
                    let (v, sp) = self.ident("a variable name")?;
                    if sc.names.contains_key(&v) {
                        return Err(Diagnostic::error("E0645", format!("variable `{v}` is listed twice in `vars(..)`")).at(sp, "second listing"));
                    }
                    sc.names.insert(v.clone(), sc.vars.len());
                    sc.vars.push(Var { name: v });
                    if !self.eat_p(",") {
                        break;
                    }
                }
            }
            self.expect_p(")")?;
        }
        let body = self.block(&mut sc)?;
        Ok(Kernel { name, vars: sc.vars, body })
    }

    /// `{ node* }`.
    fn block(&mut self, sc: &mut KScope) -> R<Vec<Node>> {
        self.expect_p("{")?;
        self.enter()?;
        let mut body = Vec::new();
        while !self.eat_p("}") {
            if self.peek().is_none() {
                return Err(self.unexpected("a node or `}`"));
            }
            body.push(self.node(sc)?);
        }
        self.leave();
        Ok(body)
    }

    /// The id a binding of `name` refers to: a new variable unless the name
    /// is known (a second binding of a name is the verifier's to reject).
    fn bind(&mut self, sc: &mut KScope, name: String, sp: Span) -> R<VarId> {
        if let Some(&v) = sc.names.get(&name) {
            return Ok(v);
        }
        if sc.fixed {
            return Err(Diagnostic::error("E0644", format!("variable `{name}` is not listed in the kernel's `vars(..)`")).at(sp, "not declared"));
        }
        sc.names.insert(name.clone(), sc.vars.len());
        sc.vars.push(Var { name });
        Ok(sc.vars.len() - 1)
    }

    fn node(&mut self, sc: &mut KScope) -> R<Node> {
        // `NAME = load_index ..` whatever the name (it may be `for`).
        if matches!(self.peek(), Some(T::Ident(_))) && matches!(self.peek2(), Some(T::P("="))) {
            let (name, sp) = self.ident("a variable name")?;
            self.expect_p("=")?;
            self.expect_kw("load_index")?;
            let buf = self.buf_ref()?;
            self.expect_p("[")?;
            let offset = self.iexpr(sc)?;
            self.expect_p("]")?;
            let var = self.bind(sc, name, sp)?;
            return Ok(Node::LoadIndex { var, buf, offset });
        }
        if self.is_kw("for") {
            self.pos += 1;
            let (name, sp) = self.ident("a loop variable")?;
            self.expect_kw("in")?;
            self.expect_p("[")?;
            // Bounds are read before the variable is bound: a bound that
            // names the loop's own variable is then an unknown name (or,
            // with `vars(..)`, a scope error for the verifier).
            let lo = self.iexpr(sc)?;
            self.expect_p(",")?;
            let hi = self.iexpr(sc)?;
            self.expect_p(")")?;
            let (k, ksp) = self.ident("`parallel` or `reduce`")?;
            let kind = match k.as_str() {
                "parallel" => LoopKind::Parallel,
                "reduce" => LoopKind::Reduce,
                _ => return Err(Diagnostic::error("E0648", format!("unknown loop kind `{k}`")).at(ksp, "expected `parallel` or `reduce`")),
            };
            let var = self.bind(sc, name, sp)?;
            let body = self.block(sc)?;
            return Ok(Node::For(For { var, lo, hi, kind, body }));
        }
        if self.is_kw("guard") {
            self.pos += 1;
            let mut conds = Vec::new();
            if !self.is_p("{") {
                loop {
                    conds.push(self.cond(sc)?);
                    if !self.eat_p(",") {
                        break;
                    }
                }
            }
            let body = self.block(sc)?;
            return Ok(Node::Guard(Guard { conds, body }));
        }
        if self.is_p("%") || self.is_kw("store") || self.is_kw("accumulate") || self.is_kw("atomic_accumulate") {
            return Ok(Node::Compute(self.compute(sc)?));
        }
        Err(self.unexpected("`for`, `guard`, `NAME = load_index`, a value `%N = ..` or a write"))
    }

    fn cond(&mut self, sc: &mut KScope) -> R<Cond> {
        let first = self.iexpr(sc)?;
        if self.eat_p("!=") {
            let sp = self.span();
            if self.int("`0`")? != 0 {
                return Err(Diagnostic::error("E0641", "a `!=` condition compares with 0").at(sp, "expected `0`"));
            }
            return Ok(Cond::NonZero(first));
        }
        if !self.eat_p("<=") {
            return Err(self.unexpected("`<=` or `!=`"));
        }
        let e = self.iexpr(sc)?;
        self.expect_p("<")?;
        let hi = self.iexpr(sc)?;
        Ok(Cond::InRange { e, lo: first, hi })
    }

    fn buf_ref(&mut self) -> R<BufId> {
        let (name, sp) = self.ident("a buffer name")?;
        self.buffers.get(&name).copied().ok_or_else(|| Diagnostic::error("E0643", format!("unknown buffer `{name}`")).at(sp, "no buffer of this name is declared above"))
    }

    fn iexpr(&mut self, sc: &mut KScope) -> R<IExpr> {
        match self.peek() {
            Some(T::Num(_)) | Some(T::P("-")) => Ok(IExpr::Const(self.int("an index expression")?)),
            Some(T::Ident(s)) if (s == "min" || s == "max") && matches!(self.peek2(), Some(T::P("("))) => {
                let op = if s == "min" { IBin::Min } else { IBin::Max };
                self.pos += 2;
                self.enter()?;
                let a = self.iexpr(sc)?;
                self.expect_p(",")?;
                let b = self.iexpr(sc)?;
                self.expect_p(")")?;
                self.leave();
                Ok(IExpr::bin(op, a, b))
            }
            Some(T::Ident(s)) => {
                let (s, sp) = (s.clone(), self.span());
                self.pos += 1;
                sc.names.get(&s).map(|&v| IExpr::Var(v)).ok_or_else(|| Diagnostic::error("E0644", format!("unknown variable `{s}`")).at(sp, "not bound by a loop or load_index above"))
            }
            Some(T::P("(")) => {
                self.pos += 1;
                self.enter()?;
                let a = self.iexpr(sc)?;
                let op = match self.peek() {
                    Some(T::P("+")) => IBin::Add,
                    Some(T::P("-")) => IBin::Sub,
                    Some(T::P("*")) => IBin::Mul,
                    Some(T::P("//")) => IBin::FloorDiv,
                    Some(T::P("//^")) => IBin::CeilDiv,
                    Some(T::P("%")) => IBin::Mod,
                    _ => return Err(self.unexpected("an index operator (`+`, `-`, `*`, `//`, `//^`, `%`)")),
                };
                self.pos += 1;
                let b = self.iexpr(sc)?;
                self.expect_p(")")?;
                self.leave();
                Ok(IExpr::bin(op, a, b))
            }
            _ => Err(self.unexpected("an index expression")),
        }
    }

    /// `%N`.
    fn val_ref(&mut self) -> R<ValId> {
        self.expect_p("%")?;
        let sp = self.span();
        match self.peek() {
            Some(T::Num(s)) => {
                let r = s.parse::<usize>().map_err(|_| Diagnostic::error("E0642", format!("`%{s}` is not a value number")).at(sp, "expected a value number"));
                self.pos += 1;
                r
            }
            _ => Err(self.unexpected("a value number after `%`")),
        }
    }

    fn compute(&mut self, sc: &mut KScope) -> R<Compute> {
        let mut values = Vec::new();
        while self.is_p("%") {
            let sp = self.span();
            let k = self.val_ref()?;
            if k != values.len() {
                return Err(Diagnostic::error("E0646", format!("value `%{k}` defined where `%{}` comes next", values.len())).at(sp.to(self.toks[self.pos - 1].span), format!("expected `%{}`", values.len())));
            }
            self.expect_p("=")?;
            let op = self.vop(sc)?;
            self.expect_p(":")?;
            let dtype = self.dtype()?;
            values.push(Value { op, dtype });
        }
        let (w, wsp) = self.ident("a write (`store`, `accumulate` or `atomic_accumulate`) or a value `%N = ..`")?;
        let kind = match w.as_str() {
            "store" => WriteKind::Store,
            "accumulate" => WriteKind::Accumulate,
            "atomic_accumulate" => WriteKind::AtomicAccumulate,
            _ => return Err(Diagnostic::error("E0648", format!("unknown write `{w}`")).at(wsp, "expected `store`, `accumulate` or `atomic_accumulate`")),
        };
        let buf = self.buf_ref()?;
        self.expect_p("[")?;
        let offset = self.iexpr(sc)?;
        self.expect_p("]")?;
        self.expect_p(if kind == WriteKind::Store { "=" } else { "+=" })?;
        let value = self.val_ref()?;
        Ok(Compute { values, write: Write { kind, buf, offset, value } })
    }

    fn vop(&mut self, sc: &mut KScope) -> R<VOp> {
        let (op, sp) = self.ident("a value operation")?;
        let bin = |b| Some(b);
        let vbin = match op.as_str() {
            "add" => bin(VBin::Add),
            "sub" => bin(VBin::Sub),
            "mul" => bin(VBin::Mul),
            "div" => bin(VBin::Div),
            "floordiv" => bin(VBin::FloorDiv),
            "ceildiv" => bin(VBin::CeilDiv),
            "mod" => bin(VBin::Mod),
            _ => None,
        };
        if let Some(b) = vbin {
            let a = self.val_ref()?;
            self.expect_p(",")?;
            let c = self.val_ref()?;
            return Ok(VOp::Bin(b, a, c));
        }
        Ok(match op.as_str() {
            "const" => VOp::Const(self.float()?),
            "load" => {
                let buf = self.buf_ref()?;
                self.expect_p("[")?;
                let offset = self.iexpr(sc)?;
                self.expect_p("]")?;
                VOp::Load { buf, offset }
            }
            "index" => VOp::Index(self.iexpr(sc)?),
            "lookup" => {
                self.expect_p("[")?;
                let mut table = Vec::new();
                if !self.is_p("]") {
                    loop {
                        table.push(self.int("a table entry")?);
                        if !self.eat_p(",") {
                            break;
                        }
                    }
                }
                self.expect_p("]")?;
                self.expect_p("[")?;
                let index = self.iexpr(sc)?;
                self.expect_p("]")?;
                VOp::Lookup { table, index }
            }
            "random" => {
                let stream = match self.peek() {
                    Some(T::Str(s)) => s.clone(),
                    _ => return Err(self.unexpected("a stream name string")),
                };
                self.pos += 1;
                self.expect_p("[")?;
                let counter = self.iexpr(sc)?;
                self.expect_p("]")?;
                self.expect_p(",")?;
                let lo = self.val_ref()?;
                self.expect_p(",")?;
                let hi = self.val_ref()?;
                VOp::Random { stream, counter, lo, hi }
            }
            "neg" => VOp::Neg(self.val_ref()?),
            "cast" => VOp::Cast(self.val_ref()?),
            _ => {
                return Err(Diagnostic::error("E0648", format!("unknown value operation `{op}`"))
                    .at(sp, "expected const, load, index, lookup, random, neg, cast, add, sub, mul, div, floordiv, ceildiv or mod"))
            }
        })
    }

    /// A float constant: `[-](NUMBER | inf | NaN)`.
    fn float(&mut self) -> R<f64> {
        let start = self.span();
        let neg = self.eat_p("-");
        let sp = self.span();
        let text = match self.peek() {
            Some(T::Num(s)) => s.clone(),
            Some(T::Ident(s)) if s == "inf" || s == "NaN" => s.clone(),
            _ => return Err(self.unexpected("a number")),
        };
        self.pos += 1;
        let x: f64 = text.parse().map_err(|_| Diagnostic::error("E0642", format!("malformed number `{text}`")).at(start.to(sp), "expected a number"))?;
        if x.is_infinite() && text != "inf" {
            return Err(Diagnostic::error("E0642", format!("number `{text}` is too large for f64")).at(start.to(sp), "out of range"));
        }
        Ok(if neg { -x } else { x })
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
