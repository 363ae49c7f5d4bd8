//! The integer dot products of gralkor's short-query embedding path (`gralkor::llm::local`):
//! 8-bit weight rows against the 8-bit rows of several tokens, one row at a time
//! ([`Kernel::dot_rows`]) or a whole layer ([`Kernel::dot_matrix`]); the quantiser of
//! its activations ([`Kernel::quantize_blocks`]) and its GELU ([`Kernel::gelu`]),
//! vectorised. Each row is summed
//! in blocks of [`BLOCK`] values as exact 32-bit integers; each block's sum is scaled
//! by that token's scale for the block, and the scaled sums added in f32.
//!
//! Three kernels compute the same integer sums: a portable one (any CPU), AVX2, and
//! AVX-512 VNNI (`vpdpbusd`: four byte products added into each 32-bit lane in one
//! instruction, 64 bytes at a time); [`Kernel::detect`] picks the best the CPU has at
//! run time. They may add the scaled sums in different orders (f32 rounding).
//!
//! The one contract: a weight is never `-128` (the quantiser clamps to `-127..=127`),
//! because the AVX2 kernel multiplies `|a|` by `w` with `a`'s sign moved onto `w`, and
//! `-(-128)` does not fit in an `i8`. Activations may take any `i8` value.

/// Values per block: each block of a token's row has a scale of its own.
pub const BLOCK: usize = 32;

/// Scales per block in `lane_scales`: one per four values (a 32-bit vector lane).
pub const LANES: usize = BLOCK / 4;

/// The longest row the AVX-512 kernel takes (its per-row corrections live on the stack).
const MAX_ROW: usize = 4096;

/// An implementation of [`Kernel::dot_rows`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kernel {
    /// Plain Rust: every CPU.
    Portable,
    /// x86-64 AVX2 and FMA (`vpmaddubsw`, `vpmaddwd`), 32 bytes at a time.
    #[cfg(target_arch = "x86_64")]
    Avx2,
    /// x86-64 AVX-512 F/BW with VNNI (`vpdpbusd`), 64 bytes at a time.
    #[cfg(target_arch = "x86_64")]
    Avx512Vnni,
}

impl Kernel {
    /// Every kernel this build knows, the portable one first.
    pub const ALL: &'static [Kernel] = &[
        Kernel::Portable,
        #[cfg(target_arch = "x86_64")]
        Kernel::Avx2,
        #[cfg(target_arch = "x86_64")]
        Kernel::Avx512Vnni,
    ];

    /// The fastest kernel this CPU runs.
    pub fn detect() -> Kernel {
        Kernel::ALL
            .iter()
            .rev()
            .copied()
            .find(|k| k.available())
            .unwrap_or(Kernel::Portable)
    }

    /// Whether this CPU runs the kernel.
    pub fn available(self) -> bool {
        match self {
            Kernel::Portable => true,
            #[cfg(target_arch = "x86_64")]
            Kernel::Avx2 => {
                std::arch::is_x86_feature_detected!("avx2")
                    && std::arch::is_x86_feature_detected!("fma")
            }
            #[cfg(target_arch = "x86_64")]
            Kernel::Avx512Vnni => {
                std::arch::is_x86_feature_detected!("avx512f")
                    && std::arch::is_x86_feature_detected!("avx512bw")
                    && std::arch::is_x86_feature_detected!("avx512vnni")
            }
        }
    }

    /// For each token row `t` of `a` (rows as long as `w`):
    /// `out[t] = Σ_b lane_scales[t][b·LANES] · Σ_{i in block b} w[i]·a[t][i]`, each
    /// block's scale repeated [`LANES`] times in `lane_scales` (one per four values:
    /// what the vector kernels load). `w.len()` is a multiple of [`BLOCK`] (at most
    /// 4096) and no weight is `-128`.
    ///
    /// # Panics
    /// If the lengths do not fit, or the kernel is not [`available`](Self::available).
    pub fn dot_rows(self, w: &[i8], a: &[i8], lane_scales: &[f32], out: &mut [f32]) {
        let k = w.len();
        assert!(
            k > 0 && k.is_multiple_of(BLOCK) && k <= MAX_ROW,
            "a weight row of {k} values is not a whole number of blocks (at most {MAX_ROW})"
        );
        assert!(
            a.len() == out.len() * k && lane_scales.len() * 4 == a.len(),
            "{} activations, {} scales and {} outputs do not fit rows of {k}",
            a.len(),
            lane_scales.len(),
            out.len()
        );
        match self {
            Kernel::Portable => portable(w, a, lane_scales, out),
            #[cfg(target_arch = "x86_64")]
            Kernel::Avx2 => {
                assert!(self.available(), "this CPU has no AVX2 and FMA");
                // SAFETY: the CPU has AVX2 and FMA (checked above); the lengths were
                // checked above as the function requires.
                unsafe { x86::avx2(w, a, lane_scales, out) }
            }
            #[cfg(target_arch = "x86_64")]
            Kernel::Avx512Vnni => {
                assert!(self.available(), "this CPU has no AVX-512 F/BW/VNNI");
                // SAFETY: the CPU has AVX-512 F, BW and VNNI (checked above); the
                // lengths were checked above as the function requires.
                unsafe { x86::avx512_vnni(w, a, lane_scales, out) }
            }
        }
    }

    /// For each weight row `n` of `w` (`w.len() / k` rows of `k` values) and each token
    /// row `t` of `a` (rows of `k`): `out[t · rows + n]` is [`dot_rows`](Self::dot_rows)'s
    /// value for that pair — a whole matrix product. The AVX2 kernel computes four
    /// weight rows against two tokens at a time: each token block's magnitudes and
    /// scale loaded once for the four rows, each weight block once for the two tokens
    /// (a per-row call would load and take the absolute value of the token's bytes
    /// once per row).
    ///
    /// # Panics
    /// As [`dot_rows`](Self::dot_rows), and if `w` is not whole rows of `k` or `out`
    /// does not hold one value per pair.
    pub fn dot_matrix(self, w: &[i8], k: usize, a: &[i8], lane_scales: &[f32], out: &mut [f32]) {
        assert!(
            k > 0 && k.is_multiple_of(BLOCK) && k <= MAX_ROW && w.len().is_multiple_of(k),
            "{} weights are not whole rows of {k} values in whole blocks",
            w.len()
        );
        let (rows, tokens) = (w.len() / k, a.len() / k);
        assert!(
            a.len() == tokens * k && lane_scales.len() * 4 == a.len() && out.len() == rows * tokens,
            "{} activations, {} scales and {} outputs do not fit {rows} rows of {k}",
            a.len(),
            lane_scales.len(),
            out.len()
        );
        match self {
            #[cfg(target_arch = "x86_64")]
            Kernel::Avx2 => {
                assert!(self.available(), "this CPU has no AVX2 and FMA");
                let magnitudes: Vec<u8> = a.iter().map(|v| v.unsigned_abs()).collect();
                // SAFETY: the CPU has AVX2 and FMA (checked above); the lengths were
                // checked above as the function requires.
                unsafe { x86::avx2_matrix(w, k, a, &magnitudes, lane_scales, out) }
            }
            _ => {
                let mut dots = vec![0.0f32; tokens];
                for (n, row) in w.chunks_exact(k).enumerate() {
                    self.dot_rows(row, a, lane_scales, &mut dots);
                    for (t, d) in dots.iter().enumerate() {
                        out[t * rows + n] = *d;
                    }
                }
            }
        }
    }

    /// Quantises `x` (whole blocks of [`BLOCK`] values) into `values`, one scale per
    /// block (`max |x| / 127`, repeated [`LANES`] times in `lane_scales`): each value
    /// as [`quantize`] makes it. Every kernel gives the same bytes and scales.
    ///
    /// # Panics
    /// If `x` is not whole blocks or the lengths do not fit.
    pub fn quantize_blocks(self, x: &[f32], values: &mut [i8], lane_scales: &mut [f32]) {
        assert!(
            x.len().is_multiple_of(BLOCK)
                && values.len() == x.len()
                && lane_scales.len() * 4 == x.len(),
            "{} values, {} bytes and {} scales are not whole blocks that fit",
            x.len(),
            values.len(),
            lane_scales.len()
        );
        match self {
            Kernel::Portable => {
                for ((x, q), s) in x
                    .chunks_exact(BLOCK)
                    .zip(values.chunks_exact_mut(BLOCK))
                    .zip(lane_scales.chunks_exact_mut(LANES))
                {
                    s.fill(quantize(x, q));
                }
            }
            #[cfg(target_arch = "x86_64")]
            Kernel::Avx2 | Kernel::Avx512Vnni => {
                assert!(Kernel::Avx2.available(), "this CPU has no AVX2 and FMA");
                // SAFETY: the CPU has AVX2 and FMA (checked above); the lengths were
                // checked above as the function requires.
                unsafe { x86::quantize_avx2(x, values, lane_scales) }
            }
        }
    }

    /// GELU in place, the erf form BERT uses: `x/2 · (1 + erf(x/√2))`, erf by
    /// Abramowitz and Stegun's formula 7.1.26 (absolute error below 1.5e-7) and its
    /// exponential by [`exp`]'s arithmetic, so the loop needs no library call and the
    /// compiler runs it in vector registers (eight values at a time with AVX2).
    pub fn gelu(self, xs: &mut [f32]) {
        match self {
            Kernel::Portable => xs.iter_mut().for_each(|x| *x = gelu(*x)),
            #[cfg(target_arch = "x86_64")]
            Kernel::Avx2 | Kernel::Avx512Vnni => {
                assert!(Kernel::Avx2.available(), "this CPU has no AVX2 and FMA");
                // SAFETY: the CPU has AVX2 and FMA (checked above).
                unsafe { x86::gelu_avx2(xs) }
            }
        }
    }
}

