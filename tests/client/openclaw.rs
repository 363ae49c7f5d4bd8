//! The OpenClaw-compatible tool set (`gralkor::agent::openclaw`, test-trees/tools.md),
//! on both clients: the twin, and the offline native client (an embedder, no language
//! model: fact searches answer from the episodes) on the shared embedded FalkorDB.

use crate::common;

use std::sync::Arc;

use common::ingest::CountingEmbedder;
use gralkor::NativeStorage;
use gralkor::access::{Authorizer, EmbeddedAuthorizer, InMemoryAuthorizer, Relationship, Subject};
use gralkor::agent::capture::CaptureRoute;
use gralkor::agent::hooks::{AgentCapture, AutoCapture};
use gralkor::agent::openclaw::ToolSet;
use gralkor::agent::tools::{ForgetTarget, ToolContext};
use gralkor::client::{Client, InMemoryClient, NativeClient, OperatorId};
use gralkor::client::{Content, MemoryAdd, Search};
use gralkor::graph::Engine;
use gralkor::runtime::{Runtime, RuntimeConfig};
use gralkor::{Error, Result};
use serde_json::{Value, json};

/// A runtime with a fresh application Destination (the shared server outlives a test).
fn runtime() -> (Runtime, String) {
    let team = format!("team-{}", &uuid::Uuid::new_v4().simple().to_string()[..8]);
    (
        Runtime::new(RuntimeConfig::new().destination(team.clone())).unwrap(),
        team,
    )
}

#[track_caller]
fn assert_invalid(result: Result<String>, field: &str) {
    match result {
        Err(Error::InvalidInput { field: f, rule }) => assert_eq!(f, field, "{rule}"),
        other => panic!("expected invalid `{field}`, got {other:?}"),
    }
}

#[test]
fn the_openclaw_tools_are_named_as_the_plugin_and_strict_mode_compatible() {
    let tools = ToolSet::OpenClaw.tools();
    let names: Vec<&str> = tools.iter().map(|t| t.name.as_str()).collect();
    assert_eq!(
        names,
        [
            "memory_recall",
            "memory_store",
            "memory_forget",
            "memory_status"
        ]
    );
    for t in &tools {
        let p = &t.parameters;
        assert_eq!(p["additionalProperties"], false, "{}", t.name);
        let properties: Vec<&String> = p["properties"].as_object().unwrap().keys().collect();
        let required: Vec<&str> = p["required"]
            .as_array()
            .unwrap()
            .iter()
            .map(|v| v.as_str().unwrap())
            .collect();
        for key in properties {
            assert!(
                required.contains(&key.as_str()),
                "{}.{key} is required",
                t.name
            );
        }
    }
    let store = &tools[1].parameters["properties"];
    for optional in ["source_description", "involves", "group_id", "longTerm"] {
        assert!(
            store[optional]["type"]
                .as_array()
                .unwrap()
                .contains(&json!("null")),
            "{optional} is nullable"
        );
    }
    let id = uuid::Uuid::new_v4();
    assert_eq!(
        ToolSet::OpenClaw
            .forget_target(&json!({"episode_id": id.to_string()}))
            .unwrap(),
        ForgetTarget::Episode(id, None)
    );
}

fn store_args(content: &str, group: Option<&str>) -> Value {
    json!({"content": content, "source_description": null, "involves": ["agent:bot", "ada"],
           "group_id": group, "longTerm": null})
}

