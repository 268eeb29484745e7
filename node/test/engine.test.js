'use strict'
// The Node package as an app uses it: a pirate game on the stand-in, resumed in another process
// from SQLite, a batch of simulated games, a model of the app's own, a turn that leaves the
// event loop free, and bad input answered by typed errors.

const test = require('node:test')
const assert = require('node:assert/strict')
const { execFileSync } = require('node:child_process')
const fs = require('node:fs')
const os = require('node:os')
const path = require('node:path')
const rw = require('..')

const ROOT = path.resolve(__dirname, '..', '..')
const PACKAGE = path.resolve(__dirname, '..')

test('the pirate plays, resumes in another process and simulates', async () => {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'ruleweave-'))
  const store = `sqlite://${path.join(dir, 'games.db')}`
  const engine = await rw.Engine.create(ROOT, { store, model: 'standin' })
  assert.deepEqual(engine.packs(), ['debate', 'designer', 'interview', 'party', 'pirate'])
  const session = await engine.open('pirate', { difficulty: 'medium' })
  let turn
  for (const [i, move] of ['Ahoy, captain! I am the harbour master\'s daughter.', 'I sailed with your brother off Tortuga.', 'Please, I will pay you in gold doubloons.'].entries()) {
    turn = await session.turn(move)
    assert.equal(turn.turn, i + 1)
    // The captain's words are the reply; the status line says where the merit stands.
    assert.equal(turn.display.reply, turn.state.pirate_response)
    assert.ok(turn.display.reply.length > 0)
    assert.match(turn.display.status, /^merit \d+\/100, needs 60 on medium/)
    assert.ok(turn.events.some((e) => e.type === 'llm'))
  }
  // A turn written as JSON (an app's response) is the whole turn, not an empty object.
  const written = JSON.parse(JSON.stringify(turn))
  assert.deepEqual(Object.keys(written).sort(), ['display', 'events', 'finished', 'output', 'state', 'turn'])
  assert.equal(written.display.reply, turn.display.reply)
  assert.equal(await session.turns(), 3)

  // A new process (the app restarted) goes on with the stored session.
  const script = `
    const rw = require(${JSON.stringify(PACKAGE)})
    ;(async () => {
      const engine = await rw.Engine.create(${JSON.stringify(ROOT)}, { store: ${JSON.stringify(store)}, model: 'standin' })
      const s = await engine.reopen(${JSON.stringify(session.id)})
      const state = await s.state()
      console.log(await s.turns(), state.conversation_history.at(-1).content)
      console.log((await s.turn('Do you remember me, captain?')).turn)
    })()`
  const out = execFileSync(process.execPath, ['-e', script], { encoding: 'utf8', timeout: 120000 })
  assert.deepEqual(out.trim().split('\n'), [`3 ${turn.display.reply}`, '4'])

  // Two hundred simulated games: the report `ruleweave simulate --json` prints.
  const report = await engine.simulate('pirate', { games: 200, players: ['liar'], options: { difficulty: 'easy' }, seed: 'js' })
  const [liar] = report.players
  assert.deepEqual([report.pack, report.games, report.max_turns, liar.games], ['pirate', 200, 20, 200])
  const total = Object.values(liar.outcomes).reduce((sum, o) => sum + o.share, 0)
  assert.ok(Math.abs(total - 1) < 1e-9)
  assert.ok(liar.outcomes.won_agreement.share > 0.5, JSON.stringify(liar.outcomes))
})

