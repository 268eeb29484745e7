'use strict'
// ruleweave for Node: the engine in-process. The native part (binding.js, built by napi-rs)
// plays turns on the addon's own threads; this file gives it its JavaScript shape: an options
// object, promises for everything that plays, loads or simulates, and the engine's errors as
// `Error` subclasses carrying `kind` (the engine's error code), `place` and `refusal`.

const native = require('./binding.js')

/** An error of the ruleweave engine. */
class RuleweaveError extends Error {
  constructor(body) {
    super(body.text)
    this.name = new.target.name
    /** The engine's error code: `invalid_pack`, `invalid_input`, `not_found`, ... */
    this.kind = body.kind
    /** Where in the pack: `{file, line, column}`, or `null`. */
    this.place = body.place
    /** Whether the pack refused the input in its own words (`detail` is for the player). */
    this.refusal = body.refusal
    /** What went wrong, without the place. */
    this.detail = body.message
  }
}
class PackError extends RuleweaveError {}
class InputError extends RuleweaveError {}
class NotFoundError extends RuleweaveError {}
class FinishedError extends RuleweaveError {}
class ScriptError extends RuleweaveError {}
class ModelError extends RuleweaveError {}
class StoreError extends RuleweaveError {}
class InternalError extends RuleweaveError {}

// By the class the engine puts each error in (its `class`): the engine groups its error kinds
// once, for every package.
const CLASSES = { PackError, InputError, NotFoundError, FinishedError, ScriptError, ModelError, StoreError, InternalError }

const MARK = 'ruleweave-error:'

/** The native error `e` as the engine's typed error (any other error as it is). */
function typed(e) {
  if (e && typeof e.message === 'string' && e.message.startsWith(MARK)) {
    const body = JSON.parse(e.message.slice(MARK.length))
    return new (CLASSES[body.class] || RuleweaveError)(body)
  }
  return e
}

async function call(f) {
  try {
    return await f()
  } catch (e) {
    throw typed(e)
  }
}

function sync(f) {
  try {
    return f()
  } catch (e) {
    throw typed(e)
  }
}

/** One session of a pack: `await session.turn(input)` plays a turn. */
class Session {
  constructor(inner) {
    this._inner = inner
    /** The session's id (what `engine.reopen` takes). */
    this.id = inner.id
    /** The variant of its pack's experiment it plays (`null` when the pack has none). */
    this.variant = inner.variant ?? null
  }

  /** Plays a turn: an object of the pack's input fields, or a line a person typed. Resolves to
   * the turn: `turn`, `display`, `output`, `state`, `events`, `finished`, each made a JavaScript
   * value when it is read (`JSON.stringify(turn)` writes it whole). */
  turn(input) {
    return call(() => this._inner.turn(input))
  }

  /** Plays a turn on this thread, blocking it until the turn ends (no thread is woken: for
   * scripts and tools that play turn after turn, not for a server, whose other requests would
   * wait). Refused with a model function, which this thread must be free to run. */
  turnSync(input) {
    return sync(() => this._inner.turnSync(input))
  }

  /** What a person sees now (before the first turn: the opening). */
  view() {
    return call(() => this._inner.view())
  }

  /** The session's state. */
  state() {
    return call(() => this._inner.state())
  }

  /** Turns played. */
  turns() {
    return call(() => this._inner.turns())
  }

  /** Whether the session is over. */
  finished() {
    return call(() => this._inner.finished())
  }
}

// What `Engine.create` passes its constructor: an engine is made only there.
const MADE = Symbol('ruleweave.Engine.create')

/** A pack's games and sessions, on the packs under a root folder. Make one with
 * `await Engine.create(root, {store, model})`: opening its store is asynchronous. */
class Engine {
  constructor(inner, made) {
    if (made !== MADE) {
      throw new TypeError('an Engine is made with `await Engine.create(root, options)` (opening its store is asynchronous), not `new Engine(...)`')
    }
    this._inner = inner
  }

  /** An engine on the packs under `root`. `store`: `"memory"` (the default),
   * `"sqlite:///path/games.db"` or `"postgres://..."`. `model`: absent for the environment's
   * provider (`OPENAI_API_KEY`, `RULEWEAVE_LLM`) or the packs' stand-ins, `"standin"`, or a
   * function (or async function) that gets each model call's request and returns the reply's
   * text; what it throws is the call's failure, which the node's fallback answers. */
  static async create(root, { store = 'memory', model } = {}) {
    let kind = 'env'
    let func
    if (model === 'standin') kind = 'standin'
    else if (typeof model === 'function') {
      kind = 'function'
      func = async (text) => {
        const reply = await model(JSON.parse(text))
        if (typeof reply !== 'string') throw new TypeError(`the model function returned ${JSON.stringify(reply)}, not the reply's text (a string)`)
        return reply
      }
    } else if (model !== undefined && model !== null) kind = String(model)
    const inner = await call(() => native.NativeEngine.create(String(root), store, kind, func))
    return new Engine(inner, MADE)
  }

  /** The names of the packs under the root. */
  packs() {
    return sync(() => this._inner.packs())
  }

  /** What a pack declares: options, input, output, state fields, what to type. */
  describe(pack) {
    return sync(() => this._inner.describe(pack))
  }

  /** Opens a session of `pack` (its options, and an id of your choosing, which also seeds its
   * randomness). */
  async open(pack, options, { id, player } = {}) {
    return new Session(await call(() => this._inner.open(pack, options ?? null, id, player)))
  }

  /** A stored session, by its id. */
  async reopen(id) {
    return new Session(await call(() => this._inner.reopen(id)))
  }

  /** Plays `games` games per player; resolves to the report `ruleweave simulate --json` prints. */
  simulate(pack, { games = 100, players = [], seed = 'ruleweave', options, jobs } = {}) {
    return call(() => this._inner.simulate(pack, games, players, seed, options ?? null, jobs))
  }
}

module.exports = {
  Engine,
  Session,
  RuleweaveError,
  PackError,
  InputError,
  NotFoundError,
  FinishedError,
  ScriptError,
  ModelError,
  StoreError,
  InternalError,
  version: native.version,
}
