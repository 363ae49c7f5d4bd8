//! A SpiceDB server reached over the network: its options ([`RemoteSpiceDb`]), the
//! checks on them, and the consistency the reads ask for ([`Consistency`], ZedTokens).

use std::sync::Mutex;
use std::time::Duration;

use super::SpiceDbAuthorizer;
use crate::{Error, Result};

/// What a read (check, lookup, relationship read) of a [`SpiceDbAuthorizer`] asks
/// SpiceDB for.
///
/// Either way, a read sees every write and delete **this authorizer** made that
/// returned before the read started. Writes made through another authorizer (another
/// process, another [`connect`](SpiceDbAuthorizer::connect)) are seen at once only
/// with [`FullyConsistent`](Consistency::FullyConsistent); with
/// [`OwnWrites`](Consistency::OwnWrites) they show within SpiceDB's quantization
/// window (`--datastore-revision-quantization-interval`, 5 s by default).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
#[non_exhaustive]
pub enum Consistency {
    /// The default: reads ask for `at_least_as_fresh` the ZedToken of this
    /// authorizer's latest write, which SpiceDB can answer from its caches. Tokens
    /// are opaque, so when writes overlapped (which of them is newest cannot be told)
    /// and before the first write, reads ask for `fully_consistent` until a write
    /// completes with no other in flight.
    #[default]
    OwnWrites,
    /// Every read asks for `fully_consistent`: the newest revision, no cache. Sees
    /// every process's writes at once, at a price on a busy cluster.
    FullyConsistent,
}

/// The ZedToken reads ask to be at least as fresh as: the token of the latest write,
/// while it is known to be the newest.
#[derive(Debug)]
pub(super) struct Freshness {
    mode: Consistency,
    state: Mutex<Tokens>,
}

#[derive(Debug, Default)]
struct Tokens {
    /// Writes begun, ever (each write's sequence number).
    started: u64,
    /// Writes in flight.
    in_flight: u32,
    /// The newest write's ZedToken; `None` when unknown (no write yet, or overlapping
    /// writes, or a write that failed and may yet have been applied).
    newest: Option<String>,
}

/// A write in flight; [`WriteGuard::finish`] records its token (dropped unfinished,
/// it counts as a failed write).
pub(super) struct WriteGuard<'a> {
    freshness: &'a Freshness,
    seq: u64,
    alone: bool,
    done: bool,
}

impl Freshness {
    pub(super) fn new(mode: Consistency) -> Freshness {
        Freshness {
            mode,
            state: Mutex::new(Tokens::default()),
        }
    }

    fn tokens(&self) -> std::sync::MutexGuard<'_, Tokens> {
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// The token a read starting now asks to be at least as fresh as; `None` asks for
    /// full consistency.
    pub(super) fn read(&self) -> Option<String> {
        match self.mode {
            Consistency::FullyConsistent => None,
            Consistency::OwnWrites => self.tokens().newest.clone(),
        }
    }

    /// A write begins.
    pub(super) fn begin(&self) -> WriteGuard<'_> {
        let mut t = self.tokens();
        t.started += 1;
        let alone = t.in_flight == 0;
        t.in_flight += 1;
        WriteGuard {
            freshness: self,
            seq: t.started,
            alone,
            done: false,
        }
    }

    fn end(&self, seq: u64, alone: bool, token: Option<String>) {
        let mut t = self.tokens();
        t.in_flight -= 1;
        // The token is the newest only if no other write was in flight at any time
        // during this one: none when it began, none begun since.
        t.newest = match token {
            Some(token) if alone && t.started == seq => Some(token),
            _ => None,
        };
    }
}

impl WriteGuard<'_> {
    /// The write returned with `token` (its `written_at`/`deleted_at`).
    pub(super) fn finish(mut self, token: String) {
        self.done = true;
        self.freshness.end(self.seq, self.alone, Some(token));
    }
}

impl Drop for WriteGuard<'_> {
    fn drop(&mut self) {
        if !self.done {
            self.freshness.end(self.seq, self.alone, None);
        }
    }
}

