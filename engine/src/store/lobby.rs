//! Lobby inputs: the answers, joins and leaves of a round several players play, kept until the
//! turn that closes the round (recording a turn clears them, in the same write).

use serde::{Deserialize, Serialize};
use serde_json::Value as Json;

use super::memory::MemoryStore;
#[cfg(feature = "postgres")]
use super::postgres::{PostgresStore, notify};
#[cfg(any(feature = "sqlite", feature = "postgres"))]
use super::shared::{self as sql, Sql, on_pool};
#[cfg(feature = "sqlite")]
use super::sqlite::SqliteStore;
use super::{Happened, SessionEvent, store_error};
use crate::error::{Error, ErrorKind, Result};
use crate::llm::BoxFuture;

/// A store that keeps lobby inputs (see [`Store::lobby`](super::Store::lobby)).
pub trait LobbyInputs: Send + Sync {
    /// Records a player's input to a lobby round; false when that player already sent that kind of
    /// input to that round. Every subscriber hears of it.
    fn add_input<'a>(&'a self, id: &'a str, input: &'a LobbyInput) -> BoxFuture<'a, Result<bool>>;

    /// The lobby inputs waiting for the session's round to close, oldest first. Recording a turn
    /// clears them.
    fn inputs<'a>(&'a self, id: &'a str) -> BoxFuture<'a, Result<Vec<LobbyInput>>>;

    /// The lobby rounds that may be due: for each `(pack, before)`, the unfinished sessions of
    /// that pack past their first turn whose newest checkpoint (the question under way) was
    /// written at or before `before` (its timeout ago).
    fn open_rounds<'a>(&'a self, due: &'a [(String, i64)]) -> BoxFuture<'a, Result<Vec<OpenRound>>>;
}

/// What a lobby input says: an answer to the round, or joining or leaving the lobby.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(rename_all = "snake_case")]
pub enum InputKind {
    /// The player's answer to the round.
    Answer,
    /// The player joins from the next round on.
    Join,
    /// The player leaves; the round no longer waits for them.
    Leave,
}

impl InputKind {
    pub(crate) fn as_str(self) -> &'static str {
        match self {
            InputKind::Answer => "answer",
            InputKind::Join => "join",
            InputKind::Leave => "leave",
        }
    }

    pub(crate) fn parse(s: &str) -> Result<Self> {
        match s {
            "answer" => Ok(InputKind::Answer),
            "join" => Ok(InputKind::Join),
            "leave" => Ok(InputKind::Leave),
            other => Err(Error::new(ErrorKind::Store, format!("unknown lobby input kind `{other}`"))),
        }
    }
}

/// One player's input to a lobby round, kept until the turn that closes the round.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct LobbyInput {
    /// The round it belongs to.
    pub round: u64,
    /// Who sent it.
    pub player: String,
    /// What it is.
    pub kind: InputKind,
    /// The answer (`null` for joining and leaving).
    pub input: Json,
    /// When it arrived, unix milliseconds.
    pub created_at: i64,
}

/// A session with answers waiting: a lobby round under way.
#[derive(Debug, Clone, PartialEq)]
pub struct OpenRound {
    /// The session.
    pub session: String,
    /// Its pack.
    pub pack: String,
    /// When its question was asked (its newest checkpoint), unix milliseconds.
    pub asked_at: i64,
}

fn heard(input: &LobbyInput, id: &str) -> SessionEvent {
    let what = Happened::Input { round: input.round, player: input.player.clone(), kind: input.kind };
    SessionEvent { session: id.to_owned(), what }
}

impl LobbyInputs for MemoryStore {
    fn add_input<'a>(&'a self, id: &'a str, input: &'a LobbyInput) -> BoxFuture<'a, Result<bool>> {
        let added = self.with(|m| {
            let e = m.get_mut(id).ok_or_else(|| Error::new(ErrorKind::NotFound, format!("no session {id}")))?;
            let twice =
                e.inputs.iter().any(|i| i.round == input.round && i.player == input.player && i.kind == input.kind);
            if !twice {
                e.inputs.push(input.clone());
            }
            Ok(!twice)
        });
        if let Ok(true) = added {
            let _ = self.events.send(heard(input, id));
        }
        Box::pin(std::future::ready(added))
    }

    fn inputs<'a>(&'a self, id: &'a str) -> BoxFuture<'a, Result<Vec<LobbyInput>>> {
        let inputs = self.with(|m| m.get(id).map(|e| e.inputs.clone()).unwrap_or_default());
        Box::pin(std::future::ready(Ok(inputs)))
    }

    fn open_rounds<'a>(&'a self, due: &'a [(String, i64)]) -> BoxFuture<'a, Result<Vec<OpenRound>>> {
        let open = self.with(|m| {
            m.values()
                .filter(|e| !e.info.finished && e.info.turns > 0)
                .filter(|e| {
                    e.info.lobby && due.iter().any(|(pack, before)| *pack == e.info.pack && e.round_at <= *before)
                })
                .map(|e| OpenRound { session: e.info.id.clone(), pack: e.info.pack.clone(), asked_at: e.round_at })
                .collect()
        });
        Box::pin(std::future::ready(Ok(open)))
    }
}

