//! `gralkor import`: a workspace's markdown memory files and JSONL session transcripts.
//!
//! * Files: `USER.md`, `MEMORY.md` and `memory/*.md` (in name order), each one document
//!   episode described as `import: <path>`. A daily file whose name begins with its
//!   date (`memory/2024-05-01.md`) is dated by it (midnight UTC); the others are dated
//!   at import.
//! * Sessions: each `*.jsonl` file of `--sessions` is one session (its file name the
//!   session id) and becomes one conversation episode: the lines' chat messages
//!   (`{"role", "content"}`, or the same wrapped as `{"message": {…}}`) are grouped into
//!   turns at each user message (an assistant's text beside its tool calls is kept as
//!   what it said), read by the agent layer's
//!   [`Turn::from_chat`](gralkor::agent::turn::Turn::from_chat), scrubbed of recalled
//!   memory ([`MemoryFilter`]) and rendered by
//!   [`format_transcript`].
//!
//! Lines of another kind of record (an object with a `type`, such as a session header)
//! are skipped and reported, counted per file; a line that is neither — not a JSON
//! object, a `message` that is not one, a role nobody knows — is an error naming the
//! file and line.
//!
//! All or nothing: every file is read and checked before anything is written — UTF-8
//! text, a well-formed line (an error naming the file and line), content the memory
//! accepts (the library's one content rule: no NUL characters, at most
//! `MAX_CONTENT_BYTES` as stored; an error naming the file) and a description it
//! accepts — and every item's episode is looked up; only then is anything written.
//! Each item's ingestion id is a hash of its path and content, so the episode's uuid
//! is replay-stable: an item already stored is reported `unchanged` and not written
//! again, and a re-run writes nothing (so a run a database failure cut short is
//! finished by running it again).

use std::io::IsTerminal;
use std::path::{Path, PathBuf};

use gralkor::Error;
use gralkor::NativeClient;
use gralkor::agent::transcript::{MemoryFilter, format_transcript};
use gralkor::agent::turn::Turn;
use gralkor::client::{Client, Content, EpisodeRef, Ingest, OperatorId};
use gralkor::storage::Timestamp;
use serde::Serialize;
use serde_json::Value;
use uuid::Uuid;

use crate::args::ImportArgs;
use crate::commands::{AskedBy, Out, content_id};
use crate::failure::{Failure, Outcome};
use crate::graphs;
use crate::settings::DEFAULT_GROUP_LENS;

/// One thing to import, read and checked.
#[derive(Debug)]
struct Item {
    /// The path relative to the workspace (or `sessions/<file>`).
    source: String,
    kind: &'static str,
    content: Content,
    reference_time: Option<Timestamp>,
    /// A transcript's session id (its file name): recorded on its episode, so
    /// `gralkor forget session` removes it.
    session: Option<String>,
}

/// What happened to one item.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
enum Fate {
    /// Written now.
    Written,
    /// Already stored: nothing written.
    Unchanged,
    /// Would be written (dry run).
    WouldWrite,
}

#[derive(Debug, Serialize)]
struct Imported {
    source: String,
    kind: &'static str,
    id: String,
    destination: String,
    episode: Uuid,
    status: Fate,
}

#[derive(Debug, Serialize)]
struct Report {
    dry_run: bool,
    lens: String,
    written: usize,
    unchanged: usize,
    would_write: usize,
    skipped: Vec<Skipped>,
    items: Vec<Imported>,
}

#[derive(Debug, Serialize)]
struct Skipped {
    source: String,
    reason: String,
}

/// The text of `path` (named `source` in an error): not UTF-8 is invalid input.
fn read(path: &Path, source: &str) -> Outcome<String> {
    let bytes =
        std::fs::read(path).map_err(|e| Failure::Io(format!("reading {}", path.display()), e))?;
    String::from_utf8(bytes).map_err(|e| {
        Error::InvalidInput {
            field: source.to_string(),
            rule: format!("must be UTF-8 text ({e})"),
        }
        .into()
    })
}

