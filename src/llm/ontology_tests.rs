use serde_json::json;

// The ontology (in `gralkor-core`) checked against the providers' schema rules.

use crate::Error;
use crate::llm::schema::{check_schema, is_strict_compatible, to_gemini, validate};
use crate::ontology::*;

fn team(entities: EntityMode, relationships: RelationshipMode) -> Ontology {
    Ontology::builder(entities, relationships)
        .entity(
            EntityType::new("Teammate")
                .description("A person the agent works with.")
                .field(
                    Field::string("handle")
                        .required()
                        .doc("stable login handle"),
                )
                .field(Field::string("timezone").doc("IANA tz"))
                .field(Field::integer("age"))
                .field(Field::float("score"))
                .field(Field::boolean("remote")),
        )
        .entity(EntityType::new("WorkingPreference").field(Field::string("statement").required()))
        .relationship(
            Relationship::new("Teammate", "prefers", "WorkingPreference")
                .field(Field::string("since").doc("date first observed")),
        )
        .relationship(Relationship::new("Teammate", "mentors", "Teammate"))
        .relationship(
            Relationship::new("WorkingPreference", "PREFERS", "WorkingPreference")
                .field(Field::string("since").doc("date first observed")),
        )
        .build()
        .expect("valid ontology")
}

/// Builds with one entity type and returns the error text.
fn entity_err(entity: EntityType) -> String {
    Ontology::builder(EntityMode::Open, RelationshipMode::Open)
        .entity(entity)
        .build()
        .unwrap_err()
        .to_string()
}

/// Builds `A` and `B` plus the given relationships and returns the error text.
fn rel_err(rels: Vec<Relationship>) -> String {
    let mut b = Ontology::builder(EntityMode::Open, RelationshipMode::Scoped)
        .entity(EntityType::new("A"))
        .entity(EntityType::new("B"));
    for r in rels {
        b = b.relationship(r);
    }
    b.build().unwrap_err().to_string()
}

const IDENT: &str =
    "must be an identifier: an ASCII letter or `_` followed by ASCII letters, digits or `_`";

// ---- building ----

#[test]
fn a_valid_ontology_keeps_declarations_in_order_and_merges_verbs() {
    let o = team(EntityMode::Strict, RelationshipMode::Scoped);
    assert_eq!(o.entity_mode(), EntityMode::Strict);
    assert_eq!(o.relationship_mode(), RelationshipMode::Scoped);
    let labels: Vec<&str> = o.entity_types().iter().map(EntityType::label).collect();
    assert_eq!(labels, ["Teammate", "WorkingPreference"]);
    assert_eq!(o.relationships().len(), 3);
    let types: Vec<&str> = o.relationship_types().iter().map(|t| t.name()).collect();
    assert_eq!(types, ["PREFERS", "MENTORS"]);
    let prefers = o.relationship_type("prefers").unwrap();
    assert_eq!(
        prefers.endpoints(),
        [
            ("Teammate".to_owned(), "WorkingPreference".to_owned()),
            (
                "WorkingPreference".to_owned(),
                "WorkingPreference".to_owned()
            )
        ]
    );
    assert_eq!(prefers.fields()[0].name(), "since");
}

#[test]
fn an_empty_ontology_is_valid_and_generic_is_open_open() {
    let o = Ontology::builder(EntityMode::Strict, RelationshipMode::Scoped)
        .build()
        .unwrap();
    assert!(o.entity_types().is_empty() && o.relationship_types().is_empty());
    let g = Ontology::generic();
    assert_eq!(g.entity_mode(), EntityMode::Open);
    assert_eq!(g.relationship_mode(), RelationshipMode::Open);
    assert!(g.keeps_entity("Entity"));
}

#[test]
fn reserved_labels_are_rejected_ignoring_case() {
    let rule = "is reserved: `Entity`, `Episodic`, `Community` are gralkor's own labels";
    for label in [
        "Entity",
        "Episodic",
        "Community",
        "ENTITY",
        "EpisoDic",
        "COMMUNITY",
    ] {
        assert_eq!(
            entity_err(EntityType::new(label)),
            format!("invalid input: `ontology.entities[{label}]` {rule}")
        );
    }
    // `Person` is not reserved.
    assert!(
        Ontology::builder(EntityMode::Open, RelationshipMode::Open)
            .entity(EntityType::new("Person"))
            .build()
            .is_ok()
    );
}

