//! FalkorDB run as a Redis Cluster: a real cluster of the crate's own FalkorDB
//! binaries on loopback (cluster-enabled servers, slots assigned here with
//! `CLUSTER ADDSLOTSRANGE`, joined with `CLUSTER MEET`), one per test. Mirrors the
//! `cluster` section of `test-trees/falkordb.md`.

#[path = "common/mod.rs"]
mod common;

use std::net::TcpListener;
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use common::graph::t;
use common::ingest::{Rules, World};
use gralkor::falkordb::{
    EmbeddedConfig, FalkorConfig, FalkorDb, Params, physical_graph_name, resolve_binaries,
};
use gralkor::graph::search::{EDGE_HYBRID_SEARCH_RRF, SearchRequest};
use gralkor::graph::{AddEpisode, SourceKind};

/// The slots 0–16383 split evenly over `n` primaries: `(first, last)` per primary.
fn slot_ranges(n: usize) -> Vec<(u16, u16)> {
    (0..n)
        .map(|i| ((i * 16384 / n) as u16, ((i + 1) * 16384 / n - 1) as u16))
        .collect()
}

/// Two distinct ports nobody listens on (the kernel's choice; released before the
/// server binds them).
/// Held while a cluster's nodes start and bind the ports [`free_ports`] found.
static STARTING: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());

fn free_ports() -> (u16, u16) {
    let a = TcpListener::bind("127.0.0.1:0").unwrap();
    let b = TcpListener::bind("127.0.0.1:0").unwrap();
    let port = |l: &TcpListener| l.local_addr().unwrap().port();
    (port(&a), port(&b))
}

struct Node {
    port: u16,
    bus: u16,
    child: Child,
}

/// A running cluster: `primaries` nodes holding the slots, then the replicas.
struct Cluster {
    nodes: Vec<Node>,
    primaries: usize,
    _dir: tempfile::TempDir,
}

