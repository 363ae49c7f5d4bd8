//! `gralkor mcp`.
use gralkor::NativeClient;
use gralkor::client::OperatorId;

use crate::args::McpArgs;
use crate::failure::{Failure, Outcome};

pub async fn serve(_client: &NativeClient, _op: Option<&OperatorId>, _args: &McpArgs) -> Outcome {
    Err(Failure::Unsupported("mcp".into()))
}
