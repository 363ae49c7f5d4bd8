//! The OpenClaw-compatible tool set (seed `openclaw-memory-graphiti`), beside the
//! jido names of [`tools`](super::tools): `memory_recall`, `memory_store`,
//! `memory_forget` and `memory_status`, selected with [`ToolSet`].
//!
//! * `memory_recall {query, limit, scope}`: a node search and a fact search, run
//!   concurrently, of long-term memory (every accessible Destination) for `scope:
//!   "long-term"`, of the context's session group (`session-<session id>`,
//!   [`Destination::session_group`](crate::destination::Destination::session_group))
//!   for `"session"`, and of both for `"all"` (the default; the session group only
//!   when the context has a session); facts deduplicated (a session fact already
//!   recalled from long-term memory is left out) and ranked by recency (newest
//!   `created_at` first), then entities in retrieval order; at most `limit` (default
//!   10, 1 to 200) in all. Facts are `format_fact` lines, entities
//!   `- <name>: <summary>`. `"session"` without a session in the context is refused
//!   naming `memory_recall.arguments.scope`.
//! * `memory_store {content, source_description, involves, group_id, longTerm}`: a
//!   background write ([`Client::memory_add`]) of a document described
//!   `conversation` by default, to `group_id` (a registered Destination) or else the
//!   context's default group ([`ToolContext::default_group`], the plugin's
//!   `defaultGroupId`), its Lens or `personal`, with the people and agents it involves
//!   (`person:<id>`, `agent:<id>`; a bare id is a person), extracted with
//!   [`CaptureConfig::OPENCLAW_CUSTOM_INSTRUCTIONS`](super::capture::CaptureConfig::OPENCLAW_CUSTOM_INSTRUCTIONS).
//!   `longTerm: false` writes it to the context's session group instead (refused
//!   without a session, and together with `group_id`); the default `longTerm: true`
//!   is how an agent promotes what it learnt in a session to long-term memory.
//! * `memory_forget {episode_id}` and `memory_status {}`: run by a memory server, as
//!   the jido set's; [`ToolSet::forget_target`] reads `memory_forget`'s arguments.
//!
//! Every schema is strict-mode compatible: every property is required, optional ones
//! are nullable, `additionalProperties` is `false`.

use serde::Deserialize;
use serde_json::{Value, json};

use super::format::format_fact;
use super::tools::{
    ForgetTarget, INGESTING, MEMORY_FORGET, MEMORY_STATUS, MemoryForgetArgs, ToolContext,
    ToolDefinition, call_tool, memory_tools,
};
use crate::access::Subject;
use crate::client::{Client, Content, Hit, MemoryAdd, Search, SearchResult};
use crate::destination::Destination;
use crate::{Error, Result};

/// The `memory_recall` tool's name.
pub(crate) const MEMORY_RECALL: &str = "memory_recall";
/// The `memory_store` tool's name.
pub(crate) const MEMORY_STORE: &str = "memory_store";
/// `memory_recall`'s default limit.
const DEFAULT_RECALL_LIMIT: usize = 10;
/// `memory_recall`'s largest limit (the engine's search limit).
const MAX_RECALL_LIMIT: usize = 200;
/// `memory_store`'s default source description.
const DEFAULT_STORE_DESCRIPTION: &str = "conversation";
/// What `memory_recall` answers when nothing is found.
const NOTHING_RECALLED: &str = "No relevant memories found.";

/// Which tool names an agent is given.
///
/// ```
/// use gralkor::agent::openclaw::ToolSet;
///
/// let names: Vec<String> = ToolSet::OpenClaw.tools().into_iter().map(|t| t.name).collect();
/// assert_eq!(names, ["memory_recall", "memory_store", "memory_forget", "memory_status"]);
/// let jido: Vec<String> = ToolSet::Jido.tools().into_iter().map(|t| t.name).collect();
/// assert_eq!(jido, ["memory_search", "memory_add"]);
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
#[non_exhaustive]
pub enum ToolSet {
    /// `memory_search` and `memory_add` ([`memory_tools`]).
    #[default]
    Jido,
    /// `memory_recall`, `memory_store`, `memory_forget`, `memory_status`.
    OpenClaw,
}

impl ToolSet {
    /// The set's tool definitions, in order.
    pub fn tools(self) -> Vec<ToolDefinition> {
        match self {
            ToolSet::Jido => memory_tools(),
            ToolSet::OpenClaw => vec![recall_tool(), store_tool(), forget_tool(), status_tool()],
        }
    }

