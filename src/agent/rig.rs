//! The rig adapter (feature `rig`): gralkor's memory for an agent built with
//! [rig](https://crates.io/crates/rig-core) (`rig-core` and its agent runtime
//! `rig-agent`, 0.44).
//!
//! * **Tools.** [`MemorySearchTool`], [`MemoryAddTool`] and the admin tools
//!   [`BuildIndicesTool`], [`BuildCommunitiesTool`] — or, for the OpenClaw tool set
//!   ([`ToolSet::OpenClaw`]), [`MemoryRecallTool`] and [`MemoryStoreTool`] — implement
//!   rig's [`Tool`] trait over [`ToolSet::call`]: their name, description
//!   and JSON Schema *are* the [`tools`] definitions (read from them,
//!   not copied), so a rig agent advertises exactly what an OpenAI-style request
//!   carries. A contract error (bad arguments, a budget too small) is shown to the
//!   model as its message; other failures reach the model as rig's redacted
//!   kind-level feedback.
//! * **Messages.** [`chat_messages`] turns rig's [`Message`]s into the OpenAI-style
//!   chat messages [`Turn::from_chat`] reads (user text parts, assistant text and
//!   tool calls, tool results carried in user messages), so [`turn_from_rig`] and
//!   [`turn_from_rig_failed`] follow exactly the rules of `from_chat`: system
//!   messages ignored, an assistant message calling tools becomes `thought: …`, a
//!   tool result `tool NAME → RESULT`. Images, audio, documents and reasoning carry
//!   no text and are left out.
//! * **Hook.** [`MemoryHook`] is a rig [`AgentHook`]: on the run's start it asks
//!   [`AgentRecall::before_turn`] for the memory block and puts it in front of the
//!   prompt (as the prompt's first text part); optionally it pins `tool_choice` to
//!   `memory_search` on the run's first model call (as
//!   [`force_memory_search_on_first_iteration`](super::tools::force_memory_search_on_first_iteration)
//!   does for an OpenAI-style request); when the run settles it captures the run's
//!   committed messages through [`AgentCapture::after_turn`] — a failed run as a
//!   failed turn (`request failed: …`). The injected block is dropped again before
//!   anything is stored, as are `memory_search` results. A recall that fails (its
//!   deadline expired, say) is logged and the run goes ahead without memory; a
//!   capture that fails is logged (the run's answer is already the caller's).
//!
//! The session id is the harness's: build one hook per session with
//! [`MemoryHook::session`] and add it to each run
//! (`agent.prompt(…).add_hook(hook)`), or to the agent when it serves one session.
//!
//! ```
//! # #[tokio::main(flavor = "current_thread")] async fn main() -> gralkor::Result<()> {
//! use std::sync::Arc;
//! use gralkor::agent::rig::{MemorySearchTool, turn_from_rig};
//! use gralkor::agent::tools::{memory_search_tool, ToolContext};
//! use gralkor::agent::turn::{Message, Turn};
//! use gralkor::client::{InMemoryClient, OperatorId};
//! use rig_core::tool::Tool;
//!
//! let client = Arc::new(InMemoryClient::new());
//! let tool = MemorySearchTool::new(client, ToolContext::new(OperatorId::new("op")?));
//! assert_eq!(tool.parameters(), memory_search_tool().parameters);
//!
//! let turn = turn_from_rig(&[
//!     rig_core::message::Message::user("Where does Ada work?"),
//!     rig_core::message::Message::assistant("At Acme."),
//! ])?;
//! assert_eq!(turn, Turn::new([Message::user("Where does Ada work?"), Message::assistant("At Acme.")]));
//! # Ok(()) }
//! ```

use std::sync::Arc;

use rig_agent::agent::{
    AgentHook, CompletionCallAction, CompletionCallEvent, HookContext, RequestPatch, RunSettled,
    RunStart, RunStartAction, SettledOutcome,
};
use rig_core::message::{
    AssistantContent, Message, Text, ToolChoice, ToolName, ToolResultContent, UserContent,
};
use rig_core::tool::{Tool, ToolContext as RigToolContext, ToolExecutionError};
use serde_json::{Value, json};

