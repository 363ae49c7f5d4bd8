//! The `Client` contract run against `NativeClient`: the real engine on the shared
//! embedded FalkorDB, with a scripted model whose every episode yields one fact
//! carrying the episode's text, and a hashing embedder.

use crate::client_contract;
use crate::common;

use std::sync::Arc;

use common::ingest::{CountingEmbedder, Rules, answer};
use gralkor::NativeStorage;
use gralkor::client::NativeClient;
use gralkor::graph::Engine;
use gralkor::llm::doubles::ScriptedModel;
use gralkor::runtime::{Runtime, RuntimeConfig};
use serde_json::json;

async fn native(config: RuntimeConfig) -> NativeClient {
    let r = Rules::narrator();
    let model = ScriptedModel::new().respond_with(move |req| answer(&r, req));
    let embedder = Arc::new(CountingEmbedder::new());
    let engine = Engine::new(common::db().await, Arc::new(model), embedder);
    let storage = NativeStorage::new(engine);
    NativeClient::from_parts(
        Runtime::new(config).expect("valid contract configuration"),
        storage,
    )
}

run_contract!(|config| client_contract::boxed(native(config)));

/// The same contract against the offline native client: an embedder, no language
/// model (episodes embedded and searched hybrid, fact searches answered by the
/// episodes not yet extracted — the twin's shape).
mod offline {
    use super::*;

    async fn offline(config: RuntimeConfig) -> NativeClient {
        let engine = Engine::without_llm(common::db().await, Arc::new(CountingEmbedder::new()));
        NativeClient::from_parts(
            Runtime::new(config).expect("valid contract configuration"),
            NativeStorage::new(engine),
        )
    }

    run_contract!(|config| client_contract::boxed(offline(config)));
}

use gralkor::client::{Client, Content, Hit, Ingest, Search};
use gralkor::config::Config;
use gralkor::falkordb::{EmbeddedConfig, FalkorConfig, Params, Value};
use gralkor::provenance::Writer;

fn op() -> gralkor::client::OperatorId {
    gralkor::client::OperatorId::new(format!("op-{}", uuid::Uuid::new_v4())).unwrap()
}

#[tokio::test]
async fn a_replayed_ingest_stores_nothing_twice() {
    let r = Rules::narrator();
    let model = ScriptedModel::new().respond_with(move |req| answer(&r, req));
    let embedder = Arc::new(CountingEmbedder::new());
    let db = common::db().await;
    let engine = Engine::new(db.clone(), Arc::new(model.clone()), embedder.clone());
    let client = NativeClient::from_parts(
        Runtime::new(RuntimeConfig::new()).unwrap(),
        NativeStorage::new(engine),
    );
    let op = op();
    let request = Ingest::new(
        "turn-1",
        &op,
        "personal-chat",
        Content::conversation("Ada: I keep bees in Porto."),
    );
    let first = client.ingest(&request).await.unwrap();
    let calls = model.calls().len();
    // The ingest reports what it cost, as the model and the embedder saw it.
    let cost = &first[0].cost;
    assert_eq!(cost.model_calls as usize, calls);
    assert_eq!(cost.model_calls_by_step.get("extract"), Some(&1));
    assert_eq!(
        cost.model_calls_by_step.values().sum::<u32>(),
        cost.model_calls
    );
    assert_eq!(cost.embedding_requests as usize, embedder.requests());
    assert!(cost.prompt_tokens > 0 && cost.db_round_trips > 0 && cost.wall_time_us > 0);
    let again = client.ingest(&request).await.unwrap();
    assert_eq!(
        again[0].episode, first[0].episode,
        "same request, same episode"
    );
    assert_eq!(model.calls().len(), calls, "a replay extracts nothing");
    assert_eq!(
        (again[0].cost.model_calls, again[0].cost.embedding_requests),
        (0, 0),
        "and costs no model call"
    );
    let graph = format!("personal/{op}");
    let n = db
        .ro_query(
            &graph,
            "MATCH (e:Episodic) RETURN count(e) AS n",
            &Params::new(),
        )
        .await
        .unwrap();
    assert_eq!(n.get(0, "n").and_then(Value::as_int), Some(1));
    let other = Ingest::new(
        "turn-2",
        &op,
        "personal-chat",
        Content::conversation("Ada: I keep bees in Porto."),
    );
    let second = client.ingest(&other).await.unwrap();
    assert_ne!(
        second[0].episode, first[0].episode,
        "another id is another episode"
    );
    db.delete_graph(&graph).await.unwrap();
}

