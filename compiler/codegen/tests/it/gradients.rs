//! Gradients (docs/gradients.md): the adjoint of every example with FLOAT
//! inputs, and of FLOAT variants of the index-shuffling examples, with
//! respect to every FLOAT input, against central finite differences of the
//! forward program on the interpreter (f64), and the adjoint on the cpu
//! and emu backends against the interpreter.
//!
//! The finite differences go along random directions `v` (one per run):
//! `(f(x + h v) - f(x - h v)) / 2h` with `f = sum(grad_y * y)` must equal
//! `sum(grad_x * v)`. Central differences are exact for polynomials of
//! degree 2, so the error is `h^2/6` times a third derivative plus the
//! rounding of `f` over `h`; with `h = 1e-5` on inputs of size ~10 both
//! stay far below the tolerance `1e-6 * (1 + sum |grad_x| |v|)`.

use eintup::autodiff::{differentiate, Form, Request};
use eintup::driver::Source;
use eintup::interp::{self, RunOptions};
use eintup::ir::et::{ElemType, Module, OpKind};
use eintup::tensor::{Data, Tensor};
use eintup_codegen::backend::{execute, Backend};
use eintup_codegen::FpContract;
use eintup_testkit::{assert_tensors_close, example, examples, Tol};
use std::collections::BTreeMap;

const H: f64 = 1e-5;

/// The FLOAT inputs of a program.
fn float_inputs(m: &Module) -> Vec<String> {
    m.arrays.iter().filter(|a| a.is_input && a.dtype == ElemType::Float).map(|a| a.name.clone()).collect()
}

/// A deterministic direction in [-1, 1) per element.
fn direction(seed: u64, n: usize) -> Vec<f64> {
    let mut s = seed.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
    (0..n)
        .map(|_| {
            s = s.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
            ((s >> 11) as f64 / (1u64 << 53) as f64) * 2.0 - 1.0
        })
        .collect()
}

fn named(m: &Module, arrays: Vec<Tensor>) -> BTreeMap<String, Tensor> {
    m.arrays.iter().map(|a| a.name.clone()).zip(arrays).collect()
}

/// `sum(grad_y * y)` of the forward program at the given inputs.
fn objective(src: &Source, binds: &[String], inputs: &BTreeMap<String, Tensor>, cotangents: &[(String, Tensor)]) -> f64 {
    let (m, _) = eintup::pipeline::specialized_module(src, binds, 0).unwrap_or_else(|f| panic!("{}: {f}", src.name));
    let opts = RunOptions { inputs: inputs.clone(), ..RunOptions::default() };
    let out = named(&m, interp::run(&m, &opts).unwrap_or_else(|e| panic!("{}: {e:?}", src.name)));
    cotangents.iter().map(|(y, g)| out[y].to_f64_vec().iter().zip(g.to_f64_vec()).map(|(a, b)| a * b).sum::<f64>()).sum()
}

/// Checks the adjoint of `src` w.r.t. `wrt` on configuration `seed`;
/// returns the adjoint's contributions.
fn check_gradient(src: &Source, wrt: &[String], seed: u64, backends: bool) -> eintup::autodiff::Adjoint {
    check_gradient_at(src, wrt, &[], seed, backends).expect("the default configuration is valid")
}

