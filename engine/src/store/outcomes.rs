//! Outcome rows: one per live game (a session opened for a player, not a simulated, forked,
//! replayed or debugging one), written as it opens and completed as it finishes, and kept past
//! the session's own expiry. What live reports by variant read: how many games each variant
//! made and finished, how they ended, and where their tracked fields stood; the SQL stores count
//! and rank in the database.

use super::memory::MemoryStore;
#[cfg(feature = "postgres")]
use super::postgres::PostgresStore;
#[cfg(any(feature = "sqlite", feature = "postgres"))]
use super::shared::{Sql, on_pool, on_sql_stores};
#[cfg(feature = "sqlite")]
use super::sqlite::SqliteStore;
#[cfg(any(feature = "sqlite", feature = "postgres"))]
use super::store_error;
use crate::error::Result;
use crate::llm::BoxFuture;

/// A store that keeps outcome rows (see [`Store::outcomes`](super::Store::outcomes)).
pub trait Outcomes: Send + Sync {
    /// Records that `row`'s game opened (its ending not yet known).
    fn opened<'a>(&'a self, row: &'a OutcomeRow) -> BoxFuture<'a, Result<()>>;

    /// Completes the row of session `id` with how it ended; a session without a row (no live
    /// game) is left alone, and so is a row already completed.
    fn ended<'a>(&'a self, id: &'a str, ending: &'a Ending) -> BoxFuture<'a, Result<()>>;

    /// Drops the row of session `id`: its state was set by hand, so its game is no real game.
    fn discard<'a>(&'a self, id: &'a str) -> BoxFuture<'a, Result<()>>;

    /// The rows of the games `query` names, opened first first.
    fn outcome_rows<'a>(&'a self, query: OutcomeQuery<'a>) -> BoxFuture<'a, Result<Vec<OutcomeRow>>>;

    /// How many of the games `query` names ended each way, by variant (the database counts):
    /// `(variant, outcome, games)`, `outcome` none for the games not ended yet.
    fn outcome_counts<'a>(&'a self, query: OutcomeQuery<'a>) -> BoxFuture<'a, Result<Vec<OutcomeCount>>>;

    /// Where the tracked field `field` stood as the games `query` names ended, by variant (the
    /// database ranks the values): of the finished games whose row has a number for it, the
    /// median and the 10th and 90th percentiles by nearest rank (the values at ranks ⌈n/2⌉,
    /// ⌈n/10⌉ and ⌈9n/10⌉ of n). A variant with no such game is left out.
    fn outcome_spreads<'a>(
        &'a self,
        query: OutcomeQuery<'a>,
        field: &'a str,
    ) -> BoxFuture<'a, Result<Vec<FieldSpread>>>;

    /// Erases the rows of the player whose hash is `player`; how many.
    fn erase_player_outcomes<'a>(&'a self, player: &'a str) -> BoxFuture<'a, Result<u64>>;
}

/// One live game.
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct OutcomeRow {
    /// Its session.
    pub session: String,
    /// Its pack.
    pub pack: String,
    /// The pack's version as the game opened (without the variant's params: the experiment's
    /// rules as the manifest has them).
    pub version: String,
    /// The variant of the pack's experiment it played.
    pub variant: Option<String>,
    /// Its player's hash, when it was opened for one.
    pub player: Option<String>,
    /// How it ended: the pack's outcome field (`simulate.outcome`), or `finished`; none while
    /// it goes on.
    pub outcome: Option<String>,
    /// The tracked fields' values as it ended (`simulate.track`).
    pub tracked: serde_json::Map<String, serde_json::Value>,
    /// Its turns, as it ended.
    pub turns: u64,
    /// When it opened, unix milliseconds.
    pub created_at: i64,
    /// When it ended.
    pub finished_at: Option<i64>,
}

/// How a game ended.
#[derive(Debug, Clone, PartialEq)]
pub struct Ending {
    /// Its outcome.
    pub outcome: String,
    /// The tracked fields' values.
    pub tracked: serde_json::Map<String, serde_json::Value>,
    /// Its turns.
    pub turns: u64,
    /// When, unix milliseconds.
    pub at: i64,
}

/// Which games a report reads: a pack's, opened within a time range, at one version.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct OutcomeQuery<'a> {
    /// The pack.
    pub pack: &'a str,
    /// Opened at or after this, unix milliseconds.
    pub since: Option<i64>,
    /// Opened before this.
    pub until: Option<i64>,
    /// Only games opened at this version of the pack.
    pub version: Option<&'a str>,
}

impl OutcomeQuery<'_> {
    fn holds(&self, row: &OutcomeRow) -> bool {
        row.pack == self.pack
            && self.since.is_none_or(|t| row.created_at >= t)
            && self.until.is_none_or(|t| row.created_at < t)
            && self.version.is_none_or(|v| row.version == v)
    }
}

