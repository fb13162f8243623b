//! The `et` dialect's textual form parses back: for every example, in
//! rank-polymorphic and specialised form (several seeds), print -> parse ->
//! print is byte-identical and the parsed module equals the original up to
//! spans. Spans of the parsed module point into the printed text.

use eintup::driver::Source;
use eintup::ir::et::*;
use eintup::ir::et::{parse, print, verify};
use eintup::pipeline;
use eintup_testkit::examples;
use et_grammar::Span;

// ----- span erasure: equality "up to spans" -----

fn z() -> Span {
    Span::default()
}

fn strip_expr(e: &mut IndexExpr) {
    e.span = z();
    match &mut e.kind {
        IndexKind::Flat(v) => v.iter_mut().for_each(strip_expr),
        IndexKind::Slice { indices, .. } => strip_slots(indices),
        IndexKind::Bin(_, a, b) => {
            strip_expr(a);
            strip_expr(b);
        }
        IndexKind::Var(_) | IndexKind::Lit(_) | IndexKind::Dims(_) | IndexKind::Rank(_) => {}
    }
}

fn strip_slots(s: &mut [IndexSlot]) {
    for x in s {
        match x {
            IndexSlot::Expr(e) => strip_expr(e),
            IndexSlot::Colon(sp) => *sp = z(),
        }
    }
}

fn strip(mut m: Module) -> Module {
    for e in &mut m.eintups {
        e.span = z();
    }
    for a in &mut m.arrays {
        a.span = z();
        for p in &mut a.positions {
            strip_expr(&mut p.expr);
        }
    }
    for s in &mut m.stmts {
        s.span = z();
        strip_slots(&mut s.indices);
        for op in &mut s.ops {
            op.span = z();
            match &mut op.kind {
                OpKind::DimsAt(_, e) => strip_expr(e),
                OpKind::Read { indices, .. } => strip_slots(indices),
                _ => {}
            }
        }
    }
    if let Some(c) = &mut m.call {
        c.span = z();
    }
    m
}

/// print -> parse -> print is identical, parse(print(m)) == m up to spans,
/// and the module (and its reparse) verifies.
fn round_trip(what: &str, m: &Module) {
    let text = print::module(m);
    let parsed = match parse::parse_module(&text) {
        Ok(p) => p,
        Err(d) => panic!("{what}: does not parse back:\n{}", d.iter().map(|d| d.render("m.etir", &text)).collect::<String>()),
    };
    assert_eq!(print::module(&parsed), text, "{what}: reprint differs");
    assert_eq!(strip(parsed.clone()), strip(m.clone()), "{what}: parsed module differs");
    if let Err(e) = verify::verify(m) {
        panic!("{what}: verifier rejects the pipeline's module: {e}\n{text}");
    }
    assert_eq!(verify::verify(&parsed), Ok(()), "{what}: verifier rejects the reparsed module");
    // Spans point into the text: every eintup's span is its name.
    for e in &parsed.eintups {
        assert_eq!(&text[e.span.range()], e.name, "{what}: eintup span");
    }
    for a in &parsed.arrays {
        assert_eq!(&text[a.span.range()], a.name, "{what}: array span");
    }
    for s in &parsed.stmts {
        assert!(text[s.span.range()].starts_with("stmt "), "{what}: stmt span");
        for (k, op) in s.ops.iter().enumerate() {
            assert!(text[op.span.range()].starts_with(&format!("%{k} = ")), "{what}: op span");
        }
    }
}

#[test]
fn every_example_round_trips_rank_polymorphic() {
    let ex = examples();
    assert!(ex.len() >= 10);
    for p in ex {
        let src = Source::load(&p).expect("example loads");
        let (prog, _) = pipeline::ranked(&src).unwrap_or_else(|e| panic!("{}: {e}", p.display()));
        round_trip(&p.display().to_string(), &prog.module);
    }
}

#[test]
fn every_example_round_trips_specialised() {
    for p in examples() {
        let src = Source::load(&p).expect("example loads");
        for seed in 0..6 {
            let (m, _) = pipeline::specialized_module(&src, &[], seed).unwrap_or_else(|e| panic!("{}: {e}", p.display()));
            assert!(m.is_specialized());
            round_trip(&format!("{} seed {seed}", p.display()), &m);
        }
    }
}
