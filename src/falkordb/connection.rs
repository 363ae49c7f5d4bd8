//! The connection a [`FalkorDb`](super::FalkorDb) handle sends its commands over: the
//! redis-rs [`ConnectionManager`] (one multiplexed connection that reconnects by
//! itself), guarded on the embedded backend by the server's state, so that a stopped
//! or given-up server fails every call at once instead of leaving it to reconnect to a
//! socket nobody will open again (or, after a shutdown, to a new server's socket).

use redis::aio::{ConnectionLike, ConnectionManager};
use redis::{Cmd, Pipeline, RedisFuture, Value};

use super::EmbeddedServer;

#[derive(Clone)]
pub(super) struct Connection {
    manager: ConnectionManager,
    /// The embedded server behind the connection, if any.
    server: Option<EmbeddedServer>,
}

impl Connection {
    pub(super) fn new(manager: ConnectionManager, server: Option<EmbeddedServer>) -> Self {
        Connection { manager, server }
    }
}

impl ConnectionLike for Connection {
    fn req_packed_command<'a>(&'a mut self, cmd: &'a Cmd) -> RedisFuture<'a, Value> {
        let Connection { manager, server } = self;
        match server {
            None => manager.req_packed_command(cmd),
            Some(server) => Box::pin(server.guard(manager.req_packed_command(cmd))),
        }
    }

    fn req_packed_commands<'a>(
        &'a mut self,
        pipeline: &'a Pipeline,
        offset: usize,
        count: usize,
    ) -> RedisFuture<'a, Vec<Value>> {
        let Connection { manager, server } = self;
        let request = manager.req_packed_commands(pipeline, offset, count);
        match server {
            None => request,
            Some(server) => Box::pin(server.guard(request)),
        }
    }

    fn get_db(&self) -> i64 {
        self.manager.get_db()
    }
}
