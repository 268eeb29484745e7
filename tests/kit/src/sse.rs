//! Server-sent events as a client reads them: fields per line, an event at each blank line, a
//! `data:` on several lines joined with newlines, comments (`: keep-alive`) skipped.

/// One event: its name (empty for an unnamed one, as the chat face sends them) and its data.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Event {
    pub name: String,
    pub data: String,
}

/// Reads a stream as it arrives: [`Parser::feed`] each piece, and take the events it completed
/// one by one with [`Parser::next`]. Pieces are bytes as they came off the wire: a character cut
/// between two pieces is whole again by the time its event is read.
#[derive(Debug, Default)]
pub struct Parser {
    buffer: Vec<u8>,
}

impl Parser {
    /// Adds the next piece of the stream.
    pub fn feed(&mut self, piece: &[u8]) {
        self.buffer.extend_from_slice(piece);
    }

    /// The next complete event, when the stream has sent one.
    #[allow(clippy::should_implement_trait)]
    pub fn next(&mut self) -> Option<Event> {
        loop {
            // An event ends at a blank line (`\n\n`, or `\r\n\r\n`): ASCII, so the bytes before it are
            // whole characters.
            let (end, gap) = [&b"\n\n"[..], &b"\r\n\r\n"[..]]
                .iter()
                .filter_map(|sep| self.buffer.windows(sep.len()).position(|w| w == *sep).map(|at| (at, sep.len())))
                .min()?;
            let block: Vec<u8> = self.buffer.drain(..end + gap).collect();
            if let Some(e) = event(&String::from_utf8_lossy(&block[..end])) {
                return Some(e);
            }
        }
    }
}

/// Every event of a whole stream.
pub fn events(text: &str) -> Vec<Event> {
    let mut parser = Parser::default();
    parser.feed(text.as_bytes());
    let mut out: Vec<Event> = std::iter::from_fn(|| parser.next()).collect();
    // A stream may end without the blank line after its last event.
    out.extend(event(&String::from_utf8_lossy(&parser.buffer)));
    out
}

/// The event of one block of lines, unless it holds no data (a comment, a keep-alive).
fn event(block: &str) -> Option<Event> {
    let mut name = String::new();
    let mut data: Option<String> = None;
    for line in block.lines() {
        let (field, value) = line.split_once(':').unwrap_or((line, ""));
        let value = value.strip_prefix(' ').unwrap_or(value);
        match field {
            "event" => name = value.to_owned(),
            "data" => match &mut data {
                Some(d) => {
                    d.push('\n');
                    d.push_str(value);
                }
                None => data = Some(value.to_owned()),
            },
            _ => {}
        }
    }
    Some(Event { name, data: data? })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn events_come_whole_whatever_the_pieces() {
        let stream =
            ": keep-alive\n\nevent: token\ndata: {\"text\": \"A\"}\n\ndata: [DONE]\n\nevent: x\ndata: a\ndata: b\n";
        let whole = events(stream);
        assert_eq!(
            whole,
            [
                Event { name: "token".into(), data: "{\"text\": \"A\"}".into() },
                Event { name: String::new(), data: "[DONE]".into() },
                Event { name: "x".into(), data: "a\nb".into() },
            ]
        );
        let mut parser = Parser::default();
        let mut pieces = Vec::new();
        for piece in stream.as_bytes().chunks(3) {
            parser.feed(piece);
            pieces.extend(std::iter::from_fn(|| parser.next()));
        }
        assert_eq!(pieces, whole[..2]);
        // A character cut between two pieces is whole in its event.
        let mut parser = Parser::default();
        let bytes = "data: żółw\r\n\r\n".as_bytes();
        parser.feed(&bytes[..7]);
        assert_eq!(parser.next(), None);
        parser.feed(&bytes[7..]);
        assert_eq!(parser.next(), Some(Event { name: String::new(), data: "żółw".into() }));
    }
}
