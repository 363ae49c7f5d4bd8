//! Communities: clusters of closely linked entities, each named and summarised, built
//! for a whole graph by [`build_communities`].
//!
//! ## What a run does
//!
//! 1. **Read** (two queries): every pair of entities linked by current facts
//!    (`RELATES_TO` without `expired_at`) with the number of such facts
//!    ([`current_fact_links`]), then the name and summary of those entities
//!    ([`entity_profiles`]). Entities without a current fact are not read at all.
//! 2. **Cluster** with [`label_propagation`], a pure, deterministic function: entities
//!    are the nodes (numbered in uuid order), the number of current facts between two
//!    entities (either direction) is the weight of their link. Every community has at
//!    least two members and is connected; an entity with no current fact belongs to no
//!    community.
//! 3. **Name and summarise** with **batched** structured calls
//!    ([`community_schema`]): up to [`CommunityOptions::communities_per_call`]
//!    communities per call, largest communities first. Each community shows the model
//!    at most [`CommunityOptions::max_members_in_prompt`] members (the most connected
//!    inside the community first) with summaries cut to
//!    [`CommunityOptions::member_summary_chars`] characters, so one community's
//!    material is bounded whatever its size, and one call's by `communities_per_call`
//!    times that. The calls run concurrently (the provider's limiter paces them).
//! 4. **Embed** every community name in **one** [`Embedder::embed`] request (the
//!    embedder splits it into its provider's batch size, if it has one).
//! 5. **Replace** the graph's communities in one atomic statement
//!    ([`replace_communities`]): old `Community` nodes and their `HAS_MEMBER` links go,
//!    the new ones come.
//!
//! Everything that can fail for a reason other than the database — the model, the
//! embedder — runs **before** the write: a failing run returns its error and leaves
//! the previous communities exactly as they were.
//!
//! ## Cost bound
//!
//! For `C` communities, `k` = `communities_per_call` and `m` = `max_llm_calls`:
//!
//! * language-model calls = `min(⌈C / k⌉, m)` exactly. The `min(C, k·m)` largest
//!   communities are named by the model; any others get a name made of their members'
//!   names and an empty summary (counted in [`CommunityReport::fallback_named`]), as
//!   does a community the model's answer leaves out or names with blank text. With
//!   `m = 0` no call is made.
//! * embedding requests = 1 when `C > 0`, else 0.
//! * database: one read of the fact links and, when there are any, one of the
//!   entities; then with `C > 0` one vector-index lookup and one write, with `C = 0`
//!   one count of the old communities and, only if there were some, one write that
//!   deletes them (so a graph that does not exist is not created).
//!
//! An empty graph, or one without current facts, costs no model call and no
//! embedding request.
//!
//! ## Identity
//!
//! A community's uuid is derived from the graph id and its member set (SHA-256,
//! version 8): a rebuild that finds the same cluster gives it the same uuid, so a
//! caller holding it can still find it; name, summary and `created_at` are new.
//!
//! ## Concurrency
//!
//! The read and the write are separate statements: an entity deleted in between is
//! skipped when member links are written ([`CommunityReport::members`] counts the links
//! written), and facts added in between count from the next run on. Two runs on one
//! graph at once each replace the whole set atomically, so the last write wins and
//! communities are never duplicated. The write waits for
//! [`FalkorDb::admit_write`] like other graph-sized writes; the model calls do not
//! hold it.
//!
//! ```
//! use gralkor::graph::{CommunityOptions, community_schema};
//!
//! let options = CommunityOptions::default().with_communities_per_call(5).with_max_llm_calls(4);
//! assert_eq!((options.communities_per_call, options.max_llm_calls), (5, 4));
//! assert!(gralkor::llm::schema::check_schema(&community_schema().schema).is_ok());
//! ```

mod propagation;

internal_use!(propagation::{Clustering, label_propagation});

use std::collections::{BTreeMap, BTreeSet};

use futures_util::future::join_all;
use serde::Deserialize;
use serde_json::{Number, json};
use tracing::Instrument;
use uuid::Uuid;

