//! Range, fulltext and vector indices, created idempotently, and the start-up check
//! that every vector index of the embedded server still answers.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::OnceLock;
use std::time::Duration;

use tracing::warn;

use super::params::{check_identifier, encode_value};
use super::{FalkorDb, Params, STATUS_POLL, Value};
use crate::retry::poll;
use crate::{Error, Result};

/// What an index covers: nodes with a label, or relationships of a type.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum IndexEntity {
    /// Nodes carrying this label.
    Node(String),
    /// Relationships of this type.
    Relationship(String),
}

/// Vector similarity function.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Similarity {
    /// Cosine distance (the query procedures return `1 - cos`).
    Cosine,
    /// Euclidean distance.
    Euclidean,
}

/// The kind of an index and its options.
#[derive(Debug, Clone, PartialEq)]
pub enum IndexKind {
    /// Exact and range lookups (`CREATE INDEX`).
    Range,
    /// RediSearch fulltext, queried with `db.idx.fulltext.query*`; pair it with
    /// [`fulltext_query`](super::fulltext_query) and the same stopwords.
    Fulltext {
        /// Words not indexed.
        stopwords: Vec<String>,
        /// Stemming language, e.g. `english`.
        language: Option<String>,
    },
    /// HNSW vector index, queried with `db.idx.vector.query*`.
    Vector {
        /// Number of components of every vector.
        dimension: u32,
        /// The similarity function.
        similarity: Similarity,
    },
}

/// HNSW parameters of a vector index; `None` keeps FalkorDB's default (M 16,
/// efConstruction 200, efRuntime 10).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct HnswOptions {
    /// Links per node (`M`).
    pub m: Option<u32>,
    /// Candidate list size while building (`efConstruction`).
    pub ef_construction: Option<u32>,
    /// Candidate list size while querying (`efRuntime`); a query explores at least
    /// `max(efRuntime, k)` candidates.
    pub ef_runtime: Option<u32>,
}

/// An index to create.
///
/// ```
/// use gralkor::falkordb::{IndexSpec, Similarity, DEFAULT_STOPWORDS};
///
/// let specs = [
///     IndexSpec::range_nodes("Entity", ["uuid", "name"]),
///     IndexSpec::fulltext_nodes("Entity", ["name", "summary"], DEFAULT_STOPWORDS),
///     IndexSpec::vector_nodes("Entity", "name_embedding", 1024, Similarity::Cosine),
///     IndexSpec::range_relationships("RELATES_TO", ["uuid"]),
/// ];
/// assert_eq!(specs.len(), 4);
/// ```
#[derive(Debug, Clone, PartialEq)]
pub struct IndexSpec {
    /// Label or relationship type.
    pub entity: IndexEntity,
    /// Indexed properties (exactly one for a vector index).
    pub properties: Vec<String>,
    /// Kind and options.
    pub kind: IndexKind,
    /// HNSW parameters, for a vector index (ignored otherwise). Set when the index is
    /// created; an existing index keeps its own.
    pub hnsw: HnswOptions,
}

fn strings<I: IntoIterator<Item = S>, S: Into<String>>(i: I) -> Vec<String> {
    i.into_iter().map(Into::into).collect()
}

impl IndexSpec {
    /// A range index on node properties.
    pub fn range_nodes<S: Into<String>>(
        label: impl Into<String>,
        properties: impl IntoIterator<Item = S>,
    ) -> Self {
        IndexSpec {
            entity: IndexEntity::Node(label.into()),
            properties: strings(properties),
            kind: IndexKind::Range,
            hnsw: HnswOptions::default(),
        }
    }

    /// A range index on relationship properties.
    pub fn range_relationships<S: Into<String>>(
        rel_type: impl Into<String>,
        properties: impl IntoIterator<Item = S>,
    ) -> Self {
        IndexSpec {
            entity: IndexEntity::Relationship(rel_type.into()),
            properties: strings(properties),
            kind: IndexKind::Range,
            hnsw: HnswOptions::default(),
        }
    }

