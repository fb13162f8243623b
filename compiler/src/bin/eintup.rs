//! `eintup`: run, check, build and inspect Einsum Tuple programs.

use clap::{Parser, Subcommand};
use eintup::cli::{CheckArgs, RunArgs, ShapesArgs};
use eintup::driver::run_main;

#[derive(Parser, Debug)]
#[command(name = "eintup", version, about = "The Einsum Tuple compiler")]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand, Debug)]
enum Command {
    /// List the shape configurations the constraints allow.
    Shapes(ShapesArgs),
    /// Run a program on one configuration and print or save its arrays.
    Run(RunArgs),
    /// Verify a program against its framework call on every configuration.
    Check(CheckArgs),
}

fn main() {
    let cli = Cli::parse();
    run_main(move || match cli.command {
        Command::Shapes(a) => eintup::cli::shapes::main(a),
        Command::Run(a) => eintup::cli::run::main(a),
        Command::Check(a) => eintup::cli::check::main(a),
    })
}
