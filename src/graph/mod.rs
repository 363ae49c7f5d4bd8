//! The temporal knowledge graph: the ingestion engine, its steps, the data model and
//! storage.
//!
//! [`Engine`] is the one handle: it owns the database handle ([`Engine::db`]) and the
//! models ([`Engine::llm`], [`Engine::embedder`], [`Engine::reranker`]), and names the
//! graph per call. [`Engine::add_episode`] turns an episode into entities and facts —
//! durable first, replay-safe, claimed across processes, at most four model calls and
//! one embedding request per episode, one atomic commit (the pipeline is described in
//! `ingest`) — [`Engine::resume_pending`] finishes pending episodes, and
//! [`Engine::remove_episode`], [`Engine::add_triplet`] and [`Engine::build_communities`]
//! complete it. [`Engine::search`] (and [`Engine::search_many`] over several graphs)
//! runs `search` with the engine's embedder and reranker: facts,
//! entities, episodes and communities through FalkorDB's own indices (fulltext, HNSW
//! vectors, breadth-first walks), reranked, with current / history / as-of time modes.
//! [`Engine::owned_nodes`] and [`Engine::replace_owned`] read and replace
//! Lens-owned content; [`Engine::build_indices`] and [`Engine::build_all_indices`]
//! prepare graphs (readiness lives with the database handle and is forgotten whenever a
//! graph is deleted: [`FalkorDb::delete_graph`](crate::falkordb::FalkorDb::delete_graph),
//! `clear`, [`Engine::clear`]).
//!
//! The steps are public for reuse and testing: `extract` makes the one
//! structured model call that yields an episode's entities and facts (our own prompts
//! live in the private `prompts` module); `dedup` is the deterministic part of entity
//! resolution — exact normalised names first, then MinHash/Jaccard, with a
//! low-information guard — leaving only the ambiguous names for one batched model
//! call; `temporal` applies Graphiti's invalidation rules to the facts a new fact
//! contradicts; `communities` clusters entities by label propagation and names the
//! clusters in batched calls.
//!
//! `model` holds the plain data types — [`Episode`] (`Episodic` nodes), [`EntityNode`]
//! (`Entity` nodes plus ontology labels), [`EntityEdge`] (facts, `RELATES_TO`
//! relationships) and `Community` — and `store`, the layer below the engine, writes
//! and reads them on a FalkorDB handle and graph given per call: `build_indices`,
//! `save_episode`, `get_episode`, `save_entities`, `get_entities`,
//! `save_facts`, `get_facts`, `save_mentions`, `get_mentioned_entities`,
//! `get_episodes_mentioning`, `save_communities`, `get_communities`,
//! `save_community_members`, `get_community_members`, `entity_candidates` and
//! `clear`.
//! Every value reaches Cypher as a parameter; every write `MERGE`s on `uuid`, so
//! repeating it creates nothing new.
//!
//! ## Time
//!
//! Every instant is a [`Timestamp`]: whole **microseconds since the Unix epoch, UTC**,
//! stored in the graph as a plain integer property. Graphiti stores ISO-8601 strings and
//! compares them as text, which breaks as soon as two offsets, precisions or formats
//! meet; an integer compares correctly in Cypher (`WHERE f.valid_at <= $t`), sorts
//! correctly, cannot carry a time zone, and survives the reply protocol exactly
//! (FalkorDB formats doubles with 15 significant digits, so floats are never used).
//! Microseconds cover ±292,000 years. Text in and out is RFC 3339 in UTC, parsed and
//! formatted by [`Timestamp`] itself.
//!
//! ## Storage layout
//!
//! * `(:Episodic {uuid, content, source, source_description, valid_at, created_at,
//!   entity_edges, state, writer, session})` — `source` is `message`/`text`/`json`, `state` is
//!   `pending`/`complete`, `entity_edges` a list of uuid strings, `writer` an opaque
//!   writer key (absent: unattributed) that
//!   [`SearchFilters::writers`](search::SearchFilters::writers) selects on.
//! * `(:Entity:<Label>… {uuid, name, name_key, summary, attributes, name_embedding,
//!   created_at})` — `name_key` is `dedup::normalize_name` of the name, range-indexed
//!   for the exact path of entity resolution;
//!   — labels are checked to be identifiers before anything is written.
//! * `(:Entity)-[:RELATES_TO {uuid, name, fact, fact_embedding, episodes, valid_at,
//!   invalid_at, expired_at, created_at, attributes, source_uuid, target_uuid}]->(:Entity)`.
//! * `(:Episodic)-[:MENTIONS {uuid, created_at}]->(:Entity)` — the entities an episode
//!   mentions.
//! * `(:Community {uuid, name, summary, name_embedding, created_at})` and
//!   `(:Community)-[:HAS_MEMBER {uuid, created_at}]->(:Entity)`.
//! * A `MENTIONS` or `HAS_MEMBER` link's uuid is derived from its type and endpoints
//!   (`link_uuid`: SHA-256, version 8), so saving a link twice creates it once;
//!   `created_at` is set when it is created. Both endpoints must exist
//!   ([`Error::NotFound`](crate::Error::NotFound) otherwise, before any write).
//! * `attributes` are stored as one JSON text property, not flattened (as Graphiti
//!   does): values round-trip exactly whatever their shape, and an attribute can never
//!   clash with a core property.
//! * Embeddings are `vecf32` properties, indexed by HNSW vector indices (cosine) sized
//!   to the embedder by `build_indices`. Every write checks its embeddings against
//!   the dimension of the graph's vector index (read per call, never cached) and
//!   rejects a wrong length naming the field, e.g. `entities[2].name_embedding`, before
//!   writing anything.
//!
//! ```no_run
//! # async fn run(db: gralkor::falkordb::FalkorDb) -> gralkor::Result<()> {
//! use gralkor::graph::{self, Episode, SourceKind, Timestamp};
//!
//! graph::build_indices(&db, "notes", 1024).await?;
//! let ep = Episode::new("Alice joined Acme.", SourceKind::Text, "chat", Timestamp::now());
//! graph::save_episode(&db, "notes", &ep).await?;
//! assert_eq!(graph::get_episode(&db, "notes", ep.uuid).await?, Some(ep));
//! # Ok(()) }
//! ```

