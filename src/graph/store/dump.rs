//! Dump and restore: every graph of a FalkorDB server — each Destination's episodes,
//! entities, facts, communities, Reflection artefacts and owned content, the capture
//! buffer's graph and the embedded authorizer's relationships — as JSON Lines, and
//! back (`Engine::dump`, `Engine::restore`, in `graph/dump.rs`: the statements are
//! here, in the store, and the engine's methods call them).
//!
//! The dump is generic: it holds every node (its labels and properties) and every
//! relationship (its type, endpoints and properties) of every graph, and each graph's
//! indices, so nothing the engine, the capture buffer or the authorizer keeps is left
//! out, whatever property a later version adds. Embeddings travel as
//! `{"vecf32": [...]}`; every other value as the JSON value it is (integers stay
//! integers, doubles are written with a fraction or an exponent).
//!
//! The order is deterministic — graphs by id, indices by what they cover, nodes by
//! their labels and properties, relationships by their endpoints' positions, type and
//! properties — so two dumps of the same content are the same bytes, and a dump
//! restored and dumped again is byte-identical. The format is documented in
//! `docs/dump-format.md`.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::io::{BufRead, Write};

use serde::{Deserialize, Serialize};
use serde_json::Value as Json;

use crate::falkordb::{
    FalkorDb, HnswOptions, IndexEntity, IndexInfo, IndexKind, IndexSpec, Params, Similarity, Value,
    is_identifier,
};
use crate::{Error, Result};

/// The name in a dump's header line.
pub(crate) const DUMP_FORMAT: &str = "gralkor-dump";
/// The version of the dump format this gralkor writes and reads.
pub(crate) const DUMP_VERSION: u64 = 1;
/// Nodes (or relationships) read per query, and written per statement.
const PAGE: i64 = 1_000;
const BATCH: usize = 500;

/// What a dump held, or what a restore wrote.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
#[non_exhaustive]
pub struct DumpSummary {
    /// Graphs.
    pub graphs: u64,
    /// Index entries (one per indexed property and kind).
    pub indices: u64,
    /// Nodes.
    pub nodes: u64,
    /// Relationships.
    pub relationships: u64,
}

/// One line of a dump.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "record", rename_all = "snake_case", deny_unknown_fields)]
pub(crate) enum Line {
    /// The first line.
    Header { format: String, version: u64 },
    /// A graph begins; the records up to the next `graph` line are its own.
    Graph { graph: String },
    /// One index entry.
    Index(IndexLine),
    /// A node; `n` is its position among the graph's nodes (0, 1, …).
    Node {
        n: u64,
        labels: Vec<String>,
        properties: BTreeMap<String, Json>,
    },
    /// A relationship between the graph's nodes `from` and `to` (their `n`).
    Relationship {
        from: u64,
        to: u64,
        #[serde(rename = "type")]
        rel_type: String,
        properties: BTreeMap<String, Json>,
    },
    /// The last line: what the dump holds (a truncated dump has none).
    End(DumpSummary),
}

// `DumpSummary` is read back from the end line too.
impl<'de> Deserialize<'de> for DumpSummary {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> std::result::Result<Self, D::Error> {
        #[derive(Deserialize)]
        #[serde(deny_unknown_fields)]
        struct S {
            graphs: u64,
            indices: u64,
            nodes: u64,
            relationships: u64,
        }
        let s = S::deserialize(d)?;
        Ok(DumpSummary {
            graphs: s.graphs,
            indices: s.indices,
            nodes: s.nodes,
            relationships: s.relationships,
        })
    }
}

/// One index entry: what it covers and its kind.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct IndexLine {
    /// `node` or `relationship`.
    on: String,
    /// The label or relationship type.
    label: String,
    property: String,
    /// `range`, `fulltext` or `vector`.
    kind: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    language: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    stopwords: Option<Vec<String>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    dimension: Option<u32>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    similarity: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    m: Option<u32>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    ef_construction: Option<u32>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    ef_runtime: Option<u32>,
}

