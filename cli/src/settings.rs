//! From the environment and the flags to a connected client.
//!
//! The flags override the variables `Config::from_lookup` reads; nothing else is
//! interpreted here, so the CLI follows exactly the library's rules (and its error
//! messages) for backends and models.

use gralkor::client::OperatorId;
use gralkor::config::Config;
use gralkor::{Error, Result};

use crate::args::Global;

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
    let named = |k: &str| {
        overrides.iter().any(|(key, _)| *key == k)
            || std::env::var(k).is_ok_and(|v| !v.trim().is_empty())
    };
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
            .or_else(|| std::env::var(key).ok())
    })?;
    if global.text_only {
        config.models = None;
    }
    Ok(config)
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

/// The CLI's Destinations and Lenses: the packaged ones (`personal`, `global`,
/// `personal-chat`) and [`GLOBAL_LENS`], so that `global` can be written as well as
/// read (with an authorizer, the library's rule applies: `contribute` on its graph).
pub fn runtime_config() -> gralkor::runtime::RuntimeConfig {
    gralkor::runtime::RuntimeConfig::new().lens(gralkor::lens::Lens::appending(
        GLOBAL_LENS,
        gralkor::destination::GLOBAL,
    ))
}
