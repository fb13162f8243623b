//! PTX syntax ([`crate::ptx`]) to the emulator's compact instruction form.
//!
//! Decoding happens once per module load: registers become indices into a
//! warp's register file, labels become instruction indices, symbols become
//! addresses, immediates become the bits the instruction's type reads, and
//! each opcode with its modifiers becomes one [`Op`] variant. Execution
//! ([`super::exec`]) then never looks at text. Anything outside the
//! supported subset is an [`Error::BadPtx`] naming the line, the instruction
//! and the part that is not supported; nothing is skipped silently.

use std::collections::BTreeMap;
use std::sync::Arc;

mod ops;

use super::cfg;
use super::inst::*;
use crate::error::{Error, Result};
use crate::ptx::{self, Operand, Statement};

impl Program {
    /// Parses and decodes a module.
    pub(crate) fn load(text: &str) -> Result<Program> {
        let module = ptx::parse(text).map_err(|e| Error::BadPtx(e.to_string()))?;
        if let Some(d) = module.directives.iter().find(|d| !matches!(d.name.as_str(), ".file" | ".loc")) {
            return Err(unsupported(d.line, &format!("the module-scope directive `{}`", d.name)));
        }
        let mut shared = Layout::default();
        for v in &module.variables {
            match v.space.as_str() {
                ".shared" => shared.add(v, None)?,
                _ => return Err(unsupported(v.line, &format!("module-scope `{}` variables (`{}`)", v.space, v.name))),
            }
        }
        let kernels = module.entries().map(|f| decode_kernel(f, &shared).map(Arc::new)).collect::<Result<Vec<_>>>()?;
        Ok(Program { kernels })
    }
}

fn unsupported(line: u32, what: &str) -> Error {
    Error::BadPtx(format!("line {line}: the emulator does not support {what}"))
}

/// Variables of one state space laid out one after another.
#[derive(Clone, Debug, Default)]
struct Layout {
    bytes: usize,
    offsets: BTreeMap<String, usize>,
}

impl Layout {
    /// Lays out `v`, a variable of kernel `kernel` (`None`: of the module),
    /// refusing a `.shared` or `.local` space that grows past what a GPU
    /// allows ([`MAX_SHARED_BYTES`], [`MAX_LOCAL_BYTES`]).
    fn add(&mut self, v: &ptx::Variable, kernel: Option<&str>) -> Result<()> {
        let elem = type_bytes(&v.ty).ok_or_else(|| unsupported(v.line, &format!("variables of type `{}`", v.ty)))? * v.vector.unwrap_or(1) as usize;
        let mut count = 1usize;
        for d in &v.dims {
            let Some(n) = d else {
                return Err(unsupported(v.line, &format!("the unsized array `{}` (dynamic shared memory)", v.name)));
            };
            count = count.saturating_mul(usize::try_from(*n).unwrap_or(usize::MAX));
        }
        if v.initialized {
            return Err(unsupported(v.line, &format!("the initialised variable `{}`", v.name)));
        }
        let align = v.align.map_or(elem, |a| a as usize).max(1);
        let offset = self.bytes.div_ceil(align) * align;
        let size = elem.saturating_mul(count);
        self.bytes = offset.saturating_add(size);
        let (max, what) = match v.space.as_str() {
            ".shared" => (MAX_SHARED_BYTES, "shared memory per block (48 KiB, the static shared memory of every GPU)"),
            _ => (MAX_LOCAL_BYTES, "local memory per thread (512 KiB, CUDA's limit)"),
        };
        if self.bytes > max {
            let owner = kernel.map_or("the module".to_string(), |k| format!("kernel `{k}`"));
            return Err(Error::BadPtx(format!(
                "line {}: {owner}: `{} {}` ({size} bytes) brings its {} memory to {} bytes, more than the {max} bytes of {what}",
                v.line,
                v.space,
                v.name,
                &v.space[1..],
                self.bytes
            )));
        }
        if self.offsets.insert(v.name.clone(), offset).is_some() {
            return Err(Error::BadPtx(format!("line {}: `{}` is declared twice", v.line, v.name)));
        }
        Ok(())
    }
}

fn type_bytes(ty: &str) -> Option<usize> {
    Ty::parse(ty.trim_start_matches('.')).filter(|t| *t != Ty::Pred).map(|t| t.bits() as usize / 8)
}

/// What a register name stands for.
#[derive(Clone, Copy, Debug)]
enum RegInfo {
    Value { idx: u32, bits: u8 },
    Pred(u32),
}

/// What a symbol names: an address in a state space, or a label.
#[derive(Clone, Copy, Debug)]
enum Sym {
    Var(Space, usize),
    Label(u32),
}

struct Ctx<'a> {
    regs: BTreeMap<String, RegInfo>,
    nregs: u32,
    npreds: u32,
    /// A predicate register no instruction writes (always false): what a
    /// predicate immediate reads (`mov.pred %p1, 0;`, `xor.pred %p2, %p1,
    /// -1;`, as LLVM's NVPTX backend emits them).
    false_pred: u32,
    syms: BTreeMap<String, Sym>,
    line: u32,
    text: &'a str,
    opcode: &'a str,
}