// The engine's rooms are internal; the advanced surface is re-exported here, once.
// The `testing` feature (the crate's own tests only, not a semver promise) opens the
// rooms and the flat re-exports below.
internal_mod!(communities);
internal_mod!(dedup);
mod dump;
internal_mod!(extract);
internal_mod!(ingest);
internal_mod!(model);
pub(crate) mod native_storage;
mod prompts;
internal_mod!(search);
internal_mod!(store);
internal_mod!(temporal);

// The advanced surface: the engine handle, its requests and results.
pub use communities::{CommunityOptions, CommunityReport};
pub use ingest::{AddEpisode, Engine, EngineOptions, EpisodeOutcome, IngestUsage, OutcomeStatus};
pub use model::{EntityEdge, EntityNode, Episode, EpisodeState};
pub use store::dump::DumpSummary;
internal_use!(model::{GraphStatus, SourceKind, Timestamp});
internal_use!(native_storage::owned_parts);
pub use search::{
    COMBINED_HYBRID_SEARCH_RRF, CommunityHit, DateFilter, EDGE_HYBRID_SEARCH_RRF, EntityHit,
    EpisodeHit, FactHit, Methods, RerankerKind, ScopeConfig, SearchConfig, SearchFilters,
    SearchRequest, SearchResults, TimeMode,
};
pub use store::GraphCounts;

internal_use!(communities::{COMMUNITY_SCHEMA_NAME, build_communities, community_schema});
internal_use!(crate::vocab::check_content);
internal_use!(extract::{
    DEFAULT_EXTRACTION_LABEL, EXTRACTION_SCHEMA_NAME, ExtractedEntity, ExtractedFact, Extraction,
    ExtractionInput, GENERIC_RELATION_TYPE, extract, extraction_schema,
});
internal_use!(ingest::{
    MAX_CONTENT_BYTES, MAX_SOURCE_DESCRIPTION_BYTES, ResumeReport, StepCalls, Triplet,
    TripletEntity, TripletOutcome,
});
internal_use!(model::Community);
internal_use!(search::{search, search_many});
testing_use!(search::search_facts);
internal_use!(store::{CandidateQuery, EntityCandidate, MAX_CANDIDATE_LIMIT, OWNED_ID_KEY, OWNER_KEY, OwnedNode, OwnedRelationship, Removal, ReplaceCounts, clear, entity_candidates, get_entities, get_episode, get_facts, get_mentioned_entities, index_specs, link_uuid, remove_episode, replace_owned, session_episodes});
testing_use!(store::{build_indices, get_communities, get_community_members, get_episodes_mentioning, get_owned, save_communities, save_community_members, save_entities, save_episode, save_facts, save_mentions});
