//! The rig adapter (`gralkor::agent::rig`, feature `rig`) against rig's real types:
//! the tools' definitions as rig's registry reads them, tool calls through rig's
//! dispatch on real clients, message conversion, and a real rig agent (rig's OpenAI
//! chat-completions client and its agent runtime) against a fake provider on
//! loopback, with gralkor's hook recalling before the run and capturing after it.
//! Each client-backed behaviour runs on both clients: the twin, and the native client
//! over a real embedded FalkorDB (offline engine). Mirrors `test-trees/rig.md`.

#[path = "common/mod.rs"]
mod common;

use std::sync::Arc;
use std::time::Duration;

use common::agent_memory::{Kind, memory, op};
use common::chat_provider::{answer, bodies, provider, tool_call};
use gralkor::agent::capture::{CaptureBuffer, CaptureRoute};
use gralkor::agent::hooks::{AgentRecall, AutoCapture, AutoRecall};
use gralkor::agent::rig::{
    BuildCommunitiesTool, BuildIndicesTool, MemoryAddTool, MemoryHook, MemorySearchTool,
    chat_messages, turn_from_rig, turn_from_rig_failed,
};
use gralkor::agent::tools::{self, ToolContext, call_tool};
use gralkor::agent::turn::{Message, Turn};
use gralkor::client::{
    Client, Content, EpisodeRecord, InMemoryClient, MemoryAdd, OperatorId, Search,
};
use rig_agent::AgentBuilder;
use rig_agent::tool::ToolSet;
use rig_core::message::{
    AssistantContent, AssistantMessage, Message as RigMessage, Text, ToolCall, ToolFunction,
    ToolName, ToolResultContent, UserContent,
};
use rig_core::providers::openai::OpenAIConfig;
use rig_core::tool::{Tool, ToolContext as RigToolContext};
use serde_json::{Value, json};
use wiremock::MockServer;

const WAIT: Duration = Duration::from_secs(30);

async fn remember(client: &dyn Client, op: &OperatorId, text: &str) {
    client
        .memory_add(&MemoryAdd::new(op, Content::conversation(text)))
        .await
        .unwrap();
    client.await_background_writes().await;
}

macro_rules! both {
    ($($name:ident),* $(,)?) => {$(
        mod $name {
            #[tokio::test]
            async fn in_memory() {
                super::$name(super::Kind::Twin).await
            }
            #[tokio::test]
            async fn native() {
                super::$name(super::Kind::Native).await
            }
        }
    )*};
}

both!(
    tool_calls_through_rig_dispatch_run_gralkor_s_handlers,
    a_rig_agent_searches_adds_answers_and_is_captured,
    a_failed_rig_run_is_captured_as_a_failed_turn,
    without_a_session_id_the_hook_recalls_but_captures_nothing,
);

// rig › tools › the definitions rig registers are gralkor's, not a copy

#[test]
fn the_definitions_rig_registers_are_gralkor_s() {
    let client: Arc<dyn Client> = Arc::new(InMemoryClient::new());
    let ctx = ToolContext::new(op());
    let mut set = ToolSet::default();
    set.add_tool(MemorySearchTool::new(client.clone(), ctx.clone()));
    set.add_tool(MemoryAddTool::new(client.clone(), ctx.clone()));
    set.add_tool(BuildIndicesTool::new(client.clone(), ctx.clone()));
    set.add_tool(BuildCommunitiesTool::new(client, ctx));
    let registered: Vec<(String, String, Value)> = set
        .tool_definitions()
        .into_iter()
        .map(|d| (d.name.as_str().to_string(), d.description, d.parameters))
        .collect();
    let gralkor: Vec<(String, String, Value)> = tools::memory_tools()
        .into_iter()
        .chain(tools::admin_tools())
        .map(|d| (d.name, d.description, d.parameters))
        .collect();
    assert_eq!(registered, gralkor);
    assert_eq!(MemorySearchTool::NAME, tools::MEMORY_SEARCH);
    assert_eq!(MemoryAddTool::definition(), tools::memory_add_tool());
    assert!(
        BuildIndicesTool::definition()
            .description
            .contains("DO NOT CALL")
    );
}

