//! `build_communities` on a real FalkorDB with the scripted model and the hash embedder.
//! Mirrors `test-trees/graph-communities.md`.

use crate::common;

use std::collections::BTreeSet;

use async_trait::async_trait;
use common::TestGraph;
use gralkor::Error;
use gralkor::falkordb::{Params, Value};
use gralkor::graph::store::communities::{count_communities, replace_communities};
use gralkor::graph::{
    self, COMMUNITY_SCHEMA_NAME, Community, CommunityOptions, CommunityReport, EntityEdge,
    EntityNode, Timestamp, build_communities,
};
use gralkor::llm::doubles::{HashEmbedder, ScriptedModel};
use gralkor::llm::{Embedder, GenerateRequest, ModelSize};
use serde_json::{Value as Json, json};
use uuid::Uuid;

const DIM: usize = 16;

/// The communities of a request's user message: `(id, member lines)`.
fn communities_in(request: &GenerateRequest) -> Vec<(u64, Vec<String>)> {
    let text = &request.messages.last().unwrap().content;
    let mut out: Vec<(u64, Vec<String>)> = Vec::new();
    for line in text.lines() {
        if let Some(rest) = line.strip_prefix("<COMMUNITY id=\"") {
            let id = rest.split('"').next().unwrap().parse().unwrap();
            out.push((id, Vec::new()));
        } else if let Some(member) = line.strip_prefix("- ") {
            out.last_mut().unwrap().1.push(member.to_string());
        }
    }
    out
}

/// The name the scripted model gives a community: from its first member line.
fn model_name(members: &[String]) -> String {
    let first = members[0].split(':').next().unwrap();
    format!("Circle of {first}")
}

/// A model that names every community it is asked about after its first member.
fn naming_model() -> ScriptedModel {
    ScriptedModel::new().respond_with(|request| {
        let communities: Vec<Json> = communities_in(request)
            .into_iter()
            .map(|(id, members)| {
                json!({"id": id, "name": model_name(&members),
                       "summary": format!("{} members shown.", members.len())})
            })
            .collect();
        Ok(json!({ "communities": communities }))
    })
}

/// A graph with indices, entities (`name: summary`) and current facts between them
/// (by index). Returns the entities' uuids in the order given.
async fn seed(g: &TestGraph, entities: &[&str], facts: &[(usize, usize)]) -> Vec<Uuid> {
    graph::build_indices(&g.db, &g.name, DIM as u32)
        .await
        .unwrap();
    let nodes: Vec<EntityNode> = entities
        .iter()
        .map(|name| {
            let mut e = EntityNode::new(*name);
            e.summary = format!("{name} is part of the story.");
            e
        })
        .collect();
    graph::save_entities(&g.db, &g.name, &nodes).await.unwrap();
    let edges: Vec<EntityEdge> = facts
        .iter()
        .map(|&(a, b)| {
            let text = format!("{} knows {}.", entities[a], entities[b]);
            EntityEdge::new(nodes[a].uuid, nodes[b].uuid, "KNOWS", text)
        })
        .collect();
    graph::save_facts(&g.db, &g.name, &edges).await.unwrap();
    nodes.iter().map(|n| n.uuid).collect()
}

async fn count(g: &TestGraph, q: &str) -> i64 {
    let res = g.db.ro_query(&g.name, q, &Params::new()).await.unwrap();
    res.get(0, "c").and_then(Value::as_int).unwrap()
}

async fn build(
    g: &TestGraph,
    model: &ScriptedModel,
    options: &CommunityOptions,
) -> CommunityReport {
    let embedder = HashEmbedder::new(DIM);
    build_communities(&g.db, &g.name, model, &embedder, options)
        .await
        .unwrap()
}

/// The member uuids of each stored community, as sets, by community uuid order given.
async fn member_sets(g: &TestGraph, uuids: &[Uuid]) -> Vec<BTreeSet<Uuid>> {
    let mut out = Vec::new();
    for u in uuids {
        let members = graph::get_community_members(&g.db, &g.name, *u)
            .await
            .unwrap();
        out.push(members.iter().map(|m| m.uuid).collect());
    }
    out
}

fn set(uuids: &[Uuid], picks: &[usize]) -> BTreeSet<Uuid> {
    picks.iter().map(|&i| uuids[i]).collect()
}

/// Alice, Acme and Bob linked three ways; Carol and Dave twice; Eve alone.
const PEOPLE: [&str; 6] = ["Alice", "Acme", "Bob", "Carol", "Dave", "Eve"];
const PEOPLE_FACTS: [(usize, usize); 5] = [(0, 1), (2, 1), (0, 2), (3, 4), (4, 3)];

