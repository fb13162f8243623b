//! Decoding of each instruction family (arithmetic, conversions,
//! comparisons, memory, atomics, warp shuffles and votes) into its [`Op`]:
//! the opcode's modifiers and operands checked against what the family
//! supports. [`Ctx::instruction`](super::Ctx) dispatches here.

use super::*;

impl<'a> Ctx<'a> {
    pub(super) fn space(&self, m: &mut Mods<'a>) -> Result<Space> {
        match m.one_of(&["global", "shared", "shared::cta", "local", "param", "param::entry", "const", "shared::cluster", "param::func"]) {
            None => Ok(Space::Generic),
            Some("global") => Ok(Space::Global),
            Some("shared") | Some("shared::cta") => Ok(Space::Shared),
            Some("local") => Ok(Space::Local),
            Some("param") | Some("param::entry") => Ok(Space::Param),
            Some(other) => Err(self.unsupported(&format!("the `.{other}` state space"))),
        }
    }

    /// Rounding modifiers of arithmetic: `.rn` (the default) only.
    pub(super) fn float_rounding(&self, m: &mut Mods<'a>) -> Result<()> {
        match m.one_of(&["rn", "rz", "rm", "rp"]) {
            None | Some("rn") => Ok(()),
            Some(r) => Err(self.unsupported(&format!("the rounding modifier `.{r}` on `{}`", self.opcode))),
        }
    }

    pub(super) fn binary(&self, base: &str, m: &mut Mods<'a>, i: &'a ptx::Instruction) -> Result<Op> {
        let lo = m.has("lo");
        let hi = m.has("hi");
        let wide = m.has("wide");
        let approx = m.has("approx");
        let full = m.has("full");
        let nan = m.has("NaN");
        let ftz = m.has("ftz");
        let sat = m.has("sat");
        let has_rnd = m.items.iter().any(|x| matches!(*x, "rn" | "rz" | "rm" | "rp"));
        self.float_rounding(m)?;
        let ty = self.one_type(m)?;
        let [d, a, b] = self.operands(i)?;
        if ty == Ty::Pred {
            let op = match base {
                "and" => BoolOp::And,
                "or" => BoolOp::Or,
                "xor" => BoolOp::Xor,
                _ => return Err(self.unsupported(&format!("`{}`", i.opcode))),
            };
            let Some(dp) = self.pred_dst(d)? else { return Err(self.err("a predicate sink".into())) };
            return Ok(Op::PredLogic { op, d: dp, a: self.pred_src(a)?, b: self.pred_src(b)? });
        }
        if ty.is_float() {
            let f64 = ty == Ty::F64;
            if f64 && (ftz || sat) || lo || hi || wide {
                return Err(self.unsupported(&format!("`{}`", i.opcode)));
            }
            let op = match (base, approx, full, nan) {
                ("add", false, false, false) => FloatOp::Add,
                ("sub", false, false, false) => FloatOp::Sub,
                ("mul", false, false, false) => FloatOp::Mul,
                ("div", false, false, false) if has_rnd => FloatOp::Div,
                // div.full's error bound (2 ulp) admits the IEEE quotient.
                ("div", false, true, false) if !f64 => FloatOp::Div,
                ("div", true, false, false) if !f64 => FloatOp::DivApprox,
                ("min", false, false, false) => FloatOp::Min,
                ("max", false, false, false) => FloatOp::Max,
                ("min", false, false, true) if !f64 => FloatOp::MinNan,
                ("max", false, false, true) if !f64 => FloatOp::MaxNan,
                _ => return Err(self.unsupported(&format!("`{}`", i.opcode))),
            };
            if sat && !matches!(op, FloatOp::Add | FloatOp::Sub | FloatOp::Mul) {
                return Err(self.unsupported(&format!("`.sat` on `{}`", i.opcode)));
            }
            return Ok(Op::Float { op, f64, ftz, sat, d: self.dst(d, ty)?, a: self.src(a, ty)?, b: self.src(b, ty)? });
        }
        if approx || full || nan || ftz || sat || has_rnd {
            return Err(self.unsupported(&format!("`{}`", i.opcode)));
        }
        let op = match base {
            "add" => IntOp::Add,
            "sub" => IntOp::Sub,
            "mul" if wide => IntOp::MulWide,
            "mul" if hi => IntOp::MulHi,
            "mul" if lo => IntOp::MulLo,
            "div" => IntOp::Div,
            "rem" => IntOp::Rem,
            "min" => IntOp::Min,
            "max" => IntOp::Max,
            "and" => IntOp::And,
            "or" => IntOp::Or,
            "xor" => IntOp::Xor,
            "shl" => IntOp::Shl,
            "shr" => IntOp::Shr,
            _ => return Err(self.err(format!("`{}` needs `.lo`, `.hi` or `.wide`", i.opcode))),
        };
        if (lo || hi || wide) && base != "mul" {
            return Err(self.unsupported(&format!("`{}`", i.opcode)));
        }
        let logic = matches!(op, IntOp::And | IntOp::Or | IntOp::Xor | IntOp::Shl);
        if ty.bits() < 16 || (logic && !ty.is_bits()) || (!logic && op != IntOp::Shr && ty.is_bits()) {
            return Err(self.unsupported(&format!("`{}`", i.opcode)));
        }
        if op == IntOp::MulWide && ty.bits() > 32 {
            return Err(self.err("`.wide` is for 16- and 32-bit types".into()));
        }
        let dty = if op == IntOp::MulWide { widen(ty) } else { ty };
        // Shift amounts are .u32 whatever the shifted type.
        let bty = if matches!(op, IntOp::Shl | IntOp::Shr) { Ty::U32 } else { ty };
        Ok(Op::Int { op, k: ty.kind(), d: self.dst(d, dty)?, a: self.src(a, ty)?, b: self.src(b, bty)? })
    }

