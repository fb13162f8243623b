//! Values as LLVM IR: each `compute` node's value tree (reads, constants,
//! RANDOM, INT and FLOAT arithmetic in the dialect's exact semantics,
//! casts), its write (store, sum, atomic add) and `copy_async`.

use super::*;

impl<'ctx> KernelLowering<'_, 'ctx> {
    /// One element's `copy_async` (the verifier made the compute one
    /// global load into shared memory of the same dtype).
    pub(super) fn copy_async(&mut self, c: &Compute) -> Result<(), CodegenError> {
        let [Value { op: VOp::Load { buf, offset }, dtype }] = c.values.as_slice() else {
            return Err(self.bug("a `copy_async` whose compute is not one load"));
        };
        let (d, dt) = self.elem_ptr(c.write.buf, &c.write.offset)?;
        if dt != *dtype {
            return Err(self.bug("a `copy_async` between buffers of different dtypes"));
        }
        let (s, _) = self.elem_ptr(*buf, offset)?;
        let target = self.target;
        target.copy_async(self, d, s, dt.size() as u32)
    }

    // ---- values ---------------------------------------------------------

    pub(super) fn ty(&self, d: DType) -> BasicTypeEnum<'ctx> {
        basic_type(self.ctx, d)
    }

    pub(crate) fn intrinsic(&self, name: &str, tys: &[BasicTypeEnum<'ctx>]) -> Result<FunctionValue<'ctx>, CodegenError> {
        Intrinsic::find(name).and_then(|i| i.get_declaration(self.module, tys)).ok_or_else(|| self.bug(format_args!("LLVM has no intrinsic {name}")))
    }

    pub(crate) fn call(&self, f: FunctionValue<'ctx>, args: &[BasicValueEnum<'ctx>], name: &str) -> Result<BasicValueEnum<'ctx>, CodegenError> {
        let args: Vec<_> = args.iter().map(|a| (*a).into()).collect();
        self.b.build_call(f, &args, name)?.try_as_basic_value().basic().ok_or_else(|| self.bug("intrinsic returns void"))
    }

    /// The value `c` writes, with its dtype.
    pub(super) fn written_value(&mut self, c: &Compute) -> Result<(BasicValueEnum<'ctx>, DType), CodegenError> {
        let mut vals: Vec<BasicValueEnum<'ctx>> = Vec::with_capacity(c.values.len());
        for (i, v) in c.values.iter().enumerate() {
            let x = self.value(v, &vals, &c.values[..i])?;
            vals.push(x);
        }
        operand(&vals, &c.values, c.write.value).map_err(|e| self.err(e))
    }

    pub(super) fn compute(&mut self, c: &Compute) -> Result<(), CodegenError> {
        if c.write.kind == WriteKind::CopyAsync {
            return self.copy_async(c);
        }
        let w = &c.write;
        let (val, vdt) = self.written_value(c)?;
        // A register sum's cell has its slot: no address in the loop.
        let (p, dt) = match self.sum_slot(c)? {
            Some(slot) => (slot, self.m.buffers[w.buf].dtype),
            None => self.elem_ptr(w.buf, &w.offset)?,
        };
        if vdt != dt {
            return Err(self.err(format_args!("writes a {} value into {} buffer `{}`", vdt.name(), dt.name(), self.m.buffers[w.buf].name)));
        }
        match self.target.write_kind(w.kind) {
            WriteKind::Store => {
                let st = self.b.build_store(p, val)?;
                if let Some(align) = self.load_align(&w.offset, dt) {
                    st.set_alignment(align).map_err(|e| self.err(e))?;
                }
            }
            WriteKind::Accumulate => {
                let old = self.b.build_load(self.ty(dt), p, "")?;
                let sum = self.add(dt, old, val)?;
                self.b.build_store(p, sum)?;
            }
            WriteKind::Maximize | WriteKind::Minimize => {
                let old = self.b.build_load(self.ty(dt), p, "")?;
                let new = self.combine(w.kind, dt, old, val)?;
                self.b.build_store(p, new)?;
            }
            kind @ (WriteKind::AtomicMaximize | WriteKind::AtomicMinimize) => self.atomic_combine(kind, dt, p, val)?,
            WriteKind::CopyAsync => return Err(self.bug("`copy_async` reached the store path")),
            WriteKind::AtomicAccumulate => {
                // Monotonic (relaxed) suffices: only the sum must be
                // atomic; kernel boundaries order everything else.
                if dt == DType::I32 {
                    self.b.build_atomicrmw(AtomicRMWBinOp::Add, p, val.into_int_value(), AtomicOrdering::Monotonic)?;
                } else {
                    // inkwell's build_atomicrmw accepts integers only.
                    let r = unsafe {
                        llvm_sys::core::LLVMBuildAtomicRMW(
                            self.b.as_mut_ptr(),
                            llvm_sys::LLVMAtomicRMWBinOp::LLVMAtomicRMWBinOpFAdd,
                            p.as_value_ref(),
                            val.as_value_ref(),
                            llvm_sys::LLVMAtomicOrdering::LLVMAtomicOrderingMonotonic,
                            0,
                        )
                    };
                    if r.is_null() {
                        return Err(self.bug("atomicrmw fadd was not built"));
                    }
                }
            }
        }
        Ok(())
    }

    pub(super) fn add(&self, dt: DType, a: BasicValueEnum<'ctx>, b: BasicValueEnum<'ctx>) -> Result<BasicValueEnum<'ctx>, CodegenError> {
        Ok(if dt == DType::I32 {
            self.b.build_int_add(a.into_int_value(), b.into_int_value(), "")?.into()
        } else {
            let sum = self.b.build_float_add(a.into_float_value(), b.into_float_value(), "")?;
            let sum = self.contractible(sum);
            // The host's split reductions: under `fast`, a sum into a cell
            // may be reassociated, so that LLVM vectorises a reduction
            // into lanes of partial sums (the GPU splits them at the loop
            // level, `split-reductions`). Not in a register-tiled kernel:
            // there the vectors run across the tile's cells, and LLVM
            // would vectorise along the reduction instead (4x slower).
            if self.reassoc_sums {
                if let Some(i) = sum.as_instruction_value() {
                    let _ = i.set_fast_math_flags(FastMathFlags::AllowContract | FastMathFlags::AllowReassoc);
                }
            }
            sum.into()
        })
    }

    /// `x` (a float add, sub or mul the program wrote) marked `contract`
    /// under `--fp-contract fast`, so LLVM may fuse a multiply with the
    /// add of its result into one `fma` (one rounding instead of two).
    /// Adds and multiplies made up by the lowering itself (`%`, `//`) are
    /// never marked: their rounding is part of the language's definition.
    pub(super) fn contractible(&self, x: FloatValue<'ctx>) -> FloatValue<'ctx> {
        if self.fp_contract == FpContract::Fast {
            if let Some(i) = x.as_instruction_value() {
                // Only float arithmetic reaches here, which takes the flags.
                let _ = i.set_fast_math_flags(FastMathFlags::AllowContract);
            }
        }
        x
    }

    pub(super) fn value(&mut self, v: &Value, vals: &[BasicValueEnum<'ctx>], defs: &[Value]) -> Result<BasicValueEnum<'ctx>, CodegenError> {
        let dt = v.dtype;
        let opnd = |id: usize, want: Option<DType>| -> Result<BasicValueEnum<'ctx>, CodegenError> {
            let (x, xdt) = operand(vals, defs, id).map_err(|e| self.err(e))?;
            match want {
                Some(w) if w != xdt => Err(self.err(format_args!("operand %{id} is {}, expected {}", xdt.name(), w.name()))),
                _ => Ok(x),
            }
        };
        Ok(match &v.op {
            VOp::Const(c) => self.constant(dt, *c),
            VOp::Load { buf, offset } => {
                let (p, bdt) = self.elem_ptr(*buf, offset)?;
                if bdt != dt {
                    return Err(self.err(format_args!("loads {} from {} buffer", dt.name(), bdt.name())));
                }
                let x = self.b.build_load(self.ty(dt), p, "")?;
                if let (Some(align), Some(i)) = (self.load_align(offset, dt), x.as_instruction_value()) {
                    i.set_alignment(align).map_err(|e| self.err(e))?;
                }
                x
            }
            VOp::Index(e) => {
                let x = self.iexpr(e)?;
                match dt {
                    DType::I32 => self.b.build_int_truncate_or_bit_cast(x, self.i32, "")?.into(),
                    _ => self.b.build_signed_int_to_float(x, self.ty(dt).into_float_type(), "")?.into(),
                }
            }
            VOp::Lookup { table, index } => {
                // Tables are `DIMS` lists (one entry per rank), so a select
                // chain is small and needs no constant memory on the GPU.
                let idx = self.iexpr(index)?;
                let entry = |me: &Self, t: i64| -> BasicValueEnum<'ctx> {
                    match dt {
                        DType::I32 => me.i32.const_int(t as i32 as u64, true).into(),
                        _ => me.constant(dt, t as f64),
                    }
                };
                let mut acc = entry(self, table.first().copied().unwrap_or(0));
                for (i, &t) in table.iter().enumerate().skip(1) {
                    let here = self.b.build_int_compare(IntPredicate::EQ, idx, self.cix(i as i64), "")?;
                    let tv = entry(self, t);
                    acc = self.b.build_select(here, tv, acc, "")?;
                }
                acc
            }
            VOp::Random { stream, counter, lo, hi } => {
                let lo = opnd(*lo, Some(dt))?;
                let hi = opnd(*hi, Some(dt))?;
                let n = self.iexpr(counter)?;
                let n = self.to_i64(n)?;
                self.random(dt, stream, n, lo, hi)?
            }
            VOp::Neg(a) => {
                let a = opnd(*a, Some(dt))?;
                match dt {
                    DType::I32 => self.b.build_int_sub(self.i32.const_zero(), a.into_int_value(), "")?.into(),
                    _ => self.b.build_float_neg(a.into_float_value(), "")?.into(),
                }
            }
            VOp::Bin(op, a, b) => {
                let a = opnd(*a, Some(dt))?;
                let b = opnd(*b, Some(dt))?;
                if dt == DType::I32 {
                    self.int_bin(*op, a.into_int_value(), b.into_int_value())?.into()
                } else {
                    self.float_bin(dt, *op, a.into_float_value(), b.into_float_value())?.into()
                }
            }
            VOp::Cast(a) => {
                let (x, from) = operand(vals, defs, *a).map_err(|e| self.err(e))?;
                self.cast(x, from, dt)?
            }
            VOp::Cmp(op, a, b) => {
                let (x, xdt) = operand(vals, defs, *a).map_err(|e| self.err(e))?;
                let y = opnd(*b, Some(xdt))?;
                self.compare(xdt, *op, x, y)?
            }
            VOp::Call(f, args) => {
                let args = args.iter().map(|&a| operand(vals, defs, a)).collect::<Result<Vec<_>, String>>().map_err(|e| self.err(e))?;
                self.function(*f, dt, &args)?
            }
        })
    }

    pub(super) fn constant(&self, dt: DType, c: f64) -> BasicValueEnum<'ctx> {
        match dt {
            // INT constants are integral; out-of-range ones wrap like i32
            // arithmetic does.
            DType::I32 => self.i32.const_int((c as i64 as i32) as u64, true).into(),
            DType::F32 => self.ctx.f32_type().const_float(c as f32 as f64).into(),
            DType::F64 => self.ctx.f64_type().const_float(c).into(),
        }
    }

    pub(super) fn int_bin(&mut self, op: BinOp, a: IntValue<'ctx>, b: IntValue<'ctx>) -> Result<IntValue<'ctx>, CodegenError> {
        let ib = match op {
            BinOp::Add => return Ok(self.b.build_int_add(a, b, "")?),
            BinOp::Sub => return Ok(self.b.build_int_sub(a, b, "")?),
            BinOp::Mul => return Ok(self.b.build_int_mul(a, b, "")?),
            BinOp::Div => return Err(self.err("`div` on i32 (INT `/` is lowered through a cast to FLOAT)")),
            BinOp::FloorDiv => IBin::FloorDiv,
            BinOp::CeilDiv => IBin::CeilDiv,
            BinOp::Mod => IBin::Mod,
        };
        // In i64 the only i32 overflow (MIN // -1) cannot happen; the
        // result is truncated back, wrapping like i32 arithmetic.
        let a64 = self.b.build_int_s_extend(a, self.i64, "")?;
        let b64 = self.b.build_int_s_extend(b, self.i64, "")?;
        let r = self.ibin(ib, a64, b64)?;
        Ok(self.b.build_int_truncate(r, self.i32, "")?)
    }

    pub(super) fn float_bin(&mut self, dt: DType, op: BinOp, a: FloatValue<'ctx>, b: FloatValue<'ctx>) -> Result<FloatValue<'ctx>, CodegenError> {
        let bl = &self.b;
        let ty = self.ty(dt);
        Ok(match op {
            BinOp::Add => self.contractible(bl.build_float_add(a, b, "")?),
            BinOp::Sub => self.contractible(bl.build_float_sub(a, b, "")?),
            BinOp::Mul => self.contractible(bl.build_float_mul(a, b, "")?),
            BinOp::Div => bl.build_float_div(a, b, "")?,
            BinOp::FloorDiv | BinOp::CeilDiv | BinOp::Mod => {
                let q = bl.build_float_div(a, b, "")?;
                let name = if op == BinOp::CeilDiv { "llvm.ceil" } else { "llvm.floor" };
                let f = self.intrinsic(name, &[ty])?;
                let r = self.call(f, &[q.into()], "")?.into_float_value();
                if op == BinOp::Mod {
                    let bl = &self.b;
                    let p = bl.build_float_mul(b, r, "")?;
                    bl.build_float_sub(a, p, "")?
                } else {
                    r
                }
            }
        })
    }

    pub(super) fn cast(&mut self, x: BasicValueEnum<'ctx>, from: DType, to: DType) -> Result<BasicValueEnum<'ctx>, CodegenError> {
        let bl = &self.b;
        Ok(match (from, to) {
            _ if from == to => x,
            (DType::I32, _) => bl.build_signed_int_to_float(x.into_int_value(), self.ty(to).into_float_type(), "")?.into(),
            (_, DType::I32) => {
                // Saturating, NaN -> 0: exactly Rust's `as i32`.
                let f = self.intrinsic("llvm.fptosi.sat", &[self.i32.into(), self.ty(from)])?;
                self.call(f, &[x], "")?
            }
            (DType::F64, DType::F32) => bl.build_float_trunc(x.into_float_value(), self.ctx.f32_type(), "")?.into(),
            _ => bl.build_float_ext(x.into_float_value(), self.ctx.f64_type(), "")?.into(),
        })
    }

    /// `eintup::random::Stream` in IR: `x = splitmix64(key ^ n*GOLDEN)` with
    /// `key = seed ^ fnv1a64(stream)` folded at compile time, then the INT
    /// or FLOAT draw. F32 draws are computed in f64 and rounded.
    pub(super) fn random(
        &mut self,
        dt: DType,
        stream: &str,
        n: IntValue<'ctx>,
        lo: BasicValueEnum<'ctx>,
        hi: BasicValueEnum<'ctx>,
    ) -> Result<BasicValueEnum<'ctx>, CodegenError> {
        let key = self.seed ^ fnv1a64(stream.as_bytes());
        let bl = &self.b;
        let k = |v: u64| self.i64.const_int(v, false);
        let spread = bl.build_int_mul(n, k(GOLDEN), "")?;
        let mut z = bl.build_xor(spread, k(key), "")?;
        // splitmix64 (`eintup::random::splitmix64`), from its constants.
        z = bl.build_int_add(z, k(GOLDEN), "")?;
        for (shift, mul) in SPLITMIX_ROUNDS {
            let s = bl.build_right_shift(z, k(u64::from(shift)), false, "")?;
            z = bl.build_xor(z, s, "")?;
            if let Some(mul) = mul {
                z = bl.build_int_mul(z, k(mul), "")?;
            }
        }
        if dt == DType::I32 {
            let lo64 = bl.build_int_s_extend(lo.into_int_value(), self.i64, "")?;
            let hi64 = bl.build_int_s_extend(hi.into_int_value(), self.i64, "")?;
            let nonempty = bl.build_int_compare(IntPredicate::SGT, hi64, lo64, "")?;
            let span = bl.build_int_sub(hi64, lo64, "")?;
            let span = bl.build_select(nonempty, span, k(1), "")?.into_int_value();
            let r = bl.build_int_unsigned_rem(z, span, "")?;
            let draw = bl.build_int_add(lo64, r, "")?;
            let out = bl.build_select(nonempty, draw, lo64, "")?.into_int_value();
            return Ok(bl.build_int_truncate(out, self.i32, "")?.into());
        }
        let f64t = self.ctx.f64_type();
        let (lo64, hi64) = if dt == DType::F32 {
            (bl.build_float_ext(lo.into_float_value(), f64t, "")?, bl.build_float_ext(hi.into_float_value(), f64t, "")?)
        } else {
            (lo.into_float_value(), hi.into_float_value())
        };
        let top = bl.build_right_shift(z, k(11), false, "")?;
        let unit = bl.build_unsigned_int_to_float(top, f64t, "")?;
        let unit = bl.build_float_mul(unit, f64t.const_float(1.0 / (1u64 << 53) as f64), "")?;
        let width = bl.build_float_sub(hi64, lo64, "")?;
        let scaled = bl.build_float_mul(width, unit, "")?;
        let draw = bl.build_float_add(lo64, scaled, "")?;
        // `!(hi > lo)`: ordered compare, so a NaN bound also gives lo.
        let nonempty = bl.build_float_compare(FloatPredicate::OGT, hi64, lo64, "")?;
        let out = bl.build_select(nonempty, draw, lo64, "")?.into_float_value();
        Ok(if dt == DType::F32 { bl.build_float_trunc(out, self.ctx.f32_type(), "")?.into() } else { out.into() })
    }
}

/// The LLVM type of an element of `d`.
pub(super) fn basic_type(ctx: &Context, d: DType) -> BasicTypeEnum<'_> {
    match d {
        DType::I32 => ctx.i32_type().as_basic_type_enum(),
        DType::F32 => ctx.f32_type().as_basic_type_enum(),
        DType::F64 => ctx.f64_type().as_basic_type_enum(),
    }
}

/// Value `id` of a compute (defined before the current one) and its dtype.
pub(super) fn operand<'ctx>(vals: &[BasicValueEnum<'ctx>], defs: &[Value], id: usize) -> Result<(BasicValueEnum<'ctx>, DType), String> {
    match (vals.get(id), defs.get(id)) {
        (Some(v), Some(d)) => Ok((*v, d.dtype)),
        _ => Err(format!("value %{id} is used before it is defined")),
    }
}
