//! The targets the loop passes tile for: the host CPU's vector registers
//! ([`HostTarget`], `register-tiles{layout=blocked}`) and the GPU.
//!
//! The GPU target: what the GPU passes (`register-tiles`, `block-tiles`,
//! `split-reductions`, `sink-broadcasts`), the thread-block verifier and
//! the bundle writer's launch configuration know about the device, in one
//! object ([`GpuTarget`]) instead of constants spread over those files
//! (issue #27 item 3; docs/passes.md, "The GPU target").
//!
//! Two kinds of fields:
//!
//! - *hardware limits* of the compute capability, from NVIDIA's CUDA C++
//!   Programming Guide, "Technical Specifications per Compute Capability"
//!   (warp size, threads per block and per SM, registers, shared memory);
//! - *policy*: the thresholds and tile menus the passes choose from. They
//!   were tuned on a 132-SM H100 and do not depend on the compute
//!   capability today: [`GpuTarget::for_sm`] gives the same policy for
//!   every `sm`, so `--target sm_90` and `--target sm_80` compile to the
//!   same loop module (only the PTX differs). A tuner may change them on a
//!   copy of the object.
//!
//! The verifier's limits ([`STATIC_SHARED_BYTES`],
//! [`super::MAX_BLOCK_THREADS`]) are the portable ones, which every GPU
//! since sm_20 has: a loop module is not tied to one target.

use super::MAX_BLOCK_THREADS;

/// Static shared memory a block may use on every GPU since sm_20 (more
/// needs a dynamic allocation and an opt-in attribute).
pub const STATIC_SHARED_BYTES: i64 = 48 * 1024;

/// What the GPU passes and the launch configuration know about the device.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct GpuTarget {
    /// Compute capability as `80`, `90`, ...
    pub sm: u32,

    // Hardware limits of the compute capability (CUDA C++ Programming
    // Guide, "Technical Specifications per Compute Capability").
    /// Threads per warp (32 on every NVIDIA GPU).
    pub warp_size: i64,
    /// Threads per block at most (1024 since sm_20).
    pub max_threads_per_block: i64,
    /// Resident threads per SM at most (2048 on sm_60/70/80/90, 1024 on
    /// sm_75, 1536 on sm_86/89).
    pub max_threads_per_sm: i64,
    /// 32-bit registers per SM (64 Ki since sm_50).
    pub registers_per_sm: i64,
    /// 32-bit registers per thread at most (255 since sm_35).
    pub registers_per_thread: i64,
    /// Static shared memory per block ([`STATIC_SHARED_BYTES`]): what
    /// `block-tiles`' shared buffers may take together.
    pub shared_bytes_per_block: i64,
    /// Shared memory per block with the opt-in (unused: eintup allocates
    /// shared memory statically): 48 KiB up to sm_62, 96 KiB sm_70, 64 KiB
    /// sm_75, 163 KiB sm_80/87, 99 KiB sm_86/89, 227 KiB sm_90.
    pub max_shared_bytes_per_block: i64,

    // Policy: the same for every `sm` (module doc).
    /// SMs the thresholds below were sized for (a 132-SM H100). Not a
    /// property of the compute capability (an sm_80 part has 108 SMs or
    /// fewer), so the same for every `sm`.
    pub sm_count: i64,
    /// `register-tiles`: the cyclic tiles `(TM, TN)` tried, largest first.
    pub register_tiles: [(i64, i64); 3],
    /// `register-tiles` (and `sink-broadcasts`): threads a reshaped kernel
    /// keeps at least (32 per SM): below that, fewer larger tiles would
    /// leave SMs idle.
    pub min_threads: i64,
    /// `split-reductions`: partial sums per cell (one warp).
    pub lanes: i64,
    /// `split-reductions`: only reductions of at least this many terms are
    /// split (each lane gets two or more).
    pub split_min_trip: i64,
    /// `split-reductions`: the lanes halve (from `lanes`) while each lane
    /// would sum fewer than this many terms and the kernel keeps
    /// `min_threads` threads: the partial sums, written once and read
    /// once, then cost at most 2/64 of the loads' bytes (issue #30: 1.05x
    /// the compulsory bytes; 512 rows of 1024 take 16 lanes).
    pub split_lane_terms: i64,
    /// `split-reductions`: the lanes halve down to this many at most (8
    /// lanes of `f32` still read whole 32-byte sectors).
    pub split_min_lanes: i64,
    /// `split-reductions`: kernels with more cells keep one thread per cell
    /// (2^17 threads already fill an H100: 132 SMs x 1024 resident threads
    /// at the occupancy of these kernels).
    pub split_max_cells: i64,
    /// `block-tiles`: threads along one dimension of a block at most.
    pub block_tile_max_dim: i64,
    /// `block-tiles`: threads per block at most (8 warps, as for the other
    /// kernels).
    pub block_tile_max_threads: i64,
    /// `block-tiles`: threads a block must have at least (two warps).
    pub block_tile_min_threads: i64,
    /// `block-tiles`: reduction steps per stage, tried in order when the
    /// whole reduction is longer than the first.
    pub block_tile_steps: [i64; 4],
    /// Launches: threads per block (the usual choice for memory-bound
    /// kernels on sm_80/sm_90: 8 warps, full occupancy with <= 32
    /// registers per thread).
    pub launch_block: i64,
    /// Launches: smallest block, used when a launch has too few threads for
    /// `launch_min_blocks` blocks of `launch_block` (two warps).
    pub launch_min_block: i64,
    /// Launches: blocks a launch should have to spread over every SM (about
    /// two per SM of a 132-SM H100).
    pub launch_min_blocks: i64,
    /// Launches: blocks per launch at most (4096 x 256 = 1M threads,
    /// several waves on the largest GPUs); kernels loop grid-stride over
    /// the rest.
    pub grid_cap: i64,
}

