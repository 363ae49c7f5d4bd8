//! The agent loop of `examples/agent.rs`, kept in a file of its own so that
//! `tests/agent_loop.rs` drives the very code the example runs.
//!
//! One turn, against any OpenAI-compatible chat-completions endpoint:
//!
//! 1. **Auto-recall.** [`AgentRecall::before_turn`] searches memory for the prompt;
//!    the memory block it returns is put in front of the user's message.
//! 2. **The tool loop.** Each request carries the memory tools' definitions
//!    ([`memory_tools`]); iteration 1 has `tool_choice` pinned to `memory_search`
//!    ([`force_memory_search_on_first_iteration`]), later ones leave the choice to
//!    the model. Every tool call the model makes runs through [`call_tool`] and its
//!    result goes back as a `tool` message, until the model answers without tools.
//! 3. **Auto-capture.** [`AgentCapture::after_turn`] buffers the turn's messages;
//!    the injected block and the `memory_search` results are dropped before
//!    anything is stored, and nothing is written until the buffer is flushed.
//!
//! A failed request is captured as a failed turn (`request failed: …`) and returned
//! as the error.
#![allow(dead_code)]

use std::sync::Arc;
use std::time::Duration;

use gralkor::agent::capture::{Capture, CaptureBuffer, CaptureRoute};
use gralkor::agent::hooks::{AgentCapture, AgentRecall, AutoCapture};
use gralkor::agent::tools::{
    ToolContext, call_tool, force_memory_search_on_first_iteration, memory_tools,
};
use gralkor::agent::turn::Turn;
use gralkor::client::{Client, OperatorId};
use gralkor::{Error, Result};
use serde_json::{Value, json};

/// The model used when `GRALKOR_LLM_MODEL` does not name one (the crate's OpenAI
/// default).
pub const DEFAULT_MODEL: &str = "gpt-4.1-mini";
/// OpenAI's endpoint, used when only `OPENAI_API_KEY` is set.
pub const OPENAI_BASE_URL: &str = "https://api.openai.com/v1";

/// An OpenAI-compatible chat-completions endpoint.
#[derive(Debug, Clone)]
pub struct Endpoint {
    /// The base URL (`…/v1`); requests go to `{base_url}/chat/completions`.
    pub base_url: String,
    /// The bearer token, if the endpoint needs one.
    pub api_key: Option<String>,
    /// The model name sent with every request.
    pub model: String,
}

impl Endpoint {
    /// The endpoint the environment names, with the variables `gralkor::Config`
    /// reads: `OPENAI_BASE_URL` and/or `OPENAI_API_KEY`, and the model from
    /// `GRALKOR_LLM_MODEL` (`openai:<model>`, default [`DEFAULT_MODEL`]). `Ok(None)`
    /// when neither `OPENAI_BASE_URL` nor `OPENAI_API_KEY` is set.
    pub fn from_lookup(lookup: impl Fn(&str) -> Option<String>) -> Result<Option<Endpoint>> {
        let get = |k: &str| lookup(k).filter(|v| !v.trim().is_empty());
        let (base_url, api_key) = (get("OPENAI_BASE_URL"), get("OPENAI_API_KEY"));
        if base_url.is_none() && api_key.is_none() {
            return Ok(None);
        }
        let model = match get("GRALKOR_LLM_MODEL") {
            None => DEFAULT_MODEL.to_string(),
            Some(spec) => match spec.split_once(':') {
                Some(("openai", model)) if !model.trim().is_empty() => model.trim().to_string(),
                None => spec.trim().to_string(),
                _ => {
                    return Err(Error::Config {
                        field: "GRALKOR_LLM_MODEL".into(),
                        rule: format!("must be `openai:<model>` for this agent (got `{spec}`)"),
                    });
                }
            },
        };
        Ok(Some(Endpoint {
            base_url: base_url
                .unwrap_or_else(|| OPENAI_BASE_URL.to_string())
                .trim_end_matches('/')
                .to_string(),
            api_key,
            model,
        }))
    }
}

/// What one turn produced.
#[derive(Debug, Clone)]
pub struct Answer {
    /// The model's final answer.
    pub text: String,
    /// The memory block injected before the turn, if recall found one to inject.
    pub memory_block: Option<String>,
    /// The turn's chat messages as sent and received (system prompt first).
    pub messages: Vec<Value>,
    /// The model calls made.
    pub iterations: usize,
}

/// An agent with long-term memory: one operator, one agent and one human name.
pub struct Agent {
    http: reqwest::Client,
    endpoint: Endpoint,
    client: Arc<dyn Client>,
    buffer: CaptureBuffer,
    recall: AgentRecall,
    capture: AgentCapture,
    operator: OperatorId,
    agent_name: String,
    human_name: String,
    system: String,
    max_iterations: usize,
}

impl Agent {
    /// The agent `agent_name` of `operator`, talking with `human_name`: default
    /// auto-recall, capture direct to the operator's `personal` graph.
    pub fn new(
        endpoint: Endpoint,
        client: Arc<dyn Client>,
        buffer: CaptureBuffer,
        operator: OperatorId,
        agent_name: &str,
        human_name: &str,
    ) -> Result<Agent> {
        let recall = AgentRecall::new(
            client.clone(),
            operator.clone(),
            agent_name,
            gralkor::agent::AutoRecall::new(),
        )?;
        let capture = AgentCapture::new(
            buffer.clone(),
            operator.clone(),
            agent_name,
            human_name,
            CaptureRoute::default(),
            AutoCapture::new(),
        )?;
        Ok(Agent {
            http: reqwest::Client::builder()
                .timeout(Duration::from_secs(120))
                .build()
                .map_err(|e| provider_error(None, "building the HTTP client", e))?,
            endpoint,
            client,
            buffer,
            recall,
            capture,
            operator,
            agent_name: agent_name.to_string(),
            human_name: human_name.to_string(),
            system: format!(
                "You are {agent_name}, an assistant with long-term memory. Use memory_search \
                 to look things up and memory_add to remember what matters. Answer briefly."
            ),
            max_iterations: 6,
        })
    }

