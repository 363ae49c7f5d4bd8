//! One limiter per provider and key: a cap on requests in flight plus request and
//! token budgets per minute, shared by every caller.

use std::collections::HashMap;
use std::fmt;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, OnceLock, Weak};
use std::time::Duration;

use sha2::{Digest, Sha256};
use tokio::sync::{OwnedSemaphorePermit, Semaphore};
use tokio::time::Instant;

/// Limits for one provider key.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LimiterSettings {
    /// Requests allowed in flight at once (at least 1). Default 8.
    pub max_in_flight: usize,
    /// Requests started per minute, or `None` for no budget. Default `None`.
    pub requests_per_minute: Option<u32>,
    /// Tokens per minute (the prompt estimate plus the output cap is reserved up
    /// front, then corrected to the provider's count), or `None`. Default `None`.
    pub tokens_per_minute: Option<u32>,
}

impl Default for LimiterSettings {
    fn default() -> Self {
        LimiterSettings {
            max_in_flight: 8,
            requests_per_minute: None,
            tokens_per_minute: None,
        }
    }
}

/// What a limiter is doing right now.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LimiterStats {
    /// Requests holding a slot.
    pub in_flight: usize,
    /// Callers waiting for a slot or for budget.
    pub waiting: usize,
    /// The configured cap.
    pub max_in_flight: usize,
}

/// A token bucket refilled continuously at `capacity` per minute.
#[derive(Debug)]
struct Bucket {
    capacity: f64,
    level: f64,
    last: Instant,
}

impl Bucket {
    fn new(per_minute: Option<u32>, now: Instant) -> Option<Bucket> {
        per_minute.map(|c| Bucket {
            capacity: f64::from(c.max(1)),
            level: f64::from(c.max(1)),
            last: now,
        })
    }

    fn refill(&mut self, now: Instant) {
        let elapsed = now.saturating_duration_since(self.last).as_secs_f64();
        self.level = (self.level + elapsed * self.capacity / 60.0).min(self.capacity);
        self.last = now;
    }

    /// How long until `need` (capped at the capacity) is available.
    fn wait_for(&self, need: f64) -> Duration {
        let need = need.min(self.capacity);
        if self.level >= need {
            Duration::ZERO
        } else {
            Duration::from_secs_f64((need - self.level) * 60.0 / self.capacity)
        }
    }
}

#[derive(Debug)]
struct Budgets {
    requests: Option<Bucket>,
    tokens: Option<Bucket>,
    cool_down_until: Option<Instant>,
}

struct Inner {
    name: String,
    settings: LimiterSettings,
    slots: Arc<Semaphore>,
    /// Callers waiting for budget queue here, first come first served.
    line: tokio::sync::Mutex<()>,
    budgets: Mutex<Budgets>,
    in_flight: AtomicUsize,
    waiting: AtomicUsize,
}

/// Caps concurrency and per-minute budgets for one provider key. Cloning is cheap and
/// every clone shares the same slots and budgets.
///
/// When a provider answers 429 with a `Retry-After`, the limiter holds *every* caller
/// of that key until then, not only the one that was refused.
///
/// ```
/// use gralkor::llm::{Limiter, LimiterSettings};
///
/// # #[tokio::main(flavor = "current_thread")] async fn main() {
/// let limiter = Limiter::new("openai", LimiterSettings { max_in_flight: 2, ..Default::default() });
/// let first = limiter.acquire(100).await;
/// let _second = limiter.clone().acquire(100).await;
/// assert_eq!(limiter.stats().in_flight, 2);
/// drop(first);
/// assert_eq!(limiter.stats().in_flight, 1);
/// # }
/// ```
#[derive(Clone)]
pub struct Limiter {
    inner: Arc<Inner>,
}

impl fmt::Debug for Limiter {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Limiter")
            .field("name", &self.inner.name)
            .field("settings", &self.inner.settings)
            .field("stats", &self.stats())
            .finish()
    }
}

type Registry = Mutex<HashMap<String, Weak<Inner>>>;

fn registry() -> &'static Registry {
    static REGISTRY: OnceLock<Registry> = OnceLock::new();
    REGISTRY.get_or_init(Default::default)
}

