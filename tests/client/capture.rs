//! The capture buffer (test-trees/capture-buffer.md), each behaviour on both clients:
//! the twin with the in-memory capture store, and the native client (offline engine on
//! the shared embedded FalkorDB) with the FalkorDB capture store in a graph of its own.
//! Faults come from a scripted Lens ingestion process; retry delays are a millisecond.

use crate::common;

use std::collections::VecDeque;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use common::ingest::CountingEmbedder;
use gralkor::NativeStorage;
use gralkor::agent::capture::{
    Capture, CaptureBuffer, CaptureConfig, CaptureSink, CaptureStore, FalkorCaptureStore,
    InMemoryCaptureStore,
};
use gralkor::agent::transcript::MemoryFilter;
use gralkor::agent::turn::{Message, Turn};
use gralkor::client::{
    Client, EpisodeRecord, InMemoryClient, Ingest, NativeClient, OperatorId, Search,
};
use gralkor::graph::Engine;
use gralkor::lens::{Ingestion, Lens, LensStore};
use gralkor::provenance::Writer;
use gralkor::runtime::{Runtime, RuntimeConfig};
use gralkor::{Error, Result};
use tokio::sync::Semaphore;

#[derive(Debug, Clone, Copy)]
pub enum Kind {
    Twin,
    Native,
}

/// What a scripted attempt does before (or instead of) writing.
#[derive(Debug)]
pub enum Step {
    Fail(fn() -> Error),
    WriteThenFail(fn() -> Error),
    Panic,
}

#[derive(Debug, Default)]
struct ScriptState {
    steps: Mutex<VecDeque<Step>>,
    ids: Mutex<Vec<String>>,
    started: AtomicUsize,
}

/// An ingestion process that follows a script, then writes straight through; it can
/// be held at a gate (each attempt takes one permit).
#[derive(Debug, Clone, Default)]
pub struct Scripted {
    state: Arc<ScriptState>,
    gate: Option<Arc<Semaphore>>,
}

impl Scripted {
    fn new(steps: impl IntoIterator<Item = Step>) -> Scripted {
        let s = Scripted::default();
        s.state.steps.lock().unwrap().extend(steps);
        s
    }
    fn gated(mut self) -> (Scripted, Arc<Semaphore>) {
        let gate = Arc::new(Semaphore::new(0));
        self.gate = Some(gate.clone());
        (self, gate)
    }
    fn attempts(&self) -> usize {
        self.state.ids.lock().unwrap().len()
    }
    fn ids(&self) -> Vec<String> {
        self.state.ids.lock().unwrap().clone()
    }
    fn started(&self) -> usize {
        self.state.started.load(Ordering::SeqCst)
    }
}

impl Ingestion for Scripted {
    async fn ingest(&self, request: &Ingest, store: &LensStore) -> Result<()> {
        self.state.started.fetch_add(1, Ordering::SeqCst);
        if let Some(gate) = &self.gate {
            gate.acquire().await.expect("gate open").forget();
        }
        self.state.ids.lock().unwrap().push(request.id.clone());
        let step = self.state.steps.lock().unwrap().pop_front();
        match step {
            Some(Step::Fail(e)) => return Err(e()),
            Some(Step::WriteThenFail(e)) => {
                store
                    .add(request.content.clone(), &request.source_description)
                    .await?;
                return Err(e());
            }
            Some(Step::Panic) => panic!("scripted ingestion panic"),
            None => {}
        }
        store
            .add(request.content.clone(), &request.source_description)
            .await
            .map(|_| ())
    }
}

fn retryable() -> Error {
    Error::Timeout {
        operation: "scripted write".into(),
        after: Duration::from_millis(1),
    }
}
fn contract() -> Error {
    Error::InvalidInput {
        field: "scripted".into(),
        rule: "is refused".into(),
    }
}
fn provider(status: u16) -> Error {
    Error::Provider {
        provider: "openai".into(),
        status: Some(status),
        message: "scripted".into(),
        retry_after: None,
        source: None,
    }
}
fn bad_request() -> Error {
    provider(400)
}
fn unavailable() -> Error {
    provider(503)
}

/// A client of either kind, its capture store, and a way to make buffers over them.
pub struct Rig {
    pub client: Arc<dyn Client>,
    pub sink: Arc<dyn CaptureSink>,
    pub store: Arc<dyn CaptureStore>,
    pub config: CaptureConfig,
    pub op: OperatorId,
    /// The native store's graph (to read it through a handle of its own).
    pub graph: Option<String>,
}

impl Rig {
    pub async fn new(kind: Kind, runtime: RuntimeConfig) -> Rig {
        let runtime = Runtime::new(runtime).expect("valid runtime");
        let op = OperatorId::new(format!("op-{}", uuid::Uuid::new_v4())).unwrap();
        let config = CaptureConfig::new().retry_delays([Duration::from_millis(1); 3]);
        match kind {
            Kind::Twin => {
                let client = InMemoryClient::with_runtime(runtime);
                Rig {
                    client: Arc::new(client.clone()),
                    sink: Arc::new(client),
                    store: Arc::new(InMemoryCaptureStore::new()),
                    config,
                    op,
                    graph: None,
                }
            }
            Kind::Native => {
                let db = common::db().await;
                let engine = Engine::without_llm(db.clone(), Arc::new(CountingEmbedder::new()));
                let client = NativeClient::from_parts(runtime, NativeStorage::new(engine));
                let graph = format!("test:capture:{}", uuid::Uuid::new_v4());
                Rig {
                    client: Arc::new(client.clone()),
                    sink: Arc::new(client),
                    store: Arc::new(FalkorCaptureStore::in_graph(db, graph.clone())),
                    config,
                    op,
                    graph: Some(graph),
                }
            }
        }
    }

    /// The store, read through a new database handle for the native client (the
    /// client's own may be shut down).
    pub async fn fresh_store(&self) -> Arc<dyn CaptureStore> {
        match &self.graph {
            None => self.store.clone(),
            Some(g) => Arc::new(FalkorCaptureStore::in_graph(common::db().await, g.clone())),
        }
    }

    pub async fn buffer(&self) -> CaptureBuffer {
        CaptureBuffer::new(self.sink.clone(), self.store.clone(), self.config.clone())
            .await
            .expect("buffer")
    }

    pub fn capture(&self, session: &str, turn: Turn) -> Capture {
        Capture::new(session, &self.op, "Susu", "Ada", turn)
    }

    /// Every episode of `destination` that mentions `word`.
    pub async fn episodes(&self, destination: &str, word: &str) -> Vec<EpisodeRecord> {
        self.client
            .search(&Search::new(&self.op, word).destinations([destination]))
            .await
            .unwrap()
            .into_iter()
            .filter_map(|r| r.hit.as_episode().cloned())
            .filter(|e| e.content.contains(word))
            .collect()
    }
}

pub fn turn(user: &str, answer: &str) -> Turn {
    Turn::completed(user, Vec::<String>::new(), answer)
}

const WAIT: Duration = Duration::from_secs(30);

/// Runs an `async fn(Kind)` test on both clients.
macro_rules! both {
    ($($name:ident),* $(,)?) => {$(
        mod $name {
            #[tokio::test]
            async fn in_memory() {
                super::$name(super::Kind::Twin).await
            }
            #[tokio::test]
            async fn native() {
                super::$name(super::Kind::Native).await
            }
        }
    )*};
}