// rig › tools › a call through rig's dispatch runs gralkor's handler; a contract error
// reaches the model naming the field

async fn tool_calls_through_rig_dispatch_run_gralkor_s_handlers(kind: Kind) {
    let (client, _buffer) = memory(kind, "agent-rig").await;
    let op = op();
    remember(client.as_ref(), &op, "Ada prefers green tea in the morning").await;
    let ctx = ToolContext::new(op.clone());
    let mut set = ToolSet::default();
    set.add_tool(MemorySearchTool::new(client.clone(), ctx.clone()));
    set.add_tool(MemoryAddTool::new(client.clone(), ctx.clone()));

    let args = json!({"query": "green tea"});
    let expected = call_tool(client.as_ref(), &ctx, "memory_search", &args)
        .await
        .unwrap();
    assert!(expected.contains("Ada prefers green tea"), "{expected}");
    let result = set
        .execute(
            "memory_search",
            args.to_string(),
            &mut RigToolContext::default(),
        )
        .await;
    assert!(result.is_success(), "{:?}", result.error());
    assert_eq!(result.output().as_text(), Some(expected.as_str()));

    // The typed trait, called directly.
    let tool = MemorySearchTool::new(client.clone(), ctx.clone());
    let direct = tool
        .call(&mut RigToolContext::default(), args.clone())
        .await
        .unwrap();
    assert_eq!(direct, expected);

    // memory_add acknowledges, then writes in the background.
    let added = set
        .execute(
            "memory_add",
            json!({"content": "Ada keeps two beehives."}).to_string(),
            &mut RigToolContext::default(),
        )
        .await;
    assert_eq!(added.output().as_text(), Some(tools::INGESTING));
    client.await_background_writes().await;
    let found = call_tool(
        client.as_ref(),
        &ctx,
        "memory_search",
        &json!({"query": "beehives"}),
    )
    .await
    .unwrap();
    assert!(found.contains("Ada keeps two beehives."), "{found}");

    // Arguments the handler refuses: the model is told which field and why.
    let refused = set
        .execute(
            "memory_search",
            json!({"query": "tea", "limit": 3}).to_string(),
            &mut RigToolContext::default(),
        )
        .await;
    assert!(refused.is_error());
    let feedback = refused.output().render();
    assert!(feedback.contains("memory_search.arguments"), "{feedback}");
    client.shutdown().await.unwrap();
}

// rig › messages › rig's messages become the turn from_chat makes of the same exchange

