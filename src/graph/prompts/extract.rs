//! The prompt of the single extraction call: entities and facts of one episode, and
//! what it renders from ([`ExtractionInput`], re-exported as
//! `gralkor::graph::ExtractionInput`).

use std::fmt::Write as _;

use super::{append_instructions, tagged};
use crate::graph::model::{SourceKind, Timestamp};
use crate::ontology::Ontology;

/// The default usage label of an extraction call.
pub const DEFAULT_EXTRACTION_LABEL: &str = "extract";

/// What one extraction reads.
#[derive(Debug, Clone, Copy)]
pub struct ExtractionInput<'a> {
    /// The episode's text.
    pub content: &'a str,
    /// What kind of text it is; a message's speaker is an entity.
    pub source: SourceKind,
    /// Where the episode comes from (`chat`, `meeting notes`, …); may be empty.
    pub source_description: &'a str,
    /// When the episode happened; relative times are resolved against it.
    pub reference_time: Timestamp,
    /// Earlier episodes' texts, oldest first, given as context only.
    pub previous_episodes: &'a [String],
    /// The entity and relationship types to extract.
    pub ontology: &'a Ontology,
    /// Labels of entity types not to extract (compared ignoring ASCII case); `Entity`
    /// drops generic entities.
    pub excluded_types: &'a [String],
    /// Extra instructions from the caller, appended to the prompt.
    pub instructions: Option<&'a str>,
    /// The usage-accounting label of the call.
    pub label: &'a str,
}

impl<'a> ExtractionInput<'a> {
    /// An input with no source description, previous episodes, excluded types or
    /// extra instructions, labelled [`DEFAULT_EXTRACTION_LABEL`].
    pub fn new(
        content: &'a str,
        source: SourceKind,
        reference_time: Timestamp,
        ontology: &'a Ontology,
    ) -> Self {
        ExtractionInput {
            content,
            source,
            source_description: "",
            reference_time,
            previous_episodes: &[],
            ontology,
            excluded_types: &[],
            instructions: None,
            label: DEFAULT_EXTRACTION_LABEL,
        }
    }
}

