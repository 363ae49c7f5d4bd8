//! Storage of episodes, entities, facts, mentions and communities on a real FalkorDB. Mirrors
//! `test-trees/graph-store.md`.

use crate::common;

use common::TestGraph;
use common::graph::{entity, t};
use gralkor::Error;
use gralkor::falkordb::{IndexEntity, IndexKind, Params, Value};
use gralkor::graph::{
    self, Community, EntityEdge, EntityNode, Episode, EpisodeState, SourceKind, Timestamp,
};
use serde_json::json;

fn attrs(v: serde_json::Value) -> serde_json::Map<String, serde_json::Value> {
    v.as_object().unwrap().clone()
}

async fn count(g: &TestGraph, q: &str) -> i64 {
    let res = g.db.ro_query(&g.name, q, &Params::new()).await.unwrap();
    res.get(0, "c").and_then(Value::as_int).unwrap()
}

mod indices {
    use super::*;

    #[tokio::test]
    async fn build_indices_is_idempotent_and_sizes_vector_indices_to_the_embedder() {
        let g = TestGraph::new("gs-idx").await;
        let specs = graph::index_specs(8);
        let first = graph::build_indices(&g.db, &g.name, 8).await.unwrap();
        assert_eq!(first, specs.len());
        assert_eq!(graph::build_indices(&g.db, &g.name, 8).await.unwrap(), 0);

        let listed = g.db.list_indices(&g.name).await.unwrap();
        let vectors: Vec<(IndexEntity, String, u32)> = listed
            .iter()
            .filter_map(|i| match i.kind {
                IndexKind::Vector { dimension, .. } => {
                    Some((i.entity.clone(), i.property.clone(), dimension))
                }
                _ => None,
            })
            .collect();
        for (entity, prop) in [
            (IndexEntity::Node("Entity".into()), "name_embedding"),
            (
                IndexEntity::Relationship("RELATES_TO".into()),
                "fact_embedding",
            ),
            (IndexEntity::Node("Community".into()), "name_embedding"),
            (IndexEntity::Node("EpisodeEmbedding".into()), "embedding"),
        ] {
            assert!(
                vectors.contains(&(entity.clone(), prop.to_string(), 8)),
                "{entity:?}.{prop} in {vectors:?}"
            );
        }
        assert_eq!(vectors.len(), 4);
        let fulltext = |e: IndexEntity, p: &str| {
            listed.iter().any(|i| {
                i.entity == e && i.property == p && matches!(i.kind, IndexKind::Fulltext { .. })
            })
        };
        assert!(fulltext(IndexEntity::Node("Episodic".into()), "content"));
        assert!(fulltext(
            IndexEntity::Node("Episodic".into()),
            "source_description"
        ));
        assert!(fulltext(IndexEntity::Node("Entity".into()), "summary"));
        assert!(fulltext(
            IndexEntity::Relationship("RELATES_TO".into()),
            "fact"
        ));
        assert!(fulltext(IndexEntity::Node("Community".into()), "name"));
        assert!(listed.iter().all(|i| i.operational));
    }

    #[tokio::test]
    async fn clear_deletes_the_graph_and_its_indices() {
        let g = TestGraph::new("gs-clear").await;
        graph::build_indices(&g.db, &g.name, 4).await.unwrap();
        graph::save_entities(&g.db, &g.name, &[entity("A", &[], None)])
            .await
            .unwrap();
        assert!(graph::clear(&g.db, &g.name).await.unwrap());
        assert!(!graph::clear(&g.db, &g.name).await.unwrap());
        assert_eq!(count(&g, "MATCH (n) RETURN count(n) AS c").await, 0);
        assert!(g.db.list_indices(&g.name).await.unwrap().is_empty());
    }
}

mod episodes {
    use super::*;

