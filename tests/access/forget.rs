//! Purging an operator leaves nothing of theirs behind; the health report.

use gralkor::Error;
use gralkor::access::{ObjectRef, ObjectType, Relationship, RelationshipFilter, Subject};
use gralkor::agent::capture::Capture;
use gralkor::agent::turn::Turn;
use gralkor::client::{
    ClearDestination, Content, EpisodeRef, MemoryAdd, OperatorId, PurgeOperator, PurgeSession,
    Search, StatusRequest,
};
use uuid::Uuid;

use crate::client::{Kind, rig};

fn fresh(tag: &str) -> (OperatorId, Subject) {
    let id = format!("{tag}-{}", Uuid::new_v4().simple());
    (
        OperatorId::new(id.clone()).unwrap(),
        Subject::person(id).unwrap(),
    )
}

every_client!(
    purging_an_operator_leaves_no_episode_result_or_relationship_of_theirs,
    only_the_operator_themself_may_purge,
    a_purge_can_run_again,
    status_reports_the_storage_and_the_authorizer,
    status_reports_each_destination_the_subject_may_read,
    status_reports_what_the_capture_buffer_holds,
    status_names_an_index_that_is_missing,
    purging_a_session_removes_its_episodes_in_every_destination_and_nothing_else,
    a_session_purge_needs_delete_outside_the_own_personal_graph,
    a_session_purge_checks_the_session_id_and_can_run_again,
    clearing_a_destination_empties_its_graph_but_keeps_its_members,
    clearing_a_shared_destination_needs_delete_on_everything_in_it,
    only_the_owner_clears_a_personal_destination,
);

async fn purging_an_operator_leaves_no_episode_result_or_relationship_of_theirs(kind: Kind) {
    let r = rig(kind).await;
    let (ada_op, ada) = fresh("ada");
    let (bob_op, bob) = fresh("bob");
    r.authz
        .write_relationships(&[
            gralkor::access::Relationship::member(r.team.clone(), &ada).unwrap(),
            gralkor::access::Relationship::member(r.team.clone(), &bob).unwrap(),
        ])
        .await
        .unwrap();
    let add = |dest: &str, text: &str, involves: Vec<Subject>| {
        MemoryAdd::new(&ada_op, Content::document(format!("{text} {}", r.word)))
            .to_destination(dest)
            .subject(ada.clone())
            .involves(involves)
    };
    r.client
        .memory_add(&add("personal", "private", vec![bob.clone()]))
        .await
        .unwrap();
    r.client
        .memory_add(&add(&r.team, "team", vec![]))
        .await
        .unwrap();
    r.client.await_background_writes().await;
    let search = |who: &Subject, op: &OperatorId| {
        Search::new(op, r.word.clone())
            .max_results(50)
            .subject(who.clone())
    };
    assert_eq!(
        r.client
            .search(&search(&bob, &ada_op).destinations(["personal"]))
            .await
            .unwrap()
            .len(),
        1,
        "bob is involved"
    );
    let private = r.client.search(&search(&ada, &ada_op)).await.unwrap();
    assert_eq!(private.len(), 2);

    let report = r
        .client_purge(&PurgeOperator::new(&ada_op).subject(ada.clone()))
        .await
        .unwrap();
    assert!(report.graph_removed);
    // personal: group, writer, involved (3) + team fragment's writer tuple (1) + the
    // two memberships (2) = 6 at least (the personal fragment's tuples included).
    assert!(report.relationships_removed >= 6, "{report:?}");

    // No relationship names Ada or her personal graph any more.
    for kind in [
        ObjectType::Group,
        ObjectType::MemoryFragment,
        ObjectType::Agent,
    ] {
        let left = r
            .authz
            .read_relationships(&RelationshipFilter::of_type(kind).subject(ada.object().clone()))
            .await
            .unwrap();
        assert!(left.is_empty(), "{left:?}");
    }
    let personal = ObjectRef::group(format!("personal/{}", ada_op.as_str())).unwrap();
    assert!(
        r.authz
            .read_relationships(
                &RelationshipFilter::of_type(ObjectType::MemoryFragment).subject(personal)
            )
            .await
            .unwrap()
            .is_empty()
    );
    // Nothing of her personal graph comes back, for anyone, as any result type.
    for who in [&ada, &bob] {
        for s in [
            search(who, &ada_op),
            search(who, &ada_op).facts(),
            search(who, &ada_op).nodes(Vec::<String>::new()),
            search(who, &ada_op).artefacts(None),
        ] {
            let found = r
                .client
                .search(&s.destinations(["personal"]))
                .await
                .unwrap();
            assert!(found.is_empty(), "{found:?}");
        }
    }
    let got = r
        .client
        .get_episode(
            &EpisodeRef::new(
                &ada_op,
                "personal",
                private[0].hit.as_episode().unwrap().uuid,
            )
            .subject(ada.clone()),
        )
        .await
        .unwrap();
    assert_eq!(got, None);
    // The team episode she shared stays the team's, visible to its members.
    assert_eq!(
        r.client
            .search(&search(&bob, &bob_op).destinations([r.team.clone()]))
            .await
            .unwrap()
            .len(),
        1
    );
}

