//! `gralkor import`.
use gralkor::NativeClient;
use gralkor::client::OperatorId;

use crate::args::ImportArgs;
use crate::commands::Out;
use crate::failure::{Failure, Outcome};

pub async fn run(
    _client: &NativeClient,
    _op: &OperatorId,
    _args: &ImportArgs,
    _out: Out,
) -> Outcome {
    Err(Failure::Unsupported("import".into()))
}
