//! `benchlab schema`: prints the JSON Schema of result records (the schema itself lives in
//! `record`).

use super::exit::{Exit, OK};

pub(super) fn run() -> Result<i32, Exit> {
    print!("{}", crate::record::SCHEMA);
    Ok(OK)
}
