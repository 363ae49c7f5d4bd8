//! A deterministic "world" for engine tests: a scripted model that answers each call
//! of the pipeline from rules the test states, and an embedder that counts requests.

use std::sync::{Arc, Mutex};

use async_trait::async_trait;
use gralkor::Result;
use gralkor::falkordb::FalkorDb;
use gralkor::graph::{Engine, EngineOptions};
use gralkor::llm::doubles::{HashEmbedder, ScriptedModel};
use gralkor::llm::{Embedder, GenerateRequest};
use serde_json::{Value, json};

pub const DIM: usize = 32;

/// An embedder that counts its requests.
#[derive(Debug, Clone)]
pub struct CountingEmbedder {
    pub inner: HashEmbedder,
    pub requests: Arc<Mutex<usize>>,
}

impl CountingEmbedder {
    pub fn new() -> Self {
        CountingEmbedder {
            inner: HashEmbedder::new(DIM),
            requests: Arc::default(),
        }
    }

    pub fn requests(&self) -> usize {
        *self.requests.lock().unwrap()
    }
}

#[async_trait]
impl Embedder for CountingEmbedder {
    fn dimension(&self) -> usize {
        DIM
    }
    async fn embed(&self, texts: &[String], label: &str) -> Result<Vec<Vec<f32>>> {
        *self.requests.lock().unwrap() += 1;
        self.inner.embed(texts, label).await
    }
    fn provider(&self) -> &str {
        "counting"
    }
    fn model(&self) -> &str {
        "hash"
    }
}

type Rule = Arc<dyn Fn(&str, &str) -> bool + Send + Sync>;

/// An extraction answer computed from an episode's text.
pub type Extractor = Arc<dyn Fn(&str) -> Value + Send + Sync>;

/// The rules the scripted model answers by.
#[derive(Clone, Default)]
pub struct Rules {
    /// (needle, extraction answer): the first whose needle the episode text contains.
    pub extractions: Arc<Mutex<Vec<(String, Value)>>>,
    /// (new name, existing name) → same entity?
    pub same_entity: Option<Rule>,
    /// (new fact, existing fact) → duplicate?
    pub duplicate: Option<Rule>,
    /// (new fact, existing fact) → contradiction?
    pub contradicts: Option<Rule>,
    /// Per entity type label: the attributes to answer.
    pub attributes: Arc<Mutex<Vec<(String, Value)>>>,
    /// The extraction of an episode no needle matches (default: nothing).
    pub fallback: Option<Extractor>,
}

impl std::fmt::Debug for Rules {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Rules")
    }
}

impl Rules {
    /// Every episode: a narrator, a subject, and one fact whose text is the episode's.
    pub fn narrator() -> Rules {
        Rules {
            fallback: Some(Arc::new(|episode: &str| {
                json!({
                    "entities": [{"name": "Narrator", "type_id": 0}, {"name": "Subject", "type_id": 0}],
                    "facts": [{"source": "Narrator", "target": "Subject", "relation_type": "RELATES_TO",
                               "fact": episode, "valid_at": null, "invalid_at": null}],
                })
            })),
            ..Rules::default()
        }
    }

    pub fn extraction(&self, needle: &str, answer: Value) {
        self.extractions
            .lock()
            .unwrap()
            .push((needle.to_owned(), answer));
    }
}

/// The text after `prefix` up to ` (` or ` [`: a name or a fact in a prompt line.
fn after<'a>(line: &'a str, prefix: &str) -> Option<(usize, &'a str)> {
    let rest = line.strip_prefix(prefix)?;
    let digits = rest
        .find(|c: char| !c.is_ascii_digit())
        .unwrap_or(rest.len());
    let num: usize = rest[..digits].parse().ok()?;
    let text = rest.split_once(": ")?.1;
    let end = text
        .find(" [valid_at")
        .or_else(|| text.find(" ("))
        .unwrap_or(text.len());
    Some((num, &text[..end]))
}

fn user(req: &GenerateRequest) -> String {
    req.messages
        .iter()
        .map(|m| m.content.clone())
        .collect::<Vec<_>>()
        .join("\n")
}

