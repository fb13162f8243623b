//! The cost model (issue #30 item 6; docs/tuning.md, "Cost model"): the
//! time of a kernel on a named GPU predicted from the emulator's profile
//! (runtime/src/profile.rs) and the launch geometry, so that the tuner's
//! candidates can be ranked without a GPU. Pure arithmetic: the profiles
//! come from `model.rs`, the fitted constants from the GPU tuning runs
//! (the H100's of 2026-11-25, the H200's of 2026-11-27).
//!
//! A kernel's time is the largest of five limits plus a
//! launch overhead (a roofline: what does not limit is assumed hidden):
//!
//! - **issue**: the busiest SM runs `ceil(blocks / SMs)` blocks, `r` at a
//!   time (the occupancy limit of threads, registers and shared memory):
//!   the longer of the schedulers' throughput over all of them (`warps x
//!   (FMAs per warp / fma_ipc + other instructions per warp / ipc) /
//!   schedulers`: a fused multiply-add issues at the FP32 pipes' own rate,
//!   everything else at the average rate) and, per wave of `r`
//!   blocks, one warp's latency chain (`instructions per warp x latency +
//!   barriers per warp x barrier latency`: at a barrier the block waits
//!   for its slowest warp, typically for the global loads of the step
//!   before);
//! - **shared**: one shared-memory wavefront per SM per cycle (the
//!   emulator's `shared_wavefronts`: a request of 32 distinct words or
//!   fewer is one, a 128-bit one up to 4, plus bank conflicts);
//! - **L1**: global sectors (loads and stores, 32 bytes each, as
//!   requested) at the L1s' 128 bytes per SM per cycle;
//! - **L2**: the distinct sectors each block touches (what reaches the L2
//!   when a block's footprint stays in its L1) at the L2's bandwidth;
//! - **DRAM**: the bytes the kernel's buffers hold, once, at the measured
//!   copy bandwidth.

use serde::{Deserialize, Serialize};

/// A GPU's published figures (the sources are in [`H100`]'s comments).
#[derive(Clone, Debug, PartialEq)]
pub struct Gpu {
    pub name: &'static str,
    pub sms: u64,
    /// Cycles per second while running (the boost clock).
    pub clock_hz: f64,
    pub schedulers_per_sm: u64,
    pub max_threads_per_sm: u64,
    pub max_blocks_per_sm: u64,
    pub registers_per_sm: u64,
    /// Shared memory per SM a kernel's blocks may use together, and what
    /// the driver reserves per block.
    pub shared_bytes_per_sm: u64,
    pub shared_reserved_per_block: u64,
    /// Bytes one SM's L1 delivers per cycle.
    pub l1_bytes_per_clock: f64,
    /// Bytes per second device memory delivers to a copy kernel.
    pub dram_bytes_per_s: f64,
    /// Seconds a launch costs beyond its work.
    pub launch_s: f64,
}

/// NVIDIA H100 SXM5 80 GB (sm_90).
pub const H100: Gpu = Gpu {
    name: "NVIDIA H100 SXM (sm_90)",
    // The 132 SMs the kit's device reports (docs/gpu-reports).
    sms: 132,
    // NVIDIA H100 Tensor Core GPU Architecture whitepaper: 1.98 GHz boost
    // for the SXM5 part (ncu reported 1.59 GHz under its own clock control).
    clock_hz: 1.98e9,
    // Whitepaper: four partitions (warp schedulers) per SM.
    schedulers_per_sm: 4,
    // CUDA C++ Programming Guide, compute capability 9.0: 2048 threads and
    // 32 blocks per SM, 64 Ki registers per SM, 228 KB shared memory per
    // SM (227 KB for one block), 1 KB reserved per block.
    max_threads_per_sm: 2048,
    max_blocks_per_sm: 32,
    registers_per_sm: 65536,
    shared_bytes_per_sm: 228 * 1024,
    shared_reserved_per_block: 1024,
    // Whitepaper: 33 TB/s of L1 bandwidth over 132 SMs at 1.98 GHz.
    l1_bytes_per_clock: 128.0,
    // The kit's device-to-device copy on this H100: 2948-2981 GB/s in the
    // three runs of 2026-11-25 (89% of the 3.35 TB/s HBM3 peak).
    dram_bytes_per_s: 2.97e12,
    // The shortest kernels of the runs (reduce_sum's second launch) take a
    // few microseconds end to end.
    launch_s: 3e-6,
};

