//! The functions through `scalar`: special values bit for bit, and the
//! error against Rust's std (glibc's libm, itself within about half an ulp
//! for exp, log and pow, and up to 2 ulp for tanh) over dense sweeps.

use super::scalar;

/// Distance in units in the last place: the number of doubles between a
/// and b, counting across zero (+0 and -0 are the same point). Two NaNs are
/// 0 apart, a NaN and a number infinitely.
fn ulps(a: f64, b: f64) -> u64 {
    if a.is_nan() || b.is_nan() {
        return if a.is_nan() && b.is_nan() { 0 } else { u64::MAX };
    }
    // Sign-magnitude bits to a line of integers, ordered like the doubles.
    let line = |x: f64| {
        let bits = x.to_bits() as i64;
        if bits < 0 {
            -(bits & i64::MAX) as i128
        } else {
            bits as i128
        }
    };
    (line(a) - line(b)).unsigned_abs() as u64
}

/// Bitwise equality, except that every NaN must be the canonical one.
fn assert_same(got: f64, want: f64, what: &str) {
    if want.is_nan() {
        assert_eq!(got.to_bits(), f64::NAN.to_bits(), "{what}: got {got:e}, want the canonical NaN");
    } else {
        assert_eq!(got.to_bits(), want.to_bits(), "{what}: got {got:e}, want {want:e}");
    }
}

/// splitmix64: a fixed, dependency-free stream of inputs.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }

    /// Uniform in [lo, hi).
    fn uniform(&mut self, lo: f64, hi: f64) -> f64 {
        lo + (hi - lo) * ((self.next() >> 11) as f64 / (1u64 << 53) as f64)
    }

    /// 2^e with e uniform in [lo, hi): log-uniform magnitudes.
    fn magnitude(&mut self, lo: f64, hi: f64) -> f64 {
        self.uniform(lo, hi).exp2()
    }

    fn sign(&mut self) -> f64 {
        if self.next() & 1 == 0 {
            1.0
        } else {
            -1.0
        }
    }
}

/// POINTS inputs drawn by the generators in turn; asserts that the largest
/// distance between `ours` and `reference` is at most `max_ulps`, and that
/// zeros agree in sign.
fn sweep<X: Copy + std::fmt::Debug>(name: &str, max_ulps: u64, gens: &[fn(&mut Rng) -> X], ours: impl Fn(X) -> f64, reference: impl Fn(X) -> f64) {
    const POINTS: usize = 200_000;
    let mut rng = Rng(name.bytes().fold(0x5eed, |h, b| h.wrapping_mul(31).wrapping_add(b as u64)));
    let mut worst = (0, None);
    for i in 0..POINTS {
        let x = gens[i % gens.len()](&mut rng);
        let (got, want) = (ours(x), reference(x));
        if got == 0.0 && want == 0.0 {
            assert_same(got, want, &format!("{name}{x:?}"));
        }
        let d = ulps(got, want);
        if d > worst.0 {
            worst = (d, Some(x));
        }
    }
    if let (d, Some(x)) = worst {
        assert!(d <= max_ulps, "{name}: {d} ulp at {x:?}: {:e} vs std {:e}", ours(x), reference(x));
    }
}

const MIN_SUB: f64 = 5e-324;

#[test]
fn exp_special_values() {
    let cases = [
        (0.0, 1.0),
        (-0.0, 1.0),
        (f64::INFINITY, f64::INFINITY),
        (f64::NEG_INFINITY, 0.0),
        (f64::NAN, f64::NAN),
        (-f64::NAN, f64::NAN),
        (f64::from_bits(709.782712893384f64.to_bits() + 1), f64::INFINITY),
        (710.0, f64::INFINITY),
        (1e300, f64::INFINITY),
        (f64::MAX, f64::INFINITY),
        (-745.2, 0.0),
        (-1e300, 0.0),
        (f64::MIN, 0.0),
        (-745.1332191019411, MIN_SUB),
        (MIN_SUB, 1.0),
        (-MIN_SUB, 1.0),
        (1e-20, 1.0),
    ];
    for (x, want) in cases {
        assert_same(scalar::exp(x), want, &format!("exp({x:e})"));
    }
    // fdlibm's threshold itself is the largest x with a finite exp.
    assert!(scalar::exp(709.782712893384) < f64::INFINITY);
    // Exact powers of two down through the subnormals.
    for k in -1074..1024 {
        let x = k as f64 * std::f64::consts::LN_2;
        assert!(ulps(scalar::exp(x), x.exp()) <= 1, "exp({x:e})");
    }
}

