//! A small world shared by the search test binaries: people, organisations and a
//! place, facts across an invalidation, episodes that mention them, and communities.
#![allow(dead_code)]

use std::collections::BTreeMap;

use gralkor::graph::{
    self, Community, EntityEdge, EntityNode, Episode, EpisodeState, SourceKind, Timestamp,
};
use gralkor::llm::doubles::HashEmbedder;
use uuid::Uuid;

use crate::common::TestGraph;
use crate::common::graph::t;

/// Dimension of the world's embeddings.
pub const DIM: usize = 64;

pub struct World {
    pub g: TestGraph,
    pub emb: HashEmbedder,
    /// Entities by name.
    pub e: BTreeMap<&'static str, Uuid>,
    /// Facts by key.
    pub f: BTreeMap<&'static str, Uuid>,
    /// Episodes by key.
    pub ep: BTreeMap<&'static str, Uuid>,
    /// Communities by name.
    pub c: BTreeMap<&'static str, Uuid>,
}

pub fn entity(emb: &HashEmbedder, name: &str, label: &str, summary: &str) -> EntityNode {
    let mut e = EntityNode::new(name);
    e.labels = vec![label.to_string()];
    e.summary = summary.to_string();
    e.name_embedding = Some(emb.vector(name));
    e.created_at = t("2024-01-01T00:00:00Z");
    e
}

pub struct FactSpec {
    pub key: &'static str,
    pub source: &'static str,
    pub target: &'static str,
    pub name: &'static str,
    pub fact: &'static str,
    pub valid_at: Option<&'static str>,
    pub invalid_at: Option<&'static str>,
    pub expired_at: Option<&'static str>,
    pub episodes: &'static [&'static str],
}

const fn fact(
    key: &'static str,
    source: &'static str,
    target: &'static str,
    name: &'static str,
    fact: &'static str,
) -> FactSpec {
    FactSpec {
        key,
        source,
        target,
        name,
        fact,
        valid_at: None,
        invalid_at: None,
        expired_at: None,
        episodes: &[],
    }
}

/// The world's facts.
pub const FACTS: &[FactSpec] = &[
    // Retired by the Globex fact: ended in the world and expired in the system.
    FactSpec {
        valid_at: Some("2024-01-15T00:00:00Z"),
        invalid_at: Some("2025-03-01T00:00:00Z"),
        expired_at: Some("2025-03-02T00:00:00Z"),
        episodes: &["ep1"],
        ..fact(
            "acme",
            "Alice",
            "Acme",
            "WORKS_AT",
            "Alice works at Acme as an engineer",
        )
    },
    FactSpec {
        valid_at: Some("2025-03-01T00:00:00Z"),
        episodes: &["ep2"],
        ..fact(
            "globex",
            "Alice",
            "Globex",
            "WORKS_AT",
            "Alice works at Globex as a manager",
        )
    },
    FactSpec {
        valid_at: Some("2020-06-01T00:00:00Z"),
        episodes: &["ep1", "ep2"],
        ..fact(
            "paris",
            "Alice",
            "Paris",
            "LIVES_IN",
            "Alice lives in Paris",
        )
    },
    // Ended in the world, never retired by the system.
    FactSpec {
        valid_at: Some("2024-04-01T00:00:00Z"),
        invalid_at: Some("2024-04-10T00:00:00Z"),
        episodes: &["ep3"],
        ..fact(
            "visit",
            "Bob",
            "Paris",
            "VISITED",
            "Bob visited Paris in spring",
        )
    },
    FactSpec {
        episodes: &["ep3", "ep-missing"],
        ..fact(
            "knows",
            "Bob",
            "Alice",
            "KNOWS",
            "Bob knows Alice from university",
        )
    },
    // A plan: starts in the future.
    FactSpec {
        valid_at: Some("2030-01-01T00:00:00Z"),
        ..fact(
            "plan",
            "Carol",
            "Globex",
            "WILL_JOIN",
            "Carol will join Globex as a manager",
        )
    },
];

