//! The output type grammar of a chain-of-thought step, parsed once into a tree.
//!
//! ```text
//! type   := "string" | "boolean" | "integer" | "Array<" type ">" | object
//! object := "{" field (";" field)* ";"? "}"
//! field  := key ":" type            (key: an output-name identifier)
//! ```
//!
//! A parsed [`OutputType`] turns into a strict JSON schema
//! ([`OutputType::json_schema`]) for the structured-output call and checks an answer
//! exactly and recursively ([`OutputType::check`]): a missing key, an extra key or a
//! wrong type is a [`Mismatch`] naming the path.

use std::collections::HashSet;
use std::fmt;

use serde_json::{Map, Value, json};

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

/// Why a type text does not parse: the innermost unsupported or malformed piece.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TypeError {
    /// What is wrong, e.g. ``unsupported type `float` ``.
    pub rule: String,
}

impl fmt::Display for TypeError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.rule)
    }
}

/// Why a value does not match a type: where (`key`, a path such as
/// `generalisations[0].level`) and what.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Mismatch {
    /// The path of the offending key.
    pub key: String,
    /// `is missing`, `is not part of the contract`, `must be an integer (got string)`.
    pub problem: String,
}

/// Whether `name` is an output name: `[A-Za-z_][A-Za-z0-9_-]*`, the names `{{ … }}`
/// interpolation can refer to.
pub fn is_output_name(name: &str) -> bool {
    let mut chars = name.chars();
    matches!(chars.next(), Some(c) if c.is_ascii_alphabetic() || c == '_')
        && chars.all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-')
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

    /// Parses the grammar. An unknown type is an error naming the innermost one.
    ///
    /// ```
    /// use gralkor::reflection::OutputType;
    ///
    /// let t = OutputType::parse("Array<{ content: string; level: integer }>").unwrap();
    /// assert_eq!(t, OutputType::array(OutputType::object([
    ///     ("content", OutputType::String), ("level", OutputType::Integer)])));
    /// let err = OutputType::parse("Array<{ at: date }>").unwrap_err();
    /// assert_eq!(err.rule, "unsupported type `date`");
    /// ```
    pub fn parse(text: &str) -> Result<OutputType, TypeError> {
        let mut p = Parser { text, at: 0 };
        let t = p.ty()?;
        p.space();
        if p.at < text.len() {
            return Err(p.error(format!(
                "unexpected `{}` after the type `{t}`",
                &text[p.at..]
            )));
        }
        Ok(t)
    }

    /// Checks the tree's own rules (objects have fields, keys are output names and
    /// unique); `field` prefixes the error. Parsed types already obey them.
    pub(crate) fn validate(&self, field: &str) -> Result<(), (String, String)> {
        match self {
            OutputType::String | OutputType::Boolean | OutputType::Integer => Ok(()),
            OutputType::Array(item) => item.validate(&format!("{field}[]")),
            OutputType::Object(fields) => {
                if fields.is_empty() {
                    return Err((
                        field.to_string(),
                        "an object type needs at least one field".into(),
                    ));
                }
                let mut seen = HashSet::new();
                for (k, t) in fields {
                    let f = format!("{field}.{k}");
                    if !is_output_name(k) {
                        return Err((f, "must be an identifier".into()));
                    }
                    if !seen.insert(k.as_str()) {
                        return Err((f, "is declared twice".into()));
                    }
                    t.validate(&f)?;
                }
                Ok(())
            }
        }
    }

    /// The strict JSON schema of this type: every object field required, no
    /// additional properties.
    pub fn json_schema(&self) -> Value {
        match self {
            OutputType::String => json!({"type": "string"}),
            OutputType::Boolean => json!({"type": "boolean"}),
            OutputType::Integer => json!({"type": "integer"}),
            OutputType::Array(item) => json!({"type": "array", "items": item.json_schema()}),
            OutputType::Object(fields) => object_schema(fields),
        }
    }

    /// Checks `value` exactly and recursively against this type; `key` is the path of
    /// the value, used in the mismatch.
    pub fn check(&self, key: &str, value: &Value) -> Result<(), Mismatch> {
        let wrong = |expected: &str| Mismatch {
            key: key.to_string(),
            problem: format!("must be {expected} (got {})", kind(value)),
        };
        match self {
            OutputType::String => value
                .is_string()
                .then_some(())
                .ok_or_else(|| wrong("a string")),
            OutputType::Boolean => value
                .is_boolean()
                .then_some(())
                .ok_or_else(|| wrong("a boolean")),
            OutputType::Integer => (value.is_i64() || value.is_u64())
                .then_some(())
                .ok_or_else(|| wrong("an integer")),
            OutputType::Array(item) => {
                let items = value.as_array().ok_or_else(|| wrong("an array"))?;
                for (i, v) in items.iter().enumerate() {
                    item.check(&format!("{key}[{i}]"), v)?;
                }
                Ok(())
            }
            OutputType::Object(fields) => {
                let map = value.as_object().ok_or_else(|| wrong("an object"))?;
                check_fields(fields, map, &format!("{key}."))
            }
        }
    }
}

