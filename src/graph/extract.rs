//! Extraction: the entities and facts of one episode, from **one** structured
//! language-model call.
//!
//! Graphiti's default path asks the model twice (entities, then facts between them);
//! gralkor asks once, with one schema holding both lists (as Graphiti's bulk path
//! does), so an episode costs one call whether it yields one fact or forty. The prompt
//! is gralkor's own ([`crate::graph`]'s `prompts` module) and carries Graphiti's rules:
//! the speaker is an entity; no pronouns, abstractions or bare dates; kinship is
//! qualified ("Alice's mother"); entity types are chosen by id from the ontology's type
//! list; facts keep attribution and epistemic wording ("Bob said…", "maybe…"); times
//! are RFC 3339 relative to the reference time, ongoing facts start at it, and plans
//! or deadlines are not invalidations. Previous episodes are context only.
//!
//! The answer ([`extraction_schema`]) is checked by the language-model layer (one
//! repair attempt with real providers); [`extract`] then cleans it up:
//!
//! * entity names are trimmed and empty ones dropped;
//! * a type id maps to its label with [`Ontology::label_for_id`]; an unknown id
//!   (negative, fractional or out of range) becomes the generic `Entity`;
//! * entities whose normalised names (lower case, runs of whitespace as one space) are
//!   equal are one entity: the first spelling is kept, with the most specific label (a
//!   declared type beats `Entity`; between two declared types the first wins);
//! * then entities the ontology does not keep ([`Ontology::keeps_entity`]: generic
//!   ones under [`EntityMode::Strict`](crate::ontology::EntityMode::Strict)) and
//!   entities of an excluded type are dropped;
//! * a fact whose source or target is not a kept entity (compared by normalised name)
//!   is **dropped**, never completed with a generic entity: the prompt asks for every
//!   endpoint in the entity list, and inventing one would bring back entities that
//!   strict mode or an exclusion just removed. Endpoint names are replaced by the kept
//!   entity's spelling; a fact with empty text is dropped;
//! * a relation type is normalised to `UPPER_SNAKE_CASE` (`works at`, `worksAt` and
//!   `works-at` all become `WORKS_AT`); one that is then no identifier
//!   ([`is_identifier`]) or is one of gralkor's own types (`MENTIONS`, `HAS_MEMBER`)
//!   becomes the generic `RELATES_TO`;
//! * `valid_at` / `invalid_at` are parsed with [`Timestamp::parse_rfc3339`]; text that
//!   does not parse counts as no time (`None`) rather than failing the episode.
//!
//! Whether a declared relationship type may link the two endpoint types
//! ([`Ontology::relationship_allowed`]) is not decided here: entity resolution may
//! still change the endpoints' labels.
//!
//! ```
//! use gralkor::graph::{ExtractionInput, SourceKind, Timestamp, extract, extraction_schema};
//! use gralkor::llm::doubles::ScriptedModel;
//! use gralkor::ontology::Ontology;
//! use serde_json::json;
//!
//! # #[tokio::main(flavor = "current_thread")] async fn main() -> gralkor::Result<()> {
//! let model = ScriptedModel::new().answer(extraction_schema().name, json!({
//!     "entities": [{"name": "Alice", "type_id": 0}, {"name": "Acme", "type_id": 0}],
//!     "facts": [{"source": "Alice", "target": "Acme", "relation_type": "works at",
//!                "fact": "Alice works at Acme.", "valid_at": "2024-05-01T00:00:00Z",
//!                "invalid_at": null}]
//! }));
//! let ontology = Ontology::generic();
//! let when: Timestamp = "2024-05-01T00:00:00Z".parse()?;
//! let input = ExtractionInput::new("Alice: I work at Acme.", SourceKind::Message, when, &ontology);
//! let out = extract(&model, &input).await?;
//! assert_eq!(out.entities.len(), 2);
//! assert_eq!(out.facts[0].relation_type, "WORKS_AT");
//! assert_eq!(out.facts[0].valid_at, Some(when));
//! assert_eq!(model.calls().len(), 1);
//! # Ok(()) }
//! ```

use std::collections::HashMap;

use serde::Deserialize;
use serde_json::{Number, Value, json};

