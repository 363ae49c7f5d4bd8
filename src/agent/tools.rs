//! The memory tools as tool definitions an LLM request can carry, and their handlers.
//!
//! * [`ToolDefinition`]: name, description and the JSON Schema of the parameters;
//!   [`ToolDefinition::openai`] is the OpenAI-style `{"type": "function", …}` entry.
//!   [`memory_tools`] lists `memory_search` and `memory_add`; [`admin_tools`] the
//!   build-indices and build-communities tools, whose descriptions say **DO NOT CALL
//!   unless the user asked**.
//! * [`call_tool`] runs one tool call: the model's JSON arguments (read into
//!   `MemorySearchArgs`, `MemoryAddArgs`, [`BuildCommunitiesArgs`]; unknown fields
//!   are refused) plus a [`ToolContext`] the harness supplies (operator, session,
//!   ingestion Lens, byte budget — never the model).
//!   * `memory_search`: the existing presentation ([`memory_search`]):
//!     a blank query answers `BLANK_QUERY_NON_RESULT`
//!     without searching; the budget is checked before the search.
//!   * `memory_add`: validated now, acknowledged at once with `INGESTING`, written in
//!     the background by [`Client::memory_add`] (through the context's Lens, or
//!     directly to `personal`); a background failure is logged, and
//!     [`Client::await_background_writes`] waits for it.
//! * [`force_memory_search_on_first_iteration`]: pins an OpenAI-style request's
//!   `tool_choice` to `memory_search` on iteration 1 only, so the agent itself authors
//!   its first memory query.

use serde::{Deserialize, Serialize};
use serde_json::{Value, json};

use super::format::DEFAULT_MAX_BYTES;
use super::{MemorySearch, memory_search};
use crate::access::Subject;
use crate::client::{BuildCommunities, Client, Content, MemoryAdd, OperatorId};
use crate::graph::Timestamp;
use crate::{Error, Result};

internal_item!(
    /// The `memory_search` tool's name.
    pub const MEMORY_SEARCH: &str = "memory_search";
);
internal_item!(
    /// The `memory_add` tool's name.
    pub const MEMORY_ADD: &str = "memory_add";
);
/// The build-indices admin tool's name.
pub const MEMORY_BUILD_INDICES: &str = "memory_build_indices";
/// The build-communities admin tool's name.
pub const MEMORY_BUILD_COMMUNITIES: &str = "memory_build_communities";
/// The `memory_get` tool's name.
pub const MEMORY_GET: &str = "memory_get";
/// The `memory_forget` tool's name.
pub const MEMORY_FORGET: &str = "memory_forget";
/// The `memory_status` tool's name.
pub const MEMORY_STATUS: &str = "memory_status";
/// The `memory_recent` tool's name.
pub(crate) const MEMORY_RECENT: &str = "memory_recent";
internal_item!(
    /// What `memory_add` answers at once.
    pub const INGESTING: &str = "Ingesting.";
);

/// One tool an LLM request can carry.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[non_exhaustive]
pub struct ToolDefinition {
    /// The tool's name.
    pub name: String,
    /// What it does, for the model.
    pub description: String,
    /// The JSON Schema of its arguments.
    pub parameters: Value,
}

impl ToolDefinition {
    /// The OpenAI-style entry of a request's `tools` list.
    ///
    /// ```
    /// let tool = gralkor::agent::tools::memory_search_tool().openai();
    /// assert_eq!(tool["type"], "function");
    /// assert_eq!(tool["function"]["name"], "memory_search");
    /// assert_eq!(tool["function"]["parameters"]["required"][0], "query");
    /// ```
    pub fn openai(&self) -> Value {
        json!({
            "type": "function",
            "function": {
                "name": self.name,
                "description": self.description,
                "parameters": self.parameters,
            }
        })
    }
}

/// A nullable list of strings (strict mode: an optional property is required and
/// nullable).
fn string_list(description: &str) -> Value {
    json!({"type": ["array", "null"], "items": {"type": "string"}, "description": description})
}

/// A nullable string.
fn optional_string(description: &str) -> Value {
    json!({"type": ["string", "null"], "description": description})
}

