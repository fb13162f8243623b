//! `DIMS(expr)`: the exclusive upper bound of an index expression, by
//! interval arithmetic (docs/language.md s.5), and evaluation of static
//! expressions (constraints, divisors).
//!
//! Intervals are inclusive `[lo, hi]` in i128 so that intermediate products
//! of i64 dims cannot overflow; the result is checked back into i64. An
//! eintup with a zero dim has no values at all, so any expression using it
//! has no values and its DIMS are all zero.

use super::*;
use crate::arith::wide::{ceil_div, floor_div, floor_mod};
use et_grammar::{Diagnostic, Span};
use std::cell::Cell;

#[derive(Clone, Debug, PartialEq)]
pub enum BoundError {
    /// A static divisor is zero (at this span).
    DivZero(Span),
    /// A bound does not fit in i64.
    Overflow(Span),
    /// Operands of different (non-scalar) ranks.
    RankMismatch(Span),
    /// A slice's values depend on data (never in a first mention).
    DataDependent(Span),
}

/// `None`: the component takes no value at all (a zero dim).
type Iv = Option<(i128, i128)>;

/// Component intervals, or a scalar that broadcasts.
#[derive(Clone, Debug)]
enum IVal {
    Scalar(Iv),
    Tuple(Vec<Iv>),
}

/// Inclusive value range `(lo, hi)` of each component of a slice
/// `a[.., :, ..]` of array `a`, as far as the caller knows it.
pub type SliceRanges<'a> = &'a dyn Fn(ArrayId, Span) -> Result<Vec<(i64, i64)>, BoundError>;

/// `DIMS(e)` given every eintup's dims (indexed by id). A slice inside `e`
/// is data-dependent, so this is for first mentions and constraints.
pub fn bound(e: &IndexExpr, dims: &[Vec<i64>]) -> Result<Vec<i64>, BoundError> {
    bound_with(e, dims, &|_, span| Err(BoundError::DataDependent(span)))
}

/// `DIMS(e)` where slices take their values in ranges the caller supplies
/// (the interpreter knows them from `range` attributes).
pub fn bound_with(e: &IndexExpr, dims: &[Vec<i64>], slices: SliceRanges) -> Result<Vec<i64>, BoundError> {
    bound_of(e, dims, slices, ZeroDivisor::Error)
}

/// What a zero static divisor means to the interval arithmetic.
#[derive(Clone, Copy, Debug, PartialEq)]
enum ZeroDivisor {
    /// An error ([`BoundError::DivZero`]): in a first mention it rejects
    /// the configuration (docs/language.md s.4).
    Error,
    /// The components it feeds take no value (dim 0): outside first
    /// mentions every instantiation that uses it is out of bounds.
    Empty,
}

fn bound_of(e: &IndexExpr, dims: &[Vec<i64>], slices: SliceRanges, zero: ZeroDivisor) -> Result<Vec<i64>, BoundError> {
    let v = interval(e, dims, slices, slices, zero)?;
    let ivs = match v {
        IVal::Scalar(iv) => vec![iv],
        IVal::Tuple(v) => v,
    };
    ivs.into_iter()
        .map(|iv| match iv {
            Some((_, hi)) if hi >= 0 => i64::try_from(hi + 1).map_err(|_| BoundError::Overflow(e.span)),
            _ => Ok(0),
        })
        .collect()
}

fn point(v: i64) -> Iv {
    Some((v as i128, v as i128))
}

