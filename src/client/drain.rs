//! Work a client must let finish before it stops: what a holder of accepted writes
//! (the agent layer's capture buffer, for one) registers with
//! [`MemoryClient::drain_on_shutdown`](super::MemoryClient::drain_on_shutdown), so that
//! one [`Client::shutdown`](super::Client::shutdown) writes it before the storage stops.

use async_trait::async_trait;

use crate::Result;

/// Something holding accepted work that [`Client::shutdown`](super::Client::shutdown)
/// drains first, in registration order, while the client still accepts writes.
///
/// A drain bounds itself (the capture buffer by
/// [`CaptureConfig::shutdown_timeout`](crate::agent::capture::CaptureConfig::shutdown_timeout));
/// the client waits for each in turn. A failed drain does not stop the shutdown: the
/// storage is still released, and the first failure is what `shutdown` returns.
#[async_trait]
pub trait Drain: Send + Sync + 'static {
    /// Whether the holder still exists; a dropped holder has nothing left to drain
    /// and is forgotten.
    fn is_live(&self) -> bool;

    /// Writes what is held, within the holder's own bound.
    async fn drain(&self) -> Result<()>;

    /// What is held now, for [`status`](super::Client::status). Default: the
    /// holder does not say.
    async fn held(&self) -> Option<Held> {
        None
    }
}

/// Accepted work a [`Drain`] holds that is not written yet.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, serde::Serialize)]
#[non_exhaustive]
pub struct Held {
    /// Conversation sessions with something held.
    pub sessions: usize,
    /// Items held (captured turns, for the capture buffer), written or not yet
    /// being written.
    pub items: usize,
    /// Writes of held items running now.
    pub in_flight: usize,
}

impl Held {
    /// A count of held work.
    pub fn new(sessions: usize, items: usize, in_flight: usize) -> Held {
        Held {
            sessions,
            items,
            in_flight,
        }
    }
}

impl std::ops::Add for Held {
    type Output = Held;
    fn add(self, other: Held) -> Held {
        Held::new(
            self.sessions + other.sessions,
            self.items + other.items,
            self.in_flight + other.in_flight,
        )
    }
}
