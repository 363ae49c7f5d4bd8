//! gRPC statuses: the codes SpiceDB answers with, read from the library's FFI errors
//! and from `grpc-status` trailers, and what each means as a gralkor [`Error`].

use std::time::Duration;

use crate::Error;

/// The status codes gralkor treats specially (the gRPC numbering).
pub(super) const OK: u32 = 0;
pub(super) const UNKNOWN: u32 = 2;
pub(super) const INVALID_ARGUMENT: u32 = 3;
pub(super) const DEADLINE_EXCEEDED: u32 = 4;
pub(super) const PERMISSION_DENIED: u32 = 7;
pub(super) const RESOURCE_EXHAUSTED: u32 = 8;
pub(super) const FAILED_PRECONDITION: u32 = 9;
pub(super) const UNIMPLEMENTED: u32 = 12;
pub(super) const UNAVAILABLE: u32 = 14;
pub(super) const UNAUTHENTICATED: u32 = 16;

/// The names Go's `codes.Code` prints, in code order (`code = InvalidArgument`).
const NAMES: [&str; 17] = [
    "OK",
    "Canceled",
    "Unknown",
    "InvalidArgument",
    "DeadlineExceeded",
    "NotFound",
    "AlreadyExists",
    "PermissionDenied",
    "ResourceExhausted",
    "FailedPrecondition",
    "Aborted",
    "OutOfRange",
    "Unimplemented",
    "Internal",
    "Unavailable",
    "DataLoss",
    "Unauthenticated",
];

/// A gRPC status other than OK.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct Status {
    pub(super) code: u32,
    pub(super) message: String,
}

impl Status {
    pub(super) fn new(code: u32, message: impl Into<String>) -> Status {
        Status {
            code,
            message: message.into(),
        }
    }

    /// The status in an error string of the library's FFI: Go's
    /// `rpc error: code = InvalidArgument desc = …` (or `code = Code(17)`); UNKNOWN
    /// with the whole string when it has none.
    pub(super) fn from_ffi(error: &str) -> Status {
        let parsed = error.find("code = ").and_then(|at| {
            let rest = &error[at + "code = ".len()..];
            let name = rest.split_whitespace().next()?;
            let code = NAMES
                .iter()
                .position(|n| *n == name)
                .map(|c| c as u32)
                .or_else(|| name.strip_prefix("Code(")?.strip_suffix(')')?.parse().ok())?;
            let message = rest
                .find("desc = ")
                .map(|d| rest[d + "desc = ".len()..].to_string())
                .unwrap_or_else(|| error.to_string());
            Some(Status::new(code, message))
        });
        parsed.unwrap_or_else(|| Status::new(UNKNOWN, error))
    }

    /// The code's name (`INVALID_ARGUMENT`), as gRPC documents it.
    pub(super) fn code_name(&self) -> String {
        match NAMES.get(self.code as usize) {
            Some(n) => {
                let mut out = String::new();
                for (i, ch) in n.chars().enumerate() {
                    if ch.is_ascii_uppercase() && i > 0 {
                        out.push('_');
                    }
                    out.push(ch.to_ascii_uppercase());
                }
                out
            }
            None => format!("code {}", self.code),
        }
    }

    /// What the status means as a gralkor error, for a call described by `what`
    /// (`SpiceDB WriteRelationships at http://…`): a refused preshared key is a
    /// configuration error naming `spicedb.preshared_key`; a rejected request is
    /// invalid input; UNAVAILABLE, RESOURCE_EXHAUSTED and DEADLINE_EXCEEDED are
    /// retryable ([`Error::Connection`], [`Error::Timeout`]); the rest are protocol
    /// errors.
    pub(super) fn into_error(self, what: &str, timeout: Option<Duration>) -> Error {
        let detail = format!("{what}: {}: {}", self.code_name(), self.message);
        match self.code {
            UNAUTHENTICATED | PERMISSION_DENIED => {
                Error::config("spicedb.preshared_key", format!("was refused ({detail})"))
            }
            INVALID_ARGUMENT => {
                Error::invalid("SpiceDB request", format!("was rejected ({detail})"))
            }
            UNAVAILABLE | RESOURCE_EXHAUSTED => Error::Connection {
                context: detail,
                source: None,
            },
            DEADLINE_EXCEEDED => Error::Timeout {
                operation: detail,
                after: timeout.unwrap_or_default(),
            },
            _ => Error::Protocol(detail),
        }
    }
}

/// `grpc-message` is percent-encoded: every byte outside printable ASCII, and `%`.
pub(super) fn percent_encode(message: &str) -> String {
    let mut out = String::with_capacity(message.len());
    for b in message.bytes() {
        if (0x20..0x7f).contains(&b) && b != b'%' {
            out.push(b as char);
        } else {
            out.push_str(&format!("%{b:02X}"));
        }
    }
    out
}

/// The inverse of [`percent_encode`] (a malformed escape is kept as it is).
pub(super) fn percent_decode(message: &str) -> String {
    let bytes = message.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        let hex = (bytes[i] == b'%')
            .then(|| message.get(i + 1..i + 3))
            .flatten()
            .and_then(|h| u8::from_str_radix(h, 16).ok());
        match hex {
            Some(b) => {
                out.push(b);
                i += 3;
            }
            None => {
                out.push(bytes[i]);
                i += 1;
            }
        }
    }
    String::from_utf8_lossy(&out).into_owned()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ffi_errors_carry_their_grpc_code() {
        let s = Status::from_ffi("rpc error: code = InvalidArgument desc = bad schema: x");
        assert_eq!(s, Status::new(INVALID_ARGUMENT, "bad schema: x"));
        assert_eq!(s.code_name(), "INVALID_ARGUMENT");
        assert_eq!(Status::from_ffi("code = Code(99) desc = y").code, 99);
        let plain = Status::from_ffi("something broke");
        assert_eq!(plain, Status::new(UNKNOWN, "something broke"));
        assert_eq!(
            Status::new(UNAUTHENTICATED, "").code_name(),
            "UNAUTHENTICATED"
        );
    }

    #[test]
    fn statuses_map_to_errors_by_retryability() {
        let e = Status::new(UNAUTHENTICATED, "invalid preshared key").into_error("call", None);
        assert!(matches!(&e, Error::Config { field, .. } if field == "spicedb.preshared_key"));
        assert!(!e.is_retryable());
        assert!(
            !Status::new(INVALID_ARGUMENT, "")
                .into_error("c", None)
                .is_retryable()
        );
        for code in [UNAVAILABLE, RESOURCE_EXHAUSTED, DEADLINE_EXCEEDED] {
            assert!(
                Status::new(code, "").into_error("c", None).is_retryable(),
                "{code}"
            );
        }
        assert!(
            !Status::new(UNIMPLEMENTED, "")
                .into_error("c", None)
                .is_retryable()
        );
    }

    #[test]
    fn grpc_messages_percent_encode_and_back() {
        let m = "50% of ✓\nline";
        let e = percent_encode(m);
        assert!(e.bytes().all(|b| (0x20..0x7f).contains(&b)), "{e}");
        assert_eq!(percent_decode(&e), m);
        assert_eq!(percent_decode("100%"), "100%");
    }
}