async fn recall_and_store(client: Arc<dyn Client>, team: &str, exact_matching: bool) {
    let op = OperatorId::new(format!("op-{}", uuid::Uuid::new_v4())).unwrap();
    let ctx = ToolContext::new(op);
    let set = ToolSet::OpenClaw;
    for (i, text) in ["first", "second", "third"].iter().enumerate() {
        let group = if i == 1 { Some(team) } else { None };
        let ack = set
            .call(
                client.as_ref(),
                &ctx,
                "memory_store",
                &store_args(&format!("Zqkiwi {text} note."), group),
            )
            .await
            .unwrap();
        assert_eq!(ack, "Ingesting.");
        // One at a time, so their times order them.
        client.await_background_writes().await;
    }
    let all = set
        .call(
            client.as_ref(),
            &ctx,
            "memory_recall",
            &json!({"query": "zqkiwi", "limit": null, "scope": null}),
        )
        .await
        .unwrap();
    assert!(all.starts_with("Facts:\n"), "{all}");
    let order: Vec<usize> = ["third", "second", "first"]
        .iter()
        .map(|w| all.find(&format!("Zqkiwi {w} note.")).expect(w))
        .collect();
    assert!(order.windows(2).all(|w| w[0] < w[1]), "newest first: {all}");
    // Described `conversation` by default; a direct source shows the caller's text.
    assert!(
        all.contains("(source: document — conversation; episode: "),
        "{all}"
    );

    let two = set
        .call(
            client.as_ref(),
            &ctx,
            "memory_recall",
            &json!({"query": "zqkiwi", "limit": 2, "scope": "long-term"}),
        )
        .await
        .unwrap();
    assert_eq!(
        two.lines().filter(|l| l.starts_with("- ")).count(),
        2,
        "{two}"
    );
    assert!(!two.contains("Zqkiwi first note."), "{two}");

    if exact_matching {
        let nothing = set
            .call(
                client.as_ref(),
                &ctx,
                "memory_recall",
                &json!({"query": "zqnothingatall", "limit": null, "scope": "all"}),
            )
            .await
            .unwrap();
        assert_eq!(nothing, "No relevant memories found.");
    }

    // No session in the context: no session group to read or write.
    assert_invalid(
        set.call(
            client.as_ref(),
            &ctx,
            "memory_recall",
            &json!({"query": "x", "limit": null, "scope": "session"}),
        )
        .await,
        "memory_recall.arguments.scope",
    );
    assert_invalid(
        set.call(
            client.as_ref(),
            &ctx,
            "memory_recall",
            &json!({"query": "x", "limit": 0, "scope": null}),
        )
        .await,
        "memory_recall.arguments.limit",
    );
    let mut short_term = store_args("x", None);
    short_term["longTerm"] = json!(false);
    assert_invalid(
        set.call(client.as_ref(), &ctx, "memory_store", &short_term)
            .await,
        "memory_store.arguments.longTerm",
    );
    assert_invalid(
        set.call(
            client.as_ref(),
            &ctx,
            "memory_store",
            &store_args("x", Some("nowhere")),
        )
        .await,
        "route.destination",
    );
    assert_invalid(
        set.call(client.as_ref(), &ctx, "memory_search", &json!({}))
            .await,
        "tool",
    );
}

#[tokio::test]
async fn the_openclaw_tool_set_recalls_and_stores_on_the_twin() {
    let (runtime, team) = runtime();
    recall_and_store(Arc::new(InMemoryClient::with_runtime(runtime)), &team, true).await;
}

#[tokio::test]
async fn the_openclaw_tool_set_recalls_and_stores_on_the_native_client() {
    let engine = Engine::without_llm(common::db().await, Arc::new(CountingEmbedder::new()));
    let (runtime, team) = runtime();
    // Hybrid search may rank anything by meaning: no "finds nothing" check here.
    recall_and_store(
        Arc::new(NativeClient::from_parts(
            runtime,
            NativeStorage::new(engine),
        )),
        &team,
        false,
    )
    .await;
}

// the OpenClaw tool set › session groups: `longTerm: false` writes to the context's
// session group, `scope` reads long-term memory, the session group, or both

fn recall_args(query: &str, scope: &str) -> Value {
    json!({"query": query, "limit": null, "scope": scope})
}

