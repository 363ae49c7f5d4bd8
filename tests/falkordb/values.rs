//! Parameters and replies against a real FalkorDB: every value round-trips, no input
//! can inject Cypher, and every reply value type parses. Mirrors
//! `test-trees/falkordb.md` (parameters, replies).

use crate::common;

use std::collections::BTreeMap;

use common::TestGraph;
use gralkor::Error;
use gralkor::falkordb::{Params, Value};
use proptest::prelude::*;

fn rt() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap()
}

/// Equality with FalkorDB's 15-significant-digit formatting of doubles in replies.
fn approx_eq(a: &Value, b: &Value) -> bool {
    match (a, b) {
        (Value::Float(x), Value::Float(y)) => {
            x == y || (x - y).abs() <= 1e-14 * x.abs().max(y.abs())
        }
        (Value::List(x), Value::List(y)) => {
            x.len() == y.len() && x.iter().zip(y).all(|(a, b)| approx_eq(a, b))
        }
        (Value::Map(x), Value::Map(y)) => {
            x.len() == y.len()
                && x.iter()
                    .zip(y)
                    .all(|((ka, a), (kb, b))| ka == kb && approx_eq(a, b))
        }
        _ => a == b,
    }
}

fn identifier() -> impl Strategy<Value = String> {
    "[A-Za-z_][A-Za-z0-9_]{0,12}"
}

fn normal_f64() -> impl Strategy<Value = f64> {
    any::<f64>().prop_filter("normal or zero", |f| f.is_normal() || *f == 0.0)
}

fn nul_free_string() -> impl Strategy<Value = String> {
    any::<String>().prop_map(|s| s.replace('\0', ""))
}

fn nested_value() -> impl Strategy<Value = Value> {
    let leaf = prop_oneof![
        Just(Value::Null),
        any::<bool>().prop_map(Value::Bool),
        any::<i64>().prop_map(Value::Int),
        normal_f64().prop_map(Value::Float),
        nul_free_string().prop_map(Value::String),
    ];
    leaf.prop_recursive(4, 48, 6, |inner| {
        prop_oneof![
            prop::collection::vec(inner.clone(), 0..6).prop_map(Value::List),
            prop::collection::btree_map(identifier(), inner, 0..6).prop_map(Value::Map),
        ]
    })
}

mod parameters {
    use super::*;

