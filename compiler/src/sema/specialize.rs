//! Specialisation (pass `specialize`): substitute one configuration into
//! the module. Every eintup gets its rank and dims, every array position
//! `DIMS(expr)` (docs/language.md s.5). Rejects configurations that divide by a
//! zero static divisor in a first mention, whose arrays overflow i64
//! element counts, or that exceed the memory limit (E03xx).

use super::{Config, Program};
use crate::ir::et::dims::{bound, index_overflow, BoundError};
use crate::ir::et::*;
use et_grammar::Diagnostic;

/// How much array memory one configuration may need, and how wide a FLOAT
/// element is counted (the width it will run at: 4 bytes under `--float
/// f32`, 8 under f64; INT is always 4).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct MemoryLimit {
    pub bytes: u64,
    pub float_bytes: u64,
}

/// 4 GiB of arrays, FLOAT counted as f64 (the default width).
pub const DEFAULT_MEMORY_LIMIT: MemoryLimit = MemoryLimit { bytes: 4 << 30, float_bytes: 8 };

impl MemoryLimit {
    /// The default limit with FLOAT elements of `float_bytes` bytes.
    pub const fn with_float_bytes(float_bytes: u64) -> MemoryLimit {
        MemoryLimit { bytes: DEFAULT_MEMORY_LIMIT.bytes, float_bytes }
    }
}

/// Why the extent of position `k` of array `name` (the expression at
/// `position`) cannot be had in this configuration.
pub fn bound_diagnostic(err: BoundError, name: &str, k: usize, position: et_grammar::Span) -> Diagnostic {
    match err {
        BoundError::DivZero(sp) => Diagnostic::error("E0305", format!("static divisor is zero in the first mention of `{name}`"))
            .at(sp, "zero in this configuration")
            .also(position, format!("position {} of the signature", k + 1))
            .note("a zero static divisor in a first mention rejects the configuration (docs/language.md s.4)"),
        BoundError::Overflow(sp) => Diagnostic::error("E0307", format!("the shape of `{name}` overflows a 64-bit index")).at(sp, "bound too large"),
        BoundError::RankMismatch(sp) => Diagnostic::error("E0205", "operands of different ranks in this configuration").at(sp, "ranks differ"),
        BoundError::DataDependent(sp) => Diagnostic::error("E0109", "a slice may not appear in the first mention of an array").at(sp, "slice"),
    }
}

/// Specialises `prog.module` in place under `cfg` (dims per eintup, in
/// module order).
pub fn specialize(prog: &mut Program, cfg: &Config, limit: MemoryLimit) -> Result<(), Vec<Diagnostic>> {
    let m = &mut prog.module;
    let mut dims = Vec::with_capacity(m.eintups.len());
    for e in m.eintups.iter_mut() {
        let Some(d) = cfg.get(&e.name) else {
            return Err(vec![Diagnostic::error("E0310", format!("the configuration gives no dims for eintup `{}`", e.name))]);
        };
        e.rank = Some(d.len());
        e.dims = Some(d.to_vec());
        dims.push(d.to_vec());
    }
    let mut diags = Vec::new();
    for a in m.arrays.iter_mut() {
        for (k, p) in a.positions.iter_mut().enumerate() {
            match bound(&p.expr, &dims) {
                Ok(d) => {
                    p.rank = Some(d.len());
                    p.dims = Some(d);
                }
                Err(err) => diags.push(bound_diagnostic(err, &a.name, k, p.expr.span)),
            }
        }
    }
    if !diags.is_empty() {
        return Err(diags);
    }
    overflowing_indices(m, &dims, &mut diags);
    if !diags.is_empty() {
        return Err(diags);
    }
    // Sizes: element counts must fit i64, total bytes the memory limit.
    let mut total: u128 = 0;
    let mut sizes = Vec::new();
    for (ai, a) in m.arrays.iter().enumerate() {
        let shape = m.array_shape(ai).unwrap_or_default();
        let mut n: i64 = 1;
        for d in &shape {
            match n.checked_mul(*d) {
                Some(x) => n = x,
                None => {
                    diags.push(
                        Diagnostic::error("E0307", format!("`{}` would have more than 2^63 elements (shape {shape:?})", a.name))
                            .at(a.span, "first mention fixes this shape"),
                    );
                    break;
                }
            }
        }
        let bytes = n as u128 * if a.dtype == ElemType::Int { 4 } else { u128::from(limit.float_bytes) };
        sizes.push((bytes, ai, shape));
        total += bytes;
    }
    if !diags.is_empty() {
        return Err(diags);
    }
    // A statement that reads the array it writes reads a snapshot of it
    // (docs/language.md s.3): a copy as large as the array, which every backend
    // allocates (the compiled ones all at once, as temporary buffers), so it
    // counts like an array.
    let mut items: Vec<(u128, String, et_grammar::Span)> =
        sizes.iter().map(|(b, ai, shape)| (*b, format!("`{}`: shape {shape:?}, {b} bytes", m.arrays[*ai].name), m.arrays[*ai].span)).collect();
    for s in &m.stmts {
        if s.reads(s.array) {
            let (b, _, shape) = &sizes[s.array];
            total += b;
            items.push((
                *b,
                format!("a snapshot of `{}` (this statement reads the array it writes): shape {shape:?}, {b} bytes", m.arrays[s.array].name),
                s.span,
            ));
        }
    }
    if total > u128::from(limit.bytes) {
        items.sort_by_key(|x| std::cmp::Reverse(x.0));
        let mut d = Diagnostic::error("E0306", format!("this configuration needs {total} bytes of arrays, more than the limit of {} bytes", limit.bytes));
        for (k, (_, l, span)) in items.into_iter().take(3).enumerate() {
            d = if k == 0 { d.at(span, l) } else { d.also(span, l) };
        }
        return Err(vec![d.note("choose smaller dims (--bind or constraints)")]);
    }
    Ok(())
}

