//! [`Engine::add_triplet`]: one fact stated directly, without an episode or a
//! language-model call.

use uuid::Uuid;

use super::Engine;
use crate::falkordb::{is_identifier, physical_graph_name};
use crate::graph::dedup::{self, Candidate, Match, normalize_name};
use crate::graph::extract::relation_type;
use crate::graph::model::{EntityEdge, EntityNode, Timestamp};
use crate::graph::store::{self, CandidateQuery, ingest as st};
use crate::ontology::RESERVED_LABELS;
use crate::{Error, Result};

/// One endpoint of a [`Triplet`]: a name and, optionally, an ontology label.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TripletEntity {
    /// The entity's name.
    pub name: String,
    /// An ontology label to add (an identifier), if any.
    pub label: Option<String>,
}

impl TripletEntity {
    /// An endpoint named `name` without a label.
    pub fn new(name: impl Into<String>) -> Self {
        TripletEntity {
            name: name.into(),
            label: None,
        }
    }

    /// The same endpoint with `label`.
    pub fn label(mut self, label: impl Into<String>) -> Self {
        self.label = Some(label.into());
        self
    }
}

/// A fact stated directly: `source —relation→ target`, with its text and time span.
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub struct Triplet {
    /// The subject.
    pub source: TripletEntity,
    /// The relation type; normalised to `UPPER_SNAKE_CASE` as extraction does.
    pub relation: String,
    /// The object.
    pub target: TripletEntity,
    /// The fact as a sentence.
    pub fact: String,
    /// When it became true, if known.
    pub valid_at: Option<Timestamp>,
    /// When it stopped being true, if it did.
    pub invalid_at: Option<Timestamp>,
}

impl Triplet {
    /// A triplet without times.
    pub fn new(
        source: TripletEntity,
        relation: impl Into<String>,
        target: TripletEntity,
        fact: impl Into<String>,
    ) -> Self {
        Triplet {
            source,
            relation: relation.into(),
            target,
            fact: fact.into(),
            valid_at: None,
            invalid_at: None,
        }
    }

    /// Sets when the fact became true.
    pub fn valid_at(mut self, at: Timestamp) -> Self {
        self.valid_at = Some(at);
        self
    }

    /// Sets when the fact stopped being true.
    pub fn invalid_at(mut self, at: Timestamp) -> Self {
        self.invalid_at = Some(at);
        self
    }

    fn validate(&self) -> Result<()> {
        for (field, e) in [("source", &self.source), ("target", &self.target)] {
            if e.name.trim().is_empty() {
                return Err(Error::invalid(format!("{field}.name"), "must not be blank"));
            }
            if let Some(l) = &e.label
                && (!is_identifier(l) || RESERVED_LABELS.contains(&l.as_str()))
            {
                return Err(Error::invalid(
                    format!("{field}.label"),
                    "must be an identifier other than Entity, Episodic and Community",
                ));
            }
        }
        if self.fact.trim().is_empty() {
            return Err(Error::invalid("fact", "must not be blank"));
        }
        if let (Some(v), Some(i)) = (self.valid_at, self.invalid_at)
            && i < v
        {
            return Err(Error::invalid("invalid_at", "must not be before valid_at"));
        }
        for (field, text) in [
            ("source.name", &self.source.name),
            ("target.name", &self.target.name),
            ("relation", &self.relation),
            ("fact", &self.fact),
        ] {
            if text.contains('\0') {
                return Err(Error::invalid(field, "must not contain NUL characters"));
            }
        }
        Ok(())
    }
}

/// The result of [`Engine::add_triplet`].
#[derive(Debug, Clone)]
#[non_exhaustive]
pub struct TripletOutcome {
    /// The subject entity as stored.
    pub source: EntityNode,
    /// The object entity as stored.
    pub target: EntityNode,
    /// The fact as stored.
    pub fact: EntityEdge,
    /// Whether the fact is new (`false`: the same fact already linked the entities).
    pub created: bool,
}