/// The component intervals of `e`: slices take their values in `slices`,
/// except inside a `FLAT` argument, whose dims (its "own range") take them
/// in `flat` (the `range` attributes, as [`flat_arg_dims`] computes the
/// dims the program runs with).
fn interval(e: &IndexExpr, dims: &[Vec<i64>], slices: SliceRanges, flat: SliceRanges, zero: ZeroDivisor) -> Result<IVal, BoundError> {
    let get = |t: &EintupId| dims.get(*t).cloned().unwrap_or_default();
    Ok(match &e.kind {
        IndexKind::Lit(n) => IVal::Scalar(point(*n)),
        IndexKind::Rank(l) => IVal::Scalar(point(l.iter().map(|t| get(t).len() as i64).sum())),
        IndexKind::Dims(l) => IVal::Tuple(l.value(|t| Some(get(&t))).ok_or(BoundError::Overflow(e.span))?.into_iter().map(point).collect()),
        IndexKind::Var(t) => {
            // Component by component: a zero dim empties only the result
            // components it feeds (so `x[z]` has shape DIMS(z) = [0, 6],
            // as frameworks report); the element count is zero either way.
            IVal::Tuple(get(t).iter().map(|x| if *x > 0 { Some((0, (*x as i128) - 1)) } else { None }).collect())
        }
        IndexKind::Flat(v) => {
            let mut prod: i128 = 1;
            for x in v {
                for d in bound_of(x, dims, flat, zero)? {
                    prod = prod.checked_mul(d as i128).ok_or(BoundError::Overflow(e.span))?;
                }
            }
            IVal::Tuple(vec![if prod > 0 { Some((0, prod - 1)) } else { None }])
        }
        IndexKind::Slice { array, .. } => {
            IVal::Tuple(slices(*array, e.span)?.into_iter().map(|(lo, hi)| if lo <= hi { Some((lo as i128, hi as i128)) } else { None }).collect())
        }
        IndexKind::Bin(op, a, b) => {
            let x = interval(a, dims, slices, flat, zero)?;
            let y = interval(b, dims, slices, flat, zero)?;
            let divides = matches!(op, IndexOp::FloorDiv | IndexOp::CeilDiv | IndexOp::Mod);
            let f = |p: Iv, q: Iv| match (p, q) {
                (Some(_), Some(q)) if divides && q == (0, 0) && zero == ZeroDivisor::Empty => Ok(None),
                (Some(p), Some(q)) => iv_op(*op, p, q).map(Some).ok_or(if divides { BoundError::DivZero(b.span) } else { BoundError::Overflow(e.span) }),
                // An operand without values makes the result valueless.
                _ => Ok(None),
            };
            match (x, y) {
                (IVal::Scalar(p), IVal::Scalar(q)) => IVal::Scalar(f(p, q)?),
                (IVal::Scalar(p), IVal::Tuple(v)) => IVal::Tuple(v.into_iter().map(|q| f(p, q)).collect::<Result<_, _>>()?),
                (IVal::Tuple(v), IVal::Scalar(q)) => IVal::Tuple(v.into_iter().map(|p| f(p, q)).collect::<Result<_, _>>()?),
                (IVal::Tuple(v), IVal::Tuple(w)) => {
                    if v.len() != w.len() {
                        return Err(BoundError::RankMismatch(e.span));
                    }
                    IVal::Tuple(v.into_iter().zip(w).map(|(p, q)| f(p, q)).collect::<Result<_, _>>()?)
                }
            }
        }
    })
}

/// Interval of `p op q`. Divisors are static, hence points; `None` for a
/// zero divisor (or a non-point divisor, which resolve never produces).
fn iv_op(op: IndexOp, p: (i128, i128), q: (i128, i128)) -> Option<(i128, i128)> {
    let mm = |v: [i128; 4]| (v.iter().copied().min().unwrap_or(0), v.iter().copied().max().unwrap_or(0));
    Some(match op {
        // Checked: products of huge dims come near i128's range.
        IndexOp::Add => (p.0.checked_add(q.0)?, p.1.checked_add(q.1)?),
        IndexOp::Sub => (p.0.checked_sub(q.1)?, p.1.checked_sub(q.0)?),
        IndexOp::Mul => {
            let v = [p.0.checked_mul(q.0)?, p.0.checked_mul(q.1)?, p.1.checked_mul(q.0)?, p.1.checked_mul(q.1)?];
            mm(v)
        }
        IndexOp::FloorDiv | IndexOp::CeilDiv | IndexOp::Mod => {
            if q.0 != q.1 || q.0 == 0 {
                return None;
            }
            let s = q.0;
            match op {
                IndexOp::FloorDiv => {
                    let (x, y) = (floor_div(p.0, s), floor_div(p.1, s));
                    (x.min(y), x.max(y))
                }
                IndexOp::CeilDiv => {
                    let (x, y) = (ceil_div(p.0, s), ceil_div(p.1, s));
                    (x.min(y), x.max(y))
                }
                _ => {
                    if floor_div(p.0, s) == floor_div(p.1, s) {
                        (floor_mod(p.0, s), floor_mod(p.1, s))
                    } else if s > 0 {
                        (0, s - 1)
                    } else {
                        (s + 1, 0)
                    }
                }
            }
        }
    })
}

