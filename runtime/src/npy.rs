//! `.npy` files (NPY v1.0, C order, `<i4`, `<f4`, `<f8`) for host tensors,
//! through the `npyz` crate. The one reader and writer of the project: the
//! compiler's tensors and `etrun` both go through it.

use npyz::WriterBuilder;
use std::io;
use std::path::Path;

use crate::tensor::{element_count, Data, Tensor};

/// Reads a `.npy` file with element type `<i4`, `<f8` or `<f4` in C order
/// (Fortran order is accepted for at most one dimension, where it is the
/// same layout). The error is a one-line reason without the path.
pub fn read(path: &Path) -> Result<Tensor, String> {
    let bytes = std::fs::read(path).map_err(|e| format!("cannot read file: {e}"))?;
    from_bytes(&bytes)
}

/// [`read`] on the bytes of a file.
pub fn from_bytes(bytes: &[u8]) -> Result<Tensor, String> {
    let npy = npyz::NpyFile::new(bytes).map_err(|e| format!("not a valid .npy file: {e}"))?;
    let shape: Vec<usize> = npy
        .shape()
        .iter()
        .map(|&d| usize::try_from(d).map_err(|_| "shape too large".to_string()))
        .collect::<Result<_, _>>()?;
    if npy.order() == npyz::Order::Fortran && shape.iter().filter(|&&d| d > 1).count() > 1 {
        return Err("Fortran-order arrays are not supported; save with np.ascontiguousarray".into());
    }
    let ty = match npy.dtype() {
        npyz::DType::Plain(t) => t.to_string(),
        other => return Err(format!("unsupported dtype {}", other.descr())),
    };
    let bad = |e: io::Error| format!("cannot read data: {e}");
    let data = match ty.as_str() {
        "<i4" => Data::I32(npy.into_vec::<i32>().map_err(bad)?),
        "<f8" => Data::F64(npy.into_vec::<f64>().map_err(bad)?),
        "<f4" => Data::F32(npy.into_vec::<f32>().map_err(bad)?),
        other => {
            return Err(format!(
                "unsupported element type `{other}`; expected `<i4` (INT), `<f8` or `<f4` (FLOAT) \
                 (numpy: .astype(np.int32) / .astype(np.float64))"
            ))
        }
    };
    if Some(data.len()) != element_count(&shape) {
        return Err("the data length does not match the shape".into());
    }
    Ok(Tensor { shape, data })
}

/// Writes NPY v1.0, C order.
pub fn write(path: &Path, t: &Tensor) -> io::Result<()> {
    let file = io::BufWriter::new(std::fs::File::create(path)?);
    let shape: Vec<u64> = t.shape.iter().map(|&d| d as u64).collect();
    match &t.data {
        Data::I32(v) => write_all(file, &shape, v),
        Data::F64(v) => write_all(file, &shape, v),
        Data::F32(v) => write_all(file, &shape, v),
    }
}

fn write_all<T: npyz::AutoSerialize + Copy, W: io::Write>(w: W, shape: &[u64], v: &[T]) -> io::Result<()> {
    let mut writer = npyz::WriteOptions::new().default_dtype().shape(shape).writer(w).begin_nd()?;
    writer.extend(v.iter().copied())?;
    writer.finish()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trip_all_types() {
        let dir = std::env::temp_dir().join(format!("etrt-npy-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let cases = [
            Tensor::new(vec![2, 3], Data::I32(vec![1, -2, 3, 4, 5, i32::MIN])).unwrap(),
            Tensor::new(vec![3], Data::F64(vec![0.5, -1e300, 7.0])).unwrap(),
            Tensor::new(vec![], Data::F32(vec![2.5])).unwrap(),
            Tensor::new(vec![2, 0, 4], Data::F64(vec![])).unwrap(),
        ];
        for (i, t) in cases.iter().enumerate() {
            let p = dir.join(format!("t{i}.npy"));
            write(&p, t).unwrap();
            let bytes = std::fs::read(&p).unwrap();
            // NPY v1.0 magic and version bytes.
            assert_eq!(&bytes[..8], b"\x93NUMPY\x01\x00");
            let header = String::from_utf8_lossy(&bytes[10..]).to_string();
            let descr = ["<i4", "<f8", "<f4", "<f8"][i];
            assert!(header.contains(&format!("'descr': '{descr}'")), "{header}");
            assert!(header.contains("'fortran_order': False"), "{header}");
            assert_eq!(&read(&p).unwrap(), t);
        }
        std::fs::remove_dir_all(&dir).ok();
    }

    #[test]
    fn rejects_other_dtypes_and_garbage() {
        let mut buf = Vec::new();
        {
            let mut w = npyz::WriteOptions::new().default_dtype().shape(&[2]).writer(&mut buf).begin_nd().unwrap();
            w.extend([1i64, 2]).unwrap();
            w.finish().unwrap();
        }
        let e = from_bytes(&buf).unwrap_err();
        assert!(e.contains("<i8"), "{e}");
        assert!(from_bytes(b"hello").is_err());
    }
}