    pub(super) fn mad(&self, base: &str, m: &mut Mods<'a>, i: &'a ptx::Instruction) -> Result<Op> {
        let lo = m.has("lo");
        let hi = m.has("hi");
        let wide = m.has("wide");
        let ftz = m.has("ftz");
        let sat = m.has("sat");
        let rnd = m.one_of(&["rn", "rz", "rm", "rp"]);
        let ty = self.one_type(m)?;
        let [d, a, b, c] = self.operands(i)?;
        if ty.is_float() {
            let f64 = ty == Ty::F64;
            match rnd {
                Some("rn") => {}
                Some(r) => return Err(self.unsupported(&format!("the rounding modifier `.{r}` on `{}`", i.opcode))),
                None => return Err(self.err(format!("`{}` needs a rounding modifier", i.opcode))),
            }
            if lo || hi || wide || (f64 && (ftz || sat)) {
                return Err(self.unsupported(&format!("`{}`", i.opcode)));
            }
            return Ok(Op::Fma { f64, ftz, sat, d: self.dst(d, ty)?, a: self.src(a, ty)?, b: self.src(b, ty)?, c: self.src(c, ty)? });
        }
        if base == "fma" || rnd.is_some() || ftz || sat || !ty.is_int() || ty.is_bits() || ty.bits() < 16 || lo as u8 + hi as u8 + wide as u8 != 1 {
            return Err(self.unsupported(&format!("`{}`", i.opcode)));
        }
        if wide && ty.bits() > 32 {
            return Err(self.err("`.wide` is for 16- and 32-bit types".into()));
        }
        let dty = if wide { widen(ty) } else { ty };
        Ok(Op::Mad { hi, wide, k: ty.kind(), d: self.dst(d, dty)?, a: self.src(a, ty)?, b: self.src(b, ty)?, c: self.src(c, dty)? })
    }

