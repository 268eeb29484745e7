//! The long runs a designer asks for in words (a tune, a sweep, a batch on real models), parsed once for every face that
//! takes them: `ruleweave tune` and `simulate --sweep` read them from flags, a server from a
//! request's body, and both get the same run and the same refusals. A refusal names the field it
//! is about ([`Refused::field`]), which each face writes its own way (`--vary`, `` `vary` ``).

use std::collections::BTreeMap;
use std::sync::atomic::AtomicBool;

use serde_json::{Map, Value};

use ruleweave::{Engine, Error, Result};

use crate::simulate::tune::{self, Range, Sweep, SweepPoint, SweepReport, Target, Tune, TuneProgress, TuneReport};
use crate::simulate::{Batch, Plan, Price, Report, Rules};

/// What a request got wrong: the field it is about (none when it is about the whole run), and why.
#[derive(Debug)]
pub struct Refused {
    /// The field, as a request's body names it (`vary`, `games_max`).
    pub field: Option<&'static str>,
    /// Why (boxed: a refusal is small beside the run it refuses).
    pub error: Box<Error>,
    /// Whether the request is of the wrong shape (a count out of range, a seed too long, no
    /// range), as against naming what the pack does not have or take; a shape's error says
    /// what the field is (`is at most 200 characters`).
    pub shape: bool,
}

impl Refused {
    fn at(field: &'static str) -> impl FnOnce(Error) -> Refused {
        move |error| Refused { field: Some(field), error: Box::new(error), shape: false }
    }

    fn shape(field: &'static str, says: String) -> Refused {
        Refused { field: Some(field), error: Box::new(Error::input(says)), shape: true }
    }

    /// The refusal in words, the field written by `name` (`|f| format!("--{f}")` for a flag):
    /// `` `seed` is at most 200 characters ``, `--target: a target is PLAYER:OUTCOME=SHARE ...`.
    pub fn message(&self, name: impl Fn(&str) -> String) -> String {
        match (self.field, self.shape) {
            (Some(field), true) => format!("{} {}", name(field), self.error.detail()),
            (Some(field), false) => format!("{}: {}", name(field), self.error.detail()),
            (None, _) => self.error.detail().to_owned(),
        }
    }
}

impl From<Error> for Refused {
    fn from(error: Error) -> Self {
        Refused { field: None, error: Box::new(error), shape: false }
    }
}

/// The seed a run takes when it is given none.
pub const SEED: &str = "ruleweave";

/// The longest seed a request may give (a seed names a run; it is no place for a payload).
pub const MOST_SEED: usize = 200;

/// The most games per player at each value a sweep plays.
pub const MOST_GAMES: u32 = 100_000;

/// A tune as it is asked for: the parameter and its range, the share wanted, and the games.
#[derive(Debug, Clone)]
pub struct TuneAsked<'a> {
    /// The pack.
    pub pack: &'a str,
    /// `NAME=LO..HI`.
    pub vary: &'a str,
    /// `PLAYER:OUTCOME=SHARE`.
    pub target: &'a str,
    /// How close to the share is close enough.
    pub within: f64,
    /// What seeds the games.
    pub seed: &'a str,
    /// Session options every game opens with.
    pub options: Map<String, Value>,
    /// The most games one value gets.
    pub games_max: u32,
    /// The most games the whole search plays.
    pub budget: u64,
    /// Games played at once (none: one per core).
    pub jobs: Option<usize>,
}

impl TuneAsked<'_> {
    /// The tune, checked against `engine`'s copy of the pack as a tune checks it before its first
    /// game: the range within the parameter's bounds, an outcome the pack declares, a player it has.
    pub fn check(self, engine: &Engine) -> std::result::Result<Tune, Refused> {
        let vary: Range = self.vary.parse().map_err(Refused::at("vary"))?;
        if vary.step.is_some() {
            return Err(Refused::at("vary")(Error::input(
                "a tune takes NAME=LO..HI: it chooses the values itself (a step is for a sweep)",
            )));
        }
        let target = Target::parse(self.target, self.within).map_err(Refused::at("target"))?;
        check_seed(self.seed)?;
        if self.games_max < tune::FIRST_GAMES {
            let says = format!("is at least {}, not {}", tune::FIRST_GAMES, self.games_max);
            return Err(Refused::shape("games_max", says));
        }
        let tune = Tune {
            pack: self.pack.to_owned(),
            vary,
            target,
            seed: self.seed.to_owned(),
            options: self.options,
            games_max: self.games_max,
            budget: self.budget,
            jobs: self.jobs,
            spend: None,
        };
        tune::check(engine, &tune)?;
        Ok(tune)
    }
}

