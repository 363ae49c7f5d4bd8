//! `gralkor mcp` driven by the MCP SDK's own client (rmcp) over both transports:
//! stdio (the client spawns the binary) and streamable HTTP (test-trees/mcp.md).

mod common;

use std::process::Stdio;

use common::Home;
use gralkor::agent::tools::{admin_tools, memory_tools};
use rmcp::ServiceExt;
use rmcp::model::{
    CallToolRequestParams, CallToolResponse, CallToolResult, ClientCapabilities, ClientConfig,
    ErrorCode, GetTaskParams, Implementation, JsonObject, RequestMetaObject, TaskPayload,
};
use rmcp::service::{RoleClient, RunningService, ServiceError};
use rmcp::transport::streamable_http_client::StreamableHttpClientTransportConfig;
use rmcp::transport::{StreamableHttpClientTransport, TokioChildProcess};
use serde_json::{Value, json};
use tokio::io::{AsyncBufReadExt, BufReader};

type McpClient = RunningService<RoleClient, ClientConfig>;

const TOOLS: [&str; 7] = [
    "memory_search",
    "memory_add",
    "memory_get",
    "memory_forget",
    "memory_status",
    "memory_build_indices",
    "memory_build_communities",
];

fn command(home: &Home, args: &[&str]) -> tokio::process::Command {
    let std = home.command();
    let mut cmd = tokio::process::Command::from(std);
    cmd.arg("--text-only").args(args);
    cmd
}

/// The binary on stdio, spawned by the SDK's child-process transport.
async fn stdio_client(home: &Home, args: &[&str]) -> McpClient {
    let (transport, _) = TokioChildProcess::builder(command(home, args))
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    ClientConfig::default().serve(transport).await.unwrap()
}

/// The binary serving streamable HTTP on a free loopback port; its endpoint is read
/// from the line it prints once listening.
struct HttpServer {
    child: tokio::process::Child,
    url: String,
}

impl HttpServer {
    /// `gralkor --text-only GLOBAL mcp --http 127.0.0.1:0 MCP`.
    async fn start(home: &Home, global: &[&str], mcp: &[&str]) -> HttpServer {
        let mut cmd = command(home, global);
        cmd.args(["mcp", "--http", "127.0.0.1:0"])
            .args(mcp)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .kill_on_drop(true);
        let mut child = cmd.spawn().unwrap();
        let mut lines = BufReader::new(child.stderr.take().unwrap()).lines();
        let url = loop {
            let line = lines
                .next_line()
                .await
                .unwrap()
                .expect("the server printed its endpoint before exiting");
            if let Some(url) = line.strip_prefix("gralkor mcp: listening on ") {
                break url.to_string();
            }
        };
        // Keep draining standard error so the server never blocks on it.
        tokio::spawn(async move { while let Ok(Some(_)) = lines.next_line().await {} });
        HttpServer { child, url }
    }

    async fn client(&self) -> McpClient {
        let transport = StreamableHttpClientTransport::from_config(
            StreamableHttpClientTransportConfig::with_uri(self.url.clone()),
        );
        ClientConfig::default().serve(transport).await.unwrap()
    }

    /// SIGTERM, then the exit status.
    async fn stop(mut self) -> i32 {
        let pid = self.child.id().unwrap().to_string();
        let killed = std::process::Command::new("kill")
            .args(["-TERM", &pid])
            .status()
            .unwrap();
        assert!(killed.success());
        self.child.wait().await.unwrap().code().expect("exited")
    }
}

fn arguments(value: Value) -> JsonObject {
    match value {
        Value::Object(o) => o,
        other => panic!("not an object: {other}"),
    }
}

async fn call(client: &McpClient, tool: &str, args: Value) -> Result<CallToolResult, ServiceError> {
    client
        .call_tool(CallToolRequestParams::new(tool.to_string()).with_arguments(arguments(args)))
        .await
}

fn text(result: &CallToolResult) -> String {
    assert_ne!(result.is_error, Some(true), "{result:?}");
    result.content[0]
        .as_text()
        .expect("a text result")
        .text
        .clone()
}

/// The MCP error of a failed call.
fn mcp_error(result: Result<CallToolResult, ServiceError>) -> rmcp::model::ErrorData {
    match result {
        Err(ServiceError::McpError(e)) => e,
        other => panic!("expected an MCP error, got {other:?}"),
    }
}