    #[tokio::test]
    async fn an_episode_round_trips_exactly_and_resaving_creates_nothing() {
        let g = TestGraph::new("gs-ep").await;
        let mut ep = Episode::new(
            "alice: I joined Acme 'today'\n\\o/",
            SourceKind::Message,
            "slack #general",
            t("2024-02-29T23:59:59.999999+01:00"),
        );
        ep.entity_edges = vec![uuid::Uuid::new_v4(), uuid::Uuid::new_v4()];
        let stats = graph::save_episode(&g.db, &g.name, &ep).await.unwrap();
        assert_eq!(stats.nodes_created, 1);
        assert_eq!(
            graph::get_episode(&g.db, &g.name, ep.uuid).await.unwrap(),
            Some(ep.clone())
        );

        ep.state = EpisodeState::Complete;
        ep.entity_edges.clear();
        let stats = graph::save_episode(&g.db, &g.name, &ep).await.unwrap();
        assert_eq!(stats.nodes_created, 0);
        assert_eq!(
            graph::get_episode(&g.db, &g.name, ep.uuid).await.unwrap(),
            Some(ep.clone())
        );
        assert_eq!(
            count(&g, "MATCH (e:Episodic) RETURN count(e) AS c").await,
            1
        );
        assert_eq!(
            graph::get_episode(&g.db, &g.name, uuid::Uuid::new_v4())
                .await
                .unwrap(),
            None
        );
    }

    #[tokio::test]
    async fn an_episode_written_with_a_writer_reads_back_with_it() {
        let g = TestGraph::new("gs-ep-writer").await;
        graph::build_indices(&g.db, &g.name, 2).await.unwrap();
        let alice = entity("Alice", &[], None);
        graph::save_entities(&g.db, &g.name, std::slice::from_ref(&alice))
            .await
            .unwrap();
        let ep = episode("Alice wrote this.", "2024-05-01T12:00:00Z").writer("lens:personal-chat");
        graph::save_episode(&g.db, &g.name, &ep).await.unwrap();
        let read = graph::get_episode(&g.db, &g.name, ep.uuid)
            .await
            .unwrap()
            .unwrap();
        assert_eq!(read.writer.as_deref(), Some("lens:personal-chat"));
        assert_eq!(read, ep);
        assert_eq!(
            count(
                &g,
                "MATCH (e:Episodic {writer: 'lens:personal-chat'}) RETURN count(e) AS c"
            )
            .await,
            1
        );
        // Every episode reader gives it back.
        graph::save_mentions(&g.db, &g.name, ep.uuid, &[alice.uuid])
            .await
            .unwrap();
        let mentioning = graph::get_episodes_mentioning(&g.db, &g.name, alice.uuid)
            .await
            .unwrap();
        assert_eq!(mentioning, std::slice::from_ref(&ep));
        // Saved again without a writer, the property is gone.
        let mut plain = ep.clone();
        plain.writer = None;
        graph::save_episode(&g.db, &g.name, &plain).await.unwrap();
        assert_eq!(
            graph::get_episode(&g.db, &g.name, ep.uuid)
                .await
                .unwrap()
                .unwrap()
                .writer,
            None
        );
        assert_eq!(
            count(
                &g,
                "MATCH (e:Episodic) WHERE e.writer IS NOT NULL RETURN count(e) AS c"
            )
            .await,
            0
        );
    }

    #[tokio::test]
    async fn an_episode_of_a_session_reads_back_with_it_and_is_listed_by_its_session() {
        let g = TestGraph::new("gs-ep-session").await;
        assert!(
            graph::session_episodes(&g.db, &g.name, "s-1")
                .await
                .unwrap()
                .is_empty(),
            "a graph that does not exist has no session"
        );
        graph::build_indices(&g.db, &g.name, 2).await.unwrap();
        let first = episode("Alice said hi.", "2024-05-01T12:00:00Z").session("s-1");
        let other = episode("Bob said hi.", "2024-05-01T12:01:00Z").session("s-2");
        let mut second = episode("Alice said bye.", "2024-05-01T12:02:00Z").session("s-1");
        second.created_at = gralkor::graph::Timestamp(first.created_at.0 + 1);
        let plain = episode("Nobody said anything.", "2024-05-01T12:03:00Z");
        for ep in [&first, &other, &second, &plain] {
            graph::save_episode(&g.db, &g.name, ep).await.unwrap();
        }
        let read = graph::get_episode(&g.db, &g.name, first.uuid)
            .await
            .unwrap()
            .unwrap();
        assert_eq!(read.session.as_deref(), Some("s-1"));
        assert_eq!(read, first);
        assert_eq!(
            graph::session_episodes(&g.db, &g.name, "s-1")
                .await
                .unwrap(),
            [first.uuid, second.uuid],
            "oldest first"
        );
        assert_eq!(
            graph::session_episodes(&g.db, &g.name, "s-2")
                .await
                .unwrap(),
            [other.uuid]
        );
        let read = graph::get_episode(&g.db, &g.name, plain.uuid)
            .await
            .unwrap()
            .unwrap();
        assert_eq!(read.session, None);
    }

