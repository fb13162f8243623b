//! Index arithmetic as LLVM IR: index expressions (64-bit, or 32-bit where
//! `index32` proved it safe), Python's floor division and modulo with a
//! total divisor, element addresses and the alignment a load may claim,
//! and index loads from buffers.

use super::*;

impl<'ctx> KernelLowering<'_, 'ctx> {
    /// Pointer to element `offset` of `buf`, and the buffer's dtype.
    pub(super) fn elem_ptr(&mut self, buf: BufId, offset: &IExpr) -> Result<(PointerValue<'ctx>, DType), CodegenError> {
        let base = self.bufs.get(buf).copied().flatten().ok_or_else(|| self.err(format_args!("buffer {buf} is unknown")))?;
        let dt = self.m.buffers[buf].dtype;
        let off = self.offset(offset)?;
        // In bounds wherever it runs (loop dialect contract), so `inbounds`
        // is true and lets LLVM reason about the address.
        let p = unsafe { self.b.build_in_bounds_gep(self.ty(dt), base, &[off], "")? };
        Ok((p, dt))
    }

    /// An element offset as `i64`. In i32, as `rest + fixed`
    /// (`IExpr::split_fixed`): `rest` in i32 and extended, then the
    /// constant `fixed` (constants and `unroll` variables) added in i64,
    /// so that the unrolled accesses of a tile share one address and
    /// differ by an immediate (an extension hides a constant inside it
    /// from LLVM). Equal to the offset modulo 2^64, as the address is.
    pub(super) fn offset(&mut self, offset: &IExpr) -> Result<IntValue<'ctx>, CodegenError> {
        let unrolled = &self.unrolled;
        let split = if self.narrow() { offset.split_fixed(&|v| unrolled.get(v).copied().unwrap_or(false)) } else { None };
        let Some((rest, fixed)) = split else {
            let off = self.iexpr(offset)?;
            return self.to_i64(off);
        };
        let mut k = self.c64(fixed.constant);
        for (atom, coef) in &fixed.terms {
            let x = self.iexpr(atom)?;
            let x = self.to_i64(x)?;
            let term = self.b.build_int_mul(x, self.c64(*coef), "")?;
            k = self.b.build_int_add(k, term, "")?;
        }
        let rest = self.iexpr(&rest)?;
        let rest = self.to_i64(rest)?;
        Ok(self.b.build_int_add(rest, k, "")?)
    }

    /// The alignment of element `offset` of a buffer of `dt` (a load or a
    /// store) when the
    /// target's buffers start aligned beyond the element (`base_align`):
    /// the largest power of two up to it that divides the byte offset for
    /// every value of the variables, `unroll` variables (constants here)
    /// at their value. A thread's four `f32` loads at `16q + 0..3` are then
    /// aligned 16, 4, 8, 4 and LLVM's load-store vectorizer makes them one
    /// `ld.global.nc.v4.f32` (stores: `st.shared.v4.f32`), and a gather's
    /// two coordinates at `2w + 0..1` one `ld.global.nc.v2.u32`; an access
    /// aligned to its element only gets `None`.
    pub(super) fn load_align(&self, offset: &IExpr, dt: DType) -> Option<u32> {
        let base = self.target.base_align()?;
        let elem = dt.size() as u64;
        let lanes = (base / elem) as i64;
        if lanes <= 1 {
            return None;
        }
        let mut known = offset.clone();
        let mut vars = Vec::new();
        offset.for_each_var(&mut |v| vars.push(v));
        for v in vars {
            if let Some(c) = self.env.get(v).copied().flatten().and_then(|x| x.get_sign_extended_constant()) {
                known = known.substitute(v, &IExpr::c(c));
            }
        }
        // Under the kernel's dim facts (a run-time variant's): `k * %col.0`
        // is a multiple of 4 where `%col.0` is. A residue unknown modulo
        // `lanes` may be known modulo a divisor: `w * 2` is 0 modulo 2
        // (8 bytes of i32), not known modulo 4.
        let mut m = lanes;
        while m > 1 {
            if let Some(r) = known.residue_under(m, &self.k.multiples) {
                // The largest power of two dividing both `m` and `r` elements.
                let elems = if r == 0 { m } else { 1i64 << r.trailing_zeros().min(m.trailing_zeros()) };
                return (elems > 1).then(|| (elems as u64 * elem) as u32);
            }
            m /= 2;
        }
        None
    }

    pub(crate) fn load_index(&mut self, buf: BufId, offset: &IExpr) -> Result<IntValue<'ctx>, CodegenError> {
        let (p, dt) = self.elem_ptr(buf, offset)?;
        if dt != DType::I32 {
            return Err(self.err(format_args!("load_index from {} buffer `{}`", dt.name(), self.m.buffers[buf].name)));
        }
        let x = self.b.build_load(self.i32, p, "")?;
        // Aligned as a value load, so that a row of index values a thread
        // reads (a gather's coordinates) can be one vector load.
        if let (Some(align), Some(i)) = (self.load_align(offset, DType::I32), x.as_instruction_value()) {
            i.set_alignment(align).map_err(|e| self.err(e))?;
        }
        self.to_index(x.into_int_value())
    }

    // ---- index arithmetic (i64, or i32 when proven to fit) ---------------

    pub(crate) fn iexpr(&mut self, e: &IExpr) -> Result<IntValue<'ctx>, CodegenError> {
        match e {
            IExpr::Const(c) => Ok(self.cix(*c)),
            IExpr::Var(v) => self.env.get(*v).copied().flatten().ok_or_else(|| self.err(format_args!("variable {v} used out of scope"))),
            IExpr::Sym(d) => {
                let v = self.dims.get(*d).copied().flatten().ok_or_else(|| self.err(format_args!("dim symbol {d} is not a parameter")))?;
                self.to_index(v)
            }
            // A non-negative dividend over the symbols (a grid's `X //^ 4`
            // of an extent X) by a positive constant: unsigned, which LLVM
            // makes a shift (and a mask) for a power of two, where Python's
            // signed rounding costs a fix-up per operation.
            IExpr::Bin(op @ (IBin::FloorDiv | IBin::CeilDiv | IBin::Mod), a, b)
                if b.as_const().is_some_and(|c| c > 0) && !a.uses_any_var() && self.extents.non_negative(a) =>
            {
                let (a, b) = (self.iexpr(a)?, self.iexpr(b)?);
                let bl = &self.b;
                Ok(match op {
                    IBin::Mod => bl.build_int_unsigned_rem(a, b, "")?,
                    IBin::FloorDiv => bl.build_int_unsigned_div(a, b, "")?,
                    // `a + c - 1` cannot wrap unsigned: `a` is below 2^31
                    // (2^63) and so is `c`.
                    _ => {
                        let c1 = bl.build_int_sub(b, a.get_type().const_int(1, false), "")?;
                        let padded = bl.build_int_nuw_add(a, c1, "")?;
                        bl.build_int_unsigned_div(padded, b, "")?
                    }
                })
            }
            IExpr::Bin(op, a, b) => {
                let a = self.iexpr(a)?;
                let b = self.iexpr(b)?;
                let bl = &self.b;
                // In i32 no value leaves the range (`index_fits_i32`), so
                // `nsw` is true; it lets LLVM fold the extension to i64 at
                // an address into the arithmetic.
                match op {
                    IBin::Add if self.narrow() => Ok(bl.build_int_nsw_add(a, b, "")?),
                    IBin::Sub if self.narrow() => Ok(bl.build_int_nsw_sub(a, b, "")?),
                    IBin::Mul if self.narrow() => Ok(bl.build_int_nsw_mul(a, b, "")?),
                    _ => self.ibin(*op, a, b),
                }
            }
        }
    }

    /// One index operation on i64 or i32 values (wrapping; division
    /// total). Also used for i32 `// //^ %` after sign extension to i64.
    pub(super) fn ibin(&mut self, op: IBin, a: IntValue<'ctx>, b: IntValue<'ctx>) -> Result<IntValue<'ctx>, CodegenError> {
        let bl = &self.b;
        Ok(match op {
            IBin::Add => bl.build_int_add(a, b, "")?,
            IBin::Sub => bl.build_int_sub(a, b, "")?,
            IBin::Mul => bl.build_int_mul(a, b, "")?,
            IBin::Min => {
                let lt = bl.build_int_compare(IntPredicate::SLT, a, b, "")?;
                bl.build_select(lt, a, b, "")?.into_int_value()
            }
            IBin::Max => {
                let gt = bl.build_int_compare(IntPredicate::SGT, a, b, "")?;
                bl.build_select(gt, a, b, "")?.into_int_value()
            }
            IBin::FloorDiv | IBin::CeilDiv | IBin::Mod => self.python_div(op, a, b)?,
        })
    }

    /// Python floor/ceil division and floor modulo. `sdiv`/`srem` are
    /// undefined for `b == 0` and for `MIN / -1`, so both get divisor 1 and
    /// are fixed up with selects: `x // 0 = 0`, `x % 0 = 0`, and
    /// `x // -1 = -x` wrapping (as `wrapping_div`). With a constant
    /// divisor every select folds away and LLVM's multiply-by-reciprocal
    /// replaces the division.
    pub(super) fn python_div(&mut self, op: IBin, a: IntValue<'ctx>, b: IntValue<'ctx>) -> Result<IntValue<'ctx>, CodegenError> {
        let bl = &self.b;
        let ty = a.get_type();
        let zero = ty.const_zero();
        let one = ty.const_int(1, false);
        let minus1 = ty.const_all_ones();
        let bz = bl.build_int_compare(IntPredicate::EQ, b, zero, "")?;
        let bm1 = bl.build_int_compare(IntPredicate::EQ, b, minus1, "")?;
        let unsafe_div = bl.build_or(bz, bm1, "")?;
        let bs = bl.build_select(unsafe_div, one, b, "")?.into_int_value();
        let r = bl.build_int_signed_rem(a, bs, "")?;
        // Truncated remainder is non-zero with the sign opposite to b's:
        // the truncated quotient is one above the floor.
        let rnz = bl.build_int_compare(IntPredicate::NE, r, zero, "")?;
        let rb = bl.build_xor(r, b, "")?;
        let opposite = bl.build_int_compare(IntPredicate::SLT, rb, zero, "")?;
        Ok(match op {
            IBin::Mod => {
                let fix = bl.build_and(rnz, opposite, "")?;
                let rp = bl.build_int_add(r, b, "")?;
                // b == 0 and b == -1 already give r == 0 (divisor 1).
                bl.build_select(fix, rp, r, "")?.into_int_value()
            }
            _ => {
                let q0 = bl.build_int_signed_div(a, bs, "")?;
                let neg = bl.build_int_sub(zero, a, "")?;
                let q = bl.build_select(bm1, neg, q0, "")?.into_int_value();
                let q = if op == IBin::FloorDiv {
                    let fix = bl.build_and(rnz, opposite, "")?;
                    let qm = bl.build_int_sub(q, one, "")?;
                    bl.build_select(fix, qm, q, "")?.into_int_value()
                } else {
                    let same = bl.build_not(opposite, "")?;
                    let fix = bl.build_and(rnz, same, "")?;
                    let qp = bl.build_int_add(q, one, "")?;
                    bl.build_select(fix, qp, q, "")?.into_int_value()
                };
                bl.build_select(bz, zero, q, "")?.into_int_value()
            }
        })
    }
}
