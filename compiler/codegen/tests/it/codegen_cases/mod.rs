//! Loop modules built by hand, shared by the host (codegen_host.rs) and
//! PTX (codegen_ptx.rs) code generation tests. Each function documents the
//! computation it encodes; expected values are computed by the host tests
//! in plain Rust.
#![allow(dead_code)]

use eintup::ir::loops::*;
use eintup::ir::text::Spelled;

pub fn buf(name: &str, dtype: DType, shape: &[i64], role: Role) -> Buffer {
    let init = if role == Role::Input { Init::Input } else { Init::Zero };
    Buffer { name: name.into(), dtype, shape: eintup::ir::loops::static_shape(shape), role, init }
}

pub fn vars(names: &[&str]) -> Vec<Var> {
    names.iter().map(|n| Var { name: n.to_string() }).collect()
}

pub fn pfor(var: VarId, lo: IExpr, hi: IExpr, body: Vec<Node>) -> Node {
    Node::For(For { var, lo, hi, kind: LoopKind::Parallel, body })
}

pub fn rfor(var: VarId, lo: IExpr, hi: IExpr, body: Vec<Node>) -> Node {
    Node::For(For { var, lo, hi, kind: LoopKind::Reduce, body })
}

pub fn c(v: i64) -> IExpr {
    IExpr::c(v)
}

pub fn v(v: VarId) -> IExpr {
    IExpr::v(v)
}

pub fn bin(op: IBin, a: IExpr, b: IExpr) -> IExpr {
    IExpr::bin(op, a, b)
}

pub fn val(op: VOp, dtype: DType) -> Value {
    Value { op, dtype }
}

pub fn compute(values: Vec<Value>, kind: WriteKind, buf: BufId, offset: IExpr, value: ValId) -> Node {
    Node::Compute(Compute { values, write: Write { kind, buf, offset, value } })
}

pub fn kernel(name: &str, var_names: &[&str], body: Vec<Node>) -> Kernel {
    Kernel::new(name, vars(var_names), body)
}

pub const MM: (i64, i64, i64) = (3, 4, 5);

/// `c[i,j] = sum_k a[i,k] * b[k,j]` (f64, 3x4 times 4x5), then a second
/// kernel `d[i,j] = 2 * c[i,j] - 1` that must see the first one's writes.
pub fn matmul() -> LoopModule {
    let (m, k, n) = MM;
    use DType::F64;
    let mm = kernel(
        "matmul",
        &["i", "j", "k"],
        vec![pfor(
            0,
            c(0),
            c(m),
            vec![pfor(
                1,
                c(0),
                c(n),
                vec![rfor(
                    2,
                    c(0),
                    c(k),
                    vec![compute(
                        vec![
                            val(VOp::Load { buf: 0, offset: IExpr::add(IExpr::mul(v(0), c(k)), v(2)) }, F64),
                            val(VOp::Load { buf: 1, offset: IExpr::add(IExpr::mul(v(2), c(n)), v(1)) }, F64),
                            val(VOp::Bin(BinOp::Mul, 0, 1), F64),
                        ],
                        WriteKind::Accumulate,
                        2,
                        IExpr::add(IExpr::mul(v(0), c(n)), v(1)),
                        2,
                    )],
                )],
            )],
        )],
    );
    let post = kernel(
        "scale",
        &["e"],
        vec![pfor(
            0,
            c(0),
            c(m * n),
            vec![compute(
                vec![
                    val(VOp::Load { buf: 2, offset: v(0) }, F64),
                    val(VOp::Const(2.0), F64),
                    val(VOp::Bin(BinOp::Mul, 0, 1), F64),
                    val(VOp::Const(1.0), F64),
                    val(VOp::Bin(BinOp::Sub, 2, 3), F64),
                ],
                WriteKind::Store,
                3,
                v(0),
                4,
            )],
        )],
    );
    LoopModule {
        dims: vec![],
        facts: Facts::NONE,
        buffers: vec![
            buf("a", F64, &[m, k], Role::Input),
            buf("b", F64, &[k, n], Role::Input),
            buf("c", F64, &[m, n], Role::Temp),
            buf("d", F64, &[m, n], Role::Output),
        ],
        kernels: vec![mm, post],
    }
}

/// Conv parameters: input length, filter width, stride, padding.
pub const CONV: (i64, i64, i64, i64) = (9, 3, 2, 1);

/// Output length of `conv1d`: (L + 2P - W) // S + 1.
pub fn conv_out_len() -> i64 {
    let (l, w, s, p) = CONV;
    (l + 2 * p - w) / s + 1
}

