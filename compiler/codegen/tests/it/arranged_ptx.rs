//! `arrange-threads` (docs/passes.md) on the emulator: a block-tiled
//! matmul whose warps cover 4 x 8 or 8 x 4 threads of the block, or whose
//! blocks run in groups of rows, gives the loop interpreter's result on
//! the module as written, bit for bit (INT), and the emulator finds no
//! race and no barrier left unreached. The arrangements only move cells
//! between threads and blocks.

use eintup::driver::Source;
use eintup::interp::loops as li;
use eintup::ir::loops::{parse, Init, LoopModule, Role};
use eintup::passes::{manager, DriverOptions, Ir, Unit, GPU_PASSES, MIDDLE_END};
use eintup::tensor::{Data, Tensor};
use eintup_codegen::bundle::bind_dynamic;
use eintup_codegen::FpContract;
use eintup_runtime::Device;
use std::collections::BTreeMap;

const SM: u32 = 80;

/// An INT matmul `m x k` by `k x n`.
fn matmul(m: i64, n: i64, k: i64) -> LoopModule {
    let text = format!(
        "buffer a : i32[{m}, {k}] input\nbuffer b : i32[{k}, {n}] input\nbuffer c : i32[{m}, {n}] output\n\n\
         kernel @mm {{\n  for row in [0, {m}) parallel {{\n    for col in [0, {n}) parallel {{\n      for k in [0, {k}) reduce {{\n        \
         %0 = load a[((row * {k}) + k)] : i32\n        %1 = load b[((k * {n}) + col)] : i32\n        %2 = mul %0, %1 : i32\n        \
         accumulate c[((row * {n}) + col)] += %2\n      }}\n    }}\n  }}\n}}\n"
    );
    parse::parse_verified(&text).unwrap()
}

/// The middle end and the GPU passes with `arrange-threads{options}`, and
/// what `--stats` says it did.
fn gpu_pipeline(m: &LoopModule, options: &str) -> (LoopModule, String) {
    let arranged = format!("arrange-threads{{{options}}}");
    let names: Vec<&str> = MIDDLE_END
        .iter()
        .chain(GPU_PASSES)
        .copied()
        .filter(|p| *p != "lower-to-loops")
        .map(|p| if p == "arrange-threads" { arranged.as_str() } else { p })
        .collect();
    let mut unit = Unit { ir: Ir::Loop(m.clone()), ..Unit::from_source(Source::from_string("mm.etir", "")) };
    let pm = manager::PassManager::from_names(&names, manager::Instrument { stats: true, ..Default::default() }).unwrap();
    let mut stats = Vec::new();
    pm.run(&mut unit, &DriverOptions::default(), &mut stats).unwrap();
    let Ir::Loop(lm) = unit.ir else { panic!("the passes left the loop level") };
    let stats = String::from_utf8(stats).unwrap();
    let line = stats.lines().find(|l| l.contains("stats arrange-threads")).unwrap_or_default().to_string();
    (lm, line)
}

#[test]
fn arranged_warps_and_blocks_give_the_interpreters_matmul() {
    // 256 x 256 in 4x4 register tiles: 4 x 4 blocks of 16 x 16 threads;
    // k 24: steps of 8, a pair and an odd step.
    let (m, n, k) = (256, 256, 24);
    let module = matmul(m, n, k);
    let ints = |len: i64, salt: i32| (0..len as i32).map(|i| (i.wrapping_mul(7919).wrapping_add(salt * 31)) % 23 - 11).collect::<Vec<i32>>();
    let mut bufs: Vec<Tensor> = Vec::new();
    let mut inputs = BTreeMap::new();
    for (i, b) in module.buffers.iter().enumerate() {
        let shape: Vec<usize> = b.dims().unwrap().iter().map(|&d| d as usize).collect();
        let len = shape.iter().product::<usize>() as i64;
        let t = Tensor::new(shape, Data::I32(if b.init == Init::Input { ints(len, i as i32) } else { vec![0; len as usize] })).unwrap();
        if b.init == Init::Input {
            inputs.insert(b.name.clone(), t.clone());
        }
        bufs.push(t);
    }
    li::run(&module, 0, &mut bufs).unwrap();
    let want = &bufs[2];
    for (options, did) in [
        ("warp=auto group=auto", "mm 4x8: warps of 4x8 threads in 16x16, heuristic)"),
        // A candidate by its description (the tuner's way; docs/tuning.md).
        ("choice=8x4", "mm 8x4: warps of 8x4 threads in 16x16, forced)"),
        ("warp=8x4 group=2", "warps of 8x4 threads in 16x16, groups of 2 of 4x4 blocks"),
        ("warp=none group=4", "groups of 4 of 4x4 blocks"),
        ("warp=2x16 group=1", "0 kernels arranged"),
    ] {
        let (lm, stats) = gpu_pipeline(&module, options);
        assert!(stats.contains(did), "{options}: {stats}");
        let (ptx, info) = eintup_codegen::emit_ptx(&lm, 0, SM, FpContract::Off).unwrap();
        let bundle = bind_dynamic(&lm, &ptx, &info.ptx_version, SM, &[]).unwrap();
        let got = Device::emulator().run(&bundle, &inputs).unwrap_or_else(|e| panic!("{options}: {e}"));
        let out = lm.buffers.iter().find(|b| b.role == Role::Output).unwrap();
        assert_eq!(got[&out.name].data, want.data, "{options}");
    }
}
