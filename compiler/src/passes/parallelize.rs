//! `parallelize`: choose which loops run in parallel and how the kernel's
//! write must be done.
//!
//! Candidates are the loops on the kernel's *spine* (the single path of
//! loops from the root, through guards and index loads, down to the first
//! node with several children) whose variable occurs in the written
//! offset: the left-hand-side variables. Every other loop stays `reduce`.
//!
//! A write is *injective in the candidates* when the written cell
//! determines their values. The proof: write the offset as
//! `constant + sum(coef_i * atom_i)` (`IExpr::linear`); bound every atom
//! by the loop bounds and by guards on it; if, sorted by |coef|, each
//! |coef_i| exceeds the sum of |coef_j| * (width of atom_j) below it (a
//! mixed radix), the offset determines every atom. A candidate is then
//! determined when it is an atom itself, or when both `v // c` and
//! `v % c` are. Injective: candidates `parallel`, write unchanged.
//! Otherwise: candidates `parallel` with the write's atomic form
//! (`atomic_accumulate`, `atomic_maximize`, `atomic_minimize`; a `store`
//! of a constant, as reset kernels do, races harmlessly and stays a store).
//!
//! A dynamic kernel's strides are dim symbols (`((n * %row.0 + i) *
//! %col.0) + j`): the same mixed radix then has polynomial coefficients
//! and widths (`ir::loops::poly`), the widths from the loop bounds
//! (`j < %col.0`), and each coefficient must exceed the reach below it
//! provably (`%col.0 > %col.0 - 1`), whatever the dims. A buffer extent
//! that is an expression of symbols (a VALID convolution's
//! `((%ipos.0 - %fpos.0) + 1)`) is an atom of its own there, known
//! non-negative (`poly::Extents`): the convolution's stride
//! `%ochan.0 * X` then has a sign and `o < X` gives `o <= X - 1`.

//!
//! With `deterministic=true` (`--deterministic`) no float sum is atomic,
//! so a float result does not depend on the order threads run in: a
//! kernel that would add into a float buffer atomically instead moves the
//! loops the written cell determines (a scatter's plain left-hand
//! variables) outward over those it does not (the scattered ones, through
//! index loads and guards, where their bounds allow), runs the moved
//! loops in parallel and the rest in order inside each thread, and writes
//! with a plain accumulate. INT sums stay atomic (integer addition is
//! associative), as do max and min (any order gives the same value).

use super::spec::{self, PassOptions};
use super::{DriverOptions, Ir, PassError, Unit};
use crate::ir::loops::poly::{Extents, Poly};
use crate::ir::loops::*;

/// `deterministic=true|false`, as `--deterministic`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ParallelizeOptions {
    pub deterministic: bool,
}

impl PassOptions for ParallelizeOptions {
    const KEYS: &'static [(&'static str, &'static str)] =
        &[("deterministic", "true|false: no float atomics; a float scatter runs its scattered loops in order in each thread (as --deterministic)")];
    fn from_driver(d: &DriverOptions) -> Self {
        ParallelizeOptions { deterministic: d.deterministic }
    }
    fn set(&mut self, key: &str, value: &str) -> Result<(), String> {
        match key {
            "deterministic" => self.deterministic = spec::parse_bool(value)?,
            _ => return Err(format!("option `{key}` is not declared")),
        }
        Ok(())
    }
}

pub fn run(unit: &mut Unit, opts: &ParallelizeOptions) -> Result<Option<String>, PassError> {
    let Ir::Loop(m) = &mut unit.ir else { return Err(PassError::Internal("parallelize runs on the loop level".into())) };
    let (mut par, mut atomic, mut ordered) = (0, 0, 0);
    let ext = Extents::of(m);
    let float: Vec<bool> = m.buffers.iter().map(|b| b.dtype.is_float()).collect();
    for k in &mut m.kernels {
        let ordered_sum = opts.deterministic && kernel_write(k).is_some_and(|w| w.kind == WriteKind::Accumulate && float.get(w.buf).copied().unwrap_or(false));
        let r = if ordered_sum { parallelize_in_order(k, &ext) } else { parallelize_kernel(k, &ext) };
        par += r.parallel_loops;
        atomic += r.atomic as usize;
        ordered += r.in_order as usize;
    }
    let ordered = if opts.deterministic { format!(", {ordered} float scatters in order (deterministic)") } else { String::new() };
    Ok(Some(format!("{par} parallel loops, {atomic} kernels with atomic writes{ordered}")))
}