both!(
    after_turn_captures_the_last_messages_without_short_ones_blocks_or_a_session,
    rotation_flushes_the_session_and_seeds_the_last_entries_plus_what_landed,
    a_session_is_bound_on_first_append_and_cannot_be_rebound,
    a_turn_may_name_another_route_and_is_buffered_per_route,
    invalid_captures_are_refused_naming_the_field_and_nothing_is_buffered,
    empty_turns_are_skipped,
    recalled_memory_is_dropped_before_the_turn_is_stored,
    there_is_no_idle_flush_and_a_direct_flush_writes_captured_with_the_direct_marker,
    a_turn_routed_to_several_lenses_is_stored_once_and_written_once_per_lens,
    route_definitions_are_frozen_at_acceptance,
    flush_returns_before_the_write_completes,
    flush_and_await_timeout_puts_the_turns_back,
    retryable_failures_are_retried_with_the_same_ingestion_id,
    a_retry_after_a_write_that_landed_stores_nothing_twice,
    exhausted_retries_drop_the_turns,
    contract_4xx_and_upstream_errors_are_not_retried,
    a_panicking_ingestion_is_retried,
    routes_fail_independently_and_the_first_failure_is_reported,
    flush_all_writes_every_session_and_waits_for_scheduled_flushes,
    shutdown_drains_and_then_refuses_appends,
    a_drain_that_times_out_leaves_the_turns_for_the_next_buffer,
    accepted_turns_are_found_again_by_a_new_buffer_and_written_once,
    nothing_is_logged_per_turn_and_content_only_at_debug,
    one_client_shutdown_drains_the_buffer_before_the_storage_stops,
    a_client_shutdown_whose_drain_times_out_leaves_the_turns_for_the_next_buffer,
    a_dropped_buffer_is_not_drained_and_a_zero_shutdown_timeout_is_refused,
    purging_a_session_drops_its_buffered_turns_and_what_it_wrote_through_every_route,
    a_turn_that_could_never_be_written_is_refused_and_nothing_becomes_durable,
    a_session_over_the_content_limit_is_written_completely_in_parts,
    a_contract_error_keeps_the_route_buffered_for_the_next_flush,
    a_buffer_is_built_from_an_arc_dyn_client_and_keeps_turns_where_the_client_says,
);

/// `CaptureBuffer::for_client` needs only `Arc<dyn Client>`: the client hands out its
/// capture sink, and the sink says where accepted turns live — the native client's
/// FalkorDB server (a second buffer over it finds them), the twin's memory (a second
/// buffer does not).
async fn a_buffer_is_built_from_an_arc_dyn_client_and_keeps_turns_where_the_client_says(
    kind: Kind,
) {
    let rig = Rig::new(kind, RuntimeConfig::new()).await;
    let client: Arc<dyn Client> = rig.client.clone();
    let session = format!("s-{}", uuid::Uuid::new_v4());
    let word = format!("w{}", uuid::Uuid::new_v4().simple());
    let buffer = CaptureBuffer::for_client(&*client, rig.config.clone())
        .await
        .unwrap();
    buffer
        .append(rig.capture(
            &session,
            turn(&format!("We ship {word} on Fridays."), "Noted."),
        ))
        .await
        .unwrap();
    let second = CaptureBuffer::for_client(&*client, rig.config.clone())
        .await
        .unwrap();
    let kept = second.pending(&session).await.len();
    match kind {
        Kind::Twin => assert_eq!(kept, 0, "the twin keeps turns in the buffer's memory"),
        Kind::Native => assert_eq!(kept, 1, "the native client keeps them in FalkorDB"),
    }
    assert!(
        rig.episodes("personal", &word).await.is_empty(),
        "not flushed yet"
    );
    buffer.flush_all().await.unwrap();
    assert_eq!(rig.episodes("personal", &word).await.len(), 1);
    // The second buffer's copy replays the same ingestion id: nothing twice.
    second.flush_all().await.unwrap();
    assert_eq!(rig.episodes("personal", &word).await.len(), 1);
    assert!(second.pending(&session).await.is_empty());
}

async fn a_turn_that_could_never_be_written_is_refused_and_nothing_becomes_durable(kind: Kind) {
    let rig = Rig::new(kind, RuntimeConfig::new()).await;
    let buffer = rig.buffer().await;
    let limit = gralkor::graph::MAX_CONTENT_BYTES;
    // "Ada: " comes before the user's line: one byte of content fewer fits.
    let over = Turn::new([Message::user("x".repeat(limit - "Ada: ".len() + 1))]);
    let cases = [
        (
            rig.capture("s", turn("a\0b", "fine")),
            "turn.messages[0].content",
            "NUL",
        ),
        (
            rig.capture("s", Turn::completed("fine", ["tool x → a\0b"], "fine")),
            "turn.messages[1].content",
            "NUL",
        ),
        (rig.capture("s", over), "turn", "1048576 bytes"),
        (
            Capture::new("s", &rig.op, "Su\0su", "Ada", turn("q", "a")),
            "agent_name",
            "NUL",
        ),
    ];
    for (capture, field, rule) in cases {
        match buffer.append(capture).await {
            Err(Error::InvalidInput { field: f, rule: r }) => {
                assert_eq!(f, field);
                assert!(r.contains(rule), "{field}: {r}");
            }
            other => panic!("{field}: {other:?}"),
        }
    }
    assert!(buffer.sessions().await.is_empty());
    assert!(rig.store.load().await.unwrap().is_empty());
    // Checked as it will be written: exactly the limit as rendered is accepted, and a
    // NUL inside a recalled memory block (dropped before the check) is no obstacle.
    let at_limit = Turn::new([Message::user("x".repeat(limit - "Ada: ".len()))]);
    buffer.append(rig.capture("s", at_limit)).await.unwrap();
    let recalled = Turn::completed(
        "<gralkor-memory>\n- a\0b\n</gralkor-memory>\nWhat about zebus?",
        Vec::<String>::new(),
        "Humped.",
    );
    buffer.append(rig.capture("s", recalled)).await.unwrap();
    assert_eq!(rig.store.load().await.unwrap()[0].turns.len(), 2);
}

