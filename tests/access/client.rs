//! Enforcement in the client logic, on both clients (the twin with the in-memory
//! authorizer, the native client with the embedded one on a real FalkorDB).

use std::sync::Arc;

use gralkor::Error;
use gralkor::NativeStorage;
use gralkor::access::{
    Authorizer, EmbeddedAuthorizer, InMemoryAuthorizer, ObjectRef, ObjectType, Relationship,
    RelationshipFilter, Subject,
};
use gralkor::client::{
    BuildCommunities, Client, Content, EpisodeRef, ExtractPending, Hit, InMemoryClient, Ingest,
    MemoryAdd, NativeClient, OperatorId, Search, StatusRequest,
};
use gralkor::graph::Engine;
use gralkor::lens::{Ingestion, Lens, LensStore};
use gralkor::runtime::{Runtime, RuntimeConfig};
use uuid::Uuid;

#[derive(Clone, Copy)]
pub enum Kind {
    Twin,
    Native,
    /// The native client with a real SpiceDB (feature `spicedb`).
    #[cfg_attr(not(feature = "spicedb"), allow(dead_code))]
    NativeSpiceDb,
    /// The native client with a real SpiceDB reached over gRPC on loopback, as a
    /// SpiceDB server is (`SpiceDbAuthorizer::connect`, its own-writes consistency).
    #[cfg_attr(not(feature = "spicedb"), allow(dead_code))]
    NativeSpiceDbRemote,
}

/// One test's world: a client with an authorizer, a fresh operator and Destination.
pub struct Rig {
    pub client: Arc<dyn Client>,
    pub authz: Arc<dyn Authorizer>,
    pub team: String,
    pub word: String,
    concrete: Concrete,
    _graph: Option<crate::common::TestGraph>,
    /// What must live as long as the rig (the SpiceDB server a remote arm talks to).
    _keep: Vec<Box<dyn std::any::Any + Send + Sync>>,
}

/// The client itself, for what is not on the `Client` trait.
enum Concrete {
    Twin(InMemoryClient),
    Native(NativeClient),
}

/// The appending Lens of every rig whose process writes one episode to the team and
/// then fails.
pub const HALF_FAILING: &str = "half-failing";

/// Writes its request's content as one episode, then fails.
#[derive(Debug)]
struct WritesOneThenFails;

impl Ingestion for WritesOneThenFails {
    async fn ingest(&self, request: &Ingest, store: &LensStore) -> gralkor::Result<()> {
        store
            .add(request.content.clone(), &request.source_description)
            .await?;
        Err(Error::NotFound("the second half of the ingestion".into()))
    }
}

pub async fn rig(kind: Kind) -> Rig {
    let team = format!("team-{}", Uuid::new_v4().simple());
    let word = format!("w{}", &Uuid::new_v4().simple().to_string()[..10]);
    let half: Lens = Lens::appending(HALF_FAILING, team.clone())
        .ingestion(WritesOneThenFails)
        .into();
    let runtime = Runtime::new(RuntimeConfig::new().destination(team.clone()).lens(half)).unwrap();
    match kind {
        Kind::Twin => {
            let authz: Arc<dyn Authorizer> = Arc::new(InMemoryAuthorizer::new());
            let client = InMemoryClient::with_runtime(runtime)
                .with_authorizer(authz.clone())
                .unwrap();
            Rig {
                client: Arc::new(client.clone()),
                authz,
                team,
                word,
                concrete: Concrete::Twin(client),
                _graph: None,
                _keep: Vec::new(),
            }
        }
        Kind::Native | Kind::NativeSpiceDb | Kind::NativeSpiceDbRemote => {
            let g = crate::common::TestGraph::new("access-client").await;
            // Filled only by the remote SpiceDB arm (feature `spicedb`).
            #[cfg_attr(not(feature = "spicedb"), allow(unused_mut))]
            let mut keep: Vec<Box<dyn std::any::Any + Send + Sync>> = Vec::new();
            let authz: Arc<dyn Authorizer> = match kind {
                #[cfg(feature = "spicedb")]
                Kind::NativeSpiceDb => Arc::new(
                    gralkor::access::SpiceDbAuthorizer::start_embedded()
                        .await
                        .unwrap(),
                ),
                #[cfg(feature = "spicedb")]
                Kind::NativeSpiceDbRemote => {
                    let embedded = gralkor::access::SpiceDbAuthorizer::start_embedded()
                        .await
                        .unwrap();
                    let key = format!("key-{}", Uuid::new_v4().simple());
                    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
                    let server = embedded.serve(listener, &key).unwrap();
                    let remote =
                        gralkor::access::SpiceDbAuthorizer::connect(&server.endpoint(), &key)
                            .await
                            .unwrap();
                    keep.push(Box::new(server));
                    keep.push(Box::new(embedded));
                    Arc::new(remote)
                }
                _ => Arc::new(EmbeddedAuthorizer::in_graph(g.db.clone(), g.name.clone())),
            };
            let engine = Engine::episodes_only(g.db.clone());
            let client = NativeClient::from_parts(runtime, NativeStorage::new(engine))
                .with_authorizer(authz.clone())
                .unwrap();
            Rig {
                client: Arc::new(client.clone()),
                authz,
                team,
                word,
                concrete: Concrete::Native(client),
                _graph: Some(g),
                _keep: keep,
            }
        }
    }
}

fn person(id: &str) -> Subject {
    Subject::person(id).unwrap()
}

fn op(id: &str) -> OperatorId {
    OperatorId::new(id).unwrap()
}

/// A fresh person whose id is also an operator id.
fn fresh(tag: &str) -> (OperatorId, Subject) {
    let id = format!("{tag}-{}", Uuid::new_v4().simple());
    (op(&id), person(&id))
}

impl Rig {
    pub async fn client_purge(
        &self,
        request: &gralkor::client::PurgeOperator,
    ) -> gralkor::Result<gralkor::client::PurgeReport> {
        match &self.concrete {
            Concrete::Twin(c) => c.purge_operator(request).await,
            Concrete::Native(c) => c.purge_operator(request).await,
        }
    }

    pub async fn client_purge_session(
        &self,
        request: &gralkor::client::PurgeSession,
    ) -> gralkor::Result<gralkor::client::SessionPurgeReport> {
        match &self.concrete {
            Concrete::Twin(c) => c.purge_session(request).await,
            Concrete::Native(c) => c.purge_session(request).await,
        }
    }

