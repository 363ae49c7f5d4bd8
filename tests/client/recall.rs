//! Recall (`gralkor::agent::recall`) and auto-recall before a turn
//! (`gralkor::agent::hooks`) on both clients: the twin, and the native client over the
//! shared embedded FalkorDB with no language model and a counting embedder. Mirrors
//! `test-trees/recall.md`.

use crate::common;

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use async_trait::async_trait;
use common::ingest::CountingEmbedder;
use gralkor::Error;
use gralkor::NativeStorage;
use gralkor::agent::format::format_fact;
use gralkor::agent::hooks::{AgentRecall, AutoRecall};
use gralkor::agent::recall::{RecallOptions, memory_block, recall};
use gralkor::client::{
    BuildCommunities, Call, Client, CommunityCounts, Content, EpisodeRecord, EpisodeRef,
    InMemoryClient, Ingest, IngestedRepresentation, MemoryAdd, NativeClient, OperatorId, Replace,
    Search, SearchResult,
};
use gralkor::graph::Engine;
use gralkor::llm::Embedder;
use gralkor::runtime::{Runtime, RuntimeConfig};
use tokio::sync::watch;

pub fn op() -> OperatorId {
    OperatorId::new(format!("op-{}", uuid::Uuid::new_v4())).unwrap()
}

/// The native client with no language model over the shared server, and its embedder.
pub async fn native_with(config: RuntimeConfig, embedder: Arc<dyn Embedder>) -> NativeClient {
    let engine = Engine::without_llm(common::db().await, embedder);
    NativeClient::from_parts(Runtime::new(config).unwrap(), NativeStorage::new(engine))
}

pub async fn native(config: RuntimeConfig) -> (NativeClient, CountingEmbedder) {
    let embedder = CountingEmbedder::new();
    (
        native_with(config, Arc::new(embedder.clone())).await,
        embedder,
    )
}

/// Counts futures dropped before they finished.
pub struct DropGuard(pub Arc<AtomicUsize>, pub bool);

impl Drop for DropGuard {
    fn drop(&mut self) {
        if !self.1 {
            self.0.fetch_add(1, Ordering::SeqCst);
        }
    }
}

/// An embedder that answers only once its gate is open (never, if it stays shut),
/// counting the requests dropped while waiting.
#[derive(Debug, Clone)]
pub struct GatedEmbedder {
    pub inner: CountingEmbedder,
    pub gate: watch::Sender<bool>,
    pub cancelled: Arc<AtomicUsize>,
    /// Requests that reached the gate.
    pub entered: watch::Sender<usize>,
}

impl GatedEmbedder {
    pub fn shut() -> GatedEmbedder {
        GatedEmbedder {
            inner: CountingEmbedder::new(),
            gate: watch::channel(false).0,
            cancelled: Arc::default(),
            entered: watch::channel(0).0,
        }
    }

    /// Waits until `n` requests have reached the gate.
    pub async fn entered(&self, n: usize) {
        let mut rx = self.entered.subscribe();
        rx.wait_for(|e| *e >= n).await.expect("embedder kept");
    }

    pub fn open(&self) {
        self.gate.send_replace(true);
    }
}

#[async_trait]
impl Embedder for GatedEmbedder {
    fn dimension(&self) -> usize {
        self.inner.dimension()
    }
    async fn embed(&self, texts: &[String], label: &str) -> gralkor::Result<Vec<Vec<f32>>> {
        let mut guard = DropGuard(self.cancelled.clone(), false);
        let mut rx = self.gate.subscribe();
        self.entered.send_modify(|e| *e += 1);
        rx.wait_for(|open| *open).await.expect("gate kept");
        guard.1 = true;
        self.inner.embed(texts, label).await
    }
    fn provider(&self) -> &str {
        "gated"
    }
    fn model(&self) -> &str {
        "hash"
    }
}

