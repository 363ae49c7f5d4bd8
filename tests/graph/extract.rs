//! Extraction of entities and facts in one structured call, against the scripted
//! test double (no database, no network).

use gralkor::Error;
use gralkor::graph::{
    EXTRACTION_SCHEMA_NAME, ExtractedEntity, ExtractionInput, SourceKind, Timestamp, extract,
    extraction_schema,
};
use gralkor::llm::doubles::ScriptedModel;
use gralkor::llm::{ModelSize, Role, schema};
use gralkor::ontology::{EntityMode, EntityType, Ontology, Relationship, RelationshipMode};
use serde_json::{Value, json};

fn reference() -> Timestamp {
    "2024-05-01T12:00:00Z".parse().unwrap()
}

fn typed(mode: EntityMode) -> Ontology {
    Ontology::builder(mode, RelationshipMode::Scoped)
        .entity(EntityType::new("Person").description("A human being."))
        .entity(EntityType::new("Company").description("A business."))
        .relationship(Relationship::new("Person", "works_at", "Company"))
        .build()
        .unwrap()
}

fn fact(source: &str, target: &str, relation: &str, text: &str) -> Value {
    json!({"source": source, "target": target, "relation_type": relation, "fact": text,
           "valid_at": null, "invalid_at": null})
}

fn answer(entities: Value, facts: Vec<Value>) -> Value {
    json!({"entities": entities, "facts": facts})
}

fn entity(name: &str, label: &str) -> ExtractedEntity {
    ExtractedEntity {
        name: name.into(),
        label: label.into(),
    }
}

async fn run(
    answer: Value,
    input: &ExtractionInput<'_>,
) -> (gralkor::graph::Extraction, ScriptedModel) {
    let model = ScriptedModel::new().answer(EXTRACTION_SCHEMA_NAME, answer);
    let out = extract(&model, input).await.unwrap();
    (out, model)
}

#[test]
fn the_schema_is_in_the_supported_subset_and_strict_compatible() {
    let s = extraction_schema();
    assert_eq!(s.name, "extraction");
    s.check().unwrap();
    schema::check_schema(&s.schema).unwrap();
    assert!(schema::is_strict_compatible(&s.schema));
    let valid = answer(
        json!([{"name": "A", "type_id": 0}]),
        vec![fact("A", "A", "X", "f")],
    );
    assert!(schema::validate(&s.schema, &valid).is_empty());
    let missing_time = json!({"entities": [], "facts": [{"source": "A", "target": "B",
        "relation_type": "X", "fact": "f", "valid_at": null}]});
    assert!(!schema::validate(&s.schema, &missing_time).is_empty());
}

#[tokio::test]
async fn one_model_call_whatever_the_number_of_facts() {
    let ontology = Ontology::generic();
    let input = ExtractionInput::new(
        "Alice: lots of news",
        SourceKind::Message,
        reference(),
        &ontology,
    );
    for n in [1usize, 10, 40] {
        let names: Vec<String> = (0..=n).map(|i| format!("Thing {i}")).collect();
        let entities: Vec<Value> = names
            .iter()
            .map(|n| json!({"name": n, "type_id": 0}))
            .collect();
        let facts = (1..=n)
            .map(|i| {
                fact(
                    &names[0],
                    &names[i],
                    "LINKS",
                    &format!("Thing 0 links Thing {i}."),
                )
            })
            .collect();
        let (out, model) = run(answer(json!(entities), facts), &input).await;
        assert_eq!(out.facts.len(), n);
        assert_eq!(out.entities.len(), n + 1);
        assert_eq!(model.calls().len(), 1, "{n} facts");
        assert!(out.usage.total() > 0);
    }
}

#[tokio::test]
async fn the_request_carries_schema_types_reference_time_context_and_instructions() {
    let ontology = typed(EntityMode::Open);
    let previous = vec!["Bob: I met Alice at Acme.".to_string()];
    let excluded = vec!["Company".to_string()];
    let input = ExtractionInput {
        source_description: "team chat",
        previous_episodes: &previous,
        excluded_types: &excluded,
        instructions: Some("Prefer full names."),
        label: "ingest/team",
        ..ExtractionInput::new(
            "Alice: I joined Acme.",
            SourceKind::Message,
            reference(),
            &ontology,
        )
    };
    let (_, model) = run(answer(json!([]), vec![]), &input).await;
    let calls = model.calls_for(EXTRACTION_SCHEMA_NAME);
    assert_eq!(calls.len(), 1);
    let req = &calls[0];
    assert_eq!(req.schema, extraction_schema());
    assert_eq!(req.size, ModelSize::Default);
    assert_eq!(req.label, "ingest/team");
    assert_eq!(req.messages.len(), 2);
    assert_eq!(req.messages[0].role, Role::System);
    let system = &req.messages[0].content;
    assert!(system.contains(&ontology.prompt_text()), "{system}");
    assert!(system.contains("0. Entity"));
    assert!(system.contains("1. Person: A human being."));
    assert!(system.contains("WORKS_AT: Person -> Company"));
    assert!(system.contains("Do not extract entities of these types at all: Company."));
    assert!(system.trim_end().ends_with("Prefer full names."));
    assert!(system.contains("speaker"));
    let user = &req.messages[1].content;
    assert_eq!(req.messages[1].role, Role::User);
    assert!(
        user.contains("<REFERENCE_TIME>\n2024-05-01T12:00:00.000000Z\n</REFERENCE_TIME>"),
        "{user}"
    );
    assert!(
        user.contains("<PREVIOUS_EPISODES>\n[1] Bob: I met Alice at Acme.\n</PREVIOUS_EPISODES>")
    );
    assert!(user.contains("<SOURCE>\nmessage (team chat)\n</SOURCE>"));
    assert!(user.contains("<CURRENT_EPISODE>\nAlice: I joined Acme.\n</CURRENT_EPISODE>"));
    assert!(user.find("PREVIOUS_EPISODES").unwrap() < user.find("CURRENT_EPISODE").unwrap());
}