/// How to reach a SpiceDB server: its endpoint, the preshared key, a timeout, whether
/// to write [`SCHEMA`](crate::access::SCHEMA) and the [`Consistency`] of reads.
/// [`connect`](RemoteSpiceDb::connect) checks them all before anything is sent.
///
/// ```no_run
/// # async fn run() -> gralkor::Result<()> {
/// use std::time::Duration;
/// use gralkor::access::{Consistency, RemoteSpiceDb};
///
/// let key = std::env::var("SPICEDB_PRESHARED_KEY").unwrap_or_default();
/// let authz = RemoteSpiceDb::new("https://spicedb.internal:50051", key)
///     .timeout(Duration::from_secs(5))
///     .consistency(Consistency::FullyConsistent)
///     .connect()
///     .await?;
/// # let _ = authz;
/// # Ok(()) }
/// ```
#[derive(Clone)]
pub struct RemoteSpiceDb {
    pub(super) endpoint: String,
    pub(super) preshared_key: String,
    pub(super) timeout: Duration,
    pub(super) write_schema: bool,
    pub(super) consistency: Consistency,
    pub(super) ca_certificates: Option<Vec<u8>>,
}

impl std::fmt::Debug for RemoteSpiceDb {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RemoteSpiceDb")
            .field("endpoint", &self.endpoint)
            .field("preshared_key", &"<redacted>")
            .field("timeout", &self.timeout)
            .field("write_schema", &self.write_schema)
            .field("consistency", &self.consistency)
            .field("ca_certificates", &self.ca_certificates.is_some())
            .finish()
    }
}

/// The default [`RemoteSpiceDb::timeout`].
pub const DEFAULT_SPICEDB_TIMEOUT: Duration = Duration::from_secs(10);

impl RemoteSpiceDb {
    /// A SpiceDB server at `endpoint` — `https://host:port` (TLS, the certificate
    /// checked against the Mozilla roots and any
    /// [`ca_certificates`](RemoteSpiceDb::ca_certificates)) or `http://host:port`
    /// (plaintext HTTP/2, SpiceDB run with `--grpc-no-tls`) — authenticated with
    /// `preshared_key` (SpiceDB's `--grpc-preshared-key`, sent as
    /// `authorization: Bearer <key>` on every call). Defaults:
    /// [`DEFAULT_SPICEDB_TIMEOUT`], writes the schema, [`Consistency::OwnWrites`].
    pub fn new(endpoint: impl Into<String>, preshared_key: impl Into<String>) -> RemoteSpiceDb {
        RemoteSpiceDb {
            endpoint: endpoint.into(),
            preshared_key: preshared_key.into(),
            timeout: DEFAULT_SPICEDB_TIMEOUT,
            write_schema: true,
            consistency: Consistency::default(),
            ca_certificates: None,
        }
    }

    /// How long one attempt of a call may take, connecting included (a call that
    /// times out is tried again, a few times, like a lost connection).
    pub fn timeout(mut self, timeout: Duration) -> RemoteSpiceDb {
        self.timeout = timeout;
        self
    }

    /// Whether [`connect`](RemoteSpiceDb::connect) writes
    /// [`SCHEMA`](crate::access::SCHEMA) (default `true`). With `false` the server's
    /// schema must already be it; connecting then makes one check instead (the health probe), so
    /// an unreachable server or a refused key still fails at once.
    pub fn write_schema(mut self, write: bool) -> RemoteSpiceDb {
        self.write_schema = write;
        self
    }

    /// Certificates (PEM) an `https://` endpoint's certificate may chain to, besides
    /// the Mozilla roots (`webpki-roots`): a private CA's. Unusable PEM is
    /// [`Error::Config`] naming `spicedb.ca_certificates` at
    /// [`connect`](RemoteSpiceDb::connect), and so is giving them for `http://`.
    pub fn ca_certificates(mut self, pem: impl Into<Vec<u8>>) -> RemoteSpiceDb {
        self.ca_certificates = Some(pem.into());
        self
    }

    /// The consistency reads ask for (default [`Consistency::OwnWrites`]).
    pub fn consistency(mut self, consistency: Consistency) -> RemoteSpiceDb {
        self.consistency = consistency;
        self
    }

