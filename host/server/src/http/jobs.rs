//! Jobs: work longer than one request, started by one and followed by others:
//! `POST /v1/packs/{pack}/tune` finds the value of a pack's number that gives the outcome share
//! asked for, which takes thousands of games (far more than a simulate request's budget);
//! `POST /v1/packs/{pack}/sweep` plays a sweep too large for a request; and a simulate request on
//! real models plays its batch as a job, since real models answer in seconds, not microseconds.
//!
//! A job is kept in the store, so every replica on it answers `GET /v1/jobs/{id}` and its event
//! stream, and a `DELETE` on any replica stops it. The replica that started it plays its games
//! (on the stand-in models, in a store of its own, like the simulate route), records where it
//! is every [`PROGRESS_EVERY`], and reads back from that write whether it was asked to stop.
//! One job on the stand-ins and one on real models run at a time on a replica (429 for a
//! second of either); each has [`Settings::tune_turns`]
//! turns to spend. A job whose last event stream closed is stopped: nobody waits for it.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use crate::tables::{Job, JobState};
use axum::Json;
use axum::extract::{Extension, Path, State};
use axum::http::{HeaderMap, StatusCode};
use axum::response::sse::{KeepAlive, Sse};
use axum::response::{IntoResponse, Response};
use futures_util::stream;
use ruleweave_lab::jobs::{self, JobAnswer, JobKind, JobSpec, SweepAsked, TuneAsked};
use ruleweave_lab::simulate::tune;
use serde::{Deserialize, Serialize};
use serde_json::Value;

use super::access::Access;
use super::spending::{Asked, RealJob};

use super::error::{ApiResult, Code};
use super::extract::{Body, PackName};
use super::listen::Peer;
use super::routes::{Facts, I, O};
use super::{ApiError, Shared, sse};
use ruleweave::ErrorKind;

/// How often a running job records where it is (and learns whether it was asked to stop), and
/// how often its followers look.
pub(super) const PROGRESS_EVERY: Duration = Duration::from_millis(250);

/// A running job that has written nothing for this long lost its replica (stopped, crashed): it
/// answers `lost`.
const LOST_AFTER: i64 = 60_000;

/// The replica's one place for a job, and the job in it.
#[derive(Default)]
pub(super) struct JobSlot {
    running: Mutex<Option<(String, Arc<AtomicBool>)>>,
}

impl JobSlot {
    /// Takes the place for job `id`: its stop flag; `None` when a job holds it.
    fn take(&self, id: &str) -> Option<Arc<AtomicBool>> {
        let mut running = self.running.lock().unwrap_or_else(|p| p.into_inner());
        if running.is_some() {
            return None;
        }
        let stop = Arc::new(AtomicBool::new(false));
        *running = Some((id.to_owned(), stop.clone()));
        Some(stop)
    }

    fn free(&self) {
        *self.running.lock().unwrap_or_else(|p| p.into_inner()) = None;
    }

    /// Stops job `id` at its next game, when it runs here.
    pub(super) fn stop(&self, id: &str) {
        if let Some((running, stop)) = &*self.running.lock().unwrap_or_else(|p| p.into_inner())
            && running == id
        {
            stop.store(true, Ordering::Relaxed);
        }
    }

    /// Stops the job running here, if any (the server is stopping).
    pub(super) fn stop_all(&self) {
        if let Some((_, stop)) = &*self.running.lock().unwrap_or_else(|p| p.into_inner()) {
            stop.store(true, Ordering::Relaxed);
        }
    }
}