use super::model::{Community, Timestamp};
use super::prompts::communities::{self as prompt, CommunityMaterial};
use super::store::communities::{
    EntityProfile, count_communities, current_fact_links, entity_profiles, replace_communities,
};
use crate::falkordb::{FalkorDb, physical_graph_name};
use crate::llm::{Embedder, GenerateRequest, LanguageModel, ModelSize, OutputSchema, TokenUsage};
use crate::{Error, Result};

/// The name of the community call's output schema (the test double keys its answers
/// by it).
pub const COMMUNITY_SCHEMA_NAME: &str = "community_summaries";

/// The default usage label of the community calls and the embedding request.
pub const DEFAULT_COMMUNITY_LABEL: &str = "communities";

/// Member names longer than this many characters are cut in the prompt.
pub const MAX_MEMBER_NAME_CHARS: usize = 120;

/// How `build_communities` runs. Start from [`Default`] and change fields with the
/// `with_*` methods.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct CommunityOptions {
    /// Cap on label-propagation rounds (at least 1; default 50). Propagation usually
    /// settles in a handful; at the cap the last labels are used as they are.
    pub max_rounds: usize,
    /// Communities named per model call (at least 1; default 10).
    pub communities_per_call: usize,
    /// Cap on model calls per run (default 20; 0 makes no call and names every
    /// community from its members).
    pub max_llm_calls: usize,
    /// Members shown to the model per community, the most connected first (at least 1;
    /// default 20); the prompt says how many more there are.
    pub max_members_in_prompt: usize,
    /// Characters of each member's summary shown to the model (default 240; 0 shows
    /// names only). Longer summaries are cut and marked with `…`.
    pub member_summary_chars: usize,
    /// Usage-accounting label of the calls and the embedding request (not blank;
    /// default `DEFAULT_COMMUNITY_LABEL`).
    pub label: String,
}

impl Default for CommunityOptions {
    fn default() -> Self {
        CommunityOptions {
            max_rounds: 50,
            communities_per_call: 10,
            max_llm_calls: 20,
            max_members_in_prompt: 20,
            member_summary_chars: 240,
            label: DEFAULT_COMMUNITY_LABEL.to_string(),
        }
    }
}

impl CommunityOptions {
    /// Sets [`max_rounds`](Self::max_rounds).
    pub fn with_max_rounds(mut self, rounds: usize) -> Self {
        self.max_rounds = rounds;
        self
    }

    /// Sets [`communities_per_call`](Self::communities_per_call).
    pub fn with_communities_per_call(mut self, n: usize) -> Self {
        self.communities_per_call = n;
        self
    }

    /// Sets [`max_llm_calls`](Self::max_llm_calls).
    pub fn with_max_llm_calls(mut self, n: usize) -> Self {
        self.max_llm_calls = n;
        self
    }

    /// Sets [`max_members_in_prompt`](Self::max_members_in_prompt).
    pub fn with_max_members_in_prompt(mut self, n: usize) -> Self {
        self.max_members_in_prompt = n;
        self
    }

    /// Sets [`member_summary_chars`](Self::member_summary_chars).
    pub fn with_member_summary_chars(mut self, n: usize) -> Self {
        self.member_summary_chars = n;
        self
    }

    /// Sets [`label`](Self::label).
    pub fn with_label(mut self, label: impl Into<String>) -> Self {
        self.label = label.into();
        self
    }

    /// Checks the options: [`Error::InvalidInput`] names the first bad field
    /// (`options.max_rounds`, …).
    pub fn check(&self) -> Result<()> {
        for (field, value) in [
            ("options.max_rounds", self.max_rounds),
            ("options.communities_per_call", self.communities_per_call),
            ("options.max_members_in_prompt", self.max_members_in_prompt),
        ] {
            if value == 0 {
                return Err(Error::invalid(field, "must be at least 1"));
            }
        }
        if self.label.trim().is_empty() {
            return Err(Error::invalid("options.label", "must not be blank"));
        }
        Ok(())
    }
}

