use super::*;
use crate::passes::test_kernels::{matmul, run_matmul};

fn tiled(lm: &LoopModule, (what, k, scratch): (String, Kernel, Vec<Buffer>)) -> (String, LoopModule) {
    let mut t = lm.clone();
    t.buffers.extend(scratch);
    t.kernels[0] = k;
    verify::verify(&t).unwrap_or_else(|e| panic!("{what}: {e:?}"));
    (what, t)
}

#[test]
fn operands_no_two_threads_share_are_not_staged() {
    // A row sum split into 32 lanes: the partial-sum kernel reads each
    // x[keep, lane + 32*r] in one thread only, so no block tiling
    // (found by random_programs: keep 4, drop 288 was block-tiled).
    let text = "x[keep,drop] = RANDOM(-9, 9, INT)\ns[keep] = x[keep,drop]\n\nRANK(keep) = 1\nRANK(drop) = 1\nDIMS(keep) IN [4,4]\nDIMS(drop) IN [288,288]\n";
    let src = crate::driver::Source::from_string("rs.et", text);
    let (m, _) = crate::pipeline::specialized_for(&src, &[], &[], 0, FloatWidth::F64).unwrap();
    let opts = crate::pipeline::GpuOptions::new(FloatWidth::F64, FpContract::Off, crate::ir::loops::target::DEFAULT_SM);
    let lm = crate::pipeline::lower_gpu_before(&src, &m, &opts, "block-tiles").unwrap();
    let partial = lm.kernels.iter().find(|k| k.role == KernelRole::Partial).expect("the sum is split");
    assert!(tile_kernel(&lm, partial, &GpuTarget::default()).is_none());
    // A matmul still stages both operands.
    let mm = matmul(512, 512, 32);
    let (what, _, scratch) = tile_kernel(&mm, &mm.kernels[0], &GpuTarget::default()).expect("tiled");
    assert_eq!(scratch.iter().filter(|b| b.role == Role::Shared).count(), 2, "{what}");
}

/// The bench convolution's statement with `dtype` operands, at 18 x 18
/// inputs, a 3 x 3 filter and 32 -> 16 channels, before `block-tiles`,
/// with the module it came from.
fn conv(dtype: &str, fp: FpContract) -> (crate::ir::et::Module, LoopModule) {
    let binds = ["batch=[1]", "ipos=[18,18]", "fpos=[3,3]", "stride=[1,1]", "ichan=[32]", "ochan=[16]"];
    crate::passes::test_kernels::conv_before(dtype, &binds, fp, "block-tiles")
}

/// Elements of `x` a block's copies load per run of their loops (a
/// `spread` loop's trip times its `unroll` lanes).
fn copied(t: &LoopModule, k: &Kernel, name: &str) -> i64 {
    let x = t.buffers.iter().position(|b| b.name == name).unwrap();
    let mut n = 0;
    k.walk(&mut |node| {
        if let Node::For(f) = node {
            if f.kind == LoopKind::Spread {
                let (lanes, leaf) = perfect_nest(&f.body, LoopKind::Unroll);
                if matches!(leaf, [Node::Compute(c)] if matches!(c.values[0].op, VOp::Load { buf, .. } if buf == x)) {
                    n += trip(f) * lanes.iter().map(|l| trip(l)).product::<i64>();
                }
            }
        }
    });
    n
}