/// [`check_gradient`] with `binds`; `None` when they contradict the
/// program's constraints.
fn check_gradient_at(src: &Source, wrt: &[String], binds: &[String], seed: u64, backends: bool) -> Option<eintup::autodiff::Adjoint> {
    let prog = eintup::pipeline::resolved(src).unwrap();
    let adjoint = differentiate(&prog, &Request { wrt: wrt.to_vec(), of: vec![], constant: vec![] }).unwrap_or_else(|d| panic!("{}: {d:?}", src.name));
    let adj_src = Source::from_string(&format!("{} (adjoint)", src.name), &adjoint.source);
    let what = format!("{} {binds:?} seed {seed}", src.name);
    if eintup::pipeline::specialized_module(src, binds, seed).is_err() {
        return None;
    }
    let (am, cfg) = eintup::pipeline::specialized_module(&adj_src, binds, seed).unwrap_or_else(|f| panic!("{what}: {f}\n{}", adjoint.source));
    let opts = RunOptions { seed, ..RunOptions::default() };
    let got = interp::run(&am, &opts).unwrap_or_else(|e| panic!("{what}: {e:?}"));
    if backends {
        for backend in [Backend::Cpu, Backend::Emu] {
            let other = execute(&adj_src, &am, backend, &opts, FpContract::Fast).unwrap_or_else(|e| panic!("{what} {backend:?}: {e}"));
            for (k, a) in am.arrays.iter().enumerate() {
                let scale = got[k].to_f64_vec().iter().fold(1.0f64, |m, x| m.max(x.abs()));
                assert_tensors_close(&format!("{what}: `{}` ({backend:?} vs interp)", a.name), &other[k], &got[k], Tol { rel: 0.0, abs: 1e-12 * scale });
            }
        }
    }
    let arrays = named(&am, got);
    // The forward program at the adjoint's configuration and inputs.
    let fwd = eintup::pipeline::resolved(src).unwrap().module;
    let forward_binds: Vec<String> =
        cfg.dims.iter().filter(|(n, _)| fwd.eintup_by_name(n).is_some()).map(|(n, d)| format!("{n}={d:?}").replace(' ', "")).collect();
    let inputs: BTreeMap<String, Tensor> = fwd.arrays.iter().filter(|a| a.is_input).map(|a| (a.name.clone(), arrays[&a.name].clone())).collect();
    let outputs: Vec<String> =
        fwd.result_arrays().into_iter().filter(|&a| fwd.arrays[a].dtype == ElemType::Float).map(|a| fwd.arrays[a].name.clone()).collect();
    let cotangents: Vec<(String, Tensor)> = outputs.iter().map(|y| (y.clone(), arrays[&format!("grad_{y}")].clone())).collect();
    let mut plus = inputs.clone();
    let mut minus = inputs.clone();
    let mut predicted = 0.0;
    let mut scale = 1.0;
    for (i, x) in wrt.iter().enumerate() {
        let t = &inputs[x];
        let v = direction(seed * 31 + i as u64, t.len());
        let g = arrays[&format!("grad_{x}")].to_f64_vec();
        assert_eq!(g.len(), v.len(), "{what}: grad_{x} has x's shape");
        predicted += g.iter().zip(&v).map(|(a, b)| a * b).sum::<f64>();
        scale += g.iter().zip(&v).map(|(a, b)| (a * b).abs()).sum::<f64>();
        let shift = |sign: f64| {
            let data: Vec<f64> = t.to_f64_vec().iter().zip(&v).map(|(a, b)| a + sign * H * b).collect();
            Tensor::new(t.shape.clone(), Data::F64(data)).unwrap()
        };
        plus.insert(x.clone(), shift(1.0));
        minus.insert(x.clone(), shift(-1.0));
    }
    // With no element to move (a zero-sized input), there is no
    // difference to take (the objective may be a NaN of empty maxima).
    if wrt.iter().all(|x| inputs[x].is_empty()) {
        return Some(adjoint);
    }
    let fd = (objective(src, &forward_binds, &plus, &cotangents) - objective(src, &forward_binds, &minus, &cotangents)) / (2.0 * H);
    assert!((fd - predicted).abs() <= 1e-6 * scale, "{what}: finite differences give {fd}, the adjoint {predicted}\n{}", adjoint.source);
    Some(adjoint)
}