/// What `build_communities` did, with exact counts.
#[derive(Debug, Clone, PartialEq, Default)]
#[non_exhaustive]
pub struct CommunityReport {
    /// Communities written.
    pub communities: usize,
    /// `HAS_MEMBER` links written (one per member).
    pub members: usize,
    /// The new communities' uuids, largest community first (ties: smallest member
    /// uuid first).
    pub uuids: Vec<Uuid>,
    /// Entities with at least one current fact to another entity (the nodes that were
    /// clustered).
    pub linked_entities: usize,
    /// Previous communities deleted.
    pub replaced: usize,
    /// Communities named and summarised by the model.
    pub summarised: usize,
    /// Communities named from their members' names, with an empty summary: beyond the
    /// call cap, or left out (or blank) in the model's answer.
    pub fallback_named: usize,
    /// Language-model calls made.
    pub llm_calls: usize,
    /// Embedding requests made.
    pub embedding_requests: usize,
    /// Tokens the model calls used.
    pub tokens: TokenUsage,
    /// Label-propagation rounds run.
    pub rounds: usize,
    /// Whether label propagation settled before [`CommunityOptions::max_rounds`].
    pub converged: bool,
}

/// The output schema of the community call: `{communities: [{id, name, summary}]}`,
/// every field required. It uses only the subset [`crate::llm::schema::check_schema`]
/// accepts and is strict-compatible.
pub fn community_schema() -> OutputSchema {
    let item = json!({
        "type": "object",
        "description": "The name and summary of one community of the input.",
        "properties": {
            "id": {"type": "integer", "description": "The community's id, copied from the input."},
            "name": {"type": "string", "description": "A short, specific title of two to six words."},
            "summary": {"type": "string", "description": "One to three sentences on who the members are and how they relate."},
        },
        "required": ["id", "name", "summary"],
        "additionalProperties": false,
    });
    OutputSchema::new(
        COMMUNITY_SCHEMA_NAME,
        json!({
            "type": "object",
            "description": "Names and summaries of the communities of the input.",
            "properties": {"communities": {"type": "array", "items": item}},
            "required": ["communities"],
            "additionalProperties": false,
        }),
    )
}

#[derive(Deserialize)]
struct RawAnswer {
    communities: Vec<RawCommunity>,
}

#[derive(Deserialize)]
struct RawCommunity {
    id: Number,
    name: String,
    summary: String,
}

/// One cluster on its way to becoming a [`Community`].
struct Draft {
    /// Member entities, most connected inside the community first (then name, uuid).
    members: Vec<EntityProfile>,
    name: String,
    summary: String,
    by_model: bool,
}

/// Rebuilds the communities of `graph`: clusters entities by their current facts,
/// names and summarises the clusters in batched model calls, embeds the names in one
/// request, and replaces the graph's previous communities in one atomic write. See the
/// [module documentation](self) for the steps, the cost bound and the guarantees.
///
/// Errors: [`Error::InvalidInput`] for bad options or a blank graph id (before any
/// call); whatever the model or the embedder returns ([`Error::ModelOutput`] also when
/// the embedder returns the wrong number or length of vectors); database errors. On
/// every error the previous communities are left as they were.
///
/// ```no_run
/// # async fn run(db: gralkor::falkordb::FalkorDb, llm: &dyn gralkor::llm::LanguageModel,
/// #              embedder: &dyn gralkor::llm::Embedder) -> gralkor::Result<()> {
/// use gralkor::graph::{CommunityOptions, build_communities};
///
/// let report = build_communities(&db, "notes", llm, embedder, &CommunityOptions::default()).await?;
/// println!(
///     "{} communities, {} members, {} model calls",
///     report.communities, report.members, report.llm_calls
/// );
/// # Ok(()) }
/// ```
pub async fn build_communities(
    db: &FalkorDb,
    graph: &str,
    llm: &dyn LanguageModel,
    embedder: &dyn Embedder,
    options: &CommunityOptions,
) -> Result<CommunityReport> {
    options.check()?;
    physical_graph_name(graph)?;
    let span = tracing::info_span!("graph.build_communities", graph);
    run(db, graph, llm, embedder, options)
        .instrument(span)
        .await
}

