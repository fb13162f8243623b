//! What the emulator counts per kernel, and how one warp-level memory
//! instruction turns into sectors and shared-memory wavefronts.
//!
//! docs/emulator.md relates each counter to the Nsight Compute metric it
//! approximates.

use serde::{Deserialize, Serialize};

/// Counters of one kernel, summed over its launches.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Profile {
    /// The `.entry` name.
    pub name: String,
    /// Launches that ran (empty launches are skipped, not counted).
    pub launches: u64,
    /// Warp-level instructions issued, predicated-off ones included
    /// (`smsp__inst_executed.sum`).
    pub warp_instructions: u64,
    /// Thread-level instructions whose guard predicate was true
    /// (`smsp__thread_inst_executed_pred_on.sum`).
    pub thread_instructions: u64,
    /// Warp-level global loads with at least one active thread: one request
    /// each (`l1tex__t_requests_pipe_lsu_mem_global_op_ld.sum`).
    pub global_load_requests: u64,
    /// Distinct 32-byte sectors those requests touch
    /// (`l1tex__t_sectors_pipe_lsu_mem_global_op_ld.sum`).
    pub global_load_sectors: u64,
    pub global_store_requests: u64,
    pub global_store_sectors: u64,
    /// Warp-level shared-memory loads and stores.
    pub shared_requests: u64,
    /// Extra wavefronts those requests need beyond the ideal
    /// (`l1tex__data_bank_conflicts_pipe_lsu_mem_shared.sum`).
    pub shared_bank_conflicts: u64,
    /// Wavefronts those requests need, conflicts included: at least one
    /// per 32 distinct words (a 128-bit access of 32 distinct lanes takes
    /// 4, one quarter-warp each) (`l1tex__data_pipe_lsu_wavefronts_mem_shared.sum`).
    #[serde(default)]
    pub shared_wavefronts: u64,
    /// Warp-level `atom` and `red` instructions with an active thread.
    pub atomic_requests: u64,
    /// Floating-point operations: `add`, `sub` and `mul` count 1 per
    /// thread, a fused multiply-add 2.
    pub flops: u64,
    /// Thread-level fused multiply-adds (`fma`, float `mad`).
    pub fma: u64,
    /// Bytes threads read and wrote in global memory (loads, stores and
    /// atomics; what the kernel asked for, not what the sectors move).
    pub global_bytes: u64,
    /// Distinct global sectors each block touched (loads and stores),
    /// summed over blocks: what an L1 that kept one block's footprint would
    /// fetch from L2 (an estimate: real L1s are smaller than some blocks'
    /// footprints, and blocks on one SM share theirs). Counted by sampled
    /// profiles only (`Device::profile_sampled`, the cost model's); 0 in
    /// other runs, which skip the bookkeeping.
    #[serde(default)]
    pub global_block_sectors: u64,
    /// Warp-level barriers (`bar.sync`, `barrier.sync`) reached: each
    /// stalls its warp until the block's other warps arrive.
    #[serde(default)]
    pub barriers: u64,
    /// Blocks of the launches' grids (summed over launches), as launched
    /// (a grid-stride kernel's grid is not capped on the emulator).
    #[serde(default)]
    pub blocks: u64,
    /// Blocks actually emulated: `blocks`, except in a sampled profile
    /// ([`crate::Device::profile_sampled`]), whose counters above are
    /// those blocks' counts scaled to the whole grid.
    #[serde(default)]
    pub blocks_run: u64,
    /// Threads per block of the last launch.
    #[serde(default)]
    pub threads_per_block: u64,
    /// Static shared memory per block (`.shared` declarations).
    #[serde(default)]
    pub shared_bytes_per_block: u64,
}

impl Profile {
    /// The per-block counters (everything but `name`, `launches` and the
    /// launch geometry) as mutable references, so that a sampled launch can
    /// scale them together.
    fn counters(&mut self) -> [&mut u64; 15] {
        [
            &mut self.warp_instructions,
            &mut self.thread_instructions,
            &mut self.global_load_requests,
            &mut self.global_load_sectors,
            &mut self.global_store_requests,
            &mut self.global_store_sectors,
            &mut self.shared_requests,
            &mut self.shared_bank_conflicts,
            &mut self.shared_wavefronts,
            &mut self.atomic_requests,
            &mut self.flops,
            &mut self.fma,
            &mut self.global_bytes,
            &mut self.barriers,
            &mut self.global_block_sectors,
        ]
    }

