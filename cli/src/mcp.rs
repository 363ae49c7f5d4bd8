//! `gralkor mcp`: the memory tools over the Model Context Protocol (rmcp), on stdio or
//! streamable HTTP.
//!
//! * Tools: the agent layer's definitions — `memory_search`, `memory_add`, the
//!   inspection tools (`memory_get`, `memory_forget` — an episode or a whole session —,
//!   `memory_status`, `memory_recent`, [`inspection_tools`]) and the admin tools with
//!   their "DO NOT CALL unless the user asked" descriptions. `memory_search`,
//!   `memory_add` and the inspection tools are run here; the admin tools by the agent
//!   layer's [`call_tool`]. Every schema is strict-mode compatible (every property
//!   required, the optional ones nullable); `memory_add` adds an optional
//!   `idempotency_key`. Tools carry annotations (`readOnlyHint`, `destructiveHint`,
//!   `idempotentHint`).
//! * `--tools openclaw` serves the OpenClaw plugin's names instead of `memory_search`
//!   and `memory_add` ([`ToolSet::OpenClaw`]): `memory_recall`, `memory_store`,
//!   `memory_forget {episode_id}` and `memory_status`, run by the agent layer's
//!   [`ToolSet::call`] (recall and store) and here (forget and status); the other
//!   inspection tools and the admin tools come with either set. The request's
//!   `_meta.session_id` names the conversation, whose session group (`session-<id>`)
//!   `memory_recall`'s `scope` and `memory_store`'s `longTerm: false` use.
//! * Results: the text a model reads (with ids and times) and, beside it, structured
//!   content carrying the ids, `valid_at` / `invalid_at` / `created_at` and the
//!   Destination. `memory_add` writes through the server's `--lens` (default
//!   `personal-chat`) and answers the episode id; the same content (or the same
//!   `idempotency_key`) added again by the operator to that Destination is the same
//!   episode, not a new one.
//! * The operator is the server's (`--operator` / `GRALKOR_OPERATOR`), or, when the
//!   server is started with `--operator-from-request` and has none, the request's
//!   `_meta.operator_id` — set by the MCP client, never by the model's arguments. A
//!   request with neither is refused; no operator is ever invented.
//! * The subject (who asks, for a server with an authorizer) is the server's
//!   (`--as` / `GRALKOR_SUBJECT`, required with `--authorizer embedded`): every tool
//!   runs as them, and requests cannot change it.
//! * Long operations (the admin tools) run as MCP tasks (the `io.modelcontextprotocol/tasks`
//!   extension) when the client declares it.
//! * Errors: a tool's failure (bad arguments, not found, refused, a fault) is a tool
//!   result with `isError: true`, its text naming the field and the rule, its
//!   structured content `{"error": {"kind", "message", "retryable", "field"}}`, so the
//!   model can read it and retry. Protocol errors are JSON-RPC errors: an unknown tool
//!   or a missing `_meta.operator_id` `-32602`; `tools/call` with arguments that are
//!   not an object `-32602`; a message that is not JSON `-32700` (stdio and HTTP,
//!   [`screen`]).

use std::sync::Arc;

use gralkor::Error;
use gralkor::NativeClient;
use gralkor::access::Subject;
use gralkor::agent::openclaw::ToolSet;
use gralkor::agent::tools::{
    ForgetTarget, MEMORY_BUILD_COMMUNITIES, MEMORY_BUILD_INDICES, MEMORY_FORGET, MEMORY_GET,
    MEMORY_STATUS, ToolContext, ToolDefinition, admin_tools, call_tool, inspection_tools,
    memory_tools,
};
use gralkor::client::{Client, Content, Hit, OperatorId, Search, SearchResult};
use rmcp::model::{
    CallToolRequestParams, CallToolResponse, CallToolResult, CancelTaskParams, ContentBlock,
    CreateTaskResult, ErrorData, GetTaskParams, GetTaskResult, Implementation, JsonObject,
    ListToolsResult, PaginatedRequestParams, ServerCapabilities, ServerConfig, Tool,
    ToolAnnotations,
};
use rmcp::service::RequestContext;
use rmcp::task_manager::{TaskExit, TaskManager, TaskOptions};
use rmcp::{RoleServer, ServerHandler};
use serde::Deserialize;
use serde_json::{Value, json};
use uuid::Uuid;

use crate::args::McpArgs;
use crate::commands;
use crate::failure::{Failure, Outcome};

/// The request `_meta` key naming the operator (with `--operator-from-request`).
pub const OPERATOR_META: &str = "operator_id";

