//! From the flags, the environment and the configuration file to a connected client.
//!
//! The flags override the variables `Config::from_lookup` reads, and the variables
//! override the configuration file (`--config`, [`crate::config_file`]): a setting is
//! taken from the first of flag, variable (non-blank), file, default that has it.
//! Nothing else is interpreted here, so the CLI follows exactly the library's rules
//! (and its error messages) for backends, models and the default group.

use gralkor::client::OperatorId;
use gralkor::config::Config;
use gralkor::destination::DefaultGroup;
use gralkor::{Error, Result};

use crate::args::{AuthorizerKind, Global};
use crate::config_file::FileSettings;

/// The variables a flag overrides, as (variable, value) pairs.
fn overrides(global: &Global) -> Vec<(&'static str, String)> {
    let mut out = Vec::new();
    if let Some(dir) = &global.data_dir {
        out.push(("GRALKOR_DATA_DIR", dir.display().to_string()));
    }
    if let Some(host) = &global.falkordb_host {
        out.push(("FALKORDB_HOST", host.clone()));
    }
    if let Some(port) = global.falkordb_port {
        out.push(("FALKORDB_PORT", port.to_string()));
    }
    if let Some(spec) = &global.llm_model {
        out.push(("GRALKOR_LLM_MODEL", spec.clone()));
    }
    if let Some(spec) = &global.embedder_model {
        out.push(("GRALKOR_EMBEDDER_MODEL", spec.clone()));
    }
    out
}

/// The value of the setting `key`: the environment's (when not blank), else the
/// configuration file's.
pub fn var(global: &Global, key: &str) -> Option<String> {
    std::env::var(key)
        .ok()
        .filter(|v| !v.trim().is_empty())
        .or_else(|| global.file.get(key).map(str::to_string))
}

/// Reads the configuration file `--config` (or `GRALKOR_CONFIG`) names, and gives
/// the settings clap reads from the environment their file value when neither a flag
/// nor a variable set them.
pub fn apply_file(global: &mut Global, matches: &clap::ArgMatches) -> Result<()> {
    use clap::ValueEnum;
    let Some(path) = global.config.clone() else {
        return Ok(());
    };
    global.file = FileSettings::load(&path, |k| std::env::var(k).ok())?;
    let unset = |id: &str| {
        matches!(
            matches.value_source(id),
            None | Some(clap::parser::ValueSource::DefaultValue)
        )
    };
    let field = |key: &str| format!("{key} (in {})", path.display());
    let invalid = |key: &str, rule: String| Error::Config {
        field: field(key),
        rule,
    };
    if unset("operator")
        && let Some(v) = global.file.get("GRALKOR_OPERATOR")
    {
        global.operator = Some(v.to_string());
    }
    if unset("authorizer")
        && let Some(v) = global.file.get("GRALKOR_AUTHORIZER")
    {
        global.authorizer = AuthorizerKind::from_str(v.trim(), false).map_err(|_| {
            let names: Vec<String> = AuthorizerKind::value_variants()
                .iter()
                .filter_map(|k| k.to_possible_value().map(|p| p.get_name().to_string()))
                .collect();
            invalid(
                "GRALKOR_AUTHORIZER",
                format!("must be one of {} (got `{v}`)", names.join(", ")),
            )
        })?;
    }
    if unset("subject")
        && let Some(v) = global.file.get("GRALKOR_SUBJECT")
    {
        global.subject =
            Some(crate::access::parse_subject(v).map_err(|rule| invalid("GRALKOR_SUBJECT", rule))?);
    }
    #[cfg(feature = "spicedb")]
    {
        if unset("spicedb_endpoint")
            && let Some(v) = global.file.get("GRALKOR_SPICEDB_ENDPOINT")
        {
            global.spicedb_endpoint = Some(v.to_string());
        }
        if unset("spicedb_key")
            && let Some(v) = global.file.get("GRALKOR_SPICEDB_KEY")
        {
            global.spicedb_key = Some(v.to_string());
        }
    }
    tracing::debug!(file = %path.display(), "configuration file read");
    Ok(())
}

