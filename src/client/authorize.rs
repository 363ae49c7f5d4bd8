//! Enforcement of an [`Authorizer`] in the client logic, once for every client.
//!
//! * Every guarded request must name a [`Subject`] when the client has an
//!   authorizer; without one the subject is ignored and nothing is checked (today's
//!   behaviour).
//! * Writes (ingest, memory_add, replace) need `contribute` on the Destination's group
//!   (its logical graph id) before anything is stored; each stored episode then gets
//!   its fragment relationships (`source_group`, `shared_by` = the subject,
//!   `involves`).
//! * Searches look up the groups the subject may `access` once (LookupResources as a
//!   pre-filter): hits from those graphs are visible as they are. In any other graph
//!   the subject may `view` exactly the fragments whose `involves` or `shared_by`
//!   names it (the schema has no subject sets there): when such a graph is searched,
//!   one relationship read lists them, and the graph is searched restricted to those
//!   episodes ([`GraphQuery::episodes`]: an episode must be one of them, a fact must
//!   come from one and lists only those sources), inside the storage's search and
//!   before the limit — never a check per hit. Nodes and artefacts of such a graph
//!   are never shown. Each search is planned from the subject's previous lookup (a
//!   graph found unreadable then is not searched as it is, and its read runs with the
//!   lookup); the fresh lookup always decides, so the plan only saves work.
//! * `get_episode` answers `None` for an episode the subject may not view;
//!   `remove_episode` needs `delete` (only the writer has it) and removes the
//!   fragment's relationships too.
//! * The operator's own `personal` graph belongs to the person whose id is the
//!   operator id: the client writes that membership itself the first time it is used.
//! * A session group (`session-<id>`) belongs to whoever writes to it first: a write
//!   to a session group without members makes the writer its member (OpenClaw's "the
//!   agent that creates a session gets exclusive membership"), through
//!   [`Authorizer::claim_group`]: one conditional write, so of two first writers at
//!   the same instant exactly one becomes the member; once it has members, everyone
//!   else needs `contribute` like anywhere else.
//!
//! Consistency: a fragment's relationships are written right after its episode. Until
//! they exist the episode is visible only to members of its group (who may see it
//! anyway): never to anyone else.

use std::collections::{BTreeSet, HashMap, HashSet};
use std::sync::{Arc, Mutex};

use uuid::Uuid;

use crate::access::{
    Authorizer, Fragment, ObjectRef, ObjectType, Permission, Relation, Relationship,
    RelationshipFilter, Subject,
};
use crate::storage::{GraphId, GraphQuery, OperatorId, ResultType, ScoredHit, Storage};
use crate::{Error, Result};

/// The authorizer of a client and the personal memberships it has written already.
pub(super) struct Access {
    authorizer: Arc<dyn Authorizer>,
    ensured: Mutex<HashSet<String>>,
    /// Per subject, the groups its last lookup found readable: a plan for the next
    /// search (which graphs to search as they are, which only through the subject's
    /// fragments), never an answer — every search looks up again and corrects a
    /// plan the lookup contradicts.
    last_readable: Mutex<HashMap<String, BTreeSet<String>>>,
}

/// Subjects whose last lookup [`Access`] keeps as a plan; beyond, it starts over.
const PLANS_KEPT: usize = 4096;

impl std::fmt::Debug for Access {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Access")
            .field("authorizer", &self.authorizer.name())
            .finish_non_exhaustive()
    }
}

fn denied(subject: &Subject, permission: Permission, resource: &ObjectRef) -> Error {
    Error::PermissionDenied {
        subject: subject.to_string(),
        permission: permission.as_str().to_string(),
        resource: resource.to_string(),
    }
}

/// The search of the graphs at positions `at` of `graphs` (none searched without a
/// query or positions), one answer per graph.
async fn search_at<S: Storage>(
    storage: &S,
    graphs: &[GraphId],
    at: &[usize],
    query: Option<&GraphQuery>,
) -> Result<Vec<Vec<ScoredHit>>> {
    let Some(query) = query.filter(|_| !at.is_empty()) else {
        return Ok(Vec::new());
    };
    let g: Vec<GraphId> = at.iter().map(|i| graphs[*i].clone()).collect();
    let hits = storage.search(&g, query).await?;
    if hits.len() != g.len() {
        return Err(Error::Protocol(format!(
            "the storage answered {} graphs for a search of {}",
            hits.len(),
            g.len()
        )));
    }
    Ok(hits)
}

/// The subject a guarded request must carry when the client has an authorizer.
pub(super) fn require(subject: Option<&Subject>) -> Result<&Subject> {
    subject.ok_or_else(|| {
        Error::invalid(
            "subject",
            "is required: this client has an authorizer (set it with `.subject(…)`)",
        )
    })
}

fn group(graph: &GraphId) -> Result<ObjectRef> {
    ObjectRef::group(graph.as_str())
}

impl Access {
    pub(super) fn new(authorizer: Arc<dyn Authorizer>) -> Access {
        Access {
            authorizer,
            ensured: Mutex::new(HashSet::new()),
            last_readable: Mutex::new(HashMap::new()),
        }
    }

