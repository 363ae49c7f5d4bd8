//! The capture buffer: an agent's turns, accepted durably, written on flush.
//!
//! * **Binding.** A session is bound on its first append to an operator, the agent's
//!   and the human's names and the subject; an append with another binding is an
//!   error naming the field, and nothing is buffered. Each turn names its route —
//!   direct to a Destination ([`CaptureRoute::Direct`]) or through one or more Lenses
//!   ([`CaptureRoute::Lenses`]) — and its extraction instructions
//!   ([`Capture::custom_instructions`], default [`CaptureConfig::custom_instructions`]):
//!   turns are **buffered per route**, so a turn naming another route than the open
//!   entry's (jido's per-turn Lens) closes that entry and opens one of its own; append
//!   order is kept. The binding holds while the session has
//!   turns buffered or being written (as the seed's buffered entry does); once they
//!   are all written the buffer forgets the session, so it keeps nothing per
//!   finished session.
//! * **Acceptance.** [`CaptureBuffer::append`] validates (non-blank session and names,
//!   a route that resolves in the runtime's current snapshot: registered, appending
//!   Lenses), drops recalled memory from the turn ([`MemoryFilter`](crate::agent::transcript::MemoryFilter)), refuses a turn
//!   that could never be written (a NUL character in a message, `turn.messages[i].content`;
//!   or lines that alone exceed one episode's content limit,
//!   1 MiB as rendered, `turn`),
//!   skips an empty turn, and saves the turn in the `CaptureStore` before it
//!   returns. What it accepted is never dropped for its size or content. Each route's
//!   Destination or Lens definition is taken from the snapshot when the session's
//!   entry is opened and frozen with it: a later runtime replacement does not change
//!   where buffered turns go. A turn routed to several Lenses is stored once and
//!   written once per Lens. Each route of an entry gets its ingestion id
//!   (`capture-<random uuid>`) when it is buffered, reused by every retry (and after
//!   a restart), so a retry after a write that landed stores nothing twice.
//! * **No idle flush.** [`flush`](CaptureBuffer::flush) schedules the session's turns
//!   and returns before they are written; [`flush_and_await`](CaptureBuffer::flush_and_await)
//!   waits up to a timeout (on timeout the turns are put back, to be flushed again);
//!   [`flush_all`](CaptureBuffer::flush_all) writes every session and waits for the
//!   scheduled flushes; [`shutdown`](CaptureBuffer::shutdown) stops accepting and
//!   drains within a timeout. One `client.shutdown()` does that for every buffer
//!   over the client, before the storage stops (the buffer registers itself through
//!   [`MemoryClient::drain_on_shutdown`](crate::client::MemoryClient::drain_on_shutdown)).
//! * **Writes.** Per route, the transcript
//!   ([`format_transcript`](super::transcript::format_transcript)) is written as a
//!   conversation: direct, with the source description `captured` (stored as
//!   `captured [gralkor: direct]`), or through the Lens's ingestion process
//!   (`captured [lens: <name>]`). A transcript longer than the content limit is
//!   written in parts, split between turns, each part as large as fits and written
//!   in order as an episode of its own under its own id: the route's ingestion id for
//!   the first, `<id>.1`, `<id>.2`, … for the next; the same turns always give the same
//!   parts, so a replay after a partial flush stores nothing twice. Routes fail
//!   independently; the first failure is reported.
//! * **Retries are the buffer's.** A contract error (invalid input, configuration,
//!   not found, replay conflict, budget too small) is not retried and not dropped: the
//!   route stays buffered, in memory and in the store, the flush reports the error
//!   (logged as `capture kept (contract error)`) and the next flush of the session —
//!   or the next buffer over the store — tries again; [`purge_session`](CaptureBuffer::purge_session)
//!   drops it. A provider 4xx or a quarantined episode (stored,
//!   never extracted again) is dropped with a warning; an
//!   upstream model failure (the provider client has already retried 429s and 5xx)
//!   is dropped with a warning and not retried again; anything else (connection,
//!   timeout, a panicking ingestion process, …) is retried after each of
//!   `DEFAULT_RETRY_DELAYS` (1 s, 2 s, 4 s; configurable), then dropped with an
//!   error log `capture exhausted`. A closed client leaves the turns in the store for
//!   the next buffer.
//! * **Durable.** A buffer made with [`CaptureBuffer::native`] keeps its entries in
//!   the memory's own FalkorDB server (`FalkorCaptureStore`) and, when created,
//!   loads every entry a previous process left (killed or not): they are flushed
//!   like any other (their routes resolved by name in the runtime at that moment;
//!   their ingestion ids kept), so each accepted turn is written exactly once.
//!
//! Nothing is logged per turn; flushes log counts at info, and the transcript only
//! at debug.
//!
//! ```
//! # #[tokio::main(flavor = "current_thread")] async fn main() -> gralkor::Result<()> {
//! use std::time::Duration;
//! use gralkor::agent::capture::{Capture, CaptureBuffer, CaptureConfig};
//! use gralkor::agent::turn::Turn;
//! use gralkor::client::{Client, InMemoryClient, OperatorId, Search};
//!
//! let client = InMemoryClient::new();
//! let buffer = CaptureBuffer::in_memory(&client, CaptureConfig::new()).await?;
//! let op = OperatorId::new("op")?;
//! let turn = Turn::completed("I moved to Lisbon.", Vec::<String>::new(), "Welcome!");
//! buffer.append(Capture::new("session-1", &op, "Susu", "Ada", turn).lenses(["personal-chat"])).await?;
//! assert_eq!(buffer.pending("session-1").await.len(), 1);
//! buffer.flush_and_await("session-1", Duration::from_secs(5)).await?;
//! let found = client.search(&Search::new(&op, "Lisbon")).await?;
//! assert_eq!(found[0].hit.as_episode().unwrap().content, "Ada: I moved to Lisbon.\nSusu: Welcome!");
//! # Ok(()) }
//! ```