#[tokio::test]
async fn fact_search_returns_extracted_facts_with_their_lens_sources() {
    let client = native(RuntimeConfig::new()).await;
    let op = op();
    client
        .ingest(&Ingest::new(
            "t-1",
            &op,
            "personal-chat",
            Content::conversation("Ada: my violin teacher lives in Graz."),
        ))
        .await
        .unwrap();
    let found = client
        .search(&Search::new(&op, "violin teacher").facts())
        .await
        .unwrap();
    let fact = found
        .iter()
        .find_map(|r| r.hit.as_fact())
        .expect("the extracted fact is found");
    assert!(fact.fact.contains("violin"), "{}", fact.fact);
    assert_eq!(fact.sources.len(), 1);
    assert_eq!(
        fact.sources[0].writer,
        Some(Writer::Lens("personal-chat".into()))
    );
    assert!(
        fact.sources[0]
            .source_description
            .ends_with(" [lens: personal-chat]"),
        "a Lens source keeps its marker: {:?}",
        fact.sources[0].source_description
    );
    assert!(found.iter().all(|r| r.destination == "personal"));
}

#[tokio::test]
async fn connect_from_config_without_models_stores_searchable_episodes_and_shuts_down() {
    let dir = tempfile::Builder::new()
        .prefix("gralkor-native-")
        .tempdir()
        .unwrap();
    let config = Config::new(FalkorConfig::embedded(EmbeddedConfig::new(dir.path())));
    assert!(!config.extracts());
    let client = NativeClient::connect(config, RuntimeConfig::new())
        .await
        .unwrap();
    let op = op();
    client
        .ingest(&Ingest::new(
            "t-1",
            &op,
            "personal-chat",
            Content::conversation("Ada: the allotment gate code is 4711."),
        ))
        .await
        .unwrap();
    let episodes = client
        .search(&Search::new(&op, "allotment gate"))
        .await
        .unwrap();
    assert_eq!(episodes.len(), 1);
    assert!(matches!(&episodes[0].hit, Hit::Episode(e) if e.content.contains("4711")));
    let facts = client
        .search(&Search::new(&op, "allotment gate").facts())
        .await
        .unwrap();
    // Episodes only: nothing is extracted, so the episode stands in as its fact.
    assert_eq!(facts.len(), 1, "{facts:?}");
    let fact = facts[0].hit.as_fact().expect("a fact");
    assert!(fact.fact.contains("4711"), "{fact:?}");
    assert_eq!(
        fact.sources[0].episode,
        episodes[0].hit.as_episode().unwrap().uuid
    );
    let server = client.storage().db().embedded_server().unwrap().clone();
    client.shutdown().await.unwrap();
    assert!(server.pid().is_none(), "the embedded server stopped");
}