/// A client whose searches touching the `stalled` Destinations (or all of them, when
/// a search names none) never answer; everything else goes to the twin.
struct Stalling {
    inner: InMemoryClient,
    stalled: Vec<String>,
    cancelled: Arc<AtomicUsize>,
}

#[async_trait]
impl Client for Stalling {
    fn runtime(&self) -> &Runtime {
        self.inner.runtime()
    }
    async fn ingest(&self, r: &Ingest) -> gralkor::Result<Vec<IngestedRepresentation>> {
        self.inner.ingest(r).await
    }
    async fn replace(&self, r: &Replace) -> gralkor::Result<()> {
        self.inner.replace(r).await
    }
    async fn search(&self, r: &Search) -> gralkor::Result<Vec<SearchResult>> {
        let stalls =
            r.destinations.is_empty() || r.destinations.iter().any(|d| self.stalled.contains(d));
        if stalls {
            let _guard = DropGuard(self.cancelled.clone(), false);
            std::future::pending::<()>().await;
        }
        self.inner.search(r).await
    }
    async fn memory_add(&self, r: &MemoryAdd) -> gralkor::Result<()> {
        self.inner.memory_add(r).await
    }
    async fn await_background_writes(&self) {
        self.inner.await_background_writes().await
    }
    async fn get_episode(&self, r: &EpisodeRef) -> gralkor::Result<Option<EpisodeRecord>> {
        self.inner.get_episode(r).await
    }
    async fn remove_episode(&self, r: &EpisodeRef) -> gralkor::Result<bool> {
        self.inner.remove_episode(r).await
    }
    async fn build_indices(&self) -> gralkor::Result<()> {
        self.inner.build_indices().await
    }
    async fn build_communities(&self, r: &BuildCommunities) -> gralkor::Result<CommunityCounts> {
        self.inner.build_communities(r).await
    }
    async fn shutdown(&self) -> gralkor::Result<()> {
        self.inner.shutdown().await
    }
}

fn searches(client: &InMemoryClient) -> Vec<Search> {
    client
        .calls()
        .into_iter()
        .filter_map(|c| match c {
            Call::Search(s) => Some(s),
            _ => None,
        })
        .collect()
}

async fn remember(client: &dyn Client, op: &OperatorId, destination: &str, text: &str) {
    client
        .memory_add(&MemoryAdd::new(op, Content::conversation(text)).to_destination(destination))
        .await
        .unwrap();
    client.await_background_writes().await;
}

/// The exact block for these results, written out by hand from the §3.4 template.
fn expected_block(results: &[SearchResult]) -> String {
    let lines: Vec<String> = results
        .iter()
        .map(|r| format_fact(r.hit.as_fact().unwrap()))
        .collect();
    format!(
        "<gralkor-memory trust=\"untrusted\">\n{}\n\nSearch memory (up to 3 times, diverse queries) if you need more detail.\n</gralkor-memory>",
        lines.join("\n")
    )
}

const EMPTY_BLOCK: &str = "<gralkor-memory trust=\"untrusted\">\nNo relevant memories found.\n\n\
     Search memory (up to 3 times, diverse queries) if you need more detail.\n</gralkor-memory>";

// recall › presents the facts of one search in the exact untrusted block

async fn presents_the_facts_in_the_exact_block(client: &dyn Client) {
    let op = op();
    remember(
        client,
        &op,
        "personal",
        "Ada prefers green tea in the morning",
    )
    .await;
    let r = recall(
        client,
        &op,
        "Susu",
        Some("s-1"),
        "green tea",
        &RecallOptions::new(),
    )
    .await
    .unwrap();
    assert_eq!(r.facts.len(), 1, "{:?}", r.facts);
    assert!(!r.partial && r.missing.is_empty());
    assert_eq!(r.block, expected_block(&r.facts));
    let line = format_fact(r.facts[0].hit.as_fact().unwrap());
    assert!(
        line.starts_with("- Ada prefers green tea in the morning (created "),
        "{line}"
    );
    // Timestamps normalised: seconds precision, UTC as +0.
    assert!(line.contains("+0)") && !line.contains('Z'), "{line}");
    assert!(
        !line
            .split(' ')
            .any(|w| w.contains('T') && w.contains('.') && w.contains(':')),
        "{line}"
    );
    assert!(
        line.contains("(source: conversation — manual; episode: "),
        "{line}"
    );
}