    pub async fn client_clear(
        &self,
        request: &gralkor::client::ClearDestination,
    ) -> gralkor::Result<gralkor::client::PurgeReport> {
        match &self.concrete {
            Concrete::Twin(c) => c.clear_destination(request).await,
            Concrete::Native(c) => c.clear_destination(request).await,
        }
    }

    /// A capture buffer over the rig's client, with an in-memory store.
    pub async fn buffer(&self) -> gralkor::agent::capture::CaptureBuffer {
        use gralkor::agent::capture::{
            CaptureBuffer, CaptureConfig, CaptureSink, InMemoryCaptureStore,
        };
        let sink: Arc<dyn CaptureSink> = match &self.concrete {
            Concrete::Twin(c) => Arc::new(c.clone()),
            Concrete::Native(c) => Arc::new(c.clone()),
        };
        CaptureBuffer::new(
            sink,
            Arc::new(InMemoryCaptureStore::new()),
            CaptureConfig::new(),
        )
        .await
        .unwrap()
    }

    pub async fn status(&self) -> gralkor::client::Status {
        self.status_of(&gralkor::client::StatusRequest::new()).await
    }

    pub async fn status_of(
        &self,
        request: &gralkor::client::StatusRequest,
    ) -> gralkor::client::Status {
        match &self.concrete {
            Concrete::Twin(c) => c.status_of(request).await,
            Concrete::Native(c) => c.status_of(request).await,
        }
    }

    pub async fn add(
        &self,
        operator: &OperatorId,
        who: &Subject,
        dest: &str,
        text: &str,
    ) -> gralkor::Result<()> {
        self.client
            .memory_add(
                &MemoryAdd::new(operator, Content::document(format!("{text} {}", self.word)))
                    .to_destination(dest)
                    .subject(who.clone()),
            )
            .await?;
        self.client.await_background_writes().await;
        Ok(())
    }

    async fn search(
        &self,
        operator: &OperatorId,
        who: &Subject,
        dests: &[&str],
        n: usize,
    ) -> Vec<String> {
        let mut s = Search::new(operator, self.word.clone())
            .max_results(n)
            .subject(who.clone());
        if !dests.is_empty() {
            s = s.destinations(dests.iter().copied());
        }
        self.client
            .search(&s)
            .await
            .unwrap()
            .into_iter()
            .map(|r| match r.hit {
                Hit::Episode(e) => e.content.split(' ').next().unwrap().to_string(),
                other => panic!("not an episode: {other:?}"),
            })
            .collect()
    }

    async fn uuid_of(
        &self,
        operator: &OperatorId,
        who: &Subject,
        dest: &str,
        first_word: &str,
    ) -> Uuid {
        let s = Search::new(operator, self.word.clone())
            .destinations([dest])
            .max_results(50)
            .subject(who.clone());
        self.client
            .search(&s)
            .await
            .unwrap()
            .into_iter()
            .find_map(|r| match r.hit {
                Hit::Episode(e) if e.content.starts_with(first_word) => Some(e.uuid),
                _ => None,
            })
            .expect("the episode is visible to its writer")
    }

    /// The native client's database (`None` for the twin).
    pub fn db(&self) -> Option<&gralkor::falkordb::FalkorDb> {
        self._graph.as_ref().map(|g| &g.db)
    }

    /// Facts for the rig's word, as `who`: (fact text, source episodes).
    async fn facts(
        &self,
        operator: &OperatorId,
        who: &Subject,
        dests: &[&str],
        n: usize,
    ) -> Vec<(String, Vec<Uuid>)> {
        let s = Search::new(operator, self.word.clone())
            .destinations(dests.iter().copied())
            .facts()
            .max_results(n)
            .subject(who.clone());
        self.client
            .search(&s)
            .await
            .unwrap()
            .into_iter()
            .map(|r| match r.hit {
                Hit::Fact(f) => (f.fact, f.sources.iter().map(|s| s.episode).collect()),
                other => panic!("not a fact: {other:?}"),
            })
            .collect()
    }

    async fn join(&self, who: &Subject) {
        self.authz
            .write_relationships(&[Relationship::member(self.team.clone(), who).unwrap()])
            .await
            .unwrap();
    }
}

every_client!(
    with_an_authorizer_a_request_without_a_subject_is_refused_before_anything_is_stored,
    a_person_owns_their_personal_graph_and_no_one_else_reads_it,
    a_shared_destination_needs_contribute_to_write_and_access_to_read,
    involves_and_shared_by_make_an_episode_visible_outside_its_group,
    hits_are_filtered_before_the_limit,
    a_subject_involved_in_3_of_300_episodes_of_an_unreadable_group_finds_exactly_those,
    no_fact_of_an_episode_the_subject_may_not_view_leaks,
    forgetting_needs_delete_and_removes_the_fragment_relationships,
    captured_turns_are_written_as_the_sessions_subject,
    membership_changes_take_effect_on_the_next_search,
    searching_again_answers_the_same_whatever_the_last_lookup_planned,
    ingest_checks_contribute_and_records_each_written_episode,
    operators_are_isolated_under_concurrency,
    the_agent_tools_and_recall_act_for_the_subject_they_are_given,
    memory_add_refuses_a_non_member_before_it_returns_and_its_writer_may_remove_what_it_added,
    building_communities_needs_contribute_on_the_destination,
    extracting_pending_episodes_needs_contribute_on_each_destination,
    the_build_communities_tool_acts_for_its_contexts_subject,
    what_a_lens_process_wrote_before_it_failed_is_recorded_and_its_writer_may_remove_it,
    the_cli_imports_requests_need_contribute_and_the_importer_may_remove_what_they_wrote,
    concurrent_first_writers_of_a_session_group_leave_exactly_one_member,
);

/// Whether `err` is the door's refusal: `PermissionDenied` for `contribute`.
fn refused_contribute(err: &Error) -> bool {
    matches!(err, Error::PermissionDenied { permission, .. } if permission == "contribute")
}

/// Whether an admin operation's outcome got past the door: `Ok`, or the storage's
/// own answer (the episodes-only native engine has no language model: a configuration
/// error), never a refusal of the subject.
fn passed_the_door<T: std::fmt::Debug>(outcome: &gralkor::Result<T>) -> bool {
    match outcome {
        Ok(_) => true,
        Err(Error::Config { .. }) => true,
        Err(_) => false,
    }
}