/// The first run of a user with no provider key: `Config::from_lookup` picks the local
/// embedder and no language model; `connect` provisions and loads it; a question that
/// shares no content word with the remembered turn is answered by meaning.
#[cfg(feature = "local-embedder")]
#[tokio::test]
async fn with_no_key_connect_uses_the_local_model_and_memory_search_answers_by_meaning() {
    let dir = tempfile::Builder::new()
        .prefix("gralkor-offline-")
        .tempdir()
        .unwrap();
    let data = dir.path().display().to_string();
    let config = Config::from_lookup(|k| (k == "GRALKOR_DATA_DIR").then(|| data.clone())).unwrap();
    assert!(!config.extracts());
    assert!(
        config.describe().starts_with(
            "embedder local:all-minilm-l6-v2 because no provider key is set; extraction off"
        ),
        "{}",
        config.describe()
    );
    let client = NativeClient::connect(config, RuntimeConfig::new())
        .await
        .unwrap();
    assert!(!client.storage().engine().extracts());
    let embedder = client
        .storage()
        .engine()
        .embedder()
        .expect("the local embedder");
    assert_eq!((embedder.provider(), embedder.dimension()), ("local", 384));
    let op = op();
    for (id, text) in [
        ("t-1", "Ada: I moved to Lisbon in March."),
        ("t-2", "Ada: the boiler is serviced every October."),
    ] {
        client
            .ingest(&Ingest::new(
                id,
                &op,
                "personal-chat",
                Content::conversation(text),
            ))
            .await
            .unwrap();
    }
    // No content word of the turn is in the question ("city", "living"), so the
    // fulltext index alone finds nothing: the vector method does.
    let question = "which city is she living in";
    let facts = client
        .search(&Search::new(&op, question).facts().max_results(1))
        .await
        .unwrap();
    assert_eq!(facts.len(), 1, "{facts:?}");
    assert!(
        facts[0].hit.as_fact().unwrap().fact.contains("Lisbon"),
        "{facts:?}"
    );
    let text =
        gralkor::agent::memory_search(&client, &gralkor::agent::MemorySearch::new(&op, question))
            .await
            .unwrap();
    assert!(text.contains("I moved to Lisbon"), "{text}");
    client.shutdown().await.unwrap();
}

/// The Lens's whole graph as stored: nodes sorted by id (labels sorted), relationships
/// sorted by endpoints and type.
async fn owned(
    client: &NativeClient,
    graph: &str,
    lens: &str,
) -> (
    Vec<gralkor::graph::OwnedNode>,
    Vec<gralkor::graph::OwnedRelationship>,
) {
    let (mut nodes, rels) = gralkor::graph::get_owned(client.storage().db(), graph, lens)
        .await
        .unwrap();
    for n in &mut nodes {
        n.labels.sort();
    }
    (nodes, rels)
}

