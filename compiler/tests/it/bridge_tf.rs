//! Real framework calls through `scripts/framework_call.py` and TensorFlow.
//!
//! Skipped, with the reason printed, when the repository's `.venv` cannot
//! import TensorFlow (`scripts/setup --with-tf` installs it). The skip is
//! decided by an import independent of the bridge, so a bridge that wrongly
//! reports "unavailable" fails here instead of skipping.
//!
//! One bridge process serves every call below, as in a `check` run; that
//! also tests that the server survives failed calls.

use eintup::check::bridge::{Bridge, BridgeError, BridgeLocation, CallArgValue, Literal, Request};
use eintup::driver::Failure;
use npyz::WriterBuilder;
use std::path::{Path, PathBuf};
use std::process::Command;

fn repo_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).parent().expect("compiler/ has a parent").to_path_buf()
}

/// Whether the venv imports TensorFlow, asked without the bridge.
fn tensorflow_importable(python: &Path) -> bool {
    Command::new(python).args(["-c", "import tensorflow"]).env("TF_CPP_MIN_LOG_LEVEL", "3").output().map(|o| o.status.success()).unwrap_or(false)
}

fn write_npy<T: npyz::AutoSerialize + Copy>(path: &Path, shape: &[u64], data: &[T]) {
    let file = std::fs::File::create(path).unwrap();
    let mut w = npyz::WriteOptions::new().default_dtype().shape(shape).writer(std::io::BufWriter::new(file)).begin_nd().unwrap();
    w.extend(data.iter().copied()).unwrap();
    w.finish().unwrap();
}

/// (dtype string such as "<f8", shape, data)
fn read_npy<T: npyz::Deserialize>(path: &Path) -> (String, Vec<u64>, Vec<T>) {
    let bytes = std::fs::read(path).unwrap();
    let npy = npyz::NpyFile::new(&bytes[..]).unwrap();
    let dtype = match npy.dtype() {
        npyz::DType::Plain(t) => t.to_string(),
        other => panic!("unexpected dtype {other:?}"),
    };
    let shape = npy.shape().to_vec();
    (dtype, shape, npy.into_vec::<T>().unwrap())
}

fn arr(p: &Path) -> CallArgValue {
    CallArgValue::Array { path: p.to_path_buf() }
}

fn request(func: &str, args: Vec<CallArgValue>, kwargs: Vec<(&str, CallArgValue)>, out: &Path) -> Request {
    Request { func: func.into(), args, kwargs: kwargs.into_iter().map(|(k, v)| (k.to_string(), v)).collect(), out_dir: out.to_path_buf(), gradient: None }
}

