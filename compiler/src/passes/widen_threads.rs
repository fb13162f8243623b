//! `widen-threads` (GPU): each thread of a copy or elementwise kernel
//! handles a vector of `W` consecutive cells of the innermost chain loop,
//! so its accesses along that loop are 16-byte vectors
//! (`ld.global.nc.v4.f32`, `st.global.v4.f32`) instead of `W` scalar ones.
//!
//! A gather, a space-to-depth, a tile or a bias add runs one thread per
//! cell: one 4-byte load and one 4-byte store per thread, and everything
//! the thread computes before them (its cell's digits, an index load, a
//! guard) once per 4 bytes. Here the innermost chain loop `v` (the one
//! consecutive threads step along) gets a `W`-times shorter trip and each
//! computation an `unroll` loop over the vector's lanes:
//!
//! ```text
//! for w in [0, 256) parallel { ld = load_index idx[w]; guard 0 <= ld < 512 {
//!   for item in [0, 32) parallel { %0 = load src[ld*32 + item]; store dst[w*32 + item] = %0 } } }
//! ```
//!
//! becomes (`item := 4*item + item_l`)
//!
//! ```text
//! for w in [0, 256) parallel { ld = load_index idx[w]; guard 0 <= ld < 512 {
//!   for item in [0, 8) parallel { for item_l in [0, 4) unroll {
//!     %0 = load src[ld*32 + (4*item + item_l)]; store dst[w*32 + (4*item + item_l)] = %0 } } } }
//! ```
//!
//! Every cell is still computed once, by one thread, with the same values:
//! the lanes are the cells the `W` threads computed. A warp's accesses
//! stay contiguous (thread `t` covers bytes `[16t, 16t+16)`), so they are
//! 4x fewer requests over the same sectors. Code generation unrolls the
//! lanes and LLVM's load-store vectorizer merges them, given the
//! alignment each offset proves (docs/codegen.md, "Vector loads").
//!
//! Applies to kernels whose chain's rest holds only computations, index
//! loads, guards and `unroll` loops (copies, elementwise kernels, clears,
//! `sink-broadcasts`' repetitions; not sums, not block tiles), where:
//!
//! - `v` appears in nothing the thread decides before computing (a guard,
//!   a loop bound, an index load): the lanes share those;
//! - every load and write offset that depends on `v` is `v + rest`
//!   (`IExpr::unit_stride_in`) and, at a vector's first lane, a multiple of
//!   `W` (`IExpr::residue_under`, under the kernel's dim facts), so each
//!   vector is one aligned access;
//! - the writes are plain stores, one thread's accumulations, or atomic
//!   adds where the GPU adds their dtype in vectors
//!   (`GpuTarget::vector_atomic_lanes`: 4 `f32` from sm_90, which caps
//!   `W`): a scatter's lanes then become one `red.global.add.v4.f32`
//!   (the code generator's `atomic_run`), a fourth of the L2 atomics.
//!   Elsewhere atomics stay one per thread, coalesced;
//! - `W` (16 bytes of the widest element accessed along `v`, halved until
//!   it fits) divides `v`'s trip, and the chain keeps at least
//!   `min_threads` threads (`GpuTarget`, as `sink-broadcasts`). A
//!   dynamic kernel's symbolic trip (`[0, %item.0)`) divides where its
//!   dim facts say so (a `div4` variant's, `Kernel::multiples`): its bound
//!   becomes `%item.0 // W`, exact; its threads are counted at run time,
//!   so the floor is not checked.
//!
//! `bytes=N` (4, 8 or 16) caps the vector's bytes; `bytes=0` turns the
//! pass off.

use super::{DriverOptions, Ir, PassError, PassOptions, Unit};
use crate::ir::loops::chain::Chain;
use crate::ir::loops::target::GpuTarget;
use crate::ir::loops::*;

/// What `widen-threads` is told: the GPU (`--target`), and the widest
/// vector it may give a thread.
#[derive(Clone, Debug)]
pub struct WidenThreadsOptions {
    pub gpu: GpuTarget,
    /// The most bytes a thread's vector covers (16: a 128-bit access).
    pub bytes: i64,
}

impl PassOptions for WidenThreadsOptions {
    const KEYS: &'static [(&'static str, &'static str)] = &[("bytes", "N: the most bytes of a thread's vector, 0 (off), 4, 8 or 16 (default 16)")];
    fn from_driver(d: &DriverOptions) -> Self {
        WidenThreadsOptions { gpu: d.gpu, bytes: 16 }
    }
    fn set(&mut self, key: &str, value: &str) -> Result<(), String> {
        match key {
            "bytes" => {
                self.bytes = match value.parse() {
                    Ok(b @ (0 | 4 | 8 | 16)) => b,
                    _ => return Err(format!("`bytes` must be 0, 4, 8 or 16, not `{value}`")),
                };
                Ok(())
            }
            _ => Err(format!("option `{key}` is not declared")),
        }
    }
}