/// Lists the tools and calls each one; a memory_add is checked after the server has
/// stopped (its write is in the background, and shutdown waits for it).
async fn exercise(client: &McpClient, episode: &str) {
    // list tools: the agent layer's definitions, not a copy
    let tools = client.list_all_tools().await.unwrap();
    let names: Vec<&str> = tools.iter().map(|t| t.name.as_ref()).collect();
    assert_eq!(names, TOOLS);
    for defined in memory_tools().into_iter().chain(admin_tools()) {
        let listed = tools.iter().find(|t| t.name == defined.name).unwrap();
        assert_eq!(
            Value::Object((*listed.input_schema).clone()),
            defined.parameters
        );
        assert_eq!(
            listed.description.as_deref(),
            Some(defined.description.as_str())
        );
    }
    for admin in ["memory_build_indices", "memory_build_communities"] {
        let t = tools.iter().find(|t| t.name == admin).unwrap();
        assert!(t.description.as_deref().unwrap().contains("DO NOT CALL"));
    }

    // memory_get
    let got: Value = serde_json::from_str(&text(
        &call(client, "memory_get", json!({"id": episode}))
            .await
            .unwrap(),
    ))
    .unwrap();
    assert_eq!(got["destination"], "personal");
    assert_eq!(
        got["episode"]["content"],
        "Ada keeps honeybees on her allotment"
    );

    // memory_search: the agent layer's presentation
    let found = text(
        &call(client, "memory_search", json!({"query": "honeybees"}))
            .await
            .unwrap(),
    );
    assert!(
        found.contains("Ada keeps honeybees on her allotment"),
        "{found}"
    );

    // memory_add answers at once
    let ack = text(
        &call(
            client,
            "memory_add",
            json!({"content": "Ada plays the cello on Sundays"}),
        )
        .await
        .unwrap(),
    );
    assert_eq!(ack, gralkor::agent::tools::INGESTING);

    // memory_status
    let status: Value = serde_json::from_str(&text(
        &call(client, "memory_status", json!({})).await.unwrap(),
    ))
    .unwrap();
    assert_eq!(status["operator"], "ada");
    assert!(
        status["destinations"]
            .as_array()
            .unwrap()
            .iter()
            .any(|d| d["name"] == "personal")
    );

    // admin tools
    let built = text(
        &call(client, "memory_build_indices", json!({}))
            .await
            .unwrap(),
    );
    assert_eq!(built, "Indices built.");
    let communities = text(
        &call(client, "memory_build_communities", json!({}))
            .await
            .unwrap(),
    );
    assert!(
        communities.starts_with("Communities built: "),
        "{communities}"
    );

    // errors as MCP errors
    let unknown = mcp_error(call(client, "memory_frobnicate", json!({})).await);
    assert_eq!(unknown.code, ErrorCode::INVALID_PARAMS);
    assert!(unknown.message.contains("memory_frobnicate"), "{unknown:?}");
    let extra = mcp_error(call(client, "memory_search", json!({"query": "x", "bogus": 1})).await);
    assert_eq!(extra.code, ErrorCode::INVALID_PARAMS);
    assert!(
        extra.message.contains("memory_search.arguments"),
        "{extra:?}"
    );
    let bad_id = mcp_error(call(client, "memory_get", json!({"id": "not-a-uuid"})).await);
    assert_eq!(bad_id.code, ErrorCode::INVALID_PARAMS);
    assert_eq!(bad_id.data.as_ref().unwrap()["kind"], "invalid_input");

    // memory_forget, then the episode is gone
    let forgot = text(
        &call(client, "memory_forget", json!({"id": episode}))
            .await
            .unwrap(),
    );
    assert_eq!(forgot, format!("Forgot episode {episode} in personal."));
    let gone = mcp_error(call(client, "memory_get", json!({"id": episode})).await);
    assert_eq!(gone.code, ErrorCode::RESOURCE_NOT_FOUND);
    assert_eq!(gone.data.as_ref().unwrap()["kind"], "not_found");

    // memory_forget a whole session
    let neither = mcp_error(call(client, "memory_forget", json!({})).await);
    assert_eq!(neither.code, ErrorCode::INVALID_PARAMS);
    assert!(
        neither
            .message
            .contains("exactly one of `id` and `session`"),
        "{neither:?}"
    );
    let forgot = text(
        &call(client, "memory_forget", json!({"session": "chat-9"}))
            .await
            .unwrap(),
    );
    assert_eq!(forgot, "Forgot session chat-9: 1 episodes.");
    let found = text(
        &call(client, "memory_search", json!({"query": "shed"}))
            .await
            .unwrap(),
    );
    assert!(!found.contains("garden shed"), "{found}");
}

