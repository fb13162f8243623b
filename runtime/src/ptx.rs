//! PTX text as a syntax tree: the one reader of `kernels.ptx` in the
//! runtime. [`parse`] gives the module header (`.version`, `.target`,
//! `.address_size`), module-scope variables and every `.entry` and `.func`
//! with its parameters and body. Bundle checks read the header and the
//! entries ([`crate::bundle`]); the emulator decodes the bodies
//! (`emu::decode`).
//!
//! The parser knows PTX's *shape*, not its instruction set: a statement is
//! an optional guard, a dotted opcode and operands, whatever the opcode
//! means. So text the driver's JIT accepts parses here too, and deciding
//! whether an instruction is supported is left to the emulator's decoder,
//! which names the instruction and its line. Module-scope directives this
//! reader does not model (`.section`, `.alias`, ...) are kept as
//! [`Directive`]s rather than dropped, for the same reason.

use std::fmt;

/// A parsed PTX module.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Module {
    /// The `.version` operand, e.g. `"7.0"`.
    pub version: Option<String>,
    /// The first `.target` operand, e.g. `"sm_80"`.
    pub target: Option<String>,
    /// The `.address_size` operand; PTX defaults to 32 when absent.
    pub address_size: Option<String>,
    /// Module-scope variables (`.global`, `.const`, `.shared`), in order.
    pub variables: Vec<Variable>,
    /// Kernels (`.entry`) and device functions (`.func`), in order.
    pub functions: Vec<Function>,
    /// Other module-scope directives, by name and line.
    pub directives: Vec<Directive>,
}

impl Module {
    /// The kernels, in order of appearance.
    pub fn entries(&self) -> impl Iterator<Item = &Function> {
        self.functions.iter().filter(|f| f.is_entry)
    }
}

/// A directive kept by name only.
#[derive(Clone, Debug, PartialEq)]
pub struct Directive {
    pub name: String,
    pub line: u32,
}

/// An `.entry` or a `.func`.
#[derive(Clone, Debug, PartialEq)]
pub struct Function {
    pub name: String,
    pub line: u32,
    pub is_entry: bool,
    /// The parameters, in order.
    pub params: Vec<Variable>,
    /// Performance-tuning directives between the signature and the body
    /// (`.maxntid 256, 1, 1`, `.reqntid`, `.minnctapersm`, ...).
    pub tuning: Vec<(String, Vec<u64>)>,
    /// `None` for a declaration without a body.
    pub body: Option<Vec<Statement>>,
}

/// A variable or parameter declaration: `.shared .align 4 .f32 buf[256];`.
#[derive(Clone, Debug, PartialEq)]
pub struct Variable {
    /// `.param`, `.reg`, `.shared`, `.local`, `.global` or `.const`.
    pub space: String,
    pub align: Option<u64>,
    /// `.v2`/`.v4` element count, when declared as a vector.
    pub vector: Option<u32>,
    /// The element type, e.g. `.u64`, `.b8`, `.pred`.
    pub ty: String,
    pub name: String,
    /// Array dimensions; `None` for an unsized `[]`.
    pub dims: Vec<Option<u64>>,
    /// `%r<13>`: a range of 13 registers `%r0` .. `%r12`.
    pub range: Option<u32>,
    /// Whether `= { ... }` initialises it.
    pub initialized: bool,
    /// Other qualifiers (`.ptr`, `.global` of a pointer parameter, `.extern`, ...).
    pub qualifiers: Vec<String>,
    pub line: u32,
}

/// One statement of a function body. Nested `{ }` blocks are flattened;
/// the registers a block declares are renamed `NAME#k#` (`k` numbers the
/// block; `#` cannot occur in a PTX name), in the block, so that blocks may
/// declare the same names (LLVM's `{ .reg .b64 %lhs; ... }` around every
/// 64-bit rotate) and shadow the function's.
#[derive(Clone, Debug, PartialEq)]
pub enum Statement {
    /// A declaration (`.reg`, `.shared`, `.local`, ...).
    Var(Variable),
    /// `name:`
    Label {
        name: String,
        line: u32,
    },
    Instruction(Instruction),
    /// `.pragma`, `.loc` and other directives inside a body.
    Directive(Directive),
}

