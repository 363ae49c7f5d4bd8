//! [`SpiceDbServer`]: an embedded SpiceDB served to other processes over gRPC on TCP
//! (plaintext HTTP/2), guarded by a preshared key as SpiceDB's own server is.

use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use bytes::Bytes;
use tracing::Instrument;

use super::ffi::Rpc;
use super::grpc::{self, Channel, Failure};
use super::status::{self, Status};
use super::{Instance, SpiceDbAuthorizer};
use crate::Result;

/// The streaming methods the library's own proxy serves.
const STREAMING: [&str; 4] = [
    "/authzed.api.v1.PermissionsService/LookupResources",
    "/authzed.api.v1.PermissionsService/ReadRelationships",
    "/authzed.api.v1.PermissionsService/LookupSubjects",
    "/authzed.api.v1.WatchService/Watch",
];

/// The largest request accepted (gRPC's default message limit).
const MAX_REQUEST: usize = 4 << 20;

/// An embedded SpiceDB ([`SpiceDbAuthorizer::start_embedded`]) served over gRPC on a
/// TCP listener, for other processes to [`connect`](SpiceDbAuthorizer::connect) to:
/// the SpiceDB API (`authzed.api.v1`: the schema and permission calls the library
/// has, and its streaming ones), plaintext HTTP/2 like SpiceDB's `--grpc-no-tls`,
/// every call refused with `UNAUTHENTICATED` unless it carries
/// `authorization: Bearer <preshared key>`; unknown methods are `UNIMPLEMENTED`.
///
/// One process can so share its SpiceDB — the CLI's MCP server and a second agent,
/// say — with no Go toolchain or container. Made by [`SpiceDbAuthorizer::serve`];
/// stops when dropped (or [`shutdown`](SpiceDbServer::shutdown), which waits).
pub struct SpiceDbServer {
    local_addr: SocketAddr,
    stop: Option<tokio::sync::watch::Sender<()>>,
    task: Option<tokio::task::JoinHandle<()>>,
    stats: Arc<Stats>,
}

#[derive(Debug, Default)]
struct Stats {
    calls: AtomicU64,
    refused: AtomicU64,
}

impl std::fmt::Debug for SpiceDbServer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SpiceDbServer")
            .field("local_addr", &self.local_addr)
            .field("calls", &self.calls())
            .finish_non_exhaustive()
    }
}

struct Shared {
    instance: Arc<Instance>,
    proxy: Arc<Channel>,
    expected: Vec<u8>,
    stats: Arc<Stats>,
}

impl SpiceDbServer {
    pub(super) fn start(
        authz: &SpiceDbAuthorizer,
        listener: tokio::net::TcpListener,
        preshared_key: &str,
    ) -> Result<SpiceDbServer> {
        let (instance, proxy) = authz.embedded().ok_or_else(|| {
            crate::Error::invalid(
                "authorizer",
                "must be an embedded SpiceDB (start_embedded) to be served; this one is connected to a server",
            )
        })?;
        let expected = super::remote::bearer(preshared_key)?.as_bytes().to_vec();
        let local_addr = listener
            .local_addr()
            .map_err(|e| crate::Error::io("reading the listener's address", e))?;
        let stats = Arc::new(Stats::default());
        let shared = Arc::new(Shared {
            instance,
            proxy,
            expected,
            stats: stats.clone(),
        });
        let (stop, stopped) = tokio::sync::watch::channel(());
        let span = tracing::info_span!("gralkor.spicedb.serve", %local_addr);
        let task = tokio::spawn(accept(listener, shared, stopped).instrument(span));
        Ok(SpiceDbServer {
            local_addr,
            stop: Some(stop),
            task: Some(task),
            stats,
        })
    }

    /// The address it listens on.
    pub fn local_addr(&self) -> SocketAddr {
        self.local_addr
    }

    /// The endpoint to [`connect`](SpiceDbAuthorizer::connect) to
    /// (`http://127.0.0.1:50051`).
    pub fn endpoint(&self) -> String {
        format!("http://{}", self.local_addr)
    }

    /// Calls received so far (refused ones included).
    pub fn calls(&self) -> u64 {
        self.stats.calls.load(Ordering::Relaxed)
    }

    /// Calls refused so far for a missing or wrong preshared key.
    pub fn refused_calls(&self) -> u64 {
        self.stats.refused.load(Ordering::Relaxed)
    }

    /// Stops accepting (the listener is closed), lets the calls in progress finish,
    /// closes every connection and returns when all is done: the address can then be
    /// bound again.
    ///
    /// ```no_run
    /// # async fn run() -> gralkor::Result<()> {
    /// use gralkor::access::SpiceDbAuthorizer;
    ///
    /// let embedded = SpiceDbAuthorizer::start_embedded().await?;
    /// let listener = tokio::net::TcpListener::bind("127.0.0.1:50051").await.unwrap();
    /// let server = embedded.serve(listener, "a-long-random-key")?;
    /// // ... other processes connect to http://127.0.0.1:50051 ...
    /// server.shutdown().await;
    /// # Ok(()) }
    /// ```
    pub async fn shutdown(mut self) {
        self.stop.take();
        if let Some(task) = self.task.take() {
            let _ = task.await;
        }
    }
}

