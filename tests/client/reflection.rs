//! Reflections through the client (`Client::reflect`, also through `Arc<dyn Client>`) on both clients: the twin
//! and the native client over the shared embedded FalkorDB (a scripted model for
//! extraction, another for the chain of thought). Mirrors `test-trees/reflections.md`.

use crate::common;

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use async_trait::async_trait;
use common::ingest::{CountingEmbedder, Rules, answer};
use gralkor::NativeStorage;
use gralkor::client::{
    Client, Content, EpisodeRef, InMemoryClient, Ingest, MemoryClient, NativeClient, OperatorId,
    ReflectOptions,
};
use gralkor::graph::Engine;
use gralkor::llm::doubles::ScriptedModel;
use gralkor::provenance::Writer;
use gralkor::reflection::delivery::{
    Completion, ManualClock, Outcome, Stage, artefact_body, deliver,
};
use gralkor::reflection::runner::{
    Inference, InferenceResponse, Invocation, Representation, Runner, StepPrompt,
};
use gralkor::reflection::{Reflection, ReflectionOutput, Step, artefact_id, artefact_uuid};
use gralkor::runtime::{Runtime, RuntimeConfig};
use gralkor::storage::{Artefact, GraphId, InMemoryStorage, Storage};
use gralkor::{Error, Result};
use serde_json::{Value, json};
use tokio::sync::{Notify, oneshot};

fn op() -> OperatorId {
    OperatorId::new(format!("op-{}", uuid::Uuid::new_v4())).unwrap()
}

fn inv() -> String {
    format!("inv-{}", uuid::Uuid::new_v4())
}

/// The Destination `release-review` writes to: an application Destination of this
/// test process, so the artefacts (and the facts extracted from them on the shared
/// server) stay out of `global`, which other tests search.
fn review_dest() -> &'static str {
    static DEST: std::sync::OnceLock<String> = std::sync::OnceLock::new();
    DEST.get_or_init(|| format!("reviews-{}", crate::client_contract::word()))
}

fn review() -> Reflection {
    Reflection::new("release-review", review_dest())
        .step(
            Step::new("review", "Review the supplied release evidence.")
                .typed("assessment", "string")
                .typed("approved", "boolean"),
        )
        .step(Step::new("summarise", "Summarise {{ assessment }}.").typed("summary", "string"))
}

fn config() -> RuntimeConfig {
    RuntimeConfig::new()
        .destination(review_dest())
        .reflection(review())
}

fn review_model() -> ScriptedModel {
    ScriptedModel::new()
        .answer(
            "step_review",
            json!({"assessment": "the canary was clean", "approved": true}),
        )
        .answer("step_summarise", json!({"summary": "ship it"}))
}

/// The client logic over the in-memory storage, as the twin wraps it (these tests
/// check the Reflection machinery, not the twin's recording).
fn twin(config: RuntimeConfig) -> MemoryClient<InMemoryStorage> {
    (*InMemoryClient::with_config(config).unwrap()).clone()
}

async fn native(config: RuntimeConfig) -> NativeClient {
    let r = Rules::narrator();
    let model = ScriptedModel::new().respond_with(move |req| answer(&r, req));
    let engine = Engine::new(
        common::db().await,
        Arc::new(model),
        Arc::new(CountingEmbedder::new()),
    );
    NativeClient::from_parts(Runtime::new(config).unwrap(), NativeStorage::new(engine))
}

/// Submits and returns the completion (or `None` when the task ended without one).
async fn reflect_and_wait(
    client: &dyn Client,
    name: &str,
    invocation: Invocation,
    options: ReflectOptions,
) -> Option<Completion> {
    let (tx, rx) = oneshot::channel();
    let id = invocation.id.clone();
    let returned = client
        .reflect(
            name,
            invocation,
            options.on_complete(move |c| {
                let _ = tx.send(c);
            }),
        )
        .await
        .unwrap();
    assert_eq!(returned, id);
    rx.await.ok()
}

fn delivered(c: Option<Completion>) -> Artefact {
    match c.map(|c| c.outcome) {
        Some(Outcome::Delivered { artefact }) => artefact,
        other => panic!("expected a delivery, got {other:?}"),
    }
}

fn graph(name: &str) -> GraphId {
    GraphId::new(name).unwrap()
}

/// Runs an `async fn(MemoryClient<S>)` test on both clients.
macro_rules! both {
    ($($name:ident),* $(,)?) => {$(
        mod $name {
            #[tokio::test]
            async fn in_memory() {
                super::$name(super::twin(super::config())).await
            }
            #[tokio::test]
            async fn native() {
                super::$name(super::native(super::config()).await).await
            }
        }
    )*};
}

both!(
    a_declared_reflection_is_produced_delivered_and_calls_back_once,
    reflect_validates_before_any_work_and_returns_the_invocation_id,
    resubmitting_the_same_invocation_converges_on_one_artefact,
    a_stored_artefact_is_delivered_again_without_rerunning_the_chain_of_thought,
    different_content_under_an_artefact_id_is_a_conflict,
    five_hundreds_are_retried_on_the_injected_clock_until_delivered,
    a_4xx_abandons_production_and_other_failures_are_production_failed,
    retryable_failures_past_24_hours_are_abandoned,
    the_owner_stopping_ends_unfinished_work_without_a_callback,
    the_definition_in_force_at_admission_is_used,
    invocations_run_independently,
    packaged_erl_writes_to_the_operators_personal_graph,
    reflect_through_an_arc_dyn_client_on_both_clients,
);

/// On the twin only: on the shared server its artefact (and the fact extracted from
/// it) would land in `global`, which other tests of this binary count facts in.
#[tokio::test]
async fn packaged_generalisations_searches_related_memory_first_and_writes_to_global_in_memory() {
    packaged_generalisations_searches_related_memory_first_and_writes_to_global(twin(config()))
        .await
}

