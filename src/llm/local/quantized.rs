//! The short-query path: the same BERT encoder, for one text, on plain buffers with
//! 8-bit linear weights — no candle tensors, no thread pool, one thread.
//!
//! At load every linear layer's f32 weight is quantised once to `i8` with one f32 scale
//! per output row (`max |w| / 127`, so no weight is `-128`, as the kernels need). Per
//! call, each product's input is quantised per token in blocks of [`BLOCK`] values
//! (`max |x| / 127` per block: a few large hidden dimensions then cost precision only
//! in their own block); the integer sums per block come from the fastest
//! [`Kernel`] the CPU has, and each is scaled by its activation block's scale, the sum
//! by the row's scale, plus the f32 bias. Embeddings, LayerNorm, attention (scores,
//! softmax, the weighted values), GELU (the kernels' vectorised one) and pooling stay
//! in f32.
//!
//! Each linear layer is one [`Kernel::dot_matrix`] call: weight rows outside, tokens
//! inside, so each weight row is read from memory once per call whatever the number
//! of tokens.

use candle_core::{Storage, Tensor};

use gralkor_kernels::{BLOCK, Kernel, quantize};

/// A LayerNorm's weight and bias.
pub(super) struct Norm {
    pub weight: Vec<f32>,
    pub bias: Vec<f32>,
}

impl Norm {
    /// Normalises each row of `x` (`weight.len()` values) in place, as `LayerNorm` does:
    /// mean and (biased) variance of the row, `eps` inside the square root.
    fn apply(&self, x: &mut [f32], eps: f32) {
        let n = self.weight.len();
        for row in x.chunks_exact_mut(n) {
            let mean = lane_sum(row, |v| v) / n as f32;
            let var = lane_sum(row, |v| (v - mean) * (v - mean)) / n as f32;
            let inv = 1.0 / (var + eps).sqrt();
            for ((v, w), b) in row.iter_mut().zip(&self.weight).zip(&self.bias) {
                *v = (*v - mean) * inv * w + b;
            }
        }
    }
}

/// `Σ f(x)` over `xs`, in eight independent lanes (so the compiler keeps them in
/// vector registers; one running sum is a chain of dependent scalar additions).
fn lane_sum(xs: &[f32], f: impl Fn(f32) -> f32) -> f32 {
    let mut lanes = [0.0f32; 8];
    let mut chunks = xs.chunks_exact(8);
    for c in &mut chunks {
        for (l, x) in lanes.iter_mut().zip(c) {
            *l += f(*x);
        }
    }
    let rest: f32 = chunks.remainder().iter().map(|x| f(*x)).sum();
    lanes.iter().sum::<f32>() + rest
}

/// A linear layer with `i8` weights, one scale per output row.
pub(super) struct Linear {
    inputs: usize,
    outputs: usize,
    /// `outputs × inputs`, row-major.
    weights: Vec<i8>,
    /// One per output row.
    scales: Vec<f32>,
    bias: Vec<f32>,
}

impl Linear {
    /// Quantises `weight` (`outputs × inputs`, row-major f32) per row.
    pub(super) fn quantize(weight: &[f32], bias: Vec<f32>, inputs: usize) -> Linear {
        let outputs = bias.len();
        assert_eq!(
            weight.len(),
            outputs * inputs,
            "weight is not outputs × inputs"
        );
        assert!(
            inputs.is_multiple_of(BLOCK),
            "inputs {inputs} not whole blocks"
        );
        let mut weights = vec![0i8; weight.len()];
        let mut scales = Vec::with_capacity(outputs);
        for (row, q) in weight
            .chunks_exact(inputs)
            .zip(weights.chunks_exact_mut(inputs))
        {
            scales.push(quantize(row, q));
        }
        Linear {
            inputs,
            outputs,
            weights,
            scales,
            bias,
        }
    }

    /// `out = x · Wᵀ + bias` for the `x.tokens` rows of `x` (already quantised).
    fn forward(&self, kernel: Kernel, x: &Quantized, out: &mut [f32]) {
        let tokens = x.tokens;
        debug_assert_eq!(x.width, self.inputs);
        let values = &x.values[..tokens * self.inputs];
        let lane_scales = &x.lane_scales[..tokens * self.inputs / 4];
        let out = &mut out[..tokens * self.outputs];
        kernel.dot_matrix(&self.weights, self.inputs, values, lane_scales, out);
        for row in out.chunks_exact_mut(self.outputs) {
            for ((v, scale), bias) in row.iter_mut().zip(&self.scales).zip(&self.bias) {
                *v = *v * scale + bias;
            }
        }
    }
}