async fn run(
    db: &FalkorDb,
    graph: &str,
    llm: &dyn LanguageModel,
    embedder: &dyn Embedder,
    options: &CommunityOptions,
) -> Result<CommunityReport> {
    let mut report = CommunityReport::default();

    // 1. Read.
    let links = current_fact_links(db, graph).await?;
    let linked: BTreeSet<Uuid> = links.iter().flat_map(|l| [l.source, l.target]).collect();
    let linked: Vec<Uuid> = linked.into_iter().collect();
    let mut profiles = entity_profiles(db, graph, &linked).await?;
    profiles.sort_by_key(|p| p.uuid);
    let index: BTreeMap<Uuid, usize> = profiles
        .iter()
        .enumerate()
        .map(|(i, p)| (p.uuid, i))
        .collect();
    let weighted: Vec<(usize, usize, u64)> = links
        .iter()
        .filter_map(|l| Some((*index.get(&l.source)?, *index.get(&l.target)?, l.facts)))
        .collect();
    report.linked_entities = profiles.len();

    // 2. Cluster.
    let clustering = label_propagation(profiles.len(), &weighted, options.max_rounds);
    report.rounds = clustering.rounds;
    report.converged = clustering.converged;
    let mut drafts = drafts(&clustering.clusters, &weighted, &profiles);
    tracing::debug!(
        linked_entities = report.linked_entities,
        communities = drafts.len(),
        rounds = report.rounds,
        converged = report.converged,
        "clustered"
    );

    // 3. Name and summarise.
    summarise(llm, options, &mut drafts, &mut report).await?;

    // 4. Embed.
    let names: Vec<String> = drafts.iter().map(|d| d.name.clone()).collect();
    let vectors = if names.is_empty() {
        Vec::new()
    } else {
        report.embedding_requests = 1;
        embed_names(embedder, &names, &options.label).await?
    };

    // 5. Replace.
    let created_at = Timestamp::now();
    let communities: Vec<(Community, Vec<Uuid>)> = drafts
        .into_iter()
        .zip(vectors)
        .map(|(d, v)| {
            let members: Vec<Uuid> = d.members.iter().map(|m| m.uuid).collect();
            let community = Community {
                uuid: community_uuid(graph, &members),
                name: d.name,
                summary: d.summary,
                name_embedding: Some(v),
                created_at,
            };
            (community, members)
        })
        .collect();
    if !communities.is_empty() || count_communities(db, graph).await? > 0 {
        // A graph-wide write: queued behind other large writes on the embedded backend.
        let _permit = db.admit_write().await;
        let stats = replace_communities(db, graph, &communities).await?;
        report.replaced = stats.nodes_deleted as usize;
        report.members = stats.relationships_created as usize;
    }
    report.communities = communities.len();
    report.uuids = communities.iter().map(|(c, _)| c.uuid).collect();
    tracing::info!(
        communities = report.communities,
        members = report.members,
        replaced = report.replaced,
        llm_calls = report.llm_calls,
        embedding_requests = report.embedding_requests,
        fallback_named = report.fallback_named,
        "communities rebuilt"
    );
    Ok(report)
}

/// One draft per cluster, largest first (ties: smallest member index, i.e. uuid),
/// members most connected inside the cluster first (then name, uuid), named from their
/// members until the model names them.
fn drafts(
    clusters: &[Vec<usize>],
    links: &[(usize, usize, u64)],
    profiles: &[EntityProfile],
) -> Vec<Draft> {
    let mut cluster_of: Vec<Option<usize>> = vec![None; profiles.len()];
    for (c, members) in clusters.iter().enumerate() {
        for &m in members {
            cluster_of[m] = Some(c);
        }
    }
    let mut degree = vec![0u64; profiles.len()];
    for &(a, b, w) in links {
        if a != b && cluster_of[a].is_some() && cluster_of[a] == cluster_of[b] {
            degree[a] += w;
            degree[b] += w;
        }
    }
    let mut ordered: Vec<&Vec<usize>> = clusters.iter().collect();
    ordered.sort_by(|a, b| b.len().cmp(&a.len()).then(a[0].cmp(&b[0])));
    ordered
        .into_iter()
        .map(|cluster| {
            let mut members = cluster.clone();
            members.sort_by(|&a, &b| {
                degree[b]
                    .cmp(&degree[a])
                    .then_with(|| profiles[a].name.cmp(&profiles[b].name))
                    .then(profiles[a].uuid.cmp(&profiles[b].uuid))
            });
            let members: Vec<EntityProfile> =
                members.into_iter().map(|m| profiles[m].clone()).collect();
            Draft {
                name: fallback_name(&members),
                summary: String::new(),
                members,
                by_model: false,
            }
        })
        .collect()
}