#[test]
fn rig_messages_become_the_turn_from_chat_makes() {
    let call = ToolCall::from_wire(
        "c1",
        ToolFunction::new(ToolName::new("lookup").unwrap(), json!({"who": "Ada"})),
    );
    let result = call.result(vec![ToolResultContent::Text(Text::new("Acme"))]);
    let messages = [
        RigMessage::system("You are Susu."),
        RigMessage::User {
            content: vec![
                UserContent::Text(Text::new("Where does")),
                UserContent::Text(Text::new("Ada work?")),
            ],
        },
        RigMessage::Assistant(AssistantMessage::new(vec![
            AssistantContent::Text(Text::new("Let me check.")),
            AssistantContent::ToolCall(call.clone()),
        ])),
        RigMessage::User {
            content: vec![UserContent::ToolResult(result)],
        },
        RigMessage::assistant(" At Acme. "),
    ];
    let turn = turn_from_rig(&messages).unwrap();
    assert_eq!(
        turn.messages(),
        [
            Message::user("Where does Ada work?"),
            Message::behaviour("thought: Let me check."),
            Message::behaviour("tool lookup → Acme"),
            Message::assistant("At Acme."),
        ]
    );
    // The same exchange written as OpenAI chat messages gives the same turn.
    let chat = Turn::from_chat(&[
        json!({"role": "system", "content": "You are Susu."}),
        json!({"role": "user", "content": [{"type": "text", "text": "Where does"},
                                          {"type": "text", "text": "Ada work?"}]}),
        json!({"role": "assistant", "content": "Let me check.", "tool_calls": [
            {"id": "c1", "type": "function",
             "function": {"name": "lookup", "arguments": "{\"who\":\"Ada\"}"}}]}),
        json!({"role": "tool", "tool_call_id": "c1", "content": "Acme"}),
        json!({"role": "assistant", "content": " At Acme. "}),
    ])
    .unwrap();
    assert_eq!(turn, chat);
    let converted = chat_messages(&messages);
    assert_eq!(
        converted[2]["tool_calls"][0]["function"]["arguments"],
        "{\"who\":\"Ada\"}"
    );
    assert_eq!(converted[3]["tool_call_id"], "c1");

    // A JSON tool result, an empty one, and a failed run.
    let json_result = call.result(vec![ToolResultContent::Json {
        value: json!({"employer": "Acme"}),
    }]);
    let empty_result = call.result(vec![]);
    let failed = turn_from_rig_failed(
        &[
            RigMessage::user("Where does Ada work?"),
            RigMessage::Assistant(AssistantMessage::new(vec![AssistantContent::ToolCall(
                call.clone(),
            )])),
            RigMessage::User {
                content: vec![
                    UserContent::ToolResult(json_result),
                    UserContent::ToolResult(empty_result),
                ],
            },
        ],
        "HTTP 503",
    )
    .unwrap();
    assert_eq!(
        failed.messages(),
        [
            Message::user("Where does Ada work?"),
            Message::behaviour("tool lookup → {\"employer\":\"Acme\"}"),
            Message::behaviour("tool lookup"),
            Message::behaviour("request failed: HTTP 503"),
        ]
    );
    assert!(
        turn_from_rig(&[RigMessage::system("only a system prompt")])
            .unwrap()
            .is_empty()
    );
}

/// A rig agent with gralkor's two memory tools, on rig's OpenAI chat-completions
/// client pointed at `server`.
fn rig_agent(server: &MockServer, client: &Arc<dyn Client>, op: &OperatorId) -> rig_agent::Agent {
    let model = OpenAIConfig::new("sk-test")
        .with_base_url(format!("{}/v1", server.uri()))
        .client()
        .chat("fake-model");
    let ctx = ToolContext::new(op.clone());
    AgentBuilder::new(model)
        .preamble("You are Susu, with long-term memory.")
        .default_max_turns(6)
        .tool(MemorySearchTool::new(client.clone(), ctx.clone()))
        .tool(MemoryAddTool::new(client.clone(), ctx))
        .build()
}

fn hook(
    client: &Arc<dyn Client>,
    buffer: &CaptureBuffer,
    op: &OperatorId,
    session: &str,
) -> MemoryHook {
    MemoryHook::new()
        .recall(AgentRecall::new(client.clone(), op.clone(), "Susu", AutoRecall::new()).unwrap())
        .capture(
            buffer.clone(),
            op.clone(),
            "Susu",
            "Ada",
            CaptureRoute::default(),
            AutoCapture::new(),
        )
        .unwrap()
        .force_memory_search_on_first_turn()
        .session(session)
}

/// The text of a chat message's content (a string or text parts).
fn text(content: &Value) -> String {
    match content {
        Value::String(s) => s.clone(),
        Value::Array(parts) => parts
            .iter()
            .filter_map(|p| p["text"].as_str())
            .collect::<Vec<_>>()
            .join(" "),
        _ => String::new(),
    }
}

/// The last message of a request body.
fn last(body: &Value) -> Value {
    body["messages"].as_array().unwrap().last().unwrap().clone()
}

async fn captured(client: &dyn Client, op: &OperatorId, word: &str) -> Vec<EpisodeRecord> {
    client
        .search(&Search::new(op, word).destinations(["personal"]))
        .await
        .unwrap()
        .into_iter()
        .filter_map(|r| r.hit.as_episode().cloned())
        .filter(|e| e.content.contains(word) && e.source_description.starts_with("captured"))
        .collect()
}