/// 1,536 turns of 2 KiB as written (3 MiB of transcript) in one session: the parts
/// the flush writes, found by the word every turn holds, joined in write order, are
/// the session's whole transcript; a replay of the same entry stores nothing twice.
async fn a_session_over_the_content_limit_is_written_completely_in_parts(kind: Kind) {
    const TURNS: usize = 1536;
    const RENDERED: usize = 2048;
    let limit = gralkor::graph::MAX_CONTENT_BYTES;
    let rig = Rig::new(kind, RuntimeConfig::new()).await;
    let buffer = rig.buffer().await;
    let w = crate::client_contract::word();
    // "Ada: <question>\nSusu: ok" is RENDERED bytes.
    let question = |i: usize| {
        let head = format!("{w} turn t{i:05}x ");
        let room = RENDERED - "Ada: ".len() - "\nSusu: ok".len() - head.len();
        let pad: String = "pad ".repeat(room / 4 + 1).chars().take(room).collect();
        format!("{head}{pad}")
    };
    let mut expected = Vec::with_capacity(TURNS);
    for i in 0..TURNS {
        let q = question(i);
        expected.push(format!("Ada: {q}\nSusu: ok"));
        buffer
            .append(rig.capture("big", turn(&q, "ok")))
            .await
            .unwrap();
    }
    let whole = expected.join("\n");
    assert!(whole.len() > 3 * limit, "{} bytes", whole.len());
    let accepted = rig.store.load().await.unwrap();
    buffer.flush_and_await("big", WAIT).await.unwrap();

    // As many whole turns as fit per part, the last part the rest.
    let per_part = (limit + 1) / (RENDERED + 1);
    let parts = TURNS.div_ceil(per_part);
    assert_eq!((per_part, parts), (511, 4));
    let written = |episodes: Vec<EpisodeRecord>| {
        let mut episodes = episodes;
        // Parts are written in order: by creation, then by content (equal times).
        episodes.sort_by(|a, b| {
            (a.created_at.0, first_turn(&a.content)).cmp(&(b.created_at.0, first_turn(&b.content)))
        });
        episodes
    };
    let stored = written(rig.episodes("personal", &w).await);
    assert_eq!(stored.len(), parts, "one episode per part");
    assert!(stored.iter().all(|e| e.content.len() <= limit));
    assert!(stored.iter().all(|e| e.source_description == "captured"));
    let joined: Vec<&str> = stored.iter().map(|e| e.content.as_str()).collect();
    assert!(
        joined.join("\n") == whole,
        "every turn, once, in order (first turns of the parts: {:?})",
        joined.iter().map(|c| first_turn(c)).collect::<Vec<_>>()
    );
    assert!(rig.store.load().await.unwrap().is_empty());

    // A replay of the same durable entry (a crash after the parts landed, before the
    // entry was removed) writes every part again under the same ids: nothing twice.
    for e in &accepted {
        rig.store.save(e).await.unwrap();
    }
    rig.buffer().await.flush_all().await.unwrap();
    let again = written(rig.episodes("personal", &w).await);
    let uuids = |es: &[EpisodeRecord]| es.iter().map(|e| e.uuid).collect::<Vec<_>>();
    assert_eq!(uuids(&again), uuids(&stored));
    let report = buffer
        .purge_session(&gralkor::client::PurgeSession::new(&rig.op, "big"))
        .await
        .unwrap();
    assert_eq!(report.episodes.len(), parts, "{report:?}");
}

/// The index of the first turn in a part (`t<index>x`).
fn first_turn(content: &str) -> usize {
    let at = content.find(" turn t").expect("a turn") + " turn t".len();
    content[at..at + 5].parse().expect("an index")
}

async fn a_contract_error_keeps_the_route_buffered_for_the_next_flush(kind: Kind) {
    let script = Scripted::new([Step::Fail(contract)]);
    let rig = Rig::new(kind, scripted_rig_config(&script)).await;
    let buffer = rig.buffer().await;
    buffer
        .append(
            rig.capture("s", turn("Pangolins roll up.", "Tightly."))
                .lenses(["scripted", "personal-chat"]),
        )
        .await
        .unwrap();
    let err = buffer.flush_and_await("s", WAIT).await.unwrap_err();
    assert_eq!(err.to_string(), contract().to_string());
    assert_eq!(script.attempts(), 1, "not retried within the flush");
    // The other route was written; the refused one is kept, in memory and durably.
    assert_eq!(rig.episodes("personal", "Pangolins").await.len(), 1);
    assert!(rig.episodes("team", "Pangolins").await.is_empty());
    assert_eq!(buffer.pending("s").await.len(), 1);
    let kept = rig.store.load().await.unwrap();
    assert_eq!(kept.len(), 1);
    assert_eq!(kept[0].routes.len(), 1, "{kept:?}");
    assert_eq!(kept[0].routes[0].target.to_string(), "lens:scripted");
    // The next flush (the script now writes) writes it, under the same id, once.
    buffer.flush_and_await("s", WAIT).await.unwrap();
    assert_eq!(
        script.ids(),
        vec![kept[0].routes[0].ingestion_id.clone(); 2]
    );
    assert_eq!(rig.episodes("team", "Pangolins").await.len(), 1);
    assert_eq!(rig.episodes("personal", "Pangolins").await.len(), 1);
    assert!(buffer.pending("s").await.is_empty());
    assert!(rig.store.load().await.unwrap().is_empty());
}

async fn purging_a_session_drops_its_buffered_turns_and_what_it_wrote_through_every_route(
    kind: Kind,
) {
    // The team graph is shared by every test on the server: a word of its own.
    let config = RuntimeConfig::new()
        .destination("team")
        .lens(Lens::appending("observations", "team"));
    let rig = Rig::new(kind, config).await;
    // Session ids of its own too: a purge reaches every graph of the operator.
    let s = format!("purge-{}", uuid::Uuid::new_v4());
    let buffer = rig.buffer().await;
    let lenses = ["personal-chat", "observations"];
    buffer
        .append(
            rig.capture(&s, turn("Ada ships zorblats on Fridays.", "Noted."))
                .lenses(lenses),
        )
        .await
        .unwrap();
    buffer.flush_and_await(&s, WAIT).await.unwrap();
    buffer
        .append(rig.capture("other", turn("Ada mails zorblats too.", "Noted.")))
        .await
        .unwrap();
    buffer.flush_and_await("other", WAIT).await.unwrap();
    buffer
        .append(
            rig.capture(&s, turn("Zorblats go out at noon.", "Noted."))
                .lenses(lenses),
        )
        .await
        .unwrap();
    assert_eq!(rig.episodes("personal", "zorblats").await.len(), 2);
    assert_eq!(rig.episodes("team", "zorblats").await.len(), 1);

    let report = buffer
        .purge_session(&gralkor::client::PurgeSession::new(&rig.op, s.clone()))
        .await
        .unwrap();
    assert_eq!(report.buffered_turns_dropped, 1, "{report:?}");
    assert_eq!(report.episodes.len(), 2, "one per route: {report:?}");
    assert!(buffer.pending(&s).await.is_empty());
    assert!(
        rig.store
            .load()
            .await
            .unwrap()
            .iter()
            .all(|e| e.session_id != s),
        "nothing of the session stays in the durable store"
    );
    let left = rig.episodes("personal", "zorblats").await;
    assert_eq!(left.len(), 1);
    assert!(left[0].content.contains("mails"), "{}", left[0].content);
    assert!(rig.episodes("team", "zorblats").await.is_empty());
    // The dropped turn is never written later.
    buffer.flush_all().await.unwrap();
    assert!(rig.episodes("team", "noon").await.is_empty());
    assert!(rig.episodes("personal", "noon").await.is_empty());
}

async fn one_client_shutdown_drains_the_buffer_before_the_storage_stops(kind: Kind) {
    let script = Scripted::new([]);
    let rig = Rig::new(kind, scripted_rig_config(&script)).await;
    let buffer = rig.buffer().await;
    buffer
        .append(
            rig.capture("s", turn("Okapis are shy.", "Very."))
                .lenses(["scripted"]),
        )
        .await
        .unwrap();
    // No flush and no buffer.shutdown: the client's own shutdown drains it first.
    rig.client.shutdown().await.unwrap();
    assert_eq!(
        script.attempts(),
        1,
        "written once, before the storage stopped"
    );
    assert!(rig.fresh_store().await.load().await.unwrap().is_empty());
    let late = buffer
        .append(rig.capture("s", turn("Too late?", "Yes.")))
        .await;
    assert!(matches!(late, Err(Error::Closed { .. })), "{late:?}");
}

