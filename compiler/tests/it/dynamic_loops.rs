//! Loop modules with dim symbols (docs/dynamic-shapes.md, step 2): one
//! module run by the loop interpreter at many configurations of its dims
//! (tile non-multiples, zero-sized and one-element dims) against results
//! computed here from the ops' definitions, before and after every loop
//! pass of the GPU and host pipelines (the tiled kernels' edge blocks and
//! short last steps included). A pass that cannot handle a
//! symbolic trip count must leave the kernel alone, never miscompile.

use eintup::driver::Source;
use eintup::interp::loops as li;
use eintup::ir::loops::{parse, LoopModule};
use eintup::passes::{manager, DriverOptions, Ir, Unit, GPU_PASSES, HOST_PASSES, MIDDLE_END};
use eintup::tensor::{Data, Tensor};

/// `c[n, i, j] = sum_k a[n, i, k] * b[n, k, j]` over four dim symbols, as
/// `lower-to-loops` writes a batched matmul (a reset kernel, then the sum).
const MATMUL: &str = include_str!("../Inputs/dynamic_matmul.etir");

/// A valid 1-D convolution `y[o] = sum_w x[o + w] * f[w]`: the output's
/// extent is an expression of two symbols, and the loads are guarded.
const CONV: &str = include_str!("../Inputs/dynamic_conv.etir");

fn ints(n: usize, salt: i32) -> Vec<i32> {
    (0..n as i32).map(|i| (i.wrapping_mul(7919).wrapping_add(salt * 31)) % 23 - 11).collect()
}

/// Runs `m` at `dims` on `inputs` (zeros elsewhere); the buffers after.
fn run_at(m: &LoopModule, dims: &[i64], inputs: &[Vec<i32>]) -> Vec<Vec<i32>> {
    let bound = m.bind_dims(dims).unwrap();
    let mut bufs: Vec<Tensor> = bound
        .buffers
        .iter()
        .enumerate()
        .map(|(i, b)| {
            let shape: Vec<usize> = b.dims().unwrap().iter().map(|&d| d as usize).collect();
            let n = shape.iter().product::<usize>();
            let data = inputs.get(i).cloned().unwrap_or_else(|| vec![0; n]);
            assert_eq!(data.len(), n, "buffer `{}`", b.name);
            Tensor::new(shape, Data::I32(data)).unwrap()
        })
        .collect();
    li::run_at(m, dims, 0, &mut bufs).unwrap_or_else(|e| panic!("{dims:?}: {e}"));
    bufs.into_iter().map(|t| if let Data::I32(v) = t.data { v } else { unreachable!() }).collect()
}

/// Every loop pass the targets run, in pipeline order (middle end, then
/// each target's tail), on a copy of `m`; the module after each pass.
fn after_each_pass(m: &LoopModule) -> Vec<(String, LoopModule)> {
    let mut out = Vec::new();
    let middle: Vec<&str> = MIDDLE_END.iter().copied().filter(|p| *p != "lower-to-loops").collect();
    for tail in [GPU_PASSES, HOST_PASSES] {
        let mut unit = Unit { ir: Ir::Loop(m.clone()), ..Unit::from_source(Source::from_string("dyn.etir", "")) };
        for name in middle.iter().chain(tail) {
            let pm = manager::PassManager::from_names(&[name], manager::Instrument::default()).unwrap();
            pm.run(&mut unit, &DriverOptions::default(), &mut std::io::sink()).unwrap_or_else(|e| panic!("pass {name}: {e:?}"));
            let Ir::Loop(lm) = &unit.ir else { panic!("{name} left the loop level") };
            out.push((name.to_string(), lm.clone()));
        }
    }
    out
}

#[test]
fn a_dynamic_matmul_runs_at_every_configuration_before_and_after_each_pass() {
    let m = parse::parse_verified(MATMUL).unwrap();
    let passes = after_each_pass(&m);
    // Tile non-multiples, zero-sized dims (each in turn) and ones; the
    // register tile's (4x4) guarded cells: rows and columns past a
    // multiple of 4 and of 64 (16 threads of 4 cells), and fewer than 4.
    for dims in [
        [2, 3, 4, 5],
        [1, 64, 8, 64],
        [3, 0, 4, 5],
        [2, 3, 0, 5],
        [1, 33, 17, 65],
        [2, 17, 33, 16],
        [1, 16, 16, 16],
        [0, 2, 2, 2],
        [1, 1, 1, 1],
        [1, 70, 19, 67],
        [2, 131, 5, 66],
        [1, 2, 3, 129],
        [1, 0, 3, 7],
        [1, 5, 3, 0],
    ] {
        let [nb, r, k, c] = dims.map(|d| d as usize);
        let a = ints(nb * r * k, 1);
        let b = ints(nb * k * c, 2);
        let mut want = vec![0i32; nb * r * c];
        for n in 0..nb {
            for i in 0..r {
                for j in 0..c {
                    want[(n * r + i) * c + j] = (0..k).map(|kk| a[(n * r + i) * k + kk].wrapping_mul(b[(n * k + kk) * c + j])).fold(0, i32::wrapping_add);
                }
            }
        }
        let inputs = [a, b];
        assert_eq!(run_at(&m, &dims, &inputs)[2], want, "as written, at {dims:?}");
        for (pass, lm) in &passes {
            assert_eq!(run_at(lm, &dims, &inputs)[2], want, "after {pass}, at {dims:?}");
        }
    }
}