/// The workspace's memory files that exist, in import order.
fn memory_files(workspace: &Path) -> Outcome<Vec<PathBuf>> {
    if !workspace.is_dir() {
        return Err(Error::InvalidInput {
            field: "--workspace".into(),
            rule: format!("must be a directory (got {})", workspace.display()),
        }
        .into());
    }
    let mut files: Vec<PathBuf> = ["USER.md", "MEMORY.md"]
        .iter()
        .map(|f| workspace.join(f))
        .filter(|p| p.is_file())
        .collect();
    files.extend(sorted_with_extension(&workspace.join("memory"), "md")?);
    Ok(files)
}

/// The files of `dir` ending in `.ext`, by name (none when `dir` does not exist).
fn sorted_with_extension(dir: &Path, ext: &str) -> Outcome<Vec<PathBuf>> {
    if !dir.is_dir() {
        return Ok(Vec::new());
    }
    let entries =
        std::fs::read_dir(dir).map_err(|e| Failure::Io(format!("listing {}", dir.display()), e))?;
    let mut out = Vec::new();
    for entry in entries {
        let path = entry
            .map_err(|e| Failure::Io(format!("listing {}", dir.display()), e))?
            .path();
        if path.is_file() && path.extension().is_some_and(|x| x == ext) {
            out.push(path);
        }
    }
    out.sort();
    Ok(out)
}

fn relative(path: &Path, base: &Path) -> String {
    path.strip_prefix(base)
        .unwrap_or(path)
        .to_string_lossy()
        .replace('\\', "/")
}

/// What one transcript line is.
enum Line {
    /// A chat message, in the shape the agent layer reads.
    Message(Value),
    /// A record of another kind (its `type`), such as a session header.
    Other(String),
}

/// A line's chat message (the object itself or its `message`), or the kind of the
/// other record it is; `Err` (the rule broken) for a line of neither shape.
fn chat_message(line: &Value) -> std::result::Result<Line, String> {
    let Some(object) = line.as_object() else {
        return Err("must be a JSON object: a chat message or a record with a `type`".into());
    };
    let message = match object.get("message") {
        Some(m) if m.is_object() => m,
        Some(_) => return Err("`message` must be an object with a `role`".into()),
        None if object.contains_key("role") => line,
        None => {
            return match object.get("type").and_then(Value::as_str) {
                Some("message") => Err("a `message` record must have a `message` object".into()),
                Some(kind) => Ok(Line::Other(kind.to_string())),
                None => Err(
                    "must be a chat message (`role` and `content`, or `message`: {…}) or a \
                     record with a `type`"
                        .into(),
                ),
            };
        }
    };
    let Some(role) = message.get("role").and_then(Value::as_str) else {
        return Err("a chat message must have a string `role`".into());
    };
    match role {
        "system" | "developer" | "user" | "assistant" | "tool" | "function" => {
            Ok(Line::Message(message.clone()))
        }
        // Tool results written as their own role (`toolResult`) are behaviour.
        "toolResult" | "tool_result" => {
            let mut m = message.clone();
            m["role"] = Value::from("tool");
            if m.get("name").is_none()
                && let Some(name) = message.get("toolName").cloned()
            {
                m["name"] = name;
            }
            Ok(Line::Message(m))
        }
        other => Err(format!(
            "unknown role `{other}` (known: system, developer, user, assistant, tool, \
             toolResult)"
        )),
    }
}