/// "Alice and Acme", "Alice, Acme and Bob", "Alice, Acme, Bob and 4 more".
fn fallback_name(members: &[EntityProfile]) -> String {
    let names: Vec<String> = members
        .iter()
        .take(3)
        .map(|m| cut(m.name.trim(), MAX_MEMBER_NAME_CHARS))
        .collect();
    let rest = members.len() - names.len();
    match (names.as_slice(), rest) {
        ([], _) => String::new(),
        ([one], 0) => one.clone(),
        (shown, 0) => format!(
            "{} and {}",
            shown[..shown.len() - 1].join(", "),
            shown[shown.len() - 1]
        ),
        (shown, rest) => format!("{} and {rest} more", shown.join(", ")),
    }
}

/// `text` cut to `max` characters, marked with `…` when cut.
fn cut(text: &str, max: usize) -> String {
    if text.chars().count() <= max {
        return text.to_string();
    }
    let mut out: String = text.chars().take(max).collect();
    out.truncate(out.trim_end().len());
    out.push('…');
    out
}

/// Step 3: the batched model calls, then the answers applied to the drafts.
async fn summarise(
    llm: &dyn LanguageModel,
    options: &CommunityOptions,
    drafts: &mut [Draft],
    report: &mut CommunityReport,
) -> Result<()> {
    let per_call = options.communities_per_call;
    let asked = drafts
        .len()
        .min(per_call.saturating_mul(options.max_llm_calls));
    let requests: Vec<(usize, GenerateRequest)> = (0..asked)
        .step_by(per_call)
        .map(|start| {
            let end = (start + per_call).min(asked);
            let material: Vec<CommunityMaterial> = (start..end)
                .map(|id| material(id, &drafts[id], options))
                .collect();
            let request = GenerateRequest::new(community_schema())
                .system(prompt::system())
                .user(prompt::user(&material))
                .size(ModelSize::Small)
                .label(options.label.as_str());
            (start, request)
        })
        .collect();
    report.llm_calls = requests.len();
    let span = tracing::debug_span!("communities.summarise", calls = requests.len(), asked);
    let answers = join_all(requests.iter().map(|(_, r)| llm.generate(r)))
        .instrument(span)
        .await;
    for ((start, _), answer) in requests.iter().zip(answers) {
        let generation = answer?;
        report.tokens += generation.usage;
        let raw: RawAnswer =
            serde_json::from_value(generation.value).map_err(|e| Error::ModelOutput {
                provider: llm.provider().to_string(),
                message: format!("community answer does not fit `{COMMUNITY_SCHEMA_NAME}`: {e}"),
            })?;
        let end = (start + per_call).min(asked);
        for c in raw.communities {
            let Some(id) = integer_id(&c.id).filter(|id| (*start..end).contains(id)) else {
                continue;
            };
            let (name, summary) = (c.name.trim(), c.summary.trim());
            let draft = &mut drafts[id];
            if draft.by_model || name.is_empty() {
                continue;
            }
            draft.name = name.to_string();
            draft.summary = summary.to_string();
            draft.by_model = true;
        }
    }
    report.summarised = drafts.iter().filter(|d| d.by_model).count();
    report.fallback_named = drafts.len() - report.summarised;
    Ok(())
}

/// A non-negative integral id (the schema's `integer` also admits `3.0`).
fn integer_id(n: &Number) -> Option<usize> {
    if let Some(u) = n.as_u64() {
        return usize::try_from(u).ok();
    }
    let f = n.as_f64()?;
    (f >= 0.0 && f.fract() == 0.0 && f < usize::MAX as f64).then_some(f as usize)
}

/// What the model sees of draft `id`: capped members, cut names and summaries.
fn material(id: usize, draft: &Draft, options: &CommunityOptions) -> CommunityMaterial {
    CommunityMaterial {
        id,
        member_count: draft.members.len(),
        members: draft
            .members
            .iter()
            .take(options.max_members_in_prompt)
            .map(|m| {
                (
                    cut(m.name.trim(), MAX_MEMBER_NAME_CHARS),
                    if options.member_summary_chars == 0 {
                        String::new()
                    } else {
                        cut(m.summary.trim(), options.member_summary_chars)
                    },
                )
            })
            .collect(),
    }
}