#[tokio::test]
async fn the_prompt_states_the_extraction_rules() {
    let ontology = Ontology::generic();
    let input = ExtractionInput::new("some text", SourceKind::Text, reference(), &ontology);
    let (_, model) = run(answer(json!([]), vec![]), &input).await;
    let system = model.calls()[0].messages[0].content.to_lowercase();
    for rule in [
        "pronoun",
        "abstractions",
        "date",
        "alice's mother",
        "type_id",
        "upper_snake_case",
        "rfc 3339",
        "reference time",
        "bob said",
        "maybe",
        "deadlines do not end anything",
        "context only",
    ] {
        assert!(system.contains(rule), "missing {rule:?}");
    }
    assert!(!system.contains("additional instructions"));
    assert!(
        !model.calls()[0].messages[1]
            .content
            .contains("PREVIOUS_EPISODES")
    );
}

#[tokio::test]
async fn names_are_trimmed_and_empty_names_dropped() {
    let ontology = Ontology::generic();
    let input = ExtractionInput::new("x", SourceKind::Text, reference(), &ontology);
    let entities = json!([{"name": "  Alice ", "type_id": 0}, {"name": "   ", "type_id": 0},
                          {"name": "", "type_id": 0}]);
    let (out, _) = run(answer(entities, vec![]), &input).await;
    assert_eq!(out.entities, vec![entity("Alice", "Entity")]);
}

#[tokio::test]
async fn type_ids_map_to_labels_and_unknown_ids_to_entity() {
    let ontology = typed(EntityMode::Open);
    let input = ExtractionInput::new("x", SourceKind::Text, reference(), &ontology);
    let entities = json!([{"name": "Alice", "type_id": 1}, {"name": "Acme", "type_id": 2},
                          {"name": "Paris", "type_id": 0}, {"name": "Blue", "type_id": 7},
                          {"name": "Minus", "type_id": -1}]);
    let (out, _) = run(answer(entities, vec![]), &input).await;
    assert_eq!(
        out.entities,
        vec![
            entity("Alice", "Person"),
            entity("Acme", "Company"),
            entity("Paris", "Entity"),
            entity("Blue", "Entity"),
            entity("Minus", "Entity"),
        ]
    );
}

#[tokio::test]
async fn strict_mode_drops_generic_entities_and_their_facts() {
    let ontology = typed(EntityMode::Strict);
    let input = ExtractionInput::new("x", SourceKind::Text, reference(), &ontology);
    let entities = json!([{"name": "Alice", "type_id": 1}, {"name": "Paris", "type_id": 0},
                          {"name": "Acme", "type_id": 9}]);
    let facts = vec![fact("Alice", "Paris", "LIVES_IN", "Alice lives in Paris.")];
    let (out, _) = run(answer(entities, facts), &input).await;
    assert_eq!(out.entities, vec![entity("Alice", "Person")]);
    assert!(out.facts.is_empty());
}

#[tokio::test]
async fn excluded_types_are_dropped_ignoring_case() {
    let ontology = typed(EntityMode::Open);
    let excluded = vec!["company".to_string(), "Entity".to_string()];
    let input = ExtractionInput {
        excluded_types: &excluded,
        ..ExtractionInput::new("x", SourceKind::Text, reference(), &ontology)
    };
    let entities = json!([{"name": "Alice", "type_id": 1}, {"name": "Acme", "type_id": 2},
                          {"name": "Paris", "type_id": 0}]);
    let (out, _) = run(answer(entities, vec![]), &input).await;
    assert_eq!(out.entities, vec![entity("Alice", "Person")]);
}

