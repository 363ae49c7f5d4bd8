//! The search and index parts of [`Engine`]: the indices it keeps on every graph, their
//! status, and search.

use tracing::Instrument;

use super::engine::Engine;
use crate::falkordb::{FalkorDb, IndexEntity, IndexKind, physical_graph_name};
use crate::graph::search::{self, SearchRequest, SearchResults};
use crate::graph::store;
use crate::{Error, Result};

impl Engine {
    /// The indices this engine keeps on every graph it writes: `store::index_specs`,
    /// without the vector indices when it has no embedder.
    pub fn index_specs(&self) -> Vec<crate::falkordb::IndexSpec> {
        let dimension = self.inner.embedder.as_ref().map(|e| e.dimension());
        store::index_specs(dimension.unwrap_or(1).try_into().unwrap_or(u32::MAX))
            .into_iter()
            .filter(|s| dimension.is_some() || !matches!(s.kind, IndexKind::Vector { .. }))
            .collect()
    }

    /// What `graph` holds and whether its indices serve: episodes, those still pending
    /// extraction (counted through the range index on `Episodic.state`), and every
    /// index of [`index_specs`](Self::index_specs) that is missing or still being
    /// built. A graph that does not exist yet (it is created by its first write)
    /// reports `exists: false` and nothing else. Four reads, run concurrently.
    ///
    /// ```no_run
    /// # async fn run(engine: gralkor::graph::Engine) -> gralkor::Result<()> {
    /// let status = engine.graph_status("notes").await?;
    /// println!("{} episodes, {} pending", status.episodes, status.pending);
    /// assert!(status.indices_missing.is_empty() || !status.exists);
    /// # Ok(()) }
    /// ```
    pub async fn graph_status(&self, graph: &str) -> Result<crate::graph::GraphStatus> {
        physical_graph_name(graph)?;
        let db = &self.inner.db;
        let span = tracing::debug_span!("gralkor.engine.graph_status", graph);
        async {
            // A graph that does not exist reads as empty, so all run at once.
            let (graphs, (episodes, pending), listed) = tokio::try_join!(
                db.list_graphs(),
                store::episode_counts(db, graph),
                db.list_indices(graph),
            )?;
            if !graphs.iter().any(|g| g == graph) {
                return Ok(crate::graph::GraphStatus::default());
            }
            let mut status = crate::graph::GraphStatus::default();
            status.exists = true;
            status.episodes = episodes;
            status.pending = pending;
            for spec in self.index_specs() {
                let kind = std::mem::discriminant(&spec.kind);
                for property in &spec.properties {
                    let name = index_name(&spec.kind, &spec.entity, property);
                    match listed.iter().find(|i| {
                        i.entity == spec.entity
                            && &i.property == property
                            && std::mem::discriminant(&i.kind) == kind
                    }) {
                        None => status.indices_missing.push(name),
                        Some(i) if !i.operational => status.indices_building.push(name),
                        Some(_) => {}
                    }
                }
            }
            Ok(status)
        }
        .instrument(span)
        .await
    }

    /// Creates the graph's indices (and the unique constraint on episode uuids, and the
    /// vector-debt counters) unless the engine's database handle — or a clone of it —
    /// prepared the graph for an engine of the same embedder dimension since the graph
    /// was last deleted (`FalkorDb::is_prepared`), and checks that an existing vector
    /// index has the embedder's dimension. Called by every write; call it yourself to
    /// prepare a graph.
    ///
    /// ```no_run
    /// # async fn run(db: gralkor::falkordb::FalkorDb) -> gralkor::Result<()> {
    /// gralkor::graph::Engine::episodes_only(db).build_indices("notes").await?;
    /// # Ok(()) }
    /// ```
    pub async fn build_indices(&self, graph: &str) -> Result<()> {
        physical_graph_name(graph)?;
        let db = &self.inner.db;
        let dimension = self.inner.embedder.as_ref().map(|e| e.dimension());
        // Readiness lives with the database handle, which forgets it when the graph
        // is deleted by any path (`FalkorDb::delete_graph`, `graph::clear`,
        // `Engine::clear`).
        let prepared = match dimension {
            Some(d) => format!("gralkor.engine:{d}"),
            None => "gralkor.engine:episodes".to_owned(),
        };
        if db.is_prepared(graph, &prepared) {
            return Ok(());
        }
        let specs = self.index_specs();
        db.create_indices(graph, &specs).await?;
        db.create_unique_constraint(graph, &IndexEntity::Node("Episodic".into()), "uuid")
            .await?;
        if dimension.is_some() {
            store::debt::prepare(db, graph).await?;
        }
        if let Some(want) = dimension {
            check_vector_dimensions(db, graph, want).await?;
        }
        db.mark_prepared(graph, &prepared);
        Ok(())
    }