/// A known fact of a combined extraction prompt: number, text, source, target.
fn known_line(line: &str) -> Option<(usize, String, String, String)> {
    let (k, fact) = after(line, "known ")?;
    let ends = line.rsplit_once(" (")?.1.strip_suffix(')')?;
    let (source, rest) = ends.split_once(" —")?;
    let target = rest.split_once("→ ")?.1;
    Some((k, fact.to_owned(), source.to_owned(), target.to_owned()))
}

/// Adds to every fact of a combined extraction answer what the rules say about the
/// known facts the prompt shows: the one it restates (same entities, by name or by the
/// same-entity rule, and a duplicate) and those it contradicts — as the resolution
/// call would answer for the same pairs.
fn judge_known(rules: &Rules, text: &str, answer: &mut Value) {
    let known: Vec<_> = text.lines().filter_map(known_line).collect();
    let same = |a: &str, b: &str| {
        a.eq_ignore_ascii_case(b) || rules.same_entity.as_ref().is_some_and(|r| r(a, b))
    };
    for fact in answer["facts"].as_array_mut().into_iter().flatten() {
        let new = fact["fact"].as_str().unwrap_or_default().to_owned();
        let (s, t) = (
            fact["source"].as_str().unwrap_or_default().to_owned(),
            fact["target"].as_str().unwrap_or_default().to_owned(),
        );
        let mut restates = -1i64;
        let mut contradicts = Vec::new();
        for (k, existing, ks, kt) in &known {
            let same_entities = (same(&s, ks) && same(&t, kt)) || (same(&s, kt) && same(&t, ks));
            if same_entities
                && restates == -1
                && rules.duplicate.as_ref().is_some_and(|r| r(&new, existing))
            {
                restates = *k as i64;
            } else if rules
                .contradicts
                .as_ref()
                .is_some_and(|r| r(&new, existing))
            {
                contradicts.push(*k);
            }
        }
        fact["restates"] = json!(restates);
        fact["contradicts"] = json!(contradicts);
    }
}

