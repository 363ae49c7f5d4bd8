//! The packaged Reflections, always installed and never replaceable:
//!
//! * `GENERALISATIONS` — output `global`, the open generic ontology. Before
//!   inference the client makes one episode search across every accessible
//!   Destination, its query built from the representations, and shows related
//!   Lens-authored observations and prior generalisation artefacts apart from the
//!   representations. Two steps: `inspect-world` (output `inspection`) and
//!   `evolve-generalisations` (output `generalisations:
//!   Array<{ content: string; level: integer; evolves_from: Array<{ content: string; level: integer }> }>`).
//!   The lineage rule — no lineage: level 1; evolved: one above the highest level in
//!   `evolves_from` — is stated in the prompt and checked only by the contract.
//! * `ERL` (experiential learning) — output `personal`, the `erl_ontology` (an
//!   open ontology with one `Learning` entity whose fields are all optional). Three
//!   steps ending in exactly `problem_kind`, `approach`, `success`, `lesson`.
//!
//! The prompts are gralkor's own.

use super::{Reflection, Step};
use crate::ontology::{EntityMode, EntityType, Field, Ontology, RelationshipMode};

/// The packaged generalisation Reflection's name.
pub(crate) const GENERALISATIONS: &str = "generalisations";
/// The packaged experiential-learning Reflection's name.
pub(crate) const ERL: &str = "erl";

/// The ontology `erl` extracts its artefacts with: open entities and relationships
/// plus one `Learning` entity with optional `problem_kind`, `approach`, `success` and
/// `lesson` fields.
pub(crate) fn erl_ontology() -> Ontology {
    Ontology::builder(EntityMode::Open, RelationshipMode::Open)
        .entity(
            EntityType::new("Learning")
                .description(
                    "A lesson the agent learned from its own attempt at a problem. Extract one \
                     Learning from a record of the kind of problem, the approach taken, whether \
                     it worked and the lesson worth reusing.",
                )
                .field(Field::string("problem_kind").doc("the kind of problem attempted"))
                .field(Field::string("approach").doc("how the agent went about it"))
                .field(Field::boolean("success").doc("whether the approach worked"))
                .field(Field::string("lesson").doc("the reusable lesson")),
        )
        .build()
        .expect("the packaged ERL ontology is valid")
}

/// The packaged `generalisations` Reflection.
pub fn generalisations() -> Reflection {
    Reflection::new(GENERALISATIONS, "global")
        .step(
            Step::new(
                "inspect-world",
                "Read the current representations and the related observations written by \
                 Lenses as evidence about the world, and the prior generalisations as what has \
                 been concluded before. Describe how the evidence reinforces, qualifies, \
                 contradicts or links the prior generalisations, and where the evidence calls \
                 for a generalisation that does not exist yet. Quote the evidence you rely on.",
            )
            .typed("inspection", "string"),
        )
        .step(
            Step::new(
                "evolve-generalisations",
                "From this inspection:\n{{ inspection }}\n\nWrite the generalisations that \
                 should hold now. Carry a prior generalisation forward unchanged, merge \
                 several, widen or narrow one, split one, or replace it, as the evidence \
                 requires, and add new ones where needed. Each generalisation is one \
                 self-contained statement. Lineage rule: a generalisation with no lineage has \
                 level 1 and an empty `evolves_from`; a generalisation evolved from priors lists \
                 each prior it came from (its content and level) in `evolves_from` and has a \
                 level one above the highest level listed there.",
            )
            .typed(
                "generalisations",
                "Array<{ content: string; level: integer; evolves_from: Array<{ content: string; level: integer }> }>",
            ),
        )
}

/// The packaged `erl` Reflection.
pub fn erl() -> Reflection {
    Reflection::new(ERL, "personal")
        .ontology(erl_ontology())
        .step(
            Step::new(
                "inspect-reasoning",
                "Examine how the agent worked on the problem in the representations: what kind \
                 of problem it was, the approach the agent took and how it turned out. Use the \
                 tools if you need more of the record.",
            )
            .typed(
                "reasoning_assessment",
                "{ problem_kind: string; approach: string; outcome: string }",
            ),
        )
        .step(
            Step::new(
                "derive-lesson",
                "Given this assessment of the agent's reasoning:\n{{ reasoning_assessment }}\n\n\
                 Decide whether the approach succeeded and state the one lesson worth reusing on \
                 problems of the same kind.",
            )
            .typed(
                "learning_candidate",
                "{ problem_kind: string; approach: string; success: boolean; lesson: string }",
            ),
        )
        .step(
            Step::new(
                "synthesise-artefact",
                "Turn this candidate into the final learning, each field a plain sentence that \
                 stands on its own:\n{{ learning_candidate }}",
            )
            .typed("problem_kind", "string")
            .typed("approach", "string")
            .typed("success", "boolean")
            .typed("lesson", "string"),
        )
}

/// Every packaged Reflection, `generalisations` first.
pub fn all() -> Vec<Reflection> {
    vec![generalisations(), erl()]
}

/// The packaged Reflection `name`, if it is one.
pub(crate) fn find(name: &str) -> Option<Reflection> {
    match name {
        GENERALISATIONS => Some(generalisations()),
        ERL => Some(erl()),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::reflection::PACKAGED_REFLECTIONS;

    #[test]
    fn the_packaged_reflections_are_valid_and_named_as_reserved() {
        for r in all() {
            r.validate(&format!("reflections[{}]", r.name())).unwrap();
        }
        let names: Vec<String> = all().iter().map(|r| r.name().to_string()).collect();
        assert_eq!(names, PACKAGED_REFLECTIONS);
        assert!(find("release-review").is_none());
    }

    #[test]
    fn generalisations_outputs_global_with_two_steps_and_the_lineage_contract() {
        let g = generalisations();
        assert_eq!(g.destination(), "global");
        assert_eq!(g.output_ontology(), &Ontology::generic());
        let labels: Vec<&str> = g.steps().iter().map(Step::label).collect();
        assert_eq!(labels, ["inspect-world", "evolve-generalisations"]);
        assert_eq!(g.steps()[1].interpolations(), ["inspection"]);
        assert_eq!(
            g.steps()[1].contract(),
            "{ generalisations: Array<{ content: string; level: integer; evolves_from: Array<{ content: string; level: integer }> }> }"
        );
        assert!(g.steps()[1].directions().contains("level 1"));
    }

    #[test]
    fn erl_outputs_personal_with_the_learning_ontology_and_four_final_keys() {
        let e = erl();
        assert_eq!(e.destination(), "personal");
        let learning = e.output_ontology().entity_type("Learning").unwrap();
        assert!(learning.fields().iter().all(|f| !f.is_required()));
        let names: Vec<&str> = learning.fields().iter().map(|f| f.name()).collect();
        assert_eq!(names, ["problem_kind", "approach", "success", "lesson"]);
        let last: Vec<&str> = e
            .final_step()
            .unwrap()
            .outputs()
            .iter()
            .map(|(n, _)| n.as_str())
            .collect();
        assert_eq!(last, ["problem_kind", "approach", "success", "lesson"]);
        assert_eq!(e.steps().len(), 3);
    }
}