    proptest! {
        #![proptest_config(ProptestConfig { cases: 200, ..ProptestConfig::default() })]

        #[test]
        fn any_string_is_stored_and_read_back_unchanged(s in nul_free_string()) {
            rt().block_on(async {
                let g = TestGraph::new("strings").await;
                let res = g.db.query(&g.name, "CREATE (n:S {v: $s}) RETURN n.v AS v", &Params::new().set("s", s.clone())).await.unwrap();
                prop_assert_eq!(res.get(0, "v"), Some(&Value::String(s.clone())));
                let found = g.db.ro_query(&g.name, "MATCH (n:S) WHERE n.v = $s RETURN count(n) AS c", &Params::new().set("s", s.clone())).await.unwrap();
                prop_assert_eq!(found.get(0, "c"), Some(&Value::Int(1)));
                Ok(())
            })?;
        }

        #[test]
        fn any_integer_round_trips_exactly(i in any::<i64>()) {
            rt().block_on(async {
                let g = TestGraph::new("ints").await;
                let res = g.db.query(&g.name, "CREATE (n:I {v: $i}) RETURN n.v AS v", &Params::new().set("i", i)).await.unwrap();
                prop_assert_eq!(res.get(0, "v"), Some(&Value::Int(i)));
                Ok(())
            })?;
        }

        #[test]
        fn any_normal_float_is_stored_with_all_bits(f in normal_f64()) {
            rt().block_on(async {
                let g = TestGraph::new("floats").await;
                // Compare on the server, where the stored double has all 64 bits.
                let res = g.db.query(&g.name, "CREATE (n:F {v: $f}) WITH n RETURN n.v = $f AS same, n.v AS v", &Params::new().set("f", f)).await.unwrap();
                prop_assert_eq!(res.get(0, "same"), Some(&Value::Bool(true)));
                prop_assert!(approx_eq(res.get(0, "v").unwrap(), &Value::Float(f)));
                Ok(())
            })?;
        }

        #[test]
        fn any_f32_vector_is_stored_bit_for_bit(
            v in prop::collection::vec(any::<f32>().prop_filter("finite", |f| f.is_finite()), 1..48)
        ) {
            rt().block_on(async {
                let g = TestGraph::new("vectors").await;
                // Written in the shortest form of each f32; the server reads a double
                // and rounds it to a float, which must be the one sent.
                let res = g.db.query(&g.name, "CREATE (n:V {v: vecf32($v)}) RETURN n.v AS v", &Params::new().set("v", v.clone())).await.unwrap();
                let Some(Value::Vector(back)) = res.get(0, "v") else {
                    panic!("not a vector: {:?}", res.get(0, "v"))
                };
                let sent: Vec<u32> = v.iter().map(|x| x.to_bits()).collect();
                let got: Vec<u32> = back.iter().map(|x| x.to_bits()).collect();
                prop_assert_eq!(got, sent);
                Ok(())
            })?;
        }

        #[test]
        fn nested_lists_and_maps_round_trip(v in nested_value()) {
            rt().block_on(async {
                let g = TestGraph::new("nested").await;
                let res = g.db.ro_query(&g.name, "RETURN $v AS v", &Params::new().set("v", v.clone())).await.unwrap();
                let back = res.get(0, "v").unwrap();
                prop_assert!(approx_eq(back, &v), "sent {:?}, got {:?}", v, back);
                Ok(())
            })?;
        }

        #[test]
        fn no_string_can_change_the_query(s in "[\\\\'\"`;{}()\\[\\]/*\n\r\t -~]{0,40}") {
            rt().block_on(async {
                let g = TestGraph::new("inject").await;
                g.db.query(&g.name, "CREATE (:Sentinel)", &Params::new()).await.unwrap();
                let p = Params::new().set("s", s.clone());
                g.db.query(&g.name, "CREATE (:Row {v: $s})", &p).await.unwrap();
                let res = g.db.ro_query(&g.name, "MATCH (n) RETURN labels(n)[0] AS l, n.v AS v ORDER BY l", &Params::new()).await.unwrap();
                prop_assert_eq!(res.rows.len(), 2);
                prop_assert_eq!(res.get(0, "v"), Some(&Value::String(s.clone())));
                prop_assert_eq!(res.get(1, "l"), Some(&Value::String("Sentinel".into())));
                Ok(())
            })?;
        }
    }

    #[tokio::test]
    async fn classic_injection_strings_are_inert() {
        let g = TestGraph::new("classic").await;
        g.db.query(&g.name, "CREATE (:Sentinel)", &Params::new())
            .await
            .unwrap();
        let attacks = [
            "x'}) MATCH (n) DETACH DELETE n //",
            "x\\'}) MATCH (n) DETACH DELETE n //",
            "\\",
            "''",
            "\\'",
            "' RETURN 1 //",
            "\" RETURN 1 //",
            "x` MATCH (n) DELETE n",
            "\n}) MATCH (n) DETACH DELETE n\n",
            "it''s",
        ];
        for a in attacks {
            let res =
                g.db.query(
                    &g.name,
                    "CREATE (n:Row {v: $s}) RETURN n.v AS v",
                    &Params::new().set("s", a),
                )
                .await
                .unwrap();
            assert_eq!(res.get(0, "v"), Some(&Value::from(a)), "{a:?}");
        }
        let res =
            g.db.ro_query(
                &g.name,
                "MATCH (n:Sentinel) RETURN count(n) AS c",
                &Params::new(),
            )
            .await
            .unwrap();
        assert_eq!(res.get(0, "c"), Some(&Value::Int(1)));
        let res =
            g.db.ro_query(
                &g.name,
                "MATCH (n:Row) RETURN count(n) AS c",
                &Params::new(),
            )
            .await
            .unwrap();
        assert_eq!(res.get(0, "c"), Some(&Value::Int(attacks.len() as i64)));
    }

