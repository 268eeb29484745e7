//! Issued keys (`/v1/keys`, the operator's): a key per chat client or game server, limited to some
//! packs if the operator says so, revocable at once on every replica; and `GET /v1/access`, who a
//! key is.

use axum::Json;
use axum::extract::{Extension, Path, State};
use axum::http::StatusCode;
use serde::{Deserialize, Serialize};
use utoipa::ToSchema;

use super::access::{self, Access};

use super::error::{ApiResult, Code};
use super::extract::Body;
use super::routes::{Facts, I, O, P, S};
use super::{ApiError, Shared};
use ruleweave::ErrorKind;

/// A key to issue.
#[derive(Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub(crate) struct NewKey {
    /// What to call it (who holds it: `discord bot`, `ana's phone`), 1 to 200 characters.
    label: String,
    /// The packs it may play; every pack when not given.
    #[serde(default)]
    packs: Option<Vec<String>>,
    /// What it may do beyond playing: `"debug"` edits state, holds and resumes turns, forks
    /// with a patch, replays, and makes sessions whose keys may (`"debug": true`); `"spend"`
    /// starts tune jobs on real models (`"models"`, `"budget_usd"`). None by default.
    #[serde(default)]
    rights: Vec<String>,
    /// Seconds until it stops opening anything (at most ten years); never when not given.
    #[serde(default)]
    expires_in: Option<u64>,
    /// The most its jobs on real models may spend in all, by `[prices]` (a key with `spend`);
    /// no cap when not given.
    #[serde(default)]
    spend_limit_usd: Option<f64>,
}

/// An issued key; `key`, its secret, only when it is issued (it is kept only as a hash).
#[derive(Serialize, ToSchema)]
pub(crate) struct IssuedBody {
    /// Its id (how it is revoked).
    id: String,
    /// The secret, shown once: clients send it as `Authorization: Bearer <key>`.
    #[serde(skip_serializing_if = "Option::is_none")]
    key: Option<String>,
    /// What the operator called it.
    label: String,
    /// The packs it may play; `null` for every pack.
    packs: Option<Vec<String>>,
    /// What it may do beyond playing (`debug`).
    rights: Vec<String>,
    /// When it stops opening anything (RFC 3339); `null` for never.
    expires_at: Option<String>,
    /// When it was issued (RFC 3339).
    created_at: String,
    /// The most its jobs on real models may spend in all; `null` for no cap.
    spend_limit_usd: Option<f64>,
    /// What its jobs on real models have spent, and hold while they run.
    spent_usd: f64,
    /// The sessions that go back to it (its own, their forks): kept now, and made in the last
    /// hour (`GET /v1/keys` only), against `[server] sessions_per_key` and its hourly limit.
    #[serde(skip_serializing_if = "Option::is_none")]
    sessions: Option<KeySessions>,
}

/// A key's sessions, as `GET /v1/keys` counts them.
#[derive(Serialize, ToSchema)]
pub(crate) struct KeySessions {
    /// Kept now.
    kept: u64,
    /// Made in the last hour (forks included).
    last_hour: u64,
    /// The bytes their checkpoints take in the store, as it keeps them.
    bytes: u64,
}

/// The keys the operator issued: `GET /v1/keys`.
#[derive(Serialize, ToSchema)]
pub(crate) struct KeyList {
    /// Oldest first, without their secrets.
    keys: Vec<IssuedBody>,
}

/// Who a key is: `GET /v1/access`.
#[derive(Serialize, ToSchema)]
pub(crate) struct AccessBody {
    /// `open` (the server asks for no key), `operator`, `issued`, `session` or `player`.
    #[serde(rename = "as")]
    acts_as: &'static str,
    /// The session a session or player key reaches.
    #[serde(skip_serializing_if = "Option::is_none")]
    session: Option<String>,
    /// The player a player key answers for.
    #[serde(skip_serializing_if = "Option::is_none")]
    player: Option<String>,
    /// The issued key, without its secret.
    #[serde(skip_serializing_if = "Option::is_none")]
    key: Option<IssuedBody>,
    /// What it may do beyond playing: `debug` (editing state, breakpoints, resuming a held
    /// turn, forking with a patch, replaying), `spend` (jobs on real models), or nothing.
    rights: Vec<&'static str>,
}

fn body(k: crate::tables::IssuedKey, secret: Option<String>) -> IssuedBody {
    IssuedBody {
        id: k.id,
        key: secret,
        label: k.label,
        packs: k.packs,
        rights: k.rights,
        expires_at: k.expires_at.map(ruleweave::store::rfc3339_of),
        created_at: ruleweave::store::rfc3339_of(k.created_at),
        spend_limit_usd: k.spend_limit_usd,
        spent_usd: k.spent_usd,
        sessions: None,
    }
}

/// Who may call `issue`, and the errors it answers of its own.
pub(super) const ISSUE: Facts = Facts::keys(&[O]).answers(&[Code::Engine(ErrorKind::Input)]);