/// The adjoint's bundle at configuration `seed` (`binds` fixed), in
/// `float`, with or without `--deterministic`.
fn adjoint_bundle(
    adjoint: &eintup::autodiff::Adjoint,
    binds: &[String],
    seed: u64,
    float: eintup::ir::loops::FloatWidth,
    deterministic: bool,
) -> (Module, eintup_runtime::Bundle) {
    let src = Source::from_string("adjoint.et", &adjoint.source);
    let (m, cfg) = eintup::pipeline::specialized_module(&src, binds, seed).unwrap();
    let fp_contract = FpContract::Fast;
    let opts = eintup::pipeline::GpuOptions { deterministic, ..eintup::pipeline::GpuOptions::new(float, fp_contract, eintup::ir::loops::target::DEFAULT_SM) };
    let lm = eintup::pipeline::lower_gpu(&src, &m, &opts).unwrap();
    let bundle = eintup_codegen::bundle::build(&src, &m, &lm, &cfg, &eintup_codegen::bundle::BuildOptions { seed, float, sm: 80, fp_contract }).unwrap();
    (m, bundle)
}

/// The PTX of the adjoint's bundle at configuration `seed` (f32).
fn adjoint_ptx(adjoint: &eintup::autodiff::Adjoint, seed: u64) -> String {
    adjoint_bundle(adjoint, &[], seed, eintup::ir::loops::FloatWidth::F32, false).1.ptx().to_string()
}

#[test]
fn every_example_with_float_inputs_matches_finite_differences_on_every_backend() {
    let mut tried = 0;
    for p in examples() {
        let src = Source::load(&p).unwrap();
        let wrt = float_inputs(&eintup::pipeline::resolved(&src).unwrap().module);
        if wrt.is_empty() {
            continue;
        }
        for seed in 0..3 {
            check_gradient(&src, &wrt, seed, seed == 0);
        }
        tried += 1;
    }
    assert!(tried >= 15, "only {tried} examples with FLOAT inputs");
}

/// The example with its INT inputs made FLOAT (slice, tile and
/// space_to_depth move values without arithmetic).
fn floated(name: &str) -> Source {
    let text = std::fs::read_to_string(example(name)).unwrap().replace(", INT)", ", FLOAT)").replace("y[keep] = 0\n", "y[keep] = 0.0\n");
    Source::from_string(name, &text)
}

#[test]
fn adjoints_handle_zero_sized_and_rank_0_eintups() {
    let mut tried = 0;
    for p in examples() {
        let src = Source::load(&p).unwrap();
        let m = eintup::pipeline::resolved(&src).unwrap().module;
        let wrt = float_inputs(&m);
        if wrt.is_empty() {
            continue;
        }
        for (k, e) in m.eintups.iter().enumerate() {
            for b in [format!("{}=[0]", e.name), format!("{}=[]", e.name)] {
                tried += check_gradient_at(&src, &wrt, &[b], 2, k % 2 == 0).is_some() as usize;
            }
        }
    }
    assert!(tried >= 20, "only {tried} zero-sized or rank-0 configurations");
}

#[test]
fn adjoints_of_convolutions_and_index_shuffles_are_gathers() {
    let mut cases: Vec<(Source, Vec<String>)> = Vec::new();
    for name in ["conv_valid.et", "conv_transpose.et", "conv_same.et", "conv_valid_alt.et", "max_pool.et"] {
        let src = Source::load(&example(name)).unwrap();
        let wrt = float_inputs(&eintup::pipeline::resolved(&src).unwrap().module);
        cases.push((src, wrt));
    }
    for name in ["slice.et", "tile.et", "space_to_depth.et"] {
        cases.push((floated(name), vec!["x".to_string()]));
    }
    for (src, wrt) in &cases {
        let adjoint = check_gradient(src, wrt, 0, true);
        for c in &adjoint.contributions {
            assert!(!matches!(c.form, Form::Scatter(_)), "{}: {c:?}\n{}", src.name, adjoint.source);
        }
        for seed in 0..3 {
            let ptx = adjoint_ptx(&adjoint, seed);
            assert!(
                !ptx.contains("atom.") && !ptx.contains("red.global") && !ptx.contains("red.shared"),
                "{} seed {seed}: the adjoint's PTX has atomics\n{}",
                src.name,
                adjoint.source
            );
        }
        check_gradient(src, wrt, 1, false);
    }
}

