//! What the SQL stores share: checkpoints and sessions to and from rows.

use std::sync::Arc;

use serde_json::Value as Json;
use sqlx::{ColumnIndex, Decode, Row, Type};

use super::{Checkpoint, CheckpointInfo, CheckpointKind, SessionInfo, store_error};
use crate::error::Result;
use crate::event::Updates;
use crate::llm::Exchange;
use crate::value;

/// A checkpoint's columns, as text for the database.
pub(super) struct Encoded {
    pub input: Option<String>,
    pub updates: String,
    pub snapshot: Option<String>,
    pub exchanges: String,
    pub resume: Option<String>,
}

pub(super) fn encode(c: &Checkpoint) -> Encoded {
    let updates: Vec<Json> =
        c.updates.iter().map(|(node, u)| Json::Array(vec![Json::from(node.as_str()), u.to_json()])).collect();
    Encoded {
        input: c.input.as_ref().map(Json::to_string),
        updates: Json::Array(updates).to_string(),
        snapshot: c.snapshot.as_ref().map(Json::to_string),
        exchanges: serde_json::to_string(&*c.exchanges).unwrap_or_else(|_| "[]".into()),
        resume: c.resume.as_ref().and_then(|r| serde_json::to_string(r).ok()),
    }
}

fn json(what: &str, text: &str) -> Result<Json> {
    serde_json::from_str(text).map_err(|e| store_error(&format!("a stored {what} is not JSON"), e))
}

fn updates(text: &str) -> Result<Vec<(String, Updates)>> {
    let Json::Array(items) = json("update list", text)? else {
        return Err(store_error("stored updates", "not a list"));
    };
    items
        .into_iter()
        .map(|item| match item {
            Json::Array(mut pair) if pair.len() == 2 => {
                let map = pair.pop().and_then(|m| m.as_object().map(value::map_of_json)).unwrap_or_default();
                let node = pair.pop().and_then(|n| n.as_str().map(str::to_owned)).unwrap_or_default();
                Ok((node, Updates(Arc::new(map))))
            }
            _ => Err(store_error("stored updates", "an entry is not [node, updates]")),
        })
        .collect()
}

/// A checkpoint from a row with every checkpoint column.
pub(super) fn checkpoint<R>(r: &R) -> Result<Checkpoint>
where
    R: Row,
    for<'r> &'r str: ColumnIndex<R>,
    for<'r> String: Decode<'r, R::Database> + Type<R::Database>,
    for<'r> Option<String>: Decode<'r, R::Database> + Type<R::Database>,
    for<'r> i64: Decode<'r, R::Database> + Type<R::Database>,
    for<'r> Option<i64>: Decode<'r, R::Database> + Type<R::Database>,
    for<'r> bool: Decode<'r, R::Database> + Type<R::Database>,
{
    let get = |col: &str| -> Result<String> { r.try_get::<String, _>(col).map_err(|e| store_error(col, e)) };
    let opt =
        |col: &str| -> Result<Option<String>> { r.try_get::<Option<String>, _>(col).map_err(|e| store_error(col, e)) };
    let int = |col: &str| -> Result<i64> { r.try_get::<i64, _>(col).map_err(|e| store_error(col, e)) };
    let exchanges: Vec<Exchange> =
        serde_json::from_str(&get("exchanges")?).map_err(|e| store_error("stored model exchanges", e))?;
    Ok(Checkpoint {
        seq: int("seq")? as u64,
        turn: int("turn")? as u64,
        kind: CheckpointKind::parse(&get("kind")?)?,
        step: r.try_get::<Option<i64>, _>("step").map_err(|e| store_error("step", e))?.map(|s| s as u32),
        pack_version: get("pack_version")?,
        input: opt("input")?.map(|t| json("input", &t)).transpose()?,
        updates: updates(&get("updates")?)?,
        snapshot: opt("snapshot")?.map(|t| json("snapshot", &t)).transpose()?,
        exchanges: Arc::new(exchanges),
        resume: opt("resume")?
            .map(|t| serde_json::from_str(&t).map_err(|e| store_error("a stored resume point", e)))
            .transpose()?,
        finished: r.try_get::<bool, _>("finished").map_err(|e| store_error("finished", e))?,
        created_at: int("created_at")?,
        bumps: Vec::new(),
    })
}

