//! The BERT encoder of the in-process embedder, over candle's tensors and layers
//! (`candle-core`, `candle-nn`): word, position and token-type embeddings, then
//! `num_hidden_layers` post-norm transformer layers (multi-head self-attention with an
//! additive padding mask, a GELU feed-forward block, a residual and a LayerNorm after
//! each), as Hugging Face's `BertModel` computes its last hidden state. The pooler is
//! not used (sentence-transformers pools the hidden state itself).
//!
//! The same weights also make [`quantized::Encoder`](super::quantized::Encoder), the
//! 8-bit path of one short text, prepared once at load.
//!
//! Written here rather than taken from `candle-transformers`, whose one crate holds
//! every model candle ships and was most of the feature's cold build.

use candle_core::{D, DType, Module, Result, Tensor};
use candle_nn::{Embedding, LayerNorm, Linear, VarBuilder, embedding, layer_norm};
use serde::Deserialize;

use super::quantized;

/// The fields of a BERT `config.json` the encoder needs.
#[derive(Debug, Clone, Deserialize)]
pub(crate) struct BertConfig {
    pub vocab_size: usize,
    pub hidden_size: usize,
    pub num_hidden_layers: usize,
    pub num_attention_heads: usize,
    pub intermediate_size: usize,
    pub hidden_act: String,
    pub max_position_embeddings: usize,
    pub type_vocab_size: usize,
    pub layer_norm_eps: f64,
}

/// How a text's linear layers are computed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Precision {
    /// f32 weights (candle's gemm), the texts of a call padded into batches: exactly
    /// what sentence-transformers computes.
    Full,
    /// Each text alone on plain buffers, one thread: the linear weights quantised once
    /// at load to 8 bits with a scale per output row, each product's input per token in
    /// blocks of 32 values, integer dot products by a SIMD kernel chosen at run time
    /// (AVX-512 VNNI, AVX2, or portable); embeddings, LayerNorm, attention and GELU in
    /// f32. What one short text (a search query) gets.
    Quantized,
}

/// The f32 linear layer and its 8-bit copy for the short-query path.
fn both(weight: Tensor, bias: Tensor) -> Result<(Linear, quantized::Linear)> {
    let inputs = weight.dim(1)?;
    let quantized = quantized::Linear::quantize(
        &weight.flatten_all()?.to_vec1::<f32>()?,
        bias.to_vec1::<f32>()?,
        inputs,
    );
    Ok((Linear::new(weight, Some(bias)), quantized))
}

fn load_both(
    vb: VarBuilder<'_>,
    inputs: usize,
    outputs: usize,
) -> Result<(Linear, quantized::Linear)> {
    both(
        vb.get((outputs, inputs), "weight")?,
        vb.get(outputs, "bias")?,
    )
}

fn norm_of(norm: &LayerNorm) -> Result<quantized::Norm> {
    let bias = match norm.bias() {
        Some(b) => b.to_vec1::<f32>()?,
        None => vec![0.0; norm.weight().dim(0)?],
    };
    Ok(quantized::Norm {
        weight: norm.weight().to_vec1::<f32>()?,
        bias,
    })
}

struct Layer {
    /// The query, key and value projections as one `(3 × hidden, hidden)` linear
    /// layer: one matrix product per layer instead of three.
    qkv: Linear,
    attention_out: Linear,
    attention_norm: LayerNorm,
    intermediate: Linear,
    output: Linear,
    output_norm: LayerNorm,
}

/// The encoder: embeddings and layers.
pub(crate) struct Bert {
    words: Embedding,
    positions: Embedding,
    token_types: Embedding,
    embeddings_norm: LayerNorm,
    layers: Vec<Layer>,
    heads: usize,
    head_dim: usize,
    /// The same model for one text with 8-bit weights.
    quantized: quantized::Encoder,
}