#[tokio::test]
async fn recall_presents_the_facts_in_the_exact_block_in_memory() {
    presents_the_facts_in_the_exact_block(&InMemoryClient::new()).await;
}

#[tokio::test]
async fn recall_presents_the_facts_in_the_exact_block_native() {
    let (client, embedder) = native(RuntimeConfig::new()).await;
    presents_the_facts_in_the_exact_block(&client).await;
    // One search across every Destination: the query is embedded once.
    let before = embedder.requests();
    recall(
        &client,
        &op(),
        "Susu",
        None,
        "green tea",
        &RecallOptions::new(),
    )
    .await
    .unwrap();
    assert_eq!(embedder.requests() - before, 1);
}

// recall › an episode standing in as a fact presents its best passages, with its id and date

async fn presents_the_best_passages_of_a_long_episode(client: &dyn Client) {
    let op = op();
    let session: Vec<String> = (0..80)
        .map(|i| {
            if i == 57 {
                "Ada: I finally adopted a greyhound called Pixel last week.".to_owned()
            } else {
                let who = if i % 2 == 0 { "Ada" } else { "Bo" };
                format!("{who}: the weather was grey again on day {i}.")
            }
        })
        .collect();
    let content = session.join("\n");
    assert!(content.len() > 3_000);
    remember(client, &op, "personal", &content).await;
    let r = recall(
        client,
        &op,
        "Susu",
        None,
        "What is the name of Ada's greyhound?",
        &RecallOptions::new(),
    )
    .await
    .unwrap();
    assert_eq!(r.facts.len(), 1, "{:?}", r.facts);
    let f = r.facts[0].hit.as_fact().unwrap();
    // The turn that answers, deep in the session, within the budget — not the opening.
    assert!(f.fact.len() <= 2_000, "{} bytes", f.fact.len());
    assert!(
        f.fact.contains("adopted a greyhound called Pixel"),
        "{}",
        f.fact
    );
    // Only turns holding a query word: Bo never says Ada's name.
    assert!(!f.fact.contains("Bo:"), "{}", f.fact);
    // The line names the episode and its date.
    assert_eq!(f.sources[0].episode, f.uuid);
    assert!(f.valid_at.is_some());
    assert_eq!(r.block, expected_block(&r.facts));
    assert!(
        r.block.contains(&format!("episode: {})", f.uuid)),
        "{}",
        r.block
    );
    assert!(r.block.contains("(valid from "), "{}", r.block);
}

#[tokio::test]
async fn recall_presents_the_best_passages_of_a_long_episode_in_memory() {
    presents_the_best_passages_of_a_long_episode(&InMemoryClient::new()).await;
}

#[tokio::test]
async fn recall_presents_the_best_passages_of_a_long_episode_native() {
    let (client, _) = native(RuntimeConfig::new()).await;
    presents_the_best_passages_of_a_long_episode(&client).await;
}

// recall › nothing found → "No relevant memories found." inside the block

#[tokio::test]
async fn recall_of_nothing_says_no_relevant_memories_in_memory() {
    let client = InMemoryClient::new();
    let r = recall(&client, &op(), "Susu", None, "tea", &RecallOptions::new())
        .await
        .unwrap();
    assert_eq!(r.block, EMPTY_BLOCK);
    assert_eq!(memory_block(""), EMPTY_BLOCK);
    assert!(r.facts.is_empty());
}