/// A tune to run: the same as `ruleweave tune`'s flags.
#[derive(Deserialize, Serialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
pub(super) struct NewTune {
    /// The parameter and its range, `NAME=LO..HI` (`thresholds.medium=40..80`): a number of the
    /// pack's `params:` by dotted path, the range within its `param_bounds:`.
    #[schema(example = "thresholds.medium=40..80")]
    vary: String,
    /// The share wanted, `PLAYER:OUTCOME=SHARE` (`liar:won_*=0.3`; an outcome ending in `*` adds
    /// up every outcome it begins).
    #[schema(example = "liar:won_*=0.3")]
    target: String,
    /// How close to the share is close enough (default 0.05): the answer's 95% interval lies
    /// within it.
    #[serde(default)]
    within: Option<f64>,
    /// What seeds the games (default `ruleweave`): the same seed, the same answer.
    #[serde(default)]
    seed: Option<String>,
    /// Other numbers of the pack's `params:` set for the games, by dotted path.
    #[serde(default)]
    #[schema(value_type = Object)]
    params: BTreeMap<String, Value>,
    /// Session options every game opens with.
    #[serde(default)]
    #[schema(value_type = Object)]
    options: serde_json::Map<String, Value>,
    /// The most games one value gets (default 3,200).
    #[serde(default)]
    #[schema(minimum = 100)]
    games_max: Option<u32>,
    /// Profiles to play on real models, by provider (`{"judge": "openai"}`); the others stay on
    /// the stand-in. None by default: the job plays on the stand-ins. Needs the operator's token
    /// or a key with the `spend` right, and `budget_usd`.
    #[serde(default)]
    models: BTreeMap<String, String>,
    /// The most the job's real models may cost, by `[prices]` (required with `models`): each call
    /// holds the most it can cost before it is sent, and the job stops at the budget.
    #[serde(default)]
    budget_usd: Option<f64>,
    /// The longest the job's model calls may go on, in seconds (at most a day): it waits out
    /// rate limits with no cap of its own, and stops as at its budget when this is up.
    #[serde(default)]
    #[schema(minimum = 1, maximum = 86400)]
    max_seconds: Option<u64>,
    /// On real models, answer from the server's cache what an earlier job asked, and keep this
    /// job's answers there (default true: a tune asks the same games again at every value).
    #[serde(default)]
    cache: Option<bool>,
}

/// A job started.
#[derive(Serialize, utoipa::ToSchema)]
pub(super) struct Started {
    /// Its id: `GET /v1/jobs/{job}` follows it.
    job: String,
}

/// Where a job stands, as a client sees it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, utoipa::ToSchema)]
#[serde(rename_all = "snake_case")]
pub(super) enum Status {
    /// Still playing games.
    Running,
    /// Finished: `result` holds its answer.
    Done,
    /// Stopped by an error: `error` says which.
    Failed,
    /// Stopped because it was asked to, its last follower left, or its server stopped.
    Cancelled,
    /// Its replica stopped answering for it (it wrote nothing for a minute).
    Lost,
}

/// Where a running job is.
#[derive(Debug, Clone, Default, Serialize, Deserialize, utoipa::ToSchema)]
pub(super) struct Progress {
    /// The value it is playing games at.
    #[serde(default)]
    value: Option<f64>,
    /// Games played so far.
    #[serde(default)]
    games_played: u64,
    /// The most games it may play.
    #[serde(default)]
    budget: u64,
    /// What its real models have cost so far (a job on real models).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    spent_usd: Option<f64>,
}

/// Why a job failed (the error a request would have answered: `invalid_input`, `script_error`,
/// ...), or `cancelled` for one that was stopped.
#[derive(Debug, Clone, Serialize, Deserialize, utoipa::ToSchema)]
pub(super) struct JobError {
    /// A stable name for the error.
    code: String,
    /// What happened, in words.
    message: String,
}

/// A job.
#[derive(Serialize, utoipa::ToSchema)]
pub(super) struct JobBody {
    /// Its id.
    job: String,
    /// What it does: `tune`.
    kind: String,
    /// The pack it works on.
    pack: String,
    /// Where it stands.
    state: Status,
    /// Where it is (its last word, once it ended).
    progress: Progress,
    /// Its answer, once done: `ruleweave tune --json`'s for a tune, `simulate --sweep --json`'s
    /// for a sweep.
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schema(value_type = Option<JobAnswer>)]
    result: Option<Value>,
    /// Why it failed, or that it was stopped.
    #[serde(skip_serializing_if = "Option::is_none")]
    error: Option<JobError>,
    /// When it started, unix milliseconds.
    created_at: i64,
    /// When it last recorded where it is, unix milliseconds.
    updated_at: i64,
}

/// Who may call `start`, and the errors it answers of its own.
pub(super) const START: Facts =
    Facts::keys(&[O, I]).note("an issued key: of its packs; on real models, `spend`").answers(&[
        Code::Forbidden,
        Code::Engine(ErrorKind::NotFound),
        Code::Engine(ErrorKind::Input),
        Code::JobRunning,
        Code::QuotaExceeded,
        Code::Engine(ErrorKind::Pack),
    ]);

