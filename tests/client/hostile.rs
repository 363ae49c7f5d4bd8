//! Hostile input through both clients, as property tests: the native client on the
//! shared embedded FalkorDB (the real engine, a scripted model, a hashing embedder)
//! and the in-memory twin, side by side. Mirrors `test-trees/lens.md` (replacements)
//! and `test-trees/runtime.md` (names).
//!
//! * Replacement payloads: either a replacement is stored exactly as sent, or it is
//!   refused naming a `graph.…` field and the previous graph is unchanged — and both
//!   clients decide alike.
//! * Names: any Destination, Lens and operator name the runtime accepts can be used to
//!   ingest, search and replace through both clients; any it rejects names its entry.

use crate::common;

use std::cell::Cell;
use std::collections::BTreeMap;
use std::sync::{Arc, OnceLock};

use common::ingest::{CountingEmbedder, Rules, answer};
use gralkor::NativeStorage;
use gralkor::client::{
    Client, Content, EpisodeRef, Hit, InMemoryClient, Ingest, NativeClient, OperatorId, Replace,
    Search,
};
use gralkor::falkordb::FalkorDb;
use gralkor::graph::Engine;
use gralkor::lens::{Graph, GraphNode, GraphRelationship, Lens, OWNER_PROPERTY};
use gralkor::llm::doubles::ScriptedModel;
use gralkor::provenance::Writer;
use gralkor::runtime::{Runtime, RuntimeConfig};
use gralkor::{Error, Result};
use proptest::prelude::*;
use proptest::test_runner::{Config, TestRunner};
use serde_json::{Map, Value, json};

struct Fixture {
    rt: tokio::runtime::Runtime,
    db: FalkorDb,
    engine: Engine,
}

/// One runtime, one database handle and one engine for every case of the binary.
fn fixture() -> &'static Fixture {
    static FIXTURE: OnceLock<Fixture> = OnceLock::new();
    FIXTURE.get_or_init(|| {
        let rt = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .enable_all()
            .build()
            .unwrap();
        let db = rt.block_on(common::db());
        let rules = Rules::narrator();
        let model = ScriptedModel::new().respond_with(move |req| answer(&rules, req));
        let engine = Engine::new(
            db.clone(),
            Arc::new(model),
            Arc::new(CountingEmbedder::new()),
        );
        Fixture { rt, db, engine }
    })
}

fn native(config: RuntimeConfig) -> Result<NativeClient> {
    let f = fixture();
    let storage = NativeStorage::new(f.engine.clone());
    Ok(NativeClient::from_parts(Runtime::new(config)?, storage))
}

fn oid(id: &str) -> OperatorId {
    OperatorId::new(id).unwrap()
}

fn word() -> String {
    format!("zq{}", &uuid::Uuid::new_v4().simple().to_string()[..12])
}

// ------------------------------------------------------------------ replacements

/// A Lens's graph in comparable form, in JSON terms: nodes `(id, sorted labels,
/// properties)` sorted by id, relationships `(from, type, to, properties)` sorted.
type Props = BTreeMap<String, Value>;
type Parts = (
    Vec<(String, Vec<String>, Props)>,
    Vec<(String, String, String, Props)>,
);

fn props<'a>(m: impl IntoIterator<Item = (&'a String, Value)>) -> Props {
    m.into_iter()
        .filter(|(k, _)| k.as_str() != OWNER_PROPERTY)
        .map(|(k, v)| (k.clone(), v))
        .collect()
}

fn parts(
    nodes: impl IntoIterator<Item = (String, Vec<String>, Props)>,
    rels: impl IntoIterator<Item = (String, String, String, Props)>,
) -> Parts {
    let mut nodes: Vec<_> = nodes
        .into_iter()
        .map(|(id, mut labels, p)| {
            labels.sort();
            (id, labels, p)
        })
        .collect();
    nodes.sort_by(|a, b| a.0.cmp(&b.0));
    let mut rels: Vec<_> = rels.into_iter().collect();
    rels.sort_by_key(|r| format!("{r:?}"));
    (nodes, rels)
}

