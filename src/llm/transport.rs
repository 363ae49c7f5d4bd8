//! The HTTP path every provider call takes: limiter, retry policy, timeouts, error
//! mapping and usage accounting.

use std::fmt;
use std::time::Duration;

use reqwest::header::HeaderMap;
use serde_json::Value;
use tokio::time::Instant;
use tracing::Instrument;

use super::usage::CallRecord;
use super::{Limiter, LimiterSettings, RetryPolicy, TokenUsage, UsageMeter, retry};
use crate::{Error, Result};

/// What a provider client shares between its calls.
#[derive(Debug, Clone)]
pub(crate) struct Transport {
    pub provider: &'static str,
    pub http: reqwest::Client,
    /// Chat (generation and reranking) requests.
    pub limiter: Limiter,
    /// Embedding requests: a budget of their own, so a burst of one kind never
    /// starves the other (and a 429 on one holds only its callers).
    pub embedding_limiter: Limiter,
    pub retry: RetryPolicy,
    pub usage: UsageMeter,
}

/// The settings every provider builder collects: the key, the endpoint and how calls
/// are sent. Each public builder embeds one and keeps its own documented setters.
#[derive(Clone)]
pub(crate) struct ClientSettings {
    pub api_key: String,
    pub base_url: String,
    pub http: Option<reqwest::Client>,
    pub limiter: Option<Limiter>,
    pub limits: LimiterSettings,
    pub embedding_limiter: Option<Limiter>,
    pub embedding_limits: LimiterSettings,
    pub retry: RetryPolicy,
    pub usage: Option<UsageMeter>,
}

/// A checked endpoint and key with the transport its calls go through.
pub(crate) struct Endpoint {
    pub api_key: String,
    /// Without trailing slashes.
    pub base_url: String,
    pub transport: Transport,
}

impl ClientSettings {
    /// `api_key` for `base_url`, with default limits and retry policy.
    pub fn new(api_key: String, base_url: &str) -> Self {
        ClientSettings {
            api_key,
            base_url: base_url.to_string(),
            http: None,
            limiter: None,
            limits: LimiterSettings::default(),
            embedding_limiter: None,
            embedding_limits: LimiterSettings::default(),
            retry: RetryPolicy::default(),
            usage: None,
        }
    }

    /// The builder's `Debug`, named `name`, with the key redacted.
    pub fn debug(&self, f: &mut fmt::Formatter<'_>, name: &str) -> fmt::Result {
        f.debug_struct(name)
            .field("api_key", &"<redacted>")
            .field("base_url", &self.base_url)
            .field("limits", &self.limits)
            .field("embedding_limits", &self.embedding_limits)
            .field("retry", &self.retry)
            .finish_non_exhaustive()
    }

    /// Checks the base URL (`url_field` names it in the error) and the key
    /// (`key_field`), which may be blank only where `key_optional` says so for the
    /// checked URL, then takes the given limiter or the process-wide one for this
    /// endpoint and key.
    pub fn connect(
        self,
        provider: &'static str,
        key_field: &str,
        url_field: &str,
        key_optional: impl Fn(&str) -> bool,
    ) -> Result<Endpoint> {
        let base_url = check_base_url(url_field, &self.base_url)?;
        if self.api_key.trim().is_empty() && !key_optional(&base_url) {
            return Err(Error::config(key_field, "must not be blank"));
        }
        let limiter = self
            .limiter
            .unwrap_or_else(|| Limiter::shared(provider, &base_url, &self.api_key, self.limits));
        let embedding_limiter = self.embedding_limiter.unwrap_or_else(|| {
            Limiter::shared(
                &format!("{provider} embeddings"),
                &base_url,
                &self.api_key,
                self.embedding_limits,
            )
        });
        Ok(Endpoint {
            api_key: self.api_key,
            base_url,
            transport: Transport {
                provider,
                http: self.http.unwrap_or_else(default_http_client),
                limiter,
                embedding_limiter,
                retry: self.retry,
                usage: self.usage.unwrap_or_default(),
            },
        })
    }
}

/// Validates a base URL and removes trailing slashes.
pub(crate) fn check_base_url(field: &str, url: &str) -> Result<String> {
    let url = url.trim().trim_end_matches('/');
    let ok = reqwest::Url::parse(url).is_ok_and(|u| matches!(u.scheme(), "http" | "https"));
    if !ok {
        return Err(Error::config(
            field,
            format!("must be an http:// or https:// URL (got `{url}`)"),
        ));
    }
    Ok(url.to_string())
}

/// The [`Call::operation`] of embedding requests.
pub(crate) const EMBED_OPERATION: &str = "embed";