    /// Runs one of the set's tool calls the agent layer runs (`memory_recall` and
    /// `memory_store`; the jido set's through [`call_tool`]). `memory_forget` and
    /// `memory_status` are run by a memory server ([`ToolSet::forget_target`]).
    ///
    /// ```
    /// # #[tokio::main(flavor = "current_thread")] async fn main() -> gralkor::Result<()> {
    /// use gralkor::agent::openclaw::ToolSet;
    /// use gralkor::agent::tools::ToolContext;
    /// use gralkor::client::{Client, InMemoryClient, OperatorId};
    /// use serde_json::json;
    ///
    /// let client = InMemoryClient::new();
    /// let ctx = ToolContext::new(OperatorId::new("op")?);
    /// let set = ToolSet::OpenClaw;
    /// set.call(&client, &ctx, "memory_store", &json!({"content": "Ada prefers tea.",
    ///     "source_description": null, "involves": null, "group_id": null, "longTerm": null})).await?;
    /// client.await_background_writes().await;
    /// let text = set.call(&client, &ctx, "memory_recall",
    ///     &json!({"query": "tea", "limit": null, "scope": null})).await?;
    /// assert!(text.contains("- Ada prefers tea."), "{text}");
    /// # Ok(()) }
    /// ```
    pub async fn call(
        self,
        client: &dyn Client,
        ctx: &ToolContext,
        name: &str,
        arguments: &Value,
    ) -> Result<String> {
        match (self, name) {
            (ToolSet::Jido, _) => call_tool(client, ctx, name, arguments).await,
            (ToolSet::OpenClaw, MEMORY_RECALL) => recall(client, ctx, arguments).await,
            (ToolSet::OpenClaw, MEMORY_STORE) => store(client, ctx, arguments).await,
            (ToolSet::OpenClaw, MEMORY_FORGET | MEMORY_STATUS) => Err(Error::invalid(
                "tool",
                format!("`{name}` is run by the memory server, not the agent layer"),
            )),
            (ToolSet::OpenClaw, other) => Err(Error::invalid(
                "tool",
                format!("`{other}` is not an OpenClaw memory tool"),
            )),
        }
    }

    /// Reads `memory_forget`'s arguments in this set's shape (OpenClaw:
    /// `{"episode_id": …}`; jido: [`MemoryForgetArgs::target`]).
    ///
    /// ```
    /// use gralkor::agent::openclaw::ToolSet;
    /// use gralkor::agent::tools::ForgetTarget;
    /// use serde_json::json;
    ///
    /// let id = uuid::Uuid::nil();
    /// let t = ToolSet::OpenClaw.forget_target(&json!({"episode_id": id.to_string()})).unwrap();
    /// assert_eq!(t, ForgetTarget::Episode(id, None));
    /// let e = ToolSet::OpenClaw.forget_target(&json!({"id": id.to_string()})).unwrap_err();
    /// assert!(e.to_string().contains("memory_forget.arguments"), "{e}");
    /// ```
    pub fn forget_target(self, arguments: &Value) -> Result<ForgetTarget> {
        match self {
            ToolSet::Jido => MemoryForgetArgs::target(arguments),
            ToolSet::OpenClaw => {
                let a: ForgetArgs = args(MEMORY_FORGET, arguments)?;
                MemoryForgetArgs::target(&json!({"id": a.episode_id}))
            }
        }
    }
}

fn nullable(kind: &str, description: &str) -> Value {
    json!({"type": [kind, "null"], "description": description})
}

pub(crate) fn recall_tool() -> ToolDefinition {
    ToolDefinition {
        name: MEMORY_RECALL.into(),
        description: "Search memories in the knowledge graph: the entities and facts you \
                      are allowed to see, newest facts first."
            .into(),
        parameters: json!({
            "type": "object",
            "properties": {
                "query": {"type": "string", "description": "Search query."},
                "limit": nullable("integer", "Max results (default 10)."),
                "scope": {
                    "type": ["string", "null"],
                    "enum": ["session", "long-term", "all", null],
                    "description": "\"session\", \"long-term\" or \"all\" (default all).",
                },
            },
            "required": ["query", "limit", "scope"],
            "additionalProperties": false,
        }),
    }
}

pub(crate) fn store_tool() -> ToolDefinition {
    ToolDefinition {
        name: MEMORY_STORE.into(),
        description: "Save information to the knowledge graph; entities and facts are \
                      extracted from it. Returns at once; storing happens in the background."
            .into(),
        parameters: json!({
            "type": "object",
            "properties": {
                "content": {"type": "string", "description": "Information to remember."},
                "source_description": nullable("string", "Context about the source (default: conversation)."),
                "involves": {
                    "type": ["array", "null"],
                    "items": {"type": "string"},
                    "description": "Person/agent ids involved (`person:<id>`, `agent:<id>`).",
                },
                "group_id": nullable("string", "Target group (a memory Destination) for this memory (default: the configured one)."),
                "longTerm": nullable("boolean", "false stores to the current session group (default true)."),
            },
            "required": ["content", "source_description", "involves", "group_id", "longTerm"],
            "additionalProperties": false,
        }),
    }
}

