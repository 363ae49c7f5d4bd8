//! The `gralkor` command line end to end: the real binary against an embedded FalkorDB
//! in a temporary directory (test-trees/cli.md).

mod common;

use common::{Home, Run};
use serde_json::Value;

fn added_uuid(v: &Value) -> String {
    v["episodes"][0]
        .as_str()
        .expect("an episode uuid")
        .to_string()
}

fn episode_uuids(results: &Value) -> Vec<String> {
    results
        .as_array()
        .expect("a list of results")
        .iter()
        .filter(|r| r["hit"]["type"] == "episode")
        .filter_map(|r| r["hit"]["uuid"].as_str().map(str::to_string))
        .collect()
}

// memory / add → search → forget → search finds nothing
#[test]
fn add_then_search_finds_it_and_after_forget_search_finds_nothing() {
    let home = Home::new();
    let added = home
        .run(&["--json", "add", "Ada keeps honeybees on her allotment"])
        .json();
    let uuid = added_uuid(&added);
    assert_eq!(added["destination"], "personal");
    assert_eq!(added["written"], true);

    let found = home.run(&["--json", "search", "honeybees"]).json();
    assert_eq!(episode_uuids(&found), [uuid.as_str()]);
    assert_eq!(found[0]["destination"], "personal");

    let forgot = home.run(&["--json", "forget", "episode", &uuid]).json();
    assert_eq!(forgot["forgotten"], "episode");
    assert_eq!(forgot["destination"], "personal");

    let after = home.run(&["--json", "search", "honeybees"]).json();
    assert_eq!(episode_uuids(&after), Vec::<String>::new());
    // And it cannot be read or forgotten again.
    assert_eq!(home.run(&["get", &uuid]).code, 4);
    assert_eq!(home.run(&["forget", "episode", &uuid]).code, 4);
}

// memory / add / the same content twice is written once
#[test]
fn adding_the_same_content_twice_writes_it_once() {
    let home = Home::new();
    let first = home.run(&["--json", "add", "Ada prefers green tea"]).json();
    let second = home.run(&["--json", "add", "Ada prefers green tea"]).json();
    assert_eq!(first["written"], true);
    assert_eq!(second["written"], false);
    assert_eq!(added_uuid(&first), added_uuid(&second));
    let listed = home.run(&["--json", "episodes"]).json();
    assert_eq!(listed.as_array().unwrap().len(), 1, "{listed}");
}

// memory / operators / one operator's personal memory is not another's
#[test]
fn one_operators_personal_memory_is_not_anothers() {
    let home = Home::new();
    let uuid = added_uuid(
        &home
            .run(&["--json", "add", "Ada hides the spare key"])
            .json(),
    );
    let other = home
        .run_as("grace", &["--json", "search", "spare key"])
        .json();
    assert_eq!(episode_uuids(&other), Vec::<String>::new());
    assert_eq!(home.run_as("grace", &["get", &uuid]).code, 4);
    assert_eq!(home.run_as("grace", &["forget", "episode", &uuid]).code, 4);
    // Still there for Ada.
    assert_eq!(home.run(&["get", &uuid]).code, 0);
}

// memory / add / from a file, as a conversation, through a Lens
#[test]
fn add_reads_a_file_and_get_shows_it_whole() {
    let home = Home::new();
    let file = home.path().join("note.txt");
    std::fs::write(&file, "Ada: We ship on Fridays.\nGrace: Noted.").unwrap();
    let added = home
        .run(&[
            "--json",
            "add",
            "--file",
            file.to_str().unwrap(),
            "--kind",
            "conversation",
            "--source-description",
            "standup",
        ])
        .json();
    let uuid = added_uuid(&added);
    let got = home.run(&["--json", "get", &uuid]).json();
    assert_eq!(got["destination"], "personal");
    assert_eq!(
        got["episode"]["content"],
        "Ada: We ship on Fridays.\nGrace: Noted."
    );
    assert_eq!(got["episode"]["source_kind"], "message");
    assert_eq!(got["episode"]["source_description"], "standup");
    // Readable output names the episode and holds the content.
    let text = home.run(&["get", &uuid]);
    assert!(text.ok().stdout.contains(&format!("episode {uuid}")));
    assert!(text.stdout.contains("Grace: Noted."));
}

