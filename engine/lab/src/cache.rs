//! The answers real models gave a lab run, kept in a folder so that the same games again make
//! no new calls (`simulate --cache DIR`).
//!
//! An answer is kept under the request as sent (the provider, the model, the messages, the
//! sampling settings and reply format; not which profile asked) and a sample number: at
//! temperature 0 a model is taken to answer a request one way, so every asking of it shares one
//! answer; above 0, the n-th asking of the same request in a run gets the n-th answer kept for it,
//! so a run that asks a request three times, run again, gets the same three answers and no fourth
//! call. A kept file holds its request, and an answer is given only for the very request it was
//! kept for: the cache never answers a request it has not seen.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::Mutex;
use std::sync::atomic::{AtomicU64, Ordering};

use ruleweave::llm::{LlmRequest, LlmResponse};
use ruleweave::{Error, ErrorKind, Result};
use sha2::{Digest, Sha256};

/// How a run used its cache, as its report gives it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct CacheUse {
    /// Calls answered from the cache (no model asked, nothing spent).
    pub hits: u64,
    /// Calls the cache had no answer for, sent to the model (and their answers kept).
    pub misses: u64,
}

/// A folder of kept answers.
#[derive(Debug)]
pub struct Cache {
    dir: PathBuf,
    /// How many times this run asked each request so far: its next sample number.
    asked: Mutex<HashMap<[u8; 32], u32>>,
    hits: AtomicU64,
    misses: AtomicU64,
}

/// A kept answer: the request it answers, as the key was made from, and the answer.
#[derive(serde::Serialize, serde::Deserialize)]
struct Kept {
    request: serde_json::Value,
    sample: u32,
    answer: LlmResponse,
}

impl Cache {
    /// The cache in `dir` (made when missing).
    pub fn open(dir: &Path) -> Result<Cache> {
        std::fs::create_dir_all(dir)
            .map_err(|e| Error::new(ErrorKind::Io, format!("cannot make the cache folder {}: {e}", dir.display())))?;
        Ok(Cache { dir: dir.to_owned(), asked: Mutex::default(), hits: AtomicU64::new(0), misses: AtomicU64::new(0) })
    }

    /// How the run used it so far.
    pub fn used(&self) -> CacheUse {
        CacheUse { hits: self.hits.load(Ordering::Relaxed), misses: self.misses.load(Ordering::Relaxed) }
    }

    /// The request as the cache keys it: what the provider `provider` is sent, without the
    /// profile that asked.
    fn canonical(provider: &str, request: &LlmRequest) -> serde_json::Value {
        serde_json::json!({
            "provider": provider,
            "model": request.model,
            "messages": request.messages,
            "temperature": request.temperature,
            "max_tokens": request.max_tokens,
            "json": request.json,
            "schema": request.schema,
        })
    }

    /// Where the answer to this asking of `request` is kept, and the key it is kept under; each
    /// call counts as one asking.
    pub(crate) fn slot(&self, provider: &str, request: &LlmRequest) -> Slot {
        let canonical = Self::canonical(provider, request);
        let hash: [u8; 32] = Sha256::digest(canonical.to_string().as_bytes()).into();
        // At temperature 0 every asking shares the first answer.
        let sample = if request.temperature.unwrap_or(1.0) > 0.0 {
            let mut asked = self.asked.lock().unwrap_or_else(|p| p.into_inner());
            let n = asked.entry(hash).or_insert(0);
            *n += 1;
            *n - 1
        } else {
            0
        };
        let name: String = hash.iter().map(|b| format!("{b:02x}")).collect();
        Slot { file: self.dir.join(format!("{name}-{sample}.json")), canonical, sample }
    }

    /// The answer kept in `slot`, if it is one for this very request.
    pub(crate) fn get(&self, slot: &Slot) -> Option<LlmResponse> {
        let kept: Option<Kept> = std::fs::read(&slot.file).ok().and_then(|b| serde_json::from_slice(&b).ok());
        match kept {
            Some(k) if k.request == slot.canonical && k.sample == slot.sample => {
                self.hits.fetch_add(1, Ordering::Relaxed);
                Some(k.answer)
            }
            _ => {
                self.misses.fetch_add(1, Ordering::Relaxed);
                None
            }
        }
    }

    /// Keeps `answer` in `slot` (written aside and renamed, so a reader never sees half a file);
    /// a cache that cannot be written is warned of, and the run goes on.
    pub(crate) fn keep(&self, slot: Slot, answer: &LlmResponse) {
        let kept = Kept { request: slot.canonical, sample: slot.sample, answer: answer.clone() };
        let aside = slot.file.with_extension("part");
        let written = serde_json::to_vec(&kept)
            .map_err(std::io::Error::other)
            .and_then(|bytes| std::fs::write(&aside, bytes))
            .and_then(|()| std::fs::rename(&aside, &slot.file));
        if let Err(e) = written {
            tracing::warn!("cannot keep a model's answer in the cache ({}): {e}", slot.file.display());
        }
    }
}

/// Where one asking of a request is kept.
pub(crate) struct Slot {
    file: PathBuf,
    canonical: serde_json::Value,
    sample: u32,
}