#[derive(Debug, Default, PartialEq)]
pub struct Outcome {
    pub parallel_loops: usize,
    pub atomic: bool,
    /// Deterministic mode: a write that would have been atomic runs its
    /// undetermined loops in order instead.
    pub in_order: bool,
}

/// The kernel's one write, if it has exactly one.
fn kernel_write(k: &Kernel) -> Option<Write> {
    let mut sp = Spine { ranges: vec![None; k.vars.len()], bounds: vec![None; k.vars.len()], ..Default::default() };
    collect(&k.body, &mut sp, true);
    sp.write.filter(|_| sp.computes == 1)
}

/// [`parallelize_kernel`] without float atomics: where the write is not
/// injective in the candidates, the loops it determines move out and run
/// in parallel, the others in order.
fn parallelize_in_order(k: &mut Kernel, ext: &Extents) -> Outcome {
    let before = k.clone();
    let first = parallelize_kernel(k, ext);
    if !first.atomic {
        return first;
    }
    *k = before;
    let mut sp = Spine { ranges: vec![None; k.vars.len()], bounds: vec![None; k.vars.len()], ..Default::default() };
    collect(&k.body, &mut sp, true);
    let Some(write) = sp.write.clone() else { return Outcome::default() };
    let det = determined(&write.offset, &sp).or_else(|| determined_symbolic(&write.offset, &sp, ext)).unwrap_or_default();
    hoist(&mut k.body, &det);
    let mut sp = Spine { ranges: vec![None; k.vars.len()], bounds: vec![None; k.vars.len()], ..Default::default() };
    collect(&k.body, &mut sp, true);
    let single = |r: (i64, i64)| r.0 == r.1;
    let cands: Vec<VarId> = sp.loops.iter().take_while(|l| det.contains(&l.0) || single(l.1)).map(|l| l.0).collect();
    mark(&mut k.body, &cands, false);
    Outcome { parallel_loops: cands.len(), atomic: false, in_order: true }
}

/// The index of the one node of `ns` that is not an index load (the
/// spine goes on through it), if there is exactly one.
fn spine_node(ns: &[Node]) -> Option<usize> {
    let mut rest = ns.iter().enumerate().filter(|(_, n)| !matches!(n, Node::LoadIndex { .. }));
    let (i, _) = rest.next()?;
    rest.next().is_none().then_some(i)
}

/// Moves the spine loops in `det` out over the spine loops not in it
/// (keeping each group's order), where the moved loop's bounds do not use
/// what it moves over: the outer loop's variable and the indices loaded
/// between them. Guards between them stay inside, around the same body.
fn hoist(ns: &mut [Node], det: &[VarId]) {
    let Some(i) = spine_node(ns) else { return };
    match &mut ns[i] {
        Node::Guard(g) => hoist(&mut g.body, det),
        Node::For(l) => {
            hoist(&mut l.body, det);
            if !det.contains(&l.var) {
                if let Some(swapped) = swap_with_next(l, det) {
                    ns[i] = swapped;
                    // The moved loop's body now holds `l`: go on below it.
                    if let Node::For(outer) = &mut ns[i] {
                        hoist(&mut outer.body, det);
                    }
                }
            }
        }
        _ => {}
    }
}

