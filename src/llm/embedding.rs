//! What the embedders of every provider share: known dimensions, batching, checks.

use std::future::Future;

use serde_json::Value;
use tokio::task::JoinSet;
use tracing::Instrument;

use crate::{Error, Result};

/// The native vector length of well-known embedding models.
pub(crate) fn known_dimension(model: &str) -> Option<usize> {
    let m = model.rsplit('/').next().unwrap_or(model);
    let m = m.split(':').next().unwrap_or(m);
    Some(match m {
        "text-embedding-3-small" | "text-embedding-ada-002" => 1536,
        "text-embedding-3-large" => 3072,
        "gemini-embedding-001" | "gemini-embedding-2-preview" | "gemini-embedding-exp-03-07" => {
            3072
        }
        "text-embedding-004" | "text-embedding-005" | "embedding-001" => 768,
        "nomic-embed-text" => 768,
        "mxbai-embed-large" => 1024,
        "all-minilm" => 384,
        _ => return None,
    })
}

/// The dimension an embedder will return, and whether to ask the provider to shorten
/// vectors to it (only when the model is known and a different size is requested).
pub(crate) fn resolve_dimension(model: &str, requested: Option<usize>) -> Result<(usize, bool)> {
    match (known_dimension(model), requested) {
        (_, Some(0)) => Err(Error::config(
            "GRALKOR_EMBEDDER_DIMENSION",
            "must be positive",
        )),
        (Some(native), None) => Ok((native, false)),
        (Some(native), Some(n)) => Ok((n, n != native)),
        (None, Some(n)) => Ok((n, false)),
        (None, None) => Err(Error::config(
            "GRALKOR_EMBEDDER_DIMENSION",
            format!("must be set: the vector size of embedding model `{model}` is not known"),
        )),
    }
}

/// Splits `texts` into batches of `batch_size`, runs `embed_batch` on each (all at
/// once: the limiter bounds how many are in flight), and joins the vectors in order.
/// The first error wins and cancels the other batches. No texts, no calls.
pub(crate) async fn run_batches<F, Fut>(
    provider: &'static str,
    texts: &[String],
    batch_size: usize,
    embed_batch: F,
) -> Result<Vec<Vec<f32>>>
where
    F: Fn(Vec<String>) -> Fut,
    Fut: Future<Output = Result<Vec<Vec<f32>>>> + Send + 'static,
{
    if texts.is_empty() {
        return Ok(Vec::new());
    }
    let batches: Vec<Vec<String>> = texts
        .chunks(batch_size.max(1))
        .map(<[String]>::to_vec)
        .collect();
    let count = batches.len();
    let mut set = JoinSet::new();
    for (i, batch) in batches.into_iter().enumerate() {
        let expected = batch.len();
        let fut = embed_batch(batch);
        set.spawn(
            async move {
                let vectors = fut.await?;
                if vectors.len() != expected {
                    return Err(Error::ModelOutput {
                        provider: provider.to_string(),
                        message: format!(
                            "{expected} texts were sent but {} vectors came back",
                            vectors.len()
                        ),
                    });
                }
                Ok((i, vectors))
            }
            .instrument(tracing::Span::current()),
        );
    }
    let mut slots: Vec<Option<Vec<Vec<f32>>>> = vec![None; count];
    while let Some(joined) = set.join_next().await {
        match joined {
            Ok(Ok((i, vectors))) => slots[i] = Some(vectors),
            Ok(Err(e)) => return Err(e),
            Err(join) => {
                return Err(Error::ModelOutput {
                    provider: provider.to_string(),
                    message: format!("batch task failed: {join}"),
                });
            }
        }
    }
    Ok(slots.into_iter().flatten().flatten().collect())
}

/// A JSON list of numbers as a vector; `None` if any element is not a number.
pub(crate) fn number_list(values: &[Value]) -> Option<Vec<f32>> {
    values
        .iter()
        .map(|x| x.as_f64().map(|f| f as f32))
        .collect()
}

/// Errors unless every vector has `dimension` finite numbers.
pub(crate) fn check_vectors(
    provider: &str,
    model: &str,
    dimension: usize,
    vectors: &[Vec<f32>],
) -> Result<()> {
    for (i, v) in vectors.iter().enumerate() {
        if v.len() != dimension {
            return Err(Error::ModelOutput {
                provider: provider.to_string(),
                message: format!(
                    "embedding model `{model}` returned {} numbers for text {i}, expected {dimension} \
                     (set the embedder dimension to the model's real size)",
                    v.len()
                ),
            });
        }
        if v.iter().any(|x| !x.is_finite()) {
            return Err(Error::ModelOutput {
                provider: provider.to_string(),
                message: format!(
                    "embedding model `{model}` returned a non-finite number for text {i}"
                ),
            });
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn dimensions() {
        assert_eq!(
            resolve_dimension("text-embedding-3-small", None).unwrap(),
            (1536, false)
        );
        assert_eq!(
            resolve_dimension("text-embedding-3-small", Some(512)).unwrap(),
            (512, true)
        );
        assert_eq!(
            resolve_dimension("text-embedding-3-large", Some(3072)).unwrap(),
            (3072, false)
        );
        assert_eq!(
            resolve_dimension("nomic-embed-text:latest", None).unwrap(),
            (768, false)
        );
        assert_eq!(
            resolve_dimension("my-local-model", Some(1000)).unwrap(),
            (1000, false)
        );
        let err = resolve_dimension("my-local-model", None).unwrap_err();
        assert_eq!(
            err.to_string(),
            "invalid configuration: `GRALKOR_EMBEDDER_DIMENSION` must be set: the vector size of embedding model `my-local-model` is not known"
        );
    }

    #[tokio::test]
    async fn batches_keep_order() {
        let texts: Vec<String> = (0..5).map(|i| i.to_string()).collect();
        let out = run_batches("t", &texts, 2, |batch| async move {
            Ok(batch
                .iter()
                .map(|t| vec![t.parse::<f32>().unwrap()])
                .collect())
        })
        .await
        .unwrap();
        assert_eq!(
            out,
            vec![vec![0.0], vec![1.0], vec![2.0], vec![3.0], vec![4.0]]
        );
        let err = run_batches("t", &texts, 2, |_| async { Ok(vec![vec![0.0]]) })
            .await
            .unwrap_err();
        assert!(
            err.to_string()
                .contains("texts were sent but 1 vectors came back"),
            "{err}"
        );
    }
}
