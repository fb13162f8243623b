//! Host-side tensors: what the compiler's interpreters and backends and the
//! runtime exchange. Data are row-major (the last dimension varies
//! fastest), exactly as a bundle's buffers are laid out on the device.

use serde::{Deserialize, Serialize};
use std::fmt;

use crate::zeroed::zeroed_vec;

/// Element type of a buffer or tensor.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum DType {
    I32,
    F32,
    F64,
}

impl DType {
    /// Size of one element in bytes.
    pub fn size(self) -> usize {
        match self {
            DType::I32 | DType::F32 => 4,
            DType::F64 => 8,
        }
    }

    /// Whether this is a floating-point type.
    pub fn is_float(self) -> bool {
        self != DType::I32
    }

    /// The manifest spelling (`"i32"`, `"f32"`, `"f64"`).
    pub fn name(self) -> &'static str {
        match self {
            DType::I32 => "i32",
            DType::F32 => "f32",
            DType::F64 => "f64",
        }
    }
}

impl fmt::Display for DType {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// The elements of a tensor, row-major.
#[derive(Clone, Debug, PartialEq)]
pub enum Data {
    I32(Vec<i32>),
    F32(Vec<f32>),
    F64(Vec<f64>),
}

impl Default for Data {
    fn default() -> Data {
        Data::I32(Vec::new())
    }
}

impl Data {
    /// The element type these data hold.
    pub fn dtype(&self) -> DType {
        match self {
            Data::I32(_) => DType::I32,
            Data::F32(_) => DType::F32,
            Data::F64(_) => DType::F64,
        }
    }

    /// Number of elements.
    pub fn len(&self) -> usize {
        match self {
            Data::I32(v) => v.len(),
            Data::F32(v) => v.len(),
            Data::F64(v) => v.len(),
        }
    }

    /// Whether there are no elements.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The elements as bytes in native order (what the device reads: CUDA
    /// hosts and GPUs are little-endian alike), without a copy: an upload of
    /// a large array costs no second host copy of it.
    pub fn as_ne_bytes(&self) -> &[u8] {
        fn bytes<T>(v: &[T]) -> &[u8] {
            // SAFETY: i32, f32 and f64 have no padding and every byte of
            // them is initialised; u8 has alignment 1; the length is the
            // slice's size in bytes.
            unsafe { std::slice::from_raw_parts(v.as_ptr().cast::<u8>(), std::mem::size_of_val(v)) }
        }
        match self {
            Data::I32(v) => bytes(v),
            Data::F32(v) => bytes(v),
            Data::F64(v) => bytes(v),
        }
    }

    /// Rebuilds data of `dtype` from native-order bytes: an error when the
    /// byte count is not a multiple of the element size, or when the
    /// memory cannot be allocated (a download of a huge buffer is an error
    /// with its size, not an abort).
    pub fn from_ne_bytes(dtype: DType, bytes: &[u8]) -> Result<Data, BytesError> {
        if !bytes.len().is_multiple_of(dtype.size()) {
            return Err(BytesError::Ragged { bytes: bytes.len(), dtype });
        }
        let mut d = Data::try_zeros(dtype, bytes.len() / dtype.size()).ok_or(BytesError::OutOfMemory { bytes: bytes.len() })?;
        fn fill<T>(v: &mut [T], bytes: &[u8]) {
            // SAFETY: as in `as_ne_bytes`; every bit pattern is a valid
            // i32, f32 or f64, and `v` holds exactly `bytes.len()` bytes.
            unsafe { std::slice::from_raw_parts_mut(v.as_mut_ptr().cast::<u8>(), std::mem::size_of_val(v)) }.copy_from_slice(bytes)
        }
        match &mut d {
            Data::I32(v) => fill(v, bytes),
            Data::F32(v) => fill(v, bytes),
            Data::F64(v) => fill(v, bytes),
        }
        Ok(d)
    }

