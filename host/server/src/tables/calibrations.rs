//! Calibrations (`ruleweave calibrate`), kept by pack and version: a simulate or tune report of
//! the same version carries the newest one's headline.

use std::collections::HashMap;
use std::sync::Mutex;

use ruleweave::Result;
use ruleweave::llm::BoxFuture;
use serde_json::Value as Json;

use super::{Db, now_ms, on_pool, store_error};

/// Where calibrations are kept (see [`Tables::calibrations`](super::Tables::calibrations)).
pub trait Calibrations: Send + Sync {
    /// Keeps `body` as the calibration of `pack` at `version` (replacing an earlier one).
    fn keep_calibration<'a>(&'a self, pack: &'a str, version: &'a str, body: &'a Json) -> BoxFuture<'a, Result<()>>;

    /// The calibration of `pack` at `version`, if one is kept.
    fn calibration<'a>(&'a self, pack: &'a str, version: &'a str) -> BoxFuture<'a, Result<Option<Json>>>;
}

/// Calibrations kept in this process, beside a memory store.
#[derive(Default)]
pub(super) struct InMemory(Mutex<HashMap<(String, String), Json>>);

impl Calibrations for InMemory {
    fn keep_calibration<'a>(&'a self, pack: &'a str, version: &'a str, body: &'a Json) -> BoxFuture<'a, Result<()>> {
        let mut kept = self.0.lock().unwrap_or_else(|p| p.into_inner());
        kept.insert((pack.to_owned(), version.to_owned()), body.clone());
        Box::pin(std::future::ready(Ok(())))
    }

    fn calibration<'a>(&'a self, pack: &'a str, version: &'a str) -> BoxFuture<'a, Result<Option<Json>>> {
        let kept = self.0.lock().unwrap_or_else(|p| p.into_inner());
        let found = kept.get(&(pack.to_owned(), version.to_owned())).cloned();
        Box::pin(std::future::ready(Ok(found)))
    }
}

impl Calibrations for Db {
    fn keep_calibration<'a>(&'a self, pack: &'a str, version: &'a str, body: &'a Json) -> BoxFuture<'a, Result<()>> {
        Box::pin(async move {
            on_pool!(self, pool => sqlx::query(
                    "INSERT INTO calibrations (pack, version, created_at, body) VALUES ($1, $2, $3, $4) \
                     ON CONFLICT (pack, version) DO UPDATE SET created_at = excluded.created_at, body = excluded.body",
                )
                .bind(pack)
                .bind(version)
                .bind(now_ms())
                .bind(body.to_string())
                .execute(pool)
                .await
                .map(|_| ()))
            .map_err(|e| store_error("cannot keep a calibration", e))
        })
    }

    fn calibration<'a>(&'a self, pack: &'a str, version: &'a str) -> BoxFuture<'a, Result<Option<Json>>> {
        Box::pin(async move {
            let body: Option<String> = on_pool!(self, pool => sqlx::query_scalar(
                    "SELECT body FROM calibrations WHERE pack = $1 AND version = $2",
                )
                .bind(pack)
                .bind(version)
                .fetch_optional(pool)
                .await)
            .map_err(|e| store_error("cannot read a calibration", e))?;
            body.map(|b| serde_json::from_str(&b).map_err(|e| store_error("a kept calibration is not JSON", e)))
                .transpose()
        })
    }
}
