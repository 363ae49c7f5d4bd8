//! Stories: episodes with a gold graph, one JSON file each (`eval/data/extraction/`).
//!
//! ```json
//! {
//!   "name": "career",
//!   "covers": ["people", "organisations", "plans vs facts"],
//!   "ontology": null,
//!   "episodes": [
//!     {"id": "e1", "source": "message", "source_description": "chat",
//!      "reference_time": "2025-01-10T09:00:00Z", "content": "Ada: I work at Acme."}
//!   ],
//!   "gold": {
//!     "entities": [{"name": "Ada Lovelace", "type": "Entity", "aliases": ["Ada"]}],
//!     "facts": [{"id": "f1", "episode": "e1", "source": "Ada Lovelace", "target": "Acme",
//!                "relation": "WORKS_AT", "fact": "Ada Lovelace works at Acme.",
//!                "valid_at": "2025-01-10T00:00:00Z", "invalid_at": null,
//!                "markers": [], "duplicate_of": null, "contradicts": []}],
//!     "invalidations": [{"fact": "f1", "by": "f3", "invalid_at": "2025-02-23T00:00:00Z"}]
//!   }
//! }
//! ```
//!
//! * `content` is a string, or for a `json` episode any JSON value (sent as its
//!   compact text).
//! * A gold fact's `valid_at` / `invalid_at` are what its episode states (what a
//!   correct extraction answers); `invalidations` are what later episodes do to it:
//!   the fact `fact` ends at `invalid_at` because of `by` (in ingestion order, or out
//!   of order: an older fact arriving after a newer one is ended on arrival).
//! * `contradicts` lists the earlier facts a fact contradicts and `duplicate_of` the
//!   earlier fact it restates (a restatement is not a fact of its own in the final
//!   graph); the perfect scripted model answers the resolution calls from them.
//! * `markers` are attribution and hedging words the stored fact must keep
//!   (`"Gio said"`, `"maybe"`), compared case-insensitively.
//! * A typed entity's `attributes` are the ontology fields a correct run fills.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

use gralkor::ontology::{GENERIC_ENTITY_LABEL, Ontology};
use gralkor::storage::{SourceKind, Timestamp};
use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::text::normalise;
use crate::{EvalError, Result};

/// One story.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Story {
    /// A short unique name (the graph is named after it).
    pub name: String,
    /// What the story exercises, for the report.
    #[serde(default)]
    pub covers: Vec<String>,
    /// The ontology (generic when absent).
    #[serde(default)]
    pub ontology: Option<Ontology>,
    /// The episodes, in ingestion order.
    pub episodes: Vec<StoryEpisode>,
    /// The gold graph.
    pub gold: Gold,
    /// The file it was read from (set by the loader).
    #[serde(skip)]
    pub file: PathBuf,
}

/// One episode of a story.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct StoryEpisode {
    /// Unique within the story.
    pub id: String,
    /// `message`, `text` or `json`.
    pub source: SourceKind,
    /// Where it came from.
    #[serde(default)]
    pub source_description: String,
    /// When it happened.
    pub reference_time: Timestamp,
    /// The text, or for `json` a JSON value.
    pub content: Value,
}

impl StoryEpisode {
    /// The episode's text as ingested (a JSON value in its compact form).
    pub fn text(&self) -> String {
        match &self.content {
            Value::String(s) => s.clone(),
            other => other.to_string(),
        }
    }
}

/// The gold graph of a story.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Gold {
    /// Every entity a correct run stores.
    pub entities: Vec<GoldEntity>,
    /// Every fact a correct extraction states, restatements included.
    pub facts: Vec<GoldFact>,
    /// The facts later episodes end.
    #[serde(default)]
    pub invalidations: Vec<GoldInvalidation>,
}

/// A gold entity.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct GoldEntity {
    /// The canonical name.
    pub name: String,
    /// The ontology label (`Entity` when generic).
    #[serde(rename = "type", default = "generic_label")]
    pub label: String,
    /// Other names that refer to it (a stored entity under one of them matches).
    #[serde(default)]
    pub aliases: Vec<String>,
    /// Typed attributes a correct run fills.
    #[serde(default)]
    pub attributes: serde_json::Map<String, Value>,
}

fn generic_label() -> String {
    GENERIC_ENTITY_LABEL.to_owned()
}