    /// `len` zero elements of `dtype`, or `None` when the memory cannot be allocated
    /// (rather than aborting the process: a user's large array is a user
    /// error with its size, not a crash). The zeros are the allocator's,
    /// not written here (`zeroed`).
    pub fn try_zeros(dtype: DType, len: usize) -> Option<Data> {
        Some(match dtype {
            DType::I32 => Data::I32(zeroed_vec(len)?),
            DType::F32 => Data::F32(zeroed_vec(len)?),
            DType::F64 => Data::F64(zeroed_vec(len)?),
        })
    }
}

/// Why bytes did not become [`Data`].
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum BytesError {
    /// The byte count is no whole number of elements.
    Ragged {
        bytes: usize,
        dtype: DType,
    },
    OutOfMemory {
        bytes: usize,
    },
}

impl std::fmt::Display for BytesError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            BytesError::Ragged { bytes, dtype } => write!(f, "{bytes} bytes are no whole number of {dtype}"),
            BytesError::OutOfMemory { bytes } => write!(f, "cannot allocate {bytes} bytes of host memory"),
        }
    }
}

/// A dense row-major tensor in host memory: the one tensor type of the
/// project (the compiler's interpreters, its backends and the runtime all
/// exchange these). Its element type is that of its data.
///
/// The fields are public so that callers can build and take apart tensors
/// freely; [`Tensor::new`] and [`Tensor::check`] say whether shape and
/// data agree (the runtime checks every input with `check`).
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Tensor {
    pub shape: Vec<usize>,
    pub data: Data,
}

impl Tensor {
    /// `None` when the number of elements is not the product of `shape`.
    pub fn new(shape: Vec<usize>, data: Data) -> Option<Tensor> {
        let t = Tensor { shape, data };
        t.check().ok().map(|()| t)
    }

    /// An all-zero tensor; `None` when the element count overflows `usize`
    /// or the memory cannot be allocated.
    pub fn zeros(dtype: DType, shape: &[usize]) -> Option<Tensor> {
        let len = element_count(shape)?;
        Some(Tensor { shape: shape.to_vec(), data: Data::try_zeros(dtype, len)? })
    }

    /// The element type.
    pub fn dtype(&self) -> DType {
        self.data.dtype()
    }

    /// Number of elements (the length of `data`).
    pub fn len(&self) -> usize {
        self.data.len()
    }

    /// Whether the tensor has no elements.
    pub fn is_empty(&self) -> bool {
        self.data.is_empty()
    }

    /// Element `i` widened to f64 (exact for i32 and f32).
    pub fn get_f64(&self, i: usize) -> Option<f64> {
        match &self.data {
            Data::I32(v) => v.get(i).map(|&x| x as f64),
            Data::F64(v) => v.get(i).copied(),
            Data::F32(v) => v.get(i).map(|&x| x as f64),
        }
    }

    /// All elements widened to f64 (for comparisons in tests and tools).
    pub fn to_f64_vec(&self) -> Vec<f64> {
        (0..self.len()).filter_map(|i| self.get_f64(i)).collect()
    }

    /// The same values with floats stored at the given width; i32 unchanged.
    pub fn with_float_width(self, f32: bool) -> Tensor {
        let data = match (self.data, f32) {
            (Data::F64(v), true) => Data::F32(v.into_iter().map(|x| x as f32).collect()),
            (Data::F32(v), false) => Data::F64(v.into_iter().map(|x| x as f64).collect()),
            (d, _) => d,
        };
        Tensor { shape: self.shape, data }
    }