fn forget_tool() -> ToolDefinition {
    ToolDefinition {
        name: MEMORY_FORGET.into(),
        description: "Delete a memory episode by its id (only who stored it may).".into(),
        parameters: json!({
            "type": "object",
            "properties": {
                "episode_id": {"type": "string", "description": "Episode UUID to delete."},
            },
            "required": ["episode_id"],
            "additionalProperties": false,
        }),
    }
}

fn status_tool() -> ToolDefinition {
    ToolDefinition {
        name: MEMORY_STATUS.into(),
        description: "Check the health of the memory services.".into(),
        parameters: json!({"type": "object", "properties": {}, "required": [], "additionalProperties": false}),
    }
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RecallArgs {
    query: String,
    #[serde(default)]
    limit: Option<i64>,
    #[serde(default)]
    scope: Option<String>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct StoreArgs {
    content: String,
    #[serde(default)]
    source_description: Option<String>,
    #[serde(default)]
    involves: Option<Vec<String>>,
    #[serde(default)]
    group_id: Option<String>,
    #[serde(default, rename = "longTerm")]
    long_term: Option<bool>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct ForgetArgs {
    episode_id: String,
}

fn args<T: for<'de> Deserialize<'de>>(tool: &str, arguments: &Value) -> Result<T> {
    let arguments = if arguments.is_null() {
        &json!({})
    } else {
        arguments
    };
    serde_json::from_value(arguments.clone())
        .map_err(|e| Error::invalid(format!("{tool}.arguments"), e.to_string()))
}

/// The context's session group, or an error naming `field` when it has no session.
fn session_group(ctx: &ToolContext, field: &str, what: &str) -> Result<String> {
    let session = ctx.session.as_deref().ok_or_else(|| {
        Error::invalid(
            field,
            format!("{what} needs a session: the tool context has no session id"),
        )
    })?;
    Ok(Destination::session_group(session)
        .map_err(|e| Error::invalid(field, e.to_string()))?
        .name()
        .to_string())
}

async fn recall(client: &dyn Client, ctx: &ToolContext, arguments: &Value) -> Result<String> {
    let a: RecallArgs = args(MEMORY_RECALL, arguments)?;
    const SCOPE: &str = "memory_recall.arguments.scope";
    // (long-term memory searched, the session group searched)
    let (long_term, session) = match a.scope.as_deref() {
        None | Some("all") => (
            true,
            ctx.session
                .is_some()
                .then(|| session_group(ctx, SCOPE, "`all`"))
                .transpose()?,
        ),
        Some("long-term") => (true, None),
        Some("session") => (false, Some(session_group(ctx, SCOPE, "`session`")?)),
        Some(other) => {
            return Err(Error::invalid(
                "memory_recall.arguments.scope",
                format!("must be \"session\", \"long-term\" or \"all\" (got `{other}`)"),
            ));
        }
    };
    let limit = match a.limit {
        None => DEFAULT_RECALL_LIMIT,
        Some(n) if (1..=MAX_RECALL_LIMIT as i64).contains(&n) => n as usize,
        Some(n) => {
            return Err(Error::invalid(
                "memory_recall.arguments.limit",
                format!("must be 1 to {MAX_RECALL_LIMIT} (got {n})"),
            ));
        }
    };
    if a.query.trim().is_empty() {
        return Err(Error::invalid(
            "memory_recall.arguments.query",
            "must not be blank",
        ));
    }
    let search = |s: Search, destinations: &[String]| {
        let s = s
            .max_results(limit)
            .destinations(destinations.iter().cloned());
        match &ctx.subject {
            Some(subject) => s.subject(subject.clone()),
            None => s,
        }
    };
    // Long-term memory is a selector-free search (it never reads a session group);
    // the session group is a search of its own.
    let mut scopes: Vec<Vec<String>> = Vec::new();
    if long_term {
        scopes.push(Vec::new());
    }
    if let Some(group) = &session {
        scopes.push(vec![group.clone()]);
    }
    let span = tracing::info_span!(
        "gralkor.openclaw.memory_recall",
        limit,
        long_term,
        session = session.as_deref().unwrap_or("-")
    );
    let runs = scopes.iter().map(|dests| {
        let facts = search(
            Search::new(ctx.operator.clone(), a.query.clone()).facts(),
            dests,
        );
        let nodes = search(
            Search::new(ctx.operator.clone(), a.query.clone()).nodes(Vec::<String>::new()),
            dests,
        );
        async move { tokio::try_join!(client.search(&facts), client.search(&nodes)) }
    });
    let found =
        tracing::Instrument::instrument(futures_util::future::try_join_all(runs), span).await?;
    let (mut facts, mut nodes): (Vec<SearchResult>, Vec<SearchResult>) = (Vec::new(), Vec::new());
    for (i, (f, n)) in found.into_iter().enumerate() {
        if long_term && i == 1 {
            // Session facts already recalled from long-term memory (same text) are
            // left out; `present` drops repeated uuids.
            let known: std::collections::HashSet<String> = facts
                .iter()
                .filter_map(|r| r.hit.as_fact())
                .map(|x| x.fact.trim().to_string())
                .collect();
            facts.extend(f.into_iter().filter(|r| {
                r.hit
                    .as_fact()
                    .is_none_or(|x| !known.contains(x.fact.trim()))
            }));
        } else {
            facts.extend(f);
        }
        nodes.extend(n);
    }
    Ok(present(&facts, &nodes, limit))
}

/// Facts deduplicated and newest first (unknown times last, retrieval order among
/// equals), then entities deduplicated in retrieval order; `limit` lines in all.
fn present(facts: &[SearchResult], nodes: &[SearchResult], limit: usize) -> String {
    let mut seen = std::collections::HashSet::new();
    let mut fact_records: Vec<_> = facts
        .iter()
        .filter_map(|r| r.hit.as_fact())
        .filter(|f| seen.insert(f.uuid))
        .collect();
    fact_records.sort_by_key(|f| std::cmp::Reverse(f.created_at));
    let mut lines: Vec<String> = fact_records.into_iter().map(format_fact).collect();
    let node_lines = nodes.iter().filter_map(|r| match &r.hit {
        Hit::Node(n) if seen.insert(n.uuid) => Some(if n.summary.trim().is_empty() {
            format!("- {}", n.name)
        } else {
            format!("- {}: {}", n.name, n.summary)
        }),
        _ => None,
    });
    let fact_count = lines.len().min(limit);
    lines.truncate(limit);
    let room = limit - lines.len();
    let entities: Vec<String> = node_lines.take(room).collect();
    if fact_count == 0 && entities.is_empty() {
        return NOTHING_RECALLED.to_string();
    }
    let mut sections = Vec::new();
    if fact_count > 0 {
        sections.push(format!("Facts:\n{}", lines.join("\n")));
    }
    if !entities.is_empty() {
        sections.push(format!("Entities:\n{}", entities.join("\n")));
    }
    sections.join("\n\n")
}

fn subject(field: &str, id: &str) -> Result<Subject> {
    let made = match id.split_once(':') {
        Some(("person", rest)) => Subject::person(rest),
        Some(("agent", rest)) => Subject::agent(rest),
        _ => Subject::person(id),
    };
    made.map_err(|e| Error::invalid(field, e.to_string()))
}

async fn store(client: &dyn Client, ctx: &ToolContext, arguments: &Value) -> Result<String> {
    let a: StoreArgs = args(MEMORY_STORE, arguments)?;
    const LONG_TERM: &str = "memory_store.arguments.longTerm";
    let session_target = match (a.long_term, &a.group_id) {
        (Some(false), Some(_)) => {
            return Err(Error::invalid(
                LONG_TERM,
                "`false` stores to the session group: it cannot be combined with `group_id`",
            ));
        }
        (Some(false), None) => Some(session_group(ctx, LONG_TERM, "`false`")?),
        _ => None,
    };
    let involves = a
        .involves
        .unwrap_or_default()
        .iter()
        .enumerate()
        .map(|(i, id)| subject(&format!("memory_store.arguments.involves[{i}]"), id))
        .collect::<Result<Vec<_>>>()?;
    let mut request = MemoryAdd::new(ctx.operator.clone(), Content::document(a.content))
        .source_description(
            a.source_description
                .unwrap_or_else(|| DEFAULT_STORE_DESCRIPTION.to_string()),
        )
        .involves(involves)
        .custom_instructions(super::capture::CaptureConfig::OPENCLAW_CUSTOM_INSTRUCTIONS);
    // Where it goes: the session group, the named group, the deployment's default
    // group (the plugin's `defaultGroupId`), the context's Lens, `personal`.
    let group = session_target
        .or(a.group_id)
        .or_else(|| ctx.default_group.clone());
    request = match (group, &ctx.lens) {
        (Some(group), _) => request.to_destination(group),
        (None, Some(lens)) => request.through_lens(lens.clone()),
        (None, None) => request,
    };
    if let Some(session) = &ctx.session {
        request = request.session(session.clone());
    }
    if let Some(subject) = &ctx.subject {
        request = request.subject(subject.clone());
    }
    client.memory_add(&request).await?;
    Ok(INGESTING.to_string())
}