async fn a_client_shutdown_whose_drain_times_out_leaves_the_turns_for_the_next_buffer(kind: Kind) {
    let (script, _gate) = Scripted::new([]).gated();
    let mut rig = Rig::new(kind, scripted_rig_config(&script)).await;
    rig.config = rig
        .config
        .clone()
        .shutdown_timeout(Duration::from_millis(50));
    let buffer = rig.buffer().await;
    buffer
        .append(
            rig.capture("s", turn("Okapis are shy.", "Very."))
                .lenses(["scripted"]),
        )
        .await
        .unwrap();
    let err = rig.client.shutdown().await.unwrap_err();
    assert!(matches!(err, Error::Timeout { .. }), "{err:?}");
    // The storage stopped all the same, and a second shutdown has nothing to do.
    rig.client.shutdown().await.unwrap();
    let err = rig
        .client
        .search(&Search::new(&rig.op, "Okapis"))
        .await
        .unwrap_err();
    assert!(matches!(err, Error::Closed { .. }), "{err:?}");
    let left = rig.fresh_store().await.load().await.unwrap();
    assert_eq!(left.len(), 1, "kept for the next buffer");
    assert_eq!(left[0].turns.len(), 1);
}

async fn a_dropped_buffer_is_not_drained_and_a_zero_shutdown_timeout_is_refused(kind: Kind) {
    let script = Scripted::new([]);
    let mut rig = Rig::new(kind, scripted_rig_config(&script)).await;
    {
        let buffer = rig.buffer().await;
        buffer
            .append(
                rig.capture("s", turn("Okapis are shy.", "Very."))
                    .lenses(["scripted"]),
            )
            .await
            .unwrap();
    }
    rig.config = rig.config.clone().shutdown_timeout(Duration::ZERO);
    let err = CaptureBuffer::new(rig.sink.clone(), rig.store.clone(), rig.config.clone())
        .await
        .unwrap_err();
    assert!(
        matches!(err, Error::InvalidInput { ref field, .. } if field == "shutdown_timeout"),
        "{err:?}"
    );
    rig.client.shutdown().await.unwrap();
    assert_eq!(
        script.attempts(),
        0,
        "nothing holds the dropped buffer's turns"
    );
    assert_eq!(rig.fresh_store().await.load().await.unwrap().len(), 1);
}

/// The default schedule, in paused time: one attempt and three retries after 1 s,
/// 2 s and 4 s (the twin: no real I/O under a paused clock).
#[tokio::test(start_paused = true)]
async fn the_default_retry_schedule_is_1_2_4_seconds() {
    let script = Scripted::new((0..3).map(|_| Step::Fail(retryable)));
    let mut rig = Rig::new(Kind::Twin, scripted_rig_config(&script)).await;
    rig.config = CaptureConfig::new();
    let buffer = rig.buffer().await;
    buffer
        .append(
            rig.capture("s", turn("Sloths nap.", "Slowly."))
                .lenses(["scripted"]),
        )
        .await
        .unwrap();
    let started = tokio::time::Instant::now();
    buffer
        .flush_and_await("s", Duration::from_secs(60))
        .await
        .unwrap();
    assert_eq!(started.elapsed().as_secs(), 7);
    assert_eq!(script.attempts(), 4);
}

async fn a_session_is_bound_on_first_append_and_cannot_be_rebound(kind: Kind) {
    let rig = Rig::new(kind, RuntimeConfig::new().destination("team")).await;
    let buffer = rig.buffer().await;
    buffer
        .append(rig.capture("s", turn("first question", "first answer")))
        .await
        .unwrap();
    let other = OperatorId::new("someone-else").unwrap();
    let rebinds = [
        (
            Capture::new("s", &other, "Susu", "Ada", turn("q", "a")),
            "operator_id",
        ),
        (
            Capture::new("s", &rig.op, "Momo", "Ada", turn("q", "a")),
            "agent_name",
        ),
        (
            Capture::new("s", &rig.op, "Susu", "Bea", turn("q", "a")),
            "human_name",
        ),
    ];
    for (capture, field) in rebinds {
        match buffer.append(capture).await {
            Err(Error::InvalidInput { field: f, rule }) => {
                assert_eq!(f, field);
                assert!(rule.contains("cannot be re-bound"), "{rule}");
            }
            other => panic!("{field}: {other:?}"),
        }
    }
    // Same binding: appended in order; other sessions are independent.
    buffer
        .append(rig.capture("s", turn("second question", "second answer")))
        .await
        .unwrap();
    buffer
        .append(Capture::new("t", &rig.op, "Momo", "Bea", turn("elsewhere", "ok")).direct("team"))
        .await
        .unwrap();
    let pending = buffer.pending("s").await;
    assert_eq!(pending.len(), 2);
    assert_eq!(pending[0].messages()[0], Message::user("first question"));
    assert_eq!(pending[1].messages()[0], Message::user("second question"));
    assert_eq!(buffer.sessions().await, ["s", "t"]);
    // Once everything is written the session is forgotten, binding included.
    buffer.flush_all().await.unwrap();
    assert!(buffer.sessions().await.is_empty());
    buffer
        .append(Capture::new(
            "s",
            &rig.op,
            "Susu",
            "Bea",
            turn("new day", "hello"),
        ))
        .await
        .unwrap();
    assert_eq!(buffer.pending("s").await.len(), 1);
}

async fn invalid_captures_are_refused_naming_the_field_and_nothing_is_buffered(kind: Kind) {
    let config = RuntimeConfig::new()
        .destination("team")
        .lens(Lens::replace_graph("systems", "team"));
    let rig = Rig::new(kind, config).await;
    let buffer = rig.buffer().await;
    let t = || turn("a question", "an answer");
    let cases = [
        (rig.capture(" ", t()), "session_id"),
        (Capture::new("s", &rig.op, " ", "Ada", t()), "agent_name"),
        (Capture::new("s", &rig.op, "Susu", "", t()), "human_name"),
        (rig.capture("s", t()).direct("nowhere"), "route.direct"),
        (
            rig.capture("s", t()).lenses(Vec::<String>::new()),
            "route.lenses",
        ),
        (
            rig.capture("s", t()).lenses(["personal-chat", "unknown"]),
            "route.lenses[1]",
        ),
        (rig.capture("s", t()).lenses(["systems"]), "route.lenses[0]"),
    ];
    for (capture, field) in cases {
        match buffer.append(capture).await {
            Err(Error::InvalidInput { field: f, .. }) => assert_eq!(f, field),
            other => panic!("{field}: {other:?}"),
        }
    }
    assert!(buffer.sessions().await.is_empty());
    assert!(rig.store.load().await.unwrap().is_empty());
}