async fn only_the_operator_themself_may_purge(kind: Kind) {
    let r = rig(kind).await;
    let (ada_op, ada) = fresh("ada");
    let (_, bob) = fresh("bob");
    r.client
        .memory_add(
            &MemoryAdd::new(&ada_op, Content::document(format!("mine {}", r.word)))
                .subject(ada.clone()),
        )
        .await
        .unwrap();
    r.client.await_background_writes().await;
    let err = r
        .client_purge(&PurgeOperator::new(&ada_op).subject(bob))
        .await
        .unwrap_err();
    assert!(
        matches!(err, Error::PermissionDenied { ref permission, .. } if permission == "purge"),
        "{err}"
    );
    let err = r
        .client_purge(&PurgeOperator::new(&ada_op))
        .await
        .unwrap_err();
    assert!(err.to_string().contains("`subject` is required"), "{err}");
    let s = Search::new(&ada_op, r.word.clone()).subject(ada);
    assert_eq!(
        r.client.search(&s).await.unwrap().len(),
        1,
        "nothing was removed"
    );
}

async fn a_purge_can_run_again(kind: Kind) {
    let r = rig(kind).await;
    let (ada_op, ada) = fresh("ada");
    r.client
        .memory_add(
            &MemoryAdd::new(&ada_op, Content::document(format!("mine {}", r.word)))
                .subject(ada.clone()),
        )
        .await
        .unwrap();
    r.client.await_background_writes().await;
    let p = PurgeOperator::new(&ada_op).subject(ada.clone());
    assert!(r.client_purge(&p).await.unwrap().graph_removed);
    let again = r.client_purge(&p).await.unwrap();
    assert!(!again.graph_removed);
    assert_eq!(again.relationships_removed, 0);
}

async fn status_reports_the_storage_and_the_authorizer(kind: Kind) {
    let r = rig(kind).await;
    let status = r.status().await;
    assert!(status.healthy(), "{status:?}");
    let storage = status.storage.clone().unwrap();
    match kind {
        Kind::Twin => {
            assert_eq!(storage.backend, "in-memory");
            assert_eq!(storage.server, None);
            assert_eq!(status.authorizer.as_deref(), Some("in-memory"));
        }
        Kind::Native | Kind::NativeSpiceDb | Kind::NativeSpiceDbRemote => {
            assert_eq!(storage.backend, "FalkorDB (embedded)");
            let server = storage.server.clone().expect("the server's report");
            assert!(server.falkordb_version.is_some(), "{server:?}");
            assert!(server.used_memory_bytes.unwrap_or(0) > 0, "{server:?}");
            // The rig's engine stores episodes only: no model is called.
            assert!(storage.models.is_empty(), "{storage:?}");
            let expected = if matches!(kind, Kind::Native) {
                "embedded"
            } else {
                "spicedb"
            };
            assert_eq!(status.authorizer.as_deref(), Some(expected));
        }
    }
    assert_eq!(status.authorizer_health, Some(Ok(())));
    assert!(status.destination(&r.team).is_some(), "{status:?}");
    assert!(status.lenses.contains(&"personal-chat".to_string()));
    // No capture buffer registered: nothing says what it holds.
    assert_eq!(status.held, None);
}