#[test]
fn a_convolutions_halo_is_staged_once_for_all_taps_where_sums_may_reorder() {
    // f32 under `fast`: the window's 9 taps run inside each channel
    // step and read one staged halo; under `off` each tap stages its
    // own rows (the original order of every cell's terms).
    let (_, fast) = conv("FLOAT", FpContract::Fast);
    let k = fast.kernels.iter().find(|k| k.role == KernelRole::Main).unwrap();
    let gpu = GpuTarget::default();
    // The candidates: each block with a halo, then without; under
    // `off` those without only.
    let cands = candidates(&fast, k, &gpu, FpContract::Fast);
    let choice = cands[0].clone();
    assert!(choice.halo, "{choice:?}");
    let no_halo = BlockChoice { halo: false, ..choice.clone() };
    assert_eq!(cands[1], no_halo);
    assert!(cands.chunks(2).all(|p| p.len() == 2 && p[0].halo && p[1] == BlockChoice { halo: false, ..p[0].clone() }), "{cands:?}");
    assert_eq!(candidates(&fast, k, &gpu, FpContract::Off), cands.iter().filter(|c| !c.halo).cloned().collect::<Vec<_>>());
    // A choice is built as it says: a halo choice is refused where the
    // sum may not reorder.
    assert!(apply_with(&fast, k, &choice, FpContract::Off).is_none());
    let (what, halo) = tiled(&fast, apply_with(&fast, k, &choice, FpContract::Fast).unwrap());
    assert!(what.contains("halo"), "{what}");
    let (plain_what, plain) = tiled(&fast, apply_with(&fast, k, &no_halo, FpContract::Fast).unwrap());
    assert!(!plain_what.contains("halo"), "{plain_what}");
    // Per channel step: the halo is the block's output positions
    // widened by the window (rows + 2 by columns + 2 for 3 x 3), loaded
    // once; without it each tap loads the positions themselves.
    let ki = fast.kernels.iter().position(|x| x.role == KernelRole::Main).unwrap();
    let (once, per_tap) = (copied(&halo, &halo.kernels[ki], "x"), copied(&plain, &plain.kernels[ki], "x"));
    // At these sizes the block is 16 output columns of one row by 16
    // channels (no register tiles): a tap copies 16 columns per
    // channel, the halo 3 rows of 18.
    assert_eq!(choice.threads.len(), 2, "{choice:?}");
    let cols = per_tap / choice.step;
    assert_eq!(cols, 16, "{plain_what}");
    assert_eq!(once, 3 * (cols + 2) * choice.step, "{what}");
    assert!(9 * per_tap > 2 * once, "{once} {per_tap}");
    // Through the pass: its float policy decides.
    let run_forced = |fp, forced: Option<String>| {
        let mut unit = Unit { ir: Ir::Loop(fast.clone()), ..Unit::from_source(crate::driver::Source::from_string("c.et", "")) };
        let opts = BlockTilesOptions { gpu: GpuTarget::default(), choosing: Choosing { forced, table_sm: None }, fp_contract: fp };
        run(&mut unit, &opts).unwrap().unwrap()
    };
    let run_pass = |fp| run_forced(fp, None);
    let (h, plain_desc) = (choice.describe(), no_halo.describe());
    assert_eq!(h, format!("{plain_desc}h"));
    let fast_stats = run_pass(FpContract::Fast);
    assert!(fast_stats.contains(&format!("{h}: ")) && fast_stats.contains("halo") && fast_stats.contains("heuristic"), "{fast_stats}");
    assert!(!run_pass(FpContract::Off).contains("halo"));
    // Forced: with the mark a halo, without it none; a halo forced
    // under `off` is no candidate: the heuristic's tiling.
    let forced_halo = run_forced(FpContract::Fast, Some(h.clone()));
    assert!(forced_halo.contains(&format!("{h}: ")) && forced_halo.contains("halo") && forced_halo.contains("forced"), "{forced_halo}");
    let forced_plain = run_forced(FpContract::Fast, Some(plain_desc.clone()));
    assert!(forced_plain.contains(&format!("{plain_desc}: ")) && !forced_plain.contains("halo") && forced_plain.contains("forced"), "{forced_plain}");
    let off = run_forced(FpContract::Off, Some(h.clone()));
    assert!(off.contains(&format!("{plain_desc}: ")) && !off.contains("halo") && off.contains("heuristic"), "{off}");
    // A table's entry is matched by its description: with the mark the
    // halo candidate, without it the tiling without one.
    let shape = tuning::KernelShape::of(&fast, k).unwrap();
    let table = |choice: &str| tuning::Table {
        format: tuning::FORMAT,
        sm: 90,
        device: String::new(),
        measured: String::new(),
        entries: vec![tuning::Entry {
            pass: "block-tiles".into(),
            shape: shape.clone(),
            choice: choice.into(),
            op: "conv".into(),
            ms: 1.0,
            others: Default::default(),
        }],
    };
    let described: Vec<String> = offered(&fast, k, &gpu, FpContract::Fast).iter().map(BlockChoice::describe).collect();
    for (recorded, want) in [(&h, &choice), (&plain_desc, &no_halo)] {
        let t = tuning::Table::parse(&serde_json::to_string(&table(recorded)).unwrap()).unwrap();
        let (i, why) = tuning::pick_in("block-tiles", &fast, k, &described, None, Some(&t)).unwrap();
        assert_eq!((&described[i], &cands[i]), (recorded, want));
        assert!(matches!(why, Source::Table { .. }), "{why:?}");
    }

    // INT sums are exact: a halo under any policy, and the tiled
    // kernel's cells are the untiled kernel's.
    let (m, int) = conv("INT", FpContract::Off);
    let ki = int.kernels.iter().position(|k| k.role == KernelRole::Main).unwrap();
    let choice = candidates(&int, &int.kernels[ki], &gpu, FpContract::Off)[0].clone();
    assert!(choice.halo, "{choice:?}");
    let (what, t) = tiled(&int, apply(&int, &int.kernels[ki], &choice).unwrap());
    assert!(what.contains("halo"), "{what}");
    let ro = crate::interp::RunOptions { seed: 0, float: FloatWidth::F32, ..Default::default() };
    let inputs = crate::interp::initial_arrays(&m, &ro).unwrap();
    let outputs = |lm: &LoopModule| {
        let mut bufs = inputs.clone();
        for b in &lm.buffers[bufs.len()..] {
            bufs.push(crate::tensor::Tensor::zeros(b.dtype, &b.dims().unwrap().iter().map(|&d| d as usize).collect::<Vec<_>>()).unwrap());
        }
        crate::interp::loops::run(lm, 0, &mut bufs).unwrap();
        bufs.truncate(m.arrays.len());
        bufs.into_iter().map(|b| b.data).collect::<Vec<_>>()
    };
    assert_eq!(outputs(&t), outputs(&int), "{what}");
}