internal_item!(
    /// The `memory_search` tool.
    pub fn memory_search_tool() -> ToolDefinition {
        ToolDefinition {
            name: MEMORY_SEARCH.into(),
            description: "Search long-term memory for facts relevant to a query. Use it when \
                      answering benefits from past context; make queries specific, and try \
                      different wordings if the first finds nothing."
                .into(),
            parameters: json!({
                "type": "object",
                "properties": {
                    "query": {"type": "string", "description": "What to look for (at most 8 KiB)."},
                    "destinations": string_list("Only these memory Destinations (null: every accessible one)."),
                    "lenses": string_list("Only facts written through these Lenses (null: every writer)."),
                    "as_of": {
                        "type": ["string", "null"],
                        "description": "What was true at this instant, RFC 3339 (e.g. 2024-06-01T00:00:00Z), instead of what is true now (null: now).",
                    },
                },
                "required": ["query", "destinations", "lenses", "as_of"],
                "additionalProperties": false,
            }),
        }
    }
);

internal_item!(
    /// The `memory_add` tool.
    pub fn memory_add_tool() -> ToolDefinition {
        ToolDefinition {
            name: MEMORY_ADD.into(),
            description: "Store an insight in long-term memory, beyond the conversation that is \
                      already captured automatically. Returns at once; storing happens in the \
                      background."
                .into(),
            parameters: json!({
                "type": "object",
                "properties": {
                    "content": {"type": "string", "description": "What to remember, in plain words."},
                    "source_kind": {
                        "type": ["string", "null"],
                        "enum": ["conversation", "document", "structured_record", null],
                        "description": "What the content is (null: document).",
                    },
                    "source_description": optional_string("Where it came from (null: manual)."),
                },
                "required": ["content", "source_kind", "source_description"],
                "additionalProperties": false,
            }),
        }
    }
);

/// The build-indices admin tool.
pub(crate) fn build_indices_tool() -> ToolDefinition {
    ToolDefinition {
        name: MEMORY_BUILD_INDICES.into(),
        description: "Admin operation: rebuild the indices of every memory graph. DO NOT CALL \
                      unless the user asked for it explicitly."
            .into(),
        parameters: json!({"type": "object", "properties": {}, "required": [], "additionalProperties": false}),
    }
}

/// The build-communities admin tool.
pub(crate) fn build_communities_tool() -> ToolDefinition {
    ToolDefinition {
        name: MEMORY_BUILD_COMMUNITIES.into(),
        description: "Admin operation: detect communities in one memory graph (default: the \
                      operator's personal graph). DO NOT CALL unless the user asked for it \
                      explicitly."
            .into(),
        parameters: json!({
            "type": "object",
            "properties": {
                "destination": optional_string("The Destination (null: personal)."),
            },
            "required": ["destination"],
            "additionalProperties": false,
        }),
    }
}

/// The `memory_get` tool: one episode or fact by id. Its runner needs a way to find a
/// fact by id in every Destination (the `gralkor` MCP server has one); it is not in
/// [`call_tool`].
pub(crate) fn memory_get_tool() -> ToolDefinition {
    ToolDefinition {
        name: MEMORY_GET.into(),
        description: "Read one remembered episode or fact by its uuid, whole, with the \
                      Destination holding it."
            .into(),
        parameters: json!({
            "type": "object",
            "properties": {
                "id": {"type": "string", "description": "The episode's or fact's uuid."},
                "destination": optional_string("The Destination holding it (null: look in every one)."),
            },
            "required": ["id", "destination"],
            "additionalProperties": false,
        }),
    }
}

/// The `memory_forget` tool: one episode by id, or a whole conversation session
/// ([`Client::purge_session`]).
pub(crate) fn memory_forget_tool() -> ToolDefinition {
    ToolDefinition {
        name: MEMORY_FORGET.into(),
        description: "Forget one remembered episode by its id (with the facts only it \
                      supported), or everything remembered from one conversation session. \
                      Only when the user asked to forget it. Exactly one of id and session \
                      is a string; the other is null."
            .into(),
        parameters: json!({
            "type": "object",
            "properties": {
                "id": optional_string("The episode's uuid (null when session is given)."),
                "destination": optional_string("With id: the Destination holding it (null: look in every one; always null with session)."),
                "session": optional_string("A conversation session's id: forget every episode of it (null when id is given)."),
            },
            "required": ["id", "destination", "session"],
            "additionalProperties": false,
        }),
    }
}

/// The `memory_status` tool: what memory is configured and holds.
pub(crate) fn memory_status_tool() -> ToolDefinition {
    ToolDefinition {
        name: MEMORY_STATUS.into(),
        description: "Say what memory is configured (backend, models) and what each \
                      Destination holds."
            .into(),
        parameters: json!({"type": "object", "properties": {}, "required": [], "additionalProperties": false}),
    }
}

