//! Purging an operator leaves nothing of theirs behind; the health report.

use gralkor::Error;
use gralkor::access::{ObjectRef, ObjectType, RelationshipFilter, Subject};
use gralkor::client::{Content, EpisodeRef, MemoryAdd, OperatorId, PurgeOperator, Search};
use uuid::Uuid;

use crate::client::{Kind, rig};

fn fresh(tag: &str) -> (OperatorId, Subject) {
    let id = format!("{tag}-{}", Uuid::new_v4().simple());
    (
        OperatorId::new(id.clone()).unwrap(),
        Subject::person(id).unwrap(),
    )
}

macro_rules! both {
    ($($name:ident),* $(,)?) => {$(
        mod $name {
            #[tokio::test]
            async fn in_memory() {
                super::$name(super::Kind::Twin).await
            }
            #[tokio::test]
            async fn native() {
                super::$name(super::Kind::Native).await
            }
            #[cfg(feature = "spicedb")]
            #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
            async fn native_spicedb() {
                super::$name(super::Kind::NativeSpiceDb).await
            }
        }
    )*};
}

both!(
    purging_an_operator_leaves_no_episode_result_or_relationship_of_theirs,
    only_the_operator_themself_may_purge,
    a_purge_can_run_again,
    status_reports_the_storage_and_the_authorizer,
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
            assert!(storage.starts_with("in-memory"), "{storage}");
            assert_eq!(status.authorizer.as_deref(), Some("in-memory"));
        }
        Kind::Native => {
            assert!(storage.starts_with("FalkorDB (embedded)"), "{storage}");
            assert_eq!(status.authorizer.as_deref(), Some("embedded"));
        }
        Kind::NativeSpiceDb => {
            assert!(storage.starts_with("FalkorDB (embedded)"), "{storage}");
            assert_eq!(status.authorizer.as_deref(), Some("spicedb"));
        }
    }
    assert_eq!(status.authorizer_health, Some(Ok(())));
    assert!(status.destinations.contains(&r.team));
    assert!(status.lenses.contains(&"personal-chat".to_string()));
}

/// Whether any file of the shared server's AOF directory holds `needle`.
fn aof_holds(needle: &str) -> bool {
    let dir = crate::common::server().data_dir().join("appendonlydir");
    std::fs::read_dir(&dir).unwrap().any(|e| {
        let bytes = std::fs::read(e.unwrap().path()).unwrap();
        bytes.windows(needle.len()).any(|w| w == needle.as_bytes())
    })
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
