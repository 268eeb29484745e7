//! `ruleweave play PACK`: an interactive session in the terminal.

use std::path::Path;
use std::process::ExitCode;
use std::sync::{Arc, Mutex};

use anyhow::Result;
use ruleweave::{Breakpoints, Candidate, ErrorKind, Session, SimilarityKind, SimilarityNote, TurnResult};
use serde_json::Value;

use super::terminal::{Input, Out, Printer, event_line};

#[derive(clap::Args)]
pub(super) struct Args {
    /// The pack (config/<PACK>.yaml).
    pack: String,
    /// Choose a session option (repeatable): --set difficulty=hard.
    #[arg(long = "set", value_name = "KEY=VALUE")]
    set: Vec<String>,
    /// Set a number of the pack's params for this run, without editing the file (repeatable):
    /// --param thresholds.medium=55.
    #[arg(long = "param", value_name = "NAME=VALUE")]
    params: Vec<String>,
    /// Show each turn's details (the score breakdown) without asking.
    #[arg(long)]
    explain: bool,
    /// Where sessions are kept (default sqlite://ruleweave.db, or RULEWEAVE_STORE).
    #[arg(long)]
    store: Option<String>,
    /// Go on with an earlier session instead of opening a new one.
    #[arg(long)]
    session: Option<String>,
    /// Who plays (at most 128 printable characters): for a pack with an experiment, the key its
    /// variant is chosen by, so a player keeps their variant from session to session.
    #[arg(long, value_name = "ID")]
    player_id: Option<String>,
    /// Do not reload the pack when its files change (by default every save that validates is
    /// live on the next turn).
    #[arg(long)]
    no_watch: bool,
}

const HELP: &str = "commands: /why (details of the last turn), /events, /state, /save NAME [--force] (as a test case), /new (start over), /break [after] NODE, /step, /continue, /set FIELD=VALUE (stepping through a turn), /quit";

pub(super) fn run(root: &Path, rt: &tokio::runtime::Runtime, args: Args) -> Result<ExitCode> {
    let config = crate::config::Config::load(root)?;
    let store = args.store.clone().unwrap_or_else(|| config.store.clone());
    let engine = rt.block_on(super::engine(root, &config, &store))?;
    super::load_pack(&engine, &args.pack)?;
    let engine = super::params_of(&engine, &args.pack, &args.params)?;
    let pack = super::load_pack(&engine, &args.pack)?;
    let options = super::options(&pack, &args.set)?;
    let session = open_session(rt, &engine, &pack, &args, &options)?;
    let standin = matches!(engine.llm(), ruleweave::LlmChoice::Standin);
    let speaker = if standin { format!("{} (stand-in)", pack.name()) } else { pack.name().to_owned() };
    println!("{} (version {}): {}", pack.name(), pack.version(), pack.description());
    println!("model: {}", super::model_banner(&engine, &pack));
    for line in super::key_lines(&config) {
        println!("{line}");
    }
    if !pack.options().is_empty() {
        println!("options: {}", session.options());
    }
    match session.turns() {
        0 => println!("session {} (go on later with --session {})", session.id(), session.id()),
        n => println!("session {} resumed after turn {n}", session.id()),
    }
    if let (Some(variant), Some(e)) = (session.variant(), pack.experiment()) {
        println!("variant {variant} of experiment `{}`", e.name);
    }
    println!("{HELP}");
    let out = Out::detect();
    let mut input = Input::detect();
    let _watcher = if args.no_watch { None } else { watch_edits(rt, &engine, pack.name(), input.printer()) };
    let mut console = Console {
        rt,
        engine: &engine,
        pack: &pack,
        options,
        session,
        speaker,
        last: None,
        explain: args.explain,
        out,
        breaks: Breakpoints::none(),
    };
    console.open();
    loop {
        let Some(line) = input.line("> ")? else {
            println!();
            return Ok(ExitCode::SUCCESS);
        };
        if console.line(line.trim())? == Flow::Quit {
            return Ok(ExitCode::SUCCESS);
        }
    }
}

