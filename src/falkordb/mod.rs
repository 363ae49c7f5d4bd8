//! FalkorDB adapter.