    #[tokio::test]
    async fn invalid_values_are_rejected_before_sending() {
        let g = TestGraph::new("invalid").await;
        let cases: Vec<(Params, &str)> = vec![
            (
                Params::new().set("s", "a\0b"),
                "`params.s` must not contain a NUL character",
            ),
            (
                Params::new().set("f", f64::NAN),
                "`params.f` must be a finite number",
            ),
            (
                Params::new().set("f", f64::NEG_INFINITY),
                "`params.f` must be a finite number",
            ),
            (
                Params::new().set("bad name", 1),
                "`params.bad name` must be an identifier",
            ),
            (
                Params::new().set("m", BTreeMap::from([("k-1".to_string(), Value::Int(1))])),
                "`params.m.k-1` must be an identifier",
            ),
            (
                Params::new().set("l", vec![Value::Int(1), Value::Float(f64::NAN)]),
                "`params.l[1]` must be a finite number",
            ),
        ];
        for (p, want) in cases {
            let err =
                g.db.query(&g.name, "CREATE (:Never)", &p)
                    .await
                    .unwrap_err();
            assert!(matches!(err, Error::InvalidInput { .. }), "{err:?}");
            assert!(
                err.to_string().contains(want),
                "{err} does not contain {want}"
            );
        }
        // Nothing was written: the graph does not even exist.
        assert!(!g.db.list_graphs().await.unwrap().contains(&g.name));
    }
}

mod replies {
    use super::*;

    #[tokio::test]
    async fn every_value_type_parses() {
        let g = TestGraph::new("types").await;
        g.db.query(
        &g.name,
        "CREATE (a:Person:Admin {name: 'Ann', age: 41, score: 1.5, ok: true, tags: ['x', 2], emb: vecf32([0.5, -1.0])})
                -[:KNOWS {since: 2020, w: 0.25}]->(b:Person {name: 'Bob'})",
        &Params::new(),
    )
    .await
    .unwrap();
        let res =
            g.db.ro_query(
                &g.name,
                "MATCH p = (a:Person {name: 'Ann'})-[e:KNOWS]->(b)
             RETURN null AS n, true AS t, 7 AS i, 2.5 AS f, 'é😀' AS s, [1, 'two', [3.0]] AS l,
                    {k: 1, nested: {z: null}} AS m, a, e, p, a.emb AS v,
                    point({latitude: 51.5, longitude: -0.12}) AS pt,
                    date('2024-01-02') AS d, localdatetime('2024-01-02T03:04:05') AS dt,
                    duration('P1D') AS du",
                &Params::new(),
            )
            .await
            .unwrap();
        assert_eq!(res.rows.len(), 1);
        assert_eq!(res.get(0, "n"), Some(&Value::Null));
        assert_eq!(res.get(0, "t"), Some(&Value::Bool(true)));
        assert_eq!(res.get(0, "i"), Some(&Value::Int(7)));
        assert_eq!(res.get(0, "f"), Some(&Value::Float(2.5)));
        assert_eq!(res.get(0, "s"), Some(&Value::from("é😀")));
        assert_eq!(
            res.get(0, "l"),
            Some(&Value::List(vec![
                Value::Int(1),
                Value::from("two"),
                Value::List(vec![Value::Float(3.0)])
            ]))
        );
        let m = res.get(0, "m").and_then(Value::as_map).unwrap();
        assert_eq!(m["k"], Value::Int(1));
        assert_eq!(m["nested"].as_map().unwrap()["z"], Value::Null);

        let a = res.get(0, "a").and_then(Value::as_node).unwrap();
        let mut labels = a.labels.clone();
        labels.sort();
        assert_eq!(labels, ["Admin", "Person"]);
        assert_eq!(a.properties["name"], Value::from("Ann"));
        assert_eq!(a.properties["age"], Value::Int(41));
        assert_eq!(a.properties["score"], Value::Float(1.5));
        assert_eq!(a.properties["ok"], Value::Bool(true));
        assert_eq!(
            a.properties["tags"],
            Value::List(vec![Value::from("x"), Value::Int(2)])
        );
        assert_eq!(a.properties["emb"], Value::Vector(vec![0.5, -1.0]));

        let e = res.get(0, "e").and_then(Value::as_edge).unwrap();
        assert_eq!(e.rel_type, "KNOWS");
        assert_eq!(e.src, a.id);
        assert_eq!(e.properties["since"], Value::Int(2020));
        assert_eq!(e.properties["w"], Value::Float(0.25));

        let Some(Value::Path(p)) = res.get(0, "p") else {
            panic!("not a path: {:?}", res.get(0, "p"))
        };
        assert_eq!(p.nodes.len(), 2);
        assert_eq!(p.edges.len(), 1);
        assert_eq!(p.nodes[1].properties["name"], Value::from("Bob"));
        assert_eq!(p.edges[0].dst, p.nodes[1].id);

        assert_eq!(res.get(0, "v"), Some(&Value::Vector(vec![0.5, -1.0])));
        // Points are stored as 32-bit floats.
        let Some(Value::Point {
            latitude,
            longitude,
        }) = res.get(0, "pt")
        else {
            panic!()
        };
        assert!((latitude - 51.5).abs() < 1e-5 && (longitude + 0.12).abs() < 1e-5);
        assert_eq!(res.get(0, "d"), Some(&Value::Date(1_704_153_600)));
        assert_eq!(res.get(0, "dt"), Some(&Value::DateTime(1_704_164_645)));
        assert_eq!(res.get(0, "du"), Some(&Value::Duration(86_400)));
    }