/// `for o { loads; guard { for i in det { B } } }` as
/// `for i { for o { loads; guard { B } } }`, when `i`'s bounds use
/// neither `o` nor the loaded indices.
fn swap_with_next(outer: &mut For, det: &[VarId]) -> Option<Node> {
    let mut bound = vec![outer.var];
    // Find the path to the next loop: through loads and guards.
    fn find<'a>(ns: &'a mut Vec<Node>, bound: &mut Vec<VarId>) -> Option<(&'a mut Vec<Node>, usize)> {
        for n in ns.iter() {
            if let Node::LoadIndex { var, .. } = n {
                bound.push(*var);
            }
        }
        let i = spine_node(ns)?;
        match &ns[i] {
            Node::For(_) => Some((ns, i)),
            Node::Guard(_) => {
                let Node::Guard(g) = &mut ns[i] else { unreachable!("matched a guard") };
                find(&mut g.body, bound)
            }
            _ => None,
        }
    }
    let (holder, i) = find(&mut outer.body, &mut bound)?;
    let Node::For(inner) = &holder[i] else { return None };
    let mut uses = false;
    inner.lo.for_each_var(&mut |v| uses |= bound.contains(&v));
    inner.hi.for_each_var(&mut |v| uses |= bound.contains(&v));
    if !det.contains(&inner.var) || uses {
        return None;
    }
    let Node::For(inner) = holder.remove(i) else { unreachable!("checked above") };
    let For { var, lo, hi, kind, body } = inner;
    for (k, n) in body.into_iter().enumerate() {
        holder.insert(i + k, n);
    }
    let outer_loop = std::mem::replace(outer, For { var: outer.var, lo: IExpr::c(0), hi: IExpr::c(0), kind: outer.kind, body: Vec::new() });
    Some(Node::For(For { var, lo, hi, kind, body: vec![Node::For(outer_loop)] }))
}

/// What the walk down the spine collects.
#[derive(Default)]
struct Spine {
    /// Loop variables on the spine with their constant-or-interval bounds.
    loops: Vec<(VarId, (i64, i64))>,
    /// `lo <= e < hi` facts in force at the write, with constant bounds.
    facts: Vec<(IExpr, i64, i64)>,
    /// Every variable's interval where known (loops anywhere above the write).
    ranges: Vec<Option<(i64, i64)>>,
    /// Every loop variable's bounds `[lo, hi)` as written (the symbolic proof).
    bounds: Vec<Option<(IExpr, IExpr)>>,
    write: Option<Write>,
    write_value_const: bool,
    /// Variables each `load_index` offset uses (the loaded value depends
    /// on them).
    loads: Vec<(VarId, Vec<VarId>)>,
    /// The proof assumes one write per kernel (what lowering produces).
    computes: usize,
}

/// `ext`: the module's composite buffer extents ([`Extents::of`]).
pub fn parallelize_kernel(k: &mut Kernel, ext: &Extents) -> Outcome {
    let mut sp = Spine { ranges: vec![None; k.vars.len()], bounds: vec![None; k.vars.len()], ..Default::default() };
    collect(&k.body, &mut sp, true);
    let Some(write) = sp.write.clone() else { return Outcome::default() };
    if sp.computes != 1 {
        return Outcome::default();
    }
    // Variables the written cell depends on, through loaded indices too.
    let mut used: Vec<VarId> = Vec::new();
    write.offset.for_each_var(&mut |v| used.push(v));
    let mut i = 0;
    while i < used.len() {
        if let Some((_, deps)) = sp.loads.iter().find(|(l, _)| *l == used[i]) {
            for d in deps {
                if !used.contains(d) {
                    used.push(*d);
                }
            }
        }
        i += 1;
    }
    // A spine loop of one iteration (a dim of 1 that simplify-index folded
    // out of the offset) is a candidate too: it is trivially determined,
    // and keeping it parallel keeps the parallel chain unbroken for codegen.
    let single = |r: (i64, i64)| r.0 == r.1;
    let prefix = sp.loops.iter().position(|l| !used.contains(&l.0) && !single(l.1)).unwrap_or(sp.loops.len());
    let cands: Vec<VarId> = sp.loops.iter().enumerate().filter(|(i, l)| used.contains(&l.0) || (*i < prefix && single(l.1))).map(|(_, l)| l.0).collect();
    if cands.is_empty() {
        return Outcome::default();
    }
    let covers = |d: Option<Vec<VarId>>| d.is_some_and(|d| cands.iter().all(|v| d.contains(v) || sp.loops.iter().any(|l| l.0 == *v && single(l.1))));
    let injective = covers(determined(&write.offset, &sp)) || covers(determined_symbolic(&write.offset, &sp, ext));
    // Racing stores of one constant are harmless; other racing stores are
    // not, and have no atomic form: leave such a kernel sequential.
    let harmless_store = write.kind == WriteKind::Store && sp.write_value_const;
    if !injective && write.kind.atomic().is_none() && !harmless_store {
        return Outcome::default();
    }
    let atomic = !injective && !harmless_store;
    mark(&mut k.body, &cands, atomic);
    Outcome { parallel_loops: cands.len(), atomic, in_order: false }
}

