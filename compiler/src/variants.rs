//! Run-time kernel variants of a dynamic build (docs/dynamic-shapes.md,
//! "Run-time variants: design"): the GPU passes run once more per
//! [`RULES`] entry, a set of pass options, and each kernel that comes out
//! different from the general one is kept, renamed `NAME__rule`, with the
//! condition on the dims under which its launch step should run it. The
//! runtime picks (`Manifest::bind`); every variant computes the same cells
//! as the general kernel at any dims its condition admits (their edges are
//! guarded): a tiling's condition decides speed only, a divisibility
//! rule's (`Rule::multiple`) is exactly the facts its kernel's alignment
//! was proven under.

use crate::driver::{Failure, Source};
use crate::ir::loops::chain::Chain;
use crate::ir::loops::walk::rename_buffers;
use crate::ir::loops::{IExpr, Kernel, LoopKind, LoopModule, Multiples, Node};
use crate::passes::GPU_PASSES;
use crate::pipeline::{self, GpuOptions};
use crate::sema::Program;

/// One way to lower a kernel again: options given to GPU passes, and the
/// conditions on the kernel (as it is before `register-tiles`) under which
/// the result is worth launching.
pub struct Rule {
    /// The suffix of a variant kernel's name (`NAME__rt2x2`).
    pub name: &'static str,
    /// `(pass, "key=value")`, as [`GpuOptions::options`] takes them.
    pub options: &'static [(&'static str, &'static str)],
    /// `Some(n)`: each kernel is compiled as if the dims its buffers'
    /// row lengths use were multiples of `n` ([`stride_multiples`],
    /// `Kernel::multiples`), and is launched only where they are: its
    /// conditions are `when`'s with those facts added to each alternative.
    pub multiple: Option<i64>,
    /// Alternatives, each index expressions over the dims that must all
    /// be non-negative; `None` where the rule says nothing of this kernel.
    pub when: fn(&Kernel) -> Option<Vec<Vec<IExpr>>>,
}

/// The rules, in the order the runtime tries them (the first whose
/// condition holds wins). From the convolution measurements
/// (docs/dynamic-shapes.md, "What run-time variants measured" and "A
/// variant for few output channels"): where the output channels are at
/// most 8, one thread holds all of a cell's channels (a 1x8 register tile)
/// in a block of 8x8 output positions, so each input value is staged once
/// per block and tap for every channel; else a 4x4 register tile of output
/// columns and channels where both are at least 32 (2026-11-27: 1.8x fewer
/// warp instructions and bytes than the 2x2 at 32 columns and channels),
/// else a 2x2 tile wherever one of the two is at least 16; below, most of
/// a block's tiles are guarded off and the general kernel is cheaper.
///
/// Then kernels whose row lengths are multiples of 4 (16 bytes of `f32`):
/// their vector cells, 128-bit copies and stores are aligned, as a
/// static kernel's (docs/dynamic-shapes.md, "Divisibility variants";
/// Triton specialises on arguments divisible by 16 for the same reason).
pub const RULES: &[Rule] = &[
    Rule { name: "ch8", options: &[("register-tiles", "window=1x8"), ("block-tiles", "choice=8x8x1k4")], multiple: None, when: window_channels_8 },
    Rule { name: "rt4x4", options: &[("register-tiles", "window=4x4")], multiple: None, when: window_tile_32 },
    Rule { name: "rt2x2", options: &[("register-tiles", "window=2x2")], multiple: None, when: window_tile_16 },
    Rule { name: "div4", options: &[], multiple: Some(4), when: always },
];

/// No condition beyond the rule's facts.
fn always(_: &Kernel) -> Option<Vec<Vec<IExpr>>> {
    Some(vec![Vec::new()])
}

/// `n` for each dim symbol that is the row length (innermost extent) of
/// a buffer `k` uses. What a vector access's alignment turns on: a vector
/// runs along a row (unit stride), and every other stride is a multiple
/// of the row length, so `a[row * %k.0 + k]` starts rows 16 bytes apart
/// only where `%k.0` is a multiple of 4. A row length of several symbols
/// (`%ipos.1 - %fpos.1 + 1`) gives none: their facts would not make it a
/// multiple.
pub fn stride_multiples(m: &LoopModule, k: &Kernel, n: i64) -> Multiples {
    let mut dims = Vec::new();
    for b in k.buffers() {
        if let Some(IExpr::Sym(d)) = m.buffers.get(b).and_then(|b| b.shape.last()) {
            dims.push(*d);
        }
    }
    dims.sort_unstable();
    dims.dedup();
    Multiples { facts: dims.into_iter().map(|d| (d, n)).collect() }
}