    #[tokio::test]
    async fn an_old_episode_without_the_writer_property_reads_as_unattributed() {
        let g = TestGraph::new("gs-ep-old").await;
        let uuid = uuid::Uuid::new_v4();
        g.db.query(
            &g.name,
            "CREATE (:Episodic {uuid: $uuid, content: 'old text', source: 'text', \
             source_description: 'notes [lens: chat]', valid_at: 1, created_at: 2, \
             entity_edges: [], state: 'complete'})",
            &Params::new().set("uuid", uuid.to_string()),
        )
        .await
        .unwrap();
        let read = graph::get_episode(&g.db, &g.name, uuid)
            .await
            .unwrap()
            .unwrap();
        assert_eq!(read.writer, None);
        assert_eq!(read.source_description, "notes [lens: chat]");
        assert_eq!(read.state, EpisodeState::Complete);
        // A writer property of the wrong type is a malformed record, not a silent None.
        g.db.query(
            &g.name,
            "MATCH (e:Episodic {uuid: $uuid}) SET e.writer = 7",
            &Params::new().set("uuid", uuid.to_string()),
        )
        .await
        .unwrap();
        let err = graph::get_episode(&g.db, &g.name, uuid).await.unwrap_err();
        assert!(err.to_string().contains("`writer`"), "{err}");
    }
}

mod entities {
    use super::*;

    #[tokio::test]
    async fn entities_round_trip_with_labels_attributes_embeddings_and_times() {
        let g = TestGraph::new("gs-ent").await;
        graph::build_indices(&g.db, &g.name, 3).await.unwrap();
        let mut alice = entity(
            "Alice",
            &["Person", "Employee"],
            Some(vec![0.1, -2.5e-7, 3.0]),
        );
        alice.attributes = attrs(json!({"age": 42, "tags": ["a", "b"], "nested": {"x": 1.5}}));
        let acme = entity("Acme", &[], None);
        let bob = entity("Bob", &["Person"], Some(vec![1.0, 2.0, 1.0 / 3.0]));
        let all = [alice.clone(), acme.clone(), bob.clone()];
        let stats = graph::save_entities(&g.db, &g.name, &all).await.unwrap();
        assert_eq!(stats.nodes_created, 3);

        let got = graph::get_entities(&g.db, &g.name, &[bob.uuid, alice.uuid, acme.uuid])
            .await
            .unwrap();
        let mut sorted_alice = alice.clone();
        sorted_alice.labels.sort();
        assert_eq!(got, vec![bob, sorted_alice, acme]);

        let stats = graph::save_entities(&g.db, &g.name, &all).await.unwrap();
        assert_eq!(stats.nodes_created, 0);
        assert_eq!(stats.labels_added, 0);
        assert_eq!(count(&g, "MATCH (n:Entity) RETURN count(n) AS c").await, 3);
    }

    #[tokio::test]
    async fn an_invalid_label_is_rejected_before_anything_is_written() {
        let g = TestGraph::new("gs-badlabel").await;
        for bad in [
            "Person) DETACH DELETE (x",
            "has space",
            "",
            "Episodic",
            "community",
            "entity",
        ] {
            let batch = [
                entity("Fine", &["Person"], None),
                entity("Bad", &[bad], None),
            ];
            let err = graph::save_entities(&g.db, &g.name, &batch)
                .await
                .unwrap_err();
            assert!(
                matches!(&err, Error::InvalidInput { field, .. } if field == "entities[1].labels"),
                "{bad}: {err}"
            );
        }
        assert_eq!(count(&g, "MATCH (n) RETURN count(n) AS c").await, 0);
    }