/// `Σ a·b`, in eight independent lanes (vector instructions).
fn dot(a: &[f32], b: &[f32]) -> f32 {
    let mut lanes = [0.0f32; 8];
    let (mut ca, mut cb) = (a.chunks_exact(8), b.chunks_exact(8));
    for (x, y) in (&mut ca).zip(&mut cb) {
        for i in 0..8 {
            lanes[i] += x[i] * y[i];
        }
    }
    let rest: f32 = ca
        .remainder()
        .iter()
        .zip(cb.remainder())
        .map(|(x, y)| x * y)
        .sum();
    lanes.iter().sum::<f32>() + rest
}

/// A product's input quantised per token in blocks.
struct Quantized {
    tokens: usize,
    width: usize,
    values: Vec<i8>,
    /// Each block's scale, repeated once per four values (see `Kernel::dot_rows`).
    lane_scales: Vec<f32>,
}

impl Quantized {
    fn with_capacity(tokens: usize, width: usize) -> Quantized {
        Quantized {
            tokens: 0,
            width: 0,
            values: vec![0; tokens * width],
            lane_scales: vec![0.0; tokens * width / 4],
        }
    }

    /// Quantises `x` (`tokens × width`).
    fn set(&mut self, kernel: Kernel, x: &[f32], width: usize) {
        self.width = width;
        self.tokens = x.len() / width;
        kernel.quantize_blocks(
            x,
            &mut self.values[..x.len()],
            &mut self.lane_scales[..x.len() / 4],
        );
    }
}

/// One transformer layer.
pub(super) struct Layer {
    /// Query, key and value as one `3 × hidden` output.
    pub qkv: Linear,
    pub attention_out: Linear,
    pub attention_norm: Norm,
    pub intermediate: Linear,
    pub output: Linear,
    pub output_norm: Norm,
}

/// The encoder for one text: embeddings, layers, mean pooling, L2 normalisation.
pub(super) struct Encoder {
    kernel: Kernel,
    hidden: usize,
    heads: usize,
    eps: f32,
    /// The word embeddings: candle's tensor of the f32 path, read in place (not a
    /// second copy of its 47 MB).
    words: Tensor,
    /// Position `p`'s embedding plus token type 0's, `max_positions × hidden`.
    positions: Vec<f32>,
    embeddings_norm: Norm,
    layers: Vec<Layer>,
}

/// Per-call buffers.
struct Scratch {
    h: Vec<f32>,
    qkv: Vec<f32>,
    context: Vec<f32>,
    projected: Vec<f32>,
    inner: Vec<f32>,
    quantized: Quantized,
    scores: Vec<f32>,
}

impl Encoder {
    /// `words` is the `(vocab, hidden)` f32 embedding tensor (contiguous, on the CPU);
    /// `positions` the position embeddings plus token type 0's, row after row.
    pub(super) fn new(
        words: Tensor,
        positions: Vec<f32>,
        embeddings_norm: Norm,
        layers: Vec<Layer>,
        heads: usize,
        eps: f64,
    ) -> Encoder {
        let hidden = embeddings_norm.weight.len();
        let kernel = Kernel::detect();
        tracing::debug!(?kernel, "short-query kernel");
        Encoder {
            kernel,
            hidden,
            heads,
            eps: eps as f32,
            words,
            positions,
            embeddings_norm,
            layers,
        }
    }

    /// The pooled, L2-normalised vector of `ids` (one text, every token attended).
    pub(super) fn embed(&self, ids: &[u32]) -> Result<Vec<f32>, String> {
        let (hidden, len) = (self.hidden, ids.len());
        if len == 0 {
            return Err("no tokens".to_string());
        }
        if len * hidden > self.positions.len() {
            return Err(format!(
                "{len} tokens is more than the {} positions",
                self.positions.len() / hidden
            ));
        }
        let inner_width = self
            .layers
            .first()
            .map_or(hidden, |l| l.intermediate.outputs);
        let mut s = Scratch {
            h: vec![0.0; len * hidden],
            qkv: vec![0.0; len * 3 * hidden],
            context: vec![0.0; len * hidden],
            projected: vec![0.0; len * hidden],
            inner: vec![0.0; len * inner_width],
            quantized: Quantized::with_capacity(len, inner_width.max(hidden)),
            scores: vec![0.0; len],
        };
        self.embeddings(ids, &mut s.h)?;
        for layer in &self.layers {
            self.layer(layer, &mut s);
        }
        // Mean over the tokens, then L2 normalisation.
        let mut pooled = vec![0.0f32; hidden];
        for row in s.h.chunks_exact(hidden) {
            for (p, v) in pooled.iter_mut().zip(row) {
                *p += v;
            }
        }
        let mut norm = 0.0f32;
        for p in &mut pooled {
            *p /= len as f32;
            norm += *p * *p;
        }
        let norm = norm.sqrt().max(1e-12);
        for p in &mut pooled {
            *p /= norm;
        }
        Ok(pooled)
    }

