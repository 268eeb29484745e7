//! `POST /v1/packs/{pack}/simulate`: a small batch of games by the pack's scripted players on
//! its rules as they are on disk now (the console's Simulate panel). The games run on the packs'
//! stand-in models in a store of their own that nothing outlives: a client's click never spends
//! the operator's model budget nor fills the sessions' store. One batch runs at a time on a
//! replica, off the workers that answer requests; it needs nothing another replica holds.
//!
//! A batch that names real models (`"models"`, `"budget_usd"`) is one a client cannot wait for
//! in one request: it is started as a job (`202 {"job"}`), which any replica follows.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use axum::Json;
use axum::extract::{Extension, State};
use axum::http::HeaderMap;
use axum::response::{IntoResponse, Response};
use serde::Deserialize;
use serde_json::Value;

use super::access::Access;
use super::error::{ApiResult, Code};
use super::extract::{Body, PackName};
use super::lab::{PAGE_POLICY, refused, standin, unprocessable};
use super::routes::{Facts, I, O};
use super::spending::{Asked, RealJob};
use super::{ApiError, Shared, sse};
use ruleweave::ErrorKind;
use ruleweave_lab::jobs::{self, JobSpec, SweepAsked};
use ruleweave_lab::simulate::tune::SweepReport;
use ruleweave_lab::simulate::{Plan, Report, Rules};

/// The most games per player one request may ask for.
pub(super) const MOST_GAMES: u32 = 200;

/// A batch of games to play.
#[derive(Deserialize, serde::Serialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
pub(super) struct NewSimulation {
    /// Games per player, 1 to 200 (default 20), and at most the server's `simulate_turns` (4,000
    /// by default) turns in all: games × players × the pack's turn cap.
    #[serde(default)]
    #[schema(minimum = 1, maximum = 200)]
    games: Option<u32>,
    /// The players (default: every player the pack ships).
    #[serde(default)]
    players: Vec<String>,
    /// Session options, as the pack declares them (missing ones take their defaults).
    #[serde(default)]
    #[schema(value_type = Object)]
    options: serde_json::Map<String, Value>,
    /// What seeds the games (default `ruleweave`): the same seed, the same report.
    #[serde(default)]
    seed: Option<String>,
    /// Numbers of the pack's `params:` set for these games in place of the manifest's, by
    /// dotted path (`{"thresholds.medium": 55}`): each a number the pack has, within its
    /// `param_bounds:` (else 422). Nothing on disk changes.
    #[serde(default)]
    #[schema(value_type = Object)]
    params: BTreeMap<String, Value>,
    /// The same games at each value of one of the pack's numbers (`["thresholds.medium=55..65"]`,
    /// `NAME=LO..HI[:STEP]`), or of two (a grid): the answer is then a sweep. A sweep larger than
    /// a batch (`simulate_turns`) runs as a job: `POST /v1/packs/{pack}/sweep`.
    #[serde(default)]
    #[schema(max_items = 2)]
    sweep: Vec<String>,
    /// Profiles to play on real models, by provider (`{"judge": "openai"}`); the others stay on
    /// the stand-in. The batch is then a job (`202 {"job"}`, followed at `/v1/jobs/{job}`, its
    /// answer the report), and needs the operator's token or a key with the `spend` right, and
    /// `budget_usd`. A sweep plays on the stand-ins only.
    #[serde(default)]
    models: BTreeMap<String, String>,
    /// The most the batch's real models may cost, by `[prices]` (required with `models`): each
    /// call holds the most it can cost before it is sent, and the games stop at a turn boundary
    /// at the budget (listed apart, uncounted; the report says `"stopped": "budget_usd"`).
    #[serde(default)]
    budget_usd: Option<f64>,
    /// The longest the batch's model calls may go on, in seconds (at most a day): it waits out
    /// rate limits with no cap of its own, and stops as at its budget when this is up.
    #[serde(default)]
    #[schema(minimum = 1, maximum = 86400)]
    max_seconds: Option<u64>,
    /// On real models, answer from the server's cache what an earlier job asked, and keep this
    /// batch's answers there (default false).
    #[serde(default)]
    cache: Option<bool>,
}

/// What a batch answers: a report, or a sweep's.
#[derive(serde::Serialize, utoipa::ToSchema)]
#[serde(untagged)]
pub(super) enum Answer {
    /// The games' report.
    Report(Box<Report>),
    /// The same games at each value.
    Sweep(SweepReport),
}