impl Drop for SpiceDbServer {
    fn drop(&mut self) {
        // Dropping the sender tells the accept loop and every connection to stop.
        self.stop.take();
    }
}

async fn accept(
    listener: tokio::net::TcpListener,
    shared: Arc<Shared>,
    mut stopped: tokio::sync::watch::Receiver<()>,
) {
    let mut connections = tokio::task::JoinSet::new();
    loop {
        tokio::select! {
            _ = stopped.changed() => break,
            accepted = listener.accept() => match accepted {
                Ok((tcp, peer)) => {
                    let _ = tcp.set_nodelay(true);
                    let span = tracing::debug_span!("connection", %peer);
                    connections.spawn(
                        connection(tcp, shared.clone(), stopped.clone()).instrument(span),
                    );
                }
                Err(e) => {
                    tracing::warn!(error = %e, "accepting a connection failed");
                    tokio::time::sleep(std::time::Duration::from_millis(10)).await;
                }
            },
            Some(_) = connections.join_next(), if !connections.is_empty() => {}
        }
    }
    drop(listener);
    while connections.join_next().await.is_some() {}
}

async fn connection(
    tcp: tokio::net::TcpStream,
    shared: Arc<Shared>,
    mut stopped: tokio::sync::watch::Receiver<()>,
) {
    let Ok(mut conn) = h2::server::handshake(tcp).await else {
        return;
    };
    let mut stopping = false;
    let mut calls = tokio::task::JoinSet::new();
    loop {
        tokio::select! {
            _ = stopped.changed(), if !stopping => {
                stopping = true;
                conn.graceful_shutdown();
            }
            next = conn.accept() => match next {
                Some(Ok((request, respond))) => {
                    calls.spawn(call(request, respond, shared.clone()));
                }
                Some(Err(e)) => {
                    tracing::debug!(error = %e, "connection failed");
                    break;
                }
                None => break,
            },
        }
    }
    calls.abort_all();
}

fn eq_constant_time(a: &[u8], b: &[u8]) -> bool {
    a.len() == b.len() && a.iter().zip(b).fold(0u8, |acc, (x, y)| acc | (x ^ y)) == 0
}

fn grpc_head(status: Option<&Status>) -> http::Response<()> {
    let mut r = http::Response::builder()
        .status(http::StatusCode::OK)
        .header("content-type", "application/grpc");
    if let Some(s) = status {
        r = r
            .header("grpc-status", s.code.to_string())
            .header("grpc-message", status::percent_encode(&s.message));
    }
    r.body(()).expect("a valid response head")
}

/// A trailers-only reply: the status in the headers, nothing else.
fn refuse(respond: &mut h2::server::SendResponse<Bytes>, status: &Status) {
    let _ = respond.send_response(grpc_head(Some(status)), true);
}

async fn call(
    request: http::Request<h2::RecvStream>,
    mut respond: h2::server::SendResponse<Bytes>,
    shared: Arc<Shared>,
) {
    shared.stats.calls.fetch_add(1, Ordering::Relaxed);
    let (head, body) = request.into_parts();
    let path = head.uri.path().to_string();
    let span = tracing::debug_span!("gralkor.spicedb.served_call", method = %path);
    async {
        let rpc = Rpc::from_path(&path);
        if rpc.is_none() && !STREAMING.contains(&path.as_str()) {
            return refuse(
                &mut respond,
                &Status::new(status::UNIMPLEMENTED, format!("unknown method {path}")),
            );
        }
        let presented = head.headers.get(http::header::AUTHORIZATION);
        let refusal = match presented {
            None => Some("Request unauthenticated with bearer"),
            Some(v) if !eq_constant_time(v.as_bytes(), &shared.expected) => {
                Some("invalid preshared key: invalid token")
            }
            Some(_) => None,
        };
        if let Some(message) = refusal {
            shared.stats.refused.fetch_add(1, Ordering::Relaxed);
            tracing::debug!(message, "refused");
            return refuse(&mut respond, &Status::new(status::UNAUTHENTICATED, message));
        }
        let message = match read_request(body).await {
            Ok(m) => m,
            Err(s) => return refuse(&mut respond, &s),
        };
        match rpc {
            Some(rpc) => unary(shared.instance.clone(), rpc, message, respond).await,
            None => forward(&shared.proxy, &path, message, respond).await,
        }
    }
    .instrument(span)
    .await
}

