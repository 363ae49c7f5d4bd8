//! [`InMemoryAuthorizer`]: the schema's semantics over relationships held in memory.

use std::collections::BTreeSet;
use std::sync::Mutex;

use async_trait::async_trait;

use super::Authorizer;
use super::model::{
    ObjectRef, ObjectType, Permission, Relation, Relationship, RelationshipFilter, Subject, permits,
};
use crate::Result;

/// Relationships in a set, evaluated with `permits`: for the in-memory client and
/// your tests. Cheap to share behind an `Arc`; every call sees every earlier write.
///
/// ```
/// # #[tokio::main(flavor = "current_thread")] async fn main() -> gralkor::Result<()> {
/// use gralkor::access::{Authorizer, Fragment, InMemoryAuthorizer, ObjectRef, Permission, Subject};
///
/// let authz = InMemoryAuthorizer::new();
/// let (ada, bob) = (Subject::person("ada")?, Subject::person("bob")?);
/// let episode = uuid::Uuid::new_v4();
/// authz.write_relationships(&Fragment::new(episode, "team", ada.clone())
///     .involves([bob.clone()]).relationships()?).await?;
/// let f = ObjectRef::fragment(episode);
/// assert!(authz.check(&bob, Permission::View, &f).await?);
/// assert!(!authz.check(&bob, Permission::Delete, &f).await?);
/// assert!(authz.check(&ada, Permission::Delete, &f).await?);
/// # Ok(()) }
/// ```
#[derive(Debug, Default)]
pub struct InMemoryAuthorizer {
    tuples: Mutex<BTreeSet<Relationship>>,
}

impl InMemoryAuthorizer {
    /// No relationships.
    pub fn new() -> InMemoryAuthorizer {
        InMemoryAuthorizer::default()
    }

    fn tuples(&self) -> std::sync::MutexGuard<'_, BTreeSet<Relationship>> {
        self.tuples.lock().unwrap_or_else(|p| p.into_inner())
    }
}

fn direct(tuples: &BTreeSet<Relationship>, resource: &ObjectRef) -> Vec<(Relation, ObjectRef)> {
    tuples
        .iter()
        .filter(|t| t.resource == *resource)
        .map(|t| (t.relation, t.subject.clone()))
        .collect()
}

fn member_of(tuples: &BTreeSet<Relationship>, subject: &Subject) -> BTreeSet<String> {
    tuples
        .iter()
        .filter(|t| t.relation == Relation::Member && t.subject == *subject.object())
        .map(|t| t.resource.id.clone())
        .collect()
}

#[async_trait]
impl Authorizer for InMemoryAuthorizer {
    fn name(&self) -> &str {
        "in-memory"
    }

    async fn write_relationships(&self, relationships: &[Relationship]) -> Result<()> {
        self.tuples().extend(relationships.iter().cloned());
        Ok(())
    }

    async fn claim_group(&self, group: &str, subject: &Subject) -> Result<bool> {
        let membership = Relationship::member(group, subject)?;
        // One lock for the look and the write: no other call runs in between.
        let mut tuples = self.tuples();
        let taken = tuples
            .iter()
            .any(|t| t.relation == Relation::Member && t.resource == membership.resource);
        if taken {
            return Ok(false);
        }
        Ok(tuples.insert(membership))
    }

    async fn delete_relationships(&self, filter: &RelationshipFilter) -> Result<u64> {
        let mut tuples = self.tuples();
        let before = tuples.len();
        tuples.retain(|t| !filter.matches(t));
        Ok((before - tuples.len()) as u64)
    }

    async fn read_relationships(&self, filter: &RelationshipFilter) -> Result<Vec<Relationship>> {
        Ok(self
            .tuples()
            .iter()
            .filter(|t| filter.matches(t))
            .cloned()
            .collect())
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
        let tuples = self.tuples();
        let groups = member_of(&tuples, subject);
        Ok(resources
            .iter()
            .map(|r| permits(r, permission, subject, &direct(&tuples, r), &groups))
            .collect())
    }

    async fn lookup_resources(
        &self,
        subject: &Subject,
        permission: Permission,
    ) -> Result<BTreeSet<String>> {
        let kind: ObjectType = permission.resource_type();
        let tuples = self.tuples();
        let groups = member_of(&tuples, subject);
        let candidates: BTreeSet<ObjectRef> = tuples
            .iter()
            .filter(|t| t.resource.kind == kind)
            .map(|t| t.resource.clone())
            .collect();
        Ok(candidates
            .into_iter()
            .filter(|r| permits(r, permission, subject, &direct(&tuples, r), &groups))
            .map(|r| r.id)
            .collect())
    }
}