fn decode_kernel(f: &ptx::Function, module_shared: &Layout) -> Result<Kernel> {
    let Some(body) = &f.body else {
        return Err(unsupported(f.line, &format!("the kernel declaration `{}` without a body", f.name)));
    };
    let mut cx = Ctx { regs: BTreeMap::new(), nregs: 0, npreds: 0, false_pred: 0, syms: BTreeMap::new(), line: f.line, text: "", opcode: "" };

    // Parameters: each at its alignment, as the driver lays them out.
    let mut params = Vec::new();
    let mut param_bytes = 0usize;
    for p in &f.params {
        let elem = type_bytes(&p.ty).ok_or_else(|| unsupported(p.line, &format!("parameters of type `{}`", p.ty)))?;
        let count = p.dims.iter().fold(1usize, |n, d| n.saturating_mul(d.map_or(0, |d| usize::try_from(d).unwrap_or(usize::MAX))));
        let size = elem.saturating_mul(count.max(1)).saturating_mul(p.vector.unwrap_or(1) as usize);
        let align = p.align.map_or(elem, |a| a as usize).max(1);
        let offset = param_bytes.div_ceil(align).saturating_mul(align);
        params.push((offset, size));
        param_bytes = offset.saturating_add(size);
        if param_bytes > MAX_PARAM_BYTES {
            return Err(Error::BadPtx(format!(
                "line {}: kernel `{}`: `.param {}` ({size} bytes) brings its parameters to {param_bytes} bytes, more than CUDA's limit of {MAX_PARAM_BYTES}",
                p.line, f.name, p.name
            )));
        }
        cx.syms.insert(p.name.clone(), Sym::Var(Space::Param, offset));
    }

    // Declarations, labels and instruction indices.
    let mut shared = module_shared.clone();
    let mut local = Layout::default();
    let mut insts = Vec::new();
    for s in body {
        match s {
            Statement::Var(v) => match v.space.as_str() {
                ".reg" => declare_regs(&mut cx, v, &f.name)?,
                ".shared" => shared.add(v, Some(&f.name))?,
                ".local" => local.add(v, Some(&f.name))?,
                _ => return Err(unsupported(v.line, &format!("`{}` declarations inside a kernel", v.space))),
            },
            Statement::Label { name, line } => {
                if cx.syms.insert(name.clone(), Sym::Label(insts.len() as u32)).is_some() {
                    return Err(Error::BadPtx(format!("line {line}: label `{name}` is defined twice")));
                }
            }
            Statement::Instruction(i) => insts.push(i),
            Statement::Directive(d) => {
                if !matches!(d.name.as_str(), ".pragma" | ".loc" | ".file") {
                    return Err(unsupported(d.line, &format!("the directive `{}` inside a kernel", d.name)));
                }
            }
        }
    }
    cx.false_pred = cx.npreds;
    cx.npreds += 1;
    for (name, off) in &shared.offsets {
        cx.syms.entry(name.clone()).or_insert(Sym::Var(Space::Shared, *off));
    }
    for (name, off) in &local.offsets {
        cx.syms.entry(name.clone()).or_insert(Sym::Var(Space::Local, *off));
    }

    let mut code = Vec::with_capacity(insts.len());
    for i in &insts {
        cx.line = i.line;
        cx.text = &i.text;
        cx.opcode = &i.opcode;
        let guard = match &i.guard {
            None => None,
            Some((neg, name)) => Some(PredSrc { idx: cx.pred_reg(name)?, neg: *neg }),
        };
        let op = cx.instruction(i)?;
        code.push(Inst { op, guard });
    }
    set_reconvergence_points(&mut code);

    let dims = |name: &str| -> Result<Option<[u32; 3]>> {
        match f.tuning.iter().find(|(n, _)| n == name) {
            None => Ok(None),
            Some((_, v)) if (1..=3).contains(&v.len()) => {
                let mut d = [1u32; 3];
                for (slot, x) in d.iter_mut().zip(v) {
                    *slot = u32::try_from(*x).unwrap_or(u32::MAX);
                }
                Ok(Some(d))
            }
            Some(_) => Err(Error::BadPtx(format!("line {}: `{name}` needs 1 to 3 dimensions", f.line))),
        }
    };
    for (name, _) in &f.tuning {
        if !matches!(name.as_str(), ".reqntid" | ".maxntid" | ".minnctapersm" | ".maxnreg" | ".noreturn" | ".maxnctapersm") {
            return Err(unsupported(f.line, &format!("the kernel directive `{name}`")));
        }
    }
    Ok(Kernel {
        name: f.name.clone(),
        lines: insts.iter().map(|i| i.line).collect(),
        texts: insts.iter().map(|i| i.text.clone()).collect(),
        code,
        regs: cx.nregs as usize,
        preds: cx.npreds as usize,
        params,
        param_bytes,
        shared_bytes: shared.bytes,
        local_bytes: local.bytes,
        reqntid: dims(".reqntid")?,
        maxntid: dims(".maxntid")?,
    })
}

