//! `--config FILE` (or `GRALKOR_CONFIG`): the settings of the environment in a JSON
//! file, with `${VAR}` interpolation.
//!
//! The file is one JSON object whose keys are the variables the CLI reads
//! ([`KEYS`]: `GRALKOR_DATA_DIR`, `GRALKOR_SPICEDB_KEY`, `GRALKOR_DEFAULT_GROUP`, …)
//! and whose values are strings, numbers, booleans, or lists of strings (joined with
//! commas: `GRALKOR_DEFAULT_GROUP_MEMBERS`, `FALKORDB_CLUSTER_NODES`); `null` leaves
//! a key unset. Any other key is an error naming it (a typo is never ignored).
//!
//! In every string, `${NAME}` is replaced by the environment variable `NAME`; a
//! variable that is not set is an error naming the key and the variable (set but
//! empty, it expands to nothing). `$${` is a literal `${`; any other `$` is itself.
//! What a variable expands to is not expanded again.
//!
//! Precedence, highest first: a flag, then the environment (a variable set to a blank
//! value counts as unset), then the file, then the built-in defaults.

use std::collections::BTreeMap;
use std::path::Path;

use gralkor::Error;
use serde_json::Value;

/// The keys a configuration file may set: every variable the CLI reads through its
/// settings (variables read by the library alone, such as `GRALKOR_CACHE_DIR`, stay
/// in the environment).
pub const KEYS: &[&str] = &[
    "GRALKOR_OPERATOR",
    "GRALKOR_AUTHORIZER",
    "GRALKOR_SUBJECT",
    "GRALKOR_SPICEDB_ENDPOINT",
    "GRALKOR_SPICEDB_KEY",
    "GRALKOR_DEFAULT_GROUP",
    "GRALKOR_DEFAULT_GROUP_MEMBERS",
    "GRALKOR_DATA_DIR",
    "FALKORDB_HOST",
    "FALKORDB_PORT",
    "FALKORDB_USERNAME",
    "FALKORDB_PASSWORD",
    "FALKORDB_SSL",
    "FALKORDB_CLUSTER_NODES",
    "GRALKOR_FALKORDB_TIMEOUT_MS",
    "GRALKOR_LLM_MODEL",
    "GRALKOR_LLM_SMALL_MODEL",
    "GRALKOR_EMBEDDER_MODEL",
    "GRALKOR_EMBEDDER_DIMENSION",
    "GRALKOR_LLM_OUTPUT_MODE",
    "GRALKOR_LLM_REPAIR_ATTEMPTS",
    "GRALKOR_LLM_MAX_OUTPUT_TOKENS",
    "GRALKOR_LLM_CALL_TIMEOUT_SECS",
    "OPENAI_API_KEY",
    "OPENAI_BASE_URL",
    "GOOGLE_API_KEY",
];

/// A configuration error naming `field`.
fn config_error(field: impl Into<String>, rule: impl Into<String>) -> Error {
    Error::Config {
        field: field.into(),
        rule: rule.into(),
    }
}

/// The settings a configuration file gave, interpolated.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct FileSettings {
    values: BTreeMap<String, String>,
}

impl FileSettings {
    /// Reads and interpolates the file at `path`, expanding `${VAR}` through `env`.
    pub fn load(path: &Path, env: impl Fn(&str) -> Option<String>) -> Result<FileSettings, Error> {
        let text = std::fs::read_to_string(path).map_err(|e| {
            config_error(
                "--config",
                format!("cannot read the configuration file {}: {e}", path.display()),
            )
        })?;
        FileSettings::parse(&path.display().to_string(), &text, env)
    }