async fn a_declared_reflection_is_produced_delivered_and_calls_back_once<S: Storage>(
    client: MemoryClient<S>,
) {
    let (op, id) = (op(), inv());
    let model = review_model();
    let calls = Arc::new(AtomicUsize::new(0));
    let counted = calls.clone();
    let (tx, rx) = oneshot::channel();
    client
        .reflect(
            "release-review",
            Invocation::new(&id, op.clone()).context(json!({"reason": "release"})),
            ReflectOptions::new()
                .model(Arc::new(model.clone()))
                .on_complete(move |c| {
                    counted.fetch_add(1, Ordering::SeqCst);
                    let _ = tx.send(c);
                }),
        )
        .await
        .unwrap();
    let done = rx.await.unwrap();
    client.await_reflections().await;
    assert_eq!(calls.load(Ordering::SeqCst), 1);
    assert_eq!(done.invocation_id, id);
    let Outcome::Delivered { artefact } = done.outcome else {
        panic!("{:?}", done.outcome)
    };
    assert_eq!(artefact.id, artefact_id(op.as_str(), &id, "release-review"));
    assert_eq!(artefact.payload, json!({"summary": "ship it"}));
    assert_eq!(model.calls().len(), 2);
    // The episode: uuid = the artefact id, body {id, payload}, written by the Reflection.
    let episode = client
        .get_episode(&EpisodeRef::new(
            op.clone(),
            review_dest(),
            artefact_uuid(op.as_str(), &id, "release-review"),
        ))
        .await
        .unwrap()
        .expect("the artefact's episode is stored");
    assert_eq!(
        serde_json::from_str::<Value>(&episode.content).unwrap(),
        artefact_body(&artefact)
    );
    assert_eq!(
        episode.writer,
        Some(Writer::Reflection("release-review".into()))
    );
}

async fn reflect_validates_before_any_work_and_returns_the_invocation_id<S: Storage>(
    client: MemoryClient<S>,
) {
    let model = review_model();
    let opts = || ReflectOptions::new().model(Arc::new(model.clone()));
    let client = &client;
    let try_reflect = |name: &'static str, invocation: Invocation, options: ReflectOptions| async move {
        client
            .reflect(name, invocation, options)
            .await
            .unwrap_err()
            .to_string()
    };
    let e = try_reflect("release-review", Invocation::new("  ", op()), opts()).await;
    assert!(e.contains("`invocation.id` must not be blank"), "{e}");
    let e = try_reflect("release-review", Invocation::new("a\0b", op()), opts()).await;
    assert!(e.contains("`invocation.id` must not contain NUL"), "{e}");
    let e = try_reflect("nowhere", Invocation::new("i", op()), opts()).await;
    assert!(e.contains("names no declared Reflection"), "{e}");
    let e = try_reflect(
        "release-review",
        Invocation::new("i", op()),
        opts().max_tool_rounds(0),
    )
    .await;
    assert!(
        e.contains("`options.max_tool_rounds` must be at least 1"),
        "{e}"
    );
    let e = try_reflect(
        "release-review",
        Invocation::new("i", op()),
        opts().tool_context(json!("not an object")),
    )
    .await;
    assert!(
        e.contains("`options.tool_context` must be a JSON object"),
        "{e}"
    );
    assert!(model.calls().is_empty(), "nothing ran");
    // A blank operator cannot even be made.
    assert!(OperatorId::new(" ").is_err());
}

async fn resubmitting_the_same_invocation_converges_on_one_artefact<S: Storage>(
    client: MemoryClient<S>,
) {
    let (op, id) = (op(), inv());
    let model = review_model();
    let opts = || ReflectOptions::new().model(Arc::new(model.clone()));
    let first = delivered(
        reflect_and_wait(
            &client,
            "release-review",
            Invocation::new(&id, op.clone()),
            opts(),
        )
        .await,
    );
    let second = delivered(
        reflect_and_wait(
            &client,
            "release-review",
            Invocation::new(&id, op.clone()),
            opts(),
        )
        .await,
    );
    assert_eq!(first, second);
    // The second found the stored artefact and did not run the chain of thought again.
    assert_eq!(model.calls().len(), 2);
    let found: Vec<_> = client
        .search(&gralkor::client::Search::new(&op, "ship it").destinations([review_dest()]))
        .await
        .unwrap()
        .into_iter()
        .filter_map(|r| r.hit.as_episode().cloned())
        .filter(|e| e.uuid == artefact_uuid(op.as_str(), &id, "release-review"))
        .collect();
    assert_eq!(found.len(), 1, "{found:?}");
}

async fn a_stored_artefact_is_delivered_again_without_rerunning_the_chain_of_thought<S: Storage>(
    client: MemoryClient<S>,
) {
    // A process produced the artefact and wrote its episode, then died before the
    // callback; the resubmission must not run the chain of thought again.
    let (op, id) = (op(), inv());
    let producer = review_model();
    let invocation = Invocation::new(&id, op.clone());
    let artefact = Runner::new(Arc::new(gralkor::reflection::runner::ModelInference::new(
        Arc::new(producer),
    )))
    .run(&review(), &invocation, None)
    .await
    .unwrap();
    deliver(
        client.storage(),
        &graph(review_dest()),
        &review(),
        &artefact,
    )
    .await
    .unwrap();
    let unscripted = ScriptedModel::new();
    let again = delivered(
        reflect_and_wait(
            &client,
            "release-review",
            invocation,
            ReflectOptions::new().model(Arc::new(unscripted.clone())),
        )
        .await,
    );
    assert_eq!(again, artefact);
    assert!(unscripted.calls().is_empty());
}

async fn different_content_under_an_artefact_id_is_a_conflict<S: Storage>(client: MemoryClient<S>) {
    let id = artefact_id(op().as_str(), &inv(), "release-review");
    let a = Artefact::new(id.clone(), json!({"summary": "ship it"}));
    let b = Artefact::new(id.clone(), json!({"summary": "hold it"}));
    let g = graph(review_dest());
    deliver(client.storage(), &g, &review(), &a).await.unwrap();
    // Equal content confirms.
    deliver(client.storage(), &g, &review(), &a).await.unwrap();
    let err = deliver(client.storage(), &g, &review(), &b)
        .await
        .unwrap_err();
    assert!(
        matches!(&err, Error::ArtefactConflict { id: got } if *got == id),
        "{err:?}"
    );
    assert!(!err.is_retryable());
}