/// The session `play` goes on with (`--session`) or a new one.
fn open_session(
    rt: &tokio::runtime::Runtime,
    engine: &ruleweave::Engine,
    pack: &ruleweave::Pack,
    args: &Args,
    options: &serde_json::Map<String, Value>,
) -> Result<Session> {
    let Some(id) = &args.session else {
        let how = ruleweave::OpenAs { player: args.player_id.clone(), ..ruleweave::OpenAs::default() };
        return Ok(rt.block_on(engine.open_as(&args.pack, options, how))?);
    };
    if args.player_id.is_some() {
        anyhow::bail!("--player-id chooses a new session's variant: session {id} has its own");
    }
    let s = rt.block_on(engine.resume(id))?;
    if s.pack().name() != pack.name() {
        anyhow::bail!("session {id} plays `{}`, not `{}`", s.pack().name(), pack.name());
    }
    if !args.set.is_empty() {
        anyhow::bail!("--set chooses options for a new session; session {id} keeps its own");
    }
    Ok(s)
}

/// Watches the pack's files; each reload shows as it happens, above the line being typed:
/// "pirate reloaded (version ...)", or why an edit was refused.
fn watch_edits(
    rt: &tokio::runtime::Runtime,
    engine: &ruleweave::Engine,
    name: &str,
    mut print: Printer,
) -> Option<ruleweave::reload::Watcher> {
    let store = engine.store().file().into_iter().collect::<Vec<_>>();
    match ruleweave::Watcher::start_except(engine.packs(), &store) {
        Ok(w) => {
            let (mut rx, name, root) = (engine.packs().subscribe(), name.to_owned(), engine.root().to_path_buf());
            rt.spawn(async move {
                while let Ok(e) = rx.recv().await {
                    if e.pack == name {
                        print(super::describe_reload(&e, &root));
                    }
                }
            });
            Some(w)
        }
        Err(e) => {
            println!("(not watching for edits: {e})");
            None
        }
    }
}

/// Whether the console goes on.
#[derive(PartialEq)]
enum Flow {
    Go,
    Quit,
}

/// The terminal session: the game being played and the last turn, for `/why` and `/events`.
struct Console<'a> {
    rt: &'a tokio::runtime::Runtime,
    engine: &'a ruleweave::Engine,
    pack: &'a ruleweave::Pack,
    options: serde_json::Map<String, Value>,
    session: Session,
    speaker: String,
    last: Option<TurnResult>,
    explain: bool,
    out: Out,
    /// The breakpoints the designer set: every turn and resume is sent with them.
    breaks: Breakpoints,
}

/// What a turn played in the terminal does: a new move, or going on with a held turn.
enum Go {
    Move(Value),
    Resume(Breakpoints),
}