#[test]
fn the_adjoint_of_gather_nd_is_a_scatter_add() {
    let src = Source::load(&example("gather_nd.et")).unwrap();
    let adjoint = check_gradient(&src, &["src".to_string()], 0, true);
    assert!(adjoint.contributions.iter().any(|c| matches!(c.form, Form::Scatter(_))), "{:?}", adjoint.contributions);
    assert!(adjoint_ptx(&adjoint, 0).contains("atom.global.add"), "a scatter-add runs with atomics");
}

#[test]
fn deterministic_scatters_have_no_float_atomics_and_sum_in_order() {
    // Twelve updates into six cells of `src`: the indices collide.
    let src = Source::load(&example("gather_nd.et")).unwrap();
    let prog = eintup::pipeline::resolved(&src).unwrap();
    let adjoint = differentiate(&prog, &Request { wrt: vec!["src".into()], of: vec![], constant: vec![] }).unwrap();
    let binds: Vec<String> = ["batch=[2]", "loc=[3]", "w=[12]", "item=[3]"].iter().map(|s| s.to_string()).collect();
    for float in [eintup::ir::loops::FloatWidth::F64, eintup::ir::loops::FloatWidth::F32] {
        let (m, bundle) = adjoint_bundle(&adjoint, &binds, 1, float, true);
        let ptx = bundle.ptx();
        assert!(
            !ptx.contains("atom.global.add.f") && !ptx.contains("red.global.add.f") && !ptx.contains("atom.global.cas"),
            "{float:?}: float atomics in\n{ptx}"
        );
        // The kernel sums each cell in the interpreter's order: bit for bit
        // its result, on every run.
        let want = interp::run(&m, &RunOptions { seed: 1, float, ..RunOptions::default() }).unwrap();
        let g = m.array_by_name("grad_src").unwrap();
        for _ in 0..2 {
            let (out, _) = eintup_runtime::Device::emulator().run_profiled(&bundle, &BTreeMap::new()).unwrap();
            assert_eq!(out["grad_src"].data, want[g].data, "{float:?}");
        }
        let idx = want[m.array_by_name("idx").unwrap()].to_f64_vec();
        let mut seen = std::collections::HashSet::new();
        assert!(idx.chunks(1).any(|c| !seen.insert(c[0] as i64)), "the drawn indices collide");
    }
    // Without the mode the same kernel adds atomically.
    assert!(adjoint_bundle(&adjoint, &binds, 1, eintup::ir::loops::FloatWidth::F64, false).1.ptx().contains("atom.global.add.f64"));
}

#[test]
fn snapshot_self_reads_and_partial_overwrites() {
    // x[i] = x[i+1] reads the old x; the second write to y overwrites
    // some cells (their old values get no gradient) and adds to others.
    let text = "x[i] = RANDOM(-3, 3, FLOAT)\nw[j] = RANDOM(-2, 2, FLOAT)\n\
        y[i] = x[i] * x[i]\ny[i] = y[i+1] * w[j]\ny[i+1] += exp(x[i])\n\
        s[i] = y[i] * 2.0\n\ny, s\n\nDIMS(i) IN [2, 5]\nDIMS(j) IN [1, 3]\n";
    let src = Source::from_string("overwrites.et", text);
    for seed in 0..4 {
        check_gradient(&src, &["x".to_string(), "w".to_string()], seed, seed == 0);
    }
}