/// `@!%p1 add.s32 %r1, %r2, 4;`
#[derive(Clone, Debug, PartialEq)]
pub struct Instruction {
    pub line: u32,
    /// The guard predicate and whether it is negated.
    pub guard: Option<(bool, String)>,
    /// The whole dotted opcode, e.g. `ld.global.nc.f32`.
    pub opcode: String,
    pub operands: Vec<Operand>,
    /// The statement as written (whitespace collapsed), for messages.
    pub text: String,
}

/// An instruction operand.
#[derive(Clone, Debug, PartialEq)]
pub enum Operand {
    /// A register or special register: `%r1`, `%tid.x`.
    Reg(String),
    /// A name: a label, variable or parameter, optionally `+ offset`.
    Symbol { name: String, offset: i64 },
    /// An integer literal (wide enough for every u64 and i64).
    Int(i128),
    /// `0fXXXXXXXX`: the bits of an f32.
    F32(u32),
    /// `0dXXXXXXXXXXXXXXXX`: the bits of an f64.
    F64(u64),
    /// A decimal floating-point literal (an f64 value).
    Float(f64),
    /// `[base+offset]`; no base for an absolute address.
    Address { base: Option<String>, offset: i64 },
    /// `{a, b, ...}`
    Vector(Vec<Operand>),
    /// `!%p`
    Not(Box<Operand>),
    /// `%p|%q`: the two predicate destinations of `setp`.
    Pair(String, String),
    /// `_`: a sink.
    Sink,
}

impl fmt::Display for Operand {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Operand::Reg(r) => f.write_str(r),
            Operand::Symbol { name, offset: 0 } => f.write_str(name),
            Operand::Symbol { name, offset } => write!(f, "{name}+{offset}"),
            Operand::Int(v) => write!(f, "{v}"),
            Operand::F32(b) => write!(f, "0f{b:08X}"),
            Operand::F64(b) => write!(f, "0d{b:016X}"),
            Operand::Float(v) => write!(f, "{v:?}"),
            Operand::Address { base: Some(b), offset: 0 } => write!(f, "[{b}]"),
            Operand::Address { base: Some(b), offset } => write!(f, "[{b}+{offset}]"),
            Operand::Address { base: None, offset } => write!(f, "[{offset}]"),
            Operand::Vector(v) => {
                let parts: Vec<String> = v.iter().map(|o| o.to_string()).collect();
                write!(f, "{{{}}}", parts.join(", "))
            }
            Operand::Not(o) => write!(f, "!{o}"),
            Operand::Pair(a, b) => write!(f, "{a}|{b}"),
            Operand::Sink => f.write_str("_"),
        }
    }
}

/// A syntax error with its line (1-based).
#[derive(Clone, Debug, PartialEq)]
pub struct ParseError {
    pub line: u32,
    pub message: String,
}

impl fmt::Display for ParseError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "line {}: {}", self.line, self.message)
    }
}

/// How deeply `{ }` blocks of a body, and operands within operands
/// (`{a, {b}}`, `!!%p`), may nest. The parser recurses once per level, so a
/// tampered `kernels.ptx` of 20,000 nested `{` would overflow the stack
/// (an abort, not an error); LLVM's NVPTX back end nests one block deep
/// (`{ .reg .b64 %lhs; ... }` around 64-bit rotates), hand-written PTX a
/// few. Deeper is refused (docs/bundle.md, "kernels.ptx").
pub const MAX_NESTING: usize = 64;

/// Parses a PTX module.
pub fn parse(text: &str) -> Result<Module, ParseError> {
    let tokens = lex(text)?;
    Parser { toks: &tokens, i: 0, blocks: 0 }.module()
}

// ---------------------------------------------------------------- lexing

#[derive(Clone, Debug, PartialEq)]
enum Tok<'a> {
    /// Identifiers, directives, registers, opcodes and numbers: runs of
    /// `[A-Za-z0-9_$%.]` (and `::` inside, as in `.shared::cta`).
    Word(&'a str),
    Str(&'a str),
    Punct(char),
}

#[derive(Clone, Debug)]
struct Token<'a> {
    tok: Tok<'a>,
    line: u32,
}

fn is_word_char(c: u8) -> bool {
    c.is_ascii_alphanumeric() || matches!(c, b'_' | b'$' | b'%' | b'.')
}