/// A gold fact.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct GoldFact {
    /// Unique within the story.
    pub id: String,
    /// The episode that states it.
    pub episode: String,
    /// The source entity's canonical name.
    pub source: String,
    /// The target entity's canonical name.
    pub target: String,
    /// The relation type.
    pub relation: String,
    /// The fact as a sentence.
    pub fact: String,
    /// When it became true, as its episode says.
    #[serde(default)]
    pub valid_at: Option<Timestamp>,
    /// When it ended, as its episode says.
    #[serde(default)]
    pub invalid_at: Option<Timestamp>,
    /// Attribution and hedging words the stored fact must keep.
    #[serde(default)]
    pub markers: Vec<String>,
    /// The earlier fact it restates.
    #[serde(default)]
    pub duplicate_of: Option<String>,
    /// The earlier facts it contradicts.
    #[serde(default)]
    pub contradicts: Vec<String>,
}

/// A fact ended by a later episode.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct GoldInvalidation {
    /// The fact that ends.
    pub fact: String,
    /// The fact that ends it.
    pub by: String,
    /// When it ends.
    pub invalid_at: Timestamp,
}

impl Story {
    /// The ontology the story extracts with.
    pub fn ontology(&self) -> Ontology {
        self.ontology.clone().unwrap_or_else(Ontology::generic)
    }

    /// The gold facts of the final graph: every fact but the restatements.
    pub fn final_facts(&self) -> impl Iterator<Item = &GoldFact> {
        self.gold.facts.iter().filter(|f| f.duplicate_of.is_none())
    }

    /// The gold entity a name refers to (canonical name or alias, under
    /// [`normalise`]), by index.
    pub fn entity_of(&self, name: &str) -> Option<usize> {
        let key = normalise(name);
        self.gold.entities.iter().position(|e| {
            normalise(&e.name) == key || e.aliases.iter().any(|a| normalise(a) == key)
        })
    }

    /// The gold fact with this id.
    pub fn fact(&self, id: &str) -> Option<&GoldFact> {
        self.gold.facts.iter().find(|f| f.id == id)
    }

    /// Checks the story's rules; the error names the field.
    pub fn check(&self) -> Result<()> {
        let err = |field: String, rule: &str| EvalError::data(&self.file, field, rule);
        if self.name.trim().is_empty() {
            return Err(err("name".into(), "must not be blank"));
        }
        let ontology = self.ontology();
        let mut episodes = BTreeMap::new();
        for (i, e) in self.episodes.iter().enumerate() {
            if episodes.insert(e.id.as_str(), i).is_some() {
                return Err(err(format!("episodes[{i}].id"), "is repeated"));
            }
            let text = e.text();
            gralkor::storage::check_content("content", e.source, &text)
                .map_err(|x| err(format!("episodes[{i}].content"), &x.to_string()))?;
        }
        let mut names = BTreeSet::new();
        for (i, e) in self.gold.entities.iter().enumerate() {
            for n in std::iter::once(&e.name).chain(&e.aliases) {
                if !names.insert(normalise(n)) {
                    return Err(err(
                        format!("gold.entities[{i}]"),
                        &format!("repeats the name `{n}`"),
                    ));
                }
            }
            if !ontology.keeps_entity(&e.label) {
                return Err(err(
                    format!("gold.entities[{i}].type"),
                    &format!("`{}` is not kept by the story's ontology", e.label),
                ));
            }
            if e.label != GENERIC_ENTITY_LABEL && !e.attributes.is_empty() {
                ontology
                    .check_entity_attributes(&e.label, &Value::Object(e.attributes.clone()))
                    .map_err(|x| err(format!("gold.entities[{i}].attributes"), &x.to_string()))?;
            }
        }
        let mut seen: BTreeMap<&str, usize> = BTreeMap::new();
        for (i, f) in self.gold.facts.iter().enumerate() {
            let field = |x: &str| format!("gold.facts[{}].{x}", f.id);
            let Some(&at) = episodes.get(f.episode.as_str()) else {
                return Err(err(field("episode"), "names no episode"));
            };
            for (k, name) in [("source", &f.source), ("target", &f.target)] {
                match self.entity_of(name) {
                    Some(x) if normalise(&self.gold.entities[x].name) == normalise(name) => {}
                    _ => return Err(err(field(k), "must be a gold entity's canonical name")),
                }
            }
            for earlier in f.contradicts.iter().chain(&f.duplicate_of) {
                let Some(&j) = seen.get(earlier.as_str()) else {
                    return Err(err(
                        field("contradicts"),
                        &format!("`{earlier}` is no earlier fact"),
                    ));
                };
                let before = episodes[self.gold.facts[j].episode.as_str()];
                if before >= at {
                    return Err(err(
                        field("contradicts"),
                        &format!("`{earlier}` must come from an earlier episode"),
                    ));
                }
            }
            if seen.insert(f.id.as_str(), i).is_some() {
                return Err(err(field("id"), "is repeated"));
            }
        }
        for (i, v) in self.gold.invalidations.iter().enumerate() {
            for id in [&v.fact, &v.by] {
                if self.fact(id).is_none() {
                    return Err(err(
                        format!("gold.invalidations[{i}]"),
                        &format!("`{id}` is no gold fact"),
                    ));
                }
            }
        }
        Ok(())
    }
}

