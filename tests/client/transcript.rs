//! Turns and transcripts (test-trees/turns.md, test-trees/transcripts.md): pure
//! functions, no server.

use gralkor::Error;
use gralkor::agent::transcript::{
    MEMORY_BLOCK_CLOSE, MEMORY_BLOCK_OPEN, MemoryFilter, format_transcript, is_memory_block,
};
use gralkor::agent::turn::{Message, Role, Turn};
use serde_json::json;

// ---- turns ----

#[test]
fn a_completed_turn_is_the_query_the_trace_then_the_trimmed_answer() {
    let t = Turn::completed(
        "  Where is Ada?  ",
        ["thought: look it up", "tool lookup → Porto"],
        "\n In Porto. \n",
    );
    assert_eq!(
        t.messages(),
        [
            Message::user("  Where is Ada?  "),
            Message::behaviour("thought: look it up"),
            Message::behaviour("tool lookup → Porto"),
            Message::assistant("In Porto."),
        ]
    );
}

#[test]
fn a_blank_query_or_answer_gives_no_message_and_an_all_empty_turn_is_empty() {
    let t = Turn::completed(" \t", ["tool clock → 9"], "  ");
    assert_eq!(t.messages(), [Message::behaviour("tool clock → 9")]);
    assert!(Turn::completed("", Vec::<String>::new(), "").is_empty());
    assert!(Turn::new([Message::user("  "), Message::assistant("")]).is_empty());
}

#[test]
fn a_failed_turn_ends_with_request_failed_and_has_no_assistant_message() {
    let t = Turn::failed("book a table", ["tool booking → busy"], " HTTP 503 ");
    assert_eq!(
        t.messages(),
        [
            Message::user("book a table"),
            Message::behaviour("tool booking → busy"),
            Message::behaviour("request failed: HTTP 503"),
        ]
    );
    // Even with nothing else, the failure is captured.
    let t = Turn::failed("", Vec::<String>::new(), "boom");
    assert_eq!(t.messages(), [Message::behaviour("request failed: boom")]);
}

#[test]
fn chat_messages_become_thoughts_tool_lines_and_the_answer() {
    let t = Turn::from_chat(&[
        json!({"role": "system", "content": "You are Susu."}),
        json!({"role": "user", "content": [{"type": "text", "text": "What time"},
                                           {"type": "text", "text": "is it?"}]}),
        json!({"role": "assistant", "content": "Checking the clock.", "tool_calls": [
            {"id": "a", "type": "function", "function": {"name": "clock", "arguments": "{}"}},
            {"id": "b", "type": "function", "function": {"name": "tz", "arguments": "{}"}}]}),
        json!({"role": "tool", "tool_call_id": "a", "content": "09:00"}),
        json!({"role": "tool", "tool_call_id": "b", "content": ""}),
        json!({"role": "assistant", "content": null, "tool_calls": [
            {"id": "c", "type": "function", "function": {"name": "memory_search", "arguments": "{}"}}]}),
        json!({"role": "tool", "tool_call_id": "c", "content": "- Ada is in Lisbon"}),
        json!({"role": "tool", "name": "legacy", "content": "ok"}),
        json!({"role": "assistant", "content": "  It is nine.  "}),
    ])
    .unwrap();
    assert_eq!(
        t.messages(),
        [
            Message::user("What time is it?"),
            Message::behaviour("thought: Checking the clock."),
            Message::behaviour("tool clock → 09:00"),
            Message::behaviour("tool tz"),
            Message::behaviour("tool memory_search → - Ada is in Lisbon"),
            Message::behaviour("tool legacy → ok"),
            Message::assistant("It is nine."),
        ]
    );
}

#[test]
fn a_failed_chat_turn_keeps_the_trace_and_drops_any_answer() {
    let t = Turn::from_chat_failed(
        &[
            json!({"role": "user", "content": "Summarise my week"}),
            json!({"role": "assistant", "content": "partial", "tool_calls": [
                {"id": "x", "function": {"name": "calendar"}}]}),
            json!({"role": "tool", "tool_call_id": "x", "content": "3 meetings"}),
            json!({"role": "assistant", "content": "half an answer"}),
        ],
        "model timed out",
    )
    .unwrap();
    assert!(t.messages().iter().all(|m| m.role != Role::Assistant));
    assert_eq!(
        t.messages().last(),
        Some(&Message::behaviour("request failed: model timed out"))
    );
    assert_eq!(t.messages()[0], Message::user("Summarise my week"));
}