/// `memory_add` checks `contribute` itself: the refusal is its own `Err` (not a
/// background failure), nothing is stored, and the writer of what was added may
/// remove it.
async fn memory_add_refuses_a_non_member_before_it_returns_and_its_writer_may_remove_what_it_added(
    kind: Kind,
) {
    let r = rig(kind).await;
    let (ada_op, ada) = fresh("ada");
    let (bob_op, bob) = fresh("bob");
    r.join(&ada).await;
    let add = |op: &OperatorId, who: &Subject, text: &str| {
        MemoryAdd::new(op, Content::document(format!("{text} {}", r.word)))
            .to_destination(r.team.clone())
            .subject(who.clone())
    };
    let err = r
        .client
        .memory_add(&add(&bob_op, &bob, "intruder"))
        .await
        .unwrap_err();
    assert!(refused_contribute(&err), "{err}");
    r.client.await_background_writes().await;
    assert_eq!(
        r.client.status().await.background_failures.count,
        0,
        "refused before the background"
    );
    assert!(
        r.search(&ada_op, &ada, &[&r.team], 10).await.is_empty(),
        "nothing was stored"
    );

    r.client
        .memory_add(&add(&ada_op, &ada, "kept"))
        .await
        .unwrap();
    r.client.await_background_writes().await;
    let uuid = r.uuid_of(&ada_op, &ada, &r.team, "kept").await;
    let remove =
        |who: &Subject| EpisodeRef::new(&ada_op, r.team.clone(), uuid).subject(who.clone());
    let err = r.client.remove_episode(&remove(&bob)).await.unwrap_err();
    assert!(
        matches!(err, Error::PermissionDenied { ref permission, .. } if permission == "delete"),
        "{err}"
    );
    assert!(r.client.remove_episode(&remove(&ada)).await.unwrap());
    assert!(r.search(&ada_op, &ada, &[&r.team], 10).await.is_empty());
}

async fn building_communities_needs_contribute_on_the_destination(kind: Kind) {
    let r = rig(kind).await;
    let (ada_op, ada) = fresh("ada");
    let (_, bob) = fresh("bob");
    r.join(&ada).await;
    r.add(&ada_op, &ada, &r.team, "member").await.unwrap();
    let build = || BuildCommunities::new(&ada_op).destination(r.team.clone());
    let err = r.client.build_communities(&build()).await.unwrap_err();
    assert!(err.to_string().contains("`subject` is required"), "{err}");
    // Bob, no member, names Ada's operator and the team: refused.
    let err = r
        .client
        .build_communities(&build().subject(bob.clone()))
        .await
        .unwrap_err();
    assert!(refused_contribute(&err), "{err}");
    // Nor Ada's personal graph.
    let err = r
        .client
        .build_communities(&BuildCommunities::new(&ada_op).subject(bob.clone()))
        .await
        .unwrap_err();
    assert!(refused_contribute(&err), "{err}");
    // Ada, a member, passes (on the episodes-only engine it needs a model).
    let outcome = r
        .client
        .build_communities(&build().subject(ada.clone()))
        .await;
    assert!(passed_the_door(&outcome), "{outcome:?}");
    let outcome = r
        .client
        .build_communities(&BuildCommunities::new(&ada_op).subject(ada.clone()))
        .await;
    assert!(passed_the_door(&outcome), "{outcome:?}");
}

async fn extracting_pending_episodes_needs_contribute_on_each_destination(kind: Kind) {
    let r = rig(kind).await;
    let (ada_op, ada) = fresh("ada");
    let (_, bob) = fresh("bob");
    r.join(&ada).await;
    r.add(&ada_op, &ada, &r.team, "pending").await.unwrap();
    let pending = || async {
        let ask = StatusRequest::new().operator(&ada_op).subject(ada.clone());
        let status = r.client.status_of(&ask).await;
        status
            .destination(&r.team)
            .unwrap()
            .status
            .as_ref()
            .unwrap()
            .pending
    };
    let before = pending().await;
    let named = || ExtractPending::new(&ada_op).destinations([r.team.as_str()]);
    let err = r.client.extract_pending(&named()).await.unwrap_err();
    assert!(err.to_string().contains("`subject` is required"), "{err}");
    // Bob names the team (and Ada's personal graph): refused, nothing extracted.
    let err = r
        .client
        .extract_pending(&named().subject(bob.clone()))
        .await
        .unwrap_err();
    assert!(refused_contribute(&err), "{err}");
    let err = r
        .client
        .extract_pending(
            &ExtractPending::new(&ada_op)
                .destinations(["personal"])
                .subject(bob.clone()),
        )
        .await
        .unwrap_err();
    assert!(refused_contribute(&err), "{err}");
    // Naming none, he gets the Destinations he may contribute to under Ada's
    // operator: none.
    let reports = r
        .client
        .extract_pending(&ExtractPending::new(&ada_op).subject(bob.clone()))
        .await
        .unwrap();
    assert!(reports.is_empty(), "{reports:?}");
    assert_eq!(pending().await, before, "nothing was extracted");
    // Ada passes, naming the team or none (her personal graph and the team, not
    // `global`); the twin has nothing pending, the episodes-only engine needs a model.
    let outcome = r
        .client
        .extract_pending(&named().subject(ada.clone()))
        .await;
    assert!(passed_the_door(&outcome), "{outcome:?}");
    let outcome = r
        .client
        .extract_pending(&ExtractPending::new(&ada_op).subject(ada.clone()))
        .await;
    assert!(passed_the_door(&outcome), "{outcome:?}");
    if let Ok(reports) = outcome {
        let names: Vec<&str> = reports.iter().map(|r| r.destination.as_str()).collect();
        assert_eq!(names, ["personal", r.team.as_str()]);
    }
}

async fn the_build_communities_tool_acts_for_its_contexts_subject(kind: Kind) {
    use gralkor::agent::tools::{MEMORY_BUILD_COMMUNITIES, ToolContext, call_tool};
    use serde_json::json;

    let r = rig(kind).await;
    let (ada_op, ada) = fresh("ada");
    let (_, bob) = fresh("bob");
    r.join(&ada).await;
    let args = json!({"destination": r.team.clone()});
    let call = |ctx: ToolContext| {
        let (client, args) = (r.client.clone(), args.clone());
        async move { call_tool(client.as_ref(), &ctx, MEMORY_BUILD_COMMUNITIES, &args).await }
    };
    let err = call(ToolContext::new(ada_op.clone())).await.unwrap_err();
    assert!(err.to_string().contains("`subject` is required"), "{err}");
    let err = call(ToolContext::new(ada_op.clone()).subject(bob.clone()))
        .await
        .unwrap_err();
    assert!(refused_contribute(&err), "{err}");
    let outcome = call(ToolContext::new(ada_op.clone()).subject(ada.clone())).await;
    assert!(passed_the_door(&outcome), "{outcome:?}");
    if let Ok(text) = outcome {
        assert!(text.starts_with("Communities built"), "{text}");
    }
}

