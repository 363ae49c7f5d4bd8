//! Forgetting that leaves nothing behind — an operator ([`PurgeOperator`]), a
//! conversation session ([`PurgeSession`]), a Destination's graph
//! ([`ClearDestination`]). The health report is in `status.rs`.
//!
//! Every purge is idempotent (an interrupted one is finished by calling it again),
//! checks its permissions before it removes anything, and ends by making the deletion
//! durable: the native storage on an embedded server rewrites the AOF from the data
//! set, so the deleted content is not left in the append-only log (the rewrite's RDB
//! preamble is the new base; an `.rdb` snapshot taken before the purge is not
//! touched — gralkor's embedded server does not write one).

use serde::{Deserialize, Serialize};
use tracing::Instrument;

use uuid::Uuid;

use super::memory::MemoryClient;
use crate::access::{ObjectRef, ObjectType, Permission, Relation, RelationshipFilter, Subject};
use crate::destination::PERSONAL;
use crate::runtime::Snapshot;
use crate::storage::{GraphId, OperatorId, Storage};
use crate::{Error, Result};

/// Purge everything of one operator: their `personal` graph (episodes, facts,
/// entities, vectors, Reflection artefacts written there) and, with an authorizer,
/// every relationship naming them or their personal graph, so no search, get or fact
/// source anywhere returns anything of theirs. On the embedded server the AOF is
/// rewritten afterwards, so the deleted content does not stay in the log files.
///
/// With an authorizer the subject must be the person whose id is the operator id.
/// Every step is idempotent: an interrupted purge is finished by calling it again.
///
/// ```
/// use gralkor::access::Subject;
/// use gralkor::client::{OperatorId, PurgeOperator};
///
/// let p = PurgeOperator::new(OperatorId::new("ada")?).subject(Subject::person("ada")?);
/// assert_eq!(p.operator_id.as_str(), "ada");
/// # Ok::<(), gralkor::Error>(())
/// ```
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[non_exhaustive]
pub struct PurgeOperator {
    /// The operator to forget.
    pub operator_id: OperatorId,
    /// Who asks (required when the client has an authorizer).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub subject: Option<Subject>,
}

impl PurgeOperator {
    /// Purge `operator`.
    pub fn new(operator: impl Into<OperatorId>) -> PurgeOperator {
        PurgeOperator {
            operator_id: operator.into(),
            subject: None,
        }
    }

    /// Who asks.
    pub fn subject(mut self, subject: Subject) -> Self {
        self.subject = Some(subject);
        self
    }
}

/// What a purge removed.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[non_exhaustive]
pub struct PurgeReport {
    /// Whether the personal graph existed (and is now gone).
    pub graph_removed: bool,
    /// Relationships removed from the authorizer (0 without one).
    pub relationships_removed: u64,
}

/// Forget one conversation session of one operator: every episode recorded with the
/// session's id (captured turns, and `memory_add`/`ingest` requests that named it) in
/// every Destination graph of the operator, with the facts only those episodes
/// supported, the entities nothing else mentions, their vectors and their
/// authorization relationships. Turns still buffered for the session are the capture
/// buffer's: [`CaptureBuffer::purge_session`](crate::agent::capture::CaptureBuffer::purge_session)
/// drops them and then calls this.
///
/// With an authorizer the subject needs `delete` on each episode (only its writer has
/// it), except in their own `personal` graph (the person whose id is the operator
/// id), where everything is theirs to forget. One refusal refuses the whole purge,
/// before anything is removed.
///
/// ```
/// use gralkor::client::{OperatorId, PurgeSession};
///
/// let p = PurgeSession::new(OperatorId::new("ada")?, "telegram-42");
/// assert_eq!(p.session_id, "telegram-42");
/// # Ok::<(), gralkor::Error>(())
/// ```
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[non_exhaustive]
pub struct PurgeSession {
    /// The operator whose graphs hold the session.
    pub operator_id: OperatorId,
    /// The harness's session id.
    pub session_id: String,
    /// Who asks (required when the client has an authorizer).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub subject: Option<Subject>,
}

impl PurgeSession {
    /// Purge session `session_id` of `operator`.
    pub fn new(operator: impl Into<OperatorId>, session_id: impl Into<String>) -> PurgeSession {
        PurgeSession {
            operator_id: operator.into(),
            session_id: session_id.into(),
            subject: None,
        }
    }

    /// Who asks.
    pub fn subject(mut self, subject: Subject) -> Self {
        self.subject = Some(subject);
        self
    }
}

/// What a session purge removed.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
#[non_exhaustive]
pub struct SessionPurgeReport {
    /// The episodes removed, with the logical graph each was in.
    pub episodes: Vec<(String, Uuid)>,
    /// Buffered turns dropped before they were written (the capture buffer's purge;
    /// 0 from the client's).
    pub buffered_turns_dropped: usize,
}

