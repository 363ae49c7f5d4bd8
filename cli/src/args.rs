//! The command line: global settings and the subcommands (clap derive).

use std::path::PathBuf;

use clap::{Args, Parser, Subcommand, ValueEnum};

/// gralkor: long-term memory for AI agents, on the command line and as an MCP server.
///
/// Settings come from the same environment variables as the library's
/// `Config::from_env` (GRALKOR_DATA_DIR, FALKORDB_HOST, FALKORDB_PORT, GRALKOR_LLM_MODEL,
/// GRALKOR_EMBEDDER_MODEL, OPENAI_API_KEY, GOOGLE_API_KEY, …); the flags below override
/// them. The operator (whose `personal` memory a command reads and writes) comes from
/// --operator or GRALKOR_OPERATOR and is never invented.
///
/// Access: without an authorizer (`--authorizer none`, the default) nothing is checked —
/// whoever names an operator reads their memory. With `--authorizer embedded` (the
/// relationships live in the same FalkorDB, graph `gralkor/access`) every request is
/// made as the subject given with --as or GRALKOR_SUBJECT (`person:ID` or `agent:ID`,
/// required, never invented), and refused requests exit 6.
///
/// Exit codes: 0 success; 1 failure; 2 usage error (also: an authorizer without --as,
/// `groups` or `add-member` without an authorizer); 3 invalid input (nothing was
/// written); 4 not found; 5 configuration error; 6 refused (not permitted by the
/// authorizer) or not available yet; 75 temporary failure (trying again can help).
#[derive(Debug, Parser)]
#[command(name = "gralkor", version, about, long_about, max_term_width = 100)]
pub struct Cli {
    #[command(flatten)]
    pub global: Global,
    #[command(subcommand)]
    pub command: Command,
}

/// Settings every command shares.
#[derive(Debug, Args)]
pub struct Global {
    /// A JSON file of settings: an object whose keys are the variables named here
    /// (GRALKOR_DATA_DIR, GRALKOR_SPICEDB_KEY, GRALKOR_DEFAULT_GROUP, …), `${VAR}` in a
    /// value expanding the environment variable VAR (unset: an error naming both;
    /// `$${` is a literal `${`). Precedence: flags, then the environment, then the file.
    #[arg(long, global = true, env = "GRALKOR_CONFIG", value_name = "FILE")]
    pub config: Option<PathBuf>,

    /// The settings the configuration file gave (read after parsing).
    #[arg(skip)]
    pub file: crate::config_file::FileSettings,

    /// The operator the command acts for (their `personal` Destination).
    #[arg(long, global = true, env = "GRALKOR_OPERATOR", value_name = "ID")]
    pub operator: Option<String>,

    /// The embedded FalkorDB's data directory (overrides GRALKOR_DATA_DIR).
    #[arg(long, global = true, value_name = "DIR")]
    pub data_dir: Option<PathBuf>,

    /// A remote FalkorDB's host (overrides FALKORDB_HOST; wins over the embedded one).
    #[arg(long, global = true, value_name = "HOST")]
    pub falkordb_host: Option<String>,

    /// A remote FalkorDB's port (overrides FALKORDB_PORT).
    #[arg(long, global = true, value_name = "PORT")]
    pub falkordb_port: Option<u16>,

    /// The language model, `provider:model` (overrides GRALKOR_LLM_MODEL).
    #[arg(long, global = true, value_name = "SPEC")]
    pub llm_model: Option<String>,

    /// The embedder, `provider:model` (overrides GRALKOR_EMBEDDER_MODEL).
    #[arg(long, global = true, value_name = "SPEC")]
    pub embedder_model: Option<String>,

    /// No models at all: episodes are stored and searched by their text only (no
    /// embedder is loaded, nothing is extracted).
    #[arg(long, global = true)]
    pub text_only: bool,

    /// Who checks permissions: `none` (nothing is checked), `embedded` (relationships
    /// in the same FalkorDB server, graph `gralkor/access`) or, built with the
    /// `spicedb` feature, `spicedb` (a SpiceDB server: --spicedb-endpoint and
    /// GRALKOR_SPICEDB_KEY).
    #[arg(
        long,
        global = true,
        env = "GRALKOR_AUTHORIZER",
        value_enum,
        default_value_t = AuthorizerKind::None
    )]
    pub authorizer: AuthorizerKind,

    /// The SpiceDB server of `--authorizer spicedb`: `http://host:port` (plaintext,
    /// SpiceDB's --grpc-no-tls) or `https://host:port`.
    #[cfg(feature = "spicedb")]
    #[arg(
        long,
        global = true,
        env = "GRALKOR_SPICEDB_ENDPOINT",
        value_name = "URL"
    )]
    pub spicedb_endpoint: Option<String>,

    /// The SpiceDB server's preshared key (prefer the variable: a flag shows in the
    /// process list).
    #[cfg(feature = "spicedb")]
    #[arg(
        long,
        global = true,
        env = "GRALKOR_SPICEDB_KEY",
        value_name = "KEY",
        hide_env_values = true
    )]
    pub spicedb_key: Option<String>,

    /// Who asks, `person:ID` or `agent:ID`: every request is made as them (required
    /// with an authorizer).
    #[arg(
        long = "as",
        global = true,
        env = "GRALKOR_SUBJECT",
        value_name = "person:ID|agent:ID",
        value_parser = crate::access::parse_subject
    )]
    pub subject: Option<gralkor::access::Subject>,

    /// Machine-readable output: one JSON document on standard output.
    #[arg(long, global = true)]
    pub json: bool,

    /// Log what the library does to standard error (-v info, -vv debug).
    #[arg(short, long, global = true, action = clap::ArgAction::Count)]
    pub verbose: u8,
}