/// An assistant message with text beside its tool calls, as two: what it said, then
/// the calls (the agent layer keeps only the calls' side of such a message, and the
/// text is what the human read).
fn split_spoken_text(message: Value) -> Vec<Value> {
    let has_calls = message
        .get("tool_calls")
        .and_then(Value::as_array)
        .is_some_and(|c| !c.is_empty());
    let has_text = match message.get("content") {
        Some(Value::String(t)) => !t.trim().is_empty(),
        Some(Value::Array(parts)) => parts.iter().any(|p| match p {
            Value::String(t) => !t.trim().is_empty(),
            Value::Object(o) => o
                .get("text")
                .and_then(Value::as_str)
                .is_some_and(|t| !t.trim().is_empty()),
            _ => false,
        }),
        _ => false,
    };
    if message["role"] != "assistant" || !has_calls || !has_text {
        return vec![message];
    }
    let said = serde_json::json!({"role": "assistant", "content": message["content"].clone()});
    let mut calls = message;
    calls["content"] = Value::from("");
    vec![said, calls]
}

/// The date a daily memory file's name begins with (`2024-05-01.md`,
/// `2024-05-01-garden.md`), as midnight UTC.
fn date_from_name(path: &Path) -> Option<Timestamp> {
    let stem = path.file_stem()?.to_str()?;
    let date = stem.get(..10)?;
    let rest = &stem[10..];
    if !(rest.is_empty() || rest.starts_with(['-', '_', ' ', '.'])) {
        return None;
    }
    Timestamp::parse_rfc3339(&format!("{date}T00:00:00Z")).ok()
}

/// The session's transcript (recalled memory left out) and the time of its first
/// timestamped line.
/// A line skipped as a record of another kind: its number and `type`.
type OtherRecord = (usize, String);

/// The transcript, the time of the first timestamped line, and the lines skipped as
/// records of another kind.
fn session_transcript(
    path: &Path,
    source: &str,
    agent_name: &str,
    human_name: &str,
) -> Outcome<(String, Option<Timestamp>, Vec<OtherRecord>)> {
    let text = read(path, source)?;
    let mut turns: Vec<Vec<Value>> = Vec::new();
    let mut first_time = None;
    let mut others = Vec::new();
    for (i, line) in text.lines().enumerate() {
        if line.trim().is_empty() {
            continue;
        }
        let value: Value = serde_json::from_str(line).map_err(|e| Error::InvalidInput {
            field: format!("{source}:{}", i + 1),
            rule: format!("must be one JSON object per line: {e}"),
        })?;
        if first_time.is_none()
            && let Some(t) = value
                .get("timestamp")
                .and_then(Value::as_str)
                .and_then(|t| Timestamp::parse_rfc3339(t).ok())
        {
            first_time = Some(t);
        }
        let message = match chat_message(&value) {
            Ok(Line::Message(m)) => m,
            Ok(Line::Other(kind)) => {
                others.push((i + 1, kind));
                continue;
            }
            Err(rule) => {
                return Err(Error::InvalidInput {
                    field: format!("{source}:{}", i + 1),
                    rule,
                }
                .into());
            }
        };
        let is_user = message["role"] == "user";
        match turns.last_mut() {
            Some(turn) if !is_user => turn.extend(split_spoken_text(message)),
            _ => turns.push(split_spoken_text(message)),
        }
    }
    let filter = MemoryFilter::new();
    let mut scrubbed = Vec::with_capacity(turns.len());
    for (n, messages) in turns.iter().enumerate() {
        let turn = Turn::from_chat(messages).map_err(|e| match e {
            Error::InvalidInput { field, rule } => Error::InvalidInput {
                field: format!("{source}: turn {} {field}", n + 1),
                rule,
            },
            other => other,
        })?;
        scrubbed.push(filter.scrub(&turn));
    }
    let transcript = format_transcript(&scrubbed, agent_name, human_name)?;
    Ok((transcript, first_time, others))
}

/// `3 lines that are not chat messages (lines 1, 4, 9: session, model_change)`.
fn other_records(others: &[(usize, String)]) -> String {
    let lines: Vec<String> = others.iter().map(|(n, _)| n.to_string()).collect();
    let mut kinds: Vec<&str> = others.iter().map(|(_, k)| k.as_str()).collect();
    kinds.sort_unstable();
    kinds.dedup();
    format!(
        "{} not {} (line{} {}: {})",
        crate::commands::plural(others.len() as u64, "line", "lines"),
        if others.len() == 1 {
            "a chat message"
        } else {
            "chat messages"
        },
        if others.len() == 1 { "" } else { "s" },
        lines.join(", "),
        kinds.join(", ")
    )
}

