//! The memory commands: add, search, get, episodes, status, the admin operations,
//! resume and forget.

use std::io::Read;

use gralkor::access::Subject;
use gralkor::client::{
    BuildCommunities, Client, Content, EpisodeRecord, EpisodeRef, ExtractPending, Hit, Ingest,
    OperatorId, ResultType, Search, SearchResult,
};
use gralkor::client::{ClearDestination, PurgeOperator, PurgeSession};
use gralkor::{Error, NativeClient};
use serde::Serialize;
use serde_json::json;
use sha2::{Digest, Sha256};
use uuid::Uuid;

use crate::args::{
    AddArgs, BuildCommunitiesArgs, EpisodesArgs, ForgetCommand, GetArgs, Kind, ResultKind,
    ResumeArgs, SearchArgs,
};
use crate::failure::{Failure, Outcome, one_line};
use crate::graphs::{self, Listed, Place};

/// Where a command's answer goes: JSON or readable lines on standard output.
#[derive(Debug, Clone, Copy)]
pub struct Out {
    pub json: bool,
}

impl Out {
    /// Prints `value` as JSON, or the readable `text`.
    pub fn emit<T: Serialize>(&self, value: &T, text: impl FnOnce() -> String) -> Outcome {
        if self.json {
            let rendered = serde_json::to_string_pretty(value)
                .map_err(|e| Failure::Io("rendering JSON".into(), e.into()))?;
            println!("{rendered}");
        } else {
            let text = text();
            if !text.is_empty() {
                println!("{text}");
            }
        }
        Ok(())
    }
}

/// Makes a request as the subject, when there is one (`--as`).
pub trait AskedBy: Sized {
    fn asked_by(self, subject: Option<&Subject>) -> Self;
}

macro_rules! asked_by {
    ($($request:ty),*) => {$(
        impl AskedBy for $request {
            fn asked_by(self, subject: Option<&Subject>) -> Self {
                match subject {
                    Some(s) => self.subject(s.clone()),
                    None => self,
                }
            }
        }
    )*};
}

asked_by!(
    Search,
    EpisodeRef,
    Ingest,
    PurgeOperator,
    PurgeSession,
    ClearDestination,
    BuildCommunities,
    ExtractPending
);

/// A replay-stable ingestion id for content: its kind and a hash of it.
pub fn content_id(prefix: &str, content: &Content) -> String {
    let mut hash = Sha256::new();
    hash.update(content.kind().as_str().as_bytes());
    hash.update([0]);
    hash.update(content.encoded().as_bytes());
    let digest = hash.finalize();
    format!("{prefix}:{}", hex::encode(&digest[..16]))
}

/// `n` and the noun, singular for one.
pub fn plural(n: u64, one: &str, many: &str) -> String {
    if n == 1 {
        format!("1 {one}")
    } else {
        format!("{n} {many}")
    }
}

/// `text` folded onto one line and cut to `max` characters.
pub fn preview(text: &str, max: usize) -> String {
    let line = one_line(text);
    if line.chars().count() <= max {
        line
    } else {
        let cut: String = line.chars().take(max.saturating_sub(1)).collect();
        format!("{cut}…")
    }
}

/// Text read from a file or standard input: not UTF-8 is the input's fault (exit 3,
/// naming `--file`), not a failure.
fn utf8(bytes: Vec<u8>, what: &str) -> Outcome<String> {
    String::from_utf8(bytes).map_err(|e| {
        Error::InvalidInput {
            field: "--file".into(),
            rule: format!("{what} must be UTF-8 text: {e}"),
        }
        .into()
    })
}

/// The content `add` remembers: the argument, the file or standard input, checked to
/// be of its kind. Run before anything is started.
pub fn add_content(args: &AddArgs) -> Outcome<Content> {
    content(args.kind, read_content(args)?)
}

fn read_content(args: &AddArgs) -> Outcome<String> {
    match (&args.text, &args.file) {
        (Some(text), _) => Ok(text.clone()),
        (None, Some(path)) if path.as_os_str() == "-" => {
            let mut bytes = Vec::new();
            std::io::stdin()
                .read_to_end(&mut bytes)
                .map_err(|e| Failure::Io("reading standard input".into(), e))?;
            utf8(bytes, "standard input")
        }
        (None, Some(path)) => utf8(
            std::fs::read(path)
                .map_err(|e| Failure::Io(format!("reading {}", path.display()), e))?,
            &path.display().to_string(),
        ),
        (None, None) => Err(Error::InvalidInput {
            field: "text".into(),
            rule: "must be given, or --file".into(),
        }
        .into()),
    }
}

