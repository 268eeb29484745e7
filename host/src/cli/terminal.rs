//! The terminal `play` talks to: line editing with history (rustyline) when a person types, plain
//! lines when input is piped; text wrapped to the terminal's width and styled when the output is
//! a terminal and `NO_COLOR` is not set, plain otherwise (so piped output stays as it was).

use std::io::{BufRead, IsTerminal, Write};

use anstyle::{AnsiColor, Style};
use rustyline::error::ReadlineError;
use rustyline::{DefaultEditor, ExternalPrinter};

/// How `play` writes.
#[derive(Debug, Clone, Copy, Default)]
pub(super) struct Out {
    /// The terminal's width, when the output is a terminal.
    width: Option<usize>,
    colour: bool,
}

impl Out {
    /// The output as it is: a terminal (wrapped; styled unless `NO_COLOR`), or a pipe (plain).
    pub(super) fn detect() -> Self {
        let terminal = std::io::stdout().is_terminal();
        let no_colour = std::env::var_os("NO_COLOR").is_some_and(|v| !v.is_empty());
        Out { width: terminal.then(textwrap::termwidth), colour: terminal && !no_colour }
    }

    fn paint(&self, style: Style, text: &str) -> String {
        if self.colour { format!("{style}{text}{style:#}") } else { text.to_owned() }
    }

    /// Who speaks.
    pub(super) fn speaker(&self, text: &str) -> String {
        self.paint(Style::new().bold().fg_color(Some(AnsiColor::Cyan.into())), text)
    }

    /// What went wrong.
    pub(super) fn problem(&self, text: &str) -> String {
        self.paint(Style::new().fg_color(Some(AnsiColor::Red.into())), text)
    }

    /// What is said about the turn (status, details).
    pub(super) fn quiet(&self, text: &str) -> String {
        self.paint(Style::new().dimmed(), text)
    }

    /// `text` wrapped at word boundaries to the terminal's width: the first line after `first`
    /// (which may be styled: `width_of_first` is how wide it shows), the next ones indented by
    /// `indent`. Unwrapped when the output is no terminal.
    pub(super) fn wrap(&self, first: &str, width_of_first: usize, text: &str, indent: usize) -> String {
        let Some(width) = self.width.filter(|w| *w > indent + 20) else { return format!("{first}{text}") };
        let pad = " ".repeat(indent);
        let mut out = String::new();
        for (n, paragraph) in text.split('\n').enumerate() {
            let lead = if n == 0 { " ".repeat(width_of_first) } else { pad.clone() };
            let options = textwrap::Options::new(width).initial_indent(&lead).subsequent_indent(&pad);
            let wrapped = textwrap::fill(paragraph, options);
            if n == 0 {
                out.push_str(first);
                out.push_str(&wrapped[width_of_first.min(wrapped.len())..]);
            } else {
                out.push('\n');
                out.push_str(&wrapped);
            }
        }
        out
    }
}

/// Where `play` reads lines.
pub(super) enum Input {
    /// A person at a terminal: line editing, history (this session's lines; ↑ recalls them).
    Editor(Box<DefaultEditor>),
    /// Piped lines.
    Plain,
}

/// Prints a line from another thread (a reload notice) without breaking the line being typed:
/// the prompt and what was typed are drawn again under it.
pub(super) type Printer = Box<dyn FnMut(String) + Send>;

impl Input {
    /// An editor when both ends are a terminal, plain lines otherwise.
    pub(super) fn detect() -> Self {
        if std::io::stdin().is_terminal() && std::io::stdout().is_terminal() {
            // A pasted line runs as a typed one: with bracketed paste, the editor would keep a
            // pasted `/why⏎` in the line, newline and all, and wait for another Enter.
            let config = rustyline::Config::builder().bracketed_paste(false).build();
            match DefaultEditor::with_config(config) {
                Ok(editor) => return Input::Editor(Box::new(editor)),
                Err(e) => eprintln!("(no line editing: {e})"),
            }
        }
        Input::Plain
    }

    /// A printer for notices that arrive while a line is typed.
    pub(super) fn printer(&mut self) -> Printer {
        if let Input::Editor(editor) = self
            && let Ok(mut p) = editor.create_external_printer()
        {
            return Box::new(move |text: String| {
                let _ = p.print(text.trim_end().to_owned());
            });
        }
        Box::new(|text: String| {
            print!("{text}");
            let _ = std::io::stdout().flush();
        })
    }