/// The most output channels (a window's innermost chain loop) the `ch8`
/// tile holds: more would need a second tile per thread, and each input
/// value staged again for it.
const MAX_TILE_CHANNELS: i64 = 8;

/// A convolution's innermost chain loop (its output channels, the one
/// `register-tiles` tiles by `window=1x8`) of at most
/// [`MAX_TILE_CHANNELS`].
fn window_channels_8(k: &Kernel) -> Option<Vec<Vec<IExpr>>> {
    let (lo, hi) = window_chain(k)?.pop()?;
    Some(vec![vec![IExpr::sub(IExpr::c(MAX_TILE_CHANNELS), trip(&lo, &hi))]])
}

/// The trip of one of a window's tiled loops from which the 2x2 tile
/// pays: the general block's 8 threads along it, times 2.
const MIN_TILED_TRIP: i64 = 16;

/// A convolution's (a kernel with nested reductions) two innermost chain
/// loops — the ones `register-tiles` tiles — either of at least
/// [`MIN_TILED_TRIP`].
fn window_tile_16(k: &Kernel) -> Option<Vec<Vec<IExpr>>> {
    let inner = window_chain(k)?;
    Some(inner.iter().map(|(lo, hi)| vec![IExpr::sub(trip(lo, hi), IExpr::c(MIN_TILED_TRIP))]).collect())
}

/// The trip both of a window's tiled loops need for the 4x4 tile: the
/// general block's 8 threads along each, times 4. With 16 channels (or
/// columns) half the block's tiles lie past the extent, and their
/// multiply-adds are computed and dropped (2x the useful ones, measured).
const MIN_TILED_TRIP_4X4: i64 = 32;

/// A convolution's two innermost chain loops (the ones `register-tiles`
/// tiles) both of at least [`MIN_TILED_TRIP_4X4`]: one alternative.
fn window_tile_32(k: &Kernel) -> Option<Vec<Vec<IExpr>>> {
    let inner = window_chain(k)?;
    Some(vec![inner.iter().map(|(lo, hi)| IExpr::sub(trip(lo, hi), IExpr::c(MIN_TILED_TRIP_4X4))).collect()])
}

/// The bounds of a convolution's (a kernel with nested reductions) two
/// innermost chain loops, the ones `register-tiles` tiles; `None` for
/// another kernel.
fn window_chain(k: &Kernel) -> Option<Vec<(IExpr, IExpr)>> {
    let mut reduces = 0;
    k.walk(&mut |n| reduces += matches!(n, Node::For(f) if f.kind == LoopKind::Reduce) as usize);
    let chain = Chain::of_dynamic(&k.body);
    if reduces < 2 || chain.bounds.len() < 2 {
        return None;
    }
    Some(chain.bounds[chain.bounds.len() - 2..].to_vec())
}

/// The trip of `[lo, hi)`.
fn trip(lo: &IExpr, hi: &IExpr) -> IExpr {
    if lo.as_const() == Some(0) {
        hi.clone()
    } else {
        IExpr::sub(hi.clone(), lo.clone())
    }
}

/// A variant of one of the general module's kernels.
#[derive(Clone, Debug, PartialEq)]
pub struct KernelVariant {
    /// The general kernel's index in the module's kernels (its launch step).
    pub of: usize,
    /// The rule's name.
    pub rule: String,
    /// Named `NAME__rule`; its buffer ids are the merged module's
    /// ([`Lowered::with_variants`]).
    pub kernel: Kernel,
    /// Alternatives (the first that holds picks it), each dim expressions
    /// that must all be non-negative.
    pub when: Vec<Vec<IExpr>>,
}

/// A dynamic build's loop module and the variants of its kernels.
#[derive(Clone, Debug, PartialEq)]
pub struct Lowered {
    /// The general module, plus the variants' scratch buffers (after its
    /// own; no general kernel uses them).
    pub module: LoopModule,
    pub variants: Vec<KernelVariant>,
}

