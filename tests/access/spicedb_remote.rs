//! The SpiceDB authorizer over the network (feature `spicedb`): `SpiceDbAuthorizer::
//! connect` to a real SpiceDB engine — the embedded library served on loopback by
//! `SpiceDbAuthorizer::serve` — with a preshared key. Test names mirror
//! `test-trees/access.md`.

use std::time::Duration;

use gralkor::Error;
use gralkor::access::{
    Authorizer, Consistency, ObjectRef, Permission, Relation, Relationship, RelationshipFilter,
    RemoteSpiceDb, SpiceDbAuthorizer, SpiceDbServer, Subject,
};
use uuid::Uuid;

fn ada() -> Subject {
    Subject::person("ada").unwrap()
}

fn key() -> String {
    Uuid::new_v4().simple().to_string()
}

async fn embedded() -> SpiceDbAuthorizer {
    SpiceDbAuthorizer::start_embedded()
        .await
        .expect("an embedded SpiceDB (the library comes from the npm registry)")
}

async fn serve(embedded: &SpiceDbAuthorizer, addr: &str, key: &str) -> SpiceDbServer {
    let listener = tokio::net::TcpListener::bind(addr).await.unwrap();
    embedded.serve(listener, key).unwrap()
}

fn config_field(e: &Error) -> &str {
    match e {
        Error::Config { field, .. } => field,
        other => panic!("not a configuration error: {other:?}"),
    }
}

