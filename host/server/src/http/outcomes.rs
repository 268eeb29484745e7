//! Live games by variant: `GET /v1/packs/{pack}/outcomes`, the report `ruleweave outcomes` prints,
//! from the store's outcome rows (every replica on one database answers the same); and
//! `DELETE /v1/players/{player}`, which erases a player's sessions and rows.

use axum::Json;
use axum::extract::{Path, Query, State};
use axum::http::{HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use ruleweave::ErrorKind;
use ruleweave_lab::outcomes::OutcomesReport;
use serde::{Deserialize, Serialize};

use super::error::{ApiResult, Code};
use super::extract::PackName;
use super::routes::{Facts, I, O};
use super::{ApiError, Shared};

/// `GET /v1/packs/{pack}/outcomes?since=&until=&version=`: which games a report reads.
#[derive(Deserialize, utoipa::IntoParams)]
#[serde(deny_unknown_fields)]
#[into_params(parameter_in = Query)]
pub(super) struct Range {
    /// Only games opened at or after this: an RFC 3339 time (`2026-12-01T09:00:00Z`, or a date),
    /// or a span back from now (`7d`).
    since: Option<String>,
    /// Only games opened before this (as `since`).
    until: Option<String>,
    /// Only games opened at this version of the pack.
    version: Option<String>,
    /// Beside each live effect, the one the pack's scripted players predict: 20 games each on
    /// the control's rules and on each variant's, on the stand-ins (a batch, one at a time on a
    /// server, as a simulate request is).
    #[serde(default)]
    predicted: bool,
}

/// Who may call `outcomes`, and the errors it answers of its own.
pub(super) const OUTCOMES: Facts = Facts::keys(&[O, I]).note("an issued key: of its packs").answers(&[
    Code::InvalidRequest,
    Code::SimulationRunning,
    Code::Engine(ErrorKind::NotFound),
    Code::Engine(ErrorKind::Pack),
    Code::Engine(ErrorKind::Store),
]);

/// `GET /v1/packs/{pack}/outcomes`: how the pack's live games ended, by variant of its
/// experiment, against the control; with `Accept: text/html`, as the page with charts
/// `outcomes --html` writes (the console's Variants panel shows it).
#[utoipa::path(get, path = "/v1/packs/{pack}/outcomes", operation_id = "packOutcomes", tag = "packs", params(("pack" = String, Path, description = "The pack"), Range), responses(
    (status = 200, description = "How live games ended, by variant", content(
        (OutcomesReport = "application/json"),
        (String = "text/html"),
    )),
))]
pub(super) async fn outcomes(
    State(s): State<Shared>,
    PackName(pack): PackName,
    headers: HeaderMap,
    query: Result<Query<Range>, axum::extract::rejection::QueryRejection>,
) -> ApiResult<Response> {
    let bad = |m: String| ApiError::new(Code::InvalidRequest, m);
    let Query(q) = query.map_err(|e| {
        bad(format!("the query does not fit (since, until, version): {}", super::error::query_in_words(&e)))
    })?;
    let time = |name: &str, text: &Option<String>| -> ApiResult<Option<i64>> {
        let Some(text) = text else { return Ok(None) };
        ruleweave_lab::outcomes::time_ms(text).map(Some).ok_or_else(|| {
            bad(format!("`{name}`: `{text}` is no time: an RFC 3339 time (2026-12-01T09:00:00Z) or a span back (7d)"))
        })
    };
    let (since, until) = (time("since", &q.since)?, time("until", &q.until)?);
    let loaded = s.engine.packs().get(&pack)?;
    let store = &**s.engine.store();
    let rows = ruleweave::store::needs(store, store.outcomes(), "outcome rows")?;
    let query = ruleweave::store::OutcomeQuery { pack: &pack, since, until, version: q.version.as_deref() };
    let mut report = ruleweave_lab::outcomes::report(rows, &loaded, query).await?;
    if q.predicted {
        report.predicted = predicted(&s, &pack).await?;
    }
    if super::sse::accepts(&headers, "text/html") {
        return Ok(super::api::html_page(crate::pages::live(&report), super::lab::PAGE_POLICY));
    }
    Ok(Json(report).into_response())
}

/// Games per scripted player on each variant's rules, for a report's prediction.
const PREDICTED_GAMES: u32 = 20;

/// What `pack`'s scripted players predict of each variant, played in the server's one place
/// for a batch, on the stand-ins, off the workers that answer requests.
async fn predicted(s: &Shared, pack: &str) -> ApiResult<Option<ruleweave_lab::outcomes::Predicted>> {
    let Ok(_running) = s.simulating.clone().try_acquire_owned() else {
        return Err(ApiError::new(
            Code::SimulationRunning,
            "a batch of games is already running on this server: ask for the prediction again when it ends",
        ));
    };
    let engine = super::lab::standin(s.engine.root(), pack, &Default::default()).await?;
    let (handle, pack) = (tokio::runtime::Handle::current(), pack.to_owned());
    let seed = ruleweave_lab::jobs::SEED;
    tokio::task::spawn_blocking(move || {
        ruleweave_lab::outcomes::predict(&handle, &engine, &pack, PREDICTED_GAMES, seed)
    })
    .await
    .map_err(ApiError::internal)?
    .map_err(ApiError::from)
}

/// A player's data, erased.
#[derive(Serialize, utoipa::ToSchema)]
pub(super) struct Erased {
    /// The sessions deleted.
    sessions: u64,
    /// The outcome rows deleted.
    outcomes: u64,
}

/// Who may call `erase_player`, and the errors it answers of its own.
pub(super) const ERASE_PLAYER: Facts =
    Facts::keys(&[O]).answers(&[Code::InvalidRequest, Code::Engine(ErrorKind::Store)]);

/// `DELETE /v1/players/{player}`: erases every session opened for `player` (forks of them too,
/// which keep their player) and their outcome rows, on whichever replica.
#[utoipa::path(delete, path = "/v1/players/{player}", operation_id = "erasePlayer", tag = "sessions", params(("player" = String, Path, description = "The player, as sessions were opened for them")), responses(
    (status = 200, description = "What was erased", body = Erased),
))]
pub(super) async fn erase_player(State(s): State<Shared>, Path(player): Path<String>) -> ApiResult<Response> {
    ruleweave::check_player(&player)
        .map_err(|e| ApiError::new(Code::InvalidRequest, format!("`player`: {}", e.detail())))?;
    let (sessions, outcomes) = s.engine.erase_player(&player).await?;
    tracing::info!(sessions, outcomes, "a player's data was erased");
    Ok((StatusCode::OK, Json(Erased { sessions, outcomes })).into_response())
}
