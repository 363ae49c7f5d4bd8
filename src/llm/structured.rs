//! Parsing, validating and repairing structured answers (shared by every provider).

use std::future::Future;

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

/// Runs `ask` with the request's messages; if the answer is not valid JSON or not
/// valid against the schema, asks once more with the bad answer and what was wrong,
/// then gives up with [`Error::ModelOutput`].
pub(crate) async fn generate_with_repair<F, Fut>(
    provider: &str,
    request: &GenerateRequest,
    mut ask: F,
) -> Result<Generation>
where
    F: FnMut(Vec<Message>) -> Fut,
    Fut: Future<Output = Result<(String, TokenUsage)>>,
{
    request.check()?;
    let mut messages = request.messages.clone();
    let (text, mut usage) = ask(messages.clone()).await?;
    let problem = match parse_answer(&request.schema, &text) {
        Ok(value) => {
            return Ok(Generation {
                value,
                usage,
                repaired: false,
            });
        }
        Err(problem) => problem,
    };
    tracing::warn!(provider, schema = %request.schema.name, %problem, "unusable answer; asking once for a repair");
    messages.push(Message::assistant(text));
    messages.push(Message::user(format!(
        "Your previous answer could not be used: {problem}.\n{}",
        schema_instruction(&request.schema)
    )));
    let (text, more) = ask(messages).await?;
    usage += more;
    match parse_answer(&request.schema, &text) {
        Ok(value) => Ok(Generation {
            value,
            usage,
            repaired: true,
        }),
        Err(problem) => Err(Error::ModelOutput {
            provider: provider.to_string(),
            message: format!("{problem} (after one repair attempt)"),
        }),
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
        let g = generate_with_repair("p", &request, |msgs| {
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
        let err = generate_with_repair("p", &request, |_| {
            calls += 1;
            async { Ok(("[]".to_string(), TokenUsage::default())) }
        })
        .await
        .unwrap_err();
        assert_eq!(calls, 2);
        assert!(
            matches!(&err, Error::ModelOutput { message, .. } if message.contains("after one repair attempt")),
            "{err}"
        );
    }
}