impl IndexLine {
    fn from_info(info: &IndexInfo) -> IndexLine {
        let (on, label) = match &info.entity {
            IndexEntity::Node(l) => ("node", l.clone()),
            IndexEntity::Relationship(t) => ("relationship", t.clone()),
        };
        let mut line = IndexLine {
            on: on.into(),
            label,
            property: info.property.clone(),
            kind: String::new(),
            language: None,
            stopwords: None,
            dimension: None,
            similarity: None,
            m: None,
            ef_construction: None,
            ef_runtime: None,
        };
        match &info.kind {
            IndexKind::Range => line.kind = "range".into(),
            IndexKind::Fulltext {
                stopwords,
                language,
            } => {
                line.kind = "fulltext".into();
                line.language = language.clone();
                line.stopwords = Some(stopwords.clone());
            }
            IndexKind::Vector {
                dimension,
                similarity,
            } => {
                line.kind = "vector".into();
                line.dimension = Some(*dimension);
                line.similarity = Some(
                    match similarity {
                        Similarity::Cosine => "cosine",
                        Similarity::Euclidean => "euclidean",
                    }
                    .into(),
                );
                line.m = info.hnsw.m;
                line.ef_construction = info.hnsw.ef_construction;
                line.ef_runtime = info.hnsw.ef_runtime;
            }
        }
        line
    }

    /// The index to create; `at` names the line in an error.
    fn spec(&self, at: &str) -> Result<IndexSpec> {
        let bad = |what: &str, rule: String| Error::invalid(format!("{at}.{what}"), rule);
        for (what, name) in [("label", &self.label), ("property", &self.property)] {
            if !is_identifier(name) {
                return Err(bad(what, format!("must be an identifier (got `{name}`)")));
            }
        }
        let spec = match (self.on.as_str(), self.kind.as_str()) {
            (on @ ("node" | "relationship"), "range") => {
                if on == "node" {
                    IndexSpec::range_nodes(&self.label, [&self.property])
                } else {
                    IndexSpec::range_relationships(&self.label, [&self.property])
                }
            }
            (on @ ("node" | "relationship"), "fulltext") => {
                let stopwords = self.stopwords.clone().unwrap_or_default();
                let words: Vec<&str> = stopwords.iter().map(String::as_str).collect();
                let mut spec = if on == "node" {
                    IndexSpec::fulltext_nodes(&self.label, [&self.property], &words)
                } else {
                    IndexSpec::fulltext_relationships(&self.label, [&self.property], &words)
                };
                if let IndexKind::Fulltext { language, .. } = &mut spec.kind {
                    language.clone_from(&self.language);
                }
                spec
            }
            (on @ ("node" | "relationship"), "vector") => {
                let dimension = self
                    .dimension
                    .ok_or_else(|| bad("dimension", "a vector index needs one".into()))?;
                let similarity = match self.similarity.as_deref() {
                    Some("cosine") | None => Similarity::Cosine,
                    Some("euclidean") => Similarity::Euclidean,
                    Some(other) => {
                        return Err(bad(
                            "similarity",
                            format!("must be `cosine` or `euclidean` (got `{other}`)"),
                        ));
                    }
                };
                let spec = if on == "node" {
                    IndexSpec::vector_nodes(&self.label, &self.property, dimension, similarity)
                } else {
                    IndexSpec::vector_relationships(
                        &self.label,
                        &self.property,
                        dimension,
                        similarity,
                    )
                };
                spec.with_hnsw(HnswOptions {
                    m: self.m,
                    ef_construction: self.ef_construction,
                    ef_runtime: self.ef_runtime,
                })
            }
            ("node" | "relationship", other) => {
                return Err(bad(
                    "kind",
                    format!("must be `range`, `fulltext` or `vector` (got `{other}`)"),
                ));
            }
            (other, _) => {
                return Err(bad(
                    "on",
                    format!("must be `node` or `relationship` (got `{other}`)"),
                ));
            }
        };
        Ok(spec)
    }
}