test('a model of the app\'s own answers the judge and the captain', async () => {
  const calls = []
  const model = async (request) => {
    calls.push(request)
    if (request.profile === 'judge') {
      assert.deepEqual(request.response_format, { type: 'json_object' })
      return JSON.stringify({ total_score: 30, reasoning: 'a fine tale' })
    }
    return 'Arr, a fine tale, but my treasure stays with me.'
  }
  const engine = await rw.Engine.create(ROOT, { model })
  const turn = await (await engine.open('pirate', { difficulty: 'medium' })).turn('Ahoy! I bring word from Tortuga.')
  assert.deepEqual(calls.map((c) => c.profile), ['judge', 'pirate'])
  assert.ok(calls[0].messages.at(-1).content.includes('Ahoy! I bring word from Tortuga.'))
  assert.equal(calls[1].messages[0].role, 'system')
  assert.equal(calls[1].model, 'gpt-4o-mini')
  assert.equal(turn.display.reply, 'Arr, a fine tale, but my treasure stays with me.')
  assert.equal(turn.state.merit_score, 30)
  assert.deepEqual(turn.events.filter((e) => e.type === 'llm').map((e) => e.provider), ['node', 'node'])
})

test('a model that rejects takes the fallback path and says so', async () => {
  const engine = await rw.Engine.create(ROOT, { model: async () => { throw new Error('the model server is down') } })
  const session = await engine.open('pirate')
  const turn = await session.turn('Ahoy, captain!')
  assert.ok(turn.display.notes.join(' ').includes('the model server is down'), JSON.stringify(turn.display))
  assert.notEqual(turn.state.merit_breakdown.source, 'judge')
  // A synchronous function that throws is the same; the process is up and the session goes on.
  const sync = await rw.Engine.create(ROOT, { model: () => { throw new Error('no model today') } })
  assert.ok((await (await sync.open('pirate')).turn('Ahoy!')).display.notes.join(' ').includes('no model today'))
  assert.equal((await session.turn('Still there?')).turn, 2)
})

test('the event loop keeps serving timers during a turn', async () => {
  // The model waits for a timer of this event loop: if the turn held the loop, the timer could
  // never fire and the turn would never end.
  let ticks = 0
  const interval = setInterval(() => { ticks += 1 }, 1)
  const model = (request) => new Promise((resolve) => setTimeout(() => {
    resolve(request.profile === 'judge' ? JSON.stringify({ total_score: 5 }) : 'Arr, go on.')
  }, 20))
  try {
    const engine = await rw.Engine.create(ROOT, { model })
    const turn = await (await engine.open('pirate')).turn('Ahoy!')
    assert.equal(turn.display.reply, 'Arr, go on.')
    assert.ok(ticks > 0, 'the interval ticked while the turn ran')
  } finally {
    clearInterval(interval)
  }
})

test('turnSync plays the same turn on this thread, and is refused with a model function', async () => {
  // One session id in two engines (each its own memory store) seeds the same randomness: the
  // same moves give the same turns, played async in one and on this thread in the other.
  const moves = ['Ahoy, captain!', 'I sailed with your brother off Tortuga.']
  const a = await (await rw.Engine.create(ROOT, { model: 'standin' })).open('pirate', { difficulty: 'medium' }, { id: 'node-sync' })
  const played = []
  for (const m of moves) played.push(await a.turn(m))
  const b = await (await rw.Engine.create(ROOT, { model: 'standin' })).open('pirate', { difficulty: 'medium' }, { id: 'node-sync' })
  const synced = moves.map((m) => b.turnSync(m))
  assert.deepEqual(synced.map((t) => [t.turn, t.display.reply, t.display.status]), played.map((t) => [t.turn, t.display.reply, t.display.status]))
  assert.match(synced[1].display.status, /^merit \d+\/100, needs 60 on medium/)
  assert.equal(await b.turns(), 2)
  assert.throws(() => b.turnSync(12), (e) => e instanceof rw.InputError && e.message.includes('an input is a map of fields'))
  const s = await (await rw.Engine.create(ROOT, { model: () => 'Arr.' })).open('pirate')
  assert.throws(() => s.turnSync('Ahoy!'), (e) => e instanceof rw.InputError && e.detail.startsWith('turnSync cannot wait for a model function'))
  assert.equal((await s.turn('Ahoy!')).display.reply, 'Arr.')
})