impl Engine {
    /// Adds one fact directly. Endpoint names resolve to existing entities by the
    /// deterministic rules of `dedup` (exact normalised names, then MinHash); a name
    /// that stays ambiguous becomes a new entity, since this call makes **no**
    /// language-model call. The same fact (same endpoints, relation and normalised
    /// text) already present is returned instead of duplicated. One embedding request
    /// (names and fact), one candidate round trip, one atomic write. The fact has no
    /// supporting episode, so [`remove_episode`](Engine::remove_episode) never deletes
    /// it or its endpoints.
    ///
    /// Needs an embedder ([`Error::Config`] on an episodes-only engine).
    ///
    /// ```no_run
    /// use gralkor::graph::{Triplet, TripletEntity};
    /// # async fn run(engine: gralkor::graph::Engine) -> gralkor::Result<()> {
    /// let t = Triplet::new(
    ///     TripletEntity::new("Alice").label("Person"),
    ///     "works at",
    ///     TripletEntity::new("Acme"),
    ///     "Alice works at Acme.",
    /// );
    /// let out = engine.add_triplet("notes", t).await?;
    /// assert_eq!(out.fact.name, "WORKS_AT");
    /// # Ok(()) }
    /// ```
    pub async fn add_triplet(&self, graph: &str, triplet: Triplet) -> Result<TripletOutcome> {
        triplet.validate()?;
        physical_graph_name(graph)?;
        let embedder = self.inner.embedder.as_deref().ok_or_else(|| {
            Error::config(
                "embedder",
                "is required to add a triplet: this engine stores episodes only",
            )
        })?;
        let queue = self.queue(graph);
        let _turn = queue.lock().await;
        self.build_indices(graph).await?;
        let db = self.db();
        let texts = vec![
            triplet.source.name.trim().to_owned(),
            triplet.target.name.trim().to_owned(),
            triplet.fact.trim().to_owned(),
        ];
        let vectors = embedder.embed(&texts, "add_triplet").await?;
        let [source_v, target_v, fact_v]: [Vec<f32>; 3] = vectors.try_into().map_err(|_| {
            Error::Protocol("the embedder returned the wrong number of vectors".into())
        })?;
        let queries = [
            CandidateQuery::new(&texts[0]).with_embedding(source_v.clone()),
            CandidateQuery::new(&texts[1]).with_embedding(target_v.clone()),
        ];
        let found = store::entity_candidates(db, graph, &queries, 10).await?;
        let existing: Vec<EntityNode> = found.into_iter().flatten().map(|c| c.entity).collect();
        let stored: Vec<Candidate> = existing
            .iter()
            .map(|n| Candidate::with_uuid(n.uuid, &n.name))
            .collect();
        let wanted = [Candidate::new(&texts[0]), Candidate::new(&texts[1])];
        let resolution = dedup::resolve(&wanted, &stored);
        let now = Timestamp::now();
        let endpoint = |i: usize, e: &TripletEntity, v: Vec<f32>| -> EntityNode {
            let mut node = match resolution.target(i) {
                Match::Exact(k) | Match::Fuzzy(k, _) => existing[*k].clone(),
                _ => {
                    let mut n = EntityNode::new(e.name.trim());
                    n.created_at = now;
                    n
                }
            };
            if node.name_embedding.is_none() {
                node.name_embedding = Some(v);
            }
            if let Some(l) = &e.label
                && !node.labels.contains(l)
            {
                node.labels.push(l.clone());
                node.labels.sort();
            }
            node
        };
        let source = endpoint(0, &triplet.source, source_v);
        let mut target = endpoint(1, &triplet.target, target_v);
        if normalize_name(&texts[0]) == normalize_name(&texts[1]) {
            target = source.clone();
        }
        let name = relation_type(&triplet.relation);
        let same = st::fact_candidates(
            db,
            graph,
            &[st::FactQuery {
                source: source.uuid,
                target: target.uuid,
                embedding: fact_v.clone(),
            }],
            1,
        )
        .await?;
        let duplicate = same.into_iter().flat_map(|c| c.between).find(|f| {
            f.source_uuid == source.uuid
                && f.name == name
                && normalize_name(&f.fact) == normalize_name(&texts[2])
        });
        if let Some(fact) = duplicate {
            return Ok(TripletOutcome {
                source,
                target,
                fact,
                created: false,
            });
        }
        let mut fact = EntityEdge::new(source.uuid, target.uuid, name, &texts[2]);
        fact.uuid = Uuid::new_v4();
        fact.fact_embedding = Some(fact_v);
        fact.valid_at = triplet.valid_at;
        fact.invalid_at = triplet.invalid_at;
        fact.created_at = now;
        let mut entities = vec![source.clone()];
        if target.uuid != source.uuid {
            entities.push(target.clone());
        }
        st::commit_facts(
            db,
            graph,
            &st::CommitSet {
                entities,
                new_facts: vec![fact.clone()],
                ..st::CommitSet::default()
            },
        )
        .await?;
        Ok(TripletOutcome {
            source,
            target,
            fact,
            created: true,
        })
    }
}
