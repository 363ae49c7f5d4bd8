use std::sync::Mutex;

use super::*;
use crate::llm::doubles::ScriptedModel;
use crate::reflection::OutputType;

fn op(id: &str) -> OperatorId {
    OperatorId::new(id).unwrap()
}

fn two_steps() -> Reflection {
    Reflection::new("release-review", "global")
        .step(
            Step::new("review", "Review the supplied release evidence.")
                .output("assessment", OutputType::String)
                .output("approved", OutputType::Boolean),
        )
        .step(
            Step::new("summarise", "Summarise {{ assessment }} in one line.")
                .typed("summary", "{ line: string; risks: Array<string> }"),
        )
}

fn invocation() -> Invocation {
    Invocation::new("release-7", op("ada"))
        .context(json!({"reason": "release decision"}))
        .representation(Representation::new(
            "turn-1",
            "observations",
            Content::conversation("Ada: the canary was clean."),
            json!({"episode": "e1"}),
        ))
}

fn runner(model: &ScriptedModel) -> Runner {
    Runner::new(Arc::new(ModelInference::new(Arc::new(model.clone()))))
}

#[tokio::test]
async fn each_step_is_one_structured_call_showing_only_that_step() {
    let model = ScriptedModel::new()
        .answer(
            "step_review",
            json!({"assessment": "canary clean", "approved": true}),
        )
        .answer(
            "step_summarise",
            json!({"summary": {"line": "ship it", "risks": []}}),
        );
    let artefact = runner(&model)
        .run(&two_steps(), &invocation(), None)
        .await
        .unwrap();
    let calls = model.calls();
    assert_eq!(calls.len(), 2);
    let first = &calls[0].messages[1].content;
    for shown in [
        "release-review",
        "\"operator\": \"ada\"",
        "release-7",
        "release decision",
        "Ada: the canary was clean.",
        "observations",
        "Review the supplied release evidence.",
        "{ assessment: string; approved: boolean }",
    ] {
        assert!(
            first.contains(shown),
            "step 1 prompt lacks {shown}: {first}"
        );
    }
    assert!(!first.contains("Summarise"), "a later step leaked: {first}");
    assert!(
        !first.contains("summary"),
        "a later contract leaked: {first}"
    );
    let second = &calls[1].messages[1].content;
    assert!(
        second.contains("Summarise canary clean in one line."),
        "{second}"
    );
    assert!(
        !second.contains("Review the supplied"),
        "an earlier step leaked: {second}"
    );
    assert_eq!(
        calls[0].schema.schema,
        two_steps().steps()[0].output_schema()
    );
    // The final step's output, exactly, is the payload.
    assert_eq!(
        artefact.payload,
        json!({"summary": {"line": "ship it", "risks": []}})
    );
    assert_eq!(
        artefact.id,
        artefact_id("ada", "release-7", "release-review")
    );
}

#[derive(Debug, Default)]
struct Recorder {
    seen: Mutex<Vec<(ToolCall, ToolContext)>>,
}

#[async_trait]
impl ToolExecutor for Recorder {
    async fn execute(&self, call: &ToolCall, context: &ToolContext) -> Result<Value> {
        self.seen
            .lock()
            .unwrap()
            .push((call.clone(), context.clone()));
        if call.name == "broken" {
            return Err(Error::NotFound("the release notes".into()));
        }
        Ok(json!({"found": format!("notes for {}", call.arguments["q"])}))
    }
}

fn lookup_tools() -> Vec<ToolSpec> {
    vec![
        ToolSpec::new("lookup", "Finds release notes.", json!({"type": "object"})),
        ToolSpec::new("broken", "Always fails.", json!({"type": "object"})),
    ]
}

#[tokio::test]
async fn tool_calls_run_with_the_models_arguments_and_the_invocations_operator() {
    let one_step = Reflection::new("r", "global")
        .step(Step::new("review", "Review.").typed("approved", "boolean"));
    let model = ScriptedModel::new()
        .answer(
            "step_review",
            json!({"tool_calls": [
                {"name": "lookup", "arguments": "{\"q\": \"v2\"}"},
                {"name": "broken", "arguments": "{}"}
            ], "output": null}),
        )
        .answer(
            "step_review",
            json!({"tool_calls": [], "output": {"approved": false}}),
        );
    let executor = Arc::new(Recorder::default());
    let artefact = runner(&model)
        .tools(lookup_tools(), executor.clone())
        .tool_context(json!({"operator_id": "mallory", "tenant": "t1"}))
        .run(&one_step, &invocation(), None)
        .await
        .unwrap();
    assert_eq!(artefact.payload, json!({"approved": false}));
    let seen = executor.seen.lock().unwrap().clone();
    assert_eq!(seen.len(), 2);
    assert_eq!(seen[0].0, ToolCall::new("lookup", json!({"q": "v2"})));
    assert_eq!(seen[0].1.operator.as_str(), "ada");
    assert_eq!(
        seen[0].1.values,
        json!({"operator_id": "ada", "tenant": "t1"})
    );
    // Both results went back in the same step, the failure as an error result.
    let calls = model.calls();
    assert_eq!(calls.len(), 2);
    let followup: Vec<&str> = calls[1]
        .messages
        .iter()
        .map(|m| m.content.as_str())
        .collect();
    assert!(
        followup.iter().any(|m| m.contains("notes for \\\"v2\\\"")),
        "{followup:?}"
    );
    assert!(
        followup
            .iter()
            .any(|m| m.contains("not found: the release notes")),
        "{followup:?}"
    );
    assert!(calls[1].messages[1].content.contains("\"lookup\""));
}