fn collect(ns: &[Node], sp: &mut Spine, on_spine: bool) {
    let spine_here = on_spine && ns.iter().filter(|n| !matches!(n, Node::LoadIndex { .. })).count() == 1;
    for n in ns {
        match n {
            Node::For(l) => {
                let get = |v: VarId| sp.ranges.get(v).copied().flatten().unwrap_or((i64::MIN, i64::MAX));
                let lo = l.lo.interval(&get).0;
                let hi = l.hi.interval(&get).1;
                let r = (lo, hi.saturating_sub(1));
                if let Some(slot) = sp.ranges.get_mut(l.var) {
                    *slot = Some(r);
                }
                if let Some(slot) = sp.bounds.get_mut(l.var) {
                    *slot = Some((l.lo.clone(), l.hi.clone()));
                }
                if spine_here {
                    sp.loops.push((l.var, r));
                }
                collect(&l.body, sp, spine_here);
            }
            Node::Guard(g) => {
                for c in &g.conds {
                    if let Cond::InRange { e, lo: IExpr::Const(lo), hi: IExpr::Const(hi) } = c {
                        sp.facts.push((e.clone(), *lo, *hi));
                    }
                }
                collect(&g.body, sp, spine_here);
            }
            Node::LoadIndex { var, offset, .. } => {
                let mut u = Vec::new();
                offset.for_each_var(&mut |v| u.push(v));
                sp.loads.push((*var, u));
            }
            Node::Compute(c) => {
                sp.computes += 1;
                sp.write_value_const = matches!(c.values.get(c.write.value).map(|v| &v.op), Some(VOp::Const(_)));
                sp.write = Some(c.write.clone());
            }
            Node::Sync | Node::Copies(_) => {}
        }
    }
}

/// The variables the written offset determines, or `None` when the
/// mixed-radix proof fails.
fn determined(offset: &IExpr, sp: &Spine) -> Option<Vec<VarId>> {
    let lin = offset.linear();
    let get = |v: VarId| sp.ranges.get(v).copied().flatten().unwrap_or((i32::MIN as i64, i32::MAX as i64));
    let mut atoms: Vec<(IExpr, i64, i64)> = Vec::new();
    for (a, c) in &lin.terms {
        let (mut lo, mut hi) = a.interval(&get);
        for (e, flo, fhi) in &sp.facts {
            if e == a {
                lo = lo.max(*flo);
                hi = hi.min(fhi - 1);
            }
        }
        if hi < lo {
            // The atom takes no value: the write never runs.
            return Some(Vec::new());
        }
        atoms.push((a.clone(), c.unsigned_abs().min(i64::MAX as u64) as i64, hi.saturating_sub(lo)));
    }
    // Equal coefficients can only both be recovered when one atom is
    // constant: sort zero widths first.
    atoms.sort_by_key(|t| (t.1, t.2));
    let mut reach: i128 = 0;
    for (_, coef, width) in &atoms {
        if (*coef as i128) <= reach {
            return None;
        }
        reach += *coef as i128 * *width as i128;
    }
    let mut out = Vec::new();
    for (a, _, _) in &atoms {
        match a {
            IExpr::Var(v) => out.push(*v),
            IExpr::Bin(IBin::FloorDiv, x, c) => {
                if let (IExpr::Var(v), Some(c)) = (&**x, c.as_const()) {
                    let m = IExpr::bin(IBin::Mod, IExpr::Var(*v), IExpr::Const(c));
                    if c > 0 && atoms.iter().any(|t| t.0 == m) {
                        out.push(*v);
                    }
                }
            }
            _ => {}
        }
    }
    Some(out)
}

