//! Running statements: queries, read-only queries (retried on a lost connection),
//! pipelines, server and graph listings, and parsing replies with the schema cache.

use super::*;

impl FalkorDb {
    internal_item! {
    /// Runs a query (`GRAPH.QUERY`) on `graph` with named `params`. Not retried on
    /// failure: a caller that knows its write is idempotent may retry when
    /// [`Error::is_retryable`] says so.
    ///
    /// ```no_run
    /// # async fn run(db: gralkor::falkordb::FalkorDb) -> gralkor::Result<()> {
    /// use gralkor::falkordb::Params;
    ///
    /// let res = db
    ///     .query("notes", "MERGE (n:Note {id: $id}) RETURN n.id AS id", &Params::new().set("id", "n1"))
    ///     .await?;
    /// assert_eq!(res.get(0, "id").and_then(|v| v.as_str()), Some("n1"));
    /// # Ok(()) }
    /// ```
    pub async fn query(&self, graph: &str, query: &str, params: &Params) -> Result<QueryResult> {
        let name = physical_graph_name(graph)?;
        statement::check(query, "query")?;
        let text = params::build_query(query, params)?;
        let span = tracing::debug_span!("falkordb.query", graph, ro = false);
        let _forget = ForgetTermCounts(self, graph);
        self.run(graph, &name, "GRAPH.QUERY", &text)
            .instrument(span)
            .await
    }
    }

    internal_item! {
    /// Runs a read-only query (`GRAPH.RO_QUERY`); the server refuses writes. Retried up
    /// to 4 times on a lost connection (after a server restart, for instance), since
    /// reads are safe to repeat; timeouts are not retried.
    ///
    /// ```no_run
    /// # async fn run(db: gralkor::falkordb::FalkorDb) -> gralkor::Result<()> {
    /// use gralkor::falkordb::Params;
    ///
    /// let res = db.ro_query("notes", "MATCH (n:Note) RETURN count(n) AS c", &Params::new()).await?;
    /// println!("{:?}", res.get(0, "c"));
    /// # Ok(()) }
    /// ```
    pub async fn ro_query(&self, graph: &str, query: &str, params: &Params) -> Result<QueryResult> {
        let name = physical_graph_name(graph)?;
        statement::check(query, "query")?;
        let text = params::build_query(query, params)?;
        let span = tracing::debug_span!("falkordb.ro_query", graph);
        // Only a lost connection is retried: a read that timed out would most likely
        // time out again and hold the caller for minutes.
        crate::retry::retry_waiting(
            "read",
            READ_RETRY,
            Error::is_connection,
            self.server_wait(),
            || self.run_read(graph, &name, &text),
        )
        .instrument(span)
        .await
    }
    }

    internal_item! {
    /// Runs several queries on `graph` in one round trip (a pipeline). They run in
    /// order but not as a transaction: if one fails, the ones before it have been
    /// applied, and the error names the failing statement's position.
    ///
    /// ```no_run
    /// # async fn run(db: gralkor::falkordb::FalkorDb) -> gralkor::Result<()> {
    /// use gralkor::falkordb::Params;
    ///
    /// let stmts: Vec<(String, Params)> = (0..100)
    ///     .map(|i| ("MERGE (:N {i: $i})".to_string(), Params::new().set("i", i)))
    ///     .collect();
    /// let results = db.pipeline("bulk", &stmts).await?;
    /// assert_eq!(results.len(), 100);
    /// # Ok(()) }
    /// ```
    pub async fn pipeline(
        &self,
        graph: &str,
        statements: &[(String, Params)],
    ) -> Result<Vec<QueryResult>> {
        let name = physical_graph_name(graph)?;
        let mut pipe = redis::pipe();
        pipe.ignore_errors();
        for (i, (q, p)) in statements.iter().enumerate() {
            statement::check(q, &format!("statements[{i}].query"))?;
            let text = params::build_query(q, p).map_err(|e| match e {
                Error::InvalidInput { field, rule } => Error::InvalidInput {
                    field: format!("statements[{i}].{field}"),
                    rule,
                },
                other => other,
            })?;
            pipe.cmd("GRAPH.QUERY")
                .arg(&name)
                .arg(text)
                .arg("--compact");
        }
        let span = tracing::debug_span!("falkordb.pipeline", graph, statements = statements.len());
        let _forget = ForgetTermCounts(self, graph);
        async {
            let replies: Vec<redis::Value> = self
                .refusals_retried(graph, || async {
                    let mut conn = self.inner.conn.clone();
                    pipe.query_async(&mut conn)
                        .await
                        .map_err(|e| self.map_err(graph, e))
                })
                .await?;
            let mut out = Vec::with_capacity(replies.len());
            for (i, reply) in replies.into_iter().enumerate() {
                if let redis::Value::ServerError(err) = &reply {
                    return Err(Error::Query {
                        graph: graph.to_owned(),
                        message: format!("statement {i}: {}", redact(&server_error_text(err))),
                    });
                }
                out.push(self.parse(graph, &name, &reply).await?);
            }
            Ok(out)
        }
        .instrument(span)
        .await
    }
    }