/// A checkpoint's summary from a row with `seq, turn, kind, step, pack_version, updates,
/// exchanges, has_snapshot, created_at`.
pub(super) fn checkpoint_info<R>(r: &R) -> Result<CheckpointInfo>
where
    R: Row,
    for<'r> &'r str: ColumnIndex<R>,
    for<'r> String: Decode<'r, R::Database> + Type<R::Database>,
    for<'r> i64: Decode<'r, R::Database> + Type<R::Database>,
    for<'r> Option<i64>: Decode<'r, R::Database> + Type<R::Database>,
    for<'r> bool: Decode<'r, R::Database> + Type<R::Database>,
{
    let get = |col: &str| -> Result<String> { r.try_get::<String, _>(col).map_err(|e| store_error(col, e)) };
    let int = |col: &str| -> Result<i64> { r.try_get::<i64, _>(col).map_err(|e| store_error(col, e)) };
    let exchanges = json("model exchanges", &get("exchanges")?)?;
    Ok(CheckpointInfo {
        seq: int("seq")? as u64,
        turn: int("turn")? as u64,
        kind: CheckpointKind::parse(&get("kind")?)?,
        step: r.try_get::<Option<i64>, _>("step").map_err(|e| store_error("step", e))?.map(|s| s as u32),
        pack_version: get("pack_version")?,
        nodes: updates(&get("updates")?)?.into_iter().map(|(n, _)| n).collect(),
        llm_calls: exchanges.as_array().map_or(0, Vec::len),
        snapshot: r.try_get::<bool, _>("has_snapshot").map_err(|e| store_error("has_snapshot", e))?,
        created_at: int("created_at")?,
    })
}

/// A session from a row of the sessions table.
pub(super) fn session<R>(r: &R) -> Result<SessionInfo>
where
    R: Row,
    for<'r> &'r str: ColumnIndex<R>,
    for<'r> String: Decode<'r, R::Database> + Type<R::Database>,
    for<'r> Option<String>: Decode<'r, R::Database> + Type<R::Database>,
    for<'r> i64: Decode<'r, R::Database> + Type<R::Database>,
    for<'r> Option<i64>: Decode<'r, R::Database> + Type<R::Database>,
    for<'r> bool: Decode<'r, R::Database> + Type<R::Database>,
{
    let get = |col: &str| -> Result<String> { r.try_get::<String, _>(col).map_err(|e| store_error(col, e)) };
    let int = |col: &str| -> Result<i64> { r.try_get::<i64, _>(col).map_err(|e| store_error(col, e)) };
    let parent = r.try_get::<Option<String>, _>("parent").map_err(|e| store_error("parent", e))?;
    let parent_cp =
        r.try_get::<Option<i64>, _>("parent_checkpoint").map_err(|e| store_error("parent_checkpoint", e))?;
    Ok(SessionInfo {
        id: get("id")?,
        pack: get("pack")?,
        pack_version: get("pack_version")?,
        options: json("options", &get("options")?)?,
        seed: int("seed")? as u64,
        turns: int("turns")? as u64,
        head: int("head")? as u64,
        head_kind: CheckpointKind::parse(&get("head_kind")?)?,
        snapshot_seq: int("snapshot_seq")? as u64,
        finished: r.try_get::<bool, _>("finished").map_err(|e| store_error("finished", e))?,
        finished_at: r.try_get::<Option<i64>, _>("finished_at").map_err(|e| store_error("finished_at", e))?,
        created_at: int("created_at")?,
        updated_at: int("updated_at")?,
        parent: parent.zip(parent_cp.map(|c| c as u64)),
    })
}

/// Adds a checkpoint's counter bumps to its session's pack's counters, in the transaction `tx`
/// that records the checkpoint.
pub(super) const BUMP: &str = "INSERT INTO counters (pack, tab, counter, key, n) \
     SELECT pack, $2, $3, $4, $5 FROM sessions WHERE id = $1 \
     ON CONFLICT (pack, tab, counter, key) DO UPDATE SET n = counters.n + excluded.n";

/// The statement deleting the finished sessions an expiry names, and the pack names to bind
/// after the time (`$1`).
pub(super) fn expiry(which: super::Expiry<'_>) -> (String, Vec<&str>) {
    let base = "DELETE FROM sessions WHERE finished AND finished_at < $1".to_owned();
    match which {
        super::Expiry::Pack(p) => (base + " AND pack = $2", vec![p]),
        super::Expiry::AllBut([]) => (base, Vec::new()),
        super::Expiry::AllBut(but) => {
            let marks: Vec<String> = (2..but.len() + 2).map(|i| format!("${i}")).collect();
            (format!("{base} AND pack NOT IN ({})", marks.join(", ")), but.iter().map(String::as_str).collect())
        }
    }
}