    /// A fulltext index on node properties with English stemming.
    pub fn fulltext_nodes<S: Into<String>>(
        label: impl Into<String>,
        properties: impl IntoIterator<Item = S>,
        stopwords: &[&str],
    ) -> Self {
        IndexSpec {
            entity: IndexEntity::Node(label.into()),
            properties: strings(properties),
            kind: IndexKind::Fulltext {
                stopwords: strings(stopwords.iter().copied()),
                language: Some("english".into()),
            },
            hnsw: HnswOptions::default(),
        }
    }

    /// A fulltext index on relationship properties with English stemming.
    pub fn fulltext_relationships<S: Into<String>>(
        rel_type: impl Into<String>,
        properties: impl IntoIterator<Item = S>,
        stopwords: &[&str],
    ) -> Self {
        IndexSpec {
            entity: IndexEntity::Relationship(rel_type.into()),
            ..Self::fulltext_nodes("_", properties, stopwords)
        }
    }

    /// A vector index on one node property.
    pub fn vector_nodes(
        label: impl Into<String>,
        property: impl Into<String>,
        dimension: u32,
        similarity: Similarity,
    ) -> Self {
        IndexSpec {
            entity: IndexEntity::Node(label.into()),
            properties: vec![property.into()],
            kind: IndexKind::Vector {
                dimension,
                similarity,
            },
            hnsw: HnswOptions::default(),
        }
    }

    /// A vector index on one relationship property.
    pub fn vector_relationships(
        rel_type: impl Into<String>,
        property: impl Into<String>,
        dimension: u32,
        similarity: Similarity,
    ) -> Self {
        IndexSpec {
            entity: IndexEntity::Relationship(rel_type.into()),
            ..Self::vector_nodes("_", property, dimension, similarity)
        }
    }

    /// The same spec with HNSW parameters (vector indices only).
    pub fn with_hnsw(mut self, hnsw: HnswOptions) -> Self {
        self.hnsw = hnsw;
        self
    }

    fn validate(&self) -> Result<()> {
        let (IndexEntity::Node(name) | IndexEntity::Relationship(name)) = &self.entity;
        check_identifier("index.entity", name)?;
        if self.properties.is_empty() {
            return Err(Error::invalid(
                "index.properties",
                "must name at least one property",
            ));
        }
        for p in &self.properties {
            check_identifier("index.properties", p)?;
        }
        match &self.kind {
            IndexKind::Vector { dimension, .. } => {
                if self.properties.len() != 1 {
                    return Err(Error::invalid(
                        "index.properties",
                        "must name exactly one property for a vector index",
                    ));
                }
                if *dimension == 0 || *dimension > 65_536 {
                    return Err(Error::invalid(
                        "index.dimension",
                        "must be between 1 and 65536",
                    ));
                }
            }
            IndexKind::Fulltext {
                language: Some(l), ..
            } => check_identifier("index.language", l)?,
            _ => {}
        }
        Ok(())
    }

    /// `FOR (x:L) ON (x.p, …)`.
    fn pattern(&self, properties: &[String]) -> String {
        let on = properties
            .iter()
            .map(|p| format!("x.{p}"))
            .collect::<Vec<_>>()
            .join(", ");
        match &self.entity {
            IndexEntity::Node(l) => format!("FOR (x:{l}) ON ({on})"),
            IndexEntity::Relationship(t) => format!("FOR ()-[x:{t}]-() ON ({on})"),
        }
    }