impl Console<'_> {
    /// One line typed: a command, or a move.
    fn line(&mut self, line: &str) -> Result<Flow> {
        match line {
            // An empty line goes on from a pause (the debate's next round); elsewhere it is nothing.
            "" if self.session.held_turn().is_some() => self.held_hint(),
            "" if self.session.paused().is_some() => self.play(""),
            "" => {}
            "/quit" | "/exit" => return Ok(Flow::Quit),
            "/help" => {
                println!("{HELP}");
                self.say_what_to_type();
            }
            "/state" => println!("{}", serde_json::to_string_pretty(&self.session.state())?),
            "/why" if self.last.is_none() && self.session.turns() == 0 => {
                println!("nothing to explain yet: no turn has been played in this session");
            }
            "/why" => {
                show_details(&self.session);
                if let Some(r) = &self.last {
                    show_decisions(r);
                }
            }
            "/events" => match &self.last {
                Some(r) => r.events.iter().filter_map(event_line).for_each(|line| println!("{line}")),
                None => println!("no turn yet"),
            },
            save if save.starts_with("/save") => self.save(save.trim_start_matches("/save").trim())?,
            "/break" => self.show_breaks(),
            set if set.starts_with("/break ") => self.toggle_break(set["/break ".len()..].trim()),
            "/step" => self.step(),
            "/continue" => match self.session.held_turn() {
                Some(_) => self.go(Go::Resume(self.breaks.clone())),
                None if self.session.paused().is_some() => self.play(""),
                None => println!("nothing is paused: /break NODE, then a move, stops a turn there"),
            },
            set if set.starts_with("/set ") => self.set(set["/set ".len()..].trim()),
            "/new" => {
                self.session = self.rt.block_on(self.engine.open(self.pack.name(), &self.options))?;
                self.last = None;
                println!("new session {}", self.session.id());
                self.open();
            }
            // `/word` is a command; anything else starting with `/` is an answer.
            command if command.starts_with('/') && command[1..].chars().all(|c| c.is_ascii_alphabetic()) => {
                println!("unknown command {command}; {HELP}");
            }
            text => self.play(text),
        }
        Ok(Flow::Go)
    }

    /// `/save NAME [--force]`: the session so far as a test case, `tests/<pack>/NAME.yaml`: its
    /// inputs, the model replies it got, and the pack's output fields after each turn. A case of
    /// that name already there (hand-written, perhaps) is kept unless `--force` says otherwise.
    fn save(&mut self, args: &str) -> Result<()> {
        let (name, force) = match args.strip_suffix("--force") {
            Some(name) => (name.trim(), true),
            None => (args, false),
        };
        if name.is_empty() || !name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-') {
            println!("! /save NAME: a name of letters, digits, _ and -");
            return Ok(());
        }
        let path = self.engine.root().join("tests").join(self.pack.name()).join(format!("{name}.yaml"));
        match std::fs::symlink_metadata(&path) {
            Ok(m) if m.file_type().is_symlink() => {
                println!("! {} is a link: /save writes only files of its own", path.display());
                return Ok(());
            }
            Ok(_) if !force => {
                println!("! {} exists: /save {name} --force replaces it", path.display());
                return Ok(());
            }
            _ => {}
        }
        let rec = self.rt.block_on(ruleweave_lab::replay::Recording::from_store(self.engine, self.session.id()))?;
        let case = ruleweave_lab::cases::Case::from_recording(name, &rec, self.pack.outputs());
        ruleweave_lab::cases::write_case(&path, &case)?;
        println!(
            "saved {} turn(s) as {} (`ruleweave test {} --filter {name}` runs it)",
            case.turns.len(),
            path.display(),
            self.pack.name()
        );
        Ok(())
    }

    /// `/break`: the breakpoints set.
    fn show_breaks(&self) {
        let mut set: Vec<String> = self.breaks.before.iter().map(|n| format!("before {n}")).collect();
        set.extend(self.breaks.after.iter().map(|n| format!("after {n}")));
        match set.is_empty() {
            true => println!("no breakpoints (nodes: {})", self.pack.nodes().collect::<Vec<_>>().join(", ")),
            false => println!("breakpoints: {}", set.join(", ")),
        }
    }

    /// `/break [after] NODE`: sets a breakpoint before (or after) a node, or clears it when set.
    fn toggle_break(&mut self, args: &str) {
        let (after, node) = match args.strip_prefix("after ") {
            Some(node) => (true, node.trim()),
            None => (false, args.strip_prefix("before ").unwrap_or(args).trim()),
        };
        if !self.pack.nodes().any(|n| n == node) {
            let nodes: Vec<&str> = self.pack.nodes().collect();
            println!("{}", self.out.problem(&format!("! no node `{node}` (nodes: {})", nodes.join(", "))));
            return;
        }
        let list = if after { &mut self.breaks.after } else { &mut self.breaks.before };
        let place = if after { "after" } else { "before" };
        match list.iter().position(|n| n == node) {
            Some(i) => {
                list.remove(i);
                println!("breakpoint {place} {node} cleared");
            }
            None => {
                list.push(node.to_owned());
                println!("breakpoint {place} {node}: a turn stops there (/step, /continue go on)");
            }
        }
    }

    /// `/step`: the held turn goes on to its next node, and stops before it.
    fn step(&mut self) {
        if self.session.held_turn().is_none() {
            println!("no turn is held: /break NODE, then a move, stops a turn there");
            return;
        }
        self.go(Go::Resume(Breakpoints { step: true, ..self.breaks.clone() }));
    }

    /// `/set FIELD=VALUE`: sets a state field by hand (VALUE as JSON, else as text), between turns
    /// or while a turn is held.
    fn set(&mut self, args: &str) {
        let Some((field, value)) = args.split_once('=') else {
            println!("{}", self.out.problem("! /set FIELD=VALUE (VALUE as JSON: 95, true, \"text\"; else text)"));
            return;
        };
        let (field, value) = (field.trim(), value.trim());
        let value = serde_json::from_str(value).unwrap_or_else(|_| Value::String(value.to_owned()));
        let mut set = serde_json::Map::new();
        set.insert(field.to_owned(), value.clone());
        match self.rt.block_on(self.session.edit(set)) {
            Ok(n) => println!("{field} = {value} (checkpoint {n}, an edit)"),
            Err(e) => println!("{}", self.out.problem(&format!("! {}", e.detail()))),
        }
    }

    /// What to type while a turn is held.
    fn held_hint(&self) {
        if let (Some(turn), Some(p)) = (self.session.held_turn(), self.session.paused()) {
            println!("turn {turn} is held {p}: /step, /continue, /set FIELD=VALUE, /state");
        }
    }

    /// A move: a JSON map of input fields, or a line the pack reads (its `typed` script, or its
    /// one text field).
    fn play(&mut self, text: &str) {
        if self.session.held_turn().is_some() {
            self.held_hint();
            return;
        }
        let input = if text.starts_with('{') {
            super::parse_value(text)
        } else {
            self.session.input_from(Value::String(text.to_owned())).map_err(anyhow::Error::from)
        };
        match input {
            Ok(i) => self.play_input(i),
            Err(e) => match e.downcast_ref::<ruleweave::Error>() {
                Some(refused) if refused.is_refusal() => self.refused(refused),
                _ => println!("{}", self.out.problem(&format!("! {e:#}"))),
            },
        }
    }

    /// A move the pack refused, as the player reads it: the pack's words (what was wrong, what to
    /// type) and the pack's input help; nothing of the script that said it.
    fn refused(&self, e: &ruleweave::Error) {
        println!("{}", self.out.problem(&self.out.wrap("  ", 2, e.detail(), 2)));
        self.say_what_to_type();
    }

    /// The pack's input help (`display.input_help`), when it has one.
    fn say_what_to_type(&self) {
        if let Some(help) = self.pack.input_help() {
            println!("{}", self.out.quiet(&self.out.wrap("  type: ", 8, help, 8)));
        }
    }

    /// Plays `input` as a turn and shows it.
    fn play_input(&mut self, input: Value) {
        self.go(Go::Move(input))
    }

    /// Plays a move, or goes on with a held turn, held at the breakpoints set; shows the turn.
    fn go(&mut self, what: Go) {
        let streams = !self.session.pack().streamed_nodes().is_empty();
        let stream = Arc::new(Mutex::new(Streaming { out: self.out, ..Streaming::default() }));
        let sink = streams.then(|| {
            let sink_stream = stream.clone();
            Arc::new(move |e: &ruleweave::Event| {
                sink_stream.lock().unwrap_or_else(|p| p.into_inner()).show(e);
            }) as ruleweave::EventSink
        });
        let result = match what {
            Go::Move(input) => self.rt.block_on(self.session.turn_breaking(input, self.breaks.clone(), sink)),
            Go::Resume(breaks) => self.rt.block_on(self.session.resume(None, breaks, sink)),
        };
        if streams {
            stream.lock().unwrap_or_else(|p| p.into_inner()).end();
        }
        let streamed = std::mem::take(&mut *stream.lock().unwrap_or_else(|p| p.into_inner()));
        match result {
            Ok(r) => {
                show_turn(&self.out, &self.speaker, &r, &streamed);
                if self.explain {
                    show_details(&self.session);
                    show_decisions(&r);
                }
                self.last = Some(r);
            }
            Err(e) if e.kind() == ErrorKind::Finished => {
                println!("{}", self.out.problem(&format!("! {} (/new starts a new game)", e.detail())))
            }
            Err(e) if e.is_refusal() => self.refused(&e),
            Err(e) => {
                let why = crate::diagnostics::render(&e, self.engine.root());
                print!("{}", self.out.problem(&format!("! the turn failed, nothing changed:\n{why}")))
            }
        }
    }
}