fn json_type(value: &serde_json::Value) -> &'static str {
    match value {
        serde_json::Value::Null => "null",
        serde_json::Value::Bool(_) => "boolean",
        serde_json::Value::Number(_) => "number",
        serde_json::Value::String(_) => "string",
        serde_json::Value::Array(_) => "array",
        serde_json::Value::Object(_) => "object",
    }
}

/// The content of a kind.
pub fn content(kind: Kind, text: String) -> Outcome<Content> {
    Ok(match kind {
        Kind::Conversation => Content::conversation(text),
        Kind::Document => Content::document(text),
        Kind::Json => {
            let value: serde_json::Value =
                serde_json::from_str(&text).map_err(|e| Error::InvalidInput {
                    field: "content".into(),
                    rule: format!("must be a JSON object with --kind json: {e}"),
                })?;
            if !value.is_object() {
                return Err(Error::InvalidInput {
                    field: "content".into(),
                    rule: format!(
                        "must be a JSON object with --kind json (got a JSON {})",
                        json_type(&value)
                    ),
                }
                .into());
            }
            Content::structured(value)
        }
    })
}

/// What an add wrote, or found already there.
#[derive(Serialize)]
pub struct Added {
    pub id: String,
    pub lens: String,
    pub destination: String,
    /// `false` when the content was there already (nothing was written).
    pub written: bool,
    pub episodes: Vec<Uuid>,
}

/// Writes `content` through `lens` under the replay-stable ingestion `id`, unless the
/// episode that id writes is there already (then nothing is written): the same content
/// added twice by one operator to one Destination is one episode.
#[allow(clippy::too_many_arguments)]
pub async fn remember(
    client: &NativeClient,
    op: &OperatorId,
    subject: Option<&Subject>,
    lens: &str,
    id: String,
    content: Content,
    source_description: &str,
    session: Option<&String>,
) -> Outcome<Added> {
    let snapshot = client.runtime().snapshot();
    let (place, expected) = graphs::ingested_uuid(&snapshot, op, lens, &id)?;
    let existing = client
        .get_episode(&EpisodeRef::new(op.clone(), &place.name, expected).asked_by(subject))
        .await?;
    if existing.is_some() {
        return Ok(Added {
            id,
            lens: lens.to_string(),
            destination: place.name,
            written: false,
            episodes: vec![expected],
        });
    }
    let mut request = Ingest::new(&id, op, lens, content)
        .source_description(source_description)
        .asked_by(subject);
    if let Some(session) = session {
        request = request.session(session.clone());
    }
    let written = client.ingest(&request).await?;
    Ok(Added {
        id,
        lens: lens.to_string(),
        destination: place.name,
        written: true,
        episodes: written.iter().map(|w| w.episode).collect(),
    })
}

pub async fn add(
    client: &NativeClient,
    op: &OperatorId,
    subject: Option<&Subject>,
    args: &AddArgs,
    content: Content,
    out: Out,
) -> Outcome {
    let id = args
        .id
        .clone()
        .unwrap_or_else(|| content_id("cli", &content));
    let added = remember(
        client,
        op,
        subject,
        &args.lens,
        id,
        content,
        &args.source_description,
        args.session.as_ref(),
    )
    .await?;
    out.emit(&added, || {
        let verb = if added.written {
            "added"
        } else {
            "already remembered"
        };
        added
            .episodes
            .iter()
            .map(|e| format!("{verb} {e} in {}", added.destination))
            .collect::<Vec<_>>()
            .join("\n")
    })
}

fn hit_line(r: &SearchResult) -> String {
    let (kind, uuid, text) = match &r.hit {
        Hit::Episode(e) => ("episode", e.uuid, e.content.clone()),
        Hit::Fact(f) => ("fact", f.uuid, fact_text(f)),
        Hit::Node(n) => ("entity", n.uuid, format!("{}: {}", n.name, n.summary)),
        Hit::Artefact(a) => ("artefact", Uuid::nil(), format!("{a:?}")),
        _ => ("result", Uuid::nil(), String::new()),
    };
    format!(
        "{}\t{:.3}\t{kind}\t{uuid}\t{}",
        r.destination,
        r.score,
        preview(&text, 160)
    )
}