use super::Timestamp;
use super::prompts;
internal_use!(super::prompts::extract::{DEFAULT_EXTRACTION_LABEL, ExtractionInput});
use crate::falkordb::is_identifier;
use crate::llm::{GenerateRequest, LanguageModel, ModelSize, OutputSchema, TokenUsage};
use crate::ontology::{GENERIC_ENTITY_LABEL, Ontology, RESERVED_RELATIONSHIP_TYPES};
use crate::{Error, Result};

/// The name of the extraction call's output schema (the test double keys its
/// answers by it).
pub const EXTRACTION_SCHEMA_NAME: &str = "extraction";

pub use crate::vocab::GENERIC_RELATION_TYPE;

/// An entity the episode mentions.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ExtractedEntity {
    /// The name, trimmed.
    pub name: String,
    /// The ontology label (`Entity` for a generic entity).
    pub label: String,
}

/// A fact the episode states, between two [`ExtractedEntity`] names.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ExtractedFact {
    /// The source entity's name, as spelled in [`Extraction::entities`].
    pub source: String,
    /// The target entity's name, as spelled in [`Extraction::entities`].
    pub target: String,
    /// The relation type, an `UPPER_SNAKE_CASE` identifier.
    pub relation_type: String,
    /// The fact as a sentence, attribution and hedges included.
    pub fact: String,
    /// When the fact became true, if known.
    pub valid_at: Option<Timestamp>,
    /// When the fact stopped being true, if it did.
    pub invalid_at: Option<Timestamp>,
}

/// The cleaned-up result of one extraction call.
#[derive(Debug, Clone, PartialEq)]
pub struct Extraction {
    /// Distinct entities, in the order the model listed them.
    pub entities: Vec<ExtractedEntity>,
    /// Facts between those entities, in the model's order.
    pub facts: Vec<ExtractedFact>,
    /// Tokens the call used (repair attempt included).
    pub usage: TokenUsage,
}

/// The output schema of the extraction call: `{entities: [{name, type_id}], facts:
/// [{source, target, relation_type, fact, valid_at, invalid_at}]}`, every field
/// required, the two times nullable. It uses only the subset
/// [`crate::llm::schema::check_schema`] accepts and is strict-compatible.
#[cfg_attr(not(feature = "testing"), allow(dead_code))] // the engine calls `schema_of`; tests call this
pub fn extraction_schema() -> OutputSchema {
    schema_of(false)
}

/// [`extraction_schema`], or with `resolving` the schema of the engine's combined call:
/// each fact also says which known fact it restates (`restates`, a number or -1) and
/// which it contradicts (`contradicts`, numbers). Same name, still strict-compatible.
pub(crate) fn schema_of(resolving: bool) -> OutputSchema {
    let object = |description: &str, properties: Value| {
        let required: Vec<&String> = properties
            .as_object()
            .map(|p| p.keys().collect())
            .unwrap_or_default();
        json!({
            "type": "object",
            "description": description,
            "properties": properties,
            "required": required,
            "additionalProperties": false,
        })
    };
    let entity = object(
        "An entity the current episode mentions.",
        json!({
            "name": {"type": "string", "description": "The entity's fullest name."},
            "type_id": {"type": "integer", "description": "The id of the entity type; 0 when no other type fits."},
        }),
    );
    let mut fact_properties = json!({
        "source": {"type": "string", "description": "The source entity's name, as in `entities`."},
        "target": {"type": "string", "description": "The target entity's name, as in `entities`."},
        "relation_type": {"type": "string", "description": "The relation in UPPER_SNAKE_CASE, e.g. WORKS_AT."},
        "fact": {"type": "string", "description": "One sentence, keeping attribution and uncertainty."},
        "valid_at": {"type": ["string", "null"], "description": "RFC 3339 UTC time the fact became true, or null."},
        "invalid_at": {"type": ["string", "null"], "description": "RFC 3339 UTC time the fact ended, or null."},
    });
    if resolving {
        fact_properties["restates"] = json!({"type": "integer", "description": "The number of the known fact this fact restates, or -1."});
        fact_properties["contradicts"] = json!({"type": "array", "items": {"type": "integer"}, "description": "Numbers of known facts this fact contradicts."});
    }
    let fact = object(
        "A fact the current episode states about two entities.",
        fact_properties,
    );
    let root = object(
        "The entities and facts of the current episode.",
        json!({
            "entities": {"type": "array", "items": entity},
            "facts": {"type": "array", "items": fact},
        }),
    );
    OutputSchema::new(EXTRACTION_SCHEMA_NAME, root)
}

