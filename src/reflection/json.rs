//! Reading a Reflection declaration from JSON, where unknown fields are errors.

use serde_json::{Map, Value};

use super::{Reflection, ReflectionOutput, Step};
use crate::{Error, Result};

const REFLECTION_FIELDS: [&str; 3] = ["name", "outputs", "chain_of_thought"];
const OUTPUT_FIELDS: [&str; 2] = ["kind", "destination"];
const COT_FIELDS: [&str; 1] = ["steps"];
const STEP_FIELDS: [&str; 3] = ["label", "directions", "output"];

fn object<'a>(field: &str, v: &'a Value) -> Result<&'a Map<String, Value>> {
    v.as_object()
        .ok_or_else(|| Error::config(field, "must be a JSON object"))
}

fn known(field: &str, map: &Map<String, Value>, allowed: &[&str]) -> Result<()> {
    match map.keys().find(|k| !allowed.contains(&k.as_str())) {
        Some(k) => Err(Error::config(
            format!("{field}.{k}"),
            format!("is not a known field (known: {})", allowed.join(", ")),
        )),
        None => Ok(()),
    }
}

fn text(field: &str, map: &Map<String, Value>, key: &str) -> Result<String> {
    match map.get(key) {
        None => Err(Error::config(format!("{field}.{key}"), "is required")),
        Some(Value::String(s)) => Ok(s.clone()),
        Some(_) => Err(Error::config(format!("{field}.{key}"), "must be a string")),
    }
}

