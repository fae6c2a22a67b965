//! The `benchlab` executable: parse arguments, run, turn the outcome into an exit code.

use clap::Parser;

fn main() {
    let cli = benchlab::cli::Cli::parse();
    match benchlab::cli::main_with(cli) {
        Ok(code) => std::process::exit(code),
        Err(e) => {
            eprintln!("error: {}", e.message);
            std::process::exit(e.code);
        }
    }
}