/// A property value as a dump writes it; `at` names it in an error.
fn to_json(value: &Value, at: &dyn Fn() -> String) -> Result<Json> {
    Ok(match value {
        Value::Bool(b) => Json::Bool(*b),
        Value::Int(i) => Json::from(*i),
        Value::Float(f) => serde_json::Number::from_f64(*f)
            .map(Json::Number)
            .ok_or_else(|| Error::invalid(at(), "must be a finite number"))?,
        Value::String(s) => Json::String(s.clone()),
        Value::List(items) => Json::Array(
            items
                .iter()
                .map(|v| to_json(v, at))
                .collect::<Result<Vec<_>>>()?,
        ),
        Value::Vector(v) => {
            let items: Vec<Json> = v
                .iter()
                .map(|x| {
                    serde_json::Number::from_f64(f64::from(*x))
                        .map(|_| serde_json::to_value(x).expect("a finite f32 is JSON"))
                        .ok_or_else(|| Error::invalid(at(), "must hold finite numbers"))
                })
                .collect::<Result<_>>()?;
            Json::Object(
                [("vecf32".to_owned(), Json::Array(items))]
                    .into_iter()
                    .collect(),
            )
        }
        other => {
            return Err(Error::invalid(
                at(),
                format!("holds a value a dump cannot keep ({other:?})"),
            ));
        }
    })
}

/// A property value read from a dump; `at` names it in an error.
fn from_json(value: &Json, at: &dyn Fn() -> String) -> Result<Value> {
    Ok(match value {
        Json::Bool(b) => Value::Bool(*b),
        Json::Number(n) => match (n.as_i64(), n.as_f64()) {
            (Some(i), _) => Value::Int(i),
            (None, Some(f)) if !n.is_u64() => Value::Float(f),
            _ => {
                return Err(Error::invalid(
                    at(),
                    "must be a 64-bit signed integer or a floating-point number",
                ));
            }
        },
        Json::String(s) => Value::String(s.clone()),
        Json::Array(items) => Value::List(
            items
                .iter()
                .map(|v| from_json(v, at))
                .collect::<Result<Vec<_>>>()?,
        ),
        Json::Object(map) => match map.get("vecf32") {
            Some(v) if map.len() == 1 => Value::Vector(
                serde_json::from_value::<Vec<f32>>(v.clone())
                    .map_err(|_| Error::invalid(at(), "`vecf32` must be a list of numbers"))?,
            ),
            _ => {
                return Err(Error::invalid(
                    at(),
                    "must be a value, a list or `{\"vecf32\": [...]}`",
                ));
            }
        },
        Json::Null => return Err(Error::invalid(at(), "must not be null")),
    })
}

/// One graph as read back: its nodes (internal id, labels, properties) and
/// relationships (source and target internal ids, type, properties).
pub(crate) struct RawGraph {
    indices: Vec<IndexLine>,
    nodes: Vec<(i64, Vec<String>, BTreeMap<String, Json>)>,
    relationships: Vec<(i64, i64, String, BTreeMap<String, Json>)>,
}

fn properties_json(
    properties: &BTreeMap<String, Value>,
    at: &dyn Fn() -> String,
) -> Result<BTreeMap<String, Json>> {
    properties
        .iter()
        .map(|(k, v)| Ok((k.clone(), to_json(v, &|| format!("{}.{k}", at()))?)))
        .collect()
}

/// Every record `query` returns in its one column, page by page: `query` takes `$after`
/// (the last id read) and `$page`, and orders by id; `take` reads a record (`None`: not
/// the `what` asked for), `id` its id.
async fn all_pages<T>(
    db: &FalkorDb,
    graph: &str,
    query: &str,
    what: &str,
    take: impl Fn(Value) -> Option<T>,
    id: impl Fn(&T) -> i64,
) -> Result<Vec<T>> {
    let mut out = Vec::new();
    let mut after = -1i64;
    loop {
        let page = db
            .ro_query(
                graph,
                query,
                &Params::new().set("after", after).set("page", PAGE),
            )
            .await?;
        let len = page.rows.len();
        for row in page.rows {
            let Some(record) = row.into_iter().next().and_then(&take) else {
                return Err(Error::Protocol(format!(
                    "a {what} query returned no {what}"
                )));
            };
            after = id(&record);
            out.push(record);
        }
        if len < PAGE as usize {
            break;
        }
    }
    Ok(out)
}