/// The `memory_recent` tool: the most recently remembered episodes, newest first.
pub(crate) fn memory_recent_tool() -> ToolDefinition {
    ToolDefinition {
        name: MEMORY_RECENT.into(),
        description: "List the most recently remembered episodes, newest first, with their \
                      ids, times and Destinations."
            .into(),
        parameters: json!({
            "type": "object",
            "properties": {
                "destination": optional_string("Only this Destination (null: every accessible one)."),
                "limit": {
                    "type": ["integer", "null"],
                    "description": "How many per Destination, 1-100 (null: 10).",
                },
            },
            "required": ["destination", "limit"],
            "additionalProperties": false,
        }),
    }
}

/// `memory_get`, `memory_forget`, `memory_status` and `memory_recent`: the tools a
/// memory server adds for inspection and forgetting (run by the server, not by
/// [`call_tool`]).
pub fn inspection_tools() -> Vec<ToolDefinition> {
    vec![
        memory_get_tool(),
        memory_forget_tool(),
        memory_status_tool(),
        memory_recent_tool(),
    ]
}

/// The model's arguments of `memory_forget`: exactly one of `id` and `session`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
#[non_exhaustive]
pub struct MemoryForgetArgs {
    /// The episode's uuid.
    #[serde(default)]
    pub id: Option<String>,
    /// With `id`: the Destination holding it.
    #[serde(default)]
    pub destination: Option<String>,
    /// A conversation session's id.
    #[serde(default)]
    pub session: Option<String>,
}

/// What a `memory_forget` call asks for.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ForgetTarget {
    /// One episode, optionally in a named Destination.
    Episode(uuid::Uuid, Option<String>),
    /// A whole session.
    Session(String),
}

impl MemoryForgetArgs {
    /// Reads and checks `memory_forget`'s arguments; errors name the argument.
    ///
    /// ```
    /// use gralkor::agent::tools::{ForgetTarget, MemoryForgetArgs};
    /// use serde_json::json;
    ///
    /// let t = MemoryForgetArgs::target(&json!({"session": "telegram-42"})).unwrap();
    /// assert_eq!(t, ForgetTarget::Session("telegram-42".into()));
    /// let e = MemoryForgetArgs::target(&json!({})).unwrap_err();
    /// assert!(e.to_string().contains("memory_forget.arguments"), "{e}");
    /// let e = MemoryForgetArgs::target(&json!({"id": "x"})).unwrap_err();
    /// assert!(e.to_string().contains("memory_forget.arguments.id"), "{e}");
    /// ```
    pub fn target(arguments: &Value) -> Result<ForgetTarget> {
        let args: MemoryForgetArgs = serde_json::from_value(arguments.clone())
            .map_err(|e| Error::invalid(format!("{MEMORY_FORGET}.arguments"), e.to_string()))?;
        match (args.id, args.session) {
            (Some(id), None) => {
                let uuid = uuid::Uuid::parse_str(id.trim()).map_err(|_| {
                    Error::invalid(
                        format!("{MEMORY_FORGET}.arguments.id"),
                        format!("must be an episode's uuid (got `{id}`)"),
                    )
                })?;
                Ok(ForgetTarget::Episode(uuid, args.destination))
            }
            (None, Some(session)) => {
                if args.destination.is_some() {
                    return Err(Error::invalid(
                        format!("{MEMORY_FORGET}.arguments.destination"),
                        "goes with `id` only: a session is forgotten in every Destination",
                    ));
                }
                crate::storage::check_session_id(
                    &format!("{MEMORY_FORGET}.arguments.session"),
                    &session,
                )?;
                Ok(ForgetTarget::Session(session))
            }
            _ => Err(Error::invalid(
                format!("{MEMORY_FORGET}.arguments"),
                "must give exactly one of `id` and `session`",
            )),
        }
    }
}

/// `memory_search` and `memory_add`.
pub fn memory_tools() -> Vec<ToolDefinition> {
    vec![memory_search_tool(), memory_add_tool()]
}

/// The admin tools (build indices, build communities).
pub fn admin_tools() -> Vec<ToolDefinition> {
    vec![build_indices_tool(), build_communities_tool()]
}