    #[tokio::test]
    async fn saving_again_updates_properties_and_keeps_added_labels() {
        let g = TestGraph::new("gs-upd").await;
        let mut a = entity("Alice", &["Person"], Some(vec![1.0, 0.0]));
        graph::save_entities(&g.db, &g.name, std::slice::from_ref(&a))
            .await
            .unwrap();
        a.labels = vec!["Engineer".into()];
        a.summary = "changed".into();
        a.name_embedding = None;
        let stats = graph::save_entities(&g.db, &g.name, std::slice::from_ref(&a))
            .await
            .unwrap();
        assert_eq!(stats.nodes_created, 0);
        let got = graph::get_entities(&g.db, &g.name, &[a.uuid])
            .await
            .unwrap();
        assert_eq!(got[0].labels, ["Engineer", "Person"]);
        assert_eq!(got[0].summary, "changed");
        assert_eq!(got[0].name_embedding, None);
    }
}

mod facts {
    use super::*;

    async fn two_entities(g: &TestGraph) -> (EntityNode, EntityNode) {
        let a = entity("Alice", &["Person"], None);
        let b = entity("Acme", &[], None);
        graph::save_entities(&g.db, &g.name, &[a.clone(), b.clone()])
            .await
            .unwrap();
        (a, b)
    }

    #[tokio::test]
    async fn facts_round_trip_exactly_and_resaving_creates_nothing() {
        let g = TestGraph::new("gs-facts").await;
        graph::build_indices(&g.db, &g.name, 4).await.unwrap();
        let (a, b) = two_entities(&g).await;
        let mut works = EntityEdge::new(a.uuid, b.uuid, "WORKS_AT", "Alice works at Acme");
        works.fact_embedding = Some(vec![0.25, -1.0, 1e-3, 7.123_456_7]);
        works.episodes = vec![uuid::Uuid::new_v4()];
        works.valid_at = Some(t("1899-12-31T23:59:59.000001Z"));
        works.invalid_at = Some(t("2024-02-29T12:00:00.5Z"));
        works.expired_at = Some(Timestamp::now());
        works.attributes = attrs(json!({"role": "CTO", "since": 2020}));
        let mut knows = EntityEdge::new(b.uuid, a.uuid, "EMPLOYS", "Acme employs Alice");
        knows.created_at = Timestamp::from_unix_micros(-1);

        let facts = [works.clone(), knows.clone()];
        let stats = graph::save_facts(&g.db, &g.name, &facts).await.unwrap();
        assert_eq!(stats.relationships_created, 2);
        let got = graph::get_facts(&g.db, &g.name, &[knows.uuid, works.uuid])
            .await
            .unwrap();
        assert_eq!(got, vec![knows, works]);

        let stats = graph::save_facts(&g.db, &g.name, &facts).await.unwrap();
        assert_eq!(stats.relationships_created, 0);
        assert_eq!(stats.nodes_created, 0);
        assert_eq!(
            count(&g, "MATCH ()-[f:RELATES_TO]->() RETURN count(f) AS c").await,
            2
        );
    }

    #[tokio::test]
    async fn a_fact_with_a_missing_endpoint_is_rejected_before_anything_is_written() {
        let g = TestGraph::new("gs-missing").await;
        let (a, b) = two_entities(&g).await;
        let ghost = uuid::Uuid::new_v4();
        let facts = [
            EntityEdge::new(a.uuid, b.uuid, "WORKS_AT", "ok"),
            EntityEdge::new(a.uuid, ghost, "KNOWS", "ghost"),
        ];
        let err = graph::save_facts(&g.db, &g.name, &facts).await.unwrap_err();
        assert!(
            matches!(&err, Error::NotFound(m) if m.contains(&ghost.to_string())),
            "{err}"
        );
        assert_eq!(
            count(&g, "MATCH ()-[f:RELATES_TO]->() RETURN count(f) AS c").await,
            0
        );
    }

