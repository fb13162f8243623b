//! Host-side tensors exchanged with the runtime.
//!
//! The runtime does not know the compiler's tensor type; the compiler converts
//! its tensors to [`HostTensor`] before a run and back afterwards. Data are
//! row-major (the last dimension varies fastest), exactly as the bundle's
//! buffers are laid out on the device.

use serde::{Deserialize, Serialize};
use std::fmt;

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
pub enum HostData {
    I32(Vec<i32>),
    F32(Vec<f32>),
    F64(Vec<f64>),
}

impl HostData {
    /// The element type these data hold.
    pub fn dtype(&self) -> DType {
        match self {
            HostData::I32(_) => DType::I32,
            HostData::F32(_) => DType::F32,
            HostData::F64(_) => DType::F64,
        }
    }

    /// Number of elements.
    pub fn len(&self) -> usize {
        match self {
            HostData::I32(v) => v.len(),
            HostData::F32(v) => v.len(),
            HostData::F64(v) => v.len(),
        }
    }

    /// Whether there are no elements.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The elements as bytes in native order (what the device reads: CUDA
    /// hosts and GPUs are little-endian alike).
    pub fn to_ne_bytes(&self) -> Vec<u8> {
        match self {
            HostData::I32(v) => v.iter().flat_map(|x| x.to_ne_bytes()).collect(),
            HostData::F32(v) => v.iter().flat_map(|x| x.to_ne_bytes()).collect(),
            HostData::F64(v) => v.iter().flat_map(|x| x.to_ne_bytes()).collect(),
        }
    }

    /// Rebuilds data of `dtype` from native-order bytes. Returns `None` when
    /// the byte count is not a multiple of the element size.
    pub fn from_ne_bytes(dtype: DType, bytes: &[u8]) -> Option<HostData> {
        if !bytes.len().is_multiple_of(dtype.size()) {
            return None;
        }
        Some(match dtype {
            DType::I32 => HostData::I32(
                bytes
                    .chunks_exact(4)
                    .map(|c| i32::from_ne_bytes([c[0], c[1], c[2], c[3]]))
                    .collect(),
            ),
            DType::F32 => HostData::F32(
                bytes
                    .chunks_exact(4)
                    .map(|c| f32::from_ne_bytes([c[0], c[1], c[2], c[3]]))
                    .collect(),
            ),
            DType::F64 => HostData::F64(
                bytes
                    .chunks_exact(8)
                    .map(|c| f64::from_ne_bytes([c[0], c[1], c[2], c[3], c[4], c[5], c[6], c[7]]))
                    .collect(),
            ),
        })
    }

    /// `len` zero elements of `dtype`.
    pub fn zeros(dtype: DType, len: usize) -> HostData {
        match dtype {
            DType::I32 => HostData::I32(vec![0; len]),
            DType::F32 => HostData::F32(vec![0.0; len]),
            DType::F64 => HostData::F64(vec![0.0; len]),
        }
    }
}

/// Borrowed elements, for writing without a copy (`npy::write_data`).
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum HostDataRef<'a> {
    I32(&'a [i32]),
    F32(&'a [f32]),
    F64(&'a [f64]),
}

impl HostData {
    pub fn as_data_ref(&self) -> HostDataRef<'_> {
        match self {
            HostData::I32(v) => HostDataRef::I32(v),
            HostData::F32(v) => HostDataRef::F32(v),
            HostData::F64(v) => HostDataRef::F64(v),
        }
    }
}

/// A dense row-major tensor in host memory.
///
/// The fields are public so that callers can build and take apart tensors
/// freely; [`HostTensor::new`] and [`HostTensor::check`] say whether the
/// three agree (the runtime checks every input with `check`).
#[derive(Clone, Debug, PartialEq)]
pub struct HostTensor {
    pub dtype: DType,
    pub shape: Vec<usize>,
    pub data: HostData,
}

impl HostTensor {
    /// A tensor whose dtype is that of `data`; `None` when the number of
    /// elements is not the product of `shape`.
    pub fn new(shape: Vec<usize>, data: HostData) -> Option<HostTensor> {
        let t = HostTensor { dtype: data.dtype(), shape, data };
        t.check().ok().map(|()| t)
    }

    /// An all-zero tensor; `None` when the element count overflows `usize`.
    pub fn zeros(dtype: DType, shape: Vec<usize>) -> Option<HostTensor> {
        let len = element_count(&shape)?;
        Some(HostTensor { dtype, data: HostData::zeros(dtype, len), shape })
    }

    /// Number of elements (the length of `data`).
    pub fn len(&self) -> usize {
        self.data.len()
    }

    /// Whether the tensor has no elements.
    pub fn is_empty(&self) -> bool {
        self.data.is_empty()
    }

    /// Checks that `dtype` matches `data` and that `data` holds exactly
    /// `product(shape)` elements; the error is a reason phrase for
    /// [`crate::Error::Input`].
    pub fn check(&self) -> Result<(), String> {
        if self.data.dtype() != self.dtype {
            return Err(format!(
                "dtype field says {} but the data are {}",
                self.dtype,
                self.data.dtype()
            ));
        }
        match element_count(&self.shape) {
            Some(n) if n == self.data.len() => Ok(()),
            Some(n) => Err(format!(
                "holds {} elements but shape {:?} needs {n}",
                self.data.len(),
                self.shape
            )),
            None => Err(format!("shape {:?} has more elements than fit in memory", self.shape)),
        }
    }
}

/// Product of the dimensions, `None` on overflow. The empty shape (a scalar)
/// has one element.
pub fn element_count(shape: &[usize]) -> Option<usize> {
    shape.iter().try_fold(1usize, |acc, &d| acc.checked_mul(d))
}