/// `POST /v1/packs/{pack}/tune`: starts a tune as a job, on the stand-in models, or with
/// `"models"` and `"budget_usd"` some profiles on real ones (their own job place, one at a time).
#[utoipa::path(post, path = "/v1/packs/{pack}/tune", operation_id = "tunePack", tag = "packs", params(("pack" = String, Path, description = "The pack")), request_body = NewTune, responses(
    (status = 202, description = "The job started: follow it at `/v1/jobs/{job}`", body = Started),
))]
pub(super) async fn start(
    State(s): State<Shared>,
    Extension(access): Extension<Access>,
    PackName(pack): PackName,
    Body(req): Body<NewTune>,
) -> ApiResult<Response> {
    let asked =
        Asked { models: &req.models, budget_usd: req.budget_usd, max_seconds: req.max_seconds, cache: req.cache };
    let real = asked.real(&s, &access, &pack, true)?;
    let engine = match &real {
        None => super::lab::standin(s.engine.root(), &pack, &req.params).await?,
        Some(r) => super::lab::on_models(s.engine.root(), &pack, &req.params, r.llm.clone()).await?,
    };
    let turns = u64::from(engine.packs().get(&pack)?.simulate().max_turns.max(1));
    let asked = TuneAsked {
        pack: &pack,
        vary: &req.vary,
        target: &req.target,
        within: req.within.unwrap_or(0.05),
        seed: req.seed.as_deref().unwrap_or(jobs::SEED),
        options: req.options.clone(),
        games_max: req.games_max.unwrap_or(tune::GAMES_MAX),
        budget: (s.settings.tune_turns as u64 / turns).max(1),
        jobs: real.as_ref().map(|r| r.games_at_once),
    };
    let mut tune = asked.check(&engine).map_err(super::lab::refused)?;
    tune.spend = real.as_ref().map(|r| r.spend.clone());
    let budget = tune.budget;
    begin(&s, &access, JobSpec::Tune(tune), engine, &pack, &req, budget, real).await
}

/// A sweep too large for a simulate request: the same games at each value of one or two of the
/// pack's numbers, as `simulate --sweep` plays them.
#[derive(Deserialize, Serialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
pub(super) struct NewSweep {
    /// One range, or two (a grid): `NAME=LO..HI[:STEP]` (`thresholds.medium=40..80`).
    #[schema(min_items = 1, max_items = 2)]
    sweep: Vec<String>,
    /// Games per player at each value (default 100).
    #[serde(default)]
    #[schema(minimum = 1, maximum = 100000)]
    games: Option<u32>,
    /// The players (default: every player the pack ships).
    #[serde(default)]
    players: Vec<String>,
    /// Session options every game opens with.
    #[serde(default)]
    #[schema(value_type = Object)]
    options: serde_json::Map<String, Value>,
    /// What seeds the games (default `ruleweave`).
    #[serde(default)]
    seed: Option<String>,
    /// Other numbers of the pack's `params:` set for the games, by dotted path.
    #[serde(default)]
    #[schema(value_type = Object)]
    params: BTreeMap<String, Value>,
}

/// Who may call `start_sweep`, and the errors it answers of its own.
pub(super) const START_SWEEP: Facts = Facts::keys(&[O, I]).note("an issued key: of its packs").answers(&[
    Code::Engine(ErrorKind::NotFound),
    Code::Engine(ErrorKind::Input),
    Code::JobRunning,
    Code::QuotaExceeded,
    Code::Engine(ErrorKind::Pack),
]);

