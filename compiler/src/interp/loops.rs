//! Interpreter of the `loop` dialect: runs a module's kernels in order on
//! caller-provided buffers. It is the oracle for the loop-level passes
//! (each must leave the interpreted result unchanged) and mirrors the `et`
//! interpreter's value semantics exactly (see `super::Exec::binary` and
//! `execute`): i32 arithmetic wraps, every FLOAT operation is computed in
//! the float width (`arith::float_binary`), RANDOM uses the shared
//! generator.
//!
//! Parallel loops run sequentially in order, which is one of the orders
//! their semantics allows. An offset outside its buffer is a compiler bug
//! (guards must prevent it); it is reported as `Err`, never a panic.

use super::Val;
use crate::arith::{float_binary, int_binary};
use crate::ir::loops::verify::verify;
use crate::ir::loops::*;
use crate::ir::text::Spelled;
use crate::mathlib;
use crate::random::Stream;
use crate::tensor::{Data, Tensor};

/// Runs every kernel of `m` on `buffers` (one tensor per buffer, in module
/// order, with the buffer's shape and element kind: I32 -> `Data::Int`,
/// F64 -> `Data::F64`, F32 -> `Data::F32`). The caller fills the inputs
/// and zeroes the rest. The module is verified first.
pub fn run(m: &LoopModule, seed: u64, buffers: &mut [Tensor]) -> Result<(), String> {
    verify(m).map_err(|e| e.describe(m))?;
    if m.is_dynamic() {
        return Err(format!("the module has {} dim symbols: run it at given dims (`run_at`)", m.dims.len()));
    }
    check_buffers(m, buffers)?;
    for k in &m.kernels {
        let mut ex = Exec { m, k, seed, env: vec![0; k.vars.len()], vals: Vec::new(), buffers: &mut *buffers };
        ex.nodes(&k.body).map_err(|e| format!("kernel `@{}`: {e}", k.name))?;
    }
    Ok(())
}

/// Runs a dynamic module at one configuration of its dims (`dims[d]` for
/// symbol `d`): the module bound to them ([`LoopModule::bind_dims`]), then
/// [`run`]. Buffers have the shapes the bound module gives them.
pub fn run_at(m: &LoopModule, dims: &[i64], seed: u64, buffers: &mut [Tensor]) -> Result<(), String> {
    verify(m).map_err(|e| e.describe(m))?;
    run(&m.bind_dims(dims)?, seed, buffers)
}

fn check_buffers(m: &LoopModule, buffers: &[Tensor]) -> Result<(), String> {
    if buffers.len() != m.buffers.len() {
        return Err(format!("{} tensors passed for {} buffers", buffers.len(), m.buffers.len()));
    }
    for (b, t) in m.buffers.iter().zip(buffers) {
        let kind_ok = matches!((b.dtype, &t.data), (DType::I32, Data::I32(_)) | (DType::F64, Data::F64(_)) | (DType::F32, Data::F32(_)));
        let dims = b.dims().unwrap_or_default();
        let shape_ok = t.shape.len() == dims.len() && t.shape.iter().zip(&dims).all(|(&a, &d)| a as i64 == d);
        if !kind_ok || !shape_ok || Some(t.len() as i64) != b.len() {
            return Err(format!(
                "buffer `{}` is {}{:?} but the tensor passed for it is {}{:?} with {} elements",
                b.name,
                b.dtype.name(),
                dims,
                crate::tensor::type_text(t.dtype()),
                t.shape,
                t.len()
            ));
        }
    }
    Ok(())
}

/// Rounds a float result to its dtype (the f32 rule).
fn fl(d: DType, x: f64) -> f64 {
    if d == DType::F32 {
        x as f32 as f64
    } else {
        x
    }
}

struct Exec<'a> {
    m: &'a LoopModule,
    k: &'a Kernel,
    seed: u64,
    /// Current value of each variable.
    env: Vec<i64>,
    /// Values of the compute being evaluated (reused between points).
    vals: Vec<Val>,
    buffers: &'a mut [Tensor],
}

