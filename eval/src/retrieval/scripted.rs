//! A scripted model for the extraction path of the retrieval benchmark, offline: it
//! answers the engine's extraction call of a transcript episode with one fact per
//! line (`Name: text` → the speaker, a fact linking them to the conversation's
//! log whose text is the line, true from the episode's reference time), and every
//! resolution call with "nothing matches",
//! so recall answers from extracted facts whose sources are the sessions.
//!
//! It is no model of quality — it extracts everything and understands nothing — but
//! it runs the whole extraction path (facts, their source episodes, the fact
//! search) on the shipped set in `cargo test`, where no provider is reachable.

use gralkor::llm::GenerateRequest;
use gralkor::llm::doubles::ScriptedModel;
use serde_json::{Map, Value, json};

/// The entity every line's fact points at.
pub const LOG_ENTITY: &str = "Conversation log";

/// The line-per-fact scripted model (see the [module](self) documentation).
pub fn line_extractor() -> ScriptedModel {
    ScriptedModel::new().respond_with(|req| Ok(answer(req)))
}

fn answer(req: &GenerateRequest) -> Value {
    let text: String = req
        .messages
        .iter()
        .map(|m| m.content.as_str())
        .collect::<Vec<_>>()
        .join("\n");
    match req.schema.name.as_str() {
        "extraction" => {
            let episode = text
                .split("<CURRENT_EPISODE>")
                .nth(1)
                .and_then(|t| t.split("</CURRENT_EPISODE>").next())
                .unwrap_or("");
            // As the prompt asks: a fact with no stated start begins at the reference time.
            let reference = text
                .split("<REFERENCE_TIME>")
                .nth(1)
                .and_then(|t| t.split("</REFERENCE_TIME>").next())
                .map(str::trim);
            let mut entities = vec![json!({"name": LOG_ENTITY, "type_id": 0})];
            let mut facts = Vec::new();
            for line in episode.lines().map(str::trim).filter(|l| !l.is_empty()) {
                let Some((speaker, said)) = line.split_once(": ") else {
                    continue;
                };
                if !entities.iter().any(|e| e["name"] == speaker) {
                    entities.push(json!({"name": speaker, "type_id": 0}));
                }
                let mut fact = json!({
                    "source": speaker, "target": LOG_ENTITY, "relation_type": "SAID",
                    "fact": format!("{speaker} said: {said}"), "valid_at": reference, "invalid_at": null,
                });
                if text.contains("<KNOWN_FACTS>") {
                    // Every line is new: it restates and contradicts nothing.
                    fact["restates"] = json!(-1);
                    fact["contradicts"] = json!([]);
                }
                facts.push(fact);
            }
            json!({"entities": entities, "facts": facts})
        }
        "entity_resolution" => {
            let items: Vec<Value> = numbers(&text, "item ")
                .map(|i| json!({"id": i, "duplicate_of": -1}))
                .collect();
            json!({"resolutions": items})
        }
        "fact_resolution" => {
            let items: Vec<Value> = numbers(&text, "new fact ")
                .map(|i| json!({"id": i, "duplicate_of": -1, "contradicts": []}))
                .collect();
            json!({"facts": items})
        }
        "entity_details" => {
            // Summaries are left as the engine grew them (cut to its budget);
            // attributes are never requested (no typed entities).
            let mut out = Map::new();
            if let Some(props) = req.schema.schema["properties"].as_object() {
                for k in props.keys() {
                    out.insert(k.clone(), json!([]));
                }
            }
            Value::Object(out)
        }
        _ => json!({}),
    }
}

fn numbers<'a>(text: &'a str, prefix: &'a str) -> impl Iterator<Item = i64> + 'a {
    text.lines().filter_map(move |l| {
        let rest = l.strip_prefix(prefix)?;
        let end = rest.find(|c: char| !c.is_ascii_digit())?;
        rest[..end].parse().ok()
    })
}