/// Every node, relationship and index of `graph`, page by page.
pub(crate) async fn read_graph(db: &FalkorDb, graph: &str) -> Result<RawGraph> {
    let mut indices: Vec<IndexLine> = db
        .list_indices(graph)
        .await?
        .iter()
        .map(IndexLine::from_info)
        .collect();
    indices.sort();
    indices.dedup();
    let mut nodes = Vec::new();
    let all_nodes = all_pages(
        db,
        graph,
        "MATCH (n) WHERE id(n) > $after RETURN n ORDER BY id(n) LIMIT $page",
        "node",
        |v| match v {
            Value::Node(node) => Some(node),
            _ => None,
        },
        |node| node.id,
    )
    .await?;
    for node in all_nodes {
        let mut labels = node.labels;
        labels.sort();
        let at = || format!("graph `{graph}` node {}", node.id);
        nodes.push((node.id, labels, properties_json(&node.properties, &at)?));
    }
    let mut relationships = Vec::new();
    let all_edges = all_pages(
        db,
        graph,
        "MATCH ()-[r]->() WHERE id(r) > $after RETURN r ORDER BY id(r) LIMIT $page",
        "relationship",
        |v| match v {
            Value::Edge(edge) => Some(edge),
            _ => None,
        },
        |edge| edge.id,
    )
    .await?;
    for edge in all_edges {
        let at = || format!("graph `{graph}` relationship {}", edge.id);
        let props = properties_json(&edge.properties, &at)?;
        relationships.push((edge.src, edge.dst, edge.rel_type, props));
    }
    Ok(RawGraph {
        indices,
        nodes,
        relationships,
    })
}

/// The graph's lines in the dump's order: indices, nodes, relationships.
pub(crate) fn graph_lines(raw: RawGraph) -> Vec<Line> {
    let mut nodes = raw.nodes;
    let key = |labels: &Vec<String>, props: &BTreeMap<String, Json>| {
        (
            labels.clone(),
            serde_json::to_string(props).expect("JSON values serialise"),
        )
    };
    nodes.sort_by_cached_key(|(_, labels, props)| key(labels, props));
    let position: HashMap<i64, u64> = nodes
        .iter()
        .enumerate()
        .map(|(i, (id, _, _))| (*id, i as u64))
        .collect();
    let mut rels: Vec<(u64, u64, String, BTreeMap<String, Json>)> = raw
        .relationships
        .into_iter()
        .map(|(s, d, t, p)| (position[&s], position[&d], t, p))
        .collect();
    rels.sort_by_cached_key(|(s, d, t, p)| {
        (
            *s,
            *d,
            t.clone(),
            serde_json::to_string(p).expect("JSON values serialise"),
        )
    });
    let mut out: Vec<Line> = raw.indices.into_iter().map(Line::Index).collect();
    out.extend(
        nodes
            .into_iter()
            .enumerate()
            .map(|(n, (_, labels, properties))| Line::Node {
                n: n as u64,
                labels,
                properties,
            }),
    );
    out.extend(
        rels.into_iter()
            .map(|(from, to, rel_type, properties)| Line::Relationship {
                from,
                to,
                rel_type,
                properties,
            }),
    );
    out
}

pub(crate) fn write_line(out: &mut (dyn Write + Send), line: &Line) -> Result<()> {
    let io = |source| Error::Io {
        context: "writing the dump".into(),
        source,
    };
    serde_json::to_writer(&mut *out, line).map_err(|e| io(e.into()))?;
    out.write_all(b"\n").map_err(io)
}