#[test]
fn exp_sweep() {
    sweep(
        "exp",
        1,
        &[
            |r| r.uniform(-745.2, 709.8),
            |r| r.uniform(-1.0, 1.0),
            |r| r.uniform(-745.2, -708.0),
            |r| r.uniform(700.0, 709.78),
            |r| r.sign() * r.magnitude(-60.0, 9.5),
            |r| r.uniform(-1e-5, 1e-5),
            |r| f64::from_bits(r.next()), // any double, NaNs included
        ],
        scalar::exp,
        f64::exp,
    );
}

#[test]
fn log_special_values() {
    let cases = [
        (1.0, 0.0),
        (0.0, f64::NEG_INFINITY),
        (-0.0, f64::NEG_INFINITY),
        (f64::INFINITY, f64::INFINITY),
        (f64::NEG_INFINITY, f64::NAN),
        (-1.0, f64::NAN),
        (-MIN_SUB, f64::NAN),
        (f64::NAN, f64::NAN),
        (-f64::NAN, f64::NAN),
        (std::f64::consts::E, 1.0),
        (MIN_SUB, -744.4400719213812),
        (f64::MAX, 709.782712893384),
    ];
    for (x, want) in cases {
        assert_same(scalar::log(x), want, &format!("log({x:e})"));
    }
    for k in -1074..1024 {
        let x = (k as f64).exp2();
        assert!(ulps(scalar::log(x), x.ln()) <= 1, "log(2^{k})");
    }
}

#[test]
fn log_sweep() {
    sweep(
        "log",
        1,
        &[
            |r| r.magnitude(-1074.0, 1024.0),
            |r| r.uniform(0.5, 2.0),
            |r| 1.0 + r.uniform(-1e-6, 1e-6),
            |r| f64::from_bits(r.next() >> 12), // subnormals
            |r| f64::from_bits(r.next() >> 1),  // any positive double
            |r| f64::from_bits(r.next()),       // any double
        ],
        scalar::log,
        f64::ln,
    );
}

#[test]
fn tanh_special_values() {
    let cases = [
        (0.0, 0.0),
        (-0.0, -0.0),
        (f64::INFINITY, 1.0),
        (f64::NEG_INFINITY, -1.0),
        (f64::NAN, f64::NAN),
        (-f64::NAN, f64::NAN),
        (22.0, 1.0),
        (-30.0, -1.0),
        (f64::MAX, 1.0),
        (MIN_SUB, MIN_SUB),
        (-MIN_SUB, -MIN_SUB),
        (1e-300, 1e-300),
        (-1e-17, -1e-17),
    ];
    for (x, want) in cases {
        assert_same(scalar::tanh(x), want, &format!("tanh({x:e})"));
    }
}

#[test]
fn tanh_sweep() {
    // glibc's tanh is itself up to 2 ulp off (ours about 0.6).
    sweep(
        "tanh",
        2,
        &[|r| r.uniform(-25.0, 25.0), |r| r.uniform(-1.2, 1.2), |r| r.sign() * r.magnitude(-60.0, 5.0), |r| r.uniform(0.1, 0.6), |r| f64::from_bits(r.next())],
        scalar::tanh,
        f64::tanh,
    );
}