#[tokio::test]
async fn duplicate_names_merge_keeping_the_most_specific_label() {
    let ontology = typed(EntityMode::Open);
    let input = ExtractionInput::new("x", SourceKind::Text, reference(), &ontology);
    let entities = json!([
        {"name": "alice  chen", "type_id": 0},
        {"name": "Alice Chen", "type_id": 1},
        {"name": "ALICE CHEN", "type_id": 0},
        {"name": "Acme", "type_id": 2},
        {"name": "acme", "type_id": 1},
    ]);
    let (out, _) = run(answer(entities, vec![]), &input).await;
    assert_eq!(
        out.entities,
        vec![entity("alice  chen", "Person"), entity("Acme", "Company")]
    );
}

#[tokio::test]
async fn facts_need_both_endpoints_and_take_the_entity_spelling() {
    let ontology = Ontology::generic();
    let input = ExtractionInput::new("x", SourceKind::Text, reference(), &ontology);
    let entities = json!([{"name": "Alice", "type_id": 0}, {"name": "Acme Corp", "type_id": 0}]);
    let facts = vec![
        fact(
            " alice ",
            "acme   corp",
            "WORKS_AT",
            " Alice works at Acme Corp. ",
        ),
        fact("Alice", "Bob", "KNOWS", "Alice knows Bob."),
        fact(
            "Carol",
            "Acme Corp",
            "WORKS_AT",
            "Carol works at Acme Corp.",
        ),
        fact("Alice", "Acme Corp", "LIKES", "   "),
    ];
    let (out, _) = run(answer(entities, facts), &input).await;
    assert_eq!(out.facts.len(), 1);
    let f = &out.facts[0];
    assert_eq!(
        (f.source.as_str(), f.target.as_str()),
        ("Alice", "Acme Corp")
    );
    assert_eq!(f.fact, "Alice works at Acme Corp.");
}

#[tokio::test]
async fn relation_types_are_normalised_or_become_relates_to() {
    let ontology = Ontology::generic();
    let input = ExtractionInput::new("x", SourceKind::Text, reference(), &ontology);
    let entities = json!([{"name": "A", "type_id": 0}, {"name": "B", "type_id": 0}]);
    let raws = [
        "works at",
        "worksAt",
        "LIVES-IN",
        "",
        "42",
        "Mentions",
        "has_member",
        "über",
    ];
    let facts = raws.iter().map(|r| fact("A", "B", r, "A and B.")).collect();
    let (out, _) = run(answer(entities, facts), &input).await;
    let got: Vec<&str> = out.facts.iter().map(|f| f.relation_type.as_str()).collect();
    assert_eq!(
        got,
        [
            "WORKS_AT",
            "WORKS_AT",
            "LIVES_IN",
            "RELATES_TO",
            "RELATES_TO",
            "RELATES_TO",
            "RELATES_TO",
            "RELATES_TO"
        ]
    );
}

#[tokio::test]
async fn times_parse_as_rfc3339_and_unparseable_times_are_none() {
    let ontology = Ontology::generic();
    let input = ExtractionInput::new("x", SourceKind::Text, reference(), &ontology);
    let entities = json!([{"name": "A", "type_id": 0}, {"name": "B", "type_id": 0}]);
    let mut dated = fact("A", "B", "R", "A left B.");
    dated["valid_at"] = json!("2020-01-01T00:00:00+02:00");
    dated["invalid_at"] = json!(" 2024-04-30T00:00:00Z ");
    let mut bad = fact("A", "B", "R", "A maybe joins B.");
    bad["valid_at"] = json!("last Tuesday");
    bad["invalid_at"] = json!("2024-13-01T00:00:00Z");
    let (out, _) = run(answer(entities, vec![dated, bad]), &input).await;
    assert_eq!(
        out.facts[0].valid_at,
        Some("2019-12-31T22:00:00Z".parse().unwrap())
    );
    assert_eq!(
        out.facts[0].invalid_at,
        Some("2024-04-30T00:00:00Z".parse().unwrap())
    );
    assert_eq!(
        (out.facts[1].valid_at, out.facts[1].invalid_at),
        (None, None)
    );
    assert_eq!(out.facts[1].fact, "A maybe joins B.");
}

#[tokio::test]
async fn an_answer_that_violates_the_schema_is_a_model_output_error() {
    let ontology = Ontology::generic();
    let input = ExtractionInput::new("x", SourceKind::Json, reference(), &ontology);
    let model = ScriptedModel::new().answer(
        EXTRACTION_SCHEMA_NAME,
        json!({"entities": [{"name": "A"}], "facts": []}),
    );
    let err = extract(&model, &input).await.unwrap_err();
    assert!(matches!(err, Error::ModelOutput { .. }), "{err}");
    assert!(err.to_string().contains("type_id"), "{err}");
    assert_eq!(model.calls().len(), 1);
    let failing = ScriptedModel::new();
    assert!(matches!(
        extract(&failing, &input).await.unwrap_err(),
        Error::ModelOutput { .. }
    ));
}