fn fact_text(f: &gralkor::client::FactRecord) -> String {
    let mut text = f.fact.clone();
    if let Some(v) = f.valid_at {
        text.push_str(&format!(" (valid from {v}"));
        match f.invalid_at {
            Some(i) => text.push_str(&format!(" to {i})")),
            None => text.push(')'),
        }
    }
    text
}

fn invalid_arg(field: &str, rule: impl Into<String>) -> gralkor::Error {
    gralkor::Error::InvalidInput {
        field: field.into(),
        rule: rule.into(),
    }
}

/// The Destinations a search reads: `--destination`, or what `--scope` and
/// `--session` name (long-term: every registered Destination; session: the session
/// group; all: both).
fn scoped_destinations(client: &NativeClient, args: &SearchArgs) -> Result<Vec<String>, Failure> {
    use crate::args::SearchScope;
    let session = match (&args.scope, &args.session) {
        (None, None) => return Ok(args.destinations.clone()),
        (None, Some(_)) => {
            return Err(invalid_arg("--session", "is read only with --scope").into());
        }
        (Some(_), _) if !args.destinations.is_empty() => {
            return Err(
                invalid_arg("--scope", "cannot be combined with --destination (--group)").into(),
            );
        }
        (Some(_), None) => {
            return Err(invalid_arg("--scope", "needs --session").into());
        }
        (Some(_), Some(id)) => gralkor::destination::Destination::session_group(id)
            .map_err(|e| invalid_arg("--session", e.to_string()))?
            .name()
            .to_string(),
    };
    let long_term = || -> Vec<String> {
        client
            .runtime()
            .snapshot()
            .destinations()
            .iter()
            .map(|d| d.name().to_string())
            .collect()
    };
    Ok(match args.scope {
        Some(SearchScope::Session) => vec![session],
        Some(SearchScope::All) => {
            let mut all = long_term();
            all.push(session);
            all
        }
        _ => long_term(),
    })
}

pub async fn search(
    client: &NativeClient,
    op: &OperatorId,
    subject: Option<&Subject>,
    args: &SearchArgs,
    out: Out,
) -> Outcome {
    let result_type = match args.result_type {
        ResultKind::Episodes => ResultType::Episodes,
        ResultKind::Facts => ResultType::Facts {
            edge_types: Vec::new(),
        },
        ResultKind::Nodes => ResultType::Nodes {
            entity_types: Vec::new(),
        },
    };
    let destinations = scoped_destinations(client, args)?;
    let mut request = Search::new(op, &args.query)
        .asked_by(subject)
        .destinations(destinations)
        .lenses(args.lenses.clone())
        .result_type(result_type)
        .max_results(args.limit);
    if let Some(t) = args.as_of {
        request = request.as_of(t);
    }
    let mut results = client.search(&request).await?;
    // A fact search also answers with episodes not yet extracted into facts, standing
    // in as facts (for agents that should still find them); `--type facts` lists
    // facts only, and says what it left out.
    let unextracted = if args.result_type == ResultKind::Facts {
        let before = results.len();
        results.retain(|r| !stands_in_for_an_episode(&r.hit));
        before - results.len()
    } else {
        0
    };
    out.emit(&results, || {
        if !results.is_empty() {
            results.iter().map(hit_line).collect::<Vec<_>>().join("\n")
        } else if unextracted > 0 {
            format!(
                "no facts: {} not extracted into facts yet (facts need a language \
                 model: set one and run `gralkor resume`); `search --type episodes` finds {}",
                plural(
                    unextracted as u64,
                    "matching episode is",
                    "matching episodes are"
                ),
                if unextracted == 1 { "it" } else { "them" }
            )
        } else {
            "nothing found".to_string()
        }
    })
}

/// Whether a fact hit is an unextracted episode standing in as a fact: its one source
/// is the episode of the same uuid.
fn stands_in_for_an_episode(hit: &Hit) -> bool {
    matches!(hit, Hit::Fact(f) if matches!(f.sources.as_slice(), [s] if s.episode == f.uuid))
}

