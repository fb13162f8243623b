//! The tuner's variants of an op (docs/tuning.md): every combination of
//! the `register-tiles` candidates and, for each, the `block-tiles`
//! candidates of the kernel it leaves; and, on the heuristic's combination
//! only, the `arrange-threads` candidates that differ from the heuristic's
//! arrangement in one part. The tuner ([`crate::tune`]) builds a bundle of
//! each, the cost model ([`crate::model`]) predicts each.

use crate::kit::{Specialized, KIT_SM};
use eintup::ir::loops::LoopModule;
use eintup::passes::arrange_threads::{self, Arrangement};
use eintup::passes::register_tiles::Tiling;
use eintup::passes::tuning::KernelShape;
use eintup::passes::{block_tiles, register_tiles};
use eintup::pipeline::{lower_gpu_before, GpuOptions};

/// Variants per op and size at most: the first ones (the heuristic's
/// best-first order) when a kernel has more.
pub const MAX_VARIANTS: usize = 24;

/// One variant: the choice forced on each tuned pass and the shape of the
/// kernel that pass chose for.
pub struct Variant {
    pub choices: Vec<(String, String)>,
    pub shapes: Vec<(String, KernelShape)>,
}

/// The variants of `op`'s one contraction kernel, the heuristic's choice
/// first (each pass lists its candidates best first).
pub fn variants(s: &Specialized) -> Result<Vec<Variant>, String> {
    let fp_contract = eintup_codegen::FpContract::default();
    let base = GpuOptions { tuning: false, ..GpuOptions::new(s.float, fp_contract, KIT_SM) };
    let before = |choices: Vec<(String, String)>, stop: &str| -> Result<LoopModule, String> {
        lower_gpu_before(&s.src, &s.module, &GpuOptions { choices, ..base.clone() }, stop).map_err(|e| e.to_string())
    };
    let gpu = base.gpu;
    let m0 = before(Vec::new(), "register-tiles")?;
    let Some(k0) = m0.kernels.iter().find(|k| !register_tiles::candidates(k, Tiling::Gpu(&gpu), None).is_empty()) else {
        return Err("no kernel has a register tile to tune".into());
    };
    let shape0 = KernelShape::of(&m0, k0).ok_or("the tiled kernel has no shape")?;
    let mut out = Vec::new();
    for rt in register_tiles::candidates(k0, Tiling::Gpu(&gpu), None) {
        let rt_desc = rt.describe(k0);
        let forced = vec![("register-tiles".to_string(), rt_desc.clone())];
        let m1 = before(forced.clone(), "block-tiles")?;
        let k1 = m1.kernels.iter().find(|k| k.name == k0.name).ok_or("the tiled kernel is gone")?;
        let shape1 = KernelShape::of(&m1, k1).ok_or("the register-tiled kernel has no shape")?;
        let blocks = block_tiles::candidates(&m1, k1, &gpu, fp_contract);
        let bts: Vec<String> = if blocks.is_empty() { vec![eintup::passes::tuning::NONE.to_string()] } else { blocks.iter().map(|b| b.describe()).collect() };
        for bt in bts {
            let mut choices = forced.clone();
            choices.push(("block-tiles".to_string(), bt));
            let shapes = vec![("register-tiles".to_string(), shape0.clone()), ("block-tiles".to_string(), shape1.clone())];
            out.push(Variant { choices, shapes });
        }
    }
    if let Some(first) = out.first_mut() {
        let m2 = before(first.choices.clone(), "arrange-threads")?;
        let k2 = m2.kernels.iter().find(|k| k.name == k0.name).ok_or("the tiled kernel is gone")?;
        let arrangements = arranged_alternatives(&arrange_threads::candidates(k2, &gpu));
        // A kernel with one arrangement (none: no thread nest) has nothing to time.
        if let (Some((rule, others)), Some(shape2)) = (arrangements.split_first(), KernelShape::of(&m2, k2)) {
            first.choices.push(("arrange-threads".to_string(), rule.describe()));
            first.shapes.push(("arrange-threads".to_string(), shape2));
            let (choices, shapes) = (first.choices.clone(), first.shapes.clone());
            let alternatives = others.iter().map(|a| {
                let mut choices = choices.clone();
                if let Some(c) = choices.last_mut() {
                    c.1 = a.describe();
                }
                Variant { choices, shapes: shapes.clone() }
            });
            // Right after the heuristic's: they survive the cut below.
            out.splice(1..1, alternatives.collect::<Vec<_>>());
        }
    }
    // A cut between a block with a halo and the same block without one
    // (`block_tiles::candidates` lists them in that order) takes both: a
    // halo is timed against its own block.
    let cut = MAX_VARIANTS.min(out.len());
    let splits_pair = cut > 0 && cut < out.len() && halo_twins(&out[cut - 1], &out[cut]);
    out.truncate(if splits_pair { cut - 1 } else { cut });
    Ok(out)
}

