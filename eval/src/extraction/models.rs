//! Scripted models derived from a story's gold graph (on
//! [`gralkor::llm::doubles::ScriptedModel`]): they answer every call of the engine's
//! pipeline — extraction, entity resolution, fact resolution, entity details — by
//! reading the engine's own prompt and looking the episode, names and facts up in the
//! gold graph.
//!
//! * [`Script::Perfect`] answers what the gold graph says: each episode's gold
//!   entities (canonical names, their types) and facts (texts, relations, times), the
//!   gold restatements as duplicates and the gold contradictions, the gold attributes.
//!   The harness must score it 100% on every measure: that is the scorer's test.
//! * [`Script::Wrong`] damages the perfect answers in known ways, so what it scores
//!   can be computed from the gold graph alone: it adds one invented entity per
//!   episode (a false positive each), reports no duplicate and no contradiction
//!   (every restatement becomes an extra fact, every invalidation is missed) and
//!   strips every attribution or hedging marker from the fact texts (attribution
//!   lost), while keeping the endpoints, relations and times.

use std::sync::Arc;

use gralkor::llm::GenerateRequest;
use gralkor::llm::doubles::ScriptedModel;
use gralkor::ontology::GENERIC_ENTITY_LABEL;
use serde_json::{Map, Value, json};

use super::story::{GoldFact, Story};
use crate::text::normalise;

/// Which answers a scripted model gives.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Script {
    /// The gold graph's answers.
    Perfect,
    /// The gold answers, damaged as the [module](self) documentation says.
    Wrong,
}

/// The invented entities of [`Script::Wrong`], one per episode (by index, cycling):
/// names that share no word with each other or with any story's entities.
pub const PHANTOMS: [&str; 6] = [
    "Xandor Quillfeather",
    "Bexley Umbrage",
    "Corvina Dask",
    "Tiberius Nook",
    "Oona Marchetti",
    "Perpetua Yorick",
];

/// A scripted model answering `story`'s episodes as `script` says.
pub fn scripted_model(story: &Story, script: Script) -> ScriptedModel {
    let story = Arc::new(story.clone());
    ScriptedModel::new().respond_with(move |req| Ok(answer(&story, script, req)))
}

fn prompt(req: &GenerateRequest) -> String {
    req.messages
        .iter()
        .map(|m| m.content.as_str())
        .collect::<Vec<_>>()
        .join("\n")
}

/// The answer to one request of the pipeline.
fn answer(story: &Story, script: Script, req: &GenerateRequest) -> Value {
    let text = prompt(req);
    match req.schema.name.as_str() {
        "extraction" => extraction(story, script, &text),
        "entity_resolution" => entity_resolution(story, script, &text),
        "fact_resolution" => fact_resolution(story, script, &text),
        "entity_details" => entity_details(story, req, &text),
        _ => json!({}),
    }
}

/// The text between `<TAG>` and `</TAG>`.
fn between<'a>(text: &'a str, tag: &str) -> Option<&'a str> {
    let open = format!("<{tag}>");
    let close = format!("</{tag}>");
    let start = text.find(&open)? + open.len();
    let end = text[start..].find(&close)? + start;
    Some(text[start..end].trim())
}

fn time(t: Option<gralkor::storage::Timestamp>) -> Value {
    t.map_or(Value::Null, |t| json!(t.to_rfc3339()))
}

fn strip_markers(fact: &GoldFact) -> String {
    let mut text = fact.fact.clone();
    for m in &fact.markers {
        let lower = text.to_lowercase();
        if let Some(at) = lower.find(&m.to_lowercase()) {
            text.replace_range(at..at + m.len(), "");
        }
    }
    text.split_whitespace().collect::<Vec<_>>().join(" ")
}

fn type_id(story: &Story, label: &str) -> usize {
    if label == GENERIC_ENTITY_LABEL {
        return 0;
    }
    story
        .ontology()
        .entity_types()
        .iter()
        .position(|t| t.label() == label)
        .map_or(0, |i| i + 1)
}