#[tokio::test]
async fn recall_of_nothing_says_no_relevant_memories_native() {
    let (client, _) = native(RuntimeConfig::new()).await;
    let r = recall(&client, &op(), "Susu", None, "tea", &RecallOptions::new())
        .await
        .unwrap();
    assert_eq!(r.block, EMPTY_BLOCK);
}

// recall › one fact search of every accessible Destination, 10 facts in all, merged by rank

async fn ten_facts_in_all_merged_by_rank(client: &dyn Client, recorded: Option<&InMemoryClient>) {
    let op = op();
    for i in 0..12 {
        remember(
            client,
            &op,
            "personal",
            &format!("personal note {i} about tea"),
        )
        .await;
        remember(client, &op, "global", &format!("global note {i} about tea")).await;
    }
    let r = recall(client, &op, "Susu", None, "tea note", &RecallOptions::new())
        .await
        .unwrap();
    assert_eq!(r.facts.len(), 10);
    let dests: Vec<&str> = r.facts.iter().map(|f| f.destination.as_str()).collect();
    assert_eq!(
        dests,
        [
            "personal", "global", "personal", "global", "personal", "global", "personal", "global",
            "personal", "global"
        ]
    );
    assert_eq!(r.block, expected_block(&r.facts));
    if let Some(twin) = recorded {
        let s = searches(twin);
        let last = s.last().unwrap();
        assert!(last.destinations.is_empty() && last.lenses.is_empty());
        assert_eq!(last.max_results, 10);
        assert_eq!(
            last.result_type,
            gralkor::client::ResultType::Facts { edge_types: vec![] }
        );
    }
    let three = recall(
        client,
        &op,
        "Susu",
        None,
        "tea note",
        &RecallOptions::new().max_results(3),
    )
    .await
    .unwrap();
    assert_eq!(three.facts.len(), 3);
}

#[tokio::test]
async fn recall_searches_every_destination_once_ten_facts_in_all_in_memory() {
    let client = InMemoryClient::new();
    ten_facts_in_all_merged_by_rank(&client, Some(&client)).await;
}

#[tokio::test]
async fn recall_searches_every_destination_once_ten_facts_in_all_native() {
    let (client, _) = native(RuntimeConfig::new()).await;
    ten_facts_in_all_merged_by_rank(&client, None).await;
}

// recall › bad input is refused before any search

#[tokio::test]
async fn recall_refuses_bad_options_and_names_before_searching() {
    let client = InMemoryClient::new();
    let err = recall(
        &client,
        &op(),
        "Susu",
        None,
        "tea",
        &RecallOptions::new().deadline(Duration::ZERO),
    )
    .await
    .unwrap_err();
    assert!(
        matches!(&err, Error::Config { field, rule } if field == "recall.deadline" && rule == "must be positive"),
        "{err:?}"
    );
    let err = recall(&client, &op(), " ", None, "tea", &RecallOptions::new())
        .await
        .unwrap_err();
    assert!(
        matches!(&err, Error::InvalidInput { field, .. } if field == "agent_name"),
        "{err:?}"
    );
    let err = recall(
        &client,
        &op(),
        "Susu",
        None,
        "tea",
        &RecallOptions::new().max_results(0),
    )
    .await
    .unwrap_err();
    assert!(
        matches!(&err, Error::Config { field, .. } if field == "recall.max_results"),
        "{err:?}"
    );
    assert!(client.calls().is_empty());
    // A search error passes through, with no block.
    let err = recall(&client, &op(), "Susu", None, "  ", &RecallOptions::new())
        .await
        .unwrap_err();
    assert!(
        matches!(&err, Error::InvalidInput { field, .. } if field == "query"),
        "{err:?}"
    );
}

// recall › deadline › on expiry the search is cancelled and RecallDeadlineExpired returned

