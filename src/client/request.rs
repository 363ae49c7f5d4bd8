//! Request values of the [`Client`](super::Client) operations (the Lens request,
//! [`Ingest`](crate::lens::Ingest), lives with the Lenses).
//!
//! Every request is `Serialize + Deserialize` — an agent framework can take one
//! straight from a tool call's JSON, and the operator id is checked while it is read —
//! and `#[non_exhaustive]`: build it with its constructor and builder methods, so new
//! fields do not break your code.

use serde::{Deserialize, Serialize};
use uuid::Uuid;

use crate::access::Subject;
use crate::destination::{GLOBAL, PERSONAL};
use crate::graph::Timestamp;
use crate::lens::Graph;
use crate::storage::{Content, DEFAULT_MAX_RESULTS, OperatorId, ResultType};

/// A whole-graph replacement through a replace-graph Lens.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[non_exhaustive]
pub struct Replace {
    /// The operator.
    pub operator_id: OperatorId,
    /// The registered replace-graph Lens.
    pub lens: String,
    /// The Lens's complete new graph.
    pub graph: Graph,
    /// Who asks (required when the client has an authorizer; see
    /// [`MemoryClient::with_authorizer`](super::MemoryClient::with_authorizer)).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub subject: Option<Subject>,
}

impl Replace {
    /// A replacement.
    pub fn new(operator: impl Into<OperatorId>, lens: impl Into<String>, graph: Graph) -> Replace {
        Replace {
            operator_id: operator.into(),
            lens: lens.into(),
            graph,
            subject: None,
        }
    }

    /// Who asks (required when the client has an authorizer).
    pub fn subject(mut self, subject: Subject) -> Self {
        self.subject = Some(subject);
        self
    }
}

/// A search over Destinations.
///
/// * No selectors: every accessible Destination (the operator's own `personal` graph
///   and every shared one), every writer.
/// * `destinations`: only these graphs (names OR together).
/// * `lenses`: only episodes and facts written by these Lenses (names OR together),
///   filtered **before** the limit; both selectors must match when both are given. A
///   Lens selector never adds its Destination, and is an error with node or artefact
///   results.
/// * `max_results` (default 20, 1–[`MAX_RESULTS_LIMIT`](crate::storage::MAX_RESULTS_LIMIT) = 200) applies per Destination.
/// * `as_of` (default: what is current): what was true at an instant instead. Facts
///   true at `t` — `valid_at` unknown or `<= t`, `invalid_at` unknown or `> t`,
///   `expired_at` unknown or `> t` (the engine's
///   `times_current`), so a fact invalidated
///   later is still found as of a time when it held; episodes (and episodes standing
///   in as facts) that had happened by `t` (their `valid_at`, the reference time,
///   `<= t`). It is an error with node or artefact results, which have no time.
///
/// ```
/// use gralkor::client::{ResultType, Search, OperatorId};
///
/// let s = Search::new(OperatorId::new("operator-42")?, "When do we release?")
///     .destinations(["personal", "global"])
///     .lenses(["decisions"])
///     .facts()
///     .max_results(5)
///     .as_of("2025-01-01T00:00:00Z".parse()?);
/// assert_eq!(s.result_type, ResultType::Facts { edge_types: vec![] });
/// assert_eq!(s.as_of.unwrap().to_rfc3339(), "2025-01-01T00:00:00.000000Z");
///
/// // From a tool call's arguments: omitted fields take their defaults.
/// let s: Search = serde_json::from_str(r#"{"operator_id": "operator-42", "query": "release"}"#).unwrap();
/// assert_eq!(s.max_results, 20);
/// assert!(serde_json::from_str::<Search>(r#"{"operator_id": " ", "query": "x"}"#).is_err());
/// # Ok::<(), gralkor::Error>(())
/// ```
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[non_exhaustive]
pub struct Search {
    /// The operator whose `personal` graph is accessible.
    pub operator_id: OperatorId,
    /// The query text; non-blank except for an artefact lookup by id; no NUL.
    pub query: String,
    /// Destination selector (empty: every accessible Destination).
    #[serde(default)]
    pub destinations: Vec<String>,
    /// Lens selector (empty: every writer).
    #[serde(default)]
    pub lenses: Vec<String>,
    /// What to return.
    #[serde(default)]
    pub result_type: ResultType,
    /// Results per Destination.
    #[serde(default = "default_max_results")]
    pub max_results: usize,
    /// Who asks (required when the client has an authorizer; see
    /// [`MemoryClient::with_authorizer`](super::MemoryClient::with_authorizer)).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub subject: Option<Subject>,
    /// What was true at this instant (RFC 3339 on the wire) instead of what is
    /// current; episode and fact results only.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub as_of: Option<Timestamp>,
}

