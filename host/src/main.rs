//! `ruleweave`: check, play, run, graph and serve ruleweave packs.

/// Scripts and templates allocate a value at a time; mimalloc makes a turn ~18% faster than the
/// system allocator (engine/benches/pirate.rs).
#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

fn main() -> std::process::ExitCode {
    ruleweave_host::cli::main()
}
