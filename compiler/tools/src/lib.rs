//! The command-line tools' shared code: one module per `eintup`
//! subcommand (`cli`), `etopt`'s input handling (`etopt`) and the process
//! wrapper every binary runs its body in (`process`). The binaries
//! themselves are `src/bin/`.

/// `--version`: the package version and the commit built (`build.rs`).
pub const VERSION: &str = concat!(env!("CARGO_PKG_VERSION"), " (", env!("EINTUP_COMMIT"), ")");

pub mod cli;
pub mod etopt;
pub mod process;
