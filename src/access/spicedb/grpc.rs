//! A gRPC client over HTTP/2 (`h2`), for the calls the authorizer makes: to a SpiceDB
//! server over TCP (TLS or plaintext) and to the embedded library's streaming proxy on a Unix
//! socket. One long-lived connection per [`Channel`], made again when it breaks;
//! each call sends one request message, reads every response message to the end and
//! the status from the trailers; bounded retries for what may pass (UNAVAILABLE, a
//! lost connection, a timeout: every call the authorizer makes is idempotent).

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::Duration;

use bytes::Bytes;
use tracing::Instrument;

use super::status::{self, Status};
use crate::retry::{Backoff, retry};
use crate::{Error, Result};

/// Where a channel connects.
#[derive(Clone)]
pub(super) enum Target {
    /// A Unix socket (the embedded library's streaming proxy).
    Unix(String),
    /// `host:port` over TCP, plaintext HTTP/2.
    Tcp(String),
    /// `host:port` over TCP and TLS (ALPN `h2`), the certificate checked for
    /// `server_name`.
    Tls {
        addr: String,
        server_name: rustls::pki_types::ServerName<'static>,
        connector: tokio_rustls::TlsConnector,
    },
}

impl std::fmt::Debug for Target {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Target::Unix(p) => write!(f, "unix:{p}"),
            Target::Tcp(a) => write!(f, "tcp:{a}"),
            Target::Tls { addr, .. } => write!(f, "tls:{addr}"),
        }
    }
}

/// Why one attempt failed.
pub(super) enum Failure {
    /// The connection could not be made or broke: it is made again.
    Transport(String),
    /// The server answered with a status.
    Status(Status),
    /// The reply was not gRPC as gralkor knows it.
    Malformed(String),
    /// The TLS handshake was refused (the certificate, say): trying again cannot help.
    Tls(String),
}

impl Failure {
    fn transport(e: impl std::fmt::Display) -> Failure {
        Failure::Transport(e.to_string())
    }
}

#[derive(Clone)]
struct Conn {
    send: h2::client::SendRequest<Bytes>,
    alive: Arc<AtomicBool>,
    id: u64,
}

/// One HTTP/2 connection to a gRPC server, shared by every call (h2 multiplexes).
pub(super) struct Channel {
    target: Target,
    /// `scheme://authority` of the request URIs.
    base: String,
    /// What error messages call the server (`SpiceDB at http://localhost:50051`).
    describe: String,
    authorization: Option<http::HeaderValue>,
    timeout: Duration,
    conn: tokio::sync::Mutex<Option<Conn>>,
    drivers: std::sync::Mutex<Vec<tokio::task::AbortHandle>>,
    connections: AtomicU64,
}

impl std::fmt::Debug for Channel {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Channel")
            .field("target", &self.target)
            .field("timeout", &self.timeout)
            .finish_non_exhaustive()
    }
}

impl Drop for Channel {
    fn drop(&mut self) {
        let drivers = self.drivers.get_mut().unwrap_or_else(|p| p.into_inner());
        for d in drivers.drain(..) {
            d.abort();
        }
    }
}

/// Attempts per call, the first included, and the delays between them.
const BACKOFF: Backoff = Backoff::new(4, Duration::from_millis(50), Duration::from_secs(1));

/// The largest response gralkor reads (gRPC's default limit is 4 MiB a message; a
/// lookup streams many).
const MAX_RESPONSE: usize = 256 << 20;

impl Channel {
    /// A channel to `target`; `base` is the request URIs' `scheme://authority`, the
    /// `authorization` header (sensitive) goes on every request, `timeout` bounds each
    /// attempt (connecting included).
    pub(super) fn new(
        target: Target,
        base: String,
        describe: String,
        authorization: Option<http::HeaderValue>,
        timeout: Duration,
    ) -> Channel {
        Channel {
            target,
            base,
            describe,
            authorization,
            timeout,
            conn: tokio::sync::Mutex::new(None),
            drivers: std::sync::Mutex::new(Vec::new()),
            connections: AtomicU64::new(0),
        }
    }

    pub(super) fn describe(&self) -> &str {
        &self.describe
    }

    /// Calls `method` (`/authzed.api.v1.PermissionsService/LookupResources`) with one
    /// marshalled request and returns every marshalled response message (one for a
    /// unary call), retrying what may pass.
    pub(super) async fn call(&self, method: &str, request: &[u8]) -> Result<Vec<Vec<u8>>> {
        match self.call_or_status(method, request, None).await? {
            Ok(messages) => Ok(messages),
            Err(s) => Err(s.into_error(&self.describe, Some(self.timeout))),
        }
    }

    /// [`call`](Self::call), except that the status `expected` (a refused
    /// precondition, say) is the answer, not an error: it is never retried.
    pub(super) async fn call_or_status(
        &self,
        method: &str,
        request: &[u8],
        expected: Option<u32>,
    ) -> Result<std::result::Result<Vec<Vec<u8>>, Status>> {
        let span = tracing::debug_span!("gralkor.spicedb.call", method, server = %self.describe);
        retry(method, BACKOFF, || self.attempt(method, request, expected))
            .instrument(span)
            .await
    }