/// The model's free constants, fitted to measured times ([`fit`]).
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
pub struct Fitted {
    /// Warp instructions of the PTX one scheduler retires per cycle when
    /// enough warps are ready (at most 1 per SASS instruction; ptxas
    /// changes the count, so this absorbs the PTX-to-SASS ratio).
    pub ipc: f64,
    /// Cycles between one warp's consecutive instructions when nothing
    /// else runs (the average dependent latency: arithmetic ~4-6 cycles,
    /// shared ~30, L1/L2 ~40-250).
    pub latency: f64,
    /// Cycles one barrier adds to a warp's chain: the block's warps wait
    /// for the slowest, whose loads from global memory (~500 cycles from
    /// DRAM, ~200 from L2) are then not overlapped with arithmetic.
    pub barrier: f64,
    /// Bytes per second the L2 delivers to the SMs.
    pub l2_bytes_per_s: f64,
    /// Fused multiply-adds one scheduler issues per cycle (at most 1: 32
    /// FP32 lanes per scheduler; cuBLAS's SGEMM ran at 0.77 on the H100).
    /// `None`: they issue at `ipc` like every other instruction (the
    /// model fitted on the H100, whose profiles have no FMA counts).
    #[serde(default)]
    pub fma_ipc: Option<f64>,
}

/// The constants fitted on the H100 tuning run of 2026-11-25 (87 variants;
/// `etbench --model-fit`, docs/tuning.md "Cost model").
pub const H100_FIT: Fitted = Fitted { ipc: 0.5, latency: 4.0, barrier: 512.0, l2_bytes_per_s: 3.0e12, fma_ipc: None };

/// NVIDIA H200 SXM 141 GB (sm_90): the H100's SMs, clock and L1 (the same
/// GH100 die), HBM3e.
pub const H200: Gpu = Gpu {
    name: "NVIDIA H200 (sm_90)",
    // The kit's device-to-device copy on the H200 of 2026-11-27: 4208 GB/s.
    dram_bytes_per_s: 4.208e12,
    ..H100
};

/// The constants fitted on the H200 tuning run of 2026-11-27 (116 variants
/// of the kernels of e3dded1, profiles `bench/model-h200.json`; FMAs apart).
pub const H200_FIT: Fitted = Fitted { ipc: 0.45, latency: 1.41, barrier: 1024.0, l2_bytes_per_s: 3.0e12, fma_ipc: Some(0.82) };

/// The GPU and constants to predict with for a device named `name` (a
/// kit's `device_name`): the H200's where the name says H200, else the
/// H100's.
pub fn calibration_for(name: &str) -> (&'static Gpu, &'static Fitted) {
    if name.contains("H200") {
        (&H200, &H200_FIT)
    } else {
        (&H100, &H100_FIT)
    }
}

/// What predictions made before any device is known use (the kit's
/// `tune.json`, `etbench --model`): the latest calibration, the one
/// measured on today's kernels.
pub const LATEST: (&Gpu, &Fitted) = (&H200, &H200_FIT);