mod building {
    use super::*;

    #[tokio::test]
    async fn communities_are_found_named_embedded_and_persisted_with_members() {
        let g = TestGraph::new("gc-found").await;
        let ids = seed(&g, &PEOPLE, &PEOPLE_FACTS).await;
        let model = naming_model();
        let embedder = HashEmbedder::new(DIM);
        let report = build_communities(
            &g.db,
            &g.name,
            &model,
            &embedder,
            &CommunityOptions::default(),
        )
        .await
        .unwrap();

        assert_eq!(report.communities, 2);
        assert_eq!(report.members, 5);
        assert_eq!(report.linked_entities, 5);
        assert_eq!((report.llm_calls, report.embedding_requests), (1, 1));
        assert_eq!((report.summarised, report.fallback_named), (2, 0));
        assert_eq!(report.replaced, 0);
        assert!(report.converged);
        assert!(report.tokens.total() > 0);
        assert_eq!(
            member_sets(&g, &report.uuids).await,
            vec![set(&ids, &[0, 1, 2]), set(&ids, &[3, 4])],
            "largest community first; Eve, without facts, in none"
        );

        let stored = graph::get_communities(&g.db, &g.name, &report.uuids)
            .await
            .unwrap();
        assert_eq!(stored.len(), 2);
        for c in &stored {
            assert!(c.name.starts_with("Circle of "), "{c:?}");
            assert!(c.summary.ends_with("members shown."), "{c:?}");
            assert_eq!(c.name_embedding.as_ref(), Some(&embedder.vector(&c.name)));
        }
        let mut names: Vec<String> = stored.iter().map(|c| c.name.clone()).collect();
        names.sort();
        assert_eq!(
            embedder.embedded_texts().len(),
            2,
            "one request, every name"
        );
        let mut embedded = embedder.embedded_texts();
        embedded.sort();
        assert_eq!(embedded, names);
        assert_eq!(
            count(&g, "MATCH (c:Community) RETURN count(c) AS c").await,
            2
        );
        assert_eq!(
            count(
                &g,
                "MATCH (:Community)-[m:HAS_MEMBER]->(:Entity) RETURN count(m) AS c"
            )
            .await,
            5
        );
    }

    #[tokio::test]
    async fn the_request_carries_the_schema_small_model_label_and_member_material() {
        let g = TestGraph::new("gc-request").await;
        seed(&g, &PEOPLE, &PEOPLE_FACTS).await;
        let model = naming_model();
        build(
            &g,
            &model,
            &CommunityOptions::default().with_label("nightly"),
        )
        .await;
        let calls = model.calls_for(COMMUNITY_SCHEMA_NAME);
        assert_eq!(calls.len(), 1);
        let call = &calls[0];
        assert_eq!(call.size, ModelSize::Small);
        assert_eq!(call.label, "nightly");
        assert!(call.messages[0].content.contains("copied exactly"));
        let communities = communities_in(call);
        assert_eq!(communities.len(), 2);
        assert_eq!(communities[0].0, 0);
        assert_eq!(communities[0].1.len(), 3);
        assert!(
            communities[0]
                .1
                .contains(&"Alice: Alice is part of the story.".to_string()),
            "{communities:?}"
        );
        assert!(!call.messages[1].content.contains("Eve"));
    }

    #[tokio::test]
    async fn large_communities_show_a_capped_number_of_members_with_cut_summaries() {
        let g = TestGraph::new("gc-large").await;
        let names: Vec<String> = (0..30).map(|i| format!("Member {i:02}")).collect();
        let refs: Vec<&str> = names.iter().map(String::as_str).collect();
        // A star around member 00, so 00 is the most connected and shown first.
        let facts: Vec<(usize, usize)> = (1..30).map(|i| (0, i)).collect();
        seed(&g, &refs, &facts).await;
        let model = naming_model();
        let options = CommunityOptions::default()
            .with_max_members_in_prompt(5)
            .with_member_summary_chars(8);
        let report = build(&g, &model, &options).await;
        assert_eq!((report.communities, report.members), (1, 30));
        let call = &model.calls()[0];
        let communities = communities_in(call);
        assert_eq!(communities[0].1.len(), 6, "5 members and the rest line");
        assert_eq!(communities[0].1[0], "Member 00: Member 0…");
        assert_eq!(communities[0].1[5], "… and 25 more members");
        assert!(call.messages[1].content.contains("members=\"30\""));
    }