    /// Word + position + token type 0 embeddings, normalised, into `h`.
    fn embeddings(&self, ids: &[u32], h: &mut [f32]) -> Result<(), String> {
        let hidden = self.hidden;
        let (storage, layout) = self.words.storage_and_layout();
        let Storage::Cpu(cpu) = &*storage else {
            return Err("the word embeddings are not on the CPU".to_string());
        };
        let all = cpu.as_slice::<f32>().map_err(|e| e.to_string())?;
        let (start, end) = layout
            .contiguous_offsets()
            .ok_or("the word embeddings are not contiguous")?;
        let words = &all[start..end];
        for (t, (&id, row)) in ids.iter().zip(h.chunks_exact_mut(hidden)).enumerate() {
            let id = id as usize;
            let word = words
                .get(id * hidden..(id + 1) * hidden)
                .ok_or_else(|| format!("token id {id} is outside the vocabulary"))?;
            let position = &self.positions[t * hidden..(t + 1) * hidden];
            for ((v, w), p) in row.iter_mut().zip(word).zip(position) {
                *v = w + p;
            }
        }
        self.embeddings_norm.apply(h, self.eps);
        Ok(())
    }

    /// One post-norm transformer layer on `s.h`, in place.
    fn layer(&self, layer: &Layer, s: &mut Scratch) {
        let (hidden, kernel) = (self.hidden, self.kernel);
        let len = s.h.len() / hidden;
        s.quantized.set(kernel, &s.h, hidden);
        layer.qkv.forward(kernel, &s.quantized, &mut s.qkv);
        self.attention(&s.qkv, &mut s.context, &mut s.scores, len);
        s.quantized.set(kernel, &s.context, hidden);
        layer
            .attention_out
            .forward(kernel, &s.quantized, &mut s.projected);
        for (p, h) in s.projected.iter_mut().zip(&s.h) {
            *p += h;
        }
        layer.attention_norm.apply(&mut s.projected, self.eps);
        // `projected` is now the attention block's output ("attended").
        s.quantized.set(kernel, &s.projected, hidden);
        layer
            .intermediate
            .forward(kernel, &s.quantized, &mut s.inner);
        kernel.gelu(&mut s.inner);
        s.quantized
            .set(kernel, &s.inner, layer.intermediate.outputs);
        layer.output.forward(kernel, &s.quantized, &mut s.h);
        for (h, a) in s.h.iter_mut().zip(&s.projected) {
            *h += a;
        }
        layer.output_norm.apply(&mut s.h, self.eps);
    }

    /// Multi-head self-attention over every token (one text: no padding): from `qkv`
    /// (`len × 3 hidden`: queries, keys, values) into `context` (`len × hidden`).
    fn attention(&self, qkv: &[f32], context: &mut [f32], scores: &mut [f32], len: usize) {
        let hidden = self.hidden;
        let d = hidden / self.heads;
        let scale = 1.0 / (d as f32).sqrt();
        let row = |t: usize, part: usize, head: usize| {
            let start = t * 3 * hidden + part * hidden + head * d;
            &qkv[start..start + d]
        };
        for head in 0..self.heads {
            for i in 0..len {
                let q = row(i, 0, head);
                let mut max = f32::NEG_INFINITY;
                for (j, score) in scores.iter_mut().enumerate().take(len) {
                    let k = row(j, 1, head);
                    *score = dot(q, k) * scale;
                    max = max.max(*score);
                }
                let mut total = 0.0;
                for score in scores.iter_mut().take(len) {
                    *score = (*score - max).exp();
                    total += *score;
                }
                let out = &mut context[i * hidden + head * d..i * hidden + (head + 1) * d];
                out.fill(0.0);
                for (j, &p) in scores.iter().enumerate().take(len) {
                    let p = p / total;
                    for (o, v) in out.iter_mut().zip(row(j, 2, head)) {
                        *o += p * v;
                    }
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn quantising_keeps_values_within_half_a_step_and_never_makes_minus_128() {
        let x: Vec<f32> = (0..64)
            .map(|i| ((i * 37 % 64) as f32 - 31.5) * 0.7)
            .collect();
        let mut q = vec![0i8; 64];
        let scale = quantize(&x, &mut q);
        assert!(q.iter().all(|&v| v >= -127));
        assert!(q.contains(&127) || q.contains(&-127));
        for (v, q) in x.iter().zip(&q) {
            assert!((v - f32::from(*q) * scale).abs() <= scale / 2.0 + 1e-6);
        }
        let mut zeros = vec![1i8; 32];
        assert_eq!(quantize(&[0.0; 32], &mut zeros), 0.0);
        assert!(zeros.iter().all(|&v| v == 0));
    }
}