/// What the model needs of one kernel: the emulator's counts over all its
/// launches and the geometry of one launch.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct Work {
    pub name: String,
    /// Blocks of the grid as the bundle launches it (uncapped).
    pub blocks: u64,
    pub threads_per_block: u64,
    pub shared_bytes_per_block: u64,
    /// 32-bit registers per thread: estimated (ptxas decides; see
    /// `model::registers`).
    pub registers: u64,
    pub warp_instructions: u64,
    /// Of `warp_instructions`, the fused multiply-adds: the emulator's
    /// thread-level count over 32 (exact where every lane of a warp is
    /// active, as in the tuned kernels; fewer otherwise). 0 in profiles
    /// written before 2026-11-27.
    pub fma_instructions: u64,
    /// Warp-level barriers reached.
    pub barriers: u64,
    /// Shared-memory wavefronts, bank conflicts included.
    pub shared_wavefronts: u64,
    /// Global load and store sectors.
    pub global_sectors: u64,
    /// Distinct global sectors per block, summed over blocks.
    pub block_sectors: u64,
    /// Bytes of the buffers the kernel reads or writes, each counted once.
    pub dram_bytes: u64,
}

impl Work {
    /// `p`'s counts, with the registers estimated by the caller and the
    /// buffer bytes it touches.
    pub fn of(p: &eintup_runtime::Profile, registers: u64, dram_bytes: u64) -> Work {
        Work {
            name: p.name.clone(),
            blocks: p.blocks,
            threads_per_block: p.threads_per_block,
            shared_bytes_per_block: p.shared_bytes_per_block,
            registers,
            warp_instructions: p.warp_instructions,
            fma_instructions: p.fma / 32,
            barriers: p.barriers,
            shared_wavefronts: p.shared_wavefronts,
            global_sectors: p.global_load_sectors + p.global_store_sectors,
            block_sectors: p.global_block_sectors,
            dram_bytes,
        }
    }
}

/// One kernel's predicted time and the limits it came from.
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct Prediction {
    pub seconds: f64,
    pub issue_s: f64,
    pub shared_s: f64,
    pub l1_s: f64,
    pub l2_s: f64,
    pub dram_s: f64,
    /// Blocks resident on one SM at once.
    pub resident: u64,
    /// Rounds of resident blocks the busiest SM runs.
    pub waves: u64,
    /// The largest limit: "issue", "shared", "l1", "l2" or "dram".
    pub bound: &'static str,
}

/// Blocks of `w` one SM of `gpu` holds at once (at least 1: a block that
/// fits nowhere would not launch, which the compiler's limits prevent).
pub fn resident_blocks(gpu: &Gpu, w: &Work) -> u64 {
    let threads = w.threads_per_block.max(1);
    // Registers are allocated per warp in units of 256 (8 per thread).
    let regs_per_block = w.registers.div_ceil(8) * 8 * threads.div_ceil(32) * 32;
    let mut r = gpu.max_blocks_per_sm.min(gpu.max_threads_per_sm / threads);
    if let Some(by_registers) = gpu.registers_per_sm.checked_div(regs_per_block) {
        r = r.min(by_registers);
    }
    if w.shared_bytes_per_block > 0 {
        r = r.min(gpu.shared_bytes_per_sm / (w.shared_bytes_per_block + gpu.shared_reserved_per_block));
    }
    r.max(1)
}