// rig › agent › a real rig agent searches, adds and answers; the provider sees the
// tools, the pinned first call and the injected block; the hook captures the run
// without the block or the search results; the next session recalls what was added

async fn a_rig_agent_searches_adds_answers_and_is_captured(kind: Kind) {
    let (client, buffer) = memory(kind, "agent-rig").await;
    let op = op();
    remember(client.as_ref(), &op, "Ada lives in Lisbon near the river.").await;
    let server = provider(vec![
        tool_call("call_1", "memory_search", json!({"query": "Lisbon"})),
        tool_call(
            "call_2",
            "memory_add",
            json!({"content": "Ada keeps two beehives on the roof."}),
        ),
        answer("Yes, Lisbon. I will remember the beehives."),
        answer("Two beehives, on your roof."),
    ])
    .await;
    let agent = rig_agent(&server, &client, &op);

    let prompt = "Do I still live in Lisbon? And remember the beehives on my roof.";
    let response = agent
        .prompt(prompt)
        .add_hook(hook(&client, &buffer, &op, "session-1"))
        .await
        .unwrap();
    let final_text: String = turn_from_rig(&response.messages)
        .unwrap()
        .messages()
        .last()
        .unwrap()
        .content
        .clone();
    assert_eq!(final_text, "Yes, Lisbon. I will remember the beehives.");

    let sent = bodies(&server).await;
    assert_eq!(sent.len(), 3);
    for (i, body) in sent.iter().enumerate() {
        let advertised: Vec<(Value, Value, Value)> = body["tools"]
            .as_array()
            .unwrap()
            .iter()
            .map(|t| {
                (
                    t["function"]["name"].clone(),
                    t["function"]["description"].clone(),
                    t["function"]["parameters"].clone(),
                )
            })
            .collect();
        let expected: Vec<(Value, Value, Value)> = tools::memory_tools()
            .into_iter()
            .map(|d| (json!(d.name), json!(d.description), d.parameters))
            .collect();
        assert_eq!(advertised, expected, "request {i}");
        if i == 0 {
            assert_eq!(
                body["tool_choice"],
                json!({"type": "function", "function": {"name": "memory_search"}})
            );
        } else {
            assert_ne!(
                body["tool_choice"]["function"]["name"], "memory_search",
                "request {i}: {body}"
            );
        }
    }
    let user = text(
        &sent[0]["messages"]
            .as_array()
            .unwrap()
            .iter()
            .find(|m| m["role"] == "user")
            .unwrap()["content"],
    );
    assert!(
        user.starts_with("<gralkor-memory trust=\"untrusted\">"),
        "{user}"
    );
    assert!(
        user.contains("Ada lives in Lisbon near the river."),
        "{user}"
    );
    assert!(user.ends_with(prompt), "{user}");
    let search = last(&sent[1]);
    assert_eq!(
        (search["role"].clone(), search["tool_call_id"].clone()),
        (json!("tool"), json!("call_1"))
    );
    assert!(
        text(&search["content"]).contains("Ada lives in Lisbon near the river."),
        "{search}"
    );
    assert_eq!(text(&last(&sent[2])["content"]), tools::INGESTING);

    // The hook captured the run: the prompt without the block, the search without
    // its result, the add, the answer.
    let pending = buffer.pending("session-1").await;
    assert_eq!(pending.len(), 1);
    let messages: Vec<Message> = pending[0]
        .messages()
        .iter()
        .map(|m| Message::new(m.role, m.content.trim()))
        .collect();
    assert_eq!(
        messages,
        [
            Message::user(prompt),
            Message::behaviour("tool memory_search"),
            Message::behaviour("tool memory_add → Ingesting."),
            Message::assistant("Yes, Lisbon. I will remember the beehives."),
        ]
    );
    buffer.flush_and_await("session-1", WAIT).await.unwrap();
    client.await_background_writes().await;
    let episodes = captured(client.as_ref(), &op, "still live").await;
    assert_eq!(episodes.len(), 1, "{episodes:?}");
    assert_eq!(
        episodes[0].content,
        format!("Ada: {prompt}\nSusu: Yes, Lisbon. I will remember the beehives.")
    );

    // Session 2, without the pin: recall brings back what memory_add stored.
    let prompt_2 = "What did I say about beehives on my roof?";
    let hook_2 = MemoryHook::new()
        .recall(AgentRecall::new(client.clone(), op.clone(), "Susu", AutoRecall::new()).unwrap())
        .session("session-2");
    agent.prompt(prompt_2).add_hook(hook_2).await.unwrap();
    let sent = bodies(&server).await;
    assert_eq!(sent.len(), 4);
    assert!(
        sent[3]
            .get("tool_choice")
            .is_none_or(|c| c["function"]["name"] != "memory_search")
    );
    let user_2 = text(
        &sent[3]["messages"]
            .as_array()
            .unwrap()
            .iter()
            .find(|m| m["role"] == "user")
            .unwrap()["content"],
    );
    assert!(
        user_2.contains("Ada keeps two beehives on the roof."),
        "{user_2}"
    );
    assert!(
        buffer.pending("session-2").await.is_empty(),
        "no capture configured"
    );

    buffer.shutdown(WAIT).await.unwrap();
    client.shutdown().await.unwrap();
}