/// Calls `check` until it gives `Some`, polling the servers every 20 ms; panics
/// naming `what` after `within`.
async fn until<T, F, Fut>(what: &str, within: Duration, mut check: F) -> T
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = Option<T>>,
{
    let start = Instant::now();
    loop {
        if let Some(v) = check().await {
            return v;
        }
        assert!(start.elapsed() < within, "timed out waiting for {what}");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// One command to the node at `port`, on a fresh connection.
async fn node_cmd(port: u16, args: &[&str]) -> redis::RedisResult<redis::Value> {
    let client = redis::Client::open(format!("redis://127.0.0.1:{port}/"))?;
    let mut conn = client.get_multiplexed_async_connection().await?;
    let mut cmd = redis::cmd(args[0]);
    for a in &args[1..] {
        cmd.arg(*a);
    }
    cmd.query_async(&mut conn).await
}

fn text(v: redis::Value) -> String {
    match v {
        redis::Value::BulkString(b) => String::from_utf8(b).unwrap(),
        redis::Value::SimpleString(s) | redis::Value::VerbatimString { text: s, .. } => s,
        other => panic!("not text: {other:?}"),
    }
}

async fn node_text(port: u16, args: &[&str]) -> Option<String> {
    node_cmd(port, args).await.ok().map(text)
}

impl Cluster {
    /// Starts `primaries` primaries and `replicas` replicas of the first primary, and
    /// waits until every node reports `cluster_state:ok` and every replica is in sync.
    async fn start(primaries: usize, replicas: usize) -> Cluster {
        let dir = tempfile::Builder::new()
            .prefix("gralkor-cluster-")
            .tempdir()
            .unwrap();
        let bins = resolve_binaries(&EmbeddedConfig::new(dir.path()))
            .await
            .expect("the FalkorDB binaries");
        // `free_ports` releases the ports it found before the node binds them: the
        // tests of this binary start their nodes one cluster at a time, so another
        // test's node cannot take a port in between (it once answered for this
        // cluster: "Slot 0 is already busy").
        let starting = STARTING.lock().await;
        // Node `i` in its own directory; whatever cluster state an earlier start there
        // wrote names that start's ports, so it goes.
        let spawn = |i: usize| {
            let node_dir = dir.path().join(format!("node{i}"));
            std::fs::create_dir_all(&node_dir).unwrap();
            let _ = std::fs::remove_file(node_dir.join("nodes.conf"));
            spawn_node(
                &bins.redis_server,
                &bins.module,
                &node_dir,
                node_timeout(replicas),
            )
        };
        let mut nodes: Vec<Node> = (0..primaries + replicas).map(spawn).collect();
        // A port found free can still be taken before the node binds it (by an
        // outgoing connection of another test's cluster, whose local ports come from
        // the same range): the node then exits at once. It is started again on other
        // ports, at most twice.
        for (i, node) in nodes.iter_mut().enumerate() {
            let mut restarts = 0;
            until("the node to answer", Duration::from_secs(30), || {
                if restarts < 2 && node.child.try_wait().unwrap().is_some() {
                    restarts += 1;
                    *node = spawn(i);
                }
                let port = node.port;
                async move { node_cmd(port, &["PING"]).await.ok() }
            })
            .await;
        }
        let cluster = Cluster {
            nodes,
            primaries,
            _dir: dir,
        };
        drop(starting);
        for (node, (first, last)) in cluster.nodes.iter().zip(slot_ranges(primaries)) {
            let (first, last) = (first.to_string(), last.to_string());
            node_cmd(node.port, &["CLUSTER", "ADDSLOTSRANGE", &first, &last])
                .await
                .unwrap();
        }
        let first = cluster.nodes[0].port;
        for node in &cluster.nodes[1..] {
            let (port, bus) = (node.port.to_string(), node.bus.to_string());
            node_cmd(first, &["CLUSTER", "MEET", "127.0.0.1", &port, &bus])
                .await
                .unwrap();
        }
        let known = format!("cluster_known_nodes:{}", cluster.nodes.len());
        for node in &cluster.nodes {
            until(
                "every node to know all others",
                Duration::from_secs(30),
                || {
                    let known = known.clone();
                    async move {
                        let info = node_text(node.port, &["CLUSTER", "INFO"]).await?;
                        info.contains(&known).then_some(())
                    }
                },
            )
            .await;
        }
        if replicas > 0 {
            let primary_id = node_text(first, &["CLUSTER", "MYID"]).await.unwrap();
            for replica in &cluster.nodes[primaries..] {
                node_cmd(replica.port, &["CLUSTER", "REPLICATE", &primary_id])
                    .await
                    .unwrap();
                until("the replica to sync", Duration::from_secs(30), || async {
                    let info = node_text(replica.port, &["INFO", "replication"]).await?;
                    info.contains("master_link_status:up").then_some(())
                })
                .await;
            }
            // Every primary must see the replicas as such to vote for one in a failover.
            let replica_count = replicas;
            for node in &cluster.nodes {
                until(
                    "every node to see the replicas",
                    Duration::from_secs(30),
                    || async {
                        let nodes = node_text(node.port, &["CLUSTER", "NODES"]).await?;
                        (nodes.matches("slave").count() == replica_count).then_some(())
                    },
                )
                .await;
            }
        }
        for node in &cluster.nodes {
            until("cluster_state:ok", Duration::from_secs(30), || async {
                let info = node_text(node.port, &["CLUSTER", "INFO"]).await?;
                info.contains("cluster_state:ok").then_some(())
            })
            .await;
        }
        cluster
    }

    /// Seed nodes for the client, as `FALKORDB_CLUSTER_NODES` would name them.
    fn seeds(&self) -> String {
        self.nodes
            .iter()
            .map(|n| format!("127.0.0.1:{}", n.port))
            .collect::<Vec<_>>()
            .join(",")
    }

    /// A handle configured from the environment variables a deployment would set.
    async fn connect(&self) -> FalkorDb {
        let seeds = self.seeds();
        let config = FalkorConfig::from_lookup(|k| match k {
            "FALKORDB_CLUSTER_NODES" => Some(seeds.clone()),
            "GRALKOR_FALKORDB_TIMEOUT_MS" => Some("30000".into()),
            _ => None,
        })
        .unwrap();
        assert!(config.remote.as_ref().unwrap().cluster);
        FalkorDb::connect(config)
            .await
            .expect("connecting to the cluster")
    }

    /// The index of the primary whose slots hold `key`, asked of the server.
    async fn primary_of(&self, key: &str) -> usize {
        let slot = match node_cmd(self.nodes[0].port, &["CLUSTER", "KEYSLOT", key])
            .await
            .unwrap()
        {
            redis::Value::Int(s) => s as u16,
            other => panic!("{other:?}"),
        };
        slot_ranges(self.primaries)
            .iter()
            .position(|(a, b)| (*a..=*b).contains(&slot))
            .unwrap()
    }

    /// One logical graph id per primary (`{prefix}-{n}`), each on a different shard.
    async fn graph_per_shard(&self, prefix: &str) -> Vec<String> {
        let mut found: Vec<Option<String>> = vec![None; self.primaries];
        for n in 0.. {
            let id = format!("{prefix}-{n}");
            let shard = self.primary_of(&physical_graph_name(&id).unwrap()).await;
            found[shard].get_or_insert(id);
            if found.iter().all(Option::is_some) {
                break;
            }
        }
        found.into_iter().map(Option::unwrap).collect()
    }

    /// The physical graph names the node at `index` itself holds.
    async fn graphs_on(&self, index: usize) -> Vec<String> {
        let v = node_cmd(self.nodes[index].port, &["GRAPH.LIST"])
            .await
            .unwrap();
        redis::from_redis_value(v).unwrap()
    }

    /// Kills the node at `index` with SIGKILL (no chance to hand over).
    fn kill(&mut self, index: usize) {
        let child = &mut self.nodes[index].child;
        child.kill().unwrap();
        child.wait().unwrap();
    }
}

impl Drop for Cluster {
    fn drop(&mut self) {
        for node in &mut self.nodes {
            let _ = node.child.kill();
            let _ = node.child.wait();
        }
    }
}

/// The cluster node timeout in ms: short where a replica is to take over fast, long
/// enough elsewhere that a node slowed by a loaded machine is never thought failed.
fn node_timeout(replicas: usize) -> u32 {
    if replicas > 0 { 1000 } else { 5000 }
}

fn spawn_node(server: &Path, module: &Path, dir: &Path, node_timeout: u32) -> Node {
    let (port, bus) = free_ports();
    let mut cmd = Command::new(server);
    cmd.current_dir(dir)
        .args([
            "--port",
            &port.to_string(),
            "--cluster-port",
            &bus.to_string(),
        ])
        .args(["--bind", "127.0.0.1", "--cluster-enabled", "yes"])
        .args(["--cluster-config-file", "nodes.conf"])
        // A replica may take over whatever its lag.
        .args(["--cluster-node-timeout", &node_timeout.to_string()])
        .args(["--cluster-replica-validity-factor", "0"])
        .args([
            "--save",
            "",
            "--appendonly",
            "no",
            "--logfile",
            "server.log",
        ])
        .arg("--loadmodule")
        .arg(module)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null());
    #[cfg(target_os = "linux")]
    {
        use std::os::unix::process::CommandExt;
        // SAFETY: prctl is async-signal-safe and touches no memory of the parent.
        unsafe {
            cmd.pre_exec(|| {
                if libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL) != 0 {
                    return Err(std::io::Error::last_os_error());
                }
                Ok(())
            });
        }
    }
    Node {
        port,
        bus,
        child: cmd.spawn().expect("starting redis-server"),
    }
}

