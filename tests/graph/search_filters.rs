//! Filters and time on a real FalkorDB: current facts by default, history, as-of
//! queries across an invalidation, OR-of-AND date groups, types, uuids and labels.
//! Mirrors `test-trees/graph-search.md` (filters and time).

use crate::common;
use crate::graph_search_support;

use std::collections::BTreeSet;

use common::graph::t;
use gralkor::graph::search::{
    self, DateFilter, EDGE_HYBRID_SEARCH_RRF, Methods, RerankerKind, ScopeConfig, SearchConfig,
    SearchFilters, SearchRequest, TimeMode,
};
use gralkor::graph::{self, EntityEdge};
use graph_search_support::{World, world};

/// Every fact names Alice, Bob or Carol.
const ALL: &str = "Alice Bob Carol";

fn cfg(methods: Methods) -> SearchConfig {
    SearchConfig {
        facts: Some(ScopeConfig::new(methods, RerankerKind::Rrf).min_similarity(-1.0)),
        ..EDGE_HYBRID_SEARCH_RRF
    }
}

async fn keys_with(
    w: &World,
    query: &str,
    methods: Methods,
    filters: SearchFilters,
) -> BTreeSet<&'static str> {
    let req = SearchRequest::new(query, cfg(methods)).filters(filters);
    let r = search::search(&w.g.db, &w.g.name, &req, Some(&w.emb), None)
        .await
        .unwrap();
    r.facts.iter().map(|h| w.fact_key(h.fact.uuid)).collect()
}

async fn keys(w: &World, filters: SearchFilters) -> BTreeSet<&'static str> {
    keys_with(w, ALL, Methods::FULLTEXT, filters).await
}