/// The names of the agent layer's tools this server runs itself (the constants are
/// the library's internals).
const MEMORY_SEARCH: &str = "memory_search";
const MEMORY_ADD: &str = "memory_add";
const MEMORY_RECENT: &str = "memory_recent";
const MEMORY_RECALL: &str = "memory_recall";
const MEMORY_STORE: &str = "memory_store";
/// The request `_meta` key naming the conversation (the OpenClaw tools' session group).
pub const SESSION_META: &str = "session_id";

/// The Lens `memory_add` writes through when the server names none (as `gralkor add`).
const DEFAULT_LENS: &str = "personal-chat";

/// The longest `memory_search` query, in bytes (as the agent layer's tool).
const MAX_QUERY_BYTES: usize = 8 * 1024;

/// `memory_add` as this server runs it: the agent layer's definition, answering the
/// episode id, with an optional caller-supplied idempotency key.
fn memory_add_tool(mut d: ToolDefinition) -> ToolDefinition {
    d.description = "Store an insight in long-term memory, beyond the conversation that is \
                     already captured automatically. Answers the episode's id; adding the \
                     same content again (or with the same idempotency_key) answers the same \
                     id and stores nothing new."
        .into();
    if let Some(properties) = d.parameters["properties"].as_object_mut() {
        properties.insert(
            "idempotency_key".into(),
            json!({
                "type": ["string", "null"],
                "description": "A key of your own that makes retries safe: the same key is \
                                the same episode (null: the content itself is the key).",
            }),
        );
    }
    if let Some(required) = d.parameters["required"].as_array_mut() {
        required.push(json!("idempotency_key"));
    }
    d
}

/// Every tool the server lists, in order: the memory tools of `set` (jido's
/// `memory_search`, `memory_add`; or the OpenClaw plugin's `memory_recall`,
/// `memory_store`, `memory_forget`, `memory_status`), the inspection tools not
/// already listed, then the admin tools.
pub fn tools_of(set: ToolSet) -> Vec<ToolDefinition> {
    let mut all: Vec<ToolDefinition> = match set {
        ToolSet::OpenClaw => set.tools(),
        _ => memory_tools()
            .into_iter()
            .map(|d| {
                if d.name == MEMORY_ADD {
                    memory_add_tool(d)
                } else {
                    d
                }
            })
            .collect(),
    };
    for t in inspection_tools() {
        if !all.iter().any(|a| a.name == t.name) {
            all.push(t);
        }
    }
    all.extend(admin_tools());
    all
}

/// What a tool promises about its effects.
fn annotations(name: &str) -> ToolAnnotations {
    let a = ToolAnnotations::new();
    match name {
        MEMORY_SEARCH | MEMORY_RECALL | MEMORY_GET | MEMORY_STATUS | MEMORY_RECENT => {
            a.read_only(true)
        }
        MEMORY_STORE => a.read_only(false).destructive(false).idempotent(false),
        MEMORY_ADD => a.read_only(false).destructive(false).idempotent(true),
        MEMORY_FORGET => a.read_only(false).destructive(true).idempotent(true),
        MEMORY_BUILD_INDICES => a.read_only(false).destructive(false).idempotent(true),
        _ => a.read_only(false).destructive(false).idempotent(false),
    }
    .open_world(false)
}

fn mcp_tool(d: &ToolDefinition) -> Tool {
    let schema: JsonObject = match &d.parameters {
        Value::Object(o) => o.clone(),
        _ => JsonObject::new(),
    };
    Tool::new(d.name.clone(), d.description.clone(), Arc::new(schema))
        .annotate(annotations(&d.name))
}