/// A Lens process that writes one episode and then fails: the refused subject writes
/// nothing; the permitted one gets the process's error, and the episode it wrote is
/// recorded as hers — she may remove it, another may not.
async fn what_a_lens_process_wrote_before_it_failed_is_recorded_and_its_writer_may_remove_it(
    kind: Kind,
) {
    let r = rig(kind).await;
    let (ada_op, ada) = fresh("ada");
    let (bob_op, bob) = fresh("bob");
    r.join(&ada).await;
    let ingest = |op: &OperatorId, who: &Subject| {
        Ingest::new(
            "half-1",
            op,
            HALF_FAILING,
            Content::document(format!("half {}", r.word)),
        )
        .subject(who.clone())
    };
    let err = r.client.ingest(&ingest(&bob_op, &bob)).await.unwrap_err();
    assert!(refused_contribute(&err), "{err}");
    assert!(
        r.search(&ada_op, &ada, &[&r.team], 10).await.is_empty(),
        "nothing was written"
    );

    let err = r.client.ingest(&ingest(&ada_op, &ada)).await.unwrap_err();
    assert!(
        err.to_string().contains("the second half of the ingestion"),
        "the process's own error: {err}"
    );
    let uuid = r.uuid_of(&ada_op, &ada, &r.team, "half").await;
    let shared_by = r
        .authz
        .read_relationships(
            &RelationshipFilter::resource(ObjectRef::fragment(uuid))
                .relation(gralkor::access::Relation::SharedBy),
        )
        .await
        .unwrap();
    assert_eq!(shared_by.len(), 1, "the fragment was recorded");
    assert_eq!(&shared_by[0].subject, ada.object());
    let remove =
        |who: &Subject| EpisodeRef::new(&ada_op, r.team.clone(), uuid).subject(who.clone());
    let err = r.client.remove_episode(&remove(&bob)).await.unwrap_err();
    assert!(
        matches!(err, Error::PermissionDenied { ref permission, .. } if permission == "delete"),
        "{err}"
    );
    assert!(r.client.remove_episode(&remove(&ada)).await.unwrap());
    assert!(r.search(&ada_op, &ada, &[&r.team], 10).await.is_empty());
}

async fn with_an_authorizer_a_request_without_a_subject_is_refused_before_anything_is_stored(
    kind: Kind,
) {
    let r = rig(kind).await;
    let (ada_op, ada) = fresh("ada");
    let err = r
        .client
        .memory_add(&MemoryAdd::new(
            &ada_op,
            Content::document(format!("first {}", r.word)),
        ))
        .await
        .unwrap_err();
    assert!(
        matches!(&err, Error::InvalidInput { field, .. } if field == "subject"),
        "{err}"
    );
    let err = r
        .client
        .search(&Search::new(&ada_op, r.word.clone()))
        .await
        .unwrap_err();
    assert!(err.to_string().contains("`subject` is required"), "{err}");
    let err = r
        .client
        .get_episode(&EpisodeRef::new(&ada_op, "personal", Uuid::new_v4()))
        .await
        .unwrap_err();
    assert!(err.to_string().contains("`subject` is required"), "{err}");
    r.client.await_background_writes().await;
    assert!(
        r.search(&ada_op, &ada, &[], 10).await.is_empty(),
        "nothing was stored"
    );
}

async fn a_person_owns_their_personal_graph_and_no_one_else_reads_it(kind: Kind) {
    let r = rig(kind).await;
    let (ada_op, ada) = fresh("ada");
    let (_, bob) = fresh("bob");
    r.add(&ada_op, &ada, "personal", "mine").await.unwrap();
    assert_eq!(r.search(&ada_op, &ada, &[], 10).await, ["mine"]);
    // Bob names Ada's operator id: her personal graph is not his.
    assert!(r.search(&ada_op, &bob, &[], 10).await.is_empty());
    let uuid = r.uuid_of(&ada_op, &ada, "personal", "mine").await;
    let get = |who: &Subject| EpisodeRef::new(&ada_op, "personal", uuid).subject(who.clone());
    assert!(r.client.get_episode(&get(&ada)).await.unwrap().is_some());
    assert_eq!(r.client.get_episode(&get(&bob)).await.unwrap(), None);
    // Nor may he write there.
    let err = r
        .add(&ada_op, &bob, "personal", "intruder")
        .await
        .unwrap_err();
    assert!(
        matches!(err, Error::PermissionDenied { ref permission, .. } if permission == "contribute"),
        "{err}"
    );
    assert!(!err.is_retryable());
    assert_eq!(r.search(&ada_op, &ada, &[], 10).await, ["mine"]);
}

async fn a_shared_destination_needs_contribute_to_write_and_access_to_read(kind: Kind) {
    let r = rig(kind).await;
    let (ada_op, ada) = fresh("ada");
    let (bob_op, bob) = fresh("bob");
    let (cy_op, cy) = fresh("cy");
    let err = r.add(&ada_op, &ada, &r.team, "early").await.unwrap_err();
    assert!(
        err.to_string()
            .contains(&format!("lacks `contribute` on `group:{}`", r.team)),
        "{err}"
    );
    r.join(&ada).await;
    r.join(&bob).await;
    r.add(&ada_op, &ada, &r.team, "shared").await.unwrap();
    assert_eq!(r.search(&bob_op, &bob, &[&r.team], 10).await, ["shared"]);
    assert!(r.search(&cy_op, &cy, &[&r.team], 10).await.is_empty());
    assert!(r.add(&cy_op, &cy, &r.team, "cy").await.is_err());
    // `global` is a group like any other: no one is a member by default.
    assert!(r.add(&ada_op, &ada, "global", "global").await.is_err());
}

async fn involves_and_shared_by_make_an_episode_visible_outside_its_group(kind: Kind) {
    let r = rig(kind).await;
    let (ada_op, ada) = fresh("ada");
    let (cy_op, cy) = fresh("cy");
    r.join(&ada).await;
    r.client
        .memory_add(
            &MemoryAdd::new(&ada_op, Content::document(format!("about {}", r.word)))
                .to_destination(r.team.clone())
                .subject(ada.clone())
                .involves([cy.clone()]),
        )
        .await
        .unwrap();
    r.add(&ada_op, &ada, &r.team, "other").await.unwrap();
    // Cy is no member, but the first episode involves her.
    assert_eq!(r.search(&cy_op, &cy, &[&r.team], 10).await, ["about"]);
    let uuid = r.uuid_of(&ada_op, &ada, &r.team, "about").await;
    let got = r
        .client
        .get_episode(&EpisodeRef::new(&cy_op, r.team.clone(), uuid).subject(cy.clone()))
        .await
        .unwrap();
    assert!(got.is_some());
    // Ada leaves the group: she still sees what she shared (shared_by), nothing else.
    r.authz
        .delete_relationships(
            &RelationshipFilter::resource(ObjectRef::group(r.team.clone()).unwrap())
                .subject(ada.object().clone()),
        )
        .await
        .unwrap();
    let mut seen = r.search(&ada_op, &ada, &[&r.team], 10).await;
    seen.sort();
    assert_eq!(seen, ["about", "other"]);
}