    /// The `CREATE … INDEX` statement for `properties`; `with_options` is false when
    /// adding fields to an existing fulltext index, whose options cannot change.
    fn create_statement(&self, properties: &[String], with_options: bool) -> Result<String> {
        let pattern = self.pattern(properties);
        Ok(match &self.kind {
            IndexKind::Range => format!("CREATE INDEX {pattern}"),
            IndexKind::Fulltext { .. } if !with_options => {
                format!("CREATE FULLTEXT INDEX {pattern}")
            }
            IndexKind::Fulltext {
                stopwords,
                language,
            } => {
                let mut opts = String::from("{stopwords:");
                let words =
                    Value::List(stopwords.iter().map(|s| Value::String(s.clone())).collect());
                encode_value(&mut opts, &words, "index.stopwords")?;
                if let Some(l) = language {
                    opts.push_str(&format!(",language:'{l}'"));
                }
                opts.push('}');
                format!("CREATE FULLTEXT INDEX {pattern} OPTIONS {opts}")
            }
            IndexKind::Vector {
                dimension,
                similarity,
            } => {
                let f = match similarity {
                    Similarity::Cosine => "cosine",
                    Similarity::Euclidean => "euclidean",
                };
                let mut hnsw = String::new();
                for (name, v) in [
                    ("M", self.hnsw.m),
                    ("efConstruction", self.hnsw.ef_construction),
                    ("efRuntime", self.hnsw.ef_runtime),
                ] {
                    if let Some(v) = v {
                        hnsw.push_str(&format!(", {name}:{v}"));
                    }
                }
                format!(
                    "CREATE VECTOR INDEX {pattern} OPTIONS {{dimension:{dimension}, similarityFunction:'{f}'{hnsw}}}"
                )
            }
        })
    }

    fn drop_statement(&self, property: &str) -> String {
        let kind = match self.kind {
            IndexKind::Range => "",
            IndexKind::Fulltext { .. } => "FULLTEXT ",
            IndexKind::Vector { .. } => "VECTOR ",
        };
        format!(
            "DROP {kind}INDEX {}",
            self.pattern(std::slice::from_ref(&property.to_owned()))
        )
    }
}

/// An index as the server reports it: one entry per property and kind.
#[derive(Debug, Clone, PartialEq)]
pub struct IndexInfo {
    /// Label or relationship type.
    pub entity: IndexEntity,
    /// The indexed property.
    pub property: String,
    /// Kind and options.
    pub kind: IndexKind,
    /// Whether the index has finished building (`OPERATIONAL`).
    pub operational: bool,
    /// HNSW parameters, for a vector index (as reported; default otherwise).
    pub hnsw: HnswOptions,
}

/// The `CREATE … INDEX` statements for what of `spec` is not in `listed` yet.
fn missing_statements(spec: &IndexSpec, listed: &[IndexInfo]) -> Result<Vec<String>> {
    let same_kind = |k: &IndexKind| std::mem::discriminant(k) == std::mem::discriminant(&spec.kind);
    let existing: Vec<&str> = listed
        .iter()
        .filter(|i| i.entity == spec.entity && same_kind(&i.kind))
        .map(|i| i.property.as_str())
        .collect();
    let missing: Vec<String> = spec
        .properties
        .iter()
        .filter(|p| !existing.contains(&p.as_str()))
        .cloned()
        .collect();
    match spec.kind {
        // A fulltext index is one per label or type: its options are set when its
        // first fields are created; later fields join it without options.
        IndexKind::Fulltext { .. } if !missing.is_empty() => {
            Ok(vec![spec.create_statement(&missing, existing.is_empty())?])
        }
        _ => missing
            .iter()
            .map(|p| spec.create_statement(std::slice::from_ref(p), true))
            .collect(),
    }
}

/// The background AOF rewrites of one embedded server (see
/// [`FalkorDb::persist_index_change_later`]).
#[derive(Debug, Default)]
struct DeferredRewrites {
    /// Index changes made (a counter).
    requested: u64,
    /// The highest `requested` a finished rewrite started after.
    done: u64,
    /// Whether a background rewrite is spawned and has not begun yet.
    queued: bool,
    /// How long the last background rewrite took.
    last_took: Duration,
}

/// A background rewrite waits this many times as long as the previous one took.
const REWRITE_DUTY: u32 = 9;

/// The longest such wait.
const MAX_REWRITE_PAUSE: Duration = Duration::from_secs(30);

/// Per embedded server (by socket path): its background rewrites.
fn deferred_rewrites() -> &'static std::sync::Mutex<BTreeMap<PathBuf, DeferredRewrites>> {
    static REWRITES: OnceLock<std::sync::Mutex<BTreeMap<PathBuf, DeferredRewrites>>> =
        OnceLock::new();
    REWRITES.get_or_init(Default::default)
}