async fn status_reports_each_destination_the_subject_may_read(kind: Kind) {
    let r = rig(kind).await;
    let (ada_op, ada) = fresh("ada");
    let (_bob_op, bob) = fresh("bob");
    r.authz
        .write_relationships(&[Relationship::member(r.team.clone(), &ada).unwrap()])
        .await
        .unwrap();
    for (dest, text) in [
        (r.team.as_str(), "one"),
        (r.team.as_str(), "two"),
        ("personal", "mine"),
    ] {
        r.client
            .memory_add(
                &MemoryAdd::new(&ada_op, Content::document(format!("{text} {}", r.word)))
                    .to_destination(dest)
                    .subject(ada.clone()),
            )
            .await
            .unwrap();
    }
    r.client.await_background_writes().await;

    let ask = |who: Option<&Subject>| {
        let mut req = StatusRequest::new().operator(&ada_op);
        if let Some(s) = who {
            req = req.subject(s.clone());
        }
        req
    };
    let status = r.status_of(&ask(Some(&ada))).await;
    assert!(status.healthy(), "{status:?}");
    let team = status.destination(&r.team).unwrap();
    assert_eq!(team.graph.as_deref(), Some(r.team.as_str()));
    let t = team.status.clone().unwrap();
    assert!(t.exists);
    assert_eq!(t.episodes, 2);
    // The native rig's engine stores episodes only, so they stay pending; the twin
    // never extracts and has nothing pending.
    let pending = if matches!(kind, Kind::Twin) { 0 } else { 2 };
    assert_eq!(t.pending, pending);
    assert!(t.indices_operational(), "{t:?}");
    let personal = status.destination("personal").unwrap();
    assert_eq!(
        personal.graph.as_deref(),
        Some(format!("personal/{ada_op}").as_str())
    );
    assert_eq!(personal.status.as_ref().unwrap().episodes, 1);
    // Ada is no member of `global`: its graph is not reported to her.
    let global = status.destination("global").unwrap();
    assert!(
        global
            .status
            .clone()
            .unwrap_err()
            .contains("may not access")
    );

    // Bob may read neither Ada's team nor her personal graph: not reported to him.
    let status = r.status_of(&ask(Some(&bob))).await;
    for name in [r.team.as_str(), "personal"] {
        let err = status
            .destination(name)
            .unwrap()
            .status
            .clone()
            .unwrap_err();
        assert!(err.contains("may not access"), "{name}: {err}");
    }
    // Without a subject no graph is reported, but the rest of the report is.
    let status = r.status_of(&ask(None)).await;
    assert!(status.storage.is_ok());
    for d in &status.destinations {
        let err = d.status.clone().unwrap_err();
        assert!(err.contains("names no subject"), "{}: {err}", d.name);
    }
    // Without an operator, `personal` has no graph to report.
    let status = r
        .status_of(&StatusRequest::new().subject(ada.clone()))
        .await;
    let personal = status.destination("personal").unwrap();
    assert_eq!(personal.graph, None);
    assert!(personal.status.clone().unwrap_err().contains("no operator"));
    assert_eq!(
        status
            .destination(&r.team)
            .unwrap()
            .status
            .as_ref()
            .unwrap()
            .episodes,
        2
    );
}

async fn status_reports_what_the_capture_buffer_holds(kind: Kind) {
    let r = rig(kind).await;
    let (ada_op, ada) = fresh("ada");
    let buffer = r.buffer().await;
    let turn = || Turn::completed(&format!("hello {}", r.word), Vec::<String>::new(), "hi");
    for session in ["s-1", "s-1", "s-2"] {
        buffer
            .append(Capture::new(session, &ada_op, "Susu", "Ada", turn()).subject(ada.clone()))
            .await
            .unwrap();
    }
    let held = r.status().await.held.expect("the buffer registered itself");
    assert_eq!((held.sessions, held.items), (2, 3), "{held:?}");
    buffer.flush("s-1").await.unwrap();
    buffer.await_flushes().await;
    let held = r.status().await.held.unwrap();
    assert_eq!(
        (held.sessions, held.items, held.in_flight),
        (1, 1, 0),
        "{held:?}"
    );
}