internal_item!(
    /// The model's arguments of `memory_search`.
    #[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
    #[serde(deny_unknown_fields)]
    #[non_exhaustive]
    pub struct MemorySearchArgs {
        /// The query.
        pub query: String,
        /// Destination selector (absent or null: every accessible one).
        #[serde(default, deserialize_with = "null_as_default")]
        pub destinations: Vec<String>,
        /// Lens selector (absent or null: every writer).
        #[serde(default, deserialize_with = "null_as_default")]
        pub lenses: Vec<String>,
        /// What was true at this instant (RFC 3339) instead of what is current.
        #[serde(default)]
        pub as_of: Option<String>,
    }
);

internal_item!(
    /// What a `memory_add` content is.
    #[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
    #[serde(rename_all = "snake_case")]
    #[non_exhaustive]
    pub enum ToolSourceKind {
        /// A conversation (message) episode.
        Conversation,
        /// A document (text) episode.
        #[default]
        Document,
        /// A structured record: the content must be a JSON object.
        StructuredRecord,
    }
);

internal_item!(
    /// The model's arguments of `memory_add`.
    #[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
    #[serde(deny_unknown_fields)]
    #[non_exhaustive]
    pub struct MemoryAddArgs {
        /// What to remember.
        pub content: String,
        /// What it is (absent or null: document).
        #[serde(default, deserialize_with = "null_as_default")]
        pub source_kind: ToolSourceKind,
        /// Where it came from (default `manual`).
        #[serde(default)]
        pub source_description: Option<String>,
    }
);

/// The model's arguments of the build-communities tool.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
#[non_exhaustive]
pub struct BuildCommunitiesArgs {
    /// The Destination (default `personal`).
    #[serde(default)]
    pub destination: Option<String>,
}

internal_item!(
    /// The model's arguments of the build-indices tool: none.
    #[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
    #[serde(deny_unknown_fields)]
    pub struct BuildIndicesArgs {}
);

/// What the harness supplies to every tool call (never the model).
///
/// ```
/// use gralkor::agent::tools::ToolContext;
/// use gralkor::client::OperatorId;
///
/// let ctx = ToolContext::new(OperatorId::new("op")?).session("s-1").lens("personal-chat");
/// assert_eq!(ctx.max_bytes, gralkor::agent::format::DEFAULT_MAX_BYTES);
/// # Ok::<(), gralkor::Error>(())
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct ToolContext {
    /// The operator.
    pub operator: OperatorId,
    /// The harness's session id, when there is one (never minted).
    pub session: Option<String>,
    /// The ingestion Lens `memory_add` writes through (none: directly to `personal`).
    pub lens: Option<String>,
    /// `memory_search`'s byte budget (default 65,536).
    pub max_bytes: usize,
    /// Who the tools act for, for a client with an authorizer: `memory_search` asks
    /// as them, `memory_add` writes as them and `memory_build_communities` builds as
    /// them (a client with an authorizer refuses requests without one).
    pub subject: Option<Subject>,
    /// The deployment's default group ([`DefaultGroup`](crate::destination::DefaultGroup)'s
    /// Destination name): where the OpenClaw `memory_store` writes when it names no
    /// `group_id` (before the context's Lens and `personal`).
    pub default_group: Option<String>,
}

impl ToolContext {
    /// A context with no session, no Lens and the default budget.
    pub fn new(operator: impl Into<OperatorId>) -> ToolContext {
        ToolContext {
            operator: operator.into(),
            session: None,
            lens: None,
            max_bytes: DEFAULT_MAX_BYTES,
            subject: None,
            default_group: None,
        }
    }

    /// Who the tools act for (see [`ToolContext::subject`](Self#structfield.subject)).
    pub fn subject(mut self, subject: Subject) -> Self {
        self.subject = Some(subject);
        self
    }

    /// The session id.
    pub fn session(mut self, session: impl Into<String>) -> Self {
        self.session = Some(session.into());
        self
    }

    /// The ingestion Lens.
    pub fn lens(mut self, lens: impl Into<String>) -> Self {
        self.lens = Some(lens.into());
        self
    }

    /// The default group (see [`ToolContext::default_group`](Self#structfield.default_group)).
    pub fn default_group(mut self, name: impl Into<String>) -> Self {
        self.default_group = Some(name.into());
        self
    }

    /// The `memory_search` byte budget.
    pub fn max_bytes(mut self, max_bytes: usize) -> Self {
        self.max_bytes = max_bytes;
        self
    }
}