/// What the pack shows while a turn runs (`display.stream`): each speech as it is written, under
/// its speaker, and the turn's warnings as they happen (a speech sent back).
#[derive(Default)]
struct Streaming {
    out: Out,
    /// The call whose speech is being shown (`speak`, or `content[2]` for a map node's item).
    node: Option<String>,
    /// Each speech shown, `speaker: text`, and the warnings shown.
    speeches: Vec<String>,
    notes: Vec<String>,
}

impl Streaming {
    fn show(&mut self, e: &ruleweave::Event) {
        use std::io::Write as _;
        match e {
            ruleweave::Event::Speech { node, speaker, text, start } => {
                if *start || self.node.as_deref() != Some(node) {
                    self.end();
                    let who = speaker.as_deref().unwrap_or(node);
                    print!("{} › ", self.out.speaker(who));
                    self.node = Some(node.clone());
                    self.speeches.push(format!("{who}: "));
                }
                print!("{text}");
                if let Some(last) = self.speeches.last_mut() {
                    last.push_str(text);
                }
            }
            ruleweave::Event::Log { node, level, message } if level == "warn" => {
                self.end();
                let note = format!("{node}: {message}");
                println!("{}", self.out.quiet(&format!("  ({note})")));
                self.notes.push(note);
            }
            _ => return,
        }
        let _ = std::io::stdout().flush();
    }

