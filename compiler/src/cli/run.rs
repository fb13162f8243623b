//! `eintup run`: execute a program on one configuration.

use super::RunArgs;
use crate::driver::Failure;

pub fn main(_args: RunArgs) -> Result<(), Failure> {
    Err(Failure::user("eintup: error: `run` is not implemented yet"))
}
