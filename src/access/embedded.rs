//! [`EmbeddedAuthorizer`]: relationships in a FalkorDB graph of their own, evaluated
//! by gralkor with the schema's semantics.
//!
//! The graph holds one node per object and one edge per relationship, kept by the
//! engine's store (`graph::store::relationships`, where its statements live). Every
//! write is one statement (FalkorDB runs it atomically), and every read runs after
//! the writes that returned before it, so a check right after a write sees the write.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use async_trait::async_trait;
use tracing::Instrument;

use super::Authorizer;
use super::model::{
    ObjectRef, ObjectType, Permission, Relation, Relationship, RelationshipFilter, Subject, permits,
};
use crate::falkordb::FalkorDb;
use crate::graph::store::relationships as rel;
use crate::retry::{Backoff, retry_when};
use crate::{Error, Result};

/// The logical graph the embedded authorizer keeps its relationships in. It begins
/// with the reserved prefix `gralkor/`, so no Destination or operator graph can have
/// its name.
pub const ACCESS_GRAPH: &str = "gralkor/access";

/// Idempotent writes are retried on a lost connection, as reads are.
const WRITE_RETRY: Backoff = Backoff::new(4, Duration::from_millis(50), Duration::from_secs(1));

/// Relationships in the embedded FalkorDB graph `ACCESS_GRAPH` (or another one you
/// name), evaluated with `permits`. Cheap to clone.
///
/// ```no_run
/// # async fn run(db: gralkor::falkordb::FalkorDb) -> gralkor::Result<()> {
/// use gralkor::access::{Authorizer, EmbeddedAuthorizer, ObjectRef, Permission, Relationship, Subject};
///
/// let authz = EmbeddedAuthorizer::new(db);
/// let ada = Subject::person("ada")?;
/// authz.write_relationships(&[Relationship::member("team", &ada)?]).await?;
/// assert!(authz.check(&ada, Permission::Access, &ObjectRef::group("team")?).await?);
/// # Ok(()) }
/// ```
#[derive(Clone)]
pub struct EmbeddedAuthorizer {
    db: FalkorDb,
    graph: Arc<str>,
    indexed: Arc<AtomicBool>,
}

impl std::fmt::Debug for EmbeddedAuthorizer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("EmbeddedAuthorizer")
            .field("graph", &self.graph)
            .finish_non_exhaustive()
    }
}

impl EmbeddedAuthorizer {
    /// An authorizer keeping its relationships in `ACCESS_GRAPH` on `db`'s server.
    pub fn new(db: FalkorDb) -> EmbeddedAuthorizer {
        EmbeddedAuthorizer::in_graph(db, ACCESS_GRAPH)
    }

    /// The same in another graph (tests use one graph each).
    pub fn in_graph(db: FalkorDb, graph: impl Into<String>) -> EmbeddedAuthorizer {
        EmbeddedAuthorizer {
            db,
            graph: Arc::from(graph.into()),
            indexed: Arc::new(AtomicBool::new(false)),
        }
    }

    /// The graph the relationships live in.
    pub fn graph(&self) -> &str {
        &self.graph
    }

    async fn ensure_index(&self) -> Result<()> {
        if self.indexed.load(Ordering::Acquire) {
            return Ok(());
        }
        rel::index_relationships(&self.db, &self.graph).await?;
        self.indexed.store(true, Ordering::Release);
        Ok(())
    }

    /// Runs one idempotent write after the index exists, retried on a lost
    /// connection.
    async fn write<T, F, Fut>(&self, op: F) -> Result<T>
    where
        F: FnMut() -> Fut,
        Fut: std::future::Future<Output = Result<T>>,
    {
        self.ensure_index().await?;
        retry_when("an access write", WRITE_RETRY, Error::is_connection, op).await
    }
}

/// An object as the relationship store keeps it.
fn object_row(o: &ObjectRef) -> rel::ObjectRow {
    rel::ObjectRow {
        key: o.key(),
        kind: o.kind.as_str().to_string(),
        id: o.id.clone(),
    }
}

/// The keys a filter selects by: its resource's and its subject's.
fn filter_keys(filter: &RelationshipFilter) -> (Option<String>, Option<String>) {
    let resource = filter.resource_id.as_ref().map(|id| {
        ObjectRef {
            kind: filter.resource_type,
            id: id.clone(),
        }
        .key()
    });
    (resource, filter.subject.as_ref().map(|s| s.key()))
}

/// The store's selection of the edges `filter` matches.
fn selection<'a>(
    filter: &'a RelationshipFilter,
    keys: &'a (Option<String>, Option<String>),
) -> rel::EdgeSelection<'a> {
    rel::EdgeSelection {
        resource_type: filter.resource_type.as_str(),
        resource_key: keys.0.as_deref(),
        subject_key: keys.1.as_deref(),
        relation: filter.relation.map(Relation::as_str),
    }
}

#[async_trait]
impl Authorizer for EmbeddedAuthorizer {
    fn name(&self) -> &str {
        "embedded"
    }

    async fn write_relationships(&self, relationships: &[Relationship]) -> Result<()> {
        if relationships.is_empty() {
            return Ok(());
        }
        let rows: Vec<rel::RelationshipRow> = relationships
            .iter()
            .map(|r| rel::RelationshipRow {
                resource: object_row(&r.resource),
                relation: r.relation.as_str().to_string(),
                subject: object_row(&r.subject),
            })
            .collect();
        self.write(|| rel::write_relationships(&self.db, &self.graph, &rows))
            .instrument(tracing::debug_span!(
                "gralkor.access.write",
                n = relationships.len()
            ))
            .await
    }