/// One logical request.
pub(crate) struct Call<'a> {
    /// `chat`, `embed`, `rerank`, … (for logs).
    pub operation: &'static str,
    /// The caller's usage label.
    pub label: &'a str,
    pub url: String,
    /// Extra headers (authentication). Values are never logged.
    pub headers: &'a [(&'static str, String)],
    pub body: &'a Value,
    /// Tokens reserved in the limiter's budget before the provider reports the count.
    pub estimated_tokens: u64,
}

/// A reqwest client with gralkor's defaults (no client-level timeout: the retry
/// policy times each attempt).
pub(crate) fn default_http_client() -> reqwest::Client {
    reqwest::Client::builder()
        .user_agent(concat!("gralkor/", env!("CARGO_PKG_VERSION")))
        .build()
        .unwrap_or_else(|_| reqwest::Client::new())
}

impl Transport {
    /// The limiter `call` goes through: the embedding one for `embed` calls, the
    /// chat one for the rest.
    fn limiter_for(&self, call: &Call<'_>) -> &Limiter {
        if call.operation == EMBED_OPERATION {
            &self.embedding_limiter
        } else {
            &self.limiter
        }
    }

    /// POSTs `call.body` as JSON and returns the JSON reply and the usage `usage_of`
    /// reads from it, retrying as the policy says. Records the call in the meter.
    pub async fn post(
        &self,
        call: &Call<'_>,
        usage_of: impl Fn(&Value) -> TokenUsage,
    ) -> Result<(Value, TokenUsage)> {
        self.post_until(call, usage_of, |_| false).await
    }

    /// [`Transport::post`], except that an error `final_error` accepts is returned at
    /// once, not retried (a server refusing a request form answers 5xx at times).
    pub async fn post_until(
        &self,
        call: &Call<'_>,
        usage_of: impl Fn(&Value) -> TokenUsage,
        final_error: impl Fn(&Error) -> bool,
    ) -> Result<(Value, TokenUsage)> {
        let started = Instant::now();
        let mut attempts = 0u32;
        let result = loop {
            attempts += 1;
            let permit = self.limiter_for(call).acquire(call.estimated_tokens).await;
            let span = tracing::info_span!(
                "llm_http",
                provider = self.provider,
                operation = call.operation,
                label = call.label,
                attempt = attempts,
            );
            match self.attempt(call).instrument(span).await {
                Ok(body) => {
                    let usage = usage_of(&body);
                    permit.settle(usage.total());
                    break Ok((body, usage));
                }
                Err(err) => {
                    if matches!(
                        err,
                        Error::Provider {
                            status: Some(_),
                            ..
                        }
                    ) {
                        // The provider refused the request: nothing was consumed.
                        permit.settle(0);
                    } else {
                        drop(permit);
                    }
                    if !err.is_retryable() || final_error(&err) {
                        break Err(err);
                    }
                    let retry_after = match &err {
                        Error::Provider { retry_after, .. } => *retry_after,
                        _ => None,
                    };
                    let Some(wait) = self
                        .retry
                        .next_wait(attempts, started.elapsed(), retry_after)
                    else {
                        break Err(err);
                    };
                    if let Some(ra) = retry_after {
                        self.limiter_for(call).cool_down(Instant::now() + ra);
                    }
                    tracing::warn!(
                        provider = self.provider,
                        operation = call.operation,
                        attempt = attempts,
                        wait_ms = wait.as_millis() as u64,
                        error = %err,
                        "provider call failed; retrying"
                    );
                    tokio::time::sleep(wait).await;
                }
            }
        };
        self.usage.record(CallRecord {
            provider: self.provider.to_string(),
            label: call.label.to_string(),
            tokens: result.as_ref().map(|(_, u)| *u).unwrap_or_default(),
            latency: started.elapsed(),
            attempts,
            ok: result.is_ok(),
        });
        result
    }