/// The adjoint of `text` w.r.t. `x`, run on the interpreter at the given
/// inputs (every other input drawn); returns `grad_x`.
fn gradient_at(text: &str, inputs: &[(&str, Vec<usize>, Vec<f64>)]) -> Vec<f64> {
    let prog = eintup::pipeline::resolved(&Source::from_string("t.et", text)).unwrap();
    let adjoint = differentiate(&prog, &Request { wrt: vec!["x".into()], of: vec![], constant: vec![] }).unwrap();
    let src = Source::from_string("t.grad.et", &adjoint.source);
    let inputs: BTreeMap<String, Tensor> =
        inputs.iter().map(|(n, shape, v)| (n.to_string(), Tensor::new(shape.clone(), Data::F64(v.clone())).unwrap())).collect();
    let shapes: Vec<eintup::sema::InputShape> =
        inputs.iter().map(|(n, t)| eintup::sema::InputShape { name: n.clone(), shape: t.shape.iter().map(|&d| d as i64).collect() }).collect();
    let (m, _) =
        eintup::pipeline::specialized_for(&src, &[], &shapes, 0, eintup::ir::loops::FloatWidth::F64).unwrap_or_else(|f| panic!("{f}\n{}", adjoint.source));
    let out = named(&m, interp::run(&m, &RunOptions { inputs, ..RunOptions::default() }).unwrap());
    out["grad_x"].to_f64_vec()
}

#[test]
fn ties_and_kinks_take_the_documented_subgradients() {
    // max=: the instantiations that reach the maximum share its gradient.
    let g = gradient_at("x[i] = RANDOM(0, 1, FLOAT)\ny[] max= x[i]\n", &[("x", vec![5], vec![1.0, 3.0, 3.0, 2.0, 3.0]), ("grad_y", vec![], vec![6.0])]);
    assert_eq!(g, vec![0.0, 2.0, 2.0, 0.0, 2.0]);
    let g = gradient_at("x[i] = RANDOM(0, 1, FLOAT)\ny[] min= x[i]\n", &[("x", vec![3], vec![1.0, 1.0, 2.0]), ("grad_y", vec![], vec![1.0])]);
    assert_eq!(g, vec![0.5, 0.5, 0.0]);
    // max(a, b) at a tie: the first argument (TensorFlow's maximum);
    // abs at 0: 0 (sign); sqrt at 0: +inf (0.5 / sqrt).
    let g =
        gradient_at("x[i] = RANDOM(0, 1, FLOAT)\ny[i] = max(x[i], 1.0)\n", &[("x", vec![3], vec![1.0, 0.0, 2.0]), ("grad_y", vec![3], vec![1.0, 1.0, 1.0])]);
    assert_eq!(g, vec![1.0, 0.0, 1.0]);
    let g = gradient_at("x[i] = RANDOM(0, 1, FLOAT)\ny[i] = min(1.0, x[i])\n", &[("x", vec![2], vec![1.0, 0.0]), ("grad_y", vec![2], vec![1.0, 1.0])]);
    assert_eq!(g, vec![0.0, 1.0]);
    let g = gradient_at("x[i] = RANDOM(0, 1, FLOAT)\ny[i] = abs(x[i])\n", &[("x", vec![3], vec![-2.0, 0.0, 2.0]), ("grad_y", vec![3], vec![1.0, 1.0, 1.0])]);
    assert_eq!(g, vec![-1.0, 0.0, 1.0]);
    let g = gradient_at("x[i] = RANDOM(0, 1, FLOAT)\ny[i] = sqrt(x[i])\n", &[("x", vec![2], vec![0.0, 4.0]), ("grad_y", vec![2], vec![1.0, 1.0])]);
    assert_eq!(g, vec![f64::INFINITY, 0.25]);
    // select: the branch taken; the other gets nothing, even where it is
    // not finite.
    let g = gradient_at(
        "x[i] = RANDOM(0, 1, FLOAT)\ny[i] = select(x[i] > 0, log(x[i]), 2.0 * x[i])\n",
        &[("x", vec![2], vec![-1.0, 0.5]), ("grad_y", vec![2], vec![1.0, 1.0])],
    );
    assert_eq!(g, vec![2.0, 2.0]);
}