    /// The capture buffer (to flush it).
    pub fn buffer(&self) -> &CaptureBuffer {
        &self.buffer
    }

    /// One turn of `session`: recall, the tool loop, capture (see the module docs).
    pub async fn turn(&self, session: &str, prompt: &str) -> Result<Answer> {
        let memory_block = match self.recall.before_turn(Some(session), prompt).await {
            Ok(block) => block,
            Err(e @ Error::RecallDeadlineExpired { .. }) => {
                tracing::warn!(error = %e, "recall too slow; this turn goes on without memory");
                None
            }
            Err(e) => return Err(e),
        };
        let user = match &memory_block {
            Some(block) => format!("{block}\n\n{prompt}"),
            None => prompt.to_string(),
        };
        let mut messages = vec![
            json!({"role": "system", "content": self.system}),
            json!({"role": "user", "content": user}),
        ];
        let tools = ToolContext::new(self.operator.clone()).session(session);
        match self.run(&tools, &mut messages).await {
            Ok((text, iterations)) => {
                self.capture.after_turn(Some(session), &messages).await?;
                Ok(Answer {
                    text,
                    memory_block,
                    messages,
                    iterations,
                })
            }
            Err(error) => {
                let turn = Turn::from_chat_failed(&messages, &error.to_string())?;
                self.buffer
                    .append(Capture::new(
                        session,
                        self.operator.clone(),
                        self.agent_name.clone(),
                        self.human_name.clone(),
                        turn,
                    ))
                    .await?;
                Err(error)
            }
        }
    }

    /// The tool loop: model calls until an answer without tool calls.
    async fn run(&self, tools: &ToolContext, messages: &mut Vec<Value>) -> Result<(String, usize)> {
        let definitions: Vec<Value> = memory_tools().iter().map(|t| t.openai()).collect();
        for iteration in 1..=self.max_iterations {
            let request = json!({
                "model": self.endpoint.model,
                "messages": messages,
                "tools": definitions,
            });
            let request = force_memory_search_on_first_iteration(request, iteration);
            let reply = self.complete(&request).await?;
            let message = reply
                .pointer("/choices/0/message")
                .cloned()
                .ok_or_else(|| unusable("the reply has no choices[0].message"))?;
            let calls = message
                .get("tool_calls")
                .and_then(Value::as_array)
                .cloned()
                .unwrap_or_default();
            messages.push(json!({
                "role": "assistant",
                "content": message.get("content").cloned().unwrap_or(Value::Null),
                "tool_calls": if calls.is_empty() { Value::Null } else { Value::Array(calls.clone()) },
            }));
            if calls.is_empty() {
                let text = message
                    .get("content")
                    .and_then(Value::as_str)
                    .unwrap_or_default()
                    .trim()
                    .to_string();
                return Ok((text, iteration));
            }
            for call in &calls {
                let id = call.get("id").and_then(Value::as_str).unwrap_or_default();
                let name = call
                    .pointer("/function/name")
                    .and_then(Value::as_str)
                    .unwrap_or_default();
                let arguments = call
                    .pointer("/function/arguments")
                    .and_then(Value::as_str)
                    .unwrap_or("{}");
                let result = match serde_json::from_str::<Value>(arguments) {
                    Ok(arguments) => call_tool(self.client.as_ref(), tools, name, &arguments)
                        .await
                        .unwrap_or_else(|e| format!("error: {e}")),
                    Err(e) => format!("error: the arguments are not JSON: {e}"),
                };
                messages.push(json!({"role": "tool", "tool_call_id": id, "content": result}));
            }
        }
        Err(unusable(&format!(
            "no answer after {} model calls",
            self.max_iterations
        )))
    }

    /// One chat-completions request.
    async fn complete(&self, request: &Value) -> Result<Value> {
        let url = format!("{}/chat/completions", self.endpoint.base_url);
        let mut post = self.http.post(&url).json(request);
        if let Some(key) = &self.endpoint.api_key {
            post = post.bearer_auth(key);
        }
        let response = post
            .send()
            .await
            .map_err(|e| provider_error(None, "sending the chat request", e))?;
        let status = response.status();
        let body = response
            .text()
            .await
            .map_err(|e| provider_error(Some(status.as_u16()), "reading the chat reply", e))?;
        if !status.is_success() {
            return Err(Error::Provider {
                provider: "openai".into(),
                status: Some(status.as_u16()),
                message: body.chars().take(500).collect(),
                retry_after: None,
                source: None,
            });
        }
        serde_json::from_str(&body).map_err(|e| unusable(&format!("the reply is not JSON: {e}")))
    }
}

fn provider_error(status: Option<u16>, what: &str, e: reqwest::Error) -> Error {
    Error::Provider {
        provider: "openai".into(),
        status,
        message: format!("{what}: {e}"),
        retry_after: None,
        source: Some(Box::new(e)),
    }
}

fn unusable(message: &str) -> Error {
    Error::ModelOutput {
        provider: "openai".into(),
        message: message.to_string(),
    }
}
