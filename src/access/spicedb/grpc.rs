//! Server-streaming calls (LookupResources, ReadRelationships) through the embedded
//! library's gRPC proxy on a Unix socket: plain gRPC over HTTP/2 (`h2`), one request
//! message, the response messages read to the end, the status from the trailers.

use bytes::Bytes;

use crate::{Error, Result};

fn connection(e: impl std::fmt::Display, path: &str) -> Error {
    Error::Connection {
        context: format!("SpiceDB's streaming proxy at {path}: {e}"),
        source: None,
    }
}

/// Calls `method` (`/authzed.api.v1.PermissionsService/LookupResources`) with one
/// marshalled request; returns every marshalled response message.
pub(super) async fn server_streaming(
    socket: &str,
    method: &str,
    request: Vec<u8>,
) -> Result<Vec<Vec<u8>>> {
    let io = tokio::net::UnixStream::connect(socket)
        .await
        .map_err(|e| connection(e, socket))?;
    let (client, conn) = h2::client::handshake(io)
        .await
        .map_err(|e| connection(e, socket))?;
    let driver = tokio::spawn(async move {
        let _ = conn.await;
    });
    let outcome = async {
        let mut client = client.ready().await.map_err(|e| connection(e, socket))?;
        let req = http::Request::builder()
            .method("POST")
            .uri(format!("http://localhost{method}"))
            .header("content-type", "application/grpc")
            .header("te", "trailers")
            .body(())
            .map_err(|e| Error::Protocol(e.to_string()))?;
        let (response, mut send) = client
            .send_request(req, false)
            .map_err(|e| connection(e, socket))?;
        let mut framed = Vec::with_capacity(request.len() + 5);
        framed.push(0);
        framed.extend_from_slice(&(request.len() as u32).to_be_bytes());
        framed.extend_from_slice(&request);
        send.send_data(Bytes::from(framed), true)
            .map_err(|e| connection(e, socket))?;
        let response = response.await.map_err(|e| connection(e, socket))?;
        let (head, mut body) = response.into_parts();
        let mut buf = Vec::new();
        while let Some(chunk) = body.data().await {
            let chunk = chunk.map_err(|e| connection(e, socket))?;
            let _ = body.flow_control().release_capacity(chunk.len());
            buf.extend_from_slice(&chunk);
        }
        let trailers = body.trailers().await.map_err(|e| connection(e, socket))?;
        // A trailers-only reply carries the status in the headers.
        let status_of = |h: &http::HeaderMap| {
            h.get("grpc-status")
                .and_then(|v| v.to_str().ok())
                .map(str::to_string)
        };
        let status = trailers
            .as_ref()
            .and_then(status_of)
            .or_else(|| status_of(&head.headers))
            .unwrap_or_else(|| "0".into());
        if status != "0" {
            let message = trailers
                .as_ref()
                .and_then(|t| t.get("grpc-message"))
                .or_else(|| head.headers.get("grpc-message"))
                .and_then(|v| v.to_str().ok())
                .unwrap_or("")
                .to_string();
            return Err(Error::Protocol(format!(
                "SpiceDB {method}: status {status}: {message}"
            )));
        }
        let mut messages = Vec::new();
        let mut at = 0;
        while at + 5 <= buf.len() {
            let len =
                u32::from_be_bytes([buf[at + 1], buf[at + 2], buf[at + 3], buf[at + 4]]) as usize;
            let end = at + 5 + len;
            if end > buf.len() {
                return Err(Error::Protocol(format!("SpiceDB {method}: a cut message")));
            }
            messages.push(buf[at + 5..end].to_vec());
            at = end;
        }
        Ok(messages)
    }
    .await;
    driver.abort();
    outcome
}