pub fn run(unit: &mut Unit, opts: &WidenThreadsOptions) -> Result<Option<String>, PassError> {
    let Ir::Loop(m) = &mut unit.ir else { return Err(PassError::Internal("widen-threads runs on the loop level".into())) };
    let mut widened = Vec::new();
    for k in &mut m.kernels {
        if let Some((w, t)) = widen_kernel(k, &m.buffers, opts) {
            widened.push(format!("{} x{w}", k.name));
            *k = t;
        }
    }
    Ok(Some(if widened.is_empty() { "0 kernels changed".to_string() } else { format!("{} kernels changed ({})", widened.len(), widened.join(", ")) }))
}

/// The kernel with `W` cells per thread, and `W`, when `k` qualifies (see
/// the module doc).
pub fn widen_kernel(k: &Kernel, buffers: &[Buffer], opts: &WidenThreadsOptions) -> Option<(i64, Kernel)> {
    let mut chain = Chain::of_dynamic(&k.body);
    let (&(v, _, _), (lo, hi)) = (chain.loops.last()?, chain.bounds.last()?);
    let lo = lo.as_const()?;
    // `hi - lo`, constant, or over the dims in a dynamic kernel.
    let trip = IExpr::fold(IBin::Sub, hi.clone(), IExpr::c(lo));
    let rest = chain.rest(&k.body);
    let mut offsets = Vec::new(); // (offset, element bytes) of v's accesses
    let mut most = i64::MAX; // lanes an atomic add's vector may have
    if !lanes_can_share(rest, v, buffers, &opts.gpu, &mut offsets, &mut most) || offsets.is_empty() {
        return None;
    }
    let widest = offsets.iter().map(|o| o.1).max()?;
    let mut w = (opts.bytes / widest.max(1)).min(most);
    // A dynamic chain's threads are counted at run time: it is widened
    // whatever their number (in a divisibility variant, launched only
    // where its facts hold).
    let enough_threads = |w: i64| chain.bounds.iter().any(|(lo, hi)| lo.is_symbolic() || hi.is_symbolic()) || chain.cells() / w >= opts.gpu.min_threads;
    let fits =
        |w: i64| trip.residue_under(w, &k.multiples) == Some(0) && enough_threads(w) && offsets.iter().all(|(o, _)| o.vector_aligned(v, lo, w, &k.multiples));
    while w > 1 && !fits(w) {
        w /= 2;
    }
    if w <= 1 {
        return None;
    }

    // `t` has `k`'s shape: the chain's path holds for it.
    let mut t = k.clone();
    // `trip` is a multiple of `w`: the quotient is exact.
    let hi = IExpr::fold(IBin::Add, IExpr::c(lo), IExpr::fold(IBin::FloorDiv, trip, IExpr::c(w)));
    chain.set_hi(&mut t.body, v, hi);
    let name = k.vars[v].name.clone();
    let mut vars = std::mem::take(&mut t.vars);
    wrap_computes(chain.rest_mut(&mut t.body), &mut |node| {
        // Each computation gets its own lane variable: a variable is bound once.
        let lane = add_var(&mut vars, &format!("{name}_l"));
        let mut body = vec![node];
        let at = IExpr::add(IExpr::vector_start(v, lo, w), IExpr::v(lane));
        for_each_expr_mut(&mut body, &mut |e| *e = e.substitute(v, &at));
        Node::For(For { var: lane, lo: IExpr::c(0), hi: IExpr::c(w), kind: LoopKind::Unroll, body })
    });
    t.vars = vars;
    Some((w, t))
}

