//! Interpreter tests on small specialised modules built by hand (they do
//! not need semantic analysis). Every expected value is worked out from
//! docs/language.md section 3 in the comments, not taken from the interpreter.

use eintup::interp::{run, RunError, RunOptions};
use eintup::ir::et::*;
use eintup::ir::loops::FloatWidth;
use eintup::tensor::{Data, Tensor};
use et_grammar::ast::{AssignOp, BinOp, ElemType};
use et_grammar::Span;

fn sp() -> Span {
    Span::new(0, 0)
}
fn ix(kind: IndexKind) -> IndexExpr {
    IndexExpr { kind, span: sp() }
}
fn var(t: EintupId) -> IndexSlot {
    IndexSlot::Expr(ix(IndexKind::Var(t)))
}
fn ex(kind: IndexKind) -> IndexSlot {
    IndexSlot::Expr(ix(kind))
}
fn add(a: IndexKind, b: IndexKind) -> IndexKind {
    IndexKind::Bin(IndexOp::Add, Box::new(ix(a)), Box::new(ix(b)))
}

#[derive(Default)]
struct B {
    m: Option<Module>,
}

impl B {
    fn m(&mut self) -> &mut Module {
        self.m.get_or_insert_with(|| Module { eintups: vec![], arrays: vec![], stmts: vec![], call: None, outputs: vec![], symbolic: None })
    }
    fn eintup(&mut self, name: &str, dims: &[i64]) -> EintupId {
        let m = self.m();
        m.eintups.push(Eintup { name: name.into(), rank: Some(dims.len()), dims: Some(dims.to_vec()), span: sp() });
        m.eintups.len() - 1
    }
    /// Positions are given as (first-mention expression, its dims).
    fn array(&mut self, name: &str, dtype: ElemType, pos: Vec<(IndexKind, Vec<i64>)>, is_input: bool) -> ArrayId {
        let m = self.m();
        let def_stmt = m.stmts.len();
        let positions = pos.into_iter().map(|(k, d)| Position { expr: ix(k), rank: Some(d.len()), dims: Some(d) }).collect();
        m.arrays.push(Array { name: name.into(), dtype, positions, attrs: vec![], def_stmt, is_input, span: sp() });
        m.arrays.len() - 1
    }
    fn stmt(&mut self, array: ArrayId, indices: Vec<IndexSlot>, op: AssignOp, ops: Vec<OpKind>) {
        let m = self.m();
        let ops: Vec<Op> = ops.into_iter().map(|kind| Op { kind, ty: SigType { dtype: ElemType::Float, eintups: vec![] }, span: sp() }).collect();
        let result = ops.len() - 1;
        m.stmts.push(Stmt { array, indices, op, vars: vec![], ops, result, span: sp() });
    }
    fn build(mut self) -> Module {
        self.m().clone()
    }
}

fn int(shape: &[usize], v: &[i32]) -> Tensor {
    Tensor { shape: shape.to_vec(), data: Data::I32(v.to_vec()) }
}
fn flt(shape: &[usize], v: &[f64]) -> Tensor {
    Tensor { shape: shape.to_vec(), data: Data::F64(v.to_vec()) }
}
fn random_int(lo: i64, hi: i64) -> Vec<OpKind> {
    vec![OpKind::ConstInt(lo), OpKind::ConstInt(hi), OpKind::Random { lo: 0, hi: 1, dtype: ElemType::Int }]
}
fn opts(inputs: Vec<(&str, Tensor)>) -> RunOptions {
    RunOptions { seed: 0, float: FloatWidth::F64, inputs: inputs.into_iter().map(|(n, t)| (n.to_string(), t)).collect(), ..RunOptions::default() }
}

#[test]
fn random_values_follow_the_formula() {
    // x[i] = RANDOM(3, 10, INT), |i| = 4, seed 7: element n draws
    // 3 + splitmix64(7 ^ fnv1a64("x") ^ n*GOLDEN) % 7; values computed in
    // Python: n=0..3 -> see below; n=5 would be 9.
    let mut b = B::default();
    let i = b.eintup("i", &[6]);
    let x = b.array("x", ElemType::Int, vec![(IndexKind::Var(i), vec![6])], true);
    b.stmt(x, vec![var(i)], AssignOp::Assign, random_int(3, 10));
    let m = b.build();
    let out = run(&m, &RunOptions { seed: 7, ..RunOptions::default() }).unwrap();
    let Data::I32(v) = &out[0].data else { panic!() };
    assert_eq!(v[5], 9);
    assert!(v.iter().all(|&e| (3..10).contains(&e)));
}

