//! Reflections: consumer-invoked synthesis.
//!
//! A Reflection is a named synthesis process with an inline structured chain of
//! thought and exactly one Destination output. This room holds:
//!
//! * the declaration ([`Reflection`], [`Step`], [`ReflectionOutput`]) and its
//!   validation, which the [runtime configuration](crate::runtime) runs so a snapshot
//!   that holds a Reflection is well formed — also readable from JSON
//!   ([`Reflection::from_json`], where unknown fields are errors);
//! * the output type grammar ([`OutputType`], parsed once into a tree, turned into a
//!   strict JSON schema, checking answers exactly);
//! * the [`artefact_id`] derivation;
//! * the [`runner`]: one structured call per step through the
//!   [`LanguageModel`](crate::llm::LanguageModel) trait, a bounded tool loop, exact
//!   validation, one [`Artefact`](crate::storage::Artefact) at the end;
//! * [`delivery`]: the retry schedule, the terminal outcomes and the
//!   create-or-confirm write of an artefact to its Destination;
//! * the [`packaged`] Reflections `generalisations` and `erl`.
//!
//! Declaration rules (each error names the Reflection, the step or field, and the
//! rule, as an [`Error::Config`]):
//!
//! * exactly one Destination output: none, several, or another kind are three distinct
//!   errors; the output's ontology defaults to the open generic one;
//! * the name is a valid writer name, unique and not packaged (checked by the runtime
//!   configuration, with the Destination reference);
//! * at least one step; each step has a non-blank label and directions and a
//!   non-empty output contract of named, typed outputs;
//! * output names match `[A-Za-z_][A-Za-z0-9_-]*` and are unique across all steps (the
//!   error names the output and both steps);
//! * `{{ name }}` in a step's directions names an output of an **earlier** step (the
//!   error names the interpolation and the step); a `{{…}}` holding no output name is
//!   an error too.
//!
//! ```
//! use gralkor::reflection::{OutputType, Reflection, Step};
//!
//! let review = Reflection::new("release-review", "global")
//!     .step(Step::new("review", "Review the supplied release evidence.")
//!         .output("assessment", OutputType::String)
//!         .output("approved", OutputType::Boolean))
//!     .step(Step::new("summarise", "Summarise {{ assessment }} in one line.")
//!         .typed("summary", "Array<string>"));
//! assert_eq!(review.steps().len(), 2);
//! assert_eq!(review.steps()[1].outputs()[0].1.to_string(), "Array<string>");
//! ```

use std::collections::HashMap;

use serde_json::{Map, Value};

use crate::ontology::Ontology;
use crate::{Error, Result};

mod artefact;
pub mod delivery;
mod json;
pub mod packaged;
pub mod runner;
mod types;

pub use artefact::artefact_id;
internal_use!(artefact::artefact_uuid);
pub(crate) use types::is_output_name;
pub use types::{Mismatch, OutputType, TypeError};

/// Reflection names the package keeps for its own Reflections (`generalisations`,
/// `erl`); consumers cannot claim them.
pub(crate) const PACKAGED_REFLECTIONS: [&str; 2] = ["generalisations", "erl"];

/// Where a Reflection's artefact goes.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum ReflectionOutput {
    /// To a registered Destination, extracted with `ontology`.
    Destination {
        /// The Destination's name.
        destination: String,
        /// The ontology the artefact's episode is extracted with.
        ontology: Ontology,
    },
    /// An output kind this release does not support (read from a JSON declaration);
    /// always rejected by validation.
    Unsupported {
        /// The kind as declared.
        kind: String,
    },
}

impl ReflectionOutput {
    /// A Destination output with the open generic ontology.
    pub fn destination(destination: impl Into<String>) -> ReflectionOutput {
        ReflectionOutput::Destination {
            destination: destination.into(),
            ontology: Ontology::generic(),
        }
    }
}

/// One step of a chain of thought.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Step {
    label: String,
    directions: String,
    outputs: Vec<(String, OutputType)>,
    /// Type texts that did not parse, kept until validation names them.
    unparsed: Vec<(String, String, TypeError)>,
}