/// Who checks permissions.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum AuthorizerKind {
    /// Nothing is checked: whoever names an operator reads their memory.
    None,
    /// Relationships in the same FalkorDB server (graph `gralkor/access`), evaluated by
    /// gralkor with the access schema.
    Embedded,
    /// A SpiceDB server holding the access schema (written on connect).
    #[cfg(feature = "spicedb")]
    Spicedb,
}

#[derive(Debug, Subcommand)]
pub enum Command {
    /// Remember text or a file, through an appending Lens (synchronously: prints the
    /// episode id). Adding the same content twice writes it once.
    Add(AddArgs),
    /// Search memory: episodes (default), facts or entities.
    Search(SearchArgs),
    /// One episode or fact by id (looked up in every Destination unless --destination).
    Get(GetArgs),
    /// The most recent episodes, per Destination.
    Episodes(EpisodesArgs),
    /// What is configured and what each Destination holds.
    Status(StatusArgs),
    /// Build the indices of every graph (idempotent). An admin operation.
    BuildIndices,
    /// Detect communities in one Destination's graph. An admin operation.
    BuildCommunities(BuildCommunitiesArgs),
    /// Extract pending episodes (stored while no language model was configured, or
    /// whose extraction failed) into entities and facts.
    Resume(ResumeArgs),
    /// Forget memory. On a terminal it asks first (answer `y`); `--yes` skips the
    /// question. Without a terminal (a script, an agent's shell) it does not ask.
    Forget(ForgetArgs),
    /// The groups (Destination graphs: `global`, `personal/ada`, `team-x`) the subject
    /// (--as) may read, with their members. Needs an authorizer.
    Groups,
    /// Add a person or an agent to a group. Needs an authorizer.
    ///
    /// Allowed when the subject (--as) is a member of the group already; or the group
    /// has no members yet — the subject founds it, written as its first member together
    /// with the new one; or the group is the subject's own personal graph
    /// `personal/<their id>` (a personal graph's members are added by its owner only).
    /// Otherwise refused with exit 6.
    AddMember(AddMemberArgs),
    /// Import a workspace's markdown memory files (USER.md, MEMORY.md, memory/*.md)
    /// and JSONL session transcripts. A re-run writes nothing.
    Import(ImportArgs),
    /// Export a Destination's graph (entities and facts with their times) as JSON or
    /// Graphviz DOT.
    Export(ExportArgs),
    /// Serve the memory tools over the Model Context Protocol (stdio by default).
    Mcp(McpArgs),
    /// The configured models: `models check` tells whether they will work.
    #[command(subcommand)]
    Models(crate::models::ModelsCommand),
    /// Write every graph (episodes, entities, facts with their times, communities,
    /// artefacts, the capture buffer, the authorizer's relationships) as JSON Lines.
    /// An admin operation.
    Dump(crate::dump::DumpArgs),
    /// Restore a dump into an empty data directory or server. An admin operation.
    Restore(crate::dump::RestoreArgs),
    /// Write (or update) the authorization schema on the SpiceDB server of
    /// `--spicedb-endpoint` and GRALKOR_SPICEDB_KEY (feature `spicedb`). Needs no
    /// operator, subject or FalkorDB; idempotent.
    SchemaWrite,
}

/// What a piece of content is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum Kind {
    /// A conversation (message episode).
    Conversation,
    /// A document (text episode).
    Document,
    /// A structured record: the content must be a JSON object.
    Json,
}