// json / every read command prints one JSON document
#[test]
fn every_read_command_prints_json_that_parses() {
    let home = Home::new();
    let uuid = added_uuid(&home.run(&["--json", "add", "Ada moved to Lisbon"]).json());

    let episodes = home.run(&["--json", "episodes", "--last", "5"]).json();
    assert_eq!(episodes[0]["episode"]["uuid"], uuid.as_str());
    assert_eq!(episodes[0]["destination"], "personal");
    // Without a language model the episode waits for extraction.
    assert_eq!(episodes[0]["state"], "pending");

    let status = home.run(&["--json", "status"]).json();
    assert_eq!(status["operator"], "ada");
    let personal = status["destinations"]
        .as_array()
        .unwrap()
        .iter()
        .find(|d| d["name"] == "personal")
        .expect("personal is listed with an operator");
    assert_eq!(personal["episodes"], 1);
    assert_eq!(personal["pending"], 1);
    assert_eq!(
        personal["indices_missing"],
        serde_json::json!([]),
        "{status}"
    );
    assert_eq!(status["extracts"], false);
    assert_eq!(status["healthy"], true, "{status}");
    assert!(status["server"]["falkordb_version"].is_string(), "{status}");
    assert!(
        status["server"]["used_memory_bytes"].as_u64().unwrap() > 0,
        "{status}"
    );

    let facts = home
        .run(&["--json", "search", "Lisbon", "--type", "facts"])
        .json();
    // Without extraction there are no facts (an episode is not labelled one).
    assert_eq!(facts, serde_json::json!([]), "{facts}");
    assert!(home.run(&["--json", "get", &uuid]).json()["episode"].is_object());
    assert_eq!(home.run(&["--json", "build-indices"]).json()["built"], true);
}

// status / without an operator lists the shared Destinations only
#[test]
fn status_without_an_operator_lists_the_shared_destinations() {
    let home = Home::new();
    let status = home.run_raw(&["--text-only", "--json", "status"]).json();
    let names: Vec<&str> = status["destinations"]
        .as_array()
        .unwrap()
        .iter()
        .map(|d| d["name"].as_str().unwrap())
        .collect();
    assert_eq!(names, ["global"]);
    assert!(status["operator"].is_null());
    let text = home.run_raw(&["--text-only", "status"]);
    assert!(text.ok().stdout.starts_with("ok: "), "{text:?}");
}

// errors / exit codes and one readable line
#[test]
fn a_missing_operator_is_a_configuration_error_before_anything_starts() {
    let home = Home::new();
    let run = home.run_raw(&["--text-only", "search", "tea"]);
    assert_eq!(run.code, 5, "{run:?}");
    assert_eq!(run.stderr.lines().count(), 1, "{run:?}");
    assert!(run.stderr.contains("GRALKOR_OPERATOR"), "{run:?}");
    // Nothing was started: no data directory was made.
    assert!(!home.data_dir().exists());
}

#[test]
fn with_no_backend_named_the_platform_data_directory_is_used_and_status_prints_it() {
    let home = Home::new();
    let xdg = home.path().join("xdg");
    let run = |args: &[&str]| {
        Run::from(
            home.command()
                .env_remove("GRALKOR_DATA_DIR")
                .env("XDG_DATA_HOME", &xdg)
                .args(["--text-only", "--operator", "ada"])
                .args(args)
                .output()
                .unwrap(),
        )
    };
    run(&["add", "Ada likes quinces"]).ok();
    let default = xdg.join("gralkor");
    assert!(default.join("falkordb.sock").exists() || default.is_dir());
    let status = run(&["--json", "status"]).json();
    assert_eq!(status["data_dir"], default.to_str().unwrap(), "{status}");
    let text = run(&["status"]);
    assert!(
        text.ok()
            .stdout
            .contains(&format!("data directory: {}", default.display())),
        "{text:?}"
    );
    assert_eq!(
        run(&["--json", "episodes"])
            .json()
            .as_array()
            .unwrap()
            .len(),
        1
    );
    // With neither XDG_DATA_HOME nor HOME there is no default: exit 5 naming the variable.
    let none = Run::from(
        home.command()
            .env_remove("GRALKOR_DATA_DIR")
            .env_remove("XDG_DATA_HOME")
            .env_remove("HOME")
            .args(["--text-only", "--operator", "ada", "search", "tea"])
            .output()
            .unwrap(),
    );
    assert_eq!(none.code, 5, "{none:?}");
    assert!(none.stderr.contains("GRALKOR_DATA_DIR"), "{none:?}");
}

