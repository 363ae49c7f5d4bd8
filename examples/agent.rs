//! A complete agent with long-term memory against an OpenAI-compatible endpoint, over
//! two sessions: what it learns in the first it recalls in the second.
//!
//! ```text
//! OPENAI_API_KEY=sk-… cargo run --example agent
//! OPENAI_BASE_URL=http://localhost:11434/v1 GRALKOR_LLM_MODEL=openai:qwen3 cargo run --example agent
//! ```
//!
//! The loop (`examples/support/agent_loop.rs`, which `tests/agent_loop.rs` drives
//! against a loopback provider) recalls before each turn and injects the memory
//! block, offers the model `memory_search` and `memory_add` (with `memory_search`
//! forced on the first call), runs the tools, and captures the turn into the durable
//! capture buffer. Session 1 is flushed when it ends; session 2, a new session id,
//! starts with what session 1 left in memory.
//!
//! The memory itself is configured like the quickstart's (`GRALKOR_DATA_DIR`, or an
//! embedded FalkorDB in a temporary directory; the models from the same
//! variables). Without an endpoint the example exits at once, naming the variables.

use std::sync::Arc;
use std::time::Duration;

use gralkor::agent::capture::{CaptureBuffer, CaptureConfig};
use gralkor::client::{Client, NativeClient, OperatorId};
use gralkor::config::Config;
use gralkor::runtime::RuntimeConfig;

#[path = "support/agent_loop.rs"]
mod agent_loop;
mod support;

use agent_loop::{Agent, Endpoint};

#[tokio::main]
async fn main() {
    let env = |k: &str| std::env::var(k).ok();
    let endpoint = match Endpoint::from_lookup(env) {
        Ok(Some(endpoint)) => endpoint,
        Ok(None) => {
            eprintln!(
                "examples/agent needs an OpenAI-compatible chat endpoint: set OPENAI_API_KEY \
                 (api.openai.com) or OPENAI_BASE_URL (e.g. http://localhost:11434/v1), and \
                 optionally GRALKOR_LLM_MODEL=openai:<model> (default {})",
                agent_loop::DEFAULT_MODEL
            );
            std::process::exit(2);
        }
        Err(e) => return support::exit_on_error(Err(e)),
    };
    support::exit_on_error(try_main(endpoint).await);
}

async fn try_main(endpoint: Endpoint) -> gralkor::Result<()> {
    let temp = tempfile::Builder::new()
        .prefix("gralkor-agent-")
        .tempdir()
        .map_err(|e| gralkor::Error::Io {
            context: "creating a temporary data directory".into(),
            source: e,
        })?;
    let env = |k: &str| std::env::var(k).ok().filter(|v| !v.trim().is_empty());
    let backend_set = env("GRALKOR_DATA_DIR").is_some() || env("FALKORDB_HOST").is_some();
    let config = Config::from_lookup(|k| match k {
        "GRALKOR_DATA_DIR" if !backend_set => Some(temp.path().display().to_string()),
        _ => env(k),
    })?;
    println!("memory: {}", config.describe());
    println!("chat: {} at {}\n", endpoint.model, endpoint.base_url);

    let client = NativeClient::connect(config, RuntimeConfig::new()).await?;
    let buffer = CaptureBuffer::native(&client, CaptureConfig::new()).await?;
    let memory: Arc<dyn Client> = Arc::new(client.clone());
    let agent = Agent::new(
        endpoint,
        memory,
        buffer.clone(),
        OperatorId::new("ada")?,
        "Susu",
        "Ada",
    )?;

    println!("— session 1 —");
    for prompt in [
        "Hi, I'm Ada. I just moved to Lisbon, and I keep two beehives on my roof.",
        "Please remember that my sister Bea visits every December.",
    ] {
        say(&agent, "session-1", prompt).await?;
    }
    // The session ends: its turns are written to memory (and extracted, with a model).
    agent
        .buffer()
        .flush_and_await("session-1", Duration::from_secs(120))
        .await?;
    client.await_background_writes().await;

    println!("— session 2 (a new session id) —");
    let answer = say(
        &agent,
        "session-2",
        "Remind me: where do I live, and who visits me in December?",
    )
    .await?;
    if let Some(block) = &answer.memory_block {
        println!("recalled before the turn:\n{block}\n");
    }

    // One call shuts down: the client drains the capture buffer first (bounded by
    // `CaptureConfig::shutdown_timeout`, 30 s), then stops the memory.
    client.shutdown().await?;
    println!("shut down cleanly");
    Ok(())
}

async fn say(agent: &Agent, session: &str, prompt: &str) -> gralkor::Result<agent_loop::Answer> {
    println!("Ada: {prompt}");
    let answer = agent.turn(session, prompt).await?;
    println!(
        "Susu: {}  ({} model call(s))\n",
        answer.text, answer.iterations
    );
    Ok(answer)
}