fn lex(text: &str) -> Result<Vec<Token<'_>>, ParseError> {
    let b = text.as_bytes();
    let mut out = Vec::new();
    let mut line = 1u32;
    let mut i = 0;
    while i < b.len() {
        let c = b[i];
        if c == b'\n' {
            line += 1;
            i += 1;
        } else if c.is_ascii_whitespace() {
            i += 1;
        } else if b[i..].starts_with(b"//") {
            while i < b.len() && b[i] != b'\n' {
                i += 1;
            }
        } else if b[i..].starts_with(b"/*") {
            let start = line;
            i += 2;
            loop {
                if i + 1 >= b.len() {
                    return Err(ParseError { line: start, message: "a `/*` comment is not closed".into() });
                }
                if b[i] == b'*' && b[i + 1] == b'/' {
                    i += 2;
                    break;
                }
                if b[i] == b'\n' {
                    line += 1;
                }
                i += 1;
            }
        } else if c == b'"' {
            let start = i;
            i += 1;
            while i < b.len() && b[i] != b'"' {
                if b[i] == b'\n' {
                    line += 1;
                }
                i += 1;
            }
            i = (i + 1).min(b.len());
            out.push(Token { tok: Tok::Str(&text[start..i]), line });
        } else if is_word_char(c) {
            let start = i;
            while i < b.len() {
                if is_word_char(b[i]) {
                    i += 1;
                } else if b[i..].starts_with(b"::") && i + 2 < b.len() && is_word_char(b[i + 2]) {
                    i += 2;
                } else if matches!(b[i], b'+' | b'-')
                    && b[start].is_ascii_digit()
                    && matches!(b[i - 1], b'e' | b'E')
                    && !text[start..i].starts_with("0x")
                    && !text[start..i].starts_with("0X")
                {
                    // The exponent sign of a decimal float: `1.5e-3`.
                    i += 1;
                } else {
                    break;
                }
            }
            out.push(Token { tok: Tok::Word(&text[start..i]), line });
        } else {
            // Multi-byte characters only ever appear in comments and strings.
            let ch = text[i..].chars().next().unwrap_or('?');
            out.push(Token { tok: Tok::Punct(ch), line });
            i += ch.len_utf8();
        }
    }
    Ok(out)
}

// --------------------------------------------------------------- parsing

struct Parser<'t, 'a> {
    toks: &'t [Token<'a>],
    i: usize,
    /// Nested `{ }` blocks so far (numbers their registers).
    blocks: u32,
}

/// Directives whose operands run to the end of the line, without a `;`.
const LINE_DIRECTIVES: [&str; 5] = [".version", ".target", ".address_size", ".file", ".loc"];

/// Linking qualifiers that may precede a declaration.
const LINKING: [&str; 4] = [".visible", ".extern", ".weak", ".common"];

/// State spaces of variable declarations.
const SPACES: [&str; 6] = [".reg", ".param", ".shared", ".local", ".global", ".const"];

