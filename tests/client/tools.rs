//! The memory tools as tool definitions and their handlers
//! (`gralkor::agent::tools`), on both clients. Mirrors `test-trees/tools.md`.

use std::sync::Arc;
use std::sync::atomic::Ordering;

use gralkor::Error;
use gralkor::agent::tools::{
    BuildCommunitiesArgs, BuildIndicesArgs, INGESTING, MemoryAddArgs, MemorySearchArgs,
    ToolContext, ToolDefinition, admin_tools, call_tool, force_memory_search_on_first_iteration,
    inspection_tools, memory_add_tool, memory_search_tool, memory_tools, strict_violations,
};
use gralkor::agent::{BLANK_QUERY_NON_RESULT, MemorySearch, format, memory_search};
use gralkor::client::{Call, Client, InMemoryClient, Search};
use gralkor::runtime::RuntimeConfig;
use serde::de::DeserializeOwned;
use serde_json::{Value, json};

use crate::recall::{GatedEmbedder, native, native_with, op};

// definitions › the schema of each tool's parameters matches its handler's argument type

/// The schema's type; for a nullable one (`[T, "null"]`), T.
fn type_of(schema: &Value) -> &str {
    match &schema["type"] {
        Value::String(t) => t,
        Value::Array(ts) => ts
            .iter()
            .filter_map(Value::as_str)
            .find(|t| *t != "null")
            .unwrap(),
        other => panic!("no type: {other}"),
    }
}

/// Whether the schema allows `null` (strict mode's optional property).
fn nullable(schema: &Value) -> bool {
    schema["type"]
        .as_array()
        .is_some_and(|ts| ts.contains(&json!("null")))
}

/// A value of the schema's type (the first enum value for an enum).
fn sample(schema: &Value) -> Value {
    if let Some(values) = schema["enum"].as_array() {
        return values[0].clone();
    }
    match type_of(schema) {
        "string" => json!("some text"),
        "array" => json!([sample(&schema["items"])]),
        "object" => json!({}),
        "integer" => json!(3),
        "boolean" => json!(true),
        other => panic!("no sample for {other}"),
    }
}

/// A value of another type than the schema's.
fn wrong(schema: &Value) -> Value {
    match type_of(schema) {
        "string" => json!(42),
        _ => json!("not that"),
    }
}