impl Lowered {
    /// The module with every variant kernel after the general ones: what
    /// code generation emits (one PTX module holds them all).
    pub fn with_variants(&self) -> LoopModule {
        let mut all = self.module.clone();
        all.kernels.extend(self.variants.iter().map(|v| v.kernel.clone()));
        all
    }
}

/// [`pipeline::lower_gpu_symbolic`] and the variants [`RULES`] give: a rule
/// whose module does not pair kernel for kernel and buffer for buffer
/// with the general one (it split a reduction differently, say) gives
/// none; a kernel that comes out the same as the general one is dropped.
pub fn lower_gpu_dynamic(src: &Source, prog: &Program, opts: &GpuOptions) -> Result<Lowered, Failure> {
    let Stages { general: mut module, before, rules } = stages(src, prog, opts)?;
    let mut variants = Vec::new();
    for (rule, other) in RULES.iter().zip(rules) {
        if other.dims != module.dims || other.kernels.len() != module.kernels.len() {
            continue;
        }
        let mut rule_variants = Vec::new();
        let mut appended = Vec::new();
        for (i, (general, k)) in module.kernels.iter().zip(&other.kernels).enumerate() {
            // The same code under facts: no gain, and a narrower launch.
            if general.body == k.body && general.vars == k.vars {
                continue;
            }
            let Some(when) = before.kernels.iter().find(|b| b.name == general.name).and_then(rule.when) else { continue };
            // Alternatives no dims meet.
            // Exactly the facts the kernel was compiled under, in each.
            let when: Vec<Vec<IExpr>> = when
                .into_iter()
                .filter(|all| !all.iter().any(|e| e.as_const().is_some_and(|c| c < 0)))
                .map(|all| all.into_iter().chain(k.multiples.conditions()).collect())
                .collect();
            if when.is_empty() {
                continue;
            }
            let name = format!("{}__{}", general.name, rule.name);
            if module.kernels.iter().chain(variants.iter().map(|v: &KernelVariant| &v.kernel)).any(|k| k.name == name) {
                continue;
            }
            let Some(kernel) = rebuffer(k, &other, &module, &mut appended) else { continue };
            rule_variants.push(KernelVariant { of: i, rule: rule.name.to_string(), kernel: Kernel { name, ..kernel }, when });
        }
        // Scratch buffers get names unique in the merged module.
        for mut b in appended {
            b.name = module.unique_buffer_name(b.name);
            module.buffers.push(b);
        }
        variants.extend(rule_variants);
    }
    Ok(Lowered { module, variants })
}

/// The loop modules a dynamic build pairs: the general one, the general
/// one before `register-tiles` (what a rule's condition is about), and
/// one per [`RULES`] entry, in order.
#[derive(Debug)]
struct Stages {
    general: LoopModule,
    before: LoopModule,
    rules: Vec<LoopModule>,
}

/// [`Stages`], the middle end run once: a rule gives GPU passes alone
/// options (and dim facts, set on the kernels before the first GPU pass),
/// so every module is the GPU passes on a clone of the one module before
/// them ([`pipeline::finish_gpu`]).
fn stages(src: &Source, prog: &Program, opts: &GpuOptions) -> Result<Stages, Failure> {
    let middle = pipeline::lower_gpu_symbolic_before(src, prog, opts, GPU_PASSES.first().copied())?;
    let general = pipeline::finish_gpu(src, middle.clone(), opts, None)?;
    let before = pipeline::finish_gpu(src, middle.clone(), opts, Some("register-tiles"))?;
    let mut rules = Vec::with_capacity(RULES.len());
    for rule in RULES {
        let mut lm = middle.clone();
        if let Some(n) = rule.multiple {
            with_facts(&mut lm, n);
        }
        rules.push(pipeline::finish_gpu(src, lm, &rule_options(rule, opts), None)?);
    }
    Ok(Stages { general, before, rules })
}

/// `opts` with `rule`'s pass options.
fn rule_options(rule: &Rule, opts: &GpuOptions) -> GpuOptions {
    GpuOptions { options: rule.options.iter().map(|(p, o)| (p.to_string(), o.to_string())).collect(), ..opts.clone() }
}

/// Each kernel of `lm` compiled as if its buffers' row lengths were
/// multiples of `n` ([`stride_multiples`]).
fn with_facts(lm: &mut LoopModule, n: i64) {
    for i in 0..lm.kernels.len() {
        lm.kernels[i].multiples = stride_multiples(lm, &lm.kernels[i], n);
    }
}