mod deliver;
mod request;
mod route;
mod store;

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, AtomicI64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio::task::JoinSet;
use tracing::Instrument;
use uuid::Uuid;

#[doc(inline)]
pub use crate::client::CaptureSink;
pub(crate) use request::CAPTURED;
pub use request::{Capture, CaptureConfig, CaptureRoute};
internal_use!(store::{
    Binding, CaptureStore, FalkorCaptureStore, InMemoryCaptureStore, PendingEntry, PendingRoute,
    RouteTarget,
});

use deliver::deliver;
use route::{check_binding, check_session, resolve};

use super::transcript::{check_name, check_turn};
use super::turn::Turn;
use crate::client::{Client, InMemoryClient, NativeClient, PurgeSession, SessionPurgeReport};
use crate::graph::Timestamp;
use crate::runtime::Snapshot;
use crate::{Error, Result};

/// The graph a route target writes to for `operator`, as `snapshot` defines it.
fn target_graph(
    snapshot: &Snapshot,
    operator: &crate::storage::OperatorId,
    target: &RouteTarget,
) -> Result<crate::storage::GraphId> {
    match target {
        RouteTarget::Direct(d) => snapshot.destination("route.direct", d)?.graph_id(operator),
        RouteTarget::Lens(l) => {
            crate::client::lens_graph(snapshot, snapshot.lens("route.lenses", l)?, operator)
        }
    }
}

/// An entry in memory: the durable part and the snapshot its routes were resolved in.
#[derive(Debug, Clone)]
struct Entry {
    pending: PendingEntry,
    frozen: Arc<Snapshot>,
}

#[derive(Debug)]
struct Session {
    binding: Binding,
    /// Entries closed to appends (put back after a timeout, or found on start).
    queued: Vec<Entry>,
    /// The entry appends go to.
    open: Option<Entry>,
    /// Flushes of this session still writing.
    in_flight: usize,
}

impl Session {
    fn new(binding: Binding) -> Session {
        Session {
            binding,
            queued: Vec::new(),
            open: None,
            in_flight: 0,
        }
    }

    /// Every entry, for a flush (counted in flight until it is released).
    fn take(&mut self) -> Vec<Entry> {
        let mut all = std::mem::take(&mut self.queued);
        all.extend(self.open.take());
        if !all.is_empty() {
            self.in_flight += 1;
        }
        all
    }
}

struct Inner {
    sink: Arc<dyn CaptureSink>,
    store: Arc<dyn CaptureStore>,
    config: CaptureConfig,
    sessions: tokio::sync::Mutex<HashMap<String, Session>>,
    workers: Mutex<JoinSet<()>>,
    closed: AtomicBool,
    last_seq: AtomicI64,
}

/// The capture buffer (see the [module](self) documentation). Cheap to clone; clones
/// share the buffer.
#[derive(Clone)]
pub struct CaptureBuffer {
    inner: Arc<Inner>,
}

impl std::fmt::Debug for CaptureBuffer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("CaptureBuffer")
            .field("store", &self.inner.store)
            .field("closed", &self.inner.closed.load(Ordering::Relaxed))
            .finish_non_exhaustive()
    }
}

