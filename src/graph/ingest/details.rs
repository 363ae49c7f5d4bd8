//! Step 7: entity details — summaries grow by the sentences of new facts; at most one
//! model call condenses the summaries that outgrew their budget and fills the ontology
//! attributes of typed entities that learned something.
//!
//! A fact joins a summary as a sentence: trimmed, its whitespace collapsed, ending in
//! `.` unless it ends in `.`, `!` or `?`, separated from the previous sentence by one
//! space. It is already in the summary when one of the summary's sentences (split
//! after `.`, `!` or `?` followed by whitespace) is the same fact text under
//! [`normalize_fact`] (case, whitespace and edge punctuation aside), as a restated
//! fact is — not when its text merely occurs inside another sentence ("Ada works at
//! Acme" is not in "Ada works at Acme Labs.").

use std::collections::{BTreeMap, BTreeSet};

use serde_json::{Value, json};

use super::IngestUsage;
use super::work::Work;
use crate::Result;
use crate::graph::dedup::normalize_fact;
use crate::graph::model::{EntityEdge, EntityNode};
use crate::graph::prompts::resolve as p;
use crate::llm::OutputSchema;

/// The schema name of the details call.
pub(crate) const ENTITY_DETAILS_SCHEMA: &str = "entity_details";

/// What one entity needs from the model.
struct Need {
    node: usize,
    summary: bool,
    labels: Vec<String>,
    facts: Vec<String>,
}

/// The output schema for a batch needing summaries and the attributes of `labels`.
pub(super) fn schema(work: &Work<'_>, labels: &BTreeSet<String>) -> OutputSchema {
    let mut properties = serde_json::Map::new();
    properties.insert(
        "summaries".into(),
        json!({
            "type": "array",
            "description": "One entry per entity whose summary was requested.",
            "items": {
                "type": "object",
                "properties": {
                    "id": {"type": "integer", "description": "The entity's number."},
                    "summary": {"type": "string", "description": "The new summary."},
                },
                "required": ["id", "summary"],
                "additionalProperties": false,
            },
        }),
    );
    for label in labels {
        if let Some(t) = work.ontology.entity_type(label) {
            properties.insert(
                label.clone(),
                json!({
                    "type": "array",
                    "description": format!("Attributes of the entities of type `{label}` whose attributes were requested."),
                    "items": {
                        "type": "object",
                        "properties": {
                            "id": {"type": "integer", "description": "The entity's number."},
                            "attributes": t.attributes_schema(),
                        },
                        "required": ["id", "attributes"],
                        "additionalProperties": false,
                    },
                }),
            );
        }
    }
    let required: Vec<String> = properties.keys().cloned().collect();
    OutputSchema::new(
        ENTITY_DETAILS_SCHEMA,
        json!({
            "type": "object",
            "properties": properties,
            "required": required,
            "additionalProperties": false,
        }),
    )
}

pub(super) async fn fill(
    work: &Work<'_>,
    nodes: &mut [EntityNode],
    is_new: &[bool],
    new_facts: &[EntityEdge],
    usage: &mut IngestUsage,
) -> Result<()> {
    let budget = work.opts.summary_budget;
    let mut needs = Vec::new();
    for (i, node) in nodes.iter_mut().enumerate() {
        let facts: Vec<String> = new_facts
            .iter()
            .filter(|f| f.source_uuid == node.uuid || f.target_uuid == node.uuid)
            .map(|f| f.fact.clone())
            .collect();
        for fact in &facts {
            append_sentence(&mut node.summary, fact);
        }
        let summary = node.summary.chars().count() > budget;
        let labels: Vec<String> = node
            .labels
            .iter()
            .filter(|l| {
                work.ontology
                    .entity_type(l)
                    .is_some_and(|t| !t.fields().is_empty())
            })
            .filter(|_| is_new[i] || !facts.is_empty())
            .cloned()
            .collect();
        if summary || !labels.is_empty() {
            needs.push(Need {
                node: i,
                summary,
                labels,
                facts,
            });
        }
    }
    if needs.is_empty() {
        return Ok(());
    }
    let labels: BTreeSet<String> = needs.iter().flat_map(|n| n.labels.clone()).collect();
    let mut user = format!(
        "Summaries may have at most {budget} characters. For every entity, do what is \
         requested.\n\n"
    );
    for need in &needs {
        let node = &nodes[need.node];
        let mut asks = Vec::new();
        if need.summary {
            asks.push("requested: summary".to_owned());
        }
        for l in &need.labels {
            asks.push(format!("requested: attributes of `{l}`"));
        }
        asks.push(format!("current summary: {}", node.summary));
        for f in &need.facts {
            asks.push(format!("new fact: {f}"));
        }
        p::item(
            &mut user,
            "ENTITY",
            &format!(
                "entity {}: {} ({})",
                need.node,
                node.name,
                node.labels.join(", ")
            ),
            &asks,
        );
    }
    let answer: serde_json::Map<String, Value> = work
        .ask(
            schema(work, &labels),
            p::DETAILS_SYSTEM,
            user,
            "entity_details",
            usage,
        )
        .await?;
    let asked = |id: &Value, pred: &dyn Fn(&Need) -> bool| -> Option<usize> {
        let id = usize::try_from(id.as_i64()?).ok()?;
        needs
            .iter()
            .find(|n| n.node == id && pred(n))
            .map(|n| n.node)
    };
    let mut updates: BTreeMap<usize, Vec<(String, Value)>> = BTreeMap::new();
    for entry in answer
        .get("summaries")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
    {
        if let (Some(i), Some(text)) = (
            asked(&entry["id"], &|n| n.summary),
            entry["summary"].as_str(),
        ) {
            nodes[i].summary = text.chars().take(budget).collect();
        }
    }
    for label in &labels {
        for entry in answer
            .get(label)
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
        {
            let Some(i) = asked(&entry["id"], &|n| n.labels.contains(label)) else {
                continue;
            };
            let attributes = &entry["attributes"];
            match work.ontology.check_entity_attributes(label, attributes) {
                Ok(()) => {
                    let set = attributes
                        .as_object()
                        .into_iter()
                        .flatten()
                        .filter(|(_, v)| !v.is_null())
                        .map(|(k, v)| (k.clone(), v.clone()));
                    updates.entry(i).or_default().extend(set);
                }
                Err(e) => tracing::warn!(entity = %nodes[i].name, error = %e, "attributes dropped"),
            }
        }
    }
    for (i, set) in updates {
        nodes[i].attributes.extend(set);
    }
    Ok(())
}

