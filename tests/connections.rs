//! Connection caps: one client address that stalls its sockets takes its own share of the
//! server's connections and no more, and `/healthz` answers past every cap, so a load balancer's
//! probe never waits behind a flood.

use crate::support;

use std::net::SocketAddr;
use std::time::Duration;

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpSocket, TcpStream};

/// A connection to `server` from the loopback address `from` (127.0.0.2 is a different client
/// from 127.0.0.1, on one machine).
async fn connect(from: &str, server: SocketAddr) -> TcpStream {
    let socket = TcpSocket::new_v4().unwrap();
    socket.bind(format!("{from}:0").parse().unwrap()).unwrap();
    socket.connect(server).await.unwrap()
}

/// A connection from `from` that sends half a request's headers and nothing more.
async fn stalled(from: &str, server: SocketAddr) -> TcpStream {
    let mut conn = connect(from, server).await;
    conn.write_all(b"GET /v1/packs HTTP/1.1\r\nHost: loc").await.unwrap();
    conn
}

/// `GET path` from `from`, on a new connection: the status and the body, as the server answered
/// (within a bound: a request left waiting is a failure).
async fn get_from(from: &str, server: SocketAddr, path: &str) -> (u16, String) {
    let mut conn = connect(from, server).await;
    let request = format!("GET {path} HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n");
    conn.write_all(request.as_bytes()).await.unwrap();
    let mut answer = String::new();
    tokio::time::timeout(Duration::from_secs(10), conn.read_to_string(&mut answer))
        .await
        .unwrap_or_else(|_| panic!("GET {path} from {from} was not answered"))
        .unwrap();
    let status = answer.get(9..12).and_then(|s| s.parse().ok()).unwrap_or_else(|| panic!("{answer:?}"));
    let body = answer.split_once("\r\n\r\n").map_or("", |(_, body)| body).to_owned();
    (status, body)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn stalled_connections_from_one_client_leave_the_rest_and_healthz_answered() {
    let root = support::counter_root();
    // Headers may take a minute, so nothing here is freed by the header timeout.
    let env = [
        ("RULEWEAVE_MAX_CONNECTIONS_PER_CLIENT", "4"),
        ("RULEWEAVE_MAX_CONNECTIONS", "10"),
        ("RULEWEAVE_HEADER_TIMEOUT", "60s"),
    ];
    let server = support::start(root.path(), "memory", &env);
    let addr: SocketAddr = server.url.trim_start_matches("http://").parse().unwrap();

    // 127.0.0.2 stalls as many connections as one client may keep.
    let mut held = Vec::new();
    for _ in 0..4 {
        held.push(stalled("127.0.0.2", addr).await);
    }
    // Its next request waits for one of them, while other clients are answered.
    let waiting = tokio::spawn(get_from("127.0.0.2", addr, "/v1/packs"));
    for _ in 0..3 {
        let (status, body) = get_from("127.0.0.1", addr, "/v1/packs").await;
        assert_eq!(status, 200, "{body}");
        assert!(body.contains("\"counter\""), "{body}");
    }
    assert!(!waiting.is_finished(), "answered past its client's cap: {:?}", waiting.await);
    // With as many again waiting, its next request is refused saying which cap; its health
    // probe is answered.
    let mut waiting_too = Vec::new();
    for _ in 0..3 {
        waiting_too.push(stalled("127.0.0.2", addr).await);
    }
    let (status, body) = get_from("127.0.0.2", addr, "/v1/packs").await;
    assert_eq!(status, 429, "{body}");
    assert!(body.contains("\"too_many_connections\"") && body.contains("max_connections_per_client"), "{body}");
    assert_eq!(get_from("127.0.0.2", addr, "/healthz").await.0, 200);
    // One of its connections hangs up: the waiting request is answered, nothing lost.
    drop(held.pop());
    let (status, body) = tokio::time::timeout(Duration::from_secs(10), waiting).await.expect("answered").unwrap();
    assert_eq!(status, 200, "{body}");

    // Another client fills the server's ten connections: past the server's cap only the health
    // probe is answered, whoever asks.
    for _ in 0..4 {
        held.push(stalled("127.0.0.3", addr).await);
    }
    let (status, body) = get_from("127.0.0.1", addr, "/v1/packs").await;
    assert_eq!(status, 503, "{body}");
    assert!(body.contains("\"server_busy\"") && body.contains("max_connections"), "{body}");
    assert_eq!(get_from("127.0.0.1", addr, "/healthz").await.0, 200);

    // The flood hangs up: every slot comes back (the server counts a connection gone when it
    // reads its end, so the first request may still find the old count; a bounded wait).
    drop((held, waiting_too));
    let mut answered = 0;
    for _ in 0..100 {
        answered = get_from("127.0.0.2", addr, "/v1/packs").await.0;
        if answered == 200 {
            break;
        }
        tokio::task::yield_now().await;
    }
    assert_eq!(answered, 200);
}
