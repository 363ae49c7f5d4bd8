//! Indices and the fulltext sanitiser against a real FalkorDB. Mirrors
//! `test-trees/falkordb.md` (indices, fulltext sanitiser).

mod common;

use common::TestGraph;
use gralkor::falkordb::{
    DEFAULT_STOPWORDS, IndexEntity, IndexKind, IndexSpec, Params, Similarity, Value, fulltext_query,
};
use proptest::prelude::*;

fn rt() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap()
}

mod indices {
    use super::*;

    #[tokio::test]
    async fn creation_is_idempotent_for_every_kind() {
        let g = TestGraph::new("idx").await;
        let specs = [
            IndexSpec::range_nodes("Entity", ["uuid", "name"]),
            IndexSpec::range_relationships("RELATES_TO", ["uuid"]),
            IndexSpec::fulltext_nodes("Entity", ["name", "summary"], DEFAULT_STOPWORDS),
            IndexSpec::fulltext_relationships("RELATES_TO", ["fact"], DEFAULT_STOPWORDS),
            IndexSpec::vector_nodes("Entity", "emb", 4, Similarity::Cosine),
            IndexSpec::vector_relationships("RELATES_TO", "emb", 4, Similarity::Cosine),
        ];
        for spec in &specs {
            assert!(
                g.db.create_index(&g.name, spec).await.unwrap(),
                "{spec:?} created"
            );
        }
        for spec in &specs {
            assert!(
                !g.db.create_index(&g.name, spec).await.unwrap(),
                "{spec:?} created twice"
            );
        }
        let listed = g.db.list_indices(&g.name).await.unwrap();
        assert!(listed.iter().all(|i| i.operational));
        let has = |entity: &IndexEntity, prop: &str, pred: &dyn Fn(&IndexKind) -> bool| {
            listed
                .iter()
                .any(|i| &i.entity == entity && i.property == prop && pred(&i.kind))
        };
        let entity = IndexEntity::Node("Entity".into());
        let rel = IndexEntity::Relationship("RELATES_TO".into());
        assert!(has(&entity, "uuid", &|k| *k == IndexKind::Range));
        assert!(has(&entity, "name", &|k| *k == IndexKind::Range));
        assert!(has(&rel, "uuid", &|k| *k == IndexKind::Range));
        assert!(has(
            &entity,
            "summary",
            &|k| matches!(k, IndexKind::Fulltext { stopwords, .. } if stopwords.iter().any(|w| w == "the"))
        ));
        assert!(has(&rel, "fact", &|k| matches!(
            k,
            IndexKind::Fulltext { .. }
        )));
        assert!(has(&entity, "emb", &|k| *k
            == IndexKind::Vector {
                dimension: 4,
                similarity: Similarity::Cosine
            }));
        assert!(has(&rel, "emb", &|k| matches!(
            k,
            IndexKind::Vector { dimension: 4, .. }
        )));
    }

    #[tokio::test]
    async fn invalid_specs_are_rejected_before_anything_is_created() {
        let g = TestGraph::new("idx-bad").await;
        let cases = [
            (
                IndexSpec::range_nodes("Bad Label", ["x"]),
                "`index.entity` must be an identifier",
            ),
            (
                IndexSpec::range_nodes("L", ["x) DELETE n"]),
                "`index.properties` must be an identifier",
            ),
            (
                IndexSpec::range_nodes("L", Vec::<String>::new()),
                "`index.properties` must name at least one",
            ),
            (
                IndexSpec::vector_nodes("L", "e", 0, Similarity::Cosine),
                "`index.dimension` must be between",
            ),
        ];
        for (spec, want) in cases {
            let err = g.db.create_index(&g.name, &spec).await.unwrap_err();
            assert!(err.to_string().contains(want), "{err}");
        }
        assert!(!g.db.list_graphs().await.unwrap().contains(&g.name));
    }

    #[tokio::test]
    async fn vector_knn_goes_through_the_index() {
        let g = TestGraph::new("knn").await;
        g.db.create_index(
            &g.name,
            &IndexSpec::vector_nodes("Doc", "emb", 3, Similarity::Cosine),
        )
        .await
        .unwrap();
        let stmts: Vec<(String, Params)> = (0..200)
            .map(|i| {
                let angle = i as f32 * 0.01;
                (
                    "CREATE (:Doc {i: $i, emb: vecf32($v)})".to_string(),
                    Params::new()
                        .set("i", i)
                        .set("v", vec![angle.cos(), angle.sin(), 0.0]),
                )
            })
            .collect();
        g.db.pipeline(&g.name, &stmts).await.unwrap();
        // Nearest to angle 1.0 rad are docs 100, 99/101, 98/102.
        let q = vec![1.0f32.cos(), 1.0f32.sin(), 0.0];
        let res =
            g.db.ro_query(
                &g.name,
                "CALL db.idx.vector.queryNodes('Doc', 'emb', 5, vecf32($q)) YIELD node, score
                 RETURN node.i AS i, score ORDER BY score",
                &Params::new().set("q", q),
            )
            .await
            .unwrap();
        let ids: Vec<i64> = res.column_values("i").filter_map(Value::as_int).collect();
        assert_eq!(ids.len(), 5);
        assert_eq!(ids[0], 100);
        let mut sorted = ids.clone();
        sorted.sort();
        assert_eq!(sorted, [98, 99, 100, 101, 102]);
        let scores: Vec<f64> = res
            .column_values("score")
            .filter_map(Value::as_f64)
            .collect();
        assert!(
            scores[0] < 1e-4,
            "cosine distance of the exact match is ~0: {scores:?}"
        );
    }

