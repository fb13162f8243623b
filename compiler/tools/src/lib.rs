//! The command-line tools' shared code: one module per `eintup`
//! subcommand (`cli`), `etopt`'s input handling (`etopt`) and the process
//! wrapper every binary runs its body in (`process`). The binaries
//! themselves are `src/bin/`.

pub mod cli;
pub mod etopt;
pub mod process;