    /// The settings of a file's text; `name` is how errors call the file.
    pub fn parse(
        name: &str,
        text: &str,
        env: impl Fn(&str) -> Option<String>,
    ) -> Result<FileSettings, Error> {
        let doc: Value = serde_json::from_str(text).map_err(|e| {
            config_error(
                "--config",
                format!("the configuration file {name} is not JSON: {e}"),
            )
        })?;
        let Value::Object(object) = doc else {
            return Err(config_error(
                "--config",
                format!(
                    "the configuration file {name} must be a JSON object of settings \
                     (`{{\"GRALKOR_DATA_DIR\": \"…\"}}`)"
                ),
            ));
        };
        let mut values = BTreeMap::new();
        for (key, value) in object {
            let field = format!("{key} (in {name})");
            if !KEYS.contains(&key.as_str()) {
                return Err(config_error(
                    field,
                    format!(
                        "is not a setting of the configuration file; the settings are {}",
                        KEYS.join(", ")
                    ),
                ));
            }
            let text = match value {
                Value::Null => continue,
                Value::String(s) => interpolate(&field, &s, &env)?,
                Value::Number(n) => n.to_string(),
                Value::Bool(b) => b.to_string(),
                Value::Array(items) => {
                    let mut parts = Vec::with_capacity(items.len());
                    for (i, item) in items.iter().enumerate() {
                        let Value::String(s) = item else {
                            return Err(config_error(
                                format!("{key}[{i}] (in {name})"),
                                "must be a string",
                            ));
                        };
                        parts.push(interpolate(&format!("{key}[{i}] (in {name})"), s, &env)?);
                    }
                    parts.join(",")
                }
                Value::Object(_) => {
                    return Err(config_error(
                        field,
                        "must be a string, a number, a boolean or a list of strings",
                    ));
                }
            };
            values.insert(key, text);
        }
        Ok(FileSettings { values })
    }

    /// The file's value of `key`, if it sets one.
    pub fn get(&self, key: &str) -> Option<&str> {
        self.values.get(key).map(String::as_str)
    }
}