/// An inference failing with `errors` first, then answering every step.
#[derive(Debug)]
struct Flaky {
    errors: Mutex<Vec<Error>>,
    calls: AtomicUsize,
}

impl Flaky {
    fn new(errors: Vec<Error>) -> Arc<Flaky> {
        Arc::new(Flaky {
            errors: Mutex::new(errors),
            calls: AtomicUsize::new(0),
        })
    }
}

#[async_trait]
impl Inference for Flaky {
    async fn infer(&self, prompt: &StepPrompt) -> Result<InferenceResponse> {
        self.calls.fetch_add(1, Ordering::SeqCst);
        if let Some(e) = self.errors.lock().unwrap().pop() {
            return Err(e);
        }
        let out = match prompt.label.as_str() {
            "review" => json!({"assessment": "fine", "approved": true}),
            _ => json!({"summary": "ship it"}),
        };
        Ok(InferenceResponse::Output(out.as_object().unwrap().clone()))
    }
}

fn status(s: u16) -> Error {
    Error::Provider {
        provider: "openai".into(),
        status: Some(s),
        message: format!("HTTP {s}"),
        retry_after: None,
        source: None,
    }
}

async fn five_hundreds_are_retried_on_the_injected_clock_until_delivered<S: Storage>(
    client: MemoryClient<S>,
) {
    let clock = ManualClock::new();
    let flaky = Flaky::new(vec![status(502), status(503)]);
    let artefact = delivered(
        reflect_and_wait(
            &client,
            "release-review",
            Invocation::new(inv(), op()),
            ReflectOptions::new()
                .inference(flaky.clone())
                .clock(Arc::new(clock.clone())),
        )
        .await,
    );
    assert_eq!(artefact.payload, json!({"summary": "ship it"}));
    assert_eq!(
        clock.sleeps(),
        vec![Duration::from_secs(1), Duration::from_secs(2)]
    );
    // Two failed attempts, then both steps.
    assert_eq!(flaky.calls.load(Ordering::SeqCst), 4);
}

async fn a_4xx_abandons_production_and_other_failures_are_production_failed<S: Storage>(
    client: MemoryClient<S>,
) {
    let clock = ManualClock::new();
    let done = reflect_and_wait(
        &client,
        "release-review",
        Invocation::new(inv(), op()),
        ReflectOptions::new()
            .inference(Flaky::new(vec![status(400)]))
            .clock(Arc::new(clock.clone())),
    )
    .await
    .unwrap();
    assert!(
        matches!(&done.outcome, Outcome::Abandoned { stage: Stage::Production, artefact: None, reason } if reason.contains("400")),
        "{:?}",
        done.outcome
    );
    assert!(clock.sleeps().is_empty(), "a 4xx is abandoned at once");
    // A wrong answer is not retryable: production failed.
    let wrong =
        ScriptedModel::new().respond_with(|_| Ok(json!({"assessment": "x", "approved": "yes"})));
    let done = reflect_and_wait(
        &client,
        "release-review",
        Invocation::new(inv(), op()),
        ReflectOptions::new()
            .model(Arc::new(wrong))
            .clock(Arc::new(clock.clone())),
    )
    .await
    .unwrap();
    assert!(
        matches!(&done.outcome, Outcome::ProductionFailed { .. }),
        "{:?}",
        done.outcome
    );
    assert!(clock.sleeps().is_empty());
}

async fn retryable_failures_past_24_hours_are_abandoned<S: Storage>(client: MemoryClient<S>) {
    let clock = ManualClock::new();
    let always = Flaky::new((0..100).map(|_| status(503)).collect());
    let done = reflect_and_wait(
        &client,
        "release-review",
        Invocation::new(inv(), op()),
        ReflectOptions::new()
            .inference(always.clone())
            .clock(Arc::new(clock.clone())),
    )
    .await
    .unwrap();
    assert!(
        matches!(
            &done.outcome,
            Outcome::Abandoned {
                stage: Stage::Production,
                ..
            }
        ),
        "{:?}",
        done.outcome
    );
    // 12 doubling sleeps (1 s … 2048 s) and 22 of an hour: 83 295 s, under 24 h.
    assert_eq!(clock.sleeps().len(), 34);
    assert_eq!(
        clock.sleeps().iter().sum::<Duration>(),
        Duration::from_secs(83_295)
    );
    assert_eq!(always.calls.load(Ordering::SeqCst), 35);
}

/// An inference that waits for a gate before answering.
#[derive(Debug)]
struct Gated {
    entered: Notify,
    gate: Notify,
}

#[async_trait]
impl Inference for Gated {
    async fn infer(&self, prompt: &StepPrompt) -> Result<InferenceResponse> {
        self.entered.notify_one();
        self.gate.notified().await;
        let out = match prompt.label.as_str() {
            "review" => json!({"assessment": "fine", "approved": true}),
            _ => json!({"summary": "ship it"}),
        };
        Ok(InferenceResponse::Output(out.as_object().unwrap().clone()))
    }
}

fn gated() -> Arc<Gated> {
    Arc::new(Gated {
        entered: Notify::new(),
        gate: Notify::new(),
    })
}

async fn the_owner_stopping_ends_unfinished_work_without_a_callback<S: Storage>(
    client: MemoryClient<S>,
) {
    let (op, id) = (op(), inv());
    let gate = gated();
    let (tx, rx) = oneshot::channel::<Completion>();
    client
        .reflect(
            "release-review",
            Invocation::new(&id, op.clone()),
            ReflectOptions::new()
                .inference(gate.clone())
                .on_complete(move |c| {
                    let _ = tx.send(c);
                }),
        )
        .await
        .unwrap();
    gate.entered.notified().await;
    client.shutdown().await.unwrap();
    // The task was dropped with its callback: the sender is gone, nothing was sent.
    assert!(rx.await.is_err());
    let err = client
        .reflect(
            "release-review",
            Invocation::new(&id, op),
            ReflectOptions::new().inference(gate),
        )
        .await
        .unwrap_err();
    assert!(matches!(err, Error::Closed { .. }), "{err:?}");
}