impl Bert {
    /// Loads the weights named as in Hugging Face's `BertModel` (`embeddings.…`,
    /// `encoder.layer.N.…`), with or without a leading `bert.`.
    pub(crate) fn load(vb: VarBuilder<'_>, config: &BertConfig) -> Result<Bert> {
        if config.hidden_act != "gelu" {
            candle_core::bail!(
                "hidden_act `{}` is not supported (only `gelu`)",
                config.hidden_act
            );
        }
        if config.num_attention_heads == 0
            || !config
                .hidden_size
                .is_multiple_of(config.num_attention_heads)
        {
            candle_core::bail!(
                "hidden_size {} is not a multiple of num_attention_heads {}",
                config.hidden_size,
                config.num_attention_heads
            );
        }
        let vb = if vb.contains_tensor("embeddings.word_embeddings.weight") {
            vb
        } else {
            vb.pp("bert")
        };
        let (h, eps) = (config.hidden_size, config.layer_norm_eps);
        let e = vb.pp("embeddings");
        let words = embedding(config.vocab_size, h, e.pp("word_embeddings"))?;
        let positions = embedding(
            config.max_position_embeddings,
            h,
            e.pp("position_embeddings"),
        )?;
        let token_types = embedding(config.type_vocab_size, h, e.pp("token_type_embeddings"))?;
        let embeddings_norm = layer_norm(h, eps, e.pp("LayerNorm"))?;
        let mut layers = Vec::with_capacity(config.num_hidden_layers);
        let mut quantized_layers = Vec::with_capacity(config.num_hidden_layers);
        for i in 0..config.num_hidden_layers {
            let l = vb.pp(format!("encoder.layer.{i}"));
            let a = l.pp("attention");
            let part = |name: &str| -> Result<(Tensor, Tensor)> {
                let p = a.pp(format!("self.{name}"));
                Ok((p.get((h, h), "weight")?, p.get(h, "bias")?))
            };
            let (q, k, v) = (part("query")?, part("key")?, part("value")?);
            let (qkv, qkv_quantized) = both(
                Tensor::cat(&[&q.0, &k.0, &v.0], 0)?,
                Tensor::cat(&[&q.1, &k.1, &v.1], 0)?,
            )?;
            let (attention_out, attention_out_quantized) = load_both(a.pp("output.dense"), h, h)?;
            let (intermediate, intermediate_quantized) =
                load_both(l.pp("intermediate.dense"), h, config.intermediate_size)?;
            let (output, output_quantized) =
                load_both(l.pp("output.dense"), config.intermediate_size, h)?;
            let attention_norm = layer_norm(h, eps, a.pp("output.LayerNorm"))?;
            let output_norm = layer_norm(h, eps, l.pp("output.LayerNorm"))?;
            quantized_layers.push(quantized::Layer {
                qkv: qkv_quantized,
                attention_out: attention_out_quantized,
                attention_norm: norm_of(&attention_norm)?,
                intermediate: intermediate_quantized,
                output: output_quantized,
                output_norm: norm_of(&output_norm)?,
            });
            layers.push(Layer {
                qkv,
                attention_out,
                attention_norm,
                intermediate,
                output,
                output_norm,
            });
        }
        // Position p's embedding plus token type 0's, as the short path adds them.
        let positions_and_type = positions
            .embeddings()
            .broadcast_add(&token_types.embeddings().get(0)?)?
            .flatten_all()?
            .to_vec1::<f32>()?;
        let quantized = quantized::Encoder::new(
            words.embeddings().contiguous()?,
            positions_and_type,
            norm_of(&embeddings_norm)?,
            quantized_layers,
            config.num_attention_heads,
            eps,
        );
        Ok(Bert {
            words,
            positions,
            token_types,
            embeddings_norm,
            layers,
            heads: config.num_attention_heads,
            head_dim: h / config.num_attention_heads,
            quantized,
        })
    }

    /// The encoder of one text with 8-bit weights ([`Precision::Quantized`]).
    pub(crate) fn quantized(&self) -> &quantized::Encoder {
        &self.quantized
    }

    /// The last hidden state, `(batch, len, hidden)`, of `ids` (`(batch, len)`, u32)
    /// with `mask` (`(batch, len)`, 1 for a token, 0 for padding), in f32. Token type 0
    /// everywhere.
    pub(crate) fn forward(&self, ids: &Tensor, mask: &Tensor) -> Result<Tensor> {
        let (batch, len) = ids.dims2()?;
        let positions = Tensor::arange(0u32, len as u32, ids.device())?;
        let types = Tensor::zeros(len, DType::U32, ids.device())?;
        let mut h = self
            .words
            .forward(ids)?
            .broadcast_add(&self.positions.forward(&positions)?)?
            .broadcast_add(&self.token_types.forward(&types)?)?;
        h = self.embeddings_norm.forward(&h)?;
        // Padding gets a large negative score before the softmax: (batch, 1, 1, len).
        let bias = ((mask.to_dtype(DType::F32)? - 1.0)? * 1e9f64)?.reshape((batch, 1, 1, len))?;
        let scale = 1.0 / (self.head_dim as f64).sqrt();
        for layer in &self.layers {
            let heads = |x: Tensor| -> Result<Tensor> {
                x.reshape((batch, len, self.heads, self.head_dim))?
                    .transpose(1, 2)?
                    .contiguous()
            };
            let qkv = layer.qkv.forward(&h)?; // (batch, len, 3 × hidden)
            let hidden = self.heads * self.head_dim;
            let q = heads(qkv.narrow(D::Minus1, 0, hidden)?)?;
            let k = heads(qkv.narrow(D::Minus1, hidden, hidden)?)?;
            let v = heads(qkv.narrow(D::Minus1, 2 * hidden, hidden)?)?;
            let scores = (q.matmul(&k.t()?.contiguous()?)? * scale)?.broadcast_add(&bias)?;
            let probs = candle_nn::ops::softmax_last_dim(&scores)?;
            let context = probs.matmul(&v)?.transpose(1, 2)?.contiguous()?.reshape((
                batch,
                len,
                self.heads * self.head_dim,
            ))?;
            let attended = layer
                .attention_norm
                .forward(&(layer.attention_out.forward(&context)? + &h)?)?;
            let inner = layer.intermediate.forward(&attended)?.gelu_erf()?;
            h = layer
                .output_norm
                .forward(&(layer.output.forward(&inner)? + &attended)?)?;
        }
        Ok(h)
    }
}

/// Mean pooling over the attention mask, then L2 normalisation:
/// `(batch, len, hidden)` → `(batch, hidden)`.
pub(crate) fn pool(hidden: &Tensor, mask: &Tensor) -> Result<Tensor> {
    let mask = mask.to_dtype(DType::F32)?.unsqueeze(2)?; // (n, len, 1)
    let summed = hidden.broadcast_mul(&mask)?.sum(1)?; // (n, hidden)
    let counts = mask.sum(1)?.clamp(1e-9f32, f32::MAX)?; // (n, 1)
    let mean = summed.broadcast_div(&counts)?;
    let norms = mean
        .sqr()?
        .sum_keepdim(D::Minus1)?
        .sqrt()?
        .clamp(1e-12f32, f32::MAX)?;
    mean.broadcast_div(&norms)
}
