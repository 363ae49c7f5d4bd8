//! What goes in and comes out of an ingestion: the request [`AddEpisode`] (with its
//! limits and its one validation), and the outcomes [`EpisodeOutcome`],
//! [`ResumeReport`], [`IngestUsage`] and [`OutcomeStatus`].

use uuid::Uuid;

use crate::graph::model::{EntityEdge, EntityNode, Episode, SourceKind, Timestamp};
use crate::llm::TokenUsage;
use crate::ontology::Ontology;
use crate::{Error, Result};

#[cfg(doc)]
use super::Engine;

pub use crate::vocab::{MAX_CONTENT_BYTES, MAX_SOURCE_DESCRIPTION_BYTES};

/// One episode to ingest. Build with [`AddEpisode::new`] and the setters.
#[derive(Debug, Clone)]
#[non_exhaustive]
pub struct AddEpisode {
    /// A caller-chosen uuid that makes the request replay-safe; a fresh one otherwise.
    pub uuid: Option<Uuid>,
    /// The text (for [`SourceKind::Json`], a JSON document).
    pub content: String,
    /// What kind of text it is.
    pub source: SourceKind,
    /// Where it came from (may be empty).
    pub source_description: String,
    /// When it happened in the world; relative times resolve against it.
    pub reference_time: Timestamp,
    /// Entity and relationship types; the generic ontology when `None`.
    pub ontology: Option<Ontology>,
    /// Entity type labels not to extract.
    pub excluded_types: Vec<String>,
    /// Extra instructions appended to the extraction prompt.
    pub instructions: Option<String>,
    /// Who wrote it: an opaque key stored as the episode's `writer` property, which
    /// searches filter on ([`SearchFilters::writers`](crate::graph::SearchFilters::writers));
    /// `None` leaves it unattributed.
    pub writer: Option<String>,
    /// The conversation session it came from, stored as the episode's `session`
    /// property; `None` for an episode outside any session.
    pub session: Option<String>,
}

impl AddEpisode {
    /// An episode of `content` of kind `source` that happened at `reference_time`.
    pub fn new(content: impl Into<String>, source: SourceKind, reference_time: Timestamp) -> Self {
        AddEpisode {
            uuid: None,
            content: content.into(),
            source,
            source_description: String::new(),
            reference_time,
            ontology: None,
            excluded_types: Vec::new(),
            instructions: None,
            writer: None,
            session: None,
        }
    }

    /// Sets the replay-safe uuid.
    pub fn uuid(mut self, uuid: Uuid) -> Self {
        self.uuid = Some(uuid);
        self
    }

    /// Sets the source description.
    pub fn source_description(mut self, description: impl Into<String>) -> Self {
        self.source_description = description.into();
        self
    }

    /// Sets the ontology.
    pub fn ontology(mut self, ontology: Ontology) -> Self {
        self.ontology = Some(ontology);
        self
    }

    /// Sets the entity types not to extract.
    pub fn excluded_types(mut self, labels: impl IntoIterator<Item = impl Into<String>>) -> Self {
        self.excluded_types = labels.into_iter().map(Into::into).collect();
        self
    }

    /// Records who wrote it (see [`AddEpisode::writer`](AddEpisode#structfield.writer)).
    pub fn writer(mut self, writer: impl Into<String>) -> Self {
        self.writer = Some(writer.into());
        self
    }

    /// Records the session it came from (see [`AddEpisode::session`](AddEpisode#structfield.session)).
    pub fn session(mut self, session: impl Into<String>) -> Self {
        self.session = Some(session.into());
        self
    }

    /// Sets extra extraction instructions.
    pub fn instructions(mut self, instructions: impl Into<String>) -> Self {
        self.instructions = Some(instructions.into());
        self
    }