async fn the_definition_in_force_at_admission_is_used<S: Storage>(client: MemoryClient<S>) {
    let gate = gated();
    let (tx, rx) = oneshot::channel();
    client
        .reflect(
            "release-review",
            Invocation::new(inv(), op()),
            ReflectOptions::new()
                .inference(gate.clone())
                .on_complete(move |c| {
                    let _ = tx.send(c);
                }),
        )
        .await
        .unwrap();
    gate.entered.notified().await;
    // The Reflection is withdrawn while its invocation runs.
    client.runtime().replace(RuntimeConfig::new()).unwrap();
    gate.gate.notify_one();
    gate.entered.notified().await;
    gate.gate.notify_one();
    let artefact = delivered(rx.await.ok());
    assert_eq!(artefact.payload, json!({"summary": "ship it"}));
    let err = client
        .reflect(
            "release-review",
            Invocation::new(inv(), op()),
            ReflectOptions::new().inference(gated()),
        )
        .await
        .unwrap_err();
    assert!(
        err.to_string().contains("names no declared Reflection"),
        "{err}"
    );
}

async fn invocations_run_independently<S: Storage>(client: MemoryClient<S>) {
    // One invocation waits at its gate; another completes meanwhile.
    let gate = gated();
    let (tx, rx) = oneshot::channel();
    client
        .reflect(
            "release-review",
            Invocation::new(inv(), op()),
            ReflectOptions::new()
                .inference(gate.clone())
                .on_complete(move |c| {
                    let _ = tx.send(c);
                }),
        )
        .await
        .unwrap();
    gate.entered.notified().await;
    let other = delivered(
        reflect_and_wait(
            &client,
            "release-review",
            Invocation::new(inv(), op()),
            ReflectOptions::new().model(Arc::new(review_model())),
        )
        .await,
    );
    assert_eq!(other.payload, json!({"summary": "ship it"}));
    gate.gate.notify_one();
    gate.entered.notified().await;
    gate.gate.notify_one();
    delivered(rx.await.ok());
}

async fn packaged_generalisations_searches_related_memory_first_and_writes_to_global<S: Storage>(
    client: MemoryClient<S>,
) {
    let op = op();
    let word = crate::client_contract::word();
    let observed = format!("Ada: releases on Friday go badly {word}");
    let written = client
        .ingest(&Ingest::new(
            inv(),
            &op,
            "personal-chat",
            Content::conversation(observed.clone()),
        ))
        .await
        .unwrap();
    let model = ScriptedModel::new()
        .answer(
            "step_inspect-world",
            json!({"inspection": "Friday releases fail."}),
        )
        .answer(
            "step_evolve-generalisations",
            json!({"generalisations": [
                {"content": "Avoid Friday releases.", "level": 1, "evolves_from": []}
            ]}),
        );
    let id = inv();
    let artefact = delivered(
        reflect_and_wait(
            &client,
            "generalisations",
            Invocation::new(&id, op.clone()).representation(Representation::new(
                "turn-2",
                "personal-chat",
                Content::conversation(format!("Ada: another bad Friday {word}")),
                json!({}),
            )),
            ReflectOptions::new().model(Arc::new(model.clone())),
        )
        .await,
    );
    assert_eq!(
        artefact.payload["generalisations"][0]["content"],
        "Avoid Friday releases."
    );
    // The related observation was shown to the first step, apart from the
    // representations.
    let first = &model.calls()[0].messages[1].content;
    assert!(first.contains("related_memory"), "{first}");
    assert!(first.contains(&observed), "{first}");
    assert_eq!(written.len(), 1);
    let stored = client
        .get_episode(&EpisodeRef::new(
            op.clone(),
            "global",
            artefact_uuid(op.as_str(), &id, "generalisations"),
        ))
        .await
        .unwrap();
    assert!(stored.is_some());
}

async fn packaged_erl_writes_to_the_operators_personal_graph<S: Storage>(client: MemoryClient<S>) {
    let op = op();
    let id = inv();
    let model = ScriptedModel::new()
        .answer(
            "step_inspect-reasoning",
            json!({"reasoning_assessment": {"problem_kind": "flaky test", "approach": "bisect", "outcome": "found"}}),
        )
        .answer(
            "step_derive-lesson",
            json!({"learning_candidate": {"problem_kind": "flaky test", "approach": "bisect", "success": true, "lesson": "bisect first"}}),
        )
        .answer(
            "step_synthesise-artefact",
            json!({"problem_kind": "flaky test", "approach": "bisect", "success": true, "lesson": "Bisect first."}),
        );
    let artefact = delivered(
        reflect_and_wait(
            &client,
            "erl",
            Invocation::new(&id, op.clone()),
            ReflectOptions::new().model(Arc::new(model)),
        )
        .await,
    );
    let keys: Vec<&String> = artefact.payload.as_object().unwrap().keys().collect();
    assert_eq!(keys.len(), 4);
    let stored = client
        .get_episode(&EpisodeRef::new(
            op.clone(),
            "personal",
            artefact_uuid(op.as_str(), &id, "erl"),
        ))
        .await
        .unwrap()
        .expect("stored in personal/<operator>");
    assert_eq!(stored.writer, Some(Writer::Reflection("erl".into())));
}

// --- one client only ---------------------------------------------------------------

#[test]
fn reflection_declarations_are_checked_when_the_client_is_built() {
    let step = || Step::new("s", "Do.").typed("x", "string");
    let e = |r: Reflection| {
        InMemoryClient::with_config(RuntimeConfig::new().reflection(r))
            .unwrap_err()
            .to_string()
    };
    let s = e(Reflection::named("r").step(step()));
    assert!(
        s.contains("`reflections[r].outputs`") && s.contains("no Destination output"),
        "{s}"
    );
    let s = e(Reflection::new("r", "global")
        .output(ReflectionOutput::destination("personal"))
        .step(step()));
    assert!(s.contains("2 Destination outputs"), "{s}");
    let s = e(Reflection::new("erl", "global").step(step()));
    assert!(s.contains("reserved for a packaged Reflection"), "{s}");
    let s = e(Reflection::new("a [lens: b]", "global").step(step()));
    assert!(
        s.contains("reflections[a [lens: b]].name") || s.contains("delimiter"),
        "{s}"
    );
    let s = e(Reflection::new("r", "nowhere").step(step()));
    assert!(s.contains("names unknown Destination `nowhere`"), "{s}");
}