/// On a terminal, asks before forgetting (`y` or `yes` goes ahead); `--yes`, or
/// standard input that is not a terminal (a script, an agent's shell), does not ask.
pub fn confirm_forget(args: &crate::args::ForgetArgs) -> Outcome {
    use std::io::{BufRead, IsTerminal, Write};
    if args.yes || !std::io::stdin().is_terminal() {
        return Ok(());
    }
    let what = match &args.what {
        ForgetCommand::Episode { uuid, .. } => format!("episode {uuid}"),
        ForgetCommand::Session { id } => format!("every episode of session {id}"),
        ForgetCommand::Destination { name } => format!("the whole Destination {name}"),
        ForgetCommand::Operator { id } => format!("everything of operator {id}"),
    };
    let mut stderr = std::io::stderr();
    let _ = write!(
        stderr,
        "Forget {what}? It cannot be undone. [y/N] (--yes skips this) "
    );
    let _ = stderr.flush();
    let mut answer = String::new();
    std::io::stdin()
        .lock()
        .read_line(&mut answer)
        .map_err(|e| Failure::Io("reading the answer".into(), e))?;
    match answer.trim().to_ascii_lowercase().as_str() {
        "y" | "yes" => Ok(()),
        _ => Err(Failure::NotConfirmed(
            "nothing was forgotten (answer y, or pass --yes)".into(),
        )),
    }
}

/// Finds an episode in the named Destination, or in every one.
pub async fn find_episode(
    client: &NativeClient,
    op: &OperatorId,
    subject: Option<&Subject>,
    uuid: Uuid,
    destination: Option<&String>,
) -> Outcome<(Place, EpisodeRecord)> {
    let snapshot = client.runtime().snapshot();
    let named: Vec<String> = destination.into_iter().cloned().collect();
    for place in graphs::places(&snapshot, Some(op), &named)? {
        if let Some(episode) = client
            .get_episode(&EpisodeRef::new(op.clone(), &place.name, uuid).asked_by(subject))
            .await?
        {
            return Ok((place, episode));
        }
    }
    Err(Failure::NotFound(match destination {
        Some(d) => format!("episode {uuid} in Destination `{d}`"),
        None => format!("episode {uuid} in any Destination of operator `{op}`"),
    }))
}

fn episode_text(destination: &str, e: &EpisodeRecord) -> String {
    let writer = e
        .writer
        .as_ref()
        .map(|w| w.to_string())
        .unwrap_or_else(|| "unattributed".into());
    format!(
        "episode {}\ndestination: {destination}\nkind: {}\nwriter: {writer}\nsource: {}\n\
         valid at: {}\ncreated at: {}\n\n{}",
        e.uuid,
        e.source_kind.as_str(),
        e.source_description,
        e.valid_at,
        e.created_at,
        e.content
    )
}

/// What an id names: an episode or a fact.
pub enum Memory {
    Episode(EpisodeRecord),
    Fact(crate::export::Fact),
}

impl Memory {
    /// `{"destination", "episode" | "fact"}`.
    pub fn json(&self, destination: &str) -> serde_json::Value {
        match self {
            Memory::Episode(e) => json!({"destination": destination, "episode": e}),
            Memory::Fact(f) => json!({"destination": destination, "fact": f}),
        }
    }

    fn text(&self, destination: &str) -> String {
        match self {
            Memory::Episode(e) => episode_text(destination, e),
            Memory::Fact(f) => {
                let time = |t: Option<gralkor::storage::Timestamp>| {
                    t.map_or_else(|| "-".to_string(), |t| t.to_string())
                };
                format!(
                    "fact {}\ndestination: {destination}\nname: {}\nvalid at: {}\n\
                     invalid at: {}\nexpired at: {}\ncreated at: {}\nepisodes: {}\n\n{}",
                    f.uuid,
                    f.name,
                    time(f.valid_at),
                    time(f.invalid_at),
                    time(f.expired_at),
                    f.created_at,
                    f.episodes
                        .iter()
                        .map(Uuid::to_string)
                        .collect::<Vec<_>>()
                        .join(", "),
                    f.fact
                )
            }
        }
    }
}