/// How many games of a variant ended one way.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OutcomeCount {
    /// The variant (none for games of a pack without an experiment).
    pub variant: Option<String>,
    /// The outcome; none for games that have not ended.
    pub outcome: Option<String>,
    /// How many.
    pub games: u64,
}

/// Where a tracked field stood as a variant's games ended.
#[derive(Debug, Clone, PartialEq)]
pub struct FieldSpread {
    /// The variant (none for games of a pack without an experiment).
    pub variant: Option<String>,
    /// How many finished games had a number for the field.
    pub games: u64,
    /// The median (nearest rank).
    pub median: f64,
    /// The 10th percentile.
    pub p10: f64,
    /// The 90th percentile.
    pub p90: f64,
}

impl Outcomes for MemoryStore {
    fn opened<'a>(&'a self, row: &'a OutcomeRow) -> BoxFuture<'a, Result<()>> {
        self.with_outcomes(|rows| {
            rows.entry(row.session.clone()).or_insert_with(|| row.clone());
        });
        Box::pin(std::future::ready(Ok(())))
    }

    fn ended<'a>(&'a self, id: &'a str, e: &'a Ending) -> BoxFuture<'a, Result<()>> {
        self.with_outcomes(|rows| {
            if let Some(row) = rows.get_mut(id).filter(|r| r.outcome.is_none()) {
                row.outcome = Some(e.outcome.clone());
                row.tracked = e.tracked.clone();
                row.turns = e.turns;
                row.finished_at = Some(e.at);
            }
        });
        Box::pin(std::future::ready(Ok(())))
    }

    fn discard<'a>(&'a self, id: &'a str) -> BoxFuture<'a, Result<()>> {
        self.with_outcomes(|rows| rows.remove(id));
        Box::pin(std::future::ready(Ok(())))
    }

    fn outcome_rows<'a>(&'a self, query: OutcomeQuery<'a>) -> BoxFuture<'a, Result<Vec<OutcomeRow>>> {
        let mut found: Vec<OutcomeRow> =
            self.with_outcomes(|rows| rows.values().filter(|r| query.holds(r)).cloned().collect());
        found.sort_by(|a, b| (a.created_at, &a.session).cmp(&(b.created_at, &b.session)));
        Box::pin(std::future::ready(Ok(found)))
    }

    fn outcome_counts<'a>(&'a self, query: OutcomeQuery<'a>) -> BoxFuture<'a, Result<Vec<OutcomeCount>>> {
        let mut counts: std::collections::BTreeMap<(Option<String>, Option<String>), u64> = Default::default();
        self.with_outcomes(|rows| {
            for r in rows.values().filter(|r| query.holds(r)) {
                *counts.entry((r.variant.clone(), r.outcome.clone())).or_default() += 1;
            }
        });
        let counts = counts.into_iter().map(|((variant, outcome), games)| OutcomeCount { variant, outcome, games });
        Box::pin(std::future::ready(Ok(counts.collect())))
    }

    fn outcome_spreads<'a>(
        &'a self,
        query: OutcomeQuery<'a>,
        field: &'a str,
    ) -> BoxFuture<'a, Result<Vec<FieldSpread>>> {
        let mut values: std::collections::BTreeMap<Option<String>, Vec<f64>> = Default::default();
        self.with_outcomes(|rows| {
            for r in rows.values().filter(|r| query.holds(r) && r.outcome.is_some()) {
                if let Some(x) = r.tracked.get(field).and_then(serde_json::Value::as_f64) {
                    values.entry(r.variant.clone()).or_default().push(x);
                }
            }
        });
        let spreads = values.into_iter().map(|(variant, mut v)| {
            v.sort_by(f64::total_cmp);
            let n = v.len();
            let at = |rank: usize| v[rank - 1];
            FieldSpread {
                variant,
                games: n as u64,
                median: at(n.div_ceil(2)),
                p10: at(n.div_ceil(10)),
                p90: at((9 * n).div_ceil(10)),
            }
        });
        Box::pin(std::future::ready(Ok(spreads.collect())))
    }

    fn erase_player_outcomes<'a>(&'a self, player: &'a str) -> BoxFuture<'a, Result<u64>> {
        let erased = self.with_outcomes(|rows| {
            let before = rows.len();
            rows.retain(|_, r| r.player.as_deref() != Some(player));
            (before - rows.len()) as u64
        });
        Box::pin(std::future::ready(Ok(erased)))
    }
}

