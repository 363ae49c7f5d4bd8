//! The Reflection runner: one structured call per step, a bounded tool loop, exact
//! validation, one artefact. No delivery (see [`delivery`](super::delivery)).
//!
//! For each step the runner builds a [`StepPrompt`] showing **only the current
//! step** — the Reflection name, the operator, the invocation id and context, the
//! completed representations, related memory (packaged `generalisations` only), the
//! step's interpolated directions and its exact output contract — plus the host tools,
//! and asks the [`Inference`]. An answer is either the step's output or tool calls;
//! each tool call runs through the [`ToolExecutor`] with the model's arguments and a
//! [`ToolContext`] whose operator is forced from the invocation, and the results go
//! back to inference in the same step, for at most
//! [`Runner::max_tool_rounds`] rounds. Every output is checked exactly against the
//! step's contract ([`Error::ReflectionOutput`] names the step and key); the final
//! step's output becomes the [`Artefact`]'s payload, its id [`artefact_id`].
//!
//! [`ModelInference`] is the built-in inference over any
//! [`LanguageModel`]: one structured-generation call per inference turn.
//!
//! ```
//! # #[tokio::main(flavor = "current_thread")] async fn main() -> gralkor::Result<()> {
//! use std::sync::Arc;
//! use gralkor::llm::doubles::ScriptedModel;
//! use gralkor::reflection::runner::{Invocation, ModelInference, Runner};
//! use gralkor::reflection::{Reflection, Step};
//! use gralkor::storage::OperatorId;
//! use serde_json::json;
//!
//! let reflection = Reflection::new("release-review", "global")
//!     .step(Step::new("review", "Review the evidence.").typed("approved", "boolean"));
//! let model = ScriptedModel::new().answer("step_review", json!({"approved": true}));
//! let runner = Runner::new(Arc::new(ModelInference::new(Arc::new(model))));
//! let invocation = Invocation::new("release-1", OperatorId::new("ada")?);
//! let artefact = runner.run(&reflection, &invocation, None).await?;
//! assert_eq!(artefact.payload, json!({"approved": true}));
//! assert_eq!(artefact.id, gralkor::reflection::artefact_id("ada", "release-1", "release-review"));
//! # Ok(()) }
//! ```

use std::fmt;
use std::sync::Arc;

use async_trait::async_trait;
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value, json};
use tracing::Instrument;

use super::{Reflection, Step, artefact_id};
use crate::access::Subject;
use crate::lens::IngestedRepresentation;
use crate::llm::{GenerateRequest, LanguageModel, Message, OutputSchema};
use crate::storage::{Artefact, Content, OperatorId};
use crate::{Error, Result};

/// The default bound on tool rounds per step.
pub(crate) const DEFAULT_MAX_TOOL_ROUNDS: usize = 8;

/// One completed representation an invocation supplies: exactly its id, Lens,
/// content and the Lens's result.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[non_exhaustive]
pub struct Representation {
    /// The ingestion id.
    pub id: String,
    /// The Lens that wrote it.
    pub lens: String,
    /// What was written.
    pub content: Content,
    /// The Lens's result for it (for an ingested representation: its episode uuid).
    pub result: Value,
}

impl Representation {
    /// A representation.
    pub fn new(
        id: impl Into<String>,
        lens: impl Into<String>,
        content: Content,
        result: Value,
    ) -> Representation {
        Representation {
            id: id.into(),
            lens: lens.into(),
            content,
            result,
        }
    }
}

impl From<&IngestedRepresentation> for Representation {
    fn from(r: &IngestedRepresentation) -> Representation {
        Representation::new(
            r.id.clone(),
            r.lens.clone(),
            r.content.clone(),
            json!({"episode": r.episode.to_string()}),
        )
    }
}

