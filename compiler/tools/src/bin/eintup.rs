//! `eintup`: run, check, build and inspect Einsum Tuple programs.

use clap::{Parser, Subcommand};
use eintup_tools::cli::{BuildArgs, CheckArgs, ExecArgs, GradArgs, RunArgs, ShapesArgs};
use eintup_tools::process::run_main_status;

#[derive(Parser, Debug)]
#[command(name = "eintup", version = eintup_tools::VERSION, about = "The Einsum Tuple compiler")]
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
    /// Compile a program ahead of time into a PTX bundle (NAME.etb).
    Build(BuildArgs),
    /// Run a PTX bundle on the GPU.
    Exec(ExecArgs),
    /// Write the adjoint (reverse-mode gradient) of a program as a program.
    Grad(GradArgs),
}

fn main() {
    let cli = Cli::parse();
    let done = |r: Result<(), eintup::driver::Failure>| r.map(|()| eintup::driver::exit::OK);
    // `check` of several files reports each one's failure itself and adds
    // up an exit code; the others return theirs.
    run_main_status(move || match cli.command {
        Command::Shapes(a) => done(eintup_tools::cli::shapes::main(a)),
        Command::Run(a) => done(eintup_tools::cli::run::main(a)),
        Command::Check(a) => eintup_tools::cli::check::main(a),
        Command::Build(a) => done(eintup_tools::cli::build::main(a)),
        Command::Exec(a) => done(eintup_tools::cli::exec::main(a)),
        Command::Grad(a) => done(eintup_tools::cli::grad::main(a)),
    })
}
