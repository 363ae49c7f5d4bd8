//! Reflection declarations: their shape only.
//!
//! A Reflection is a named synthesis process with an inline structured chain of
//! thought and exactly one Destination output. Running Reflections (inference,
//! delivery, retries, callbacks) comes later; today the
//! [runtime configuration](crate::runtime) validates their declarations so a snapshot
//! that holds one is already well formed:
//!
//! * the name is a valid writer name ([`check_writer_name`](crate::provenance::check_writer_name));
//! * the output names a registered Destination, with an optional ontology (default:
//!   the open generic one);
//! * there is at least one step; each step has a non-blank label and directions and at
//!   least one named, typed output;
//! * output names are identifiers, unique across all steps; object types have at least
//!   one field and unique keys;
//! * `{{name}}` in a step's directions names an output of an **earlier** step.
//!
//! The output type grammar (`string`, `boolean`, `integer`, `Array<T>`,
//! `{ k: T; … }`) is the [`OutputType`] enum, so a type is well formed by
//! construction.
//!
//! ```
//! use gralkor::reflection::{OutputType, Reflection, Step};
//!
//! let review = Reflection::new("release-review", "global")
//!     .step(Step::new("review", "Review the supplied release evidence.")
//!         .output("assessment", OutputType::String)
//!         .output("approved", OutputType::Boolean))
//!     .step(Step::new("summarise", "Summarise {{assessment}} in one line.")
//!         .output("summary", OutputType::array(OutputType::String)));
//! assert_eq!(review.steps().len(), 2);
//! assert_eq!(OutputType::array(OutputType::String).to_string(), "Array<string>");
//! ```

use std::collections::HashSet;
use std::fmt;

use crate::ontology::Ontology;
use crate::ontology::is_identifier;
use crate::{Error, Result};

/// Reflection names the package keeps for its own Reflections (`generalisations`,
/// `erl`), installed by a later release; consumers cannot claim them.
pub const PACKAGED_REFLECTIONS: [&str; 2] = ["generalisations", "erl"];

/// The type of one structured output.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum OutputType {
    /// A string.
    String,
    /// `true` or `false`.
    Boolean,
    /// A whole number.
    Integer,
    /// A list of values of one type.
    Array(Box<OutputType>),
    /// An object with exactly these fields.
    Object(Vec<(String, OutputType)>),
}

impl OutputType {
    /// `Array<item>`.
    pub fn array(item: OutputType) -> OutputType {
        OutputType::Array(Box::new(item))
    }

    /// `{ k: T; … }`.
    pub fn object<K: Into<String>>(
        fields: impl IntoIterator<Item = (K, OutputType)>,
    ) -> OutputType {
        OutputType::Object(fields.into_iter().map(|(k, t)| (k.into(), t)).collect())
    }

    fn validate(&self, field: &str) -> Result<()> {
        match self {
            OutputType::String | OutputType::Boolean | OutputType::Integer => Ok(()),
            OutputType::Array(item) => item.validate(&format!("{field}[]")),
            OutputType::Object(fields) => {
                if fields.is_empty() {
                    return Err(Error::config(
                        field,
                        "an object type needs at least one field",
                    ));
                }
                let mut seen = HashSet::new();
                for (k, t) in fields {
                    let f = format!("{field}.{k}");
                    if !is_identifier(k) {
                        return Err(Error::config(f, "must be an identifier"));
                    }
                    if !seen.insert(k.as_str()) {
                        return Err(Error::config(f, "is declared twice"));
                    }
                    t.validate(&f)?;
                }
                Ok(())
            }
        }
    }
}

impl fmt::Display for OutputType {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            OutputType::String => f.write_str("string"),
            OutputType::Boolean => f.write_str("boolean"),
            OutputType::Integer => f.write_str("integer"),
            OutputType::Array(t) => write!(f, "Array<{t}>"),
            OutputType::Object(fields) => {
                f.write_str("{ ")?;
                for (i, (k, t)) in fields.iter().enumerate() {
                    if i > 0 {
                        f.write_str("; ")?;
                    }
                    write!(f, "{k}: {t}")?;
                }
                f.write_str(" }")
            }
        }
    }
}

/// One step of a chain of thought.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Step {
    label: String,
    directions: String,
    outputs: Vec<(String, OutputType)>,
}

impl Step {
    /// A step with a label and natural-language directions; add outputs with
    /// [`Step::output`].
    pub fn new(label: impl Into<String>, directions: impl Into<String>) -> Step {
        Step {
            label: label.into(),
            directions: directions.into(),
            outputs: Vec::new(),
        }
    }

    /// Declares a named, typed output.
    pub fn output(mut self, name: impl Into<String>, ty: OutputType) -> Step {
        self.outputs.push((name.into(), ty));
        self
    }

    /// The label.
    pub fn label(&self) -> &str {
        &self.label
    }