/// Checks, from the schema alone, that the argument type accepts exactly what the
/// schema describes: the required properties alone, every property, each enum value;
/// and refuses a missing required property, an unknown property and every wrongly
/// typed one (or a value outside an enum).
fn schema_matches<T: DeserializeOwned + std::fmt::Debug>(tool: &ToolDefinition) {
    let schema = &tool.parameters;
    assert_eq!(schema["type"], "object", "{}", tool.name);
    assert_eq!(schema["additionalProperties"], false, "{}", tool.name);
    let props = schema["properties"].as_object().unwrap();
    let required: Vec<&str> = schema["required"]
        .as_array()
        .map(|r| r.iter().map(|v| v.as_str().unwrap()).collect())
        .unwrap_or_default();
    for r in &required {
        assert!(
            props.contains_key(*r),
            "{}: required {r} not a property",
            tool.name
        );
    }
    let accepts = |v: &Value| serde_json::from_value::<T>(v.clone());
    let minimal: serde_json::Map<String, Value> = required
        .iter()
        .map(|r| (r.to_string(), sample(&props[*r])))
        .collect();
    accepts(&Value::Object(minimal.clone()))
        .unwrap_or_else(|e| panic!("{}: required only: {e}", tool.name));
    let full: serde_json::Map<String, Value> =
        props.iter().map(|(k, s)| (k.clone(), sample(s))).collect();
    accepts(&Value::Object(full.clone()))
        .unwrap_or_else(|e| panic!("{}: every property: {e}", tool.name));
    for r in &required {
        let mut missing = full.clone();
        missing.remove(*r);
        if nullable(&props[*r]) {
            // Optional: null and absent (a client that is not strict) both mean unset.
            accepts(&Value::Object(missing))
                .unwrap_or_else(|e| panic!("{}: without optional {r}: {e}", tool.name));
            let mut null = full.clone();
            null.insert(r.to_string(), Value::Null);
            accepts(&Value::Object(null))
                .unwrap_or_else(|e| panic!("{}: {r} null: {e}", tool.name));
        } else {
            assert!(
                accepts(&Value::Object(missing)).is_err(),
                "{}: accepted without {r}",
                tool.name
            );
        }
    }
    let mut extra = full.clone();
    extra.insert("not_a_parameter".into(), json!(1));
    assert!(
        accepts(&Value::Object(extra)).is_err(),
        "{}: extra",
        tool.name
    );
    for (k, s) in props {
        let mut bad = full.clone();
        bad.insert(k.clone(), wrong(s));
        assert!(
            accepts(&Value::Object(bad)).is_err(),
            "{}: accepted a wrong type for {k}",
            tool.name
        );
        if let Some(values) = s["enum"].as_array() {
            for v in values.iter().filter(|v| !v.is_null()) {
                let mut one = minimal.clone();
                one.insert(k.clone(), v.clone());
                accepts(&Value::Object(one))
                    .unwrap_or_else(|e| panic!("{}: {k} = {v}: {e}", tool.name));
            }
            let mut outside = minimal.clone();
            outside.insert(k.clone(), json!("not_one_of_them"));
            assert!(
                accepts(&Value::Object(outside)).is_err(),
                "{}: {k}",
                tool.name
            );
        }
        assert!(
            s["description"].as_str().is_some_and(|d| !d.is_empty()),
            "{}: {k} undescribed",
            tool.name
        );
    }
}

#[test]
fn each_tool_schema_matches_its_argument_type() {
    schema_matches::<MemorySearchArgs>(&memory_search_tool());
    schema_matches::<MemoryAddArgs>(&memory_add_tool());
    let admin = admin_tools();
    schema_matches::<BuildIndicesArgs>(&admin[0]);
    schema_matches::<BuildCommunitiesArgs>(&admin[1]);
}

// definitions › every schema is strict-mode compatible, checked by the strict checker

#[test]
fn every_tool_schema_is_strict_mode_compatible() {
    let all: Vec<ToolDefinition> = memory_tools()
        .into_iter()
        .chain(inspection_tools())
        .chain(admin_tools())
        .collect();
    assert_eq!(strict_violations(&all), Vec::<String>::new());
    for t in &all {
        let props = t.parameters["properties"].as_object().unwrap();
        let required = t.parameters["required"].as_array().unwrap();
        assert_eq!(required.len(), props.len(), "{}", t.name);
    }
}

#[test]
fn the_strict_checker_names_every_rule_a_schema_breaks() {
    let tool = |parameters: Value| -> Vec<ToolDefinition> {
        let mut t = memory_search_tool();
        t.parameters = parameters;
        vec![t]
    };
    let loose = tool(json!({
        "type": "object",
        "properties": {
            "query": {"type": "string"},
            "kind": {"type": ["string", "null"], "enum": ["a", "b"]},
            "tags": {"type": "array"},
            "inner": {"type": "object", "properties": {"x": {"type": "string"}}},
            "either": {"oneOf": [{"type": "string"}, {"type": "integer"}]},
            "n": {"type": "integer", "default": 3},
        },
        "required": ["query", "missing"],
    }));
    let found = strict_violations(&loose).join("\n");
    for expected in [
        "memory_search: must set `additionalProperties: false`",
        "memory_search.kind: is not in `required`",
        "memory_search.kind: is nullable but its `enum` has no null",
        "memory_search.tags: an array without `items`",
        "memory_search.inner: must set `additionalProperties: false`",
        "memory_search.inner.x: is not in `required`",
        "memory_search.either: uses `oneOf`",
        "memory_search.n: uses `default`",
        "memory_search: requires `missing`, which is not a property",
    ] {
        assert!(found.contains(expected), "{expected} in:\n{found}");
    }
    let rooted = tool(
        json!({"anyOf": [{"type": "object", "properties": {}, "required": [],
                                        "additionalProperties": false}]}),
    );
    assert!(
        strict_violations(&rooted)
            .iter()
            .any(|v| v.contains("root must not be `anyOf`"))
    );
}

