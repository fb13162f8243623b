//! A convolution's halo: the input window of all filter taps staged once
//! per step (one box over the output positions and the taps together)
//! instead of once per tap.

use super::*;

/// One dimension of a halo box: the operand's elements `stride` apart,
/// `ext` of them, at the index `sum(mult * (var - lo))` of the box
/// variables `parts` (`(var, lo, mult)`).
#[derive(Clone, Debug, PartialEq)]
pub(super) struct HaloDim {
    pub(super) stride: i64,
    pub(super) ext: i64,
    pub(super) parts: Vec<(VarId, i64, i64)>,
}

/// The operand offset `offset` as `base + sum(stride * index)` over halo
/// dimensions: `base` the offset at the first point of the box (free of
/// box variables), then `k_i`'s dimension alone (a shared row each), then
/// the others. The box variables the offset depends on, in order of
/// stride, join the first dimension whose stride divides theirs by at
/// most its extent so far (its indices then still run without a gap:
/// `x + 8*t` over `x < 8`, then `+ i` over a filter's `i < 3`: 34 columns,
/// not 8 x 4 x 3), else open their own. `None` where the offset is not
/// affine in them with positive strides.
pub(super) fn halo_dims(offset: &IExpr, box_vars: &[(VarId, i64, i64)], ki_v: VarId) -> Option<(IExpr, HaloDim, Vec<HaloDim>)> {
    let lin = offset.linear();
    let mut base = offset.clone();
    let mut used: Vec<(VarId, i64, i64, i64)> = Vec::new();
    for &(v, lo, trip) in box_vars {
        base = base.substitute(v, &IExpr::c(lo));
        if !offset.depends_on(v) {
            continue;
        }
        let atom = IExpr::v(v);
        let c = lin.coef(&atom);
        if c <= 0 || trip <= 0 || lin.terms.iter().any(|(a, _)| a.uses(v) && *a != atom) {
            return None;
        }
        used.push((v, lo, trip, c));
    }
    let at = used.iter().position(|u| u.0 == ki_v)?;
    let (v, lo, trip, c) = used.remove(at);
    let k = HaloDim { stride: c, ext: trip, parts: vec![(v, lo, 1)] };
    used.sort_by_key(|u| u.3);
    let mut dims: Vec<HaloDim> = Vec::new();
    for (v, lo, trip, c) in used {
        match dims.iter_mut().find(|d| c % d.stride == 0 && c / d.stride <= d.ext) {
            Some(d) => {
                let mult = c / d.stride;
                d.ext = d.ext.checked_add(mult.checked_mul(trip - 1)?)?;
                d.parts.push((v, lo, mult));
            }
            None => dims.push(HaloDim { stride: c, ext: trip, parts: vec![(v, lo, 1)] }),
        }
    }
    Some((base, k, dims))
}

/// One operand staged as a halo: its shared buffer, the copy loop, the
/// index the sum reads it at, and the buffer's bytes.
pub(super) struct HaloStage {
    pub(super) buffer: Buffer,
    pub(super) copy: Node,
    pub(super) read: IExpr,
    pub(super) bytes: i64,
}