/// One invocation of a Reflection.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[non_exhaustive]
pub struct Invocation {
    /// The replay-stable invocation id (with the operator and the Reflection name it
    /// determines the artefact id).
    pub id: String,
    /// The operator it runs for.
    pub operator: OperatorId,
    /// Free-form context shown to every step.
    pub context: Value,
    /// The completed representations shown to every step.
    pub representations: Vec<Representation>,
    /// Who asks (see [`access`](crate::access)): with an authorizer on the client it
    /// is required, needs `contribute` on the Reflection's Destination when the
    /// invocation is submitted and again when its artefact is delivered, and every
    /// search the Reflection makes (the packaged `generalisations`' related memory)
    /// sees only what it may see. Without an authorizer it is ignored.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub subject: Option<Subject>,
}

impl Invocation {
    /// An invocation with no context and no representations.
    pub fn new(id: impl Into<String>, operator: OperatorId) -> Invocation {
        Invocation {
            id: id.into(),
            operator,
            context: Value::Object(Map::new()),
            representations: Vec::new(),
            subject: None,
        }
    }

    /// Sets the subject the invocation acts for.
    pub fn subject(mut self, subject: Subject) -> Invocation {
        self.subject = Some(subject);
        self
    }

    /// Sets the context.
    pub fn context(mut self, context: Value) -> Invocation {
        self.context = context;
        self
    }

    /// Adds a representation.
    pub fn representation(mut self, r: impl Into<Representation>) -> Invocation {
        self.representations.push(r.into());
        self
    }
}

/// A host tool the model may call.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[non_exhaustive]
pub struct ToolSpec {
    /// The tool's name.
    pub name: String,
    /// What it does.
    pub description: String,
    /// The JSON schema of its arguments (shown to the model).
    pub parameters: Value,
}

impl ToolSpec {
    /// A tool.
    pub fn new(name: impl Into<String>, description: impl Into<String>, parameters: Value) -> Self {
        ToolSpec {
            name: name.into(),
            description: description.into(),
            parameters,
        }
    }
}

/// A tool call the model asked for.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[non_exhaustive]
pub struct ToolCall {
    /// The tool.
    pub name: String,
    /// The model's arguments.
    pub arguments: Value,
}

impl ToolCall {
    /// A call.
    pub fn new(name: impl Into<String>, arguments: Value) -> ToolCall {
        ToolCall {
            name: name.into(),
            arguments,
        }
    }
}

/// What a tool runs with: the host's tool context, with the operator forced from the
/// invocation (whatever the host context says).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[non_exhaustive]
pub struct ToolContext {
    /// The invocation's operator.
    pub operator: OperatorId,
    /// The host's tool context, its `operator_id` (if an object) overwritten with the
    /// invocation's.
    pub values: Value,
}

/// Runs host tools.
#[async_trait]
pub trait ToolExecutor: Send + Sync + fmt::Debug {
    /// Runs one call. An error is shown to the model as the call's result
    /// (`{"error": "…"}`); the step goes on.
    async fn execute(&self, call: &ToolCall, context: &ToolContext) -> Result<Value>;
}

/// One tool call of the current step and its result.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[non_exhaustive]
pub struct ToolExchange {
    /// The call.
    pub call: ToolCall,
    /// Its result.
    pub result: Value,
}

/// Everything one inference turn of one step sees.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[non_exhaustive]
pub struct StepPrompt {
    /// The Reflection's name.
    pub reflection: String,
    /// The operator.
    pub operator: String,
    /// The invocation id.
    pub invocation_id: String,
    /// The invocation context.
    pub invocation_context: Value,
    /// The completed representations.
    pub representations: Vec<Representation>,
    /// Stored related memory (packaged `generalisations` only).
    pub related: Option<Value>,
    /// The step's index (0-based) and the number of steps.
    pub step_index: usize,
    /// How many steps the chain of thought has.
    pub step_count: usize,
    /// The step's label.
    pub label: String,
    /// The step's directions, earlier outputs interpolated.
    pub directions: String,
    /// The exact output contract in the grammar.
    pub contract: String,
    /// Its strict JSON schema.
    pub output_schema: Value,
    /// The host tools.
    pub tools: Vec<ToolSpec>,
    /// This step's tool calls so far, with their results.
    pub exchanges: Vec<ToolExchange>,
}

