// What the declarations must refuse: each line is an error `tsc --strict` reports (its code in
// the comment), so a declaration loosened by mistake is caught.
import * as rw from '../../index'

export async function misuse(root: string) {
  new rw.Engine() // TS2673: the constructor is private; Engine.create makes one
  const engine = await rw.Engine.create(root, { model: 'gpt' }) // TS2322: a model is 'standin' or a function
  const session = await engine.open('pirate')
  session.turn(42) // TS2345: an input is an object of fields, or a line
}