/// E0319 for every index expression (left side, reads, slices, the index
/// of `DIMS(..)[t]`) whose arithmetic may leave i64 in this configuration:
/// the interpreter would skip those points, compiled code would wrap into
/// a wrong cell; out of range must never mean a wrap (issue #20, item 4).
fn overflowing_indices(m: &Module, dims: &[Vec<i64>], diags: &mut Vec<Diagnostic>) {
    let mut exprs: Vec<&IndexExpr> = Vec::new();
    for s in &m.stmts {
        let slots = s.indices.iter().chain(s.ops.iter().flat_map(|op| match &op.kind {
            OpKind::Read { indices, .. } => indices.as_slice(),
            _ => &[],
        }));
        exprs.extend(slots.filter_map(|x| match x {
            IndexSlot::Expr(e) => Some(e),
            IndexSlot::Colon(_) => None,
        }));
        exprs.extend(s.ops.iter().filter_map(|op| match &op.kind {
            OpKind::DimsAt(_, t) => Some(t),
            _ => None,
        }));
    }
    for e in exprs {
        if let Some(sp) = index_overflow(m, dims, e) {
            diags.push(
                Diagnostic::error("E0319", "index arithmetic can leave the 64-bit range in this configuration")
                    .at(sp, "its values reach beyond 2^63 for some points")
                    .note("compiled code computes indices in 64 bits; choose smaller dims (--bind or constraints)"),
            );
        }
    }
}

#[cfg(test)]
mod tests {
    use crate::driver::Source;
    use crate::ir::loops::FloatWidth;
    use crate::pipeline::specialized_for;

    /// A copy: two FLOAT arrays of the same length.
    const COPY: &str = "x[i] = RANDOM(0, 1, FLOAT)\ny[i] = x[i]\n\ny\n";

    fn bytes_needed(elems: u64, width: u64) -> u64 {
        2 * elems * width
    }

    #[test]
    fn float_arrays_count_at_their_width() {
        let src = Source::from_string("copy.et", COPY);
        // 3 GiB of f32 in all (two arrays of 384 Mi elements): accepted as
        // f32, refused as f64 (6 GiB).
        let elems: u64 = 384 << 20;
        assert_eq!(bytes_needed(elems, 4), 3 << 30);
        let bind = vec![format!("i=[{elems}]")];
        assert!(specialized_for(&src, &bind, &[], 0, FloatWidth::F32).is_ok());
        let e = specialized_for(&src, &bind, &[], 0, FloatWidth::F64).expect_err("6 GiB of f64 is over 4 GiB");
        assert!(e.to_string().contains("E0306"), "{e}");
        // 5 GiB of f32 is over the limit too.
        let elems: u64 = 640 << 20;
        assert_eq!(bytes_needed(elems, 4), 5 << 30);
        let e = specialized_for(&src, &[format!("i=[{elems}]")], &[], 0, FloatWidth::F32).expect_err("5 GiB is over 4 GiB");
        assert!(e.to_string().contains("E0306"), "{e}");
    }

    /// A statement reading the array it writes reads a snapshot, as large
    /// as the array: 3 GiB of INT array plus its 3 GiB snapshot is over the
    /// 4 GiB limit, the same array without the self-read is not.
    #[test]
    fn snapshots_count_toward_the_limit() {
        let elems: u64 = 768 << 20; // 3 GiB of i32
        let bind = vec![format!("i=[{elems}]")];
        let plain = Source::from_string("plain.et", "x[i] = RANDOM(0, 9, INT)\ny[i] = x[i] + 1\n\ny\n");
        let e = specialized_for(&plain, &bind, &[], 0, FloatWidth::F64).expect_err("6 GiB of arrays");
        assert!(e.to_string().contains("E0306"), "{e}");
        let alone = Source::from_string("alone.et", "x[i] = RANDOM(0, 9, INT)\n\nx\n");
        assert!(specialized_for(&alone, &bind, &[], 0, FloatWidth::F64).is_ok());
        let shift = Source::from_string("shift.et", "x[i] = RANDOM(0, 9, INT)\nx[i] = x[i+1]\n\nx\n");
        let e = specialized_for(&shift, &bind, &[], 0, FloatWidth::F64).expect_err("3 GiB and its snapshot");
        let text = e.to_string();
        assert!(text.contains("needs 6442450944 bytes"), "{text}");
        assert!(text.contains("a snapshot of `x` (this statement reads the array it writes)"), "{text}");
        // two GiB and its snapshot fit exactly
        let fits = vec![format!("i=[{}]", 512u64 << 20)];
        assert!(specialized_for(&shift, &fits, &[], 0, FloatWidth::F64).is_ok());
    }
}
