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
///
/// Only a regular file is read, and never more than it holds: a device
/// (`/dev/zero`), a FIFO or a directory is refused without reading (the
/// file is opened non-blocking, so a FIFO without a writer cannot hang the
/// reader), and nothing is allocated beyond the file's own size.
pub fn read(path: &Path) -> Result<Tensor, String> {
    // Bounded by the file's own size: from_bytes checks the header against it.
    let bytes = crate::infile::read_regular(path, u64::MAX).map_err(|e| match e {
        crate::infile::ReadError::NotRegular(kind) => format!("not a regular file ({kind}); give the path of a .npy file"),
        crate::infile::ReadError::Io(e) => format!("cannot read file: {e}"),
        other => other.to_string(),
    })?;
    from_bytes(&bytes)
}

/// [`read`] on the bytes of a file. The data after the header must be
/// exactly what the header's shape and element type need: a shorter file
/// is truncated, a longer one has trailing data, and both are refused
/// before any element is decoded (so nothing larger than `bytes` is ever
/// allocated).
pub fn from_bytes(bytes: &[u8]) -> Result<Tensor, String> {
    // The shape's element count is checked before npyz sees the header: its
    // own product of the dims has no overflow check.
    declared_elements(bytes)?;
    let mut data: &[u8] = bytes;
    let header = npyz::NpyHeader::from_reader(&mut data).map_err(|e| format!("not a valid .npy file: {e}"))?;
    let shape: Vec<usize> = header.shape().iter().map(|&d| usize::try_from(d).map_err(|_| "shape too large".to_string())).collect::<Result<_, _>>()?;
    if header.order() == npyz::Order::Fortran && shape.iter().filter(|&&d| d > 1).count() > 1 {
        return Err("Fortran-order arrays are not supported; save with np.ascontiguousarray".into());
    }
    let ty = match header.dtype() {
        npyz::DType::Plain(t) => t.to_string(),
        other => return Err(format!("unsupported dtype {}", other.descr())),
    };
    let width: u64 = match ty.as_str() {
        "<i4" | "<f4" => 4,
        "<f8" => 8,
        other => {
            return Err(format!(
                "unsupported element type `{other}`; expected `<i4` (INT), `<f8` or `<f4` (FLOAT) \
                 (numpy: .astype(np.int32) / .astype(np.float64))"
            ))
        }
    };
    let needed = header.len().checked_mul(width).ok_or_else(|| format!("shape {shape:?} is too large"))?;
    let held = data.len() as u64;
    if held < needed {
        return Err(format!("the file is truncated: shape {shape:?} of `{ty}` needs {needed} bytes of data, the file holds {held} after its header"));
    }
    if held > needed {
        return Err(format!("{} bytes of trailing data after the array (shape {shape:?} of `{ty}` needs {needed} bytes)", held - needed));
    }
    let npy = npyz::NpyFile::with_header(header, data);
    let bad = |e: io::Error| format!("cannot read data: {e}");
    let data = match ty.as_str() {
        "<i4" => Data::I32(npy.into_vec::<i32>().map_err(bad)?),
        "<f8" => Data::F64(npy.into_vec::<f64>().map_err(bad)?),
        _ => Data::F32(npy.into_vec::<f32>().map_err(bad)?),
    };
    if Some(data.len()) != element_count(&shape) {
        return Err("the data length does not match the shape".into());
    }
    Ok(Tensor { shape, data })
}

/// The element count of the shape in an NPY header, read from the header
/// text without a full parse: `Err` when the product of the dims overflows
/// 64 bits. A header whose shape cannot be found here is left to npyz,
/// which reports it (`Ok(None)`).
fn declared_elements(bytes: &[u8]) -> Result<Option<u64>, String> {
    let text_len = match (bytes.get(..8), bytes.get(6)) {
        (Some(m), Some(1)) if m.starts_with(b"\x93NUMPY") => bytes.get(8..10).map(|b| u16::from_le_bytes([b[0], b[1]]) as usize + 10),
        (Some(m), Some(2 | 3)) if m.starts_with(b"\x93NUMPY") => {
            bytes.get(8..12).map(|b| (u32::from_le_bytes([b[0], b[1], b[2], b[3]]) as usize).saturating_add(12))
        }
        _ => None,
    };
    let Some(header) = text_len.and_then(|end| bytes.get(..end)) else { return Ok(None) };
    let text = String::from_utf8_lossy(header);
    let Some(at) = text.find("'shape'").or_else(|| text.find("\"shape\"")) else { return Ok(None) };
    let rest = text[at + 7..].trim_start().strip_prefix(':').map(str::trim_start);
    let Some(rest) = rest.and_then(|r| r.strip_prefix('(').or_else(|| r.strip_prefix('['))) else { return Ok(None) };
    let Some(end) = rest.find([')', ']']) else { return Ok(None) };
    let mut n: u64 = 1;
    for part in rest[..end].split(',').map(str::trim).filter(|p| !p.is_empty()) {
        let Ok(d) = part.trim_end_matches(['L', 'l']).parse::<u64>() else { return Ok(None) };
        n = n.checked_mul(d).ok_or_else(|| format!("the header's shape ({}) has more than 2^64 elements", rest[..end].trim()))?;
    }
    Ok(Some(n))
}

