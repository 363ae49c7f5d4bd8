//! Dump and restore as engine methods ([`Engine::dump`], [`Engine::restore`]); the
//! format, the reading and the writing are the store's (`graph/store/dump.rs`).

use std::collections::HashMap;
use std::io::{BufRead, Write};

use tracing::Instrument;

use crate::falkordb::{IndexKind, Value};
use crate::graph::Engine;
use crate::graph::store;
use crate::graph::store::dump::{
    DUMP_FORMAT, DUMP_VERSION, DumpGraph, DumpSummary, Line, graph_lines, line_error, merged_specs,
    parse_dump, read_graph, write_graph, write_line,
};
use crate::{Error, Result};

impl Engine {
    /// Writes every graph of the server to `out` as a dump: JSON Lines, a header
    /// first, then each graph's indices, nodes and relationships, and an `end` record
    /// with the counts (format: `docs/dump-format.md`). Graphs come in id order and
    /// records in a deterministic order, so dumping the same content twice gives the
    /// same bytes. Read-only; returns what was written.
    ///
    /// ```no_run
    /// # async fn run(engine: gralkor::graph::Engine) -> gralkor::Result<()> {
    /// let mut out = Vec::new();
    /// let summary = engine.dump(&mut out).await?;
    /// println!("{} graphs, {} nodes", summary.graphs, summary.nodes);
    /// # Ok(()) }
    /// ```
    pub async fn dump(&self, out: &mut (dyn Write + Send)) -> Result<DumpSummary> {
        let db = self.db();
        let span = tracing::info_span!("dump");
        async move {
            write_line(
                out,
                &Line::Header {
                    format: DUMP_FORMAT.into(),
                    version: DUMP_VERSION,
                },
            )?;
            let mut summary = DumpSummary::default();
            for graph in db.list_graphs().await? {
                let raw = read_graph(db, &graph)
                    .instrument(tracing::info_span!("dump_graph", graph = %graph))
                    .await?;
                summary.graphs += 1;
                write_line(out, &Line::Graph { graph })?;
                for line in graph_lines(raw) {
                    match &line {
                        Line::Index(_) => summary.indices += 1,
                        Line::Node { .. } => summary.nodes += 1,
                        Line::Relationship { .. } => summary.relationships += 1,
                        _ => {}
                    }
                    write_line(out, &line)?;
                }
            }
            write_line(out, &Line::End(summary))?;
            out.flush().map_err(|source| Error::Io {
                context: "writing the dump".into(),
                source,
            })?;
            Ok(summary)
        }
        .instrument(span)
        .await
    }

    /// Restores a dump written by [`dump`](Engine::dump) into this engine's server:
    /// every graph with its indices, nodes and relationships, embeddings included.
    ///
    /// The whole dump is read and checked first; a dump that is not one, of another
    /// format version, truncated (no `end` record) or malformed is refused with
    /// [`Error::InvalidInput`] naming its line (`dump line 7`), before anything is
    /// written. So is a server that already holds a graph: unless `into_existing`,
    /// any graph at all; with it, a graph the dump holds too (graphs are never merged
    /// or overwritten).
    ///
    /// With `recompute_embeddings` the dump's embeddings are replaced by this engine's
    /// embedder's (entity and community names, fact texts, episode passages), and the
    /// vector indices sized to it: for a move to another embedding model.
    ///
    /// ```no_run
    /// # async fn run(engine: gralkor::graph::Engine) -> gralkor::Result<()> {
    /// let dump = std::fs::read("memory.jsonl").unwrap();
    /// let summary = engine.restore(&mut dump.as_slice(), false, false).await?;
    /// println!("restored {} graphs", summary.graphs);
    /// # Ok(()) }
    /// ```
    pub async fn restore(
        &self,
        input: &mut (dyn BufRead + Send),
        into_existing: bool,
        recompute_embeddings: bool,
    ) -> Result<DumpSummary> {
        let db = self.db();
        let span = tracing::info_span!("restore", into_existing, recompute_embeddings);
        async move {
            let (mut graphs, summary) = parse_dump(input)?;
            let existing = db.list_graphs().await?;
            if !into_existing && let Some(first) = existing.first() {
                return Err(Error::invalid(
                    "restore",
                    format!(
                        "needs a server without graphs, and this one holds {} (`{first}`…); \
                         restore into an empty data directory, or allow a non-empty one \
                         (`into_existing`; `gralkor restore --into-existing`)",
                        existing.len()
                    ),
                ));
            }
            if let Some(g) = graphs.iter().find(|g| existing.contains(&g.id)) {
                return Err(line_error(
                    g.line,
                    format!(
                        "graph `{}` exists on the server already: a restore never merges into \
                         or overwrites a graph (delete it first)",
                        g.id
                    ),
                ));
            }
            if recompute_embeddings {
                self.recompute(&mut graphs).await?;
            }
            for g in &graphs {
                let specs = merged_specs(&g.indices);
                async {
                    if !specs.is_empty() {
                        db.create_indices(&g.id, &specs).await?;
                    }
                    write_graph(db, g).await
                }
                .instrument(tracing::info_span!("restore_graph", graph = %g.id))
                .await?;
            }
            db.persist_index_changes().await?;
            Ok(summary)
        }
        .instrument(span)
        .await
    }