#[test]
fn pow_special_values() {
    let (inf, nan) = (f64::INFINITY, f64::NAN);
    let cases = [
        // y = ±0 and x = 1 give 1 whatever the other is.
        (nan, 0.0, 1.0),
        (nan, -0.0, 1.0),
        (-inf, 0.0, 1.0),
        (1.0, nan, 1.0),
        (1.0, -inf, 1.0),
        (1.0, inf, 1.0),
        (nan, 1.0, nan),
        (2.0, nan, nan),
        (-1.0, nan, nan),
        (-1.0, inf, 1.0),
        (-1.0, -inf, 1.0),
        // Infinite y.
        (0.5, -inf, inf),
        (-0.5, -inf, inf),
        (0.5, inf, 0.0),
        (2.0, -inf, 0.0),
        (-2.0, inf, inf),
        (0.0, inf, 0.0),
        (-0.0, -inf, inf),
        (inf, -inf, 0.0),
        // Zero x.
        (0.0, -3.0, inf),
        (-0.0, -3.0, -inf),
        (-0.0, -2.0, inf),
        (-0.0, -0.5, inf),
        (0.0, 3.0, 0.0),
        (-0.0, 3.0, -0.0),
        (-0.0, 2.0, 0.0),
        (-0.0, 0.5, 0.0),
        (-0.0, 1e300, 0.0),
        (-0.0, -1e300, inf),
        // Infinite x.
        (-inf, -3.0, -0.0),
        (-inf, -2.0, 0.0),
        (-inf, -0.5, 0.0),
        (-inf, 3.0, -inf),
        (-inf, 2.0, inf),
        (-inf, 0.5, inf),
        (inf, -0.5, 0.0),
        (inf, 0.5, inf),
        // Negative finite x.
        (-2.0, 0.5, nan),
        (-2.0, -1.5, nan),
        (-MIN_SUB, 0.5, nan),
        (-2.0, 3.0, -8.0),
        (-2.0, -3.0, -0.125),
        (-2.0, 2.0, 4.0),
        (-1.0, 9007199254740993.0, 1.0), // 2^53+1 rounds to 2^53: even
        (-1.0, 9007199254740991.0, -1.0),
        (-1.0, 1e300, 1.0),
        (-2.0, 1025.0, -inf),
        (-2.0, -1075.0, -0.0),
        (-2.0, 1024.0, inf),
        // Overflow, underflow, subnormal results and inputs.
        (2.0, 1024.0, inf),
        (2.0, -1075.0, 0.0),
        (2.0, -1074.0, MIN_SUB),
        (MIN_SUB, 1.0, MIN_SUB),
        (MIN_SUB, 0.5, 2.2227587494850775e-162), // 2^-537
        (MIN_SUB, -0.5, 4.4989137945431964e161), // 2^537
        (10.0, 400.0, inf),
        (0.1, 400.0, 0.0),
        (f64::MAX, 2.0, inf),
        // Exact results.
        (3.0, 2.0, 9.0),
        (4.0, 0.5, 2.0),
        (10.0, 22.0, 1e22),
        (2.0, 1023.0, 8.98846567431158e307),
        (0.5, 1.0, 0.5),
    ];
    for (x, y, want) in cases {
        assert_same(scalar::pow(x, y), want, &format!("pow({x:e}, {y:e})"));
    }
}

/// Every pair from a grid of awkward values, against std: bitwise where
/// std gives a NaN, a zero, an infinity or 1, within 2 ulp otherwise.
#[test]
fn pow_grid_against_std() {
    let mut values = vec![0.0, MIN_SUB, 1e-310, f64::MIN_POSITIVE, 1e-300, 0.25, 0.5, 0.9999999999999999, 1.0, 1.0000000000000002, 1.5, 2.0, 2.5, 3.0];
    values.extend([10.0, 1023.5, 1e10, 9007199254740991.0, 9007199254740992.0, 1e300, f64::MAX, f64::INFINITY]);
    let values: Vec<f64> = values.iter().flat_map(|&v| [v, -v]).chain([f64::NAN]).collect();
    for &x in &values {
        for &y in &values {
            let (got, want) = (scalar::pow(x, y), x.powf(y));
            if want.is_nan() || want == 0.0 || want.is_infinite() || want.abs() == 1.0 {
                assert_same(got, want, &format!("pow({x:e}, {y:e})"));
            } else {
                assert!(ulps(got, want) <= 2, "pow({x:e}, {y:e}) = {got:e}, std {want:e}");
            }
        }
    }
}