async fn status_names_an_index_that_is_missing(kind: Kind) {
    let r = rig(kind).await;
    let (ada_op, ada) = fresh("ada");
    r.authz
        .write_relationships(&[Relationship::member(r.team.clone(), &ada).unwrap()])
        .await
        .unwrap();
    r.add(&ada_op, &ada, &r.team, "one").await.unwrap();
    let ask = StatusRequest::new().operator(&ada_op).subject(ada.clone());
    let Some(db) = r.db() else {
        // The twin keeps no indices: nothing can be missing.
        let status = r.status_of(&ask).await;
        assert!(status.healthy(), "{status:?}");
        return;
    };
    db.drop_index(
        &r.team,
        &gralkor::falkordb::IndexSpec::fulltext_nodes(
            "Episodic",
            ["content"],
            gralkor::falkordb::DEFAULT_STOPWORDS,
        ),
    )
    .await
    .unwrap();
    let status = r.status_of(&ask).await;
    assert!(!status.healthy(), "{status:?}");
    let team = status.destination(&r.team).unwrap().status.clone().unwrap();
    assert_eq!(
        team.indices_missing,
        ["fulltext Episodic.content"],
        "{team:?}"
    );
}

/// Whether any file of the shared server's AOF directory, or its RDB snapshot, holds
/// `needle`. Other tests share the server, and a rewrite they trigger can replace a
/// file between the directory listing and its read: the scan then starts again on
/// the new listing (a vanished file's content lives on in its replacement).
fn aof_holds(needle: &str) -> bool {
    let data = crate::common::server().data_dir().to_path_buf();
    let holds = |path: std::path::PathBuf| -> std::io::Result<bool> {
        let bytes = std::fs::read(path)?;
        Ok(bytes.windows(needle.len()).any(|w| w == needle.as_bytes()))
    };
    let scan = || -> std::io::Result<bool> {
        for entry in std::fs::read_dir(data.join("appendonlydir"))? {
            if holds(entry?.path())? {
                return Ok(true);
            }
        }
        let rdb = data.join("dump.rdb");
        Ok(rdb.exists() && holds(rdb)?)
    };
    for _ in 0..50 {
        match scan() {
            Ok(found) => return found,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => continue,
            Err(e) => panic!("reading the AOF directory: {e}"),
        }
    }
    panic!("the AOF directory kept changing under 50 scans")
}

#[tokio::test]
async fn a_purge_rewrites_the_aof_so_the_purged_content_is_not_left_in_the_log() {
    let r = rig(Kind::Native).await;
    let (ada_op, ada) = fresh("ada");
    let secret = format!("secret{}", Uuid::new_v4().simple());
    r.client
        .memory_add(
            &MemoryAdd::new(&ada_op, Content::document(format!("{secret} {}", r.word)))
                .subject(ada.clone()),
        )
        .await
        .unwrap();
    r.client.await_background_writes().await;
    assert!(
        aof_holds(&secret),
        "the write is in the AOF before the purge"
    );
    r.client_purge(&PurgeOperator::new(&ada_op).subject(ada))
        .await
        .unwrap();
    assert!(!aof_holds(&secret), "the purged text is gone from the AOF");
}

/// Ada's text `text <word>` to `dest`, in `session` when given, as `who`.
fn add_as(
    op: &OperatorId,
    who: &Subject,
    dest: &str,
    text: &str,
    word: &str,
    session: Option<&str>,
) -> MemoryAdd {
    let add = MemoryAdd::new(op, Content::document(format!("{text} {word}")))
        .to_destination(dest)
        .subject(who.clone());
    match session {
        Some(s) => add.session(s),
        None => add,
    }
}

/// The texts a search of `dests` by `who` for the rig's word finds, sorted.
async fn texts(
    r: &crate::client::Rig,
    op: &OperatorId,
    who: &Subject,
    dests: &[&str],
) -> Vec<String> {
    let found = r
        .client
        .search(
            &Search::new(op, r.word.clone())
                .max_results(50)
                .destinations(dests.iter().copied())
                .subject(who.clone()),
        )
        .await
        .unwrap();
    let mut out: Vec<String> = found
        .iter()
        .map(|h| {
            let text = h.hit.as_episode().unwrap().content.clone();
            text.split_whitespace().next().unwrap().to_string()
        })
        .collect();
    out.sort();
    out
}