#[tokio::test(start_paused = true)]
async fn recall_past_its_default_deadline_is_cancelled_in_memory() {
    let cancelled = Arc::new(AtomicUsize::new(0));
    let client = Stalling {
        inner: InMemoryClient::new(),
        stalled: vec!["personal".into()],
        cancelled: cancelled.clone(),
    };
    let started = tokio::time::Instant::now();
    let err = recall(&client, &op(), "Susu", None, "tea", &RecallOptions::new())
        .await
        .unwrap_err();
    assert!(
        matches!(err, Error::RecallDeadlineExpired { after } if after == Duration::from_secs(12)),
        "{err:?}"
    );
    assert!(!err.is_retryable());
    assert_eq!(err.to_string(), "recall deadline expired after 12s");
    // The (paused) clock moved exactly to the default deadline.
    assert_eq!(started.elapsed(), Duration::from_secs(12));
    assert_eq!(
        cancelled.load(Ordering::SeqCst),
        1,
        "the search was dropped"
    );
}

#[tokio::test]
async fn recall_past_its_deadline_is_cancelled_native() {
    let embedder = GatedEmbedder::shut();
    let client = native_with(RuntimeConfig::new(), Arc::new(embedder.clone())).await;
    let options = RecallOptions::new().deadline(Duration::from_millis(100));
    let err = recall(&client, &op(), "Susu", Some("s"), "tea", &options)
        .await
        .unwrap_err();
    assert!(
        matches!(err, Error::RecallDeadlineExpired { after } if after == Duration::from_millis(100)),
        "{err:?}"
    );
    assert_eq!(embedder.cancelled.load(Ordering::SeqCst), 1);
    // With the provider answering again, the same recall succeeds.
    embedder.open();
    assert!(
        recall(&client, &op(), "Susu", Some("s"), "tea", &options)
            .await
            .is_ok()
    );
}

// recall › deadline › partial (opt-in): what answered in time, marked partial

#[tokio::test(start_paused = true)]
async fn partial_recall_returns_the_destinations_that_answered_in_memory() {
    let cancelled = Arc::new(AtomicUsize::new(0));
    let client = Stalling {
        inner: InMemoryClient::new(),
        stalled: vec!["global".into()],
        cancelled: cancelled.clone(),
    };
    let op = op();
    remember(&client, &op, "personal", "Ada prefers tea").await;
    remember(&client, &op, "global", "The office serves tea").await;
    let options = RecallOptions::new().partial(true);
    let r = recall(&client, &op, "Susu", None, "tea", &options)
        .await
        .unwrap();
    assert!(r.partial);
    assert_eq!(r.missing, ["global"]);
    assert_eq!(r.facts.len(), 1);
    assert_eq!(r.facts[0].destination, "personal");
    assert_eq!(r.block, expected_block(&r.facts));
    assert_eq!(cancelled.load(Ordering::SeqCst), 1);
    // Every Destination late: the deadline error.
    let all = Stalling {
        inner: InMemoryClient::new(),
        stalled: vec!["personal".into(), "global".into()],
        cancelled: cancelled.clone(),
    };
    let err = recall(&all, &op, "Susu", None, "tea", &options)
        .await
        .unwrap_err();
    assert!(
        matches!(err, Error::RecallDeadlineExpired { .. }),
        "{err:?}"
    );
}

#[tokio::test]
async fn partial_recall_costs_one_query_embedding_per_destination_native() {
    let (client, embedder) = native(RuntimeConfig::new().destination("team")).await;
    let op = op();
    remember(&client, &op, "team", "The team prefers tea").await;
    let before = embedder.requests();
    let r = recall(
        &client,
        &op,
        "Susu",
        None,
        "tea",
        &RecallOptions::new().partial(true),
    )
    .await
    .unwrap();
    assert!(!r.partial && r.missing.is_empty());
    assert_eq!(r.facts.len(), 1);
    // personal, global, team: three searches, three query embeddings (the default
    // mode's single search embeds once; see the test above).
    assert_eq!(embedder.requests() - before, 3);
}

// auto-recall › before_turn