impl Limiter {
    /// A new, independent limiter. `name` appears in logs (e.g. `openai`).
    /// A `max_in_flight` of 0 is treated as 1.
    pub fn new(name: impl Into<String>, settings: LimiterSettings) -> Self {
        let settings = LimiterSettings {
            max_in_flight: settings.max_in_flight.max(1),
            ..settings
        };
        let now = Instant::now();
        Limiter {
            inner: Arc::new(Inner {
                name: name.into(),
                settings,
                slots: Arc::new(Semaphore::new(settings.max_in_flight)),
                line: tokio::sync::Mutex::new(()),
                budgets: Mutex::new(Budgets {
                    requests: Bucket::new(settings.requests_per_minute, now),
                    tokens: Bucket::new(settings.tokens_per_minute, now),
                    cool_down_until: None,
                }),
                in_flight: AtomicUsize::new(0),
                waiting: AtomicUsize::new(0),
            }),
        }
    }

    /// The process-wide limiter for `provider` at `endpoint` with `api_key`: every call
    /// with the same three values returns a handle to the same limiter while one is
    /// alive (the key is hashed, never stored). `settings` apply when the limiter is
    /// created; later calls get the existing limiter unchanged.
    pub fn shared(
        provider: &str,
        endpoint: &str,
        api_key: &str,
        settings: LimiterSettings,
    ) -> Self {
        let id = format!(
            "{provider}|{endpoint}|{}",
            hex::encode(Sha256::digest(api_key.as_bytes()))
        );
        let mut map = registry().lock().unwrap_or_else(|p| p.into_inner());
        map.retain(|_, weak| weak.strong_count() > 0);
        if let Some(inner) = map.get(&id).and_then(Weak::upgrade) {
            return Limiter { inner };
        }
        let limiter = Limiter::new(provider, settings);
        map.insert(id, Arc::downgrade(&limiter.inner));
        limiter
    }

    /// The settings in force.
    pub fn settings(&self) -> LimiterSettings {
        self.inner.settings
    }

    /// Current activity.
    pub fn stats(&self) -> LimiterStats {
        LimiterStats {
            in_flight: self.inner.in_flight.load(Ordering::SeqCst),
            waiting: self.inner.waiting.load(Ordering::SeqCst),
            max_in_flight: self.inner.settings.max_in_flight,
        }
    }

    /// Whether two handles share one limiter.
    pub fn same_as(&self, other: &Limiter) -> bool {
        Arc::ptr_eq(&self.inner, &other.inner)
    }

    /// Waits for a slot and for budget for one request of about `estimated_tokens`
    /// tokens, then returns a permit that frees the slot when dropped.
    pub async fn acquire(&self, estimated_tokens: u64) -> Permit {
        let waiting = WaitingGuard::new(&self.inner.waiting);
        let slot = Arc::clone(&self.inner.slots)
            .acquire_owned()
            .await
            .expect("the limiter never closes its semaphore");
        {
            let _turn = self.inner.line.lock().await;
            loop {
                let wait = self.try_take(estimated_tokens as f64);
                if wait.is_zero() {
                    break;
                }
                tracing::debug!(limiter = %self.inner.name, wait_ms = wait.as_millis() as u64, "waiting for budget");
                tokio::time::sleep(wait).await;
            }
        }
        drop(waiting);
        self.inner.in_flight.fetch_add(1, Ordering::SeqCst);
        Permit {
            limiter: self.clone(),
            reserved: estimated_tokens,
            _slot: slot,
        }
    }

    /// Takes the budget if it is there (returns zero), else says how long to wait.
    fn try_take(&self, tokens: f64) -> Duration {
        let now = Instant::now();
        let mut b = self.inner.budgets.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(until) = b.cool_down_until {
            if until > now {
                return until - now;
            }
            b.cool_down_until = None;
        }
        let mut wait = Duration::ZERO;
        if let Some(r) = b.requests.as_mut() {
            r.refill(now);
            wait = wait.max(r.wait_for(1.0));
        }
        if let Some(t) = b.tokens.as_mut() {
            t.refill(now);
            wait = wait.max(t.wait_for(tokens));
        }
        if wait.is_zero() {
            if let Some(r) = b.requests.as_mut() {
                r.level -= 1.0;
            }
            if let Some(t) = b.tokens.as_mut() {
                t.level -= tokens.min(t.capacity);
            }
        }
        wait
    }

    /// Holds every new request until `until` (a provider said to back off).
    pub fn cool_down(&self, until: Instant) {
        let mut b = self.inner.budgets.lock().unwrap_or_else(|p| p.into_inner());
        if b.cool_down_until.is_none_or(|u| u < until) {
            b.cool_down_until = Some(until);
        }
    }

    fn settle(&self, reserved: u64, actual: u64) {
        let mut b = self.inner.budgets.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(t) = b.tokens.as_mut() {
            let reserved = (reserved as f64).min(t.capacity);
            t.level = (t.level + reserved - actual as f64).min(t.capacity);
        }
    }
}