impl CaptureBuffer {
    internal_item!(
        /// A buffer writing through `sink` and keeping entries in `store`; loads every
        /// entry the store holds (left by an earlier buffer), resolving its routes in
        /// the runtime's current snapshot.
        ///
        /// ```
        /// # #[tokio::main(flavor = "current_thread")] async fn main() -> gralkor::Result<()> {
        /// use std::sync::Arc;
        /// use gralkor::agent::capture::{CaptureBuffer, CaptureConfig, InMemoryCaptureStore};
        /// use gralkor::client::InMemoryClient;
        ///
        /// let store = Arc::new(InMemoryCaptureStore::new());
        /// let buffer = CaptureBuffer::new(Arc::new(InMemoryClient::new()), store, CaptureConfig::new()).await?;
        /// assert!(buffer.sessions().await.is_empty());
        /// # Ok(()) }
        /// ```
        pub async fn new(
            sink: Arc<dyn CaptureSink>,
            store: Arc<dyn CaptureStore>,
            config: CaptureConfig,
        ) -> Result<CaptureBuffer> {
            crate::lens::check_instructions(
                "custom_instructions",
                config.custom_instructions.as_deref(),
            )?;
            if config.shutdown_timeout.is_zero() {
                return Err(Error::invalid(
                    "shutdown_timeout",
                    "must be positive (the bound on the drain at the client's shutdown)",
                ));
            }
            let found = store
                .load()
                .instrument(tracing::info_span!("gralkor.capture.load"))
                .await?;
            let snapshot = sink.runtime().snapshot();
            let mut sessions: HashMap<String, Session> = HashMap::new();
            let mut last = 0;
            let count = found.len();
            for pending in found {
                last = last.max(pending.seq);
                let entry = Entry {
                    pending,
                    frozen: snapshot.clone(),
                };
                let id = entry.pending.session_id.clone();
                match sessions.get_mut(&id) {
                    Some(s) => s.queued.push(entry),
                    None => {
                        let mut s = Session::new(entry.pending.binding.clone());
                        s.queued.push(entry);
                        sessions.insert(id, s);
                    }
                }
            }
            if count > 0 {
                tracing::info!(
                    entries = count,
                    sessions = sessions.len(),
                    "[gralkor] capture buffer found pending turns"
                );
            }
            let inner = Arc::new(Inner {
                sink,
                store,
                config,
                sessions: tokio::sync::Mutex::new(sessions),
                workers: Mutex::new(JoinSet::new()),
                closed: AtomicBool::new(false),
                last_seq: AtomicI64::new(last),
            });
            // One `client.shutdown()` drains this buffer first; the client holds only a
            // weak reference, so dropping the buffer is not delayed by it.
            inner.sink.drain_on_shutdown(Arc::new(BufferDrain {
                inner: Arc::downgrade(&inner),
            }));
            Ok(CaptureBuffer { inner })
        }
    );

    /// A buffer over any client, held as `Arc<dyn Client>`: it writes through the
    /// client's [capture sink](crate::client::Client::capture_sink) and keeps accepted
    /// turns where the sink says — in the graph `gralkor/capture-buffer` of a native
    /// client's FalkorDB server (those a previous process left are loaded), in memory
    /// for the twin. A client without a capture sink is a configuration error.
    ///
    /// ```
    /// # #[tokio::main(flavor = "current_thread")] async fn main() -> gralkor::Result<()> {
    /// use std::sync::Arc;
    /// use gralkor::agent::capture::{Capture, CaptureBuffer, CaptureConfig};
    /// use gralkor::agent::turn::Turn;
    /// use gralkor::client::{Client, InMemoryClient, OperatorId, Search};
    ///
    /// let client: Arc<dyn Client> = Arc::new(InMemoryClient::new());
    /// let buffer = CaptureBuffer::for_client(&*client, CaptureConfig::new()).await?;
    /// let op = OperatorId::new("op")?;
    /// let turn = Turn::completed("We ship on Fridays.", Vec::<String>::new(), "Noted.");
    /// buffer.append(Capture::new("s-1", &op, "Susu", "Ada", turn)).await?;
    /// buffer.flush_all().await?;
    /// assert_eq!(client.search(&Search::new(&op, "Fridays")).await?.len(), 1);
    /// # Ok(()) }
    /// ```
    pub async fn for_client(client: &dyn Client, config: CaptureConfig) -> Result<CaptureBuffer> {
        let sink = client.capture_sink().ok_or_else(|| Error::Config {
            field: "client".into(),
            rule: "takes no captured turns (it has no capture sink)".into(),
        })?;
        let store: Arc<dyn CaptureStore> = match sink.capture_server() {
            Some(db) => Arc::new(FalkorCaptureStore::new(db)),
            None => Arc::new(InMemoryCaptureStore::new()),
        };
        CaptureBuffer::new(sink, store, config).await
    }