/// Reads an absent or `null` argument as the type's default (strict-mode clients send
/// `null` for an optional property they do not set).
fn null_as_default<'de, D, T>(deserializer: D) -> std::result::Result<T, D::Error>
where
    D: serde::Deserializer<'de>,
    T: Default + Deserialize<'de>,
{
    Ok(Option::<T>::deserialize(deserializer)?.unwrap_or_default())
}

/// The longest `memory_search` query, in bytes: a longer one is refused before
/// anything is embedded (a query is a question, not a document).
pub(crate) const MAX_QUERY_BYTES: usize = 8 * 1024;

/// Refuses a query over [`MAX_QUERY_BYTES`], naming `field`.
pub(crate) fn check_query(field: &str, query: &str) -> Result<()> {
    if query.len() > MAX_QUERY_BYTES {
        return Err(Error::invalid(
            field,
            format!(
                "must be at most {MAX_QUERY_BYTES} bytes (got {}): ask a question, not a document",
                query.len()
            ),
        ));
    }
    Ok(())
}

/// Keywords outside the subset of JSON Schema that strict function calling (OpenAI's
/// `strict: true`, structured outputs) accepts.
#[cfg_attr(not(feature = "testing"), allow(dead_code))]
const NOT_STRICT: [&str; 11] = [
    "oneOf",
    "allOf",
    "not",
    "if",
    "then",
    "else",
    "dependentRequired",
    "dependentSchemas",
    "patternProperties",
    "unevaluatedProperties",
    "default",
];

#[cfg_attr(not(feature = "testing"), allow(dead_code))]
fn strict_schema(path: &str, schema: &Value, out: &mut Vec<String>) {
    let Some(object) = schema.as_object() else {
        out.push(format!("{path}: is not a schema object"));
        return;
    };
    for keyword in NOT_STRICT {
        if object.contains_key(keyword) {
            out.push(format!(
                "{path}: uses `{keyword}`, which strict mode does not accept"
            ));
        }
    }
    if let Some(any_of) = object.get("anyOf") {
        match any_of.as_array() {
            Some(branches) => {
                for (i, branch) in branches.iter().enumerate() {
                    strict_schema(&format!("{path}.anyOf[{i}]"), branch, out);
                }
            }
            None => out.push(format!("{path}.anyOf: is not a list")),
        }
        return;
    }
    let types: Vec<&str> = match object.get("type") {
        Some(Value::String(t)) => vec![t.as_str()],
        Some(Value::Array(ts)) => ts.iter().filter_map(Value::as_str).collect(),
        _ => {
            out.push(format!("{path}: has no `type`"));
            return;
        }
    };
    if let Some(values) = object.get("enum").and_then(Value::as_array)
        && types.contains(&"null")
        && !values.contains(&Value::Null)
    {
        out.push(format!("{path}: is nullable but its `enum` has no null"));
    }
    if types.contains(&"object") {
        let properties = object.get("properties").and_then(Value::as_object);
        let Some(properties) = properties else {
            out.push(format!("{path}: an object without `properties`"));
            return;
        };
        if object.get("additionalProperties") != Some(&Value::Bool(false)) {
            out.push(format!("{path}: must set `additionalProperties: false`"));
        }
        let required: Vec<&str> = object
            .get("required")
            .and_then(Value::as_array)
            .map(|r| r.iter().filter_map(Value::as_str).collect())
            .unwrap_or_default();
        for name in properties.keys() {
            if !required.contains(&name.as_str()) {
                out.push(format!(
                    "{path}.{name}: is not in `required` (strict mode: every property is \
                     required; an optional one is nullable)"
                ));
            }
        }
        for name in &required {
            if !properties.contains_key(*name) {
                out.push(format!(
                    "{path}: requires `{name}`, which is not a property"
                ));
            }
        }
        for (name, property) in properties {
            strict_schema(&format!("{path}.{name}"), property, out);
        }
    }
    if types.contains(&"array") {
        match object.get("items") {
            Some(items) => strict_schema(&format!("{path}[]"), items, out),
            None => out.push(format!("{path}: an array without `items`")),
        }
    }
}