impl Search {
    /// An episode search of every accessible Destination, 20 results each.
    pub fn new(operator: impl Into<OperatorId>, query: impl Into<String>) -> Search {
        Search {
            operator_id: operator.into(),
            query: query.into(),
            destinations: Vec::new(),
            lenses: Vec::new(),
            result_type: ResultType::Episodes,
            max_results: DEFAULT_MAX_RESULTS,
            subject: None,
            as_of: None,
        }
    }

    /// What was true at `t` instead of what is current (episode and fact results).
    pub fn as_of(mut self, t: Timestamp) -> Self {
        self.as_of = Some(t);
        self
    }

    /// Who asks (required when the client has an authorizer).
    pub fn subject(mut self, subject: Subject) -> Self {
        self.subject = Some(subject);
        self
    }

    /// Selects Destinations.
    pub fn destinations<S: Into<String>>(mut self, names: impl IntoIterator<Item = S>) -> Self {
        self.destinations = names.into_iter().map(Into::into).collect();
        self
    }

    /// Selects Lenses.
    pub fn lenses<S: Into<String>>(mut self, names: impl IntoIterator<Item = S>) -> Self {
        self.lenses = names.into_iter().map(Into::into).collect();
        self
    }

    /// Returns facts.
    pub fn facts(mut self) -> Self {
        self.result_type = ResultType::Facts {
            edge_types: Vec::new(),
        };
        self
    }

    /// Returns nodes with these labels (none: any).
    pub fn nodes<S: Into<String>>(mut self, entity_types: impl IntoIterator<Item = S>) -> Self {
        self.result_type = ResultType::Nodes {
            entity_types: entity_types.into_iter().map(Into::into).collect(),
        };
        self
    }

    /// Returns artefacts (optionally one by id).
    pub fn artefacts(mut self, artefact_id: Option<String>) -> Self {
        self.result_type = ResultType::Artefacts { artefact_id };
        self
    }

    /// Sets any result type.
    pub fn result_type(mut self, result_type: ResultType) -> Self {
        self.result_type = result_type;
        self
    }

    /// Sets the per-Destination limit.
    pub fn max_results(mut self, n: usize) -> Self {
        self.max_results = n;
        self
    }
}

/// Where a `memory_add` goes.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
#[non_exhaustive]
pub enum Route {
    /// A direct write to a registered Destination, without Lens authorship.
    Direct(String),
    /// Through a registered appending Lens.
    Lens(String),
}

impl Default for Route {
    /// Direct to `personal`.
    fn default() -> Self {
        Route::Direct(PERSONAL.to_string())
    }
}

/// The default source description of `memory_add`.
pub(crate) const DEFAULT_MEMORY_ADD_DESCRIPTION: &str = "manual";

fn default_memory_add_description() -> String {
    DEFAULT_MEMORY_ADD_DESCRIPTION.to_string()
}

fn default_max_results() -> usize {
    DEFAULT_MAX_RESULTS
}

/// A fire-and-forget write: validated at once, written in the background.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[non_exhaustive]
pub struct MemoryAdd {
    /// The operator.
    pub operator_id: OperatorId,
    /// What to remember.
    pub content: Content,
    /// Where it came from (default `manual`).
    #[serde(default = "default_memory_add_description")]
    pub source_description: String,
    /// Direct to a Destination (default `personal`) or through a Lens.
    #[serde(default)]
    pub route: Route,
    /// Who asks (required when the client has an authorizer; see
    /// [`MemoryClient::with_authorizer`](super::MemoryClient::with_authorizer)).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub subject: Option<Subject>,
    /// The people and agents it concerns: they may view it (with an authorizer).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub involves: Vec<Subject>,
    /// The conversation session it came from, recorded on the episodes it writes so
    /// the session can be forgotten
    /// ([`Client::purge_session`](super::Client::purge_session)).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub session_id: Option<String>,
    /// Extra extraction instructions for what it writes (the seeds'
    /// `customInstructions`; no NUL); through a Lens, in place of the Lens's own.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub custom_instructions: Option<String>,
}

impl MemoryAdd {
    /// A direct write to the operator's `personal` graph, described as `manual`.
    pub fn new(operator: impl Into<OperatorId>, content: Content) -> MemoryAdd {
        MemoryAdd {
            operator_id: operator.into(),
            content,
            source_description: DEFAULT_MEMORY_ADD_DESCRIPTION.to_string(),
            route: Route::default(),
            subject: None,
            involves: Vec::new(),
            session_id: None,
            custom_instructions: None,
        }
    }

    /// The conversation session it came from.
    pub fn session(mut self, session_id: impl Into<String>) -> Self {
        self.session_id = Some(session_id.into());
        self
    }

    /// Extracts what it writes with these extra instructions.
    pub fn custom_instructions(mut self, instructions: impl Into<String>) -> Self {
        self.custom_instructions = Some(instructions.into());
        self
    }

    /// Who asks (required when the client has an authorizer).
    pub fn subject(mut self, subject: Subject) -> Self {
        self.subject = Some(subject);
        self
    }

    /// The people and agents it concerns.
    pub fn involves(mut self, subjects: impl IntoIterator<Item = Subject>) -> Self {
        self.involves.extend(subjects);
        self
    }

