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
//! | `passages.rs` | [`episode_passages`]: a long episode's content embedded in parts |
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
internal_mod!(communities);
pub(crate) mod debt;
pub(crate) mod dump;
mod entities;
mod episodes;
mod facts;
mod indices;
mod listing;
pub(crate) mod ingest;
mod passages;
pub(crate) mod owner;
internal_mod!(links);
internal_mod!(owned);
pub(crate) mod relationships;
mod remove;
mod write;

internal_use!(candidates::{CandidateQuery, EntityCandidate, MAX_CANDIDATE_LIMIT, entity_candidates});
testing_use!(communities::{get_communities, get_community_members, save_communities});
internal_use!(debt::{VectorIndex, rebuild_vector_index, vector_debt});
internal_use!(entities::get_entities);
testing_use!(entities::save_entities);
internal_use!(episodes::{EPISODE_EMBEDDING_CHARS, episode_embedding_text, get_episode, session_episodes});
testing_use!(episodes::save_episode);
internal_use!(passages::{MAX_PASSAGES, PASSAGE_CHARS, episode_passages});
pub(crate) use passages::write_passages;
internal_use!(facts::get_facts);
testing_use!(facts::save_facts);
internal_use!(indices::{clear, index_specs});
testing_use!(indices::build_indices);
internal_use!(links::{get_mentioned_entities, link_uuid});
testing_use!(links::{get_episodes_mentioning, save_community_members, save_mentions});
internal_use!(owned::{OWNED_ID_KEY, OWNER_KEY, OwnedNode, OwnedRelationship, ReplaceCounts, replace_owned});
testing_use!(owned::get_owned);
internal_use!(remove::{Removal, remove_episode});
pub use listing::GraphCounts;
pub(crate) use listing::{contents, counts, episode_counts, has_entities, recent_episodes};

// What the record files share, at the paths the other files and `graph::search` use.
pub(crate) use codec::{Row, rows, ts, uuids};
pub(crate) use entities::{
    ENTITY_COLUMNS, SET_ENTITY, checked_labels, entity_from_row, entity_row,
};
pub(crate) use episodes::{EPISODE_COLUMNS, EPISODE_EMBEDDING_LABEL, episode_from_row};
pub(crate) use facts::{FACT_COLUMNS, SET_FACT, fact_from_row, fact_row};
pub(crate) use write::check_dimensions;
#[cfg(any(test, feature = "testing"))]
pub(crate) use write::missing_nodes;