#[test]
fn tensorflow_calls_through_the_bridge() {
    let root = repo_root();
    let loc = BridgeLocation::from_repo_root(&root);
    let mut bridge = match Bridge::start(&loc) {
        Ok(b) => b,
        Err(Failure::Unavailable(why)) if !tensorflow_importable(&loc.python) => {
            eprintln!("SKIPPED tensorflow_calls_through_the_bridge: {why}");
            return;
        }
        Err(e) => panic!("TensorFlow imports in {} but the bridge did not start: {e:?}", loc.python.display()),
    };
    assert!(bridge.tf_version().starts_with('2'), "tf version {:?}", bridge.tf_version());

    // Arrays and results live in the bridge's private working directory.
    let dir = bridge.work_dir().to_path_buf();

    // --- matmul, f64: [[1,2,3],[4,5,6]] x [[7,8],[9,10],[11,12]]
    // = [[1*7+2*9+3*11, 1*8+2*10+3*12], [4*7+5*9+6*11, 4*8+5*10+6*12]]
    let (a, b) = (dir.join("a.npy"), dir.join("b.npy"));
    write_npy(&a, &[2, 3], &[1.0f64, 2.0, 3.0, 4.0, 5.0, 6.0]);
    write_npy(&b, &[3, 2], &[7.0f64, 8.0, 9.0, 10.0, 11.0, 12.0]);
    let out = dir.join("matmul");
    let paths = bridge.call(&request("tf.linalg.matmul", vec![arr(&a), arr(&b)], vec![], &out)).unwrap();
    assert_eq!(paths, vec![out.join("result_0.npy")]);
    let (dtype, shape, c) = read_npy::<f64>(&paths[0]);
    assert_eq!((dtype.as_str(), shape), ("<f8", vec![2, 2]));
    assert_eq!(c, vec![58.0, 64.0, 139.0, 154.0]);

    // --- meshgrid 'ij' of three int32 vectors: three outputs, dtype kept
    let (p, q, r) = (dir.join("p.npy"), dir.join("q.npy"), dir.join("r.npy"));
    let (pv, qv, rv) = ([1i32, 2], [3i32, 4, 5], [6i32]);
    write_npy(&p, &[2], &pv);
    write_npy(&q, &[3], &qv);
    write_npy(&r, &[1], &rv);
    let out = dir.join("meshgrid");
    let ij = CallArgValue::Literal { value: Literal::Str("ij".into()) };
    let paths = bridge.call(&request("tf.meshgrid", vec![arr(&p), arr(&q), arr(&r)], vec![("indexing", ij)], &out)).unwrap();
    assert_eq!(paths.len(), 3);
    let grids: Vec<_> = paths.iter().map(|x| read_npy::<i32>(x)).collect();
    for (k, (dtype, shape, data)) in grids.iter().enumerate() {
        assert_eq!((dtype.as_str(), shape.as_slice()), ("<i4", &[2u64, 3, 1][..]), "output {k}");
        // row-major over (i, j, l): output 0 repeats p[i], 1 q[j], 2 r[l]
        let mut want = Vec::new();
        for &x in &pv {
            for &y in &qv {
                for &z in &rv {
                    want.push([x, y, z][k]);
                }
            }
        }
        assert_eq!(data, &want, "output {k}");
    }

    // --- scatter_nd with a TENSOR shape: duplicates at index 0 accumulate
    let (idx, vals) = (dir.join("idx.npy"), dir.join("vals.npy"));
    write_npy(&idx, &[3, 1], &[0i32, 2, 0]);
    write_npy(&vals, &[3], &[1.0f64, 2.0, 3.0]);
    let out = dir.join("scatter");
    let req = request("tf.scatter_nd", vec![], vec![("indices", arr(&idx)), ("updates", arr(&vals)), ("shape", CallArgValue::Tensor { value: vec![4] })], &out);
    let paths = bridge.call(&req).unwrap();
    assert_eq!(read_npy::<f64>(&paths[0]), ("<f8".to_string(), vec![4], vec![1.0 + 3.0, 0.0, 2.0, 0.0]));

    // --- reduce_sum over a zero-sized axis and down to rank 0
    let (z, v) = (dir.join("z.npy"), dir.join("v.npy"));
    write_npy::<f64>(&z, &[2, 0], &[]);
    write_npy(&v, &[3], &[1.5f64, 2.5, -1.0]);
    let minus1 = || CallArgValue::Literal { value: Literal::Int(-1) };
    let paths = bridge.call(&request("tf.math.reduce_sum", vec![arr(&z)], vec![("axis", minus1())], &dir.join("rs0"))).unwrap();
    assert_eq!(read_npy::<f64>(&paths[0]), ("<f8".to_string(), vec![2], vec![0.0, 0.0]));
    let paths = bridge.call(&request("tf.math.reduce_sum", vec![arr(&v)], vec![("axis", minus1())], &dir.join("rs1"))).unwrap();
    assert_eq!(read_npy::<f64>(&paths[0]), ("<f8".to_string(), vec![], vec![3.0]));

    // --- errors are one clear line and leave the server running
    let e = bridge.call(&request("tf.linalg.no_such_op", vec![arr(&a)], vec![], &dir.join("e1"))).unwrap_err();
    match &e {
        BridgeError::Call(m) => assert!(m.contains("tf.linalg.no_such_op") && m.contains("unknown function") && !m.contains('\n'), "{m}"),
        other => panic!("expected a call error, got {other:?}"),
    }
    let e = bridge.call(&request("tf.linalg.matmul", vec![arr(&a), arr(&a)], vec![], &dir.join("e2"))).unwrap_err();
    match &e {
        BridgeError::Call(m) => assert!(m.contains("tf.linalg.matmul") && m.contains("InvalidArgumentError") && !m.contains('\n'), "{m}"),
        other => panic!("expected a call error, got {other:?}"),
    }
    let e = bridge.call(&request("os.system", vec![], vec![], &dir.join("e3"))).unwrap_err();
    assert!(matches!(&e, BridgeError::Call(m) if m.contains("refused: only TensorFlow operations")), "{e:?}");
    // a path outside the working directory never reaches the bridge
    let outside = std::env::temp_dir().join("eintup-bridge-tf-outside");
    let e = bridge.call(&request("tf.linalg.matmul", vec![arr(&a), arr(&b)], vec![], &outside)).unwrap_err();
    assert!(matches!(&e, BridgeError::Encode(m) if m.contains("outside the bridge's working directory")), "{e:?}");
    assert!(!outside.exists());
    let paths = bridge.call(&request("tf.linalg.matmul", vec![arr(&a), arr(&b)], vec![], &dir.join("again"))).unwrap();
    assert_eq!(read_npy::<f64>(&paths[0]).2, vec![58.0, 64.0, 139.0, 154.0]);

    // dropping the bridge removes its working directory
    drop(bridge);
    assert!(!dir.exists());
}