/// Quantises `x` into `q` with one scale (`max |x| / 127`, returned), rounding to the
/// nearest (halves away from zero): values in `-127..=127`, never `-128`. NaN becomes 0.
pub fn quantize(x: &[f32], q: &mut [i8]) -> f32 {
    let max = max_abs(x);
    let inv = if max > 0.0 { 127.0 / max } else { 0.0 };
    for (v, q) in x.iter().zip(q.iter_mut()) {
        let scaled = v * inv;
        // `as` truncates towards zero: adding ±0.5 rounds half away. The clamp holds
        // where `127 / max` overflows (a maximum below about 3.7e-37); NaN stays NaN,
        // which `as` makes 0.
        *q = (scaled + 0.5f32.copysign(scaled)).clamp(-127.0, 127.0) as i32 as i8;
    }
    max / 127.0
}

/// `max |x|`, in eight independent lanes (vector instructions); NaN is passed over.
fn max_abs(x: &[f32]) -> f32 {
    let mut lanes = [0.0f32; 8];
    let mut chunks = x.chunks_exact(8);
    for c in &mut chunks {
        for (l, v) in lanes.iter_mut().zip(c) {
            *l = if v.abs() > *l { v.abs() } else { *l };
        }
    }
    let rest = chunks
        .remainder()
        .iter()
        .fold(0.0f32, |m, v| if v.abs() > m { v.abs() } else { m });
    lanes.iter().fold(rest, |m, &l| if l > m { l } else { m })
}

/// GELU of one value (see [`Kernel::gelu`]).
#[inline(always)]
pub fn gelu(x: f32) -> f32 {
    0.5 * x * (1.0 + erf(x * std::f32::consts::FRAC_1_SQRT_2))
}

/// erf by Abramowitz and Stegun's formula 7.1.26 (absolute error below 1.5e-7).
#[inline(always)]
pub fn erf(x: f32) -> f32 {
    let a = x.abs();
    let t = 1.0 / (1.0 + 0.327_591_1 * a);
    let poly = t
        * (0.254_829_6
            + t * (-0.284_496_74 + t * (1.421_413_8 + t * (-1.453_152_1 + t * 1.061_405_4))));
    (1.0 - poly * exp(-a * a)).copysign(x)
}

