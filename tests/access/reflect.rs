//! Reflections are authorized like every write, on every authorizer: the
//! invocation's subject needs `contribute` on the Reflection's Destination when it is
//! submitted and again at delivery, the artefact's fragment is recorded for it, and
//! the packaged `generalisations` searches related memory as it. Mirrors the
//! Reflection branch of `test-trees/access.md`.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

use async_trait::async_trait;
use gralkor::Error;
use gralkor::access::{
    Authorizer, ObjectRef, ObjectType, Relationship, RelationshipFilter, Subject,
};
use gralkor::client::{Content, EpisodeRef, Ingest, OperatorId, ReflectOptions};
use gralkor::lens::Lens;
use gralkor::reflection::delivery::{Completion, Outcome, Stage};
use gralkor::reflection::runner::{Inference, InferenceResponse, Invocation, StepPrompt};
use gralkor::reflection::{Reflection, Step, artefact_uuid};
use gralkor::runtime::RuntimeConfig;
use serde_json::{Map, Value, json};
use tokio::sync::oneshot;
use uuid::Uuid;

use crate::client::{Kind, Rig, rig};

fn fresh(tag: &str) -> (OperatorId, Subject) {
    let id = format!("{tag}-{}", Uuid::new_v4().simple());
    (
        OperatorId::new(id.clone()).unwrap(),
        Subject::person(id).unwrap(),
    )
}

fn inv() -> String {
    format!("inv-{}", Uuid::new_v4().simple())
}

every_client!(
    reflect_without_a_subject_or_without_contribute_is_refused_at_submission_and_runs_nothing,
    a_non_member_naming_another_persons_operator_cannot_reflect_into_their_personal_graph,
    permission_revoked_between_submission_and_delivery_fails_the_delivery_and_writes_nothing,
    packaged_generalisations_runs_to_completion_and_sees_only_what_its_subject_may,
    an_artefact_delivered_for_a_subject_is_deletable_by_it_and_not_by_a_stranger,
);

/// `team-review` writes to the rig's team Destination, `note` to `personal`;
/// `team-notes` is an appending Lens of the team.
fn declare(r: &Rig) {
    r.client
        .runtime()
        .replace(
            RuntimeConfig::new()
                .destination(r.team.clone())
                .lens(Lens::appending("team-notes", r.team.clone()))
                .reflection(
                    Reflection::new("team-review", r.team.clone()).step(
                        Step::new("review", "Review the evidence.").typed("approved", "boolean"),
                    ),
                )
                .reflection(
                    Reflection::new("note", "personal")
                        .step(Step::new("note", "Note the lesson.").typed("lesson", "string")),
                ),
        )
        .unwrap();
}

/// A revocation the inference performs when it is first asked: between the
/// submission (already authorized) and the delivery.
struct Revoke {
    authz: Arc<dyn Authorizer>,
    subject: Subject,
}

/// Answers each step by its label and keeps every prompt; optionally revokes the
/// subject's group memberships when first asked.
#[derive(Default)]
struct Answers {
    prompts: Mutex<Vec<StepPrompt>>,
    revoke: Mutex<Option<Revoke>>,
}

impl std::fmt::Debug for Answers {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Answers").finish_non_exhaustive()
    }
}

impl Answers {
    fn revoking(authz: Arc<dyn Authorizer>, subject: Subject) -> Answers {
        Answers {
            prompts: Mutex::default(),
            revoke: Mutex::new(Some(Revoke { authz, subject })),
        }
    }

    fn prompts(&self) -> Vec<StepPrompt> {
        self.prompts.lock().unwrap().clone()
    }
}

#[async_trait]
impl Inference for Answers {
    async fn infer(&self, prompt: &StepPrompt) -> gralkor::Result<InferenceResponse> {
        self.prompts.lock().unwrap().push(prompt.clone());
        let revoke = self.revoke.lock().unwrap().take();
        if let Some(Revoke { authz, subject }) = revoke {
            authz
                .delete_relationships(
                    &RelationshipFilter::of_type(ObjectType::Group)
                        .subject(subject.object().clone()),
                )
                .await?;
        }
        let output = match prompt.label.as_str() {
            "review" => json!({"approved": true}),
            "note" => json!({"lesson": "check the canary"}),
            "inspect-world" => json!({"inspection": "one observation"}),
            "evolve-generalisations" => json!({"generalisations": [
                {"content": "releases need a clean canary", "level": 1, "evolves_from": []}
            ]}),
            other => panic!("no answer for step {other}"),
        };
        let Value::Object(map) = output else {
            unreachable!()
        };
        Ok(InferenceResponse::Output(Map::clone(&map)))
    }
}

/// Options answering with `answers` whose callback sends the completion.
fn options(answers: &Arc<Answers>) -> (ReflectOptions, oneshot::Receiver<Completion>) {
    let (tx, rx) = oneshot::channel();
    let options = ReflectOptions::new()
        .inference(answers.clone())
        .on_complete(move |done| {
            let _ = tx.send(done);
        });
    (options, rx)
}