#[tokio::test]
async fn a_replacement_that_fails_at_the_server_leaves_the_old_graph_whole() {
    use gralkor::client::Replace;
    use gralkor::falkordb::{IndexEntity, IndexSpec};
    use gralkor::lens::{Graph, Lens};

    let dest = format!("d-{}", uuid::Uuid::new_v4());
    let client = native(
        RuntimeConfig::new()
            .destination(dest.clone())
            .lens(Lens::replace_graph("systems", dest.clone())),
    )
    .await;
    let op = op();
    let replace = |graph: Graph| {
        let client = client.clone();
        let op = op.clone();
        async move { client.replace(&Replace::new(&op, "systems", graph)).await }
    };
    let old = Graph::new()
        .node("payments", ["System"], json!({"name": "Payments"}))
        .node("ledger", ["System"], json!({"name": "Ledger"}))
        .node("core", ["Team"], json!({"name": "Core"}))
        .relationship("payments", "DEPENDS_ON", "ledger", json!({"via": "events"}))
        .relationship("core", "OWNS", "payments", json!({"ticket": "PAY-1"}));
    replace(old).await.unwrap();
    let before = owned(&client, &dest, "systems").await;
    assert_eq!((before.0.len(), before.1.len()), (3, 2));

    // Someone made team names and ownership tickets unique in this graph: the server
    // refuses these graphs part way, after other nodes (and relationships) of them
    // were created.
    let db = client.storage().db();
    db.create_index(&dest, &IndexSpec::range_nodes("Team", ["name"]))
        .await
        .unwrap();
    db.create_unique_constraint(&dest, &IndexEntity::Node("Team".into()), "name")
        .await
        .unwrap();
    db.create_index(&dest, &IndexSpec::range_relationships("OWNS", ["ticket"]))
        .await
        .unwrap();
    db.create_unique_constraint(&dest, &IndexEntity::Relationship("OWNS".into()), "ticket")
        .await
        .unwrap();
    let two_teams_alike = Graph::new()
        .node("audit", ["Audit"], json!({"name": "Audit"}))
        .node("edge", ["Team"], json!({"name": "Edge"}))
        .node("edge-2", ["Team"], json!({"name": "Edge"}))
        .relationship("audit", "WATCHES", "edge", json!({}));
    let two_tickets_alike = Graph::new()
        .node("a", ["System"], json!({"name": "A"}))
        .node("b", ["System"], json!({"name": "B"}))
        .node("edge", ["Team"], json!({"name": "Edge"}))
        .relationship("a", "DEPENDS_ON", "b", json!({}))
        .relationship("edge", "OWNS", "a", json!({"ticket": "T-1"}))
        .relationship("edge", "OWNS", "b", json!({"ticket": "T-1"}));
    // The old and the new generation meet in one statement, so keeping a value that
    // a unique constraint covers is refused too (and changes nothing).
    let keeps_core = Graph::new().node("core", ["Team"], json!({"name": "Core"}));
    for refused in [two_teams_alike, two_tickets_alike, keeps_core] {
        let err = replace(refused.clone()).await.unwrap_err();
        assert!(
            matches!(&err, gralkor::Error::Query { message, .. } if message.contains("unique constraint")),
            "the server's refusal: {err:?}"
        );
        assert_eq!(
            owned(&client, &dest, "systems").await,
            before,
            "the old graph is whole, relationships on their own endpoints, and nothing \
             of {refused:?} is there"
        );
    }

    // A replacement the server accepts replaces everything at once.
    let fine = Graph::new()
        .node("edge", ["Team"], json!({"name": "Edge"}))
        .node("ops", ["Team"], json!({"name": "Ops"}))
        .relationship("ops", "OWNS", "edge", json!({"ticket": "OPS-1"}));
    replace(fine).await.unwrap();
    let after = owned(&client, &dest, "systems").await;
    let ids: Vec<_> = after.0.iter().map(|n| n.id.as_str()).collect();
    assert_eq!(ids, ["edge", "ops"]);
    assert_eq!(
        (
            after.1.len(),
            after.1[0].from.as_str(),
            after.1[0].to.as_str()
        ),
        (1, "ops", "edge")
    );
    db.delete_graph(&dest).await.unwrap();
}

#[tokio::test]
async fn one_search_over_three_destinations_makes_one_embedding_request() {
    let r = Rules::narrator();
    let model = ScriptedModel::new().respond_with(move |req| answer(&r, req));
    let embedder = Arc::new(CountingEmbedder::new());
    let engine = Engine::new(common::db().await, Arc::new(model), embedder.clone());
    let (a, b) = (
        format!("a-{}", uuid::Uuid::new_v4().simple()),
        format!("b-{}", uuid::Uuid::new_v4().simple()),
    );
    let client = NativeClient::from_parts(
        Runtime::new(
            RuntimeConfig::new()
                .destination(a.clone())
                .destination(b.clone())
                .lens(gralkor::lens::Lens::appending("a-notes", a.clone()))
                .lens(gralkor::lens::Lens::appending("b-notes", b.clone())),
        )
        .unwrap(),
        NativeStorage::new(engine),
    );
    let op = op();
    for (lens, text) in [
        ("personal-chat", "Ada: the kiln is in the shed."),
        ("a-notes", "The kiln fires on Tuesdays."),
        ("b-notes", "Kiln glaze recipes live in the wiki."),
    ] {
        client
            .ingest(&Ingest::new(text, &op, lens, Content::document(text)))
            .await
            .unwrap();
    }
    let before = embedder.requests();
    let found = client
        .search(
            &Search::new(&op, "kiln")
                .destinations(["personal", a.as_str(), b.as_str()])
                .facts(),
        )
        .await
        .unwrap();
    assert_eq!(
        embedder.requests() - before,
        1,
        "one query embedding for three graphs"
    );
    let mut destinations: Vec<_> = found.iter().map(|r| r.destination.clone()).collect();
    destinations.dedup();
    assert_eq!(destinations, ["personal".to_string(), a, b]);
}