/// Records a lobby input unless that player sent that kind to that round already.
#[cfg(any(feature = "sqlite", feature = "postgres"))]
const ADD_INPUT: &str = "INSERT INTO lobby_inputs (session_id, round, player, kind, input, created_at) \
     VALUES ($1, $2, $3, $4, $5, $6) ON CONFLICT DO NOTHING";

#[cfg(feature = "sqlite")]
impl LobbyInputs for SqliteStore {
    fn add_input<'a>(&'a self, id: &'a str, input: &'a LobbyInput) -> BoxFuture<'a, Result<bool>> {
        Box::pin(async move {
            self.file.check()?;
            let r = sqlx::query(ADD_INPUT)
                .bind(id)
                .bind(input.round as i64)
                .bind(&input.player)
                .bind(input.kind.as_str())
                .bind(input.input.to_string())
                .bind(input.created_at)
                .execute(&self.pool)
                .await
                .map_err(|e| store_error("cannot record the lobby input", e))?;
            let added = r.rows_affected() == 1;
            if added {
                let _ = self.events.send(heard(input, id));
            }
            Ok(added)
        })
    }

    fn inputs<'a>(&'a self, id: &'a str) -> BoxFuture<'a, Result<Vec<LobbyInput>>> {
        Box::pin(inputs(self.sql(), id))
    }

    fn open_rounds<'a>(&'a self, due: &'a [(String, i64)]) -> BoxFuture<'a, Result<Vec<OpenRound>>> {
        Box::pin(open_rounds(self.sql(), due))
    }
}

#[cfg(feature = "postgres")]
impl LobbyInputs for PostgresStore {
    fn add_input<'a>(&'a self, id: &'a str, input: &'a LobbyInput) -> BoxFuture<'a, Result<bool>> {
        Box::pin(async move {
            let mut tx = self.pool.begin().await.map_err(|e| store_error("cannot begin", e))?;
            let r = sqlx::query(ADD_INPUT)
                .bind(id)
                .bind(input.round as i64)
                .bind(&input.player)
                .bind(input.kind.as_str())
                .bind(input.input.to_string())
                .bind(input.created_at)
                .execute(&mut *tx)
                .await
                .map_err(|e| store_error("cannot record the lobby input", e))?;
            if r.rows_affected() == 0 {
                return Ok(false);
            }
            // Every replica hears of it, once the input is in.
            notify(&mut tx, heard(input, id)).await?;
            tx.commit().await.map_err(|e| store_error("cannot commit", e))?;
            Ok(true)
        })
    }

    fn inputs<'a>(&'a self, id: &'a str) -> BoxFuture<'a, Result<Vec<LobbyInput>>> {
        Box::pin(inputs(self.sql(), id))
    }

    fn open_rounds<'a>(&'a self, due: &'a [(String, i64)]) -> BoxFuture<'a, Result<Vec<OpenRound>>> {
        Box::pin(open_rounds(self.sql(), due))
    }
}

#[cfg(any(feature = "sqlite", feature = "postgres"))]
async fn inputs(sql: Sql<'_>, id: &str) -> Result<Vec<LobbyInput>> {
    let rows: Vec<(i64, String, String, String, i64)> = on_pool!(sql, pool => sqlx::query_as(
            "SELECT round, player, kind, input, created_at FROM lobby_inputs \
             WHERE session_id = $1 ORDER BY created_at, player",
        )
        .bind(id)
        .fetch_all(pool)
        .await)
    .map_err(|e| store_error("cannot read lobby inputs", e))?;
    rows.into_iter()
        .map(|(round, player, kind, input, created_at)| {
            Ok(LobbyInput {
                round: round as u64,
                player,
                kind: InputKind::parse(&kind)?,
                input: sql::json("lobby input", &input)?,
                created_at,
            })
        })
        .collect()
}

#[cfg(any(feature = "sqlite", feature = "postgres"))]
async fn open_rounds(sql: Sql<'_>, due: &[(String, i64)]) -> Result<Vec<OpenRound>> {
    let mut out = Vec::new();
    for (pack, before) in due {
        let rows: Vec<(String, i64)> = on_pool!(sql, pool => sqlx::query_as(
                "SELECT id, round_at FROM sessions \
                 WHERE pack = $1 AND NOT finished AND turns > 0 AND round_at IS NOT NULL AND round_at <= $2",
            )
            .bind(pack)
            .bind(before)
            .fetch_all(pool)
            .await)
        .map_err(|e| store_error("cannot list open lobby rounds", e))?;
        out.extend(rows.into_iter().map(|(session, asked_at)| OpenRound { session, pack: pack.clone(), asked_at }));
    }
    Ok(out)
}