/// Stages the operand `buf` read at `offset` as a halo ([`halo_dims`]):
/// the shared buffer holds a row per `k_i`, in it the other dimensions
/// (largest stride outermost); the copy walks the box in the operand's
/// order (smallest stride fastest: consecutive threads, consecutive
/// addresses), a thread's 4 (`f32`; 2 `f64`) consecutive elements in one
/// 128-bit load where the fastest dimension has stride 1 and they provably
/// start aligned; rows are padded where that spreads the copy's stores over
/// more banks (by whole vectors where the reads could be vectors).
#[allow(clippy::too_many_arguments)]
pub(super) fn stage_halo(
    m: &LoopModule,
    k: &Kernel,
    buf: BufId,
    offset: &IExpr,
    box_vars: &[(VarId, i64, i64)],
    ki_v: VarId,
    is_thread: &dyn Fn(VarId) -> bool,
    block: i64,
    dtype: DType,
    vars: &mut Vec<Var>,
    sh: BufId,
) -> Option<HaloStage> {
    let (base, kd, mut others) = halo_dims(offset, box_vars, ki_v)?;
    others.sort_by_key(|d| std::cmp::Reverse(d.stride));
    let inner = others.iter().try_fold(1i64, |a, d| a.checked_mul(d.ext))?;
    let len = inner.checked_mul(kd.ext)?;
    if len.checked_mul(dtype.size() as i64)? > MAX_SHARED_BYTES {
        return None;
    }
    // All dimensions (0: k_i's, 1..: `others`) in the copy's order,
    // outermost first.
    let all: Vec<&HaloDim> = std::iter::once(&kd).chain(&others).collect();
    let mut order: Vec<usize> = (0..all.len()).collect();
    order.sort_by_key(|&d| std::cmp::Reverse(all[d].stride));
    let fastest = *order.last()?;
    let name = &m.buffers[buf].name;
    let e_v = add_var(vars, &format!("{name}_e"));
    let max_lanes = 16 / dtype.size() as i64;
    let lanes_var = vars.len();
    // The copy's element `e` (lane `l`): a digit per dimension.
    let digits = |lanes: i64, l: &IExpr| -> Vec<IExpr> {
        let mut out = vec![IExpr::c(0); all.len()];
        let mut stride = 1i64;
        for (i, &d) in order.iter().enumerate().rev() {
            let tr = if d == fastest { all[d].ext / lanes } else { all[d].ext };
            let q = IExpr::bin(IBin::FloorDiv, IExpr::v(e_v), IExpr::c(stride));
            let mut digit = if i == 0 { q } else { IExpr::bin(IBin::Mod, q, IExpr::c(tr)) };
            if d == fastest && lanes > 1 {
                digit = IExpr::add(IExpr::mul(digit, IExpr::c(lanes)), l.clone());
            }
            out[d] = digit;
            stride *= tr;
        }
        out
    };
    let source = |ds: &[IExpr]| all.iter().zip(ds).fold(base.clone(), |e, (d, x)| IExpr::add(e, IExpr::mul(x.clone(), IExpr::c(d.stride))));
    let vector = max_lanes > 1
        && all[fastest].stride == 1
        && all[fastest].ext % max_lanes == 0
        && source(&digits(max_lanes, &IExpr::c(0))).residue_under(max_lanes, &k.multiples) == Some(0);
    let lanes = if vector { max_lanes } else { 1 };
    let e_l = vector.then(|| add_var(vars, &format!("{name}_l")));
    debug_assert!(e_l.is_none_or(|l| l == lanes_var));
    let ds = digits(lanes, &IExpr::v(lanes_var));
    // Shared strides of `others`: row-major, innermost 1.
    let mut sstrides = vec![1i64; others.len()];
    for i in (0..others.len().saturating_sub(1)).rev() {
        sstrides[i] = sstrides[i + 1] * others[i + 1].ext;
    }
    let sh_at = |row: i64, ki: IExpr, rest: &[IExpr]| {
        rest.iter().zip(&sstrides).fold(IExpr::mul(ki, IExpr::c(row)), |e, (x, &s)| IExpr::add(e, IExpr::mul(x.clone(), IExpr::c(s))))
    };
    let store_at = |row: i64| sh_at(row, ds[0].clone(), &ds[1..]);
    // Padding: by whole vectors where a thread reads the innermost
    // dimension's elements as vectors (a register tile's `W` consecutive
    // values, every other part moving by whole vectors), else by elements.
    let vector_reads = others.last().is_some_and(|d| {
        d.parts.iter().any(|&(v, _, mult)| mult == 1 && !is_thread(v) && box_vars.iter().any(|b| b.0 == v && b.2 % max_lanes == 0))
            && d.parts.iter().all(|&(v, _, mult)| mult % max_lanes == 0 || (mult == 1 && !is_thread(v)))
    });
    let pad = if vector_reads { max_lanes } else { 1 };
    let copies = CopyWarps {
        e_v,
        unrolled: e_l.map(|l| (l, lanes)).into_iter().collect(),
        iterations: len / lanes,
        block,
        elem: dtype.size() as i64,
        nvars: vars.len(),
    };
    let mut best = (i64::MAX, inner);
    for r in (0..).map(|p| inner + p * pad).take_while(|&r| (r - inner) * (dtype.size() as i64) <= 4 * BANKS) {
        let conflicts = copies.bank_conflicts(&store_at(r));
        if conflicts < best.0 {
            best = (conflicts, r);
        }
        if conflicts == 0 {
            break;
        }
    }
    let row = best.1;
    let index = |d: &HaloDim| d.parts.iter().fold(IExpr::c(0), |e, &(v, lo, mult)| IExpr::add(e, IExpr::mul(offset_from(&IExpr::v(v), lo), IExpr::c(mult))));
    let read = sh_at(row, index(&kd), &others.iter().map(index).collect::<Vec<_>>());
    let copy = Compute {
        values: vec![Value { op: VOp::Load { buf, offset: source(&ds) }, dtype }],
        write: Write { kind: WriteKind::Store, buf: sh, offset: store_at(row), value: 0 },
    };
    let mut node = Node::Compute(copy);
    if let Some(l) = e_l {
        node = Node::For(For { var: l, lo: IExpr::c(0), hi: IExpr::c(lanes), kind: LoopKind::Unroll, body: vec![node] });
    }
    let copy = Node::For(For { var: e_v, lo: IExpr::c(0), hi: IExpr::c(len / lanes), kind: LoopKind::Spread, body: vec![node] });
    let bytes = kd.ext.checked_mul(row)?.checked_mul(dtype.size() as i64)?;
    let buffer = Buffer { name: format!("{}_{name}_shared", k.name), dtype, shape: static_shape(&[kd.ext, row]), role: Role::Shared, init: Init::Zero };
    Some(HaloStage { buffer, copy, read, bytes })
}