#[tokio::test]
async fn the_native_client_answers_with_its_engines_model_by_default() {
    let r = Rules::narrator();
    let model = review_model().respond_with(move |req| answer(&r, req));
    let engine = Engine::new(
        common::db().await,
        Arc::new(model.clone()),
        Arc::new(CountingEmbedder::new()),
    );
    let client =
        NativeClient::from_parts(Runtime::new(config()).unwrap(), NativeStorage::new(engine));
    let artefact = delivered(
        reflect_and_wait(
            &client,
            "release-review",
            Invocation::new(inv(), op()),
            ReflectOptions::new(),
        )
        .await,
    );
    assert_eq!(artefact.payload, json!({"summary": "ship it"}));
    assert_eq!(model.calls_for("step_review").len(), 1);
    // The twin has no model of its own: the submission says so at once.
    let err = twin(config())
        .reflect(
            "release-review",
            Invocation::new(inv(), op()),
            ReflectOptions::new(),
        )
        .await
        .unwrap_err();
    assert!(
        err.to_string().contains("`options.inference` is required"),
        "{err}"
    );
}

/// The model a Reflection is answered with by default is the client's, not the
/// storage's: any client given one (`with_language_model`) answers with it, and a
/// second is refused.
#[tokio::test]
async fn a_client_given_a_language_model_answers_with_it_and_refuses_a_second() {
    let model = review_model();
    let client = InMemoryClient::with_config(config())
        .unwrap()
        .with_language_model(Arc::new(model.clone()))
        .unwrap();
    let artefact = delivered(
        reflect_and_wait(
            &client,
            "release-review",
            Invocation::new(inv(), op()),
            ReflectOptions::new(),
        )
        .await,
    );
    assert_eq!(artefact.payload, json!({"summary": "ship it"}));
    assert_eq!(model.calls_for("step_review").len(), 1);
    let err = client
        .clone()
        .with_language_model(Arc::new(review_model()))
        .unwrap_err();
    assert!(
        err.to_string().contains("`language_model` is already set"),
        "{err}"
    );
}

/// A storage whose writes fail with a given error (reads go to the twin's storage).
struct FailingWrites {
    inner: Arc<InMemoryStorage>,
    error: fn() -> Error,
    writes: AtomicUsize,
    fail_first: usize,
    /// When set, every write first waits here (a process about to be killed).
    gate: Option<Arc<Gated>>,
}

#[async_trait]
impl Storage for FailingWrites {
    async fn add_episode(
        &self,
        episode: gralkor::storage::NewEpisode,
    ) -> Result<gralkor::storage::StoredEpisode> {
        if let Some(gate) = &self.gate {
            gate.entered.notify_one();
            gate.gate.notified().await;
        }
        if self.writes.fetch_add(1, Ordering::SeqCst) < self.fail_first {
            return Err((self.error)());
        }
        self.inner.add_episode(episode).await
    }
    async fn search(
        &self,
        graphs: &[GraphId],
        query: &gralkor::storage::GraphQuery,
    ) -> Result<Vec<Vec<gralkor::storage::ScoredHit>>> {
        self.inner.search(graphs, query).await
    }
    async fn replace_graph(
        &self,
        graph: &GraphId,
        lens: &str,
        replacement: &gralkor::lens::Graph,
    ) -> Result<()> {
        self.inner.replace_graph(graph, lens, replacement).await
    }
    async fn get_episode(
        &self,
        graph: &GraphId,
        uuid: uuid::Uuid,
    ) -> Result<Option<gralkor::client::EpisodeRecord>> {
        self.inner.get_episode(graph, uuid).await
    }
    async fn remove_episode(&self, graph: &GraphId, uuid: uuid::Uuid) -> Result<bool> {
        self.inner.remove_episode(graph, uuid).await
    }
    async fn build_indices(&self) -> Result<()> {
        Ok(())
    }
    async fn build_communities(&self, graph: &GraphId) -> Result<gralkor::client::CommunityCounts> {
        self.inner.build_communities(graph).await
    }
}

fn failing(error: fn() -> Error, fail_first: usize) -> MemoryClient<FailingWrites> {
    MemoryClient::with_storage(
        Runtime::new(config()).unwrap(),
        FailingWrites {
            inner: Arc::new(InMemoryStorage::new()),
            error,
            writes: AtomicUsize::new(0),
            fail_first,
            gate: None,
        },
    )
}

#[tokio::test]
async fn delivery_retries_5xx_and_an_abandoned_delivery_carries_the_artefact() {
    let clock = ManualClock::new();
    let client = failing(|| status(503), 2);
    let artefact = delivered(
        reflect_and_wait(
            &client,
            "release-review",
            Invocation::new(inv(), op()),
            ReflectOptions::new()
                .model(Arc::new(review_model()))
                .clock(Arc::new(clock.clone())),
        )
        .await,
    );
    assert_eq!(
        clock.sleeps(),
        vec![Duration::from_secs(1), Duration::from_secs(2)]
    );
    assert_eq!(client.storage().writes.load(Ordering::SeqCst), 3);
    assert_eq!(artefact.payload, json!({"summary": "ship it"}));

    let client = failing(|| status(422), usize::MAX);
    let done = reflect_and_wait(
        &client,
        "release-review",
        Invocation::new(inv(), op()),
        ReflectOptions::new().model(Arc::new(review_model())),
    )
    .await
    .unwrap();
    match done.outcome {
        Outcome::Abandoned {
            stage: Stage::Delivery,
            artefact: Some(a),
            reason,
        } => {
            assert_eq!(a.payload, json!({"summary": "ship it"}));
            assert!(reason.contains("422"), "{reason}");
        }
        other => panic!("{other:?}"),
    }
    assert_eq!(client.storage().writes.load(Ordering::SeqCst), 1);
}

// --- reading artefacts ----------------------------------------------------------------

/// A Reflection writing to a fresh application Destination (its own graph), so
/// malformed or conflicting episodes written on purpose reach no other test.
fn scratch() -> (RuntimeConfig, String) {
    let dest = format!("refl-{}", crate::client_contract::word());
    let config = RuntimeConfig::new().destination(dest.clone()).reflection(
        Reflection::new("scratch", dest.clone())
            .step(Step::new("write", "Write it.").typed("note", "string")),
    );
    (config, dest)
}