/// The answer of the rules to one request.
pub fn answer(rules: &Rules, req: &GenerateRequest) -> Result<Value> {
    let text = user(req);
    match req.schema.name.as_str() {
        "extraction" => {
            let episode = text
                .split("<CURRENT_EPISODE>")
                .nth(1)
                .and_then(|t| t.split("</CURRENT_EPISODE>").next())
                .unwrap_or(&text)
                .to_owned();
            let found = rules
                .extractions
                .lock()
                .unwrap()
                .iter()
                .find(|(needle, _)| episode.contains(needle.as_str()))
                .map(|(_, v)| v.clone());
            let mut answer = found.unwrap_or_else(|| match &rules.fallback {
                Some(f) => f(episode.trim()),
                None => json!({"entities": [], "facts": []}),
            });
            if text.contains("<KNOWN_FACTS>") {
                judge_known(rules, &text, &mut answer);
            }
            Ok(answer)
        }
        "entity_resolution" => {
            let mut out = Vec::new();
            let mut current: Option<(usize, String)> = None;
            let mut chosen = false;
            for line in text.lines() {
                if let Some((i, name)) = after(line, "item ") {
                    current = Some((i, name.to_owned()));
                    chosen = false;
                    out.push(json!({"id": i, "duplicate_of": -1}));
                } else if let (Some((i, name)), Some((k, existing))) =
                    (&current, after(line, "candidate "))
                {
                    let same = rules
                        .same_entity
                        .as_ref()
                        .is_some_and(|r| r(name, existing));
                    if same && !chosen {
                        chosen = true;
                        *out.last_mut().unwrap() = json!({"id": i, "duplicate_of": k});
                    }
                }
            }
            Ok(json!({"resolutions": out}))
        }
        "fact_resolution" => {
            let mut out: Vec<Value> = Vec::new();
            let mut current: Option<String> = None;
            for line in text.lines() {
                if let Some((i, fact)) = after(line, "new fact ") {
                    current = Some(fact.to_owned());
                    out.push(json!({"id": i, "duplicate_of": -1, "contradicts": []}));
                } else if let (Some(fact), Some((k, existing))) =
                    (&current, after(line, "existing "))
                {
                    let last = out.last_mut().unwrap();
                    let same_entities = line.contains("(same entities)");
                    if same_entities
                        && last["duplicate_of"] == -1
                        && rules.duplicate.as_ref().is_some_and(|r| r(fact, existing))
                    {
                        last["duplicate_of"] = json!(k);
                    } else if rules
                        .contradicts
                        .as_ref()
                        .is_some_and(|r| r(fact, existing))
                    {
                        last["contradicts"].as_array_mut().unwrap().push(json!(k));
                    }
                }
            }
            Ok(json!({"facts": out}))
        }
        "entity_details" => {
            let mut out = serde_json::Map::new();
            let props = req.schema.schema["properties"].as_object().unwrap();
            let mut summaries = Vec::new();
            let mut typed: std::collections::BTreeMap<String, Vec<Value>> = Default::default();
            let mut current: Option<usize> = None;
            for line in text.lines() {
                if let Some((i, _)) = after(line, "entity ") {
                    current = Some(i);
                } else if let Some(i) = current {
                    if line == "requested: summary" {
                        summaries
                            .push(json!({"id": i, "summary": format!("condensed summary {i}")}));
                    } else if let Some(label) = line
                        .strip_prefix("requested: attributes of `")
                        .and_then(|l| l.strip_suffix('`'))
                    {
                        let attrs = rules
                            .attributes
                            .lock()
                            .unwrap()
                            .iter()
                            .find(|(l, _)| l == label)
                            .map(|(_, v)| v.clone())
                            .unwrap_or(json!({}));
                        typed
                            .entry(label.to_owned())
                            .or_default()
                            .push(json!({"id": i, "attributes": attrs}));
                    }
                }
            }
            for key in props.keys() {
                let v = if key == "summaries" {
                    Value::Array(summaries.clone())
                } else {
                    Value::Array(typed.remove(key).unwrap_or_default())
                };
                out.insert(key.clone(), v);
            }
            Ok(Value::Object(out))
        }
        // Communities left unnamed by the model are named from their members.
        "community_summaries" => Ok(json!({"communities": []})),
        other => panic!("unexpected schema {other}"),
    }
}

/// A scripted model answering by `rules`, an embedder that counts, and an engine on a
/// database handle.
pub struct World {
    pub rules: Rules,
    pub model: ScriptedModel,
    pub embedder: CountingEmbedder,
    pub engine: Engine,
}

impl World {
    pub fn new(db: &FalkorDb, rules: Rules) -> World {
        World::with_options(db, rules, EngineOptions::default())
    }

    pub fn with_options(db: &FalkorDb, rules: Rules, options: EngineOptions) -> World {
        let r = rules.clone();
        let model = ScriptedModel::new().respond_with(move |req| answer(&r, req));
        let embedder = CountingEmbedder::new();
        let engine = Engine::new(
            db.clone(),
            Arc::new(model.clone()),
            Arc::new(embedder.clone()),
        )
        .with_options(options);
        World {
            rules,
            model,
            embedder,
            engine,
        }
    }
}

/// `(source, relation, target, fact, valid_at, invalid_at)` of a scripted fact.
pub type Fact<'a> = (
    &'a str,
    &'a str,
    &'a str,
    &'a str,
    Option<&'a str>,
    Option<&'a str>,
);

/// An extraction answer: entities `(name, type_id)` and facts
/// `(source, relation, target, fact, valid_at, invalid_at)`.
pub fn extraction(entities: &[(&str, i64)], facts: &[Fact<'_>]) -> Value {
    json!({
        "entities": entities.iter().map(|(n, t)| json!({"name": n, "type_id": t})).collect::<Vec<_>>(),
        "facts": facts.iter().map(|(s, r, t, f, v, i)| json!({
            "source": s, "target": t, "relation_type": r, "fact": f,
            "valid_at": v, "invalid_at": i,
        })).collect::<Vec<_>>(),
    })
}