#[test]
fn labels_must_be_identifiers_starting_upper_case() {
    for label in ["", "Bad-Label", "9Lives", "Émile", "Two Words"] {
        assert_eq!(
            entity_err(EntityType::new(label)),
            format!("invalid input: `ontology.entities[{label}]` {IDENT}")
        );
    }
    for label in ["teammate", "_Private"] {
        assert_eq!(
            entity_err(EntityType::new(label)),
            format!(
                "invalid input: `ontology.entities[{label}]` must start with an upper-case \
                 ASCII letter, like `Teammate`"
            )
        );
    }
}

#[test]
fn duplicate_entity_types_are_rejected_ignoring_case() {
    let err = Ontology::builder(EntityMode::Open, RelationshipMode::Open)
        .entity(EntityType::new("Person"))
        .entity(EntityType::new("PERSON"))
        .build()
        .unwrap_err();
    assert_eq!(
        err.to_string(),
        "invalid input: `ontology.entities[PERSON]` is declared more than once \
         (names are compared ignoring case)"
    );
    assert!(
        matches!(err, Error::InvalidInput { ref field, .. } if field == "ontology.entities[PERSON]")
    );
}

#[test]
fn blank_descriptions_and_docs_are_rejected() {
    assert_eq!(
        entity_err(EntityType::new("Person").description("  ")),
        "invalid input: `ontology.entities[Person].description` must not be blank \
         (leave it out instead)"
    );
    assert_eq!(
        entity_err(EntityType::new("Person").field(Field::string("handle").doc(""))),
        "invalid input: `ontology.entities[Person].fields[handle].doc` must not be blank \
         (leave it out instead)"
    );
}

#[test]
fn reserved_entity_fields_are_rejected_ignoring_case() {
    for name in RESERVED_ENTITY_FIELDS
        .into_iter()
        .chain(["Name", "SUMMARY"])
    {
        assert_eq!(
            entity_err(EntityType::new("Person").field(Field::string(name))),
            format!(
                "invalid input: `ontology.entities[Person].fields[{name}]` is reserved: it is \
                 a property of an entity node (uuid, name, group_id, labels, created_at, \
                 summary, attributes, name_embedding); name the field for what it holds"
            )
        );
    }
}

#[test]
fn duplicate_and_non_identifier_fields_are_rejected() {
    assert_eq!(
        entity_err(
            EntityType::new("Person")
                .field(Field::string("handle"))
                .field(Field::integer("Handle"))
        ),
        "invalid input: `ontology.entities[Person].fields[Handle]` is declared more than once \
         (names are compared ignoring case)"
    );
    assert_eq!(
        entity_err(EntityType::new("Person").field(Field::string("time zone"))),
        format!("invalid input: `ontology.entities[Person].fields[time zone]` {IDENT}")
    );
}

#[test]
fn relationships_with_unknown_endpoints_are_rejected() {
    assert_eq!(
        rel_err(vec![Relationship::new("A", "likes", "C")]),
        "invalid input: `ontology.relationships[A-likes->C].to` names no declared entity \
         type (declared: A, B)"
    );
    assert_eq!(
        rel_err(vec![Relationship::new("Entity", "likes", "B")]),
        "invalid input: `ontology.relationships[Entity-likes->B].from` names no declared \
         entity type (declared: A, B)"
    );
    let err = Ontology::builder(EntityMode::Open, RelationshipMode::Open)
        .relationship(Relationship::new("X", "likes", "Y"))
        .build()
        .unwrap_err();
    assert_eq!(
        err.to_string(),
        "invalid input: `ontology.relationships[X-likes->Y].from` names no declared entity \
         type (declared: none)"
    );
}

#[test]
fn verbs_must_be_single_case_identifiers_and_not_reserved() {
    assert_eq!(
        rel_err(vec![Relationship::new("A", "works-at", "B")]),
        format!("invalid input: `ontology.relationships[A-works-at->B].verb` {IDENT}")
    );
    assert_eq!(
        rel_err(vec![Relationship::new("A", "worksAt", "B")]),
        "invalid input: `ontology.relationships[A-worksAt->B].verb` must be snake_case or \
         UPPER_SNAKE_CASE, like `works_at` or `WORKS_AT`"
    );
    for verb in ["relates_to", "MENTIONS", "has_member"] {
        assert_eq!(
            rel_err(vec![Relationship::new("A", verb, "B")]),
            format!(
                "invalid input: `ontology.relationships[A-{verb}->B].verb` is reserved: \
                 `RELATES_TO`, `MENTIONS`, `HAS_MEMBER` are gralkor's own relationship types"
            )
        );
    }
}

