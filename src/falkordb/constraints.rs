//! Unique constraints (`GRAPH.CONSTRAINT`): the server refuses a second node or
//! relationship with the same value, whatever client writes it.

use std::time::Duration;

use super::{
    FalkorDb, IndexEntity, Params, STATUS_POLL, Value, is_identifier, physical_graph_name,
};
use crate::retry::{Backoff, poll, retry_when};
use crate::{Error, Result};

/// Creating a constraint while its supporting index is rebuilt: 6 attempts, 10 ms
/// doubling to 50 ms after each wait for the index.
const CONSTRAINT_RETRY: Backoff =
    Backoff::new(6, Duration::from_millis(10), Duration::from_millis(50));

/// How long [`FalkorDb::create_unique_constraint`] waits for the server to finish
/// checking the existing data.
const CONSTRAINT_BUILD_DEADLINE: Duration = Duration::from_secs(120);

impl FalkorDb {
    /// Makes `property` unique among the nodes (or relationships) of `entity` in
    /// `graph`, waiting until the server has verified the existing data. Returns
    /// `false` when the constraint already existed.
    ///
    /// FalkorDB requires an exact-match (range) index on the property first; create it
    /// with [`FalkorDb::create_index`]. A write that would break the constraint then
    /// fails with [`Error::Query`] and changes nothing. When existing data already
    /// breaks it, the constraint ends up failed and this returns [`Error::Query`].
    ///
    /// ```no_run
    /// # async fn run(db: gralkor::falkordb::FalkorDb) -> gralkor::Result<()> {
    /// use gralkor::falkordb::{IndexEntity, IndexSpec};
    ///
    /// db.create_index("notes", &IndexSpec::range_nodes("Note", ["id"])).await?;
    /// db.create_unique_constraint("notes", &IndexEntity::Node("Note".into()), "id").await?;
    /// # Ok(()) }
    /// ```
    #[tracing::instrument(skip(self))]
    pub async fn create_unique_constraint(
        &self,
        graph: &str,
        entity: &IndexEntity,
        property: &str,
    ) -> Result<bool> {
        let (kind, label) = match entity {
            IndexEntity::Node(l) => ("NODE", l),
            IndexEntity::Relationship(t) => ("RELATIONSHIP", t),
        };
        for (field, name) in [("entity", label.as_str()), ("property", property)] {
            if !is_identifier(name) {
                return Err(Error::invalid(
                    field,
                    "must be an identifier: an ASCII letter or `_` followed by ASCII letters, digits or `_`",
                ));
            }
        }
        let name = physical_graph_name(graph)?;
        let name = &name;
        // The supporting index is being rebuilt (another writer just added a field to
        // the label's index): wait until it is operational, then try again.
        let index_rebuilding = |e: &Error| {
            matches!(e, Error::Query { message, .. }
                if message.contains("missing supporting exact-match index"))
        };
        let mut retrying = false;
        let created = retry_when(
            "creating a unique constraint",
            CONSTRAINT_RETRY,
            index_rebuilding,
            || {
                let again = std::mem::replace(&mut retrying, true);
                async move {
                    if again {
                        self.wait_operational(graph, entity).await?;
                    }
                    let mut conn = self.inner.conn.clone();
                    let res: redis::RedisResult<redis::Value> = redis::cmd("GRAPH.CONSTRAINT")
                        .arg("CREATE")
                        .arg(name)
                        .arg("UNIQUE")
                        .arg(kind)
                        .arg(label)
                        .arg("PROPERTIES")
                        .arg(1)
                        .arg(property)
                        .query_async(&mut conn)
                        .await;
                    match res.map_err(|e| self.map_err(graph, e)) {
                        Ok(_) => Ok(true),
                        Err(Error::Query { message, .. }) if message.contains("already exists") => {
                            Ok(false)
                        }
                        Err(e) => Err(e),
                    }
                }
            },
        )
        .await?;
        self.wait_constraint(graph, kind, label, property).await?;
        if created {
            // Keep the definition in the RDB preamble rather than the AOF tail, as for
            // index changes (in the background, as `create_indices` does).
            self.persist_index_change_later();
        }
        Ok(created)
    }

    async fn wait_constraint(
        &self,
        graph: &str,
        kind: &str,
        label: &str,
        property: &str,
    ) -> Result<()> {
        let built = poll("building a unique constraint", STATUS_POLL, CONSTRAINT_BUILD_DEADLINE, || async {
            let res = self
                .ro_query(
                    graph,
                    "CALL db.constraints() YIELD type, label, properties, entitytype, status \
                     WHERE type = 'UNIQUE' AND label = $label AND entitytype = $kind \
                       AND $property IN properties \
                     RETURN status",
                    &Params::new()
                        .set("label", label)
                        .set("kind", kind)
                        .set("property", property),
                )
                .await?;
            match res.get(0, "status").and_then(Value::as_str) {
                Some("OPERATIONAL") => Ok(Some(())),
                Some("FAILED") => Err(Error::Query {
                    graph: graph.to_owned(),
                    message: format!(
                        "unique constraint on {label}.{property} failed: existing data holds duplicates"
                    ),
                }),
                _ => Ok(None),
            }
        })
        .await?;
        built.ok_or_else(|| Error::Timeout {
            operation: format!("building the unique constraint on {label}.{property}"),
            after: CONSTRAINT_BUILD_DEADLINE,
        })
    }
}