    /// A durable buffer over a native client: entries live in the graph `gralkor/capture-buffer` of
    /// the client's FalkorDB server, and those a previous process left are loaded
    /// ([`for_client`](Self::for_client) with a native client).
    ///
    /// ```no_run
    /// # async fn run() -> gralkor::Result<()> {
    /// use gralkor::agent::capture::{CaptureBuffer, CaptureConfig};
    /// use gralkor::{Config, NativeClient};
    /// use gralkor::runtime::RuntimeConfig;
    ///
    /// let client = NativeClient::connect(Config::from_env()?, RuntimeConfig::new()).await?;
    /// let buffer = CaptureBuffer::native(&client, CaptureConfig::new()).await?;
    /// buffer.flush_all().await?; // what a crashed process had accepted
    /// # Ok(()) }
    /// ```
    pub async fn native(client: &NativeClient, config: CaptureConfig) -> Result<CaptureBuffer> {
        CaptureBuffer::for_client(client, config).await
    }

    /// A buffer over the in-memory twin, with an `InMemoryCaptureStore`
    /// ([`for_client`](Self::for_client) with the twin).
    pub async fn in_memory(
        client: &InMemoryClient,
        config: CaptureConfig,
    ) -> Result<CaptureBuffer> {
        CaptureBuffer::for_client(client, config).await
    }

    fn next_seq(&self) -> i64 {
        let now = Timestamp::now().0;
        let mut prev = self.inner.last_seq.load(Ordering::Relaxed);
        loop {
            let next = now.max(prev + 1);
            match self.inner.last_seq.compare_exchange(
                prev,
                next,
                Ordering::AcqRel,
                Ordering::Relaxed,
            ) {
                Ok(_) => return next,
                Err(p) => prev = p,
            }
        }
    }

    /// Accepts one turn (see the [module](self) documentation): validated, recalled
    /// memory dropped, an empty turn skipped, saved durably before this returns.
    ///
    /// ```
    /// # #[tokio::main(flavor = "current_thread")] async fn main() -> gralkor::Result<()> {
    /// use gralkor::agent::capture::{Capture, CaptureBuffer, CaptureConfig};
    /// use gralkor::agent::turn::Turn;
    /// use gralkor::client::{InMemoryClient, OperatorId};
    ///
    /// let buffer = CaptureBuffer::in_memory(&InMemoryClient::new(), CaptureConfig::new()).await?;
    /// let op = OperatorId::new("op")?;
    /// let turn = || Turn::completed("hello there", Vec::<String>::new(), "hi");
    /// buffer.append(Capture::new("s", &op, "Susu", "Ada", turn())).await?;
    /// let err = buffer.append(Capture::new("s", &op, "Susu", "Bea", turn())).await.unwrap_err();
    /// assert!(err.to_string().contains("`human_name`"));
    /// let err = buffer.append(Capture::new("t", &op, "Susu", " ", turn())).await.unwrap_err();
    /// assert!(err.to_string().contains("`human_name`"));
    /// // What could never be written is refused now, not dropped at the flush.
    /// let nul = Turn::completed("a\0b", Vec::<String>::new(), "hi");
    /// let err = buffer.append(Capture::new("s", &op, "Susu", "Ada", nul)).await.unwrap_err();
    /// assert!(err.to_string().contains("`turn.messages[0].content`"));
    /// assert_eq!(buffer.pending("s").await.len(), 1);
    /// # Ok(()) }
    /// ```
    pub async fn append(&self, capture: Capture) -> Result<()> {
        if self.inner.closed.load(Ordering::Acquire) {
            return Err(Error::Closed {
                what: "this capture buffer".into(),
            });
        }
        check_session(&capture.session_id)?;
        check_name("agent_name", &capture.agent_name)?;
        check_name("human_name", &capture.human_name)?;
        let snapshot = self.inner.sink.runtime().snapshot();
        let targets = resolve(&snapshot, &capture.operator_id, &capture.route)?;
        let turn = self.inner.config.filter.scrub(&capture.turn);
        // What could never be written is refused now, not dropped at the flush.
        check_turn("turn", &turn, &capture.agent_name, &capture.human_name)?;
        let binding = Binding {
            operator_id: capture.operator_id,
            agent_name: capture.agent_name,
            human_name: capture.human_name,
            route: capture.route,
            subject: capture.subject,
            custom_instructions: capture
                .custom_instructions
                .or_else(|| self.inner.config.custom_instructions.clone()),
        };
        crate::lens::check_instructions(
            "custom_instructions",
            binding.custom_instructions.as_deref(),
        )?;
        // A re-binding is refused before the authorizer is asked (and again below,
        // under the same lock as the append). A session already bound was authorized
        // for the route it was bound with; every write checks `contribute` again, so
        // only a new binding, or a turn naming another route, pays for the round trip.
        let authorized = match self.inner.sessions.lock().await.get(&capture.session_id) {
            Some(s) => {
                check_binding(&capture.session_id, &s.binding, &binding)?;
                s.binding.route == binding.route
            }
            None => false,
        };
        if !authorized {
            let mut graphs = Vec::with_capacity(targets.len());
            for target in &targets {
                graphs.push(target_graph(&snapshot, &binding.operator_id, target)?);
            }
            self.inner
                .sink
                .authorize_capture(&binding.operator_id, &graphs, binding.subject.as_ref())
                .await?;
        }
        let mut sessions = self.inner.sessions.lock().await;
        if let Some(s) = sessions.get(&capture.session_id) {
            check_binding(&capture.session_id, &s.binding, &binding)?;
        }
        if turn.is_empty() {
            return Ok(());
        }
        let session = sessions
            .entry(capture.session_id.clone())
            .or_insert_with(|| Session::new(binding.clone()));
        // Buffered per route: a turn naming another route (or other instructions) than
        // the open entry's closes it, and opens an entry of its own.
        let displaced = match &session.open {
            Some(open) if !open.pending.binding.same_writes(&binding) => session.open.take(),
            _ => None,
        };
        let fresh = session.open.is_none();
        let entry = session.open.get_or_insert_with(|| Entry {
            pending: PendingEntry {
                id: Uuid::new_v4().to_string(),
                session_id: capture.session_id.clone(),
                seq: self.next_seq(),
                accepted_at: Timestamp::now().0,
                binding,
                routes: targets
                    .into_iter()
                    .map(|target| PendingRoute {
                        target,
                        ingestion_id: format!("capture-{}", Uuid::new_v4()),
                    })
                    .collect(),
                turns: Vec::new(),
            },
            frozen: snapshot,
        });
        entry.pending.turns.push(turn);
        let saved = self
            .inner
            .store
            .append_turn(&entry.pending)
            .instrument(tracing::debug_span!("gralkor.capture.save"))
            .await;
        if let Err(e) = saved {
            // Not accepted: undo, leaving the session as it was.
            entry.pending.turns.pop();
            if fresh {
                session.open = displaced;
                if session.open.is_none() && session.queued.is_empty() && session.in_flight == 0 {
                    sessions.remove(&capture.session_id);
                }
            }
            return Err(e);
        }
        // The entry it displaced is written before it, as it was accepted before it.
        if let Some(closed) = displaced {
            session.queued.push(closed);
        }
        Ok(())
    }