/// The strict object schema of `fields`.
pub(crate) fn object_schema(fields: &[(String, OutputType)]) -> Value {
    let properties: Map<String, Value> = fields
        .iter()
        .map(|(k, t)| (k.clone(), t.json_schema()))
        .collect();
    let required: Vec<&str> = fields.iter().map(|(k, _)| k.as_str()).collect();
    json!({
        "type": "object",
        "properties": properties,
        "required": required,
        "additionalProperties": false,
    })
}

/// Checks an object exactly against `fields`; keys in mismatches are `prefix` + key.
pub(crate) fn check_fields(
    fields: &[(String, OutputType)],
    map: &Map<String, Value>,
    prefix: &str,
) -> Result<(), Mismatch> {
    for (k, t) in fields {
        let key = format!("{prefix}{k}");
        match map.get(k) {
            None => {
                return Err(Mismatch {
                    key,
                    problem: "is missing".into(),
                });
            }
            Some(v) => t.check(&key, v)?,
        }
    }
    if let Some(extra) = map.keys().find(|k| !fields.iter().any(|(f, _)| f == *k)) {
        return Err(Mismatch {
            key: format!("{prefix}{extra}"),
            problem: "is not part of the output contract".into(),
        });
    }
    Ok(())
}

fn kind(value: &Value) -> &'static str {
    match value {
        Value::Null => "null",
        Value::Bool(_) => "boolean",
        Value::Number(n) if n.is_i64() || n.is_u64() => "integer",
        Value::Number(_) => "number",
        Value::String(_) => "string",
        Value::Array(_) => "array",
        Value::Object(_) => "object",
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

struct Parser<'a> {
    text: &'a str,
    at: usize,
}

