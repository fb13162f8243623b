//! Shared-memory bank layout: the row padding of a shared buffer and the
//! bank conflicts a warp's copy stores would have, by which `build` lays a
//! box out.

use super::*;

/// Shared-memory banks: 32 of 4 bytes.
pub(super) const BANKS: i64 = 32;

/// One digit of a shared row's index: `((x - lo) // div) % trip` of the
/// box variable `var` at `x`, where `whole` is the variable's trip.
#[derive(Clone, Copy, Debug)]
pub(super) struct Digit {
    pub(super) var: VarId,
    pub(super) lo: i64,
    pub(super) div: i64,
    pub(super) trip: i64,
    pub(super) whole: i64,
}

impl Digit {
    pub(super) fn of(&self, x: IExpr) -> IExpr {
        let mut e = IExpr::sub(x, IExpr::c(self.lo));
        if self.div > 1 {
            e = IExpr::bin(IBin::FloorDiv, e, IExpr::c(self.div));
        }
        if self.div * self.trip < self.whole {
            e = IExpr::bin(IBin::Mod, e, IExpr::c(self.trip));
        }
        e
    }
}

/// The digits of a shared row (after `k_i`), outermost first, and the
/// elements a thread reads in one vector load: the register tile's
/// variables the operand `depends` on, the innermost of them (trip `T`)
/// split at `W`, the largest power of two up to `lanes` (16 bytes)
/// dividing `T`; its outer digit with the other tile variables, then the
/// thread variables, then its inner digit. A thread's `W` values for one
/// outer digit lie side by side, aligned to `W` elements where the row's
/// length is a multiple of `W`; the threads of a warp read consecutive
/// vectors (or one, broadcast). `W` is 1 (no vector) for an odd tile.
pub(super) fn shared_row(
    box_vars: &[(VarId, i64, i64)],
    ki_v: VarId,
    depends: &dyn Fn(VarId) -> bool,
    is_thread: &dyn Fn(VarId) -> bool,
    lanes: i64,
) -> (Vec<Digit>, i64) {
    let whole = |&(var, lo, trip): &(VarId, i64, i64)| Digit { var, lo, div: 1, trip, whole: trip };
    let tiles: Vec<Digit> = box_vars.iter().filter(|&&(v, ..)| v != ki_v && !is_thread(v) && depends(v)).map(whole).collect();
    let threads = box_vars.iter().filter(|&&(v, ..)| is_thread(v) && depends(v)).map(whole);
    let Some((&last, outer)) = tiles.split_last() else { return (threads.collect(), 1) };
    let width = pow2_factor(last.trip, lanes);
    let mut row = outer.to_vec();
    if width < last.trip {
        row.push(Digit { div: width, trip: last.trip / width, ..last });
    }
    row.extend(threads);
    row.push(Digit { trip: width, ..last });
    (row, width)
}

/// How a block's threads run one copy loop (`spread` over `iterations`
/// of `e_v`, iteration `e` on thread `e mod block`, the `unrolled` loops
/// `(var, trip)` inside, outermost first: at most two), for counting its
/// stores' bank conflicts.
pub(super) struct CopyWarps {
    pub(super) e_v: VarId,
    pub(super) unrolled: Vec<(VarId, i64)>,
    pub(super) iterations: i64,
    pub(super) block: i64,
    /// Bytes of an element.
    pub(super) elem: i64,
    pub(super) nvars: usize,
}

impl CopyWarps {
    /// The extra wavefronts (beyond 32 distinct words each) of the copy's
    /// warp-level stores to the shared element `index`, per warp and
    /// round: where each thread's elements along one unrolled loop are
    /// consecutive and aligned, one vector store per value of the other
    /// (as LLVM merges them), else one store per element.
    pub(super) fn bank_conflicts(&self, index: &IExpr) -> i64 {
        let mut env = vec![0i64; self.nvars];
        let (outer, inner) = match self.unrolled[..] {
            [] => ((self.e_v, 1), (self.e_v, 1)),
            [i] => ((self.e_v, 1), i),
            [o, i, ..] => (o, i),
        };
        let mut total = 0;
        for first in (0..self.iterations).step_by(self.block.max(1) as usize) {
            for warp in (first..(first + self.block).min(self.iterations)).step_by(BANKS as usize) {
                let end = (warp + BANKS).min(first + self.block).min(self.iterations);
                // `at[t][o][i]`: the element thread `t` stores at the
                // unrolled point `(o, i)`.
                let at: Vec<Vec<Vec<i64>>> = (warp..end)
                    .map(|e| {
                        env[self.e_v] = e;
                        (0..outer.1)
                            .map(|o| {
                                env[outer.0] = if outer.1 > 1 { o } else { env[outer.0] };
                                (0..inner.1)
                                    .map(|i| {
                                        env[inner.0] = if inner.1 > 1 { i } else { env[inner.0] };
                                        index.eval(&env)
                                    })
                                    .collect()
                            })
                            .collect()
                    })
                    .collect();
                let run = |xs: &[i64]| xs.len() > 1 && xs[0] % xs.len() as i64 == 0 && xs.iter().enumerate().all(|(l, &x)| x == xs[0] + l as i64);
                let column = |t: &Vec<Vec<i64>>, i: usize| -> Vec<i64> { t.iter().map(|o| o[i]).collect() };
                let along_inner = at.iter().all(|t| t.iter().all(|o| run(o)));
                let along_outer = at.iter().all(|t| (0..inner.1 as usize).all(|i| run(&column(t, i))));
                let requests: Vec<Vec<i64>> = if along_inner {
                    (0..outer.1 as usize).map(|o| at.iter().flat_map(|t| t[o].clone()).collect()).collect()
                } else if along_outer {
                    (0..inner.1 as usize).map(|i| at.iter().flat_map(|t| column(t, i)).collect()).collect()
                } else {
                    (0..outer.1 as usize).flat_map(|o| (0..inner.1 as usize).map(move |i| (o, i))).map(|(o, i)| at.iter().map(|t| t[o][i]).collect()).collect()
                };
                for elems in requests {
                    total += self.request_conflicts(&elems);
                }
            }
        }
        total
    }

    pub(super) fn request_conflicts(&self, elems: &[i64]) -> i64 {
        let mut words: Vec<i64> = elems.iter().flat_map(|&e| (e * self.elem).div_euclid(4)..=((e + 1) * self.elem - 1).div_euclid(4)).collect();
        words.sort_unstable();
        words.dedup();
        let mut per_bank = [0i64; BANKS as usize];
        for w in &words {
            per_bank[w.rem_euclid(BANKS) as usize] += 1;
        }
        let wavefronts = per_bank.iter().copied().max().unwrap_or(0);
        wavefronts - (words.len() as i64 + BANKS - 1) / BANKS
    }
}