/// The predicted time of `w` on `gpu` with the constants `f`.
pub fn predict(gpu: &Gpu, f: &Fitted, w: &Work) -> Prediction {
    if w.blocks == 0 {
        return Prediction { bound: "issue", ..Prediction::default() };
    }
    let resident = resident_blocks(gpu, w);
    let per_sm = w.blocks.div_ceil(gpu.sms);
    let waves = per_sm.div_ceil(resident);
    let warps_per_block = w.threads_per_block.max(1).div_ceil(32) as f64;
    let blocks = w.blocks as f64;
    let per_warp = w.warp_instructions as f64 / (blocks * warps_per_block);
    // Cycles one warp's instructions take a scheduler: FMAs at their
    // pipes' rate where the constants separate them.
    let issue_cycles = match f.fma_ipc {
        Some(fma_ipc) => {
            let fmas = (w.fma_instructions.min(w.warp_instructions)) as f64 / (blocks * warps_per_block);
            (per_warp - fmas) / f.ipc + fmas / fma_ipc
        }
        None => per_warp / f.ipc,
    };
    // The schedulers' throughput over all the SM's blocks, or one warp's
    // latency chain per wave of resident blocks, whichever is longer: a
    // last wave of few blocks issues faster (its warps have the schedulers
    // to themselves) but not faster than its chains.
    let throughput = per_sm as f64 * warps_per_block * issue_cycles / gpu.schedulers_per_sm as f64;
    let barriers_per_warp = w.barriers as f64 / (blocks * warps_per_block);
    let chain = per_warp * f.latency + barriers_per_warp * f.barrier;
    let issue_s = throughput.max(waves as f64 * chain) / gpu.clock_hz;
    let shared_s = per_sm as f64 * (w.shared_wavefronts as f64 / blocks) / gpu.clock_hz;
    let l1_s = w.global_sectors as f64 * 32.0 / (gpu.sms as f64 * gpu.l1_bytes_per_clock * gpu.clock_hz);
    let l2_s = w.block_sectors as f64 * 32.0 / f.l2_bytes_per_s;
    let dram_s = w.dram_bytes as f64 / gpu.dram_bytes_per_s;
    let limits = [("issue", issue_s), ("shared", shared_s), ("l1", l1_s), ("l2", l2_s), ("dram", dram_s)];
    let (bound, most) = limits.iter().copied().fold(("issue", 0.0), |a, b| if b.1 > a.1 { b } else { a });
    Prediction { seconds: most + gpu.launch_s, issue_s, shared_s, l1_s, l2_s, dram_s, resident, waves, bound }
}

/// The predicted time of a run: its kernels one after another.
pub fn predict_run(gpu: &Gpu, f: &Fitted, kernels: &[Work]) -> f64 {
    kernels.iter().map(|w| predict(gpu, f, w).seconds).sum()
}

/// Spearman's rank correlation of two equally long series (ties get their
/// mean rank); `None` for fewer than 2 values or a constant series.
pub fn spearman(a: &[f64], b: &[f64]) -> Option<f64> {
    if a.len() != b.len() || a.len() < 2 {
        return None;
    }
    let (ra, rb) = (ranks(a), ranks(b));
    let mean = (a.len() as f64 - 1.0) / 2.0;
    let (mut num, mut da, mut db) = (0.0, 0.0, 0.0);
    for (x, y) in ra.iter().zip(&rb) {
        num += (x - mean) * (y - mean);
        da += (x - mean) * (x - mean);
        db += (y - mean) * (y - mean);
    }
    (da > 0.0 && db > 0.0).then(|| num / (da * db).sqrt())
}

fn ranks(v: &[f64]) -> Vec<f64> {
    let mut order: Vec<usize> = (0..v.len()).collect();
    order.sort_by(|&i, &j| v[i].total_cmp(&v[j]));
    let mut r = vec![0.0; v.len()];
    let mut i = 0;
    while i < order.len() {
        let mut j = i;
        while j + 1 < order.len() && v[order[j + 1]] == v[order[i]] {
            j += 1;
        }
        for &k in &order[i..=j] {
            r[k] = (i + j) as f64 / 2.0;
        }
        i = j + 1;
    }
    r
}

/// One measured candidate: its kernels' work and its measured seconds.
#[derive(Clone, Debug)]
pub struct Sample {
    pub group: String,
    pub label: String,
    pub kernels: Vec<Work>,
    pub measured_s: f64,
}

/// Mean absolute log(predicted / measured) over `samples`: robust, so that
/// a variant the model cannot explain (30x off) weighs 3.4, not 11.6 as its
/// square would, and does not drag every other prediction.
pub fn log_error(gpu: &Gpu, f: &Fitted, samples: &[Sample]) -> f64 {
    let n = samples.len().max(1) as f64;
    samples.iter().map(|s| (predict_run(gpu, f, &s.kernels) / s.measured_s).ln().abs()).sum::<f64>() / n
}