    #[tokio::test]
    async fn statistics_are_reported() {
        let g = TestGraph::new("stats").await;
        let res =
            g.db.query(
                &g.name,
                "CREATE (:A {x: 1})-[:R]->(:B {y: 2, z: 3})",
                &Params::new(),
            )
            .await
            .unwrap();
        assert!(res.columns.is_empty());
        assert_eq!(res.stats.nodes_created, 2);
        assert_eq!(res.stats.relationships_created, 1);
        assert_eq!(res.stats.properties_set, 3);
        assert_eq!(res.stats.labels_added, 2);
        let res =
            g.db.query(&g.name, "MATCH (n) DETACH DELETE n", &Params::new())
                .await
                .unwrap();
        assert_eq!(res.stats.nodes_deleted, 2);
        assert_eq!(res.stats.relationships_deleted, 1);
    }

    #[tokio::test]
    async fn schema_cache_refreshes_on_new_labels() {
        let g = TestGraph::new("schema").await;
        // Read once so the cache holds the schema of a graph with one label...
        g.db.query(&g.name, "CREATE (:First {a: 1})", &Params::new())
            .await
            .unwrap();
        let first =
            g.db.ro_query(&g.name, "MATCH (n) RETURN n", &Params::new())
                .await
                .unwrap();
        assert_eq!(first.rows.len(), 1);
        // ...then add labels, keys and types the cache has never seen.
        let res =
            g.db.query(
                &g.name,
                "CREATE (a:Second {b: 2})-[r:LINK {c: 3}]->(:Third) RETURN a, r",
                &Params::new(),
            )
            .await
            .unwrap();
        let a = res.get(0, "a").and_then(Value::as_node).unwrap();
        assert_eq!(a.labels, ["Second"]);
        assert_eq!(a.properties["b"], Value::Int(2));
        let r = res.get(0, "r").and_then(Value::as_edge).unwrap();
        assert_eq!(r.rel_type, "LINK");
        assert_eq!(r.properties["c"], Value::Int(3));
    }

    #[tokio::test]
    async fn server_errors_carry_the_message_but_not_parameter_values() {
        let g = TestGraph::new("errors").await;
        let secret = "hunter2-secret-value";
        let err =
            g.db.query(&g.name, "RETURN $s +", &Params::new().set("s", secret))
                .await
                .unwrap_err();
        let Error::Query { graph, message } = &err else {
            panic!("{err:?}")
        };
        assert_eq!(graph, &g.name);
        assert!(message.contains("Invalid input"), "{message}");
        assert!(!err.to_string().contains(secret), "{err}");
        assert!(!format!("{err:?}").contains(secret), "{err:?}");
        assert!(!err.is_retryable());

        let err =
            g.db.ro_query(&g.name, "CREATE (:Nope)", &Params::new())
                .await
                .unwrap_err();
        assert!(err.to_string().contains("read-only"), "{err}");
    }
}