/// `a op b` on static integers with the language's rules (floor division,
/// ceiling division, floor modulo); `None` on a zero divisor or overflow.
pub fn scalar_op(op: IndexOp, a: i64, b: i64) -> Option<i64> {
    let (x, y) = (a as i128, b as i128);
    let r = match op {
        IndexOp::Add => x + y,
        IndexOp::Sub => x - y,
        IndexOp::Mul => x * y,
        IndexOp::FloorDiv | IndexOp::CeilDiv | IndexOp::Mod if y == 0 => return None,
        IndexOp::FloorDiv => floor_div(x, y),
        IndexOp::CeilDiv => ceil_div(x, y),
        IndexOp::Mod => floor_mod(x, y),
    };
    i64::try_from(r).ok()
}

/// A static value: a scalar broadcasts against a tuple.
#[derive(Clone, Debug, PartialEq)]
pub enum Value {
    Scalar(i64),
    Tuple(Vec<i64>),
}

#[derive(Clone, Debug, PartialEq)]
pub enum EvalError {
    DivZero(Span),
    Overflow(Span),
    RankMismatch(Span),
    /// Refers to an eintup whose dims are not known yet.
    Unknown(EintupId),
    NotStatic(Span),
}

/// Evaluates a static expression (`Lit`, `Dims`, `Rank`, `Bin`) with the
/// dims known so far (`None` = not drawn yet) and every eintup's rank.
pub fn eval_static(e: &IndexExpr, dims: &[Option<Vec<i64>>], ranks: &[usize]) -> Result<Value, EvalError> {
    let get = |t: EintupId| dims.get(t).cloned().flatten().ok_or(EvalError::Unknown(t));
    Ok(match &e.kind {
        IndexKind::Lit(n) => Value::Scalar(*n),
        IndexKind::Rank(l) => {
            let mut s = 0i64;
            for t in l {
                s += *ranks.get(*t).ok_or(EvalError::Unknown(*t))? as i64;
            }
            Value::Scalar(s)
        }
        IndexKind::Dims(l) => {
            if let Some(t) = l.eintups().find(|t| get(*t).is_err()) {
                return Err(EvalError::Unknown(t));
            }
            Value::Tuple(l.value(|t| get(t).ok()).ok_or(EvalError::Overflow(e.span))?)
        }
        IndexKind::Bin(op, a, b) => {
            let x = eval_static(a, dims, ranks)?;
            let y = eval_static(b, dims, ranks)?;
            let f = |p: i64, q: i64| {
                scalar_op(*op, p, q).ok_or(if q == 0 && matches!(op, IndexOp::FloorDiv | IndexOp::CeilDiv | IndexOp::Mod) {
                    EvalError::DivZero(b.span)
                } else {
                    EvalError::Overflow(e.span)
                })
            };
            match (x, y) {
                (Value::Scalar(p), Value::Scalar(q)) => Value::Scalar(f(p, q)?),
                (Value::Scalar(p), Value::Tuple(v)) => Value::Tuple(v.into_iter().map(|q| f(p, q)).collect::<Result<_, _>>()?),
                (Value::Tuple(v), Value::Scalar(q)) => Value::Tuple(v.into_iter().map(|p| f(p, q)).collect::<Result<_, _>>()?),
                (Value::Tuple(v), Value::Tuple(w)) => {
                    if v.len() != w.len() {
                        return Err(EvalError::RankMismatch(e.span));
                    }
                    Value::Tuple(v.into_iter().zip(w).map(|(p, q)| f(p, q)).collect::<Result<_, _>>()?)
                }
            }
        }
        _ => return Err(EvalError::NotStatic(e.span)),
    })
}