    /// The session's buffered turns, in append order (empty after a flush took them).
    pub async fn pending(&self, session_id: &str) -> Vec<Turn> {
        let sessions = self.inner.sessions.lock().await;
        sessions
            .get(session_id)
            .map(|s| {
                s.queued
                    .iter()
                    .chain(s.open.iter())
                    .flat_map(|e| e.pending.turns.iter().cloned())
                    .collect()
            })
            .unwrap_or_default()
    }

    /// What the buffer holds now: the sessions with buffered turns or flushes still
    /// writing, the turns buffered, and the flushes writing. One lock, no I/O: cheap
    /// to poll (the client's [`status`](crate::client::Client::status) reports
    /// it).
    ///
    /// ```
    /// # #[tokio::main(flavor = "current_thread")] async fn main() -> gralkor::Result<()> {
    /// use gralkor::agent::capture::{Capture, CaptureBuffer, CaptureConfig};
    /// use gralkor::agent::turn::Turn;
    /// use gralkor::client::{InMemoryClient, OperatorId};
    ///
    /// let buffer = CaptureBuffer::in_memory(&InMemoryClient::new(), CaptureConfig::new()).await?;
    /// let op = OperatorId::new("ada")?;
    /// let turn = Turn::completed("I moved to Lisbon.", Vec::<String>::new(), "Noted.");
    /// buffer.append(Capture::new("s-1", &op, "Susu", "Ada", turn)).await?;
    /// let held = buffer.held().await;
    /// assert_eq!((held.sessions, held.items, held.in_flight), (1, 1, 0));
    /// # Ok(()) }
    /// ```
    pub async fn held(&self) -> crate::client::Held {
        let sessions = self.inner.sessions.lock().await;
        let mut held = crate::client::Held::default();
        for s in sessions.values() {
            let turns: usize = s
                .queued
                .iter()
                .chain(s.open.iter())
                .map(|e| e.pending.turns.len())
                .sum();
            if turns > 0 || s.in_flight > 0 {
                held = held + crate::client::Held::new(1, turns, s.in_flight);
            }
        }
        held
    }

    /// The sessions with buffered turns.
    pub async fn sessions(&self) -> Vec<String> {
        let sessions = self.inner.sessions.lock().await;
        let mut out: Vec<String> = sessions
            .iter()
            .filter(|(_, s)| !s.queued.is_empty() || s.open.is_some())
            .map(|(id, _)| id.clone())
            .collect();
        out.sort();
        out
    }