/// `k`, a kernel of `from`, with its buffers renumbered as `into`'s: a
/// buffer the program has (not scratch) must be `into`'s of the same
/// name, type and shape; a scratch one is appended (after `into`'s and
/// those already in `appended`). `None` when a buffer does not match.
fn rebuffer(k: &Kernel, from: &LoopModule, into: &LoopModule, appended: &mut Vec<crate::ir::loops::Buffer>) -> Option<Kernel> {
    let mut map = std::collections::BTreeMap::new();
    let mut scratch = Vec::new();
    for b in k.buffers() {
        let fb = from.buffers.get(b)?;
        let to = if fb.role.is_scratch() {
            scratch.push(fb.clone());
            into.buffers.len() + appended.len() + scratch.len() - 1
        } else {
            let t = into.buffer_by_name(&fb.name)?;
            let tb = &into.buffers[t];
            if tb.dtype != fb.dtype || tb.shape != fb.shape || tb.role != fb.role {
                return None;
            }
            t
        };
        map.insert(b, to);
    }
    appended.extend(scratch);
    let mut out = k.clone();
    rename_buffers(&mut out.body, &|b| map.get(&b).copied().unwrap_or(b));
    Some(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ir::loops::{FloatWidth, FpContract};

    /// A rule's options reach GPU passes alone (`GpuOptions` gives no
    /// other pass options): what lets [`stages`] run the middle end once.
    #[test]
    fn rules_give_options_to_gpu_passes_alone() {
        for rule in RULES {
            for (pass, _) in rule.options {
                assert!(GPU_PASSES.contains(pass), "{}: `{pass}` is not a GPU pass", rule.name);
            }
        }
    }

    /// Each module [`stages`] derives from the one middle-end run equals
    /// the full pipeline's (`et` lowering, the middle end and the GPU
    /// passes run afresh for it, as before the middle end was shared).
    #[test]
    fn stages_match_the_full_pipeline() {
        let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
        let cases: &[(&str, &[&str], &[(&str, usize)])] = &[
            ("docs/examples/matmul.et", &[], &[("batch", 0)]),
            ("bench/ops/conv2d.et", &["stride=[1,1]"], &[("ipos", 2)]),
            ("docs/examples/reduce_sum.et", &[], &[("keep", 1)]),
            ("docs/examples/gather_nd.et", &[], &[("batch", 0), ("loc", 2), ("w", 1), ("item", 1)]),
        ];
        for (file, binds, ranks) in cases {
            let src = Source::load(&root.join(file)).unwrap();
            let binds: Vec<String> = binds.iter().map(|b| b.to_string()).collect();
            let ranks: Vec<(String, usize)> = ranks.iter().map(|(n, r)| (n.to_string(), *r)).collect();
            let (prog, _) = pipeline::symbolic_for(&src, &binds, &ranks).unwrap();
            let opts = GpuOptions::new(FloatWidth::F32, FpContract::Fast, 80);
            let got = stages(&src, &prog, &opts).unwrap();
            assert_eq!(got.general, pipeline::lower_gpu_symbolic(&src, &prog, &opts).unwrap(), "{file}: general");
            assert_eq!(got.before, pipeline::lower_gpu_symbolic_before(&src, &prog, &opts, Some("register-tiles")).unwrap(), "{file}: before");
            assert_eq!(got.rules.len(), RULES.len());
            for (rule, module) in RULES.iter().zip(&got.rules) {
                let ropts = rule_options(rule, &opts);
                let want = match rule.multiple {
                    None => pipeline::lower_gpu_symbolic(&src, &prog, &ropts).unwrap(),
                    // Facts can only be set between the two halves.
                    Some(n) => {
                        let mut lm = pipeline::lower_gpu_symbolic_before(&src, &prog, &ropts, GPU_PASSES.first().copied()).unwrap();
                        with_facts(&mut lm, n);
                        pipeline::finish_gpu(&src, lm, &ropts, None).unwrap()
                    }
                };
                assert_eq!(module, &want, "{file}: rule {}", rule.name);
            }
            // The rules change something: the comparison is not of one module.
            if file.contains("conv2d") {
                assert!(got.rules.iter().all(|m| m != &got.general), "{file}: a rule changed nothing");
            }
        }
    }
}