async fn session_memory_stays_in_the_sessions_group(client: Arc<dyn Client>) {
    let op = OperatorId::new(format!("op-{}", uuid::Uuid::new_v4())).unwrap();
    let id = uuid::Uuid::new_v4().simple().to_string();
    let ctx = ToolContext::new(op.clone()).session(format!("s1-{id}"));
    let other = ToolContext::new(op.clone()).session(format!("s2-{id}"));
    let set = ToolSet::OpenClaw;
    let mut short = store_args("Zqsess tram ticket note.", None);
    short["involves"] = Value::Null;
    short["longTerm"] = json!(false);
    set.call(client.as_ref(), &ctx, "memory_store", &short)
        .await
        .unwrap();
    client.await_background_writes().await;
    // Promotion: the default `longTerm: true` writes to long-term memory.
    let mut long = store_args("Zqlong tram pass note.", None);
    long["involves"] = Value::Null;
    set.call(client.as_ref(), &ctx, "memory_store", &long)
        .await
        .unwrap();
    client.await_background_writes().await;

    // Stored where the seed says: the session note in `session-<id>` only.
    let in_group = client
        .search(&Search::new(&op, "Zqsess tram").destinations([format!("session-s1-{id}")]))
        .await
        .unwrap();
    assert!(
        in_group.iter().any(|r| r
            .hit
            .as_episode()
            .is_some_and(|e| e.content.contains("Zqsess"))),
        "{in_group:?}"
    );
    let personal = client
        .search(&Search::new(&op, "Zqsess tram").destinations(["personal"]))
        .await
        .unwrap();
    assert!(
        !personal.iter().any(|r| r
            .hit
            .as_episode()
            .is_some_and(|e| e.content.contains("Zqsess"))),
        "{personal:?}"
    );

    let session = set
        .call(
            client.as_ref(),
            &ctx,
            "memory_recall",
            &recall_args("zqsess zqlong tram", "session"),
        )
        .await
        .unwrap();
    assert!(session.contains("Zqsess tram ticket note."), "{session}");
    assert!(!session.contains("Zqlong"), "{session}");
    let long_term = set
        .call(
            client.as_ref(),
            &ctx,
            "memory_recall",
            &recall_args("zqsess zqlong tram", "long-term"),
        )
        .await
        .unwrap();
    assert!(long_term.contains("Zqlong tram pass note."), "{long_term}");
    assert!(!long_term.contains("Zqsess"), "{long_term}");
    let all = set
        .call(
            client.as_ref(),
            &ctx,
            "memory_recall",
            &recall_args("zqsess zqlong tram", "all"),
        )
        .await
        .unwrap();
    assert!(
        all.contains("Zqsess tram ticket note.") && all.contains("Zqlong tram pass note."),
        "{all}"
    );
    assert_eq!(all.matches("Zqlong tram pass note.").count(), 1, "{all}");
    // Another conversation's session scope does not read this one's group.
    let theirs = set
        .call(
            client.as_ref(),
            &other,
            "memory_recall",
            &recall_args("zqsess zqlong tram", "all"),
        )
        .await
        .unwrap();
    assert!(!theirs.contains("Zqsess"), "{theirs}");

    // `longTerm: false` with `group_id` names the argument.
    let mut both = short.clone();
    both["group_id"] = json!("global");
    assert_invalid(
        set.call(client.as_ref(), &ctx, "memory_store", &both).await,
        "memory_store.arguments.longTerm",
    );
}

#[tokio::test]
async fn session_memory_stays_in_the_sessions_group_on_the_twin() {
    session_memory_stays_in_the_sessions_group(Arc::new(InMemoryClient::new())).await;
}

#[tokio::test]
async fn session_memory_stays_in_the_sessions_group_on_the_native_client() {
    let engine = Engine::without_llm(common::db().await, Arc::new(CountingEmbedder::new()));
    session_memory_stays_in_the_sessions_group(Arc::new(NativeClient::from_parts(
        Runtime::new(RuntimeConfig::new()).unwrap(),
        NativeStorage::new(engine),
    )))
    .await;
}

// the OpenClaw tool set › session groups are exclusive: the first writer claims the
// group; another subject can neither write nor read it until made a member