impl Step {
    /// A step with a label and natural-language directions; add outputs with
    /// [`Step::output`] or [`Step::typed`].
    pub fn new(label: impl Into<String>, directions: impl Into<String>) -> Step {
        Step {
            label: label.into(),
            directions: directions.into(),
            outputs: Vec::new(),
            unparsed: Vec::new(),
        }
    }

    /// Declares a named, typed output.
    pub fn output(mut self, name: impl Into<String>, ty: OutputType) -> Step {
        self.outputs.push((name.into(), ty));
        self
    }

    /// Declares a named output whose type is written in the grammar
    /// (`"Array<{ content: string; level: integer }>"`), parsed here, once; a type
    /// that does not parse is reported when the declaration is validated.
    pub fn typed(mut self, name: impl Into<String>, ty: &str) -> Step {
        let name = name.into();
        match OutputType::parse(ty) {
            Ok(t) => self.outputs.push((name, t)),
            Err(e) => self.unparsed.push((name, ty.to_string(), e)),
        }
        self
    }

    /// The label.
    pub fn label(&self) -> &str {
        &self.label
    }

    /// The directions, as declared (with `{{ name }}` interpolations).
    pub fn directions(&self) -> &str {
        &self.directions
    }

    /// The outputs, in declaration order.
    pub fn outputs(&self) -> &[(String, OutputType)] {
        &self.outputs
    }

    /// The strict JSON schema of this step's output contract: an object with exactly
    /// the declared outputs.
    pub fn output_schema(&self) -> Value {
        types::object_schema(&self.outputs)
    }

    /// The output contract in the grammar: `{ name: type; … }`.
    pub fn contract(&self) -> String {
        OutputType::Object(self.outputs.clone()).to_string()
    }

    /// Checks an answer exactly against the output contract.
    pub fn check_output(&self, answer: &Map<String, Value>) -> Result<(), Mismatch> {
        types::check_fields(&self.outputs, answer, "")
    }

    /// The names interpolated by the directions, in order of occurrence.
    pub fn interpolations(&self) -> Vec<String> {
        interpolations(&self.directions)
            .into_iter()
            .filter_map(|i| i.ok().map(str::to_string))
            .collect()
    }

    /// The directions with every `{{ name }}` replaced by that earlier output: a
    /// string as it is, anything else as JSON text.
    pub fn interpolated_directions(&self, earlier: &Map<String, Value>) -> String {
        let mut out = String::new();
        let mut rest = self.directions.as_str();
        while let Some(start) = rest.find("{{") {
            let after = &rest[start + 2..];
            let Some(end) = after.find("}}") else { break };
            let name = after[..end].trim();
            out.push_str(&rest[..start]);
            match earlier.get(name) {
                Some(Value::String(s)) => out.push_str(s),
                Some(v) => out.push_str(&v.to_string()),
                None => out.push_str(&rest[start..start + 2 + end + 2]),
            }
            rest = &after[end + 2..];
        }
        out.push_str(rest);
        out
    }
}

/// A Reflection declaration.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Reflection {
    name: String,
    outputs: Vec<ReflectionOutput>,
    steps: Vec<Step>,
}

impl Reflection {
    /// A Reflection whose single output goes to `destination`, extracted with the
    /// open generic ontology.
    pub fn new(name: impl Into<String>, destination: impl Into<String>) -> Reflection {
        Reflection::named(name).output(ReflectionOutput::destination(destination))
    }

    /// A Reflection with no output yet; add exactly one with [`Reflection::output`].
    pub fn named(name: impl Into<String>) -> Reflection {
        Reflection {
            name: name.into(),
            outputs: Vec::new(),
            steps: Vec::new(),
        }
    }

    /// Adds an output (a valid Reflection has exactly one, to a Destination).
    pub fn output(mut self, output: ReflectionOutput) -> Reflection {
        self.outputs.push(output);
        self
    }

    /// Extracts the output with `ontology` (sets the ontology of every Destination
    /// output).
    pub fn ontology(mut self, ontology: Ontology) -> Reflection {
        for o in &mut self.outputs {
            if let ReflectionOutput::Destination { ontology: slot, .. } = o {
                *slot = ontology.clone();
            }
        }
        self
    }

    /// Appends a step.
    pub fn step(mut self, step: Step) -> Reflection {
        self.steps.push(step);
        self
    }

