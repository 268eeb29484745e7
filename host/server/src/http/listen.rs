//! Accepting connections: HTTP/1.1 with a deadline on every request's headers (idle keep-alive
//! connections included), caps on open connections (in all, and from one client address), and a
//! graceful shutdown that lets the requests in flight finish.
//!
//! `axum::serve` sets no header timeout, so a client that never finishes its headers would hold
//! a connection (and a file descriptor) for good; this loop is the few lines it takes to set one.
//! A client that stalls many connections could still take every slot, so each address has its
//! own cap, and a connection past a cap is still read, to answer `/healthz` (a load balancer's
//! probe must not wait behind a flood) and refuse the rest with a JSON error saying which cap.

use std::collections::HashMap;
use std::future::Future;
use std::net::IpAddr;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use axum::Router;
use axum::extract::Request;
use axum::http::header;
use axum::middleware::{self, Next};
use axum::response::{IntoResponse as _, Response};
use hyper::server::conn::http1;
use hyper_util::rt::{TokioIo, TokioTimer};
use hyper_util::service::TowerToHyperService;
use tokio::net::TcpListener;
use tokio::sync::{OwnedSemaphorePermit, Semaphore, watch};
use tokio_util::task::TaskTracker;
use tower::ServiceExt as _;

use super::error::{ApiError, Code};

/// The address a request came from (a proxy's, behind one), in every request's extensions.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Peer(pub std::net::IpAddr);

/// How many connections the server keeps open: in all, and from one client address.
#[derive(Debug, Clone, Copy)]
pub(super) struct Caps {
    pub total: usize,
    pub per_client: usize,
}

/// Connections read past a cap (to answer `/healthz` and refuse the rest): at most this many in
/// all, and [`PAST_CAPS_PER_CLIENT`] from one client address; a connection past those is closed
/// unread.
const PAST_CAPS: usize = 16;

/// Two, not one: a probe that connects again as soon as its last answer ends may find that
/// connection still counted for a moment.
const PAST_CAPS_PER_CLIENT: usize = 2;

/// Which cap a connection came past, in its requests' extensions.
#[derive(Debug, Clone)]
enum Past {
    Total(usize),
    PerClient(IpAddr, usize),
}

/// A connection's slot among its client's `per_client`, in its requests' extensions: taken when
/// the connection opens if one is free, else when its first request (other than `/healthz`)
/// arrives, so a burst from one client waits its turn and a stalled socket waits for nothing.
#[derive(Clone)]
struct Slot {
    slots: Arc<Semaphore>,
    held: Arc<Mutex<Option<OwnedSemaphorePermit>>>,
    /// How long a request waits for a slot before it is refused (the header deadline: what an
    /// idle connection of the same client may hold one for).
    wait: Duration,
}

/// One client address's connections.
struct Client {
    slots: Arc<Semaphore>,
    /// Open: with a slot, waiting for one, and past the caps.
    open: usize,
    past: usize,
}

/// The open connections, counted.
#[derive(Default)]
struct Counts {
    open: usize,
    past: usize,
    clients: HashMap<IpAddr, Client>,
}

/// What a connection may do, by where it stands against the caps.
#[derive(Clone)]
enum Admitted {
    /// Served, now or when one of its client's slots frees.
    Slot(Slot),
    /// Past a cap: read, to answer `/healthz` and refuse the rest.
    Past(Past),
}

/// One open connection's place in [`Counts`], given back when it closes.
struct Place {
    counts: Arc<Mutex<Counts>>,
    peer: IpAddr,
    past: bool,
}

impl Place {
    /// A place for a connection from `peer`, and what it may do; `None`: close it unread.
    ///
    /// Within `total`, a client has `per_client` slots and as many connections again waiting for
    /// one; past those (or past `total`), [`PAST_CAPS_PER_CLIENT`] more are read for `/healthz`.
    fn take(counts: &Arc<Mutex<Counts>>, peer: IpAddr, caps: Caps, wait: Duration) -> Option<(Place, Admitted)> {
        let mut guard = counts.lock().unwrap_or_else(|p| p.into_inner());
        let all = &mut *guard;
        let full = all.open >= caps.total;
        let client = all.clients.entry(peer).or_insert_with(|| Client {
            slots: Arc::new(Semaphore::new(caps.per_client)),
            open: 0,
            past: 0,
        });
        let admitted = if !full && client.open < 2 * caps.per_client {
            let held = client.slots.clone().try_acquire_owned().ok();
            (all.open, client.open) = (all.open + 1, client.open + 1);
            Admitted::Slot(Slot { slots: client.slots.clone(), held: Arc::new(Mutex::new(held)), wait })
        } else if all.past < PAST_CAPS && client.past < PAST_CAPS_PER_CLIENT {
            (all.past, client.past) = (all.past + 1, client.past + 1);
            Admitted::Past(if full { Past::Total(caps.total) } else { Past::PerClient(peer, caps.per_client) })
        } else {
            if client.open + client.past == 0 {
                all.clients.remove(&peer);
            }
            return None;
        };
        let past = matches!(admitted, Admitted::Past(_));
        Some((Place { counts: counts.clone(), peer, past }, admitted))
    }
}

