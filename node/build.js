'use strict'
// Builds the native part with napi-rs's CLI: in release, or in cargo's dev profile when
// RULEWEAVE_NODE_PROFILE=dev (CI reuses the workspace's compiled dependencies that way).
const { execFileSync } = require('node:child_process')
const path = require('node:path')

const args = ['build', '--platform', '--js', 'binding.js', '--dts', 'binding.d.ts']
if (process.env.RULEWEAVE_NODE_PROFILE !== 'dev') args.push('--release')
// Extra arguments go to napi's build (`--target TRIPLE`).
args.push(...process.argv.slice(2))
const napi = require.resolve('@napi-rs/cli/package.json')
const bin = path.join(path.dirname(napi), require(napi).bin.napi)
execFileSync(process.execPath, [bin, ...args], { cwd: __dirname, stdio: 'inherit' })