    /// The name.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// The declared outputs.
    pub fn outputs(&self) -> &[ReflectionOutput] {
        &self.outputs
    }

    fn first_destination(&self) -> Option<(&str, &Ontology)> {
        self.outputs.iter().find_map(|o| match o {
            ReflectionOutput::Destination {
                destination,
                ontology,
            } => Some((destination.as_str(), ontology)),
            _ => None,
        })
    }

    /// The output Destination's name (empty when none is declared, which validation
    /// refuses).
    pub fn destination(&self) -> &str {
        self.first_destination().map_or("", |(d, _)| d)
    }

    /// The output's ontology.
    pub fn output_ontology(&self) -> &Ontology {
        static GENERIC: std::sync::OnceLock<Ontology> = std::sync::OnceLock::new();
        self.first_destination()
            .map(|(_, o)| o)
            .unwrap_or_else(|| GENERIC.get_or_init(Ontology::generic))
    }

    /// The chain-of-thought steps, in order.
    pub fn steps(&self) -> &[Step] {
        &self.steps
    }

    /// The last step (whose output becomes the artefact's payload).
    pub fn final_step(&self) -> Option<&Step> {
        self.steps.last()
    }

    /// Checks the outputs: exactly one, of the Destination kind. `field` prefixes
    /// error fields, e.g. `reflections[release-review]`.
    pub(crate) fn validate_outputs(&self, field: &str) -> Result<()> {
        let name = &self.name;
        let f = format!("{field}.outputs");
        if let Some(kind) = self.outputs.iter().find_map(|o| match o {
            ReflectionOutput::Unsupported { kind } => Some(kind),
            _ => None,
        }) {
            return Err(Error::config(
                f,
                format!(
                    "Reflection `{name}` declares an unsupported output kind `{kind}` (supported: destination)"
                ),
            ));
        }
        match self.outputs.len() {
            0 => Err(Error::config(
                f,
                format!(
                    "Reflection `{name}` declares no Destination output: exactly one is required"
                ),
            )),
            1 => Ok(()),
            n => Err(Error::config(
                f,
                format!(
                    "Reflection `{name}` declares {n} Destination outputs: exactly one is allowed"
                ),
            )),
        }
    }

    /// Checks the chain of thought (the name and Destination are checked by the
    /// runtime configuration). `field` prefixes error fields, e.g.
    /// `reflections[release-review]`.
    pub(crate) fn validate_steps(&self, field: &str) -> Result<()> {
        if self.steps.is_empty() {
            return Err(Error::config(
                format!("{field}.steps"),
                "must contain at least one step",
            ));
        }
        // Output name → the index and label of the step declaring it.
        let mut earlier: HashMap<&str, (usize, &str)> = HashMap::new();
        for (i, step) in self.steps.iter().enumerate() {
            let sf = format!("{field}.steps[{i}]");
            if step.label.trim().is_empty() {
                return Err(Error::config(format!("{sf}.label"), "must not be blank"));
            }
            let sf_named = format!("{sf} ({})", step.label);
            if step.directions.trim().is_empty() {
                return Err(Error::config(
                    format!("{sf}.directions"),
                    format!("of step `{}` must not be blank", step.label),
                ));
            }
            for found in interpolations(&step.directions) {
                match found {
                    Ok(name) if earlier.contains_key(name) => {}
                    Ok(name) => {
                        return Err(Error::config(
                            format!("{sf}.directions"),
                            format!(
                                "of step `{}` interpolates `{{{{{name}}}}}`, which is no output of an earlier step",
                                step.label
                            ),
                        ));
                    }
                    Err(raw) => {
                        return Err(Error::config(
                            format!("{sf}.directions"),
                            format!(
                                "of step `{}` has the interpolation `{raw}`, which names no output (names match [A-Za-z_][A-Za-z0-9_-]*)",
                                step.label
                            ),
                        ));
                    }
                }
            }
            if let Some((name, text, e)) = step.unparsed.first() {
                return Err(Error::config(
                    format!("{sf}.outputs.{name}"),
                    format!("has the type `{text}`: {e}"),
                ));
            }
            if step.outputs.is_empty() {
                return Err(Error::config(
                    format!("{sf}.outputs"),
                    format!("of step `{}` must declare at least one output", step.label),
                ));
            }
            let mut this_step: Vec<&str> = Vec::new();
            for (name, ty) in &step.outputs {
                let of = format!("{sf}.outputs.{name}");
                if name.trim().is_empty() {
                    return Err(Error::config(
                        format!("{sf}.outputs"),
                        "has an output with a blank name",
                    ));
                }
                if !is_output_name(name) {
                    return Err(Error::config(
                        of,
                        "must be an identifier ([A-Za-z_][A-Za-z0-9_-]*)",
                    ));
                }
                if let Some((j, label)) = earlier.get(name.as_str()) {
                    return Err(Error::config(
                        of,
                        format!(
                            "is declared twice: output `{name}` of {sf_named} is already an output of steps[{j}] ({label}); output names are unique across steps"
                        ),
                    ));
                }
                if this_step.contains(&name.as_str()) {
                    return Err(Error::config(
                        of,
                        format!(
                            "is declared twice: output `{name}` appears twice in {sf_named}; output names are unique across steps"
                        ),
                    ));
                }
                ty.validate(&of).map_err(|(f, r)| Error::config(f, r))?;
                this_step.push(name.as_str());
            }
            for name in this_step {
                earlier.insert(name, (i, step.label.as_str()));
            }
        }
        Ok(())
    }

