//! Array values exchanged between the interpreter, the backends and the
//! user: a row-major buffer with a shape and an element type. INT is i32;
//! FLOAT is f64, or f32 when a program runs with `--float f32`.
//!
//! `.npy` files (NPY v1.0, C order, `<i4`, `<f8`, `<f4`) are read and
//! written by the runtime's `npy` module.

use eintup_runtime::{npy, HostData, HostDataRef, HostTensor};
use std::fmt;
use std::io;
use std::path::Path;

/// The element buffer; its variant is the element type.
#[derive(Clone, Debug, PartialEq)]
pub enum Data {
    Int(Vec<i32>),
    F64(Vec<f64>),
    F32(Vec<f32>),
}

impl Default for Data {
    fn default() -> Data {
        Data::Int(Vec::new())
    }
}

/// Element type of a buffer, as the user sees it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ElemKind {
    Int,
    F64,
    F32,
}

impl ElemKind {
    /// NPY type string.
    pub fn npy(self) -> &'static str {
        match self {
            ElemKind::Int => "<i4",
            ElemKind::F64 => "<f8",
            ElemKind::F32 => "<f4",
        }
    }

    /// Name in messages and printed headers: `INT`, `FLOAT(f64)`, `FLOAT(f32)`.
    pub fn text(self) -> &'static str {
        match self {
            ElemKind::Int => "INT",
            ElemKind::F64 => "FLOAT(f64)",
            ElemKind::F32 => "FLOAT(f32)",
        }
    }

    pub fn is_float(self) -> bool {
        !matches!(self, ElemKind::Int)
    }
}

#[derive(Clone, Debug, Default, PartialEq)]
pub struct Tensor {
    pub shape: Vec<usize>,
    pub data: Data,
}

impl Tensor {
    /// A zero-filled tensor. Returns `None` when the element count overflows.
    pub fn zeros(kind: ElemKind, shape: &[usize]) -> Option<Tensor> {
        let n = element_count(shape)?;
        let data = match kind {
            ElemKind::Int => Data::Int(vec![0; n]),
            ElemKind::F64 => Data::F64(vec![0.0; n]),
            ElemKind::F32 => Data::F32(vec![0.0; n]),
        };
        Some(Tensor { shape: shape.to_vec(), data })
    }

    pub fn kind(&self) -> ElemKind {
        match self.data {
            Data::Int(_) => ElemKind::Int,
            Data::F64(_) => ElemKind::F64,
            Data::F32(_) => ElemKind::F32,
        }
    }