#[test]
fn the_tools_are_openai_function_entries_and_admin_ones_say_do_not_call() {
    let names: Vec<String> = memory_tools().into_iter().map(|t| t.name).collect();
    assert_eq!(names, ["memory_search", "memory_add"]);
    for t in memory_tools().iter().chain(&admin_tools()) {
        let entry = t.openai();
        assert_eq!(entry["type"], "function");
        assert_eq!(entry["function"]["name"], t.name.as_str());
        assert_eq!(entry["function"]["parameters"], t.parameters);
        assert!(!t.description.is_empty());
    }
    let admin: Vec<String> = admin_tools().into_iter().map(|t| t.name).collect();
    assert_eq!(admin, ["memory_build_indices", "memory_build_communities"]);
    for t in admin_tools() {
        assert!(
            t.description.contains("DO NOT CALL unless the user asked"),
            "{}",
            t.description
        );
    }
    for t in memory_tools() {
        assert!(!t.description.contains("DO NOT CALL"));
    }
}

// first iteration › tool_choice pinned to memory_search on iteration 1 only

#[test]
fn tool_choice_is_pinned_to_memory_search_on_the_first_iteration_only() {
    let request = json!({"model": "m", "messages": [{"role": "user", "content": "hi"}],
                         "tools": [memory_search_tool().openai()]});
    let first = force_memory_search_on_first_iteration(request.clone(), 1);
    assert_eq!(
        first["tool_choice"],
        json!({"type": "function", "function": {"name": "memory_search"}})
    );
    let mut rest = first.clone();
    rest.as_object_mut().unwrap().remove("tool_choice");
    assert_eq!(rest, request, "nothing else changes");
    for iteration in [0, 2, 3, 10] {
        assert_eq!(
            force_memory_search_on_first_iteration(request.clone(), iteration),
            request
        );
    }
    let auto = json!({"tool_choice": "auto"});
    assert_eq!(
        force_memory_search_on_first_iteration(auto.clone(), 2),
        auto
    );
    assert_eq!(
        force_memory_search_on_first_iteration(json!("not a request"), 1),
        json!("not a request")
    );
}

// memory_search

fn searches(client: &InMemoryClient) -> usize {
    client
        .calls()
        .iter()
        .filter(|c| matches!(c, Call::Search(_)))
        .count()
}

async fn memory_search_is_the_presentation(client: &dyn Client) {
    let ctx = ToolContext::new(op());
    call_tool(
        client,
        &ctx,
        "memory_add",
        &json!({"content": "Ada prefers tea"}),
    )
    .await
    .unwrap();
    client.await_background_writes().await;
    let text = call_tool(
        client,
        &ctx,
        "memory_search",
        &json!({"query": "tea", "destinations": ["personal"]}),
    )
    .await
    .unwrap();
    let direct = memory_search(
        client,
        &MemorySearch::new(ctx.operator.clone(), "tea").destinations(["personal"]),
    )
    .await
    .unwrap();
    assert_eq!(text, direct);
    assert_eq!(text, "Source: direct document\n- Ada prefers tea");
    // Selectors are validated by the search.
    let err = call_tool(
        client,
        &ctx,
        "memory_search",
        &json!({"query": "tea", "destinations": ["nowhere"]}),
    )
    .await
    .unwrap_err();
    assert!(matches!(&err, Error::InvalidInput { field, .. } if field == "destinations[0]"));
}