    #[tokio::test]
    async fn a_fact_cannot_move_to_other_endpoints() {
        let g = TestGraph::new("gs-move").await;
        let (a, b) = two_entities(&g).await;
        let f = EntityEdge::new(a.uuid, b.uuid, "WORKS_AT", "Alice works at Acme");
        graph::save_facts(&g.db, &g.name, std::slice::from_ref(&f))
            .await
            .unwrap();
        let mut moved = f.clone();
        moved.source_uuid = b.uuid;
        moved.target_uuid = a.uuid;
        let other = EntityEdge::new(a.uuid, b.uuid, "KNOWS", "other");
        let err = graph::save_facts(&g.db, &g.name, &[other, moved])
            .await
            .unwrap_err();
        assert!(
            matches!(&err, Error::InvalidInput { field, .. } if field == "facts[1]"),
            "{err}"
        );
        assert_eq!(
            count(&g, "MATCH ()-[f:RELATES_TO]->() RETURN count(f) AS c").await,
            1
        );
        assert_eq!(
            graph::get_facts(&g.db, &g.name, &[f.uuid]).await.unwrap(),
            vec![f]
        );
    }

    #[tokio::test]
    async fn time_comparisons_in_cypher_are_correct_across_offsets_and_1970() {
        let g = TestGraph::new("gs-time").await;
        let (a, b) = two_entities(&g).await;
        let at = |s: &str| {
            let mut f = EntityEdge::new(a.uuid, b.uuid, "AT", s);
            f.valid_at = Some(t(s));
            f
        };
        // Written with different offsets: as text they would sort differently.
        let facts = [
            at("1969-12-31T23:59:59.999999Z"),
            at("1970-01-01T00:00:00Z"),
            at("2024-05-01T13:00:00.000001+02:00"),
            at("2024-05-01T11:30:00-00:30"),
            at("2024-05-01T12:00:00.000002Z"),
        ];
        graph::save_facts(&g.db, &g.name, &facts).await.unwrap();
        let facts_before = |limit: Timestamp| {
            let g = &g;
            async move {
                let res =
                    g.db.ro_query(
                        &g.name,
                        "MATCH ()-[f:RELATES_TO]->() WHERE f.valid_at <= $t \
                         RETURN f.fact AS fact ORDER BY f.valid_at",
                        &Params::new().set("t", limit.as_unix_micros()),
                    )
                    .await
                    .unwrap();
                res.column_values("fact")
                    .map(|v| v.as_str().unwrap().to_owned())
                    .collect::<Vec<_>>()
            }
        };
        assert_eq!(
            facts_before(t("1969-12-31T23:59:59.999999Z")).await,
            ["1969-12-31T23:59:59.999999Z"]
        );
        assert_eq!(
            facts_before(t("2024-05-01T12:00:00.000001Z")).await,
            [
                "1969-12-31T23:59:59.999999Z",
                "1970-01-01T00:00:00Z",
                "2024-05-01T13:00:00.000001+02:00",
                "2024-05-01T11:30:00-00:30",
            ]
        );
        assert_eq!(facts_before(t("2100-01-01T00:00:00Z")).await.len(), 5);
    }
}

fn episode(content: &str, valid_at: &str) -> Episode {
    Episode::new(content, SourceKind::Text, "test", t(valid_at))
}

fn community(name: &str, emb: Option<Vec<f32>>) -> Community {
    Community {
        uuid: uuid::Uuid::new_v4(),
        name: name.into(),
        summary: format!("{name}: people who \"work\" together \\ ünïcode"),
        name_embedding: emb,
        created_at: t("1999-12-31T23:59:59.999999Z"),
    }
}

mod mentions {
    use super::*;

