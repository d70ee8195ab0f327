//! Random variates for models: uniform indices and exponential delays.
//!
//! Everything here is built from the generator's raw 64-bit output and IEEE basic
//! arithmetic (`+ - * /`, which are correctly rounded everywhere), not from the
//! platform's `ln`, whose last bit may differ between C libraries. So a seed gives the
//! same variates, hence the same simulation, on every platform.

use rand::{RngCore, SeedableRng};
use rand_xoshiro::Xoshiro256PlusPlus;

use crate::time::Time;

/// A component's own random stream (the engine's generator), so what one workload draws
/// does not depend on which others share its simulation.
pub type Rng = Xoshiro256PlusPlus;

/// The stream seeded with `seed` (the one `Engine::new(seed)` starts with).
pub fn seeded(seed: u64) -> Rng {
    Xoshiro256PlusPlus::seed_from_u64(seed)
}

/// ln 2 split in a high part with trailing zero bits (exact when multiplied by an
/// exponent, |e| < 2^11) and the remainder (fdlibm's constants).
const LN2_HI: f64 = 0.693_147_180_369_123_8;
const LN2_LO: f64 = 1.908_214_929_270_587_7e-10;

/// A uniform integer in `0..n`, without bias (Lemire's multiply-shift with rejection,
/// which rejects with probability below `n / 2^32`). `n` must be at least 1; `n == 0`
/// returns 0.
#[inline]
pub fn uniform_u32<R: RngCore + ?Sized>(rng: &mut R, n: u32) -> u32 {
    let n64 = u64::from(n);
    let mut m = u64::from(rng.next_u32()) * n64;
    if (m as u32) < n {
        // Rare slow path: reject the lowest (2^32 mod n) low words.
        let threshold = n.wrapping_neg() % n.max(1);
        while (m as u32) < threshold {
            m = u64::from(rng.next_u32()) * n64;
        }
    }
    (m >> 32) as u32
}

/// A uniform float in (0, 1]: 53 random bits, shifted up by one step so that zero is
/// impossible (the logarithm below needs a positive argument).
#[inline]
pub fn unit_open_closed<R: RngCore + ?Sized>(rng: &mut R) -> f64 {
    const STEP: f64 = 1.0 / (1u64 << 53) as f64;
    ((rng.next_u64() >> 11) + 1) as f64 * STEP
}

/// Natural logarithm of a positive, finite, normal `x`, from basic arithmetic only
/// (see the module doc). Accurate to a few ulps.
///
/// `x = m * 2^e` with `m` in [sqrt(1/2), sqrt(2)], then `ln m = 2 atanh(s)` with
/// `s = (m - 1) / (m + 1)`, `|s| <= 0.1716`, summed as an odd series up to `s^21`
/// (the first omitted term is below 1e-18).
pub fn portable_ln(x: f64) -> f64 {
    debug_assert!(x.is_normal() && x > 0.0);
    let bits = x.to_bits();
    let mut e = ((bits >> 52) & 0x7ff) as i64 - 1023;
    let mut m = f64::from_bits((bits & ((1u64 << 52) - 1)) | (1023u64 << 52));
    if m > std::f64::consts::SQRT_2 {
        m *= 0.5;
        e += 1;
    }
    let s = (m - 1.0) / (m + 1.0);
    let z = s * s;
    // p(z) = sum_{k=0}^{9} z^k / (2k + 3), evaluated by Estrin's scheme: a shallow
    // dependency tree instead of a 10-deep Horner chain (twice the speed here).
    let z2 = z * z;
    let z4 = z2 * z2;
    let z8 = z4 * z4;
    let c01 = 1.0 / 3.0 + z * (1.0 / 5.0);
    let c23 = 1.0 / 7.0 + z * (1.0 / 9.0);
    let c45 = 1.0 / 11.0 + z * (1.0 / 13.0);
    let c67 = 1.0 / 15.0 + z * (1.0 / 17.0);
    let c89 = 1.0 / 19.0 + z * (1.0 / 21.0);
    let p = (c01 + z2 * c23) + z4 * (c45 + z2 * c67) + z8 * c89;
    let ln_m = 2.0 * s + 2.0 * s * z * p;
    let e = e as f64;
    e * LN2_HI + (ln_m + e * LN2_LO)
}