#[cfg(any(feature = "sqlite", feature = "postgres"))]
on_sql_stores!(Outcomes {
    fn opened<'a>(&'a self, row: &'a OutcomeRow) -> BoxFuture<'a, Result<()>> => opened;
    fn ended<'a>(&'a self, id: &'a str, ending: &'a Ending) -> BoxFuture<'a, Result<()>> => ended;
    fn discard<'a>(&'a self, id: &'a str) -> BoxFuture<'a, Result<()>> => discard;
    fn outcome_rows<'a>(&'a self, query: OutcomeQuery<'a>) -> BoxFuture<'a, Result<Vec<OutcomeRow>>> => rows;
    fn outcome_counts<'a>(&'a self, query: OutcomeQuery<'a>) -> BoxFuture<'a, Result<Vec<OutcomeCount>>> => counts;
    fn outcome_spreads<'a>(&'a self, query: OutcomeQuery<'a>, field: &'a str) -> BoxFuture<'a, Result<Vec<FieldSpread>>> => spreads;
    fn erase_player_outcomes<'a>(&'a self, player: &'a str) -> BoxFuture<'a, Result<u64>> => erase;
});

#[cfg(any(feature = "sqlite", feature = "postgres"))]
async fn opened(sql: Sql<'_>, r: &OutcomeRow) -> Result<()> {
    on_pool!(sql, pool => sqlx::query(
            "INSERT INTO outcomes (session, pack, version, variant, player, created_at) VALUES ($1, $2, $3, $4, $5, $6) \
             ON CONFLICT (session) DO NOTHING",
        )
        .bind(&r.session)
        .bind(&r.pack)
        .bind(&r.version)
        .bind(&r.variant)
        .bind(&r.player)
        .bind(r.created_at)
        .execute(pool)
        .await
        .map(|_| ()))
    .map_err(|e| store_error("cannot record a game's opening", e))
}

#[cfg(any(feature = "sqlite", feature = "postgres"))]
async fn ended(sql: Sql<'_>, id: &str, e: &Ending) -> Result<()> {
    on_pool!(sql, pool => sqlx::query(
            "UPDATE outcomes SET outcome = $2, tracked = $3, turns = $4, finished_at = $5 \
             WHERE session = $1 AND outcome IS NULL",
        )
        .bind(id)
        .bind(&e.outcome)
        .bind(serde_json::Value::Object(e.tracked.clone()).to_string())
        .bind(e.turns as i64)
        .bind(e.at)
        .execute(pool)
        .await
        .map(|_| ()))
    .map_err(|e| store_error("cannot record how a game ended", e))
}

#[cfg(any(feature = "sqlite", feature = "postgres"))]
async fn discard(sql: Sql<'_>, id: &str) -> Result<()> {
    on_pool!(sql, pool => sqlx::query("DELETE FROM outcomes WHERE session = $1").bind(id).execute(pool).await.map(|_| ()))
        .map_err(|e| store_error("cannot drop a game's outcome", e))
}

/// The condition of a query, its parameters from `$1`: the pack, then the range and version
/// (a bound left open is null).
#[cfg(any(feature = "sqlite", feature = "postgres"))]
macro_rules! games_of_query {
    () => {
        "pack = $1 AND (CAST($2 AS BIGINT) IS NULL OR created_at >= $2) \
         AND (CAST($3 AS BIGINT) IS NULL OR created_at < $3) AND (CAST($4 AS TEXT) IS NULL OR version = $4)"
    };
}

#[cfg(any(feature = "sqlite", feature = "postgres"))]
async fn rows(sql: Sql<'_>, q: OutcomeQuery<'_>) -> Result<Vec<OutcomeRow>> {
    type Row = (
        String,
        String,
        String,
        Option<String>,
        Option<String>,
        Option<String>,
        Option<String>,
        Option<i64>,
        i64,
        Option<i64>,
    );
    const STATEMENT: &str = concat!(
        "SELECT session, pack, version, variant, player, outcome, tracked, turns, created_at, finished_at \
         FROM outcomes WHERE ",
        games_of_query!(),
        " ORDER BY created_at, session"
    );
    let found: Vec<Row> = on_pool!(sql, pool => sqlx::query_as(STATEMENT)
            .bind(q.pack)
            .bind(q.since)
            .bind(q.until)
            .bind(q.version)
            .fetch_all(pool)
            .await)
    .map_err(|e| store_error("cannot read outcomes", e))?;
    Ok(found
        .into_iter()
        .map(|(session, pack, version, variant, player, outcome, tracked, turns, created_at, finished_at)| OutcomeRow {
            session,
            pack,
            version,
            variant,
            player,
            outcome,
            tracked: tracked.and_then(|t| serde_json::from_str(&t).ok()).unwrap_or_default(),
            turns: turns.unwrap_or(0) as u64,
            created_at,
            finished_at,
        })
        .collect())
}

