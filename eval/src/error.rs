//! The harness's error: a data file that breaks a rule, an I/O failure, or an error
//! of the library.

use std::fmt;
use std::path::PathBuf;

/// What went wrong in the harness.
#[derive(Debug)]
pub enum EvalError {
    /// A data file (story or dataset) breaks a rule; `field` names where.
    Data {
        /// The file.
        file: PathBuf,
        /// Where in it (`episodes[2].reference_time`, `gold.facts[f3].source`, …).
        field: String,
        /// The rule it breaks.
        rule: String,
    },
    /// Reading or writing a file failed.
    Io {
        /// What was being done.
        context: String,
        /// The cause.
        source: std::io::Error,
    },
    /// The library failed.
    Gralkor(gralkor::Error),
}

/// The harness's result type.
pub type Result<T, E = EvalError> = std::result::Result<T, E>;

impl EvalError {
    /// A data error.
    pub fn data(
        file: impl Into<PathBuf>,
        field: impl Into<String>,
        rule: impl Into<String>,
    ) -> EvalError {
        EvalError::Data {
            file: file.into(),
            field: field.into(),
            rule: rule.into(),
        }
    }

    /// An I/O error with its context.
    pub fn io(context: impl Into<String>, source: std::io::Error) -> EvalError {
        EvalError::Io {
            context: context.into(),
            source,
        }
    }
}

impl fmt::Display for EvalError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            EvalError::Data { file, field, rule } => {
                write!(f, "{}: `{field}` {rule}", file.display())
            }
            EvalError::Io { context, source } => write!(f, "{context}: {source}"),
            EvalError::Gralkor(e) => write!(f, "{e}"),
        }
    }
}

impl std::error::Error for EvalError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            EvalError::Io { source, .. } => Some(source),
            // The library's error is shown as this one; its causes follow.
            EvalError::Gralkor(e) => std::error::Error::source(e),
            EvalError::Data { .. } => None,
        }
    }
}

impl From<gralkor::Error> for EvalError {
    fn from(e: gralkor::Error) -> Self {
        EvalError::Gralkor(e)
    }
}
