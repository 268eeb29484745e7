//! `ruleweave lsp`: a Language Server Protocol server over stdio for a pack root, so an editor
//! knows a pack as `check` does. Diagnostics as you type (the engine's own checker run on the
//! editor's unsaved buffers, a moment after the last keystroke), completion, hover and
//! go-to-definition across the manifest, Rhai scripts and prompt templates; references and
//! rename of nodes, state fields, params and script functions; a code lens over each node with
//! the test cases that run it.
//!
//! Built on lsp-server and lsp-types, rust-analyzer's own: a synchronous loop fits a server
//! whose every answer is a check or a lookup, and needs no async runtime. Its stdio reader is
//! replaced by one that survives malformed input (`transport`).
//!
//! The `ruleweave` binary serves it as `ruleweave lsp`; this crate is the server alone.

mod features;
mod symbols;
mod text;
mod transport;
mod workspace;

use std::collections::BTreeSet;
use std::panic::AssertUnwindSafe;
use std::path::PathBuf;
use std::sync::mpsc::{RecvTimeoutError, Sender};
use std::time::{Duration, Instant};

use anyhow::Result;
use lsp_server::{ErrorCode, Message, Notification, Request, RequestId, Response};
use lsp_types::{
    CompletionOptions, HoverProviderCapability, InitializeParams, OneOf, Position, PublishDiagnosticsParams,
    ServerCapabilities, ServerInfo, TextDocumentPositionParams, TextDocumentSyncCapability, TextDocumentSyncKind,
};
use serde_json::{Value as Json, json};

use transport::{Incoming, Outgoing};
use workspace::{Doc, Workspace};

/// How long after the last change the packs it touched are checked.
const SETTLE: Duration = Duration::from_millis(50);

/// Serves the editor on stdin and stdout until it says `exit` (or closes stdin). The pack root
/// is the workspace folder the editor names, else `root`, else the current directory.
pub fn run(root: Option<PathBuf>) -> Result<()> {
    let (out, incoming) = transport::stdio();
    let send = |m: Message| {
        let _ = out.send(Outgoing::Message(m));
    };
    // Until `initialize`, requests are refused, as the protocol says.
    let params: InitializeParams = loop {
        match incoming.recv() {
            Err(_) => return Ok(()),
            Ok(Incoming::Garbage(why)) => parse_error(&out, &why),
            Ok(Incoming::Invalid(id, why)) => invalid_request(&out, id, &why),
            Ok(Incoming::Message(Message::Request(r))) if r.method == "initialize" => {
                match serde_json::from_value(r.params.clone()) {
                    Ok(p) => {
                        send(Message::Response(Response::new_ok(r.id, initialize_result())));
                        break p;
                    }
                    Err(e) => send(error(r.id, ErrorCode::InvalidParams, format!("initialize: {e}"))),
                }
            }
            Ok(Incoming::Message(Message::Request(r))) => {
                send(error(r.id, ErrorCode::ServerNotInitialized, "the server is not initialized yet".into()))
            }
            Ok(Incoming::Message(Message::Notification(n))) if n.method == "exit" => return Ok(()),
            Ok(Incoming::Message(_)) => {}
        }
    };
    let root = workspace_root(&params).or(root).unwrap_or_else(|| PathBuf::from("."));
    let mut server =
        Server { ws: Workspace::new(root), out: out.clone(), dirty: BTreeSet::new(), due: None, shutdown: false };
    loop {
        let message = match server.due {
            Some(due) => match incoming.recv_timeout(due.saturating_duration_since(Instant::now())) {
                Ok(m) => Some(m),
                Err(RecvTimeoutError::Timeout) => None,
                Err(RecvTimeoutError::Disconnected) => return Ok(()),
            },
            None => match incoming.recv() {
                Ok(m) => Some(m),
                Err(_) => return Ok(()),
            },
        };
        match message {
            None => server.check_dirty(),
            Some(Incoming::Garbage(why)) => parse_error(&out, &why),
            Some(Incoming::Invalid(id, why)) => invalid_request(&out, id, &why),
            Some(Incoming::Message(Message::Request(r))) => server.request(r),
            Some(Incoming::Message(Message::Notification(n))) => {
                if n.method == "exit" {
                    return Ok(());
                }
                server.notification(n);
            }
            Some(Incoming::Message(Message::Response(_))) => {}
        }
    }
}