    pub(super) fn unary(&self, base: &str, m: &mut Mods<'a>, i: &'a ptx::Instruction) -> Result<Op> {
        let ftz = m.has("ftz");
        let ty = self.one_type(m)?;
        let [d, a] = self.operands(i)?;
        if ty == Ty::Pred {
            if base != "not" {
                return Err(self.unsupported(&format!("`{}`", i.opcode)));
            }
            let Some(dp) = self.pred_dst(d)? else { return Err(self.err("a predicate sink".into())) };
            let mut a = self.pred_src(a)?;
            a.neg = !a.neg;
            return Ok(Op::PredMov { d: dp, a });
        }
        if ty.is_float() {
            let op = match base {
                "neg" => FloatUnOp::Neg,
                "abs" => FloatUnOp::Abs,
                _ => return Err(self.unsupported(&format!("`{}`", i.opcode))),
            };
            if ftz && ty == Ty::F64 {
                return Err(self.unsupported(&format!("`{}`", i.opcode)));
            }
            return Ok(Op::FloatUn { op, f64: ty == Ty::F64, ftz, d: self.dst(d, ty)?, a: self.src(a, ty)? });
        }
        let (op, ok) = match base {
            "neg" => (IntUnOp::Neg, ty.is_signed()),
            "abs" => (IntUnOp::Abs, ty.is_signed()),
            "not" => (IntUnOp::Not, ty.is_bits()),
            "cnot" => (IntUnOp::Cnot, ty.is_bits()),
            "popc" => (IntUnOp::Popc, matches!(ty, Ty::B32 | Ty::B64)),
            "clz" => (IntUnOp::Clz, matches!(ty, Ty::B32 | Ty::B64)),
            _ => (IntUnOp::Brev, matches!(ty, Ty::B32 | Ty::B64)),
        };
        if !ok || ftz || ty.bits() < 16 {
            return Err(self.unsupported(&format!("`{}`", i.opcode)));
        }
        // popc and clz write a .u32 count.
        let dty = if matches!(op, IntUnOp::Popc | IntUnOp::Clz) { Ty::U32 } else { ty };
        Ok(Op::IntUn { op, k: ty.kind(), d: self.dst(d, dty)?, a: self.src(a, ty)? })
    }

    pub(super) fn float_unary(&self, base: &str, m: &mut Mods<'a>, i: &'a ptx::Instruction) -> Result<Op> {
        let approx = m.has("approx");
        let ftz = m.has("ftz");
        let rnd = m.one_of(&["rn", "rz", "rm", "rp"]);
        let ty = self.one_type(m)?;
        let [d, a] = self.operands(i)?;
        let f64 = match ty {
            Ty::F32 => false,
            Ty::F64 => true,
            _ => return Err(self.unsupported(&format!("`{}`", i.opcode))),
        };
        let op = match (base, approx, rnd) {
            ("sqrt", true, None) if !f64 => FloatUnOp::Sqrt,
            ("sqrt", false, Some("rn")) => FloatUnOp::Sqrt,
            ("rcp", true, None) if !f64 || ftz => FloatUnOp::Rcp,
            ("rcp", false, Some("rn")) => FloatUnOp::Rcp,
            ("rsqrt", true, None) => FloatUnOp::Rsqrt,
            ("sin", true, None) if !f64 => FloatUnOp::Sin,
            ("cos", true, None) if !f64 => FloatUnOp::Cos,
            ("lg2", true, None) if !f64 => FloatUnOp::Lg2,
            ("ex2", true, None) if !f64 => FloatUnOp::Ex2,
            ("tanh", true, None) if !f64 && !ftz => FloatUnOp::Tanh,
            _ => return Err(self.unsupported(&format!("`{}`", i.opcode))),
        };
        // `.ftz` on f64 exists only for rcp/rsqrt.approx.ftz.f64.
        if f64 && ftz && !approx {
            return Err(self.unsupported(&format!("`{}`", i.opcode)));
        }
        Ok(Op::FloatUn { op, f64, ftz, d: self.dst(d, ty)?, a: self.src(a, ty)? })
    }

