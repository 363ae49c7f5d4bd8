//! `gralkor mcp`: the memory tools over the Model Context Protocol (rmcp), on stdio or
//! streamable HTTP.
//!
//! * Tools: the agent layer's definitions — `memory_search`, `memory_add` (returns
//!   at once; written in the background) and the admin tools with their "DO NOT CALL
//!   unless the user asked" descriptions ([`gralkor::agent::tools`]) — run by the
//!   agent layer's [`call_tool`]; plus the agent layer's inspection tools
//!   (`memory_get`, `memory_forget` — an episode or a whole session — and
//!   `memory_status`, [`inspection_tools`]), which this server runs itself.
//! * The operator is the server's (`--operator` / `GRALKOR_OPERATOR`), or, when the
//!   server is started with `--operator-from-request` and has none, the request's
//!   `_meta.operator_id` — set by the MCP client, never by the model's arguments. A
//!   request with neither is refused; no operator is ever invented.
//! * The subject (who asks, for a server with an authorizer) is the server's
//!   (`--as` / `GRALKOR_SUBJECT`, required with `--authorizer embedded`): every tool
//!   runs as them, and requests cannot change it.
//! * Long operations (the admin tools) run as MCP tasks (the `io.modelcontextprotocol/tasks`
//!   extension) when the client declares it: the call returns a task at once, and
//!   `tasks/get` reports it working, then its result; other clients get the result
//!   when the call returns.
//! * Errors are MCP (JSON-RPC) errors: invalid arguments and unknown tools are
//!   `-32602` (invalid params), a missing episode `-32002` (resource not found),
//!   anything else `-32603` (internal error); `data` carries `kind` and `retryable`.

use std::sync::Arc;

use gralkor::Error;
use gralkor::NativeClient;
use gralkor::access::Subject;
use gralkor::agent::tools::{
    ForgetTarget, MEMORY_FORGET, MEMORY_GET, MEMORY_STATUS, MemoryForgetArgs, ToolContext,
    ToolDefinition, admin_tools, call_tool, inspection_tools, memory_tools,
};
use gralkor::client::{Client, OperatorId};
use rmcp::model::{
    CallToolRequestParams, CallToolResponse, CallToolResult, CancelTaskParams, ContentBlock,
    CreateTaskResult, ErrorData, GetTaskParams, GetTaskResult, Implementation, JsonObject,
    ListToolsResult, PaginatedRequestParams, ServerCapabilities, ServerConfig, Tool,
};
use rmcp::service::RequestContext;
use rmcp::task_manager::{TaskExit, TaskManager, TaskOptions};
use rmcp::{RoleServer, ServerHandler, ServiceExt};
use serde::Deserialize;
use serde_json::{Value, json};
use uuid::Uuid;

use crate::args::McpArgs;
use crate::commands;
use crate::failure::{Failure, Outcome};

/// The request `_meta` key naming the operator (with `--operator-from-request`).
pub const OPERATOR_META: &str = "operator_id";

/// Every tool the server lists, in order: the agent layer's memory tools, the
/// server's own, then the admin tools.
pub fn tools() -> Vec<ToolDefinition> {
    let mut all = memory_tools();
    all.extend(inspection_tools());
    all.extend(admin_tools());
    all
}