// errors / cheap checks come before anything starts, naming the flag
#[test]
fn cheap_checks_name_the_flag_before_anything_starts() {
    let home = Home::new();
    let limit = home.run(&["search", "tea", "-n", "0"]);
    assert_eq!(limit.code, 3, "{limit:?}");
    assert!(limit.stderr.contains("--limit (-n)"), "{limit:?}");
    let nowhere = home.run(&["search", "tea", "-d", "nowhere"]);
    assert_eq!(nowhere.code, 3, "{nowhere:?}");
    assert!(nowhere.stderr.contains("--destination (-d)"), "{nowhere:?}");
    let array = home.run(&["add", "--kind", "json", "[1,2]"]);
    assert_eq!(array.code, 3, "{array:?}");
    assert!(array.stderr.contains("JSON object"), "{array:?}");
    let file = home.path().join("latin1.txt");
    std::fs::write(&file, b"caf\xe9 au lait").unwrap();
    let bytes = home.run(&["--json", "add", "--file", file.to_str().unwrap()]);
    assert_eq!(bytes.code, 3, "{bytes:?}");
    assert!(
        bytes.stderr.contains("--file") && bytes.stderr.contains("UTF-8"),
        "{bytes:?}"
    );
    let error: Value = serde_json::from_str(&bytes.stdout).unwrap();
    assert_eq!(error["error"]["kind"], "invalid_input");
    // None of them started FalkorDB: no data directory was made.
    assert!(!home.data_dir().exists());
}

// errors / clap's own usage errors follow --json and the one-line format
#[test]
fn a_usage_error_is_one_line_and_json_with_json() {
    let home = Home::new();
    let run = home.run_raw(&["--json", "search"]);
    assert_eq!(run.code, 2, "{run:?}");
    assert_eq!(run.stderr.lines().count(), 1, "{run:?}");
    assert!(run.stderr.starts_with("gralkor: error: "), "{run:?}");
    assert!(run.stderr.contains("<QUERY>"), "{run:?}");
    let error: Value = serde_json::from_str(&run.stdout).unwrap();
    assert_eq!(error["error"]["kind"], "usage");
    assert_eq!(error["error"]["exit_code"], 2);
    let plain = home.run_raw(&["frobnicate"]);
    assert_eq!(plain.code, 2);
    assert_eq!(plain.stderr.lines().count(), 1, "{plain:?}");
    assert!(plain.stdout.is_empty());
}

#[test]
fn a_data_dir_flag_overrides_the_environment() {
    let home = Home::new();
    let elsewhere = home.path().join("elsewhere");
    let run = home.run(&[
        "--json",
        "--data-dir",
        elsewhere.to_str().unwrap(),
        "add",
        "Ada likes figs",
    ]);
    run.ok();
    assert!(elsewhere.exists());
    assert!(!home.data_dir().exists());
}

#[test]
fn a_blank_query_is_invalid_input_with_json_error_output() {
    let home = Home::new();
    let run = home.run(&["--json", "search", "  "]);
    assert_eq!(run.code, 3, "{run:?}");
    let error: Value = serde_json::from_str(&run.stdout).unwrap();
    assert_eq!(error["error"]["kind"], "invalid_input");
    assert!(
        error["error"]["message"]
            .as_str()
            .unwrap()
            .contains("`query`")
    );
    assert_eq!(run.stderr.lines().count(), 1, "{run:?}");
    assert!(run.stderr.starts_with("gralkor: error: invalid input"));
}

#[test]
fn an_unknown_destination_is_invalid_input() {
    let home = Home::new();
    let run = home.run(&["episodes", "--destination", "nowhere"]);
    assert_eq!(run.code, 3, "{run:?}");
    assert!(run.stderr.contains("nowhere"), "{run:?}");
}

#[test]
fn an_unknown_episode_is_not_found() {
    let home = Home::new();
    let run = home.run(&["get", "7c9e6679-7425-40de-944b-e07fc1f90ae7"]);
    assert_eq!(run.code, 4, "{run:?}");
    assert!(run.stderr.contains("7c9e6679"), "{run:?}");
}

