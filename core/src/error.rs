//! The one public error type of the crate.
//!
//! Every fallible call in gralkor returns [`Result<T>`](crate::Result), whose error is
//! [`Error`]. Variants say *what kind* of thing went wrong; the underlying cause, when
//! there is one, is kept as a [`std::error::Error::source`] so a caller can walk the
//! chain. Use [`Error::is_retryable`] to decide whether trying again can help.

use std::time::Duration;

/// Everything that can go wrong in gralkor.
///
/// The enum is `#[non_exhaustive]`: new kinds of failure may be added in minor releases,
/// so match with a wildcard arm.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// Configuration is invalid: `field` names the setting (or environment variable)
    /// and `rule` the requirement it broke. Nothing was started or written.
    #[error("invalid configuration: `{field}` {rule}")]
    Config {
        /// The setting, e.g. `falkordb.remote.port` or `OPENAI_API_KEY`.
        field: String,
        /// What the setting must satisfy, e.g. `must be between 1 and 65535`.
        rule: String,
    },

    /// An argument of a call is invalid: `field` names it and `rule` says what it must
    /// satisfy. Nothing was written.
    #[error("invalid input: `{field}` {rule}")]
    InvalidInput {
        /// The argument, e.g. `graph` or `params.name`.
        field: String,
        /// The rule it broke.
        rule: String,
    },

    /// FalkorDB rejected a query (syntax error, constraint, runtime error). Carries the
    /// server's message; never the values of the query's parameters.
    #[error("FalkorDB rejected the query on graph `{graph}`: {message}")]
    Query {
        /// The logical graph id the query ran against.
        graph: String,
        /// The message the server returned.
        message: String,
    },

    /// The connection to FalkorDB failed or dropped. Usually transient: the handle
    /// reconnects on the next call.
    #[error("FalkorDB connection failed: {context}")]
    Connection {
        /// What was being attempted.
        context: String,
        /// The transport error underneath, when there is one (its type is the Redis
        /// client's and not part of gralkor's API; walk it through
        /// [`std::error::Error::source`]).
        #[source]
        source: Option<Box<dyn std::error::Error + Send + Sync>>,
    },

    /// The handle was shut down (`FalkorDb::shutdown` or
    /// `Client::shutdown` on it or on any clone), or the
    /// embedded server behind it was
    /// (`EmbeddedServer::shutdown`).
    /// Every later call fails at once with this error, without touching the network;
    /// retrying cannot help: connect a new handle.
    #[error("{what} was shut down")]
    Closed {
        /// What was shut down, e.g. `this FalkorDB handle`, `this memory client`.
        what: String,
    },

    /// The client's authorizer refused: `subject` lacks `permission` on `resource`
    /// (see `access`). Nothing was written; retrying cannot help
    /// until the relationships change.
    #[error("`{subject}` lacks `{permission}` on `{resource}`")]
    PermissionDenied {
        /// Who asked, e.g. `person:ada`.
        subject: String,
        /// The permission, e.g. `contribute`.
        permission: String,
        /// The resource, e.g. `group:team`.
        resource: String,
    },

    /// An operation did not finish in time.
    #[error("{operation} timed out after {after:?}")]
    Timeout {
        /// What was being attempted.
        operation: String,
        /// The limit that was exceeded.
        after: Duration,
    },

    /// The server sent a reply gralkor does not understand (a protocol mismatch, such
    /// as an unsupported FalkorDB version).
    #[error("unexpected reply from FalkorDB: {0}")]
    Protocol(String),

    /// The embedded FalkorDB server could not be provisioned, started or stopped.
    /// The message says what to install or which variable to set.
    #[error("embedded FalkorDB: {message}")]
    Embedded {
        /// What went wrong and how to fix it.
        message: String,
        /// The I/O error underneath, when there is one.
        #[source]
        source: Option<std::io::Error>,
    },

    /// The embedded FalkorDB server is down for good: it kept crashing (or a restart
    /// after a crash failed), so its supervisor stopped restarting it. Every call on a
    /// handle to it fails at once with this error, and retrying cannot help: read the
    /// log, then call `EmbeddedServer::shutdown`
    /// (which releases the data directory) and start a new server.
    #[error(
        "embedded FalkorDB is down and will not be restarted: {reason}; see its log at {}; last lines:\n{last_lines}",
        log.display()
    )]
    ServerDown {
        /// Why the supervisor gave up, e.g. `the server crashed 6 times within 60s`.
        reason: String,
        /// The server's log file.
        log: std::path::PathBuf,
        /// The last lines of that log when the supervisor gave up.
        last_lines: String,
    },

    /// Another process (or another handle in this process) owns the embedded server's
    /// data directory, and its server did not answer within `startup_timeout`, so
    /// there was nothing to attach to (see
    /// `EmbeddedServer::start`).
    #[error(
        "the data directory {} is owned by another gralkor process whose FalkorDB server \
         did not answer in time; check that process, or use a different data_dir",
        data_dir.display()
    )]
    DataDirLocked {
        /// The contested directory.
        data_dir: std::path::PathBuf,
    },

    /// A model provider (OpenAI, Gemini, …) answered with an error or could not be
    /// reached. `status` is the HTTP status when there was a response, so callers can
    /// tell a 5xx from a 4xx.
    #[error("{provider} request failed{}: {message}", status.map(|s| format!(" (HTTP {s})")).unwrap_or_default())]
    Provider {
        /// Provider name, e.g. `openai` or `google`.
        provider: String,
        /// HTTP status, if the provider answered.
        status: Option<u16>,
        /// What went wrong.
        message: String,
        /// How long the provider asked us to wait, if it said.
        retry_after: Option<Duration>,
        /// The transport error underneath, when there is one.
        #[source]
        source: Option<Box<dyn std::error::Error + Send + Sync>>,
    },

    /// A model's output could not be used: not JSON, not valid against the requested
    /// schema, blocked by a safety filter or cut short.
    #[error("{provider} model output unusable: {message}")]
    ModelOutput {
        /// Provider name.
        provider: String,
        /// What was wrong with the output.
        message: String,
    },

    /// A response budget cannot hold even the shortest complete response (for
    /// `memory_search`: the omission notice alone).
    #[error(
        "response budget too small: {max_bytes} bytes cannot hold the shortest complete response, \
         which needs {minimum_bytes} bytes"
    )]
    BudgetTooSmall {
        /// The budget given.
        max_bytes: usize,
        /// The smallest budget that would do.
        minimum_bytes: usize,
    },

    /// A recall did not finish within its deadline
    /// (`RecallOptions::deadline`,
    /// default 12 s): the search was cancelled and no memory block was made. Not
    /// retryable: the turn should go ahead without recalled memory.
    #[error("recall deadline expired after {after:?}")]
    RecallDeadlineExpired {
        /// The deadline that passed.
        after: Duration,
    },

    /// A requested item does not exist.
    #[error("not found: {0}")]
    NotFound(String),

    /// An episode with this uuid is already stored with different immutable content
    /// (`field` names the first difference). A replay must repeat the original request
    /// exactly; nothing was written.
    #[error(
        "episode {uuid} already exists with a different `{field}`: a replay must repeat the original exactly"
    )]
    EpisodeConflict {
        /// The episode's uuid.
        uuid: uuid::Uuid,
        /// The first immutable field that differs (`content`, `source`,
        /// `source_description` or `reference_time`).
        field: &'static str,
    },

    /// Another writer holds a live claim (lease) on this pending episode. Retrying
    /// later either finds it complete or takes the claim over once the lease lapses.
    #[error("episode {uuid} is being processed by another writer; retry later")]
    EpisodeBusy {
        /// The episode's uuid.
        uuid: uuid::Uuid,
    },

    /// The episode is quarantined: the database server was lost while `unanswered`
    /// commits of its extraction were in flight (FalkorDB crashing on something in
    /// it, most likely), so the engine no longer sends it. It stays stored and
    /// searchable by its text; `Engine::quarantined` lists such episodes and
    /// `Engine::release_quarantined` makes one pending again (after a server upgrade,
    /// say).
    #[error(
        "episode {uuid} is quarantined: the database server was lost during {unanswered} \
         commits of its extraction, so it is not sent again; it stays stored and searchable \
         by its text (see Engine::quarantined and Engine::release_quarantined)"
    )]
    EpisodeQuarantined {
        /// The episode's uuid.
        uuid: uuid::Uuid,
        /// Commits that were sent and never answered.
        unanswered: i64,
    },

    /// This writer's claim on an episode was taken over after its lease lapsed; the
    /// generation fence stopped its commit, so nothing it computed was written.
    #[error("the claim on episode {uuid} was taken over by another writer; nothing was committed")]
    ClaimLost {
        /// The episode's uuid.
        uuid: uuid::Uuid,
    },

    /// A background task gralkor spawned for part of a call panicked or was cancelled
    /// (the runtime shutting down, say), so the call cannot complete. Not retryable:
    /// a panic is a bug; the message is in the source.
    #[error("{context}: {source}")]
    Task {
        /// What the task was doing.
        context: String,
        /// The runtime's report of the panic or cancellation.
        #[source]
        source: Box<dyn std::error::Error + Send + Sync>,
    },

    /// A Reflection step's answer broke its output contract: `key` (a path such as
    /// `generalisations[0].level`) is missing, not part of the contract, or of the
    /// wrong type. Not retryable: the model answered, wrongly.
    #[error("Reflection `{reflection}`, step `{step}`: output `{key}` {problem}")]
    ReflectionOutput {
        /// The Reflection.
        reflection: String,
        /// The step's label.
        step: String,
        /// The offending key's path.
        key: String,
        /// What is wrong with it.
        problem: String,
    },

    /// A Reflection step's inference went wrong without a usable answer: an invalid
    /// inference response, tool calls past the round limit, or no final output.
    #[error("Reflection `{reflection}`, step `{step}`: {message}")]
    ReflectionInference {
        /// The Reflection.
        reflection: String,
        /// The step's label.
        step: String,
        /// What happened.
        message: String,
    },

    /// An artefact with this id is already stored with different content: a
    /// resubmission must produce the same artefact. Nothing was written.
    #[error("artefact {id} is already stored with different content")]
    ArtefactConflict {
        /// The artefact's id.
        id: String,
    },

    /// A completed episode written by a Reflection does not hold a well-formed
    /// artefact body (`{"id": …, "payload": {…}}`); the search returns this error
    /// rather than a partial result.
    #[error(
        "invalid_reflection_artefact: an episode of Reflection `{reflection}` holds no well-formed artefact"
    )]
    InvalidReflectionArtefact {
        /// The Reflection that wrote the episode.
        reflection: String,
    },

    /// A local I/O error (files, directories).
    #[error("I/O error: {context}")]
    Io {
        /// What was being attempted.
        context: String,
        /// The underlying error.
        #[source]
        source: std::io::Error,
    },
}