impl<'t, 'a> Parser<'t, 'a> {
    fn peek(&self) -> Option<&Tok<'a>> {
        self.toks.get(self.i).map(|t| &t.tok)
    }

    fn line(&self) -> u32 {
        self.toks.get(self.i).or(self.toks.last()).map_or(1, |t| t.line)
    }

    fn err<T>(&self, message: impl Into<String>) -> Result<T, ParseError> {
        Err(ParseError { line: self.line(), message: message.into() })
    }

    fn next(&mut self) -> Option<Tok<'a>> {
        let t = self.toks.get(self.i).map(|t| t.tok.clone());
        self.i += 1;
        t
    }

    fn eat(&mut self, c: char) -> bool {
        if self.peek() == Some(&Tok::Punct(c)) {
            self.i += 1;
            true
        } else {
            false
        }
    }

    fn expect(&mut self, c: char) -> Result<(), ParseError> {
        if self.eat(c) {
            Ok(())
        } else {
            let found = self.peek().map_or("the end of the text".into(), describe);
            self.err(format!("expected `{c}`, found {found}"))
        }
    }

    fn word(&mut self, what: &str) -> Result<&'a str, ParseError> {
        match self.peek() {
            Some(Tok::Word(w)) => {
                let w = *w;
                self.i += 1;
                Ok(w)
            }
            other => {
                let found = other.map_or("the end of the text".into(), describe);
                self.err(format!("expected {what}, found {found}"))
            }
        }
    }

    fn peek_word(&self) -> Option<&'a str> {
        match self.peek() {
            Some(Tok::Word(w)) => Some(w),
            _ => None,
        }
    }

    fn module(mut self) -> Result<Module, ParseError> {
        let mut m = Module::default();
        while let Some(tok) = self.peek().cloned() {
            let line = self.line();
            let Tok::Word(w) = tok else {
                return self.err(format!("unexpected {} at module scope", describe(&tok)));
            };
            match w {
                ".version" | ".target" | ".address_size" => {
                    self.i += 1;
                    let operands = self.rest_of_line();
                    let Some(first) = operands.first() else {
                        return Err(ParseError { line, message: format!("`{w}` has no operand") });
                    };
                    let first = first.to_string();
                    match w {
                        ".version" => m.version = Some(first),
                        ".target" => m.target = Some(first),
                        _ => m.address_size = Some(first),
                    }
                }
                ".file" | ".loc" => {
                    self.i += 1;
                    self.rest_of_line();
                    m.directives.push(Directive { name: w.into(), line });
                }
                _ if LINKING.contains(&w) || w == ".entry" || w == ".func" || SPACES.contains(&w) => {
                    self.declaration(&mut m)?;
                }
                _ if w.starts_with('.') => {
                    self.i += 1;
                    self.skip_statement()?;
                    m.directives.push(Directive { name: w.into(), line });
                }
                _ => return self.err(format!("unexpected `{w}` at module scope")),
            }
        }
        Ok(m)
    }

    /// Words up to the end of the current line (directives without `;`).
    fn rest_of_line(&mut self) -> Vec<&'a str> {
        let line = self.toks.get(self.i.saturating_sub(1)).map_or(0, |t| t.line);
        let mut out = Vec::new();
        while let Some(t) = self.toks.get(self.i) {
            if t.line != line {
                break;
            }
            if let Tok::Word(w) = t.tok {
                out.push(w);
            }
            self.i += 1;
        }
        out
    }

    /// Skips to the end of a statement: a `;`, or a balanced `{ }` block
    /// (optionally followed by `;`).
    fn skip_statement(&mut self) -> Result<(), ParseError> {
        let start = self.line();
        loop {
            match self.next() {
                None => return Err(ParseError { line: start, message: "a directive is not terminated".into() }),
                Some(Tok::Punct(';')) => return Ok(()),
                Some(Tok::Punct('{')) => {
                    self.skip_block(start)?;
                    self.eat(';');
                    return Ok(());
                }
                Some(_) => {}
            }
        }
    }

    /// Skips past the `}` matching an already consumed `{`.
    fn skip_block(&mut self, start: u32) -> Result<(), ParseError> {
        let mut depth = 1;
        while depth > 0 {
            match self.next() {
                None => return Err(ParseError { line: start, message: "a `{` is not closed".into() }),
                Some(Tok::Punct('{')) => depth += 1,
                Some(Tok::Punct('}')) => depth -= 1,
                Some(_) => {}
            }
        }
        Ok(())
    }

    /// A module-scope declaration: a function or a variable, with its
    /// linking qualifiers.
    fn declaration(&mut self, m: &mut Module) -> Result<(), ParseError> {
        let mut qualifiers = Vec::new();
        while let Some(w) = self.peek_word().filter(|w| LINKING.contains(w)) {
            qualifiers.push(w.to_string());
            self.i += 1;
        }
        match self.peek_word() {
            Some(".entry") | Some(".func") => {
                let f = self.function()?;
                m.functions.push(f);
            }
            Some(w) if SPACES.contains(&w) => {
                let mut vars = self.variables()?;
                for v in &mut vars {
                    v.qualifiers.extend(qualifiers.iter().cloned());
                }
                m.variables.extend(vars);
            }
            _ => return self.err("expected `.entry`, `.func` or a variable after a linking directive"),
        }
        Ok(())
    }

    fn function(&mut self) -> Result<Function, ParseError> {
        let line = self.line();
        let is_entry = self.word("`.entry` or `.func`")? == ".entry";
        if !is_entry && self.peek() == Some(&Tok::Punct('(')) {
            // The return-value list of a `.func`.
            self.param_list()?;
        }
        let name = self.word("a function name")?.to_string();
        let params = if self.peek() == Some(&Tok::Punct('(')) { self.param_list()? } else { Vec::new() };
        let mut tuning = Vec::new();
        while let Some(w) = self.peek_word() {
            if !w.starts_with('.') {
                break;
            }
            self.i += 1;
            let mut values = Vec::new();
            while let Some(v) = self.peek_word().and_then(|v| v.parse::<u64>().ok()) {
                values.push(v);
                self.i += 1;
                if !self.eat(',') {
                    break;
                }
            }
            tuning.push((w.to_string(), values));
        }
        let body = if self.eat(';') {
            None
        } else {
            self.expect('{')?;
            let mut stmts = Vec::new();
            self.body(&mut stmts, 0)?;
            registers_by_name(&mut stmts);
            Some(stmts)
        };
        Ok(Function { name, line, is_entry, params, tuning, body })
    }

    fn param_list(&mut self) -> Result<Vec<Variable>, ParseError> {
        self.expect('(')?;
        let mut params = Vec::new();
        if self.eat(')') {
            return Ok(params);
        }
        loop {
            let mut v = self.variable_head()?;
            self.variable_tail(&mut v)?;
            params.push(v);
            if self.eat(')') {
                return Ok(params);
            }
            self.expect(',')?;
        }
    }

    /// `.space {qualifiers} .type`, up to the name.
    fn variable_head(&mut self) -> Result<Variable, ParseError> {
        let line = self.line();
        let space = self.word("a state space")?.to_string();
        let mut v = Variable {
            space,
            align: None,
            vector: None,
            ty: String::new(),
            name: String::new(),
            dims: Vec::new(),
            range: None,
            initialized: false,
            qualifiers: Vec::new(),
            line,
        };
        while let Some(w) = self.peek_word().filter(|w| w.starts_with('.')) {
            self.i += 1;
            match w {
                ".align" => {
                    let n = self.word("an alignment")?;
                    v.align = Some(n.parse().or_else(|_| self.err(format!("bad alignment `{n}`")))?);
                }
                ".v2" => v.vector = Some(2),
                ".v4" => v.vector = Some(4),
                ".v8" => v.vector = Some(8),
                _ if is_type_name(w) => v.ty = w.to_string(),
                _ => v.qualifiers.push(w.to_string()),
            }
        }
        if v.ty.is_empty() {
            return self.err(format!("a `{}` declaration has no type", v.space));
        }
        Ok(v)
    }

    /// The name, `<N>` range, `[N]` dimensions and initialiser of a declaration.
    fn variable_tail(&mut self, v: &mut Variable) -> Result<(), ParseError> {
        v.name = self.word("a name")?.to_string();
        if self.eat('<') {
            let n = self.word("a register count")?;
            v.range = Some(n.parse().or_else(|_| self.err(format!("bad register count `{n}`")))?);
            self.expect('>')?;
        }
        while self.eat('[') {
            if self.eat(']') {
                v.dims.push(None);
                continue;
            }
            let n = self.word("an array size")?;
            v.dims.push(Some(
                parse_int(n).and_then(|x| u64::try_from(x).ok()).ok_or_else(|| ParseError { line: self.line(), message: format!("bad array size `{n}`") })?,
            ));
            self.expect(']')?;
        }
        if self.eat('=') {
            v.initialized = true;
            // The initialiser runs to the `,` or `;` ending the declarator,
            // skipping nested braces.
            let mut depth = 0;
            loop {
                match self.peek() {
                    None => return self.err("an initialiser is not terminated"),
                    Some(Tok::Punct('{')) => depth += 1,
                    Some(Tok::Punct('}')) => depth -= 1,
                    Some(Tok::Punct(';')) | Some(Tok::Punct(',')) if depth == 0 => break,
                    Some(_) => {}
                }
                self.i += 1;
            }
        }
        Ok(())
    }

    /// One declaration statement, possibly naming several variables:
    /// `.reg .b32 %r<5>, %x;`
    fn variables(&mut self) -> Result<Vec<Variable>, ParseError> {
        let head = self.variable_head()?;
        let mut out = Vec::new();
        loop {
            let mut v = head.clone();
            v.line = self.line();
            self.variable_tail(&mut v)?;
            out.push(v);
            if self.eat(';') {
                return Ok(out);
            }
            self.expect(',')?;
        }
    }

    /// Statements up to the `}` closing a body (already opened), `depth`
    /// blocks inside the function's.
    fn body(&mut self, out: &mut Vec<Statement>, depth: usize) -> Result<(), ParseError> {
        loop {
            let line = self.line();
            match self.peek().cloned() {
                None => return self.err("a function body is not closed"),
                Some(Tok::Punct('}')) => {
                    self.i += 1;
                    return Ok(());
                }
                Some(Tok::Punct('{')) => {
                    if depth >= MAX_NESTING {
                        return self.err(format!("`{{ }}` blocks nested more than {MAX_NESTING} deep"));
                    }
                    self.i += 1;
                    let mut block = Vec::new();
                    self.body(&mut block, depth + 1)?;
                    self.blocks += 1;
                    scope_registers(&mut block, self.blocks);
                    out.extend(block);
                }
                Some(Tok::Punct('@')) => out.push(Statement::Instruction(self.instruction()?)),
                Some(Tok::Word(w)) if SPACES.contains(&w) => {
                    out.extend(self.variables()?.into_iter().map(Statement::Var));
                }
                Some(Tok::Word(w)) if LINE_DIRECTIVES.contains(&w) => {
                    self.i += 1;
                    self.rest_of_line();
                    out.push(Statement::Directive(Directive { name: w.into(), line }));
                }
                Some(Tok::Word(w)) if w.starts_with('.') => {
                    self.i += 1;
                    self.skip_statement()?;
                    out.push(Statement::Directive(Directive { name: w.into(), line }));
                }
                Some(Tok::Word(w)) if self.toks.get(self.i + 1).map(|t| &t.tok) == Some(&Tok::Punct(':')) => {
                    self.i += 2;
                    out.push(Statement::Label { name: w.to_string(), line });
                }
                Some(Tok::Word(_)) => out.push(Statement::Instruction(self.instruction()?)),
                Some(t) => return self.err(format!("unexpected {} in a function body", describe(&t))),
            }
        }
    }

    fn instruction(&mut self) -> Result<Instruction, ParseError> {
        let line = self.line();
        let start = self.i;
        let guard = if self.eat('@') {
            let neg = self.eat('!');
            Some((neg, self.word("a guard predicate")?.to_string()))
        } else {
            None
        };
        let opcode = self.word("an opcode")?.to_string();
        // Operands: token runs separated by top-level commas, up to `;`.
        let mut operands = Vec::new();
        let mut current: Vec<Tok<'a>> = Vec::new();
        let mut depth = 0i32;
        loop {
            let Some(tok) = self.next() else {
                return Err(ParseError { line, message: format!("`{opcode}` is not terminated by `;`") });
            };
            match tok {
                Tok::Punct(';') if depth == 0 => {
                    if !current.is_empty() {
                        operands.push(operand(&current, line, 0)?);
                    }
                    break;
                }
                Tok::Punct(',') if depth == 0 => {
                    operands.push(operand(&current, line, 0)?);
                    current.clear();
                }
                Tok::Punct('{') | Tok::Punct('[') => {
                    depth += 1;
                    current.push(tok);
                }
                Tok::Punct('}') | Tok::Punct(']') => {
                    depth -= 1;
                    current.push(tok);
                }
                _ => current.push(tok),
            }
        }
        let text = self.toks[start..self.i]
            .iter()
            .map(|t| match &t.tok {
                Tok::Word(w) | Tok::Str(w) => w.to_string(),
                Tok::Punct(c) => c.to_string(),
            })
            .fold(String::new(), |mut s, t| {
                // Spaces only between words, as the statement would be written.
                let tight =
                    matches!(t.as_str(), "," | ";" | "]" | "}" | "+" | "|" | ")") || s.ends_with(['[', '{', '+', '-', '@', '!', '|', '(']) || s.is_empty();
                if !tight {
                    s.push(' ');
                }
                s.push_str(&t);
                s
            });
        Ok(Instruction { line, guard, opcode, operands, text })
    }
}