macro_rules! both_scratch {
    ($($name:ident),* $(,)?) => {$(
        mod $name {
            #[tokio::test]
            async fn in_memory() {
                let (config, dest) = super::scratch();
                super::$name(super::twin(config), dest).await
            }
            #[tokio::test]
            async fn native() {
                let (config, dest) = super::scratch();
                super::$name(super::native(config).await, dest).await
            }
        }
    )*};
}

both_scratch!(
    artefact_search_finds_delivered_artefacts_by_query_and_by_id,
    episode_results_of_reflection_episodes_carry_the_artefact_and_lens_text_stays_text,
    a_malformed_reflection_body_is_invalid_reflection_artefact,
    a_disagreeing_duplicate_under_a_selected_id_is_a_conflict,
    facts_from_an_artefact_name_the_reflection_as_their_source,
);

fn note_model(note: &str) -> ScriptedModel {
    ScriptedModel::new().answer("step_write", json!({ "note": note }))
}

async fn reflect_note<S: Storage>(
    client: &MemoryClient<S>,
    op: &OperatorId,
    note: &str,
) -> Artefact {
    delivered(
        reflect_and_wait(
            client,
            "scratch",
            Invocation::new(inv(), op.clone()),
            ReflectOptions::new().model(Arc::new(note_model(note))),
        )
        .await,
    )
}

fn artefacts(results: Vec<gralkor::client::SearchResult>) -> Vec<Artefact> {
    results
        .into_iter()
        .map(|r| match r.hit {
            gralkor::client::Hit::Artefact(a) => a,
            other => panic!("an artefact search returned {other:?}"),
        })
        .collect()
}

async fn artefact_search_finds_delivered_artefacts_by_query_and_by_id<S: Storage>(
    client: MemoryClient<S>,
    dest: String,
) {
    let op = op();
    let word = crate::client_contract::word();
    let a = reflect_note(
        &client,
        &op,
        &format!("Deploys need a rollback plan {word}"),
    )
    .await;
    let b = reflect_note(&client, &op, "Unrelated lunch notes").await;
    let search = |q: &str| gralkor::client::Search::new(&op, q).destinations([dest.as_str()]);
    let found = artefacts(client.search(&search(&word).artefacts(None)).await.unwrap());
    assert_eq!(found.first(), Some(&a), "{found:?}");
    // By id, with a blank query: exactly that artefact.
    let by_id = artefacts(
        client
            .search(&search("").artefacts(Some(b.id.clone())))
            .await
            .unwrap(),
    );
    assert_eq!(by_id, vec![b.clone()]);
    // An id narrows even when the query matches another artefact.
    let narrowed = artefacts(
        client
            .search(&search(&word).artefacts(Some(b.id.clone())))
            .await
            .unwrap(),
    );
    assert_eq!(narrowed, vec![b]);
    let none = artefacts(
        client
            .search(&search("").artefacts(Some(artefact_id("x", "y", "z"))))
            .await
            .unwrap(),
    );
    assert!(none.is_empty());
    // The limit applies to distinct artefacts.
    let one = artefacts(
        client
            .search(&search(&word).artefacts(None).max_results(1))
            .await
            .unwrap(),
    );
    assert_eq!(one.len(), 1);
}

async fn episode_results_of_reflection_episodes_carry_the_artefact_and_lens_text_stays_text<
    S: Storage,
>(
    client: MemoryClient<S>,
    dest: String,
) {
    let op = op();
    let word = crate::client_contract::word();
    let a = reflect_note(&client, &op, &format!("Pin the toolchain {word}")).await;
    let episodes: Vec<_> = client
        .search(&gralkor::client::Search::new(&op, &word).destinations([dest.as_str()]))
        .await
        .unwrap()
        .into_iter()
        .filter_map(|r| r.hit.as_episode().cloned())
        .collect();
    assert_eq!(episodes.len(), 1, "{episodes:?}");
    assert_eq!(episodes[0].artefact.as_ref(), Some(&a));
    assert_eq!(episodes[0].source_description, "reflection:scratch");
    // A Lens writing text that looks like an artefact: it stays text.
    let lookalike = a.body().to_string();
    client
        .ingest(&Ingest::new(
            inv(),
            &op,
            "personal-chat",
            Content::document(lookalike.clone()),
        ))
        .await
        .unwrap();
    let texts: Vec<_> = client
        .search(&gralkor::client::Search::new(&op, &word).destinations(["personal"]))
        .await
        .unwrap()
        .into_iter()
        .filter_map(|r| r.hit.as_episode().cloned())
        .collect();
    assert_eq!(texts.len(), 1, "{texts:?}");
    assert_eq!(texts[0].content, lookalike);
    assert_eq!(texts[0].artefact, None);
}

async fn a_malformed_reflection_body_is_invalid_reflection_artefact<S: Storage>(
    client: MemoryClient<S>,
    dest: String,
) {
    let op = op();
    let word = crate::client_contract::word();
    client
        .storage()
        .add_episode(gralkor::storage::NewEpisode::new(
            graph(&dest),
            Writer::Reflection("scratch".into()),
            Content::document(format!("not an artefact {word}")),
            "",
            None,
        ))
        .await
        .unwrap();
    let search = gralkor::client::Search::new(&op, &word).destinations([dest.as_str()]);
    for request in [search.clone(), search.artefacts(None)] {
        let err = client.search(&request).await.unwrap_err();
        assert!(
            matches!(&err, Error::InvalidReflectionArtefact { reflection } if reflection == "scratch"),
            "{err:?}"
        );
        assert!(err.to_string().contains("invalid_reflection_artefact"));
    }
}

