'use strict'
// The conformance cases (tests/conformance/*.yaml) through the built Node package: the same
// replies, status lines and final state (its SHA-256 as canonical JSON) as the Rust engine.

const test = require('node:test')
const assert = require('node:assert/strict')
const crypto = require('node:crypto')
const fs = require('node:fs')
const path = require('node:path')
const yaml = require('js-yaml')
const { Engine } = require('..')

const ROOT = path.resolve(__dirname, '..', '..')
const DIR = path.join(ROOT, 'tests', 'conformance')
const CASES = fs.readdirSync(DIR).filter((f) => f.endsWith('.yaml')).sort()

/** Canonical JSON, as the Rust and Python runners write it: keys sorted, no blank space, a whole
 * number as an integer, any other number rounded to 9 decimals with trailing zeros dropped. */
function canonical(v) {
  if (v === null || typeof v === 'boolean' || typeof v === 'string') return JSON.stringify(v)
  if (typeof v === 'number') {
    if (Number.isInteger(v) && Math.abs(v) < 1e15) return String(v)
    return v.toFixed(9).replace(/0+$/, '').replace(/\.$/, '')
  }
  if (Array.isArray(v)) return '[' + v.map(canonical).join(',') + ']'
  const keys = Object.keys(v).sort()
  return '{' + keys.map((k) => JSON.stringify(k) + ':' + canonical(v[k])).join(',') + '}'
}

/** `v` without the keys named in `volatile`, at any depth. */
function without(v, volatile) {
  if (Array.isArray(v)) return v.map((x) => without(x, volatile))
  if (v && typeof v === 'object') {
    return Object.fromEntries(Object.entries(v).filter(([k]) => !volatile.includes(k)).map(([k, x]) => [k, without(x, volatile)]))
  }
  return v
}

test('canonical JSON is the same in every language', () => {
  const got = canonical({ b: [1, 2.0, 0.1, 1.0e-7, -3.25], a: 'x\n"y"', c: null })
  assert.equal(got, '{"a":"x\\n\\"y\\"","b":[1,2,0.1,0.0000001,-3.25],"c":null}')
})

test('there is a case of every pack', () => {
  for (const pack of ['debate', 'designer', 'interview', 'party', 'pirate']) {
    assert.ok(CASES.some((c) => c.startsWith(pack)), `${pack}: ${CASES}`)
  }
})

for (const file of CASES) {
  test(`a conformance case plays as on the Rust engine: ${file}`, async () => {
    const c = yaml.load(fs.readFileSync(path.join(DIR, file), 'utf8'))
    const engine = await Engine.create(ROOT, { model: 'standin' })
    const session = await engine.open(c.pack, c.options || {}, { id: c.id })
    const shown = []
    for (const move of c.inputs) {
      const turn = await session.turn(move)
      shown.push({ reply: turn.display.reply ?? null, status: turn.display.status ?? null })
    }
    const state = without(await session.state(), c.volatile || [])
    const digest = crypto.createHash('sha256').update(canonical(state), 'utf8').digest('hex')
    assert.deepEqual(shown, c.expect.turns)
    assert.equal(digest, c.expect.state_sha256)
  })
}
