//! When buffers are in use, and whether a kernel writes a buffer whole:
//! what `share-buffers` assigns memory by, and what tells a runtime that a
//! buffer's zeros at the start are never seen (the Python package's
//! scratch is then not cleared before each call).

use super::*;

impl LoopModule {
    /// Each buffer's first and last using kernel (kernels run in module
    /// order); `None` for a buffer no kernel reads or writes.
    pub fn live_ranges(&self) -> Vec<Option<(usize, usize)>> {
        let mut ranges: Vec<Option<(usize, usize)>> = vec![None; self.buffers.len()];
        for (i, k) in self.kernels.iter().enumerate() {
            for b in k.buffers() {
                if let Some(r) = ranges.get_mut(b) {
                    *r = Some(r.map_or((i, i), |(first, _)| (first, i)));
                }
            }
        }
        ranges
    }

    /// For each buffer: are its contents before the first kernel never
    /// read, because the first kernel that uses it writes it whole first
    /// ([`Kernel::writes_whole`])? True for an unused or empty buffer,
    /// false for one of symbolic size.
    pub fn initial_contents_unread(&self) -> Vec<bool> {
        let ranges = self.live_ranges();
        self.buffers
            .iter()
            .zip(ranges)
            .enumerate()
            .map(|(b, (buf, range))| match (buf.len(), range) {
                (None, _) => false,
                (Some(_), None) | (Some(0), _) => true,
                (Some(len), Some((first, _))) => self.kernels[first].writes_whole(b, len),
            })
            .collect()
    }
}

impl Kernel {
    /// Does the kernel write all `len` elements of buffer `b` before
    /// reading any? Proved for a perfect nest of loops with constant
    /// bounds around one `store` into `b` that loads nothing from `b`,
    /// with no guard or index load, whose offset `c + sum(k_v * v)`
    /// numbers the iterations onto `[0, len)` in mixed radix: the
    /// coefficients, in increasing order, are 1, n_1, n_1 n_2, .. for trips
    /// n_i, the offset at the lower bounds is 0, and the trips multiply to
    /// `len` (a loop the offset does not use repeats writes, harmless).
    pub fn writes_whole(&self, b: BufId, len: i64) -> bool {
        let mut loops: Vec<(VarId, i64, i64)> = Vec::new();
        let mut nodes = &self.body[..];
        let c = loop {
            match nodes {
                [Node::For(f)] => {
                    let (Some(lo), Some(hi)) = (f.lo.as_const(), f.hi.as_const()) else { return false };
                    if hi <= lo {
                        return false;
                    }
                    loops.push((f.var, lo, hi));
                    nodes = &f.body;
                }
                [Node::Compute(c)] => break c,
                _ => return false,
            }
        };
        if c.write.buf != b || c.write.kind != WriteKind::Store || c.reads(b) {
            return false;
        }
        mixed_radix(&c.write.offset.linear(), &loops, len) == Some(true)
    }
}

/// Is `offset` over `loops` (variable, lo, hi) a mixed-radix numbering
/// onto `[0, len)` ([`Kernel::writes_whole`])? `None` where the exact
/// arithmetic overflows (bounds no buffer in memory has).
fn mixed_radix(offset: &Linear, loops: &[(VarId, i64, i64)], len: i64) -> Option<bool> {
    let mut base = offset.constant as i128;
    let mut radix: Vec<(i128, i128)> = Vec::new();
    for (atom, coef) in &offset.terms {
        let IExpr::Var(v) = atom else { return Some(false) };
        let Some(&(_, lo, hi)) = loops.iter().find(|l| l.0 == *v) else { return Some(false) };
        if *coef <= 0 {
            return Some(false);
        }
        base = base.checked_add((*coef as i128).checked_mul(lo as i128)?)?;
        radix.push((*coef as i128, (hi as i128).checked_sub(lo as i128)?));
    }
    radix.sort_unstable();
    let mut next: i128 = 1;
    for (coef, trip) in radix {
        if coef != next {
            return Some(false);
        }
        next = next.checked_mul(trip)?;
    }
    Some(base == 0 && next == len as i128)
}

#[cfg(test)]
mod tests {
    use crate::ir::loops::parse::parse_verified;

    #[test]
    fn writes_whole_is_a_mixed_radix_numbering_of_the_iterations() {
        let k = |offset: &str, lo: i64, hi: i64| {
            let text = format!("buffer x : f64[24] transient\n\nkernel @k {{\n  for i in [{lo}, {hi}) parallel {{\n    for j in [0, 4) parallel {{\n      for r in [0, 2) reduce {{\n        %0 = const 1.0 : f64\n        store x[{offset}] = %0\n      }}\n    }}\n  }}\n}}\n");
            let m = crate::ir::loops::parse::parse_module(&text).unwrap();
            m.kernels[0].writes_whole(0, 24)
        };
        assert!(k("((i * 4) + j)", 0, 6));
        assert!(k("((j * 6) + i)", 0, 6));
        assert!(k("(((i - 2) * 4) + j)", 2, 8));
        assert!(!k("((i * 4) + j)", 0, 5));
        assert!(!k("((i * 5) + j)", 0, 6));
        assert!(!k("(((i * 4) + j) + 1)", 0, 6));
        assert!(!k("((i * 4) + (j // 2))", 0, 6));
        assert!(k("(((i * 8) + (j * 2)) + r)", 0, 3));
        // Bounds no buffer has overflow the exact arithmetic: refused, no panic.
        let huge = "buffer x : f64[24] transient\n\nkernel @k {\n  for i in [-9223372036854775807, 0) parallel {\n    for j in [-9223372036854775807, 0) parallel {\n      for r in [-9223372036854775807, 0) parallel {\n        %0 = const 1.0 : f64\n        store x[(((i * 9223372036854775807) + (j * 9223372036854775807)) + (r * 9223372036854775807))] = %0\n      }\n    }\n  }\n}\n";
        assert!(!crate::ir::loops::parse::parse_module(huge).unwrap().kernels[0].writes_whole(0, 24));
    }

    #[test]
    fn initial_contents_are_unread_where_the_first_user_writes_them_whole() {
        let m = parse_verified(
            "buffer x : f64[4] input
buffer t : f64[4] temp
buffer u : f64[4] temp
buffer y : f64[4] output

kernel @fill_t {
  for i in [0, 4) parallel {
    %0 = load x[i] : f64
    store t[i] = %0
  }
}

kernel @sum {
  for i in [0, 4) parallel {
    %0 = load t[i] : f64
    accumulate u[i] += %0
    }
}

kernel @out {
  for i in [0, 4) parallel {
    %0 = load u[i] : f64
    store y[i] = %0
  }
}
",
        )
        .unwrap();
        assert_eq!(m.live_ranges(), vec![Some((0, 0)), Some((0, 1)), Some((1, 2)), Some((2, 2))]);
        // `t` is stored whole first, `u` is added to (its zeros are read),
        // `y` is stored whole by the last kernel, its only user.
        assert_eq!(m.initial_contents_unread(), [false, true, false, true]);
    }
}
