//! Checks made before any launch: inputs against the manifest, the bundle's
//! target against the device; and host tensors themselves.

use crate::common;

use std::collections::BTreeMap;

use eintup_runtime::check::{check_inputs, check_target};
use eintup_runtime::tensor::BytesError;
use eintup_runtime::{DType, Data, Error, Manifest, Tensor};
use serde_json::json;

fn manifest() -> Manifest {
    Manifest::parse(&common::manifest_value().to_string()).unwrap()
}

fn good_x() -> Tensor {
    Tensor::new(vec![common::N], Data::F32(common::x_values())).unwrap()
}

fn inputs(pairs: Vec<(&str, Tensor)>) -> BTreeMap<String, Tensor> {
    pairs.into_iter().map(|(n, t)| (n.to_string(), t)).collect()
}

/// Expects `Input { name, reason }` with `reason` containing `needle`.
fn input_error(given: BTreeMap<String, Tensor>, name: &str, needle: &str) {
    match check_inputs(&manifest(), &given) {
        Err(Error::Input { name: n, reason }) => {
            assert_eq!(n, name);
            assert!(reason.contains(needle), "reason {reason:?} lacks {needle:?}");
        }
        other => panic!("expected Input error for {name}, got {other:?}"),
    }
}

#[test]
fn correct_inputs_pass() {
    check_inputs(&manifest(), &inputs(vec![("x", good_x())])).unwrap();
}

#[test]
fn missing_input() {
    input_error(BTreeMap::new(), "x", "not supplied (expected f32 of shape [1000])");
}

#[test]
fn unknown_name() {
    input_error(inputs(vec![("x", good_x()), ("w", good_x())]), "w", "no buffer of this name");
}

#[test]
fn non_input_buffers_cannot_be_supplied() {
    input_error(inputs(vec![("x", good_x()), ("z", good_x())]), "z", "is an output buffer, not an input");
    input_error(inputs(vec![("x", good_x()), ("y", good_x())]), "y", "is a temporary buffer, not an input");
}

#[test]
fn wrong_dtype() {
    let t = Tensor::new(vec![common::N], Data::F64(vec![0.0; common::N])).unwrap();
    input_error(inputs(vec![("x", t)]), "x", "dtype f64, expected f32");
}

#[test]
fn wrong_shape() {
    let t = Tensor::new(vec![10, 100], Data::F32(vec![0.0; common::N])).unwrap();
    input_error(inputs(vec![("x", t)]), "x", "shape [10, 100], expected [1000]");
}

#[test]
fn inconsistent_tensor() {
    let short = Tensor { shape: vec![common::N], data: Data::F32(vec![0.0; 999]) };
    input_error(inputs(vec![("x", short)]), "x", "holds 999 elements but shape [1000] needs 1000");
}

#[test]
fn error_message_names_the_input() {
    let e = Error::Input { name: "x".into(), reason: "not supplied".into() };
    assert_eq!(e.to_string(), "input `x`: not supplied");
}

#[test]
fn ptx_runs_on_same_or_newer_architectures() {
    let mut v = common::manifest_value();
    let m80 = manifest();
    check_target(&m80, (8, 0), "A100").unwrap();
    check_target(&m80, (8, 6), "RTX 3090").unwrap();
    check_target(&m80, (9, 0), "H100").unwrap();
    check_target(&m80, (12, 0), "B200").unwrap();
    v["target"]["arch"] = json!("sm_90");
    let m90 = Manifest::parse(&v.to_string()).unwrap();
    match check_target(&m90, (8, 0), "A100") {
        Err(e @ Error::Target { .. }) => {
            assert_eq!(e.to_string(), "bundle targets sm_90 but the device is sm_80 (A100); rebuild the bundle for this GPU")
        }
        other => panic!("{other:?}"),
    }
    v["target"]["arch"] = json!("sm_86");
    let m86 = Manifest::parse(&v.to_string()).unwrap();
    assert!(matches!(check_target(&m86, (8, 0), "A100"), Err(Error::Target { .. })));
    check_target(&m86, (8, 9), "L4").unwrap();
}

#[test]
fn host_data_bytes_round_trip() {
    let cases = [Data::I32(vec![0, -1, i32::MAX, i32::MIN]), Data::F32(vec![0.5, -3.25, f32::INFINITY]), Data::F64(vec![1e300, -0.0, 2.5])];
    for d in cases {
        let bytes = d.as_ne_bytes();
        assert_eq!(bytes.len(), d.len() * d.dtype().size());
        assert_eq!(Data::from_ne_bytes(d.dtype(), bytes).as_ref(), Ok(&d));
    }
    // Bytes are native order: 1.0f32 is 0x3F800000.
    assert_eq!(Data::F32(vec![1.0]).as_ne_bytes(), 0x3F80_0000u32.to_ne_bytes());
    assert_eq!(Data::from_ne_bytes(DType::F64, &[0; 12]), Err(BytesError::Ragged { bytes: 12, dtype: DType::F64 }));
}

#[test]
fn host_tensor_constructors() {
    assert!(Tensor::new(vec![2, 3], Data::I32(vec![0; 5])).is_none());
    let t = Tensor::new(vec![], Data::F64(vec![4.0])).unwrap();
    assert_eq!((t.dtype(), t.len()), (DType::F64, 1));
    let z = Tensor::zeros(DType::I32, &[2, 0, 4]).unwrap();
    assert!(z.is_empty());
    assert!(Tensor::zeros(DType::F32, &[usize::MAX, 2]).is_none());
}

#[test]
fn a_generated_input_may_be_left_out_or_supplied() {
    let m = Manifest::parse(&common::manifest_with_generator().to_string()).unwrap();
    check_inputs(&m, &BTreeMap::new()).unwrap();
    check_inputs(&m, &inputs(vec![("x", good_x())])).unwrap();
    // Supplied, it is checked like any input.
    let t = Tensor::new(vec![3], Data::F32(vec![0.0; 3])).unwrap();
    match check_inputs(&m, &inputs(vec![("x", t)])) {
        Err(Error::Input { name, reason }) => assert!(name == "x" && reason.contains("shape [3]"), "{reason}"),
        other => panic!("{other:?}"),
    }
}