#[test]
fn a_dynamic_convolution_with_a_derived_extent_runs_at_every_configuration() {
    let m = parse::parse_verified(CONV).unwrap();
    let passes = after_each_pass(&m);
    for dims in [[7, 3], [3, 3], [5, 1], [0, 0], [4, 0], [33, 5]] {
        let [nx, nw] = dims.map(|d| d as usize);
        let (x, f) = (ints(nx, 3), ints(nw, 4));
        let want: Vec<i32> = (0..nx + 1 - nw).map(|o| (0..nw).map(|w| x[o + w].wrapping_mul(f[w])).fold(0, i32::wrapping_add)).collect();
        let inputs = [x, f];
        assert_eq!(run_at(&m, &dims, &inputs)[2], want, "as written, at {dims:?}");
        for (pass, lm) in &passes {
            assert_eq!(run_at(lm, &dims, &inputs)[2], want, "after {pass}, at {dims:?}");
        }
    }
}

/// `s[a, b] = sum_d x[a, b, d]` over three dim symbols: two symbolic cell
/// loops and a symbolic reduction, which `split-reductions` splits.
const ROWSUM: &str = include_str!("../Inputs/dynamic_rowsum.etir");

/// The split of a symbolic reduction (docs/passes.md, `split-reductions`):
/// 8 lanes (256 x 256 assumed cells, 256 assumed terms: the lanes halve
/// while each would sum fewer than 64 terms, down to `split_min_lanes`),
/// partial sums in groups of 32 steps per lane and a last loop, so rows
/// shorter than one lane's step, than one group (8 lanes x 32 steps = 256
/// terms), one group, groups plus a remainder, and empty rows and cells.
#[test]
fn a_dynamic_row_sum_splits_and_runs_at_every_configuration() {
    let m = parse::parse_verified(ROWSUM).unwrap();
    let passes = after_each_pass(&m);
    let (split, lm) = passes.iter().find(|(p, _)| p == "split-reductions").unwrap();
    let text = eintup::ir::loops::print::module(lm);
    assert_eq!(lm.kernels.len(), 3, "{split}: {text}");
    assert!(text.contains("buffer s1_s_partial : i32[(%a.0 * %b.0), 8] transient"), "{text}");
    assert!(text.contains("for d_0_step in [0, ((((%d.0 + 7) - lane) // 8) // 32)) reduce"), "{text}");
    for dims in [
        [2, 3, 5],
        [1, 1, 31],
        [2, 2, 32],
        [1, 3, 33],
        [2, 1, 256],
        [1, 2, 257],
        [1, 1, 1024],
        [2, 1, 1057],
        [1, 2, 2100],
        [3, 2, 0],
        [0, 4, 40],
        [3, 0, 40],
        [1, 1, 1],
    ] {
        let [na, nb, nd] = dims.map(|d| d as usize);
        let x = ints(na * nb * nd, 5);
        let want: Vec<i32> = (0..na * nb).map(|c| x[c * nd..(c + 1) * nd].iter().copied().fold(0, i32::wrapping_add)).collect();
        let inputs = [x];
        assert_eq!(run_at(&m, &dims, &inputs)[1], want, "as written, at {dims:?}");
        for (pass, lm) in &passes {
            assert_eq!(run_at(lm, &dims, &inputs)[1], want, "after {pass}, at {dims:?}");
        }
    }
}

#[test]
fn binding_dims_refuses_what_the_shape_program_would() {
    let m = parse::parse_verified(CONV).unwrap();
    assert_eq!(m.bind_dims(&[3]).unwrap_err(), "1 dim values given for the module's 2 dim symbols");
    assert_eq!(m.bind_dims(&[-1, 2]).unwrap_err(), "dim `%x.0` is -1: dims are non-negative");
    // A filter longer than the input gives the output a negative extent.
    assert_eq!(m.bind_dims(&[2, 4]).unwrap_err(), "buffer `y`: extent `((%x.0 - %w.0) + 1)` is -1 at these dims");
    // Bound, the module is static: shapes are numbers, no symbol is left.
    let b = m.bind_dims(&[7, 3]).unwrap();
    assert!(!b.is_dynamic() && b.kernels.iter().all(|k| !k.is_symbolic()));
    assert_eq!(b.buffers[2].dims(), Some(vec![5]));
    // The interpreter runs a dynamic module only at given dims.
    let mut bufs = vec![];
    assert!(li::run(&m, 0, &mut bufs).unwrap_err().contains("2 dim symbols"));
}