impl Exec<'_> {
    fn nodes(&mut self, ns: &[Node]) -> Result<(), String> {
        for n in ns {
            match n {
                Node::For(l) => {
                    let (lo, hi) = (l.lo.eval(&self.env), l.hi.eval(&self.env));
                    for v in lo..hi {
                        self.env[l.var] = v;
                        self.nodes(&l.body)?;
                    }
                }
                Node::Guard(g) => {
                    if g.conds.iter().all(|c| c.holds(&self.env)) {
                        self.nodes(&g.body)?;
                    }
                }
                Node::LoadIndex { var, buf, offset } => {
                    let i = self.offset(*buf, offset)?;
                    let x = match &self.buffers[*buf].data {
                        Data::I32(d) => d[i],
                        _ => return Err(format!("load_index from non-i32 buffer `{}`", self.m.buffers[*buf].name)),
                    };
                    self.env[*var] = x as i64;
                }
                Node::Compute(c) => self.compute(c)?,
                // One thread at a time: every write is already visible.
                Node::Sync | Node::Copies(_) => {}
            }
        }
        Ok(())
    }

    /// The in-bounds element index of `buf[offset]` at the current point.
    fn offset(&self, buf: BufId, offset: &IExpr) -> Result<usize, String> {
        let o = offset.eval(&self.env);
        let len = self.buffers[buf].len();
        match usize::try_from(o) {
            Ok(i) if i < len => Ok(i),
            _ => Err(format!("offset {o} out of bounds of buffer `{}` ({len} elements) at {}", self.m.buffers[buf].name, self.point())),
        }
    }

    /// The current variable values, for error messages.
    fn point(&self) -> String {
        let kv: Vec<String> = self.k.vars.iter().zip(&self.env).map(|(v, x)| format!("{}={x}", v.name)).collect();
        format!("({})", kv.join(", "))
    }

    fn compute(&mut self, c: &Compute) -> Result<(), String> {
        self.vals.clear();
        for v in &c.values {
            let x = self.value(v)?;
            self.vals.push(x);
        }
        let w = &c.write;
        let i = self.offset(w.buf, &w.offset)?;
        let x = self.vals[w.value];
        let kind = w.kind;
        match (&mut self.buffers[w.buf].data, x) {
            (Data::I32(d), Val::I(x)) => {
                d[i] = match kind.non_atomic() {
                    WriteKind::Maximize => d[i].max(x),
                    WriteKind::Minimize => d[i].min(x),
                    _ if kind.adds() => d[i].wrapping_add(x),
                    _ => x,
                }
            }
            (Data::F64(d), Val::F(x)) => d[i] = combine_float(kind, d[i], x),
            // The sum is an f32 addition, as in the et interpreter.
            (Data::F32(d), Val::F(x)) => d[i] = combine_float(kind, d[i] as f64, x as f32 as f64) as f32,
            _ => return Err(format!("write of a value of the wrong kind to `{}`", self.m.buffers[w.buf].name)),
        }
        Ok(())
    }

    fn value(&self, v: &Value) -> Result<Val, String> {
        let d = v.dtype;
        let val = |a: ValId| self.vals[a];
        Ok(match &v.op {
            VOp::Const(x) => match d {
                // The verifier guarantees an integral i32-range constant.
                DType::I32 => Val::I(*x as i32),
                _ => Val::F(fl(d, *x)),
            },
            VOp::Load { buf, offset } => {
                let i = self.offset(*buf, offset)?;
                match &self.buffers[*buf].data {
                    Data::I32(t) => Val::I(t[i]),
                    Data::F64(t) => Val::F(t[i]),
                    Data::F32(t) => Val::F(t[i] as f64),
                }
            }
            VOp::Index(e) => Val::I(e.eval(&self.env) as i32),
            VOp::Lookup { table, index } => {
                let i = index.eval(&self.env);
                let x = usize::try_from(i)
                    .ok()
                    .and_then(|i| table.get(i))
                    .ok_or_else(|| format!("lookup index {i} outside a table of {} entries at {}", table.len(), self.point()))?;
                Val::I(*x as i32)
            }
            VOp::Random { stream, counter, lo, hi } => {
                let s = Stream::new(self.seed, stream);
                let n = counter.eval(&self.env) as u64;
                match (val(*lo), val(*hi)) {
                    (Val::I(lo), Val::I(hi)) => Val::I(s.int(n, lo as i64, hi as i64) as i32),
                    (lo, hi) => Val::F(fl(d, s.float(n, lo.as_f64(), hi.as_f64()))),
                }
            }
            VOp::Neg(a) => match val(*a) {
                Val::I(i) => Val::I(i.wrapping_neg()),
                Val::F(f) => Val::F(-f),
            },
            VOp::Bin(op, a, b) => binary(*op, d, val(*a), val(*b))?,
            VOp::Cmp(op, a, b) => Val::I(match (val(*a), val(*b)) {
                (Val::I(x), Val::I(y)) => op.holds(x, y),
                (x, y) => op.holds(x.as_f64(), y.as_f64()),
            } as i32),
            VOp::Call(f, args) => call(*f, d, &args.iter().map(|&a| val(a)).collect::<Vec<_>>()),
            VOp::Cast(a) => match (val(*a), d) {
                (Val::I(i), DType::I32) => Val::I(i),
                // Rust `as`: truncation toward zero, saturating, NaN -> 0.
                (Val::F(f), DType::I32) => Val::I(f as i32),
                (x, _) => Val::F(fl(d, x.as_f64())),
            },
        })
    }
}