fn payload_parts(g: &Graph) -> Parts {
    parts(
        g.nodes.iter().map(|n| {
            (
                n.id.clone(),
                n.labels.clone(),
                props(n.properties.iter().map(|(k, v)| (k, v.clone()))),
            )
        }),
        g.relationships.iter().map(|r| {
            (
                r.from.clone(),
                r.rel_type.clone(),
                r.to.clone(),
                props(r.properties.iter().map(|(k, v)| (k, v.clone()))),
            )
        }),
    )
}

/// Equality in which doubles may differ in the last digits: FalkorDB stores all 64
/// bits but writes doubles in replies with 15 significant digits. Integers and
/// doubles stay distinct.
fn same(a: &Value, b: &Value) -> bool {
    match (a, b) {
        (Value::Number(x), Value::Number(y)) if x.is_f64() && y.is_f64() => {
            let (x, y) = (x.as_f64().unwrap(), y.as_f64().unwrap());
            x == y || (x - y).abs() <= 1e-14 * x.abs().max(y.abs())
        }
        (Value::Array(x), Value::Array(y)) => {
            x.len() == y.len() && x.iter().zip(y).all(|(a, b)| same(a, b))
        }
        _ => a == b,
    }
}

fn same_props(a: &Props, b: &Props) -> bool {
    a.len() == b.len()
        && a.iter()
            .zip(b)
            .all(|((ka, a), (kb, b))| ka == kb && same(a, b))
}

fn same_parts(a: &Parts, b: &Parts) -> bool {
    a.0.len() == b.0.len()
        && a.1.len() == b.1.len()
        && a.0
            .iter()
            .zip(&b.0)
            .all(|(x, y)| x.0 == y.0 && x.1 == y.1 && same_props(&x.2, &y.2))
        && a.1
            .iter()
            .zip(&b.1)
            .all(|(x, y)| (&x.0, &x.1, &x.2) == (&y.0, &y.1, &y.2) && same_props(&x.3, &y.3))
}

enum Side {
    Native(NativeClient),
    Twin(InMemoryClient),
}

impl Side {
    fn client(&self) -> &dyn Client {
        match self {
            Side::Native(c) => c,
            Side::Twin(c) => c,
        }
    }

    fn name(&self) -> &'static str {
        match self {
            Side::Native(_) => "native",
            Side::Twin(_) => "twin",
        }
    }

    /// What the storage holds for `lens` in `graph`.
    async fn stored(&self, graph: &str, lens: &str) -> Parts {
        match self {
            Side::Native(c) => {
                let (nodes, rels) = gralkor::graph::get_owned(c.storage().db(), graph, lens)
                    .await
                    .unwrap();
                let json = |m: &BTreeMap<String, gralkor::falkordb::Value>| {
                    props(m.iter().map(|(k, v)| (k, v.to_json())))
                };
                parts(
                    nodes
                        .iter()
                        .map(|n| (n.id.clone(), n.labels.clone(), json(&n.properties))),
                    rels.iter().map(|r| {
                        (
                            r.from.clone(),
                            r.rel_type.clone(),
                            r.to.clone(),
                            json(&r.properties),
                        )
                    }),
                )
            }
            Side::Twin(c) => {
                let mut g = c.storage().replaced_graph(graph);
                g.nodes
                    .retain(|n| n.properties.get(OWNER_PROPERTY) == Some(&json!(lens)));
                g.relationships
                    .retain(|r| r.properties.get(OWNER_PROPERTY) == Some(&json!(lens)));
                payload_parts(&g)
            }
        }
    }
}