pub async fn world(tag: &str) -> World {
    let g = TestGraph::new(tag).await;
    let emb = HashEmbedder::new(DIM);
    graph::build_indices(&g.db, &g.name, DIM as u32)
        .await
        .unwrap();
    let entities = [
        entity(
            &emb,
            "Alice",
            "Person",
            "Alice is an engineer who moved to Globex",
        ),
        entity(
            &emb,
            "Bob",
            "Person",
            "Bob is Alice's friend from university",
        ),
        entity(&emb, "Carol", "Person", "Carol is a manager"),
        entity(&emb, "Acme", "Organization", "Acme builds rockets"),
        entity(&emb, "Globex", "Organization", "Globex sells software"),
        entity(&emb, "Paris", "Place", "Paris is the capital of France"),
    ];
    graph::save_entities(&g.db, &g.name, &entities)
        .await
        .unwrap();
    let e: BTreeMap<&'static str, Uuid> = ["Alice", "Bob", "Carol", "Acme", "Globex", "Paris"]
        .into_iter()
        .zip(entities.iter().map(|x| x.uuid))
        .collect();

    let episode = |content: &str, kind, desc: &str, valid: &str| {
        let mut ep = Episode::new(content, kind, desc, t(valid));
        ep.state = EpisodeState::Complete;
        ep
    };
    let eps = [
        (
            "ep1",
            episode(
                "Alice told us she works at Acme and lives in Paris.",
                SourceKind::Text,
                "onboarding notes",
                "2024-01-15T00:00:00Z",
            ),
        ),
        (
            "ep2",
            episode(
                "Alice: I left Acme and now work at Globex.",
                SourceKind::Message,
                "slack #general",
                "2025-03-01T00:00:00Z",
            ),
        ),
        (
            "ep3",
            episode(
                "Bob went to Paris for a week in spring.",
                SourceKind::Json,
                "travel log",
                "2024-04-01T00:00:00Z",
            ),
        ),
    ];
    let mut ep = BTreeMap::new();
    for (k, x) in &eps {
        graph::save_episode(&g.db, &g.name, x).await.unwrap();
        ep.insert(*k, x.uuid);
    }
    // An episode uuid that is never stored, to show missing sources are skipped.
    ep.insert("ep-missing", Uuid::new_v4());

    let facts: Vec<EntityEdge> = FACTS
        .iter()
        .map(|s| {
            let mut f = EntityEdge::new(e[s.source], e[s.target], s.name, s.fact);
            f.fact_embedding = Some(emb.vector(s.fact));
            f.valid_at = s.valid_at.map(t);
            f.invalid_at = s.invalid_at.map(t);
            f.expired_at = s.expired_at.map(t);
            f.created_at = t("2025-06-01T00:00:00Z");
            f.episodes = s.episodes.iter().map(|k| ep[k]).collect();
            f
        })
        .collect();
    graph::save_facts(&g.db, &g.name, &facts).await.unwrap();
    let f = FACTS
        .iter()
        .map(|s| s.key)
        .zip(facts.iter().map(|x| x.uuid))
        .collect();

    for (k, names) in [
        ("ep1", &["Alice", "Acme", "Paris"][..]),
        ("ep2", &["Alice", "Acme", "Globex"][..]),
        ("ep3", &["Bob", "Paris"][..]),
    ] {
        let ids: Vec<Uuid> = names.iter().map(|n| e[n]).collect();
        graph::save_mentions(&g.db, &g.name, ep[k], &ids)
            .await
            .unwrap();
    }

    let community = |name: &str, summary: &str| Community {
        uuid: Uuid::new_v4(),
        name: name.into(),
        summary: summary.into(),
        name_embedding: Some(emb.vector(name)),
        created_at: t("2025-01-01T00:00:00Z"),
    };
    let comms = [
        community("Paris friends", "Alice and Bob, who both know Paris"),
        community("Employers", "Acme and Globex"),
    ];
    graph::save_communities(&g.db, &g.name, &comms)
        .await
        .unwrap();
    graph::save_community_members(&g.db, &g.name, comms[0].uuid, &[e["Alice"], e["Bob"]])
        .await
        .unwrap();
    graph::save_community_members(&g.db, &g.name, comms[1].uuid, &[e["Acme"], e["Globex"]])
        .await
        .unwrap();
    let c = [
        ("Paris friends", comms[0].uuid),
        ("Employers", comms[1].uuid),
    ]
    .into_iter()
    .collect();
    World {
        g,
        emb,
        e,
        f,
        ep,
        c,
    }
}

impl World {
    /// The fact key of a uuid.
    pub fn fact_key(&self, u: Uuid) -> &'static str {
        self.f
            .iter()
            .find(|(_, v)| **v == u)
            .map(|(k, _)| *k)
            .unwrap()
    }

    pub fn entity_name(&self, u: Uuid) -> &'static str {
        self.e
            .iter()
            .find(|(_, v)| **v == u)
            .map(|(k, _)| *k)
            .unwrap()
    }
}

pub fn now() -> Timestamp {
    Timestamp::now()
}