/// Options answering with `answers` that count their callbacks.
fn counted(answers: &Arc<Answers>, calls: &Arc<AtomicUsize>) -> ReflectOptions {
    let calls = calls.clone();
    ReflectOptions::new()
        .inference(answers.clone())
        .on_complete(move |_| {
            calls.fetch_add(1, Ordering::SeqCst);
        })
}

async fn join(r: &Rig, group: &str, who: &Subject) {
    r.authz
        .write_relationships(&[Relationship::member(group.to_string(), who).unwrap()])
        .await
        .unwrap();
}

async fn fragment_relationships(r: &Rig, episode: Uuid) -> usize {
    r.authz
        .read_relationships(&RelationshipFilter::resource(ObjectRef::fragment(episode)))
        .await
        .unwrap()
        .len()
}

async fn reflect_without_a_subject_or_without_contribute_is_refused_at_submission_and_runs_nothing(
    kind: Kind,
) {
    let r = rig(kind).await;
    declare(&r);
    let (ada_op, ada) = fresh("ada");
    let answers = Arc::new(Answers::default());
    let calls = Arc::new(AtomicUsize::new(0));
    let id = inv();

    let err = r
        .client
        .reflect(
            "team-review",
            Invocation::new(&id, ada_op.clone()),
            counted(&answers, &calls),
        )
        .await
        .unwrap_err();
    assert!(
        matches!(&err, Error::InvalidInput { field, .. } if field == "subject"),
        "{err}"
    );
    // Ada is no member of the team: she may not contribute there.
    let err = r
        .client
        .reflect(
            "team-review",
            Invocation::new(&id, ada_op.clone()).subject(ada.clone()),
            counted(&answers, &calls),
        )
        .await
        .unwrap_err();
    assert!(
        matches!(&err, Error::PermissionDenied { permission, resource, .. }
            if permission == "contribute" && *resource == format!("group:{}", r.team)),
        "{err}"
    );
    assert!(!err.is_retryable());
    r.client.await_reflections().await;
    assert!(answers.prompts().is_empty(), "nothing ran");
    assert_eq!(calls.load(Ordering::SeqCst), 0, "nothing called back");
    // Nothing was stored: a member finds no artefact under its id.
    join(&r, &r.team, &ada).await;
    let uuid = artefact_uuid(ada_op.as_str(), &id, "team-review");
    let found = r
        .client
        .get_episode(&EpisodeRef::new(&ada_op, r.team.clone(), uuid).subject(ada.clone()))
        .await
        .unwrap();
    assert_eq!(found, None);
    assert_eq!(fragment_relationships(&r, uuid).await, 0);
}

async fn a_non_member_naming_another_persons_operator_cannot_reflect_into_their_personal_graph(
    kind: Kind,
) {
    let r = rig(kind).await;
    declare(&r);
    let (ada_op, ada) = fresh("ada");
    let (bob_op, bob) = fresh("bob");
    let answers = Arc::new(Answers::default());
    let calls = Arc::new(AtomicUsize::new(0));
    let id = inv();
    let err = r
        .client
        .reflect(
            "note",
            Invocation::new(&id, ada_op.clone()).subject(bob.clone()),
            counted(&answers, &calls),
        )
        .await
        .unwrap_err();
    assert!(
        matches!(&err, Error::PermissionDenied { permission, resource, .. }
            if permission == "contribute" && *resource == format!("group:personal/{ada_op}")),
        "{err}"
    );
    // Nor into a Destination he may not write, under his own operator id.
    let err = r
        .client
        .reflect(
            "team-review",
            Invocation::new(inv(), bob_op).subject(bob.clone()),
            counted(&answers, &calls),
        )
        .await
        .unwrap_err();
    assert!(matches!(err, Error::PermissionDenied { .. }), "{err}");
    r.client.await_reflections().await;
    assert!(answers.prompts().is_empty(), "nothing ran");
    assert_eq!(calls.load(Ordering::SeqCst), 0);
    let uuid = artefact_uuid(ada_op.as_str(), &id, "note");
    let mine = EpisodeRef::new(&ada_op, "personal", uuid).subject(ada.clone());
    assert_eq!(r.client.get_episode(&mine).await.unwrap(), None);
    assert_eq!(fragment_relationships(&r, uuid).await, 0);
}

async fn permission_revoked_between_submission_and_delivery_fails_the_delivery_and_writes_nothing(
    kind: Kind,
) {
    let r = rig(kind).await;
    declare(&r);
    let (ada_op, ada) = fresh("ada");
    let (cy_op, cy) = fresh("cy");
    join(&r, &r.team, &ada).await;
    join(&r, &r.team, &cy).await;
    // Ada's membership is revoked while her artefact is being produced.
    let answers = Arc::new(Answers::revoking(r.authz.clone(), ada.clone()));
    let (opts, rx) = options(&answers);
    let id = inv();
    let returned = r
        .client
        .reflect(
            "team-review",
            Invocation::new(&id, ada_op.clone()).subject(ada.clone()),
            opts,
        )
        .await
        .unwrap();
    assert_eq!(returned, id);
    let done = rx.await.expect("the invocation calls back");
    let Outcome::Abandoned {
        stage: Stage::Delivery,
        reason,
        artefact: Some(artefact),
    } = done.outcome
    else {
        panic!("expected a refused delivery, got {:?}", done.outcome)
    };
    assert!(
        reason.contains(&format!("lacks `contribute` on `group:{}`", r.team)),
        "{reason}"
    );
    assert_eq!(answers.prompts().len(), 1, "produced once, not retried");
    // Nothing was written: Cy, still a member, finds no artefact under its id.
    let uuid = artefact_uuid(ada_op.as_str(), &id, "team-review");
    assert_eq!(artefact.id, uuid.to_string());
    let found = r
        .client
        .get_episode(&EpisodeRef::new(&cy_op, r.team.clone(), uuid).subject(cy.clone()))
        .await
        .unwrap();
    assert_eq!(found, None);
    assert_eq!(fragment_relationships(&r, uuid).await, 0);
}