    #[tokio::test]
    async fn mentions_link_episodes_to_entities_and_resaving_creates_nothing() {
        let g = TestGraph::new("gs-ment").await;
        graph::build_indices(&g.db, &g.name, 2).await.unwrap();
        let (alice, acme, bob) = (
            entity("Alice", &["Person"], Some(vec![1.0, 0.0])),
            entity("Acme", &[], None),
            entity("Bob", &[], None),
        );
        graph::save_entities(&g.db, &g.name, &[alice.clone(), acme.clone(), bob.clone()])
            .await
            .unwrap();
        let late = episode("Alice joined Acme.", "2024-05-01T12:00:00Z");
        let early = episode("Alice was born.", "1969-07-20T20:17:40Z");
        for ep in [&late, &early] {
            graph::save_episode(&g.db, &g.name, ep).await.unwrap();
        }

        let stats = graph::save_mentions(&g.db, &g.name, late.uuid, &[alice.uuid, acme.uuid])
            .await
            .unwrap();
        assert_eq!(stats.relationships_created, 2);
        let stats = graph::save_mentions(&g.db, &g.name, early.uuid, &[alice.uuid])
            .await
            .unwrap();
        assert_eq!(stats.relationships_created, 1);

        // Again, and with a duplicate in the batch: nothing new, nothing changed.
        let stats = graph::save_mentions(
            &g.db,
            &g.name,
            late.uuid,
            &[acme.uuid, alice.uuid, acme.uuid],
        )
        .await
        .unwrap();
        assert_eq!(stats.relationships_created, 0);
        assert_eq!(stats.nodes_created, 0);
        assert_eq!(stats.properties_set, 0);
        assert_eq!(
            count(&g, "MATCH ()-[m:MENTIONS]->() RETURN count(m) AS c").await,
            3
        );

        let mut sorted_alice = alice.clone();
        sorted_alice.labels.sort();
        assert_eq!(
            graph::get_mentioned_entities(&g.db, &g.name, late.uuid)
                .await
                .unwrap(),
            vec![acme.clone(), sorted_alice]
        );
        assert_eq!(
            graph::get_episodes_mentioning(&g.db, &g.name, alice.uuid)
                .await
                .unwrap(),
            vec![early.clone(), late.clone()]
        );
        assert_eq!(
            graph::get_episodes_mentioning(&g.db, &g.name, bob.uuid)
                .await
                .unwrap(),
            vec![]
        );
        assert!(
            graph::get_mentioned_entities(&g.db, &g.name, uuid::Uuid::new_v4())
                .await
                .unwrap()
                .is_empty()
        );

        // The stored uuid is the derived one, and created_at is set.
        let res =
            g.db.ro_query(
                &g.name,
                "MATCH (:Episodic {uuid: $ep})-[m:MENTIONS]->(:Entity {uuid: $en}) \
                 RETURN m.uuid AS uuid, m.created_at AS created_at",
                &Params::new()
                    .set("ep", early.uuid.to_string())
                    .set("en", alice.uuid.to_string()),
            )
            .await
            .unwrap();
        assert_eq!(
            res.get(0, "uuid").and_then(Value::as_str),
            Some(
                graph::link_uuid("MENTIONS", early.uuid, alice.uuid)
                    .to_string()
                    .as_str()
            )
        );
        assert!(res.get(0, "created_at").and_then(Value::as_int).unwrap() > 0);
    }

    #[tokio::test]
    async fn a_mention_of_a_missing_episode_or_entity_is_rejected_before_anything_is_written() {
        let g = TestGraph::new("gs-ment-missing").await;
        let a = entity("Alice", &[], None);
        graph::save_entities(&g.db, &g.name, std::slice::from_ref(&a))
            .await
            .unwrap();
        let ep = episode("Alice.", "2024-05-01T12:00:00Z");
        graph::save_episode(&g.db, &g.name, &ep).await.unwrap();
        let ghost = uuid::Uuid::new_v4();

        let err = graph::save_mentions(&g.db, &g.name, ep.uuid, &[a.uuid, ghost])
            .await
            .unwrap_err();
        assert!(
            matches!(&err, Error::NotFound(m) if m.contains(&ghost.to_string())),
            "{err}"
        );
        let err = graph::save_mentions(&g.db, &g.name, ghost, &[a.uuid])
            .await
            .unwrap_err();
        assert!(
            matches!(&err, Error::NotFound(m) if m.contains(&ghost.to_string())),
            "{err}"
        );
        assert_eq!(count(&g, "MATCH ()-[r]->() RETURN count(r) AS c").await, 0);
        assert_eq!(
            count(
                &g,
                "MATCH (n) WHERE NOT n:GralkorIndexDebt RETURN count(n) AS c"
            )
            .await,
            2
        );
    }
}