#[tokio::test]
async fn the_tool_loop_is_bounded() {
    let one_step = Reflection::new("r", "global")
        .step(Step::new("review", "Review.").typed("approved", "boolean"));
    let model = ScriptedModel::new().answer(
        "step_review",
        json!({"tool_calls": [{"name": "lookup", "arguments": "{}"}], "output": null}),
    );
    let err = runner(&model)
        .tools(lookup_tools(), Arc::new(Recorder::default()))
        .max_tool_rounds(2)
        .run(&one_step, &invocation(), None)
        .await
        .unwrap_err();
    assert!(matches!(err, Error::ReflectionInference { .. }), "{err:?}");
    assert!(
        err.to_string()
            .contains("step `review`: still asking for tools after 2 rounds"),
        "{err}"
    );
    assert_eq!(model.calls().len(), 3);
}

/// An inference answering a fixed response, for shapes a schema-checked model
/// never returns.
#[derive(Debug)]
struct Fixed(InferenceResponse);

#[async_trait]
impl Inference for Fixed {
    async fn infer(&self, _prompt: &StepPrompt) -> Result<InferenceResponse> {
        Ok(self.0.clone())
    }
}

async fn answer(output: Value) -> Error {
    let reflection = Reflection::new("r", "global").step(
        Step::new("derive", "Derive.")
            .typed("lesson", "{ text: string; tags: Array<string> }")
            .output("success", OutputType::Boolean),
    );
    let fixed = Fixed(InferenceResponse::Output(
        output.as_object().unwrap().clone(),
    ));
    Runner::new(Arc::new(fixed))
        .run(&reflection, &invocation(), None)
        .await
        .unwrap_err()
}

#[tokio::test]
async fn every_answer_is_checked_exactly_naming_step_and_key() {
    let e = answer(json!({"lesson": {"text": "t", "tags": []}})).await;
    assert!(
        matches!(&e, Error::ReflectionOutput { step, key, problem, .. }
            if step == "derive" && key == "success" && problem == "is missing"),
        "{e:?}"
    );
    let e = answer(json!({"lesson": {"text": "t", "tags": [], "more": 1}, "success": true})).await;
    assert!(
        e.to_string()
            .contains("step `derive`: output `lesson.more` is not part of the output contract"),
        "{e}"
    );
    let e = answer(json!({"lesson": {"text": "t", "tags": [3]}, "success": true})).await;
    assert!(
        e.to_string()
            .contains("output `lesson.tags[0]` must be a string (got integer)"),
        "{e}"
    );
    let e = answer(json!({"lesson": {"text": "t", "tags": []}, "success": "yes", "x": 1})).await;
    assert!(
        e.to_string().contains("output `success` must be a boolean"),
        "{e}"
    );
    assert!(!e.is_retryable());
}

#[tokio::test]
async fn an_empty_tool_call_list_and_a_non_answer_are_errors() {
    let reflection =
        Reflection::new("r", "global").step(Step::new("s", "Do.").typed("x", "string"));
    let err = Runner::new(Arc::new(Fixed(InferenceResponse::ToolCalls(vec![]))))
        .run(&reflection, &invocation(), None)
        .await
        .unwrap_err();
    assert!(
        err.to_string().contains("an empty list of tool calls"),
        "{err}"
    );
    let model = ScriptedModel::new().answer("step_s", json!({"tool_calls": [], "output": null}));
    let err = runner(&model)
        .tools(lookup_tools(), Arc::new(Recorder::default()))
        .run(&reflection, &invocation(), None)
        .await
        .unwrap_err();
    assert!(
        err.to_string().contains("neither tool calls nor an output"),
        "{err}"
    );
}

#[tokio::test]
async fn provider_errors_pass_through_unchanged() {
    let model = ScriptedModel::new().respond_with(|_| {
        Err(Error::Provider {
            provider: "openai".into(),
            status: Some(503),
            message: "overloaded".into(),
            retry_after: None,
            source: None,
        })
    });
    let err = runner(&model)
        .run(&two_steps(), &invocation(), None)
        .await
        .unwrap_err();
    assert!(
        matches!(
            err,
            Error::Provider {
                status: Some(503),
                ..
            }
        ),
        "{err:?}"
    );
}

#[tokio::test]
async fn related_memory_is_shown_when_given() {
    let model = ScriptedModel::new().answer("step_s", json!({"x": "y"}));
    let reflection =
        Reflection::new("r", "global").step(Step::new("s", "Do.").typed("x", "string"));
    runner(&model)
        .run(
            &reflection,
            &invocation(),
            Some(json!({"observations": ["Ada likes tea"]})),
        )
        .await
        .unwrap();
    assert!(
        model.calls()[0].messages[1]
            .content
            .contains("Ada likes tea")
    );
}

#[test]
fn step_schema_names_are_sanitised() {
    assert_eq!(step_schema_name("inspect-world"), "step_inspect-world");
    assert_eq!(step_schema_name("a b/c"), "step_a_b_c");
    assert_eq!(step_schema_name(&"x".repeat(100)).len(), 64);
}
