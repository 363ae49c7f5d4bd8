//! The connections a [`FalkorDb`](super::FalkorDb) handle sends its commands over.
//!
//! The server runs one command of a connection at a time: a graph query blocks its
//! connection until it is answered, however many requests are multiplexed behind it.
//! So a handle keeps one connection for writes (and anything not known to be
//! read-only), in the order they are sent, and a few for read-only queries
//! (`GRAPH.RO_QUERY`), used in turn: a read never queues behind a write, and reads run
//! on the server's threads side by side. Each is a redis-rs [`ConnectionManager`] (it
//! reconnects by itself after a drop). A caller that awaits its write before it reads
//! still reads its own write.
//!
//! Against a Redis Cluster each of those connections is a redis-rs cluster connection
//! (one socket per node, the slot map refreshed on a redirection), and the routing is
//! explicit rather than left to redis-rs's guess for commands it does not know: every
//! `GRAPH.*` command goes to the primary of its graph's key ([`key_slot`]; the key is
//! the first argument, the second for `GRAPH.CONSTRAINT`), a pipeline to the primary
//! of its first command's graph (a pipeline is always on one graph), and `GRAPH.LIST`
//! to every primary, the replies merged. A `MOVED` or `ASK` (resharding, failover) is
//! followed by redis-rs, at most [`CLUSTER_RETRIES`] times per request.
//!
//! On the embedded backend every request is also guarded by the server's state, so
//! that a stopped or given-up server fails every call at once instead of leaving it to
//! reconnect to a socket nobody will open again (or, after a shutdown, to a new
//! server's socket).

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU32, AtomicUsize, Ordering};
use std::time::Duration;

use redis::aio::{ConnectionLike, ConnectionManager};
use redis::cluster_async::ClusterConnection;
use redis::cluster_routing::{
    MultipleNodeRoutingInfo, ResponsePolicy, Route, RoutingInfo, SingleNodeRoutingInfo, SlotAddr,
};
use redis::{Arg, Cmd, Pipeline, RedisFuture, Value};

use super::{EmbeddedServer, FalkorConfig, connection_error};
use crate::Result;

/// Read connections per handle: one per core plus one, at least 2 and at most 4 — 3 on
/// 2 cores. FalkorDB runs a connection's commands one at a time, on a pool of one
/// thread per core, so the read connections decide how many of one search's statements
/// (a recall sends one or two per Destination, each graph's fulltext postings and count
/// beside it) run side by side: with one connection they queued and only one of the
/// server's threads ever worked for a search. With more connections than server
/// threads the server's own queue, not a connection, decides what waits, so a slow
/// statement does not hold the light ones sent behind it on the same connection.
///
/// Measured on 2 shared cores (issue 28; load average 7–9 while three other sessions
/// built and benchmarked): `bench_recall`'s search alone over 3 × 10,000 facts p50
/// 28.6 / 30.8 ms with one read connection, 24.0 / 27.3 with two, 25.6 / 23.2 with
/// three; `bench_load`'s one search at a time p50 12.0 / p95 21.3 ms with one, 9.4 /
/// 13.5 with two, 10.1 / 12.0 with three, and its 16 searchers' p95 alone 275 / 304 /
/// 281 ms (its three set-ups) with one, 255 / 246 / 275 with two, 211 / 254 / 272 with
/// three — the rise of p95 under 16 searchers measured earlier with a second
/// connection did not recur. At most 4: `ro_query`'s 8 attempts outlast the one failed
/// request each connection costs after a restart.
fn read_connections() -> usize {
    std::thread::available_parallelism().map_or(2, |n| (n.get() + 1).clamp(2, 4))
}

/// How many times redis-rs retries one request on a cluster (a redirection, a node
/// that is down or still failing over), 50 ms doubling to 2 s between them (with
/// jitter): enough for a replica to take over a killed primary (a few node timeouts).
pub(super) const CLUSTER_RETRIES: u32 = 8;

tokio::task_local! {
    /// The round-trip counter of the task running under [`count_round_trips`].
    static ROUND_TRIPS: Arc<AtomicU32>;
}