/// Clear one Destination's graph for one operator: every episode, fact, entity,
/// community, vector and Reflection artefact in it, and the authorization
/// relationships of its fragments (the group's memberships stay: the Destination
/// still exists, empty).
///
/// With an authorizer: the operator's own `personal` graph may be cleared by the
/// person whose id is the operator id; any other graph only by a member (`contribute`)
/// who may `delete` every fragment recorded in it (wrote all of it) — clearing what
/// others wrote needs their own `delete`. A refusal removes nothing.
///
/// ```
/// use gralkor::client::{ClearDestination, OperatorId};
///
/// let c = ClearDestination::new(OperatorId::new("ada")?, "personal");
/// assert_eq!(c.destination, "personal");
/// # Ok::<(), gralkor::Error>(())
/// ```
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[non_exhaustive]
pub struct ClearDestination {
    /// The operator its graph is resolved for.
    pub operator_id: OperatorId,
    /// The Destination's name.
    pub destination: String,
    /// Who asks (required when the client has an authorizer).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub subject: Option<Subject>,
}

impl ClearDestination {
    /// Clear `destination` as resolved for `operator`.
    pub fn new(operator: impl Into<OperatorId>, destination: impl Into<String>) -> Self {
        ClearDestination {
            operator_id: operator.into(),
            destination: destination.into(),
            subject: None,
        }
    }

    /// Who asks.
    pub fn subject(mut self, subject: Subject) -> Self {
        self.subject = Some(subject);
        self
    }
}

impl PurgeOperator {
    /// The operator's `personal` graph: what the purge deletes.
    pub(super) fn graph(&self, snapshot: &Snapshot) -> Result<GraphId> {
        snapshot
            .destination("destination", PERSONAL)?
            .graph_id(&self.operator_id)
    }
}

impl PurgeSession {
    /// Checks the session id; every distinct graph the operator's Destinations
    /// resolve to (where the session's episodes may be).
    pub(super) fn graphs(&self, snapshot: &Snapshot) -> Result<Vec<GraphId>> {
        crate::storage::check_session_id("session_id", &self.session_id)?;
        let mut graphs: Vec<GraphId> = Vec::new();
        for d in snapshot.destinations() {
            let g = d.graph_id(&self.operator_id)?;
            if !graphs.contains(&g) {
                graphs.push(g);
            }
        }
        Ok(graphs)
    }
}

impl ClearDestination {
    /// The Destination's graph for the operator: what is cleared.
    pub(super) fn graph(&self, snapshot: &Snapshot) -> Result<GraphId> {
        snapshot
            .destination("destination", &self.destination)?
            .graph_id(&self.operator_id)
    }
}

impl<S: Storage> MemoryClient<S> {
    /// [`Client::purge_operator`](super::Client::purge_operator) (see [`PurgeOperator`]).
    pub(crate) async fn purge_operator(&self, request: &PurgeOperator) -> Result<PurgeReport> {
        self.open_for_purge()?;
        let snapshot = crate::client::Client::runtime(self).snapshot();
        let graph = request.graph(&snapshot)?;
        let span = tracing::info_span!("gralkor.purge_operator");
        async {
            // Background writes accepted before the purge land first, so none
            // re-creates what the purge removes.
            crate::client::Client::await_background_writes(self).await;
            let mut relationships_removed = 0;
            if let Some((access, subject)) = self.guard(request.subject.as_ref())? {
                if !owns_personal(subject, &request.operator_id, &graph) {
                    return Err(Error::PermissionDenied {
                        subject: subject.to_string(),
                        permission: "purge".into(),
                        resource: format!("group:{}", graph.as_str()),
                    });
                }
                let authz = access.authorizer();
                let group = ObjectRef::group(graph.as_str())?;
                // The fragments of the personal graph, whoever wrote them.
                let fragments = authz
                    .read_relationships(
                        &RelationshipFilter::of_type(ObjectType::MemoryFragment)
                            .relation(Relation::SourceGroup)
                            .subject(group.clone()),
                    )
                    .await?;
                for f in fragments {
                    relationships_removed += authz
                        .delete_relationships(&RelationshipFilter::resource(f.resource))
                        .await?;
                }
                relationships_removed += authz
                    .delete_relationships(&RelationshipFilter::resource(group))
                    .await?;
                // Every relationship naming the person: memberships, what they shared
                // or were involved in elsewhere, the agents they own.
                for kind in [
                    ObjectType::Group,
                    ObjectType::MemoryFragment,
                    ObjectType::Agent,
                ] {
                    relationships_removed += authz
                        .delete_relationships(
                            &RelationshipFilter::of_type(kind).subject(subject.object().clone()),
                        )
                        .await?;
                }
                access.forget_ensured();
            }
            // Last, so the AOF rewrite also covers the relationships just removed.
            let graph_removed = self.storage().purge_graph(&graph).await?;
            Ok(PurgeReport {
                graph_removed,
                relationships_removed,
            })
        }
        .instrument(span)
        .await
    }

