'use strict'
// An Express app that serves ruleweave's packs: start a game, play a move, read where it stands.
//
//   npm install ./node express
//   RULEWEAVE_ROOT=. node node/examples/express_app.js        # http://127.0.0.1:3000
//   curl -s localhost:3000/games -H 'content-type: application/json' -d '{"pack": "pirate"}'
//   curl -s localhost:3000/games/ID/moves -H 'content-type: application/json' -d '{"message": "Ahoy!"}'
//
// One engine serves every request. A turn runs off the event loop, so the app answers other
// requests while its model calls are out; a game this process has not seen (it restarted, or
// another replica started it) is read back from the store.

const express = require('express')
const { Engine, RuleweaveError } = require('ruleweave')

// The engine's errors, as HTTP: the pack's own refusals and bad input are the client's to fix.
const STATUS = { invalid_input: 422, not_found: 404, finished: 409, conflict: 409 }

async function createApp ({ root = process.env.RULEWEAVE_ROOT || '.', store = process.env.RULEWEAVE_STORE || 'sqlite://games.db' } = {}) {
  // model: 'standin' plays offline; leave it out for the models the environment names, or pass
  // an async function of your own (see the package's README).
  const engine = await Engine.create(root, { store, model: 'standin' })
  const games = new Map()
  const game = async (id) => {
    if (!games.has(id)) games.set(id, await engine.reopen(id))
    return games.get(id)
  }

  const app = express()
  app.use(express.json())
  app.post('/games', async (req, res) => {
    const session = await engine.open(req.body.pack, req.body.options)
    games.set(session.id, session)
    res.json({ id: session.id, view: await session.view() })
  })
  app.post('/games/:id/moves', async (req, res) => {
    const turn = await (await game(req.params.id)).turn(req.body.message)
    res.json({ turn: turn.turn, ...turn.display })
  })
  app.get('/games/:id', async (req, res) => {
    const session = await game(req.params.id)
    res.json({ turns: await session.turns(), finished: await session.finished(), view: await session.view() })
  })
  // Express 5 hands a rejected handler here.
  app.use((err, req, res, next) => {
    if (!(err instanceof RuleweaveError)) return next(err)
    res.status(STATUS[err.kind] || 500).json({ error: err.kind, message: err.detail })
  })
  return app
}

module.exports = { createApp }

if (require.main === module) {
  createApp().then((app) => app.listen(3000, '127.0.0.1', () => console.log('listening on http://127.0.0.1:3000')))
}