#[test]
fn shift_reads_a_snapshot_and_keeps_unreached_cells() {
    // x[i] = RANDOM(..) supplied as [1,2,3,4,5]; x[i] = x[i+1]:
    // i=0..3 write x[i] = old x[i+1]; i=4 reads x[5]: skipped, x[4] keeps 5.
    let mut b = B::default();
    let i = b.eintup("i", &[5]);
    let x = b.array("x", ElemType::Int, vec![(IndexKind::Var(i), vec![5])], true);
    b.stmt(x, vec![var(i)], AssignOp::Assign, random_int(0, 100));
    b.stmt(x, vec![var(i)], AssignOp::Assign, vec![OpKind::Read { array: x, indices: vec![ex(add(IndexKind::Var(i), IndexKind::Lit(1)))] }]);
    let out = run(&b.build(), &opts(vec![("x", int(&[5], &[1, 2, 3, 4, 5]))])).unwrap();
    assert_eq!(out[0], int(&[5], &[2, 3, 4, 5, 5]));
}

#[test]
fn gather_skips_out_of_bounds_addresses() {
    // src = [10,20,30]; idx[w,coord] = [[2],[5],[-1],[0]];
    // dst[w] = src[idx[w,:]] -> [30, (skip)0, (skip)0, 10].
    let mut b = B::default();
    let l = b.eintup("l", &[3]);
    let w = b.eintup("w", &[4]);
    let c = b.eintup("coord", &[1]);
    let src = b.array("src", ElemType::Float, vec![(IndexKind::Var(l), vec![3])], true);
    b.stmt(
        src,
        vec![var(l)],
        AssignOp::Assign,
        vec![OpKind::ConstFloat(0.0), OpKind::ConstFloat(1.0), OpKind::Random { lo: 0, hi: 1, dtype: ElemType::Float }],
    );
    let idx = b.array("idx", ElemType::Int, vec![(IndexKind::Var(w), vec![4]), (IndexKind::Var(c), vec![1])], true);
    b.stmt(idx, vec![var(w), var(c)], AssignOp::Assign, random_int(0, 3));
    let dst = b.array("dst", ElemType::Float, vec![(IndexKind::Var(w), vec![4])], false);
    let slice = IndexKind::Slice { array: idx, indices: vec![var(w), IndexSlot::Colon(sp())] };
    b.stmt(dst, vec![var(w)], AssignOp::Assign, vec![OpKind::Read { array: src, indices: vec![ex(slice)] }]);
    let out = run(&b.build(), &opts(vec![("src", flt(&[3], &[10.0, 20.0, 30.0])), ("idx", int(&[4, 1], &[2, 5, -1, 0]))])).unwrap();
    assert_eq!(out[dst], flt(&[4], &[30.0, 0.0, 0.0, 10.0]));
}

#[test]
fn scatter_duplicates_accumulate() {
    // out[d] = 0.0 (|d| = 3); out[idx[u,:]] += vals[u] with idx = [1,1,0,7],
    // vals = [1,2,4,8] -> out = [4, 1+2, 0]; 7 is out of range, skipped.
    let mut b = B::default();
    let d = b.eintup("d", &[3]);
    let u = b.eintup("u", &[4]);
    let c = b.eintup("coord", &[1]);
    let idx = b.array("idx", ElemType::Int, vec![(IndexKind::Var(u), vec![4]), (IndexKind::Var(c), vec![1])], true);
    b.stmt(idx, vec![var(u), var(c)], AssignOp::Assign, random_int(0, 3));
    let vals = b.array("vals", ElemType::Float, vec![(IndexKind::Var(u), vec![4])], true);
    b.stmt(
        vals,
        vec![var(u)],
        AssignOp::Assign,
        vec![OpKind::ConstFloat(0.0), OpKind::ConstFloat(1.0), OpKind::Random { lo: 0, hi: 1, dtype: ElemType::Float }],
    );
    let out = b.array("out", ElemType::Float, vec![(IndexKind::Var(d), vec![3])], false);
    b.stmt(out, vec![var(d)], AssignOp::Assign, vec![OpKind::ConstFloat(0.0)]);
    let slice = IndexKind::Slice { array: idx, indices: vec![var(u), IndexSlot::Colon(sp())] };
    b.stmt(out, vec![ex(slice)], AssignOp::AddAssign, vec![OpKind::Read { array: vals, indices: vec![var(u)] }]);
    let r = run(&b.build(), &opts(vec![("idx", int(&[4, 1], &[1, 1, 0, 7])), ("vals", flt(&[4], &[1.0, 2.0, 4.0, 8.0]))])).unwrap();
    assert_eq!(r[out], flt(&[3], &[4.0, 3.0, 0.0]));
}