#[test]
fn a_bad_command_line_is_a_usage_error() {
    let home = Home::new();
    assert_eq!(home.run_raw(&["get", "not-a-uuid"]).code, 2);
    assert_eq!(home.run_raw(&["frobnicate"]).code, 2);
    let help = home.run_raw(&["--help"]);
    assert_eq!(help.code, 0);
    assert!(help.stdout.contains("Exit codes"), "{help:?}");
}

// forget / operator: the personal graph is gone, and a second run has nothing to do
#[test]
fn forgetting_an_operator_removes_their_memory_and_is_idempotent() {
    let home = Home::new();
    home.run(&["add", "Ada keeps honeybees on her allotment"])
        .ok();
    home.run_as("grace", &["add", "Grace keeps honeybees too"])
        .ok();
    // The operator forgotten is named: no --operator needed.
    let forgot = Run::from(
        home.command()
            .args(["--text-only", "--json", "forget", "operator", "ada"])
            .output()
            .unwrap(),
    )
    .json();
    assert_eq!(forgot["forgotten"], "operator");
    assert_eq!(forgot["graph_removed"], true);
    let after = home.run(&["--json", "search", "honeybees"]).json();
    assert_eq!(episode_uuids(&after), Vec::<String>::new());
    // Grace's memory is untouched.
    let graces = home
        .run_as("grace", &["--json", "search", "honeybees"])
        .json();
    assert_eq!(episode_uuids(&graces).len(), 1);
    let again = home.run(&["--json", "forget", "operator", "ada"]).json();
    assert_eq!(again["graph_removed"], false);
}

// forget / session: every episode of the session goes, nothing else; a second run has
// nothing to do
#[test]
fn forgetting_a_session_removes_its_episodes_only() {
    let home = Home::new();
    home.run(&[
        "add",
        "--session",
        "s-1",
        "Ada keeps honeybees on her allotment",
    ])
    .ok();
    home.run(&["add", "--session", "s-1", "Ada sells honeybees' wax"])
        .ok();
    home.run(&["add", "--session", "s-2", "Ada reads about honeybees"])
        .ok();
    home.run(&["add", "Ada dreams of honeybees"]).ok();
    assert_eq!(
        episode_uuids(&home.run(&["--json", "search", "honeybees"]).json()).len(),
        4
    );
    let forgot = home.run(&["--json", "forget", "session", "s-1"]).json();
    assert_eq!(forgot["forgotten"], "session");
    assert_eq!(forgot["episodes"].as_array().unwrap().len(), 2, "{forgot}");
    let left = home.run(&["--json", "search", "honeybees"]).json();
    assert_eq!(episode_uuids(&left).len(), 2, "{left}");
    let again = home.run(&["forget", "session", "s-1"]);
    assert_eq!(again.code, 0, "{again:?}");
    assert!(again.stdout.contains("nothing to forget"), "{again:?}");
    let blank = home.run(&["forget", "session", " "]);
    assert_eq!(blank.code, 3, "{blank:?}");
    assert!(blank.stderr.contains("session_id"), "{blank:?}");
    // One episode is "1 episode".
    home.run(&["add", "--session", "s-9", "Ada waters the figs"])
        .ok();
    let one = home.run(&["forget", "session", "s-9"]);
    assert_eq!(one.ok().stdout.trim(), "forgot session s-9: 1 episode");
}

// forget / destination: the operator's graph of that Destination is emptied
#[test]
fn forgetting_a_destination_empties_it() {
    let home = Home::new();
    home.run(&["add", "Ada keeps honeybees on her allotment"])
        .ok();
    home.run_as("grace", &["add", "Grace keeps honeybees too"])
        .ok();
    let forgot = home
        .run(&["--json", "forget", "destination", "personal"])
        .json();
    assert_eq!(forgot["forgotten"], "destination");
    assert_eq!(forgot["graph_removed"], true);
    let after = home.run(&["--json", "search", "honeybees"]).json();
    assert_eq!(episode_uuids(&after), Vec::<String>::new());
    let graces = home
        .run_as("grace", &["--json", "search", "honeybees"])
        .json();
    assert_eq!(
        episode_uuids(&graces).len(),
        1,
        "Grace's personal graph is hers"
    );
    let unknown = home.run(&["forget", "destination", "nowhere"]);
    assert_eq!(unknown.code, 3, "{unknown:?}");
}

