'use strict'
// The pirate turn of `cargo bench -p ruleweave --bench bindings`, played through the Node
// package: a session on the stand-in model in memory, each turn a line a person typed, its
// display read after it. Prints the median time per turn over ROUNDS rounds, in µs: awaited
// (`turn`, played on a blocking thread: a thread woken each way) and on Node's thread (`turnSync`).
//
//   node bench/bindings.js [ROUNDS] [TURNS_PER_ROUND]

const fs = require('node:fs')
const path = require('node:path')
const { Engine } = require(process.env.RULEWEAVE_NODE_PACKAGE || path.resolve(__dirname, '..', 'node'))

const ROOT = path.resolve(__dirname, '..')
const GAME_TURNS = 20

/** The time `turns` turns take, in games of up to 20 turns, in ns. */
async function roundOf (engine, messages, turns, onThisThread) {
  let total = 0n
  let played = 0
  while (played < turns) {
    const session = await engine.open('pirate', { difficulty: 'hard' })
    for (let i = 0; i < GAME_TURNS && played < turns; i++) {
      const start = process.hrtime.bigint()
      const move = messages[i % messages.length]
      const turn = onThisThread ? session.turnSync(move) : await session.turn(move)
      void turn.display.reply // what a caller reads
      total += process.hrtime.bigint() - start
      played++
      if (turn.finished) break
    }
  }
  return Number(total)
}

async function main () {
  const rounds = Number(process.argv[2] || 15)
  const turns = Number(process.argv[3] || 2000)
  const engine = await Engine.create(ROOT, { store: 'memory', model: 'standin' })
  const messages = fs.readFileSync(path.join(ROOT, 'tests/data/pirate_messages.txt'), 'utf8').split('\n').filter(Boolean)
  for (const [label, onThisThread] of [['turn', false], ['turnSync', true]]) {
    await roundOf(engine, messages, Math.floor(turns / 4), onThisThread) // warm up: the pack loaded, caches filled
    const perTurn = []
    for (let r = 0; r < rounds; r++) perTurn.push((await roundOf(engine, messages, turns, onThisThread)) / turns / 1000)
    perTurn.sort((a, b) => a - b)
    const median = perTurn[Math.floor(rounds / 2)]
    console.log(`node ${label}: pirate turn (stand-in model, in memory): median ${median.toFixed(1)} µs ` +
      `(min ${perTurn[0].toFixed(1)}, max ${perTurn[rounds - 1].toFixed(1)}; ${rounds} rounds of ${turns} turns)`)
  }
}

main()
