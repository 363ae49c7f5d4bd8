//! `gralkor export` end to end: a graph written with the library, exported by the
//! binary as JSON and DOT (test-trees/cli.md, export).

mod common;

use std::time::Duration;

use common::Home;
use gralkor::falkordb::{EmbeddedConfig, EmbeddedServer, FalkorDb};
use gralkor::graph::{EntityEdge, EntityNode, Timestamp, save_entities, save_facts};

/// Ada, Lisbon and Porto; Ada lived in Porto until 2025 and lives in Lisbon since.
async fn write_graph(home: &Home) -> (EntityNode, EntityNode, EntityEdge, EntityEdge) {
    let server = EmbeddedServer::start(&EmbeddedConfig::new(home.data_dir()))
        .await
        .unwrap();
    let db = FalkorDb::attach(&server, Duration::from_secs(60))
        .await
        .unwrap();
    let mut ada = EntityNode::new("Ada");
    ada.labels = vec!["Entity".into(), "Person".into()];
    let lisbon = EntityNode::new("Lisbon");
    let porto = EntityNode::new("Porto");
    let t = |s: &str| Timestamp::parse_rfc3339(s).unwrap();
    let mut old = EntityEdge::new(ada.uuid, porto.uuid, "LIVES_IN", "Ada lives in Porto");
    old.valid_at = Some(t("2020-01-01T00:00:00Z"));
    old.invalid_at = Some(t("2025-03-01T00:00:00Z"));
    let mut new = EntityEdge::new(ada.uuid, lisbon.uuid, "LIVES_IN", "Ada lives in Lisbon");
    new.valid_at = Some(t("2025-03-01T00:00:00Z"));
    save_entities(&db, "personal/ada", &[ada.clone(), lisbon.clone(), porto])
        .await
        .unwrap();
    save_facts(&db, "personal/ada", &[old.clone(), new.clone()])
        .await
        .unwrap();
    server.shutdown().await.unwrap();
    (ada, lisbon, old, new)
}

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
