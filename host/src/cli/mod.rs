//! The command line: one file per subcommand. `--root` is global, before or after the subcommand.

mod bench;
mod calibrate;
mod check;
mod graph;
mod new;
mod outcomes;
mod play;
mod replay;
mod run;
mod serve;
mod sessions;
mod simulate;
mod spending;
mod terminal;
mod test;
mod tune;

use std::path::{Path, PathBuf};
use std::process::ExitCode;

use anyhow::{Context, Result, bail};
use clap::{Parser, Subcommand};
use ruleweave::{Engine, LlmChoice, Pack};

use crate::config::Config;
use serde_json::{Map, Value};

/// Rules for LLM-driven games: packs of YAML, Rhai and minijinja, checked, played and served.
#[derive(Parser)]
#[command(name = "ruleweave", version, about, propagate_version = true)]
struct Cli {
    /// The directory holding config/, scripts/ and prompts/.
    #[arg(long, global = true, default_value = ".", value_name = "DIR")]
    root: PathBuf,

    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Load and validate every pack; diagnostics name file:line:col.
    Check,
    /// Play a pack interactively in the terminal.
    Play(play::Args),
    /// Feed a YAML/JSON list of inputs to a pack; print one JSON line per turn.
    Run(run::Args),
    /// Print a pack's graph as a Mermaid diagram.
    Graph(graph::Args),
    /// Serve the HTTP API and the web console.
    Serve(serve::Args),
    /// Time a pack's selectors, scripted against native, on recorded states.
    Bench(bench::Args),
    /// Create a small working pack to start from (manifest, script, template, stand-in, test case).
    New(new::Args),
    /// Run packs' test cases (tests/<pack>/*.yaml) offline; --bless rewrites their expectations.
    Test(test::Args),
    /// Play a recorded session (or a test case) again on the pack as it is now; show what changed.
    Replay(replay::Args),
    /// Play many games with the pack's scripted players; report how they end.
    Simulate(simulate::Args),
    /// Find the value of a parameter that gives a player the share of an outcome you want.
    Tune(tune::Args),
    /// How far each stand-in model is from the real model it stands in for, on what the real
    /// one answered (recorded sessions, or --live games).
    Calibrate(calibrate::Args),
    /// How a pack's live games ended, by variant of its experiment, against the control.
    Outcomes(outcomes::Args),
    /// List the sessions a store keeps (newest first): the ids `replay --session` takes.
    Sessions(sessions::Args),
    /// Serve an editor over stdio (Language Server Protocol): diagnostics as you type, completion,
    /// hover and go-to-definition in a pack's manifest, scripts and templates.
    Lsp,
}