async fn fragment_relationships(r: &crate::client::Rig, episode: uuid::Uuid) -> usize {
    r.authz
        .read_relationships(&RelationshipFilter::resource(ObjectRef::fragment(episode)))
        .await
        .unwrap()
        .len()
}

async fn purging_a_session_removes_its_episodes_in_every_destination_and_nothing_else(kind: Kind) {
    let r = rig(kind).await;
    let (ada_op, ada) = fresh("ada");
    r.authz
        .write_relationships(&[Relationship::member(r.team.clone(), &ada).unwrap()])
        .await
        .unwrap();
    for (dest, text, session) in [
        ("personal", "tea", Some("s-1")),
        (r.team.as_str(), "plans", Some("s-1")),
        ("personal", "jazz", Some("s-2")),
        ("personal", "chess", None),
    ] {
        r.client
            .memory_add(&add_as(&ada_op, &ada, dest, text, &r.word, session))
            .await
            .unwrap();
    }
    r.client.await_background_writes().await;
    let team = r.team.as_str();
    assert_eq!(
        texts(&r, &ada_op, &ada, &["personal", team]).await,
        ["chess", "jazz", "plans", "tea"]
    );

    let report = r
        .client_purge_session(&PurgeSession::new(&ada_op, "s-1").subject(ada.clone()))
        .await
        .unwrap();
    let mut graphs: Vec<&str> = report.episodes.iter().map(|(g, _)| g.as_str()).collect();
    graphs.sort();
    let personal = format!("personal/{}", ada_op.as_str());
    let mut expected = vec![personal.as_str(), team];
    expected.sort();
    assert_eq!(graphs, expected, "{report:?}");
    assert_eq!(
        texts(&r, &ada_op, &ada, &["personal", team]).await,
        ["chess", "jazz"]
    );
    for (g, u) in &report.episodes {
        let dest = if g == team { team } else { "personal" };
        let got = r
            .client
            .get_episode(&EpisodeRef::new(&ada_op, dest, *u).subject(ada.clone()))
            .await
            .unwrap();
        assert_eq!(got, None);
        assert_eq!(fragment_relationships(&r, *u).await, 0, "{u}");
    }
}

async fn a_session_purge_needs_delete_outside_the_own_personal_graph(kind: Kind) {
    let r = rig(kind).await;
    let (ada_op, ada) = fresh("ada");
    let (bob_op, bob) = fresh("bob");
    r.authz
        .write_relationships(&[
            Relationship::member(r.team.clone(), &ada).unwrap(),
            Relationship::member(r.team.clone(), &bob).unwrap(),
        ])
        .await
        .unwrap();
    // Bob writes to the team in a session of Ada's operator (a shared agent's chat).
    r.client
        .memory_add(&add_as(&ada_op, &bob, &r.team, "bobs", &r.word, Some("s")))
        .await
        .unwrap();
    r.client
        .memory_add(&add_as(
            &ada_op,
            &ada,
            "personal",
            "adas",
            &r.word,
            Some("s"),
        ))
        .await
        .unwrap();
    r.client.await_background_writes().await;
    let err = r
        .client_purge_session(&PurgeSession::new(&ada_op, "s").subject(ada.clone()))
        .await
        .unwrap_err();
    assert!(
        matches!(err, Error::PermissionDenied { ref permission, .. } if permission == "delete"),
        "{err}"
    );
    assert_eq!(
        texts(&r, &ada_op, &ada, &["personal", r.team.as_str()]).await,
        ["adas", "bobs"],
        "a refused purge removes nothing"
    );
    // Bob may delete what he wrote, and only that: Ada's personal episode is not his.
    let err = r
        .client_purge_session(&PurgeSession::new(&ada_op, "s").subject(bob.clone()))
        .await
        .unwrap_err();
    assert!(matches!(err, Error::PermissionDenied { .. }), "{err}");
    // Bob's own operator sees the team graph but has no session `s` in his personal one.
    let report = r
        .client_purge_session(&PurgeSession::new(&bob_op, "s").subject(bob.clone()))
        .await
        .unwrap();
    assert_eq!(report.episodes.len(), 1, "{report:?}");
    assert_eq!(
        texts(&r, &ada_op, &ada, &["personal", r.team.as_str()]).await,
        ["adas"]
    );
}