/// What an inference turn answers: the step's output, or tool calls.
#[derive(Debug, Clone, PartialEq)]
pub enum InferenceResponse {
    /// The step's structured output (checked by the runner).
    Output(Map<String, Value>),
    /// Tools to run; their results come back in the same step.
    ToolCalls(Vec<ToolCall>),
}

/// Answers one inference turn of a step. Errors pass through the runner unchanged, so
/// a provider's HTTP status decides whether production is retried.
#[async_trait]
pub trait Inference: Send + Sync + fmt::Debug {
    /// One turn.
    async fn infer(&self, prompt: &StepPrompt) -> Result<InferenceResponse>;
}

/// The built-in [`Inference`]: one structured-generation call per turn.
///
/// The schema is named `step_<label>` (the label's characters outside
/// `[A-Za-z0-9_-]` become `_`, at most 64 characters), so a
/// [`ScriptedModel`](crate::llm::doubles::ScriptedModel) answers steps by label.
/// Without tools the schema is the step's contract itself; with tools it is
/// `{ tool_calls: Array<{ name; arguments }>; output: contract | null }`, tool
/// arguments as JSON text, and an answer with no tool calls must carry the output.
#[derive(Debug, Clone)]
pub struct ModelInference {
    model: Arc<dyn LanguageModel>,
}

impl ModelInference {
    /// Inference through `model`.
    pub fn new(model: Arc<dyn LanguageModel>) -> ModelInference {
        ModelInference { model }
    }
}

/// The schema name of a step's structured call: `step_<label>`.
pub(crate) fn step_schema_name(label: &str) -> String {
    let mut name: String = format!("step_{label}")
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '_' || c == '-' {
                c
            } else {
                '_'
            }
        })
        .collect();
    name.truncate(64);
    name
}

const SYSTEM_PROMPT: &str = "You carry out one step of a structured chain of thought \
for a memory system. You are shown only the current step: follow its directions using \
the invocation context, the representations and any related memory supplied, and answer \
with exactly the output contract — every key present, no other keys, each value of its \
declared type. Write the output in plain, self-contained sentences a later reader can \
understand without this conversation. When tools are available and you need \
information they provide, ask for tool calls instead of an output; their results come \
back to you in this step.";

fn tool_schema(tools: &[ToolSpec], output: Value) -> Value {
    let names: Vec<&str> = tools.iter().map(|t| t.name.as_str()).collect();
    let mut nullable = output;
    if let Some(obj) = nullable.as_object_mut() {
        obj.insert("type".into(), json!(["object", "null"]));
    }
    json!({
        "type": "object",
        "properties": {
            "tool_calls": {
                "type": "array",
                "items": {
                    "type": "object",
                    "properties": {
                        "name": {"type": "string", "enum": names},
                        "arguments": {"type": "string", "description": "the arguments as a JSON object"}
                    },
                    "required": ["name", "arguments"],
                    "additionalProperties": false
                }
            },
            "output": nullable
        },
        "required": ["tool_calls", "output"],
        "additionalProperties": false
    })
}

fn invalid(prompt: &StepPrompt, message: impl Into<String>) -> Error {
    Error::ReflectionInference {
        reflection: prompt.reflection.clone(),
        step: prompt.label.clone(),
        message: message.into(),
    }
}