/// `POST /v1/packs/{pack}/sweep`: starts a sweep as a job, on the stand-in models.
#[utoipa::path(post, path = "/v1/packs/{pack}/sweep", operation_id = "sweepPack", tag = "packs", params(("pack" = String, Path, description = "The pack")), request_body = NewSweep, responses(
    (status = 202, description = "The job started: follow it at `/v1/jobs/{job}`", body = Started),
))]
pub(super) async fn start_sweep(
    State(s): State<Shared>,
    Extension(access): Extension<Access>,
    PackName(pack): PackName,
    Body(req): Body<NewSweep>,
) -> ApiResult<Response> {
    let asked = SweepAsked {
        pack: &pack,
        ranges: &req.sweep,
        games: req.games.unwrap_or(100),
        players: &req.players,
        seed: req.seed.as_deref().unwrap_or(jobs::SEED),
        options: req.options.clone(),
        // A job's games spread over every core (one job runs at a time on a server).
        jobs: None,
        prices: BTreeMap::new(),
    };
    let sweep = asked.check().map_err(super::lab::refused)?;
    let engine = super::lab::standin(s.engine.root(), &pack, &req.params).await?;
    let loaded = engine.packs().get(&pack)?;
    loaded.resolve_options(&req.options)?;
    let players = ruleweave_lab::simulate::players(&engine, &loaded, &req.players)
        .map_err(|e| super::lab::unprocessable(e.to_string()))?;
    let values = sweep.values(&engine)? as u64;
    let (games, max_turns) = (sweep.batch.games, loaded.simulate().max_turns);
    let budget = u64::from(games) * players.len() as u64 * values;
    let turns = budget * u64::from(max_turns.max(1));
    let most = s.settings.tune_turns as u64;
    if turns > most {
        return Err(super::lab::unprocessable(format!(
            "a sweep of {values} values × {} player(s) × {games} games of up to {max_turns} turns is more than \
             a job plays ({most} turns, tune_turns): take fewer games or longer steps",
            players.len()
        )));
    }
    begin(&s, &access, JobSpec::Sweep(sweep), engine, &pack, &req, budget, None).await
}

/// A job's answer as the store keeps it.
fn answer(report: &JobAnswer) -> ruleweave::Result<Value> {
    serde_json::to_value(report).map_err(|e| ruleweave::Error::new(ruleweave::ErrorKind::Internal, e.to_string()))
}

/// Takes the server's place for a job (a job on real models has a place of its own, and holds
/// its budget from its key's `spend_limit_usd`), records the job, and starts `work` in it:
/// `202 {"job"}`.
#[allow(clippy::too_many_arguments)]
pub(super) async fn begin(
    s: &Shared,
    access: &Access,
    spec: JobSpec,
    engine: ruleweave::Engine,
    pack: &str,
    req: &impl Serialize,
    budget: u64,
    real: Option<RealJob>,
) -> ApiResult<Response> {
    let kind = spec.kind().name();
    let jobs = s.jobs().await?;
    // One issued key cannot keep the server's one job place to itself: at most
    // `jobs_per_key_per_hour` an hour.
    if let (Access::Issued(_), Some(owner)) = (access, access.owner()) {
        let most = s.settings.jobs_per_key_per_hour;
        let started = jobs.jobs_since(&owner, sse::unix_ms() - 3_600_000).await?;
        if started >= most {
            return Err(ApiError::new(
                Code::QuotaExceeded,
                format!(
                    "this key started {started} jobs in the last hour, the most one key may \
                     (`[server] jobs_per_key_per_hour` = {most}): try again later"
                ),
            ));
        }
    }
    let id = super::access::secret("job")?["rw_job_".len()..][..20].to_owned();
    let slot = if real.is_some() { &s.real_job } else { &s.job };
    let Some(stop) = slot.take(&id) else {
        let which = if real.is_some() { "a job on real models" } else { "a job" };
        return Err(ApiError::new(
            Code::JobRunning,
            format!("{which} is already running on this server: ask again when it ends, or stop it"),
        ));
    };
    // The budget is held from the key's cap while the job runs, on every replica at once.
    let holder = match (&real, access) {
        (Some(r), Access::Issued(k)) => match s.keys().await?.hold_spend(&k.id, r.usd).await {
            Ok(true) => Some(k.id.clone()),
            held => {
                slot.free();
                held?;
                let left = k.spend_limit_usd.map_or(0.0, |cap| (cap - k.spent_usd).max(0.0));
                return Err(ApiError::new(
                    Code::QuotaExceeded,
                    format!("this key may spend {left:.4} more (`spend_limit_usd`), less than `budget_usd` {}", r.usd),
                ));
            }
        },
        _ => None,
    };
    let now = sse::unix_ms();
    let progress = Progress { value: None, games_played: 0, budget, spent_usd: real.as_ref().map(|_| 0.0) };
    let job = Job {
        id: id.clone(),
        kind: kind.to_owned(),
        pack: pack.to_owned(),
        owner: access.owner(),
        state: JobState::Running,
        request: serde_json::to_value(req).map_err(ApiError::internal)?,
        progress: serde_json::to_value(&progress).map_err(ApiError::internal)?,
        result: None,
        stop: false,
        watchers: 0,
        created_at: now,
        updated_at: now,
    };
    let paid = real.map(|r| Paid { spend: r.spend, held: holder.map(|k| (k, r.usd)) });
    let calibration = kept_headline(s, pack).await;
    if let Err(e) = jobs.create_job(&job).await {
        slot.free();
        if let Some(Paid { held: Some((key, usd)), .. }) = &paid {
            let _ = s.keys().await?.release_spend(key, *usd).await;
        }
        return Err(e.into());
    }
    tracing::info!(job = %id, pack = %pack, "a {kind} started");
    let task = s.clone();
    let played = Played { spec, engine, budget, calibration };
    s.spawn(async move { run(task, id, played, stop, paid).await });
    Ok((StatusCode::ACCEPTED, Json(Started { job: job.id })).into_response())
}