impl Drop for Place {
    fn drop(&mut self) {
        let mut guard = self.counts.lock().unwrap_or_else(|p| p.into_inner());
        let all = &mut *guard;
        let Some(client) = all.clients.get_mut(&self.peer) else { return };
        if self.past {
            (all.past, client.past) = (all.past.saturating_sub(1), client.past.saturating_sub(1));
        } else {
            (all.open, client.open) = (all.open.saturating_sub(1), client.open.saturating_sub(1));
        }
        if client.open + client.past == 0 {
            all.clients.remove(&self.peer);
        }
    }
}

/// `refusal`, answered on a connection that closes after it.
fn closing(refusal: ApiError) -> Response {
    let mut response = refusal.into_response();
    response.headers_mut().insert(header::CONNECTION, header::HeaderValue::from_static("close"));
    response
}

/// `/healthz` is answered on any connection read. On one past a cap, every other request is
/// refused, saying which cap, and the connection closed after it; on one waiting for its client's
/// slot, a request waits for it.
async fn by_connection_caps(req: Request, next: Next) -> Response {
    let health = req.uri().path() == "/healthz";
    let refusal = match req.extensions().get::<Past>() {
        _ if health => None,
        Some(Past::Total(n)) => Some(ApiError::new(
            Code::ServerBusy,
            format!("this server has {n} connections open, the most it keeps (max_connections): try again shortly"),
        )),
        Some(Past::PerClient(peer, n)) => Some(ApiError::new(
            Code::TooManyConnections,
            format!(
                "{peer} has {n} connections open and as many waiting, the most one client may \
                 (max_connections_per_client): close one first"
            ),
        )),
        None => None,
    };
    if let Some(refusal) = refusal {
        return closing(refusal);
    }
    if let Some(slot) = req.extensions().get::<Slot>().cloned()
        && !health
        && slot.held.lock().unwrap_or_else(|p| p.into_inner()).is_none()
    {
        let Ok(permit) = tokio::time::timeout(slot.wait, slot.slots.clone().acquire_owned()).await else {
            return closing(ApiError::new(
                Code::TooManyConnections,
                format!(
                    "every connection this client may hold (max_connections_per_client) stayed busy for {} s: \
                     close one, or raise the cap behind a proxy",
                    slot.wait.as_secs()
                ),
            ));
        };
        *slot.held.lock().unwrap_or_else(|p| p.into_inner()) = Some(permit.expect("the semaphore is never closed"));
    }
    next.run(req).await
}

/// Serves `app` on `listener` until `shutdown` completes, then waits for open requests.
pub(super) async fn serve(
    listener: TcpListener,
    app: Router,
    header_timeout: Duration,
    caps: Caps,
    shutdown: impl Future<Output = ()>,
) {
    let app = app.layer(middleware::from_fn(by_connection_caps));
    let counts = Arc::new(Mutex::new(Counts::default()));
    let connections = TaskTracker::new();
    let (stop, stopping) = watch::channel(false);
    let mut builder = http1::Builder::new();
    builder.timer(TokioTimer::new()).header_read_timeout(header_timeout).keep_alive(true);
    tokio::pin!(shutdown);
    loop {
        let stream = tokio::select! {
            accepted = listener.accept() => match accepted {
                Ok(accepted) => accepted,
                Err(e) => {
                    // Out of file descriptors (or a connection reset before it was accepted):
                    // wait a moment instead of spinning; connections that close free them.
                    tracing::warn!("cannot accept a connection: {e}");
                    tokio::time::sleep(Duration::from_millis(100)).await;
                    continue;
                }
            },
            () = &mut shutdown => break,
        };
        let (stream, peer) = stream;
        let Some((place, admitted)) = Place::take(&counts, peer.ip(), caps, header_timeout) else {
            tracing::debug!(%peer, "a connection past every cap, closed unread");
            continue;
        };
        let _ = stream.set_nodelay(true);
        let service =
            TowerToHyperService::new(app.clone().map_request(move |mut req: hyper::Request<hyper::body::Incoming>| {
                req.extensions_mut().insert(Peer(peer.ip()));
                match &admitted {
                    Admitted::Slot(slot) => {
                        req.extensions_mut().insert(slot.clone());
                    }
                    Admitted::Past(past) => {
                        req.extensions_mut().insert(past.clone());
                    }
                }
                req
            }));
        let conn = builder.serve_connection(TokioIo::new(stream), service);
        let mut stopping = stopping.clone();
        connections.spawn(async move {
            tokio::pin!(conn);
            let mut asked = false;
            loop {
                tokio::select! {
                    result = conn.as_mut() => {
                        if let Err(e) = result {
                            tracing::debug!("connection closed: {e}");
                        }
                        break;
                    }
                    _ = stopping.changed(), if !asked => {
                        asked = true;
                        conn.as_mut().graceful_shutdown();
                    }
                }
            }
            drop(place);
        });
    }
    drop(listener);
    let _ = stop.send(true);
    connections.close();
    connections.wait().await;
}
