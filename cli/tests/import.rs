//! `gralkor import` end to end on a fixture workspace (test-trees/cli.md, import).

mod common;

use std::path::Path;

use common::Home;
use serde_json::{Value, json};

/// USER.md, MEMORY.md, memory/{2026-11-30,notes}.md, an empty memory/blank.md, and two
/// sessions: one in chat-message lines with a recalled memory block and a tool call,
/// one in wrapped `{"type": "message", "message": …}` lines with a header.
fn workspace(root: &Path) {
    std::fs::create_dir_all(root.join("memory")).unwrap();
    std::fs::create_dir_all(root.join("sessions")).unwrap();
    std::fs::write(
        root.join("USER.md"),
        "# User\nSam keeps a vegetable garden.\n",
    )
    .unwrap();
    std::fs::write(
        root.join("MEMORY.md"),
        "# Memory\nSam's sister is called Ada.\n",
    )
    .unwrap();
    std::fs::write(
        root.join("memory/2026-11-30.md"),
        "Sam planted garlic on the thirtieth.\n",
    )
    .unwrap();
    std::fs::write(root.join("memory/notes.md"), "Sam dislikes coriander.\n").unwrap();
    std::fs::write(root.join("memory/blank.md"), "\n  \n").unwrap();
    std::fs::write(root.join("memory/ignored.txt"), "not markdown").unwrap();
    let s1 = [
        json!({"role": "system", "content": "You are Susu."}),
        json!({"role": "user", "content": "<gralkor-memory trust=\"untrusted\">\n- Sam likes tea\n</gralkor-memory>\nWhat should I plant next?"}),
        json!({"role": "assistant", "content": "Let me check.", "tool_calls": [
            {"id": "c1", "type": "function", "function": {"name": "memory_search", "arguments": "{}"}}]}),
        json!({"role": "tool", "tool_call_id": "c1", "content": "- Sam likes tea"}),
        json!({"role": "assistant", "content": "Broad beans do well in winter."}),
        json!({"role": "user", "content": "Thanks, I will plant broad beans."}),
        json!({"role": "assistant", "content": "Good luck!"}),
    ];
    let s1: Vec<String> = s1.iter().map(Value::to_string).collect();
    std::fs::write(root.join("sessions/s-1.jsonl"), s1.join("\n") + "\n").unwrap();
    let s2 = [
        json!({"type": "session", "id": "s-2", "timestamp": "2026-11-29T10:00:00Z"}),
        json!({"type": "message", "timestamp": "2026-11-29T10:00:01Z",
               "message": {"role": "user", "content": [{"type": "text", "text": "My bike was stolen."}]}}),
        json!({"type": "message", "message": {"role": "assistant", "content": [{"type": "text", "text": "I am sorry to hear that."}]}}),
    ];
    let s2: Vec<String> = s2.iter().map(Value::to_string).collect();
    std::fs::write(root.join("sessions/s-2.jsonl"), s2.join("\n")).unwrap();
}

fn import(home: &Home, ws: &Path, extra: &[&str]) -> Value {
    let sessions = ws.join("sessions");
    let mut args = vec![
        "--json",
        "import",
        "--workspace",
        ws.to_str().unwrap(),
        "--sessions",
        sessions.to_str().unwrap(),
        "--agent-name",
        "Susu",
        "--human-name",
        "Sam",
    ];
    args.extend_from_slice(extra);
    home.run(&args).json()
}

fn sources(report: &Value, status: &str) -> Vec<String> {
    report["items"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|i| i["status"] == status)
        .map(|i| i["source"].as_str().unwrap().to_string())
        .collect()
}

fn episode_count(home: &Home) -> usize {
    home.run(&["--json", "episodes", "--last", "100"])
        .json()
        .as_array()
        .unwrap()
        .len()
}

const ALL: [&str; 6] = [
    "USER.md",
    "MEMORY.md",
    "memory/2026-11-30.md",
    "memory/notes.md",
    "sessions/s-1",
    "sessions/s-2",
];

// import / a fixture workspace imported twice is written once
#[test]
fn importing_a_workspace_twice_writes_it_once() {
    let home = Home::new();
    let ws = home.path().join("ws");
    workspace(&ws);
    let first = import(&home, &ws, &[]);
    assert_eq!(sources(&first, "written"), ALL);
    assert_eq!(first["written"], 6);
    assert_eq!(
        first["skipped"],
        json!([{"source": "memory/blank.md", "reason": "empty"},
               {"source": "sessions/s-2", "reason": "1 line not a chat message (line 1: session)"}])
    );
    assert_eq!(episode_count(&home), 6);

    let second = import(&home, &ws, &[]);
    assert_eq!(second["written"], 0);
    assert_eq!(sources(&second, "unchanged"), ALL);
    assert_eq!(episode_count(&home), 6);
    // The same episodes, by the same replay-stable ids.
    let ids = |r: &Value| -> Vec<Value> {
        r["items"]
            .as_array()
            .unwrap()
            .iter()
            .map(|i| i["episode"].clone())
            .collect()
    };
    assert_eq!(ids(&first), ids(&second));

    // A changed file is written anew; the rest stay unchanged.
    std::fs::write(ws.join("memory/notes.md"), "Sam now likes coriander.\n").unwrap();
    let third = import(&home, &ws, &[]);
    assert_eq!(sources(&third, "written"), ["memory/notes.md"]);
    assert_eq!(third["unchanged"], 5);
    assert_eq!(episode_count(&home), 7);
}

