//! `eintup shapes`: list the configurations the constraints allow.

use super::ShapesArgs;
use crate::driver::Failure;

pub fn main(_args: ShapesArgs) -> Result<(), Failure> {
    Err(Failure::user("eintup: error: `shapes` is not implemented yet"))
}