fn set<const N: usize>(k: [&'static str; N]) -> BTreeSet<&'static str> {
    k.into_iter().collect()
}

fn at(time: &str) -> SearchFilters {
    SearchFilters {
        time: TimeMode::AsOf(t(time)),
        ..SearchFilters::default()
    }
}

fn history() -> SearchFilters {
    SearchFilters {
        time: TimeMode::History,
        ..SearchFilters::default()
    }
}

mod time {
    use super::*;

    #[tokio::test]
    async fn current_facts_exclude_retired_and_ended_ones_but_include_plans() {
        let w = world("gsf-current").await;
        assert_eq!(
            keys(&w, SearchFilters::default()).await,
            set(["globex", "paris", "knows", "plan"])
        );
        // The same through the vector index and through the hybrid recipe.
        let v = keys_with(
            &w,
            "Alice works at Acme as an engineer",
            Methods::VECTOR,
            SearchFilters::default(),
        )
        .await;
        assert!(!v.contains("acme") && !v.contains("visit"), "{v:?}");
        let h = keys_with(
            &w,
            "Alice works at Acme",
            Methods::HYBRID,
            SearchFilters::default(),
        )
        .await;
        assert!(!h.contains("acme"), "{h:?}");
    }

    #[tokio::test]
    async fn history_returns_every_fact() {
        let w = world("gsf-history").await;
        assert_eq!(
            keys(&w, history()).await,
            set(["acme", "globex", "paris", "visit", "knows", "plan"])
        );
    }

    #[tokio::test]
    async fn as_of_returns_what_was_true_then_across_an_invalidation() {
        let w = world("gsf-asof").await;
        // Before the move to Globex: Acme (retired later, but true then).
        assert_eq!(
            keys(&w, at("2024-06-01T00:00:00Z")).await,
            set(["acme", "paris", "knows"])
        );
        // During Bob's visit.
        assert_eq!(
            keys(&w, at("2024-04-05T00:00:00Z")).await,
            set(["acme", "paris", "visit", "knows"])
        );
        // The day of the move: spans are half-open, so Globex and not Acme.
        assert_eq!(
            keys(&w, at("2025-03-01T00:00:00Z")).await,
            set(["globex", "paris", "knows"])
        );
        assert_eq!(
            keys(&w, at("2025-06-01T00:00:00Z")).await,
            set(["globex", "paris", "knows"])
        );
        // Before anything with a date: only the undated fact.
        assert_eq!(keys(&w, at("2019-01-01T00:00:00Z")).await, set(["knows"]));
        // After the plan starts.
        assert!(keys(&w, at("2030-06-01T00:00:00Z")).await.contains("plan"));
        // Through the vector index too.
        let v = keys_with(
            &w,
            "Alice works at Globex as a manager",
            Methods::VECTOR,
            at("2024-06-01T00:00:00Z"),
        )
        .await;
        assert!(v.contains("acme") && !v.contains("globex"), "{v:?}");
        // The request helper sets the same mode.
        let req = SearchRequest::new(ALL, cfg(Methods::FULLTEXT)).as_of(t("2024-06-01T00:00:00Z"));
        assert_eq!(req.filters.time, TimeMode::AsOf(t("2024-06-01T00:00:00Z")));
    }

    #[tokio::test]
    async fn a_fact_retired_without_an_end_date_is_true_until_it_was_retired() {
        let w = world("gsf-expired").await;
        let mut f = EntityEdge::new(w.e["Bob"], w.e["Paris"], "OWNS", "Bob owns a flat in Paris");
        f.expired_at = Some(t("2025-01-01T00:00:00Z"));
        f.created_at = t("2024-01-01T00:00:00Z");
        graph::save_facts(&w.g.db, &w.g.name, &[f.clone()])
            .await
            .unwrap();
        let found = |filters: SearchFilters| {
            let req = SearchRequest::new("flat", cfg(Methods::FULLTEXT)).filters(filters);
            let w = &w;
            async move {
                let r = search::search(&w.g.db, &w.g.name, &req, None, None)
                    .await
                    .unwrap();
                r.facts.iter().map(|h| h.fact.uuid).collect::<Vec<_>>()
            }
        };
        assert_eq!(found(at("2024-12-31T00:00:00Z")).await, [f.uuid]);
        assert!(found(at("2025-01-02T00:00:00Z")).await.is_empty());
        assert!(found(SearchFilters::default()).await.is_empty());
        assert_eq!(found(history()).await, [f.uuid]);
    }
}

mod dates {
    use super::*;

    fn valid_at(groups: Vec<Vec<DateFilter>>) -> SearchFilters {
        SearchFilters {
            valid_at: groups,
            ..history()
        }
    }

    #[tokio::test]
    async fn or_groups_do_not_overwrite_each_other() {
        let w = world("gsf-or").await;
        let y2020 = vec![
            DateFilter::Ge(t("2020-01-01T00:00:00Z")),
            DateFilter::Lt(t("2021-01-01T00:00:00Z")),
        ];
        let y2025 = vec![
            DateFilter::Ge(t("2025-01-01T00:00:00Z")),
            DateFilter::Lt(t("2026-01-01T00:00:00Z")),
        ];
        assert_eq!(
            keys(&w, valid_at(vec![y2020.clone()])).await,
            set(["paris"])
        );
        assert_eq!(
            keys(&w, valid_at(vec![y2025.clone()])).await,
            set(["globex"])
        );
        // With parameters named by position only, the second group's dates would
        // replace the first's and this would be {globex}.
        assert_eq!(
            keys(&w, valid_at(vec![y2020, y2025])).await,
            set(["paris", "globex"])
        );
    }

    #[tokio::test]
    async fn null_checks_inequalities_and_several_fields_combine() {
        let w = world("gsf-dates").await;
        let f = SearchFilters {
            invalid_at: vec![vec![DateFilter::IsNotNull]],
            ..history()
        };
        assert_eq!(keys(&w, f).await, set(["acme", "visit"]));
        let f = SearchFilters {
            invalid_at: vec![vec![DateFilter::IsNull]],
            expired_at: vec![vec![DateFilter::IsNull]],
            ..history()
        };
        assert_eq!(keys(&w, f).await, set(["globex", "paris", "knows", "plan"]));
        // A missing date does not match an inequality.
        let f = valid_at(vec![vec![DateFilter::Ne(t("2020-06-01T00:00:00Z"))]]);
        assert_eq!(keys(&w, f).await, set(["acme", "globex", "visit", "plan"]));
        let f = valid_at(vec![
            vec![DateFilter::Le(t("2024-01-15T00:00:00Z"))],
            vec![DateFilter::IsNull],
        ]);
        assert_eq!(keys(&w, f).await, set(["acme", "paris", "knows"]));
        let f = SearchFilters {
            created_at: vec![vec![DateFilter::Gt(t("2025-06-01T00:00:00Z"))]],
            ..history()
        };
        assert!(keys(&w, f).await.is_empty());
        let f = SearchFilters {
            created_at: vec![vec![DateFilter::Eq(t("2025-06-01T00:00:00Z"))]],
            expired_at: vec![vec![DateFilter::Ge(t("2025-03-02T00:00:00Z"))]],
            ..history()
        };
        assert_eq!(keys(&w, f).await, set(["acme"]));
        // Date filters combine with the time mode: current facts that started by 2021.
        let f = SearchFilters {
            valid_at: vec![vec![DateFilter::Lt(t("2021-01-01T00:00:00Z"))]],
            ..SearchFilters::default()
        };
        assert_eq!(keys(&w, f).await, set(["paris"]));
    }

    #[tokio::test]
    async fn an_empty_and_group_is_rejected_naming_it() {
        let w = world("gsf-empty-group").await;
        let req = SearchRequest::new(ALL, cfg(Methods::FULLTEXT)).filters(SearchFilters {
            created_at: vec![vec![DateFilter::IsNotNull], vec![]],
            ..SearchFilters::default()
        });
        let e = search::search(&w.g.db, &w.g.name, &req, None, None)
            .await
            .unwrap_err();
        assert!(
            matches!(e, gralkor::Error::InvalidInput { ref field, .. } if field == "filters.created_at[1]"),
            "{e}"
        );
    }
}

mod filters {
    use super::*;

    #[tokio::test]
    async fn fact_types_uuids_and_endpoint_labels_restrict_facts() {
        let w = world("gsf-facts").await;
        let f = SearchFilters {
            fact_types: vec!["WORKS_AT".into()],
            ..history()
        };
        assert_eq!(keys(&w, f).await, set(["acme", "globex"]));
        let f = SearchFilters {
            fact_uuids: vec![w.f["paris"], w.f["knows"], w.f["acme"]],
            ..SearchFilters::default()
        };
        assert_eq!(keys(&w, f).await, set(["paris", "knows"]));
        let f = SearchFilters {
            entity_uuids: vec![w.e["Bob"]],
            ..history()
        };
        assert_eq!(keys(&w, f).await, set(["visit", "knows"]));
        let f = SearchFilters {
            entity_labels: vec!["Person".into()],
            ..SearchFilters::default()
        };
        assert_eq!(keys(&w, f).await, set(["knows"]));
        let f = SearchFilters {
            entity_labels: vec!["Person".into(), "Organization".into()],
            ..SearchFilters::default()
        };
        // Both endpoints need one of the labels, not the same one.
        assert_eq!(keys(&w, f).await, set(["globex", "plan", "knows"]));
        // A label that no entity has, and one that is not an identifier, match nothing.
        for label in ["Robot", "x') OR 1=1 //"] {
            let f = SearchFilters {
                entity_labels: vec![label.into()],
                ..history()
            };
            assert!(keys(&w, f).await.is_empty(), "{label}");
        }
    }

    #[tokio::test]
    async fn labels_and_uuids_restrict_entities() {
        let w = world("gsf-entities").await;
        let run = |f: SearchFilters| {
            let req = SearchRequest::new(
                "Alice Bob Carol Acme Globex Paris",
                SearchConfig {
                    facts: None,
                    entities: Some(ScopeConfig::new(Methods::HYBRID, RerankerKind::Rrf)),
                    ..EDGE_HYBRID_SEARCH_RRF
                },
            )
            .filters(f);
            let w = &w;
            async move {
                let r = search::search(&w.g.db, &w.g.name, &req, Some(&w.emb), None)
                    .await
                    .unwrap();
                r.entities
                    .iter()
                    .map(|h| w.entity_name(h.entity.uuid))
                    .collect::<BTreeSet<_>>()
            }
        };
        let got = run(SearchFilters {
            entity_labels: vec!["Organization".into()],
            ..SearchFilters::default()
        })
        .await;
        assert_eq!(got, set(["Acme", "Globex"]));
        let got = run(SearchFilters {
            entity_uuids: vec![w.e["Paris"], w.e["Bob"]],
            ..SearchFilters::default()
        })
        .await;
        assert_eq!(got, set(["Paris", "Bob"]));
    }

    #[tokio::test]
    async fn filters_apply_to_the_breadth_first_walk() {
        let w = world("gsf-bfs").await;
        let req = SearchRequest::new(
            "",
            SearchConfig {
                facts: Some(ScopeConfig::new(Methods::BFS, RerankerKind::Rrf).bfs_max_depth(1)),
                ..EDGE_HYBRID_SEARCH_RRF
            },
        )
        .bfs_origins([w.e["Bob"]])
        .filters(SearchFilters {
            fact_types: vec!["VISITED".into()],
            ..history()
        });
        let r = search::search(&w.g.db, &w.g.name, &req, None, None)
            .await
            .unwrap();
        let got: Vec<&str> = r.facts.iter().map(|h| w.fact_key(h.fact.uuid)).collect();
        assert_eq!(got, ["visit"]);
    }
}

mod named {
    use super::*;
    use common::TestGraph;
    use gralkor::graph::EntityNode;
    use uuid::Uuid;

    /// 60 decoy facts nearer to the query (vector [1, 0, 0], fulltext "link") than the
    /// two targets, between decoy entities also nearer than the target entity: more
    /// than the index over-fetch (k = 40 for a limit of 10) can see past.
    struct Crowd {
        g: TestGraph,
        targets: [Uuid; 2],
        target_entity: Uuid,
        other_target_end: Uuid,
    }

    async fn crowd(tag: &str) -> Crowd {
        let g = TestGraph::new(tag).await;
        graph::build_indices(&g.db, &g.name, 3).await.unwrap();
        // Decoys say the query words more often than the targets, so that no tie
        // decides which of them a method's cut keeps.
        let entity = |name: String, v: [f32; 3]| {
            let mut e = EntityNode::new(name.clone());
            e.summary = if name.starts_with("Decoy") {
                "link chain link chain link chain".into()
            } else {
                "a long summary in which the words link and chain appear once among \
                 many other words"
                    .into()
            };
            e.name_embedding = Some(v.to_vec());
            e.created_at = t("2024-01-01T00:00:00Z");
            e
        };
        let mut nodes: Vec<EntityNode> = (0..61)
            .map(|i| entity(format!("Decoy {i}"), [1.0, 0.001 * i as f32, 0.0]))
            .collect();
        let target_entity = entity("Target".into(), [0.2, 0.0, 1.0]);
        let other = entity("Other end".into(), [0.2, 0.0, 1.0]);
        nodes.push(target_entity.clone());
        nodes.push(other.clone());
        graph::save_entities(&g.db, &g.name, &nodes).await.unwrap();
        let fact = |s: Uuid, o: Uuid, text: &str, v: [f32; 3]| {
            let mut f = EntityEdge::new(s, o, "LINKS", text);
            f.fact_embedding = Some(v.to_vec());
            f.created_at = t("2024-01-01T00:00:00Z");
            f
        };
        let mut facts: Vec<EntityEdge> = (0..60)
            .map(|i| {
                fact(
                    nodes[i].uuid,
                    nodes[i + 1].uuid,
                    "link link link link",
                    [1.0, 0.001 * i as f32, 0.0],
                )
            })
            .collect();
        let t1 = fact(
            target_entity.uuid,
            other.uuid,
            "a long sentence that mentions a link only once among many other words",
            [0.3, 1.0, 0.0],
        );
        let t2 = fact(
            other.uuid,
            nodes[0].uuid,
            "another long sentence with a single link and plenty of other words",
            [0.2, 0.0, 1.0],
        );
        let targets = [t1.uuid, t2.uuid];
        facts.push(t1);
        facts.push(t2);
        graph::save_facts(&g.db, &g.name, &facts).await.unwrap();
        Crowd {
            g,
            targets,
            target_entity: target_entity.uuid,
            other_target_end: other.uuid,
        }
    }

    async fn facts(c: &Crowd, methods: Methods, filters: SearchFilters) -> Vec<(Uuid, f64)> {
        let req = SearchRequest::new("link", cfg(methods))
            .filters(filters)
            .query_vector(vec![1.0, 0.0, 0.0]);
        let r = search::search(&c.g.db, &c.g.name, &req, None, None)
            .await
            .unwrap();
        r.facts.iter().map(|h| (h.fact.uuid, h.score)).collect()
    }

    #[tokio::test]
    async fn named_facts_are_found_among_many_nearer_ones() {
        let c = crowd("gsf-named-facts").await;
        // Unfiltered, the decoys fill every method's list.
        let plain = facts(&c, Methods::HYBRID, SearchFilters::default()).await;
        assert!(plain.iter().all(|(u, _)| !c.targets.contains(u)));
        let named = SearchFilters {
            fact_uuids: c.targets.to_vec(),
            ..SearchFilters::default()
        };
        // Vector: exact cosine over the named facts, best first.
        let got = facts(&c, Methods::VECTOR, named.clone()).await;
        let cos = |v: [f64; 3]| v[0] / (v[0] * v[0] + v[1] * v[1] + v[2] * v[2]).sqrt();
        assert_eq!(got.len(), 2, "{got:?}");
        assert_eq!(got[0].0, c.targets[0]);
        assert!((got[0].1 - cos([0.3, 1.0, 0.0])).abs() < 1e-4, "{got:?}");
        assert_eq!(got[1].0, c.targets[1]);
        assert!((got[1].1 - cos([0.2, 0.0, 1.0])).abs() < 1e-4, "{got:?}");
        // Fulltext, and the hybrid of both.
        let got = facts(&c, Methods::FULLTEXT, named.clone()).await;
        let found: BTreeSet<Uuid> = got.iter().map(|g| g.0).collect();
        assert_eq!(found, c.targets.iter().copied().collect());
        let got = facts(&c, Methods::HYBRID, named).await;
        let found: BTreeSet<Uuid> = got.iter().map(|g| g.0).collect();
        assert_eq!(found, c.targets.iter().copied().collect());
    }

    #[tokio::test]
    async fn facts_touching_named_entities_are_found_among_many_nearer_ones() {
        let c = crowd("gsf-named-ends").await;
        let touching = |u: Uuid| SearchFilters {
            entity_uuids: vec![u],
            ..SearchFilters::default()
        };
        for methods in [Methods::VECTOR, Methods::FULLTEXT, Methods::HYBRID] {
            let got = facts(&c, methods, touching(c.target_entity)).await;
            assert_eq!(got.len(), 1, "{methods:?}: {got:?}");
            assert_eq!(got[0].0, c.targets[0], "{methods:?}");
            // Both targets touch the other end, in either direction.
            let got = facts(&c, methods, touching(c.other_target_end)).await;
            let found: BTreeSet<Uuid> = got.iter().map(|g| g.0).collect();
            assert_eq!(found, c.targets.iter().copied().collect(), "{methods:?}");
        }
    }

    #[tokio::test]
    async fn named_entities_are_found_among_many_nearer_ones() {
        let c = crowd("gsf-named-entities").await;
        let config = SearchConfig {
            facts: None,
            entities: Some(
                ScopeConfig::new(Methods::HYBRID, RerankerKind::Rrf).min_similarity(-1.0),
            ),
            ..EDGE_HYBRID_SEARCH_RRF
        };
        let search_entities = |filters: SearchFilters, methods: Methods| {
            let mut config = config;
            config.entities =
                Some(ScopeConfig::new(methods, RerankerKind::Rrf).min_similarity(-1.0));
            let req = SearchRequest::new("link chain", config)
                .filters(filters)
                .query_vector(vec![1.0, 0.0, 0.0]);
            let g = &c.g;
            async move {
                search::search(&g.db, &g.name, &req, None, None)
                    .await
                    .unwrap()
                    .entities
                    .iter()
                    .map(|h| h.entity.uuid)
                    .collect::<Vec<_>>()
            }
        };
        let plain = search_entities(SearchFilters::default(), Methods::HYBRID).await;
        assert!(!plain.contains(&c.target_entity));
        let named = SearchFilters {
            entity_uuids: vec![c.target_entity],
            ..SearchFilters::default()
        };
        for methods in [Methods::VECTOR, Methods::FULLTEXT, Methods::HYBRID] {
            let got = search_entities(named.clone(), methods).await;
            assert_eq!(got, vec![c.target_entity], "{methods:?}");
        }
    }
}

mod writers {
    use super::*;
    use common::TestGraph;
    use gralkor::graph::{EntityNode, Episode, EpisodeState, SourceKind};
    use gralkor::llm::doubles::HashEmbedder;
    use uuid::Uuid;

    pub(super) const W: &str = "lens:personal-chat";

    fn episodes_only(limit: usize) -> SearchConfig {
        SearchConfig {
            facts: None,
            entities: None,
            episodes: Some(ScopeConfig::new(Methods::FULLTEXT, RerankerKind::Rrf)),
            communities: None,
            limit,
            min_score: 0.0,
        }
    }

    fn writers(list: &[&str]) -> SearchFilters {
        SearchFilters {
            writers: list.iter().map(|w| w.to_string()).collect(),
            ..SearchFilters::default()
        }
    }

    #[tokio::test]
    async fn a_writer_with_3_of_500_matching_episodes_finds_all_3() {
        let g = TestGraph::new("gsf-writer-eps").await;
        graph::build_indices(&g.db, &g.name, 8).await.unwrap();
        let emb = HashEmbedder::new(8);
        let mut mine = BTreeSet::new();
        for i in 0..500 {
            let mut ep = Episode::new(
                format!("Alice talked about the weather on day {i}"),
                SourceKind::Text,
                "diary",
                t("2024-01-01T00:00:00Z"),
            );
            ep.state = EpisodeState::Complete;
            // Three by W; the rest by another Lens, by a writer whose key is a
            // stopword, or by nobody.
            ep = match i {
                7 | 250 | 499 => ep.writer(W),
                i if i % 3 == 0 => ep.writer("lens:other"),
                i if i % 3 == 1 => ep.writer("a"),
                _ => ep,
            };
            if ep.writer.as_deref() == Some(W) {
                mine.insert(ep.uuid);
            }
            graph::save_episode(&g.db, &g.name, &ep).await.unwrap();
        }
        let find = |filters: SearchFilters| {
            let req = SearchRequest::new("Alice weather", episodes_only(10)).filters(filters);
            let (db, name, emb) = (&g.db, &g.name, &emb);
            async move {
                search::search(db, name, &req, Some(emb), None)
                    .await
                    .unwrap()
                    .episodes
            }
        };
        // Unfiltered, the limit is filled by others.
        let all = find(SearchFilters::default()).await;
        assert_eq!(all.len(), 10);
        assert!(all.iter().any(|h| h.episode.writer.as_deref() != Some(W)));
        // Selected, exactly W's three, with their writer.
        let got = find(writers(&[W])).await;
        let uuids: BTreeSet<Uuid> = got.iter().map(|h| h.episode.uuid).collect();
        assert_eq!(uuids, mine);
        assert!(got.iter().all(|h| h.episode.writer.as_deref() == Some(W)));
        // A stopword key is selected like any other, and never crashes the server.
        let got = find(writers(&["a", W])).await;
        assert_eq!(got.len(), 10);
        assert!(
            got.iter()
                .all(|h| matches!(h.episode.writer.as_deref(), Some("a") | Some(W)))
        );
        assert!(find(writers(&["lens:nobody", "the"])).await.is_empty());
        // A blank writer key is refused, naming it.
        let req = SearchRequest::new("Alice", episodes_only(10)).filters(writers(&[W, " "]));
        let err = search::search(&g.db, &g.name, &req, Some(&emb), None)
            .await
            .unwrap_err();
        assert!(err.to_string().contains("filters.writers[1]"), "{err}");
    }

    /// Facts of `W`'s two episodes among 1,200 decoys of other episodes, in one graph.
    pub(super) struct Sourced {
        pub g: TestGraph,
        pub emb: HashEmbedder,
        pub alice: EntityNode,
        pub w1: Episode,
        pub w2: Episode,
        pub other: Episode,
        /// `W`'s three facts (`f1` of `w1`, `f2` of `w2`, `mixed` of `other` and `w1`).
        pub mine: BTreeSet<Uuid>,
        pub f1: Uuid,
        pub mixed: Uuid,
    }

    /// The world: 1,200 decoys near the query, from `other`'s episode or from one
    /// without a writer — more than the widened candidate lists (400), so the last,
    /// exact passes are needed; `W`'s three match the words too, but are far from the
    /// query vector; one is also supported by `other`.
    pub(super) async fn sourced(tag: &str) -> Sourced {
        const DIM: usize = 64;
        let g = TestGraph::new(tag).await;
        graph::build_indices(&g.db, &g.name, DIM as u32)
            .await
            .unwrap();
        let emb = HashEmbedder::new(DIM);
        let mut alice = EntityNode::new("Alice");
        alice.name_embedding = Some(emb.vector("Alice"));
        let mut tea = EntityNode::new("Tea");
        tea.name_embedding = Some(emb.vector("Tea"));
        graph::save_entities(&g.db, &g.name, &[alice.clone(), tea.clone()])
            .await
            .unwrap();
        let episode = |writer: Option<&str>| {
            let ep = Episode::new(
                "notes",
                SourceKind::Text,
                "diary",
                t("2024-01-01T00:00:00Z"),
            );
            match writer {
                Some(w) => ep.writer(w),
                None => ep,
            }
        };
        let (mut w1, mut w2) = (episode(Some(W)), episode(Some(W)));
        let (other, nobody) = (episode(Some("lens:other")), episode(None));
        let fact = |text: String, sources: &[Uuid]| {
            let mut f = EntityEdge::new(alice.uuid, tea.uuid, "LIKES", text);
            f.fact_embedding = Some(emb.vector(&f.fact));
            f.episodes = sources.to_vec();
            f
        };
        let mut facts: Vec<EntityEdge> = (0..1200)
            .map(|i| {
                let src = if i % 2 == 0 { other.uuid } else { nobody.uuid };
                fact(
                    format!("Alice likes tea, Alice likes tea number {i}"),
                    &[src],
                )
            })
            .collect();
        let far = "wrote a chronicle about quantum gardening marmalade lighthouses, \
                   zebras juggling violins beneath copper volcanoes while seven \
                   purple astronauts negotiate origami treaties with polite glaciers";
        let f1 = fact(format!("Alice likes tea, {far}"), &[w1.uuid]);
        let f2 = fact(format!("Alice likes tea too, {far}"), &[w2.uuid]);
        let mixed = fact(
            format!("Alice likes tea again, {far}"),
            &[other.uuid, w1.uuid],
        );
        let mine: BTreeSet<Uuid> = [f1.uuid, f2.uuid, mixed.uuid].into();
        w1.entity_edges = vec![f1.uuid, mixed.uuid];
        w2.entity_edges = vec![f2.uuid];
        let (f1_uuid, mixed_uuid) = (f1.uuid, mixed.uuid);
        facts.extend([f1, f2, mixed]);
        graph::save_facts(&g.db, &g.name, &facts).await.unwrap();
        for ep in [&w1, &w2, &other, &nobody] {
            graph::save_episode(&g.db, &g.name, ep).await.unwrap();
        }
        // Purge the stale entries the writes counted, so that the index is asked for
        // its 40 nearest only (not every fact).
        use gralkor::graph::store::{VectorIndex, rebuild_vector_index, vector_debt};
        rebuild_vector_index(&g.db, &g.name, VectorIndex::Fact)
            .await
            .unwrap();
        let debt = vector_debt(&g.db, &g.name).await.unwrap();
        assert!(debt.contains(&(VectorIndex::Fact, 0)), "{debt:?}");
        Sourced {
            g,
            emb,
            alice,
            w1,
            w2,
            other,
            mine,
            f1: f1_uuid,
            mixed: mixed_uuid,
        }
    }

    impl Sourced {
        /// The facts for "Alice likes tea", at most 10, walking from Alice.
        pub async fn find(
            &self,
            config: SearchConfig,
            filters: SearchFilters,
        ) -> Vec<search::FactHit> {
            let req = SearchRequest::new("Alice likes tea", config.limit(10))
                .filters(filters)
                .bfs_origins([self.alice.uuid]);
            search::search(&self.g.db, &self.g.name, &req, Some(&self.emb), None)
                .await
                .unwrap()
                .facts
        }
    }

    pub(super) fn uuids(hits: &[search::FactHit]) -> BTreeSet<Uuid> {
        hits.iter().map(|h| h.fact.uuid).collect()
    }

    /// Every method and the recipes that combine them.
    pub(super) fn every_method() -> [(&'static str, SearchConfig); 6] {
        [
            ("fulltext", cfg(Methods::FULLTEXT)),
            ("vector", cfg(Methods::VECTOR)),
            ("hybrid", cfg(Methods::HYBRID)),
            ("bfs", cfg(Methods::BFS)),
            ("hybrid+bfs", cfg(Methods::HYBRID_BFS)),
            ("EDGE_HYBRID_SEARCH_RRF", EDGE_HYBRID_SEARCH_RRF),
        ]
    }

    #[tokio::test]
    async fn facts_sourced_by_a_writer_are_all_found_among_many_matching_ones() {
        let w = sourced("gsf-writer-facts").await;
        // Unfiltered, the index's nearest are all decoys.
        let plain = w.find(cfg(Methods::VECTOR), SearchFilters::default()).await;
        assert_eq!(plain.len(), 10);
        assert!(uuids(&plain).is_disjoint(&w.mine));
        for (name, config) in every_method() {
            let got = w.find(config, writers(&[W, "the"])).await;
            assert_eq!(uuids(&got), w.mine, "{name}");
            let m = got.iter().find(|h| h.fact.uuid == w.mixed).unwrap();
            assert_eq!(m.fact.episodes, [w.other.uuid, w.w1.uuid], "{name}");
            let sources: Vec<(Uuid, Option<&str>)> = m
                .sources
                .iter()
                .map(|s| (s.uuid, s.writer.as_deref()))
                .collect();
            assert_eq!(sources, [(w.w1.uuid, Some(W))], "{name}");
            assert!(got.windows(2).all(|p| p[0].score >= p[1].score), "{name}");
        }
        // The other writer sees its decoys and the shared fact, listing only its source.
        let got = w.find(cfg(Methods::VECTOR), writers(&["lens:other"])).await;
        assert_eq!(got.len(), 10);
        assert!(got.iter().all(|h| {
            h.sources
                .iter()
                .all(|s| s.uuid == w.other.uuid && s.writer.as_deref() == Some("lens:other"))
        }));
        let got = w
            .find(cfg(Methods::FULLTEXT), writers(&["lens:other"]))
            .await;
        assert!(
            got.iter()
                .all(|h| h.sources.len() == 1 && h.sources[0].uuid == w.other.uuid)
        );
    }
}

/// The episode selection ([`SearchFilters::episodes`]), the authorization pre-filter:
/// the same source selection as writers, by uuid.
mod episodes {
    use super::writers::{W, every_method, sourced, uuids};
    use super::*;
    use common::TestGraph;
    use gralkor::graph::{Episode, EpisodeState, SourceKind};
    use gralkor::llm::doubles::HashEmbedder;
    use uuid::Uuid;

    fn selecting(list: &[Uuid]) -> SearchFilters {
        SearchFilters {
            episodes: list.to_vec(),
            ..SearchFilters::default()
        }
    }

    #[tokio::test]
    async fn three_selected_of_500_matching_episodes_are_found_and_the_limit_follows_the_filter() {
        let g = TestGraph::new("gsf-episodes-eps").await;
        graph::build_indices(&g.db, &g.name, 8).await.unwrap();
        let emb = HashEmbedder::new(8);
        let mut all = Vec::new();
        for i in 0..500 {
            let mut ep = Episode::new(
                format!("Alice talked about the weather on day {i}"),
                SourceKind::Text,
                "diary",
                t("2024-01-01T00:00:00Z"),
            );
            ep.state = EpisodeState::Complete;
            if i % 2 == 0 {
                ep = ep.writer(W);
            }
            graph::save_episode(&g.db, &g.name, &ep).await.unwrap();
            all.push(ep.uuid);
        }
        let find = |filters: SearchFilters, limit: usize| {
            let config = SearchConfig {
                facts: None,
                entities: None,
                episodes: Some(ScopeConfig::new(Methods::FULLTEXT, RerankerKind::Rrf)),
                communities: None,
                limit,
                min_score: 0.0,
            };
            let req = SearchRequest::new("Alice weather", config).filters(filters);
            let (db, name, emb) = (&g.db, &g.name, &emb);
            async move {
                let hits = search::search(db, name, &req, Some(emb), None)
                    .await
                    .unwrap()
                    .episodes;
                hits.iter().map(|h| h.episode.uuid).collect::<Vec<Uuid>>()
            }
        };
        // Unfiltered, the limit is filled by any ten.
        assert_eq!(find(SearchFilters::default(), 10).await.len(), 10);
        // Three selected (one of them listed twice): exactly those three.
        let three = [all[7], all[250], all[499]];
        let got: BTreeSet<Uuid> = find(selecting(&[all[7], all[250], all[499], all[7]]), 10)
            .await
            .into_iter()
            .collect();
        assert_eq!(got, three.into());
        // Twenty selected, a limit of ten: ten of them, none outside.
        let twenty: BTreeSet<Uuid> = all.iter().copied().skip(100).step_by(20).collect();
        assert_eq!(twenty.len(), 20);
        let twenty_list: Vec<Uuid> = twenty.iter().copied().collect();
        let got = find(selecting(&twenty_list), 10).await;
        assert_eq!(got.len(), 10);
        assert!(got.iter().all(|u| twenty.contains(u)), "{got:?}");
        // With a writer selection too, an episode must meet both: of the three, the
        // even ones are W's (7 is not).
        let both = SearchFilters {
            writers: vec![W.into()],
            ..selecting(&three)
        };
        let got: BTreeSet<Uuid> = find(both, 10).await.into_iter().collect();
        assert_eq!(got, [all[250]].into());
        // Uuids of no episode of the graph select nothing.
        assert!(
            find(selecting(&[Uuid::new_v4(), Uuid::new_v4()]), 10)
                .await
                .is_empty()
        );
    }

    #[tokio::test]
    async fn facts_of_selected_episodes_are_all_found_and_list_only_selected_sources() {
        let w = sourced("gsf-episodes-facts").await;
        // W's two episodes selected by uuid: exactly W's three facts, whatever the
        // method, the shared one listing only w1 (not `other`, also its source).
        for (name, config) in every_method() {
            let got = w.find(config, selecting(&[w.w1.uuid, w.w2.uuid])).await;
            assert_eq!(uuids(&got), w.mine, "{name}");
            let m = got.iter().find(|h| h.fact.uuid == w.mixed).unwrap();
            assert_eq!(m.fact.episodes, [w.other.uuid, w.w1.uuid], "{name}");
            let sources: Vec<Uuid> = m.sources.iter().map(|s| s.uuid).collect();
            assert_eq!(sources, [w.w1.uuid], "{name}");
            assert!(
                got.iter()
                    .flat_map(|h| &h.sources)
                    .all(|s| s.uuid == w.w1.uuid || s.uuid == w.w2.uuid),
                "{name}"
            );
            assert!(got.windows(2).all(|p| p[0].score >= p[1].score), "{name}");
        }
        // w1 alone: its two facts, by the exact passes too.
        for (name, config) in every_method() {
            let got = w.find(config, selecting(&[w.w1.uuid])).await;
            assert_eq!(uuids(&got), [w.f1, w.mixed].into(), "{name}");
        }
        // `other` selected: its 600 decoys and the shared fact match; the limit is
        // applied after the filter (ten, all sourced by `other` alone).
        for (name, config) in [
            ("vector", cfg(Methods::VECTOR)),
            ("fulltext", cfg(Methods::FULLTEXT)),
            ("hybrid", cfg(Methods::HYBRID)),
        ] {
            let got = w.find(config, selecting(&[w.other.uuid])).await;
            assert_eq!(got.len(), 10, "{name}");
            assert!(
                got.iter()
                    .all(|h| h.sources.len() == 1 && h.sources[0].uuid == w.other.uuid),
                "{name}"
            );
        }
        // Both selections at once: a source must be selected by uuid and by writer —
        // `other` and w1 by uuid, W by writer leaves w1's facts, listing w1 only.
        let both = SearchFilters {
            writers: vec![W.into()],
            ..selecting(&[w.other.uuid, w.w1.uuid])
        };
        for (name, config) in every_method() {
            let got = w.find(config, both.clone()).await;
            assert_eq!(uuids(&got), [w.f1, w.mixed].into(), "{name}");
            assert!(
                got.iter()
                    .all(|h| h.sources.iter().all(|s| s.uuid == w.w1.uuid)),
                "{name}"
            );
        }
    }
}

mod episodes_as_of {
    use super::*;
    use common::TestGraph;
    use gralkor::graph::{Episode, EpisodeState, SourceKind};
    use gralkor::llm::doubles::HashEmbedder;

    /// As of an instant, only episodes that had happened by then — inside the
    /// statement, before the limit: 10 of 300, the other 290 later and as relevant.
    #[tokio::test]
    async fn as_of_an_instant_episodes_are_those_that_had_happened_by_then() {
        let g = TestGraph::new("gsf-episodes-as-of").await;
        graph::build_indices(&g.db, &g.name, 8).await.unwrap();
        let emb = HashEmbedder::new(8);
        let day = |i: i64| gralkor::graph::Timestamp(t("2024-01-01T00:00:00Z").0 + i * 86_400_000);
        for i in (0..300).rev() {
            let mut ep = Episode::new(
                format!("Alice talked about the weather on day {i}"),
                SourceKind::Text,
                "diary",
                day(i),
            );
            ep.state = EpisodeState::Complete;
            graph::save_episode(&g.db, &g.name, &ep).await.unwrap();
        }
        let cutoff = day(9);
        let find = |methods: Methods, time: TimeMode| {
            let config = SearchConfig {
                facts: None,
                entities: None,
                episodes: Some(ScopeConfig::new(methods, RerankerKind::Rrf).min_similarity(-1.0)),
                communities: None,
                limit: 10,
                min_score: 0.0,
            };
            let req = SearchRequest::new("Alice weather", config).filters(SearchFilters {
                time,
                ..SearchFilters::default()
            });
            let (db, name, emb) = (&g.db, &g.name, &emb);
            async move {
                search::search(db, name, &req, Some(emb), None)
                    .await
                    .unwrap()
                    .episodes
            }
        };
        // Without a time, the limit is filled with later ones as well.
        let now = find(Methods::FULLTEXT, TimeMode::Current).await;
        assert_eq!(now.len(), 10);
        assert!(now.iter().any(|h| h.episode.valid_at > cutoff));
        for methods in [Methods::FULLTEXT, Methods::HYBRID] {
            let then = find(methods, TimeMode::AsOf(cutoff)).await;
            assert_eq!(then.len(), 10, "{methods:?}");
            assert!(
                then.iter().all(|h| h.episode.valid_at <= cutoff),
                "{methods:?}"
            );
        }
        // The vector index's candidates are filtered too: nothing later comes back.
        let then = find(Methods::VECTOR, TimeMode::AsOf(cutoff)).await;
        assert!(then.iter().all(|h| h.episode.valid_at <= cutoff));
    }
}
