//! Accepting connections: HTTP/1.1 with a deadline on every request's headers (idle keep-alive
//! connections included), a cap on open connections, and a graceful shutdown that lets the
//! requests in flight finish.
//!
//! `axum::serve` sets no header timeout, so a client that never finishes its headers would hold
//! a connection (and a file descriptor) for good; this loop is the few lines it takes to set one.

use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use axum::Router;
use hyper::server::conn::http1;
use hyper_util::rt::{TokioIo, TokioTimer};
use hyper_util::service::TowerToHyperService;
use tokio::net::TcpListener;
use tokio::sync::{Semaphore, watch};
use tokio_util::task::TaskTracker;
use tower::ServiceExt as _;

/// The address a request came from (a proxy's, behind one), in every request's extensions.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Peer(pub std::net::IpAddr);

/// Serves `app` on `listener` until `shutdown` completes, then waits for open requests.
pub(super) async fn serve(
    listener: TcpListener,
    app: Router,
    header_timeout: Duration,
    max_connections: usize,
    shutdown: impl Future<Output = ()>,
) {
    let open = Arc::new(Semaphore::new(max_connections));
    let connections = TaskTracker::new();
    let (stop, stopping) = watch::channel(false);
    let mut builder = http1::Builder::new();
    builder.timer(TokioTimer::new()).header_read_timeout(header_timeout).keep_alive(true);
    tokio::pin!(shutdown);
    loop {
        let permit = tokio::select! {
            permit = open.clone().acquire_owned() => permit.expect("the semaphore is never closed"),
            () = &mut shutdown => break,
        };
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
        let _ = stream.set_nodelay(true);
        let service =
            TowerToHyperService::new(app.clone().map_request(move |mut req: hyper::Request<hyper::body::Incoming>| {
                req.extensions_mut().insert(Peer(peer.ip()));
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
            drop(permit);
        });
    }
    drop(listener);
    let _ = stop.send(true);
    connections.close();
    connections.wait().await;
}
