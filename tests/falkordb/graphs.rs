//! Graph identity, isolation, listing, deletion and pipelining. Mirrors
//! `test-trees/falkordb.md` (graphs, pipelines).

use crate::common;

use common::TestGraph;
use gralkor::Error;
use gralkor::falkordb::{Params, Value, physical_graph_name};

mod graphs {
    use super::*;

    #[tokio::test]
    async fn any_utf8_id_names_its_own_graph_listed_by_its_logical_id() {
        let g = TestGraph::new("ids").await;
        let ids = [
            format!("{}:é 😀", g.name),
            format!("{}:Global", g.name),
            format!("{}:global", g.name),
        ];
        for (i, id) in ids.iter().enumerate() {
            g.db.query(id, "CREATE (:N {i: $i})", &Params::new().set("i", i as i64))
                .await
                .unwrap();
        }
        let listed = g.db.list_graphs().await.unwrap();
        for id in &ids {
            assert!(listed.contains(id), "{id} listed");
        }
        // Case and Unicode matter: each id is its own graph.
        for (i, id) in ids.iter().enumerate() {
            let res =
                g.db.ro_query(id, "MATCH (n:N) RETURN collect(n.i) AS is", &Params::new())
                    .await
                    .unwrap();
            assert_eq!(
                res.get(0, "is"),
                Some(&Value::List(vec![Value::Int(i as i64)])),
                "{id}"
            );
        }
        for id in &ids {
            assert!(g.db.delete_graph(id).await.unwrap());
            assert!(
                !g.db.delete_graph(id).await.unwrap(),
                "deleting twice reports absence"
            );
        }
        let listed = g.db.list_graphs().await.unwrap();
        assert!(ids.iter().all(|id| !listed.contains(id)));
        assert_eq!(physical_graph_name("é").unwrap(), "g_c3a9");
    }

    #[tokio::test]
    async fn blank_graph_ids_are_rejected() {
        let db = common::db().await;
        for blank in ["", " ", "\t\n"] {
            let err = db
                .query(blank, "RETURN 1", &Params::new())
                .await
                .unwrap_err();
            assert_eq!(err.to_string(), "invalid input: `graph` must not be blank");
        }
    }

    #[tokio::test]
    async fn reading_a_graph_that_does_not_exist_sees_an_empty_graph() {
        let g = TestGraph::new("missing").await;
        let res =
            g.db.ro_query(&g.name, "MATCH (n) RETURN count(n) AS c", &Params::new())
                .await
                .unwrap();
        assert_eq!(res.get(0, "c"), Some(&Value::Int(0)));
        assert!(
            !g.db.list_graphs().await.unwrap().contains(&g.name),
            "a read creates nothing"
        );
    }

    #[tokio::test]
    async fn concurrent_clones_writing_to_different_graphs_never_mix() {
        // Graphiti #1331/#1676: a shared driver mutated per group leaked writes across
        // groups. Here the graph is an argument of every call.
        let g = TestGraph::new("mix").await;
        let names: Vec<String> = (0..8).map(|i| format!("{}:{i}", g.name)).collect();
        let mut tasks = Vec::new();
        for (i, name) in names.iter().cloned().enumerate() {
            let db = g.db.clone();
            tasks.push(tokio::spawn(async move {
                for j in 0..25 {
                    db.query(
                        &name,
                        "CREATE (:W {owner: $o, j: $j})",
                        &Params::new().set("o", i as i64).set("j", j),
                    )
                    .await
                    .unwrap();
                }
            }));
        }
        for t in tasks {
            t.await.unwrap();
        }
        for (i, name) in names.iter().enumerate() {
            let res =
                g.db.ro_query(
                    name,
                    "MATCH (w:W) RETURN count(w) AS c, collect(DISTINCT w.owner) AS owners",
                    &Params::new(),
                )
                .await
                .unwrap();
            assert_eq!(res.get(0, "c"), Some(&Value::Int(25)));
            assert_eq!(
                res.get(0, "owners"),
                Some(&Value::List(vec![Value::Int(i as i64)]))
            );
            g.db.delete_graph(name).await.unwrap();
        }
    }
}

mod server_info {
    use super::*;

    #[tokio::test]
    async fn the_server_reports_its_versions_and_memory() {
        let g = TestGraph::new("server-info").await;
        let info = g.db.server_info().await.unwrap();
        let redis = info.redis_version.clone().expect("redis_version");
        assert!(redis.split('.').count() >= 2, "{info:?}");
        let falkordb = info
            .falkordb_version
            .clone()
            .expect("the graph module's version");
        let parts: Vec<u32> = falkordb.split('.').map(|p| p.parse().unwrap()).collect();
        assert_eq!(parts.len(), 3, "{info:?}");
        assert!(parts[0] >= 4, "{info:?}");
        assert!(info.used_memory_bytes.unwrap_or(0) > 0, "{info:?}");
        assert!(info.max_memory_bytes.is_some(), "{info:?}");
    }
}

