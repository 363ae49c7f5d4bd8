//! The retrieval benchmark.
