//! A crashed owner's claim is taken over at once (test-trees/graph-ingest.md,
//! "claims"): this binary re-runs itself as a child that opens an embedded FalkorDB
//! in a temporary data directory and starts an episode whose extraction never
//! returns — the episode is written and claimed for the default 60 s lease — says so,
//! and is killed with SIGKILL, its server first. The parent then opens the same data
//! directory and finishes the episode with `resume_pending` at once, well inside the
//! dead child's lease.

#[path = "../common/mod.rs"]
mod common;

use std::io::{BufRead, BufReader};
use std::process::{Command, Stdio};
use std::sync::Arc;

use async_trait::async_trait;
use common::graph::t;
use common::ingest::{CountingEmbedder, Rules, World};
use gralkor::falkordb::{EmbeddedConfig, FalkorConfig, FalkorDb, Params, Value};
use gralkor::graph::{AddEpisode, Engine, EpisodeState, SourceKind};
use gralkor::llm::{GenerateRequest, Generation, LanguageModel, ModelSize};
use tokio::sync::Notify;

const CHILD_DIR: &str = "GRALKOR_OWNER_CRASH_CHILD_DIR";
const READY: &str = "owner-crash-child: claimed";
const GRAPH: &str = "crash";
const TEST: &str = "owner_crash::an_episode_claimed_by_a_killed_process_is_resumed_at_once";

/// A model whose every call announces itself and never returns.
#[derive(Debug, Clone)]
struct Hanging(Arc<Notify>);

#[async_trait]
impl LanguageModel for Hanging {
    async fn generate(&self, _: &GenerateRequest) -> gralkor::Result<Generation> {
        self.0.notify_one();
        std::future::pending().await
    }
    fn provider(&self) -> &str {
        "hanging"
    }
    fn model(&self, _: ModelSize) -> &str {
        "hanging"
    }
}

fn episode() -> AddEpisode {
    AddEpisode::new(
        "Ada keeps bees in Porto",
        SourceKind::Message,
        t("2024-01-01T00:00:00Z"),
    )
}

async fn connect(dir: &str) -> FalkorDb {
    FalkorDb::connect(FalkorConfig::embedded(EmbeddedConfig::new(dir)))
        .await
        .expect("connect to the embedded server")
}

/// The child: claim the episode, report, then wait to be killed.
fn child(dir: &str) {
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    rt.block_on(async {
        let db = connect(dir).await;
        let entered = Arc::new(Notify::new());
        let engine = Engine::new(
            db.clone(),
            Arc::new(Hanging(entered.clone())),
            Arc::new(CountingEmbedder::new()),
        );
        tokio::spawn(async move { engine.add_episode(GRAPH, episode()).await });
        entered.notified().await;
        let server = db
            .embedded_server()
            .and_then(|s| s.pid())
            .expect("an embedded server");
        println!("{READY} server={server}");
        std::future::pending::<()>().await;
    });
}

/// The pending episode's lease: its owner and the milliseconds left on it.
async fn lease(db: &FalkorDb) -> (String, i64) {
    let res = db
        .ro_query(
            GRAPH,
            "MATCH (e:Episodic {state: 'pending'}) \
             RETURN e.lease_owner AS owner, e.lease_until - timestamp() AS left",
            &Params::new(),
        )
        .await
        .unwrap();
    (
        res.get(0, "owner")
            .and_then(Value::as_str)
            .expect("a claimed pending episode")
            .to_owned(),
        res.get(0, "left").and_then(Value::as_int).unwrap(),
    )
}

mod owner_crash {
    use super::*;

    #[test]
    fn an_episode_claimed_by_a_killed_process_is_resumed_at_once() {
        if let Ok(dir) = std::env::var(CHILD_DIR) {
            child(&dir);
            return;
        }
        let dir = tempfile::Builder::new()
            .prefix("gralkor-owner-crash-")
            .tempdir()
            .unwrap();
        let path = dir.path().to_str().unwrap().to_string();
        let mut child = Command::new(std::env::current_exe().unwrap())
            .args(["--exact", TEST, "--nocapture", "--test-threads=1"])
            .env(CHILD_DIR, &path)
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .unwrap();
        let stdout = child.stdout.take().unwrap();
        let mut server: Option<i32> = None;
        for line in BufReader::new(stdout).lines() {
            let line = line.unwrap();
            if let Some(at) = line.find(READY) {
                let pid = line[at + READY.len()..]
                    .trim()
                    .trim_start_matches("server=");
                server = Some(pid.parse().unwrap());
                break;
            }
        }
        let server = server.expect("the child exited before claiming its episode");
        // SAFETY: kill(2) on a pid the child reported; no memory is involved.
        assert_eq!(unsafe { libc::kill(server, libc::SIGKILL) }, 0);
        child.kill().unwrap();
        assert!(!child.wait().unwrap().success());

        let rt = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .enable_all()
            .build()
            .unwrap();
        rt.block_on(async {
            let db = connect(&path).await;
            let (owner, left) = lease(&db).await;
            assert!(
                owner.contains(&format!(".{}.", child.id())),
                "the owner id names the dead child: {owner}"
            );
            // Far inside the default 60 s lease: only the takeover can finish it now.
            assert!(left > 30_000, "{left} ms left on the lease");
            let w = World::new(&db, Rules::narrator());
            let report = w.engine.resume_pending(GRAPH, None).await.unwrap();
            assert!(report.busy.is_empty(), "{report:?}");
            assert!(report.failed.is_empty(), "{report:?}");
            assert_eq!(report.completed.len(), 1, "{report:?}");
            let uuid = report.completed[0].episode.uuid;
            let stored = w.engine.get_episode(GRAPH, uuid).await.unwrap().unwrap();
            assert_eq!(stored.state, EpisodeState::Complete);
            db.shutdown().await.unwrap();
        });
    }

    #[test]
    fn a_claim_whose_owner_lives_is_left_to_its_lease() {
        let rt = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .enable_all()
            .build()
            .unwrap();
        rt.block_on(async {
            let dir = tempfile::tempdir().unwrap();
            let db = connect(dir.path().to_str().unwrap()).await;
            let entered = Arc::new(Notify::new());
            // This process holds the claim (another engine, so another owner id).
            let holder = Engine::new(
                db.clone(),
                Arc::new(Hanging(entered.clone())),
                Arc::new(CountingEmbedder::new()),
            );
            let task = tokio::spawn(async move { holder.add_episode(GRAPH, episode()).await });
            entered.notified().await;
            let w = World::new(&db, Rules::narrator());
            let report = w.engine.resume_pending(GRAPH, None).await.unwrap();
            assert_eq!(report.busy.len(), 1, "{report:?}");
            assert!(report.completed.is_empty(), "{report:?}");
            task.abort();
            db.shutdown().await.unwrap();
        });
    }
}
