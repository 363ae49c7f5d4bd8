//! The model steps of one claimed episode ([`Work`]): extraction and embeddings, then
//! entity resolution, fact resolution and details, which make the commit set.

use tracing::Instrument;
use uuid::Uuid;

use super::{AddEpisode, EngineOptions, IngestUsage, details, entities, facts, lease};
use crate::falkordb::FalkorDb;
use crate::graph::extract::{Extraction, ExtractionInput, extract};
use crate::graph::model::{EntityEdge, Episode};
use crate::graph::store::ingest as st;
use crate::llm::{Embedder, LanguageModel};
use crate::ontology::Ontology;
use crate::{Error, Result};

/// The model steps of one claimed episode.
pub(super) struct Work<'a> {
    pub(super) db: &'a FalkorDb,
    pub(super) graph: &'a str,
    pub(super) llm: &'a dyn LanguageModel,
    pub(super) embedder: &'a dyn Embedder,
    pub(super) opts: &'a EngineOptions,
    pub(super) ontology: &'a Ontology,
    pub(super) lease: &'a lease::Lease,
}

/// What extraction produced: the entities and facts, and their embeddings.
pub(super) struct Extracted {
    extraction: Extraction,
    name_vectors: Vec<Vec<f32>>,
    fact_vectors: Vec<Vec<f32>>,
}

/// What the model steps produced: the commit, and the outcome's fact lists.
pub(super) struct Done {
    pub(super) set: st::CommitSet,
    pub(super) facts: Vec<EntityEdge>,
    pub(super) invalidated: Vec<EntityEdge>,
}

impl Work<'_> {
    /// One small-model call of a follow-up step: sends `system` and `user` against
    /// `schema`, counts the call and its tokens, and reads the answer as `T`.
    pub(super) async fn ask<T: serde::de::DeserializeOwned>(
        &self,
        schema: crate::llm::OutputSchema,
        system: &str,
        user: String,
        label: &str,
        usage: &mut IngestUsage,
    ) -> Result<T> {
        let name = schema.name.clone();
        let request = crate::llm::GenerateRequest::new(schema)
            .system(system)
            .user(user)
            .size(crate::llm::ModelSize::Small)
            .label(label);
        let generation = self.llm.generate(&request).await?;
        usage.llm_calls += 1;
        usage.tokens += generation.usage;
        serde_json::from_value(generation.value).map_err(|e| Error::ModelOutput {
            provider: self.llm.provider().to_owned(),
            message: format!("`{name}` answer: {e}"),
        })
    }

    pub(super) fn check_lease(&self, uuid: Uuid) -> Result<()> {
        if self.lease.lost() {
            Err(Error::ClaimLost { uuid })
        } else {
            Ok(())
        }
    }

    /// Extraction (call 1) with the previous episodes as context, and one embedding
    /// request for every name and fact text.
    pub(super) async fn extract(
        &self,
        episode: &Episode,
        request: &AddEpisode,
        usage: &mut IngestUsage,
    ) -> Result<Extracted> {
        let previous = st::previous_contents(
            self.db,
            self.graph,
            episode.uuid,
            episode.valid_at,
            self.opts.previous_episodes,
        )
        .await?;
        usage.db_round_trips += 1;
        let mut input = ExtractionInput::new(
            &episode.content,
            episode.source,
            episode.valid_at,
            self.ontology,
        );
        input.source_description = &episode.source_description;
        input.previous_episodes = &previous;
        input.excluded_types = &request.excluded_types;
        input.instructions = request.instructions.as_deref();
        let extraction = extract(self.llm, &input)
            .instrument(tracing::info_span!("extract"))
            .await?;
        usage.llm_calls += 1;
        usage.tokens += extraction.usage;
        self.check_lease(episode.uuid)?;

        // One embedding request for every name and fact text.
        let texts: Vec<String> = extraction
            .entities
            .iter()
            .map(|e| e.name.clone())
            .chain(extraction.facts.iter().map(|f| f.fact.clone()))
            .collect();
        let mut vectors = if texts.is_empty() {
            Vec::new()
        } else {
            usage.embedding_calls += 1;
            self.embedder
                .embed(&texts, "ingest")
                .instrument(tracing::info_span!("embed", texts = texts.len()))
                .await?
        };
        if vectors.len() != texts.len() {
            return Err(Error::Protocol(format!(
                "the embedder returned {} vectors for {} texts",
                vectors.len(),
                texts.len()
            )));
        }
        let fact_vectors = vectors.split_off(extraction.entities.len());
        Ok(Extracted {
            extraction,
            name_vectors: vectors,
            fact_vectors,
        })
    }

    /// Entity and fact resolution, details, and the commit set.
    pub(super) async fn resolve(
        &self,
        episode: &Episode,
        extracted: &Extracted,
        usage: &mut IngestUsage,
    ) -> Result<Done> {
        let Extracted {
            extraction,
            name_vectors,
            fact_vectors,
        } = extracted;
        let resolved = entities::resolve(self, &extraction.entities, name_vectors.clone(), usage)
            .instrument(tracing::info_span!("resolve_entities"))
            .await?;
        self.check_lease(episode.uuid)?;
        let facts = facts::resolve(
            self,
            episode,
            &extraction.facts,
            fact_vectors.clone(),
            &resolved,
            usage,
        )
        .instrument(tracing::info_span!("resolve_facts"))
        .await?;
        self.check_lease(episode.uuid)?;
        let mut nodes = resolved.nodes;
        details::fill(self, &mut nodes, &resolved.is_new, &facts.new_facts, usage)
            .instrument(tracing::info_span!("details"))
            .await?;
        self.check_lease(episode.uuid)?;

        let mut entity_edges: Vec<Uuid> = facts.new_facts.iter().map(|f| f.uuid).collect();
        entity_edges.extend(facts.confirmed.iter().map(|f| f.uuid));
        let mut outcome_facts = facts.new_facts.clone();
        outcome_facts.extend(facts.confirmed.iter().cloned());
        Ok(Done {
            set: st::CommitSet {
                mentions: nodes.iter().map(|n| n.uuid).collect(),
                entities: nodes,
                new_facts: facts.new_facts,
                updated_facts: facts.updates,
                entity_edges,
                fresh_keys: resolved.fresh_keys,
            },
            facts: outcome_facts,
            invalidated: facts.invalidated,
        })
    }
}