/// Parses the command line and runs it.
pub fn main() -> ExitCode {
    let cli = Cli::parse();
    // `play` shows refused edits, a node's fallback and a script's `warn()` itself (as the turn's
    // notes): the log does not say them twice, in the middle of a reply. `simulate` plays
    // thousands of turns whose notes nobody reads one by one, `test` replays them for a verdict.
    // Colour only on a terminal, and never with NO_COLOR.
    let quiet = match cli.command {
        Command::Play(_) => "warn,ruleweave::packs=error,ruleweave::graph::kinds=error,ruleweave::script=error",
        Command::Simulate(_) | Command::Tune(_) | Command::Calibrate(_) => {
            "warn,ruleweave::graph::kinds=error,ruleweave::script=error"
        }
        // A case's results are what `test` prints; the warnings of the turns it replays are the
        // pack's business, shown with --verbose.
        Command::Test(ref args) if !args.verbose => "error",
        _ => "warn",
    };
    let colour = std::io::IsTerminal::is_terminal(&std::io::stderr())
        && std::env::var_os("NO_COLOR").is_none_or(|v| v.is_empty());
    // The log, and traces when the OTEL_* environment asks for them.
    let telemetry = match crate::telemetry::init(quiet, colour) {
        Ok(t) => t,
        Err(e) => {
            eprintln!("error: {e:#}");
            return ExitCode::from(2);
        }
    };
    // Scripts recurse on the native stack: with room for the deepest call a pack may allow, they
    // never need a stack of their own (the engine grows one for threads that lack it).
    let runtime = match tokio::runtime::Builder::new_multi_thread().thread_stack_size(16 << 20).enable_all().build() {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("error: cannot start the async runtime: {e}");
            return ExitCode::from(2);
        }
    };
    let result = match cli.command {
        Command::Check => check::run(&cli.root),
        Command::Lsp => ruleweave_lsp::run(Some(cli.root)).map(|()| ExitCode::SUCCESS),
        Command::Play(args) => play::run(&cli.root, &runtime, args),
        Command::Run(args) => run::run(&cli.root, &runtime, args),
        Command::Graph(args) => graph::run(&cli.root, args),
        Command::Serve(args) => serve::run(&cli.root, &runtime, args),
        Command::Bench(args) => bench::run(&cli.root, &runtime, args),
        Command::Test(args) => test::run(&cli.root, &runtime, args),
        Command::Sessions(args) => sessions::run(&cli.root, &runtime, args),
        Command::New(args) => new::run(&cli.root, args),
        Command::Replay(args) => replay::run(&cli.root, &runtime, args),
        Command::Simulate(args) => simulate::run(&cli.root, &runtime, args),
        Command::Tune(args) => tune::run(&cli.root, &runtime, args),
        Command::Calibrate(args) => calibrate::run(&cli.root, &runtime, args),
        Command::Outcomes(args) => outcomes::run(&cli.root, &runtime, args),
    };
    // What the exporter still holds goes out before the process does.
    telemetry.shutdown();
    match result {
        Ok(code) => code,
        Err(e) => {
            eprintln!("error: {e:#}");
            ExitCode::from(2)
        }
    }
}

/// An engine over `root`: the provider the environment (and ruleweave.toml) chooses, sessions in
/// the store `store` names.
async fn engine(root: &Path, config: &Config, store: &str) -> Result<Engine> {
    engine_for(root, config, store, None).await
}

/// `engine` with `--param` values for `pack` (itself when there are none).
fn params_of(engine: &Engine, pack: &str, set: &[String]) -> Result<Engine> {
    if set.is_empty() {
        return Ok(engine.clone());
    }
    copy_of(engine, pack, set)
}

/// A copy of `engine`'s rules with `--param` values for `pack`, even with none: what a
/// simulation plays, since a copy keeps its stand-in models' answers.
fn copy_of(engine: &Engine, pack: &str, set: &[String]) -> Result<Engine> {
    let mut values = ruleweave::ParamValues::new();
    for text in set {
        let (path, value) = ruleweave::parse_param(text)?;
        values.insert(path, value);
    }
    engine.with_params(pack, values).map_err(|e| match e.kind() {
        ruleweave::ErrorKind::Input => anyhow::anyhow!("--param: {}", e.detail()),
        // The pack does not load with those values: its diagnostics say why.
        _ => {
            eprint!("{}", crate::diagnostics::render(&e, engine.root()));
            anyhow::anyhow!("pack `{pack}` did not load with --param {}", set.join(" --param "))
        }
    })
}

/// The engine, its sessions limited to the packs' own models and `allowed` ones when clients
/// choose options (`serve`), or to any model (a person at their own terminal).
async fn engine_for(root: &Path, config: &Config, store: &str, allowed: Option<Vec<String>>) -> Result<Engine> {
    let store = ruleweave::store::open(&under_root(root, store)).await?;
    // The shipped packs' native scorer twins, so a manifest's `impl: native` runs them.
    let builder = ruleweave_natives::register(Engine::builder(root));
    let mut builder =
        builder.llm(config.llm.clone()).named_providers(config.named_providers()).search(config.search.clone());
    if let Some(models) = allowed {
        builder = builder.allowed_models(models);
    }
    builder = builder.trace_content(config.trace_content);
    Ok(builder.store(store).retention(config.retention).build())
}