    /// The next line typed, `None` at the end of input (Ctrl-D). Ctrl-C drops the line typed.
    pub(super) fn line(&mut self, prompt: &str) -> std::io::Result<Option<String>> {
        match self {
            Input::Editor(editor) => match editor.readline(prompt) {
                Ok(line) => {
                    if !line.trim().is_empty() {
                        let _ = editor.add_history_entry(line.as_str());
                    }
                    Ok(Some(line))
                }
                Err(ReadlineError::Interrupted) => Ok(Some(String::new())),
                Err(ReadlineError::Eof) => Ok(None),
                Err(e) => Err(std::io::Error::other(e)),
            },
            Input::Plain => {
                print!("{prompt}");
                std::io::stdout().flush()?;
                let mut line = String::new();
                if std::io::stdin().lock().read_line(&mut line)? == 0 {
                    return Ok(None);
                }
                Ok(Some(line))
            }
        }
    }
}

/// A turn's event as a line a person reads (`/events`); `None` for streamed tokens (the model
/// call's line counts them).
pub(super) fn event_line(e: &ruleweave::Event) -> Option<String> {
    use ruleweave::Event;
    use ruleweave::text::decimals;
    Some(match e {
        Event::Token { .. } | Event::Speech { .. } => return None,
        Event::NodeStarted { node, step } => format!("step {step}: {node}"),
        Event::NodeFinished { node, duration_us, updates, .. } => {
            let fields: Vec<&str> = updates.fields().collect();
            let changed = if fields.is_empty() { "nothing".to_owned() } else { fields.join(", ") };
            format!("  {node} done in {} ms, updating {changed}", decimals(*duration_us as f64 / 1000.0, 1))
        }
        Event::Route { from, to } => format!("  {from} → {}", to.join(", ")),
        Event::Llm(l) => {
            let model = if l.standin {
                format!("{} (stand-in)", l.model.trim_end_matches(" (stand-in)"))
            } else {
                l.model.clone()
            };
            let tries = if l.attempts > 1 { format!(", {} attempts", l.attempts) } else { String::new() };
            let outcome = match &l.error {
                Some(why) => format!(": failed: {why}"),
                None => format!(": {} + {} tokens", l.prompt_tokens, l.completion_tokens),
            };
            format!("  model {} ({}, {model}, {} ms{tries}){outcome}", l.node, l.profile, decimals(l.latency_ms, 1))
        }
        Event::Decision { node, breakdown } => {
            let won = breakdown.winner.and_then(|i| breakdown.candidates.get(i));
            let what = match won {
                Some(c) => format!(
                    "{} · {} (score {})",
                    c.strategy,
                    c.focus["focus_description"].as_str().unwrap_or(""),
                    decimals(c.final_score.unwrap_or(0.0), 3)
                ),
                None => "no candidate survived".to_owned(),
            };
            let vetoed = breakdown.candidates.iter().filter(|c| c.vetoed).count();
            format!(
                "  decision {node} ({} phase): {what}; {} candidates, {vetoed} vetoed (/why shows each)",
                breakdown.phase,
                breakdown.candidates.len()
            )
        }
        Event::Custom { node, name, data } => format!("  {node} said {name}: {data}"),
        Event::Search { node, query, engine, results, latency_ms, error } => match error {
            Some(why) => format!("  search {node} on {engine}: {query:?} failed: {why}"),
            None => {
                format!("  search {node} on {engine}: {query:?} → {results} results ({} ms)", decimals(*latency_ms, 1))
            }
        },
        Event::Paused { before, after, next, breakpoint } => {
            let at = match (before, after) {
                (Some(n), _) => format!("before {n}"),
                (None, Some(n)) => format!("after {n}"),
                (None, None) => "at its start".to_owned(),
            };
            match breakpoint {
                true => format!("  held {at} by a breakpoint; /step or /continue goes on (next: {})", next.join(", ")),
                false => format!("  paused {at}; the next move goes on with {}", next.join(", ")),
            }
        }
        Event::Log { node, level, message } => format!("  {level} {node}: {message}"),
    })
}

#[cfg(test)]
mod tests {
    use super::Out;

    #[test]
    fn text_wraps_at_words_under_its_speaker() {
        let out = Out { width: Some(32), colour: false };
        let text = out.wrap("pirate › ", 9, "Arrr! You think an old sea wolf hands his treasure to any landlubber?", 4);
        assert_eq!(text, "pirate › Arrr! You think an old\n    sea wolf hands his treasure\n    to any landlubber?");
        assert!(text.lines().all(|l| l.chars().count() <= 32));
        let piped = Out { width: None, colour: false };
        assert_eq!(piped.wrap("› ", 2, "one long line", 2), "› one long line", "a pipe gets the text as it is");
    }

    #[test]
    fn colour_only_when_asked() {
        let plain = Out { width: None, colour: false };
        assert_eq!(plain.speaker("pirate"), "pirate");
        let styled = Out { width: None, colour: true };
        assert!(styled.speaker("pirate").starts_with('\u{1b}') && styled.speaker("pirate").contains("pirate"));
    }
}
