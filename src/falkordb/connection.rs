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
//! On the embedded backend every request is also guarded by the server's state, so
//! that a stopped or given-up server fails every call at once instead of leaving it to
//! reconnect to a socket nobody will open again (or, after a shutdown, to a new
//! server's socket).

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::time::Duration;

use redis::aio::{ConnectionLike, ConnectionManager};
use redis::{Arg, Cmd, Pipeline, RedisFuture, Value};

use super::{EmbeddedServer, FalkorConfig, connection_error};
use crate::Result;

/// Read connections per handle: one per core but one (left to the application and the
/// write connection), at least 1 and at most 4. Measured with `bench_load` on 2 shared
/// cores, a second read connection cut the median search latency under 16 searchers
/// by a fifth but raised its p95 by a tenth to a fifth. At most 4: `ro_query`'s 5
/// attempts outlast the one failed request each connection costs after a restart.
fn read_connections() -> usize {
    std::thread::available_parallelism().map_or(1, |n| (n.get() - 1).clamp(1, 4))
}

#[derive(Clone)]
pub(super) struct Connection {
    writes: ConnectionManager,
    reads: Arc<[ConnectionManager]>,
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
        let writes = connect().await?;
        let mut reads = Vec::with_capacity(read_connections());
        for _ in 0..read_connections() {
            reads.push(connect().await?);
        }
        Ok(Connection {
            writes,
            reads: reads.into(),
            next_read: Arc::new(AtomicUsize::new(0)),
            server,
            closed: Arc::new(AtomicBool::new(false)),
        })
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
    fn pick(&self, read_only: bool) -> ConnectionManager {
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

impl ConnectionLike for Connection {
    fn req_packed_command<'a>(&'a mut self, cmd: &'a Cmd) -> RedisFuture<'a, Value> {
        let mut manager = self.pick(is_read(cmd));
        let server = self.server.as_ref();
        let closed = self.is_closed();
        Box::pin(async move {
            if closed {
                return Err(Self::closed_error());
            }
            let request = manager.req_packed_command(cmd);
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
        let mut manager = self.pick(pipeline.cmd_iter().all(is_read));
        let server = self.server.as_ref();
        let closed = self.is_closed();
        Box::pin(async move {
            if closed {
                return Err(Self::closed_error());
            }
            let request = manager.req_packed_commands(pipeline, offset, count);
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