#[test]
fn duplicate_relationships_are_rejected_in_any_spelling() {
    assert_eq!(
        rel_err(vec![
            Relationship::new("A", "likes", "B"),
            Relationship::new("A", "LIKES", "B"),
        ]),
        "invalid input: `ontology.relationships[A-LIKES->B]` is declared more than once \
         (names are compared ignoring case)"
    );
}

#[test]
fn one_verb_has_one_set_of_fields() {
    assert_eq!(
        rel_err(vec![
            Relationship::new("A", "likes", "B").field(Field::string("since")),
            Relationship::new("B", "likes", "A").field(Field::integer("since")),
        ]),
        "invalid input: `ontology.relationships[B-likes->A].fields` must equal the fields of \
         the first `LIKES` declaration (`A-LIKES->B`): one relationship type has one set of fields"
    );
}

#[test]
fn relationship_fields_are_checked_like_entity_fields() {
    assert_eq!(
        rel_err(vec![
            Relationship::new("A", "likes", "B").field(Field::string("valid_at"))
        ]),
        "invalid input: `ontology.relationships[A-likes->B].fields[valid_at]` is reserved: it \
         is a property of a fact (uuid, name, group_id, fact, fact_embedding, episodes, \
         source_node_uuid, target_node_uuid, created_at, valid_at, invalid_at, expired_at, \
         attributes); name the field for what it holds"
    );
    assert_eq!(
        rel_err(vec![
            Relationship::new("A", "likes", "B")
                .field(Field::string("since"))
                .field(Field::string("since"))
        ]),
        "invalid input: `ontology.relationships[A-likes->B].fields[since]` is declared more \
         than once (names are compared ignoring case)"
    );
    // A relationship field may use a name reserved only for entities.
    assert!(
        Ontology::builder(EntityMode::Open, RelationshipMode::Open)
            .entity(EntityType::new("A"))
            .relationship(Relationship::new("A", "likes", "A").field(Field::string("summary")))
            .build()
            .is_ok()
    );
}

// ---- lookups ----

#[test]
fn entity_types_are_found_by_exact_label_and_by_prompt_id() {
    let o = team(EntityMode::Open, RelationshipMode::Open);
    assert_eq!(o.entity_type("Teammate").unwrap().fields().len(), 5);
    assert!(o.entity_type("teammate").is_none());
    assert!(o.entity_type("Entity").is_none());
    assert_eq!(o.label_for_id(0), Some("Entity"));
    assert_eq!(o.label_for_id(1), Some("Teammate"));
    assert_eq!(o.label_for_id(2), Some("WorkingPreference"));
    assert_eq!(o.label_for_id(3), None);
}

#[test]
fn strict_drops_generic_entities_and_open_keeps_them() {
    let strict = team(EntityMode::Strict, RelationshipMode::Open);
    let open = team(EntityMode::Open, RelationshipMode::Open);
    assert!(!strict.keeps_entity("Entity"));
    assert!(open.keeps_entity("Entity"));
    for o in [&strict, &open] {
        assert!(o.keeps_entity("Teammate"));
        assert!(!o.keeps_entity("Stranger"));
    }
}

#[test]
fn scoped_allows_declared_types_only_between_declared_endpoints() {
    let o = team(EntityMode::Open, RelationshipMode::Scoped);
    assert!(o.relationship_allowed("Teammate", "PREFERS", "WorkingPreference"));
    assert!(o.relationship_allowed("WorkingPreference", "prefers", "WorkingPreference"));
    assert!(o.relationship_allowed("Teammate", "mentors", "Teammate"));
    assert!(!o.relationship_allowed("WorkingPreference", "PREFERS", "Teammate"));
    assert!(!o.relationship_allowed("Entity", "MENTORS", "Teammate"));
    // Undeclared relations are generic facts, allowed anywhere.
    assert!(o.relationship_allowed("Entity", "WORKS_AT", "Entity"));
}

#[test]
fn open_allows_declared_types_between_any_entities() {
    let o = team(EntityMode::Open, RelationshipMode::Open);
    assert!(o.relationship_allowed("WorkingPreference", "PREFERS", "Teammate"));
    assert!(o.relationship_allowed("Entity", "MENTORS", "Entity"));
    assert!(o.relationship_type("Mentors").is_some());
    assert!(o.relationship_type("COACHES").is_none());
}