async fn a_disagreeing_duplicate_under_a_selected_id_is_a_conflict<S: Storage>(
    client: MemoryClient<S>,
    dest: String,
) {
    let op = op();
    let word = crate::client_contract::word();
    let a = reflect_note(&client, &op, &format!("Review on Mondays {word}")).await;
    // A second episode (another uuid, as a legacy writer might have left) carrying
    // the same artefact id with different content.
    let disagreeing = Artefact::new(
        a.id.clone(),
        json!({"note": format!("Review on Fridays {word}")}),
    );
    client
        .storage()
        .add_episode(gralkor::storage::NewEpisode::new(
            graph(&dest),
            Writer::Reflection("scratch".into()),
            Content::structured(disagreeing.body()),
            "",
            None,
        ))
        .await
        .unwrap();
    let search = gralkor::client::Search::new(&op, &word).destinations([dest.as_str()]);
    let err = client.search(&search.artefacts(None)).await.unwrap_err();
    assert!(
        matches!(&err, Error::ArtefactConflict { id } if *id == a.id),
        "{err:?}"
    );
}

#[tokio::test]
async fn incomplete_artefacts_stay_hidden_until_delivery_completes_them() {
    let (config, dest) = scratch();
    // Written by a storage that does not extract: stored, never completed.
    let offline = NativeStorage::new(Engine::without_llm(
        common::db().await,
        Arc::new(CountingEmbedder::new()),
    ));
    let op = op();
    let id = inv();
    let reflection = Reflection::new("scratch", dest.clone())
        .step(Step::new("write", "Write it.").typed("note", "string"));
    let word = crate::client_contract::word();
    let artefact = Artefact::new(
        artefact_id(op.as_str(), &id, "scratch"),
        json!({"note": format!("Half written {word}")}),
    );
    deliver(&offline, &graph(&dest), &reflection, &artefact)
        .await
        .unwrap();
    let client = native(config).await;
    let by_id = gralkor::client::Search::new(&op, "")
        .destinations([dest.as_str()])
        .artefacts(Some(artefact.id.clone()));
    assert!(artefacts(client.search(&by_id).await.unwrap()).is_empty());
    // Resubmission resumes the stored episode's extraction without the chain of
    // thought, and the artefact appears.
    let unscripted = ScriptedModel::new();
    let again = delivered(
        reflect_and_wait(
            &client,
            "scratch",
            Invocation::new(&id, op.clone()),
            ReflectOptions::new().model(Arc::new(unscripted.clone())),
        )
        .await,
    );
    assert_eq!(again, artefact);
    assert!(unscripted.calls().is_empty());
    assert_eq!(
        artefacts(client.search(&by_id).await.unwrap()),
        vec![artefact]
    );
}

async fn facts_from_an_artefact_name_the_reflection_as_their_source<S: Storage>(
    client: MemoryClient<S>,
    dest: String,
) {
    let op = op();
    let word = crate::client_contract::word();
    reflect_note(&client, &op, &format!("Staging mirrors production {word}")).await;
    let results = client
        .search(
            &gralkor::client::Search::new(&op, &word)
                .destinations([dest.as_str()])
                .result_type(gralkor::client::ResultType::Facts { edge_types: vec![] }),
        )
        .await
        .unwrap();
    let facts: Vec<_> = results
        .iter()
        .filter_map(|r| r.hit.as_fact().cloned())
        .collect();
    assert!(!facts.is_empty());
    for f in &facts {
        assert!(
            f.sources
                .iter()
                .all(|s| s.writer == Some(Writer::Reflection("scratch".into()))),
            "{f:?}"
        );
    }
    let shown = gralkor::agent::format::present_facts(&results, 65_536).unwrap();
    assert!(shown.contains("Reflection: scratch"), "{shown}");
}

#[tokio::test]
async fn prior_generalisations_are_supplied_apart_from_observations_in_memory() {
    let client = twin(config());
    let op = op();
    let word = crate::client_contract::word();
    let model = ScriptedModel::new()
        .answer("step_inspect-world", json!({"inspection": "Nothing new."}))
        .answer(
            "step_evolve-generalisations",
            json!({"generalisations": [
                {"content": format!("Rollbacks need rehearsal {word}"), "level": 1, "evolves_from": []}
            ]}),
        );
    let representation = || {
        Representation::new(
            "turn",
            "personal-chat",
            Content::conversation(format!("Ada: the rollback drill {word} went well")),
            json!({}),
        )
    };
    let first = delivered(
        reflect_and_wait(
            &client,
            "generalisations",
            Invocation::new(inv(), op.clone()).representation(representation()),
            ReflectOptions::new().model(Arc::new(model.clone())),
        )
        .await,
    );
    delivered(
        reflect_and_wait(
            &client,
            "generalisations",
            Invocation::new(inv(), op.clone()).representation(representation()),
            ReflectOptions::new().model(Arc::new(model.clone())),
        )
        .await,
    );
    let calls = model.calls_for("step_inspect-world");
    assert_eq!(calls.len(), 2);
    let shown: Value = serde_json::from_str(&calls[1].messages[1].content).unwrap();
    let priors = &shown["related_memory"]["prior_generalisations"];
    assert_eq!(priors, &json!([first]), "{shown}");
    assert_eq!(shown["related_memory"]["observations"], json!([]));
    // The first invocation had none yet.
    let shown: Value = serde_json::from_str(&calls[0].messages[1].content).unwrap();
    assert_eq!(shown["related_memory"]["prior_generalisations"], json!([]));
}