#[derive(Debug, Args)]
pub struct AddArgs {
    /// The text to remember (or use --file).
    #[arg(required_unless_present = "file", conflicts_with = "file")]
    pub text: Option<String>,
    /// Read the content from this file (`-`: standard input).
    #[arg(long, short, value_name = "PATH")]
    pub file: Option<PathBuf>,
    /// What the content is.
    #[arg(long, value_enum, default_value_t = Kind::Document)]
    pub kind: Kind,
    /// The appending Lens to write through (its Destination is where it lands):
    /// `personal-chat` (the operator's `personal` Destination) or `global` (the
    /// Destination every operator shares; with an authorizer, the subject needs
    /// `contribute` on graph `global`).
    #[arg(long, default_value = "personal-chat")]
    pub lens: String,
    /// Where the content came from.
    #[arg(long, default_value = "cli")]
    pub source_description: String,
    /// The replay-stable ingestion id (default: derived from the content).
    #[arg(long)]
    pub id: Option<String>,
    /// The conversation session it belongs to (so `forget session` can remove it).
    #[arg(long, value_name = "ID")]
    pub session: Option<String>,
}

/// What a search returns.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum ResultKind {
    /// Episodes (what was said or read).
    Episodes,
    /// Facts (extracted relationships, with their times).
    Facts,
    /// Entities.
    Nodes,
}

#[derive(Debug, Args)]
pub struct SearchArgs {
    /// What to look for.
    pub query: String,
    /// What to return.
    #[arg(long = "type", value_enum, default_value_t = ResultKind::Episodes)]
    pub result_type: ResultKind,
    /// Only these Destinations (repeatable; default: every accessible one). `--group`
    /// is the OpenClaw plugin's name for it; a session group `session-<id>` may be
    /// named too.
    #[arg(
        long = "destination",
        visible_alias = "group",
        short = 'd',
        value_name = "NAME"
    )]
    pub destinations: Vec<String>,
    /// Only what these Lenses wrote (repeatable; episodes and facts).
    #[arg(long = "lens", value_name = "NAME")]
    pub lenses: Vec<String>,
    /// Results per Destination (1-200).
    #[arg(long, short = 'n', default_value_t = 10)]
    pub limit: usize,
    /// As the OpenClaw plugin: `long-term` (every accessible Destination), `session`
    /// (only the session group of --session) or `all` (both). Not with --destination.
    #[arg(long, value_enum, requires = "session")]
    pub scope: Option<SearchScope>,
    /// The conversation whose session group (`session-<id>`) --scope reads.
    #[arg(long, value_name = "ID")]
    pub session: Option<String>,
    /// What was true at this instant (RFC 3339, e.g. 2024-06-01T00:00:00Z) instead of
    /// what is true now: facts valid then (a fact invalidated later is still found),
    /// episodes that had happened by then. Episodes and facts only.
    #[arg(long, value_name = "RFC3339", value_parser = parse_time)]
    pub as_of: Option<gralkor::storage::Timestamp>,
}

/// `gralkor search --scope`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum SearchScope {
    /// Every accessible Destination (never a session group).
    LongTerm,
    /// Only the session group of --session.
    Session,
    /// Both.
    All,
}

fn parse_time(text: &str) -> Result<gralkor::storage::Timestamp, String> {
    text.trim()
        .parse()
        .map_err(|e: gralkor::Error| format!("must be an RFC 3339 date-time: {e}"))
}

#[derive(Debug, Args)]
pub struct GetArgs {
    /// The episode's or fact's uuid.
    pub uuid: uuid::Uuid,
    /// The Destination holding it (default: look in every one).
    #[arg(long, short = 'd', value_name = "NAME")]
    pub destination: Option<String>,
}

#[derive(Debug, Args)]
pub struct EpisodesArgs {
    /// Only these Destinations (repeatable; default: every accessible one).
    #[arg(long = "destination", short = 'd', value_name = "NAME")]
    pub destinations: Vec<String>,
    /// How many of the most recent episodes per Destination.
    #[arg(long, default_value_t = 10)]
    pub last: usize,
}

#[derive(Debug, Args)]
pub struct StatusArgs {}

#[derive(Debug, Args)]
pub struct BuildCommunitiesArgs {
    /// The Destination.
    #[arg(long, short = 'd', default_value = "personal")]
    pub destination: String,
}

#[derive(Debug, Args)]
pub struct ResumeArgs {
    /// Only these Destinations (repeatable; default: every accessible one).
    #[arg(long = "destination", short = 'd', value_name = "NAME")]
    pub destinations: Vec<String>,
}

/// `forget`: what, and whether the question is already answered.
#[derive(Debug, Args)]
pub struct ForgetArgs {
    /// Do not ask for confirmation on a terminal.
    #[arg(long, short = 'y', global = true)]
    pub yes: bool,
    #[command(subcommand)]
    pub what: ForgetCommand,
}