/// Finds an episode, or else a fact, by id in the named Destination or in every one.
pub async fn find_memory(
    client: &NativeClient,
    op: &OperatorId,
    subject: Option<&Subject>,
    uuid: Uuid,
    destination: Option<&String>,
) -> Outcome<(Place, Memory)> {
    let snapshot = client.runtime().snapshot();
    let named: Vec<String> = destination.into_iter().cloned().collect();
    for place in graphs::places(&snapshot, Some(op), &named)? {
        if let Some(episode) = client
            .get_episode(&EpisodeRef::new(op.clone(), &place.name, uuid).asked_by(subject))
            .await?
        {
            return Ok((place, Memory::Episode(episode)));
        }
        if let Some(fact) = graphs::fact(client, &place, uuid).await?
            && crate::access::fact_visible(client, subject, &place.graph, &fact).await?
        {
            return Ok((place, Memory::Fact(fact.into())));
        }
    }
    Err(Failure::NotFound(match destination {
        Some(d) => format!("no episode or fact {uuid} in Destination `{d}`"),
        None => format!("no episode or fact {uuid} in any Destination of operator `{op}`"),
    }))
}

pub async fn get(
    client: &NativeClient,
    op: &OperatorId,
    subject: Option<&Subject>,
    args: &GetArgs,
    out: Out,
) -> Outcome {
    let (place, memory) =
        find_memory(client, op, subject, args.uuid, args.destination.as_ref()).await?;
    out.emit(&memory.json(&place.name), || memory.text(&place.name))
}

/// The `last` most recent episodes of each Destination (named, or every one) that the
/// subject may see, newest first.
pub async fn recent(
    client: &NativeClient,
    op: &OperatorId,
    subject: Option<&Subject>,
    destinations: &[String],
    last: usize,
) -> Outcome<Vec<Listed>> {
    let snapshot = client.runtime().snapshot();
    let mut listed = Vec::new();
    for place in graphs::places(&snapshot, Some(op), destinations)? {
        // The newest first, a page at a time, until `last` are visible to the subject
        // (with an authorizer some may not be) or the graph has no more.
        let page = last.max(50);
        let (mut skip, mut shown) = (0, 0);
        'pages: loop {
            let batch = graphs::recent_episodes(client, &place, skip, page).await?;
            let exhausted = batch.len() < page;
            for (uuid, state) in batch {
                if shown == last {
                    break 'pages;
                }
                if let Some(episode) = client
                    .get_episode(&EpisodeRef::new(op.clone(), &place.name, uuid).asked_by(subject))
                    .await?
                {
                    shown += 1;
                    listed.push(Listed {
                        destination: place.name.clone(),
                        state,
                        episode,
                    });
                }
            }
            if exhausted || shown == last {
                break;
            }
            skip += page;
        }
    }
    Ok(listed)
}

pub async fn episodes(
    client: &NativeClient,
    op: &OperatorId,
    subject: Option<&Subject>,
    args: &EpisodesArgs,
    out: Out,
) -> Outcome {
    let listed = recent(client, op, subject, &args.destinations, args.last).await?;
    out.emit(&listed, || {
        if listed.is_empty() {
            return "no episodes".to_string();
        }
        listed
            .iter()
            .map(|l| {
                format!(
                    "{}\t{}\t{}\t{}\t{}",
                    l.destination,
                    l.episode.created_at,
                    l.episode.uuid,
                    l.state,
                    preview(&l.episode.content, 120)
                )
            })
            .collect::<Vec<_>>()
            .join("\n")
    })
}

#[derive(Serialize)]
pub struct DestinationStatus {
    name: String,
    graph: String,
    #[serde(flatten)]
    counts: gralkor::graph::GraphCounts,
    /// Indices the engine keeps that the graph lacks, or still being built (from the
    /// library's health report).
    indices_missing: Vec<String>,
    indices_building: Vec<String>,
}

#[derive(Serialize)]
pub struct Status {
    configuration: String,
    /// The embedded server's data directory (none with a remote FalkorDB).
    data_dir: Option<String>,
    /// Whether this command attached to the embedded server another process started
    /// on the data directory (`gralkor mcp`, say), rather than starting it (none with
    /// a remote FalkorDB).
    server_shared: Option<bool>,
    extracts: bool,
    operator: Option<String>,
    graphs: usize,
    /// The server's versions and memory, and the models (the library's report).
    server: Option<gralkor::storage::ServerInfo>,
    models: Vec<gralkor::storage::ModelStatus>,
    authorizer: Option<String>,
    healthy: bool,
    destinations: Vec<DestinationStatus>,
}