fn declare_regs(cx: &mut Ctx<'_>, v: &ptx::Variable, kernel: &str) -> Result<()> {
    if v.vector.is_some() || !v.dims.is_empty() {
        return Err(unsupported(v.line, &format!("vector or array registers (`{}`)", v.name)));
    }
    let ty = Ty::parse(v.ty.trim_start_matches('.')).ok_or_else(|| unsupported(v.line, &format!("registers of type `{}`", v.ty)))?;
    // Checked before the names are made: `%rd<100000000>` would make 10^8.
    let total = (cx.nregs as usize + cx.npreds as usize).saturating_add(v.range.map_or(1, |n| n as usize));
    if total > MAX_REGISTERS {
        let decl = v.range.map_or(v.name.clone(), |n| format!("{}<{n}>", v.name));
        return Err(Error::BadPtx(format!(
            "line {}: kernel `{kernel}`: `.reg {} {decl}` brings its registers to {total}, more than the emulator's limit of {MAX_REGISTERS}",
            v.line, v.ty
        )));
    }
    let names: Vec<String> = match v.range {
        Some(n) => (0..n).map(|i| format!("{}{i}", v.name)).collect(),
        None => vec![v.name.clone()],
    };
    for name in names {
        let info = if ty == Ty::Pred {
            cx.npreds += 1;
            RegInfo::Pred(cx.npreds - 1)
        } else {
            cx.nregs += 1;
            RegInfo::Value { idx: cx.nregs - 1, bits: ty.bits() as u8 }
        };
        if cx.regs.insert(name.clone(), info).is_some() {
            return Err(Error::BadPtx(format!("line {}: register `{name}` is declared twice", v.line)));
        }
    }
    Ok(())
}

/// The modifiers of an opcode, consumed as the decoder recognises them;
/// any left over is reported.
struct Mods<'a> {
    items: Vec<&'a str>,
    used: Vec<bool>,
}

impl<'a> Mods<'a> {
    fn new(opcode: &'a str) -> (&'a str, Mods<'a>) {
        let mut parts = opcode.split('.');
        let base = parts.next().unwrap_or("");
        let items: Vec<&str> = parts.collect();
        let used = vec![false; items.len()];
        (base, Mods { items, used })
    }

    /// Consumes `m` if present.
    fn has(&mut self, m: &str) -> bool {
        match self.items.iter().position(|x| *x == m) {
            Some(i) if !self.used[i] => {
                self.used[i] = true;
                true
            }
            _ => false,
        }
    }

    /// Consumes the first unused modifier in `set`.
    fn one_of(&mut self, set: &[&'a str]) -> Option<&'a str> {
        let i = (0..self.items.len()).find(|&i| !self.used[i] && set.contains(&self.items[i]))?;
        self.used[i] = true;
        Some(self.items[i])
    }

    /// Consumes every modifier `keep` accepts (cache operators, memory
    /// ordering, scopes: nothing the emulator's one-thread-at-a-time
    /// execution distinguishes).
    fn drop_all(&mut self, keep: impl Fn(&str) -> bool) {
        for i in 0..self.items.len() {
            if !self.used[i] && keep(self.items[i]) {
                self.used[i] = true;
            }
        }
    }

    /// Consumes the type modifiers, in order.
    fn types(&mut self) -> Vec<Result<Ty, &'a str>> {
        let mut out = Vec::new();
        for i in 0..self.items.len() {
            if self.used[i] {
                continue;
            }
            let m = self.items[i];
            if let Some(t) = Ty::parse(m) {
                self.used[i] = true;
                out.push(Ok(t));
            } else if matches!(m, "f16" | "f16x2" | "bf16" | "bf16x2" | "b128" | "tf32" | "u16x2" | "s16x2" | "f32x2") {
                self.used[i] = true;
                out.push(Err(m));
            }
        }
        out
    }

    fn left(&self) -> Option<&'a str> {
        (0..self.items.len()).find(|&i| !self.used[i]).map(|i| self.items[i])
    }
}

/// Cache, eviction and memory-ordering qualifiers of loads, stores and
/// atomics, which the emulator's sequential execution makes moot.
fn is_ordering_or_cache(m: &str) -> bool {
    matches!(m, "ca" | "cg" | "cs" | "lu" | "cv" | "wb" | "wt" | "volatile" | "relaxed" | "acquire" | "release" | "acq_rel" | "weak" | "cta" | "gpu" | "sys")
        || ((m.starts_with("L1::") || m.starts_with("L2::")) && m != "L2::cache_hint")
}

impl<'a> Ctx<'a> {
    fn err(&self, what: String) -> Error {
        Error::BadPtx(format!("line {}: {what} (in `{}`)", self.line, self.text))
    }

    fn unsupported(&self, what: &str) -> Error {
        self.err(format!("the emulator does not support {what}"))
    }

    fn pred_reg(&self, name: &str) -> Result<u32> {
        match self.regs.get(name) {
            Some(RegInfo::Pred(i)) => Ok(*i),
            Some(RegInfo::Value { .. }) => Err(self.err(format!("`{name}` is not a predicate register"))),
            None => Err(self.err(format!("undeclared register `{name}`"))),
        }
    }