async fn a_session_purge_checks_the_session_id_and_can_run_again(kind: Kind) {
    let r = rig(kind).await;
    let (ada_op, ada) = fresh("ada");
    let err = r
        .client_purge_session(&PurgeSession::new(&ada_op, " ").subject(ada.clone()))
        .await
        .unwrap_err();
    assert!(err.to_string().contains("`session_id`"), "{err}");
    let err = r
        .client
        .memory_add(&add_as(
            &ada_op,
            &ada,
            "personal",
            "x",
            &r.word,
            Some("a\0b"),
        ))
        .await
        .unwrap_err();
    assert!(err.to_string().contains("`session_id`"), "{err}");
    r.client
        .memory_add(&add_as(
            &ada_op,
            &ada,
            "personal",
            "tea",
            &r.word,
            Some("s"),
        ))
        .await
        .unwrap();
    r.client.await_background_writes().await;
    let p = PurgeSession::new(&ada_op, "s").subject(ada.clone());
    assert_eq!(r.client_purge_session(&p).await.unwrap().episodes.len(), 1);
    assert!(
        r.client_purge_session(&p)
            .await
            .unwrap()
            .episodes
            .is_empty()
    );
}

async fn clearing_a_destination_empties_its_graph_but_keeps_its_members(kind: Kind) {
    let r = rig(kind).await;
    let (ada_op, ada) = fresh("ada");
    r.authz
        .write_relationships(&[Relationship::member(r.team.clone(), &ada).unwrap()])
        .await
        .unwrap();
    r.client
        .memory_add(&add_as(&ada_op, &ada, &r.team, "plans", &r.word, None))
        .await
        .unwrap();
    r.client
        .memory_add(&add_as(&ada_op, &ada, "personal", "tea", &r.word, None))
        .await
        .unwrap();
    r.client.await_background_writes().await;
    let report = r
        .client_clear(&ClearDestination::new(&ada_op, r.team.clone()).subject(ada.clone()))
        .await
        .unwrap();
    assert!(report.graph_removed);
    assert!(report.relationships_removed >= 2, "{report:?}");
    assert_eq!(
        texts(&r, &ada_op, &ada, &["personal", r.team.as_str()]).await,
        ["tea"]
    );
    let group = ObjectRef::group(r.team.clone()).unwrap();
    assert!(
        r.authz
            .read_relationships(
                &RelationshipFilter::of_type(ObjectType::MemoryFragment).subject(group.clone())
            )
            .await
            .unwrap()
            .is_empty()
    );
    // The Destination still exists, empty, with its members.
    assert_eq!(
        r.authz
            .read_relationships(&RelationshipFilter::resource(group))
            .await
            .unwrap()
            .len(),
        1
    );
    r.client
        .memory_add(&add_as(&ada_op, &ada, &r.team, "again", &r.word, None))
        .await
        .unwrap();
    r.client.await_background_writes().await;
    assert_eq!(
        texts(&r, &ada_op, &ada, &[r.team.as_str()]).await,
        ["again"]
    );
}

async fn clearing_a_shared_destination_needs_delete_on_everything_in_it(kind: Kind) {
    let r = rig(kind).await;
    let (ada_op, ada) = fresh("ada");
    let (_, bob) = fresh("bob");
    let (_, carol) = fresh("carol");
    r.authz
        .write_relationships(&[
            Relationship::member(r.team.clone(), &ada).unwrap(),
            Relationship::member(r.team.clone(), &bob).unwrap(),
        ])
        .await
        .unwrap();
    for (who, text) in [(&ada, "adas"), (&bob, "bobs")] {
        r.client
            .memory_add(&add_as(&ada_op, who, &r.team, text, &r.word, None))
            .await
            .unwrap();
    }
    r.client.await_background_writes().await;
    let clear = |who: &Subject| ClearDestination::new(&ada_op, r.team.clone()).subject(who.clone());
    let err = r.client_clear(&clear(&ada)).await.unwrap_err();
    assert!(
        matches!(err, Error::PermissionDenied { ref permission, .. }
            if permission.contains("1 fragments written by others")),
        "{err}"
    );
    let err = r.client_clear(&clear(&carol)).await.unwrap_err();
    assert!(
        matches!(err, Error::PermissionDenied { ref permission, .. } if permission == "contribute"),
        "{err}"
    );
    assert_eq!(
        texts(&r, &ada_op, &ada, &[r.team.as_str()]).await,
        ["adas", "bobs"],
        "a refused clear removes nothing"
    );
}