/// Runs `fut`, adding to `counter` one for every request it sends over any handle's
/// connections: each command and each pipeline, every attempt of a retry, the schema
/// reloads and index listings behind a query. A task spawned meanwhile is counted only
/// if it runs under this function too (with a clone of `counter`, see
/// [`round_trip_counter`]). Nested, the innermost counter counts.
pub(crate) async fn count_round_trips<F: std::future::Future>(
    counter: Arc<AtomicU32>,
    fut: F,
) -> F::Output {
    ROUND_TRIPS.scope(counter, fut).await
}

/// The counter of the task's [`count_round_trips`], if it runs under one (for a task
/// it spawns to count into).
pub(crate) fn round_trip_counter() -> Option<Arc<AtomicU32>> {
    ROUND_TRIPS.try_with(Arc::clone).ok()
}

/// Counts one request for the task's [`count_round_trips`], if any.
fn count_round_trip() {
    let _ = ROUND_TRIPS.try_with(|c| c.fetch_add(1, Ordering::Relaxed));
}

/// One connection: to a single server, or to a cluster.
#[derive(Clone)]
enum Link {
    Single(ConnectionManager),
    Cluster(ClusterConnection),
}

#[derive(Clone)]
pub(super) struct Connection {
    writes: Link,
    reads: Arc<[Link]>,
    next_read: Arc<AtomicUsize>,
    /// The embedded server behind the connections, if any.
    server: Option<EmbeddedServer>,
    /// Set by [`FalkorDb::shutdown`](super::FalkorDb::shutdown) on any clone: every
    /// request fails at once from then on, without touching the network.
    closed: Arc<AtomicBool>,
}

impl Connection {
    /// Opens the write connection and the read connections.
    pub(super) async fn open(
        info: redis::ConnectionInfo,
        config: &FalkorConfig,
        server: Option<EmbeddedServer>,
    ) -> Result<Connection> {
        let client =
            redis::Client::open(info).map_err(|e| connection_error("opening client", e))?;
        let cfg = redis::aio::ConnectionManagerConfig::new()
            .set_response_timeout(Some(config.response_timeout))
            .set_connection_timeout(Some(config.connect_timeout))
            .set_number_of_retries(6)
            .set_max_delay(Duration::from_secs(2));
        let connect = || async {
            client
                .get_connection_manager_with_config(cfg.clone())
                .await
                .map_err(|e| connection_error("connecting to FalkorDB", e))
        };
        let writes = Link::Single(connect().await?);
        let mut reads = Vec::with_capacity(read_connections());
        for _ in 0..read_connections() {
            reads.push(Link::Single(connect().await?));
        }
        Ok(Self::from_links(writes, reads, server))
    }

    /// Opens the write and read connections to a Redis Cluster through its seed
    /// `nodes` (their credentials and TLS setting apply to every node).
    pub(super) async fn open_cluster(
        nodes: Vec<redis::ConnectionInfo>,
        config: &FalkorConfig,
    ) -> Result<Connection> {
        let client = redis::cluster::ClusterClientBuilder::new(nodes)
            .connection_timeout(config.connect_timeout)
            .response_timeout(config.response_timeout)
            .retries(CLUSTER_RETRIES)
            .min_retry_wait(50)
            .max_retry_wait(2_000)
            .build()
            .map_err(|e| connection_error("opening cluster client", e))?;
        let connect = || async {
            client
                .get_async_connection()
                .await
                .map(Link::Cluster)
                .map_err(|e| connection_error("connecting to the FalkorDB cluster", e))
        };
        let writes = connect().await?;
        let mut reads = Vec::with_capacity(read_connections());
        for _ in 0..read_connections() {
            reads.push(connect().await?);
        }
        Ok(Self::from_links(writes, reads, None))
    }

    fn from_links(writes: Link, reads: Vec<Link>, server: Option<EmbeddedServer>) -> Connection {
        Connection {
            writes,
            reads: reads.into(),
            next_read: Arc::new(AtomicUsize::new(0)),
            server,
            closed: Arc::new(AtomicBool::new(false)),
        }
    }

