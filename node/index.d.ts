/** ruleweave for Node: an embeddable rules engine for LLM-driven games, in-process. */

/** A value a pack's state, output or input holds. */
export type Json = null | boolean | number | string | Json[] | { [key: string]: Json }

/** A model call as a model function receives it (OpenAI's shape, so it can be passed on). */
export interface ModelRequest {
  /** The pack's profile the call was made from (`judge`). */
  profile: string
  /** The model the profile names. */
  model: string
  /** The named provider the profile asks for, or null for the default one. */
  provider: string | null
  messages: { role: 'system' | 'user' | 'assistant'; content: string }[]
  temperature: number | null
  max_tokens: number | null
  /** `null`, `{type: 'json_object'}`, or `{type: 'json_schema', json_schema: {name, schema}}`. */
  response_format: null | { type: 'json_object' } | { type: 'json_schema'; json_schema: { name: string; schema: Json } }
}

/** Answers a model call with the reply's text; what it throws (or rejects) is the call's failure. */
export type ModelFunction = (request: ModelRequest) => string | Promise<string>

export interface EngineOptions {
  /** `"memory"` (the default), `"sqlite:///path/games.db"` or `"postgres://..."`. */
  store?: string
  /** Absent: the environment's provider (`OPENAI_API_KEY`, `RULEWEAVE_LLM`) or the stand-ins. */
  model?: 'standin' | ModelFunction
}

/** What a person sees. */
export interface Display {
  reply?: string | null
  status?: string | null
  details?: string | null
  /** The closing words, once the session is over. */
  finished?: string
  /** Before the first turn: how the pack opens. */
  opening?: { kind: 'question' | 'hint'; text: string | null; play: Json | null }
  /** What a person should know of the turn the templates do not say (`node: message`). */
  notes: string[]
}

/** What a turn did. Each part is made a JavaScript value when it is read (a turn's events are
 * many); `JSON.stringify(turn)` writes the whole turn. */
export interface Turn {
  /** The turn's number (1 for the first). */
  turn: number
  display: Display
  output: { [field: string]: Json }
  state: { [field: string]: Json }
  /** Everything the turn did, in order: nodes, routes, model calls (`type: 'llm'`), decisions. */
  events: ({ type: string } & { [key: string]: Json })[]
  finished: boolean
  toJSON(): { turn: number; display: Display; output: Json; state: Json; events: Json[]; finished: boolean }
}

export interface SimulateOptions {
  games?: number
  /** The pack's players to play (`liar`, `model:smuggler`); all it ships when empty. */
  players?: string[]
  seed?: string
  options?: { [option: string]: Json }
  jobs?: number
}

/** One session of a pack. */
export declare class Session {
  /** The session's id (what `engine.reopen` takes). */
  readonly id: string
  /** The variant of its pack's experiment it plays (`null` when the pack has none). */
  readonly variant: string | null
  /** Plays a turn: an object of the pack's input fields, or a line a person typed. */
  turn(input: string | { [field: string]: Json }): Promise<Turn>
  /** Plays a turn on this thread, blocking it until the turn ends: for scripts and tools, not
   * servers. Throws an `InputError` with a model function (it must run on this thread). */
  turnSync(input: string | { [field: string]: Json }): Turn
  view(): Promise<Display>
  state(): Promise<{ [field: string]: Json }>
  turns(): Promise<number>
  finished(): Promise<boolean>
}

/** A pack's games and sessions, on the packs under a root folder. */
export declare class Engine {
  /** Not called: `new Engine(...)` throws a `TypeError` naming `Engine.create`. */
  private constructor()
  static create(root: string, options?: EngineOptions): Promise<Engine>
  packs(): string[]
  describe(pack: string): { [key: string]: Json }
  /** Opens a session: `id` chooses its id (which seeds its randomness), `player` is who plays
   * (the key a pack's experiment chooses the session's variant by). */
  open(pack: string, options?: { [option: string]: Json } | null, at?: { id?: string; player?: string }): Promise<Session>
  reopen(id: string): Promise<Session>
  /** The report `ruleweave simulate --json` prints. */
  simulate(pack: string, options?: SimulateOptions): Promise<{ [key: string]: Json }>
}

/** An error of the ruleweave engine. */
export declare class RuleweaveError extends Error {
  /** The engine's error code: `invalid_pack`, `invalid_input`, `not_found`, ... */
  readonly kind: string
  /** Where in the pack: `{file, line, column}`, or null. */
  readonly place: { file: string; line: number; column: number } | null
  /** Whether the pack refused the input in its own words (`detail` is for the player). */
  readonly refusal: boolean
  /** What went wrong, without the place. */
  readonly detail: string
}
export declare class PackError extends RuleweaveError {}
export declare class InputError extends RuleweaveError {}
export declare class NotFoundError extends RuleweaveError {}
export declare class FinishedError extends RuleweaveError {}
export declare class ScriptError extends RuleweaveError {}
export declare class ModelError extends RuleweaveError {}
export declare class StoreError extends RuleweaveError {}
export declare class InternalError extends RuleweaveError {}

export declare function version(): string