fn extraction(story: &Story, script: Script, text: &str) -> Value {
    let content = between(text, "CURRENT_EPISODE").unwrap_or("");
    let Some((index, episode)) = story
        .episodes
        .iter()
        .enumerate()
        .find(|(_, e)| e.text().trim() == content)
    else {
        return json!({"entities": [], "facts": []});
    };
    let facts: Vec<&GoldFact> = story
        .gold
        .facts
        .iter()
        .filter(|f| f.episode == episode.id)
        .collect();
    let mut names: Vec<&str> = Vec::new();
    for f in &facts {
        for n in [f.source.as_str(), f.target.as_str()] {
            if !names.contains(&n) {
                names.push(n);
            }
        }
    }
    let mut entities: Vec<Value> = names
        .iter()
        .map(|n| {
            let label = story
                .entity_of(n)
                .map_or(GENERIC_ENTITY_LABEL, |i| &story.gold.entities[i].label);
            json!({"name": n, "type_id": type_id(story, label)})
        })
        .collect();
    if script == Script::Wrong {
        let typed = !story.ontology().entity_types().is_empty();
        entities.push(json!({
            "name": PHANTOMS[index % PHANTOMS.len()],
            "type_id": usize::from(typed),
        }));
    }
    let facts: Vec<Value> = facts
        .iter()
        .map(|f| {
            let fact = match script {
                Script::Perfect => f.fact.clone(),
                Script::Wrong => strip_markers(f),
            };
            let mut out = json!({
                "source": f.source, "target": f.target, "relation_type": f.relation,
                "fact": fact, "valid_at": time(f.valid_at), "invalid_at": time(f.invalid_at),
            });
            if text.contains("<KNOWN_FACTS>") {
                // The combined call: which known fact this one restates and which it
                // contradicts, by the gold links (nothing for the wrong script).
                let (restates, contradicts) = known_verdict(story, script, f, text);
                out["restates"] = json!(restates);
                out["contradicts"] = json!(contradicts);
            }
            out
        })
        .collect();
    json!({"entities": entities, "facts": facts})
}

/// The verdict of the combined extraction call on the known facts for `new`.
fn known_verdict(story: &Story, script: Script, new: &GoldFact, text: &str) -> (i64, Vec<i64>) {
    let mut restates = -1;
    let mut contradicts = Vec::new();
    if script == Script::Wrong {
        return (restates, contradicts);
    }
    for (k, rest) in text.lines().filter_map(|l| numbered(l, "known ")) {
        let key = normalise(fact_text(rest));
        let Some(existing) = story.gold.facts.iter().find(|f| normalise(&f.fact) == key) else {
            continue;
        };
        if new.duplicate_of.as_deref() == Some(existing.id.as_str()) && restates == -1 {
            restates = k;
        } else if new.contradicts.contains(&existing.id) {
            contradicts.push(k);
        }
    }
    (restates, contradicts)
}

/// `(number, text)` of a prompt line `<prefix><number><sep><text>`.
fn numbered<'a>(line: &'a str, prefix: &str) -> Option<(i64, &'a str)> {
    let rest = line.strip_prefix(prefix)?;
    let digits = rest.find(|c: char| !c.is_ascii_digit())?;
    let n = rest[..digits].parse().ok()?;
    Some((n, &rest[digits..]))
}

fn entity_resolution(story: &Story, script: Script, text: &str) -> Value {
    let mut out: Vec<Value> = Vec::new();
    let mut current: Option<Option<usize>> = None;
    for line in text.lines() {
        if let Some((i, rest)) = numbered(line, "item ") {
            let name = rest.trim_start_matches(": ");
            let name = name.rsplit_once(" (").map_or(name, |(n, _)| n);
            current = Some(story.entity_of(name));
            out.push(json!({"id": i, "duplicate_of": -1}));
        } else if let (Some(Some(want)), Some((k, rest))) = (current, numbered(line, "candidate "))
        {
            let name = rest.trim_start_matches(": ");
            let name = name.split_once(" (").map_or(name, |(n, _)| n);
            let last = out.last_mut().expect("an item precedes its candidates");
            if script == Script::Perfect
                && last["duplicate_of"] == -1
                && story.entity_of(name) == Some(want)
            {
                last["duplicate_of"] = json!(k);
            }
        }
    }
    json!({"resolutions": out})
}

