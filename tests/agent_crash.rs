//! An accepted turn survives a crash (test-trees/capture-buffer.md, "durability"):
//! this binary re-runs itself as a child that connects a native client to an embedded
//! FalkorDB in a temporary data directory, accepts turns into a durable capture buffer
//! (one session flushed, two not, and one whose flush is in the middle of its
//! write: the episode has landed, the entry is not yet removed), says so, and is
//! killed with SIGKILL — its FalkorDB server first, so nothing is saved on the way out. The parent
//! then connects to the same data directory, creates a buffer, flushes, and finds
//! every accepted turn written exactly once.

use std::io::{BufRead, BufReader};
use std::process::{Command, Stdio};
use std::time::Duration;

use gralkor::agent::capture::{Capture, CaptureBuffer, CaptureConfig};
use gralkor::agent::turn::Turn;
use gralkor::client::{Client, EpisodeRecord, NativeClient, OperatorId, Search};
use gralkor::config::Config;
use gralkor::falkordb::{EmbeddedConfig, FalkorConfig};
use gralkor::lens::{Ingest, Ingestion, Lens, LensStore};
use gralkor::provenance::Writer;
use gralkor::runtime::RuntimeConfig;

const CHILD_DIR: &str = "GRALKOR_CAPTURE_CRASH_CHILD_DIR";
const READY: &str = "capture-crash-child: accepted";
const TURNS: usize = 5;

fn config(dir: &str) -> Config {
    Config::new(FalkorConfig::embedded(EmbeddedConfig::new(dir)))
}

/// The child's ingestion for the Lens `midflush`: writes, says so, then never
/// returns (the process is killed there).
#[derive(Debug, Clone)]
struct WriteThenHang(std::sync::Arc<tokio::sync::Notify>);

impl Ingestion for WriteThenHang {
    async fn ingest(&self, request: &Ingest, store: &LensStore) -> gralkor::Result<()> {
        store
            .add(request.content.clone(), &request.source_description)
            .await?;
        self.0.notify_one();
        std::future::pending::<()>().await;
        Ok(())
    }
}

fn runtime(ingestion: Option<WriteThenHang>) -> RuntimeConfig {
    let lens = Lens::appending("midflush", "personal");
    match ingestion {
        Some(i) => RuntimeConfig::new().lens(lens.ingestion(i)),
        None => RuntimeConfig::new().lens(lens),
    }
}

fn op() -> OperatorId {
    OperatorId::new("crash-op").unwrap()
}

fn turn(session: &str, i: usize) -> Turn {
    Turn::completed(
        &format!("crashmark {session}{i} question"),
        ["tool clock → now"],
        &format!("{session}{i} answer"),
    )
}

/// The child: accept turns, report, then wait to be killed.
fn child(dir: &str) {
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    rt.block_on(async {
        let landed = std::sync::Arc::new(tokio::sync::Notify::new());
        let client =
            NativeClient::connect(config(dir), runtime(Some(WriteThenHang(landed.clone()))))
                .await
                .expect("child connects");
        let buffer = CaptureBuffer::native(&client, CaptureConfig::new())
            .await
            .expect("child buffer");
        let c = |s: &str, i| Capture::new(s, op(), "Susu", "Ada", turn(s, i));
        for i in 0..TURNS {
            buffer.append(c("done", i)).await.unwrap();
        }
        buffer
            .flush_and_await("done", Duration::from_secs(60))
            .await
            .unwrap();
        for i in 0..TURNS {
            buffer.append(c("direct", i)).await.unwrap();
            buffer
                .append(c("lens", i).lenses(["personal-chat"]))
                .await
                .unwrap();
        }
        for i in 0..TURNS {
            buffer
                .append(c("midflush", i).lenses(["midflush"]))
                .await
                .unwrap();
        }
        buffer.flush("midflush").await.unwrap();
        landed.notified().await;
        let server = client
            .storage()
            .db()
            .embedded_server()
            .and_then(|s| s.pid())
            .expect("an embedded server");
        println!("{READY} server={server}");
        std::future::pending::<()>().await;
    });
}

async fn episodes(client: &NativeClient) -> Vec<EpisodeRecord> {
    client
        .search(
            &Search::new(op(), "crashmark")
                .destinations(["personal"])
                .max_results(100),
        )
        .await
        .unwrap()
        .into_iter()
        .filter_map(|r| r.hit.as_episode().cloned())
        .collect()
}

#[test]
fn an_accepted_turn_survives_kill_9_and_is_written_exactly_once() {
    if let Ok(dir) = std::env::var(CHILD_DIR) {
        child(&dir);
        return;
    }
    let dir = tempfile::Builder::new()
        .prefix("gralkor-capture-crash-")
        .tempdir()
        .unwrap();
    let path = dir.path().to_str().unwrap().to_string();
    let mut child = Command::new(std::env::current_exe().unwrap())
        .args([
            "--exact",
            "an_accepted_turn_survives_kill_9_and_is_written_exactly_once",
            "--nocapture",
            "--test-threads=1",
        ])
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
    let server = server.expect("the child exited before accepting its turns");
    // The server first, so it cannot save on its way out; then the process holding
    // the buffer. Both with SIGKILL.
    // SAFETY: kill(2) on a pid the child reported; no memory is involved.
    assert_eq!(unsafe { libc::kill(server, libc::SIGKILL) }, 0);
    child.kill().unwrap();
    let status = child.wait().unwrap();
    assert!(!status.success());

    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    rt.block_on(async {
        let client = NativeClient::connect(config(&path), runtime(None))
            .await
            .expect("restart on the same data directory");
        let before = episodes(&client).await;
        assert_eq!(before.len(), 2, "the flushed session and the one mid-flush");
        let buffer = CaptureBuffer::native(&client, CaptureConfig::new())
            .await
            .unwrap();
        assert_eq!(buffer.sessions().await, ["direct", "lens", "midflush"]);
        assert_eq!(buffer.pending("lens").await.len(), TURNS);
        buffer.flush_all().await.unwrap();

        let written = episodes(&client).await;
        assert_eq!(written.len(), 4, "one episode per session");
        for session in ["done", "direct", "lens", "midflush"] {
            for i in 0..TURNS {
                let needle =
                    format!("Ada: crashmark {session}{i} question\nSusu: {session}{i} answer");
                let n = written
                    .iter()
                    .filter(|e| e.content.contains(&needle))
                    .count();
                assert_eq!(n, 1, "{session}{i} written {n} times");
            }
        }
        let lens = written
            .iter()
            .find(|e| e.content.contains("lens0"))
            .unwrap();
        assert_eq!(lens.writer, Some(Writer::Lens("personal-chat".into())));
        let direct = written
            .iter()
            .find(|e| e.content.contains("direct0"))
            .unwrap();
        assert_eq!(direct.writer, Some(Writer::Direct));
        assert_eq!(direct.source_description, "captured");

        // Nothing is left pending: a third start finds nothing to flush.
        let again = CaptureBuffer::native(&client, CaptureConfig::new())
            .await
            .unwrap();
        assert!(again.sessions().await.is_empty());
        client.shutdown().await.unwrap();
    });
}