/// The constants that minimise [`log_error`] on `samples`: a grid search
/// over physically plausible ranges (ipc 0.1-1, latency 1-64 cycles,
/// barrier 16-2048 cycles, L2 3-12 TB/s: no less than the DRAM's; where
/// the samples count FMAs, fma_ipc 0.5-1), geometric steps.
pub fn fit(gpu: &Gpu, samples: &[Sample]) -> Fitted {
    let steps = |lo: f64, hi: f64, n: usize| -> Vec<f64> { (0..n).map(|i| lo * (hi / lo).powf(i as f64 / (n - 1) as f64)).collect() };
    let counts_fmas = samples.iter().any(|s| s.kernels.iter().any(|w| w.fma_instructions > 0));
    let fma_ipcs: Vec<Option<f64>> = if counts_fmas { steps(0.5, 1.0, 8).into_iter().map(Some).collect() } else { vec![None] };
    let mut best = (f64::INFINITY, H100_FIT);
    for &fma_ipc in &fma_ipcs {
        for &ipc in &steps(0.1, 1.0, 21) {
            for &latency in &steps(1.0, 64.0, 13) {
                for &barrier in &steps(16.0, 2048.0, 15) {
                    for &l2 in &steps(3e12, 12e12, 9) {
                        let f = Fitted { ipc, latency, barrier, l2_bytes_per_s: l2, fma_ipc };
                        let e = log_error(gpu, &f, samples);
                        if e < best.0 {
                            best = (e, f);
                        }
                    }
                }
            }
        }
    }
    best.1
}

#[cfg(test)]
mod tests {
    use super::*;

    fn work(blocks: u64, threads: u64) -> Work {
        Work { name: "k".into(), blocks, threads_per_block: threads, registers: 32, ..Work::default() }
    }

    const F: Fitted = Fitted { ipc: 0.5, latency: 10.0, barrier: 100.0, l2_bytes_per_s: 5e12, fma_ipc: None };

    #[test]
    fn a_pure_bandwidth_kernel_takes_its_bytes_over_the_bandwidth() {
        // 1 GB and nothing else: 1e9 / 2.97e12 s plus the launch.
        let w = Work { dram_bytes: 1_000_000_000, ..work(1, 32) };
        let p = predict(&H100, &F, &w);
        assert_eq!(p.bound, "dram");
        assert!((p.seconds - (1e9 / 2.97e12 + 3e-6)).abs() < 1e-12, "{p:?}");
        // Distinct sectors: 1e8 of 32 bytes at 5 TB/s from the L2.
        let w = Work { global_sectors: 100_000_000, block_sectors: 100_000_000, ..work(1, 32) };
        let p = predict(&H100, &F, &w);
        assert_eq!(p.bound, "l2");
        assert!((p.l2_s - 3.2e9 / 5e12).abs() < 1e-15);
        // Requested 10 times over (hits in L1): the L1s' 132 x 128 bytes
        // per cycle limit.
        let w = Work { global_sectors: 1_000_000_000, block_sectors: 100_000_000, ..work(1, 32) };
        let p = predict(&H100, &F, &w);
        assert_eq!(p.bound, "l1");
        assert!((p.l1_s - 3.2e10 / (132.0 * 128.0 * 1.98e9)).abs() < 1e-15);
    }

    #[test]
    fn occupancy_limits() {
        // 256 threads: 8 blocks by threads; 32 registers allow 8 too.
        assert_eq!(resident_blocks(&H100, &work(1, 256)), 8);
        // 128 registers x 256 threads = 32 Ki: 2 blocks (ncu's figure for
        // the matmul kernel of 2026-11-25).
        assert_eq!(resident_blocks(&H100, &Work { registers: 128, ..work(1, 256) }), 2);
        // 40 KB of shared memory (+1 KB reserved): 228 / 41 = 5.
        assert_eq!(resident_blocks(&H100, &Work { shared_bytes_per_block: 40 * 1024, ..work(1, 64) }), 5);
        // 32 blocks per SM at most.
        assert_eq!(resident_blocks(&H100, &Work { registers: 8, ..work(1, 32) }), 32);
    }