    async fn take(&self, session_id: &str) -> Vec<Entry> {
        let mut sessions = self.inner.sessions.lock().await;
        sessions
            .get_mut(session_id)
            .map(Session::take)
            .unwrap_or_default()
    }

    /// Schedules the session's buffered turns to be written and returns before they
    /// are; failures are logged (and retried as the [module](self) says). A session
    /// with nothing buffered schedules nothing.
    ///
    /// ```
    /// # #[tokio::main(flavor = "current_thread")] async fn main() -> gralkor::Result<()> {
    /// use gralkor::agent::capture::{CaptureBuffer, CaptureConfig};
    /// use gralkor::client::InMemoryClient;
    ///
    /// let buffer = CaptureBuffer::in_memory(&InMemoryClient::new(), CaptureConfig::new()).await?;
    /// buffer.flush("nobody").await?; // nothing buffered: nothing scheduled
    /// assert!(buffer.flush(" ").await.is_err());
    /// # Ok(()) }
    /// ```
    pub async fn flush(&self, session_id: &str) -> Result<()> {
        check_session(session_id)?;
        let entries = self.take(session_id).await;
        if entries.is_empty() {
            tracing::info!(session = session_id, "[gralkor] flush — session empty");
            return Ok(());
        }
        tracing::info!(
            session = session_id,
            turns = turns(&entries),
            "[gralkor] flush scheduled"
        );
        let inner = self.inner.clone();
        let span = tracing::info_span!("gralkor.capture.flush", session = session_id);
        let session = session_id.to_string();
        let task = async move {
            let left = Arc::new(Mutex::new(entries));
            let _ = deliver(&inner, &left).await;
            release(&inner, &session, take_left(&left)).await;
        }
        .instrument(span);
        let mut workers = self.inner.workers.lock().unwrap_or_else(|p| p.into_inner());
        while workers.try_join_next().is_some() {}
        workers.spawn(task);
        Ok(())
    }

    /// Writes the session's buffered turns and waits, retrying within `timeout`.
    /// Returns the first route's failure (the turns are consumed, except by a route
    /// that met a contract error: it stays buffered for the next flush), or on timeout an
    /// [`Error::Timeout`] with the turns not yet written put back, to be flushed
    /// again. A session with nothing buffered succeeds at once.
    ///
    /// ```
    /// # #[tokio::main(flavor = "current_thread")] async fn main() -> gralkor::Result<()> {
    /// use std::time::Duration;
    /// use gralkor::agent::capture::{CaptureBuffer, CaptureConfig};
    /// use gralkor::client::InMemoryClient;
    ///
    /// let buffer = CaptureBuffer::in_memory(&InMemoryClient::new(), CaptureConfig::new()).await?;
    /// buffer.flush_and_await("nobody", Duration::from_secs(1)).await?;
    /// let err = buffer.flush_and_await("nobody", Duration::ZERO).await.unwrap_err();
    /// assert!(err.to_string().contains("`timeout`"));
    /// # Ok(()) }
    /// ```
    pub async fn flush_and_await(&self, session_id: &str, timeout: Duration) -> Result<()> {
        check_session(session_id)?;
        if timeout.is_zero() {
            return Err(Error::invalid("timeout", "must be positive"));
        }
        let entries = self.take(session_id).await;
        if entries.is_empty() {
            tracing::info!(session = session_id, "[gralkor] flush — session empty");
            return Ok(());
        }
        tracing::info!(
            session = session_id,
            turns = turns(&entries),
            timeout_ms = timeout.as_millis() as u64,
            "[gralkor] flush_and_await"
        );
        let left = Arc::new(Mutex::new(entries));
        let span = tracing::info_span!("gralkor.capture.flush_and_await", session = session_id);
        match tokio::time::timeout(timeout, deliver(&self.inner, &left).instrument(span)).await {
            Ok(outcome) => {
                release(&self.inner, session_id, take_left(&left)).await;
                match &outcome {
                    Ok(()) => tracing::info!(
                        session = session_id,
                        "[gralkor] flush_and_await done — outcome:ok"
                    ),
                    Err(e) => tracing::warn!(
                        session = session_id,
                        error = %e,
                        "[gralkor] flush_and_await done — outcome:error"
                    ),
                }
                outcome
            }
            Err(_) => {
                release(&self.inner, session_id, take_left(&left)).await;
                tracing::warn!(session = session_id, "[gralkor] flush_and_await timeout");
                Err(Error::Timeout {
                    operation: format!("flush_and_await of session `{session_id}`"),
                    after: timeout,
                })
            }
        }
    }