    /// [`Client::purge_session`](super::Client::purge_session) (see [`PurgeSession`]).
    pub(crate) async fn purge_session(&self, request: &PurgeSession) -> Result<SessionPurgeReport> {
        self.open_for_purge()?;
        let snapshot = crate::client::Client::runtime(self).snapshot();
        let graphs = request.graphs(&snapshot)?;
        let span = tracing::info_span!("gralkor.purge_session", session = %request.session_id);
        async {
            crate::client::Client::await_background_writes(self).await;
            let mut found: Vec<(crate::storage::GraphId, Uuid)> = Vec::new();
            for g in &graphs {
                for u in self
                    .storage()
                    .session_episodes(g, &request.session_id)
                    .await?
                {
                    found.push((g.clone(), u));
                }
            }
            let access = self.guard(request.subject.as_ref())?;
            if let Some((access, subject)) = &access {
                let foreign: Vec<&(crate::storage::GraphId, Uuid)> = found
                    .iter()
                    .filter(|(g, _)| !owns_personal(subject, &request.operator_id, g))
                    .collect();
                let objects: Vec<ObjectRef> = foreign
                    .iter()
                    .map(|(_, u)| ObjectRef::fragment(*u))
                    .collect();
                let answers = access
                    .authorizer()
                    .check_many(subject, Permission::Delete, &objects)
                    .await?;
                if let Some(((_, u), _)) = foreign.iter().zip(&answers).find(|(_, ok)| !**ok) {
                    return Err(Error::PermissionDenied {
                        subject: subject.to_string(),
                        permission: Permission::Delete.as_str().into(),
                        resource: ObjectRef::fragment(*u).to_string(),
                    });
                }
            }
            let mut report = SessionPurgeReport::default();
            for (g, u) in found {
                self.storage().remove_episode(&g, u).await?;
                if let Some((access, _)) = &access {
                    access.forget_fragment(u).await?;
                }
                report.episodes.push((g.as_str().to_string(), u));
            }
            if !report.episodes.is_empty() {
                self.storage().rewrite_log().await?;
            }
            Ok(report)
        }
        .instrument(span)
        .await
    }

    /// [`Client::clear_destination`](super::Client::clear_destination) (see
    /// [`ClearDestination`]).
    pub(crate) async fn clear_destination(
        &self,
        request: &ClearDestination,
    ) -> Result<PurgeReport> {
        self.open_for_purge()?;
        let snapshot = crate::client::Client::runtime(self).snapshot();
        let graph = request.graph(&snapshot)?;
        let span = tracing::info_span!("gralkor.clear_destination", graph = graph.as_str());
        async {
            crate::client::Client::await_background_writes(self).await;
            let mut relationships_removed = 0;
            if let Some((access, subject)) = self.guard(request.subject.as_ref())? {
                let authz = access.authorizer();
                let group = ObjectRef::group(graph.as_str())?;
                let fragments = authz
                    .read_relationships(
                        &RelationshipFilter::of_type(ObjectType::MemoryFragment)
                            .relation(Relation::SourceGroup)
                            .subject(group.clone()),
                    )
                    .await?;
                if !owns_personal(subject, &request.operator_id, &graph) {
                    let member = authz.check(subject, Permission::Contribute, &group).await?;
                    let objects: Vec<ObjectRef> =
                        fragments.iter().map(|f| f.resource.clone()).collect();
                    let answers = authz
                        .check_many(subject, Permission::Delete, &objects)
                        .await?;
                    let others = answers.iter().filter(|ok| !**ok).count();
                    if !member || others > 0 {
                        return Err(Error::PermissionDenied {
                            subject: subject.to_string(),
                            permission: if member {
                                format!("delete ({others} fragments written by others)")
                            } else {
                                Permission::Contribute.as_str().into()
                            },
                            resource: group.to_string(),
                        });
                    }
                }
                for f in fragments {
                    relationships_removed += authz
                        .delete_relationships(&RelationshipFilter::resource(f.resource))
                        .await?;
                }
            }
            // Last, so the AOF rewrite also covers the relationships just removed.
            let graph_removed = self.storage().purge_graph(&graph).await?;
            Ok(PurgeReport {
                graph_removed,
                relationships_removed,
            })
        }
        .instrument(span)
        .await
    }

    fn open_for_purge(&self) -> Result<()> {
        if self.is_closed() {
            return Err(Error::Closed {
                what: "this memory client".into(),
            });
        }
        Ok(())
    }
}

/// Whether `graph` is the `personal` graph of `operator` and the subject is the person
/// whose id is the operator id: then everything in it is theirs to forget.
fn owns_personal(
    subject: &Subject,
    operator: &OperatorId,
    graph: &crate::storage::GraphId,
) -> bool {
    subject.kind() == ObjectType::Person
        && subject.id() == operator.as_str()
        && graph.as_str() == format!("{PERSONAL}/{}", operator.as_str())
}