#[tokio::test]
async fn memory_search_is_the_existing_presentation_in_memory() {
    memory_search_is_the_presentation(&InMemoryClient::new()).await;
}

#[tokio::test]
async fn memory_search_is_the_existing_presentation_native() {
    let (client, _) = native(RuntimeConfig::new()).await;
    memory_search_is_the_presentation(&client).await;
}

#[tokio::test]
async fn a_blank_query_or_a_small_budget_makes_no_search_in_memory() {
    let client = InMemoryClient::new();
    let ctx = ToolContext::new(op());
    let text = call_tool(&client, &ctx, "memory_search", &json!({"query": "  "}))
        .await
        .unwrap();
    assert_eq!(text, BLANK_QUERY_NON_RESULT);
    let tiny = ctx.clone().max_bytes(10);
    let err = call_tool(&client, &tiny, "memory_search", &json!({"query": "tea"}))
        .await
        .unwrap_err();
    assert!(
        matches!(err, Error::BudgetTooSmall { max_bytes: 10, minimum_bytes }
            if minimum_bytes == format::envelope_bytes(format::NO_MATCHING_FACTS)),
        "{err:?}"
    );
    assert_eq!(searches(&client), 0);
    let err = call_tool(&client, &ctx, "memory_search", &json!({"q": "tea"}))
        .await
        .unwrap_err();
    assert!(
        matches!(&err, Error::InvalidInput { field, .. } if field == "memory_search.arguments"),
        "{err:?}"
    );
    assert_eq!(searches(&client), 0);
    // A query over 8 KiB is refused naming it; one of 8 KiB is searched.
    let long = "bees ".repeat(8 * 1024 / 5 + 1);
    let err = call_tool(&client, &ctx, "memory_search", &json!({"query": long}))
        .await
        .unwrap_err();
    assert!(
        matches!(&err, Error::InvalidInput { field, .. } if field == "memory_search.arguments.query"),
        "{err:?}"
    );
    assert_eq!(searches(&client), 0);
    let most = "b".repeat(8 * 1024);
    call_tool(
        &client,
        &ctx,
        "memory_search",
        &json!({"query": most, "destinations": null,
                                                      "lenses": null, "as_of": null}),
    )
    .await
    .unwrap();
    assert_eq!(searches(&client), 1);
}

#[tokio::test]
async fn a_blank_query_or_a_small_budget_makes_no_search_native() {
    let (client, embedder) = native(RuntimeConfig::new()).await;
    let ctx = ToolContext::new(op());
    let text = call_tool(&client, &ctx, "memory_search", &json!({"query": ""}))
        .await
        .unwrap();
    assert_eq!(text, BLANK_QUERY_NON_RESULT);
    let err = call_tool(
        &client,
        &ctx.clone().max_bytes(0),
        "memory_search",
        &json!({"query": "tea"}),
    )
    .await
    .unwrap_err();
    assert!(matches!(err, Error::BudgetTooSmall { .. }), "{err:?}");
    assert_eq!(embedder.requests(), 0, "no search, so no query embedding");
}

// memory_add › acknowledges at once with "Ingesting.", writes in the background

#[tokio::test]
async fn memory_add_acknowledges_at_once_and_writes_in_the_background_native() {
    let embedder = GatedEmbedder::shut();
    let client = native_with(RuntimeConfig::new(), Arc::new(embedder.clone())).await;
    let ctx = ToolContext::new(op()).session("s-1");
    // The write cannot finish while the embedder is shut, yet the tool answers.
    let ack = call_tool(
        &client,
        &ctx,
        "memory_add",
        &json!({"content": "Ada keeps bees"}),
    )
    .await
    .unwrap();
    assert_eq!(ack, INGESTING);
    // The write is under way in the background, held at the embedder, not done.
    embedder.entered(1).await;
    assert_eq!(embedder.inner.requests(), 0);
    embedder.open();
    client.await_background_writes().await;
    assert_eq!(embedder.cancelled.load(Ordering::SeqCst), 0);
    let found = client
        .search(&Search::new(ctx.operator.clone(), "bees").facts())
        .await
        .unwrap();
    assert_eq!(found.len(), 1);
    assert_eq!(found[0].hit.as_fact().unwrap().fact, "Ada keeps bees");
}

