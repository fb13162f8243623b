//! Register sums: the cells a reduction loop accumulates into, kept in
//! registers across it by the code generator rather than by LLVM.
//!
//! A host register tile (`register-tiles{layout=blocked}`) is a `reduce`
//! loop around `unroll` loops around `accumulate y[cell] += a * b`, the
//! cells independent of the reduction. Lowered literally, each step loads
//! and stores every cell, and LLVM's O3 must prove, by alias queries
//! between all the unrolled cells, that it may keep them in registers:
//! most of the time it spends on a product kernel (docs/journal/performance.md,
//! section 9). Here each cell is loaded once before the loop into a stack
//! slot, the loop adds into the slot, and the slot is stored back after
//! it; `mem2reg` turns the slots into registers without alias analysis.
//! The sums are the same additions in the same order: bit for bit.

use eintup::ir::loops::{BufId, Compute, For, IExpr, LoopKind, Node, VOp, VarId, WriteKind};
use std::collections::HashSet;

/// More cells than this stay in memory: a tile past the register file
/// spills anyway, and the slots would only cost compile time.
pub(crate) const MAX_CELLS: usize = 256;

/// The cells of one reduction loop that live in registers across it.
#[derive(Debug)]
pub(crate) struct RegisterSums {
    /// Each cell once, in first-use order: its buffer, the part of its
    /// offset fixed during the loop (`rest`: outer variables) and the
    /// constant the loop's `unroll` variables add.
    pub cells: Vec<(BufId, IExpr, i64)>,
    /// The `unroll` variables bound inside the loop: their values select
    /// the cell an accumulate adds into.
    pub fixed_vars: Vec<VarId>,
    /// The accumulates that add into a cell (by address: the nodes of the
    /// kernel being lowered).
    computes: HashSet<usize>,
}

impl RegisterSums {
    /// The cells of the `reduce` loop `l` when its body is `unroll` loops
    /// (constant bounds) and computes only, every accumulate independent
    /// of `l`'s variable adds into a buffer no other write or load of the
    /// body touches, and the accumulates into one buffer differ only by
    /// `unroll` variables (so two cells are the same exactly when their
    /// constants are). `None` otherwise: the loop stays as it is.
    pub(crate) fn of(l: &For) -> Option<RegisterSums> {
        if l.kind != LoopKind::Reduce {
            return None;
        }
        let mut w = Walk {
            var: l.var,
            bound: Vec::new(),
            sums: RegisterSums { cells: Vec::new(), fixed_vars: Vec::new(), computes: HashSet::new() },
            rests: Vec::new(),
            other: HashSet::new(),
            instances: 0,
        };
        w.nodes(&l.body)?;
        let sums = w.sums;
        let touched = |b: BufId| w.other.contains(&b);
        if sums.cells.is_empty() || sums.cells.iter().any(|c| touched(c.0)) {
            return None;
        }
        Some(sums)
    }

    /// Whether `c` adds into a cell of these sums.
    pub(crate) fn holds(&self, c: &Compute) -> bool {
        self.computes.contains(&(c as *const Compute as usize))
    }

    /// `offset` as `(rest, constant)` over these sums' `unroll` variables,
    /// their values given by `value`.
    pub(crate) fn split(&self, offset: &IExpr, value: &dyn Fn(VarId) -> Option<i64>) -> Option<(IExpr, i64)> {
        split(offset, &|v| self.fixed_vars.contains(&v), value)
    }
}

fn split(offset: &IExpr, is_fixed: &dyn Fn(VarId) -> bool, value: &dyn Fn(VarId) -> Option<i64>) -> Option<(IExpr, i64)> {
    let Some((rest, fixed)) = offset.split_fixed(is_fixed) else { return Some((offset.clone(), 0)) };
    let mut c = fixed.constant;
    for (atom, coef) in &fixed.terms {
        let IExpr::Var(v) = atom else { return None };
        c = c.checked_add(coef.checked_mul(value(*v)?)?)?;
    }
    Some((rest, c))
}