/// Are `a` and `b` the same variant but for `a`'s block having a halo
/// (its `block-tiles` choice `b`'s with the `h` mark)?
fn halo_twins(a: &Variant, b: &Variant) -> bool {
    a.choices.len() == b.choices.len()
        && a.choices
            .iter()
            .zip(&b.choices)
            .all(|(x, y)| x.0 == y.0 && (x.1 == y.1 || (x.0 == "block-tiles" && block_tiles::BlockChoice::halo_twin(&x.1) == Some(y.1.as_str()))))
        && a.choices != b.choices
}

/// The `arrange-threads` candidates the tuner times, from a kernel's
/// candidates (the rule's first): the rule's and those differing from it
/// in one part only, the warp shape or the group. The two act on
/// different things (shared-memory wavefronts in a block, L2 panels
/// across blocks), so one axis at a time finds each part's best with at
/// most 2 + 2 variants instead of the product's 8; empty for fewer than
/// two candidates.
pub fn arranged_alternatives(all: &[Arrangement]) -> Vec<Arrangement> {
    let Some(rule) = all.first().copied() else { return Vec::new() };
    let out: Vec<Arrangement> = all.iter().copied().filter(|a| a.warp == rule.warp || a.group == rule.group).collect();
    if out.len() < 2 {
        return Vec::new();
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::BTreeSet;
    use std::path::Path;

    #[test]
    fn the_heuristics_tiles_also_get_the_arrangements_and_the_count_stays_capped() {
        // matmul 1024^3 (a tuned op): 8x8@0 and 16x16k16 first, a 8 x 8
        // grid of 128 x 128-cell blocks.
        let op = &crate::ops::tuned(false)[0];
        let spec = Specialized::of(&Path::new(env!("CARGO_MANIFEST_DIR")).join("ops"), op).unwrap();
        let vs = variants(&spec).unwrap();
        assert!(vs.len() <= MAX_VARIANTS);
        let arranged: Vec<&Variant> = vs.iter().filter(|v| v.choices.iter().any(|(p, _)| p == "arrange-threads")).collect();
        // The heuristic's variant first, with the rule's arrangement, then
        // the alternatives on the same tiles and the same shapes.
        assert!(std::ptr::eq(arranged[0], &vs[0]));
        assert!(arranged.len() >= 2, "{:?}", arranged.iter().map(|v| &v.choices).collect::<Vec<_>>());
        for (i, v) in arranged.iter().enumerate() {
            assert!(std::ptr::eq(*v, &vs[i]), "the alternatives follow the heuristic's variant");
            assert_eq!(v.choices[..2], vs[0].choices[..2]);
            assert_eq!(v.shapes.iter().map(|s| &s.0).collect::<Vec<_>>(), ["register-tiles", "block-tiles", "arrange-threads"]);
            assert_eq!(v.shapes, vs[0].shapes);
        }
        let descs: BTreeSet<&str> = arranged.iter().map(|v| v.choices[2].1.as_str()).collect();
        assert_eq!(descs.len(), arranged.len(), "distinct arrangements");
        // The rule's 4 x 8 warps, then the transpose and row-major warps; an
        // 8 x 8 grid runs in one wave, no group.
        assert_eq!(arranged.iter().map(|v| v.choices[2].1.as_str()).collect::<Vec<_>>(), ["4x8", "8x4", "none"]);
        // Every register-tiles x block-tiles combination still listed once.
        let combos: BTreeSet<_> = vs.iter().map(|v| v.choices[..2].to_vec()).collect();
        assert_eq!(combos.len(), vs.len() - arranged.len() + 1);
    }

    #[test]
    fn a_convolutions_blocks_are_timed_with_and_without_a_halo() {
        // The tuned convolutions (fp-contract fast): each register tile's
        // block candidates come in pairs, with a halo (`h`) then without,
        // where the halo's shared buffers fit; the cut never splits a pair.
        // At 224 x 224 with 32 and 64 channels and 56 x 56 with 128: 8 + 4,
        // 11 + 8 and 14 + 11 variants (25 cut to 23, not 24, which would
        // time the last halo without its twin).
        let ops_dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("ops");
        for op in crate::ops::tuned(false).iter().filter(|o| o.name.starts_with("conv2d")) {
            let spec = Specialized::of(&ops_dir, op).unwrap();
            let vs = variants(&spec).unwrap();
            assert!(vs.len() <= MAX_VARIANTS);
            let tiles: Vec<(&str, &str)> = vs.iter().map(|v| (v.choices[0].1.as_str(), v.choices[1].1.as_str())).collect();
            let halos: Vec<&(&str, &str)> = tiles.iter().filter(|t| t.1.ends_with('h')).collect();
            eprintln!("{} {}: {} variants, {} with a halo", op.name, op.binds.join(" "), vs.len(), halos.len());
            assert!(!halos.is_empty(), "{}: {tiles:?}", op.name);
            for &&(rt, bt) in &halos {
                let plain = &bt[..bt.len() - 1];
                let at = tiles.iter().position(|t| *t == (rt, bt)).unwrap();
                assert_eq!(tiles.get(at + 1), Some(&(rt, plain)), "{}: {tiles:?}", op.name);
            }
            // The sm_90 table's recorded tiles are timed again (beside the
            // same block with a halo where one fits, as the loop above
            // checks for every halo: 8x8 tiles at k step 16 leave no room
            // for one at 56 x 56 with 128 channels).
            let key = format!("{}@{}", op.name, op.binds.iter().map(|b| b.replace(['[', ']'], "")).collect::<Vec<_>>().join(","));
            let table = eintup::passes::tuning::Table::builtin(90).unwrap();
            let recorded = |pass: &str| table.entries.iter().find(|e| e.pass == pass && e.op == key).map(|e| e.choice.as_str());
            let (rt, bt) = (recorded("register-tiles").unwrap(), recorded("block-tiles").unwrap());
            if bt != eintup::passes::tuning::NONE {
                assert!(tiles.contains(&(rt, bt)), "{key}: {tiles:?}");
            }
        }
    }

    #[test]
    fn arrangements_vary_one_part_at_a_time() {
        let a = |warp: Option<(i64, i64)>, group: Option<i64>| Arrangement { warp, group };
        let all: Vec<Arrangement> = [Some((4, 8)), Some((8, 4)), None].into_iter().flat_map(|w| [Some(16), None, Some(32)].map(|g| a(w, g))).collect();
        let d: Vec<String> = arranged_alternatives(&all).iter().map(Arrangement::describe).collect();
        assert_eq!(d, ["4x8g16", "4x8", "4x8g32", "8x4g16", "g16"]);
        assert!(arranged_alternatives(&all[..1]).is_empty());
        assert!(arranged_alternatives(&[]).is_empty());
    }
}