/// Writes NPY v1.0, C order, as a new file replacing what is at `path`
/// ([`crate::outfile::replace`]: atomic, never through a link).
pub fn write(path: &Path, t: &Tensor) -> io::Result<()> {
    crate::outfile::replace(path, |f| write_to(f, t))
}

/// Writes NPY v1.0, C order, into `file`.
pub fn write_to(file: std::fs::File, t: &Tensor) -> io::Result<()> {
    let mut file = io::BufWriter::new(file);
    let shape: Vec<u64> = t.shape.iter().map(|&d| d as u64).collect();
    match &t.data {
        Data::I32(v) => write_all(&mut file, &shape, v),
        Data::F64(v) => write_all(&mut file, &shape, v),
        Data::F32(v) => write_all(&mut file, &shape, v),
    }?;
    // A full disk is an error here, not lost in a dropped BufWriter.
    io::Write::flush(&mut file)
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

    /// An NPY v1.0 file with this header dict and data, padded as numpy pads.
    fn npy_bytes(descr: &str, shape: &str, data: &[u8]) -> Vec<u8> {
        let mut header = format!("{{'descr': '{descr}', 'fortran_order': False, 'shape': {shape}, }}");
        while !(10 + header.len() + 1).is_multiple_of(64) {
            header.push(' ');
        }
        header.push('\n');
        let mut bytes = b"\x93NUMPY\x01\x00".to_vec();
        bytes.extend_from_slice(&(header.len() as u16).to_le_bytes());
        bytes.extend_from_slice(header.as_bytes());
        bytes.extend_from_slice(data);
        bytes
    }

    #[test]
    fn exact_data_is_read() {
        let t = from_bytes(&npy_bytes("<i4", "(2,)", &[1, 0, 0, 0, 2, 0, 0, 0])).unwrap();
        assert_eq!(t, Tensor::new(vec![2], Data::I32(vec![1, 2])).unwrap());
    }

    #[test]
    fn trailing_data_is_refused() {
        let e = from_bytes(&npy_bytes("<i4", "(2,)", &[1, 0, 0, 0, 2, 0, 0, 0, 9])).unwrap_err();
        assert!(e.contains("1 bytes of trailing data"), "{e}");
    }

    #[test]
    fn truncated_data_is_refused() {
        let e = from_bytes(&npy_bytes("<f8", "(3,)", &[0; 16])).unwrap_err();
        assert!(e.contains("needs 24 bytes of data, the file holds 16"), "{e}");
    }

    /// A header declaring more than any machine holds, with 16 bytes of
    /// data: refused from the sizes alone. (Had the reader reserved the
    /// declared 2^62 bytes first, this test would abort.)
    #[test]
    fn a_huge_declared_shape_allocates_nothing() {
        let e = from_bytes(&npy_bytes("<f8", "(576460752303423488,)", &[0; 16])).unwrap_err();
        assert!(e.contains("needs 4611686018427387904 bytes"), "{e}");
        // 4 GiB declared, as the reproducer
        let e = from_bytes(&npy_bytes("<f8", "(536870912,)", &[0; 16])).unwrap_err();
        assert!(e.contains("truncated"), "{e}");
    }

    /// npyz multiplies the dims without an overflow check (a panic in a
    /// debug build); the product is checked first.
    #[test]
    fn an_overflowing_shape_is_an_error() {
        let e = from_bytes(&npy_bytes("<f8", "(1099511627776, 1099511627776)", &[0; 16])).unwrap_err();
        assert!(e.contains("more than 2^64 elements"), "{e}");
        let e = from_bytes(&npy_bytes("<i4", "(4611686018427387904,)", &[])).unwrap_err();
        assert!(e.contains("too large"), "{e}");
    }

    #[test]
    fn only_regular_files_are_read() {
        let e = read(Path::new("/dev/zero")).unwrap_err();
        assert!(e.contains("not a regular file (a character device)"), "{e}");
        let dir = std::env::temp_dir().join(format!("etrt-npy-special-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let e = read(&dir).unwrap_err();
        assert!(e.contains("a directory"), "{e}");
        // A FIFO with no writer: opening it must not wait for one.
        let fifo = dir.join("fifo.npy");
        let c = std::ffi::CString::new(fifo.to_str().unwrap()).unwrap();
        assert_eq!(unsafe { libc::mkfifo(c.as_ptr(), 0o600) }, 0);
        let e = read(&fifo).unwrap_err();
        assert!(e.contains("a FIFO"), "{e}");
        std::fs::remove_dir_all(&dir).ok();
    }
}
