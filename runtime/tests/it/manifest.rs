//! manifest.json parsing and validation: the fixture is accepted, and each
//! kind of mistake is rejected with its own error and a message naming it.

use crate::common;

use eintup_runtime::manifest::{Init, Role, Step};
use eintup_runtime::{DType, Error, Manifest};
use serde_json::{json, Value};

fn parse(v: &Value) -> Result<Manifest, Error> {
    Manifest::parse(&v.to_string())
}

/// Applies `edit` to the fixture and expects BadManifest mentioning `needle`.
fn rejected(edit: impl FnOnce(&mut Value), needle: &str) {
    let mut v = common::manifest_value();
    edit(&mut v);
    match parse(&v) {
        Err(Error::BadManifest(msg)) => assert!(msg.contains(needle), "message {msg:?} lacks {needle:?}"),
        other => panic!("expected BadManifest containing {needle:?}, got {other:?}"),
    }
}

#[test]
fn fixture_parses_with_its_fields() {
    let m = parse(&common::manifest_value()).unwrap();
    assert_eq!(m.format_version, 1);
    assert_eq!(m.target.arch, "sm_80");
    assert_eq!(m.target_arch().unwrap(), (8, 0));
    assert_eq!(m.buffers.len(), 4);
    let x = m.buffer("x").unwrap();
    assert_eq!((x.dtype, x.shape.clone(), x.role), (DType::F32, vec![common::N], Role::Input));
    assert!(matches!(&x.init, Init::Input { random: Some(r) } if r.hi == "10" && r.ty == "FLOAT"));
    let e = m.buffer("e").unwrap();
    assert_eq!((e.len(), e.byte_size()), (0, Some(0)));
    assert_eq!(m.kernel("noop").unwrap().registers, None);
    assert_eq!(m.kernel("add_one").unwrap().registers, Some(10));
    assert_eq!(m.inputs().map(|b| b.name.as_str()).collect::<Vec<_>>(), ["x"]);
    assert!(m.steps[2].is_empty_launch());
    assert!(!m.steps[1].is_empty_launch());
    assert!(matches!(&m.steps[0], Step::Fill { buffer, value: 0 } if buffer == "z"));
}

#[test]
fn the_issue_example_parses() {
    // The example of the bundle format description, with its kernel.
    let text = r#"{
      "format_version": 1,
      "producer": "eintup 0.1.0",
      "source": {"name": "conv_valid.et", "text": "<the .et program>"},
      "config": {"seed": 0, "float": "f64", "eintups": {"batch": [2], "ipos": [8]}},
      "target": {"arch": "sm_80", "ptx_version": "7.0"},
      "buffers": [
        {"name": "w", "dtype": "f64", "shape": [6, 1, 1], "role": "input", "init": {"kind": "input"}},
        {"name": "x", "dtype": "f64", "shape": [2, 8, 1], "role": "input",
         "init": {"kind": "input", "random": {"lo": "0", "hi": "10", "type": "FLOAT"}}},
        {"name": "y", "dtype": "f64", "shape": [2, 3, 1], "role": "output", "init": {"kind": "zero"}}
      ],
      "kernels": [{"name": "s2_y", "params": ["w", "x", "y"], "registers": 40, "spill_stores": 0, "spill_loads": 0}],
      "steps": [
        {"op": "fill", "buffer": "y", "value": 0},
        {"op": "launch", "kernel": "s2_y", "grid": [1, 1, 1], "block": [256, 1, 1], "args": ["w", "x", "y"]}
      ]
    }"#;
    let m = Manifest::parse(text).unwrap();
    assert_eq!(m.config.float, DType::F64);
    assert_eq!(m.config.eintups["ipos"], vec![8]);
    assert_eq!(m.buffer("y").unwrap().byte_size(), Some(2 * 3 * 8));
}

#[test]
fn serialised_manifest_parses_back_equal() {
    let m = parse(&common::manifest_value()).unwrap();
    let again = Manifest::parse(&m.to_json().unwrap()).unwrap();
    assert_eq!(m, again);
}

#[test]
fn unknown_fields_are_ignored() {
    let mut v = common::manifest_value();
    v["comment"] = json!("added by a later producer");
    v["buffers"][0]["layout"] = json!("row-major");
    assert!(parse(&v).is_ok());
}

