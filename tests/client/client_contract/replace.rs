//! Contracts of `replace`.

use super::*;
use gralkor::client::OperatorId;

async fn node_names(client: &dyn Client, op: &OperatorId, dest: &str, query: &str) -> Vec<String> {
    let mut names: Vec<String> = client
        .search(
            &Search::new(op, query)
                .destinations([dest])
                .nodes(Vec::<String>::new()),
        )
        .await
        .unwrap()
        .iter()
        .map(|r| r.hit.as_node().expect("a node").name.clone())
        .collect();
    names.sort();
    names
}

pub async fn replace_swaps_only_the_lenses_own_content(make: &impl Factory) {
    let (dest, op, w) = (fresh("d"), fresh_op("op"), word());
    let client = make(
        RuntimeConfig::new()
            .destination(dest.clone())
            .lens(Lens::replace_graph("systems", dest.clone()))
            .lens(Lens::replace_graph("teams", dest.clone())),
    )
    .await;
    let named = |n: &str| json!({"name": format!("{n} {w}")});
    let first = Graph::new()
        .node("payments", ["System"], named("Payments"))
        .node("ledger", ["System"], named("Ledger"))
        .relationship(
            "payments",
            "DEPENDS_ON",
            "ledger",
            json!({"protocol": "events"}),
        );
    client
        .replace(&Replace::new(&op, "systems", first))
        .await
        .unwrap();
    client
        .replace(&Replace::new(
            &op,
            "teams",
            Graph::new().node("core", ["Team"], named("Core")),
        ))
        .await
        .unwrap();
    assert_eq!(
        node_names(client.as_ref(), &op, &dest, &w).await,
        [
            format!("Core {w}"),
            format!("Ledger {w}"),
            format!("Payments {w}")
        ]
    );

    let second = Graph::new().node("billing", ["System"], named("Billing"));
    client
        .replace(&Replace::new(&op, "systems", second))
        .await
        .unwrap();
    assert_eq!(
        node_names(client.as_ref(), &op, &dest, &w).await,
        [format!("Billing {w}"), format!("Core {w}")]
    );

    client
        .replace(&Replace::new(&op, "systems", Graph::new()))
        .await
        .unwrap();
    assert_eq!(
        node_names(client.as_ref(), &op, &dest, &w).await,
        [format!("Core {w}")]
    );
}

pub async fn replace_rejects_invalid_requests_before_any_mutation(make: &impl Factory) {
    let (dest, op, w) = (fresh("d"), fresh_op("op"), word());
    let client = make(
        RuntimeConfig::new()
            .destination(dest.clone())
            .lens(Lens::replace_graph("systems", dest.clone()))
            .lens(Lens::appending("notes", dest.clone())),
    )
    .await;
    let kept = Graph::new().node("a", ["System"], json!({"name": format!("Kept {w}")}));
    client
        .replace(&Replace::new(&op, "systems", kept))
        .await
        .unwrap();

    let err = client
        .replace(&Replace::new(&op, "notes", Graph::new()))
        .await
        .unwrap_err();
    assert!(
        err.to_string().contains("accepts only episode ingestion"),
        "{err}"
    );
    assert_invalid(
        client
            .replace(&Replace::new(&op, "nope", Graph::new()))
            .await,
        "lens",
    );
    let dangling = Graph::new().node("b", ["System"], json!({})).relationship(
        "b",
        "USES",
        "missing",
        json!({}),
    );
    assert_invalid(
        client
            .replace(&Replace::new(&op, "systems", dangling))
            .await,
        "graph.relationships[0].to",
    );
    let duplicate = Graph::new()
        .node("x", ["A"], json!({}))
        .node("x", ["A"], json!({}));
    assert_invalid(
        client
            .replace(&Replace::new(&op, "systems", duplicate))
            .await,
        "graph.nodes[1].id",
    );
    assert_eq!(
        node_names(client.as_ref(), &op, &dest, &w).await,
        [format!("Kept {w}")]
    );
}