    pub(super) fn mov(&self, m: &mut Mods<'a>, i: &'a ptx::Instruction) -> Result<Op> {
        let ty = self.one_type(m)?;
        let [d, a] = self.operands(i)?;
        if ty == Ty::Pred {
            let Some(dp) = self.pred_dst(d)? else { return Err(self.err("a predicate sink".into())) };
            return Ok(Op::PredMov { d: dp, a: self.pred_src(a)? });
        }
        let bits = ty.bits();
        match (d, a) {
            (_, Operand::Vector(parts)) => {
                let part = part_type(bits / parts.len().max(1) as u32).filter(|_| bits % parts.len() as u32 == 0);
                let Some(pt) = part.filter(|_| matches!(parts.len(), 2 | 4)) else {
                    return Err(self.unsupported(&format!("packing {} values into .{}", parts.len(), ty_name(ty))));
                };
                let parts = parts.iter().map(|p| self.src(p, pt)).collect::<Result<Vec<_>>>()?;
                Ok(Op::Pack { part_bits: pt.bits() as u8, d: self.dst(d, ty)?, parts })
            }
            (Operand::Vector(parts), _) => {
                let part = part_type(bits / parts.len().max(1) as u32).filter(|_| bits % parts.len() as u32 == 0);
                let Some(pt) = part.filter(|_| matches!(parts.len(), 2 | 4)) else {
                    return Err(self.unsupported(&format!("unpacking .{} into {} values", ty_name(ty), parts.len())));
                };
                let ds = parts.iter().map(|p| self.dst_or_sink(p, pt)).collect::<Result<Vec<_>>>()?;
                Ok(Op::Unpack { part_bits: pt.bits() as u8, ds, a: self.src(a, ty)? })
            }
            _ => Ok(Op::Mov { bits: bits as u8, d: self.dst(d, ty)?, a: self.src(a, ty)? }),
        }
    }

    pub(super) fn cvt(&self, m: &mut Mods<'a>, i: &'a ptx::Instruction) -> Result<Op> {
        let ftz = m.has("ftz");
        let sat = m.has("sat");
        let rnd = match m.one_of(&["rn", "rz", "rm", "rp", "rni", "rzi", "rmi", "rpi", "rna", "rs"]) {
            None => Rnd::None,
            Some("rn") => Rnd::Rn,
            Some("rz") => Rnd::Rz,
            Some("rm") => Rnd::Rm,
            Some("rp") => Rnd::Rp,
            Some("rni") => Rnd::Rni,
            Some("rzi") => Rnd::Rzi,
            Some("rmi") => Rnd::Rmi,
            Some("rpi") => Rnd::Rpi,
            Some(r) => return Err(self.unsupported(&format!("the rounding modifier `.{r}`"))),
        };
        let types = m.types();
        let (to, from) = match types.as_slice() {
            [Ok(to), Ok(from)] => (*to, *from),
            [..] if types.iter().any(|t| t.is_err()) => {
                let bad = types.iter().find_map(|t| t.err()).unwrap_or("?");
                return Err(self.unsupported(&format!("conversions of `.{bad}`")));
            }
            _ => return Err(self.err("`cvt` needs a destination and a source type".into())),
        };
        if to == Ty::Pred || from == Ty::Pred || to.is_bits() || from.is_bits() {
            return Err(self.unsupported(&format!("`{}`", i.opcode)));
        }
        let int_rnd = matches!(rnd, Rnd::Rni | Rnd::Rzi | Rnd::Rmi | Rnd::Rpi);
        let float_rnd = matches!(rnd, Rnd::Rn | Rnd::Rz | Rnd::Rm | Rnd::Rp);
        // The ISA's rules for which rounding a conversion must and may have.
        let ok = match (from.is_float(), to.is_float()) {
            (true, false) => int_rnd,
            (false, true) => float_rnd,
            (true, true) if to.bits() < from.bits() => float_rnd,
            (true, true) if to.bits() > from.bits() => rnd == Rnd::None,
            (true, true) => rnd == Rnd::None || int_rnd,
            (false, false) => rnd == Rnd::None,
        };
        if !ok {
            let what = if rnd == Rnd::None { "no rounding modifier" } else { "this rounding modifier" };
            return Err(self.err(format!("`{}` has {what}; the PTX ISA requires integer rounding (.rni/.rzi/.rmi/.rpi) from float to integer, float rounding (.rn/.rz/.rm/.rp) from integer to float and to a narrower float", i.opcode)));
        }
        if ftz && to != Ty::F32 && from != Ty::F32 {
            return Err(self.err("`.ftz` needs an .f32 source or destination".into()));
        }
        let [d, a] = self.operands(i)?;
        Ok(Op::Cvt { to, from, rnd, sat, ftz, d: self.dst(d, to)?, a: self.src(a, from)? })
    }

