//! JSON-RPC over stdio with LSP's framing (`Content-Length: N`, a blank line, N bytes of JSON),
//! read so that no input takes the server down: a frame whose body is not JSON-RPC is reported
//! (the server answers it with a parse error) and the next frame is read; a header that is not
//! one is skipped up to the next blank line; a length past [`MAX_FRAME`] is read and dropped.
//! lsp-server's own stdio reader stops at the first malformed message, so this one stands in for
//! it; its message types are used as they are.

use std::io::{BufRead, Read, Write};
use std::sync::mpsc;

use lsp_server::Message;

/// The largest message read (a 5 MB buffer sent whole fits, with room).
pub(super) const MAX_FRAME: usize = 64 * 1024 * 1024;

/// What came in.
pub(super) enum Incoming {
    /// A JSON-RPC message.
    Message(Message),
    /// A frame that is not one, and why.
    Garbage(String),
}

/// What goes out: a message, or raw JSON (a parse error's response has a null id, which
/// lsp-server's types cannot say).
pub(super) enum Outgoing {
    Message(Message),
    Raw(serde_json::Value),
}

/// Starts the reader and writer threads on stdin and stdout. The receiver ends when stdin does.
pub(super) fn stdio() -> (mpsc::Sender<Outgoing>, mpsc::Receiver<Incoming>) {
    let (in_tx, in_rx) = mpsc::channel();
    std::thread::spawn(move || {
        let stdin = std::io::stdin();
        let mut stdin = stdin.lock();
        while let Some(frame) = read_frame(&mut stdin) {
            let incoming = match frame {
                Ok(body) => match serde_json::from_slice::<Message>(&body) {
                    Ok(m) => Incoming::Message(m),
                    Err(e) => Incoming::Garbage(format!("not a JSON-RPC message: {e}")),
                },
                Err(why) => Incoming::Garbage(why),
            };
            if in_tx.send(incoming).is_err() {
                break;
            }
        }
    });
    let (out_tx, out_rx) = mpsc::channel::<Outgoing>();
    std::thread::spawn(move || {
        let stdout = std::io::stdout();
        for out in out_rx {
            let mut stdout = stdout.lock();
            let written = match out {
                Outgoing::Message(m) => m.write(&mut stdout),
                Outgoing::Raw(v) => write_raw(&mut stdout, &v),
            };
            if written.and_then(|()| stdout.flush()).is_err() {
                break;
            }
        }
    });
    (out_tx, in_rx)
}

fn write_raw(w: &mut impl Write, v: &serde_json::Value) -> std::io::Result<()> {
    let text = v.to_string();
    write!(w, "Content-Length: {}\r\n\r\n{text}", text.len())
}

/// The next frame's body; `Err` for a frame that could not be read as one; `None` at the end.
fn read_frame(r: &mut impl BufRead) -> Option<Result<Vec<u8>, String>> {
    let mut length: Option<usize> = None;
    let mut bad_header: Option<String> = None;
    let mut line = String::new();
    loop {
        line.clear();
        match r.read_line(&mut line) {
            Ok(0) | Err(_) => return None,
            Ok(_) => {}
        }
        let header = line.trim_end_matches(['\r', '\n']);
        if header.is_empty() {
            if length.is_some() || bad_header.is_some() {
                break;
            }
            continue;
        }
        match header.split_once(':') {
            Some((name, value)) if name.eq_ignore_ascii_case("content-length") => match value.trim().parse::<usize>() {
                Ok(n) => length = Some(n),
                Err(_) => bad_header = Some(format!("`{header}` is not a length")),
            },
            Some((name, _)) if name.eq_ignore_ascii_case("content-type") => {}
            _ => bad_header = Some(format!("`{}` is not an LSP header", header.chars().take(80).collect::<String>())),
        }
    }
    let Some(n) = length else {
        return Some(Err(bad_header.unwrap_or_else(|| "a frame without Content-Length".into())));
    };
    if n > MAX_FRAME {
        let skipped = std::io::copy(&mut r.take(n as u64), &mut std::io::sink());
        return match skipped {
            Ok(_) => Some(Err(format!("a message of {n} bytes is larger than {MAX_FRAME}"))),
            Err(_) => None,
        };
    }
    let mut body = vec![0; n];
    match r.read_exact(&mut body) {
        Ok(()) => Some(match bad_header {
            Some(why) => Err(why),
            None => Ok(body),
        }),
        Err(_) => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn garbage_between_frames_is_reported_and_the_next_frame_read() {
        let input = "Content-Length: 5\r\n\r\nhello\
                     garbage line\r\n\r\n\
                     Content-Length: 40\r\n\r\n{\"jsonrpc\":\"2.0\",\"method\":\"exit\"}       ";
        let mut r = std::io::BufReader::new(input.as_bytes());
        assert_eq!(read_frame(&mut r), Some(Ok(b"hello".to_vec())));
        assert!(matches!(read_frame(&mut r), Some(Err(why)) if why.contains("garbage line")));
        let body = read_frame(&mut r).unwrap().unwrap();
        assert!(serde_json::from_slice::<Message>(&body).is_ok());
        assert_eq!(read_frame(&mut r), None);
    }
}