/// The fact text of a resolution prompt line (before its ` [valid_at …]` span).
fn fact_text(rest: &str) -> &str {
    let rest = rest.split_once(": ").map_or(rest, |(_, t)| t);
    rest.rfind(" [valid_at ").map_or(rest, |at| &rest[..at])
}

fn fact_resolution(story: &Story, script: Script, text: &str) -> Value {
    let by_text = |t: &str| {
        let key = normalise(t);
        story.gold.facts.iter().find(|f| normalise(&f.fact) == key)
    };
    let mut out: Vec<Value> = Vec::new();
    let mut current: Option<&GoldFact> = None;
    for line in text.lines() {
        if let Some((i, rest)) = numbered(line, "new fact ") {
            current = by_text(fact_text(rest));
            out.push(json!({"id": i, "duplicate_of": -1, "contradicts": []}));
        } else if let Some((k, rest)) = numbered(line, "existing ") {
            let (Some(new), Some(existing), Some(last)) =
                (current, by_text(fact_text(rest)), out.last_mut())
            else {
                continue;
            };
            if script == Script::Wrong {
                continue;
            }
            if new.duplicate_of.as_deref() == Some(existing.id.as_str())
                && rest.starts_with(" (same entities)")
                && last["duplicate_of"] == -1
            {
                last["duplicate_of"] = json!(k);
            } else if new.contradicts.contains(&existing.id) {
                last["contradicts"]
                    .as_array_mut()
                    .expect("an array")
                    .push(json!(k));
            }
        }
    }
    json!({"facts": out})
}

fn entity_details(story: &Story, req: &GenerateRequest, text: &str) -> Value {
    let props = req.schema.schema["properties"]
        .as_object()
        .cloned()
        .unwrap_or_default();
    let mut out: Map<String, Value> = props.keys().map(|k| (k.clone(), json!([]))).collect();
    let mut current: Option<(i64, String)> = None;
    for line in text.lines() {
        if let Some((i, rest)) = numbered(line, "entity ") {
            let name = rest.trim_start_matches(": ");
            let name = name.rsplit_once(" (").map_or(name, |(n, _)| n);
            current = Some((i, name.to_owned()));
        } else if let Some((i, name)) = &current {
            if let Some(summary) = line.strip_prefix("current summary: ") {
                // A summary was requested before this line when it is over budget:
                // keep the first sentences (the engine cuts to the budget itself).
                if let Some(list) = out.get_mut("summaries").and_then(Value::as_array_mut)
                    && text_requested_summary(text, *i)
                {
                    list.push(json!({"id": i, "summary": summary}));
                }
            } else if let Some(label) = line
                .strip_prefix("requested: attributes of `")
                .and_then(|l| l.strip_suffix('`'))
            {
                let fields = &props[label]["items"]["properties"]["attributes"]["properties"];
                let gold = story
                    .entity_of(name)
                    .map(|x| story.gold.entities[x].attributes.clone())
                    .unwrap_or_default();
                let attributes: Map<String, Value> = fields
                    .as_object()
                    .into_iter()
                    .flatten()
                    .map(|(k, _)| (k.clone(), gold.get(k).cloned().unwrap_or(Value::Null)))
                    .collect();
                // A required field the gold graph does not know is not invented: the
                // entity's attributes are left unanswered.
                let required_known = props[label]["items"]["properties"]["attributes"]["required"]
                    .as_array()
                    .into_iter()
                    .flatten()
                    .filter_map(Value::as_str)
                    .all(|k| {
                        !attributes.get(k).is_none_or(Value::is_null)
                            || fields[k]["type"].as_array().is_some()
                    });
                if let Some(list) = out.get_mut(label).and_then(Value::as_array_mut)
                    && required_known
                {
                    list.push(json!({"id": i, "attributes": attributes}));
                }
            }
        }
    }
    Value::Object(out)
}

/// Whether the details prompt requests entity `i`'s summary.
fn text_requested_summary(text: &str, i: i64) -> bool {
    let head = format!("entity {i}: ");
    let Some(start) = text.find(&head) else {
        return false;
    };
    let block = &text[start..];
    let block = block.split("</ENTITY>").next().unwrap_or(block);
    block.lines().any(|l| l == "requested: summary")
}