/// Reads every `*.json` story of `dir`, in file-name order, and checks each.
pub fn load_stories(dir: &Path) -> Result<Vec<Story>> {
    let mut files: Vec<PathBuf> = std::fs::read_dir(dir)
        .map_err(|e| EvalError::io(format!("reading {}", dir.display()), e))?
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.extension().is_some_and(|x| x == "json"))
        .collect();
    files.sort();
    let mut stories = Vec::new();
    let mut names = BTreeSet::new();
    for file in files {
        let text = std::fs::read_to_string(&file)
            .map_err(|e| EvalError::io(format!("reading {}", file.display()), e))?;
        let story = parse_story(&file, &text)?;
        if !names.insert(story.name.clone()) {
            return Err(EvalError::data(&file, "name", "is used by another story"));
        }
        stories.push(story);
    }
    Ok(stories)
}

/// One story from its JSON `text` (`file` names it in errors), checked.
pub(crate) fn parse_story(file: &Path, text: &str) -> Result<Story> {
    let mut story: Story = serde_json::from_str(text)
        .map_err(|e| EvalError::data(file, "story", format!("is not a story: {e}")))?;
    story.file = file.to_owned();
    story.check()?;
    Ok(story)
}

/// The directory of the shipped stories.
pub fn shipped_stories_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("data/extraction")
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn story(facts: Value) -> Story {
        serde_json::from_value(json!({
            "name": "t",
            "episodes": [
                {"id": "e1", "source": "text", "reference_time": "2025-01-01T00:00:00Z", "content": "a"},
                {"id": "e2", "source": "json", "reference_time": "2025-01-02T00:00:00Z", "content": {"k": 1}}
            ],
            "gold": {"entities": [{"name": "Ada", "aliases": ["Ada L"]}, {"name": "Acme"}], "facts": facts}
        }))
        .unwrap()
    }

    fn fact(id: &str, episode: &str, source: &str, contradicts: &[&str]) -> Value {
        json!({"id": id, "episode": episode, "source": source, "target": "Acme", "relation": "R",
               "fact": "f", "contradicts": contradicts})
    }

    #[test]
    fn a_story_breaking_a_rule_is_refused_naming_the_field() {
        let ok = story(json!([
            fact("f1", "e1", "Ada", &[]),
            fact("f2", "e2", "Ada", &["f1"])
        ]));
        ok.check().unwrap();
        assert_eq!(ok.episodes[1].text(), r#"{"k":1}"#);
        for (facts, field) in [
            (
                json!([fact("f1", "e9", "Ada", &[])]),
                "gold.facts[f1].episode",
            ),
            (
                json!([fact("f1", "e1", "Ada L", &[])]),
                "gold.facts[f1].source",
            ),
            (
                json!([
                    fact("f1", "e1", "Ada", &["f2"]),
                    fact("f2", "e2", "Ada", &[])
                ]),
                "gold.facts[f1].contradicts",
            ),
            (
                json!([
                    fact("f1", "e1", "Ada", &[]),
                    fact("f2", "e1", "Ada", &["f1"])
                ]),
                "gold.facts[f2].contradicts",
            ),
        ] {
            let err = story(facts).check().unwrap_err().to_string();
            assert!(err.contains(&format!("`{field}`")), "{err}");
        }
    }
}
