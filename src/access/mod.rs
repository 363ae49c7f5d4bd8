//! Who may read, write and forget: the authorization model and its authorizers.
//!
//! The model is OpenClaw's SpiceDB schema ([`SCHEMA`]) in gralkor's terms:
//!
//! * **Subjects** ([`Subject`]): a `person` or an `agent`; an agent may have an owner
//!   person (`agent#owner`, `act_as = owner`).
//! * **Groups**: a Destination's graph, named by its logical graph id (`global`,
//!   `personal/ada`, `team-x`). Members may `access` (read) and `contribute` (write).
//! * **Memory fragments** ([`Fragment`]): every stored episode, with its
//!   `source_group`, `shared_by` (the writer) and `involves` (the people and agents it
//!   concerns). `view = involves + shared_by + source_group->access`,
//!   `delete = shared_by`.
//!
//! An [`Authorizer`] stores relationships and answers checks and lookups with exactly
//! those semantics (`permits` is the one evaluator the gralkor-side authorizers
//! share). Two come with the crate:
//!
//! * [`EmbeddedAuthorizer`]: the relationships live in the same FalkorDB server as the
//!   memory, in a graph of their own (`ACCESS_GRAPH`); gralkor evaluates them.
//! * [`InMemoryAuthorizer`]: the same in a map, for the test twin and your tests.
//!
//! With the `spicedb` feature, `SpiceDbAuthorizer` puts them in a real SpiceDB: embedded
//! in the process (`start_embedded`, which `serve` can share over gRPC) or a SpiceDB
//! server reached over the network with a preshared key (`connect`, `RemoteSpiceDb`;
//! reads see the authorizer's own writes through ZedTokens).
//!
//! A deployment may name a default group
//! ([`DefaultGroup`](crate::destination::DefaultGroup)): the shared Destination for
//! memory that names none, whose configured members are written at startup.
//!
//! Both pass one contract suite (`tests/access/`). The memory client enforces them
//! (see [`MemoryClient::with_authorizer`](crate::client::MemoryClient::with_authorizer)).

mod embedded;
mod memory;
mod model;
#[cfg(feature = "spicedb")]
mod spicedb;

use std::collections::BTreeSet;

use async_trait::async_trait;

pub use embedded::EmbeddedAuthorizer;
pub use memory::InMemoryAuthorizer;
pub use model::{
    Fragment, ObjectRef, ObjectType, Permission, Relation, Relationship, RelationshipFilter,
    SCHEMA, Subject,
};
internal_use!(embedded::ACCESS_GRAPH);
internal_use!(model::{MAX_OBJECT_ID_BYTES, permits});

#[cfg(feature = "spicedb")]
pub use spicedb::{
    Consistency, DEFAULT_SPICEDB_TIMEOUT, RemoteSpiceDb, SPICEDB_LIB_VAR, SPICEDB_NPM_PACKAGE,
    SPICEDB_NPM_VERSION, SpiceDbAuthorizer, SpiceDbServer, provision_spicedb,
};

use crate::Result;

