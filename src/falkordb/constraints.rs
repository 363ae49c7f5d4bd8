//! Unique constraints (`GRAPH.CONSTRAINT`): the server refuses a second node or
//! relationship with the same value, whatever client writes it.

use std::time::{Duration, Instant};

use super::{FalkorDb, IndexEntity, Params, Value, is_identifier, physical_graph_name};
use crate::{Error, Result};

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
    /// # async fn run(db: gralkor::FalkorDb) -> gralkor::Result<()> {
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
        let mut attempt = 0;
        let created = loop {
            let mut conn = self.inner.conn.clone();
            let res: redis::RedisResult<redis::Value> = redis::cmd("GRAPH.CONSTRAINT")
                .arg("CREATE")
                .arg(&name)
                .arg("UNIQUE")
                .arg(kind)
                .arg(label)
                .arg("PROPERTIES")
                .arg(1)
                .arg(property)
                .query_async(&mut conn)
                .await;
            match res.map_err(|e| self.map_err(graph, e)) {
                Ok(_) => break true,
                Err(Error::Query { message, .. }) if message.contains("already exists") => {
                    break false;
                }
                // The supporting index is being rebuilt (another writer just added a
                // field to the label's index): wait until it is operational, retry.
                Err(Error::Query { message, .. })
                    if message.contains("missing supporting exact-match index") && attempt < 5 =>
                {
                    attempt += 1;
                    self.wait_operational(graph, entity).await?;
                    tokio::time::sleep(Duration::from_millis(10 * attempt)).await;
                }
                Err(e) => return Err(e),
            }
        };
        self.wait_constraint(graph, kind, label, property).await?;
        if created && let Some(server) = self.embedded_server() {
            // Keep the definition in the RDB preamble rather than the AOF tail, as for
            // index changes.
            server.rewrite_aof().await?;
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
        let start = Instant::now();
        let mut delay = Duration::from_millis(5);
        loop {
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
                Some("OPERATIONAL") => return Ok(()),
                Some("FAILED") => {
                    return Err(Error::Query {
                        graph: graph.to_owned(),
                        message: format!(
                            "unique constraint on {label}.{property} failed: existing data holds duplicates"
                        ),
                    });
                }
                _ => {}
            }
            if start.elapsed() > CONSTRAINT_BUILD_DEADLINE {
                return Err(Error::Timeout {
                    operation: format!("building the unique constraint on {label}.{property}"),
                    after: CONSTRAINT_BUILD_DEADLINE,
                });
            }
            tokio::time::sleep(delay).await;
            delay = (delay * 2).min(Duration::from_millis(200));
        }
    }
}
