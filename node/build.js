'use strict'
// Builds the native part with napi-rs's CLI: in release, or in cargo's dev profile when
// RULEWEAVE_NODE_PROFILE=dev (CI reuses the workspace's compiled dependencies that way).
const { execFileSync } = require('node:child_process')
const path = require('node:path')

const args = ['build', '--platform', '--js', 'binding.js', '--dts', 'binding.d.ts']
if (process.env.RULEWEAVE_NODE_PROFILE !== 'dev') args.push('--release')
// Extra arguments go to napi's build (`--target TRIPLE`).
args.push(...process.argv.slice(2))
// Installed into an app by link (`npm install ./node` from a checkout), the package's own
// dependencies are not there yet when this runs: install them here first.
function napiCli () {
  try {
    return require.resolve('@napi-rs/cli/package.json', { paths: [__dirname] })
  } catch {
    const npm = process.platform === 'win32' ? 'npm.cmd' : 'npm'
    execFileSync(npm, ['install', '--no-save', '--no-audit', '--no-fund', '--ignore-scripts', '--omit=dev'], { cwd: __dirname, stdio: 'inherit' })
    return require.resolve('@napi-rs/cli/package.json', { paths: [__dirname] })
  }
}
const napi = napiCli()
const bin = path.join(path.dirname(napi), require(napi).bin.napi)
execFileSync(process.execPath, [bin, ...args], { cwd: __dirname, stdio: 'inherit' })