/// Step 4: one embedding request for every name, checked for count and length.
async fn embed_names(
    embedder: &dyn Embedder,
    names: &[String],
    label: &str,
) -> Result<Vec<Vec<f32>>> {
    let span = tracing::debug_span!("communities.embed", texts = names.len());
    let vectors = embedder.embed(names, label).instrument(span).await?;
    let dim = embedder.dimension();
    let bad = vectors.len() != names.len() || vectors.iter().any(|v| v.len() != dim);
    if bad {
        return Err(Error::ModelOutput {
            provider: embedder.provider().to_string(),
            message: format!(
                "{} community names were sent for {dim}-dimensional vectors; the answer had {} \
                 vectors of lengths {:?}",
                names.len(),
                vectors.len(),
                vectors.iter().map(Vec::len).collect::<BTreeSet<_>>()
            ),
        });
    }
    Ok(vectors)
}

/// The uuid of the community of `graph` with exactly `members`:
/// [`derived_uuid`](super::model::derived_uuid) over the graph id and the sorted
/// member uuids.
fn community_uuid(graph: &str, members: &[Uuid]) -> Uuid {
    let mut sorted = members.to_vec();
    sorted.sort_unstable();
    let mut parts: Vec<&[u8]> = vec![graph.as_bytes()];
    parts.extend(sorted.iter().map(|m| m.as_bytes().as_slice()));
    super::model::derived_uuid("Community", &parts)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::llm::schema::check_schema;

    fn profile(name: &str) -> EntityProfile {
        EntityProfile {
            uuid: Uuid::new_v4(),
            name: name.to_string(),
            summary: String::new(),
        }
    }

    #[test]
    fn the_schema_is_in_the_supported_subset() {
        let schema = community_schema();
        assert!(check_schema(&schema.schema).is_ok());
        assert!(schema.check().is_ok());
        assert_eq!(schema.name, COMMUNITY_SCHEMA_NAME);
    }

    #[test]
    fn fallback_names_list_up_to_three_members() {
        let names = ["Alice", "Acme", "Bob", "Carol", "Dan"];
        let members: Vec<EntityProfile> = names.iter().map(|n| profile(n)).collect();
        assert_eq!(fallback_name(&members[..2]), "Alice and Acme");
        assert_eq!(fallback_name(&members[..3]), "Alice, Acme and Bob");
        assert_eq!(fallback_name(&members), "Alice, Acme, Bob and 2 more");
        assert_eq!(fallback_name(&members[..1]), "Alice");
    }

    #[test]
    fn cut_keeps_short_text_and_marks_cut_text() {
        assert_eq!(cut("héllo", 5), "héllo");
        assert_eq!(cut("héllo wörld", 6), "héllo…");
        assert_eq!(cut("abc", 0), "…");
    }

    #[test]
    fn ids_accept_integral_numbers_only() {
        assert_eq!(integer_id(&Number::from(3)), Some(3));
        assert_eq!(integer_id(&Number::from_f64(2.0).unwrap()), Some(2));
        assert_eq!(integer_id(&Number::from_f64(2.5).unwrap()), None);
        assert_eq!(integer_id(&Number::from(-1)), None);
    }

    #[test]
    fn community_uuids_depend_on_the_graph_and_the_member_set_only() {
        let (a, b) = (Uuid::new_v4(), Uuid::new_v4());
        let id = community_uuid("g", &[a, b]);
        assert_eq!(id, community_uuid("g", &[b, a]));
        assert_ne!(id, community_uuid("h", &[a, b]));
        assert_ne!(id, community_uuid("g", &[a]));
        assert_eq!(id.get_version_num(), 8);
    }

    #[test]
    fn options_are_checked_naming_the_field() {
        assert!(CommunityOptions::default().check().is_ok());
        let err = CommunityOptions::default()
            .with_communities_per_call(0)
            .check()
            .unwrap_err();
        assert!(
            matches!(&err, Error::InvalidInput { field, .. } if field == "options.communities_per_call"),
            "{err:?}"
        );
        let err = CommunityOptions::default()
            .with_label(" ")
            .check()
            .unwrap_err();
        assert!(matches!(&err, Error::InvalidInput { field, .. } if field == "options.label"));
        assert!(
            CommunityOptions::default()
                .with_max_llm_calls(0)
                .with_member_summary_chars(0)
                .check()
                .is_ok()
        );
    }
}