    fn pred_src(&self, o: &Operand) -> Result<PredSrc> {
        match o {
            Operand::Reg(r) => Ok(PredSrc { idx: self.pred_reg(r)?, neg: false }),
            // An immediate: 0 is false, anything else true.
            Operand::Int(v) => Ok(PredSrc { idx: self.false_pred, neg: *v != 0 }),
            Operand::Not(inner) => match inner.as_ref() {
                Operand::Reg(r) => Ok(PredSrc { idx: self.pred_reg(r)?, neg: true }),
                _ => Err(self.err(format!("`{o}` is not a predicate"))),
            },
            _ => Err(self.err(format!("`{o}` is not a predicate"))),
        }
    }

    fn pred_dst(&self, o: &Operand) -> Result<Option<u32>> {
        match o {
            Operand::Sink => Ok(None),
            Operand::Reg(r) => Ok(Some(self.pred_reg(r)?)),
            _ => Err(self.err(format!("`{o}` is not a predicate register"))),
        }
    }

    fn value_reg(&self, name: &str) -> Result<(u32, u8)> {
        match self.regs.get(name) {
            Some(RegInfo::Value { idx, bits }) => Ok((*idx, *bits)),
            Some(RegInfo::Pred(_)) => Err(self.err(format!("the predicate `{name}` is used as a value"))),
            None => Err(self.err(format!("undeclared register `{name}`"))),
        }
    }

    /// A destination register of an instruction of type `ty`.
    fn dst(&self, o: &Operand, ty: Ty) -> Result<Dst> {
        let Operand::Reg(r) = o else {
            return Err(self.err(format!("the destination `{o}` is not a register")));
        };
        let (reg, reg_bits) = self.value_reg(r)?;
        let bits = ty.bits() as u8;
        if reg_bits < bits {
            return Err(self.err(format!("`{r}` has {reg_bits} bits, too few for .{}", ty_name(ty))));
        }
        let sext = if ty.is_signed() && reg_bits > bits { bits } else { 0 };
        Ok(Dst { reg, sext, reg_bits })
    }

    fn dst_or_sink(&self, o: &Operand, ty: Ty) -> Result<Option<Dst>> {
        match o {
            Operand::Sink => Ok(None),
            _ => self.dst(o, ty).map(Some),
        }
    }

    /// A source operand read as type `ty`.
    fn src(&self, o: &Operand, ty: Ty) -> Result<Src> {
        let bits = ty.bits();
        let mask = |v: u64| if bits >= 64 { v } else { v & ((1u64 << bits) - 1) };
        match o {
            Operand::Reg(r) => {
                if let Some(s) = special(r) {
                    return Ok(Src::Special(s));
                }
                if !self.regs.contains_key(r.as_str()) && is_special_name(r) {
                    return Err(self.unsupported(&format!("the special register `{r}`")));
                }
                let (idx, reg_bits) = self.value_reg(r)?;
                if u32::from(reg_bits) < bits {
                    return Err(self.err(format!("`{r}` has {reg_bits} bits, too few for .{}", ty_name(ty))));
                }
                Ok(Src::Reg(idx))
            }
            Operand::Int(v) => Ok(Src::Imm(match ty {
                Ty::F32 => (*v as f32).to_bits() as u64,
                Ty::F64 => (*v as f64).to_bits(),
                _ => mask(*v as u64),
            })),
            Operand::F32(b) => Ok(Src::Imm(match ty {
                Ty::F64 => f64::from(f32::from_bits(*b)).to_bits(),
                _ => mask(u64::from(*b)),
            })),
            Operand::F64(b) => Ok(Src::Imm(match ty {
                Ty::F32 => (f64::from_bits(*b) as f32).to_bits() as u64,
                _ => mask(*b),
            })),
            Operand::Float(x) => match ty {
                Ty::F32 => Ok(Src::Imm((*x as f32).to_bits() as u64)),
                Ty::F64 => Ok(Src::Imm(x.to_bits())),
                _ => Err(self.err(format!("the floating-point literal `{o}` needs a floating-point type"))),
            },
            Operand::Symbol { name, offset } => match self.syms.get(name) {
                Some(Sym::Var(_, addr)) => Ok(Src::Imm(mask((*addr as u64).wrapping_add(*offset as u64)))),
                Some(Sym::Label(_)) => Err(self.err(format!("the label `{name}` is used as a value"))),
                None => Err(self.err(format!("undeclared symbol `{name}`"))),
            },
            _ => Err(self.err(format!("`{o}` is not a value operand"))),
        }
    }

    /// The address operand of a memory instruction in `space`.
    fn addr(&self, o: &Operand, space: Space) -> Result<Addr> {
        let Operand::Address { base, offset } = o else {
            return Err(self.err(format!("`{o}` is not an address `[...]`")));
        };
        let Some(base) = base else {
            return Ok(Addr { base: None, offset: *offset });
        };
        if base.starts_with('%') {
            let (idx, _) = self.value_reg(base)?;
            return Ok(Addr { base: Some(idx), offset: *offset });
        }
        match self.syms.get(base.as_str()) {
            Some(Sym::Var(s, a)) if *s == space => Ok(Addr { base: None, offset: *a as i64 + offset }),
            Some(Sym::Var(Space::Shared, a)) if space == Space::Generic => Ok(Addr { base: None, offset: (SHARED_WINDOW + *a as u64) as i64 + offset }),
            Some(Sym::Var(Space::Local, a)) if space == Space::Generic => Ok(Addr { base: None, offset: (LOCAL_WINDOW + *a as u64) as i64 + offset }),
            Some(Sym::Var(s, _)) => Err(self.err(format!("`{base}` is in the {} space, the instruction accesses {}", s.name(), space.name()))),
            Some(Sym::Label(_)) => Err(self.err(format!("the label `{base}` is used as an address"))),
            None => Err(self.err(format!("undeclared symbol `{base}`"))),
        }
    }

