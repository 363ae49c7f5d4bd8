//! `gralkor mcp` driven by the MCP SDK's own client (rmcp) over both transports:
//! stdio (the client spawns the binary) and streamable HTTP (test-trees/mcp.md).

mod common;

use std::process::Stdio;

use common::Home;
use gralkor::agent::tools::{
    ToolDefinition, admin_tools, inspection_tools, memory_tools, strict_violations,
};
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

const TOOLS: [&str; 8] = [
    "memory_search",
    "memory_add",
    "memory_get",
    "memory_forget",
    "memory_status",
    "memory_recent",
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

/// The structured content of a successful call.
fn structured(result: &CallToolResult) -> Value {
    assert_ne!(result.is_error, Some(true), "{result:?}");
    result
        .structured_content
        .clone()
        .expect("structured content")
}

/// A tool's failure, as the model reads it: an `isError` result; its text, and the
/// `error` of its structured content.
fn tool_error(result: Result<CallToolResult, ServiceError>) -> (String, Value) {
    let result = result.expect("a tool result, not a protocol error");
    assert_eq!(result.is_error, Some(true), "{result:?}");
    let text = result.content[0].as_text().expect("a text").text.clone();
    let error = result.structured_content.expect("structured content")["error"].clone();
    (text, error)
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
    // Every listed schema passes the strict-mode checker.
    let listed: Vec<ToolDefinition> = tools
        .iter()
        .map(|t| {
            serde_json::from_value(json!({"name": t.name, "description": t.description,
                                          "parameters": Value::Object((*t.input_schema).clone())}))
            .unwrap()
        })
        .collect();
    assert_eq!(strict_violations(&listed), Vec::<String>::new());
    // Annotations: the reads are read-only, forgetting is destructive.
    let hint = |name: &str| {
        tools
            .iter()
            .find(|t| t.name == name)
            .unwrap()
            .annotations
            .clone()
            .unwrap()
    };
    for read in [
        "memory_search",
        "memory_get",
        "memory_status",
        "memory_recent",
    ] {
        assert_eq!(hint(read).read_only_hint, Some(true), "{read}");
    }
    assert_eq!(hint("memory_forget").destructive_hint, Some(true));
    assert_eq!(hint("memory_add").destructive_hint, Some(false));
    assert_eq!(hint("memory_add").idempotent_hint, Some(true));
    // memory_add takes an idempotency key besides the agent layer's arguments.
    let add = tools.iter().find(|t| t.name == "memory_add").unwrap();
    assert!(add.input_schema["properties"]["idempotency_key"].is_object());
    for defined in memory_tools()
        .into_iter()
        .filter(|t| t.name != "memory_add")
        .chain(inspection_tools())
        .chain(admin_tools())
    {
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

    // memory_search: the text and the structured results carry ids and times
    let searched = call(client, "memory_search", json!({"query": "honeybees"}))
        .await
        .unwrap();
    let found = text(&searched);
    assert!(
        found.contains("Ada keeps honeybees on her allotment") && found.contains(episode),
        "{found}"
    );
    let results = structured(&searched)["results"].clone();
    let hit = results
        .as_array()
        .unwrap()
        .iter()
        .find(|r| r["text"] == "Ada keeps honeybees on her allotment")
        .unwrap_or_else(|| panic!("{results}"))
        .clone();
    assert_eq!(hit["destination"], "personal");
    assert!(
        hit["episodes"]
            .as_array()
            .unwrap()
            .contains(&json!(episode)),
        "{hit}"
    );
    assert!(
        hit["valid_at"].is_string() && hit["created_at"].is_string(),
        "{hit}"
    );
    assert!(hit["invalid_at"].is_null(), "{hit}");

    // memory_add answers the episode id; the same content again is the same episode
    let added = structured(
        &call(
            client,
            "memory_add",
            json!({"content": "Ada plays the cello on Sundays", "source_kind": null,
                   "source_description": null, "idempotency_key": null}),
        )
        .await
        .unwrap(),
    );
    assert_eq!(added["written"], true);
    assert_eq!(added["destination"], "personal");
    let cello = added["id"].as_str().unwrap().to_string();
    for _ in 0..2 {
        let again = call(
            client,
            "memory_add",
            json!({"content": "Ada plays the cello on Sundays"}),
        )
        .await
        .unwrap();
        assert!(text(&again).contains(&cello), "{again:?}");
        assert_eq!(structured(&again)["id"], cello.as_str());
        assert_eq!(structured(&again)["written"], false);
    }
    // memory_recent lists it once, newest first, with its times
    let recent = structured(
        &call(
            client,
            "memory_recent",
            json!({"destination": null, "limit": 10}),
        )
        .await
        .unwrap(),
    );
    let listed: Vec<&Value> = recent["episodes"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|e| e["content"] == "Ada plays the cello on Sundays")
        .collect();
    assert_eq!(listed.len(), 1, "{recent}");
    assert_eq!(listed[0]["id"], cello.as_str());
    assert!(listed[0]["created_at"].is_string());
    assert_eq!(recent["episodes"][0]["id"], cello.as_str(), "newest first");
    // An idempotency key of the caller's own: the same key is the same episode.
    let keyed = structured(
        &call(
            client,
            "memory_add",
            json!({"content": "Ada tunes the cello", "idempotency_key": "k-1"}),
        )
        .await
        .unwrap(),
    );
    let retried = structured(
        &call(
            client,
            "memory_add",
            json!({"content": "Ada tunes the cello.", "idempotency_key": "k-1"}),
        )
        .await
        .unwrap(),
    );
    assert_eq!(
        (keyed["written"].clone(), retried["written"].clone()),
        (json!(true), json!(false))
    );
    assert_eq!(keyed["id"], retried["id"]);
    // memory_get by the id memory_add answered
    let got = structured(
        &call(client, "memory_get", json!({"id": cello}))
            .await
            .unwrap(),
    );
    assert_eq!(got["episode"]["content"], "Ada plays the cello on Sundays");

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

    // an unknown tool is a protocol error; a tool's bad arguments are isError results
    let unknown = mcp_error(call(client, "memory_frobnicate", json!({})).await);
    assert_eq!(unknown.code, ErrorCode::INVALID_PARAMS);
    assert!(unknown.message.contains("memory_frobnicate"), "{unknown:?}");
    let (message, error) =
        tool_error(call(client, "memory_search", json!({"query": "x", "bogus": 1})).await);
    assert!(message.contains("memory_search.arguments"), "{message}");
    assert_eq!(error["kind"], "invalid_input");
    assert_eq!(error["field"], "memory_search.arguments");
    let (_, error) = tool_error(call(client, "memory_get", json!({"id": "not-a-uuid"})).await);
    assert_eq!(error["kind"], "invalid_input");
    assert_eq!(error["field"], "memory_get.arguments.id");
    let (message, error) = tool_error(
        call(
            client,
            "memory_search",
            json!({"query": "bees ".repeat(2000)}),
        )
        .await,
    );
    assert_eq!(error["field"], "memory_search.arguments.query", "{message}");
    assert!(message.contains("8192 bytes"), "{message}");
    let (_, error) = tool_error(call(client, "memory_add", json!({})).await);
    assert!(
        error["message"].as_str().unwrap().contains("content"),
        "{error}"
    );
    let (_, error) = tool_error(
        call(
            client,
            "memory_add",
            json!({"content": "[1, 2]", "source_kind": "structured_record"}),
        )
        .await,
    );
    assert_eq!(error["field"], "memory_add.arguments.content");
    let (_, error) = tool_error(call(client, "memory_recent", json!({"limit": 0})).await);
    assert_eq!(error["field"], "memory_recent.arguments.limit");

    // memory_forget, then the episode is gone
    let forgot = text(
        &call(client, "memory_forget", json!({"id": episode}))
            .await
            .unwrap(),
    );
    assert_eq!(forgot, format!("Forgot episode {episode} in personal."));
    let (_, gone) = tool_error(call(client, "memory_get", json!({"id": episode})).await);
    assert_eq!(gone["kind"], "not_found");

    // memory_forget a whole session
    let (neither, _) = tool_error(
        call(
            client,
            "memory_forget",
            json!({"id": null, "destination": null, "session": null}),
        )
        .await,
    );
    assert!(
        neither.contains("exactly one of `id` and `session`"),
        "{neither}"
    );
    let forgot = text(
        &call(client, "memory_forget", json!({"session": "chat-9"}))
            .await
            .unwrap(),
    );
    assert_eq!(forgot, "Forgot session chat-9: 1 episode.");
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

/// After the server stopped: the memory_add landed, once for three identical adds.
fn memory_add_landed(home: &Home) {
    let found = home.run(&["--json", "search", "cello on Sundays"]).json();
    let contents: Vec<&str> = found
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|r| r["hit"]["content"].as_str())
        .filter(|c| *c == "Ada plays the cello on Sundays")
        .collect();
    assert_eq!(contents.len(), 1, "{found}");
}

/// The JSON-RPC answers to the messages the SDK alone would answer wrongly: a line
/// that is not JSON, and tools/call arguments that are not an object.
const NOT_JSON: &str = "{\"jsonrpc\": \"2.0\", \"id\": 1, \"method\": ";
const STRING_ARGUMENTS: &str = r#"{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"memory_search","arguments":"query"}}"#;
const INITIALIZE: &str = r#"{"jsonrpc":"2.0","id":8,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"raw","version":"0"}}}"#;

// errors / protocol errors have their JSON-RPC codes, on stdio
#[tokio::test(flavor = "multi_thread")]
async fn malformed_messages_get_their_json_rpc_codes_over_stdio() {
    use tokio::io::AsyncWriteExt;
    let home = Home::new();
    let mut child = command(&home, &["--operator", "ada", "mcp"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .kill_on_drop(true)
        .spawn()
        .unwrap();
    let mut stdin = child.stdin.take().unwrap();
    let mut lines = BufReader::new(child.stdout.take().unwrap()).lines();
    let mut ask = async |line: &str| -> Value {
        stdin
            .write_all(format!("{line}\n").as_bytes())
            .await
            .unwrap();
        let answer = lines.next_line().await.unwrap().expect("an answer");
        serde_json::from_str(&answer).unwrap()
    };
    let parse = ask(NOT_JSON).await;
    assert_eq!(parse["error"]["code"], -32700, "{parse}");
    assert!(parse["id"].is_null());
    let params = ask(STRING_ARGUMENTS).await;
    assert_eq!(params["error"]["code"], -32602, "{params}");
    assert_eq!(params["id"], 7);
    assert!(
        params["error"]["message"]
            .as_str()
            .unwrap()
            .contains("params.arguments")
    );
    // The server goes on answering well-formed messages.
    let init = ask(INITIALIZE).await;
    assert_eq!(init["id"], 8);
    assert_eq!(init["result"]["serverInfo"]["name"], "gralkor", "{init}");
    drop(stdin);
    assert!(child.wait().await.unwrap().success());
}

/// One HTTP/1.1 POST of `body` to the server; the status and the body.
async fn post(url: &str, body: &str) -> (u16, String) {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let rest = url.strip_prefix("http://").unwrap();
    let (host, path) = rest.split_once('/').unwrap();
    let mut stream = tokio::net::TcpStream::connect(host).await.unwrap();
    let request = format!(
        "POST /{path} HTTP/1.1\r\nHost: {host}\r\nContent-Type: application/json\r\n\
         Accept: application/json, text/event-stream\r\nContent-Length: {}\r\n\
         Connection: close\r\n\r\n{body}",
        body.len()
    );
    stream.write_all(request.as_bytes()).await.unwrap();
    let mut response = String::new();
    stream.read_to_string(&mut response).await.unwrap();
    let status = response[9..12].parse().unwrap();
    let body = response.split_once("\r\n\r\n").unwrap().1.to_string();
    (status, body)
}

// errors / protocol errors have their JSON-RPC codes, over HTTP
#[tokio::test(flavor = "multi_thread")]
async fn malformed_messages_get_their_json_rpc_codes_over_http() {
    let home = Home::new();
    let server = HttpServer::start(&home, &["--operator", "ada"], &[]).await;
    let (status, body) = post(&server.url, NOT_JSON).await;
    assert_eq!(status, 400, "{body}");
    let parse: Value = serde_json::from_str(&body).unwrap();
    assert_eq!(parse["error"]["code"], -32700, "{parse}");
    let (status, body) = post(&server.url, STRING_ARGUMENTS).await;
    assert_eq!(status, 200, "{body}");
    let params: Value = serde_json::from_str(&body).unwrap();
    assert_eq!(params["error"]["code"], -32602, "{params}");
    assert_eq!(params["id"], 7);
    // A well-formed message still reaches the SDK.
    let (status, body) = post(&server.url, INITIALIZE).await;
    assert_eq!(status, 200, "{body}");
    assert!(body.contains("\"serverInfo\""), "{body}");
    assert_eq!(server.stop().await, 0);
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
    let (_, grace) = tool_error(client.call_tool(as_operator("grace")).await);
    assert_eq!(grace["kind"], "not_found");
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
    let (_, got) = tool_error(call(&bob, "memory_get", json!({"id": episode})).await);
    assert_eq!(got["kind"], "not_found");
    let (message, write) =
        tool_error(call(&bob, "memory_add", json!({"content": "Bob was here"})).await);
    assert_eq!(write["kind"], "permission_denied", "{message}");
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

// one data directory / the CLI works while the MCP server runs on it, both ways
#[tokio::test(flavor = "multi_thread")]
async fn the_cli_and_the_mcp_server_run_at_once_on_one_data_directory() {
    let home = Home::new();
    let server = HttpServer::start(&home, &["--operator", "ada"], &[]).await;
    let client = server.client().await;
    let cli = |args: &[&str]| tokio::task::block_in_place(|| home.run(args));

    // The MCP server writes; a CLI command started meanwhile reads it.
    let added = structured(
        &call(
            &client,
            "memory_add",
            json!({"content": "Ada plays the cello on Sundays"}),
        )
        .await
        .unwrap(),
    );
    let cello = added["id"].as_str().unwrap().to_string();
    let got = cli(&["--json", "get", &cello]).json();
    assert_eq!(got["episode"]["content"], "Ada plays the cello on Sundays");

    // The CLI writes; the running MCP server reads it.
    let added = cli(&["--json", "add", "Ada keeps honeybees on her allotment"]).json();
    let bees = added["episodes"][0].as_str().unwrap().to_string();
    let got = structured(
        &call(&client, "memory_get", json!({"id": bees}))
            .await
            .unwrap(),
    );
    assert_eq!(
        got["episode"]["content"],
        "Ada keeps honeybees on her allotment"
    );
    let found = text(
        &call(&client, "memory_search", json!({"query": "honeybees"}))
            .await
            .unwrap(),
    );
    assert!(found.contains(&bees), "{found}");
    let found = cli(&["--json", "search", "cello"]).json();
    assert!(found.to_string().contains(&cello), "{found}");

    let status = cli(&["--json", "status"]).json();
    assert_eq!(status["server_shared"], true, "{status}");
    // The CLI exited without stopping the server: the MCP server still answers.
    let status = call(&client, "memory_status", json!({})).await.unwrap();
    assert_ne!(status.is_error, Some(true), "{status:?}");
    client.cancel().await.unwrap();
    assert_eq!(server.stop().await, 0);
    // With the MCP server gone, the CLI starts the server itself.
    assert_eq!(
        home.run(&["--json", "status"]).json()["server_shared"],
        false
    );
    let got = home.run(&["--json", "get", &bees]).json();
    assert_eq!(
        got["episode"]["content"],
        "Ada keeps honeybees on her allotment"
    );
}

// tools / `--tools openclaw`: the OpenClaw plugin's names, run over MCP
#[tokio::test(flavor = "multi_thread")]
async fn with_tools_openclaw_the_server_lists_and_runs_the_openclaw_tools() {
    let home = Home::new();
    let client = stdio_client(&home, &["--operator", "ada", "mcp", "--tools", "openclaw"]).await;
    let tools = client.list_all_tools().await.unwrap();
    let names: Vec<&str> = tools.iter().map(|t| t.name.as_ref()).collect();
    assert_eq!(
        names,
        [
            "memory_recall",
            "memory_store",
            "memory_forget",
            "memory_status",
            "memory_get",
            "memory_recent",
            "memory_build_indices",
            "memory_build_communities",
        ]
    );
    let defined = gralkor::agent::openclaw::ToolSet::OpenClaw.tools();
    for (listed, d) in tools.iter().zip(&defined) {
        assert_eq!(listed.name, d.name);
        assert_eq!(Value::Object((*listed.input_schema).clone()), d.parameters);
    }
    assert_eq!(strict_violations(&defined), Vec::<String>::new());
    // The jido names are not this server's tools.
    let unknown = mcp_error(call(&client, "memory_search", json!({"query": "x"})).await);
    assert_eq!(unknown.code, ErrorCode::INVALID_PARAMS);

    let session = |tool: &str, args: Value| {
        let mut meta = RequestMetaObject::default();
        meta.insert("session_id".into(), json!("chat-42"));
        let mut params =
            CallToolRequestParams::new(tool.to_string()).with_arguments(arguments(args));
        params.meta = Some(meta);
        params
    };
    let stored = client
        .call_tool(session(
            "memory_store",
            json!({"content": "Ada keeps honeybees on her allotment", "source_description": null,
                   "involves": null, "group_id": null, "longTerm": false}),
        ))
        .await
        .unwrap();
    assert_eq!(text(&stored), "Ingesting.");
    // Without a session, `longTerm: false` has no group to write to.
    let (message, error) = tool_error(
        call(
            &client,
            "memory_store",
            json!({"content": "x", "source_description": null, "involves": null,
                   "group_id": null, "longTerm": false}),
        )
        .await,
    );
    assert_eq!(
        error["field"], "memory_store.arguments.longTerm",
        "{message}"
    );
    // The write is in the background: recall until it lands (bounded).
    let mut recalled = String::new();
    for _ in 0..100 {
        recalled = text(
            &client
                .call_tool(session(
                    "memory_recall",
                    json!({"query": "honeybees allotment", "limit": null, "scope": "session"}),
                ))
                .await
                .unwrap(),
        );
        if recalled.contains("honeybees") {
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
    }
    assert!(
        recalled.contains("Ada keeps honeybees on her allotment"),
        "{recalled}"
    );
    let long_term = text(
        &call(
            &client,
            "memory_recall",
            json!({"query": "honeybees allotment", "limit": null, "scope": "long-term"}),
        )
        .await
        .unwrap(),
    );
    assert!(!long_term.contains("honeybees"), "{long_term}");
    let (message, error) = tool_error(
        call(
            &client,
            "memory_forget",
            json!({"episode_id": "not-a-uuid"}),
        )
        .await,
    );
    assert!(
        error["field"]
            .as_str()
            .unwrap()
            .starts_with("memory_forget.arguments"),
        "{message}"
    );
    client.cancel().await.unwrap();

    // `gralkor search --scope … --session …` reads the same session group (the
    // server has stopped: its background write is done).
    let contents = |scope: &str| -> Vec<String> {
        home.run(&[
            "--json",
            "search",
            "--scope",
            scope,
            "--session",
            "chat-42",
            "honeybees allotment",
        ])
        .json()
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|r| r["hit"]["content"].as_str().map(str::to_string))
        .collect()
    };
    assert!(contents("session").iter().any(|c| c.contains("honeybees")));
    assert!(contents("all").iter().any(|c| c.contains("honeybees")));
    assert!(
        !contents("long-term")
            .iter()
            .any(|c| c.contains("honeybees"))
    );
    let refused = home.run(&["search", "--scope", "all", "honeybees"]);
    assert_eq!(refused.code, 2, "{refused:?}");
    assert!(refused.stderr.contains("--session"), "{refused:?}");
}

// the OpenClaw tool set › the default group: with GRALKOR_DEFAULT_GROUP, the server's
// `memory_store` without `group_id` writes there, as a member written at startup
#[tokio::test]
async fn with_a_default_group_memory_store_without_group_id_writes_there() {
    let home = Home::new();
    let default_group = [
        ("GRALKOR_DEFAULT_GROUP", "main"),
        ("GRALKOR_DEFAULT_GROUP_MEMBERS", "agent:bot"),
    ];
    let guarded = [
        "--operator",
        "ada",
        "--authorizer",
        "embedded",
        "--as",
        "agent:bot",
    ];
    let mut cmd = command(&home, &guarded);
    cmd.args(["mcp", "--tools", "openclaw"]).envs(default_group);
    let (transport, _) = TokioChildProcess::builder(cmd)
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let client = ClientConfig::default().serve(transport).await.unwrap();
    // No add-member ran: the agent is the default group's member from startup.
    let stored = call(
        &client,
        "memory_store",
        json!({"content": "The bot oils the harbour crane on Fridays", "source_description": null,
               "involves": null, "group_id": null, "longTerm": null}),
    )
    .await
    .unwrap();
    assert_eq!(text(&stored), "Ingesting.");
    // Stopping the server waits for its background write.
    client.cancel().await.unwrap();
    let search = |dest: &str| -> Vec<String> {
        let mut cmd = home.command();
        cmd.arg("--text-only")
            .args(guarded)
            .args(["--json", "search", "-d", dest, "harbour crane"])
            .envs(default_group);
        common::Run::from(cmd.output().unwrap())
            .json()
            .as_array()
            .unwrap()
            .iter()
            .filter_map(|r| r["hit"]["content"].as_str().map(str::to_string))
            .collect()
    };
    assert!(
        search("main").iter().any(|c| c.contains("harbour crane")),
        "not in the default group"
    );
}