    pub(super) fn setp(&self, m: &mut Mods<'a>, i: &'a ptx::Instruction) -> Result<Op> {
        let cmp = match m.one_of(&["eq", "ne", "lt", "le", "gt", "ge", "lo", "ls", "hi", "hs", "equ", "neu", "ltu", "leu", "gtu", "geu", "num", "nan"]) {
            Some("eq") => Cmp::Eq,
            Some("ne") => Cmp::Ne,
            Some("lt") | Some("lo") => Cmp::Lt,
            Some("le") | Some("ls") => Cmp::Le,
            Some("gt") | Some("hi") => Cmp::Gt,
            Some("ge") | Some("hs") => Cmp::Ge,
            Some("equ") => Cmp::Equ,
            Some("neu") => Cmp::Neu,
            Some("ltu") => Cmp::Ltu,
            Some("leu") => Cmp::Leu,
            Some("gtu") => Cmp::Gtu,
            Some("geu") => Cmp::Geu,
            Some("num") => Cmp::Num,
            Some("nan") => Cmp::Nan,
            _ => return Err(self.err("`setp` needs a comparison".into())),
        };
        let spelled_unsigned = i.opcode.split('.').any(|x| matches!(x, "lo" | "ls" | "hi" | "hs"));
        let bool_op = match m.one_of(&["and", "or", "xor"]) {
            Some("and") => Some(BoolOp::And),
            Some("or") => Some(BoolOp::Or),
            Some("xor") => Some(BoolOp::Xor),
            _ => None,
        };
        let ftz = m.has("ftz");
        let ty = self.one_type(m)?;
        let unordered = matches!(cmp, Cmp::Equ | Cmp::Neu | Cmp::Ltu | Cmp::Leu | Cmp::Gtu | Cmp::Geu | Cmp::Num | Cmp::Nan);
        let bad = ty == Ty::Pred
            || (!ty.is_float() && (unordered || ftz))
            || (ty.is_bits() && !matches!(cmp, Cmp::Eq | Cmp::Ne))
            || (spelled_unsigned && ty.is_signed())
            || (ftz && ty == Ty::F64)
            || ty.bits() < 16;
        if bad {
            return Err(self.unsupported(&format!("`{}`", i.opcode)));
        }
        let (dest, a, b, c) = match (bool_op, i.operands.as_slice()) {
            (None, [d, a, b]) => (d, a, b, None),
            (Some(_), [d, a, b, c]) => (d, a, b, Some(c)),
            _ => return Err(self.err(format!("wrong number of operands for `{}`", i.opcode))),
        };
        let (p, q) = match dest {
            Operand::Pair(p, q) => (self.pred_dst(&Operand::Reg(p.clone()))?, if q == "_" { None } else { self.pred_dst(&Operand::Reg(q.clone()))? }),
            _ => (self.pred_dst(dest)?, None),
        };
        let comb = match (bool_op, c) {
            (Some(op), Some(c)) => Some((op, self.pred_src(c)?)),
            _ => None,
        };
        Ok(Op::Setp { cmp, ty, ftz, p, q, a: self.src(a, ty)?, b: self.src(b, ty)?, comb })
    }