/// Broadcasts a value to `rank` components; `None` when a tuple has
/// another length.
pub fn broadcast(v: &Value, rank: usize) -> Option<Vec<i64>> {
    match v {
        Value::Scalar(s) => Some(vec![*s; rank]),
        Value::Tuple(t) if t.len() == rank => Some(t.clone()),
        Value::Tuple(_) => None,
    }
}

/// Eintups whose DIMS a static expression reads.
pub fn dims_refs(e: &IndexExpr, out: &mut Vec<EintupId>) {
    match &e.kind {
        IndexKind::Dims(l) => out.extend(l.eintups()),
        IndexKind::Bin(_, a, b) => {
            dims_refs(a, out);
            dims_refs(b, out);
        }
        _ => {}
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn x(kind: IndexKind) -> IndexExpr {
        IndexExpr { kind, span: Span::default() }
    }
    fn var(t: usize) -> IndexExpr {
        x(IndexKind::Var(t))
    }
    fn lit(n: i64) -> IndexExpr {
        x(IndexKind::Lit(n))
    }
    fn dims(t: usize) -> IndexExpr {
        x(IndexKind::Dims(DimsList::of([t])))
    }
    fn bin(op: IndexOp, a: IndexExpr, b: IndexExpr) -> IndexExpr {
        x(IndexKind::Bin(op, Box::new(a), Box::new(b)))
    }

    // Eintup 0 = t with dims [5, 7]; 1 = s (static, [3, 2]); 2 = u ([4, 4]);
    // 3 = z with a zero dim ([0, 6]); 4 = r0 (rank 0, []).
    fn env() -> Vec<Vec<i64>> {
        vec![vec![5, 7], vec![3, 2], vec![4, 4], vec![0, 6], vec![]]
    }

    #[test]
    fn eintup_and_literal() {
        assert_eq!(bound(&var(0), &env()), Ok(vec![5, 7]));
        // literal n -> n+1
        assert_eq!(bound(&lit(4), &env()), Ok(vec![5]));
        assert_eq!(bound(&var(4), &env()), Ok(vec![]));
    }

    #[test]
    fn forms_of_section_5() {
        use IndexOp::*;
        let e = env();
        // t+s -> d+s: [5+3, 7+2]
        assert_eq!(bound(&bin(Add, var(0), dims(1)), &e), Ok(vec![8, 9]));
        // t*s -> (d-1)*s+1: [4*3+1, 6*2+1]
        assert_eq!(bound(&bin(Mul, var(0), dims(1)), &e), Ok(vec![13, 13]));
        // t//s -> (d-1)//s+1: [4//3+1, 6//2+1]
        assert_eq!(bound(&bin(FloorDiv, var(0), dims(1)), &e), Ok(vec![2, 4]));
        // t//^s -> ceil((d-1)/s)+1: [ceil(4/3)+1, ceil(6/2)+1]
        assert_eq!(bound(&bin(CeilDiv, var(0), dims(1)), &e), Ok(vec![3, 4]));
        // t%s -> min(d,s): [min(5,3), min(7,2)]
        assert_eq!(bound(&bin(Mod, var(0), dims(1)), &e), Ok(vec![3, 2]));
        // t+u -> d+e-1: [5+4-1, 7+4-1]
        assert_eq!(bound(&bin(Add, var(0), var(2)), &e), Ok(vec![8, 10]));
        // t-u -> d
        assert_eq!(bound(&bin(Sub, var(0), var(2)), &e), Ok(vec![5, 7]));
        // s-t -> s+1 (here s = DIMS(s) = [3, 2])
        assert_eq!(bound(&bin(Sub, dims(1), var(0)), &e), Ok(vec![4, 3]));
        // scalar broadcast: t - 10 never non-negative in comp 0 (max 4-10<0),
        // comp 1: max 6-10 < 0 as well -> [0, 0]
        assert_eq!(bound(&bin(Sub, var(0), lit(10)), &e), Ok(vec![0, 0]));
        // t - 5: comp 0 max = -1 -> 0; comp 1 max = 1 -> 2
        assert_eq!(bound(&bin(Sub, var(0), lit(5)), &e), Ok(vec![0, 2]));
    }

    #[test]
    fn dims_list_literals() {
        use DimsItem::*;
        // DIMS(0, s, 2) with s = [3, 2] is [1, 3, 2, 3] (a literal n is the
        // one component n+1); its bound is one more, component-wise.
        let l = x(IndexKind::Dims(DimsList(vec![Lit(0), Eintup(1), Lit(2)])));
        assert_eq!(bound(&l, &env()), Ok(vec![2, 4, 3, 4]));
        let d = vec![Some(vec![5, 7]), Some(vec![3, 2])];
        assert_eq!(eval_static(&l, &d, &[2, 2]), Ok(Value::Tuple(vec![1, 3, 2, 3])));
        // t * DIMS(0, s, 2) with t of rank 4 = [2, 2, 2, 2]: max (1,3,2,3) -> +1.
        let e = vec![vec![2, 2, 2, 2], vec![3, 2]];
        let l = x(IndexKind::Dims(DimsList(vec![Lit(0), Eintup(1), Lit(2)])));
        assert_eq!(bound(&bin(IndexOp::Mul, var(0), l), &e), Ok(vec![2, 4, 3, 4]));
    }

    #[test]
    fn conv_footprint() {
        use IndexOp::*;
        // ipos - DIMS(stride)*opos with ipos=[10], stride=[2], opos=[3]:
        // max = 9 - 0 = 9 -> 10.
        let e = vec![vec![10], vec![2], vec![3]];
        let ex = bin(Sub, var(0), bin(Mul, dims(1), var(2)));
        assert_eq!(bound(&ex, &e), Ok(vec![10]));
    }

    #[test]
    fn flat_is_product() {
        let e = env();
        // FLAT(t, u) -> 5*7*4*4
        assert_eq!(bound(&x(IndexKind::Flat(vec![var(0), var(2)])), &e), Ok(vec![560]));
        // FLAT of a rank-0 eintup alone: empty product 1
        assert_eq!(bound(&x(IndexKind::Flat(vec![var(4)])), &e), Ok(vec![1]));
        assert_eq!(bound(&x(IndexKind::Flat(vec![var(3), var(0)])), &e), Ok(vec![0]));
    }

    #[test]
    fn zero_dim_has_no_values() {
        use IndexOp::*;
        let e = env();
        // A plain eintup's DIMS are its dims, zero included.
        assert_eq!(bound(&var(3), &e), Ok(vec![0, 6]));
        // z + 1: component 0 takes no value -> 0; component 1: 6+1.
        assert_eq!(bound(&bin(Add, var(3), lit(1)), &e), Ok(vec![0, 7]));
        // t + z: component 0 empty -> 0; component 1: d+e-1 = 7+6-1.
        assert_eq!(bound(&bin(Add, var(0), var(3)), &e), Ok(vec![0, 12]));
        // s - z: component 0 empty even though s is static.
        assert_eq!(bound(&bin(Sub, dims(1), var(3)), &e), Ok(vec![0, 3]));
    }

    #[test]
    fn zero_static_divisor() {
        use IndexOp::*;
        let e = vec![vec![5], vec![0]];
        assert!(matches!(bound(&bin(FloorDiv, var(0), dims(1)), &e), Err(BoundError::DivZero(_))));
        assert!(matches!(bound(&bin(Mod, var(0), lit(0)), &e), Err(BoundError::DivZero(_))));
        // Inside a FLAT argument outside first mentions the components it
        // feeds are empty (every instantiation is out of bounds), the rest
        // keep their dims.
        let none: SliceRanges = &|_, span| Err(BoundError::DataDependent(span));
        let e = vec![vec![5, 4], vec![0, 2]];
        assert_eq!(bound_of(&bin(FloorDiv, var(0), dims(1)), &e, none, ZeroDivisor::Empty), Ok(vec![0, 2]));
        assert_eq!(bound_of(&bin(Add, bin(Mod, var(0), lit(0)), lit(1)), &e, none, ZeroDivisor::Empty), Ok(vec![0, 0]));
    }

    #[test]
    fn overflow_is_reported() {
        use IndexOp::*;
        let e = vec![vec![i64::MAX], vec![i64::MAX]];
        assert!(matches!(bound(&bin(Add, var(0), dims(1)), &e), Err(BoundError::Overflow(_))));
    }

    #[test]
    fn static_eval_broadcasts() {
        use IndexOp::*;
        let d = vec![Some(vec![9, 12]), Some(vec![3, 3]), None];
        // (DIMS(a) - DIMS(b) + 1) //^ 2 = [7//^2, 10//^2] = [4, 5]
        let ex = bin(CeilDiv, bin(Add, bin(Sub, dims(0), dims(1)), lit(1)), lit(2));
        assert_eq!(eval_static(&ex, &d, &[2, 2, 1]), Ok(Value::Tuple(vec![4, 5])));
        assert_eq!(eval_static(&dims(2), &d, &[2, 2, 1]), Err(EvalError::Unknown(2)));
        // RANK needs only ranks: RANK(c) + 1 with c of rank 1 (dims unknown).
        let rk = bin(Add, x(IndexKind::Rank(vec![2])), lit(1));
        assert_eq!(eval_static(&rk, &d, &[2, 2, 1]), Ok(Value::Scalar(2)));
        // floor semantics on negatives: -7 // 2 = -4, -7 % 2 = 1
        assert_eq!(scalar_op(FloorDiv, -7, 2), Some(-4));
        assert_eq!(scalar_op(Mod, -7, 2), Some(1));
        assert_eq!(scalar_op(CeilDiv, 7, 2), Some(4));
    }
}

/// The first subexpression of `e` (outermost first) whose values, over the
/// configuration of a specialised module, may leave i64: compiled code
/// computes indices in i64 and would wrap into a wrong cell, so such a
/// configuration is refused (`specialize`, E0319) rather than run
/// differently on different backends. Slices take any INT value (an
/// input may hold any); a FLAT's dims come from the `range` attributes.
/// `dims` are the module's eintups' dims (computed once by the caller).
pub fn index_overflow(m: &Module, dims: &[Vec<i64>], e: &IndexExpr) -> Option<Span> {
    // The length of each slice in `e` (its `:` slot eintup's only dim), by span.
    let mut lens = Vec::new();
    slice_lens(m, e, &mut lens);
    let ranges = |_: ArrayId, span: Span| -> Result<Vec<(i64, i64)>, BoundError> {
        let len = lens.iter().find(|(s, _)| *s == span).map_or(0, |(_, n)| *n);
        Ok(vec![(i64::from(i32::MIN), i64::from(i32::MAX)); len])
    };
    // A FLAT's dims are what the program runs with, from the `range`
    // attributes (a component outside them skips, so the position stays
    // below their product); with any INT value there, `FLAT(s, s * 3)`
    // over a slice `s` had dims near 2^32 * 3*2^32 and a false E0319
    // (issue #26 item 11). Without a range it is E0406, elsewhere.
    let flat = |a: ArrayId, span: Span| attr_ranges(m, dims, a).ok_or(BoundError::DataDependent(span));
    first_overflow(e, dims, &ranges, &flat)
}

fn slice_lens(m: &Module, e: &IndexExpr, out: &mut Vec<(Span, usize)>) {
    match &e.kind {
        IndexKind::Slice { array, indices } => {
            let colon = indices.iter().position(|s| matches!(s, IndexSlot::Colon(_)));
            let len = colon.and_then(|k| m.arrays.get(*array)?.positions.get(k)?.dims.as_ref()?.first().copied()).unwrap_or(0);
            out.push((e.span, len.max(0) as usize));
            for s in indices {
                if let IndexSlot::Expr(x) = s {
                    slice_lens(m, x, out);
                }
            }
        }
        IndexKind::Flat(v) => v.iter().for_each(|x| slice_lens(m, x, out)),
        IndexKind::Bin(_, a, b) => {
            slice_lens(m, a, out);
            slice_lens(m, b, out);
        }
        _ => {}
    }
}

fn first_overflow(e: &IndexExpr, dims: &[Vec<i64>], slices: SliceRanges, flat: SliceRanges) -> Option<Span> {
    let fits = |iv: &Iv| iv.is_none_or(|(lo, hi)| lo >= i64::MIN as i128 && hi <= i64::MAX as i128);
    match interval(e, dims, slices, flat, ZeroDivisor::Empty) {
        Err(BoundError::Overflow(sp)) => return Some(sp),
        Err(_) => return None,
        Ok(IVal::Scalar(iv)) if !fits(&iv) => return Some(e.span),
        Ok(IVal::Tuple(v)) if !v.iter().all(fits) => return Some(e.span),
        Ok(_) => {}
    }
    match &e.kind {
        IndexKind::Flat(v) => v.iter().find_map(|x| first_overflow(x, dims, slices, flat)),
        IndexKind::Slice { indices, .. } => indices.iter().find_map(|s| match s {
            IndexSlot::Expr(x) => first_overflow(x, dims, slices, flat),
            IndexSlot::Colon(_) => None,
        }),
        IndexKind::Bin(_, a, b) => first_overflow(a, dims, slices, flat).or_else(|| first_overflow(b, dims, slices, flat)),
        _ => None,
    }
}

/// The inclusive value range of each element of a slice of `array` (one
/// per index of its last position) from its first `range` attribute,
/// given the module's eintups' `dims`; `None` without one.
fn attr_ranges(m: &Module, dims: &[Vec<i64>], array: ArrayId) -> Option<Vec<(i64, i64)>> {
    let arr = &m.arrays[array];
    let Attr::Range { lo, hi } = arr.attrs.first()?;
    // The last position's extent: as specialised, or (a dynamic module's
    // positions carry none) from its expression at `dims`.
    let last = arr.positions.last()?;
    let len = match &last.dims {
        Some(d) => d.first().copied(),
        None => bound(&last.expr, dims).ok().and_then(|d| d.first().copied()),
    };
    let len = len.unwrap_or(0).max(0) as usize;
    let at = |b: &Bound, k: usize| match b {
        Bound::Int(i) => *i,
        Bound::DimsAt(l) => l.value(|t| dims.get(t).cloned()).and_then(|v| v.get(k).copied()).unwrap_or(0),
    };
    Some((0..len).map(|k| (at(lo, k), at(hi, k) - 1)).collect())
}

/// In a specialised module, the inclusive value range of each index of
/// the last position of `array` that its `range` attribute declares (what
/// a slice of it inside `FLAT` takes as its dims); `None` without one.
pub fn declared_ranges(m: &Module, array: ArrayId) -> Option<Vec<(i64, i64)>> {
    let dims: Vec<Vec<i64>> = m.eintups.iter().map(|t| t.dims.clone().unwrap_or_default()).collect();
    attr_ranges(m, &dims, array)
}

/// Every eintup the dims of `FLAT` argument `e` depend on: those it
/// mentions outside slices, and for each slice, those of the sliced
/// array's last position and of its range attribute's bounds (a slice's
/// values are bounded by its range, whatever row it reads).
pub fn flat_arg_eintups(m: &Module, e: &IndexExpr) -> Vec<EintupId> {
    fn walk(m: &Module, e: &IndexExpr, out: &mut Vec<EintupId>) {
        match &e.kind {
            IndexKind::Var(t) => out.push(*t),
            IndexKind::Lit(_) => {}
            IndexKind::Dims(l) => out.extend(l.eintups()),
            IndexKind::Rank(l) => out.extend(l.iter().copied()),
            IndexKind::Flat(v) => v.iter().for_each(|x| walk(m, x, out)),
            IndexKind::Bin(_, x, y) => {
                walk(m, x, out);
                walk(m, y, out);
            }
            IndexKind::Slice { array, .. } => {
                let arr = &m.arrays[*array];
                if let Some(p) = arr.positions.last() {
                    walk(m, &p.expr, out);
                }
                for Attr::Range { lo, hi } in &arr.attrs {
                    for b in [lo, hi] {
                        if let Bound::DimsAt(l) = b {
                            out.extend(l.eintups());
                        }
                    }
                }
            }
        }
    }
    let mut out = Vec::new();
    walk(m, e, &mut out);
    out.sort_unstable();
    out.dedup();
    out
}

/// Why the dims of a `FLAT` argument could not be computed.
#[derive(Clone, Debug)]
pub enum FlatDimsError {
    /// A slice inside reads an array without a known value range (E0406).
    User(Diagnostic),
    /// Anything else is a compiler bug (the module was checked before).
    Internal(String),
}

/// `DIMS` of a `FLAT` argument in a specialised module: its "own range"
/// (docs/language.md s.4), by the same interval arithmetic as first-mention
/// shapes. A slice inside takes its values in the `range` attribute of the
/// array it reads. Used by the interpreter and by `lower-to-loops`.
pub fn flat_arg_dims(m: &Module, e: &IndexExpr) -> Result<Vec<i64>, FlatDimsError> {
    let dims: Vec<Vec<i64>> = m.eintups.iter().map(|t| t.dims.clone().unwrap_or_default()).collect();
    flat_arg_dims_with(m, &dims, e)
}

/// [`flat_arg_dims`] with every eintup's dims given (a module not
/// specialised: a dynamic build's static eintups).
pub fn flat_arg_dims_with(m: &Module, dims: &[Vec<i64>], e: &IndexExpr) -> Result<Vec<i64>, FlatDimsError> {
    // The array whose range was missing, for the user's message.
    let unknown: Cell<Option<ArrayId>> = Cell::new(None);
    let ranges = |array: ArrayId, span: Span| -> Result<Vec<(i64, i64)>, BoundError> {
        attr_ranges(m, dims, array).ok_or_else(|| {
            unknown.set(Some(array));
            BoundError::DataDependent(span)
        })
    };
    // A zero static divisor inside makes the components it feeds empty:
    // every instantiation that uses it is out of bounds (docs/language.md s.4).
    bound_of(e, dims, &ranges, ZeroDivisor::Empty).map_err(|err| match (err, unknown.get()) {
        (BoundError::DataDependent(span), Some(a)) => {
            let arr = &m.arrays[a];
            let d = Diagnostic::error("E0406", format!("`FLAT` needs the value range of `{}`, which is not known", arr.name))
                .at(span, "a slice inside FLAT must read an array defined by RANDOM(lo, hi, INT)");
            // The attribute was dropped because a later statement writes
            // the array (its values may leave the range).
            let rewritten = m.stmts.iter().enumerate().find(|(i, s)| s.array == a && *i != arr.def_stmt);
            FlatDimsError::User(match rewritten {
                Some((_, s)) => d.also(s.span, format!("`{}` is written again here, after its definition, so its values may leave the RANDOM range", arr.name)),
                None => d,
            })
        }
        (err, _) => FlatDimsError::Internal(format!("bounds of a FLAT argument: {err:?}")),
    })
}
