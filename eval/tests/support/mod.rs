//! One real embedded FalkorDB per test binary, started on a thread whose runtime
//! outlives every test's runtime (the server gets SIGTERM when the process exits).
#![allow(dead_code)]

use std::sync::OnceLock;
use std::time::Duration;

use gralkor::falkordb::{EmbeddedConfig, EmbeddedServer, FalkorDb};

static SERVER: OnceLock<EmbeddedServer> = OnceLock::new();

fn server() -> &'static EmbeddedServer {
    SERVER.get_or_init(|| {
        let (tx, rx) = std::sync::mpsc::channel();
        std::thread::Builder::new()
            .name("falkordb-eval".into())
            .spawn(move || {
                let rt = tokio::runtime::Builder::new_current_thread()
                    .enable_all()
                    .build()
                    .unwrap();
                rt.block_on(async move {
                    let dir = tempfile::Builder::new()
                        .prefix("gralkor-eval-test-")
                        .tempdir()
                        .unwrap()
                        .keep();
                    let server = EmbeddedServer::start(&EmbeddedConfig::new(dir))
                        .await
                        .expect("starting the embedded FalkorDB");
                    tx.send(server).unwrap();
                    std::future::pending::<()>().await;
                });
            })
            .unwrap();
        rx.recv().expect("the server thread died")
    })
}

/// A handle on the shared server for the calling test's runtime.
pub async fn db() -> FalkorDb {
    FalkorDb::attach(server(), Duration::from_secs(60))
        .await
        .expect("attaching to the shared server")
}