    fn operands<const N: usize>(&self, i: &'a ptx::Instruction) -> Result<&'a [Operand; N]> {
        i.operands.as_slice().try_into().map_err(|_| self.err(format!("`{}` takes {N} operands, {} given", i.opcode, i.operands.len())))
    }

    /// The one type modifier of an instruction that takes one.
    fn one_type(&self, m: &mut Mods<'a>) -> Result<Ty> {
        let types = m.types();
        match types.as_slice() {
            [Ok(t)] => Ok(*t),
            [Err(t)] => Err(self.unsupported(&format!("the type `.{t}`"))),
            [] => Err(self.err(format!("`{}` has no type", self.opcode))),
            _ => Err(self.err(format!("`{}` has more than one type", self.opcode))),
        }
    }

    fn finish(&self, m: &Mods<'a>) -> Result<()> {
        match m.left() {
            None => Ok(()),
            Some(x) => Err(self.unsupported(&format!("`.{x}` on `{}`", self.opcode))),
        }
    }

    fn instruction(&self, i: &'a ptx::Instruction) -> Result<Op> {
        let (base, mut m) = Mods::new(&i.opcode);
        let m = &mut m;
        let op = match base {
            "add" | "sub" | "mul" | "div" | "rem" | "min" | "max" | "and" | "or" | "xor" | "shl" | "shr" => self.binary(base, m, i)?,
            "mad" | "fma" => self.mad(base, m, i)?,
            "neg" | "abs" | "not" | "cnot" | "popc" | "clz" | "brev" => self.unary(base, m, i)?,
            "sqrt" | "rcp" | "rsqrt" | "sin" | "cos" | "lg2" | "ex2" | "tanh" => self.float_unary(base, m, i)?,
            "bfe" => {
                let ty = self.one_type(m)?;
                if !matches!(ty, Ty::U32 | Ty::S32 | Ty::U64 | Ty::S64) {
                    return Err(self.unsupported(&format!("`bfe.{}`", ty_name(ty))));
                }
                let [d, a, b, c] = self.operands(i)?;
                Op::Bfe { k: ty.kind(), d: self.dst(d, ty)?, a: self.src(a, ty)?, b: self.src(b, Ty::U32)?, c: self.src(c, Ty::U32)? }
            }
            "shf" => {
                let left = match (m.has("l"), m.has("r")) {
                    (true, false) => true,
                    (false, true) => false,
                    _ => return Err(self.unsupported(&format!("`{}`", i.opcode))),
                };
                let clamp = match (m.has("clamp"), m.has("wrap")) {
                    (true, false) => true,
                    (false, true) => false,
                    _ => return Err(self.unsupported(&format!("`{}`", i.opcode))),
                };
                let ty = self.one_type(m)?;
                if ty != Ty::B32 {
                    return Err(self.unsupported(&format!("`shf.{}`", ty_name(ty))));
                }
                let [d, a, b, c] = self.operands(i)?;
                Op::Shf { left, clamp, d: self.dst(d, ty)?, a: self.src(a, ty)?, b: self.src(b, ty)?, c: self.src(c, Ty::U32)? }
            }
            "bfi" => {
                let ty = self.one_type(m)?;
                if !matches!(ty, Ty::B32 | Ty::B64) {
                    return Err(self.unsupported(&format!("`bfi.{}`", ty_name(ty))));
                }
                let [d, a, b, c, e] = self.operands(i)?;
                Op::Bfi {
                    bits: ty.bits() as u8,
                    d: self.dst(d, ty)?,
                    a: self.src(a, ty)?,
                    b: self.src(b, ty)?,
                    c: self.src(c, Ty::U32)?,
                    e: self.src(e, Ty::U32)?,
                }
            }
            "mov" => self.mov(m, i)?,
            "cvt" => self.cvt(m, i)?,
            "cvta" => {
                let to_generic = !m.has("to");
                let space = self.space(m)?;
                if !matches!(space, Space::Global | Space::Shared | Space::Local) {
                    return Err(self.unsupported(&format!("`cvta` for the {} space", space.name())));
                }
                let ty = self.one_type(m)?;
                if !matches!(ty, Ty::U32 | Ty::U64) {
                    return Err(self.unsupported(&format!("`cvta.{}`", ty_name(ty))));
                }
                let [d, a] = self.operands(i)?;
                Op::Cvta { to_generic, space, bits: ty.bits() as u8, d: self.dst(d, ty)?, a: self.src(a, ty)? }
            }
            "setp" => self.setp(m, i)?,
            "selp" => {
                let ty = self.one_type(m)?;
                let [d, a, b, c] = self.operands(i)?;
                Op::Selp { bits: ty.bits() as u8, d: self.dst(d, ty)?, a: self.src(a, ty)?, b: self.src(b, ty)?, c: self.pred_src(c)? }
            }
            "ld" | "ldu" => self.load(m, i)?,
            "st" => self.store(m, i)?,
            "atom" | "red" => self.atom(base == "atom", m, i)?,
            "bra" => {
                m.has("uni");
                let [target] = self.operands(i)?;
                let Operand::Symbol { name, offset: 0 } = target else {
                    return Err(self.err(format!("`{target}` is not a label")));
                };
                match self.syms.get(name.as_str()) {
                    Some(Sym::Label(pc)) => Op::Bra { target: *pc, rpc: NO_PC },
                    _ => return Err(self.err(format!("undefined label `{name}`"))),
                }
            }
            "ret" | "exit" => {
                m.has("uni");
                self.operands::<0>(i)?;
                Op::Exit
            }
            "bar" | "barrier" => {
                m.has("cta");
                if m.has("warp") {
                    m.has("sync");
                    self.finish(m)?;
                    let [mask] = self.operands(i)?;
                    return Ok(Op::WarpSync { mask: self.src(mask, Ty::B32)? });
                }
                // `bar.sync` is `barrier.sync.aligned`; `.arrive` and `.red`
                // stay unconsumed and are reported below.
                if !m.has("sync") {
                    return Err(self.unsupported(&format!("`{}`", i.opcode)));
                }
                m.has("aligned");
                match i.operands.as_slice() {
                    [id] => Op::Bar { id: self.src(id, Ty::U32)? },
                    [_, _] => return Err(self.unsupported("barriers with a thread count")),
                    _ => return Err(self.err(format!("`{}` takes a barrier number", i.opcode))),
                }
            }
            "membar" | "fence" => {
                m.drop_all(|x| matches!(x, "cta" | "gl" | "sys" | "gpu" | "sc" | "acq_rel"));
                self.operands::<0>(i)?;
                Op::Fence
            }
            "cp" if m.has("async") => self.cp_async(m, i)?,
            "shfl" => self.shfl(m, i)?,
            "vote" => self.vote(m, i)?,
            "activemask" => {
                self.one_type(m)?;
                let [d] = self.operands(i)?;
                Op::ActiveMask { d: self.dst(d, Ty::B32)? }
            }
            _ => return Err(self.unsupported(&format!("the instruction `{}`", i.opcode))),
        };
        self.finish(m)?;
        Ok(op)
    }
}

/// The type twice as wide (for `.wide` results).
fn widen(ty: Ty) -> Ty {
    match ty {
        Ty::U16 => Ty::U32,
        Ty::S16 => Ty::S32,
        Ty::U32 => Ty::U64,
        Ty::S32 => Ty::S64,
        other => other,
    }
}

/// The bit type of one part of a packed `mov`.
fn part_type(bits: u32) -> Option<Ty> {
    match bits {
        8 => Some(Ty::B8),
        16 => Some(Ty::B16),
        32 => Some(Ty::B32),
        _ => None,
    }
}

pub(crate) fn ty_name(ty: Ty) -> &'static str {
    match ty {
        Ty::B8 => "b8",
        Ty::B16 => "b16",
        Ty::B32 => "b32",
        Ty::B64 => "b64",
        Ty::U8 => "u8",
        Ty::U16 => "u16",
        Ty::U32 => "u32",
        Ty::U64 => "u64",
        Ty::S8 => "s8",
        Ty::S16 => "s16",
        Ty::S32 => "s32",
        Ty::S64 => "s64",
        Ty::F32 => "f32",
        Ty::F64 => "f64",
        Ty::Pred => "pred",
    }
}