    /// Whether the connections are to a Redis Cluster.
    pub(super) fn is_cluster(&self) -> bool {
        matches!(self.writes, Link::Cluster(_))
    }

    /// Fails every request from now on, on this connection and its clones.
    pub(super) fn close(&self) {
        self.closed.store(true, Ordering::SeqCst);
    }

    /// Whether [`close`](Self::close) was called on this connection or a clone.
    pub(super) fn is_closed(&self) -> bool {
        self.closed.load(Ordering::SeqCst)
    }

    /// The error of a request on a closed connection (turned into
    /// [`Error::Closed`](crate::Error::Closed) by the handle).
    fn closed_error() -> redis::RedisError {
        redis::RedisError::from((redis::ErrorKind::Io, "the FalkorDB handle was shut down"))
    }

    /// The connection for a request: the next read connection for read-only queries,
    /// else the write connection (clones share the underlying connection).
    fn pick(&self, read_only: bool) -> Link {
        if read_only {
            let i = self.next_read.fetch_add(1, Ordering::Relaxed) % self.reads.len();
            self.reads[i].clone()
        } else {
            self.writes.clone()
        }
    }
}

/// Whether `cmd` is a read-only graph query.
fn is_read(cmd: &Cmd) -> bool {
    matches!(cmd.args_iter().next(), Some(Arg::Simple(name)) if name.eq_ignore_ascii_case(b"GRAPH.RO_QUERY"))
}

/// The argument at `index` of `cmd`, if it is a plain one.
fn arg(cmd: &Cmd, index: usize) -> Option<&[u8]> {
    match cmd.args_iter().nth(index) {
        Some(Arg::Simple(a)) => Some(a),
        _ => None,
    }
}

/// Where a command goes on a cluster; `None` for what is not a graph command (left to
/// redis-rs's own routing). A graph command whose key is missing goes to a random
/// primary, which answers with its own error.
fn cluster_route(cmd: &Cmd) -> Option<RoutingInfo> {
    let name = arg(cmd, 0)?.to_ascii_uppercase();
    if !name.starts_with(b"GRAPH.") {
        return None;
    }
    let key_at = match name.as_slice() {
        b"GRAPH.LIST" => {
            return Some(RoutingInfo::MultiNode((
                MultipleNodeRoutingInfo::AllMasters,
                Some(ResponsePolicy::CombineArrays),
            )));
        }
        // GRAPH.CONSTRAINT CREATE|DROP <key> …
        b"GRAPH.CONSTRAINT" => 2,
        // GRAPH.QUERY, RO_QUERY, DELETE, EXPLAIN, PROFILE, SLOWLOG, MEMORY USAGE <key>
        // (MEMORY's key is the second argument too), …
        b"GRAPH.MEMORY" => 2,
        _ => 1,
    };
    Some(RoutingInfo::SingleNode(match arg(cmd, key_at) {
        Some(key) => primary_of(key),
        None => SingleNodeRoutingInfo::RandomPrimary,
    }))
}

fn primary_of(key: &[u8]) -> SingleNodeRoutingInfo {
    SingleNodeRoutingInfo::SpecificNode(Route::new(key_slot(key), SlotAddr::Master))
}

/// The cluster hash slot of `key`: CRC16 (XMODEM) of the key, or of its hash tag (the
/// text between the first `{` and the next `}`, when not empty), modulo 16384.
pub(super) fn key_slot(key: &[u8]) -> u16 {
    let hashed = match key.iter().position(|&b| b == b'{') {
        Some(open) => match key[open + 1..].iter().position(|&b| b == b'}') {
            Some(len) if len > 0 => &key[open + 1..open + 1 + len],
            _ => key,
        },
        None => key,
    };
    let mut crc: u16 = 0;
    for &byte in hashed {
        crc ^= u16::from(byte) << 8;
        for _ in 0..8 {
            crc = if crc & 0x8000 != 0 {
                (crc << 1) ^ 0x1021
            } else {
                crc << 1
            };
        }
    }
    crc % 16384
}