#[test]
fn random_may_be_absent() {
    let mut v = common::manifest_value();
    v["buffers"][0]["init"] = json!({"kind": "input"});
    assert!(matches!(parse(&v).unwrap().buffers[0].init, Init::Input { random: None }));
}

#[test]
fn other_format_version_is_unsupported() {
    let mut v = common::manifest_value();
    v["format_version"] = json!(3);
    // Even with fields a version-3 manifest might not have, the version is
    // what is reported.
    v.as_object_mut().unwrap().remove("steps");
    match parse(&v) {
        Err(Error::UnsupportedVersion { found: 3, supported: 2 }) => {}
        other => panic!("{other:?}"),
    }
    let msg = Error::UnsupportedVersion { found: 3, supported: 2 }.to_string();
    assert_eq!(msg, "bundle format_version 3 is not supported (this runtime reads versions 1 to 2)");
    // Version 0 never existed.
    v["format_version"] = json!(0);
    assert!(matches!(parse(&v), Err(Error::UnsupportedVersion { found: 0, .. })));
}

#[test]
fn dim_parameters_need_format_2_and_a_value_per_dim() {
    let mut v = common::manifest_value();
    let kernel = v["kernels"][0]["name"].as_str().unwrap().to_string();
    v["kernels"][0]["dims"] = json!(["n.0"]);
    // Version 1 has no dims.
    let Err(Error::BadManifest(m)) = parse(&v) else { panic!("accepted dims in version 1") };
    assert!(m.contains("need format_version 2"), "{m}");
    v["format_version"] = json!(2);
    // Every launch of the kernel must pass one value per dim.
    let Err(Error::BadManifest(m)) = parse(&v) else { panic!("accepted a launch without its dims") };
    assert!(m.contains(&format!("kernel `{kernel}` takes 1 dims (n.0), the launch passes 0")), "{m}");
    for s in v["steps"].as_array_mut().unwrap() {
        if s["op"] == "launch" {
            s["dims"] = json!([-1]);
        }
    }
    let Err(Error::BadManifest(m)) = parse(&v) else { panic!("accepted a negative dim") };
    assert!(m.contains("dims are non-negative"), "{m}");
}

#[test]
fn not_json_or_missing_version() {
    assert!(matches!(Manifest::parse("{ not json"), Err(Error::BadManifest(_))));
    rejected(|v| drop(v.as_object_mut().unwrap().remove("format_version")), "format_version");
    rejected(|v| v["format_version"] = json!("1"), "invalid type");
}

#[test]
fn missing_and_mistyped_fields() {
    rejected(|v| drop(v.as_object_mut().unwrap().remove("buffers")), "missing field `buffers`");
    rejected(|v| v["buffers"][0]["dtype"] = json!("f16"), "unknown variant `f16`");
    rejected(|v| v["buffers"][0]["role"] = json!("scratch"), "unknown variant `scratch`");
    rejected(|v| v["buffers"][1]["init"] = json!({"kind": "ones"}), "unknown variant `ones`");
    rejected(|v| v["steps"][0]["op"] = json!("copy"), "unknown variant `copy`");
    rejected(|v| v["steps"][1]["grid"] = json!([1, 1]), "invalid length 2");
    rejected(|v| v["steps"][1]["block"] = json!([-1, 1, 1]), "invalid value");
}

#[test]
fn negative_dimension() {
    rejected(|v| v["buffers"][2]["shape"] = json!([4, -2]), "negative dimension -2");
}

#[test]
fn size_overflow() {
    // 2^40 * 2^40 elements overflow usize; 2^61 f64 elements overflow bytes.
    rejected(|v| v["buffers"][2]["shape"] = json!([1u64 << 40, 1u64 << 40]), "buffer `z`: shape");
    rejected(
        |v| {
            v["buffers"][2]["dtype"] = json!("f64");
            v["buffers"][2]["shape"] = json!([1u64 << 61]);
        },
        "too large",
    );
}

#[test]
fn duplicate_names() {
    rejected(|v| v["buffers"][1]["name"] = json!("x"), "buffer `x` is declared twice");
    rejected(|v| v["kernels"][1]["name"] = json!("add_one"), "kernel `add_one` is declared twice");
    rejected(|v| v["kernels"][0]["params"] = json!(["a", "a"]), "parameter `a` is listed twice");
    rejected(|v| v["buffers"][1]["name"] = json!(""), "buffer name \"\" is not an identifier");
}