async fn hits_are_filtered_before_the_limit(kind: Kind) {
    let r = rig(kind).await;
    let (ada_op, ada) = fresh("ada");
    let (cy_op, cy) = fresh("cy");
    r.join(&ada).await;
    for i in 0..12 {
        let mut add = MemoryAdd::new(&ada_op, Content::document(format!("e{i} {}", r.word)))
            .to_destination(r.team.clone())
            .subject(ada.clone());
        if i % 4 == 3 {
            add = add.involves([cy.clone()]);
        }
        r.client.memory_add(&add).await.unwrap();
    }
    r.client.await_background_writes().await;
    assert_eq!(r.search(&ada_op, &ada, &[&r.team], 50).await.len(), 12);
    let mut seen = r.search(&cy_op, &cy, &[&r.team], 3).await;
    seen.sort();
    assert_eq!(
        seen,
        ["e11", "e3", "e7"],
        "three visible hits fill a limit of three"
    );
    assert_eq!(r.search(&cy_op, &cy, &[&r.team], 2).await.len(), 2);
}

async fn forgetting_needs_delete_and_removes_the_fragment_relationships(kind: Kind) {
    let r = rig(kind).await;
    let (ada_op, ada) = fresh("ada");
    let (bob_op, bob) = fresh("bob");
    r.join(&ada).await;
    r.join(&bob).await;
    r.add(&ada_op, &ada, &r.team, "forgettable").await.unwrap();
    let uuid = r.uuid_of(&ada_op, &ada, &r.team, "forgettable").await;
    let err = r
        .client
        .remove_episode(&EpisodeRef::new(&bob_op, r.team.clone(), uuid).subject(bob.clone()))
        .await
        .unwrap_err();
    assert!(
        matches!(err, Error::PermissionDenied { ref permission, .. } if permission == "delete"),
        "{err}"
    );
    assert_eq!(
        r.search(&bob_op, &bob, &[&r.team], 10).await,
        ["forgettable"]
    );
    assert!(
        r.client
            .remove_episode(&EpisodeRef::new(&ada_op, r.team.clone(), uuid).subject(ada.clone()))
            .await
            .unwrap()
    );
    assert!(r.search(&bob_op, &bob, &[&r.team], 10).await.is_empty());
    assert!(
        r.authz
            .read_relationships(&RelationshipFilter::resource(ObjectRef::fragment(uuid)))
            .await
            .unwrap()
            .is_empty()
    );
}

async fn membership_changes_take_effect_on_the_next_search(kind: Kind) {
    let r = rig(kind).await;
    let (ada_op, ada) = fresh("ada");
    let (bob_op, bob) = fresh("bob");
    r.join(&ada).await;
    r.add(&ada_op, &ada, &r.team, "news").await.unwrap();
    assert!(r.search(&bob_op, &bob, &[&r.team], 10).await.is_empty());
    r.join(&bob).await;
    assert_eq!(r.search(&bob_op, &bob, &[&r.team], 10).await, ["news"]);
    r.authz
        .delete_relationships(
            &RelationshipFilter::of_type(ObjectType::Group).subject(bob.object().clone()),
        )
        .await
        .unwrap();
    assert!(r.search(&bob_op, &bob, &[&r.team], 10).await.is_empty());
}

/// The client plans each search from the subject's previous lookup (which graphs to
/// search as they are, which only through the subject's fragments); the answer never
/// depends on the plan.
async fn searching_again_answers_the_same_whatever_the_last_lookup_planned(kind: Kind) {
    let r = rig(kind).await;
    let (ada_op, ada) = fresh("ada");
    let (bob_op, bob) = fresh("bob");
    r.join(&ada).await;
    r.add(&ada_op, &ada, &r.team, "hidden").await.unwrap();
    r.client
        .memory_add(
            &MemoryAdd::new(&ada_op, Content::document(format!("shown {}", r.word)))
                .to_destination(r.team.as_str())
                .subject(ada.clone())
                .involves([bob.clone()]),
        )
        .await
        .unwrap();
    r.client.await_background_writes().await;
    r.add(&bob_op, &bob, "personal", "own").await.unwrap();
    let both = [r.team.as_str(), "personal"];
    let sorted = |mut v: Vec<String>| {
        v.sort();
        v
    };
    // First without a plan, then planned from that lookup (the team unreadable:
    // its visible episodes read with the lookup), then again.
    for round in 0..3 {
        assert_eq!(
            sorted(r.search(&bob_op, &bob, &both, 10).await),
            ["own", "shown"],
            "round {round}"
        );
        assert_eq!(
            r.search(&bob_op, &bob, &[&r.team], 10).await,
            ["shown"],
            "round {round}"
        );
    }
    // Readable now, against the plan: everything in the team.
    r.join(&bob).await;
    assert_eq!(
        sorted(r.search(&bob_op, &bob, &both, 10).await),
        ["hidden", "own", "shown"]
    );
    // And unreadable again, against the plan: back to what involves him.
    r.authz
        .delete_relationships(
            &RelationshipFilter::resource(ObjectRef::group(r.team.clone()).unwrap())
                .subject(bob.object().clone()),
        )
        .await
        .unwrap();
    assert_eq!(
        sorted(r.search(&bob_op, &bob, &both, 10).await),
        ["own", "shown"]
    );
}

