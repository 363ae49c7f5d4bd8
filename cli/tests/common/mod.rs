//! Running the `gralkor` binary against an embedded FalkorDB in a temporary
//! directory, with none of the caller's provider keys or backend variables.
#![allow(dead_code)]

use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::time::Duration;

use gralkor::falkordb::{EmbeddedConfig, EmbeddedServer, FalkorDb};
use gralkor::graph::{EntityEdge, EntityNode, Timestamp, save_entities, save_facts};

/// The variables that would point the binary somewhere else than the test's own
/// embedded server, or at a model provider.
const SCRUBBED: &[&str] = &[
    "OPENAI_API_KEY",
    "OPENAI_BASE_URL",
    "GOOGLE_API_KEY",
    "FALKORDB_HOST",
    "FALKORDB_PORT",
    "FALKORDB_USERNAME",
    "FALKORDB_PASSWORD",
    "FALKORDB_SSL",
    "FALKORDB_CLUSTER_NODES",
    "GRALKOR_LLM_MODEL",
    "GRALKOR_LLM_SMALL_MODEL",
    "GRALKOR_EMBEDDER_MODEL",
    "GRALKOR_EMBEDDER_DIMENSION",
    "GRALKOR_OPERATOR",
    "GRALKOR_AUTHORIZER",
    "GRALKOR_SPICEDB_ENDPOINT",
    "GRALKOR_SPICEDB_KEY",
    "GRALKOR_SUBJECT",
    "GRALKOR_DATA_DIR",
    "GRALKOR_LOG",
    "GRALKOR_CONFIG",
    "GRALKOR_DEFAULT_GROUP",
    "GRALKOR_DEFAULT_GROUP_MEMBERS",
];

/// A temporary home: the data directory of one embedded FalkorDB.
pub struct Home {
    pub dir: tempfile::TempDir,
}

/// What one run printed and how it ended.
#[derive(Debug)]
pub struct Run {
    pub code: i32,
    pub stdout: String,
    pub stderr: String,
}

impl Run {
    /// What a finished command printed and how it ended.
    pub fn from(output: Output) -> Run {
        Run {
            code: output.status.code().expect("exited, not killed"),
            stdout: String::from_utf8(output.stdout).expect("utf-8 stdout"),
            stderr: String::from_utf8(output.stderr).expect("utf-8 stderr"),
        }
    }

    /// Asserts success and parses standard output as JSON.
    pub fn json(&self) -> serde_json::Value {
        assert_eq!(self.code, 0, "{self:?}");
        serde_json::from_str(&self.stdout)
            .unwrap_or_else(|e| panic!("stdout is not JSON ({e}): {}", self.stdout))
    }

    /// Asserts success.
    pub fn ok(&self) -> &Run {
        assert_eq!(self.code, 0, "{self:?}");
        self
    }
}

impl Home {
    pub fn new() -> Home {
        Home {
            dir: tempfile::Builder::new()
                .prefix("gralkor-cli-")
                .tempdir()
                .unwrap(),
        }
    }

    pub fn data_dir(&self) -> PathBuf {
        self.dir.path().join("data")
    }

    pub fn path(&self) -> &Path {
        self.dir.path()
    }

    /// The binary with this home's data directory and nothing else configured.
    pub fn command(&self) -> Command {
        let mut cmd = Command::new(env!("CARGO_BIN_EXE_gralkor"));
        for var in SCRUBBED {
            cmd.env_remove(var);
        }
        cmd.env("GRALKOR_DATA_DIR", self.data_dir());
        cmd
    }

    /// Runs `gralkor --text-only --operator ada ARGS`.
    pub fn run(&self, args: &[&str]) -> Run {
        self.run_as("ada", args)
    }

    /// Runs `gralkor --text-only --operator OPERATOR ARGS`.
    pub fn run_as(&self, operator: &str, args: &[&str]) -> Run {
        let output = self
            .command()
            .args(["--text-only", "--operator", operator])
            .args(args)
            .output()
            .unwrap();
        Run::from(output)
    }

    /// Runs `gralkor --text-only --authorizer embedded --operator OPERATOR --as SUBJECT
    /// ARGS`.
    pub fn run_guarded(&self, operator: &str, subject: &str, args: &[&str]) -> Run {
        let output = self
            .command()
            .args(["--text-only", "--authorizer", "embedded"])
            .args(["--operator", operator, "--as", subject])
            .args(args)
            .output()
            .unwrap();
        Run::from(output)
    }

    /// Runs `gralkor ARGS` as given.
    pub fn run_raw(&self, args: &[&str]) -> Run {
        Run::from(self.command().args(args).output().unwrap())
    }
}

/// Ada, Lisbon and Porto; Ada lived in Porto until 2025 and lives in Lisbon since.
pub async fn write_graph(home: &Home) -> (EntityNode, EntityNode, EntityEdge, EntityEdge) {
    let server = EmbeddedServer::start(&EmbeddedConfig::new(home.data_dir()))
        .await
        .unwrap();
    let db = FalkorDb::attach(&server, Duration::from_secs(60))
        .await
        .unwrap();
    let mut ada = EntityNode::new("Ada");
    ada.labels = vec!["Entity".into(), "Person".into()];
    let lisbon = EntityNode::new("Lisbon");
    let porto = EntityNode::new("Porto");
    let t = |s: &str| Timestamp::parse_rfc3339(s).unwrap();
    let mut old = EntityEdge::new(ada.uuid, porto.uuid, "LIVES_IN", "Ada lives in Porto");
    old.valid_at = Some(t("2020-01-01T00:00:00Z"));
    old.invalid_at = Some(t("2025-03-01T00:00:00Z"));
    let mut new = EntityEdge::new(ada.uuid, lisbon.uuid, "LIVES_IN", "Ada lives in Lisbon");
    new.valid_at = Some(t("2025-03-01T00:00:00Z"));
    save_entities(&db, "personal/ada", &[ada.clone(), lisbon.clone(), porto])
        .await
        .unwrap();
    save_facts(&db, "personal/ada", &[old.clone(), new.clone()])
        .await
        .unwrap();
    server.shutdown().await.unwrap();
    (ada, lisbon, old, new)
}