#[cfg(any(feature = "sqlite", feature = "postgres"))]
async fn counts(sql: Sql<'_>, q: OutcomeQuery<'_>) -> Result<Vec<OutcomeCount>> {
    const STATEMENT: &str = concat!(
        "SELECT variant, outcome, COUNT(*) FROM outcomes WHERE ",
        games_of_query!(),
        " GROUP BY variant, outcome ORDER BY variant, outcome"
    );
    let found: Vec<(Option<String>, Option<String>, i64)> = on_pool!(sql, pool => sqlx::query_as(STATEMENT)
            .bind(q.pack)
            .bind(q.since)
            .bind(q.until)
            .bind(q.version)
            .fetch_all(pool)
            .await)
    .map_err(|e| store_error("cannot count outcomes", e))?;
    Ok(found.into_iter().map(|(variant, outcome, n)| OutcomeCount { variant, outcome, games: n as u64 }).collect())
}

/// The statement that ranks a field's values within each variant, `$counted` the statement that
/// counts the games at each value (`variant`, the number `x`, the games `c`): each variant's
/// games and its values at ranks ⌈n/2⌉, ⌈n/10⌉ and ⌈9n/10⌉, each the least value whose running
/// count reaches its rank (integer division on both databases). Ranking the distinct values
/// rather than every game keeps the window small: a score takes a few hundred values at most.
#[cfg(any(feature = "sqlite", feature = "postgres"))]
macro_rules! ranked {
    ($counted:expr) => {
        concat!(
            "WITH h AS (",
            $counted,
            "), r AS (SELECT variant, CAST(x AS DOUBLE PRECISION) AS x, \
             CAST(SUM(c) OVER (PARTITION BY variant ORDER BY x) AS BIGINT) AS upto, \
             CAST(SUM(c) OVER (PARTITION BY variant) AS BIGINT) AS n FROM h) \
             SELECT variant, MAX(n), MIN(CASE WHEN upto >= (n + 1) / 2 THEN x END), \
             MIN(CASE WHEN upto >= (n + 9) / 10 THEN x END), MIN(CASE WHEN upto >= (9 * n + 9) / 10 THEN x END) \
             FROM r GROUP BY variant ORDER BY variant"
        )
    };
}

#[cfg(any(feature = "sqlite", feature = "postgres"))]
async fn spreads(sql: Sql<'_>, q: OutcomeQuery<'_>, field: &str) -> Result<Vec<FieldSpread>> {
    // The field's numbers in the row's JSON: each database reads JSON its own way.
    #[cfg(feature = "sqlite")]
    const SQLITE: &str = ranked!(concat!(
        "SELECT variant, json_extract(tracked, $5) AS x, COUNT(*) AS c FROM outcomes WHERE ",
        games_of_query!(),
        // `json_type`, not the value's type: SQLite reads JSON's true and false as 1 and 0.
        " AND outcome IS NOT NULL AND json_type(tracked, $5) IN ('integer', 'real') GROUP BY variant, x"
    ));
    #[cfg(feature = "postgres")]
    const POSTGRES: &str = ranked!(concat!(
        "SELECT variant, (tracked::jsonb ->> $5::text)::float8 AS x, COUNT(*) AS c FROM outcomes WHERE ",
        games_of_query!(),
        " AND outcome IS NOT NULL AND jsonb_typeof(tracked::jsonb -> $5::text) = 'number' GROUP BY variant, x"
    ));
    type Row = (Option<String>, i64, Option<f64>, Option<f64>, Option<f64>);
    let found: std::result::Result<Vec<Row>, sqlx::Error> = match sql {
        #[cfg(feature = "sqlite")]
        Sql::Sqlite(pool) => {
            // A JSON path naming the key whatever its characters.
            let path = format!("$.{}", serde_json::Value::String(field.to_owned()));
            let q = sqlx::query_as(SQLITE).bind(q.pack).bind(q.since).bind(q.until).bind(q.version).bind(path);
            q.fetch_all(pool).await
        }
        #[cfg(feature = "postgres")]
        Sql::Postgres(pool) => {
            let q = sqlx::query_as(POSTGRES).bind(q.pack).bind(q.since).bind(q.until).bind(q.version).bind(field);
            q.fetch_all(pool).await
        }
    };
    let found = found.map_err(|e| store_error("cannot rank a tracked field", e))?;
    Ok(found
        .into_iter()
        .filter_map(|(variant, n, median, p10, p90)| {
            Some(FieldSpread { variant, games: n as u64, median: median?, p10: p10?, p90: p90? })
        })
        .collect())
}

#[cfg(any(feature = "sqlite", feature = "postgres"))]
async fn erase(sql: Sql<'_>, player: &str) -> Result<u64> {
    on_pool!(sql, pool => sqlx::query("DELETE FROM outcomes WHERE player = $1").bind(player).execute(pool).await.map(|r| r.rows_affected()))
        .map_err(|e| store_error("cannot erase a player's outcomes", e))
}