fn text() -> BoxedStrategy<String> {
    prop_oneof![
        12 => "[a-z]{1,6}",
        1 => "\\PC{0,12}",
        1 => any::<String>(),
        1 => "[a-z]{0,3}\0[a-z]{0,3}",
        1 => "[ '\"\\\\`{}()$;:\n]{0,6}",
        1 => Just(String::new()),
        1 => Just("x'}) MATCH (n) DETACH DELETE n //".to_string()),
    ]
    .boxed()
}

fn name() -> BoxedStrategy<String> {
    prop_oneof![
        24 => "[A-Za-z_][A-Za-z0-9_]{0,8}",
        1 => prop_oneof![
            Just("Entity"), Just("episodic"), Just("RELATES_TO"), Just("has_member"),
            Just("_gralkor_lens"), Just("_gralkor_id"), Just("_gralkorx"),
            Just("return"), Just("MATCH"), Just("null"), Just("id"), Just("props"),
        ]
        .prop_map(String::from),
        1 => text(),
        1 => "[0-9][a-z]{0,3}",
    ]
    .boxed()
}

fn scalar() -> BoxedStrategy<Value> {
    prop_oneof![
        4 => text().prop_map(Value::String),
        2 => any::<i64>().prop_map(Value::from),
        1 => (i64::MAX as u64..=u64::MAX).prop_map(Value::from),
        2 => any::<f64>().prop_filter_map("finite", |f| serde_json::Number::from_f64(f).map(Value::Number)),
        1 => prop_oneof![Just(5e-324), Just(-0.0), Just(f64::MAX), Just(f64::MIN_POSITIVE), Just(1e-310)]
            .prop_map(|f| json!(f)),
        2 => any::<bool>().prop_map(Value::Bool),
    ]
    .boxed()
}

fn value() -> BoxedStrategy<Value> {
    prop_oneof![
        12 => scalar(),
        3 => prop::collection::vec(scalar(), 0..4).prop_map(Value::Array),
        1 => Just(Value::Null),
        1 => prop::collection::vec(prop_oneof![scalar(), Just(Value::Null), Just(json!([1]))], 1..3)
            .prop_map(Value::Array),
        1 => prop::collection::btree_map(name(), scalar(), 0..2)
            .prop_map(|m| Value::Object(m.into_iter().collect())),
    ]
    .boxed()
}

fn properties() -> BoxedStrategy<Map<String, Value>> {
    prop::collection::btree_map(name(), value(), 0..4)
        .prop_map(|m: BTreeMap<String, Value>| m.into_iter().collect())
        .boxed()
}

fn id() -> BoxedStrategy<String> {
    prop_oneof![8 => "[a-e]", 1 => text()].boxed()
}

fn hostile_graph() -> impl Strategy<Value = Graph> {
    let node = (id(), prop::collection::vec(name(), 0..3), properties()).prop_map(
        |(id, labels, properties)| GraphNode {
            id,
            labels,
            properties,
        },
    );
    let rel = (id(), name(), id(), properties()).prop_map(|(from, rel_type, to, properties)| {
        GraphRelationship {
            from,
            rel_type,
            to,
            properties,
        }
    });
    (
        prop::collection::vec(node, 0..5),
        prop::collection::vec(rel, 0..4),
    )
        .prop_map(|(nodes, relationships)| Graph {
            nodes,
            relationships,
        })
}

fn previous() -> Graph {
    Graph::new()
        .node(
            "payments",
            ["System"],
            json!({"name": "Payments", "tier": 1}),
        )
        .node("ledger", ["System", "Store"], json!({"tags": ["a", 2]}))
        .relationship("payments", "DEPENDS_ON", "ledger", json!({"via": "events"}))
}