// import / sessions become one conversation episode each, without recalled memory
#[test]
fn a_session_becomes_one_conversation_episode_without_recalled_memory() {
    let home = Home::new();
    let ws = home.path().join("ws");
    workspace(&ws);
    let report = import(&home, &ws, &["--no-files"]);
    assert_eq!(
        sources(&report, "written"),
        ["sessions/s-1", "sessions/s-2"]
    );
    let s1 = report["items"][0]["episode"].as_str().unwrap().to_string();
    let got = home.run(&["--json", "get", &s1]).json();
    assert_eq!(
        got["episode"]["content"],
        "Sam: What should I plant next?\nSusu: Let me check.\nSusu: Broad beans do well in winter.\n\
         Sam: Thanks, I will plant broad beans.\nSusu: Good luck!"
    );
    assert_eq!(got["episode"]["source_kind"], "message");
    assert_eq!(got["episode"]["source_description"], "import: sessions/s-1");
    let s2 = report["items"][1]["episode"].as_str().unwrap().to_string();
    let got = home.run(&["--json", "get", &s2]).json();
    assert_eq!(
        got["episode"]["content"],
        "Sam: My bike was stolen.\nSusu: I am sorry to hear that."
    );
    // The session's first timestamp is when it happened.
    assert_eq!(got["episode"]["valid_at"], "2026-11-29T10:00:00.000000Z");
    // Markdown files are searchable documents.
    let found = home.run(&["--json", "search", "garlic"]);
    assert_eq!(
        found.json().as_array().unwrap().len(),
        0,
        "--no-files wrote no file"
    );
    // The file name is the session id: forgetting the session removes its episode.
    let forgot = home.run(&["--json", "forget", "session", "s-1"]).json();
    assert_eq!(forgot["episodes"][0]["episode"], s1.as_str(), "{forgot}");
    assert_eq!(home.run(&["get", &s1]).code, 4);
    assert_eq!(home.run(&["get", &s2]).code, 0);
}

// import / --dry-run lists what would be written and writes nothing
#[test]
fn a_dry_run_lists_what_would_be_written_and_writes_nothing() {
    let home = Home::new();
    let ws = home.path().join("ws");
    workspace(&ws);
    let dry = import(&home, &ws, &["--dry-run"]);
    assert_eq!(dry["dry_run"], true);
    assert_eq!(sources(&dry, "would_write"), ALL);
    assert_eq!(dry["written"], 0);
    assert_eq!(episode_count(&home), 0);
    // The episodes a dry run names are the ones the import then writes.
    let real = import(&home, &ws, &[]);
    assert_eq!(dry["items"][0]["episode"], real["items"][0]["episode"]);
    let text = home.run(&["import", "--dry-run", "--workspace", ws.to_str().unwrap()]);
    assert!(
        text.ok().stdout.contains("unchanged USER.md → "),
        "{text:?}"
    );
    assert!(text.stdout.contains("nothing was written"), "{text:?}");
}

// import / bad input is refused before anything is written
#[test]
fn a_malformed_session_line_is_refused_naming_file_and_line_before_anything_is_written() {
    let home = Home::new();
    let ws = home.path().join("ws");
    workspace(&ws);
    std::fs::write(
        ws.join("sessions/s-3.jsonl"),
        "{\"role\": \"user\", \"content\": \"hi\"}\nnot json\n",
    )
    .unwrap();
    let run = home.run(&[
        "import",
        "--workspace",
        ws.to_str().unwrap(),
        "--sessions",
        ws.join("sessions").to_str().unwrap(),
        "--agent-name",
        "Susu",
        "--human-name",
        "Sam",
    ]);
    assert_eq!(run.code, 3, "{run:?}");
    assert!(run.stderr.contains("sessions/s-3:2"), "{run:?}");
    assert_eq!(episode_count(&home), 0);
}

#[test]
fn sessions_need_both_speaker_names() {
    let home = Home::new();
    let ws = home.path().join("ws");
    workspace(&ws);
    let run = home.run(&[
        "import",
        "--workspace",
        ws.to_str().unwrap(),
        "--sessions",
        ws.join("sessions").to_str().unwrap(),
        "--agent-name",
        "Susu",
    ]);
    assert_eq!(run.code, 3, "{run:?}");
    assert!(run.stderr.contains("--human-name"), "{run:?}");
    let run = home.run(&["import", "--workspace", "/nonexistent/gralkor-ws"]);
    assert_eq!(run.code, 3, "{run:?}");
    assert!(run.stderr.contains("--workspace"), "{run:?}");
    let run = home.run(&[
        "import",
        "--workspace",
        ws.to_str().unwrap(),
        "--lens",
        "nope",
    ]);
    assert_eq!(run.code, 3, "{run:?}");
    assert_eq!(episode_count(&home), 0);
}

