'use strict'
// The type declarations (index.d.ts) held to the built package: a TypeScript program that uses
// the package compiles under `tsc --strict` and then runs against it, misuses the declarations
// must refuse are refused, and every name the declarations export is what the package exports.

const test = require('node:test')
const assert = require('node:assert/strict')
const { spawnSync } = require('node:child_process')
const fs = require('node:fs')
const os = require('node:os')
const path = require('node:path')
const rw = require('..')

const PACKAGE = path.resolve(__dirname, '..')
const ROOT = path.resolve(PACKAGE, '..')
const TSC = path.join(PACKAGE, 'node_modules', 'typescript', 'bin', 'tsc')

function tsc(file, outDir) {
  const args = [TSC, '--strict', '--target', 'es2022', '--module', 'commonjs', '--skipLibCheck', 'false']
  args.push(...(outDir ? ['--outDir', outDir, '--rootDir', PACKAGE] : ['--noEmit']), path.join(__dirname, 'types', file))
  return spawnSync(process.execPath, args, { encoding: 'utf8' })
}

test('a TypeScript program compiles under --strict and runs against the built package', async () => {
  const out = fs.mkdtempSync(path.join(os.tmpdir(), 'ruleweave-tsc-'))
  const compiled = tsc('usage.ts', out)
  assert.equal(compiled.status, 0, compiled.stdout + compiled.stderr)
  // The compiled program requires the package where the sources sit.
  const file = path.join(out, 'test', 'types', 'usage.js')
  fs.writeFileSync(file, fs.readFileSync(file, 'utf8').replace('require("../../index")', `require(${JSON.stringify(path.join(PACKAGE, 'index.js'))})`))
  const got = await require(file).main(ROOT)
  assert.ok(got.packs.includes('pirate'), JSON.stringify(got.packs))
  assert.equal(got.id, 'typed')
  assert.equal(got.turn, 1)
  assert.equal(got.reply, 'Arr, welcome aboard.')
  assert.deepEqual(got.asked.slice(0, 1), ['judge'])
  assert.equal(got.opening, 'question')
  assert.equal(got.sync, 1)
  assert.equal(got.turns, 1)
  assert.equal(got.finished, false)
  assert.deepEqual(got.refused, { kind: 'invalid_input', place: null, refusal: false })
  assert.equal(got.version, rw.version())
})

test('what the declarations must refuse, tsc refuses', () => {
  const compiled = tsc('misuse.ts')
  const codes = [...compiled.stdout.matchAll(/error (TS\d+)/g)].map((m) => m[1])
  assert.deepEqual(codes, ['TS2673', 'TS2322', 'TS2345'], compiled.stdout)
})

test('the declarations name what the package exports, and nothing else', () => {
  const dts = fs.readFileSync(path.join(PACKAGE, 'index.d.ts'), 'utf8')
  const declared = [...dts.matchAll(/^export declare (?:class|function) (\w+)/gm)].map((m) => m[1]).sort()
  const exported = Object.keys(rw).sort()
  assert.deepEqual(declared, exported)
  for (const name of exported) assert.equal(typeof rw[name], 'function', name)
  assert.throws(() => new rw.Engine(ROOT, { model: 'standin' }), (e) => e instanceof TypeError && e.message.includes('await Engine.create(root, options)'))
})
