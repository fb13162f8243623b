//! Thin runtime for eintup PTX bundles (see docs/runtime.md once it exists).
