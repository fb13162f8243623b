//! A matmul kernel for the unit tests of the tiling passes
//! (`register-tiles`, `block-tiles`), and a run of it on fixed inputs.

use crate::interp::loops as li;
use crate::ir::loops::{parse, LoopModule};
use crate::tensor::{Data, Tensor};

/// `c[row, col] += a[row, k] * b[k, col]` as the middle end leaves it.
pub fn matmul(m: i64, n: i64, k: i64) -> LoopModule {
    let text = format!(
        "buffer a : i32[{m}, {k}] input\nbuffer b : i32[{k}, {n}] input\nbuffer c : i32[{m}, {n}] output\n\n\
         kernel @mm {{\n  for row in [0, {m}) parallel {{\n    for col in [0, {n}) parallel {{\n      for k in [0, {k}) reduce {{\n        \
         %0 = load a[((row * {k}) + k)] : i32\n        %1 = load b[((k * {n}) + col)] : i32\n        %2 = mul %0, %1 : i32\n        \
         accumulate c[((row * {n}) + col)] += %2\n      }}\n    }}\n  }}\n}}\n"
    );
    parse::parse_verified(&text).unwrap_or_else(|e| panic!("{e:?}\n{text}"))
}

/// Runs `lm` (a, b, c and its scratch buffers, zeroed) on fixed inputs.
pub fn run_matmul(lm: &LoopModule, m: i64, n: i64, k: i64) -> Data {
    let a: Vec<i32> = (0..m * k).map(|i| (i as i32).wrapping_mul(7919) % 1000).collect();
    let b: Vec<i32> = (0..k * n).map(|i| (i as i32).wrapping_mul(104_729) % 777).collect();
    let mut bufs = vec![Tensor::new(vec![m as usize, k as usize], Data::I32(a)).unwrap(), Tensor::new(vec![k as usize, n as usize], Data::I32(b)).unwrap()];
    for buf in &lm.buffers[2..] {
        bufs.push(Tensor::zeros(buf.dtype, &buf.shape.iter().map(|&d| d as usize).collect::<Vec<_>>()).unwrap());
    }
    li::run(lm, 0, &mut bufs).unwrap();
    bufs.swap_remove(2).data
}