#[test]
fn a_hostile_replacement_is_stored_exactly_or_refused_leaving_the_previous_graph() {
    let f = fixture();
    let dest = format!("hostile-{}", uuid::Uuid::new_v4());
    let config = || {
        RuntimeConfig::new()
            .destination(dest.clone())
            .lens(Lens::replace_graph("systems", dest.clone()))
    };
    let sides = [
        Side::Native(native(config()).unwrap()),
        Side::Twin(InMemoryClient::with_config(config()).unwrap()),
    ];
    let (stored, refused) = (Cell::new(0), Cell::new(0));
    let mut runner = TestRunner::new(Config {
        cases: 400,
        max_shrink_iters: 200,
        failure_persistence: None,
        ..Config::default()
    });
    runner
        .run(&hostile_graph(), |payload| {
            let outcomes: Vec<std::result::Result<(), String>> = f.rt.block_on(async {
                let mut outcomes = Vec::new();
                for side in &sides {
                    let client = side.client();
                    client
                        .replace(&Replace::new(oid("op"), "systems", previous()))
                        .await
                        .unwrap();
                    let before = side.stored(&dest, "systems").await;
                    let result = client
                        .replace(&Replace::new(oid("op"), "systems", payload.clone()))
                        .await;
                    let after = side.stored(&dest, "systems").await;
                    let who = side.name();
                    match result {
                        Ok(()) => {
                            let sent = payload_parts(&payload);
                            assert!(
                                same_parts(&after, &sent),
                                "{who}: a stored replacement is exactly the payload:\n\
                                 stored {after:?}\n  sent {sent:?}"
                            );
                            outcomes.push(Ok(()));
                        }
                        Err(Error::InvalidInput { field, rule }) => {
                            assert!(
                                same_parts(&after, &before),
                                "{who}: refused `{field}` {rule}, yet the graph changed:\n\
                                 after {after:?}\nbefore {before:?}"
                            );
                            assert!(
                                field.starts_with("graph."),
                                "{who}: the error names a field of the request: `{field}` {rule}"
                            );
                            outcomes.push(Err(field));
                        }
                        Err(other) => panic!("{who}: neither stored nor refused: {other:?}"),
                    }
                }
                outcomes
            });
            prop_assert_eq!(&outcomes[0], &outcomes[1], "both clients decide alike");
            if outcomes[0].is_ok() {
                stored.set(stored.get() + 1);
            } else {
                refused.set(refused.get() + 1);
            }
            Ok(())
        })
        .unwrap();
    let (stored, refused) = (stored.get(), refused.get());
    assert!(
        stored > 10 && refused > 10,
        "{stored} stored, {refused} refused"
    );
    f.rt.block_on(f.db.delete_graph(&dest)).unwrap();
}

// ------------------------------------------------------------------ names

fn hostile_name() -> BoxedStrategy<String> {
    prop_oneof![
        6 => "[a-z][a-z0-9-]{0,12}",
        1 => "\\PC{1,16}",
        1 => any::<String>(),
        1 => (250usize..=262).prop_map(|n| "n".repeat(n)),
        1 => (125usize..=131).prop_map(|n| "é".repeat(n)),
        1 => Just("l".repeat(5000)),
        1 => "[a-z]{1,4}\0[a-z]{0,4}",
        1 => "[a-z]{1,4}[\t\n\r][a-z]{1,4}",
        1 => "[a-z]{1,4} \\[lens: [a-z]{1,4}\\]?",
        1 => prop_oneof![
            Just("personal-chat"), Just("global"), Just("personal"), Just("operator"),
            Just("default"), Just("personal/x"), Just(" pad"), Just("reflection:x"),
        ]
        .prop_map(String::from),
    ]
    .boxed()
}