    /// Validates outputs and steps together (what the runtime configuration runs,
    /// besides the name and the Destination reference).
    pub fn validate(&self, field: &str) -> Result<()> {
        self.validate_outputs(field)?;
        self.validate_steps(field)
    }
}

/// The `{{…}}` interpolations of `text` in order: `Ok(name)` for a well-formed one
/// (the name trimmed), `Err(raw)` for one holding no output name.
fn interpolations(text: &str) -> Vec<std::result::Result<&str, &str>> {
    let mut out = Vec::new();
    let mut rest = text;
    while let Some(start) = rest.find("{{") {
        let after = &rest[start + 2..];
        match after.find("}}") {
            Some(end) => {
                let name = after[..end].trim();
                if is_output_name(name) {
                    out.push(Ok(name));
                } else {
                    out.push(Err(&rest[start..start + 2 + end + 2]));
                }
                rest = &after[end + 2..];
            }
            None => break,
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn check(r: Reflection) -> Result<()> {
        r.validate("reflections[r]")
    }

    fn err(r: Reflection) -> String {
        check(r).unwrap_err().to_string()
    }

    #[test]
    fn a_well_formed_chain_of_thought_passes() {
        check(
            Reflection::new("r", "global")
                .step(Step::new("a", "Do it.").output(
                    "items",
                    OutputType::array(OutputType::object([
                        ("content", OutputType::String),
                        ("level", OutputType::Integer),
                    ])),
                ))
                .step(
                    Step::new("b", "Use {{ items }} and {{items}}.")
                        .output("ok", OutputType::Boolean)
                        .typed("kebab-name", "string"),
                )
                .step(Step::new("c", "Then {{ kebab-name }}.").typed("x", "integer")),
        )
        .unwrap();
    }

    #[test]
    fn exactly_one_destination_output_three_distinct_errors() {
        let step = || Step::new("l", "d").output("x", OutputType::String);
        let e = err(Reflection::named("r").step(step()));
        assert!(e.contains("reflections[r].outputs"), "{e}");
        assert!(
            e.contains("Reflection `r` declares no Destination output"),
            "{e}"
        );
        let e = err(Reflection::new("r", "global")
            .output(ReflectionOutput::destination("personal"))
            .step(step()));
        assert!(e.contains("declares 2 Destination outputs"), "{e}");
        let e = err(Reflection::new("r", "global")
            .output(ReflectionOutput::Unsupported {
                kind: "return".into(),
            })
            .step(step()));
        assert!(e.contains("unsupported output kind `return`"), "{e}");
    }

    #[test]
    fn the_output_ontology_defaults_to_the_generic_one() {
        let r = Reflection::new("r", "global");
        assert_eq!(r.output_ontology(), &Ontology::generic());
        assert_eq!(r.destination(), "global");
    }

    #[test]
    fn chain_of_thought_errors_name_the_step_and_rule() {
        assert!(err(Reflection::new("r", "global")).contains("reflections[r].steps"));
        let e = err(Reflection::new("r", "global")
            .step(Step::new(" ", "d").output("x", OutputType::String)));
        assert!(e.contains("steps[0].label"), "{e}");
        let e =
            err(Reflection::new("r", "global")
                .step(Step::new("l", "").output("x", OutputType::String)));
        assert!(e.contains("steps[0].directions"), "{e}");
        let e = err(Reflection::new("r", "global").step(Step::new("l", "d")));
        assert!(e.contains("steps[0].outputs"), "{e}");
        assert!(e.contains("at least one output"), "{e}");
        let e = err(Reflection::new("r", "global")
            .step(Step::new("l", "d").output("bad name", OutputType::String)));
        assert!(e.contains("must be an identifier"), "{e}");
        let e = err(Reflection::new("r", "global").step(
            Step::new("l", "d").output("x", OutputType::object(Vec::<(String, OutputType)>::new())),
        ));
        assert!(e.contains("at least one field"), "{e}");
    }

    #[test]
    fn a_duplicate_output_names_the_output_and_both_steps() {
        let e = err(Reflection::new("r", "global")
            .step(Step::new("first", "d").output("x", OutputType::String))
            .step(Step::new("second", "d").output("x", OutputType::String)));
        assert!(
            e.contains("`reflections[r].steps[1].outputs.x` is declared twice"),
            "{e}"
        );
        assert!(e.contains("steps[1] (second)"), "{e}");
        assert!(e.contains("steps[0] (first)"), "{e}");
        let e = err(Reflection::new("r", "global").step(
            Step::new("only", "d")
                .output("x", OutputType::String)
                .output("x", OutputType::Integer),
        ));
        assert!(
            e.contains("appears twice in reflections[r].steps[0] (only)"),
            "{e}"
        );
    }

    #[test]
    fn interpolation_of_later_same_step_or_malformed_names_is_an_error() {
        let e = err(Reflection::new("r", "global")
            .step(Step::new("l", "Use {{later}}").output("x", OutputType::String))
            .step(Step::new("m", "d").output("later", OutputType::String)));
        assert!(e.contains("steps[0].directions"), "{e}");
        assert!(e.contains("step `l` interpolates `{{later}}`"), "{e}");
        let e = err(Reflection::new("r", "global")
            .step(Step::new("l", "Use {{ x }}").output("x", OutputType::String)));
        assert!(e.contains("no output of an earlier step"), "{e}");
        let e = err(Reflection::new("r", "global")
            .step(Step::new("l", "d").output("x", OutputType::String))
            .step(Step::new("m", "Use {{ 1x }}").output("y", OutputType::String)));
        assert!(e.contains("steps[1].directions"), "{e}");
        assert!(e.contains("`{{ 1x }}`, which names no output"), "{e}");
    }

    #[test]
    fn an_unparsable_type_names_the_output_and_the_innermost_type() {
        let e = err(Reflection::new("r", "global")
            .step(Step::new("l", "d").typed("xs", "Array<{ at: date }>")));
        assert!(e.contains("`reflections[r].steps[0].outputs.xs`"), "{e}");
        assert!(e.contains("unsupported type `date`"), "{e}");
    }

    #[test]
    fn interpolations_come_in_order_and_are_filled_in() {
        let s = Step::new("s", "A {{ a }} then {{b}} and {{ a }}.").output("c", OutputType::String);
        assert_eq!(s.interpolations(), ["a", "b", "a"]);
        let earlier = json!({"a": "alpha", "b": {"k": 1}});
        assert_eq!(
            s.interpolated_directions(earlier.as_object().unwrap()),
            r#"A alpha then {"k":1} and alpha."#
        );
    }

    #[test]
    fn a_step_contract_is_an_exact_object() {
        let s = Step::new("s", "d")
            .output("assessment", OutputType::String)
            .output("approved", OutputType::Boolean);
        assert_eq!(s.contract(), "{ assessment: string; approved: boolean }");
        let m = s
            .check_output(json!({"assessment": "ok"}).as_object().unwrap())
            .unwrap_err();
        assert_eq!(
            (m.key.as_str(), m.problem.as_str()),
            ("approved", "is missing")
        );
        crate::llm::schema::check_schema(&s.output_schema()).unwrap();
    }
}