/// What is configured and what each Destination holds (`personal` with an operator).
pub async fn status_report(
    client: &NativeClient,
    config: &gralkor::Config,
    op: Option<&OperatorId>,
    subject: Option<&Subject>,
) -> Outcome<Status> {
    let snapshot = client.runtime().snapshot();
    let mut request = gralkor::client::StatusRequest::new();
    if let Some(op) = op {
        request = request.operator(op);
    }
    if let Some(s) = subject {
        request = request.subject(s.clone());
    }
    let health = client.status_of(&request).await;
    // The counts below fail with their own error when FalkorDB does not answer.
    let storage = health.storage.clone().unwrap_or_default();
    let mut destinations = Vec::new();
    for place in graphs::places(&snapshot, op, &[])? {
        // With an authorizer, only the Destinations the subject may read are counted.
        if !crate::access::may_read(client, subject, &place.graph).await? {
            continue;
        }
        let counts = graphs::counts(client, &place).await?;
        let graph = health
            .destination(&place.name)
            .and_then(|d| d.status.as_ref().ok());
        destinations.push(DestinationStatus {
            name: place.name,
            graph: place.graph.as_str().to_string(),
            counts,
            indices_missing: graph.map(|g| g.indices_missing.clone()).unwrap_or_default(),
            indices_building: graph
                .map(|g| g.indices_building.clone())
                .unwrap_or_default(),
        });
    }
    let status = Status {
        configuration: config.describe(),
        data_dir: config
            .falkordb
            .embedded
            .as_ref()
            .map(|e| e.data_dir.display().to_string()),
        server_shared: client
            .storage()
            .db()
            .embedded_server()
            .map(|s| !s.is_owner()),
        extracts: config.extracts(),
        operator: op.map(|o| o.to_string()),
        graphs: client.storage().engine().list_graphs().await?.len(),
        server: storage.server,
        models: storage.models,
        authorizer: health.authorizer.clone(),
        healthy: health.healthy(),
        destinations,
    };
    Ok(status)
}

pub async fn status(
    client: &NativeClient,
    config: &gralkor::Config,
    op: Option<&OperatorId>,
    subject: Option<&Subject>,
    out: Out,
) -> Outcome {
    let status = status_report(client, config, op, subject).await?;
    out.emit(&status, || {
        let mut lines = vec![
            format!("ok: {}", status.configuration),
            format!(
                "operator: {}",
                status
                    .operator
                    .as_deref()
                    .unwrap_or("none (set --operator to include `personal`)")
            ),
            format!("graphs stored: {}", status.graphs),
        ];
        if let Some(dir) = &status.data_dir {
            lines.push(match status.server_shared {
                Some(true) => format!(
                    "data directory: {dir} (its server was started by another process, \
                     and is shared)"
                ),
                _ => format!("data directory: {dir}"),
            });
        }
        if let Some(server) = &status.server {
            lines.push(format!(
                "FalkorDB {} on Redis {}, {} MiB used",
                server
                    .falkordb_version
                    .as_deref()
                    .unwrap_or("(version unknown)"),
                server.redis_version.as_deref().unwrap_or("(unknown)"),
                server
                    .used_memory_bytes
                    .map_or("?".to_string(), |b| format!(
                        "{:.1}",
                        b as f64 / (1024.0 * 1024.0)
                    ))
            ));
        }
        for d in &status.destinations {
            lines.push(format!(
                "{}: {} ({} pending), {}, {}, {}",
                d.name,
                plural(d.counts.episodes, "episode", "episodes"),
                d.counts.pending,
                plural(d.counts.entities, "entity", "entities"),
                plural(d.counts.facts, "fact", "facts"),
                plural(d.counts.communities, "community", "communities")
            ));
            for (what, list) in [
                ("missing", &d.indices_missing),
                ("being built", &d.indices_building),
            ] {
                if !list.is_empty() {
                    lines.push(format!("  indices {what}: {}", list.join(", ")));
                }
            }
        }
        lines.join("\n")
    })
}

pub async fn build_indices(client: &NativeClient, out: Out) -> Outcome {
    client.build_indices().await?;
    out.emit(&json!({"built": true}), || "indices built".into())
}