/// A buffer's name becomes `etrun --out`'s file name and terminal text
/// (issue #49 items 2 and 8): the compiler's rule for array names.
#[test]
fn buffer_names_are_identifiers() {
    for bad in ["../x", "/abs/p", "a.b", "y\u{1b}[2J", "bell\u{7}"] {
        rejected(|v| v["buffers"][1]["name"] = json!(bad), &format!("buffer name {bad:?} is not an identifier"));
    }
}

#[test]
fn steps_refer_to_known_things() {
    rejected(|v| v["steps"][0]["buffer"] = json!("w"), "step 0: fill of unknown buffer `w`");
    rejected(|v| v["steps"][1]["kernel"] = json!("sub_one"), "step 1: launch of unknown kernel `sub_one`");
    rejected(|v| v["steps"][3]["args"] = json!(["y", "q"]), "step 3: launch of `add_one` passes unknown buffer `q`");
}

#[test]
fn args_match_params() {
    rejected(|v| v["steps"][1]["args"] = json!(["x"]), "step 1: kernel `add_one` takes 2 arguments (src, dst), the launch passes 1");
}

#[test]
fn fill_value_must_be_zero() {
    rejected(|v| v["steps"][0]["value"] = json!(1), "fills with 0 only");
}

#[test]
fn target_forms() {
    for arch in ["sm80", "compute_80", "sm_90a", "sm_8"] {
        rejected(|v| v["target"]["arch"] = json!(arch), "is not of the form sm_NN");
    }
    rejected(|v| v["target"]["ptx_version"] = json!("7"), "MAJOR.MINOR");
}

#[test]
fn role_and_init_agree() {
    rejected(|v| v["buffers"][0]["init"] = json!({"kind": "zero"}), "buffer `x`: role input needs init kind input");
    rejected(|v| v["buffers"][2]["init"] = json!({"kind": "input"}), "buffer `z`: role output needs init kind zero");
}

#[test]
fn float_config_is_a_float_type() {
    rejected(|v| v["config"]["float"] = json!("i32"), "config.float is i32");
}

#[test]
fn kernel_names_are_ptx_identifiers() {
    rejected(|v| v["kernels"][1]["name"] = json!("no-op"), "not a PTX identifier");
}

#[test]
fn launch_dimensions_within_cuda_limits() {
    rejected(|v| v["steps"][1]["block"] = json!([1024, 2, 1]), "2048 threads, more than 1024");
    rejected(|v| v["steps"][1]["block"] = json!([1, 1, 65]), "exceeds the CUDA limit");
    rejected(|v| v["steps"][1]["grid"] = json!([1, 65536, 1]), "exceeds the CUDA limit");
    // Exactly at the limits is fine, and so is an empty grid (skipped).
    let mut v = common::manifest_value();
    v["steps"][1]["grid"] = json!([2147483647u32, 65535, 65535]);
    v["steps"][1]["block"] = json!([1024, 1, 1]);
    v["steps"][3]["block"] = json!([0, 0, 0]);
    assert!(parse(&v).is_ok());
}

#[test]
fn generators_parse_and_are_validated() {
    let m = parse(&common::manifest_with_generator()).unwrap();
    assert_eq!(m.generate.len(), 1);
    assert_eq!(m.generator("x").map(|g| g.steps.len()), Some(1));
    assert!(m.generator("z").is_none());
    // Written back, the section survives; absent, it is not written at all.
    assert_eq!(parse(&serde_json::from_str(&m.to_json().unwrap()).unwrap()).unwrap(), m);
    assert!(!parse(&common::manifest_value()).unwrap().to_json().unwrap().contains("generate"));

    let with = |edit: fn(&mut Value), needle: &str| {
        let mut v = common::manifest_with_generator();
        edit(&mut v);
        match parse(&v) {
            Err(Error::BadManifest(msg)) => assert!(msg.contains(needle), "message {msg:?} lacks {needle:?}"),
            other => panic!("expected BadManifest containing {needle:?}, got {other:?}"),
        }
    };
    with(|v| v["generate"][0]["buffer"] = json!("nope"), "generate: unknown buffer `nope`");
    with(|v| v["generate"][0]["buffer"] = json!("z"), "generate: buffer `z` is not an input");
    with(
        |v| {
            let g = v["generate"][0].clone();
            v["generate"].as_array_mut().unwrap().push(g)
        },
        "buffer `x` has two generators",
    );
    with(|v| v["generate"][0]["steps"][0]["kernel"] = json!("gone"), "generate `x` step 0: launch of unknown kernel `gone`");
    with(|v| v["generate"][0]["steps"][0]["args"] = json!(["y"]), "generate `x` step 0: kernel `add_one` takes 2 arguments");
    with(|v| v["generate"][0]["steps"][0]["block"] = json!([2048, 1, 1]), "generate `x` step 0: launch of `add_one`: block");
}