/// One operand from its tokens, `depth` operands inside another.
fn operand(toks: &[Tok<'_>], line: u32, depth: usize) -> Result<Operand, ParseError> {
    if depth > MAX_NESTING {
        return Err(ParseError { line, message: format!("an operand nested more than {MAX_NESTING} deep") });
    }
    let bad = || {
        let text: String = toks
            .iter()
            .map(|t| match t {
                Tok::Word(w) | Tok::Str(w) => w.to_string(),
                Tok::Punct(c) => c.to_string(),
            })
            .collect();
        ParseError { line, message: format!("cannot read the operand `{text}`") }
    };
    match toks {
        [] => Err(ParseError { line, message: "an operand is missing".into() }),
        [Tok::Word("_")] => Ok(Operand::Sink),
        [Tok::Word(w)] => word_operand(w).ok_or_else(bad),
        [Tok::Punct('-'), Tok::Word(w)] => match word_operand(w) {
            Some(Operand::Int(v)) => Ok(Operand::Int(-v)),
            Some(Operand::Float(v)) => Ok(Operand::Float(-v)),
            _ => Err(bad()),
        },
        [Tok::Punct('!'), rest @ ..] => Ok(Operand::Not(Box::new(operand(rest, line, depth + 1)?))),
        [Tok::Word(a), Tok::Punct('|'), Tok::Word(b)] => Ok(Operand::Pair(a.to_string(), b.to_string())),
        [Tok::Word(name), Tok::Punct(sign @ ('+' | '-')), rest @ ..] if !name.starts_with('%') => {
            let offset = signed_offset(*sign, rest).ok_or_else(bad)?;
            Ok(Operand::Symbol { name: name.to_string(), offset })
        }
        [Tok::Punct('['), inner @ .., Tok::Punct(']')] => match inner {
            [Tok::Word(w)] => match parse_int(w) {
                Some(v) => Ok(Operand::Address { base: None, offset: i64::try_from(v).map_err(|_| bad())? }),
                None => Ok(Operand::Address { base: Some(w.to_string()), offset: 0 }),
            },
            [Tok::Word(w), Tok::Punct(sign @ ('+' | '-')), rest @ ..] => {
                let offset = signed_offset(*sign, rest).ok_or_else(bad)?;
                Ok(Operand::Address { base: Some(w.to_string()), offset })
            }
            _ => Err(bad()),
        },
        [Tok::Punct('{'), inner @ .., Tok::Punct('}')] => {
            let mut parts = Vec::new();
            for piece in inner.split(|t| *t == Tok::Punct(',')) {
                parts.push(operand(piece, line, depth + 1)?);
            }
            Ok(Operand::Vector(parts))
        }
        _ => Err(bad()),
    }
}

/// The offset after `+` or `-` in `name+4`, `[%rd1+-8]`.
fn signed_offset(sign: char, rest: &[Tok<'_>]) -> Option<i64> {
    let (neg, w) = match rest {
        [Tok::Word(w)] => (sign == '-', *w),
        [Tok::Punct('-'), Tok::Word(w)] => (sign == '+', *w),
        _ => return None,
    };
    let v = i64::try_from(parse_int(w)?).ok()?;
    Some(if neg { v.wrapping_neg() } else { v })
}

/// A single-word operand: register, number or symbol.
fn word_operand(w: &str) -> Option<Operand> {
    if w.starts_with('%') {
        return Some(Operand::Reg(w.to_string()));
    }
    if w.starts_with(|c: char| c.is_ascii_digit()) {
        return number(w);
    }
    Some(Operand::Symbol { name: w.to_string(), offset: 0 })
}

/// PTX literals: `0fXXXXXXXX` / `0dXXXXXXXXXXXXXXXX` float bits, integers
/// in hex, octal, binary or decimal (an optional `U` suffix), decimal floats.
fn number(w: &str) -> Option<Operand> {
    let hex_bits = |digits: &str, n: usize| (digits.len() == n).then(|| u64::from_str_radix(digits, 16).ok()).flatten();
    if let Some(d) = w.strip_prefix("0f").or_else(|| w.strip_prefix("0F")) {
        return hex_bits(d, 8).map(|b| Operand::F32(b as u32));
    }
    if let Some(d) = w.strip_prefix("0d").or_else(|| w.strip_prefix("0D")) {
        return hex_bits(d, 16).map(Operand::F64);
    }
    if let Some(v) = parse_int(w) {
        return Some(Operand::Int(v));
    }
    w.parse::<f64>().ok().filter(|_| w.contains(['.', 'e', 'E'])).map(Operand::Float)
}

/// An unsigned integer literal as PTX writes it.
fn parse_int(w: &str) -> Option<i128> {
    let w = w.strip_suffix(['U', 'u']).unwrap_or(w);
    let (digits, radix) = if let Some(d) = w.strip_prefix("0x").or_else(|| w.strip_prefix("0X")) {
        (d, 16)
    } else if let Some(d) = w.strip_prefix("0b").or_else(|| w.strip_prefix("0B")) {
        (d, 2)
    } else if w.len() > 1 && w.starts_with('0') {
        (&w[1..], 8)
    } else {
        (w, 10)
    };
    if digits.is_empty() || !digits.chars().all(|c| c.is_digit(radix)) {
        return None;
    }
    u64::from_str_radix(digits, radix).ok().map(i128::from)
}

/// Fundamental type names (PTX ISA, "Fundamental Types").
fn is_type_name(w: &str) -> bool {
    matches!(
        w,
        ".b8"
            | ".b16"
            | ".b32"
            | ".b64"
            | ".b128"
            | ".u8"
            | ".u16"
            | ".u32"
            | ".u64"
            | ".s8"
            | ".s16"
            | ".s32"
            | ".s64"
            | ".f16"
            | ".f16x2"
            | ".bf16"
            | ".bf16x2"
            | ".f32"
            | ".f64"
            | ".pred"
            | ".texref"
            | ".samplerref"
            | ".surfref"
    )
}

/// Renames the registers that the nested block `block` declares (its
/// `.reg`s not renamed by a block inside it) to `NAME#k#`, in all of the
/// block: declarations, operands, guards. A register range `%r<4>` renames
/// `%r0`..`%r3`.
fn scope_registers(block: &mut [Statement], k: u32) {
    let mut locals: Vec<(String, Option<u32>)> = Vec::new();
    for st in block.iter_mut() {
        if let Statement::Var(v) = st {
            if v.space == ".reg" && !v.name.contains('#') {
                locals.push((v.name.clone(), v.range));
                v.name = format!("{}#{k}#", v.name);
            }
        }
    }
    if locals.is_empty() {
        return;
    }
    let rename = |name: &mut String| {
        for (base, range) in &locals {
            let hit = match range {
                None => name == base,
                Some(n) => name
                    .strip_prefix(base.as_str())
                    .is_some_and(|rest| !rest.is_empty() && rest.bytes().all(|b| b.is_ascii_digit()) && rest.parse::<u32>().is_ok_and(|i| i < *n)),
            };
            if hit {
                let rest = name[base.len()..].to_string();
                *name = format!("{base}#{k}#{rest}");
                return;
            }
        }
    };
    fn operand(o: &mut Operand, rename: &dyn Fn(&mut String)) {
        match o {
            // A register's name need not start with `%` (`.reg .b16 tmp;`,
            // as LLVM writes a block's scratch register).
            Operand::Reg(r) | Operand::Symbol { name: r, offset: 0 } => rename(r),
            Operand::Address { base: Some(b), .. } => rename(b),
            Operand::Vector(v) => v.iter_mut().for_each(|x| operand(x, rename)),
            Operand::Not(x) => operand(x, rename),
            Operand::Pair(p, q) => {
                rename(p);
                rename(q);
            }
            _ => {}
        }
    }
    for st in block.iter_mut() {
        if let Statement::Instruction(i) = st {
            if let Some((_, g)) = &mut i.guard {
                rename(g);
            }
            i.operands.iter_mut().for_each(|o| operand(o, &rename));
        }
    }
}

/// A name a `.reg` declaration of the function makes (after
/// `scope_registers`) is a register wherever it is an operand, `%` or not:
/// the PTX ISA lets an identifier name a register (`.reg .b16 tmp;`, which
/// LLVM's NVPTX back end declares in a block to split a 32-bit register:
/// `mov.b32 {tmp, %rs16}, %r20;`).
fn registers_by_name(body: &mut [Statement]) {
    let regs: Vec<(String, Option<u32>)> = body
        .iter()
        .filter_map(|st| match st {
            Statement::Var(v) if v.space == ".reg" && !v.name.starts_with('%') => Some((v.name.clone(), v.range)),
            _ => None,
        })
        .collect();
    if regs.is_empty() {
        return;
    }
    let is_reg = |name: &str| {
        regs.iter().any(|(base, range)| match range {
            None => name == base,
            Some(n) => name
                .strip_prefix(base.as_str())
                .is_some_and(|rest| !rest.is_empty() && rest.bytes().all(|b| b.is_ascii_digit()) && rest.parse::<u32>().is_ok_and(|i| i < *n)),
        })
    };
    fn operand(o: &mut Operand, is_reg: &dyn Fn(&str) -> bool) {
        match o {
            Operand::Symbol { name, offset: 0 } if is_reg(name) => *o = Operand::Reg(std::mem::take(name)),
            Operand::Vector(v) => v.iter_mut().for_each(|x| operand(x, is_reg)),
            Operand::Not(x) => operand(x, is_reg),
            _ => {}
        }
    }
    for st in body.iter_mut() {
        if let Statement::Instruction(i) = st {
            i.operands.iter_mut().for_each(|o| operand(o, &is_reg));
        }
    }
}

fn describe(t: &Tok<'_>) -> String {
    match t {
        Tok::Word(w) => format!("`{w}`"),
        Tok::Str(s) => format!("the string {s}"),
        Tok::Punct(c) => format!("`{c}`"),
    }
}

#[cfg(test)]
mod tests;