    #[tokio::test]
    async fn a_rerun_replaces_the_previous_communities_without_duplicates() {
        let g = TestGraph::new("gc-rerun").await;
        let ids = seed(&g, &PEOPLE, &PEOPLE_FACTS).await;
        let model = naming_model();
        let first = build(&g, &model, &CommunityOptions::default()).await;
        let second = build(&g, &model, &CommunityOptions::default()).await;
        assert_eq!(second.replaced, 2);
        assert_eq!(second.uuids, first.uuids, "same clusters, same uuids");
        assert_eq!(
            count(&g, "MATCH (c:Community) RETURN count(c) AS c").await,
            2
        );
        assert_eq!(
            count(&g, "MATCH ()-[m:HAS_MEMBER]->() RETURN count(m) AS c").await,
            5
        );

        // Eve meets Carol: the smaller community grows and gets a new identity.
        let edge = EntityEdge::new(ids[5], ids[3], "KNOWS", "Eve knows Carol.");
        graph::save_facts(&g.db, &g.name, &[edge]).await.unwrap();
        let third = build(&g, &model, &CommunityOptions::default()).await;
        assert_eq!(
            (third.replaced, third.communities, third.members),
            (2, 2, 6)
        );
        assert!(
            third.uuids.contains(&first.uuids[0]),
            "the triangle keeps its uuid"
        );
        assert!(!third.uuids.contains(&first.uuids[1]));
        let mut sets = member_sets(&g, &third.uuids).await;
        sets.sort();
        let mut want = vec![set(&ids, &[0, 1, 2]), set(&ids, &[3, 4, 5])];
        want.sort();
        assert_eq!(sets, want);
        assert!(
            graph::get_communities(&g.db, &g.name, &first.uuids[1..])
                .await
                .unwrap()
                .is_empty()
        );
        assert_eq!(
            count(&g, "MATCH ()-[m:HAS_MEMBER]->() RETURN count(m) AS c").await,
            6
        );
    }

    #[tokio::test]
    async fn expired_facts_are_ignored_and_stale_communities_removed() {
        let g = TestGraph::new("gc-expired").await;
        let ids = seed(&g, &["Alice", "Acme", "Carol", "Dave"], &[(2, 3)]).await;
        let mut old = EntityEdge::new(ids[0], ids[1], "WORKS_AT", "Alice worked at Acme.");
        old.expired_at = Some(Timestamp::now());
        graph::save_facts(&g.db, &g.name, &[old]).await.unwrap();
        let model = naming_model();
        let report = build(&g, &model, &CommunityOptions::default()).await;
        assert_eq!((report.communities, report.linked_entities), (1, 2));
        assert_eq!(
            member_sets(&g, &report.uuids).await,
            vec![set(&ids, &[2, 3])]
        );

        // Once Carol and Dave's fact is retired too, a rebuild leaves no community.
        g.db.query(
            &g.name,
            "MATCH ()-[f:RELATES_TO]->() SET f.expired_at = $t",
            &Params::new().set("t", Timestamp::now().0),
        )
        .await
        .unwrap();
        let calls_before = model.calls().len();
        let again = build(&g, &model, &CommunityOptions::default()).await;
        assert_eq!((again.communities, again.replaced), (0, 1));
        assert_eq!((again.llm_calls, again.embedding_requests), (0, 0));
        assert_eq!(model.calls().len(), calls_before);
        assert_eq!(
            count(&g, "MATCH (c:Community) RETURN count(c) AS c").await,
            0
        );
    }

    #[tokio::test]
    async fn an_empty_graph_costs_no_call_and_is_not_created() {
        let g = TestGraph::new("gc-empty").await;
        let model = naming_model();
        let embedder = HashEmbedder::new(DIM);
        let report = build_communities(
            &g.db,
            &g.name,
            &model,
            &embedder,
            &CommunityOptions::default(),
        )
        .await
        .unwrap();
        assert_eq!(
            (report.communities, report.members, report.replaced),
            (0, 0, 0)
        );
        assert_eq!((report.llm_calls, report.embedding_requests), (0, 0));
        assert_eq!(
            (
                report.linked_entities,
                report.summarised,
                report.fallback_named
            ),
            (0, 0, 0)
        );
        assert!(report.uuids.is_empty());
        assert!(model.calls().is_empty());
        assert!(embedder.embedded_texts().is_empty());
        assert!(!g.db.list_graphs().await.unwrap().contains(&g.name));

        // Entities without facts: still nothing to do.
        seed(&g, &["Alice", "Bob"], &[]).await;
        let report = build(&g, &model, &CommunityOptions::default()).await;
        assert_eq!((report.communities, report.linked_entities), (0, 0));
        assert!(model.calls().is_empty());
        assert_eq!(
            count(&g, "MATCH (c:Community) RETURN count(c) AS c").await,
            0
        );
    }