/// `y[o] = sum_w x[o*S + w - P] * f[w]` over in-bounds taps (f32). The tap
/// loop runs over `[max(0, P - o*S), min(W, L + P - o*S))` and a guard
/// re-checks `0 <= o*S + w - P < L` (what `lower-to-loops` emits before
/// bounds are tightened).
pub fn conv1d() -> LoopModule {
    let (l, w, s, p) = CONV;
    use DType::F32;
    let pos = IExpr::sub(IExpr::add(IExpr::mul(v(0), c(s)), v(1)), c(p));
    let lo = bin(IBin::Max, c(0), IExpr::sub(c(p), IExpr::mul(v(0), c(s))));
    let hi = bin(IBin::Min, c(w), IExpr::sub(c(l + p), IExpr::mul(v(0), c(s))));
    let body = Node::Guard(Guard {
        conds: vec![Cond::InRange { e: pos.clone(), lo: c(0), hi: c(l) }],
        body: vec![compute(
            vec![val(VOp::Load { buf: 0, offset: pos }, F32), val(VOp::Load { buf: 1, offset: v(1) }, F32), val(VOp::Bin(BinOp::Mul, 0, 1), F32)],
            WriteKind::Accumulate,
            2,
            v(0),
            2,
        )],
    });
    LoopModule {
        dims: vec![],
        facts: Facts::NONE,
        buffers: vec![buf("x", F32, &[l], Role::Input), buf("f", F32, &[w], Role::Input), buf("y", F32, &[conv_out_len()], Role::Output)],
        kernels: vec![kernel("conv", &["o", "w"], vec![pfor(0, c(0), c(conv_out_len()), vec![rfor(1, lo, hi, vec![body])])])],
    }
}

pub const GATHER_N: i64 = 6;
pub const GATHER_SRC: i64 = 4;
/// The `Lookup` table of `gather`.
pub const TABLE: [i64; 3] = [7, -2, 40];

/// Kernel `gather`: `out[i] = x[idx[i]]` when `0 <= idx[i] < 4` (else out
/// stays 0), with the index loaded by `load_index` between two parallel
/// loops' worth of structure: `for i { t = idx[i]; guard t in [0,4) {..} }`.
/// Kernel `lookup`: `tab[i] = TABLE[i] + i` for i in 0..3 (a `Lookup`).
pub fn gather() -> LoopModule {
    use DType::*;
    let g = kernel(
        "gather",
        &["i", "t"],
        vec![pfor(
            0,
            c(0),
            c(GATHER_N),
            vec![
                Node::LoadIndex { var: 1, buf: 1, offset: v(0) },
                Node::Guard(Guard {
                    conds: vec![Cond::InRange { e: v(1), lo: c(0), hi: c(GATHER_SRC) }],
                    body: vec![compute(vec![val(VOp::Load { buf: 0, offset: v(1) }, F64)], WriteKind::Store, 2, v(0), 0)],
                }),
            ],
        )],
    );
    let t = kernel(
        "lookup",
        &["i"],
        vec![pfor(
            0,
            c(0),
            c(TABLE.len() as i64),
            vec![compute(
                vec![val(VOp::Lookup { table: TABLE.to_vec(), index: v(0) }, I32), val(VOp::Index(v(0)), I32), val(VOp::Bin(BinOp::Add, 0, 1), I32)],
                WriteKind::Store,
                3,
                v(0),
                2,
            )],
        )],
    );
    LoopModule {
        dims: vec![],
        facts: Facts::NONE,
        buffers: vec![
            buf("x", F64, &[GATHER_SRC], Role::Input),
            buf("idx", I32, &[GATHER_N], Role::Input),
            buf("out", F64, &[GATHER_N], Role::Output),
            buf("tab", I32, &[TABLE.len() as i64], Role::Output),
        ],
        kernels: vec![g, t],
    }
}

pub const INT_OPS: [BinOp; 6] = [BinOp::Add, BinOp::Sub, BinOp::Mul, BinOp::FloorDiv, BinOp::CeilDiv, BinOp::Mod];
pub const INT_N: i64 = 10;

/// For each op of `INT_OPS` (index `o`), a kernel writing
/// `r[o*N + i] = a[i] OP b[i]` on i32. Buffers: a, b, r.
pub fn int_ops() -> LoopModule {
    binary_ops(DType::I32, &INT_OPS, INT_N)
}

pub const FLOAT_OPS: [BinOp; 4] = [BinOp::Div, BinOp::FloorDiv, BinOp::CeilDiv, BinOp::Mod];
pub const FLOAT_N: i64 = 8;

/// `float_ops`: as `int_ops` on f64 with `FLOAT_OPS`.
pub fn float_ops() -> LoopModule {
    binary_ops(DType::F64, &FLOAT_OPS, FLOAT_N)
}

