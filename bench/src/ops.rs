//! The benchmarked operations: one `.et` program each (bench/ops), the
//! bindings that fix its sizes, and the work it does (flops for the
//! compute-bound ops, compulsory bytes for the memory-bound ones), so that
//! every backend and peer is judged by the same yardstick.

use eintup::ir::loops::FloatWidth;

/// What a rate is reported in.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Metric {
    Gflops,
    Gbytes,
}

impl Metric {
    pub fn unit(self) -> &'static str {
        match self {
            Metric::Gflops => "GFLOP/s",
            Metric::Gbytes => "GB/s",
        }
    }
}

/// Sizes of one run of an op.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Size {
    /// Small enough for a test run in seconds.
    Quick,
    /// The host sizes (a few tens of MB per tensor).
    Host,
    /// Sizes that fill an H100 (hundreds of MB per tensor).
    Gpu,
}

#[derive(Clone, Debug)]
pub struct Op {
    /// Unique name in the tables, e.g. `matmul_f32`.
    pub name: String,
    /// Which peer implementation computes the same thing (bench/peers.py).
    pub kind: &'static str,
    /// Program under bench/ops.
    pub file: &'static str,
    pub binds: Vec<String>,
    pub float: FloatWidth,
    /// Extra parameters the peers need (e.g. the conv stride).
    pub params: serde_json::Value,
    pub metric: Metric,
    /// Flops or bytes of one run.
    pub work: f64,
    /// The float policy the op's host code runs under, when it is not
    /// `--host-fp-contract`'s: the einsum chains are planned as
    /// contractions only under `fast` (their peers reorder too).
    pub fp_contract: Option<eintup_codegen::FpContract>,
}

fn bind(name: &str, dims: &[usize]) -> String {
    let d: Vec<String> = dims.iter().map(|d| d.to_string()).collect();
    format!("{name}=[{}]", d.join(","))
}

/// Bytes of one element.
fn width(f: FloatWidth) -> f64 {
    f.bytes() as f64
}

fn float_name(f: FloatWidth) -> &'static str {
    match f {
        FloatWidth::F32 => "f32",
        FloatWidth::F64 => "f64",
    }
}

/// Batched matmul `[b,m,k] x [b,k,n]`: 2bmkn flops.
fn matmul(f: FloatWidth, b: usize, m: usize, k: usize, n: usize) -> Op {
    Op {
        name: format!("matmul_{}", float_name(f)),
        kind: "matmul",
        file: "matmul.et",
        binds: vec![bind("batch", if b == 0 { &[][..] } else { std::slice::from_ref(&b) }), bind("row", &[m]), bind("k", &[k]), bind("col", &[n])],
        float: f,
        params: serde_json::json!({}),
        metric: Metric::Gflops,
        work: 2.0 * (b.max(1) * m * k * n) as f64,
        fp_contract: None,
    }
}

/// 2-D VALID conv, stride 1, NHWC: 2 * b*oh*ow * kh*kw*ci*co flops.
fn conv2d(f: FloatWidth, b: usize, hw: usize, kk: usize, ci: usize, co: usize) -> Op {
    let o = hw - kk + 1;
    Op {
        name: format!("conv2d_{}", float_name(f)),
        kind: "conv2d",
        file: "conv2d.et",
        binds: vec![bind("batch", &[b]), bind("ipos", &[hw, hw]), bind("fpos", &[kk, kk]), bind("stride", &[1, 1]), bind("ichan", &[ci]), bind("ochan", &[co])],
        float: f,
        params: serde_json::json!({ "stride": [1, 1] }),
        metric: Metric::Gflops,
        work: 2.0 * (b * o * o * kk * kk * ci * co) as f64,
        fp_contract: None,
    }
}

/// `src[loc0,loc1,item]` gathered at `w` index pairs: reads and writes
/// `w*item` elements and reads the indices.
fn gather_nd(f: FloatWidth, loc: usize, item: usize, w: usize) -> Op {
    Op {
        name: format!("gather_nd_{}", float_name(f)),
        kind: "gather_nd",
        file: "gather_nd.et",
        binds: vec![bind("batch", &[]), bind("loc", &[loc, loc]), bind("item", &[item]), bind("w", &[w])],
        float: f,
        params: serde_json::json!({}),
        metric: Metric::Gbytes,
        work: 2.0 * (w * item) as f64 * width(f) + (w * 2 * 4) as f64,
        fp_contract: None,
    }
}

/// `upd` rows of `item` values added into `dest` rows (many duplicates):
/// reads values and indices, writes the output once.
fn scatter_nd(f: FloatWidth, dest: usize, item: usize, upd: usize) -> Op {
    Op {
        name: format!("scatter_nd_{}", float_name(f)),
        kind: "scatter_nd",
        file: "scatter_nd.et",
        binds: vec![bind("upd", &[upd]), bind("dest", &[dest]), bind("item", &[item])],
        float: f,
        params: serde_json::json!({}),
        metric: Metric::Gbytes,
        work: ((upd + dest) * item) as f64 * width(f) + (upd * 4) as f64,
        fp_contract: None,
    }
}