/// Whether the program is smooth where it runs: no comparisons, floor
/// divisions, `%`, kinks (`abs max min select`, `max=`, `min=`) or `pow`,
/// and `RANDOM` only in input statements (an adjoint that drops or adds
/// statements draws other values for the others). Finite differences
/// check such programs; the rules at kinks have their own test above.
fn smooth(m: &Module) -> bool {
    use et_grammar::ast::{AssignOp, BinOp, Func};
    m.stmts.iter().enumerate().all(|(si, s)| {
        matches!(s.op, AssignOp::Assign | AssignOp::AddAssign)
            && s.ops.iter().all(|op| match &op.kind {
                OpKind::Compare(..) | OpKind::Binary(BinOp::FloorDiv | BinOp::CeilDiv | BinOp::Mod, ..) => false,
                OpKind::Call(f, _) => matches!(f, Func::Exp | Func::Log | Func::Sqrt | Func::Tanh),
                OpKind::Random { .. } => m.defines_input(si),
                _ => true,
            })
    })
}

/// `(fd(h), fd(h/2))`: central differences of `f` along the direction.
fn differences(f: &dyn Fn(f64) -> f64, h: f64) -> (f64, f64) {
    ((f(h) - f(-h)) / (2.0 * h), (f(h / 2.0) - f(-h / 2.0)) / h)
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
enum Case {
    Checked,
    FrontEnd,
    NotSmooth,
    NothingToDifferentiate,
    Large,
    NotFinite,
    Refused,
}

/// One random program's gradient against finite differences, at the
/// configuration `seed` chooses for the forward program (the adjoint is
/// bound to its dims and run on its inputs).
fn random_case(text: &str, seed: u64) -> Case {
    let src = Source::from_string("p.et", text);
    let Ok(prog) = eintup::pipeline::resolved(&src) else { return Case::FrontEnd };
    let m0 = &prog.module;
    if !smooth(m0) {
        return Case::NotSmooth;
    }
    let wrt = float_inputs(m0);
    let outputs: Vec<String> = m0.result_arrays().into_iter().filter(|&a| m0.arrays[a].dtype == ElemType::Float).map(|a| m0.arrays[a].name.clone()).collect();
    if wrt.is_empty() || outputs.is_empty() {
        return Case::NothingToDifferentiate;
    }
    let Ok((fm, cfg)) = eintup::pipeline::specialized_module(&src, &[], seed) else { return Case::FrontEnd };
    if fm.largest_extent() > 2048 {
        return Case::Large;
    }
    let adjoint = match differentiate(&prog, &Request { wrt: wrt.clone(), of: vec![], constant: vec![] }) {
        Ok(a) => a,
        Err(d) if d.iter().all(|d| d.code == "E0803" || d.code == "E0802") => return Case::Refused,
        Err(d) => panic!("{text}\n{d:?}"),
    };
    let Ok(forward) = interp::run(&fm, &RunOptions { seed, ..RunOptions::default() }) else { return Case::FrontEnd };
    let forward = named(&fm, forward);
    let adj_src = Source::from_string("p.grad.et", &adjoint.source);
    let binds: Vec<String> =
        cfg.dims.iter().map(|(n, d)| format!("{n}={d:?}").replace(' ', "")).filter(|b| adjoint.source.contains(b.split('=').next().unwrap())).collect();
    let adj_prog = eintup::pipeline::resolved(&adj_src).unwrap_or_else(|f| panic!("{text}\n{}\n{f}", adjoint.source));
    let binds: Vec<String> = binds.into_iter().filter(|b| adj_prog.module.eintup_by_name(b.split('=').next().unwrap()).is_some()).collect();
    let (am, _) = eintup::pipeline::specialized_for(&adj_src, &binds, &[], seed, eintup::ir::loops::FloatWidth::F64)
        .unwrap_or_else(|f| panic!("{text}\n{}\n{binds:?}\n{f}", adjoint.source));
    let inputs: BTreeMap<String, Tensor> = fm.arrays.iter().filter(|a| a.is_input).map(|a| (a.name.clone(), forward[&a.name].clone())).collect();
    let got = named(
        &am,
        interp::run(&am, &RunOptions { seed, inputs: inputs.clone(), ..RunOptions::default() }).unwrap_or_else(|e| panic!("{text}\n{}\n{e:?}", adjoint.source)),
    );
    let cotangents: Vec<(String, Tensor)> = outputs.iter().zip(&adjoint.cotangents).map(|(y, c)| (y.clone(), got[c].clone())).collect();
    let fbinds: Vec<String> = cfg.dims.iter().map(|(n, d)| format!("{n}={d:?}").replace(' ', "")).collect();
    let dirs: Vec<Vec<f64>> = wrt.iter().enumerate().map(|(i, x)| direction(seed * 7 + i as u64, inputs[x].len())).collect();
    let predicted: f64 =
        wrt.iter().zip(&adjoint.gradients).zip(&dirs).map(|((_, g), v)| got[g].to_f64_vec().iter().zip(v).map(|(a, b)| a * b).sum::<f64>()).sum();
    let scale: f64 = 1.0
        + wrt
            .iter()
            .zip(&adjoint.gradients)
            .zip(&dirs)
            .map(|((_, g), v)| got[g].to_f64_vec().iter().zip(v).map(|(a, b)| (a * b).abs()).sum::<f64>())
            .sum::<f64>();
    if !predicted.is_finite() || !scale.is_finite() {
        return Case::NotFinite;
    }
    let magnitude = inputs.values().flat_map(|t| t.to_f64_vec()).fold(1.0f64, |m, x| m.max(x.abs()));
    let f = |t: f64| {
        let mut shifted = inputs.clone();
        for (x, v) in wrt.iter().zip(&dirs) {
            let a = &inputs[x];
            let data = a.to_f64_vec().iter().zip(v).map(|(p, d)| p + t * d).collect();
            shifted.insert(x.clone(), Tensor::new(a.shape.clone(), Data::F64(data)).unwrap());
        }
        objective(&src, &fbinds, &shifted, &cotangents)
    };
    let (fd1, fd2) = differences(&f, 1e-4 * magnitude);
    if !fd1.is_finite() || !fd2.is_finite() {
        return Case::NotFinite;
    }
    // Richardson: fd(h/2) errs by about a third of fd(h) - fd(h/2).
    let allowed = (fd1 - fd2).abs() + 1e-6 * scale;
    assert!(
        (fd2 - predicted).abs() <= allowed,
        "{text}\nseed {seed}: finite differences give {fd2} (at twice the step {fd1}), the adjoint {predicted}\n{}",
        adjoint.source
    );
    Case::Checked
}

#[test]
fn random_programs_match_finite_differences() {
    use proptest::test_runner::{Config, RngAlgorithm, TestRng, TestRunner};
    let cases = eintup_testkit::cases(1500);
    let mut runner =
        TestRunner::new_with_rng(Config { cases, failure_persistence: None, ..Config::default() }, TestRng::deterministic_rng(RngAlgorithm::ChaCha));
    let tally = std::sync::Mutex::new(BTreeMap::<Case, usize>::new());
    let result = runner.run(&(eintup_testkit::programs::smooth_program(), 0u64..4), |(text, seed)| {
        let case = random_case(&text, seed);
        *tally.lock().unwrap_or_else(|e| e.into_inner()).entry(case).or_default() += 1;
        Ok(())
    });
    let tally = tally.into_inner().unwrap_or_else(|e| e.into_inner());
    eprintln!("random program gradients: {tally:?}");
    result.unwrap();
    let checked = tally.get(&Case::Checked).copied().unwrap_or(0);
    assert!(checked * 20 >= cases as usize, "only {checked} of {cases} programs were checked: {tally:?}");
}
