//! The health report ([`Status`]): the storage, the authorizer, each Destination's
//! graph and what the registered drains hold, cheap enough to poll.

use serde::Serialize;
use tracing::Instrument;

use super::drain::Held;
use super::memory::BackgroundFailures;
use super::memory::MemoryClient;
use crate::access::Subject;
use crate::graph::GraphStatus;
use crate::storage::{OperatorId, Storage, StorageStatus};

/// What [`Client::status_of`](super::Client::status_of) asks about: whose `personal` Destination, and
/// who asks (with an authorizer, a Destination's graph is reported only to a subject
/// who may `access` it).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct StatusRequest {
    /// The operator whose `personal` graph is reported; without one, `personal` is
    /// listed without a graph.
    pub operator: Option<OperatorId>,
    /// Who asks.
    pub subject: Option<Subject>,
}

impl StatusRequest {
    /// A request about the shared Destinations only.
    pub fn new() -> StatusRequest {
        StatusRequest::default()
    }

    /// Reports `operator`'s `personal` graph too.
    pub fn operator(mut self, operator: &OperatorId) -> Self {
        self.operator = Some(operator.clone());
        self
    }

    /// Who asks.
    pub fn subject(mut self, subject: Subject) -> Self {
        self.subject = Some(subject);
        self
    }
}

/// One Destination in a [`Status`].
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[non_exhaustive]
pub struct DestinationStatus {
    /// The Destination's name.
    pub name: String,
    /// Its graph's logical id, when known (`personal` needs the request's operator).
    pub graph: Option<String>,
    /// What the graph holds — episodes, those pending extraction — and whether its
    /// indices serve; or why it is not reported (no operator for `personal`, a
    /// subject who may not access it, a storage that did not answer).
    pub status: std::result::Result<GraphStatus, String>,
}

/// A health report ([`Client::status_of`](super::Client::status_of)): cheap enough to poll.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[non_exhaustive]
pub struct Status {
    /// Whether the client was shut down.
    pub closed: bool,
    /// The storage's backend — FalkorDB's versions and memory, the graphs stored,
    /// the models and how they were chosen — after a round trip, or why it did not
    /// answer.
    pub storage: std::result::Result<StorageStatus, String>,
    /// The authorizer's name, if one is configured.
    pub authorizer: Option<String>,
    /// Whether the authorizer answered (`None` without one), or why not.
    pub authorizer_health: Option<std::result::Result<(), String>>,
    /// The Destinations configured, each with its graph's status.
    pub destinations: Vec<DestinationStatus>,
    /// The Lenses configured.
    pub lenses: Vec<String>,
    /// What the work registered with
    /// [`drain_on_shutdown`](MemoryClient::drain_on_shutdown) holds unwritten — the
    /// capture buffer's sessions, turns and flushes in flight — summed; `None` when
    /// nothing registered says.
    pub held: Option<Held>,
    /// `memory_add` writes that failed in the background after their retries (the
    /// call had returned `Ok`), since the client was built, with the last error.
    pub background_failures: BackgroundFailures,
}

impl Status {
    /// The report of a client that does not implement one: nothing answered.
    pub(crate) fn unreported(runtime: &crate::runtime::Runtime) -> Status {
        let snapshot = runtime.snapshot();
        let why = || "not reported: this client does not implement `status_of`".to_string();
        Status {
            closed: false,
            storage: Err(why()),
            authorizer: None,
            authorizer_health: None,
            destinations: snapshot
                .destinations()
                .iter()
                .map(|d| DestinationStatus {
                    name: d.name().to_string(),
                    graph: None,
                    status: Err(why()),
                })
                .collect(),
            lenses: snapshot
                .lenses()
                .iter()
                .map(|l| l.name().to_string())
                .collect(),
            held: None,
            background_failures: BackgroundFailures::default(),
        }
    }

    /// Whether everything configured answered: the client is open, the storage and
    /// the authorizer answered, and every graph reported has its indices serving.
    pub fn healthy(&self) -> bool {
        !self.closed
            && self.storage.is_ok()
            && self.authorizer_health.as_ref().is_none_or(|h| h.is_ok())
            && self.destinations.iter().all(|d| {
                d.status
                    .as_ref()
                    .ok()
                    .is_none_or(GraphStatus::indices_operational)
            })
    }

    /// The status of the Destination `name`, if it is configured.
    pub fn destination(&self, name: &str) -> Option<&DestinationStatus> {
        self.destinations.iter().find(|d| d.name == name)
    }
}

