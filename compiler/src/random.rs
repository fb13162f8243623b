//! splitmix64, written once, and the two generators built on it:
//!
//! - [`Stream`]: THE generator behind `RANDOM(lo, hi, T)` (docs/language.md
//!   section 3). Every backend must produce bit-identical values, so this is
//!   the only place the formula is written; code generators emit code that
//!   mirrors these functions exactly, taking their constants from here
//!   ([`GOLDEN`], [`SPLITMIX_ROUNDS`]).
//! - [`Rng`]: the sequential generator sema draws dims with (`--seed`,
//!   docs/shapes.md); it never reaches generated code.
//!
//! The element at row-major flat position `n` of array `name` under seed
//! `s` draws `x = splitmix64(s ^ fnv1a64(name) ^ (n * 0x9E3779B97F4A7C15))`
//! (all u64, wrapping), where `n` is the flat position of the left-hand cell
//! being written.

/// Golden-ratio increment of splitmix64, also used to spread `n`.
pub const GOLDEN: u64 = 0x9E37_79B9_7F4A_7C15;
/// The finaliser of splitmix64 as rounds `z ^= z >> shift; z *= mul` (the
/// last without a multiplier): [`splitmix64`] and the code generators both
/// run exactly these.
pub const SPLITMIX_ROUNDS: [(u32, Option<u64>); 3] = [(30, Some(0xBF58_476D_1CE4_E5B9)), (27, Some(0x94D0_49BB_1331_11EB)), (31, None)];
const FNV_OFFSET: u64 = 0xcbf2_9ce4_8422_2325;
const FNV_PRIME: u64 = 0x0000_0100_0000_01b3;

/// One step of splitmix64 applied to `z` (Steele, Lea & Flood 2014).
pub fn splitmix64(z: u64) -> u64 {
    let mut z = z.wrapping_add(GOLDEN);
    for (shift, mul) in SPLITMIX_ROUNDS {
        z ^= z >> shift;
        if let Some(mul) = mul {
            z = z.wrapping_mul(mul);
        }
    }
    z
}

/// 64-bit FNV-1a over bytes.
pub fn fnv1a64(bytes: &[u8]) -> u64 {
    bytes.iter().fold(FNV_OFFSET, |h, &b| (h ^ b as u64).wrapping_mul(FNV_PRIME))
}

/// The random stream of one array under one seed: the name is hashed once.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Stream {
    key: u64,
}

impl Stream {
    pub fn new(seed: u64, array_name: &str) -> Stream {
        Stream { key: seed ^ fnv1a64(array_name.as_bytes()) }
    }

    /// The raw 64 bits for flat position `n`.
    pub fn bits(self, n: u64) -> u64 {
        splitmix64(self.key ^ n.wrapping_mul(GOLDEN))
    }

    /// INT draw in `[lo, hi)`: `lo + (x % (hi - lo))`, modulo on u64, sum
    /// in i64; `hi <= lo` gives `lo`.
    pub fn int(self, n: u64, lo: i64, hi: i64) -> i64 {
        if hi <= lo {
            return lo;
        }
        // hi - lo > 0 fits in u64 even for extreme i64 bounds.
        let span = (hi as i128 - lo as i128) as u64;
        lo.wrapping_add((self.bits(n) % span) as i64)
    }

    /// FLOAT draw in `[lo, hi)`: `lo + (hi - lo) * ((x >> 11) * 2^-53)`;
    /// `hi <= lo` (or a NaN bound) gives `lo`.
    // `!(hi > lo)` on purpose: NaN bounds give `lo` too.
    #[allow(clippy::neg_cmp_op_on_partial_ord)]
    pub fn float(self, n: u64, lo: f64, hi: f64) -> f64 {
        if !(hi > lo) {
            return lo;
        }
        let unit = (self.bits(n) >> 11) as f64 * (1.0 / (1u64 << 53) as f64);
        lo + (hi - lo) * unit
    }
}

/// The splitmix64 sequence sema draws dims from: deterministic in the seed,
/// tiny, good enough to draw dims (array contents use [`Stream`]).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Rng(u64);

impl Rng {
    pub fn new(seed: u64) -> Rng {
        Rng(seed ^ 0x5EED_D1A5_0FE1_u64)
    }