    /// Checks the options (an error names `spicedb.endpoint`, `spicedb.preshared_key`,
    /// `spicedb.timeout` or `spicedb.ca_certificates`), connects (a certificate the
    /// server's chain does not verify against is [`Error::Config`] naming
    /// `spicedb.endpoint`, not retried), and writes the schema (or makes one empty
    /// check): a refused key is [`Error::Config`] naming `spicedb.preshared_key`.
    ///
    /// ```no_run
    /// # async fn run() -> gralkor::Result<()> {
    /// let authz = gralkor::access::RemoteSpiceDb::new("http://127.0.0.1:50051", "secret")
    ///     .write_schema(false)
    ///     .connect()
    ///     .await?;
    /// # let _ = authz;
    /// # Ok(()) }
    /// ```
    pub async fn connect(self) -> Result<SpiceDbAuthorizer> {
        SpiceDbAuthorizer::connect_remote(self).await
    }
}

/// A checked endpoint.
#[derive(Debug, PartialEq, Eq)]
pub(super) struct Endpoint {
    /// `host:port` to connect to.
    pub(super) addr: String,
    /// The request URIs' `scheme://authority`.
    pub(super) base: String,
    /// The host the server's certificate must name, for `https://`.
    pub(super) tls_host: Option<String>,
}

/// The checked endpoint.
pub(super) fn parse_endpoint(endpoint: &str) -> Result<Endpoint> {
    const FIELD: &str = "spicedb.endpoint";
    let example = "like http://localhost:50051 or https://spicedb.example:443";
    let uri: http::Uri = endpoint
        .parse()
        .map_err(|e| Error::config(FIELD, format!("must be a URL {example} ({e})")))?;
    let tls = match uri.scheme_str() {
        Some("http") => false,
        Some("https") => true,
        _ => {
            return Err(Error::config(
                FIELD,
                format!("must be an http:// or https:// URL {example}"),
            ));
        }
    };
    let authority = uri
        .authority()
        .ok_or_else(|| Error::config(FIELD, format!("must name a host {example}")))?;
    if authority.as_str().contains('@') {
        return Err(Error::config(
            FIELD,
            "must not carry credentials: the preshared key is given on its own",
        ));
    }
    let host = authority.host();
    if host.is_empty() {
        return Err(Error::config(FIELD, format!("must name a host {example}")));
    }
    if authority.port_u16().is_none() {
        return Err(Error::config(
            FIELD,
            format!("must name a port (SpiceDB's gRPC port, 50051 by default) {example}"),
        ));
    }
    if !matches!(uri.path(), "" | "/") || uri.query().is_some() {
        return Err(Error::config(
            FIELD,
            format!("must have no path or query {example}"),
        ));
    }
    let scheme = if tls { "https" } else { "http" };
    let bare = host.trim_start_matches('[').trim_end_matches(']');
    Ok(Endpoint {
        addr: authority.as_str().to_string(),
        base: format!("{scheme}://{authority}"),
        tls_host: tls.then(|| bare.to_string()),
    })
}

/// The TLS client configuration for `host`: the Mozilla roots (`webpki-roots`) and
/// the extra `ca_certificates` (PEM), ALPN `h2`, ring as the crypto provider.
pub(super) fn tls(
    host: &str,
    ca_certificates: Option<&[u8]>,
) -> Result<(
    std::sync::Arc<rustls::ClientConfig>,
    rustls::pki_types::ServerName<'static>,
)> {
    use rustls::pki_types::CertificateDer;
    use rustls::pki_types::pem::PemObject;
    const CA: &str = "spicedb.ca_certificates";
    let mut roots = rustls::RootCertStore::empty();
    roots.extend(webpki_roots::TLS_SERVER_ROOTS.iter().cloned());
    if let Some(pem) = ca_certificates {
        let mut added = 0;
        for cert in CertificateDer::pem_slice_iter(pem) {
            let cert =
                cert.map_err(|e| Error::config(CA, format!("must be PEM certificates ({e})")))?;
            roots
                .add(cert)
                .map_err(|e| Error::config(CA, format!("holds an unusable certificate ({e})")))?;
            added += 1;
        }
        if added == 0 {
            return Err(Error::config(CA, "must hold at least one PEM certificate"));
        }
    }
    let provider = std::sync::Arc::new(rustls::crypto::ring::default_provider());
    let mut config = rustls::ClientConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .map_err(|e| Error::config(CA, format!("no TLS version to use ({e})")))?
        .with_root_certificates(roots)
        .with_no_client_auth();
    config.alpn_protocols = vec![b"h2".to_vec()];
    let name = rustls::pki_types::ServerName::try_from(host.to_string()).map_err(|e| {
        Error::config(
            "spicedb.endpoint",
            format!("names a host TLS cannot verify ({e})"),
        )
    })?;
    Ok((std::sync::Arc::new(config), name))
}

