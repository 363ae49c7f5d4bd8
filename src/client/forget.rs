//! Forgetting that leaves nothing behind ([`PurgeOperator`]) and the health report
//! ([`Status`]).

use serde::{Deserialize, Serialize};
use tracing::Instrument;

use super::memory::MemoryClient;
use crate::access::{ObjectRef, ObjectType, Relation, RelationshipFilter, Subject};
use crate::destination::PERSONAL;
use crate::storage::{OperatorId, Storage};
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

/// A health report: cheap enough to poll.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[non_exhaustive]
pub struct Status {
    /// Whether the client was shut down.
    pub closed: bool,
    /// The storage's backend after a round trip, or why it did not answer.
    pub storage: std::result::Result<String, String>,
    /// The authorizer's name, if one is configured.
    pub authorizer: Option<String>,
    /// Whether the authorizer answered (`None` without one), or why not.
    pub authorizer_health: Option<std::result::Result<(), String>>,
    /// The Destinations configured.
    pub destinations: Vec<String>,
    /// The Lenses configured.
    pub lenses: Vec<String>,
}

impl Status {
    /// Whether everything configured answered.
    pub fn healthy(&self) -> bool {
        !self.closed
            && self.storage.is_ok()
            && self.authorizer_health.as_ref().is_none_or(|h| h.is_ok())
    }
}

impl<S: Storage> MemoryClient<S> {
    /// Forgets one operator entirely (see [`PurgeOperator`]).
    ///
    /// ```
    /// # #[tokio::main(flavor = "current_thread")] async fn main() -> gralkor::Result<()> {
    /// use gralkor::client::{Client, Content, InMemoryClient, MemoryAdd, OperatorId, PurgeOperator, Search};
    ///
    /// let client = InMemoryClient::new();
    /// let ada = OperatorId::new("ada")?;
    /// client.memory_add(&MemoryAdd::new(&ada, Content::document("Ada likes tea."))).await?;
    /// client.await_background_writes().await;
    /// let report = client.purge_operator(&PurgeOperator::new(&ada)).await?;
    /// assert!(report.graph_removed);
    /// assert!(client.search(&Search::new(&ada, "tea")).await?.is_empty());
    /// # Ok(()) }
    /// ```
    pub async fn purge_operator(&self, request: &PurgeOperator) -> Result<PurgeReport> {
        if self.is_closed() {
            return Err(Error::Closed {
                what: "this memory client".into(),
            });
        }
        let snapshot = crate::client::Client::runtime(self).snapshot();
        let graph = snapshot
            .destination("destination", PERSONAL)?
            .graph_id(&request.operator_id)?;
        let span = tracing::info_span!("gralkor.purge_operator");
        async {
            // Background writes accepted before the purge land first, so none
            // re-creates what the purge removes.
            crate::client::Client::await_background_writes(self).await;
            let mut relationships_removed = 0;
            if let Some((access, subject)) = self.guard(request.subject.as_ref())? {
                let own = subject.kind() == ObjectType::Person
                    && subject.id() == request.operator_id.as_str();
                if !own {
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

    /// The health report (see [`Status`]): one storage round trip and one authorizer
    /// round trip.
    ///
    /// ```
    /// # #[tokio::main(flavor = "current_thread")] async fn main() -> gralkor::Result<()> {
    /// use gralkor::client::InMemoryClient;
    ///
    /// let status = InMemoryClient::new().status().await;
    /// assert!(status.healthy());
    /// assert!(status.storage.unwrap().starts_with("in-memory"));
    /// assert_eq!(status.authorizer, None);
    /// # Ok(()) }
    /// ```
    pub async fn status(&self) -> Status {
        let snapshot = crate::client::Client::runtime(self).snapshot();
        let closed = self.is_closed();
        let storage = if closed {
            Err("the client was shut down".to_string())
        } else {
            self.storage().health().await.map_err(|e| e.to_string())
        };
        let authorizer = self.authorizer();
        let authorizer_health = match authorizer {
            Some(a) => Some(a.health().await.map_err(|e| e.to_string())),
            None => None,
        };
        Status {
            closed,
            storage,
            authorizer: authorizer.map(|a| a.name().to_string()),
            authorizer_health,
            destinations: snapshot
                .destinations()
                .iter()
                .map(|d| d.name().to_string())
                .collect(),
            lenses: snapshot
                .lenses()
                .iter()
                .map(|l| l.name().to_string())
                .collect(),
        }
    }
}