/// How long index creation may take to become operational.
const INDEX_BUILD_DEADLINE: Duration = Duration::from_secs(600);

/// How many times [`FalkorDb::rebuild_index`] creates an index that is not listed
/// afterwards before it fails.
pub(crate) const REBUILD_ATTEMPTS: u32 = 3;

/// How long a rebuild waits for the server to stop listing a dropped index, or to list
/// a created one.
const REBUILD_DEADLINE: Duration = Duration::from_secs(10);

impl FalkorDb {
    /// Creates an index unless it already exists, then waits until the server reports
    /// it `OPERATIONAL`. Returns whether anything was created. On the embedded backend
    /// a new vector index is followed by an AOF rewrite, so it survives a crash.
    ///
    /// ```no_run
    /// # async fn run(db: gralkor::falkordb::FalkorDb) -> gralkor::Result<()> {
    /// use gralkor::falkordb::{IndexSpec, Similarity};
    ///
    /// db.create_index("notes", &IndexSpec::vector_nodes("Note", "embedding", 1024, Similarity::Cosine)).await?;
    /// // Idempotent: a second call creates nothing.
    /// assert!(!db.create_index("notes", &IndexSpec::vector_nodes("Note", "embedding", 1024, Similarity::Cosine)).await?);
    /// # Ok(()) }
    /// ```
    #[tracing::instrument(skip(self, spec), fields(entity = ?spec.entity, kind = ?spec.kind))]
    pub async fn create_index(&self, graph: &str, spec: &IndexSpec) -> Result<bool> {
        let created = self.create_index_unpersisted(graph, spec).await?;
        if created {
            self.persist_index_change().await?;
        }
        Ok(created)
    }

    /// Creates every index of `specs` that does not exist yet and returns how many specs
    /// created something: what [`create_index`](FalkorDb::create_index) does for each,
    /// in a handful of round trips whatever the number of specs — one listing, every
    /// missing `CREATE … INDEX` in one pipeline, one listing to confirm that they are
    /// `OPERATIONAL` (polling only for those still being built; on an empty graph the
    /// server reports every index operational at once).
    ///
    /// On the embedded backend the AOF rewrite that moves the new definitions out of the
    /// AOF tail (see [`create_index`](FalkorDb::create_index)) runs in the background
    /// instead of being awaited — it costs about 100 ms on a small server and grows
    /// with the data, and it made preparing a new graph take 200 ms. Until it has
    /// run, a crash leaves the definitions in the tail, and the server's next start
    /// rebuilds every vector index, as for any index change found there. Await it with
    /// [`persist_index_changes`](FalkorDb::persist_index_changes).
    ///
    /// ```no_run
    /// # async fn run(db: gralkor::falkordb::FalkorDb) -> gralkor::Result<()> {
    /// use gralkor::falkordb::IndexSpec;
    ///
    /// let specs = [IndexSpec::range_nodes("Note", ["id"]), IndexSpec::range_nodes("Tag", ["name"])];
    /// assert!(db.create_indices("notes", &specs).await? <= 2);
    /// # Ok(()) }
    /// ```
    #[tracing::instrument(skip(self, specs), fields(specs = specs.len()))]
    pub async fn create_indices(&self, graph: &str, specs: &[IndexSpec]) -> Result<usize> {
        for spec in specs {
            spec.validate()?;
        }
        let listed = self.list_indices(graph).await?;
        let mut statements: Vec<(String, Params)> = Vec::new();
        let mut creating = Vec::new();
        for (i, spec) in specs.iter().enumerate() {
            for statement in missing_statements(spec, &listed)? {
                statements.push((statement, Params::new()));
                creating.push(i);
            }
        }
        if statements.is_empty() {
            self.wait_all_operational(graph, specs, listed).await?;
            return Ok(0);
        }
        let created = match self.pipeline(graph, &statements).await {
            Ok(_) => {
                creating.dedup();
                creating.len()
            }
            // Another writer created one of them meanwhile: one spec at a time, which
            // tolerates what it did not create. (What this call's pipeline did create
            // before or after the refused statement is not counted then: racing
            // creators may each count less.)
            Err(Error::Query { message, .. }) if message.contains("already indexed") => {
                let mut created = 0;
                for spec in specs {
                    if self.create_index_unpersisted(graph, spec).await? {
                        created += 1;
                    }
                }
                created
            }
            Err(e) => return Err(e),
        };
        // Something may have been created even when nothing is counted (a race).
        self.persist_index_change_later();
        let listed = self.list_indices(graph).await?;
        self.wait_all_operational(graph, specs, listed).await?;
        Ok(created)
    }

