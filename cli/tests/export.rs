//! `gralkor export` end to end: a graph written with the library, exported by the
//! binary as JSON and DOT (test-trees/cli.md, export).

mod common;

use common::{Home, write_graph};

// export / JSON: entities and facts with their valid and invalid times
#[tokio::test(flavor = "multi_thread")]
async fn export_as_json_holds_entities_and_facts_with_their_times() {
    let home = Home::new();
    let (ada, lisbon, old, new) = write_graph(&home).await;
    let export = home.run(&["export", "--format", "json"]).json();
    assert_eq!(export["destination"], "personal");
    assert_eq!(export["graph"], "personal/ada");
    let names: Vec<&str> = export["entities"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| e["name"].as_str().unwrap())
        .collect();
    assert_eq!(names, ["Ada", "Lisbon", "Porto"]);
    assert_eq!(
        export["entities"][0]["labels"],
        serde_json::json!(["Person"])
    );
    let facts = export["facts"].as_array().unwrap();
    assert_eq!(facts.len(), 2);
    let lives = facts
        .iter()
        .find(|f| f["uuid"] == new.uuid.to_string())
        .unwrap();
    assert_eq!(lives["source"], ada.uuid.to_string());
    assert_eq!(lives["target"], lisbon.uuid.to_string());
    assert_eq!(lives["valid_at"], "2025-03-01T00:00:00.000000Z");
    assert!(lives["invalid_at"].is_null());
    let moved = facts
        .iter()
        .find(|f| f["uuid"] == old.uuid.to_string())
        .unwrap();
    assert_eq!(moved["invalid_at"], "2025-03-01T00:00:00.000000Z");
    // Another operator's personal graph is empty.
    let other = home.run_as("grace", &["export"]).json();
    assert_eq!(other["entities"], serde_json::json!([]));
}

// export / DOT: a digraph whose old facts are dashed; --output writes a file
#[tokio::test(flavor = "multi_thread")]
async fn export_as_dot_draws_the_graph_into_a_file() {
    let home = Home::new();
    let (ada, _, old, _) = write_graph(&home).await;
    let path = home.path().join("graph.dot");
    let run = home.run(&[
        "--json",
        "export",
        "--format",
        "dot",
        "--output",
        path.to_str().unwrap(),
    ]);
    let summary = run.json();
    assert_eq!(summary["entities"], 3);
    assert_eq!(summary["facts"], 2);
    let dot = std::fs::read_to_string(&path).unwrap();
    assert!(dot.starts_with("digraph \"gralkor personal\" {"), "{dot}");
    assert!(
        dot.contains(&format!("\"{}\" [label=\"Ada\\n[Person]\"];", ada.uuid)),
        "{dot}"
    );
    let old_line = dot
        .lines()
        .find(|l| l.contains("Ada lives in Porto"))
        .unwrap();
    assert!(old_line.contains(&format!(
        "\"{}\" -> \"{}\"",
        old.source_uuid, old.target_uuid
    )));
    assert!(old_line.contains("style=dashed"), "{old_line}");
    let new_line = dot
        .lines()
        .find(|l| l.contains("Ada lives in Lisbon"))
        .unwrap();
    assert!(!new_line.contains("dashed"), "{new_line}");
}

// get / a fact by id, from the graph, with its times
#[tokio::test(flavor = "multi_thread")]
async fn get_reads_a_fact_by_id() {
    let home = Home::new();
    let (_, _, old, _) = write_graph(&home).await;
    let got = home.run(&["--json", "get", &old.uuid.to_string()]).json();
    assert_eq!(got["destination"], "personal");
    assert_eq!(got["fact"]["fact"], "Ada lives in Porto");
    assert_eq!(got["fact"]["invalid_at"], "2025-03-01T00:00:00.000000Z");
    let text = home.run(&["get", &old.uuid.to_string()]);
    assert!(
        text.ok().stdout.starts_with(&format!("fact {}", old.uuid)),
        "{text:?}"
    );
    assert!(
        text.stdout
            .contains("invalid at: 2025-03-01T00:00:00.000000Z")
    );
    // Not Grace's.
    let grace = home.run_as("grace", &["get", &old.uuid.to_string()]);
    assert_eq!(grace.code, 4, "{grace:?}");
}

// export / episodes: without a language model they are all a graph holds, and exported
#[test]
fn export_holds_the_episodes_oldest_first_with_their_state() {
    let home = Home::new();
    home.run(&["add", "Ada keeps honeybees"]).ok();
    home.run(&["add", "Ada sold the honey"]).ok();
    let export = home.run(&["export", "--format", "json"]).json();
    let episodes = export["episodes"].as_array().unwrap();
    let contents: Vec<&str> = episodes
        .iter()
        .map(|e| e["content"].as_str().unwrap())
        .collect();
    assert_eq!(contents, ["Ada keeps honeybees", "Ada sold the honey"]);
    assert_eq!(episodes[0]["state"], "pending", "{export}");
    assert!(episodes[0]["uuid"].is_string() && episodes[0]["valid_at"].is_string());
    assert_eq!(export["entities"], serde_json::json!([]));
}
