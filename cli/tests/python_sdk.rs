//! `gralkor mcp` driven by a client gralkor did not write: the official Python MCP SDK
//! (`mcp` on PyPI, pinned), installed by this test into the cache
//! (`~/.cache/gralkor/python-mcp-<version>`, `pip install --target`, once, under a lock)
//! and run over stdio and streamable HTTP (test-trees/mcp.md, "a client gralkor did
//! not write"). The client script is `tests/python/mcp_sdk_client.py`.

mod common;

use std::fs::File;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use common::Home;
use tokio::io::{AsyncBufReadExt, BufReader};

/// The SDK version the test pins.
const MCP_SDK: &str = "2.3.0";

fn cache_root() -> PathBuf {
    let var = |k: &str| {
        std::env::var_os(k)
            .filter(|v| !v.is_empty())
            .map(PathBuf::from)
    };
    var("GRALKOR_CACHE_DIR")
        .or_else(|| var("XDG_CACHE_HOME").map(|d| d.join("gralkor")))
        .unwrap_or_else(|| var("HOME").expect("HOME").join(".cache").join("gralkor"))
}

/// The SDK's install directory, installed from PyPI the first time (whole or not at
/// all: into a scratch directory renamed into place, under a lock).
fn python_sdk() -> PathBuf {
    let cache = cache_root();
    std::fs::create_dir_all(&cache).unwrap();
    let target = cache.join(format!("python-mcp-{MCP_SDK}"));
    let lock = File::create(cache.join(".python-mcp.lock")).unwrap();
    lock.lock().unwrap();
    if target.join("mcp").is_dir() {
        return target;
    }
    let scratch = cache.join(format!(".python-mcp-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&scratch);
    let status = Command::new("python3")
        .args([
            "-m",
            "pip",
            "install",
            "--quiet",
            "--disable-pip-version-check",
        ])
        .arg("--target")
        .arg(&scratch)
        .arg(format!("mcp=={MCP_SDK}"))
        .status()
        .expect("python3 runs");
    assert!(status.success(), "pip install mcp=={MCP_SDK} failed");
    let _ = std::fs::remove_dir_all(&target);
    std::fs::rename(&scratch, &target).unwrap();
    target
}

fn script() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/python/mcp_sdk_client.py")
}

/// Runs the client script; asserts it passed every check, and returns its output.
fn run_client(args: &[&str]) -> String {
    let sdk = python_sdk();
    let output = Command::new("python3")
        .arg(script())
        .args(args)
        .env("PYTHONPATH", &sdk)
        .env("PYTHONDONTWRITEBYTECODE", "1")
        .stdin(Stdio::null())
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&output.stdout).to_string();
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        output.status.success(),
        "the Python client failed:\n{stdout}\n{stderr}"
    );
    assert!(
        stdout.lines().any(|l| l.ends_with(" passed, 0 failed")),
        "{stdout}"
    );
    stdout
}

// a client gralkor did not write / the Python SDK over stdio
#[test]
fn the_python_sdk_over_stdio_lists_adds_finds_gets_and_forgets() {
    let home = Home::new();
    let data = home.data_dir();
    let out = run_client(&[
        "stdio",
        env!("CARGO_BIN_EXE_gralkor"),
        data.to_str().unwrap(),
    ]);
    assert!(
        out.contains("three identical adds are one episode"),
        "{out}"
    );
}

// a client gralkor did not write / the Python SDK over streamable HTTP
#[tokio::test(flavor = "multi_thread")]
async fn the_python_sdk_over_http_lists_adds_finds_gets_and_forgets() {
    let home = Home::new();
    let mut server = tokio::process::Command::from(home.command())
        .args([
            "--text-only",
            "--operator",
            "grace",
            "mcp",
            "--http",
            "127.0.0.1:0",
        ])
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .unwrap();
    let mut lines = BufReader::new(server.stderr.take().unwrap()).lines();
    let url = loop {
        let line = lines
            .next_line()
            .await
            .unwrap()
            .expect("the server printed its endpoint");
        if let Some(url) = line.strip_prefix("gralkor mcp: listening on ") {
            break url.to_string();
        }
    };
    tokio::spawn(async move { while let Ok(Some(_)) = lines.next_line().await {} });
    let out = tokio::task::spawn_blocking(move || run_client(&["http", &url]))
        .await
        .unwrap();
    assert!(
        out.contains("three identical adds are one episode"),
        "{out}"
    );
    let pid = server.id().unwrap().to_string();
    assert!(
        Command::new("kill")
            .args(["-TERM", &pid])
            .status()
            .unwrap()
            .success()
    );
    assert_eq!(server.wait().await.unwrap().code(), Some(0));
}