    #[test]
    fn waves_quantise_the_latency_chain_not_the_throughput() {
        // One-warp blocks, 32 resident per SM: 4224 blocks are one wave,
        // 4225 two. 1000 instructions per warp: the throughput is 32 x 1000
        // / (4 x 0.5) = 16,000 cycles for 32 blocks, 16,500 for 33; the
        // chain 10,000 cycles per wave.
        let w = |blocks: u64| Work { registers: 8, warp_instructions: blocks * 1000, ..work(blocks, 32) };
        let (one, two) = (predict(&H100, &F, &w(4224)), predict(&H100, &F, &w(4225)));
        assert_eq!((one.resident, one.waves, two.waves), (32, 1, 2));
        assert!((one.issue_s - 16_000.0 / 1.98e9).abs() < 1e-12, "{one:?}");
        assert!((two.issue_s - 20_000.0 / 1.98e9).abs() < 1e-12, "{two:?}");
        // Without the chain, a 33rd block costs only its own throughput.
        let g = Fitted { latency: 1.0, ..F };
        let (one, two) = (predict(&H100, &g, &w(4224)), predict(&H100, &g, &w(4225)));
        assert!((two.issue_s / one.issue_s - 33.0 / 32.0).abs() < 1e-9);
    }

    #[test]
    fn fmas_issue_at_their_own_rate_where_the_constants_separate_them() {
        // One wave of 4224 one-warp blocks (32 per SM), 1000 instructions
        // per warp of which 600 FMAs: per SM 32 warps x (400 / 0.5 + 600 /
        // 1.0) / 4 schedulers = 11,200 cycles; without `fma_ipc`, all 1000
        // at 0.5: 16,000. A profile without FMA counts is unchanged.
        let w = Work { registers: 8, warp_instructions: 4224 * 1000, fma_instructions: 4224 * 600, ..work(4224, 32) };
        let g = Fitted { latency: 1.0, fma_ipc: Some(1.0), ..F };
        assert!((predict(&H100, &g, &w).issue_s - 11_200.0 / 1.98e9).abs() < 1e-12);
        assert!((predict(&H100, &Fitted { fma_ipc: None, ..g }, &w).issue_s - 16_000.0 / 1.98e9).abs() < 1e-12);
        let old = Work { fma_instructions: 0, ..w.clone() };
        assert_eq!(predict(&H100, &g, &old).issue_s, predict(&H100, &Fitted { fma_ipc: None, ..g }, &old).issue_s);
        // The H200 is the H100 but for its memory.
        assert_eq!(Gpu { name: H100.name, dram_bytes_per_s: H100.dram_bytes_per_s, ..H200 }, H100);
        assert_eq!(calibration_for("NVIDIA H200").0.name, H200.name);
        assert_eq!(calibration_for("NVIDIA H100 80GB HBM3").0.name, H100.name);
    }

    #[test]
    fn a_small_grid_is_latency_bound() {
        // 132 blocks of one warp: one per SM; the chain (1000 x 10 cycles)
        // exceeds the throughput (1000 / (4 x 0.5) = 500 cycles).
        let w = Work { warp_instructions: 132 * 1000, ..work(132, 32) };
        let p = predict(&H100, &F, &w);
        assert!((p.issue_s - 10_000.0 / 1.98e9).abs() < 1e-12);
    }

    #[test]
    fn spearman_of_known_series() {
        assert_eq!(spearman(&[1.0, 2.0, 3.0], &[10.0, 20.0, 30.0]), Some(1.0));
        assert_eq!(spearman(&[1.0, 2.0, 3.0], &[3.0, 2.0, 1.0]), Some(-1.0));
        // Ranks (0, 1, 2, 3) against (1, 0, 3, 2): 1 - 6 * 4 / (4 * 15) = 0.6.
        assert!((spearman(&[1.0, 2.0, 3.0, 4.0], &[2.0, 1.0, 4.0, 3.0]).unwrap() - 0.6).abs() < 1e-12);
        assert_eq!(spearman(&[1.0, 1.0], &[1.0, 2.0]), None);
    }
}