/// A sweep as it is asked for: one range or two, and the games at each value.
#[derive(Debug, Clone)]
pub struct SweepAsked<'a> {
    /// The pack.
    pub pack: &'a str,
    /// One or two `NAME=LO..HI[:STEP]`.
    pub ranges: &'a [String],
    /// Games per player at each value.
    pub games: u32,
    /// The players (none: every player the pack ships).
    pub players: &'a [String],
    /// What seeds the games.
    pub seed: &'a str,
    /// Session options every game opens with.
    pub options: Map<String, Value>,
    /// Games played at once (none: one per core).
    pub jobs: Option<usize>,
    /// What models' tokens cost.
    pub prices: BTreeMap<String, Price>,
}

impl SweepAsked<'_> {
    /// The sweep, its ranges read and its games counted; the values are checked against the pack
    /// by [`Sweep::values`].
    pub fn check(self) -> std::result::Result<Sweep, Refused> {
        match self.ranges.len() {
            0 => return Err(Refused::shape("sweep", "names no range to play".into())),
            1 | 2 => {}
            n => return Err(Refused::shape("sweep", format!("varies one parameter, or two (a grid), not {n}"))),
        }
        let ranges =
            self.ranges.iter().map(|r| r.parse()).collect::<Result<Vec<Range>>>().map_err(Refused::at("sweep"))?;
        if !(1..=MOST_GAMES).contains(&self.games) {
            return Err(Refused::shape("games", format!("is 1 to {MOST_GAMES} per player, not {}", self.games)));
        }
        check_seed(self.seed)?;
        let batch = Batch {
            pack: self.pack.to_owned(),
            games: self.games,
            players: self.players.to_vec(),
            seed: self.seed.to_owned(),
            options: self.options,
            jobs: self.jobs,
            prices: self.prices,
        };
        Ok(Sweep { batch, ranges })
    }
}

/// A seed, refused when longer than [`MOST_SEED`].
pub fn check_seed(seed: &str) -> std::result::Result<(), Refused> {
    match seed.chars().count() > MOST_SEED {
        true => Err(Refused::shape("seed", format!("is at most {MOST_SEED} characters"))),
        false => Ok(()),
    }
}

/// A long run, checked and ready to play: what a server keeps as a job.
#[derive(Debug, Clone)]
pub enum JobSpec {
    /// The value of a pack's number that gives a share.
    Tune(Tune),
    /// The same games at each value of one or two of a pack's numbers.
    Sweep(Sweep),
    /// A batch of games whose model calls are paid from `spend` (a batch on real models, too
    /// long to wait for in one request).
    Simulate {
        /// The games.
        batch: Batch,
        /// The account its real models are paid from.
        spend: std::sync::Arc<crate::spend::Spend>,
    },
}

/// A job's kind, as a job's record names it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum JobKind {
    /// A [`JobSpec::Tune`].
    Tune,
    /// A [`JobSpec::Sweep`].
    Sweep,
    /// A [`JobSpec::Simulate`].
    Simulate,
}

impl JobKind {
    /// Its name in a job's record: `tune`, `sweep`, `simulate`.
    pub fn name(self) -> &'static str {
        match self {
            JobKind::Tune => "tune",
            JobKind::Sweep => "sweep",
            JobKind::Simulate => "simulate",
        }
    }

    /// The kind a record names; none for a name this build does not know.
    pub fn named(name: &str) -> Option<JobKind> {
        [JobKind::Tune, JobKind::Sweep, JobKind::Simulate].into_iter().find(|k| k.name() == name)
    }
}

