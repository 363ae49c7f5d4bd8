//! `gralkor`: long-term agent memory on the command line and as an MCP server.
//!
//! See `cli/README.md` for the commands, the exit codes and how to register the MCP
//! server with an MCP client.

mod access;
mod args;
mod commands;
mod config_file;
mod dump;
mod export;
mod failure;
mod graphs;
mod import;
mod mcp;
mod models;
mod settings;

use std::process::ExitCode;

use std::sync::Arc;

use clap::{CommandFactory, FromArgMatches};
use gralkor::NativeClient;
use gralkor::access::{EmbeddedAuthorizer, Subject};
use gralkor::client::Client;
use gralkor::destination::DefaultGroup;

use args::{AuthorizerKind, Cli, Command};
use commands::Out;
use failure::{Failure, Outcome};

fn main() -> ExitCode {
    let parsed = Cli::command()
        .try_get_matches()
        .and_then(|m| Cli::from_arg_matches(&m).map(|cli| (cli, m)));
    let cli = match parsed {
        Ok((mut cli, matches)) => {
            // The configuration file fills what neither a flag nor a variable set.
            if let Err(e) = settings::apply_file(&mut cli.global, &matches) {
                return report(&e.into(), cli.global.json);
            }
            cli
        }
        Err(e) => {
            // Help and version are not errors.
            if !e.use_stderr() {
                let _ = e.print();
                return ExitCode::from(failure::OK);
            }
            // A usage error as every other error: one line (and JSON with --json).
            let json = std::env::args_os().any(|a| a == "--json");
            return report(&Failure::Usage(clap_message(&e)), json);
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

/// clap's error as one line: its message and, when it has one, its tip.
fn clap_message(e: &clap::Error) -> String {
    let rendered = e.render().to_string();
    let mut parts = Vec::new();
    for line in rendered.lines().map(str::trim) {
        if line.is_empty() || line.starts_with("Usage:") || line.starts_with("For more") {
            continue;
        }
        parts.push(line.strip_prefix("error: ").unwrap_or(line).to_string());
    }
    format!("{} (see --help)", parts.join(" "))
}

/// The cheap checks of a command, made before anything is started (no FalkorDB, no
/// model): what a flag was given wrong is named by the flag. Returns `add`'s content.
fn precheck(
    command: &Command,
    default_group: Option<&DefaultGroup>,
) -> Outcome<Option<gralkor::client::Content>> {
    match command {
        Command::Add(a) => Ok(Some(commands::add_content(a)?)),
        Command::Search(a) => {
            if !(1..=200).contains(&a.limit) {
                return Err(gralkor::Error::InvalidInput {
                    field: "--limit (-n)".into(),
                    rule: format!("must be from 1 to 200 (got {})", a.limit),
                }
                .into());
            }
            destinations_known(&a.destinations, default_group)?;
            Ok(None)
        }
        Command::Episodes(a) => {
            destinations_known(&a.destinations, default_group)?;
            Ok(None)
        }
        Command::Forget(f) => {
            // Asked before anything starts: a "no" costs nothing.
            commands::confirm_forget(f)?;
            Ok(None)
        }
        Command::Restore(a) => {
            dump::readable(a)?;
            Ok(None)
        }
        _ => Ok(None),
    }
}

/// Each `--destination` names a registered Destination.
fn destinations_known(names: &[String], default_group: Option<&DefaultGroup>) -> Outcome {
    let runtime = gralkor::runtime::Runtime::new(settings::runtime_config(default_group))?;
    let snapshot = runtime.snapshot();
    for name in names {
        snapshot.destination("--destination (-d)", name)?;
    }
    Ok(())
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
    // The models' check touches nobody's memory: no operator, no authorizer.
    if let Command::Models(m) = &cli.command {
        return models::run(global, m, out).await;
    }
    if let Command::SchemaWrite = &cli.command {
        return schema_write(global, out).await;
    }
    // Who asks, the operator and the configuration are checked before anything is
    // started.
    let guarded = global.authorizer != AuthorizerKind::None;
    let subject = global.subject.as_ref();
    if guarded && subject.is_none() {
        return Err(Failure::Usage(
            "an authorizer is configured (--authorizer embedded|spicedb / GRALKOR_AUTHORIZER): say \
             who asks with --as person:ID|agent:ID or GRALKOR_SUBJECT (gralkor never \
             invents one)"
                .into(),
        ));
    }
    if !guarded {
        match &cli.command {
            Command::Groups => return Err(access::needs_authorizer("groups")),
            Command::AddMember(_) => return Err(access::needs_authorizer("add-member")),
            _ => {}
        }
    }
    let operator = match &cli.command {
        Command::BuildIndices
        | Command::Groups
        | Command::AddMember(_)
        | Command::Dump(_)
        | Command::Restore(_) => None,
        Command::Status(_)
        | Command::Mcp(_)
        | Command::Forget(args::ForgetArgs {
            what: args::ForgetCommand::Operator { .. },
            ..
        }) => settings::optional_operator(global)?,
        _ => Some(settings::operator(global)?),
    };
    // The default group is read first: `--destination` may name it.
    let default_group = settings::default_group(global)?;
    let content = precheck(&cli.command, default_group.as_ref())?;
    let config = settings::config(global)?;
    let mut client = NativeClient::connect(
        config.clone(),
        settings::runtime_config(default_group.as_ref()),
    )
    .await?;
    match global.authorizer {
        AuthorizerKind::None => {}
        AuthorizerKind::Embedded => {
            // The relationships live on the same FalkorDB server, in `gralkor/access`.
            let db = client.storage().db().clone();
            client = client.with_authorizer(Arc::new(EmbeddedAuthorizer::new(db)))?;
        }
        #[cfg(feature = "spicedb")]
        AuthorizerKind::Spicedb => {
            let authz = match spicedb(global).await {
                Ok(a) => a,
                Err(e) => {
                    let _ = client.shutdown().await;
                    return Err(e);
                }
            };
            client = client.with_authorizer(Arc::new(authz))?;
        }
    }
    // The default group's configured members, written at startup (idempotently: one
    // read, a write only when one is missing), as the OpenClaw plugin's service does —
    // except by `dump` and `restore`, which copy the relationships as they are (a
    // restore needs an empty target).
    let copies = matches!(cli.command, Command::Dump(_) | Command::Restore(_));
    let ensured = match (client.authorizer(), &default_group) {
        (Some(authz), Some(group)) if !copies => {
            group.ensure_members(authz.as_ref()).await.map(|_| ())
        }
        _ => Ok(()),
    };
    if let Err(e) = ensured {
        let _ = client.shutdown().await;
        return Err(e.into());
    }
    let result = dispatch(
        &cli.command,
        &client,
        &config,
        default_group.as_ref(),
        operator.as_ref(),
        subject,
        content,
        out,
    )
    .await;
    // The embedded server is stopped whatever happened; the command's own failure is
    // the one reported.
    let closed = client.shutdown().await;
    result?;
    closed?;
    Ok(())
}

/// `gralkor schema-write`: connecting writes the schema (`SpiceDbAuthorizer::connect`).
#[cfg(feature = "spicedb")]
async fn schema_write(global: &args::Global, out: Out) -> Outcome {
    spicedb(global).await?;
    let endpoint = global.spicedb_endpoint.clone().unwrap_or_default();
    out.emit(
        &serde_json::json!({"schema": "written", "endpoint": endpoint}),
        || format!("schema written to {endpoint}"),
    )
}

#[cfg(not(feature = "spicedb"))]
async fn schema_write(_global: &args::Global, _out: Out) -> Outcome {
    Err(Failure::Usage(
        "schema-write needs a gralkor built with the `spicedb` feature".into(),
    ))
}

/// The SpiceDB server `--spicedb-endpoint` and `GRALKOR_SPICEDB_KEY` name, connected
/// (the schema written, so a wrong key or an unreachable server fails here).
#[cfg(feature = "spicedb")]
async fn spicedb(global: &args::Global) -> Outcome<gralkor::access::SpiceDbAuthorizer> {
    let missing = |what: &str| Failure::Usage(format!("--authorizer spicedb needs {what}"));
    let endpoint = global
        .spicedb_endpoint
        .as_deref()
        .ok_or_else(|| missing("--spicedb-endpoint URL (or GRALKOR_SPICEDB_ENDPOINT)"))?;
    let key = global
        .spicedb_key
        .as_deref()
        .ok_or_else(|| missing("the preshared key in GRALKOR_SPICEDB_KEY (or --spicedb-key)"))?;
    Ok(gralkor::access::SpiceDbAuthorizer::connect(endpoint, key).await?)
}

#[allow(clippy::too_many_arguments)] // one call site: `run`'s pieces, passed through
async fn dispatch(
    command: &Command,
    client: &NativeClient,
    config: &gralkor::Config,
    default_group: Option<&DefaultGroup>,
    operator: Option<&gralkor::client::OperatorId>,
    subject: Option<&Subject>,
    content: Option<gralkor::client::Content>,
    out: Out,
) -> Outcome {
    // Every command but status, build-indices, mcp and forget operator has an operator
    // (checked in run);
    // with an authorizer every one has a subject (checked in run too).
    let op = || operator.expect("an operator is required for this command");
    let who = || subject.expect("a subject is required with an authorizer");
    match command {
        Command::Add(a) => {
            let content = content.expect("add's content is read by precheck");
            commands::add(client, op(), subject, a, content, out).await
        }
        Command::Search(a) => commands::search(client, op(), subject, a, out).await,
        Command::Get(a) => commands::get(client, op(), subject, a, out).await,
        Command::Episodes(a) => commands::episodes(client, op(), subject, a, out).await,
        Command::Status(_) => commands::status(client, config, operator, subject, out).await,
        Command::BuildIndices => commands::build_indices(client, out).await,
        Command::BuildCommunities(a) => {
            commands::build_communities(client, op(), subject, a, out).await
        }
        Command::Resume(a) => commands::resume(client, op(), subject, a, out).await,
        Command::Forget(args::ForgetArgs {
            what: w @ args::ForgetCommand::Operator { id },
            ..
        }) => {
            // The operator forgotten is named; --operator is not needed.
            let target = gralkor::client::OperatorId::new(id.clone())?;
            commands::forget(client, operator.unwrap_or(&target), subject, w, out).await
        }
        Command::Forget(f) => commands::forget(client, op(), subject, &f.what, out).await,
        Command::Groups => access::groups(client, who(), out).await,
        Command::AddMember(a) => access::add_member(client, who(), a, out).await,
        Command::Import(a) => import::run(client, op(), subject, a, out).await,
        Command::Export(a) => export::run(client, op(), subject, a, out).await,
        Command::Mcp(a) => mcp::serve(client, config, default_group, operator, subject, a).await,
        Command::Models(_) => unreachable!("`models` is run before a client connects"),
        Command::Dump(a) => dump::dump(client, a, out).await,
        Command::Restore(a) => dump::restore(client, a, out).await,
        // Run before any client exists (see `run`).
        Command::SchemaWrite => Ok(()),
    }
}