/// The default target (`--target sm_80`).
pub const DEFAULT_SM: u32 = 80;

impl GpuTarget {
    /// The target for compute capability `sm` (`80` for sm_80). Hardware
    /// limits follow the capability; the policy is the same for every
    /// `sm` (module doc).
    pub const fn for_sm(sm: u32) -> GpuTarget {
        let max_threads_per_sm = match sm {
            75 => 1024,
            86 | 89 => 1536,
            _ => 2048,
        };
        let max_shared_bytes_per_block = match sm {
            0..=69 => 48 * 1024,
            70..=74 => 96 * 1024,
            75..=79 => 64 * 1024,
            80 | 87 => 163 * 1024,
            81..=89 => 99 * 1024,
            _ => 227 * 1024,
        };
        let lanes = 32;
        GpuTarget {
            sm,
            warp_size: 32,
            max_threads_per_block: MAX_BLOCK_THREADS,
            max_threads_per_sm,
            registers_per_sm: 64 * 1024,
            registers_per_thread: 255,
            shared_bytes_per_block: STATIC_SHARED_BYTES,
            max_shared_bytes_per_block,
            sm_count: 132,
            register_tiles: [(8, 8), (4, 4), (2, 2)],
            min_threads: 4096,
            lanes,
            split_min_trip: 2 * lanes,
            split_lane_terms: 64,
            split_min_lanes: 8,
            split_max_cells: 1 << 17,
            block_tile_max_dim: 16,
            block_tile_max_threads: 256,
            block_tile_min_threads: 64,
            block_tile_steps: [16, 8, 4, 2],
            launch_block: 256,
            launch_min_block: 64,
            launch_min_blocks: 256,
            grid_cap: 4096,
        }
    }

    /// The most elements of `dt` one atomic add covers: 4 `f32` from sm_90
    /// (`red.global.add.v4.f32`, PTX ISA 8.1: 16 bytes, one L2 atomic
    /// where 4 scalar ones were), else 1 (PTX has no vector atomic add of
    /// `f64` or `s32`).
    pub fn vector_atomic_lanes(&self, dt: super::DType) -> i64 {
        if self.sm >= 90 && dt == super::DType::F32 {
            4
        } else {
            1
        }
    }

    /// Grid and block for `threads` threads (> 0) of a kernel that is not
    /// block-tiled: the block is the largest power of two from
    /// `launch_min_block` to `launch_block` that still gives
    /// `launch_min_blocks` blocks (fewer than `launch_min_block` threads:
    /// one block of whole warps); at most `grid_cap` blocks.
    pub fn launch_dims(&self, threads: i64) -> (u32, u32) {
        let block = if threads < self.launch_min_block {
            ((threads + self.warp_size - 1) / self.warp_size) * self.warp_size
        } else {
            let per_block = (threads / self.launch_min_blocks).clamp(self.launch_min_block, self.launch_block);
            1i64 << (63 - per_block.leading_zeros())
        };
        let grid = ((threads + block - 1) / block).min(self.grid_cap);
        (grid as u32, block as u32)
    }
}

impl Default for GpuTarget {
    fn default() -> GpuTarget {
        GpuTarget::for_sm(DEFAULT_SM)
    }
}