/// A SQLite store's relative path is under the root (`--root games/` keeps `games/ruleweave.db`),
/// not under the directory the command runs in.
fn under_root(root: &Path, store: &str) -> String {
    match store.strip_prefix("sqlite://") {
        Some(path) if !path.is_empty() && !path.starts_with(':') && Path::new(path).is_relative() => {
            format!("sqlite://{}", root.join(path).display())
        }
        _ => store.to_owned(),
    }
}

/// A request the lab refused, as a flag names its field (`--games-max is at least 100, not 5`).
fn refused(r: &ruleweave_lab::jobs::Refused) -> String {
    r.message(|field| format!("--{}", field.replace('_', "-")))
}

/// Loads `name`, printing its diagnostics when it does not load.
fn load_pack(engine: &Engine, name: &str) -> Result<std::sync::Arc<Pack>> {
    match engine.packs().get(name) {
        Ok(p) => Ok(p),
        Err(e) => {
            eprint!("{}", crate::diagnostics::render(&e, engine.root()));
            bail!("pack `{name}` did not load")
        }
    }
}

/// `--set KEY=VALUE` pairs as options, each value read by the option's type.
fn options(pack: &Pack, set: &[String]) -> Result<Map<String, Value>> {
    let mut out = Map::new();
    for pair in set {
        let (k, v) = pair.split_once('=').with_context(|| format!("--set {pair}: write KEY=VALUE"))?;
        let value = pack.option_from_str(k.trim(), v).with_context(|| format!("--set {pair}"))?;
        out.insert(k.trim().to_owned(), value);
    }
    Ok(out)
}

/// What the banner says about the model: the provider, or that the stand-in answers.
/// A reload as `play` and `serve --watch` print it: "pirate reloaded (version ...)", or the
/// diagnostics of a refused edit with the version that goes on serving.
fn describe_reload(e: &ruleweave::PackEvent, root: &std::path::Path) -> String {
    let version = e.version.as_deref().unwrap_or("none");
    match e.status {
        ruleweave::ReloadStatus::Reloaded => format!("{} reloaded (version {version})\n", e.pack),
        ruleweave::ReloadStatus::Rejected => {
            let diagnostics = ruleweave::Error::collect(e.diagnostics.clone())
                .map(|d| crate::diagnostics::render(&d, root))
                .unwrap_or_default();
            format!("{} not reloaded, version {version} goes on serving:\n{diagnostics}", e.pack)
        }
    }
}

/// Where each key in the environment is sent (`keys: OPENAI_API_KEY → https://…`), and each
/// endpoint of `ruleweave.toml` that is not used because its provider's key is set: lines for a
/// banner, so a person sees where a key goes before the first call.
fn key_lines(config: &crate::config::Config) -> Vec<String> {
    let mut lines: Vec<String> = config.ignored.iter().map(|w| format!("warning: {w}")).collect();
    let endpoints = &config.key_endpoints;
    if !endpoints.is_empty() {
        lines.push(format!("keys: {}", endpoints.join(", ")));
    }
    lines
}

fn model_banner(engine: &Engine, pack: &Pack) -> String {
    match engine.llm() {
        LlmChoice::Standin if pack.has_standin() => {
            "the pack's stand-in model (offline, deterministic; set OPENAI_API_KEY for real models)".into()
        }
        LlmChoice::Standin => "no model (the pack has no stand-in; set OPENAI_API_KEY)".into(),
        other => other.describe(),
    }
}

/// Parses the text of an inputs file or a typed line: YAML or JSON.
fn parse_value(text: &str) -> Result<Value> {
    serde_saphyr::from_str::<Value>(text).map_err(|e| anyhow::anyhow!("{}", e.without_snippet()))
}