/// Stores relationships and answers permission questions with the semantics of
/// [`SCHEMA`]. Object safe: hold it as `Arc<dyn Authorizer>`.
///
/// Consistency: a check, lookup or read that starts after a write (or delete)
/// returned sees it.
#[async_trait]
pub trait Authorizer: Send + Sync + 'static {
    /// A short name for logs and status (`embedded`, `in-memory`, `spicedb`).
    fn name(&self) -> &str;

    /// Writes relationships, idempotently (an existing one is kept: SpiceDB's
    /// `TOUCH`), all or nothing.
    async fn write_relationships(&self, relationships: &[Relationship]) -> Result<()>;

    /// Makes `subject` a member of `group` if, and only if, the group has no member
    /// yet — atomically: of any number of concurrent claims of a group without
    /// members exactly one writes its membership, and every other one writes nothing.
    /// Returns whether this call wrote it (`false`: the group had a member, possibly
    /// `subject` itself). How a session group's first writer becomes its only member.
    ///
    /// Each authorizer makes it one conditional write: the in-memory one under its
    /// lock, the embedded one in one statement (FalkorDB runs every write query on one
    /// writer thread), SpiceDB with a `MUST_NOT_MATCH` precondition on the group's
    /// `member` relationships. A claim retried after a lost connection whose first
    /// attempt was applied answers `false`; check the permission to know where the
    /// subject stands.
    ///
    /// ```
    /// # #[tokio::main(flavor = "current_thread")] async fn main() -> gralkor::Result<()> {
    /// use gralkor::access::{Authorizer, InMemoryAuthorizer, ObjectRef, Permission, Subject};
    ///
    /// let authz = InMemoryAuthorizer::new();
    /// let (ada, bob) = (Subject::agent("ada")?, Subject::agent("bob")?);
    /// assert!(authz.claim_group("session-7", &ada).await?);
    /// assert!(!authz.claim_group("session-7", &bob).await?);
    /// assert!(!authz.check(&bob, Permission::Contribute, &ObjectRef::group("session-7")?).await?);
    /// # Ok(()) }
    /// ```
    async fn claim_group(&self, group: &str, subject: &Subject) -> Result<bool>;

    /// Deletes every relationship `filter` matches; returns how many there were (an
    /// authorizer that cannot count returns 0).
    async fn delete_relationships(&self, filter: &RelationshipFilter) -> Result<u64>;

    /// Every relationship `filter` matches, sorted.
    async fn read_relationships(&self, filter: &RelationshipFilter) -> Result<Vec<Relationship>>;

    /// For each of `resources` (all of `permission`'s type), whether `subject` has
    /// `permission` on it, in the same order.
    async fn check_many(
        &self,
        subject: &Subject,
        permission: Permission,
        resources: &[ObjectRef],
    ) -> Result<Vec<bool>>;

    /// Whether `subject` has `permission` on `resource`.
    ///
    /// ```
    /// # #[tokio::main(flavor = "current_thread")] async fn main() -> gralkor::Result<()> {
    /// use gralkor::access::{Authorizer, InMemoryAuthorizer, ObjectRef, Permission, Relationship, Subject};
    ///
    /// let authz = InMemoryAuthorizer::new();
    /// let ada = Subject::person("ada")?;
    /// authz.write_relationships(&[Relationship::member("team", &ada)?]).await?;
    /// assert!(authz.check(&ada, Permission::Contribute, &ObjectRef::group("team")?).await?);
    /// assert!(!authz.check(&Subject::person("bob")?, Permission::Access, &ObjectRef::group("team")?).await?);
    /// # Ok(()) }
    /// ```
    async fn check(
        &self,
        subject: &Subject,
        permission: Permission,
        resource: &ObjectRef,
    ) -> Result<bool> {
        Ok(self
            .check_many(subject, permission, std::slice::from_ref(resource))
            .await?
            .first()
            .copied()
            .unwrap_or(false))
    }

    /// The ids of every resource of `permission`'s type on which `subject` has
    /// `permission` (SpiceDB's LookupResources).
    ///
    /// ```
    /// # #[tokio::main(flavor = "current_thread")] async fn main() -> gralkor::Result<()> {
    /// use gralkor::access::{Authorizer, InMemoryAuthorizer, Permission, Relationship, Subject};
    ///
    /// let authz = InMemoryAuthorizer::new();
    /// let ada = Subject::person("ada")?;
    /// authz.write_relationships(&[Relationship::member("team", &ada)?, Relationship::member("global", &ada)?]).await?;
    /// let groups = authz.lookup_resources(&ada, Permission::Access).await?;
    /// assert_eq!(groups.into_iter().collect::<Vec<_>>(), ["global", "team"]);
    /// # Ok(()) }
    /// ```
    async fn lookup_resources(
        &self,
        subject: &Subject,
        permission: Permission,
    ) -> Result<BTreeSet<String>>;

    /// Whether the authorizer answers (a cheap round trip). Default: it always does.
    async fn health(&self) -> Result<()> {
        Ok(())
    }
}