#[test]
fn diagonal_and_rank0_and_zero_sized() {
    // m = [[1,2],[3,4]]; d[i] = m[i,i] -> [1,4].
    // s[k] = m[j,j2] with rank-0 k sums all four: 10.
    // z[e] = m[j, e] with |e| = 0: shape [0], nothing runs.
    let mut b = B::default();
    let i = b.eintup("i", &[2]);
    let j = b.eintup("j", &[2]);
    let k = b.eintup("k", &[]);
    let e = b.eintup("e", &[0]);
    let m = b.array("m", ElemType::Int, vec![(IndexKind::Var(i), vec![2]), (IndexKind::Var(j), vec![2])], true);
    b.stmt(m, vec![var(i), var(j)], AssignOp::Assign, random_int(0, 9));
    let d = b.array("d", ElemType::Int, vec![(IndexKind::Var(i), vec![2])], false);
    b.stmt(d, vec![var(i)], AssignOp::Assign, vec![OpKind::Read { array: m, indices: vec![var(i), var(i)] }]);
    let s = b.array("s", ElemType::Int, vec![(IndexKind::Var(k), vec![])], false);
    b.stmt(s, vec![var(k)], AssignOp::Assign, vec![OpKind::Read { array: m, indices: vec![var(i), var(j)] }]);
    let z = b.array("z", ElemType::Int, vec![(IndexKind::Var(e), vec![0])], false);
    b.stmt(z, vec![var(e)], AssignOp::Assign, vec![OpKind::Read { array: m, indices: vec![var(j), var(j)] }]);
    let r = run(&b.build(), &opts(vec![("m", int(&[2, 2], &[1, 2, 3, 4]))])).unwrap();
    assert_eq!(r[d], int(&[2], &[1, 4]));
    assert_eq!(r[s], int(&[], &[10]));
    assert_eq!(r[z], int(&[0], &[]));
}

#[test]
fn int_arithmetic_rules() {
    // r[i] = a[i] // b[i] and a[i] % b[i] with Python rules, 0 for /0;
    // a = [7,-7,7,5, i32::MAX], b = [2,2,-2,0, 1]; + 1 wraps for the last.
    let mut b = B::default();
    let i = b.eintup("i", &[5]);
    let a = b.array("a", ElemType::Int, vec![(IndexKind::Var(i), vec![5])], true);
    b.stmt(a, vec![var(i)], AssignOp::Assign, random_int(0, 9));
    let bb = b.array("b", ElemType::Int, vec![(IndexKind::Var(i), vec![5])], true);
    b.stmt(bb, vec![var(i)], AssignOp::Assign, random_int(0, 9));
    let rd = |op| vec![OpKind::Read { array: a, indices: vec![var(i)] }, OpKind::Read { array: bb, indices: vec![var(i)] }, OpKind::Binary(op, 0, 1)];
    let q = b.array("q", ElemType::Int, vec![(IndexKind::Var(i), vec![5])], false);
    b.stmt(q, vec![var(i)], AssignOp::Assign, rd(BinOp::FloorDiv));
    let r = b.array("r", ElemType::Int, vec![(IndexKind::Var(i), vec![5])], false);
    b.stmt(r, vec![var(i)], AssignOp::Assign, rd(BinOp::Mod));
    let s = b.array("s", ElemType::Int, vec![(IndexKind::Var(i), vec![5])], false);
    b.stmt(s, vec![var(i)], AssignOp::Assign, rd(BinOp::Add));
    let t = b.array("t", ElemType::Float, vec![(IndexKind::Var(i), vec![5])], false);
    b.stmt(t, vec![var(i)], AssignOp::Assign, rd(BinOp::Div));
    let out = run(&b.build(), &opts(vec![("a", int(&[5], &[7, -7, 7, 5, i32::MAX])), ("b", int(&[5], &[2, 2, -2, 0, 1]))])).unwrap();
    assert_eq!(out[q], int(&[5], &[3, -4, -4, 0, i32::MAX]));
    assert_eq!(out[r], int(&[5], &[1, 1, -1, 0, 0]));
    assert_eq!(out[s], int(&[5], &[9, -5, 5, 5, i32::MIN]));
    let Data::F64(tv) = &out[t].data else { panic!() };
    assert_eq!(tv[..3], [3.5, -3.5, -3.5]);
    assert!(tv[3].is_infinite());
}