/// A job on real models: its account, and the key's budget it holds (and gives back what it did
/// not spend).
struct Paid {
    spend: Arc<ruleweave_lab::spend::Spend>,
    held: Option<(String, f64)>,
}

/// What a job plays: its work, the engine it plays on, the most games it plays, and the kept
/// calibration of its pack version its answer carries.
struct Played {
    spec: JobSpec,
    engine: ruleweave::Engine,
    budget: u64,
    calibration: Option<ruleweave_lab::calibrate::Headline>,
}

/// The headline of the calibration kept for `pack` at the version the server serves (its rules
/// on disk, whatever params a job sets), if any.
pub(super) async fn kept_headline(s: &Shared, pack: &str) -> Option<ruleweave_lab::calibrate::Headline> {
    let version = s.engine.packs().get(pack).ok()?.version().to_owned();
    let tables = s.tables().await.ok()??;
    let body = tables.calibrations.calibration(pack, &version).await.ok()??;
    serde_json::from_value::<ruleweave_lab::calibrate::Calibration>(body).ok().map(|c| c.headline())
}

/// Plays a job's work on the blocking pool, recording its progress until it ends; then how it
/// ended.
async fn run(s: Shared, id: String, played: Played, stop: Arc<AtomicBool>, paid: Option<Paid>) {
    let Played { spec, engine, budget, calibration } = played;
    let kind = spec.kind().name();
    let Ok(jobs) = s.jobs().await else { return };
    let spent = || paid.as_ref().map(|p| p.spend.spent().usd);
    let latest = Arc::new(Mutex::new(Progress { value: None, games_played: 0, budget, spent_usd: spent() }));
    let work = {
        let (latest, stop, handle) = (latest.clone(), stop.clone(), tokio::runtime::Handle::current());
        tokio::task::spawn_blocking(move || {
            let said = |value: Option<f64>, played: u64| {
                let mut latest = latest.lock().unwrap_or_else(|p| p.into_inner());
                latest.value = value;
                latest.games_played = played;
            };
            spec.run(&handle, &engine, &said, &stop).and_then(|a| answer(&a.with_calibration(calibration)))
        })
    };
    tokio::pin!(work);
    let mut tick = tokio::time::interval(PROGRESS_EVERY);
    let ended = loop {
        tokio::select! {
            ended = &mut work => break ended,
            _ = tick.tick() => {
                let now = {
                    let mut latest = latest.lock().unwrap_or_else(|p| p.into_inner());
                    latest.spent_usd = spent();
                    latest.clone()
                };
                let now = serde_json::to_value(now).unwrap_or_default();
                match jobs.job_progress(&id, &now).await {
                    Ok(true) => stop.store(true, Ordering::Relaxed),
                    Ok(false) => {}
                    Err(e) => tracing::warn!(job = %id, "cannot record a job's progress: {e}"),
                }
            }
        }
    };
    latest.lock().unwrap_or_else(|p| p.into_inner()).spent_usd = spent();
    let last = serde_json::to_value(latest.lock().unwrap_or_else(|p| p.into_inner()).clone()).unwrap_or_default();
    let _ = jobs.job_progress(&id, &last).await;
    let (state, result) = match ended {
        Ok(Ok(answer)) => (JobState::Done, answer),
        _ if stop.load(Ordering::Relaxed) => {
            (JobState::Cancelled, serde_json::json!({"code": "cancelled", "message": "the job was stopped"}))
        }
        Ok(Err(e)) => {
            let e = ApiError::from(e);
            (JobState::Failed, serde_json::json!({"code": e.code(), "message": e.message()}))
        }
        Err(e) => (JobState::Failed, serde_json::json!({"code": "internal", "message": e.to_string()})),
    };
    // What the key held and the job did not spend goes back to it.
    if let Some(Paid { spend, held: Some((key, usd)) }) = &paid
        && let Ok(keys) = s.keys().await
        && let Err(e) = keys.release_spend(key, (usd - spend.spent().usd).max(0.0)).await
    {
        tracing::error!(job = %id, "cannot give back what a job did not spend: {e}");
    }
    // The place is free before the job says it ended: a client that saw it end may start another.
    if paid.is_some() {
        s.real_job.free()
    } else {
        s.job.free()
    }
    if let Err(e) = jobs.finish_job(&id, state, &result).await {
        tracing::error!(job = %id, "cannot record how a job ended: {e}");
    }
    tracing::info!(job = %id, state = ?state, "a {kind} ended");
}