mod communities {
    use super::*;

    #[tokio::test]
    async fn communities_and_members_round_trip_and_resaving_creates_nothing() {
        let g = TestGraph::new("gs-comm").await;
        graph::build_indices(&g.db, &g.name, 3).await.unwrap();
        let work = community("Work", Some(vec![0.5, -1.0, 1.0 / 3.0]));
        let home = community("Home", None);
        let all = [work.clone(), home.clone()];
        let stats = graph::save_communities(&g.db, &g.name, &all).await.unwrap();
        assert_eq!(stats.nodes_created, 2);
        assert_eq!(
            graph::get_communities(&g.db, &g.name, &[home.uuid, work.uuid])
                .await
                .unwrap(),
            vec![home.clone(), work.clone()]
        );
        let stats = graph::save_communities(&g.db, &g.name, &all).await.unwrap();
        assert_eq!(stats.nodes_created, 0);

        let (a, b) = (entity("Alice", &[], None), entity("Bob", &[], None));
        graph::save_entities(&g.db, &g.name, &[a.clone(), b.clone()])
            .await
            .unwrap();
        let stats = graph::save_community_members(&g.db, &g.name, work.uuid, &[b.uuid, a.uuid])
            .await
            .unwrap();
        assert_eq!(stats.relationships_created, 2);
        let stats = graph::save_community_members(&g.db, &g.name, work.uuid, &[a.uuid, b.uuid])
            .await
            .unwrap();
        assert_eq!(stats.relationships_created, 0);
        assert_eq!(stats.properties_set, 0);
        assert_eq!(
            graph::get_community_members(&g.db, &g.name, work.uuid)
                .await
                .unwrap(),
            vec![a, b]
        );
        assert!(
            graph::get_community_members(&g.db, &g.name, home.uuid)
                .await
                .unwrap()
                .is_empty()
        );
        assert_eq!(
            count(&g, "MATCH ()-[m:HAS_MEMBER]->() RETURN count(m) AS c").await,
            2
        );
    }

    #[tokio::test]
    async fn a_member_link_with_a_missing_endpoint_is_rejected_before_anything_is_written() {
        let g = TestGraph::new("gs-comm-missing").await;
        let c = community("Work", None);
        graph::save_communities(&g.db, &g.name, std::slice::from_ref(&c))
            .await
            .unwrap();
        let a = entity("Alice", &[], None);
        graph::save_entities(&g.db, &g.name, std::slice::from_ref(&a))
            .await
            .unwrap();
        let ghost = uuid::Uuid::new_v4();
        for (community, members) in [(c.uuid, vec![a.uuid, ghost]), (ghost, vec![a.uuid])] {
            let err = graph::save_community_members(&g.db, &g.name, community, &members)
                .await
                .unwrap_err();
            assert!(
                matches!(&err, Error::NotFound(m) if m.contains(&ghost.to_string())),
                "{err}"
            );
        }
        assert_eq!(count(&g, "MATCH ()-[r]->() RETURN count(r) AS c").await, 0);
    }
}

mod dimensions {
    use super::*;