/// [`determined`] for symbolic strides: the offset as `sum(coef * v)`
/// over loop variables with coefficients that are polynomials over dim
/// symbols (terms without a variable are the same at every point and do
/// not matter), each `v` of width `hi - 1 - lo` from its loop's bounds (a
/// polynomial bound through `min`/`max`, else its interval). Taking the
/// atoms smallest coefficient first, each coefficient must provably exceed
/// the reach of the ones before (`Poly::le`). Every variable is then
/// determined; `None` when the offset has another form or a step fails.
/// A loop that does not run makes its widths negative, but then the
/// write never runs: the relations are needed only where every loop runs,
/// and there the polynomial bounds hold. `ext`'s extents are atoms.
fn determined_symbolic(offset: &IExpr, sp: &Spine, ext: &Extents) -> Option<Vec<VarId>> {
    let mut terms: Vec<(VarId, Poly)> = Vec::new();
    expand(offset, &Poly::constant(1), &mut terms, ext)?;
    let mut atoms = Vec::new();
    for (v, coef) in terms {
        if coef.as_const() == Some(0) {
            continue;
        }
        // |coef|, when its sign is known.
        let coef = if coef.is_nonneg() { coef } else { Some(coef.neg()?).filter(Poly::is_nonneg)? };
        let poly_width = || {
            let (lo, hi) = sp.bounds.get(v)?.as_ref()?;
            Poly::upper_in(hi, ext)?.sub(&Poly::lower_in(lo, ext)?)?.sub(&Poly::constant(1))
        };
        let width = poly_width().or_else(|| sp.ranges.get(v).copied().flatten().map(|(lo, hi)| Poly::constant(hi as i128 - lo as i128)))?;
        atoms.push((v, coef, width));
    }
    let mut reach = Poly::constant(0);
    let mut out = Vec::new();
    while !atoms.is_empty() {
        let next = reach.add(&Poly::constant(1))?;
        let i = atoms.iter().position(|(_, c, _)| next.le(c))?;
        let (v, c, w) = atoms.remove(i);
        reach = reach.add(&c.mul(&w)?)?;
        out.push(v);
    }
    Some(out)
}

/// Adds `scale * e` to `terms` as `(variable, coefficient)` pairs; `None`
/// when `e` is not such a sum (a product of variables, a division of one,
/// a coefficient that is not a polynomial).
fn expand(e: &IExpr, scale: &Poly, terms: &mut Vec<(VarId, Poly)>, ext: &Extents) -> Option<()> {
    if !e.uses_any_var() {
        return Some(());
    }
    match e {
        IExpr::Var(v) => {
            match terms.iter_mut().find(|t| t.0 == *v) {
                Some(t) => t.1 = t.1.add(scale)?,
                None => terms.push((*v, scale.clone())),
            }
            Some(())
        }
        IExpr::Bin(IBin::Add, a, b) => {
            expand(a, scale, terms, ext)?;
            expand(b, scale, terms, ext)
        }
        IExpr::Bin(IBin::Sub, a, b) => {
            expand(a, scale, terms, ext)?;
            expand(b, &scale.neg()?, terms, ext)
        }
        IExpr::Bin(IBin::Mul, a, b) => {
            let (x, c) = if a.uses_any_var() { (a, b) } else { (b, a) };
            expand(x, &scale.mul(&Poly::of_in(c, ext)?)?, terms, ext)
        }
        _ => None,
    }
}