    async fn attempt(
        &self,
        method: &str,
        request: &[u8],
        expected: Option<u32>,
    ) -> Result<std::result::Result<Vec<Vec<u8>>, Status>> {
        let what = format!("{} {}", self.describe, method_name(method));
        let attempt = async {
            let conn = self.connection().await?;
            let outcome = exchange(&conn.send, self.request(method)?, request).await;
            if matches!(outcome, Err(Failure::Transport(_))) {
                self.forget(conn.id).await;
            }
            outcome
        };
        match tokio::time::timeout(self.timeout, attempt).await {
            Ok(Ok(messages)) => Ok(Ok(messages)),
            Ok(Err(Failure::Status(s))) if Some(s.code) == expected => Ok(Err(s)),
            Ok(Err(Failure::Transport(e))) => Err(Error::Connection {
                context: format!("{what}: {e}"),
                source: None,
            }),
            Ok(Err(Failure::Status(s))) => Err(s.into_error(&what, Some(self.timeout))),
            Ok(Err(Failure::Malformed(e))) => Err(Error::Protocol(format!("{what}: {e}"))),
            Ok(Err(Failure::Tls(e))) => Err(Error::config(
                "spicedb.endpoint",
                format!("refused the TLS handshake ({what}: {e})"),
            )),
            Err(_) => {
                // A connection that hangs is not trusted again.
                let stale = self.conn.lock().await.as_ref().map(|c| c.id);
                if let Some(id) = stale {
                    self.forget(id).await;
                }
                Err(Error::Timeout {
                    operation: what,
                    after: self.timeout,
                })
            }
        }
    }

    /// The head of a request to `method`.
    pub(super) fn request(&self, method: &str) -> std::result::Result<http::Request<()>, Failure> {
        let mut req = http::Request::builder()
            .method("POST")
            .uri(format!("{}{method}", self.base))
            .header("content-type", "application/grpc")
            .header("te", "trailers");
        let millis = self.timeout.as_millis();
        if millis > 0 && millis <= 99_999_999 {
            req = req.header("grpc-timeout", format!("{millis}m"));
        }
        if let Some(a) = &self.authorization {
            req = req.header(http::header::AUTHORIZATION, a.clone());
        }
        req.body(())
            .map_err(|e| Failure::Malformed(format!("building the request: {e}")))
    }

    /// The live connection, made if there is none (or the last one broke).
    async fn connection(&self) -> std::result::Result<Conn, Failure> {
        let mut current = self.conn.lock().await;
        if let Some(c) = current.as_ref().filter(|c| c.alive.load(Ordering::Acquire)) {
            return Ok(c.clone());
        }
        let conn = self.connect().await?;
        *current = Some(conn.clone());
        Ok(conn)
    }

    /// A sender on the live connection, for a caller that drives the request itself
    /// (the server's streaming forward); `forget` it when the transport fails.
    pub(super) async fn sender(
        &self,
    ) -> std::result::Result<(h2::client::SendRequest<Bytes>, u64), Failure> {
        let c = self.connection().await?;
        Ok((c.send, c.id))
    }

    /// Drops connection `id` if it is still the current one.
    pub(super) async fn forget(&self, id: u64) {
        let mut current = self.conn.lock().await;
        if current.as_ref().map(|c| c.id) == Some(id) {
            *current = None;
        }
    }

    async fn connect(&self) -> std::result::Result<Conn, Failure> {
        let (send, alive) = match &self.target {
            Target::Unix(path) => {
                let io = tokio::net::UnixStream::connect(path)
                    .await
                    .map_err(Failure::transport)?;
                self.handshake(io).await?
            }
            Target::Tcp(addr) => {
                let io = tokio::net::TcpStream::connect(addr)
                    .await
                    .map_err(Failure::transport)?;
                let _ = io.set_nodelay(true);
                self.handshake(io).await?
            }
            Target::Tls {
                addr,
                server_name,
                connector,
            } => {
                let io = tokio::net::TcpStream::connect(addr)
                    .await
                    .map_err(Failure::transport)?;
                let _ = io.set_nodelay(true);
                let io = connector
                    .connect(server_name.clone(), io)
                    .await
                    .map_err(|e| {
                        // rustls' own refusals (a certificate, a protocol) are final;
                        // an I/O error on the way may pass.
                        let refused = e.get_ref().is_some_and(|inner| inner.is::<rustls::Error>());
                        if refused {
                            Failure::Tls(e.to_string())
                        } else {
                            Failure::transport(e)
                        }
                    })?;
                if io.get_ref().1.alpn_protocol() != Some(b"h2") {
                    return Err(Failure::Tls(
                        "the server did not agree to HTTP/2 (ALPN h2)".into(),
                    ));
                }
                self.handshake(io).await?
            }
        };
        let id = self.connections.fetch_add(1, Ordering::Relaxed);
        tracing::debug!(server = %self.describe, connection = id, "connected");
        Ok(Conn { send, alive, id })
    }