/// Ingests, searches (episodes, facts, nodes), fetches and replaces through names
/// the runtime accepted.
async fn use_every_name(
    client: &dyn Client,
    dest: &str,
    lens: &str,
    replacer: &str,
    op: &OperatorId,
) {
    let w = word();
    let written = client
        .ingest(
            &Ingest::new("i-1", op, lens, Content::document(format!("{w} was noted")))
                .source_description("notes"),
        )
        .await
        .expect("ingest");
    assert_eq!(written.len(), 1);
    let found = client
        .search(&Search::new(op, &w).destinations([dest]).lenses([lens]))
        .await
        .expect("episode search");
    assert_eq!(found.len(), 1, "{found:?}");
    let Hit::Episode(e) = &found[0].hit else {
        panic!("{found:?}")
    };
    assert_eq!(
        (e.writer.clone(), e.source_description.as_str()),
        (Some(Writer::Lens(lens.into())), "notes")
    );
    let facts = client
        .search(
            &Search::new(op, &w)
                .destinations([dest])
                .lenses([lens])
                .facts(),
        )
        .await
        .expect("fact search");
    assert!(!facts.is_empty());
    for r in &facts {
        let fact = r.hit.as_fact().unwrap();
        assert!(
            fact.sources
                .iter()
                .all(|s| s.writer == Some(Writer::Lens(lens.into())))
        );
    }
    let got = client
        .get_episode(&EpisodeRef::new(op, dest, written[0].episode))
        .await
        .expect("get_episode")
        .expect("the episode");
    assert_eq!(got.writer, Some(Writer::Lens(lens.into())));
    client
        .replace(&Replace::new(
            op,
            replacer,
            Graph::new().node("n", ["Thing"], json!({"name": w})),
        ))
        .await
        .expect("replace");
    let nodes = client
        .search(&Search::new(op, &w).destinations([dest]).nodes(["Thing"]))
        .await
        .expect("node search");
    assert!(
        nodes
            .iter()
            .any(|r| r.hit.as_node().is_some_and(|n| n.name == w)),
        "{nodes:?}"
    );
}

#[test]
fn every_name_the_runtime_accepts_works_through_both_clients() {
    let f = fixture();
    let (accepted, rejected) = (Cell::new(0), Cell::new(0));
    let mut runner = TestRunner::new(Config {
        cases: 64,
        max_shrink_iters: 100,
        failure_persistence: None,
        ..Config::default()
    });
    let names = (
        hostile_name(),
        hostile_name(),
        hostile_name(),
        hostile_name(),
    );
    runner
        .run(&names, |(dest, lens, replacer, op)| {
            let config = RuntimeConfig::new()
                .destination(dest.clone())
                .lens(Lens::appending(lens.clone(), dest.clone()))
                .lens(Lens::replace_graph(replacer.clone(), dest.clone()));
            let twin = match InMemoryClient::with_config(config.clone()) {
                Ok(twin) => twin,
                Err(Error::Config { field, rule }) => {
                    let entry = field == "destinations[0]"
                        || (field.starts_with("lenses[") && field.ends_with("].name"));
                    prop_assert!(entry, "`{}` {}", field, rule);
                    let short = field.len() <= gralkor::storage::MAX_NAME_BYTES + 16;
                    prop_assert!(!field.contains('\0') && short, "{:?}", field);
                    rejected.set(rejected.get() + 1);
                    return Ok(());
                }
                Err(other) => panic!("not a configuration error: {other:?}"),
            };
            let native = native(config).expect("the same configuration");
            f.rt.block_on(async {
                for client in [&native as &dyn Client, &twin] {
                    match OperatorId::new(op.clone()) {
                        // A hostile operator id is refused when it is made, naming the
                        // field, so no request can carry one.
                        Err(err) => assert!(
                            matches!(&err, Error::InvalidInput { field, .. } if field == "operator_id"),
                            "{err:?}"
                        ),
                        Ok(op) => use_every_name(client, &dest, &lens, &replacer, &op).await,
                    }
                }
            });
            accepted.set(accepted.get() + 1);
            Ok(())
        })
        .unwrap();
    let (accepted, rejected) = (accepted.get(), rejected.get());
    assert!(
        accepted > 10 && rejected > 10,
        "{accepted} accepted, {rejected} rejected"
    );
}