    /// Waits until every index on the entities of `specs` is operational, starting
    /// from `listed` (a listing made after they were created).
    async fn wait_all_operational(
        &self,
        graph: &str,
        specs: &[IndexSpec],
        listed: Vec<IndexInfo>,
    ) -> Result<()> {
        let mut waiting: Vec<&IndexEntity> = Vec::new();
        for spec in specs {
            let building = listed
                .iter()
                .any(|i| i.entity == spec.entity && !i.operational);
            if building && !waiting.contains(&&spec.entity) {
                waiting.push(&spec.entity);
            }
        }
        for entity in waiting {
            self.wait_operational(graph, entity).await?;
        }
        Ok(())
    }

    async fn create_index_unpersisted(&self, graph: &str, spec: &IndexSpec) -> Result<bool> {
        spec.validate()?;
        let listed = self.list_indices(graph).await?;
        let statements = missing_statements(spec, &listed)?;
        let mut created = false;
        for statement in statements {
            match self.query(graph, &statement, &Params::new()).await {
                Ok(_) => created = true,
                // Created concurrently by someone else: fine.
                Err(Error::Query { message, .. }) if message.contains("already indexed") => {}
                Err(e) => return Err(e),
            }
        }
        self.wait_operational(graph, &spec.entity).await?;
        Ok(created)
    }

    /// Drops an index; returns `false` if it did not exist.
    ///
    /// ```no_run
    /// # async fn run(db: gralkor::falkordb::FalkorDb) -> gralkor::Result<()> {
    /// use gralkor::falkordb::IndexSpec;
    ///
    /// db.drop_index("notes", &IndexSpec::range_nodes("Note", ["id"])).await?;
    /// # Ok(()) }
    /// ```
    pub async fn drop_index(&self, graph: &str, spec: &IndexSpec) -> Result<bool> {
        spec.validate()?;
        let mut dropped = false;
        for property in &spec.properties {
            match self
                .query(graph, &spec.drop_statement(property), &Params::new())
                .await
            {
                Ok(_) => dropped = true,
                Err(Error::Query { message, .. })
                    if message.contains("not indexed")
                        || message.contains("Unable to drop index") => {}
                Err(e) => return Err(e),
            }
        }
        if dropped {
            self.persist_index_change().await?;
        }
        Ok(dropped)
    }

    /// On the embedded backend, rewrites the AOF after an index change. FalkorDB 4.16
    /// can rebuild a label's vector index incompletely when it replays *any* index
    /// definition for that label from the AOF tail (measured: a range index on the
    /// label of a vector index, replayed before 500 inserts, left 444-487 of them
    /// unreachable in 3 of 5 crashes); after a rewrite the definitions live in the RDB
    /// preamble, whose replay was complete in every trial.
    pub(crate) async fn persist_index_change(&self) -> Result<()> {
        match self.embedded_server() {
            Some(server) => server.rewrite_aof().await,
            None => Ok(()),
        }
    }