async fn memory_add_goes_through_the_context_lens(client: &dyn Client) {
    let ctx = ToolContext::new(op()).lens("personal-chat");
    let ack = call_tool(
        client,
        &ctx,
        "memory_add",
        &json!({"content": "Ada: I moved to Porto", "source_kind": "conversation",
                "source_description": "chat"}),
    )
    .await
    .unwrap();
    assert_eq!(ack, INGESTING);
    client.await_background_writes().await;
    let text = call_tool(client, &ctx, "memory_search", &json!({"query": "Porto"}))
        .await
        .unwrap();
    assert_eq!(text, "Lens: personal-chat\n- Ada: I moved to Porto");
}

#[tokio::test]
async fn memory_add_goes_through_the_context_lens_in_memory() {
    memory_add_goes_through_the_context_lens(&InMemoryClient::new()).await;
}

#[tokio::test]
async fn memory_add_goes_through_the_context_lens_native() {
    let (client, _) = native(RuntimeConfig::new()).await;
    memory_add_goes_through_the_context_lens(&client).await;
}

#[tokio::test]
async fn memory_add_refuses_bad_arguments_before_anything_is_written() {
    let client = InMemoryClient::new();
    let ctx = ToolContext::new(op());
    for (args, field) in [
        (json!({}), "memory_add.arguments"),
        (
            json!({"content": "x", "source_kind": "email"}),
            "memory_add.arguments",
        ),
        (
            json!({"content": "not json", "source_kind": "structured_record"}),
            "memory_add.arguments.content",
        ),
    ] {
        let err = call_tool(&client, &ctx, "memory_add", &args)
            .await
            .unwrap_err();
        assert!(
            matches!(&err, Error::InvalidInput { field: f, .. } if f == field),
            "{args}: {err:?}"
        );
    }
    // Blank content: the client's own validation, before the background write.
    let err = call_tool(&client, &ctx, "memory_add", &json!({"content": "  "}))
        .await
        .unwrap_err();
    assert!(matches!(err, Error::InvalidInput { .. }), "{err:?}");
    assert!(
        !client
            .calls()
            .iter()
            .any(|c| matches!(c, Call::MemoryAdd(_))),
        "nothing was handed to the background"
    );
    let ack = call_tool(
        &client,
        &ctx,
        "memory_add",
        &json!({"content": "{\"ticket\": \"PAY-1\"}", "source_kind": "structured_record"}),
    )
    .await
    .unwrap();
    assert_eq!(ack, INGESTING);
}

// admin tools

async fn admin_tools_run(client: &dyn Client) {
    let ctx = ToolContext::new(op());
    assert_eq!(
        call_tool(client, &ctx, "memory_build_indices", &Value::Null)
            .await
            .unwrap(),
        "Indices built."
    );
    let text = call_tool(client, &ctx, "memory_build_communities", &json!({}))
        .await
        .unwrap();
    assert!(
        text.starts_with("Communities built: 0 communities"),
        "{text}"
    );
    let err = call_tool(client, &ctx, "memory_forget", &json!({}))
        .await
        .unwrap_err();
    assert!(matches!(&err, Error::InvalidInput { field, .. } if field == "tool"));
}

#[tokio::test]
async fn admin_tools_run_when_called_in_memory() {
    admin_tools_run(&InMemoryClient::new()).await;
}

#[tokio::test]
async fn admin_tools_run_when_called_native() {
    let (client, _) = native(RuntimeConfig::new()).await;
    admin_tools_run(&client).await;
}