    /// Checks the request; the error names the field and the rule.
    pub fn validate(&self) -> Result<()> {
        // The one content rule, shared with the memory API.
        crate::graph::check_content("content", self.source, &self.content)?;
        if self.source_description.len() > MAX_SOURCE_DESCRIPTION_BYTES {
            return Err(Error::invalid(
                "source_description",
                format!("must be at most {MAX_SOURCE_DESCRIPTION_BYTES} bytes"),
            ));
        }
        for (field, text) in [
            ("source_description", self.source_description.as_str()),
            ("instructions", self.instructions.as_deref().unwrap_or("")),
        ] {
            if text.contains('\0') {
                return Err(Error::invalid(field, "must not contain NUL characters"));
            }
        }
        Ok(())
    }
}

/// What one episode cost.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct IngestUsage {
    /// Language-model calls (at most 4 per episode).
    pub llm_calls: u32,
    /// The same calls by pipeline step.
    pub steps: StepCalls,
    /// Wall time of the whole call, from the request to the outcome.
    pub elapsed: std::time::Duration,
    /// Embedding requests (at most 1 per episode).
    pub embedding_calls: u32,
    /// Tokens the language-model calls used.
    pub tokens: TokenUsage,
    /// Requests sent to FalkorDB for the episode, each one round trip: every statement
    /// and pipeline, each retry, the lease renewals and whatever a step sends behind
    /// the scenes (an index listing, a schema reload, a vector-index rebuild).
    pub db_round_trips: u32,
}

/// Language-model calls of one episode by pipeline step (each at most 1).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct StepCalls {
    /// Extraction of entities and facts (`extract`).
    pub extract: u32,
    /// Ambiguous names (`resolve_entities`).
    pub resolve_entities: u32,
    /// Fact duplicates and contradictions (`resolve_facts`).
    pub resolve_facts: u32,
    /// Summaries and attributes (`entity_details`).
    pub entity_details: u32,
}

impl StepCalls {
    /// The step names (the calls' usage labels) with their counts, in pipeline order.
    pub fn by_name(&self) -> [(&'static str, u32); 4] {
        [
            ("extract", self.extract),
            ("resolve_entities", self.resolve_entities),
            ("resolve_facts", self.resolve_facts),
            ("entity_details", self.entity_details),
        ]
    }

    /// Counts one call of the step whose usage label is `label` (other labels are
    /// not steps and count nowhere).
    pub(crate) fn count(&mut self, label: &str) {
        match label {
            "extract" => self.extract += 1,
            "resolve_entities" => self.resolve_entities += 1,
            "resolve_facts" => self.resolve_facts += 1,
            "entity_details" => self.entity_details += 1,
            _ => {}
        }
    }
}

/// How an [`EpisodeOutcome`] came about.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum OutcomeStatus {
    /// Extracted and committed by this call.
    Completed,
    /// The same episode was complete already; nothing was extracted.
    Replayed,
    /// Stored and searchable, extraction not done (an episodes-only engine).
    Pending,
}

/// The result of [`Engine::add_episode`].
#[derive(Debug, Clone)]
#[non_exhaustive]
pub struct EpisodeOutcome {
    /// The episode as stored.
    pub episode: Episode,
    /// How the outcome came about.
    pub status: OutcomeStatus,
    /// Entities the episode created or updated (for a replay: the ones it mentions).
    pub entities: Vec<EntityNode>,
    /// Facts the episode created, or existing facts it confirmed (for a replay: its
    /// facts as stored now).
    pub facts: Vec<EntityEdge>,
    /// Existing facts the episode invalidated, as updated (empty for a replay).
    pub invalidated: Vec<EntityEdge>,
    /// What it cost.
    pub usage: IngestUsage,
}

/// The result of [`Engine::resume_pending`].
#[derive(Debug, Default)]
#[non_exhaustive]
pub struct ResumeReport {
    /// Episodes finished by this call, oldest first.
    pub completed: Vec<EpisodeOutcome>,
    /// Episodes another live writer holds.
    pub busy: Vec<Uuid>,
    /// Episodes that failed again, with the error; they stay pending — unless the
    /// error is [`Error::EpisodeQuarantined`].
    pub failed: Vec<(Uuid, Error)>,
    /// Episodes quarantined (before this call or by it), which it did not process:
    /// see [`Engine::quarantined`].
    pub quarantined: Vec<Uuid>,
}