async fn only_the_owner_clears_a_personal_destination(kind: Kind) {
    let r = rig(kind).await;
    let (ada_op, ada) = fresh("ada");
    let (_, bob) = fresh("bob");
    r.client
        .memory_add(&add_as(&ada_op, &ada, "personal", "tea", &r.word, None))
        .await
        .unwrap();
    r.client.await_background_writes().await;
    let clear = |who: &Subject| ClearDestination::new(&ada_op, "personal").subject(who.clone());
    let err = r.client_clear(&clear(&bob)).await.unwrap_err();
    assert!(matches!(err, Error::PermissionDenied { .. }), "{err}");
    assert_eq!(texts(&r, &ada_op, &ada, &["personal"]).await, ["tea"]);
    assert!(r.client_clear(&clear(&ada)).await.unwrap().graph_removed);
    assert!(texts(&r, &ada_op, &ada, &["personal"]).await.is_empty());
}

/// One command on the shared server's socket; the reply's raw bytes (a simple
/// string, or a bulk string read whole).
fn server_command(args: &[&str]) -> String {
    use std::io::{BufRead, BufReader, Read, Write};
    let sock =
        std::os::unix::net::UnixStream::connect(crate::common::server().socket_path()).unwrap();
    let mut request = format!("*{}\r\n", args.len());
    for a in args {
        request.push_str(&format!("${}\r\n{a}\r\n", a.len()));
    }
    (&sock).write_all(request.as_bytes()).unwrap();
    let mut reader = BufReader::new(&sock);
    let mut head = String::new();
    reader.read_line(&mut head).unwrap();
    match head.strip_prefix('$') {
        Some(len) => {
            let len: usize = len.trim().parse().unwrap();
            let mut body = vec![0u8; len];
            reader.read_exact(&mut body).unwrap();
            String::from_utf8(body).unwrap()
        }
        None => head,
    }
}

/// `SAVE`: an RDB snapshot of everything now.
fn save_snapshot() {
    assert_eq!(server_command(&["SAVE"]), "+OK\r\n");
}

/// How many RDB snapshots the shared server has saved (`INFO persistence`).
fn rdb_saves() -> u64 {
    let info = server_command(&["INFO", "persistence"]);
    info.lines()
        .find_map(|l| l.trim().strip_prefix("rdb_saves:"))
        .expect("INFO persistence reports rdb_saves")
        .parse()
        .unwrap()
}

#[tokio::test]
async fn a_session_purge_rewrites_the_aof_and_the_snapshot_so_the_purged_content_is_not_on_disk() {
    let r = rig(Kind::Native).await;
    let (ada_op, ada) = fresh("ada");
    let secret = format!("secret{}", Uuid::new_v4().simple());
    r.client
        .memory_add(&add_as(
            &ada_op,
            &ada,
            "personal",
            &secret,
            &r.word,
            Some("s"),
        ))
        .await
        .unwrap();
    r.client.await_background_writes().await;
    assert!(
        aof_holds(&secret),
        "the write is in the AOF before the purge"
    );
    // A snapshot taken now holds the text (compressed: not searchable as bytes).
    save_snapshot();
    let saves = rdb_saves();
    r.client_purge_session(&PurgeSession::new(&ada_op, "s").subject(ada))
        .await
        .unwrap();
    assert!(
        rdb_saves() > saves,
        "a new snapshot, of the data set without the text, replaced it"
    );
    assert!(!aof_holds(&secret), "the purged text is gone from the AOF");
}
