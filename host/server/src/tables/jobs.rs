//! Jobs: long work a server runs for a client (a tune's thousands of games), kept in the store so
//! that every process sharing it answers for the job: where it is, its answer, a request to stop
//! it. One process runs a job; it records its progress every so often and learns from that write
//! whether it was asked to stop (by a client of any process, or by its last watcher leaving).
//! A finished job is kept for a day.

use std::collections::HashMap;
use std::sync::Mutex;

use ruleweave::Result;
use ruleweave::llm::BoxFuture;
use serde_json::Value as Json;

use super::{Db, now_ms, on_pool, store_error};

/// How long a finished job is kept, in milliseconds: a day.
pub const JOB_KEPT_MS: i64 = 24 * 60 * 60 * 1000;

/// Where a job stands.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize, utoipa::ToSchema)]
#[serde(rename_all = "snake_case")]
pub enum JobState {
    /// Still working.
    Running,
    /// Finished, with its answer.
    Done,
    /// Stopped by an error, which its result says.
    Failed,
    /// Stopped because it was asked to (or its last watcher left).
    Cancelled,
}

impl JobState {
    fn as_str(self) -> &'static str {
        match self {
            JobState::Running => "running",
            JobState::Done => "done",
            JobState::Failed => "failed",
            JobState::Cancelled => "cancelled",
        }
    }

    fn parse(text: &str) -> Result<JobState> {
        Ok(match text {
            "running" => JobState::Running,
            "done" => JobState::Done,
            "failed" => JobState::Failed,
            "cancelled" => JobState::Cancelled,
            other => return Err(store_error("a stored job's state", format!("`{other}` is none"))),
        })
    }
}

/// A job as the store keeps it.
#[derive(Debug, Clone, PartialEq)]
pub struct Job {
    /// Its id.
    pub id: String,
    /// What it does (`tune`, `sweep`).
    pub kind: String,
    /// The pack it works on.
    pub pack: String,
    /// The key that started it (`key:<id>`), `None` for the operator.
    pub owner: Option<String>,
    /// Where it stands.
    pub state: JobState,
    /// What it was asked to do.
    pub request: Json,
    /// Where it is, as its runner last said.
    pub progress: Json,
    /// Its answer once done, or its error once failed.
    pub result: Option<Json>,
    /// Whether it was asked to stop.
    pub stop: bool,
    /// The clients following its events now, on every process.
    pub watchers: i64,
    /// When it started, unix milliseconds.
    pub created_at: i64,
    /// When its runner last wrote, unix milliseconds.
    pub updated_at: i64,
}

/// Where jobs are kept (see [`Tables::jobs`](super::Tables::jobs)).
pub trait Jobs: Send + Sync {
    /// Records a job (as `job` says: normally running, no result), and forgets the jobs that
    /// ended, or last wrote, more than [`JOB_KEPT_MS`] ago.
    fn create_job<'a>(&'a self, job: &'a Job) -> BoxFuture<'a, Result<()>>;

    /// The job `id`, if there is one.
    fn job<'a>(&'a self, id: &'a str) -> BoxFuture<'a, Result<Option<Job>>>;

    /// Records where a running job is; whether it was asked to stop.
    fn job_progress<'a>(&'a self, id: &'a str, progress: &'a Json) -> BoxFuture<'a, Result<bool>>;

    /// Ends a running job in `state` with its `result` (its answer, or its error); a job that
    /// already ended is left as it is.
    fn finish_job<'a>(&'a self, id: &'a str, state: JobState, result: &'a Json) -> BoxFuture<'a, Result<()>>;

    /// Asks a running job to stop; whether there is such a job (running or not).
    fn stop_job<'a>(&'a self, id: &'a str) -> BoxFuture<'a, Result<bool>>;

    /// Asks every running job `owner` started to stop (its key was revoked); their ids.
    fn stop_jobs_of<'a>(&'a self, owner: &'a str) -> BoxFuture<'a, Result<Vec<String>>>;

    /// How many jobs `owner` started at or after `since` (unix milliseconds), of those kept.
    fn jobs_since<'a>(&'a self, owner: &'a str, since: i64) -> BoxFuture<'a, Result<u64>>;

    /// A client started (`+1`) or stopped (`-1`) following the job's events. When the last one
    /// leaves a running job, the job is asked to stop: nobody is waiting for its answer.
    fn watch_job<'a>(&'a self, id: &'a str, delta: i64) -> BoxFuture<'a, Result<()>>;
}

fn ready<'a, T: Send + 'a>(v: T) -> BoxFuture<'a, T> {
    Box::pin(std::future::ready(v))
}

/// Jobs kept in this process, beside a memory store.
#[derive(Default)]
pub(super) struct InMemory(Mutex<HashMap<String, Job>>);