    /// On the embedded backend, schedules the AOF rewrite that follows an index change
    /// (see [`persist_index_change`](Self::persist_index_change)) in the background
    /// instead of awaiting it. Requests coalesce: while one rewrite waits for its turn,
    /// it covers every later change, so a burst of new graphs costs a few rewrites, not
    /// one each; and a rewrite waits nine times as long as the previous one took (30 s
    /// at most) before it starts, since it forks the server and writes all of its data.
    /// A failed rewrite is logged; the next start's check of the AOF tail covers it.
    pub(crate) fn persist_index_change_later(&self) {
        let Some(server) = self.embedded_server() else {
            return;
        };
        let key = server.socket_path().to_owned();
        let mut queued = deferred_rewrites()
            .lock()
            .unwrap_or_else(|p| p.into_inner());
        let entry = queued.entry(key.clone()).or_default();
        entry.requested += 1;
        if entry.queued {
            return;
        }
        entry.queued = true;
        // Not a handle: the rewrite must not keep a server running that its owner
        // dropped meanwhile.
        let server = server.downgrade();
        let Ok(runtime) = tokio::runtime::Handle::try_current() else {
            entry.queued = false;
            return;
        };
        // At most a tenth of the time rewriting: a rewrite forks the server and writes
        // all of its data, so back-to-back rewrites during a burst of new graphs
        // would stall every other query.
        let pause = (entry.last_took * REWRITE_DUTY).min(MAX_REWRITE_PAUSE);
        runtime.spawn(async move {
            tokio::time::sleep(pause).await;
            // From here on, a new change queues a rewrite of its own: this one may
            // start before it.
            let covers = {
                let mut queued = deferred_rewrites()
                    .lock()
                    .unwrap_or_else(|p| p.into_inner());
                let entry = queued.entry(key.clone()).or_default();
                entry.queued = false;
                entry.requested
            };
            let start = std::time::Instant::now();
            // Gone (every handle dropped): its shutdown rewrote the AOF, or its next
            // start rebuilds what the tail holds.
            let rewritten = match server.upgrade() {
                Some(server) => match server.rewrite_aof().await {
                    Ok(()) => true,
                    Err(e) => {
                        warn!(error = %e, "the background AOF rewrite after an index change failed");
                        false
                    }
                },
                None => false,
            };
            let mut queued = deferred_rewrites()
                .lock()
                .unwrap_or_else(|p| p.into_inner());
            let entry = queued.entry(key).or_default();
            if rewritten {
                entry.done = entry.done.max(covers);
            }
            entry.last_took = start.elapsed();
        });
    }

    /// Waits, on the embedded backend, until every index change made through this
    /// process (including [`create_indices`](Self::create_indices)' background
    /// rewrites) has been moved out of the AOF tail, rewriting the AOF now if one is
    /// still outstanding. Nothing to do on a remote server.
    ///
    /// ```no_run
    /// # async fn run(db: gralkor::falkordb::FalkorDb) -> gralkor::Result<()> {
    /// use gralkor::falkordb::IndexSpec;
    ///
    /// db.create_indices("notes", &[IndexSpec::range_nodes("Note", ["id"])]).await?;
    /// db.persist_index_changes().await?;
    /// # Ok(()) }
    /// ```
    pub async fn persist_index_changes(&self) -> Result<()> {
        let Some(server) = self.embedded_server() else {
            return Ok(());
        };
        let key = server.socket_path().to_owned();
        let wanted = {
            let queued = deferred_rewrites()
                .lock()
                .unwrap_or_else(|p| p.into_inner());
            match queued.get(&key) {
                Some(entry) if entry.done < entry.requested => entry.requested,
                _ => return Ok(()),
            }
        };
        // A rewrite started now covers every change made before this call.
        server.rewrite_aof().await?;
        let mut queued = deferred_rewrites()
            .lock()
            .unwrap_or_else(|p| p.into_inner());
        let entry = queued.entry(key).or_default();
        entry.done = entry.done.max(wanted);
        Ok(())
    }