    fn end(&mut self) {
        if self.node.take().is_some() {
            println!();
        }
    }

    /// What streamed, as one text to compare with the turn's reply.
    fn text(&self) -> String {
        self.speeches.iter().map(|s| s.trim()).collect::<Vec<_>>().join("\n\n")
    }
}

impl Console<'_> {
    /// The game's opening: a session that opens by playing an input (a party's first question)
    /// plays it; one that opens with a question or a hint shows it; a resumed one shows where it
    /// stands.
    fn open(&mut self) {
        let view = self.session.view();
        if let Some(play) = view.opening.as_ref().and_then(|o| o.play.clone()) {
            self.play_input(play);
            return self.say_what_to_type();
        }
        if let Some(reply) = &view.reply {
            say(&self.out, &self.speaker, reply);
        }
        if self.session.turns() > 0
            && let Some(status) = &view.status
        {
            println!("{}", self.out.quiet(&self.out.wrap("  ", 2, status, 4)));
        }
        self.say_what_to_type();
    }
}

/// `speaker › text`, wrapped under itself.
fn say(out: &Out, speaker: &str, text: &str) {
    let first = format!("{} › ", out.speaker(speaker));
    let width = speaker.chars().count() + 3;
    println!("{}", out.wrap(&first, width, text, width.min(12)));
}