/// A property map as written.
type Properties = BTreeMap<String, Value>;

/// One graph of a dump as read: its index specs, nodes and relationships, each with
/// the line it came from.
#[derive(Default)]
pub(crate) struct DumpGraph {
    pub(crate) id: String,
    pub(crate) line: usize,
    pub(crate) indices: Vec<(usize, IndexSpec)>,
    pub(crate) nodes: Vec<(usize, Vec<String>, Properties)>,
    pub(crate) relationships: Vec<(usize, u64, u64, String, Properties)>,
}

pub(crate) fn line_error(line: usize, rule: impl Into<String>) -> Error {
    Error::invalid(format!("dump line {line}"), rule)
}

fn props_from_json(
    properties: &BTreeMap<String, Json>,
    line: usize,
) -> Result<BTreeMap<String, Value>> {
    properties
        .iter()
        .map(|(k, v)| {
            if !is_identifier(k) {
                return Err(line_error(
                    line,
                    format!("property `{k}` must be an identifier"),
                ));
            }
            Ok((
                k.clone(),
                from_json(v, &|| format!("dump line {line}.properties.{k}"))?,
            ))
        })
        .collect()
}

/// Reads and checks a whole dump before anything is written.
pub(crate) fn parse_dump(input: &mut (dyn BufRead + Send)) -> Result<(Vec<DumpGraph>, DumpSummary)> {
    let mut graphs: Vec<DumpGraph> = Vec::new();
    let mut end: Option<DumpSummary> = None;
    let mut seen = BTreeSet::new();
    let mut text = String::new();
    let mut number = 0usize;
    loop {
        text.clear();
        let read = input.read_line(&mut text).map_err(|source| Error::Io {
            context: format!("reading dump line {}", number + 1),
            source,
        })?;
        if read == 0 {
            break;
        }
        number += 1;
        let trimmed = text.trim_end_matches(['\n', '\r']);
        if trimmed.is_empty() {
            return Err(line_error(number, "must not be empty"));
        }
        if end.is_some() {
            return Err(line_error(number, "follows the `end` record"));
        }
        if number == 1 {
            let header: Json = serde_json::from_str(trimmed)
                .map_err(|e| line_error(1, format!("must be the dump's header ({e})")))?;
            let format = header.get("format").and_then(Json::as_str);
            if format != Some(DUMP_FORMAT) || header.get("record") != Some(&"header".into()) {
                return Err(line_error(
                    1,
                    format!(
                        "must be a header `{{\"record\":\"header\",\"format\":\"{DUMP_FORMAT}\",\"version\":{DUMP_VERSION}}}`: this is not a gralkor dump"
                    ),
                ));
            }
            match header.get("version").and_then(Json::as_u64) {
                Some(DUMP_VERSION) => {}
                other => {
                    return Err(line_error(
                        1,
                        format!(
                            "dump format version {} is not one this gralkor reads (it reads version {DUMP_VERSION})",
                            other.map_or_else(|| header["version"].to_string(), |v| v.to_string())
                        ),
                    ));
                }
            }
        }
        let line: Line = serde_json::from_str(trimmed)
            .map_err(|e| line_error(number, format!("is not a dump record ({e})")))?;
        let current = graphs.last_mut();
        match (line, current) {
            (Line::Header { .. }, _) if number == 1 => {}
            (Line::Header { .. }, _) => {
                return Err(line_error(number, "a header must be the first line only"));
            }
            (Line::Graph { graph }, _) => {
                if graph.trim().is_empty() {
                    return Err(line_error(number, "the graph id must not be blank"));
                }
                if !seen.insert(graph.clone()) {
                    return Err(line_error(number, format!("graph `{graph}` appears twice")));
                }
                graphs.push(DumpGraph {
                    id: graph,
                    line: number,
                    ..DumpGraph::default()
                });
            }
            (Line::End(summary), _) => end = Some(summary),
            (_, None) => {
                return Err(line_error(number, "comes before any `graph` record"));
            }
            (Line::Index(index), Some(g)) => {
                let spec = index.spec(&format!("dump line {number}"))?;
                g.indices.push((number, spec));
            }
            (
                Line::Node {
                    n,
                    labels,
                    properties,
                },
                Some(g),
            ) => {
                if n != g.nodes.len() as u64 {
                    return Err(line_error(
                        number,
                        format!("node `n` must be {} (got {n})", g.nodes.len()),
                    ));
                }
                if let Some(l) = labels.iter().find(|l| !is_identifier(l)) {
                    return Err(line_error(
                        number,
                        format!("label `{l}` must be an identifier"),
                    ));
                }
                g.nodes
                    .push((number, labels, props_from_json(&properties, number)?));
            }
            (
                Line::Relationship {
                    from,
                    to,
                    rel_type,
                    properties,
                },
                Some(g),
            ) => {
                for (end, n) in [("from", from), ("to", to)] {
                    if n >= g.nodes.len() as u64 {
                        return Err(line_error(
                            number,
                            format!("`{end}` must name a node listed before it (no node {n})"),
                        ));
                    }
                }
                if !is_identifier(&rel_type) {
                    return Err(line_error(
                        number,
                        format!("type `{rel_type}` must be an identifier"),
                    ));
                }
                let props = props_from_json(&properties, number)?;
                g.relationships.push((number, from, to, rel_type, props));
            }
        }
    }
    if number == 0 {
        return Err(line_error(1, "is missing: the dump is empty"));
    }
    let Some(end) = end else {
        return Err(line_error(
            number + 1,
            "is missing: a dump ends with an `end` record (this one is truncated)",
        ));
    };
    let held = DumpSummary {
        graphs: graphs.len() as u64,
        indices: graphs.iter().map(|g| g.indices.len() as u64).sum(),
        nodes: graphs.iter().map(|g| g.nodes.len() as u64).sum(),
        relationships: graphs.iter().map(|g| g.relationships.len() as u64).sum(),
    };
    if held != end {
        return Err(line_error(
            number,
            format!("the `end` record counts {end:?} but the dump holds {held:?}"),
        ));
    }
    Ok((graphs, held))
}