struct Walk {
    var: VarId,
    /// The `unroll` variables in scope inside the loop, with their values.
    bound: Vec<(VarId, i64)>,
    sums: RegisterSums,
    /// Per buffer with cells: the `rest` every accumulate into it shares.
    rests: Vec<(BufId, IExpr)>,
    /// Buffers the body reads, or writes other than by a cell's accumulate.
    other: HashSet<BufId>,
    instances: usize,
}

impl Walk {
    fn nodes(&mut self, nodes: &[Node]) -> Option<()> {
        for n in nodes {
            match n {
                Node::For(u) if u.kind == LoopKind::Unroll => {
                    let (lo, hi) = (u.lo.as_const()?, u.hi.as_const()?);
                    if !self.sums.fixed_vars.contains(&u.var) {
                        self.sums.fixed_vars.push(u.var);
                    }
                    for i in lo..hi {
                        self.bound.push((u.var, i));
                        self.nodes(&u.body)?;
                        self.bound.pop();
                    }
                }
                Node::Compute(c) => self.compute(c)?,
                _ => return None,
            }
        }
        Some(())
    }

    fn compute(&mut self, c: &Compute) -> Option<()> {
        self.instances += 1;
        if self.instances > 4 * MAX_CELLS {
            return None;
        }
        for v in &c.values {
            if let VOp::Load { buf, .. } = v.op {
                self.other.insert(buf);
            }
        }
        let w = &c.write;
        // `uses`, not `depends_on`: the cell's address is formed before the
        // loop, where its variable has no value.
        if w.kind != WriteKind::Accumulate || w.offset.uses(self.var) {
            self.other.insert(w.buf);
            return Some(());
        }
        let bound = &self.bound;
        let (rest, k) = split(&w.offset, &|v| self.sums.fixed_vars.contains(&v), &|v| bound.iter().rev().find(|b| b.0 == v).map(|b| b.1))?;
        // The rest is evaluated before the loop: no variable of the body
        // may remain in it (`it * it` is an atom, not a constant term).
        if bound.iter().any(|b| rest.uses(b.0)) {
            return None;
        }
        match self.rests.iter().find(|r| r.0 == w.buf) {
            Some(r) if r.1 != rest => return None,
            Some(_) => {}
            None => self.rests.push((w.buf, rest.clone())),
        }
        if !self.sums.cells.iter().any(|cell| cell.0 == w.buf && cell.2 == k) {
            if self.sums.cells.len() == MAX_CELLS {
                return None;
            }
            self.sums.cells.push((w.buf, rest, k));
        }
        self.sums.computes.insert(c as *const Compute as usize);
        Some(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use eintup::ir::loops::parse::parse_module;

    /// The `reduce` loop of the first kernel of a printed module whose body
    /// (inside two parallel loops) is `body`.
    fn sums_of(body: &str) -> Option<RegisterSums> {
        let text = format!(
            "buffer a : f64[4, 8] input\nbuffer b : f64[8, 4] input\nbuffer y : f64[4, 4] output\n\n\
             kernel @mm role(main, stmt 0) vars(i, k, j, it, kt) {{\n  for i in [0, 2) parallel {{\n    for k in [0, 2) parallel {{\n      for j in [0, 8) reduce {{\n{body}\n      }}\n    }}\n  }}\n}}\n"
        );
        let m = parse_module(&text).unwrap_or_else(|d| panic!("{d:?}\n{text}"));
        fn find(nodes: &[Node]) -> Option<&For> {
            nodes.iter().find_map(|n| match n {
                Node::For(l) if l.kind == LoopKind::Reduce => Some(l),
                Node::For(l) => find(&l.body),
                _ => None,
            })
        }
        RegisterSums::of(find(&m.kernels[0].body).expect("a reduce loop"))
    }

    const TILE: &str = "        for it in [0, 2) unroll {
          for kt in [0, 2) unroll {
            %0 = load a[((((i * 2) + it) * 8) + j)] : f64
            %1 = load b[((j * 4) + ((k * 2) + kt))] : f64
            %2 = mul %0, %1 : f64
            accumulate y[((((i * 2) + it) * 4) + ((k * 2) + kt))] += %2
          }
        }";

    #[test]
    fn a_register_tile_keeps_each_of_its_cells_once() {
        let s = sums_of(TILE).expect("a 2x2 tile");
        // y[8i + 2k + 4it + kt]: one rest, the constants 4it + kt.
        let ks: Vec<i64> = s.cells.iter().map(|c| c.2).collect();
        assert_eq!(ks, [0, 1, 4, 5]);
        assert!(s.cells.iter().all(|c| c.0 == 2 && c.1 == s.cells[0].1));
        assert_eq!(s.fixed_vars.len(), 2);
        // Two accumulates into the same cells share them.
        let twice = TILE.replace("accumulate y[((((i * 2) + it) * 4) + ((k * 2) + kt))] += %2", "accumulate y[((((i * 2) + it) * 4) + ((k * 2) + kt))] += %2\n            %0 = load a[j] : f64\n            accumulate y[((((i * 2) + it) * 4) + ((k * 2) + kt))] += %0");
        assert_eq!(sums_of(&twice).map(|s| s.cells.len()), Some(4));
    }

    /// Lowered for the host (before LLVM's passes), the tile's reduction
    /// adds into four stack slots loaded in `sums.load` and stored back
    /// after it; the GPU's lowering keeps the cells in memory.
    #[test]
    fn the_host_lowering_adds_into_slots() {
        let text = format!(
            "buffer a : f64[4, 8] input\nbuffer b : f64[8, 4] input\nbuffer y : f64[4, 4] output\n\n\
             kernel @mm role(main, stmt 0) vars(i, k, j, it, kt) {{\n  for i in [0, 2) parallel {{\n    for k in [0, 2) parallel {{\n      for j in [0, 8) reduce {{\n{TILE}\n      }}\n    }}\n  }}\n}}\n"
        );
        let m = parse_module(&text).unwrap();
        let ctx = inkwell::context::Context::create();
        let host = crate::lower::lower_module(&ctx, &m, &[0], 0, &crate::host::HostLowering, crate::FpContract::Fast).unwrap().print_to_string().to_string();
        assert_eq!(host.matches("alloca double").count(), 4, "{host}");
        assert!(host.contains("sums.load:") && host.contains("sums.end:"), "{host}");
        let gpu = crate::lower::lower_module(&ctx, &m, &[0], 0, &crate::nvptx::NvptxLowering::new(80), crate::FpContract::Fast)
            .unwrap()
            .print_to_string()
            .to_string();
        assert!(!gpu.contains("sums.load"), "{gpu}");
    }

    #[test]
    fn cells_the_body_reads_moves_or_cannot_tell_apart_stay_in_memory() {
        // The body reads the accumulated buffer.
        assert!(sums_of(&TILE.replace("load b[((j * 4) + ((k * 2) + kt))]", "load y[((k * 2) + kt)]")).is_none());
        // The cell moves with the reduction.
        assert!(sums_of(&TILE.replace("accumulate y[((((i * 2) + it) * 4) + ((k * 2) + kt))]", "accumulate y[((j % 4) * 4)]")).is_none());
        // Two accumulates into one buffer whose rests differ (8i + 2k and
        // 2i + 2k): their cells may coincide.
        let other = TILE.replace(
            "accumulate y[((((i * 2) + it) * 4) + ((k * 2) + kt))] += %2",
            "accumulate y[((((i * 2) + it) * 4) + ((k * 2) + kt))] += %2\n            %0 = load a[j] : f64\n            accumulate y[(((i * 2) + (k * 2)) + kt)] += %0",
        );
        assert!(sums_of(&other).is_none());
        // An unroll variable the cell's offset uses other than linearly.
        assert!(sums_of(
            &TILE.replace("accumulate y[((((i * 2) + it) * 4) + ((k * 2) + kt))]", "accumulate y[((((i * 2) + (it * it)) * 4) + ((k * 2) + kt))]")
        )
        .is_none());
        // A store into the buffer besides the sums.
        let stored = TILE.replace(
            "accumulate y[((((i * 2) + it) * 4) + ((k * 2) + kt))] += %2",
            "accumulate y[((((i * 2) + it) * 4) + ((k * 2) + kt))] += %2\n            %0 = load a[j] : f64\n            store y[0] = %0",
        );
        assert!(sums_of(&stored).is_none());
    }
}