#[test]
fn copy_store_conflicts_count_a_warps_banks() {
    // e_v = 0, e_l = 1; one warp of 32 threads, one round.
    let warps = |unrolled: Vec<(VarId, i64)>, elem| CopyWarps { e_v: 0, unrolled, iterations: 32, block: 256, elem, nvars: 2 };
    let (e, l) = (IExpr::v(0), IExpr::v(1));
    // A row: 32 consecutive words, one wavefront.
    assert_eq!(warps(vec![], 4).bank_conflicts(&e), 0);
    // A column of a 64-word row: every thread in bank 0, 32 wavefronts.
    assert_eq!(warps(vec![], 4).bank_conflicts(&IExpr::mul(e.clone(), IExpr::c(64))), 31);
    // A padded column (65 words): every bank once.
    assert_eq!(warps(vec![], 4).bank_conflicts(&IExpr::mul(e.clone(), IExpr::c(65))), 0);
    // 4 lanes side by side and aligned: one vector store of 128 words,
    // 4 wavefronts, none extra.
    let side_by_side = IExpr::add(IExpr::mul(e.clone(), IExpr::c(4)), l.clone());
    assert_eq!(warps(vec![(1, 4)], 4).bank_conflicts(&side_by_side), 0);
    // 4 lanes 64 words apart, threads side by side: 4 scalar stores,
    // each a row.
    let rows = IExpr::add(IExpr::mul(l.clone(), IExpr::c(64)), e.clone());
    assert_eq!(warps(vec![(1, 4)], 4).bank_conflicts(&rows), 0);
    // Threads 4 words apart, lanes 64 apart: 4 stores whose 32 words
    // share 8 banks, 4 wavefronts each (3 extra).
    let spread = IExpr::add(IExpr::mul(l, IExpr::c(64)), IExpr::mul(e.clone(), IExpr::c(4)));
    assert_eq!(warps(vec![(1, 4)], 4).bank_conflicts(&spread), 4 * 3);
    // f64 side by side: 64 words, 2 wavefronts, none extra.
    assert_eq!(warps(vec![], 8).bank_conflicts(&e), 0);
}

#[test]
fn candidates_list_blocks_and_steps_and_any_one_applies() {
    let (m, n, k) = (32, 64, 32);
    let lm = matmul(m, n, k);
    let gpu = GpuTarget::default();
    let (row, col) = (0, 1);
    let cs = candidates(&lm, &lm.kernels[0], &gpu, FpContract::Fast);
    let c = |ti, tj, step| BlockChoice { threads: vec![(row, ti), (col, tj)], step, halo: false };
    assert_eq!(cs, vec![c(16, 16, 16), c(16, 16, 8), c(16, 16, 4), c(16, 16, 2), c(16, 8, 16), c(8, 16, 16)]);
    let (what, _) = tiled(&lm, tile_kernel(&lm, &lm.kernels[0], &gpu).unwrap());
    assert!(what.starts_with("16x16 threads, k step 16"), "{what}");
    // Every candidate and choices the pass never makes (4 threads, one
    // thread along a dimension, steps of 1 and of the whole reduction)
    // compute the same cells as the untiled kernel.
    let want = run_matmul(&lm, m, n, k);
    let forced = [c(2, 2, 1), c(1, 32, 32)];
    for choice in cs.iter().chain(&forced) {
        let (what, t) = tiled(&lm, apply(&lm, &lm.kernels[0], choice).unwrap_or_else(|| panic!("{choice:?}")));
        assert_eq!(run_matmul(&t, m, n, k), want, "{choice:?}: {what}");
    }
    // Refused: threads that do not divide the trip, a step that does
    // not divide the reduction, dimensions out of chain order, a block
    // above 1024 threads, a block along `col` alone (every thread
    // reads its own `b` and the same `a`: nothing to share), and a
    // halo (a matmul has no window).
    for bad in [
        c(3, 16, 16),
        c(16, 16, 5),
        BlockChoice { threads: vec![(col, 16), (row, 16)], step: 16, halo: false },
        c(32, 64, 16),
        BlockChoice { threads: vec![(col, 64)], step: 4, halo: false },
        BlockChoice { halo: true, ..c(16, 16, 16) },
    ] {
        assert!(apply(&lm, &lm.kernels[0], &bad).is_none(), "{bad:?}");
    }
}