async fn empty_turns_are_skipped(kind: Kind) {
    let rig = Rig::new(kind, RuntimeConfig::new()).await;
    let buffer = rig.buffer().await;
    buffer
        .append(rig.capture("s", Turn::default()))
        .await
        .unwrap();
    buffer
        .append(rig.capture("s", turn("   ", " ")))
        .await
        .unwrap();
    // A turn that was nothing but an injected memory block is empty once scrubbed.
    let injected = Turn::new([Message::user(
        "<gralkor-memory trust=\"untrusted\">\n- Ada likes tea\n</gralkor-memory>",
    )]);
    buffer.append(rig.capture("s", injected)).await.unwrap();
    assert!(buffer.pending("s").await.is_empty());
    assert!(rig.store.load().await.unwrap().is_empty());
}

async fn recalled_memory_is_dropped_before_the_turn_is_stored(kind: Kind) {
    let mut rig = Rig::new(kind, RuntimeConfig::new()).await;
    rig.config = rig
        .config
        .clone()
        .filter(MemoryFilter::new().block("<relevant-memories>", "</relevant-memories>"));
    let buffer = rig.buffer().await;
    let turn = Turn::completed(
        "<gralkor-memory trust=\"untrusted\">\n- Ada keeps bees (recalled)\n</gralkor-memory>\n\
         <relevant-memories>- Ada lives in Porto (recalled)</relevant-memories>\n\
         What should I plant for zinnias?",
        [
            "tool memory_search → - Ada keeps bees (recalled)",
            "tool weather → sunny",
        ],
        "Plant zinnias in full sun.",
    );
    buffer.append(rig.capture("s", turn)).await.unwrap();
    let stored = rig.store.load().await.unwrap();
    let text = serde_json::to_string(&stored).unwrap();
    assert!(!text.contains("recalled"), "{text}");
    assert_eq!(
        buffer.pending("s").await[0].messages(),
        [
            Message::user("What should I plant for zinnias?"),
            Message::behaviour("tool memory_search"),
            Message::behaviour("tool weather → sunny"),
            Message::assistant("Plant zinnias in full sun."),
        ]
    );
    buffer.flush_and_await("s", WAIT).await.unwrap();
    let written = rig.episodes("personal", "zinnias").await;
    assert_eq!(written.len(), 1);
    assert_eq!(
        written[0].content,
        "Ada: What should I plant for zinnias?\nSusu: Plant zinnias in full sun."
    );
}

async fn there_is_no_idle_flush_and_a_direct_flush_writes_captured_with_the_direct_marker(
    kind: Kind,
) {
    let rig = Rig::new(kind, RuntimeConfig::new()).await;
    let buffer = rig.buffer().await;
    buffer
        .append(rig.capture("s", turn("I moved to Lisbon.", "Welcome to Lisbon!")))
        .await
        .unwrap();
    buffer
        .append(rig.capture("s", turn("Lisbon has trams.", "Tram 28 is famous.")))
        .await
        .unwrap();
    // Nothing is written until a flush.
    tokio::task::yield_now().await;
    assert!(rig.episodes("personal", "Lisbon").await.is_empty());
    assert_eq!(buffer.pending("s").await.len(), 2);
    buffer.flush_and_await("s", WAIT).await.unwrap();
    let written = rig.episodes("personal", "Lisbon").await;
    assert_eq!(written.len(), 1, "one episode per flushed batch");
    assert_eq!(
        written[0].content,
        "Ada: I moved to Lisbon.\nSusu: Welcome to Lisbon!\nAda: Lisbon has trams.\nSusu: Tram 28 is famous."
    );
    assert_eq!(written[0].source_description, "captured");
    assert_eq!(written[0].writer, Some(Writer::Direct));
    assert!(buffer.pending("s").await.is_empty());
    assert!(rig.store.load().await.unwrap().is_empty());
    // The entry was consumed: a second flush writes nothing.
    buffer.flush_and_await("s", WAIT).await.unwrap();
    assert_eq!(rig.episodes("personal", "Lisbon").await.len(), 1);
}

async fn a_turn_routed_to_several_lenses_is_stored_once_and_written_once_per_lens(kind: Kind) {
    let config = RuntimeConfig::new()
        .destination("team")
        .lens(Lens::appending("observations", "team"));
    let rig = Rig::new(kind, config).await;
    let buffer = rig.buffer().await;
    let lenses = ["personal-chat", "observations", "personal-chat"];
    buffer
        .append(
            rig.capture("s", turn("Ada ships invoices on Fridays.", "Noted."))
                .lenses(lenses),
        )
        .await
        .unwrap();
    assert_eq!(buffer.pending("s").await.len(), 1);
    let stored = rig.store.load().await.unwrap();
    assert_eq!(stored.len(), 1);
    assert_eq!(stored[0].turns.len(), 1);
    let ids: Vec<_> = stored[0]
        .routes
        .iter()
        .map(|r| r.ingestion_id.clone())
        .collect();
    assert_eq!(ids.len(), 2, "distinct Lenses: {ids:?}");
    assert_ne!(ids[0], ids[1]);
    assert!(ids.iter().all(
        |i| i.starts_with("capture-") && uuid::Uuid::parse_str(&i["capture-".len()..]).is_ok()
    ));
    buffer.flush_and_await("s", WAIT).await.unwrap();
    let personal = rig.episodes("personal", "invoices").await;
    let team = rig.episodes("team", "invoices").await;
    assert_eq!(personal.len(), 1);
    assert_eq!(team.len(), 1);
    assert_eq!(
        personal[0].writer,
        Some(Writer::Lens("personal-chat".into()))
    );
    assert_eq!(team[0].writer, Some(Writer::Lens("observations".into())));
    assert_eq!(team[0].source_description, "captured");
}

async fn route_definitions_are_frozen_at_acceptance(kind: Kind) {
    let config = || {
        RuntimeConfig::new()
            .destination("first")
            .destination("second")
    };
    let rig = Rig::new(kind, config().lens(Lens::appending("notes", "first"))).await;
    let buffer = rig.buffer().await;
    buffer
        .append(
            rig.capture("s", turn("The pump hums at night.", "Logged."))
                .lenses(["notes"]),
        )
        .await
        .unwrap();
    // The Lens now writes elsewhere; the buffered turn keeps the definition it was
    // accepted under.
    rig.client
        .runtime()
        .replace(config().lens(Lens::appending("notes", "second")))
        .unwrap();
    buffer.flush_and_await("s", WAIT).await.unwrap();
    assert_eq!(rig.episodes("first", "pump").await.len(), 1);
    assert!(rig.episodes("second", "pump").await.is_empty());
}

fn scripted_rig_config(script: &Scripted) -> RuntimeConfig {
    RuntimeConfig::new()
        .destination("team")
        .lens(Lens::appending("scripted", "team").ingestion(script.clone()))
}

async fn flush_returns_before_the_write_completes(kind: Kind) {
    let (script, gate) = Scripted::new([]).gated();
    let rig = Rig::new(kind, scripted_rig_config(&script)).await;
    let buffer = rig.buffer().await;
    buffer
        .append(
            rig.capture("s", turn("Gate the heron.", "Done."))
                .lenses(["scripted"]),
        )
        .await
        .unwrap();
    buffer.flush("s").await.unwrap();
    // The flush took the turns and returned; the write is held at the gate.
    assert!(buffer.pending("s").await.is_empty());
    assert!(rig.episodes("team", "heron").await.is_empty());
    gate.add_permits(1);
    buffer.await_flushes().await;
    assert_eq!(rig.episodes("team", "heron").await.len(), 1);
    assert!(rig.store.load().await.unwrap().is_empty());
    // Nothing buffered: nothing scheduled.
    buffer.flush("s").await.unwrap();
    buffer.await_flushes().await;
    assert_eq!(script.attempts(), 1);
}

