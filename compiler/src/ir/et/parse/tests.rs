use super::*;
use crate::ir::et::print;

const BASE: &str = "\
eintup i : ?
array x : INT [i : ?] def=0 input range=[0, 10)
stmt 0 x[i] = %2 vars(i) {
  %0 = const 0 : INT<>
  %1 = const 10 : INT<>
  %2 = random %0, %1, INT : INT<i:?>
}
outputs x
";

/// The first diagnostic's code and the text under its primary label.
fn first_error(text: &str) -> (&'static str, String) {
    match parse_module(text) {
        Ok(m) => panic!("accepted:\n{text}\nas {m:?}"),
        Err(d) => {
            let sp = d[0].primary_span().expect("located");
            (d[0].code, text[sp.range()].to_string())
        }
    }
}

fn edit(from: &str, to: &str) -> String {
    assert!(BASE.contains(from), "{from}");
    BASE.replacen(from, to, 1)
}

#[test]
fn base_parses_with_expected_content() {
    let m = parse_module(BASE).expect("parses");
    assert_eq!(m.eintups.len(), 1);
    assert_eq!(m.arrays[0].attrs, vec![Attr::Range { lo: Bound::Int(0), hi: Bound::Int(10) }]);
    assert!(m.arrays[0].is_input);
    assert_eq!(m.stmts[0].ops[2].kind, OpKind::Random { lo: 0, hi: 1, dtype: ElemType::Int });
    assert_eq!(m.stmts[0].result, 2);
    assert_eq!(m.outputs, vec![0]);
    assert_eq!(print::module(&m), BASE);
}

#[test]
fn comments_and_blank_lines_are_ignored() {
    let text = format!("// RUN: etopt %s | FileCheck %s\n\n{}  // CHECK: x\n", BASE.replace("stmt 0", "\n// a comment\nstmt 0"));
    let m = parse_module(&text).expect("parses");
    assert_eq!(print::module(&m), BASE);
    // Spans point into the commented text.
    assert_eq!(&text[m.eintups[0].span.range()], "i");
    assert_eq!(&text[m.stmts[0].ops[1].span.range()], "%1 = const 10 : INT<>");
}