    #[tokio::test]
    async fn two_runs_at_once_leave_one_set_of_communities() {
        let g = TestGraph::new("gc-concurrent").await;
        seed(&g, &PEOPLE, &PEOPLE_FACTS).await;
        let (m1, m2) = (naming_model(), naming_model());
        let (e1, e2) = (HashEmbedder::new(DIM), HashEmbedder::new(DIM));
        let options = CommunityOptions::default();
        let (r1, r2) = tokio::join!(
            build_communities(&g.db, &g.name, &m1, &e1, &options),
            build_communities(&g.db, &g.name, &m2, &e2, &options),
        );
        let (r1, r2) = (r1.unwrap(), r2.unwrap());
        assert_eq!(r1.uuids, r2.uuids);
        assert_eq!(
            r1.replaced + r2.replaced,
            2,
            "the second write replaced the first"
        );
        assert_eq!(
            count(&g, "MATCH (c:Community) RETURN count(c) AS c").await,
            2
        );
        assert_eq!(
            count(&g, "MATCH ()-[m:HAS_MEMBER]->() RETURN count(m) AS c").await,
            5
        );
    }

    #[tokio::test]
    async fn graphs_are_isolated() {
        let a = TestGraph::new("gc-iso-a").await;
        let b = TestGraph::new("gc-iso-b").await;
        seed(&a, &PEOPLE, &PEOPLE_FACTS).await;
        seed(&b, &["Xavier", "Yolanda"], &[(0, 1)]).await;
        let model = naming_model();
        let in_b = build(&b, &model, &CommunityOptions::default()).await;
        let in_a = build(&a, &model, &CommunityOptions::default()).await;
        assert_eq!((in_a.communities, in_a.replaced), (2, 0));
        assert_eq!(in_b.communities, 1);
        let b_stored = graph::get_communities(&b.db, &b.name, &in_b.uuids)
            .await
            .unwrap();
        assert_eq!(b_stored.len(), 1, "building in a leaves b's community");
        assert_eq!(b_stored[0].name, "Circle of Xavier");
        assert!(
            graph::get_communities(&a.db, &a.name, &in_b.uuids)
                .await
                .unwrap()
                .is_empty()
        );
        assert_ne!(in_a.uuids[1], in_b.uuids[0]);
    }
}

mod cost {
    use super::*;

    /// `n` separate pairs of entities: `n` communities of two.
    async fn pairs(g: &TestGraph, n: usize) -> Vec<Uuid> {
        let names: Vec<String> = (0..2 * n).map(|i| format!("Person {i:03}")).collect();
        let refs: Vec<&str> = names.iter().map(String::as_str).collect();
        let facts: Vec<(usize, usize)> = (0..n).map(|i| (2 * i, 2 * i + 1)).collect();
        seed(g, &refs, &facts).await
    }

    #[tokio::test]
    async fn model_calls_are_ceil_of_communities_per_call() {
        let g = TestGraph::new("gc-bound").await;
        pairs(&g, 23).await;
        let model = naming_model();
        let embedder = HashEmbedder::new(DIM);
        let options = CommunityOptions::default().with_communities_per_call(5);
        let report = build_communities(&g.db, &g.name, &model, &embedder, &options)
            .await
            .unwrap();
        assert_eq!(report.communities, 23);
        assert_eq!(report.llm_calls, 5, "⌈23 / 5⌉");
        assert_eq!(model.calls().len(), 5);
        let mut sizes: Vec<usize> = model
            .calls()
            .iter()
            .map(|c| communities_in(c).len())
            .collect();
        sizes.sort();
        assert_eq!(sizes, vec![3, 5, 5, 5, 5]);
        assert_eq!((report.summarised, report.fallback_named), (23, 0));
        assert_eq!(report.embedding_requests, 1);
        assert_eq!(embedder.embedded_texts().len(), 23);
    }