#[tokio::test]
async fn a_kill_between_production_and_delivery_then_resubmission_yields_one_artefact() {
    let shared = Arc::new(InMemoryStorage::new());
    let storage = |gate: Option<Arc<Gated>>| FailingWrites {
        inner: shared.clone(),
        error: || status(500),
        writes: AtomicUsize::new(0),
        fail_first: 0,
        gate,
    };
    let (op, id) = (op(), inv());
    // The first process produces, then dies while its delivery is in flight.
    let gate = gated();
    let first =
        MemoryClient::with_storage(Runtime::new(config()).unwrap(), storage(Some(gate.clone())));
    let model = review_model();
    let (tx, rx) = oneshot::channel::<Completion>();
    first
        .reflect(
            "release-review",
            Invocation::new(&id, op.clone()),
            ReflectOptions::new()
                .model(Arc::new(model.clone()))
                .on_complete(move |c| {
                    let _ = tx.send(c);
                }),
        )
        .await
        .unwrap();
    gate.entered.notified().await;
    assert_eq!(model.calls().len(), 2, "produced");
    first.shutdown().await.unwrap();
    assert!(rx.await.is_err(), "no callback from the killed process");
    let uuid = artefact_uuid(op.as_str(), &id, "release-review");
    assert_eq!(
        shared
            .get_episode(&graph(review_dest()), uuid)
            .await
            .unwrap(),
        None,
        "nothing was delivered"
    );
    // The replacement process resubmits the same invocation.
    let second = MemoryClient::with_storage(Runtime::new(config()).unwrap(), storage(None));
    let artefact = delivered(
        reflect_and_wait(
            &second,
            "release-review",
            Invocation::new(&id, op.clone()),
            ReflectOptions::new().model(Arc::new(review_model())),
        )
        .await,
    );
    assert_eq!(artefact.id, uuid.to_string());
    let stored: Vec<_> = shared
        .stored_descriptions(review_dest())
        .into_iter()
        .filter(|d| d == "reflection:release-review")
        .collect();
    assert_eq!(stored.len(), 1, "one artefact episode");
    let found = artefacts(
        second
            .search(
                &gralkor::client::Search::new(&op, "")
                    .destinations([review_dest()])
                    .artefacts(Some(artefact.id.clone())),
            )
            .await
            .unwrap(),
    );
    assert_eq!(found, vec![artefact]);
    assert!(
        shared
            .get_episode(&graph(review_dest()), uuid)
            .await
            .unwrap()
            .is_some()
    );
}

#[test]
fn json_options_accept_only_the_allowed_set() {
    ReflectOptions::from_json(&json!({})).unwrap();
    ReflectOptions::from_json(&json!({"tool_context": {"a": 1}, "max_tool_rounds": 2})).unwrap();
    let e = |v: Value| ReflectOptions::from_json(&v).unwrap_err().to_string();
    let s = e(json!({"inference": "x", "tools": []}));
    assert!(
        s.contains("unsupported reflection options: inference, tools"),
        "{s}"
    );
    assert!(
        e(json!({"max_tool_rounds": 0})).contains("`options.max_tool_rounds` must be at least 1")
    );
    assert!(e(json!({"max_tool_rounds": -1})).contains("must be a positive integer"));
    assert!(
        e(json!({"tool_context": []})).contains("`options.tool_context` must be a JSON object")
    );
    assert!(e(json!([])).contains("`options` must be a JSON object"));
}

async fn reflect_through_an_arc_dyn_client_on_both_clients<S: Storage>(client: MemoryClient<S>) {
    let client: Arc<dyn Client> = Arc::new(client);
    let (op, id) = (op(), inv());
    let (tx, rx) = oneshot::channel();
    let returned = client
        .reflect(
            "release-review",
            Invocation::new(&id, op.clone()),
            ReflectOptions::new()
                .model(Arc::new(review_model()))
                .on_complete(move |c| {
                    let _ = tx.send(c);
                }),
        )
        .await
        .unwrap();
    assert_eq!(returned, id);
    client.await_reflections().await;
    let artefact = delivered(rx.await.ok());
    assert_eq!(artefact.payload, json!({"summary": "ship it"}));
    let episode = client
        .get_episode(&EpisodeRef::new(
            op.clone(),
            review_dest(),
            artefact_uuid(op.as_str(), &id, "release-review"),
        ))
        .await
        .unwrap();
    assert!(episode.is_some(), "delivered through the trait");
}

#[tokio::test]
async fn the_twin_records_reflect_and_answers_a_canned_one() {
    use gralkor::client::{Call, Canned};
    let client = InMemoryClient::with_config(config()).unwrap();
    let (op, id) = (op(), inv());
    let ada = gralkor::access::Subject::person("ada").unwrap();
    let model = review_model();
    let invocation = Invocation::new(&id, op.clone()).subject(ada.clone());
    // Invalid: not recorded.
    assert!(
        client
            .reflect(
                "release-review",
                Invocation::new(" ", op.clone()),
                ReflectOptions::new().model(Arc::new(model.clone())),
            )
            .await
            .is_err()
    );
    assert!(client.calls().is_empty());
    // Canned: recorded, answered, nothing run or delivered, no callback.
    client.respond(Canned::Reflect(Ok("canned".into())));
    let called = Arc::new(AtomicUsize::new(0));
    let counted = called.clone();
    let answered = client
        .reflect(
            "release-review",
            invocation.clone(),
            ReflectOptions::new()
                .model(Arc::new(model.clone()))
                .on_complete(move |_| {
                    counted.fetch_add(1, Ordering::SeqCst);
                }),
        )
        .await
        .unwrap();
    assert_eq!(answered, "canned");
    client.await_reflections().await;
    assert_eq!(called.load(Ordering::SeqCst), 0);
    assert!(model.calls().is_empty(), "nothing ran");
    match &client.calls()[..] {
        [
            Call::Reflect {
                name,
                invocation: recorded,
            },
        ] => {
            assert_eq!(name, "release-review");
            assert_eq!(recorded, &invocation);
            assert_eq!(recorded.subject, Some(ada));
        }
        other => panic!("{other:?}"),
    }
    // The next one runs for real.
    let artefact = delivered(
        reflect_and_wait(
            &client,
            "release-review",
            invocation,
            ReflectOptions::new().model(Arc::new(model.clone())),
        )
        .await,
    );
    assert_eq!(artefact.payload, json!({"summary": "ship it"}));
    assert_eq!(client.calls().len(), 2);
}

#[test]
fn an_invocation_serialises_with_its_subject_and_without_one() {
    let op = OperatorId::new("ada").unwrap();
    let plain = Invocation::new("i", op.clone());
    let json = serde_json::to_value(&plain).unwrap();
    assert!(json.get("subject").is_none(), "{json}");
    assert_eq!(serde_json::from_value::<Invocation>(json).unwrap(), plain);
    let ada = gralkor::access::Subject::person("ada").unwrap();
    let with = plain.subject(ada.clone());
    let json = serde_json::to_value(&with).unwrap();
    assert_eq!(
        json["subject"],
        serde_json::to_value(&ada).unwrap(),
        "{json}"
    );
    assert_eq!(serde_json::from_value::<Invocation>(json).unwrap(), with);
}