#[async_trait]
impl Inference for ModelInference {
    async fn infer(&self, prompt: &StepPrompt) -> Result<InferenceResponse> {
        let with_tools = !prompt.tools.is_empty();
        let schema = if with_tools {
            tool_schema(&prompt.tools, prompt.output_schema.clone())
        } else {
            prompt.output_schema.clone()
        };
        let shown = json!({
            "reflection": prompt.reflection,
            "operator": prompt.operator,
            "invocation": {"id": prompt.invocation_id, "context": prompt.invocation_context},
            "representations": prompt.representations,
            "related_memory": prompt.related,
            "step": {
                "number": prompt.step_index + 1,
                "of": prompt.step_count,
                "label": prompt.label,
                "directions": prompt.directions,
                "output_contract": prompt.contract,
            },
            "tools": prompt.tools,
        });
        let mut request =
            GenerateRequest::new(OutputSchema::new(step_schema_name(&prompt.label), schema))
                .system(SYSTEM_PROMPT)
                .user(serde_json::to_string_pretty(&shown).unwrap_or_default())
                .label(format!("reflection:{}", prompt.reflection));
        for exchange in &prompt.exchanges {
            request.messages.push(Message::assistant(
                json!({"tool_calls": [{"name": exchange.call.name, "arguments": exchange.call.arguments}]})
                    .to_string(),
            ));
            request.messages.push(Message::user(
                json!({"tool_result": {"name": exchange.call.name, "result": exchange.result}})
                    .to_string(),
            ));
        }
        let answer = self.model.generate(&request).await?.value;
        if !with_tools {
            return match answer {
                Value::Object(map) => Ok(InferenceResponse::Output(map)),
                other => Err(invalid(
                    prompt,
                    format!("the model answered a non-object: {other}"),
                )),
            };
        }
        let calls = answer
            .get("tool_calls")
            .and_then(Value::as_array)
            .cloned()
            .unwrap_or_default();
        if !calls.is_empty() {
            let mut out = Vec::with_capacity(calls.len());
            for c in calls {
                let name = c.get("name").and_then(Value::as_str).unwrap_or_default();
                let text = c.get("arguments").and_then(Value::as_str).unwrap_or("{}");
                let arguments: Value = serde_json::from_str(text).map_err(|e| {
                    invalid(
                        prompt,
                        format!("the arguments of tool call `{name}` are not JSON: {e}"),
                    )
                })?;
                out.push(ToolCall::new(name, arguments));
            }
            return Ok(InferenceResponse::ToolCalls(out));
        }
        match answer.get("output") {
            Some(Value::Object(map)) => Ok(InferenceResponse::Output(map.clone())),
            _ => Err(invalid(
                prompt,
                "the model answered neither tool calls nor an output",
            )),
        }
    }
}

/// Runs Reflections: inference, host tools and the tool-round bound.
#[derive(Debug, Clone)]
pub struct Runner {
    inference: Arc<dyn Inference>,
    tools: Vec<ToolSpec>,
    executor: Option<Arc<dyn ToolExecutor>>,
    tool_context: Value,
    max_tool_rounds: usize,
}

impl Runner {
    /// A runner asking `inference`, with no tools.
    pub fn new(inference: Arc<dyn Inference>) -> Runner {
        Runner {
            inference,
            tools: Vec::new(),
            executor: None,
            tool_context: Value::Object(Map::new()),
            max_tool_rounds: DEFAULT_MAX_TOOL_ROUNDS,
        }
    }

    /// Offers `tools`, run by `executor`.
    pub fn tools(mut self, tools: Vec<ToolSpec>, executor: Arc<dyn ToolExecutor>) -> Runner {
        self.tools = tools;
        self.executor = Some(executor);
        self
    }

    /// The host's tool context (its `operator_id` is always overwritten with the
    /// invocation's operator).
    pub fn tool_context(mut self, context: Value) -> Runner {
        self.tool_context = context;
        self
    }

    /// At most `rounds` tool rounds per step (default `DEFAULT_MAX_TOOL_ROUNDS`);
    /// a step still asking for tools after that fails.
    pub fn max_tool_rounds(mut self, rounds: usize) -> Runner {
        self.max_tool_rounds = rounds;
        self
    }

