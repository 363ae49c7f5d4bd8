//! # gralkor-core
//!
//! The bottom rooms of [gralkor](https://crates.io/crates/gralkor): the one public
//! [`Error`], the [`ontology`] an extraction may use, the [`storage`] port under the
//! memory API (the `Storage` trait, its ids, content rule, records and the in-memory
//! storage) and the shared vocabulary both the memory API and the engine speak
//! (timestamps, source kinds, derived ids, value rules, status records).
//!
//! It is a crate of its own so that the compiler keeps gralkor's layer rule: the
//! storage port cannot import the engine or an adapter, because this crate does not
//! depend on the crate that holds them. The engine (in `gralkor`) implements the port.
//!
//! **Use it through `gralkor`**, which re-exports its API at the same paths
//! (`gralkor::storage`, `gralkor::ontology`, `gralkor::Error`). Items marked
//! `#[doc(hidden)]` here are gralkor's own internals shared between its crates: they
//! are not part of any API and may change in any release.
#![deny(missing_docs)]

/// Declares an internal item (`pub …`) that the `gralkor` crate uses: `pub` and
/// `#[doc(hidden)]` (internal to gralkor's crates, not an API).
macro_rules! internal_item {
    ($(#[$meta:meta])* pub $($item:tt)*) => {
        $(#[$meta])*
        #[doc(hidden)]
        pub $($item)*
    };
}

/// Re-exports internal items: `pub` and `#[doc(hidden)]` (see [`internal_item`]).
macro_rules! internal_use {
    ($($path:tt)*) => {
        #[doc(hidden)]
        pub use $($path)*;
    };
}

mod error;
pub mod ontology;
pub mod storage;
#[doc(hidden)]
pub mod vocab;

pub use error::{Error, Result};