/// `text` with every `${NAME}` replaced by the variable `NAME` (through `env`) and
/// every `$${` by `${`. An unset variable, an unterminated `${` or a name that is not
/// a variable name (`[A-Za-z_][A-Za-z0-9_]*`) is an error naming `field`.
pub fn interpolate(
    field: &str,
    text: &str,
    env: impl Fn(&str) -> Option<String>,
) -> Result<String, Error> {
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    while let Some(at) = rest.find('$') {
        out.push_str(&rest[..at]);
        let after = &rest[at..];
        if let Some(tail) = after.strip_prefix("$${") {
            out.push_str("${");
            rest = tail;
        } else if let Some(tail) = after.strip_prefix("${") {
            let Some(end) = tail.find('}') else {
                return Err(config_error(
                    field,
                    format!("has an unterminated `${{` (write `$${{` for a literal one): `{text}`"),
                ));
            };
            let name = &tail[..end];
            let valid = name
                .chars()
                .next()
                .is_some_and(|c| c.is_ascii_alphabetic() || c == '_')
                && name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_');
            if !valid {
                return Err(config_error(
                    field,
                    format!("`${{{name}}}` does not name a variable (letters, digits and `_`)"),
                ));
            }
            match env(name) {
                Some(value) => out.push_str(&value),
                None => {
                    return Err(config_error(
                        field,
                        format!("names the variable {name} (`${{{name}}}`), which is not set"),
                    ));
                }
            }
            rest = &tail[end + 1..];
        } else {
            out.push('$');
            rest = &after[1..];
        }
    }
    out.push_str(rest);
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn env(name: &str) -> Option<String> {
        match name {
            "SPICEDB_TOKEN" => Some("s3cret".into()),
            "AGENT" => Some("my-agent".into()),
            "EMPTY" => Some(String::new()),
            "NESTED" => Some("${AGENT}".into()),
            _ => None,
        }
    }

    fn rule_of(e: Error) -> (String, String) {
        match e {
            Error::Config { field, rule } => (field, rule),
            other => panic!("not a configuration error: {other:?}"),
        }
    }

    #[test]
    fn variables_are_interpolated_and_dollar_dollar_brace_escapes() {
        let i = |t: &str| interpolate("k", t, env).unwrap();
        assert_eq!(i("${SPICEDB_TOKEN}"), "s3cret");
        assert_eq!(i("agent:${AGENT}/x${AGENT}"), "agent:my-agent/xmy-agent");
        assert_eq!(i("a${EMPTY}b"), "ab");
        assert_eq!(i("$${AGENT}"), "${AGENT}");
        assert_eq!(i("cost $5, $AGENT, $"), "cost $5, $AGENT, $");
        assert_eq!(i("$$${AGENT}"), "$${AGENT}");
        // What a variable expands to is not expanded again.
        assert_eq!(i("${NESTED}"), "${AGENT}");
    }

    #[test]
    fn a_missing_variable_is_an_error_naming_the_key_and_the_variable() {
        let (field, rule) = rule_of(
            FileSettings::parse(
                "gralkor.json",
                r#"{"GRALKOR_SPICEDB_KEY": "${SPICEDB_TOKN}"}"#,
                env,
            )
            .unwrap_err(),
        );
        assert_eq!(field, "GRALKOR_SPICEDB_KEY (in gralkor.json)");
        assert!(
            rule.contains("SPICEDB_TOKN") && rule.contains("not set"),
            "{rule}"
        );
        let (field, rule) = rule_of(
            FileSettings::parse(
                "f",
                r#"{"GRALKOR_DEFAULT_GROUP_MEMBERS": ["agent:a", "agent:${NOPE}"]}"#,
                env,
            )
            .unwrap_err(),
        );
        assert_eq!(field, "GRALKOR_DEFAULT_GROUP_MEMBERS[1] (in f)");
        assert!(rule.contains("NOPE"), "{rule}");
        let (_, rule) = rule_of(interpolate("k", "x${AGENT", env).unwrap_err());
        assert!(rule.contains("unterminated"), "{rule}");
        let (_, rule) = rule_of(interpolate("k", "${1X}", env).unwrap_err());
        assert!(rule.contains("does not name a variable"), "{rule}");
        let (_, rule) = rule_of(interpolate("k", "${}", env).unwrap_err());
        assert!(rule.contains("does not name a variable"), "{rule}");
    }

    #[test]
    fn the_file_holds_known_settings_only() {
        let s = FileSettings::parse(
            "f",
            r#"{"GRALKOR_SPICEDB_KEY": "${SPICEDB_TOKEN}", "FALKORDB_PORT": 6380,
                "FALKORDB_SSL": true, "GRALKOR_DEFAULT_GROUP_MEMBERS": ["agent:${AGENT}", "person:ada"],
                "GRALKOR_LLM_MODEL": null}"#,
            env,
        )
        .unwrap();
        assert_eq!(s.get("GRALKOR_SPICEDB_KEY"), Some("s3cret"));
        assert_eq!(s.get("FALKORDB_PORT"), Some("6380"));
        assert_eq!(s.get("FALKORDB_SSL"), Some("true"));
        assert_eq!(
            s.get("GRALKOR_DEFAULT_GROUP_MEMBERS"),
            Some("agent:my-agent,person:ada")
        );
        assert_eq!(s.get("GRALKOR_LLM_MODEL"), None);
        let (field, rule) =
            rule_of(FileSettings::parse("f", r#"{"GRALKOR_DATADIR": "/x"}"#, env).unwrap_err());
        assert_eq!(field, "GRALKOR_DATADIR (in f)");
        assert!(rule.contains("GRALKOR_DATA_DIR"), "{rule}");
        let (field, _) = rule_of(FileSettings::parse("f", r#"["x"]"#, env).unwrap_err());
        assert_eq!(field, "--config");
        let (field, _) = rule_of(FileSettings::parse("f", "{", env).unwrap_err());
        assert_eq!(field, "--config");
        let (field, _) =
            rule_of(FileSettings::parse("f", r#"{"FALKORDB_HOST": {"a": 1}}"#, env).unwrap_err());
        assert_eq!(field, "FALKORDB_HOST (in f)");
    }
}