impl InMemory {
    fn jobs(&self) -> std::sync::MutexGuard<'_, HashMap<String, Job>> {
        self.0.lock().unwrap_or_else(|p| p.into_inner())
    }
}

impl Jobs for InMemory {
    fn create_job<'a>(&'a self, job: &'a Job) -> BoxFuture<'a, Result<()>> {
        let mut jobs = self.jobs();
        let now = now_ms();
        jobs.retain(|_, j| j.updated_at >= now - JOB_KEPT_MS);
        jobs.insert(job.id.clone(), job.clone());
        ready(Ok(()))
    }

    fn job<'a>(&'a self, id: &'a str) -> BoxFuture<'a, Result<Option<Job>>> {
        ready(Ok(self.jobs().get(id).cloned()))
    }

    fn job_progress<'a>(&'a self, id: &'a str, progress: &'a Json) -> BoxFuture<'a, Result<bool>> {
        let mut jobs = self.jobs();
        let stop = match jobs.get_mut(id) {
            Some(j) if j.state == JobState::Running => {
                j.progress = progress.clone();
                j.updated_at = now_ms();
                j.stop
            }
            Some(j) => j.stop,
            None => true,
        };
        ready(Ok(stop))
    }

    fn finish_job<'a>(&'a self, id: &'a str, state: JobState, result: &'a Json) -> BoxFuture<'a, Result<()>> {
        if let Some(j) = self.jobs().get_mut(id).filter(|j| j.state == JobState::Running) {
            j.state = state;
            j.result = Some(result.clone());
            j.updated_at = now_ms();
        }
        ready(Ok(()))
    }

    fn stop_job<'a>(&'a self, id: &'a str) -> BoxFuture<'a, Result<bool>> {
        let mut jobs = self.jobs();
        let found = jobs.get_mut(id).map(|j| j.stop |= j.state == JobState::Running).is_some();
        ready(Ok(found))
    }

    fn stop_jobs_of<'a>(&'a self, owner: &'a str) -> BoxFuture<'a, Result<Vec<String>>> {
        let mut stopped = Vec::new();
        for j in self.jobs().values_mut() {
            if j.owner.as_deref() == Some(owner) && j.state == JobState::Running {
                j.stop = true;
                stopped.push(j.id.clone());
            }
        }
        ready(Ok(stopped))
    }

    fn jobs_since<'a>(&'a self, owner: &'a str, since: i64) -> BoxFuture<'a, Result<u64>> {
        let n = self.jobs().values().filter(|j| j.owner.as_deref() == Some(owner) && j.created_at >= since).count();
        ready(Ok(n as u64))
    }

    fn watch_job<'a>(&'a self, id: &'a str, delta: i64) -> BoxFuture<'a, Result<()>> {
        if let Some(j) = self.jobs().get_mut(id) {
            j.watchers += delta;
            j.stop |= j.watchers <= 0 && j.state == JobState::Running;
        }
        ready(Ok(()))
    }
}

impl Jobs for Db {
    fn create_job<'a>(&'a self, job: &'a Job) -> BoxFuture<'a, Result<()>> {
        Box::pin(create(self, job))
    }

    fn job<'a>(&'a self, id: &'a str) -> BoxFuture<'a, Result<Option<Job>>> {
        Box::pin(find(self, id))
    }

    fn job_progress<'a>(&'a self, id: &'a str, progress: &'a Json) -> BoxFuture<'a, Result<bool>> {
        Box::pin(record_progress(self, id, progress))
    }

    fn finish_job<'a>(&'a self, id: &'a str, state: JobState, result: &'a Json) -> BoxFuture<'a, Result<()>> {
        Box::pin(finish(self, id, state, result))
    }

    fn stop_job<'a>(&'a self, id: &'a str) -> BoxFuture<'a, Result<bool>> {
        Box::pin(stop(self, id))
    }

    fn stop_jobs_of<'a>(&'a self, owner: &'a str) -> BoxFuture<'a, Result<Vec<String>>> {
        Box::pin(stop_owned(self, owner))
    }

    fn jobs_since<'a>(&'a self, owner: &'a str, since: i64) -> BoxFuture<'a, Result<u64>> {
        Box::pin(started_since(self, owner, since))
    }

    fn watch_job<'a>(&'a self, id: &'a str, delta: i64) -> BoxFuture<'a, Result<()>> {
        Box::pin(watch(self, id, delta))
    }
}

fn json(what: &str, text: &str) -> Result<Json> {
    serde_json::from_str(text).map_err(|e| store_error(&format!("a stored {what} is not JSON"), e))
}