    /// What the server says of itself: its Redis and FalkorDB versions and its memory
    /// (`INFO server memory` and `MODULE LIST`, one round trip each, run
    /// concurrently; on a cluster, one node's answer). A field the server does not
    /// report is `None`.
    ///
    /// ```no_run
    /// # async fn run(db: gralkor::falkordb::FalkorDb) -> gralkor::Result<()> {
    /// let info = db.server_info().await?;
    /// println!("FalkorDB {:?}, {:?} bytes used", info.falkordb_version, info.used_memory_bytes);
    /// # Ok(()) }
    /// ```
    pub async fn server_info(&self) -> Result<ServerInfo> {
        let span = tracing::debug_span!("falkordb.server_info");
        async {
            let mut info = redis::cmd("INFO");
            info.arg("server").arg("memory");
            let mut modules = redis::cmd("MODULE");
            modules.arg("LIST");
            let (info, modules): (redis::Value, redis::Value) =
                tokio::try_join!(self.send("*", &info), self.send("*", &modules))?;
            Ok(super::server_info::parse(&info, &modules))
        }
        .instrument(span)
        .await
    }

    /// The logical ids of every gralkor graph on the server — on a cluster, on every
    /// primary.
    ///
    /// ```no_run
    /// # async fn run(db: gralkor::falkordb::FalkorDb) -> gralkor::Result<()> {
    /// for graph in db.list_graphs().await? {
    ///     println!("{graph}");
    /// }
    /// # Ok(()) }
    /// ```
    pub async fn list_graphs(&self) -> Result<Vec<String>> {
        // On a cluster the command goes to every primary and the lists are merged
        // (connection::cluster_route).
        let names: Vec<String> = self.send("*", &redis::cmd("GRAPH.LIST")).await?;
        let mut ids: Vec<String> = names.iter().filter_map(|n| logical_graph_id(n)).collect();
        ids.sort();
        ids.dedup();
        Ok(ids)
    }

    /// Deletes `graph` with all its data and indices. Returns `false` if it did not
    /// exist.
    ///
    /// ```no_run
    /// # async fn run(db: gralkor::falkordb::FalkorDb) -> gralkor::Result<()> {
    /// if db.delete_graph("scratch").await? {
    ///     println!("deleted");
    /// }
    /// # Ok(()) }
    /// ```
    pub async fn delete_graph(&self, graph: &str) -> Result<bool> {
        let name = physical_graph_name(graph)?;
        // Forgotten first: a preparation racing the deletion prepares again.
        self.inner
            .prepared
            .lock()
            .expect("prepared set poisoned")
            .retain(|(g, _)| g != graph);
        self.inner.term_stats.forget(graph);
        let mut cmd = redis::cmd("GRAPH.DELETE");
        cmd.arg(&name);
        let res: Result<redis::Value> = self.send(graph, &cmd).await;
        self.inner
            .schemas
            .lock()
            .expect("schema cache poisoned")
            .remove(&name);
        match res {
            Ok(_) => Ok(true),
            // FalkorDB answers "Invalid graph operation on empty key" for a missing graph.
            Err(Error::Query { message, .. }) if message.contains("empty key") => Ok(false),
            Err(e) => Err(e),
        }
    }