/// Who may call `simulate`, and the errors it answers of its own.
pub(super) const SIMULATE: Facts =
    Facts::keys(&[O, I]).note("an issued key: of its packs; on real models, `spend`").answers(&[
        Code::Forbidden,
        Code::Engine(ErrorKind::NotFound),
        Code::Engine(ErrorKind::Input),
        Code::SimulationRunning,
        Code::JobRunning,
        Code::QuotaExceeded,
        Code::Engine(ErrorKind::Pack),
    ]);

/// `POST /v1/packs/{pack}/simulate`: the report as JSON, or with `Accept: text/html` as the
/// page with charts `simulate --html` writes; on real models, a job whose answer is the report.
#[utoipa::path(post, path = "/v1/packs/{pack}/simulate", operation_id = "simulatePack", tag = "packs", params(("pack" = String, Path, description = "The pack")), request_body = NewSimulation, responses(
    (status = 200, description = "How the games ended (at each value, for a sweep)", content(
        (Answer = "application/json"),
        (String = "text/html"),
    )),
    (status = 202, description = "On real models: the job started, follow it at `/v1/jobs/{job}`", body = super::jobs::Started),
))]
pub(super) async fn simulate(
    State(s): State<Shared>,
    Extension(access): Extension<Access>,
    PackName(pack): PackName,
    headers: HeaderMap,
    Body(req): Body<NewSimulation>,
) -> ApiResult<Response> {
    let games = req.games.unwrap_or(20);
    if !(1..=MOST_GAMES).contains(&games) {
        return Err(ApiError::new(
            Code::InvalidRequest,
            format!("`games` is 1 to {MOST_GAMES} per player, not {games}"),
        ));
    }
    jobs::check_seed(req.seed.as_deref().unwrap_or(jobs::SEED)).map_err(refused)?;
    let asked =
        Asked { models: &req.models, budget_usd: req.budget_usd, max_seconds: req.max_seconds, cache: req.cache };
    if let Some(real) = asked.real(&s, &access, &pack, false)? {
        return on_real_models(&s, &access, &pack, req, real).await;
    }
    // The batch holds the server's one place for a batch until it ends, whether or not its client
    // waits for it; a client that hangs up stops it at its next game.
    let Ok(running) = s.simulating.clone().try_acquire_owned() else {
        return Err(ApiError::new(
            Code::SimulationRunning,
            "a batch of games is already running on this server: ask again when it ends",
        ));
    };
    let root = s.engine.root().to_path_buf();
    let pack_name = pack.clone();
    // The most turns a batch plays (games × players × the pack's turn cap): a second or two of one
    // core at the default 4,000.
    let most_turns = s.settings.simulate_turns as u64;
    let counted = s.metrics.simulating();
    // Said as the place is taken, before anything can wait: every batch the gauge counts has
    // said it started, and says how it ended once the place is free again.
    tracing::info!("a batch of simulated games started");
    let hung_up = StopOnDrop(Arc::new(AtomicBool::new(false)));
    let stop = hung_up.0.clone();
    let handle = tokio::runtime::Handle::current();
    // The batch's games block their threads: on one of tokio's blocking threads, not a worker.
    let report = tokio::task::spawn_blocking(move || {
        let report = handle.block_on(play(&root, &pack, req, most_turns, &stop));
        // The server's place for a batch is free (and the gauge down) before the log says so.
        drop((running, counted));
        if stop.load(Ordering::Relaxed) {
            tracing::info!("a batch of simulated games stopped: its client left");
        } else {
            tracing::info!("a batch of simulated games ended");
        }
        report
    })
    .await
    .map_err(ApiError::internal)??;
    drop(hung_up);
    let report = match report {
        Answer::Report(mut r) => {
            r.calibration = super::jobs::kept_headline(&s, &pack_name).await;
            Answer::Report(r)
        }
        sweep => sweep,
    };
    if sse::accepts(&headers, "text/html") {
        let page = match &report {
            Answer::Report(r) => crate::pages::page(r),
            Answer::Sweep(r) => crate::pages::sweep(r),
        };
        return Ok(super::api::html_page(page, PAGE_POLICY));
    }
    Ok(Json(report).into_response())
}