/// A lobby input from its row: `round, player, kind, input, created_at`.
pub(super) fn lobby_input(row: (i64, String, String, String, i64)) -> Result<super::LobbyInput> {
    let (round, player, kind, input, created_at) = row;
    Ok(super::LobbyInput {
        round: round as u64,
        player,
        kind: super::InputKind::parse(&kind)?,
        input: json("lobby input", &input)?,
        created_at,
    })
}

/// Records a lobby input unless that player sent that kind to that round already.
pub(super) const ADD_INPUT: &str = "INSERT INTO lobby_inputs (session_id, round, player, kind, input, created_at) \
     VALUES ($1, $2, $3, $4, $5, $6) ON CONFLICT DO NOTHING";

/// The methods the SQL stores share, written once: the same SQL (`$N` placeholders, which
/// PostgreSQL takes and sqlx numbers the same way for SQLite), decoded by the row functions
/// above. A macro rather than generic code: generic sqlx over two databases needs a dozen
/// higher-ranked bounds per function (and `rows_affected` is no trait method). Each store has
/// a `pool` and a `begin_read` (a transaction that reads one consistent state), and writes its
/// own `kind`, `exclusive`, `append`, `lock` and `health`.
macro_rules! shared_reads {
    () => {
        /// The session's snapshot at `from_snapshot` (its newest when `None`) and the
        /// checkpoints after it up to `upto`, read in one consistent transaction.
        async fn stored(&self, id: &str, from_snapshot: Option<u64>, upto: i64) -> Result<Option<Stored>> {
            let mut tx = self.begin_read().await?;
            let row = sqlx::query("SELECT * FROM sessions WHERE id = $1")
                .bind(id)
                .fetch_optional(&mut *tx)
                .await
                .map_err(|e| store_error("cannot read a session", e))?;
            let Some(info) = row.as_ref().map(shared::session).transpose()? else { return Ok(None) };
            let at = from_snapshot.unwrap_or(info.snapshot_seq) as i64;
            let found: Option<(Option<String>, i64, String)> = sqlx::query_as(
                "SELECT snapshot, turn, pack_version FROM checkpoints WHERE session_id = $1 AND seq = $2",
            )
            .bind(id)
            .bind(at)
            .fetch_optional(&mut *tx)
            .await
            .map_err(|e| store_error("cannot read a snapshot", e))?;
            let (snapshot, snapshot_turn, snapshot_version) = match found {
                Some((Some(s), turn, version)) => (s, turn as u64, version),
                _ => return Err(store_error("a session", format!("{id} has no snapshot at checkpoint {at}"))),
            };
            let rows =
                sqlx::query("SELECT * FROM checkpoints WHERE session_id = $1 AND seq > $2 AND seq <= $3 ORDER BY seq")
                    .bind(id)
                    .bind(at)
                    .bind(upto)
                    .fetch_all(&mut *tx)
                    .await
                    .map_err(|e| store_error("cannot read checkpoints", e))?;
            let after = rows.iter().map(shared::checkpoint).collect::<Result<Vec<_>>>()?;
            let snapshot =
                serde_json::from_str(&snapshot).map_err(|e| store_error("a stored snapshot is not JSON", e))?;
            tx.commit().await.map_err(|e| store_error("cannot end the read", e))?;
            Ok(Some(Stored { info, snapshot_seq: at as u64, snapshot_turn, snapshot, snapshot_version, after }))
        }

        async fn info_of(&self, id: &str) -> Result<Option<SessionInfo>> {
            let row = sqlx::query("SELECT * FROM sessions WHERE id = $1")
                .bind(id)
                .fetch_optional(&self.pool)
                .await
                .map_err(|e| store_error("cannot read a session", e))?;
            row.as_ref().map(shared::session).transpose()
        }
    };
}