/// NHWC space_to_depth with block 2: reads and writes every element.
fn space_to_depth(f: FloatWidth, b: usize, hw: usize, c: usize) -> Op {
    Op {
        name: format!("space_to_depth_{}", float_name(f)),
        kind: "space_to_depth",
        file: "space_to_depth.et",
        binds: vec![bind("batch", &[b]), bind("pos", &[hw, hw]), bind("chan", &[c]), bind("blk", &[2, 2])],
        float: f,
        params: serde_json::json!({ "block": 2 }),
        metric: Metric::Gbytes,
        work: 2.0 * (b * hw * hw * c) as f64 * width(f),
        fp_contract: None,
    }
}

/// Sum of the trailing axis of `[keep, drop]`: reads every element.
fn reduce_sum(f: FloatWidth, keep: usize, drop: usize) -> Op {
    Op {
        name: format!("reduce_sum_{}", float_name(f)),
        kind: "reduce_sum",
        file: "reduce_sum.et",
        binds: vec![bind("keep", &[keep]), bind("drop", &[drop])],
        float: f,
        params: serde_json::json!({}),
        metric: Metric::Gbytes,
        work: ((keep * drop) + keep) as f64 * width(f),
        fp_contract: None,
    }
}

/// The chain of `operands` n x n matrices, `einsum('ij,jk,..->i?')`, with
/// `--fp-contract fast` (so `plan-products` evaluates it as `operands - 1`
/// matrix products): 2n^3 flops each, what NumPy's `einsum(optimize=True)`
/// and TensorFlow's `einsum` do too.
fn chain(f: FloatWidth, operands: usize, n: usize) -> Op {
    let letters = ['i', 'j', 'k', 'l', 'm'];
    let inputs: Vec<String> = (0..operands).map(|x| format!("{}{}", letters[x], letters[x + 1])).collect();
    let spec = format!("{}->{}{}", inputs.join(","), letters[0], letters[operands]);
    Op {
        name: format!("einsum{operands}_{}", float_name(f)),
        kind: "einsum",
        file: if operands == 3 { "chain3.et" } else { "chain4.et" },
        binds: letters[..=operands].iter().map(|l| bind(&l.to_string(), &[n])).collect(),
        float: f,
        params: serde_json::json!({ "spec": spec, "operands": &["a", "b", "c", "d"][..operands] }),
        metric: Metric::Gflops,
        work: 2.0 * (operands - 1) as f64 * (n * n * n) as f64,
        fp_contract: Some(eintup_codegen::FpContract::Fast),
    }
}

/// The size of issue #31's chains (the process section's bar,
/// `crate::process`).
pub const BAR_N: usize = 1024;

/// The ops whose whole `eintup run` the process section times: the
/// chains at issue #31's size (`quick`: a small one).
pub fn process(quick: bool) -> Vec<Op> {
    let n = if quick { 32 } else { BAR_N };
    vec![chain(FloatWidth::F64, 3, n), chain(FloatWidth::F64, 4, n)]
}

/// The ops the tuner measures (`etbench --gpu-kit DIR --tune`): the
/// contractions, whose kernels `register-tiles` and `block-tiles` choose
/// for, at the GPU size and smaller ones, so that the table covers more
/// than one point (`quick`: one small enough for the emulator).
pub fn tuned(quick: bool) -> Vec<Op> {
    use FloatWidth::F32;
    match quick {
        false => vec![
            matmul(F32, 0, 1024, 1024, 1024),
            matmul(F32, 0, 2048, 2048, 2048),
            matmul(F32, 0, 4096, 4096, 4096),
            conv2d(F32, 32, 224, 3, 32, 32),
            conv2d(F32, 32, 224, 3, 64, 64),
            conv2d(F32, 32, 56, 3, 128, 128),
        ],
        true => vec![matmul(F32, 0, 128, 16, 256)],
    }
}

/// Every benchmarked op at `size`.
pub fn ops(size: Size) -> Vec<Op> {
    use FloatWidth::{F32, F64};
    match size {
        Size::Quick => vec![
            matmul(F32, 2, 16, 24, 8),
            matmul(F64, 0, 12, 8, 16),
            conv2d(F32, 2, 10, 3, 4, 5),
            gather_nd(F32, 9, 5, 40),
            scatter_nd(F32, 7, 3, 50),
            space_to_depth(F32, 2, 8, 3),
            reduce_sum(F32, 10, 33),
            chain(F64, 3, 12),
            chain(F64, 4, 10),
        ],
        Size::Host => vec![
            matmul(F32, 8, 256, 256, 256),
            matmul(F64, 8, 256, 256, 256),
            conv2d(F32, 8, 64, 3, 32, 32),
            gather_nd(F32, 512, 32, 1 << 18),
            scatter_nd(F32, 4096, 32, 1 << 18),
            space_to_depth(F32, 8, 256, 32),
            reduce_sum(F32, 4096, 4096),
            chain(F64, 3, 512),
            chain(F64, 4, 512),
        ],
        Size::Gpu => vec![
            matmul(F32, 0, 4096, 4096, 4096),
            conv2d(F32, 32, 224, 3, 64, 64),
            gather_nd(F32, 4096, 16, 1 << 23),
            scatter_nd(F32, 1 << 16, 16, 1 << 23),
            space_to_depth(F32, 32, 512, 64),
            reduce_sum(F32, 1 << 14, 1 << 13),
        ],
    }
}