    /// Produces the artefact of `reflection` for `invocation`; `related` is stored
    /// related memory shown to every step (the packaged `generalisations` passes it).
    pub async fn run(
        &self,
        reflection: &Reflection,
        invocation: &Invocation,
        related: Option<Value>,
    ) -> Result<Artefact> {
        let span = tracing::info_span!(
            "reflection.run",
            reflection = reflection.name(),
            invocation = invocation.id.as_str()
        );
        async {
            let mut outputs: Map<String, Value> = Map::new();
            let mut last: Option<Map<String, Value>> = None;
            let steps = reflection.steps();
            for (i, step) in steps.iter().enumerate() {
                let out = self
                    .run_step(
                        reflection,
                        invocation,
                        &related,
                        i,
                        steps.len(),
                        step,
                        &outputs,
                    )
                    .await?;
                for (k, v) in &out {
                    outputs.insert(k.clone(), v.clone());
                }
                last = Some(out);
            }
            let payload = last.ok_or_else(|| Error::ReflectionInference {
                reflection: reflection.name().to_string(),
                step: String::new(),
                message: "finished without a final output (missing artefact)".into(),
            })?;
            Ok(Artefact::new(
                artefact_id(
                    invocation.operator.as_str(),
                    &invocation.id,
                    reflection.name(),
                ),
                Value::Object(payload),
            ))
        }
        .instrument(span)
        .await
    }

    fn forced_context(&self, operator: &OperatorId) -> ToolContext {
        let mut values = self.tool_context.clone();
        if let Value::Object(map) = &mut values {
            map.insert(
                "operator_id".into(),
                Value::String(operator.as_str().into()),
            );
        }
        ToolContext {
            operator: operator.clone(),
            values,
        }
    }

    #[allow(clippy::too_many_arguments)]
    async fn run_step(
        &self,
        reflection: &Reflection,
        invocation: &Invocation,
        related: &Option<Value>,
        index: usize,
        count: usize,
        step: &Step,
        earlier: &Map<String, Value>,
    ) -> Result<Map<String, Value>> {
        let mut prompt = StepPrompt {
            reflection: reflection.name().to_string(),
            operator: invocation.operator.as_str().to_string(),
            invocation_id: invocation.id.clone(),
            invocation_context: invocation.context.clone(),
            representations: invocation.representations.clone(),
            related: related.clone(),
            step_index: index,
            step_count: count,
            label: step.label().to_string(),
            directions: step.interpolated_directions(earlier),
            contract: step.contract(),
            output_schema: step.output_schema(),
            tools: self.tools.clone(),
            exchanges: Vec::new(),
        };
        let mut rounds = 0;
        loop {
            match self.inference.infer(&prompt).await? {
                InferenceResponse::Output(map) => {
                    step.check_output(&map)
                        .map_err(|m| Error::ReflectionOutput {
                            reflection: reflection.name().to_string(),
                            step: step.label().to_string(),
                            key: m.key,
                            problem: m.problem,
                        })?;
                    return Ok(map);
                }
                InferenceResponse::ToolCalls(calls) => {
                    if calls.is_empty() {
                        return Err(invalid(&prompt, "an empty list of tool calls"));
                    }
                    rounds += 1;
                    if rounds > self.max_tool_rounds {
                        return Err(invalid(
                            &prompt,
                            format!(
                                "still asking for tools after {} rounds (the limit)",
                                self.max_tool_rounds
                            ),
                        ));
                    }
                    let context = self.forced_context(&invocation.operator);
                    for call in calls {
                        let result = match (
                            &self.executor,
                            self.tools.iter().any(|t| t.name == call.name),
                        ) {
                            (Some(executor), true) => executor
                                .execute(&call, &context)
                                .instrument(tracing::info_span!(
                                    "reflection.tool",
                                    tool = call.name.as_str()
                                ))
                                .await
                                .unwrap_or_else(|e| json!({"error": e.to_string()})),
                            _ => json!({"error": format!("no tool named `{}`", call.name)}),
                        };
                        prompt.exchanges.push(ToolExchange { call, result });
                    }
                }
            }
        }
    }
}

#[cfg(test)]
mod tests;
