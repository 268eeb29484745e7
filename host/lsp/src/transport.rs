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

/// The longest header line read (`Content-Length: N` is 30 bytes or so).
const MAX_HEADER: usize = 8 * 1024;

/// Reads and drops the rest of a line, a buffer at a time; `None` at the end of the input.
fn skip_line(r: &mut impl BufRead) -> Option<()> {
    loop {
        let buf = match r.fill_buf() {
            Ok(b) => b,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
            Err(_) => return None,
        };
        if buf.is_empty() {
            return None;
        }
        match buf.iter().position(|b| *b == b'\n') {
            Some(at) => {
                r.consume(at + 1);
                return Some(());
            }
            None => {
                let n = buf.len();
                r.consume(n);
            }
        }
    }
}

/// What came in.
pub(super) enum Incoming {
    /// A JSON-RPC message.
    Message(Message),
    /// A frame that is not one, and why.
    Garbage(String),
    /// JSON that names a request (it has an `id`) but is not one: answered with that id.
    Invalid(serde_json::Value, String),
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
                    Err(e) => match serde_json::from_slice::<serde_json::Value>(&body) {
                        Ok(v) if v.get("id").is_some_and(|id| id.is_number() || id.is_string()) => {
                            Incoming::Invalid(v["id"].clone(), format!("not a JSON-RPC request: {e}"))
                        }
                        _ => Incoming::Garbage(format!("not a JSON-RPC message: {e}")),
                    },
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

/// The next frame's body; `Err` for what could not be read as one (reported, and reading goes on
/// with what follows it); `None` at the end of the input.
///
/// A line that is not a header is reported at once, so a good frame right after it is read as
/// one. A `Content-Length:` in the middle of a line (the rest of a body whose length was given
/// wrong, then the next frame's header) starts a header there.
fn read_frame(r: &mut impl BufRead) -> Option<Result<Vec<u8>, String>> {
    let mut length: Option<usize> = None;
    let mut raw = Vec::new();
    loop {
        raw.clear();
        // A header line is short: one past [`MAX_HEADER`] is skipped to its end, never kept.
        match r.by_ref().take(MAX_HEADER as u64).read_until(b'\n', &mut raw) {
            Ok(0) => return None,
            Ok(_) => {}
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
            Err(_) => return None,
        }
        if raw.len() >= MAX_HEADER && raw.last() != Some(&b'\n') {
            skip_line(r)?;
            return Some(Err(format!("a header line longer than {MAX_HEADER} bytes")));
        }
        let line = String::from_utf8_lossy(&raw);
        let header = line.trim_end_matches(['\r', '\n']);
        if header.is_empty() {
            match length {
                Some(_) => break,
                None => continue,
            }
        }
        let lower = header.to_ascii_lowercase();
        let header = match lower.find("content-length:") {
            Some(at) if at > 0 => {
                // The tail of a frame that ran long, then a header: the header counts.
                &header[at..]
            }
            _ => header,
        };
        match header.split_once(':') {
            Some((name, value)) if name.trim().eq_ignore_ascii_case("content-length") => {
                match value.trim().parse::<usize>() {
                    Ok(n) => length = Some(n),
                    Err(_) => return Some(Err(format!("`{}` is not a length", shown(header)))),
                }
            }
            Some((name, _)) if name.trim().eq_ignore_ascii_case("content-type") => {}
            _ => return Some(Err(format!("`{}` is not an LSP header", shown(header)))),
        }
    }
    let n = length?;
    if n > MAX_FRAME {
        return match std::io::copy(&mut r.take(n as u64), &mut std::io::sink()) {
            Ok(_) => Some(Err(format!("a message of {n} bytes is larger than {MAX_FRAME}"))),
            Err(_) => None,
        };
    }
    let mut body = vec![0; n];
    r.read_exact(&mut body).ok()?;
    Some(Ok(body))
}

/// The start of a line, to quote in an error.
fn shown(line: &str) -> String {
    line.chars().take(80).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn garbage_between_frames_is_reported_and_the_next_frame_read() {
        let exit = "{\"jsonrpc\":\"2.0\",\"method\":\"exit\"}";
        let mut input =
            format!("Content-Length: 5\r\n\r\nhello garbage line\r\nContent-Length: {}\r\n\r\n{exit}", exit.len())
                .into_bytes();
        // A header with a byte that is not UTF-8, then a body whose length was given short.
        input.extend(b"\xff\xfe\r\nContent-Length: 3\r\n\r\n");
        input.extend(format!("{exit}Content-Length: {}\r\n\r\n{exit}", exit.len()).bytes());
        let mut r = std::io::BufReader::new(&input[..]);
        assert_eq!(read_frame(&mut r), Some(Ok(b"hello".to_vec())));
        assert!(matches!(read_frame(&mut r), Some(Err(why)) if why.contains("garbage line")));
        assert_eq!(read_frame(&mut r), Some(Ok(exit.as_bytes().to_vec())), "the frame right after garbage");
        assert!(matches!(read_frame(&mut r), Some(Err(_))), "the line that is not UTF-8");
        assert_eq!(read_frame(&mut r), Some(Ok(exit.as_bytes()[..3].to_vec())));
        assert_eq!(read_frame(&mut r), Some(Ok(exit.as_bytes().to_vec())), "back in step after a short length");
        assert_eq!(read_frame(&mut r), None);
    }

    /// A header line without end is read a buffer at a time and dropped, never held whole: 64 MiB
    /// of it costs a buffer's memory, and the frame after it is read.
    #[test]
    fn an_endless_header_line_is_dropped_not_kept() {
        let exit = "{\"jsonrpc\":\"2.0\",\"method\":\"exit\"}";
        let endless = std::io::repeat(b'x').take(64 << 20);
        let after = format!("\r\nContent-Length: {}\r\n\r\n{exit}", exit.len()).into_bytes();
        let mut r = std::io::BufReader::new(endless.chain(&after[..]));
        assert!(matches!(read_frame(&mut r), Some(Err(why)) if why.contains("header line longer than")));
        assert_eq!(read_frame(&mut r), Some(Ok(exit.as_bytes().to_vec())), "the frame after it");
    }
}