// ---- attributes ----

fn attr_err(o: &Ontology, label: &str, v: serde_json::Value) -> String {
    o.check_entity_attributes(label, &v)
        .unwrap_err()
        .to_string()
}

#[test]
fn attributes_with_the_right_types_pass() {
    let o = team(EntityMode::Open, RelationshipMode::Open);
    let full = json!({"handle": "ada", "timezone": "Europe/London", "age": 36, "score": 0.5, "remote": true});
    assert!(o.check_entity_attributes("Teammate", &full).is_ok());
    // Optional fields may be missing or null; whole floats count as integers, integers as floats.
    let sparse = json!({"handle": "ada", "timezone": null, "age": 36.0, "score": 2});
    assert!(o.check_entity_attributes("Teammate", &sparse).is_ok());
    assert!(o.check_entity_attributes("Entity", &json!({})).is_ok());
    assert!(
        o.check_relationship_attributes("prefers", &json!({"since": "2024"}))
            .is_ok()
    );
    assert!(
        o.check_relationship_attributes("WORKS_AT", &json!({}))
            .is_ok()
    );
}

#[test]
fn attribute_errors_name_the_attribute_and_the_rule() {
    let o = team(EntityMode::Open, RelationshipMode::Open);
    assert_eq!(
        attr_err(&o, "Teammate", json!({})),
        "invalid input: `attributes.handle` is required by `Teammate`"
    );
    assert_eq!(
        attr_err(&o, "Teammate", json!({"handle": null})),
        "invalid input: `attributes.handle` is required by `Teammate`"
    );
    let cases = [
        (json!({"handle": 1}), "handle", "a string", "a number"),
        (
            json!({"handle": "a", "age": 1.5}),
            "age",
            "an integer",
            "a number",
        ),
        (
            json!({"handle": "a", "score": "high"}),
            "score",
            "a float",
            "a string",
        ),
        (
            json!({"handle": "a", "remote": "yes"}),
            "remote",
            "a boolean",
            "a string",
        ),
    ];
    for (v, field, want, got) in cases {
        assert_eq!(
            attr_err(&o, "Teammate", v),
            format!("invalid input: `attributes.{field}` must be {want} for `Teammate`, got {got}")
        );
    }
    assert_eq!(
        attr_err(
            &o,
            "WorkingPreference",
            json!({"statement": "x", "mood": 1})
        ),
        "invalid input: `attributes.mood` is not a field of `WorkingPreference` \
         (its fields: statement)"
    );
    assert_eq!(
        attr_err(&o, "Entity", json!({"mood": 1})),
        "invalid input: `attributes.mood` is not a field of `Entity` (it has no fields)"
    );
    assert_eq!(
        attr_err(&o, "Teammate", json!([1])),
        "invalid input: `attributes` must be a JSON object for `Teammate`, got an array"
    );
    assert_eq!(
        attr_err(&o, "Stranger", json!({})),
        "invalid input: `label` `Stranger` is no entity type of this ontology"
    );
    assert_eq!(
        o.check_relationship_attributes("PREFERS", &json!({"since": 2024}))
            .unwrap_err()
            .to_string(),
        "invalid input: `attributes.since` must be a string for `PREFERS`, got a number"
    );
}

// ---- projections ----

#[test]
fn prompt_type_list_has_generic_entity_first_and_stable_ids() {
    let strict = team(EntityMode::Strict, RelationshipMode::Scoped);
    let types = strict.prompt_entity_types();
    assert_eq!(
        types,
        vec![
            PromptEntityType {
                id: 0,
                label: "Entity".into(),
                description: "An entity that none of the other types fits; such entities are \
                              not kept."
                    .into()
            },
            PromptEntityType {
                id: 1,
                label: "Teammate".into(),
                description: "A person the agent works with.".into()
            },
            PromptEntityType {
                id: 2,
                label: "WorkingPreference".into(),
                description: String::new()
            },
        ]
    );
    for (t, id) in types.iter().zip(0..) {
        assert_eq!(strict.label_for_id(id), Some(t.label.as_str()));
    }
    assert_eq!(types, strict.clone().prompt_entity_types());
}