async fn flush_and_await_timeout_puts_the_turns_back(kind: Kind) {
    let (script, gate) = Scripted::new([]).gated();
    let rig = Rig::new(kind, scripted_rig_config(&script)).await;
    let buffer = rig.buffer().await;
    buffer
        .append(
            rig.capture("s", turn("The otter naps.", "Sweet."))
                .lenses(["scripted"]),
        )
        .await
        .unwrap();
    let err = buffer
        .flush_and_await("s", Duration::from_millis(50))
        .await
        .unwrap_err();
    assert!(matches!(err, Error::Timeout { .. }), "{err:?}");
    assert_eq!(script.started(), 1);
    // Put back, in memory and in the store; appends still work.
    assert_eq!(buffer.pending("s").await.len(), 1);
    assert_eq!(rig.store.load().await.unwrap().len(), 1);
    buffer
        .append(
            rig.capture("s", turn("The otter swims.", "Nice."))
                .lenses(["scripted"]),
        )
        .await
        .unwrap();
    assert_eq!(buffer.pending("s").await.len(), 2);
    gate.add_permits(10);
    buffer.flush_and_await("s", WAIT).await.unwrap();
    let written = rig.episodes("team", "otter").await;
    assert_eq!(written.len(), 2, "the put-back entry and the new one");
    assert!(written.iter().any(|e| e.content.contains("naps")));
    assert!(written.iter().any(|e| e.content.contains("swims")));
    assert!(rig.store.load().await.unwrap().is_empty());
    let err = buffer
        .flush_and_await("s", Duration::ZERO)
        .await
        .unwrap_err();
    assert!(matches!(err, Error::InvalidInput { ref field, .. } if field == "timeout"));
}

async fn retryable_failures_are_retried_with_the_same_ingestion_id(kind: Kind) {
    let script = Scripted::new([Step::Fail(retryable), Step::Fail(retryable)]);
    let rig = Rig::new(kind, scripted_rig_config(&script)).await;
    let buffer = rig.buffer().await;
    buffer
        .append(
            rig.capture("s", turn("Badgers dig at dusk.", "True."))
                .lenses(["scripted"]),
        )
        .await
        .unwrap();
    let minted = rig.store.load().await.unwrap()[0].routes[0]
        .ingestion_id
        .clone();
    buffer.flush_and_await("s", WAIT).await.unwrap();
    assert_eq!(script.ids(), vec![minted; 3]);
    assert_eq!(rig.episodes("team", "Badgers").await.len(), 1);
}

async fn a_retry_after_a_write_that_landed_stores_nothing_twice(kind: Kind) {
    let script = Scripted::new([Step::WriteThenFail(retryable)]);
    let rig = Rig::new(kind, scripted_rig_config(&script)).await;
    let buffer = rig.buffer().await;
    buffer
        .append(
            rig.capture("s", turn("Walruses sing.", "Loudly."))
                .lenses(["scripted"]),
        )
        .await
        .unwrap();
    buffer.flush_and_await("s", WAIT).await.unwrap();
    assert_eq!(script.attempts(), 2);
    assert_eq!(rig.episodes("team", "Walruses").await.len(), 1);
}

async fn exhausted_retries_drop_the_turns(kind: Kind) {
    let script = Scripted::new((0..4).map(|_| Step::Fail(retryable)));
    let rig = Rig::new(kind, scripted_rig_config(&script)).await;
    let buffer = rig.buffer().await;
    buffer
        .append(
            rig.capture("s", turn("Lynx prowl.", "Quietly."))
                .lenses(["scripted"]),
        )
        .await
        .unwrap();
    let err = buffer.flush_and_await("s", WAIT).await.unwrap_err();
    assert!(
        matches!(err, Error::Timeout { .. }),
        "the last failure: {err:?}"
    );
    assert_eq!(script.attempts(), 4, "one attempt and three retries");
    assert!(buffer.pending("s").await.is_empty());
    assert!(rig.store.load().await.unwrap().is_empty());
    assert!(rig.episodes("team", "Lynx").await.is_empty());
}

async fn contract_4xx_and_upstream_errors_are_not_retried(kind: Kind) {
    for (fault, what, kept) in [
        (contract as fn() -> Error, "contract", 1),
        (bad_request, "4xx", 0),
        (unavailable, "upstream", 0),
    ] {
        let script = Scripted::new([Step::Fail(fault)]);
        let rig = Rig::new(kind, scripted_rig_config(&script)).await;
        let buffer = rig.buffer().await;
        buffer
            .append(
                rig.capture("s", turn("Moles tunnel.", "Deeply."))
                    .lenses(["scripted"]),
            )
            .await
            .unwrap();
        let err = buffer.flush_and_await("s", WAIT).await.unwrap_err();
        assert_eq!(err.to_string(), fault().to_string(), "{what}");
        assert_eq!(script.attempts(), 1, "{what}: not retried");
        // A contract error keeps the turns for the next flush; the others consume them.
        assert_eq!(buffer.pending("s").await.len(), kept, "{what}");
        assert_eq!(rig.store.load().await.unwrap().len(), kept, "{what}");
    }
}

async fn a_panicking_ingestion_is_retried(kind: Kind) {
    let script = Scripted::new([Step::Panic]);
    let rig = Rig::new(kind, scripted_rig_config(&script)).await;
    let buffer = rig.buffer().await;
    buffer
        .append(
            rig.capture("s", turn("Geckos climb glass.", "Sticky."))
                .lenses(["scripted"]),
        )
        .await
        .unwrap();
    buffer.flush_and_await("s", WAIT).await.unwrap();
    assert_eq!(script.attempts(), 2);
    assert_eq!(rig.episodes("team", "Geckos").await.len(), 1);
}

async fn routes_fail_independently_and_the_first_failure_is_reported(kind: Kind) {
    let script = Scripted::new([Step::Fail(bad_request)]);
    let rig = Rig::new(kind, scripted_rig_config(&script)).await;
    let buffer = rig.buffer().await;
    buffer
        .append(
            rig.capture("s", turn("Ibis wade.", "Gracefully."))
                .lenses(["scripted", "personal-chat"]),
        )
        .await
        .unwrap();
    let err = buffer.flush_and_await("s", WAIT).await.unwrap_err();
    assert_eq!(err.to_string(), bad_request().to_string());
    assert!(rig.episodes("team", "Ibis").await.is_empty());
    assert_eq!(rig.episodes("personal", "Ibis").await.len(), 1);
    assert!(rig.store.load().await.unwrap().is_empty());
}