    /// Lists the indices of `graph`.
    ///
    /// ```no_run
    /// # async fn run(db: gralkor::falkordb::FalkorDb) -> gralkor::Result<()> {
    /// for index in db.list_indices("notes").await? {
    ///     println!("{:?} {} {:?} operational={}", index.entity, index.property, index.kind, index.operational);
    /// }
    /// # Ok(()) }
    /// ```
    pub async fn list_indices(&self, graph: &str) -> Result<Vec<IndexInfo>> {
        let res = self
            .ro_query(
                graph,
                "CALL db.indexes() YIELD label, types, options, language, stopwords, entitytype, status \
                 RETURN label, types, options, language, stopwords, entitytype, status",
                &Params::new(),
            )
            .await?;
        let mut out = Vec::new();
        for row in res.into_maps() {
            let label = row
                .get("label")
                .and_then(Value::as_str)
                .unwrap_or_default()
                .to_owned();
            let entity = match row.get("entitytype").and_then(Value::as_str) {
                Some("RELATIONSHIP") => IndexEntity::Relationship(label),
                _ => IndexEntity::Node(label),
            };
            let operational = row.get("status").and_then(Value::as_str) == Some("OPERATIONAL");
            let language = row
                .get("language")
                .and_then(Value::as_str)
                .map(str::to_owned);
            let stopwords: Vec<String> = row
                .get("stopwords")
                .and_then(Value::as_list)
                .map(|l| {
                    l.iter()
                        .filter_map(|v| v.as_str().map(str::to_owned))
                        .collect()
                })
                .unwrap_or_default();
            let empty = Default::default();
            let options = row.get("options").and_then(Value::as_map).unwrap_or(&empty);
            let Some(types) = row.get("types").and_then(Value::as_map) else {
                continue;
            };
            for (property, kinds) in types {
                let o = options.get(property).and_then(Value::as_map);
                let opt = |name: &str| {
                    o.and_then(|o| o.get(name))
                        .and_then(Value::as_int)
                        .and_then(|v| u32::try_from(v).ok())
                };
                let mut hnsw = HnswOptions::default();
                for kind in kinds.as_list().unwrap_or_default() {
                    let kind = match kind.as_str() {
                        Some("RANGE") => IndexKind::Range,
                        Some("FULLTEXT") => IndexKind::Fulltext {
                            stopwords: stopwords.clone(),
                            language: language.clone(),
                        },
                        Some("VECTOR") => {
                            hnsw = HnswOptions {
                                m: opt("M"),
                                ef_construction: opt("efConstruction"),
                                ef_runtime: opt("efRuntime"),
                            };
                            let dimension = o
                                .and_then(|o| o.get("dimension"))
                                .and_then(Value::as_int)
                                .unwrap_or(0) as u32;
                            let similarity = match o
                                .and_then(|o| o.get("similarityFunction"))
                                .and_then(Value::as_str)
                            {
                                Some("euclidean") => Similarity::Euclidean,
                                _ => Similarity::Cosine,
                            };
                            IndexKind::Vector {
                                dimension,
                                similarity,
                            }
                        }
                        _ => continue,
                    };
                    out.push(IndexInfo {
                        entity: entity.clone(),
                        property: property.clone(),
                        kind,
                        operational,
                        hnsw,
                    });
                }
            }
        }
        Ok(out)
    }

    pub(super) async fn wait_operational(&self, graph: &str, entity: &IndexEntity) -> Result<()> {
        let built = poll(
            "building an index",
            STATUS_POLL,
            INDEX_BUILD_DEADLINE,
            || async {
                let indices = self.list_indices(graph).await?;
                Ok(indices
                    .iter()
                    .filter(|i| &i.entity == entity)
                    .all(|i| i.operational)
                    .then_some(()))
            },
        )
        .await?;
        built.ok_or_else(|| Error::Timeout {
            operation: format!("building the index on {entity:?} in graph `{graph}`"),
            after: INDEX_BUILD_DEADLINE,
        })
    }