/// The host CPU's vector register file, as `register-tiles{layout=blocked}`
/// sees it: a register tile whose sums, streamed-operand vectors and
/// broadcast do not all fit in registers spills on every step of the
/// reduction. A 4 x 16 f64 tile needs 21 vector registers of 32 bytes:
/// an AVX-512 CPU has 32 (EVEX encodes `ymm16`-`ymm31`), an AVX2 CPU 16,
/// where the 1024 chain's products took 1.7x the time of a 4 x 8 tile
/// (docs/journal/performance.md, section 9).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct HostTarget {
    /// Vector registers: 16 with SSE and AVX2, 32 with AVX-512VL.
    pub vector_registers: i64,
    /// Bytes of the vectors LLVM's vectoriser makes: 16 with SSE, 32 with
    /// AVX2 and on AVX-512 CPUs (LLVM prefers 256-bit vectors there).
    pub vector_bytes: i64,
    /// The compiled program is kept and run many times (the Python
    /// package's cached programs), not once (`eintup run`): tiles whose
    /// extra compile time one run would not recover are worth it
    /// (`register_tiles::host_tiles`; docs/journal/performance.md section 19).
    pub reused: bool,
}

impl HostTarget {
    /// The x86-64 baseline and `x86-64-v2` (SSE).
    pub const SSE: HostTarget = HostTarget { vector_registers: 16, vector_bytes: 16, reused: false };
    /// `x86-64-v3` (AVX2).
    pub const AVX2: HostTarget = HostTarget { vector_registers: 16, vector_bytes: 32, reused: false };
    /// `x86-64-v4` (AVX-512, 256-bit vectors preferred).
    pub const AVX512: HostTarget = HostTarget { vector_registers: 32, vector_bytes: 32, reused: false };

    /// Vector registers a blocked `TM x TN` tile of `elem_bytes`-byte
    /// cells keeps live in its inner step: `TM x V` sums, the `V` vectors
    /// of the streamed operand's row and one broadcast value, where `V =
    /// ceil(TN x elem_bytes / vector_bytes)`.
    pub fn tile_registers(&self, (tm, tn): (i64, i64), elem_bytes: i64) -> i64 {
        let v = (tn * elem_bytes + self.vector_bytes - 1) / self.vector_bytes.max(1);
        tm * v + v + 1
    }

    /// The same CPU, for a program that is run many times (`reused`).
    pub fn reused(self) -> HostTarget {
        HostTarget { reused: true, ..self }
    }

    /// Whether that tile fits in the register file.
    pub fn fits(&self, tile: (i64, i64), elem_bytes: i64) -> bool {
        self.tile_registers(tile, elem_bytes) <= self.vector_registers
    }
}

/// Without a CPU named (`etopt --passes` without `--host`, unit tests):
/// AVX2's 16 registers, the most common x86-64 today; a tile that fits
/// them runs on an AVX-512 CPU too.
impl Default for HostTarget {
    fn default() -> HostTarget {
        HostTarget::AVX2
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_host_tile_fits_when_its_sums_operands_and_broadcast_do() {
        // 4x16 f64: 16 sums of 4 lanes, 4 row vectors, 1 broadcast.
        assert_eq!(HostTarget::AVX2.tile_registers((4, 16), 8), 21);
        assert!(!HostTarget::AVX2.fits((4, 16), 8) && HostTarget::AVX512.fits((4, 16), 8));
        assert!(HostTarget::AVX2.fits((4, 8), 8) && HostTarget::AVX2.fits((4, 16), 4));
        // SSE: 4x4 f64 is 8 sums of 2 lanes + 2 + 1.
        assert_eq!(HostTarget::SSE.tile_registers((4, 4), 8), 11);
        assert!(!HostTarget::SSE.fits((4, 8), 8) && HostTarget::SSE.fits((4, 8), 4));
        // A row narrower than a vector still takes one: 2 sums, 1, 1.
        assert_eq!(HostTarget::AVX2.tile_registers((2, 2), 4), 4);
    }

    #[test]
    fn the_policy_is_the_same_for_every_sm() {
        let policy = |t: GpuTarget| GpuTarget { sm: 0, max_threads_per_sm: 0, max_shared_bytes_per_block: 0, ..t };
        for sm in [60, 70, 75, 80, 86, 89, 90] {
            assert_eq!(policy(GpuTarget::for_sm(sm)), policy(GpuTarget::default()), "sm_{sm}");
        }
        let t = GpuTarget::default();
        assert_eq!((t.sm, t.warp_size, t.max_threads_per_block, t.shared_bytes_per_block), (80, 32, 1024, 48 * 1024));
        assert_eq!((GpuTarget::for_sm(90).max_shared_bytes_per_block, GpuTarget::for_sm(86).max_threads_per_sm), (227 * 1024, 1536));
    }
}
