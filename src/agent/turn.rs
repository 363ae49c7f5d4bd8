//! The canonical turn: what an agent's exchange becomes before it is captured.
//!
//! A [`Turn`] is an ordered list of [`Message`]s whose [`Role`] is `user` (what the
//! human said), `behaviour` (what the agent did on the way: its thoughts before tool
//! calls, the tools it ran and what they returned, a failure) or `assistant` (the
//! answer). Only the role matters downstream: the transcript keeps user and assistant
//! lines and drops behaviour ([`format_transcript`](super::transcript::format_transcript)).
//!
//! * [`Turn::completed`] — the query, the behaviour trace, the answer (trimmed; a blank
//!   one gives no assistant message).
//! * [`Turn::failed`] — the query, the trace, then `request failed: <error>` as a
//!   behaviour message, and no assistant message.
//! * [`Turn::from_chat`] / [`Turn::from_chat_failed`] — from OpenAI-style chat
//!   messages (`system` / `user` / `assistant` with `tool_calls` / `tool`), the shape
//!   most Rust agents hold: an assistant message that calls tools becomes
//!   `thought: <text>`, a tool result `tool NAME → RESULT` (`tool NAME` when empty).
//!
//! A whitespace-only query gives no user message, and a turn with no messages at all
//! is empty ([`Turn::is_empty`]); the capture buffer skips empty turns.
//!
//! ```
//! use gralkor::agent::turn::{Role, Turn};
//! use serde_json::json;
//!
//! let turn = Turn::from_chat(&[
//!     json!({"role": "system", "content": "You are Susu."}),
//!     json!({"role": "user", "content": "Where does Ada work?"}),
//!     json!({"role": "assistant", "content": "Let me check.", "tool_calls": [
//!         {"id": "c1", "type": "function",
//!          "function": {"name": "lookup", "arguments": "{\"who\":\"Ada\"}"}}]}),
//!     json!({"role": "tool", "tool_call_id": "c1", "content": "Acme"}),
//!     json!({"role": "assistant", "content": " At Acme. "}),
//! ])?;
//! let lines: Vec<_> = turn.messages().iter().map(|m| (m.role, m.content.as_str())).collect();
//! assert_eq!(lines, [
//!     (Role::User, "Where does Ada work?"),
//!     (Role::Behaviour, "thought: Let me check."),
//!     (Role::Behaviour, "tool lookup → Acme"),
//!     (Role::Assistant, "At Acme."),
//! ]);
//! # Ok::<(), gralkor::Error>(())
//! ```

use std::collections::HashMap;

use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::{Error, Result};

/// Who a message is from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Role {
    /// The human.
    User,
    /// What the agent did on the way to its answer (never stored in memory).
    Behaviour,
    /// The agent's answer.
    Assistant,
}

/// One canonical message.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Message {
    /// Who it is from.
    pub role: Role,
    /// What was said or done.
    pub content: String,
}

impl Message {
    /// A message.
    pub fn new(role: Role, content: impl Into<String>) -> Message {
        Message {
            role,
            content: content.into(),
        }
    }

    /// A user message.
    pub fn user(content: impl Into<String>) -> Message {
        Message::new(Role::User, content)
    }

    /// A behaviour message.
    pub fn behaviour(content: impl Into<String>) -> Message {
        Message::new(Role::Behaviour, content)
    }

    /// An assistant message.
    pub fn assistant(content: impl Into<String>) -> Message {
        Message::new(Role::Assistant, content)
    }
}

/// The prefix of a failed turn's terminal behaviour message.
pub(crate) const REQUEST_FAILED: &str = "request failed: ";

/// One exchange: the human's query, what the agent did, and its answer or failure.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Turn {
    messages: Vec<Message>,
}

impl Turn {
    /// A turn of these messages, as given (blank messages are dropped).
    pub fn new(messages: impl IntoIterator<Item = Message>) -> Turn {
        Turn {
            messages: messages
                .into_iter()
                .filter(|m| !m.content.trim().is_empty())
                .collect(),
        }
    }

    /// A completed turn: the query (unchanged; none when blank), the behaviour trace in
    /// order, then the trimmed answer (none when blank).
    ///
    /// ```
    /// use gralkor::agent::turn::{Message, Turn};
    ///
    /// let t = Turn::completed("hi there", ["tool clock → 9:00"], "  It is nine. ");
    /// assert_eq!(t.messages().last(), Some(&Message::assistant("It is nine.")));
    /// assert!(Turn::completed("  ", Vec::<String>::new(), " ").is_empty());
    /// ```
    pub fn completed<B: Into<String>>(
        query: &str,
        behaviour: impl IntoIterator<Item = B>,
        answer: &str,
    ) -> Turn {
        let mut messages = opening(query, behaviour);
        messages.push(Message::assistant(answer.trim()));
        Turn::new(messages)
    }

    /// A failed turn: the query, the trace, then `request failed: <error>` as a
    /// behaviour message, with no assistant message.
    ///
    /// ```
    /// use gralkor::agent::turn::{Message, Role, Turn};
    ///
    /// let t = Turn::failed("book a table", Vec::<String>::new(), "timeout after 30s");
    /// assert_eq!(t.messages(), [
    ///     Message::user("book a table"),
    ///     Message::behaviour("request failed: timeout after 30s"),
    /// ]);
    /// assert!(t.messages().iter().all(|m| m.role != Role::Assistant));
    /// ```
    pub fn failed<B: Into<String>>(
        query: &str,
        behaviour: impl IntoIterator<Item = B>,
        error: &str,
    ) -> Turn {
        let mut messages = opening(query, behaviour);
        messages.push(Message::behaviour(format!(
            "{REQUEST_FAILED}{}",
            error.trim()
        )));
        Turn::new(messages)
    }