    /// Drops and recreates `index` (as [`list_indices`](Self::list_indices) reports it)
    /// on `graph` with the same options, waiting until it is operational again: the
    /// index is then built afresh from the records, without whatever else it held.
    ///
    /// ```no_run
    /// # async fn run(db: gralkor::falkordb::FalkorDb) -> gralkor::Result<()> {
    /// for index in db.list_indices("notes").await? {
    ///     db.rebuild_index("notes", index).await?;
    /// }
    /// # Ok(()) }
    /// ```
    ///
    /// The rebuild is checked, not assumed: after the drop it waits until the server no
    /// longer lists the index (a create sent while the old index is still listed
    /// creates nothing), and after the create it reads `CALL db.indexes()` until the
    /// index is listed and `OPERATIONAL`. An index that is not there afterwards is
    /// created again, up to 3 times, then the call fails — it never
    /// returns with the index missing.
    #[tracing::instrument(skip(self, index), fields(entity = ?index.entity, property = index.property))]
    pub async fn rebuild_index(&self, graph: &str, index: IndexInfo) -> Result<()> {
        let spec = IndexSpec {
            entity: index.entity,
            properties: vec![index.property],
            kind: index.kind,
            hnsw: index.hnsw,
        };
        self.drop_index(graph, &spec).await?;
        self.wait_listed(graph, &spec, false).await?;
        for attempt in 1..=REBUILD_ATTEMPTS {
            self.create_index(graph, &spec).await?;
            if self.wait_listed(graph, &spec, true).await.is_ok() {
                return Ok(());
            }
            warn!(
                graph,
                attempt, "the rebuilt index is not listed; creating it again"
            );
        }
        Err(Error::Query {
            graph: graph.to_owned(),
            message: format!(
                "the {:?} index on {:?}.{} was missing after {REBUILD_ATTEMPTS} rebuilds",
                spec.kind, spec.entity, spec.properties[0]
            ),
        })
    }

    /// Waits until `spec`'s (one) index is listed and operational (`present`), or no
    /// longer listed at all (`!present`), for at most [`REBUILD_DEADLINE`].
    async fn wait_listed(&self, graph: &str, spec: &IndexSpec, present: bool) -> Result<()> {
        let same_kind =
            |k: &IndexKind| std::mem::discriminant(k) == std::mem::discriminant(&spec.kind);
        let done = poll(
            "rebuilding an index",
            STATUS_POLL,
            REBUILD_DEADLINE,
            || async {
                let listed = self.list_indices(graph).await?;
                let found = listed.iter().find(|i| {
                    i.entity == spec.entity
                        && i.property == spec.properties[0]
                        && same_kind(&i.kind)
                });
                Ok(match (present, found) {
                    (true, Some(i)) if i.operational => Some(()),
                    (false, None) => Some(()),
                    _ => None,
                })
            },
        )
        .await?;
        done.ok_or_else(|| Error::Timeout {
            operation: format!(
                "waiting for the index on {:?}.{} in graph `{graph}` to be {}",
                spec.entity,
                spec.properties[0],
                if present { "listed" } else { "dropped" }
            ),
            after: REBUILD_DEADLINE,
        })
    }

    /// Drops and recreates every vector index on every gralkor graph, waiting until
    /// each is operational again; returns how many were rebuilt.
    ///
    /// The embedded backend calls this by itself when it starts (or restarts) from an
    /// append-only file whose tail creates a vector index: FalkorDB 4.16 then rebuilds
    /// the index from the replay incompletely, so nearest-neighbour queries silently
    /// miss nodes. Call it yourself after restoring data by other means.
    ///
    /// ```no_run
    /// # async fn run(db: gralkor::falkordb::FalkorDb) -> gralkor::Result<()> {
    /// let rebuilt = db.rebuild_vector_indices().await?;
    /// println!("rebuilt {rebuilt} vector indices");
    /// # Ok(()) }
    /// ```
    #[tracing::instrument(skip(self))]
    pub async fn rebuild_vector_indices(&self) -> Result<usize> {
        let mut rebuilt = 0;
        for graph in self.list_graphs().await? {
            for index in self.list_indices(&graph).await? {
                let IndexKind::Vector { .. } = index.kind else {
                    continue;
                };
                warn!(graph, entity = ?index.entity, property = index.property, "rebuilding vector index");
                self.rebuild_index(&graph, index).await?;
                if let Some(server) = self.embedded_server() {
                    server.count_vector_index_rebuild();
                }
                rebuilt += 1;
            }
        }
        Ok(rebuilt)
    }
}