/// `e^x` in plain arithmetic (no library call, no branch): `x = n ln 2 + r` with `n`
/// rounded to the nearest integer by adding and subtracting `1.5 × 2^23`, `e^r` by a
/// polynomial of degree 7 on `|r| ≤ ln 2 / 2` (relative error below 1e-7 as tested),
/// times `2^n` made from its exponent bits. `x` is clamped to `[-87, 88]`, where
/// `2^n` is a normal f32: below, the result is about 1.6e-38, not 0.
#[inline(always)]
pub fn exp(x: f32) -> f32 {
    const SHIFTER: f32 = 12_582_912.0; // 1.5 × 2^23
    let x = x.clamp(-87.0, 88.0);
    let t = x * std::f32::consts::LOG2_E + SHIFTER;
    let n = t - SHIFTER;
    // ln 2 in two parts: the first (0.693359375 = 355/512) exact in few bits, so
    // `n` times it is exact.
    let r = (x - n * 0.693_359_4) + n * 2.121_944_4e-4;
    let p = 1.987_569_1e-4;
    let p = p * r + 1.398_2e-3;
    let p = p * r + 8.333_452e-3;
    let p = p * r + 4.166_579_6e-2;
    let p = p * r + 1.666_666_5e-1;
    let p = p * r + 0.5;
    let e = p * r * r + r + 1.0;
    // `t`'s low mantissa bits hold `n` (plus 2^22): `n + 127` into the exponent.
    let bits = t
        .to_bits()
        .wrapping_sub(SHIFTER.to_bits())
        .wrapping_add(127)
        << 23;
    e * f32::from_bits(bits)
}

/// The integer sum of each block, exactly.
pub fn block_sum(w: &[i8], a: &[i8]) -> i32 {
    w.iter()
        .zip(a)
        .map(|(&x, &y)| i32::from(x) * i32::from(y))
        .sum()
}

fn portable(w: &[i8], a: &[i8], lane_scales: &[f32], out: &mut [f32]) {
    let k = w.len();
    for ((row, scales), out) in a
        .chunks_exact(k)
        .zip(lane_scales.chunks_exact(k / 4))
        .zip(out.iter_mut())
    {
        // Four running sums, so the compiler may use vector instructions.
        let mut lanes = [0.0f32; 4];
        for (b, (wb, ab)) in w
            .chunks_exact(BLOCK)
            .zip(row.chunks_exact(BLOCK))
            .enumerate()
        {
            lanes[b % 4] += block_sum(wb, ab) as f32 * scales[b * LANES];
        }
        *out = (lanes[0] + lanes[1]) + (lanes[2] + lanes[3]);
    }
}

#[cfg(target_arch = "x86_64")]
mod x86 {
    use std::arch::x86_64::*;

    use super::{BLOCK, MAX_ROW};

    /// One block into `acc`: `acc + scale · Σ w·a` over the block's 32 values, from the
    /// weights `w`, the activations `a` and their magnitudes `m = |a|` (see [`avx2`]).
    #[inline]
    #[target_feature(enable = "avx2,fma")]
    fn block(w: __m256i, a: __m256i, m: __m256i, scale: __m256, acc: __m256) -> __m256 {
        let pairs = _mm256_maddubs_epi16(m, _mm256_sign_epi8(w, a));
        let lanes = _mm256_madd_epi16(pairs, _mm256_set1_epi16(1));
        _mm256_fmadd_ps(_mm256_cvtepi32_ps(lanes), scale, acc)
    }

    /// AVX2: per block of 32 bytes, `vpmaddubsw` multiplies `|a|` (unsigned) by `w`
    /// signed as `a` and adds pairs into 16 bits (at most 2 × 128 × 127: never
    /// saturates), `vpmaddwd` adds pairs of those into eight 32-bit lanes; the lanes
    /// (exact integers below 2^24) go to f32 times the block's scale.
    ///
    /// # Safety
    /// The CPU has AVX2 and FMA; `w.len()` is a multiple of `BLOCK`,
    /// `a.len() == out.len() * w.len()` and `lane_scales.len() * 4 == a.len()`.
    #[target_feature(enable = "avx2,fma")]
    pub(super) unsafe fn avx2(w: &[i8], a: &[i8], lane_scales: &[f32], out: &mut [f32]) {
        let k = w.len();
        let (wp, ap, sp) = (w.as_ptr(), a.as_ptr(), lane_scales.as_ptr());
        // Block `b` of token row `t` into `acc`.
        let at = |t: usize, b: usize, acc: __m256| -> __m256 {
            // SAFETY: block `b` of the weight row and of token row `t` (32 bytes at
            // `b * 32` and `t * k + b * 32`) and its eight scales (at
            // `(t * k + b * 32) / 4`) are within the slices, as the caller guarantees;
            // unaligned loads.
            let (wv, av, scale) = unsafe {
                (
                    _mm256_loadu_si256(wp.add(b * BLOCK).cast::<__m256i>()),
                    _mm256_loadu_si256(ap.add(t * k + b * BLOCK).cast::<__m256i>()),
                    _mm256_loadu_ps(sp.add((t * k + b * BLOCK) / 4)),
                )
            };
            block(wv, av, _mm256_abs_epi8(av), scale, acc)
        };
        let blocks = k / BLOCK;
        for (t, out) in out.iter_mut().enumerate() {
            let (mut acc0, mut acc1) = (_mm256_setzero_ps(), _mm256_setzero_ps());
            let mut b = 0;
            while b + 2 <= blocks {
                acc0 = at(t, b, acc0);
                acc1 = at(t, b + 1, acc1);
                b += 2;
            }
            if b < blocks {
                acc0 = at(t, b, acc0);
            }
            let sum = _mm256_add_ps(acc0, acc1);
            let s = _mm_add_ps(_mm256_castps256_ps128(sum), _mm256_extractf128_ps::<1>(sum));
            let s = _mm_add_ps(s, _mm_movehl_ps(s, s));
            let s = _mm_add_ss(s, _mm_movehdup_ps(s));
            *out = _mm_cvtss_f32(s);
        }
    }

