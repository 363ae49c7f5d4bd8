//! Parsing, validating and repairing structured answers (shared by every provider).

use std::future::Future;
use std::time::Duration;

use serde_json::Value;

use super::{
    GenerateRequest, Generation, Message, OutputSchema, TokenUsage, estimate_tokens, schema,
};
use crate::{Error, Result};

/// Most violations quoted back to the model or into an error.
const MAX_QUOTED_VIOLATIONS: usize = 20;

/// Tokens to reserve in the limiter for one generation attempt: the messages plus the
/// output cap.
pub(crate) fn estimate_generation(messages: &[Message], max_output_tokens: u32) -> u64 {
    messages
        .iter()
        .map(|m| estimate_tokens(&m.content))
        .sum::<u64>()
        + u64::from(max_output_tokens)
}

/// The instruction added to the prompt when the provider cannot enforce the schema
/// itself (OpenAI `json_object` mode).
pub(crate) fn schema_instruction(schema: &OutputSchema) -> String {
    format!(
        "Respond with only a JSON object (no prose, no code fences) that is valid against \
         this JSON schema, named `{}`:\n{}",
        schema.name,
        serde_json::to_string_pretty(&schema.schema).unwrap_or_default()
    )
}

/// Parses `text` as JSON (tolerating a surrounding Markdown code fence) and validates
/// it. The error describes what is wrong, for the repair prompt.
pub(crate) fn parse_answer(
    schema: &OutputSchema,
    text: &str,
) -> std::result::Result<Value, String> {
    let body = strip_fence(text.trim());
    if body.is_empty() {
        return Err("the answer was empty".to_string());
    }
    let value: Value =
        serde_json::from_str(body).map_err(|e| format!("the answer is not valid JSON ({e})"))?;
    let violations = schema::validate(&schema.schema, &value);
    if violations.is_empty() {
        return Ok(value);
    }
    let shown: Vec<&str> = violations
        .iter()
        .take(MAX_QUOTED_VIOLATIONS)
        .map(String::as_str)
        .collect();
    let more = violations.len().saturating_sub(MAX_QUOTED_VIOLATIONS);
    let tail = if more > 0 {
        format!("; and {more} more")
    } else {
        String::new()
    };
    Err(format!(
        "the answer does not match the schema `{}`: {}{tail}",
        schema.name,
        shown.join("; ")
    ))
}

fn strip_fence(text: &str) -> &str {
    let Some(rest) = text.strip_prefix("```") else {
        return text;
    };
    let rest = rest.trim_start_matches(|c: char| c.is_ascii_alphanumeric());
    rest.strip_suffix("```").unwrap_or(rest).trim()
}

/// How far one structured call may go, beyond the request itself: a ceiling on its
/// output cap, a deadline on the whole call (every HTTP attempt, retry wait and repair
/// included) and how many repair turns an unusable answer gets.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct CallBounds {
    /// The most output tokens any call may ask for; `None`: the request's own cap.
    pub max_output_tokens: Option<u32>,
    /// The deadline of one whole call; `None`: only the retry policy bounds it.
    pub deadline: Option<Duration>,
    /// Repair turns after an unusable answer (default 1).
    pub repair_attempts: u32,
}

impl Default for CallBounds {
    fn default() -> Self {
        CallBounds {
            max_output_tokens: None,
            deadline: None,
            repair_attempts: 1,
        }
    }
}

impl CallBounds {
    /// The cap sent with `request`: its own ([`GenerateRequest::output_cap`]), lowered
    /// to the ceiling.
    pub(crate) fn output_cap(&self, request: &GenerateRequest) -> u32 {
        let cap = request.output_cap();
        self.max_output_tokens
            .map_or(cap, |max| cap.min(max.max(1)))
    }

    /// Runs `call` within the deadline; past it, an [`Error::Timeout`] naming the
    /// provider, the model and the step.
    pub(crate) async fn within_deadline<T>(
        &self,
        provider: &str,
        model: &str,
        request: &GenerateRequest,
        call: impl Future<Output = Result<T>>,
    ) -> Result<T> {
        let Some(deadline) = self.deadline else {
            return call.await;
        };
        tokio::time::timeout(deadline, call)
            .await
            .map_err(|_| Error::Timeout {
                operation: format!(
                    "{provider} model `{model}`, step `{}` (schema `{}`)",
                    request.label, request.schema.name
                ),
                after: deadline,
            })?
    }
}

