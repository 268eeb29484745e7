//! What the SQL stores share: checkpoints and sessions to and from rows, and the reads and
//! writes that are the same SQL on SQLite and PostgreSQL.
//!
//! Both stores read through an sqlx pool; [`Sql`] names which, and [`on_pool!`] runs one
//! statement's code on either (the same `$N` placeholders, which PostgreSQL takes and sqlx
//! numbers the same way for SQLite). A match rather than generic code: generic sqlx over two
//! databases needs a dozen higher-ranked bounds per function, and `rows_affected` is no trait
//! method.

use std::sync::Arc;

use serde_json::Value as Json;
use sqlx::{ColumnIndex, Decode, Row, Type};

use super::{Checkpoint, CheckpointInfo, CheckpointKind, SessionInfo, Stored, store_error};
use crate::error::Result;
use crate::event::Updates;
use crate::exchange::Exchange;
use crate::value;

/// A checkpoint's columns, as the database takes them.
pub(super) struct Encoded {
    pub input: Option<String>,
    /// The updates and the model exchanges, in one compressed column (see [`body`]).
    pub body: Vec<u8>,
    pub snapshot: Option<String>,
    pub resume: Option<String>,
}

pub(super) fn encode(c: &Checkpoint) -> Encoded {
    let updates: Vec<Json> =
        c.updates.iter().map(|(node, u)| Json::Array(vec![Json::from(node.as_str()), u.to_json()])).collect();
    let exchanges = serde_json::to_vec(&*c.exchanges).unwrap_or_else(|_| b"[]".to_vec());
    let mut json = Vec::with_capacity(exchanges.len() + 1024);
    json.push(b'[');
    // Writing a JSON value into a Vec cannot fail.
    let _ = serde_json::to_writer(&mut json, &Json::Array(updates));
    json.push(b',');
    json.extend_from_slice(&exchanges);
    // Who made it, third, when the caller said: rows without it read as made by nobody named.
    if let Some(by) = &c.by {
        json.push(b',');
        let _ = serde_json::to_writer(&mut json, by);
    }
    json.push(b']');
    Encoded {
        input: c.input.as_ref().map(Json::to_string),
        body: compress(json),
        snapshot: c.snapshot.as_ref().map(Json::to_string),
        resume: c.resume.as_ref().and_then(|r| serde_json::to_string(r).ok()),
    }
}

/// The level of the body's zstd frames: the fastest of zstd's ordinary levels. A pirate turn's
/// body, 4.9 kB as JSON (its recorded prompts repeat the conversation), is 1.8 kB at level 1,
/// and levels up to 6 win only another 60 bytes.
const BODY_LEVEL: i32 = 1;

/// `json` as a zstd frame, with a compression context kept per thread (the store's writer
/// thread, or a pool's): making one costs more than compressing a body. Where compression
/// fails, the JSON itself is kept; [`unpack`] reads both.
pub(super) fn compress(json: Vec<u8>) -> Vec<u8> {
    thread_local! {
        static ZSTD: std::cell::RefCell<Option<zstd::bulk::Compressor<'static>>> = const { std::cell::RefCell::new(None) };
    }
    ZSTD.with_borrow_mut(|z| {
        if z.is_none() {
            *z = zstd::bulk::Compressor::new(BODY_LEVEL).ok();
        }
        z.as_mut().and_then(|z| z.compress(&json).ok())
    })
    .unwrap_or(json)
}

/// JSON as stored: a zstd frame of it, or the JSON itself (a zstd frame starts with its magic
/// number, 28 B5 2F FD; JSON cannot start with '(').
fn unpack(stored: Vec<u8>) -> Result<Vec<u8>> {
    if stored.starts_with(&[0x28, 0xB5, 0x2F, 0xFD]) {
        zstd::stream::decode_all(stored.as_slice()).map_err(|e| store_error("a stored checkpoint", e))
    } else {
        Ok(stored)
    }
}