test('bad input rejects with the typed error and its place', async () => {
  const engine = await rw.Engine.create(ROOT, { model: 'standin' })
  await assert.rejects(engine.open('no_such_pack'), (e) => e instanceof rw.NotFoundError && e.kind === 'not_found' && e.place === null)
  await assert.rejects(engine.open('pirate', { difficulty: 'impossible' }), (e) => e instanceof rw.InputError && e.detail.includes('difficulty'))
  await assert.rejects(engine.open('pirate', ['not', 'an', 'object']), rw.InputError)
  const session = await engine.open('pirate')
  await assert.rejects(session.turn(12), (e) => e instanceof rw.InputError && e.message.includes('an input is a map of fields'))
  // The party refuses a line in its own words: the detail is the player's, the flag says so.
  const party = await engine.open('party', { players: 'ana,bo' })
  await party.turn({})
  await assert.rejects(party.turn('yes'), (e) => e.refusal && e.detail.startsWith('yes is not a player'))
  // A pack that does not load names the place.
  const broken = fs.mkdtempSync(path.join(os.tmpdir(), 'ruleweave-broken-'))
  fs.mkdirSync(path.join(broken, 'config'))
  fs.writeFileSync(path.join(broken, 'config', 'broken.yaml'), 'name: broken\ngraph: [\n')
  const bad = await rw.Engine.create(broken, { model: 'standin' })
  await assert.rejects(bad.open('broken'), (e) => e instanceof rw.PackError && e.kind === 'invalid_pack' && e.place.file === 'config/broken.yaml' && e.place.line >= 2)
  // A store that cannot open, a root without packs, a model that is no model.
  await assert.rejects(rw.Engine.create(ROOT, { store: 'postgres://nobody@127.0.0.1:1/none', model: 'standin' }), rw.StoreError)
  await assert.rejects(rw.Engine.create(path.join(ROOT, 'nowhere')), rw.NotFoundError)
  await assert.rejects(rw.Engine.create(ROOT, { model: 42 }), rw.InputError)
  // Every error is a RuleweaveError and an Error; the session still plays.
  assert.ok(new rw.StoreError({ kind: 'store_error', message: '', text: '', place: null, refusal: false }) instanceof Error)
  assert.equal((await session.turn('Ahoy!')).turn, 1)
})

test('a player plays their variant and keeps it', async () => {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'ruleweave-coin-'))
  fs.cpSync(path.join(ROOT, 'tests', 'packs', 'coin'), dir, { recursive: true })
  const manifest = path.join(dir, 'config', 'coin.yaml')
  const text = fs.readFileSync(manifest, 'utf8').replace('  chance: 50\n', '  chance: 0\n')
  fs.writeFileSync(manifest, text + 'experiment:\n  name: kinder-coin\n  variants:\n' +
    '    fair: {weight: 50}\n    sure: {weight: 50, params: {chance: 100}}\n')
  const engine = await rw.Engine.create(dir, { model: 'standin' })
  const seen = new Set()
  for (let i = 0; i < 12; i++) {
    const player = `player-${i}`
    const session = await engine.open('coin', null, { player })
    assert.ok(['fair', 'sure'].includes(session.variant), session.variant)
    assert.equal((await engine.open('coin', null, { player })).variant, session.variant)
    const turn = await session.turn({ side: 'heads' })
    assert.equal(turn.state.outcome, session.variant === 'sure' ? 'won' : 'lost')
    seen.add(session.variant)
  }
  assert.deepEqual([...seen].sort(), ['fair', 'sure'])
  await assert.rejects(engine.open('coin', null, { player: 'x'.repeat(10240) }),
    (e) => e instanceof rw.InputError && e.message === 'a player is 1 to 128 characters, not 10240')
  const pirate = await (await rw.Engine.create(ROOT, { model: 'standin' })).open('pirate', null, { player: 'ada' })
  assert.equal(pirate.variant, null)
})