/// The `Store` methods the SQL stores share (see [`shared_reads`]).
macro_rules! shared_store {
    () => {
        fn info<'a>(&'a self, id: &'a str) -> BoxFuture<'a, Result<Option<SessionInfo>>> {
            Box::pin(self.info_of(id))
        }

        fn load<'a>(&'a self, id: &'a str) -> BoxFuture<'a, Result<Option<Stored>>> {
            Box::pin(self.stored(id, None, i64::MAX))
        }

        fn history<'a>(&'a self, id: &'a str, seq: u64) -> BoxFuture<'a, Result<Option<Stored>>> {
            Box::pin(self.stored(id, Some(0), seq as i64))
        }

        fn truncate<'a>(&'a self, id: &'a str, keep: u64) -> BoxFuture<'a, Result<()>> {
            Box::pin(async move {
                let mut tx = self.pool.begin().await.map_err(|e| store_error("cannot begin", e))?;
                sqlx::query("DELETE FROM checkpoints WHERE session_id = $1 AND seq > $2")
                    .bind(id)
                    .bind(keep as i64)
                    .execute(&mut *tx)
                    .await
                    .map_err(|e| store_error("cannot withdraw checkpoints", e))?;
                sqlx::query(
                    "UPDATE sessions SET head = $2, \
                     head_kind = (SELECT kind FROM checkpoints WHERE session_id = $1 AND seq = $2) WHERE id = $1",
                )
                .bind(id)
                .bind(keep as i64)
                .execute(&mut *tx)
                .await
                .map_err(|e| store_error("cannot withdraw checkpoints", e))?;
                tx.commit().await.map_err(|e| store_error("cannot commit", e))
            })
        }

        fn checkpoints<'a>(&'a self, id: &'a str) -> BoxFuture<'a, Result<Vec<CheckpointInfo>>> {
            Box::pin(async move {
                let rows = sqlx::query(
                    "SELECT seq, turn, kind, step, pack_version, updates, exchanges, snapshot IS NOT NULL AS has_snapshot, created_at \
                     FROM checkpoints WHERE session_id = $1 ORDER BY seq",
                )
                .bind(id)
                .fetch_all(&self.pool)
                .await
                .map_err(|e| store_error("cannot list checkpoints", e))?;
                rows.iter().map(shared::checkpoint_info).collect()
            })
        }

        fn expire<'a>(&'a self, finished_before: i64, which: Expiry<'a>) -> BoxFuture<'a, Result<u64>> {
            Box::pin(async move {
                let (sql, packs) = shared::expiry(which);
                // Built from a fixed text and a count of placeholders: no data is spliced in.
                let mut q = sqlx::query(sqlx::AssertSqlSafe(sql)).bind(finished_before);
                for p in packs {
                    q = q.bind(p);
                }
                let r = q.execute(&self.pool).await.map_err(|e| store_error("cannot expire sessions", e))?;
                Ok(r.rows_affected())
            })
        }

        fn expire_idle(&self, idle_before: i64) -> BoxFuture<'_, Result<u64>> {
            Box::pin(async move {
                let r = sqlx::query("DELETE FROM sessions WHERE NOT finished AND updated_at < $1")
                    .bind(idle_before)
                    .execute(&self.pool)
                    .await
                    .map_err(|e| store_error("cannot expire idle sessions", e))?;
                Ok(r.rows_affected())
            })
        }

        fn inputs<'a>(&'a self, id: &'a str) -> BoxFuture<'a, Result<Vec<LobbyInput>>> {
            Box::pin(async move {
                let rows: Vec<(i64, String, String, String, i64)> = sqlx::query_as(
                    "SELECT round, player, kind, input, created_at FROM lobby_inputs \
                     WHERE session_id = $1 ORDER BY created_at, player",
                )
                .bind(id)
                .fetch_all(&self.pool)
                .await
                .map_err(|e| store_error("cannot read lobby inputs", e))?;
                rows.into_iter().map(shared::lobby_input).collect()
            })
        }

        fn open_rounds<'a>(&'a self, due: &'a [(String, i64)]) -> BoxFuture<'a, Result<Vec<OpenRound>>> {
            Box::pin(async move {
                let mut out = Vec::new();
                for (pack, before) in due {
                    let rows: Vec<(String, i64)> = sqlx::query_as(
                        "SELECT id, updated_at FROM sessions \
                         WHERE pack = $1 AND NOT finished AND turns > 0 AND updated_at <= $2",
                    )
                    .bind(pack)
                    .bind(before)
                    .fetch_all(&self.pool)
                    .await
                    .map_err(|e| store_error("cannot list open lobby rounds", e))?;
                    out.extend(rows.into_iter().map(|(session, asked_at)| OpenRound {
                        session,
                        pack: pack.clone(),
                        asked_at,
                    }));
                }
                Ok(out)
            })
        }

        fn counters<'a>(
            &'a self,
            pack: &'a str,
            table: &'a str,
        ) -> BoxFuture<'a, Result<Vec<(String, String, i64)>>> {
            Box::pin(async move {
                sqlx::query_as("SELECT key, counter, n FROM counters WHERE pack = $1 AND tab = $2")
                    .bind(pack)
                    .bind(table)
                    .fetch_all(&self.pool)
                    .await
                    .map_err(|e| store_error("cannot read counters", e))
            })
        }

        fn list<'a>(&'a self, q: SessionQuery<'a>) -> BoxFuture<'a, Result<Vec<SessionInfo>>> {
            Box::pin(async move {
                let rows = sqlx::query(
                    "SELECT * FROM sessions WHERE ($1 IS NULL OR pack = $1) \
                     AND ($2 IS NULL OR created_at < $2 OR (created_at = $2 AND id < $3)) \
                     ORDER BY created_at DESC, id DESC LIMIT $4",
                )
                .bind(q.pack)
                .bind(q.before.map(|b| b.0))
                .bind(q.before.map_or("", |b| b.1))
                .bind(i64::from(q.limit))
                .fetch_all(&self.pool)
                .await
                .map_err(|e| store_error("cannot list sessions", e))?;
                rows.iter().map(shared::session).collect()
            })
        }

        fn link_transcript<'a>(&'a self, key: &'a str, id: &'a str, seq: u64) -> BoxFuture<'a, Result<()>> {
            Box::pin(async move {
                sqlx::query(
                    "INSERT INTO transcript_links (key, session_id, seq, created_at) VALUES ($1, $2, $3, $4) \
                     ON CONFLICT (key) DO UPDATE SET shared = TRUE \
                     WHERE transcript_links.session_id <> excluded.session_id OR transcript_links.seq <> excluded.seq",
                )
                .bind(key)
                .bind(id)
                .bind(seq as i64)
                .bind(crate::vocab::now_ms())
                .execute(&self.pool)
                .await
                .map_err(|e| store_error("cannot link a transcript", e))?;
                Ok(())
            })
        }

        fn find_transcripts<'a>(&'a self, keys: &'a [String]) -> BoxFuture<'a, Result<Vec<TranscriptLink>>> {
            Box::pin(async move {
                let mut found = Vec::new();
                // A bounded number of placeholders per statement, whatever the conversation's length.
                for chunk in keys.chunks(100) {
                    let marks: Vec<String> = (1..=chunk.len()).map(|i| format!("${i}")).collect();
                    let sql = format!(
                        "SELECT key, session_id, seq, shared FROM transcript_links WHERE key IN ({})",
                        marks.join(", ")
                    );
                    // Built from a fixed text and a count of placeholders: no data is spliced in.
                    let mut q = sqlx::query_as::<_, (String, String, i64, bool)>(sqlx::AssertSqlSafe(sql));
                    for k in chunk {
                        q = q.bind(k);
                    }
                    let rows = q.fetch_all(&self.pool).await.map_err(|e| store_error("cannot find transcripts", e))?;
                    found.extend(
                        rows.into_iter()
                            .map(|(key, session, seq, shared)| TranscriptLink { key, session, seq: seq as u64, shared }),
                    );
                }
                Ok(found)
            })
        }

        fn save_schema<'a>(&'a self, pack: &'a str, version: &'a str, schema: &'a serde_json::Value) -> BoxFuture<'a, Result<()>> {
            Box::pin(async move {
                sqlx::query(
                    "INSERT INTO pack_schemas (pack, version, schema, created_at) VALUES ($1, $2, $3, $4) \
                     ON CONFLICT (pack, version) DO NOTHING",
                )
                .bind(pack)
                .bind(version)
                .bind(schema.to_string())
                .bind(crate::vocab::now_ms())
                .execute(&self.pool)
                .await
                .map_err(|e| store_error("cannot record a pack schema", e))?;
                Ok(())
            })
        }

        fn schema<'a>(&'a self, pack: &'a str, version: &'a str) -> BoxFuture<'a, Result<Option<serde_json::Value>>> {
            Box::pin(async move {
                let found: Option<String> =
                    sqlx::query_scalar("SELECT schema FROM pack_schemas WHERE pack = $1 AND version = $2")
                        .bind(pack)
                        .bind(version)
                        .fetch_optional(&self.pool)
                        .await
                        .map_err(|e| store_error("cannot read a pack schema", e))?;
                found
                    .map(|s| serde_json::from_str(&s).map_err(|e| store_error("a recorded pack schema is not JSON", e)))
                    .transpose()
            })
        }

        fn pending(&self) -> BoxFuture<'_, Result<Vec<String>>> {
            Box::pin(async move {
                sqlx::query_scalar("SELECT id FROM sessions WHERE head_kind = 'step'")
                    .fetch_all(&self.pool)
                    .await
                    .map_err(|e| store_error("cannot list interrupted turns", e))
            })
        }
    };
}

pub(super) use {shared_reads, shared_store};