// import / all or nothing: one bad file and nothing is written, the error names it
#[test]
fn a_file_with_a_nul_is_refused_naming_it_and_nothing_is_written() {
    let home = Home::new();
    let ws = home.path().join("ws");
    std::fs::create_dir_all(ws.join("memory")).unwrap();
    // MEMORY.md is good and comes first; memory/notes.md breaks the content rule.
    std::fs::write(ws.join("MEMORY.md"), "Sam's quokka is called Pip.\n").unwrap();
    std::fs::write(ws.join("memory/notes.md"), "Sam likes\0 figs.\n").unwrap();
    let run = home.run(&["import", "--workspace", ws.to_str().unwrap()]);
    assert_eq!(run.code, 3, "{run:?}");
    assert!(
        run.stderr.contains("`memory/notes.md`") && run.stderr.contains("NUL"),
        "names the file and the rule: {run:?}"
    );
    assert!(!run.stderr.contains("MEMORY.md"), "{run:?}");
    assert_eq!(episode_count(&home), 0);
    let found = home.run(&["--json", "search", "quokka"]).json();
    assert_eq!(found, json!([]), "the good file was not written either");

    // Not UTF-8: refused the same way, naming the file.
    std::fs::write(ws.join("memory/notes.md"), b"Sam likes \xff figs.\n").unwrap();
    let run = home.run(&["--json", "import", "--workspace", ws.to_str().unwrap()]);
    assert_eq!(run.code, 3, "{run:?}");
    let error: Value = serde_json::from_str(&run.stdout).expect("a JSON error");
    assert_eq!(error["error"]["kind"], "invalid_input", "{run:?}");
    assert!(run.stderr.contains("`memory/notes.md`"), "{run:?}");
    assert_eq!(episode_count(&home), 0);

    // Fixed, the import writes both.
    std::fs::write(ws.join("memory/notes.md"), "Sam likes figs.\n").unwrap();
    let report = import_files(&home, &ws);
    assert_eq!(
        sources(&report, "written"),
        ["MEMORY.md", "memory/notes.md"]
    );
    assert_eq!(episode_count(&home), 2);
}

fn import_files(home: &Home, ws: &Path) -> Value {
    home.run(&["--json", "import", "--workspace", ws.to_str().unwrap()])
        .json()
}

// import / files / a daily memory file is dated by its name, the others at import
#[test]
fn a_daily_memory_file_is_dated_by_its_name() {
    let home = Home::new();
    let ws = home.path().join("ws");
    workspace(&ws);
    let report = import_files(&home, &ws);
    let episode = |source: &str| -> String {
        let item = report["items"]
            .as_array()
            .unwrap()
            .iter()
            .find(|i| i["source"] == source)
            .unwrap_or_else(|| panic!("{source} in {report}"));
        let uuid = item["episode"].as_str().unwrap();
        home.run(&["--json", "get", uuid]).json()["episode"]["valid_at"]
            .as_str()
            .unwrap()
            .to_string()
    };
    assert_eq!(
        episode("memory/2026-11-30.md"),
        "2026-11-30T00:00:00.000000Z"
    );
    // Not a date: dated at import (today, not the thirtieth).
    assert_ne!(episode("memory/notes.md"), "2026-11-30T00:00:00.000000Z");
    assert!(!episode("MEMORY.md").starts_with("2026-11-30T00:00:00"));
}

// import / sessions / lines of the wrong shape are refused naming file and line
#[test]
fn session_lines_of_the_wrong_shape_are_refused_naming_file_and_line() {
    for (bad, rule) in [
        ("[1, 2]", "must be a JSON object"),
        ("{\"text\": \"hi\"}", "must be a chat message"),
        (
            "{\"role\": \"robot\", \"content\": \"beep\"}",
            "unknown role `robot`",
        ),
        (
            "{\"type\": \"message\", \"message\": \"hi\"}",
            "`message` must be an object",
        ),
    ] {
        let home = Home::new();
        let ws = home.path().join("ws");
        workspace(&ws);
        std::fs::write(
            ws.join("sessions/s-3.jsonl"),
            format!("{{\"role\": \"user\", \"content\": \"hi\"}}\n{bad}\n"),
        )
        .unwrap();
        let run = home.run(&[
            "import",
            "--workspace",
            ws.to_str().unwrap(),
            "--sessions",
            ws.join("sessions").to_str().unwrap(),
            "--agent-name",
            "Susu",
            "--human-name",
            "Sam",
        ]);
        assert_eq!(run.code, 3, "{bad}: {run:?}");
        assert!(
            run.stderr.contains("sessions/s-3:2") && run.stderr.contains(rule),
            "{bad}: {run:?}"
        );
        assert_eq!(episode_count(&home), 0);
    }
}