    async fn attempt(&self, call: &Call<'_>) -> Result<Value> {
        let mut request = self.http.post(&call.url).json(call.body);
        for (name, value) in call.headers {
            request = request.header(*name, value);
        }
        let exchange = async {
            let response = request.send().await.map_err(|e| self.transport_error(e))?;
            let status = response.status();
            let headers = response.headers().clone();
            let bytes = response
                .bytes()
                .await
                .map_err(|e| self.transport_error(e))?;
            Ok::<_, Error>((status, headers, bytes))
        };
        let (status, headers, bytes) = match self.retry.attempt_timeout {
            Some(limit) => {
                tokio::time::timeout(limit, exchange)
                    .await
                    .map_err(|_| Error::Timeout {
                        operation: format!("{} {} request", self.provider, call.operation),
                        after: limit,
                    })??
            }
            None => exchange.await?,
        };
        tracing::debug!(
            status = status.as_u16(),
            bytes = bytes.len(),
            "provider answered"
        );
        let json: Option<Value> = serde_json::from_slice(&bytes).ok();
        if status.is_success() {
            return json.ok_or_else(|| Error::Provider {
                provider: self.provider.to_string(),
                status: Some(status.as_u16()),
                message: format!("response body is not JSON: {}", snippet(&bytes)),
                retry_after: None,
                source: None,
            });
        }
        let message = json
            .as_ref()
            .and_then(|j| {
                j.pointer("/error/message")
                    .and_then(Value::as_str)
                    .map(str::to_string)
            })
            .unwrap_or_else(|| snippet(&bytes));
        let retry_after =
            header_retry_after(&headers).or_else(|| json.as_ref().and_then(body_retry_delay));
        Err(Error::Provider {
            provider: self.provider.to_string(),
            status: Some(status.as_u16()),
            message,
            retry_after,
            source: None,
        })
    }

    fn transport_error(&self, e: reqwest::Error) -> Error {
        let message = if e.is_connect() {
            "could not connect"
        } else if e.is_timeout() {
            "timed out"
        } else {
            "request failed"
        };
        Error::Provider {
            provider: self.provider.to_string(),
            status: None,
            message: message.to_string(),
            retry_after: None,
            source: Some(Box::new(e.without_url())),
        }
    }
}

/// A token count the provider reported at `pointer` in its reply (0 when absent).
pub(crate) fn reported_count(reply: &Value, pointer: &str) -> u64 {
    reply.pointer(pointer).and_then(Value::as_u64).unwrap_or(0)
}

/// At most 500 characters of a body, for error messages.
fn snippet(bytes: &[u8]) -> String {
    let text = String::from_utf8_lossy(bytes);
    let text = text.trim();
    if text.is_empty() {
        return "(empty body)".to_string();
    }
    match text.char_indices().nth(500) {
        Some((i, _)) => format!("{}…", &text[..i]),
        None => text.to_string(),
    }
}

/// `retry-after-ms` (OpenAI) or `retry-after` (seconds or an HTTP date).
fn header_retry_after(headers: &HeaderMap) -> Option<Duration> {
    if let Some(ms) = headers.get("retry-after-ms").and_then(|v| v.to_str().ok())
        && let Ok(ms) = ms.trim().parse::<f64>()
        && ms.is_finite()
        && ms >= 0.0
    {
        return Some(Duration::from_secs_f64(ms / 1000.0));
    }
    headers
        .get("retry-after")
        .and_then(|v| v.to_str().ok())
        .and_then(retry::parse_retry_after)
}

/// Google's `RetryInfo.retryDelay` in an error body's `details`.
fn body_retry_delay(body: &Value) -> Option<Duration> {
    body.pointer("/error/details")?
        .as_array()?
        .iter()
        .filter_map(|d| d.get("retryDelay").and_then(Value::as_str))
        .find_map(retry::parse_seconds_suffix)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn retry_hints() {
        let mut h = HeaderMap::new();
        h.insert("retry-after", "3".parse().unwrap());
        assert_eq!(header_retry_after(&h), Some(Duration::from_secs(3)));
        h.insert("retry-after-ms", "1500".parse().unwrap());
        assert_eq!(header_retry_after(&h), Some(Duration::from_millis(1500)));
        let body = json!({"error": {"code": 429, "details": [
            {"@type": "type.googleapis.com/google.rpc.QuotaFailure"},
            {"@type": "type.googleapis.com/google.rpc.RetryInfo", "retryDelay": "12s"}
        ]}});
        assert_eq!(body_retry_delay(&body), Some(Duration::from_secs(12)));
        assert_eq!(body_retry_delay(&json!({"error": {}})), None);
    }

    #[test]
    fn snippets_are_bounded() {
        assert_eq!(snippet(b"  "), "(empty body)");
        let long = "é".repeat(600);
        assert_eq!(snippet(long.as_bytes()).chars().count(), 501);
    }

    #[test]
    fn base_urls() {
        assert_eq!(
            check_base_url("X", "http://localhost:11434/v1/").unwrap(),
            "http://localhost:11434/v1"
        );
        let err = check_base_url("OPENAI_BASE_URL", "localhost:1234").unwrap_err();
        assert!(
            err.to_string()
                .contains("`OPENAI_BASE_URL` must be an http:// or https:// URL"),
            "{err}"
        );
    }
}