/// Writes one graph's nodes and relationships; the graph does not exist yet.
pub(crate) async fn write_graph(db: &FalkorDb, g: &DumpGraph) -> Result<()> {
    // Nodes, grouped by labels and vector properties (neither can be a parameter).
    let mut ids: Vec<i64> = vec![-1; g.nodes.len()];
    let mut groups: BTreeMap<(Vec<String>, Vec<String>), Vec<usize>> = BTreeMap::new();
    for (i, (_, labels, props)) in g.nodes.iter().enumerate() {
        groups
            .entry((labels.clone(), vector_keys(props)))
            .or_default()
            .push(i);
    }
    for ((labels, vectors), members) in &groups {
        let labels: String = labels.iter().map(|l| format!(":{l}")).collect();
        let statement = format!(
            "UNWIND $rows AS r CREATE (x{labels}) SET x += r.p{} RETURN r.i AS i, id(x) AS id",
            vector_sets(vectors)
        );
        for chunk in members.chunks(BATCH) {
            let rows = chunk
                .iter()
                .map(|&i| row(i, &g.nodes[i].2, vectors, []))
                .collect();
            let created = db
                .query(
                    &g.id,
                    &statement,
                    &Params::new().set("rows", Value::List(rows)),
                )
                .await?;
            for r in created.rows {
                if let [Value::Int(i), Value::Int(id)] = r.as_slice() {
                    ids[*i as usize] = *id;
                }
            }
        }
    }
    if let Some(i) = ids.iter().position(|id| *id < 0) {
        return Err(Error::Protocol(format!(
            "restoring graph `{}`: the node of dump line {} was not created",
            g.id, g.nodes[i].0
        )));
    }
    let mut groups: BTreeMap<(String, Vec<String>), Vec<usize>> = BTreeMap::new();
    for (i, (_, _, _, rel_type, props)) in g.relationships.iter().enumerate() {
        groups
            .entry((rel_type.clone(), vector_keys(props)))
            .or_default()
            .push(i);
    }
    for ((rel_type, vectors), members) in &groups {
        let statement = format!(
            "UNWIND $rows AS r MATCH (a) WHERE id(a) = r.s MATCH (b) WHERE id(b) = r.d \
             CREATE (a)-[x:{rel_type}]->(b) SET x += r.p{} RETURN count(x) AS n",
            vector_sets(vectors)
        );
        for chunk in members.chunks(BATCH) {
            let rows = chunk
                .iter()
                .map(|&i| {
                    let (_, from, to, _, props) = &g.relationships[i];
                    row(
                        i,
                        props,
                        vectors,
                        [
                            ("s", Value::Int(ids[*from as usize])),
                            ("d", Value::Int(ids[*to as usize])),
                        ],
                    )
                })
                .collect();
            let created = db
                .query(
                    &g.id,
                    &statement,
                    &Params::new().set("rows", Value::List(rows)),
                )
                .await?;
            if created.stats.relationships_created != chunk.len() as u64 {
                return Err(Error::Protocol(format!(
                    "restoring graph `{}`: {} of {} relationships were created",
                    g.id,
                    created.stats.relationships_created,
                    chunk.len()
                )));
            }
        }
    }
    Ok(())
}