/// Reads and checks everything to import; nothing is written.
fn plan(args: &ImportArgs, lens: &str) -> Outcome<(Vec<Item>, Vec<Skipped>)> {
    let mut items = Vec::new();
    let mut skipped = Vec::new();
    if !args.no_files {
        for path in memory_files(&args.workspace)? {
            let source = relative(&path, &args.workspace);
            let text = read(&path, &source)?;
            if text.trim().is_empty() {
                skipped.push(Skipped {
                    source,
                    reason: "empty".into(),
                });
                continue;
            }
            // Only the daily files of `memory/` are dated by their name.
            let dated = path.parent() == Some(args.workspace.join("memory").as_path());
            items.push(Item {
                source,
                kind: "file",
                content: Content::document(text),
                reference_time: if dated { date_from_name(&path) } else { None },
                session: None,
            });
        }
    }
    if let Some(dir) = &args.sessions {
        let names = |flag: &str, value: &Option<String>| -> Outcome<String> {
            match value {
                Some(v) if !v.trim().is_empty() => Ok(v.clone()),
                _ => Err(Error::InvalidInput {
                    field: flag.into(),
                    rule: "must be given with --sessions: the name transcripts use for that \
                           speaker (there is no generic fallback)"
                        .into(),
                }
                .into()),
            }
        };
        let agent = names("--agent-name", &args.agent_name)?;
        let human = names("--human-name", &args.human_name)?;
        if !dir.is_dir() {
            return Err(Error::InvalidInput {
                field: "--sessions".into(),
                rule: format!("must be a directory (got {})", dir.display()),
            }
            .into());
        }
        for path in sorted_with_extension(dir, "jsonl")? {
            let session = path
                .file_stem()
                .map(|s| s.to_string_lossy().into_owned())
                .unwrap_or_default();
            let source = format!("sessions/{session}");
            let (transcript, at, others) = session_transcript(&path, &source, &agent, &human)?;
            if !others.is_empty() {
                skipped.push(Skipped {
                    source: source.clone(),
                    reason: other_records(&others),
                });
            }
            if transcript.trim().is_empty() {
                skipped.push(Skipped {
                    source,
                    reason: "no conversation".into(),
                });
                continue;
            }
            items.push(Item {
                source,
                kind: "session",
                content: Content::conversation(transcript),
                reference_time: at,
                session: Some(session),
            });
        }
    }
    for item in &items {
        check(item, lens)?;
    }
    Ok((items, skipped))
}

/// Checks an item as the memory will: its content by the library's one content rule,
/// its description with the Lens's marker (each error names the item's path).
fn check(item: &Item, lens: &str) -> Outcome<()> {
    gralkor::storage::validate_content(&item.source, &item.content)?;
    gralkor::storage::validate_source_description(
        &item.source,
        &description(&item.source),
        &gralkor::provenance::Writer::Lens(lens.to_string()),
    )?;
    Ok(())
}

/// The source description of an imported item.
fn description(source: &str) -> String {
    format!("import: {source}")
}

/// Progress: a bar on a terminal, plain lines otherwise (none with --json).
enum Progress {
    Bar(indicatif::ProgressBar),
    Lines,
    Quiet,
}

impl Progress {
    fn new(total: usize, out: Out) -> Progress {
        if out.json {
            Progress::Quiet
        } else if std::io::stderr().is_terminal() {
            let bar = indicatif::ProgressBar::new(total as u64);
            if let Ok(style) =
                indicatif::ProgressStyle::with_template("{spinner} [{bar:30}] {pos}/{len} {msg}")
            {
                bar.set_style(style.progress_chars("=> "));
            }
            Progress::Bar(bar)
        } else {
            Progress::Lines
        }
    }