#[test]
fn pow_sweep() {
    sweep(
        "pow",
        2,
        &[
            |r| (r.magnitude(-30.0, 30.0), r.uniform(-30.0, 30.0)),
            // Results anywhere from the subnormals to the overflow threshold.
            |r| {
                let x = r.magnitude(-1074.0, 1024.0);
                (x, r.uniform(-745.0, 709.7) / x.ln())
            },
            // Large |y*log x| with |log x| small: the double-double log matters.
            |r| {
                let x = r.uniform(0.7, 1.42);
                (x, r.uniform(-745.0, 709.7) / x.ln())
            },
            |r| (1.0 + r.uniform(-1e-6, 1e-6), r.uniform(-7e8, 7e8)),
            |r| (1.0 + r.uniform(-1e-12, 1e-12), r.uniform(-7e14, 7e14)),
            // Near overflow and underflow.
            |r| {
                let x = r.uniform(1.5, 1e10);
                (x, r.uniform(700.0, 709.78) / x.ln())
            },
            |r| {
                let x = r.uniform(1.5, 1e10);
                (x, r.uniform(-745.2, -700.0) / x.ln())
            },
            // Negative x, integer y.
            |r| (-r.uniform(0.01, 100.0), r.uniform(-150.0, 150.0).floor()),
            |r| (r.sign() * r.magnitude(-60.0, 60.0), r.uniform(-12.0, 12.0).floor()),
            // Any doubles, and any x with small y.
            |r| (f64::from_bits(r.next()), f64::from_bits(r.next())),
            |r| (f64::from_bits(r.next()), r.uniform(-3.0, 3.0)),
        ],
        |(x, y)| scalar::pow(x, y),
        |(x, y)| x.powf(y),
    );
}

/// The f32 functions are the f64 ones rounded: within an f32 ulp of std's
/// f64 functions rounded (glibc's own f32 tanh is off by more).
#[test]
fn f32_functions() {
    let ulps32 = |a: f32, b: f64| ulps(a as f64, b as f32 as f64) >> 29;
    let mut rng = Rng(7);
    for _ in 0..10_000 {
        let x = rng.uniform(-100.0, 90.0) as f32;
        let y = rng.uniform(-20.0, 20.0) as f32;
        let (x64, y64) = (x as f64, y as f64);
        assert!(ulps32(scalar::exp_f32(x), x64.exp()) <= 1, "exp_f32({x:e})");
        assert!(ulps32(scalar::log_f32(x.abs()), x64.abs().ln()) <= 1, "log_f32({x:e})");
        assert!(ulps32(scalar::tanh_f32(x / 10.0), ((x / 10.0) as f64).tanh()) <= 1, "tanh_f32({x:e})");
        assert!(ulps32(scalar::pow_f32(x.abs() / 10.0, y), ((x.abs() / 10.0) as f64).powf(y64)) <= 1, "pow_f32({x:e}, {y:e})");
    }
    assert_same(scalar::log_f32(-1.0) as f64, f64::NAN, "log_f32(-1)");
    assert_eq!(scalar::exp_f32(100.0), f32::INFINITY);
    assert_eq!(scalar::pow_f32(-0.0, 3.0).to_bits(), (-0.0f32).to_bits());
}

/// minmax.rs: a NaN operand is the result, and zeros order -0 < +0.
#[test]
fn max_min_special_values() {
    let nan = f64::NAN;
    for (a, b, max, min) in [(1.0, 2.0, 2.0, 1.0), (0.0, -0.0, 0.0, -0.0), (-0.0, 0.0, 0.0, -0.0), (-0.0, -0.0, -0.0, -0.0), (0.0, 0.0, 0.0, 0.0)] {
        assert_same(scalar::max(a, b), max, &format!("max({a:e}, {b:e})"));
        assert_same(scalar::min(a, b), min, &format!("min({a:e}, {b:e})"));
    }
    for (a, b) in [(nan, 1.0), (1.0, nan), (nan, f64::INFINITY)] {
        assert!(scalar::max(a, b).is_nan() && scalar::min(a, b).is_nan());
    }
}
