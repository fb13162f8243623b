//! The command-line tools' shared code: one module per `eintup`
//! subcommand (`cli`) and the process wrapper every binary runs its body
//! in (`process`). The binaries themselves are `src/bin/`.

pub mod cli;
pub mod process;