/// The checked preshared key as the value of an `authorization` header (sensitive).
pub(super) fn bearer(preshared_key: &str) -> Result<http::HeaderValue> {
    const FIELD: &str = "spicedb.preshared_key";
    if preshared_key.is_empty() {
        return Err(Error::config(FIELD, "must not be empty"));
    }
    if let Some(c) = preshared_key
        .chars()
        .find(|c| c.is_whitespace() || c.is_control() || !c.is_ascii())
    {
        let what = if c.is_whitespace() {
            "whitespace"
        } else if c.is_control() {
            "control characters"
        } else {
            "characters outside ASCII"
        };
        return Err(Error::config(FIELD, format!("must not contain {what}")));
    }
    let mut value = http::HeaderValue::try_from(format!("Bearer {preshared_key}"))
        .map_err(|_| Error::config(FIELD, "must be printable ASCII"))?;
    value.set_sensitive(true);
    Ok(value)
}

pub(super) fn check_timeout(timeout: Duration) -> Result<()> {
    if timeout.is_zero() {
        return Err(Error::config("spicedb.timeout", "must be more than zero"));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_token_is_trusted_only_from_a_write_that_overlapped_no_other() {
        let f = Freshness::new(Consistency::OwnWrites);
        assert_eq!(f.read(), None, "before any write: fully consistent");
        f.begin().finish("t1".into());
        assert_eq!(f.read().as_deref(), Some("t1"));
        // Two overlapping writes: neither token is known to be the newest.
        let (a, b) = (f.begin(), f.begin());
        assert_eq!(
            f.read().as_deref(),
            Some("t1"),
            "in flight: the last one stands"
        );
        b.finish("t3".into());
        assert_eq!(f.read(), None);
        a.finish("t2".into());
        assert_eq!(f.read(), None);
        // A write that began alone but saw another begin is ambiguous too.
        let c = f.begin();
        let d = f.begin();
        d.finish("t5".into());
        c.finish("t4".into());
        assert_eq!(f.read(), None);
        f.begin().finish("t6".into());
        assert_eq!(f.read().as_deref(), Some("t6"), "a lone write settles it");
        drop(f.begin());
        assert_eq!(f.read(), None, "a failed write may have been applied");
        let full = Freshness::new(Consistency::FullyConsistent);
        full.begin().finish("t".into());
        assert_eq!(full.read(), None);
    }

    #[test]
    fn endpoints_and_keys_are_checked_naming_the_field() {
        assert_eq!(
            parse_endpoint("http://127.0.0.1:50051").unwrap(),
            Endpoint {
                addr: "127.0.0.1:50051".into(),
                base: "http://127.0.0.1:50051".into(),
                tls_host: None,
            }
        );
        assert!(parse_endpoint("http://[::1]:50051/").is_ok());
        let tls = parse_endpoint("https://[::1]:443").unwrap();
        assert_eq!(tls.tls_host.as_deref(), Some("::1"));
        assert_eq!(tls.base, "https://[::1]:443");
        for bad in [
            "",
            "localhost:50051",
            "https://spicedb",
            "grpc://spicedb:50051",
            "http://spicedb",
            "http://u:p@spicedb:50051",
            "http://spicedb:50051/api",
        ] {
            let e = parse_endpoint(bad).unwrap_err();
            assert!(
                matches!(&e, Error::Config { field, .. } if field == "spicedb.endpoint"),
                "{bad}: {e}"
            );
        }
        assert!(bearer("s3cr3t-key").is_ok());
        for bad in ["", "two words", "tab\t", "nul\0", "ü"] {
            let e = bearer(bad).unwrap_err();
            assert!(
                matches!(&e, Error::Config { field, .. } if field == "spicedb.preshared_key"),
                "{bad:?}: {e}"
            );
        }
        assert!(check_timeout(Duration::ZERO).is_err());
    }
}