async fn ingest_checks_contribute_and_records_each_written_episode(kind: Kind) {
    let r = rig(kind).await;
    let (ada_op, ada) = fresh("ada");
    let (bob_op, bob) = fresh("bob");
    let text = format!("Ada: lens {}", r.word);
    let ingest = |who: &Subject| {
        Ingest::new(
            "turn-1",
            &ada_op,
            "personal-chat",
            Content::conversation(text.clone()),
        )
        .subject(who.clone())
        .involves([bob.clone()])
    };
    let err = r.client.ingest(&ingest(&bob)).await.unwrap_err();
    assert!(matches!(err, Error::PermissionDenied { .. }), "{err}");
    let written = r.client.ingest(&ingest(&ada)).await.unwrap();
    assert_eq!(written.len(), 1);
    let rels = r
        .authz
        .read_relationships(&RelationshipFilter::resource(ObjectRef::fragment(
            written[0].episode,
        )))
        .await
        .unwrap();
    let strings: Vec<String> = rels.iter().map(ToString::to_string).collect();
    let f = format!("memory_fragment:{}", written[0].episode);
    assert_eq!(
        strings,
        [
            format!("{f}#source_group@group:personal/{}", ada_op.as_str()),
            format!("{f}#involves@person:{}", bob.id()),
            format!("{f}#shared_by@person:{}", ada.id()),
        ]
    );
    // Bob is involved: he sees it in Ada's personal graph, nothing else there.
    r.add(&ada_op, &ada, "personal", "private").await.unwrap();
    assert_eq!(r.search(&ada_op, &bob, &["personal"], 10).await, ["Ada:"]);
    let _ = bob_op;
}

async fn operators_are_isolated_under_concurrency(kind: Kind) {
    let r = Arc::new(rig(kind).await);
    let mut tasks = tokio::task::JoinSet::new();
    for i in 0..6 {
        let r = r.clone();
        tasks.spawn(async move {
            let (o, s) = fresh(&format!("op{i}"));
            for n in 0..3 {
                r.add(&o, &s, "personal", &format!("op{i}n{n}"))
                    .await
                    .unwrap();
            }
            (o, s, i)
        });
    }
    let done = tasks.join_all().await;
    for (o, s, i) in &done {
        let mut mine = r.search(o, s, &[], 50).await;
        mine.sort();
        assert_eq!(
            mine,
            [format!("op{i}n0"), format!("op{i}n1"), format!("op{i}n2")]
        );
        for (other, _, _) in &done {
            if other != o {
                assert!(r.search(other, s, &[], 50).await.is_empty());
            }
        }
    }
}

/// The agent layer carries the subject: `memory_add` writes as the tool context's
/// subject, `memory_search`, `recall` and auto-recall ask as theirs; without one a
/// client with an authorizer refuses, and another person sees nothing.
async fn the_agent_tools_and_recall_act_for_the_subject_they_are_given(kind: Kind) {
    use gralkor::agent::hooks::{AgentRecall, AutoRecall};
    use gralkor::agent::recall::{RecallOptions, recall};
    use gralkor::agent::tools::{INGESTING, MEMORY_ADD, MEMORY_SEARCH, ToolContext, call_tool};
    use serde_json::json;

    let r = rig(kind).await;
    let (ada_op, ada) = fresh("ada");
    let (_, bob) = fresh("bob");
    let as_ada = ToolContext::new(ada_op.clone()).subject(ada.clone());
    let text = format!("Ada keeps bees {}", r.word);
    let ack = call_tool(
        r.client.as_ref(),
        &as_ada,
        MEMORY_ADD,
        &json!({"content": text}),
    )
    .await
    .unwrap();
    assert_eq!(ack, INGESTING);
    r.client.await_background_writes().await;

    let query = json!({"query": r.word.clone()});
    let found = call_tool(r.client.as_ref(), &as_ada, MEMORY_SEARCH, &query)
        .await
        .unwrap();
    assert!(found.contains("Ada keeps bees"), "{found}");
    // Without a subject: refused, naming the field.
    let err = call_tool(
        r.client.as_ref(),
        &ToolContext::new(ada_op.clone()),
        MEMORY_SEARCH,
        &query,
    )
    .await
    .unwrap_err();
    assert!(err.to_string().contains("`subject` is required"), "{err}");
    // Bob naming Ada's operator sees nothing of hers.
    let as_bob = ToolContext::new(ada_op.clone()).subject(bob.clone());
    let none = call_tool(r.client.as_ref(), &as_bob, MEMORY_SEARCH, &query)
        .await
        .unwrap();
    assert!(!none.contains("Ada keeps bees"), "{none}");

    let options = RecallOptions::new().subject(ada.clone());
    let recalled = recall(r.client.as_ref(), &ada_op, "Susu", None, &r.word, &options)
        .await
        .unwrap();
    assert!(
        recalled.block.contains("Ada keeps bees"),
        "{}",
        recalled.block
    );
    let err = recall(
        r.client.as_ref(),
        &ada_op,
        "Susu",
        None,
        &r.word,
        &RecallOptions::new(),
    )
    .await
    .unwrap_err();
    assert!(err.to_string().contains("`subject` is required"), "{err}");
    let bobs = recall(
        r.client.as_ref(),
        &ada_op,
        "Susu",
        None,
        &r.word,
        &RecallOptions::new().subject(bob.clone()),
    )
    .await
    .unwrap();
    assert!(!bobs.block.contains("Ada keeps bees"), "{}", bobs.block);

    let auto = AgentRecall::new(r.client.clone(), ada_op.clone(), "Susu", AutoRecall::new())
        .unwrap()
        .subject(ada.clone());
    let block = auto
        .before_turn(Some("s-1"), &format!("what about {}", r.word))
        .await
        .unwrap()
        .expect("a block");
    assert!(block.contains("Ada keeps bees"), "{block}");
}