fn binary_ops(dt: DType, ops: &[BinOp], n: i64) -> LoopModule {
    let kernels = ops
        .iter()
        .enumerate()
        .map(|(o, op)| {
            kernel(
                &format!("op_{}", op.spelling()),
                &["i"],
                vec![pfor(
                    0,
                    c(0),
                    c(n),
                    vec![compute(
                        vec![val(VOp::Load { buf: 0, offset: v(0) }, dt), val(VOp::Load { buf: 1, offset: v(0) }, dt), val(VOp::Bin(*op, 0, 1), dt)],
                        WriteKind::Store,
                        2,
                        IExpr::add(c(o as i64 * n), v(0)),
                        2,
                    )],
                )],
            )
        })
        .collect();
    LoopModule {
        dims: vec![],
        facts: Facts::NONE,
        buffers: vec![buf("a", dt, &[n], Role::Input), buf("b", dt, &[n], Role::Input), buf("r", dt, &[ops.len() as i64 * n], Role::Output)],
        kernels,
    }
}

/// Index ops of `index_ops`, in output order.
pub const INDEX_OPS: [IBin; 5] = [IBin::FloorDiv, IBin::CeilDiv, IBin::Mod, IBin::Min, IBin::Max];
pub const INDEX_N: i64 = 12;

/// Index arithmetic with a run-time divisor: `t = d[i]` (load_index);
/// `r[o*N + i] = (i - 6) OP t` for each op of `INDEX_OPS`, plus
/// `r[5*N + i] = t // -3` and `r[6*N + i] = (i - 6) % 0` (constant
/// divisors, the second folded to the totality value 0).
pub fn index_ops() -> LoopModule {
    use DType::I32;
    let x = IExpr::sub(v(0), c(6));
    let mut exprs: Vec<IExpr> = INDEX_OPS.iter().map(|op| bin(*op, x.clone(), v(1))).collect();
    exprs.push(bin(IBin::FloorDiv, v(1), c(-3)));
    exprs.push(bin(IBin::Mod, x.clone(), c(0)));
    let kernels = exprs
        .into_iter()
        .enumerate()
        .map(|(o, e)| {
            kernel(
                &format!("index{o}"),
                &["i", "t"],
                vec![pfor(
                    0,
                    c(0),
                    c(INDEX_N),
                    vec![
                        Node::LoadIndex { var: 1, buf: 0, offset: v(0) },
                        compute(vec![val(VOp::Index(e), I32)], WriteKind::Store, 1, IExpr::add(c(o as i64 * INDEX_N), v(0)), 0),
                    ],
                )],
            )
        })
        .collect();
    LoopModule { dims: vec![], facts: Facts::NONE, buffers: vec![buf("d", I32, &[INDEX_N], Role::Input), buf("r", I32, &[7 * INDEX_N], Role::Output)], kernels }
}

pub const CAST_N: i64 = 8;

/// Casts of each `x[i]` (f64): `ri[i] = x as i32`, `rf[i] = x as f32`, and
/// `rg[i] = (x as i32) as f64`.
pub fn casts() -> LoopModule {
    use DType::*;
    let load = || val(VOp::Load { buf: 0, offset: v(0) }, F64);
    let k = |name: &str, values: Vec<Value>, out: BufId| {
        let last = values.len() - 1;
        kernel(name, &["i"], vec![pfor(0, c(0), c(CAST_N), vec![compute(values, WriteKind::Store, out, v(0), last)])])
    };
    LoopModule {
        dims: vec![],
        facts: Facts::NONE,
        buffers: vec![
            buf("x", F64, &[CAST_N], Role::Input),
            buf("ri", I32, &[CAST_N], Role::Output),
            buf("rf", F32, &[CAST_N], Role::Output),
            buf("rg", F64, &[CAST_N], Role::Output),
        ],
        kernels: vec![
            k("to_int", vec![load(), val(VOp::Cast(0), I32)], 1),
            k("to_f32", vec![load(), val(VOp::Cast(0), F32)], 2),
            k("round_trip", vec![load(), val(VOp::Cast(0), I32), val(VOp::Cast(1), F64)], 3),
        ],
    }
}

pub const RANDOM_SHAPE: [i64; 2] = [4, 5];