    /// Scales what the counters gained since `before` by `num / den`
    /// (rounded to nearest): `den` blocks ran of a grid of `num`.
    pub(crate) fn scale_since(&mut self, before: &Profile, num: u64, den: u64) {
        let mut b = before.clone();
        let old = b.counters();
        let new = self.counters();
        for (n, o) in new.into_iter().zip(old) {
            let gained = u128::from(n.saturating_sub(*o));
            let scaled = (gained * u128::from(num) + u128::from(den) / 2) / u128::from(den.max(1));
            *n = o.saturating_add(u64::try_from(scaled).unwrap_or(u64::MAX));
        }
    }
}

/// Every kernel's profile, in order of first launch; serialises to
/// `{"kernels": [...]}`.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct ProfileReport {
    pub kernels: Vec<Profile>,
}

impl ProfileReport {
    /// The profile of `name`, created on first use.
    pub(crate) fn kernel(&mut self, name: &str) -> &mut Profile {
        let i = match self.kernels.iter().position(|p| p.name == name) {
            Some(i) => i,
            None => {
                self.kernels.push(Profile { name: name.to_string(), ..Profile::default() });
                self.kernels.len() - 1
            }
        };
        &mut self.kernels[i]
    }

    /// The profile of `name`, if it ran.
    pub fn get(&self, name: &str) -> Option<&Profile> {
        self.kernels.iter().find(|p| p.name == name)
    }

    /// Pretty-printed JSON.
    pub fn to_json(&self) -> String {
        serde_json::to_string_pretty(self).unwrap_or_default()
    }

    /// A table, one line per kernel.
    pub fn table(&self) -> String {
        let mut s = format!(
            "{:<24} {:>6} {:>12} {:>14} {:>10} {:>10} {:>10} {:>10} {:>9} {:>9} {:>9} {:>8} {:>12} {:>10} {:>12} {:>9}\n",
            "kernel",
            "launch",
            "warp_inst",
            "thread_inst",
            "ld_req",
            "ld_sect",
            "st_req",
            "st_sect",
            "shm_req",
            "shm_wave",
            "shm_conf",
            "atomics",
            "flops",
            "fma",
            "global_B",
            "barriers"
        );
        for p in &self.kernels {
            s.push_str(&format!(
                "{:<24} {:>6} {:>12} {:>14} {:>10} {:>10} {:>10} {:>10} {:>9} {:>9} {:>9} {:>8} {:>12} {:>10} {:>12} {:>9}\n",
                p.name,
                p.launches,
                p.warp_instructions,
                p.thread_instructions,
                p.global_load_requests,
                p.global_load_sectors,
                p.global_store_requests,
                p.global_store_sectors,
                p.shared_requests,
                p.shared_wavefronts,
                p.shared_bank_conflicts,
                p.atomic_requests,
                p.flops,
                p.fma,
                p.global_bytes,
                p.barriers
            ));
        }
        s
    }
}

/// Distinct 32-byte sectors covered by accesses `(address, bytes)`.
pub(crate) fn sectors(accesses: &mut Vec<u64>, spans: &[(u64, u32)]) -> u64 {
    accesses.clear();
    for &(addr, bytes) in spans {
        let first = addr / 32;
        let last = (addr + u64::from(bytes).max(1) - 1) / 32;
        accesses.extend(first..=last);
    }
    accesses.sort_unstable();
    accesses.dedup();
    accesses.len() as u64
}

/// Shared-memory banks: 32 of 4 bytes each.
const BANKS: u64 = 32;