/// The platform's data directory for gralkor: `$XDG_DATA_HOME/gralkor`, else
/// `$HOME/.local/share/gralkor` (the XDG default on Linux).
pub fn default_data_dir(var: impl Fn(&str) -> Option<String>) -> Option<std::path::PathBuf> {
    let set = |k: &str| var(k).filter(|v| !v.trim().is_empty());
    if let Some(dir) = set("XDG_DATA_HOME") {
        return Some(std::path::PathBuf::from(dir).join("gralkor"));
    }
    set("HOME").map(|home| {
        std::path::PathBuf::from(home)
            .join(".local")
            .join("share")
            .join("gralkor")
    })
}

/// The library configuration: the environment with the flags on top; with no
/// backend named at all, the embedded server in the platform's data directory
/// ([`default_data_dir`]).
pub fn config(global: &Global) -> Result<Config> {
    let mut overrides = overrides(global);
    let named = |k: &str| overrides.iter().any(|(key, _)| *key == k) || var(global, k).is_some();
    if !named("GRALKOR_DATA_DIR")
        && !named("FALKORDB_HOST")
        && !named("FALKORDB_CLUSTER_NODES")
        && let Some(dir) = default_data_dir(|k| std::env::var(k).ok())
    {
        overrides.push(("GRALKOR_DATA_DIR", dir.display().to_string()));
    }
    let mut config = Config::from_lookup(|key| {
        overrides
            .iter()
            .find(|(k, _)| *k == key)
            .map(|(_, v)| v.clone())
            .or_else(|| var(global, key))
    })?;
    if global.text_only {
        config.models = None;
    }
    Ok(config)
}

/// The default group the settings name (`GRALKOR_DEFAULT_GROUP`,
/// `GRALKOR_DEFAULT_GROUP_MEMBERS`: the environment, else the configuration file).
pub fn default_group(global: &Global) -> Result<Option<DefaultGroup>> {
    DefaultGroup::from_lookup(|k| var(global, k))
}

/// The operator, which a command that reads or writes someone's memory needs.
pub fn operator(global: &Global) -> Result<OperatorId> {
    match global.operator.as_deref() {
        Some(id) if !id.trim().is_empty() => OperatorId::new(id),
        _ => Err(Error::Config {
            field: "operator".into(),
            rule: "must be set with --operator or GRALKOR_OPERATOR: the operator whose \
                   memory this command reads or writes (gralkor never invents one)"
                .into(),
        }),
    }
}

/// The operator when one is given (a command that can do without).
pub fn optional_operator(global: &Global) -> Result<Option<OperatorId>> {
    match global.operator.as_deref() {
        Some(id) if !id.trim().is_empty() => OperatorId::new(id).map(Some),
        _ => Ok(None),
    }
}

/// The Lens `gralkor add --lens global` writes through: appending to the `global`
/// Destination every operator shares.
pub const GLOBAL_LENS: &str = "global";

/// The appending Lens to the default group (registered when one is configured):
/// what `import` writes the workspace through without `--lens`.
pub const DEFAULT_GROUP_LENS: &str = "default-group";

/// The CLI's Destinations and Lenses: the packaged ones (`personal`, `global`,
/// `personal-chat`) and [`GLOBAL_LENS`], so that `global` can be written as well as
/// read (with an authorizer, the library's rule applies: `contribute` on its graph);
/// and, when a default group is configured, its Destination (unless `global`), so
/// that searches read it and `memory_store` writes to it, and the appending Lens
/// [`DEFAULT_GROUP_LENS`] to it, which `import` uses.
pub fn runtime_config(default_group: Option<&DefaultGroup>) -> gralkor::runtime::RuntimeConfig {
    let mut config = gralkor::runtime::RuntimeConfig::new().lens(gralkor::lens::Lens::appending(
        GLOBAL_LENS,
        gralkor::destination::GLOBAL,
    ));
    if let Some(group) = default_group {
        if !group.destination().is_packaged() {
            config = config.destination(group.name());
        }
        config = config.lens(gralkor::lens::Lens::appending(
            DEFAULT_GROUP_LENS,
            group.name(),
        ));
    }
    config
}