async fn create(db: &Db, job: &Job) -> Result<()> {
    let gone_before = now_ms() - JOB_KEPT_MS;
    let result = job.result.as_ref().map(Json::to_string);
    on_pool!(db, pool => async {
        let mut tx = pool.begin().await?;
        sqlx::query("DELETE FROM jobs WHERE updated_at < $1").bind(gone_before).execute(&mut *tx).await?;
        sqlx::query(
            "INSERT INTO jobs (id, kind, pack, owner, state, request, progress, result, stop, watchers, \
             created_at, updated_at) VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12)",
        )
        .bind(&job.id)
        .bind(&job.kind)
        .bind(&job.pack)
        .bind(&job.owner)
        .bind(job.state.as_str())
        .bind(job.request.to_string())
        .bind(job.progress.to_string())
        .bind(result.clone())
        .bind(job.stop)
        .bind(job.watchers)
        .bind(job.created_at)
        .bind(job.updated_at)
        .execute(&mut *tx)
        .await?;
        tx.commit().await
    }
    .await)
    .map_err(|e| store_error("cannot record a job", e))
}

type JobRow = (String, String, String, Option<String>, String, String, String, Option<String>, bool, i64, i64, i64);

async fn find(db: &Db, id: &str) -> Result<Option<Job>> {
    let row: Option<JobRow> = on_pool!(db, pool => sqlx::query_as(
            "SELECT id, kind, pack, owner, state, request, progress, result, stop, watchers, created_at, \
             updated_at FROM jobs WHERE id = $1",
        )
        .bind(id)
        .fetch_optional(pool)
        .await)
    .map_err(|e| store_error("cannot read a job", e))?;
    let Some((id, kind, pack, owner, state, request, progress, result, stop, watchers, created_at, updated_at)) = row
    else {
        return Ok(None);
    };
    Ok(Some(Job {
        id,
        kind,
        pack,
        owner,
        state: JobState::parse(&state)?,
        request: json("job's request", &request)?,
        progress: json("job's progress", &progress)?,
        result: result.map(|r| json("job's result", &r)).transpose()?,
        stop,
        watchers,
        created_at,
        updated_at,
    }))
}

async fn record_progress(db: &Db, id: &str, progress: &Json) -> Result<bool> {
    let stop: Option<bool> = on_pool!(db, pool => sqlx::query_scalar(
            "UPDATE jobs SET progress = CASE WHEN state = 'running' THEN $2 ELSE progress END, \
             updated_at = CASE WHEN state = 'running' THEN $3 ELSE updated_at END WHERE id = $1 RETURNING stop",
        )
        .bind(id)
        .bind(progress.to_string())
        .bind(now_ms())
        .fetch_optional(pool)
        .await)
    .map_err(|e| store_error("cannot record a job's progress", e))?;
    // A job that is gone (forgotten, or its store emptied) has nobody to answer: it stops.
    Ok(stop.unwrap_or(true))
}

async fn finish(db: &Db, id: &str, state: JobState, result: &Json) -> Result<()> {
    on_pool!(db, pool => sqlx::query(
            "UPDATE jobs SET state = $2, result = $3, updated_at = $4 WHERE id = $1 AND state = 'running'",
        )
        .bind(id)
        .bind(state.as_str())
        .bind(result.to_string())
        .bind(now_ms())
        .execute(pool)
        .await
        .map(|_| ()))
    .map_err(|e| store_error("cannot record how a job ended", e))
}

async fn stop(db: &Db, id: &str) -> Result<bool> {
    let found = on_pool!(db, pool => sqlx::query(
            "UPDATE jobs SET stop = (stop OR state = 'running') WHERE id = $1",
        )
        .bind(id)
        .execute(pool)
        .await
        .map(|r| r.rows_affected()))
    .map_err(|e| store_error("cannot ask a job to stop", e))?;
    Ok(found > 0)
}

async fn started_since(db: &Db, owner: &str, since: i64) -> Result<u64> {
    let n: i64 = on_pool!(db, pool => sqlx::query_scalar(
            "SELECT COUNT(*) FROM jobs WHERE owner = $1 AND created_at >= $2",
        )
        .bind(owner)
        .bind(since)
        .fetch_one(pool)
        .await)
    .map_err(|e| store_error("cannot count a key's jobs", e))?;
    Ok(n.max(0) as u64)
}

async fn stop_owned(db: &Db, owner: &str) -> Result<Vec<String>> {
    on_pool!(db, pool => sqlx::query_scalar(
            "UPDATE jobs SET stop = TRUE WHERE owner = $1 AND state = 'running' RETURNING id",
        )
        .bind(owner)
        .fetch_all(pool)
        .await)
    .map_err(|e| store_error("cannot ask a key's jobs to stop", e))
}

async fn watch(db: &Db, id: &str, delta: i64) -> Result<()> {
    on_pool!(db, pool => sqlx::query(
            "UPDATE jobs SET watchers = watchers + $2, \
             stop = (stop OR (watchers + $2 <= 0 AND state = 'running')) WHERE id = $1",
        )
        .bind(id)
        .bind(delta)
        .execute(pool)
        .await
        .map(|_| ()))
    .map_err(|e| store_error("cannot count a job's watchers", e))
}
