//! What a command can fail with, its one-line message and its exit code.

use std::fmt;

/// Exit code: success.
pub const OK: u8 = 0;
/// Exit code: a failure (database, model, I/O) that trying again will not fix.
pub const FAILURE: u8 = 1;
/// Exit code: the command line itself is wrong (clap's own code).
pub const USAGE: u8 = 2;
/// Exit code: invalid input; nothing was written.
pub const INVALID_INPUT: u8 = 3;
/// Exit code: what was asked for does not exist.
pub const NOT_FOUND: u8 = 4;
/// Exit code: the configuration (environment or flags) is invalid.
pub const CONFIG: u8 = 5;
/// Exit code: refused — not permitted by the authorizer (or by a rule of the CLI's own).
pub const REFUSED: u8 = 6;
/// Exit code: a temporary failure (`EX_TEMPFAIL`): trying again can help.
pub const TEMPORARY: u8 = 75;

/// A command's failure.
#[derive(Debug)]
pub enum Failure {
    /// The library's error.
    Gralkor(gralkor::Error),
    /// Nothing matched (an episode id, a Destination).
    NotFound(String),
    /// The command line or the settings do not fit together (exit 2, as clap's own).
    Usage(String),
    /// Not permitted (a rule of the CLI's own, such as `add-member`'s).
    Refused(String),
    /// A file could not be read or written.
    Io(String, std::io::Error),
    /// The person at the terminal did not confirm (exit 1): nothing was done.
    NotConfirmed(String),
}

pub type Outcome<T = ()> = std::result::Result<T, Failure>;

impl From<gralkor::Error> for Failure {
    fn from(e: gralkor::Error) -> Self {
        Failure::Gralkor(e)
    }
}

impl Failure {
    /// The exit code scripts can rely on.
    pub fn exit_code(&self) -> u8 {
        match self {
            Failure::Gralkor(e) => match e {
                gralkor::Error::InvalidInput { .. } => INVALID_INPUT,
                gralkor::Error::Config { .. } => CONFIG,
                gralkor::Error::NotFound(_) => NOT_FOUND,
                gralkor::Error::PermissionDenied { .. } => REFUSED,
                e if e.is_retryable() => TEMPORARY,
                _ => FAILURE,
            },
            Failure::NotFound(_) => NOT_FOUND,
            Failure::Refused(_) => REFUSED,
            Failure::Usage(_) => USAGE,
            Failure::Io(..) | Failure::NotConfirmed(_) => FAILURE,
        }
    }

    fn denied(&self) -> bool {
        matches!(
            self,
            Failure::Refused(_) | Failure::Gralkor(gralkor::Error::PermissionDenied { .. })
        )
    }

    /// A JSON rendering, for `--json` error output.
    pub fn kind(&self) -> &'static str {
        if self.denied() {
            return "permission_denied";
        }
        match self.exit_code() {
            USAGE => "usage",
            INVALID_INPUT => "invalid_input",
            NOT_FOUND => "not_found",
            CONFIG => "config",
            TEMPORARY => "temporary",
            _ => "failure",
        }
    }
}

impl fmt::Display for Failure {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let text = match self {
            Failure::Gralkor(e @ gralkor::Error::PermissionDenied { .. }) => {
                format!("permission denied: {}", chain(e))
            }
            Failure::Gralkor(e) => chain(e),
            Failure::Usage(what) => what.clone(),
            Failure::Refused(what) => format!("permission denied: {what}"),
            Failure::NotFound(what) => format!("not found: {what}"),
            Failure::Io(context, e) => format!("{context}: {e}"),
            Failure::NotConfirmed(what) => format!("not confirmed: {what}"),
        };
        // One readable line, whatever the message holds.
        f.write_str(&one_line(&text))
    }
}

/// The error and its causes, joined with `: ` (a cause already in the message is not
/// repeated).
fn chain(e: &dyn std::error::Error) -> String {
    let mut text = e.to_string();
    let mut source = e.source();
    while let Some(cause) = source {
        let c = cause.to_string();
        if !text.contains(&c) {
            text.push_str(": ");
            text.push_str(&c);
        }
        source = cause.source();
    }
    text
}

/// `text` with its line breaks and runs of whitespace folded into single spaces.
pub fn one_line(text: &str) -> String {
    text.split_whitespace().collect::<Vec<_>>().join(" ")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn codes_follow_the_kind_of_error() {
        let invalid = Failure::from(gralkor::Error::InvalidInput {
            field: "query".into(),
            rule: "must not be blank".into(),
        });
        assert_eq!(invalid.exit_code(), INVALID_INPUT);
        assert_eq!(
            invalid.to_string(),
            "invalid input: `query` must not be blank"
        );
        let config = Failure::from(gralkor::Error::Config {
            field: "operator".into(),
            rule: "must be set".into(),
        });
        assert_eq!(config.exit_code(), CONFIG);
        let timeout = Failure::from(gralkor::Error::Timeout {
            operation: "query".into(),
            after: std::time::Duration::from_secs(1),
        });
        assert_eq!(timeout.exit_code(), TEMPORARY);
        assert_eq!(Failure::NotFound("x".into()).exit_code(), NOT_FOUND);
        let denied = Failure::from(gralkor::Error::PermissionDenied {
            subject: "person:bob".into(),
            permission: "contribute".into(),
            resource: "group:personal/ada".into(),
        });
        assert_eq!(denied.exit_code(), REFUSED);
        assert_eq!(denied.kind(), "permission_denied");
        assert_eq!(
            denied.to_string(),
            "permission denied: `person:bob` lacks `contribute` on `group:personal/ada`"
        );
        assert_eq!(Failure::Refused("x".into()).exit_code(), REFUSED);
        assert_eq!(Failure::Usage("x".into()).exit_code(), USAGE);
        assert_eq!(Failure::Usage("x".into()).kind(), "usage");
    }

    #[test]
    fn messages_are_one_line() {
        let f = Failure::Refused("adding a member\n  needs membership".into());
        assert_eq!(
            f.to_string(),
            "permission denied: adding a member needs membership"
        );
    }
}