#[tokio::test]
async fn before_turn_skips_short_prompts_and_a_disabled_agent() {
    let client = Arc::new(InMemoryClient::new());
    let hooks = AgentRecall::new(client.clone(), op(), "Susu", AutoRecall::new()).unwrap();
    assert_eq!(hooks.before_turn(Some("s"), "hey!").await.unwrap(), None);
    assert_eq!(hooks.before_turn(Some("s"), "  ok   ").await.unwrap(), None);
    let off = AgentRecall::new(client.clone(), op(), "Susu", AutoRecall::disabled()).unwrap();
    assert_eq!(
        off.before_turn(Some("s"), "where does Ada work?")
            .await
            .unwrap(),
        None
    );
    assert!(client.calls().is_empty());
    // Five characters are enough.
    assert_eq!(
        hooks.before_turn(None, "hello").await.unwrap().as_deref(),
        Some(EMPTY_BLOCK)
    );
    assert_eq!(searches(&client).len(), 1);
}

#[tokio::test]
async fn before_turn_refuses_bad_configuration() {
    let client: Arc<dyn Client> = Arc::new(InMemoryClient::new());
    let err = AgentRecall::new(client.clone(), op(), " ", AutoRecall::new()).unwrap_err();
    assert!(matches!(&err, Error::InvalidInput { field, .. } if field == "agent_name"));
    let err = AgentRecall::new(
        client.clone(),
        op(),
        "Susu",
        AutoRecall::new().deadline(Duration::ZERO),
    )
    .unwrap_err();
    assert!(matches!(&err, Error::Config { field, .. } if field == "auto_recall.deadline"));
    let err =
        AgentRecall::new(client, op(), "Susu", AutoRecall::new().long_term_results(0)).unwrap_err();
    assert!(
        matches!(&err, Error::Config { field, .. } if field == "auto_recall.long_term_results")
    );
}

async fn long_term_and_session_results_deduplicated(client: Arc<dyn Client>) {
    let op = op();
    remember(client.as_ref(), &op, "personal", "Ada moved to Lisbon").await;
    remember(
        client.as_ref(),
        &op,
        "conversation-notes",
        "Ada moved to Lisbon",
    )
    .await;
    remember(
        client.as_ref(),
        &op,
        "conversation-notes",
        "Ada asked about Lisbon trams",
    )
    .await;
    let config = AutoRecall::new().session_destination("conversation-notes");
    let hooks = AgentRecall::new(client.clone(), op.clone(), "Susu", config).unwrap();
    let block = hooks
        .before_turn(Some("s-1"), "what about Lisbon?")
        .await
        .unwrap()
        .unwrap();
    assert_eq!(block.matches("Ada moved to Lisbon").count(), 1, "{block}");
    let moved = block.find("- Ada moved to Lisbon").unwrap();
    let trams = block.find("- Ada asked about Lisbon trams").unwrap();
    assert!(moved < trams, "long-term first: {block}");
    assert!(block.starts_with("<gralkor-memory trust=\"untrusted\">\n"));
    // No session id yet: long-term memory only.
    let block = hooks
        .before_turn(None, "what about Lisbon?")
        .await
        .unwrap()
        .unwrap();
    assert!(
        block.contains("Ada moved to Lisbon") && !block.contains("trams"),
        "{block}"
    );
}

#[tokio::test]
async fn before_turn_deduplicates_long_term_and_session_results_in_memory() {
    let client = Arc::new(
        InMemoryClient::with_config(RuntimeConfig::new().destination("conversation-notes"))
            .unwrap(),
    );
    long_term_and_session_results_deduplicated(client.clone()).await;
    let s = searches(&client);
    // With a session: long-term (every Destination but the session one, 5) and
    // session (3); without: long-term only.
    assert_eq!(s.len(), 3);
    assert_eq!(s[0].destinations, ["personal", "global"]);
    assert_eq!(s[0].max_results, 5);
    assert_eq!(s[1].destinations, ["conversation-notes"]);
    assert_eq!(s[1].max_results, 3);
    assert_eq!(s[2].destinations, ["personal", "global"]);
}