    fn starting(&self, source: &str) {
        if let Progress::Bar(bar) = self {
            bar.set_message(source.to_string());
        }
    }

    fn done(&self, item: &Imported) {
        let line = format!(
            "{} {} → {} in {}",
            match item.status {
                Fate::Written => "written",
                Fate::Unchanged => "unchanged",
                Fate::WouldWrite => "would write",
            },
            item.source,
            item.episode,
            item.destination
        );
        match self {
            Progress::Bar(bar) => {
                bar.println(line);
                bar.inc(1);
            }
            Progress::Lines => println!("{line}"),
            Progress::Quiet => {}
        }
    }

    fn finish(&self) {
        if let Progress::Bar(bar) = self {
            bar.finish_and_clear();
        }
    }
}

pub async fn run(
    client: &NativeClient,
    op: &OperatorId,
    subject: Option<&gralkor::access::Subject>,
    args: &ImportArgs,
    out: Out,
) -> Outcome {
    // The Lens is checked before anything is read or written. Without `--lens`, the
    // workspace goes to the default group when one is configured (as the OpenClaw
    // plugin imports to its `defaultGroupId`), else through `personal-chat`.
    let snapshot = client.runtime().snapshot();
    let lens = match &args.lens {
        Some(lens) => lens.clone(),
        None if snapshot.lens("--lens", DEFAULT_GROUP_LENS).is_ok() => {
            DEFAULT_GROUP_LENS.to_string()
        }
        None => "personal-chat".to_string(),
    };
    snapshot.lens("--lens", &lens)?;
    let (items, skipped) = plan(args, &lens)?;
    // Every item's episode is looked up before anything is written.
    let mut looked_up = Vec::with_capacity(items.len());
    for item in items {
        let id = content_id(&format!("import:{}", item.source), &item.content);
        let (place, expected) = graphs::ingested_uuid(&snapshot, op, &lens, &id)?;
        let stored = client
            .get_episode(&EpisodeRef::new(op.clone(), &place.name, expected).asked_by(subject))
            .await?
            .is_some();
        looked_up.push((item, id, place, expected, stored));
    }
    let progress = Progress::new(looked_up.len(), out);
    let mut imported = Vec::with_capacity(looked_up.len());
    for (item, id, place, expected, stored) in looked_up {
        progress.starting(&item.source);
        let status = match (stored, args.dry_run) {
            (true, _) => Fate::Unchanged,
            (false, true) => Fate::WouldWrite,
            (false, false) => {
                let mut request = Ingest::new(&id, op, &lens, item.content)
                    .source_description(description(&item.source))
                    .asked_by(subject);
                if let Some(at) = item.reference_time {
                    request = request.reference_time(at);
                }
                if let Some(session) = &item.session {
                    request = request.session(session.clone());
                }
                client.ingest(&request).await?;
                Fate::Written
            }
        };
        let done = Imported {
            source: item.source,
            kind: item.kind,
            id,
            destination: place.name,
            episode: expected,
            status,
        };
        progress.done(&done);
        imported.push(done);
    }
    progress.finish();
    let count = |f: Fate| imported.iter().filter(|i| i.status == f).count();
    let report = Report {
        dry_run: args.dry_run,
        lens: lens.clone(),
        written: count(Fate::Written),
        unchanged: count(Fate::Unchanged),
        would_write: count(Fate::WouldWrite),
        skipped,
        items: imported,
    };
    out.emit(&report, || {
        let mut lines: Vec<String> = report
            .skipped
            .iter()
            .map(|s| format!("skipped {} ({})", s.source, s.reason))
            .collect();
        lines.push(if report.dry_run {
            format!(
                "dry run: {} would be written, {} unchanged; nothing was written",
                report.would_write, report.unchanged
            )
        } else {
            format!("{} written, {} unchanged", report.written, report.unchanged)
        });
        lines.join("\n")
    })
}
