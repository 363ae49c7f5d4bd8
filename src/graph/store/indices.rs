//! The indices of a graph: what [`build_indices`] creates, and [`clear`].

#[cfg(any(test, feature = "testing"))]
use super::debt;
use crate::Result;
use crate::falkordb::{DEFAULT_STOPWORDS, FalkorDb, HnswOptions, IndexSpec, Similarity};

/// HNSW parameters of the vector indices: efRuntime 300 instead of FalkorDB's 10.
/// Measured by `examples/bench_search.rs` (1024-d, recall@10 against an exact scan):
/// efRuntime 10 gave 0.80 on 10,000 facts, 100 gave 0.98 on 10,000 but 0.92 on
/// 100,000. A query explores `max(efRuntime, k)` candidates, so searches that
/// over-fetch up to 300 neighbours cost the same as a top 10.
const HNSW: HnswOptions = HnswOptions {
    m: None,
    ef_construction: None,
    ef_runtime: Some(300),
};

/// The indices [`build_indices`] creates for an embedder of `embedding_dim` dimensions:
/// range indices on `uuid` of every kind (plus names and times that searches filter
/// on, and the episodes' extraction `state` that status counts and resumption read), fulltext indices with [`DEFAULT_STOPWORDS`], and cosine vector indices on
/// `Entity.name_embedding`, `RELATES_TO.fact_embedding`, `Community.name_embedding`
/// and `EpisodeEmbedding.embedding` (episode contents; efRuntime 300).
pub fn index_specs(embedding_dim: u32) -> Vec<IndexSpec> {
    let sw = DEFAULT_STOPWORDS;
    vec![
        IndexSpec::range_nodes(
            "Episodic",
            [
                "uuid",
                "created_at",
                "valid_at",
                "writer",
                "session",
                "state",
            ],
        ),
        IndexSpec::range_nodes("Entity", ["uuid", "name", "name_key", "created_at"]),
        IndexSpec::range_nodes("Community", ["uuid"]),
        IndexSpec::range_nodes(super::EPISODE_EMBEDDING_LABEL, ["uuid"]),
        IndexSpec::range_relationships(
            "RELATES_TO",
            [
                "uuid",
                "name",
                "created_at",
                "valid_at",
                "invalid_at",
                "expired_at",
            ],
        ),
        IndexSpec::range_relationships("MENTIONS", ["uuid"]),
        IndexSpec::range_relationships("HAS_MEMBER", ["uuid"]),
        IndexSpec::fulltext_nodes("Episodic", ["content", "source_description"], sw),
        IndexSpec::fulltext_nodes("Entity", ["name", "summary"], sw),
        IndexSpec::fulltext_relationships("RELATES_TO", ["name", "fact"], sw),
        IndexSpec::fulltext_nodes("Community", ["name"], sw),
        IndexSpec::vector_nodes(
            "Entity",
            "name_embedding",
            embedding_dim,
            Similarity::Cosine,
        )
        .with_hnsw(HNSW),
        IndexSpec::vector_relationships(
            "RELATES_TO",
            "fact_embedding",
            embedding_dim,
            Similarity::Cosine,
        )
        .with_hnsw(HNSW),
        IndexSpec::vector_nodes(
            "Community",
            "name_embedding",
            embedding_dim,
            Similarity::Cosine,
        )
        .with_hnsw(HNSW),
        IndexSpec::vector_nodes(
            super::EPISODE_EMBEDDING_LABEL,
            "embedding",
            embedding_dim,
            Similarity::Cosine,
        )
        .with_hnsw(HNSW),
    ]
}

#[cfg(any(test, feature = "testing"))]
/// Creates every index of [`index_specs`] on `graph` that does not exist yet and
/// returns how many were created (0 when run again). Vector indices are sized to
/// `embedding_dim`; an existing vector index keeps the dimension it was created with.
///
/// ```no_run
/// # async fn run(db: gralkor::falkordb::FalkorDb) -> gralkor::Result<()> {
/// let created = gralkor::graph::build_indices(&db, "notes", 1024).await?;
/// assert_eq!(gralkor::graph::build_indices(&db, "notes", 1024).await?, 0);
/// # let _ = created; Ok(()) }
/// ```
pub async fn build_indices(db: &FalkorDb, graph: &str, embedding_dim: u32) -> Result<usize> {
    let created = db
        .create_indices(graph, &index_specs(embedding_dim))
        .await?;
    debt::prepare(db, graph).await?;
    Ok(created)
}

/// Deletes `graph` with everything in it, indices included. Returns `false` if it did
/// not exist.
pub async fn clear(db: &FalkorDb, graph: &str) -> Result<bool> {
    db.delete_graph(graph).await
}