#[test]
fn a_chat_message_without_a_known_role_is_an_error_naming_it() {
    for (m, rule) in [
        (json!({"content": "x"}), "must be a string"),
        (json!({"role": "narrator", "content": "x"}), "narrator"),
    ] {
        match Turn::from_chat(&[json!({"role": "user", "content": "hi"}), m]) {
            Err(Error::InvalidInput { field, rule: r }) => {
                assert_eq!(field, "messages[1].role");
                assert!(r.contains(rule), "{r}");
            }
            other => panic!("{other:?}"),
        }
    }
}

#[test]
fn a_turn_round_trips_through_json() {
    let t = Turn::failed("q", ["thought: t"], "e");
    let back: Turn = serde_json::from_str(&serde_json::to_string(&t).unwrap()).unwrap();
    assert_eq!(back, t);
    assert_eq!(
        serde_json::to_value(&t.messages()[1]).unwrap(),
        json!({"role": "behaviour", "content": "thought: t"})
    );
}

// ---- transcripts ----

#[test]
fn user_and_assistant_lines_are_named_and_behaviour_is_dropped() {
    let turns = [
        Turn::completed(
            "I keep bees.",
            ["thought: remember", "tool note → ok"],
            "Lovely!",
        ),
        Turn::default(),
        Turn::new([Message::behaviour("tool only")]),
        Turn::failed("How many hives?", Vec::<String>::new(), "timeout"),
    ];
    assert_eq!(
        format_transcript(&turns, "Susu", "Ada").unwrap(),
        "Ada: I keep bees.\nSusu: Lovely!\nAda: How many hives?"
    );
    assert_eq!(format_transcript(&[], "Susu", "Ada").unwrap(), "");
}

#[test]
fn a_blank_agent_or_human_name_is_an_error_naming_the_field() {
    let turns = [Turn::completed("hi", Vec::<String>::new(), "hello")];
    for (agent, human, field) in [(" ", "Ada", "agent_name"), ("Susu", "", "human_name")] {
        match format_transcript(&turns, agent, human) {
            Err(Error::InvalidInput { field: f, rule }) => {
                assert_eq!(f, field);
                assert!(rule.contains("no generic fallback"), "{rule}");
            }
            other => panic!("{other:?}"),
        }
    }
}

#[test]
fn injected_memory_blocks_are_recognised_by_the_shared_markers() {
    assert_eq!(MEMORY_BLOCK_OPEN, "<gralkor-memory");
    assert_eq!(MEMORY_BLOCK_CLOSE, "</gralkor-memory>");
    let block = "<gralkor-memory trust=\"untrusted\">\n- Ada likes tea\n\n\
                 Search memory (up to 3 times, diverse queries) if you need more detail.\n\
                 </gralkor-memory>";
    assert!(is_memory_block(block));
    assert!(is_memory_block(&format!("\n{block}\n")));
    assert!(is_memory_block("<gralkor-memory>x</gralkor-memory>"));
    assert!(!is_memory_block(&format!("{block}\nAnd my question")));
    assert!(!is_memory_block("<gralkor-memoryish>x</gralkor-memory>"));
    assert!(!is_memory_block("plain text"));
}

#[test]
fn scrubbing_drops_memory_blocks_anywhere_and_memory_search_results() {
    let f = MemoryFilter::new().block("<relevant-memories>", "</relevant-memories>");
    let t = Turn::new([
        Message::user(
            "before <gralkor-memory trust=\"untrusted\">recalled A</gralkor-memory> middle \
             <relevant-memories>recalled B</relevant-memories> after",
        ),
        Message::user("<gralkor-memory>only recalled</gralkor-memory>"),
        Message::behaviour("tool memory_search → recalled C"),
        Message::behaviour("tool memory_search"),
        Message::behaviour("tool memory_searcher → kept"),
        Message::assistant("answer <gralkor-memory>unclosed recalled D"),
    ]);
    assert_eq!(
        f.scrub(&t).messages(),
        [
            Message::user("before  middle  after"),
            Message::behaviour("tool memory_search"),
            Message::behaviour("tool memory_search"),
            Message::behaviour("tool memory_searcher → kept"),
            Message::assistant("answer"),
        ]
    );
    // The default filter knows the recall blocks gralkor renders (both names), and
    // no other.
    assert_eq!(
        MemoryFilter::new()
            .strip("<relevant-memories trust=\"untrusted\">x</relevant-memories> hi"),
        "hi"
    );
    assert_eq!(
        MemoryFilter::new().strip("<my-memories>x</my-memories> hi"),
        "<my-memories>x</my-memories> hi"
    );
    // Text without blocks is untouched, whitespace included.
    assert_eq!(MemoryFilter::new().strip("  as is  "), "  as is  ");
}