    pub fn len(&self) -> usize {
        match &self.data {
            Data::Int(v) => v.len(),
            Data::F64(v) => v.len(),
            Data::F32(v) => v.len(),
        }
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Element `i` widened to f64 (exact for i32 and f32).
    pub fn get_f64(&self, i: usize) -> Option<f64> {
        match &self.data {
            Data::Int(v) => v.get(i).map(|&x| x as f64),
            Data::F64(v) => v.get(i).copied(),
            Data::F32(v) => v.get(i).map(|&x| x as f64),
        }
    }

    /// All elements widened to f64 (for comparisons in tests and tools).
    pub fn to_f64_vec(&self) -> Vec<f64> {
        (0..self.len()).filter_map(|i| self.get_f64(i)).collect()
    }

    /// The same values with FLOAT stored at the given width; INT unchanged.
    pub fn with_float_width(self, f32: bool) -> Tensor {
        let data = match (self.data, f32) {
            (Data::F64(v), true) => Data::F32(v.into_iter().map(|x| x as f32).collect()),
            (Data::F32(v), false) => Data::F64(v.into_iter().map(|x| x as f64).collect()),
            (d, _) => d,
        };
        Tensor { shape: self.shape, data }
    }

    /// Reads a `.npy` file (the runtime's reader: `<i4`, `<f8`, `<f4`, C
    /// order). The error is a one-line reason without the path.
    pub fn read_npy(path: &Path) -> Result<Tensor, String> {
        npy::read(path).map(Tensor::from)
    }

    pub fn from_npy_bytes(bytes: &[u8]) -> Result<Tensor, String> {
        npy::from_bytes(bytes).map(Tensor::from)
    }

    /// Writes NPY v1.0, C order.
    pub fn write_npy(&self, path: &Path) -> io::Result<()> {
        let data = match &self.data {
            Data::Int(v) => HostDataRef::I32(v),
            Data::F32(v) => HostDataRef::F32(v),
            Data::F64(v) => HostDataRef::F64(v),
        };
        npy::write_data(path, &self.shape, data)
    }
}

/// The runtime's tensors carry the same three element types.
impl From<&Tensor> for HostTensor {
    fn from(t: &Tensor) -> HostTensor {
        let data = match &t.data {
            Data::Int(v) => HostData::I32(v.clone()),
            Data::F32(v) => HostData::F32(v.clone()),
            Data::F64(v) => HostData::F64(v.clone()),
        };
        HostTensor { dtype: data.dtype(), shape: t.shape.clone(), data }
    }
}

impl From<HostTensor> for Tensor {
    fn from(h: HostTensor) -> Tensor {
        let data = match h.data {
            HostData::I32(v) => Data::Int(v),
            HostData::F32(v) => Data::F32(v),
            HostData::F64(v) => Data::F64(v),
        };
        Tensor { shape: h.shape, data }
    }
}

/// Product of the dims, `None` on overflow.
pub fn element_count(shape: &[usize]) -> Option<usize> {
    shape.iter().try_fold(1usize, |n, &d| n.checked_mul(d))
}

/// Shape written like `[2, 3]`.
pub fn shape_text(shape: &[usize]) -> String {
    format!("[{}]", shape.iter().map(|d| d.to_string()).collect::<Vec<_>>().join(", "))
}

/// Nested-bracket text, numpy style: `[[1, 2], [3, 4]]` (rank 0: the value).
impl fmt::Display for Tensor {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let elem = |i: usize| -> String {
            match &self.data {
                Data::Int(v) => v[i].to_string(),
                Data::F64(v) => format!("{:?}", v[i]),
                Data::F32(v) => format!("{:?}", v[i]),
            }
        };
        fn rec(f: &mut fmt::Formatter<'_>, shape: &[usize], start: usize, depth: usize, elem: &dyn Fn(usize) -> String) -> fmt::Result {
            let Some((&d, rest)) = shape.split_first() else {
                return write!(f, "{}", elem(start));
            };
            let inner = element_count(rest).unwrap_or(0);
            write!(f, "[")?;
            for k in 0..d {
                if k > 0 {
                    if rest.is_empty() {
                        write!(f, ", ")?;
                    } else {
                        write!(f, ",\n{}", " ".repeat(depth + 1))?;
                    }
                }
                rec(f, rest, start + k * inner, depth + 1, elem)?;
            }
            write!(f, "]")
        }
        rec(f, &self.shape, 0, 0, &elem)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn npy_round_trip_all_types() {
        let dir = std::env::temp_dir().join(format!("eintup-tensor-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let cases = [
            Tensor { shape: vec![2, 3], data: Data::Int(vec![1, -2, 3, 4, 5, i32::MIN]) },
            Tensor { shape: vec![3], data: Data::F64(vec![0.5, -1e300, 7.0]) },
            Tensor { shape: vec![], data: Data::F32(vec![2.5]) },
            Tensor { shape: vec![2, 0, 4], data: Data::F64(vec![]) },
        ];
        for (i, t) in cases.iter().enumerate() {
            let p = dir.join(format!("t{i}.npy"));
            t.write_npy(&p).unwrap();
            let bytes = std::fs::read(&p).unwrap();
            // NPY v1.0 magic and version bytes.
            assert_eq!(&bytes[..8], b"\x93NUMPY\x01\x00");
            let header = String::from_utf8_lossy(&bytes[10..]).to_string();
            assert!(header.contains(&format!("'descr': '{}'", t.kind().npy())), "{header}");
            assert!(header.contains("'fortran_order': False"), "{header}");
            assert_eq!(&Tensor::read_npy(&p).unwrap(), t);
        }
        std::fs::remove_dir_all(&dir).ok();
    }

    #[test]
    fn display_nested() {
        let t = Tensor { shape: vec![2, 2], data: Data::Int(vec![1, 2, 3, 4]) };
        assert_eq!(t.to_string(), "[[1, 2],\n [3, 4]]");
        let s = Tensor { shape: vec![], data: Data::F64(vec![1.5]) };
        assert_eq!(s.to_string(), "1.5");
        let z = Tensor { shape: vec![0, 3], data: Data::Int(vec![]) };
        assert_eq!(z.to_string(), "[]");
    }
}