async fn packaged_generalisations_runs_to_completion_and_sees_only_what_its_subject_may(
    kind: Kind,
) {
    let r = rig(kind).await;
    declare(&r);
    let (ada_op, ada) = fresh("ada");
    let (bob_op, bob) = fresh("bob");
    join(&r, "global", &ada).await;
    join(&r, &r.team, &bob).await;
    // An observation Ada may read (her own) and one she may not (Bob's team's).
    r.client
        .ingest(
            &Ingest::new(
                "mine",
                &ada_op,
                "personal-chat",
                Content::document(format!("mine {}", r.word)),
            )
            .subject(ada.clone()),
        )
        .await
        .unwrap();
    r.client
        .ingest(
            &Ingest::new(
                "theirs",
                &bob_op,
                "team-notes",
                Content::document(format!("theirs {}", r.word)),
            )
            .subject(bob.clone()),
        )
        .await
        .unwrap();
    let answers = Arc::new(Answers::default());
    let (opts, rx) = options(&answers);
    let id = inv();
    r.client
        .reflect(
            "generalisations",
            Invocation::new(&id, ada_op.clone())
                .subject(ada.clone())
                .representation(gralkor::reflection::runner::Representation::new(
                    "turn-1",
                    "personal-chat",
                    Content::document(r.word.clone()),
                    json!({}),
                )),
            opts,
        )
        .await
        .unwrap();
    let done = rx.await.expect("the invocation calls back");
    let Outcome::Delivered { artefact } = done.outcome else {
        panic!("expected a delivery, got {:?}", done.outcome)
    };
    // The related-memory search ran as Ada: her observation, not Bob's team's.
    let prompts = answers.prompts();
    let related = prompts[0].related.clone().expect("related memory is shown");
    let observations: Vec<String> = related["observations"]
        .as_array()
        .unwrap()
        .iter()
        .map(|o| o["content"].as_str().unwrap().to_string())
        .collect();
    assert_eq!(observations, [format!("mine {}", r.word)], "{related}");
    // Delivered to `global`, recorded for Ada: she may forget it again.
    let uuid = artefact_uuid(ada_op.as_str(), &id, "generalisations");
    assert_eq!(artefact.id, uuid.to_string());
    let at = EpisodeRef::new(&ada_op, "global", uuid).subject(ada.clone());
    assert!(r.client.get_episode(&at).await.unwrap().is_some());
    assert!(r.client.remove_episode(&at).await.unwrap());
    assert_eq!(r.client.get_episode(&at).await.unwrap(), None);
}

async fn an_artefact_delivered_for_a_subject_is_deletable_by_it_and_not_by_a_stranger(kind: Kind) {
    let r = rig(kind).await;
    declare(&r);
    let (ada_op, ada) = fresh("ada");
    let (bob_op, bob) = fresh("bob");
    let answers = Arc::new(Answers::default());
    let (opts, rx) = options(&answers);
    let id = inv();
    r.client
        .reflect(
            "note",
            Invocation::new(&id, ada_op.clone()).subject(ada.clone()),
            opts,
        )
        .await
        .unwrap();
    let done = rx.await.expect("the invocation calls back");
    assert!(
        matches!(done.outcome, Outcome::Delivered { .. }),
        "{:?}",
        done.outcome
    );
    let uuid = artefact_uuid(ada_op.as_str(), &id, "note");
    assert!(fragment_relationships(&r, uuid).await > 0, "recorded");
    let mine = EpisodeRef::new(&ada_op, "personal", uuid).subject(ada.clone());
    assert!(r.client.get_episode(&mine).await.unwrap().is_some());
    // A stranger may not forget it, naming Ada's operator or his own.
    for op in [&ada_op, &bob_op] {
        let err = r
            .client
            .remove_episode(&EpisodeRef::new(op, "personal", uuid).subject(bob.clone()))
            .await
            .unwrap_err();
        assert!(
            matches!(&err, Error::PermissionDenied { permission, .. } if permission == "delete"),
            "{err}"
        );
    }
    assert!(r.client.get_episode(&mine).await.unwrap().is_some());
    // Ada may.
    assert!(r.client.remove_episode(&mine).await.unwrap());
    assert_eq!(r.client.get_episode(&mine).await.unwrap(), None);
    assert_eq!(fragment_relationships(&r, uuid).await, 0);
}
