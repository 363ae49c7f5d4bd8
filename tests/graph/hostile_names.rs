//! Names that FalkorDB 4.16 crashes on — stopwords, and the hostile alphabet — driven
//! through every engine operation against this binary's own real server, which must
//! never restart (test-trees/graph-store.md, "hostile names").

#[path = "../common/mod.rs"]
mod common;

use std::collections::BTreeSet;
use std::sync::Arc;

use common::TestGraph;
use common::graph::t;
use common::ingest::{Rules, World, extraction};
use gralkor::falkordb::{DEFAULT_STOPWORDS, Params, Value};
use gralkor::graph::search::{
    self, COMBINED_HYBRID_SEARCH_RRF, Methods, RerankerKind, ScopeConfig, SearchConfig,
    SearchFilters, SearchRequest,
};
use gralkor::graph::{AddEpisode, CommunityOptions, OutcomeStatus, SourceKind};
use proptest::prelude::*;
use proptest::test_runner::{Config as ProptestConfig, TestRunner};
use uuid::Uuid;

fn msg(content: &str, when: &str) -> AddEpisode {
    AddEpisode::new(content, SourceKind::Message, t(when)).source_description("chat")
}

/// The server's identity: a crash shows as a new pid or a restart count.
fn server_state() -> (Option<u32>, u64) {
    (common::server().pid(), common::server().restarts())
}

async fn count(g: &TestGraph, query: &str, params: Params) -> i64 {
    let res = g.db.ro_query(&g.name, query, &params).await.unwrap();
    res.get(0, "n").and_then(Value::as_int).unwrap()
}

#[tokio::test]
async fn a_user_named_will_moving_to_porto_is_stored_and_the_server_stays_up() {
    let before = server_state();
    let g = TestGraph::new("hostile-will").await;
    let w = World::new(&g.db, Rules::default());
    w.rules.extraction(
        "I moved to Porto",
        extraction(
            &[("Will", 0), ("Porto", 0)],
            &[(
                "Will",
                "moved to",
                "Porto",
                "Will moved to Porto.",
                None,
                None,
            )],
        ),
    );
    w.rules.extraction(
        "IT: hello",
        extraction(
            &[
                ("IT", 0),
                ("This", 0),
                ("No", 0),
                ("Not", 0),
                ("A", 0),
                ("Then", 0),
            ],
            &[("IT", "is a", "This", "IT is a This.", None, None)],
        ),
    );
    let one = w
        .engine
        .add_episode(
            &g.name,
            msg("Will: I moved to Porto.", "2024-05-01T10:00:00Z"),
        )
        .await
        .unwrap();
    assert_eq!(one.status, OutcomeStatus::Completed);
    let two = w
        .engine
        .add_episode(&g.name, msg("IT: hello", "2024-05-02T10:00:00Z"))
        .await
        .unwrap();
    assert_eq!(two.status, OutcomeStatus::Completed);
    assert_eq!(two.entities.len(), 6);
    assert_eq!(server_state(), before, "the server crashed");
    for name in ["will", "porto", "it", "this", "no", "not", "a", "then"] {
        let n = count(
            &g,
            "MATCH (n:Entity {name_key: $k}) RETURN count(n) AS n",
            Params::new().set("k", name),
        )
        .await;
        assert_eq!(n, 1, "{name}");
    }
    // A filter naming a stopword relation type (stored `IS_A`; the index folds it to
    // the stopwords `is` and `a`) answers too.
    let req = SearchRequest::new("This", COMBINED_HYBRID_SEARCH_RRF).filters(SearchFilters {
        fact_types: vec!["IS_A".into(), "no".into(), "A".into()],
        ..SearchFilters::default()
    });
    let found = search::search(&g.db, &g.name, &req, Some(&w.embedder), None)
        .await
        .unwrap();
    assert_eq!(found.facts.len(), 1);
    assert_eq!(found.facts[0].fact.fact, "IT is a This.");
    assert_eq!(server_state(), before, "the server crashed");
}

