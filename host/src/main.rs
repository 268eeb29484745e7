//! `ruleweave`: check, play, run, graph and serve ruleweave packs.

mod cli;
mod diagnostics;

fn main() -> std::process::ExitCode {
    cli::main()
}
