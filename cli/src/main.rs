//! `gralkor`: long-term agent memory on the command line and as an MCP server.
//!
//! See `cli/README.md` for the commands, the exit codes and how to register the MCP
//! server with an MCP client.

mod args;
mod commands;
mod export;
mod failure;
mod graphs;
mod import;
mod mcp;
mod settings;

use std::process::ExitCode;

use clap::Parser;
use gralkor::NativeClient;
use gralkor::client::Client;

use args::{Cli, Command};
use commands::Out;
use failure::{Failure, Outcome};

fn main() -> ExitCode {
    let cli = match Cli::try_parse() {
        Ok(cli) => cli,
        Err(e) => {
            // Help and version are not errors.
            let code = if e.use_stderr() {
                failure::USAGE
            } else {
                failure::OK
            };
            let _ = e.print();
            return ExitCode::from(code);
        }
    };
    logging(cli.global.verbose);
    let json = cli.global.json;
    let runtime = match tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
    {
        Ok(rt) => rt,
        Err(e) => return report(&Failure::Io("starting the async runtime".into(), e), json),
    };
    match runtime.block_on(run(cli)) {
        Ok(()) => ExitCode::SUCCESS,
        Err(f) => report(&f, json),
    }
}

/// The one error line (and, with --json, the error as JSON on standard output).
fn report(failure: &Failure, json: bool) -> ExitCode {
    if json {
        println!(
            "{}",
            serde_json::json!({"error": {"kind": failure.kind(), "message": failure.to_string(),
                                        "exit_code": failure.exit_code()}})
        );
    }
    eprintln!("gralkor: error: {failure}");
    ExitCode::from(failure.exit_code())
}

fn logging(verbose: u8) {
    let default = match verbose {
        0 => "warn",
        1 => "info",
        _ => "debug",
    };
    let filter = tracing_subscriber::EnvFilter::try_from_env("GRALKOR_LOG")
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new(default));
    let _ = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr)
        .with_ansi(std::io::IsTerminal::is_terminal(&std::io::stderr()))
        .with_target(false)
        .try_init();
}

async fn run(cli: Cli) -> Outcome {
    let out = Out {
        json: cli.global.json,
    };
    let global = &cli.global;
    // The operator and the configuration are checked before anything is started.
    let config = settings::config(global)?;
    let operator = match &cli.command {
        Command::BuildIndices => None,
        Command::Status(_) | Command::Mcp(_) => settings::optional_operator(global)?,
        _ => Some(settings::operator(global)?),
    };
    // Groups and membership are the access layer's (its authorizer).
    if matches!(cli.command, Command::Groups | Command::AddMember(_)) {
        return Err(Failure::Unsupported(
            "groups and membership need the access layer's authorizer (issue 15)".into(),
        ));
    }
    let client =
        NativeClient::connect(config.clone(), gralkor::runtime::RuntimeConfig::new()).await?;
    let result = dispatch(&cli.command, &client, &config, operator.as_ref(), out).await;
    // The embedded server is stopped whatever happened; the command's own failure is
    // the one reported.
    let closed = client.shutdown().await;
    result?;
    closed?;
    Ok(())
}

async fn dispatch(
    command: &Command,
    client: &NativeClient,
    config: &gralkor::Config,
    operator: Option<&gralkor::client::OperatorId>,
    out: Out,
) -> Outcome {
    // Every command but status, build-indices and mcp has an operator (checked in run).
    let op = || operator.expect("an operator is required for this command");
    match command {
        Command::Add(a) => commands::add(client, op(), a, out).await,
        Command::Search(a) => commands::search(client, op(), a, out).await,
        Command::Get(a) => commands::get(client, op(), a, out).await,
        Command::Episodes(a) => commands::episodes(client, op(), a, out).await,
        Command::Status(_) => commands::status(client, config, operator, out).await,
        Command::BuildIndices => commands::build_indices(client, out).await,
        Command::BuildCommunities(a) => commands::build_communities(client, op(), a, out).await,
        Command::Resume(a) => commands::resume(client, op(), a, out).await,
        Command::Forget(w) => commands::forget(client, op(), w, out).await,
        Command::Groups | Command::AddMember(_) => unreachable!("refused before connecting"),
        Command::Import(a) => import::run(client, op(), a, out).await,
        Command::Export(a) => export::run(client, op(), a, out).await,
        Command::Mcp(a) => mcp::serve(client, config, operator, a).await,
    }
}
