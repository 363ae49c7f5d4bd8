//! The main job, end to end on a fresh machine: start an embedded FalkorDB (provisioning
//! its binaries on first use), write a small graph, read it back through each index
//! kind, and shut down cleanly.
//!
//! ```text
//! cargo run --example quickstart              # a temporary data directory
//! cargo run --example quickstart -- ./memory  # a named one, kept afterwards
//! ```

use std::time::Instant;

use gralkor::falkordb::{
    DEFAULT_STOPWORDS, EmbeddedConfig, FalkorConfig, FalkorDb, IndexKind, IndexSpec, Params,
    Similarity, Value, fulltext_query,
};

const GRAPH: &str = "quickstart";

/// A toy 4-dimensional "embedding": enough to show nearest-neighbour search.
fn embed(animal: bool, tool: bool, food: bool, place: bool) -> Vec<f32> {
    [animal, tool, food, place]
        .iter()
        .map(|&b| if b { 1.0 } else { 0.05 })
        .collect()
}

#[tokio::main]
async fn main() -> gralkor::Result<()> {
    let named = std::env::args().nth(1);
    let temp = tempfile::tempdir().map_err(|e| gralkor::Error::Io {
        context: "temp dir".into(),
        source: e,
    })?;
    let data_dir = named
        .clone()
        .map(Into::into)
        .unwrap_or_else(|| temp.path().to_path_buf());

    let started = Instant::now();
    println!("starting embedded FalkorDB in {}", data_dir.display());
    let db = FalkorDb::connect(FalkorConfig::embedded(EmbeddedConfig::new(&data_dir))).await?;
    let server = db.embedded_server().expect("embedded backend");
    println!(
        "  ready in {:?}: pid {:?}, socket {}, redis-server {}",
        started.elapsed(),
        server.pid(),
        server.socket_path().display(),
        server.binaries().redis_server.display()
    );

    // Indices of every kind.
    for spec in [
        IndexSpec::range_nodes("Entity", ["name"]),
        IndexSpec::fulltext_nodes("Entity", ["name", "summary"], DEFAULT_STOPWORDS),
        IndexSpec::vector_nodes("Entity", "embedding", 4, Similarity::Cosine),
        IndexSpec::fulltext_relationships("RELATES_TO", ["fact"], DEFAULT_STOPWORDS),
    ] {
        let created = db.create_index(GRAPH, &spec).await?;
        let kind = match spec.kind {
            IndexKind::Range => "range",
            IndexKind::Fulltext { .. } => "fulltext",
            IndexKind::Vector { .. } => "vector",
        };
        println!(
            "{kind} index on {:?} {:?}: {}",
            spec.entity,
            spec.properties,
            if created { "created" } else { "already there" }
        );
    }

    // A small graph, written in one round trip; MERGE keeps re-runs idempotent.
    let entities = [
        (
            "Ada",
            "a border collie who herds sheep",
            embed(true, false, false, false),
        ),
        (
            "Hammer",
            "a claw hammer in the shed",
            embed(false, true, false, false),
        ),
        (
            "Sourdough",
            "bread baked every Sunday",
            embed(false, false, true, false),
        ),
        (
            "Shed",
            "the garden shed behind the house",
            embed(false, false, false, true),
        ),
    ];
    let mut stmts: Vec<(String, Params)> = entities
        .iter()
        .map(|(name, summary, emb)| {
            (
                "MERGE (e:Entity {name: $name}) SET e.summary = $summary, e.embedding = vecf32($emb)".to_string(),
                Params::new().set("name", *name).set("summary", *summary).set("emb", emb.clone()),
            )
        })
        .collect();
    stmts.push((
        "MATCH (a:Entity {name: 'Hammer'}), (b:Entity {name: 'Shed'})
         MERGE (a)-[r:RELATES_TO {fact: 'The hammer is kept in the shed'}]->(b)"
            .to_string(),
        Params::new(),
    ));
    db.pipeline(GRAPH, &stmts).await?;
    println!("wrote {} entities and 1 fact", entities.len());

    // Range index: exact lookup.
    let res = db
        .ro_query(
            GRAPH,
            "MATCH (e:Entity {name: $n}) RETURN e.summary AS s",
            &Params::new().set("n", "Ada"),
        )
        .await?;
    println!(
        "range    name = 'Ada'            -> {:?}",
        res.get(0, "s").and_then(Value::as_str)
    );

    // Fulltext index, through the sanitiser (the hyphen and '?' would break RediSearch).
    let text = "who bakes sour-dough bread?";
    let q = fulltext_query(text, DEFAULT_STOPWORDS).unwrap_or_default();
    let res = db
        .ro_query(
            GRAPH,
            "CALL db.idx.fulltext.queryNodes('Entity', $q) YIELD node, score RETURN node.name AS n, score",
            &Params::new().set("q", q.clone()),
        )
        .await?;
    let hits: Vec<&str> = res.column_values("n").filter_map(Value::as_str).collect();
    println!("fulltext {text:?} as {q:?} -> {hits:?}");

    let res = db
        .ro_query(
            GRAPH,
            "CALL db.idx.fulltext.queryRelationships('RELATES_TO', $q) YIELD relationship RETURN relationship.fact AS f",
            &Params::new().set("q", fulltext_query("where's the hammer?", DEFAULT_STOPWORDS).unwrap_or_default()),
        )
        .await?;
    println!(
        "fulltext facts 'where's the hammer?' -> {:?}",
        res.get(0, "f").and_then(Value::as_str)
    );

    // Vector index: nearest neighbours of "a dog-like thing".
    let res = db
        .ro_query(
            GRAPH,
            "CALL db.idx.vector.queryNodes('Entity', 'embedding', 2, vecf32($q)) YIELD node, score
             RETURN node.name AS n, score ORDER BY score",
            &Params::new().set("q", embed(true, false, false, false)),
        )
        .await?;
    let knn: Vec<(String, f64)> = res
        .rows
        .iter()
        .map(|r| {
            (
                r[0].as_str().unwrap_or_default().to_owned(),
                r[1].as_f64().unwrap_or(f64::NAN),
            )
        })
        .collect();
    println!("vector   nearest to [animal]      -> {knn:?}");

    println!("graphs on the server: {:?}", db.list_graphs().await?);
    db.shutdown().await?;
    println!("shut down cleanly after {:?}", started.elapsed());
    if named.is_some() {
        println!(
            "data kept in {}; run again to see MERGE keep it idempotent",
            data_dir.display()
        );
    }
    Ok(())
}
