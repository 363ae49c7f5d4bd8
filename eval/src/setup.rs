//! What the two binaries share: arguments, the database and the models from the
//! environment.

use std::path::PathBuf;

use gralkor::config::Config;
use gralkor::falkordb::FalkorDb;
use gralkor::llm::Models;

use crate::{EvalError, Result};

/// `--name value` options and bare flags, in order.
#[derive(Debug, Clone, Default)]
pub struct Args {
    pairs: Vec<(String, Option<String>)>,
}

impl Args {
    /// Parses `args` (without the program name): `--name value` pairs, and the
    /// `flags` given, which take no value.
    pub fn parse(args: impl IntoIterator<Item = String>, flags: &[&str]) -> Result<Args> {
        let mut pairs = Vec::new();
        let mut it = args.into_iter();
        while let Some(a) = it.next() {
            let Some(name) = a.strip_prefix("--") else {
                return Err(arg_error(&a, "is not an option (options start with --)"));
            };
            if flags.contains(&name) {
                pairs.push((name.to_owned(), None));
            } else {
                let v = it.next().ok_or_else(|| arg_error(&a, "needs a value"))?;
                pairs.push((name.to_owned(), Some(v)));
            }
        }
        Ok(Args { pairs })
    }

    /// The last value of `--name`.
    pub fn value(&self, name: &str) -> Option<&str> {
        self.pairs
            .iter()
            .rev()
            .find(|(n, _)| n == name)
            .and_then(|(_, v)| v.as_deref())
    }

    /// Every value of `--name`, in order.
    pub fn values(&self, name: &str) -> Vec<&str> {
        self.pairs
            .iter()
            .filter(|(n, _)| n == name)
            .filter_map(|(_, v)| v.as_deref())
            .collect()
    }

    /// Whether the flag `--name` was given.
    pub fn flag(&self, name: &str) -> bool {
        self.pairs.iter().any(|(n, v)| n == name && v.is_none())
    }

    /// Checks that every option given is one of `known`.
    pub fn only(&self, known: &[&str]) -> Result<()> {
        match self
            .pairs
            .iter()
            .find(|(n, _)| !known.contains(&n.as_str()))
        {
            Some((n, _)) => Err(arg_error(
                &format!("--{n}"),
                &format!("is unknown (known: --{})", known.join(", --")),
            )),
            None => Ok(()),
        }
    }
}

fn arg_error(arg: &str, rule: &str) -> EvalError {
    EvalError::data("<command line>", arg, rule)
}

/// The database and the models of a run, from the environment (see
/// [`gralkor::config`]): with no backend configured, an embedded FalkorDB in a
/// temporary directory removed at the end.
pub struct Setup {
    /// The configuration read.
    pub config: Config,
    /// The database handle.
    pub db: FalkorDb,
    /// The models, when configured and built.
    pub models: Option<Models>,
    _temp: Option<tempfile::TempDir>,
}

impl Setup {
    /// Reads the environment, connects (or starts an embedded server) and, when
    /// `build_models`, builds and warms up the configured models.
    pub async fn from_env(build_models: bool) -> Result<Setup> {
        let env = |k: &str| std::env::var(k).ok().filter(|v| !v.trim().is_empty());
        let backend_set = env("GRALKOR_DATA_DIR").is_some()
            || env("FALKORDB_HOST").is_some()
            || env("FALKORDB_CLUSTER_NODES").is_some();
        let temp = if backend_set {
            None
        } else {
            Some(
                tempfile::Builder::new()
                    .prefix("gralkor-eval-")
                    .tempdir()
                    .map_err(|e| EvalError::io("creating a temporary data directory", e))?,
            )
        };
        let dir: Option<PathBuf> = temp.as_ref().map(|t| t.path().to_owned());
        let config = Config::from_lookup(|k| match (k, &dir) {
            ("GRALKOR_DATA_DIR", Some(d)) => Some(d.display().to_string()),
            _ => env(k),
        })?;
        let db = FalkorDb::connect(config.falkordb.clone()).await?;
        let models = match (&config.models, build_models) {
            (Some(m), true) => {
                let models = m.build()?;
                models.embedder.warm_up().await?;
                Some(models)
            }
            _ => None,
        };
        Ok(Setup {
            config,
            db,
            models,
            _temp: temp,
        })
    }

    /// Builds and warms up the configured models (once).
    pub async fn build_models(&mut self) -> Result<()> {
        if self.models.is_none()
            && let Some(m) = &self.config.models
        {
            let models = m.build()?;
            models.embedder.warm_up().await?;
            self.models = Some(models);
        }
        Ok(())
    }

    /// Stops an embedded server cleanly.
    pub async fn shutdown(self) -> Result<()> {
        self.db.shutdown().await?;
        Ok(())
    }
}

/// Ends a binary on `result`'s error: the message and its causes, exit status 1.
pub fn exit_on_error(result: Result<()>) {
    if let Err(e) = result {
        eprintln!("error: {e}");
        let mut source = std::error::Error::source(&e);
        while let Some(cause) = source {
            eprintln!("  caused by: {cause}");
            source = cause.source();
        }
        std::process::exit(1);
    }
}