    /// AVX2, a whole matrix: four weight rows against two token rows at a time, each
    /// weight block loaded once for both tokens (see [`avx2`] for one block's
    /// arithmetic, here with the tokens' magnitudes `|a|` made once, in
    /// `magnitudes`); an odd last token against the four rows alone; a last one to
    /// three rows by [`avx2`].
    ///
    /// # Safety
    /// The CPU has AVX2 and FMA; `k` is a multiple of `BLOCK`, `w.len()` a multiple
    /// of `k`, `a.len()` too and equal to `magnitudes.len()`, `lane_scales.len() * 4
    /// == a.len()` and `out.len() == (w.len() / k) * (a.len() / k)`.
    #[target_feature(enable = "avx2,fma")]
    pub(super) unsafe fn avx2_matrix(
        w: &[i8],
        k: usize,
        a: &[i8],
        magnitudes: &[u8],
        lane_scales: &[f32],
        out: &mut [f32],
    ) {
        let (rows, tokens, blocks) = (w.len() / k, a.len() / k, k / BLOCK);
        let (wp, ap, mp, sp) = (
            w.as_ptr(),
            a.as_ptr(),
            magnitudes.as_ptr(),
            lane_scales.as_ptr(),
        );
        let whole = rows - rows % 4;
        let mut n = 0;
        while n < whole {
            let mut t = 0;
            while t + 2 <= tokens {
                // Four rows against two tokens: each weight block loaded once for both.
                // `acc0[r]`: row `n + r` against token `t`; `acc1[r]`: against `t + 1`.
                let (mut acc0, mut acc1) = ([_mm256_setzero_ps(); 4], [_mm256_setzero_ps(); 4]);
                for b in 0..blocks {
                    let (at0, at1) = (t * k + b * BLOCK, (t + 1) * k + b * BLOCK);
                    // SAFETY: block `b` of token rows `t` and `t + 1` (32 bytes of `a`
                    // and of `magnitudes` at `at0` and `at1`, 8 scales at `at0 / 4` and
                    // `at1 / 4`) and of weight rows `n .. n + 4` (32 bytes at
                    // `(n + r) * k + b * 32`) are within the slices, as the caller
                    // guarantees; unaligned loads.
                    unsafe {
                        let a0 = _mm256_loadu_si256(ap.add(at0).cast::<__m256i>());
                        let m0 = _mm256_loadu_si256(mp.add(at0).cast::<__m256i>());
                        let s0 = _mm256_loadu_ps(sp.add(at0 / 4));
                        let a1 = _mm256_loadu_si256(ap.add(at1).cast::<__m256i>());
                        let m1 = _mm256_loadu_si256(mp.add(at1).cast::<__m256i>());
                        let s1 = _mm256_loadu_ps(sp.add(at1 / 4));
                        for (r, (acc0, acc1)) in acc0.iter_mut().zip(acc1.iter_mut()).enumerate() {
                            let wv = _mm256_loadu_si256(
                                wp.add((n + r) * k + b * BLOCK).cast::<__m256i>(),
                            );
                            *acc0 = block(wv, a0, m0, s0, *acc0);
                            *acc1 = block(wv, a1, m1, s1, *acc1);
                        }
                    }
                }
                // SAFETY: `out` holds `tokens × rows` values; `t + 1 < tokens` and
                // `n + 4 <= rows`.
                unsafe {
                    store_four(&acc0, out.as_mut_ptr().add(t * rows + n));
                    store_four(&acc1, out.as_mut_ptr().add((t + 1) * rows + n));
                }
                t += 2;
            }
            if t < tokens {
                let mut acc = [_mm256_setzero_ps(); 4];
                for b in 0..blocks {
                    let at = t * k + b * BLOCK;
                    // SAFETY: as above, for token row `t` alone.
                    unsafe {
                        let av = _mm256_loadu_si256(ap.add(at).cast::<__m256i>());
                        let mv = _mm256_loadu_si256(mp.add(at).cast::<__m256i>());
                        let scale = _mm256_loadu_ps(sp.add(at / 4));
                        for (r, acc) in acc.iter_mut().enumerate() {
                            let wv = _mm256_loadu_si256(
                                wp.add((n + r) * k + b * BLOCK).cast::<__m256i>(),
                            );
                            *acc = block(wv, av, mv, scale, *acc);
                        }
                    }
                }
                // SAFETY: as above.
                unsafe { store_four(&acc, out.as_mut_ptr().add(t * rows + n)) };
            }
            n += 4;
        }
        let mut dots = vec![0.0f32; tokens];
        for n in whole..rows {
            // SAFETY: as the caller guarantees, for one weight row.
            unsafe { avx2(&w[n * k..(n + 1) * k], a, lane_scales, &mut dots) };
            for (t, d) in dots.iter().enumerate() {
                out[t * rows + n] = *d;
            }
        }
    }

    /// The four rows' eight lanes summed (pairs, pairs of pairs, halves), stored at `out`.
    ///
    /// # Safety
    /// The CPU has AVX2; `out` is valid for four `f32` writes.
    #[inline]
    #[target_feature(enable = "avx2,fma")]
    unsafe fn store_four(acc: &[__m256; 4], out: *mut f32) {
        let h = _mm256_hadd_ps(
            _mm256_hadd_ps(acc[0], acc[1]),
            _mm256_hadd_ps(acc[2], acc[3]),
        );
        let sums = _mm_add_ps(_mm256_castps256_ps128(h), _mm256_extractf128_ps::<1>(h));
        // SAFETY: as the caller guarantees.
        unsafe { _mm_storeu_ps(out, sums) };
    }

