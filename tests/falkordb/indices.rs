//! Indices and the fulltext sanitiser against a real FalkorDB. Mirrors
//! `test-trees/falkordb.md` (indices, fulltext sanitiser).

use crate::common;

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

    fn batch() -> Vec<IndexSpec> {
        vec![
            IndexSpec::range_nodes("Entity", ["uuid", "name"]),
            IndexSpec::range_relationships("RELATES_TO", ["uuid"]),
            IndexSpec::fulltext_nodes("Entity", ["name", "summary"], DEFAULT_STOPWORDS),
            IndexSpec::vector_nodes("Entity", "emb", 4, Similarity::Cosine),
            IndexSpec::vector_relationships("RELATES_TO", "emb", 4, Similarity::Cosine),
        ]
    }

    #[tokio::test]
    async fn a_batch_creates_what_is_missing_and_is_operational_when_it_returns() {
        let g = TestGraph::new("idx-batch").await;
        let specs = batch();
        // One spec exists already, half of another.
        g.db.create_index(&g.name, &specs[0]).await.unwrap();
        g.db.create_index(
            &g.name,
            &IndexSpec::fulltext_nodes("Entity", ["name"], DEFAULT_STOPWORDS),
        )
        .await
        .unwrap();
        assert_eq!(g.db.create_indices(&g.name, &specs).await.unwrap(), 4);
        let listed = g.db.list_indices(&g.name).await.unwrap();
        assert!(listed.iter().all(|i| i.operational), "{listed:?}");
        // 2 range + 1 range + 2 fulltext fields + 2 vector.
        assert_eq!(listed.len(), 7, "{listed:?}");
        assert!(listed.iter().any(|i| i.property == "summary"
            && matches!(&i.kind, IndexKind::Fulltext { stopwords, .. } if stopwords.iter().any(|w| w == "the"))));
        assert_eq!(g.db.create_indices(&g.name, &specs).await.unwrap(), 0);
    }

    #[tokio::test]
    async fn a_new_graphs_indices_answer_right_after_the_batch() {
        let g = TestGraph::new("idx-fresh").await;
        g.db.create_indices(&g.name, &batch()).await.unwrap();
        g.db.query(
            &g.name,
            "CREATE (:Entity {uuid: 'u1', name: 'Dmitri', summary: 'lives in Porto', emb: vecf32([1.0, 0.0, 0.0, 0.0])})",
            &Params::new(),
        )
        .await
        .unwrap();
        // No wait of any kind between the write and the queries.
        let knn = g.db.ro_query(
            &g.name,
            "CALL db.idx.vector.queryNodes('Entity', 'emb', 1, vecf32([0.9, 0.1, 0.0, 0.0])) YIELD node RETURN node.uuid AS u",
            &Params::new(),
        )
        .await
        .unwrap();
        assert_eq!(knn.get(0, "u"), Some(&Value::from("u1")));
        let text = g.db.ro_query(
            &g.name,
            "CALL db.idx.fulltext.queryNodes('Entity', 'porto') YIELD node RETURN node.uuid AS u",
            &Params::new(),
        )
        .await
        .unwrap();
        assert_eq!(text.get(0, "u"), Some(&Value::from("u1")));
    }

    #[tokio::test]
    async fn concurrent_batches_on_a_new_graph_both_succeed() {
        let g = TestGraph::new("idx-race").await;
        let other = common::db().await;
        let specs = batch();
        let (a, b) = tokio::join!(
            g.db.create_indices(&g.name, &specs),
            other.create_indices(&g.name, &specs)
        );
        // Each counts what it knows it created (racing, that may be less than it did).
        let (a, b) = (a.unwrap(), b.unwrap());
        assert!(a <= specs.len() && b <= specs.len(), "{a}, {b}");
        let listed = g.db.list_indices(&g.name).await.unwrap();
        assert_eq!(listed.len(), 7, "{listed:?}");
        assert!(listed.iter().all(|i| i.operational));
    }

    #[tokio::test]
    async fn a_batch_with_an_invalid_spec_creates_nothing() {
        let g = TestGraph::new("idx-batch-bad").await;
        let mut specs = batch();
        specs.push(IndexSpec::range_nodes("Bad Label", ["x"]));
        let err = g.db.create_indices(&g.name, &specs).await.unwrap_err();
        assert!(
            err.to_string()
                .contains("`index.entity` must be an identifier"),
            "{err}"
        );
        assert!(!g.db.list_graphs().await.unwrap().contains(&g.name));
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

    /// Every stored word is found by an exact query of that word: ids and codes
    /// (letters and digits), plain words, and both right after they were written.
    #[tokio::test]
    async fn fulltext_finds_every_unique_token_it_stored() {
        let g = TestGraph::new("ft-unique").await;
        g.db.create_index(
            &g.name,
            &IndexSpec::fulltext_nodes("Entity", ["name", "summary"], DEFAULT_STOPWORDS),
        )
        .await
        .unwrap();
        let mut words = Vec::new();
        for i in 0..300u32 {
            let id = uuid::Uuid::new_v4().simple().to_string();
            let code = format!("zq{}", &id[..10]);
            let letters: String = id
                .bytes()
                .take(9)
                .map(|b| (b'a' + (b % 26)) as char)
                .collect();
            g.db.query(
                &g.name,
                "CREATE (:Entity {name: $n, summary: $s})",
                &Params::new()
                    .set("n", format!("note {i}"))
                    .set("s", format!("remember {code} and {letters} here")),
            )
            .await
            .unwrap();
            words.push(code);
            words.push(letters);
        }
        let mut missed = Vec::new();
        for w in &words {
            let q = fulltext_query(w, DEFAULT_STOPWORDS).unwrap();
            let found = g
                .db
                .ro_query(
                    &g.name,
                    "CALL db.idx.fulltext.queryNodes('Entity', $q) YIELD node RETURN count(node) AS c",
                    &Params::new().set("q", q.clone()),
                )
                .await
                .unwrap();
            if found.get(0, "c") != Some(&Value::from(1i64)) {
                missed.push((w.clone(), q, found.get(0, "c").cloned()));
            }
        }
        assert!(
            missed.is_empty(),
            "{} of {} missed: {missed:?}",
            missed.len(),
            words.len()
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

    /// A graph with the engine's kind of fulltext index on `Entity(name, summary)`, one
    /// entity whose name is `text` and one unrelated entity; the names of the entities
    /// that the query built from `text` finds, queried the way the engine queries.
    async fn found_by_its_own_text(text: &str) -> (Option<String>, Vec<String>) {
        let g = TestGraph::new("ft-self").await;
        g.db.create_index(
            &g.name,
            &IndexSpec::fulltext_nodes("Entity", ["name", "summary"], DEFAULT_STOPWORDS),
        )
        .await
        .unwrap();
        g.db.query(
            &g.name,
            "CREATE (:Entity {name: $text, summary: ''}), (:Entity {name: 'unrelated', summary: 'other words'})",
            &Params::new().set("text", text),
        )
        .await
        .unwrap();
        let q = fulltext_query(text, DEFAULT_STOPWORDS);
        let Some(query) = q.clone() else {
            return (None, Vec::new());
        };
        let found =
            g.db.ro_query(
                &g.name,
                "CALL db.idx.fulltext.queryNodes('Entity', $q) YIELD node RETURN node.name AS n",
                &Params::new().set("q", query),
            )
            .await
            .unwrap()
            .column_values("n")
            .filter_map(|v| v.as_str().map(str::to_owned))
            .collect();
        (q, found)
    }

    async fn assert_finds_itself(text: &str) {
        let (q, found) = found_by_its_own_text(text).await;
        assert_eq!(found, [text], "{text:?} searched as {q:?}");
    }

    /// Issue 10 item 9: the backslash escapes the next character and is dropped, so the
    /// index stores one term `backslash`.
    #[tokio::test]
    async fn a_backslash_inside_a_word_finds_itself() {
        assert_finds_itself("back\\slash").await;
    }

    /// Issue 10 item 9: a newline is a control character, not a separator; the index
    /// drops it and stores `line1line2`.
    #[tokio::test]
    async fn a_newline_inside_a_word_finds_itself() {
        assert_finds_itself("line1\nline2").await;
    }

    /// Issue 10 item 9: only ASCII letters are lowercased; the index stores `Ελληνικά`
    /// with its capital.
    #[tokio::test]
    async fn greek_with_a_capital_finds_itself() {
        assert_finds_itself("Ελληνικά").await;
    }

    /// Issue 10 item 9: U+202E (RIGHT-TO-LEFT OVERRIDE) is not a separator; the index
    /// stores it as part of the word.
    #[tokio::test]
    async fn text_starting_with_a_bidi_override_finds_itself() {
        assert_finds_itself("\u{202E}evil").await;
    }

    /// Every RediSearch special character, the backtick and the underscore.
    const SPECIALS: &str = ",.<>{}[]\"':;!@#$%^&*()-+=~|/\\`?_";
    /// Whitespace of every kind: only space and tab separate words in the index.
    const WHITESPACE: &[&str] = &[
        " ", "\t", "\n", "\r", "\u{b}", "\u{c}", "\u{a0}", "\u{2028}", "\u{3000}",
    ];
    const CONTROLS: &[&str] = &["\u{1}", "\u{1b}", "\u{7f}"];
    /// Pieces with no ASCII separator, control character or backslash in them: Greek,
    /// Cyrillic, CJK, emoji, combining marks, bidi and zero-width controls, digits.
    #[rustfmt::skip]
    const WORDISH: &[&str] = &[
        "Ελληνικά", "ΣΟΦΟΣ", "σοφός", "ς", "Москва", "ЁЖ", "東京", "大阪", "、", "😀", "🎉",
        "👩\u{200d}💻", "🇬🇷", "e\u{301}", "\u{308}", "\u{202e}", "\u{200f}", "\u{200e}",
        "\u{200b}", "\u{200d}", "\u{feff}", "Café", "ÆRØ", "straße", "İ", "ǅ", "007", "1e5",
        "inf", "user_id", "RUNNING", "runs", "_",
    ];
    /// Words with separators or escapes in them (a stored backslash before punctuation
    /// or a space, which no query can name, included), and stopwords.
    #[rustfmt::skip]
    const WORDS: &[&str] = &[
        "3.14", "O'Brien", "x-ray", "the", "THE", "and", "a", "it", "Alice", "back\\slash",
        "line1\nline2", "a\\-b", "\\\\", "\\ ", "\\\\\\-", "\\\\\\ ", "-inf",
    ];
    /// Repeated to make words around the index's 128-byte term limit.
    const LONG: &[&str] = &["x", "Q", "é", "東", "😀", "\\y", "\\-", "e\u{301}"];

    fn pick(set: &'static [&'static str]) -> impl Strategy<Value = String> {
        prop::sample::select(set).prop_map(str::to_owned)
    }

    fn hostile_text() -> impl Strategy<Value = String> {
        let piece = prop_oneof![
            4 => prop::sample::select(SPECIALS.chars().collect::<Vec<_>>()).prop_map(String::from),
            2 => pick(WHITESPACE),
            1 => pick(CONTROLS),
            4 => pick(WORDISH),
            2 => pick(WORDS),
            3 => "[a-zA-Z0-9]{1,8}",
            1 => (pick(LONG), 20..90usize).prop_map(|(p, n)| p.repeat(n)),
            1 => any::<char>().prop_filter("NUL is refused upstream", |c| *c != '\0').prop_map(String::from),
        ];
        prop::collection::vec(piece, 0..10).prop_map(|v| v.concat())
    }

    /// A word the index certainly stores: no separator, control character or backslash,
    /// at most 128 bytes, not a stopword.
    fn indexable_word() -> impl Strategy<Value = String> {
        prop::collection::vec(prop_oneof![pick(WORDISH), "[a-zA-Z0-9_]{1,6}"], 1..4)
            .prop_map(|v| v.concat())
            .prop_filter("not a stopword", |w| {
                !DEFAULT_STOPWORDS.contains(&w.to_ascii_lowercase().as_str())
            })
    }

    /// A document, and whether it certainly holds an indexable word: hostile text, or
    /// hostile text around a planted word (two spaces before it: a backslash ending the
    /// text before escapes only the first).
    fn document() -> impl Strategy<Value = (String, bool)> {
        prop_oneof![
            hostile_text().prop_map(|t| (t, false)),
            (hostile_text(), indexable_word(), hostile_text())
                .prop_map(|(a, w, b)| (format!("{a}  {w} {b}"), true)),
        ]
    }

    /// One graph for every case: a fulltext index on `Doc(text)` made the engine's way
    /// and a sentinel document that no generated query may find.
    fn shared_self_search_graph() -> &'static str {
        static NAME: std::sync::OnceLock<String> = std::sync::OnceLock::new();
        NAME.get_or_init(|| {
            rt().block_on(async {
                let g = TestGraph::new("ft-self-prop").await;
                g.db.create_index(
                    &g.name,
                    &IndexSpec::fulltext_nodes("Doc", ["text"], DEFAULT_STOPWORDS),
                )
                .await
                .unwrap();
                g.db.query(
                    &g.name,
                    "CREATE (:Doc {case: 'sentinel', i: -1, text: 'ʬsentinelʬ'})",
                    &Params::new(),
                )
                .await
                .unwrap();
                let name = g.name.clone();
                std::mem::forget(g); // keep the graph: the cases use it
                name
            })
        })
    }

    /// Stores the batch, then runs, in one statement, the query built from each
    /// document's text and each of its terms alone; every one must find its document
    /// and never the sentinel.
    async fn check_self_search(graph: &str, batch: &[(String, bool)]) -> Result<(), TestCaseError> {
        let db = common::db().await;
        let case = uuid::Uuid::new_v4().to_string();
        let docs: Vec<serde_json::Value> = batch
            .iter()
            .enumerate()
            .map(|(i, (text, _))| serde_json::json!({"i": i, "text": text}))
            .collect();
        db.query(
            graph,
            "UNWIND $docs AS d CREATE (:Doc {case: $case, i: d.i, text: d.text})",
            &Params::new()
                .set("docs", Value::from(serde_json::Value::from(docs)))
                .set("case", case.as_str()),
        )
        .await
        .map_err(|e| TestCaseError::fail(format!("storing {batch:?}: {e}")))?;
        let mut probes: Vec<(usize, String)> = Vec::new();
        for (i, (text, planted)) in batch.iter().enumerate() {
            match fulltext_query(text, DEFAULT_STOPWORDS) {
                None => prop_assert!(!planted, "{text:?} holds a word but gets no query"),
                Some(q) => {
                    probes.extend(q.split(" | ").map(|t| (i, t.to_owned())));
                    probes.push((i, q));
                }
            }
        }
        if probes.is_empty() {
            return Ok(());
        }
        let qs: Vec<serde_json::Value> = probes
            .iter()
            .enumerate()
            .map(|(k, (_, q))| serde_json::json!({"k": k, "q": q}))
            .collect();
        let res = db
            .ro_query(
                graph,
                "UNWIND $qs AS e
                 CALL db.idx.fulltext.queryNodes('Doc', e.q) YIELD node
                 WITH e, node WHERE toString(node.case) IN [$case, 'sentinel']
                 RETURN e.k AS k, collect(node.i) AS found",
                &Params::new()
                    .set("qs", Value::from(serde_json::Value::from(qs)))
                    .set("case", case.as_str()),
            )
            .await
            .map_err(|e| TestCaseError::fail(format!("{probes:?}: {e}")))?;
        let mut found = vec![Vec::new(); probes.len()];
        for row in &res.rows {
            let k = row[0].as_int().unwrap() as usize;
            found[k] = row[1]
                .as_list()
                .unwrap()
                .iter()
                .filter_map(Value::as_int)
                .collect();
        }
        for ((i, q), found) in probes.iter().zip(&found) {
            prop_assert!(
                found.contains(&(*i as i64)),
                "{:?} is not found by {q:?} (found {found:?})",
                batch[*i].0
            );
            prop_assert!(!found.contains(&-1), "{q:?} finds the sentinel");
        }
        Ok(())
    }

    proptest! {
        #![proptest_config(ProptestConfig { cases: 192, ..ProptestConfig::default() })]

        /// Issue 10 item 9: the query built from a document's text finds it, through a
        /// real index; each of its terms alone finds it too (the terms are ones the
        /// index stored); no query errors or matches everything.
        #[test]
        fn every_document_is_found_by_its_own_text(
            batch in prop::collection::vec(document(), 1..6)
        ) {
            let graph = shared_self_search_graph();
            rt().block_on(check_self_search(graph, &batch))?;
        }
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