#[derive(Deserialize)]
struct RawExtraction {
    entities: Vec<RawEntity>,
    facts: Vec<RawFact>,
}

#[derive(Deserialize)]
struct RawEntity {
    name: String,
    type_id: Number,
}

#[derive(Deserialize)]
struct RawFact {
    source: String,
    target: String,
    relation_type: String,
    fact: String,
    valid_at: Option<String>,
    invalid_at: Option<String>,
    #[serde(default = "no_known_fact")]
    restates: i64,
    #[serde(default)]
    contradicts: Vec<i64>,
}

fn no_known_fact() -> i64 {
    -1
}

/// What the combined call said about one extracted fact and the known facts: the
/// number of the one it restates and those it contradicts (numbers as shown; the
/// engine checks them).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct KnownVerdict {
    pub restates: Option<usize>,
    pub contradicts: Vec<usize>,
}

/// Extracts the entities and facts of one episode with exactly one call to `llm`
/// (the default model size), then cleans the answer up as the
/// [module documentation](self) describes.
///
/// Errors: whatever [`LanguageModel::generate`] returns (a bad request, a provider
/// failure, or [`Error::ModelOutput`] when the answer stayed invalid after the repair
/// attempt).
#[cfg_attr(not(feature = "testing"), allow(dead_code))] // the engine calls `extract_resolving`; tests call this
pub async fn extract(llm: &dyn LanguageModel, input: &ExtractionInput<'_>) -> Result<Extraction> {
    Ok(extract_resolving(llm, input, &[]).await?.0)
}

/// [`extract`] for the engine: with `known` (the rendered lines of numbered known
/// facts; none gives exactly [`extract`]'s call) the prompt shows them and the schema
/// ([`schema_of`]) asks per fact which one it restates and which it contradicts. One
/// call either way; the verdicts are aligned with [`Extraction::facts`].
pub(crate) async fn extract_resolving(
    llm: &dyn LanguageModel,
    input: &ExtractionInput<'_>,
    known: &[String],
) -> Result<(Extraction, Vec<KnownVerdict>)> {
    let resolving = !known.is_empty();
    let mut system = prompts::extract::system(input);
    let mut user = prompts::extract::user(input);
    if resolving {
        prompts::extract::add_known(&mut system, &mut user, known);
    }
    let request = GenerateRequest::new(schema_of(resolving))
        .system(system)
        .user(user)
        .size(ModelSize::Default)
        .label(input.label);
    let generation = llm.generate(&request).await?;
    let raw: RawExtraction =
        serde_json::from_value(generation.value).map_err(|e| Error::ModelOutput {
            provider: llm.provider().to_string(),
            message: format!("extraction answer does not fit `{EXTRACTION_SCHEMA_NAME}`: {e}"),
        })?;
    let entities = clean_entities(raw.entities, input);
    let offered = |k: i64| usize::try_from(k).ok().filter(|k| *k < known.len());
    let (facts, verdicts) = clean_facts(raw.facts, &entities)
        .into_iter()
        .map(|(fact, raw)| {
            let verdict = KnownVerdict {
                restates: offered(raw.restates),
                contradicts: raw.contradicts.into_iter().filter_map(offered).collect(),
            };
            (fact, verdict)
        })
        .unzip();
    Ok((
        Extraction {
            entities,
            facts,
            usage: generation.usage,
        },
        verdicts,
    ))
}

/// Lower case with runs of whitespace as one space: the key entities are compared by.
fn normalise_name(name: &str) -> String {
    name.split_whitespace()
        .collect::<Vec<_>>()
        .join(" ")
        .to_lowercase()
}

fn label_for(ontology: &Ontology, type_id: &Number) -> String {
    type_id
        .as_u64()
        .and_then(|id| usize::try_from(id).ok())
        .and_then(|id| ontology.label_for_id(id))
        .unwrap_or(GENERIC_ENTITY_LABEL)
        .to_string()
}