    async fn handshake<T>(
        &self,
        io: T,
    ) -> std::result::Result<(h2::client::SendRequest<Bytes>, Arc<AtomicBool>), Failure>
    where
        T: tokio::io::AsyncRead + tokio::io::AsyncWrite + Unpin + Send + 'static,
    {
        let (send, conn) = h2::client::handshake(io)
            .await
            .map_err(Failure::transport)?;
        let alive = Arc::new(AtomicBool::new(true));
        let flag = alive.clone();
        let driver = tokio::spawn(async move {
            let _ = conn.await;
            flag.store(false, Ordering::Release);
        });
        let mut drivers = self.drivers.lock().unwrap_or_else(|p| p.into_inner());
        drivers.retain(|d| !d.is_finished());
        drivers.push(driver.abort_handle());
        Ok((send, alive))
    }
}

/// The last segment of a method's path (`LookupResources`).
fn method_name(method: &str) -> &str {
    method.rsplit('/').next().unwrap_or(method)
}

/// `message` with gRPC's length-prefixed framing (uncompressed).
pub(super) fn frame(message: &[u8]) -> Bytes {
    let mut framed = Vec::with_capacity(message.len() + 5);
    framed.push(0);
    framed.extend_from_slice(&(message.len() as u32).to_be_bytes());
    framed.extend_from_slice(message);
    Bytes::from(framed)
}

/// The messages of a length-prefixed body.
pub(super) fn unframe(buf: &[u8]) -> std::result::Result<Vec<Vec<u8>>, String> {
    let mut messages = Vec::new();
    let mut at = 0;
    while at < buf.len() {
        if at + 5 > buf.len() {
            return Err("a cut message header".into());
        }
        if buf[at] != 0 {
            return Err("a compressed message (gralkor asks for none)".into());
        }
        let len = u32::from_be_bytes([buf[at + 1], buf[at + 2], buf[at + 3], buf[at + 4]]) as usize;
        let end = at + 5 + len;
        if end > buf.len() {
            return Err("a cut message".into());
        }
        messages.push(buf[at + 5..end].to_vec());
        at = end;
    }
    Ok(messages)
}

/// The status of a reply: `grpc-status` of the trailers, or of the headers for a
/// trailers-only reply; `None` for OK.
pub(super) fn status_of(
    headers: &http::HeaderMap,
    trailers: Option<&http::HeaderMap>,
) -> std::result::Result<Option<Status>, Failure> {
    let source = trailers
        .filter(|t| t.contains_key("grpc-status"))
        .unwrap_or(headers);
    let Some(code) = source.get("grpc-status") else {
        return Err(Failure::Malformed("a reply without grpc-status".into()));
    };
    let code: u32 = code
        .to_str()
        .ok()
        .and_then(|c| c.parse().ok())
        .ok_or_else(|| Failure::Malformed("an unreadable grpc-status".into()))?;
    if code == status::OK {
        return Ok(None);
    }
    let message = source
        .get("grpc-message")
        .and_then(|v| v.to_str().ok())
        .map(status::percent_decode)
        .unwrap_or_default();
    Ok(Some(Status::new(code, message)))
}

/// The gRPC status for a reply that is not HTTP 200 (gRPC's HTTP-to-status table).
fn http_status(code: http::StatusCode) -> Status {
    let grpc = match code.as_u16() {
        400 => 13,
        401 => status::UNAUTHENTICATED,
        403 => status::PERMISSION_DENIED,
        404 => status::UNIMPLEMENTED,
        429 | 502..=504 => status::UNAVAILABLE,
        _ => status::UNKNOWN,
    };
    Status::new(grpc, format!("HTTP {code}"))
}

/// One request on `send`: the request message, then every response message.
async fn exchange(
    send: &h2::client::SendRequest<Bytes>,
    req: http::Request<()>,
    request: &[u8],
) -> std::result::Result<Vec<Vec<u8>>, Failure> {
    let mut send = send.clone().ready().await.map_err(Failure::transport)?;
    let (response, mut body) = send.send_request(req, false).map_err(Failure::transport)?;
    // A server may answer (and close the stream) before it reads the request — a
    // refused key, say: then the answer is what counts, and it comes next.
    let _ = body.send_data(frame(request), true);
    let response = response.await.map_err(Failure::transport)?;
    let (head, mut body) = response.into_parts();
    if head.status != http::StatusCode::OK {
        return Err(Failure::Status(http_status(head.status)));
    }
    let mut buf = Vec::new();
    while let Some(chunk) = body.data().await {
        let chunk = chunk.map_err(Failure::transport)?;
        let _ = body.flow_control().release_capacity(chunk.len());
        buf.extend_from_slice(&chunk);
        if buf.len() > MAX_RESPONSE {
            return Err(Failure::Malformed(format!(
                "a reply of more than {MAX_RESPONSE} bytes"
            )));
        }
    }
    let trailers = body.trailers().await.map_err(Failure::transport)?;
    if let Some(s) = status_of(&head.headers, trailers.as_ref())? {
        return Err(Failure::Status(s));
    }
    unframe(&buf).map_err(Failure::Malformed)
}