/// Starts the batch `req` asks for on real models as a job: its games within the job's turns
/// (`tune_turns`), its budget held as a tune's is.
async fn on_real_models(
    s: &Shared,
    access: &Access,
    pack: &str,
    req: NewSimulation,
    real: RealJob,
) -> ApiResult<Response> {
    if !req.sweep.is_empty() {
        return Err(unprocessable(
            "a sweep plays on the stand-ins: real models (`models`) play a plain batch, without `sweep`".into(),
        ));
    }
    let engine = super::lab::on_models(s.engine.root(), pack, &req.params, real.llm.clone()).await?;
    let loaded = engine.packs().get(pack)?;
    loaded.resolve_options(&req.options)?;
    let players =
        ruleweave_lab::simulate::players(&engine, &loaded, &req.players).map_err(|e| unprocessable(e.to_string()))?;
    let games = req.games.unwrap_or(20);
    let budget = u64::from(games) * players.len() as u64;
    let (max_turns, most) = (u64::from(loaded.simulate().max_turns.max(1)), s.settings.tune_turns as u64);
    if budget * max_turns > most {
        return Err(unprocessable(format!(
            "{games} games for each of {} player(s) of up to {max_turns} turns is more than a job plays \
             ({most} turns, tune_turns): ask for fewer games",
            players.len()
        )));
    }
    let batch = ruleweave_lab::simulate::Batch {
        pack: pack.to_owned(),
        games,
        players: req.players.clone(),
        seed: req.seed.clone().unwrap_or_else(|| jobs::SEED.into()),
        options: req.options.clone(),
        jobs: Some(real.games_at_once),
        prices: s.settings.real_models.as_ref().map(|r| r.prices.clone()).unwrap_or_default(),
    };
    let spec = JobSpec::Simulate { batch, spend: real.spend.clone() };
    super::jobs::begin(s, access, spec, engine, pack, &req, budget, Some(real)).await
}

/// Plays one batch on the stand-in models of the packs under `root`, stopping at the next game
/// once `stop` is set.
async fn play(
    root: &std::path::Path,
    pack: &str,
    req: NewSimulation,
    most_turns: u64,
    stop: &AtomicBool,
) -> ApiResult<Answer> {
    let engine = standin(root, pack, &req.params).await?;
    let pack = engine.packs().get(pack)?;
    pack.resolve_options(&req.options)?;
    let players =
        ruleweave_lab::simulate::players(&engine, &pack, &req.players).map_err(|e| unprocessable(e.to_string()))?;
    let spec = pack.simulate().clone();
    let games = req.games.unwrap_or(20);
    let turns = u64::from(games) * players.len() as u64 * u64::from(spec.max_turns);
    let seed = req.seed.unwrap_or_else(|| jobs::SEED.into());
    let handle = tokio::runtime::Handle::current();
    if !req.sweep.is_empty() {
        // On one thread: a server's batch leaves the other cores to requests.
        let asked = SweepAsked {
            pack: pack.name(),
            ranges: &req.sweep,
            games,
            players: &req.players,
            seed: &seed,
            options: req.options.clone(),
            jobs: Some(1),
            prices: BTreeMap::new(),
        };
        let sweep = asked.check().map_err(refused)?;
        let values = sweep.values(&engine)? as u64;
        if turns * values > most_turns {
            return Err(unprocessable(format!(
                "a sweep of {values} values, {turns} turns each, is more than a server batch plays ({most_turns} turns): \
                 a sweep this size runs as a job (POST /v1/packs/{}/sweep)",
                pack.name()
            )));
        }
        let points = ruleweave_lab::simulate::tune::sweep(&handle, &engine, &sweep, &|| {}, stop)?;
        return Ok(Answer::Sweep(sweep.report(spec.max_turns, points)));
    }
    if turns > most_turns {
        let most = most_turns / (players.len() as u64 * u64::from(spec.max_turns.max(1)));
        return Err(unprocessable(format!(
            "{games} games for each of {} of up to {} turns is more than a server batch plays \
             ({most_turns} turns): ask for at most {most} games, or run `ruleweave simulate`",
            match players.len() {
                1 => "1 player".to_owned(),
                n => format!("{n} players"),
            },
            spec.max_turns
        )));
    }
    let plan = Plan { pack: pack.name().to_owned(), games, first: 0, seed, jobs: 1, spec, record: false, spend: None };
    let rules = Rules { engine: &engine, options: &req.options };
    let played = ruleweave_lab::simulate::play(&handle, &plan, &players, &rules, &BTreeMap::new(), &|| {}, stop);
    let mut report = ruleweave_lab::simulate::report(&plan, &played);
    report.models = ruleweave_lab::simulate::models(&engine, &pack);
    Ok(Answer::Report(Box::new(report)))
}

/// Set when the request that started a batch is dropped (its client hung up, or it answered).
struct StopOnDrop(Arc<AtomicBool>);

impl Drop for StopOnDrop {
    fn drop(&mut self) {
        self.0.store(true, Ordering::Relaxed);
    }
}