/// Table for [`fast_ln`]: for `j` in 0..128, `invc` is the double nearest to
/// `1 / (1 + (j + 0.5) / 128)` and `logc` is `ln(1 / invc)` rounded to a double.
/// Generated with Python's `decimal` module at 60 digits:
/// `invc = float(1 / c); logc = float(-Decimal(invc).ln())`; the test
/// `fast_ln_table_is_consistent` re-derives every entry with [`portable_ln`].
#[rustfmt::skip]
const LN_TABLE: [(f64, f64); 128] = [
    (0.9961089494163424, 0.003898640415657309),
    (0.9884169884169884, 0.01165061721997525),
    (0.9808429118773946, 0.019342962843130987),
    (0.973384030418251, 0.026976587698202083),
    (0.9660377358490566, 0.03455238150665973),
    (0.9588014981273408, 0.042071213920687044),
    (0.9516728624535316, 0.049533935122276676),
    (0.9446494464944649, 0.05694137640013845),
    (0.9377289377289377, 0.06429435070539725),
    (0.9309090909090909, 0.07159365318700882),
    (0.924187725631769, 0.078840061707776),
    (0.9175627240143369, 0.08603433734180316),
    (0.9110320284697508, 0.09317722485418334),
    (0.9045936395759717, 0.10026945316367517),
    (0.8982456140350877, 0.10731173578908804),
    (0.89198606271777, 0.11430477128005863),
    (0.8858131487889274, 0.12124924363286965),
    (0.8797250859106529, 0.12814582269193006),
    (0.8737201365187713, 0.13499516453750482),
    (0.8677966101694915, 0.1417979118602574),
    (0.8619528619528619, 0.1485546943231372),
    (0.8561872909698997, 0.15526612891112396),
    (0.8504983388704319, 0.16193282026931324),
    (0.8448844884488449, 0.16855536102980664),
    (0.839344262295082, 0.17513433212784915),
    (0.8338762214983714, 0.18167030310763463),
    (0.8284789644012945, 0.18816383241818294),
    (0.8231511254019293, 0.19461546769967167),
    (0.8178913738019169, 0.2010257460605908),
    (0.8126984126984127, 0.2073951943460706),
    (0.807570977917981, 0.21372432939771818),
    (0.8025078369905956, 0.22001365830528213),
    (0.7975077881619937, 0.2262636786504534),
    (0.7925696594427245, 0.232474878743094),
    (0.7876923076923077, 0.238647737850175),
    (0.7828746177370031, 0.24478272641769092),
    (0.7781155015197568, 0.25088030628580943),
    (0.7734138972809668, 0.2569409308975004),
    (0.7687687687687688, 0.26296504550088134),
    (0.764179104477612, 0.26895308734550394),
    (0.7596439169139466, 0.2749054858727992),
    (0.7551622418879056, 0.2808226629008878),
    (0.750733137829912, 0.2867050328039543),
    (0.7463556851311953, 0.29255300268637746),
    (0.7420289855072464, 0.2983669725517973),
    (0.7377521613832853, 0.3041473354672968),
    (0.7335243553008596, 0.3098944777228647),
    (0.7293447293447294, 0.3156087789863033),
    (0.7252124645892352, 0.32129061245373425),
    (0.7211267605633803, 0.3269403449958533),
    (0.7170868347338936, 0.3325583373000766),
    (0.713091922005571, 0.3381449440087164),
    (0.7091412742382271, 0.34370051385331846),
    (0.7052341597796143, 0.3492253897852883),
    (0.7013698630136986, 0.354719909102929),
    (0.6975476839237057, 0.3601844035750078),
    (0.6937669376693767, 0.3656191995609647),
    (0.6900269541778976, 0.37102461812787263),
    (0.6863270777479893, 0.376400975164253),
    (0.6826666666666666, 0.3817485814908484),
    (0.6790450928381963, 0.3870677429684483),
    (0.6754617414248021, 0.3923587606028639),
    (0.6719160104986877, 0.3976219306471385),
    (0.6684073107049608, 0.4028575447010835),
    (0.6649350649350649, 0.4080658898082217),
    (0.661498708010336, 0.41324724855021927),
    (0.6580976863753213, 0.41840189913888387),
    (0.6547314578005116, 0.4235301155058032),
    (0.6513994910941476, 0.42863216738969867),
    (0.6481012658227848, 0.4337083204215594),
    (0.6448362720403022, 0.43875883620762796),
    (0.6416040100250626, 0.44378397241030104),
    (0.6384039900249376, 0.4487839828270067),
    (0.6352357320099256, 0.4537591174671205),
    (0.6320987654320988, 0.4587096226269767),
    (0.628992628992629, 0.46363574096303256),
    (0.6259168704156479, 0.46853771156323926),
    (0.6228710462287105, 0.4734157700166721),
    (0.6198547215496368, 0.47827014848147026),
    (0.6168674698795181, 0.48310107575113576),
    (0.6139088729016786, 0.48790877731923904),
    (0.6109785202863962, 0.4926934754425752),
    (0.6080760095011877, 0.4974553892028189),
    (0.6052009456264775, 0.5021947345667155),
    (0.6023529411764705, 0.5069117244448544),
    (0.5995316159250585, 0.5116065687490621),
    (0.5967365967365967, 0.5162794744484545),
    (0.5939675174013921, 0.5209306456241853),
    (0.5912240184757506, 0.5255602835229274),
    (0.5885057471264368, 0.5301685866091216),
    (0.585812356979405, 0.5347557506160276),
    (0.5831435079726651, 0.5393219685956089),
    (0.5804988662131519, 0.5438674309672835),
    (0.5778781038374717, 0.5483923255655733),
    (0.5752808988764045, 0.5528968376866776),
    (0.5727069351230425, 0.5573811501340064),
    (0.5701559020044543, 0.5618454432626918),
    (0.5676274944567627, 0.5662898950231159),
    (0.565121412803532, 0.5707146810034716),
    (0.5626373626373626, 0.575119974471388),
    (0.5601750547045952, 0.5795059464146423),
    (0.5577342047930284, 0.5838727655809826),
    (0.5553145336225597, 0.588220598517086),
    (0.5529157667386609, 0.5925496096066716),
    (0.5505376344086022, 0.5968599611077938),
    (0.5481798715203426, 0.6011518131893347),
    (0.5458422174840085, 0.6054253239667169),
    (0.5435244161358811, 0.6096806495368553),
    (0.5412262156448203, 0.6139179440123704),
    (0.5389473684210526, 0.6181373595550788),
    (0.5366876310272537, 0.6223390464087787),
    (0.534446764091858, 0.6265231529313529),
    (0.5322245322245323, 0.6306898256261987),
    (0.5300207039337475, 0.6348392091730102),
    (0.5278350515463918, 0.6389714464579207),
    (0.5256673511293635, 0.6430866786030273),
    (0.523517382413088, 0.6471850449953095),
    (0.5213849287169042, 0.6512666833149582),
    (0.5192697768762677, 0.6553317295631277),
    (0.5171717171717172, 0.6593803180891278),
    (0.5150905432595574, 0.6634125816170662),
    (0.5130260521042084, 0.6674286512719563),
    (0.5109780439121756, 0.6714286566053024),
    (0.5089463220675944, 0.6754127256201768),
    (0.5069306930693069, 0.6793809847957973),
    (0.504930966469428, 0.6833335591116206),
    (0.5029469548133595, 0.6872705720709603),
    (0.5009784735812133, 0.691192145724142),
];