/// A column of JSON, as text (PostgreSQL's snapshots, rows written before compression) or as
/// compressed bytes (SQLite's snapshots): its value. sqlx reads SQLite's text and blobs alike as
/// bytes; PostgreSQL's text only as text.
fn stored_json<R>(r: &R, col: &str) -> Result<Option<Json>>
where
    R: Row,
    for<'r> &'r str: ColumnIndex<R>,
    for<'r> Option<String>: Decode<'r, R::Database> + Type<R::Database>,
    for<'r> Option<Vec<u8>>: Decode<'r, R::Database> + Type<R::Database>,
{
    let stored = match r.try_get::<Option<Vec<u8>>, _>(col) {
        Ok(bytes) => bytes,
        Err(_) => r.try_get::<Option<String>, _>(col).map_err(|e| store_error(col, e))?.map(String::into_bytes),
    };
    stored
        .map(|s| {
            serde_json::from_slice(&unpack(s)?).map_err(|e| store_error(&format!("a stored {col} is not JSON"), e))
        })
        .transpose()
}

/// A checkpoint's updates and model exchanges, read from its row: the `body` column, a zstd
/// frame of the JSON array `[updates, exchanges]` (or that JSON uncompressed); or, in rows
/// written before there was a body, the `updates` and `exchanges` text columns.
/// A checkpoint's body as stored: `[updates, exchanges]`, or `[updates, exchanges, by]`.
#[derive(serde::Deserialize)]
struct Raw<X>(Json, X, #[serde(default)] Option<String>);

/// A checkpoint's body, read.
pub(super) struct Body<X> {
    pub updates: Vec<(String, Updates)>,
    pub exchanges: X,
    pub by: Option<String>,
}

/// The updates, exchanges and who made a checkpoint, from its `body` (or, for rows written
/// before bodies, its `updates` and `exchanges` columns).
pub(super) fn body<X: serde::de::DeserializeOwned>(
    body: Option<Vec<u8>>,
    updates: Option<String>,
    exchanges: Option<String>,
) -> Result<Body<X>> {
    let Raw(updates, exchanges, by) = match (body, updates, exchanges) {
        (Some(body), _, _) => {
            serde_json::from_slice(&unpack(body)?).map_err(|e| store_error("a stored checkpoint body", e))?
        }
        (None, Some(updates), Some(exchanges)) => Raw(
            json("update list", &updates)?,
            serde_json::from_str(&exchanges).map_err(|e| store_error("stored model exchanges", e))?,
            None,
        ),
        _ => return Err(store_error("a stored checkpoint", "it has neither a body nor updates and exchanges")),
    };
    Ok(Body { updates: updates_of(updates)?, exchanges, by })
}

pub(super) fn json(what: &str, text: &str) -> Result<Json> {
    serde_json::from_str(text).map_err(|e| store_error(&format!("a stored {what} is not JSON"), e))
}

fn updates_of(list: Json) -> Result<Vec<(String, Updates)>> {
    let Json::Array(items) = list else {
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
    for<'r> Option<Vec<u8>>: Decode<'r, R::Database> + Type<R::Database>,
{
    let get = |col: &str| -> Result<String> { r.try_get::<String, _>(col).map_err(|e| store_error(col, e)) };
    let opt =
        |col: &str| -> Result<Option<String>> { r.try_get::<Option<String>, _>(col).map_err(|e| store_error(col, e)) };
    let int = |col: &str| -> Result<i64> { r.try_get::<i64, _>(col).map_err(|e| store_error(col, e)) };
    let stored = r.try_get::<Option<Vec<u8>>, _>("body").map_err(|e| store_error("body", e))?;
    let Body { updates, exchanges, by } = body::<Vec<Exchange>>(stored, opt("updates")?, opt("exchanges")?)?;
    Ok(Checkpoint {
        seq: int("seq")? as u64,
        turn: int("turn")? as u64,
        kind: CheckpointKind::parse(&get("kind")?)?,
        step: r.try_get::<Option<i64>, _>("step").map_err(|e| store_error("step", e))?.map(|s| s as u32),
        pack_version: get("pack_version")?,
        input: opt("input")?.map(|t| json("input", &t)).transpose()?,
        updates,
        snapshot: stored_json(r, "snapshot")?,
        exchanges: Arc::new(exchanges),
        resume: opt("resume")?
            .map(|t| serde_json::from_str(&t).map_err(|e| store_error("a stored resume point", e)))
            .transpose()?,
        finished: r.try_get::<bool, _>("finished").map_err(|e| store_error("finished", e))?,
        created_at: int("created_at")?,
        bumps: Vec::new(),
        by,
    })
}

/// A checkpoint's summary from a row with `seq, turn, kind, step, pack_version, body, updates,
/// exchanges, has_snapshot, created_at`.
pub(super) fn checkpoint_info<R>(r: &R) -> Result<CheckpointInfo>
where
    R: Row,
    for<'r> &'r str: ColumnIndex<R>,
    for<'r> String: Decode<'r, R::Database> + Type<R::Database>,
    for<'r> i64: Decode<'r, R::Database> + Type<R::Database>,
    for<'r> Option<i64>: Decode<'r, R::Database> + Type<R::Database>,
    for<'r> bool: Decode<'r, R::Database> + Type<R::Database>,
    for<'r> Option<String>: Decode<'r, R::Database> + Type<R::Database>,
    for<'r> Option<Vec<u8>>: Decode<'r, R::Database> + Type<R::Database>,
{
    let get = |col: &str| -> Result<String> { r.try_get::<String, _>(col).map_err(|e| store_error(col, e)) };
    let opt =
        |col: &str| -> Result<Option<String>> { r.try_get::<Option<String>, _>(col).map_err(|e| store_error(col, e)) };
    let int = |col: &str| -> Result<i64> { r.try_get::<i64, _>(col).map_err(|e| store_error(col, e)) };
    let stored = r.try_get::<Option<Vec<u8>>, _>("body").map_err(|e| store_error("body", e))?;
    let Body { updates, exchanges, by } =
        body::<Vec<serde::de::IgnoredAny>>(stored, opt("updates")?, opt("exchanges")?)?;
    Ok(CheckpointInfo {
        seq: int("seq")? as u64,
        turn: int("turn")? as u64,
        kind: CheckpointKind::parse(&get("kind")?)?,
        step: r.try_get::<Option<i64>, _>("step").map_err(|e| store_error("step", e))?.map(|s| s as u32),
        pack_version: get("pack_version")?,
        nodes: updates.into_iter().map(|(n, _)| n).collect(),
        llm_calls: exchanges.len(),
        snapshot: r.try_get::<bool, _>("has_snapshot").map_err(|e| store_error("has_snapshot", e))?,
        created_at: int("created_at")?,
        by,
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
        edited_turn: r
            .try_get::<Option<i64>, _>("edited_turn")
            .map_err(|e| store_error("edited_turn", e))?
            .map(|t| t as u64),
        lobby: r.try_get::<Option<i64>, _>("round_at").map_err(|e| store_error("round_at", e))?.is_some(),
        variant: r.try_get::<Option<String>, _>("variant").map_err(|e| store_error("variant", e))?,
        player: r.try_get::<Option<String>, _>("player").map_err(|e| store_error("player", e))?,
    })
}

/// The database of a SQL store, as its sqlx pool (see [`Store::sql`](super::Store::sql)).
#[derive(Clone, Copy, Debug)]
pub enum Sql<'a> {
    /// A [`SqliteStore`](super::SqliteStore)'s.
    #[cfg(feature = "sqlite")]
    Sqlite(&'a sqlx::SqlitePool),
    /// A [`PostgresStore`](super::PostgresStore)'s.
    #[cfg(feature = "postgres")]
    Postgres(&'a sqlx::PgPool),
}

impl Sql<'_> {
    /// Whether it is PostgreSQL's.
    pub fn is_postgres(self) -> bool {
        #[cfg(feature = "postgres")]
        return matches!(self, Sql::Postgres(_));
        #[cfg(not(feature = "postgres"))]
        return false;
    }
}

/// Runs `$body` with `$pool` bound to the pool `$sql` names, whichever database it is.
macro_rules! on_pool {
    ($sql:expr, $pool:ident => $body:expr) => {
        match $sql {
            #[cfg(feature = "sqlite")]
            $crate::store::shared::Sql::Sqlite($pool) => $body,
            #[cfg(feature = "postgres")]
            $crate::store::shared::Sql::Postgres($pool) => $body,
        }
    };
}
pub(super) use on_pool;

/// A capability on both SQL stores, written once: each method forwards to the function named
/// after its `=>`, which takes the store's [`Sql`] and then the method's arguments, and runs the
/// same statements on SQLite and PostgreSQL. `SqliteStore` and `PostgresStore` are the names in
/// scope where it is used (each capability's file imports them).
macro_rules! on_sql_stores {
    ($capability:ident {
        $(fn $method:ident $(<$lt:lifetime>)? (&$($slt:lifetime)? self $(, $arg:ident: $ty:ty)* $(,)?) -> $ret:ty => $target:ident;)*
    }) => {
        #[cfg(feature = "sqlite")]
        impl $capability for SqliteStore {
            $(fn $method $(<$lt>)? (&$($slt)? self $(, $arg: $ty)*) -> $ret {
                Box::pin($target(self.sql() $(, $arg)*))
            })*
        }

        #[cfg(feature = "postgres")]
        impl $capability for PostgresStore {
            $(fn $method $(<$lt>)? (&$($slt)? self $(, $arg: $ty)*) -> $ret {
                Box::pin($target(self.sql() $(, $arg)*))
            })*
        }
    };
}
pub(super) use on_sql_stores;

/// The statements on a session's checkpoints, which the two SQL stores key differently.
/// PostgreSQL keys a checkpoint by `(session_id, seq)`. SQLite keys it by one integer, `key`: its
/// session's `number` times 2³² plus its `seq` (the table's own rowid), so that a session's
/// checkpoints are one range of the table's B-tree, a turn's row is appended at its end, and no
/// second index is written. `$1` is the session's id throughout.
struct Keyed {
    /// The snapshot, turn and pack version of checkpoint `$2`.
    snapshot: &'static str,
    /// Every column of the checkpoints after `$2` up to `$3` (which may be `i64::MAX`: SQLite's
    /// is held to the largest seq, or the key's sum would leave the integers), oldest first.
    after: &'static str,
    /// Deletes the checkpoints after `$2`.
    truncate: &'static str,
    /// Makes `$2` the session's head again.
    head: &'static str,
    /// A summary of every checkpoint, oldest first (see [`checkpoint_info`]).
    list: &'static str,
    /// The bytes kept in the checkpoints of the sessions `$1` (a JSON list of ids) names.
    bytes: &'static str,
}

const POSTGRES: Keyed = Keyed {
    snapshot: "SELECT snapshot, turn, pack_version FROM checkpoints WHERE session_id = $1 AND seq = $2",
    after: "SELECT * FROM checkpoints WHERE session_id = $1 AND seq > $2 AND seq <= $3 ORDER BY seq",
    truncate: "DELETE FROM checkpoints WHERE session_id = $1 AND seq > $2",
    head: "UPDATE sessions SET head = $2, \
           head_kind = (SELECT kind FROM checkpoints WHERE session_id = $1 AND seq = $2) WHERE id = $1",
    list: "SELECT seq, turn, kind, step, pack_version, body, updates, exchanges, \
           snapshot IS NOT NULL AS has_snapshot, created_at \
           FROM checkpoints WHERE session_id = $1 ORDER BY seq",
    bytes: "SELECT COALESCE(SUM(pg_column_size(c.*)), 0)::BIGINT FROM checkpoints c \
            WHERE c.session_id IN (SELECT jsonb_array_elements_text($1::jsonb))",
};

const SQLITE: Keyed = Keyed {
    snapshot: "SELECT snapshot, turn, pack_version FROM checkpoints \
               WHERE key = (SELECT number FROM sessions WHERE id = $1) * 4294967296 + $2",
    after: "SELECT key & 4294967295 AS seq, * FROM checkpoints \
            WHERE key > (SELECT number FROM sessions WHERE id = $1) * 4294967296 + $2 \
            AND key <= (SELECT number FROM sessions WHERE id = $1) * 4294967296 + min($3, 4294967295) ORDER BY key",
    truncate: "DELETE FROM checkpoints \
               WHERE key > (SELECT number FROM sessions WHERE id = $1) * 4294967296 + $2 \
               AND key < ((SELECT number FROM sessions WHERE id = $1) + 1) * 4294967296",
    head: "UPDATE sessions SET head = $2, \
           head_kind = (SELECT kind FROM checkpoints WHERE key = sessions.number * 4294967296 + $2) WHERE id = $1",
    list: "SELECT key & 4294967295 AS seq, turn, kind, step, pack_version, body, updates, exchanges, \
           snapshot IS NOT NULL AS has_snapshot, created_at FROM checkpoints \
           WHERE key >= (SELECT number FROM sessions WHERE id = $1) * 4294967296 \
           AND key < ((SELECT number FROM sessions WHERE id = $1) + 1) * 4294967296 ORDER BY key",
    bytes: "SELECT COALESCE(SUM(IFNULL(LENGTH(CAST(c.body AS BLOB)), 0) + IFNULL(LENGTH(CAST(c.snapshot AS BLOB)), 0) \
               + IFNULL(LENGTH(CAST(c.input AS BLOB)), 0) + IFNULL(LENGTH(CAST(c.resume AS BLOB)), 0) \
               + IFNULL(LENGTH(CAST(c.updates AS BLOB)), 0) + IFNULL(LENGTH(CAST(c.exchanges AS BLOB)), 0)), 0) \
               FROM sessions s \
               JOIN checkpoints c ON c.key >= s.number * 4294967296 AND c.key < (s.number + 1) * 4294967296 \
               WHERE s.id IN (SELECT value FROM json_each($1))",
};

fn keyed(sql: Sql<'_>) -> &'static Keyed {
    if sql.is_postgres() { &POSTGRES } else { &SQLITE }
}

/// The statement summing the bytes of a list of sessions (see [`Keyed::bytes`]).
pub(super) fn keyed_bytes(sql: Sql<'_>) -> &'static str {
    keyed(sql).bytes
}

/// The session `id`'s row.
pub(super) async fn info(sql: Sql<'_>, id: &str) -> Result<Option<SessionInfo>> {
    on_pool!(sql, pool => {
        let row = sqlx::query("SELECT * FROM sessions WHERE id = $1")
            .bind(id)
            .fetch_optional(pool)
            .await
            .map_err(|e| store_error("cannot read a session", e))?;
        row.as_ref().map(session).transpose()
    })
}

/// The session's snapshot at `from_snapshot` (its newest when `None`) and the checkpoints after
/// it up to `upto`, read in one transaction that sees one consistent state (SQLite's WAL gives
/// every transaction one; PostgreSQL's is asked for REPEATABLE READ, so a writer pruning
/// snapshots meanwhile cannot pull one from under it).
pub(super) async fn stored(sql: Sql<'_>, id: &str, from_snapshot: Option<u64>, upto: u64) -> Result<Option<Stored>> {
    let upto = i64::try_from(upto).unwrap_or(i64::MAX);
    on_pool!(sql, pool => {
        let mut tx = pool.begin().await.map_err(|e| store_error("cannot begin", e))?;
        if sql.is_postgres() {
            sqlx::query("SET TRANSACTION ISOLATION LEVEL REPEATABLE READ")
                .execute(&mut *tx)
                .await
                .map_err(|e| store_error("cannot begin a consistent read", e))?;
        }
        let row = sqlx::query("SELECT * FROM sessions WHERE id = $1")
            .bind(id)
            .fetch_optional(&mut *tx)
            .await
            .map_err(|e| store_error("cannot read a session", e))?;
        let Some(info) = row.as_ref().map(session).transpose()? else { return Ok(None) };
        let at = from_snapshot.unwrap_or(info.snapshot_seq) as i64;
        let found = sqlx::query(keyed(sql).snapshot)
            .bind(id)
            .bind(at)
            .fetch_optional(&mut *tx)
            .await
            .map_err(|e| store_error("cannot read a snapshot", e))?;
        let Some((Some(snapshot), snapshot_turn, snapshot_version)) = found
            .map(|r| -> Result<_> {
                let turn = r.try_get::<i64, _>("turn").map_err(|e| store_error("turn", e))?;
                let version = r.try_get::<String, _>("pack_version").map_err(|e| store_error("pack_version", e))?;
                Ok((stored_json(&r, "snapshot")?, turn as u64, version))
            })
            .transpose()?
        else {
            return Err(store_error("a session", format!("{id} has no snapshot at checkpoint {at}")));
        };
        let rows = sqlx::query(keyed(sql).after)
            .bind(id)
            .bind(at)
            .bind(upto)
            .fetch_all(&mut *tx)
            .await
            .map_err(|e| store_error("cannot read checkpoints", e))?;
        let after = rows.iter().map(checkpoint).collect::<Result<Vec<_>>>()?;
        tx.commit().await.map_err(|e| store_error("cannot end the read", e))?;
        Ok(Some(Stored { info, snapshot_seq: at as u64, snapshot_turn, snapshot, snapshot_version, after }))
    })
}

/// Withdraws the session's checkpoints after `keep`, making `keep` its head again.
pub(super) async fn truncate(sql: Sql<'_>, id: &str, keep: u64) -> Result<()> {
    on_pool!(sql, pool => {
        let mut tx = pool.begin().await.map_err(|e| store_error("cannot begin", e))?;
        sqlx::query(keyed(sql).truncate)
            .bind(id)
            .bind(keep as i64)
            .execute(&mut *tx)
            .await
            .map_err(|e| store_error("cannot withdraw checkpoints", e))?;
        sqlx::query(keyed(sql).head)
        .bind(id)
        .bind(keep as i64)
        .execute(&mut *tx)
        .await
        .map_err(|e| store_error("cannot withdraw checkpoints", e))?;
        tx.commit().await.map_err(|e| store_error("cannot commit", e))
    })
}

/// Every checkpoint of the session, summed up, oldest first.
pub(super) async fn checkpoints(sql: Sql<'_>, id: &str) -> Result<Vec<CheckpointInfo>> {
    on_pool!(sql, pool => {
        let rows = sqlx::query(keyed(sql).list)
        .bind(id)
        .fetch_all(pool)
        .await
        .map_err(|e| store_error("cannot list checkpoints", e))?;
        rows.iter().map(checkpoint_info).collect()
    })
}

/// The sessions a crash left in the middle of a long turn.
pub(super) async fn pending(sql: Sql<'_>) -> Result<Vec<String>> {
    on_pool!(sql, pool => sqlx::query_scalar("SELECT id FROM sessions WHERE head_kind = 'step'").fetch_all(pool).await)
        .map_err(|e| store_error("cannot list interrupted turns", e))
}

/// Adds one bump of a checkpoint to its session's pack's counters, in the transaction that
/// records the checkpoint (the counters' table is `counters.rs`'s; both SQL stores write it).
pub(super) const BUMP: &str = "INSERT INTO counters (pack, tab, counter, key, n) \
     SELECT pack, $2, $3, $4, $5 FROM sessions WHERE id = $1 \
     ON CONFLICT (pack, tab, counter, key) DO UPDATE SET n = counters.n + excluded.n";