    /// The directions.
    pub fn directions(&self) -> &str {
        &self.directions
    }

    /// The outputs, in declaration order.
    pub fn outputs(&self) -> &[(String, OutputType)] {
        &self.outputs
    }
}

/// A Reflection declaration.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Reflection {
    name: String,
    destination: String,
    ontology: Ontology,
    steps: Vec<Step>,
}

impl Reflection {
    /// A Reflection whose single output goes to `destination`, extracted with the
    /// open generic ontology.
    pub fn new(name: impl Into<String>, destination: impl Into<String>) -> Reflection {
        Reflection {
            name: name.into(),
            destination: destination.into(),
            ontology: Ontology::generic(),
            steps: Vec::new(),
        }
    }

    /// Extracts the output with `ontology`.
    pub fn ontology(mut self, ontology: Ontology) -> Reflection {
        self.ontology = ontology;
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

    /// The output Destination's name.
    pub fn destination(&self) -> &str {
        &self.destination
    }

    /// The output's ontology.
    pub fn output_ontology(&self) -> &Ontology {
        &self.ontology
    }

    /// The chain-of-thought steps, in order.
    pub fn steps(&self) -> &[Step] {
        &self.steps
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
        let mut earlier: HashSet<&str> = HashSet::new();
        for (i, step) in self.steps.iter().enumerate() {
            let sf = format!("{field}.steps[{i}]");
            if step.label.trim().is_empty() {
                return Err(Error::config(format!("{sf}.label"), "must not be blank"));
            }
            if step.directions.trim().is_empty() {
                return Err(Error::config(
                    format!("{sf}.directions"),
                    "must not be blank",
                ));
            }
            for name in interpolations(&step.directions) {
                if !earlier.contains(name) {
                    return Err(Error::config(
                        format!("{sf}.directions"),
                        format!(
                            "interpolates `{{{{{name}}}}}`, which is no output of an earlier step"
                        ),
                    ));
                }
            }
            if step.outputs.is_empty() {
                return Err(Error::config(
                    format!("{sf}.outputs"),
                    "must declare at least one output",
                ));
            }
            let mut this_step = Vec::new();
            for (name, ty) in &step.outputs {
                let of = format!("{sf}.outputs.{name}");
                if !is_identifier(name) {
                    return Err(Error::config(of, "must be an identifier"));
                }
                if earlier.contains(name.as_str()) || this_step.contains(&name.as_str()) {
                    return Err(Error::config(
                        of,
                        "is declared twice: output names are unique across steps",
                    ));
                }
                ty.validate(&of)?;
                this_step.push(name.as_str());
            }
            earlier.extend(this_step);
        }
        Ok(())
    }
}

/// The names inside `{{…}}` in `text`, trimmed.
fn interpolations(text: &str) -> Vec<&str> {
    let mut out = Vec::new();
    let mut rest = text;
    while let Some(start) = rest.find("{{") {
        let after = &rest[start + 2..];
        match after.find("}}") {
            Some(end) => {
                out.push(after[..end].trim());
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

    fn check(r: Reflection) -> Result<()> {
        r.validate_steps("reflections[r]")
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
                .step(Step::new("b", "Use {{ items }}.").output("ok", OutputType::Boolean)),
        )
        .unwrap();
    }

    #[test]
    fn chain_of_thought_errors_name_the_step_and_rule() {
        let err = |r| check(r).unwrap_err().to_string();
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
        let e = err(Reflection::new("r", "global")
            .step(Step::new("l", "d").output("x", OutputType::String))
            .step(Step::new("m", "d").output("x", OutputType::String)));
        assert!(e.contains("steps[1].outputs.x` is declared twice"), "{e}");
        let e = err(Reflection::new("r", "global")
            .step(Step::new("l", "Use {{later}}").output("x", OutputType::String))
            .step(Step::new("m", "d").output("later", OutputType::String)));
        assert!(e.contains("`{{later}}`"), "{e}");
        let e = err(Reflection::new("r", "global")
            .step(Step::new("l", "Use {{x}}").output("x", OutputType::String)));
        assert!(e.contains("no output of an earlier step"), "{e}");
        let e = err(Reflection::new("r", "global").step(
            Step::new("l", "d").output("x", OutputType::object(Vec::<(String, OutputType)>::new())),
        ));
        assert!(e.contains("at least one field"), "{e}");
        let e = err(Reflection::new("r", "global")
            .step(Step::new("l", "d").output("bad name", OutputType::String)));
        assert!(e.contains("must be an identifier"), "{e}");
    }

    #[test]
    fn output_types_print_in_the_grammar() {
        let t = OutputType::object([
            ("content", OutputType::String),
            ("evolves_from", OutputType::array(OutputType::Integer)),
        ]);
        assert_eq!(
            t.to_string(),
            "{ content: string; evolves_from: Array<integer> }"
        );
    }
}