    /// Replaces the embeddings of a dump's graphs by this engine's embedder's.
    async fn recompute(&self, graphs: &mut [DumpGraph]) -> Result<()> {
        let Some(embedder) = self.embedder() else {
            return Err(Error::invalid(
                "recompute_embeddings",
                "needs an embedder (configure the models)",
            ));
        };
        let extracts = self.llm().is_some();
        for g in graphs.iter_mut() {
            let text = |v: Option<&Value>| v.and_then(Value::as_str).map(str::to_owned);
            let contents: HashMap<String, String> = g
                .nodes
                .iter()
                .filter(|(_, labels, _)| labels.iter().any(|l| l == "Episodic"))
                .filter_map(|(_, _, p)| Some((text(p.get("uuid"))?, text(p.get("content"))?)))
                .collect();
            // (node or relationship, index, property, text)
            let mut wanted: Vec<(bool, usize, String, String)> = Vec::new();
            for (i, (_, labels, props)) in g.nodes.iter().enumerate() {
                let has = |l: &str| labels.iter().any(|x| x == l);
                for (key, value) in props {
                    if !matches!(value, Value::Vector(_)) {
                        continue;
                    }
                    let t = if (has("Entity") || has("Community")) && key == "name_embedding" {
                        text(props.get("name"))
                    } else if has(store::EPISODE_EMBEDDING_LABEL) && key == "embedding" {
                        let content = text(props.get("uuid")).and_then(|u| contents.get(&u));
                        let part = props.get("part").and_then(Value::as_int);
                        content.and_then(|c| match part {
                            None if extracts => Some(store::episode_embedding_text(c)),
                            p => store::episode_passages(c)
                                .into_iter()
                                .nth(p.unwrap_or(0) as usize),
                        })
                    } else {
                        None
                    };
                    if let Some(t) = t {
                        wanted.push((true, i, key.clone(), t));
                    }
                }
            }
            for (i, (_, _, _, rel_type, props)) in g.relationships.iter().enumerate() {
                if rel_type == "RELATES_TO"
                    && matches!(props.get("fact_embedding"), Some(Value::Vector(_)))
                    && let Some(t) = text(props.get("fact"))
                {
                    wanted.push((false, i, "fact_embedding".into(), t));
                }
            }
            if wanted.is_empty() {
                continue;
            }
            let texts: Vec<String> = wanted.iter().map(|w| w.3.clone()).collect();
            let vectors = embedder
                .embed(&texts, "restore")
                .instrument(tracing::info_span!("embed", texts = texts.len()))
                .await?;
            if vectors.len() != texts.len() {
                return Err(Error::Protocol(format!(
                    "the embedder returned {} vectors for {} texts",
                    vectors.len(),
                    texts.len()
                )));
            }
            let dimension = vectors.first().map(|v| v.len() as u32);
            for ((node, i, key, _), vector) in wanted.into_iter().zip(vectors) {
                let props = if node {
                    &mut g.nodes[i].2
                } else {
                    &mut g.relationships[i].4
                };
                props.insert(key, Value::Vector(vector));
            }
            if let Some(d) = dimension {
                for (_, spec) in &mut g.indices {
                    if let IndexKind::Vector { dimension, .. } = &mut spec.kind {
                        *dimension = d;
                    }
                }
            }
        }
        Ok(())
    }
}
