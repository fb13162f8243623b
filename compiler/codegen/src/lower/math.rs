//! The language's functions and comparisons as LLVM IR (docs/semantics.md,
//! "Functions"). `exp log tanh pow` and float `max min` are
//! `eintup::mathlib`'s algorithms, instantiated here with an IR builder
//! ([`Emit`]): the same sequence of correctly rounded operations the
//! interpreter performs, so host code, PTX and the interpreter agree bit
//! for bit. `sqrt` and `abs` are single correctly rounded (exact)
//! instructions on every target; no instruction here carries fast-math
//! flags, whatever `--fp-contract` says.

use super::*;
use eintup::ir::loops::{CmpOp, Func};
use eintup::mathlib::{self, MathOps};
use inkwell::types::FloatType;

impl<'ctx> KernelLowering<'_, 'ctx> {
    /// `a op b` on two values of dtype `dt`: an `i32` 1 or 0.
    pub(super) fn compare(&self, dt: DType, op: CmpOp, a: BasicValueEnum<'ctx>, b: BasicValueEnum<'ctx>) -> Result<BasicValueEnum<'ctx>, CodegenError> {
        let bit = if dt == DType::I32 {
            let p = match op {
                CmpOp::Lt => IntPredicate::SLT,
                CmpOp::Le => IntPredicate::SLE,
                CmpOp::Gt => IntPredicate::SGT,
                CmpOp::Ge => IntPredicate::SGE,
                CmpOp::Eq => IntPredicate::EQ,
                CmpOp::Ne => IntPredicate::NE,
            };
            self.b.build_int_compare(p, a.into_int_value(), b.into_int_value(), "")?
        } else {
            // Ordered, except `!=`, which holds for a NaN (IEEE).
            let p = match op {
                CmpOp::Lt => FloatPredicate::OLT,
                CmpOp::Le => FloatPredicate::OLE,
                CmpOp::Gt => FloatPredicate::OGT,
                CmpOp::Ge => FloatPredicate::OGE,
                CmpOp::Eq => FloatPredicate::OEQ,
                CmpOp::Ne => FloatPredicate::UNE,
            };
            self.b.build_float_compare(p, a.into_float_value(), b.into_float_value(), "")?
        };
        Ok(self.b.build_int_z_extend(bit, self.i32, "")?.into())
    }

    /// Function `f` of values whose dtype is `dt` (but `select`'s
    /// condition, `cond_dt`).
    pub(super) fn function(&self, f: Func, dt: DType, args: &[(BasicValueEnum<'ctx>, DType)]) -> Result<BasicValueEnum<'ctx>, CodegenError> {
        let arg = |k: usize| args.get(k).map(|a| a.0).ok_or_else(|| self.bug(format_args!("`{}` without operand {k}", f.name())));
        if f == Func::Select {
            let (c, cdt) = *args.first().ok_or_else(|| self.bug("`select` without a condition"))?;
            let zero = self.constant(cdt, 0.0);
            let taken = self.compare(cdt, CmpOp::Ne, c, zero)?.into_int_value();
            let taken = self.b.build_int_truncate(taken, self.ctx.bool_type(), "")?;
            return Ok(self.b.build_select(taken, arg(1)?, arg(2)?, "")?);
        }
        if dt == DType::I32 {
            let (a, b) = (arg(0)?.into_int_value(), args.get(1).map(|x| x.0.into_int_value()));
            let pick = |me: &Self, p: IntPredicate| -> Result<BasicValueEnum<'ctx>, CodegenError> {
                let b = b.ok_or_else(|| me.bug("a two-operand function with one"))?;
                let c = me.b.build_int_compare(p, a, b, "")?;
                Ok(me.b.build_select(c, a, b, "")?)
            };
            return match f {
                // Wraps: abs(INT's minimum) is itself, as `wrapping_abs`.
                Func::Abs => {
                    let neg = self.b.build_int_sub(self.i32.const_zero(), a, "")?;
                    let c = self.b.build_int_compare(IntPredicate::SLT, a, self.i32.const_zero(), "")?;
                    Ok(self.b.build_select(c, neg, a, "")?)
                }
                Func::Max => pick(self, IntPredicate::SGT),
                Func::Min => pick(self, IntPredicate::SLT),
                _ => Err(self.bug(format_args!("`{}` on i32 (lowering casts its operands to FLOAT)", f.name()))),
            };
        }
        let ty = self.ty(dt);
        match f {
            Func::Sqrt | Func::Abs => {
                let name = if f == Func::Sqrt { "llvm.sqrt" } else { "llvm.fabs" };
                let i = self.intrinsic(name, &[ty])?;
                self.call(i, &[arg(0)?], "")
            }
            Func::Max | Func::Min => {
                // Exact in either width (compares, selects, exact adds).
                let mut e = Emit::new(self, ty.into_float_type());
                let (a, b) = (arg(0)?.into_float_value(), arg(1)?.into_float_value());
                let r = if f == Func::Max { mathlib::max(&mut e, a, b) } else { mathlib::min(&mut e, a, b) };
                e.finish(r)
            }
            Func::Exp | Func::Log | Func::Tanh | Func::Pow => {
                // Computed in f64, rounded once to the width.
                let f64t = self.ctx.f64_type();
                let wide = |me: &Self, x: BasicValueEnum<'ctx>| -> Result<FloatValue<'ctx>, CodegenError> {
                    Ok(if dt == DType::F32 { me.b.build_float_ext(x.into_float_value(), f64t, "")? } else { x.into_float_value() })
                };
                let x = wide(self, arg(0)?)?;
                let y = if f == Func::Pow { Some(wide(self, arg(1)?)?) } else { None };
                let mut e = Emit::new(self, f64t);
                let r = match (f, y) {
                    (Func::Exp, _) => mathlib::exp(&mut e, x),
                    (Func::Log, _) => mathlib::log(&mut e, x),
                    (Func::Tanh, _) => mathlib::tanh(&mut e, x),
                    (_, Some(y)) => mathlib::pow(&mut e, x, y),
                    (_, None) => return Err(self.bug("`pow` without its exponent")),
                };
                let r = e.finish(r)?.into_float_value();
                Ok(if dt == DType::F32 { self.b.build_float_trunc(r, self.ctx.f32_type(), "")?.into() } else { r.into() })
            }
            Func::Select => Err(self.bug("`select` reached the float functions")),
        }
    }

    /// `max(old, v)` / `min(old, v)` of a `maximize` / `minimize` write.
    pub(super) fn combine(&self, kind: WriteKind, dt: DType, old: BasicValueEnum<'ctx>, v: BasicValueEnum<'ctx>) -> Result<BasicValueEnum<'ctx>, CodegenError> {
        let f = if kind.non_atomic() == WriteKind::Maximize { Func::Max } else { Func::Min };
        self.function(f, dt, &[(old, dt), (v, dt)])
    }

    /// An `atomic_maximize` / `atomic_minimize` of `v` into `*p`: `atom.max`
    /// / `atom.min` on i32; on floats a compare-exchange loop around the
    /// language's `max` (`mathlib`: NaN-propagating, +0 over -0, which no
    /// hardware float atomic is), that stops without a write once the cell
    /// already holds the result. Max is exact in any order, so every
    /// interleaving of the threads leaves the same value.
    pub(super) fn atomic_combine(&self, kind: WriteKind, dt: DType, p: PointerValue<'ctx>, v: BasicValueEnum<'ctx>) -> Result<(), CodegenError> {
        if dt == DType::I32 {
            let op = if kind == WriteKind::AtomicMaximize { AtomicRMWBinOp::Max } else { AtomicRMWBinOp::Min };
            self.b.build_atomicrmw(op, p, v.into_int_value(), AtomicOrdering::Monotonic)?;
            return Ok(());
        }
        let bits = if dt == DType::F32 { self.i32 } else { self.i64 };
        let ft = self.ty(dt).into_float_type();
        let entry = self.b.get_insert_block().ok_or_else(|| self.bug("an atomic combine outside a block"))?;
        let (again, swap, done) = (self.block("combine.again"), self.block("combine.swap"), self.block("combine.done"));
        let first = self.b.build_load(bits, p, "")?.into_int_value();
        self.b.build_unconditional_branch(again)?;
        self.b.position_at_end(again);
        let old = self.b.build_phi(bits, "")?;
        let old_bits = old.as_basic_value().into_int_value();
        let old_f = self.b.build_bit_cast(old_bits, ft, "")?;
        let new_f = self.combine(kind, dt, old_f, v)?;
        let new_bits = self.b.build_bit_cast(new_f, bits, "")?.into_int_value();
        let unchanged = self.b.build_int_compare(IntPredicate::EQ, new_bits, old_bits, "")?;
        self.b.build_conditional_branch(unchanged, done, swap)?;
        self.b.position_at_end(swap);
        let pair = self.b.build_cmpxchg(p, old_bits, new_bits, AtomicOrdering::Monotonic, AtomicOrdering::Monotonic)?;
        let seen = self.b.build_extract_value(pair, 0, "")?.into_int_value();
        let stored = self.b.build_extract_value(pair, 1, "")?.into_int_value();
        self.b.build_conditional_branch(stored, done, again)?;
        old.add_incoming(&[(&first, entry), (&seen, swap)]);
        self.b.position_at_end(done);
        Ok(())
    }
}