impl Error {
    /// Whether trying the same operation again may succeed: dropped connections,
    /// timeouts, provider rate limits (429) and provider server errors (5xx).
    /// Configuration, input, query and 4xx errors are not retryable, nor is an embedded
    /// server that is down for good ([`Error::ServerDown`]), a handle that was shut
    /// down ([`Error::Closed`]) or a failed task ([`Error::Task`]).
    pub fn is_retryable(&self) -> bool {
        match self {
            Error::Connection { .. }
            | Error::Timeout { .. }
            | Error::EpisodeBusy { .. }
            | Error::ClaimLost { .. } => true,
            Error::Provider { status, .. } => match status {
                None => true,
                Some(s) => *s == 408 || *s == 429 || *s >= 500,
            },
            _ => false,
        }
    }

    /// Whether this is a lost (or refused) connection to FalkorDB, the one kind a
    /// read or an idempotent database step retries by itself.
    #[doc(hidden)]
    pub fn is_connection(&self) -> bool {
        matches!(self, Error::Connection { .. })
    }

    /// Whether this is a provider rate limit (HTTP 429).
    pub fn is_rate_limit(&self) -> bool {
        matches!(
            self,
            Error::Provider {
                status: Some(429),
                ..
            }
        )
    }

    #[doc(hidden)]
    pub fn config(field: impl Into<String>, rule: impl Into<String>) -> Self {
        Error::Config {
            field: field.into(),
            rule: rule.into(),
        }
    }