    /// AVX2 [`quantize_blocks`](super::Kernel::quantize_blocks): per block, `max |x|`
    /// in a vector (then across it), `x · 127 / max` plus ±0.5 clamped to ±127 and
    /// truncated to 32-bit integers (NaN to 0, as the portable cast makes it), packed
    /// to bytes with the lanes put back in order.
    ///
    /// # Safety
    /// The CPU has AVX2 and FMA; `x.len()` is a multiple of `BLOCK`,
    /// `values.len() == x.len()` and `lane_scales.len() * 4 == x.len()`.
    #[target_feature(enable = "avx2,fma")]
    pub(super) unsafe fn quantize_avx2(x: &[f32], values: &mut [i8], lane_scales: &mut [f32]) {
        let sign = _mm256_set1_ps(-0.0);
        let half = _mm256_set1_ps(0.5);
        let (low, high) = (_mm256_set1_ps(-127.0), _mm256_set1_ps(127.0));
        let order = _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7);
        for ((x, q), s) in x
            .chunks_exact(BLOCK)
            .zip(values.chunks_exact_mut(BLOCK))
            .zip(lane_scales.chunks_exact_mut(BLOCK / 4))
        {
            // SAFETY: 32 values of `x`, 32 bytes of `q` and 8 scales of `s`, by the
            // chunks; unaligned loads and stores.
            unsafe {
                let v = [0, 8, 16, 24].map(|i| _mm256_loadu_ps(x.as_ptr().add(i)));
                // `max(|v|, m)` keeps `m` where `|v|` is NaN, as the portable loop does.
                let mut m = _mm256_setzero_ps();
                for v in v {
                    m = _mm256_max_ps(_mm256_andnot_ps(sign, v), m);
                }
                let m = _mm_max_ps(_mm256_castps256_ps128(m), _mm256_extractf128_ps::<1>(m));
                let m = _mm_max_ps(m, _mm_movehl_ps(m, m));
                let max = _mm_cvtss_f32(_mm_max_ss(m, _mm_movehdup_ps(m)));
                let inv = _mm256_set1_ps(if max > 0.0 { 127.0 / max } else { 0.0 });
                let ints = v.map(|v| {
                    let scaled = _mm256_mul_ps(v, inv);
                    let rounded =
                        _mm256_add_ps(scaled, _mm256_or_ps(half, _mm256_and_ps(scaled, sign)));
                    let clamped = _mm256_min_ps(_mm256_max_ps(rounded, low), high);
                    let ordered = _mm256_cmp_ps::<_CMP_ORD_Q>(rounded, rounded);
                    _mm256_cvttps_epi32(_mm256_and_ps(clamped, ordered))
                });
                let bytes = _mm256_packs_epi16(
                    _mm256_packs_epi32(ints[0], ints[1]),
                    _mm256_packs_epi32(ints[2], ints[3]),
                );
                let bytes = _mm256_permutevar8x32_epi32(bytes, order);
                _mm256_storeu_si256(q.as_mut_ptr().cast::<__m256i>(), bytes);
                _mm256_storeu_ps(s.as_mut_ptr(), _mm256_set1_ps(max / 127.0));
            }
        }
    }

    /// AVX-512 VNNI: per 64 bytes (two blocks), `vpdpbusd` multiplies `a + 128`
    /// (unsigned: `a` with its top bit flipped) by `w` (signed) and adds four products
    /// into each of sixteen 32-bit lanes, starting from `-128 × Σ w` of the lane's four
    /// weights (made once per row), so each lane ends as exactly `Σ a·w` of its four
    /// values; the lanes go to f32 times their block's scale.
    ///
    /// # Safety
    /// The CPU has AVX-512 F, BW and VNNI; `w.len()` is a multiple of `BLOCK` and at
    /// most `MAX_ROW`, `a.len() == out.len() * w.len()` and
    /// `lane_scales.len() * 4 == a.len()`.
    #[target_feature(enable = "avx512f,avx512bw,avx512vnni")]
    pub(super) unsafe fn avx512_vnni(w: &[i8], a: &[i8], lane_scales: &[f32], out: &mut [f32]) {
        let k = w.len();
        let full = k / 64;
        let (wp, ap, sp) = (w.as_ptr(), a.as_ptr(), lane_scales.as_ptr());
        let flip = _mm512_set1_epi8(-128);
        // `-128 × Σ w` per lane of each 64 bytes of the row (a last lone block: the
        // low half, zeros above), left uninitialised past the row.
        let mut starts = [std::mem::MaybeUninit::<__m512i>::uninit(); MAX_ROW / 64];
        let chunks = k.div_ceil(64);
        for (j, start) in starts.iter_mut().enumerate().take(chunks) {
            let wv = load_row_part(wp, j, k);
            // `flip` read as unsigned is 128 in every byte.
            start.write(_mm512_sub_epi32(
                _mm512_setzero_si512(),
                _mm512_dpbusd_epi32(_mm512_setzero_si512(), flip, wv),
            ));
        }
        for (t, out) in out.iter_mut().enumerate() {
            let row = t * k;
            let (mut acc0, mut acc1) = (_mm512_setzero_ps(), _mm512_setzero_ps());
            let mut j = 0;
            while j + 2 <= full {
                // SAFETY: chunks `j` and `j + 1` are whole (`j + 2 <= full`) and their
                // starts were written above; `row` is token `t`'s row, in bounds as the
                // caller guarantees.
                unsafe {
                    acc0 = chunk(wp, ap, sp, &starts, row, j, acc0);
                    acc1 = chunk(wp, ap, sp, &starts, row, j + 1, acc1);
                }
                j += 2;
            }
            if j < full {
                // SAFETY: as above, for one whole chunk.
                acc0 = unsafe { chunk(wp, ap, sp, &starts, row, j, acc0) };
                j += 1;
            }
            if j < chunks {
                // A last lone block: 32 bytes and 8 scales, zeros above (the high lanes
                // then add `0 × 0`).
                // SAFETY: the block at `row + 64 j` (32 bytes of `a`, 8 scales at
                // `(row + 64 j) / 4`) is within the slices as the caller guarantees;
                // its start was written above; unaligned loads.
                unsafe {
                    let av = _mm512_zextsi256_si512(_mm256_loadu_si256(
                        ap.add(row + j * 64).cast::<__m256i>(),
                    ));
                    let scale = _mm512_zextps256_ps512(_mm256_loadu_ps(sp.add((row + j * 64) / 4)));
                    let wv = _mm512_zextsi256_si512(_mm256_loadu_si256(
                        wp.add(j * 64).cast::<__m256i>(),
                    ));
                    let lanes = _mm512_dpbusd_epi32(
                        starts[j].assume_init(),
                        _mm512_xor_si512(av, _mm512_set1_epi8(-128)),
                        wv,
                    );
                    acc1 = _mm512_fmadd_ps(_mm512_cvtepi32_ps(lanes), scale, acc1);
                }
            }
            *out = _mm512_reduce_add_ps(_mm512_add_ps(acc0, acc1));
        }
    }

    /// [`super::gelu`] over `xs`, compiled for AVX2 and FMA (the compiler
    /// vectorises the loop).
    ///
    /// # Safety
    /// The CPU has AVX2 and FMA.
    #[target_feature(enable = "avx2,fma")]
    pub(super) unsafe fn gelu_avx2(xs: &mut [f32]) {
        for x in xs {
            *x = super::gelu(*x);
        }
    }

    /// Whole chunk `j` (64 bytes, two blocks) of the token row at `row` into `acc`.
    ///
    /// # Safety
    /// `w` holds bytes `64 j .. 64 j + 64`; `a` bytes `row + 64 j ..` (64) and `scales`
    /// 16 values from `(row + 64 j) / 4`; `starts[j]` was written.
    #[inline]
    #[target_feature(enable = "avx512f,avx512bw,avx512vnni")]
    unsafe fn chunk(
        wp: *const i8,
        ap: *const i8,
        sp: *const f32,
        starts: &[std::mem::MaybeUninit<__m512i>],
        row: usize,
        j: usize,
        acc: __m512,
    ) -> __m512 {
        // SAFETY: as the caller guarantees; unaligned loads.
        unsafe {
            let wv = _mm512_loadu_si512(wp.add(j * 64).cast::<__m512i>());
            let av = _mm512_loadu_si512(ap.add(row + j * 64).cast::<__m512i>());
            let scale = _mm512_loadu_ps(sp.add((row + j * 64) / 4));
            let lanes = _mm512_dpbusd_epi32(
                starts[j].assume_init(),
                _mm512_xor_si512(av, _mm512_set1_epi8(-128)),
                wv,
            );
            _mm512_fmadd_ps(_mm512_cvtepi32_ps(lanes), scale, acc)
        }
    }

    /// Bytes `64 j ..` of the weight row: 64 of them, or 32 (zeros above) for a last
    /// lone block.
    #[inline]
    #[target_feature(enable = "avx512f,avx512bw,avx512vnni")]
    fn load_row_part(wp: *const i8, j: usize, k: usize) -> __m512i {
        // SAFETY: `wp` points at `k` bytes (a whole number of blocks); `64 j + 64 <= k`
        // for a whole chunk, else `64 j + 32 == k`; unaligned loads.
        unsafe {
            if j * 64 + 64 <= k {
                _mm512_loadu_si512(wp.add(j * 64).cast::<__m512i>())
            } else {
                _mm512_zextsi256_si512(_mm256_loadu_si256(wp.add(j * 64).cast::<__m256i>()))
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A small deterministic generator (xorshift64*), so a failure repeats.
    struct Rng(u64);

    impl Rng {
        fn next(&mut self) -> u64 {
            self.0 ^= self.0 >> 12;
            self.0 ^= self.0 << 25;
            self.0 ^= self.0 >> 27;
            self.0.wrapping_mul(0x2545_F491_4F6C_DD1D)
        }
        fn i8(&mut self) -> i8 {
            (self.next() >> 56) as u8 as i8
        }
        fn unit(&mut self) -> f32 {
            (self.next() >> 40) as f32 / (1u64 << 24) as f32
        }
    }

    /// Each block's scale repeated LANES times.
    fn lanes(block_scales: &[f32]) -> Vec<f32> {
        block_scales.iter().flat_map(|&s| [s; LANES]).collect()
    }

    fn dots(kernel: Kernel, w: &[i8], a: &[i8], block_scales: &[f32]) -> Vec<f32> {
        let mut out = vec![f32::NAN; a.len() / w.len()];
        kernel.dot_rows(w, a, &lanes(block_scales), &mut out);
        out
    }

    /// The kernels this CPU runs, naming (on stderr) each it must skip.
    fn runnable() -> Vec<Kernel> {
        Kernel::ALL
            .iter()
            .copied()
            .filter(|k| {
                let ok = k.available();
                if !ok {
                    eprintln!("skipped: this CPU does not run the {k:?} kernel");
                }
                ok
            })
            .collect()
    }

    /// Weights (never -128) and activations: random, and the extremes.
    fn cases(rng: &mut Rng, k: usize, rows: usize) -> Vec<(&'static str, Vec<i8>, Vec<i8>)> {
        let w = (0..k).map(|_| rng.i8().max(-127)).collect();
        let a = (0..k * rows).map(|_| rng.i8()).collect();
        let mixed_w = (0..k).map(|i| [127, -127, 0, 1][i % 4]).collect();
        let mixed_a = (0..k * rows)
            .map(|i| [-128, 127, -128, 0, 5][i % 5])
            .collect();
        vec![
            ("random", w, a),
            ("127 × -128", vec![127; k], vec![-128; k * rows]),
            ("-127 × -128", vec![-127; k], vec![-128; k * rows]),
            ("127 × 127", vec![127; k], vec![127; k * rows]),
            ("mixed extremes", mixed_w, mixed_a),
            (
                "zeros",
                (0..k).map(|_| rng.i8().max(-127)).collect(),
                vec![0; k * rows],
            ),
        ]
    }

    #[test]
    fn every_kernel_gives_the_exact_integer_dot_products_on_random_and_extreme_inputs() {
        let mut rng = Rng(0x9E37_79B9_7F4A_7C15);
        let kernels = runnable();
        eprintln!("detected: {:?}; checked: {kernels:?}", Kernel::detect());
        // 1 to 48 blocks (12 and 48 are the model's rows), 1 to 17 token rows. Block
        // scales of +1 and -1 in turn keep every partial sum an integer below 2^24,
        // exact in f32 whatever the order of addition, so the results must be the
        // integer sums exactly.
        for blocks in [1usize, 2, 3, 4, 5, 7, 8, 12, 13, 48] {
            for rows in [1usize, 2, 5, 17] {
                let k = blocks * BLOCK;
                let signs: Vec<f32> = (0..blocks * rows)
                    .map(|i| if i % 2 == 0 { 1.0 } else { -1.0 })
                    .collect();
                for (name, w, a) in cases(&mut rng, k, rows) {
                    let exact: Vec<f32> = a
                        .chunks(k)
                        .enumerate()
                        .map(|(t, row)| {
                            let sum: i64 = (0..blocks)
                                .map(|b| {
                                    let r = b * BLOCK..(b + 1) * BLOCK;
                                    let s: i64 = w[r.clone()]
                                        .iter()
                                        .zip(&row[r])
                                        .map(|(&x, &y)| i64::from(x) * i64::from(y))
                                        .sum();
                                    s * signs[t * blocks + b] as i64
                                })
                                .sum();
                            sum as f32
                        })
                        .collect();
                    for &kernel in &kernels {
                        assert_eq!(
                            dots(kernel, &w, &a, &signs),
                            exact,
                            "{kernel:?}, {name}, {blocks} blocks × {rows} rows"
                        );
                    }
                }
            }
        }
    }

    #[test]
    fn every_kernel_scales_each_block_as_the_portable_one_within_f32_rounding() {
        let mut rng = Rng(42);
        let kernels = runnable();
        for blocks in [1usize, 3, 12, 48] {
            let rows = 9;
            let k = blocks * BLOCK;
            let scales: Vec<f32> = (0..blocks * rows).map(|_| rng.unit() * 0.1).collect();
            for (name, w, a) in cases(&mut rng, k, rows) {
                let expected = dots(Kernel::Portable, &w, &a, &scales);
                // The largest possible magnitude of a result, for the tolerance.
                let bound: f32 = scales.iter().map(|s| s * 32.0 * 128.0 * 127.0).sum();
                for &kernel in &kernels {
                    for (got, want) in dots(kernel, &w, &a, &scales).iter().zip(&expected) {
                        assert!(
                            (got - want).abs() <= bound * 1e-6,
                            "{kernel:?}, {name}, {blocks} blocks: {got} vs {want}"
                        );
                    }
                }
            }
        }
    }

    #[test]
    fn erf_is_within_2e_7_of_known_values() {
        // erf at 0, 0.1, 0.5, 1, 2, 3, from tables.
        for (x, expected) in [
            (0.0f32, 0.0f64),
            (0.1, 0.112_462_916_018_284_9),
            (0.5, 0.520_499_877_813_046_5),
            (1.0, 0.842_700_792_949_714_9),
            (2.0, 0.995_322_265_018_952_7),
            (3.0, 0.999_977_909_503_001_4),
        ] {
            for (x, expected) in [(x, expected), (-x, -expected)] {
                let got = erf(x);
                assert!(
                    (f64::from(got) - expected).abs() < 2e-7,
                    "erf({x}) = {got}, not {expected}"
                );
            }
        }
    }

    #[test]
    fn exp_is_within_4e_7_relative_of_the_library_exp_where_gelu_reads_it() {
        // erf reads e^(-a²) for every a ≥ 0: x from -87 to 0; and some positive x.
        let mut worst = 0.0f64;
        let mut x = -87.0f32;
        while x <= 10.0 {
            let want = f64::from(x).exp();
            let got = f64::from(exp(x));
            worst = worst.max((got - want).abs() / want);
            x += 0.001_3;
        }
        eprintln!("exp: worst relative error {worst:e}");
        assert!(worst < 4e-7, "exp: relative error {worst:e}");
        assert_eq!(exp(0.0), 1.0);
        // Below the clamp, a tiny normal number rather than 0 or garbage.
        assert!(exp(-1000.0) > 0.0 && exp(-1000.0) < 1e-37);
        assert!(exp(f32::NEG_INFINITY) < 1e-37);
    }

    #[test]
    fn every_kernel_computes_gelu_as_the_portable_one() {
        let xs: Vec<f32> = (0..4099)
            .map(|i| (i as f32 - 2049.0) * 0.004_7)
            .chain([0.0, -0.0, 30.0, -30.0, 1e-30, -1e-30])
            .collect();
        let mut want = xs.clone();
        Kernel::Portable.gelu(&mut want);
        for (x, g) in xs.iter().zip(&want) {
            // GELU's own values: 0 at 0, x for large x, 0 for very negative x.
            let reference = 0.5 * f64::from(*x) * (1.0 + erf_f64(f64::from(*x) / 2f64.sqrt()));
            assert!(
                (f64::from(*g) - reference).abs() <= 4e-7 * f64::from(x.abs()).max(1.0),
                "gelu({x}) = {g}, not {reference}"
            );
        }
        for kernel in runnable() {
            let mut got = xs.clone();
            kernel.gelu(&mut got);
            for ((x, g), w) in xs.iter().zip(&got).zip(&want) {
                assert!(
                    (g - w).abs() <= 1e-6 * w.abs().max(1.0),
                    "{kernel:?}: gelu({x}) = {g}, the portable one {w}"
                );
            }
        }
    }

    /// erf in f64 by its Maclaurin series (|x| ≤ 3), else `1 − erfc` by erfc's
    /// asymptotic series (erfc(3) is 2.2e-5: four terms leave an error below 1e-8).
    fn erf_f64(x: f64) -> f64 {
        if x.abs() > 3.0 {
            let (a, z) = (x.abs(), 1.0 / (2.0 * x * x));
            let series = 1.0 - z + 3.0 * z * z - 15.0 * z * z * z;
            let erfc = (-a * a).exp() / (a * std::f64::consts::PI.sqrt()) * series;
            return (1.0 - erfc).copysign(x);
        }
        // Σ (-1)^n x^(2n+1) / (n! (2n+1)), 2/√π in front.
        let (mut term, mut sum, mut n) = (x, x, 0.0);
        while term.abs() > 1e-17 * sum.abs().max(1e-300) {
            n += 1.0;
            term *= -x * x / n;
            sum += term / (2.0 * n + 1.0);
        }
        sum * 2.0 / std::f64::consts::PI.sqrt()
    }

    #[test]
    fn every_kernel_computes_a_whole_matrix_as_its_rows_one_by_one() {
        let mut rng = Rng(7);
        for (rows, blocks, tokens) in [
            (1, 1, 1),
            (3, 2, 4),
            (4, 12, 9),
            (7, 3, 1),
            (12, 48, 5),
            (9, 5, 16),
        ] {
            let k = blocks * BLOCK;
            let w: Vec<i8> = (0..rows * k).map(|_| rng.i8().max(-127)).collect();
            for (name, a) in [
                (
                    "random",
                    (0..tokens * k).map(|_| rng.i8()).collect::<Vec<i8>>(),
                ),
                ("-128", vec![-128; tokens * k]),
            ] {
                // ±1 scales: every partial sum an exact integer, so any order of
                // addition gives the same result.
                let signs: Vec<f32> = (0..tokens * blocks)
                    .map(|i| if i % 3 == 0 { -1.0 } else { 1.0 })
                    .collect();
                let scales: Vec<f32> = (0..tokens * blocks).map(|_| rng.unit() * 0.1).collect();
                for kernel in runnable() {
                    for (exact, block_scales) in [(true, &signs), (false, &scales)] {
                        let lane = lanes(block_scales);
                        let mut got = vec![f32::NAN; rows * tokens];
                        kernel.dot_matrix(&w, k, &a, &lane, &mut got);
                        for (n, row) in w.chunks_exact(k).enumerate() {
                            let mut want = vec![f32::NAN; tokens];
                            Kernel::Portable.dot_rows(row, &a, &lane, &mut want);
                            for (t, want) in want.iter().enumerate() {
                                let got = got[t * rows + n];
                                // The largest magnitude the token's blocks can sum to,
                                // for f32 rounding in another order.
                                let most: f32 = block_scales[t * blocks..(t + 1) * blocks]
                                    .iter()
                                    .map(|s| s.abs() * 32.0 * 128.0 * 127.0)
                                    .sum();
                                let bound = if exact { 0.0 } else { most * 1e-6 };
                                assert!(
                                    (got - want).abs() <= bound,
                                    "{kernel:?}, {name}, {rows}×{k} by {tokens}: row {n} token {t}: {got} vs {want}"
                                );
                            }
                        }
                    }
                }
            }
        }
    }

    #[test]
    fn every_kernel_quantises_blocks_to_the_portable_bytes_and_scales() {
        let mut rng = Rng(0xD1B5_4A32_D192_ED03);
        let kernels = runnable();
        let n = 8 * BLOCK;
        let random: Vec<f32> = (0..n).map(|_| (rng.unit() - 0.5) * 40.0).collect();
        // Halves: 127 / 127 scales every value by exactly 1, so x.5 rounds away.
        let halves: Vec<f32> = (0..n)
            .map(|i| {
                if i % BLOCK == 0 {
                    127.0
                } else {
                    (i % 7) as f32 - 3.5
                }
            })
            .collect();
        let mut odd: Vec<f32> = (0..n).map(|i| (i as f32).sin() * 1e-3).collect();
        odd[..BLOCK].fill(0.0); // a block of zeros: scale 0, every byte 0
        odd[BLOCK] = -0.0;
        odd[2 * BLOCK + 3] = f32::NAN; // passed over by the maximum, 0 itself
        odd[3 * BLOCK + 1] = f32::INFINITY; // scale ∞: every byte 0
        odd[4 * BLOCK + 2] = -f32::INFINITY;
        odd[5 * BLOCK + 5] = f32::MAX;
        odd[6 * BLOCK + 6] = -1e30; // the block's others become 0
        // A maximum so small that 127 / max overflows: each value is the maximum, 127.
        odd[7 * BLOCK..].fill(f32::MIN_POSITIVE);
        for (name, x) in [("random", random), ("halves", halves), ("odd", odd)] {
            let (mut want, mut want_scales) = (vec![0i8; n], vec![0f32; n / 4]);
            Kernel::Portable.quantize_blocks(&x, &mut want, &mut want_scales);
            assert!(want.iter().all(|&q| q != -128), "{name}: -128 made");
            for &kernel in &kernels {
                let (mut q, mut s) = (vec![1i8; n], vec![f32::NAN; n / 4]);
                kernel.quantize_blocks(&x, &mut q, &mut s);
                assert_eq!(q, want, "{kernel:?}, {name}: the bytes");
                let bits = |v: &[f32]| v.iter().map(|x| x.to_bits()).collect::<Vec<_>>();
                assert_eq!(
                    bits(&s),
                    bits(&want_scales),
                    "{kernel:?}, {name}: the scales"
                );
            }
        }
        // The halves rounded away from zero, as documented.
        let mut q = [0i8; BLOCK];
        let mut x = [0.0f32; BLOCK];
        x[0] = 127.0;
        x[1] = 2.5;
        x[2] = -2.5;
        assert_eq!(quantize(&x, &mut q), 1.0);
        assert_eq!(&q[..3], &[127, 3, -3]);
        quantize(&[f32::MIN_POSITIVE; BLOCK], &mut q);
        assert_eq!(q, [127; BLOCK]);
    }

    #[test]
    #[should_panic(expected = "not whole blocks that fit")]
    fn blocks_that_do_not_fit_are_refused() {
        Kernel::detect().quantize_blocks(&[0.0; 32], &mut [0; 32], &mut [0.0; 7]);
    }

    #[test]
    #[should_panic(expected = "not whole rows")]
    fn a_matrix_that_is_not_whole_rows_is_refused() {
        Kernel::detect().dot_matrix(&[0; 40], 32, &[0; 32], &[0.0; 8], &mut [0.0; 1]);
    }

    #[test]
    fn the_detected_kernel_runs_here_and_is_the_best_available() {
        let detected = Kernel::detect();
        assert!(detected.available());
        eprintln!("detected: {detected:?}");
        #[cfg(target_arch = "x86_64")]
        {
            if Kernel::Avx512Vnni.available() {
                assert_eq!(detected, Kernel::Avx512Vnni);
            } else if Kernel::Avx2.available() {
                assert_eq!(detected, Kernel::Avx2);
            } else {
                assert_eq!(detected, Kernel::Portable);
            }
        }
        #[cfg(not(target_arch = "x86_64"))]
        assert_eq!(detected, Kernel::Portable);
    }

    #[test]
    #[should_panic(expected = "not a whole number of blocks")]
    fn a_row_that_is_not_whole_blocks_is_refused() {
        Kernel::detect().dot_rows(&[0; 40], &[0; 40], &[0.0; 10], &mut [0.0; 1]);
    }
}