/// A float cell after a write of `x` (`+=` in the cell's width, or
/// `mathlib`'s max/min; a store replaces).
fn combine_float(kind: WriteKind, cell: f64, x: f64) -> f64 {
    match kind.non_atomic() {
        WriteKind::Maximize => mathlib::scalar::max(cell, x),
        WriteKind::Minimize => mathlib::scalar::min(cell, x),
        _ if kind.adds() => cell + x,
        _ => x,
    }
}

/// A function on values of dtype `d` (its operands' but for `select`'s
/// condition), as the et interpreter's `call`.
fn call(f: Func, d: DType, args: &[Val]) -> Val {
    let x = |k: usize| args[k].as_f64();
    let float = |v: f64| Val::F(fl(d, v));
    match (f, d) {
        (Func::Exp, _) => float(mathlib::scalar::exp(x(0))),
        (Func::Log, _) => float(mathlib::scalar::log(x(0))),
        (Func::Tanh, _) => float(mathlib::scalar::tanh(x(0))),
        (Func::Pow, _) => float(mathlib::scalar::pow(x(0), x(1))),
        (Func::Sqrt, _) => float(x(0).sqrt()),
        (Func::Abs, DType::I32) => Val::I(args[0].as_i32().wrapping_abs()),
        (Func::Abs, _) => float(x(0).abs()),
        (Func::Max, DType::I32) => Val::I(args[0].as_i32().max(args[1].as_i32())),
        (Func::Min, DType::I32) => Val::I(args[0].as_i32().min(args[1].as_i32())),
        (Func::Max, _) => float(mathlib::scalar::max(x(0), x(1))),
        (Func::Min, _) => float(mathlib::scalar::min(x(0), x(1))),
        (Func::Select, _) => {
            if x(0) != 0.0 {
                args[1]
            } else {
                args[2]
            }
        }
    }
}

/// `BinOp` on two values of dtype `d`, as the et interpreter's `binary`.
fn binary(op: BinOp, d: DType, a: Val, b: Val) -> Result<Val, String> {
    Ok(match (a, b) {
        (Val::I(x), Val::I(y)) => Val::I(int_binary(op, x, y).ok_or_else(|| "`div` on i32 values".to_string())?),
        (Val::F(x), Val::F(y)) => Val::F(float_binary(op, fl(d, x), fl(d, y), d == DType::F32)),
        _ => return Err(format!("`{}` on an i32 and a float value", op.spelling())),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn i32_and_float_binary_rules() {
        let i = |op, a, b| binary(op, DType::I32, Val::I(a), Val::I(b)).unwrap();
        assert_eq!(i(BinOp::Add, i32::MAX, 1), Val::I(i32::MIN));
        assert_eq!(i(BinOp::FloorDiv, -7, 2), Val::I(-4));
        assert_eq!(i(BinOp::CeilDiv, -7, 2), Val::I(-3));
        assert_eq!(i(BinOp::Mod, 7, -2), Val::I(-1));
        assert_eq!(i(BinOp::Mod, 7, 0), Val::I(0));
        assert_eq!(i(BinOp::FloorDiv, i32::MIN, -1), Val::I(i32::MIN));
        assert!(binary(BinOp::Div, DType::I32, Val::I(1), Val::I(2)).is_err());
        let f = |op, a, b| binary(op, DType::F64, Val::F(a), Val::F(b)).unwrap();
        assert_eq!(f(BinOp::Mod, -7.5, 2.0), Val::F(0.5));
        assert_eq!(f(BinOp::FloorDiv, -7.5, 2.0), Val::F(-4.0));
        assert_eq!(f(BinOp::CeilDiv, 7.5, 2.0), Val::F(4.0));
        // f32: 1/3 rounded to f32, not the f64 quotient.
        assert_eq!(binary(BinOp::Div, DType::F32, Val::F(1.0), Val::F(3.0)).unwrap(), Val::F((1.0f32 / 3.0f32) as f64));
    }
}