/// Job `id` as the requester may see it: one an issued key did not start is no job to it.
async fn find(s: &Shared, access: &Access, id: &str) -> ApiResult<Job> {
    match s.jobs().await?.job(id).await? {
        Some(job) if access.is_all() || job.owner == access.owner() => Ok(job),
        _ => Err(ApiError::new(Code::Engine(ruleweave::ErrorKind::NotFound), format!("there is no job {id}"))),
    }
}

fn body(job: Job) -> JobBody {
    let state = match job.state {
        JobState::Running if sse::unix_ms() - job.updated_at > LOST_AFTER => Status::Lost,
        JobState::Running => Status::Running,
        JobState::Done => Status::Done,
        JobState::Failed => Status::Failed,
        JobState::Cancelled => Status::Cancelled,
    };
    let result = if job.state == JobState::Done { job.result.clone() } else { None };
    let error = match job.state {
        JobState::Failed | JobState::Cancelled => job.result.clone().and_then(|e| serde_json::from_value(e).ok()),
        _ => None,
    };
    JobBody {
        job: job.id,
        kind: job.kind,
        pack: job.pack,
        state,
        progress: serde_json::from_value(job.progress).unwrap_or_default(),
        result,
        error,
        created_at: job.created_at,
        updated_at: job.updated_at,
    }
}

/// Who may call `job`, and the errors it answers of its own.
pub(super) const JOB: Facts =
    Facts::keys(&[O, I]).note("an issued key: the jobs it started").answers(&[Code::Engine(ErrorKind::NotFound)]);

/// `GET /v1/jobs/{id}`: where a job stands, and its answer once done; with `Accept: text/html`,
/// a done tune's answer as the page `ruleweave tune --html` writes (each value tried, its share and
/// interval over the target's band).
#[utoipa::path(get, path = "/v1/jobs/{id}", operation_id = "getJob", tag = "jobs", params(("id" = String, Path, description = "The job")), responses(
    (status = 200, description = "The job (as a page: its answer's chart, once done)", content(
        (JobBody = "application/json"),
        (String = "text/html"),
    )),
))]
pub(super) async fn job(
    State(s): State<Shared>,
    Extension(access): Extension<Access>,
    Path(id): Path<String>,
    headers: HeaderMap,
) -> ApiResult<Response> {
    let job = body(find(&s, &access, &id).await?);
    // The page is drawn only for a client that asks for it.
    if sse::accepts(&headers, "text/html")
        && let Some(page) = page_of(&job)
    {
        return Ok(super::api::html_page(page, super::lab::PAGE_POLICY));
    }
    Ok(Json(job).into_response())
}

/// A done job's answer as the page `--html` writes: a tune's values tried, a sweep's charts.
fn page_of(job: &JobBody) -> Option<String> {
    match JobAnswer::read(JobKind::named(&job.kind)?, job.result.clone()?)? {
        JobAnswer::Tune(r) => Some(crate::pages::tune(&r)),
        JobAnswer::Sweep(r) => Some(crate::pages::sweep(&r)),
        JobAnswer::Report(r) => Some(crate::pages::page(&r)),
    }
}

/// Who may call `stop`, and the errors it answers of its own.
pub(super) const STOP: Facts =
    Facts::keys(&[O, I]).note("an issued key: the jobs it started").answers(&[Code::Engine(ErrorKind::NotFound)]);