/// The rules for entities, shared by every source kind.
const ENTITY_RULES: &str = "\
# Entities
- An entity is a specific, nameable thing the episode talks about: a person, an \
organisation, a place, a product, a project, an event, a document, a tool, a named idea.
- Name each entity with the fullest name the episode gives for it (\"Alice Chen\" rather \
than \"Alice\" when both appear). List each entity once.
- Never output a pronoun (I, me, you, he, she, it, we, they, this, that) as an entity. \
Work out which named entity it points at and use that name; if nothing named fits, leave \
it out.
- Leave out abstractions, feelings, activities and generic nouns (\"the meeting\", \
\"stuff\", \"happiness\", \"the plan\") unless the episode treats them as a specific, \
named thing.
- Never output a date, a time or a duration on its own as an entity: times belong in the \
`valid_at` and `invalid_at` of facts.
- Family and other relative roles are qualified by the person they belong to: \
\"Alice's mother\", \"Bob's manager\", never a bare \"mother\" or \"manager\".
- Set `type_id` to the id of the entity type below that fits best; use 0 when no other \
type fits.
";

/// The rules for facts and their times.
const FACT_RULES: &str = "\
# Facts
- A fact links two of your entities: `source` and `target` are entity names spelled \
exactly as in your `entities` list. Every entity a fact needs must be in that list.
- `relation_type` names the relation in UPPER_SNAKE_CASE, short and verb-like \
(WORKS_AT, LIVES_IN, PREFERS). Use a listed relationship type when one fits.
- `fact` is one self-contained sentence that names both entities and says what the \
episode says about them.
- Keep who said it and how sure they were. When someone reports, claims, believes, \
guesses, hopes or doubts something, the fact says so (\"Bob said that Alice moved to \
Lisbon\", \"Alice thinks the launch might slip\", \"maybe Carol will join Acme\"). Never \
turn hearsay, a guess or a possibility into a plain statement, and never add certainty \
the episode lacks.
- Extract every distinct fact, including facts about the speaker.

# Time
- The reference time is when the current episode happened. Resolve relative expressions \
(\"yesterday\", \"last spring\", \"two years ago\", \"since March\") against it.
- Write times as RFC 3339 in UTC, e.g. 2024-05-01T00:00:00Z. A date without a time of \
day is midnight UTC; a month alone is its first day; a year alone is January 1.
- `valid_at` is when the fact became true. A fact that holds now and has no stated start \
begins at the reference time. Use null only when the start cannot be told at all.
- `invalid_at` is when the fact stopped being true, and only when the episode says it \
ended (\"Alice left Acme in June\"). Otherwise null.
- Plans, intentions, schedules and deadlines do not end anything: \"Bob will leave Acme \
next month\" or \"the report is due on Friday\" gets `valid_at` = the reference time and \
`invalid_at` = null, with the date kept in the fact text.
";

/// How previous episodes may be used.
const CONTEXT_RULES: &str = "\
# Context
- Previous episodes, when given, are context only: use them to understand who or what \
the current episode refers to. Extract entities and facts from the current episode \
alone; never re-extract something that only a previous episode says.
- Answer with empty lists when the current episode holds nothing to remember.
";

/// What to read and who the speaker is, per source kind.
fn kind_rules(kind: SourceKind) -> &'static str {
    match kind {
        SourceKind::Message => {
            "The current episode is a conversation message written as `speaker: text`. \
The speaker is an entity: always extract them first, under the name before the colon, \
and attribute what they say to them."
        }
        SourceKind::Text => {
            "The current episode is free text. When the text has an author or a speaker \
who is named, that person is an entity."
        }
        SourceKind::Json => {
            "The current episode is a JSON document. Extract the entities and facts its \
values describe; keys and field names are not entities, and the entity the document \
is about (its `name`, `title` or similar field) is an entity."
        }
    }
}

/// The system message: role, rules, the ontology's type lists, excluded types and the
/// caller's extra instructions.
pub(crate) fn system(input: &ExtractionInput<'_>) -> String {
    let mut out = String::from(
        "You build the long-term memory of an AI agent. From one episode you extract, in a \
single answer, the entities it mentions and the facts it states about them.\n\n",
    );
    out.push_str(kind_rules(input.source));
    out.push_str("\n\n");
    out.push_str(ENTITY_RULES);
    let excluded: Vec<&str> = input
        .excluded_types
        .iter()
        .map(|s| s.trim())
        .filter(|s| !s.is_empty())
        .collect();
    if !excluded.is_empty() {
        let _ = writeln!(
            out,
            "- Do not extract entities of these types at all: {}.",
            excluded.join(", ")
        );
    }
    out.push('\n');
    out.push_str(FACT_RULES);
    out.push('\n');
    out.push_str(CONTEXT_RULES);
    out.push('\n');
    out.push_str(&input.ontology.prompt_text());
    append_instructions(&mut out, input.instructions);
    out
}

/// The user message: previous episodes, the reference time, the source and the
/// current episode.
pub(crate) fn user(input: &ExtractionInput<'_>) -> String {
    let mut out = String::new();
    if !input.previous_episodes.is_empty() {
        let mut previous = String::new();
        for (i, text) in input.previous_episodes.iter().enumerate() {
            let _ = writeln!(previous, "[{}] {}", i + 1, text.trim());
        }
        tagged(&mut out, "PREVIOUS_EPISODES", &previous);
    }
    tagged(
        &mut out,
        "REFERENCE_TIME",
        &input.reference_time.to_rfc3339(),
    );
    let mut source = input.source.as_str().to_string();
    let description = input.source_description.trim();
    if !description.is_empty() {
        let _ = write!(source, " ({description})");
    }
    tagged(&mut out, "SOURCE", &source);
    tagged(&mut out, "CURRENT_EPISODE", input.content);
    out.push_str("\nExtract the entities and facts of the current episode.\n");
    out
}

/// The rules of the combined call, when known facts are shown.
const KNOWN_RULES: &str = "\
# Known facts
The graph already holds the numbered known facts listed in `KNOWN_FACTS`, each with \
the time span during which it was true (`valid_at` to `invalid_at`; null means unknown \
or still true) and its two entities. For every fact you extract, also answer:
- `restates`: the number of the known fact that states the same thing between the same \
two entities (the same relation and meaning; the wording may differ, and the new fact \
may add or sharpen a date), or -1 when none does.
- `contradicts`: the numbers of known facts that cannot be true at the same time as the \
new fact (Alice works at Globex vs Alice works at Acme when she can hold only one job; a \
new status, location or value replacing an old one). Facts that can hold together, add \
detail, or concern other entities are not contradictions; a plan or intention does not \
contradict the current state; a fact you say it restates is not also a contradiction. \
Empty list when none.
- Known facts are context for these two answers only: never extract a fact because a \
known fact states it.
";

/// Adds the known facts (`lines`, rendered and numbered by the caller) to the
/// extraction prompt: their rules to `system`, the list to `user` before the current
/// episode's instruction line.
pub(crate) fn add_known(system: &mut String, user: &mut String, lines: &[String]) {
    system.push('\n');
    system.push_str(KNOWN_RULES);
    let mut block = String::new();
    tagged(&mut block, "KNOWN_FACTS", &lines.join("\n"));
    let at = user
        .find("\nExtract the entities and facts of the current episode.")
        .unwrap_or(user.len());
    user.insert_str(at, &block);
}