internal_item!(
    /// Every way these tools' parameter schemas break strict function calling (OpenAI
    /// `strict: true`): the root is an object; every object lists every property in
    /// `required` (an optional one is nullable, `"type": [T, "null"]`) and sets
    /// `additionalProperties: false`; no `oneOf`, `allOf`, `not`, conditionals or
    /// `default`; a nullable enum lists `null`; every array has `items`. Empty when all
    /// are compatible. Any tool set can be run through it.
    ///
    /// ```
    /// use gralkor::agent::tools::{admin_tools, inspection_tools, memory_tools, strict_violations};
    /// let all: Vec<_> = memory_tools().into_iter().chain(inspection_tools()).chain(admin_tools()).collect();
    /// assert_eq!(strict_violations(&all), Vec::<String>::new());
    /// ```
    #[cfg_attr(not(feature = "testing"), allow(dead_code))]
    pub fn strict_violations(tools: &[ToolDefinition]) -> Vec<String> {
        let mut out = Vec::new();
        for tool in tools {
            let root = &tool.parameters;
            if root.get("type") != Some(&json!("object")) {
                out.push(format!(
                    "{}: the parameters' root must be `\"type\": \"object\"`",
                    tool.name
                ));
            }
            if root.get("anyOf").is_some() {
                out.push(format!(
                    "{}: the parameters' root must not be `anyOf`",
                    tool.name
                ));
            }
            strict_schema(&tool.name, root, &mut out);
        }
        out
    }
);

fn args<T: for<'de> Deserialize<'de>>(tool: &str, arguments: &Value) -> Result<T> {
    // A model may send no arguments for a tool without required ones.
    let arguments = if arguments.is_null() {
        &json!({})
    } else {
        arguments
    };
    serde_json::from_value(arguments.clone())
        .map_err(|e| Error::invalid(format!("{tool}.arguments"), e.to_string()))
}

internal_item!(
    /// The `memory_search` tool: the budgeted presentation of one fact search.
    ///
    /// ```
    /// # #[tokio::main(flavor = "current_thread")] async fn main() -> gralkor::Result<()> {
    /// use gralkor::agent::tools::{handle_memory_search, ToolContext};
    /// use gralkor::agent::BLANK_QUERY_NON_RESULT;
    /// use gralkor::client::{InMemoryClient, OperatorId};
    /// use serde_json::json;
    ///
    /// let client = InMemoryClient::new();
    /// let ctx = ToolContext::new(OperatorId::new("op")?);
    /// let text = handle_memory_search(&client, &ctx, &json!({"query": " "})).await?;
    /// assert_eq!(text, BLANK_QUERY_NON_RESULT);
    /// # Ok(()) }
    /// ```
    pub async fn handle_memory_search(
        client: &dyn Client,
        ctx: &ToolContext,
        arguments: &Value,
    ) -> Result<String> {
        let a: MemorySearchArgs = args(MEMORY_SEARCH, arguments)?;
        check_query(&format!("{MEMORY_SEARCH}.arguments.query"), &a.query)?;
        let as_of = match a.as_of.as_deref() {
        None => None,
        Some(text) => Some(text.trim().parse::<Timestamp>().map_err(|e| {
            Error::invalid(
                format!("{MEMORY_SEARCH}.arguments.as_of"),
                format!(
                    "must be an RFC 3339 date-time such as 2024-06-01T00:00:00Z (got `{text}`): {e}"
                ),
            )
        })?),
    };
        let mut call = MemorySearch::new(ctx.operator.clone(), a.query)
            .destinations(a.destinations)
            .lenses(a.lenses)
            .max_bytes(ctx.max_bytes);
        call.subject = ctx.subject.clone();
        call.as_of = as_of;
        memory_search(client, &call).await
    }
);