async fn captured_turns_are_written_as_the_sessions_subject(kind: Kind) {
    use gralkor::agent::capture::Capture;
    use gralkor::agent::turn::Turn;
    let r = rig(kind).await;
    let (ada_op, ada) = fresh("ada");
    let (bob_op, bob) = fresh("bob");
    r.authz
        .write_relationships(&[Relationship::member(r.team.clone(), &ada).unwrap()])
        .await
        .unwrap();
    let buffer = r.buffer().await;
    let capture = |session: &str| {
        let turn = Turn::completed(
            &format!("The launch word is {}.", r.word),
            Vec::<String>::new(),
            "Noted.",
        );
        Capture::new(session, &ada_op, "Susu", "Ada", turn).direct(r.team.clone())
    };
    let err = buffer.append(capture("s")).await.unwrap_err();
    assert!(err.to_string().contains("`subject`"), "{err}");
    let err = buffer
        .append(capture("s").subject(bob.clone()))
        .await
        .unwrap_err();
    assert!(
        matches!(err, Error::PermissionDenied { ref permission, .. } if permission == "contribute"),
        "refused when appended: {err}"
    );
    assert!(buffer.pending("s").await.is_empty(), "nothing buffered");

    buffer
        .append(capture("s").subject(ada.clone()))
        .await
        .unwrap();
    let err = buffer
        .append(capture("s").subject(bob.clone()))
        .await
        .unwrap_err();
    assert!(
        err.to_string().contains("`subject`"),
        "a session keeps its subject: {err}"
    );
    buffer
        .flush_and_await("s", std::time::Duration::from_secs(30))
        .await
        .unwrap();
    let search = |op: &OperatorId, who: &Subject| {
        Search::new(op, r.word.clone())
            .destinations([r.team.clone()])
            .subject(who.clone())
    };
    let found = r.client.search(&search(&ada_op, &ada)).await.unwrap();
    assert_eq!(found.len(), 1);
    let episode = found[0].hit.as_episode().unwrap().uuid;
    assert!(
        r.client
            .search(&search(&bob_op, &bob))
            .await
            .unwrap()
            .is_empty(),
        "a non-member does not read the captured turn"
    );
    let shared_by = r
        .authz
        .read_relationships(
            &RelationshipFilter::resource(ObjectRef::fragment(episode))
                .relation(gralkor::access::Relation::SharedBy),
        )
        .await
        .unwrap();
    assert_eq!(shared_by.len(), 1);
    assert_eq!(&shared_by[0].subject, ada.object());
    // The writer of the captured turn may forget the session, even outside her
    // personal graph.
    let report = buffer
        .purge_session(&gralkor::client::PurgeSession::new(&ada_op, "s").subject(ada.clone()))
        .await
        .unwrap();
    assert_eq!(report.episodes.len(), 1, "{report:?}");
    assert!(
        r.client
            .search(&search(&ada_op, &ada))
            .await
            .unwrap()
            .is_empty()
    );
}

/// 300 episodes in a group Cy may not read, three of which involve her — written
/// last, with the word once among others repeated (so they also rank last by
/// fulltext score): beyond the first 200 hits, the widest window a search can ask
/// for. The pre-filter finds exactly those three, at any limit.
async fn a_subject_involved_in_3_of_300_episodes_of_an_unreadable_group_finds_exactly_those(
    kind: Kind,
) {
    let r = rig(kind).await;
    let (ada_op, ada) = fresh("ada");
    let (cy_op, cy) = fresh("cy");
    r.join(&ada).await;
    let mut involved = Vec::new();
    for i in 0..300 {
        let mine = i >= 297;
        let text = if mine {
            format!("v{i} {} pad pad pad pad", r.word)
        } else {
            format!("e{i} {} {}", r.word, r.word)
        };
        let mut add = MemoryAdd::new(&ada_op, Content::document(text))
            .to_destination(r.team.clone())
            .subject(ada.clone());
        if mine {
            add = add.involves([cy.clone()]);
            involved.push(format!("v{i}"));
        }
        r.client.memory_add(&add).await.unwrap();
        if i % 50 == 49 {
            r.client.await_background_writes().await;
        }
    }
    r.client.await_background_writes().await;
    // Ada, a member, reads the group: its first 200 hits hold none of the three.
    let first = r.search(&ada_op, &ada, &[&r.team], 200).await;
    assert_eq!(first.len(), 200);
    assert!(
        first.iter().all(|w| w.starts_with('e')),
        "the three rank below the first 200: {:?}",
        first
            .iter()
            .filter(|w| w.starts_with('v'))
            .collect::<Vec<_>>()
    );
    // Cy sees exactly the three, with a limit above them and the largest one.
    for n in [10, 200] {
        let mut seen = r.search(&cy_op, &cy, &[&r.team], n).await;
        seen.sort();
        assert_eq!(seen, involved, "max_results {n}");
    }
    // Below them: the limit, all of them among the three.
    let seen = r.search(&cy_op, &cy, &[&r.team], 2).await;
    assert_eq!(seen.len(), 2);
    assert!(seen.iter().all(|w| involved.contains(w)), "{seen:?}");
    // Searching every Destination changes nothing for her.
    let mut seen = r.search(&cy_op, &cy, &[], 50).await;
    seen.sort();
    assert_eq!(seen, involved);
    // Someone neither a member nor involved sees nothing.
    let (dan_op, dan) = fresh("dan");
    assert!(r.search(&dan_op, &dan, &[&r.team], 200).await.is_empty());
}

/// Facts of a group Cy may not read come only from the episodes that involve her,
/// and list only those as sources. On the native client the group also holds
/// extracted facts (written to its graph directly): one supported by a visible and a
/// hidden episode lists only the visible one; one supported only by hidden episodes
/// never shows.
async fn no_fact_of_an_episode_the_subject_may_not_view_leaks(kind: Kind) {
    let r = rig(kind).await;
    let (ada_op, ada) = fresh("ada");
    let (cy_op, cy) = fresh("cy");
    r.join(&ada).await;
    for i in 0..40 {
        let mut add = MemoryAdd::new(&ada_op, Content::document(format!("e{i} {}", r.word)))
            .to_destination(r.team.clone())
            .subject(ada.clone());
        if i % 10 == 3 {
            add = add.involves([cy.clone()]);
        }
        r.client.memory_add(&add).await.unwrap();
    }
    r.client.await_background_writes().await;
    let uuid = |first: String| {
        let r = &r;
        let (ada_op, ada) = (&ada_op, &ada);
        async move { r.uuid_of(ada_op, ada, &r.team, &format!("{first} ")).await }
    };
    let mut visible = std::collections::BTreeSet::new();
    for i in [3, 13, 23, 33] {
        visible.insert(uuid(format!("e{i}")).await);
    }
    let (hidden_a, hidden_b) = (uuid("e5".into()).await, uuid("e6".into()).await);
    let shown_via = *visible.iter().next().unwrap();
    let extracted = match r.db() {
        None => 0,
        Some(db) => {
            use gralkor::graph::{self, EntityEdge, EntityNode};
            let (a, b) = (EntityNode::new("Ada"), EntityNode::new("Tea"));
            graph::save_entities(db, &r.team, &[a.clone(), b.clone()])
                .await
                .unwrap();
            let mut mixed = EntityEdge::new(a.uuid, b.uuid, "LIKES", format!("mixed {}", r.word));
            mixed.episodes = vec![hidden_a, shown_via];
            let mut hidden = EntityEdge::new(a.uuid, b.uuid, "LIKES", format!("hidden {}", r.word));
            hidden.episodes = vec![hidden_a, hidden_b];
            graph::save_facts(db, &r.team, &[mixed, hidden])
                .await
                .unwrap();
            1
        }
    };
    // Ada, a member, sees every fact with every source.
    let all = r.facts(&ada_op, &ada, &[&r.team], 200).await;
    assert_eq!(all.len(), 40 + 2 * extracted);
    // Cy: the four visible episodes' facts, plus the mixed one on native.
    let got = r.facts(&cy_op, &cy, &[&r.team], 200).await;
    assert_eq!(got.len(), 4 + extracted, "{got:?}");
    for (fact, sources) in &got {
        assert!(!sources.is_empty(), "{fact}");
        assert!(
            sources.iter().all(|s| visible.contains(s)),
            "{fact} lists a source Cy may not view: {sources:?}"
        );
        assert!(!fact.starts_with("hidden"), "{fact}");
    }
    if extracted == 1 {
        let (_, sources) = got.iter().find(|(f, _)| f.starts_with("mixed")).unwrap();
        assert_eq!(sources, &[shown_via]);
    }
    // The limit follows the filter.
    assert_eq!(r.facts(&cy_op, &cy, &[&r.team], 3).await.len(), 3);
}