#[test]
fn passes_on_symbolic_trips_say_their_rule() {
    let m = parse::parse_verified(MATMUL).unwrap();
    let mut unit = Unit { ir: Ir::Loop(m), ..Unit::from_source(Source::from_string("dyn.etir", "")) };
    let names = ["parallelize", "split-reductions", "shift-loops", "register-tiles", "block-tiles"];
    let pm = manager::PassManager::from_names(&names, manager::Instrument { stats: true, ..manager::Instrument::default() }).unwrap();
    let mut log = Vec::new();
    pm.run(&mut unit, &DriverOptions::default(), &mut log).unwrap();
    let log = String::from_utf8(log).unwrap();
    // A matmul's reduction has stride `%col.0` in `b`: not split, and the
    // rule for symbolic trips said.
    assert!(log.contains("split-reductions: 0 reductions split; symbolic trips count as 256 (the reduction's and each cell loop's)"), "{log}");
    // register-tiles tiles the symbolic trips, its rule for the threshold
    // said (docs/passes.md).
    assert!(
        log.contains("register-tiles: 1 kernels tiled (mm 4x4@1 heuristic); symbolic trips count as 256 along the tile, 1 elsewhere, their cells guarded"),
        "{log}"
    );
}

/// Step 4 of docs/dynamic-shapes.md: through the GPU pipeline the dynamic
/// matmul becomes what the static one does, one block-tiled kernel with
/// a plain (not atomic) sum, its reset fused, its edges guarded; the
/// differential tests above run it at tile non-multiples.
#[test]
fn the_dynamic_matmul_is_fused_and_block_tiled_with_guarded_edges() {
    let m = parse::parse_verified(MATMUL).unwrap();
    let passes = after_each_pass(&m);
    let gpu = &passes[MIDDLE_END.len() - 1 + GPU_PASSES.len() - 1].1;
    let text = eintup::ir::loops::print::module(gpu);
    assert_eq!(gpu.kernels.len(), 1, "{text}");
    assert!(!text.contains("atomic_accumulate"), "{text}");
    // Register tiles of 4x4 guarded cells (docs/passes.md), then blocks of
    // 16x16 threads, warps of 4x8 of them (`arrange-threads`).
    assert!(
        text.contains("for i in [0, ((%row.0 //^ 4) //^ 16)) parallel")
            && text.contains("for i_thread_warp in [0, 4) thread")
            && text.contains("for j_thread_lane in [0, 8) thread"),
        "{text}"
    );
    // Whole steps of 16, double-buffered in pairs (`pipeline-copies`,
    // docs/passes.md), then the last K % 16 terms apart; the store stops
    // at the edges.
    assert!(text.contains("for k_o_pair in [0, (((%k.0 // 16) + -1) // 2)) reduce") && text.contains("for k_i in [0, 16) reduce"), "{text}");
    assert!(
        text.contains("for k_o_last in [(%k.0 // 16), (%k.0 //^ 16)) reduce") && text.contains("for k_i_last in [0, (%k.0 - (k_o_last * 16))) reduce"),
        "{text}"
    );
    // (the register tile's cell, past the block's thread, too)
    let (i_thread, j_thread) = ("((i_thread_warp * 4) + i_thread_lane)", "((j_thread_warp * 8) + j_thread_lane)");
    assert!(text.contains(&format!("guard 0 <= ((i * 16) + {i_thread}) < (%row.0 //^ 4), 0 <= ((j * 16) + {j_thread}) < (%col.0 //^ 4), 0 <= 0 < %k.0, 0 <= (((i * 16) + {i_thread}) + ((%row.0 //^ 4) * i_t__out)) < %row.0, 0 <= (((j * 16) + {j_thread}) + ((%col.0 //^ 4) * j_t__out)) < %col.0 {{")), "{text}");
    // Each copy loads only the rows (columns) of cells in range; a thread
    // copies 4 consecutive elements of a row of `a` under one guard.
    let lines: Vec<&str> = text.lines().map(str::trim).collect();
    let copy = lines.iter().position(|l| l.ends_with("0 <= (((i * 16) + (a_e // 16)) + ((%row.0 //^ 4) * ((a_e // 4) % 4))) < %row.0 {"));
    assert_eq!(copy.map(|at| lines[at + 1]), Some("for a_l in [0, 4) unroll {"), "{text}");
}