pub async fn a_rejected_replace_leaves_the_previous_graph_intact(make: &impl Factory) {
    let (dest, op, w) = (fresh("d"), fresh_op("op"), word());
    let client = make(
        RuntimeConfig::new()
            .destination(dest.clone())
            .lens(Lens::replace_graph("systems", dest.clone())),
    )
    .await;
    let named = |n: &str| json!({"name": format!("{n} {w}")});
    let previous = Graph::new()
        .node("payments", ["System"], named("Payments"))
        .node("ledger", ["System"], named("Ledger"))
        .relationship("payments", "DEPENDS_ON", "ledger", json!({}));
    client
        .replace(&Replace::new(&op, "systems", previous))
        .await
        .unwrap();
    let before = node_names(client.as_ref(), &op, &dest, &w).await;
    assert_eq!(before, [format!("Ledger {w}"), format!("Payments {w}")]);

    // Each payload is valid except for one value the storage could not take; every
    // error names the request's own field, and nothing is replaced.
    let base = || Graph::new().node("billing", ["System"], named("Billing"));
    let hostile: Vec<(Graph, &str)> = vec![
        (
            Graph::new().node("bill\0ing", ["System"], named("Billing")),
            "graph.nodes[0].id",
        ),
        (
            base().node("core", ["Team"], json!({"name": format!("Core\0 {w}")})),
            "graph.nodes[1].properties.name",
        ),
        (
            base().node("core", ["Team"], json!({"tags": ["ok", "n\0"]})),
            "graph.nodes[1].properties.tags[1]",
        ),
        (
            base().relationship("billing", "USES", "billing", json!({"via": "\0"})),
            "graph.relationships[0].properties.via",
        ),
        (
            base().node("core", ["Team"], json!({"big": u64::MAX})),
            "graph.nodes[1].properties.big",
        ),
        (
            base().node("core", ["Team"], json!({"tiny": 5e-324})),
            "graph.nodes[1].properties.tiny",
        ),
        (
            base().node("core", ["Team"], json!({"sizes": [1, 5e-324]})),
            "graph.nodes[1].properties.sizes[1]",
        ),
        (
            base().node("core", ["Team", "Team"], json!({})),
            "graph.nodes[1].labels[1]",
        ),
    ];
    for (graph, field) in hostile {
        assert_invalid(
            client.replace(&Replace::new(&op, "systems", graph)).await,
            field,
        );
        assert_eq!(
            node_names(client.as_ref(), &op, &dest, &w).await,
            before,
            "after the refusal naming `{field}`"
        );
    }
}

pub async fn replaced_values_read_back_as_they_were_sent(make: &impl Factory) {
    let (dest, op, w) = (fresh("d"), fresh_op("op"), word());
    let client = make(
        RuntimeConfig::new()
            .destination(dest.clone())
            .lens(Lens::replace_graph("systems", dest.clone())),
    )
    .await;
    let sent = json!({
        "name": format!("{w} it's a \\ \"quoted\" line\nnext 😀"),
        "min": i64::MIN, "max": i64::MAX, "zero": 0,
        "largest": f64::MAX, "most_negative": -f64::MAX, "smallest": f64::MIN_POSITIVE,
        "tenth": 0.1, "yes": true,
        "mixed": ["a", 1, 2.5, false], "none": [],
    });
    client
        .replace(&Replace::new(
            &op,
            "systems",
            Graph::new().node("n", ["Thing"], sent.clone()),
        ))
        .await
        .unwrap();
    let found = client
        .search(&Search::new(&op, &w).destinations([&dest]).nodes(["Thing"]))
        .await
        .unwrap();
    assert_eq!(found.len(), 1, "{found:?}");
    let got = &found[0].hit.as_node().unwrap().attributes;
    let sent = sent.as_object().unwrap();
    // The same keys (an object's key order carries no meaning, and serde_json keeps
    // insertion order only when a dependency turns on `preserve_order`).
    let keys = |m: &serde_json::Map<String, serde_json::Value>| {
        let mut k: Vec<String> = m.keys().cloned().collect();
        k.sort();
        k
    };
    assert_eq!(got.as_object().map(keys), Some(keys(sent)));
    // Doubles travel back with 15 significant digits; everything else exactly.
    let close = |a: &serde_json::Value, b: &serde_json::Value| match (a.as_f64(), b.as_f64()) {
        (Some(x), Some(y)) if a.is_f64() && b.is_f64() => {
            x == y || (x - y).abs() <= 1e-14 * x.abs().max(y.abs())
        }
        _ => a == b,
    };
    for (key, want) in sent {
        let have = &got[key];
        let same = match (want, have) {
            (serde_json::Value::Array(x), serde_json::Value::Array(y)) => {
                x.len() == y.len() && x.iter().zip(y).all(|(a, b)| close(a, b))
            }
            _ => close(want, have),
        };
        assert!(same, "`{key}`: sent {want}, read back {have}");
    }
}
