//! Writes and reads of the graph's data types on FalkorDB. Every function takes the
//! database handle and the logical graph id; nothing is remembered between calls.
//!
//! Every value travels as a query parameter; lists of records travel as one list of
//! maps, unwound in Cypher. Labels cannot be parameters, so they are checked with
//! [`is_identifier`](crate::falkordb::is_identifier) before any statement is sent.
//!
//! One file per record kind, and this file the map:
//!
//! | file | holds |
//! |---|---|
//! | `indices.rs` | [`index_specs`], [`build_indices`], [`clear`] |
//! | `episodes.rs` | `Episodic` nodes: [`save_episode`], [`get_episode`]; their `EpisodeEmbedding` nodes |
//! | `entities.rs` | `Entity` nodes: [`save_entities`], [`get_entities`] |
//! | `facts.rs` | `RELATES_TO` relationships: [`save_facts`], [`get_facts`] |
//! | [`communities`] | `Community` nodes |
//! | [`links`] | the `MENTIONS` and `HAS_MEMBER` relationships |
//! | [`owned`] | the nodes and relationships of replace-graph Lenses |
//! | `candidates.rs` | [`entity_candidates`], the candidate lookup of entity resolution |
//! | `remove.rs` | [`remove_episode`] |
//! | [`debt`](VectorIndex) | the stale entries of the vector indices |
//! | `ingest.rs` | the statements of the ingestion pipeline |
//! | `capture.rs` | the capture buffer's pending entries and turns |
//! | `relationships.rs` | the embedded authorizer's relationship graph |
//! | `codec.rs` | the row codec: parameters out, reply rows back to records |
//! | `write.rs` | batched statements, existence and embedding-dimension checks |
//!
//! ## Embedding dimensions
//!
//! A write carrying an embedding first reads the dimension of the matching vector index
//! with one `db.indexes()` call ([`FalkorDb::list_indices`](crate::falkordb::FalkorDb::list_indices)) and rejects an embedding of
//! another length with [`Error::InvalidInput`](crate::Error::InvalidInput) naming it (e.g.
//! `entities[2].name_embedding`), before anything is written. The dimension is looked up
//! per call rather than passed in or cached: the index is the single source of truth
//! (it keeps the dimension it was created with), and no state outlives a call. A write
//! without embeddings makes no lookup; a graph without the vector index (indices not
//! built yet) accepts any length.

mod candidates;
pub(crate) mod capture;
mod codec;
pub mod communities;
pub(crate) mod debt;
mod entities;
mod episodes;
mod facts;
mod indices;
pub(crate) mod ingest;
pub mod links;
pub mod owned;
pub(crate) mod relationships;
mod remove;
mod write;

pub use candidates::{CandidateQuery, EntityCandidate, MAX_CANDIDATE_LIMIT, entity_candidates};
pub use communities::{get_communities, get_community_members, save_communities};
pub use debt::{VectorIndex, rebuild_vector_index, vector_debt};
pub use entities::{get_entities, save_entities};
pub use episodes::{
    EPISODE_EMBEDDING_CHARS, episode_embedding_text, get_episode, save_episode, session_episodes,
};
pub use facts::{get_facts, save_facts};
pub use indices::{build_indices, clear, index_specs};
pub use links::{
    get_episodes_mentioning, get_mentioned_entities, link_uuid, save_community_members,
    save_mentions,
};
pub use owned::{
    OWNED_ID_KEY, OWNER_KEY, OwnedNode, OwnedRelationship, ReplaceCounts, get_owned, replace_owned,
};
pub use remove::{Removal, remove_episode};

// What the record files share, at the paths the other files and `graph::search` use.
pub(crate) use codec::{Row, rows, ts, uuids};
pub(crate) use entities::{
    ENTITY_COLUMNS, SET_ENTITY, checked_labels, entity_from_row, entity_row,
};
pub(crate) use episodes::{EPISODE_COLUMNS, EPISODE_EMBEDDING_LABEL, episode_from_row};
pub(crate) use facts::{FACT_COLUMNS, SET_FACT, fact_from_row, fact_row};
pub(crate) use write::{check_dimensions, missing_nodes};