/// The wavefronts one shared-memory request needs (the most distinct
/// words any one bank must deliver; one word read by many threads is
/// broadcast) and its bank conflicts: those wavefronts minus the ones its
/// distinct words need at best (32 words per wavefront; a warp's 128-bit
/// accesses to 512 distinct bytes need 4 however they lie).
pub(crate) fn shared_wavefronts(words: &mut Vec<u64>, spans: &[(u64, u32)]) -> (u64, u64) {
    words.clear();
    for &(addr, bytes) in spans {
        let first = addr / 4;
        let last = (addr + u64::from(bytes).max(1) - 1) / 4;
        words.extend(first..=last);
    }
    words.sort_unstable();
    words.dedup();
    let mut per_bank = [0u64; BANKS as usize];
    for w in words.iter() {
        per_bank[(w % BANKS) as usize] += 1;
    }
    let wavefronts = per_bank.iter().copied().max().unwrap_or(0);
    let ideal = (words.len() as u64).div_ceil(BANKS);
    (wavefronts, wavefronts.saturating_sub(ideal))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sectors_of_coalesced_and_strided_warps() {
        let mut buf = Vec::new();
        let coalesced: Vec<(u64, u32)> = (0..32).map(|l| (0x1000 + 4 * l, 4)).collect();
        assert_eq!(sectors(&mut buf, &coalesced), 4);
        let doubles: Vec<(u64, u32)> = (0..32).map(|l| (0x1000 + 8 * l, 8)).collect();
        assert_eq!(sectors(&mut buf, &doubles), 8);
        let strided: Vec<(u64, u32)> = (0..32).map(|l| (0x1000 + 128 * l, 4)).collect();
        assert_eq!(sectors(&mut buf, &strided), 32);
        let broadcast = vec![(0x1004u64, 4u32); 32];
        assert_eq!(sectors(&mut buf, &broadcast), 1);
        // A misaligned span crossing a sector boundary touches two.
        assert_eq!(sectors(&mut buf, &[(30, 4)]), 2);
    }

    #[test]
    fn bank_conflicts_of_common_patterns() {
        let mut buf = Vec::new();
        let linear: Vec<(u64, u32)> = (0..32).map(|l| (4 * l, 4)).collect();
        assert_eq!(shared_wavefronts(&mut buf, &linear), (1, 0));
        let stride2: Vec<(u64, u32)> = (0..32).map(|l| (8 * l, 4)).collect();
        assert_eq!(shared_wavefronts(&mut buf, &stride2), (2, 1));
        let column: Vec<(u64, u32)> = (0..32).map(|l| (128 * l, 4)).collect();
        assert_eq!(shared_wavefronts(&mut buf, &column), (32, 31));
        let broadcast = vec![(64u64, 4u32); 32];
        assert_eq!(shared_wavefronts(&mut buf, &broadcast), (1, 0));
        let doubles: Vec<(u64, u32)> = (0..32).map(|l| (8 * l, 8)).collect();
        assert_eq!(shared_wavefronts(&mut buf, &doubles), (2, 0));
        // 128-bit accesses: 32 lanes of 16 consecutive bytes are 4
        // wavefronts (a quarter-warp each), no conflict; two half-warps
        // reading the same 16 vectors 2 (broadcast); 16-byte vectors 32
        // bytes apart 8, 4 of them conflicts (2-way in each quarter-warp).
        let vectors: Vec<(u64, u32)> = (0..32).map(|l| (16 * l, 16)).collect();
        assert_eq!(shared_wavefronts(&mut buf, &vectors), (4, 0));
        let halves: Vec<(u64, u32)> = (0..32).map(|l| (16 * (l % 16), 16)).collect();
        assert_eq!(shared_wavefronts(&mut buf, &halves), (2, 0));
        let spaced: Vec<(u64, u32)> = (0..32).map(|l| (32 * l, 16)).collect();
        assert_eq!(shared_wavefronts(&mut buf, &spaced), (8, 4));
    }

    #[test]
    fn scaling_touches_only_what_the_sampled_blocks_added() {
        let before = Profile { warp_instructions: 100, flops: 7, launches: 1, ..Profile::default() };
        // 2 of 5 blocks ran and added 30 instructions and 3 barriers.
        let mut p = Profile { warp_instructions: 130, barriers: 3, flops: 7, launches: 1, ..Profile::default() };
        p.scale_since(&before, 5, 2);
        // 30 * 5 / 2 = 75; 3 * 5 / 2 = 7.5, rounded to 8; flops and
        // launches untouched.
        assert_eq!((p.warp_instructions, p.barriers, p.flops, p.launches), (175, 8, 7, 1));
    }

    #[test]
    fn report_json_shape() {
        let mut r = ProfileReport::default();
        r.kernel("k").launches += 1;
        r.kernel("k").flops += 2;
        let v: serde_json::Value = serde_json::from_str(&r.to_json()).unwrap();
        assert_eq!(v["kernels"][0]["name"], "k");
        assert_eq!(v["kernels"][0]["launches"], 1);
        assert_eq!(v["kernels"][0]["flops"], 2);
        assert!(r.table().contains("k "));
    }
}