/// Special registers of the PTX ISA the emulator does not provide (the
/// vector forms `%tid` etc. without a component among them).
fn is_special_name(name: &str) -> bool {
    const PREFIXES: [&str; 14] = [
        "%tid",
        "%ntid",
        "%ctaid",
        "%nctaid",
        "%envreg",
        "%pm",
        "%globaltimer",
        "%cluster",
        "%nclusterid",
        "%is_explicit_cluster",
        "%total_smem_size",
        "%aggr_smem_size",
        "%dynamic_smem_size",
        "%reserved_smem",
    ];
    PREFIXES.iter().any(|p| name.starts_with(p)) || matches!(name, "%clock_hi" | "%current_graph_exec")
}

/// A special register by name.
fn special(name: &str) -> Option<Special> {
    let axis = |s: &str| match s {
        "x" => Some(0u8),
        "y" => Some(1),
        "z" => Some(2),
        _ => None,
    };
    if let Some((reg, comp)) = name.split_once('.') {
        let a = axis(comp)?;
        return match reg {
            "%tid" => Some(Special::Tid(a)),
            "%ntid" => Some(Special::Ntid(a)),
            "%ctaid" => Some(Special::Ctaid(a)),
            "%nctaid" => Some(Special::Nctaid(a)),
            _ => None,
        };
    }
    Some(match name {
        "%laneid" => Special::LaneId,
        "%warpid" => Special::WarpId,
        "%nwarpid" => Special::NWarpId,
        "%lanemask_eq" => Special::LaneMask(Cmp::Eq),
        "%lanemask_le" => Special::LaneMask(Cmp::Le),
        "%lanemask_lt" => Special::LaneMask(Cmp::Lt),
        "%lanemask_ge" => Special::LaneMask(Cmp::Ge),
        "%lanemask_gt" => Special::LaneMask(Cmp::Gt),
        "%clock" | "%clock64" => Special::Clock,
        "%smid" => Special::SmId,
        "%nsmid" => Special::NSmId,
        "%gridid" => Special::GridId,
        _ => return None,
    })
}