/// `text` as a sentence: trimmed, whitespace collapsed, closed by `.` unless it ends in
/// `.`, `!` or `?`. Empty for blank text.
fn as_sentence(text: &str) -> String {
    let mut s = text.split_whitespace().collect::<Vec<_>>().join(" ");
    if !s.is_empty() && !s.ends_with(['.', '!', '?']) {
        s.push('.');
    }
    s
}

/// The sentences of `summary`: split after `.`, `!` or `?` followed by whitespace.
fn sentences(summary: &str) -> Vec<&str> {
    let mut out = Vec::new();
    let mut start = 0;
    let mut chars = summary.char_indices().peekable();
    while let Some((i, c)) = chars.next() {
        if matches!(c, '.' | '!' | '?')
            && chars.peek().is_some_and(|(_, next)| next.is_whitespace())
        {
            out.push(summary[start..=i].trim());
            start = i + 1;
        }
    }
    let rest = summary[start..].trim();
    if !rest.is_empty() {
        out.push(rest);
    }
    out
}

/// Appends `fact` to `summary` as a sentence unless the summary has that sentence.
fn append_sentence(summary: &mut String, fact: &str) {
    let sentence = as_sentence(fact);
    if sentence.is_empty() {
        return;
    }
    let key = normalize_fact(&sentence);
    if sentences(summary).iter().any(|s| normalize_fact(s) == key) {
        return;
    }
    if !summary.trim().is_empty() {
        let trimmed = summary.trim_end().len();
        summary.truncate(trimmed);
        if !summary.ends_with(['.', '!', '?']) {
            summary.push('.');
        }
        summary.push(' ');
    } else {
        summary.clear();
    }
    summary.push_str(&sentence);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn facts_join_a_summary_as_sentences() {
        let mut s = String::new();
        append_sentence(&mut s, "Dmitri Okafor lives in Toronto");
        append_sentence(&mut s, "  Owen Silva   lives in Toronto ");
        append_sentence(&mut s, "Is Owen happy?");
        assert_eq!(
            s,
            "Dmitri Okafor lives in Toronto. Owen Silva lives in Toronto. Is Owen happy?"
        );
        // A summary a model wrote without a final stop is closed before the next one.
        let mut s = "Ada is an engineer".to_string();
        append_sentence(&mut s, "Ada works at Acme.");
        assert_eq!(s, "Ada is an engineer. Ada works at Acme.");
    }

    #[test]
    fn a_sentence_already_in_the_summary_is_not_added_but_a_longer_one_is_not_a_match() {
        let mut s = "Ada works at Acme Labs. She lives in Porto.".to_string();
        append_sentence(&mut s, "ada works at  acme labs");
        append_sentence(&mut s, "She lives in Porto!");
        assert_eq!(s, "Ada works at Acme Labs. She lives in Porto.");
        // A bare substring test would have skipped this one.
        append_sentence(&mut s, "Ada works at Acme");
        assert_eq!(
            s,
            "Ada works at Acme Labs. She lives in Porto. Ada works at Acme."
        );
        append_sentence(&mut s, "   ");
        assert_eq!(
            s,
            "Ada works at Acme Labs. She lives in Porto. Ada works at Acme."
        );
    }

    #[test]
    fn sentences_split_after_closing_punctuation_and_whitespace() {
        assert_eq!(
            sentences("One. Two! Three? v1.2 is out"),
            vec!["One.", "Two!", "Three?", "v1.2 is out"]
        );
        assert!(sentences("  ").is_empty());
    }
}