    /// Sets the source description.
    pub fn source_description(mut self, description: impl Into<String>) -> Self {
        self.source_description = description.into();
        self
    }

    /// Writes directly to `destination`.
    pub fn to_destination(mut self, destination: impl Into<String>) -> Self {
        self.route = Route::Direct(destination.into());
        self
    }

    /// Writes through `lens`.
    pub fn through_lens(mut self, lens: impl Into<String>) -> Self {
        self.route = Route::Lens(lens.into());
        self
    }
}

/// One episode, addressed by operator, Destination and uuid.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[non_exhaustive]
pub struct EpisodeRef {
    /// The operator.
    pub operator_id: OperatorId,
    /// The registered Destination holding it.
    pub destination: String,
    /// The episode's uuid.
    pub uuid: Uuid,
    /// Who asks (required when the client has an authorizer; see
    /// [`MemoryClient::with_authorizer`](super::MemoryClient::with_authorizer)).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub subject: Option<Subject>,
}

impl EpisodeRef {
    /// An episode reference.
    pub fn new(
        operator: impl Into<OperatorId>,
        destination: impl Into<String>,
        uuid: Uuid,
    ) -> Self {
        EpisodeRef {
            operator_id: operator.into(),
            destination: destination.into(),
            uuid,
            subject: None,
        }
    }

    /// Who asks (required when the client has an authorizer).
    pub fn subject(mut self, subject: Subject) -> Self {
        self.subject = Some(subject);
        self
    }
}

/// Community detection on one Destination's graph.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[non_exhaustive]
pub struct BuildCommunities {
    /// The operator.
    pub operator_id: OperatorId,
    /// The registered Destination (default `personal`).
    pub destination: String,
    /// Who asks (required when the client has an authorizer, who then needs
    /// `contribute` on the Destination's graph).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub subject: Option<Subject>,
}

impl BuildCommunities {
    /// Community detection on the operator's `personal` graph.
    pub fn new(operator: impl Into<OperatorId>) -> Self {
        BuildCommunities {
            operator_id: operator.into(),
            destination: PERSONAL.to_string(),
            subject: None,
        }
    }

    /// On `global` instead.
    pub fn global(operator: impl Into<OperatorId>) -> Self {
        BuildCommunities {
            operator_id: operator.into(),
            destination: GLOBAL.to_string(),
            subject: None,
        }
    }

    /// On another Destination.
    pub fn destination(mut self, destination: impl Into<String>) -> Self {
        self.destination = destination.into();
        self
    }

    /// Who asks (required when the client has an authorizer).
    pub fn subject(mut self, subject: Subject) -> Self {
        self.subject = Some(subject);
        self
    }
}

/// Extract the episodes stored but not yet extracted (written while no language model
/// was configured, or whose extraction failed) in some Destinations, each with the
/// ontology of the Lens that wrote it.
///
/// ```
/// use gralkor::client::{ExtractPending, OperatorId};
///
/// let all = ExtractPending::new(OperatorId::new("op")?);
/// assert!(all.destinations.is_empty()); // every Destination the operator can read
/// let some = ExtractPending::new(OperatorId::new("op")?).destinations(["personal"]);
/// assert_eq!(some.destinations, ["personal"]);
/// # Ok::<(), gralkor::Error>(())
/// ```
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[non_exhaustive]
pub struct ExtractPending {
    /// The operator.
    pub operator_id: OperatorId,
    /// The Destinations (empty: every accessible one, as a selector-free search; with
    /// an authorizer, every one the subject may `contribute` to).
    #[serde(default)]
    pub destinations: Vec<String>,
    /// Who asks (required when the client has an authorizer, who then needs
    /// `contribute` on each Destination named).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub subject: Option<Subject>,
}

impl ExtractPending {
    /// Every Destination the operator can read.
    pub fn new(operator: impl Into<OperatorId>) -> ExtractPending {
        ExtractPending {
            operator_id: operator.into(),
            destinations: Vec::new(),
            subject: None,
        }
    }

    /// Only these Destinations.
    pub fn destinations<S: Into<String>>(mut self, names: impl IntoIterator<Item = S>) -> Self {
        self.destinations = names.into_iter().map(Into::into).collect();
        self
    }

    /// Who asks (required when the client has an authorizer).
    pub fn subject(mut self, subject: Subject) -> Self {
        self.subject = Some(subject);
        self
    }
}

/// One Destination's extraction report.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[non_exhaustive]
pub struct DestinationExtraction {
    /// The Destination's name.
    pub destination: String,
    /// What happened to its pending episodes.
    pub report: crate::storage::ExtractionReport,
}

impl DestinationExtraction {
    /// A Destination's report.
    pub fn new(
        destination: impl Into<String>,
        report: crate::storage::ExtractionReport,
    ) -> DestinationExtraction {
        DestinationExtraction {
            destination: destination.into(),
            report,
        }
    }
}