internal_item!(
    /// The `memory_add` tool: validates, hands the write to the background and answers
    /// [`INGESTING`]. Arguments the write cannot take are an error now (nothing is
    /// written); a failure of the background write itself is logged.
    ///
    /// ```
    /// # #[tokio::main(flavor = "current_thread")] async fn main() -> gralkor::Result<()> {
    /// use gralkor::agent::tools::{handle_memory_add, ToolContext, INGESTING};
    /// use gralkor::client::{Client, InMemoryClient, OperatorId};
    /// use serde_json::json;
    ///
    /// let client = InMemoryClient::new();
    /// let ctx = ToolContext::new(OperatorId::new("op")?).lens("personal-chat");
    /// let ack = handle_memory_add(&client, &ctx,
    ///     &json!({"content": "Ada: I keep bees.", "source_kind": "conversation"})).await?;
    /// assert_eq!(ack, INGESTING);
    /// client.await_background_writes().await;
    /// # Ok(()) }
    /// ```
    pub async fn handle_memory_add(
        client: &dyn Client,
        ctx: &ToolContext,
        arguments: &Value,
    ) -> Result<String> {
        let a: MemoryAddArgs = args(MEMORY_ADD, arguments)?;
        let content = match a.source_kind {
            ToolSourceKind::Conversation => Content::conversation(a.content),
            ToolSourceKind::Document => Content::document(a.content),
            ToolSourceKind::StructuredRecord => {
                let record: Value = serde_json::from_str(&a.content).map_err(|e| {
                    Error::invalid(
                        "memory_add.arguments.content",
                        format!("must be a JSON object for a structured_record: {e}"),
                    )
                })?;
                Content::structured(record)
            }
        };
        let mut request = MemoryAdd::new(ctx.operator.clone(), content);
        if let Some(description) = a.source_description {
            request = request.source_description(description);
        }
        if let Some(lens) = &ctx.lens {
            request = request.through_lens(lens.clone());
        }
        if let Some(subject) = &ctx.subject {
            request = request.subject(subject.clone());
        }
        client.memory_add(&request).await?;
        Ok(INGESTING.to_string())
    }
);

/// Runs one tool call by name. Admin tools answer with a short report.
///
/// ```
/// # #[tokio::main(flavor = "current_thread")] async fn main() -> gralkor::Result<()> {
/// use gralkor::agent::tools::{call_tool, ToolContext, INGESTING};
/// use gralkor::client::{Client, InMemoryClient, OperatorId};
/// use serde_json::json;
///
/// let client = InMemoryClient::new();
/// let ctx = ToolContext::new(OperatorId::new("op")?);
/// let ack = call_tool(&client, &ctx, "memory_add", &json!({"content": "Ada prefers tea."})).await?;
/// assert_eq!(ack, INGESTING);
/// client.await_background_writes().await;
/// let text = call_tool(&client, &ctx, "memory_search", &json!({"query": "tea"})).await?;
/// assert_eq!(text, "Source: direct document\n- Ada prefers tea.");
/// # Ok(()) }
/// ```
pub async fn call_tool(
    client: &dyn Client,
    ctx: &ToolContext,
    name: &str,
    arguments: &Value,
) -> Result<String> {
    match name {
        MEMORY_SEARCH => handle_memory_search(client, ctx, arguments).await,
        MEMORY_ADD => handle_memory_add(client, ctx, arguments).await,
        MEMORY_BUILD_INDICES => {
            let BuildIndicesArgs {} = args(MEMORY_BUILD_INDICES, arguments)?;
            client.build_indices().await?;
            Ok("Indices built.".into())
        }
        MEMORY_BUILD_COMMUNITIES => {
            let a: BuildCommunitiesArgs = args(MEMORY_BUILD_COMMUNITIES, arguments)?;
            let mut request = BuildCommunities::new(ctx.operator.clone());
            if let Some(d) = a.destination {
                request = request.destination(d);
            }
            if let Some(subject) = &ctx.subject {
                request = request.subject(subject.clone());
            }
            let counts = client.build_communities(&request).await?;
            Ok(format!(
                "Communities built: {} communities, {} membership edges.",
                counts.communities, counts.edges
            ))
        }
        other => Err(Error::invalid(
            "tool",
            format!("`{other}` is not a gralkor tool"),
        )),
    }
}

/// Pins an OpenAI-style request's `tool_choice` to `memory_search` on iteration 1
/// (iterations count from 1); any other iteration, or a request that is not a JSON
/// object, is returned unchanged.
///
/// ```
/// use gralkor::agent::tools::force_memory_search_on_first_iteration;
/// use serde_json::json;
///
/// let request = json!({"model": "m", "messages": []});
/// let first = force_memory_search_on_first_iteration(request.clone(), 1);
/// assert_eq!(first["tool_choice"],
///     json!({"type": "function", "function": {"name": "memory_search"}}));
/// assert_eq!(force_memory_search_on_first_iteration(request.clone(), 2), request);
/// ```
pub fn force_memory_search_on_first_iteration(mut request: Value, iteration: usize) -> Value {
    if iteration == 1
        && let Some(object) = request.as_object_mut()
    {
        object.insert(
            "tool_choice".into(),
            json!({"type": "function", "function": {"name": MEMORY_SEARCH}}),
        );
    }
    request
}