use super::capture::{Capture, CaptureBuffer, CaptureRoute};
use super::hooks::{AgentCapture, AgentRecall, AutoCapture};
use super::openclaw::{self, MEMORY_RECALL, MEMORY_STORE, ToolSet};
use super::tools::{
    self, MEMORY_ADD, MEMORY_BUILD_COMMUNITIES, MEMORY_BUILD_INDICES, MEMORY_SEARCH, ToolContext,
    ToolDefinition,
};
use super::turn::Turn;
use crate::client::{Client, OperatorId};
use crate::{Error, Result};

/// What the model sees of a failed gralkor tool call: a contract error's own message
/// (it names the field and the rule, or the budget needed), anything else as rig's
/// redacted feedback.
fn tool_error(error: Error) -> ToolExecutionError {
    match &error {
        Error::InvalidInput { .. } | Error::BudgetTooSmall { .. } => {
            ToolExecutionError::invalid_args(error.to_string())
        }
        _ => ToolExecutionError::from_error(error),
    }
}

macro_rules! rig_tool {
    ($(#[$doc:meta])* $ty:ident, $name:expr, $definition:path) => {
        rig_tool!($(#[$doc])* $ty, $name, $definition, Jido);
    };
    ($(#[$doc:meta])* $ty:ident, $name:expr, $definition:path, $set:ident) => {
        $(#[$doc])*
        #[derive(Clone)]
        pub struct $ty {
            client: Arc<dyn Client>,
            context: ToolContext,
        }

        impl $ty {
            /// The tool over `client`, with the harness's tool context (operator,
            /// Lens, byte budget).
            pub fn new(client: Arc<dyn Client>, context: ToolContext) -> $ty {
                $ty { client, context }
            }

            /// The gralkor definition this tool advertises.
            pub fn definition() -> ToolDefinition {
                $definition()
            }
        }

        impl std::fmt::Debug for $ty {
            fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.debug_struct(stringify!($ty))
                    .field("context", &self.context)
                    .finish_non_exhaustive()
            }
        }

        impl Tool for $ty {
            const NAME: &'static str = $name;
            type Args = Value;
            type Output = String;
            type Error = Error;

            fn description(&self) -> String {
                $definition().description
            }

            fn parameters(&self) -> Value {
                $definition().parameters
            }

            fn map_error(&self, error: Error) -> ToolExecutionError {
                tool_error(error)
            }

            async fn call(&self, _context: &mut RigToolContext, args: Value) -> Result<String> {
                ToolSet::$set
                    .call(self.client.as_ref(), &self.context, $name, &args)
                    .await
            }
        }
    };
}

rig_tool!(
    /// `memory_search` as a rig tool: the budgeted presentation of one fact search
    /// (`tools::handle_memory_search`).
    MemorySearchTool,
    MEMORY_SEARCH,
    tools::memory_search_tool
);
rig_tool!(
    /// `memory_add` as a rig tool: answers `Ingesting.` at once and writes in the
    /// background (`tools::handle_memory_add`).
    MemoryAddTool,
    MEMORY_ADD,
    tools::memory_add_tool
);
rig_tool!(
    /// The build-indices admin tool as a rig tool ("DO NOT CALL unless the user
    /// asked").
    BuildIndicesTool,
    MEMORY_BUILD_INDICES,
    tools::build_indices_tool
);
rig_tool!(
    /// The build-communities admin tool as a rig tool ("DO NOT CALL unless the user
    /// asked").
    BuildCommunitiesTool,
    MEMORY_BUILD_COMMUNITIES,
    tools::build_communities_tool
);

rig_tool!(
    /// OpenClaw's `memory_recall` as a rig tool ([`ToolSet::OpenClaw`]): entities and
    /// facts, newest facts first.
    MemoryRecallTool,
    MEMORY_RECALL,
    openclaw::recall_tool,
    OpenClaw
);
rig_tool!(
    /// OpenClaw's `memory_store` as a rig tool ([`ToolSet::OpenClaw`]): answers
    /// `Ingesting.` at once and writes in the background.
    MemoryStoreTool,
    MEMORY_STORE,
    openclaw::store_tool,
    OpenClaw
);

fn text_parts(texts: &[&str]) -> Value {
    Value::Array(
        texts
            .iter()
            .map(|t| json!({"type": "text", "text": t}))
            .collect(),
    )
}

fn tool_result_text(content: &[ToolResultContent]) -> String {
    content
        .iter()
        .filter_map(|c| match c {
            ToolResultContent::Text(t) => Some(t.text.clone()),
            ToolResultContent::Json { value } => Some(match value {
                Value::String(s) => s.clone(),
                other => other.to_string(),
            }),
            _ => None,
        })
        .filter(|t| !t.trim().is_empty())
        .collect::<Vec<_>>()
        .join(" ")
}

/// rig's messages as OpenAI-style chat messages, the shape
/// [`Turn::from_chat`] reads:
///
/// * `System` → a `system` message;
/// * `User` → its text parts as one `user` message (content parts), and each tool
///   result in it as a `tool` message (`tool_call_id`, `name`, its text and JSON
///   parts), in the order they come;
/// * `Assistant` → an `assistant` message of its text parts, with its tool calls as
///   `tool_calls` (arguments as a JSON string).
///
/// ```
/// use gralkor::agent::rig::chat_messages;
/// use rig_core::message::Message;
/// use serde_json::json;
///
/// let chat = chat_messages(&[Message::system("Be brief."), Message::user("hi there")]);
/// assert_eq!(chat[0], json!({"role": "system", "content": "Be brief."}));
/// assert_eq!(chat[1], json!({"role": "user", "content": [{"type": "text", "text": "hi there"}]}));
/// ```
pub fn chat_messages(messages: &[Message]) -> Vec<Value> {
    let mut out = Vec::new();
    for message in messages {
        match message {
            Message::System { content } => out.push(json!({"role": "system", "content": content})),
            Message::User { content } => {
                let mut texts: Vec<&str> = Vec::new();
                let flush = |texts: &mut Vec<&str>, out: &mut Vec<Value>| {
                    if !texts.is_empty() {
                        out.push(json!({"role": "user", "content": text_parts(texts)}));
                        texts.clear();
                    }
                };
                for part in content {
                    match part {
                        UserContent::Text(t) => texts.push(&t.text),
                        UserContent::ToolResult(r) => {
                            flush(&mut texts, &mut out);
                            out.push(json!({
                                "role": "tool",
                                "tool_call_id": r.call.wire(),
                                "name": r.name.as_str(),
                                "content": tool_result_text(&r.content),
                            }));
                        }
                        _ => {}
                    }
                }
                flush(&mut texts, &mut out);
            }
            Message::Assistant(assistant) => {
                let texts: Vec<&str> = assistant
                    .content
                    .iter()
                    .filter_map(|c| match c {
                        AssistantContent::Text(t) => Some(t.text.as_str()),
                        _ => None,
                    })
                    .collect();
                let calls: Vec<Value> = assistant
                    .tool_calls()
                    .map(|call| {
                        json!({
                            "id": call.id.wire(),
                            "type": "function",
                            "function": {
                                "name": call.function.name.as_str(),
                                "arguments": Value::Object(call.function.arguments.clone()).to_string(),
                            }
                        })
                    })
                    .collect();
                let mut m = json!({"role": "assistant", "content": text_parts(&texts)});
                if !calls.is_empty() {
                    m["tool_calls"] = Value::Array(calls);
                }
                out.push(m);
            }
        }
    }
    out
}

/// A completed turn from rig's messages: [`Turn::from_chat`] over
/// [`chat_messages`].
pub fn turn_from_rig(messages: &[Message]) -> Result<Turn> {
    Turn::from_chat(&chat_messages(messages))
}

/// A failed turn from rig's messages: [`Turn::from_chat_failed`] over
/// [`chat_messages`] (no answer, then `request failed: <error>`).
pub fn turn_from_rig_failed(messages: &[Message], error: &str) -> Result<Turn> {
    Turn::from_chat_failed(&chat_messages(messages), error)
}

/// The text of a prompt: its text parts joined with spaces.
fn prompt_text(prompt: &Message) -> String {
    match prompt {
        Message::User { content } => content
            .iter()
            .filter_map(|c| match c {
                UserContent::Text(t) => Some(t.text.as_str()),
                _ => None,
            })
            .collect::<Vec<_>>()
            .join(" "),
        _ => String::new(),
    }
}

/// Where a failed run is captured: the binding the hook's [`AgentCapture`] was made
/// with.
#[derive(Debug, Clone)]
struct FailedCapture {
    buffer: CaptureBuffer,
    operator: OperatorId,
    agent_name: String,
    human_name: String,
    route: CaptureRoute,
    last_messages: usize,
    subject: Option<crate::access::Subject>,
}

/// gralkor's auto-recall and auto-capture as a rig [`AgentHook`] (see the
/// [module](self) docs).
///
/// ```
/// # #[tokio::main(flavor = "current_thread")] async fn main() -> gralkor::Result<()> {
/// use std::sync::Arc;
/// use gralkor::agent::capture::{CaptureBuffer, CaptureConfig, CaptureRoute};
/// use gralkor::agent::hooks::{AgentRecall, AutoCapture, AutoRecall};
/// use gralkor::agent::rig::MemoryHook;
/// use gralkor::client::{InMemoryClient, OperatorId};
///
/// let client = InMemoryClient::new();
/// let op = OperatorId::new("op")?;
/// let buffer = CaptureBuffer::in_memory(&client, CaptureConfig::new()).await?;
/// let hook = MemoryHook::new()
///     .recall(AgentRecall::new(Arc::new(client.clone()), &op, "Susu", AutoRecall::new())?)
///     .capture(buffer, &op, "Susu", "Ada", CaptureRoute::default(), AutoCapture::new())?
///     .force_memory_search_on_first_turn()
///     .session("thread-7");
/// // agent.prompt("Where do I live?").add_hook(hook).await
/// # let _ = hook;
/// # Ok(()) }
/// ```
#[derive(Debug, Clone, Default)]
pub struct MemoryHook {
    recall: Option<AgentRecall>,
    capture: Option<(AgentCapture, FailedCapture)>,
    session: Option<String>,
    force_memory_search: bool,
}

impl MemoryHook {
    /// A hook that does nothing yet.
    pub fn new() -> MemoryHook {
        MemoryHook::default()
    }

    /// Recalls before each run.
    pub fn recall(mut self, recall: AgentRecall) -> MemoryHook {
        self.recall = Some(recall);
        self
    }

    /// Captures each settled run into `buffer` under this binding, as
    /// [`AgentCapture::new`] does (the names are checked now).
    pub fn capture(
        mut self,
        buffer: CaptureBuffer,
        operator: impl Into<OperatorId>,
        agent_name: impl Into<String>,
        human_name: impl Into<String>,
        route: CaptureRoute,
        config: AutoCapture,
    ) -> Result<MemoryHook> {
        let failed = FailedCapture {
            buffer,
            operator: operator.into(),
            agent_name: agent_name.into(),
            human_name: human_name.into(),
            route,
            last_messages: config.last_messages,
            subject: None,
        };
        let capture = AgentCapture::new(
            failed.buffer.clone(),
            failed.operator.clone(),
            failed.agent_name.clone(),
            failed.human_name.clone(),
            failed.route.clone(),
            config,
        )?;
        self.capture = Some((capture, failed));
        Ok(self)
    }

    /// Captures as `subject` (set it after [`capture`](Self::capture)), for a client
    /// with an authorizer.
    pub fn capture_as(mut self, subject: crate::access::Subject) -> MemoryHook {
        if let Some((capture, failed)) = self.capture.take() {
            let failed = FailedCapture {
                subject: Some(subject.clone()),
                ..failed
            };
            self.capture = Some((capture.subject(subject), failed));
        }
        self
    }

    /// The harness's session id (never minted: without one, nothing is captured and
    /// a warning names the operator).
    pub fn session(mut self, session: impl Into<String>) -> MemoryHook {
        self.session = Some(session.into());
        self
    }

    /// Pins `tool_choice` to `memory_search` on the run's first model call.
    pub fn force_memory_search_on_first_turn(mut self) -> MemoryHook {
        self.force_memory_search = true;
        self
    }

    async fn capture_failed(&self, failed: &FailedCapture, messages: &[Message], error: &str) {
        let Some(session) = &self.session else {
            tracing::warn!(
                operator = %failed.operator,
                "no session id yet: this turn is not captured (memory search still works)"
            );
            return;
        };
        let start = messages.len().saturating_sub(failed.last_messages);
        let outcome = match turn_from_rig_failed(&messages[start..], error) {
            Ok(turn) => {
                failed
                    .buffer
                    .append(
                        Capture::new(
                            session.clone(),
                            failed.operator.clone(),
                            failed.agent_name.clone(),
                            failed.human_name.clone(),
                            turn,
                        )
                        .route(failed.route.clone())
                        .subject_opt(failed.subject.clone()),
                    )
                    .await
            }
            Err(e) => Err(e),
        };
        if let Err(e) = outcome {
            tracing::warn!(error = %e, "the failed rig run was not captured");
        }
    }
}

impl AgentHook for MemoryHook {
    fn name(&self) -> Option<String> {
        Some("gralkor.memory".into())
    }

    async fn on_run_start(&self, _ctx: &HookContext, event: RunStart<'_>) -> RunStartAction {
        // Only a user's prompt is recalled for (a run resumed on tool results is not).
        let (Some(recall), Message::User { content }) = (&self.recall, event.prompt) else {
            return RunStartAction::continue_run();
        };
        let prompt = prompt_text(event.prompt);
        match recall.before_turn(self.session.as_deref(), &prompt).await {
            Ok(Some(block)) => {
                let mut content = content.clone();
                content.insert(0, UserContent::Text(Text::new(block)));
                RunStartAction::rewrite(Message::User { content })
            }
            Ok(None) => RunStartAction::continue_run(),
            Err(e) => {
                tracing::warn!(error = %e, "auto-recall failed; the run goes on without memory");
                RunStartAction::continue_run()
            }
        }
    }

    async fn on_completion_call(
        &self,
        _ctx: &HookContext,
        event: CompletionCallEvent<'_>,
    ) -> CompletionCallAction {
        if self.force_memory_search && event.turn == 1 {
            let name = ToolName::new(MEMORY_SEARCH).expect("a non-empty tool name");
            CompletionCallAction::patch(RequestPatch::new().tool_choice(ToolChoice::Specific {
                function_names: vec![name],
            }))
        } else {
            CompletionCallAction::continue_run()
        }
    }

    async fn on_run_settled(&self, _ctx: &HookContext, event: RunSettled<'_>) {
        let Some((capture, failed)) = &self.capture else {
            return;
        };
        let Some(messages) = event.messages else {
            return;
        };
        match event.outcome {
            SettledOutcome::Response(_) => {
                let chat = chat_messages(messages);
                if let Err(e) = capture.after_turn(self.session.as_deref(), &chat).await {
                    tracing::warn!(error = %e, "the rig run was not captured");
                }
            }
            SettledOutcome::Error(error) => self.capture_failed(failed, messages, error).await,
        }
    }
}
