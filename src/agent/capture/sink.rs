//! Where a flushed batch is written: the client's own ingestion path against the
//! snapshot frozen at acceptance; and how a session's writes are forgotten.

use std::sync::Arc;

use async_trait::async_trait;

use super::store::RouteTarget;
use crate::access::Subject;
use crate::client::{Drain, Ingest, MemoryClient, PurgeSession, SessionPurgeReport};
use crate::graph::Timestamp;
use crate::provenance::Writer;
use crate::runtime::{Runtime, Snapshot};
use crate::storage::{Content, NewEpisode, OperatorId, Storage, validate_content};
use crate::{Error, Result};

/// The two writes a capture makes, against a given snapshot, and the session purge. Implemented for every
/// [`MemoryClient`] (so for [`NativeClient`](crate::NativeClient) and
/// [`InMemoryClient`](crate::InMemoryClient)); the buffer holds one as
/// `Arc<dyn CaptureSink>`.
#[async_trait]
pub trait CaptureSink: Send + Sync + 'static {
    /// The runtime whose snapshot a capture is resolved against at acceptance.
    fn runtime(&self) -> &Runtime;

    /// Registers the buffer's drain with the client, so the client's own shutdown
    /// writes the buffer's accepted turns first. A sink without a shutdown of its own
    /// ignores it.
    fn drain_on_shutdown(&self, drain: Arc<dyn Drain>) {
        let _ = drain;
    }

    /// Runs `request` through its Lens as `snapshot` defines it (replay-safe by the
    /// request's id).
    async fn ingest_frozen(&self, snapshot: &Snapshot, request: &Ingest) -> Result<()>;

    /// Writes `content` directly (the direct writer marker) to `destination` as
    /// `snapshot` defines it, identified by `replay_key` so a replay stores nothing
    /// twice, recording conversation session `session`.
    #[allow(clippy::too_many_arguments)]
    async fn write_direct(
        &self,
        snapshot: &Snapshot,
        destination: &str,
        operator: &OperatorId,
        content: Content,
        source_description: &str,
        reference_time: Timestamp,
        replay_key: &str,
        session: Option<&str>,
        subject: Option<&Subject>,
        instructions: Option<&str>,
    ) -> Result<()>;

    /// Checks, when a turn is appended, that `subject` may write every one of
    /// `targets` (for a client with an authorizer: the subject is required and needs
    /// `contribute` on each target's graph); without an authorizer, nothing.
    async fn authorize_capture(
        &self,
        snapshot: &Snapshot,
        operator: &OperatorId,
        targets: &[RouteTarget],
        subject: Option<&Subject>,
    ) -> Result<()>;

    /// Forgets what was written for a session (see
    /// [`MemoryClient::purge_session`](crate::client::Client::purge_session)).
    async fn purge_session(&self, request: &PurgeSession) -> Result<SessionPurgeReport>;
}

#[async_trait]
impl<S: Storage> CaptureSink for MemoryClient<S> {
    fn runtime(&self) -> &Runtime {
        crate::client::Client::runtime(self)
    }

    fn drain_on_shutdown(&self, drain: Arc<dyn Drain>) {
        MemoryClient::drain_on_shutdown(self, drain);
    }

    async fn ingest_frozen(&self, snapshot: &Snapshot, request: &Ingest) -> Result<()> {
        self.ingest_with(snapshot, request).await.map(|_| ())
    }

    async fn write_direct(
        &self,
        snapshot: &Snapshot,
        destination: &str,
        operator: &OperatorId,
        content: Content,
        source_description: &str,
        reference_time: Timestamp,
        replay_key: &str,
        session: Option<&str>,
        subject: Option<&Subject>,
        instructions: Option<&str>,
    ) -> Result<()> {
        if self.is_closed() {
            return Err(Error::Closed {
                what: "this memory client".into(),
            });
        }
        validate_content("content", &content)?;
        let graph = snapshot
            .destination("route.destination", destination)?
            .graph_id(operator)?;
        let door = self
            .door(crate::client::Entry::new(subject, operator, graph.clone()))
            .await?;
        let episode = NewEpisode::new(
            graph.clone(),
            Writer::Direct,
            content,
            source_description,
            Some(reference_time),
        )
        .replay_key(replay_key)
        .session(session.map(str::to_owned))
        .instructions(instructions.map(str::to_owned));
        door.add_episode(episode).await.map(|_| ())
    }

    async fn authorize_capture(
        &self,
        snapshot: &Snapshot,
        operator: &OperatorId,
        targets: &[RouteTarget],
        subject: Option<&Subject>,
    ) -> Result<()> {
        if self.authorizer().is_none() {
            return Ok(());
        }
        for target in targets {
            let graph = match target {
                RouteTarget::Direct(d) => snapshot
                    .destination("route.direct", d)?
                    .graph_id(operator)?,
                RouteTarget::Lens(l) => crate::client::lens_graph(
                    snapshot,
                    snapshot.lens("route.lenses", l)?,
                    operator,
                )?,
            };
            self.authorize_write(subject, operator, &graph).await?;
        }
        Ok(())
    }

    async fn purge_session(&self, request: &PurgeSession) -> Result<SessionPurgeReport> {
        MemoryClient::purge_session(self, request).await
    }
}