impl Parser<'_> {
    fn error(&self, rule: String) -> TypeError {
        TypeError { rule }
    }

    fn space(&mut self) {
        while self.text[self.at..].starts_with(char::is_whitespace) {
            self.at += self.text[self.at..]
                .chars()
                .next()
                .map_or(1, char::len_utf8);
        }
    }

    fn eat(&mut self, token: &str) -> bool {
        self.space();
        if self.text[self.at..].starts_with(token) {
            self.at += token.len();
            true
        } else {
            false
        }
    }

    /// A run of name characters (possibly empty).
    fn word(&mut self) -> &str {
        self.space();
        let start = self.at;
        let rest = &self.text[start..];
        let len = rest
            .find(|c: char| !(c.is_ascii_alphanumeric() || c == '_' || c == '-'))
            .unwrap_or(rest.len());
        self.at += len;
        &self.text[start..start + len]
    }

    fn rest_token(&self) -> String {
        let rest = self.text[self.at..].trim_start();
        match rest.chars().next() {
            None => "the end of the type".into(),
            Some(c) => format!("`{c}`"),
        }
    }

    fn ty(&mut self) -> Result<OutputType, TypeError> {
        if self.eat("{") {
            return self.object();
        }
        let name = self.word().to_string();
        match name.as_str() {
            "string" => Ok(OutputType::String),
            "boolean" => Ok(OutputType::Boolean),
            "integer" => Ok(OutputType::Integer),
            "Array" => {
                if !self.eat("<") {
                    return Err(self.error(format!(
                        "`Array` needs an item type in `<…>` (found {})",
                        self.rest_token()
                    )));
                }
                let item = self.ty()?;
                if !self.eat(">") {
                    return Err(self.error(format!(
                        "`Array<{item}` needs a closing `>` (found {})",
                        self.rest_token()
                    )));
                }
                Ok(OutputType::array(item))
            }
            "" => Err(self.error(format!("expected a type, found {}", self.rest_token()))),
            other => {
                // Name the whole innermost unsupported type, `Map<…>` included.
                let mut shown = other.to_string();
                if self.text[self.at..].trim_start().starts_with('<') {
                    let rest = &self.text[self.at..];
                    let end = rest.find('>').map_or(rest.len(), |e| e + 1);
                    shown.push_str(rest[..end].trim_start());
                }
                Err(self.error(format!("unsupported type `{shown}`")))
            }
        }
    }

    fn object(&mut self) -> Result<OutputType, TypeError> {
        let mut fields: Vec<(String, OutputType)> = Vec::new();
        loop {
            if self.eat("}") {
                break;
            }
            let key = self.word().to_string();
            if !is_output_name(&key) {
                return Err(self.error(format!(
                    "expected a field name in an object type, found {}",
                    if key.is_empty() {
                        self.rest_token()
                    } else {
                        format!("`{key}`")
                    }
                )));
            }
            if fields.iter().any(|(k, _)| *k == key) {
                return Err(self.error(format!("object field `{key}` is declared twice")));
            }
            if !self.eat(":") {
                return Err(self.error(format!(
                    "object field `{key}` needs `: type` (found {})",
                    self.rest_token()
                )));
            }
            let t = self.ty()?;
            fields.push((key, t));
            if self.eat(";") || self.eat(",") {
                continue;
            }
            if self.eat("}") {
                break;
            }
            return Err(self.error(format!(
                "expected `;` or `}}` in an object type, found {}",
                self.rest_token()
            )));
        }
        if fields.is_empty() {
            return Err(self.error("an object type needs at least one field".into()));
        }
        Ok(OutputType::Object(fields))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_grammar_parses_nested_types_and_prints_back() {
        let text = "Array<{ content: string; level: integer; evolves_from: Array<{ content: string; level: integer }> }>";
        let t = OutputType::parse(text).unwrap();
        assert_eq!(t.to_string(), text);
        assert_eq!(OutputType::parse(" boolean ").unwrap(), OutputType::Boolean);
        assert_eq!(
            OutputType::parse("{a:string;}").unwrap(),
            OutputType::object([("a", OutputType::String)])
        );
    }

    #[test]
    fn an_unsupported_type_names_the_innermost_one() {
        let e = |t| OutputType::parse(t).unwrap_err().rule;
        assert_eq!(e("float"), "unsupported type `float`");
        assert_eq!(
            e("Array<{ a: Array<Map<string>> }>"),
            "unsupported type `Map<string>`"
        );
        assert_eq!(e("{ a: { b: number } }"), "unsupported type `number`");
        assert!(e("{}").contains("at least one field"));
        assert!(e("{ a: string; a: integer }").contains("`a` is declared twice"));
        assert!(e("Array<string").contains("closing `>`"));
        assert!(e("string extra").contains("unexpected `extra`"));
        assert!(e("").contains("expected a type"));
    }

    #[test]
    fn schemas_are_strict() {
        let t = OutputType::parse("{ a: Array<integer>; b: boolean }").unwrap();
        let s = t.json_schema();
        assert_eq!(s["additionalProperties"], false);
        assert_eq!(s["required"], json!(["a", "b"]));
        assert_eq!(s["properties"]["a"]["items"]["type"], "integer");
        crate::llm::schema::check_schema(&s).unwrap();
    }

    #[test]
    fn values_are_checked_exactly_and_recursively() {
        let t = OutputType::parse("Array<{ content: string; level: integer }>").unwrap();
        t.check("g", &json!([{"content": "x", "level": 1}]))
            .unwrap();
        let m = t.check("g", &json!([{"content": "x"}])).unwrap_err();
        assert_eq!(
            (m.key.as_str(), m.problem.as_str()),
            ("g[0].level", "is missing")
        );
        let m = t
            .check("g", &json!([{"content": "x", "level": 1, "more": true}]))
            .unwrap_err();
        assert_eq!(m.key, "g[0].more");
        assert!(m.problem.contains("not part of the output contract"));
        let m = t
            .check("g", &json!([{"content": "x", "level": 1.5}]))
            .unwrap_err();
        assert_eq!(m.problem, "must be an integer (got number)");
        let m = t.check("g", &json!({"content": "x"})).unwrap_err();
        assert_eq!(m.problem, "must be an array (got object)");
    }
}