fn seed(home: &Home) -> String {
    home.run(&["add", "--session", "chat-9", "Ada repaints the garden shed"])
        .ok();
    let added = home
        .run(&["--json", "add", "Ada keeps honeybees on her allotment"])
        .json();
    added["episodes"][0].as_str().unwrap().to_string()
}

/// After the server stopped: the memory_add landed (shutdown waited for it).
fn memory_add_landed(home: &Home) {
    let found = home.run(&["--json", "search", "cello"]).json();
    let contents: Vec<&str> = found
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|r| r["hit"]["content"].as_str())
        .collect();
    assert_eq!(contents, ["Ada plays the cello on Sundays"]);
}

// stdio / list tools, call each, errors as MCP errors
#[tokio::test(flavor = "multi_thread")]
async fn over_stdio_every_tool_answers_and_errors_are_mcp_errors() {
    let home = Home::new();
    let episode = seed(&home);
    let client = stdio_client(&home, &["--operator", "ada", "mcp"]).await;
    exercise(&client, &episode).await;
    // Closing stdin stops the server, which waits for the background write.
    client.cancel().await.unwrap();
    memory_add_landed(&home);
}

// streamable HTTP / the same, then SIGTERM stops it cleanly
#[tokio::test(flavor = "multi_thread")]
async fn over_streamable_http_every_tool_answers_and_errors_are_mcp_errors() {
    let home = Home::new();
    let episode = seed(&home);
    let server = HttpServer::start(&home, &["--operator", "ada"], &[]).await;
    let client = server.client().await;
    exercise(&client, &episode).await;
    client.cancel().await.unwrap();
    assert_eq!(server.stop().await, 0);
    memory_add_landed(&home);
}

// operator / from the request's _meta when the server has none
#[tokio::test(flavor = "multi_thread")]
async fn the_operator_comes_from_the_request_meta_when_the_server_has_none() {
    let home = Home::new();
    let episode = seed(&home);
    let server = HttpServer::start(&home, &[], &["--operator-from-request"]).await;
    let client = server.client().await;
    let as_operator = |op: &str| {
        let mut meta = RequestMetaObject::default();
        meta.insert("operator_id".into(), json!(op));
        let mut params = CallToolRequestParams::new("memory_get")
            .with_arguments(arguments(json!({"id": episode})));
        params.meta = Some(meta);
        params
    };
    let ada: Value =
        serde_json::from_str(&text(&client.call_tool(as_operator("ada")).await.unwrap())).unwrap();
    assert_eq!(ada["episode"]["uuid"], episode.as_str());
    let grace = client.call_tool(as_operator("grace")).await;
    assert_eq!(mcp_error(grace).code, ErrorCode::RESOURCE_NOT_FOUND);
    let nobody = mcp_error(call(&client, "memory_get", json!({"id": episode})).await);
    assert_eq!(nobody.code, ErrorCode::INVALID_PARAMS);
    assert!(nobody.message.contains("_meta.operator_id"), "{nobody:?}");
    client.cancel().await.unwrap();
    assert_eq!(server.stop().await, 0);
}

