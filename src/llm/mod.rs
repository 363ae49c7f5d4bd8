//! Model providers.