    /// Closes this handle and every clone of it, and stops the embedded server if this
    /// handle started it (clean stop with a save; other handles
    /// [attached](Self::attach) to that server fail from then on too). A remote
    /// server, or an embedded server this handle was only attached to, keeps running.
    ///
    /// From then on every call on the handle or a clone fails at once, without
    /// touching the network, with [`Error::Closed`], which is not retryable. Calling
    /// it again is harmless.
    ///
    /// ```no_run
    /// # async fn run(db: gralkor::falkordb::FalkorDb) -> gralkor::Result<()> {
    /// use gralkor::falkordb::Params;
    ///
    /// let clone = db.clone();
    /// db.shutdown().await?; // the embedded server saves and stops
    /// let err = clone.query("notes", "RETURN 1", &Params::new()).await.unwrap_err();
    /// assert!(matches!(err, gralkor::Error::Closed { .. }) && !err.is_retryable());
    /// # Ok(()) }
    /// ```
    pub async fn shutdown(&self) -> Result<()> {
        self.inner.conn.close();
        match (&self.inner.server, self.inner.owns_server) {
            (Some(server), true) => server.shutdown().await,
            _ => Ok(()),
        }
    }

    /// What a read waits for before it tries again: the embedded server to be up (a
    /// restart after a crash, say; bounded by 30 s), or on a remote backend the delay.
    fn server_wait(&self) -> impl Fn(Duration) -> BoxFuture<()> + 'static {
        let server = self.inner.server.clone();
        move |delay| {
            let server = server.clone();
            Box::pin(async move {
                match server {
                    Some(server) => {
                        server.wait_until_up(Duration::from_secs(30)).await;
                    }
                    None => tokio::time::sleep(delay).await,
                }
            })
        }
    }

    /// A read-only query; on a graph that does not exist, the same query on an empty
    /// graph.
    async fn run_read(&self, graph: &str, name: &str, text: &str) -> Result<QueryResult> {
        match self.run(graph, name, "GRAPH.RO_QUERY", text).await {
            Err(Error::Query { message, .. }) if message.contains("empty key") => {}
            other => return other,
        }
        match self.run(graph, EMPTY_GRAPH, "GRAPH.RO_QUERY", text).await {
            Err(Error::Query { message, .. }) if message.contains("empty key") => {
                // Create the empty graph (any GRAPH.QUERY creates its key), then retry.
                self.run(graph, EMPTY_GRAPH, "GRAPH.QUERY", "RETURN 1")
                    .await?;
                self.run(graph, EMPTY_GRAPH, "GRAPH.RO_QUERY", text).await
            }
            other => other,
        }
    }

    /// Sends one graph command and parses its reply.
    async fn run(&self, graph: &str, name: &str, command: &str, text: &str) -> Result<QueryResult> {
        let mut cmd = redis::cmd(command);
        cmd.arg(name).arg(text).arg("--compact");
        let reply: redis::Value = self.send(graph, &cmd).await?;
        self.parse(graph, name, &reply).await
    }

    /// Sends one command; on a cluster, tries again what the cluster refused before
    /// running it ([`CLUSTER_REFUSAL_RETRY`]).
    async fn send<T: redis::FromRedisValue>(&self, graph: &str, cmd: &redis::Cmd) -> Result<T> {
        self.refusals_retried(graph, || async {
            let mut conn = self.inner.conn.clone();
            cmd.query_async(&mut conn)
                .await
                .map_err(|e| self.map_err(graph, e))
        })
        .await
    }

    /// Runs `op`, again on a cluster refusal when the backend is a cluster.
    async fn refusals_retried<T, F, Fut>(&self, graph: &str, op: F) -> Result<T>
    where
        F: FnMut() -> Fut,
        Fut: std::future::Future<Output = Result<T>>,
    {
        if !self.inner.conn.is_cluster() {
            let mut op = op;
            return op().await;
        }
        let what = format!("request on graph `{graph}` refused by the cluster");
        crate::retry::retry_when(&what, CLUSTER_REFUSAL_RETRY, is_cluster_refusal, op).await
    }

    /// Parses a reply, refreshing the graph's schema cache once if it names an id the
    /// cache does not know.
    async fn parse(&self, graph: &str, name: &str, reply: &redis::Value) -> Result<QueryResult> {
        let cached = self
            .inner
            .schemas
            .lock()
            .expect("schema cache poisoned")
            .get(name)
            .cloned();
        let schema = cached.unwrap_or_default();
        match reply::parse_reply(reply, &schema) {
            Ok(r) => return Ok(r),
            Err(ParseError::Malformed(m)) => return Err(Error::Protocol(m)),
            Err(ParseError::UnknownId) => {}
        }
        let fresh = Arc::new(self.load_schema(graph, name).await?);
        self.inner
            .schemas
            .lock()
            .expect("schema cache poisoned")
            .insert(name.to_owned(), fresh.clone());
        reply::parse_reply(reply, &fresh).map_err(|e| match e {
            ParseError::Malformed(m) => Error::Protocol(m),
            ParseError::UnknownId => Error::Protocol(
                "a reply names a label, key or type the graph's schema does not list".into(),
            ),
        })
    }

    async fn load_schema(&self, graph: &str, name: &str) -> Result<Schema> {
        let mut pipe = redis::pipe();
        for proc in ["db.labels()", "db.propertyKeys()", "db.relationshipTypes()"] {
            pipe.cmd("GRAPH.RO_QUERY")
                .arg(name)
                .arg(format!("CALL {proc}"))
                .arg("--compact");
        }
        let mut conn = self.inner.conn.clone();
        let replies: Vec<redis::Value> = pipe
            .query_async(&mut conn)
            .await
            .map_err(|e| self.map_err(graph, e))?;
        let lists = replies
            .iter()
            .map(|r| {
                reply::parse_name_list(r)
                    .map_err(|_| Error::Protocol("malformed schema listing".into()))
            })
            .collect::<Result<Vec<_>>>()?;
        let [labels, property_keys, relationship_types]: [Vec<String>; 3] = lists
            .try_into()
            .map_err(|_| Error::Protocol("schema listing incomplete".into()))?;
        Ok(Schema {
            labels,
            property_keys,
            relationship_types,
        })
    }

    pub(super) fn map_err(&self, graph: &str, e: redis::RedisError) -> Error {
        // Not a reply from the server, on a handle shut down meanwhile.
        if e.code().is_none() && self.inner.conn.is_closed() {
            return Error::Closed {
                what: "this FalkorDB handle".into(),
            };
        }
        // Not a reply from the server, and the embedded server is stopped or down for
        // good: that is the error (a request refused or cut short by the guard).
        if e.code().is_none()
            && let Some(unavailable) = self.inner.server.as_ref().and_then(|s| s.unavailable())
        {
            return unavailable;
        }
        map_redis_error(graph, e, self.inner.response_timeout)
    }
}

/// Forgets the term counts observed in a graph when dropped: after a write, however it
/// ends (done, failed or cancelled once sent), since it may have changed what the
/// fulltext indices hold; a later search counts again.
struct ForgetTermCounts<'a>(&'a FalkorDb, &'a str);

impl Drop for ForgetTermCounts<'_> {
    fn drop(&mut self) {
        self.0.inner.term_stats.forget(self.1);
    }
}
