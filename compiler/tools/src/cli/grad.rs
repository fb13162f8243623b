//! `eintup grad`: write the adjoint of a program as a `.et` program
//! (docs/gradients.md).

use super::GradArgs;
use eintup::autodiff::{differentiate, Form, Request};
use eintup::driver::{Failure, Source};
use eintup::pipeline;

pub fn main(args: GradArgs) -> Result<(), Failure> {
    let src = Source::load(&args.file)?;
    let prog = pipeline::resolved(&src)?;
    let adjoint = differentiate(&prog, &Request { wrt: args.wrt, of: args.of, constant: vec![] }).map_err(|d| src.failure(d))?;
    if args.stats {
        eprintln!("{}", adjoint.summary());
        for c in &adjoint.contributions {
            let form = match &c.form {
                Form::Gather => "gather".to_string(),
                Form::Rewritten(eqs) => format!("gather, rewritten from a scatter ({eqs})"),
                Form::Scatter(why) => format!("scatter-add, atomics on the GPU unless built --deterministic ({why})"),
            };
            eprintln!("  {} from {}: {form}", c.target, c.read);
        }
    }
    match &args.output {
        Some(path) => std::fs::write(path, &adjoint.source).map_err(|e| Failure::User(format!("error: cannot write `{}`: {e}", path.display()))),
        None => {
            print!("{}", adjoint.source);
            Ok(())
        }
    }
}
