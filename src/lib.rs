//! # gralkor
//!
//! Long-term memory for AI agents (work in progress; see the README).
#![deny(missing_docs)]

mod error;
pub mod falkordb;
pub mod llm;

pub use error::{Error, Result};