    async fn claim_group(&self, group: &str, subject: &Subject) -> Result<bool> {
        let membership = Relationship::member(group, subject)?;
        let row = rel::RelationshipRow {
            resource: object_row(&membership.resource),
            relation: membership.relation.as_str().to_string(),
            subject: object_row(&membership.subject),
        };
        let claimed = self
            .write(|| rel::claim_relationship(&self.db, &self.graph, &row))
            .instrument(tracing::debug_span!("gralkor.access.claim", group))
            .await?;
        Ok(claimed)
    }

    async fn delete_relationships(&self, filter: &RelationshipFilter) -> Result<u64> {
        let keys = filter_keys(filter);
        let selected = selection(filter, &keys);
        let deleted = self
            .write(|| rel::delete_edges(&self.db, &self.graph, &selected))
            .instrument(tracing::debug_span!("gralkor.access.delete"))
            .await?;
        // Objects left without any relationship are removed too, so nothing of a
        // forgotten fragment or subject stays in the graph.
        match &keys.0 {
            Some(key) => {
                self.write(|| rel::delete_object_if_unrelated(&self.db, &self.graph, key))
                    .await?
            }
            None => {
                let kind = filter.resource_type.as_str();
                self.write(|| rel::delete_unrelated_objects(&self.db, &self.graph, kind))
                    .await?
            }
        };
        if let Some(key) = &keys.1 {
            self.write(|| rel::delete_object_if_unrelated(&self.db, &self.graph, key))
                .await?;
        }
        Ok(deleted)
    }

    async fn read_relationships(&self, filter: &RelationshipFilter) -> Result<Vec<Relationship>> {
        let keys = filter_keys(filter);
        let rows = rel::read_edges(&self.db, &self.graph, &selection(filter, &keys)).await?;
        let mut out = Vec::with_capacity(rows.len());
        for r in rows {
            out.push(Relationship::new(
                ObjectRef::new(ObjectType::parse(&r.resource.kind)?, r.resource.id)?,
                Relation::parse(&r.relation)?,
                ObjectRef::new(ObjectType::parse(&r.subject.kind)?, r.subject.id)?,
            )?);
        }
        out.sort();
        Ok(out)
    }

    async fn check_many(
        &self,
        subject: &Subject,
        permission: Permission,
        resources: &[ObjectRef],
    ) -> Result<Vec<bool>> {
        for r in resources {
            permission.check_on(r.kind)?;
        }
        let span = tracing::debug_span!(
            "gralkor.access.check",
            permission = permission.as_str(),
            n = resources.len()
        );
        async {
            // Only the relationships that can grant: the resources' edges to the
            // subject, and (for `view`) their groups the subject is a member of — a
            // few rows whatever the fragments' other relationships.
            let keys: Vec<String> = resources.iter().map(ObjectRef::key).collect();
            if keys.is_empty() {
                return Ok(Vec::new());
            }
            let s = subject.object().key();
            let to_subject = rel::relations_to(&self.db, &self.graph, &keys, &s);
            let via_groups = async {
                if permission != Permission::View {
                    return Ok(None);
                }
                let (sources, member_of) = tokio::join!(
                    rel::targets_of(&self.db, &self.graph, &keys, Relation::SourceGroup.as_str()),
                    rel::sources_of(&self.db, &self.graph, &s, Relation::Member.as_str())
                );
                Ok::<_, Error>(Some((sources?, member_of?)))
            };
            let (to_subject, via_groups) = tokio::join!(to_subject, via_groups);
            let mut direct: BTreeMap<String, Vec<(Relation, ObjectRef)>> = BTreeMap::new();
            let mut groups = BTreeSet::new();
            for (k, relation) in to_subject? {
                direct
                    .entry(k)
                    .or_default()
                    .push((Relation::parse(&relation)?, subject.object().clone()));
            }
            if let Some((sources, member_of)) = via_groups? {
                groups = member_of;
                for (k, g) in sources {
                    direct
                        .entry(k)
                        .or_default()
                        .push((Relation::SourceGroup, ObjectRef::group(g)?));
                }
            }
            Ok(resources
                .iter()
                .map(|r| {
                    let d = direct.get(&r.key()).map(Vec::as_slice).unwrap_or(&[]);
                    permits(r, permission, subject, d, &groups)
                })
                .collect())
        }
        .instrument(span)
        .await
    }

    async fn lookup_resources(
        &self,
        subject: &Subject,
        permission: Permission,
    ) -> Result<BTreeSet<String>> {
        let s = subject.object().key();
        let kind = permission.resource_type().as_str();
        let direct = |relation: Relation| {
            rel::resources_related(&self.db, &self.graph, &s, relation.as_str(), kind)
        };
        let span = tracing::debug_span!("gralkor.access.lookup", permission = permission.as_str());
        async {
            Ok(match permission {
                Permission::ActAs => direct(Relation::Owner).await?,
                Permission::Access | Permission::Contribute => direct(Relation::Member).await?,
                Permission::Delete => direct(Relation::SharedBy).await?,
                Permission::View => {
                    let mut out = direct(Relation::Involves).await?;
                    out.extend(direct(Relation::SharedBy).await?);
                    out.extend(
                        rel::resources_through(
                            &self.db,
                            &self.graph,
                            &s,
                            Relation::Member.as_str(),
                            Relation::SourceGroup.as_str(),
                        )
                        .await?,
                    );
                    out
                }
            })
        }
        .instrument(span)
        .await
    }

    async fn health(&self) -> Result<()> {
        rel::ping(&self.db, &self.graph).await
    }
}