/// The fact texts and source writers of a fact search, sorted.
fn fact_view(
    results: &[gralkor::client::SearchResult],
) -> Vec<(String, String, Vec<Option<Writer>>)> {
    let mut view: Vec<_> = results
        .iter()
        .map(|r| {
            let f = r.hit.as_fact().expect("a fact");
            (
                r.destination.clone(),
                f.fact.clone(),
                f.sources.iter().map(|s| s.writer.clone()).collect(),
            )
        })
        .collect();
    view.sort_by(|a, b| (&a.0, &a.1).cmp(&(&b.0, &b.1)));
    view
}

#[tokio::test]
async fn without_a_language_model_fact_search_answers_from_episodes_as_the_twin_does() {
    let db = common::db().await;
    offline_answers_as_the_twin_does(Engine::episodes_only(db.clone())).await;
    offline_answers_as_the_twin_does(Engine::without_llm(db, Arc::new(CountingEmbedder::new())))
        .await;
}

async fn offline_answers_as_the_twin_does(engine: Engine) {
    let native = NativeClient::from_parts(Runtime::packaged(), NativeStorage::new(engine));
    let twin = gralkor::InMemoryClient::new();
    let op = op();
    let w = format!("zq{}", &uuid::Uuid::new_v4().simple().to_string()[..10]);
    for client in [&native as &dyn Client, &twin] {
        for (i, text) in [
            format!("Ada: I moved to Lisbon {w} in March."),
            format!("Ada: my sister still lives in Porto {w}."),
        ]
        .into_iter()
        .enumerate()
        {
            client
                .ingest(
                    &Ingest::new(
                        format!("t-{i}"),
                        &op,
                        "personal-chat",
                        Content::conversation(text),
                    )
                    .source_description("chat"),
                )
                .await
                .unwrap();
        }
        client
            .memory_add(&gralkor::client::MemoryAdd::new(
                &op,
                Content::document(format!("Ada prefers tea {w}.")),
            ))
            .await
            .unwrap();
        client.await_background_writes().await;
    }
    let search = Search::new(&op, format!("Lisbon {w}")).facts();
    let from_native = fact_view(&native.search(&search).await.unwrap());
    let from_twin = fact_view(&twin.search(&search).await.unwrap());
    assert_eq!(from_native.len(), 3, "{from_native:?}");
    assert_eq!(from_native, from_twin);
    // A Lens selector keeps only that Lens's episodes, inside the search.
    let lens_only = search.clone().lenses(["personal-chat"]);
    let native_lens = fact_view(&native.search(&lens_only).await.unwrap());
    assert_eq!(
        native_lens,
        fact_view(&twin.search(&lens_only).await.unwrap())
    );
    assert_eq!(native_lens.len(), 2);
    // And the agent tool answers from memory, offline.
    let text = gralkor::agent::memory_search(
        &native,
        &gralkor::agent::MemorySearch::new(&op, format!("where does Ada live? Lisbon {w}")),
    )
    .await
    .unwrap();
    assert!(text.contains("I moved to Lisbon"), "{text}");
}