impl<S: Storage> MemoryClient<S> {
    /// [`Client::status`](super::Client::status).
    pub(crate) async fn status(&self) -> Status {
        self.status_of(&StatusRequest::new()).await
    }

    /// [`Client::status_of`](super::Client::status_of) (see [`Status`]).
    pub(crate) async fn status_of(&self, request: &StatusRequest) -> Status {
        let span = tracing::info_span!("gralkor.status");
        async {
            let snapshot = crate::client::Client::runtime(self).snapshot();
            let closed = self.is_closed();
            let authorizer = self.authorizer();
            let storage = async {
                if closed {
                    Err("the client was shut down".to_string())
                } else {
                    self.storage().status().await.map_err(|e| e.to_string())
                }
            };
            let authorizer_health = async {
                match authorizer {
                    Some(a) => Some(a.health().await.map_err(|e| e.to_string())),
                    None => None,
                }
            };
            let destinations = self.destination_statuses(&snapshot, request, closed);
            let held = self.held();
            let (storage, authorizer_health, destinations, held) =
                tokio::join!(storage, authorizer_health, destinations, held);
            Status {
                closed,
                storage,
                authorizer: authorizer.map(|a| a.name().to_string()),
                authorizer_health,
                destinations,
                lenses: snapshot
                    .lenses()
                    .iter()
                    .map(|l| l.name().to_string())
                    .collect(),
                held,
                background_failures: self.background_failures(),
            }
        }
        .instrument(span)
        .await
    }

    /// Each Destination's graph status, as far as the request and the subject allow.
    async fn destination_statuses(
        &self,
        snapshot: &crate::runtime::Snapshot,
        request: &StatusRequest,
        closed: bool,
    ) -> Vec<DestinationStatus> {
        let mut out = Vec::new();
        let mut graphs = Vec::new();
        // Only `personal` depends on the operator: without one, any id names the
        // shared graphs (and the authorizer is asked about those only).
        let operator = request
            .operator
            .clone()
            .unwrap_or_else(|| OperatorId::new("status").expect("a valid operator id"));
        for d in snapshot.destinations() {
            let graph = match (&request.operator, d.is_personal()) {
                (_, false) | (Some(_), true) => d.graph_id(&operator).ok(),
                (None, true) => None,
            };
            let status = match &graph {
                None => Err("not reported: the request names no operator".to_string()),
                Some(_) if closed => Err("the client was shut down".to_string()),
                Some(_) => Ok(GraphStatus::default()),
            };
            if let (Some(g), Ok(_)) = (&graph, &status) {
                graphs.push((out.len(), g.clone()));
            }
            out.push(DestinationStatus {
                name: d.name().to_string(),
                graph: graph.map(|g| g.as_str().to_string()),
                status,
            });
        }
        // With an authorizer, only the graphs the subject may access.
        if let Some(access) = self.access() {
            let readable = match &request.subject {
                None => Err(
                    "not reported: this client has an authorizer and the request \
                                  names no subject"
                        .to_string(),
                ),
                Some(subject) => {
                    let ids: Vec<_> = graphs.iter().map(|(_, g)| g.clone()).collect();
                    access
                        .readable(subject, &operator, &ids)
                        .await
                        .map_err(|e| e.to_string())
                }
            };
            graphs.retain(|(i, g)| {
                let verdict = match &readable {
                    Ok(set) if set.contains(g.as_str()) => return true,
                    Ok(_) => "not reported: the subject may not access it".to_string(),
                    Err(e) => e.clone(),
                };
                out[*i].status = Err(verdict);
                false
            });
        }
        let mut set = tokio::task::JoinSet::new();
        for (i, g) in graphs {
            let storage = self.dyn_storage();
            set.spawn(async move { (i, storage.graph_status(&g).await) });
        }
        while let Some(done) = set.join_next().await {
            match done {
                Ok((i, status)) => out[i].status = status.map_err(|e| e.to_string()),
                Err(e) => tracing::warn!(error = %e, "a graph status task failed"),
            }
        }
        out
    }

    /// What the registered drains hold, summed; `None` when none says.
    async fn held(&self) -> Option<Held> {
        let drains = self.live_drains();
        let mut total: Option<Held> = None;
        for d in drains {
            if let Some(h) = d.held().await {
                total = Some(total.unwrap_or_default() + h);
            }
        }
        total
    }
}