    /// `.v2`/`.v4` and the element type of a load or store.
    pub(super) fn vector_type(&self, m: &mut Mods<'a>) -> Result<(u8, Ty)> {
        let n = match m.one_of(&["v2", "v4", "v8"]) {
            None => 1,
            Some("v2") => 2,
            Some("v4") => 4,
            Some(_) => return Err(self.unsupported("`.v8` accesses")),
        };
        let ty = self.one_type(m)?;
        if ty == Ty::Pred {
            return Err(self.unsupported("predicate loads and stores"));
        }
        if n * ty.bits() > 128 {
            return Err(self.err(format!("a vector of {n} .{} exceeds 128 bits", ty_name(ty))));
        }
        Ok((n as u8, ty))
    }

    pub(super) fn load(&self, m: &mut Mods<'a>, i: &'a ptx::Instruction) -> Result<Op> {
        let space = self.space(m)?;
        let nc = m.has("nc");
        if nc && space != Space::Global {
            return Err(self.err("`.nc` loads are from the global space".into()));
        }
        m.drop_all(is_ordering_or_cache);
        let (n, ty) = self.vector_type(m)?;
        let [d, a] = self.operands(i)?;
        let dsts: Vec<&Operand> = match d {
            Operand::Vector(v) if n > 1 && v.len() == n as usize => v.iter().collect(),
            _ if n == 1 => vec![d],
            _ => return Err(self.err(format!("`{}` needs {n} destinations", i.opcode))),
        };
        let mut out = [None; 4];
        for (slot, o) in out.iter_mut().zip(dsts) {
            *slot = self.dst_or_sink(o, ty)?;
        }
        Ok(Op::Ld { space, size: (ty.bits() / 8) as u8, n, nc, d: out, addr: self.addr(a, space)? })
    }

    /// The `cp.async` family (sm_80): copies, `commit_group`,
    /// `wait_group N`, `wait_all`.
    pub(super) fn cp_async(&self, m: &mut Mods<'a>, i: &'a ptx::Instruction) -> Result<Op> {
        if m.has("commit_group") {
            self.operands::<0>(i)?;
            return Ok(Op::CpAsyncCommit);
        }
        if m.has("wait_all") {
            self.operands::<0>(i)?;
            return Ok(Op::CpAsyncWait { n: 0, all: true });
        }
        if m.has("wait_group") {
            let [n] = self.operands(i)?;
            let Operand::Int(n) = n else { return Err(self.err(format!("`{}` takes a constant group count", i.opcode))) };
            let n = u32::try_from(*n).map_err(|_| self.err(format!("`{}`: group count {n} out of range", i.opcode)))?;
            return Ok(Op::CpAsyncWait { n, all: false });
        }
        // `.ca` may copy 4, 8 or 16 bytes, `.cg` (L2 only) 16.
        let cg = match (m.has("ca"), m.has("cg")) {
            (true, false) => false,
            (false, true) => true,
            _ => return Err(self.unsupported(&format!("`{}`", i.opcode))),
        };
        if !(m.has("shared") || m.has("shared::cta")) || !m.has("global") {
            return Err(self.unsupported(&format!("`{}` (cp.async copies global to shared memory)", i.opcode)));
        }
        // L2 prefetch hints change nothing the emulator models.
        m.drop_all(|x| matches!(x, "L2::64B" | "L2::128B" | "L2::256B"));
        let (d, s, size, src_size) = match i.operands.as_slice() {
            [d, s, size] => (d, s, size, None),
            [d, s, size, src_size] => (d, s, size, Some(self.src(src_size, Ty::U32)?)),
            _ => return Err(self.err(format!("`{}` takes [dst], [src], size and an optional source size", i.opcode))),
        };
        let size = match size {
            Operand::Int(4) if !cg => 4,
            Operand::Int(8) if !cg => 8,
            Operand::Int(16) => 16,
            _ => return Err(self.err(format!("`{}` copies {} bytes: .ca takes 4, 8 or 16, .cg 16", i.opcode, size))),
        };
        Ok(Op::CpAsync { size, dst: self.addr(d, Space::Shared)?, src: self.addr(s, Space::Global)?, src_size })
    }