async fn a_session_group_is_exclusive_to_its_members(
    client: Arc<dyn Client>,
    authz: Arc<dyn Authorizer>,
) {
    let op = OperatorId::new(format!("op-{}", uuid::Uuid::new_v4())).unwrap();
    let session = format!("s-{}", uuid::Uuid::new_v4().simple());
    let (ada, bob) = (
        Subject::agent(format!("ada-{session}")).unwrap(),
        Subject::agent(format!("bob-{session}")).unwrap(),
    );
    let ada_ctx = ToolContext::new(op.clone())
        .session(session.clone())
        .subject(ada.clone());
    let bob_ctx = ToolContext::new(op.clone())
        .session(session.clone())
        .subject(bob.clone());
    let set = ToolSet::OpenClaw;
    let mut short = store_args("Zqexcl secret plan note.", None);
    short["involves"] = Value::Null;
    short["longTerm"] = json!(false);
    set.call(client.as_ref(), &ada_ctx, "memory_store", &short)
        .await
        .unwrap();
    client.await_background_writes().await;

    match set
        .call(client.as_ref(), &bob_ctx, "memory_store", &short)
        .await
    {
        Err(Error::PermissionDenied { subject, .. }) => assert_eq!(subject, bob.to_string()),
        other => panic!("expected bob refused, got {other:?}"),
    }
    let query = recall_args("zqexcl secret plan", "session");
    let seen = set
        .call(client.as_ref(), &ada_ctx, "memory_recall", &query)
        .await
        .unwrap();
    assert!(seen.contains("Zqexcl secret plan note."), "{seen}");
    let hidden = set
        .call(client.as_ref(), &bob_ctx, "memory_recall", &query)
        .await
        .unwrap();
    assert!(!hidden.contains("Zqexcl"), "{hidden}");

    // An explicit membership (`gralkor add-member`) lets bob in.
    authz
        .write_relationships(&[Relationship::member(format!("session-{session}"), &bob).unwrap()])
        .await
        .unwrap();
    let shared = set
        .call(client.as_ref(), &bob_ctx, "memory_recall", &query)
        .await
        .unwrap();
    assert!(shared.contains("Zqexcl secret plan note."), "{shared}");
}

#[tokio::test]
async fn a_session_group_is_exclusive_to_its_members_on_the_twin() {
    let authz: Arc<dyn Authorizer> = Arc::new(InMemoryAuthorizer::new());
    let client = InMemoryClient::new()
        .with_authorizer(authz.clone())
        .unwrap();
    a_session_group_is_exclusive_to_its_members(Arc::new(client), authz).await;
}

#[tokio::test]
async fn a_session_group_is_exclusive_to_its_members_on_the_native_client() {
    let g = common::TestGraph::new("openclaw-session").await;
    let authz: Arc<dyn Authorizer> =
        Arc::new(EmbeddedAuthorizer::in_graph(g.db.clone(), g.name.clone()));
    let engine = Engine::without_llm(g.db.clone(), Arc::new(CountingEmbedder::new()));
    let client = NativeClient::from_parts(
        Runtime::new(RuntimeConfig::new()).unwrap(),
        NativeStorage::new(engine),
    )
    .with_authorizer(authz.clone())
    .unwrap();
    a_session_group_is_exclusive_to_its_members(Arc::new(client), authz).await;
}

// the OpenClaw tool set › the default group: `memory_store` without `group_id` writes
// to the deployment's default group, whose configured members were written at startup

async fn memory_store_without_group_id_writes_to_the_default_group(
    client: Arc<dyn Client>,
    authz: Arc<dyn Authorizer>,
    team: &str,
) {
    use gralkor::destination::DefaultGroup;
    let op = OperatorId::new(format!("op-{}", uuid::Uuid::new_v4())).unwrap();
    let tag = uuid::Uuid::new_v4().simple().to_string();
    let (bot, eve) = (
        Subject::agent(format!("bot-{tag}")).unwrap(),
        Subject::agent(format!("eve-{tag}")).unwrap(),
    );
    // Startup: the configured member, with no `add-member`.
    let default = DefaultGroup::new(team).unwrap().member(bot.clone());
    assert_eq!(default.ensure_members(authz.as_ref()).await.unwrap(), 1);
    let ctx = |who: &Subject| {
        ToolContext::new(op.clone())
            .subject(who.clone())
            .default_group(default.name())
    };
    let set = ToolSet::OpenClaw;
    let mut note = store_args("Zqdflt harbour crane note.", None);
    note["involves"] = Value::Null;
    set.call(client.as_ref(), &ctx(&bot), "memory_store", &note)
        .await
        .unwrap();
    client.await_background_writes().await;
    let in_team = client
        .search(
            &Search::new(&op, "Zqdflt harbour crane")
                .destinations([team])
                .subject(bot.clone()),
        )
        .await
        .unwrap();
    assert!(
        in_team.iter().any(|r| r
            .hit
            .as_episode()
            .is_some_and(|e| e.content.contains("Zqdflt"))),
        "{in_team:?}"
    );
    // The default group is a group like any other: a subject not configured as its
    // member is refused `contribute` there.
    match set
        .call(client.as_ref(), &ctx(&eve), "memory_store", &note)
        .await
    {
        Err(Error::PermissionDenied {
            subject,
            permission,
            resource,
        }) => {
            assert_eq!(subject, eve.to_string());
            assert_eq!(permission, "contribute");
            assert_eq!(resource, format!("group:{team}"));
        }
        other => panic!("expected eve refused, got {other:?}"),
    }
    // A `group_id` still wins over the default group: bot is no member of `global`.
    let mut global = note.clone();
    global["group_id"] = json!("global");
    assert!(matches!(
        set.call(client.as_ref(), &ctx(&bot), "memory_store", &global)
            .await,
        Err(Error::PermissionDenied { resource, .. }) if resource == "group:global"
    ));
}