/// Reads an absent or `null` argument as the default.
fn null_as_default<'de, D, T>(deserializer: D) -> Result<T, D::Error>
where
    D: serde::Deserializer<'de>,
    T: Default + Deserialize<'de>,
{
    Ok(Option::<T>::deserialize(deserializer)?.unwrap_or_default())
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct ByIdArgs {
    id: String,
    #[serde(default)]
    destination: Option<String>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct NoArgs {}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct SearchArgs {
    query: String,
    #[serde(default, deserialize_with = "null_as_default")]
    destinations: Vec<String>,
    #[serde(default, deserialize_with = "null_as_default")]
    lenses: Vec<String>,
    #[serde(default)]
    as_of: Option<String>,
}

#[derive(Deserialize, Default, Clone, Copy)]
#[serde(rename_all = "snake_case")]
enum SourceKind {
    Conversation,
    #[default]
    Document,
    StructuredRecord,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct AddArgs {
    content: String,
    #[serde(default, deserialize_with = "null_as_default")]
    source_kind: SourceKind,
    #[serde(default)]
    source_description: Option<String>,
    #[serde(default)]
    idempotency_key: Option<String>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RecentArgs {
    #[serde(default)]
    destination: Option<String>,
    #[serde(default)]
    limit: Option<i64>,
}

fn invalid(field: String, rule: impl Into<String>) -> Failure {
    Failure::Gralkor(Error::InvalidInput {
        field,
        rule: rule.into(),
    })
}

fn args<T: for<'de> Deserialize<'de>>(tool: &str, arguments: &Value) -> Result<T, Failure> {
    let arguments = if arguments.is_null() {
        &json!({})
    } else {
        arguments
    };
    serde_json::from_value(arguments.clone())
        .map_err(|e| invalid(format!("{tool}.arguments"), e.to_string()))
}

fn episode_id(tool: &str, id: &str) -> Result<Uuid, Failure> {
    Uuid::parse_str(id.trim()).map_err(|e| {
        invalid(
            format!("{tool}.arguments.id"),
            format!("must be an episode uuid: {e}"),
        )
    })
}

/// A failure that is the request's, not the tool's: a JSON-RPC error.
fn protocol_error(failure: &Failure) -> ErrorData {
    let data = Some(json!({"kind": failure.kind(), "retryable": false}));
    ErrorData::invalid_params(failure.to_string(), data)
}

/// A tool's failure as a result the model reads: `isError`, the message naming the
/// field, and `{"error": {…}}` as structured content.
fn error_result(failure: &Failure) -> CallToolResult {
    let retryable = matches!(failure, Failure::Gralkor(e) if e.is_retryable());
    let field = match failure {
        Failure::Gralkor(Error::InvalidInput { field, .. } | Error::Config { field, .. }) => {
            Some(field.clone())
        }
        _ => None,
    };
    let message = failure.to_string();
    let mut result = CallToolResult::error(vec![ContentBlock::text(message.clone())]);
    result.structured_content = Some(json!({"error": {
        "kind": failure.kind(),
        "message": message,
        "retryable": retryable,
        "field": field,
    }}));
    result
}

/// A tool's answer: the text the model reads and the structured content beside it.
struct Answer {
    text: String,
    structured: Option<Value>,
}

impl Answer {
    fn text(text: String) -> Answer {
        Answer {
            text,
            structured: None,
        }
    }

    fn result(self) -> CallToolResult {
        let mut result = CallToolResult::success(vec![ContentBlock::text(self.text)]);
        result.structured_content = self.structured;
        result
    }
}

/// One search result as structured content.
fn result_json(r: &SearchResult) -> Value {
    match &r.hit {
        Hit::Fact(f) => json!({
            "type": "fact",
            "id": f.uuid,
            "destination": r.destination,
            "text": f.fact,
            "valid_at": f.valid_at,
            "invalid_at": f.invalid_at,
            "expired_at": f.expired_at,
            "created_at": f.created_at,
            "episodes": f.sources.iter().map(|s| s.episode).collect::<Vec<_>>(),
        }),
        Hit::Episode(e) => json!({
            "type": "episode",
            "id": e.uuid,
            "destination": r.destination,
            "text": e.content,
            "valid_at": e.valid_at,
            "invalid_at": null,
            "expired_at": null,
            "created_at": e.created_at,
            "episodes": [e.uuid],
        }),
        other => json!({"type": "other", "destination": r.destination, "hit": other}),
    }
}

/// One search result as a line the model reads: the text, then its id, Destination
/// and times.
fn result_line(r: &Value) -> String {
    let time = |k: &str| r[k].as_str().map(str::to_string);
    let mut when = Vec::new();
    if let Some(t) = time("valid_at") {
        when.push(format!("valid from {t}"));
    }
    if let Some(t) = time("invalid_at") {
        when.push(format!("invalid from {t}"));
    }
    if let Some(t) = time("created_at") {
        when.push(format!("stored {t}"));
    }
    format!(
        "- {} [{} {} in {}; {}]",
        crate::failure::one_line(r["text"].as_str().unwrap_or_default()),
        r["type"].as_str().unwrap_or_default(),
        r["id"].as_str().unwrap_or_default(),
        r["destination"].as_str().unwrap_or_default(),
        when.join(", ")
    )
}

/// The memory server: one client, the server's operator (if any) and Lens.
#[derive(Clone)]
pub struct MemoryServer {
    client: NativeClient,
    config: gralkor::Config,
    /// The default group's name: where `memory_store` without `group_id` writes.
    default_group: Option<String>,
    operator: Option<OperatorId>,
    subject: Option<Subject>,
    operator_from_request: bool,
    lens: Option<String>,
    tool_set: ToolSet,
    tasks: TaskManager,
}

/// The tools that may take long: run as tasks for a client that supports them.
const LONG: [&str; 2] = [MEMORY_BUILD_COMMUNITIES, MEMORY_BUILD_INDICES];

impl MemoryServer {
    /// The operator of a request: the server's, else (when allowed) the request's
    /// `_meta.operator_id`.
    fn operator(&self, meta: &JsonObject) -> Result<OperatorId, Failure> {
        if let Some(op) = &self.operator {
            return Ok(op.clone());
        }
        if self.operator_from_request {
            return match meta.get(OPERATOR_META) {
                Some(Value::String(id)) => Ok(OperatorId::new(id.clone())?),
                Some(_) => Err(invalid(
                    format!("_meta.{OPERATOR_META}"),
                    "must be a string",
                )),
                None => Err(invalid(
                    format!("_meta.{OPERATOR_META}"),
                    "must be set: this server takes the operator from each request \
                     and has none of its own",
                )),
            };
        }
        Err(Failure::Gralkor(Error::Config {
            field: "operator".into(),
            rule: "is not configured on this server".into(),
        }))
    }

    /// The request's own faults (a JSON-RPC error), checked before the tool runs.
    fn check_request(&self, name: &str, meta: &JsonObject) -> Result<OperatorId, ErrorData> {
        if !tools_of(self.tool_set).iter().any(|t| t.name == name) {
            return Err(protocol_error(&invalid(
                "tool".into(),
                format!("`{name}` is not a gralkor tool"),
            )));
        }
        self.operator(meta).map_err(|f| protocol_error(&f))
    }

    async fn search(&self, op: OperatorId, arguments: &Value) -> Outcome<Answer> {
        let a: SearchArgs = args(MEMORY_SEARCH, arguments)?;
        if a.query.len() > MAX_QUERY_BYTES {
            return Err(invalid(
                format!("{MEMORY_SEARCH}.arguments.query"),
                format!(
                    "must be at most {MAX_QUERY_BYTES} bytes (got {}): ask a question, not \
                     a document",
                    a.query.len()
                ),
            ));
        }
        if a.query.trim().is_empty() {
            return Err(invalid(
                format!("{MEMORY_SEARCH}.arguments.query"),
                "must not be blank: say what to look for",
            ));
        }
        let mut search = Search::new(&op, &a.query)
            .destinations(a.destinations)
            .lenses(a.lenses)
            .facts();
        if let Some(text) = a.as_of.as_deref() {
            let t = text.trim().parse().map_err(|e| {
                invalid(
                    format!("{MEMORY_SEARCH}.arguments.as_of"),
                    format!(
                        "must be an RFC 3339 date-time such as 2024-06-01T00:00:00Z (got \
                         `{text}`): {e}"
                    ),
                )
            })?;
            search = search.as_of(t);
        }
        if let Some(s) = &self.subject {
            search = search.subject(s.clone());
        }
        let results = self.client.search(&search).await?;
        let listed: Vec<Value> = results.iter().map(result_json).collect();
        let text = if listed.is_empty() {
            "No matching facts.".to_string()
        } else {
            listed
                .iter()
                .map(result_line)
                .collect::<Vec<_>>()
                .join("\n")
        };
        Ok(Answer {
            text,
            structured: Some(json!({"results": listed})),
        })
    }

    async fn add(&self, op: OperatorId, arguments: &Value) -> Outcome<Answer> {
        let a: AddArgs = args(MEMORY_ADD, arguments)?;
        let field = |name: &str| format!("{MEMORY_ADD}.arguments.{name}");
        let content = match a.source_kind {
            SourceKind::Conversation => Content::conversation(a.content),
            SourceKind::Document => Content::document(a.content),
            SourceKind::StructuredRecord => {
                let record: Value = serde_json::from_str(&a.content).map_err(|e| {
                    invalid(
                        field("content"),
                        format!("must be a JSON object for a structured_record: {e}"),
                    )
                })?;
                if !record.is_object() {
                    return Err(invalid(
                        field("content"),
                        "must be a JSON object for a structured_record",
                    ));
                }
                Content::structured(record)
            }
        };
        let id = match a.idempotency_key {
            Some(key) if key.trim().is_empty() => {
                return Err(invalid(
                    field("idempotency_key"),
                    "must not be blank (null: the content is the key)",
                ));
            }
            Some(key) => format!("mcp-key:{key}"),
            None => commands::content_id("cli", &content),
        };
        let lens = self.lens.as_deref().unwrap_or(DEFAULT_LENS);
        let description = a.source_description.unwrap_or_else(|| "manual".into());
        let added = commands::remember(
            &self.client,
            &op,
            self.subject.as_ref(),
            lens,
            id,
            content,
            &description,
            None,
        )
        .await?;
        let first = added.episodes.first().copied();
        let text = match (first, added.written) {
            (Some(e), true) => format!("Remembered as episode {e} in {}.", added.destination),
            (Some(e), false) => format!(
                "Already remembered as episode {e} in {} (nothing new was stored).",
                added.destination
            ),
            (None, _) => format!("Nothing was stored in {}.", added.destination),
        };
        Ok(Answer {
            text,
            structured: Some(json!({
                "id": first,
                "episodes": added.episodes,
                "destination": added.destination,
                "lens": added.lens,
                "written": added.written,
            })),
        })
    }

    async fn run_tool(
        &self,
        name: &str,
        arguments: &Value,
        op: OperatorId,
        session: Option<String>,
    ) -> Outcome<Answer> {
        let subject = self.subject.as_ref();
        match name {
            MEMORY_RECALL | MEMORY_STORE => {
                let mut ctx = ToolContext::new(op);
                if let Some(lens) = &self.lens {
                    ctx = ctx.lens(lens.clone());
                }
                // `memory_store` without `group_id` writes to the default group.
                if let Some(group) = &self.default_group {
                    ctx = ctx.default_group(group.clone());
                }
                if let Some(subject) = subject {
                    ctx = ctx.subject(subject.clone());
                }
                if let Some(session) = session {
                    ctx = ctx.session(session);
                }
                Ok(Answer::text(
                    self.tool_set
                        .call(&self.client, &ctx, name, arguments)
                        .await?,
                ))
            }
            MEMORY_SEARCH => self.search(op, arguments).await,
            MEMORY_ADD => self.add(op, arguments).await,
            MEMORY_GET => {
                let a: ByIdArgs = args(MEMORY_GET, arguments)?;
                let uuid = episode_id(MEMORY_GET, &a.id)?;
                let (place, memory) =
                    commands::find_memory(&self.client, &op, subject, uuid, a.destination.as_ref())
                        .await?;
                let value = memory.json(&place.name);
                Ok(Answer {
                    text: value.to_string(),
                    structured: Some(value),
                })
            }
            MEMORY_FORGET => match self.tool_set.forget_target(arguments)? {
                ForgetTarget::Episode(uuid, destination) => {
                    let place = commands::forget_episode(
                        &self.client,
                        &op,
                        subject,
                        uuid,
                        destination.as_ref(),
                    )
                    .await?;
                    Ok(Answer {
                        text: format!("Forgot episode {uuid} in {}.", place.name),
                        structured: Some(json!({
                            "forgotten": "episode",
                            "id": uuid,
                            "destination": place.name,
                        })),
                    })
                }
                ForgetTarget::Session(session) => {
                    let mut request = gralkor::client::PurgeSession::new(op, session.clone());
                    if let Some(s) = subject {
                        request = request.subject(s.clone());
                    }
                    let report = self.client.purge_session(&request).await?;
                    let n = report.episodes.len();
                    Ok(Answer {
                        text: format!(
                            "Forgot session {session}: {n} {}.",
                            if n == 1 { "episode" } else { "episodes" }
                        ),
                        structured: Some(json!({
                            "forgotten": "session",
                            "session": session,
                            "episodes": n,
                        })),
                    })
                }
            },
            MEMORY_STATUS => {
                let NoArgs {} = args(MEMORY_STATUS, arguments)?;
                let status =
                    commands::status_report(&self.client, &self.config, Some(&op), subject).await?;
                let value = serde_json::to_value(&status)
                    .map_err(|e| Failure::Io("rendering the status".into(), e.into()))?;
                Ok(Answer {
                    text: value.to_string(),
                    structured: Some(value),
                })
            }
            MEMORY_RECENT => {
                let a: RecentArgs = args(MEMORY_RECENT, arguments)?;
                let limit = a.limit.unwrap_or(10);
                if !(1..=100).contains(&limit) {
                    return Err(invalid(
                        format!("{MEMORY_RECENT}.arguments.limit"),
                        format!("must be from 1 to 100 (got {limit})"),
                    ));
                }
                let named: Vec<String> = a.destination.into_iter().collect();
                let listed =
                    commands::recent(&self.client, &op, subject, &named, limit as usize).await?;
                let episodes: Vec<Value> = listed
                    .iter()
                    .map(|l| {
                        json!({
                            "id": l.episode.uuid,
                            "destination": l.destination,
                            "valid_at": l.episode.valid_at,
                            "created_at": l.episode.created_at,
                            "source_kind": l.episode.source_kind.as_str(),
                            "source_description": l.episode.source_description,
                            "state": l.state,
                            "content": l.episode.content,
                        })
                    })
                    .collect();
                let text = if listed.is_empty() {
                    "No episodes.".to_string()
                } else {
                    listed
                        .iter()
                        .map(|l| {
                            format!(
                                "- {} [episode {} in {}; stored {}]",
                                commands::preview(&l.episode.content, 200),
                                l.episode.uuid,
                                l.destination,
                                l.episode.created_at
                            )
                        })
                        .collect::<Vec<_>>()
                        .join("\n")
                };
                Ok(Answer {
                    text,
                    structured: Some(json!({"episodes": episodes})),
                })
            }
            _ => {
                let mut ctx = ToolContext::new(op);
                if let Some(lens) = &self.lens {
                    ctx = ctx.lens(lens.clone());
                }
                if let Some(subject) = subject {
                    ctx = ctx.subject(subject.clone());
                }
                Ok(Answer::text(
                    call_tool(&self.client, &ctx, name, arguments).await?,
                ))
            }
        }
    }
}

impl ServerHandler for MemoryServer {
    fn get_info(&self) -> ServerConfig {
        ServerConfig::new(
            ServerCapabilities::builder()
                .enable_tools()
                .enable_tasks()
                .build(),
        )
        .with_server_info(Implementation::new("gralkor", env!("CARGO_PKG_VERSION")))
        .with_instructions(
            "Long-term memory: memory_search before answering from past context, \
                 memory_add to remember an insight (it answers the episode id); \
                 memory_recent lists what was remembered last; memory_get and \
                 memory_forget by the ids the other tools answer. The admin tools are \
                 not for agents unless the user asked.",
        )
    }

    async fn get_task(
        &self,
        request: GetTaskParams,
        _context: RequestContext<RoleServer>,
    ) -> Result<GetTaskResult, ErrorData> {
        Ok(GetTaskResult::new(self.tasks.get_task(&request.task_id)?))
    }

    async fn cancel_task(
        &self,
        request: CancelTaskParams,
        _context: RequestContext<RoleServer>,
    ) -> Result<(), ErrorData> {
        self.tasks.cancel_task(&request.task_id)
    }

    async fn list_tools(
        &self,
        _request: Option<PaginatedRequestParams>,
        _context: RequestContext<RoleServer>,
    ) -> Result<ListToolsResult, ErrorData> {
        Ok(ListToolsResult::with_all_items(
            tools_of(self.tool_set).iter().map(mcp_tool).collect(),
        ))
    }

    async fn call_tool(
        &self,
        request: CallToolRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, ErrorData> {
        let arguments = request.arguments.map(Value::Object).unwrap_or(Value::Null);
        let meta: &JsonObject = &context.meta;
        let op = self.check_request(&request.name, meta)?;
        let session = match meta.get(SESSION_META) {
            None | Some(Value::Null) => None,
            Some(Value::String(s)) => Some(s.clone()),
            Some(_) => {
                return Err(protocol_error(&invalid(
                    format!("_meta.{SESSION_META}"),
                    "must be a string",
                )));
            }
        };
        let as_task = LONG.contains(&request.name.as_ref())
            && context
                .client_capabilities()
                .is_some_and(|caps| caps.supports_tasks());
        if as_task {
            let (server, name) = (self.clone(), request.name.to_string());
            let task = self.tasks.spawn(
                TaskOptions::new().with_poll_interval_ms(200),
                move |ctx| {
                    Box::pin(async move {
                        tokio::select! {
                            _ = ctx.cancelled() => Err(TaskExit::Cancelled),
                            done = server.run_tool(&name, &arguments, op, session) => match done {
                                Ok(answer) => Ok(answer.result()),
                                Err(failure) => Ok(error_result(&failure)),
                            },
                        }
                    })
                },
            );
            return Ok(CallToolResponse::Task(CreateTaskResult::new(task)));
        }
        match self.run_tool(&request.name, &arguments, op, session).await {
            Ok(answer) => Ok(answer.result().into()),
            Err(failure) => {
                tracing::warn!(tool = %request.name, error = %failure, "tool call failed");
                Ok(error_result(&failure).into())
            }
        }
    }
}

fn io(context: &str, e: impl std::fmt::Display) -> Failure {
    Failure::Io(context.into(), std::io::Error::other(e.to_string()))
}

/// Serves until standard input closes (stdio) or a termination signal (HTTP).
pub async fn serve(
    client: &NativeClient,
    config: &gralkor::Config,
    default_group: Option<&gralkor::destination::DefaultGroup>,
    operator: Option<&OperatorId>,
    subject: Option<&Subject>,
    args: &McpArgs,
) -> Outcome {
    if operator.is_none() && !args.operator_from_request {
        return Err(Failure::Gralkor(Error::Config {
            field: "operator".into(),
            rule: "must be set with --operator or GRALKOR_OPERATOR for `gralkor mcp`, or \
                   --operator-from-request given to take it from each request's \
                   `_meta.operator_id`"
                .into(),
        }));
    }
    if let Some(lens) = &args.lens {
        client.runtime().snapshot().lens("--lens", lens)?;
    }
    let server = MemoryServer {
        client: client.clone(),
        config: config.clone(),
        default_group: default_group.map(|g| g.name().to_string()),
        operator: operator.cloned(),
        subject: subject.cloned(),
        operator_from_request: args.operator_from_request,
        lens: args.lens.clone(),
        tool_set: args.tools.into(),
        tasks: TaskManager::new(),
    };
    match args.http {
        None => stdio::serve(server).await,
        Some(addr) => http::serve(server, addr, &args.allow_hosts).await,
    }
}

/// The JSON-RPC error object of a response to request `id`.
fn rpc_error(id: Value, code: i32, message: String) -> Value {
    json!({"jsonrpc": "2.0", "id": id, "error": {"code": code, "message": message}})
}

fn json_type(value: &Value) -> &'static str {
    match value {
        Value::Null => "null",
        Value::Bool(_) => "boolean",
        Value::Number(_) => "number",
        Value::String(_) => "string",
        Value::Array(_) => "array",
        Value::Object(_) => "object",
    }
}

/// The answer to an incoming message the SDK would answer wrongly, if it is one: a
/// message that is not JSON is `-32700` (parse error); a `tools/call` whose `params`
/// are not an object, whose `name` is not a string or whose `arguments` are not an
/// object is `-32602` (invalid params). Everything else goes on to the SDK.
pub(crate) fn screen(message: &[u8]) -> Option<Value> {
    let value: Value = match serde_json::from_slice(message) {
        Ok(v) => v,
        Err(e) => return Some(rpc_error(Value::Null, -32700, format!("Parse error: {e}"))),
    };
    let object = value.as_object()?;
    if object.get("method").and_then(Value::as_str) != Some("tools/call") {
        return None;
    }
    let id = object.get("id").cloned().unwrap_or(Value::Null);
    let invalid = |rule: String| {
        Some(rpc_error(
            id.clone(),
            -32602,
            format!("Invalid params: {rule}"),
        ))
    };
    let Some(params) = object.get("params").and_then(Value::as_object) else {
        return invalid("tools/call `params` must be an object with the tool's `name`".into());
    };
    if !params.get("name").is_some_and(Value::is_string) {
        return invalid("tools/call `params.name` must be the tool's name, a string".into());
    }
    match params.get("arguments") {
        None | Some(Value::Null) | Some(Value::Object(_)) => None,
        Some(other) => invalid(format!(
            "tools/call `params.arguments` must be an object of the tool's arguments (got a \
             JSON {})",
            json_type(other)
        )),
    }
}

mod stdio {
    use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader};

    use super::{MemoryServer, io, screen};
    use crate::failure::Outcome;
    use rmcp::ServiceExt;

    /// MCP on standard input and output, each incoming line screened first
    /// ([`screen`]): the SDK reads the others through an in-process pipe, and its
    /// answers and the screen's go to standard output whole lines at a time.
    pub async fn serve(server: MemoryServer) -> Outcome {
        let (ours, theirs) = tokio::io::duplex(1 << 16);
        let (our_read, mut our_write) = tokio::io::split(ours);
        let (lines_tx, mut lines_rx) = tokio::sync::mpsc::unbounded_channel::<Vec<u8>>();
        let writer = tokio::spawn(async move {
            let mut stdout = tokio::io::stdout();
            while let Some(line) = lines_rx.recv().await {
                if stdout.write_all(&line).await.is_err() || stdout.flush().await.is_err() {
                    break;
                }
            }
        });
        let answers = lines_tx.clone();
        let outgoing = tokio::spawn(async move {
            let mut from_sdk = BufReader::new(our_read);
            loop {
                let mut line = Vec::new();
                match from_sdk.read_until(b'\n', &mut line).await {
                    Ok(0) | Err(_) => break,
                    Ok(_) => {
                        if answers.send(line).is_err() {
                            break;
                        }
                    }
                }
            }
        });
        let incoming = tokio::spawn(async move {
            let mut stdin = BufReader::new(tokio::io::stdin());
            loop {
                let mut line = Vec::new();
                match stdin.read_until(b'\n', &mut line).await {
                    Ok(0) | Err(_) => break,
                    Ok(_) => {}
                }
                let message = line.trim_ascii();
                if message.is_empty() {
                    continue;
                }
                match screen(message) {
                    Some(error) => {
                        tracing::warn!(error = %error, "refused an MCP message");
                        let mut answer = error.to_string().into_bytes();
                        answer.push(b'\n');
                        if lines_tx.send(answer).is_err() {
                            break;
                        }
                    }
                    None => {
                        if !line.ends_with(b"\n") {
                            line.push(b'\n');
                        }
                        if our_write.write_all(&line).await.is_err() {
                            break;
                        }
                    }
                }
            }
            // End of input: the SDK sees its input close and stops.
            let _ = our_write.shutdown().await;
        });
        let running = server
            .serve(theirs)
            .await
            .map_err(|e| io("starting the MCP server on stdio", e))?;
        let served = running.waiting().await;
        incoming.abort();
        let _ = outgoing.await;
        let _ = writer.await;
        served.map_err(|e| io("serving MCP on stdio", e))?;
        Ok(())
    }
}

mod http {
    use std::convert::Infallible;
    use std::net::SocketAddr;
    use std::sync::Arc;

    use http_body_util::{BodyExt, Full, Limited, combinators::BoxBody};
    use hyper::body::{Bytes, Incoming};
    use hyper::{Request, Response, StatusCode};
    use hyper_util::rt::{TokioExecutor, TokioIo};
    use hyper_util::server::conn::auto::Builder;
    use hyper_util::service::TowerToHyperService;
    use rmcp::transport::streamable_http_server::session::local::LocalSessionManager;
    use rmcp::transport::streamable_http_server::{
        StreamableHttpServerConfig, StreamableHttpService,
    };
    use tokio_util::sync::CancellationToken;

    use super::{MemoryServer, io, screen};
    use crate::failure::Outcome;

    type Service = StreamableHttpService<MemoryServer, LocalSessionManager>;
    type Body = BoxBody<Bytes, Infallible>;

    /// The largest request body read (the SDK's own limit).
    const MAX_BODY: usize = 4 * 1024 * 1024;

    fn answer(status: StatusCode, body: String, json: bool) -> Response<Body> {
        let mut response = Response::builder().status(status);
        if json {
            response = response.header("content-type", "application/json");
        }
        response
            .body(Full::new(Bytes::from(body)).boxed())
            .expect("a valid response")
    }

    /// A POST's body is read and screened ([`screen`]) before the SDK sees it: a
    /// body that is not JSON is answered `-32700` (HTTP 400), a malformed
    /// `tools/call` `-32602`.
    async fn handle(
        service: Service,
        request: Request<Incoming>,
    ) -> Result<Response<Body>, Infallible> {
        let (parts, body) = request.into_parts();
        let bytes = match Limited::new(body, MAX_BODY).collect().await {
            Ok(collected) => collected.to_bytes(),
            Err(e) => {
                return Ok(answer(
                    StatusCode::PAYLOAD_TOO_LARGE,
                    format!("the request body could not be read (at most {MAX_BODY} bytes): {e}"),
                    false,
                ));
            }
        };
        if parts.method == hyper::Method::POST
            && let Some(error) = screen(&bytes)
        {
            let status = if error["error"]["code"] == -32700 {
                StatusCode::BAD_REQUEST
            } else {
                StatusCode::OK
            };
            return Ok(answer(status, error.to_string(), true));
        }
        let request = Request::from_parts(parts, Full::new(bytes));
        let response = hyper::service::Service::call(&TowerToHyperService::new(service), request)
            .await
            .unwrap_or_else(|never| match never {});
        Ok(response)
    }

    /// Streamable HTTP on `addr` (every path), until SIGINT or SIGTERM.
    pub async fn serve(server: MemoryServer, addr: SocketAddr, allow_hosts: &[String]) -> Outcome {
        let stop = CancellationToken::new();
        let mut config =
            StreamableHttpServerConfig::default().with_cancellation_token(stop.child_token());
        if !allow_hosts.is_empty() {
            let mut hosts = config.allowed_hosts.clone();
            hosts.extend(allow_hosts.iter().cloned());
            config = config.with_allowed_hosts(hosts);
        }
        let service: Service = StreamableHttpService::new(
            move || Ok(server.clone()),
            Arc::new(LocalSessionManager::default()),
            config,
        );
        let listener = tokio::net::TcpListener::bind(addr)
            .await
            .map_err(|e| io(&format!("listening on {addr}"), e))?;
        let local = listener
            .local_addr()
            .map_err(|e| io("reading the listening address", e))?;
        eprintln!("gralkor mcp: listening on http://{local}/mcp");
        let mut terminate =
            tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate())
                .map_err(|e| io("installing the SIGTERM handler", e))?;
        let connections = tokio_util::task::TaskTracker::new();
        loop {
            tokio::select! {
                accepted = listener.accept() => {
                    let Ok((stream, _)) = accepted else { continue };
                    let service = service.clone();
                    let screened = hyper::service::service_fn(move |request| {
                        handle(service.clone(), request)
                    });
                    let stop = stop.clone();
                    connections.spawn(async move {
                        let builder = Builder::new(TokioExecutor::new());
                        let connection = builder.serve_connection(TokioIo::new(stream), screened);
                        tokio::select! {
                            result = connection => {
                                if let Err(e) = result {
                                    tracing::debug!(error = %e, "MCP HTTP connection ended");
                                }
                            }
                            _ = stop.cancelled() => {}
                        }
                    });
                }
                _ = tokio::signal::ctrl_c() => break,
                _ = terminate.recv() => break,
            }
        }
        stop.cancel();
        connections.close();
        connections.wait().await;
        eprintln!("gralkor mcp: stopped");
        Ok(())
    }
}
