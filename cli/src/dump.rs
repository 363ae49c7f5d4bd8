//! `gralkor dump` and `gralkor restore`: every graph of the server — each
//! Destination's episodes, entities, facts with their four times, communities,
//! Reflection artefacts, the capture buffer and the embedded authorizer's
//! relationships — as JSON Lines, and back into an empty data directory or server
//! (format: `docs/dump-format.md`).

use std::io::{BufReader, BufWriter, Write};
use std::path::{Path, PathBuf};

use clap::Args;
use gralkor::NativeClient;
use gralkor::graph::DumpSummary;

use crate::commands::Out;
use crate::failure::{Failure, Outcome};

#[derive(Debug, Args)]
pub struct DumpArgs {
    /// Write the dump to this file (written whole, then renamed into place) instead of
    /// standard output.
    #[arg(long, short, value_name = "PATH")]
    pub output: Option<PathBuf>,
}

#[derive(Debug, Args)]
pub struct RestoreArgs {
    /// The dump to restore (`-`: standard input).
    #[arg(value_name = "PATH")]
    pub input: PathBuf,
    /// Restore into a server that holds graphs already (a graph the dump holds too is
    /// still refused: nothing is merged or overwritten).
    #[arg(long)]
    pub into_existing: bool,
    /// Embed names, facts and episodes again with the configured embedder instead of
    /// keeping the dump's embeddings (for a move to another embedding model).
    #[arg(long)]
    pub recompute_embeddings: bool,
}

fn counts(s: &DumpSummary) -> String {
    format!(
        "{} graph{} ({} nodes, {} relationships, {} index entries)",
        s.graphs,
        if s.graphs == 1 { "" } else { "s" },
        s.nodes,
        s.relationships,
        s.indices
    )
}

fn io(what: String) -> impl FnOnce(std::io::Error) -> Failure {
    move |e| Failure::Io(what, e)
}

/// `gralkor dump`.
pub async fn dump(client: &NativeClient, args: &DumpArgs, out: Out) -> Outcome {
    let engine = client.storage().engine();
    let Some(path) = args.output.as_deref().filter(|p| *p != Path::new("-")) else {
        // Standard output holds the dump and nothing else.
        let mut stdout = BufWriter::new(std::io::stdout());
        engine.dump(&mut stdout).await?;
        return stdout
            .flush()
            .map_err(io("writing the dump to standard output".into()));
    };
    // Written beside the target and renamed into place: a failed dump leaves no
    // truncated file under the name asked for.
    let partial = path.with_file_name(format!(
        ".{}.partial",
        path.file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_else(|| "dump".into())
    ));
    let file =
        std::fs::File::create(&partial).map_err(io(format!("creating {}", partial.display())))?;
    let mut writer = BufWriter::new(file);
    let written = engine.dump(&mut writer).await;
    let finished = written.map_err(Failure::from).and_then(|summary| {
        let file = writer
            .into_inner()
            .map_err(|e| Failure::Io(format!("writing {}", partial.display()), e.into_error()))?;
        file.sync_all()
            .map_err(io(format!("writing {}", partial.display())))?;
        std::fs::rename(&partial, path).map_err(io(format!("writing {}", path.display())))?;
        Ok(summary)
    });
    let summary = match finished {
        Ok(s) => s,
        Err(e) => {
            let _ = std::fs::remove_file(&partial);
            return Err(e);
        }
    };
    let json = serde_json::json!({
        "output": path.display().to_string(),
        "graphs": summary.graphs, "indices": summary.indices,
        "nodes": summary.nodes, "relationships": summary.relationships,
    });
    out.emit(&json, || {
        format!("dumped {} to {}", counts(&summary), path.display())
    })
}

/// The dump to restore can be opened (checked before anything is started).
pub fn readable(args: &RestoreArgs) -> Outcome {
    if args.input == Path::new("-") {
        return Ok(());
    }
    std::fs::File::open(&args.input)
        .map(drop)
        .map_err(io(format!("reading {}", args.input.display())))
}

/// `gralkor restore`.
pub async fn restore(client: &NativeClient, args: &RestoreArgs, out: Out) -> Outcome {
    let engine = client.storage().engine();
    if args.recompute_embeddings && engine.embedder().is_none() {
        return Err(Failure::Usage(
            "--recompute-embeddings needs an embedder: configure the models \
             (GRALKOR_EMBEDDER_MODEL, or a provider key)"
                .into(),
        ));
    }
    let summary = if args.input == Path::new("-") {
        let mut stdin = BufReader::new(std::io::stdin());
        engine
            .restore(&mut stdin, args.into_existing, args.recompute_embeddings)
            .await?
    } else {
        let file = std::fs::File::open(&args.input)
            .map_err(io(format!("reading {}", args.input.display())))?;
        engine
            .restore(
                &mut BufReader::new(file),
                args.into_existing,
                args.recompute_embeddings,
            )
            .await?
    };
    let json = serde_json::json!({
        "input": args.input.display().to_string(),
        "graphs": summary.graphs, "indices": summary.indices,
        "nodes": summary.nodes, "relationships": summary.relationships,
    });
    out.emit(&json, || {
        format!(
            "restored {} from {}",
            counts(&summary),
            args.input.display()
        )
    })
}