    #[tokio::test]
    async fn an_embedding_of_the_wrong_dimension_is_rejected_before_anything_is_written() {
        let g = TestGraph::new("gs-dim").await;
        graph::build_indices(&g.db, &g.name, 3).await.unwrap();
        let ok = Some(vec![1.0, 2.0, 3.0]);

        let batch = [
            entity("A", &[], ok.clone()),
            entity("B", &[], None),
            entity("C", &[], Some(vec![1.0, 2.0])),
        ];
        let err = graph::save_entities(&g.db, &g.name, &batch)
            .await
            .unwrap_err();
        assert!(
            matches!(&err, Error::InvalidInput { field, .. } if field == "entities[2].name_embedding"),
            "{err}"
        );
        assert_eq!(
            count(
                &g,
                "MATCH (n) WHERE NOT n:GralkorIndexDebt RETURN count(n) AS c"
            )
            .await,
            0
        );

        let (a, b) = (entity("A", &[], ok.clone()), entity("B", &[], None));
        graph::save_entities(&g.db, &g.name, &[a.clone(), b.clone()])
            .await
            .unwrap();
        let mut good = EntityEdge::new(a.uuid, b.uuid, "KNOWS", "A knows B");
        good.fact_embedding = ok.clone();
        let mut bad = EntityEdge::new(b.uuid, a.uuid, "KNOWS", "B knows A");
        bad.fact_embedding = Some(vec![0.0; 4]);
        let err = graph::save_facts(&g.db, &g.name, &[good, bad])
            .await
            .unwrap_err();
        assert!(
            matches!(&err, Error::InvalidInput { field, .. } if field == "facts[1].fact_embedding"),
            "{err}"
        );
        assert_eq!(count(&g, "MATCH ()-[r]->() RETURN count(r) AS c").await, 0);

        let err = graph::save_communities(&g.db, &g.name, &[community("X", Some(vec![]))])
            .await
            .unwrap_err();
        assert!(
            matches!(&err, Error::InvalidInput { field, .. } if field == "communities[0].name_embedding"),
            "{err}"
        );
        assert_eq!(
            count(
                &g,
                "MATCH (n) WHERE NOT n:GralkorIndexDebt RETURN count(n) AS c"
            )
            .await,
            2
        );
    }

    #[tokio::test]
    async fn without_vector_indices_any_dimension_is_accepted() {
        let g = TestGraph::new("gs-dim-none").await;
        let stats = graph::save_communities(
            &g.db,
            &g.name,
            &[
                community("X", Some(vec![1.0])),
                community("Y", Some(vec![1.0, 2.0])),
            ],
        )
        .await
        .unwrap();
        assert_eq!(stats.nodes_created, 2);
    }
}

mod debt {
    use super::*;
    use gralkor::graph::store::{VectorIndex, vector_debt};

    async fn stale(g: &TestGraph, index: VectorIndex) -> i64 {
        vector_debt(&g.db, &g.name)
            .await
            .unwrap()
            .into_iter()
            .find_map(|(i, s)| (i == index).then_some(s))
            .unwrap()
    }

    /// Measured on the server (see `store::debt`): creating a record with its vector
    /// leaves no stale entry, updating one leaves one. A bulk load of new records
    /// must not be counted as debt (it made every vector query of a 10,000-fact load
    /// ask for 10,000 extra neighbours).
    #[tokio::test]
    async fn bulk_writes_count_only_the_records_they_update() {
        let g = TestGraph::new("store-debt").await;
        graph::build_indices(&g.db, &g.name, 3).await.unwrap();
        let a = entity("Alice", &[], Some(vec![1.0, 0.0, 0.0]));
        let b = entity("Acme", &["Company"], Some(vec![0.0, 1.0, 0.0]));
        graph::save_entities(&g.db, &g.name, &[a.clone(), b.clone()])
            .await
            .unwrap();
        let mut f = EntityEdge::new(a.uuid, b.uuid, "WORKS_AT", "Alice works at Acme");
        f.fact_embedding = Some(vec![1.0, 1.0, 0.0]);
        graph::save_facts(&g.db, &g.name, std::slice::from_ref(&f))
            .await
            .unwrap();
        assert_eq!(stale(&g, VectorIndex::Entity).await, 0);
        assert_eq!(stale(&g, VectorIndex::Fact).await, 0);
        // Written again (with a new entity beside them): the stored ones are updates.
        let c = entity("Bob", &[], Some(vec![0.0, 0.0, 1.0]));
        graph::save_entities(&g.db, &g.name, &[a, b, c])
            .await
            .unwrap();
        graph::save_facts(&g.db, &g.name, &[f]).await.unwrap();
        assert_eq!(stale(&g, VectorIndex::Entity).await, 2);
        assert_eq!(stale(&g, VectorIndex::Fact).await, 1);
    }
}
