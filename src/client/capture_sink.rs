//! [`CaptureSink`]: what a capture buffer needs from a client — its two writes against
//! a frozen snapshot, the authorization of a new binding, the session purge, the
//! shutdown drain and where accepted turns are kept. Reached from any client through
//! [`Client::capture_sink`](super::Client::capture_sink), so a buffer is built from an
//! `Arc<dyn Client>`.

use std::sync::Arc;

use async_trait::async_trait;

use super::forget::{PurgeSession, SessionPurgeReport};
use super::{Client, Drain, InMemoryClient, MemoryClient};
use crate::Result;
use crate::access::Subject;
use crate::falkordb::FalkorDb;
use crate::lens::Ingest;
use crate::provenance::Writer;
use crate::runtime::{Runtime, Snapshot};
use crate::storage::{Content, GraphId, NewEpisode, OperatorId, Storage, validate_content};
use crate::vocab::Timestamp;

/// The writes a capture makes, against a given snapshot, and the session purge.
/// Implemented for every [`MemoryClient`] (so for [`NativeClient`](crate::NativeClient))
/// and for [`InMemoryClient`] (which records the Lens writes like its own `ingest`);
/// a client hands one out through [`Client::capture_sink`], and the buffer holds it as
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

    /// The FalkorDB server a buffer over this sink keeps its accepted turns in (the
    /// graph `gralkor/capture-buffer`), so a process started later finds them; `None`
    /// (the default) keeps them in memory, lost with the process.
    fn capture_server(&self) -> Option<FalkorDb> {
        None
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
    /// `graphs` (for a client with an authorizer: the subject is required and needs
    /// `contribute` on each); without an authorizer, nothing.
    async fn authorize_capture(
        &self,
        operator: &OperatorId,
        graphs: &[GraphId],
        subject: Option<&Subject>,
    ) -> Result<()>;

    /// Forgets what was written for a session (see
    /// [`Client::purge_session`](crate::client::Client::purge_session)).
    async fn purge_session(&self, request: &PurgeSession) -> Result<SessionPurgeReport>;
}

#[async_trait]
impl<S: Storage> CaptureSink for MemoryClient<S> {
    fn runtime(&self) -> &Runtime {
        Client::runtime(self)
    }

    fn drain_on_shutdown(&self, drain: Arc<dyn Drain>) {
        MemoryClient::drain_on_shutdown(self, drain);
    }

    fn capture_server(&self) -> Option<FalkorDb> {
        self.durable_capture().cloned()
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
        self.open()?;
        validate_content("content", &content)?;
        let graph = snapshot
            .destination("route.destination", destination)?
            .graph_id(operator)?;
        let door = self
            .door(super::Entry::new(subject, operator, graph.clone()))
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
        operator: &OperatorId,
        graphs: &[GraphId],
        subject: Option<&Subject>,
    ) -> Result<()> {
        if self.authorizer().is_none() {
            return Ok(());
        }
        for graph in graphs {
            self.authorize_write(subject, operator, graph).await?;
        }
        Ok(())
    }

    async fn purge_session(&self, request: &PurgeSession) -> Result<SessionPurgeReport> {
        MemoryClient::purge_session(self, request).await
    }
}

/// The twin writes through the client logic it wraps, recording the Lens writes (and
/// answering them canned) like its own `ingest`, and the session purge like its own.
#[async_trait]
impl CaptureSink for InMemoryClient {
    fn runtime(&self) -> &Runtime {
        Client::runtime(self)
    }

    fn drain_on_shutdown(&self, drain: Arc<dyn Drain>) {
        MemoryClient::drain_on_shutdown(self, drain);
    }

    async fn ingest_frozen(&self, snapshot: &Snapshot, request: &Ingest) -> Result<()> {
        self.ingest_in(snapshot, request).await.map(|_| ())
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
        let client: &MemoryClient<_> = self;
        client
            .write_direct(
                snapshot,
                destination,
                operator,
                content,
                source_description,
                reference_time,
                replay_key,
                session,
                subject,
                instructions,
            )
            .await
    }

    async fn authorize_capture(
        &self,
        operator: &OperatorId,
        graphs: &[GraphId],
        subject: Option<&Subject>,
    ) -> Result<()> {
        let client: &MemoryClient<_> = self;
        client.authorize_capture(operator, graphs, subject).await
    }

    async fn purge_session(&self, request: &PurgeSession) -> Result<SessionPurgeReport> {
        Client::purge_session(self, request).await
    }
}