impl Link {
    fn send<'a>(&'a mut self, cmd: &'a Cmd) -> RedisFuture<'a, Value> {
        match self {
            Link::Single(manager) => manager.req_packed_command(cmd),
            Link::Cluster(conn) => match cluster_route(cmd) {
                Some(routing) => Box::pin(conn.route_command(cmd.clone(), routing)),
                None => conn.req_packed_command(cmd),
            },
        }
    }

    fn send_pipeline<'a>(
        &'a mut self,
        pipeline: &'a Pipeline,
        offset: usize,
        count: usize,
    ) -> RedisFuture<'a, Vec<Value>> {
        match self {
            Link::Single(manager) => manager.req_packed_commands(pipeline, offset, count),
            Link::Cluster(conn) => {
                // Every pipeline of the handle is on one graph: its first command's.
                let first = pipeline.cmd_iter().next();
                match first.and_then(cluster_route) {
                    Some(RoutingInfo::SingleNode(route)) => {
                        Box::pin(conn.route_pipeline(pipeline.clone(), offset, count, route))
                    }
                    _ => conn.req_packed_commands(pipeline, offset, count),
                }
            }
        }
    }

    fn get_db(&self) -> i64 {
        match self {
            Link::Single(manager) => manager.get_db(),
            Link::Cluster(conn) => conn.get_db(),
        }
    }
}

impl ConnectionLike for Connection {
    fn req_packed_command<'a>(&'a mut self, cmd: &'a Cmd) -> RedisFuture<'a, Value> {
        let mut link = self.pick(is_read(cmd));
        let server = self.server.as_ref();
        let closed = self.is_closed();
        Box::pin(async move {
            if closed {
                return Err(Self::closed_error());
            }
            count_round_trip();
            let request = link.send(cmd);
            match server {
                None => request.await,
                Some(server) => server.guard(request).await,
            }
        })
    }

    fn req_packed_commands<'a>(
        &'a mut self,
        pipeline: &'a Pipeline,
        offset: usize,
        count: usize,
    ) -> RedisFuture<'a, Vec<Value>> {
        let mut link = self.pick(pipeline.cmd_iter().all(is_read));
        let server = self.server.as_ref();
        let closed = self.is_closed();
        Box::pin(async move {
            if closed {
                return Err(Self::closed_error());
            }
            count_round_trip();
            let request = link.send_pipeline(pipeline, offset, count);
            match server {
                None => request.await,
                Some(server) => server.guard(request).await,
            }
        })
    }

    fn get_db(&self) -> i64 {
        self.writes.get_db()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn key_slots_follow_the_cluster_specification() {
        // The specification's CRC16 check value (0x31C3), and what FalkorDB's server
        // answers to CLUSTER KEYSLOT for these keys.
        assert_eq!(key_slot(b"123456789"), 12739);
        assert_eq!(key_slot(b"foo"), 12182);
        assert_eq!(key_slot(b"g_61"), 13121);
        // Hash tags.
        assert_eq!(key_slot(b"{user1000}.following"), key_slot(b"user1000"));
        assert_ne!(
            key_slot(b"foo{}{bar}"),
            key_slot(b"bar"),
            "an empty tag hashes the whole key"
        );
        assert_eq!(key_slot(b"foo{{bar}}zap"), key_slot(b"{bar"));
    }

    #[test]
    fn graph_commands_are_routed_by_their_key() {
        let route = |c: &Cmd| cluster_route(c);
        let mut q = redis::cmd("GRAPH.QUERY");
        q.arg("g_61").arg("RETURN 1");
        assert_eq!(
            route(&q),
            Some(RoutingInfo::SingleNode(primary_of(b"g_61")))
        );
        let mut c = redis::cmd("graph.constraint");
        c.arg("CREATE").arg("g_62").arg("UNIQUE");
        assert_eq!(
            route(&c),
            Some(RoutingInfo::SingleNode(primary_of(b"g_62")))
        );
        assert!(matches!(
            route(&redis::cmd("GRAPH.LIST")),
            Some(RoutingInfo::MultiNode((
                MultipleNodeRoutingInfo::AllMasters,
                Some(ResponsePolicy::CombineArrays)
            )))
        ));
        assert_eq!(route(&redis::cmd("PING")), None);
    }
}