/// A finished job's answer, by its kind.
#[derive(Debug, Clone, serde::Serialize, serde::Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(untagged)]
pub enum JobAnswer {
    /// A tune's.
    Tune(Box<TuneReport>),
    /// A sweep's.
    Sweep(SweepReport),
    /// A batch's.
    Report(Box<Report>),
}

impl JobAnswer {
    /// A job's stored answer read back as its kind's.
    pub fn read(kind: JobKind, answer: Value) -> Option<JobAnswer> {
        match kind {
            JobKind::Tune => serde_json::from_value(answer).ok().map(|r| JobAnswer::Tune(Box::new(r))),
            JobKind::Sweep => serde_json::from_value(answer).ok().map(JobAnswer::Sweep),
            JobKind::Simulate => serde_json::from_value(answer).ok().map(|r| JobAnswer::Report(Box::new(r))),
        }
    }

    /// Carries `headline`, the kept calibration of its pack version (a sweep's answer has no
    /// place for one).
    pub fn with_calibration(mut self, headline: Option<crate::calibrate::Headline>) -> JobAnswer {
        match &mut self {
            JobAnswer::Tune(r) => r.calibration = headline,
            JobAnswer::Report(r) => r.calibration = headline,
            JobAnswer::Sweep(_) => {}
        }
        self
    }
}

/// Where a running job is: the value it plays (a tune plays one at a time) and the games played.
pub type Said<'a> = &'a (dyn Fn(Option<f64>, u64) + Sync);

impl JobSpec {
    /// Its kind.
    pub fn kind(&self) -> JobKind {
        match self {
            JobSpec::Tune(_) => JobKind::Tune,
            JobSpec::Sweep(_) => JobKind::Sweep,
            JobSpec::Simulate { .. } => JobKind::Simulate,
        }
    }

    /// Plays its games on `engine` (on the caller's thread, which may block, with `handle`'s
    /// runtime for the games), saying after each where it is, until done or `stop`.
    pub fn run(
        &self,
        handle: &tokio::runtime::Handle,
        engine: &Engine,
        said: Said<'_>,
        stop: &AtomicBool,
    ) -> Result<JobAnswer> {
        match self {
            JobSpec::Tune(t) => {
                let seen = |p: &TuneProgress| said(Some(p.value), t.budget - p.games_left);
                Ok(JobAnswer::Tune(Box::new(tune::tune(handle, engine, t, &seen, stop)?)))
            }
            JobSpec::Sweep(s) => {
                let played = std::sync::atomic::AtomicU64::new(0);
                let tick = || said(None, played.fetch_add(1, std::sync::atomic::Ordering::Relaxed) + 1);
                let points: Vec<SweepPoint> = tune::sweep(handle, engine, s, &tick, stop)?;
                let max_turns = engine.packs().get(&s.batch.pack)?.simulate().max_turns;
                Ok(JobAnswer::Sweep(s.report(max_turns, points)))
            }
            JobSpec::Simulate { batch, spend } => {
                let pack = engine.packs().get(&batch.pack)?;
                let players = crate::simulate::players(engine, &pack, &batch.players)?;
                let plan = Plan { spend: Some(spend.clone()), ..Plan::of(batch, &pack) };
                let rules = Rules { engine, options: &batch.options };
                let played = std::sync::atomic::AtomicU64::new(0);
                let tick = || said(None, played.fetch_add(1, std::sync::atomic::Ordering::Relaxed) + 1);
                let games = crate::simulate::play(handle, &plan, &players, &rules, &batch.prices, &tick, stop);
                if stop.load(std::sync::atomic::Ordering::Relaxed) {
                    return Err(Error::input("the batch was stopped before its games were done"));
                }
                if let Some(e) = games.iter().find_map(|p| p.error.clone()) {
                    return Err(e.error);
                }
                let mut report = crate::simulate::report(&plan, &games);
                report.models = crate::simulate::models(engine, &pack);
                Ok(JobAnswer::Report(Box::new(report)))
            }
        }
    }
}