    #[tokio::test]
    async fn the_call_cap_names_the_rest_from_their_members() {
        let g = TestGraph::new("gc-cap").await;
        pairs(&g, 23).await;
        let model = naming_model();
        let options = CommunityOptions::default()
            .with_communities_per_call(5)
            .with_max_llm_calls(2);
        let report = build(&g, &model, &options).await;
        assert_eq!((report.communities, report.llm_calls), (23, 2));
        assert_eq!((report.summarised, report.fallback_named), (10, 13));
        let stored = graph::get_communities(&g.db, &g.name, &report.uuids)
            .await
            .unwrap();
        let fallback: Vec<&Community> = stored
            .iter()
            .filter(|c| !c.name.starts_with("Circle of "))
            .collect();
        assert_eq!(fallback.len(), 13);
        for c in fallback {
            assert!(
                c.name.starts_with("Person ") && c.name.contains(" and Person "),
                "{c:?}"
            );
            assert!(c.summary.is_empty());
            assert!(c.name_embedding.is_some());
        }

        let none = build(&g, &model, &options.clone().with_max_llm_calls(0)).await;
        assert_eq!((none.llm_calls, none.fallback_named), (0, 23));
        assert_eq!(model.calls().len(), 2);
    }

    #[tokio::test]
    async fn answers_that_skip_or_blank_a_community_fall_back_to_member_names() {
        let g = TestGraph::new("gc-partial").await;
        seed(&g, &PEOPLE, &PEOPLE_FACTS).await;
        // Answers only id 1 (the pair), with a blank name for id 0 and an unknown id 7.
        let model = ScriptedModel::new().answer(
            COMMUNITY_SCHEMA_NAME,
            json!({"communities": [
                {"id": 0, "name": "  ", "summary": "ignored"},
                {"id": 7, "name": "Nobody", "summary": "unknown id"},
                {"id": 1, "name": "Chess partners", "summary": "Carol and Dave play chess."},
                {"id": 1, "name": "Second answer", "summary": "ignored"},
            ]}),
        );
        let report = build(&g, &model, &CommunityOptions::default()).await;
        assert_eq!((report.summarised, report.fallback_named), (1, 1));
        let stored = graph::get_communities(&g.db, &g.name, &report.uuids)
            .await
            .unwrap();
        let names: BTreeSet<&str> = stored.iter().map(|c| c.name.as_str()).collect();
        assert!(names.contains("Chess partners"), "{names:?}");
        assert!(
            names
                .iter()
                .any(|n| n.contains(", ") && n.contains(" and ")),
            "the triangle is named from its three members: {names:?}"
        );
    }
}

mod failures {
    use super::*;

    /// An embedder that returns one vector too few.
    #[derive(Debug)]
    struct ShortEmbedder;

    #[async_trait]
    impl Embedder for ShortEmbedder {
        fn dimension(&self) -> usize {
            DIM
        }
        async fn embed(&self, texts: &[String], _label: &str) -> gralkor::Result<Vec<Vec<f32>>> {
            Ok(vec![vec![0.5; DIM]; texts.len().saturating_sub(1)])
        }
        fn provider(&self) -> &str {
            "short"
        }
        fn model(&self) -> &str {
            "short"
        }
    }

    #[tokio::test]
    async fn a_model_or_embedder_failure_leaves_the_previous_communities_intact() {
        let g = TestGraph::new("gc-fail").await;
        let ids = seed(&g, &PEOPLE, &PEOPLE_FACTS).await;
        let before = build(&g, &naming_model(), &CommunityOptions::default()).await;
        let stored_before = graph::get_communities(&g.db, &g.name, &before.uuids)
            .await
            .unwrap();
        // A new fact would change the clusters, if the rebuild got through.
        let edge = EntityEdge::new(ids[5], ids[3], "KNOWS", "Eve knows Carol.");
        graph::save_facts(&g.db, &g.name, &[edge]).await.unwrap();

        let failing = ScriptedModel::new().respond_with(|_| {
            Err(Error::Provider {
                provider: "scripted".into(),
                status: Some(503),
                message: "overloaded".into(),
                retry_after: None,
                source: None,
            })
        });
        let err = build_communities(
            &g.db,
            &g.name,
            &failing,
            &HashEmbedder::new(DIM),
            &CommunityOptions::default(),
        )
        .await
        .unwrap_err();
        assert!(matches!(err, Error::Provider { .. }), "{err:?}");

        let err = build_communities(
            &g.db,
            &g.name,
            &naming_model(),
            &ShortEmbedder,
            &CommunityOptions::default(),
        )
        .await
        .unwrap_err();
        assert!(matches!(err, Error::ModelOutput { .. }), "{err:?}");

        let stored_after = graph::get_communities(&g.db, &g.name, &before.uuids)
            .await
            .unwrap();
        assert_eq!(stored_after, stored_before);
        assert_eq!(
            count(&g, "MATCH (c:Community) RETURN count(c) AS c").await,
            2
        );
        assert_eq!(
            member_sets(&g, &before.uuids).await,
            vec![set(&ids, &[0, 1, 2]), set(&ids, &[3, 4])]
        );
    }