    #[doc(hidden)]
    pub fn invalid(field: impl Into<String>, rule: impl Into<String>) -> Self {
        Error::InvalidInput {
            field: field.into(),
            rule: rule.into(),
        }
    }

    /// A failed background task (a `tokio` `JoinError`, say).
    #[doc(hidden)]
    pub fn task(
        context: impl Into<String>,
        source: impl std::error::Error + Send + Sync + 'static,
    ) -> Self {
        Error::Task {
            context: context.into(),
            source: Box::new(source),
        }
    }

    #[doc(hidden)]
    pub fn io(context: impl Into<String>, source: std::io::Error) -> Self {
        Error::Io {
            context: context.into(),
            source,
        }
    }
}

/// The crate's result type; the error defaults to [`Error`].
pub type Result<T, E = Error> = std::result::Result<T, E>;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn retryable_kinds() {
        let p = |status| Error::Provider {
            provider: "openai".into(),
            status,
            message: "m".into(),
            retry_after: None,
            source: None,
        };
        assert!(p(Some(429)).is_retryable());
        assert!(p(Some(503)).is_retryable());
        assert!(p(None).is_retryable());
        assert!(!p(Some(400)).is_retryable());
        assert!(p(Some(429)).is_rate_limit());
        assert!(!Error::config("a", "b").is_retryable());
        let down = Error::ServerDown {
            reason: "the server crashed 6 times within 60s".into(),
            log: "/data/falkordb.log".into(),
            last_lines: "# Server initialized".into(),
        };
        assert!(!down.is_retryable());
        let closed = Error::Closed {
            what: "this FalkorDB handle".into(),
        };
        assert!(!closed.is_retryable());
        assert_eq!(closed.to_string(), "this FalkorDB handle was shut down");

        assert_eq!(
            down.to_string(),
            "embedded FalkorDB is down and will not be restarted: the server crashed 6 times \
             within 60s; see its log at /data/falkordb.log; last lines:\n# Server initialized"
        );
        assert!(
            Error::Timeout {
                operation: "q".into(),
                after: Duration::from_secs(1)
            }
            .is_retryable()
        );
    }

    #[tokio::test]
    async fn a_failed_task_is_its_own_kind_not_io() {
        let join = tokio::spawn(async { panic!("boom") }).await.unwrap_err();
        let task = Error::task("a Destination search task failed", join);
        assert!(matches!(task, Error::Task { .. }), "{task:?}");
        assert!(!task.is_retryable());
        let source = std::error::Error::source(&task).expect("the join error is kept");
        assert!(source.to_string().contains("panicked"), "{source}");
        assert!(
            task.to_string()
                .starts_with("a Destination search task failed: ")
        );
    }

    #[test]
    fn messages_name_field_and_rule() {
        let e = Error::config("falkordb.remote.port", "must be between 1 and 65535");
        assert_eq!(
            e.to_string(),
            "invalid configuration: `falkordb.remote.port` must be between 1 and 65535"
        );
        let e = Error::Provider {
            provider: "openai".into(),
            status: Some(503),
            message: "overloaded".into(),
            retry_after: None,
            source: None,
        };
        assert_eq!(
            e.to_string(),
            "openai request failed (HTTP 503): overloaded"
        );
    }
}