/// Stopwords in three cases, and strings that break naive tokenisers or escapers.
fn hostile_pool() -> Vec<String> {
    let mut pool: Vec<String> = Vec::new();
    for w in DEFAULT_STOPWORDS {
        pool.push((*w).to_owned());
        pool.push(w.to_uppercase());
        let mut c = w.chars();
        if let Some(first) = c.next() {
            pool.push(first.to_uppercase().chain(c).collect());
        }
    }
    for s in [
        "Will",
        "IT",
        "No.",
        "a-b",
        "a b",
        "the the",
        "'",
        "\"",
        "\\",
        "O'Hara",
        "%",
        "*",
        "@name",
        "{x}",
        "[a]",
        "a|b",
        "-not",
        "~the",
        "Ελληνικά",
        "東京",
        "🙂",
        "\u{202E}abc",
        "a\nb",
        "a\tb",
        "$v",
        "`x`",
        "x') OR 1=1 //",
        "a:b",
        "(a)",
        "a,the",
        "ß",
        "İ",
        "ǅ",
        "e\u{301}",
        "\u{200B}",
        "0",
        "3.14",
        "_",
        "__init__",
        "a.b.c",
        "NULL",
        "true",
    ] {
        pool.push(s.to_owned());
    }
    pool
}

fn name_key(s: &str) -> String {
    gralkor::graph::dedup::normalize_name(s)
}

/// One case: three distinct names and two relation types from the pool.
fn case() -> impl Strategy<Value = (Vec<String>, Vec<String>)> {
    let pool = hostile_pool();
    (
        proptest::sample::subsequence(pool.clone(), 3).prop_shuffle(),
        proptest::sample::subsequence(pool, 2).prop_shuffle(),
    )
        .prop_filter("names must be distinct and non-blank", |(names, _)| {
            let keys: BTreeSet<String> = names.iter().map(|n| name_key(n)).collect();
            keys.len() == 3 && keys.iter().all(|k| !k.is_empty())
        })
}

#[test]
fn every_engine_operation_survives_hostile_names() {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let before = server_state();
    let mut runner = TestRunner::new(ProptestConfig {
        cases: 48,
        failure_persistence: None,
        ..ProptestConfig::default()
    });
    runner
        .run(&case(), |(names, relations)| {
            rt.block_on(one_case(&names, &relations));
            prop_assert_eq!(server_state(), before, "the server crashed");
            Ok(())
        })
        .unwrap();
}