/// Sets `rpc` of every branch in `code` to its immediate post-dominator
/// ([`cfg`]), or [`NO_PC`] when the paths only meet at the exit (or never
/// reach it).
pub(crate) fn set_reconvergence_points(code: &mut [Inst]) {
    let n = code.len();
    let exit = n;
    // Control-flow successors; node `n` is the virtual exit.
    let mut succ: Vec<Vec<usize>> = code
        .iter()
        .enumerate()
        .map(|(pc, inst)| {
            let next = pc + 1; // `n` past the end: falling off the end exits
            let guarded = inst.guard.is_some();
            match inst.op {
                Op::Bra { target, .. } if guarded => vec![target as usize, next],
                Op::Bra { target, .. } => vec![target as usize],
                Op::Exit if guarded => vec![exit, next],
                Op::Exit => vec![exit],
                _ => vec![next],
            }
        })
        .collect();
    succ.push(Vec::new());
    let ipdom = cfg::immediate_postdominators(&succ);
    for (pc, inst) in code.iter_mut().enumerate() {
        if let Op::Bra { rpc, .. } = &mut inst.op {
            *rpc = match ipdom[pc] {
                Some(p) if p != exit => p as u32,
                _ => NO_PC,
            };
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn kernel(body: &str) -> Result<Kernel> {
        let text = format!(
            ".version 7.0\n.target sm_80\n.address_size 64\n.visible .entry k(.param .u64 k_param_0)\n{{\n.reg .pred %p<4>;\n.reg .b16 %rs<4>;\n.reg .b32 %r<8>;\n.reg .b64 %rd<8>;\n.reg .f32 %f<4>;\n.reg .f64 %fd<4>;\n.shared .align 4 .b8 buf[64];\n{body}\nret;\n}}\n"
        );
        Program::load(&text).map(|p| Kernel::clone(&p.kernels[0]))
    }

    fn op(body: &str) -> Op {
        kernel(body).unwrap().code[0].op.clone()
    }

    fn err(body: &str) -> String {
        kernel(body).unwrap_err().to_string()
    }

    #[test]
    fn a_register_named_without_a_percent_sign_decodes() {
        // LLVM's split of a 32-bit register into halves (issue #54 item 2):
        // before the fix, "the destination `tmp` is not a register".
        let k = kernel("{\n.reg .b16 tmp;\nmov.b32 {tmp, %rs1}, %r1;\n}\n{\n.reg .b16 tmp;\nmov.b32 {%rs2, tmp}, %r2;\nmov.b16 %rs3, tmp;\n}").unwrap();
        assert_eq!(k.code.len(), 4, "three moves and ret");
        assert_eq!(k.regs, 4 + 8 + 8 + 4 + 4 + 2, "the two `tmp`s are two registers");
    }

    #[test]
    fn registers_and_immediates() {
        assert_eq!(
            op("add.s32 %r1, %r2, -1;"),
            Op::Int {
                op: IntOp::Add,
                k: IntKind { bits: 32, signed: true },
                d: Dst { reg: 5, sext: 0, reg_bits: 32 },
                a: Src::Reg(6),
                b: Src::Imm(0xFFFF_FFFF)
            }
        );
        assert_eq!(
            op("mul.hi.u16 %rs1, %rs2, -17873;"),
            Op::Int { op: IntOp::MulHi, k: IntKind { bits: 16, signed: false }, d: Dst { reg: 1, sext: 0, reg_bits: 16 }, a: Src::Reg(2), b: Src::Imm(0xBA2F) }
        );
        // A signed load into a wider register sign-extends.
        let Op::Ld { d, addr, space: Space::Global, size: 4, .. } = op("ld.global.s32 %rd1, [%rd2+-8];") else { panic!() };
        assert_eq!(d[0], Some(Dst { reg: 13, sext: 32, reg_bits: 64 }));
        assert_eq!(addr, Addr { base: Some(14), offset: -8 });
        let Op::Ld { addr, space: Space::Param, .. } = op("ld.param.u64 %rd1, [k_param_0];") else { panic!() };
        assert_eq!(addr, Addr { base: None, offset: 0 });
        assert_eq!(op("mov.u32 %r1, %tid.y;"), Op::Mov { bits: 32, d: Dst { reg: 5, sext: 0, reg_bits: 32 }, a: Src::Special(Special::Tid(1)) });
        assert_eq!(op("mov.f32 %f1, 0f3F800000;"), Op::Mov { bits: 32, d: Dst { reg: 21, sext: 0, reg_bits: 32 }, a: Src::Imm(0x3F80_0000) });
        let Op::Ld { addr, .. } = op("ld.shared.f32 %f1, [buf+8];") else { panic!() };
        assert_eq!(addr, Addr { base: None, offset: 8 });
    }

    #[test]
    fn predicate_immediates_read_a_register_that_is_always_false() {
        // %p0..%p3 are declared: the always-false register is the fifth.
        assert_eq!(op("mov.pred %p1, 0;"), Op::PredMov { d: 1, a: PredSrc { idx: 4, neg: false } });
        assert_eq!(op("xor.pred %p2, %p1, -1;"), Op::PredLogic { op: BoolOp::Xor, d: 2, a: PredSrc { idx: 1, neg: false }, b: PredSrc { idx: 4, neg: true } });
        assert_eq!(kernel("mov.pred %p1, 1;").unwrap().preds, 5);
    }

    #[test]
    fn branches_resolve_labels_and_reconvergence() {
        let k = kernel("setp.gt.s32 %p1, %r1, 0;\n@%p1 bra $L1;\nadd.s32 %r2, %r2, 1;\n$L1:\nadd.s32 %r3, %r3, 1;").unwrap();
        assert_eq!(k.code[1].op, Op::Bra { target: 3, rpc: 3 });
        assert_eq!(k.code[1].guard, Some(PredSrc { idx: 1, neg: false }));
        assert_eq!(k.lines[1], 14);
        assert_eq!(k.texts[1], "@%p1 bra $L1;");
    }

    #[test]
    fn unsupported_things_name_instruction_and_line() {
        let e = err("foo.bar.f32 %f1, %f2;");
        assert_eq!(e, "bad bundle kernels.ptx: line 13: the emulator does not support the instruction `foo.bar.f32` (in `foo.bar.f32 %f1, %f2;`)");
        assert!(err("add.rz.f32 %f1, %f2, %f3;").contains("the rounding modifier `.rz` on `add.rz.f32`"));
        assert!(err("ld.global.foo.f32 %f1, [%rd1];").contains("`.foo` on `ld.global.foo.f32`"));
        assert!(err("add.f16 %rs1, %rs2, %rs3;").contains("the type `.f16`"));
        assert!(err("cvt.f32.f64 %f1, %fd1;").contains("requires"));
        assert!(err("bra $nowhere;").contains("undefined label `$nowhere`"));
        assert!(err("add.s32 %r1, %r2, %q;").contains("undeclared register `%q`"));
        assert!(err("call foo;").contains("the instruction `call`"));
        assert!(err("ld.const.f32 %f1, [%rd1];").contains("`.const` state space"));
        assert!(err("mov.u32 %r1, %globaltimer_lo;").contains("the special register `%globaltimer_lo`"));
        assert!(err("mov.u32 %r1, %tid;").contains("the special register `%tid`"));
    }

    #[test]
    fn declarations_are_held_to_what_a_gpu_allows() {
        let load = |decl: &str| {
            Program::load(&format!(".version 7.0\n.target sm_80\n.address_size 64\n.visible .entry k(.param .u64 a)\n{{\n{decl}\nret;\n}}\n"))
                .map(|p| (p.kernels[0].shared_bytes, p.kernels[0].local_bytes, p.kernels[0].regs))
        };
        // Exactly at each limit: accepted.
        assert_eq!(load(".shared .align 4 .b8 s[49152];\n.local .align 8 .b8 l[524288];\n.reg .b64 %rd<8191>;").unwrap(), (49152, 524288, 8191));
        // One over, or a tampered bundle's gigabytes: refused, naming the
        // kernel and the declaration, before anything is allocated.
        let e = load(".shared .align 4 .b8 s[4294967296];").unwrap_err().to_string();
        assert_eq!(e, "bad bundle kernels.ptx: line 6: kernel `k`: `.shared s` (4294967296 bytes) brings its shared memory to 4294967296 bytes, more than the 49152 bytes of shared memory per block (48 KiB, the static shared memory of every GPU)");
        let e = load(".shared .b8 a[40000];\n.shared .b8 b[10000];").unwrap_err().to_string();
        assert!(e.contains("line 7: kernel `k`: `.shared b` (10000 bytes) brings its shared memory to 50000 bytes"), "{e}");
        let e = load(".local .align 8 .b8 l[1073741824];").unwrap_err().to_string();
        assert!(
            e.contains(
                "kernel `k`: `.local l` (1073741824 bytes) brings its local memory to 1073741824 bytes, more than the 524288 bytes of local memory per thread"
            ),
            "{e}"
        );
        let e = load(".reg .pred %p<2>;\n.reg .b64 %rd<100000000>;").unwrap_err().to_string();
        assert_eq!(
            e,
            "bad bundle kernels.ptx: line 7: kernel `k`: `.reg .b64 %rd<100000000>` brings its registers to 100000002, more than the emulator's limit of 8192"
        );
        // Module-scope shared memory counts for every kernel.
        let e = Program::load(".version 7.0\n.target sm_80\n.address_size 64\n.shared .b8 g[65536];\n").unwrap_err().to_string();
        assert!(e.contains("line 4: the module: `.shared g` (65536 bytes)"), "{e}");
        let e = Program::load(".version 7.0\n.target sm_80\n.address_size 64\n.visible .entry k(.param .align 8 .b8 p[4294967296])\n{\nret;\n}\n")
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("line 4: kernel `k`: `.param p` (4294967296 bytes) brings its parameters to 4294967296 bytes, more than CUDA's limit of 32764"),
            "{e}"
        );
    }
}