/// How many `kind` (`ASK`, `MOVED`) redirections the node at `port` has answered
/// (`INFO errorstats`).
async fn redirections(port: u16, kind: &str) -> u64 {
    let stats = node_text(port, &["INFO", "errorstats"]).await.unwrap();
    stats
        .lines()
        .find_map(|l| l.strip_prefix(&format!("errorstat_{kind}:count=")))
        .map_or(0, |n| n.trim().parse().unwrap())
}

fn episode(content: &str) -> AddEpisode {
    AddEpisode::new(content, SourceKind::Message, t("2024-03-01T09:00:00Z"))
        .source_description("chat")
}

const CITIES: [&str; 3] = ["Lisbon", "Porto", "Faro"];

mod cluster {
    use super::*;

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn destinations_on_different_shards_are_ingested_searched_listed_and_deleted() {
        let cluster = Cluster::start(3, 0).await;
        let db = cluster.connect().await;
        let graphs = cluster.graph_per_shard("operator").await;
        let world = World::new(&db, Rules::narrator());
        for (graph, city) in graphs.iter().zip(CITIES) {
            let out = world
                .engine
                .add_episode(graph, episode(&format!("Ada moved to {city}")))
                .await
                .unwrap();
            assert_eq!(out.facts.len(), 1, "{graph}");
        }
        // Each graph is stored on its own shard, and only there.
        for (i, graph) in graphs.iter().enumerate() {
            let name = physical_graph_name(graph).unwrap();
            for j in 0..3 {
                assert_eq!(
                    cluster.graphs_on(j).await.contains(&name),
                    i == j,
                    "{graph} on node {j}"
                );
            }
        }
        // Listing covers every primary.
        let mut want = graphs.clone();
        want.sort();
        assert_eq!(world.engine.list_graphs().await.unwrap(), want);
        // A search over the three Destinations reaches each shard.
        let request = SearchRequest::new("Ada moved", EDGE_HYBRID_SEARCH_RRF.limit(5));
        let names: Vec<&str> = graphs.iter().map(String::as_str).collect();
        let results = world.engine.search_many(&names, &request).await.unwrap();
        for (result, city) in results.iter().zip(CITIES) {
            assert_eq!(result.facts.len(), 1);
            assert!(result.facts[0].fact.fact.contains(city), "{city}");
        }
        for graph in &graphs {
            assert!(db.delete_graph(graph).await.unwrap());
            assert!(!db.delete_graph(graph).await.unwrap());
        }
        assert!(db.list_graphs().await.unwrap().is_empty());
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn pipelines_and_reads_of_missing_graphs_go_to_the_graphs_shard() {
        let cluster = Cluster::start(3, 0).await;
        let db = cluster.connect().await;
        let graphs = cluster.graph_per_shard("pipe").await;
        for graph in &graphs {
            let stmts: Vec<(String, Params)> = (0..20)
                .map(|i| ("MERGE (:N {i: $i})".to_string(), Params::new().set("i", i)))
                .collect();
            assert_eq!(db.pipeline(graph, &stmts).await.unwrap().len(), 20);
            let bad = vec![
                ("CREATE (:N {i: 100})".to_string(), Params::new()),
                ("RETURN nosuchfunction(1)".to_string(), Params::new()),
            ];
            let e = db.pipeline(graph, &bad).await.unwrap_err();
            assert!(
                matches!(&e, gralkor::Error::Query { message, .. } if message.starts_with("statement 1:")),
                "{e}"
            );
            let r = db
                .ro_query(graph, "MATCH (n:N) RETURN count(n) AS c", &Params::new())
                .await
                .unwrap();
            assert_eq!(r.get(0, "c").and_then(|v| v.as_int()), Some(21));
        }
        // A graph that does not exist reads as empty and is not created.
        let missing = format!("missing-{}", uuid::Uuid::new_v4());
        let r = db
            .ro_query(&missing, "MATCH (n) RETURN count(n) AS c", &Params::new())
            .await
            .unwrap();
        assert_eq!(r.get(0, "c").and_then(|v| v.as_int()), Some(0));
        let mut want = graphs.clone();
        want.sort();
        assert_eq!(db.list_graphs().await.unwrap(), want);
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_graph_moved_to_another_shard_is_followed_through_ask_and_moved() {
        let cluster = Cluster::start(3, 0).await;
        let db = cluster.connect().await;
        let graphs = cluster.graph_per_shard("reshard").await;
        let world = World::new(&db, Rules::narrator());
        let (graph, from, to) = (&graphs[0], 0, 1);
        world
            .engine
            .add_episode(graph, episode("Ada moved to Lisbon"))
            .await
            .unwrap();
        let name = physical_graph_name(graph).unwrap();
        let slot = match node_cmd(cluster.nodes[0].port, &["CLUSTER", "KEYSLOT", &name])
            .await
            .unwrap()
        {
            redis::Value::Int(s) => s.to_string(),
            other => panic!("{other:?}"),
        };
        let (from_port, to_port) = (cluster.nodes[from].port, cluster.nodes[to].port);
        let from_id = node_text(from_port, &["CLUSTER", "MYID"]).await.unwrap();
        let to_id = node_text(to_port, &["CLUSTER", "MYID"]).await.unwrap();
        // Mid-migration: the key has moved but the slot is still the old primary's,
        // which answers ASK; the handle's layout still says `from`.
        node_cmd(
            to_port,
            &["CLUSTER", "SETSLOT", &slot, "IMPORTING", &from_id],
        )
        .await
        .unwrap();
        node_cmd(
            from_port,
            &["CLUSTER", "SETSLOT", &slot, "MIGRATING", &to_id],
        )
        .await
        .unwrap();
        let to_port_text = to_port.to_string();
        node_cmd(
            from_port,
            &["MIGRATE", "127.0.0.1", &to_port_text, &name, "0", "10000"],
        )
        .await
        .unwrap();
        assert!(cluster.graphs_on(to).await.contains(&name));
        assert!(!cluster.graphs_on(from).await.contains(&name));
        let request = SearchRequest::new("Ada moved", EDGE_HYBRID_SEARCH_RRF.limit(5));
        let during = world.engine.search(graph, &request).await.unwrap();
        assert_eq!(during.facts.len(), 1, "read through ASK");
        assert!(
            redirections(from_port, "ASK").await > 0,
            "the old primary answered ASK"
        );
        // Done: the slot is the new primary's everywhere, and the old one answers MOVED.
        for node in &cluster.nodes {
            node_cmd(node.port, &["CLUSTER", "SETSLOT", &slot, "NODE", &to_id])
                .await
                .unwrap();
        }
        let out = world
            .engine
            .add_episode(graph, episode("Ada moved to Porto"))
            .await
            .unwrap();
        assert_eq!(out.facts.len(), 1, "written through MOVED");
        assert!(
            redirections(from_port, "MOVED").await > 0,
            "the old primary answered MOVED"
        );
        let after = world.engine.search(graph, &request).await.unwrap();
        assert_eq!(after.facts.len(), 2);
        assert!(cluster.graphs_on(to).await.contains(&name));
        let mut want = graphs[..1].to_vec();
        want.sort();
        assert_eq!(db.list_graphs().await.unwrap(), want);
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_killed_primary_with_a_replica_fails_over_and_memory_survives() {
        let mut cluster = Cluster::start(3, 1).await;
        let db = cluster.connect().await;
        let graphs = cluster.graph_per_shard("failover").await;
        let world = World::new(&db, Rules::narrator());
        for (graph, city) in graphs.iter().zip(CITIES) {
            world
                .engine
                .add_episode(graph, episode(&format!("Ada moved to {city}")))
                .await
                .unwrap();
        }
        // The replica has every write of the first primary (graphs[0] lives there).
        let acked = node_cmd(cluster.nodes[0].port, &["WAIT", "1", "10000"])
            .await
            .unwrap();
        assert_eq!(acked, redis::Value::Int(1));
        cluster.kill(0);
        // The very next search rides through the failover: redis-rs and the read
        // retries follow the slots to the promoted replica.
        let request = SearchRequest::new("Ada moved", EDGE_HYBRID_SEARCH_RRF.limit(5));
        let names: Vec<&str> = graphs.iter().map(String::as_str).collect();
        let results = world.engine.search_many(&names, &request).await.unwrap();
        for (result, city) in results.iter().zip(CITIES) {
            assert_eq!(result.facts.len(), 1, "{city}");
            assert!(result.facts[0].fact.fact.contains(city), "{city}");
        }
        // The replica is now the primary, and it takes new writes for the shard.
        let info = node_text(cluster.nodes[3].port, &["INFO", "replication"])
            .await
            .unwrap();
        assert!(info.contains("role:master"), "{info}");
        let out = world
            .engine
            .add_episode(&graphs[0], episode("Ada moved to Braga"))
            .await
            .unwrap();
        assert_eq!(out.facts.len(), 1);
        assert!(
            cluster
                .graphs_on(3)
                .await
                .contains(&physical_graph_name(&graphs[0]).unwrap())
        );
        let mut want = graphs.clone();
        want.sort();
        assert_eq!(db.list_graphs().await.unwrap(), want);
    }
}