/// What to forget, with the permission checks of the authorizer when one is
/// configured (a refusal exits 6 and removes nothing).
#[derive(Debug, Subcommand)]
pub enum ForgetCommand {
    /// One episode by id (looked up in every Destination unless --destination).
    Episode {
        /// The episode's uuid.
        uuid: uuid::Uuid,
        /// The Destination holding it.
        #[arg(long, short = 'd', value_name = "NAME")]
        destination: Option<String>,
    },
    /// Every episode of one conversation session, in every Destination of the
    /// operator, with the facts only they supported (the AOF is rewritten). With an
    /// authorizer: `delete` on each episode outside your own personal graph.
    Session {
        /// The session id.
        id: String,
    },
    /// A Destination's whole graph for the operator (its members stay). With an
    /// authorizer: your own personal graph, or a shared one you are a member of and
    /// wrote everything in.
    Destination {
        /// The Destination.
        name: String,
    },
    /// Everything of one operator: their personal graph, removed whole and durably
    /// (the embedded server's AOF is rewritten).
    Operator {
        /// The operator id.
        id: String,
    },
}

#[derive(Debug, Args)]
pub struct AddMemberArgs {
    /// The group: a Destination's graph id (`global`, `personal/ada`, `team-x`).
    pub group: String,
    /// Who to add: `person:ID` or `agent:ID`.
    #[arg(value_name = "person:ID|agent:ID")]
    pub member: String,
}

#[derive(Debug, Args)]
pub struct ImportArgs {
    /// The workspace holding USER.md, MEMORY.md and memory/*.md.
    #[arg(long, default_value = ".", value_name = "DIR")]
    pub workspace: PathBuf,
    /// Also import the JSONL session transcripts in this directory (one conversation
    /// episode per file; the file name is the session id).
    #[arg(long, value_name = "DIR")]
    pub sessions: Option<PathBuf>,
    /// Skip the workspace's markdown files (import only --sessions).
    #[arg(long)]
    pub no_files: bool,
    /// The appending Lens to write through (default: `default-group` — the default
    /// group's — when GRALKOR_DEFAULT_GROUP is set, else `personal-chat`).
    #[arg(long)]
    pub lens: Option<String>,
    /// The agent's name in session transcripts (required with --sessions).
    #[arg(long, value_name = "NAME")]
    pub agent_name: Option<String>,
    /// The human's name in session transcripts (required with --sessions).
    #[arg(long, value_name = "NAME")]
    pub human_name: Option<String>,
    /// List what would be written, and write nothing.
    #[arg(long)]
    pub dry_run: bool,
}

/// An export format.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum ExportFormat {
    /// JSON: entities and facts with their valid/invalid times.
    Json,
    /// Graphviz DOT (`dot -Tsvg`): invalidated or expired facts are dashed.
    Dot,
}

#[derive(Debug, Args)]
pub struct ExportArgs {
    /// The Destination.
    #[arg(long, short = 'd', default_value = "personal")]
    pub destination: String,
    /// The format.
    #[arg(long, value_enum, default_value_t = ExportFormat::Json)]
    pub format: ExportFormat,
    /// Write to this file instead of standard output.
    #[arg(long, short, value_name = "PATH")]
    pub output: Option<PathBuf>,
}

#[derive(Debug, Args)]
pub struct McpArgs {
    /// Serve streamable HTTP on this address (e.g. 127.0.0.1:8765) instead of stdio.
    /// The endpoint is printed to standard error once listening.
    #[arg(long, value_name = "ADDR")]
    pub http: Option<std::net::SocketAddr>,
    /// The ingestion Lens memory_add writes through (default: directly to `personal`).
    #[arg(long, value_name = "NAME")]
    pub lens: Option<String>,
    /// Let a request name its operator (`operator_id` argument) when the server has
    /// none configured, for a server shared by several operators.
    #[arg(long)]
    pub operator_from_request: bool,
    /// A further Host header the HTTP transport accepts (repeatable; localhost,
    /// 127.0.0.1 and ::1 always are: DNS-rebinding protection).
    #[arg(long = "allow-host", value_name = "HOST")]
    pub allow_hosts: Vec<String>,
    /// The agent tool names served: `jido` (memory_search, memory_add) or `openclaw`
    /// (memory_recall, memory_store, memory_forget, memory_status, as the OpenClaw
    /// plugin); the inspection and admin tools come with either.
    #[arg(long, value_name = "SET", default_value = "jido")]
    pub tools: ToolSetArg,
}

/// `gralkor mcp --tools`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum ToolSetArg {
    /// memory_search and memory_add.
    Jido,
    /// The OpenClaw plugin's memory_recall, memory_store, memory_forget, memory_status.
    Openclaw,
}

impl From<ToolSetArg> for gralkor::agent::openclaw::ToolSet {
    fn from(a: ToolSetArg) -> Self {
        match a {
            ToolSetArg::Jido => gralkor::agent::openclaw::ToolSet::Jido,
            ToolSetArg::Openclaw => gralkor::agent::openclaw::ToolSet::OpenClaw,
        }
    }
}