fn initialize_result() -> Json {
    let capabilities = ServerCapabilities {
        text_document_sync: Some(TextDocumentSyncCapability::Kind(TextDocumentSyncKind::FULL)),
        completion_provider: Some(CompletionOptions {
            // Where a name is expected next: `this.`, `param("`, a filter's `|`, `file.rhai::`, `-> `.
            trigger_characters: Some([".", "\"", "|", ":", ">"].map(String::from).to_vec()),
            ..Default::default()
        }),
        hover_provider: Some(HoverProviderCapability::Simple(true)),
        definition_provider: Some(OneOf::Left(true)),
        references_provider: Some(OneOf::Left(true)),
        code_lens_provider: Some(lsp_types::CodeLensOptions { resolve_provider: Some(false) }),
        rename_provider: Some(OneOf::Right(lsp_types::RenameOptions {
            prepare_provider: Some(true),
            work_done_progress_options: Default::default(),
        })),
        ..Default::default()
    };
    let info = ServerInfo { name: "ruleweave".into(), version: Some(env!("CARGO_PKG_VERSION").into()) };
    json!({"capabilities": capabilities, "serverInfo": info})
}

/// The first workspace folder, else the root URI, as a path.
fn workspace_root(p: &InitializeParams) -> Option<PathBuf> {
    let uri = p.workspace_folders.as_ref().and_then(|f| f.first()).map(|f| f.uri.clone());
    #[allow(deprecated)]
    let uri = uri.or_else(|| p.root_uri.clone())?;
    url::Url::parse(uri.as_str()).ok()?.to_file_path().ok()
}

fn error(id: RequestId, code: ErrorCode, message: String) -> Message {
    Message::Response(Response::new_err(id, code as i32, message))
}

/// The answer to a frame that is not a message: a parse error, to no request (its id is null).
fn parse_error(out: &Sender<Outgoing>, why: &str) {
    let body = json!({"jsonrpc": "2.0", "id": null, "error": {"code": ErrorCode::ParseError as i32, "message": why}});
    let _ = out.send(Outgoing::Raw(body));
}

/// The answer to JSON that names a request but is not one: an invalid request, to its id.
fn invalid_request(out: &Sender<Outgoing>, id: Json, why: &str) {
    let body = json!({"jsonrpc": "2.0", "id": id, "error": {"code": ErrorCode::InvalidRequest as i32, "message": why}});
    let _ = out.send(Outgoing::Raw(body));
}

struct Server {
    ws: Workspace,
    out: Sender<Outgoing>,
    /// Packs to check once the editor settles.
    dirty: BTreeSet<String>,
    due: Option<Instant>,
    shutdown: bool,
}

impl Server {
    fn send(&self, m: Message) {
        let _ = self.out.send(Outgoing::Message(m));
    }

    fn request(&mut self, r: Request) {
        if self.shutdown {
            return self.send(error(r.id, ErrorCode::InvalidRequest, "the server is shutting down".into()));
        }
        let id = r.id.clone();
        // A bug in one answer must not take the server (and every open buffer's checks) down.
        let answer = std::panic::catch_unwind(AssertUnwindSafe(|| self.answer(&r)));
        let message = match answer {
            Ok(Ok(result)) => Message::Response(Response::new_ok(id, result)),
            Ok(Err((code, why))) => error(id, code, why),
            Err(_) => error(id, ErrorCode::InternalError, format!("{} failed inside the server", r.method)),
        };
        self.send(message);
    }

