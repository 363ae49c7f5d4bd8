//! The JSON-schema subset gralkor's output schemas use, and a validator for it.
//!
//! Supported keywords:
//!
//! * `type`: one of `object`, `array`, `string`, `number`, `integer`, `boolean`,
//!   `null`, or an array of them (`["string", "null"]` is how a value is made
//!   nullable);
//! * `properties`, `required`, `additionalProperties` (a boolean) for objects;
//! * `items` for arrays;
//! * `enum` (a list of allowed values);
//! * annotations that do not constrain values: `description`, `title`.
//!
//! Anything else (`$ref`, `anyOf`, `pattern`, …) is rejected by [`check_schema`], so
//! a schema never silently means less than it says.
//!
//! ```
//! use gralkor::llm::schema;
//! use serde_json::json;
//!
//! let s = json!({
//!     "type": "object",
//!     "properties": {"name": {"type": "string"}, "age": {"type": ["integer", "null"]}},
//!     "required": ["name", "age"],
//!     "additionalProperties": false
//! });
//! assert!(schema::validate(&s, &json!({"name": "Ada", "age": null})).is_empty());
//! let errors = schema::validate(&s, &json!({"name": 3}));
//! assert_eq!(errors.len(), 2); // `name` is not a string, `age` is missing
//! ```

use serde_json::{Map, Value};

const TYPES: [&str; 7] = [
    "object", "array", "string", "number", "integer", "boolean", "null",
];
const KEYWORDS: [&str; 8] = [
    "type",
    "properties",
    "required",
    "items",
    "enum",
    "additionalProperties",
    "description",
    "title",
];

/// Checks that `schema` only uses the supported subset. The error says where and what.
pub fn check_schema(schema: &Value) -> Result<(), String> {
    check_at(schema, "#")
}

fn check_at(schema: &Value, at: &str) -> Result<(), String> {
    let obj = schema
        .as_object()
        .ok_or_else(|| format!("{at}: a schema must be a JSON object"))?;
    for key in obj.keys() {
        if !KEYWORDS.contains(&key.as_str()) {
            return Err(format!(
                "{at}: keyword `{key}` is not supported (supported: {})",
                KEYWORDS.join(", ")
            ));
        }
    }
    if let Some(t) = obj.get("type") {
        let names: Vec<&Value> = match t {
            Value::Array(items) if !items.is_empty() => items.iter().collect(),
            Value::String(_) => vec![t],
            _ => {
                return Err(format!(
                    "{at}/type: must be a type name or a non-empty array of them"
                ));
            }
        };
        for name in names {
            match name.as_str() {
                Some(n) if TYPES.contains(&n) => {}
                _ => {
                    return Err(format!(
                        "{at}/type: {name} is not one of {}",
                        TYPES.join(", ")
                    ));
                }
            }
        }
    }
    if let Some(props) = obj.get("properties") {
        let props = props
            .as_object()
            .ok_or_else(|| format!("{at}/properties: must be an object"))?;
        for (name, sub) in props {
            check_at(sub, &format!("{at}/properties/{name}"))?;
        }
    }
    if let Some(required) = obj.get("required") {
        let ok = required
            .as_array()
            .is_some_and(|r| r.iter().all(Value::is_string));
        if !ok {
            return Err(format!("{at}/required: must be an array of property names"));
        }
    }
    if let Some(items) = obj.get("items") {
        check_at(items, &format!("{at}/items"))?;
    }
    if let Some(e) = obj.get("enum")
        && e.as_array().is_none_or(Vec::is_empty)
    {
        return Err(format!("{at}/enum: must be a non-empty array"));
    }
    if let Some(ap) = obj.get("additionalProperties")
        && !ap.is_boolean()
    {
        return Err(format!(
            "{at}/additionalProperties: only `true` or `false` is supported"
        ));
    }
    for key in ["description", "title"] {
        if obj.get(key).is_some_and(|d| !d.is_string()) {
            return Err(format!("{at}/{key}: must be a string"));
        }
    }
    Ok(())
}