// subject / with an authorizer every tool runs as the server's --as, never the request's
#[tokio::test(flavor = "multi_thread")]
async fn with_an_authorizer_the_tools_run_as_the_configured_subject() {
    let home = Home::new();
    let added = home
        .run_guarded(
            "ada",
            "person:ada",
            &["--json", "add", "Ada keeps honeybees on her allotment"],
        )
        .json();
    let episode = added["episodes"][0].as_str().unwrap().to_string();
    let guarded = |subject: &'static str| {
        [
            "--authorizer",
            "embedded",
            "--as",
            subject,
            "--operator",
            "ada",
            "mcp",
        ]
    };
    // Bob, naming Ada's operator id: her memory is not his to read, get or write.
    let bob = stdio_client(&home, &guarded("person:bob")).await;
    let found = text(
        &call(&bob, "memory_search", json!({"query": "honeybees"}))
            .await
            .unwrap(),
    );
    assert_eq!(found, "No matching facts.");
    let got = mcp_error(call(&bob, "memory_get", json!({"id": episode})).await);
    assert_eq!(got.code, ErrorCode::RESOURCE_NOT_FOUND);
    let write = mcp_error(call(&bob, "memory_add", json!({"content": "Bob was here"})).await);
    assert_eq!(
        write.data.unwrap()["kind"],
        "permission_denied",
        "{}",
        write.message
    );
    bob.cancel().await.unwrap();
    // Ada finds it.
    let ada = stdio_client(&home, &guarded("person:ada")).await;
    let found = text(
        &call(&ada, "memory_search", json!({"query": "honeybees"}))
            .await
            .unwrap(),
    );
    assert!(found.contains("Ada keeps honeybees"), "{found}");
    ada.cancel().await.unwrap();
    // Without --as the server does not start.
    let run = home.run_raw(&[
        "--text-only",
        "--authorizer",
        "embedded",
        "--operator",
        "ada",
        "mcp",
    ]);
    assert_eq!(run.code, 2, "{run:?}");
    assert!(run.stderr.contains("GRALKOR_SUBJECT"), "{run:?}");
}

// operator / a server with no operator and no --operator-from-request does not start
#[test]
fn a_server_without_an_operator_refuses_to_start() {
    let home = Home::new();
    let run = home.run_raw(&["--text-only", "mcp"]);
    assert_eq!(run.code, 5, "{run:?}");
    assert!(run.stderr.contains("--operator-from-request"), "{run:?}");
}

// tools / memory_get reads a fact by id too
#[tokio::test(flavor = "multi_thread")]
async fn memory_get_reads_a_fact_by_id() {
    let home = Home::new();
    let (_, _, _, lisbon) = common::write_graph(&home).await;
    let client = stdio_client(&home, &["--operator", "ada", "mcp"]).await;
    let got: Value = serde_json::from_str(&text(
        &call(
            &client,
            "memory_get",
            json!({"id": lisbon.uuid.to_string()}),
        )
        .await
        .unwrap(),
    ))
    .unwrap();
    assert_eq!(got["destination"], "personal");
    assert_eq!(got["fact"]["fact"], "Ada lives in Lisbon");
    assert!(got["fact"]["invalid_at"].is_null());
    client.cancel().await.unwrap();
}

// tasks / the admin tools run as MCP tasks for a client that declares the extension
#[tokio::test(flavor = "multi_thread")]
async fn long_operations_run_as_tasks_for_a_client_that_supports_them() {
    let home = Home::new();
    seed(&home);
    let (transport, _) = TokioChildProcess::builder(command(&home, &["--operator", "ada", "mcp"]))
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let client = ClientConfig::new(
        ClientCapabilities::builder().enable_tasks().build(),
        Implementation::new("gralkor-tests", "0"),
    )
    .serve(transport)
    .await
    .unwrap();
    let response = client
        .call_tool_once(
            CallToolRequestParams::new("memory_build_communities")
                .with_arguments(arguments(json!({}))),
        )
        .await
        .unwrap();
    let CallToolResponse::Task(created) = response else {
        panic!("expected a task, got {response:?}");
    };
    // Poll as the protocol says, at the server's interval, until the task settles.
    let task = loop {
        let info = client
            .peer()
            .get_task(GetTaskParams::new(created.task.task_id.clone()))
            .await
            .unwrap();
        if info.task.status().is_terminal() {
            break info.task;
        }
        tokio::time::sleep(std::time::Duration::from_millis(
            created.task.poll_interval_ms.unwrap_or(200),
        ))
        .await;
    };
    let TaskPayload::Completed { result } = task.payload else {
        panic!("expected a completed task, got {:?}", task.payload);
    };
    let result: CallToolResult = serde_json::from_value(Value::Object(result)).unwrap();
    assert!(
        text(&result).starts_with("Communities built: "),
        "{result:?}"
    );
    // Short tools answer directly, even for this client.
    let status = text(&call(&client, "memory_status", json!({})).await.unwrap());
    assert!(status.contains("\"operator\":\"ada\""), "{status}");
    client.cancel().await.unwrap();
}