    /// Checks that `data` holds exactly `product(shape)` elements; the
    /// error is a reason phrase for the runtime's `Error::Input`.
    pub fn check(&self) -> Result<(), String> {
        match element_count(&self.shape) {
            Some(n) if n == self.data.len() => Ok(()),
            Some(n) => Err(format!("holds {} elements but shape {:?} needs {n}", self.data.len(), self.shape)),
            None => Err(format!("shape {:?} has more elements than fit in memory", self.shape)),
        }
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

/// Tensors with more elements than this print summarised (NumPy's
/// `threshold`): [`Tensor::summarized`].
pub const SUMMARY_THRESHOLD: usize = 1000;
/// Elements kept at each end of a summarised axis (NumPy's `edgeitems`).
pub const SUMMARY_EDGE_ITEMS: usize = 3;

impl Tensor {
    /// The nested-bracket text of `Display`, summarised as NumPy prints
    /// large arrays: above [`SUMMARY_THRESHOLD`] elements, every axis
    /// longer than `2 * SUMMARY_EDGE_ITEMS` shows its first and last
    /// [`SUMMARY_EDGE_ITEMS`] entries around `...`.
    pub fn summarized(&self) -> String {
        let edge = (self.len() > SUMMARY_THRESHOLD).then_some(SUMMARY_EDGE_ITEMS);
        let mut out = String::new();
        let _ = self.write_nested(&mut out, edge);
        out
    }

    fn write_nested(&self, f: &mut dyn fmt::Write, edge: Option<usize>) -> fmt::Result {
        let elem = |i: usize| -> String {
            match &self.data {
                Data::I32(v) => v[i].to_string(),
                Data::F64(v) => format!("{:?}", v[i]),
                Data::F32(v) => format!("{:?}", v[i]),
            }
        };
        fn rec(f: &mut dyn fmt::Write, shape: &[usize], start: usize, depth: usize, edge: Option<usize>, elem: &dyn Fn(usize) -> String) -> fmt::Result {
            let Some((&d, rest)) = shape.split_first() else {
                return write!(f, "{}", elem(start));
            };
            let inner = element_count(rest).unwrap_or(0);
            let sep = |f: &mut dyn fmt::Write| if rest.is_empty() { write!(f, ", ") } else { write!(f, ",\n{}", " ".repeat(depth + 1)) };
            // Entries shown: all, or the first and last `e` around `...`.
            let cut = edge.filter(|&e| d > 2 * e);
            write!(f, "[")?;
            let mut first = true;
            for k in 0..d {
                if let Some(e) = cut {
                    if k == e {
                        sep(f)?;
                        write!(f, "...")?;
                    }
                    if k >= e && k < d - e {
                        continue;
                    }
                }
                if !first {
                    sep(f)?;
                }
                first = false;
                rec(f, rest, start + k * inner, depth + 1, edge, elem)?;
            }
            write!(f, "]")
        }
        rec(f, &self.shape, 0, 0, edge, &elem)
    }
}

/// Nested-bracket text, numpy style: `[[1, 2], [3, 4]]` (rank 0: the
/// value); every element ([`Tensor::summarized`] for large tensors).
impl fmt::Display for Tensor {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.write_nested(f, None)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn display_nested() {
        let t = Tensor { shape: vec![2, 2], data: Data::I32(vec![1, 2, 3, 4]) };
        assert_eq!(t.to_string(), "[[1, 2],\n [3, 4]]");
        let s = Tensor { shape: vec![], data: Data::F64(vec![1.5]) };
        assert_eq!(s.to_string(), "1.5");
        let z = Tensor { shape: vec![0, 3], data: Data::I32(vec![]) };
        assert_eq!(z.to_string(), "[]");
    }

    #[test]
    fn large_tensors_summarise_like_numpy() {
        // np.arange(2000).reshape(2, 1000) prints [[0, 1, 2, ..., 997, 998, 999],
        //  [1000, ..., 1999]] (NumPy writes `...` where we do).
        let t = Tensor { shape: vec![2, 1000], data: Data::I32((0..2000).collect()) };
        assert_eq!(t.summarized(), "[[0, 1, 2, ..., 997, 998, 999],\n [1000, 1001, 1002, ..., 1997, 1998, 1999]]");
        // At or under the threshold, or with short axes, nothing is cut.
        let small = Tensor { shape: vec![10, 100], data: Data::I32((0..1000).collect()) };
        assert_eq!(small.summarized(), small.to_string());
        let tall = Tensor { shape: vec![1001, 1], data: Data::I32((0..1001).collect()) };
        assert_eq!(tall.summarized(), "[[0],\n [1],\n [2],\n ...,\n [998],\n [999],\n [1000]]");
    }
}