    pub(super) fn authorizer(&self) -> &Arc<dyn Authorizer> {
        &self.authorizer
    }

    /// Forgets the memberships written so far (after a purge removed them).
    pub(super) fn forget_ensured(&self) {
        self.ensured
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .clear();
    }

    /// Writes `group:personal/<op>#member@person:<op>` once, when the subject is the
    /// person the operator id names and `graph` is their personal graph.
    async fn ensure_personal(
        &self,
        subject: &Subject,
        operator: &OperatorId,
        graph: &GraphId,
    ) -> Result<()> {
        let own = subject.kind() == crate::access::ObjectType::Person
            && subject.id() == operator.as_str()
            && graph.as_str() == format!("personal/{}", operator.as_str());
        if !own {
            return Ok(());
        }
        let key = graph.as_str().to_string();
        if self
            .ensured
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .contains(&key)
        {
            return Ok(());
        }
        self.authorizer
            .write_relationships(&[Relationship::member(key.clone(), subject)?])
            .await?;
        self.ensured
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .insert(key);
        Ok(())
    }

    /// Makes `subject` the member of the session group `graph` when it has no
    /// members yet (its first writer claims it, in one conditional write: of two
    /// first writers at the same instant exactly one becomes its member); any other
    /// graph is left alone.
    async fn claim_session_group(&self, subject: &Subject, graph: &GraphId) -> Result<()> {
        if !graph
            .as_str()
            .starts_with(crate::destination::SESSION_GROUP_PREFIX)
        {
            return Ok(());
        }
        if self.authorizer.claim_group(graph.as_str(), subject).await? {
            tracing::info!(group = graph.as_str(), subject = %subject, "session group claimed by its first writer");
        }
        Ok(())
    }

    /// `contribute` on `graph`'s group, or [`Error::PermissionDenied`].
    pub(super) async fn may_contribute(
        &self,
        subject: &Subject,
        operator: &OperatorId,
        graph: &GraphId,
    ) -> Result<()> {
        self.ensure_personal(subject, operator, graph).await?;
        self.claim_session_group(subject, graph).await?;
        let g = group(graph)?;
        if self
            .authorizer
            .check(subject, Permission::Contribute, &g)
            .await?
        {
            Ok(())
        } else {
            Err(denied(subject, Permission::Contribute, &g))
        }
    }

    /// Writes the fragment relationships of episodes just stored in `graph`.
    pub(super) async fn record(
        &self,
        subject: &Subject,
        graph: &GraphId,
        episodes: impl IntoIterator<Item = Uuid>,
        involves: &[Subject],
    ) -> Result<()> {
        let mut rels = Vec::new();
        for e in episodes {
            rels.extend(
                Fragment::new(e, graph.as_str(), subject.clone())
                    .involves(involves.iter().cloned())
                    .relationships()?,
            );
        }
        self.authorizer.write_relationships(&rels).await
    }

    /// The graphs of `graphs` whose group the subject may access.
    pub(super) async fn readable(
        &self,
        subject: &Subject,
        operator: &OperatorId,
        graphs: &[GraphId],
    ) -> Result<BTreeSet<String>> {
        for g in graphs {
            self.ensure_personal(subject, operator, g).await?;
        }
        self.authorizer
            .lookup_resources(subject, Permission::Access)
            .await
    }

    /// The episodes the subject may view whatever their group: those whose fragment
    /// names it as `involves` or `shared_by`. One read: a fragment's only
    /// relationships to a person or an agent are those two.
    async fn viewable(&self, subject: &Subject) -> Result<Vec<Uuid>> {
        let naming = RelationshipFilter::of_type(ObjectType::MemoryFragment)
            .subject(subject.object().clone());
        let episodes: BTreeSet<Uuid> = self
            .authorizer
            .read_relationships(&naming)
            .await?
            .iter()
            .filter(|r| matches!(r.relation, Relation::Involves | Relation::SharedBy))
            .filter_map(|r| Uuid::parse_str(&r.resource.id).ok())
            .collect();
        Ok(episodes.into_iter().collect())
    }

    /// The groups the subject may access — looked up, and kept as the plan of its
    /// next search.
    async fn lookup_readable(
        &self,
        subject: &Subject,
        operator: &OperatorId,
        graphs: &[GraphId],
    ) -> Result<BTreeSet<String>> {
        let readable = self.readable(subject, operator, graphs).await?;
        let mut plans = self.last_readable.lock().unwrap_or_else(|p| p.into_inner());
        if plans.len() >= PLANS_KEPT {
            plans.clear();
        }
        plans.insert(subject.to_string(), readable.clone());
        Ok(readable)
    }

    /// The positions of `graphs` the subject's last lookup found unreadable (none
    /// without one).
    fn planned_unreadable(&self, subject: &Subject, graphs: &[GraphId]) -> Vec<usize> {
        let plans = self.last_readable.lock().unwrap_or_else(|p| p.into_inner());
        match plans.get(&subject.to_string()) {
            Some(readable) => (0..graphs.len())
                .filter(|i| !readable.contains(graphs[*i].as_str()))
                .collect(),
            None => Vec::new(),
        }
    }