#[test]
fn flat_skips_components_outside_their_own_range() {
    // y[FLAT(i+1, j)] = 1 with |i| = 2, |j| = 3: DIMS(i+1) = 3, so FLAT
    // covers 9 cells; positions (i+1)*3 + j for i in 0..2: 3..9 get 1,
    // 0..3 keep 0. y[FLAT(i, j+1)] (j+1 in [0,4)) writes i*4+j+1.
    let mut b = B::default();
    let i = b.eintup("i", &[2]);
    let j = b.eintup("j", &[3]);
    let flat = IndexKind::Flat(vec![ix(add(IndexKind::Var(i), IndexKind::Lit(1))), ix(IndexKind::Var(j))]);
    let y = b.array("y", ElemType::Int, vec![(flat.clone(), vec![9])], false);
    b.stmt(y, vec![ex(flat)], AssignOp::Assign, vec![OpKind::ConstInt(1)]);
    let r = run(&b.build(), &opts(vec![])).unwrap();
    assert_eq!(r[y], int(&[9], &[0, 0, 0, 1, 1, 1, 1, 1, 1]));
}

#[test]
fn supplied_input_errors_name_the_array_and_shapes() {
    let mut b = B::default();
    let i = b.eintup("i", &[3]);
    let x = b.array("x", ElemType::Float, vec![(IndexKind::Var(i), vec![3])], true);
    b.stmt(x, vec![var(i)], AssignOp::Assign, vec![OpKind::ConstFloat(0.0), OpKind::ConstFloat(1.0), OpKind::Random { lo: 0, hi: 1, dtype: ElemType::Float }]);
    let y = b.array("y", ElemType::Float, vec![(IndexKind::Var(i), vec![3])], false);
    b.stmt(y, vec![var(i)], AssignOp::Assign, vec![OpKind::Read { array: x, indices: vec![var(i)] }]);
    let m = b.build();
    let code = |r: Result<Vec<Tensor>, RunError>| match r {
        Err(RunError::User(d)) => (d.code, d.message),
        other => panic!("{other:?}"),
    };
    let (c, msg) = code(run(&m, &opts(vec![("x", flt(&[2, 2], &[0.0; 4]))])));
    assert_eq!(c, "E0403");
    assert!(msg.contains("[2, 2]") && msg.contains("[3]") && msg.contains("`x`"), "{msg}");
    assert_eq!(code(run(&m, &opts(vec![("x", int(&[3], &[1, 2, 3]))]))).0, "E0403");
    assert_eq!(code(run(&m, &opts(vec![("nope", int(&[3], &[1, 2, 3]))]))).0, "E0401");
    assert_eq!(code(run(&m, &opts(vec![("y", flt(&[3], &[1.0; 3]))]))).0, "E0402");
    // f32 input for a FLOAT array is accepted and used.
    let r = run(&m, &opts(vec![("x", Tensor { shape: vec![3], data: Data::F32(vec![1.5, 2.5, 3.5]) })])).unwrap();
    assert_eq!(r[y], flt(&[3], &[1.5, 2.5, 3.5]));
}

#[test]
fn work_above_the_limit_is_refused_before_running() {
    // y[i] += x[j] with |i| = 4, |j| = 5: 20 instantiations, plus 5 of
    // x[j] = RANDOM(..), 25 in all (docs/language.md s.3: one per combination).
    let mut b = B::default();
    let i = b.eintup("i", &[4]);
    let j = b.eintup("j", &[5]);
    let x = b.array("x", ElemType::Int, vec![(IndexKind::Var(j), vec![5])], true);
    let y = b.array("y", ElemType::Int, vec![(IndexKind::Var(i), vec![4])], false);
    b.stmt(x, vec![var(j)], AssignOp::Assign, random_int(1, 2));
    b.stmt(y, vec![var(i)], AssignOp::AddAssign, vec![OpKind::Read { array: x, indices: vec![var(j)] }]);
    let mut m = b.build();
    // (the builder leaves the statements' variables to the interpreter's plan)
    m.stmts[0].vars = vec![j];
    m.stmts[1].vars = vec![i, j];
    assert_eq!(m.instantiations(), vec![5, 20]);
    let out = run(&m, &RunOptions { max_work: 25, ..RunOptions::default() }).unwrap();
    // every x[j] is 1 (RANDOM(1, 2, INT)), so each y[i] sums five ones
    assert_eq!(out[1], int(&[4], &[5, 5, 5, 5]));
    match run(&m, &RunOptions { max_work: 24, ..RunOptions::default() }) {
        Err(RunError::User(d)) => {
            let text = format!("{d:?}");
            assert!(text.contains("E0318") && text.contains("needs 25 instantiations, more than the work limit of 24"), "{text}");
        }
        other => panic!("expected E0318, got {other:?}"),
    }
}
