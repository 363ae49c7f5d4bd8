//! An episode whose commit takes the server down is quarantined instead of crashing it
//! again and again (test-trees/graph-ingest.md, "quarantine"). This binary has its own
//! real embedded server, which the test kills while a commit is in flight.

#[path = "../common/mod.rs"]
mod common;

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use common::TestGraph;
use common::graph::t;
use common::ingest::{Rules, World, extraction};
use gralkor::Error;
use gralkor::graph::{self, AddEpisode, EpisodeState, OutcomeStatus, SourceKind};
use tracing::span::{Attributes, Id, Record};
use tracing::{Event, Metadata, Subscriber};
use uuid::Uuid;

/// The tests kill the one server of this binary: one at a time.
static SERIAL: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());

/// A subscriber that kills the server (SIGKILL, as a crash) whenever the engine opens
/// the span around a commit statement — before the statement reaches the server — as
/// long as `kills_left` allows; `kills` counts the kills.
struct CrashOnCommit {
    kills_left: Arc<AtomicUsize>,
    kills: Arc<AtomicUsize>,
    next_id: AtomicUsize,
}

impl CrashOnCommit {
    /// Installs one for this thread, allowed `kills_left` kills; returns the guard, the
    /// allowance (set it to 0 to disarm) and the kill count.
    fn install(
        kills_left: usize,
    ) -> (
        tracing::subscriber::DefaultGuard,
        Arc<AtomicUsize>,
        Arc<AtomicUsize>,
    ) {
        let left = Arc::new(AtomicUsize::new(kills_left));
        let kills = Arc::new(AtomicUsize::new(0));
        let guard = tracing::subscriber::set_default(CrashOnCommit {
            kills_left: left.clone(),
            kills: kills.clone(),
            next_id: AtomicUsize::new(0),
        });
        (guard, left, kills)
    }
}

impl Subscriber for CrashOnCommit {
    fn enabled(&self, _: &Metadata<'_>) -> bool {
        true
    }
    fn new_span(&self, span: &Attributes<'_>) -> Id {
        if span.metadata().name() == "commit_statement"
            && self
                .kills_left
                .fetch_update(Ordering::SeqCst, Ordering::SeqCst, |n| n.checked_sub(1))
                .is_ok()
        {
            let pid = common::server().pid().expect("the server runs");
            let pid = libc::pid_t::try_from(pid).unwrap();
            // SAFETY: kill(2) on our own child server's pid.
            assert_eq!(unsafe { libc::kill(pid, libc::SIGKILL) }, 0);
            self.kills.fetch_add(1, Ordering::SeqCst);
        }
        Id::from_u64(self.next_id.fetch_add(1, Ordering::SeqCst) as u64 + 1)
    }
    fn record(&self, _: &Id, _: &Record<'_>) {}
    fn record_follows_from(&self, _: &Id, _: &Id) {}
    fn event(&self, _: &Event<'_>) {}
    fn enter(&self, _: &Id) {}
    fn exit(&self, _: &Id) {}
}

#[tokio::test]
async fn an_episode_whose_commit_crashes_the_server_is_quarantined_not_retried() {
    let _serial = SERIAL.lock().await;
    let g = TestGraph::new("quarantine").await;
    let w = World::new(&g.db, Rules::default());
    w.rules.extraction(
        "I moved to Porto",
        extraction(
            &[("Will", 0), ("Porto", 0)],
            &[(
                "Will",
                "moved to",
                "Porto",
                "Will moved to Porto.",
                None,
                None,
            )],
        ),
    );
    // The graph is prepared before the crashes begin.
    w.engine.build_indices(&g.name).await.unwrap();
    let (_guard, kills_left, kills) = CrashOnCommit::install(usize::MAX);
    let restarts = common::server().restarts();
    let id = Uuid::new_v4();
    let request = || {
        AddEpisode::new(
            "Will: I moved to Porto.",
            SourceKind::Message,
            t("2024-05-01T10:00:00Z"),
        )
        .uuid(id)
    };

    let err = w.engine.add_episode(&g.name, request()).await.unwrap_err();
    assert!(
        matches!(err, Error::EpisodeQuarantined { uuid, unanswered: 2 } if uuid == id),
        "{err}"
    );
    assert!(!err.is_retryable());
    // Two commits were sent and lost the server; the third was never sent.
    assert_eq!(kills.load(Ordering::SeqCst), 2);
    let server = common::server();
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(30);
    while server.restarts() < restarts + 2 && std::time::Instant::now() < deadline {
        tokio::time::sleep(std::time::Duration::from_millis(5)).await;
    }
    assert_eq!(server.restarts(), restarts + 2);

    let stored = graph::get_episode(&g.db, &g.name, id)
        .await
        .unwrap()
        .unwrap();
    assert_eq!(stored.state, EpisodeState::Quarantined);
    assert_eq!(w.engine.quarantined(&g.name).await.unwrap(), vec![id]);

    // Neither a resume nor a replay sends it again.
    let report = w.engine.resume_pending(&g.name, None).await.unwrap();
    assert!(report.completed.is_empty() && report.failed.is_empty());
    assert_eq!(report.quarantined, vec![id]);
    let again = w.engine.add_episode(&g.name, request()).await.unwrap_err();
    assert!(matches!(again, Error::EpisodeQuarantined { .. }), "{again}");
    assert_eq!(kills.load(Ordering::SeqCst), 2, "no commit was sent again");

    // Released (the server "upgraded": no more crashes), it completes.
    kills_left.store(0, Ordering::SeqCst);
    assert!(w.engine.release_quarantined(&g.name, id).await.unwrap());
    assert!(!w.engine.release_quarantined(&g.name, id).await.unwrap());
    let report = w.engine.resume_pending(&g.name, None).await.unwrap();
    assert_eq!(report.completed.len(), 1, "{:?}", report.failed);
    assert_eq!(report.completed[0].status, OutcomeStatus::Completed);
    assert!(report.quarantined.is_empty());
    assert!(w.engine.quarantined(&g.name).await.unwrap().is_empty());
}

#[tokio::test]
async fn one_lost_commit_is_retried_and_completes() {
    let _serial = SERIAL.lock().await;
    let g = TestGraph::new("quarantine-once").await;
    let w = World::new(&g.db, Rules::default());
    w.rules.extraction(
        "I work at Acme",
        extraction(
            &[("Alice", 0), ("Acme", 0)],
            &[(
                "Alice",
                "works at",
                "Acme",
                "Alice works at Acme.",
                None,
                None,
            )],
        ),
    );
    w.engine.build_indices(&g.name).await.unwrap();
    // A single crash (a restart, an OOM kill).
    let (_guard, _, kills) = CrashOnCommit::install(1);
    let out = w
        .engine
        .add_episode(
            &g.name,
            AddEpisode::new(
                "Alice: I work at Acme.",
                SourceKind::Message,
                t("2024-05-01T10:00:00Z"),
            ),
        )
        .await
        .unwrap();
    assert_eq!(out.status, OutcomeStatus::Completed);
    assert_eq!(kills.load(Ordering::SeqCst), 1);
    assert!(w.engine.quarantined(&g.name).await.unwrap().is_empty());
}