/// Natural logarithm of a positive, finite, normal `x` for sampling: absolute error
/// below 3e-16 (relative error is larger only where `ln x` is itself below ~1e-13,
/// irrelevant once scaled to picoseconds). Basic arithmetic and a constant table only,
/// so it is as platform-independent as [`portable_ln`], and about three times faster:
/// no division, and a degree-6 polynomial instead of degree 21.
///
/// `x = 2^e * m`, `m` in [1, 2); the top 7 bits of `m` pick `invc ~ 1/m`, so that
/// `r = m * invc - 1` is within +-1/256 and `ln m = logc + ln(1 + r)`.
#[inline]
pub fn fast_ln(x: f64) -> f64 {
    debug_assert!(x.is_normal() && x > 0.0);
    let bits = x.to_bits();
    let e = ((bits >> 52) & 0x7ff) as i64 - 1023;
    let j = ((bits >> 45) & 127) as usize;
    let m = f64::from_bits((bits & ((1u64 << 52) - 1)) | (1023u64 << 52));
    let (invc, logc) = LN_TABLE[j];
    let r = m * invc - 1.0;
    // ln(1 + r) = r - r^2/2 + r^3/3 - r^4/4 + r^5/5 - r^6/6 (first omitted term
    // |r|^7 / 7 < 3e-18), grouped to keep the dependency chain short.
    let r2 = r * r;
    let p = r + r2 * ((-0.5 + r * (1.0 / 3.0)) + r2 * ((-0.25 + r * 0.2) + r2 * (-1.0 / 6.0)));
    let e = e as f64;
    e * LN2_HI + (logc + (p + e * LN2_LO))
}