fn mark(ns: &mut [Node], cands: &[VarId], atomic: bool) {
    for n in ns {
        match n {
            Node::For(l) => {
                // Loops other passes gave a GPU role keep it.
                if matches!(l.kind, LoopKind::Parallel | LoopKind::Reduce) {
                    l.kind = if cands.contains(&l.var) { LoopKind::Parallel } else { LoopKind::Reduce };
                }
                mark(&mut l.body, cands, atomic);
            }
            Node::Guard(g) => mark(&mut g.body, cands, atomic),
            Node::LoadIndex { .. } | Node::Sync | Node::Copies(_) => {}
            Node::Compute(c) => {
                if let Some(a) = c.write.kind.atomic().filter(|_| atomic) {
                    c.write.kind = a;
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::driver::Source;
    use crate::passes::{manager, DriverOptions, Ir, Unit, DEFAULT_PIPELINE};

    /// (kernel name, parallel loop variables, write kind) for an example.
    fn kernels(example: &str, binds: &[&str]) -> Vec<((KernelRole, Option<usize>), Vec<String>, WriteKind)> {
        let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../docs/examples").join(example);
        let mut unit = Unit::from_source(Source::load(&path).unwrap());
        let opts = DriverOptions { binds: binds.iter().map(|s| s.to_string()).collect(), ..DriverOptions::default() };
        // The pipeline up to this pass: later ones (direct-stores) change writes.
        let upto = DEFAULT_PIPELINE.iter().position(|&p| p == "parallelize").unwrap();
        manager::PassManager::from_names(&DEFAULT_PIPELINE[..=upto], manager::Instrument::default())
            .unwrap()
            .run(&mut unit, &opts, &mut std::io::sink())
            .unwrap();
        let Ir::Loop(m) = unit.ir else { panic!("not lowered") };
        m.kernels
            .iter()
            .map(|k| {
                let mut par = Vec::new();
                let mut write = None;
                k.walk(&mut |n| match n {
                    Node::For(l) if l.kind == LoopKind::Parallel => par.push(k.vars[l.var].name.clone()),
                    Node::Compute(c) => write = Some(c.write.kind),
                    _ => {}
                });
                ((k.role, k.stmt), par, write.unwrap())
            })
            .collect()
    }

    #[test]
    fn conv_output_positions_are_parallel_without_atomics() {
        let ks = kernels("conv_valid.et", &["batch=[2]", "ipos=[9,9]", "fpos=[3,3]", "stride=[2,2]", "ichan=[2]", "ochan=[3]"]);
        let main = ks.iter().find(|k| k.0 == (KernelRole::Main, Some(2))).unwrap();
        assert_eq!(main.1, ["batch_0", "opos_0", "opos_1", "ochan_0"]);
        assert_eq!(main.2, WriteKind::Accumulate);
        // The reset kernel stores a constant: parallel, no atomics.
        let reset = ks.iter().find(|k| k.0 == (KernelRole::Reset, Some(2))).unwrap();
        assert_eq!(reset.2, WriteKind::Store);
    }

    #[test]
    fn scatter_with_loaded_indices_needs_atomics() {
        let ks = kernels("scatter_nd.et", &[]);
        let last = ks.last().unwrap();
        assert_eq!(last.0 .0, KernelRole::Main, "{ks:?}");
        assert_eq!(last.2, WriteKind::AtomicAccumulate, "{ks:?}");
        assert!(last.1.iter().any(|v| v.starts_with("upd")), "{ks:?}");
    }

    #[test]
    fn space_to_depth_and_tile_writes_are_proved_injective() {
        // y[batch, pos//blk, FLAT(pos % blk, chan)]: pos is determined by
        // the pair (pos//blk, pos%blk).
        let ks = kernels("space_to_depth.et", &["chan=[3]", "batch=[2]"]);
        let main = ks.last().unwrap();
        assert_eq!(main.2, WriteKind::Accumulate, "{ks:?}");
        assert_eq!(main.1.len(), 4, "{ks:?}");
        // y[rep*DIMS(e)+e]: a mixed radix in (rep, e).
        let ks = kernels("tile.et", &["e=[3,2]", "rep=[2,3]"]);
        let main = ks.last().unwrap();
        assert_eq!(main.2, WriteKind::Accumulate, "{ks:?}");
        assert_eq!(main.1.len(), 4, "{ks:?}");
    }

    #[test]
    fn reductions_stay_inside_the_thread() {
        let ks = kernels("matmul.et", &["batch=[2]", "row=[3]", "k=[4]", "col=[5]"]);
        let main = ks.last().unwrap();
        assert_eq!(main.1, ["batch_0", "row_0", "col_0"]);
        assert_eq!(main.2, WriteKind::Accumulate);
    }

    /// The write of `body` over `c : i32[%r.0, %c.0]` after the pass.
    fn dynamic_write(body: &str) -> (usize, WriteKind) {
        let text = format!("dim %r.0\ndim %c.0\nbuffer a : i32[%r.0, %c.0] input\nbuffer c : i32[%r.0, %c.0] output\n\nkernel @k {{\n{body}\n}}\n");
        let mut m = crate::ir::loops::parse::parse_verified(&text).unwrap_or_else(|e| panic!("{e:?}"));
        let ext = Extents::of(&m);
        let out = parallelize_kernel(&mut m.kernels[0], &ext);
        (out.parallel_loops, m.kernels[0].computes()[0].write.kind)
    }

    #[test]
    fn symbolic_strides_equal_to_the_inner_bounds_are_injective() {
        // c[i * %c.0 + j], j < %c.0: a mixed radix whatever the dims.
        let w = dynamic_write(
            "for i in [0, %r.0) reduce { for j in [0, %c.0) reduce { %0 = load a[((i * %c.0) + j)] : i32\n accumulate c[((i * %c.0) + j)] += %0 } }",
        );
        assert_eq!(w, (2, WriteKind::Accumulate));
        // The dynamic matmul's write over three symbols.
        let m = crate::ir::loops::parse::parse_verified(include_str!("../../tests/Inputs/dynamic_matmul.etir")).unwrap();
        let mut mm = m.kernels[1].clone();
        assert_eq!(parallelize_kernel(&mut mm, &Extents::of(&m)), Outcome { parallel_loops: 3, atomic: false, in_order: false });
        // j may reach %c.0: cells (i, %c.0) and (i + 1, 0) collide (the
        // guard, never true, keeps the module in bounds).
        // j may reach %c.0: cells (i, %c.0) and (i + 1, 0) collide.
        let w = dynamic_write("for i in [0, %r.0) reduce { for j in [0, (%c.0 + 1)) reduce { guard 0 <= ((i * %c.0) + j) < 0 { %0 = const 1 : i32\n accumulate c[((i * %c.0) + j)] += %0 } } }");
        assert_eq!(w.1, WriteKind::AtomicAccumulate);
        // A stride that is another symbol proves nothing.
        let w = dynamic_write("for i in [0, %r.0) reduce { for j in [0, %c.0) reduce { guard 0 <= ((i * %r.0) + j) < 0 { %0 = const 1 : i32\n accumulate c[((i * %r.0) + j)] += %0 } } }");
        assert_eq!(w.1, WriteKind::AtomicAccumulate);
    }

    #[test]
    fn extents_that_are_expressions_are_non_negative_atoms() {
        // c : [%r.0, X] with X = (%r.0 - %c.0) + 1 (a VALID convolution's
        // output): the stride X has a negative coefficient as a polynomial,
        // but as a buffer extent it is never negative, and j < X.
        let run = |hi: &str| {
            let text = format!(
                "dim %r.0\ndim %c.0\nbuffer c : i32[%r.0, ((%r.0 - %c.0) + 1)] output\n\nkernel @k {{\n for i in [0, %r.0) reduce {{ for j in [0, {hi}) reduce {{ \
                 guard 0 <= ((i * ((%r.0 - %c.0) + 1)) + j) < 0 {{ %0 = const 1 : i32\n accumulate c[((i * ((%r.0 - %c.0) + 1)) + j)] += %0 }} }} }}\n}}\n"
            );
            let mut m = crate::ir::loops::parse::parse_verified(&text).unwrap_or_else(|e| panic!("{e:?}"));
            let ext = Extents::of(&m);
            let out = parallelize_kernel(&mut m.kernels[0], &ext);
            (out.parallel_loops, m.kernels[0].computes()[0].write.kind)
        };
        assert_eq!(run("((%r.0 - %c.0) + 1)"), (2, WriteKind::Accumulate));
        // j may reach X: cells (i, X) and (i + 1, 0) collide.
        assert_eq!(run("((%r.0 - %c.0) + 2)").1, WriteKind::AtomicAccumulate);
        // Without the extents as atoms the proof fails (the old behaviour).
        let text = "dim %r.0\ndim %c.0\nbuffer c : i32[%r.0, ((%r.0 - %c.0) + 1)] output\n\nkernel @k {\n for i in [0, %r.0) reduce { for j in [0, ((%r.0 - %c.0) + 1)) reduce { %0 = const 1 : i32\n accumulate c[((i * ((%r.0 - %c.0) + 1)) + j)] += %0 } }\n}\n";
        let mut m = crate::ir::loops::parse::parse_verified(text).unwrap();
        assert!(parallelize_kernel(&mut m.kernels[0], &Extents::default()).atomic);
    }
}