impl Reflection {
    /// Reads a declaration written as JSON:
    ///
    /// ```json
    /// {"name": "release-review",
    ///  "outputs": [{"kind": "destination", "destination": "global"}],
    ///  "chain_of_thought": {"steps": [
    ///     {"label": "review", "directions": "Review the evidence.",
    ///      "output": {"assessment": "string", "approved": "boolean"}}]}}
    /// ```
    ///
    /// Unknown fields anywhere are errors naming the field; output types are parsed
    /// here (once) and a type that does not parse is reported by validation, which
    /// this runs too. An output's ontology is a Rust value: set it afterwards with
    /// [`Reflection::ontology`]. Step outputs keep the order of the JSON keys as read.
    ///
    /// ```
    /// use gralkor::reflection::Reflection;
    /// use serde_json::json;
    ///
    /// let r = Reflection::from_json(&json!({
    ///     "name": "release-review",
    ///     "outputs": [{"kind": "destination", "destination": "global"}],
    ///     "chain_of_thought": {"steps": [{"label": "review", "directions": "Review it.",
    ///         "output": {"approved": "boolean"}}]}}))?;
    /// assert_eq!(r.destination(), "global");
    /// let err = Reflection::from_json(&json!({"name": "r", "outputs": [],
    ///     "chain_of_thought": {"steps": []}, "schedule": "daily"})).unwrap_err();
    /// assert!(err.to_string().contains("`reflections[r].schedule` is not a known field"));
    /// # Ok::<(), gralkor::Error>(())
    /// ```
    pub fn from_json(declaration: &Value) -> Result<Reflection> {
        let root = object("reflections[]", declaration)?;
        let name = match root.get("name") {
            Some(Value::String(s)) => s.clone(),
            _ => {
                return Err(Error::config(
                    "reflections[].name",
                    "is required and must be a string",
                ));
            }
        };
        let field = format!("reflections[{name}]");
        known(&field, root, &REFLECTION_FIELDS)?;
        let mut reflection = Reflection::named(name.clone());

        let outputs_field = format!("{field}.outputs");
        let outputs = match root.get("outputs") {
            Some(Value::Array(a)) => a,
            Some(_) => return Err(Error::config(outputs_field, "must be a list")),
            None => return Err(Error::config(outputs_field, "is required")),
        };
        for (i, o) in outputs.iter().enumerate() {
            let of = format!("{outputs_field}[{i}]");
            let map = object(&of, o)?;
            known(&of, map, &OUTPUT_FIELDS)?;
            let kind = text(&of, map, "kind")?;
            if kind == "destination" {
                reflection = reflection.output(ReflectionOutput::destination(text(
                    &of,
                    map,
                    "destination",
                )?));
            } else {
                reflection = reflection.output(ReflectionOutput::Unsupported { kind });
            }
        }

        let cf = format!("{field}.chain_of_thought");
        let cot = object(
            &cf,
            root.get("chain_of_thought")
                .ok_or_else(|| Error::config(cf.clone(), "is required"))?,
        )?;
        known(&cf, cot, &COT_FIELDS)?;
        let steps = match cot.get("steps") {
            Some(Value::Array(a)) => a,
            Some(_) => return Err(Error::config(format!("{cf}.steps"), "must be a list")),
            None => return Err(Error::config(format!("{cf}.steps"), "is required")),
        };
        for (i, s) in steps.iter().enumerate() {
            let sf = format!("{cf}.steps[{i}]");
            let map = object(&sf, s)?;
            known(&sf, map, &STEP_FIELDS)?;
            let mut step = Step::new(text(&sf, map, "label")?, text(&sf, map, "directions")?);
            let out_field = format!("{sf}.output");
            let out = object(
                &out_field,
                map.get("output")
                    .ok_or_else(|| Error::config(out_field.clone(), "is required"))?,
            )?;
            for (k, t) in out {
                let Value::String(t) = t else {
                    return Err(Error::config(
                        format!("{out_field}.{k}"),
                        "must be a type written as a string, e.g. \"Array<string>\"",
                    ));
                };
                step = step.typed(k.clone(), t);
            }
            reflection = reflection.step(step);
        }
        reflection.validate(&field)?;
        Ok(reflection)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn decl(steps: Value) -> Value {
        json!({"name": "r", "outputs": [{"kind": "destination", "destination": "global"}],
               "chain_of_thought": {"steps": steps}})
    }

    #[test]
    fn a_json_declaration_reads_and_parses_types_once() {
        let r = Reflection::from_json(&decl(json!([
            {"label": "a", "directions": "Look.", "output": {"items": "Array<{ k: integer }>"}},
            {"label": "b", "directions": "Use {{ items }}.", "output": {"ok": "boolean"}}
        ])))
        .unwrap();
        assert_eq!(
            r.steps()[0].outputs()[0].1.to_string(),
            "Array<{ k: integer }>"
        );
    }

    #[test]
    fn unknown_fields_are_errors_at_every_level() {
        let e = |v: Value| Reflection::from_json(&v).unwrap_err().to_string();
        let s = e(decl(
            json!([{"label": "a", "directions": "d", "output": {"x": "string"}, "tools": []}]),
        ));
        assert!(
            s.contains("`reflections[r].chain_of_thought.steps[0].tools` is not a known field"),
            "{s}"
        );
        let s = e(
            json!({"name": "r", "outputs": [{"kind": "destination", "destination": "global", "format": 1}],
                         "chain_of_thought": {"steps": []}}),
        );
        assert!(s.contains("outputs[0].format` is not a known field"), "{s}");
        let s =
            e(json!({"name": "r", "outputs": [], "chain_of_thought": {"steps": [], "mode": "x"}}));
        assert!(
            s.contains("chain_of_thought.mode` is not a known field"),
            "{s}"
        );
    }

    #[test]
    fn json_output_kinds_and_types_are_checked() {
        let e = |v: Value| Reflection::from_json(&v).unwrap_err().to_string();
        let s = e(json!({"name": "r", "outputs": [{"kind": "return"}],
                         "chain_of_thought": {"steps": [{"label": "a", "directions": "d", "output": {"x": "string"}}]}}));
        assert!(s.contains("unsupported output kind `return`"), "{s}");
        let s = e(decl(
            json!([{"label": "a", "directions": "d", "output": {"x": "Array<float>"}}]),
        ));
        assert!(
            s.contains("steps[0].outputs.x") && s.contains("unsupported type `float`"),
            "{s}"
        );
        let s = e(decl(
            json!([{"label": "a", "directions": "d", "output": {"x": 3}}]),
        ));
        assert!(
            s.contains("output.x` must be a type written as a string"),
            "{s}"
        );
    }
}