/// Exponential variate with mean `mean_ps` picoseconds, by inversion
/// (`-mean * ln U`, `U` uniform in (0, 1]), rounded to the nearest picosecond (the
/// engine tick). Saturates at `u64::MAX` ps.
#[inline]
pub fn exp_ps<R: RngCore + ?Sized>(rng: &mut R, mean_ps: f64) -> u64 {
    let u = unit_open_closed(rng);
    // Round half up by truncating `x + 0.5` (`f64::round` is a libm call on baseline
    // x86-64). Float-to-int `as` saturates, and the value is never NaN or negative.
    (-fast_ln(u) * mean_ps + 0.5) as u64
}

/// Exponential delay with the given mean, quantised to the engine tick.
#[inline]
pub fn exp_time<R: RngCore + ?Sized>(rng: &mut R, mean: Time) -> Time {
    Time::from_ps(exp_ps(rng, mean.as_ps() as f64))
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::SeedableRng;
    use rand_xoshiro::Xoshiro256PlusPlus;

    #[test]
    fn portable_ln_matches_std() {
        let mut rng = Xoshiro256PlusPlus::seed_from_u64(7);
        let check = |x: f64| {
            let got = portable_ln(x);
            let want = x.ln();
            let tol = 4.0 * f64::EPSILON * want.abs().max(1e-300);
            assert!(
                (got - want).abs() <= tol,
                "ln({x:e}): got {got:e}, want {want:e}"
            );
        };
        for x in [
            1.0,
            0.5,
            2.0,
            std::f64::consts::SQRT_2,
            1.0 - f64::EPSILON,
            1.0 / (1u64 << 53) as f64,
            1e-300,
            1e300,
        ] {
            check(x);
        }
        for _ in 0..200_000 {
            check(unit_open_closed(&mut rng));
        }
    }

    #[test]
    fn fast_ln_table_is_consistent() {
        for (j, &(invc, logc)) in LN_TABLE.iter().enumerate() {
            let c = 1.0 + (j as f64 + 0.5) / 128.0;
            assert!((invc * c - 1.0).abs() < 2.0 * f64::EPSILON, "invc[{j}]");
            let want = -portable_ln(invc);
            assert!(
                (logc - want).abs() <= 2.0 * f64::EPSILON * want,
                "logc[{j}]"
            );
        }
    }

    #[test]
    fn fast_ln_matches_std() {
        let mut rng = Xoshiro256PlusPlus::seed_from_u64(8);
        let check = |x: f64| {
            let got = fast_ln(x);
            let want = x.ln();
            let tol = 3e-16_f64.max(4.0 * f64::EPSILON * want.abs());
            assert!(
                (got - want).abs() <= tol,
                "ln({x:e}): got {got:e}, want {want:e}"
            );
        };
        for x in [
            1.0,
            0.5,
            2.0,
            1.0 - f64::EPSILON,
            1.0 / (1u64 << 53) as f64,
            1e-300,
            1e300,
        ] {
            check(x);
        }
        for _ in 0..200_000 {
            let u = unit_open_closed(&mut rng);
            check(u);
            // Also the ends of each table interval.
            check(1.0 + (u * 128.0).floor() / 128.0);
        }
    }

    #[test]
    fn unit_is_in_open_closed_interval() {
        let mut rng = Xoshiro256PlusPlus::seed_from_u64(1);
        for _ in 0..100_000 {
            let u = unit_open_closed(&mut rng);
            assert!(u > 0.0 && u <= 1.0);
        }
    }

    /// The mean of N exponentials has standard deviation mean / sqrt(N); allow 5 of
    /// them (a false alarm probability below 1e-6 for a fresh seed). The tail
    /// probability P(X > mean) = 1/e is checked likewise (binomial deviation).
    #[test]
    fn exponential_mean_and_tail() {
        const N: usize = 400_000;
        let mean = 1_000_000.0;
        let mut rng = Xoshiro256PlusPlus::seed_from_u64(12345);
        let mut sum = 0.0;
        let mut above = 0usize;
        for _ in 0..N {
            let x = exp_ps(&mut rng, mean) as f64;
            sum += x;
            above += usize::from(x > mean);
        }
        let sample_mean = sum / N as f64;
        let sigma = mean / (N as f64).sqrt();
        assert!(
            (sample_mean - mean).abs() < 5.0 * sigma,
            "sample mean {sample_mean}, want {mean} +- {}",
            5.0 * sigma
        );
        let p = (-1.0f64).exp();
        let frac = above as f64 / N as f64;
        let sigma_p = (p * (1.0 - p) / N as f64).sqrt();
        assert!((frac - p).abs() < 5.0 * sigma_p, "P(X > mean) = {frac}");
    }

    #[test]
    fn exponential_is_quantised_and_small_means_work() {
        let mut rng = Xoshiro256PlusPlus::seed_from_u64(3);
        // A mean below one tick mostly rounds to 0 ps; never negative, never panics.
        let n = 10_000;
        let zeros = (0..n).filter(|_| exp_ps(&mut rng, 0.1) == 0).count();
        assert!(zeros > n * 9 / 10);
        assert_eq!(exp_time(&mut rng, Time::ZERO), Time::ZERO);
    }

    /// Chi-square test of uniformity over 10 cells (9 degrees of freedom): 40 is far
    /// beyond the 0.9999 quantile (~33.7).
    #[test]
    fn uniform_index_is_uniform_and_in_range() {
        let mut rng = Xoshiro256PlusPlus::seed_from_u64(99);
        const N: usize = 200_000;
        let mut counts = [0usize; 10];
        for _ in 0..N {
            counts[uniform_u32(&mut rng, 10) as usize] += 1;
        }
        let expect = N as f64 / 10.0;
        let chi2: f64 = counts
            .iter()
            .map(|&c| (c as f64 - expect).powi(2) / expect)
            .sum();
        assert!(chi2 < 40.0, "chi2 = {chi2}, counts {counts:?}");
        for n in [1u32, 2, 3, 1000, u32::MAX] {
            for _ in 0..1000 {
                assert!(uniform_u32(&mut rng, n) < n);
            }
        }
        assert_eq!(uniform_u32(&mut rng, 0), 0);
    }
}