// rig › agent › a failed rig run is captured as a failed turn

async fn a_failed_rig_run_is_captured_as_a_failed_turn(kind: Kind) {
    let (client, buffer) = memory(kind, "agent-rig").await;
    let op = op();
    let server = provider(vec![
        tool_call("call_1", "memory_search", json!({"query": "tea"})),
        Value::Null,
    ])
    .await;
    let agent = rig_agent(&server, &client, &op);
    let err = agent
        .prompt("Which tea do I like best?")
        .add_hook(hook(&client, &buffer, &op, "s-fail"))
        .await;
    assert!(err.is_err());
    let pending = buffer.pending("s-fail").await;
    assert_eq!(pending.len(), 1, "the failed run is captured");
    let messages = pending[0].messages();
    assert_eq!(messages[0].content.trim(), "Which tea do I like best?");
    let last = &messages.last().unwrap().content;
    assert!(
        last.starts_with("request failed: ") && last.contains("500"),
        "{messages:?}"
    );
    assert!(
        messages
            .iter()
            .all(|m| m.role != gralkor::agent::turn::Role::Assistant)
    );
    buffer.shutdown(WAIT).await.unwrap();
    client.shutdown().await.unwrap();
}

// rig › agent › without a session id the hook still recalls but captures nothing

async fn without_a_session_id_the_hook_recalls_but_captures_nothing(kind: Kind) {
    let (client, buffer) = memory(kind, "agent-rig").await;
    let op = op();
    remember(client.as_ref(), &op, "Ada prefers green tea in the morning").await;
    let server = provider(vec![answer("Green tea, in the morning.")]).await;
    let agent = rig_agent(&server, &client, &op);
    let no_session = MemoryHook::new()
        .recall(AgentRecall::new(client.clone(), op.clone(), "Susu", AutoRecall::new()).unwrap())
        .capture(
            buffer.clone(),
            op.clone(),
            "Susu",
            "Ada",
            CaptureRoute::default(),
            AutoCapture::new(),
        )
        .unwrap();
    agent
        .prompt("Which green tea do I like?")
        .add_hook(no_session)
        .await
        .unwrap();
    let sent = bodies(&server).await;
    assert_eq!(sent.len(), 1);
    assert!(
        sent[0].get("tool_choice").is_none(),
        "not pinned unless asked"
    );
    let user = text(
        &sent[0]["messages"]
            .as_array()
            .unwrap()
            .iter()
            .find(|m| m["role"] == "user")
            .unwrap()["content"],
    );
    assert!(
        user.contains("Ada prefers green tea in the morning"),
        "{user}"
    );
    buffer.flush_all().await.unwrap();
    assert!(
        captured(client.as_ref(), &op, "Which green tea")
            .await
            .is_empty(),
        "nothing captured without a session id"
    );
    buffer.shutdown(WAIT).await.unwrap();
    client.shutdown().await.unwrap();
}