    /// A search of `graphs` as the subject may see it.
    ///
    /// The lookup of the readable groups runs concurrently with the search of the
    /// graphs the subject's previous lookup found readable, so a subject who may read
    /// every graph pays one authorizer round trip hidden behind the search. Graphs
    /// that lookup found unreadable are not searched as they are: the read of the
    /// episodes the subject may view there runs with the lookup, and they are searched
    /// restricted to those episodes at the caller's limit (the storage applies the
    /// selection before the limit, so the answer is exact however few are visible;
    /// with none, such a graph answers nothing). The fresh lookup decides: a graph
    /// planned readable that no longer is has its hits dropped and is searched
    /// restricted, and one planned unreadable that now is readable is searched as it
    /// is — so a membership change takes effect on the next search, and the plan
    /// only saves work.
    pub(super) async fn search<S: Storage>(
        &self,
        subject: &Subject,
        operator: &OperatorId,
        storage: &S,
        graphs: &[GraphId],
        query: &GraphQuery,
    ) -> Result<Vec<Vec<ScoredHit>>> {
        let filtered = matches!(
            query.result_type,
            ResultType::Episodes | ResultType::Facts { .. }
        );
        let planned = self.planned_unreadable(subject, graphs);
        let first: Vec<usize> = (0..graphs.len()).filter(|i| !planned.contains(i)).collect();
        let searched = search_at(storage, graphs, &first, Some(query));
        // The read runs with the lookup when the plan expects it to be needed.
        let early_viewable = async {
            if filtered && !planned.is_empty() {
                self.viewable(subject).await.map(Some)
            } else {
                Ok(None)
            }
        };
        let (readable, early_viewable, searched) = tokio::join!(
            self.lookup_readable(subject, operator, graphs),
            early_viewable,
            searched
        );
        let (readable, early_viewable, searched) = (readable?, early_viewable?, searched?);
        let mut per_graph: Vec<Vec<ScoredHit>> = vec![Vec::new(); graphs.len()];
        for (i, hits) in first.iter().zip(searched) {
            per_graph[*i] = hits;
        }
        let is_readable = |i: usize| readable.contains(graphs[i].as_str());
        let unreadable: Vec<usize> = (0..graphs.len()).filter(|i| !is_readable(*i)).collect();
        for i in &unreadable {
            per_graph[*i].clear();
        }
        // Planned unreadable, readable now: searched as they are.
        let missed: Vec<usize> = planned
            .iter()
            .copied()
            .filter(|i| is_readable(*i))
            .collect();
        let narrow = if filtered && !unreadable.is_empty() {
            let viewable = match early_viewable {
                Some(v) => v,
                None => self.viewable(subject).await?,
            };
            // A selection the query carries already narrows what is viewable.
            let viewable: Vec<Uuid> = match &query.episodes {
                None => viewable,
                Some(own) => {
                    let own: HashSet<&Uuid> = own.iter().collect();
                    viewable.into_iter().filter(|u| own.contains(u)).collect()
                }
            };
            (!viewable.is_empty()).then(|| query.clone().episodes(viewable))
        } else {
            None
        };
        let plain_again = search_at(storage, graphs, &missed, Some(query));
        let narrowed = search_at(storage, graphs, &unreadable, narrow.as_ref());
        let (plain_again, narrowed) = tokio::try_join!(plain_again, narrowed)?;
        // Each answers one list per graph it searched (none when it searched nothing).
        for (i, hits) in missed.iter().zip(plain_again) {
            per_graph[*i] = hits;
        }
        for (i, hits) in unreadable.iter().zip(narrowed) {
            per_graph[*i] = hits;
        }
        Ok(per_graph)
    }

    /// Whether the subject may see episode `uuid` of `graph`.
    pub(super) async fn may_view(
        &self,
        subject: &Subject,
        operator: &OperatorId,
        graph: &GraphId,
        uuid: Uuid,
    ) -> Result<bool> {
        self.ensure_personal(subject, operator, graph).await?;
        if self
            .authorizer
            .check(subject, Permission::Access, &group(graph)?)
            .await?
        {
            return Ok(true);
        }
        self.authorizer
            .check(subject, Permission::View, &ObjectRef::fragment(uuid))
            .await
    }

    /// `delete` on episode `uuid`, or [`Error::PermissionDenied`].
    pub(super) async fn may_delete(&self, subject: &Subject, uuid: Uuid) -> Result<()> {
        let f = ObjectRef::fragment(uuid);
        if self
            .authorizer
            .check(subject, Permission::Delete, &f)
            .await?
        {
            Ok(())
        } else {
            Err(denied(subject, Permission::Delete, &f))
        }
    }

    /// Removes the fragment relationships of a removed episode.
    pub(super) async fn forget_fragment(&self, uuid: Uuid) -> Result<()> {
        self.authorizer
            .delete_relationships(&crate::access::RelationshipFilter::resource(
                ObjectRef::fragment(uuid),
            ))
            .await
            .map(|_| ())
    }
}
