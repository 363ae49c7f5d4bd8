//! Shared set-up for the integration tests: one real embedded FalkorDB server per test
//! binary, and a unique graph per test that is deleted when the test ends.
#![allow(dead_code)]

pub mod agent_memory;
pub mod chat_provider;
pub mod graph;
pub mod ingest;

use std::sync::OnceLock;
use std::time::Duration;

use gralkor::falkordb::{EmbeddedConfig, EmbeddedServer, FalkorDb};

struct Shared {
    server: EmbeddedServer,
    runtime: tokio::runtime::Handle,
}

static SHARED: OnceLock<Shared> = OnceLock::new();

/// The test binary's shared server. It is started on a dedicated thread whose runtime
/// lives as long as the process, so its supervisor outlives every test's runtime; the
/// server receives SIGTERM when the test process exits.
fn shared() -> &'static Shared {
    SHARED.get_or_init(|| {
        let (tx, rx) = std::sync::mpsc::channel();
        std::thread::Builder::new()
            .name("falkordb-fixture".into())
            .spawn(move || {
                let rt = tokio::runtime::Builder::new_current_thread()
                    .enable_all()
                    .build()
                    .unwrap();
                let handle = rt.handle().clone();
                rt.block_on(async move {
                    // Kept past the test process (statics are never dropped): named
                    // after the process, and those of processes that are gone are
                    // removed here, so runs do not pile data directories up.
                    remove_stale_server_dirs();
                    let dir = tempfile::Builder::new()
                        .prefix(&format!("{SERVER_DIR_PREFIX}{}-", std::process::id()))
                        .tempdir()
                        .unwrap()
                        .keep();
                    let server = EmbeddedServer::start(&EmbeddedConfig::new(dir))
                        .await
                        .expect("starting the shared embedded FalkorDB");
                    tx.send(Shared {
                        server,
                        runtime: handle,
                    })
                    .unwrap();
                    std::future::pending::<()>().await;
                });
            })
            .unwrap();
        rx.recv().expect("fixture thread died")
    })
}

const SERVER_DIR_PREFIX: &str = "gralkor-test-pid";

/// Removes the shared servers' data directories left by test processes that no
/// longer run (`gralkor-test-pid<pid>-…` whose pid is gone).
fn remove_stale_server_dirs() {
    let Ok(entries) = std::fs::read_dir(std::env::temp_dir()) else {
        return;
    };
    for entry in entries.flatten() {
        let name = entry.file_name();
        let Some(rest) = name
            .to_str()
            .and_then(|n| n.strip_prefix(SERVER_DIR_PREFIX))
        else {
            continue;
        };
        let Some(pid) = rest.split('-').next().and_then(|p| p.parse::<u32>().ok()) else {
            continue;
        };
        if !std::path::Path::new(&format!("/proc/{pid}")).exists() {
            let _ = std::fs::remove_dir_all(entry.path());
        }
    }
}

pub fn server() -> &'static EmbeddedServer {
    &shared().server
}

/// A new handle on the shared server, bound to the calling test's runtime.
pub async fn db() -> FalkorDb {
    FalkorDb::attach(server(), Duration::from_secs(60))
        .await
        .expect("attach to shared server")
}

/// A graph that exists for one test and is deleted afterwards.
pub struct TestGraph {
    pub db: FalkorDb,
    pub name: String,
}

impl TestGraph {
    pub async fn new(tag: &str) -> TestGraph {
        TestGraph {
            db: db().await,
            name: format!("test:{tag}:{}", uuid::Uuid::new_v4()),
        }
    }
}

/// The integer `n` the first row of `query` on `g` returns (a `… RETURN count(x) AS n`).
pub async fn count(g: &TestGraph, query: &str) -> i64 {
    let res =
        g.db.ro_query(&g.name, query, &gralkor::falkordb::Params::new())
            .await
            .unwrap();
    res.get(0, "n")
        .and_then(gralkor::falkordb::Value::as_int)
        .unwrap()
}

/// Every fact of `g`, whole.
pub async fn all_facts(g: &TestGraph) -> Vec<gralkor::graph::EntityEdge> {
    let res =
        g.db.ro_query(
            &g.name,
            "MATCH ()-[f:RELATES_TO]->() RETURN f.uuid AS u",
            &gralkor::falkordb::Params::new(),
        )
        .await
        .unwrap();
    let ids: Vec<uuid::Uuid> = res
        .column_values("u")
        .map(|v| uuid::Uuid::parse_str(v.as_str().unwrap()).unwrap())
        .collect();
    gralkor::graph::get_facts(&g.db, &g.name, &ids)
        .await
        .unwrap()
}

impl Drop for TestGraph {
    fn drop(&mut self) {
        let name = self.name.clone();
        let shared = shared();
        let server = shared.server.clone();
        let (tx, rx) = std::sync::mpsc::channel();
        shared.runtime.spawn(async move {
            if let Ok(db) = FalkorDb::attach(&server, Duration::from_secs(60)).await {
                let _ = db.delete_graph(&name).await;
            }
            let _ = tx.send(());
        });
        // Wait for the deletion so the next test starts clean (bounded, never hangs).
        let _ = rx.recv_timeout(Duration::from_secs(30));
    }
}