#[tokio::test]
async fn before_turn_deduplicates_long_term_and_session_results_native() {
    let (client, _) = native(RuntimeConfig::new().destination("conversation-notes")).await;
    long_term_and_session_results_deduplicated(Arc::new(client)).await;
}

// auto-recall › session-group mode (the OpenClaw plugin's): the session's own group
// `session-<id>`, deduplicated against long-term memory, in a `<relevant-memories>` block

async fn session_group_mode_recalls_the_sessions_own_group(client: Arc<dyn Client>) {
    let op = op();
    let id = uuid::Uuid::new_v4().simple().to_string();
    let (mine, other) = (format!("s1-{id}"), format!("s2-{id}"));
    let group = format!("session-{mine}");
    remember(client.as_ref(), &op, "personal", "Ada moved to Lisbon").await;
    remember(client.as_ref(), &op, &group, "Ada moved to Lisbon").await;
    remember(client.as_ref(), &op, &group, "Ada asked about Lisbon trams").await;
    let hooks =
        AgentRecall::new(client.clone(), op.clone(), "Susu", AutoRecall::openclaw()).unwrap();
    let block = hooks
        .before_turn(Some(&mine), "what about Lisbon?")
        .await
        .unwrap()
        .unwrap();
    assert!(
        block.starts_with("<relevant-memories trust=\"untrusted\">\n")
            && block.ends_with("\n</relevant-memories>"),
        "{block}"
    );
    assert_eq!(block.matches("Ada moved to Lisbon").count(), 1, "{block}");
    let moved = block.find("- Ada moved to Lisbon").unwrap();
    let trams = block.find("- Ada asked about Lisbon trams").unwrap();
    assert!(moved < trams, "long-term first: {block}");
    // Another session's recall reads its own (empty) group, and long-term memory
    // never includes a session group.
    let block = hooks
        .before_turn(Some(&other), "what about Lisbon?")
        .await
        .unwrap()
        .unwrap();
    assert!(
        block.contains("Ada moved to Lisbon") && !block.contains("trams"),
        "{block}"
    );
}

#[tokio::test]
async fn session_group_mode_recalls_the_sessions_own_group_in_memory() {
    let client = Arc::new(InMemoryClient::new());
    session_group_mode_recalls_the_sessions_own_group(client.clone()).await;
    let s = searches(&client);
    assert_eq!(s.len(), 4);
    // Long-term: selector-free, 5; session: the session's group, 3.
    assert!(s[0].destinations.is_empty());
    assert_eq!(s[0].max_results, 5);
    assert!(s[1].destinations[0].starts_with("session-s1-"));
    assert_eq!(s[1].max_results, 3);
    assert!(s[3].destinations[0].starts_with("session-s2-"));
}

#[tokio::test]
async fn session_group_mode_recalls_the_sessions_own_group_native() {
    let (client, _) = native(RuntimeConfig::new()).await;
    session_group_mode_recalls_the_sessions_own_group(Arc::new(client)).await;
}

#[test]
fn session_group_mode_and_the_block_name_are_checked() {
    let err = AutoRecall::openclaw()
        .session_destination("conversation-notes")
        .validate()
        .unwrap_err();
    assert!(
        matches!(&err, Error::Config { field, .. } if field == "auto_recall.session_groups"),
        "{err}"
    );
    for bad in ["", "Relevant", "a b", "x>", "-x"] {
        let err = AutoRecall::new().block_name(bad).validate().unwrap_err();
        assert!(
            matches!(&err, Error::Config { field, .. } if field == "auto_recall.block_name"),
            "{bad}: {err}"
        );
    }
    // A session group is never registered.
    let err = RuntimeConfig::new()
        .destination("session-x")
        .build()
        .unwrap_err();
    assert!(
        matches!(&err, Error::Config { field, .. } if field == "destinations[0]"),
        "{err}"
    );
}