/// `DELETE /v1/jobs/{id}`: stops a running job at its next game, whichever replica runs it; the
/// job as it stands (it says `cancelled` once its runner stopped). A job that ended is left as
/// it was.
#[utoipa::path(delete, path = "/v1/jobs/{id}", operation_id = "stopJob", tag = "jobs", params(("id" = String, Path, description = "The job")), responses(
    (status = 202, description = "Asked to stop: the job as it stands", body = JobBody),
))]
pub(super) async fn stop(
    State(s): State<Shared>,
    Extension(access): Extension<Access>,
    Path(id): Path<String>,
) -> ApiResult<Response> {
    find(&s, &access, &id).await?;
    s.jobs().await?.stop_job(&id).await?;
    s.job.stop(&id);
    s.real_job.stop(&id);
    let job = find(&s, &access, &id).await?;
    Ok((StatusCode::ACCEPTED, Json(body(job))).into_response())
}

/// Who may call `events`, and the errors it answers of its own.
pub(super) const EVENTS: Facts = Facts::keys(&[O, I])
    .note("an issued key: the jobs it started")
    .answers(&[Code::Engine(ErrorKind::NotFound), Code::TooManyStreams]);

/// `GET /v1/jobs/{id}/events`: the job as SSE, whichever replica runs it: `progress` (the job)
/// as it moves, then `done`, `failed`, `cancelled` or `lost` (the job, with its answer or error),
/// and the stream ends. When the last stream of a running job closes, the job is stopped.
#[utoipa::path(get, path = "/v1/jobs/{id}/events", operation_id = "jobEvents", tag = "jobs", params(("id" = String, Path, description = "The job")), responses(
    (status = 200, description = "`progress` events, then one naming how it ended; each data the job as JSON", content_type = "text/event-stream", body = String),
))]
pub(super) async fn events(
    State(s): State<Shared>,
    Extension(access): Extension<Access>,
    Path(id): Path<String>,
    peer: Option<Extension<Peer>>,
) -> ApiResult<Response> {
    let slot = s.stream_slot(peer.map(|p| p.0))?;
    find(&s, &access, &id).await?;
    s.jobs().await?.watch_job(&id, 1).await?;
    let watching = Watching { s: s.clone(), id: id.clone() };
    let tick = tokio::time::interval(PROGRESS_EVERY);
    let state = (Some(watching), slot, tick, None::<String>);
    let stream = stream::unfold(state, move |(watching, slot, mut tick, mut seen)| {
        let id = id.clone();
        let s = s.clone();
        async move {
            let watching = watching?;
            loop {
                tick.tick().await;
                let job = match s.jobs().await.ok()?.job(&id).await {
                    Ok(Some(job)) => job,
                    _ => return None,
                };
                let shown = body(job);
                // A change of state or of progress is news; the runner's writes that change neither are not.
                let now = format!("{:?} {}", shown.state, serde_json::to_string(&shown.progress).unwrap_or_default());
                if seen.as_ref() == Some(&now) {
                    continue;
                }
                seen = Some(now);
                let (name, last) = match shown.state {
                    Status::Running => ("progress", false),
                    Status::Done => ("done", true),
                    Status::Failed => ("failed", true),
                    Status::Cancelled => ("cancelled", true),
                    Status::Lost => ("lost", true),
                };
                let event = Ok::<_, std::convert::Infallible>(sse::event(Some(name), &shown));
                // After the last event, the next poll ends the stream (and its watch).
                let watching = if last { None } else { Some(watching) };
                return Some((event, (watching, slot, tick, seen)));
            }
        }
    });
    Ok(Sse::new(stream).keep_alive(KeepAlive::default()).into_response())
}

/// A client following a job: counted in the store while it does.
struct Watching {
    s: Shared,
    id: String,
}

impl Drop for Watching {
    fn drop(&mut self) {
        let (s, id) = (self.s.clone(), std::mem::take(&mut self.id));
        // A stream dropped as the process ends has no runtime to count with: nothing waits then.
        let Ok(runtime) = tokio::runtime::Handle::try_current() else { return };
        runtime.spawn(async move {
            if let Ok(jobs) = s.jobs().await
                && let Err(e) = jobs.watch_job(&id, -1).await
            {
                tracing::warn!(job = %id, "cannot count a job's watchers: {e}");
            }
        });
    }
}