    /// Writes every session's buffered turns (sessions independently, each with the
    /// retries) and waits for them and for every scheduled flush. Failures are logged;
    /// the call succeeds once everything has been attempted.
    ///
    /// ```
    /// # #[tokio::main(flavor = "current_thread")] async fn main() -> gralkor::Result<()> {
    /// use gralkor::agent::capture::{CaptureBuffer, CaptureConfig};
    /// use gralkor::client::InMemoryClient;
    ///
    /// let buffer = CaptureBuffer::in_memory(&InMemoryClient::new(), CaptureConfig::new()).await?;
    /// buffer.flush_all().await?; // nothing buffered: returns at once
    /// # Ok(()) }
    /// ```
    pub async fn flush_all(&self) -> Result<()> {
        let all: Vec<Entry> = {
            let mut sessions = self.inner.sessions.lock().await;
            sessions.values_mut().flat_map(Session::take).collect()
        };
        if !all.is_empty() {
            tracing::info!(turns = turns(&all), "[gralkor] flush_all");
            let mut by_session: HashMap<String, Vec<Entry>> = HashMap::new();
            for e in all {
                by_session
                    .entry(e.pending.session_id.clone())
                    .or_default()
                    .push(e);
            }
            let mut set = JoinSet::new();
            for (session, entries) in by_session {
                let inner = self.inner.clone();
                let span = tracing::info_span!("gralkor.capture.flush", session = %session);
                set.spawn(
                    async move {
                        let left = Arc::new(Mutex::new(entries));
                        let _ = deliver(&inner, &left).await;
                        release(&inner, &session, take_left(&left)).await;
                    }
                    .instrument(span),
                );
            }
            while let Some(joined) = set.join_next().await {
                if let Err(e) = joined {
                    tracing::error!(error = %Error::task("a capture flush", e), "a capture flush did not finish");
                }
            }
        }
        self.await_flushes().await;
        Ok(())
    }

    /// Forgets a session entirely: its buffered turns are dropped (from memory and
    /// from the durable store) without being written, flushes already writing are
    /// awaited, and then everything written for it is purged
    /// ([`MemoryClient::purge_session`](crate::client::Client::purge_session),
    /// with its permission rules). Call it after any
    /// [`flush_and_await`](Self::flush_and_await) of the session has returned.
    ///
    /// ```
    /// # #[tokio::main(flavor = "current_thread")] async fn main() -> gralkor::Result<()> {
    /// use std::time::Duration;
    /// use gralkor::agent::capture::{Capture, CaptureBuffer, CaptureConfig};
    /// use gralkor::agent::turn::Turn;
    /// use gralkor::client::{Client, InMemoryClient, OperatorId, PurgeSession, Search};
    ///
    /// let client = InMemoryClient::new();
    /// let buffer = CaptureBuffer::in_memory(&client, CaptureConfig::new()).await?;
    /// let ada = OperatorId::new("ada")?;
    /// let turn = |q: &str| Turn::completed(q, Vec::<String>::new(), "noted");
    /// buffer.append(Capture::new("s-1", &ada, "Susu", "Ada", turn("I like tea"))).await?;
    /// buffer.flush_and_await("s-1", Duration::from_secs(5)).await?;
    /// buffer.append(Capture::new("s-1", &ada, "Susu", "Ada", turn("I like jazz"))).await?;
    ///
    /// let report = buffer.purge_session(&PurgeSession::new(&ada, "s-1")).await?;
    /// assert_eq!((report.episodes.len(), report.buffered_turns_dropped), (1, 1));
    /// assert!(buffer.pending("s-1").await.is_empty());
    /// assert!(client.search(&Search::new(&ada, "tea")).await?.is_empty());
    /// # Ok(()) }
    /// ```
    pub async fn purge_session(&self, request: &PurgeSession) -> Result<SessionPurgeReport> {
        check_session(&request.session_id)?;
        let span =
            tracing::info_span!("gralkor.capture.purge_session", session = %request.session_id);
        async {
            let mut dropped = self.discard(&request.session_id).await?;
            self.await_flushes().await;
            // A flush that failed while we waited put its entries back.
            dropped += self.discard(&request.session_id).await?;
            let mut report = self.inner.sink.purge_session(request).await?;
            report.buffered_turns_dropped = dropped;
            Ok(report)
        }
        .instrument(span)
        .await
    }

    /// Drops the session's buffered entries (not those being written) from memory
    /// and from the store; returns how many turns they held.
    async fn discard(&self, session_id: &str) -> Result<usize> {
        let entries = {
            let mut sessions = self.inner.sessions.lock().await;
            let Some(s) = sessions.get_mut(session_id) else {
                return Ok(0);
            };
            let mut all = std::mem::take(&mut s.queued);
            all.extend(s.open.take());
            if s.in_flight == 0 {
                sessions.remove(session_id);
            }
            all
        };
        for e in &entries {
            self.inner.store.remove(&e.pending.id).await?;
        }
        Ok(turns(&entries))
    }