/// The CLI's `import` (`cli/src/import.rs`, a package of its own that this crate's
/// tests cannot call) checks every file, looks each item's episode up as the subject,
/// then sends each as an `Ingest` through the chosen Lens (`personal-chat` by default):
/// id `import:<source>` hashed with the content, description `import <source>`, a
/// session for a transcript, a reference time when the file has one. These are those
/// requests, through the library entry it calls, on every authorizer: a person
/// importing into another's `personal` graph is refused `contribute` at the first
/// item and nothing of the import is stored; the owner's import is written, a second
/// run stores nothing twice (the CLI's `unchanged`), another may not remove what she
/// imported and she may.
async fn the_cli_imports_requests_need_contribute_and_the_importer_may_remove_what_they_wrote(
    kind: Kind,
) {
    let r = rig(kind).await;
    let (ada_op, ada) = fresh("ada");
    let (_, bob) = fresh("bob");
    let word = r.word.clone();
    let at = gralkor::storage::Timestamp::parse_rfc3339("2026-01-02T03:04:05Z").unwrap();
    let import = |who: &Subject| {
        let memo = Ingest::new(
            format!("import:MEMORY.md:{word}"),
            &ada_op,
            "personal-chat",
            Content::document(format!("memo {word} we release on Fridays")),
        )
        .source_description("import MEMORY.md")
        .subject(who.clone());
        let session = Ingest::new(
            format!("import:sessions/s-1.jsonl:{word}"),
            &ada_op,
            "personal-chat",
            Content::conversation(format!("transcript {word} Ada: the canary was clean")),
        )
        .source_description("import sessions/s-1.jsonl")
        .session("s-1")
        .reference_time(at)
        .subject(who.clone());
        [memo, session]
    };
    let lookup =
        |who: &Subject, uuid: Uuid| EpisodeRef::new(&ada_op, "personal", uuid).subject(who.clone());

    // Bob imports into Ada's `personal`: refused at the first item, nothing stored.
    let [first, _] = import(&bob);
    let err = r.client.ingest(&first).await.unwrap_err();
    assert!(refused_contribute(&err), "{err}");
    assert!(r.search(&ada_op, &ada, &["personal"], 10).await.is_empty());

    // Ada's import: each item written once; a second run writes nothing new.
    let mut written = Vec::new();
    for request in import(&ada) {
        let episodes = r.client.ingest(&request).await.unwrap();
        assert_eq!(episodes.len(), 1, "{}", request.id);
        written.push(episodes[0].episode);
    }
    for (request, uuid) in import(&ada).iter().zip(&written) {
        let again = r.client.ingest(request).await.unwrap();
        assert_eq!(again.len(), 1);
        assert_eq!(again[0].episode, *uuid, "the same episode: nothing twice");
    }
    let mut found = r.search(&ada_op, &ada, &["personal"], 10).await;
    found.sort();
    assert_eq!(found, ["memo", "transcript"]);
    for uuid in &written {
        assert!(
            r.client
                .get_episode(&lookup(&ada, *uuid))
                .await
                .unwrap()
                .is_some()
        );
        assert_eq!(
            r.client.get_episode(&lookup(&bob, *uuid)).await.unwrap(),
            None
        );
    }

    // Bob may not remove what Ada imported; she may.
    for uuid in written {
        let err = r
            .client
            .remove_episode(&lookup(&bob, uuid))
            .await
            .unwrap_err();
        assert!(
            matches!(err, Error::PermissionDenied { ref permission, .. } if permission == "delete"),
            "{err}"
        );
        assert!(r.client.remove_episode(&lookup(&ada, uuid)).await.unwrap());
    }
    assert!(r.search(&ada_op, &ada, &["personal"], 10).await.is_empty());
}

/// Eight agents write to one new session group at the same time: the claim is one
/// conditional write, so exactly one becomes its member and writes; every other one is
/// refused `contribute` and stores nothing.
async fn concurrent_first_writers_of_a_session_group_leave_exactly_one_member(kind: Kind) {
    let r = Arc::new(rig(kind).await);
    let group = format!("session-race-{}", r.word);
    let (o, _) = fresh("racer");
    let start = Arc::new(tokio::sync::Barrier::new(8));
    let mut tasks = tokio::task::JoinSet::new();
    for i in 0..8 {
        let (r, group, o, start) = (r.clone(), group.clone(), o.clone(), start.clone());
        tasks.spawn(async move {
            let me = Subject::agent(format!("racer-{i}")).unwrap();
            start.wait().await;
            let outcome = r.add(&o, &me, &group, &format!("racer{i}")).await;
            (me, outcome)
        });
    }
    let outcomes = tasks.join_all().await;
    let winners: Vec<&Subject> = outcomes
        .iter()
        .filter(|(_, o)| o.is_ok())
        .map(|(me, _)| me)
        .collect();
    assert_eq!(winners.len(), 1, "{outcomes:?}");
    for (_, outcome) in &outcomes {
        if let Err(e) = outcome {
            assert!(refused_contribute(e), "{e}");
        }
    }
    let members = r
        .authz
        .read_relationships(
            &RelationshipFilter::resource(ObjectRef::group(group.clone()).unwrap())
                .relation(gralkor::access::Relation::Member),
        )
        .await
        .unwrap();
    assert_eq!(
        members,
        [Relationship::member(group.clone(), winners[0]).unwrap()]
    );
    // The winner's one episode is all the group holds.
    let found = r.search(&o, winners[0], &[group.as_str()], 50).await;
    assert_eq!(found.len(), 1, "{found:?}");
}