    /// Checks, reading only, that every graph on the server whose vector indices exist
    /// has this engine's embedder dimension, so an engine with another embedder is a
    /// clear error when it is made ready (the native client calls this at connect),
    /// not at its first write. Nothing to check without an embedder.
    ///
    /// ```no_run
    /// # async fn run(engine: gralkor::graph::Engine) -> gralkor::Result<()> {
    /// engine.check_dimensions().await?;
    /// # Ok(()) }
    /// ```
    pub async fn check_dimensions(&self) -> Result<()> {
        let Some(want) = self.inner.embedder.as_ref().map(|e| e.dimension()) else {
            return Ok(());
        };
        for graph in self.list_graphs().await? {
            check_vector_dimensions(&self.inner.db, &graph, want).await?;
        }
        Ok(())
    }

    /// [`build_indices`](Engine::build_indices) for every graph on the server. A graph
    /// deleted while its indices were being built is recreated, half indexed, by the
    /// remaining index statements (any graph command creates its key): it is built once
    /// more — creating indices is idempotent — unless it is gone for good.
    ///
    /// ```no_run
    /// # async fn run(engine: gralkor::graph::Engine) -> gralkor::Result<()> {
    /// engine.build_all_indices().await?;
    /// # Ok(()) }
    /// ```
    pub async fn build_all_indices(&self) -> Result<()> {
        for graph in self.list_graphs().await? {
            if let Err(first) = self.build_indices(&graph).await {
                if !self.list_graphs().await?.contains(&graph) {
                    continue;
                }
                tracing::warn!(graph, error = %first, "building indices failed; trying once more");
                self.build_indices(&graph).await?;
            }
        }
        Ok(())
    }

    /// Runs `request` on `graph` with this engine's embedder and reranker (see
    /// `graph::search`).
    ///
    /// ```no_run
    /// # async fn run(engine: gralkor::graph::Engine) -> gralkor::Result<()> {
    /// use gralkor::graph::search::{COMBINED_HYBRID_SEARCH_RRF, SearchRequest};
    ///
    /// let req = SearchRequest::new("Alice Acme", COMBINED_HYBRID_SEARCH_RRF.limit(5));
    /// let found = engine.search("notes", &req).await?;
    /// assert!(found.facts.len() <= 5);
    /// # Ok(()) }
    /// ```
    pub async fn search(&self, graph: &str, request: &SearchRequest) -> Result<SearchResults> {
        search::search(
            &self.inner.db,
            graph,
            request,
            self.inner.embedder.as_deref(),
            self.inner.reranker.as_deref(),
        )
        .await
    }

    /// Runs `request` on each of `graphs`, concurrently, embedding the query once for
    /// all of them; the results are in the order of `graphs`. The first error fails the
    /// whole call.
    ///
    /// ```no_run
    /// # async fn run(engine: gralkor::graph::Engine) -> gralkor::Result<()> {
    /// use gralkor::graph::search::{COMBINED_HYBRID_SEARCH_RRF, SearchRequest};
    ///
    /// let req = SearchRequest::new("Alice", COMBINED_HYBRID_SEARCH_RRF.limit(5));
    /// let per_graph = engine.search_many(&["notes", "team"], &req).await?;
    /// assert_eq!(per_graph.len(), 2);
    /// # Ok(()) }
    /// ```
    pub async fn search_many(
        &self,
        graphs: &[&str],
        request: &SearchRequest,
    ) -> Result<Vec<SearchResults>> {
        // The query is embedded once for every graph (see `search::search_many`).
        search::search_many(
            &self.inner.db,
            graphs,
            request,
            self.inner.embedder.as_deref(),
            self.inner.reranker.as_deref(),
        )
        .await
    }
}

/// Fails when a vector index of `graph` has another dimension than `want`.
async fn check_vector_dimensions(db: &FalkorDb, graph: &str, want: usize) -> Result<()> {
    for index in db.list_indices(graph).await? {
        if let IndexKind::Vector {
            dimension: have, ..
        } = index.kind
            && usize::try_from(have).ok() != Some(want)
        {
            return Err(Error::config(
                "embedder dimension",
                format!(
                    "must match graph `{graph}`'s vector index on {:?}.{} ({have} \
                     dimensions, this embedder gives {want}); use the embedder the \
                     graph was built with or clear the graph",
                    index.entity, index.property
                ),
            ));
        }
    }
    Ok(())
}

/// `range Episodic.uuid`, `fulltext RELATES_TO.fact`, `vector Entity.name_embedding`.
fn index_name(kind: &IndexKind, entity: &IndexEntity, property: &str) -> String {
    let kind = match kind {
        IndexKind::Range => "range",
        IndexKind::Fulltext { .. } => "fulltext",
        IndexKind::Vector { .. } => "vector",
    };
    let (IndexEntity::Node(on) | IndexEntity::Relationship(on)) = entity;
    format!("{kind} {on}.{property}")
}