/// Every line form and op; reprinted byte for byte.
const ALL: &str = r#"eintup a : ?
eintup b : ?2
eintup c : [2, 0]
eintup d : []
array x : INT [a : ?, (b + 1) : ?2] def=0 input range=[-5, 7) range=[0, DIMS(c, d))
array y : FLOAT [FLAT(a, b) : ?, ((RANK(b) * DIMS(c)) //^ 2) : [3, 1]] def=1
array z : FLOAT [] def=2
stmt 0 x[a, (b + 1)] = %3 vars(a, b) {
  %0 = const -5 : INT<>
  %1 = const 7 : INT<>
  %2 = random %0, %1, INT : INT<a:?, b:?2>
  %3 = neg %2 : INT<a:?, b:?2>
}
stmt 1 y[FLAT(a, b), ((RANK(b) * DIMS(c)) //^ 2)] += %11 vars(a, b) {
  %0 = const -0.0 : FLOAT<>
  %1 = const 1e20 : FLOAT<>
  %2 = const inf : FLOAT<>
  %3 = const -9223372036854775808 : INT<>
  %4 = rank(a, b) : INT<>
  %5 = dims_at(c)[(a % 2)] : INT<a:?>
  %6 = read x[a, :] : INT<a:?>
  %7 = read y[x[a, :], (((a // 2) - 3) + -1)] : FLOAT<a:?, c:[2, 0]>
  %8 = add %0, %1 : FLOAT<>
  %9 = sub %8, %2 : FLOAT<>
  %10 = mul %9, %3 : FLOAT<>
  %11 = div %10, %4 : FLOAT<d:[]>
}
stmt 2 z[] = %3 vars() {
  %0 = const 0.1 : FLOAT<>
  %1 = floordiv %0, %0 : FLOAT<>
  %2 = ceildiv %1, %0 : FLOAT<>
  %3 = mod %2, %1 : FLOAT<>
}
call tf.nn.f(x, k=DIMS(a, b), r=RANK(c), t=TENSOR(DIMS(a)), s=L("q\"uo\\te\n"), n=L(-1), f=L(-2.5), g=L(1e-7), w=L(True))
outputs z, y
"#;

#[test]
fn every_form_round_trips() {
    let m = parse_module(ALL).unwrap_or_else(|d| panic!("{}", d.iter().map(|d| d.render("all", ALL)).collect::<String>()));
    assert_eq!(print::module(&m), ALL);
    assert_eq!((m.eintups[1].rank, &m.eintups[1].dims), (Some(2), &None));
    assert_eq!((m.eintups[2].rank, &m.eintups[2].dims), (Some(2), &Some(vec![2, 0])));
    assert_eq!((m.eintups[3].rank, &m.eintups[3].dims), (Some(0), &Some(vec![])));
    let s1 = &m.stmts[1];
    assert_eq!(s1.op, AssignOp::AddAssign);
    assert!(matches!(s1.ops[0].kind, OpKind::ConstFloat(f) if f == 0.0 && f.is_sign_negative()));
    assert_eq!(s1.ops[1].kind, OpKind::ConstFloat(1e20));
    assert_eq!(s1.ops[2].kind, OpKind::ConstFloat(f64::INFINITY));
    assert_eq!(s1.ops[3].kind, OpKind::ConstInt(i64::MIN));
    assert_eq!(s1.ops[11].kind, OpKind::Binary(BinOp::Div, 10, 4));
    let call = m.call.as_ref().expect("call");
    assert_eq!(call.func, "tf.nn.f");
    assert_eq!(call.args[4], (Some("s".into()), CallArg::Literal(Literal::Str("q\"uo\\te\n".into()))));
    assert_eq!(call.args[6].1, CallArg::Literal(Literal::Float(-2.5)));
    assert_eq!(call.args[8].1, CallArg::Literal(Literal::Word("True".into())));
    assert_eq!(m.outputs, vec![2, 1]);
    // y's first position reads x, declared above; the read in stmt 1
    // slices x: ids resolve regardless of order.
    let OpKind::Read { array, indices } = &s1.ops[7].kind else { panic!() };
    assert_eq!(*array, 1);
    assert!(matches!(&indices[0], IndexSlot::Expr(IndexExpr { kind: IndexKind::Slice { array: 0, .. }, .. })));
    assert!(matches!(&indices[1], IndexSlot::Expr(IndexExpr { kind: IndexKind::Bin(IndexOp::Add, _, r), .. }) if r.kind == IndexKind::Lit(-1)));
}

#[test]
fn verifier_errors_are_located() {
    let text = edit(" def=0", " def=3");
    let d = parse_verified(&text).unwrap_err();
    assert_eq!(d.iter().map(|d| d.code).collect::<Vec<_>>(), [verify::CODE]);
    assert_eq!(&text[d[0].primary_span().expect("located").range()], "x");
    assert!(d[0].message.ends_with("array `x`: defining statement 3 out of range (1 statements)"), "{}", d[0].message);
    assert_eq!(parse_verified(BASE).map(|m| print::module(&m)), Ok(BASE.to_string()));
}

#[test]
fn each_error_code_is_located() {
    let deep = format!("array x : INT [{}i{} : ?] def=0", "(".repeat(600), " + 1)".repeat(600));
    let cases: Vec<(String, &str, &str)> = vec![
        (edit("eintup i : ?", "eintup i : $"), "E0601", "$"),
        (edit("const 10", "const 12abc"), "E0602", "12abc"),
        (edit("const 10", "const 99999999999999999999"), "E0602", "99999999999999999999"),
        (edit("const 10", "const 1e999"), "E0602", "1e999"),
        (format!("{BASE}call f(L(\"abc)\n"), "E0603", "\""),
        (format!("{BASE}call f(L(\"a\\qb\"))\n"), "E0603", "\\q"),
        (edit("eintup i : ?", "eintup i ?"), "E0604", "?"),
        (edit("%2 = random %0, %1, INT : INT<i:?>", "%2 = random %0, %1, INT : INT<i:?> extra"), "E0604", "extra"),
        (edit("outputs x", "bogus x"), "E0605", "bogus"),
        (format!("{BASE}eintup j : ?\n"), "E0606", "eintup"),
        (format!("{BASE}outputs x\n"), "E0606", "outputs"),
        (edit("eintup i : ?", "eintup i : ?\neintup i : []"), "E0607", "i"),
        (edit("[i : ?]", "[j : ?]"), "E0608", "j"),
        (edit("outputs x", "outputs q"), "E0609", "q"),
        (edit("stmt 0", "stmt 1"), "E0610", "1"),
        (edit("%0 = const 0", "%1 = const 0"), "E0611", "%1"),
        (edit("random %0, %1", "random %0, %2"), "E0612", "%2"),
        (edit("= %2 vars", "= %5 vars"), "E0613", "%5"),
        (edit("}\n", ""), "E0614", "stmt 0 x[i] = %2 vars(i) {"),
        (edit("stmt 0 x[i] = %2 vars(i) {\n", ""), "E0614", "%"),
        (format!("{BASE}}}\n"), "E0614", "}"),
        (edit("INT<i:?>", "INT<i:[2]>"), "E0615", "i:[2]"),
        (edit("random %0, %1, INT", "frob %0, %1, INT"), "E0616", "frob"),
        (edit("[i : ?]", "[ROOT(i) : ?]"), "E0616", "ROOT"),
        (edit(" def=0", ""), "E0617", ""),
        (edit("input", "input input"), "E0617", "input"),
        (edit("INT [i", "DOUBLE [i"), "E0618", "DOUBLE"),
        (edit("array x : INT [i : ?] def=0 input range=[0, 10)", &deep), "E0619", "("),
    ];
    for (text, code, under) in cases {
        let (c, u) = first_error(&text);
        assert_eq!((c, u.as_str()), (code, under), "in:\n{text}");
    }
}

/// Nesting a source program can reach parses on a test thread's 2 MiB
/// stack; deeper nesting is E0619, not a stack overflow.
#[test]
fn deep_nesting_is_bounded() {
    let pos = |open: &str, close: &str, d: usize| format!("eintup i : ?\narray x : INT [{}i{} : ?] def=0\n", open.repeat(d), close.repeat(d));
    let cases = [
        (pos("(", " + 1)", 500), true),
        (pos("(", " + 1)", 600), false),
        (pos("FLAT(", ")", 250), true),
        (pos("FLAT(", ")", 300), false),
        (pos("x[", "]", 250), true),
        (pos("(FLAT(", ") + 1)", 200), true),
    ];
    for (text, ok) in cases {
        let t = std::thread::Builder::new().stack_size(2 << 20).spawn(move || parse_module(&text).map(|m| print::module(&m)).map_err(|d| d[0].code));
        let r = t.expect("thread starts").join().expect("no stack overflow");
        match r {
            Ok(_) => assert!(ok),
            Err(code) => assert_eq!((ok, code), (false, "E0619")),
        }
    }
}

#[test]
fn one_mistake_one_diagnostic() {
    // A failed op line still numbers the following ops.
    let text = edit("%0 = const 0 : INT<>", "%0 = const zero : INT<>");
    let d = parse_module(&text).unwrap_err();
    assert_eq!(d.iter().map(|d| d.code).collect::<Vec<_>>(), ["E0604"]);
    // A failed eintup line keeps the ids of later lines.
    let text = format!("eintup j : $\n{BASE}");
    let d = parse_module(&text).unwrap_err();
    assert_eq!(d.iter().map(|d| d.code).collect::<Vec<_>>(), ["E0601"]);
    // A failed header skips its block quietly.
    let text = edit("stmt 0 x[i] =", "stmt 0 x[i] ==");
    let d = parse_module(&text).unwrap_err();
    assert_eq!(d.len(), 1, "{d:?}");
}

#[test]
fn empty_text_is_an_empty_module() {
    let m = parse_module("// nothing\n\n").expect("parses");
    assert!(m.eintups.is_empty() && m.stmts.is_empty() && m.call.is_none() && m.outputs.is_empty());
    assert_eq!(print::module(&m), "");
}

/// A dynamic module (`symbols(..)`, dims over them, checks).
const DYNAMIC: &str = "\
symbols(%i.0, %j.0)
eintup i : [%i.0]
eintup j : [(%j.0 - 2), 3]
check (%j.0 - 2) >= 0 about j \"range inference\"
array x : INT [i : ?1] def=0 input range=[0, 10)
stmt 0 x[i] = %2 vars(i) {
  %0 = const 0 : INT<>
  %1 = const 10 : INT<>
  %2 = random %0, %1, INT : INT<i:?1>
}
outputs x
";

#[test]
fn a_dynamic_module_reads_back_with_its_symbols_dims_and_checks() {
    let m = parse_verified(DYNAMIC).expect("parses");
    let sym = m.symbolic.as_ref().expect("dynamic");
    assert_eq!(sym.symbols.iter().map(|d| d.name.as_str()).collect::<Vec<_>>(), ["i.0", "j.0"]);
    assert_eq!(sym.eintups[1], vec![IExpr::sub(IExpr::Sym(1), IExpr::Const(2)), IExpr::Const(3)]);
    assert_eq!((m.eintups[1].rank, &m.eintups[1].dims), (Some(2), &None));
    assert_eq!(sym.checks, vec![SymCheck { expr: IExpr::sub(IExpr::Sym(1), IExpr::Const(2)), min: 0, about: 1, rule: "range inference".into() }]);
    assert_eq!(print::module(&m), DYNAMIC);
    // No symbols at all is still a dynamic module.
    let none = "symbols()\neintup k : [4]\n";
    let m = parse_verified(none).expect("parses");
    assert_eq!(m.symbolic.as_ref().map(|s| s.eintups.clone()), Some(vec![vec![IExpr::Const(4)]]));
    assert_eq!(print::module(&m), none);
}

#[test]
fn dynamic_module_errors_are_located() {
    let dyn_edit = |from: &str, to: &str| DYNAMIC.replacen(from, to, 1);
    let cases: Vec<(String, &str, &str)> = vec![
        (dyn_edit("[%i.0]", "[%q.0]"), "E0608", "%q.0"),
        (dyn_edit("symbols(%i.0, %j.0)", "symbols(%i.0, %i.0)"), "E0607", "%i.0"),
        (dyn_edit("[%i.0]", "[(i + 1)]"), "E0604", "i"),
        (dyn_edit("check (%j.0 - 2) >= 0", "check (%j.0 - 2) > 0"), "E0604", "0"),
        (dyn_edit("about j", "about q"), "E0608", "q"),
        (format!("{}\n{BASE}", "check 1 >= 0 about i \"r\""), "E0606", "check"),
        (format!("eintup i : [1]\n{DYNAMIC}"), "E0606", "symbols"),
    ];
    for (text, code, under) in cases {
        let (c, u) = first_error(&text);
        assert_eq!((c, u.as_str()), (code, under), "{text}");
    }
    // The verifier: a symbolic module's eintups all have symbolic dims.
    let mut m = parse_module(DYNAMIC).expect("parses");
    m.eintups[0].dims = Some(vec![5]);
    m.symbolic.as_mut().unwrap().checks[0].about = 7;
    let v = verify::verify(&m).unwrap_err().to_string();
    assert!(v.contains("eintup `i`: static dims in a module with symbolic dims") && v.contains("eintup id 7 out of range"), "{v}");
}