fn clean_entities(raw: Vec<RawEntity>, input: &ExtractionInput<'_>) -> Vec<ExtractedEntity> {
    let mut out: Vec<ExtractedEntity> = Vec::new();
    let mut index: HashMap<String, usize> = HashMap::new();
    for entity in raw {
        let name = entity.name.trim();
        if name.is_empty() {
            continue;
        }
        let label = label_for(input.ontology, &entity.type_id);
        match index.get(&normalise_name(name)) {
            Some(&i) => {
                if out[i].label == GENERIC_ENTITY_LABEL && label != GENERIC_ENTITY_LABEL {
                    out[i].label = label;
                }
            }
            None => {
                index.insert(normalise_name(name), out.len());
                out.push(ExtractedEntity {
                    name: name.to_string(),
                    label,
                });
            }
        }
    }
    out.retain(|e| {
        input.ontology.keeps_entity(&e.label)
            && !input
                .excluded_types
                .iter()
                .any(|x| x.trim().eq_ignore_ascii_case(&e.label))
    });
    out
}

/// The kept facts, each with its raw answer (for the verdicts).
fn clean_facts(raw: Vec<RawFact>, entities: &[ExtractedEntity]) -> Vec<(ExtractedFact, RawFact)> {
    let names: HashMap<String, &str> = entities
        .iter()
        .map(|e| (normalise_name(&e.name), e.name.as_str()))
        .collect();
    raw.into_iter()
        .filter_map(|f| {
            let source = *names.get(&normalise_name(&f.source))?;
            let target = *names.get(&normalise_name(&f.target))?;
            let fact = f.fact.trim();
            if fact.is_empty() {
                return None;
            }
            let cleaned = ExtractedFact {
                source: source.to_string(),
                target: target.to_string(),
                relation_type: relation_type(&f.relation_type),
                fact: fact.to_string(),
                valid_at: parse_time(f.valid_at.as_deref()),
                invalid_at: parse_time(f.invalid_at.as_deref()),
            };
            Some((cleaned, f))
        })
        .collect()
}

fn parse_time(text: Option<&str>) -> Option<Timestamp> {
    Timestamp::parse_rfc3339(text?.trim()).ok()
}

/// `UPPER_SNAKE_CASE` of a model-written relation type, or [`GENERIC_RELATION_TYPE`]
/// when the result is no identifier or one of gralkor's own types.
pub(crate) fn relation_type(raw: &str) -> String {
    let mut out = String::new();
    let mut prev: Option<char> = None;
    for c in raw.trim().chars() {
        if c.is_alphanumeric() {
            let boundary =
                c.is_uppercase() && prev.is_some_and(|p| p.is_lowercase() || p.is_ascii_digit());
            if boundary && !out.ends_with('_') {
                out.push('_');
            }
            out.extend(c.to_uppercase());
        } else if !out.is_empty() && !out.ends_with('_') {
            out.push('_');
        }
        prev = Some(c);
    }
    while out.ends_with('_') {
        out.pop();
    }
    if is_identifier(&out) && !RESERVED_RELATIONSHIP_TYPES[1..].contains(&out.as_str()) {
        out
    } else {
        GENERIC_RELATION_TYPE.to_string()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn relation_types_become_upper_snake_identifiers_or_relates_to() {
        for (raw, want) in [
            ("works at", "WORKS_AT"),
            ("worksAt", "WORKS_AT"),
            ("works-at", "WORKS_AT"),
            ("  WORKS_AT ", "WORKS_AT"),
            ("__lives__in__", "LIVES_IN"),
            ("has 2 cats", "HAS_2_CATS"),
            ("", "RELATES_TO"),
            ("!!!", "RELATES_TO"),
            ("2nd_best", "RELATES_TO"),
            ("aime bien", "AIME_BIEN"),
            ("préfère", "RELATES_TO"),
            ("mentions", "RELATES_TO"),
            ("has member", "RELATES_TO"),
            ("relates to", "RELATES_TO"),
        ] {
            assert_eq!(relation_type(raw), want, "{raw:?}");
        }
    }

    #[test]
    fn names_normalise_case_and_whitespace() {
        assert_eq!(normalise_name("  Alice \t  CHEN "), "alice chen");
    }
}
