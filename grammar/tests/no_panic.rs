//! Property tests: the front end never panics, whatever it is fed.
//!
//! Two input generators: arbitrary bytes (lossily turned into a `str`, as a
//! tool would after reporting invalid UTF-8), and sequences of `.et`
//! fragments, which reach far deeper into the grammar than random bytes do.
//! For every input `parse_file` must either succeed or fail with at least one
//! diagnostic, every diagnostic must carry a code and render without
//! panicking, and `parse_expr` and the AST printer must not panic either.

use et_grammar::{parse_expr, parse_file, print};
use proptest::prelude::*;

/// Checks the contract on one input; `Err` describes a violation.
fn check(src: &str) -> Result<(), TestCaseError> {
    match parse_file(src) {
        Ok(file) => {
            let printed = print::print_file(&file, src);
            prop_assert!(printed.starts_with("stmt "), "a parsed file has program statements: {printed:?}");
        }
        Err(diags) => {
            prop_assert!(!diags.is_empty(), "Err with no diagnostics for {src:?}");
            for d in &diags {
                prop_assert!(d.code.starts_with("E00"), "syntax errors use E00xx codes, got {}", d.code);
                let text = d.render("input.et", src);
                // Located errors say `input.et:line:col:`; only E0009 on an
                // empty file could lack a position, and it has one too.
                prop_assert!(text.starts_with("input.et:"), "{text}");
                prop_assert!(text.contains(&format!("error[{}]", d.code)), "{text}");
                prop_assert!(d.primary_span().is_some(), "unlocated diagnostic {d:?}");
            }
        }
    }
    // Parsing as a lone expression exercises the same code without lines.
    if let Err(diags) = parse_expr(src) {
        prop_assert!(!diags.is_empty());
        for d in &diags {
            let _ = d.render("expr", src);
        }
    }
    Ok(())
}

/// One `.et` fragment: every token kind, plus layout and error-provoking
/// pieces (huge numbers, stray characters, unterminated strings).
fn fragment() -> impl Strategy<Value = String> {
    let fixed: Vec<&'static str> = vec![
        "RANK",
        "DIMS",
        "FLAT",
        "RANDOM",
        "IN",
        "INT",
        "FLOAT",
        "L",
        "TENSOR",
        "tf",
        "[",
        "]",
        "(",
        ")",
        ",",
        ":",
        ".",
        "=",
        "+=",
        "+",
        "-",
        "*",
        "/",
        "//",
        "//^",
        "%",
        "\n",
        "\n\n",
        " ",
        "\t",
        "# comment\n",
        "#",
        "'s'",
        "\"dq\"",
        "'open",
        "\"",
        "\\",
        "99999999999999999999",
        "-9223372036854775808",
        "9223372036854775807",
        "1e999",
        "1e-999",
        "3.",
        "2.5e-3",
        "12abc",
        "0",
        "$",
        "é",
        "\u{1F600}",
        "\r\n",
        "\u{FFFD}",
    ];
    prop_oneof![
        3 => prop::sample::select(fixed).prop_map(str::to_string),
        1 => "[a-zA-Z_][a-zA-Z0-9_]{0,6}",
        1 => (0u64..=u64::MAX).prop_map(|n| n.to_string()),
        1 => (0u32..1000, 0u32..1000).prop_map(|(a, b)| format!("{a}.{b}")),
    ]
}

/// Well-formed lines, so that fragment sequences also reach the section
/// logic (ordering, a second call, missing program) and not only errors.
fn line() -> impl Strategy<Value = String> {
    prop::sample::select(vec![
        "a[i] = b[i] * -2\n",
        "c[i, j] += a[i] - -3 // DIMS(j)\n",
        "d[idx[w, :]] = RANDOM(0, DIMS(loc)[coord], INT)\n",
        "tf.f(x, y=DIMS(a), z=L('s'), t=TENSOR(DIMS(a, b)))\n",
        "y, z\n",
        "RANK(t) IN [1, 3]\n",
        "DIMS(t) = DIMS(u) //^ 2\n",
    ])
    .prop_map(str::to_string)
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 512, ..ProptestConfig::default() })]

    #[test]
    fn random_bytes_never_panic(bytes in prop::collection::vec(any::<u8>(), 0..200)) {
        check(&String::from_utf8_lossy(&bytes))?;
    }

    #[test]
    fn random_ascii_text_never_panics(src in "[ -~\n\t]{0,120}") {
        check(&src)?;
    }

    #[test]
    fn random_fragments_never_panic(parts in prop::collection::vec(fragment(), 0..60)) {
        check(&parts.concat())?;
    }

    #[test]
    fn fragments_mixed_with_valid_lines_never_panic(
        parts in prop::collection::vec(prop_oneof![2 => fragment(), 1 => line()], 0..40)
    ) {
        check(&parts.join(" "))?;
    }
}

/// Sanity check that `check` can fail: a valid file really parses, so the
/// property tests above are not vacuously satisfied by every input erroring.
#[test]
fn valid_lines_parse() {
    let src = "a[i] = b[i] * -2\nc[i, j] += a[i] - -3 // DIMS(j)\ntf.f(x)\ny\nRANK(t) IN [1, 3]\n";
    let file = parse_file(src).expect("valid file");
    assert_eq!(file.program.len(), 2);
    assert!(file.call.is_some() && file.outputs.is_some());
    assert_eq!(file.constraints.len(), 1);
}