/// Validates `value` against `schema`, returning every violation as
/// `"<JSON pointer>: <what is wrong>"`. Empty means valid.
pub fn validate(schema: &Value, value: &Value) -> Vec<String> {
    let mut errors = Vec::new();
    validate_at(schema, value, "", &mut errors);
    errors
}

fn type_matches(name: &str, value: &Value) -> bool {
    match name {
        "object" => value.is_object(),
        "array" => value.is_array(),
        "string" => value.is_string(),
        "number" => value.is_number(),
        "integer" => {
            value.is_i64()
                || value.is_u64()
                || value
                    .as_f64()
                    .is_some_and(|f| f.is_finite() && f.fract() == 0.0)
        }
        "boolean" => value.is_boolean(),
        "null" => value.is_null(),
        _ => false,
    }
}

fn kind(value: &Value) -> &'static str {
    match value {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "an array",
        Value::Object(_) => "an object",
    }
}

fn pointer(at: &str) -> &str {
    if at.is_empty() { "/" } else { at }
}

fn validate_at(schema: &Value, value: &Value, at: &str, errors: &mut Vec<String>) {
    let Some(s) = schema.as_object() else { return };
    if let Some(t) = s.get("type") {
        let names: Vec<&str> = match t {
            Value::String(n) => vec![n.as_str()],
            Value::Array(items) => items.iter().filter_map(Value::as_str).collect(),
            _ => Vec::new(),
        };
        if !names.iter().any(|n| type_matches(n, value)) {
            errors.push(format!(
                "{}: expected {}, got {}",
                pointer(at),
                names.join(" or "),
                kind(value)
            ));
            return;
        }
    }
    if let Some(allowed) = s.get("enum").and_then(Value::as_array)
        && !allowed.iter().any(|a| json_eq(a, value))
    {
        errors.push(format!(
            "{}: {} is not one of {}",
            pointer(at),
            value,
            Value::Array(allowed.clone())
        ));
    }
    if let Value::Object(map) = value {
        validate_object(s, map, at, errors);
    }
    if let (Value::Array(items), Some(item_schema)) = (value, s.get("items")) {
        for (i, item) in items.iter().enumerate() {
            validate_at(item_schema, item, &format!("{at}/{i}"), errors);
        }
    }
}

fn validate_object(
    s: &Map<String, Value>,
    map: &Map<String, Value>,
    at: &str,
    errors: &mut Vec<String>,
) {
    let props = s.get("properties").and_then(Value::as_object);
    if let Some(required) = s.get("required").and_then(Value::as_array) {
        for name in required.iter().filter_map(Value::as_str) {
            if !map.contains_key(name) {
                errors.push(format!(
                    "{}: missing required property `{name}`",
                    pointer(at)
                ));
            }
        }
    }
    for (key, v) in map {
        let child = format!("{at}/{}", key.replace('~', "~0").replace('/', "~1"));
        match props.and_then(|p| p.get(key)) {
            Some(sub) => validate_at(sub, v, &child, errors),
            None if s.get("additionalProperties") == Some(&Value::Bool(false)) => {
                errors.push(format!("{}: property `{key}` is not allowed", pointer(at)));
            }
            None => {}
        }
    }
}

/// JSON equality where `1` and `1.0` are the same number.
fn json_eq(a: &Value, b: &Value) -> bool {
    match (a, b) {
        (Value::Number(x), Value::Number(y)) => x.as_f64() == y.as_f64(),
        _ => a == b,
    }
}

/// Whether OpenAI's strict structured-output mode accepts `schema` as is: every object
/// lists all its properties in `required` and sets `additionalProperties: false`.
/// Non-strict schemas are sent with `strict: false` (the answer is still validated
/// here).
pub fn is_strict_compatible(schema: &Value) -> bool {
    let Some(s) = schema.as_object() else {
        return false;
    };
    let is_object = match s.get("type") {
        Some(Value::String(t)) => t == "object",
        Some(Value::Array(ts)) => ts.iter().any(|t| t == "object"),
        _ => s.contains_key("properties"),
    };
    if is_object {
        if s.get("additionalProperties") != Some(&Value::Bool(false)) {
            return false;
        }
        let props = s.get("properties").and_then(Value::as_object);
        let required: Vec<&str> = s
            .get("required")
            .and_then(Value::as_array)
            .map(|r| r.iter().filter_map(Value::as_str).collect())
            .unwrap_or_default();
        if let Some(props) = props {
            if !props.keys().all(|k| required.contains(&k.as_str())) {
                return false;
            }
            if !props.values().all(is_strict_compatible) {
                return false;
            }
        }
    }
    s.get("items").is_none_or(is_strict_compatible)
}

