//! Block-tiled kernels (`block-tiles`: `thread` and `spread` loops, `sync`,
//! shared and local buffers) on the host, where a block's threads run one
//! after another: the GPU lowering of a matmul and a convolution, compiled
//! for the host, gives the et interpreter's results bit for bit (each cell
//! sums in the original order; no contraction on the host). On sm_70
//! `pipeline-copies` double-buffers the tiles with synchronous copies,
//! which the host runs too; on sm_80 its `copy_async` writes are GPU-only,
//! and host code generation refuses them with an error.

use eintup::driver::Source;
use eintup::interp::{self, RunOptions};
use eintup::ir::loops::{FloatWidth, FpContract, LoopKind, Node, WriteKind};
use eintup::tensor::Tensor;
use eintup_codegen::run_host;

/// Below sm_80 there is no `cp.async`: `pipeline-copies` keeps copies
/// synchronous, which host code can run.
const NO_CP_ASYNC_SM: u32 = 70;

fn check(file: &str, binds: &[&str], float: FloatWidth) {
    let src = Source::load(&eintup_testkit::example(file)).unwrap();
    check_source(&src, binds, float, FpContract::Off);
}

/// [`check`] of a program's text, its GPU lowering under the float policy
/// `fp` (which lets `block-tiles` reorder a float sum; an INT sum it may
/// reorder under either, exactly).
fn check_source(src: &Source, binds: &[&str], float: FloatWidth, fp: FpContract) {
    let file = &src.name;
    let binds: Vec<String> = binds.iter().map(|b| b.to_string()).collect();
    let src = src.clone();
    let (m, _) = eintup::pipeline::specialized_for(&src, &binds, &[], 0, float).unwrap();
    let lm = eintup::pipeline::lower_gpu(&src, &m, &eintup::pipeline::GpuOptions::new(float, fp, NO_CP_ASYNC_SM)).unwrap();
    let mut threads = false;
    for k in &lm.kernels {
        k.walk(&mut |n| threads |= matches!(n, Node::For(f) if f.kind == LoopKind::Thread));
    }
    assert!(threads, "{file} {binds:?}: block-tiles did not fire");
    // With cp.async (sm_80), the host refuses the GPU-only writes.
    let sm80 = eintup::pipeline::lower_gpu(&src, &m, &eintup::pipeline::GpuOptions::new(float, fp, eintup::ir::loops::target::DEFAULT_SM)).unwrap();
    let mut copies = false;
    for k in &sm80.kernels {
        k.walk(&mut |n| copies |= matches!(n, Node::Compute(c) if c.write.kind == WriteKind::CopyAsync));
    }
    if copies {
        let mut bufs = interp::initial_arrays(&m, &RunOptions { seed: 0, float, ..RunOptions::default() }).unwrap();
        for b in &sm80.buffers[bufs.len()..] {
            let shape: Vec<usize> = b.dims().expect("static shape").iter().map(|&d| d as usize).collect();
            bufs.push(Tensor::zeros(b.dtype, &shape).unwrap());
        }
        let e = run_host(&sm80, 0, &mut bufs).expect_err("host code of copy_async");
        assert!(e.to_string().contains("GPU-only"), "{e}");
    }
    let ro = RunOptions { seed: 0, float, inputs: Default::default(), ..RunOptions::default() };
    let want = interp::run(&m, &ro).unwrap();
    let mut bufs = interp::initial_arrays(&m, &ro).unwrap();
    for b in &lm.buffers[bufs.len()..] {
        let shape: Vec<usize> = b.dims().expect("static shape").iter().map(|&d| d as usize).collect();
        bufs.push(Tensor::zeros(b.dtype, &shape).unwrap());
    }
    run_host(&lm, 0, &mut bufs).unwrap();
    for (k, a) in m.arrays.iter().enumerate() {
        assert_eq!(bufs[k].data, want[k].data, "{file} {binds:?} {float:?}: `{}` differs", a.name);
    }
}

#[test]
fn matmul_and_conv_blocks_run_in_order_on_the_host() {
    for float in [FloatWidth::F64, FloatWidth::F32] {
        check("matmul.et", &["batch=[]", "row=[128]", "col=[128]", "k=[40]"], float);
        check("matmul.et", &["batch=[]", "row=[64]", "col=[128]", "k=[3]"], float);
        check("conv_valid.et", &["batch=[1]", "ipos=[18,18]", "fpos=[3,3]", "stride=[1,1]", "ichan=[2]", "ochan=[64]"], float);
    }
}

/// An INT convolution, whose sums `block-tiles` may reorder under any
/// float policy: the window's taps run inside each channel step and read
/// one staged halo of the input (docs/passes.md, "A halo"); exact sums give
/// the interpreter's results bit for bit, strided and not.
#[test]
fn int_conv_halo_runs_on_the_host() {
    let text = "x[batch,ipos,ichan] = RANDOM(-9, 9, INT)\nw[fpos,ichan,ochan] = RANDOM(-9, 9, INT)\n\
                y[batch,opos,ochan] = w[ipos-DIMS(stride)*opos,ichan,ochan] * x[batch,ipos,ichan]\n\ny\n\n\
                DIMS(opos) = (DIMS(ipos) - DIMS(fpos) + 1) //^ DIMS(stride)\n";
    let src = Source::from_string("conv_int.et", text);
    fn spreads(nodes: &[Node], reduces: usize, out: &mut Vec<usize>) {
        for n in nodes {
            match n {
                Node::For(f) if f.kind == LoopKind::Spread => out.push(reduces),
                Node::For(f) => spreads(&f.body, reduces + usize::from(f.kind == LoopKind::Reduce), out),
                Node::Guard(g) => spreads(&g.body, reduces, out),
                _ => {}
            }
        }
    }
    // The copies run in the channel steps alone (at most their `reduce`
    // loop around them; `pipeline-copies` moves the first step's before
    // it), not in each filter tap's (inside the window's two): a halo, at
    // stride 1 and 2. 8 x 8 output positions by 4 channels (one block of
    // 8 x 8 x 4 threads) over two steps of 16 input channels, so that the
    // second step's halo is staged while the first's is summed.
    let strided = [("ipos=[10,10]", "stride=[1,1]"), ("ipos=[17,17]", "stride=[2,2]")];
    for (ipos, stride) in strided {
        let binds = ["batch=[1]", ipos, "fpos=[3,3]", stride, "ichan=[32]", "ochan=[4]"];
        let owned: Vec<String> = binds.iter().map(|b| b.to_string()).collect();
        let (m, _) = eintup::pipeline::specialized_for(&src, &owned, &[], 0, FloatWidth::F32).unwrap();
        let lm = eintup::pipeline::lower_gpu(&src, &m, &eintup::pipeline::GpuOptions::new(FloatWidth::F32, FpContract::Off, NO_CP_ASYNC_SM)).unwrap();
        let mut depths = Vec::new();
        for k in &lm.kernels {
            spreads(&k.body, 0, &mut depths);
        }
        assert!(!depths.is_empty() && depths.iter().all(|&d| d < 2), "{binds:?}: {depths:?}");
        check_source(&src, &binds, FloatWidth::F32, FpContract::Off);
    }
}