/// `POST /v1/keys`: issues a key.
#[utoipa::path(post, path = "/v1/keys", operation_id = "issueKey", tag = "keys", request_body = NewKey, responses(
    (status = 201, description = "The key, with its secret (shown once)", body = IssuedBody),
))]
pub(crate) async fn issue(
    State(s): State<Shared>,
    Body(req): Body<NewKey>,
) -> ApiResult<(StatusCode, Json<IssuedBody>)> {
    let label = req.label.trim().to_owned();
    if label.is_empty() || label.chars().count() > 200 {
        return Err(ApiError::new(Code::InvalidRequest, "a key's label is 1 to 200 characters"));
    }
    if let Some(unknown) = req.packs.iter().flatten().find(|p| !s.engine.packs().contains(p)) {
        return Err(ApiError::new(Code::InvalidRequest, format!("there is no pack `{unknown}` to give a key")));
    }
    if let Some(unknown) = req.rights.iter().find(|r| ![access::DEBUG, access::SPEND].contains(&r.as_str())) {
        return Err(ApiError::new(
            Code::InvalidRequest,
            format!("there is no right `{unknown}` (a key may have: {}, {})", access::DEBUG, access::SPEND),
        ));
    }
    if let Some(cap) = req.spend_limit_usd.filter(|c| !(c.is_finite() && *c >= 0.0)) {
        return Err(ApiError::new(
            Code::InvalidRequest,
            format!("`spend_limit_usd` is an amount of at least 0, not {cap}"),
        ));
    }
    const MOST_SECONDS: u64 = 10 * 366 * 24 * 3600;
    if let Some(n) = req.expires_in.filter(|n| !(1..=MOST_SECONDS).contains(n)) {
        return Err(ApiError::new(
            Code::InvalidRequest,
            format!("`expires_in` is 1 to {MOST_SECONDS} seconds, not {n}"),
        ));
    }
    let secret = access::secret("key")?;
    let id = access::secret("id")?["rw_id_".len()..][..16].to_owned();
    let now = super::sse::unix_ms();
    let mut rights = req.rights;
    rights.dedup();
    let key = crate::tables::IssuedKey {
        id,
        label,
        packs: req.packs,
        rights,
        expires_at: req.expires_in.map(|n| now + n as i64 * 1000),
        created_at: now,
        spend_limit_usd: req.spend_limit_usd,
        spent_usd: 0.0,
    };
    let grant = crate::tables::Grant::Issued(key.clone());
    s.keys().await?.add_key(&crate::tables::key_hash(&secret), &grant).await?;
    Ok((StatusCode::CREATED, Json(body(key, Some(secret)))))
}

/// Who may call `list`, and the errors it answers of its own.
pub(super) const LIST: Facts = Facts::keys(&[O]);

/// `GET /v1/keys`: the keys issued, without their secrets.
#[utoipa::path(get, path = "/v1/keys", operation_id = "listKeys", tag = "keys", responses(
    (status = 200, description = "The keys, oldest first", body = KeyList),
))]
pub(crate) async fn list(State(s): State<Shared>) -> ApiResult<Json<KeyList>> {
    let store = s.keys().await?;
    let index = ruleweave::store::needs(&**s.engine.store(), s.engine.store().index(), "a session index")?;
    let hour_ago = super::sse::unix_ms() - 3_600_000;
    let mut listed = Vec::new();
    for k in store.issued_keys().await? {
        let (last_hour, kept) = store.sessions_of(&k.id, hour_ago).await?;
        let bytes = index.bytes(&store.issued_sessions(&k.id).await?).await?;
        listed.push(IssuedBody { sessions: Some(KeySessions { kept, last_hour, bytes }), ..body(k, None) });
    }
    Ok(Json(KeyList { keys: listed }))
}

/// Who may call `revoke`, and the errors it answers of its own.
pub(super) const REVOKE: Facts = Facts::keys(&[O]).answers(&[Code::Engine(ErrorKind::NotFound)]);

/// `DELETE /v1/keys/{id}`: revokes a key; it opens nothing from then on, on every replica.
#[utoipa::path(delete, path = "/v1/keys/{id}", operation_id = "revokeKey", tag = "keys", params(("id" = String, Path, description = "The key's id")), responses(
    (status = 204, description = "Revoked"),
))]
pub(crate) async fn revoke(State(s): State<Shared>, Path(id): Path<String>) -> ApiResult<StatusCode> {
    if s.keys().await?.revoke_key(&id).await? {
        // Its jobs stop too (their streams end with `cancelled`), whichever replica runs them.
        if let Ok(jobs) = s.jobs().await {
            for job in jobs.stop_jobs_of(&format!("key:{id}")).await? {
                s.job.stop(&job);
            }
        }
        Ok(StatusCode::NO_CONTENT)
    } else {
        Err(ruleweave::Error::new(ruleweave::ErrorKind::NotFound, format!("there is no key {id}")).into())
    }
}

/// Who may call `whoami`, and the errors it answers of its own.
pub(super) const WHOAMI: Facts = Facts::keys(&[O, I, S, P]).note("who the key is");

/// `GET /v1/access`: who the request's key is (a console finds a session key's session so).
#[utoipa::path(get, path = "/v1/access", operation_id = "getAccess", tag = "keys", responses(
    (status = 200, description = "Who the key is", body = AccessBody),
))]
pub(crate) async fn whoami(Extension(access): Extension<Access>) -> Json<AccessBody> {
    let rights = access.rights();
    let plain = |acts_as| AccessBody { acts_as, session: None, player: None, key: None, rights: rights.clone() };
    Json(match access {
        Access::Open => plain("open"),
        Access::Operator => plain("operator"),
        Access::Issued(k) => AccessBody { key: Some(body(k, None)), ..plain("issued") },
        Access::Session { session, .. } => AccessBody { session: Some(session), ..plain("session") },
        Access::Player { session, player } => {
            AccessBody { session: Some(session), player: Some(player), ..plain("player") }
        }
    })
}