/// One raw gRPC call with `h2`: the `grpc-status` and `grpc-message` of the reply.
async fn raw_call(
    server: &SpiceDbServer,
    path: &str,
    authorization: Option<&str>,
) -> (u32, String) {
    let tcp = tokio::net::TcpStream::connect(server.local_addr())
        .await
        .unwrap();
    let (send, conn) = h2::client::handshake(tcp).await.unwrap();
    tokio::spawn(async move {
        let _ = conn.await;
    });
    let mut send = send.ready().await.unwrap();
    let mut req = http::Request::builder()
        .method("POST")
        .uri(format!("{}{path}", server.endpoint()))
        .header("content-type", "application/grpc")
        .header("te", "trailers");
    if let Some(a) = authorization {
        req = req.header("authorization", a);
    }
    let (response, mut body) = send.send_request(req.body(()).unwrap(), false).unwrap();
    // An empty message: five bytes of framing.
    // The server may answer before reading it (a refusal): the stream is then closed.
    let _ = body.send_data(bytes::Bytes::from_static(&[0, 0, 0, 0, 0]), true);
    let (head, mut body) = response.await.unwrap().into_parts();
    while let Some(chunk) = body.data().await {
        chunk.unwrap();
    }
    let trailers = body.trailers().await.unwrap();
    let source = trailers
        .as_ref()
        .filter(|t| t.contains_key("grpc-status"))
        .unwrap_or(&head.headers);
    let get = |name: &str| {
        source
            .get(name)
            .map(|v| v.to_str().unwrap().to_string())
            .unwrap_or_default()
    };
    (get("grpc-status").parse().unwrap(), get("grpc-message"))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_wrong_preshared_key_is_refused_once_and_nothing_is_written() {
    let e = embedded().await;
    let k = key();
    let server = serve(&e, "127.0.0.1:0", &k).await;
    // Connecting writes the schema: refused, and not tried again.
    let err = SpiceDbAuthorizer::connect(&server.endpoint(), "not-the-key")
        .await
        .unwrap_err();
    assert_eq!(config_field(&err), "spicedb.preshared_key", "{err}");
    assert!(err.to_string().contains("was refused"), "{err}");
    assert!(err.to_string().contains("UNAUTHENTICATED"), "{err}");
    assert!(!err.is_retryable());
    assert_eq!((server.calls(), server.refused_calls()), (1, 1));

    // The key rotated under a connected client: its next write is refused once and
    // writes nothing.
    let a = SpiceDbAuthorizer::connect(&server.endpoint(), &k)
        .await
        .unwrap();
    a.write_relationships(&[Relationship::member("team", &ada()).unwrap()])
        .await
        .unwrap();
    let addr = server.local_addr().to_string();
    server.shutdown().await;
    let rotated = key();
    let server = serve(&e, &addr, &rotated).await;
    let bob = Subject::person("bob").unwrap();
    let err = a
        .write_relationships(&[Relationship::member("team", &bob).unwrap()])
        .await
        .unwrap_err();
    assert_eq!(config_field(&err), "spicedb.preshared_key", "{err}");
    assert_eq!((server.calls(), server.refused_calls()), (1, 1));
    let b = RemoteSpiceDb::new(server.endpoint(), &rotated)
        .write_schema(false)
        .connect()
        .await
        .unwrap();
    let members = b
        .read_relationships(&RelationshipFilter::resource(
            ObjectRef::group("team").unwrap(),
        ))
        .await
        .unwrap();
    assert_eq!(members, [Relationship::member("team", &ada()).unwrap()]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_call_without_the_key_is_unauthenticated_and_an_unknown_method_unimplemented() {
    let e = embedded().await;
    let k = key();
    let server = serve(&e, "127.0.0.1:0", &k).await;
    let check = "/authzed.api.v1.PermissionsService/CheckBulkPermissions";
    let (code, message) = raw_call(&server, check, None).await;
    assert_eq!(code, 16, "{message}");
    let (code, _) = raw_call(&server, check, Some("Bearer wrong")).await;
    assert_eq!(code, 16);
    let (code, _) = raw_call(&server, check, Some(&k)).await;
    assert_eq!(code, 16, "the key without `Bearer `");
    assert_eq!(server.refused_calls(), 3);
    let (code, message) = raw_call(&server, check, Some(&format!("Bearer {k}"))).await;
    assert_eq!(code, 0, "{message}");
    let (code, message) = raw_call(
        &server,
        "/authzed.api.v1.PermissionsService/NoSuchMethod",
        Some(&format!("Bearer {k}")),
    )
    .await;
    assert_eq!(code, 12, "{message}");
    assert!(message.contains("NoSuchMethod"), "{message}");
    // A streaming method through the library's proxy, with an empty request: SpiceDB
    // itself rejects it (INVALID_ARGUMENT), and the status comes back.
    let (code, _) = raw_call(
        &server,
        "/authzed.api.v1.PermissionsService/LookupResources",
        Some(&format!("Bearer {k}")),
    )
    .await;
    assert_eq!(code, 3);
    assert_eq!(server.refused_calls(), 3);
}

async fn reads_see_writes_and_deletes_at_once(consistency: Consistency) {
    let e = embedded().await;
    let k = key();
    let server = serve(&e, "127.0.0.1:0", &k).await;
    let a = RemoteSpiceDb::new(server.endpoint(), &k)
        .consistency(consistency)
        .connect()
        .await
        .unwrap();
    for i in 0..20 {
        let team = format!("team-{i}");
        let g = ObjectRef::group(&team).unwrap();
        a.write_relationships(&[Relationship::member(team.clone(), &ada()).unwrap()])
            .await
            .unwrap();
        assert!(
            a.check(&ada(), Permission::Access, &g).await.unwrap(),
            "{i}"
        );
        assert!(
            a.lookup_resources(&ada(), Permission::Contribute)
                .await
                .unwrap()
                .contains(&team)
        );
        let removed = a
            .delete_relationships(
                &RelationshipFilter::resource(g.clone()).relation(Relation::Member),
            )
            .await
            .unwrap();
        assert_eq!(removed, 1);
        assert!(
            !a.check(&ada(), Permission::Access, &g).await.unwrap(),
            "{i}"
        );
        assert!(
            a.read_relationships(&RelationshipFilter::resource(g))
                .await
                .unwrap()
                .is_empty()
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_check_right_after_a_write_or_a_delete_sees_it() {
    reads_see_writes_and_deletes_at_once(Consistency::OwnWrites).await;
    reads_see_writes_and_deletes_at_once(Consistency::FullyConsistent).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_fully_consistent_client_sees_another_clients_writes_at_once() {
    let e = embedded().await;
    let k = key();
    let server = serve(&e, "127.0.0.1:0", &k).await;
    let writer = SpiceDbAuthorizer::connect(&server.endpoint(), &k)
        .await
        .unwrap();
    let reader = RemoteSpiceDb::new(server.endpoint(), &k)
        .write_schema(false)
        .consistency(Consistency::FullyConsistent)
        .connect()
        .await
        .unwrap();
    // The reader writes too, so it holds a ZedToken older than the writer's writes.
    reader
        .write_relationships(&[Relationship::member("own", &ada()).unwrap()])
        .await
        .unwrap();
    for i in 0..10 {
        let team = format!("team-{i}");
        writer
            .write_relationships(&[Relationship::member(team.clone(), &ada()).unwrap()])
            .await
            .unwrap();
        let g = ObjectRef::group(&team).unwrap();
        assert!(
            reader.check(&ada(), Permission::Access, &g).await.unwrap(),
            "{i}"
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_client_reconnects_when_the_server_restarts_on_the_same_address() {
    let e = embedded().await;
    let k = key();
    let server = serve(&e, "127.0.0.1:0", &k).await;
    let addr = server.local_addr().to_string();
    let a = SpiceDbAuthorizer::connect(&server.endpoint(), &k)
        .await
        .unwrap();
    a.write_relationships(&[Relationship::member("team", &ada()).unwrap()])
        .await
        .unwrap();
    let team = ObjectRef::group("team").unwrap();
    assert!(a.check(&ada(), Permission::Access, &team).await.unwrap());
    server.shutdown().await;
    // The same engine behind a new front on the same port: the old connection is
    // gone, the next calls connect again.
    let server = serve(&e, &addr, &k).await;
    assert!(a.check(&ada(), Permission::Access, &team).await.unwrap());
    let bob = Subject::person("bob").unwrap();
    a.write_relationships(&[Relationship::member("team", &bob).unwrap()])
        .await
        .unwrap();
    assert!(a.check(&bob, Permission::Access, &team).await.unwrap());
    assert!(server.calls() >= 3, "{}", server.calls());
    // A dropped server stops too (the listener closes), and a call fails after its
    // bounded retries as a retryable connection error.
    drop(server);
    let lost = loop {
        match a.check(&ada(), Permission::Access, &team).await {
            Ok(_) => tokio::task::yield_now().await,
            Err(e) => break e,
        }
    };
    assert!(matches!(lost, Error::Connection { .. }), "{lost:?}");
    assert!(lost.is_retryable());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bad_endpoints_keys_and_timeouts_are_refused_naming_the_field() {
    for endpoint in [
        "https://spicedb.example",
        "spicedb.example:50051",
        "http://spicedb.example",
        "http://spicedb.example:50051/v1",
        "http://user:pw@spicedb.example:50051",
    ] {
        let err = SpiceDbAuthorizer::connect(endpoint, "key")
            .await
            .unwrap_err();
        assert_eq!(config_field(&err), "spicedb.endpoint", "{endpoint}: {err}");
    }
    for key in ["", "two words", "line\nbreak", "ctl\u{7}", "clé"] {
        let err = SpiceDbAuthorizer::connect("http://127.0.0.1:1", key)
            .await
            .unwrap_err();
        assert_eq!(
            config_field(&err),
            "spicedb.preshared_key",
            "{key:?}: {err}"
        );
    }
    let err = RemoteSpiceDb::new("http://127.0.0.1:1", "key")
        .timeout(Duration::ZERO)
        .connect()
        .await
        .unwrap_err();
    assert_eq!(config_field(&err), "spicedb.timeout", "{err}");

    // Nothing listens: a retryable connection error once the retries are spent.
    let free = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = free.local_addr().unwrap();
    drop(free);
    let err = SpiceDbAuthorizer::connect(&format!("http://{addr}"), "key")
        .await
        .unwrap_err();
    assert!(matches!(err, Error::Connection { .. }), "{err:?}");
    assert!(err.is_retryable());

    // Serving: a bad key, and an authorizer that is not embedded.
    let e = embedded().await;
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let err = e.serve(listener, "has space").unwrap_err();
    assert_eq!(config_field(&err), "spicedb.preshared_key", "{err}");
    let k = key();
    let server = serve(&e, "127.0.0.1:0", &k).await;
    let remote = SpiceDbAuthorizer::connect(&server.endpoint(), &k)
        .await
        .unwrap();
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let err = remote.serve(listener, &k).unwrap_err();
    assert!(
        matches!(&err, Error::InvalidInput { field, .. } if field == "authorizer"),
        "{err:?}"
    );
    let shown = format!("{:?}", RemoteSpiceDb::new(server.endpoint(), &k));
    assert!(
        !shown.contains(&k),
        "the key is not in Debug output: {shown}"
    );
}

/// The embedded library loses some writes made concurrently (about one in a hundred
/// of 8 concurrent writes, each answered with a ZedToken, was never stored): the
/// authorizer writes to it one at a time, directly and through `serve`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn concurrent_writes_to_an_embedded_spicedb_are_all_stored() {
    use std::sync::Arc;
    let e = embedded().await;
    let k = key();
    let server = serve(&e, "127.0.0.1:0", &k).await;
    let remote = SpiceDbAuthorizer::connect(&server.endpoint(), &k)
        .await
        .unwrap();
    for (name, a) in [("embedded", e.clone()), ("served", remote)] {
        let a: Arc<dyn Authorizer> = Arc::new(a);
        for round in 0..30 {
            let mut tasks = tokio::task::JoinSet::new();
            for i in 0..16 {
                let a = a.clone();
                tasks.spawn(async move {
                    let who = Subject::person(format!("{name}-{round}-{i}")).unwrap();
                    a.write_relationships(&[Relationship::member(name, &who).unwrap()])
                        .await
                        .unwrap();
                });
            }
            tasks.join_all().await;
        }
        let stored = a
            .read_relationships(&RelationshipFilter::resource(
                ObjectRef::group(name).unwrap(),
            ))
            .await
            .unwrap();
        assert_eq!(stored.len(), 30 * 16, "{name}");
    }
}

/// A TLS front (the test CA's certificate for `localhost` and 127.0.0.1, ALPN `h2`)
/// passing each connection's bytes to `plain`, the way a TLS-terminating proxy sits
/// before SpiceDB. Stops when the returned task is aborted.
async fn tls_front(
    plain: std::net::SocketAddr,
) -> (std::net::SocketAddr, tokio::task::JoinHandle<()>) {
    use rustls::pki_types::pem::PemObject;
    use rustls::pki_types::{CertificateDer, PrivateKeyDer};
    let dir = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/access/fixtures");
    let chain: Vec<CertificateDer<'static>> =
        CertificateDer::pem_file_iter(format!("{dir}/server.pem"))
            .unwrap()
            .map(Result::unwrap)
            .collect();
    let key = PrivateKeyDer::from_pem_file(format!("{dir}/server.key")).unwrap();
    let provider = std::sync::Arc::new(rustls::crypto::ring::default_provider());
    let mut config = rustls::ServerConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .unwrap()
        .with_no_client_auth()
        .with_single_cert(chain, key)
        .unwrap();
    config.alpn_protocols = vec![b"h2".to_vec()];
    let acceptor = tokio_rustls::TlsAcceptor::from(std::sync::Arc::new(config));
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let task = tokio::spawn(async move {
        loop {
            let (tcp, _) = listener.accept().await.unwrap();
            let acceptor = acceptor.clone();
            tokio::spawn(async move {
                let Ok(mut tls) = acceptor.accept(tcp).await else {
                    return;
                };
                let mut upstream = tokio::net::TcpStream::connect(plain).await.unwrap();
                let _ = tokio::io::copy_bidirectional(&mut tls, &mut upstream).await;
            });
        }
    });
    (addr, task)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_https_endpoint_is_reached_over_tls_and_its_certificate_checked() {
    let ca = std::fs::read(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/tests/access/fixtures/ca.pem"
    ))
    .unwrap();
    let e = embedded().await;
    let k = key();
    let server = serve(&e, "127.0.0.1:0", &k).await;
    let (addr, front) = tls_front(server.local_addr()).await;
    let endpoint = format!("https://localhost:{}", addr.port());
    let a = RemoteSpiceDb::new(&endpoint, &k)
        .ca_certificates(ca.clone())
        .connect()
        .await
        .unwrap();
    a.write_relationships(&[Relationship::member("team", &ada()).unwrap()])
        .await
        .unwrap();
    let team = ObjectRef::group("team").unwrap();
    assert!(a.check(&ada(), Permission::Access, &team).await.unwrap());
    assert_eq!(
        a.lookup_resources(&ada(), Permission::Access)
            .await
            .unwrap(),
        ["team".to_string()].into()
    );
    // By IP address too (the certificate names 127.0.0.1).
    let by_ip = RemoteSpiceDb::new(format!("https://{addr}"), &k)
        .ca_certificates(ca.clone())
        .write_schema(false)
        .connect()
        .await
        .unwrap();
    assert!(
        by_ip
            .check(&ada(), Permission::Access, &team)
            .await
            .unwrap()
    );
    let calls = server.calls();

    // Without the CA the certificate is refused: a configuration error naming the
    // endpoint, not retried, and nothing reached SpiceDB.
    let err = SpiceDbAuthorizer::connect(&endpoint, &k).await.unwrap_err();
    assert_eq!(config_field(&err), "spicedb.endpoint", "{err}");
    assert!(err.to_string().contains("TLS"), "{err}");
    assert!(!err.is_retryable());
    assert_eq!(server.calls(), calls);
    // Plaintext to the TLS port is no gRPC reply.
    assert!(
        SpiceDbAuthorizer::connect(&format!("http://{addr}"), &k)
            .await
            .is_err()
    );
    for pem in [&b"not pem"[..], b""] {
        let err = RemoteSpiceDb::new(&endpoint, &k)
            .ca_certificates(pem)
            .connect()
            .await
            .unwrap_err();
        assert_eq!(config_field(&err), "spicedb.ca_certificates", "{err}");
    }
    let err = RemoteSpiceDb::new(server.endpoint(), &k)
        .ca_certificates(ca)
        .connect()
        .await
        .unwrap_err();
    assert_eq!(config_field(&err), "spicedb.ca_certificates", "{err}");
    front.abort();
}