/// `mathlib::MathOps` as LLVM instructions at the builder's position.
/// Floats are of `ft` (f64 for the transcendental functions; the value's
/// width for `max`/`min`, which use no bit operations), integers i64.
/// A builder error is kept (and reported by [`Emit::finish`]); the ops
/// after it build on a placeholder so the algorithm runs to its end.
struct Emit<'l, 'a, 'ctx> {
    l: &'l KernelLowering<'a, 'ctx>,
    ft: FloatType<'ctx>,
    err: Option<CodegenError>,
}

impl<'l, 'a, 'ctx> Emit<'l, 'a, 'ctx> {
    fn new(l: &'l KernelLowering<'a, 'ctx>, ft: FloatType<'ctx>) -> Self {
        Emit { l, ft, err: None }
    }

    fn finish(self, r: FloatValue<'ctx>) -> Result<BasicValueEnum<'ctx>, CodegenError> {
        match self.err {
            Some(e) => Err(e),
            None => Ok(r.into()),
        }
    }

    fn keep<T>(&mut self, r: Result<T, impl Into<CodegenError>>, placeholder: T) -> T {
        match r {
            Ok(v) => v,
            Err(e) => {
                self.err.get_or_insert(e.into());
                placeholder
            }
        }
    }

    fn f(&mut self, r: Result<FloatValue<'ctx>, inkwell::builder::BuilderError>) -> FloatValue<'ctx> {
        let p = self.ft.get_undef();
        self.keep(r, p)
    }

    fn i(&mut self, r: Result<IntValue<'ctx>, inkwell::builder::BuilderError>) -> IntValue<'ctx> {
        let p = self.l.i64.get_undef();
        self.keep(r, p)
    }

    fn b(&mut self, r: Result<IntValue<'ctx>, inkwell::builder::BuilderError>) -> IntValue<'ctx> {
        let p = self.l.ctx.bool_type().get_undef();
        self.keep(r, p)
    }

    fn fcmp(&mut self, p: FloatPredicate, a: FloatValue<'ctx>, b: FloatValue<'ctx>) -> IntValue<'ctx> {
        let r = self.l.b.build_float_compare(p, a, b, "");
        self.b(r)
    }

    /// A one-operand-type float intrinsic (`llvm.fma`, `llvm.sqrt`, ..).
    fn intrinsic(&mut self, name: &str, args: &[FloatValue<'ctx>]) -> FloatValue<'ctx> {
        let ty = self.ft.as_basic_type_enum();
        let args: Vec<BasicValueEnum<'ctx>> = args.iter().map(|a| (*a).into()).collect();
        let r = self.l.intrinsic(name, &[ty]).and_then(|i| self.l.call(i, &args, "")).map(|v| v.into_float_value());
        let p = self.ft.get_undef();
        self.keep(r, p)
    }
}

impl<'ctx> MathOps for Emit<'_, '_, 'ctx> {
    type F = FloatValue<'ctx>;
    type I = IntValue<'ctx>;
    type B = IntValue<'ctx>;

    fn fconst(&mut self, c: f64) -> Self::F {
        self.ft.const_float(c)
    }
    fn iconst(&mut self, c: i64) -> Self::I {
        self.l.i64.const_int(c as u64, true)
    }
    fn fadd(&mut self, a: Self::F, b: Self::F) -> Self::F {
        let r = self.l.b.build_float_add(a, b, "");
        self.f(r)
    }
    fn fsub(&mut self, a: Self::F, b: Self::F) -> Self::F {
        let r = self.l.b.build_float_sub(a, b, "");
        self.f(r)
    }
    fn fmul(&mut self, a: Self::F, b: Self::F) -> Self::F {
        let r = self.l.b.build_float_mul(a, b, "");
        self.f(r)
    }
    fn fdiv(&mut self, a: Self::F, b: Self::F) -> Self::F {
        let r = self.l.b.build_float_div(a, b, "");
        self.f(r)
    }
    fn fma(&mut self, a: Self::F, b: Self::F, c: Self::F) -> Self::F {
        self.intrinsic("llvm.fma", &[a, b, c])
    }
    fn fsqrt(&mut self, a: Self::F) -> Self::F {
        self.intrinsic("llvm.sqrt", &[a])
    }
    fn ffloor(&mut self, a: Self::F) -> Self::F {
        self.intrinsic("llvm.floor", &[a])
    }
    fn to_bits(&mut self, a: Self::F) -> Self::I {
        let r = self.l.b.build_bit_cast(a, self.l.i64, "").map(|v| v.into_int_value());
        self.i(r)
    }
    fn from_bits(&mut self, a: Self::I) -> Self::F {
        let r = self.l.b.build_bit_cast(a, self.ft, "").map(|v| v.into_float_value());
        self.f(r)
    }
    fn iadd(&mut self, a: Self::I, b: Self::I) -> Self::I {
        let r = self.l.b.build_int_add(a, b, "");
        self.i(r)
    }
    fn isub(&mut self, a: Self::I, b: Self::I) -> Self::I {
        let r = self.l.b.build_int_sub(a, b, "");
        self.i(r)
    }
    fn iand(&mut self, a: Self::I, b: Self::I) -> Self::I {
        let r = self.l.b.build_and(a, b, "");
        self.i(r)
    }
    fn ior(&mut self, a: Self::I, b: Self::I) -> Self::I {
        let r = self.l.b.build_or(a, b, "");
        self.i(r)
    }
    fn shl(&mut self, a: Self::I, n: u32) -> Self::I {
        let n = self.l.i64.const_int(u64::from(n), false);
        let r = self.l.b.build_left_shift(a, n, "");
        self.i(r)
    }
    fn ashr(&mut self, a: Self::I, n: u32) -> Self::I {
        let n = self.l.i64.const_int(u64::from(n), false);
        let r = self.l.b.build_right_shift(a, n, true, "");
        self.i(r)
    }
    fn lshr(&mut self, a: Self::I, n: u32) -> Self::I {
        let n = self.l.i64.const_int(u64::from(n), false);
        let r = self.l.b.build_right_shift(a, n, false, "");
        self.i(r)
    }
    fn itof(&mut self, a: Self::I) -> Self::F {
        let r = self.l.b.build_signed_int_to_float(a, self.ft, "");
        self.f(r)
    }
    fn ftoi(&mut self, a: Self::F) -> Self::I {
        // Saturating, NaN -> 0: Rust's `as i64`, what `Scalar` does (a
        // plain `fptosi` would be poison out of range).
        let r = self
            .l
            .intrinsic("llvm.fptosi.sat", &[self.l.i64.into(), self.ft.as_basic_type_enum()])
            .and_then(|i| self.l.call(i, &[a.into()], ""))
            .map(|v| v.into_int_value());
        let p = self.l.i64.get_undef();
        self.keep(r, p)
    }
    fn flt(&mut self, a: Self::F, b: Self::F) -> Self::B {
        self.fcmp(FloatPredicate::OLT, a, b)
    }
    fn fle(&mut self, a: Self::F, b: Self::F) -> Self::B {
        self.fcmp(FloatPredicate::OLE, a, b)
    }
    fn feq(&mut self, a: Self::F, b: Self::F) -> Self::B {
        self.fcmp(FloatPredicate::OEQ, a, b)
    }
    fn fisnan(&mut self, a: Self::F) -> Self::B {
        self.fcmp(FloatPredicate::UNO, a, a)
    }
    fn ilt(&mut self, a: Self::I, b: Self::I) -> Self::B {
        let r = self.l.b.build_int_compare(IntPredicate::SLT, a, b, "");
        self.b(r)
    }
    fn ieq(&mut self, a: Self::I, b: Self::I) -> Self::B {
        let r = self.l.b.build_int_compare(IntPredicate::EQ, a, b, "");
        self.b(r)
    }
    fn and(&mut self, a: Self::B, b: Self::B) -> Self::B {
        let r = self.l.b.build_and(a, b, "");
        self.b(r)
    }
    fn or(&mut self, a: Self::B, b: Self::B) -> Self::B {
        let r = self.l.b.build_or(a, b, "");
        self.b(r)
    }
    fn not(&mut self, a: Self::B) -> Self::B {
        let r = self.l.b.build_not(a, "");
        self.b(r)
    }
    fn fselect(&mut self, c: Self::B, a: Self::F, b: Self::F) -> Self::F {
        let r = self.l.b.build_select(c, a, b, "").map(|v| v.into_float_value());
        self.f(r)
    }
    fn iselect(&mut self, c: Self::B, a: Self::I, b: Self::I) -> Self::I {
        let r = self.l.b.build_select(c, a, b, "").map(|v| v.into_int_value());
        self.i(r)
    }
}