    #[tokio::test]
    async fn fulltext_query_on_nodes_and_relationships() {
        let g = TestGraph::new("ft").await;
        g.db.create_index(
            &g.name,
            &IndexSpec::fulltext_nodes("Entity", ["name", "summary"], DEFAULT_STOPWORDS),
        )
        .await
        .unwrap();
        g.db.create_index(
            &g.name,
            &IndexSpec::fulltext_relationships("RELATES_TO", ["fact"], DEFAULT_STOPWORDS),
        )
        .await
        .unwrap();
        g.db.query(
            &g.name,
            "CREATE (:Entity {name: 'Alice Smith', summary: 'works on user_id migration'})
                    -[:RELATES_TO {fact: 'Alice mentors Bob in Rust'}]->(:Entity {name: 'Bob', summary: 'new hire'})",
            &Params::new(),
        )
        .await
        .unwrap();
        let search = |text: &str| {
            let q = fulltext_query(text, DEFAULT_STOPWORDS).unwrap();
            let db = g.db.clone();
            let name = g.name.clone();
            async move {
                db.ro_query(
                    &name,
                    "CALL db.idx.fulltext.queryNodes('Entity', $q) YIELD node RETURN node.name AS n ORDER BY n",
                    &Params::new().set("q", q),
                )
                .await
                .unwrap()
                .column_values("n")
                .filter_map(|v| v.as_str().map(str::to_owned))
                .collect::<Vec<_>>()
            }
        };
        assert_eq!(search("who is alice?").await, ["Alice Smith"]);
        assert_eq!(search("the user_id").await, ["Alice Smith"]);
        assert_eq!(search("bob-hire").await, ["Bob"]);
        let rels = g
            .db
            .ro_query(
                &g.name,
                "CALL db.idx.fulltext.queryRelationships('RELATES_TO', $q) YIELD relationship RETURN relationship.fact AS f",
                &Params::new().set("q", fulltext_query("mentors/rust", DEFAULT_STOPWORDS).unwrap()),
            )
            .await
            .unwrap();
        assert_eq!(
            rels.get(0, "f"),
            Some(&Value::from("Alice mentors Bob in Rust"))
        );
    }
}

mod fulltext_sanitiser {
    use super::*;

    /// Inputs from Graphiti's issue tracker that broke RediSearch queries.
    const REGRESSIONS: &[&str] = &[
        "c0ffee00-1234-5678-9abc-def012345678", // #1269 #1483 #1660: '-' read as NOT
        "path/to/file",
        "back\\slash",
        "a | b", // #1144 #1151
        "`code`",
        "the of and", // #1475: backticks, stopwords only
        "_",
        "a \\_ b",
        "snake_case", // #1820 #1465
        "50%",
        "*",
        "@name:x",
        "\"quoted\"",
        "(x) [y] {z}",
        "~fuzzy",
        "😀🎉",
        "",
    ];

    async fn check(
        db: &gralkor::falkordb::FalkorDb,
        graph: &str,
        text: &str,
    ) -> Result<(), String> {
        let Some(q) = fulltext_query(text, DEFAULT_STOPWORDS) else {
            return Ok(());
        };
        for proc in [
            "db.idx.fulltext.queryNodes('Entity', $q) YIELD node RETURN count(node) AS c",
            "db.idx.fulltext.queryRelationships('RELATES_TO', $q) YIELD relationship RETURN count(relationship) AS c",
        ] {
            db.ro_query(
                graph,
                &format!("CALL {proc}"),
                &Params::new().set("q", q.clone()),
            )
            .await
            .map_err(|e| format!("{text:?} -> {q:?}: {e}"))?;
        }
        Ok(())
    }

    async fn indexed_graph(tag: &str) -> TestGraph {
        let g = TestGraph::new(tag).await;
        g.db.create_index(
            &g.name,
            &IndexSpec::fulltext_nodes("Entity", ["name"], DEFAULT_STOPWORDS),
        )
        .await
        .unwrap();
        g.db.create_index(
            &g.name,
            &IndexSpec::fulltext_relationships("RELATES_TO", ["fact"], DEFAULT_STOPWORDS),
        )
        .await
        .unwrap();
        g.db.query(
            &g.name,
            "CREATE (:Entity {name: 'snake_case c0ffee00'})-[:RELATES_TO {fact: 'x'}]->(:Entity)",
            &Params::new(),
        )
        .await
        .unwrap();
        g
    }

    #[tokio::test]
    async fn graphiti_issue_inputs_never_error() {
        let g = indexed_graph("ft-regress").await;
        for text in REGRESSIONS {
            check(&g.db, &g.name, text).await.unwrap();
        }
        let long = "word-".repeat(5000);
        check(&g.db, &g.name, &long).await.unwrap();
    }

    /// One indexed graph shared by every case of the property test (creating indices
    /// costs an AOF rewrite each); it lives as long as the test binary's server.
    fn shared_indexed_graph() -> &'static str {
        static NAME: std::sync::OnceLock<String> = std::sync::OnceLock::new();
        NAME.get_or_init(|| {
            rt().block_on(async {
                let g = indexed_graph("ft-prop").await;
                let name = g.name.clone();
                std::mem::forget(g); // keep the graph: the cases read it
                name
            })
        })
    }

    proptest! {
        #![proptest_config(ProptestConfig { cases: 300, ..ProptestConfig::default() })]

        #[test]
        fn no_input_yields_a_syntax_error(text in prop_oneof![
            any::<String>(),
            "[-_/\\\\|`%*@~'\"(){}\\[\\]:;!#$^&+=<>?,. a-z0-9]{0,60}",
        ]) {
            let graph = shared_indexed_graph();
            rt().block_on(async {
                let db = common::db().await;
                check(&db, graph, &text).await.map_err(TestCaseError::fail)
            })?;
        }
    }
}