/// The one request message of a call.
async fn read_request(mut body: h2::RecvStream) -> std::result::Result<Vec<u8>, Status> {
    let mut buf = Vec::new();
    while let Some(chunk) = body.data().await {
        let chunk = chunk.map_err(|e| Status::new(status::UNAVAILABLE, e.to_string()))?;
        let _ = body.flow_control().release_capacity(chunk.len());
        buf.extend_from_slice(&chunk);
        if buf.len() > MAX_REQUEST + 5 {
            return Err(Status::new(
                status::RESOURCE_EXHAUSTED,
                format!("a request of more than {MAX_REQUEST} bytes"),
            ));
        }
    }
    let mut messages = grpc::unframe(&buf).map_err(|e| Status::new(13, e))?;
    match messages.len() {
        1 => Ok(messages.remove(0)),
        n => Err(Status::new(
            13,
            format!("{n} request messages for a call that takes one"),
        )),
    }
}

async fn unary(
    instance: Arc<Instance>,
    rpc: Rpc,
    message: Vec<u8>,
    mut respond: h2::server::SendResponse<Bytes>,
) {
    let outcome = tokio::task::spawn_blocking(move || instance.call(rpc, &message))
        .await
        .unwrap_or_else(|e| Err(Status::new(13, format!("the call's task failed: {e}"))));
    match outcome {
        Ok(response) => {
            let Ok(mut out) = respond.send_response(grpc_head(None), false) else {
                return;
            };
            let _ = out.send_data(grpc::frame(&response), false);
            let _ = out.send_trailers(ok_trailers());
        }
        Err(s) => refuse(&mut respond, &s),
    }
}

/// Trailers carrying `status`.
fn status_trailers(status: &Status) -> http::HeaderMap {
    let mut t = http::HeaderMap::new();
    t.insert("grpc-status", status.code.into());
    if let Ok(m) = http::HeaderValue::try_from(status::percent_encode(&status.message)) {
        t.insert("grpc-message", m);
    }
    t
}

fn ok_trailers() -> http::HeaderMap {
    let mut t = http::HeaderMap::new();
    t.insert("grpc-status", http::HeaderValue::from_static("0"));
    t
}

/// A streaming call through the library's proxy: the request forwarded, each
/// response chunk passed back as it comes, then the proxy's status.
async fn forward(
    proxy: &Channel,
    path: &str,
    message: Vec<u8>,
    mut respond: h2::server::SendResponse<Bytes>,
) {
    let unavailable = |e: String| {
        Status::new(
            status::UNAVAILABLE,
            format!("the embedded SpiceDB's streaming proxy: {e}"),
        )
    };
    let upstream = async {
        let (send, id) = proxy.sender().await.map_err(|f| match f {
            Failure::Transport(e) | Failure::Malformed(e) | Failure::Tls(e) => unavailable(e),
            Failure::Status(s) => s,
        })?;
        let request = proxy
            .request(path)
            .map_err(|_| Status::new(13, "a bad request head"))?;
        let sent = async {
            let mut send = send.ready().await?;
            let (response, mut body) = send.send_request(request, false)?;
            // An early answer (the stream already closed) comes next.
            let _ = body.send_data(grpc::frame(&message), true);
            response.await
        }
        .await;
        match sent {
            Ok(r) => Ok(r),
            Err(e) => {
                proxy.forget(id).await;
                Err(unavailable(e.to_string()))
            }
        }
    };
    let response = match upstream.await {
        Ok(r) => r,
        Err(s) => return refuse(&mut respond, &s),
    };
    let (head, mut body) = response.into_parts();
    if head.status != http::StatusCode::OK {
        return refuse(&mut respond, &unavailable(format!("HTTP {}", head.status)));
    }
    if body.is_end_stream() {
        // Trailers-only: the status is in the headers.
        let mut reply = grpc_head(None);
        match grpc::status_of(&head.headers, None) {
            Ok(None) => {
                reply
                    .headers_mut()
                    .insert("grpc-status", http::HeaderValue::from_static("0"));
            }
            Ok(Some(s)) => reply = grpc_head(Some(&s)),
            Err(_) => reply = grpc_head(Some(&Status::new(13, "the proxy sent no status"))),
        }
        let _ = respond.send_response(reply, true);
        return;
    }
    let Ok(mut out) = respond.send_response(grpc_head(None), false) else {
        return;
    };
    while let Some(chunk) = body.data().await {
        let chunk = match chunk {
            Ok(c) => c,
            Err(e) => {
                let _ = out.send_trailers(status_trailers(&unavailable(e.to_string())));
                return;
            }
        };
        let _ = body.flow_control().release_capacity(chunk.len());
        if out.send_data(chunk, false).is_err() {
            return;
        }
    }
    let trailers = match body.trailers().await {
        Ok(Some(t)) if t.contains_key("grpc-status") => t,
        _ => status_trailers(&Status::new(13, "the proxy sent no status")),
    };
    let _ = out.send_trailers(trailers);
}