#[tokio::test]
async fn episodes_stored_without_a_model_are_extracted_later_through_the_client() {
    let db = common::db().await;
    let op = op();
    let offline = NativeClient::from_parts(
        Runtime::packaged(),
        NativeStorage::new(Engine::episodes_only(db.clone())),
    );
    let written = offline
        .ingest(&Ingest::new(
            "t-1",
            &op,
            "personal-chat",
            Content::conversation("Ada: I keep bees in Porto."),
        ))
        .await
        .unwrap();
    let request = gralkor::client::ExtractPending::new(&op).destinations(["personal"]);
    let err = offline.extract_pending(&request).await.unwrap_err();
    assert!(
        matches!(&err, gralkor::Error::Config { .. }) && err.to_string().contains("language model"),
        "{err}"
    );

    let r = Rules::narrator();
    let model = ScriptedModel::new().respond_with(move |req| answer(&r, req));
    let online = NativeClient::from_parts(
        Runtime::packaged(),
        NativeStorage::new(Engine::new(
            db,
            Arc::new(model.clone()),
            Arc::new(CountingEmbedder::new()),
        )),
    );
    let reports = online.extract_pending(&request).await.unwrap();
    assert_eq!(reports.len(), 1);
    assert_eq!(reports[0].destination, "personal");
    assert_eq!(reports[0].report.completed, [written[0].episode]);
    assert!(reports[0].report.failed.is_empty() && reports[0].report.busy.is_empty());
    assert!(!model.calls().is_empty(), "the episode was extracted");
    // Its facts now answer, with the Lens as their source's writer; nothing is pending.
    let facts = online
        .search(&Search::new(&op, "bees Porto").facts())
        .await
        .unwrap();
    assert!(!facts.is_empty());
    for r in &facts {
        let f = r.hit.as_fact().unwrap();
        assert_eq!(
            f.sources[0].writer,
            Some(Writer::Lens("personal-chat".into()))
        );
    }
    let again = online.extract_pending(&request).await.unwrap();
    assert!(again[0].report.completed.is_empty());
}

#[tokio::test]
async fn an_embedder_of_another_dimension_is_refused_before_any_write() {
    let dir = tempfile::Builder::new()
        .prefix("gralkor-dims-")
        .tempdir()
        .unwrap();
    let db = gralkor::falkordb::FalkorDb::connect(FalkorConfig::embedded(EmbeddedConfig::new(
        dir.path(),
    )))
    .await
    .unwrap();
    let r = Rules::narrator();
    let model = Arc::new(ScriptedModel::new().respond_with(move |req| answer(&r, req)));
    let with = |dimension| {
        Engine::new(
            db.clone(),
            model.clone(),
            Arc::new(gralkor::llm::doubles::HashEmbedder::new(dimension)),
        )
    };
    // Nothing stored yet: any dimension is fine.
    with(16).check_dimensions().await.unwrap();
    with(8)
        .add_episode(
            "dims",
            gralkor::graph::AddEpisode::new(
                "Ada: hello",
                gralkor::graph::SourceKind::Message,
                gralkor::graph::Timestamp::now(),
            ),
        )
        .await
        .unwrap();
    with(8).check_dimensions().await.unwrap();
    let err = with(16).check_dimensions().await.unwrap_err();
    assert!(
        matches!(&err, gralkor::Error::Config { field, .. } if field == "embedder dimension"),
        "{err}"
    );
    assert!(
        err.to_string()
            .contains("8 dimensions, this embedder gives 16"),
        "{err}"
    );
    db.shutdown().await.unwrap();
}

/// `memory_add` returns before it writes: a write that then fails for good is counted
/// in the status with its error, not only logged.
#[tokio::test]
async fn a_memory_add_that_fails_in_the_background_is_counted_in_the_status() {
    use gralkor::client::{Client, Content, MemoryAdd, OperatorId};
    // A handle of its own on the shared server, so closing it closes nothing else.
    let db =
        gralkor::falkordb::FalkorDb::attach(common::server(), std::time::Duration::from_secs(30))
            .await
            .unwrap();
    let client = NativeClient::from_parts(
        Runtime::new(RuntimeConfig::new()).unwrap(),
        NativeStorage::new(Engine::episodes_only(db.clone())),
    );
    let op = OperatorId::new(format!("bg-{}", uuid::Uuid::new_v4().simple())).unwrap();
    client
        .memory_add(&MemoryAdd::new(&op, Content::document("kept")))
        .await
        .unwrap();
    client.await_background_writes().await;
    let status = client.status().await;
    assert_eq!(status.background_failures.count, 0, "{status:?}");

    db.shutdown().await.unwrap();
    client
        .memory_add(&MemoryAdd::new(&op, Content::document("lost")))
        .await
        .expect("accepted: the write happens after the call returns");
    client.await_background_writes().await;
    let failures = client.status().await.background_failures;
    assert_eq!(failures.count, 1, "{failures:?}");
    let last = failures.last.unwrap();
    assert!(
        last.contains("closed") || last.contains("shut down"),
        "{last}"
    );
    common::db()
        .await
        .delete_graph(&format!("personal/{op}"))
        .await
        .unwrap();
}