    #[tokio::test]
    async fn bad_options_and_graph_ids_are_rejected_before_any_call() {
        let g = TestGraph::new("gc-bad").await;
        seed(&g, &PEOPLE, &PEOPLE_FACTS).await;
        let model = naming_model();
        let embedder = HashEmbedder::new(DIM);
        for (options, field) in [
            (
                CommunityOptions::default().with_max_rounds(0),
                "options.max_rounds",
            ),
            (
                CommunityOptions::default().with_max_members_in_prompt(0),
                "options.max_members_in_prompt",
            ),
            (CommunityOptions::default().with_label(""), "options.label"),
        ] {
            let err = build_communities(&g.db, &g.name, &model, &embedder, &options)
                .await
                .unwrap_err();
            assert!(
                matches!(&err, Error::InvalidInput { field: f, .. } if f == field),
                "{err:?}"
            );
        }
        let err = build_communities(&g.db, " ", &model, &embedder, &CommunityOptions::default())
            .await
            .unwrap_err();
        assert!(matches!(&err, Error::InvalidInput { field, .. } if field == "graph"));
        assert!(model.calls().is_empty());
        assert!(embedder.embedded_texts().is_empty());
        assert_eq!(count_communities(&g.db, &g.name).await.unwrap(), 0);
    }

    #[tokio::test]
    async fn a_wrong_embedding_length_is_rejected_before_anything_is_deleted() {
        let g = TestGraph::new("gc-dim").await;
        let ids = seed(&g, &PEOPLE, &PEOPLE_FACTS).await;
        let before = build(&g, &naming_model(), &CommunityOptions::default()).await;
        let mut wrong = Community {
            uuid: Uuid::new_v4(),
            name: "Wrong".into(),
            summary: String::new(),
            name_embedding: Some(vec![1.0; DIM + 1]),
            created_at: Timestamp::now(),
        };
        let err = replace_communities(&g.db, &g.name, &[(wrong.clone(), vec![ids[0]])])
            .await
            .unwrap_err();
        assert!(
            matches!(&err, Error::InvalidInput { field, .. } if field == "communities[0].name_embedding"),
            "{err:?}"
        );
        assert_eq!(count_communities(&g.db, &g.name).await.unwrap(), 2);
        assert_eq!(
            graph::get_communities(&g.db, &g.name, &before.uuids)
                .await
                .unwrap()
                .len(),
            2
        );
        // A member uuid with no entity behind it is skipped.
        wrong.name_embedding = None;
        let stats = replace_communities(&g.db, &g.name, &[(wrong, vec![ids[0], Uuid::new_v4()])])
            .await
            .unwrap();
        assert_eq!(
            (
                stats.nodes_deleted,
                stats.nodes_created,
                stats.relationships_created
            ),
            (2, 1, 1)
        );
    }

    /// The assumption `replace_communities` rests on: a FalkorDB statement that fails
    /// while running (here after deleting and creating) is rolled back entirely.
    #[tokio::test]
    async fn a_statement_that_fails_midway_is_rolled_back() {
        let g = TestGraph::new("gc-rollback").await;
        seed(&g, &PEOPLE, &PEOPLE_FACTS).await;
        let before = build(&g, &naming_model(), &CommunityOptions::default()).await;
        let err =
            g.db.query(
                &g.name,
                "OPTIONAL MATCH (old:Community) DETACH DELETE old \
                 WITH count(*) AS swept \
                 UNWIND [1, 0] AS i \
                 CREATE (c:Community {uuid: 'x', n: 10 / i}) \
                 RETURN c",
                &Params::new(),
            )
            .await
            .unwrap_err();
        assert!(err.to_string().contains("Division by zero"), "{err}");
        assert_eq!(
            count(&g, "MATCH (c:Community) RETURN count(c) AS c").await,
            2
        );
        assert_eq!(
            count(&g, "MATCH ()-[m:HAS_MEMBER]->() RETURN count(m) AS c").await,
            5
        );
        assert_eq!(
            graph::get_communities(&g.db, &g.name, &before.uuids)
                .await
                .unwrap()
                .len(),
            2
        );
    }
}