/// Can the lanes of a vector along `v` share everything in `nodes` but
/// their computations? Only computations, index loads, guards and
/// `unroll` loops, none but the computations using `v`; atomic adds only
/// where `gpu` adds their dtype in vectors (`most` becomes the fewest
/// lanes such a vector has); collects the computations' offsets that
/// depend on `v`, with their element's bytes.
fn lanes_can_share(nodes: &[Node], v: VarId, buffers: &[Buffer], gpu: &GpuTarget, offsets: &mut Vec<(IExpr, i64)>, most: &mut i64) -> bool {
    nodes.iter().all(|n| match n {
        Node::Compute(c) => {
            match c.write.kind {
                WriteKind::Store | WriteKind::Accumulate => {}
                // One vector atomic add per thread (the code generator's
                // `atomic_run`), where the GPU has one for the dtype.
                WriteKind::AtomicAccumulate if c.write.offset.uses(v) => {
                    let lanes = gpu.vector_atomic_lanes(buffers[c.write.buf].dtype);
                    if lanes < 2 {
                        return false;
                    }
                    *most = (*most).min(lanes);
                }
                _ => return false,
            }
            let loads = c.values.iter().filter_map(|x| if let VOp::Load { buf, offset } = &x.op { Some((*buf, offset)) } else { None });
            for (buf, o) in loads.chain([(c.write.buf, &c.write.offset)]) {
                if o.uses(v) {
                    offsets.push((o.clone(), buffers[buf].dtype.size() as i64));
                }
            }
            true
        }
        Node::For(f) => f.kind == LoopKind::Unroll && !f.lo.uses(v) && !f.hi.uses(v) && lanes_can_share(&f.body, v, buffers, gpu, offsets, most),
        Node::Guard(g) => !g.conds.iter().flat_map(|c| c.exprs()).any(|e| e.uses(v)) && lanes_can_share(&g.body, v, buffers, gpu, offsets, most),
        Node::LoadIndex { offset, .. } => !offset.uses(v),
        Node::Sync | Node::Copies(_) => false,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ir::loops::parse::parse_module;

    fn opts() -> WidenThreadsOptions {
        WidenThreadsOptions { gpu: GpuTarget::default(), bytes: 16 }
    }

    fn widen(src: &str) -> Option<i64> {
        let m = parse_module(src).unwrap();
        widen_kernel(&m.kernels[0], &m.buffers, &opts()).map(|(w, t)| {
            let mut m2 = m.clone();
            m2.kernels[0] = t;
            crate::ir::loops::verify::verify(&m2).unwrap();
            w
        })
    }

    const COPY: &str = "facts(parallelized)\nbuffer x : DT[64, N] input\nbuffer y : DT[64, N] output\n\nkernel @k {\n  for i in [0, 64) parallel {\n    for j in [0, N) parallel {\n      %0 = load x[((i * N) + j)] : DT\n      store y[((i * N) + j)] = %0\n    }\n  }\n}\n";

    fn copy(dt: &str, n: i64) -> String {
        COPY.replace("DT", dt).replace('N', &n.to_string())
    }

    #[test]
    fn vectors_of_16_bytes_halved_until_they_divide() {
        assert_eq!(widen(&copy("f32", 256)), Some(4));
        assert_eq!(widen(&copy("f64", 256)), Some(2));
        assert_eq!(widen(&copy("f32", 258)), Some(2));
        // 64 x 257 cells: an odd row leaves every other vector misaligned.
        assert_eq!(widen(&copy("f32", 257)), None);
        // 64 x 64 cells: a quarter would be 1024 threads, under 4096.
        assert_eq!(widen(&copy("f32", 64)), None);
    }

    #[test]
    fn the_widest_element_sets_the_lanes() {
        // f64 in, f32 out: 2 lanes (16 bytes of f64, 8 of f32), each
        // access aligned to its own lanes' bytes.
        let src = copy("f64", 256)
            .replace("buffer y : f64", "buffer y : f32")
            .replace("store y[((i * 256) + j)] = %0", "%1 = cast %0 : f32\n      store y[((i * 256) + j)] = %1");
        assert_eq!(widen(&src), Some(2));
        // A load that does not move along the threads' loop (a broadcast)
        // does not count.
        let bcast = copy("f32", 256).replace("load x[((i * 256) + j)] : f32", "load x[(i * 256)] : f32");
        assert_eq!(widen(&bcast), Some(4));
    }

    /// The bench scatter's shape: update rows of 32 atomically added into
    /// the rows their index picks.
    fn scatter(dt: &str) -> String {
        "facts(parallelized)\nbuffer idx : i32[8192] input\nbuffer vals : DT[8192, 32] input\nbuffer out : DT[4096, 32] output\n\nkernel @k vars(u, item, ld) {\n  for u in [0, 8192) parallel {\n    ld = load_index idx[u]\n    guard 0 <= ld < 4096 {\n      for item in [0, 32) parallel {\n        %0 = load vals[((u * 32) + item)] : DT\n        atomic_accumulate out[((ld * 32) + item)] += %0\n      }\n    }\n  }\n}\n".replace("DT", dt)
    }

    #[test]
    fn atomic_adds_take_vectors_where_the_gpu_has_them() {
        let on = |sm: u32, src: &str| {
            let m = parse_module(src).unwrap();
            let o = WidenThreadsOptions { gpu: GpuTarget::for_sm(sm), bytes: 16 };
            widen_kernel(&m.kernels[0], &m.buffers, &o).map(|x| x.0)
        };
        // sm_90 adds 4 f32 at once; sm_80 has no vector atomics.
        assert_eq!(on(90, &scatter("f32")), Some(4));
        assert_eq!(on(80, &scatter("f32")), None);
        // PTX has no vector atomic add of f64 or s32.
        assert_eq!(on(90, &scatter("f64")), None);
        assert_eq!(on(90, &scatter("i32")), None);
        // An atomic add whose cell the lanes share (a sum into one cell)
        // is no vector.
        let one_cell = scatter("f32").replace("out[((ld * 32) + item)]", "out[(ld * 32)]");
        assert_eq!(on(90, &one_cell), None);
    }

    #[test]
    fn the_option_caps_or_turns_off() {
        let m = parse_module(&copy("f32", 256)).unwrap();
        let mut o = opts();
        o.bytes = 8;
        assert_eq!(widen_kernel(&m.kernels[0], &m.buffers, &o).map(|x| x.0), Some(2));
        o.bytes = 0;
        assert!(widen_kernel(&m.kernels[0], &m.buffers, &o).is_none());
        assert!(o.set("bytes", "12").is_err());
    }
}
