//! `ruleweave serve` with an instant native model in place of the pack's Rhai stand-in, as the
//! LangGraph baseline's fake model is a plain function: what the server itself burns per turn,
//! measured from outside by the load generator (`--pid`). The pirate's answers come from the
//! pirate bench's cycles; the store is the first argument's (`memory`, `sqlite://PATH`).
//!
//! ```sh
//! cargo build --release -p ruleweave --example instant_serve --example loadgen
//! target/release/examples/instant_serve sqlite:///tmp/instant.db 127.0.0.1:18081 &
//! target/release/examples/loadgen --url http://127.0.0.1:18081 --seconds 15 --pid $!
//! ```

use std::path::PathBuf;
use std::sync::Arc;

use ruleweave::Engine;
use ruleweave_host::server::{self, AppState, Settings};

#[path = "../../engine/benches/support/pirate_answers.rs"]
mod answers;

#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

fn main() -> anyhow::Result<()> {
    let mut args = std::env::args().skip(1);
    let store = args.next().unwrap_or_else(|| "sqlite://instant.db".into());
    let addr: std::net::SocketAddr = args.next().unwrap_or_else(|| "127.0.0.1:18081".into()).parse()?;
    let root = PathBuf::from(env!("CARGO_MANIFEST_DIR")).parent().unwrap().to_path_buf();
    // The binary's log and runtime: warnings only, 16 MB stacks for deep scripts.
    tracing_subscriber::fmt()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_default_env()
                .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("warn")),
        )
        .with_writer(std::io::stderr)
        .init();
    let rt = tokio::runtime::Builder::new_multi_thread().thread_stack_size(16 << 20).enable_all().build()?;
    rt.block_on(async {
        let store = ruleweave::store::open(&store).await?;
        let engine = Engine::builder(root).store(store).provider(Arc::new(answers::InstantModel::default())).build();
        let state = Arc::new(AppState::new(engine, Settings::default()));
        state.load_packs();
        server::run(state, addr).await
    })
}
