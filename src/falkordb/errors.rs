//! Turning Redis errors into gralkor's [`Error`]s, with server messages redacted.

use std::time::Duration;

use crate::Error;

/// Whether the cluster refused the request before running it (see
/// [`CLUSTER_REFUSAL_RETRY`]): a [`Error::Connection`] over such a Redis error.
pub(super) fn is_cluster_refusal(e: &Error) -> bool {
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

pub(super) fn refused_by_cluster(e: &redis::RedisError) -> bool {
    use redis::ServerErrorKind as K;
    matches!(
        e.kind(),
        redis::ErrorKind::Server(K::Moved | K::Ask | K::TryAgain | K::ClusterDown | K::MasterDown)
    )
}

pub(super) fn connection_error(context: &str, e: redis::RedisError) -> Error {
    Error::Connection {
        context: format!("{context}: {e}"),
        source: Some(Box::new(e)),
    }
}

pub(super) fn server_error_text(err: &redis::ServerError) -> String {
    match err.details() {
        Some(d) => format!("{} {d}", err.code()),
        None => err.code().to_owned(),
    }
}

/// Removes the parts of a server message that may quote the query text, and with it
/// parameter values: FalkorDB's `errCtx:` window and RediSearch's `near <token>`.
pub(super) fn redact(message: &str) -> String {
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

pub(super) fn map_redis_error(graph: &str, e: redis::RedisError, after: Duration) -> Error {
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