/// RANDOM draws filling 4x5 arrays at their own flat positions: `ri` INT
/// in [-3, 10), `rf` f64 in [-5, 5), `rs` f32 in [0, 1), and `re` INT with
/// the empty range [4, 4) (always 4).
pub fn random() -> LoopModule {
    use DType::*;
    let (r, cl) = (RANDOM_SHAPE[0], RANDOM_SHAPE[1]);
    let k = |name: &str, dt: DType, lo: f64, hi: f64, out: BufId, stream: &str| {
        let off = IExpr::add(IExpr::mul(v(0), c(cl)), v(1));
        kernel(
            name,
            &["r", "c"],
            vec![pfor(
                0,
                c(0),
                c(r),
                vec![pfor(
                    1,
                    c(0),
                    c(cl),
                    vec![compute(
                        vec![
                            val(VOp::Const(lo), dt),
                            val(VOp::Const(hi), dt),
                            val(VOp::Random { stream: stream.into(), counter: off.clone(), lo: 0, hi: 1 }, dt),
                        ],
                        WriteKind::Store,
                        out,
                        off,
                        2,
                    )],
                )],
            )],
        )
    };
    LoopModule {
        dims: vec![],
        facts: Facts::NONE,
        buffers: vec![
            buf("ri", I32, &RANDOM_SHAPE, Role::Output),
            buf("rf", F64, &RANDOM_SHAPE, Role::Output),
            buf("rs", F32, &RANDOM_SHAPE, Role::Output),
            buf("re", I32, &RANDOM_SHAPE, Role::Output),
        ],
        kernels: vec![
            k("rand_int", I32, -3.0, 10.0, 0, "ri"),
            k("rand_f64", F64, -5.0, 5.0, 1, "rf"),
            k("rand_f32", F32, 0.0, 1.0, 2, "rs"),
            k("rand_empty", I32, 4.0, 4.0, 3, "re"),
        ],
    }
}

pub const SUM_N: i64 = 5;

/// Rank-0 and zero-sized buffers: `s[] = sum_i x[i]` into a rank-0 f64
/// buffer; `z` (shape [0, 3]) is written by a loop that never runs, and
/// `e` (shape [0]) is read by one.
pub fn scalars_and_empty() -> LoopModule {
    use DType::*;
    let sum = kernel(
        "sum",
        &["i"],
        vec![rfor(0, c(0), c(SUM_N), vec![compute(vec![val(VOp::Load { buf: 0, offset: v(0) }, F64)], WriteKind::Accumulate, 1, c(0), 0)])],
    );
    let fill = kernel(
        "fill_empty",
        &["i", "j"],
        vec![pfor(
            0,
            c(0),
            c(0),
            vec![pfor(
                1,
                c(0),
                c(3),
                vec![compute(vec![val(VOp::Load { buf: 3, offset: v(0) }, I32)], WriteKind::Store, 2, IExpr::add(IExpr::mul(v(0), c(3)), v(1)), 0)],
            )],
        )],
    );
    LoopModule {
        dims: vec![],
        facts: Facts::NONE,
        buffers: vec![
            buf("x", F64, &[SUM_N], Role::Input),
            buf("s", F64, &[], Role::Output),
            buf("z", I32, &[0, 3], Role::Output),
            buf("e", I32, &[0], Role::Input),
        ],
        kernels: vec![sum, fill],
    }
}

pub const HIST_N: i64 = 40;
pub const HIST_BINS: i64 = 4;

/// Histograms with `atomic_accumulate` under a parallel loop:
/// `h[i % 4] += 1` (i32), `w[i % 4] += x[i]` (f64), `ws[i % 4] += xs[i]` (f32).
pub fn atomics() -> LoopModule {
    use DType::*;
    let k = |name: &str, dt: DType, src: Option<BufId>, out: BufId| {
        let value = match src {
            Some(b) => val(VOp::Load { buf: b, offset: v(0) }, dt),
            None => val(VOp::Const(1.0), dt),
        };
        kernel(
            name,
            &["i"],
            vec![pfor(0, c(0), c(HIST_N), vec![compute(vec![value], WriteKind::AtomicAccumulate, out, bin(IBin::Mod, v(0), c(HIST_BINS)), 0)])],
        )
    };
    LoopModule {
        dims: vec![],
        facts: Facts::NONE,
        buffers: vec![
            buf("x", F64, &[HIST_N], Role::Input),
            buf("xs", F32, &[HIST_N], Role::Input),
            buf("h", I32, &[HIST_BINS], Role::Output),
            buf("w", F64, &[HIST_BINS], Role::Output),
            buf("ws", F32, &[HIST_BINS], Role::Output),
        ],
        kernels: vec![k("count", I32, None, 2), k("weigh", F64, Some(0), 3), k("weigh32", F32, Some(1), 4)],
    }
}

/// Every module above, named.
pub fn all() -> Vec<(&'static str, LoopModule)> {
    vec![
        ("matmul", matmul()),
        ("conv1d", conv1d()),
        ("gather", gather()),
        ("int_ops", int_ops()),
        ("float_ops", float_ops()),
        ("index_ops", index_ops()),
        ("casts", casts()),
        ("random", random()),
        ("scalars_and_empty", scalars_and_empty()),
        ("atomics", atomics()),
    ]
}