pub async fn build_communities(
    client: &NativeClient,
    op: &OperatorId,
    subject: Option<&Subject>,
    args: &BuildCommunitiesArgs,
    out: Out,
) -> Outcome {
    // With an authorizer the library checks the subject's `contribute` on the graph.
    let counts = client
        .build_communities(
            &BuildCommunities::new(op)
                .destination(&args.destination)
                .asked_by(subject),
        )
        .await?;
    out.emit(
        &json!({"destination": args.destination, "communities": counts.communities,
                "membership_edges": counts.edges}),
        || {
            format!(
                "{}: {} communities, {} membership edges",
                args.destination, counts.communities, counts.edges
            )
        },
    )
}

pub async fn resume(
    client: &NativeClient,
    op: &OperatorId,
    subject: Option<&Subject>,
    args: &ResumeArgs,
    out: Out,
) -> Outcome {
    // With an authorizer the library checks the subject's `contribute` on each graph.
    let reports = client
        .extract_pending(
            &ExtractPending::new(op)
                .destinations(args.destinations.clone())
                .asked_by(subject),
        )
        .await?;
    out.emit(&reports, || {
        reports
            .iter()
            .map(|r| {
                format!(
                    "{}: {} extracted, {} busy, {} failed, {} quarantined",
                    r.destination,
                    r.report.completed.len(),
                    r.report.busy.len(),
                    r.report.failed.len(),
                    r.report.quarantined.len()
                )
            })
            .collect::<Vec<_>>()
            .join("\n")
    })
}

/// Removes one episode (found in the named Destination or any), with the facts only
/// it supported; the Destination it was in.
pub async fn forget_episode(
    client: &NativeClient,
    op: &OperatorId,
    subject: Option<&Subject>,
    uuid: Uuid,
    destination: Option<&String>,
) -> Outcome<Place> {
    let (place, _) = find_episode(client, op, subject, uuid, destination).await?;
    let removed = client
        .remove_episode(&EpisodeRef::new(op.clone(), &place.name, uuid).asked_by(subject))
        .await?;
    if !removed {
        return Err(Failure::NotFound(format!(
            "episode {uuid} in Destination `{}`",
            place.name
        )));
    }
    Ok(place)
}

pub async fn forget(
    client: &NativeClient,
    op: &OperatorId,
    subject: Option<&Subject>,
    what: &ForgetCommand,
    out: Out,
) -> Outcome {
    match what {
        ForgetCommand::Episode { uuid, destination } => {
            let place = forget_episode(client, op, subject, *uuid, destination.as_ref()).await?;
            out.emit(
                &json!({"forgotten": "episode", "episode": uuid, "destination": place.name}),
                || format!("forgot episode {uuid} in {}", place.name),
            )
        }
        ForgetCommand::Operator { id } => {
            // The library's purge: the operator's personal graph, its relationships with
            // an authorizer, and the AOF rewritten so the text does not stay on disk.
            let target = OperatorId::new(id.clone())?;
            let report = client
                .purge_operator(&PurgeOperator::new(target).asked_by(subject))
                .await?;
            out.emit(
                &json!({
                    "forgotten": "operator",
                    "operator": id,
                    "graph_removed": report.graph_removed,
                    "relationships_removed": report.relationships_removed,
                }),
                || {
                    if report.graph_removed {
                        format!("forgot operator {id}: their personal graph is gone")
                    } else {
                        format!("operator {id} had nothing to forget")
                    }
                },
            )
        }
        ForgetCommand::Session { id } => {
            let report = client
                .purge_session(&PurgeSession::new(op.clone(), id.clone()).asked_by(subject))
                .await?;
            out.emit(
                &json!({
                    "forgotten": "session",
                    "session": id,
                    "episodes": report.episodes.iter()
                        .map(|(g, u)| json!({"graph": g, "episode": u}))
                        .collect::<Vec<_>>(),
                }),
                || match report.episodes.len() {
                    0 => format!("session {id} had nothing to forget"),
                    1 => format!("forgot session {id}: 1 episode"),
                    n => format!("forgot session {id}: {n} episodes"),
                },
            )
        }
        ForgetCommand::Destination { name } => {
            let report = client
                .clear_destination(
                    &ClearDestination::new(op.clone(), name.clone()).asked_by(subject),
                )
                .await?;
            out.emit(
                &json!({
                    "forgotten": "destination",
                    "destination": name,
                    "graph_removed": report.graph_removed,
                    "relationships_removed": report.relationships_removed,
                }),
                || {
                    if report.graph_removed {
                        format!("cleared Destination {name}")
                    } else {
                        format!("Destination {name} had nothing to forget")
                    }
                },
            )
        }
    }
}