fn fact_texts(results: &Value) -> Vec<String> {
    results
        .as_array()
        .expect("a list of results")
        .iter()
        .filter(|r| r["hit"]["type"] == "fact")
        .filter_map(|r| r["hit"]["fact"].as_str().map(str::to_string))
        .collect()
}

// search / --as-of: what was true then (a fact invalidated later is found as of when it held)
#[tokio::test(flavor = "multi_thread")]
async fn search_as_of_finds_what_was_true_then() {
    let home = Home::new();
    // Ada lived in Porto from 2020 until 2025-03-01, in Lisbon since.
    common::write_graph(&home).await;
    // Written below the engine: its indices are built by the admin command.
    home.run(&["build-indices"]).ok();
    let facts = |extra: &[&str]| {
        let mut args = vec!["--json", "search", "Ada lives", "--type", "facts"];
        args.extend_from_slice(extra);
        let mut found = fact_texts(&home.run(&args).json());
        found.sort();
        found
    };
    assert_eq!(facts(&[]), ["Ada lives in Lisbon"]);
    assert_eq!(
        facts(&["--as-of", "2022-01-01T00:00:00Z"]),
        ["Ada lives in Porto"]
    );
    assert_eq!(
        facts(&["--as-of", "2026-01-01T00:00:00+01:00"]),
        ["Ada lives in Lisbon"]
    );
    assert!(facts(&["--as-of", "2019-01-01T00:00:00Z"]).is_empty());
    // Episodes: an episode written now had not happened in 2020.
    let uuid = added_uuid(
        &home
            .run(&["--json", "add", "Ada repaints the kayak"])
            .json(),
    );
    let then = home
        .run(&[
            "--json",
            "search",
            "kayak",
            "--as-of",
            "2020-01-01T00:00:00Z",
        ])
        .json();
    assert_eq!(episode_uuids(&then), Vec::<String>::new());
    let now = home.run(&["--json", "search", "kayak"]).json();
    assert_eq!(episode_uuids(&now), [uuid.as_str()]);
    // A malformed instant is a usage error naming the flag; entities have no time.
    let bad = home.run(&["search", "kayak", "--as-of", "last tuesday"]);
    assert_eq!(bad.code, 2, "{bad:?}");
    assert!(
        bad.stderr.contains("--as-of") && bad.stderr.contains("RFC 3339"),
        "{bad:?}"
    );
    let nodes = home.run(&[
        "search",
        "Ada",
        "--type",
        "nodes",
        "--as-of",
        "2022-01-01T00:00:00Z",
    ]);
    assert_eq!(nodes.code, 3, "{nodes:?}");
    assert!(nodes.stderr.contains("`as_of`"), "{nodes:?}");
}

// resume / without a language model is a configuration error
#[test]
fn resume_without_a_language_model_says_so() {
    let home = Home::new();
    home.run(&["add", "Ada owns a red bicycle"]).ok();
    let run = home.run(&["resume"]);
    assert_eq!(run.code, 5, "{run:?}");
}

// models / the default build answers by meaning with no provider key
#[cfg(feature = "local-embedder")]
#[test]
fn with_the_default_local_embedder_search_finds_by_meaning_offline() {
    let home = Home::new();
    let run = |args: &[&str]| {
        let output = home
            .command()
            .args(["--operator", "ada", "--json"])
            .args(args)
            .output()
            .unwrap();
        assert!(output.status.success(), "{output:?}");
        serde_json::from_slice::<Value>(&output.stdout).unwrap()
    };
    let uuid = added_uuid(&run(&["add", "Ada keeps honeybees on her allotment"]));
    run(&["add", "The quarterly report is due on Friday"]);
    let status = run(&["status"]);
    assert!(
        status["configuration"]
            .as_str()
            .unwrap()
            .contains("embedder local:all-minilm-l6-v2"),
        "{status}"
    );
    // No word in common with the episode: found by its embedding.
    let found = run(&["search", "insects in the garden", "-n", "1"]);
    assert_eq!(episode_uuids(&found), [uuid.as_str()]);
}