    pub(super) fn store(&self, m: &mut Mods<'a>, i: &'a ptx::Instruction) -> Result<Op> {
        let space = self.space(m)?;
        if space == Space::Param {
            return Err(self.unsupported("stores to the parameter space"));
        }
        m.drop_all(is_ordering_or_cache);
        let (n, ty) = self.vector_type(m)?;
        let [a, v] = self.operands(i)?;
        let vals: Vec<&Operand> = match v {
            Operand::Vector(v) if n > 1 && v.len() == n as usize => v.iter().collect(),
            _ if n == 1 => vec![v],
            _ => return Err(self.err(format!("`{}` needs {n} values", i.opcode))),
        };
        let mut out = [Src::Imm(0); 4];
        for (slot, o) in out.iter_mut().zip(vals) {
            *slot = self.src(o, ty)?;
        }
        Ok(Op::St { space, size: (ty.bits() / 8) as u8, n, v: out, addr: self.addr(a, space)? })
    }

    pub(super) fn atom(&self, returns: bool, m: &mut Mods<'a>, i: &'a ptx::Instruction) -> Result<Op> {
        let space = self.space(m)?;
        if !matches!(space, Space::Global | Space::Shared | Space::Generic) {
            return Err(self.unsupported(&format!("atomics in the {} space", space.name())));
        }
        m.drop_all(is_ordering_or_cache);
        let op = match m.one_of(&["add", "min", "max", "inc", "dec", "and", "or", "xor", "exch", "cas"]) {
            Some("add") => AtomOp::Add,
            Some("min") => AtomOp::Min,
            Some("max") => AtomOp::Max,
            Some("inc") => AtomOp::Inc,
            Some("dec") => AtomOp::Dec,
            Some("and") => AtomOp::And,
            Some("or") => AtomOp::Or,
            Some("xor") => AtomOp::Xor,
            Some("exch") => AtomOp::Exch,
            Some("cas") => AtomOp::Cas,
            _ => return Err(self.err(format!("`{}` needs an operation", i.opcode))),
        };
        let n = match m.one_of(&["v2", "v4"]) {
            None => 1,
            Some("v2") => 2,
            Some(_) => 4,
        };
        let ty = self.one_type(m)?;
        if n > 1 {
            return self.vector_red(returns, space, op, ty, n, i);
        }
        let ok = match op {
            AtomOp::Add => matches!(ty, Ty::U32 | Ty::S32 | Ty::U64 | Ty::F32 | Ty::F64),
            AtomOp::Min | AtomOp::Max => matches!(ty, Ty::U32 | Ty::S32 | Ty::U64 | Ty::S64),
            AtomOp::Inc | AtomOp::Dec => ty == Ty::U32,
            AtomOp::And | AtomOp::Or | AtomOp::Xor | AtomOp::Exch | AtomOp::Cas => matches!(ty, Ty::B32 | Ty::B64),
        };
        if !ok || (op == AtomOp::Cas && !returns) {
            return Err(self.unsupported(&format!("`{}`", i.opcode)));
        }
        let ops = i.operands.as_slice();
        let (d, a, b, c) = match (returns, op == AtomOp::Cas, ops) {
            (true, false, [d, a, b]) => (Some(d), a, b, None),
            (true, true, [d, a, b, c]) => (Some(d), a, b, Some(c)),
            (false, false, [a, b]) => (None, a, b, None),
            _ => return Err(self.err(format!("wrong number of operands for `{}`", i.opcode))),
        };
        Ok(Op::Atom {
            space,
            op,
            ty,
            d: d.map(|d| self.dst_or_sink(d, ty)).transpose()?.flatten(),
            addr: self.addr(a, space)?,
            b: self.src(b, ty)?,
            c: c.map(|c| self.src(c, ty)).transpose()?.unwrap_or(Src::Imm(0)),
        })
    }