/// customInstructions reach the engine's extraction prompt on the native client: a
/// Lens's own, a request's in their place (`Ingest`, `MemoryAdd`), and a captured
/// turn's through the buffer's configured default; an episode without any gets none.
#[tokio::test]
async fn custom_instructions_reach_the_engines_extraction_prompt() {
    use gralkor::agent::capture::{Capture, CaptureBuffer, CaptureConfig, InMemoryCaptureStore};
    use gralkor::agent::turn::Turn;
    use gralkor::client::MemoryAdd;
    use gralkor::graph::EXTRACTION_SCHEMA_NAME;
    use gralkor::lens::Lens;

    let r = Rules::narrator();
    let model = ScriptedModel::new().respond_with(move |req| answer(&r, req));
    let engine = Engine::new(
        common::db().await,
        Arc::new(model.clone()),
        Arc::new(CountingEmbedder::new()),
    );
    let dest = format!("notes-{}", &uuid::Uuid::new_v4().simple().to_string()[..8]);
    let client =
        NativeClient::from_parts(
            Runtime::new(RuntimeConfig::new().destination(dest.clone()).lens(
                Lens::appending("notes", dest.clone()).custom_instructions("Lens rules zqa"),
            ))
            .unwrap(),
            NativeStorage::new(engine),
        );
    let op = op();
    // The extraction prompt that saw `text`, by its system message.
    let prompt_for = |text: &str| -> String {
        model
            .calls_for(EXTRACTION_SCHEMA_NAME)
            .into_iter()
            .find(|c| c.messages.iter().any(|m| m.content.contains(text)))
            .unwrap_or_else(|| panic!("no extraction saw {text:?}"))
            .messages
            .iter()
            .map(|m| m.content.clone())
            .collect::<Vec<_>>()
            .join("\n")
    };
    client
        .ingest(&Ingest::new(
            "a",
            &op,
            "notes",
            Content::document("Ada keeps bees."),
        ))
        .await
        .unwrap();
    client
        .ingest(
            &Ingest::new("b", &op, "notes", Content::document("Bea keeps goats."))
                .custom_instructions("Request rules zqb"),
        )
        .await
        .unwrap();
    client
        .memory_add(
            &MemoryAdd::new(&op, Content::document("Cy keeps cats."))
                .to_destination(dest.clone())
                .custom_instructions("Direct rules zqc"),
        )
        .await
        .unwrap();
    client
        .memory_add(
            &MemoryAdd::new(&op, Content::document("Di keeps dogs.")).to_destination(dest.clone()),
        )
        .await
        .unwrap();
    client.await_background_writes().await;
    assert!(prompt_for("Ada keeps bees.").contains("Lens rules zqa"));
    let b = prompt_for("Bea keeps goats.");
    assert!(
        b.contains("Request rules zqb") && !b.contains("Lens rules zqa"),
        "{b}"
    );
    assert!(prompt_for("Cy keeps cats.").contains("Direct rules zqc"));
    assert!(!prompt_for("Di keeps dogs.").contains("Additional instructions from the caller"));

    let buffer = CaptureBuffer::new(
        Arc::new(client.clone()),
        Arc::new(InMemoryCaptureStore::new()),
        CaptureConfig::new().custom_instructions(CaptureConfig::OPENCLAW_CUSTOM_INSTRUCTIONS),
    )
    .await
    .unwrap();
    let turn = Turn::completed("Eve keeps eels.", Vec::<String>::new(), "Noted.");
    buffer
        .append(Capture::new("s-1", &op, "Susu", "Eve", turn).direct(dest.clone()))
        .await
        .unwrap();
    buffer.flush_all().await.unwrap();
    assert!(
        prompt_for("Eve keeps eels.").contains("- Routines: habits, schedules, recurring patterns")
    );
    client.shutdown().await.unwrap();
}