    fn answer(&mut self, r: &Request) -> Result<Json, (ErrorCode, String)> {
        let mut at = || -> Result<(String, Position), (ErrorCode, String)> {
            let p: TextDocumentPositionParams = serde_json::from_value(r.params.clone())
                .map_err(|e| (ErrorCode::InvalidParams, format!("{}: {e}", r.method)))?;
            let rel = self.ws.rel(&p.text_document.uri).unwrap_or_default();
            // Answers come from the pack's last check: one still to run for this file runs now.
            if self.ws.packs_of(&rel).iter().any(|p| self.dirty.contains(p)) {
                self.check_dirty();
            }
            Ok((rel, p.position))
        };
        let json = |v: Option<Json>| Ok(v.unwrap_or(Json::Null));
        match r.method.as_str() {
            "shutdown" => {
                self.shutdown = true;
                Ok(Json::Null)
            }
            "textDocument/completion" => {
                let (rel, pos) = at()?;
                json(serde_json::to_value(features::complete(&self.ws, &rel, pos)).ok())
            }
            "textDocument/hover" => {
                let (rel, pos) = at()?;
                json(features::hover(&self.ws, &rel, pos).and_then(|h| serde_json::to_value(h).ok()))
            }
            "textDocument/definition" => {
                let (rel, pos) = at()?;
                json(features::definition(&self.ws, &rel, pos).and_then(|l| serde_json::to_value(l).ok()))
            }
            "textDocument/references" => {
                let (rel, pos) = at()?;
                let found =
                    symbols::symbol_at(&self.ws, &rel, pos).map(|(pack, s)| symbols::references(&self.ws, &pack, &s));
                json(found.and_then(|l| serde_json::to_value(l).ok()))
            }
            "textDocument/prepareRename" => {
                let (rel, pos) = at()?;
                let text = self.ws.text(&rel).unwrap_or_default();
                let named = symbols::symbol_at(&self.ws, &rel, pos).is_some();
                let range = text::word_at(&text, pos, &[]).filter(|_| named).map(|(_, r)| r);
                json(range.and_then(|r| serde_json::to_value(r).ok()))
            }
            "textDocument/rename" => {
                let (rel, pos) = at()?;
                let new_name = r.params.get("newName").and_then(Json::as_str).unwrap_or_default();
                match symbols::rename(&self.ws, &rel, pos, new_name) {
                    Ok(edit) => json(edit.and_then(|e| serde_json::to_value(e).ok())),
                    Err(why) => Err((ErrorCode::InvalidParams, why)),
                }
            }
            "textDocument/codeLens" => {
                let uri = r.params.pointer("/textDocument/uri").cloned().and_then(|u| serde_json::from_value(u).ok());
                let rel = uri
                    .and_then(|u| self.ws.rel(&u))
                    .ok_or((ErrorCode::InvalidParams, "codeLens: no document".into()))?;
                json(serde_json::to_value(features::code_lenses(&mut self.ws, &rel)).ok())
            }
            other => Err((ErrorCode::MethodNotFound, format!("`{other}` is not a method this server has"))),
        }
    }

    fn notification(&mut self, n: Notification) {
        let params = &n.params;
        let uri = params.pointer("/textDocument/uri").and_then(|u| serde_json::from_value(u.clone()).ok());
        let Some(rel) = uri.and_then(|u| self.ws.rel(&u)) else { return };
        let version = params.pointer("/textDocument/version").and_then(Json::as_i64).unwrap_or(0) as i32;
        match n.method.as_str() {
            "textDocument/didOpen" => {
                let text = params.pointer("/textDocument/text").and_then(Json::as_str).unwrap_or("").to_owned();
                self.ws.docs.insert(rel.clone(), Doc { text, version });
            }
            "textDocument/didChange" => {
                // Full sync: the last change holds the whole text.
                let changes = params.get("contentChanges").and_then(Json::as_array);
                let Some(text) = changes.and_then(|c| c.last()).and_then(|c| c.get("text")).and_then(Json::as_str)
                else {
                    return;
                };
                self.ws.docs.insert(rel.clone(), Doc { text: text.to_owned(), version });
            }
            "textDocument/didClose" => {
                self.ws.docs.remove(&rel);
            }
            "textDocument/didSave" => {}
            _ => return,
        }
        self.dirty.extend(self.ws.packs_of(&rel));
        self.due = Some(Instant::now() + SETTLE);
    }

    /// Checks the packs changed since the last check and sends each file's diagnostics that
    /// changed.
    fn check_dirty(&mut self) {
        self.due = None;
        for pack in std::mem::take(&mut self.dirty) {
            let checked = std::panic::catch_unwind(AssertUnwindSafe(|| self.ws.check(&pack)));
            let Ok(files) = checked else { continue };
            for (rel, diagnostics) in files {
                let Some(uri) = self.ws.uri(&rel) else { continue };
                let version = self.ws.docs.get(&rel).map(|d| d.version);
                let params = PublishDiagnosticsParams { uri, diagnostics, version };
                self.send(Message::Notification(Notification::new("textDocument/publishDiagnostics".into(), params)));
            }
        }
    }
}