async fn flush_all_writes_every_session_and_waits_for_scheduled_flushes(kind: Kind) {
    let script = Scripted::new([Step::Fail(bad_request)]);
    let rig = Rig::new(kind, scripted_rig_config(&script)).await;
    let buffer = rig.buffer().await;
    // One session fails (a provider 4xx, dropped); the others are still written.
    buffer
        .append(
            rig.capture("bad", turn("Voles fail.", "Oh."))
                .lenses(["scripted"]),
        )
        .await
        .unwrap();
    for s in ["a", "b", "c"] {
        buffer
            .append(rig.capture(s, turn(&format!("Quokka {s} smiles."), "Cute.")))
            .await
            .unwrap();
    }
    buffer.flush("a").await.unwrap();
    buffer.flush_all().await.unwrap();
    assert!(buffer.sessions().await.is_empty());
    let written = rig.episodes("personal", "Quokka").await;
    assert_eq!(written.len(), 3, "{written:?}");
    assert!(rig.store.load().await.unwrap().is_empty());
    // Nothing buffered: returns at once.
    buffer.flush_all().await.unwrap();
}

async fn shutdown_drains_and_then_refuses_appends(kind: Kind) {
    let rig = Rig::new(kind, RuntimeConfig::new()).await;
    let buffer = rig.buffer().await;
    buffer
        .append(rig.capture("s", turn("Puffins nest on cliffs.", "Brave.")))
        .await
        .unwrap();
    buffer.shutdown(WAIT).await.unwrap();
    assert_eq!(rig.episodes("personal", "Puffins").await.len(), 1);
    let late = buffer
        .append(rig.capture("s", turn("Too late?", "Yes.")))
        .await;
    assert!(matches!(late, Err(Error::Closed { .. })), "{late:?}");
    assert!(rig.store.load().await.unwrap().is_empty());
}

async fn a_drain_that_times_out_leaves_the_turns_for_the_next_buffer(kind: Kind) {
    let (script, gate) = Scripted::new([]).gated();
    let rig = Rig::new(kind, scripted_rig_config(&script)).await;
    let buffer = rig.buffer().await;
    buffer
        .append(
            rig.capture("s", turn("Tapirs snorkel.", "Neat."))
                .lenses(["scripted"]),
        )
        .await
        .unwrap();
    let err = buffer
        .shutdown(Duration::from_millis(50))
        .await
        .unwrap_err();
    assert!(matches!(err, Error::Timeout { .. }), "{err:?}");
    assert!(rig.episodes("team", "Tapirs").await.is_empty());
    // The next buffer (the next process) finds and writes them.
    let next = rig.buffer().await;
    assert_eq!(next.sessions().await, ["s"]);
    gate.add_permits(10);
    next.flush_all().await.unwrap();
    assert_eq!(rig.episodes("team", "Tapirs").await.len(), 1);
    assert!(rig.store.load().await.unwrap().is_empty());
}

async fn accepted_turns_are_found_again_by_a_new_buffer_and_written_once(kind: Kind) {
    let rig = Rig::new(kind, RuntimeConfig::new()).await;
    {
        let buffer = rig.buffer().await;
        buffer
            .append(rig.capture("s", turn("Narwhals have tusks.", "Spiral ones.")))
            .await
            .unwrap();
        buffer
            .append(
                rig.capture("t", turn("Narwhals dive deep.", "Very."))
                    .lenses(["personal-chat"]),
            )
            .await
            .unwrap();
        // Dropped without a flush.
    }
    let stored = rig.store.load().await.unwrap();
    let buffer = rig.buffer().await;
    assert_eq!(buffer.sessions().await, ["s", "t"]);
    assert_eq!(buffer.pending("s").await.len(), 1);
    // The recovered session keeps its binding.
    let err = buffer
        .append(Capture::new("s", &rig.op, "Susu", "Bea", turn("q", "a")))
        .await
        .unwrap_err();
    assert!(matches!(err, Error::InvalidInput { ref field, .. } if field == "human_name"));
    buffer.flush_all().await.unwrap();
    let written = rig.episodes("personal", "Narwhals").await;
    assert_eq!(written.len(), 2);
    assert!(rig.store.load().await.unwrap().is_empty());
    // A replay of the same entries (as after a crash between the write and the
    // removal) stores nothing twice: the ingestion ids were kept.
    for e in &stored {
        rig.store.save(e).await.unwrap();
    }
    rig.buffer().await.flush_all().await.unwrap();
    assert_eq!(rig.episodes("personal", "Narwhals").await.len(), 2);
}

/// Records every event's level and fields on this thread.
#[derive(Clone, Default)]
struct Events(Arc<Mutex<Vec<(tracing::Level, String)>>>);

struct Fields(String);

impl tracing::field::Visit for Fields {
    fn record_debug(&mut self, field: &tracing::field::Field, value: &dyn std::fmt::Debug) {
        self.0.push_str(&format!(" {}={:?}", field.name(), value));
    }
}