    /// Waits for every flush scheduled by [`flush`](Self::flush) so far.
    pub async fn await_flushes(&self) {
        loop {
            let mut set =
                std::mem::take(&mut *self.inner.workers.lock().unwrap_or_else(|p| p.into_inner()));
            if set.is_empty() {
                return;
            }
            while let Some(joined) = set.join_next().await {
                if let Err(e) = joined {
                    tracing::error!(error = %Error::task("a capture flush", e), "a capture flush did not finish");
                }
            }
        }
    }

    /// Stops accepting turns ([`append`](Self::append) then fails with
    /// [`Error::Closed`]) and drains: [`flush_all`](Self::flush_all) within
    /// `timeout`. On timeout the flushes still running are stopped and an
    /// [`Error::Timeout`] returned; what they had not written stays in the durable
    /// store for the next buffer. The client's own
    /// [`shutdown`](crate::Client::shutdown) runs this for every live buffer over it,
    /// bounded by [`CaptureConfig::shutdown_timeout`], before its storage stops: call
    /// it yourself only for another bound or to stop capturing earlier.
    ///
    /// ```
    /// # #[tokio::main(flavor = "current_thread")] async fn main() -> gralkor::Result<()> {
    /// use std::time::Duration;
    /// use gralkor::agent::capture::{Capture, CaptureBuffer, CaptureConfig};
    /// use gralkor::agent::turn::Turn;
    /// use gralkor::client::{InMemoryClient, OperatorId};
    ///
    /// let buffer = CaptureBuffer::in_memory(&InMemoryClient::new(), CaptureConfig::new()).await?;
    /// buffer.shutdown(Duration::from_secs(30)).await?;
    /// let turn = Turn::completed("hello there", Vec::<String>::new(), "hi");
    /// let late = buffer.append(Capture::new("s", OperatorId::new("op")?, "Susu", "Ada", turn)).await;
    /// assert!(matches!(late, Err(gralkor::Error::Closed { .. })));
    /// # Ok(()) }
    /// ```
    pub async fn shutdown(&self, timeout: Duration) -> Result<()> {
        self.inner.closed.store(true, Ordering::Release);
        match tokio::time::timeout(timeout, self.flush_all()).await {
            Ok(outcome) => outcome,
            Err(_) => {
                self.inner
                    .workers
                    .lock()
                    .unwrap_or_else(|p| p.into_inner())
                    .abort_all();
                tracing::warn!(
                    after_ms = timeout.as_millis() as u64,
                    "[gralkor] capture drain timed out; unwritten turns stay pending"
                );
                Err(Error::Timeout {
                    operation: "the capture buffer's drain".into(),
                    after: timeout,
                })
            }
        }
    }
}

/// The buffer as the client's shutdown sees it (see [`crate::client::Drain`]).
struct BufferDrain {
    inner: std::sync::Weak<Inner>,
}

#[async_trait::async_trait]
impl crate::client::Drain for BufferDrain {
    fn is_live(&self) -> bool {
        self.inner.strong_count() > 0
    }

    async fn drain(&self) -> Result<()> {
        let Some(inner) = self.inner.upgrade() else {
            return Ok(());
        };
        let timeout = inner.config.shutdown_timeout;
        CaptureBuffer { inner }.shutdown(timeout).await
    }

    async fn held(&self) -> Option<crate::client::Held> {
        let inner = self.inner.upgrade()?;
        Some(CaptureBuffer { inner }.held().await)
    }
}

/// A flush of the session is over: what it did not write goes back in front, and a
/// session with nothing buffered and nothing in flight is forgotten (its binding
/// with it, so a long-lived buffer keeps nothing per finished session).
async fn release(inner: &Arc<Inner>, session_id: &str, mut back: Vec<Entry>) {
    let mut sessions = inner.sessions.lock().await;
    let Some(s) = sessions.get_mut(session_id) else {
        return;
    };
    s.in_flight = s.in_flight.saturating_sub(1);
    back.append(&mut s.queued);
    s.queued = back;
    if s.queued.is_empty() && s.open.is_none() && s.in_flight == 0 {
        sessions.remove(session_id);
    }
}

/// What a flush left unwritten, to put back.
fn take_left(left: &Mutex<Vec<Entry>>) -> Vec<Entry> {
    std::mem::take(&mut *left.lock().unwrap_or_else(|p| p.into_inner()))
}

fn turns(entries: &[Entry]) -> usize {
    entries.iter().map(|e| e.pending.turns.len()).sum()
}