#[tokio::test]
async fn memory_store_without_group_id_writes_to_the_default_group_on_the_twin() {
    let (runtime, team) = runtime();
    let authz: Arc<dyn Authorizer> = Arc::new(InMemoryAuthorizer::new());
    let client = InMemoryClient::with_runtime(runtime)
        .with_authorizer(authz.clone())
        .unwrap();
    memory_store_without_group_id_writes_to_the_default_group(Arc::new(client), authz, &team).await;
}

#[tokio::test]
async fn memory_store_without_group_id_writes_to_the_default_group_on_the_native_client() {
    let g = common::TestGraph::new("openclaw-default").await;
    let authz: Arc<dyn Authorizer> =
        Arc::new(EmbeddedAuthorizer::in_graph(g.db.clone(), g.name.clone()));
    let engine = Engine::without_llm(g.db.clone(), Arc::new(CountingEmbedder::new()));
    let (runtime, team) = runtime();
    let client = NativeClient::from_parts(runtime, NativeStorage::new(engine))
        .with_authorizer(authz.clone())
        .unwrap();
    memory_store_without_group_id_writes_to_the_default_group(Arc::new(client), authz, &team).await;
}

// auto-capture › session-group mode: each session's turns go to its own group

async fn capture_in_session_group_mode_writes_to_the_sessions_group(
    kind: common::agent_memory::Kind,
) {
    let (client, buffer) = common::agent_memory::memory(kind, "openclaw-capture").await;
    let op = OperatorId::new(format!("op-{}", uuid::Uuid::new_v4())).unwrap();
    let session = format!("s-{}", uuid::Uuid::new_v4().simple());
    let hook = AgentCapture::new(
        buffer.clone(),
        op.clone(),
        "Susu",
        "Ada",
        CaptureRoute::default(),
        AutoCapture::new().session_groups(true),
    )
    .unwrap();
    let messages = [
        json!({"role": "user", "content": "Zqcap I moved to Porto."}),
        json!({"role": "assistant", "content": "Noted: Porto."}),
    ];
    assert!(hook.after_turn(Some(&session), &messages).await.unwrap());
    hook.end_of_agent(std::time::Duration::from_secs(30))
        .await
        .unwrap();
    let group = format!("session-{session}");
    let found = |dest: String| {
        let client = client.clone();
        let op = op.clone();
        async move {
            client
                .search(&Search::new(&op, "Zqcap Porto").destinations([dest]))
                .await
                .unwrap()
                .into_iter()
                .filter_map(|r| r.hit.as_episode().cloned())
                .filter(|e| e.content.contains("Zqcap"))
                .count()
        }
    };
    assert_eq!(found(group).await, 1);
    assert_eq!(found("personal".into()).await, 0);
    // A direct write to the group is the same Destination.
    client
        .memory_add(
            &MemoryAdd::new(&op, Content::document("Zqcap Porto has trams."))
                .to_destination(format!("session-{session}")),
        )
        .await
        .unwrap();
    client.await_background_writes().await;
    assert_eq!(found(format!("session-{session}")).await, 2);
}

#[tokio::test]
async fn capture_in_session_group_mode_writes_to_the_sessions_group_on_the_twin() {
    capture_in_session_group_mode_writes_to_the_sessions_group(common::agent_memory::Kind::Twin)
        .await;
}

#[tokio::test]
async fn capture_in_session_group_mode_writes_to_the_sessions_group_on_the_native_client() {
    capture_in_session_group_mode_writes_to_the_sessions_group(common::agent_memory::Kind::Native)
        .await;
}