/// Ingests two episodes naming `names` (the second re-mentions the first name and
/// resolves it), searches with every filter, builds communities and removes the first
/// episode; each step must succeed.
async fn one_case(names: &[String], relations: &[String]) {
    let (a, b, c) = (&names[0], &names[1], &names[2]);
    let g = TestGraph::new("hostile-prop").await;
    let rules = Rules {
        same_entity: Some(Arc::new(|new, old| name_key(new) == name_key(old))),
        ..Rules::default()
    };
    let w = World::new(&g.db, rules);
    let tag = Uuid::new_v4().simple().to_string();
    let (one_tag, two_tag) = (format!("one-{tag}"), format!("two-{tag}"));
    w.rules.extraction(
        &one_tag,
        extraction(
            &[(a, 0), (b, 0)],
            &[(
                a,
                &relations[0],
                b,
                &format!("{a} {} {b}, said once", relations[0]),
                None,
                None,
            )],
        ),
    );
    w.rules.extraction(
        &two_tag,
        extraction(
            &[(a, 0), (c, 0)],
            &[(
                c,
                &relations[1],
                a,
                &format!("{c} {} {a}, said twice", relations[1]),
                None,
                None,
            )],
        ),
    );
    let one = w
        .engine
        .add_episode(
            &g.name,
            msg(&format!("{a}: {b} {one_tag}"), "2024-01-01T00:00:00Z"),
        )
        .await
        .unwrap_or_else(|e| panic!("first episode {names:?}: {e}"));
    assert_eq!(one.status, OutcomeStatus::Completed, "{names:?}");
    let two = w
        .engine
        .add_episode(
            &g.name,
            msg(&format!("{c}: {a} {two_tag}"), "2024-01-02T00:00:00Z"),
        )
        .await
        .unwrap_or_else(|e| panic!("second episode {names:?}: {e}"));
    assert_eq!(two.status, OutcomeStatus::Completed, "{names:?}");
    let first_a = one.entities.iter().find(|e| e.name == *a).unwrap().uuid;
    let second_a = two.entities.iter().find(|e| e.name == *a).unwrap().uuid;
    assert_eq!(first_a, second_a, "{a:?} is one entity across episodes");

    let fact_types: Vec<String> = one
        .facts
        .iter()
        .chain(&two.facts)
        .map(|f| f.name.clone())
        .chain(names.iter().cloned())
        .chain(relations.iter().cloned())
        .collect();
    let entity_uuids: Vec<Uuid> = two.entities.iter().map(|e| e.uuid).collect();
    let fact_uuids: Vec<Uuid> = one.facts.iter().map(|f| f.uuid).collect();
    for filters in [
        SearchFilters {
            fact_types: fact_types.clone(),
            ..SearchFilters::default()
        },
        SearchFilters {
            entity_uuids: entity_uuids.clone(),
            ..SearchFilters::default()
        },
        SearchFilters {
            fact_uuids: fact_uuids.clone(),
            ..SearchFilters::default()
        },
    ] {
        for query in [a.as_str(), b.as_str(), c.as_str(), "the a no"] {
            let req =
                SearchRequest::new(query, COMBINED_HYBRID_SEARCH_RRF).filters(filters.clone());
            let found = search::search(&g.db, &g.name, &req, Some(&w.embedder), None)
                .await
                .unwrap_or_else(|e| panic!("search {query:?} {names:?}: {e}"));
            for hit in &found.facts {
                assert!(fact_types.contains(&hit.fact.name) || filters.fact_types.is_empty());
                assert!(
                    filters.fact_uuids.is_empty() || fact_uuids.contains(&hit.fact.uuid),
                    "{names:?}"
                );
            }
        }
    }
    // A named set is ranked exactly: the first episode's fact, whatever its words.
    let exact = SearchConfig {
        facts: Some(ScopeConfig::new(Methods::VECTOR, RerankerKind::Rrf).min_similarity(-1.0)),
        ..COMBINED_HYBRID_SEARCH_RRF
    };
    // (An explicit vector, the fact's own: the test embedder gives
    // punctuation-only text a zero vector, and a negative score would fall below the
    // configuration's minimum.)
    let other = gralkor::graph::get_facts(&g.db, &g.name, &fact_uuids)
        .await
        .unwrap();
    let req = SearchRequest::new(a.as_str(), exact)
        .query_vector(other[0].fact_embedding.clone().unwrap())
        .filters(SearchFilters {
            fact_uuids: fact_uuids.clone(),
            ..SearchFilters::default()
        });
    let found = search::search(&g.db, &g.name, &req, Some(&w.embedder), None)
        .await
        .unwrap();
    let got: Vec<Uuid> = found.facts.iter().map(|h| h.fact.uuid).collect();
    assert_eq!(got, fact_uuids, "{names:?}");

    w.engine
        .build_communities(&g.name, &CommunityOptions::default())
        .await
        .unwrap_or_else(|e| panic!("communities {names:?}: {e}"));
    // The entities only the first episode mentions go with it: `b`, unless
    // resolution merged it with a name the second episode mentions too (the engine's
    // own fuzzy matching may join two hostile names the test's rule keeps apart).
    let only_first = count(
        &g,
        "MATCH (:Episodic {uuid: $one})-[:MENTIONS]->(n:Entity) \
         OPTIONAL MATCH (other:Episodic)-[:MENTIONS]->(n) WHERE other.uuid <> $one \
         WITH n, count(other) AS others WHERE others = 0 \
         RETURN count(n) AS n",
        Params::new().set("one", one.episode.uuid.to_string()),
    )
    .await;
    let removal = w
        .engine
        .remove_episode(&g.name, one.episode.uuid)
        .await
        .unwrap_or_else(|e| panic!("remove {names:?}: {e}"));
    assert!(removal.episode);
    assert_eq!(
        removal.entities_deleted as i64, only_first,
        "{b:?} went with its episode ({names:?})"
    );
    assert!(only_first <= 1, "{names:?}");
}