/// Runs `ask` with the request's messages; if the answer is not valid JSON or not
/// valid against the schema, asks again with the bad answer and what was wrong, up to
/// `repair_attempts` times, then gives up with [`Error::ModelOutput`]. Every
/// [`Error::ModelOutput`] names `model` and the step (the request's label).
pub(crate) async fn generate_with_repair<F, Fut>(
    provider: &str,
    model: &str,
    repair_attempts: u32,
    request: &GenerateRequest,
    mut ask: F,
) -> Result<Generation>
where
    F: FnMut(Vec<Message>) -> Fut,
    Fut: Future<Output = Result<(String, TokenUsage)>>,
{
    request.check()?;
    let named = |message: String| Error::ModelOutput {
        provider: provider.to_string(),
        message: format!("model `{model}`, step `{}`: {message}", request.label),
    };
    let mut messages = request.messages.clone();
    let mut usage = TokenUsage::default();
    let mut repairs = 0u32;
    loop {
        let (text, more) = ask(messages.clone()).await.map_err(|e| match e {
            Error::ModelOutput { message, .. } => named(message),
            other => other,
        })?;
        usage += more;
        let problem = match parse_answer(&request.schema, &text) {
            Ok(value) => {
                return Ok(Generation {
                    value,
                    usage,
                    repaired: repairs > 0,
                });
            }
            Err(problem) => problem,
        };
        if repairs >= repair_attempts {
            let after = match repairs {
                0 => "no repair attempt allowed".to_string(),
                1 => "after one repair attempt".to_string(),
                n => format!("after {n} repair attempts"),
            };
            return Err(named(format!("{problem} ({after})")));
        }
        repairs += 1;
        tracing::warn!(provider, model, step = %request.label, schema = %request.schema.name, %problem, repairs, "unusable answer; asking for a repair");
        messages.push(Message::assistant(text));
        messages.push(Message::user(format!(
            "Your previous answer could not be used: {problem}.\n{}",
            schema_instruction(&request.schema)
        )));
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn schema() -> OutputSchema {
        OutputSchema::new(
            "answer",
            json!({"type": "object", "properties": {"n": {"type": "integer"}}, "required": ["n"]}),
        )
    }

    #[test]
    fn parses_plain_and_fenced_answers() {
        assert_eq!(
            parse_answer(&schema(), " {\"n\": 1} ").unwrap(),
            json!({"n": 1})
        );
        assert_eq!(
            parse_answer(&schema(), "```json\n{\"n\": 2}\n```").unwrap(),
            json!({"n": 2})
        );
        assert_eq!(
            parse_answer(&schema(), "```\n{\"n\": 3}```").unwrap(),
            json!({"n": 3})
        );
    }

    #[test]
    fn describes_what_is_wrong() {
        let e = parse_answer(&schema(), "{\"n\": \"x\"}").unwrap_err();
        assert_eq!(
            e,
            "the answer does not match the schema `answer`: /n: expected integer, got a string"
        );
        let e = parse_answer(&schema(), "{n: 1}").unwrap_err();
        assert!(
            e.starts_with("the answer is not valid JSON (key must be a string"),
            "{e}"
        );
        assert_eq!(
            parse_answer(&schema(), "  ").unwrap_err(),
            "the answer was empty"
        );
    }

    #[tokio::test]
    async fn repairs_once_then_fails() {
        let request = GenerateRequest::new(schema()).user("count");
        let mut seen = Vec::new();
        let answers = ["oops", "{\"n\": 4}"];
        let g = generate_with_repair("p", "m", 1, &request, |msgs| {
            seen.push(msgs.clone());
            let text = answers[seen.len() - 1].to_string();
            async move {
                Ok((
                    text,
                    TokenUsage {
                        prompt_tokens: 10,
                        completion_tokens: 1,
                    },
                ))
            }
        })
        .await
        .unwrap();
        assert_eq!(g.value, json!({"n": 4}));
        assert!(g.repaired);
        assert_eq!(
            g.usage,
            TokenUsage {
                prompt_tokens: 20,
                completion_tokens: 2
            }
        );
        assert_eq!(seen[1].len(), 3);
        assert_eq!(seen[1][1], Message::assistant("oops"));
        assert!(
            seen[1][2].content.contains("not valid JSON"),
            "{}",
            seen[1][2].content
        );

        let mut calls = 0;
        let err = generate_with_repair("p", "m", 1, &request, |_| {
            calls += 1;
            async { Ok(("[]".to_string(), TokenUsage::default())) }
        })
        .await
        .unwrap_err();
        assert_eq!(calls, 2);
        assert!(
            matches!(&err, Error::ModelOutput { message, .. }
                if message.starts_with("model `m`, step `unlabelled`: ")
                    && message.ends_with("(after one repair attempt)")),
            "{err}"
        );
    }

    #[tokio::test]
    async fn repairs_are_bounded_by_the_setting() {
        let request = GenerateRequest::new(schema())
            .user("count")
            .label("extract");
        for (allowed, wording) in [
            (0, "(no repair attempt allowed)"),
            (3, "(after 3 repair attempts)"),
        ] {
            let mut calls = 0;
            let err = generate_with_repair("p", "small", allowed, &request, |_| {
                calls += 1;
                async { Ok(("nope".to_string(), TokenUsage::default())) }
            })
            .await
            .unwrap_err();
            assert_eq!(calls, allowed + 1);
            let message = err.to_string();
            assert!(
                message.starts_with("p model output unusable: model `small`, step `extract`: the answer is not valid JSON"),
                "{message}"
            );
            assert!(message.ends_with(wording), "{message}");
        }
    }

    #[test]
    fn the_ceiling_lowers_the_sized_cap_but_never_to_zero() {
        let request = GenerateRequest::new(schema()).user("word ".repeat(4_000));
        let sized = request.output_cap();
        assert!(sized > 8_000, "{sized}");
        let bounds = |max| CallBounds {
            max_output_tokens: max,
            ..CallBounds::default()
        };
        assert_eq!(bounds(None).output_cap(&request), sized);
        assert_eq!(bounds(Some(300)).output_cap(&request), 300);
        assert_eq!(bounds(Some(0)).output_cap(&request), 1);
        let explicit = request.clone().max_output_tokens(100);
        assert_eq!(bounds(Some(300)).output_cap(&explicit), 100);
    }
}