mod pipelines {
    use super::*;

    #[tokio::test]
    async fn a_read_does_not_queue_behind_a_write_pipeline() {
        // The server runs one command of a connection at a time; were reads sent on the
        // writes' connection, each would wait for the whole pipeline.
        const N: i64 = 5000;
        let g = TestGraph::new("pipe-hol").await;
        g.db.query(&g.name, "CREATE (:P {i: -1})", &Params::new())
            .await
            .unwrap();
        let stmts: Vec<(String, Params)> = (0..N)
            .map(|i| ("CREATE (:P {i: $i})".to_string(), Params::new().set("i", i)))
            .collect();
        let writer = tokio::spawn({
            let (db, name) = (g.db.clone(), g.name.clone());
            async move { db.pipeline(&name, &stmts).await.map(|r| r.len()) }
        });
        let count = || async {
            g.db.ro_query(&g.name, "MATCH (n:P) RETURN count(n) AS c", &Params::new())
                .await
                .unwrap()
                .get(0, "c")
                .and_then(Value::as_int)
                .unwrap()
        };
        // Polled until the pipeline has begun; bounded by its own end.
        let mut seen = count().await;
        while seen == 1 && !writer.is_finished() {
            seen = count().await;
        }
        assert!(
            (2..=N).contains(&seen),
            "a read during the pipeline saw {} of {N} statements applied",
            seen - 1
        );
        assert_eq!(writer.await.unwrap().unwrap(), N as usize);
        assert_eq!(count().await, N + 1);
    }

    #[tokio::test]
    async fn many_statements_run_in_order_in_one_round_trip() {
        let g = TestGraph::new("pipe").await;
        let mut stmts: Vec<(String, Params)> = (0..300)
            .map(|i| {
                (
                    "MERGE (n:P {i: $i}) RETURN n.i AS i".to_string(),
                    Params::new().set("i", i),
                )
            })
            .collect();
        stmts.push((
            "MATCH (n:P) RETURN count(n) AS c".to_string(),
            Params::new(),
        ));
        let results = g.db.pipeline(&g.name, &stmts).await.unwrap();
        assert_eq!(results.len(), 301);
        assert_eq!(results[42].get(0, "i"), Some(&Value::Int(42)));
        assert_eq!(
            results[300].get(0, "c"),
            Some(&Value::Int(300)),
            "later statements see earlier ones"
        );
        // Idempotent MERGE: running it again creates nothing.
        let again = g.db.pipeline(&g.name, &stmts).await.unwrap();
        assert_eq!(again[300].get(0, "c"), Some(&Value::Int(300)));
        assert!(again[..300].iter().all(|r| r.stats.nodes_created == 0));
    }

    #[tokio::test]
    async fn a_failing_statement_is_named_and_earlier_ones_stay_applied() {
        let g = TestGraph::new("pipe-err").await;
        let stmts = vec![
            ("CREATE (:Ok)".to_string(), Params::new()),
            (
                "RETURN $x +".to_string(),
                Params::new().set("x", "secret-param"),
            ),
            ("CREATE (:After)".to_string(), Params::new()),
        ];
        let err = g.db.pipeline(&g.name, &stmts).await.unwrap_err();
        let Error::Query { message, .. } = &err else {
            panic!("{err:?}")
        };
        assert!(message.starts_with("statement 1:"), "{message}");
        assert!(!message.contains("secret-param"));
        let res =
            g.db.ro_query(
                &g.name,
                "MATCH (n) RETURN labels(n)[0] AS l ORDER BY l",
                &Params::new(),
            )
            .await
            .unwrap();
        let labels: Vec<&str> = res.column_values("l").filter_map(Value::as_str).collect();
        assert_eq!(labels, ["After", "Ok"], "a pipeline is not a transaction");
    }

    #[tokio::test]
    async fn invalid_parameters_reject_the_whole_pipeline_before_sending() {
        let g = TestGraph::new("pipe-invalid").await;
        let stmts = vec![
            ("CREATE (:Ok)".to_string(), Params::new()),
            (
                "CREATE (:Bad {v: $v})".to_string(),
                Params::new().set("v", f64::NAN),
            ),
        ];
        let err = g.db.pipeline(&g.name, &stmts).await.unwrap_err();
        assert!(
            err.to_string()
                .contains("`statements[1].params.v` must be a finite number"),
            "{err}"
        );
        assert!(
            !g.db.list_graphs().await.unwrap().contains(&g.name),
            "nothing was written"
        );
    }
}
