'use strict'
// The Express app of node/examples, as its clients see it: a game started, moves played with the
// captain's words and the status line answered, the engine's errors as JSON with their status,
// and a game read back from the store after the app restarts.

const test = require('node:test')
const assert = require('node:assert/strict')
const fs = require('node:fs')
const os = require('node:os')
const path = require('node:path')
const { createApp } = require('../examples/express_app.js')

const ROOT = path.resolve(__dirname, '..', '..')

/** The app listening on a free port of loopback; resolves once it listens. */
async function serve (store) {
  const app = await createApp({ root: ROOT, store })
  const server = await new Promise((resolve) => { const s = app.listen(0, '127.0.0.1', () => resolve(s)) })
  const url = `http://127.0.0.1:${server.address().port}`
  const call = async (method, route, body) => {
    const r = await fetch(url + route, { method, headers: { 'content-type': 'application/json' }, body: body && JSON.stringify(body) })
    return { status: r.status, body: await r.json() }
  }
  return { call, close: () => new Promise((resolve) => server.close(resolve)) }
}

test('the Express app serves a pirate game and resumes it', async () => {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'ruleweave-express-'))
  const store = `sqlite://${path.join(dir, 'games.db')}`
  let app = await serve(store)

  let r = await app.call('POST', '/games', { pack: 'pirate', options: { difficulty: 'easy' } })
  assert.equal(r.status, 200, JSON.stringify(r.body))
  const id = r.body.id
  assert.equal(r.body.view.status, 'merit 0/100, needs 40 on easy')
  assert.equal(r.body.view.reply, null)

  r = await app.call('POST', `/games/${id}/moves`, { message: 'Ahoy, captain! I bring news from Tortuga.' })
  assert.equal(r.status, 200, JSON.stringify(r.body))
  const first = r.body
  assert.equal(first.turn, 1)
  assert.ok(first.reply.length > 0)
  assert.match(first.status, /^merit \d+\/100, needs 40 on easy$/)

  // The engine's errors are the client's to read.
  r = await app.call('POST', '/games', { pack: 'pirate', options: { difficulty: 'insane' } })
  assert.deepEqual([r.status, r.body], [422, { error: 'invalid_input', message: 'option `difficulty` must be one of easy, medium, hard, not insane' }])
  r = await app.call('POST', '/games', { pack: 'chess' })
  assert.deepEqual([r.status, r.body.error], [404, 'not_found'])
  r = await app.call('POST', '/games/no-such-game/moves', { message: 'hello' })
  assert.deepEqual([r.status, r.body], [404, { error: 'not_found', message: 'there is no session no-such-game' }])
  await app.close()

  // The app restarts: the game is read back from the store and goes on from turn 1.
  app = await serve(store)
  r = await app.call('GET', `/games/${id}`)
  assert.equal(r.status, 200, JSON.stringify(r.body))
  assert.deepEqual([r.body.turns, r.body.view.reply], [1, first.reply])
  r = await app.call('POST', `/games/${id}/moves`, { message: 'Do you remember me, captain?' })
  assert.deepEqual([r.status, r.body.turn], [200, 2])
  await app.close()
})