/// The index entries of a dump as the specs to create: the range (or fulltext)
/// entries of one label and the same options as one spec with every property, as
/// they were created (FalkorDB refuses a second fulltext definition on a label).
pub(crate) fn merged_specs(entries: &[(usize, IndexSpec)]) -> Vec<IndexSpec> {
    let mut specs: Vec<IndexSpec> = Vec::new();
    for (_, spec) in entries {
        let mergeable = !matches!(spec.kind, IndexKind::Vector { .. });
        match specs
            .iter_mut()
            .find(|s| mergeable && s.entity == spec.entity && s.kind == spec.kind)
        {
            Some(s) => s.properties.extend(spec.properties.iter().cloned()),
            None => specs.push(spec.clone()),
        }
    }
    specs
}

fn vector_keys(props: &BTreeMap<String, Value>) -> Vec<String> {
    props
        .iter()
        .filter(|(_, v)| matches!(v, Value::Vector(_)))
        .map(|(k, _)| k.clone())
        .collect()
}

fn vector_sets(vectors: &[String]) -> String {
    vectors
        .iter()
        .map(|k| format!(", x.{k} = vecf32(r.v.{k})"))
        .collect()
}

/// One row of a batched write: its index `i`, plain properties `p`, vectors `v`.
fn row<const N: usize>(
    i: usize,
    props: &BTreeMap<String, Value>,
    vectors: &[String],
    extra: [(&str, Value); N],
) -> Value {
    let (v, p): (BTreeMap<String, Value>, BTreeMap<String, Value>) = props
        .iter()
        .map(|(k, v)| (k.clone(), v.clone()))
        .partition(|(k, _)| vectors.contains(k));
    let mut map: BTreeMap<String, Value> = [
        ("i".to_owned(), Value::Int(i as i64)),
        ("p".to_owned(), Value::Map(p)),
        ("v".to_owned(), Value::Map(v)),
    ]
    .into_iter()
    .collect();
    for (k, val) in extra {
        map.insert(k.to_owned(), val);
    }
    Value::Map(map)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn values_round_trip_through_json_exactly() {
        let at = || "x".to_owned();
        for v in [
            Value::Int(i64::MIN),
            Value::Int(7),
            Value::Float(1.0),
            Value::Float(0.1),
            Value::Float(-2.5e-300),
            Value::Bool(true),
            Value::String("it's \"q\" \n ✓".into()),
            Value::List(vec![Value::Int(1), Value::String("a".into())]),
            Value::Vector(vec![0.1, -1.0e-7, 3.402_823_5e38, 0.0]),
        ] {
            let j = to_json(&v, &at).unwrap();
            let text = serde_json::to_string(&j).unwrap();
            let back: Json = serde_json::from_str(&text).unwrap();
            assert_eq!(from_json(&back, &at).unwrap(), v, "{text}");
        }
        // An integer stays an integer, a double a double.
        assert_eq!(to_json(&Value::Float(1.0), &at).unwrap().to_string(), "1.0");
        assert_eq!(to_json(&Value::Int(1), &at).unwrap().to_string(), "1");
    }

    #[test]
    fn values_a_dump_cannot_take_are_named() {
        let e = from_json(&serde_json::json!({"x": 1}), &|| {
            "dump line 3.properties.p".into()
        })
        .unwrap_err()
        .to_string();
        assert!(e.contains("dump line 3.properties.p"), "{e}");
        let e = from_json(&serde_json::json!(u64::MAX), &|| "p".into()).unwrap_err();
        assert!(e.to_string().contains("64-bit"), "{e}");
    }

    fn parse(text: &str) -> Result<(Vec<DumpGraph>, DumpSummary)> {
        parse_dump(&mut text.as_bytes())
    }

    #[test]
    fn a_dump_is_checked_whole_and_its_faults_name_the_line() {
        let header = r#"{"record":"header","format":"gralkor-dump","version":1}"#;
        let end0 = r#"{"record":"end","graphs":0,"indices":0,"nodes":0,"relationships":0}"#;
        let (graphs, summary) = parse(&format!("{header}\n{end0}\n")).unwrap();
        assert!(graphs.is_empty());
        assert_eq!(summary, DumpSummary::default());

        let err = |text: String| parse(&text).err().expect("refused").to_string();
        let e = err(format!(
            "{}\n{end0}\n",
            header.replace("\"version\":1", "\"version\":2")
        ));
        assert!(
            e.contains("dump line 1") && e.contains("version 2 is not one this gralkor reads"),
            "{e}"
        );
        let e = err("{\"hello\":1}\n".into());
        assert!(
            e.contains("dump line 1") && e.contains("not a gralkor dump"),
            "{e}"
        );
        let e = err(format!(
            "{header}\n{{\"record\":\"graph\",\"graph\":\"g\"}}\n"
        ));
        assert!(e.contains("dump line 3") && e.contains("truncated"), "{e}");
        let e = err(format!(
            "{header}\n{{\"record\":\"graph\",\"graph\":\"g\"}}\n\
             {{\"record\":\"node\",\"n\":0,\"labels\":[\"A\"],\"properties\":{{}}}}\n\
             {{\"record\":\"relationship\",\"from\":0,\"to\":1,\"type\":\"R\",\"properties\":{{}}}}\n{end0}\n"
        ));
        assert!(e.contains("dump line 4") && e.contains("no node 1"), "{e}");
        let e = err(format!(
            "{header}\n{{\"record\":\"graph\",\"graph\":\"g\"}}\n\
             {{\"record\":\"node\",\"n\":0,\"labels\":[\"A b\"],\"properties\":{{}}}}\n{end0}\n"
        ));
        assert!(e.contains("dump line 3") && e.contains("identifier"), "{e}");
        let e = err(format!(
            "{header}\n{{\"record\":\"graph\",\"graph\":\"g\"}}\n\
             {{\"record\":\"node\",\"n\":0,\"labels\":[],\"properties\":{{}},\"extra\":1}}\n{end0}\n"
        ));
        assert!(e.contains("dump line 3") && e.contains("extra"), "{e}");
        let e = err(format!(
            "{header}\n{{\"record\":\"graph\",\"graph\":\"g\"}}\n\
             {{\"record\":\"node\",\"n\":0,\"labels\":[],\"properties\":{{}}}}\n{end0}\n"
        ));
        assert!(e.contains("dump line 4") && e.contains("counts"), "{e}");
    }
}