#[test]
fn prompt_text_lists_entity_and_relationship_types() {
    let o = team(EntityMode::Strict, RelationshipMode::Scoped);
    assert_eq!(
        o.prompt_text(),
        "Entity types (answer with the id):\n\
         0. Entity: An entity that none of the other types fits; such entities are not kept.\n\
         1. Teammate: A person the agent works with.\n\
         2. WorkingPreference\n\
         \n\
         Relationship types (only between the endpoints listed):\n\
         PREFERS: Teammate -> WorkingPreference, WorkingPreference -> WorkingPreference\n\
         MENTORS: Teammate -> Teammate\n"
    );
    let open = team(EntityMode::Open, RelationshipMode::Open).prompt_text();
    assert!(open.contains("0. Entity: Any entity that none of the other types fits.\n"));
    assert!(open.contains("(usually between the endpoints listed)"));
    assert_eq!(
        Ontology::generic().prompt_text(),
        "Entity types (answer with the id):\n\
         0. Entity: Any entity that none of the other types fits.\n"
    );
}

#[test]
fn attribute_schemas_use_the_llm_subset_and_are_strict_compatible() {
    let o = team(EntityMode::Open, RelationshipMode::Scoped);
    let teammate = o.entity_type("Teammate").unwrap().attributes_schema();
    assert_eq!(
        teammate,
        json!({
            "type": "object",
            "description": "Attributes of a `Teammate`: A person the agent works with.",
            "properties": {
                "handle": {"type": "string", "description": "stable login handle"},
                "timezone": {"type": ["string", "null"], "description": "IANA tz"},
                "age": {"type": ["integer", "null"]},
                "score": {"type": ["number", "null"]},
                "remote": {"type": ["boolean", "null"]},
            },
            "required": ["handle", "timezone", "age", "score", "remote"],
            "additionalProperties": false,
        })
    );
    let mut schemas: Vec<serde_json::Value> = o
        .entity_types()
        .iter()
        .map(EntityType::attributes_schema)
        .collect();
    schemas.extend(
        o.relationship_types()
            .iter()
            .map(RelationshipType::attributes_schema),
    );
    assert_eq!(schemas.len(), 4);
    for s in &schemas {
        check_schema(s).unwrap();
        assert!(is_strict_compatible(s), "{s}");
        to_gemini(s).unwrap();
    }
    assert_eq!(
        o.relationship_type("MENTORS").unwrap().attributes_schema(),
        json!({
            "type": "object",
            "description": "Attributes of a `MENTORS` fact.",
            "properties": {},
            "required": [],
            "additionalProperties": false,
        })
    );
}

#[test]
fn what_the_schema_accepts_the_attribute_check_accepts() {
    let o = team(EntityMode::Open, RelationshipMode::Open);
    let t = o.entity_type("Teammate").unwrap();
    let schema = t.attributes_schema();
    let answer =
        json!({"handle": "ada", "timezone": null, "age": 36, "score": null, "remote": false});
    assert!(validate(&schema, &answer).is_empty());
    assert!(t.check_attributes(&answer).is_ok());
    let bad = json!({"handle": null, "timezone": null, "age": null, "score": null, "remote": null});
    assert!(!validate(&schema, &bad).is_empty());
    assert!(t.check_attributes(&bad).is_err());
}

// ---- values ----

#[test]
fn serde_round_trips_and_deserialising_checks_again() {
    let o = team(EntityMode::Strict, RelationshipMode::Scoped);
    let text = serde_json::to_string(&o).unwrap();
    let back: Ontology = serde_json::from_str(&text).unwrap();
    assert_eq!(back, o);
    assert_eq!(back.prompt_text(), o.prompt_text());
    let v = serde_json::to_value(&o).unwrap();
    assert_eq!(v["entities"], "strict");
    assert_eq!(v["relationships"], "scoped");
    assert_eq!(
        v["entity_types"][0]["fields"][0],
        json!({"name": "handle", "type": "string", "required": true, "doc": "stable login handle"})
    );
    assert_eq!(
        v["edges"][1],
        json!({"from": "Teammate", "verb": "mentors", "to": "Teammate"})
    );

    let bad = json!({"entities": "open", "relationships": "open",
                     "entity_types": [{"label": "A", "fields": [{"name": "uuid", "type": "string"}]}]});
    let err = serde_json::from_value::<Ontology>(bad)
        .unwrap_err()
        .to_string();
    assert!(
        err.starts_with("invalid input: `ontology.entities[A].fields[uuid]` is reserved"),
        "{err}"
    );
    // Both modes are required in the serde form too.
    let err = serde_json::from_value::<Ontology>(json!({"entities": "open"})).unwrap_err();
    assert!(
        err.to_string().contains("missing field `relationships`"),
        "{err}"
    );
}
