// The Node package as TypeScript code uses it, compiled with `tsc --strict` against index.d.ts
// and then run against the built package (test/types.test.js): a declaration that does not fit
// the code, or code that does not fit the declaration, fails one or the other.
import * as rw from '../../index'

export async function main(root: string): Promise<rw.Json> {
  const seen: rw.ModelRequest[] = []
  const model: rw.ModelFunction = async (request) => {
    seen.push(request)
    return request.profile === 'judge' ? '{"score": 7}' : 'Arr, welcome aboard.'
  }
  const engine: rw.Engine = await rw.Engine.create(root, { store: 'memory', model })
  const packs: string[] = engine.packs()
  const described = engine.describe('pirate')
  const session: rw.Session = await engine.open('pirate', { difficulty: 'easy' }, { id: 'typed' })
  const turn: rw.Turn = await session.turn('Ahoy, captain!')
  const display: rw.Display = turn.display
  const opening: rw.Display = await (await engine.open('pirate')).view()
  const standin = await rw.Engine.create(root, { model: 'standin' })
  const sync: rw.Turn = (await standin.open('pirate')).turnSync({ message: 'Ahoy!' })
  const report = await standin.simulate('pirate', { games: 2, players: [], seed: 's', jobs: 1 })
  let refused: rw.RuleweaveError | null = null
  try {
    await engine.open('pirate', { difficulty: 'impossible' })
  } catch (e) {
    if (e instanceof rw.InputError) refused = e
  }
  return {
    packs,
    described: Object.keys(described).length > 0,
    id: session.id,
    turn: turn.turn,
    reply: display.reply ?? null,
    notes: display.notes,
    opening: opening.opening?.kind ?? null,
    asked: seen.map((r) => r.profile),
    sync: sync.turn,
    finished: await session.finished(),
    turns: await session.turns(),
    report: typeof report === 'object',
    refused: refused ? { kind: refused.kind, place: refused.place, refusal: refused.refusal } : null,
    version: rw.version(),
  }
}