fn mcp_tool(d: &ToolDefinition) -> Tool {
    let schema: JsonObject = match &d.parameters {
        Value::Object(o) => o.clone(),
        _ => JsonObject::new(),
    };
    Tool::new(d.name.clone(), d.description.clone(), Arc::new(schema))
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

fn args<T: for<'de> Deserialize<'de>>(tool: &str, arguments: &Value) -> Result<T, Failure> {
    let arguments = if arguments.is_null() {
        &json!({})
    } else {
        arguments
    };
    serde_json::from_value(arguments.clone()).map_err(|e| {
        Failure::Gralkor(Error::InvalidInput {
            field: format!("{tool}.arguments"),
            rule: e.to_string(),
        })
    })
}

fn episode_id(tool: &str, id: &str) -> Result<Uuid, Failure> {
    Uuid::parse_str(id.trim()).map_err(|e| {
        Failure::Gralkor(Error::InvalidInput {
            field: format!("{tool}.arguments.id"),
            rule: format!("must be an episode uuid: {e}"),
        })
    })
}

/// The MCP error for a failure.
fn mcp_error(failure: &Failure) -> ErrorData {
    let retryable = matches!(failure, Failure::Gralkor(e) if e.is_retryable());
    let data = Some(json!({"kind": failure.kind(), "retryable": retryable}));
    let message = failure.to_string();
    match failure.exit_code() {
        crate::failure::INVALID_INPUT => ErrorData::invalid_params(message, data),
        crate::failure::NOT_FOUND => ErrorData::resource_not_found(message, data),
        _ => ErrorData::internal_error(message, data),
    }
}

/// The memory server: one client, the server's operator (if any) and Lens.
#[derive(Clone)]
pub struct MemoryServer {
    client: NativeClient,
    config: gralkor::Config,
    operator: Option<OperatorId>,
    subject: Option<Subject>,
    operator_from_request: bool,
    lens: Option<String>,
    tasks: TaskManager,
}

/// The tools that may take long: run as tasks for a client that supports them.
const LONG: [&str; 2] = [
    gralkor::agent::tools::MEMORY_BUILD_COMMUNITIES,
    gralkor::agent::tools::MEMORY_BUILD_INDICES,
];

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
                Some(_) => Err(Failure::Gralkor(Error::InvalidInput {
                    field: format!("_meta.{OPERATOR_META}"),
                    rule: "must be a string".into(),
                })),
                None => Err(Failure::Gralkor(Error::InvalidInput {
                    field: format!("_meta.{OPERATOR_META}"),
                    rule: "must be set: this server takes the operator from each request \
                           and has none of its own"
                        .into(),
                })),
            };
        }
        Err(Failure::Gralkor(Error::Config {
            field: "operator".into(),
            rule: "is not configured on this server".into(),
        }))
    }

    async fn run_tool(&self, name: &str, arguments: &Value, meta: &JsonObject) -> Outcome<String> {
        if !tools().iter().any(|t| t.name == name) {
            return Err(Failure::Gralkor(Error::InvalidInput {
                field: "tool".into(),
                rule: format!("`{name}` is not a gralkor tool"),
            }));
        }
        let op = self.operator(meta)?;
        let subject = self.subject.as_ref();
        match name {
            MEMORY_GET => {
                let a: ByIdArgs = args(MEMORY_GET, arguments)?;
                let uuid = episode_id(MEMORY_GET, &a.id)?;
                let (place, memory) =
                    commands::find_memory(&self.client, &op, subject, uuid, a.destination.as_ref())
                        .await?;
                Ok(memory.json(&place.name).to_string())
            }
            MEMORY_FORGET => match MemoryForgetArgs::target(arguments)? {
                ForgetTarget::Episode(uuid, destination) => {
                    let place = commands::forget_episode(
                        &self.client,
                        &op,
                        subject,
                        uuid,
                        destination.as_ref(),
                    )
                    .await?;
                    Ok(format!("Forgot episode {uuid} in {}.", place.name))
                }
                ForgetTarget::Session(session) => {
                    let mut request = gralkor::client::PurgeSession::new(op, session.clone());
                    if let Some(s) = subject {
                        request = request.subject(s.clone());
                    }
                    let report = self.client.purge_session(&request).await?;
                    Ok(format!(
                        "Forgot session {session}: {} episodes.",
                        report.episodes.len()
                    ))
                }
            },
            MEMORY_STATUS => {
                let NoArgs {} = args(MEMORY_STATUS, arguments)?;
                let status =
                    commands::status_report(&self.client, &self.config, Some(&op), subject).await?;
                serde_json::to_string(&status)
                    .map_err(|e| Failure::Io("rendering the status".into(), e.into()))
            }
            _ => {
                let mut ctx = ToolContext::new(op);
                if let Some(lens) = &self.lens {
                    ctx = ctx.lens(lens.clone());
                }
                if let Some(subject) = subject {
                    ctx = ctx.subject(subject.clone());
                }
                Ok(call_tool(&self.client, &ctx, name, arguments).await?)
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
                 memory_add to remember an insight; memory_get and memory_forget by episode \
                 id. The admin tools are not for agents unless the user asked.",
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
            tools().iter().map(mcp_tool).collect(),
        ))
    }

    async fn call_tool(
        &self,
        request: CallToolRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, ErrorData> {
        let arguments = request.arguments.map(Value::Object).unwrap_or(Value::Null);
        let meta: &JsonObject = &context.meta;
        let as_task = LONG.contains(&request.name.as_ref())
            && context
                .client_capabilities()
                .is_some_and(|caps| caps.supports_tasks());
        if as_task {
            // The operator is checked now; the work runs as a task.
            self.operator(meta).map_err(|f| mcp_error(&f))?;
            let (server, name, meta) = (self.clone(), request.name.to_string(), meta.clone());
            let task = self.tasks.spawn(
                TaskOptions::new().with_poll_interval_ms(200),
                move |ctx| {
                    Box::pin(async move {
                        tokio::select! {
                            _ = ctx.cancelled() => Err(TaskExit::Cancelled),
                            done = server.run_tool(&name, &arguments, &meta) => match done {
                                Ok(text) => Ok(CallToolResult::success(vec![ContentBlock::text(text)])),
                                Err(failure) => Err(TaskExit::Error(mcp_error(&failure))),
                            },
                        }
                    })
                },
            );
            return Ok(CallToolResponse::Task(CreateTaskResult::new(task)));
        }
        match self.run_tool(&request.name, &arguments, meta).await {
            Ok(text) => Ok(CallToolResult::success(vec![ContentBlock::text(text)]).into()),
            Err(failure) => {
                tracing::warn!(tool = %request.name, error = %failure, "tool call failed");
                Err(mcp_error(&failure))
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
        operator: operator.cloned(),
        subject: subject.cloned(),
        operator_from_request: args.operator_from_request,
        lens: args.lens.clone(),
        tasks: TaskManager::new(),
    };
    match args.http {
        None => {
            let running = server
                .serve(rmcp::transport::stdio())
                .await
                .map_err(|e| io("starting the MCP server on stdio", e))?;
            running
                .waiting()
                .await
                .map_err(|e| io("serving MCP on stdio", e))?;
            Ok(())
        }
        Some(addr) => http::serve(server, addr, &args.allow_hosts).await,
    }
}

mod http {
    use std::net::SocketAddr;
    use std::sync::Arc;

    use hyper_util::rt::{TokioExecutor, TokioIo};
    use hyper_util::server::conn::auto::Builder;
    use hyper_util::service::TowerToHyperService;
    use rmcp::transport::streamable_http_server::session::local::LocalSessionManager;
    use rmcp::transport::streamable_http_server::{
        StreamableHttpServerConfig, StreamableHttpService,
    };
    use tokio_util::sync::CancellationToken;

    use super::{MemoryServer, io};
    use crate::failure::Outcome;

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
        let service: StreamableHttpService<MemoryServer, LocalSessionManager> =
            StreamableHttpService::new(
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
                    let service = TowerToHyperService::new(service.clone());
                    let stop = stop.clone();
                    connections.spawn(async move {
                        let builder = Builder::new(TokioExecutor::new());
                        let connection = builder.serve_connection(TokioIo::new(stream), service);
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