impl tracing::Subscriber for Events {
    fn enabled(&self, _: &tracing::Metadata<'_>) -> bool {
        true
    }
    fn new_span(&self, _: &tracing::span::Attributes<'_>) -> tracing::span::Id {
        tracing::span::Id::from_u64(1)
    }
    fn record(&self, _: &tracing::span::Id, _: &tracing::span::Record<'_>) {}
    fn record_follows_from(&self, _: &tracing::span::Id, _: &tracing::span::Id) {}
    fn event(&self, event: &tracing::Event<'_>) {
        let mut f = Fields(format!("target={}", event.metadata().target()));
        event.record(&mut f);
        self.0
            .lock()
            .unwrap()
            .push((*event.metadata().level(), f.0));
    }
    fn enter(&self, _: &tracing::span::Id) {}
    fn exit(&self, _: &tracing::span::Id) {}
}

impl Events {
    fn take(&self) -> Vec<(tracing::Level, String)> {
        std::mem::take(&mut *self.0.lock().unwrap())
    }
}

async fn nothing_is_logged_per_turn_and_content_only_at_debug(kind: Kind) {
    let rig = Rig::new(kind, RuntimeConfig::new()).await;
    let buffer = rig.buffer().await;
    let events = Events::default();
    let _guard = tracing::subscriber::set_default(events.clone());
    for i in 0..3 {
        buffer
            .append(rig.capture("s", turn(&format!("secretword{i} here"), "fine")))
            .await
            .unwrap();
    }
    let appended = events.take();
    // A fault's retry warning (the shared server under load) is a fault's log, not a
    // turn's; it carries no content either.
    assert!(
        appended
            .iter()
            .filter(|(_, f)| !f.starts_with("target=gralkor::retry "))
            .all(|(l, _)| *l > tracing::Level::INFO),
        "append logs nothing at info or above: {appended:?}"
    );
    assert!(
        appended
            .iter()
            .all(|(l, f)| *l > tracing::Level::INFO || !f.contains("secretword")),
        "{appended:?}"
    );
    buffer.flush_and_await("s", WAIT).await.unwrap();
    let flushed = events.take();
    assert!(
        flushed
            .iter()
            .filter(|(l, _)| *l <= tracing::Level::INFO)
            .all(|(_, f)| !f.contains("secretword")),
        "{flushed:?}"
    );
    assert!(
        flushed
            .iter()
            .any(|(l, f)| *l == tracing::Level::INFO && f.contains("flush_and_await")),
        "{flushed:?}"
    );
    assert!(
        flushed
            .iter()
            .any(|(l, f)| *l == tracing::Level::DEBUG && f.contains("secretword2")),
        "the transcript at debug: {flushed:?}"
    );
}

async fn after_turn_captures_the_last_messages_without_short_ones_blocks_or_a_session(kind: Kind) {
    use gralkor::agent::capture::CaptureRoute;
    use gralkor::agent::hooks::{AgentCapture, AutoCapture};
    use serde_json::json;

    let rig = Rig::new(kind, RuntimeConfig::new()).await;
    let buffer = rig.buffer().await;
    let w = crate::client_contract::word();
    let hook = AgentCapture::new(
        buffer.clone(),
        rig.op.clone(),
        "Susu",
        "Ada",
        CaptureRoute::default(),
        AutoCapture::new().last_messages(4),
    )
    .unwrap();
    let messages = [
        json!({"role": "user", "content": format!("an early turn {w} beyond the last four")}),
        json!({"role": "system", "content": "You are Susu."}),
        json!({"role": "user", "content": format!("<gralkor-memory trust=\"untrusted\">Ada lives in Porto {w}</gralkor-memory>")}),
        json!({"role": "user", "content": format!("I moved to Lisbon {w}.")}),
        json!({"role": "assistant", "content": "ok"}),
    ];
    // No session id yet: skipped, nothing buffered.
    assert!(!hook.after_turn(None, &messages).await.unwrap());
    assert!(buffer.sessions().await.is_empty());
    assert!(hook.after_turn(Some("s-1"), &messages).await.unwrap());
    let pending = buffer.pending("s-1").await;
    assert_eq!(pending.len(), 1);
    // Of the last four: the system message is not a turn message, the injected block
    // and the 2-character answer are skipped; the early turn is outside the four.
    assert_eq!(
        pending[0].messages(),
        [Message::user(format!("I moved to Lisbon {w}."))]
    );
    buffer.flush_and_await("s-1", WAIT).await.unwrap();
    let stored = rig.episodes("personal", &w).await;
    assert_eq!(stored.len(), 1, "{stored:?}");
    assert!(
        stored[0].content.contains("Ada: I moved to Lisbon"),
        "{stored:?}"
    );
    assert!(!stored[0].content.contains("Porto") && !stored[0].content.contains("early"));
    // Every message skipped: nothing to buffer.
    let short = [json!({"role": "user", "content": "hi"})];
    assert!(!hook.after_turn(Some("s-2"), &short).await.unwrap());
    // Blank names are refused when the hook is made.
    let err = AgentCapture::new(
        buffer,
        rig.op.clone(),
        "Susu",
        " ",
        CaptureRoute::default(),
        AutoCapture::new(),
    )
    .unwrap_err();
    assert!(err.to_string().contains("`human_name`"), "{err}");
}

/// A thread that grows by one entry between the rotation's two reads: a turn that
/// landed while the flush ran.
struct GrowingThread {
    entries: Mutex<Vec<String>>,
    reads: AtomicUsize,
}

impl gralkor::agent::rotation::Thread<String> for GrowingThread {
    fn entries(&self) -> Vec<String> {
        let mut entries = self.entries.lock().unwrap();
        if self.reads.fetch_add(1, Ordering::SeqCst) == 1 {
            entries.push("landed during the flush".into());
        }
        entries.clone()
    }
}

async fn rotation_flushes_the_session_and_seeds_the_last_entries_plus_what_landed(kind: Kind) {
    use gralkor::agent::rotation::{RotateOptions, rotate};

    let rig = Rig::new(kind, RuntimeConfig::new()).await;
    let buffer = rig.buffer().await;
    let w = crate::client_contract::word();
    buffer
        .append(rig.capture("s-1", turn(&format!("I moved to Lisbon {w}"), "Noted.")))
        .await
        .unwrap();
    let thread = GrowingThread {
        entries: Mutex::new((1..=6).map(|i| format!("entry {i}")).collect()),
        reads: AtomicUsize::new(0),
    };
    let seed = rotate(
        &buffer,
        Some("s-1"),
        &thread,
        &RotateOptions::new().keep_last_n(2),
    )
    .await
    .unwrap()
    .expect("a committed session rotates");
    assert_eq!(seed, ["entry 5", "entry 6", "landed during the flush"]);
    // The session's turns were written before the seed came back.
    assert!(buffer.pending("s-1").await.is_empty());
    let written = rig.episodes("personal", "Lisbon").await;
    assert_eq!(written.len(), 1, "{written:?}");
    assert!(written[0].content.contains(&w), "{written:?}");
    // keep_last_n 0 drops every pre-flush entry but keeps what landed.
    let thread = GrowingThread {
        entries: Mutex::new(vec!["old".into()]),
        reads: AtomicUsize::new(0),
    };
    let seed = rotate(
        &buffer,
        Some("s-1"),
        &thread,
        &RotateOptions::new().keep_last_n(0),
    )
    .await
    .unwrap()
    .unwrap();
    assert_eq!(seed, ["landed during the flush"]);
    // No committed session: nothing to do, the thread is not read.
    let untouched = GrowingThread {
        entries: Mutex::new(vec!["x".into()]),
        reads: AtomicUsize::new(0),
    };
    assert_eq!(
        rotate(&buffer, None, &untouched, &RotateOptions::new())
            .await
            .unwrap(),
        None
    );
    assert_eq!(untouched.reads.load(Ordering::SeqCst), 0);
    let err = rotate(
        &buffer,
        Some("s-1"),
        &untouched,
        &RotateOptions::new().flush_timeout(Duration::ZERO),
    )
    .await
    .unwrap_err();
    assert!(err.to_string().contains("`flush_timeout`"), "{err}");
}

/// jido's per-turn Lens override (`tool_context[:lens]`): a turn may name another
/// route than its session's; it is buffered per route (a turn for another route
/// closes the open entry), keeps append order, and each turn is written where it said.
async fn a_turn_may_name_another_route_and_is_buffered_per_route(kind: Kind) {
    let rig = Rig::new(
        kind,
        RuntimeConfig::new()
            .destination("team")
            .lens(Lens::appending("notes", "team")),
    )
    .await;
    let buffer = rig.buffer().await;
    buffer
        .append(rig.capture("s", turn("zqfirst question", "ok")))
        .await
        .unwrap();
    buffer
        .append(
            rig.capture("s", turn("zqsecond question", "ok"))
                .lenses(["notes"]),
        )
        .await
        .unwrap();
    buffer
        .append(rig.capture("s", turn("zqthird question", "ok")))
        .await
        .unwrap();
    let pending = buffer.pending("s").await;
    let firsts: Vec<_> = pending.iter().map(|t| t.messages()[0].clone()).collect();
    assert_eq!(
        firsts,
        [
            Message::user("zqfirst question"),
            Message::user("zqsecond question"),
            Message::user("zqthird question")
        ]
    );
    buffer.flush_and_await("s", WAIT).await.unwrap();
    for word in ["zqfirst", "zqthird"] {
        let direct = rig.episodes("personal", word).await;
        assert_eq!(direct.len(), 1, "{word}: {direct:?}");
        assert_eq!(direct[0].writer, Some(Writer::Direct));
        assert!(rig.episodes("team", word).await.is_empty(), "{word}");
    }
    let through = rig.episodes("team", "zqsecond").await;
    assert_eq!(through.len(), 1, "{through:?}");
    assert_eq!(through[0].writer, Some(Writer::Lens("notes".into())));
    assert!(rig.episodes("personal", "zqsecond").await.is_empty());
}
