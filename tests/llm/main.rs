//! The model providers through their real HTTP clients against fakes on loopback:
//! configuration, doubles, Gemini, the limiter, OpenAI, retries; with the
//! `local-embedder` feature, the in-process embedder too.
//!
//! One test binary per layer (`cargo test --test llm`), so `cargo test` links fewer
//! binaries and starts fewer servers; each module is one former test file.

mod llm_support;

mod config;
mod doubles;
mod gemini;
mod limiter;
#[cfg(feature = "local-embedder")]
mod local;
mod openai;
mod retry;