    /// The next 64 bits: splitmix64 of the state, which then advances by
    /// [`GOLDEN`].
    // Not an `Iterator`: the stream never ends, and callers draw by name.
    #[allow(clippy::should_implement_trait)]
    pub fn next(&mut self) -> u64 {
        let x = splitmix64(self.0);
        self.0 = self.0.wrapping_add(GOLDEN);
        x
    }

    /// Uniform in `[lo, hi]` (inclusive); `lo` when `hi < lo`.
    pub fn range(&mut self, lo: i64, hi: i64) -> i64 {
        if hi <= lo {
            return lo;
        }
        let span = (hi as i128 - lo as i128 + 1) as u128;
        (lo as i128 + (self.next() as u128 % span) as i128) as i64
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    // Expected values below were computed with an independent Python
    // transcription of docs/language.md section 3 (arbitrary-precision ints masked
    // to 64 bits), not with this code.

    #[test]
    fn splitmix64_reference_output() {
        // The first output of the reference splitmix64 generator seeded 0.
        assert_eq!(splitmix64(0), 0xE220_A839_7B1D_CDAF);
    }

    #[test]
    fn fnv1a64_reference_values() {
        assert_eq!(fnv1a64(b""), 0xcbf2_9ce4_8422_2325);
        assert_eq!(fnv1a64(b"a"), 0xaf63_dc4c_8601_ec8c);
    }

    #[test]
    fn stream_bits_and_draws() {
        let a = Stream::new(0, "a");
        assert_eq!(a.bits(0), 0x5f29_c2aa_dd9b_8527);
        assert_eq!(a.int(0, 3, 10), 4);
        assert!((a.float(0, -5.0, 5.0) - (-1.2826903656459088)).abs() < 1e-15);

        let x = Stream::new(7, "x");
        assert_eq!(x.bits(5), 0xd623_be64_34ce_d8b9);
        assert_eq!(x.int(5, 3, 10), 9);
        assert!((x.float(5, -5.0, 5.0) - 3.364829058307878).abs() < 1e-15);

        let idx = Stream::new(0, "idx");
        assert_eq!(idx.bits(3), 0xe387_4f3e_aa37_35af);
        assert_eq!(idx.int(3, 3, 10), 5);
    }

    #[test]
    fn empty_ranges_give_lo() {
        let s = Stream::new(1, "z");
        assert_eq!(s.int(0, 5, 5), 5);
        assert_eq!(s.int(0, 5, -3), 5);
        assert_eq!(s.float(0, 2.0, 1.0), 2.0);
        assert!(s.float(0, 0.0, f64::NAN) == 0.0);
    }

    #[test]
    fn draws_stay_in_range() {
        let s = Stream::new(42, "w");
        for n in 0..10_000 {
            let i = s.int(n, -7, 4);
            assert!((-7..4).contains(&i));
            let f = s.float(n, -1.0, 1.0);
            assert!((-1.0..1.0).contains(&f));
        }
        // Extreme bounds neither overflow nor leave the range.
        let i = s.int(3, i64::MIN, i64::MAX);
        assert!(i < i64::MAX);
    }

    #[test]
    fn rng_is_deterministic_and_in_range() {
        let (mut a, mut b) = (Rng::new(7), Rng::new(7));
        for _ in 0..100 {
            let x = a.range(3, 5);
            assert_eq!(x, b.range(3, 5));
            assert!((3..=5).contains(&x));
        }
        assert_eq!(a.range(4, 4), 4);
    }

    #[test]
    fn rng_is_the_splitmix64_sequence() {
        // The reference splitmix64 generator: state += GOLDEN, then the
        // finaliser of the new state. Expected values written out from the
        // generator as sema had it before it shared `splitmix64` (its own
        // copy: state += GOLDEN, then the three rounds).
        let mut r = Rng::new(0);
        let state = 0x5EED_D1A5_0FE1_u64;
        assert_eq!(r.next(), splitmix64(state));
        assert_eq!(r.next(), splitmix64(state.wrapping_add(GOLDEN)));
        let mut r = Rng::new(0);
        assert_eq!([r.next(), r.next(), r.next()], [0xC006_CB9A_7EE8_1382, 0x2A9F_8D4C_3C34_68FA, 0x99C7_E988_7590_94A0]);
    }
}
