//! Owned content of replace-graph Lenses on a real FalkorDB: `graph::replace_owned`
//! and `graph::get_owned`. Mirrors `test-trees/lens.md` (storage section).

use crate::common;

use common::TestGraph;
use gralkor::falkordb::{Params, Value};
use gralkor::graph::{self, OwnedNode, OwnedRelationship};
use gralkor::lens::Graph;
use serde_json::json;

async fn count(g: &TestGraph, q: &str) -> i64 {
    let res = g.db.ro_query(&g.name, q, &Params::new()).await.unwrap();
    res.get(0, "c").and_then(Value::as_int).unwrap()
}

async fn replace(g: &TestGraph, owner: &str, graph: Graph) -> graph::ReplaceCounts {
    graph.validate().unwrap();
    let (nodes, rels) = graph::owned_parts(&graph);
    graph::replace_owned(&g.db, &g.name, owner, &nodes, &rels)
        .await
        .unwrap()
}

fn systems() -> Graph {
    Graph::new()
        .node(
            "payments",
            ["System", "Service"],
            json!({"name": "Payments", "tier": 1, "load": 0.5, "up": true, "tags": ["a", "b"]}),
        )
        .node(
            "ledger",
            ["System"],
            json!({"name": "Ledger", "_gralkor_lens": "impostor"}),
        )
        .node("bare", Vec::<String>::new(), json!({}))
        .relationship(
            "payments",
            "DEPENDS_ON",
            "ledger",
            json!({"protocol": "events"}),
        )
        .relationship("ledger", "FEEDS", "bare", json!({}))
}

#[tokio::test]
async fn a_replacement_stores_nodes_relationships_and_properties_owned_by_the_lens() {
    let g = TestGraph::new("owned-store").await;
    let counts = replace(&g, "systems", systems()).await;
    assert_eq!((counts.nodes_created, counts.relationships_created), (3, 2));
    assert_eq!((counts.nodes_deleted, counts.relationships_deleted), (0, 0));

    let (nodes, rels) = graph::get_owned(&g.db, &g.name, "systems").await.unwrap();
    let ids: Vec<_> = nodes.iter().map(|n| n.id.as_str()).collect();
    assert_eq!(ids, ["bare", "ledger", "payments"]);
    let payments = &nodes[2];
    let mut labels = payments.labels.clone();
    labels.sort();
    assert_eq!(labels, ["Service", "System"]);
    assert_eq!(payments.properties["name"], Value::from("Payments"));
    assert_eq!(payments.properties["tier"], Value::Int(1));
    assert_eq!(payments.properties["load"], Value::Float(0.5));
    assert_eq!(payments.properties["up"], Value::Bool(true));
    assert_eq!(
        payments.properties["tags"],
        Value::from(vec!["a".to_string(), "b".to_string()])
    );
    assert!(nodes[0].labels.is_empty());
    assert_eq!(
        rels,
        [
            OwnedRelationship {
                from: "ledger".into(),
                rel_type: "FEEDS".into(),
                to: "bare".into(),
                properties: Default::default(),
            },
            OwnedRelationship {
                from: "payments".into(),
                rel_type: "DEPENDS_ON".into(),
                to: "ledger".into(),
                properties: [("protocol".to_string(), Value::from("events"))].into(),
            },
        ]
    );
    // The ownership mark is the Lens, whatever was supplied.
    assert_eq!(
        count(
            &g,
            "MATCH (n) WHERE n._gralkor_lens = 'systems' RETURN count(n) AS c"
        )
        .await,
        3
    );
    assert_eq!(
        count(
            &g,
            "MATCH (n) WHERE n._gralkor_lens = 'impostor' RETURN count(n) AS c"
        )
        .await,
        0
    );
    assert_eq!(
        count(
            &g,
            "MATCH ()-[r]->() WHERE r._gralkor_lens = 'systems' RETURN count(r) AS c"
        )
        .await,
        2
    );
}

#[tokio::test]
async fn a_replacement_removes_only_the_lenses_own_content() {
    let g = TestGraph::new("owned-only").await;
    // Unowned content (the engine's) and another Lens's content.
    g.db.query(
        &g.name,
        "CREATE (:Entity {name: 'Ada'})-[:RELATES_TO {fact: 'x'}]->(:Entity {name: 'Acme'})",
        &Params::new(),
    )
    .await
    .unwrap();
    replace(
        &g,
        "teams",
        Graph::new().node("core", ["Team"], json!({"name": "Core"})),
    )
    .await;
    replace(&g, "systems", systems()).await;

    let counts = replace(
        &g,
        "systems",
        Graph::new().node("billing", ["System"], json!({})),
    )
    .await;
    assert_eq!((counts.nodes_deleted, counts.relationships_deleted), (3, 2));
    let (nodes, rels) = graph::get_owned(&g.db, &g.name, "systems").await.unwrap();
    assert_eq!(
        nodes.iter().map(|n| n.id.as_str()).collect::<Vec<_>>(),
        ["billing"]
    );
    assert!(rels.is_empty());
    let (teams, _) = graph::get_owned(&g.db, &g.name, "teams").await.unwrap();
    assert_eq!(teams.len(), 1);
    assert_eq!(
        count(
            &g,
            "MATCH (e:Entity)-[:RELATES_TO]->(:Entity) RETURN count(e) AS c"
        )
        .await,
        1
    );

    // An empty graph clears the Lens, and nothing else.
    replace(&g, "systems", Graph::new()).await;
    assert!(
        graph::get_owned(&g.db, &g.name, "systems")
            .await
            .unwrap()
            .0
            .is_empty()
    );
    assert_eq!(
        graph::get_owned(&g.db, &g.name, "teams")
            .await
            .unwrap()
            .0
            .len(),
        1
    );
    assert_eq!(count(&g, "MATCH (e:Entity) RETURN count(e) AS c").await, 2);
}

#[tokio::test]
async fn labels_and_types_are_checked_before_any_statement() {
    let g = TestGraph::new("owned-check").await;
    replace(&g, "systems", systems()).await;
    let bad = OwnedNode {
        id: "x".into(),
        labels: vec!["Bad Label".into()],
        properties: Default::default(),
    };
    let err = graph::replace_owned(&g.db, &g.name, "systems", &[bad], &[])
        .await
        .unwrap_err();
    assert!(err.to_string().contains("nodes[0].labels[0]"), "{err}");
    let node = OwnedNode {
        id: "x".into(),
        labels: vec![],
        properties: Default::default(),
    };
    let rel = OwnedRelationship {
        from: "x".into(),
        rel_type: "X`) DELETE n //".into(),
        to: "x".into(),
        properties: Default::default(),
    };
    let err = graph::replace_owned(&g.db, &g.name, "systems", &[node], &[rel])
        .await
        .unwrap_err();
    assert!(err.to_string().contains("relationships[0].type"), "{err}");
    assert!(
        graph::replace_owned(&g.db, &g.name, " ", &[], &[])
            .await
            .is_err()
    );
    // Nothing was removed by the refused calls.
    assert_eq!(
        graph::get_owned(&g.db, &g.name, "systems")
            .await
            .unwrap()
            .0
            .len(),
        3
    );
}