/// All buffers together may hold at most 4 GiB (MAX_BUNDLE_BYTES, the
/// compiler's memory limit): a shape of 2^40 is refused when the manifest
/// is read, not by an allocation.
#[test]
fn buffers_beyond_the_memory_limit_are_refused() {
    // x and y (f32, N each) then z of 2^40 f32 elements
    let total = 2 * 4 * common::N as u64 + 4 * (1u64 << 40);
    rejected(|v| v["buffers"][2]["shape"] = json!([1u64 << 40]), &format!("brings the buffers to {total} bytes, more than the limit of 4294967296"));
    // 4 GiB in all is accepted: z takes what x and y leave (f32 elements).
    let n = common::N as u64;
    let rest = ((4u64 << 30) - 2 * 4 * n) / 4;
    let mut v = common::manifest_value();
    v["buffers"][2]["shape"] = json!([rest]);
    v["buffers"][2]["dtype"] = json!("f32");
    parse(&v).unwrap();
    v["buffers"][2]["shape"] = json!([rest + 1]);
    assert!(parse(&v).is_err());
}

/// A manifest may have at most MAX_STEPS steps, its generators' included:
/// a hand-made one of millions of launches is refused when it is read.
#[test]
fn steps_beyond_the_limit_are_refused() {
    use eintup_runtime::manifest::MAX_STEPS;
    let mut v = common::manifest_with_generator();
    let step = v["steps"][1].clone();
    let generator_steps = v["generate"][0]["steps"].as_array().unwrap().len();
    v["steps"] = Value::Array(vec![step.clone(); MAX_STEPS - generator_steps]);
    parse(&v).unwrap();
    v["steps"].as_array_mut().unwrap().push(step);
    match parse(&v) {
        Err(Error::BadManifest(msg)) => assert_eq!(msg, "100001 steps (generators included), more than the limit of 100000"),
        other => panic!("{other:?}"),
    }
}

/// `param_types` records the buffer each kernel parameter was compiled
/// for; a launch must pass a buffer of that element type with at least
/// that many elements.
#[test]
fn launches_must_fit_the_kernels_param_types() {
    let n = common::N as u64;
    let typed = |v: &mut Value| v["kernels"][0]["param_types"] = json!([{"dtype": "f32", "elements": n}, {"dtype": "f32", "elements": n}]);
    let mut v = common::manifest_value();
    typed(&mut v);
    parse(&v).unwrap();
    rejected(
        |v| {
            typed(v);
            v["buffers"][2]["shape"] = json!([n - 1]);
        },
        &format!(
            "step 3: launch of `add_one` passes buffer `z` of {} elements (shape [{}]) for parameter `dst`, compiled for a buffer of {n} elements",
            n - 1,
            n - 1
        ),
    );
    rejected(
        |v| {
            typed(v);
            v["buffers"][1]["dtype"] = json!("i32");
        },
        "step 1: launch of `add_one` passes buffer `y` of i32 for parameter `dst`, compiled for f32",
    );
    rejected(|v| v["kernels"][0]["param_types"] = json!([{"dtype": "f32", "elements": n}]), "kernel `add_one`: 2 parameters but 1 param_types");
    // A larger buffer than compiled for is refused too (issue #49 item 7):
    // the kernel would stay inside, but the cells past its own would be
    // returned unwritten.
    rejected(
        |v| {
            typed(v);
            v["buffers"][2]["shape"] = json!([n + 1]);
        },
        &format!("passes buffer `z` of {} elements (shape [{}]) for parameter `dst`, compiled for a buffer of {n} elements", n + 1, n + 1),
    );
}