// search / facts offline: unextracted episodes are not labelled facts
#[test]
fn offline_a_fact_search_lists_no_episodes_as_facts_and_says_why() {
    let home = Home::new();
    let added = home
        .run(&["--json", "add", "Ada keeps honeybees on her allotment"])
        .json();
    let uuid = added_uuid(&added);
    let facts = home
        .run(&["--json", "search", "--type", "facts", "honeybees"])
        .json();
    assert_eq!(facts, serde_json::json!([]), "no model, no facts");
    let text = home.run(&["search", "--type", "facts", "honeybees"]);
    assert!(
        text.ok()
            .stdout
            .contains("no facts: 1 matching episode is not extracted"),
        "{text:?}"
    );
    // The episode is still found as what it is.
    let found = home.run(&["--json", "search", "honeybees"]).json();
    assert_eq!(episode_uuids(&found), [uuid.as_str()]);
}

// memory / add / global: the shared Destination can be written, and every operator reads it
#[test]
fn global_is_written_through_the_global_lens_and_every_operator_reads_it() {
    let home = Home::new();
    let added = home
        .run(&[
            "--json",
            "add",
            "--lens",
            "global",
            "The allotments open at dawn",
        ])
        .json();
    assert_eq!(added["destination"], "global", "{added}");
    let uuid = added_uuid(&added);
    let found = home
        .run_as("grace", &["--json", "search", "-d", "global", "allotments"])
        .json();
    assert_eq!(episode_uuids(&found), [uuid.as_str()]);
    assert_eq!(found[0]["destination"], "global");
    // Not in anyone's personal memory.
    let personal = home
        .run(&["--json", "search", "-d", "personal", "allotments"])
        .json();
    assert_eq!(episode_uuids(&personal), Vec::<String>::new());
}

/// Runs `gralkor --text-only --operator ada ARGS` on a pseudo-terminal (util-linux
/// `script`), typing `input`; the terminal's output and the exit code.
fn run_on_a_terminal(home: &Home, args: &[&str], input: &str) -> (i32, String) {
    use std::io::Write;
    let gralkor = home.command();
    let mut line = format!(
        "'{}' --text-only --operator ada",
        env!("CARGO_BIN_EXE_gralkor")
    );
    for a in args {
        line.push_str(&format!(" '{a}'"));
    }
    let mut cmd = std::process::Command::new("script");
    cmd.args(["-qec", &line, "/dev/null"]);
    for (k, v) in gralkor.get_envs() {
        match v {
            Some(v) => cmd.env(k, v),
            None => cmd.env_remove(k),
        };
    }
    let mut child = cmd
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("util-linux `script` runs");
    child
        .stdin
        .take()
        .unwrap()
        .write_all(input.as_bytes())
        .unwrap();
    let out = child.wait_with_output().unwrap();
    (
        out.status.code().expect("exited"),
        String::from_utf8_lossy(&out.stdout).into_owned(),
    )
}

// forget / on a terminal it asks first; --yes skips the question; without a terminal it does not ask
#[test]
fn forget_on_a_terminal_asks_and_a_no_forgets_nothing() {
    let home = Home::new();
    let uuid = added_uuid(&home.run(&["--json", "add", "Ada keeps bees"]).json());
    let (code, screen) = run_on_a_terminal(&home, &["forget", "episode", &uuid], "n\n");
    assert_eq!(code, 1, "{screen}");
    assert!(
        screen.contains(&format!(
            "Forget episode {uuid}? It cannot be undone. [y/N]"
        )),
        "{screen}"
    );
    assert!(
        screen.contains("not confirmed: nothing was forgotten"),
        "{screen}"
    );
    assert_eq!(home.run(&["get", &uuid]).code, 0, "still there");

    let (code, screen) = run_on_a_terminal(&home, &["forget", "episode", &uuid], "y\n");
    assert_eq!(code, 0, "{screen}");
    assert!(
        screen.contains(&format!("forgot episode {uuid}")),
        "{screen}"
    );
    assert_eq!(home.run(&["get", &uuid]).code, 4, "forgotten");

    // --yes: no question, even on a terminal.
    let uuid = added_uuid(&home.run(&["--json", "add", "Ada keeps wasps"]).json());
    let (code, screen) = run_on_a_terminal(&home, &["forget", "--yes", "episode", &uuid], "");
    assert_eq!(code, 0, "{screen}");
    assert!(!screen.contains("[y/N]"), "{screen}");
    assert_eq!(home.run(&["get", &uuid]).code, 4);
}