    /// A completed turn from OpenAI-style chat messages (JSON values, as an OpenAI
    /// request carries them; any typed client's messages serialise to this shape):
    ///
    /// * `system` (and `developer`) messages are ignored;
    /// * `user` → a user message, unchanged (content given as parts has its text parts
    ///   joined with spaces); blank → none;
    /// * `assistant` with `tool_calls` → `thought: <text>` (none when the text is
    ///   blank); `assistant` without → an assistant message, trimmed;
    /// * `tool` → `tool NAME → RESULT`, the name found through `tool_call_id` among
    ///   the earlier tool calls (or the message's own `name`), `tool NAME` when the
    ///   result is blank.
    ///
    /// A message without a string `role`, or with an unknown one, is an error naming
    /// it (`messages[i].role`).
    pub fn from_chat(messages: &[Value]) -> Result<Turn> {
        Ok(Turn::new(chat_messages(messages, true)?))
    }

    /// [`from_chat`](Turn::from_chat) for a turn that failed: the messages so far
    /// without any answer, then `request failed: <error>`.
    ///
    /// ```
    /// use gralkor::agent::turn::{Message, Turn};
    /// use serde_json::json;
    ///
    /// let t = Turn::from_chat_failed(&[json!({"role": "user", "content": "hello?"})], "HTTP 503")?;
    /// assert_eq!(t.messages(), [Message::user("hello?"), Message::behaviour("request failed: HTTP 503")]);
    /// # Ok::<(), gralkor::Error>(())
    /// ```
    pub fn from_chat_failed(messages: &[Value], error: &str) -> Result<Turn> {
        let mut out = chat_messages(messages, false)?;
        out.push(Message::behaviour(format!(
            "{REQUEST_FAILED}{}",
            error.trim()
        )));
        Ok(Turn::new(out))
    }

    /// The messages, in order.
    pub fn messages(&self) -> &[Message] {
        &self.messages
    }

    /// Consumes the turn into its messages.
    pub fn into_messages(self) -> Vec<Message> {
        self.messages
    }

    /// No messages: nothing to capture.
    pub fn is_empty(&self) -> bool {
        self.messages.is_empty()
    }
}

fn opening<B: Into<String>>(query: &str, behaviour: impl IntoIterator<Item = B>) -> Vec<Message> {
    let mut messages = vec![Message::user(query)];
    messages.extend(behaviour.into_iter().map(|b| Message::behaviour(b)));
    messages
}

/// The text of a chat message's `content`: a string, or the text parts of a list
/// joined with spaces; anything else is no text.
pub(crate) fn content_text(content: Option<&Value>) -> String {
    match content {
        Some(Value::String(s)) => s.clone(),
        Some(Value::Array(parts)) => parts
            .iter()
            .filter_map(|p| match p {
                Value::String(s) => Some(s.as_str()),
                Value::Object(o) => o.get("text").and_then(Value::as_str),
                _ => None,
            })
            .filter(|t| !t.trim().is_empty())
            .collect::<Vec<_>>()
            .join(" "),
        _ => String::new(),
    }
}

fn chat_messages(messages: &[Value], completed: bool) -> Result<Vec<Message>> {
    let mut out = Vec::new();
    let mut tool_names: HashMap<String, String> = HashMap::new();
    for (i, m) in messages.iter().enumerate() {
        let field = format!("messages[{i}].role");
        let role = m
            .get("role")
            .and_then(Value::as_str)
            .ok_or_else(|| Error::invalid(&field, "must be a string"))?;
        let text = content_text(m.get("content"));
        match role {
            "system" | "developer" => {}
            "user" => out.push(Message::user(text)),
            "assistant" => {
                let calls = m
                    .get("tool_calls")
                    .and_then(Value::as_array)
                    .filter(|c| !c.is_empty());
                match calls {
                    Some(calls) => {
                        for call in calls {
                            let name = call
                                .pointer("/function/name")
                                .and_then(Value::as_str)
                                .unwrap_or("tool");
                            if let Some(id) = call.get("id").and_then(Value::as_str) {
                                tool_names.insert(id.to_string(), name.to_string());
                            }
                        }
                        if !text.trim().is_empty() {
                            out.push(Message::behaviour(format!("thought: {}", text.trim())));
                        }
                    }
                    None if completed => out.push(Message::assistant(text.trim())),
                    None => {}
                }
            }
            "tool" | "function" => {
                let name = m
                    .get("tool_call_id")
                    .and_then(Value::as_str)
                    .and_then(|id| tool_names.get(id).cloned())
                    .or_else(|| m.get("name").and_then(Value::as_str).map(str::to_string))
                    .unwrap_or_else(|| "tool".to_string());
                out.push(Message::behaviour(tool_line(&name, &text)));
            }
            other => {
                return Err(Error::invalid(
                    field,
                    format!(
                        "must be one of system, developer, user, assistant, tool (got `{other}`)"
                    ),
                ));
            }
        }
    }
    Ok(out)
}

internal_item!(
    /// `tool NAME → RESULT`, or `tool NAME` when the result is blank.
    ///
    /// ```
    /// use gralkor::agent::turn::tool_line;
    ///
    /// assert_eq!(tool_line("clock", " 9:00 "), "tool clock → 9:00");
    /// assert_eq!(tool_line("clock", ""), "tool clock");
    /// ```
    pub fn tool_line(name: &str, result: &str) -> String {
        let result = result.trim();
        if result.is_empty() {
            format!("tool {name}")
        } else {
            format!("tool {name} → {result}")
        }
    }
);