/// A turn as a person sees it: the reply (unless it streamed just so), the warnings that did not
/// stream, the status line, and the closing words of a finished session.
fn show_turn(out: &Out, speaker: &str, r: &TurnResult, streamed: &Streaming) {
    if let Some(p) = r.paused.as_ref().filter(|p| p.breakpoint) {
        // The turn is under way: no reply yet, only where it stands.
        let next = match (&p.before, p.next.is_empty()) {
            (Some(_), _) => String::new(),
            (None, true) => "; next: its end".to_owned(),
            (None, false) => format!("; next: {}", p.next.join(", ")),
        };
        println!("{}", out.quiet(&format!("  ‖ turn {} held {p}{next}", r.turn)));
        println!("{}", out.quiet("    /step, /continue, /set FIELD=VALUE, /state"));
        return;
    }
    let d = &r.display;
    let reply = d.reply.clone().unwrap_or_else(|| r.output.to_string());
    if streamed.speeches.is_empty() || squash(&streamed.text()) != squash(&reply) {
        say(out, speaker, &reply);
    }
    for note in d.notes.iter().filter(|n| !streamed.notes.contains(n)) {
        println!("{}", out.problem(&out.wrap("  ! ", 4, note, 4)));
    }
    // From the first edit on, the state is not what the turns alone made: said beside the status.
    let edited = r.edited_turn.map(|t| format!("state edited at turn {t}"));
    match (&d.status, &r.paused) {
        (Some(status), _) => {
            let line = match &edited {
                Some(e) => format!("{status} · {e}"),
                None => status.clone(),
            };
            println!("{}", out.quiet(&out.wrap("  ", 2, &line, 4)))
        }
        (None, Some(p)) if !p.breakpoint => {
            println!("  (paused {p}; your next move goes on with {})", p.next.join(", "))
        }
        (None, _) => {}
    }
    if let (None, Some(e)) = (&d.status, &edited) {
        println!("{}", out.quiet(&format!("  {e}")));
    }
    if r.finished {
        println!("{}", d.finished.as_deref().unwrap_or("The session is finished."));
    }
}

/// Text with its runs of blank space made one space, to compare what streamed with the reply.
fn squash(text: &str) -> String {
    text.split_whitespace().collect::<Vec<_>>().join(" ")
}

fn show_details(session: &Session) {
    match session.display("details") {
        Some(Ok(s)) => println!("{}", s.trim()),
        Some(Err(e)) => println!("(display.details failed: {e})"),
        None => println!("{}", serde_json::to_string_pretty(&session.output()).unwrap_or_default()),
    }
}

/// How the selection compared texts: `similarity by embeddings (model, 12 texts, 9 cached)`, or
/// `by words`, with the reason when embeddings were asked for and not used.
fn similarity(s: &SimilarityNote) -> String {
    match (s.kind, &s.why) {
        (SimilarityKind::Embedding, _) => format!(
            "similarity by embeddings ({}, {} texts, {} cached)",
            s.model.as_deref().unwrap_or("?"),
            s.texts.unwrap_or(0),
            s.cached.unwrap_or(0)
        ),
        (SimilarityKind::Lexical, Some(why)) => format!("similarity by words (embeddings not used: {why})"),
        (SimilarityKind::Lexical, None) => "similarity by words".to_owned(),
    }
}

/// Each selector decision of a turn, candidate by candidate: vetoes with their reasons, or each
/// scorer's raw score × weight, the sum × the phase multiplier, the final score; the winner marked.
fn show_decisions(r: &TurnResult) {
    for e in &r.events {
        let ruleweave::Event::Decision { node, breakdown: b } = e else { continue };
        println!("{node}: {} phase (turn count {}), {}", b.phase, b.turn_count, similarity(&b.similarity));
        if !b.unavailable.is_empty() {
            println!("   (off in this phase: {})", b.unavailable.join(", "));
        }
        if let Some(why) = &b.fallback {
            println!("   {why}");
        }
        for (i, c) in b.candidates.iter().enumerate() {
            let mark = if b.winner == Some(i) { "→" } else { " " };
            println!(" {mark} {}", candidate_line(c));
        }
    }
}

/// One candidate of a decision: what vetoed it, or how its score adds up.
fn candidate_line(c: &Candidate) -> String {
    let what = format!("{} · {}", c.strategy, c.focus["focus_description"].as_str().unwrap_or(""));
    if c.vetoed {
        let (scorer, why) = c.vetoes.last().map_or(("?", ""), |v| (v.scorer.as_str(), v.reasoning.as_str()));
        return format!("{what}: vetoed by {scorer} ({why})");
    }
    let parts: Vec<String> =
        c.scores.iter().flatten().map(|s| format!("{} {:.2}×{:.2}", s.scorer, s.raw_score, s.weight)).collect();
    format!(
        "{what}: {:.3} × {:.2} = {:.3}  [{}]",
        c.scorer_sum.unwrap_or(0.0),
        c.phase_multiplier.unwrap_or(0.0),
        c.final_score.unwrap_or(0.0),
        parts.join(", ")
    )
}