/// Counts a caller as waiting until dropped (also when the caller is cancelled).
struct WaitingGuard<'a>(&'a AtomicUsize);

impl<'a> WaitingGuard<'a> {
    fn new(counter: &'a AtomicUsize) -> Self {
        counter.fetch_add(1, Ordering::SeqCst);
        WaitingGuard(counter)
    }
}

impl Drop for WaitingGuard<'_> {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::SeqCst);
    }
}

/// A slot in a [`Limiter`], freed on drop.
#[derive(Debug)]
pub struct Permit {
    limiter: Limiter,
    reserved: u64,
    _slot: OwnedSemaphorePermit,
}

impl Permit {
    /// Corrects the token budget with the provider's real count for this request.
    pub fn settle(mut self, actual_tokens: u64) {
        self.limiter.settle(self.reserved, actual_tokens);
        self.reserved = actual_tokens;
    }
}

impl Drop for Permit {
    fn drop(&mut self) {
        self.limiter.inner.in_flight.fetch_sub(1, Ordering::SeqCst);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test(start_paused = true)]
    async fn request_budget_spreads_requests_over_the_minute() {
        let limiter = Limiter::new(
            "t",
            LimiterSettings {
                max_in_flight: 100,
                requests_per_minute: Some(60),
                tokens_per_minute: None,
            },
        );
        let start = Instant::now();
        for _ in 0..60 {
            drop(limiter.acquire(1).await);
        }
        assert_eq!(
            start.elapsed(),
            Duration::ZERO,
            "a full bucket allows a burst of 60"
        );
        drop(limiter.acquire(1).await);
        let e = start.elapsed();
        assert!(
            e >= Duration::from_millis(999) && e <= Duration::from_millis(1001),
            "{e:?}"
        );
    }

    #[tokio::test(start_paused = true)]
    async fn token_budget_is_corrected_by_the_real_count() {
        let limiter = Limiter::new(
            "t",
            LimiterSettings {
                max_in_flight: 10,
                requests_per_minute: None,
                tokens_per_minute: Some(600),
            },
        );
        let start = Instant::now();
        // Reserve 500, really used 100: 500 left.
        limiter.acquire(500).await.settle(100);
        limiter.acquire(500).await.settle(500);
        assert_eq!(start.elapsed(), Duration::ZERO);
        // 0 left; 300 tokens need 30 s at 10 tokens/s.
        drop(limiter.acquire(300).await);
        let e = start.elapsed();
        assert!(
            e >= Duration::from_millis(29_999) && e <= Duration::from_millis(30_001),
            "{e:?}"
        );
    }

    #[tokio::test(start_paused = true)]
    async fn cool_down_holds_every_caller() {
        let limiter = Limiter::new("t", LimiterSettings::default());
        let start = Instant::now();
        limiter.cool_down(start + Duration::from_secs(7));
        drop(limiter.acquire(1).await);
        assert_eq!(start.elapsed(), Duration::from_secs(7));
        drop(limiter.acquire(1).await);
        assert_eq!(start.elapsed(), Duration::from_secs(7));
    }

    #[tokio::test]
    async fn slots_are_capped_and_waiters_counted() {
        let limiter = Limiter::new(
            "t",
            LimiterSettings {
                max_in_flight: 1,
                ..Default::default()
            },
        );
        let held = limiter.acquire(1).await;
        let l2 = limiter.clone();
        let waiter = tokio::spawn(async move { l2.acquire(1).await });
        while limiter.stats().waiting == 0 {
            tokio::task::yield_now().await;
        }
        assert_eq!(
            limiter.stats(),
            LimiterStats {
                in_flight: 1,
                waiting: 1,
                max_in_flight: 1
            }
        );
        drop(held);
        let p = waiter.await.unwrap();
        assert_eq!(
            limiter.stats(),
            LimiterStats {
                in_flight: 1,
                waiting: 0,
                max_in_flight: 1
            }
        );
        drop(p);
        assert_eq!(limiter.stats().in_flight, 0);
    }

    #[test]
    fn shared_limiters_are_per_provider_endpoint_and_key() {
        let s = LimiterSettings::default();
        let a = Limiter::shared("openai", "https://x", "key-1", s);
        let b = Limiter::shared("openai", "https://x", "key-1", s);
        let c = Limiter::shared("openai", "https://x", "key-2", s);
        let d = Limiter::shared("google", "https://x", "key-1", s);
        assert!(a.same_as(&b));
        assert!(!a.same_as(&c));
        assert!(!a.same_as(&d));
    }
}