/// Translates a schema of the supported subset into Gemini's `responseSchema` (a
/// subset of the OpenAPI 3.0 schema object): upper-case type names, `nullable` instead
/// of a `null` type, `propertyOrdering`, and no `additionalProperties`.
///
/// A type array with two non-null types has no Gemini equivalent and is an error.
pub fn to_gemini(schema: &Value) -> Result<Value, String> {
    gemini_at(schema, "#")
}

fn gemini_at(schema: &Value, at: &str) -> Result<Value, String> {
    check_at(schema, at)?;
    let s = schema.as_object().expect("checked above");
    let mut out = Map::new();
    if let Some(t) = s.get("type") {
        let names: Vec<&str> = match t {
            Value::String(n) => vec![n.as_str()],
            Value::Array(items) => items.iter().filter_map(Value::as_str).collect(),
            _ => Vec::new(),
        };
        let non_null: Vec<&str> = names.iter().copied().filter(|n| *n != "null").collect();
        match non_null.as_slice() {
            [] => {
                // Only `null`: Gemini has a NULL type.
                out.insert("type".into(), Value::from("NULL"));
            }
            [one] => {
                out.insert("type".into(), Value::from(one.to_ascii_uppercase()));
                if names.contains(&"null") {
                    out.insert("nullable".into(), Value::Bool(true));
                }
            }
            _ => {
                return Err(format!(
                    "{at}/type: Gemini cannot express a choice of types ({})",
                    names.join(", ")
                ));
            }
        }
    }
    if let Some(d) = s.get("description") {
        out.insert("description".into(), d.clone());
    }
    if let Some(e) = s.get("enum").and_then(Value::as_array) {
        // Gemini enums are lists of strings on a STRING schema.
        if e.iter().all(Value::is_string) {
            out.insert("enum".into(), Value::Array(e.clone()));
            if out.get("type").and_then(Value::as_str) == Some("STRING") {
                out.insert("format".into(), Value::from("enum"));
            }
        }
    }
    if let Some(props) = s.get("properties").and_then(Value::as_object) {
        let mut translated = Map::new();
        for (name, sub) in props {
            translated.insert(
                name.clone(),
                gemini_at(sub, &format!("{at}/properties/{name}"))?,
            );
        }
        out.insert(
            "propertyOrdering".into(),
            Value::Array(props.keys().map(|k| Value::from(k.as_str())).collect()),
        );
        out.insert("properties".into(), Value::Object(translated));
    }
    if let Some(r) = s.get("required") {
        out.insert("required".into(), r.clone());
    }
    if let Some(items) = s.get("items") {
        out.insert("items".into(), gemini_at(items, &format!("{at}/items"))?);
    }
    Ok(Value::Object(out))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn person() -> Value {
        json!({
            "type": "object",
            "properties": {
                "name": {"type": "string", "description": "full name"},
                "age": {"type": ["integer", "null"]},
                "role": {"type": "string", "enum": ["admin", "user"]},
                "tags": {"type": "array", "items": {"type": "string"}}
            },
            "required": ["name", "age", "role", "tags"],
            "additionalProperties": false
        })
    }

    #[test]
    fn accepts_a_valid_value() {
        let v = json!({"name": "Ada", "age": 36, "role": "admin", "tags": ["x"]});
        assert_eq!(validate(&person(), &v), Vec::<String>::new());
        let v = json!({"name": "Ada", "age": null, "role": "user", "tags": []});
        assert!(validate(&person(), &v).is_empty());
    }

    #[test]
    fn reports_each_violation_with_its_pointer() {
        let v = json!({"name": 1, "age": 2.5, "role": "root", "tags": ["a", 3], "x": true});
        let errors = validate(&person(), &v);
        assert!(
            errors.contains(&"/name: expected string, got a number".to_string()),
            "{errors:?}"
        );
        assert!(
            errors
                .iter()
                .any(|e| e.starts_with("/age: expected integer or null")),
            "{errors:?}"
        );
        assert!(
            errors
                .iter()
                .any(|e| e.starts_with("/role: \"root\" is not one of")),
            "{errors:?}"
        );
        assert!(
            errors.contains(&"/tags/1: expected string, got a number".to_string()),
            "{errors:?}"
        );
        assert!(
            errors.contains(&"/: property `x` is not allowed".to_string()),
            "{errors:?}"
        );
        assert_eq!(errors.len(), 5);
    }

    #[test]
    fn missing_required_and_wrong_root() {
        assert_eq!(
            validate(&person(), &json!({"name": "A", "age": 1, "role": "user"})),
            vec!["/: missing required property `tags`".to_string()]
        );
        assert_eq!(
            validate(&person(), &json!([])),
            vec!["/: expected object, got an array".to_string()]
        );
    }

    #[test]
    fn integers_accept_whole_floats_only() {
        let s = json!({"type": "integer"});
        assert!(validate(&s, &json!(3.0)).is_empty());
        assert!(!validate(&s, &json!(3.5)).is_empty());
        assert!(validate(&json!({"type": "number"}), &json!(3.5)).is_empty());
    }

    #[test]
    fn check_schema_rejects_unsupported_keywords() {
        assert!(check_schema(&person()).is_ok());
        let err = check_schema(&json!({"type": "object", "properties": {"a": {"anyOf": []}}}))
            .unwrap_err();
        assert!(
            err.starts_with("#/properties/a: keyword `anyOf` is not supported"),
            "{err}"
        );
        assert!(check_schema(&json!({"type": "text"})).is_err());
        assert!(check_schema(&json!({"type": "object", "additionalProperties": {}})).is_err());
        assert!(check_schema(&json!({"enum": []})).is_err());
    }

    #[test]
    fn strict_compatibility() {
        assert!(is_strict_compatible(&person()));
        let mut loose = person();
        loose["required"] = json!(["name"]);
        assert!(!is_strict_compatible(&loose));
        let mut open = person();
        open.as_object_mut().unwrap().remove("additionalProperties");
        assert!(!is_strict_compatible(&open));
        let nested = json!({"type": "object", "additionalProperties": false, "required": ["xs"],
            "properties": {"xs": {"type": "array", "items": {"type": "object", "properties": {"a": {"type": "string"}}}}}});
        assert!(!is_strict_compatible(&nested));
    }

    #[test]
    fn gemini_translation() {
        let g = to_gemini(&person()).unwrap();
        assert_eq!(g["type"], "OBJECT");
        assert_eq!(
            g["properties"]["age"],
            json!({"type": "INTEGER", "nullable": true})
        );
        assert_eq!(
            g["properties"]["role"],
            json!({"type": "STRING", "enum": ["admin", "user"], "format": "enum"})
        );
        assert_eq!(g["properties"]["name"]["description"], "full name");
        assert_eq!(g["properties"]["tags"]["items"], json!({"type": "STRING"}));
        // The schema's own property order: sorted with serde_json's default map,
        // as written when a dependency turns on its `preserve_order` feature.
        let schema = person();
        let declared: Vec<&str> = schema["properties"]
            .as_object()
            .unwrap()
            .keys()
            .map(String::as_str)
            .collect();
        assert_eq!(g["propertyOrdering"], json!(declared));
        let mut sorted = declared.clone();
        sorted.sort_unstable();
        assert_eq!(sorted, ["age", "name", "role", "tags"]);
        assert!(g.get("additionalProperties").is_none());
        let err = to_gemini(&json!({"type": ["string", "integer"]})).unwrap_err();
        assert!(err.contains("choice of types"), "{err}");
    }
}
