//! The per-episode work: [`Work`] is what the model steps of one claimed episode
//! share (the graph, the models, the options, the ontology and the held claim), with
//! the follow-up call helper and the first step, extraction and embeddings. The
//! resolution steps (`entities`, `facts`, `details`) take a `Work`; the pipeline
//! chains them.

use tracing::Instrument;
use uuid::Uuid;

use super::{AddEpisode, EngineOptions, IngestUsage, lease};
use crate::falkordb::FalkorDb;
use crate::graph::extract::{Extraction, ExtractionInput, KnownVerdict, extract_resolving};
use crate::graph::model::Episode;
use crate::graph::store::{self, ingest as st};
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

/// Known facts shown to the extraction call at most: the current facts of the stored
/// entities the episode names, newest first (see the ingestion module's docs, step 3).
pub(super) const KNOWN_FACTS: usize = 40;

/// The context of an extraction: the previous episodes' contents and the known facts.
pub(super) type Context = (Vec<String>, Vec<st::KnownFact>);

/// What extraction produced: the entities and facts, and their embeddings, and the
/// episode's content embedding; the known facts it was shown and its verdicts on them.
pub(super) struct Extracted {
    pub(super) extraction: Extraction,
    pub(super) known: Vec<st::KnownFact>,
    /// Per extracted fact (aligned with `extraction.facts`).
    pub(super) verdicts: Vec<KnownVerdict>,
    pub(super) name_vectors: Vec<Vec<f32>>,
    pub(super) fact_vectors: Vec<Vec<f32>>,
    pub(super) episode_vector: Vec<f32>,
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
        usage.steps.count(label);
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

    /// Extraction (call 1) with the previous episodes as context and the known facts
    /// to judge (`context` when the claim read them already), and one embedding request
    /// for every name and fact text and the episode's content.
    pub(super) async fn extract(
        &self,
        episode: &Episode,
        request: &AddEpisode,
        context: Option<Context>,
        usage: &mut IngestUsage,
    ) -> Result<Extracted> {
        let (previous, known) = match context {
            Some(context) => context,
            None => {
                let read = super::retry_db_step("extraction_context", || {
                    st::extraction_context(
                        self.db,
                        self.graph,
                        episode,
                        self.opts.previous_episodes,
                        KNOWN_FACTS,
                    )
                });
                read.await?
            }
        };
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
        let lines: Vec<String> = known
            .iter()
            .enumerate()
            .map(|(k, f)| {
                format!(
                    "known {k}: {} [{}] ({} —{}→ {})",
                    f.edge.fact,
                    super::facts::span(f.edge.valid_at, f.edge.invalid_at),
                    f.source_name,
                    f.edge.name,
                    f.target_name
                )
            })
            .collect();
        let (extraction, verdicts) = extract_resolving(self.llm, &input, &lines)
            .instrument(tracing::info_span!("extract", known = known.len()))
            .await?;
        usage.llm_calls += 1;
        usage.steps.count("extract");
        usage.tokens += extraction.usage;
        self.check_lease(episode.uuid)?;

        // One embedding request for every name and fact text, and the content.
        let texts: Vec<String> = extraction
            .entities
            .iter()
            .map(|e| e.name.clone())
            .chain(extraction.facts.iter().map(|f| f.fact.clone()))
            .chain([store::episode_embedding_text(&episode.content)])
            .collect();
        let mut vectors = embed_texts(self.embedder, &texts, usage).await?;
        let episode_vector = vectors
            .pop()
            .expect("one vector per text, the content last");
        let fact_vectors = vectors.split_off(extraction.entities.len());
        Ok(Extracted {
            extraction,
            known,
            verdicts,
            name_vectors: vectors,
            fact_vectors,
            episode_vector,
        })
    }
}

/// The one embedding request of an ingest: `texts` embedded (and counted in `usage`),
/// one vector per text or an error.
pub(super) async fn embed_texts(
    embedder: &dyn Embedder,
    texts: &[String],
    usage: &mut IngestUsage,
) -> Result<Vec<Vec<f32>>> {
    usage.embedding_calls += 1;
    let vectors = embedder
        .embed(texts, "ingest")
        .instrument(tracing::info_span!("embed", texts = texts.len()))
        .await?;
    if vectors.len() != texts.len() {
        return Err(Error::Protocol(format!(
            "the embedder returned {} vectors for {} texts",
            vectors.len(),
            texts.len()
        )));
    }
    Ok(vectors)
}