    /// The vector form of `red` (PTX ISA 8.1, sm_90): only `add` of `f32`
    /// into the global space, `{..}` holding one value per element.
    pub(super) fn vector_red(&self, returns: bool, space: Space, op: AtomOp, ty: Ty, n: u8, i: &'a ptx::Instruction) -> Result<Op> {
        if returns || op != AtomOp::Add || ty != Ty::F32 || space != Space::Global {
            return Err(self.unsupported(&format!("`{}` (vector atomics are `red.global.add.v2|v4.f32`)", i.opcode)));
        }
        let [a, v] = self.operands(i)?;
        let Operand::Vector(vals) = v else { return Err(self.err(format!("`{}` needs {{..}} with {n} values", i.opcode))) };
        if vals.len() != usize::from(n) {
            return Err(self.err(format!("`{}` needs {n} values", i.opcode)));
        }
        let mut b = [Src::Imm(0); 4];
        for (slot, o) in b.iter_mut().zip(vals) {
            *slot = self.src(o, ty)?;
        }
        Ok(Op::RedV { n, addr: self.addr(a, space)?, b })
    }

    pub(super) fn shfl(&self, m: &mut Mods<'a>, i: &'a ptx::Instruction) -> Result<Op> {
        let sync = m.has("sync");
        let mode = match m.one_of(&["up", "down", "bfly", "idx"]) {
            Some("up") => ShflMode::Up,
            Some("down") => ShflMode::Down,
            Some("bfly") => ShflMode::Bfly,
            Some("idx") => ShflMode::Idx,
            _ => return Err(self.err("`shfl` needs a mode".into())),
        };
        if self.one_type(m)? != Ty::B32 {
            return Err(self.unsupported(&format!("`{}`", i.opcode)));
        }
        let (d, a, b, c, mask) = match (sync, i.operands.as_slice()) {
            (true, [d, a, b, c, mask]) => (d, a, b, c, Some(mask)),
            (false, [d, a, b, c]) => (d, a, b, c, None),
            _ => return Err(self.err(format!("wrong number of operands for `{}`", i.opcode))),
        };
        let (d, p) = match d {
            Operand::Pair(d, p) => (Operand::Reg(d.clone()), self.pred_dst(&Operand::Reg(p.clone()))?),
            d => (d.clone(), None),
        };
        Ok(Op::Shfl {
            mode,
            d: self.dst(&d, Ty::B32)?,
            p,
            a: self.src(a, Ty::B32)?,
            b: self.src(b, Ty::B32)?,
            c: self.src(c, Ty::B32)?,
            mask: mask.map(|x| self.src(x, Ty::B32)).transpose()?,
        })
    }

    pub(super) fn vote(&self, m: &mut Mods<'a>, i: &'a ptx::Instruction) -> Result<Op> {
        let sync = m.has("sync");
        let mode = match m.one_of(&["all", "any", "uni", "ballot"]) {
            Some("all") => VoteMode::All,
            Some("any") => VoteMode::Any,
            Some("uni") => VoteMode::Uni,
            Some("ballot") => VoteMode::Ballot,
            _ => return Err(self.err("`vote` needs a mode".into())),
        };
        let ty = self.one_type(m)?;
        let (d, a, mask) = match (sync, i.operands.as_slice()) {
            (true, [d, a, mask]) => (d, a, Some(mask)),
            (false, [d, a]) => (d, a, None),
            _ => return Err(self.err(format!("wrong number of operands for `{}`", i.opcode))),
        };
        let d = match (mode, ty) {
            (VoteMode::Ballot, Ty::B32) => VoteDst::Reg(self.dst(d, Ty::B32)?),
            (VoteMode::Ballot, _) => return Err(self.unsupported(&format!("`{}`", i.opcode))),
            (_, Ty::Pred) => match self.pred_dst(d)? {
                Some(p) => VoteDst::Pred(p),
                None => return Err(self.err("a predicate sink".into())),
            },
            _ => return Err(self.unsupported(&format!("`{}`", i.opcode))),
        };
        Ok(Op::Vote { mode, d, a: self.pred_src(a)?, mask: mask.map(|x| self.src(x, Ty::B32)).transpose()? })
    }
}
